#include "serve/fluid.h"

#include <limits>

namespace orrery::serve {

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
    r.w += t.rate * (t.output + 1.0) * (t.prompt + t.output / 2.0);
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

}  // namespace orrery::serve
