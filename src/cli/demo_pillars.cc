#include "cli/demo_pillars.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "cli/train_common.h"
#include "core/error.h"
#include "core/strings.h"
#include "decentral/graph.h"
#include "decentral/heterogeneity.h"
#include "decentral/problem.h"
#include "decentral/runner.h"
#include "serve/capacity.h"
#include "serve/scheduler.h"
#include "serve/workload_spec.h"
#include "train/planner.h"
#include "train/train.h"

namespace orrery::cli {
namespace {

using io::Json;
namespace tr = orrery::train;
namespace sv = orrery::serve;
namespace dc = orrery::decentral;

const Where kCl{"<command line>", 0, ""};

std::string pct(double x) { return fmt::format("{:.1f}%", 100.0 * x); }

// The first plan one would try, checked: Megatron's TP (with sequence parallelism) and PP, DP over the
// rest, one sequence per micro-batch, no sharding, no recompute. Throws InputError naming the demo flag.
tr::Plan first_plan(const io::Catalog& catalog, const DemoTraining& cfg) {
  const model::ModelSpec model = catalog.model(cfg.model, kCl.with_key("--train-model"));
  const hw::GpuSpec& gpu = catalog.hw.get_gpu(cfg.gpu, kCl.with_key("--train-gpu"));
  if (cfg.top < 1 || cfg.top > 20) throw InputError(kCl.with_key("--train-top"), fmt::format("expected 1..20, found {}", cfg.top));
  if (cfg.tp < 1 || cfg.pp < 1 || cfg.gpus < 1 || cfg.gpus % (cfg.tp * cfg.pp) != 0) {
    throw InputError(kCl.with_key("--train-gpus"),
                     fmt::format("expected a multiple of tp x pp = {} x {}, found {}", cfg.tp, cfg.pp, cfg.gpus));
  }
  try {
    check_training_scale(model, cfg.seq, cfg.gbs, cfg.gpus, gpu, hw::DType::kBf16);
  } catch (const InputError& e) {
    // The same limits as `orrery train`, named by the demo's flags.
    const std::string& k = e.where().key;
    const std::string flag = k == "--seq" ? "--train-seq" : k == "--gbs" ? "--train-gbs" : k == "--gpus" ? "--train-gpus" : k;
    throw InputError(kCl.with_key(flag), e.message(), e.hint());
  }
  tr::Plan mine;
  mine.tp = cfg.tp;
  mine.pp = cfg.pp;
  mine.dp = cfg.gpus / (cfg.tp * cfg.pp);
  mine.sp = cfg.tp > 1;
  mine.mbs = 1;
  mine.gbs = cfg.gbs;
  mine.seq = cfg.seq;
  // A PP that does not divide the layers gets uneven stages, as the planner's candidates do (e.g.
  // DeepSeek-V3's 61 layers over PP 2: 30 + 31).
  if (model.layers % cfg.pp != 0) (void)tr::balance_uneven_stages(mine, model.layers);
  if (const std::vector<tr::ConstraintError> broken = tr::validate_plan(model, mine, cfg.gpus, gpu); !broken.empty()) {
    // The first broken constraint (train/plan.h keys), named by the demo flag that sets it.
    const std::string& k = broken.front().key;
    const std::string flag = k == "gbs" || k == "vp_microbatches" ? "--train-gbs"
                             : k.rfind("pp", 0) == 0                 ? "--train-pp"
                             : k.rfind("tp", 0) == 0 || k == "sp"    ? "--train-tp"
                             : k == "cp_seq"                        ? "--train-seq"
                                                                    : "--train-gpus";
    throw InputError(kCl.with_key(flag), broken.front().message + " (" + k + ")");
  }
  return mine;
}

}  // namespace

void check_demo_training(const io::Catalog& catalog, const DemoTraining& cfg) { (void)first_plan(catalog, cfg); }

DemoSection demo_training(const io::Catalog& catalog, const DemoTraining& cfg) {
  const tr::Plan mine = first_plan(catalog, cfg);
  const model::ModelSpec model = catalog.model(cfg.model, kCl.with_key("--train-model"));
  const hw::GpuSpec& gpu = catalog.hw.get_gpu(cfg.gpu, kCl.with_key("--train-gpu"));
  const hw::NodeSpec* node = training_node(catalog.hw, gpu, "");
  const tr::ClusterSpec cluster = tr::ClusterSpec::from_catalog(gpu, node, 8, Bandwidth(50e9));  // 400 Gb/s NICs
  const compute::ComputeModel cm(gpu, training_calibration(gpu, KernelArgs{}));
  const tr::TrainResult r = tr::evaluate(model, mine, cluster, cm);

  tr::PlannerOptions o;
  o.gpus = cfg.gpus;
  o.seq = cfg.seq;
  o.gbs = cfg.gbs;
  o.top_k = static_cast<size_t>(cfg.top);
  const tr::PlannerResult best = tr::plan_training(model, cluster, cm, o);

  std::vector<std::string> header = {"plan"};
  for (const std::string& h : plan_header()) header.push_back(h);
  for (const char* h : {"step s", "tokens/s/GPU", "MFU", "peak GiB", "fits"}) header.emplace_back(h);
  DemoSection s{Table(header, fmt::format("Q4. Training {} on {} x {} (seq {}, global batch {}): the first plan "
                                          "one would try, and the planner's best",
                                          cfg.model, cfg.gpus, cfg.gpu, cfg.seq, cfg.gbs)),
                Json::object(), ""};
  auto row = [&](const std::string& name, const tr::Plan& p, Time step, double tps, double mfu, Bytes peak, bool fits) {
    std::vector<std::string> cells = {name};
    for (std::string& c : plan_cells(p)) cells.push_back(std::move(c));
    for (std::string c : {fmt::format("{:.2f}", step.to_seconds()), fmt::format("{:.0f}", tps), pct(mfu), gib(peak),
                          std::string(fits ? "yes" : "NO")}) {
      cells.push_back(std::move(c));
    }
    s.table.add_row(std::move(cells));
  };
  row("first try", mine, r.step.step_time, r.tokens_per_s_per_gpu, r.mfu, r.memory.peak, r.memory.fits);
  Json top = Json::array();
  for (size_t i = 0; i < best.top.size(); ++i) {
    const tr::Candidate& c = best.top[i];
    row(fmt::format("planner #{}", i + 1), c.plan, c.step_time, c.tokens_per_s_per_gpu, c.mfu, c.peak, true);
    top.push_back(Json{{"rank", i + 1},
                       {"plan", plan_json(c.plan)},
                       {"step_time_s", c.step_time.to_seconds()},
                       {"tokens_per_s_per_gpu", c.tokens_per_s_per_gpu},
                       {"mfu", c.mfu},
                       {"peak_memory_bytes", c.peak.count()},
                       {"time", time_json(c.breakdown)}});
  }
  const tr::StageMemory& peak_stage = r.memory.stages[static_cast<size_t>(r.memory.peak_stage)];
  const tr::MemoryBreakdown& m = peak_stage.memory;
  s.json = Json{{"model", cfg.model},
                {"gpu", cfg.gpu},
                {"gpus", cfg.gpus},
                {"seq", cfg.seq},
                {"gbs", cfg.gbs},
                {"memory_budget_bytes", best.budget.count()},
                {"first_try",
                 {{"plan", plan_json(mine)},
                  {"step_time_s", r.step.step_time.to_seconds()},
                  {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
                  {"mfu", r.mfu},
                  {"peak_memory_bytes", r.memory.peak.count()},
                  {"fits", r.memory.fits},
                  {"memory", memory_json(m)},
                  {"time", time_json(r.step.breakdown)}}},
                {"planner",
                 {{"enumerated", best.counts.enumerated},
                  {"invalid", best.counts.invalid},
                  {"over_budget", best.counts.over_budget},
                  {"simulated", best.counts.simulated},
                  {"top", top}}}};
  s.note = fmt::format(
      "Q4: the first try's peak stage holds {} GiB of weights, gradients and optimizer states and {} GiB of "
      "activations against {} GiB; the planner enumerated {} plans ({} invalid, {} over the memory budget) and "
      "simulated {} (docs/training.md, docs/planner.md).\n",
      gib(m.weights + m.gradients + m.optimizer), gib(m.activations), gib(best.budget), best.counts.enumerated,
      best.counts.invalid, best.counts.over_budget, best.counts.simulated);
  return s;
}

void check_demo_serving(const io::Catalog& catalog, const DemoServing& cfg) {
  (void)catalog.model(cfg.model, kCl.with_key("--serve-model"));
  (void)catalog.hw.get_gpu(cfg.gpu, kCl.with_key("--serve-gpu"));
  if (!(cfg.rate > 0.0) || !std::isfinite(cfg.rate) || cfg.rate > 1e5) {
    throw InputError(kCl.with_key("--serve-rate"), fmt::format("expected a rate in (0, 1e5] requests/s, found {}", cfg.rate));
  }
  if (cfg.requests < 100 || cfg.requests > 1'000'000) {
    throw InputError(kCl.with_key("--serve-requests"), fmt::format("expected 100..1000000, found {}", cfg.requests));
  }
  std::vector<std::string> known;
  for (const sv::SchedulerInfo& i : sv::scheduler_registry()) known.push_back(i.name);
  for (const std::string& name : cfg.schedulers) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw InputError(kCl.with_key("--serve-schedulers"), "unknown scheduler '" + name + "'", suggest(name, known));
    }
  }
}

DemoSection demo_serving(const io::Catalog& catalog, const DemoServing& cfg, uint64_t seed) {
  check_demo_serving(catalog, cfg);
  const model::ModelSpec model = catalog.model(cfg.model, kCl.with_key("--serve-model"));
  const hw::GpuSpec& gpu = catalog.hw.get_gpu(cfg.gpu, kCl.with_key("--serve-gpu"));
  const sv::WorkloadSpec spec = sv::parse_workload_spec("default");
  const int64_t n = cfg.requests;
  const sv::WorkloadFactory factory = [spec, seed, n](double rate) { return sv::make_workload(spec, rate, seed, n); };
  sv::CapacityOptions o;  // no SLO: the capacity is the largest stable rate
  o.rel_tol = 0.02;

  DemoSection s{Table({"scheduler", "TTFT p50 ms", "TTFT p90 ms", "TPOT p50 ms", "TPOT p99 ms", "E2E p50 s", "req/s",
                       "restarts", "stable", "largest stable req/s"},
                      fmt::format("Q5. Serving {} on one {}: the Azure-conversation-fitted workload at {:g} req/s "
                                  "({} requests) per scheduler",
                                  cfg.model, cfg.gpu, cfg.rate, cfg.requests)),
                Json::object(), ""};
  Json rows = Json::array();
  int64_t kv_tokens = 0;
  for (const std::string& name : cfg.schedulers) {
    sv::CapacityConfig c;
    c.gpu = &gpu;
    c.scheduler = name;
    const sv::CapacityProbe probe(model, c, factory, o);
    if (!probe.fits()) throw InputError(kCl.with_key("--serve-model"), fmt::format("{} on one {}: {}", cfg.model, cfg.gpu, probe.reason()));
    kv_tokens = probe.kv_tokens();
    const sv::RunMetrics m = probe.run(cfg.rate);
    const sv::CapacityResult cap = sv::evaluate_capacity(probe, o);
    const double star = cap.feasible ? cap.rate : 0.0;
    s.table.add_row({name, fmt::format("{:.0f}", 1e3 * m.ttft.quantile(0.5)), fmt::format("{:.0f}", 1e3 * m.ttft.quantile(0.9)),
                     fmt::format("{:.1f}", 1e3 * m.tpot.quantile(0.5)), fmt::format("{:.1f}", 1e3 * m.tpot.quantile(0.99)),
                     fmt::format("{:.2f}", m.e2e.quantile(0.5)), fmt::format("{:.2f}", m.request_throughput),
                     std::to_string(m.evictions), m.stable ? "yes" : "no", fmt::format("{:.2f}", star)});
    rows.push_back(Json{{"scheduler", name},
                        {"ttft_s", {{"p50", m.ttft.quantile(0.5)}, {"p90", m.ttft.quantile(0.9)}}},
                        {"tpot_s", {{"p50", m.tpot.quantile(0.5)}, {"p99", m.tpot.quantile(0.99)}}},
                        {"e2e_s", {{"p50", m.e2e.quantile(0.5)}}},
                        {"request_throughput", m.request_throughput},
                        {"restarts", m.evictions},
                        {"stable", m.stable},
                        {"largest_stable_rate", star}});
  }
  s.json = Json{{"model", cfg.model},    {"gpu", cfg.gpu},          {"rate", cfg.rate},
                {"requests", cfg.requests}, {"kv_capacity_tokens", kv_tokens}, {"schedulers", rows}};
  s.note = fmt::format(
      "Q5: roofline time model, KV cache {} tokens; 'stable' and the largest stable rate as in docs/serving.md "
      "(no upward TTFT trend; bisection to 2%); orca and static batching reserve each request's whole length; "
      "WAIT starts a batch only when its thresholds of waiting prompts are met, which costs latency at light "
      "load (docs/serving.md, policy-level validation).\n",
      kv_tokens);
  return s;
}

void check_demo_gossip(const DemoGossip& cfg) {
  if (cfg.iters < 10 || cfg.iters > 100'000) {
    throw InputError(kCl.with_key("--gossip-iters"), fmt::format("expected 10..100000, found {}", cfg.iters));
  }
  if (!(cfg.horizon_s > 0.0) || !std::isfinite(cfg.horizon_s)) {
    throw InputError(kCl.with_key("--gossip-horizon"), fmt::format("expected a positive time in seconds, found {}", cfg.horizon_s));
  }
  (void)dc::parse_topology(cfg.topology, kCl.with_key("--gossip-topology"));
  (void)dc::parse_heterogeneity(cfg.heterogeneity, kCl.with_key("--gossip-heterogeneity"));
}

DemoSection demo_gossip(const DemoGossip& cfg, uint64_t seed) {
  check_demo_gossip(cfg);
  const dc::GraphSequence seq = dc::parse_topology(cfg.topology, kCl.with_key("--gossip-topology"));
  dc::SyntheticSpec ps;  // the papers' problem: 1.44 M samples, more than kMaxNodes, so every node has some
  ps.nodes = seq.num_nodes();
  const std::unique_ptr<dc::Problem> problem = dc::make_logistic_nonconvex(ps);
  const dc::HeterogeneitySpec hetero = dc::parse_heterogeneity(cfg.heterogeneity, kCl.with_key("--gossip-heterogeneity"));

  struct Case {
    const char* algo;
    dc::TimeMode mode;
  };
  // DSGD and gradient tracking (twice the bytes: it gossips a tracker too) wait for their in-neighbours;
  // asynchronous DSGD and Push-Sum (SGP) never wait.
  const Case cases[] = {{"dsgd", dc::TimeMode::kSync},
                        {"gt", dc::TimeMode::kSync},
                        {"dsgd", dc::TimeMode::kAsync},
                        {"push-sum", dc::TimeMode::kAsync}};
  DemoSection s{Table({"algorithm", "time", fmt::format("iterations by {:g} s", cfg.horizon_s),
                       fmt::format("loss at {:g} s", cfg.horizon_s), fmt::format("loss after {}", cfg.iters),
                       fmt::format("sim s for {}", cfg.iters), "MB sent"},
                      fmt::format("Q6. Decentralized training on {} nodes of unequal speed ({}; {}), the nonconvex "
                                  "logistic problem: what synchronous and asynchronous gossip reach in the same time",
                                  seq.num_nodes(), cfg.topology, cfg.heterogeneity)),
                Json::object(), ""};
  Json rows = Json::array();
  for (const Case& k : cases) {
    dc::RunSpec r;
    r.algorithm = k.algo;
    r.iters = cfg.iters;
    r.seed = seed + 1;
    r.eval_every = std::max<int64_t>(1, cfg.iters / 50);  // the loss over all samples, 50 times a run
    r.time.hetero = hetero;
    r.time.mode = k.mode;
    const dc::RunResult res = dc::run(*problem, seq, r);
    const dc::SummaryPoint& last = res.summary.back();
    // The last evaluation at or before the horizon in simulated time (the first, iteration 0, at least).
    const dc::SummaryPoint* at = &res.summary.front();
    for (const dc::SummaryPoint& p : res.summary) {
      if (p.sim_time.mean <= cfg.horizon_s) at = &p;
    }
    const char* mode = k.mode == dc::TimeMode::kAsync ? "async" : "sync";
    s.table.add_row({k.algo, mode, std::to_string(at->iter), fmt::format("{:.4f}", at->loss.mean),
                     fmt::format("{:.4f}", last.loss.mean), fmt::format("{:.2f}", last.sim_time.mean),
                     fmt::format("{:.3g}", last.bytes.mean / 1e6)});
    rows.push_back(Json{{"algorithm", k.algo},
                        {"time", mode},
                        {"horizon_s", cfg.horizon_s},
                        {"iterations_by_horizon", at->iter},
                        {"loss_at_horizon", at->loss.mean},
                        {"final_loss", last.loss.mean},
                        {"final_grad_norm", last.grad_norm.mean},
                        {"final_consensus", last.consensus.mean},
                        {"final_sim_time_s", last.sim_time.mean},
                        {"bytes_sent", last.bytes.mean}});
  }
  s.json = Json{{"topology", cfg.topology},
                {"nodes", seq.num_nodes()},
                {"problem", "logistic-nonconvex"},
                {"iters", cfg.iters},
                {"heterogeneity", cfg.heterogeneity},
                {"runs", rows}};
  s.note = "Q6: learning rate 0.05, batch 200 per node and step; sync: a node waits for its in-neighbours "
           "each step, async: it never waits (docs/decentral_algorithms.md, 'Heterogeneity, churn and "
           "asynchronous time'); loss f(xbar) over all samples at the last evaluation (every iters / 50) at or before "
           "the time.\n";
  return s;
}

}  // namespace orrery::cli
