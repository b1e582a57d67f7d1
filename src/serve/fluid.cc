#include "serve/fluid.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace orrery::serve {

namespace {
// w'_j: the KV tokens one request holds summed over its stages (the model card's convention).
double stage_tokens(const TypeStats& t) { return t.output * (t.prompt + (t.output - 1.0) / 2.0); }
}  // namespace

FluidResult fluid_equilibrium(const std::vector<TypeStats>& types, double d0_s, double d1_s, double capacity_tokens,
                              const Where& where) {
  if (types.empty()) throw InputError(where, "the fluid model needs at least one request type");
  if (!(d0_s > 0.0)) throw InputError(where.with_key("d0"), "must be > 0");
  if (!(d1_s >= 0.0)) throw InputError(where.with_key("d1"), "must be >= 0");
  if (!(capacity_tokens >= 1.0)) throw InputError(where.with_key("capacity"), "must be >= 1 token");
  FluidResult r;
  for (const TypeStats& t : types) {
    if (!(t.rate > 0.0)) throw InputError(where.with_key("rate"), "every type needs a rate > 0");
    if (!(t.output >= 1.0) || !(t.prompt >= 0.0)) throw InputError(where.with_key("lengths"), "output >= 1, prompt >= 0");
    r.w += t.rate * stage_tokens(t);
    r.throughput_bound += t.rate * t.output;
    r.rate += t.rate;
  }
  r.load = d1_s * r.w;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (r.load < 1.0) {
    r.dt_star_s = d0_s / (1.0 - r.load);
    r.memory_star = d0_s * r.w / (1.0 - r.load);
    for (const TypeStats& t : types) r.n_star.push_back(d0_s * t.rate / (1.0 - r.load));
  } else {
    r.dt_star_s = kInf;
    r.memory_star = kInf;
    r.n_star.assign(types.size(), kInf);
  }
  r.stable = r.load < 1.0 && r.memory_star <= capacity_tokens;
  r.max_stable_rate = r.rate * capacity_tokens / (r.w * (d0_s + d1_s * capacity_tokens));
  return r;
}

WaitThresholds wait_thresholds_fluid(const std::vector<TypeStats>& types, double d0_s, double d1_s, double slack,
                                     double capacity_tokens) {
  WaitThresholds r;
  r.n.assign(types.size(), 1);
  if (types.empty()) return r;
  double w = 0.0, rate_sum = 0.0;
  for (const TypeStats& t : types) {
    w += t.rate * stage_tokens(t);
    rate_sum += t.rate;
  }
  auto memory = [&] {
    double m = 0.0;
    for (size_t j = 0; j < types.size(); ++j) m += static_cast<double>(r.n[j]) * stage_tokens(types[j]);
    return m;
  };
  const double load = d1_s * w;
  if (load < 1.0 && rate_sum > 0.0) {
    const double dt_star = d0_s / (1.0 - load);
    for (size_t j = 0; j < types.size(); ++j) {
      // n*_j = lambda_j dT*; the 1e-9 keeps an exact integer from rounding up through float noise.
      r.n[j] = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(types[j].rate * dt_star - 1e-9)));
    }
    for (;;) {
      r.memory = memory();
      if (r.memory > capacity_tokens) break;
      const double iteration = (1.0 + slack) * (d0_s + d1_s * r.memory);
      size_t shortest = types.size();
      double shortest_period = std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < types.size(); ++j) {
        if (!(types[j].rate > 0.0)) continue;
        const double period = static_cast<double>(r.n[j]) / types[j].rate;
        if (period < shortest_period) {
          shortest_period = period;
          shortest = j;
        }
      }
      if (shortest == types.size() || shortest_period >= iteration) {
        r.meets_conditions = true;
        return r;
      }
      ++r.n[shortest];
    }
  }
  // No stable thresholds: n_j proportional to lambda_j with M^pi <= C.
  double per_rate = 0.0;
  for (const TypeStats& t : types) per_rate += (rate_sum > 0.0 ? t.rate / rate_sum : 1.0) * stage_tokens(t);
  const double total = capacity_tokens / per_rate;
  for (size_t j = 0; j < types.size(); ++j) {
    const double share = rate_sum > 0.0 ? types[j].rate / rate_sum : 1.0;
    r.n[j] = std::max<int64_t>(1, static_cast<int64_t>(std::floor(total * share)));
  }
  r.memory = memory();
  r.meets_conditions = false;
  return r;
}

int64_t nested_wait_cap_fluid(const TypeStats& aggregate, double d0_s, double d1_s, double slack,
                              double capacity_tokens) {
  const int64_t n = wait_thresholds_fluid({aggregate}, d0_s, d1_s, slack, capacity_tokens).n[0];
  return std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(n) * aggregate.output)));
}

}  // namespace orrery::serve
