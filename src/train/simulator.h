// Step-time simulation of a training plan: every pipeline stage's program (compute stream with the
// schedule's forward/backward/weight passes; communication streams for pipeline sends, data-parallel
// gradient reduction and parameter gathering, activation offload copies) is built as one task graph
// (train/task_graph.h) and executed in the event engine, so overlap and bubbles come out of the run.
//
// Model card
//   Symmetry: data-parallel replicas and tensor/context-parallel ranks of a stage run the same program,
//     so one rank per pipeline stage is simulated (p ranks, whatever the GPU count); collectives of a
//     group are costed for the group's placement on the cluster (train/comm_model.h). The per-rank
//     hook StepOptions::stage_slowdown makes one stage slower (a straggler), which then sets the pace;
//     StepOptions::stage_comm / stage_costs give one stage its own communication model (a slow link of
//     one of its ranks: that rank's groups run at the slow link's rate, and the step waits for it).
//   Passes: a forward of micro-batch i on a chunk runs its layers' compute and the layers' exposed
//     TP/CP/EP collectives in sequence (train/layer_costs.h); a backward adds the recomputation; the
//     first stage adds the embedding, the last the LM head and loss. Pipeline sends (b s h / tp bytes,
//     Megatron's scatter-gather) go on per-direction streams; the receiver's pass waits for them.
//     A whole backward under a splitting schedule (PipelinePass::full, DualPipeV) runs its B and W
//     passes back to back and sends the input gradient after both.
//   Overlapped pairs (PipelinePass::paired, Plan::overlaps_pairs: DualPipeV's under overlap_f_b,
//     Megatron-Core's combined 1F1B under ep_a2a_overlap): a forward and the whole backward after it,
//     interleaved by the implementation so that each one's EP all-to-alls run beside the other's
//     work. The pair's all-to-alls C cost bulk_extra(K, C, k/N) (train/layer_costs.h: max(C - K, C k/N))
//     instead of C, K the rest of the pair (kernels, recompute, TP/CP collectives), k = kDualPipeCommSms
//     of the GPU's N SMs; each of the pair's pieces scales its EP time by that ratio, so the pair ends
//     when both passes would have, their inputs as they arrive.
//   Data parallelism: ZeRO-0/1/2 reduce gradients in buckets of Plan::bucket_bytes during the last
//     micro-batch's backward (all-reduce; reduce-scatter when sharded), overlapped when
//     overlap_grad_reduce; ZeRO-1/2 all-gather the updated bf16 parameters at the start of the next step
//     (overlapped with the first forward when overlap_param_gather, else exposed after the optimizer).
//     ZeRO-3/FSDP all-gathers each layer before its forward and again before its backward (prefetched
//     fsdp_prefetch layers ahead) and reduce-scatters its gradient after every micro-batch's backward;
//     HSDP adds an all-reduce across shard replicas. Sparse gradient sync replaces the dense reduction by
//     an all-gather of density x gradient values plus 4-byte indices (sparse) or a balanced point-to-
//     point exchange of the same volume in 2(n-1)/n rounds (Zen, OSDI 2025: hash-balanced partitions).
//   Optimizer (optimizer_step_time): Adam reads master, moments and gradient and writes master, moments
//     and the bf16 copy: Plan::optimizer_step_bytes per local parameter (26 + grad_bytes with an fp32
//     master and fp32 moments), memory-bound on the GPU. Offloaded (the host's share f of the local
//     parameters, Plan::optimizer_offload_fraction): their gradients down and parameters up over the
//     host link plus the CPU step at Plan::cpu_adam_params_per_s (kCpuAdamParamsPerSecond, plan.h),
//     while the GPU steps the rest (Megatron's HybridDeviceOptimizer launches the GPU part, then steps
//     the CPU part): the longer of the two.
//   Activation offload (Plan::offloads_layer), layer by layer as Transformer Engine's double-buffered
//     handler runs it: a layer's saved activations go to the host on the device-to-host copy stream when
//     its forward ends and the forward two layers up waits for that copy; in the backward a layer's copy
//     back starts once the backward two layers up has freed its buffer, and its backward waits for it.
//     Copies run at the GPU's host copy rate (hw::GpuSpec::host_copy_bandwidth). A pass that waits for a
//     copy is an offload stall.
//   Link sharing: a stage's collectives on the same link of its rank (network or NVLink,
//     CommModel::link) share it equally while they overlap (train/task_graph.h): the communication
//     streams' tasks and each pass's exposed TP/CP/EP time, which then runs as tasks of its own after
//     the pass's kernels on the compute stream.
//   Breakdown (one stage, the busiest): compute, recompute, exposed TP/CP/EP (they sit inside the
//     passes), and the compute stream's idle time, charged to what it waited for: the pipeline (bubble
//     while the upstream pass runs, PP comm while the transfer runs), DP collectives, offload copies;
//     the time after the stage's last task until the step ends is bubble. The categories sum to the
//     step time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "compute/compute_model.h"
#include "model/model_spec.h"
#include "train/comm_model.h"
#include "train/layer_costs.h"
#include "train/plan.h"
#include "train/schedule.h"

namespace orrery::train {

enum class TimeCategory : uint16_t {
  kCompute,
  kRecompute,
  kTp,
  kCp,
  kEp,
  kPp,
  kDp,
  kBubble,
  kOffload,
  kOptimizer,
  kCount
};
inline constexpr size_t kNumTimeCategories = static_cast<size_t>(TimeCategory::kCount);
std::string_view time_category_name(TimeCategory c);  // "compute", "recompute", "tp", ... "optimizer"

// One optimizer step of `local_params` parameters (a rank's share) under plan p (the model card's
// "Optimizer"); the planner's bound uses the same.
Time optimizer_step_time(const Plan& p, double local_params, const compute::ComputeModel& cm);

// FSDP2's copies (Plan::fsdp_impl kFsdp2; the model card's ZeRO-3 paragraph), each a memory-bound
// kernel; the planner's bound uses the same. The all-gather's copy-in, on the gather stream: a rank's
// shard of `params` over `group` ranks, read in the dtype the shard is kept in (the master copy, else
// 16-bit) and written in 16-bit. The compute stream's, for `elems` gathered or reduced elements: after
// an all-gather the copy-out (read 2 + write 2 B), before a reduce-scatter the gradients' copy-in
// (read 2 + write grad_bytes B).
Time fsdp2_gather_copy_in(const Plan& p, const compute::ComputeModel& cm, int64_t params, int64_t group);
Time fsdp2_compute_copies(const Plan& p, const compute::ComputeModel& cm, double elems, bool gather, bool reduce);

struct TraceEvent {
  int32_t stage = 0;
  std::string stream;  // "compute", "pp-send-fwd", "pp-send-bwd", "dp", "dp-gather", "offload-d2h", ...
  std::string name;    // "F mb3 c0", "B mb3 c0 l2", "reduce-scatter 40 MB", ...
  Time start;
  Time end;
};

// One pass of one micro-batch over one virtual chunk of a stage, as the simulation ran it (a pass split
// into per-layer tasks runs from its first task's start to its last task's end).
struct PassTiming {
  int32_t stage = 0;
  int32_t chunk = 0;
  int32_t microbatch = 0;
  PassKind kind = PassKind::kForward;
  Time start;
  Time end;
};

struct StepOptions {
  std::vector<double> stage_slowdown;  // per stage, >= 1 multiplies its compute; empty: all 1
  // >= 1 multiplies every stage's compute on top of stage_slowdown: the slowest of the job's GPUs
  // (train/variability.h, --gpu-variability).
  double compute_slowdown = 1.0;
  std::vector<int32_t> trace_stages;   // stages whose tasks go into StepResult::trace
  bool record_passes = false;          // fill StepResult::passes (the memory timeline reads them)
  // Asymmetric communication (a slow link of one stage's simulated rank): per stage, the communication
  // model and the layer costs built with it; missing or null entries use simulate_step's arguments. A
  // pipeline transfer takes the slower of its two ends' times.
  std::vector<const CommModel*> stage_comm;
  std::vector<const ModelCosts*> stage_costs;
  // Communication streams of a rank share the link that carries them (CommModel::link): a DP
  // reduce-scatter beside an FSDP all-gather, or a pipeline send beside a DP collective on the same
  // NIC, each run at half rate while both run (train/task_graph.h). false: each runs as if alone.
  bool share_links = true;
};

struct StepResult {
  Time step_time;
  std::array<Time, kNumTimeCategories> breakdown{};  // of breakdown_stage; sums to step_time
  int32_t breakdown_stage = 0;
  std::vector<Time> stage_compute;  // busy compute-stream time per stage
  Flops model_flops;                // per step, whole job, matmul, causal attention as computed
  Flops recompute_flops;            // per step, whole job
  size_t tasks = 0;
  std::vector<TraceEvent> trace;
  std::vector<PassTiming> passes;  // with record_passes: every pass of every stage, by (stage, chunk, micro-batch, kind)
};

// REQUIRES: a valid plan; costs from model_costs() for the same plan and models.
StepResult simulate_step(const model::ModelSpec& model, const Plan& plan, const ModelCosts& costs,
                         const compute::ComputeModel& compute, const CommModel& comm, const StepOptions& options = {});

}  // namespace orrery::train
