#include "serve/token_histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/assert.h"

namespace orrery::serve {

namespace {
constexpr double kLow = 1e-9;  // seconds
constexpr double kHigh = 1e5;
}  // namespace

TokenHistogram::TokenHistogram(double alpha) : alpha_(alpha) {
  const double gamma = (1.0 + alpha) / (1.0 - alpha);
  log_gamma_ = std::log(gamma);
  inv_log_gamma_ = 1.0 / log_gamma_;
  lowest_ = static_cast<int>(std::ceil(std::log(kLow) * inv_log_gamma_));
  const int highest = static_cast<int>(std::ceil(std::log(kHigh) * inv_log_gamma_));
  bins_.assign(static_cast<size_t>(highest - lowest_ + 1), 0);
}

void TokenHistogram::add(double x, int64_t count) {
  if (count <= 0) return;
  if (count_ == 0) {
    min_ = max_ = x;
  } else {
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
  }
  count_ += count;
  sum_ += x * static_cast<double>(count);
  if (x <= 0.0) {
    zeros_ += count;
    return;
  }
  if (x != last_x_) {
    const double c = std::clamp(x, kLow, kHigh);
    const int i = static_cast<int>(std::ceil(std::log(c) * inv_log_gamma_));
    last_bin_ = static_cast<size_t>(std::clamp(i - lowest_, 0, static_cast<int>(bins_.size()) - 1));
    last_x_ = x;
  }
  bins_[last_bin_] += count;
}

double TokenHistogram::quantile(double q) const {
  ORRERY_CHECK(q >= 0.0 && q <= 1.0);
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  const auto rank = static_cast<int64_t>(std::floor(q * static_cast<double>(count_ - 1)));
  if (rank == 0) return min_;
  if (rank == count_ - 1) return max_;
  int64_t seen = zeros_;
  if (rank < seen) return 0.0;
  for (size_t i = 0; i < bins_.size(); ++i) {
    seen += bins_[i];
    if (rank < seen) {
      const double v = 2.0 * std::exp(static_cast<double>(static_cast<int>(i) + lowest_) * log_gamma_) /
                       (1.0 + (1.0 + alpha_) / (1.0 - alpha_));
      return std::clamp(v, min_, max_);
    }
  }
  return max_;
}

}  // namespace orrery::serve
