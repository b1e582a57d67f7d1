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
  if (it == cache_.end() && down_count_ > 0) {
    Cached c;
    c.latency = search_avoiding_down(src, dst, c.links);
    it = cache_.emplace(key, std::move(c)).first;
  }
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

void TopologyPaths::set_link_down(net::LinkId link, bool down) {
  if (down_.empty()) down_.assign(topo_.num_links(), 0);
  const auto l = static_cast<size_t>(link);
  if ((down_[l] != 0) == down) return;
  down_[l] = down ? 1 : 0;
  down_count_ = down ? down_count_ + 1 : down_count_ - 1;
  cache_.clear();
}

Time TopologyPaths::search_avoiding_down(int32_t src, int32_t dst, std::vector<net::LinkUse>& out) const {
  const net::NodeId from = topo_.gpu(src);
  const net::NodeId to = topo_.gpu(dst);
  std::vector<net::LinkId> via(topo_.num_nodes(), -1);
  std::vector<uint8_t> seen(topo_.num_nodes(), 0);
  std::vector<net::NodeId> frontier = {from};
  seen[static_cast<size_t>(from)] = 1;
  for (size_t head = 0; head < frontier.size() && seen[static_cast<size_t>(to)] == 0; ++head) {
    const net::NodeId u = frontier[head];
    // A GPU relays nothing unless the topology says it forwards (torus, marked edge-list GPUs).
    if (u != from && !topo_.node(u).forwards) continue;
    for (net::LinkId l : topo_.out_links(u)) {
      if (down_[static_cast<size_t>(l)] != 0) continue;
      const net::NodeId v = topo_.link(l).dst;
      if (seen[static_cast<size_t>(v)] != 0) continue;
      seen[static_cast<size_t>(v)] = 1;
      via[static_cast<size_t>(v)] = l;
      frontier.push_back(v);
    }
  }
  if (seen[static_cast<size_t>(to)] == 0) {
    // No path survives: keep the normal route, whose flows stall on the dead link until it returns.
    const net::Route r = router_.gpu_route(src, dst, 0);
    for (net::LinkId l : r.links) out.push_back(net::LinkUse{l, 1});
    return r.latency;
  }
  Time latency = Time::zero();
  for (net::NodeId v = to; v != from;) {
    const net::LinkId l = via[static_cast<size_t>(v)];
    out.push_back(net::LinkUse{l, 1});
    latency += topo_.link(l).latency;
    v = topo_.link(l).src;
  }
  std::reverse(out.begin(), out.end());
  return latency;
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
