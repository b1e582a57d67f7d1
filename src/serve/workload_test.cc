#include "serve/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/stats.h"

namespace orrery::serve {
namespace {

// Moment checks: with n i.i.d. samples, the sample mean has standard error sd/sqrt(n) and the sample
// variance S² has standard error sqrt((mu4 - sigma^4)/n) (mu4 the fourth central moment). A check
// passes when the estimate is within 5 standard errors (a false alarm once in ~1.7 million runs);
// the seeds are fixed, so the tests are deterministic.
constexpr double kZ = 5.0;

std::vector<Request> drain(RequestSource& s) {
  std::vector<Request> out;
  while (std::optional<Request> r = s.next()) out.push_back(*r);
  return out;
}

// Inter-arrival gaps in seconds of n requests from `arrivals`.
RunningStats gap_stats(std::unique_ptr<ArrivalProcess> arrivals, int64_t n, uint64_t seed) {
  std::vector<RequestType> types;
  types.push_back({"t", 1.0, LengthDistribution::fixed(1), LengthDistribution::fixed(1)});
  SyntheticSource src(std::move(arrivals), std::move(types), seed, n);
  RunningStats gaps;
  Time prev = Time::zero();
  while (std::optional<Request> r = src.next()) {
    gaps.add((r->arrival - prev).to_seconds());
    prev = r->arrival;
  }
  return gaps;
}

RunningStats length_stats(const LengthDistribution& d, int64_t n, uint64_t seed) {
  RandomStream rng = RandomStream::derive(seed, "test.lengths");
  RunningStats s;
  for (int64_t i = 0; i < n; ++i) s.add(static_cast<double>(d.sample(rng)));
  return s;
}

// ---- Arrivals ----

TEST(PoissonArrivals, GapsHaveMeanAndVarianceOfTheExponential) {
  // Exponential(rate 4/s): mean 1/4 = 0.25 s, variance 1/16 s², mu4 = 9/rate^4, so
  // SE(mean) = 0.25/sqrt(n) and SE(S²) = sqrt((9 - 1)/n)/rate² = sqrt(8/n)/16.
  const int64_t n = 200'000;
  const RunningStats g = gap_stats(std::make_unique<PoissonArrivals>(4.0), n, 11);
  ASSERT_EQ(g.count(), n);
  EXPECT_NEAR(g.mean(), 0.25, kZ * 0.25 / std::sqrt(n));
  EXPECT_NEAR(g.variance(), 1.0 / 16.0, kZ * std::sqrt(8.0 / n) / 16.0);
}

TEST(GammaArrivals, GapsHaveTheRequestedRateAndCv) {
  // rate 2/s, cv 2: shape k = 1/cv² = 0.25, scale θ = 1/(rate·k) = 2. Mean kθ = 0.5 s, variance
  // kθ² = 1 s² (= cv²/rate²). Gamma's fourth central moment is 3k(k+2)θ^4, so
  // mu4 - sigma^4 = (3k(k+2) - k²)θ^4 = (2k² + 6k)θ^4 = (0.125 + 1.5)·16 = 26.
  const int64_t n = 400'000;
  const RunningStats g = gap_stats(std::make_unique<GammaArrivals>(2.0, 2.0), n, 12);
  EXPECT_NEAR(g.mean(), 0.5, kZ * 1.0 / std::sqrt(n));
  EXPECT_NEAR(g.variance(), 1.0, kZ * std::sqrt(26.0 / n));
}

TEST(GammaArrivals, CvBelowOneIsSmootherThanPoisson) {
  // cv 0.5: k = 4, θ = 1/(rate·4) with rate 10 -> θ = 0.025; mean 0.1 s, variance 0.0025 s²,
  // mu4 - sigma^4 = (2·16 + 24)θ^4 = 56·0.025^4.
  const int64_t n = 200'000;
  const RunningStats g = gap_stats(std::make_unique<GammaArrivals>(10.0, 0.5), n, 13);
  EXPECT_NEAR(g.mean(), 0.1, kZ * 0.05 / std::sqrt(n));
  EXPECT_NEAR(g.variance(), 0.0025, kZ * std::sqrt(56.0 / n) * std::pow(0.025, 2));
}

TEST(GammaArrivals, RejectsNonPositiveRateOrCv) {
  EXPECT_THROW(GammaArrivals(0.0, 1.0), InputError);
  EXPECT_THROW(GammaArrivals(1.0, 0.0), InputError);
  EXPECT_THROW(PoissonArrivals(-1.0), InputError);
  try {
    GammaArrivals(1.0, -2.0, Where{"w.yaml", 4, "serve.arrivals"});
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().to_string(), "w.yaml:4: serve.arrivals.cv");
  }
}

TEST(TraceShapedArrivals, ReplaysTheGapsScaledToTheTargetRateAndCycles) {
  // Gaps 1, 2, 3 s: mean gap 2 s, native rate 0.5/s. Target 1/s halves every gap: 0.5, 1, 1.5, then
  // the list starts again.
  TraceShapedArrivals a({1.0, 2.0, 3.0}, 1.0);
  RandomStream rng = RandomStream::derive(1, "unused");
  const std::vector<double> expected = {0.5, 1.0, 1.5, 0.5, 1.0};
  for (double e : expected) EXPECT_EQ(a.next_gap(rng), Time::seconds(e));
  EXPECT_DOUBLE_EQ(a.rate(), 1.0);
}

TEST(TraceShapedArrivals, RejectsEmptyOrAllZeroGaps) {
  EXPECT_THROW(TraceShapedArrivals({}, 1.0), InputError);
  EXPECT_THROW(TraceShapedArrivals({0.0, 0.0}, 1.0), InputError);
  EXPECT_THROW(TraceShapedArrivals({1.0, -1.0}, 1.0), InputError);
}

TEST(InterarrivalGaps, NRequestsGiveNMinusOneGaps) {
  // Trace-shaped source with gaps 1, 3 at native rate 0.5 (mean gap 2): arrivals at 1, 4, 5, 8 s;
  // gaps between them 3, 1, 3.
  std::vector<RequestType> types;
  types.push_back({"t", 1.0, LengthDistribution::fixed(5), LengthDistribution::fixed(5)});
  SyntheticSource src(std::make_unique<TraceShapedArrivals>(std::vector<double>{1.0, 3.0}, 0.5), std::move(types),
                      1, 4);
  const std::vector<double> gaps = interarrival_gaps(src);
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_DOUBLE_EQ(gaps[0], 3.0);
  EXPECT_DOUBLE_EQ(gaps[1], 1.0);
  EXPECT_DOUBLE_EQ(gaps[2], 3.0);
}

// ---- Lengths ----

TEST(LengthDistribution, FixedAlwaysGivesItsValue) {
  const LengthDistribution d = LengthDistribution::fixed(512);
  RandomStream rng = RandomStream::derive(1, "x");
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d.sample(rng), 512);
  EXPECT_THROW(LengthDistribution::fixed(0), InputError);
}

TEST(LengthDistribution, UniformCoversLoToHiWithDiscreteUniformMoments) {
  // {10..20}: m = 11 values, mean (10+20)/2 = 15, variance (m²-1)/12 = 10; SE(mean) = sqrt(10/n).
  // Fourth central moment of a discrete uniform: (m²-1)(3m²-7)/240 = 120·356/240 = 178.
  const int64_t n = 200'000;
  const LengthDistribution d = LengthDistribution::uniform(10, 20);
  EXPECT_DOUBLE_EQ(d.mean(), 15.0);
  const RunningStats s = length_stats(d, n, 21);
  EXPECT_EQ(s.min(), 10.0);
  EXPECT_EQ(s.max(), 20.0);
  EXPECT_NEAR(s.mean(), 15.0, kZ * std::sqrt(10.0 / n));
  EXPECT_NEAR(s.variance(), 10.0, kZ * std::sqrt((178.0 - 100.0) / n));
  EXPECT_THROW(LengthDistribution::uniform(5, 4), InputError);
  EXPECT_THROW(LengthDistribution::uniform(0, 4), InputError);
}

TEST(LengthDistribution, LognormalMatchesTheClosedFormMean) {
  // mu 6, sigma 0.5: mean exp(mu + sigma²/2) = exp(6.125) = 457.14, variance
  // (exp(sigma²) - 1)·exp(2mu + sigma²) = (e^0.25 - 1)·e^12.25 = 59,345; SE(mean) = sqrt(var/n).
  // Rounding to integers moves the mean by far less than 0.01 for so smooth a density, and
  // P(X < 1) = Phi(-12) is nil, so clamping is negligible.
  const int64_t n = 200'000;
  const double mean = std::exp(6.125);
  const double var = (std::exp(0.25) - 1.0) * std::exp(12.25);
  const LengthDistribution d = LengthDistribution::lognormal(6.0, 0.5);
  EXPECT_NEAR(d.mean(), mean, 1e-9 * mean);
  const RunningStats s = length_stats(d, n, 22);
  EXPECT_NEAR(s.mean(), mean, kZ * std::sqrt(var / n));
}

TEST(LengthDistribution, LognormalIsClampedToItsBounds) {
  // sigma 3 spreads samples over many decades; the clamp [100, 200] must hold for every one.
  const LengthDistribution d = LengthDistribution::lognormal(5.0, 3.0, 100, 200);
  const RunningStats s = length_stats(d, 10'000, 23);
  EXPECT_EQ(s.min(), 100.0);
  EXPECT_EQ(s.max(), 200.0);
  EXPECT_THROW(LengthDistribution::lognormal(5.0, 1.0, 10, 9), InputError);
}

TEST(LengthDistribution, ZipfMatchesTheHarmonicRatioMean) {
  // Zipf(n=100, s=1.2): P(k) = k^-s/H(100, s); mean H(100, s-1)/H(100, s), E[X²] = H(100, s-2)/H(100, s),
  // the sums computed here independently of core/random.cc.
  const int64_t n = 200'000;
  double h0 = 0.0, h1 = 0.0, h2 = 0.0;
  for (int k = 1; k <= 100; ++k) {
    h0 += std::pow(k, -1.2);
    h1 += std::pow(k, -0.2);
    h2 += std::pow(k, 0.8);
  }
  const double mean = h1 / h0;
  const double var = h2 / h0 - mean * mean;
  const LengthDistribution d = LengthDistribution::zipf(100, 1.2);
  EXPECT_NEAR(d.mean(), mean, 1e-9 * mean);
  const RunningStats s = length_stats(d, n, 24);
  EXPECT_GE(s.min(), 1.0);
  EXPECT_LE(s.max(), 100.0);
  EXPECT_NEAR(s.mean(), mean, kZ * std::sqrt(var / n));
}

TEST(LengthDistribution, EmpiricalDrawsValuesInProportionToWeights) {
  // values 100, 200, 400 with weights 1, 2, 1: mean (100 + 2·200 + 400)/4 = 225,
  // E[X²] = (10^4 + 2·4·10^4 + 16·10^4)/4 = 62,500, variance 62,500 - 225² = 11,875.
  const int64_t n = 200'000;
  const LengthDistribution d = LengthDistribution::empirical({100, 200, 400}, {1.0, 2.0, 1.0});
  EXPECT_DOUBLE_EQ(d.mean(), 225.0);
  const RunningStats s = length_stats(d, n, 25);
  EXPECT_NEAR(s.mean(), 225.0, kZ * std::sqrt(11'875.0 / n));
  EXPECT_THROW(LengthDistribution::empirical({0, 5}, {1.0, 1.0}), InputError);
}

TEST(LengthDistribution, EmpiricalContinuousStaysWithinTheSampleRange) {
  // Piecewise-linear quantile through {10, 20, 40}: mean (sum - (min + max)/2)/(n - 1) = (70 - 25)/2 = 22.5;
  // uniform on [10, 20] half the time and [20, 40] half the time, variance
  // E[X²] - 22.5² = (0.5·(10²+10·20+20²)/3 + 0.5·(20²+20·40+40²)/3) - 506.25 = 700 - 506.25 = 193.75.
  const int64_t n = 200'000;
  const LengthDistribution d = LengthDistribution::empirical_continuous({40.0, 10.0, 20.0});
  EXPECT_DOUBLE_EQ(d.mean(), 22.5);
  const RunningStats s = length_stats(d, n, 26);
  EXPECT_EQ(s.min(), 10.0);
  EXPECT_EQ(s.max(), 40.0);
  EXPECT_NEAR(s.mean(), 22.5, kZ * std::sqrt(193.75 / n) + 0.01);  // + rounding bias bound
}

// ---- Mixes, determinism, scaling ----

std::vector<RequestType> two_type_mix() {
  // The WAIT paper's two-type synthetic mix shape: 70% short, 30% long.
  std::vector<RequestType> types;
  types.push_back({"short", 0.7, LengthDistribution::fixed(512), LengthDistribution::fixed(20)});
  types.push_back({"long", 0.3, LengthDistribution::fixed(1024), LengthDistribution::fixed(100)});
  return types;
}

TEST(SyntheticSource, MixDrawsTypesInProportionToWeights) {
  // Fraction of "short" is binomial: SE = sqrt(p(1-p)/n) with p = 0.7.
  const int64_t n = 100'000;
  SyntheticSource src(std::make_unique<PoissonArrivals>(10.0), two_type_mix(), 7, n);
  int64_t shorts = 0, total = 0;
  while (std::optional<Request> r = src.next()) {
    ++total;
    if (r->type == 0) {
      ++shorts;
      EXPECT_EQ(r->prompt_tokens, 512);
    } else {
      EXPECT_EQ(r->output_tokens, 100);
    }
  }
  ASSERT_EQ(total, n);
  EXPECT_NEAR(static_cast<double>(shorts) / n, 0.7, kZ * std::sqrt(0.7 * 0.3 / n));
}

TEST(SyntheticSource, SameSeedGivesTheSameStreamAndAnotherSeedDoesNot) {
  auto run = [](uint64_t seed) {
    std::unique_ptr<RequestSource> s = default_workload(seed, 1000);
    return drain(*s);
  };
  const std::vector<Request> a = run(42), b = run(42), c = run(43);
  ASSERT_EQ(a.size(), 1000u);
  ASSERT_EQ(b.size(), a.size());
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, static_cast<int64_t>(i));
    EXPECT_EQ(a[i].arrival, b[i].arrival);
    EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
    EXPECT_EQ(a[i].output_tokens, b[i].output_tokens);
    if (a[i].arrival != c[i].arrival) ++differing;
  }
  EXPECT_GT(differing, 990);  // continuous gaps: a coincidence between seeds is essentially impossible
}

TEST(SyntheticSource, AddingATypeDoesNotShiftAnotherTypesLengths) {
  // Each type's lengths come from its own stream "serve.lengths/<name>/...": the k-th "a" request
  // has the same prompt length whether or not a type "b" is in the mix.
  auto a_prompts = [](bool with_b) {
    std::vector<RequestType> types;
    types.push_back({"a", 1.0, LengthDistribution::uniform(1, 1'000'000), LengthDistribution::fixed(1)});
    if (with_b) types.push_back({"b", 1.0, LengthDistribution::uniform(1, 1'000'000), LengthDistribution::fixed(1)});
    SyntheticSource src(std::make_unique<PoissonArrivals>(1.0), std::move(types), 5, 2000);
    std::vector<int64_t> out;
    while (std::optional<Request> r = src.next()) {
      if (r->type == 0) out.push_back(r->prompt_tokens);
    }
    return out;
  };
  const std::vector<int64_t> alone = a_prompts(false), mixed = a_prompts(true);
  ASSERT_GT(mixed.size(), 500u);
  for (size_t i = 0; i < mixed.size(); ++i) EXPECT_EQ(mixed[i], alone[i]) << "request " << i;
}

TEST(SyntheticSource, StopsAtTheDuration) {
  // Gaps of exactly 1 s (trace-shaped with one gap): arrivals at 1, 2, ..., so a 10.5 s horizon
  // admits 10 requests even though 100 are allowed.
  std::vector<RequestType> types;
  types.push_back({"t", 1.0, LengthDistribution::fixed(1), LengthDistribution::fixed(1)});
  SyntheticSource src(std::make_unique<TraceShapedArrivals>(std::vector<double>{1.0}, 1.0), std::move(types), 1,
                      100, Time::ms(10'500));
  const std::vector<Request> all = drain(src);
  ASSERT_EQ(all.size(), 10u);
  EXPECT_EQ(all.back().arrival, Time::seconds(10.0));
  EXPECT_FALSE(src.next().has_value());
}

TEST(SyntheticSource, RejectsBadTypeLists) {
  auto make = [](std::vector<RequestType> types) {
    SyntheticSource s(std::make_unique<PoissonArrivals>(1.0), std::move(types), 1, 10);
  };
  EXPECT_THROW(make({}), InputError);
  std::vector<RequestType> dup = two_type_mix();
  dup[1].name = "short";
  EXPECT_THROW(make(dup), InputError);
  std::vector<RequestType> slash = two_type_mix();
  slash[0].name = "a/b";  // would alias the stream of a type "a"'s child "b"
  EXPECT_THROW(make(slash), InputError);
  std::vector<RequestType> zero = two_type_mix();
  zero[0].weight = 0.0;
  try {
    make(zero);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "types[0].weight");
  }
}

TEST(RateScaledSource, DoublingTheRateHalvesEveryInterArrivalGap) {
  // Same seed, same stream; factor 2 maps t -> t0 + (t - t0)/2, so each gap halves (to within the
  // 1 ps rounding of each arrival) and lengths are unchanged.
  const std::vector<Request> base = drain(*default_workload(9, 500));
  RateScaledSource scaled(default_workload(9, 500), 2.0);
  const std::vector<Request> fast = drain(scaled);
  ASSERT_EQ(fast.size(), base.size());
  EXPECT_EQ(fast[0].arrival, base[0].arrival);
  for (size_t i = 1; i < base.size(); ++i) {
    const int64_t gap = (base[i].arrival - base[i - 1].arrival).picoseconds();
    const int64_t half = (fast[i].arrival - fast[i - 1].arrival).picoseconds();
    EXPECT_LE(std::llabs(2 * half - gap), 2) << "request " << i;
    EXPECT_EQ(fast[i].prompt_tokens, base[i].prompt_tokens);
  }
  EXPECT_THROW(RateScaledSource(default_workload(9, 1), 0.0), InputError);
}

TEST(ReArrivedSource, KeepsLengthsAndReplacesArrivals) {
  // Lengths from a 3-request source with 100 s gaps; new arrivals every 0.5 s (trace-shaped, one gap).
  std::vector<RequestType> types;
  types.push_back({"t", 1.0, LengthDistribution::uniform(1, 1000), LengthDistribution::uniform(1, 1000)});
  const std::vector<Request> orig = drain(*std::make_unique<SyntheticSource>(
      std::make_unique<TraceShapedArrivals>(std::vector<double>{100.0}, 0.01), types, 3, 3));
  ReArrivedSource re(std::make_unique<SyntheticSource>(
                         std::make_unique<TraceShapedArrivals>(std::vector<double>{100.0}, 0.01), types, 3, 3),
                     std::make_unique<TraceShapedArrivals>(std::vector<double>{0.5}, 2.0), 1);
  const std::vector<Request> got = drain(re);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].arrival, Time::ms(500 * static_cast<int64_t>(i + 1)));
    EXPECT_EQ(got[i].prompt_tokens, orig[i].prompt_tokens);
    EXPECT_EQ(got[i].output_tokens, orig[i].output_tokens);
  }
}

TEST(SyntheticSource, ArrivalsBeyondTheRangeOfTimeAreAnErrorNotAnOverflow) {
  // Gaps of 1e6 s: the tenth arrival would be at 1e7 s > 9.2e6 s, the int64-picosecond range.
  std::vector<RequestType> types;
  types.push_back({"t", 1.0, LengthDistribution::fixed(1), LengthDistribution::fixed(1)});
  SyntheticSource src(std::make_unique<TraceShapedArrivals>(std::vector<double>{1e6}, 1e-6), std::move(types), 1,
                      100);
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(src.next().has_value());
  EXPECT_THROW(src.next(), InputError);
  // Slowing a long stream down 1000-fold overflows the same way.
  RateScaledSource slow(default_workload(1, 1000), 1e-4);  // ~180 s of arrivals -> 1.8e6 s: fits
  EXPECT_EQ(drain(slow).size(), 1000u);
  RateScaledSource slower(default_workload(1, 1000), 1e-5);  // -> 1.8e7 s: does not
  EXPECT_THROW(drain(slower), InputError);
}

TEST(TakeSource, StopsAfterN) {
  TakeSource t(default_workload(1, 100), 7);
  EXPECT_EQ(drain(t).size(), 7u);
}

// ---- The default workload and bounded memory ----

// Resident set size in bytes from /proc/self/statm (Linux), or -1 when unavailable.
int64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages_total = 0, pages_resident = 0;
  if (!(f >> pages_total >> pages_resident)) return -1;
  return pages_resident * 4096;
}

// Standard normal CDF.
double phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Mean of min(max(X, lo), hi) for X ~ LogNormal(mu, sigma), using the partial expectations
// E[X; X > c] = e^(mu + sigma²/2)·Phi((mu + sigma² - ln c)/sigma) and E[X; X < c] = e^(mu + sigma²/2)·
// Phi((ln c - mu - sigma²)/sigma), P(X > c) = Phi((mu - ln c)/sigma):
//   mean = E[X] - (E[X; X > hi] - hi·P(X > hi)) + (lo·P(X < lo) - E[X; X < lo]).
double clamped_lognormal_mean(double mu, double sigma, double lo, double hi) {
  const double m = std::exp(mu + sigma * sigma / 2);
  const double over = m * phi((mu + sigma * sigma - std::log(hi)) / sigma) - hi * phi((mu - std::log(hi)) / sigma);
  const double under = lo * phi((std::log(lo) - mu) / sigma) - m * phi((std::log(lo) - mu - sigma * sigma) / sigma);
  return m - over + under;
}

TEST(DefaultWorkload, StreamsAMillionRequestsInBoundedMemoryWithTheFittedMoments) {
  // One million requests are pulled and folded into running statistics, never stored; holding them
  // would take >= 1e6 · sizeof(Request) = 56 MB, so a resident-set growth under 16 MiB shows that
  // nothing accumulates. Expected values, from the fitted constants:
  //   gaps     mean 1/kAzureConvRate = 0.18083 s, sd cv/rate = 0.19786 s; CV 1.0942.
  //   prompt   clamped lognormal(6.633313, 0.985154) on [2, 14050]: clamped_lognormal_mean = 1226.5
  //            (1234.7 unclamped; P(X > 14050) = 0.0015).
  //   output   clamped lognormal(5.018997, 0.859009) on [7, 1000]: 213.0 (218.75 unclamped;
  //            P(X > 1000) = 0.014 removes 5.8 tokens on average).
  // The sample means must lie within 5 standard errors, with the sample sd as the standard deviation
  // (rounding to whole tokens moves a mean by far less than one standard error here).
  const int64_t n = 1'000'000;
  const int64_t rss0 = resident_bytes();
  std::unique_ptr<RequestSource> src = default_workload(2024, n);
  RunningStats gaps, prompt, output;
  Time prev = Time::zero();
  int64_t count = 0;
  while (std::optional<Request> r = src->next()) {
    ++count;
    gaps.add((r->arrival - prev).to_seconds());
    prev = r->arrival;
    prompt.add(static_cast<double>(r->prompt_tokens));
    output.add(static_cast<double>(r->output_tokens));
  }
  const int64_t rss1 = resident_bytes();
  EXPECT_EQ(count, n);
  EXPECT_NEAR(gaps.mean(), 1.0 / kAzureConvRate, kZ * (kAzureConvInterarrivalCv / kAzureConvRate) / std::sqrt(n));
  EXPECT_NEAR(gaps.stddev() / gaps.mean(), kAzureConvInterarrivalCv, 0.01);  // sd of the sample CV ≈ 0.003 here
  const double prompt_mean = clamped_lognormal_mean(kAzureConvPromptMu, kAzureConvPromptSigma, kAzureConvPromptMin,
                                                    kAzureConvPromptMax);
  const double output_mean = clamped_lognormal_mean(kAzureConvOutputMu, kAzureConvOutputSigma, kAzureConvOutputMin,
                                                    kAzureConvOutputMax);
  EXPECT_NEAR(prompt.mean(), prompt_mean, kZ * prompt.stddev() / std::sqrt(n));
  EXPECT_NEAR(output.mean(), output_mean, kZ * output.stddev() / std::sqrt(n));
  EXPECT_GE(prompt.min(), static_cast<double>(kAzureConvPromptMin));
  EXPECT_EQ(prompt.max(), static_cast<double>(kAzureConvPromptMax));
  EXPECT_GE(output.min(), static_cast<double>(kAzureConvOutputMin));
  EXPECT_EQ(prompt.max(), static_cast<double>(kAzureConvPromptMax));
  EXPECT_LE(output.max(), static_cast<double>(kAzureConvOutputMax));
  if (rss0 < 0 || rss1 < 0) GTEST_SKIP() << "/proc/self/statm unavailable: memory bound not measured";
  EXPECT_LT(rss1 - rss0, int64_t{16} << 20);
}

}  // namespace
}  // namespace orrery::serve
