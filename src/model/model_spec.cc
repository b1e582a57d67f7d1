#include "model/model_spec.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>

#include "core/assert.h"

namespace orrery::model {

std::string_view to_string(Family f) {
  switch (f) {
    case Family::kGpt: return "gpt";
    case Family::kLlama: return "llama";
    case Family::kMistral: return "mistral";
    case Family::kMixtral: return "mixtral";
    case Family::kQwen2: return "qwen2";
    case Family::kQwen2Moe: return "qwen2_moe";
    case Family::kQwen3: return "qwen3";
    case Family::kQwen3Moe: return "qwen3_moe";
    case Family::kDeepSeekV3: return "deepseek_v3";
    case Family::kGptOss: return "gpt_oss";
    case Family::kGpt2: return "gpt2";
    case Family::kOpt: return "opt";
    case Family::kDit: return "dit";
  }
  return "?";
}

std::string_view to_string(NormKind k) { return k == NormKind::kRmsNorm ? "rmsnorm" : "layernorm"; }
std::string_view to_string(MlpKind k) { return k == MlpKind::kGated ? "gated" : "plain"; }
std::string_view to_string(AttentionKind k) { return k == AttentionKind::kMha ? "mha" : "mla"; }
std::string_view to_string(PositionKind k) { return k == PositionKind::kRope ? "rope" : "learned"; }
std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::kSilu: return "silu";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kRelu: return "relu";
  }
  return "?";
}

namespace {

void check_generic(const GenericArch& a, const char* arch_name) {
  const Where where{std::string("<") + arch_name + " hyperparameters>", 0, ""};
  auto positive = [&](const char* key, int64_t v) {
    if (v <= 0) {
      throw InputError(where.with_key(key), std::string(key) + " must be positive, got " + std::to_string(v));
    }
  };
  positive("layers", a.layers);
  positive("hidden", a.hidden);
  positive("heads", a.heads);
  positive("kv_heads", a.kv_heads);
  positive("ffn", a.ffn);
  positive("vocab", a.vocab);
  positive("seq", a.seq);
  if (a.hidden % a.heads != 0) {
    throw InputError(where.with_key("heads"), "heads (" + std::to_string(a.heads) + ") must divide hidden (" +
                                                  std::to_string(a.hidden) + ")");
  }
}

ModelSpec generic_common(const GenericArch& a, std::string name) {
  ModelSpec s;
  s.name = std::move(name);
  s.hidden = a.hidden;
  s.layers = a.layers;
  s.heads = a.heads;
  s.kv_heads = a.kv_heads;
  s.head_dim = a.hidden / a.heads;
  s.ffn = a.ffn;
  s.vocab = a.vocab;
  s.max_positions = a.seq;
  return s;
}

}  // namespace

// More video tokens than any attention kernel takes in one sequence (2^31): bad input, not a model.
constexpr double kMaxVideoTokens = 2147483648.0;

FieldError video_error(const DitSpec& v) {
  auto str = [](int64_t x) { return std::to_string(x); };
  for (const auto& [field, value] :
       {std::pair<const char*, int64_t>{"frames", v.frames}, {"height", v.height}, {"width", v.width},
        {"vae_t", v.vae_t}, {"vae_s", v.vae_s}, {"patch_t", v.patch_t}, {"patch_h", v.patch_h},
        {"patch_w", v.patch_w}, {"in_channels", v.in_channels}, {"out_channels", v.out_channels},
        {"text_dim", v.text_dim}, {"text_tokens", v.text_tokens}, {"freq_dim", v.freq_dim}}) {
    if (value <= 0) return {field, std::string(field) + " must be positive, got " + str(value)};
  }
  // A causal 3D VAE encodes the first frame alone and every vae_t frames after it into one latent frame.
  if ((v.frames - 1) % v.vae_t != 0) {
    return {"frames", "frames - 1 = " + str(v.frames - 1) + " must be a multiple of the VAE's temporal compression " +
                          str(v.vae_t) + " (e.g. " + str((v.frames - 1) / v.vae_t * v.vae_t + 1) + " frames)"};
  }
  if (v.latent_frames() % v.patch_t != 0) {
    return {"patch_t", "patch_t = " + str(v.patch_t) + " does not divide the " + str(v.latent_frames()) +
                           " latent frames ((frames - 1) / " + str(v.vae_t) + " + 1)"};
  }
  for (const auto& [field, pixels, patch] : {std::tuple<const char*, int64_t, int64_t>{"height", v.height, v.patch_h},
                                             {"width", v.width, v.patch_w}}) {
    if (pixels % (v.vae_s * patch) != 0) {
      return {field, std::string(field) + " = " + str(pixels) + " must be a multiple of the VAE's spatial compression x " +
                         "patch = " + str(v.vae_s) + " x " + str(patch) + " = " + str(v.vae_s * patch)};
    }
  }
  // Bound the token count (in floating point, so the check itself cannot overflow).
  const double tokens = static_cast<double>(v.latent_frames() / v.patch_t) *
                        static_cast<double>(v.height / v.vae_s / v.patch_h) *
                        static_cast<double>(v.width / v.vae_s / v.patch_w);
  if (tokens > kMaxVideoTokens) {
    return {"frames", "frames x height x width give more than 2^31 video tokens per sample"};
  }
  return {};
}

ModelSpec ModelSpec::dit_model(int64_t layers, int64_t hidden, int64_t heads, int64_t ffn, std::string name) {
  ModelSpec s;
  s.name = std::move(name);
  s.family = Family::kDit;
  s.layers = layers;
  s.hidden = hidden;
  s.heads = heads;
  s.kv_heads = heads;
  s.head_dim = heads > 0 ? hidden / heads : 0;
  s.ffn = ffn;
  s.vocab = 0;
  s.positions = PositionKind::kRope;
  s.norm = NormKind::kLayerNorm;
  s.qk_norm = true;
  s.mlp = MlpKind::kPlain;
  s.activation = Activation::kGeluTanh;
  s.qkv_bias = s.out_bias = s.mlp_bias = true;
  s.validate(Where{"<dit hyperparameters>", 0, ""});
  return s;
}

ModelSpec ModelSpec::gpt(const GenericArch& arch, std::string name) {
  check_generic(arch, "gpt");
  ModelSpec s = generic_common(arch, std::move(name));
  s.family = Family::kGpt;
  s.positions = PositionKind::kLearned;
  s.tied_embeddings = true;
  s.norm = NormKind::kLayerNorm;
  s.mlp = MlpKind::kPlain;
  s.activation = Activation::kGelu;
  s.qkv_bias = true;
  s.out_bias = true;
  s.mlp_bias = true;
  // Megatron-LM defaults: --hidden-dropout 0.1 and --attention-dropout 0.1; the embedding dropout uses
  // the hidden dropout probability.
  s.dropout = Dropout{0.1, 0.1, 0.1, 0.0};
  s.validate(Where{"<gpt hyperparameters>", 0, ""});
  return s;
}

ModelSpec ModelSpec::llama(const GenericArch& arch, std::string name) {
  check_generic(arch, "llama");
  ModelSpec s = generic_common(arch, std::move(name));
  s.family = Family::kLlama;
  s.positions = PositionKind::kRope;
  s.tied_embeddings = false;
  s.norm = NormKind::kRmsNorm;
  s.mlp = MlpKind::kGated;
  s.activation = Activation::kSilu;
  s.validate(Where{"<llama hyperparameters>", 0, ""});
  return s;
}

void ModelSpec::validate(const Where& where) const {
  auto fail = [&](const char* key, const std::string& message) {
    throw InputError(where.with_key(key), message);
  };
  auto positive = [&](const char* key, int64_t v) {
    if (v <= 0) fail(key, std::string(key) + " must be positive, got " + std::to_string(v));
  };
  auto non_negative = [&](const char* key, int64_t v) {
    if (v < 0) fail(key, std::string(key) + " must not be negative, got " + std::to_string(v));
  };
  positive("hidden", hidden);
  positive("layers", layers);
  positive("heads", heads);
  if (is_dit()) {
    // A DiT has no vocabulary; its attention is plain multi-head attention over hidden = heads * head_dim.
    if (vocab != 0) fail("vocab", "a DiT has no vocabulary: vocab must be 0, got " + std::to_string(vocab));
    if (attention != AttentionKind::kMha || kv_heads != heads || is_moe()) {
      fail("family", "a DiT has multi-head attention (kv_heads = heads) and no experts");
    }
    if (heads * head_dim != hidden) {
      fail("head_dim", "heads x head_dim = " + std::to_string(heads) + " x " + std::to_string(head_dim) +
                           " must equal hidden = " + std::to_string(hidden));
    }
    const FieldError e = video_error(dit);
    if (!e.field.empty()) throw InputError(where.with_key("dit." + e.field), e.message);
  } else {
    positive("vocab", vocab);
  }
  non_negative("max_positions", max_positions);
  non_negative("position_offset", position_offset);
  non_negative("word_embed_proj_dim", word_embed_proj_dim);
  non_negative("sliding_window", sliding_window);
  non_negative("sliding_window_first_layer", sliding_window_first_layer);
  if (!sliding_layers.empty() && std::ssize(sliding_layers) != layers) {
    fail("sliding_layers", "sliding_layers has " + std::to_string(sliding_layers.size()) +
                               " entries; expected one per layer (" + std::to_string(layers) + ")");
  }
  if (attention_sinks && attention != AttentionKind::kMha) {
    fail("attention_sinks", "attention sinks are modelled for multi-head (MHA/GQA) attention only");
  }
  if (positions == PositionKind::kLearned) positive("max_positions", max_positions);

  if (attention == AttentionKind::kMha) {
    positive("head_dim", head_dim);
    positive("kv_heads", kv_heads);
    if (heads % kv_heads != 0) {
      fail("kv_heads", "kv_heads (" + std::to_string(kv_heads) + ") must divide heads (" + std::to_string(heads) + ")");
    }
  } else {
    non_negative("mla.q_lora_rank", mla.q_lora_rank);
    positive("mla.kv_lora_rank", mla.kv_lora_rank);
    non_negative("mla.qk_nope_head_dim", mla.qk_nope_head_dim);
    positive("mla.qk_rope_head_dim", mla.qk_rope_head_dim);
    positive("mla.v_head_dim", mla.v_head_dim);
  }

  for (const auto& [key, p] : {std::pair{"dropout.embedding", dropout.embedding},
                               std::pair{"dropout.attention", dropout.attention},
                               std::pair{"dropout.hidden", dropout.hidden},
                               std::pair{"dropout.activation", dropout.activation}}) {
    if (!(p >= 0.0 && p < 1.0)) fail(key, std::string(key) + " must be in [0, 1), got " + std::to_string(p));
  }

  if (moe.num_experts < 0) fail("moe.num_experts", "moe.num_experts must not be negative");
  if (is_moe()) {
    positive("moe.top_k", moe.top_k);
    if (moe.top_k > moe.num_experts) {
      fail("moe.top_k", "moe.top_k (" + std::to_string(moe.top_k) + ") exceeds moe.num_experts (" +
                            std::to_string(moe.num_experts) + ")");
    }
    positive("moe.expert_ffn", moe.expert_ffn);
    non_negative("moe.num_shared_experts", moe.num_shared_experts);
    if (moe.num_shared_experts > 0) positive("moe.shared_expert_ffn", moe.shared_expert_ffn);
    positive("moe.layer_freq", moe.layer_freq);
    non_negative("moe.first_dense_layers", moe.first_dense_layers);
    non_negative("moe.layer_freq_offset", moe.layer_freq_offset);
    for (int64_t l : moe.dense_layers) {
      if (l < 0) fail("moe.dense_layers", "moe.dense_layers entries must not be negative");
    }
  }
  if (num_moe_layers() < layers) positive("ffn", ffn);
  else non_negative("ffn", ffn);
}

bool ModelSpec::is_moe_layer(int64_t layer) const {
  ORRERY_ASSERT(layer >= 0 && layer < layers);
  if (!is_moe() || layer < moe.first_dense_layers) return false;
  if ((layer + moe.layer_freq_offset) % moe.layer_freq != 0) return false;
  return std::find(moe.dense_layers.begin(), moe.dense_layers.end(), layer) == moe.dense_layers.end();
}

bool ModelSpec::is_sliding_layer(int64_t layer) const {
  ORRERY_ASSERT(layer >= 0 && layer < layers);
  if (sliding_window <= 0) return false;
  if (!sliding_layers.empty()) return sliding_layers[static_cast<size_t>(layer)];
  return layer >= sliding_window_first_layer;
}

int64_t ModelSpec::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

int64_t ModelSpec::num_sliding_layers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < layers; ++l) n += is_sliding_layer(l) ? 1 : 0;
  return n;
}

int64_t ModelSpec::routed_expert_matrix_params() const {
  return num_moe_layers() * moe.num_experts * 3 * hidden * moe.expert_ffn;
}

int64_t ModelSpec::q_width() const {
  return attention == AttentionKind::kMla ? heads * mla.qk_head_dim() : heads * head_dim;
}
int64_t ModelSpec::k_width() const {
  return attention == AttentionKind::kMla ? heads * mla.qk_head_dim() : kv_heads * head_dim;
}
int64_t ModelSpec::v_width() const {
  return attention == AttentionKind::kMla ? heads * mla.v_head_dim : kv_heads * head_dim;
}
int64_t ModelSpec::attn_out_width() const {
  return attention == AttentionKind::kMla ? heads * mla.v_head_dim : heads * head_dim;
}
int64_t ModelSpec::norm_params(int64_t width) const { return norm == NormKind::kRmsNorm ? width : 2 * width; }

namespace {

// One Wan2.1 block (see the model card): self- and cross-attention with biases and q/k RMSNorm across
// heads, the cross-attention LayerNorm, the adaLN table, a GeLU-tanh MLP with biases.
LayerParams dit_layer_params(const ModelSpec& s) {
  const int64_t h = s.hidden;
  const int64_t f = s.ffn;
  LayerParams p;
  const int64_t qk_norms = s.qk_norm ? 2 * h : 0;
  p.attention = 4 * h * h + 4 * h + qk_norms;
  p.cross_attention = 4 * h * h + 4 * h + qk_norms;
  p.norms = (s.dit.cross_attn_norm ? 2 * h : 0) + 6 * h;
  p.mlp = 2 * h * f + f + h;
  p.active = p.total();
  // Per video token: self q/k/v/out, cross q/out, MLP up/down (cross k/v act on the text tokens).
  p.matmul_active = 4 * h * h + 2 * h * h + 2 * h * f;
  return p;
}

}  // namespace

LayerParams ModelSpec::layer_params(int64_t layer) const {
  if (is_dit()) return dit_layer_params(*this);
  LayerParams p;
  p.moe = is_moe_layer(layer);
  const int64_t h = hidden;
  int64_t attn_matmul = 0;
  if (attention == AttentionKind::kMha) {
    attn_matmul = h * q_width() + h * k_width() + h * v_width() + attn_out_width() * h;
    p.attention = attn_matmul;
    if (qkv_bias) p.attention += q_width() + k_width() + v_width();
    if (qk_norm) p.attention += 2 * norm_params(head_dim);
    if (attention_sinks) p.attention += heads;
  } else {
    const int64_t qk = mla.qk_head_dim();
    if (mla.q_lora_rank > 0) {
      attn_matmul += h * mla.q_lora_rank + mla.q_lora_rank * heads * qk;
      p.attention += norm_params(mla.q_lora_rank);
      if (qkv_bias) p.attention += mla.q_lora_rank;
    } else {
      attn_matmul += h * heads * qk;
      if (qkv_bias) p.attention += heads * qk;
    }
    attn_matmul += h * (mla.kv_lora_rank + mla.qk_rope_head_dim);
    if (qkv_bias) p.attention += mla.kv_lora_rank + mla.qk_rope_head_dim;
    p.attention += norm_params(mla.kv_lora_rank);
    attn_matmul += mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim);
    attn_matmul += heads * mla.v_head_dim * h;
    p.attention += attn_matmul;
  }
  if (out_bias) p.attention += h;
  p.norms = 2 * norm_params(h);

  int64_t mlp_matmul_active = 0;
  int64_t mlp_active = 0;
  if (!p.moe) {
    const int64_t mats = mlp == MlpKind::kGated ? 3 : 2;
    p.mlp = mats * h * ffn;
    mlp_matmul_active = p.mlp;
    if (mlp_bias) p.mlp += (mats - 1) * ffn + h;
    mlp_active = p.mlp;
  } else {
    // Experts are always gated (SwiGLU) MLPs; only gpt-oss gives them biases (2 f up/gate, h down).
    const int64_t expert_matmul = 3 * h * moe.expert_ffn;
    const int64_t expert = expert_matmul + (moe.expert_bias ? 2 * moe.expert_ffn + h : 0);
    const int64_t shared = 3 * h * moe.shared_expert_ffn;
    p.router = moe.num_experts * h + (moe.router_bias ? moe.num_experts : 0);
    p.routed_experts = moe.num_experts * expert;
    p.shared_experts = moe.num_shared_experts * shared + (moe.shared_expert_gate ? h : 0);
    p.mlp = p.router + p.routed_experts + p.shared_experts;
    mlp_matmul_active = moe.num_experts * h + moe.top_k * expert_matmul + p.shared_experts;
    mlp_active = p.router + moe.top_k * expert + p.shared_experts;
  }
  p.active = p.attention + p.norms + mlp_active;
  p.matmul_active = attn_matmul + mlp_matmul_active;
  return p;
}

int64_t ParamBreakdown::layers_total() const {
  int64_t n = 0;
  for (const LayerParams& l : layers) n += l.total();
  return n;
}

int64_t ParamBreakdown::total() const {
  return token_embedding + position_embedding + projections + final_norm + lm_head + conditioning + layers_total();
}

ParamBreakdown ModelSpec::param_breakdown() const {
  ParamBreakdown b;
  if (is_dit()) {
    const int64_t h = hidden;
    const int64_t patch_in = dit.in_channels * dit.patch_volume();
    const int64_t patch_out = dit.out_channels * dit.patch_volume();
    b.conditioning = (patch_in * h + h)                    // patch embedding (Conv3d, stride = kernel)
                     + (dit.freq_dim * h + h) + (h * h + h)  // timestep MLP (linear, SiLU, linear)
                     + (h * 6 * h + 6 * h)                   // shared modulation projection (SiLU, linear)
                     + (dit.text_dim * h + h) + (h * h + h); // text MLP (linear, GeLU-tanh, linear)
    b.final_norm = 2 * h;                                    // output shift/scale table (LayerNorm not affine)
    b.lm_head = h * patch_out + patch_out;                   // output projection
    b.layers.assign(static_cast<size_t>(layers), dit_layer_params(*this));
    return b;
  }
  const int64_t e = embed_dim();
  b.token_embedding = vocab * e;
  if (positions == PositionKind::kLearned) b.position_embedding = (max_positions + position_offset) * hidden;
  if (e != hidden) b.projections = 2 * e * hidden;
  if (final_norm) b.final_norm = norm_params(hidden);
  b.lm_head = tied_embeddings ? 0 : vocab * e;
  // Layers come in at most two kinds (dense and MoE), so compute each kind once.
  b.layers.reserve(static_cast<size_t>(layers));
  LayerParams dense, sparse;
  bool have_dense = false, have_sparse = false;
  for (int64_t l = 0; l < layers; ++l) {
    const bool m = is_moe_layer(l);
    LayerParams& cached = m ? sparse : dense;
    bool& have = m ? have_sparse : have_dense;
    if (!have) {
      cached = layer_params(l);
      have = true;
    }
    b.layers.push_back(cached);
  }
  return b;
}

int64_t ModelSpec::total_params() const { return param_breakdown().total(); }

int64_t ModelSpec::active_params(ActiveEmbedding embedding) const {
  const ParamBreakdown b = param_breakdown();
  int64_t n = b.projections + b.final_norm + b.lm_head + b.conditioning;
  for (const LayerParams& l : b.layers) n += l.active;
  if (embedding == ActiveEmbedding::kInclude) {
    n += b.token_embedding + b.position_embedding;
  } else if (tied_embeddings) {
    n += b.token_embedding;  // the tied table is still the LM head's matrix
  }
  return n;
}

int64_t ModelSpec::active_params_as_published() const {
  return active_params(provenance.published_active_excludes_input_embedding ? ActiveEmbedding::kExclude
                                                                             : ActiveEmbedding::kInclude);
}

int64_t ModelSpec::embedding_params() const {
  const ParamBreakdown b = param_breakdown();
  return b.token_embedding + b.position_embedding + b.projections;
}

int64_t ModelSpec::non_embedding_params() const {
  const ParamBreakdown b = param_breakdown();
  if (is_dit()) return b.total();  // no token tables; the output projection is a regular weight
  return b.total() - b.token_embedding - b.position_embedding - b.projections - b.lm_head;
}

int64_t ModelSpec::matmul_params_per_token() const {
  const ParamBreakdown b = param_breakdown();
  if (is_dit()) {
    int64_t n = dit.in_channels * dit.patch_volume() * hidden + hidden * dit.out_channels * dit.patch_volume();
    for (const LayerParams& l : b.layers) n += l.matmul_active;
    return n;
  }
  int64_t n = vocab * embed_dim() + b.projections;  // LM head (tied or not) and OPT projections
  for (const LayerParams& l : b.layers) n += l.matmul_active;
  return n;
}

Bytes ModelSpec::kv_cache_bytes_per_token(int64_t dtype_bytes) const {
  const int64_t per_layer = attention == AttentionKind::kMla ? mla.kv_lora_rank + mla.qk_rope_head_dim
                                                             : 2 * kv_heads * head_dim;
  return Bytes(per_layer * layers * dtype_bytes);
}

Bytes ModelSpec::kv_cache_bytes_per_sequence(int64_t tokens, int64_t dtype_bytes) const {
  ORRERY_ASSERT(tokens >= 0);
  const int64_t windowed = num_sliding_layers();
  const int64_t layer_tokens = (layers - windowed) * tokens + windowed * std::min(tokens, sliding_window);
  return Bytes(kv_cache_bytes_per_token(dtype_bytes).count() / layers * layer_tokens);
}

}  // namespace orrery::model
