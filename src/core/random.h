// Deterministic, named random streams and orrery's own sampling distributions.
//
// Model card
//   What      Pseudo-random numbers for every stochastic model (arrivals, lengths, failures...). A run
//             is fully determined by one 64-bit seed: each component draws from its own stream, named
//             "<pillar>.<component>" ("serve.arrivals", "train.stragglers"), so adding, removing or
//             reordering components never shifts another component's samples. There is no global RNG.
//   Generator xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number generators",
//             ACM TOMS 47(4), 2021; preprint 2018). 256-bit state, period 2^256-1, passes BigCrush.
//   Seeding   key = seed XOR fnv1a64(path) (64-bit FNV-1a, Fowler/Noll/Vo); the four state words are
//             four successive outputs of splitmix64 (Steele, Lea & Flood, OOPSLA 2014) started at key.
//             splitmix64's output function is a bijection, so at most one of four consecutive outputs
//             is zero and the forbidden all-zero state cannot occur (still checked).
//             A child's path is parent_path + "/" + name, so derive(s, "a").child("b") is the same
//             stream as derive(s, "a/b"), whatever has been drawn from the parent.
//   Portable  The integer sequence, uniform01, open01 and uniform_int are bit-identical on every
//             platform (integer arithmetic and exact scalings only). Distributions use only +,-,*,/,
//             sqrt (correctly rounded by IEEE 754) and log/exp/pow from the C library; glibc's are
//             correctly rounded in practice, others may differ by an ulp, and such a difference can
//             only change a sample by rounding, or very rarely flip an accept/reject decision.
//             No std::*_distribution is used: their algorithms differ between standard libraries.
//   Samplers  Uniform(a, b)         a + (b-a)·U, U = uniform01.
//             Exponential(rate)     inversion, -ln(U)/rate with U in (0,1).
//             Normal(mu, sigma)     Marsaglia & Bray polar method (SIAM Review 6(3), 1964); the second
//                                   variate of each pair is discarded so that sample() is stateless.
//             LogNormal(mu, sigma)  exp(Normal(mu, sigma)).
//             Gamma(shape, scale)   Marsaglia & Tsang, ACM TOMS 26(3), 2000; for shape < 1 the
//                                   boost Gamma(shape) = Gamma(shape+1)·U^(1/shape) from the same paper.
//             Zipf(n, s)            exact inversion of a precomputed CDF over {1..n}: O(n) memory and
//                                   set-up, O(log n) per sample (binary search); n <= Zipf::kMaxN.
//             EmpiricalDiscrete     Walker's alias method (Walker 1977) built with Vose's stable
//                                   algorithm (IEEE TSE 17(9), 1991): O(n) set-up, O(1) per sample.
//             EmpiricalContinuous   inverse of the piecewise-linear CDF through the order statistics
//                                   (the "type 7" quantile function): O(n log n) set-up, O(1) per sample.
//   Units     Distributions are unit-free: the caller decides (a rate in 1/s gives samples in s).
//   Errors    Invalid parameters throw InputError whose key is the parameter name ("rate", "sigma"),
//             appended to the optional Where the caller passes (a config reader passes the key of the
//             distribution block, giving "serve.arrivals.rate").
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/assert.h"
#include "core/error.h"

namespace orrery {

// 64-bit FNV-1a of `data`, continuing from `basis` (pass a previous result to hash a concatenation).
uint64_t fnv1a64(std::string_view data, uint64_t basis = 0xcbf29ce484222325ULL);

// splitmix64 (Steele et al. 2014): a 64-bit counter with a strong output mix. Used for seeding only.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();

 private:
  uint64_t state_;
};

// A xoshiro256** stream identified by (seed, path). Cheap to copy (48 bytes). Not thread-safe: give
// each thread or component its own stream (child() exists for that).
class RandomStream {
 public:
  // The stream of component `component` ("serve.arrivals") in the run with seed `seed`.
  static RandomStream derive(uint64_t seed, std::string_view component);
  // An independent sub-stream, a function of (seed, path + "/" + name) only, not of this stream's
  // position: child("gpu3") is the same whether called before or after drawing from *this.
  RandomStream child(std::string_view name) const;

  uint64_t next_u64();
  // Uniform on [0, 1): 53 random bits times 2^-53 (every value a multiple of 2^-53).
  double uniform01();
  // Uniform on (0, 1): ((52 random bits) + 0.5) · 2^-52; never 0 or 1, safe to take the log of.
  double open01();
  // Uniform on {0, ..., n-1} without modulo bias (Lemire, ACM TOMACS 29(1), 2019). REQUIRES: n > 0.
  uint64_t uniform_int(uint64_t n);

  uint64_t seed() const { return seed_; }
  uint64_t path_hash() const { return path_hash_; }

 private:
  RandomStream(uint64_t seed, uint64_t path_hash);
  std::array<uint64_t, 4> s_{};
  uint64_t seed_ = 0;
  uint64_t path_hash_ = 0;
};

// Inline: the minibatch samplers draw hundreds of millions of these (decentral/problem.cc).
inline uint64_t RandomStream::next_u64() {
  const auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

inline uint64_t RandomStream::uniform_int(uint64_t n) {
  ORRERY_ASSERT(n > 0);
  // Lemire: the high word of x·n is uniform on [0, n) once the low word is outside the first
  // (2^64 mod n) values of each residue class; the division is only needed when low < n.
  __extension__ typedef unsigned __int128 Uint128;  // GCC/Clang; __extension__ silences -Wpedantic
  Uint128 m = static_cast<Uint128>(next_u64()) * n;
  auto low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      m = static_cast<Uint128>(next_u64()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

// Uniform on [a, b). REQUIRES (InputError): a, b and b - a finite, a <= b (a == b always gives a).
class Uniform {
 public:
  Uniform(double a, double b, const Where& where = {});
  double sample(RandomStream& rng) const;
  double mean() const { return 0.5 * (a_ + b_); }
  double variance() const { return (b_ - a_) * (b_ - a_) / 12.0; }

 private:
  double a_;
  double b_;
};

// Exponential with the given rate (mean 1/rate). REQUIRES (InputError): rate > 0 and finite.
class Exponential {
 public:
  explicit Exponential(double rate, const Where& where = {});
  double sample(RandomStream& rng) const;
  double rate() const { return rate_; }
  double mean() const { return 1.0 / rate_; }
  double variance() const { return 1.0 / (rate_ * rate_); }

 private:
  double rate_;
};

// Normal(mu, sigma). REQUIRES (InputError): mu finite, sigma >= 0 and finite (sigma == 0 gives mu).
// Consumes two or more uniform01 draws per sample (rejection of pairs outside the unit disc).
class Normal {
 public:
  Normal(double mu, double sigma, const Where& where = {});
  double sample(RandomStream& rng) const;
  double mean() const { return mu_; }
  double variance() const { return sigma_ * sigma_; }

 private:
  double mu_;
  double sigma_;
};

// exp(X) with X ~ Normal(mu, sigma): mu and sigma are those of the underlying normal.
// mean exp(mu + sigma²/2), variance (exp(sigma²) - 1)·exp(2mu + sigma²).
class LogNormal {
 public:
  LogNormal(double mu, double sigma, const Where& where = {});
  // The lognormal with the given mean and coefficient of variation (stddev/mean):
  // sigma² = ln(1 + cv²), mu = ln(mean) - sigma²/2. REQUIRES (InputError): mean > 0, cv >= 0, finite.
  static LogNormal from_mean_cv(double mean, double cv, const Where& where = {});
  double sample(RandomStream& rng) const;
  double mu() const { return normal_.mean(); }
  double sigma() const { return sigma_; }
  double mean() const;
  double variance() const;

 private:
  Normal normal_;
  double sigma_;
};

// Gamma with shape k and scale theta (mean k·theta, variance k·theta²).
// REQUIRES (InputError): shape > 0, scale > 0, both finite.
class Gamma {
 public:
  Gamma(double shape, double scale, const Where& where = {});
  double sample(RandomStream& rng) const;
  double mean() const { return shape_ * scale_; }
  double variance() const { return shape_ * scale_ * scale_; }

 private:
  double shape_;
  double scale_;
  double d_;  // Marsaglia-Tsang d = a - 1/3 for a = max(shape, shape + 1 when shape < 1)
  double c_;  // 1 / sqrt(9 d)
};

// Zipf over {1, ..., n} with P(k) = k^-s / H(n, s), H(n, s) = sum_{j=1..n} j^-s.
// REQUIRES (InputError): 1 <= n <= kMaxN, s > 0 and finite (s may be 1).
// Exact: samples invert a CDF table (8·n bytes) by binary search, O(log n) per sample.
class Zipf {
 public:
  static constexpr uint64_t kMaxN = uint64_t{1} << 24;  // 16.7M ranks, a 128 MiB table
  Zipf(uint64_t n, double s, const Where& where = {});
  // A rank in {1, ..., n}, returned as a double like the other distributions.
  double sample(RandomStream& rng) const { return static_cast<double>(sample_rank(rng)); }
  uint64_t sample_rank(RandomStream& rng) const;
  // P(k) for k in {1..n}, else 0.
  double probability(uint64_t k) const;
  // H(n, s-1) / H(n, s).
  double mean() const { return mean_; }
  uint64_t n() const { return static_cast<uint64_t>(cdf_.size()); }

 private:
  std::vector<double> cdf_;  // cdf_[k-1] = P(X <= k); cdf_.back() == 1 exactly
  double mean_ = 0.0;
};

// values[i] with probability weights[i] / sum(weights).
// REQUIRES (InputError): values non-empty and the same length as weights; weights finite, >= 0,
// with a positive sum; values finite.
class EmpiricalDiscrete {
 public:
  EmpiricalDiscrete(std::vector<double> values, const std::vector<double>& weights, const Where& where = {});
  double sample(RandomStream& rng) const;
  double mean() const { return mean_; }

 private:
  std::vector<double> values_;
  std::vector<double> keep_;      // probability of keeping column i rather than taking its alias
  std::vector<uint32_t> alias_;
  double mean_ = 0.0;
};

// The continuous distribution whose quantile function linearly interpolates the order statistics
// x(0) <= ... <= x(n-1) of the given samples: Q(u) = x(i) + (h - i)(x(i+1) - x(i)), h = u(n-1),
// i = floor(h). Support [min, max]; one sample gives a point mass. The samples need not be sorted.
// REQUIRES (InputError): samples non-empty and finite.
class EmpiricalContinuous {
 public:
  explicit EmpiricalContinuous(std::vector<double> samples, const Where& where = {});
  double sample(RandomStream& rng) const { return quantile(rng.uniform01()); }
  // Q(u) for u in [0, 1].
  double quantile(double u) const;
  // Mean of the piecewise-linear distribution: (sum x - (x(0) + x(n-1))/2) / (n-1); x(0) when n = 1.
  double mean() const { return mean_; }

 private:
  std::vector<double> sorted_;
  double mean_ = 0.0;
};

}  // namespace orrery
