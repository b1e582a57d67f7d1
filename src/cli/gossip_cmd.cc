// `orrery gossip topo`: a communication graph's structure and its mixing matrix's metrics (stochasticity,
// Perron vector, kappa, beta, spectral gap, consensus rate, MG-PULL-DIAG-GT rounds). Definitions in
// docs/decentral_graphs.md.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/output.h"
#include "decentral/graph.h"
#include "decentral/mixing.h"

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

}  // namespace

void register_gossip_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* gossip = app.add_subcommand("gossip", "decentralized optimization: graphs, mixing matrices");
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
}

}  // namespace orrery::cli
