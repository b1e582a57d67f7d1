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
#pragma once

#include <cstdint>
#include <span>
#include <string>

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
};

// Calibration constants of one GPU (see compute_model.cc for values and sources).
struct Calibration {
  std::string name;               // the calibration's id, e.g. "hopper" or "ampere"
  double gemm_efficiency = 0.8;   // achievable fraction of dense peak for a large, well-shaped GEMM
  double attention_efficiency = 0.6;  // fraction of peak for FlashAttention forward at long sequence
  double memory_efficiency = 0.85;    // achievable fraction of datasheet HBM bandwidth
  Time launch_overhead = Time::us(4);  // per kernel
  std::string source;             // where the constants come from
};

// The default calibration for a GPU from the catalog (by architecture).
Calibration default_calibration(const hw::GpuSpec& gpu);

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

  // A kernel bound by memory traffic: `bytes` read plus written.
  Time memory_bound(Bytes bytes) const;

  // An inventory op (model/op_inventory.h) for one pass: GEMM and router by their GEMM shape,
  // attention by its shape, the rest by bytes moved. Backward of a GEMM is two GEMMs (dgrad, wgrad).
  Time op(const model::Op& op, const model::Shape& shape, const model::ModelSpec& spec, hw::DType dtype,
          Pass pass) const;

  const hw::GpuSpec& gpu() const { return *gpu_; }
  const Calibration& calibration() const { return calibration_; }

 private:
  const hw::GpuSpec* gpu_;
  Calibration calibration_;
};

}  // namespace orrery::compute
