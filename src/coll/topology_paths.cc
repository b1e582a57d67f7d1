#include "coll/topology_paths.h"

#include <algorithm>

namespace orrery::coll {

TopologyPaths::TopologyPaths(const net::Topology& topo, net::RailPolicy policy) : topo_(topo), router_(topo, policy) {}

Time TopologyPaths::path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) {
  out.clear();
  if (src == dst) return Time::zero();
  // Different flow keys between the same pair may take different ECMP paths; the executor's key is
  // the pair itself, so the cache holds one route per pair in practice.
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) ^ static_cast<uint32_t>(dst) ^
                       (flow_key * 0x9E3779B97F4A7C15ull);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    const net::Route r = router_.gpu_route(src, dst, flow_key);
    Cached c;
    c.latency = r.latency;
    c.links.reserve(r.links.size());
    for (net::LinkId l : r.links) c.links.push_back(net::LinkUse{l, 1});
    it = cache_.emplace(key, std::move(c)).first;
  }
  out = it->second.links;
  return it->second.latency;
}

Time TopologyPaths::peek_path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) {
  out.clear();
  if (src == dst) return Time::zero();
  const net::Route r = router_.gpu_route(src, dst, flow_key);
  for (net::LinkId l : r.links) out.push_back(net::LinkUse{l, 1});
  return r.latency;
}

std::vector<Bandwidth> TopologyPaths::capacities() const {
  std::vector<Bandwidth> caps;
  caps.reserve(topo_.num_links());
  for (size_t l = 0; l < topo_.num_links(); ++l) caps.push_back(topo_.link(static_cast<net::LinkId>(l)).bandwidth);
  return caps;
}

AlphaBetaParams alpha_beta_params(const net::Topology& topo, int32_t ranks) {
  AlphaBetaParams p;
  p.ranks = ranks;
  const int32_t g = topo.gpus_per_machine() > 0 ? topo.gpus_per_machine() : ranks;
  p.ranks_per_node = std::min(g, ranks);
  const net::Router router(topo);
  if (ranks > 1 && g > 1) {
    const net::Route r = router.gpu_route(0, 1);
    p.intra = Level{r.latency, r.bottleneck};
  }
  if (ranks > g) {
    const net::Route r = router.gpu_route(0, g);
    p.inter = Level{r.latency, r.bottleneck};
    if (g <= 1) p.intra = p.inter;
  } else {
    p.inter = p.intra;
  }
  return p;
}

}  // namespace orrery::coll
