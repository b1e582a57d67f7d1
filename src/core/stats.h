// Streaming statistics: moments, exact quantiles for small samples, a relative-error quantile sketch
// for large ones, and a Summary that picks between them.
//
// Model card
//   RunningStats    count, sum, min, max, mean and variance in one pass with Welford's update
//                   (Welford, Technometrics 4(3), 1962); merge() uses the pairwise formula of Chan,
//                   Golub & LeVeque (1979/1983): with d = mean_b - mean_a and n = n_a + n_b,
//                   mean = mean_a + d·n_b/n, M2 = M2_a + M2_b + d²·n_a·n_b/n.
//                   variance() is the SAMPLE variance M2/(n-1); population_variance() is M2/n.
//   ExactQuantiles  keeps every sample; quantile(q) is Hyndman & Fan's type 7 (numpy's default):
//                   h = (n-1)q, Q = x(⌊h⌋) + (h - ⌊h⌋)(x(⌊h⌋+1) - x(⌊h⌋)), x(0..n-1) sorted. Sorts
//                   lazily on the first query after an add. Memory 8 bytes per sample.
//   QuantileSketch  DDSketch (Masson, Rim & Lee, "DDSketch: a fast and fully-mergeable quantile sketch
//                   with relative-error guarantees", PVLDB 12(12), 2019). gamma = (1+alpha)/(1-alpha);
//                   a value x != 0 goes to bucket i = ⌈log_gamma |x|⌉, i.e. gamma^(i-1) < |x| <= gamma^i,
//                   of the positive or negative store by sign; zeros are counted apart. A bucket is
//                   represented by 2·gamma^i/(gamma+1), within relative distance alpha of every value
//                   in it. Each store keeps at most max_buckets contiguous buckets; beyond that the
//                   buckets of smallest |x| are collapsed into one (the "collapsing lowest" store of the
//                   paper's reference implementation).
//     Rank          quantile(q) estimates the DDSketch q-quantile, the sample of 0-based rank ⌊q(n-1)⌋ in
//                   sorted order (1-based ⌊1 + q(n-1)⌋, the paper's definition; numpy's "lower" method).
//     Guarantee     if that sample x_q lies in a bucket that was never collapsed, the estimate x̂ satisfies
//                   |x̂ - x_q| <= alpha·|x_q| (up to floating rounding, ~1e-12 relative; for |x_q| between
//                   DBL_MIN and DBL_MAX/gamma). Ranks 0 and n-1 return the exact min and max, and every
//                   estimate is clamped to [min, max]. Collapsing merges the smallest-magnitude buckets:
//                   for non-negative data (latencies, sizes) it only affects the lowest quantiles, and it
//                   only happens when a store's values span more than a factor gamma^max_buckets
//                   (e^20.48 ≈ 7.8e8 for the defaults alpha = 0.005, 2048 buckets).
//     Memory        at most 2·max_buckets counters (8 bytes each) plus a fixed header, whatever n is:
//                   memory_bytes() <= sizeof(QuantileSketch) + 16·max_buckets (32.9 KiB by default).
//     Merge         exact: merging two sketches equals sketching the union (before any collapse).
//   Summary         RunningStats always; ExactQuantiles while count <= exact_limit (default 100000), then
//                   converted to a QuantileSketch. is_exact() says which definition quantile() follows:
//                   type 7 when exact, the DDSketch rank within alpha otherwise.
//   Inputs          samples must not be NaN or infinite (ORRERY_ASSERT: they come from the simulator, not
//                   from the user). Requested quantiles q outside [0, 1] are an InputError (key "q"), since
//                   they usually come from a config ("percentiles: [50, 99]").
//   Thread safety   none; const queries of ExactQuantiles and Summary may sort and are not safe to call
//                   concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace orrery {

class RunningStats {
 public:
  void add(double x);
  // Combines with another accumulator; the result equals adding all of other's samples to *this
  // (up to rounding).
  void merge(const RunningStats& other);

  int64_t count() const { return n_; }
  double sum() const { return sum_; }
  // NaN when empty.
  double mean() const;
  double min() const;
  double max() const;
  // Sample variance M2/(n-1) and its square root; NaN when count() < 2.
  double variance() const;
  double stddev() const;
  // Population variance M2/n; NaN when empty.
  double population_variance() const;

 private:
  int64_t n_ = 0;
  double mean_ = 0.0;
  double m2_ = 0.0;  // sum of squared deviations from the running mean
  double sum_ = 0.0;
  double min_ = 0.0;
  double max_ = 0.0;
};

class ExactQuantiles {
 public:
  void add(double x);
  void merge(const ExactQuantiles& other);
  int64_t count() const { return static_cast<int64_t>(values_.size()); }
  // Type-7 quantile (see the model card); NaN when empty. REQUIRES (InputError "q"): 0 <= q <= 1.
  double quantile(double q) const;
  // The samples in ascending order.
  const std::vector<double>& sorted() const;
  void clear();

 private:
  mutable std::vector<double> values_;
  mutable bool sorted_ = true;
};

class QuantileSketch {
 public:
  static constexpr double kDefaultAlpha = 0.005;
  static constexpr int kDefaultMaxBuckets = 2048;

  // REQUIRES (InputError): 0 < alpha < 1 (key "alpha"), max_buckets >= 1 (key "max_buckets").
  explicit QuantileSketch(double alpha = kDefaultAlpha, int max_buckets = kDefaultMaxBuckets);

  void add(double x);
  // REQUIRES: other has the same alpha (ORRERY_CHECK). Collapses to this sketch's max_buckets.
  void merge(const QuantileSketch& other);

  // The DDSketch q-quantile estimate (see the model card); NaN when empty.
  // REQUIRES (InputError "q"): 0 <= q <= 1.
  double quantile(double q) const;

  int64_t count() const { return count_; }
  double min() const;  // exact; NaN when empty
  double max() const;  // exact; NaN when empty
  double alpha() const { return alpha_; }
  int max_buckets() const { return max_buckets_; }
  // True once some bucket was collapsed: quantiles near zero may then exceed the alpha bound.
  bool collapsed() const { return positive_.collapsed() || negative_.collapsed(); }
  // Bytes held: the object plus its bucket arrays. <= sizeof(QuantileSketch) + 16·max_buckets.
  int64_t memory_bytes() const;

 private:
  // Counts for a contiguous window of bucket indices; bins_[j] counts index offset_ + j.
  class Store {
   public:
    explicit Store(int max_buckets) : max_buckets_(max_buckets) {}
    // Adds `count` to bucket `index`, collapsing the lowest buckets if the non-empty range would
    // exceed max_buckets.
    void add(int index, int64_t count);
    void mark_collapsed() { collapsed_ = true; }
    int64_t total() const { return total_; }
    bool collapsed() const { return collapsed_; }
    bool empty() const { return total_ == 0; }
    int lowest() const { return lowest_; }    // smallest non-empty index; REQUIRES !empty()
    int highest() const { return highest_; }  // largest non-empty index; REQUIRES !empty()
    int64_t at(int index) const;
    int64_t capacity_bytes() const { return static_cast<int64_t>(bins_.capacity() * sizeof(int64_t)); }

   private:
    void cover(int lo, int hi);  // grows or slides the window to cover [lo, hi]; REQUIRES span <= max
    std::vector<int64_t> bins_;  // size <= max_buckets_, so memory is bounded
    int max_buckets_;
    int offset_ = 0;
    int lowest_ = 0;
    int highest_ = 0;
    int64_t total_ = 0;
    bool collapsed_ = false;
  };

  int index_of(double magnitude) const;
  double value_of(int index) const;

  double alpha_;
  double gamma_;
  double inv_log_gamma_;
  double log_representative_factor_;  // ln(2/(gamma+1))
  int max_buckets_;
  Store positive_;
  Store negative_;
  int64_t zeros_ = 0;
  int64_t count_ = 0;
  double min_ = 0.0;
  double max_ = 0.0;
};

class Summary {
 public:
  static constexpr int64_t kDefaultExactLimit = 100000;

  explicit Summary(int64_t exact_limit = kDefaultExactLimit, double alpha = QuantileSketch::kDefaultAlpha,
                   int max_buckets = QuantileSketch::kDefaultMaxBuckets);

  void add(double x);
  void merge(const Summary& other);

  int64_t count() const { return stats_.count(); }
  double sum() const { return stats_.sum(); }
  double mean() const { return stats_.mean(); }
  double variance() const { return stats_.variance(); }
  double stddev() const { return stats_.stddev(); }
  double min() const { return stats_.min(); }
  double max() const { return stats_.max(); }
  // Type 7 while is_exact(), else the DDSketch estimate. REQUIRES (InputError "q"): 0 <= q <= 1.
  double quantile(double q) const;
  bool is_exact() const { return !sketch_.has_value(); }
  const RunningStats& stats() const { return stats_; }

 private:
  void switch_to_sketch();

  int64_t exact_limit_;
  double alpha_;
  int max_buckets_;
  RunningStats stats_;
  ExactQuantiles exact_;
  std::optional<QuantileSketch> sketch_;
};

}  // namespace orrery
