#include "io/hf_config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/assert.h"
#include "core/error.h"
#include "core/strings.h"

// Defaults below follow the transformers config classes (huggingface/transformers, src/transformers/
// models/<name>/configuration_<name>.py, as of the 2025 main branch):
//   LlamaConfig       num_key_value_heads None -> num_attention_heads; head_dim None -> hidden/heads;
//                     max_position_embeddings 2048; attention_bias False; mlp_bias False;
//                     tie_word_embeddings False; hidden_act "silu".
//   MistralConfig     num_key_value_heads 8 (None -> heads); max_position_embeddings 4096*32;
//                     sliding_window 4096; tie_word_embeddings False.
//   MixtralConfig     num_key_value_heads 8; num_local_experts 8 (alias num_experts);
//                     num_experts_per_tok 2; max_position_embeddings 4096*32; sliding_window None.
//   Qwen2Config       num_key_value_heads 32; max_position_embeddings 32768; use_sliding_window False,
//                     sliding_window 4096, max_window_layers 28; q/k/v bias hard-wired in Qwen2Attention.
//   Qwen2MoeConfig    num_key_value_heads 16; num_experts 60; num_experts_per_tok 4;
//                     moe_intermediate_size 1408; shared_expert_intermediate_size 5632;
//                     decoder_sparse_step 1; mlp_only_layers []; qkv_bias True.
//   Qwen3Config       num_key_value_heads 32; head_dim 128; attention_bias False; q/k RMSNorm.
//   Qwen3MoeConfig    num_key_value_heads 4; num_experts 128; num_experts_per_tok 8;
//                     moe_intermediate_size 768; decoder_sparse_step 1; mlp_only_layers [];
//                     head_dim absent -> hidden/heads (Qwen3MoeAttention uses getattr).
//   DeepseekV3Config  q_lora_rank 1536; kv_lora_rank 512; qk_nope_head_dim 128; qk_rope_head_dim 64;
//                     v_head_dim 128; n_routed_experts 256; n_shared_experts 1; num_experts_per_tok 8;
//                     moe_intermediate_size 2048; first_k_dense_replace 3; max_position_embeddings
//                     4096; attention_bias False; tie_word_embeddings False. moe_layer_freq (default 1)
//                     comes from DeepSeek's own configuration_deepseek.py. The router always carries
//                     e_score_correction_bias (DeepseekV3TopkRouter).
//   GptOssConfig      num_hidden_layers 36; num_local_experts 128 (alias num_experts); vocab_size 201088;
//                     hidden_size 2880; intermediate_size 2880 (each expert); head_dim 64;
//                     num_attention_heads 64; num_key_value_heads 8 (None -> heads); sliding_window 128;
//                     tie_word_embeddings False; max_position_embeddings 131072; num_experts_per_tok 4
//                     (the original checkpoint's experts_per_token); attention_bias True (q/k/v and o);
//                     layer_types None -> "sliding_attention" on even layers, "full_attention" on odd.
//                     Always (modeling_gpt_oss.py): a router Linear with bias, experts whose gate_up and
//                     down projections carry biases, one attention sink per query head. The experts'
//                     clamped SwiGLU (swiglu_limit, alpha 1.702) costs as a gated SiLU here.
//   GPT2Config        n_positions 1024; n_inner None -> 4*n_embd; activation_function "gelu_new";
//                     resid/embd/attn_pdrop 0.1; tie_word_embeddings from PretrainedConfig: True.
//   OPTConfig         max_position_embeddings 2048; word_embed_proj_dim None -> d_model;
//                     do_layer_norm_before True; _remove_final_layer_norm False; enable_bias True;
//                     activation_function "relu"; dropout 0.1; attention_dropout 0.0;
//                     activation_dropout 0.0; tie_word_embeddings True (PretrainedConfig);
//                     learned positions with an offset of 2 (OPTLearnedPositionalEmbedding).
// Video diffusion transformers (diffusers config.json, dispatched on "_class_name"):
//   WanTransformer3DModel (diffusers/models/transformers/transformer_wan.py, register_to_config):
//                     patch_size (1, 2, 2); num_attention_heads 40; attention_head_dim 128;
//                     in_channels 16; out_channels 16 (None -> in_channels); text_dim 4096;
//                     freq_dim 256; ffn_dim 13824; num_layers 40; cross_attn_norm True;
//                     qk_norm "rms_norm_across_heads" (None: no q/k norm); image_dim None and
//                     added_kv_proj_dim None (set only by the image-to-video models, not modelled).
//   WanModel          the original Wan2.1 repository's config.json (Wan-Video/Wan2.1, wan/modules/
//                     model.py): dim, num_heads, ffn_dim, num_layers, in_dim, out_dim, freq_dim,
//                     text_dim 4096, text_len 512, patch_size, qk_norm (bool), cross_attn_norm (bool),
//                     model_type "t2v" ("i2v"/"flf2v" are image-conditioned: not modelled).
//   "orrery_video" (optional object): the video sample the model is trained on, {"frames", "height",
//   "width", "vae_stride": [t, s, s], "text_tokens"}; DitSpec's defaults (Wan2.1's 81 x 720 x 1280,
//   VAE 4 x 8 x 8, 512 text tokens) when absent.

namespace orrery::io {
namespace {

using nlohmann::json;
using model::Activation;
using model::AttentionKind;
using model::Family;
using model::MlpKind;
using model::ModelSpec;
using model::NormKind;
using model::PositionKind;

struct ArchEntry {
  const char* architecture;
  const char* model_type;
  Family family;
};

constexpr ArchEntry kArchs[] = {
    {"LlamaForCausalLM", "llama", Family::kLlama},
    {"MistralForCausalLM", "mistral", Family::kMistral},
    {"MixtralForCausalLM", "mixtral", Family::kMixtral},
    {"Qwen2ForCausalLM", "qwen2", Family::kQwen2},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Family::kQwen2Moe},
    {"Qwen3ForCausalLM", "qwen3", Family::kQwen3},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::kQwen3Moe},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::kDeepSeekV3},
    {"GptOssForCausalLM", "gpt_oss", Family::kGptOss},
    {"GPT2LMHeadModel", "gpt2", Family::kGpt2},
    {"OPTForCausalLM", "opt", Family::kOpt},
};

int64_t line_at_offset(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  int64_t line = 1;
  for (size_t i = 0; i < offset; ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

// The line of the first `"key"` followed by optional whitespace and ':'; 0 when not found.
int64_t line_of_key(std::string_view text, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  size_t pos = 0;
  while ((pos = text.find(quoted, pos)) != std::string_view::npos) {
    size_t after = pos + quoted.size();
    while (after < text.size() && std::isspace(static_cast<unsigned char>(text[after]))) ++after;
    if (after < text.size() && text[after] == ':') return line_at_offset(text, pos);
    pos += quoted.size();
  }
  return 0;
}

std::string describe(const json& v) {
  if (v.is_number_float()) {
    std::ostringstream out;
    out << "number " << v.get<double>();
    return out.str();
  }
  return v.type_name();
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 3, column 1: "
// prefix (the line is reported in the Where).
std::string parser_message(const std::string& what) {
  std::string msg = what;
  const size_t bracket = msg.find("] ");
  if (bracket != std::string::npos) msg = msg.substr(bracket + 2);
  const size_t colon = msg.find(": ");
  if (msg.rfind("parse error", 0) == 0 && colon != std::string::npos) msg = msg.substr(colon + 2);
  return msg;
}

// Typed, located access to the top-level keys of one config.json.
class Config {
 public:
  Config(const json& root, std::string_view text, std::string source)
      : root_(root), text_(text), source_(std::move(source)) {}

  void set_architecture(std::string arch) { arch_ = std::move(arch); }
  const std::string& architecture() const { return arch_; }
  const std::string& source() const { return source_; }

  bool present(const char* key) const { return root_.contains(key); }
  bool is_null(const char* key) const { return present(key) && root_.at(key).is_null(); }

  // The first of `keys` (a canonical name then its aliases) that is present; nullptr if none.
  const char* first_present(std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      if (present(k)) return k;
    }
    return nullptr;
  }

  // The first present of `keys`, else the canonical (first) one: the name to use in messages.
  const char* key_or(std::initializer_list<const char*> keys) const {
    const char* key = first_present(keys);
    return key ? key : *keys.begin();
  }

  int64_t required_int(std::initializer_list<const char*> keys) const {
    const char* key = first_present(keys);
    if (key == nullptr) {
      throw InputError(Where{source_, 0, ""}, "missing required key '" + std::string(*keys.begin()) + "' (" + arch_ + ")");
    }
    if (is_null(key)) fail(key, "required key '" + std::string(key) + "' is null (" + arch_ + ")");
    return to_int(key, root_.at(key));
  }

  int64_t required_positive(std::initializer_list<const char*> keys) const {
    const int64_t v = required_int(keys);
    check_positive(first_present(keys), v);
    return v;
  }

  // Absent or null: def.
  int64_t int_or(std::initializer_list<const char*> keys, int64_t def) const {
    const char* key = first_present(keys);
    if (key == nullptr || is_null(key)) return def;
    return to_int(key, root_.at(key));
  }

  // Absent: when_absent. Null: std::nullopt (transformers' None). Otherwise the integer.
  std::optional<int64_t> nullable_int(const char* key, std::optional<int64_t> when_absent) const {
    if (!present(key)) return when_absent;
    if (is_null(key)) return std::nullopt;
    return to_int(key, root_.at(key));
  }

  bool bool_or(const char* key, bool def) const {
    if (!present(key) || is_null(key)) return def;
    const json& v = root_.at(key);
    if (!v.is_boolean()) fail(key, "key '" + std::string(key) + "': expected a boolean, found " + describe(v));
    return v.get<bool>();
  }

  double number_or(const char* key, double def) const {
    if (!present(key) || is_null(key)) return def;
    const json& v = root_.at(key);
    if (!v.is_number()) fail(key, "key '" + std::string(key) + "': expected a number, found " + describe(v));
    return v.get<double>();
  }

  std::string string_or(const char* key, std::string def) const {
    if (!present(key) || is_null(key)) return def;
    const json& v = root_.at(key);
    if (!v.is_string()) fail(key, "key '" + std::string(key) + "': expected a string, found " + describe(v));
    return v.get<std::string>();
  }

  std::vector<int64_t> int_list(const char* key) const {
    std::vector<int64_t> out;
    if (!present(key) || is_null(key)) return out;
    const json& v = root_.at(key);
    if (!v.is_array()) fail(key, "key '" + std::string(key) + "': expected an array of integers, found " + describe(v));
    for (const json& e : v) out.push_back(to_int(key, e));
    return out;
  }

  void check_positive(const char* key, int64_t v) const {
    if (v <= 0) fail(key, "key '" + std::string(key) + "' must be positive, found " + std::to_string(v));
  }
  void check_non_negative(const char* key, int64_t v) const {
    if (v < 0) fail(key, "key '" + std::string(key) + "' must not be negative, found " + std::to_string(v));
  }

  [[noreturn]] void fail(const char* key, std::string message, std::string hint = {}) const {
    throw InputError(Where{source_, key ? line_of(key) : 0, ""}, std::move(message), std::move(hint));
  }

  int64_t line_of(const char* key) const { return line_of_key(text_, key); }
  const json& root() const { return root_; }

 private:
  int64_t to_int(const char* key, const json& v) const {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(key, "key '" + std::string(key) + "': integer out of range");
      }
      return static_cast<int64_t>(v.get<uint64_t>());
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      const double x = v.get<double>();
      if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e15) return static_cast<int64_t>(x);
    }
    fail(key, "key '" + std::string(key) + "': expected an integer, found " + describe(v));
  }

  const json& root_;
  std::string_view text_;
  std::string source_;
  std::string arch_;
};

Activation parse_activation(const Config& c, const char* key, const std::string& def) {
  static const std::vector<std::pair<std::string, Activation>> kNames = {
      {"silu", Activation::kSilu},          {"swish", Activation::kSilu},
      {"gelu", Activation::kGelu},          {"gelu_new", Activation::kGeluTanh},
      {"gelu_pytorch_tanh", Activation::kGeluTanh}, {"gelu_fast", Activation::kGeluTanh},
      {"relu", Activation::kRelu},
  };
  const std::string name = c.string_or(key, def);
  std::vector<std::string> names;
  for (const auto& [n, a] : kNames) {
    if (n == name) return a;
    names.push_back(n);
  }
  c.fail(key, "key '" + std::string(key) + "': unsupported activation '" + name + "'", suggest(name, names));
}

// head_dim: explicit when present and not null, else hidden / heads (which must divide).
int64_t head_dim_of(const Config& c, int64_t hidden, int64_t heads, std::optional<int64_t> when_absent) {
  const std::optional<int64_t> explicit_dim = c.nullable_int("head_dim", when_absent);
  if (explicit_dim.has_value()) {
    c.check_positive("head_dim", *explicit_dim);
    return *explicit_dim;
  }
  if (hidden % heads != 0) {
    const char* heads_key = c.key_or({"num_attention_heads", "n_head"});
    const char* hidden_key = c.key_or({"hidden_size", "n_embd", "d_model"});
    c.fail(heads_key, "key '" + std::string(heads_key) + "' (" + std::to_string(heads) + ") must divide '" +
                          std::string(hidden_key) + "' (" + std::to_string(hidden) + ")");
  }
  return hidden / heads;
}

// num_key_value_heads: absent -> when_absent (nullopt: = heads); null -> heads. Must divide heads.
int64_t kv_heads_of(const Config& c, int64_t heads, std::optional<int64_t> when_absent) {
  const int64_t kv = c.nullable_int("num_key_value_heads", when_absent).value_or(heads);
  c.check_positive("num_key_value_heads", kv);
  if (heads % kv != 0) {
    c.fail("num_key_value_heads", "key 'num_key_value_heads' (" + std::to_string(kv) +
                                      ") must divide 'num_attention_heads' (" + std::to_string(heads) + ")");
  }
  return kv;
}

// Qwen-style optional sliding window: only with use_sliding_window, on layers >= max_window_layers.
void qwen_sliding_window(const Config& c, ModelSpec& s) {
  if (!c.bool_or("use_sliding_window", false)) return;
  s.sliding_window = c.nullable_int("sliding_window", 4096).value_or(0);
  c.check_non_negative("sliding_window", s.sliding_window);
  s.sliding_window_first_layer = c.int_or({"max_window_layers"}, 28);
  c.check_non_negative("max_window_layers", s.sliding_window_first_layer);
}

// What the RoPE decoders (Llama, Mistral, the Qwens, DeepSeek-V3, gpt-oss) share: the required shape
// keys, RoPE, RMSNorm, a gated MLP of hidden_act (SiLU), untied embeddings by default, attention dropout.
ModelSpec rope_decoder(const Config& c, Family family) {
  ModelSpec s;
  s.family = family;
  s.hidden = c.required_positive({"hidden_size"});
  s.layers = c.required_positive({"num_hidden_layers"});
  s.heads = c.required_positive({"num_attention_heads"});
  s.ffn = c.required_positive({"intermediate_size"});
  s.vocab = c.required_positive({"vocab_size"});
  s.positions = PositionKind::kRope;
  s.norm = NormKind::kRmsNorm;
  s.mlp = MlpKind::kGated;
  s.activation = parse_activation(c, "hidden_act", "silu");
  s.tied_embeddings = c.bool_or("tie_word_embeddings", false);
  s.dropout.attention = c.number_or("attention_dropout", 0.0);
  return s;
}

// An MoE's experts per token against its expert count: both positive, top-k not above the count.
void check_top_k(const Config& c, const char* experts_key, const char* top_k_key, const model::MoeSpec& moe) {
  c.check_positive(experts_key, moe.num_experts);
  c.check_positive(top_k_key, moe.top_k);
  if (moe.top_k > moe.num_experts) {
    c.fail(top_k_key, "key '" + std::string(top_k_key) + "' (" + std::to_string(moe.top_k) +
                          ") exceeds the number of experts (" + std::to_string(moe.num_experts) + ")");
  }
}

// Llama, Mistral, Mixtral and the Qwen families: RoPE, RMSNorm, gated SiLU MLP, untied by default.
ModelSpec parse_llama_like(const Config& c, Family family) {
  ModelSpec s = rope_decoder(c, family);

  std::optional<int64_t> kv_default;       // None -> heads
  std::optional<int64_t> head_dim_default;  // None -> hidden / heads
  int64_t max_positions = 2048;
  switch (family) {
    case Family::kLlama:
      break;
    case Family::kMistral:
    case Family::kMixtral:
      kv_default = 8;
      max_positions = 4096 * 32;
      break;
    case Family::kQwen2:
      kv_default = 32;
      max_positions = 32768;
      break;
    case Family::kQwen2Moe:
      kv_default = 16;
      max_positions = 32768;
      break;
    case Family::kQwen3:
      kv_default = 32;
      head_dim_default = 128;
      max_positions = 32768;
      break;
    case Family::kQwen3Moe:
      kv_default = 4;
      max_positions = 32768;
      break;
    default:
      ORRERY_CHECK(false);
  }
  s.kv_heads = kv_heads_of(c, s.heads, kv_default);
  s.head_dim = head_dim_of(c, s.hidden, s.heads, head_dim_default);
  s.max_positions = c.int_or({"max_position_embeddings"}, max_positions);
  c.check_positive("max_position_embeddings", s.max_positions);

  switch (family) {
    case Family::kLlama: {
      const bool attention_bias = c.bool_or("attention_bias", false);
      s.qkv_bias = attention_bias;
      s.out_bias = attention_bias;
      s.mlp_bias = c.bool_or("mlp_bias", false);
      break;
    }
    case Family::kMistral:
      s.sliding_window = c.nullable_int("sliding_window", 4096).value_or(0);
      c.check_non_negative("sliding_window", s.sliding_window);
      break;
    case Family::kMixtral:
      s.sliding_window = c.nullable_int("sliding_window", std::nullopt).value_or(0);
      c.check_non_negative("sliding_window", s.sliding_window);
      // Mixtral's intermediate_size is the expert size; every layer is an MoE layer.
      s.moe.num_experts = c.int_or({"num_local_experts", "num_experts"}, 8);
      s.moe.top_k = c.int_or({"num_experts_per_tok"}, 2);
      s.moe.expert_ffn = s.ffn;
      break;
    case Family::kQwen2:
      s.qkv_bias = true;
      qwen_sliding_window(c, s);
      break;
    case Family::kQwen2Moe:
      s.qkv_bias = c.bool_or("qkv_bias", true);
      s.moe.num_experts = c.int_or({"num_experts"}, 60);
      s.moe.top_k = c.int_or({"num_experts_per_tok"}, 4);
      s.moe.expert_ffn = c.int_or({"moe_intermediate_size"}, 1408);
      s.moe.shared_expert_ffn = c.int_or({"shared_expert_intermediate_size"}, 5632);
      c.check_non_negative("shared_expert_intermediate_size", s.moe.shared_expert_ffn);
      s.moe.num_shared_experts = s.moe.shared_expert_ffn > 0 ? 1 : 0;
      s.moe.shared_expert_gate = s.moe.num_shared_experts > 0;
      s.moe.layer_freq = c.int_or({"decoder_sparse_step"}, 1);
      s.moe.layer_freq_offset = 1;
      s.moe.dense_layers = c.int_list("mlp_only_layers");
      qwen_sliding_window(c, s);
      break;
    case Family::kQwen3: {
      const bool attention_bias = c.bool_or("attention_bias", false);
      s.qkv_bias = attention_bias;
      s.out_bias = attention_bias;
      s.qk_norm = true;
      qwen_sliding_window(c, s);
      break;
    }
    case Family::kQwen3Moe: {
      const bool attention_bias = c.bool_or("attention_bias", false);
      s.qkv_bias = attention_bias;
      s.out_bias = attention_bias;
      s.qk_norm = true;
      s.moe.num_experts = c.int_or({"num_experts", "num_local_experts"}, 128);
      s.moe.top_k = c.int_or({"num_experts_per_tok"}, 8);
      s.moe.expert_ffn = c.int_or({"moe_intermediate_size"}, 768);
      s.moe.layer_freq = c.int_or({"decoder_sparse_step"}, 1);
      s.moe.layer_freq_offset = 1;
      s.moe.dense_layers = c.int_list("mlp_only_layers");
      qwen_sliding_window(c, s);
      break;
    }
    default:
      ORRERY_CHECK(false);
  }
  if (family == Family::kMixtral || family == Family::kQwen2Moe || family == Family::kQwen3Moe) {
    check_top_k(c,
                family == Family::kMixtral ? c.key_or({"num_local_experts", "num_experts"})
                                           : c.key_or({"num_experts", "num_local_experts"}),
                "num_experts_per_tok", s.moe);
    c.check_positive(family == Family::kMixtral ? "intermediate_size" : "moe_intermediate_size", s.moe.expert_ffn);
    c.check_positive("decoder_sparse_step", s.moe.layer_freq);
  }
  return s;
}

ModelSpec parse_deepseek_v3(const Config& c) {
  ModelSpec s = rope_decoder(c, Family::kDeepSeekV3);
  s.kv_heads = s.heads;  // MLA: every head has its own (decompressed) key and value
  s.max_positions = c.int_or({"max_position_embeddings"}, 4096);
  c.check_positive("max_position_embeddings", s.max_positions);
  const bool attention_bias = c.bool_or("attention_bias", false);
  s.qkv_bias = attention_bias;
  s.out_bias = attention_bias;

  s.attention = AttentionKind::kMla;
  s.mla.q_lora_rank = c.nullable_int("q_lora_rank", 1536).value_or(0);
  c.check_non_negative("q_lora_rank", s.mla.q_lora_rank);
  s.mla.kv_lora_rank = c.int_or({"kv_lora_rank"}, 512);
  c.check_positive("kv_lora_rank", s.mla.kv_lora_rank);
  s.mla.qk_nope_head_dim = c.int_or({"qk_nope_head_dim"}, 128);
  c.check_non_negative("qk_nope_head_dim", s.mla.qk_nope_head_dim);
  s.mla.qk_rope_head_dim = c.int_or({"qk_rope_head_dim"}, 64);
  c.check_positive("qk_rope_head_dim", s.mla.qk_rope_head_dim);
  s.mla.v_head_dim = c.int_or({"v_head_dim"}, 128);
  c.check_positive("v_head_dim", s.mla.v_head_dim);
  s.head_dim = s.mla.qk_head_dim();

  // n_routed_experts or num_experts_per_tok None: a dense model.
  const std::optional<int64_t> experts = c.nullable_int("n_routed_experts", 256);
  const std::optional<int64_t> top_k = c.nullable_int("num_experts_per_tok", 8);
  if (experts.has_value() && top_k.has_value()) {
    s.moe.num_experts = *experts;
    c.check_positive("n_routed_experts", s.moe.num_experts);
    s.moe.top_k = *top_k;
    c.check_positive("num_experts_per_tok", s.moe.top_k);
    if (s.moe.top_k > s.moe.num_experts) {
      c.fail("num_experts_per_tok", "key 'num_experts_per_tok' (" + std::to_string(s.moe.top_k) +
                                        ") exceeds 'n_routed_experts' (" + std::to_string(s.moe.num_experts) + ")");
    }
    s.moe.expert_ffn = c.int_or({"moe_intermediate_size"}, 2048);
    c.check_positive("moe_intermediate_size", s.moe.expert_ffn);
    s.moe.num_shared_experts = c.nullable_int("n_shared_experts", 1).value_or(0);
    c.check_non_negative("n_shared_experts", s.moe.num_shared_experts);
    s.moe.shared_expert_ffn = s.moe.expert_ffn;
    s.moe.router_bias = true;
    s.moe.first_dense_layers = c.int_or({"first_k_dense_replace"}, 3);
    c.check_non_negative("first_k_dense_replace", s.moe.first_dense_layers);
    s.moe.layer_freq = c.int_or({"moe_layer_freq"}, 1);
    c.check_positive("moe_layer_freq", s.moe.layer_freq);
  }
  return s;
}

// transformers' layer_types: one "sliding_attention" or "full_attention" per layer; absent or null ->
// `def` (an empty vector keeps the spec's own rule).
std::vector<bool> parse_layer_types(const Config& c, int64_t layers, std::vector<bool> def) {
  static const char* const kKey = "layer_types";
  if (!c.present(kKey) || c.is_null(kKey)) return def;
  const json& v = c.root().at(kKey);
  if (!v.is_array()) c.fail(kKey, "key 'layer_types': expected an array of strings, found " + describe(v));
  if (std::ssize(v) != layers) {
    c.fail(kKey, "key 'layer_types': " + std::to_string(v.size()) + " entries, expected one per layer (" +
                     std::to_string(layers) + ", num_hidden_layers)");
  }
  const std::vector<std::string> kinds = {"sliding_attention", "full_attention"};
  std::vector<bool> out;
  out.reserve(v.size());
  for (const json& e : v) {
    if (!e.is_string()) c.fail(kKey, "key 'layer_types': expected strings, found " + describe(e) + " in it");
    const std::string kind = e.get<std::string>();
    if (kind != kinds[0] && kind != kinds[1]) {
      c.fail(kKey, "key 'layer_types': unsupported layer type '" + kind + "'", suggest(kind, kinds));
    }
    out.push_back(kind == kinds[0]);
  }
  return out;
}

// OpenAI gpt-oss (GptOssConfig, header): GQA with q/k/v/o biases and attention sinks, windowed and full
// layers alternating, every layer an MoE of biased SwiGLU experts behind a biased router.
ModelSpec parse_gpt_oss(const Config& c) {
  ModelSpec s = rope_decoder(c, Family::kGptOss);
  s.kv_heads = kv_heads_of(c, s.heads, 8);
  s.head_dim = head_dim_of(c, s.hidden, s.heads, 64);
  s.max_positions = c.int_or({"max_position_embeddings"}, 131072);
  c.check_positive("max_position_embeddings", s.max_positions);
  const bool attention_bias = c.bool_or("attention_bias", true);
  s.qkv_bias = attention_bias;
  s.out_bias = attention_bias;
  s.attention_sinks = true;
  s.sliding_window = c.nullable_int("sliding_window", 128).value_or(0);
  c.check_non_negative("sliding_window", s.sliding_window);
  std::vector<bool> alternate(static_cast<size_t>(s.layers));
  for (size_t l = 0; l < alternate.size(); ++l) alternate[l] = l % 2 == 0;
  s.sliding_layers = parse_layer_types(c, s.layers, std::move(alternate));

  s.moe.num_experts = c.int_or({"num_local_experts", "num_experts"}, 128);
  s.moe.top_k = c.int_or({"num_experts_per_tok", "experts_per_token"}, 4);
  check_top_k(c, c.key_or({"num_local_experts", "num_experts"}), c.key_or({"num_experts_per_tok", "experts_per_token"}),
              s.moe);
  s.moe.expert_ffn = s.ffn;
  s.moe.router_bias = true;
  s.moe.expert_bias = true;
  return s;
}

// GPT-2 (and GPT-3 shipped as a GPT-2-style config): learned positions, LayerNorm, plain MLP, biases.
ModelSpec parse_gpt2(const Config& c) {
  ModelSpec s;
  s.family = Family::kGpt2;
  s.hidden = c.required_positive({"n_embd", "hidden_size"});
  s.layers = c.required_positive({"n_layer", "num_hidden_layers"});
  s.heads = c.required_positive({"n_head", "num_attention_heads"});
  s.vocab = c.required_positive({"vocab_size"});
  s.kv_heads = s.heads;
  s.head_dim = head_dim_of(c, s.hidden, s.heads, std::nullopt);
  s.ffn = c.nullable_int("n_inner", std::nullopt).value_or(4 * s.hidden);
  c.check_positive("n_inner", s.ffn);
  s.max_positions = c.int_or({"n_positions", "max_position_embeddings"}, 1024);
  c.check_positive(c.key_or({"n_positions", "max_position_embeddings"}), s.max_positions);
  s.positions = PositionKind::kLearned;
  s.norm = NormKind::kLayerNorm;
  s.mlp = MlpKind::kPlain;
  s.activation = parse_activation(c, "activation_function", "gelu_new");
  s.qkv_bias = s.out_bias = s.mlp_bias = true;
  s.tied_embeddings = c.bool_or("tie_word_embeddings", true);
  s.dropout.hidden = c.number_or("resid_pdrop", 0.1);
  s.dropout.embedding = c.number_or("embd_pdrop", 0.1);
  s.dropout.attention = c.number_or("attn_pdrop", 0.1);
  return s;
}

ModelSpec parse_opt(const Config& c) {
  ModelSpec s;
  s.family = Family::kOpt;
  s.hidden = c.required_positive({"hidden_size", "d_model"});
  s.layers = c.required_positive({"num_hidden_layers"});
  s.heads = c.required_positive({"num_attention_heads"});
  s.ffn = c.required_positive({"ffn_dim"});
  s.vocab = c.required_positive({"vocab_size"});
  s.kv_heads = s.heads;
  s.head_dim = head_dim_of(c, s.hidden, s.heads, std::nullopt);
  s.max_positions = c.int_or({"max_position_embeddings"}, 2048);
  c.check_positive("max_position_embeddings", s.max_positions);
  s.positions = PositionKind::kLearned;
  s.position_offset = 2;
  const int64_t proj = c.nullable_int("word_embed_proj_dim", std::nullopt).value_or(s.hidden);
  c.check_positive("word_embed_proj_dim", proj);
  s.word_embed_proj_dim = proj == s.hidden ? 0 : proj;
  s.norm = NormKind::kLayerNorm;
  if (!c.bool_or("layer_norm_elementwise_affine", true)) {
    c.fail("layer_norm_elementwise_affine", "key 'layer_norm_elementwise_affine': false is not supported");
  }
  s.final_norm = c.bool_or("do_layer_norm_before", true) && !c.bool_or("_remove_final_layer_norm", false);
  s.mlp = MlpKind::kPlain;
  s.activation = parse_activation(c, "activation_function", "relu");
  const bool bias = c.bool_or("enable_bias", true);
  s.qkv_bias = s.out_bias = s.mlp_bias = bias;
  s.tied_embeddings = c.bool_or("tie_word_embeddings", true);
  s.dropout.hidden = c.number_or("dropout", 0.1);
  s.dropout.embedding = s.dropout.hidden;
  s.dropout.attention = c.number_or("attention_dropout", 0.0);
  s.dropout.activation = c.number_or("activation_dropout", 0.0);
  return s;
}

// Diffusers model classes, named by "_class_name" (diffusers configs have no "architectures").
constexpr const char* kDitClasses[] = {"WanTransformer3DModel", "WanModel"};

// DiT patch_size: an array of three positive integers (t, h, w).
void read_patch(const Config& c, model::DitSpec& v) {
  if (!c.present("patch_size") || c.is_null("patch_size")) return;
  const std::vector<int64_t> patch = c.int_list("patch_size");
  if (patch.size() != 3) {
    c.fail("patch_size", "key 'patch_size': expected 3 integers [t, h, w], found " + std::to_string(patch.size()));
  }
  for (int64_t x : patch) c.check_positive("patch_size", x);
  v.patch_t = patch[0];
  v.patch_h = patch[1];
  v.patch_w = patch[2];
}

void read_orrery_video(const Config& c, model::DitSpec& v) {
  const char* key = "orrery_video";
  if (!c.present(key) || c.is_null(key)) return;
  const json& o = c.root().at(key);
  if (!o.is_object()) c.fail(key, "key 'orrery_video': expected an object {\"frames\": ..., ...}, found " + describe(o));
  auto field = [&](const char* name, int64_t& target) {
    if (!o.contains(name)) return;
    const json& x = o.at(name);
    if (!x.is_number_integer() || x.get<int64_t>() <= 0) {
      c.fail(key, "key 'orrery_video." + std::string(name) + "': expected a positive integer, found " + describe(x));
    }
    target = x.get<int64_t>();
  };
  static const std::vector<std::string> kKnown = {"frames", "height", "width", "vae_stride", "text_tokens", "note"};
  for (const auto& [name, value] : o.items()) {
    if (std::find(kKnown.begin(), kKnown.end(), name) == kKnown.end()) {
      c.fail(key, "key 'orrery_video': unknown field '" + name + "'", suggest(name, kKnown));
    }
  }
  field("frames", v.frames);
  field("height", v.height);
  field("width", v.width);
  field("text_tokens", v.text_tokens);
  if (o.contains("vae_stride")) {
    const json& st = o.at("vae_stride");
    const bool ok = st.is_array() && st.size() == 3 &&
                    std::all_of(st.begin(), st.end(), [](const json& x) { return x.is_number_integer() && x.get<int64_t>() > 0; });
    if (!ok || st.at(1) != st.at(2)) {
      c.fail(key, "key 'orrery_video.vae_stride': expected [t, s, s], three positive integers with equal height and "
                  "width strides, found " + st.dump());
    }
    v.vae_t = st.at(0).get<int64_t>();
    v.vae_s = st.at(1).get<int64_t>();
  }
}

// diffusers WanTransformer3DModel, or the Wan2.1 repository's WanModel config (see the defaults above).
ModelSpec parse_wan(const Config& c, bool diffusers) {
  ModelSpec s;
  s.family = Family::kDit;
  model::DitSpec& v = s.dit;
  if (diffusers) {
    s.heads = c.required_positive({"num_attention_heads"});
    s.head_dim = c.int_or({"attention_head_dim"}, 128);
    c.check_positive("attention_head_dim", s.head_dim);
    s.hidden = s.heads * s.head_dim;
    s.layers = c.int_or({"num_layers"}, 40);
    c.check_positive("num_layers", s.layers);
    s.ffn = c.required_positive({"ffn_dim"});
    v.in_channels = c.int_or({"in_channels"}, 16);
    c.check_positive("in_channels", v.in_channels);
    v.out_channels = c.nullable_int("out_channels", 16).value_or(v.in_channels);
    c.check_positive("out_channels", v.out_channels);
    const std::string qk = c.string_or("qk_norm", c.is_null("qk_norm") ? "" : "rms_norm_across_heads");
    if (!qk.empty() && qk != "rms_norm_across_heads") {
      c.fail("qk_norm", "key 'qk_norm': unsupported '" + qk + "'", suggest(qk, {"rms_norm_across_heads"}));
    }
    s.qk_norm = !qk.empty();
    for (const char* key : {"image_dim", "added_kv_proj_dim"}) {
      if (c.present(key) && !c.is_null(key)) {
        c.fail(key, "key '" + std::string(key) + "': image conditioning (Wan image-to-video) is not modelled; "
                    "expected null");
      }
    }
  } else {
    const std::string type = c.string_or("model_type", "t2v");
    if (type != "t2v" && type != "t2i") {
      c.fail("model_type", "model_type '" + type + "': only the text-conditioned Wan models (t2v) are modelled",
             suggest(type, {"t2v"}));
    }
    s.hidden = c.required_positive({"dim"});
    s.heads = c.required_positive({"num_heads"});
    if (s.hidden % s.heads != 0) {
      c.fail("num_heads", "key 'num_heads' (" + std::to_string(s.heads) + ") must divide 'dim' (" +
                              std::to_string(s.hidden) + ")");
    }
    s.head_dim = s.hidden / s.heads;
    s.layers = c.required_positive({"num_layers"});
    s.ffn = c.required_positive({"ffn_dim"});
    v.in_channels = c.int_or({"in_dim"}, 16);
    c.check_positive("in_dim", v.in_channels);
    v.out_channels = c.int_or({"out_dim"}, 16);
    c.check_positive("out_dim", v.out_channels);
    v.text_tokens = c.int_or({"text_len"}, 512);
    c.check_positive("text_len", v.text_tokens);
    s.qk_norm = c.bool_or("qk_norm", true);
  }
  s.kv_heads = s.heads;
  v.text_dim = c.int_or({"text_dim"}, 4096);
  c.check_positive("text_dim", v.text_dim);
  v.freq_dim = c.int_or({"freq_dim"}, 256);
  c.check_positive("freq_dim", v.freq_dim);
  v.cross_attn_norm = c.bool_or("cross_attn_norm", true);
  read_patch(c, v);
  read_orrery_video(c, v);
  s.vocab = 0;
  s.positions = PositionKind::kRope;
  s.norm = NormKind::kLayerNorm;
  s.mlp = MlpKind::kPlain;
  s.activation = Activation::kGeluTanh;
  s.qkv_bias = s.out_bias = s.mlp_bias = true;
  const model::FieldError e = model::video_error(v);
  if (!e.field.empty()) c.fail(c.present("orrery_video") ? "orrery_video" : "patch_size", e.message);
  return s;
}

const ArchEntry& dispatch(const Config& c) {
  std::string arch;
  if (c.present("architectures") && !c.is_null("architectures")) {
    const json& a = c.root().at("architectures");
    if (!a.is_array()) {
      c.fail("architectures", "key 'architectures': expected an array of strings, found " + describe(a));
    }
    if (!a.empty()) {
      if (!a.at(0).is_string()) {
        c.fail("architectures", "key 'architectures': expected an array of strings, found " + describe(a.at(0)) +
                                    " in it");
      }
      arch = a.at(0).get<std::string>();
    }
  }
  const std::string model_type = c.string_or("model_type", "");
  for (const ArchEntry& e : kArchs) {
    if (!arch.empty() && arch == e.architecture) return e;
  }
  for (const ArchEntry& e : kArchs) {
    if (!model_type.empty() && model_type == e.model_type) return e;
  }
  if (!arch.empty()) {
    c.fail("architectures", "unsupported architecture '" + arch + "'", suggest(arch, supported_hf_architectures()));
  }
  std::vector<std::string> types;
  for (const ArchEntry& e : kArchs) types.emplace_back(e.model_type);
  if (!model_type.empty()) {
    c.fail("model_type", "unsupported model_type '" + model_type + "'", suggest(model_type, types));
  }
  c.fail(nullptr, "missing 'architectures' and 'model_type': cannot tell the architecture",
         suggest("", supported_hf_architectures()));
}

std::string spec_name(const Config& c, const std::string& source_name) {
  std::string stem = source_name;
  const size_t slash = stem.find_last_of("/\\");
  if (slash != std::string::npos) stem = stem.substr(slash + 1);
  const size_t dot = stem.rfind(".json");
  if (dot != std::string::npos && dot + 5 == stem.size()) stem = stem.substr(0, dot);
  if (stem == "config") {
    const std::string hub_name = c.string_or("_name_or_path", "");
    if (!hub_name.empty()) return hub_name;
  }
  return stem;
}

model::Provenance parse_provenance(const Config& c) {
  model::Provenance p;
  p.source = c.string_or("orrery_source", "");
  if (c.present("orrery_published_params") && !c.is_null("orrery_published_params")) {
    const json& v = c.root().at("orrery_published_params");
    if (!v.is_object()) {
      c.fail("orrery_published_params",
             "key 'orrery_published_params': expected an object {\"total\": ..., \"active\": ...}, found " +
                 describe(v));
    }
    for (const auto& [field, target] : {std::pair{"total", &p.published_total_params},
                                        std::pair{"active", &p.published_active_params}}) {
      if (!v.contains(field) || v.at(field).is_null()) continue;
      if (!v.at(field).is_number()) {
        c.fail("orrery_published_params", "key 'orrery_published_params." + std::string(field) +
                                              "': expected a number, found " + describe(v.at(field)));
      }
      *target = v.at(field).get<double>();
    }
    if (v.contains("active_convention") && !v.at("active_convention").is_null()) {
      const json& conv = v.at("active_convention");
      const std::vector<std::string> kinds = {"including_input_embedding", "excluding_input_embedding"};
      const std::string name = conv.is_string() ? conv.get<std::string>() : std::string();
      if (name != kinds[0] && name != kinds[1]) {
        c.fail("orrery_published_params",
               "key 'orrery_published_params.active_convention': expected \"including_input_embedding\" or "
               "\"excluding_input_embedding\", found " + (conv.is_string() ? "'" + name + "'" : describe(conv)),
               suggest(name, kinds));
      }
      p.published_active_excludes_input_embedding = name == kinds[1];
    }
  }
  return p;
}

}  // namespace

const std::vector<std::string>& supported_hf_architectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ArchEntry& e : kArchs) out.emplace_back(e.architecture);
    for (const char* name : kDitClasses) out.emplace_back(name);
    return out;
  }();
  return names;
}

model::ModelSpec parse_hf_config(std::string_view text, const std::string& source_name) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    const size_t at = e.byte > 0 ? e.byte - 1 : 0;
    throw InputError(Where{source_name, line_at_offset(text, at), ""}, "malformed JSON: " + parser_message(e.what()));
  }
  if (!root.is_object()) {
    throw InputError(Where{source_name, 1, ""},
                     std::string("expected a JSON object at the top level, found ") + root.type_name());
  }
  Config c(root, text, source_name);
  ModelSpec s;
  const std::string dit_class =
      c.present("architectures") ? std::string() : c.string_or("_class_name", "");
  if (!dit_class.empty()) {
    if (dit_class != kDitClasses[0] && dit_class != kDitClasses[1]) {
      c.fail("_class_name", "unsupported diffusers model class '" + dit_class + "'",
             suggest(dit_class, supported_hf_architectures()));
    }
    c.set_architecture(dit_class);
    s = parse_wan(c, dit_class == kDitClasses[0]);
  } else {
    const ArchEntry& entry = dispatch(c);
    c.set_architecture(entry.architecture);
    switch (entry.family) {
      case Family::kDeepSeekV3: s = parse_deepseek_v3(c); break;
      case Family::kGptOss: s = parse_gpt_oss(c); break;
      case Family::kGpt2: s = parse_gpt2(c); break;
      case Family::kOpt: s = parse_opt(c); break;
      default: s = parse_llama_like(c, entry.family); break;
    }
  }
  s.name = spec_name(c, source_name);
  s.provenance = parse_provenance(c);
  s.validate(Where{source_name, 0, ""});
  return s;
}

model::ModelSpec read_hf_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Where{path, 0, ""}, std::string("cannot open file: ") + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(Where{path, 0, ""}, "cannot read file");
  return parse_hf_config(buffer.str(), path);
}

}  // namespace orrery::io
