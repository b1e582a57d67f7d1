#include "train/variability.h"

#include <cmath>

#include "core/assert.h"

namespace orrery::train {

double expected_max_of_normals(int64_t n) {
  ORRERY_ASSERT(n >= 1);
  if (n == 1) return 0.0;
  // Simpson's rule over [-12, 12] (the density of the maximum is below 1e-30 outside it for any n up
  // to 1e9); the integrand x n phi(x) Phi(x)^(n-1), with Phi^(n-1) as exp((n-1) log Phi) so that large
  // n neither underflows nor loses precision.
  const double lo = -12.0, hi = 12.0;
  const int steps = 48000;  // even
  const double h = (hi - lo) / steps;
  const double nd = static_cast<double>(n);
  const double inv_sqrt_2pi = 0.3989422804014327;
  auto f = [&](double x) {
    const double phi = inv_sqrt_2pi * std::exp(-0.5 * x * x);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    if (cdf <= 0.0) return 0.0;
    return x * nd * phi * std::exp((nd - 1.0) * std::log(cdf));
  };
  double sum = f(lo) + f(hi);
  for (int i = 1; i < steps; ++i) sum += f(lo + i * h) * (i % 2 == 1 ? 4.0 : 2.0);
  return sum * h / 3.0;
}

double slowest_gpu_factor(double sigma, int64_t gpus) {
  ORRERY_ASSERT(sigma >= 0.0 && gpus >= 1);
  return sigma > 0.0 ? 1.0 + sigma * expected_max_of_normals(gpus) : 1.0;
}

}  // namespace orrery::train
