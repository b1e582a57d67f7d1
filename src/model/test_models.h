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

}  // namespace orrery::model::testing
