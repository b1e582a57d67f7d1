// Op inventory: the ops of a decoder-only transformer for one shape, with FLOPs, bytes and saved
// activations.
//
// Model card
//   What is modelled: per layer, the list of unfused ops a framework runs (norms, projections, the
//   attention core, activation, dropout, residual adds, MoE router / permutation / experts / combine)
//   plus the model-level ops (embedding, final norm, LM head, loss). Each op carries its GEMM shape,
//   parameters, forward and backward FLOPs, bytes read and written in forward (for a roofline of
//   memory-bound ops) and the activation bytes it saves for backward. Fusion, recomputation,
//   tensor/sequence/context parallelism and communication are the runtime's business (train/, serve/).
//
//   Shapes: `batch` sequences of `seq` new tokens, each after `past` cached tokens. Training and
//   prefill: past = 0. Decode: seq = 1 and past = context - 1, so each new token attends to `context`
//   tokens (itself included).
//
//   FLOPs (multiply-add = 2 FLOPs):
//     GEMM            forward 2*m*n*k*count; backward 2x forward (dgrad + wgrad).
//     attention core  forward 2*b*a*P*(dqk + dv), P = attended (query, key) pairs per sequence:
//                     kFull: seq*kv_len (the PaLM convention, T*T for training); kCausal: query i
//                     attends past+i+1 keys, sum = seq*past + seq*(seq+1)/2; a sliding window w caps
//                     each query at w keys. Backward 2x forward (recompute under FlashAttention, 2.5x,
//                     is a runtime choice). Softmax and masking FLOPs are not counted.
//     MoE experts     rows per expert m = tokens*top_k/E * moe_load_factor (1 = the average; > 1 models
//                     capacity padding or the busiest expert); FLOPs 2*m*n*k*E.
//     elementwise     nominal per-element counts (RMSNorm 4, LayerNorm 8, SiLU*mul 5, GeLU 8, ReLU 1,
//                     add 1, dropout 2, RoPE 3); backward 2x forward. These are for rooflines only;
//                     model FLOPs (FlopScope::kMatmul, the MFU convention) leave them out.
//   Saved activations (Korthikanti et al. 2022, arXiv 2205.05198, Sec. 4.1): each op saves the inputs
//   its backward needs, in the activation dtype; dropout masks take dropout_mask_bytes per element;
//   an input already saved by another op is not counted twice (q/k/v projections share the norm
//   output; the MoE router and shared experts share it too). Without FlashAttention the attention
//   core saves Q, K, V, the softmax output (b*a*s*kv), and with attention dropout its mask and output;
//   with FlashAttention it saves Q, K, V and the fp32 log-sum-exp (4*b*a*s bytes). Norm statistics
//   (mean, rstd) are not counted, as in Korthikanti et al. For a GPT layer with dropout this gives
//   s*b*h*(34 + 5*a*s/h) bytes at 2-byte activations.
//   MLA (DeepSeek-V3) is modelled in its unabsorbed form: K and V are decompressed per head, so the
//   attention core uses dqk = qk_nope + qk_rope and dv = v_head_dim. The absorbed form used for decode
//   by serving engines is not modelled.
//
//   Video DiT (Family::kDit): per block adaLN-modulated self-attention without a mask over the s video
//   tokens, cross-attention (q from the video tokens, k/v over the T text tokens, kv length T), a GeLU
//   MLP and gated residuals; before the blocks the patch embedding (a GEMM over C*pt*ph*pw inputs), the
//   timestep MLP (once per sample) and the text MLP (over the text tokens); after them the output
//   modulation, projection and an elementwise MSE loss. Forward FLOPs per block and video token:
//   2*(6h^2 + 2hf) + 4*s*h + 4*T*h + 4*T*h^2/s. Attention ops carry their mask (Op::mask); a DiT's
//   attention FLOPs are full whatever InventoryOptions::attention says.
//
// Range of validity: dense transformers and token-choice top-k MoE, Wan-style video DiTs; no pipeline
// or tensor split.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/units.h"
#include "model/model_spec.h"

namespace orrery::model {

enum class OpKind { kGemm, kAttention, kElementwise, kNorm, kEmbedding, kRouter };
std::string_view to_string(OpKind k);

// C[m x n] = A[m x k] B[k x n], `count` times (experts, or batch x heads). count == 0: not a GEMM.
struct GemmDims {
  double m = 0.0;  // rows per GEMM; a mean, possibly fractional, for routed experts
  int64_t n = 0;
  int64_t k = 0;
  int64_t count = 0;

  Flops flops() const {
    return Flops(2.0 * m * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(count));
  }
};

// The mask an attention kernel applies (what it computes, whatever the FLOP convention).
enum class AttentionMask {
  kCausal,  // decoder self-attention: query i sees keys up to past + i
  kNone,    // every query sees every key: DiT self-attention and cross-attention
};

struct Op {
  std::string name;  // "attn.qkv", "attn.core", "mlp.up_gate", "moe.router", "moe.experts.up_gate", ...
  OpKind kind = OpKind::kElementwise;
  GemmDims gemm;               // the GEMM shape (attention: the Q K^T batched GEMM)
  int64_t params = 0;          // parameters this op owns
  Flops fwd_flops;
  Flops bwd_flops;
  Bytes fwd_bytes_read;
  Bytes fwd_bytes_written;
  // Memory traffic of the backward pass of a memory-bound op; unset: twice the forward's (it reads
  // the output gradient and the saved input and writes the input gradient).
  std::optional<Bytes> bwd_bytes;
  Bytes saved_activations;     // bytes kept from forward for backward (training)
  // Attention ops: the kernel's mask; the kv length is gemm.n (seq + past for self-attention, the text
  // tokens for a DiT's cross-attention "xattn.core").
  AttentionMask mask = AttentionMask::kCausal;

  // GEMM, attention and router ops: the FLOPs that count as model FLOPs.
  bool is_matmul() const { return kind == OpKind::kGemm || kind == OpKind::kAttention || kind == OpKind::kRouter; }
  // Bytes a memory-bound op moves in its backward pass.
  Bytes backward_bytes() const { return bwd_bytes ? *bwd_bytes : (fwd_bytes_read + fwd_bytes_written) * 2; }
};

struct Shape {
  int64_t batch = 1;  // sequences (micro-batch)
  int64_t seq = 0;    // new tokens per sequence
  int64_t past = 0;   // cached tokens per sequence before the new ones

  static Shape training(int64_t batch, int64_t seq) { return Shape{batch, seq, 0}; }
  // `batch` new tokens, each attending to `context` tokens including itself. REQUIRES: context >= 1.
  static Shape decode(int64_t batch, int64_t context) { return Shape{batch, 1, context - 1}; }
  int64_t tokens() const { return batch * seq; }
  int64_t kv_len() const { return past + seq; }
};

enum class AttentionFlops {
  kCausal,  // each query attends to keys at or before it (what causal kernels compute)
  kFull,    // every query attends to every key: T*T, the PaLM / Megatron MFU convention
};

struct InventoryOptions {
  int64_t dtype_bytes = 2;                       // activations and weights
  AttentionFlops attention = AttentionFlops::kCausal;
  bool flash_attention = false;                  // fused attention: no materialized score matrix
  double moe_load_factor = 1.0;                  // hook for load imbalance / capacity factor
  bool include_loss = true;                      // append the cross-entropy op (training)
  int64_t dropout_mask_bytes = 1;
  // Unfused elementwise kernels, as PyTorch eager modules run them (torchtitan without torch.compile):
  // RMSNorm in fp32 op by op, RoPE through complex fp32 tensors, and the gated activation as two
  // kernels (the bytes per element are in op_inventory.cc). false: fused kernels (Megatron-Core and
  // Transformer Engine, torch.compile, vLLM).
  bool eager = false;
};

enum class FlopScope {
  kMatmul,  // GEMM, attention and router ops only (model FLOPs, MFU)
  kAll,     // plus the nominal elementwise FLOPs
};

// A set of identical layers (same dense/MoE kind and attention window).
struct LayerGroup {
  std::vector<int64_t> layer_indices;
  std::vector<Op> ops;
};

struct Inventory {
  Shape shape;
  InventoryOptions options;
  std::vector<Op> pre_ops;           // embedding lookups, positions, OPT project_in, embedding dropout
  std::vector<LayerGroup> groups;    // every layer appears in exactly one group
  std::vector<Op> post_ops;          // final norm, OPT project_out, LM head, loss
};

// Number of (query, key) pairs one sequence attends over. window == 0: no window.
double attended_pairs(int64_t seq, int64_t past, int64_t window, AttentionFlops mode);

// The ops of one layer. REQUIRES: spec validated, 0 <= layer < spec.layers, shape.batch, shape.seq >= 1,
// shape.past >= 0.
std::vector<Op> layer_ops(const ModelSpec& spec, int64_t layer, const Shape& shape,
                          const InventoryOptions& options = {});

// All ops of the model for one shape (one forward + backward of the micro-batch).
Inventory build_inventory(const ModelSpec& spec, const Shape& shape, const InventoryOptions& options = {});

Flops forward_flops(const std::vector<Op>& ops, FlopScope scope = FlopScope::kMatmul);
Flops backward_flops(const std::vector<Op>& ops, FlopScope scope = FlopScope::kMatmul);
Bytes saved_activations(const std::vector<Op>& ops);

// Whole-model sums over pre, layer and post ops.
Flops forward_flops(const Inventory& inv, FlopScope scope = FlopScope::kMatmul);
Flops backward_flops(const Inventory& inv, FlopScope scope = FlopScope::kMatmul);
Bytes saved_activations(const Inventory& inv);

// Model FLOPs of forward + backward per trained token at sequence length seq (batch 1, matmul scope).
// With AttentionFlops::kFull this is 6N + 12*L*a*dh*T for a dense MHA/GQA model (PaLM, App. B),
// N = spec.matmul_params_per_token().
Flops training_flops_per_token(const ModelSpec& spec, int64_t seq, AttentionFlops attention);

// Activation bytes one layer saves for backward (no recomputation).
Bytes activation_bytes_per_layer(const ModelSpec& spec, int64_t layer, const Shape& shape,
                                 const InventoryOptions& options = {});

}  // namespace orrery::model
