// Compute model: how long one GPU kernel (GEMM, attention, memory-bound op) takes.
//
// Model card (the contract; the calibration and its sources live in compute_model.cc and
// docs/compute.md)
//   What is modelled: the execution time of one kernel on one GPU, from the GPU's datasheet
//   figures (dense peak FLOP/s per dtype, HBM bandwidth) and a small set of calibration constants
//   per GPU architecture (achievable fraction of peak, tile shapes for wave quantization, launch
//   overhead). Used by the serving simulator (iteration time of a batch) and the training
//   simulator (op times of a micro-batch), so both agree on what a GEMM costs.
//   GEMM: C[m x n] = A[m x k] B[k x n], `count` independent GEMMs (experts, batched heads).
//   Attention: FlashAttention-style fused kernels; prefill and decode mixed in one varlen batch.
//   Memory-bound ops: bytes moved over the achievable HBM bandwidth.
//   Every returned time includes the kernel launch overhead once per call.
// Range of validity: NVIDIA datacenter GPUs in the catalog (Ampere, Hopper, Blackwell); AMD entries
//   use the same roofline with their datasheet figures.
//
// Equations (constants: Calibration; values and sources: compute_model.cc and docs/compute.md)
//   GEMM       the best (tile, split-K) candidate of the architecture's list, as cuBLAS's heuristic:
//                CTAs = count*ceil(m/tm)*ceil(n/tn)*s, waves = ceil(CTAs/SMs),
//                t_c = waves * max(2*tm*tn*ceil(k/s) / (peak/SMs * gemm_efficiency),
//                                  dtype*(tm+tn)*ceil(k/s) / (L2 bandwidth/SMs))   (operand feed)
//                t_m = dtype*count*(m*k + k*n + m*n) [+ 4*2*m*n*s split-K partials] / (HBM * gemm_memory_efficiency)
//                t   = (t_c^p + t_m^p)^(1/p) + launch, p = transition_sharpness (a smooth max)
//   attention  t_c = sum_i F_i / (peak * e * L_i/(L_i + half)) / occ, per pass with that pass's
//              AttentionRate (e, half, c): F_i = 2*heads*pairs_i*(dqk+dv) (causal pairs, window capped;
//              backward 2.5x: 5 matmuls vs 2, FlashAttention-2), L_i = keys sequence i reads,
//              occ = C / (C + c * SMs) with C = sum_i heads*ceil(q_i/q_tile) CTAs (c = 0: occ = 1; Hopper's
//              constants are fit to kernels measured on an H100, data/measured/h100-sxm);
//              t_m = (Q + K/V read + O) bytes / min(HBM * memory_efficiency, units * in-flight/latency)
//              with units = the blocks streaming K/V at once (decode: sequences*kv_heads; prefill: the
//              CTAs, heads*ceil(q/q_tile) per sequence), 2x the bytes backward; smooth max as for GEMMs.
//   memory-bound  bytes / (HBM * memory_efficiency) + launch; unvectorized kernels are further
//              capped by Little's law: SMs*max_threads_per_sm*access_bytes / memory_latency.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "hw/hw_catalog.h"
#include "model/op_inventory.h"

namespace orrery::compute {

enum class Pass { kForward, kBackward };

struct GemmShape {
  double m = 0.0;     // rows; may be fractional (mean rows per routed expert)
  int64_t n = 0;
  int64_t k = 0;
  int64_t count = 1;  // independent GEMMs of this shape
  // Bytes per element of the k x n operand (the weights) when they are stored narrower than the
  // compute dtype and widened inside the kernel (weight-only quantization: MXFP4 0.53125, fp8 1);
  // 0: the compute dtype's. The math runs at the compute dtype's rate either way.
  double weight_bytes = 0.0;
};

// One sequence's share of an attention kernel: `q` new (query) tokens attending to `kv` tokens
// (the q new ones included; causal within the new ones). Prefill: q = kv = prompt (or chunk with
// kv = cached + chunk). Decode: q = 1, kv = context.
struct AttentionSeq {
  int64_t q = 1;
  int64_t kv = 1;
};

struct AttentionHeads {
  int64_t heads = 1;        // query heads on this GPU
  int64_t kv_heads = 1;     // key/value heads on this GPU
  int64_t head_dim_qk = 128;
  int64_t head_dim_v = 128;
  int64_t window = 0;       // sliding window in tokens; 0 = none
  bool causal = true;
  bool dropout = false;     // attention dropout inside the fused kernel (AttentionRate::dropout_pairs_per_s)
};

// One output tile shape a GEMM kernel can be instantiated with (rows x columns of C per CTA).
struct GemmTile {
  int64_t m = 128;
  int64_t n = 128;
};

// The rate of one pass of a fused attention kernel: e * L/(L + half_length) of the dense peak, times the
// occupancy C / (C + ctas_per_sm_half * SMs) of its C CTAs (0: no occupancy term).
// With attention dropout the kernel also draws a Philox mask element per attended (query, key) pair and
// head, in the forward and again in the backward (the mask is regenerated, not saved): that work takes
// pairs / dropout_pairs_per_s on top (0: not measured for this library, no cost).
struct AttentionRate {
  double efficiency = 0.6;
  double half_length = 512.0;
  double ctas_per_sm_half = 0.0;
  double dropout_pairs_per_s = 0.0;
};

// Calibration constants of one GPU (see compute_model.cc for values and sources).
struct Calibration {
  std::string name;               // the calibration's id, e.g. "hopper" or "ampere"
  double gemm_efficiency = 0.8;   // achievable fraction of dense peak for a large, well-shaped GEMM
  // fp8 GEMMs: their achievable fraction of the fp8 peak over the bf16 GEMMs' fraction of the bf16
  // peak (fp8 runs at peak_fp8 x gemm_efficiency x this); 1 where nothing is measured.
  double fp8_gemm_factor = 1.0;
  AttentionRate attention;           // forward of the fused attention kernel
  AttentionRate attention_backward;  // its backward
  double memory_efficiency = 0.85;    // achievable fraction of datasheet HBM bandwidth (streaming kernels)
  double tensor_clock_factor = 1.0;   // compute-bound rates under a power limit below TDP (1: none)
  // A GEMM that adds its product into an fp32 buffer (C = C + A B, beta 1: Megatron's weight gradients
  // accumulated into fp32 main gradients) reads C and writes it in fp32 instead of writing a 16-bit
  // output; this fraction of that extra traffic's time at the datasheet bandwidth is not hidden behind
  // the main loop (ComputeModel::fp32_accumulate; 0: none).
  double fp32_accumulate_exposure = 0.0;
  Time launch_overhead = Time::us(4);  // per kernel
  std::string source;             // where the constants come from

  // Added with the calibrated model (docs/compute.md). sm_count == 0: unknown, no wave quantization
  // and no parallelism caps (a plain roofline).
  int64_t sm_count = 0;                  // streaming multiprocessors (AMD: compute units)
  int64_t max_threads_per_sm = 2048;     // resident threads per SM (CUDA compute-capability table)
  double gemm_memory_efficiency = 0.8;   // fraction of HBM bandwidth a weight-streaming (skinny) GEMM reaches
  double transition_sharpness = 5.0;     // p of the smooth max (t_c^p + t_m^p)^(1/p)
  std::vector<GemmTile> tiles;           // CTA tile shapes the GEMM library picks from; empty: {128x128}
  int64_t max_split_k = 8;               // largest split-K factor tried when tiles do not fill the SMs
  int64_t attention_q_tile = 128;  // query rows per attention CTA (FlashAttention-2/3 and cuDNN on Hopper: 128)
  Time memory_latency = Time::ns(434);   // DRAM round trip seen by a thread (Little's law caps)
  Bytes decode_bytes_in_flight = Bytes(16384);  // bytes one decode-attention CTA (seq, kv head) keeps in flight
  double l2_bytes_per_flop = 0.0;        // L2->SM bandwidth per dense fp16 FLOP/s; 0 = unlimited
};

// Per-op times of one transformer layer, named as vidur's mlp.csv columns (emb, input_layernorm,
// attn_pre_proj, attn_rope, attn_post_proj, post_attention_layernorm, mlp_up_proj, mlp_act,
// mlp_down_proj, add; MoE layers add moe_router). The attention kernel itself is not included.
struct LayerOpTimes {
  struct Entry {
    std::string_view name;  // static string
    Time time;
  };
  std::vector<Entry> ops;

  // The op's time; Time::zero() when the layer has no op of that name.
  Time get(std::string_view name) const;
  // Every op but the embedding lookup (which runs once per forward pass, not per layer).
  Time linear_total() const;
};

// The default calibration for a GPU from the catalog (by architecture).
Calibration default_calibration(const hw::GpuSpec& gpu);

// The fused-attention library a software stack runs; its long-sequence efficiency on an architecture
// comes from published kernel benchmarks (compute_model.cc, docs/compute.md):
//   fa2   FlashAttention-2 (PyTorch SDPA's default flash backend; Dao 2023)
//   cudnn cuDNN fused attention (Transformer Engine / Megatron-Core; PyTorch SDPA only on request)
//   fa3   FlashAttention-3 (Hopper only; Shah et al. 2024)
// kDefault keeps the calibration's own (Ampere: FlashAttention-2; Hopper and Blackwell: cuDNN).
enum class AttentionKernel { kDefault, kFlashAttention2, kCudnn, kFlashAttention3 };
std::string_view attention_kernel_name(AttentionKernel k);
// "default", "fa2", "cudnn", "fa3"; InputError at `where` with the nearest name otherwise.
AttentionKernel parse_attention_kernel(std::string_view name, const Where& where);
// `c` with the attention efficiency of kernel `k` on `gpu`'s architecture. InputError at `where` when
// no published figure exists for that pair (FlashAttention-3 on Ampere, any kernel on an architecture
// without a calibration), naming the kernels that have one.
Calibration with_attention_kernel(Calibration c, const hw::GpuSpec& gpu, AttentionKernel k, const Where& where);

class ComputeModel {
 public:
  explicit ComputeModel(const hw::GpuSpec& gpu);
  ComputeModel(const hw::GpuSpec& gpu, Calibration calibration);

  // REQUIRES: the GPU has a dense peak for `dtype` (catalog), m >= 0, n, k, count >= 1.
  Time gemm(const GemmShape& shape, hw::DType dtype) const;

  // Fused attention over a batch of sequences of different lengths. Backward: dQ, dK, dV with
  // the forward's score recompute (FlashAttention-2), about 2.5x the forward's FLOPs.
  Time attention(std::span<const AttentionSeq> seqs, const AttentionHeads& heads, hw::DType dtype,
                 Pass pass) const;

  // What accumulating a GEMM's product into an fp32 C inside the GEMM adds to it (the epilogue reads C
  // and writes D in fp32, 8 B per output element, where a plain GEMM writes out_dtype):
  // fp32_accumulate_exposure x count x m x n x (8 - bytes(out_dtype)) / datasheet HBM bandwidth.
  Time fp32_accumulate(const GemmShape& shape, hw::DType out_dtype) const;

  // A kernel bound by memory traffic: `bytes` read plus written.
  Time memory_bound(Bytes bytes) const;

  // An unvectorized elementwise kernel (one `access_bytes` load or store in flight per thread):
  // memory_bound, but no faster than Little's law allows with every thread of every SM waiting on
  // DRAM: SMs * max_threads_per_sm * access_bytes / memory_latency. REQUIRES: access_bytes >= 1.
  Time scalar_memory_bound(Bytes bytes, int64_t access_bytes) const;

  // Per-layer times of the token-wise ops of a dense (or MoE) transformer layer for `tokens` tokens
  // under tensor parallelism `tp` (heads/tp, max(1, kv_heads/tp), ffn/tp, vocab/tp), with the
  // kernels of vLLM/Sarathi-Serve that vidur profiled (see docs/compute.md). The TP all-reduces are
  // not included. Throws InputError when tp does not divide the heads or the GPU lacks `dtype`.
  LayerOpTimes linear_layer_ops(const model::ModelSpec& spec, int64_t tokens, int tp, hw::DType dtype) const;

  // An inventory op (model/op_inventory.h) for one pass: GEMM and router by their GEMM shape,
  // attention by its shape, the rest by bytes moved. Backward of a GEMM is two GEMMs (dgrad, wgrad).
  Time op(const model::Op& op, const model::Shape& shape, const model::ModelSpec& spec, hw::DType dtype,
          Pass pass) const;

  const hw::GpuSpec& gpu() const { return *gpu_; }
  const Calibration& calibration() const { return calibration_; }

 private:
  // FLOP/s of one attention pass whose sequences read `length` keys, with `ctas` CTAs in all (0: full
  // occupancy), and the occupancy factor alone.
  double attention_rate(const AttentionRate& r, double peak, double length, double ctas) const;
  double attention_occupancy(const AttentionRate& r, double ctas) const;
  // Achievable bytes/s of an attention kernel with `units` (sequence, kv head) blocks.
  double attention_bandwidth(double units) const;

  const hw::GpuSpec* gpu_;
  Calibration calibration_;
  double l2_per_sm_ = 0.0;  // bytes/s of L2 bandwidth one SM gets (0 = unlimited)
};

}  // namespace orrery::compute
