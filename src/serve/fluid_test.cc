#include "serve/fluid.h"

#include <gtest/gtest.h>

namespace orrery::serve {
namespace {

TEST(Fluid, OneTypeEquilibriumByHand) {
  // lambda = 10/s, l = 512, l' = 20: w = 10 x 21 x 522 = 109620 tokens/s per ... ; d0 = 5 ms, d1 = 1e-6 s.
  // load = 0.10962; dT* = 0.005 / 0.89038 = 5.6156 ms; M* = 0.005 x 109620 / 0.89038 = 615.58 tokens;
  // n* = 0.005 x 10 / 0.89038 = 0.056156; throughput bound = 10 x 20 = 200 tok/s.
  const FluidResult f = fluid_equilibrium({{10.0, 512.0, 20.0, 20}}, 0.005, 1e-6, 100000);
  EXPECT_NEAR(f.w, 109620.0, 1e-9);
  EXPECT_NEAR(f.load, 0.10962, 1e-12);
  EXPECT_NEAR(f.dt_star_s, 0.005 / 0.89038, 1e-12);
  EXPECT_NEAR(f.memory_star, 0.005 * 109620 / 0.89038, 1e-9);
  EXPECT_NEAR(f.n_star[0], 0.05 / 0.89038, 1e-12);
  EXPECT_DOUBLE_EQ(f.throughput_bound, 200.0);
  EXPECT_TRUE(f.stable);
  // Largest stable rate: a* = C / (W (d0 + d1 C)) = 1e5 / (109620 x 0.105) = 8.6879, times 10 req/s.
  EXPECT_NEAR(f.max_stable_rate, 10.0 * 1e5 / (109620.0 * 0.105), 1e-9);
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
  EXPECT_GE(f.load, 1.0);  // d1 W = 1e-6 x 1.0962e7 = 10.96
  EXPECT_FALSE(f.stable);
  EXPECT_FALSE(std::isfinite(f.memory_star));
}

TEST(Fluid, RejectsInvalidInputs) {
  EXPECT_THROW(fluid_equilibrium({}, 0.005, 1e-6, 1000), InputError);
  EXPECT_THROW(fluid_equilibrium({{0.0, 1.0, 1.0, 1}}, 0.005, 1e-6, 1000), InputError);
  EXPECT_THROW(fluid_equilibrium({{1.0, 1.0, 1.0, 1}}, 0.0, 1e-6, 1000), InputError);
}

}  // namespace
}  // namespace orrery::serve
