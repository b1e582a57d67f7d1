#include "decentral/mixing.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include <gtest/gtest.h>

namespace orrery::decentral {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr double kTol = 1e-6;  // decentralized.md: "Unless stated, tolerance 1e-6"
const Where kKey{"<test>", 0, "--mixing"};

// ---- decentralized.md check 1: ring, Metropolis weights 1/3 --------------------------------------

TEST(Metropolis, RingWeightsAreOneThirdAndTheMatrixIsSymmetricDoublyStochastic) {
  // Every ring node has degree 2: w_ij = 1/(1 + max(2, 2)) = 1/3 on edges, 1 - 2/3 = 1/3 on the diagonal.
  const MatrixXd w = metropolis_hastings(ring(8));
  for (Eigen::Index i = 0; i < 8; ++i) {
    EXPECT_DOUBLE_EQ(w(i, i), 1.0 / 3.0);
    EXPECT_DOUBLE_EQ(w(i, (i + 1) % 8), 1.0 / 3.0);
    EXPECT_DOUBLE_EQ(w(i, (i + 7) % 8), 1.0 / 3.0);
    EXPECT_EQ(w(i, (i + 4) % 8), 0.0);
  }
  EXPECT_TRUE(is_doubly_stochastic(w));
  EXPECT_TRUE(w.isApprox(w.transpose()));
}

TEST(Metropolis, RingSecondEigenvalueMatchesTheValidationTable) {
  // W = I/3 + (P + P^T)/3 is circulant: eigenvalues 1/3 + (2/3) cos(2 pi k / n). The second largest
  // (k = 1) is rho; for n >= 5 it also has the largest modulus after 1 (the most negative eigenvalue is
  // >= -1/3). Values from decentralized.md check 1.
  const std::pair<NodeIndex, double> table[] = {{5, 0.539345}, {8, 0.804738}, {16, 0.949253}, {32, 0.987190},
                                                {64, 0.996790}};
  for (const auto& [n, rho] : table) {
    const MatrixXd w = metropolis_hastings(ring(n));
    const MixingMetrics m = mixing_metrics(w);
    EXPECT_NEAR(m.lambda2, rho, kTol) << "n=" << n;
    EXPECT_NEAR(m.beta, rho, kTol) << "n=" << n;  // symmetric: singular values = |eigenvalues|
    EXPECT_NEAR(m.lambda2, 1.0 / 3.0 + 2.0 / 3.0 * std::cos(2 * std::numbers::pi / n), 1e-12) << "n=" << n;
    EXPECT_NEAR(m.spectral_gap, 1 - rho, kTol);
    EXPECT_TRUE(m.doubly_stochastic);
    EXPECT_NEAR(m.kappa, 1.0, 1e-12);  // pi = 1/n
  }
}

TEST(Metropolis, RingFullSpectrumIsTheCirculantFormula) {
  const NodeIndex n = 8;
  const Eigen::SelfAdjointEigenSolver<MatrixXd> es(metropolis_hastings(ring(n)), Eigen::EigenvaluesOnly);
  std::vector<double> expected;
  for (int k = 0; k < n; ++k) expected.push_back(1.0 / 3.0 + 2.0 / 3.0 * std::cos(2 * std::numbers::pi * k / n));
  std::sort(expected.begin(), expected.end());
  for (int k = 0; k < n; ++k) EXPECT_NEAR(es.eigenvalues()(k), expected[static_cast<size_t>(k)], 1e-12) << k;
}

TEST(Metropolis, StarWeightsFollowTheMaxDegreeRule) {
  // Hub degree n-1, leaves degree 1: every edge weight 1/(1 + (n-1)) = 1/n; the hub keeps
  // 1 - (n-1)/n = 1/n, a leaf keeps 1 - 1/n.
  const NodeIndex n = 6;
  const MatrixXd w = metropolis_hastings(star(n));
  EXPECT_DOUBLE_EQ(w(0, 0), 1.0 / n);
  EXPECT_DOUBLE_EQ(w(0, 3), 1.0 / n);
  EXPECT_DOUBLE_EQ(w(3, 3), 1.0 - 1.0 / n);
  EXPECT_TRUE(is_doubly_stochastic(w));
}

TEST(Metropolis, RandomGraphsGiveSymmetricDoublyStochasticMatricesWhoseBetaIsTheSecondEigenvalueModulus) {
  // Slow reference: for symmetric doubly stochastic W, ||W - 11^T/n||_2 = max(|lambda_2|, |lambda_n|),
  // read off a full eigendecomposition.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Graph g = erdos_renyi(30, 0.2, seed);
    if (!is_weakly_connected(g)) continue;
    const MatrixXd w = metropolis_hastings(g);
    ASSERT_TRUE(is_doubly_stochastic(w)) << "seed " << seed;
    ASSERT_TRUE(w.isApprox(w.transpose())) << "seed " << seed;
    const Eigen::SelfAdjointEigenSolver<MatrixXd> es(w, Eigen::EigenvaluesOnly);
    const auto& ev = es.eigenvalues();  // ascending; ev(n-1) = 1
    const double reference = std::max(std::abs(ev(28)), std::abs(ev(0)));
    EXPECT_NEAR(mixing_metrics(w).beta, reference, 1e-10) << "seed " << seed;
  }
}

// ---- decentralized.md check 2: exponential graphs and hypercube ----------------------------------

TEST(Uniform, StaticExponentialAndHypercubeRhoIsOneMinusTwoOverOnePlusT) {
  // n = 2^t. Static exponential with uniform weights 1/(t+1) is the circulant (I + sum_k P_{2^k})/(t+1);
  // at frequency n/2 only the hop 1 flips sign: (1 - 1 + (t-1))/(t+1) = 1 - 2/(1+t). The hypercube
  // with weights 1/(t+1) has eigenvalues (1 + t - 2|S|)/(t+1), second largest (t-1)/(t+1), the same.
  // Values from decentralized.md check 2.
  const std::pair<int, double> table[] = {{3, 0.5}, {4, 0.6}, {5, 0.666667}, {6, 0.714286}, {7, 0.75}};
  for (const auto& [t, rho] : table) {
    const NodeIndex n = NodeIndex{1} << t;
    const MixingMetrics e = mixing_metrics(uniform_weights(static_exponential(n)));
    EXPECT_NEAR(e.lambda2, rho, kTol) << "exponential n=" << n;
    EXPECT_NEAR(e.beta, rho, kTol) << "exponential n=" << n;  // circulant, so normal: sigma_2 = |lambda_2|
    EXPECT_TRUE(e.doubly_stochastic);
    const MatrixXd h = uniform_weights(hypercube(n));
    EXPECT_TRUE(h.isApprox(metropolis_hastings(hypercube(n)), 1e-15)) << "regular: the two rules agree";
    EXPECT_NEAR(mixing_metrics(h).beta, rho, kTol) << "hypercube n=" << n;
    EXPECT_NEAR(mixing_metrics(h).lambda2, rho, kTol) << "hypercube n=" << n;
  }
}

TEST(Uniform, OnePeerExponentialAveragesExactlyAfterOnePeriod) {
  // Each round is (I + P_{2^s})/2; the product over s = 0..t-1 equals 11^T/n with no rounding error
  // (every entry is a dyadic rational), decentralized.md check 2.
  for (NodeIndex n : {4, 8, 16, 32}) {
    const GraphSequence s = one_peer_exponential(n);
    for (MixingSpec spec : {MixingSpec{MixingRule::kPull, false}, MixingSpec{MixingRule::kUniform, false},
                            MixingSpec{MixingRule::kPush, false}}) {
      const MatrixXd p = period_product(s, spec, s.period());
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index j = 0; j < n; ++j) ASSERT_EQ(p(i, j), 1.0 / n) << "n=" << n << " " << mixing_name(spec);
      }
      EXPECT_NEAR(mixing_metrics(p).beta, 0.0, 1e-12);
    }
  }
  // Not a power of two: one period does not average exactly (1/12 is no dyadic rational).
  const MatrixXd p12 = period_product(one_peer_exponential(12), {MixingRule::kPull, false}, 4);
  EXPECT_GT((p12 - MatrixXd::Constant(12, 12, 1.0 / 12)).cwiseAbs().maxCoeff(), 1e-3);
}

TEST(Uniform, CompleteGraphAveragesInOneRoundSoBetaIsZero) {
  // d = n-1: every weight 1/n, W = 11^T/n; beta = 0, and R = ceil(3 (1 + ln 1 + ln n) / 1).
  const NodeIndex n = 10;
  const MatrixXd w = uniform_weights(complete(n));
  EXPECT_TRUE(w.isApprox(MatrixXd::Constant(n, n, 1.0 / n), 1e-15));
  const MixingMetrics m = mixing_metrics(w);
  EXPECT_NEAR(m.beta, 0.0, 1e-12);
  EXPECT_NEAR(m.lambda2, 0.0, 1e-12);
  ASSERT_TRUE(m.theory_rounds.has_value());
  EXPECT_EQ(*m.theory_rounds, static_cast<int64_t>(std::ceil(3 * (1 + std::log(10.0)))));  // 9.9 -> 10
  EXPECT_EQ(*m.theory_rounds, 10);
}

TEST(Uniform, RefusesAnUnbalancedGraph) {
  // 0 -> 2 chord: node 0 has out-degree 2 and in-degree 1.
  EXPECT_THROW(uniform_weights(directed_ring_with_chords(5, {{0, 2}}), kKey), InputError);
}

// ---- decentralized.md check 6: the directed 5-node graph -----------------------------------------

class FiveNode : public ::testing::Test {
 protected:
  // Edges i -> i+1 mod 5 plus 0 -> 2, self-loops everywhere; a_ij = 1/(1 + indeg_i), b_ij = 1/(1 + outdeg_j).
  Graph g_ = directed_ring_with_chords(5, {{0, 2}});
  MatrixXd a_ = pull_matrix(g_);
  MatrixXd b_ = push_matrix(g_);
};

TEST_F(FiveNode, PullIsRowStochasticAndPushColumnStochasticButNeitherDoubly) {
  EXPECT_TRUE(is_row_stochastic(a_));
  EXPECT_FALSE(is_column_stochastic(a_));
  EXPECT_TRUE(is_column_stochastic(b_));
  EXPECT_FALSE(is_row_stochastic(b_));
  // Row 2 of A: in(2) = {0, 1}, so 1/3 on nodes 0, 1, 2.
  EXPECT_DOUBLE_EQ(a_(2, 0), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(a_(2, 2), 1.0 / 3.0);
  // Column 0 of B: out(0) = {1, 2}, so 1/3 on nodes 0, 1, 2.
  EXPECT_DOUBLE_EQ(b_(2, 0), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(b_(1, 0), 1.0 / 3.0);
}

TEST_F(FiveNode, PerronVectorsKappaAndBetaMatchTheValidationNumbers) {
  const VectorXd pi_a = perron_left(a_);
  const double expected_a[] = {4, 2, 3, 4, 4};  // /17
  for (Eigen::Index i = 0; i < 5; ++i) EXPECT_NEAR(pi_a(i), expected_a[i] / 17, 1e-12) << i;
  EXPECT_NEAR((pi_a.transpose() * a_ - pi_a.transpose()).cwiseAbs().maxCoeff(), 0.0, 1e-14);
  const VectorXd pi_b = perron_right(b_);
  const double expected_b[] = {3, 2, 4, 4, 4};  // /17
  for (Eigen::Index i = 0; i < 5; ++i) EXPECT_NEAR(pi_b(i), expected_b[i] / 17, 1e-12) << i;

  const MixingMetrics m = mixing_metrics(a_);
  EXPECT_TRUE(m.row_stochastic);
  EXPECT_FALSE(m.doubly_stochastic);
  EXPECT_NEAR(m.pi_min, 2.0 / 17, 1e-12);
  EXPECT_NEAR(m.pi_max, 4.0 / 17, 1e-12);
  EXPECT_NEAR(m.kappa, 2.0, 1e-12);  // (4/17) / (2/17)
  EXPECT_NEAR(m.beta, 0.810217, kTol);
  EXPECT_NEAR(m.spectral_gap, 1 - 0.810217, kTol);
  EXPECT_NEAR(m.lambda2, 0.736032, kTol);
  // R = ceil(3 (1 + ln 2 + ln 5) / (1 - 0.810217)) = ceil(52.2057) = 53.
  ASSERT_TRUE(m.theory_rounds.has_value());
  EXPECT_EQ(*m.theory_rounds, 53);

  const MixingMetrics mb = mixing_metrics(b_);  // measured through B^T
  EXPECT_TRUE(mb.column_stochastic);
  EXPECT_NEAR(mb.pi(2), 4.0 / 17, 1e-12);
  EXPECT_NEAR(mb.kappa, 2.0, 1e-12);  // (4/17) / (2/17)
  EXPECT_NEAR(mb.lambda2, 0.736032, kTol);
}

TEST_F(FiveNode, SmallestDiagonalOfThePowersOfAIsOneTwentySeventh) {
  // decentralized.md: min over k >= 1 of [A^k]_ii is 1/27, at [A^3] for node 2 (0-based: the node with
  // two in-neighbours, whose own weight is 1/3). [A^k]_ii -> pi_i >= 2/17 > 1/27, so k <= 200 suffices.
  MatrixXd p = a_;
  double best = p.diagonal().minCoeff();
  int best_k = 1;
  Eigen::Index best_i = 0;
  for (int k = 1; k <= 200; ++k) {
    Eigen::Index i = 0;
    const double d = p.diagonal().minCoeff(&i);
    if (d < best - 1e-15) {
      best = d;
      best_k = k;
      best_i = i;
    }
    p = p * a_;
  }
  EXPECT_NEAR(best, 1.0 / 27, 1e-12);
  EXPECT_EQ(best_k, 3);
  EXPECT_EQ(best_i, 2);
}

TEST_F(FiveNode, PlainPullGossipConvergesToThePiWeightedMeanNotTheMean) {
  // A^k z -> 1 pi_A^T z = 53/17 = 3.117647 (decentralized.md), not the mean 3.
  VectorXd z(5);
  z << 1, 2, 3, 4, 5;
  for (int k = 0; k < 500; ++k) z = a_ * z;
  for (Eigen::Index i = 0; i < 5; ++i) EXPECT_NEAR(z(i), 53.0 / 17, 1e-9);
  EXPECT_NEAR(53.0 / 17, 3.117647, kTol);
}

// ---- pull / push on other graphs, lazy variants --------------------------------------------------

TEST(PullPush, DirectedRingGivesTheCirculantHalfIdentityHalfShift) {
  // in- and out-degree 1: A = B = (I + P)/2, doubly stochastic, eigenvalues (1 + w^k)/2 with
  // |.| = |cos(pi k / n)|; the second largest modulus is cos(pi / n) = cos(30 deg) = 0.866025 for n = 6.
  const Graph g = directed_ring(6);
  const MatrixXd a = pull_matrix(g);
  EXPECT_TRUE(a.isApprox(push_matrix(g)));
  const MixingMetrics m = mixing_metrics(a);
  EXPECT_TRUE(m.doubly_stochastic);
  EXPECT_FALSE(m.symmetric);
  EXPECT_NEAR(m.lambda2, std::cos(std::numbers::pi / 6), 1e-12);
  EXPECT_NEAR(m.beta, std::cos(std::numbers::pi / 6), 1e-12);  // circulant: normal
}

TEST(PullPush, PerronVectorAgreesWithPowerIterationOnRandomDigraphs) {
  // Slow reference: pi^T <- pi^T A repeated until it stops moving (A has self-loops, so it is primitive).
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const Graph g = random_strongly_connected(12, 0.15, seed);
    const MatrixXd a = pull_matrix(g);
    VectorXd ref = VectorXd::Constant(12, 1.0 / 12);
    for (int k = 0; k < 20000; ++k) ref = (ref.transpose() * a).transpose();
    const VectorXd pi = perron_left(a);
    EXPECT_LT((pi - ref).cwiseAbs().maxCoeff(), 1e-12) << "seed " << seed;
    const MatrixXd b = push_matrix(g);
    VectorXd ref_b = VectorXd::Constant(12, 1.0 / 12);
    for (int k = 0; k < 20000; ++k) ref_b = b * ref_b;
    EXPECT_LT((perron_right(b) - ref_b).cwiseAbs().maxCoeff(), 1e-12) << "seed " << seed;
    // beta_A is a norm of a pi-weighted contraction: it bounds |lambda_2| from above.
    const MixingMetrics m = mixing_metrics(a);
    EXPECT_GE(m.beta + 1e-12, m.lambda2) << "seed " << seed;
  }
}

TEST(Lazy, HalvesTheDistanceToOneOfEveryEigenvalue) {
  // (I + W)/2 has eigenvalues (1 + lambda)/2: the ring n = 8 value 0.804738 becomes 0.902369.
  const MatrixXd w = lazy(metropolis_hastings(ring(8)));
  EXPECT_NEAR(mixing_metrics(w).lambda2, (1 + 0.804738) / 2, kTol);
  EXPECT_TRUE(mixing_matrix(ring(8), parse_mixing("lazy-metropolis", kKey)).isApprox(w));
  EXPECT_TRUE(is_doubly_stochastic(w));
  // Lazy pull stays row-stochastic.
  EXPECT_TRUE(is_row_stochastic(lazy(pull_matrix(directed_ring_with_chords(5, {{0, 2}})))));
}

// ---- checks, parsing and errors ------------------------------------------------------------------

TEST(Stochasticity, ToleranceDecidesSmallDeviations) {
  MatrixXd w = metropolis_hastings(ring(5));
  w(0, 0) += 1e-10;
  EXPECT_TRUE(is_row_stochastic(w, 1e-9));
  EXPECT_FALSE(is_row_stochastic(w, 1e-12));
  EXPECT_FALSE(is_doubly_stochastic(w, 1e-12));
  MatrixXd neg = MatrixXd::Identity(2, 2);
  neg << 1.5, -0.5, -0.5, 1.5;  // rows and columns sum to 1, but negative entries
  EXPECT_FALSE(is_row_stochastic(neg));
  EXPECT_FALSE(is_column_stochastic(neg));
  EXPECT_FALSE(is_row_stochastic(MatrixXd::Identity(2, 3)));
}

TEST(MixingSpecs, ParseNamesAliasesAndLazyPrefixes) {
  EXPECT_EQ(parse_mixing("metropolis", kKey).rule, MixingRule::kMetropolis);
  EXPECT_EQ(parse_mixing("metropolis-hastings", kKey).rule, MixingRule::kMetropolis);
  EXPECT_EQ(parse_mixing("row", kKey).rule, MixingRule::kPull);
  EXPECT_EQ(parse_mixing("column", kKey).rule, MixingRule::kPush);
  const MixingSpec s = parse_mixing("lazy-uniform", kKey);
  EXPECT_EQ(s.rule, MixingRule::kUniform);
  EXPECT_TRUE(s.lazy);
  EXPECT_EQ(mixing_name(s), "lazy-uniform");
  for (const std::string& name : mixing_names()) EXPECT_EQ(mixing_name(parse_mixing(name, kKey)), name);
  try {
    parse_mixing("metropolys", kKey);
    FAIL() << "parsed";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--mixing"), std::string::npos) << what;
    EXPECT_NE(what.find("did you mean 'metropolis'"), std::string::npos) << what;
  }
}

TEST(MixingErrors, RulesThatDoNotFitTheGraphAreInputErrors) {
  // Metropolis needs an undirected graph.
  try {
    metropolis_hastings(static_exponential(8), kKey);
    FAIL() << "built";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("use 'pull'"), std::string::npos) << e.what();
  }
  // Too many nodes for a dense matrix (checked before allocating).
  EXPECT_THROW(pull_matrix(ring(kMaxDenseNodes + 1), kKey), InputError);
  // A reducible matrix has no unique Perron vector: the directed path 0 -> 1 -> 2.
  const MatrixXd a = pull_matrix(Graph(3, {{0, 1}, {1, 2}}));
  try {
    perron_left(a, kKey);
    FAIL() << "solved";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("3 strongly connected components"), std::string::npos) << e.what();
  }
  MatrixXd not_stochastic = MatrixXd::Constant(3, 3, 0.5);
  EXPECT_THROW(mixing_metrics(not_stochastic, kKey), InputError);
  EXPECT_THROW(perron_left(not_stochastic, kKey), InputError);
}

TEST(TheoryRounds, FollowsTheFormulaAndIsAbsentWithoutContraction) {
  // kappa = 1, n = 16, beta = 0.5: 3 (1 + ln 16) / 0.5 = 6 (1 + 2.7726) = 22.64 -> 23.
  EXPECT_EQ(theory_rounds(1.0, 16, 0.5), std::optional<int64_t>(23));
  EXPECT_FALSE(theory_rounds(1.0, 16, 1.0).has_value());
}

}  // namespace
}  // namespace orrery::decentral
