// Textbook progressive filling; see the model card in maxmin_reference.h.
#include "net/maxmin_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/assert.h"

namespace orrery::net {

std::vector<double> reference_max_min(const std::vector<double>& capacities,
                                      const std::vector<FlowSpec>& flows) {
  constexpr double kTolerance = 1e-12;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t num_flows = flows.size();
  const size_t num_links = capacities.size();
  std::vector<double> rate(num_flows, 0.0);
  std::vector<bool> frozen(num_flows, false);
  size_t num_frozen = 0;

  // A flow that crosses no link is limited by its cap alone.
  for (size_t f = 0; f < num_flows; ++f) {
    if (flows[f].path.empty()) {
      rate[f] = flows[f].rate_cap;
      frozen[f] = true;
      ++num_frozen;
    }
  }

  std::vector<double> load(num_links);
  std::vector<double> unfrozen_weight(num_links);
  auto compute_loads = [&] {
    std::fill(load.begin(), load.end(), 0.0);
    std::fill(unfrozen_weight.begin(), unfrozen_weight.end(), 0.0);
    for (size_t f = 0; f < num_flows; ++f) {
      for (const LinkUse& use : flows[f].path) {
        const auto l = static_cast<size_t>(use.link);
        load[l] += use.count * rate[f];
        if (!frozen[f]) unfrozen_weight[l] += use.count * flows[f].weight;
      }
    }
  };

  while (num_frozen < num_flows) {
    // The largest increment of the common level that every constraint allows.
    compute_loads();
    double delta = kInf;
    for (size_t l = 0; l < num_links; ++l) {
      if (unfrozen_weight[l] > 0.0) {
        delta = std::min(delta, std::max(0.0, capacities[l] - load[l]) / unfrozen_weight[l]);
      }
    }
    for (size_t f = 0; f < num_flows; ++f) {
      if (!frozen[f] && std::isfinite(flows[f].rate_cap)) {
        delta = std::min(delta, std::max(0.0, flows[f].rate_cap - rate[f]) / flows[f].weight);
      }
    }
    ORRERY_CHECK(std::isfinite(delta));
    for (size_t f = 0; f < num_flows; ++f) {
      if (!frozen[f]) rate[f] += flows[f].weight * delta;
    }

    // Freeze every flow at its cap or on a saturated link.
    compute_loads();
    const size_t frozen_before = num_frozen;
    for (size_t f = 0; f < num_flows; ++f) {
      if (frozen[f]) continue;
      const double cap = flows[f].rate_cap;
      bool stop = std::isfinite(cap) && cap - rate[f] <= kTolerance * cap;
      for (const LinkUse& use : flows[f].path) {
        const auto l = static_cast<size_t>(use.link);
        stop = stop || capacities[l] - load[l] <= kTolerance * capacities[l];
      }
      if (stop) {
        frozen[f] = true;
        ++num_frozen;
      }
    }
    ORRERY_CHECK(num_frozen > frozen_before);  // each round saturates something
  }
  return rate;
}

}  // namespace orrery::net
