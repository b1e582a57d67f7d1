#include "decentral/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "decentral/async_gossip.h"
#include "decentral/device_trace.h"

namespace orrery::decentral {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string stochastic_kind(const Eigen::MatrixXd& w) {
  const bool r = is_row_stochastic(w, 1e-9);
  const bool c = is_column_stochastic(w, 1e-9);
  return r && c ? "doubly stochastic" : r ? "row-stochastic only" : c ? "column-stochastic only" : "not stochastic";
}

Eigen::MatrixXd checked(const Graph& g, const MixingSpec& spec, const AlgorithmInfo& info, bool row, bool column,
                        const Where& where) {
  Eigen::MatrixXd w = mixing_matrix(g, spec, where);
  const bool ok = (!row || is_row_stochastic(w, 1e-9)) && (!column || is_column_stochastic(w, 1e-9));
  if (!ok) {
    const char* want = row && column ? "doubly stochastic" : row ? "row-stochastic" : "column-stochastic";
    throw InputError(where, fmt::format("algorithm '{}' needs a {} mixing matrix, but '{}' on '{}' is {}", info.name,
                                        want, mixing_name(spec), g.name(), stochastic_kind(w)),
                     row && column ? "use 'metropolis' (undirected graphs) or 'uniform' (balanced graphs)"
                     : row         ? "use 'pull'"
                                   : "use 'push'");
  }
  return w;
}

MixingSpec doubly_default(const Graph& g, const AlgorithmInfo& info, const Where& where) {
  if (g.is_symmetric()) return MixingSpec{MixingRule::kMetropolis, false};
  if (g.is_balanced()) return MixingSpec{MixingRule::kUniform, false};
  throw InputError(where, fmt::format("algorithm '{}' needs a doubly stochastic mixing matrix, but '{}' is directed and "
                                      "not balanced (in-degree != out-degree somewhere)",
                                      info.name, g.name()),
                   "use push-sum, push-pull or pull-diag-gt on directed graphs");
}

void check_spec(const RunSpec& s, const Where& where) {
  if (s.iters < 0 || s.iters > 100'000'000) throw InputError(where.with_key("iters"), fmt::format("expected 0..1e8, got {}", s.iters));
  if (s.seeds < 1 || s.seeds > 100'000) throw InputError(where.with_key("seeds"), fmt::format("expected 1..100000, got {}", s.seeds));
  if (!(s.params.lr > 0) || !std::isfinite(s.params.lr)) throw InputError(where.with_key("lr"), "expected a finite step size > 0");
  if (s.eval_every < 0) throw InputError(where.with_key("eval-every"), "expected >= 0");
  if (s.batch < 0 || s.batch > 10'000'000) {
    throw InputError(where.with_key("batch"), fmt::format("expected 0 (exact local gradients) to 1e7 samples, got {}", s.batch));
  }
  if (s.params.rounds < 1 || s.params.rounds > 10'000) throw InputError(where.with_key("rounds"), "expected 1..10000");
  if (s.params.local_steps < 1 || s.params.local_steps > 1'000'000) throw InputError(where.with_key("local-steps"), "expected >= 1");
  if (!(s.params.client_fraction > 0) || s.params.client_fraction > 1) {
    throw InputError(where.with_key("client-fraction"), "expected a fraction in (0, 1]");
  }
  if (s.params.buffer < 1) throw InputError(where.with_key("buffer"), "expected >= 1");
  if (!(s.params.gamma > 0) || !std::isfinite(s.params.gamma)) throw InputError(where.with_key("gamma"), "expected a finite value > 0");
  if (!(s.params.speed_cv >= 0) || !std::isfinite(s.params.speed_cv)) throw InputError(where.with_key("speed-cv"), "expected >= 0");
}

// A problem whose absent nodes (churn) have zero gradients: they do not compute in that step.
class MaskedProblem final : public Problem {
 public:
  MaskedProblem(const Problem& p, const std::vector<uint8_t>& present) : p_(p), present_(present) {}
  std::string name() const override { return p_.name(); }
  int64_t dim() const override { return p_.dim(); }
  NodeIndex num_nodes() const override { return p_.num_nodes(); }
  int64_t local_size(NodeIndex i) const override { return p_.local_size(i); }
  double local_gradient(NodeIndex i, const double* x, double* g, const Batch& batch, RandomStream* noise,
                        Scratch& s) const override {
    if (present_[static_cast<size_t>(i)]) return p_.local_gradient(i, x, g, batch, noise, s);
    if (g != nullptr) std::fill_n(g, p_.dim(), 0.0);
    return 0.0;
  }
  void node_gradients(const NodeMatrix& x, NodeMatrix& g, NodeIndex begin, NodeIndex end, const Batch* batches,
                      RandomStream* noise, Scratch& s) const override {
    p_.node_gradients(x, g, begin, end, batches, noise, s);
    for (NodeIndex i = begin; i < end; ++i) {
      if (!present_[static_cast<size_t>(i)]) g.row(i).setZero();
    }
  }
  NodeMatrix initial_point(uint64_t seed) const override { return p_.initial_point(seed); }
  std::optional<double> test_accuracy(const double* x, Scratch& s) const override { return p_.test_accuracy(x, s); }

 private:
  const Problem& p_;
  const std::vector<uint8_t>& present_;
};

// Step k's mixing matrices rebuilt on the subgraph of present nodes (absent nodes isolated: row and column
// e_i), with the algorithm's rule, in every slot of `out` (so any index the algorithm asks for finds them).
void restrict_schedule(const Graph& g, const std::vector<uint8_t>& present, const AlgorithmInfo& info,
                       const std::optional<MixingSpec>& override_spec, MixingSchedule& out, const Where& where) {
  std::vector<Edge> edges;
  for (const Edge& e : g.edges()) {
    if (present[static_cast<size_t>(e.from)] && present[static_cast<size_t>(e.to)]) edges.push_back(e);
  }
  const Graph sub(g.num_nodes(), std::move(edges), g.name() + " (present nodes)");
  const auto fill = [](std::vector<SparseMixing>& slots, const Eigen::MatrixXd& w) {
    slots.assign(2, SparseMixing(w));
  };
  const auto make = [&](MixingSpec rule, bool row, bool column) {
    Eigen::MatrixXd w = mixing_matrix(sub, rule, where);
    if ((row && !is_row_stochastic(w, 1e-9)) || (column && !is_column_stochastic(w, 1e-9))) {
      throw InputError(where, fmt::format("with churn, mixing '{}' on the present nodes of '{}' is not {} stochastic as "
                                          "'{}' needs",
                                          mixing_name(rule), g.name(), row && column ? "doubly" : row ? "row" : "column",
                                          info.name),
                       "use metropolis (undirected graphs), pull or push");
    }
    return w;
  };
  switch (info.need) {
    case MatrixNeed::kDoubly: fill(out.w, make(override_spec.value_or(MixingSpec{MixingRule::kMetropolis, false}), true, true)); break;
    case MatrixNeed::kRow: fill(out.a, make(override_spec.value_or(MixingSpec{MixingRule::kPull, false}), true, false)); break;
    case MatrixNeed::kColumn: fill(out.b, make(override_spec.value_or(MixingSpec{MixingRule::kPush, false}), false, true)); break;
    case MatrixNeed::kRowAndColumn:
      fill(out.a, make(override_spec.value_or(MixingSpec{MixingRule::kPull, false}), true, false));
      fill(out.b, make(override_spec.value_or(MixingSpec{MixingRule::kPush, false}), false, true));
      break;
    case MatrixNeed::kNone: break;
  }
}

// Refuses time models the run cannot honour (see runner.h, Checks).
void check_time(const AlgorithmInfo& info, const GraphSequence& seq, const RunSpec& spec, const HeterogeneitySpec& h,
                bool distributed, const Where& where) {
  const bool churn = h.churn.enabled() || (h.trace && h.trace->has_availability());
  const Where wt = where.with_key("time");
  if (spec.time.mode == TimeMode::kAsync) {
    if (info.federated) {
      throw InputError(wt, fmt::format("'{}' is federated and keeps its own client clock; --time async is for gossip "
                                       "algorithms",
                                       info.name),
                       "drop --time async (fedasync and fedbuff are asynchronous already)");
    }
    async_rule_for(info.name, where.with_key("algo"));
    if (!h.compute && !h.trace) {
      throw InputError(wt, "asynchronous time needs a compute time per sample",
                       "add --heterogeneity compute=20us (or --compute-per-sample, or --device-trace)");
    }
    if (info.name == "dsgd" && !seq.is_static()) {
      throw InputError(wt, fmt::format("asynchronous dsgd needs a static graph; '{}' is time-varying", seq.name()),
                       "use push-sum on time-varying graphs");
    }
  }
  // Asynchronous gossip is one event queue over all nodes (async_gossip.h), which the MPI runtime's
  // synchronous rounds do not split; churn is fine (every process draws the same present nodes).
  if (distributed && spec.time.mode == TimeMode::kAsync) {
    throw InputError(where.with_key("runtime"), "asynchronous gossip time runs in-process only",
                     "run it in-process (--runtime in-process)");
  }
  if (churn && !info.federated && spec.time.mode == TimeMode::kSync && info.need == MatrixNeed::kDoubly) {
    for (const Graph& g : seq.graphs()) {
      if (!g.is_symmetric()) {
        throw InputError(where.with_key("churn"),
                         fmt::format("'{}' needs a doubly stochastic W, but the present nodes of the directed graph '{}' "
                                     "do not form a balanced graph",
                                     info.name, g.name()),
                         "use an undirected topology, or push-sum / push-pull on directed graphs");
      }
    }
  }
}

}  // namespace

MixingSchedule build_schedule(const GraphSequence& seq, const AlgorithmInfo& info,
                              const std::optional<MixingSpec>& override_spec, const Where& where) {
  MixingSchedule m;
  const NodeIndex n = seq.num_nodes();
  m.pi = Eigen::VectorXd::Constant(n, 1.0 / static_cast<double>(std::max<NodeIndex>(n, 1)));
  if (info.federated || info.need == MatrixNeed::kNone) return m;
  const Graph u = seq.union_graph();
  if (!is_strongly_connected(u)) {
    throw InputError(where.with_key("topology"),
                     fmt::format("'{}' is not strongly connected ({} strongly connected components); algorithm '{}' "
                                 "needs every node to reach every other",
                                 seq.name(), strongly_connected_components(u).count, info.name),
                     "choose a connected topology (gossip topo shows the components)");
  }
  if (n > kMaxDenseNodes) {
    throw InputError(where.with_key("topology"), fmt::format("at most {} nodes, got {}", kMaxDenseNodes, n));
  }
  const Where wm = where.with_key("mixing");
  for (const Graph& g : seq.graphs()) {
    switch (info.need) {
      case MatrixNeed::kDoubly:
        m.w.emplace_back(checked(g, override_spec ? *override_spec : doubly_default(g, info, wm), info, true, true, wm));
        break;
      case MatrixNeed::kRow:
        m.a.emplace_back(checked(g, override_spec.value_or(MixingSpec{MixingRule::kPull, false}), info, true, false, wm));
        break;
      case MatrixNeed::kColumn:
        m.b.emplace_back(checked(g, override_spec.value_or(MixingSpec{MixingRule::kPush, false}), info, false, true, wm));
        break;
      case MatrixNeed::kRowAndColumn:
        m.a.emplace_back(checked(g, override_spec.value_or(MixingSpec{MixingRule::kPull, false}), info, true, false, wm));
        m.b.emplace_back(checked(g, override_spec.value_or(MixingSpec{MixingRule::kPush, false}), info, false, true, wm));
        break;
      case MatrixNeed::kNone: break;
    }
  }
  if (!m.a.empty()) {
    Eigen::MatrixXd prod = m.a.front().dense();
    for (size_t t = 1; t < m.a.size(); ++t) prod = m.a[t].dense() * prod;
    m.pi = perron_left(prod, wm);
  }
  return m;
}

HeterogeneitySpec TimeModel::resolved() const {
  HeterogeneitySpec h = hetero;
  if (!h.compute && compute_per_sample > Time::zero()) {
    const double c = compute_per_sample.to_seconds();
    h.compute = speed_cv > 0 ? Dist::lognormal(c, speed_cv) : Dist::fixed(c);
  }
  if (!h.latency && latency > Time::zero()) h.latency = Dist::fixed(latency.to_seconds());
  if (!h.bandwidth && bandwidth.bytes_per_second() > 0) h.bandwidth = Dist::fixed(bandwidth.bytes_per_second());
  return h;
}

Stat summarize(const std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  double sum = 0;
  s.min = s.max = v.front();
  for (double x : v) {
    sum += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean = sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  // NaN metrics (no test set, no simulated time) stay NaN.
  if (std::isnan(sum)) s.mean = s.std = s.min = s.max = kNaN;
  return s;
}

RunResult run(const Problem& problem, const GraphSequence& seq, const RunSpec& spec, const ProgressFn& progress,
              const Where& where, GossipExchange* exchange) {
  const auto start = std::chrono::steady_clock::now();
  check_spec(spec, where);
  const AlgorithmInfo& info = find_algorithm(spec.algorithm, where.with_key("algo"));
  const NodeIndex n = problem.num_nodes();
  if (seq.num_nodes() != n) {
    throw InputError(where.with_key("topology"),
                     fmt::format("inconsistent node counts: the topology '{}' has {} nodes, the problem '{}' {}",
                                 seq.name(), seq.num_nodes(), problem.name(), n));
  }
  const HeterogeneitySpec hetero = spec.time.resolved();
  check_time(info, seq, spec, hetero, exchange != nullptr, where);
  const MixingSchedule mix = build_schedule(seq, info, spec.mixing, where);
  if (exchange != nullptr) exchange->setup(n, mix, where.with_key("runtime"));
  AlgoParams params = spec.params;
  if (spec.effective_lr && info.tracks_sum) params.lr /= static_cast<double>(n);
  // A Perron vector uniform to within 1e-9 relative (e.g. a pull matrix on a regular digraph, which is
  // doubly stochastic; the power iteration leaves ~1e-15 noise) is taken as uniform: x_pi then equals xbar
  // to ~1e-9 of the node spread, and the second full-data evaluation per point is skipped.
  const double uniform = 1.0 / static_cast<double>(std::max<NodeIndex>(n, 1));
  const bool pi_uniform = ((mix.pi.array() - uniform).abs() <= 1e-9 * uniform).all();
  const int64_t every = spec.eval_every > 0 ? spec.eval_every : std::max<int64_t>(1, spec.iters / 100);
  const auto d = static_cast<Eigen::Index>(problem.dim());

  RunResult result;
  result.algorithm = info.name;
  result.problem = problem.name();
  result.graph = seq.name();
  result.nodes = n;
  result.dim = problem.dim();
  Scratch eval_scratch;
  Eigen::RowVectorXd xbar(d), xpi(d);
  Eigen::VectorXd grad(d);
  NodeMatrix gathered;  // the root's copy of every process's rows (MPI runtime)
  const int64_t total = spec.seeds * spec.iters;
  for (int64_t r = 0; r < spec.seeds; ++r) {
    const uint64_t seed = spec.seed + static_cast<uint64_t>(r);
    // Simulated time (runner.h, TimeModel): the run's heterogeneity drawn for this seed.
    const bool timed = spec.time.enabled();
    std::optional<NetworkProfile> profile;
    if (timed) profile.emplace(hetero, seq, seed, where);
    const bool async = timed && spec.time.mode == TimeMode::kAsync && !info.federated;
    std::optional<SyncClock> clock;
    if (timed && !info.federated && !async) clock.emplace(*profile, seq, spec.batch);
    const bool churn = clock && profile->has_churn();
    std::vector<uint8_t> present(static_cast<size_t>(n), 1);
    const MaskedProblem masked(problem, present);
    GradientOracle oracle(churn ? static_cast<const Problem&>(masked) : problem, spec.batch, seed);
    MixingSchedule step_mix;
    if (churn) step_mix = mix;
    StepContext ctx{churn ? step_mix : mix, oracle, params, RandomStream::derive(seed, "decentral.algorithm")};
    ctx.exchange = exchange;
    if (info.federated && timed) {
      ctx.clients = &*profile;
      ctx.sim_time = 0;
    }
    std::unique_ptr<Algorithm> alg;
    AsyncGossip* async_alg = nullptr;
    if (async) {
      auto a = std::make_unique<AsyncGossip>(async_rule_for(info.name, where.with_key("algo")), seq, *profile);
      async_alg = a.get();
      alg = std::move(a);
    } else {
      alg = info.make();
    }
    alg->init(problem.initial_point(seed), ctx);
    std::vector<MetricPoint>& points = result.per_seed.emplace_back();
    if (clock) ctx.sim_time = 0;
    int64_t node_steps = 0, present_steps = 0;
    const auto evaluate = [&](int64_t k) {
      const auto eval_start = std::chrono::steady_clock::now();
      if (exchange != nullptr) {
        exchange->gather(alg->iterates(), gathered);
        if (!exchange->is_root()) return;
      }
      const NodeMatrix& x = exchange != nullptr ? gathered : alg->iterates();
      MetricPoint p;
      p.iter = k;
      xbar = x.colwise().mean();
      p.loss = full_objective(problem, xbar.data(), grad.data(), eval_scratch);
      p.grad_norm = grad.norm();
      if (pi_uniform) {
        p.grad_norm_pi = p.grad_norm;
      } else {
        xpi = mix.pi.transpose() * x;
        full_objective(problem, xpi.data(), grad.data(), eval_scratch);
        p.grad_norm_pi = grad.norm();
      }
      p.consensus = (x.rowwise() - xbar).squaredNorm() / static_cast<double>(n);
      p.accuracy = problem.test_accuracy(xbar.data(), eval_scratch).value_or(kNaN);
      p.bytes = static_cast<double>(ctx.bytes);
      p.sim_time = ctx.sim_time;
      p.staleness_mean = async_alg != nullptr ? async_alg->staleness().mean() : kNaN;
      p.staleness_max = async_alg != nullptr ? static_cast<double>(async_alg->staleness().max) : kNaN;
      p.participation = kNaN;
      if (churn) p.participation = node_steps > 0 ? static_cast<double>(present_steps) / static_cast<double>(node_steps) : 1.0;
      if (async_alg != nullptr && profile->has_churn()) {
        const double started = static_cast<double>(async_alg->local_updates() + async_alg->dropped_iterations());
        p.participation = started > 0 ? static_cast<double>(async_alg->local_updates()) / started : 1.0;
      }
      points.push_back(p);
      result.eval_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    };
    evaluate(0);
    for (int64_t k = 0; k < spec.iters; ++k) {
      const int64_t bytes_before = ctx.bytes;
      if (churn) {
        present = clock->present(k);
        restrict_schedule(seq.graph_at(k), present, info, spec.mixing, step_mix, where.with_key("mixing"));
        node_steps += n;
        for (uint8_t on : present) present_steps += on;
      }
      alg->step(k, ctx);
      if (spec.check_invariants) result.conservation_error_max = std::max(result.conservation_error_max, alg->conservation_error());
      if (clock) ctx.sim_time = clock->advance(k, ctx.bytes - bytes_before);
      if ((k + 1) % every == 0 || k + 1 == spec.iters) evaluate(k + 1);
      if (progress && (k & 63) == 0) progress(r * spec.iters + k, total);
    }
  }
  if (progress) progress(total, total);
  const size_t points = result.per_seed.front().size();  // 0 on the MPI runtime's other processes
  std::vector<double> v(static_cast<size_t>(spec.seeds));
  for (size_t k = 0; k < points; ++k) {
    SummaryPoint s;
    s.iter = result.per_seed.front()[k].iter;
    const auto stat = [&](double MetricPoint::*field) {
      for (size_t r = 0; r < v.size(); ++r) v[r] = result.per_seed[r][k].*field;
      return summarize(v);
    };
    s.loss = stat(&MetricPoint::loss);
    s.grad_norm = stat(&MetricPoint::grad_norm);
    s.grad_norm_pi = stat(&MetricPoint::grad_norm_pi);
    s.consensus = stat(&MetricPoint::consensus);
    s.accuracy = stat(&MetricPoint::accuracy);
    s.bytes = stat(&MetricPoint::bytes);
    s.sim_time = stat(&MetricPoint::sim_time);
    s.staleness_mean = stat(&MetricPoint::staleness_mean);
    s.staleness_max = stat(&MetricPoint::staleness_max);
    s.participation = stat(&MetricPoint::participation);
    result.summary.push_back(s);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace orrery::decentral
