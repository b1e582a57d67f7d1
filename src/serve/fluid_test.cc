#include "serve/fluid.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace orrery::serve {
namespace {

TEST(Fluid, OneTypeEquilibriumByHand) {
  // lambda = 10/s, l = 512, L = 20 output tokens (the paper's l' = 19 decode steps): one request holds
  // w' = 20 x (512 + 19/2) = 10430 token-iterations, w = 104300; d0 = 5 ms, d1 = 1e-6 s.
  // load = 0.1043; dT* = 0.005 / 0.8957; M* = 0.005 x 104300 / 0.8957; n* = 0.05 / 0.8957;
  // throughput bound = 10 x 20 = 200 output tok/s.
  const FluidResult f = fluid_equilibrium({{10.0, 512.0, 20.0, 20}}, 0.005, 1e-6, 100000);
  EXPECT_NEAR(f.w, 104300.0, 1e-9);
  EXPECT_NEAR(f.load, 0.1043, 1e-12);
  EXPECT_NEAR(f.dt_star_s, 0.005 / 0.8957, 1e-12);
  EXPECT_NEAR(f.memory_star, 0.005 * 104300 / 0.8957, 1e-9);
  EXPECT_NEAR(f.n_star[0], 0.05 / 0.8957, 1e-12);
  EXPECT_DOUBLE_EQ(f.throughput_bound, 200.0);
  EXPECT_TRUE(f.stable);
  // Largest stable rate: a* = C / (W (d0 + d1 C)) = 1e5 / (104300 x 0.105), times 10 req/s.
  EXPECT_NEAR(f.max_stable_rate, 10.0 * 1e5 / (104300.0 * 0.105), 1e-9);
}

TEST(Fluid, OneOutputTokenIsOnePrefillStage) {
  // L = 1: the request runs once (its prefill emits the token) and holds l tokens: w' = l = 100.
  const FluidResult f = fluid_equilibrium({{2.0, 100.0, 1.0, 1}}, 0.01, 1e-5, 1e6);
  EXPECT_NEAR(f.w, 200.0, 1e-12);
}

TEST(Fluid, AtTheLargestStableRateTheMemoryEqualsTheCapacity) {
  const std::vector<TypeStats> mix = {{7.0, 512.0, 20.0, 20}, {3.0, 512.0, 50.0, 50}};
  const FluidResult f = fluid_equilibrium(mix, 0.006, 3e-6, 50000);
  const double a = f.max_stable_rate / f.rate;
  std::vector<TypeStats> scaled = mix;
  for (TypeStats& t : scaled) t.rate *= a;
  EXPECT_NEAR(fluid_equilibrium(scaled, 0.006, 3e-6, 50000).memory_star, 50000.0, 1e-6);
}

TEST(Fluid, OverloadIsUnstable) {
  const FluidResult f = fluid_equilibrium({{1000.0, 512.0, 20.0, 20}}, 0.005, 1e-6, 1e9);
  EXPECT_GE(f.load, 1.0);  // d1 W = 1e-6 x 1000 x 10430 = 10.43
  EXPECT_FALSE(f.stable);
  EXPECT_FALSE(std::isfinite(f.memory_star));
}

TEST(Fluid, RejectsInvalidInputs) {
  EXPECT_THROW(fluid_equilibrium({}, 0.005, 1e-6, 1000), InputError);
  EXPECT_THROW(fluid_equilibrium({{0.0, 1.0, 1.0, 1}}, 0.005, 1e-6, 1000), InputError);
  EXPECT_THROW(fluid_equilibrium({{1.0, 1.0, 1.0, 1}}, 0.0, 1e-6, 1000), InputError);
}

TEST(WaitThresholdsFluid, OneTypeTakesTheSmallestIntegerMeetingTheConditionsWithSlack) {
  // lambda = 100/s, l = 100, L = 10: w' = 10 x 104.5 = 1045; d0 = 10 ms, d1 = 5e-6 s: load = 0.5225,
  // dT* = 10 / 0.4775 = 20.94 ms, n* = 2.094 -> start at n = 3. Condition with slack 0.05: period
  // 3 / 100 = 30 ms >= 1.05 x (d0 + d1 M^pi) = 1.05 x (10 + 5e-3 x 3135) = 26.96 ms: n = 3.
  const WaitThresholds t = wait_thresholds_fluid({{100.0, 100.0, 10.0, 10}}, 0.010, 5e-6, 0.05, 1e6);
  EXPECT_EQ(t.n, std::vector<int64_t>{3});
  EXPECT_DOUBLE_EQ(t.memory, 3135.0);
  EXPECT_TRUE(t.meets_conditions);
  EXPECT_EQ(wait_thresholds_fluid({{100.0, 100.0, 10.0, 10}}, 0.010, 5e-6, 0.0, 1e6).n, std::vector<int64_t>{3});
  // Slack 0.5: n = 3: 30 < 1.5 x 25.675; 4: 40 < 1.5 x 30.9; 5: 50 < 1.5 x 36.125; 6: 60 < 1.5 x 41.35;
  // 7: 70 >= 1.5 x (10 + 5e-3 x 7315) = 69.86 ms: n = 7.
  EXPECT_EQ(wait_thresholds_fluid({{100.0, 100.0, 10.0, 10}}, 0.010, 5e-6, 0.5, 1e6).n, std::vector<int64_t>{7});
}

TEST(WaitThresholdsFluid, LightLoadGivesOnePromptPerStage) {
  // lambda = 1/s: n* = 0.01 / (1 - 5e-6 x 1045) = 0.01005 -> n = 1 (period 1 s >> 15 ms iteration).
  EXPECT_EQ(wait_thresholds_fluid({{1.0, 100.0, 10.0, 10}}, 0.010, 5e-6, 0.05, 1e6).n, std::vector<int64_t>{1});
}

TEST(WaitThresholdsFluid, RaisesTheTypeWithTheShortestPeriodUntilTheConditionsHold) {
  // Two types, w'_1 = 1045 (l 100, L 10), w'_2 = 2 x 100.5 = 201 (l 100, L 2); d0 = 10 ms, d1 = 1e-5,
  // rates 30 and 50: W = 31350 + 10050 = 41400, load 0.414, dT* = 17.065 ms; start n = ceil(lambda dT*)
  // = ceil(0.512) = 1 and ceil(0.853) = 1: M^pi = 1246, 1.05 x iteration = 1.05 x 22.46 = 23.58 ms;
  // periods 33.3 and 20 ms: type 2 is short -> n_2 = 2: M^pi = 1447, 1.05 x 24.47 = 25.69 ms; periods
  // 33.3 and 40 ms: done.
  const WaitThresholds t = wait_thresholds_fluid({{30.0, 100.0, 10.0, 10}, {50.0, 100.0, 2.0, 2}}, 0.010, 1e-5, 0.05, 1e6);
  EXPECT_EQ(t.n, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(t.memory, 1447.0);
  EXPECT_TRUE(t.meets_conditions);
}

TEST(WaitThresholdsFluid, OverloadFallsBackToTheLargestMemoryThatFits) {
  // load = 5e-6 x 300 x 1045 = 1.5675 >= 1: no thresholds are stable; n = floor(C / w') = floor(10000 /
  // 1045) = 9 (M^pi = 9405 <= 10000 < 10 x 1045).
  const WaitThresholds t = wait_thresholds_fluid({{300.0, 100.0, 10.0, 10}}, 0.010, 5e-6, 0.05, 10000);
  EXPECT_EQ(t.n, std::vector<int64_t>{9});
  EXPECT_FALSE(t.meets_conditions);
  // Stable in the fluid sense but the thresholds would need more than C: lambda = 100 needs n = 3
  // (M^pi = 3135 tokens, first test) > C = 3000 -> floor(3000 / 1045) = 2.
  const WaitThresholds small = wait_thresholds_fluid({{100.0, 100.0, 10.0, 10}}, 0.010, 5e-6, 0.05, 3000);
  EXPECT_EQ(small.n, std::vector<int64_t>{2});
  EXPECT_FALSE(small.meets_conditions);
}

TEST(NestedWaitCapFluid, SpreadsTheWaitThresholdOverTheMeanOutput) {
  // The first test's type: n = 3 prompts per stage x 10 output tokens = 30.
  EXPECT_EQ(nested_wait_cap_fluid({100.0, 100.0, 10.0, 10}, 0.010, 5e-6, 0.05, 1e6), 30);
}

}  // namespace
}  // namespace orrery::serve
