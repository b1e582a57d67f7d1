#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/assert.h"
#include "core/error.h"

namespace orrery {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void require_quantile(double q) {
  if (!(q >= 0.0 && q <= 1.0)) {
    throw InputError(Where{{}, 0, "q"}, fmt::format("q must be a fraction in [0, 1], got {}", q),
                     "write the 99th percentile as 0.99");
  }
}

}  // namespace

// ---- RunningStats -----------------------------------------------------------------------------

void RunningStats::add(double x) {
  ORRERY_ASSERT(std::isfinite(x));
  ++n_;
  const double d = x - mean_;
  mean_ += d / static_cast<double>(n_);
  m2_ += d * (x - mean_);
  sum_ += x;
  if (n_ == 1) {
    min_ = max_ = x;
  } else {
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
  }
}

void RunningStats::merge(const RunningStats& other) {
  if (other.n_ == 0) return;
  if (n_ == 0) {
    *this = other;
    return;
  }
  const double na = static_cast<double>(n_);
  const double nb = static_cast<double>(other.n_);
  const double n = na + nb;
  const double d = other.mean_ - mean_;
  mean_ += d * nb / n;
  m2_ += other.m2_ + d * d * na * nb / n;
  n_ += other.n_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double RunningStats::mean() const { return n_ > 0 ? mean_ : kNaN; }
double RunningStats::min() const { return n_ > 0 ? min_ : kNaN; }
double RunningStats::max() const { return n_ > 0 ? max_ : kNaN; }
double RunningStats::variance() const { return n_ > 1 ? m2_ / static_cast<double>(n_ - 1) : kNaN; }
double RunningStats::stddev() const { return std::sqrt(variance()); }
double RunningStats::population_variance() const { return n_ > 0 ? m2_ / static_cast<double>(n_) : kNaN; }

// ---- ExactQuantiles ---------------------------------------------------------------------------

void ExactQuantiles::add(double x) {
  ORRERY_ASSERT(std::isfinite(x));
  if (sorted_ && !values_.empty() && x < values_.back()) sorted_ = false;
  values_.push_back(x);
}

void ExactQuantiles::merge(const ExactQuantiles& other) {
  values_.insert(values_.end(), other.values_.begin(), other.values_.end());
  sorted_ = false;
}

const std::vector<double>& ExactQuantiles::sorted() const {
  if (!sorted_) {
    std::sort(values_.begin(), values_.end());
    sorted_ = true;
  }
  return values_;
}

double ExactQuantiles::quantile(double q) const {
  require_quantile(q);
  const std::vector<double>& x = sorted();
  const size_t n = x.size();
  if (n == 0) return kNaN;
  if (n == 1) return x[0];
  const double h = static_cast<double>(n - 1) * q;
  const size_t i = std::min(static_cast<size_t>(h), n - 2);
  return x[i] + (h - static_cast<double>(i)) * (x[i + 1] - x[i]);
}

void ExactQuantiles::clear() {
  std::vector<double>().swap(values_);  // releases the memory, unlike clear()
  sorted_ = true;
}

// ---- QuantileSketch::Store --------------------------------------------------------------------

int64_t QuantileSketch::Store::at(int index) const {
  if (bins_.empty() || index < offset_ || index - offset_ >= static_cast<int>(bins_.size())) return 0;
  return bins_[static_cast<size_t>(index - offset_)];
}

void QuantileSketch::Store::cover(int lo, int hi) {
  const int size = static_cast<int>(bins_.size());
  const bool below = lo < offset_;
  const bool above = hi >= offset_ + size;
  if (!bins_.empty() && !below && !above) return;
  const int span = hi - lo + 1;
  // Grow geometrically so that a slowly widening range does not reallocate on every new bucket;
  // the caller guarantees span <= max_buckets, and the window never exceeds it (the memory bound).
  const int width = std::max(span, std::min(max_buckets_, std::max(2 * size, 32)));
  int new_offset;
  if (bins_.empty() || (below && above)) {
    new_offset = lo - (width - span) / 2;
  } else if (above) {
    new_offset = lo;  // room above, where the range is growing
  } else {
    new_offset = hi - width + 1;
  }
  std::vector<int64_t> grown(static_cast<size_t>(width), 0);
  if (total_ > 0) {
    for (int j = std::max(lowest_, new_offset); j <= std::min(highest_, new_offset + width - 1); ++j) {
      grown[static_cast<size_t>(j - new_offset)] = bins_[static_cast<size_t>(j - offset_)];
    }
  }
  bins_.swap(grown);
  offset_ = new_offset;
}

void QuantileSketch::Store::add(int index, int64_t count) {
  if (count == 0) return;
  int new_lo = total_ > 0 ? std::min(lowest_, index) : index;
  const int new_hi = total_ > 0 ? std::max(highest_, index) : index;
  int64_t moved = 0;
  int floor = new_lo;
  if (new_hi - new_lo + 1 > max_buckets_) {
    // Keep the max_buckets highest indices; everything below `floor` is counted in bucket `floor`.
    // floor ends up non-empty: either existing buckets below it move there, or `index` is clamped
    // to it (when neither, the span would not have exceeded max_buckets).
    floor = new_hi - max_buckets_ + 1;
    for (int j = lowest_; j < floor && j <= highest_; ++j) {
      int64_t& bin = bins_[static_cast<size_t>(j - offset_)];
      moved += bin;
      bin = 0;
    }
    index = std::max(index, floor);
    new_lo = floor;
    collapsed_ = true;
  }
  cover(new_lo, new_hi);
  bins_[static_cast<size_t>(floor - offset_)] += moved;
  bins_[static_cast<size_t>(index - offset_)] += count;
  lowest_ = new_lo;
  highest_ = new_hi;
  total_ += count;
}

// ---- QuantileSketch ---------------------------------------------------------------------------

QuantileSketch::QuantileSketch(double alpha, int max_buckets)
    : alpha_(alpha), max_buckets_(max_buckets), positive_(max_buckets), negative_(max_buckets) {
  if (!(alpha > 0.0 && alpha < 1.0)) {
    throw InputError(Where{{}, 0, "alpha"},
                     fmt::format("alpha (relative accuracy) must be in (0, 1), got {}", alpha),
                     "0.005 means quantiles within 0.5%");
  }
  if (max_buckets < 1) {
    throw InputError(Where{{}, 0, "max_buckets"},
                     fmt::format("max_buckets must be at least 1, got {}", max_buckets));
  }
  gamma_ = (1.0 + alpha) / (1.0 - alpha);
  inv_log_gamma_ = 1.0 / std::log(gamma_);
  log_representative_factor_ = std::log(2.0 / (gamma_ + 1.0));
}

int QuantileSketch::index_of(double magnitude) const {
  ORRERY_ASSERT(magnitude > 0.0);
  // Every finite positive double has |log x| <= 745, so |index| <= 745 / ln(gamma), which fits an
  // int for any alpha >= 1e-7.
  return static_cast<int>(std::ceil(std::log(magnitude) * inv_log_gamma_));
}

double QuantileSketch::value_of(int index) const {
  // 2·gamma^i/(gamma+1), computed in log space so that the top bucket does not overflow early.
  return std::exp(static_cast<double>(index) / inv_log_gamma_ + log_representative_factor_);
}

void QuantileSketch::add(double x) {
  ORRERY_ASSERT(std::isfinite(x));
  if (x > 0.0) {
    positive_.add(index_of(x), 1);
  } else if (x < 0.0) {
    negative_.add(index_of(-x), 1);
  } else {
    ++zeros_;
  }
  if (count_ == 0) {
    min_ = max_ = x;
  } else {
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
  }
  ++count_;
}

void QuantileSketch::merge(const QuantileSketch& other) {
  ORRERY_CHECK(other.alpha_ == alpha_);
  if (other.count_ == 0) return;
  // Highest index first: the window is placed once and lower buckets collapse into it if needed.
  for (Store* mine : {&positive_, &negative_}) {
    const Store& theirs = mine == &positive_ ? other.positive_ : other.negative_;
    if (theirs.empty()) continue;
    for (int i = theirs.highest(); i >= theirs.lowest(); --i) mine->add(i, theirs.at(i));
    if (theirs.collapsed()) mine->mark_collapsed();
  }
  zeros_ += other.zeros_;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
}

double QuantileSketch::quantile(double q) const {
  require_quantile(q);
  if (count_ == 0) return kNaN;
  // The sample of 0-based rank floor(q(n-1)) is the first whose cumulative count exceeds q(n-1).
  const double rank = q * static_cast<double>(count_ - 1);
  // The extreme ranks are known exactly.
  if (rank < 1.0) return min_;
  if (rank >= static_cast<double>(count_ - 1)) return max_;
  const auto clamp = [this](double v) { return std::clamp(v, min_, max_); };
  int64_t cumulative = 0;
  if (!negative_.empty()) {
    // Most negative first: the largest magnitudes have the highest indices.
    for (int i = negative_.highest(); i >= negative_.lowest(); --i) {
      cumulative += negative_.at(i);
      if (static_cast<double>(cumulative) > rank) return clamp(-value_of(i));
    }
  }
  cumulative += zeros_;
  if (static_cast<double>(cumulative) > rank) return clamp(0.0);
  if (!positive_.empty()) {
    for (int i = positive_.lowest(); i <= positive_.highest(); ++i) {
      cumulative += positive_.at(i);
      if (static_cast<double>(cumulative) > rank) return clamp(value_of(i));
    }
  }
  // Unreachable: cumulative ends at count_ > rank.
  ORRERY_ASSERT(false);
  return max_;
}

double QuantileSketch::min() const { return count_ > 0 ? min_ : kNaN; }
double QuantileSketch::max() const { return count_ > 0 ? max_ : kNaN; }

int64_t QuantileSketch::memory_bytes() const {
  return static_cast<int64_t>(sizeof(QuantileSketch)) + positive_.capacity_bytes() +
         negative_.capacity_bytes();
}

// ---- Summary ----------------------------------------------------------------------------------

Summary::Summary(int64_t exact_limit, double alpha, int max_buckets)
    : exact_limit_(exact_limit), alpha_(alpha), max_buckets_(max_buckets) {
  if (exact_limit < 0) {
    throw InputError(Where{{}, 0, "exact_limit"},
                     fmt::format("exact_limit must be >= 0, got {}", exact_limit));
  }
  // Validates alpha and max_buckets now rather than when the switch happens.
  static_cast<void>(QuantileSketch(alpha, max_buckets));
}

void Summary::add(double x) {
  stats_.add(x);
  if (sketch_) {
    sketch_->add(x);
    return;
  }
  exact_.add(x);
  if (exact_.count() > exact_limit_) switch_to_sketch();
}

void Summary::switch_to_sketch() {
  if (sketch_) return;
  sketch_.emplace(alpha_, max_buckets_);
  for (double v : exact_.sorted()) sketch_->add(v);
  exact_.clear();
}

void Summary::merge(const Summary& other) {
  stats_.merge(other.stats_);
  if (is_exact() && other.is_exact() && exact_.count() + other.exact_.count() <= exact_limit_) {
    exact_.merge(other.exact_);
    return;
  }
  switch_to_sketch();
  if (other.is_exact()) {
    for (double v : other.exact_.sorted()) sketch_->add(v);
  } else {
    sketch_->merge(*other.sketch_);
  }
}

double Summary::quantile(double q) const { return sketch_ ? sketch_->quantile(q) : exact_.quantile(q); }

}  // namespace orrery
