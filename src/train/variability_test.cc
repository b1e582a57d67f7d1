#include "train/variability.h"

#include <gtest/gtest.h>

#include <cmath>

namespace orrery::train {
namespace {

// Order statistics of the standard normal: E[max of 2] = 1/sqrt(pi), E[max of 3] = 3/(2 sqrt(pi))
// (closed forms); E[max of 10] = 1.538753 and E[max of 100] = 2.507594 (Harter 1961, "Expected values
// of normal order statistics", Biometrika 48, Table 1, to the table's six decimals).
TEST(Variability, ExpectedMaximumOfNormalsMatchesClosedFormsAndTables) {
  const double pi = 3.14159265358979323846;
  EXPECT_EQ(expected_max_of_normals(1), 0.0);
  EXPECT_NEAR(expected_max_of_normals(2), 1.0 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(expected_max_of_normals(3), 3.0 / (2.0 * std::sqrt(pi)), 1e-9);
  EXPECT_NEAR(expected_max_of_normals(10), 1.538753, 1e-6);
  EXPECT_NEAR(expected_max_of_normals(100), 2.507594, 1e-6);
  // Grows with n, ever more slowly (about sqrt(2 ln n)).
  EXPECT_GT(expected_max_of_normals(16384), expected_max_of_normals(2048));
  EXPECT_LT(expected_max_of_normals(16384) - expected_max_of_normals(2048),
            expected_max_of_normals(2048) - expected_max_of_normals(256));
}

// The job's factor: 1 without variability or with one GPU; sigma times the expected maximum above it.
TEST(Variability, SlowestGpuFactorScalesTheExpectedMaximum) {
  EXPECT_EQ(slowest_gpu_factor(0.0, 4096), 1.0);
  EXPECT_EQ(slowest_gpu_factor(0.02, 1), 1.0);
  EXPECT_NEAR(slowest_gpu_factor(0.01, 10), 1.0 + 0.01 * 1.538753, 1e-8);
}

}  // namespace
}  // namespace orrery::train
