// Reader for Hugging Face transformers config.json files -> model::ModelSpec.
//
// Model card
//   Dispatches on architectures[0], falling back to model_type (as transformers' AutoConfig does):
//   LlamaForCausalLM (llama), MistralForCausalLM (mistral), MixtralForCausalLM (mixtral),
//   Qwen2ForCausalLM (qwen2), Qwen2MoeForCausalLM (qwen2_moe), Qwen3ForCausalLM (qwen3),
//   Qwen3MoeForCausalLM (qwen3_moe), DeepseekV3ForCausalLM (deepseek_v3), GPT2LMHeadModel (gpt2),
//   OPTForCausalLM (opt).
//   Diffusers configs (no "architectures") dispatch on "_class_name": WanTransformer3DModel (a Wan2.1
//   video diffusion transformer, Family::kDit) and WanModel (the same model as the Wan2.1 repository
//   names its keys); an optional "orrery_video" object sets the video sample (frames, height, width,
//   vae_stride, text_tokens).
//   Required keys: the shape keys (hidden size, layers, heads, vocabulary, intermediate size).
//   transformers would silently fill them with its reference model's values, but a config.json
//   without them is truncated or not a model config, so orrery rejects it. Every other key takes
//   the default of the transformers config class for that architecture when absent (cited in
//   hf_config.cc); an explicit null means what it means to transformers (e.g. sliding_window null =
//   no window, q_lora_rank null = no query compression).
//   Two extra keys are read when present: "orrery_source" (string) and "orrery_published_params"
//   ({"total": number, "active": number}), stored in ModelSpec::provenance.
//   Not read: RoPE scaling, norm epsilons, token ids, quantization (they change no shape); DeepSeek's
//   MTP module (num_nextn_predict_layers) is not counted.
//
// Errors (InputError, what() = "file[:line]: message[; hint]"):
//   malformed JSON                 "config.json:3: malformed JSON: <parser message>"
//   missing required key           "config.json: missing required key 'hidden_size' (LlamaForCausalLM)"
//   wrong type                     "config.json:5: key 'hidden_size': expected an integer, found string"
//   unknown architecture           "config.json:2: unsupported architecture 'X'; did you mean 'Y'?"
//   zero / negative size           "config.json:5: key 'hidden_size' must be positive, found 0"
//   heads not dividing hidden size "config.json:7: key 'num_attention_heads' (7) must divide 'hidden_size' (4096)"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/model_spec.h"

namespace orrery::io {

// Reads and parses the file. The spec's name is the file's stem ("llama3-8b" for
// ".../llama3-8b.json"; "_name_or_path" instead when the file is called config.json).
// Throws InputError when the file cannot be read or its content is invalid.
model::ModelSpec read_hf_config(const std::string& path);

// Parses config.json text. source_name is used in error messages and to name the spec.
// Throws InputError on invalid content. The returned spec has passed ModelSpec::validate().
model::ModelSpec parse_hf_config(std::string_view text, const std::string& source_name);

// The architectures[0] names this reader accepts, in a fixed order.
const std::vector<std::string>& supported_hf_architectures();

}  // namespace orrery::io
