// Serving workloads: requests, pull-based request streams and synthetic generators.
//
// Model card
//   What      The stream of inference requests a serving simulation consumes: each request has an
//             arrival time, a prompt length, an output length and (optionally) the hashes of its
//             prompt's prefix KV blocks. Sources are pulled one request at a time (RequestSource::next),
//             so a run over 10^7 requests holds O(1) requests in memory: no source here stores the
//             requests it has produced (trace-shaped arrivals keep the trace's gap list, O(trace)).
//   Arrivals  Poisson(rate)         i.i.d. exponential gaps, mean 1/rate, CV 1.
//             Gamma(rate, cv)       i.i.d. Gamma gaps with shape k = 1/cv², scale 1/(rate·k): mean
//                                   1/rate, variance cv²/rate² (cv > 1 is burstier than Poisson; a
//                                   renewal process, so bursts are not correlated over time).
//             TraceShaped(gaps, r)  replays a trace's inter-arrival gaps in order, each multiplied by
//                                   (native rate / r) so that the mean rate becomes r; cycles when the
//                                   gaps run out. Keeps the trace's burst structure (its autocorrelation).
//   Lengths   Fixed(n); Uniform{lo..hi} (integers, each with probability 1/(hi-lo+1));
//             LogNormal(mu, sigma) rounded to the nearest integer; Zipf(n, s) over ranks {1..n};
//             Empirical (values with weights, or a continuous fit of samples). Every sample is then
//             clamped to [min, max] (default [1, 2^62]); clamping and rounding are the only changes
//             to the textbook distribution, and the tests use parameters where both are negligible.
//   Mix       A synthetic workload has one or more request types (name, weight, prompt and output
//             length distributions); each request's type is drawn with probability weight / sum.
//   Scaling   RateScaledSource(factor) maps t -> t0 + (t - t0) / factor (t0 the first arrival): rates
//             multiply by factor, every inter-arrival gap divides by it, lengths are unchanged.
//   Default   default_workload(): Gamma arrivals and lognormal lengths fitted to the public Azure LLM
//             inference conversation trace (2023); the figures and their derivation are in
//             docs/workloads.md and tools/fit_azure_conv.py (constants kAzureConv* below).
//   Random    All randomness comes from core/random.h streams derived from the run's seed:
//             "serve.arrivals", "serve.mix" and "serve.lengths/<type>/{prompt,output}", so adding a
//             type never shifts another type's length samples.
//   Errors    Invalid parameters throw InputError naming the parameter ("rate", "cv", "weight").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "core/units.h"

namespace orrery::serve {

struct Request {
  int64_t id = 0;              // 0, 1, 2... in arrival order within its source
  Time arrival;                // since the start of the workload
  int64_t prompt_tokens = 0;   // >= 1
  int64_t output_tokens = 0;   // >= 1
  int32_t type = 0;            // index of the request type in a synthetic mix; 0 for traces
  std::vector<uint64_t> prefix_blocks;  // hashes of the prompt's prefix KV blocks; empty when unknown
};

// A pull-based stream of requests in non-decreasing arrival order.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The next request, or nullopt once the stream is exhausted (and on every later call).
  virtual std::optional<Request> next() = 0;
};

// ---- Arrival processes ----

// Produces successive inter-arrival gaps.
class ArrivalProcess {
 public:
  virtual ~ArrivalProcess() = default;
  // The gap before the next arrival (the first call gives the first arrival's offset from 0).
  virtual Time next_gap(RandomStream& rng) = 0;
  // Long-run mean arrival rate, requests per second.
  virtual double rate() const = 0;
};

class PoissonArrivals final : public ArrivalProcess {
 public:
  // REQUIRES (InputError): rate > 0 (requests/s).
  explicit PoissonArrivals(double rate, const Where& where = {});
  Time next_gap(RandomStream& rng) override;
  double rate() const override { return gap_.rate(); }

 private:
  Exponential gap_;
};

class GammaArrivals final : public ArrivalProcess {
 public:
  // REQUIRES (InputError): rate > 0 (requests/s), cv > 0 (stddev/mean of the gaps).
  GammaArrivals(double rate, double cv, const Where& where = {});
  Time next_gap(RandomStream& rng) override;
  double rate() const override { return rate_; }
  double cv() const { return cv_; }

 private:
  double rate_;
  double cv_;
  Gamma gap_;
};

class TraceShapedArrivals final : public ArrivalProcess {
 public:
  // gaps_s: a trace's inter-arrival gaps in seconds, in trace order. rate: the target mean rate.
  // REQUIRES (InputError): gaps non-empty, finite, >= 0, with a positive sum; rate > 0.
  TraceShapedArrivals(std::vector<double> gaps_s, double rate, const Where& where = {});
  Time next_gap(RandomStream& rng) override;
  double rate() const override { return rate_; }

 private:
  std::vector<double> gaps_s_;  // already scaled to the target rate
  size_t next_ = 0;
  double rate_;
};

// The inter-arrival gaps (seconds) of the first max_requests requests of `source` (n requests give
// n - 1 gaps), for TraceShapedArrivals.
std::vector<double> interarrival_gaps(RequestSource& source, int64_t max_requests = INT64_MAX);

// ---- Length distributions ----

// A distribution over positive integer token counts.
class LengthDistribution {
 public:
  static constexpr int64_t kMaxTokens = int64_t{1} << 62;

  static LengthDistribution fixed(int64_t n, const Where& where = {});
  // Integers lo..hi inclusive, uniformly.
  static LengthDistribution uniform(int64_t lo, int64_t hi, const Where& where = {});
  // round(exp(Normal(mu, sigma))) clamped to [min, max].
  static LengthDistribution lognormal(double mu, double sigma, int64_t min = 1, int64_t max = kMaxTokens,
                                      const Where& where = {});
  // Ranks {1..n} with P(k) proportional to k^-s.
  static LengthDistribution zipf(int64_t n, double s, const Where& where = {});
  // values[i] with probability weights[i] / sum(weights). REQUIRES: values >= 1.
  static LengthDistribution empirical(const std::vector<int64_t>& values, const std::vector<double>& weights,
                                      const Where& where = {});
  // Rounded samples of the piecewise-linear quantile function through `samples` (core/random.h).
  static LengthDistribution empirical_continuous(std::vector<double> samples, const Where& where = {});

  int64_t sample(RandomStream& rng) const;
  // Mean of the unrounded, unclamped distribution (exact for fixed, uniform, zipf, empirical).
  double mean() const;

 private:
  using Dist = std::variant<int64_t, Uniform, LogNormal, Zipf, EmpiricalDiscrete, EmpiricalContinuous>;
  LengthDistribution(Dist dist, int64_t min, int64_t max) : dist_(std::move(dist)), min_(min), max_(max) {}
  Dist dist_;
  int64_t min_ = 1;
  int64_t max_ = kMaxTokens;
};

// ---- Synthetic workloads ----

struct RequestType {
  std::string name;     // names the type's random streams; unique within a workload
  double weight = 1.0;  // relative frequency, > 0
  LengthDistribution prompt;
  LengthDistribution output;
};

// An arrival process plus a weighted mix of request types; stops after max_requests requests or at
// the first arrival later than duration, whichever comes first.
class SyntheticSource final : public RequestSource {
 public:
  // REQUIRES (InputError): types non-empty with unique names and positive weights; max_requests >= 0.
  SyntheticSource(std::unique_ptr<ArrivalProcess> arrivals, std::vector<RequestType> types, uint64_t seed,
                  int64_t max_requests, Time duration = Time::max());
  std::optional<Request> next() override;

 private:
  std::unique_ptr<ArrivalProcess> arrivals_;
  std::vector<RequestType> types_;
  std::vector<RandomStream> prompt_rngs_;  // one per type: "serve.lengths/<name>/prompt"
  std::vector<RandomStream> output_rngs_;
  std::optional<EmpiricalDiscrete> chooser_;  // type index by weight; absent with one type
  RandomStream arrival_rng_;
  RandomStream mix_rng_;
  int64_t max_requests_;
  Time duration_;
  int64_t emitted_ = 0;
  Time clock_;
  bool done_ = false;
};

// Wraps a source and multiplies its arrival rate by `factor`: t -> t0 + (t - t0) / factor, t0 the
// first arrival (rounded to the picosecond). REQUIRES (InputError): factor > 0 and finite.
class RateScaledSource final : public RequestSource {
 public:
  RateScaledSource(std::unique_ptr<RequestSource> inner, double factor, const Where& where = {});
  std::optional<Request> next() override;

 private:
  std::unique_ptr<RequestSource> inner_;
  double factor_;
  std::optional<Time> first_;
};

// Takes lengths (and prefix blocks) from `lengths`, in order, and arrival times from `arrivals`:
// replays a length-only trace (such as vidur's arxiv summarization file) under synthetic arrivals.
class ReArrivedSource final : public RequestSource {
 public:
  ReArrivedSource(std::unique_ptr<RequestSource> lengths, std::unique_ptr<ArrivalProcess> arrivals, uint64_t seed);
  std::optional<Request> next() override;

 private:
  std::unique_ptr<RequestSource> lengths_;
  std::unique_ptr<ArrivalProcess> arrivals_;
  RandomStream rng_;
  Time clock_;
  int64_t emitted_ = 0;
};

// The first max_requests requests of `inner`.
class TakeSource final : public RequestSource {
 public:
  TakeSource(std::unique_ptr<RequestSource> inner, int64_t max_requests);
  std::optional<Request> next() override;

 private:
  std::unique_ptr<RequestSource> inner_;
  int64_t left_;
};

// ---- The built-in default workload, fitted to the Azure LLM inference conversation trace ----
// Source: Azure/AzurePublicDataset data/AzureLLMInferenceTrace_conv.csv (commit b469a113, CC-BY-4.0;
// Patel et al., "Splitwise", ISCA 2024): 19,366 requests over 3,501.72 s. Fitted by
// tools/fit_azure_conv.py: rate = (N-1)/span; CV = stddev/mean of gaps; lognormal mu, sigma = mean and
// population stddev of ln(tokens) (the maximum-likelihood fit); clamps = the trace's min and max.
inline constexpr double kAzureConvRate = 5.530136;           // requests/s
inline constexpr double kAzureConvInterarrivalCv = 1.094170;  // Gamma shape 1/cv² = 0.835
inline constexpr double kAzureConvPromptMu = 6.633313;       // ln tokens; median e^mu = 760
inline constexpr double kAzureConvPromptSigma = 0.985154;
inline constexpr int64_t kAzureConvPromptMin = 2;
inline constexpr int64_t kAzureConvPromptMax = 14050;
inline constexpr double kAzureConvOutputMu = 5.018997;       // median e^mu = 151
inline constexpr double kAzureConvOutputSigma = 0.859009;
inline constexpr int64_t kAzureConvOutputMin = 7;
inline constexpr int64_t kAzureConvOutputMax = 1000;

// The Azure-conversation-shaped synthetic workload: Gamma(kAzureConvRate · rate_scale,
// kAzureConvInterarrivalCv) arrivals, one type "azure-conv" with clamped lognormal lengths.
std::unique_ptr<RequestSource> default_workload(uint64_t seed, int64_t max_requests, double rate_scale = 1.0);

}  // namespace orrery::serve
