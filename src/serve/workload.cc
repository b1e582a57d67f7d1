#include "serve/workload.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/assert.h"

namespace orrery::serve {

namespace {

[[noreturn]] void invalid(const Where& where, std::string_view key, std::string message, std::string hint = {}) {
  throw InputError(where.with_key(key), std::move(message), std::move(hint));
}

void require_positive_finite(double v, const Where& where, std::string_view key) {
  if (!(std::isfinite(v) && v > 0.0)) {
    invalid(where, key, "must be a positive finite number, found " + std::to_string(v));
  }
}

// Arrival offsets are kept in picoseconds; a gap above ~1e6 s means a rate far below any workload.
// A rate so low that the gap overflows a double (--rate 1e-320: inf) is clamped too; the request then lands past
// the range of simulated time and throw_time_overflow names it.
Time gap_time(double seconds) {
  ORRERY_ASSERT(seconds >= 0.0);  // also rejects NaN
  return Time::seconds(seconds < 1e6 ? seconds : 1e6);
}

int64_t clamp_round(double x, int64_t lo, int64_t hi) {
  if (!(x >= static_cast<double>(lo))) return lo;  // also maps NaN to lo
  if (x >= static_cast<double>(hi)) return hi;
  return std::clamp(static_cast<int64_t>(std::llround(x)), lo, hi);
}

// Time is int64 picoseconds: arrivals beyond 2^63 ps (about 106 days) cannot be represented.
[[noreturn]] void throw_time_overflow(int64_t request) {
  throw InputError(Where{"", 0, "serve.workload"},
                   "request " + std::to_string(request) + " would arrive after 9.2e6 s (106 days), the range of "
                   "simulated time",
                   "lower the number of requests or raise the arrival rate");
}

}  // namespace

// ---- Arrivals ----

PoissonArrivals::PoissonArrivals(double rate, const Where& where) : gap_(rate, where) {}

Time PoissonArrivals::next_gap(RandomStream& rng) { return gap_time(gap_.sample(rng)); }

namespace {
Gamma make_gap_gamma(double rate, double cv, const Where& where) {
  require_positive_finite(rate, where, "rate");
  require_positive_finite(cv, where, "cv");
  const double shape = 1.0 / (cv * cv);
  return Gamma(shape, 1.0 / (rate * shape), where);
}
}  // namespace

GammaArrivals::GammaArrivals(double rate, double cv, const Where& where)
    : rate_(rate), cv_(cv), gap_(make_gap_gamma(rate, cv, where)) {}

Time GammaArrivals::next_gap(RandomStream& rng) { return gap_time(gap_.sample(rng)); }

TraceShapedArrivals::TraceShapedArrivals(std::vector<double> gaps_s, double rate, const Where& where)
    : gaps_s_(std::move(gaps_s)), rate_(rate) {
  require_positive_finite(rate, where, "rate");
  if (gaps_s_.empty()) invalid(where, "gaps", "needs at least one inter-arrival gap (a trace of two requests)");
  double sum = 0.0;
  for (double g : gaps_s_) {
    if (!(std::isfinite(g) && g >= 0.0)) invalid(where, "gaps", "gaps must be finite and >= 0");
    sum += g;
  }
  if (!(sum > 0.0)) invalid(where, "gaps", "all gaps are zero: the trace has no arrival rate to scale");
  // Native mean gap sum/n; the target mean gap 1/rate: multiply every gap by n / (sum · rate).
  const double k = static_cast<double>(gaps_s_.size()) / (sum * rate);
  for (double& g : gaps_s_) g *= k;
}

Time TraceShapedArrivals::next_gap(RandomStream& /*rng*/) {
  const double g = gaps_s_[next_];
  next_ = (next_ + 1) % gaps_s_.size();
  return gap_time(g);
}

std::vector<double> interarrival_gaps(RequestSource& source, int64_t max_requests) {
  std::vector<double> gaps;
  std::optional<Time> prev;
  for (int64_t i = 0; i < max_requests; ++i) {
    std::optional<Request> r = source.next();
    if (!r) break;
    if (prev) gaps.push_back((r->arrival - *prev).to_seconds());
    prev = r->arrival;
  }
  return gaps;
}

// ---- Lengths ----

LengthDistribution LengthDistribution::fixed(int64_t n, const Where& where) {
  if (n < 1) invalid(where, "tokens", "a fixed length must be >= 1, found " + std::to_string(n));
  return LengthDistribution(Dist(n), n, n);
}

LengthDistribution LengthDistribution::uniform(int64_t lo, int64_t hi, const Where& where) {
  if (lo < 1) invalid(where, "min", "must be >= 1, found " + std::to_string(lo));
  if (hi < lo) invalid(where, "max", "must be >= min (" + std::to_string(lo) + "), found " + std::to_string(hi));
  // floor(U[lo, hi+1)) is uniform on {lo..hi}; sample() floors by subtracting 0.5 before rounding.
  return LengthDistribution(Dist(Uniform(static_cast<double>(lo), static_cast<double>(hi) + 1.0, where)), lo, hi);
}

LengthDistribution LengthDistribution::lognormal(double mu, double sigma, int64_t min, int64_t max,
                                                 const Where& where) {
  if (min < 1) invalid(where, "min", "must be >= 1, found " + std::to_string(min));
  if (max < min) invalid(where, "max", "must be >= min (" + std::to_string(min) + "), found " + std::to_string(max));
  return LengthDistribution(Dist(LogNormal(mu, sigma, where)), min, max);
}

LengthDistribution LengthDistribution::zipf(int64_t n, double s, const Where& where) {
  if (n < 1) invalid(where, "n", "must be >= 1, found " + std::to_string(n));
  return LengthDistribution(Dist(Zipf(static_cast<uint64_t>(n), s, where)), 1, n);
}

LengthDistribution LengthDistribution::empirical(const std::vector<int64_t>& values,
                                                 const std::vector<double>& weights, const Where& where) {
  std::vector<double> v;
  v.reserve(values.size());
  for (int64_t x : values) {
    if (x < 1) invalid(where, "values", "token counts must be >= 1, found " + std::to_string(x));
    v.push_back(static_cast<double>(x));
  }
  return LengthDistribution(Dist(EmpiricalDiscrete(std::move(v), weights, where)), 1, kMaxTokens);
}

LengthDistribution LengthDistribution::empirical_continuous(std::vector<double> samples, const Where& where) {
  for (double x : samples) {
    if (!(x >= 1.0)) invalid(where, "samples", "token counts must be >= 1, found " + std::to_string(x));
  }
  return LengthDistribution(Dist(EmpiricalContinuous(std::move(samples), where)), 1, kMaxTokens);
}

int64_t LengthDistribution::sample(RandomStream& rng) const {
  return std::visit(
      [&](const auto& d) -> int64_t {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, int64_t>) {
          return d;
        } else if constexpr (std::is_same_v<D, Uniform>) {
          return clamp_round(std::floor(d.sample(rng)), min_, max_);
        } else if constexpr (std::is_same_v<D, Zipf>) {
          return static_cast<int64_t>(d.sample_rank(rng));
        } else {
          return clamp_round(d.sample(rng), min_, max_);
        }
      },
      dist_);
}

double LengthDistribution::mean() const {
  return std::visit(
      [&](const auto& d) -> double {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, int64_t>) {
          return static_cast<double>(d);
        } else if constexpr (std::is_same_v<D, Uniform>) {
          return d.mean() - 0.5;  // mean of floor(U[lo, hi+1)) = (lo + hi) / 2
        } else {
          return d.mean();
        }
      },
      dist_);
}

// ---- Synthetic source ----

namespace {
std::vector<RequestType> checked_types(std::vector<RequestType> types) {
  const Where where{"", 0, "types"};
  if (types.empty()) invalid(where, "", "a workload needs at least one request type");
  std::set<std::string> names;
  for (size_t i = 0; i < types.size(); ++i) {
    const Where w = where.with_key("[" + std::to_string(i) + "]");
    if (types[i].name.empty()) invalid(w, "name", "must not be empty");
    // The name becomes a random-stream path component (core/random.h), where '/' separates levels.
    if (types[i].name.find('/') != std::string::npos) {
      invalid(w, "name", "must not contain '/', found '" + types[i].name + "'");
    }
    if (!names.insert(types[i].name).second) invalid(w, "name", "duplicate type name '" + types[i].name + "'");
    require_positive_finite(types[i].weight, w, "weight");
  }
  return types;
}
}  // namespace

SyntheticSource::SyntheticSource(std::unique_ptr<ArrivalProcess> arrivals, std::vector<RequestType> types,
                                 uint64_t seed, int64_t max_requests, Time duration)
    : arrivals_(std::move(arrivals)),
      types_(checked_types(std::move(types))),
      arrival_rng_(RandomStream::derive(seed, "serve.arrivals")),
      mix_rng_(RandomStream::derive(seed, "serve.mix")),
      max_requests_(max_requests),
      duration_(duration) {
  ORRERY_CHECK(arrivals_ != nullptr);
  if (max_requests < 0) invalid(Where{}, "max_requests", "must be >= 0, found " + std::to_string(max_requests));
  const RandomStream lengths = RandomStream::derive(seed, "serve.lengths");
  std::vector<double> index;
  std::vector<double> weights;
  for (size_t i = 0; i < types_.size(); ++i) {
    const RandomStream t = lengths.child(types_[i].name);
    prompt_rngs_.push_back(t.child("prompt"));
    output_rngs_.push_back(t.child("output"));
    index.push_back(static_cast<double>(i));
    weights.push_back(types_[i].weight);
  }
  if (types_.size() > 1) chooser_.emplace(std::move(index), weights);
}

std::optional<Request> SyntheticSource::next() {
  if (done_ || emitted_ >= max_requests_) {
    done_ = true;
    return std::nullopt;
  }
  const Time gap = arrivals_->next_gap(arrival_rng_);
  if (gap > Time::max() - clock_) throw_time_overflow(emitted_);
  if (gap > duration_ - clock_) {  // arrival beyond the horizon (written to avoid overflow)
    done_ = true;
    return std::nullopt;
  }
  clock_ += gap;
  const size_t t = chooser_ ? static_cast<size_t>(chooser_->sample(mix_rng_)) : 0;
  Request r;
  r.id = emitted_++;
  r.arrival = clock_;
  r.type = static_cast<int32_t>(t);
  r.prompt_tokens = types_[t].prompt.sample(prompt_rngs_[t]);
  r.output_tokens = types_[t].output.sample(output_rngs_[t]);
  return r;
}

// ---- Wrappers ----

RateScaledSource::RateScaledSource(std::unique_ptr<RequestSource> inner, double factor, const Where& where)
    : inner_(std::move(inner)), factor_(factor) {
  ORRERY_CHECK(inner_ != nullptr);
  require_positive_finite(factor, where, "rate_scale");
}

std::optional<Request> RateScaledSource::next() {
  std::optional<Request> r = inner_->next();
  if (!r) return r;
  if (!first_) first_ = r->arrival;
  const double offset_ps = static_cast<double>((r->arrival - *first_).picoseconds()) / factor_;
  if (offset_ps >= static_cast<double>((Time::max() - *first_).picoseconds())) throw_time_overflow(r->id);
  r->arrival = *first_ + Time::ps(std::llround(offset_ps));
  return r;
}

ReArrivedSource::ReArrivedSource(std::unique_ptr<RequestSource> lengths, std::unique_ptr<ArrivalProcess> arrivals,
                                 uint64_t seed)
    : lengths_(std::move(lengths)), arrivals_(std::move(arrivals)), rng_(RandomStream::derive(seed, "serve.arrivals")) {
  ORRERY_CHECK(lengths_ != nullptr && arrivals_ != nullptr);
}

std::optional<Request> ReArrivedSource::next() {
  std::optional<Request> r = lengths_->next();
  if (!r) return r;
  const Time gap = arrivals_->next_gap(rng_);
  if (gap > Time::max() - clock_) throw_time_overflow(emitted_);
  clock_ += gap;
  r->arrival = clock_;
  r->id = emitted_++;
  return r;
}

TakeSource::TakeSource(std::unique_ptr<RequestSource> inner, int64_t max_requests)
    : inner_(std::move(inner)), left_(max_requests) {
  ORRERY_CHECK(inner_ != nullptr);
}

std::optional<Request> TakeSource::next() {
  if (left_ <= 0) return std::nullopt;
  --left_;
  return inner_->next();
}

std::unique_ptr<RequestSource> default_workload(uint64_t seed, int64_t max_requests, double rate_scale) {
  const Where where{"<default workload>", 0, ""};
  require_positive_finite(rate_scale, where, "rate_scale");
  std::vector<RequestType> types;
  types.push_back(RequestType{
      "azure-conv", 1.0,
      LengthDistribution::lognormal(kAzureConvPromptMu, kAzureConvPromptSigma, kAzureConvPromptMin,
                                    kAzureConvPromptMax),
      LengthDistribution::lognormal(kAzureConvOutputMu, kAzureConvOutputSigma, kAzureConvOutputMin,
                                    kAzureConvOutputMax)});
  return std::make_unique<SyntheticSource>(
      std::make_unique<GammaArrivals>(kAzureConvRate * rate_scale, kAzureConvInterarrivalCv, where),
      std::move(types), seed, max_requests);
}

}  // namespace orrery::serve
