// The exact checks of ../shared/validation/decentralized.md (checks 3-7; checks 1, 2 and the metrics of 6
// are in src/decentral/mixing_test.cc). Every expected value is the one that document derives in
// float64, with its tolerance (1e-6 unless stated). The problems are closed-form quadratics, so the
// checks need no data files and run in a few seconds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include <Eigen/Eigenvalues>

#include "decentral/algorithm.h"
#include "decentral/compression.h"
#include "decentral/graph.h"
#include "decentral/mixing.h"
#include "decentral/problem.h"
#include "decentral/runner.h"

namespace orrery::decentral {
namespace {

// Runs `algo` for `iters` steps, calling each(k, alg) after step k (0-based).
void simulate(const Problem& p, const GraphSequence& seq, const std::string& algo, const AlgoParams& params,
              int64_t iters, const std::function<void(int64_t, Algorithm&)>& each,
              const std::optional<MixingSpec>& mixing = std::nullopt, int64_t batch = 0, uint64_t seed = 1) {
  const AlgorithmInfo& info = find_algorithm(algo, {});
  const MixingSchedule mix = build_schedule(seq, info, mixing);
  GradientOracle oracle(p, batch, seed);
  StepContext ctx{mix, oracle, params, RandomStream::derive(seed, "decentral.algorithm")};
  std::unique_ptr<Algorithm> alg = info.make();
  alg->init(p.initial_point(seed), ctx);
  for (int64_t k = 0; k < iters; ++k) {
    alg->step(k, ctx);
    if (each) each(k, *alg);
  }
}

NodeMatrix final_iterates(const Problem& p, const GraphSequence& seq, const std::string& algo, double lr,
                          int64_t iters, const std::optional<MixingSpec>& mixing = std::nullopt) {
  NodeMatrix out;
  AlgoParams params;
  params.lr = lr;
  simulate(p, seq, algo, params, iters, [&](int64_t k, Algorithm& a) {
    if (k == iters - 1) out = a.iterates();
  }, mixing);
  return out;
}

// Check 3's problem: f_i(x) = 0.5 h_i (x - i)^2, i = 0..7.
std::unique_ptr<Problem> ring_quadratics(bool heterogeneous) {
  QuadraticSpec q;
  for (int i = 0; i < 8; ++i) {
    q.h.push_back(heterogeneous ? 1.0 + i / 7.0 : 1.0);
    q.b.push_back({static_cast<double>(i)});
  }
  return make_quadratic(q);
}

// Check 6's problem on the 5-node digraph: h = (1, 1.5, 2, 2.5, 3), b = (0, 1, 2, 3, 4).
std::unique_ptr<Problem> five_node_quadratics() {
  QuadraticSpec q;
  for (int i = 0; i < 5; ++i) {
    q.h.push_back(1.0 + 0.5 * i);
    q.b.push_back({static_cast<double>(i)});
  }
  return make_quadratic(q);
}

GraphSequence five_node_graph() { return GraphSequence(directed_ring_with_chords(5, {{0, 2}})); }

void expect_vector(const NodeMatrix& x, const std::vector<double>& want, double tol) {
  ASSERT_EQ(x.rows(), static_cast<Eigen::Index>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    std::printf("  node %zu: expected %.6f actual %.6f\n", i, want[i], x(static_cast<Eigen::Index>(i), 0));
    EXPECT_NEAR(x(static_cast<Eigen::Index>(i), 0), want[i], tol) << "node " << i;
  }
}

// --- Check 3: DSGD fixed-point bias ------------------------------------------------------------------------

// The fixed point contracts at rate max |1 - a - (1 - lambda)| over W's spectrum: with a = 0.1 and ring
// eigenvalues 1/3 + 2/3 cos(2 pi k / 8) in [-1/3, 1], at most 0.9 per step; 600 steps leave 0.9^600 ~ 1e-28.
TEST(DecentralCheck3, CombineThenAdaptFixedPointMatchesTheClosedForm) {
  const auto p = ring_quadratics(false);
  const NodeMatrix x = final_iterates(*p, GraphSequence(ring(8)), "dsgd", 0.1, 600);
  expect_vector(x, {2.915229, 2.620254, 2.811357, 3.245866, 3.754134, 4.188643, 4.379746, 4.084771}, 1e-6);
  EXPECT_NEAR(x.col(0).mean(), 3.5, 1e-6);
  EXPECT_NEAR((x.col(0).array() - 3.5).square().sum(), 3.309448, 1e-6);
}

TEST(DecentralCheck3, AdaptThenCombineFixedPointMatchesTheClosedForm) {
  const auto p = ring_quadratics(false);
  const NodeMatrix x = final_iterates(*p, GraphSequence(ring(8)), "dsgd-atc", 0.1, 600);
  expect_vector(x, {3.185632, 2.729883, 2.850762, 3.255229, 3.744771, 4.149238, 4.270117, 3.814368}, 1e-6);
  EXPECT_NEAR((x.col(0).array() - 3.5).square().sum(), 2.346661, 1e-6);
}

TEST(DecentralCheck3, HeterogeneousCurvatureBiasesTheCombineThenAdaptMean) {
  // Optimum sum(h b)/sum(h) = 4.0, but the fixed point's mean is 3.839045 and its worst node is 1.203626 away.
  const auto p = ring_quadratics(true);
  const NodeMatrix x = final_iterates(*p, GraphSequence(ring(8)), "dsgd", 0.1, 600);
  std::printf("  mean: expected 3.839045 actual %.6f; max |x_i - 4|: expected 1.203626 actual %.6f\n", x.col(0).mean(),
              (x.col(0).array() - 4.0).abs().maxCoeff());
  EXPECT_NEAR(x.col(0).mean(), 3.839045, 1e-6);
  EXPECT_NEAR((x.col(0).array() - 4.0).abs().maxCoeff(), 1.203626, 1e-6);
}

// --- Check 4: gradient tracking is exact, at the predicted linear rate ---------------------------------------

TEST(DecentralCheck4, GradientTrackingConvergesExactlyAtTheIterationMatrixRate) {
  const auto p = ring_quadratics(true);
  const GraphSequence seq(ring(8));
  const double a = 0.1;
  // The 2n x 2n iteration matrix of (x, y) with exact gradients g = H (x - b):
  // x+ = W x - a y;  y+ = W y + H (x+ - x) = H (W - I) x + (W - a H) y.
  const Eigen::MatrixXd w = metropolis_hastings(ring(8));
  Eigen::MatrixXd h = Eigen::MatrixXd::Zero(8, 8);
  for (int i = 0; i < 8; ++i) h(i, i) = 1.0 + i / 7.0;
  Eigen::MatrixXd m(16, 16);
  m << w, -a * Eigen::MatrixXd::Identity(8, 8), h * (w - Eigen::MatrixXd::Identity(8, 8)), w - a * h;
  // The eigenvalue 1 belongs to the conserved mean of y - g (a direction the error never has); the rate
  // is the largest modulus below it.
  const Eigen::VectorXcd ev = m.eigenvalues();
  std::vector<double> mod;
  for (Eigen::Index k = 0; k < ev.size(); ++k) mod.push_back(std::abs(ev(k)));
  std::sort(mod.rbegin(), mod.rend());
  std::printf("  iteration-matrix rate: expected 0.917974 actual %.6f\n", mod[1]);
  EXPECT_NEAR(mod[1], 0.917974, 1e-6);

  // The simulation: error to x* = 4 below 1e-13, and the measured per-step contraction while the error
  // falls from ~1e-3 to ~1e-9 equals the predicted rate (to 1e-3: finite-horizon transients of the other
  // modes decay as (0.91/0.918)^k).
  std::vector<double> err;
  AlgoParams params;
  params.lr = a;
  simulate(*p, seq, "gt", params, 600, [&](int64_t, Algorithm& alg) {
    err.push_back((alg.iterates().col(0).array() - 4.0).abs().maxCoeff());
  });
  std::printf("  final error: %.3e (expected < 1e-13)\n", err.back());
  EXPECT_LT(err.back(), 1e-13);
  const int64_t k0 = 150, k1 = 250;
  const double measured = std::pow(err[k1] / err[k0], 1.0 / static_cast<double>(k1 - k0));
  std::printf("  measured rate over steps %lld..%lld: %.6f (errors %.2e -> %.2e)\n", static_cast<long long>(k0),
              static_cast<long long>(k1), measured, err[k0], err[k1]);
  EXPECT_NEAR(measured, 0.917974, 1e-3);
}

// --- Check 5: the DSGD noise floor -------------------------------------------------------------------------

// xbar follows xbar+ = (1 - a) xbar - a mean(noise): an AR(1) with stationary variance a s^2 / (n (2 - a)).
// The time average over N = 1e6 steps of xbar^2 (correlation time 1/(2a) = 10 steps) has a relative
// standard error of about sqrt(2 * 2 * 10 / N) = 0.6%, so the 3% tolerance is 5 standard errors.
TEST(DecentralCheck5, DsgdNoiseFloorIsASquaredOverNTimesTwoMinusA) {
  const double a = 0.05;
  const std::vector<std::pair<int, double>> cases{{1, 0.025641}, {4, 0.006410}, {16, 0.001603}};
  for (const auto& [n, want] : cases) {
    QuadraticSpec q;
    for (int i = 0; i < n; ++i) {
      q.h.push_back(1.0);
      q.b.push_back({0.0});
    }
    q.noise_sigma = 1.0;
    const auto p = make_quadratic(q);
    const GraphSequence seq = n == 1 ? GraphSequence(Graph(1, {}, "single")) : GraphSequence(ring(n));
    const int64_t burn = 1000, steps = 1'000'000;
    double sum = 0;
    AlgoParams params;
    params.lr = a;
    simulate(*p, seq, "dsgd", params, burn + steps, [&](int64_t k, Algorithm& alg) {
      if (k < burn) return;
      const double m = alg.iterates().col(0).mean();
      sum += m * m;
    }, std::nullopt, 1, 7);
    const double got = sum / static_cast<double>(steps);
    std::printf("  n=%2d: expected E[xbar^2] %.6f actual %.6f error %+.2f%%\n", n, want, got, 100 * (got / want - 1));
    EXPECT_NEAR(got / want, 1.0, 0.03) << "n = " << n;
  }
}

// --- Check 6: the directed 5-node graph -------------------------------------------------------------------

TEST(DecentralCheck6, PushPullConvergesToTheOptimumAndConservesTheTrackedSum) {
  const auto p = five_node_quadratics();
  double worst = 0;
  NodeMatrix x;
  AlgoParams params;
  params.lr = 0.05;
  simulate(*p, five_node_graph(), "push-pull", params, 3000, [&](int64_t, Algorithm& alg) {
    worst = std::max(worst, alg.conservation_error());
    x = alg.iterates();
  });
  const double err = (x.col(0).array() - 2.5).abs().maxCoeff();
  std::printf("  push-pull: max |x_i - 2.5| = %.3e (< 1e-13), max |1'y - 1'g| = %.3e (< 1e-13)\n", err, worst);
  EXPECT_LT(err, 1e-13);
  EXPECT_LT(worst, 1e-13);
}

TEST(DecentralCheck6, PullDiagKeepsItsInvariantAndConvergesForSmallSteps) {
  const auto p = five_node_quadratics();
  for (double a : {0.01, 0.02, 0.03}) {
    double worst = 0;
    NodeMatrix x;
    AlgoParams params;
    params.lr = a;
    simulate(*p, five_node_graph(), "pull-diag-gt", params, 4000, [&](int64_t, Algorithm& alg) {
      worst = std::max(worst, alg.conservation_error());
      x = alg.iterates();
    });
    const double err = (x.col(0).array() - 2.5).abs().maxCoeff();
    std::printf("  pull-diag-gt a=%.2f: max |x_i - 2.5| = %.3e, max |pi'y - pi'D^-1 g| = %.3e\n", a, err, worst);
    EXPECT_LT(err, 1e-10) << "a = " << a;
    EXPECT_LT(worst, 1e-13) << "a = " << a;
  }
}

TEST(DecentralCheck6, PullDiagDivergesAtFourHundredthsWhereThreeGossipRoundsConverge) {
  const auto p = five_node_quadratics();
  AlgoParams params;
  params.lr = 0.04;
  NodeMatrix plain, multi;
  simulate(*p, five_node_graph(), "pull-diag-gt", params, 2000, [&](int64_t, Algorithm& alg) { plain = alg.iterates(); });
  params.rounds = 3;
  simulate(*p, five_node_graph(), "mg-pull-diag-gt", params, 2000, [&](int64_t, Algorithm& alg) { multi = alg.iterates(); });
  const double plain_err = (plain.col(0).array() - 2.5).abs().maxCoeff();
  const double multi_err = (multi.col(0).array() - 2.5).abs().maxCoeff();
  std::printf("  a=0.04: pull-diag-gt error %.3e (diverges), mg R=3 error %.3e (converges)\n", plain_err, multi_err);
  EXPECT_TRUE(!std::isfinite(plain_err) || plain_err > 1e3);
  EXPECT_LT(multi_err, 1e-10);
}

TEST(DecentralCheck6, PullDiagAndPushSumAverageExactlyWherePlainPullGossipIsPiWeighted) {
  // z = (1, 2, 3, 4, 5): plain A-gossip gives pi_A^T z = 53/17 (mixing_test.cc); PULL-DIAG tracking of the
  // constant "gradients" z gives y -> n * mean(z) on every node, i.e. y/n -> 3; push-sum z = x/w -> 3.
  QuadraticSpec q;
  for (int i = 0; i < 5; ++i) {
    q.h.push_back(0.0);
    q.b.push_back({0.0});
    q.c.push_back({static_cast<double>(i + 1)});
  }
  const auto linear = make_quadratic(q);
  const NodeMatrix* y = nullptr;
  NodeMatrix tracked;
  AlgoParams params;
  params.lr = 1e-3;
  simulate(*linear, five_node_graph(), "pull-diag-gt", params, 300, [&](int64_t, Algorithm& alg) {
    y = alg.tracker();
    tracked = *y;
  });
  for (int i = 0; i < 5; ++i) {
    std::printf("  pull-diag node %d: y/n expected 3 actual %.15f\n", i, tracked(i, 0) / 5);
    EXPECT_NEAR(tracked(i, 0) / 5.0, 3.0, 1e-12);
  }
  QuadraticSpec zero;
  for (int i = 0; i < 5; ++i) {
    zero.h.push_back(0.0);
    zero.b.push_back({0.0});
    zero.x0.push_back({static_cast<double>(i + 1)});
  }
  const auto flat = make_quadratic(zero);
  const NodeMatrix z = final_iterates(*flat, five_node_graph(), "push-sum", 0.1, 300);
  for (int i = 0; i < 5; ++i) {
    std::printf("  push-sum node %d: expected 3 actual %.15f\n", i, z(i, 0));
    EXPECT_NEAR(z(i, 0), 3.0, 1e-12);
  }
}

TEST(DecentralCheck6, RowOnlyDgdSettlesNearThePiWeightedOptimumNotTheOptimum) {
  // With a -> 0 the fixed point of x+ = A (x - a g) tends to consensus at sum(pi h b)/sum(pi h) = 2.657143;
  // its distance is O(a) with a constant of order max|b_i - x*| ~ 2.5, so below 1e-4 at a = 1e-3 needs the
  // constant under 0.1 (it is: the printed mean); the optimum 2.5 is 0.157 away.
  const auto p = five_node_quadratics();
  const NodeMatrix x = final_iterates(*p, five_node_graph(), "row-dgd", 1e-3, 60000);
  const double m = x.col(0).mean();
  std::printf("  row-dgd a=1e-3: mean %.6f (pi-weighted optimum 2.657143, optimum 2.5)\n", m);
  EXPECT_NEAR(m, 2.657143, 1e-4);
  EXPECT_GT(std::abs(m - 2.5), 0.1);
}

// --- Check 7: compression ----------------------------------------------------------------------------------

TEST(DecentralCheck7, TopKErrorIsAtMostOneMinusKOverDOfTheNorm) {
  RandomStream rng = RandomStream::derive(3, "test.compression");
  const Normal normal(0.0, 1.0);
  std::vector<int32_t> scratch;
  for (double ratio : {0.1, 0.25, 0.5, 1.0}) {
    const CompressorSpec spec{CompressorKind::kTopK, ratio, 1};
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t d = 1 + static_cast<int64_t>(rng.uniform_int(64));
      std::vector<double> x(static_cast<size_t>(d)), c(static_cast<size_t>(d));
      for (double& v : x) v = normal.sample(rng);
      compress(spec, x.data(), c.data(), d, rng, scratch);
      double err = 0, norm = 0;
      for (int64_t j = 0; j < d; ++j) {
        err += (c[static_cast<size_t>(j)] - x[static_cast<size_t>(j)]) * (c[static_cast<size_t>(j)] - x[static_cast<size_t>(j)]);
        norm += x[static_cast<size_t>(j)] * x[static_cast<size_t>(j)];
      }
      const double k = static_cast<double>(kept_entries(spec, d));
      ASSERT_LE(err, (1.0 - k / static_cast<double>(d)) * norm * (1 + 1e-12) + 1e-300) << "d=" << d << " ratio=" << ratio;
    }
  }
}

TEST(DecentralCheck7, QsgdIsUnbiased) {
  // The mean of N independent quantizations of a fixed x converges to x; each coordinate's variance is at
  // most ||x||^2 / (4 s^2) (a Bernoulli between adjacent levels ||x||/s apart), so with N = 200000 the
  // standard error is ||x|| / (2 s sqrt(N)) ~ 1.1e-3 ||x|| / s; we allow 5 standard errors.
  RandomStream rng = RandomStream::derive(5, "test.qsgd");
  const std::vector<double> x{0.3, -1.2, 0.05, 2.0, -0.7, 0.0, 1.1, -0.01};
  const int64_t d = static_cast<int64_t>(x.size());
  double norm = 0;
  for (double v : x) norm += v * v;
  norm = std::sqrt(norm);
  for (int64_t s : {1, 4}) {
    const CompressorSpec spec{CompressorKind::kQsgd, 1.0, s};
    std::vector<double> sum(x.size(), 0.0), c(x.size());
    std::vector<int32_t> scratch;
    const int64_t trials = 200'000;
    for (int64_t t = 0; t < trials; ++t) {
      compress(spec, x.data(), c.data(), d, rng, scratch);
      for (size_t j = 0; j < x.size(); ++j) sum[j] += c[j];
    }
    const double se = norm / (2.0 * static_cast<double>(s) * std::sqrt(static_cast<double>(trials)));
    for (size_t j = 0; j < x.size(); ++j) {
      EXPECT_NEAR(sum[j] / static_cast<double>(trials), x[j], 5 * se) << "s=" << s << " j=" << j;
    }
  }
}

TEST(DecentralCheck7, ChocoGossipWithTheIdentityCompressorAndStepOneIsExactGossip) {
  // With f = 0 (h = 0), CHOCO's x+ = x + (W - I) xhat and xhat = x after each step: exactly x+ = W x.
  QuadraticSpec q;
  for (int i = 0; i < 8; ++i) {
    q.h.push_back(0.0);
    q.b.push_back({0.0, 0.0});
    q.x0.push_back({static_cast<double>(i * i), std::sin(static_cast<double>(i))});
  }
  const auto p = make_quadratic(q);
  const GraphSequence seq(ring(8));
  const Eigen::MatrixXd w = metropolis_hastings(ring(8));
  Eigen::MatrixXd expect = p->initial_point(1);
  AlgoParams params;
  params.gamma = 1.0;
  simulate(*p, seq, "choco-sgd", params, 20, [&](int64_t, Algorithm& alg) {
    expect = w * expect;
    EXPECT_LT((alg.iterates() - expect).cwiseAbs().maxCoeff(), 1e-12);
  });
}

}  // namespace
}  // namespace orrery::decentral
