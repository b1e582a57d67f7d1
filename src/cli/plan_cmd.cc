// `orrery plan`: planners. `plan train` searches every training plan of a model on a cluster
// (train/planner.h, docs/planner.md): top K by throughput, the Pareto front of throughput vs memory,
// and why the other plans fail. Exit 0 with at least one feasible plan, 1 when none is (a negative
// outcome: the reasons are printed), 2 for bad input.
//
// Other planners (e.g. `plan serve`) add their subcommand from their own file through plan_group().
#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/app.h"
#include "cli/output.h"
#include "cli/train_common.h"
#include "compute/compute_model.h"
#include "core/progress.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "train/planner.h"
#include "train/variability.h"

namespace orrery::cli {

CLI::App* plan_group(CLI::App& app) {
  const auto found = app.get_subcommands([](CLI::App* a) { return a->get_name() == "plan"; });
  if (!found.empty()) return found.front();
  CLI::App* plan = app.add_subcommand("plan", "search every plan and rank them (docs/planner.md)");
  plan->require_subcommand(1);
  return plan;
}

namespace {

using io::Json;
namespace tr = orrery::train;

const Where kCl{"<command line>", 0, ""};

struct PlanTrainArgs {
  std::string model, gpu, node, nic_bandwidth = "400 Gb/s", precision = "bf16";
  KernelArgs kernels;  // --power-limit, --attention-kernel, --fusion
  FabricArgs fabric;   // --comm-model, --topology, --tiers, --oversubscription, --no-rail-optimized
  int64_t gpus = 0, seq = 0, gbs = 0;
  VideoArgs video;  // DiT sample: its token count is the sequence (train_common.h)
  DropoutArgs dropout;  // --attention-dropout, --hidden-dropout
  bool seq_given = false;
  double budget_gib = 0.0;
  bool budget_given = false;
  int64_t top = 10;
  int64_t flow_rerank = 0;  // --flow-rerank (0: 3 x --top)
  int threads = 0;
  int64_t max_tp = 0, max_pp = 0, max_cp = 8, max_ep = 0, max_vp = 0, max_mbs = 0;
  std::string schedules = "gpipe,1f1b,interleaved,zero-bubble,zb-v,dualpipe-v,interleaved-zb";
  std::string shardings = "none,zero1,zero2,zero3,hsdp";
  std::string recomputes = "none,selective,full";
  std::string recompute_modules;  // --recompute-modules: what the selective plans re-run (empty: core_attn)
  std::string sp = "both";
  std::string unshard = "no";  // --unsharding
  std::string partial_recompute = "no";  // --partial-recompute
  std::string offload = "no";            // --offload
  double cpu_adam_rate = tr::kCpuAdamParamsPerSecond;  // --cpu-adam-rate
  int64_t grad_bytes = 4;
  std::string optimizer_dtype = "fp32", master_weights = "fp32", fp8_recipe = "delayed";
  std::string fsdp_impl = "fsdp2";
  std::string cp_comm = "p2p";
  std::string gpu_variability;  // --gpu-variability SIGMA; empty: none
  std::string tp_overlap = "no";  // --tp-comm-overlap
  std::string fp8_attention = "no";
  std::string ep_overlap = "no";
  double capacity_factor = 0.0, load_imbalance = 1.0, moe_ranks_per_token = 0.0;
  std::string moe_dispatcher = "alltoall";
  std::string etps = "tp";  // --etp
  bool exhaustive = false;
  std::string candidates_csv;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const std::string t(trim(item));
    if (!t.empty()) items.push_back(t);
  }
  return items;
}

// Parses a comma-separated list with `parse` (which throws InputError with the nearest name), keeping
// the first occurrence of each value.
template <class E, class Parse>
std::vector<E> parse_list(const std::string& text, const std::string& flag, Parse parse) {
  std::vector<E> out;
  for (const std::string& item : split_list(text)) {
    const E e = parse(item, kCl.with_key(flag));
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
  if (out.empty()) throw InputError(kCl.with_key(flag), fmt::format("expected a comma-separated list, found '{}'", text));
  return out;
}

void require_non_negative(int64_t v, const char* flag) {
  if (v < 0) throw InputError(kCl.with_key(flag), fmt::format("expected 0 (no limit) or a positive integer, found {}", v));
}

tr::SearchSpace make_space(const PlanTrainArgs& a) {
  tr::SearchSpace s;
  for (const auto& [flag, v] : {std::pair<const char*, int64_t>{"--max-tp", a.max_tp}, {"--max-pp", a.max_pp},
                                {"--max-cp", a.max_cp}, {"--max-ep", a.max_ep}, {"--max-vp", a.max_vp},
                                {"--max-mbs", a.max_mbs}}) {
    require_non_negative(v, flag);
  }
  s.max_tp = a.max_tp;
  s.max_pp = a.max_pp;
  s.max_cp = a.max_cp;
  s.max_ep = a.max_ep;
  s.max_vp = a.max_vp;
  s.max_mbs = a.max_mbs;
  s.schedules = parse_list<tr::Schedule>(a.schedules, "--schedules", tr::parse_schedule);
  // "hsdp" is its own entry here (zero3 within shard groups); the other names are parse_sharding's.
  s.hsdp = false;
  s.shardings.clear();
  for (const std::string& item : split_list(a.shardings)) {
    if (to_lower(item) == "hsdp") {
      s.hsdp = true;
      continue;
    }
    const tr::Sharding sh = tr::parse_sharding(item, kCl.with_key("--shardings"));
    if (std::find(s.shardings.begin(), s.shardings.end(), sh) == s.shardings.end()) s.shardings.push_back(sh);
  }
  if (s.shardings.empty() && !s.hsdp) {
    throw InputError(kCl.with_key("--shardings"), fmt::format("expected a comma-separated list, found '{}'", a.shardings));
  }
  s.recomputes = parse_list<tr::Recompute>(a.recomputes, "--recomputes", tr::parse_recompute);
  const std::string sp = to_lower(trim(a.sp));
  if (sp != "both" && sp != "yes" && sp != "no") {
    throw InputError(kCl.with_key("--sp"), fmt::format("expected both, yes or no, found '{}'", a.sp),
                     suggest(a.sp, {"both", "yes", "no"}));
  }
  s.sp_on = sp != "no";
  s.sp_off = sp != "yes";
  s.unshard = parse_yes_no(a.unshard, "--unsharding");
  s.partial_recompute = parse_yes_no(a.partial_recompute, "--partial-recompute");
  const std::string offload = to_lower(trim(a.offload));
  const std::vector<std::string> offloads = {"no", "activations", "optimizer", "both"};
  if (std::find(offloads.begin(), offloads.end(), offload) == offloads.end()) {
    throw InputError(kCl.with_key("--offload"), fmt::format("expected no, activations, optimizer or both, found '{}'", a.offload),
                     suggest(a.offload, offloads));
  }
  s.activation_offload = offload == "activations" || offload == "both";
  s.optimizer_offload = offload == "optimizer" || offload == "both";
  s.moe_dispatchers = parse_list<tr::MoeDispatcher>(a.moe_dispatcher, "--moe-dispatcher", tr::parse_moe_dispatcher);
  s.cp_comms = parse_list<tr::CpComm>(a.cp_comm, "--cp-comm-type", tr::parse_cp_comm);
  // "tp" (0): each plan's own.
  s.expert_tps = parse_list<int64_t>(a.etps, "--etp", [](const std::string& item, const Where& where) {
    int64_t etp = 0;
    if (to_lower(item) == "tp") return etp;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), etp);
    if (ec != std::errc() || end != item.data() + item.size() || etp < 1 || etp > tr::kMaxDegree) {
      throw InputError(where, fmt::format("expected a comma-separated list of sizes >= 1 or 'tp', found '{}'", item));
    }
    return etp;
  });
  return s;
}

// `flow`: the plans were re-ranked on a topology; a last column gives their alpha-beta tokens/s.
Table simulated_table(const std::vector<tr::Candidate>& cs, const std::string& title, PlanColumns columns, bool flow = false) {
  std::vector<std::string> h = {"#"};
  for (const std::string& c : plan_header(columns)) h.push_back(c);
  for (const char* c : {"step s", "tokens/s/GPU", "TFLOP/s", "MFU", "peak GiB", "reserved GiB"}) h.emplace_back(c);
  if (columns.offload) h.emplace_back("host GiB");
  if (flow) h.emplace_back("alpha-beta tokens/s/GPU");
  Table t(h, title);
  size_t k = 0;
  for (const tr::Candidate& c : cs) {
    std::vector<std::string> row = {std::to_string(++k)};
    for (std::string& cell : plan_cells(c.plan, columns)) row.push_back(std::move(cell));
    row.push_back(fmt::format("{:.4g}", c.step_time.to_seconds()));
    row.push_back(fmt::format("{:.1f}", c.tokens_per_s_per_gpu));
    row.push_back(fmt::format("{:.1f}", c.tflops_per_gpu));
    row.push_back(fmt::format("{:.1f}%", 100.0 * c.mfu));
    row.push_back(gib(c.peak));
    row.push_back(gib(c.reserved));
    if (columns.offload) row.push_back(gib(c.host_peak));
    if (flow) row.push_back(fmt::format("{:.1f}", c.alpha_beta_tokens_per_s_per_gpu));
    t.add_row(std::move(row));
  }
  return t;
}

Table over_budget_table(const std::vector<tr::Candidate>& cs, Bytes budget, const std::string& title, PlanColumns columns) {
  std::vector<std::string> h = {"#"};
  for (const std::string& c : plan_header(columns)) h.push_back(c);
  for (const char* c : {"peak GiB", "over GiB", "reserved GiB", "bound tokens/s/GPU"}) h.emplace_back(c);
  Table t(h, title);
  size_t k = 0;
  for (const tr::Candidate& c : cs) {
    std::vector<std::string> row = {std::to_string(++k)};
    for (std::string& cell : plan_cells(c.plan, columns)) row.push_back(std::move(cell));
    row.push_back(gib(c.peak));
    row.push_back(gib(c.peak - budget));
    row.push_back(gib(c.reserved));
    row.push_back(fmt::format("{:.1f}", c.bound_tokens_per_s_per_gpu));
    t.add_row(std::move(row));
  }
  return t;
}

Json simulated_json(const std::vector<tr::Candidate>& cs) {
  Json a = Json::array();
  for (const tr::Candidate& c : cs) {
    a.push_back(Json{{"index", c.index},
                     {"plan", plan_json(c.plan)},
                     {"step_time_s", c.step_time.to_seconds()},
                     {"tokens_per_s_per_gpu", c.tokens_per_s_per_gpu},
                     {"tflops_per_gpu", c.tflops_per_gpu},
                     {"mfu", c.mfu},
                     {"hfu", c.hfu},
                     {"peak_memory_bytes", c.peak.count()},
                     {"reserved_memory_bytes", c.reserved.count()},
                     {"host_memory_bytes", c.host_peak.count()},
                     {"peak_stage", c.peak_stage},
                     {"memory", memory_json(c.memory)},
                     {"time", time_json(c.breakdown)}});
    if (c.alpha_beta_tokens_per_s_per_gpu > 0.0) a.back()["alpha_beta_tokens_per_s_per_gpu"] = c.alpha_beta_tokens_per_s_per_gpu;
  }
  return a;
}

Json over_budget_json(const std::vector<tr::Candidate>& cs, Bytes budget) {
  Json a = Json::array();
  for (const tr::Candidate& c : cs) {
    a.push_back(Json{{"index", c.index},
                     {"plan", plan_json(c.plan)},
                     {"peak_memory_bytes", c.peak.count()},
                     {"over_budget_bytes", (c.peak - budget).count()},
                     {"reserved_memory_bytes", c.reserved.count()},
                     {"host_memory_bytes", c.host_peak.count()},
                     {"bound_tokens_per_s_per_gpu", c.bound_tokens_per_s_per_gpu},
                     {"reason", c.reason}});
  }
  return a;
}

// The search space as resolved (rule 6: the result records its whole configuration).
// The selective module sets searched (SearchSpace::recompute_module_sets), each a list of names; empty
// when the base plan's set alone is used (the plan's recompute_modules then).
Json module_sets_json(const tr::SearchSpace& s) {
  Json sets = Json::array();
  for (const uint32_t set : s.recompute_module_sets) sets.push_back(tr::recompute_module_names(set));
  return sets;
}

Json space_json(const tr::SearchSpace& s) {
  auto names = [](const auto& values, auto name) {
    Json out = Json::array();
    for (const auto& v : values) out.push_back(name(v));
    return out;
  };
  Json shardings = names(s.shardings, tr::sharding_name);
  if (s.hsdp) shardings.push_back("hsdp");
  return Json{{"max_tp", s.max_tp},
              {"max_pp", s.max_pp},
              {"max_cp", s.max_cp},
              {"max_ep", s.max_ep},
              {"max_vp", s.max_vp},
              {"max_mbs", s.max_mbs},
              {"schedules", names(s.schedules, tr::schedule_name)},
              {"shardings", shardings},
              {"recomputes", names(s.recomputes, tr::recompute_name)},
              {"recompute_module_sets", module_sets_json(s)},
              {"sp", s.sp_on && s.sp_off ? "both" : s.sp_on ? "yes" : "no"},
              {"uneven_stages", s.uneven_stages},
              {"unsharding", s.unshard},
              {"partial_recompute", s.partial_recompute},
              {"activation_offload", s.activation_offload},
              {"optimizer_offload", s.optimizer_offload},
              {"expert_tps", names(s.expert_tps, [](int64_t e) { return e > 0 ? Json(e) : Json("tp"); })}};
}

// " (K of them ...)": the budget-filling variants among the enumerated plans.
std::string variants_note(const tr::PlannerCounts& c) {
  std::vector<std::string> parts;
  if (c.partial_recompute > 0) parts.push_back(fmt::format("{} plans recomputing some layers", c.partial_recompute));
  if (c.activation_offload > 0) parts.push_back(fmt::format("{} offloading some layers' activations", c.activation_offload));
  if (c.optimizer_offload > 0) parts.push_back(fmt::format("{} with some of the optimizer on the host", c.optimizer_offload));
  if (c.unsharded > 0) parts.push_back(fmt::format("{} ZeRO-3 plans keeping layers gathered", c.unsharded));
  if (parts.empty()) return {};
  const std::string last = parts.back();
  parts.pop_back();
  if (parts.empty()) return fmt::format(" (of them {})", last);
  return fmt::format(" (of them {} and {})", fmt::join(parts, ", "), last);
}

std::string candidates_csv(const std::vector<tr::Candidate>& cs) {
  std::vector<std::string> h = {"index"};
  for (const std::string& c : plan_header({true, true})) h.push_back(c);
  for (const char* c : {"status", "reason_key", "reason", "peak_memory_bytes", "bound_tokens_per_s_per_gpu",
                        "step_time_s", "tokens_per_s_per_gpu", "mfu"}) {
    h.emplace_back(c);
  }
  Table t(h);
  for (const tr::Candidate& c : cs) {
    std::vector<std::string> row = {std::to_string(c.index)};
    for (std::string& cell : plan_cells(c.plan, {true, true})) row.push_back(std::move(cell));
    const bool valid = c.status != tr::CandidateStatus::kInvalid;
    const bool sim = c.status == tr::CandidateStatus::kSimulated;
    row.emplace_back(tr::candidate_status_name(c.status));
    row.push_back(c.reason_key);
    row.push_back(c.reason);
    row.push_back(valid ? std::to_string(c.peak.count()) : "");
    row.push_back(valid ? fmt::format("{:.6g}", c.bound_tokens_per_s_per_gpu) : "");
    row.push_back(sim ? fmt::format("{:.6g}", c.step_time.to_seconds()) : "");
    row.push_back(sim ? fmt::format("{:.6g}", c.tokens_per_s_per_gpu) : "");
    row.push_back(sim ? fmt::format("{:.6g}", c.mfu) : "");
    t.add_row(std::move(row));
  }
  return t.to_csv();
}

void run_plan_train(Context& ctx, const PlanTrainArgs& a) {
  if (a.model.empty()) throw InputError(kCl.with_key("--model"), "missing; e.g. --model llama3-70b (a catalog name or a config.json)");
  if (a.gpu.empty()) throw InputError(kCl.with_key("--gpu"), "missing; e.g. --gpu h100-sxm");
  model::ModelSpec model = ctx.catalog().model(a.model, kCl.with_key("--model"));
  apply_dropout(model, a.dropout);
  const int64_t seq = apply_video(model, a.video, a.seq, a.seq_given);  // a DiT's sequence: its video token count
  if (a.top < 1) throw InputError(kCl.with_key("--top"), fmt::format("expected at least 1, found {}", a.top));
  if (a.threads < 0) throw InputError(kCl.with_key("--threads"), fmt::format("expected 0 (all cores) or more, found {}", a.threads));
  if (a.grad_bytes != 2 && a.grad_bytes != 4) {
    throw InputError(kCl.with_key("--grad-bytes"), fmt::format("expected 2 or 4, found {}", a.grad_bytes));
  }
  const hw::HwCatalog& hw = ctx.catalog().hw;
  const hw::GpuSpec gpu = with_power_limit(hw.get_gpu(a.gpu, kCl.with_key("--gpu")), a.kernels.power_limit);
  const hw::NodeSpec* node = training_node(hw, gpu, a.node);
  const Bandwidth nic = parse_bandwidth_positive(a.nic_bandwidth, kCl.with_key("--nic-bandwidth"));
  const tr::ClusterSpec cluster = tr::ClusterSpec::from_catalog(gpu, node, 8, nic);

  const std::optional<net::Topology> topology = training_topology(a.fabric, gpu, node, a.gpus);
  if (a.flow_rerank != 0) {
    if (!a.fabric.flow()) {
      throw InputError(kCl.with_key("--flow-rerank"), "applies to --comm-model flow (the alpha-beta search re-ranks nothing)");
    }
    if (a.flow_rerank < a.top) {
      throw InputError(kCl.with_key("--flow-rerank"),
                       fmt::format("expected at least --top ({}) plans to re-simulate, found {}", a.top, a.flow_rerank));
    }
  }

  tr::PlannerOptions o;
  if (topology) o.evaluate.topology = &*topology;
  o.gpus = a.gpus;
  o.seq = seq;
  o.gbs = a.gbs;
  // One precision is every plan's; a list is searched (SearchSpace::precisions).
  const std::vector<hw::DType> precisions = parse_list<hw::DType>(a.precision, "--precision", tr::parse_precision);
  o.base.precision = precisions.front();
  for (hw::DType p : precisions) {
    if (!gpu.peak(p)) {
      throw InputError(kCl.with_key("--precision"), fmt::format("GPU '{}' has no dense {} peak", gpu.name, hw::dtype_name(p)));
    }
    // Upper limits keep the enumeration's divisor loops short (O(sqrt gpus)), byte counts in int64 and
    // times in core::Time's range.
    check_training_scale(model, seq, a.gbs, a.gpus, gpu, p);
  }
  // Every plan uses all the GPUs, so the slowest of them paces each alike (train/variability.h).
  const double variability = parse_gpu_variability(a.gpu_variability);
  o.evaluate.step.compute_slowdown = tr::slowest_gpu_factor(variability, a.gpus);
  const bool any_fp8 = std::find(precisions.begin(), precisions.end(), hw::DType::kFp8) != precisions.end();
  o.base.grad_bytes = a.grad_bytes;
  o.base.cpu_adam_params_per_s = a.cpu_adam_rate;
  o.base.optimizer_dtype = tr::parse_optimizer_dtype(a.optimizer_dtype, kCl.with_key("--optimizer-dtype"));
  o.base.master_weights = tr::parse_master_weights(a.master_weights, kCl.with_key("--master-weights"));
  parse_tp_overlap(a.tp_overlap, o.base);
  o.base.fp8_attention = parse_yes_no(a.fp8_attention, "--fp8-attention");
  o.base.ep_a2a_overlap = parse_yes_no(a.ep_overlap, "--overlap-moe-expert-parallel-comm");
  if (o.base.fp8_attention && !any_fp8) throw InputError(kCl.with_key("--fp8-attention"), "applies to --precision fp8");
  o.base.fp8_recipe = tr::parse_fp8_recipe(a.fp8_recipe, kCl.with_key("--fp8-recipe"));
  o.base.fsdp_impl = tr::parse_fsdp_impl(a.fsdp_impl, kCl.with_key("--fsdp-impl"));
  // One CP exchange is every CP plan's; a list is searched (SearchSpace::cp_comms, parsed by make_space).
  if (o.base.fp8_recipe != tr::Fp8Recipe::kDelayed && !any_fp8) {
    throw InputError(kCl.with_key("--fp8-recipe"), "applies to --precision fp8");
  }
  apply_fusion(a.kernels.fusion, o.base);
  o.base.allocator = parse_allocator(a.kernels.allocator);
  o.base.grad_accum_fusion =
      parse_grad_accum_fusion(a.kernels.grad_accum_fusion, !o.base.eager && !o.base.eager_loss, o.base.grad_bytes);
  o.base.capacity_factor = a.capacity_factor;
  o.base.load_imbalance = a.load_imbalance;
  // One dispatcher is every plan's; a list is searched (SearchSpace::moe_dispatchers, parsed by make_space).
  o.space = make_space(a);
  o.base.cp_comm = o.space.cp_comms.front();
  if (o.space.cp_comms.size() == 1) o.space.cp_comms.clear();
  {
    const bool selective = std::find(o.space.recomputes.begin(), o.space.recomputes.end(), tr::Recompute::kSelective) !=
                           o.space.recomputes.end();
    if (!a.recompute_modules.empty() && !selective) {
      throw InputError(kCl.with_key("--recompute-modules"), "applies when --recomputes includes selective");
    }
    // Several sets, separated by '|', are searched (SearchSpace::recompute_module_sets).
    std::vector<uint32_t> sets;
    const std::string_view all = a.recompute_modules;
    for (size_t begin = 0; begin <= all.size();) {
      const size_t end = std::min(all.find('|', begin), all.size());
      const std::string_view item = all.substr(begin, end - begin);
      begin = end + 1;
      if (trim(item).empty()) continue;
      const uint32_t set = parse_recompute_modules_flag(std::string(item), tr::Recompute::kSelective);
      if (const std::string why = tr::recompute_modules_error(model, set); !why.empty()) {
        throw InputError(kCl.with_key("--recompute-modules"), why);
      }
      if (std::find(sets.begin(), sets.end(), set) == sets.end()) sets.push_back(set);
    }
    o.base.recompute_modules = sets.empty() ? tr::module_bit(tr::RecomputeModule::kCoreAttn) : sets.front();
    if (sets.size() > 1) o.space.recompute_module_sets = sets;
  }
  if (precisions.size() > 1) o.space.precisions = precisions;
  const std::vector<tr::MoeDispatcher>& dispatchers = o.space.moe_dispatchers;
  const bool deepep = std::find(dispatchers.begin(), dispatchers.end(), tr::MoeDispatcher::kDeepEp) != dispatchers.end();
  o.base.moe_dispatcher = dispatchers.front();
  o.base.moe_ranks_per_token = a.moe_ranks_per_token;
  if (!(a.moe_ranks_per_token >= 0.0 && std::isfinite(a.moe_ranks_per_token))) {
    throw InputError(kCl.with_key("--moe-ranks-per-token"), fmt::format("expected a finite number >= 0, found {}", a.moe_ranks_per_token));
  }
  if (a.moe_ranks_per_token > 0.0 && !deepep) {
    throw InputError(kCl.with_key("--moe-ranks-per-token"), "applies to --moe-dispatcher deepep (alltoall sends top_k copies)");
  }
  if (!(a.capacity_factor >= 0.0 && std::isfinite(a.capacity_factor))) {
    throw InputError(kCl.with_key("--capacity-factor"), fmt::format("expected a finite number >= 0, found {}", a.capacity_factor));
  }
  if (!(a.load_imbalance >= 1.0 && std::isfinite(a.load_imbalance))) {
    throw InputError(kCl.with_key("--load-imbalance"), fmt::format("expected a finite number >= 1, found {}", a.load_imbalance));
  }
  if (a.budget_given) {
    // Compared in double: Bytes holds no NaN, inf or 1e308 GiB.
    if (!(a.budget_gib > 0.0 && a.budget_gib * 1073741824.0 <= gpu.memory.to_double())) {
      throw InputError(kCl.with_key("--budget-gib"),
                       fmt::format("expected a budget in (0, {:.2f}] GiB (the memory of one {}), found {}",
                                   gpu.memory.to_gib(), gpu.name, a.budget_gib));
    }
    o.budget = Bytes::from_double(a.budget_gib * 1073741824.0);
  }
  o.top_k = static_cast<size_t>(a.top);
  o.flow_rerank = static_cast<size_t>(a.flow_rerank);
  o.threads = a.threads;
  o.prune = !a.exhaustive;
  o.keep_candidates = !a.candidates_csv.empty();
  std::unique_ptr<ProgressBar> bar;
  std::string bar_phase;
  o.progress = [&](std::string_view phase, uint64_t done, uint64_t total) {
    if (phase != bar_phase) {
      if (bar) bar->finish();
      bar_phase = std::string(phase);
      bar = std::make_unique<ProgressBar>(fmt::format("plan: {}", phase), total, ProgressOptions{ctx.global.quiet});
    }
    bar->update(done);
  };
  const compute::ComputeModel cm(gpu, training_calibration(gpu, a.kernels));
  const tr::PlannerResult r = tr::plan_training(model, cluster, cm, o);
  if (bar) bar->finish();
  if (!a.candidates_csv.empty()) io::write_file_atomic(a.candidates_csv, candidates_csv(r.candidates));
  const bool feasible = !r.top.empty();
  ctx.exit_code = feasible ? 0 : 1;

  if (ctx.global.json) {
    Json j = envelope("plan train");
    j["model"] = model.name;
    j["gpu"] = gpu.name;
    j["power_limit_w"] = gpu.power().watts();
    j["attention_kernel"] = a.kernels.attention_kernel;
    j["fusion"] = a.kernels.fusion;
    j["allocator"] = a.kernels.allocator;
    j["attention_efficiency"] = cm.calibration().attention.efficiency;
    j["calibration"] = calibration_json(cm.calibration(), a.kernels);
    j["gpus"] = a.gpus;
    j["node"] = node != nullptr ? Json(node->name) : Json(nullptr);
    j["seq"] = seq;
    j["gbs"] = a.gbs;
    j["precision"] = hw::dtype_name(o.base.precision);
    Json searched_precisions = Json::array();
    for (hw::DType p : precisions) searched_precisions.push_back(hw::dtype_name(p));
    j["precisions"] = searched_precisions;
    j["tp_comm_overlap"] = o.base.tp_comm_overlap;
    j["tp_comm_overlap_mode"] = tp_overlap_label(o.base);
    j["fp8_attention"] = o.base.fp8_attention;
    j["overlap_moe_expert_parallel_comm"] = o.base.ep_a2a_overlap;
    j["fp8_recipe"] = tr::fp8_recipe_name(o.base.fp8_recipe);
    j["fsdp_impl"] = tr::fsdp_impl_name(o.base.fsdp_impl);
    j["cp_comm_type"] = tr::cp_comm_name(o.base.cp_comm);
    Json searched_cp = Json::array();
    if (o.space.cp_comms.empty()) searched_cp.push_back(tr::cp_comm_name(o.base.cp_comm));
    for (tr::CpComm c : o.space.cp_comms) searched_cp.push_back(tr::cp_comm_name(c));
    j["cp_comm_types"] = searched_cp;
    j["gpu_variability"] = Json{{"sigma", variability}, {"slowest_gpu_factor", o.evaluate.step.compute_slowdown}};
    j["grad_bytes"] = o.base.grad_bytes;
    j["grad_accum_fusion"] = o.base.grad_accum_fusion;
    j["dropout"] = dropout_json(model);
    j["optimizer_dtype"] = hw::dtype_name(o.base.optimizer_dtype);
    j["master_weights"] = tr::master_weights_name(o.base.master_weights);
    j["space"] = space_json(o.space);
    j["capacity_factor"] = o.base.capacity_factor;
    j["load_imbalance"] = o.base.load_imbalance;
    Json searched = Json::array();
    for (tr::MoeDispatcher d : o.space.moe_dispatchers) searched.push_back(tr::moe_dispatcher_name(d));
    j["moe_dispatcher"] = tr::moe_dispatcher_name(o.base.moe_dispatcher);
    j["moe_dispatchers"] = searched;
    j["moe_ranks_per_token"] = o.base.moe_ranks_per_token;
    j["comm_model"] = a.fabric.comm_model;
    if (topology) {
      j["fabric"] = fabric_json(a.fabric);
      j["flow_rerank"] = tr::flow_rerank_count(o);
    }
    j["bound_violations"] = r.bound_violations;
    j["budget_bytes"] = r.budget.count();
    j["feasible"] = feasible;
    j["counts"] = Json{{"enumerated", r.counts.enumerated}, {"invalid", r.counts.invalid},
                       {"over_budget", r.counts.over_budget}, {"fits", r.counts.fits},
                       {"simulated", r.counts.simulated},     {"pruned", r.counts.pruned},
                       {"errors", r.counts.errors},         {"flow_simulated", r.counts.flow_simulated},
                       {"unsharded", r.counts.unsharded},   {"partial_recompute", r.counts.partial_recompute},
                       {"activation_offload", r.counts.activation_offload}, {"optimizer_offload", r.counts.optimizer_offload}};
    j["top"] = simulated_json(r.top);
    j["pareto"] = simulated_json(r.pareto);
    Json reasons = Json::array();
    for (const tr::ReasonCount& rc : r.reasons) {
      reasons.push_back(Json{{"key", rc.key}, {"count", rc.count}, {"example", rc.example}});
    }
    j["infeasible"] = Json{{"reasons", reasons},
                           {"fastest_over_budget", over_budget_json(r.fastest_over_budget, r.budget)},
                           {"closest_over_budget", over_budget_json(r.closest_over_budget, r.budget)}};
    ctx.out << io::dump_json(j);
    return;
  }
  const bool several = precisions.size() > 1;
  std::string precision_list;
  for (hw::DType p : precisions) precision_list += (precision_list.empty() ? "" : " and ") + std::string(hw::dtype_name(p));
  if (several) precision_list += " searched";
  const PlanColumns columns{several, o.space.activation_offload || o.space.optimizer_offload};
  ctx.out << fmt::format("{} on {} x {}{}, seq {}, global batch {} sequences, {}, memory budget {} GiB per GPU\n",
                         model.name, a.gpus, gpu.name, node != nullptr ? " (" + node->name + ")" : "", seq, a.gbs,
                         precision_list, gib(r.budget));
  ctx.out << fmt::format("kernels: {} attention ({:.2f} of peak at long sequences), {} elementwise, weight gradients "
                         "{}, GPU at {:.0f} W, {} allocator{}\n",
                         a.kernels.attention_kernel, cm.calibration().attention.efficiency, fusion_label(a.kernels.fusion),
                         o.base.grad_accum_fusion ? "added into fp32 in the GEMM" : "apart", gpu.power().watts(),
                         a.kernels.allocator,
                         a.kernels.calibration.empty() ? "" : "; calibration " + a.kernels.calibration);
  if (variability > 0.0) {
    ctx.out << fmt::format("GPU variability: sigma {:g}, the slowest of {} GPUs paces every plan (compute x{:.4f})\n",
                           variability, a.gpus, o.evaluate.step.compute_slowdown);
  }
  if (model.is_moe()) {
    std::string etps;
    if (o.space.expert_tps != std::vector<int64_t>{0}) {
      std::vector<std::string> names;
      for (int64_t e : o.space.expert_tps) names.push_back(e > 0 ? std::to_string(e) : "tp");
      etps = fmt::format(", expert TP {} (searched)", fmt::join(names, " or "));
    }
    ctx.out << "MoE: " << moe_routing(model, o.base, false, o.space.moe_dispatchers) << etps << "\n";
  }
  ctx.out << fmt::format("communication: {}{}\n", fabric_description(a.fabric, topology),
                         topology ? fmt::format("; the search on the alpha-beta model, its best {} plans re-simulated "
                                                "on the topology and the top {} re-ranked (a plan outside them could "
                                                "still win there)",
                                                r.counts.flow_simulated, a.top)
                                  : std::string());
  ctx.out << fmt::format("plans: {} enumerated{}, {} invalid, {} over the budget, {} within it: {} simulated, {} skipped "
                         "(cannot enter the top {} or the Pareto front; docs/planner.md){}\n\n",
                         r.counts.enumerated,
                         variants_note(r.counts),
                         r.counts.invalid, r.counts.over_budget, r.counts.fits, r.counts.simulated,
                         r.counts.pruned, std::max<int64_t>(a.top, static_cast<int64_t>(tr::flow_rerank_count(o))),
                         r.counts.errors > 0 ? fmt::format("; {} failed in the simulator (internal-error below)", r.counts.errors)
                                             : std::string());
  if (feasible) {
    ctx.out << simulated_table(r.top,
                               topology ? fmt::format("top {} plans by tokens/s per GPU on the topology (flow-level)", r.top.size())
                                        : fmt::format("top {} plans by tokens/s per GPU", r.top.size()),
                               columns, topology.has_value())
                   .render()
            << "\n";
    ctx.out << simulated_table(r.pareto, "Pareto front: tokens/s per GPU vs peak memory (more memory, more speed)", columns)
                   .render()
            << "\n";
  } else {
    ctx.out << "no feasible plan: every plan breaks a constraint or exceeds the memory budget\n\n";
  }
  if (!r.fastest_over_budget.empty()) {
    ctx.out << over_budget_table(r.fastest_over_budget, r.budget,
                                 "fastest plans over the memory budget (bound: an upper bound on their tokens/s per GPU)", columns)
                   .render()
            << "\n";
    if (!feasible) {
      ctx.out << over_budget_table(r.closest_over_budget, r.budget, "plans closest to the memory budget", columns).render()
              << "\n";
    }
  }
  Table why({"reason", "plans", "example"}, "why plans fail");
  for (const tr::ReasonCount& rc : r.reasons) why.add_row({rc.key, std::to_string(rc.count), rc.example});
  if (why.rows() > 0) ctx.out << why.render();
}

}  // namespace

void register_plan_train_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  auto a = std::make_shared<PlanTrainArgs>();
  CLI::App* c = plan_group(app)->add_subcommand(
      "train", "every training plan of a model on N GPUs: top K by throughput, Pareto front, why others fail");
  c->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  c->add_option("--model", a->model, "catalog model name or path to a config.json")->type_name("NAME");
  c->add_option("--gpu", a->gpu, "catalog GPU, e.g. h100-sxm")->type_name("NAME");
  c->add_option("--gpus", a->gpus, "GPU count")->type_name("N");
  c->add_option("--seq", a->seq, "sequence length (tokens; a DiT's is its video token count)");
  c->add_option("--gbs", a->gbs, "global batch size (sequences)");
  c->add_option("--budget-gib", a->budget_gib, "memory budget per GPU in GiB (default: the GPU's memory)")
      ->each([a](const std::string&) { a->budget_given = true; });
  c->add_option("--top", a->top, "plans to list")->capture_default_str();
  c->add_option("--flow-rerank", a->flow_rerank,
                "--comm-model flow: the search's best N plans re-simulated on the topology before the top is re-ranked, "
                "at least --top (default 3 x --top; more finds plans the fabric favours, at a flow run each)");
  c->add_option("--threads", a->threads, "threads (0 = all cores); results do not depend on it")->capture_default_str();
  c->add_option("--node", a->node, "catalog node type (default: the catalog node with this GPU)");
  add_kernel_options(c, a->kernels);
  add_fabric_options(c, a->fabric);
  c->add_option("--nic-bandwidth", a->nic_bandwidth, "per-GPU network bandwidth when no node matches")->capture_default_str();
  c->add_option("--precision", a->precision,
                "bf16 | fp16 | fp8, or a comma-separated list to search (e.g. bf16,fp8: every plan in each)")
      ->capture_default_str();
  c->add_option("--max-tp", a->max_tp, "largest TP degree (0 = GPUs per node; 8 on a larger NVLink domain such as GB200 NVL72)")->capture_default_str();
  c->add_option("--max-pp", a->max_pp, "largest PP degree (0 = layers)")->capture_default_str();
  c->add_option("--max-cp", a->max_cp, "largest CP degree (powers of two; 1 = no CP, 0 = no limit)")->capture_default_str();
  c->add_option("--max-ep", a->max_ep, "largest EP degree for MoE models (0 = experts)")->capture_default_str();
  c->add_option("--max-vp", a->max_vp, "largest virtual-stage count (0 = layers / pp)")->capture_default_str();
  c->add_option("--max-mbs", a->max_mbs, "largest micro-batch (0 = gbs / dp)")->capture_default_str();
  c->add_option("--schedules", a->schedules, "pipeline schedules to try (comma-separated)")->capture_default_str();
  c->add_option("--shardings", a->shardings, "DP shardings to try: none, zero1, zero2, zero3, hsdp")->capture_default_str();
  c->add_option("--recomputes", a->recomputes, "recompute modes to try (none, selective, selective-op, full)")->capture_default_str();
  c->add_option("--recompute-modules", a->recompute_modules,
                "the modules selective plans re-run (Megatron-Core's --recompute-modules; default core_attn): core_attn, "
                "mla_up_proj, moe_act, layernorm, mlp, shared_experts; several sets separated by '|' are searched, "
                "e.g. 'core_attn|core_attn,mla_up_proj,moe_act'");
  c->add_option("--sp", a->sp, "sequence parallelism with TP: both | yes | no")->capture_default_str();
  c->add_option("--unsharding", a->unshard,
                "ZeRO-3/HSDP plans also with the most layers kept gathered that the budget allows (sharding shown as +uK): yes | no")
      ->capture_default_str();
  c->add_option("--partial-recompute", a->partial_recompute,
                "plans over the budget without recompute also recomputing the fewest layers that fit (shown as full:K): yes | no")
      ->capture_default_str();
  c->add_option("--offload", a->offload,
                "plans over the budget also offloading to host memory what makes them fit (offload column): the activations of the "
                "fewest first layers (act:K; one stage, no recompute), the smallest share of the optimizer in twentieths "
                "(opt:F; sharded plans), or both kinds: "
                "no | activations | optimizer | both")
      ->capture_default_str();
  add_cpu_adam_rate_flag(*c, a->cpu_adam_rate);
  c->add_option("--grad-bytes", a->grad_bytes, "main-gradient bytes per parameter: 4 | 2")->capture_default_str();
  add_optimizer_state_flags(*c, a->optimizer_dtype, a->master_weights);
  add_fp8_recipe_flag(*c, a->fp8_recipe);
  add_fsdp_impl_flag(*c, a->fsdp_impl);
  c->add_option("--cp-comm-type", a->cp_comm,
                 "how CP plans exchange the attention's operands, a comma-separated list searched (Megatron-Core's "
                 "--cp-comm-type): p2p (ring, overlapped) | all_gather (K/V gathered, exposed) | a2a (Ulysses, exposed; "
                 "heads per TP rank divisible by cp) | a2a+p2p (a2a inside an NVLink domain, the ring across), e.g. p2p,a2a")
      ->capture_default_str();
  add_gpu_variability_flag(*c, a->gpu_variability);
  c->add_option("--overlap-moe-expert-parallel-comm", a->ep_overlap,
                "Megatron-Core's combined 1F1B on every MoE plan that allows it (EP > 1; pp 1 or interleaved): yes | no")
      ->capture_default_str();
  c->add_option("--fp8-attention", a->fp8_attention,
                "--precision fp8: the attention core in fp8 too (Transformer Engine's FP8 DPA): yes | no (bf16)")
      ->capture_default_str();
  c->add_option("--tp-comm-overlap", a->tp_overlap,
                "every plan's TP collectives overlapped with GEMMs (SP plans; docs/training.md): yes or te (Transformer Engine's pairing) | async (PyTorch's async TP: forward only) | no")
      ->capture_default_str();
  c->add_option("--capacity-factor", a->capacity_factor, "MoE capacity factor (0 = dropless)")->capture_default_str();
  c->add_option("--load-imbalance", a->load_imbalance, "MoE busiest-expert load / mean (>= 1)")->capture_default_str();
  c->add_option("--etp", a->etps,
                "MoE expert tensor-parallel sizes to search, comma-separated: tp (the plan's own) or sizes dividing tp, "
                "which need SP (Megatron-Core's --expert-tensor-parallel-size; e.g. 1,tp)")
      ->capture_default_str();
  c->add_option("--moe-dispatcher", a->moe_dispatcher,
                "MoE token exchange: alltoall (Megatron-Core: top_k copies per token) | deepep (one copy per EP rank reached); "
                "a comma-separated list searches each")
      ->capture_default_str();
  c->add_option("--moe-ranks-per-token", a->moe_ranks_per_token,
                "deepep: EP ranks each token reaches, at most min(top_k, ep) (0 = expected under uniform routing)")
      ->capture_default_str();
  c->add_flag("--exhaustive", a->exhaustive, "simulate every plan within the budget (no bound pruning)");
  c->add_option("--candidates-csv", a->candidates_csv, "write every candidate with its status and reason")
      ->type_name("FILE");
  add_video_options(c, a->video);
  add_dropout_options(c, a->dropout);
  actions.emplace_back(c, [a, c](Context& ctx) {
    a->seq_given = c->count("--seq") > 0;
    run_plan_train(ctx, *a);
  });
}

}  // namespace orrery::cli
