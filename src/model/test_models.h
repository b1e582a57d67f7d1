// Model specs built by hand from published config.json hyperparameters, shared by the model tests
// (independent of the shipped catalog files, which the tests also check).
#pragma once

#include "model/model_spec.h"

namespace orrery::model::testing {

// Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1 config.json): h 4096, 32 layers, 32 heads, 8 kv heads,
// 8 experts of ffn 14336, top-2, vocab 32000, untied.
inline ModelSpec mixtral_8x7b() {
  ModelSpec s = ModelSpec::llama(GenericArch{32, 4096, 32, 8, 14336, 32000, 32768}, "mixtral-8x7b");
  s.family = Family::kMixtral;
  s.moe.num_experts = 8;
  s.moe.top_k = 2;
  s.moe.expert_ffn = 14336;
  s.validate();
  return s;
}

// gpt-oss-120b (openai/gpt-oss-120b config.json, transformers' modeling_gpt_oss.py): h 2880, 36 layers
// alternating a 128-token window (even layers) and full attention (odd), 64 query heads of 64 and 8 kv
// heads, q/k/v/o biases, one sink per head; every layer an MoE of 128 biased SwiGLU experts of 2880,
// top-4, behind a biased router; vocab 201088, untied. `experts` = 32 and `layers` = 24: gpt-oss-20b.
inline ModelSpec gpt_oss(int64_t layers = 36, int64_t experts = 128) {
  ModelSpec s = ModelSpec::llama(GenericArch{layers, 2880, 64, 8, 2880, 201088, 131072}, "gpt-oss");
  s.family = Family::kGptOss;
  s.head_dim = 64;
  s.qkv_bias = true;
  s.out_bias = true;
  s.attention_sinks = true;
  s.sliding_window = 128;
  s.sliding_layers.resize(static_cast<size_t>(layers));
  for (size_t l = 0; l < s.sliding_layers.size(); ++l) s.sliding_layers[l] = l % 2 == 0;
  s.moe.num_experts = experts;
  s.moe.top_k = 4;
  s.moe.expert_ffn = 2880;
  s.moe.router_bias = true;
  s.moe.expert_bias = true;
  s.validate();
  return s;
}

}  // namespace orrery::model::testing
