// The training planner: every plan of a model on a cluster, filtered by validity and memory, the
// feasible ones simulated, ranked by throughput, with the Pareto front of throughput vs memory and the
// reasons the others fail (issue 6, "Planner"; docs/planner.md).
//
// Model card
//   What: a search, not a model. Candidates are enumerated in a fixed nested order (tp, pp, cp, ep, MoE
//     dispatcher, schedule and vp, mbs, sharding and HSDP group, recompute, sp); each is checked with
//     validate_plan() (train/plan.h), then costed (train/layer_costs.h) and its memory computed
//     (train/memory.h), exactly what evaluate() does with simulate = false. Optional variants fill the
//     budget (SearchSpace::partial_recompute, activation_offload, optimizer_offload, unshard): a layer
//     count, or a share of the optimizer on the host, found by bisection on the memory model. Plans
//     within the memory budget are simulated with evaluate() (train/train.h).
//   Memory: the search, its budget, the front and the pruning use the tensors (plus the CUDA context:
//     Plan::allocator none), what torch's max_memory_allocated reports and what PyTorch needs before
//     it raises an out-of-memory error, since it frees its cache and retries first. The plans reported
//     (top K, front, over-budget lists) then get Candidate::reserved, the peak with the caching
//     allocator's reservation (train/allocator_trace.h) under the plan's Plan::allocator: tracing every
//     simulated plan's tensors cost the search a third more time.
//   Throughput bound (a proof that a plan cannot be faster, used only to skip simulations): a stage's
//     compute stream runs one task at a time in program order and every pass of every micro-batch
//     lies on it, so for stage s of p, with m micro-batches, per-micro-batch busy time W_s (forward,
//     backward, recomputation and the TP/CP/EP collectives inside the passes), chunk-0 forward and
//     backward times F_s and B_s, the pipeline transfer time x and the optimizer time O_s:
//       step >= sum_{s'<s} (F_s' + x) + m W_s + max(O_s, sum_{s'<s} (B_s' + x) + O_0)
//     (stage s starts when micro-batch 0 has come through stages 0..s-1; after its last backward,
//     which is chunk 0's, the gradient still goes down through stages s-1..0, then stage 0 steps the
//     optimizer). Zero-bubble schedules may run weight-gradient passes after the last B, so for them
//     only step >= sum_{s'<s} (F_s' + x) + m W_s + O_s is used. ZeRO-3 adds its per-layer collectives:
//     m x (an all-gather per layer for each forward and backward) on the gather stream and m x (a
//     reduce-scatter per layer) on the gradient stream; where the simulation shares the shard group's
//     link between them (StepOptions::share_links and a known link kind), the link does their summed
//     work (processor sharing conserves it), so the sum bounds the step, else each alone. Other
//     data-parallel collectives are left out (they only lengthen the step). bound = gbs seq / (step_lb gpus).
//   Pruning by the bound (exact: it never changes the top K or the Pareto front): plans within the
//     budget are simulated in rounds in order of decreasing bound (ties by enumeration index), a
//     round being the next kRoundSize plans not skipped; a plan is skipped when its bound is below the
//     K-th best simulated throughput (so it cannot enter the top K) and some simulated plan is faster
//     than its bound with no more memory (so it cannot be on the front). Decisions use only finished
//     rounds, so the simulated set is the same for any thread count.
//   On a topology (PlannerOptions::evaluate.topology, train/flow_comm.h): the search above runs on the
//     alpha-beta model (the Pareto front, the pruning and the reasons are its); then its best N
//     plans (PlannerOptions::flow_rerank, default kFlowRerankFactor x K; the pruning then keeps the
//     top max(K, N), so those N are exactly the alpha-beta search's best) are simulated again with
//     flow-level communication and the top K is re-ranked by those runs. Not a proof: a plan outside those could win on the topology
//     (where the topology slows the leaders more than it); the count re-simulated is reported. Each
//     flow simulation costs a flow run per distinct collective (0.3-6 s per plan at 512 GPUs).
//   Threads: both phases run on PlannerOptions::threads std::threads (the caller is one), the filter in
//     chunks of 64 candidates, the simulations of a round one at a time, longest first.
//   Determinism: results are stored by candidate index and sorted with full tie-breaks (throughput,
//     then memory, then index), so the output is byte-identical for any number of threads.
// Range of validity: that of train/train.h; the enumerated dimensions and their limits are SearchSpace.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "compute/compute_model.h"
#include "model/model_spec.h"
#include "train/train.h"

namespace orrery::train {

// The dimensions the planner enumerates. Degrees come from their generator sets (docs/planner.md).
struct SearchSpace {
  int64_t max_tp = 0;   // tp: divisors of heads up to this; 0 = the cluster's GPUs per node (at least 8 in a larger NVLink domain)
  int64_t max_pp = 0;   // pp: divisors of layers up to this; 0 = no limit
  int64_t max_cp = 8;   // cp: powers of two up to this with 2 cp dividing seq; 1 = no CP; 0 = no limit
  int64_t max_ep = 0;   // ep (MoE): divisors of experts dividing dp*cp (tp*dp*cp/etp) up to this; 0 = no limit
  int64_t max_vp = 0;   // interleaved, interleaved-zb, looped-bfs: vp >= 2 dividing layers/pp up to this; 0 = no limit
  int64_t max_mbs = 0;  // mbs: powers of two dividing gbs/dp up to this; 0 = no limit
  // (looped-bfs, every micro-batch of every chunk held, is searched when named.)
  std::vector<Schedule> schedules = {Schedule::kGpipe,      Schedule::kOneFOneB,   Schedule::kInterleaved,
                                     Schedule::kZeroBubble, Schedule::kZeroBubbleV, Schedule::kDualPipeV,
                                     Schedule::kInterleavedZeroBubble};
  std::vector<Sharding> shardings = {Sharding::kNone, Sharding::kZero1, Sharding::kZero2, Sharding::kZero3};
  bool hsdp = true;  // also zero3 within every HSDP shard group g, 1 < g < dp, g dividing dp
  std::vector<Recompute> recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  // Selective recompute's module sets (Plan::recompute_modules), each a plan of its own; empty: the
  // base plan's set alone.
  std::vector<uint32_t> recompute_module_sets;
  bool sp_on = true;   // with tp > 1: sequence parallelism on
  bool sp_off = true;  // with tp > 1: sequence parallelism off
  // Also pp = powers of two (up to max_pp) that do not divide the layers, with balanced uneven stages
  // (balance_uneven_stages in plan.h: Llama 3 405B's 7 + 14 x 8 + 7 on 16 stages), vp = 1.
  bool uneven_stages = true;
  // Selective unsharding: every ZeRO-3/HSDP plan within the budget also as a variant that keeps the most
  // layers per pipeline rank gathered (Plan::unsharded_layers) that the budget still allows, trading
  // memory for fewer all-gathers. The variants follow the enumerated plans (indices n, n+1, ... in the
  // order of the plans they come from). Off by default: a variant fills the budget with its tensors, so
  // its caching-allocator reservation may pass the capacity (give --budget-gib below it for headroom).
  bool unshard = false;
  // Partial recompute: every plan without recompute that is over the budget also as a variant that
  // recomputes (full) the fewest layers per pipeline rank that bring it within (Plan::recompute_layers,
  // Megatron's --recompute-method block --recompute-num-layers), between 1 and one less than the rank's
  // layers (all of them is the enumerated full-recompute plan). The variants follow the enumerated plans
  // in their order, before the unsharding ones. Off by default for the reason unshard is: a variant
  // fills the budget with its tensors.
  bool partial_recompute = false;
  // Activation offload: every plan on one pipeline stage without recompute or offload that is over the
  // budget also as a variant that offloads the saved activations of the fewest first layers that bring
  // it within (Plan::activation_offload, Plan::offload_layers; Megatron's --cpu-offloading
  // --cpu-offloading-num-layers), between 1 and one less than the layers: Megatron-Core refuses CPU
  // offloading with pipeline parallelism or with recomputation (TransformerConfig), and NeMo keeps the
  // last layer on the GPU, whose copy nothing would hide. After the partial-recompute variants.
  bool activation_offload = false;
  // Optimizer offload: every sharded plan (ZeRO-1 and up: DeepSpeed's offload_optimizer and
  // Megatron's --optimizer-cpu-offload run on the distributed optimizer) that is over the budget also
  // with the smallest share of its Adam states, master weights and step on the host that brings it
  // within (Plan::optimizer_offload_fraction, a multiple of 1 / kOptimizerOffloadSteps). After the
  // activation-offload variants.
  bool optimizer_offload = false;
  // MoE plans with ep > 1: one plan per token dispatcher listed (Plan::moe_dispatcher). Empty: the base
  // plan's dispatcher only. Plans without expert parallelism keep the base's (nothing is exchanged). A
  // plan with kAllToAll drops the base's moe_ranks_per_token, which only deepep reads.
  std::vector<MoeDispatcher> moe_dispatchers;
  // MoE plans: one plan per expert tensor-parallel size listed (Plan::etp; 0 = the plan's tp), each
  // below tp only where it divides tp and with SP; ep then ranges over the divisors of the experts with
  // etp x ep dividing tp x dp x cp. Default {0}: the experts split like the dense matrices.
  std::vector<int64_t> expert_tps = {0};
  // Plans with cp > 1: one plan per context-parallel exchange listed (Plan::cp_comm); empty: the base
  // plan's only. Plans without CP keep the base's (nothing is exchanged).
  std::vector<CpComm> cp_comms;
  // Every plan in each precision listed (Plan::precision); empty: the base plan's only. fp8 plans keep
  // the base's fp8_attention, the others run their attention core in their own precision.
  std::vector<hw::DType> precisions;
};

struct PlannerOptions {
  int64_t gpus = 0;
  int64_t seq = 0;
  int64_t gbs = 0;  // sequences per step
  Plan base;        // settings every candidate copies (precision, grad_bytes, overlap, MoE factors, ...)
  Bytes budget;     // per-GPU memory budget; zero = the GPU's memory
  SearchSpace space;
  size_t top_k = 10;
  // On a topology: the alpha-beta search's best plans re-simulated on it (phase 3); 0 = kFlowRerankFactor
  // x top_k. Ignored without a topology.
  size_t flow_rerank = 0;
  int threads = 0;     // 0 = std::thread::hardware_concurrency()
  bool prune = true;   // false: simulate every plan within the budget
  bool keep_candidates = false;  // return every candidate (PlannerResult::candidates)
  EvaluateOptions evaluate;  // memory constants (simulate and step options are set by the planner)
  // Called on the calling thread only: a phase starts ("filter", "simulate") with its total, then
  // progress within it.
  std::function<void(std::string_view phase, uint64_t done, uint64_t total)> progress;
};

// kError: the simulator threw on this plan (a bug in train/, reported as reason "internal-error").
enum class CandidateStatus : uint8_t { kInvalid, kOverBudget, kPruned, kSimulated, kError };
std::string_view candidate_status_name(CandidateStatus s);

struct Candidate {
  size_t index = 0;  // enumeration order
  Plan plan;
  CandidateStatus status = CandidateStatus::kInvalid;
  std::string reason_key;  // invalid: the first broken constraint's key; over budget: "memory"
  std::string reason;      // its message
  // Valid plans (memory filter):
  Bytes peak;
  int64_t peak_stage = 0;
  Bytes host_peak;  // host memory its offload holds per GPU (train/memory.h, StageMemory::host)
  MemoryBreakdown memory;  // of the peak stage
  double bound_tokens_per_s_per_gpu = 0.0;
  // Reported plans: the peak with the caching allocator's reservation (Plan::allocator); = peak for
  // AllocatorMode::kNone. The search and its budget use `peak`, the tensors (see the model card).
  Bytes reserved;
  // Simulated plans:
  Time step_time;
  double tokens_per_s_per_gpu = 0.0;
  double tflops_per_gpu = 0.0;
  double mfu = 0.0;
  double hfu = 0.0;
  std::array<Time, kNumTimeCategories> breakdown{};
  // Re-ranked on a topology (the fields above are then the flow run's): the alpha-beta throughput.
  double alpha_beta_tokens_per_s_per_gpu = 0.0;
};

struct ReasonCount {
  std::string key;      // constraint key (train/plan.h) or "memory"
  int64_t count = 0;
  std::string example;  // the message of the first candidate with this reason
};

struct PlannerCounts {
  int64_t enumerated = 0;
  int64_t invalid = 0;      // a broken constraint
  int64_t over_budget = 0;  // valid, peak memory above the budget (or offload above the host's memory)
  int64_t fits = 0;         // valid and within the budget (and costed without error)
  int64_t simulated = 0;
  int64_t pruned = 0;       // within the budget, skipped by the bound (cannot be in the results)
  int64_t errors = 0;       // the simulator failed (CandidateStatus::kError)
  int64_t flow_simulated = 0;  // re-simulated on the topology (phase 3; 0 without one)
  int64_t unsharded = 0;       // of the enumerated, the selective-unsharding variants (SearchSpace::unshard)
  int64_t partial_recompute = 0;  // of the enumerated, the partial-recompute variants (SearchSpace::partial_recompute)
  int64_t activation_offload = 0;  // of the enumerated, the activation-offload variants (SearchSpace::activation_offload)
  int64_t optimizer_offload = 0;   // of the enumerated, the optimizer-offload variants (SearchSpace::optimizer_offload)
  // enumerated = invalid + over_budget + fits + errors; fits = simulated + pruned.
};

struct PlannerResult {
  Bytes budget;
  PlannerCounts counts;
  // Top K by throughput (memory, index break ties); with a topology the flow-level top K (phase 3: the
  // fields are the flow runs'), while `pareto` stays the alpha-beta search's.
  std::vector<Candidate> top;
  std::vector<Candidate> pareto;               // throughput vs peak memory, by increasing memory
  std::vector<Candidate> fastest_over_budget;  // over the GPU budget, highest bound first (K of them)
  std::vector<Candidate> closest_over_budget;  // over the GPU budget, smallest overflow first (K of them)
  std::vector<ReasonCount> reasons;            // why plans fail, most common first (key breaks ties)
  std::vector<Candidate> candidates;  // every candidate by index, with keep_candidates
  int64_t bound_violations = 0;  // simulated plans faster than their bound (0 unless the bound is wrong)
};

// Optimizer-offload variants put a multiple of 1 / this of the optimizer on the host (0.05, 0.1, ... 1).
inline constexpr int64_t kOptimizerOffloadSteps = 20;

// Phase 3 on a topology (see the model card): plans re-simulated per place of the top K, by default.
inline constexpr size_t kFlowRerankFactor = 3;
// The plans phase 3 re-simulates on a topology (0 without one): PlannerOptions::flow_rerank or its default.
size_t flow_rerank_count(const PlannerOptions& o);

// Simulations per pruning round (fixed, so the simulated set does not depend on the thread count).
inline constexpr size_t kRoundSize = 32;

// Every candidate plan in enumeration order (see the model card). REQUIRES: options.gpus, seq, gbs > 0.
std::vector<Plan> enumerate_plans(const model::ModelSpec& model, const ClusterSpec& cluster,
                                  const PlannerOptions& options);

// Upper bound on tokens/s per GPU of a valid plan from its costs (the model card's step_lb).
// share_links: the simulation's StepOptions::share_links (the planner's is the default, true);
// compute_slowdown: its StepOptions::compute_slowdown (>= 1), which scales the layers' kernels as the
// simulation does.
double throughput_upper_bound(const model::ModelSpec& model, const Plan& plan, const ModelCosts& costs,
                              const compute::ComputeModel& compute, const CommModel& comm, bool share_links = true,
                              double compute_slowdown = 1.0);

// The whole search. REQUIRES: options.gpus, seq, gbs > 0; 0 <= budget. Never throws for a plan that
// is invalid or does not fit: those are candidates with a reason.
PlannerResult plan_training(const model::ModelSpec& model, const ClusterSpec& cluster,
                            const compute::ComputeModel& compute, const PlannerOptions& options);

}  // namespace orrery::train
