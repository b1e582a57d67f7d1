// A training plan: how one step of a model is parallelized, sharded, recomputed and overlapped on a
// cluster, and the cheap checks that say whether the plan is valid for a model.
//
// Model card
//   What: the value a planner enumerates and the simulator (train/simulator.h) and memory model
//     (train/memory.h) evaluate. No allocation beyond the Plan itself; validate_plan() is O(1) and
//     returns the broken constraints as values, so a planner can sweep 10^5 plans without exceptions.
//   Degrees: gpus = dp * tp * pp * cp. The routed experts use Megatron-Core's expert grid over the
//     same ranks: etp x ep x edp x pp, etp = tp unless Plan::etp says (then EP may take TP ranks too),
//     so etp * ep divides tp * dp * cp (at etp = tp: ep divides dp*cp).
//   Rank order (Megatron-Core's default "tp-cp-ep-dp-pp"): tp innermost (consecutive ranks, one
//     machine), then cp, dp, and pp outermost; in the expert grid etp, then ep (CP folded in), then
//     edp. Group strides follow from that order (group_stride()).
//   Micro-batches per pipeline and step: m = gbs / (dp * mbs).
//   Constraints (each has a stable key, ConstraintError::key):
//     gpus        gpus == dp*tp*pp*cp
//     tp_heads    tp divides heads;  tp_kv_heads: tp divides kv_heads or kv_heads divides tp (KV
//                 replication, as Megatron-Core allows)
//     tp_ffn      tp divides ffn (and the expert ffn)
//     pp_layers   pp*vp divides layers (each virtual stage holds the same number of layers), unless
//                 the first/last stage layer counts are given (vp = 1): then the middle stages split
//                 the rest evenly (Megatron-Core --decoder-first/last-pipeline-num-layers; Llama 3
//                 405B ran 126 layers on 16 stages as 7 + 14 x 8 + 7, Dubey et al. 2024, sec. 3.3.2)
//     gbs         dp*mbs divides gbs;  vp_microbatches: interleaving needs m % pp == 0 (Megatron)
//     cp_seq      2*cp divides seq (load-balanced causal ring attention splits each sequence in 2cp)
//     ep          ep divides experts, etp*ep divides tp*dp*cp; ep > 1 needs an MoE model
//     etp         an MoE model's; divides tp; below tp needs SP
//     shard       shard_group divides dp (HSDP) and sharding is not none when shard_group > 1; with EP,
//                 etp*ep divides shard_group*cp*tp (EP inside a shard group)
//     sp          sequence parallelism needs tp > 1;  tp divides seq/cp with SP
//     vp_schedule vp > 1 only with the interleaved schedule or ZB-V; ZB-V needs vp = 2 (its V)
//     precision   the GPU has a dense peak for the precision
// Range of validity: dense and MoE decoder-only transformers (model/model_spec.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "hw/hw_catalog.h"
#include "model/model_spec.h"
#include "train/caching_allocator.h"

namespace orrery::train {

// CPU Adam throughput per GPU's share of the host (optimizer offload), as Megatron-Core's
// HybridDeviceOptimizer steps its CPU part: calibrated on one published measurement, NVIDIA-NeMo/RL
// PR #3628 (Qwen3-0.6B on one H100, optimizer offload 100%: the step grows by 0.926 s; less the
// 0.070 s of copies at 51.2 GB/s and plus the 0.006 s GPU step it replaces, 0.862 s for the model's
// 0.596 B parameters: 0.69e9 per second). Held out against Megatron-Bridge's measured offload on
// Qwen3-30B-A3B (tests/validation, OptimizerOffloadGrowthMatchesMegatronBridge). DeepSpeed's
// vectorized CPU-Adam is faster (about 1e9 per socket-share, Ren et al. 2021, ZeRO-Offload, Sec. 5),
// the figure this constant held before 2026-11-27.
inline constexpr double kCpuAdamParamsPerSecond = 0.69e9;

// kZeroBubble is ZB-H1; kZeroBubbleV is ZB-V (two model chunks per rank in a V: train/schedule.h);
// kDualPipeV is DeepSeek's DualPipeV (the V, with paired forward and backward passes overlapped);
// kInterleavedZeroBubble is torch's interleaved ZB1P (vp > 1 chunks, each backward split, W passes
// filling the bubble); kLoopedBfs is breadth-first pipelining (torch's ScheduleLoopedBFS).
// kCustom runs an order read from a file (--schedule-csv; train/schedule_csv.h).
enum class Schedule {
  kGpipe,
  kOneFOneB,
  kInterleaved,
  kZeroBubble,
  kZeroBubbleV,
  kDualPipeV,
  kInterleavedZeroBubble,
  kLoopedBfs,
  kCustom
};
struct CustomSchedule;
// Data-parallel sharding (Rajbhandari et al. 2020, ZeRO): none = plain DDP; zero1 = optimizer states
// (Megatron's distributed optimizer); zero2 = + gradients; zero3 = + parameters (FSDP full shard).
enum class Sharding { kNone, kZero1, kZero2, kZero3 };
// kSelective: Korthikanti et al.'s selective recompute (the attention core); kSelectiveOp: torchtitan's
// op-level selective activation checkpointing (every other matmul output and the attention output
// saved, the rest of each block recomputed); kFull: the whole layer from its input.
enum class Recompute { kNone, kSelective, kSelectiveOp, kFull };
// The modules selective recompute re-runs (Megatron-Core's --recompute-modules; kSelective's default is
// core_attn alone). Each drops from the saved activations what the module's checkpoint does not keep and
// re-runs the module's forward before its backward (train/layer_costs.h):
//   core_attn       the attention core: keeps Q, K, V (the checkpoint's inputs), drops the rest it saves
//   mla_up_proj     MLA's query and key-value up projections and RoPE: their outputs, the core's Q, K, V,
//                   are freed after the core's forward and rebuilt before its backward
//   moe_act         the routed experts' activation: its output, the down projection's input
//   layernorm       the norms Megatron-Core runs as modules of their own (MLA's input norm, an MoE layer's
//                   pre-MLP norm; Transformer Engine fuses the others into the next GEMM): their outputs
//   mlp             a dense layer's MLP from its input: everything its ops save
//   shared_experts  an MoE layer's shared experts: everything they save (their input is the router's)
enum class RecomputeModule { kCoreAttn, kMlaUpProj, kMoeAct, kLayernorm, kMlp, kSharedExperts, kCount };
constexpr uint32_t module_bit(RecomputeModule m) { return 1u << static_cast<uint32_t>(m); }
std::string_view recompute_module_name(RecomputeModule m);
// A comma-separated list of module names into a set of module_bit()s. InputError at `where` naming an
// unknown module (with the nearest name), and for "moe" (Megatron's whole-MoE recompute, which re-runs the
// expert all-to-alls: not modelled).
uint32_t parse_recompute_modules(std::string_view list, const Where& where);
// The names of a module set, in RecomputeModule order.
std::vector<std::string> recompute_module_names(uint32_t modules);
// Why `modules` cannot be recomputed on `model` (a module it lacks: mla_up_proj without MLA, moe_act
// on a dense model, shared_experts without shared experts, layernorm where every norm is fused into its
// GEMM, mlp without a dense layer); empty when they can.
std::string recompute_modules_error(const model::ModelSpec& model, uint32_t modules);
enum class GradSync { kDense, kSparseAllGather, kZen };
// How MoE tokens reach their experts' EP ranks. kAllToAll: Megatron-Core's all-to-all dispatcher permutes
// each token once per routed expert and exchanges the copies (top_k per token); kDeepEp: DeepEP's
// dispatch sends a token once to each EP rank that holds one of its experts, and its combine reduces
// them there before the return trip (deepseek-ai/DeepEP README).
enum class MoeDispatcher { kAllToAll, kDeepEp };

// How Transformer Engine scales fp8 tensors (precision fp8). kDelayed: one scale per tensor from the
// amax history of earlier steps (TE's DelayedScaling, the default of Megatron-Core and NeMo until
// 2025); kCurrent: one scale per tensor from its own amax, read before the cast, and synchronized over
// the TP ranks for tensors that sequence parallelism all-gathers (Float8CurrentScaling, NeMo's "FP8-CS");
// kMxfp8: a power-of-two scale per 32 elements along rows and along columns (MXFP8BlockScaling,
// Blackwell only).
enum class Fp8Recipe { kDelayed, kCurrent, kMxfp8 };

std::string_view schedule_name(Schedule s);
std::string_view sharding_name(Sharding s);
std::string_view recompute_name(Recompute r);
std::string_view grad_sync_name(GradSync g);
std::string_view moe_dispatcher_name(MoeDispatcher d);  // alltoall | deepep
// Parsers accept the names above plus the aliases of training.csv (dp_sharding none | distopt |
// fsdp; recompute none | selective | selective-op | full) and throw InputError at `where` with the nearest name.
Schedule parse_schedule(std::string_view name, const Where& where);
Sharding parse_sharding(std::string_view name, const Where& where);
Recompute parse_recompute(std::string_view name, const Where& where);
GradSync parse_grad_sync(std::string_view name, const Where& where);
MoeDispatcher parse_moe_dispatcher(std::string_view name, const Where& where);
hw::DType parse_precision(std::string_view name, const Where& where);  // bf16 | fp16 | fp8

// The optimizer's own copy of the parameters beside the 16-bit weights the model computes with.
enum class MasterWeights {
  kFp32,        // fp32 master copy, 4 B (Megatron-Core's default, FSDP's sharded fp32 parameter)
  kFp16,        // 16-bit master copy, 2 B (Megatron-Core's --main-params-dtype fp16)
  kRemainders,  // the 16 low bits an fp32 value adds to its bf16 weight, 2 B (Apex DistributedFusedAdam's
                // store_param_remainders, NeMo's choice for bf16 models with an fp32 optimizer)
  kNone,        // no copy: the optimizer updates the 16-bit weights (NeMo's distributed Adam when
                // its optimizer dtype equals the model's)
};
// How a ZeRO-3/FSDP implementation holds the parameters it gathers and the gradients it reduces.
// kFsdp2: PyTorch's fully_shard (FSDP2, torchtitan, NeMo AutoModel) shards each parameter on its own
// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py), so every collective has copies around
// it: all-gather copy-in (each rank's shard cast to the 16-bit dtype into the flat input, on the
// all-gather's stream), all-gather copy-out (split_with_sizes_copy of the gathered buffer into the
// parameters, on the compute stream, before the layer runs) and, before each reduce-scatter, the
// gradients' copy-in (_chunk_cat, cast to the reduce dtype, on the compute stream). kFlat: the
// parameters and gradients are views of the gathered and reduced buffers (Megatron-FSDP, PyTorch's
// FSDP1 FlatParameter): no copies.
enum class FsdpImpl { kFsdp2, kFlat };
std::string_view fsdp_impl_name(FsdpImpl f);  // fsdp2 | flat
FsdpImpl parse_fsdp_impl(std::string_view name, const Where& where);
// How context parallelism moves the attention's operands (Megatron-Core's --cp-comm-type, Transformer
// Engine's cp_comm_type; their docstrings): kP2p exchanges K/V chunks around a ring, asynchronously,
// overlapped with the attention kernels (ring attention, Liu et al. 2023); kAllGather all-gathers the
// whole sequence's K/V before the attention and reduce-scatters their gradients after its backward,
// neither overlapped (Llama 3's CP, Dubey et al. 2024 sec. 3.3.2); kA2a (DeepSpeed-Ulysses, Jacobs et
// al. 2023) exchanges Q, K and V all-to-all so that each rank holds the whole sequence for heads / cp
// of the heads, and the output back, not overlapped (needs the rank's query and key/value heads
// divisible by cp). kA2aP2p (Megatron-Core's hierarchical CP, --hierarchical-context-parallel-sizes):
// a2a inside groups of cp_a2a ranks (Plan::cp_a2a, tp apart: NVLink when they share a machine), then
// the ring over the cp / cp_a2a groups, overlapped as p2p's; heads per TP rank divisible by cp_a2a.
// The attention kernels do the same work either way.
enum class CpComm { kP2p, kAllGather, kA2a, kA2aP2p };
std::string_view cp_comm_name(CpComm c);  // p2p | all_gather | a2a | a2a+p2p
CpComm parse_cp_comm(std::string_view name, const Where& where);
std::string_view master_weights_name(MasterWeights m);  // fp32 | fp16 | remainders | none
std::string_view fp8_recipe_name(Fp8Recipe r);          // delayed | current | mxfp8
Fp8Recipe parse_fp8_recipe(std::string_view name, const Where& where);
MasterWeights parse_master_weights(std::string_view name, const Where& where);
hw::DType parse_optimizer_dtype(std::string_view name, const Where& where);  // fp32 | bf16 | fp16

struct Plan {
  // ---- degrees
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t cp = 1;
  int64_t ep = 1;
  // Expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size): the routed experts'
  // matrices split over etp ranks, the first etp of each TP group; 0 = tp. Below tp the MoE layer takes
  // each rank's sequence-parallel tokens (SP required) and all-gathers them over the etp ranks only, so
  // an expert GEMM has etp / tp of the rows it has at etp = tp and tp / etp times the columns.
  int64_t etp = 0;
  int64_t vp = 1;  // virtual stages (model chunks) per pipeline rank (interleaved schedule; ZB-V: 2)
  // Interleaved schedule: the micro-batches run back to back on one model chunk before the next chunk
  // (Megatron-Core's microbatch_group_size_per_vp_stage; Llama 3's tunable N, Dubey et al. 2024 sec.
  // 3.3.2); 0 = pp, Megatron's default. In [pp, m], and a last, shorter group of at least pp.
  int64_t microbatch_group = 0;
  // Schedule kCustom: the order per rank (train/schedule_csv.h; use_custom_schedule).
  std::shared_ptr<const CustomSchedule> custom;
  // torch.distributed.pipelining's interleaved schedules run r = max(1, floor(m / pp)) rounds of m / r
  // micro-batches instead (ScheduleInterleavedZeroBubble: number_of_rounds, microbatches_per_round; r
  // must divide m).
  int64_t torch_rounds() const { return std::max<int64_t>(1, microbatches() / pp); }
  int64_t microbatch_group_size() const {
    if (microbatch_group > 0) return microbatch_group;
    return schedule == Schedule::kInterleavedZeroBubble ? microbatches() / torch_rounds() : pp;
  }
  // Schedules whose chunks sit at virtual stage c pp + s and take vp > 1 (Megatron-Core's table).
  bool interleaves() const {
    return vp > 1 && (schedule == Schedule::kInterleaved || schedule == Schedule::kInterleavedZeroBubble);
  }
  // Uneven pipeline stages: layers on the first / last model chunk (vp = 1: the first / last pipeline
  // stage; vp > 1: virtual stage 0 of rank 0 and virtual stage vp-1 of rank pp-1, as Megatron-Core's
  // account-for-embedding/loss-in-pipeline-split leaves them); -1 = the other chunks' share, 0 = none
  // (the chunk holds only the embedding, or only the LM head and loss, as Llama 3's pipeline did:
  // Dubey et al. 2024, section 3.3.2). Both -1: every virtual stage holds layers / (pp * vp).
  int64_t first_stage_layers = -1;
  int64_t last_stage_layers = -1;
  bool sp = false;  // sequence parallelism (Korthikanti et al. 2022) with TP
  Schedule schedule = Schedule::kOneFOneB;

  // ---- batch
  int64_t mbs = 1;
  int64_t gbs = 1;  // sequences per step, whole job
  int64_t seq = 2048;

  // ---- sharding over data-parallel ranks
  Sharding sharding = Sharding::kNone;
  int64_t shard_group = 0;  // HSDP: shard within groups of this many DP ranks, replicate across; 0 = dp
  int64_t unsharded_layers = 0;  // ZeRO-3: keep this many layers' parameters gathered (per stage)
  FsdpImpl fsdp_impl = FsdpImpl::kFlat;  // sharding zero3: the copies around its collectives (FsdpImpl)
  CpComm cp_comm = CpComm::kP2p;          // cp > 1: how K/V (and with a2a Q and the output) move (CpComm)
  int64_t cp_a2a = 0;                     // kA2aP2p: the a2a groups' size, dividing cp (Group::kCpA2a)

  // ---- recomputation and offload
  Recompute recompute = Recompute::kNone;
  // kSelective: the modules re-run (RecomputeModule bits; Megatron-Core's default, the attention core).
  uint32_t recompute_modules = module_bit(RecomputeModule::kCoreAttn);
  int64_t recompute_layers = -1;  // kFull: recompute this many layers per stage; -1 = all
  bool activation_offload = false;  // saved activations to host memory over PCIe, asynchronously
  // activation_offload: the first this many transformer layers of each pipeline rank (in its chunks'
  // order) offload, the others keep their activations (Megatron's --cpu-offloading-num-layers, TE's
  // get_cpu_offload_context); -1 = every saved activation, the embedding output and logits included.
  int64_t offload_layers = -1;
  bool optimizer_offload = false;   // Adam states and master weights on the host; the step on the CPU
  // optimizer_offload: the CPU step's rate, parameters per second per GPU's share of the host (the host's
  // cores and memory over its GPUs); DeepSpeed's vectorized CPU-Adam runs faster than Megatron's.
  double cpu_adam_params_per_s = kCpuAdamParamsPerSecond;
  // optimizer_offload: the share of each rank's optimizer (its parameters' master weights and moments,
  // and their step) on the host; the rest stays on the GPU (Megatron's --optimizer-offload-fraction).
  double optimizer_offload_fraction = 1.0;
  // The share of the rank's optimizer on the host: optimizer_offload_fraction when offloading, else 0.
  double host_optimizer_share() const { return optimizer_offload ? optimizer_offload_fraction : 0.0; }

  // ---- numerics
  hw::DType precision = hw::DType::kBf16;  // compute and activation dtype (fp8: GEMMs in fp8)
  int64_t grad_bytes = 4;                  // main-gradient bytes per parameter (Megatron/FSDP fp32: 4)
  // Weight-gradient GEMMs add their product into the fp32 main gradients (grad_bytes 4) inside the GEMM
  // (Megatron-Core's gradient_accumulation_fusion, on by default; Transformer Engine's
  // fuse_wgrad_accumulation), which costs each such GEMM its fp32 read and write of the gradient
  // (compute::ComputeModel::fp32_accumulate). Off: the GEMM writes a 16-bit gradient (PyTorch autograd,
  // FSDP2), whose later reduction is what the DP collectives model. The router's GEMM is never fused
  // (Megatron-Core computes its gradient apart).
  bool grad_accum_fusion = false;
  // Adam's two moments (exp_avg, exp_avg_sq) in this dtype: fp32, or bf16/fp16 (Megatron-Core's
  // --exp-avg-dtype/--exp-avg-sq-dtype, Apex DistributedFusedAdam's dtype).
  hw::DType optimizer_dtype = hw::DType::kFp32;
  MasterWeights master_weights = MasterWeights::kFp32;
  bool flash_attention = true;             // fused attention (no materialized s x s scores)
  bool fp8_attention = false;  // precision fp8: the attention core in fp8 too (TE's FP8 DPA; default bf16)
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // precision fp8: how TE scales its fp8 tensors
  bool eager = false;                      // unfused elementwise kernels (PyTorch eager; model/op_inventory.h)
  // The LM head's cross-entropy as PyTorch's eager F.cross_entropy on fp32 logits (log_softmax + nll_loss:
  // 8 B per logit at its backward's peak) rather than a fused, in-place one (Megatron's
  // vocab_parallel_cross_entropy: the logits' dtype). True with eager kernels, and under torch.compile of
  // the transformer blocks alone (torchtitan's apply_compile, which leaves the loss uncompiled).
  bool eager_loss = false;
  bool loss_is_eager() const { return eager || eager_loss; }
  // PyTorch's caching allocator (train/caching_allocator.h): none counts the tensors alone.
  AllocatorMode allocator = AllocatorMode::kNone;

  // ---- MoE
  double capacity_factor = 0.0;   // 0: dropless; > 0 pads every expert to cf * mean tokens
  double load_imbalance = 1.0;    // busiest expert's tokens / mean (>= 1)
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // kDeepEp: EP ranks a token is sent to, in [1, min(top_k, ep)]; 0 = the expectation under uniform
  // routing (moe_copies_per_token). A router that limits the ranks (DeepSeek-V3's node-limited routing,
  // a benchmark's round-robin "balanced" gate) states it here.
  double moe_ranks_per_token = 0.0;

  // ---- gradient synchronization
  GradSync grad_sync = GradSync::kDense;
  double grad_density = 1.0;  // fraction of gradient entries sent by the sparse schemes

  // ---- overlap
  bool overlap_grad_reduce = true;   // DP gradient reduction in buckets during the last backward
  bool overlap_param_gather = true;  // ZeRO-1/2 parameter all-gather bucket by bucket beside the first forward
  int64_t fsdp_prefetch = 1;         // ZeRO-3: layers whose all-gather is issued ahead
  // DP bucket: bytes of main gradients, whole layers per bucket (a layer larger than it is one bucket).
  // Megatron-Core's default is max(40 M, 1 M x dp) elements (160 MB and more of fp32 gradients); a
  // dense layer of hidden size h >= 1,826 holds 12 h^2 x 4 B >= 160 MB, one bucket under either rule.
  int64_t bucket_bytes = 40'000'000;
  bool tp_comm_overlap = false;       // TP collectives overlapped with the GEMMs (userbuffers)
  // With tp_comm_overlap: PyTorch's async TP (torch.compile's micro-pipeline TP pass, torchtitan's
  // enable_async_tensor_parallel) instead of Transformer Engine's pairing: the forward's all-gather ->
  // matmul and matmul -> reduce-scatter decomposed over copy-engine transfers, the backward's collectives
  // exposed (train/layer_costs.h).
  bool tp_overlap_async = false;
  // DualPipeV's paired passes (torch's OVERLAP_F_B): each pair's forward and backward run interleaved so
  // that one's EP all-to-alls hide behind the other's work (DeepSeek's overlapped_forward_backward,
  // torchtitan's overlap callback for MoE; TP and CP collectives stay as they are); false runs the pair
  // back to back, as torch's runtime does without a registered callback (train/simulator.h).
  bool overlap_f_b = true;
  // Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): the steady phase's forward and
  // the backward after it run as one pair whose EP all-to-alls hide behind each other's work, as
  // DualPipeV's; with one pipeline stage it runs F0, then (F i+1 & B i), then the last B, holding two
  // micro-batches. Needs ep > 1 and pp 1 or the interleaved schedule (key ep_overlap).
  bool ep_a2a_overlap = false;

  int64_t gpus() const { return dp * tp * pp * cp; }
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  // Copies of each token an EP all-to-all moves for a model with `experts` routed experts, top_k of
  // them per token: top_k under kAllToAll; under kDeepEp moe_ranks_per_token, or when 0 the expected
  // number of distinct EP ranks among top_k distinct experts drawn uniformly, the experts spread evenly
  // over ep ranks: ep (1 - C(E - E/ep, k) / C(E, k)).
  double moe_copies_per_token(int64_t experts, int64_t top_k) const;
  int64_t microbatches() const { return dp * mbs > 0 ? gbs / (dp * mbs) : 0; }
  int64_t shard_size() const;  // ranks one parameter/gradient/optimizer shard spans: (shard_group or dp) x cp; 1 unsharded
  // The same for routed experts' parameters: their replicas are the expert-data-parallel group, the
  // shard group's ranks times tp over etp x ep (Megatron-Core's expert_data_parallel group: tp x dp x cp
  // / (etp x ep) ranks hold each expert shard; dp x cp / ep at etp = tp), at least 1; 1 unsharded.
  int64_t expert_shard_size() const;
  // Parameters whose optimizer states and step a rank holds: `params` of which `expert_params` are
  // routed experts' (sharded over expert_shard_size), the rest over shard_size.
  double local_optimizer_params(int64_t params, int64_t expert_params) const;
  bool uneven_stages() const { return first_stage_layers >= 0 || last_stage_layers >= 0; }
  // Pipeline placement. Model chunk c of rank s is virtual stage c pp + s (Megatron-Core's interleaved
  // order; vp = 1: the stage), except under ZB-V, whose V places chunk 0 of rank s at s and chunk 1 at
  // 2 pp - 1 - s (Qi et al. 2024, sec. 6; torch.distributed.pipelining's "v" stage-to-rank mapping), so
  // that rank pp - 1 turns the V locally and rank 0 runs both the embedding and the loss.
  bool v_shape() const {
    return schedule == Schedule::kZeroBubbleV || schedule == Schedule::kDualPipeV ||
           (schedule == Schedule::kCustom && custom_places_v());
  }
  int64_t virtual_stage(int64_t s, int64_t c) const { return v_shape() && c == 1 ? 2 * pp - 1 - s : c * pp + s; }
  int64_t stage_of_virtual(int64_t k) const { return v_shape() && k >= pp ? 2 * pp - 1 - k : k % pp; }
  int64_t chunk_of_virtual(int64_t k) const { return k / pp; }
  // The chunk that runs the embedding (virtual stage 0) / the LM head and loss (the last virtual stage).
  bool runs_embedding(int64_t s, int64_t c) const { return virtual_stage(s, c) == 0; }
  bool runs_head(int64_t s, int64_t c) const { return virtual_stage(s, c) == pp * vp - 1; }
  int64_t head_stage() const { return v_shape() ? 0 : pp - 1; }  // the rank with the LM head and loss
  // Where Megatron-Core's combined 1F1B has pairs to run: EP, and one stage (1F1B) or interleaving.
  bool combined_1f1b_applies() const {
    return ep > 1 && ((pp == 1 && schedule == Schedule::kOneFOneB) || (schedule == Schedule::kInterleaved && vp > 1));
  }
  // Whether the order's paired passes (PipelinePass::paired) run overlapped.
  bool overlaps_pairs() const {
    return schedule == Schedule::kDualPipeV || schedule == Schedule::kCustom ? overlap_f_b : ep_a2a_overlap;
  }
  // Zero-bubble schedules split each backward into B (input gradient) and W (weight gradient) passes;
  // DualPipeV splits some (its order runs the others whole: PipelinePass::full, train/schedule.h); a
  // file's order where it names I and W passes.
  bool splits_backward() const {
    return schedule == Schedule::kZeroBubble || schedule == Schedule::kZeroBubbleV || schedule == Schedule::kDualPipeV ||
           schedule == Schedule::kInterleavedZeroBubble || (schedule == Schedule::kCustom && custom_splits());
  }
  // What the file of a kCustom plan says (CustomSchedule::v, ::split); false without one.
  bool custom_places_v() const;
  bool custom_splits() const;
  // FSDP (ZeRO-3, HSDP) under pipeline parallelism, as PyTorch's pipelining runs it, the one framework
  // that combines the two (DeepSpeed's PipelineEngine refuses ZeRO-2/3; Megatron-Bridge states FSDP2
  // does not work with PP): every backward but a stage's last runs without gradient sync and without
  // resharding (torch.distributed.pipelining, _PipelineStageBase.backward_maybe_with_nosync; torchtitan
  // also turns reshard_after_forward off under PP), so each layer's parameters are gathered at its
  // first forward and stay gathered to the stage's last backward, its gradients accumulate unsharded in
  // the reduce dtype (FSDP2's unsharded_accumulated_grad, grad_bytes per parameter), and the stage's
  // post_backward reduce-scatters them all after that last backward. Rather than ZeRO-3's per-layer
  // gathers and reductions for every micro-batch, the step moves ZeRO-1's bytes once, at both ends.
  bool fsdp_keeps_gathered() const { return sharding == Sharding::kZero3 && pp > 1; }
  // ZeRO-3 that gathers and reduces each layer for every pass (without PP): its per-layer collectives.
  bool fsdp_reshards() const { return sharding == Sharding::kZero3 && !fsdp_keeps_gathered(); }
  // The dtype of activations, gradients of activations and every kernel outside fp8's GEMMs: fp8
  // training keeps them in bf16 (Transformer Engine quantizes only a GEMM's operands).
  hw::DType activation_dtype() const { return precision == hw::DType::kFp8 ? hw::DType::kBf16 : precision; }
  // Optimizer-state bytes per parameter: the master copy (4, 2 or 0) and Adam's two moments.
  int64_t master_bytes() const;
  int64_t moment_bytes() const;
  // Bytes Adam's step moves per local parameter (memory-bound): it reads and writes the master copy
  // and both moments and reads the main gradient; it writes the 16-bit weight from a separate master
  // (2 B), or reads and writes it where there is none or the master is only its low bits (4 B).
  // fp32 master and moments with fp32 gradients: 2 x (4 + 8) + 4 + 2 = 30.
  int64_t optimizer_step_bytes() const;
  // Whether the optimizer keeps a master copy of its own (fp32 or fp16); without one (none, or only
  // Apex's remainders beside them) the 16-bit weights are the parameters it updates.
  bool separate_master() const;
  // Whether the layer at `offset` in its pipeline rank (LayerRange::offset + its index in the chunk)
  // has its activations fully recomputed (recompute full, the first recompute_layers) or offloaded
  // (activation_offload, the first offload_layers).
  bool recomputes_layer(int64_t offset) const {
    return recompute == Recompute::kFull && (recompute_layers < 0 || offset < recompute_layers);
  }
  bool offloads_layer(int64_t offset) const {
    return activation_offload && (offload_layers < 0 || offset < offload_layers);
  }
  // This plan in precision `p`, its fp8-only settings (fp8_attention, fp8_recipe) kept under fp8 and
  // reset otherwise: the planner's precision search.
  Plan in_precision(hw::DType p) const;
};

// The model layers [first, first + count) of chunk c on pipeline rank s (virtual stage c * pp + s),
// and `offset`, the layers of rank s's earlier chunks (the layer's index within its rank is
// offset + i). REQUIRES: the plan's pp_layers constraint holds.
struct LayerRange {
  int64_t first = 0;
  int64_t count = 0;
  int64_t offset = 0;
};
// Hierarchical CP's a2a group when none is given: the most CP ranks (tp apart) that fit in one NVLink
// domain of `domain_gpus`, dividing cp; at least 1.
int64_t machine_cp_a2a(const Plan& p, int64_t domain_gpus);
LayerRange chunk_layers(const Plan& p, int64_t layers, int64_t s, int64_t c);
// Layers held by pipeline rank s (all its chunks).
int64_t stage_layers(const Plan& p, int64_t layers, int64_t s);
// The most layers any pipeline rank holds.
int64_t max_stage_layers(const Plan& p, int64_t layers);
// For vp = 1 and a pp that does not divide `layers`: sets first/last_stage_layers so that every middle
// stage holds ceil(layers / pp) and the first and last split the rest (the first gets the smaller
// half: it also runs the embedding, the last the output layer and loss, as in Llama 3 405B's 7 + 14 x 8
// + 7). Returns false (plan unchanged) when no such split exists (e.g. pp > layers).
bool balance_uneven_stages(Plan& p, int64_t layers);
// For vp >= 2 where K = pp * vp model chunks do not divide `layers` but divide layers + 2: sets the
// first and the last chunk to one layer fewer than the others' (layers + 2) / K, which leaves the
// embedding and the LM head and loss room on the end chunks. The layouts 405B runs were given this
// way (126 layers): Llama 3 on pp 16 x vp 8 with embedding- and loss-only end chunks (Dubey et al.
// 2024, sec. 3.3.2), NeMo's recipe on pp 8 x vp 8 (1 + 62 x 2 + 1), torchtitan's Interleaved 1F1B on
// pp 8 x vp 2 (7 + 14 x 8 + 7); the ZB-V authors recommend k pp - 2 layers for the same reason
// (sail-sg/zero-bubble-pipeline-parallelism, README). Returns false (plan unchanged) otherwise.
bool shorten_end_chunks(Plan& p, int64_t layers);

// One broken constraint: `key` is stable (see the model card), `message` names the values, e.g.
// "tp=3 does not divide heads=32".
struct ConstraintError {
  std::string key;
  std::string message;
};

// Largest supported values (validate_plan reports a larger one as broken before multiplying anything):
// every parallel degree and the GPU product at most 2^24, mbs and gbs at most 2^30, seq at most 2^24.
inline constexpr int64_t kMaxDegree = int64_t{1} << 24;
inline constexpr int64_t kMaxBatch = int64_t{1} << 30;
inline constexpr int64_t kMaxSeq = int64_t{1} << 24;

// All broken constraints of `plan` for `model` on `gpus` GPUs of type `gpu` (empty: valid).
// O(1) apart from the returned strings; allocation only when a constraint is broken.
std::vector<ConstraintError> validate_plan(const model::ModelSpec& model, const Plan& plan, int64_t gpus,
                                           const hw::GpuSpec& gpu);
// The same, throwing InputError at `where` (key = the constraint's key) for the first broken one.
void require_valid_plan(const model::ModelSpec& model, const Plan& plan, int64_t gpus, const hw::GpuSpec& gpu,
                        const Where& where);

// Rank stride between consecutive members of a group in the tp-cp-dp-pp order.
// kDp: the ranks that reduce gradients, dp x cp (context-parallel ranks hold the same parameters, as in
// Megatron-Core's data-parallel group with context parallelism). kDpShard: the ranks that share one shard
// (ZeRO/FSDP; HSDP: its shard group x cp; unsharded: dp x cp); kDpReplica: the replicas of one shard
// (HSDP), 1 when the shard spans all of DP.
// Routed experts use Megatron-Core's expert grid (parallel_state.py, expert_decoder_rank_generator:
// expert TP = TP, then EP, then the expert-data-parallel ranks EDP = dp x cp / ep, then PP, with CP
// folded into EP and EDP): kEp is ep ranks tp apart; kEdpShard the ranks that share one expert shard
// (or, unsharded, reduce expert gradients), tp x ep apart: shard_size / ep, or dp x cp / ep unsharded;
// kEdpReplica the HSDP replicas of an expert shard (the dense replicas: EP lies inside a shard group).
// kEtp: the expert tensor-parallel ranks (Plan::expert_tp(), the first of each TP group, 1 apart), and
// with etp < tp the EP ranks are etp apart and the EDP ones etp x ep.
// kCpA2a, kCpRing: hierarchical CP's levels (CpComm::kA2aP2p): cp_a2a ranks tp apart, and the cp / cp_a2a
// groups' ring, tp x cp_a2a apart (1 rank each without hierarchical CP).
enum class Group { kTp, kCp, kDp, kEp, kPp, kDpShard, kDpReplica, kEdpShard, kEdpReplica, kEtp, kCpA2a, kCpRing };
std::string_view group_name(Group g);
int64_t group_size(const Plan& plan, Group g);
int64_t group_stride(const Plan& plan, Group g);

}  // namespace orrery::train
