#include "core/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace orrery {
namespace {

// ---- Golden values ----------------------------------------------------------------------------
// Unless stated otherwise, the expected numbers below were printed by tools/rng_golden.py, an
// independent pure-Python implementation of FNV-1a, splitmix64, xoshiro256**, the stream derivation
// and the samplers (it first checks itself against the published FNV, splitmix64 and xoshiro256**
// test vectors). Rerun it if the algorithms change; never paste values printed by this C++ code.

TEST(SplitMix64, MatchesThePublishedReferenceSequence) {
  // Vigna's reference splitmix64.c seeded with 1234567; the same three values appear in many RNG
  // test suites, and tools/rng_golden.py reproduces them.
  SplitMix64 sm(1234567);
  EXPECT_EQ(sm.next(), 6457827717110365317u);
  EXPECT_EQ(sm.next(), 3203168211198807973u);
  EXPECT_EQ(sm.next(), 9817491932198370423u);
}

TEST(Fnv1a64, MatchesThePublishedTestVectors) {
  // The empty string hashes to the offset basis; "a" -> 0xaf63dc4c8601ec8c (FNV reference tests).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325u);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cu);
  EXPECT_EQ(fnv1a64("serve.arrivals"), 16313271276415079200u);  // rng_golden.py
}

TEST(Fnv1a64, ContinuingFromAPreviousHashHashesTheConcatenation) {
  EXPECT_EQ(fnv1a64("arrivals", fnv1a64("serve.")), fnv1a64("serve.arrivals"));
}

TEST(RandomStream, DeriveMatchesTheIndependentPythonReference) {
  RandomStream a = RandomStream::derive(42, "serve.arrivals");
  const uint64_t expected_a[] = {5018142329218562106u, 1631749016333484787u, 13531400972032773762u,
                                 14844304628485067288u, 7840261719794271059u};
  for (uint64_t e : expected_a) EXPECT_EQ(a.next_u64(), e);

  RandomStream z = RandomStream::derive(0, "");
  const uint64_t expected_z[] = {2393714812739481704u, 6581096415885975394u, 11983149312406802546u,
                                 15230072046951085487u, 17293057866266245160u};
  for (uint64_t e : expected_z) EXPECT_EQ(z.next_u64(), e);
}

TEST(RandomStream, ChildMatchesTheIndependentPythonReference) {
  RandomStream c = RandomStream::derive(42, "serve.arrivals").child("gpu0");
  EXPECT_EQ(c.next_u64(), 2460453103011131225u);
  EXPECT_EQ(c.next_u64(), 8326441648972455684u);
  EXPECT_EQ(c.next_u64(), 2646146431806804312u);
}

TEST(RandomStream, UniformAndOpenDoublesMatchThePythonReferenceExactly) {
  // Both are exact scalings of integers, so equality (not nearness) is the portable contract.
  RandomStream u = RandomStream::derive(42, "serve.arrivals");
  EXPECT_EQ(u.uniform01(), 0.2720340407590117);
  EXPECT_EQ(u.uniform01(), 0.08845729142299241);
  EXPECT_EQ(u.uniform01(), 0.7335387165325199);
  EXPECT_EQ(u.uniform01(), 0.8047113663620069);
  // open01 uses the top 52 bits plus a half: the second value differs from uniform01's in the
  // last digits because bit 11 is dropped and 2^-53 added.
  RandomStream o = RandomStream::derive(42, "serve.arrivals");
  EXPECT_EQ(o.open01(), 0.2720340407590117);
  EXPECT_EQ(o.open01(), 0.08845729142299252);
  EXPECT_EQ(o.open01(), 0.7335387165325199);
}

TEST(RandomStream, UniformIntMatchesThePythonReference) {
  RandomStream r = RandomStream::derive(7, "golden.uniform_int");
  const uint64_t expected_small[] = {2, 1, 5, 2, 5, 2, 4, 5, 3, 4};
  for (uint64_t e : expected_small) EXPECT_EQ(r.uniform_int(6), e);
  // n = 3·2^62 rejects about a quarter of the draws, so this also exercises the rejection loop.
  RandomStream big = RandomStream::derive(7, "golden.uniform_int");
  const uint64_t n = uint64_t{3} << 62;
  const uint64_t expected_big[] = {5923074714370015525u, 3208898848486892179u, 13366607617902341144u,
                                   5077120323029427285u};
  for (uint64_t e : expected_big) EXPECT_EQ(big.uniform_int(n), e);
}

TEST(Exponential, SamplesMatchThePythonReference) {
  // -ln(open01())/2. Python's math.log and std::log are the same C library call here; another libm
  // may differ by an ulp, hence EXPECT_DOUBLE_EQ (4 ulps) rather than exact equality.
  RandomStream r = RandomStream::derive(7, "golden.exponential");
  const Exponential e(2.0);
  const double expected[] = {0.11083290255749184, 0.27766705132472647, 1.0857920558227043,
                             0.5816680857926295, 0.11852555723557572};
  for (double x : expected) EXPECT_DOUBLE_EQ(e.sample(r), x);
}

TEST(Normal, PolarMethodSamplesMatchThePythonReference) {
  RandomStream r = RandomStream::derive(7, "golden.normal");
  const Normal n(1.0, 2.0);
  const double expected[] = {4.278834148245069, -1.2092322876604142, -0.5087937322629681,
                             -1.246600316052179};
  for (double x : expected) EXPECT_DOUBLE_EQ(n.sample(r), x);
}

// ---- Independence -------------------------------------------------------------------------------

std::vector<uint64_t> first_draws(RandomStream r, int k) {
  std::vector<uint64_t> out;
  for (int i = 0; i < k; ++i) out.push_back(r.next_u64());
  return out;
}

TEST(RandomStream, DeriveReproducesItself) {
  EXPECT_EQ(first_draws(RandomStream::derive(9, "x"), 20), first_draws(RandomStream::derive(9, "x"), 20));
}

TEST(RandomStream, DifferentSeedsOrNamesGiveDifferentStreams) {
  const auto base = first_draws(RandomStream::derive(9, "x"), 4);
  EXPECT_NE(base, first_draws(RandomStream::derive(10, "x"), 4));
  EXPECT_NE(base, first_draws(RandomStream::derive(9, "y"), 4));
  EXPECT_NE(base, first_draws(RandomStream::derive(9, "x").child("x"), 4));
}

TEST(RandomStream, ChildrenWithDifferentNamesDiffer) {
  const RandomStream parent = RandomStream::derive(3, "train.stragglers");
  EXPECT_NE(first_draws(parent.child("a"), 4), first_draws(parent.child("b"), 4));
}

TEST(RandomStream, AThousandComponentNamesGiveAThousandDistinctFirstDraws) {
  // 1000 values drawn at random from 2^64 collide with probability ~ 1000²/2^65 ≈ 3e-14, so any
  // repeat means two names map to the same stream.
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    seen.insert(RandomStream::derive(1, "worker." + std::to_string(i)).next_u64());
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(RandomStream, ChildIsTheStreamOfTheSlashJoinedPath) {
  EXPECT_EQ(first_draws(RandomStream::derive(5, "serve.arrivals").child("gpu3"), 8),
            first_draws(RandomStream::derive(5, "serve.arrivals/gpu3"), 8));
}

TEST(RandomStream, ChildDoesNotDependOnHowManyDrawsTheParentMade) {
  RandomStream parent = RandomStream::derive(5, "serve.arrivals");
  const auto before = first_draws(parent.child("gpu3"), 8);
  for (int i = 0; i < 1000; ++i) parent.next_u64();
  EXPECT_EQ(first_draws(parent.child("gpu3"), 8), before);
}

TEST(RandomStream, DrawingFromOneStreamDoesNotChangeAnother) {
  const auto alone = first_draws(RandomStream::derive(5, "b"), 8);
  RandomStream a = RandomStream::derive(5, "a");
  RandomStream b = RandomStream::derive(5, "b");
  for (int i = 0; i < 1000; ++i) a.next_u64();
  EXPECT_EQ(first_draws(b, 8), alone);
}

// ---- Statistical checks -----------------------------------------------------------------------
// N = 200000 draws from a fixed stream; the sample mean must lie within 5 standard errors of the
// closed form, SE(mean) = sqrt(var/N). For the sample variance, SE(s²) ≈ sqrt((mu4 - var²)/N), mu4
// the fourth central moment. A fixed seed makes each check deterministic: the 5-SE band is what a
// correct sampler meets with probability 1 - 6e-7, while a wrong algorithm (a factor, a missing
// term) moves the mean or variance by far more than 5 SE at this N.

constexpr int kN = 200000;

struct Moments {
  double mean;
  double variance;  // sample variance (n - 1)
};

Moments sample_moments(const std::function<double()>& draw) {
  double mean = 0.0, m2 = 0.0;
  for (int i = 1; i <= kN; ++i) {
    const double x = draw();
    const double d = x - mean;
    mean += d / i;
    m2 += d * (x - mean);
  }
  return {mean, m2 / (kN - 1)};
}

void expect_moments(const Moments& m, double mean, double var, double mu4) {
  const double se_mean = std::sqrt(var / kN);
  const double se_var = std::sqrt((mu4 - var * var) / kN);
  EXPECT_NEAR(m.mean, mean, 5.0 * se_mean) << "expected mean " << mean << ", SE " << se_mean;
  EXPECT_NEAR(m.variance, var, 5.0 * se_var) << "expected variance " << var << ", SE " << se_var;
}

TEST(Uniform, MomentsMatchTheClosedForm) {
  // U(a, b), w = b - a = 4: mean (a+b)/2 = 1, var w²/12 = 4/3, mu4 = w⁴/80 = 3.2.
  RandomStream r = RandomStream::derive(11, "test.uniform");
  const Uniform u(-1.0, 3.0);
  EXPECT_DOUBLE_EQ(u.mean(), 1.0);
  EXPECT_DOUBLE_EQ(u.variance(), 4.0 / 3.0);
  expect_moments(sample_moments([&] { return u.sample(r); }), 1.0, 4.0 / 3.0, 3.2);
}

TEST(Uniform, EqualBoundsGiveAPointMass) {
  RandomStream r = RandomStream::derive(11, "test.uniform");
  EXPECT_EQ(Uniform(2.5, 2.5).sample(r), 2.5);
}

TEST(Exponential, MomentsAndTailMatchTheClosedForm) {
  // Exp(rate 2): mean 1/2, var 1/4, mu4 = 9/rate⁴ = 9/16. The tail P(X > mean) = e^-1 checks the
  // shape, not just the moments: SE = sqrt(p(1-p)/N).
  RandomStream r = RandomStream::derive(11, "test.exponential");
  const Exponential e(2.0);
  EXPECT_DOUBLE_EQ(e.mean(), 0.5);
  int above_mean = 0;
  const Moments m = sample_moments([&] {
    const double x = e.sample(r);
    above_mean += x > 0.5 ? 1 : 0;
    return x;
  });
  expect_moments(m, 0.5, 0.25, 9.0 / 16.0);
  const double p = std::exp(-1.0);
  EXPECT_NEAR(static_cast<double>(above_mean) / kN, p, 5.0 * std::sqrt(p * (1 - p) / kN));
}

TEST(Normal, MomentsAndOneSigmaMassMatchTheClosedForm) {
  // N(3, 2²): mean 3, var 4, mu4 = 3σ⁴ = 48. P(|X - mu| < σ) = erf(1/sqrt 2) = 0.682689.
  RandomStream r = RandomStream::derive(11, "test.normal");
  const Normal n(3.0, 2.0);
  int within = 0;
  const Moments m = sample_moments([&] {
    const double x = n.sample(r);
    within += std::fabs(x - 3.0) < 2.0 ? 1 : 0;
    return x;
  });
  expect_moments(m, 3.0, 4.0, 48.0);
  const double p = std::erf(1.0 / std::sqrt(2.0));
  EXPECT_NEAR(static_cast<double>(within) / kN, p, 5.0 * std::sqrt(p * (1 - p) / kN));
}

TEST(Normal, ZeroSigmaGivesTheMean) {
  RandomStream r = RandomStream::derive(11, "test.normal");
  EXPECT_EQ(Normal(3.0, 0.0).sample(r), 3.0);
}

TEST(LogNormal, MomentsMatchTheClosedForm) {
  // exp(N(0.5, 0.5²)): mean e^(mu + σ²/2) = e^0.625, var (e^σ² - 1) e^(2mu + σ²) = (e^0.25 - 1) e^1.25.
  // Fourth central moment from the excess kurtosis e^(4σ²) + 2e^(3σ²) + 3e^(2σ²) - 6:
  // mu4 = (kurtosis + 3)·var².
  RandomStream r = RandomStream::derive(11, "test.lognormal");
  const LogNormal ln(0.5, 0.5);
  const double mean = std::exp(0.625);
  const double var = (std::exp(0.25) - 1.0) * std::exp(1.25);
  const double kurt = std::exp(1.0) + 2.0 * std::exp(0.75) + 3.0 * std::exp(0.5) - 6.0;
  EXPECT_DOUBLE_EQ(ln.mean(), mean);
  EXPECT_DOUBLE_EQ(ln.variance(), var);
  expect_moments(sample_moments([&] { return ln.sample(r); }), mean, var, (kurt + 3.0) * var * var);
}

TEST(LogNormal, FromMeanCvHasThatMeanAndCv) {
  // mean 10, cv 0.5: sigma² = ln(1.25), mu = ln 10 - sigma²/2; then mean e^(mu + sigma²/2) = 10 and
  // var = (e^sigma² - 1)·mean² = 0.25·100 = 25, so cv = 5/10 = 0.5.
  const LogNormal ln = LogNormal::from_mean_cv(10.0, 0.5);
  EXPECT_NEAR(ln.sigma(), std::sqrt(std::log(1.25)), 1e-15);
  EXPECT_NEAR(ln.mean(), 10.0, 1e-12);
  EXPECT_NEAR(ln.variance(), 25.0, 1e-11);
  RandomStream r = RandomStream::derive(11, "test.lognormal_cv");
  const Moments m = sample_moments([&] { return ln.sample(r); });
  EXPECT_NEAR(m.mean, 10.0, 5.0 * std::sqrt(25.0 / kN));
}

TEST(Gamma, MomentsMatchTheClosedFormAboveShapeOne) {
  // Gamma(k = 2.5, θ = 2): mean kθ = 5, var kθ² = 10, mu4 = 3k(k+2)θ⁴ = 3·2.5·4.5·16 = 540.
  RandomStream r = RandomStream::derive(11, "test.gamma");
  const Gamma g(2.5, 2.0);
  EXPECT_DOUBLE_EQ(g.mean(), 5.0);
  EXPECT_DOUBLE_EQ(g.variance(), 10.0);
  expect_moments(sample_moments([&] { return g.sample(r); }), 5.0, 10.0, 540.0);
}

TEST(Gamma, MomentsMatchTheClosedFormBelowShapeOne) {
  // Gamma(k = 0.4, θ = 3) takes the U^(1/k) boost path: mean 1.2, var 3.6,
  // mu4 = 3k(k+2)θ⁴ = 3·0.4·2.4·81 = 233.28.
  RandomStream r = RandomStream::derive(11, "test.gamma_small");
  const Gamma g(0.4, 3.0);
  expect_moments(sample_moments([&] { return g.sample(r); }), 1.2, 3.6, 233.28);
}

TEST(Gamma, ShapeOneIsExponential) {
  // Gamma(1, θ) = Exp(1/θ): P(X > θ) = e^-1, which checks the shape at the k = 1 boundary.
  RandomStream r = RandomStream::derive(11, "test.gamma_one");
  const Gamma g(1.0, 0.5);
  int above = 0;
  for (int i = 0; i < kN; ++i) above += g.sample(r) > 0.5 ? 1 : 0;
  const double p = std::exp(-1.0);
  EXPECT_NEAR(static_cast<double>(above) / kN, p, 5.0 * std::sqrt(p * (1 - p) / kN));
}

double harmonic(uint64_t n, double s) {
  // H(n, s) summed from the smallest term up (an independent order from Zipf's prefix sums).
  double h = 0.0;
  for (uint64_t k = n; k >= 1; --k) h += std::pow(static_cast<double>(k), -s);
  return h;
}

TEST(Zipf, FrequencyOfRankOneIsOneOverTheHarmonicNumber) {
  // n = 1000, s = 1: P(1) = 1/H(1000, 1) = 1/7.48547 = 0.13359; SE = sqrt(p(1-p)/N) = 7.6e-4.
  RandomStream r = RandomStream::derive(11, "test.zipf");
  const Zipf z(1000, 1.0);
  const double p1 = 1.0 / harmonic(1000, 1.0);
  EXPECT_NEAR(p1, 0.13359, 1e-5);
  EXPECT_NEAR(z.probability(1), p1, 1e-15);
  int ones = 0;
  uint64_t lo = 1000, hi = 1;
  for (int i = 0; i < kN; ++i) {
    const uint64_t k = z.sample_rank(r);
    ones += k == 1 ? 1 : 0;
    lo = std::min(lo, k);
    hi = std::max(hi, k);
  }
  EXPECT_NEAR(static_cast<double>(ones) / kN, p1, 5.0 * std::sqrt(p1 * (1 - p1) / kN));
  EXPECT_EQ(lo, 1u);
  EXPECT_LE(hi, 1000u);
}

TEST(Zipf, MeanIsTheRatioOfHarmonicNumbers) {
  // n = 100, s = 1.5: E[X] = sum k·k^-s / H = H(100, 0.5)/H(100, 1.5), E[X²] = H(100, -0.5)/H(100, 1.5),
  // var = E[X²] - E[X]²; the mean is checked to 5 SE = 5·sqrt(var/N).
  RandomStream r = RandomStream::derive(11, "test.zipf_mean");
  const Zipf z(100, 1.5);
  const double h = harmonic(100, 1.5);
  const double mean = harmonic(100, 0.5) / h;
  const double var = harmonic(100, -0.5) / h - mean * mean;
  EXPECT_NEAR(z.mean(), mean, 1e-12);
  const Moments m = sample_moments([&] { return z.sample(r); });
  EXPECT_NEAR(m.mean, mean, 5.0 * std::sqrt(var / kN));
}

TEST(Zipf, ASingleRankAlwaysReturnsOne) {
  RandomStream r = RandomStream::derive(11, "test.zipf_one");
  const Zipf z(1, 2.0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(z.sample_rank(r), 1u);
}

TEST(UniformInt, TenBinsPassAChiSquareTest) {
  // 10 equiprobable bins, N draws: chi² = sum (O - N/10)² / (N/10) with 9 degrees of freedom; its
  // 0.999 quantile is 27.88.
  RandomStream r = RandomStream::derive(11, "test.uniform_int");
  std::vector<int> counts(10, 0);
  for (int i = 0; i < kN; ++i) ++counts[static_cast<size_t>(r.uniform_int(10))];
  const double expected = kN / 10.0;
  double chi2 = 0.0;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 27.88);
}

TEST(UniformInt, HasNoModuloBiasForAHugeRange) {
  // n = 3·2^62: thirds of the range are [0, 2^62), [2^62, 2^63), [2^63, 3·2^62). A plain
  // next_u64() % n would put probability 1/2 on the first third (2^64 - n = 2^62 values wrap into
  // it); unbiased gives 1/3 each. chi² with 2 dof, 0.999 quantile 13.82; the biased version
  // would score ~ N/8 = 25000.
  RandomStream r = RandomStream::derive(11, "test.uniform_int_big");
  const uint64_t n = uint64_t{3} << 62;
  std::vector<int> counts(3, 0);
  for (int i = 0; i < kN; ++i) {
    const uint64_t x = r.uniform_int(n);
    ASSERT_LT(x, n);
    ++counts[static_cast<size_t>(x >> 62)];
  }
  const double expected = kN / 3.0;
  double chi2 = 0.0;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 13.82);
}

TEST(EmpiricalDiscrete, FrequenciesAndMeanMatchTheWeights) {
  // values {1, 2, 5, 10}, weights {1, 0, 2, 7} -> P = {0.1, 0, 0.2, 0.7};
  // mean = 0.1 + 1.0 + 7.0 = 8.1; E[X²] = 0.1 + 5 + 70 = 75.1, var = 75.1 - 65.61 = 9.49.
  RandomStream r = RandomStream::derive(11, "test.empirical_discrete");
  const EmpiricalDiscrete d({1.0, 2.0, 5.0, 10.0}, {1.0, 0.0, 2.0, 7.0});
  EXPECT_NEAR(d.mean(), 8.1, 1e-12);
  int ones = 0, twos = 0, fives = 0, tens = 0;
  const Moments m = sample_moments([&] {
    const double x = d.sample(r);
    ones += x == 1.0;
    twos += x == 2.0;
    fives += x == 5.0;
    tens += x == 10.0;
    return x;
  });
  EXPECT_EQ(ones + twos + fives + tens, kN);
  EXPECT_EQ(twos, 0);  // weight 0 is never drawn
  EXPECT_NEAR(m.mean, 8.1, 5.0 * std::sqrt(9.49 / kN));
  const auto within = [](int count, double p) {
    EXPECT_NEAR(static_cast<double>(count) / kN, p, 5.0 * std::sqrt(p * (1 - p) / kN));
  };
  within(ones, 0.1);
  within(fives, 0.2);
  within(tens, 0.7);
}

TEST(EmpiricalContinuous, QuantileInterpolatesTheOrderStatistics) {
  // Samples {3, 0, 1} sort to {0, 1, 3}; h = u(n-1) = 2u. Q(0.25): h = 0.5 -> 0 + 0.5·1 = 0.5;
  // Q(0.5) = 1; Q(0.75): h = 1.5 -> 1 + 0.5·2 = 2.
  const EmpiricalContinuous e({3.0, 0.0, 1.0});
  EXPECT_EQ(e.quantile(0.0), 0.0);
  EXPECT_EQ(e.quantile(0.25), 0.5);
  EXPECT_EQ(e.quantile(0.5), 1.0);
  EXPECT_EQ(e.quantile(0.75), 2.0);
  EXPECT_EQ(e.quantile(1.0), 3.0);
}

TEST(EmpiricalContinuous, MeanAndMedianMatchThePiecewiseLinearDistribution) {
  // {0, 1, 3}: two segments of mass 1/2, uniform on [0,1] and [1,3]: mean (0.5 + 2)/2 = 1.25.
  // E[X²] = ((0+0+1)/3 + (1+3+9)/3)/2 = 7/3, var = 7/3 - 1.5625 = 0.7708. P(X < 1) = 1/2.
  RandomStream r = RandomStream::derive(11, "test.empirical_continuous");
  const EmpiricalContinuous e({3.0, 0.0, 1.0});
  EXPECT_DOUBLE_EQ(e.mean(), 1.25);
  int below = 0;
  const Moments m = sample_moments([&] {
    const double x = e.sample(r);
    below += x < 1.0;
    return x;
  });
  EXPECT_NEAR(m.mean, 1.25, 5.0 * std::sqrt((7.0 / 3.0 - 1.5625) / kN));
  EXPECT_NEAR(static_cast<double>(below) / kN, 0.5, 5.0 * std::sqrt(0.25 / kN));
}

TEST(EmpiricalContinuous, OneSampleIsAPointMass) {
  RandomStream r = RandomStream::derive(11, "test.empirical_one");
  const EmpiricalContinuous e({4.0});
  EXPECT_EQ(e.sample(r), 4.0);
  EXPECT_EQ(e.mean(), 4.0);
}

// ---- Error paths ------------------------------------------------------------------------------

void expect_input_error(const std::function<void()>& make, const std::string& key) {
  try {
    make();
    ADD_FAILURE() << "expected an InputError for key '" << key << "'";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, key);
    EXPECT_NE(e.message().find(key), std::string::npos) << "message does not name the key: " << e.message();
  }
}

TEST(Distributions, InvalidParametersThrowInputErrorNamingTheParameter) {
  const double inf = INFINITY;
  const double nan = NAN;
  expect_input_error([] { Uniform{2.0, 1.0}; }, "b");
  expect_input_error([&] { Uniform{nan, 1.0}; }, "a");
  expect_input_error([] { Uniform{-1e308, 1e308}; }, "b");  // b - a overflows
  expect_input_error([] { Exponential{0.0}; }, "rate");
  expect_input_error([] { Exponential{-1.0}; }, "rate");
  expect_input_error([&] { Exponential{inf}; }, "rate");
  expect_input_error([&] { Exponential{nan}; }, "rate");
  expect_input_error([] { Normal{0.0, -0.1}; }, "sigma");
  expect_input_error([&] { Normal{inf, 1.0}; }, "mu");
  expect_input_error([] { LogNormal{0.0, -1.0}; }, "sigma");
  expect_input_error([] { LogNormal::from_mean_cv(0.0, 1.0); }, "mean");
  expect_input_error([] { LogNormal::from_mean_cv(1.0, -1.0); }, "cv");
  expect_input_error([] { Gamma{0.0, 1.0}; }, "shape");
  expect_input_error([] { Gamma{-2.0, 1.0}; }, "shape");
  expect_input_error([] { Gamma{1.0, 0.0}; }, "scale");
  expect_input_error([] { Zipf{0, 1.0}; }, "n");
  expect_input_error([] { Zipf{Zipf::kMaxN + 1, 1.0}; }, "n");
  expect_input_error([] { Zipf{10, 0.0}; }, "s");
  expect_input_error([] { EmpiricalDiscrete{{}, {}}; }, "values");
  expect_input_error([] { EmpiricalDiscrete{{1.0, 2.0}, {1.0}}; }, "weights");
  expect_input_error([] { EmpiricalDiscrete{{1.0, 2.0}, {1.0, -0.5}}; }, "weights");
  expect_input_error([] { EmpiricalDiscrete{{1.0, 2.0}, {0.0, 0.0}}; }, "weights");
  expect_input_error([&] { EmpiricalDiscrete{{1.0, 2.0}, {1.0, nan}}; }, "weights");
  expect_input_error([] { EmpiricalContinuous{{}}; }, "samples");
  expect_input_error([&] { EmpiricalContinuous{{1.0, inf}}; }, "samples");
}

TEST(Distributions, ErrorsCarryTheCallersWhere) {
  try {
    Exponential(-1.0, Where{"serve.yaml", 12, "serve.arrivals"});
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "serve.arrivals.rate");
    EXPECT_EQ(std::string(e.what()),
              "serve.yaml:12: serve.arrivals.rate: rate must be positive and finite, got -1");
  }
}

}  // namespace
}  // namespace orrery
