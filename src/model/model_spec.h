// ModelSpec: an immutable description of a decoder-only transformer, and its parameter counts.
//
// Model card
//   What is modelled: the shapes of every weight of a decoder-only transformer, enough to count its
//   parameters exactly and to build its op inventory (model/op_inventory.h). Covered: Llama 2/3/3.1,
//   Code Llama, Mistral (sliding window), Mixtral (MoE), Qwen2 (q/k/v bias), Qwen2-MoE (shared expert
//   with a sigmoid gate), Qwen3 (q/k RMSNorm), Qwen3-MoE, DeepSeek-V3 (multi-head latent attention,
//   routed + shared experts, leading dense layers), GPT-2/GPT-3 and Megatron GPT (learned positions,
//   LayerNorm with bias, GeLU 4h MLP, biases everywhere, tied embeddings), OPT (ReLU, learned
//   positions with an offset of 2, optional word_embed_proj_dim projections).
//   Not modelled: DeepSeek-V3's multi-token-prediction module (num_nextn_predict_layers; it is not
//   part of the 671B main model and is not used at inference), encoder-decoder models, vision towers,
//   weight quantization (the spec is dtype-free; byte counts take a dtype size).
//
//   Parameter counting (exact, per the Hugging Face transformers module structure):
//     norm(d)           RMSNorm: d (weight); LayerNorm: 2d (weight + bias)
//     MHA/GQA attention h*(a*dh) + 2*h*(g*dh) + (a*dh)*h  [+ a*dh + 2*g*dh if qkv_bias] [+ h if out_bias]
//                       [+ 2*dh if qk_norm]     (a heads, g kv heads, dh head dim)
//     MLA attention     h*r_q + norm(r_q) + r_q*a*(dn+dr)   (or h*a*(dn+dr) without q compression)
//                       + h*(r_kv+dr) + norm(r_kv) + r_kv*a*(dn+dv) + a*dv*h
//     gated MLP         3*h*f [+ 2f + h if mlp_bias];  plain MLP 2*h*f [+ f + h if mlp_bias]
//     MoE block         E*h router [+ E router bias] + E*3*h*fe + S*3*h*fs [+ h shared gate]
//     embeddings        V*e token table (e = word_embed_proj_dim or h) + (P + offset)*h learned positions
//                       [+ 2*e*h OPT project_in/out when e != h]; LM head V*e unless tied; final norm(h)
//   Active parameters per token: everything outside the routed experts, plus top_k routed experts.
//   By default the whole input-embedding table counts as active (the convention of Mistral's 12.9B
//   for Mixtral-8x7B); ActiveEmbedding::kExclude drops the input lookup (token and position tables),
//   which does no matmul; this reproduces DeepSeek's 36.7B for DeepSeek-V3 (see docs/model.md).
//
//   Video diffusion transformers (Family::kDit, Wan2.1's WanTransformer3DModel, diffusers): per block
//     self-attention    4h^2 + 4h (q/k/v/out with biases) + 2h (q and k RMSNorm across heads)
//     cross-attention   the same, 4h^2 + 6h (q from the video tokens, k/v from the projected text)
//     norms             2h (affine LayerNorm before cross-attention, cross_attn_norm) + 6h (the adaLN
//                       shift/scale/gate table, scale_shift_table); the other two LayerNorms are
//                       not affine
//     MLP               2hf + f + h (GeLU-tanh, biases)
//   so 8h^2 + 2hf + 21h + f per block; plus the conditioning (patch embedding Conv3d C*pt*ph*pw*h + h,
//   timestep MLP freq*h + h + h^2 + h, the shared modulation projection 6h^2 + 6h, the text MLP
//   text_dim*h + h + h^2 + h), the output modulation table 2h and the output projection
//   h*C'*pt*ph*pw + C'*pt*ph*pw. No vocabulary, no LM head. Video tokens per sample:
//   ((frames - 1)/vae_t + 1)/pt * (height/vae_s/ph) * (width/vae_s/pw) (causal 3D VAE: the first frame
//   alone, then vae_t frames per latent frame; Wan2.1 and HunyuanVideo).
//
// Range of validity: dense and MoE decoder-only transformers with one attention and one MLP/MoE block
// per layer, and Wan-style video DiTs. Sources: see docs/model.md (transformers and diffusers config
// classes, model cards, papers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/units.h"

namespace orrery::model {

enum class Family {
  kGpt,         // Megatron-style GPT (ModelSpec::gpt): learned positions, LayerNorm, GeLU, biases, tied
  kLlama,       // Llama 2/3/3.1, Code Llama, and ModelSpec::llama
  kMistral,
  kMixtral,
  kQwen2,
  kQwen2Moe,
  kQwen3,
  kQwen3Moe,
  kDeepSeekV3,
  kGptOss,      // OpenAI gpt-oss: alternating windowed/full attention with sinks, experts with biases
  kGpt2,        // GPT-2 and GPT-3 (shipped as a GPT-2-style config)
  kOpt,
  kDit,         // video diffusion transformer (Wan2.1 WanTransformer3DModel); ModelSpec::dit holds the rest
};
std::string_view to_string(Family f);

enum class NormKind { kRmsNorm, kLayerNorm };
enum class MlpKind {
  kGated,  // act(x W_gate) * (x W_up) W_down: SwiGLU when the activation is SiLU (three matrices)
  kPlain,  // act(x W_up) W_down (two matrices)
};
enum class Activation { kSilu, kGelu, kGeluTanh, kRelu };
enum class AttentionKind {
  kMha,  // multi-head attention incl. grouped-query (kv_heads < heads) and multi-query (kv_heads = 1)
  kMla,  // DeepSeek multi-head latent attention
};
enum class PositionKind { kRope, kLearned };
std::string_view to_string(NormKind k);
std::string_view to_string(MlpKind k);
std::string_view to_string(Activation a);
std::string_view to_string(AttentionKind k);
std::string_view to_string(PositionKind k);

// Multi-head latent attention dimensions (DeepSeek-V2/V3 names).
struct MlaDims {
  int64_t q_lora_rank = 0;  // 0: queries are projected straight from the hidden state
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// Mixture-of-experts block. num_experts == 0 means a dense model.
// Layer i is an MoE layer when num_experts > 0, i >= first_dense_layers, (i + layer_freq_offset) %
// layer_freq == 0 and i is not listed in dense_layers. DeepSeek: offset 0 (first_k_dense_replace,
// moe_layer_freq); Qwen-MoE: offset 1 (decoder_sparse_step, mlp_only_layers).
struct MoeSpec {
  int64_t num_experts = 0;         // routed experts
  int64_t top_k = 0;               // routed experts per token
  int64_t expert_ffn = 0;          // intermediate size of one routed expert (always a gated MLP)
  int64_t num_shared_experts = 0;  // experts every token goes through
  int64_t shared_expert_ffn = 0;   // intermediate size of each shared expert
  bool shared_expert_gate = false; // Qwen2-MoE: sigmoid(x W), W of shape h x 1, scales the shared expert
  bool router_bias = false;        // one per routed expert: DeepSeek-V3's e_score_correction_bias,
                                   // gpt-oss's router Linear bias
  int64_t first_dense_layers = 0;
  int64_t layer_freq = 1;
  int64_t layer_freq_offset = 0;
  std::vector<int64_t> dense_layers;
  bool expert_bias = false;        // gpt-oss: each routed expert's up/gate (2 f) and down (h) biases
};

// Dropout probabilities (training only). A nonzero probability makes training save a 1-byte mask.
struct Dropout {
  double embedding = 0.0;   // after the embedding sum
  double attention = 0.0;   // on the attention probabilities
  double hidden = 0.0;      // on the attention and MLP block outputs, before the residual adds
  double activation = 0.0;  // inside the MLP after the activation (OPT activation_dropout)
};

// A video diffusion transformer's input side (Family::kDit): latent and patch geometry, conditioning
// widths and the video sample it is trained on. Wan2.1 names in brackets.
struct DitSpec {
  int64_t in_channels = 16;   // latent channels C the VAE produces [in_channels / in_dim]
  int64_t out_channels = 16;  // predicted channels C' [out_channels / out_dim]
  int64_t patch_t = 1;        // patch size over latent frames, height, width [patch_size]
  int64_t patch_h = 2;
  int64_t patch_w = 2;
  int64_t text_dim = 4096;    // text encoder width (umT5-XXL: 4096) [text_dim]
  int64_t text_tokens = 512;  // text tokens per sample (Wan pads the prompt to 512) [text_len]
  int64_t freq_dim = 256;     // sinusoidal timestep features [freq_dim]
  bool cross_attn_norm = true;  // affine LayerNorm on the cross-attention input [cross_attn_norm]
  int64_t vae_t = 4;          // VAE compression: frames per latent frame after the first [vae_stride]
  int64_t vae_s = 8;          // VAE spatial compression (height and width)
  int64_t frames = 81;        // the video sample: frames, height and width in pixels
  int64_t height = 720;
  int64_t width = 1280;

  int64_t latent_frames() const { return (frames - 1) / vae_t + 1; }
  int64_t patch_volume() const { return patch_t * patch_h * patch_w; }
  // Video tokens per sample (REQUIRES: video_error() is empty).
  int64_t tokens() const {
    return latent_frames() / patch_t * (height / vae_s / patch_h) * (width / vae_s / patch_w);
  }
};

// The first broken constraint of a DiT's video geometry: `field` is the DitSpec member ("frames",
// "height", "width", "patch_t", ...), empty when the geometry is valid.
struct FieldError {
  std::string field;
  std::string message;
};
FieldError video_error(const DitSpec& dit);

// Where the numbers came from (catalog entries carry it; specs built in code leave it empty).
struct Provenance {
  std::string source;                   // URLs of the config and the paper or model card
  double published_total_params = 0.0;  // as stated by the publisher; 0 = not stated
  double published_active_params = 0.0;
  // Whether the publisher's active count leaves out the input embedding table (gpt-oss's model card
  // counts the unembedding but not the embedding): compare with active_params(kExclude) then.
  bool published_active_excludes_input_embedding = false;
};

// Parameters of one transformer layer.
struct LayerParams {
  bool moe = false;
  int64_t attention = 0;       // projections, their biases, and norms inside attention (MLA, q/k norm)
  int64_t cross_attention = 0; // DiT: the cross-attention block (projections, biases, q/k norms)
  int64_t norms = 0;           // the two block norms; DiT: the cross-attention norm + adaLN table
  int64_t mlp = 0;             // dense MLP, or for an MoE layer: router + routed + shared experts
  int64_t router = 0;          // part of mlp
  int64_t routed_experts = 0;  // part of mlp: all routed experts
  int64_t shared_experts = 0;  // part of mlp: shared experts and the Qwen2-MoE shared gate
  int64_t active = 0;          // parameters one token uses
  int64_t matmul_active = 0;   // weights one token multiplies by (no biases, norms, router bias)

  int64_t total() const { return attention + cross_attention + norms + mlp; }
};

struct ParamBreakdown {
  int64_t token_embedding = 0;     // vocab x embed dim
  int64_t position_embedding = 0;  // learned positions (0 for RoPE)
  int64_t projections = 0;         // OPT project_in + project_out
  int64_t final_norm = 0;
  int64_t lm_head = 0;             // 0 when tied to the token embedding; DiT: the output projection
  int64_t conditioning = 0;        // DiT: patch embedding, timestep MLP + modulation projection, text MLP
  std::vector<LayerParams> layers;

  int64_t layers_total() const;
  int64_t total() const;
};

enum class ActiveEmbedding {
  kInclude,  // count the token (and position) tables as active: the usual published convention
  kExclude,  // leave out the input lookup, which does no matmul (DeepSeek-V3's 36.7B)
};

// Hyperparameters of the two generic architectures of shared/validation/training.csv.
struct GenericArch {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;
  int64_t seq = 0;  // sequence length; also the size of GPT's learned position table
};

// Plain aggregate: build it, call validate(), then treat it as immutable.
struct ModelSpec {
  std::string name;
  Family family = Family::kLlama;

  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;       // query heads
  int64_t kv_heads = 0;    // key/value heads (MHA/GQA); equal to heads for MLA
  int64_t head_dim = 0;    // q/k/v head dim for MHA/GQA; qk head dim (nope + rope) for MLA
  int64_t ffn = 0;         // dense MLP intermediate size (0 allowed only when every layer is MoE)
  int64_t vocab = 0;
  int64_t max_positions = 0;

  PositionKind positions = PositionKind::kRope;
  int64_t position_offset = 0;      // OPT's learned table has max_positions + 2 rows
  bool tied_embeddings = false;
  int64_t word_embed_proj_dim = 0;  // OPT: embedding width when it differs from hidden; 0 = hidden

  NormKind norm = NormKind::kRmsNorm;
  bool final_norm = true;
  bool qk_norm = false;  // Qwen3: a norm of width head_dim on each query and key head

  MlpKind mlp = MlpKind::kGated;
  Activation activation = Activation::kSilu;

  AttentionKind attention = AttentionKind::kMha;
  MlaDims mla;                // used when attention == kMla
  bool qkv_bias = false;      // bias on the q/k/v projections (MLA: on q_a/q and kv_a)
  bool out_bias = false;      // bias on the attention output projection
  bool mlp_bias = false;      // biases on the dense MLP matrices
  int64_t sliding_window = 0;              // 0 = full attention
  int64_t sliding_window_first_layer = 0;  // layers >= this one use the window
  // Per layer (transformers' layer_types), when not empty: which layers use the window; it replaces
  // sliding_window_first_layer and must have one entry per layer (gpt-oss alternates, sliding first).
  std::vector<bool> sliding_layers;
  bool attention_sinks = false;  // gpt-oss: one learned logit per query head joins each softmax

  MoeSpec moe;
  DitSpec dit;                // used when family == kDit
  Dropout dropout;
  Provenance provenance;

  // Megatron-style GPT: learned positions (seq rows), LayerNorm, GeLU plain MLP, biases everywhere,
  // tied embeddings, dropout 0.1 on embeddings, attention probabilities and block outputs.
  // Throws InputError (key = the GenericArch field) when the hyperparameters are invalid.
  static ModelSpec gpt(const GenericArch& arch, std::string name = "gpt");
  // Llama-style: RoPE, RMSNorm, SwiGLU, no biases, untied embeddings, no dropout, GQA (kv_heads).
  static ModelSpec llama(const GenericArch& arch, std::string name = "llama");

  // Throws InputError naming the offending field (where.with_key(field)) when a size is not positive,
  // heads do not divide evenly, top_k exceeds the experts, etc.
  void validate(const Where& where = {}) const;

  bool is_moe() const { return moe.num_experts > 0; }
  bool is_dit() const { return family == Family::kDit; }
  // Wan2.1-style video DiT with the DitSpec defaults (Wan's shared config): RoPE (3D, no parameters),
  // LayerNorm, plain GeLU-tanh MLP with biases, q/k RMSNorm across heads, head_dim = hidden / heads.
  // Throws InputError like validate().
  static ModelSpec dit_model(int64_t layers, int64_t hidden, int64_t heads, int64_t ffn, std::string name = "dit");
  // REQUIRES: 0 <= layer < layers.
  bool is_moe_layer(int64_t layer) const;
  bool is_sliding_layer(int64_t layer) const;
  int64_t num_moe_layers() const;
  int64_t num_sliding_layers() const;
  // Weights of all routed experts' matrices (3 h f_e each, biases apart): what weight-only
  // quantization of the experts narrows (serve --expert-weights).
  int64_t routed_expert_matrix_params() const;
  int64_t embed_dim() const { return word_embed_proj_dim > 0 ? word_embed_proj_dim : hidden; }
  int64_t q_width() const;    // width of all query heads: a*dh (MLA: a*(dn+dr))
  int64_t k_width() const;    // width of all key heads as attention sees them: g*dh (MLA: a*(dn+dr))
  int64_t v_width() const;    // width of all value heads: g*dh (MLA: a*dv)
  int64_t attn_out_width() const;  // input width of the output projection: a*dh (MLA: a*dv)
  int64_t norm_params(int64_t width) const;  // parameters of one norm of this width

  LayerParams layer_params(int64_t layer) const;
  ParamBreakdown param_breakdown() const;
  int64_t total_params() const;
  int64_t active_params(ActiveEmbedding embedding = ActiveEmbedding::kInclude) const;
  // active_params counted the way provenance.published_active_params was (with or without the input
  // embedding), for comparing the two.
  int64_t active_params_as_published() const;
  int64_t embedding_params() const;      // token + position tables (+ OPT projections)
  int64_t non_embedding_params() const;  // total minus embeddings and an untied LM head
  // PaLM's N: weights one token multiplies by, including the LM head (even when tied) and excluding
  // the input lookup, norms and biases (Chowdhery et al. 2022, App. B).
  // DiT: the weights one video token multiplies by: patch embedding, per block the self-attention
  // (4h^2), the cross-attention query and output (2h^2) and the MLP (2hf), and the output projection.
  // The cross-attention keys/values and the text MLP act on text tokens, the timestep MLP once per
  // sample; op_inventory.h counts their FLOPs.
  int64_t matmul_params_per_token() const;
  // KV-cache bytes one token occupies across all layers: 2*g*dh per layer for MHA/GQA, the compressed
  // latent (kv_lora_rank + qk_rope_head_dim) per layer for MLA.
  Bytes kv_cache_bytes_per_token(int64_t dtype_bytes = 2) const;
  // KV-cache bytes one sequence of `tokens` tokens holds when windowed layers keep only their last
  // sliding_window tokens (as an engine that frees blocks outside the window does): full layers hold
  // all `tokens`, windowed ones min(tokens, sliding_window). REQUIRES: tokens >= 0.
  Bytes kv_cache_bytes_per_sequence(int64_t tokens, int64_t dtype_bytes = 2) const;
};

}  // namespace orrery::model
