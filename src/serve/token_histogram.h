// A weighted log-bucket histogram for per-token latencies (ITL).
//
// A serving run emits one inter-token latency per generated token (2 x 10^8 for 10^6 requests), and in
// an iteration every sequence that also ran in the previous one sees the same gap. This histogram adds
// (value, count) pairs in O(1), so an iteration costs one add per distinct gap instead of one per token.
// It uses DDSketch's mapping (Masson, Rim & Lee, PVLDB 2019; core/stats.h QuantileSketch): value x > 0
// goes to bucket i = ceil(log_gamma x), gamma = (1 + alpha) / (1 - alpha), represented by
// 2 gamma^i / (gamma + 1), within relative error alpha of every value in it; quantile(q) is the value of
// 0-based rank floor(q (n - 1)), clamped to the exact [min, max]. Values <= 0 count as 0. Buckets span
// 1 ns .. 10^5 s (22 decades, 5,100 counters at alpha = 0.005); values outside are clamped to the ends.
// (core/stats.h's QuantileSketch has no weighted add; with one, this class could go.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace orrery::serve {

class TokenHistogram {
 public:
  explicit TokenHistogram(double alpha = 0.005);
  void add(double x, int64_t count = 1);
  int64_t count() const { return count_; }
  double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  double min() const { return min_; }
  double max() const { return max_; }
  // NaN when empty. REQUIRES: 0 <= q <= 1.
  double quantile(double q) const;

 private:
  double alpha_;
  double inv_log_gamma_;
  double log_gamma_;
  int lowest_;
  std::vector<int64_t> bins_;
  int64_t zeros_ = 0;
  int64_t count_ = 0;
  double sum_ = 0.0;
  double min_ = 0.0;
  double max_ = 0.0;
  double last_x_ = -1.0;  // the last value and its bucket: repeated gaps skip the log
  size_t last_bin_ = 0;
};

}  // namespace orrery::serve
