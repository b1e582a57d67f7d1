#include "model/op_inventory.h"

#include <algorithm>
#include <utility>

#include "core/assert.h"

namespace orrery::model {

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::kGemm: return "gemm";
    case OpKind::kAttention: return "attention";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kNorm: return "norm";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kRouter: return "router";
  }
  return "?";
}

double attended_pairs(int64_t seq, int64_t past, int64_t window, AttentionFlops mode) {
  ORRERY_ASSERT(seq >= 0 && past >= 0 && window >= 0);
  const double s = static_cast<double>(seq);
  const double kv = static_cast<double>(past + seq);
  const double w = static_cast<double>(window);
  if (mode == AttentionFlops::kFull) return s * (window > 0 ? std::min(kv, w) : kv);
  // Causal: the query at absolute position p (1-based, p = past+1 .. past+seq) sees min(p, w) keys.
  auto sum_range = [](double a, double b) { return (a + b) * (b - a + 1.0) / 2.0; };
  const double first = static_cast<double>(past) + 1.0;
  const double last = kv;
  if (seq == 0) return 0.0;
  if (window == 0 || last <= w) return sum_range(first, last);
  if (first > w) return s * w;
  return sum_range(first, w) + (last - w) * w;
}

namespace {

// Nominal elementwise FLOPs per output element (see the model card in op_inventory.h).
constexpr double kRmsNormFlops = 4.0;
constexpr double kLayerNormFlops = 8.0;
constexpr double kAddFlops = 1.0;
constexpr double kDropoutFlops = 2.0;
constexpr double kRopeFlops = 3.0;
constexpr double kLossFlops = 4.0;
constexpr int64_t kFp32 = 4;

double activation_flops(Activation a) {
  switch (a) {
    case Activation::kSilu: return 4.0;
    case Activation::kGelu:
    case Activation::kGeluTanh: return 8.0;
    case Activation::kRelu: return 1.0;
  }
  return 4.0;
}

double d(int64_t v) { return static_cast<double>(v); }

class OpBuilder {
 public:
  OpBuilder(const ModelSpec& spec, const Shape& shape, const InventoryOptions& options)
      : spec_(spec), shape_(shape), options_(options), dt_(d(options.dtype_bytes)) {}

  std::vector<Op> take() { return std::move(ops_); }

  // A GEMM whose backward saves `saved_elements` input elements (0 when another op saved them).
  void gemm(std::string name, OpKind kind, double m, int64_t n, int64_t k, int64_t count, int64_t params,
            double saved_elements) {
    Op op;
    op.name = std::move(name);
    op.kind = kind;
    op.gemm = GemmDims{m, n, k, count};
    op.params = params;
    op.fwd_flops = op.gemm.flops();
    op.bwd_flops = op.fwd_flops * 2.0;
    op.fwd_bytes_read = Bytes::from_double(d(count) * (m * d(k) + d(k) * d(n)) * dt_);
    op.fwd_bytes_written = Bytes::from_double(d(count) * m * d(n) * dt_);
    op.saved_activations = Bytes::from_double(saved_elements * dt_);
    ops_.push_back(std::move(op));
  }

  // An elementwise or norm op producing `out_elements`; reads `read_elements` and saves
  // `saved_bytes` (already in bytes: masks and fp32 tensors differ from the activation dtype).
  void elementwise(std::string name, OpKind kind, double out_elements, double flops_per_element,
                   double read_elements, double saved_bytes, int64_t params = 0, double extra_written_bytes = 0) {
    Op op;
    op.name = std::move(name);
    op.kind = kind;
    op.params = params;
    op.fwd_flops = Flops(out_elements * flops_per_element);
    op.bwd_flops = op.fwd_flops * 2.0;
    op.fwd_bytes_read = Bytes::from_double(read_elements * dt_ + d(params) * dt_);
    op.fwd_bytes_written = Bytes::from_double(out_elements * dt_ + extra_written_bytes);
    op.saved_activations = Bytes::from_double(saved_bytes);
    ops_.push_back(std::move(op));
  }

  // params < 0: the spec's norm parameters for this width (0 for a DiT's non-affine LayerNorms).
  // Eager RMSNorm (x.float(), pow, mean, x * rsqrt, type_as, * weight; torchtitan's module) moves per
  // element: read dt + 4 + 4 + 4 + 4 + dt, write 4 + 4 + 4 + dt + dt (36 B in bf16, fused: 4 B).
  // LayerNorm is one kernel even in eager PyTorch.
  void norm(std::string name, double rows, int64_t width, int64_t params = -1) {
    norm_elements(std::move(name), rows * d(width), params >= 0 ? params : spec_.norm_params(width));
  }

  void norm_elements(std::string name, double elements, int64_t params) {
    const bool rms = spec_.norm == NormKind::kRmsNorm;
    const double flops = rms ? kRmsNormFlops : kLayerNormFlops;
    const bool eager = options_.eager && rms;
    elementwise(std::move(name), OpKind::kNorm, elements, flops, eager ? elements * (2.0 * dt_ + 16.0) / dt_ : elements,
                elements * dt_, params, eager ? elements * (dt_ + 12.0) : 0.0);
  }

  // RoPE over `elements` query/key elements. Eager (torchtitan: view_as_complex of x.float(), complex
  // multiply, view_as_real, type_as) moves read dt + 4 + 4, write 4 + 4 + dt per element (20 B in
  // bf16; fused: 4 B).
  void rope(std::string name, double elements) {
    const bool eager = options_.eager;
    elementwise(std::move(name), OpKind::kElementwise, elements, kRopeFlops, eager ? elements * (dt_ + 8.0) / dt_ : elements,
                0.0, 0, eager ? elements * 8.0 : 0.0);
  }

  void dropout(std::string name, double elements) {
    const double mask = elements * d(options_.dropout_mask_bytes);
    elementwise(std::move(name), OpKind::kElementwise, elements, kDropoutFlops, elements, mask, 0, mask);
  }

  void residual(std::string name, double elements) {
    elementwise(std::move(name), OpKind::kElementwise, elements, kAddFlops, 2.0 * elements, 0.0);
  }

  // act(gate) * up for gated MLPs, act(x) for plain ones, over rows x width. Eager gated: act(gate)
  // and the multiply are two kernels, read 3 dt and write 2 dt per output element (fused: 2 dt, dt).
  void activation(std::string name, double rows, int64_t width) {
    const double out = rows * d(width);
    const bool gated = spec_.mlp == MlpKind::kGated;
    const double flops = activation_flops(spec_.activation) + (gated ? 1.0 : 0.0);
    const double inputs = gated ? 2.0 * out : out;
    const bool eager = options_.eager && gated;
    elementwise(std::move(name), OpKind::kElementwise, out, flops, eager ? inputs + out : inputs, inputs * dt_, 0,
                eager ? out * dt_ : 0.0);
  }

  // A gated (two-matrix up) or plain MLP of width f over `rows` rows split over `count` GEMMs.
  // input_saved: whether this MLP's up GEMM saves its input (false when shared with another op).
  void mlp(const std::string& prefix, double rows, int64_t f, int64_t count, bool biases, bool input_saved,
           bool gated) {
    const int64_t h = spec_.hidden;
    const double m = rows / d(count);
    const int64_t up_n = gated ? 2 * f : f;
    gemm(prefix + (gated ? ".up_gate" : ".up"), OpKind::kGemm, m, up_n, h, count,
         count * (h * up_n + (biases ? up_n : 0)), input_saved ? rows * d(h) : 0.0);
    activation(prefix + ".act", rows, f);
    if (spec_.dropout.activation > 0.0) dropout(prefix + ".act_dropout", rows * d(f));
    gemm(prefix + ".down", OpKind::kGemm, m, h, f, count, count * (f * h + (biases ? h : 0)), rows * d(f));
  }

  void attention_block(int64_t layer) {
    const ModelSpec& s = spec_;
    const int64_t h = s.hidden;
    const double tokens = d(shape_.tokens());
    const double kv_len = d(shape_.kv_len());

    norm("attn.norm", tokens, h);
    double rope_elements = 0.0;
    if (s.attention == AttentionKind::kMha) {
      const int64_t n = s.q_width() + s.k_width() + s.v_width();
      gemm("attn.qkv", OpKind::kGemm, tokens, n, h, 1, h * n + (s.qkv_bias ? n : 0), tokens * d(h));
      if (s.qk_norm) norm_elements("attn.qk_norm", tokens * d(s.q_width() + s.k_width()), 2 * s.norm_params(s.head_dim));
      rope_elements = tokens * d(s.q_width() + s.k_width());
    } else {
      const MlaDims& mla = s.mla;
      const int64_t q_n = s.heads * mla.qk_head_dim();
      if (mla.q_lora_rank > 0) {
        gemm("attn.q_a", OpKind::kGemm, tokens, mla.q_lora_rank, h, 1,
             h * mla.q_lora_rank + (s.qkv_bias ? mla.q_lora_rank : 0), tokens * d(h));
        norm("attn.q_a_norm", tokens, mla.q_lora_rank);
        gemm("attn.q_b", OpKind::kGemm, tokens, q_n, mla.q_lora_rank, 1, mla.q_lora_rank * q_n,
             tokens * d(mla.q_lora_rank));
      } else {
        gemm("attn.q", OpKind::kGemm, tokens, q_n, h, 1, h * q_n + (s.qkv_bias ? q_n : 0), tokens * d(h));
      }
      const int64_t kv_a_n = mla.kv_lora_rank + mla.qk_rope_head_dim;
      // Shares its input (the norm output) with the query projection, which saved it.
      gemm("attn.kv_a", OpKind::kGemm, tokens, kv_a_n, h, 1, h * kv_a_n + (s.qkv_bias ? kv_a_n : 0), 0.0);
      norm("attn.kv_a_norm", tokens, mla.kv_lora_rank);
      const int64_t kv_b_n = s.heads * (mla.qk_nope_head_dim + mla.v_head_dim);
      gemm("attn.kv_b", OpKind::kGemm, tokens, kv_b_n, mla.kv_lora_rank, 1, mla.kv_lora_rank * kv_b_n,
           tokens * d(mla.kv_lora_rank));
      // RoPE touches the rope part of every query head and the single shared rope key.
      rope_elements = tokens * d(s.heads * mla.qk_rope_head_dim + mla.qk_rope_head_dim);
    }
    if (s.positions == PositionKind::kRope) {
      rope("attn.rope", rope_elements);
    }
    {
      const int64_t window = s.is_sliding_layer(layer) ? s.sliding_window : 0;
      // Keys a forward pass reads: with a window, a decode step reads only the last w cached keys.
      const double kv_read = window > 0 ? std::min(kv_len, d(window + shape_.seq - 1)) : kv_len;
      attention_core("attn.core", shape_.kv_len(), attended_pairs(shape_.seq, shape_.past, window, options_.attention),
                     kv_read, AttentionMask::kCausal);
      // gpt-oss's sinks: one logit per head joins each row's softmax normalizer (no FLOPs to speak of).
      if (s.attention_sinks) ops_.back().params += s.heads;
    }
    const int64_t out_k = s.attn_out_width();
    gemm("attn.out", OpKind::kGemm, tokens, h, out_k, 1, out_k * h + (s.out_bias ? h : 0), tokens * d(out_k));
    if (s.dropout.hidden > 0.0) dropout("attn.dropout", tokens * d(h));
    residual("attn.residual", tokens * d(h));
  }

  // The attention core of shape_.seq queries per sequence over kv_len_i keys, `pairs` attended (query,
  // key) pairs per sequence and head, kv_read keys read per sequence in forward.
  void attention_core(std::string name, int64_t kv_len_i, double pairs, double kv_read, AttentionMask kernel_mask) {
    const ModelSpec& s = spec_;
    const bool mla = s.attention == AttentionKind::kMla;
    const int64_t dqk = mla ? s.mla.qk_head_dim() : s.head_dim;
    const int64_t dv = mla ? s.mla.v_head_dim : s.head_dim;
    const double heads = d(s.heads);
    const double tokens = d(shape_.tokens());
    const double b = d(shape_.batch);
    const double kv_len = d(kv_len_i);

    Op op;
    op.name = std::move(name);
    op.kind = OpKind::kAttention;
    op.mask = kernel_mask;
    op.gemm = GemmDims{d(shape_.seq), kv_len_i, dqk, shape_.batch * s.heads};
    op.fwd_flops = Flops(2.0 * b * heads * pairs * d(dqk + dv));
    op.bwd_flops = op.fwd_flops * 2.0;

    const double q_el = tokens * d(s.q_width());
    const double k_el = b * kv_len * d(s.k_width());
    const double v_el = b * kv_len * d(s.v_width());
    const double o_el = tokens * d(s.attn_out_width());
    const double read_kv = b * kv_read * d(s.k_width() + s.v_width());
    const bool attn_dropout = s.dropout.attention > 0.0;
    double read = q_el + read_kv;
    double written = o_el;
    double saved = (q_el + k_el + v_el) * dt_;
    if (options_.flash_attention) {
      const double lse = b * heads * d(shape_.seq) * d(kFp32);
      saved += lse;
      op.fwd_bytes_written = Bytes::from_double(written * dt_ + lse);
      op.fwd_bytes_read = Bytes::from_double(read * dt_);
    } else {
      // Materialized scores: written, read and rewritten by softmax, read by P V.
      const double scores = b * heads * d(shape_.seq) * kv_len;
      const double mask = attn_dropout ? scores * d(options_.dropout_mask_bytes) : 0.0;
      written += 2.0 * scores + (attn_dropout ? scores : 0.0);
      read += 2.0 * scores + (attn_dropout ? scores : 0.0);
      saved += scores * dt_ + (attn_dropout ? mask + scores * dt_ : 0.0);
      op.fwd_bytes_written = Bytes::from_double(written * dt_ + mask);
      op.fwd_bytes_read = Bytes::from_double(read * dt_);
    }
    op.saved_activations = Bytes::from_double(saved);
    ops_.push_back(std::move(op));
  }

  void mlp_block(int64_t layer) {
    const ModelSpec& s = spec_;
    const int64_t h = s.hidden;
    const double tokens = d(shape_.tokens());
    norm("mlp.norm", tokens, h);
    if (!s.is_moe_layer(layer)) {
      mlp("mlp", tokens, s.ffn, 1, s.mlp_bias, true, s.mlp == MlpKind::kGated);
    } else {
      const MoeSpec& moe = s.moe;
      gemm("moe.router", OpKind::kRouter, tokens, moe.num_experts, h, 1,
           moe.num_experts * h + (moe.router_bias ? moe.num_experts : 0), tokens * d(h));
      const double routed = tokens * d(moe.top_k);
      const double rows = routed * options_.moe_load_factor;
      elementwise("moe.permute", OpKind::kElementwise, rows * d(h), 0.0, tokens * d(h), 0.0);
      // Experts are gated MLPs (biased in gpt-oss); their permuted input is saved by the up GEMM.
      mlp("moe.experts", rows, moe.expert_ffn, moe.num_experts, moe.expert_bias, true, true);
      // Weighted sum of each token's top_k expert outputs; the gate gradient needs those outputs.
      elementwise("moe.combine", OpKind::kElementwise, tokens * d(h), 2.0 * d(moe.top_k), routed * d(h) + routed,
                  routed * d(h) * dt_);
      if (moe.num_shared_experts > 0) {
        const int64_t fs = moe.num_shared_experts * moe.shared_expert_ffn;
        mlp("moe.shared", tokens, fs, 1, false, false, true);  // input saved by moe.router
        if (moe.shared_expert_gate) {
          gemm("moe.shared_gate", OpKind::kGemm, tokens, 1, h, 1, h, 0.0);
          // sigmoid(g) * shared_out: backward needs the shared output and the gate.
          elementwise("moe.shared_gate.apply", OpKind::kElementwise, tokens * d(h), 2.0, tokens * d(h) + tokens,
                      (tokens * d(h) + tokens) * dt_);
        }
        residual("moe.shared_add", tokens * d(h));
      }
    }
    if (s.dropout.hidden > 0.0) dropout("mlp.dropout", tokens * d(h));
    residual("mlp.residual", tokens * d(h));
  }

  // ---- video diffusion transformer (Family::kDit; see the model card of model_spec.h)

  // adaLN modulation x * (1 + scale) + shift with per-sample vectors; its backward needs x for the
  // scale gradient. `params`: the block's shift/scale/gate table, attached to the first modulation.
  void modulate(std::string name, double elements, int64_t params = 0) {
    elementwise(std::move(name), OpKind::kElementwise, elements, 2.0, elements, elements * dt_, params);
  }
  // Gated residual branch y * gate; its backward needs y for the gate gradient.
  void gate(std::string name, double elements) {
    elementwise(std::move(name), OpKind::kElementwise, elements, 1.0, elements, elements * dt_);
  }

  void dit_block() {
    const ModelSpec& s = spec_;
    const DitSpec& v = s.dit;
    const int64_t h = s.hidden;
    const double tokens = d(shape_.tokens());
    const double text = d(shape_.batch * v.text_tokens);
    const double th = tokens * d(h);
    const double rms = kRmsNormFlops;

    // Self-attention over all video tokens (no mask), 3D RoPE on q and k.
    norm("attn.norm", tokens, h, 0);
    modulate("attn.modulate", th, 6 * h);
    gemm("attn.qkv", OpKind::kGemm, tokens, 3 * h, h, 1, 3 * h * h + 3 * h, th);
    if (s.qk_norm) elementwise("attn.qk_norm", OpKind::kNorm, 2.0 * th, rms, 2.0 * th, 2.0 * th * dt_, 2 * h);
    rope("attn.rope", 2.0 * th);
    const double kv = d(shape_.kv_len());
    attention_core("attn.core", shape_.kv_len(), attended_pairs(shape_.seq, shape_.past, 0, AttentionFlops::kFull), kv,
                   AttentionMask::kNone);
    gemm("attn.out", OpKind::kGemm, tokens, h, h, 1, h * h + h, th);
    gate("attn.gate", th);
    residual("attn.residual", th);

    // Cross-attention: queries from the video tokens, keys and values from the projected text, which
    // every block shares (saved once, by cond.text.linear_2).
    if (v.cross_attn_norm) norm("xattn.norm", tokens, h, 2 * h);
    gemm("xattn.q", OpKind::kGemm, tokens, h, h, 1, h * h + h, th);
    gemm("xattn.kv", OpKind::kGemm, text, 2 * h, h, 1, 2 * h * h + 2 * h, 0.0);
    if (s.qk_norm) {
      elementwise("xattn.qk_norm", OpKind::kNorm, th + text * d(h), rms, th + text * d(h), (th + text * d(h)) * dt_,
                  2 * h);
    }
    attention_core("xattn.core", v.text_tokens, d(shape_.seq) * d(v.text_tokens), d(v.text_tokens),
                   AttentionMask::kNone);
    gemm("xattn.out", OpKind::kGemm, tokens, h, h, 1, h * h + h, th);
    residual("xattn.residual", th);

    // MLP (GeLU-tanh) with its adaLN modulation and gate.
    norm("mlp.norm", tokens, h, 0);
    modulate("mlp.modulate", th);
    mlp("mlp", tokens, s.ffn, 1, true, true, false);
    gate("mlp.gate", th);
    residual("mlp.residual", th);
  }

  void dit_pre() {
    const ModelSpec& s = spec_;
    const DitSpec& v = s.dit;
    const int64_t h = s.hidden;
    const double tokens = d(shape_.tokens());
    const double b = d(shape_.batch);
    const double text = d(shape_.batch * v.text_tokens);
    const int64_t patch_in = v.in_channels * v.patch_volume();
    // Patch embedding: a Conv3d with stride = kernel is a GEMM over C x pt x ph x pw inputs per token.
    gemm("patch_embed", OpKind::kGemm, tokens, h, patch_in, 1, patch_in * h + h, tokens * d(patch_in));
    // Timestep MLP and the shared modulation projection: once per sample.
    const double silu = activation_flops(Activation::kSilu);
    gemm("cond.time.linear_1", OpKind::kGemm, b, h, v.freq_dim, 1, v.freq_dim * h + h, b * d(v.freq_dim));
    elementwise("cond.time.act", OpKind::kElementwise, b * d(h), silu, b * d(h), b * d(h) * dt_);
    gemm("cond.time.linear_2", OpKind::kGemm, b, h, h, 1, h * h + h, b * d(h));
    elementwise("cond.time_proj.act", OpKind::kElementwise, b * d(h), silu, b * d(h), b * d(h) * dt_);
    gemm("cond.time_proj", OpKind::kGemm, b, 6 * h, h, 1, 6 * h * h + 6 * h, b * d(h));
    // Text MLP over the text encoder's output; its result (the context every block's cross-attention
    // keys/values read) is saved once here, on top of the GEMM's own input.
    gemm("cond.text.linear_1", OpKind::kGemm, text, h, v.text_dim, 1, v.text_dim * h + h, text * d(v.text_dim));
    elementwise("cond.text.act", OpKind::kElementwise, text * d(h), activation_flops(Activation::kGeluTanh), text * d(h),
                text * d(h) * dt_);
    gemm("cond.text.linear_2", OpKind::kGemm, text, h, h, 1, h * h + h, 2.0 * text * d(h));
  }

  void dit_post() {
    const ModelSpec& s = spec_;
    const int64_t h = s.hidden;
    const double tokens = d(shape_.tokens());
    const int64_t patch_out = s.dit.out_channels * s.dit.patch_volume();
    norm("final_norm", tokens, h, 0);
    modulate("final.modulate", tokens * d(h), 2 * h);
    gemm("proj_out", OpKind::kGemm, tokens, patch_out, h, 1, h * patch_out + patch_out, tokens * d(h));
    if (options_.include_loss) {
      // MSE against the flow-matching target, elementwise over the latent: difference, square, sum;
      // backward needs the difference (fp32).
      const double elements = tokens * d(patch_out);
      Op op;
      op.name = "loss";
      op.kind = OpKind::kElementwise;
      op.fwd_flops = Flops(elements * 3.0);
      op.bwd_flops = op.fwd_flops * 2.0;
      op.fwd_bytes_read = Bytes::from_double(2.0 * elements * dt_);
      op.fwd_bytes_written = Bytes::from_double(d(kFp32));
      op.saved_activations = Bytes::from_double(elements * d(kFp32));
      ops_.push_back(std::move(op));
    }
  }

  void pre() {
    const ModelSpec& s = spec_;
    const double tokens = d(shape_.tokens());
    const int64_t e = s.embed_dim();
    const int64_t h = s.hidden;
    embedding("embedding", tokens, e, s.vocab * e);
    if (e != h) gemm("embedding.project_in", OpKind::kGemm, tokens, h, e, 1, e * h, tokens * d(e));
    if (s.positions == PositionKind::kLearned) {
      embedding("position_embedding", tokens, h, (s.max_positions + s.position_offset) * h);
      residual("embedding.position_add", tokens * d(h));
    }
    if (s.dropout.embedding > 0.0) dropout("embedding.dropout", tokens * d(h));
  }

  void post() {
    const ModelSpec& s = spec_;
    const double tokens = d(shape_.tokens());
    const int64_t e = s.embed_dim();
    const int64_t h = s.hidden;
    if (s.final_norm) norm("final_norm", tokens, h);
    if (e != h) gemm("lm_head.project_out", OpKind::kGemm, tokens, e, h, 1, h * e, tokens * d(h));
    gemm("lm_head", OpKind::kGemm, tokens, s.vocab, e, 1, s.tied_embeddings ? 0 : s.vocab * e, tokens * d(e));
    if (options_.include_loss) {
      // Cross-entropy as Megatron-Core's vocab_parallel_cross_entropy runs it (PyTorch ops over fp32
      // logits, unfused): forward = upcast (read dt*V, write 4V), row max (read 4V), subtract (read
      // 4V, write 4V), exp in place (read 4V, write 4V), row sum (read 4V), divide in place, the
      // softmax kept for backward (read 4V, write 4V): dt*V + 20V read, 16V written per token.
      // Backward = scale the softmax by the upstream gradient (read 4V, write 4V) and downcast to the
      // logits' dtype (read 4V, write dt*V): 12V + dt*V. PyTorch's F.cross_entropy (log_softmax +
      // nll_loss, as torchtitan calls it) moves within 5% of the same total. The saved softmax is the
      // 4*s*b*v bytes of Korthikanti et al.
      const double logits = tokens * d(s.vocab);
      Op op;
      op.name = "loss";
      op.kind = OpKind::kElementwise;
      op.fwd_flops = Flops(logits * kLossFlops);
      op.bwd_flops = op.fwd_flops * 2.0;
      op.fwd_bytes_read = Bytes::from_double(logits * (dt_ + 5.0 * d(kFp32)));
      op.fwd_bytes_written = Bytes::from_double(logits * 4.0 * d(kFp32));
      op.bwd_bytes = Bytes::from_double(logits * (3.0 * d(kFp32) + dt_));
      op.saved_activations = Bytes::from_double(logits * d(kFp32));
      ops_.push_back(std::move(op));
    }
  }

 private:
  void embedding(std::string name, double tokens, int64_t width, int64_t params) {
    Op op;
    op.name = std::move(name);
    op.kind = OpKind::kEmbedding;
    op.params = params;
    op.bwd_flops = Flops(tokens * d(width));  // scatter-add of the output gradient into the table
    op.fwd_bytes_read = Bytes::from_double(tokens * d(width) * dt_ + tokens * d(kFp32));  // rows + ids
    op.fwd_bytes_written = Bytes::from_double(tokens * d(width) * dt_);
    ops_.push_back(std::move(op));
  }

  const ModelSpec& spec_;
  const Shape& shape_;
  const InventoryOptions& options_;
  double dt_;
  std::vector<Op> ops_;
};

void check_shape(const Shape& shape, const InventoryOptions& options) {
  ORRERY_CHECK(shape.batch >= 1 && shape.seq >= 1 && shape.past >= 0);
  ORRERY_CHECK(options.dtype_bytes >= 1 && options.dropout_mask_bytes >= 0 && options.moe_load_factor > 0.0);
}

Flops sum_flops(const std::vector<Op>& ops, FlopScope scope, bool backward) {
  Flops f;
  for (const Op& op : ops) {
    if (scope == FlopScope::kMatmul && !op.is_matmul()) continue;
    f += backward ? op.bwd_flops : op.fwd_flops;
  }
  return f;
}

Flops sum_flops(const Inventory& inv, FlopScope scope, bool backward) {
  Flops f = sum_flops(inv.pre_ops, scope, backward) + sum_flops(inv.post_ops, scope, backward);
  for (const LayerGroup& g : inv.groups) {
    f += sum_flops(g.ops, scope, backward) * static_cast<double>(g.layer_indices.size());
  }
  return f;
}

}  // namespace

std::vector<Op> layer_ops(const ModelSpec& spec, int64_t layer, const Shape& shape, const InventoryOptions& options) {
  ORRERY_CHECK(layer >= 0 && layer < spec.layers);
  check_shape(shape, options);
  OpBuilder b(spec, shape, options);
  if (spec.is_dit()) {
    b.dit_block();
    return b.take();
  }
  b.attention_block(layer);
  b.mlp_block(layer);
  return b.take();
}

Inventory build_inventory(const ModelSpec& spec, const Shape& shape, const InventoryOptions& options) {
  check_shape(shape, options);
  Inventory inv;
  inv.shape = shape;
  inv.options = options;
  {
    OpBuilder b(spec, shape, options);
    if (spec.is_dit()) b.dit_pre();
    else b.pre();
    inv.pre_ops = b.take();
  }
  // A layer's ops depend only on whether it is an MoE layer and whether it uses the sliding window.
  std::vector<std::pair<std::pair<bool, bool>, size_t>> kinds;
  for (int64_t l = 0; l < spec.layers; ++l) {
    const std::pair<bool, bool> key{spec.is_moe_layer(l), spec.is_sliding_layer(l)};
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == key; });
    if (it == kinds.end()) {
      LayerGroup g;
      g.ops = layer_ops(spec, l, shape, options);
      inv.groups.push_back(std::move(g));
      kinds.push_back({key, inv.groups.size() - 1});
      it = kinds.end() - 1;
    }
    inv.groups[it->second].layer_indices.push_back(l);
  }
  {
    OpBuilder b(spec, shape, options);
    if (spec.is_dit()) b.dit_post();
    else b.post();
    inv.post_ops = b.take();
  }
  return inv;
}

Flops forward_flops(const std::vector<Op>& ops, FlopScope scope) { return sum_flops(ops, scope, false); }
Flops backward_flops(const std::vector<Op>& ops, FlopScope scope) { return sum_flops(ops, scope, true); }

Bytes saved_activations(const std::vector<Op>& ops) {
  Bytes total;
  for (const Op& op : ops) total += op.saved_activations;
  return total;
}

Flops forward_flops(const Inventory& inv, FlopScope scope) { return sum_flops(inv, scope, false); }
Flops backward_flops(const Inventory& inv, FlopScope scope) { return sum_flops(inv, scope, true); }

Bytes saved_activations(const Inventory& inv) {
  Bytes total = saved_activations(inv.pre_ops) + saved_activations(inv.post_ops);
  for (const LayerGroup& g : inv.groups) {
    total += saved_activations(g.ops) * static_cast<int64_t>(g.layer_indices.size());
  }
  return total;
}

Flops training_flops_per_token(const ModelSpec& spec, int64_t seq, AttentionFlops attention) {
  InventoryOptions options;
  options.attention = attention;
  options.include_loss = false;
  const Inventory inv = build_inventory(spec, Shape::training(1, seq), options);
  return (forward_flops(inv) + backward_flops(inv)) / static_cast<double>(seq);
}

Bytes activation_bytes_per_layer(const ModelSpec& spec, int64_t layer, const Shape& shape,
                                 const InventoryOptions& options) {
  return saved_activations(layer_ops(spec, layer, shape, options));
}

}  // namespace orrery::model
