// `orrery train`: memory, step time, throughput, MFU/HFU and a breakdown of one training plan
// (docs/training.md). Every column of ../shared/validation/training.csv maps onto one flag.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/model_report.h"
#include "cli/output.h"
#include "cli/train_common.h"
#include "compute/compute_model.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "io/hf_config.h"
#include "train/replay.h"
#include "train/schedule_csv.h"
#include "train/train.h"
#include "train/variability.h"

namespace orrery::cli {
namespace {

using io::Json;
namespace tr = orrery::train;

const Where kCl{"<command line>", 0, ""};

struct TrainArgs {
  std::string model, hf_config, arch;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  int64_t seq = 2048;
  std::string gpu, node, nic_bandwidth = "400 Gb/s";
  KernelArgs kernels;  // --power-limit, --attention-kernel, --fusion
  int64_t gpus = 0;
  int64_t tp = 1, pp = 1, dp = 0, cp = 1, ep = 1, etp = 0, vp = 1, mbs = 1, gbs = 0;
  int64_t first_stage_layers = -1, last_stage_layers = -1;  // -1: the other chunks' share
  int64_t microbatch_group = 0;                              // 0: pp
  std::string sp = "no", recompute = "none", precision = "bf16", dp_sharding = "none", schedule, flash = "yes", fp8_attention = "no";
  std::string schedule_csv;  // --schedule-csv: a pipeline order from a file (train/schedule_csv.h)
  std::string schedule_csv_out;  // --schedule-csv-out: the plan's order in that format
  int64_t recompute_layers = -1, shard_group = 0, unsharded_layers = 0, fsdp_prefetch = 1, grad_bytes = 4;
  double bucket_mb = 40.0, capacity_factor = 0.0, load_imbalance = 1.0, grad_density = 1.0, moe_ranks_per_token = 0.0;
  std::string moe_dispatcher = "alltoall";
  std::string recompute_modules;  // --recompute-modules; empty: core_attn
  std::string optimizer_dtype = "fp32", master_weights = "fp32", fp8_recipe = "delayed";
  std::string fsdp_impl = "fsdp2";
  std::string cp_comm = "p2p";
  std::string hierarchical_cp;  // --hierarchical-cp-sizes AxB (empty: the a2a group fills an NVLink domain)
  std::string grad_sync = "dense", overlap_grad = "yes", overlap_param = "yes", tp_overlap = "no", overlap_f_b = "yes", ep_overlap = "no";
  std::string link_sharing = "yes";
  std::string tie_embeddings;  // --tie-embeddings yes | no; empty: the model's own
  bool activation_offload = false, optimizer_offload = false;
  int64_t offload_layers = -1;  // --offload-layers (implies --activation-offload)
  bool offload_layers_given = false;
  double optimizer_offload_fraction = 1.0;  // --optimizer-offload-fraction (implies --optimizer-offload)
  double cpu_adam_rate = tr::kCpuAdamParamsPerSecond;  // --cpu-adam-rate
  bool optimizer_fraction_given = false;
  std::vector<std::string> stragglers;
  std::string gpu_variability;  // --gpu-variability SIGMA; empty: none
  std::vector<std::string> slow_links;
  std::string trace_out, trace_ranks;
  FabricArgs fabric;
  VideoArgs video;  // DiT sample (train_common.h)
  DropoutArgs dropout;  // --attention-dropout, --hidden-dropout
  bool seq_given = false;
};

model::ModelSpec resolve_model_as_given(Context& ctx, const TrainArgs& a);

// The model with --tie-embeddings applied (an LM head shared with the token embedding, or its own).
model::ModelSpec resolve_model(Context& ctx, const TrainArgs& a) {
  model::ModelSpec m = resolve_model_as_given(ctx, a);
  if (!a.tie_embeddings.empty()) {
    const bool tied = parse_yes_no(a.tie_embeddings, "--tie-embeddings");
    if (tied != m.tied_embeddings && m.is_dit()) {
      throw InputError(kCl.with_key("--tie-embeddings"), "a DiT has no token embedding to tie");
    }
    m.tied_embeddings = tied;
  }
  apply_dropout(m, a.dropout);
  return m;
}

model::ModelSpec resolve_model_as_given(Context& ctx, const TrainArgs& a) {
  const int given = (a.model.empty() ? 0 : 1) + (a.hf_config.empty() ? 0 : 1) + (a.arch.empty() ? 0 : 1);
  if (given != 1) {
    throw InputError(kCl.with_key("--model"),
                     given == 0 ? "missing model: give --model NAME, --hf-config FILE, or --arch gpt|llama with its sizes"
                                : "give only one of --model, --hf-config and --arch");
  }
  if (!a.model.empty()) return ctx.catalog().model(a.model, kCl.with_key("--model"));
  if (!a.hf_config.empty()) return io::read_hf_config(a.hf_config);
  const std::string arch = to_lower(a.arch);
  if (arch != "gpt" && arch != "llama") {
    throw InputError(kCl.with_key("--arch"), fmt::format("unknown architecture '{}'", a.arch),
                     suggest(a.arch, {"gpt", "llama"}));
  }
  for (const auto& [flag, v] : {std::pair<const char*, int64_t>{"--layers", a.layers}, {"--hidden", a.hidden},
                                {"--heads", a.heads}, {"--vocab", a.vocab}}) {
    if (v <= 0) throw InputError(kCl.with_key(flag), fmt::format("--arch {} needs a positive {}", arch, flag));
  }
  model::GenericArch g;
  g.layers = a.layers;
  g.hidden = a.hidden;
  g.heads = a.heads;
  g.kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  g.ffn = a.ffn > 0 ? a.ffn : 4 * a.hidden;
  g.vocab = a.vocab;
  g.seq = a.seq;
  return arch == "gpt" ? model::ModelSpec::gpt(g) : model::ModelSpec::llama(g);
}

tr::Plan make_plan(const TrainArgs& a, int64_t seq) {
  tr::Plan p;
  p.tp = a.tp;
  p.pp = a.pp;
  p.cp = a.cp;
  p.ep = a.ep;
  p.etp = a.etp;
  p.vp = a.vp;
  p.microbatch_group = a.microbatch_group;
  p.first_stage_layers = a.first_stage_layers;
  p.last_stage_layers = a.last_stage_layers;
  // In double: the degrees are not range-checked yet (validate_plan does), and their int64 product could overflow.
  const double inner = std::max(1.0, static_cast<double>(a.tp) * static_cast<double>(a.pp) * static_cast<double>(a.cp));
  p.dp = a.dp > 0 ? a.dp : std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(a.gpus) / inner));
  p.mbs = a.mbs;
  p.gbs = a.gbs;
  p.seq = seq;
  p.sp = parse_yes_no(a.sp, "--sp");
  p.recompute = tr::parse_recompute(a.recompute, kCl.with_key("--recompute"));
  p.recompute_layers = a.recompute_layers;
  p.recompute_modules = parse_recompute_modules_flag(a.recompute_modules, p.recompute);
  p.precision = tr::parse_precision(a.precision, kCl.with_key("--precision"));
  p.sharding = tr::parse_sharding(a.dp_sharding, kCl.with_key("--dp-sharding"));
  p.shard_group = a.shard_group;
  p.unsharded_layers = a.unsharded_layers;
  p.fsdp_prefetch = a.fsdp_prefetch;
  p.schedule = a.schedule.empty() ? (a.vp > 1 ? tr::Schedule::kInterleaved : tr::Schedule::kOneFOneB)
                                  : tr::parse_schedule(a.schedule, kCl.with_key("--schedule"));
  if (p.v_shape() && a.vp == 1) p.vp = 2;  // ZB-V's V is two chunks per rank; --vp 1 is the flag's default
  if (!a.schedule_csv.empty()) {
    if (!a.schedule.empty()) {
      throw InputError(kCl.with_key("--schedule-csv"), "--schedule-csv gives the order itself: leave out --schedule");
    }
    tr::use_custom_schedule(p, std::make_shared<const tr::CustomSchedule>(tr::read_schedule_csv(a.schedule_csv)));
    // An explicit --vp must agree with the file (validate_plan names both); the default takes the file's.
    if (a.vp != 1) p.vp = a.vp;
  }
  p.flash_attention = parse_yes_no(a.flash, "--flash-attention");
  p.fp8_attention = parse_yes_no(a.fp8_attention, "--fp8-attention");
  p.fp8_recipe = tr::parse_fp8_recipe(a.fp8_recipe, kCl.with_key("--fp8-recipe"));
  p.fsdp_impl = tr::parse_fsdp_impl(a.fsdp_impl, kCl.with_key("--fsdp-impl"));
  p.cp_comm = tr::parse_cp_comm(a.cp_comm, kCl.with_key("--cp-comm-type"));
  apply_fusion(a.kernels.fusion, p);
  p.allocator = parse_allocator(a.kernels.allocator);
  p.grad_bytes = a.grad_bytes;
  if (a.grad_bytes != 2 && a.grad_bytes != 4) {
    throw InputError(kCl.with_key("--grad-bytes"), fmt::format("expected 2 or 4, found {}", a.grad_bytes));
  }
  p.grad_accum_fusion = parse_grad_accum_fusion(a.kernels.grad_accum_fusion, !p.eager && !p.eager_loss, p.grad_bytes);
  p.optimizer_dtype = tr::parse_optimizer_dtype(a.optimizer_dtype, kCl.with_key("--optimizer-dtype"));
  p.master_weights = tr::parse_master_weights(a.master_weights, kCl.with_key("--master-weights"));
  if (!(a.bucket_mb > 0.0 && a.bucket_mb <= 1e6)) {
    throw InputError(kCl.with_key("--bucket-mb"), fmt::format("expected a bucket size in MB above 0 and up to 1e6, found {}", a.bucket_mb));
  }
  p.bucket_bytes = static_cast<int64_t>(a.bucket_mb * 1e6);
  p.capacity_factor = a.capacity_factor;
  p.moe_dispatcher = tr::parse_moe_dispatcher(a.moe_dispatcher, kCl.with_key("--moe-dispatcher"));
  p.moe_ranks_per_token = a.moe_ranks_per_token;
  p.load_imbalance = a.load_imbalance;
  p.grad_sync = tr::parse_grad_sync(a.grad_sync, kCl.with_key("--grad-sync"));
  p.grad_density = a.grad_density;
  p.overlap_grad_reduce = parse_yes_no(a.overlap_grad, "--overlap-grad-reduce");
  p.overlap_param_gather = parse_yes_no(a.overlap_param, "--overlap-param-gather");
  p.overlap_f_b = parse_yes_no(a.overlap_f_b, "--overlap-f-b");
  p.ep_a2a_overlap = parse_yes_no(a.ep_overlap, "--overlap-moe-expert-parallel-comm");
  parse_tp_overlap(a.tp_overlap, p);
  // --offload-layers N offloads N layers per rank, so it turns offload on (-1: every activation).
  p.activation_offload = a.activation_offload || a.offload_layers_given;
  p.offload_layers = a.offload_layers;
  // --optimizer-offload-fraction F keeps 1 - F of the optimizer on the GPU, so it turns offload on.
  p.optimizer_offload = a.optimizer_offload || a.optimizer_fraction_given;
  p.optimizer_offload_fraction = a.optimizer_offload_fraction;
  p.cpu_adam_params_per_s = a.cpu_adam_rate;
  return p;
}

std::vector<int32_t> parse_trace_stages(const std::string& text, const tr::Plan& p) {
  std::vector<int32_t> stages;
  if (text.empty()) return {0};
  std::stringstream ss(text);
  std::string item;
  const int64_t stride = tr::group_stride(p, tr::Group::kPp);
  while (std::getline(ss, item, ',')) {
    const std::string t(trim(item));
    int64_t r = -1;
    try {
      size_t used = 0;
      r = std::stoll(t, &used);
      if (used != t.size()) r = -1;
    } catch (const std::exception&) {
      r = -1;
    }
    if (r < 0 || r >= p.gpus()) {
      throw InputError(kCl.with_key("--trace-ranks"), fmt::format("'{}' is not a rank in [0, {})", t, p.gpus()));
    }
    stages.push_back(static_cast<int32_t>(r / stride));
  }
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return stages;
}

// --straggler STAGE:FACTOR (repeatable): the GPUs of pipeline stage STAGE run FACTOR times slower
// (a straggler GPU sets the pace of its TP group, and through the pipeline and the DP collectives, of
// the step). Returns one factor per stage (1 = nominal).
std::vector<double> parse_stragglers(const std::vector<std::string>& items, const tr::Plan& p) {
  std::vector<double> slow;
  for (const std::string& item : items) {
    const auto colon = item.find(':');
    int64_t stage = -1;
    double factor = 0.0;
    try {
      size_t used = 0;
      if (colon != std::string::npos) {
        stage = std::stoll(item.substr(0, colon), &used);
        if (used != colon) stage = -1;
        const std::string f = item.substr(colon + 1);
        factor = std::stod(f, &used);
        if (used != f.size()) factor = 0.0;
      }
    } catch (const std::exception&) {
      stage = -1;
    }
    if (stage < 0 || stage >= p.pp || !(factor >= 1.0) || !std::isfinite(factor)) {
      throw InputError(kCl.with_key("--straggler"),
                       fmt::format("'{}': expected STAGE:FACTOR with STAGE in [0, {}) and FACTOR >= 1, e.g. 0:1.25",
                                   item, p.pp));
    }
    if (slow.size() < static_cast<size_t>(p.pp)) slow.resize(static_cast<size_t>(p.pp), 1.0);
    slow[static_cast<size_t>(stage)] = factor;
  }
  return slow;
}

// --slow-link RANK:KIND:FACTOR (repeatable): global rank RANK's NIC or NVLink port runs FACTOR times
// slower (train/comm_model.h SlowLink).
std::vector<tr::SlowLink> parse_slow_links(const std::vector<std::string>& items, const tr::Plan& p) {
  std::vector<tr::SlowLink> out;
  const std::vector<std::string> kinds = {"nic", "nvlink"};
  for (const std::string& item : items) {
    std::vector<std::string> parts;
    for (size_t from = 0;;) {
      const size_t colon = item.find(':', from);
      parts.push_back(item.substr(from, colon == std::string::npos ? std::string::npos : colon - from));
      if (colon == std::string::npos) break;
      from = colon + 1;
    }
    auto bad = [&](const std::string& why) {
      return InputError(kCl.with_key("--slow-link"),
                        fmt::format("'{}': {}; expected RANK:KIND:FACTOR with RANK in [0, {}), KIND nic or nvlink and "
                                    "FACTOR >= 1, e.g. 12:nic:4",
                                    item, why, p.gpus()));
    };
    if (parts.size() != 3) throw bad("not three fields");
    tr::SlowLink l;
    try {
      size_t used = 0;
      l.rank = std::stoll(parts[0], &used);
      if (used != parts[0].size()) throw bad("the rank is not an integer");
      l.factor = std::stod(parts[2], &used);
      if (used != parts[2].size()) throw bad("the factor is not a number");
    } catch (const std::logic_error&) {
      throw bad("the rank or the factor is not a number");
    }
    if (l.rank < 0 || l.rank >= p.gpus()) throw bad("no such rank");
    if (!(l.factor >= 1.0) || !std::isfinite(l.factor)) throw bad("the factor is below 1");
    if (parts[1] == "nic") {
      l.kind = tr::LinkKind::kNic;
    } else if (parts[1] == "nvlink") {
      l.kind = tr::LinkKind::kScaleup;
    } else {
      throw bad(fmt::format("unknown link kind '{}' ({})", parts[1], suggest(parts[1], kinds)));
    }
    out.push_back(l);
  }
  return out;
}

// Compute and communication tasks as complete events; each traced stage's memory over the step as a
// counter track ("memory (GiB)": activations, temporary, and the rest).
std::string chrome_trace(const tr::TrainResult& r, const tr::Plan& p, const std::vector<int32_t>& stages,
                         const tr::MemoryConstants& k) {
  Json ev = Json::array();
  const int64_t stride = tr::group_stride(p, tr::Group::kPp);
  auto pid = [&](int64_t stage) { return fmt::format("rank {} (stage {})", stage * stride, stage); };
  for (const tr::TraceEvent& e : r.step.trace) {
    ev.push_back(Json{{"name", e.name},
                      {"ph", "X"},
                      {"ts", e.start.to_us()},
                      {"dur", (e.end - e.start).to_us()},
                      {"pid", pid(e.stage)},
                      {"tid", e.stream}});
  }
  for (int32_t s : stages) {
    for (const tr::MemorySample& m : tr::memory_timeline(p, r.memory, s, r.step.passes, k)) {
      ev.push_back(Json{{"name", "memory (GiB)"},
                        {"ph", "C"},
                        {"ts", m.time.to_us()},
                        {"pid", pid(s)},
                        {"args",
                         {{"activations", m.activations.to_gib()},
                          {"temporary", m.temporary.to_gib()},
                          {"other", (m.total - m.activations - m.temporary).to_gib()}}}});
    }
  }
  return io::dump_json(Json{{"traceEvents", ev}, {"displayTimeUnit", "ms"}});
}

// The memory profile in `windows` equal slices of the step: the highest and lowest totals in each slice
// (the state carried into a slice counts as in it).
Table memory_profile(const std::vector<tr::MemorySample>& t, Time step, int64_t stage, int windows) {
  Table out({"time (s)", "peak GiB", "low GiB", "activations at peak", "chunks held at peak"},
            fmt::format("memory over the step (stage {}, in {} equal slices)", stage, windows));
  size_t i = 0;
  tr::MemorySample carried = t.empty() ? tr::MemorySample{} : t.front();
  for (int w = 0; w < windows; ++w) {
    const Time lo = Time::seconds(step.to_seconds() * w / windows);
    const Time hi = Time::seconds(step.to_seconds() * (w + 1) / windows);
    tr::MemorySample high = carried;
    Bytes low = carried.total;
    for (; i < t.size() && (t[i].time < hi || w + 1 == windows); ++i) {
      if (t[i].total > high.total) high = t[i];
      low = std::min(low, t[i].total);
      carried = t[i];
    }
    out.add_row({fmt::format("{:.3f}-{:.3f}", lo.to_seconds(), hi.to_seconds()), gib(high.total), gib(low),
                 gib(high.activations), fmt::format("{}", high.chunks_held)});
  }
  return out;
}

// One `orrery train` run, simulated: what the report and --replay read.
struct TrainRun {
  model::ModelSpec model;
  hw::GpuSpec gpu;
  const hw::NodeSpec* node = nullptr;
  tr::Plan plan;
  tr::EvaluateOptions opt;
  std::optional<net::Topology> topology;
  compute::Calibration calibration;
  double variability = 0.0;  // --gpu-variability SIGMA
  tr::TrainResult r;
};

// --hierarchical-cp-sizes AxB onto Plan::cp_a2a (A); empty: machine_cp_a2a. InputError naming the flag for
// a malformed pair, a product other than cp, or sizes without --cp-comm-type a2a+p2p.
int64_t hierarchical_cp_a2a(const std::string& sizes, const tr::Plan& p, const tr::ClusterSpec& cluster) {
  if (sizes.empty()) return p.cp_comm == tr::CpComm::kA2aP2p ? tr::machine_cp_a2a(p, cluster.domain_gpus()) : 0;
  const Where at = kCl.with_key("--hierarchical-cp-sizes");
  if (p.cp_comm != tr::CpComm::kA2aP2p) throw InputError(at, "applies to --cp-comm-type a2a+p2p");
  const std::vector<int64_t> v = parse_dims(sizes, 2, "--hierarchical-cp-sizes", "2x4 (a2a groups x ring)");
  if (v[0] > p.cp / v[1] || v[0] * v[1] != p.cp) {  // the first test keeps the product inside int64
    throw InputError(at, fmt::format("expected A x B = cp = {} (the a2a groups' size, then the ring's), found '{}'", p.cp, sizes));
  }
  return v[0];
}

TrainRun simulate_train(Context& ctx, const TrainArgs& a) {
  if (a.gpu.empty()) throw InputError(kCl.with_key("--gpu"), "missing; e.g. --gpu h100-sxm");
  if (a.gpus <= 0) throw InputError(kCl.with_key("--gpus"), "missing or not positive; e.g. --gpus 8");
  if (a.gbs <= 0) throw InputError(kCl.with_key("--gbs"), "missing or not positive: the global batch in sequences");
  TrainRun run;
  run.model = resolve_model(ctx, a);
  const int64_t seq = apply_video(run.model, a.video, a.seq, a.seq_given);  // a DiT's sequence: its video token count
  const hw::HwCatalog& hw = ctx.catalog().hw;
  run.gpu = with_power_limit(hw.get_gpu(a.gpu, kCl.with_key("--gpu")), a.kernels.power_limit);
  run.node = training_node(hw, run.gpu, a.node);
  const Bandwidth nic = parse_bandwidth_positive(a.nic_bandwidth, kCl.with_key("--nic-bandwidth"));
  const tr::ClusterSpec cluster = tr::ClusterSpec::from_catalog(run.gpu, run.node, 8, nic);
  // Before make_plan, which divides --gpus by the degrees.
  check_training_scale(run.model, seq, a.gbs, a.gpus, run.gpu, tr::parse_precision(a.precision, kCl.with_key("--precision")));
  run.plan = make_plan(a, seq);
  run.plan.cp_a2a = hierarchical_cp_a2a(a.hierarchical_cp, run.plan, cluster);
  tr::require_valid_plan(run.model, run.plan, a.gpus, run.gpu, kCl);
  tr::EvaluateOptions& opt = run.opt;
  if (!a.trace_out.empty()) opt.step.trace_stages = parse_trace_stages(a.trace_ranks, run.plan);
  opt.step.stage_slowdown = parse_stragglers(a.stragglers, run.plan);
  // The slowest of the job's GPUs paces every stage (train/variability.h); a straggler stage is slower still.
  run.variability = parse_gpu_variability(a.gpu_variability);
  opt.step.compute_slowdown = tr::slowest_gpu_factor(run.variability, a.gpus);
  opt.step.share_links = parse_yes_no(a.link_sharing, "--link-sharing");
  opt.slow_links = parse_slow_links(a.slow_links, run.plan);
  run.calibration = training_calibration(run.gpu, a.kernels);
  const compute::ComputeModel cm(run.gpu, run.calibration);
  opt.memory_timeline = true;
  run.topology = training_topology(a.fabric, run.gpu, run.node, a.gpus);
  if (run.topology && !a.slow_links.empty()) {
    throw InputError(kCl.with_key("--slow-link"), "runs with --comm-model alpha-beta (with flow, edit the link in --topology)");
  }
  if (run.topology) opt.topology = &*run.topology;
  run.r = tr::evaluate(run.model, run.plan, cluster, cm, opt);
  opt.topology = nullptr;  // points into `run`, which the caller receives by move
  return run;
}

void run_train(Context& ctx, const TrainArgs& a) {
  const TrainRun run = simulate_train(ctx, a);
  const model::ModelSpec& model = run.model;
  const hw::GpuSpec& gpu = run.gpu;
  const hw::NodeSpec* node = run.node;
  const tr::Plan& plan = run.plan;
  const tr::EvaluateOptions& opt = run.opt;
  const std::optional<net::Topology>& topology = run.topology;
  const tr::TrainResult& r = run.r;
  const compute::ComputeModel cm(gpu, run.calibration);
  if (!a.trace_out.empty()) {
    io::write_file_atomic(a.trace_out, chrome_trace(r, plan, opt.step.trace_stages, opt.memory));
  }
  if (!a.schedule_csv_out.empty()) io::write_file_atomic(a.schedule_csv_out, tr::schedule_csv_text(plan));

  // A stage's memory by category, in the order of the documented `memory` keys.
  const auto categories = [](const tr::MemoryBreakdown& b) {
    return std::vector<std::pair<std::string, Bytes>>{
        {"weights", b.weights},         {"gradients", b.gradients}, {"optimizer", b.optimizer},
        {"activations", b.activations}, {"temporary", b.temporary}, {"communication", b.communication},
        {"cuda_context", b.context},    {"allocator", b.allocator}};
  };
  const int64_t stage_stride = tr::group_stride(plan, tr::Group::kPp);
  const tr::StageMemory& ps = r.memory.stages[static_cast<size_t>(r.memory.peak_stage)];
  const tr::MemoryBreakdown& mb = ps.memory;
  const std::vector<std::pair<std::string, Bytes>> mem = categories(mb);
  if (ctx.global.json) {
    Json j = envelope("train");
    j["model"] = model.name;
    j["tied_embeddings"] = model.tied_embeddings;
    j["dropout"] = dropout_json(model);
    j["gpu"] = gpu.name;
    j["power_limit_w"] = gpu.power().watts();
    j["attention_kernel"] = a.kernels.attention_kernel;
    j["fusion"] = a.kernels.fusion;
    j["allocator"] = a.kernels.allocator;
    j["attention_efficiency"] = cm.calibration().attention.efficiency;
    j["calibration"] = calibration_json(cm.calibration(), a.kernels);
    j["gpus"] = a.gpus;
    j["node"] = node != nullptr ? Json(node->name) : Json(nullptr);
    // The planner's plan object (train_common.h), with the layers the end stages hold (not the uneven
    // split's 0 for an even split) and the rest of the resolved plan (rule 6: a result records its whole configuration).
    Json pj = plan_json(plan);
    pj["first_stage_layers"] = tr::stage_layers(plan, model.layers, 0);
    pj["last_stage_layers"] = tr::stage_layers(plan, model.layers, plan.pp - 1);
    pj.update(Json{{"gbs", plan.gbs},
                 {"seq", plan.seq},
                 {"fsdp_prefetch", plan.fsdp_prefetch},
                 {"flash_attention", plan.flash_attention},
                 {"grad_bytes", plan.grad_bytes},
                 {"grad_accum_fusion", plan.grad_accum_fusion},
                 {"optimizer_dtype", hw::dtype_name(plan.optimizer_dtype)},
                 {"master_weights", tr::master_weights_name(plan.master_weights)},
                 {"bucket_bytes", plan.bucket_bytes},
                 {"grad_sync", tr::grad_sync_name(plan.grad_sync)},
                 {"grad_density", plan.grad_density},
                 {"overlap_grad_reduce", plan.overlap_grad_reduce},
                 {"overlap_param_gather", plan.overlap_param_gather},
                 {"overlap_f_b", plan.overlap_f_b},
                 {"overlap_moe_expert_parallel_comm", plan.ep_a2a_overlap},
                 {"tp_comm_overlap", plan.tp_comm_overlap},
                 {"tp_comm_overlap_mode", tp_overlap_label(plan)},
                 {"capacity_factor", plan.capacity_factor},
                 {"load_imbalance", plan.load_imbalance},
                 {"moe_ranks_per_token", plan.moe_ranks_per_token},
                 {"moe_copies_per_token", model.is_moe() ? Json(plan.moe_copies_per_token(model.moe.num_experts, model.moe.top_k))
                                                         : Json(nullptr)}});
    j["plan"] = pj;
    if (model.is_dit()) j["video"] = video_json(model.dit);
    j["stragglers"] = opt.step.stage_slowdown;  // per stage slowdown factor; empty = none
    j["gpu_variability"] = Json{{"sigma", run.variability}, {"slowest_gpu_factor", opt.step.compute_slowdown}};
    Json links = Json::array();
    for (const tr::SlowLink& l : opt.slow_links) {
      links.push_back(Json{{"rank", l.rank}, {"link", tr::link_kind_name(l.kind)}, {"factor", l.factor}});
    }
    j["slow_links"] = links;
    j["comm_model"] = a.fabric.comm_model;
    j["link_sharing"] = opt.step.share_links;
    if (topology) {
      j["fabric"] = fabric_json(a.fabric);
    }
    j["step_time_s"] = r.step.step_time.to_seconds();
    j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
    j["tflops_per_gpu"] = r.tflops_per_gpu;
    j["mfu"] = r.mfu;
    j["hfu"] = r.hfu;
    j["peak_memory_bytes"] = r.memory.peak.count();
    j["peak_stage"] = r.memory.peak_stage;
    j["peak_rank"] = r.memory.peak_rank;
    j["memory_capacity_bytes"] = r.memory.capacity.count();
    j["host_memory_bytes"] = r.memory.host_peak.count();
    j["host_memory_capacity_bytes"] = r.memory.host_capacity.count() > 0 ? Json(r.memory.host_capacity.count()) : Json(nullptr);
    j["host_fits"] = r.memory.host_fits;
    j["fits"] = r.memory.fits;
    Json m = Json::object();
    for (const auto& [k, v] : mem) m[k] = v.count();
    j["memory"] = m;
    j["time"] = time_json(r.step.breakdown);
    j["time_stage"] = r.step.breakdown_stage;
    Json layers = Json::array();
    for (const tr::LayerMemory& l : r.memory.peak_layers) {
      layers.push_back(Json{{"layer", l.layer}, {"model_states", l.model_states.count()}, {"activations", l.activations.count()}});
    }
    j["memory_by_layer"] = layers;
    // Every pipeline stage's peak (the footnote of torchtitan's benchmark: PP ranks peak differently).
    Json stages = Json::array();
    for (const tr::StageMemory& st : r.memory.stages) {
      Json sm = Json::object();
      for (const auto& [k, v] : categories(st.memory)) sm[k] = v.count();
      stages.push_back(Json{{"stage", st.stage},
                            {"first_rank", st.stage * stage_stride},
                            {"layers", st.layers},
                            {"inflight_microbatches", st.inflight_microbatches},
                            {"total_bytes", st.memory.total().count()},
                            {"host_bytes", st.host.count()},
                            {"memory", sm}});
    }
    j["memory_by_stage"] = stages;
    Json samples = Json::array();
    for (const tr::MemorySample& x : r.memory_timeline) {
      samples.push_back(Json{{"t_s", x.time.to_seconds()},
                             {"total_bytes", x.total.count()},
                             {"activations_bytes", x.activations.count()},
                             {"temporary_bytes", x.temporary.count()},
                             {"chunks_held", x.chunks_held}});
    }
    j["memory_timeline"] = Json{{"stage", r.memory.peak_stage}, {"samples", samples}};
    ctx.out << io::dump_json(j);
    return;
  }
  const std::string layout =
      plan.uneven_stages() ? fmt::format(" (layers {} first, {} last)", tr::stage_layers(plan, model.layers, 0),
                                         tr::stage_layers(plan, model.layers, plan.pp - 1))
                           : std::string();
  // The data-parallel sharding, with ZeRO-3's implementation and HSDP's shard group.
  std::string sharding(tr::sharding_name(plan.sharding));
  // Under PP, FSDP keeps its layers gathered to the stage's last backward (Plan::fsdp_keeps_gathered).
  if (plan.sharding == tr::Sharding::kZero3) {
    sharding += fmt::format(" ({}{})", tr::fsdp_impl_name(plan.fsdp_impl),
                            plan.fsdp_keeps_gathered() ? ", layers kept gathered under PP" : "");
  }
  if (plan.shard_group > 1 && plan.shard_group < plan.dp) sharding += fmt::format(", shard groups of {}", plan.shard_group);
  // Context parallelism's exchange where it is not the ring (CpComm).
  std::string cp_comm = plan.cp > 1 && plan.cp_comm != tr::CpComm::kP2p
                            ? fmt::format(" ({})", tr::cp_comm_name(plan.cp_comm))
                            : std::string();
  if (plan.cp > 1 && plan.cp_comm == tr::CpComm::kA2aP2p) {
    cp_comm = fmt::format(" (a2a over {} x ring over {})", plan.cp_a2a, plan.cp / std::max<int64_t>(1, plan.cp_a2a));
  }
  Table s({"metric", "value"}, fmt::format("{} on {} x {}: dp{} tp{} pp{}{} cp{}{} ep{} vp{} ({}), mbs {} gbs {} seq {}, "
                                            "recompute {}, dp sharding {}",
                                            model.name, a.gpus, gpu.name, plan.dp, plan.tp, plan.pp, layout, plan.cp, cp_comm, plan.ep,
                                            plan.vp,
                                            plan.microbatch_group > 0
                                                ? fmt::format("{}, groups of {}", tr::schedule_name(plan.schedule),
                                                              plan.microbatch_group)
                                            : plan.custom != nullptr
                                                ? fmt::format("custom: {}", plan.custom->file)
                                                : std::string(tr::schedule_name(plan.schedule)),
                                            plan.mbs, plan.gbs, plan.seq,
                                            recompute_label(plan), sharding));
  if (model.is_dit()) {
    const model::DitSpec& v = model.dit;
    s.add_row({"video tokens (seq)",
               fmt::format("{} = {} x {} x {} ({} frames {}x{}, VAE {}x{}x{}, patch {}x{}x{}); {} text tokens", v.tokens(),
                           v.latent_frames() / v.patch_t, v.height / v.vae_s / v.patch_h, v.width / v.vae_s / v.patch_w,
                           v.frames, v.height, v.width, v.vae_t, v.vae_s, v.vae_s, v.patch_t, v.patch_h, v.patch_w,
                           v.text_tokens)});
  }
  s.add_row({"step time (s)", fmt::format("{:.4f}", r.step.step_time.to_seconds())});
  s.add_row({"tokens/s per GPU", fmt::format("{:.1f}", r.tokens_per_s_per_gpu)});
  s.add_row({"TFLOP/s per GPU", fmt::format("{:.1f}", r.tflops_per_gpu)});
  s.add_row({"MFU", fmt::format("{:.1f}%", 100 * r.mfu)});
  s.add_row({"HFU", fmt::format("{:.1f}%", 100 * r.hfu)});
  s.add_row({"peak memory (GiB)", fmt::format("{} of {} (rank {}, stage {})", gib(r.memory.peak), gib(r.memory.capacity),
                                              r.memory.peak_rank, r.memory.peak_stage)});
  if (r.memory.host_peak.count() > 0) {
    s.add_row({"host memory (GiB)",
               r.memory.host_capacity.count() > 0
                   ? fmt::format("{} of {} per GPU (offload)", gib(r.memory.host_peak), gib(r.memory.host_capacity))
                   : fmt::format("{} per GPU (offload; the node's host memory unknown: give --node)", gib(r.memory.host_peak))});
  }
  const bool gpu_fits = r.memory.peak <= r.memory.capacity;
  s.add_row({"fits", r.memory.fits       ? "yes"
                     : !r.memory.host_fits ? (gpu_fits ? "NO (host memory)" : "NO (GPU and host memory)")
                                           : "NO"});
  if (plan.activation_offload && (plan.pp > 1 || plan.recompute != tr::Recompute::kNone)) {
    // Megatron-Core's TransformerConfig refuses --cpu-offloading with either (docs/planner.md).
    s.add_row({"note", fmt::format("activation offload with {}: Transformer Engine's layer offload as modelled; "
                                   "Megatron-Core's --cpu-offloading refuses it",
                                   plan.pp > 1 ? "pipeline parallelism" : "recompute")});
  }
  if (plan.schedule == tr::Schedule::kZeroBubbleV && plan.pp > 1 && plan.microbatches() < 2 * plan.pp - 1) {
    // torch.distributed.pipelining lays ZB-V out for max(2p - 1, m) micro-batches (train/schedule.h).
    s.add_row({"note", fmt::format("zb-v with {} micro-batches on pp {}: its order is laid out for 2 x pp - 1 = {}, "
                                   "the missing ones' slots idle",
                                   plan.microbatches(), plan.pp, 2 * plan.pp - 1)});
  }
  s.add_row({"communication", fabric_description(a.fabric, topology) +
                                   (!plan.tp_comm_overlap || plan.tp < 2 ? std::string()
                                    : plan.tp_overlap_async            ? std::string(", TP overlap: PyTorch async TP (forward)")
                                                                       : std::string(", TP overlap: Transformer Engine pairing"))});
  if (model.is_moe()) s.add_row({"MoE", moe_routing(model, plan, true)});
  if (run.variability > 0.0) {
    s.add_row({"GPU variability", fmt::format("sigma {:g}: the slowest of {} GPUs paces the step (compute x{:.4f})",
                                              run.variability, a.gpus, opt.step.compute_slowdown)});
  }
  for (const tr::SlowLink& l : opt.slow_links) {
    s.add_row({"slow link", fmt::format("rank {} (stage {}) {} at 1/{:g} of its bandwidth", l.rank,
                                        l.rank / tr::group_stride(plan, tr::Group::kPp), tr::link_kind_name(l.kind), l.factor)});
  }
  s.add_row({"kernels", fmt::format("{} attention ({:.2f}){}, {} elementwise, wgrad {}, {:.0f} W, {} allocator{}",
                                    a.kernels.attention_kernel, cm.calibration().attention.efficiency,
                                    model.dropout.attention > 0.0 && plan.flash_attention ? " with dropout" : "",
                                    fusion_label(a.kernels.fusion), plan.grad_accum_fusion ? "into fp32" : "apart",
                                    gpu.power().watts(), a.kernels.allocator,
                                    a.kernels.calibration.empty() ? "" : "; calibration " + a.kernels.calibration)});
  ctx.out << s.render() << "\n";
  Table m({"memory", "GiB"}, fmt::format("memory of the peak rank (stage {})", r.memory.peak_stage));
  for (const auto& [k, v] : mem) m.add_row({k, gib(v)});
  m.add_row({"total", gib(mb.total())});
  ctx.out << m.render() << "\n";
  // By layer: consecutive layers with the same figures share a row (memory_by_layer has each).
  Table bl({"layers", "count", "model states GiB each", "activations GiB each", "GiB in all"},
           fmt::format("memory by layer of the peak rank (stage {}; activations as held at its peak)", r.memory.peak_stage));
  const std::vector<tr::LayerMemory>& pl = r.memory.peak_layers;
  for (size_t i = 0; i < pl.size();) {
    size_t j = i + 1;
    while (j < pl.size() && pl[j].model_states == pl[i].model_states && pl[j].activations == pl[i].activations &&
           pl[j].layer == pl[j - 1].layer + 1) {
      ++j;
    }
    const auto n = static_cast<int64_t>(j - i);
    const std::string range = n == 1 ? std::to_string(pl[i].layer) : fmt::format("{}-{}", pl[i].layer, pl[j - 1].layer);
    bl.add_row({range, std::to_string(n), fmt::format("{:.3f}", pl[i].model_states.to_gib()),
                fmt::format("{:.3f}", pl[i].activations.to_gib()),
                gib((pl[i].model_states + pl[i].activations) * n)});
    i = j;
  }
  if (!pl.empty()) ctx.out << bl.render() << "\n";
  if (plan.pp > 1) {
    // Every stage's peak: the first holds the most micro-batches in flight, the last the loss.
    Table bs({"stage", "first rank", "layers", "in flight", "model states", "activations", "temporary", "other", "total"},
             "memory by pipeline stage (GiB; in flight: micro-batches' activations held at the stage's peak)");
    for (const tr::StageMemory& st : r.memory.stages) {
      const tr::MemoryBreakdown& b = st.memory;
      bs.add_row({fmt::format("{}{}", st.stage, st.stage == r.memory.peak_stage ? " (peak)" : ""),
                  std::to_string(st.stage * stage_stride), std::to_string(st.layers),
                  fmt::format("{:.2f}", st.inflight_microbatches), gib(b.weights + b.gradients + b.optimizer),
                  gib(b.activations), gib(b.temporary), gib(b.communication + b.context + b.allocator), gib(b.total())});
    }
    ctx.out << bs.render() << "\n";
  }
  ctx.out << memory_profile(r.memory_timeline, r.step.step_time, r.memory.peak_stage, 8).render() << "\n";
  Table t({"time", "s", "share"}, fmt::format("step time by category (stage {})", r.step.breakdown_stage));
  for (size_t i = 0; i < tr::kNumTimeCategories; ++i) {
    const Time v = r.step.breakdown[i];
    t.add_row({std::string(tr::time_category_name(static_cast<tr::TimeCategory>(i))), fmt::format("{:.4f}", v.to_seconds()),
               fmt::format("{:.1f}%", 100.0 * (v / r.step.step_time))});
  }
  ctx.out << t.render();
}

}  // namespace

const hw::NodeSpec* training_node(const hw::HwCatalog& hw, const hw::GpuSpec& gpu, const std::string& node_name) {
  const hw::NodeSpec* node = nullptr;
  if (!node_name.empty()) {
    node = &hw.get_node(node_name, kCl.with_key("--node"));
    if (node->gpu != gpu.name) {
      throw InputError(kCl.with_key("--node"), fmt::format("node '{}' holds {} GPUs, not {}", node->name, node->gpu, gpu.name));
    }
  } else {
    for (const auto& [name, n] : hw.nodes()) {
      if (n.gpu == gpu.name) {
        node = &n;
        break;
      }
    }
  }
  return node;
}

namespace {

// Every flag of one run (`orrery train`; --replay parses each row's flags with the same set).
void add_train_options(CLI::App* c, TrainArgs* a) {
  c->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag overrides
  c->add_option("--model", a->model, "catalog model name or path to a config.json")->type_name("NAME");
  c->add_option("--hf-config", a->hf_config, "Hugging Face config.json")->type_name("FILE");
  c->add_option("--arch", a->arch, "generic architecture: gpt | llama (with --layers --hidden --heads ...)");
  c->add_option("--layers", a->layers, "transformer layers (--arch)");
  c->add_option("--hidden", a->hidden, "hidden size (--arch)");
  c->add_option("--heads", a->heads, "attention heads (--arch)");
  c->add_option("--kv-heads", a->kv_heads, "key/value heads (--arch; default = heads)");
  c->add_option("--ffn", a->ffn, "MLP intermediate size (--arch; default 4 x hidden)");
  c->add_option("--vocab", a->vocab, "vocabulary size (--arch)");
  c->add_option("--tie-embeddings", a->tie_embeddings,
                "LM head shares the token embedding: yes | no (default: the model's; --arch gpt ties, llama does not)");
  add_dropout_options(c, a->dropout);
  c->add_option("--seq", a->seq, "sequence length")->capture_default_str();
  c->add_option("--gpu", a->gpu, "catalog GPU, e.g. h100-sxm")->type_name("NAME");
  c->add_option("--gpus", a->gpus, "GPU count");
  c->add_option("--node", a->node, "catalog node type (default: the catalog node with this GPU)");
  add_kernel_options(c, a->kernels);
  c->add_option("--nic-bandwidth", a->nic_bandwidth, "per-GPU network bandwidth when no node matches")->capture_default_str();
  c->add_option("--tp", a->tp, "tensor-parallel degree")->capture_default_str();
  c->add_option("--pp", a->pp, "pipeline-parallel degree")->capture_default_str();
  c->add_option("--dp", a->dp, "data-parallel degree (default gpus / (tp pp cp))");
  c->add_option("--cp", a->cp, "context-parallel degree")->capture_default_str();
  c->add_option("--ep", a->ep, "expert-parallel degree (within dp x cp; with --etp below tp, within tp x dp x cp / etp)")->capture_default_str();
  c->add_option("--etp", a->etp,
                "expert tensor parallelism: the routed experts split over this many of each TP group's ranks (Megatron-Core's "
                "--expert-tensor-parallel-size; 0 = tp; below tp needs --sp yes)")
      ->capture_default_str();
  c->add_option("--vp", a->vp, "virtual pipeline stages per rank (interleaved, interleaved-zb, looped-bfs; zb-v and dualpipe-v: 2)")->capture_default_str();
  c->add_option("--microbatch-group-size", a->microbatch_group,
                "interleaved schedule: micro-batches run back to back on one model chunk before the next "
                "(Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage; default pp; in [pp, m])");
  c->add_option("--first-stage-layers", a->first_stage_layers,
                "uneven pipeline: layers on the first stage, with --vp its first model chunk (default: the other chunks' share; "
                "0: the embedding alone)");
  c->add_option("--last-stage-layers", a->last_stage_layers,
                "uneven pipeline: layers on the last stage, with --vp its last model chunk (default: the other chunks' share; "
                "0: the LM head and loss alone)");
  c->add_option("--mbs", a->mbs, "micro-batch size (sequences)")->capture_default_str();
  c->add_option("--gbs", a->gbs, "global batch size (sequences)");
  c->add_option("--sp", a->sp, "sequence parallelism: yes | no")->capture_default_str();
  c->add_option("--recompute", a->recompute, "activation recompute: none | selective (attention core) | selective-op (torchtitan op-level SAC) | full")->capture_default_str();
  c->add_option("--recompute-layers", a->recompute_layers, "full recompute on this many layers per pipeline rank (-1 all)");
  c->add_option("--recompute-modules", a->recompute_modules,
                "--recompute selective: the modules re-run, Megatron-Core's --recompute-modules (default core_attn): "
                "core_attn, mla_up_proj, moe_act, layernorm, mlp, shared_experts");
  c->add_option("--precision", a->precision, "bf16 | fp16 | fp8")->capture_default_str();
  c->add_option("--dp-sharding", a->dp_sharding, "none | distopt (zero1) | zero2 | fsdp (zero3) | hsdp")->capture_default_str();
  c->add_option("--shard-group", a->shard_group, "HSDP: DP ranks per shard group (0 = all)");
  c->add_option("--unsharded-layers", a->unsharded_layers,
                 "ZeRO-3 without PP: layers kept gathered (with --pp > 1 FSDP keeps every layer gathered, as PyTorch's pipelining does)");
  c->add_option("--fsdp-prefetch", a->fsdp_prefetch, "ZeRO-3: layers all-gathered ahead")->capture_default_str();
  c->add_option("--schedule", a->schedule, "gpipe | 1f1b | interleaved | zero-bubble (zb-h1) | zb-v | dualpipe-v | interleaved-zb | looped-bfs (default 1f1b; interleaved with --vp > 1); torchtitan's names too (Interleaved1F1B, ZBVZeroBubble, InterleavedZeroBubble, LoopedBFS, DualPipeV)");
  c->add_option("--flash-attention", a->flash, "fused attention: yes | no")->capture_default_str();
  c->add_option("--fp8-attention", a->fp8_attention,
                "--precision fp8: the attention core in fp8 too (Transformer Engine's FP8 DPA): yes | no (bf16, TE's default)")
      ->capture_default_str();
  add_fp8_recipe_flag(*c, a->fp8_recipe);
  add_fsdp_impl_flag(*c, a->fsdp_impl);
  add_cp_comm_flag(*c, a->cp_comm);
  c->add_option("--hierarchical-cp-sizes", a->hierarchical_cp,
                "--cp-comm-type a2a+p2p: AxB with A x B = cp, the a2a groups' size and the ring's (Megatron-Core's "
                "--hierarchical-context-parallel-sizes; default: the most CP ranks that fit in one NVLink domain)");
  c->add_option("--grad-bytes", a->grad_bytes, "main-gradient bytes per parameter: 4 (fp32) | 2")->capture_default_str();
  add_optimizer_state_flags(*c, a->optimizer_dtype, a->master_weights);
  c->add_option("--bucket-mb", a->bucket_mb, "DP gradient bucket (MB)")->capture_default_str();
  c->add_option("--capacity-factor", a->capacity_factor, "MoE capacity factor (0 = dropless)")->capture_default_str();
  c->add_option("--moe-dispatcher", a->moe_dispatcher,
                "MoE token exchange: alltoall (Megatron-Core: top_k copies per token) | deepep (one copy per EP rank reached)")
      ->capture_default_str();
  c->add_option("--moe-ranks-per-token", a->moe_ranks_per_token,
                "deepep: EP ranks each token reaches, in [1, min(top_k, ep)] (0 = expected under uniform routing)")
      ->capture_default_str();
  c->add_option("--load-imbalance", a->load_imbalance, "MoE busiest-expert load / mean (>= 1)")->capture_default_str();
  c->add_option("--grad-sync", a->grad_sync, "dense | sparse | zen")->capture_default_str();
  c->add_option("--grad-density", a->grad_density, "gradient density of sparse sync, (0, 1]")->capture_default_str();
  c->add_option("--overlap-grad-reduce", a->overlap_grad, "DP reduction overlapped with backward: yes | no")->capture_default_str();
  c->add_option("--overlap-param-gather", a->overlap_param, "ZeRO-1/2 parameter gather overlapped: yes | no")->capture_default_str();
  c->add_option("--schedule-csv", a->schedule_csv,
                 "a pipeline order from a file: torch.distributed.pipelining's schedule CSV (torchtitan's "
                 "pipeline_parallel_schedule_csv), one row of actions per rank such as 0F0,0F1,2F0,2I0,2W0; "
                 "vp from its stages (docs/training.md)");
  c->add_option("--schedule-csv-out", a->schedule_csv_out,
                 "write the plan's pipeline order in --schedule-csv's format (a start for a schedule of your own)")
      ->type_name("FILE");
  c->add_option("--overlap-f-b", a->overlap_f_b,
                "dualpipe-v: each paired forward and backward hide each other's EP all-to-alls: yes | no")
      ->capture_default_str();
  c->add_option("--overlap-moe-expert-parallel-comm", a->ep_overlap,
                "Megatron-Core's combined 1F1B (EP > 1; pp 1 or interleaved): each steady-phase forward and the backward "
                "after it hide each other's EP all-to-alls: yes | no")
      ->capture_default_str();
  c->add_option("--link-sharing", a->link_sharing,
                "collectives of a rank on the same link (NIC or NVLink) share it while they run at once (FSDP gather "
                "beside reduce-scatter, pipeline sends or expert all-to-alls beside DP): yes | no (each as if alone)")
      ->capture_default_str();
  c->add_option("--tp-comm-overlap", a->tp_overlap, "TP collectives overlapped with GEMMs (with --sp; docs/training.md): yes or te (Transformer Engine's pairing, forward and backward) | async (PyTorch's async TP under torch.compile: the forward's all-gather -> matmul and matmul -> reduce-scatter, the backward exposed) | no")->capture_default_str();
  c->add_flag("--activation-offload", a->activation_offload, "offload saved activations to host memory");
  c->add_option("--offload-layers", a->offload_layers,
                "offload the activations of the first N layers per pipeline rank only (implies --activation-offload; -1 all)");
  c->add_flag("--optimizer-offload", a->optimizer_offload, "optimizer states and step on the host");
  add_cpu_adam_rate_flag(*c, a->cpu_adam_rate);
  c->add_option("--optimizer-offload-fraction", a->optimizer_offload_fraction,
                "the share of each rank's optimizer (master weights, moments, step) on the host, the rest on the GPU "
                "(Megatron's --optimizer-offload-fraction; implies --optimizer-offload): (0, 1]")
      ->capture_default_str();
  add_gpu_variability_flag(*c, a->gpu_variability);
  c->add_option("--straggler", a->stragglers,
                "STAGE:FACTOR: pipeline stage STAGE's GPUs run FACTOR x slower (repeatable)")
      ->type_name("STAGE:FACTOR");
  add_fabric_options(c, a->fabric);
  c->add_option("--slow-link", a->slow_links,
                "RANK:KIND:FACTOR: rank RANK's nic or nvlink runs FACTOR x slower; its groups' collectives "
                "and pipeline transfers over that link slow down (repeatable)")
      ->type_name("RANK:KIND:FACTOR");
  add_video_options(c, a->video);
  c->add_option("--trace-out", a->trace_out, "write a Chrome/Perfetto trace of one step")->type_name("FILE");
  c->add_option("--trace-ranks", a->trace_ranks, "ranks to trace, comma-separated (default 0)")->type_name("LIST");
}

// --replay FILE: every row of a results table (the columns of training.csv) run with the flags that
// replay it (train/replay.h), its metric as the source defines it beside the measured value.
void run_replay(Context& ctx, const std::string& path, const std::string& rows, bool commands) {
  const std::vector<tr::MeasuredRun> all = tr::read_measured_runs(path);
  std::vector<const tr::MeasuredRun*> runs;
  if (rows.empty()) {
    for (const tr::MeasuredRun& r : all) runs.push_back(&r);
  } else {
    std::vector<std::string> ids;
    for (const tr::MeasuredRun& r : all) ids.push_back(r.id);
    std::stringstream ss(rows);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const std::string id(trim(item));
      const auto it = std::find_if(all.begin(), all.end(), [&](const tr::MeasuredRun& r) { return r.id == id; });
      if (it == all.end()) {
        throw InputError(kCl.with_key("--rows"), fmt::format("no row '{}' in {}", id, path), suggest(id, ids));
      }
      runs.push_back(&*it);
    }
  }
  struct Out {
    const tr::MeasuredRun* run;
    double predicted, error, step_s;
    bool memory;
    std::array<Time, tr::kNumTimeCategories> breakdown;
    bool fits;
    Bytes peak, capacity;
  };
  std::vector<Out> outs;
  for (const tr::MeasuredRun* m : runs) {
    // The row's flags through the same parser and simulation as a command line.
    TrainArgs a;
    CLI::App parser("replay");
    add_train_options(&parser, &a);
    std::vector<std::string> argv;
    for (const auto& [flag, value] : tr::replay_flags(*m)) {
      argv.push_back(flag);
      argv.push_back(value);
    }
    std::reverse(argv.begin(), argv.end());  // CLI11 takes a vector in reverse order
    TrainRun run;
    try {
      parser.parse(argv);
      a.seq_given = true;
      run = simulate_train(ctx, a);
    } catch (const InputError& e) {
      const std::string key = e.where().key == "--model" ? "model" : e.where().key;  // the row's column
      throw InputError(Where{m->file, m->line, key}, fmt::format("row {}: {}", m->id, e.message()), e.hint());
    } catch (const CLI::ParseError& e) {
      throw InputError(Where{m->file, m->line, "id"}, fmt::format("row {}: {}", m->id, e.what()));
    }
    if (!m->model.empty()) tr::check_measured_model(*m, run.model);
    Out o{m, tr::measured_metric(*m, run.model, run.plan, run.r), 0.0, run.r.step.step_time.to_seconds(),
          m->metric.rfind("peak_memory", 0) == 0, run.r.step.breakdown, run.r.memory.fits, run.r.memory.peak,
          run.r.memory.capacity};
    o.error = (o.predicted - m->value) / m->value;
    outs.push_back(o);
  }
  // Per GPU id of the table, over the scored rows: median and worst |error| of throughput and of memory.
  struct Summary {
    std::string gpu, kind;
    std::vector<double> errors;
  };
  std::vector<Summary> sums;
  for (const Out& o : outs) {
    if (!o.run->scored()) continue;
    const std::string kind = o.memory ? "memory" : "throughput";
    auto it = std::find_if(sums.begin(), sums.end(), [&](const Summary& x) { return x.gpu == o.run->gpu && x.kind == kind; });
    if (it == sums.end()) {
      sums.push_back({o.run->gpu, kind, {}});
      it = sums.end() - 1;
    }
    it->errors.push_back(std::fabs(o.error));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  if (ctx.global.json) {
    Json j = envelope("train");
    j["replay"] = path;
    Json rs = Json::array();
    for (const Out& o : outs) {
      rs.push_back(Json{{"id", o.run->id},
                        {"line", o.run->line},
                        {"source", o.run->source},
                        {"gpu", o.run->gpu},
                        {"metric", o.run->metric},
                        {"measured", o.run->value},
                        {"predicted", o.predicted},
                        {"error", o.error},
                        {"scored", o.run->scored()},
                        {"step_time_s", o.step_s},
                        {"fits", o.fits},
                        {"peak_memory_bytes", o.peak.count()},
                        {"time", time_json(o.breakdown)},
                        {"command", tr::replay_command(*o.run)}});
    }
    j["rows"] = rs;
    Json ss = Json::array();
    for (const Summary& x : sums) {
      ss.push_back(Json{{"gpu", x.gpu},
                        {"kind", x.kind},
                        {"rows", x.errors.size()},
                        {"median_abs_error", median(x.errors)},
                        {"worst_abs_error", *std::max_element(x.errors.begin(), x.errors.end())}});
    }
    j["summary"] = ss;
    ctx.out << io::dump_json(j);
    return;
  }
  Table t({"id", "metric", "measured", "predicted", "error", "step (s)", "note"},
          fmt::format("{}: {} rows replayed (predicted by orrery train with each row's flags)", path, outs.size()));
  for (const Out& o : outs) {
    t.add_row({o.run->id, o.run->metric, fmt::format("{:.4g}", o.run->value), fmt::format("{:.4g}", o.predicted),
               fmt::format("{:+.1f}%", 100.0 * o.error), fmt::format("{:.4g}", o.step_s),
               std::string(o.run->scored() ? "" : "not scored: seq not stated") +
                   (o.fits ? "" : fmt::format("{}does not fit: {} of {} GiB", o.run->scored() ? "" : "; ", gib(o.peak),
                                              gib(o.capacity)))});
  }
  ctx.out << t.render() << "\n";
  Table s({"gpu", "kind", "rows", "median |error|", "worst |error|"}, "summary over the scored rows");
  for (const Summary& x : sums) {
    s.add_row({x.gpu, x.kind, fmt::format("{}", x.errors.size()), fmt::format("{:.1f}%", 100.0 * median(x.errors)),
               fmt::format("{:.1f}%", 100.0 * *std::max_element(x.errors.begin(), x.errors.end()))});
  }
  ctx.out << s.render();
  if (commands) {
    ctx.out << "\ncommand lines (each reproduces its row's prediction)\n";
    for (const Out& o : outs) ctx.out << o.run->id << ": " << tr::replay_command(*o.run) << "\n";
  }
}

}  // namespace

void register_train_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  auto a = std::make_shared<TrainArgs>();
  auto replay = std::make_shared<std::pair<std::string, std::string>>();  // --replay FILE, --rows LIST
  auto commands = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand("train", "memory, step time, MFU and breakdown of one training plan (docs/training.md)");
  add_train_options(c, a.get());
  c->add_option("--replay", replay->first,
                "replay every row of a results table in the columns of training.csv: measured vs predicted "
                "(docs/training.md, \"Replaying measured runs\"); no other run flags")
      ->type_name("FILE");
  c->add_option("--rows", replay->second, "--replay: only these row ids, comma-separated")->type_name("LIST");
  c->add_flag("--commands", *commands, "--replay: print each row's orrery train command line");
  actions.emplace_back(c, [a, c, replay, commands](Context& ctx) {
    if (replay->first.empty()) {
      if (!replay->second.empty()) throw InputError(kCl.with_key("--rows"), "needs --replay FILE");
      if (*commands) throw InputError(kCl.with_key("--commands"), "needs --replay FILE");
      a->seq_given = c->count("--seq") > 0;
      a->offload_layers_given = c->count("--offload-layers") > 0;
      a->optimizer_fraction_given = c->count("--optimizer-offload-fraction") > 0;
      run_train(ctx, *a);
      return;
    }
    for (const CLI::Option* o : c->get_options()) {
      const std::string name = o->get_name();
      if (o->count() > 0 && name != "--replay" && name != "--rows" && name != "--commands") {
        throw InputError(kCl.with_key(name), "--replay runs each row with its own flags; leave this flag out");
      }
    }
    run_replay(ctx, replay->first, replay->second, *commands);
  });
}

}  // namespace orrery::cli
