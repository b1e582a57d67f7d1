// Routing: which links a flow from one node to another crosses.
//
// Model card
//   What      Static, per-flow routes on a Topology: shortest paths by hop count, with equal-cost
//             multipath (ECMP) chosen per flow by a hash, as switches hash a flow's 5-tuple. Routes
//             pass only through forwarding nodes (see net/topology.h: GPUs are endpoints, not routers).
//   ECMP      At hop h of a route src -> dst with flow key k, the candidates are the out-links of the
//             current node whose far end is one hop closer to dst, in increasing LinkId order; the
//             route takes candidate number ecmp_hash(src, dst, k, h) mod (number of candidates).
//             When the tied candidates are of several link kinds, only those of the first kind in
//             LinkKind order (scale-up, PCIe, network) count: like NCCL, prefer NVLink to PCIe (e.g. two
//             GPUs sharing a NIC talk over their NVSwitch, not through the NIC).
//             ecmp_hash is built from splitmix64's output function (Steele, Lea & Flood, OOPSLA 2014),
//             integer-only, so the same inputs give the same route on every platform and compiler;
//             no std::hash, no pointer order, no dependence on what is cached.
//   Rail policy  kRailAligned models NCCL's PXN (NCCL 2.12, "PCI x NVLink"): GPU s in machine A sending
//             to GPU d in machine B != A on another rail first moves the data over the scale-up fabric
//             to the GPU of machine A on d's rail, whose NIC sends it rail-locally. The route is the
//             concatenation route(s, proxy) + route(proxy, d), each with its own ECMP hash. Traffic
//             inside a machine, between GPUs on the same rail, or where A has no GPU on d's rail,
//             follows kShortest.
//   Latency   Route::latency is the sum of the links' latencies; bottleneck is the smallest link
//             bandwidth (what a lone flow on an idle network would get).
//   Cost      route() walks the route once, scanning each node's out-links twice at most (the last
//             hop scans the destination's in-links instead, so a 4,096-port switch costs nothing extra).
//             Distances to the destination d come from breadth-first searches over reversed links,
//             O(nodes + links) time and 2 bytes per node each, run on first use and kept in an LRU
//             cache bounded by RouterOptions::cache_bytes (default 256 MiB, at least 4 fields).
//             Composition: a search is rooted at a hub (a node with more than 2 forwarding
//             in-neighbours: leaf, spine, core, torus GPU), not at each GPU. For d, a breadth-first walk
//             over forwarding in-neighbours from d through thin nodes (NIC, NVSwitch, network switch of
//             two_level: at most 2 forwarding in-neighbours) stops at hubs h at offsets o_h, and
//             dist_d(v) = min(thin-only distance(v), min_h dist_h(v) + o_h), exact because every path
//             into d enters the thin region through some hub or stays in it. A GPU under a rail leaf
//             has one term (its leaf, offset 2), so all GPUs under a leaf share one search: an
//             all-to-all over a 1,024-GPU fat tree needs 32 searches, not 1,024. Walks of more than 64
//             nodes or more than 4 hubs fall back to a search rooted at d.
//             Fast path, no search: destinations one hop away (a direct link) or two hops away through
//             one forwarding node (GPUs on the same NVSwitch, hosts on the same leaf, any pair in
//             two_level). Fast path and composition give exactly the route of the plain search: tests
//             compare all three, and against a reference search.
//             Measured (Release, one core of the 2-core dev machine): all-to-all over 1,024 GPUs in a
//             fat tree 1.2-1.6 M routes/s, in two_level 14 M routes/s; a ring over 4,096 GPUs of a
//             3-tier fat tree 1.5 ms (16 searches); a ring over 102,400 GPUs 0.25 s (200 searches of
//             225k nodes). Random pairs at 100k GPUs touch 1,600 leaves of 450 KB each: give cache_bytes
//             ~720 MiB, or each route runs a ~1 ms search.
//   Threads   A Router caches, so route() is not thread-safe: use one Router per thread (the Topology
//             may be shared).
#pragma once

#include <cstdint>
#include <vector>

#include "core/units.h"
#include "net/ids.h"
#include "net/topology.h"

namespace orrery::net {

struct Route {
  std::vector<LinkId> links;  // in order from source to destination; empty when src == dst
  Time latency;               // sum of link latencies
  Bandwidth bottleneck;       // min link bandwidth; +infinity for the empty route
};

enum class RailPolicy {
  kShortest,     // shortest path by hop count with ECMP
  kRailAligned,  // cross-rail inter-machine traffic relays through the source-machine GPU on the
                 // destination's rail (NCCL PXN), then goes rail-local
};

struct RouterOptions {
  RailPolicy policy = RailPolicy::kShortest;
  size_t cache_bytes = size_t{256} << 20;  // budget for cached distance fields (at least 4 are kept)
  bool fast_paths = true;                  // tests turn these two off to compare with the plain search
  bool compose_fields = true;              // destination fields from hub fields (see the model card)
};

// splitmix64's output function (mix of state + 0x9E3779B97F4A7C15): splitmix64_mix(s) equals the
// first output of a splitmix64 generator seeded with s.
uint64_t splitmix64_mix(uint64_t s);
// The ECMP hash of hop `hop` of the route src -> dst for flow `flow_key` (see the model card).
uint64_t ecmp_hash(NodeId src, NodeId dst, uint64_t flow_key, int32_t hop);

class Router {
 public:
  // Keeps a reference to topo, which must outlive the Router and not change while it is used.
  explicit Router(const Topology& topo, RailPolicy policy = RailPolicy::kShortest);
  Router(const Topology& topo, RouterOptions options);

  // The route from src to dst for flow `flow_key`. REQUIRES: dst reachable from src through
  // forwarding nodes (true for any two GPUs of a validated topology); checked.
  Route route(NodeId src, NodeId dst, uint64_t flow_key = 0) const;
  Route gpu_route(int32_t src_rank, int32_t dst_rank, uint64_t flow_key = 0) const;
  // Hop count of the shortest path (what kShortest routes have); -1 when unreachable.
  int32_t distance(NodeId src, NodeId dst) const;

  static constexpr size_t kMinCachedFields = 4;  // = the most hub fields one destination may use

  // Introspection for tests and reports.
  size_t searches() const { return searches_; }  // breadth-first searches run so far
  size_t cached_fields() const { return cache_used_; }
  size_t cache_capacity() const { return cache_capacity_; }

 private:
  static constexpr uint16_t kFar = 0xFFFF;
  static constexpr int32_t kMaxTerms = static_cast<int32_t>(kMinCachedFields);
  static constexpr size_t kMaxExplored = 64;
  static constexpr int32_t kThinFanIn = 2;  // a node with more forwarding in-neighbours is a hub

  // The distance function to the destination being routed to, as composed by begin_plan():
  // planned(w) = min(local_[w], min over terms (field[w] + offset)).
  struct Term {
    const uint16_t* field = nullptr;
    uint32_t offset = 0;
  };
  void begin_plan(NodeId dst) const;
  void end_plan() const;  // resets local_
  uint32_t planned(NodeId w) const {
    uint32_t best = local_[static_cast<size_t>(w)];
    for (int32_t t = 0; t < num_terms_; ++t) {
      const uint32_t f = terms_[t].field[static_cast<size_t>(w)];
      if (f != kFar) best = f + terms_[t].offset < best ? f + terms_[t].offset : best;
    }
    return best;
  }
  uint32_t source_distance(NodeId src) const;  // min over src's out-neighbours of planned(); kFar if none
  bool is_hub(NodeId w) const { return fwd_in_[static_cast<size_t>(w)] > kThinFanIn; }

  void shortest(NodeId src, NodeId dst, uint64_t flow_key, Route& out) const;
  bool fast_route(NodeId src, NodeId dst, uint64_t flow_key, Route& out) const;
  // Position in the out-CSR of the chosen next hop from x towards a node at distance `target`.
  int32_t choose_out(NodeId x, uint32_t target, NodeId src, NodeId dst, uint64_t flow_key, int32_t hop) const;
  // Position in dst's in-CSR of the chosen link x -> dst; -1 when there is none.
  int32_t choose_last(NodeId x, NodeId src, NodeId dst, uint64_t flow_key, int32_t hop) const;
  bool links_to(NodeId x, NodeId dst) const;
  struct Candidate {
    int32_t pos;  // in the out- or in-CSR
    LinkKind kind;
  };
  int32_t pick(NodeId src, NodeId dst, uint64_t flow_key, int32_t hop) const;  // among cand_
  const uint16_t* field(NodeId dst) const;  // distances to dst (kFar: unreachable or not a router)
  void search(NodeId dst, uint16_t* dist) const;
  void append(LinkId l, Route& out) const;
  int32_t proxy_rank(int32_t machine, int32_t rail) const;  // -1 when none

  const Topology& topo_;
  RouterOptions options_;
  // Compressed adjacency (CSR) copied from the topology for cache-friendly scans.
  std::vector<int32_t> out_begin_;  // size nodes + 1
  std::vector<LinkId> out_link_;
  std::vector<NodeId> out_dst_;
  std::vector<LinkKind> out_kind_;
  std::vector<int32_t> in_begin_;
  std::vector<LinkId> in_link_;
  std::vector<NodeId> in_src_;
  std::vector<LinkKind> in_kind_;
  std::vector<uint8_t> forwards_;
  std::vector<int32_t> fwd_in_;  // number of in-links from forwarding nodes
  // (machine, rail, rank) of the first GPU of each machine on each rail, sorted, for kRailAligned.
  struct RailEntry {
    int32_t machine;
    int32_t rail;
    int32_t rank;
  };
  std::vector<RailEntry> rail_table_;

  // LRU cache of distance fields: slot_of_[dst] is the slot holding dst's field, or -1.
  struct Slot {
    NodeId dst = kNoNode;
    int32_t prev = -1;  // towards most recently used
    int32_t next = -1;  // towards least recently used
  };
  size_t cache_capacity_ = 1;
  mutable size_t cache_used_ = 0;
  mutable std::vector<int32_t> slot_of_;
  mutable std::vector<Slot> slots_;
  mutable std::vector<std::vector<uint16_t>> fields_;  // by slot, num_nodes entries each
  mutable int32_t mru_ = -1;
  mutable int32_t lru_ = -1;
  mutable std::vector<NodeId> queue_;
  mutable std::vector<uint16_t> local_;  // all kFar between routes
  mutable std::vector<NodeId> explored_;
  mutable Term terms_[kMaxTerms];
  mutable int32_t num_terms_ = 0;
  mutable std::vector<Candidate> cand_;
  mutable size_t searches_ = 0;
};

}  // namespace orrery::net
