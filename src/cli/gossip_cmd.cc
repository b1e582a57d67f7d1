// `orrery gossip topo`: a communication graph's structure and its mixing matrix's metrics (stochasticity,
// Perron vector, kappa, beta, spectral gap, consensus rate, MG-PULL-DIAG-GT rounds). Definitions in
// docs/decentral_graphs.md.
// `orrery gossip run | sweep | list`: decentralized and federated algorithms on real problems, metrics
// averaged over seeds (docs/decentral_algorithms.md).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/output.h"
#include "core/progress.h"
#include "core/unit_parse.h"
#include "core/strings.h"
#include "decentral/algorithm.h"
#include "decentral/dataset.h"
#include "decentral/device_trace.h"
#include "decentral/graph.h"
#include "decentral/mixing.h"
#include "decentral/mpi_runtime.h"
#include "decentral/problem.h"
#include "decentral/runner.h"
#include "io/atomic_file.h"

namespace orrery::cli {
namespace {

using io::Json;
namespace dc = orrery::decentral;

struct GossipTopoArgs {
  std::string topology;
  std::string mixing = "auto";
};

const Where kCl{"<command line>", 0, ""};

struct DegreeStats {
  dc::NodeIndex min = 0;
  double mean = 0;
  dc::NodeIndex max = 0;
};

DegreeStats degree_stats(const dc::Graph& g, bool out) {
  DegreeStats s;
  if (g.num_nodes() == 0) return s;
  s.min = g.num_nodes();
  for (dc::NodeIndex v = 0; v < g.num_nodes(); ++v) {
    const dc::NodeIndex d = out ? g.out_degree(v) : g.in_degree(v);
    s.min = std::min(s.min, d);
    s.max = std::max(s.max, d);
  }
  s.mean = static_cast<double>(g.num_edges()) / g.num_nodes();
  return s;
}

Json degree_json(const DegreeStats& s) { return Json{{"min", s.min}, {"mean", s.mean}, {"max", s.max}}; }

std::string yes_no(bool b) { return b ? "yes" : "no"; }

void run_topo(Context& ctx, const GossipTopoArgs& a) {
  if (a.topology.empty()) throw InputError(kCl.with_key("--topology"), "missing; e.g. --topology exponential:16");
  const dc::GraphSequence seq = dc::parse_topology(a.topology, kCl.with_key("--topology"));
  // Time-varying sequences are described by the union of one period.
  const dc::Graph g = seq.union_graph();
  bool all_symmetric = true;
  for (const dc::Graph& step : seq.graphs()) all_symmetric = all_symmetric && step.is_symmetric();
  const dc::MixingSpec spec = a.mixing == "auto"
                                  ? dc::MixingSpec{all_symmetric ? dc::MixingRule::kMetropolis : dc::MixingRule::kPull, false}
                                  : dc::parse_mixing(a.mixing, kCl.with_key("--mixing"));
  const bool strong = dc::is_strongly_connected(g);
  const bool weak = dc::is_weakly_connected(g);
  const int32_t components = dc::strongly_connected_components(g).count;
  const DegreeStats out_deg = degree_stats(g, true);
  const DegreeStats in_deg = degree_stats(g, false);

  // Mixing: the matrix of a static graph, or the product of one period of a time-varying sequence.
  std::optional<dc::MixingMetrics> metrics;
  std::string note;
  bool row = false;
  bool column = false;
  if (seq.num_nodes() > dc::kMaxDenseNodes) {
    note = fmt::format("mixing metrics skipped: dense matrices are limited to {} nodes", dc::kMaxDenseNodes);
  } else {
    const Where wm = kCl.with_key("--mixing");
    row = column = true;
    for (const dc::Graph& step : seq.graphs()) {
      const Eigen::MatrixXd w = dc::mixing_matrix(step, spec, wm);  // throws when the rule does not fit
      row = row && dc::is_row_stochastic(w);
      column = column && dc::is_column_stochastic(w);
    }
    if (!strong) {
      note = fmt::format("mixing metrics skipped: the graph is not strongly connected ({} components), so the "
                         "Perron vector is not unique",
                         components);
    } else {
      metrics = dc::mixing_metrics(dc::period_product(seq, spec, seq.period(), wm), wm);
    }
  }
  const std::string matrix_kind = seq.is_static() ? "per-round" : fmt::format("product of one period ({} rounds)", seq.period());

  if (ctx.global.json) {
    Json j = envelope("gossip topo");
    j["config"] = {{"topology", a.topology}, {"mixing", dc::mixing_name(spec)}};
    j["graph"] = {{"name", seq.name()},
                  {"nodes", g.num_nodes()},
                  {"edges", g.num_edges()},
                  {"period", seq.period()},
                  {"symmetric", g.is_symmetric()},
                  {"balanced", g.is_balanced()},
                  {"strongly_connected", strong},
                  {"weakly_connected", weak},
                  {"strongly_connected_components", components},
                  {"out_degree", degree_json(out_deg)},
                  {"in_degree", degree_json(in_deg)}};
    if (seq.num_nodes() > dc::kMaxDenseNodes) {
      j["mixing"] = nullptr;
    } else {
      Json m{{"rule", dc::mixing_name(spec)},
             {"matrix", seq.is_static() ? "per-round" : "period-product"},
             {"row_stochastic", row},
             {"column_stochastic", column},
             {"doubly_stochastic", row && column}};
      if (metrics) {
        m["symmetric"] = metrics->symmetric;
        m["pi_min"] = metrics->pi_min;
        m["pi_max"] = metrics->pi_max;
        m["kappa"] = metrics->kappa;
        m["beta"] = metrics->beta;
        m["spectral_gap"] = metrics->spectral_gap;
        m["consensus_rate"] = metrics->beta;
        m["lambda2_modulus"] = metrics->lambda2;
        m["theory_rounds"] = metrics->theory_rounds ? Json(*metrics->theory_rounds) : Json(nullptr);
        m["pi"] = std::vector<double>(metrics->pi.data(), metrics->pi.data() + metrics->pi.size());
      }
      j["mixing"] = m;
    }
    j["note"] = note.empty() ? Json(nullptr) : Json(note);
    ctx.out << io::dump_json(j);
    return;
  }

  Table t({"property", "value"}, seq.name());
  t.add_row({"nodes", std::to_string(g.num_nodes())});
  t.add_row({"directed edges", std::to_string(g.num_edges())});
  if (!seq.is_static()) t.add_row({"period (rounds)", std::to_string(seq.period())});
  t.add_row({"undirected", yes_no(g.is_symmetric())});
  t.add_row({"strongly connected", yes_no(strong)});
  if (!strong) t.add_row({"weakly connected", yes_no(weak)});
  t.add_row({"out-degree min/mean/max", fmt::format("{}/{:.3g}/{}", out_deg.min, out_deg.mean, out_deg.max)});
  t.add_row({"in-degree min/mean/max", fmt::format("{}/{:.3g}/{}", in_deg.min, in_deg.mean, in_deg.max)});
  if (seq.num_nodes() <= dc::kMaxDenseNodes) {
    t.add_row({"mixing", fmt::format("{} ({})", dc::mixing_name(spec), matrix_kind)});
    t.add_row({"stochastic", row && column ? "doubly" : row ? "row" : column ? "column" : "no"});
  }
  if (metrics) {
    t.add_row({"pi min / max", fmt::format("{:.6g} / {:.6g}", metrics->pi_min, metrics->pi_max)});
    t.add_row({"kappa", fmt::format("{:.6g}", metrics->kappa)});
    t.add_row({"beta (consensus rate)", fmt::format("{:.6f}", metrics->beta)});
    t.add_row({"spectral gap", fmt::format("{:.6f}", metrics->spectral_gap)});
    t.add_row({"|lambda_2|", fmt::format("{:.6f}", metrics->lambda2)});
    t.add_row({"R (MG-PULL-DIAG-GT)", metrics->theory_rounds ? std::to_string(*metrics->theory_rounds) : "-"});
  }
  ctx.out << t.render();
  if (!note.empty()) ctx.out << note << "\n";
}


// --- gossip run / sweep / list ------------------------------------------------------------------------------

struct GossipRunArgs {
  std::string algo = "push-pull";
  std::string topology;
  std::string problem = "logistic-nonconvex";
  std::string mixing = "auto";
  int64_t nodes = 0;  // federated algorithms without --topology
  int64_t iters = 1000;
  double lr = 0.05;
  int64_t batch = 200;
  int64_t seeds = 1;
  uint64_t seed = 1;
  int64_t eval_every = 0;
  std::string csv;
  std::string runtime = "in-process";  // gossip run: or "mpi" (decentral/mpi_runtime.h)
  // problem
  int64_t dim = 10;
  int64_t samples = 1'440'000;
  double rho = 0.01;
  uint64_t data_seed = 42;
  std::string partition = "iid";
  int64_t hidden = 64;
  double weight_decay = 0;
  std::string data;
  // algorithm
  dc::AlgoParams params;
  std::string compress = "none";
  bool effective_lr = false;
  std::string compute_per_sample, link_latency, link_bandwidth;
  double node_speed_cv = 0;
  std::string heterogeneity, device_trace, churn, time_mode = "sync";
  // sweep
  std::string node_list = "1,2,4,8,16";
  std::string topology_family = "exponential";
};

// Problem names accepted by --problem.
std::vector<std::string> problem_names() {
  return {"logistic-nonconvex", "least-squares", "softmax:fashion-mnist", "mlp:fashion-mnist", "softmax:digits",
          "mlp:digits"};
}

// Data sets loaded once per command (sweeps reuse them).
struct DataCache {
  std::shared_ptr<const dc::TrainTest> fashion, digits;
};

std::unique_ptr<dc::Problem> make_problem(const GossipRunArgs& a, dc::NodeIndex nodes, DataCache& cache) {
  const Where w = kCl.with_key("--problem");
  const std::string name = to_lower(trim(a.problem));
  if (name == "logistic-nonconvex" || name == "least-squares") {
    dc::SyntheticSpec s;
    s.nodes = nodes;
    s.dim = a.dim;
    s.samples = a.samples;
    s.rho = a.rho;
    s.data_seed = a.data_seed;
    if (a.dim < 1 || a.dim > 100'000) throw InputError(kCl.with_key("--dim"), fmt::format("expected 1..100000, got {}", a.dim));
    if (a.samples < nodes || a.samples > 100'000'000) {
      throw InputError(kCl.with_key("--samples"),
                       fmt::format("expected between the node count ({}) and 1e8, got {}", nodes, a.samples));
    }
    if (!(a.rho >= 0) || !std::isfinite(a.rho)) throw InputError(kCl.with_key("--rho"), "expected a finite value >= 0");
    return name == "least-squares" ? dc::make_least_squares(s) : dc::make_logistic_nonconvex(s);
  }
  const size_t colon = name.find(':');
  const std::string model = name.substr(0, colon);
  const std::string data = colon == std::string::npos ? "" : name.substr(colon + 1);
  if ((model != "softmax" && model != "mlp") || (data != "fashion-mnist" && data != "digits")) {
    throw InputError(w, fmt::format("unknown problem '{}'", name), suggest(name, problem_names()));
  }
  std::shared_ptr<const dc::TrainTest>& slot = data == "digits" ? cache.digits : cache.fashion;
  if (!slot) {
    slot = std::make_shared<const dc::TrainTest>(
        data == "digits" ? dc::read_digits(a.data.empty() ? std::string(dc::kDigitsCsv) : a.data)
                         : dc::read_fashion_mnist(a.data.empty() ? std::string(dc::kFashionMnistDir) : a.data));
  }
  dc::ClassifierSpec c;
  c.kind = model == "mlp" ? dc::ClassifierKind::kMlp : dc::ClassifierKind::kSoftmax;
  c.hidden = a.hidden;
  c.weight_decay = a.weight_decay;
  c.nodes = nodes;
  c.partition = dc::parse_partition(a.partition, kCl.with_key("--partition"));
  c.data_seed = a.data_seed;
  return dc::make_classifier(slot, c, kCl);
}

dc::RunSpec run_spec(const GossipRunArgs& a) {
  dc::RunSpec r;
  r.algorithm = a.algo;
  r.params = a.params;
  r.params.lr = a.lr;
  r.params.compressor = dc::parse_compressor(a.compress, kCl.with_key("--compress"));
  r.iters = a.iters;
  r.batch = a.batch;
  r.seeds = a.seeds;
  r.seed = a.seed;
  r.eval_every = a.eval_every;
  r.effective_lr = a.effective_lr;
  if (!a.compute_per_sample.empty()) r.time.compute_per_sample = parse_time(a.compute_per_sample, kCl.with_key("--compute-per-sample"));
  if (!a.link_latency.empty()) r.time.latency = parse_time(a.link_latency, kCl.with_key("--link-latency"));
  if (!a.link_bandwidth.empty()) r.time.bandwidth = parse_bandwidth_positive(a.link_bandwidth, kCl.with_key("--link-bandwidth"));
  if (!(a.node_speed_cv >= 0) || !std::isfinite(a.node_speed_cv)) throw InputError(kCl.with_key("--node-speed-cv"), "expected >= 0");
  r.time.speed_cv = a.node_speed_cv;
  if (!a.heterogeneity.empty()) r.time.hetero = dc::parse_heterogeneity(a.heterogeneity, kCl.with_key("--heterogeneity"));
  if (!a.device_trace.empty()) r.time.hetero.trace = std::make_shared<const dc::DeviceTrace>(dc::read_device_trace(a.device_trace));
  if (!a.churn.empty()) r.time.hetero.churn = dc::parse_churn(a.churn, kCl.with_key("--churn"));
  const std::string mode = to_lower(trim(a.time_mode));
  if (mode != "sync" && mode != "async") {
    throw InputError(kCl.with_key("--time"), fmt::format("expected sync or async, got '{}'", a.time_mode),
                     suggest(mode, {"sync", "async"}));
  }
  r.time.mode = mode == "async" ? dc::TimeMode::kAsync : dc::TimeMode::kSync;
  if (a.mixing != "auto") r.mixing = dc::parse_mixing(a.mixing, kCl.with_key("--mixing"));
  return r;
}

// A graph sequence for the run: --topology, or n isolated clients for federated algorithms (--nodes).
dc::GraphSequence run_graph(const GossipRunArgs& a, const dc::AlgorithmInfo& info) {
  if (!a.topology.empty()) return dc::parse_topology(a.topology, kCl.with_key("--topology"));
  if (info.federated && a.nodes >= 1) {
    if (a.nodes > dc::kMaxNodes) throw InputError(kCl.with_key("--nodes"), "too many nodes");
    return dc::GraphSequence(dc::Graph(static_cast<dc::NodeIndex>(a.nodes), {}, fmt::format("clients:{}", a.nodes)));
  }
  throw InputError(kCl.with_key("--topology"), "missing; e.g. --topology exponential:16",
                   info.federated ? "or --nodes N for a federated algorithm" : "");
}

Json stat_json(const dc::Stat& s) { return Json{{"mean", s.mean}, {"std", s.std}, {"min", s.min}, {"max", s.max}}; }

std::string fmt_stat(const dc::Stat& s, bool spread) {
  if (std::isnan(s.mean)) return "-";
  return spread ? fmt::format("{:.4g} ± {:.2g}", s.mean, s.std) : fmt::format("{:.4g}", s.mean);
}

std::string run_csv(const dc::RunResult& r) {
  std::string out = "iter";
  const char* names[] = {"loss",  "grad_norm",  "grad_norm_pi",   "consensus",     "test_accuracy",
                         "bytes", "sim_time_s", "staleness_mean", "staleness_max", "participation"};
  for (const char* n : names) out += fmt::format(",{0}_mean,{0}_std,{0}_min,{0}_max", n);
  out += "\n";
  for (const dc::SummaryPoint& p : r.summary) {
    out += std::to_string(p.iter);
    for (const dc::Stat* s : {&p.loss, &p.grad_norm, &p.grad_norm_pi, &p.consensus, &p.accuracy, &p.bytes, &p.sim_time,
                              &p.staleness_mean, &p.staleness_max, &p.participation}) {
      for (double v : {s->mean, s->std, s->min, s->max}) out += std::isnan(v) ? "," : fmt::format(",{:.17g}", v);
    }
    out += "\n";
  }
  return out;
}

Json point_json(const dc::SummaryPoint& p) {
  return Json{{"iter", p.iter},
              {"loss", stat_json(p.loss)},
              {"grad_norm", stat_json(p.grad_norm)},
              {"grad_norm_pi", stat_json(p.grad_norm_pi)},
              {"consensus", stat_json(p.consensus)},
              {"test_accuracy", stat_json(p.accuracy)},
              {"bytes", stat_json(p.bytes)},
              {"sim_time_s", stat_json(p.sim_time)},
              {"staleness_mean", stat_json(p.staleness_mean)},
              {"staleness_max", stat_json(p.staleness_max)},
              {"participation", stat_json(p.participation)}};
}

Json run_config_json(const GossipRunArgs& a, const dc::RunResult& r) {
  return Json{{"algo", r.algorithm},
              {"topology", r.graph},
              {"problem", r.problem},
              {"nodes", r.nodes},
              {"dim", r.dim},
              {"mixing", a.mixing},
              {"iters", a.iters},
              {"lr", a.lr},
              {"batch", a.batch},
              {"seeds", a.seeds},
              {"seed", a.seed},
              {"data_seed", a.data_seed},
              {"partition", a.partition},
              {"rounds", a.params.rounds},
              {"local_steps", a.params.local_steps},
              {"client_fraction", a.params.client_fraction},
              {"compress", a.compress},
              {"effective_lr", a.effective_lr},
              {"time", a.time_mode},
              {"heterogeneity", a.heterogeneity},
              {"device_trace", a.device_trace},
              {"churn", a.churn}};
}

dc::ProgressFn progress_for(ProgressBar& bar) {
  return [&bar](int64_t done, int64_t total) { bar.update(static_cast<uint64_t>(done * 1000 / std::max<int64_t>(total, 1))); };
}

// --runtime: nullptr in-process; "mpi" initializes MPI here (finalized when the returned runtime is destroyed).
std::unique_ptr<dc::MpiRuntime> start_runtime(const std::string& name) {
  const std::string r = to_lower(trim(name));
  if (r == "in-process") return nullptr;
  if (r == "mpi") return dc::MpiRuntime::start(kCl.with_key("--runtime"));
  throw InputError(kCl.with_key("--runtime"), fmt::format("unknown runtime '{}'", r), suggest(r, {"in-process", "mpi"}));
}

void run_body(Context& ctx, const GossipRunArgs& a, dc::MpiRuntime* mpi) {
  const bool root = mpi == nullptr || mpi->is_root();
  const dc::AlgorithmInfo& info = dc::find_algorithm(a.algo, kCl.with_key("--algo"));
  const dc::GraphSequence seq = run_graph(a, info);
  const dc::RunSpec spec = run_spec(a);
  DataCache cache;
  const std::unique_ptr<dc::Problem> problem = make_problem(a, seq.num_nodes(), cache);
  ProgressBar bar("gossip run", 1000, ProgressOptions{ctx.global.quiet || !root});
  const dc::RunResult r = dc::run(*problem, seq, spec, progress_for(bar), kCl, mpi);
  bar.finish();
  if (!root) return;  // MPI ranks other than 0 hold no metrics
  if (!a.csv.empty()) io::write_file_atomic(a.csv, run_csv(r));
  if (ctx.global.json) {
    Json j = envelope("gossip run");
    j["config"] = run_config_json(a, r);
    Json pts = Json::array();
    for (const dc::SummaryPoint& p : r.summary) pts.push_back(point_json(p));
    j["points"] = pts;
    j["final"] = point_json(r.summary.back());
    ctx.out << io::dump_json(j);
    return;
  }
  const bool spread = a.seeds > 1;
  // Staleness (asynchronous gossip) and participation (churn) columns only when they have values.
  const bool stale = !std::isnan(r.summary.back().staleness_mean.mean);
  const bool part = !std::isnan(r.summary.back().participation.mean);
  std::vector<std::string> cols = {"iter", "loss", "||grad f(xbar)||", "||grad f(x_pi)||", "consensus", "test acc",
                                   "MB sent", "sim s"};
  if (stale) cols.insert(cols.end(), {"staleness", "max stale"});
  if (part) cols.emplace_back("present");
  Table t(cols,
          fmt::format("{} on {} ({} nodes, d = {}), {} over {}; mean{} over {} seed{}", r.algorithm, r.problem, r.nodes,
                      r.dim, a.batch > 0 ? fmt::format("batch {}", a.batch) : "exact gradients", r.graph,
                      spread ? " ± std" : "", a.seeds, a.seeds == 1 ? "" : "s"));
  // At most ~20 rows: evenly spaced points and the last one.
  const size_t total = r.summary.size();
  const size_t stride = std::max<size_t>(1, (total + 19) / 20);
  for (size_t k = 0; k < total; ++k) {
    if (k % stride != 0 && k + 1 != total) continue;
    const dc::SummaryPoint& p = r.summary[k];
    std::vector<std::string> row = {std::to_string(p.iter),         fmt_stat(p.loss, spread),
                                    fmt_stat(p.grad_norm, spread),  fmt_stat(p.grad_norm_pi, spread),
                                    fmt_stat(p.consensus, false),   fmt_stat(p.accuracy, false),
                                    fmt::format("{:.4g}", p.bytes.mean / 1e6), fmt_stat(p.sim_time, false)};
    if (stale) row.insert(row.end(), {fmt_stat(p.staleness_mean, false), fmt_stat(p.staleness_max, false)});
    if (part) row.push_back(fmt_stat(p.participation, false));
    t.add_row(row);
  }
  ctx.out << t.render();
}

void run_run(Context& ctx, const GossipRunArgs& a) {
  const std::unique_ptr<dc::MpiRuntime> mpi = start_runtime(a.runtime);
  if (mpi == nullptr || mpi->is_root()) {
    run_body(ctx, a, mpi.get());
    return;
  }
  // The other ranks compute their nodes silently. Bad input is met by every rank alike, at the same point
  // (the same command line and files), before any exchange: rank 0 alone reports it and exits with 2, which
  // mpirun returns. The others exit 0: a non-zero exit makes mpirun kill the job, rank 0's report with it.
  try {
    run_body(ctx, a, mpi.get());
  } catch (const InputError&) {
    ctx.exit_code = 0;
  }
}

std::vector<int64_t> parse_int_list(const std::string& text, const Where& where) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string tok(trim(std::string_view(text).substr(pos, comma - pos)));
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size() || v < 1 || v > dc::kMaxDenseNodes) {
      throw InputError(where, fmt::format("expected a comma-separated list of node counts in 1..{}, got '{}'",
                                          dc::kMaxDenseNodes, tok));
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    out.emplace_back(trim(std::string_view(text).substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return out;
}

void run_sweep(Context& ctx, const GossipRunArgs& a) {
  const std::vector<int64_t> nodes = parse_int_list(a.node_list, kCl.with_key("--nodes"));
  const std::vector<std::string> families = split_list(a.topology_family);
  const std::vector<std::string> algos = split_list(a.algo);
  for (const std::string& al : algos) dc::find_algorithm(al, kCl.with_key("--algo"));
  for (const std::string& f : families) {
    if (f.find(':') != std::string::npos || f.empty()) {
      throw InputError(kCl.with_key("--topology"),
                       fmt::format("expected topology families without a node count (e.g. exponential,ring), got '{}'", f));
    }
  }
  DataCache cache;
  const size_t cells = nodes.size() * families.size() * algos.size();
  ProgressBar bar("gossip sweep", cells * 1000, ProgressOptions{ctx.global.quiet});
  Table t({"nodes", "topology", "algo", "final loss", "||grad f(xbar)||", "||grad f(x_pi)||", "consensus", "test acc",
           "MB sent", "sim s"},
          fmt::format("{}; final values after {} iterations, mean ± std over {} seed{}", a.problem, a.iters, a.seeds,
                      a.seeds == 1 ? "" : "s"));
  Json rows = Json::array();
  std::string csv = "nodes,topology,algo,loss_mean,loss_std,grad_norm_mean,grad_norm_std,grad_norm_min,grad_norm_max,"
                    "grad_norm_pi_mean,consensus_mean,test_accuracy_mean,bytes_mean,sim_time_s_mean,staleness_mean,"
                    "participation_mean\n";
  size_t cell = 0;
  for (int64_t n : nodes) {
    for (const std::string& fam : families) {
      // One node: a single isolated node (no communication).
      const dc::GraphSequence seq = n == 1 ? dc::GraphSequence(dc::Graph(1, {}, "single"))
                                           : dc::parse_topology(fmt::format("{}:{}", fam, n), kCl.with_key("--topology"));
      const std::unique_ptr<dc::Problem> problem = make_problem(a, seq.num_nodes(), cache);
      for (const std::string& al : algos) {
        GossipRunArgs one = a;
        one.algo = al;
        dc::RunSpec spec = run_spec(one);
        spec.eval_every = a.eval_every > 0 ? a.eval_every : std::max<int64_t>(1, a.iters);
        const size_t base = cell * 1000;
        const dc::RunResult r = dc::run(*problem, seq, spec, [&](int64_t done, int64_t total) {
          bar.update(base + static_cast<uint64_t>(done * 1000 / std::max<int64_t>(total, 1)));
        }, kCl);
        ++cell;
        const dc::SummaryPoint& f = r.summary.back();
        t.add_row({std::to_string(n), fam, r.algorithm, fmt_stat(f.loss, a.seeds > 1), fmt_stat(f.grad_norm, a.seeds > 1),
                   fmt_stat(f.grad_norm_pi, a.seeds > 1), fmt_stat(f.consensus, false), fmt_stat(f.accuracy, false),
                   fmt::format("{:.4g}", f.bytes.mean / 1e6), fmt_stat(f.sim_time, false)});
        Json row = point_json(f);
        row["nodes"] = n;
        row["topology"] = fam;
        row["algo"] = r.algorithm;
        rows.push_back(row);
        const auto num = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.17g}", v); };
        csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", n, fam, r.algorithm, num(f.loss.mean),
                           num(f.loss.std), num(f.grad_norm.mean), num(f.grad_norm.std), num(f.grad_norm.min),
                           num(f.grad_norm.max), num(f.grad_norm_pi.mean), num(f.consensus.mean), num(f.accuracy.mean),
                           num(f.bytes.mean), num(f.sim_time.mean), num(f.staleness_mean.mean),
                           num(f.participation.mean));
      }
    }
  }
  bar.finish();
  if (!a.csv.empty()) io::write_file_atomic(a.csv, csv);
  if (ctx.global.json) {
    Json j = envelope("gossip sweep");
    j["config"] = Json{{"problem", a.problem}, {"nodes", nodes},     {"topology", families}, {"algo", algos},
                       {"iters", a.iters},     {"lr", a.lr},         {"batch", a.batch},     {"seeds", a.seeds},
                       {"seed", a.seed},       {"data_seed", a.data_seed}};
    j["results"] = rows;
    ctx.out << io::dump_json(j);
    return;
  }
  ctx.out << t.render();
}

struct DevicesArgs {
  int64_t devices = 100;
  uint64_t seed = 1;
  std::string churn;
  std::string horizon = "1 h";
  std::string out;
};

void run_devices(Context& ctx, const DevicesArgs& a) {
  dc::SyntheticDeviceSpec s;
  s.devices = a.devices;
  s.seed = a.seed;
  if (!a.churn.empty()) s.churn = dc::parse_churn(a.churn, kCl.with_key("--churn"));
  s.horizon_s = parse_time_positive(a.horizon, kCl.with_key("--horizon")).to_seconds();
  const std::string text = dc::format_device_trace(dc::synthetic_device_trace(s, kCl));
  if (a.out.empty()) {
    ctx.out << text;
  } else {
    io::write_file_atomic(a.out, text);
    if (!ctx.global.quiet) ctx.out << fmt::format("wrote {} devices to {}\n", a.devices, a.out);
  }
}

void run_list(Context& ctx) {
  if (ctx.global.json) {
    Json j = envelope("gossip list");
    Json algos = Json::array();
    for (const dc::AlgorithmInfo& i : dc::algorithms()) {
      algos.push_back(Json{{"name", i.name},
                           {"description", i.description},
                           {"citation", i.citation},
                           {"needs", std::string(dc::need_name(i.need))},
                           {"federated", i.federated}});
    }
    j["algorithms"] = algos;
    j["problems"] = problem_names();
    ctx.out << io::dump_json(j);
    return;
  }
  Table t({"algorithm", "needs", "description", "citation"}, "decentralized and federated algorithms");
  for (const dc::AlgorithmInfo& i : dc::algorithms()) {
    t.add_row({i.name, i.federated ? "server + clients" : std::string(dc::need_name(i.need)), i.description, i.citation});
  }
  ctx.out << t.render();
  ctx.out << "problems: ";
  for (const std::string& p : problem_names()) ctx.out << p << (p == problem_names().back() ? "\n" : ", ");
}

// Options shared by run and sweep.
void add_run_options(CLI::App* cmd, GossipRunArgs& a) {
  cmd->add_option("--problem", a.problem,
                  "logistic-nonconvex, least-squares, softmax:fashion-mnist, mlp:fashion-mnist, softmax:digits, mlp:digits")
      ->capture_default_str();
  cmd->add_option("--mixing", a.mixing, "auto (the algorithm's default), or a rule as in `gossip topo`")->capture_default_str();
  cmd->add_option("--iters", a.iters, "iterations (server updates / client arrivals for federated algorithms)")->capture_default_str();
  cmd->add_option("--lr", a.lr, "step size a (client learning rate for federated algorithms)")->capture_default_str();
  cmd->add_option("--batch", a.batch, "minibatch per node and step; 0: exact local gradients")->capture_default_str();
  cmd->add_option("--seeds", a.seeds, "independent runs averaged (seeds SEED, SEED+1, ...)")->capture_default_str();
  cmd->add_option("--seed", a.seed, "first seed")->capture_default_str();
  cmd->add_option("--eval-every", a.eval_every, "iterations between metric evaluations on the full data (0: iters/100)");
  cmd->add_option("--csv", a.csv, "also write the metrics as CSV to FILE (atomically)")->type_name("FILE");
  cmd->add_option("--dim", a.dim, "synthetic problems: dimension d")->capture_default_str();
  cmd->add_option("--samples", a.samples, "synthetic problems: samples in total (split contiguously)")->capture_default_str();
  cmd->add_option("--rho", a.rho, "logistic-nonconvex: regularizer weight")->capture_default_str();
  cmd->add_option("--data-seed", a.data_seed, "seed of the synthetic data, the partition and MLP initial weights")->capture_default_str();
  cmd->add_option("--partition", a.partition, "data sets: iid, contiguous, by-label, dirichlet:ALPHA")->capture_default_str();
  cmd->add_option("--hidden", a.hidden, "mlp: hidden units")->capture_default_str();
  cmd->add_option("--weight-decay", a.weight_decay, "softmax/mlp: L2 weight decay lambda")->capture_default_str();
  cmd->add_option("--data", a.data, "data set location (the fashion-mnist folder or the digits CSV)")->type_name("PATH");
  cmd->add_flag("--effective-lr", a.effective_lr,
                "--lr is the effective step: divided by n for algorithms tracking gradient sums (pull-diag-gt)");
  cmd->add_option("--compute-per-sample", a.compute_per_sample,
                  "gossip algorithms' simulated time: compute per sample per node, e.g. '20 us'")->type_name("TIME");
  cmd->add_option("--node-speed-cv", a.node_speed_cv, "CV of the per-node lognormal slowdown (0: identical nodes)");
  cmd->add_option("--link-latency", a.link_latency, "per-message latency, e.g. '50 us'")->type_name("TIME");
  cmd->add_option("--link-bandwidth", a.link_bandwidth, "per-link bandwidth, e.g. '10 Gb/s'")->type_name("RATE");
  cmd->add_option("--heterogeneity", a.heterogeneity,
                  "per-node compute and per-link/node network: KEY=DIST,... with keys compute (per sample), latency, "
                  "bandwidth (per link), uplink, downlink (per node) and DIST V | fixed:V | uniform:LO:HI | "
                  "lognormal:MEAN:CV, e.g. compute=lognormal:20us:1,latency=50us")
      ->type_name("SPEC");
  cmd->add_option("--device-trace", a.device_trace,
                  "FedScale-style device trace CSV (device_id, compute_ms_per_sample, bandwidth_kbps or up/down_kbps, "
                  "availability); node i takes row i mod rows")
      ->type_name("FILE");
  cmd->add_option("--churn", a.churn, "availability churn FRACTION[:MEAN_OFF]: unavailable fraction, mean unavailable "
                                      "period (default 1 s), e.g. 0.2:2s")
      ->type_name("SPEC");
  cmd->add_option("--time", a.time_mode, "gossip time: sync (slowest in-neighbour gates) or async (event-driven, "
                                         "push-sum and dsgd)")
      ->capture_default_str();
  cmd->add_option("--rounds", a.params.rounds, "mg-pull-diag-gt: gossip rounds R per step")->capture_default_str();
  cmd->add_option("--local-steps", a.params.local_steps, "federated: local SGD steps per client job")->capture_default_str();
  cmd->add_option("--client-fraction", a.params.client_fraction, "fedavg/scaffold: clients sampled per round")->capture_default_str();
  cmd->add_option("--server-lr", a.params.server_lr, "fedavg/scaffold/fedbuff: server step")->capture_default_str();
  cmd->add_option("--async-alpha", a.params.async_alpha, "fedasync: mixing weight alpha")->capture_default_str();
  cmd->add_option("--staleness-power", a.params.staleness_power, "fedasync/fedbuff: weight (1 + staleness)^-p")->capture_default_str();
  cmd->add_option("--buffer", a.params.buffer, "fedbuff: client updates per server step")->capture_default_str();
  cmd->add_option("--speed-cv", a.params.speed_cv, "fedasync/fedbuff: coefficient of variation of client speeds")->capture_default_str();
  cmd->add_option("--gamma", a.params.gamma, "choco-sgd: consensus step")->capture_default_str();
  cmd->add_option("--compress", a.compress, "none, top-k:RATIO, rand-k:RATIO, qsgd:LEVELS (choco-sgd; federated uploads)")
      ->capture_default_str();
}

}  // namespace

void register_gossip_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* gossip = app.add_subcommand(
      "gossip", "decentralized and federated optimization: graphs, mixing matrices, algorithms on real problems");
  gossip->require_subcommand(1);
  auto a = std::make_shared<GossipTopoArgs>();
  CLI::App* topo = gossip->add_subcommand("topo", "a graph's connectivity and its mixing matrix's metrics");
  topo->add_option("--topology", a->topology,
                   "graph spec: ring:N, directed-ring:N[:chords=A-B,...], torus:RxC, grid:RxC, exponential:N, "
                   "one-peer-exponential:N, hypercube:N, erdos-renyi:N:P[:seed=S], "
                   "random-strongly-connected:N:P[:seed=S], star:N, complete:N, file:PATH")
      ->required()
      ->type_name("SPEC");
  topo->add_option("--mixing", a->mixing,
                   "auto (metropolis if undirected, else pull), metropolis, uniform, pull, push, or lazy-<rule>")
      ->capture_default_str();
  actions.emplace_back(topo, [a](Context& ctx) { run_topo(ctx, *a); });

  auto r = std::make_shared<GossipRunArgs>();
  CLI::App* run = gossip->add_subcommand("run", "run a decentralized or federated algorithm; metrics over seeds");
  run->add_option("--algo", r->algo, "algorithm (see `orrery gossip list`)")->capture_default_str();
  run->add_option("--topology", r->topology, "graph spec as in `gossip topo`, e.g. exponential:16")->type_name("SPEC");
  run->add_option("--nodes", r->nodes, "federated algorithms: number of clients when no --topology is given");
  add_run_options(run, *r);
  run->add_option("--runtime", r->runtime,
                  "in-process, or mpi: one block of nodes per rank under `mpirun -np P orrery gossip run --runtime mpi "
                  "...`, same iterates (docs/decentral_algorithms.md)")
      ->capture_default_str();
  actions.emplace_back(run, [r](Context& ctx) { run_run(ctx, *r); });

  auto s = std::make_shared<GossipRunArgs>();
  CLI::App* sweep = gossip->add_subcommand("sweep", "final metrics over a grid of nodes x topology x algorithm");
  sweep->add_option("--algo", s->algo, "comma-separated algorithms")->capture_default_str();
  sweep->add_option("--topology", s->topology_family, "comma-separated families taking a node count (exponential,ring,...)")
      ->capture_default_str();
  sweep->add_option("--nodes", s->node_list, "comma-separated node counts (1 = a single node)")->capture_default_str();
  add_run_options(sweep, *s);
  actions.emplace_back(sweep, [s](Context& ctx) { run_sweep(ctx, *s); });

  auto dv = std::make_shared<DevicesArgs>();
  CLI::App* devices = gossip->add_subcommand("devices", "write a synthetic FedScale-style device trace (CSV)");
  devices->add_option("--devices", dv->devices, "number of devices")->capture_default_str();
  devices->add_option("--seed", dv->seed, "seed of the draws")->capture_default_str();
  devices->add_option("--churn", dv->churn, "availability FRACTION[:MEAN_OFF] (default: always available)")->type_name("SPEC");
  devices->add_option("--horizon", dv->horizon, "length of the availability trace; it repeats with this period")
      ->capture_default_str();
  devices->add_option("--out", dv->out, "write the trace to FILE (atomically) instead of stdout")->type_name("FILE");
  actions.emplace_back(devices, [dv](Context& ctx) { run_devices(ctx, *dv); });

  CLI::App* list = gossip->add_subcommand("list", "the algorithm registry: names, mixing needs, citations");
  actions.emplace_back(list, [](Context& ctx) { run_list(ctx); });
}

}  // namespace orrery::cli
