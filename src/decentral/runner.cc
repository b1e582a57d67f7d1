#include "decentral/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

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
  if (s.params.rounds < 1 || s.params.rounds > 10'000) throw InputError(where.with_key("rounds"), "expected 1..10000");
  if (s.params.local_steps < 1 || s.params.local_steps > 1'000'000) throw InputError(where.with_key("local-steps"), "expected >= 1");
  if (!(s.params.client_fraction > 0) || s.params.client_fraction > 1) {
    throw InputError(where.with_key("client-fraction"), "expected a fraction in (0, 1]");
  }
  if (s.params.buffer < 1) throw InputError(where.with_key("buffer"), "expected >= 1");
  if (!(s.params.gamma > 0) || !std::isfinite(s.params.gamma)) throw InputError(where.with_key("gamma"), "expected a finite value > 0");
  if (!(s.params.speed_cv >= 0) || !std::isfinite(s.params.speed_cv)) throw InputError(where.with_key("speed-cv"), "expected >= 0");
}

// The synchronous clock of RunSpec::time (see runner.h).
class SyncClock {
 public:
  SyncClock(const TimeModel& m, const GraphSequence& seq, int64_t batch, uint64_t seed, bool gossip)
      : m_(m), seq_(seq), on_(gossip && m.enabled()) {
    if (!on_) return;
    const auto n = static_cast<size_t>(seq.num_nodes());
    compute_.resize(n);
    t_.assign(n, 0.0);
    next_.resize(n);
    RandomStream rng = RandomStream::derive(seed, "decentral.hetero");
    const LogNormal speed = LogNormal::from_mean_cv(1.0, m.speed_cv, Where{"", 0, "speed-cv"});
    const double per_step = static_cast<double>(std::max<int64_t>(batch, 1)) * m.compute_per_sample.to_seconds();
    for (double& c : compute_) c = per_step * (m.speed_cv > 0 ? speed.sample(rng) : 1.0);
  }
  bool enabled() const { return on_; }
  // Advances one step whose messages carried `bytes` in total; returns max_i T_i.
  double advance(int64_t k, int64_t bytes) {
    const Graph& g = seq_.graph_at(k);
    const double per_message = g.num_edges() > 0 ? static_cast<double>(bytes) / static_cast<double>(g.num_edges()) : 0.0;
    const double bw = m_.bandwidth.bytes_per_second();
    const double link = m_.latency.to_seconds() + (bw > 0 ? per_message / bw : 0.0);
    double latest = 0;
    for (NodeIndex i = 0; i < g.num_nodes(); ++i) {
      const auto ii = static_cast<size_t>(i);
      double t = t_[ii] + compute_[ii];
      for (NodeIndex j : g.in_neighbors(i)) t = std::max(t, t_[static_cast<size_t>(j)] + compute_[static_cast<size_t>(j)] + link);
      next_[ii] = t;
      latest = std::max(latest, t);
    }
    std::swap(t_, next_);
    return latest;
  }

 private:
  TimeModel m_;
  const GraphSequence& seq_;
  bool on_;
  std::vector<double> compute_, t_, next_;
};

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
              const Where& where) {
  const auto start = std::chrono::steady_clock::now();
  check_spec(spec, where);
  const AlgorithmInfo& info = find_algorithm(spec.algorithm, where.with_key("algo"));
  const NodeIndex n = problem.num_nodes();
  if (seq.num_nodes() != n) {
    throw InputError(where.with_key("topology"),
                     fmt::format("inconsistent node counts: the topology '{}' has {} nodes, the problem '{}' {}",
                                 seq.name(), seq.num_nodes(), problem.name(), n));
  }
  const MixingSchedule mix = build_schedule(seq, info, spec.mixing, where);
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
  const int64_t total = spec.seeds * spec.iters;
  for (int64_t r = 0; r < spec.seeds; ++r) {
    const uint64_t seed = spec.seed + static_cast<uint64_t>(r);
    GradientOracle oracle(problem, spec.batch, seed);
    StepContext ctx{mix, oracle, params, RandomStream::derive(seed, "decentral.algorithm")};
    std::unique_ptr<Algorithm> alg = info.make();
    alg->init(problem.initial_point(seed), ctx);
    std::vector<MetricPoint>& points = result.per_seed.emplace_back();
    SyncClock clock(spec.time, seq, spec.batch, seed, !info.federated);
    if (clock.enabled()) ctx.sim_time = 0;
    const auto evaluate = [&](int64_t k) {
      const auto eval_start = std::chrono::steady_clock::now();
      const NodeMatrix& x = alg->iterates();
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
      points.push_back(p);
      result.eval_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    };
    evaluate(0);
    for (int64_t k = 0; k < spec.iters; ++k) {
      const int64_t bytes_before = ctx.bytes;
      alg->step(k, ctx);
      if (clock.enabled()) ctx.sim_time = clock.advance(k, ctx.bytes - bytes_before);
      if ((k + 1) % every == 0 || k + 1 == spec.iters) evaluate(k + 1);
      if (progress && (k & 63) == 0) progress(r * spec.iters + k, total);
    }
  }
  if (progress) progress(total, total);
  const size_t points = result.per_seed.front().size();
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
    result.summary.push_back(s);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace orrery::decentral
