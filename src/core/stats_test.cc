#include "core/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/random.h"

namespace orrery {
namespace {

// ---- RunningStats -----------------------------------------------------------------------------

TEST(RunningStats, MatchesTheHandComputedMomentsOfASmallDataset) {
  // {2,4,4,4,5,5,7,9}: sum 40, mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32, so the population
  // variance is 32/8 = 4 and the sample variance 32/7.
  RunningStats s;
  for (double x : {2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0}) s.add(x);
  EXPECT_EQ(s.count(), 8);
  EXPECT_DOUBLE_EQ(s.sum(), 40.0);
  EXPECT_DOUBLE_EQ(s.mean(), 5.0);
  EXPECT_DOUBLE_EQ(s.population_variance(), 4.0);
  EXPECT_DOUBLE_EQ(s.variance(), 32.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.stddev(), std::sqrt(32.0 / 7.0));
  EXPECT_EQ(s.min(), 2.0);
  EXPECT_EQ(s.max(), 9.0);
}

TEST(RunningStats, StaysAccurateForALargeOffsetWhereTheNaiveFormulaFails) {
  // 1e9 + {4, 7, 13, 16}: two-pass mean 1e9 + 10, deviations ±6, ±3, sample variance
  // (36+9+9+36)/3 = 30. The one-pass E[x²] - E[x]² form cancels 1e18-sized terms whose rounding
  // (~1e18 · 2^-53 ≈ 100) exceeds the answer; Welford's update does not.
  RunningStats s;
  for (double x : {4.0, 7.0, 13.0, 16.0}) s.add(1e9 + x);
  EXPECT_DOUBLE_EQ(s.mean(), 1e9 + 10.0);
  EXPECT_NEAR(s.variance(), 30.0, 1e-6);
}

TEST(RunningStats, MergeEqualsAddingSequentially) {
  RandomStream r = RandomStream::derive(3, "test.running_stats");
  const Normal n(4.0, 3.0);
  std::vector<double> data(1000);
  for (double& x : data) x = n.sample(r);
  RunningStats all, a, b, c;
  for (size_t i = 0; i < data.size(); ++i) {
    all.add(data[i]);
    (i < 17 ? a : i < 600 ? b : c).add(data[i]);
  }
  RunningStats merged;
  merged.merge(a);  // into an empty accumulator
  merged.merge(b);
  merged.merge(RunningStats());  // merging an empty one changes nothing
  merged.merge(c);
  EXPECT_EQ(merged.count(), all.count());
  // Different summation orders agree to rounding: ~1e-15 relative, checked at 1e-12.
  EXPECT_NEAR(merged.mean(), all.mean(), 1e-12 * std::fabs(all.mean()));
  EXPECT_NEAR(merged.variance(), all.variance(), 1e-12 * all.variance());
  EXPECT_NEAR(merged.sum(), all.sum(), 1e-12 * std::fabs(all.sum()));
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
}

TEST(RunningStats, UndefinedMomentsAreNaN) {
  RunningStats s;
  EXPECT_TRUE(std::isnan(s.mean()));
  EXPECT_TRUE(std::isnan(s.min()));
  EXPECT_EQ(s.sum(), 0.0);
  s.add(3.0);
  EXPECT_EQ(s.mean(), 3.0);
  EXPECT_EQ(s.population_variance(), 0.0);
  EXPECT_TRUE(std::isnan(s.variance()));  // n - 1 = 0
}

// ---- ExactQuantiles ---------------------------------------------------------------------------

TEST(ExactQuantiles, Type7InterpolatesBetweenOrderStatistics) {
  // {1,2,3,4}, h = (n-1)q = 3q: q=0.5 -> h=1.5 -> x(1) + 0.5(x(2)-x(1)) = 2.5;
  // q=0.25 -> h=0.75 -> 1 + 0.75·1 = 1.75; q=0.9 -> h=2.7 -> 3.7 (numpy.quantile gives the same).
  ExactQuantiles e;
  for (double x : {4.0, 1.0, 3.0, 2.0}) e.add(x);
  EXPECT_DOUBLE_EQ(e.quantile(0.5), 2.5);
  EXPECT_DOUBLE_EQ(e.quantile(0.25), 1.75);
  EXPECT_DOUBLE_EQ(e.quantile(0.9), 3.7);
  EXPECT_EQ(e.quantile(0.0), 1.0);
  EXPECT_EQ(e.quantile(1.0), 4.0);
}

TEST(ExactQuantiles, AddingAfterAQuerySortsAgain) {
  ExactQuantiles e;
  for (double x : {1.0, 2.0, 3.0}) e.add(x);
  EXPECT_EQ(e.quantile(0.5), 2.0);
  e.add(0.0);  // {0,1,2,3}: h = 1.5 -> 1.5
  EXPECT_DOUBLE_EQ(e.quantile(0.5), 1.5);
  ExactQuantiles other;
  other.add(-10.0);
  e.merge(other);  // {-10,0,1,2,3}: median x(2) = 1
  EXPECT_EQ(e.quantile(0.5), 1.0);
  EXPECT_EQ(e.count(), 5);
}

TEST(ExactQuantiles, EmptyIsNaNAndOneSampleIsThatSample) {
  ExactQuantiles e;
  EXPECT_TRUE(std::isnan(e.quantile(0.5)));
  e.add(7.0);
  EXPECT_EQ(e.quantile(0.99), 7.0);
}

TEST(ExactQuantiles, AQuantileOutsideTheUnitIntervalIsAnInputError) {
  ExactQuantiles e;
  e.add(1.0);
  EXPECT_THROW(e.quantile(1.5), InputError);
  EXPECT_THROW(e.quantile(-0.1), InputError);
  EXPECT_THROW(e.quantile(std::nan("")), InputError);
  try {
    e.quantile(99.0);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& err) {
    EXPECT_EQ(err.where().key, "q");
  }
}

// ---- QuantileSketch ---------------------------------------------------------------------------

// The DDSketch q-quantile rank: 0-based floor(q(n-1)) in sorted order (see stats.h).
size_t ddsketch_rank(size_t n, double q) {
  return static_cast<size_t>(std::floor(q * static_cast<double>(n - 1)));
}

double ddsketch_rank_value(const std::vector<double>& sorted, double q) {
  return sorted[ddsketch_rank(sorted.size(), q)];
}

// The exact DDSketch q-quantiles for ascending qs, by successive nth_element on the shrinking tail:
// a few passes over the data instead of a full sort, which takes seconds on 2M values in Debug.
std::vector<double> exact_rank_values(std::vector<double>& data, const std::vector<double>& ascending_qs) {
  std::vector<double> out;
  auto lo = data.begin();
  for (double q : ascending_qs) {
    const auto kth = data.begin() + static_cast<std::ptrdiff_t>(ddsketch_rank(data.size(), q));
    std::nth_element(lo, kth, data.end());
    out.push_back(*kth);
    lo = kth;
  }
  return out;
}

// |estimate - exact| <= alpha·|exact|. The 1e-9 relative slack only absorbs rounding in log/exp at a
// bucket edge (the bound is attained there); a wrong representative such as gamma^i errs by ~2·alpha.
void expect_within_alpha(double estimate, double exact, double alpha, double q) {
  EXPECT_LE(std::fabs(estimate - exact), alpha * std::fabs(exact) * (1.0 + 1e-9))
      << "q = " << q << ": estimate " << estimate << ", exact " << exact;
}

TEST(QuantileSketch, LognormalQuantilesAreWithinAlphaOfTheExactOrderStatistics) {
  // 2,000,000 samples of exp(N(0, 1.5²)) span about e^±8, i.e. ~1600 buckets of ln(gamma) ≈ 0.01:
  // below the 2048 cap, so nothing collapses and the alpha guarantee applies at every quantile.
  constexpr int kN = 2000000;
  RandomStream r = RandomStream::derive(1, "test.sketch_lognormal");
  const LogNormal ln(0.0, 1.5);
  QuantileSketch sketch;  // alpha 0.005, 2048 buckets
  std::vector<double> data(kN);
  for (double& x : data) {
    x = ln.sample(r);
    sketch.add(x);
  }
  EXPECT_EQ(sketch.count(), kN);
  EXPECT_FALSE(sketch.collapsed());
  const std::vector<double> qs = {0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0};
  const std::vector<double> exact = exact_rank_values(data, qs);
  for (size_t i = 0; i < qs.size(); ++i) expect_within_alpha(sketch.quantile(qs[i]), exact[i], 0.005, qs[i]);
  // Memory: two stores of at most 2048 int64 counters plus the header (stats.h). 16·2048 = 32 KiB,
  // so about 0.0016% of the 16 MB the samples take.
  EXPECT_LE(sketch.memory_bytes(), static_cast<int64_t>(sizeof(QuantileSketch)) + 16 * 2048);
}

TEST(QuantileSketch, NegativeValuesAndZerosAreOrderedCorrectly) {
  // N(0, 10²) with every fifth sample replaced by an exact 0: the 0-valued order statistics must
  // come back as exactly 0 (the zero count), the others within alpha.
  constexpr int kN = 50000;
  RandomStream r = RandomStream::derive(1, "test.sketch_signed");
  const Normal n(0.0, 10.0);
  QuantileSketch sketch(0.01);
  std::vector<double> data(kN);
  for (int i = 0; i < kN; ++i) {
    data[static_cast<size_t>(i)] = i % 5 == 0 ? 0.0 : n.sample(r);
    sketch.add(data[static_cast<size_t>(i)]);
  }
  std::sort(data.begin(), data.end());
  int zero_checks = 0;
  for (double q : {0.0, 0.001, 0.05, 0.25, 0.35, 0.42, 0.5, 0.58, 0.65, 0.75, 0.95, 0.999, 1.0}) {
    const double exact = ddsketch_rank_value(data, q);
    expect_within_alpha(sketch.quantile(q), exact, 0.01, q);
    zero_checks += exact == 0.0;
  }
  // 20% zeros sit between ~40% negatives and ~40% positives (±0.2% at this n), so exactly
  // q = 0.42, 0.5 and 0.58 hit them.
  EXPECT_EQ(zero_checks, 3);
  EXPECT_LT(sketch.quantile(0.25), 0.0);
  EXPECT_EQ(sketch.quantile(0.0), data.front());  // ranks 0 and n-1 are the exact min and max
  EXPECT_EQ(sketch.quantile(1.0), data.back());
}

TEST(QuantileSketch, CollapsingKeepsTheHighQuantilesAccurate) {
  // Log-uniform on [1e-6, 1e6] (x = 10^(12u - 6)) with alpha = 0.01 needs ln(1e12)/ln(gamma) ≈
  // 27.63/0.02 ≈ 1380 buckets; with max_buckets = 100 only the top 100 survive, covering a factor
  // gamma^100 = e^2.0 ≈ 7.4 below the maximum (~1e6): values above ~1.35e5, i.e. quantiles above
  // (log10(1.35e5) + 6)/12 ≈ 0.93. Those stay within alpha; lower ones land in the collapsed bucket.
  constexpr int kN = 100000;
  constexpr double kAlpha = 0.01;
  RandomStream r = RandomStream::derive(1, "test.sketch_collapse");
  QuantileSketch sketch(kAlpha, 100);
  std::vector<double> data(kN);
  for (double& x : data) {
    x = std::pow(10.0, 12.0 * r.uniform01() - 6.0);
    sketch.add(x);
  }
  std::sort(data.begin(), data.end());
  EXPECT_TRUE(sketch.collapsed());
  for (double q : {0.95, 0.99, 0.999, 1.0}) {
    expect_within_alpha(sketch.quantile(q), ddsketch_rank_value(data, q), kAlpha, q);
  }
  // The documented price: a low quantile is reported at the collapsed floor, far above the truth.
  const double gamma = (1 + kAlpha) / (1 - kAlpha);
  EXPECT_GT(sketch.quantile(0.01), data.back() / std::pow(gamma, 101));
  EXPECT_LE(sketch.memory_bytes(), static_cast<int64_t>(sizeof(QuantileSketch)) + 16 * 100);
}

TEST(QuantileSketch, MemoryDoesNotGrowWithTheNumberOfSamples) {
  // Same distribution, 1e3 vs 2e5 samples: once the value range is covered, more samples only
  // increment counters.
  RandomStream r = RandomStream::derive(1, "test.sketch_memory");
  const Uniform u(1.0, 1000.0);  // ln(1000)/0.01 ≈ 691 buckets
  QuantileSketch sketch;
  for (int i = 0; i < 1000; ++i) sketch.add(u.sample(r));
  const int64_t after_1e3 = sketch.memory_bytes();
  for (int i = 0; i < 199000; ++i) sketch.add(u.sample(r));
  EXPECT_EQ(sketch.memory_bytes(), after_1e3);
}

TEST(QuantileSketch, MergeEqualsSketchingTheUnion) {
  // Merging adds bucket counts, so the merged sketch must answer exactly like one sketch that saw
  // every sample; checked without collapsing (2048 buckets) and with it (40 buckets).
  for (int max_buckets : {2048, 40}) {
    RandomStream r = RandomStream::derive(1, "test.sketch_merge");
    const Normal n(5.0, 20.0);
    QuantileSketch a(0.01, max_buckets), b(0.01, max_buckets), both(0.01, max_buckets);
    for (int i = 0; i < 20000; ++i) {
      const double x = n.sample(r);
      (i % 3 == 0 ? a : b).add(x);
      both.add(x);
    }
    QuantileSketch merged(0.01, max_buckets);
    merged.merge(a);
    merged.merge(b);
    EXPECT_EQ(merged.count(), both.count());
    EXPECT_EQ(merged.collapsed(), both.collapsed());
    for (double q : {0.0, 0.001, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999, 1.0}) {
      EXPECT_EQ(merged.quantile(q), both.quantile(q)) << "q = " << q << ", max_buckets " << max_buckets;
    }
  }
}

TEST(QuantileSketch, ExtremeMagnitudesCollapseButStayFinite) {
  // denorm_min = 4.9e-324 .. max = 1.8e308 spans e^1454, far beyond gamma^2048 = e^20.5, so each
  // store keeps only its top 2048 buckets, [max/gamma^2048, max] ≈ [2.3e299, 1.8e308]; the value 1.0
  // and denorm_min are reported at that floor (the documented cost of collapsing), still finite.
  QuantileSketch sketch;
  const double big = std::numeric_limits<double>::max();
  const double tiny = std::numeric_limits<double>::denorm_min();
  for (double x : {tiny, 1.0, big, -big, -tiny}) sketch.add(x);
  EXPECT_TRUE(sketch.collapsed());
  // Ranks 0..4 at q = 0, .25, .5, .75, 1: -big, -tiny, tiny, 1, big.
  EXPECT_EQ(sketch.quantile(0.0), -big);
  EXPECT_EQ(sketch.quantile(1.0), big);
  const double gamma = (1.0 + 0.005) / (1.0 - 0.005);
  const double floor = big / std::pow(gamma, 2048);
  for (double q : {0.25, 0.5, 0.75}) {
    const double v = sketch.quantile(q);
    EXPECT_TRUE(std::isfinite(v)) << "q = " << q;
    EXPECT_NEAR(std::fabs(v), floor, 0.02 * floor) << "q = " << q;
  }
}

TEST(QuantileSketch, EmptyIsNaNAndOneValueIsExact) {
  QuantileSketch sketch;
  EXPECT_TRUE(std::isnan(sketch.quantile(0.5)));
  sketch.add(3.7);
  EXPECT_EQ(sketch.quantile(0.5), 3.7);  // the representative, clamped to [min, max] = [3.7, 3.7]
}

TEST(QuantileSketch, InvalidParametersAreInputErrors) {
  const auto key_of = [](double alpha, int max_buckets) {
    try {
      QuantileSketch s(alpha, max_buckets);
    } catch (const InputError& e) {
      return e.where().key;
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(key_of(0.0, 10), "alpha");
  EXPECT_EQ(key_of(1.0, 10), "alpha");
  EXPECT_EQ(key_of(std::nan(""), 10), "alpha");
  EXPECT_EQ(key_of(0.01, 0), "max_buckets");
  EXPECT_EQ(key_of(0.01, 1), "(no error)");
  QuantileSketch s;
  s.add(1.0);
  EXPECT_THROW(s.quantile(2.0), InputError);
}

// ---- Summary ----------------------------------------------------------------------------------

TEST(Summary, IsExactUpToTheLimitThenUsesTheSketch) {
  // Values 1..1000 with limit 1000: exact type 7, median h = 999·0.5 = 499.5 -> 500.5.
  Summary s(1000);
  for (int i = 1; i <= 1000; ++i) s.add(i);
  EXPECT_TRUE(s.is_exact());
  EXPECT_DOUBLE_EQ(s.quantile(0.5), 500.5);
  // One more (1001) switches: the DDSketch median is rank floor(0.5·1000) = 500, the value 501,
  // within alpha = 0.005 (±2.5).
  s.add(1001);
  EXPECT_FALSE(s.is_exact());
  EXPECT_NEAR(s.quantile(0.5), 501.0, 0.005 * 501.0);
  EXPECT_NE(s.quantile(0.5), 501.0);  // a bucket representative, not the sample
  // Moments stay exact: mean of 1..1001 = 501, sample variance n(n+1)/12 = 1001·1002/12 = 83583.5.
  EXPECT_DOUBLE_EQ(s.mean(), 501.0);
  EXPECT_NEAR(s.variance(), 83583.5, 1e-8);
  EXPECT_EQ(s.count(), 1001);
  EXPECT_EQ(s.max(), 1001.0);
}

TEST(Summary, MergeStaysExactUnderTheLimitAndSwitchesAboveIt) {
  Summary a(10), b(10), c(10);
  for (int i = 0; i < 4; ++i) a.add(i);      // {0,1,2,3}
  for (int i = 4; i < 8; ++i) b.add(i);      // {4,5,6,7}
  for (int i = 8; i < 12; ++i) c.add(i);     // {8,...,11}
  a.merge(b);                                 // 8 <= 10: exact, median h = 3.5 -> 3.5
  EXPECT_TRUE(a.is_exact());
  EXPECT_DOUBLE_EQ(a.quantile(0.5), 3.5);
  a.merge(c);                                 // 12 > 10: sketch, median rank floor(5.5) = 5 -> 5
  EXPECT_FALSE(a.is_exact());
  EXPECT_EQ(a.count(), 12);
  EXPECT_NEAR(a.quantile(0.5), 5.0, 0.005 * 5.0);
  EXPECT_DOUBLE_EQ(a.mean(), 5.5);
}

TEST(Summary, InvalidParametersAreInputErrorsAtConstruction) {
  EXPECT_THROW(Summary(-1), InputError);
  EXPECT_THROW(Summary(100, 0.0), InputError);
  EXPECT_THROW(Summary(100, 0.01, 0), InputError);
}

}  // namespace
}  // namespace orrery
