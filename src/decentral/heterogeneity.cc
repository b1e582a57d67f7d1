#include "decentral/heterogeneity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/strings.h"
#include "core/unit_parse.h"
#include "decentral/device_trace.h"
#include "net/maxmin.h"

namespace orrery::decentral {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    const size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos));
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return out;
}

double parse_plain(std::string_view text, const Where& where, const char* what) {
  const std::string s(trim(text));
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    throw InputError(where, fmt::format("expected {}, got '{}'", what, s));
  }
  return v;
}

enum class Quantity { kTime, kRate };

double parse_value(std::string_view text, Quantity q, const Where& where) {
  return q == Quantity::kTime ? parse_time_positive(text, where).to_seconds()
                              : parse_bandwidth_positive(text, where).bytes_per_second();
}

Dist parse_dist(std::string_view text, Quantity q, const Where& where) {
  const std::vector<std::string_view> parts = split(trim(text), ':');
  const std::string kind = to_lower(trim(parts.front()));
  const char* unit_example = q == Quantity::kTime ? "20us" : "1Gb/s";
  const auto form = [&] {
    return fmt::format("expected V, fixed:V, uniform:LO:HI or lognormal:MEAN:CV (e.g. lognormal:{}:1)", unit_example);
  };
  if (kind == "fixed" || kind == "uniform" || kind == "lognormal") {
    const size_t want = kind == "fixed" ? 2 : 3;
    if (parts.size() != want) throw InputError(where, fmt::format("'{}': {}", text, form()));
    if (kind == "fixed") return Dist::fixed(parse_value(parts[1], q, where));
    if (kind == "uniform") {
      const double lo = parse_value(parts[1], q, where);
      const double hi = parse_value(parts[2], q, where);
      if (hi < lo) throw InputError(where, fmt::format("uniform:LO:HI needs LO <= HI, got '{}'", text));
      return Dist::uniform(lo, hi);
    }
    const double mean = parse_value(parts[1], q, where);
    const double cv = parse_plain(parts[2], where, "a coefficient of variation >= 0");
    if (cv < 0) throw InputError(where, fmt::format("the coefficient of variation must be >= 0, got {}", cv));
    return Dist::lognormal(mean, cv);
  }
  if (parts.size() != 1) {
    throw InputError(where, fmt::format("unknown distribution '{}'; {}", kind, form()),
                     suggest(kind, {"fixed", "uniform", "lognormal"}));
  }
  return Dist::fixed(parse_value(parts.front(), q, where));
}

std::string node_name(NodeIndex i) { return std::to_string(i); }
uint64_t link_key(NodeIndex from, NodeIndex to) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(from)) << 32) | static_cast<uint32_t>(to);
}

}  // namespace

// --- Dist ------------------------------------------------------------------------------------------------

double Dist::sample(RandomStream& rng) const {
  switch (kind) {
    case Kind::kFixed: return a;
    case Kind::kUniform: return a + (b - a) * rng.uniform01();
    case Kind::kLogNormal: return b > 0 ? LogNormal::from_mean_cv(a, b).sample(rng) : a;
  }
  return a;
}

double Dist::mean() const { return kind == Kind::kUniform ? 0.5 * (a + b) : a; }

// --- Parsing ---------------------------------------------------------------------------------------------

HeterogeneitySpec parse_heterogeneity(std::string_view text, const Where& where) {
  HeterogeneitySpec spec;
  const std::vector<std::string> keys = {"compute", "latency", "bandwidth", "uplink", "downlink"};
  for (std::string_view item : split(text, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw InputError(where, fmt::format("expected KEY=DISTRIBUTION, got '{}'", item),
                       "keys: compute, latency, bandwidth, uplink, downlink; e.g. compute=lognormal:20us:1");
    }
    const std::string key = to_lower(trim(item.substr(0, eq)));
    const std::string_view value = item.substr(eq + 1);
    const Where w = where.with_key(key);
    if (key == "compute") {
      spec.compute = parse_dist(value, Quantity::kTime, w);
    } else if (key == "latency") {
      spec.latency = parse_dist(value, Quantity::kTime, w);
    } else if (key == "bandwidth") {
      spec.bandwidth = parse_dist(value, Quantity::kRate, w);
    } else if (key == "uplink") {
      spec.uplink = parse_dist(value, Quantity::kRate, w);
    } else if (key == "downlink") {
      spec.downlink = parse_dist(value, Quantity::kRate, w);
    } else {
      throw InputError(where, fmt::format("unknown key '{}'", key), suggest(key, keys));
    }
  }
  return spec;
}

ChurnSpec parse_churn(std::string_view text, const Where& where) {
  const std::vector<std::string_view> parts = split(trim(text), ':');
  if (parts.size() > 2) throw InputError(where, fmt::format("expected FRACTION or FRACTION:MEAN_OFF (e.g. 0.2:5s), got '{}'", text));
  ChurnSpec c;
  c.fraction = parse_plain(parts[0], where, "an unavailable fraction in [0, 1) (e.g. 0.2 or 0.2:5s)");
  if (!(c.fraction >= 0 && c.fraction < 1)) {
    throw InputError(where, fmt::format("the unavailable fraction must be in [0, 1), got {}", c.fraction));
  }
  if (parts.size() == 2) c.mean_off_s = parse_time_positive(parts[1], where).to_seconds();
  return c;
}

// --- Availability ----------------------------------------------------------------------------------------

Availability::Availability(std::vector<std::pair<double, double>> intervals, double period)
    : always_(false), period_(period), iv_(std::move(intervals)) {}

Availability::Availability(const ChurnSpec& churn, RandomStream rng)
    : always_(!churn.enabled()), lazy_(churn.enabled()), rng_(rng) {
  if (!lazy_) return;
  off_mean_ = churn.mean_off_s;
  on_mean_ = churn.mean_off_s * (1 - churn.fraction) / churn.fraction;
  // The stationary state at 0: unavailable with probability `fraction`; exponential periods are memoryless,
  // so the first (residual) period has the same law as the others.
  next_on_ = rng_.uniform01() >= churn.fraction;
}

void Availability::extend(double t) const {
  // Generate until an available period starts after t (so next_available and available_until are known).
  while (horizon_ <= t || iv_.empty() || iv_.back().first <= t) {
    const double len = -std::log(rng_.open01()) * (next_on_ ? on_mean_ : off_mean_);
    if (next_on_) iv_.emplace_back(horizon_, horizon_ + len);
    horizon_ += len;
    next_on_ = !next_on_;
  }
}

size_t Availability::find(double t) const {
  const auto it = std::upper_bound(iv_.begin(), iv_.end(), t, [](double v, const auto& p) { return v < p.first; });
  return it == iv_.begin() ? std::string::npos : static_cast<size_t>(it - iv_.begin()) - 1;
}

bool Availability::available(double t) const {
  if (always_) return true;
  if (lazy_) extend(t);
  const double base = period_ > 0 ? std::floor(t / period_) * period_ : 0.0;
  const size_t k = find(t - base);
  return k != std::string::npos && t - base < iv_[k].second;
}

double Availability::next_available(double t) const {
  if (always_ || available(t)) return t;
  if (lazy_) extend(t);
  const double base = period_ > 0 ? std::floor(t / period_) * period_ : 0.0;
  const size_t k = find(t - base);
  const size_t next = k == std::string::npos ? 0 : k + 1;
  if (next < iv_.size()) return base + iv_[next].first;
  if (period_ > 0 && !iv_.empty()) return base + period_ + iv_.front().first;
  return kNever;
}

double Availability::available_until(double t) const {
  if (always_) return kNever;
  if (lazy_) extend(t);
  const double base = period_ > 0 ? std::floor(t / period_) * period_ : 0.0;
  const size_t k = find(t - base);
  if (k == std::string::npos) return t;
  double end = base + iv_[k].second;
  // A periodic trace whose last interval runs to the period's end continues into the next period's first.
  if (period_ > 0 && iv_[k].second >= period_ && iv_.front().first <= 0) {
    if (iv_.size() == 1) return kNever;
    end = base + period_ + iv_.front().second;
  }
  return end;
}

// --- NetworkProfile --------------------------------------------------------------------------------------

NetworkProfile::NetworkProfile(const HeterogeneitySpec& spec, const GraphSequence& seq, uint64_t seed,
                               const Where& where) {
  const NodeIndex n = seq.num_nodes();
  const auto nn = static_cast<size_t>(n);
  compute_.assign(nn, 0.0);
  up_.assign(nn, 0.0);
  down_.assign(nn, 0.0);
  avail_.resize(nn);
  const auto per_node = [&](const std::optional<Dist>& d, const char* name, std::vector<double>& out) {
    if (!d) return;
    const RandomStream base = RandomStream::derive(seed, fmt::format("decentral.hetero.{}", name));
    for (NodeIndex i = 0; i < n; ++i) {
      RandomStream rng = base.child(node_name(i));
      out[static_cast<size_t>(i)] = d->sample(rng);
    }
  };
  per_node(spec.compute, "compute", compute_);
  per_node(spec.uplink, "uplink", up_);
  per_node(spec.downlink, "downlink", down_);
  has_compute_ = spec.compute.has_value();
  node_caps_ = spec.uplink || spec.downlink;
  if (spec.trace) {
    const DeviceTrace& tr = *spec.trace;
    if (tr.devices.empty()) throw InputError(Where{tr.file, 0, ""}, "the device trace has no devices");
    if (spec.churn.enabled() && tr.has_availability()) {
      throw InputError(where.with_key("churn"), "the device trace already gives availability intervals",
                       "use either --churn or the trace's availability column");
    }
    for (NodeIndex i = 0; i < n; ++i) {
      const DeviceProfile& d = tr.devices[static_cast<size_t>(i) % tr.devices.size()];
      const auto ii = static_cast<size_t>(i);
      compute_[ii] = 3.0 * d.compute_ms_per_sample / 1000.0;
      up_[ii] = d.up_kbps * 125.0;
      down_[ii] = d.down_kbps * 125.0;
      if (!d.availability.empty()) avail_[ii] = Availability(d.availability, d.period_s);
    }
    has_compute_ = node_caps_ = true;
    churn_ = tr.has_availability();
  }
  if (spec.churn.enabled()) {
    const RandomStream base = RandomStream::derive(seed, "decentral.hetero.churn");
    for (NodeIndex i = 0; i < n; ++i) avail_[static_cast<size_t>(i)] = Availability(spec.churn, base.child(node_name(i)));
    churn_ = true;
  }
  if (spec.latency || spec.bandwidth) {
    const RandomStream lat = RandomStream::derive(seed, "decentral.hetero.latency");
    const RandomStream bw = RandomStream::derive(seed, "decentral.hetero.bandwidth");
    const Graph all_links = seq.union_graph();  // a value: iterate a named copy, not a temporary's member
    for (const Edge& e : all_links.edges()) {
      const std::string name = fmt::format("{}-{}", e.from, e.to);
      RandomStream rl = lat.child(name);
      RandomStream rb = bw.child(name);
      links_[link_key(e.from, e.to)] = {spec.latency ? spec.latency->sample(rl) : 0.0,
                                        spec.bandwidth ? spec.bandwidth->sample(rb) : 0.0};
    }
  }
}

double NetworkProfile::link_latency(NodeIndex from, NodeIndex to) const {
  const auto it = links_.find(link_key(from, to));
  return it == links_.end() ? 0.0 : it->second.first;
}

double NetworkProfile::link_bandwidth(NodeIndex from, NodeIndex to) const {
  const auto it = links_.find(link_key(from, to));
  return it == links_.end() ? 0.0 : it->second.second;
}

double NetworkProfile::job_seconds(NodeIndex i, int64_t batch, int64_t steps, int64_t upload_bytes,
                                   int64_t download_bytes) const {
  const auto ii = static_cast<size_t>(i);
  double t = compute_[ii] * static_cast<double>(std::max<int64_t>(batch, 1)) * static_cast<double>(steps);
  if (up_[ii] > 0) t += static_cast<double>(upload_bytes) / up_[ii];
  if (down_[ii] > 0) t += static_cast<double>(download_bytes) / down_[ii];
  return t;
}

double NetworkProfile::job_end(NodeIndex i, double start, int64_t batch, int64_t steps, int64_t upload_bytes,
                               int64_t download_bytes) const {
  const double len = job_seconds(i, batch, steps, upload_bytes, download_bytes);
  const Availability& a = availability(i);
  double t = start;
  for (int attempt = 0; attempt < 1'000'000; ++attempt) {
    t = a.next_available(t);
    if (t == kNever) return kNever;
    const double until = a.available_until(t);
    if (t + len <= until) return t + len;
    t = until;  // dropped: the client left before finishing; it retries when it is back
  }
  return kNever;  // a job longer than every available period
}

// --- SyncClock -------------------------------------------------------------------------------------------

SyncClock::SyncClock(const NetworkProfile& profile, const GraphSequence& seq, int64_t batch)
    : p_(profile), seq_(seq), batch_(static_cast<double>(std::max<int64_t>(batch, 1))) {
  const auto n = static_cast<size_t>(seq.num_nodes());
  t_.assign(n, 0.0);
  next_.assign(n, 0.0);
  present_.assign(n, 1);
  rates_.resize(static_cast<size_t>(seq.period()));
  offsets_.resize(static_cast<size_t>(seq.period()));
  for (int64_t s = 0; s < seq.period(); ++s) {
    const Graph& g = seq.graph_at(s);
    std::vector<int64_t>& off = offsets_[static_cast<size_t>(s)];
    off.assign(n + 1, 0);
    for (NodeIndex i = 0; i < g.num_nodes(); ++i) off[static_cast<size_t>(i) + 1] = off[static_cast<size_t>(i)] + g.in_degree(i);
  }
}

const std::vector<uint8_t>& SyncClock::present(int64_t k) {
  if (present_step_ == k) return present_;
  present_step_ = k;
  if (!p_.has_churn()) return present_;
  for (NodeIndex i = 0; i < seq_.num_nodes(); ++i) {
    const auto ii = static_cast<size_t>(i);
    present_[ii] = p_.availability(i).available(t_[ii]) ? 1 : 0;
  }
  return present_;
}

const std::vector<double>& SyncClock::rates(int64_t k) {
  const auto s = static_cast<size_t>(k % seq_.period());
  const bool cache = !p_.has_churn();
  if (cache && !rates_[s].empty()) return rates_[s];
  const Graph& g = seq_.graph_at(k);
  const std::vector<int64_t>& off = offsets_[s];
  std::vector<double>& out = cache ? rates_[s] : scratch_rates_;
  out.assign(static_cast<size_t>(off.back()), kInf);
  const NodeIndex n = g.num_nodes();
  if (!p_.has_node_capacities()) {
    for (NodeIndex i = 0; i < n; ++i) {
      const auto& in = g.in_neighbors(i);
      for (size_t q = 0; q < in.size(); ++q) {
        const double b = p_.link_bandwidth(in[q], i);
        out[static_cast<size_t>(off[static_cast<size_t>(i)]) + q] = b > 0 ? b : kInf;
      }
    }
    return out;
  }
  // Every message of the round in flight at once: node j's uplink (link j) and node i's downlink (link
  // n + i) are shared max-min fairly, each message capped by its link's bandwidth.
  std::vector<double> caps(2 * static_cast<size_t>(n), 0.0);
  for (NodeIndex i = 0; i < n; ++i) {
    caps[static_cast<size_t>(i)] = p_.uplink(i);
    caps[static_cast<size_t>(n + i)] = p_.downlink(i);
  }
  net::MaxMinSolver solver(caps);
  std::vector<std::pair<size_t, net::FlowId>> flows;
  for (NodeIndex i = 0; i < n; ++i) {
    if (!present_[static_cast<size_t>(i)]) continue;
    const auto& in = g.in_neighbors(i);
    for (size_t q = 0; q < in.size(); ++q) {
      const NodeIndex j = in[q];
      if (!present_[static_cast<size_t>(j)]) continue;
      net::FlowSpec f;
      if (p_.uplink(j) > 0) f.path.push_back({j, 1});
      if (p_.downlink(i) > 0) f.path.push_back({n + i, 1});
      const double b = p_.link_bandwidth(j, i);
      if (b > 0) f.rate_cap = b;
      if (f.path.empty() && !(b > 0)) continue;  // unlimited
      flows.emplace_back(static_cast<size_t>(off[static_cast<size_t>(i)]) + q, solver.add_flow(std::move(f)));
    }
  }
  solver.solve();
  for (const auto& [slot, id] : flows) out[slot] = solver.rate(id);
  return out;
}

double SyncClock::advance(int64_t k, int64_t bytes) {
  const Graph& g = seq_.graph_at(k);
  const std::vector<uint8_t>& on = present(k);
  const NodeIndex n = g.num_nodes();
  int64_t messages = 0;
  for (NodeIndex i = 0; i < n; ++i) {
    if (!on[static_cast<size_t>(i)]) continue;
    for (NodeIndex j : g.in_neighbors(i)) messages += on[static_cast<size_t>(j)];
  }
  const double per_message = messages > 0 ? static_cast<double>(bytes) / static_cast<double>(messages) : 0.0;
  const std::vector<double>& rate = rates(k);
  const std::vector<int64_t>& off = offsets_[static_cast<size_t>(k % seq_.period())];
  bool any = false;
  for (NodeIndex i = 0; i < n; ++i) {
    const auto ii = static_cast<size_t>(i);
    const bool here = on[ii] != 0;
    any = any || here;
    double t = t_[ii] + p_.compute_per_sample(i) * batch_;
    const auto& in = g.in_neighbors(i);
    for (size_t q = 0; q < in.size(); ++q) {
      const NodeIndex j = in[q];
      const auto jj = static_cast<size_t>(j);
      if (!on[jj]) continue;
      // An absent node receives nothing: its clock only keeps its present in-neighbours' pace.
      const double r = rate[static_cast<size_t>(off[ii]) + q];
      const double bytes_term = here && r < kInf && per_message > 0 ? per_message / r : 0.0;
      t = std::max(t, t_[jj] + p_.compute_per_sample(j) * batch_ + p_.link_latency(j, i) + bytes_term);
    }
    next_[ii] = t;
  }
  if (!any) {
    // Nobody is available: every clock jumps to the earliest return (kNever if nobody ever returns).
    double back = kInf;
    for (NodeIndex i = 0; i < n; ++i) back = std::min(back, p_.availability(i).next_available(t_[static_cast<size_t>(i)]));
    for (size_t i = 0; i < next_.size(); ++i) next_[i] = std::max(next_[i], back);
  }
  std::swap(t_, next_);
  present_step_ = -1;
  double latest = 0;
  for (double t : t_) latest = std::max(latest, t);
  return latest;
}

}  // namespace orrery::decentral
