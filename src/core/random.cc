#include "core/random.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "core/assert.h"

namespace orrery {

namespace {

[[noreturn]] void invalid(const Where& where, std::string_view key, std::string message) {
  throw InputError(where.with_key(key), std::move(message));
}

void require_finite(double v, const Where& where, std::string_view key) {
  if (!std::isfinite(v)) invalid(where, key, fmt::format("{} must be a finite number, got {}", key, v));
}

void require_positive(double v, const Where& where, std::string_view key) {
  if (!(std::isfinite(v) && v > 0.0)) {
    invalid(where, key, fmt::format("{} must be positive and finite, got {}", key, v));
  }
}

void require_non_negative(double v, const Where& where, std::string_view key) {
  if (!(std::isfinite(v) && v >= 0.0)) {
    invalid(where, key, fmt::format("{} must be non-negative and finite, got {}", key, v));
  }
}

// Marsaglia & Bray polar method: draw (u, v) uniform in the square [-1, 1)², keep pairs inside the
// unit disc (acceptance pi/4), return u·sqrt(-2 ln s / s), s = u² + v². The twin v·sqrt(...) is
// discarded so that no state outlives the call.
double standard_normal(RandomStream& rng) {
  for (;;) {
    const double u = 2.0 * rng.uniform01() - 1.0;
    const double v = 2.0 * rng.uniform01() - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * std::log(s) / s);
  }
}

}  // namespace

uint64_t fnv1a64(std::string_view data, uint64_t basis) {
  uint64_t h = basis;
  for (char c : data) {
    h ^= static_cast<uint64_t>(static_cast<unsigned char>(c));
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t SplitMix64::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// ---- RandomStream ---------------------------------------------------------------------------------

RandomStream::RandomStream(uint64_t seed, uint64_t path_hash) : seed_(seed), path_hash_(path_hash) {
  SplitMix64 sm(seed ^ path_hash);
  for (uint64_t& word : s_) word = sm.next();
  // Four consecutive splitmix64 outputs are never all zero (its output mix is a bijection), so
  // this only guards against a future change of the seeding.
  ORRERY_CHECK((s_[0] | s_[1] | s_[2] | s_[3]) != 0);
}

RandomStream RandomStream::derive(uint64_t seed, std::string_view component) {
  return RandomStream(seed, fnv1a64(component));
}

RandomStream RandomStream::child(std::string_view name) const {
  // FNV-1a is incremental, so this is fnv1a64(path + "/" + name) without storing the path.
  return RandomStream(seed_, fnv1a64(name, fnv1a64("/", path_hash_)));
}

double RandomStream::uniform01() {
  // The top 53 bits (xoshiro's low bits are its weakest) scaled exactly by 2^-53.
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double RandomStream::open01() {
  // (k + 0.5)·2^-52 for k in [0, 2^52): needs 53 significant bits, so it is exact, and lies in
  // [2^-53, 1 - 2^-53].
  return (static_cast<double>(next_u64() >> 12) + 0.5) * 0x1.0p-52;
}

// ---- Distributions ----------------------------------------------------------------------------

Uniform::Uniform(double a, double b, const Where& where) : a_(a), b_(b) {
  require_finite(a, where, "a");
  require_finite(b, where, "b");
  if (a > b) invalid(where, "b", fmt::format("b must be >= a, got a = {} and b = {}", a, b));
  if (!std::isfinite(b - a)) {
    invalid(where, "b", fmt::format("b - a must be finite, got a = {} and b = {}", a, b));
  }
}

double Uniform::sample(RandomStream& rng) const { return a_ + (b_ - a_) * rng.uniform01(); }

Exponential::Exponential(double rate, const Where& where) : rate_(rate) {
  require_positive(rate, where, "rate");
}

double Exponential::sample(RandomStream& rng) const { return -std::log(rng.open01()) / rate_; }

Normal::Normal(double mu, double sigma, const Where& where) : mu_(mu), sigma_(sigma) {
  require_finite(mu, where, "mu");
  require_non_negative(sigma, where, "sigma");
}

double Normal::sample(RandomStream& rng) const { return mu_ + sigma_ * standard_normal(rng); }

LogNormal::LogNormal(double mu, double sigma, const Where& where)
    : normal_(mu, sigma, where), sigma_(sigma) {}

LogNormal LogNormal::from_mean_cv(double mean, double cv, const Where& where) {
  require_positive(mean, where, "mean");
  require_non_negative(cv, where, "cv");
  const double sigma2 = std::log1p(cv * cv);
  return LogNormal(std::log(mean) - 0.5 * sigma2, std::sqrt(sigma2), where);
}

double LogNormal::sample(RandomStream& rng) const { return std::exp(normal_.sample(rng)); }

double LogNormal::mean() const { return std::exp(mu() + 0.5 * sigma_ * sigma_); }

double LogNormal::variance() const {
  const double s2 = sigma_ * sigma_;
  return std::expm1(s2) * std::exp(2.0 * mu() + s2);
}

Gamma::Gamma(double shape, double scale, const Where& where) : shape_(shape), scale_(scale) {
  require_positive(shape, where, "shape");
  require_positive(scale, where, "scale");
  const double a = shape < 1.0 ? shape + 1.0 : shape;
  d_ = a - 1.0 / 3.0;
  c_ = 1.0 / std::sqrt(9.0 * d_);
}

double Gamma::sample(RandomStream& rng) const {
  // Marsaglia & Tsang: with x ~ N(0,1) and v = (1 + c x)³, d·v has the Gamma(a) density up to a
  // rejection step; the squeeze u < 1 - 0.0331 x⁴ avoids the logs in ~98% of cases.
  double g = 0.0;
  for (;;) {
    const double x = standard_normal(rng);
    double v = 1.0 + c_ * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = rng.open01();
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2 || std::log(u) < 0.5 * x2 + d_ * (1.0 - v + std::log(v))) {
      g = d_ * v;
      break;
    }
  }
  // Boost for shape < 1: if G ~ Gamma(shape + 1) and U ~ U(0,1), G·U^(1/shape) ~ Gamma(shape).
  if (shape_ < 1.0) g *= std::pow(rng.open01(), 1.0 / shape_);
  return g * scale_;
}

Zipf::Zipf(uint64_t n, double s, const Where& where) {
  if (n < 1 || n > kMaxN) {
    invalid(where, "n", fmt::format("n must be between 1 and {}, got {}", kMaxN, n));
  }
  require_positive(s, where, "s");
  cdf_.resize(n);
  // Prefix sums of k^-s with Neumaier compensation, so the table stays accurate to ~1 ulp for
  // n in the millions (a plain sum loses ~n·eps).
  double sum = 0.0, comp = 0.0, weighted = 0.0;
  for (uint64_t k = 1; k <= n; ++k) {
    const double kd = static_cast<double>(k);
    const double w = std::pow(kd, -s);
    const double t = sum + w;
    comp += std::fabs(sum) >= w ? (sum - t) + w : (w - t) + sum;
    sum = t;
    cdf_[k - 1] = sum + comp;
    weighted += kd * w;
  }
  const double total = cdf_.back();
  for (double& c : cdf_) c /= total;
  cdf_.back() = 1.0;
  mean_ = weighted / total;
}

uint64_t Zipf::sample_rank(RandomStream& rng) const {
  // The smallest k with P(X <= k) > u; u < 1 = cdf_.back(), so one always exists.
  const double u = rng.uniform01();
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  ORRERY_ASSERT(it != cdf_.end());
  return static_cast<uint64_t>(it - cdf_.begin()) + 1;
}

double Zipf::probability(uint64_t k) const {
  if (k < 1 || k > cdf_.size()) return 0.0;
  return k == 1 ? cdf_[0] : cdf_[k - 1] - cdf_[k - 2];
}

EmpiricalDiscrete::EmpiricalDiscrete(std::vector<double> values, const std::vector<double>& weights,
                                     const Where& where)
    : values_(std::move(values)) {
  const size_t n = values_.size();
  if (n == 0) invalid(where, "values", "values must not be empty");
  if (n > std::numeric_limits<uint32_t>::max()) {
    invalid(where, "values", fmt::format("at most {} values are supported, got {}",
                                         std::numeric_limits<uint32_t>::max(), n));
  }
  if (weights.size() != n) {
    invalid(where, "weights",
            fmt::format("weights must have one entry per value ({}), got {}", n, weights.size()));
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    require_finite(values_[i], where, "values");
    if (!(std::isfinite(weights[i]) && weights[i] >= 0.0)) {
      invalid(where, "weights", fmt::format("weights must be non-negative and finite, got {} at index {}",
                                            weights[i], i));
    }
    total += weights[i];
  }
  if (!(total > 0.0 && std::isfinite(total))) {
    invalid(where, "weights", fmt::format("weights must have a positive finite sum, got {}", total));
  }

  // Vose's alias construction: scale probabilities to mean 1, pair each column below 1 with one
  // above 1 that tops it up. Columns left over at the end are 1 up to rounding.
  double weighted = 0.0;
  std::vector<double> scaled(n);
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = weights[i] / total * static_cast<double>(n);
    weighted += weights[i] * values_[i];
  }
  mean_ = weighted / total;
  keep_.assign(n, 1.0);
  alias_.resize(n);
  std::vector<uint32_t> small, large;
  for (size_t i = 0; i < n; ++i) {
    alias_[i] = static_cast<uint32_t>(i);
    (scaled[i] < 1.0 ? small : large).push_back(static_cast<uint32_t>(i));
  }
  while (!small.empty() && !large.empty()) {
    const uint32_t lo = small.back();
    small.pop_back();
    const uint32_t hi = large.back();
    large.pop_back();
    keep_[lo] = scaled[lo];
    alias_[lo] = hi;
    scaled[hi] = (scaled[hi] + scaled[lo]) - 1.0;
    (scaled[hi] < 1.0 ? small : large).push_back(hi);
  }
  // Whatever remains (in either list) keeps probability 1: the leftover mass is rounding error.
}

double EmpiricalDiscrete::sample(RandomStream& rng) const {
  const size_t column = static_cast<size_t>(rng.uniform_int(values_.size()));
  return rng.uniform01() < keep_[column] ? values_[column] : values_[alias_[column]];
}

EmpiricalContinuous::EmpiricalContinuous(std::vector<double> samples, const Where& where)
    : sorted_(std::move(samples)) {
  if (sorted_.empty()) invalid(where, "samples", "samples must not be empty");
  for (double x : sorted_) require_finite(x, where, "samples");
  std::sort(sorted_.begin(), sorted_.end());
  const size_t n = sorted_.size();
  if (n == 1) {
    mean_ = sorted_[0];
  } else {
    // Each of the n-1 segments carries probability 1/(n-1) spread uniformly between its ends, so
    // its mean is the midpoint: mean = sum_i (x(i) + x(i+1)) / (2(n-1)).
    double midpoints = 0.0;
    for (size_t i = 0; i + 1 < n; ++i) midpoints += 0.5 * (sorted_[i] + sorted_[i + 1]);
    mean_ = midpoints / static_cast<double>(n - 1);
  }
}

double EmpiricalContinuous::quantile(double u) const {
  ORRERY_ASSERT(u >= 0.0 && u <= 1.0);
  const size_t n = sorted_.size();
  if (n == 1) return sorted_[0];
  const double h = u * static_cast<double>(n - 1);
  const size_t i = std::min(static_cast<size_t>(h), n - 2);
  return sorted_[i] + (h - static_cast<double>(i)) * (sorted_[i + 1] - sorted_[i]);
}

}  // namespace orrery
