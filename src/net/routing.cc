#include "net/routing.h"

#include <algorithm>
#include <limits>

#include "core/assert.h"

namespace orrery::net {
namespace {

// Above this many (source out-links x destination in-links) pairs the two-hop fast path is skipped
// (the search is cheaper than the quadratic check); the result is the same either way.
constexpr size_t kFastPathPairs = 1024;

size_t index(NodeId id) { return static_cast<size_t>(id); }

}  // namespace

uint64_t splitmix64_mix(uint64_t s) {
  uint64_t z = s + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t ecmp_hash(NodeId src, NodeId dst, uint64_t flow_key, int32_t hop) {
  const uint64_t pair = (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) | static_cast<uint32_t>(dst);
  return splitmix64_mix(splitmix64_mix(splitmix64_mix(flow_key) ^ pair) ^ static_cast<uint32_t>(hop));
}

Router::Router(const Topology& topo, RailPolicy policy) : Router(topo, RouterOptions{.policy = policy}) {}

Router::Router(const Topology& topo, RouterOptions options) : topo_(topo), options_(options) {
  const size_t n = topo.num_nodes();
  out_begin_.assign(n + 1, 0);
  in_begin_.assign(n + 1, 0);
  out_link_.reserve(topo.num_links());
  out_dst_.reserve(topo.num_links());
  in_link_.reserve(topo.num_links());
  in_src_.reserve(topo.num_links());
  forwards_.resize(n);
  for (size_t v = 0; v < n; ++v) {
    const auto id = static_cast<NodeId>(v);
    for (LinkId l : topo.out_links(id)) {
      out_link_.push_back(l);
      out_dst_.push_back(topo.link(l).dst);
      out_kind_.push_back(topo.link(l).kind);
    }
    for (LinkId l : topo.in_links(id)) {
      in_link_.push_back(l);
      in_src_.push_back(topo.link(l).src);
      in_kind_.push_back(topo.link(l).kind);
    }
    out_begin_[v + 1] = static_cast<int32_t>(out_link_.size());
    in_begin_[v + 1] = static_cast<int32_t>(in_link_.size());
    forwards_[v] = topo.node(id).forwards ? 1 : 0;
  }
  for (int32_t r = 0; r < topo.num_gpus(); ++r) {
    const TopoNode& g = topo.node(topo.gpu(r));
    if (g.rail >= 0) rail_table_.push_back(RailEntry{g.machine, g.rail, r});
  }
  // Stable: the lowest rank of each (machine, rail) comes first and is the proxy.
  std::stable_sort(rail_table_.begin(), rail_table_.end(), [](const RailEntry& a, const RailEntry& b) {
    return a.machine != b.machine ? a.machine < b.machine : a.rail < b.rail;
  });
  fwd_in_.assign(n, 0);
  for (size_t v = 0; v < n; ++v) {
    for (int32_t j = in_begin_[v]; j < in_begin_[v + 1]; ++j)
      fwd_in_[v] += forwards_[index(in_src_[static_cast<size_t>(j)])];
  }
  local_.assign(n, kFar);
  const size_t field_bytes = std::max<size_t>(1, n) * sizeof(uint16_t);
  cache_capacity_ = std::max<size_t>(kMinCachedFields, options_.cache_bytes / field_bytes);
  slot_of_.assign(n, -1);
}

int32_t Router::proxy_rank(int32_t machine, int32_t rail) const {
  auto it = std::lower_bound(rail_table_.begin(), rail_table_.end(), std::pair{machine, rail},
                             [](const RailEntry& e, const std::pair<int32_t, int32_t>& k) {
                               return e.machine != k.first ? e.machine < k.first : e.rail < k.second;
                             });
  if (it == rail_table_.end() || it->machine != machine || it->rail != rail) return -1;
  return it->rank;
}

Route Router::route(NodeId src, NodeId dst, uint64_t flow_key) const {
  Route out;
  out.latency = Time::zero();
  out.bottleneck = Bandwidth(std::numeric_limits<double>::infinity());
  if (src == dst) return out;
  if (options_.policy == RailPolicy::kRailAligned) {
    const TopoNode& s = topo_.node(src);
    const TopoNode& d = topo_.node(dst);
    if (s.kind == NodeKind::kGpu && d.kind == NodeKind::kGpu && s.machine != d.machine && s.rail >= 0 && d.rail >= 0 &&
        s.rail != d.rail) {
      const int32_t proxy = proxy_rank(s.machine, d.rail);
      if (proxy >= 0) {
        const NodeId p = topo_.gpu(proxy);
        shortest(src, p, flow_key, out);
        shortest(p, dst, flow_key, out);
        return out;
      }
    }
  }
  shortest(src, dst, flow_key, out);
  return out;
}

Route Router::gpu_route(int32_t src_rank, int32_t dst_rank, uint64_t flow_key) const {
  return route(topo_.gpu(src_rank), topo_.gpu(dst_rank), flow_key);
}

int32_t Router::distance(NodeId src, NodeId dst) const {
  if (src == dst) return 0;
  begin_plan(dst);
  const uint32_t best = source_distance(src);
  end_plan();
  return best >= kFar ? -1 : static_cast<int32_t>(best) + 1;
}

uint32_t Router::source_distance(NodeId src) const {
  uint32_t best = kFar;
  for (int32_t i = out_begin_[index(src)]; i < out_begin_[index(src) + 1]; ++i) {
    best = std::min(best, planned(out_dst_[static_cast<size_t>(i)]));
  }
  return best;
}

void Router::begin_plan(NodeId dst) const {
  num_terms_ = 0;
  explored_.clear();
  NodeId hubs[kMaxTerms];
  uint32_t offsets[kMaxTerms];
  bool composed = options_.compose_fields && !is_hub(dst);
  if (composed) {
    // Breadth-first over forwarding in-neighbours from dst, expanding thin nodes only: local_ gets the
    // shortest thin-only distances, each hub met becomes a term (hub, offset).
    local_[index(dst)] = 0;
    explored_.push_back(dst);
    for (size_t head = 0; composed && head < explored_.size(); ++head) {
      const NodeId w = explored_[head];
      const uint32_t o = local_[index(w)];
      if (w != dst && is_hub(w)) {
        if (num_terms_ == kMaxTerms) {
          composed = false;
          break;
        }
        hubs[num_terms_] = w;
        offsets[num_terms_] = o;
        ++num_terms_;
        continue;
      }
      for (int32_t j = in_begin_[index(w)]; j < in_begin_[index(w) + 1]; ++j) {
        const NodeId u = in_src_[static_cast<size_t>(j)];
        if (!forwards_[index(u)] || local_[index(u)] != kFar) continue;
        if (explored_.size() == kMaxExplored) {
          composed = false;
          break;
        }
        local_[index(u)] = static_cast<uint16_t>(o + 1);
        explored_.push_back(u);
      }
    }
  }
  if (!composed) {
    for (NodeId w : explored_) local_[index(w)] = kFar;
    explored_.clear();
    num_terms_ = 1;
    hubs[0] = dst;
    offsets[0] = 0;
  }
  // At most kMaxTerms fields, and the cache holds at least that many, so fetching one never evicts
  // another fetched here (each fetch makes its field the most recently used).
  for (int32_t t = 0; t < num_terms_; ++t) {
    terms_[t] = Term{field(hubs[t]), offsets[t]};
  }
}

void Router::end_plan() const {
  for (NodeId w : explored_) local_[index(w)] = kFar;
  explored_.clear();
  num_terms_ = 0;
}

void Router::append(LinkId l, Route& out) const {
  const TopoLink& link = topo_.link(l);
  out.links.push_back(l);
  out.latency += link.latency;
  out.bottleneck = std::min(out.bottleneck, link.bandwidth);
}

// ECMP choice among candidates (in increasing LinkId order), preferring the link kind that comes
// first in LinkKind (scale-up, then PCIe, then network) when candidates of several kinds tie.
// Returns the chosen candidate's position, -1 when there is none.
int32_t Router::pick(NodeId src, NodeId dst, uint64_t flow_key, int32_t hop) const {
  if (cand_.empty()) return -1;
  if (cand_.size() == 1) return cand_.front().pos;
  int32_t count[3] = {0, 0, 0};
  for (const Candidate& c : cand_) ++count[static_cast<int>(c.kind)];
  int best = 0;
  while (count[best] == 0) ++best;
  const auto n = static_cast<uint32_t>(count[best]);
  int32_t k = n == 1 ? 0 : static_cast<int32_t>(ecmp_hash(src, dst, flow_key, hop) % n);
  for (const Candidate& c : cand_) {
    if (static_cast<int>(c.kind) == best && k-- == 0) return c.pos;
  }
  ORRERY_CHECK(false);
  return -1;
}

int32_t Router::choose_out(NodeId x, uint32_t target, NodeId src, NodeId dst, uint64_t flow_key, int32_t hop) const {
  cand_.clear();
  for (int32_t i = out_begin_[index(x)]; i < out_begin_[index(x) + 1]; ++i) {
    if (planned(out_dst_[static_cast<size_t>(i)]) == target) cand_.push_back({i, out_kind_[static_cast<size_t>(i)]});
  }
  return pick(src, dst, flow_key, hop);
}

int32_t Router::choose_last(NodeId x, NodeId src, NodeId dst, uint64_t flow_key, int32_t hop) const {
  cand_.clear();
  for (int32_t j = in_begin_[index(dst)]; j < in_begin_[index(dst) + 1]; ++j) {
    if (in_src_[static_cast<size_t>(j)] == x) cand_.push_back({j, in_kind_[static_cast<size_t>(j)]});
  }
  return pick(src, dst, flow_key, hop);
}

bool Router::links_to(NodeId x, NodeId dst) const {
  for (int32_t j = in_begin_[index(dst)]; j < in_begin_[index(dst) + 1]; ++j) {
    if (in_src_[static_cast<size_t>(j)] == x) return true;
  }
  return false;
}

bool Router::fast_route(NodeId src, NodeId dst, uint64_t flow_key, Route& out) const {
  // One hop: direct links src -> dst.
  if (const int32_t j = choose_last(src, src, dst, flow_key, 0); j >= 0) {
    append(in_link_[static_cast<size_t>(j)], out);
    return true;
  }
  // Two hops through one forwarding node x: src -> x -> dst.
  const int32_t b = out_begin_[index(src)];
  const int32_t e = out_begin_[index(src) + 1];
  const auto pairs =
      static_cast<size_t>(e - b) * static_cast<size_t>(in_begin_[index(dst) + 1] - in_begin_[index(dst)]);
  if (pairs > kFastPathPairs) return false;
  cand_.clear();
  for (int32_t p = b; p < e; ++p) {
    const NodeId x = out_dst_[static_cast<size_t>(p)];
    if (forwards_[index(x)] && links_to(x, dst)) cand_.push_back({p, out_kind_[static_cast<size_t>(p)]});
  }
  const int32_t i = pick(src, dst, flow_key, 0);
  if (i < 0) return false;
  const NodeId x = out_dst_[static_cast<size_t>(i)];
  append(out_link_[static_cast<size_t>(i)], out);
  append(in_link_[static_cast<size_t>(choose_last(x, src, dst, flow_key, 1))], out);
  return true;
}

void Router::shortest(NodeId src, NodeId dst, uint64_t flow_key, Route& out) const {
  if (src == dst) return;
  if (options_.fast_paths && fast_route(src, dst, flow_key, out)) return;
  begin_plan(dst);
  const uint32_t best = source_distance(src);
  ORRERY_CHECK(best < kFar);      // REQUIRES of route(): dst reachable from src
  uint32_t remaining = best + 1;  // hops from the current node to dst
  NodeId x = src;
  int32_t hop = 0;
  while (x != dst) {
    const uint32_t target = remaining - 1;
    if (target == 0) {
      // Last hop: the links x -> dst, found in dst's (short) in-list rather than x's out-list.
      const int32_t j = choose_last(x, src, dst, flow_key, hop);
      ORRERY_CHECK(j >= 0);
      append(in_link_[static_cast<size_t>(j)], out);
      x = dst;
    } else {
      const int32_t i = choose_out(x, target, src, dst, flow_key, hop);
      ORRERY_CHECK(i >= 0);
      append(out_link_[static_cast<size_t>(i)], out);
      x = out_dst_[static_cast<size_t>(i)];
    }
    remaining = target;
    ++hop;
  }
  end_plan();
}

const uint16_t* Router::field(NodeId dst) const {
  auto unlink = [&](int32_t s) {
    Slot& slot = slots_[static_cast<size_t>(s)];
    if (slot.prev >= 0)
      slots_[static_cast<size_t>(slot.prev)].next = slot.next;
    else
      mru_ = slot.next;
    if (slot.next >= 0)
      slots_[static_cast<size_t>(slot.next)].prev = slot.prev;
    else
      lru_ = slot.prev;
    slot.prev = slot.next = -1;
  };
  auto push_front = [&](int32_t s) {
    Slot& slot = slots_[static_cast<size_t>(s)];
    slot.prev = -1;
    slot.next = mru_;
    if (mru_ >= 0) slots_[static_cast<size_t>(mru_)].prev = s;
    mru_ = s;
    if (lru_ < 0) lru_ = s;
  };

  int32_t s = slot_of_[index(dst)];
  if (s >= 0) {
    if (s != mru_) {
      unlink(s);
      push_front(s);
    }
    return fields_[static_cast<size_t>(s)].data();
  }
  if (cache_used_ < cache_capacity_) {
    s = static_cast<int32_t>(cache_used_++);
    slots_.emplace_back();
    fields_.emplace_back(topo_.num_nodes());
  } else {
    s = lru_;
    unlink(s);
    slot_of_[index(slots_[static_cast<size_t>(s)].dst)] = -1;
  }
  slots_[static_cast<size_t>(s)].dst = dst;
  slot_of_[index(dst)] = s;
  push_front(s);
  search(dst, fields_[static_cast<size_t>(s)].data());
  return fields_[static_cast<size_t>(s)].data();
}

void Router::search(NodeId dst, uint16_t* dist) const {
  ++searches_;
  std::fill(dist, dist + topo_.num_nodes(), kFar);
  dist[index(dst)] = 0;
  queue_.clear();
  queue_.push_back(dst);
  // Only forwarding nodes get a distance (and dst itself): a non-forwarding node can start a route
  // but never be in its middle, so route() works out the source's distance from its neighbours.
  for (size_t head = 0; head < queue_.size(); ++head) {
    const NodeId x = queue_[head];
    const uint32_t d = dist[index(x)] + 1u;
    ORRERY_CHECK(d < kFar);  // diameter below 65,535 hops
    for (int32_t j = in_begin_[index(x)]; j < in_begin_[index(x) + 1]; ++j) {
      const NodeId u = in_src_[static_cast<size_t>(j)];
      if (dist[index(u)] == kFar && forwards_[index(u)]) {
        dist[index(u)] = static_cast<uint16_t>(d);
        queue_.push_back(u);
      }
    }
  }
}

}  // namespace orrery::net
