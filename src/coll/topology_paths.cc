#include "coll/topology_paths.h"

#include <algorithm>

namespace orrery::coll {

TopologyPaths::TopologyPaths(const net::Topology& topo, net::RailPolicy policy) : topo_(topo), router_(topo, policy) {}

size_t TopologyPaths::probe(int32_t src, int32_t dst, uint64_t flow_key) const {
  // splitmix64's finalizer over the triple.
  uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32 | static_cast<uint32_t>(dst)) ^
               (flow_key * 0x9E3779B97F4A7C15ull);
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  const size_t mask = slots_.size() - 1;
  for (size_t i = static_cast<size_t>(h) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.src < 0 || (s.src == src && s.dst == dst && s.flow_key == flow_key)) return i;
  }
}

void TopologyPaths::clear_cache() {
  slots_.clear();
  used_ = 0;
  arena_.clear();
}

Time TopologyPaths::path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) {
  out.clear();
  if (src == dst) return Time::zero();
  if (slots_.empty()) slots_.resize(1024);
  size_t i = probe(src, dst, flow_key);
  if (slots_[i].src >= 0) {
    const Slot& s = slots_[i];
    const auto first = arena_.begin() + static_cast<std::ptrdiff_t>(s.offset);
    out.assign(first, first + s.count);
    return s.latency;
  }
  Time latency;
  if (down_count_ > 0) {
    latency = search_avoiding_down(src, dst, out);
  } else {
    // Different flow keys between the same pair may take different ECMP paths; the executor's key is
    // the pair itself, so the cache holds one route per pair in practice.
    const net::Route r = router_.gpu_route(src, dst, flow_key);
    latency = r.latency;
    out.reserve(r.links.size());
    for (net::LinkId l : r.links) out.push_back(net::LinkUse{l, 1});
  }
  if ((used_ + 1) * 4 > slots_.size() * 3) {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.src >= 0) slots_[probe(s.src, s.dst, s.flow_key)] = s;
    }
    i = probe(src, dst, flow_key);
  }
  slots_[i] = Slot{src, dst, flow_key, arena_.size(), static_cast<uint32_t>(out.size()), latency};
  arena_.insert(arena_.end(), out.begin(), out.end());
  ++used_;
  return latency;
}

void TopologyPaths::set_link_down(net::LinkId link, bool down) {
  if (down_.empty()) down_.assign(topo_.num_links(), 0);
  const auto l = static_cast<size_t>(link);
  if ((down_[l] != 0) == down) return;
  down_[l] = down ? 1 : 0;
  down_count_ = down ? down_count_ + 1 : down_count_ - 1;
  clear_cache();
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

bool share_one_switch(const net::Topology& topo, int32_t ranks) {
  const net::Router router(topo);
  for (int32_t r = 0; r < ranks; ++r) {
    const int32_t peer = r == 0 ? 1 : 0;
    if (peer >= ranks) break;
    if (router.gpu_route(r, peer).links.size() != 2 || router.gpu_route(peer, r).links.size() != 2) return false;
  }
  return true;
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
