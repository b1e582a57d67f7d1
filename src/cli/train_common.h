// Pieces shared by `orrery train` and `orrery plan train`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compute/compute_model.h"
#include "hw/hw_catalog.h"
#include "io/json_util.h"
#include "model/model_spec.h"
#include "net/topology.h"
#include "train/memory.h"
#include "train/plan.h"
#include "train/simulator.h"

namespace orrery::cli {

// The node a training run or search is placed on: --node (which must hold `gpu`; InputError naming
// the flag otherwise) or the first catalog node with that GPU; nullptr when none has it.
const hw::NodeSpec* training_node(const hw::HwCatalog& hw, const hw::GpuSpec& gpu, const std::string& node_name);

// Video diffusion transformers (docs/training.md, "Video diffusion transformers"): the sample whose
// token count becomes the sequence length. 0 / empty: the model's own (catalog) sample.
struct VideoArgs {
  int64_t frames = 0, height = 0, width = 0, text_tokens = 0;
  std::string resolution, vae_compression, patch;
};
// --frames, --resolution, --height, --width, --vae-compression, --patch, --text-tokens.
void add_video_options(CLI::App* c, VideoArgs& v);
// Applies the video flags to a DiT and returns the sequence length of the run: the DiT's video token
// count, or `seq` for any other model. InputError naming the flag for a geometry that does not divide,
// for video flags on a model that is not a DiT, and for a --seq (seq_given) that contradicts the video.
int64_t apply_video(model::ModelSpec& m, const VideoArgs& a, int64_t seq, bool seq_given);

// Dropout probabilities of the model (model::Dropout), as Megatron-LM's --attention-dropout and
// --hidden-dropout set them; empty (the default): the model's own (Megatron's 0.1 for --arch gpt, 0 for
// Llama-style models and whatever a config.json or catalog entry says). NeMo's model configs set both to 0.
struct DropoutArgs {
  std::string attention, hidden;
};
void add_dropout_options(CLI::App* c, DropoutArgs& d);
// Applies them (the hidden probability also to the embedding dropout, as Megatron does). InputError
// naming the flag for a probability outside [0, 1).
void apply_dropout(model::ModelSpec& m, const DropoutArgs& d);
// {"attention": p, "hidden": p} of the model as run.
io::Json dropout_json(const model::ModelSpec& m);

// The scale of a training step, checked before anything is simulated (train and plan train): --gpus and
// --seq at most 2^24, --gbs at most 2^30, and the step's model FLOPs per GPU (gbs x seq tokens at
// model::training_flops_per_token) at most 1e5 s at the GPU's dense peak in `precision`. The last bound
// keeps every simulated time far inside core::Time's range (9.2e6 s: a step runs at well above 1% of
// peak); no real step is within three orders of magnitude of it. InputError naming the flag otherwise.
void check_training_scale(const model::ModelSpec& model, int64_t seq, int64_t gbs, int64_t gpus,
                          const hw::GpuSpec& gpu, hw::DType precision);

// The GPU as run: a copy of `gpu` with --power-limit applied ("500 W"; empty: the catalog's limit).
// InputError naming the flag for a malformed power, a non-positive one, or one above the GPU's TDP.
hw::GpuSpec with_power_limit(const hw::GpuSpec& gpu, const std::string& power_limit);

// The GPU and software stack a training run assumes (train and plan train).
struct KernelArgs {
  std::string power_limit;                   // --power-limit; empty: the catalog's limit or the TDP
  std::string attention_kernel = "default";  // --attention-kernel
  std::string fusion = "fused";              // --fusion
  std::string calibration;                   // --calibration FILE; empty: the built-in calibration
  std::string allocator = "classic";         // --allocator
  std::string grad_accum_fusion = "auto";    // --grad-accum-fusion
};
void add_kernel_options(CLI::App* c, KernelArgs& k);
// --optimizer-dtype and --master-weights (train/plan.h, MasterWeights), the same on train and plan train.
void add_optimizer_state_flags(CLI::App& c, std::string& optimizer_dtype, std::string& master_weights);
// --fp8-recipe (train/plan.h, Fp8Recipe), the same on train and plan train.
void add_fp8_recipe_flag(CLI::App& c, std::string& fp8_recipe);
// --fsdp-impl (train/plan.h, FsdpImpl), the same on train and plan train.
void add_fsdp_impl_flag(CLI::App& c, std::string& fsdp_impl);
// --cp-comm-type (train/plan.h, CpComm), the same on train and plan train.
void add_cp_comm_flag(CLI::App& c, std::string& cp_comm);
// --gpu-variability SIGMA (train/variability.h), the same on train and plan train; parse_gpu_variability
// gives 0 for an empty text and throws InputError naming the flag outside [0, 0.5].
void add_gpu_variability_flag(CLI::App& c, std::string& sigma);
double parse_gpu_variability(const std::string& text);

// The GPU's default calibration with --attention-kernel applied (default | fa2 | cudnn | fa3), then the
// constants of --calibration FILE (io/calibration_file.h) laid over it; InputError naming the flag for
// an unknown kernel or one without a published figure on that GPU, or the file's line and key.
compute::Calibration training_calibration(const hw::GpuSpec& gpu, const KernelArgs& k);
// The calibration's provenance for --json: {"name", "source", "file" (null without --calibration)}.
io::Json calibration_json(const compute::Calibration& c, const KernelArgs& k);

// A yes | no flag (also true/false, on/off, 1/0); InputError naming `flag` otherwise.
bool parse_yes_no(const std::string& v, const std::string& flag);
// --tp-comm-overlap: yes | te (Transformer Engine's pairing) | async (PyTorch's async TP) | no; sets
// Plan::tp_comm_overlap and Plan::tp_overlap_async.
void parse_tp_overlap(const std::string& v, train::Plan& p);
// The resolved --tp-comm-overlap: "te", "async" or "no".
std::string tp_overlap_label(const train::Plan& p);

// --fusion fused | compile | eager onto Plan::eager and Plan::eager_loss: fused (Megatron-Core /
// Transformer Engine: fused elementwise kernels and loss), compile (torch.compile on each transformer
// block, the loss in eager PyTorch: torchtitan), eager (PyTorch modules op by op); InputError naming the
// flag, with the nearest name, otherwise.
// "AxBxC" -> {A, B, C}: exactly n positive integers separated by 'x'; InputError naming `flag`, with
// `example`, otherwise.
std::vector<int64_t> parse_dims(const std::string& text, size_t n, const char* flag, const char* example);
void apply_fusion(const std::string& fusion, train::Plan& p);
// How the kernels line names a --fusion value: "fused", "compiled (loss eager)", "eager".
std::string fusion_label(const std::string& fusion);
// --grad-accum-fusion auto | yes | no (train::Plan::grad_accum_fusion); auto: yes on Megatron's fused
// kernels (`megatron`: --fusion fused) with fp32 main gradients (Megatron-Core's default), no under PyTorch
// autograd (--fusion compile or eager) or with 2-byte gradients.
bool parse_grad_accum_fusion(const std::string& value, bool megatron, int64_t grad_bytes);
// --recompute-modules LIST (train::Plan::recompute_modules): empty gives the attention core alone; a list
// other than core_attn needs `recompute` selective (InputError naming the flag otherwise).
uint32_t parse_recompute_modules_flag(const std::string& list, train::Recompute recompute);

// --allocator none | classic | expandable (train/caching_allocator.h); InputError naming the flag, with
// the nearest name, otherwise.
train::AllocatorMode parse_allocator(const std::string& name);

// How communication is timed (train/comm_model.h, train/flow_comm.h): --comm-model alpha-beta | flow,
// and for flow the fabric: --topology FILE, or the catalog node's machines in a fat tree (--tiers,
// --oversubscription, --no-rail-optimized).
struct FabricArgs {
  std::string comm_model = "alpha-beta";
  std::string topology;  // edge-list file
  int tiers = 2;
  double oversubscription = 1.0;
  bool no_rail_optimized = false;
  bool flow() const { return comm_model == "flow"; }
};
void add_fabric_options(CLI::App* c, FabricArgs& f);
// The topology for --comm-model flow (nullopt for alpha-beta). InputError naming the flag for an
// unknown model, fabric flags without flow, a topology of another size, no catalog node with the
// GPU, or GPUs that do not fill whole machines; "fabric.<field>" for a fat tree the builder refuses
// (tiers, oversubscription, too many machines for two tiers).
std::optional<net::Topology> training_topology(const FabricArgs& a, const hw::GpuSpec& gpu, const hw::NodeSpec* node,
                                               int64_t gpus);
// "alpha-beta (non-blocking fabric)" or "flow-level on a 2-tier rail-optimized fat tree, 4:1 (512 GPUs)".
std::string fabric_description(const FabricArgs& a, const std::optional<net::Topology>& topology);
// The `fabric` JSON object of a flow run ({tiers, oversubscription, rail_optimized} or {topology}).
io::Json fabric_json(const FabricArgs& a);

// A plan's table cells and JSON (train, plan train, demo): sharding "hsdp-G" for ZeRO-3 within shard
// groups of G, schedule "-" without pipeline parallelism.
std::string sharding_label(const train::Plan& p);
// "full:K" for full recompute on K layers per pipeline rank, else the mode's name.
std::string recompute_label(const train::Plan& p);
std::string schedule_label(const train::Plan& p);
// "act:K" (the first K layers' activations per rank), "act" (every activation), "opt" (optimizer
// states and step; "opt:F" for the share F of them), joined by "+"; "-" for none.
std::string offload_label(const train::Plan& p);
// The optional columns: `precision` (plan train searching several), `offload` (plan train searching
// offload, train).
struct PlanColumns {
  bool precision = false;
  bool offload = false;
};
// tp, pp, cp, ep, dp, vp, schedule, mbs, sharding, recompute, sp[, offload][, precision]
std::vector<std::string> plan_header(PlanColumns columns = {});
std::vector<std::string> plan_cells(const train::Plan& p, PlanColumns columns = {});
io::Json plan_json(const train::Plan& p);  // the degrees, schedule, sharding, recompute, offload and precision
// --cpu-adam-rate (train, plan train): optimizer offload's CPU step rate (Plan::cpu_adam_params_per_s).
void add_cpu_adam_rate_flag(CLI::App& cmd, double& rate);
// A MoE model's routing under plan p: "top-K of E experts, <dispatcher> dispatcher, <capacity>, load
// imbalance L"; with `per_plan` also the EP degree and the copies per token the all-to-alls move
// (Plan::moe_copies_per_token), else the stated EP ranks per token if any (the planner's shared setting).
// `searched`: the planner's dispatchers when it tries more than one ("alltoall or deepep dispatcher").
std::string moe_routing(const model::ModelSpec& m, const train::Plan& p, bool per_plan,
                        const std::vector<train::MoeDispatcher>& searched = {});
// Bytes as GiB with two decimals ("73.93"), the unit of the training tables.
std::string gib(Bytes b);
// A memory breakdown in bytes: weights, gradients, optimizer, activations, temporary, communication,
// cuda_context, allocator.
io::Json memory_json(const train::MemoryBreakdown& m);
// A step's time by category (train/simulator.h TimeCategory names), in seconds.
io::Json time_json(const std::array<Time, train::kNumTimeCategories>& breakdown);

}  // namespace orrery::cli
