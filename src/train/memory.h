// Per-GPU memory of a training plan: weights, gradients, optimizer states, activations, temporary
// and communication buffers, CUDA context and allocator overhead, per pipeline stage; the peak, the
// rank that holds it, and whether it fits.
//
// Model card
//   Model states (Rajbhandari et al. 2020, "ZeRO", SC'20, Sec. 3 and 5, for mixed-precision Adam with
//   Psi parameters on a rank and N_d ranks sharing the shards):
//     weights    w * Psi                 (w = 2: bf16/fp16 working copy)
//     gradients  g * Psi                 (g = Plan::grad_bytes: 4 for Megatron's and FSDP's fp32 main
//                                         gradients, 2 for the ZeRO paper's fp16 gradients)
//     optimizer  12 * Psi                (fp32 master copy 4 + Adam moments 4 + 4; Plan::master_weights
//                                         and Plan::optimizer_dtype change the 4 and the 4 + 4: a 16-bit
//                                         master or Apex's bf16 remainders 2, none 0; 16-bit moments 2 + 2)
//     ZeRO-1: optimizer / N_d; ZeRO-2: + gradients / N_d; ZeRO-3: + weights / N_d. With g = 2 this is
//     the paper's (2 + 2 + 12) Psi, (2 + 2 + 12/N_d) Psi, (2 + (2 + 12)/N_d) Psi, (2 + 2 + 12) Psi/N_d.
//     ZeRO-3 as FSDP implements it keeps the fp32 master as the sharded parameter (counted under
//     optimizer) and materializes bf16 copies of (1 + prefetch + unsharded) layers at a time (weights).
//     HSDP: N_d = the shard group. Routed experts under EP: N_d = the expert-data-parallel ranks,
//     the shard group's over ep (Plan::expert_shard_size; their replicas), at least 1. Optimizer
//     offload of a share F (Plan::optimizer_offload_fraction): 1 - F of the optimizer states on the GPU.
//   Activations per micro-batch: train/layer_costs.h (Korthikanti et al. 2022, Sec. 4) summed over the
//     stage's layers; full recompute on N layers keeps the input only on those N layers.
//     Micro-batches in flight on pipeline stage s of p with m micro-batches (Narayanan et al. 2021, SC'21,
//     Sec. 2.2; Korthikanti Sec. 4.2.3):  GPipe m;  1F1B min(p - s, m);  ZB-H1 as train/schedule.h runs
//     it min(p, m) on every stage (stage s defers W of micro-batch j until after B of j + s, and W still
//     reads the layers' inputs, so s more are held: Qi et al.'s p M_B bound, reached on every stage);
//     interleaved with v
//     virtual stages: min(2(p - s - 1) + (v - 1)p + 1, m v) chunks of L/(p v) layers (Megatron-LM's
//     warm-up count plus the one in steady state; on stage 0 this is L (1 + (p-1)/(p v)) layers' worth,
//     Korthikanti's factor). Activation offload keeps two layers' worth of the offloaded layers on
//     the GPU (the one computed and the one whose copy is in flight): the rest lives in host memory.
//   Host memory (StageMemory::host): the offloaded activations of every micro-batch in flight and the
//     optimizer's host share with its gradients, against the node's host memory per GPU when known.
//   Temporary buffers: the backward working set of one layer (its full activations when it is
//     recomputed, plus the output gradient and input gradient, 2 x layer input), and on the last stage
//     the loss's backward beside its saved fp32 softmax (4 b s V / tp, under activations): Megatron's
//     vocab_parallel_cross_entropy writes the gradient into that buffer in place and the upcast's
//     backward adds the logits' gradient in their dtype (dt b s V / tp); PyTorch's F.cross_entropy
//     (log_softmax + nll_loss, Plan::eager) holds nll_loss's dense fp32 gradient and log_softmax's fp32
//     input gradient at once (8 b s V / tp).
//   Communication buffers: NCCL's per-communicator buffers, 2 peers x 8 channels x 4 MiB (NCCL_BUFFSIZE
//     default, Simple protocol) = 64 MiB for each group with more than one rank; ZeRO-3 adds the
//     gathered-parameter and reduce-scatter buffers (counted under weights and gradients).
//   CUDA context and libraries: MemoryConstants::cuda_context (an assumption, 512 MiB: CUDA context,
//     cuBLAS workspace and kernel images as commonly reported for PyTorch on A100/H100).
//   ZeRO-3 (FSDP) root unit: the parameters outside the transformer layers (embedding, final norm, LM
//     head) form the root unit, which FSDP does not reshard after forward (FSDP1's _post_forward_reshard
//     frees non-root handles only; FSDP2's lazy_init clears the root's post-forward mesh): held gathered
//     through the step, and the LM head's unsharded gradient (param dtype) from its backward to the end
//     of the backward, when the root's reduce-scatter runs.
//   Allocator overhead: the caching allocator's reservation beyond the tensors, from a trace of the
//     step's tensors through a model of PyTorch's allocator (Plan::allocator; train/allocator_trace.h),
//     plus MemoryConstants::allocator_fraction of the tensors (an assumption, default 0). With
//     AllocatorMode::kNone it is 0: the figure torch reports as max_memory_allocated.
//   The capacity is the catalog's memory (what the driver reports).
// Range of validity: Adam-family optimizers with mixed precision; no memory-saving tricks beyond the plan.
#pragma once

#include <cstdint>
#include <vector>

#include "hw/hw_catalog.h"
#include "model/model_spec.h"
#include "train/layer_costs.h"
#include "train/plan.h"

namespace orrery::train {

struct MemoryConstants {
  int64_t weight_bytes = 2;     // working copy per parameter
  Bytes nccl_per_group = Bytes::MiB(64);
  Bytes cuda_context = Bytes::MiB(512);
  double allocator_fraction = 0.0;
};

struct MemoryBreakdown {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer;
  Bytes activations;
  Bytes temporary;
  Bytes communication;
  Bytes context;
  Bytes allocator;

  Bytes tensors() const { return weights + gradients + optimizer + activations + temporary + communication; }
  Bytes total() const { return tensors() + context + allocator; }
};

struct StageMemory {
  int64_t stage = 0;
  int64_t layers = 0;              // transformer layers on the stage (all its virtual chunks)
  int64_t params = 0;              // parameters on one rank of the stage
  int64_t expert_params = 0;       // of them, routed experts' (LayerCost::expert_params)
  double inflight_microbatches = 0;  // micro-batches' worth of the stage's activations held at peak
  // Of them, each virtual chunk's micro-batches held when the stage holds the most activations (one
  // entry, inflight_microbatches, without interleaving): interleaved_peak_held in memory.cc.
  std::vector<double> chunk_inflight;
  std::vector<Bytes> chunk_activations;  // one micro-batch's saved activations per virtual chunk (vp)
  std::vector<Bytes> chunk_offloaded;    // of those, the part that goes to host memory (activation offload)
  double offload_held = 0;  // micro-batches' worth of the offloaded part held at peak (two layers' in flight)
  MemoryBreakdown memory;
  // Host memory one rank's offload holds: the offloaded activations of every in-flight micro-batch and
  // the optimizer's host share (its master weights and moments, and the gradients copied down to it).
  Bytes host;
};

struct LayerMemory {
  int64_t layer = 0;  // model layer index
  Bytes model_states;  // weights + gradients + optimizer of this layer on the rank
  Bytes activations;   // saved activations held at the stage's peak
};

struct MemoryReport {
  std::vector<StageMemory> stages;  // one per pipeline stage
  int64_t peak_stage = 0;
  int64_t peak_rank = 0;  // the first global rank of the peak stage
  Bytes peak;
  Bytes capacity;
  // The GPU memory and, where it is known, the host's share per GPU (host_capacity; zero: unknown)
  // hold the peaks: fits = peak <= capacity and host_fits.
  bool fits = false;
  Bytes host_peak;      // the largest StageMemory::host
  Bytes host_capacity;  // the node's host memory per GPU (ClusterSpec::host_memory_per_gpu); zero: unknown
  bool host_fits = true;
  std::vector<LayerMemory> peak_layers;  // by layer, for the peak stage
};

// Model states of `params` parameters on one rank under the plan's sharding (no activations), of which
// `expert_params` are routed experts' (sharded over Plan::expert_shard_size, the rest over shard_size).
MemoryBreakdown model_state_memory(int64_t params, const Plan& plan, const MemoryConstants& k = {}, int64_t expert_params = 0);

// The memory of every pipeline stage. REQUIRES: a valid plan; costs from model_costs() for it.
// host_capacity: the host memory per GPU the offloads may use (zero: unknown, not checked).
MemoryReport memory_model(const model::ModelSpec& model, const Plan& plan, const ModelCosts& costs,
                          const hw::GpuSpec& gpu, const MemoryConstants& k = {}, Bytes host_capacity = Bytes(0));

// Micro-batches' worth of activations held on stage s (see the model card). Fractional for interleaved
// schedules (chunks / v).
double inflight_microbatches(const Plan& plan, int64_t stage);

}  // namespace orrery::train
