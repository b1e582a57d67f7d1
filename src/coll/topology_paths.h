// PathProvider over a net::Topology: GPU rank to GPU rank routes from net::Router (shortest paths,
// deterministic ECMP on the flow key), cached per (src, dst, flow key) since collectives reuse the same
// pairs at every step. Also derives the alpha-beta parameters of a topology.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coll/alpha_beta.h"
#include "coll/executor.h"
#include "net/routing.h"
#include "net/topology.h"

namespace orrery::coll {

class TopologyPaths final : public PathProvider {
 public:
  // REQUIRES: `topo` outlives this object.
  explicit TopologyPaths(const net::Topology& topo, net::RailPolicy policy = net::RailPolicy::kShortest);
  Time path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) override;
  Time peek_path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) override;
  std::vector<Bandwidth> capacities() const override;
  // With links down, routes come from a breadth-first search that skips them (fewest hops; ties by
  // link order), and the route cache starts afresh whenever the set of down links changes.
  void set_link_down(net::LinkId link, bool down) override;

 private:
  Time search_avoiding_down(int32_t src, int32_t dst, std::vector<net::LinkUse>& out) const;
  // The route cache: an open-addressing table (linear probing, power-of-two size, at most 3/4 full) whose
  // slots point into one arena of links. No allocation per route: a 1,024-GPU all-to-all caches a million
  // routes, and a node-based map with a vector per route spent a third of that run in malloc and free.
  struct Slot {
    int32_t src = -1;  // -1: empty
    int32_t dst = 0;
    uint64_t flow_key = 0;
    uint64_t offset = 0;  // into arena_
    uint32_t count = 0;
    Time latency;
  };
  size_t probe(int32_t src, int32_t dst, uint64_t flow_key) const;  // the matching slot or the empty one
  void clear_cache();
  std::vector<uint8_t> down_;
  size_t down_count_ = 0;
  const net::Topology& topo_;
  net::Router router_;
  std::vector<Slot> slots_;
  size_t used_ = 0;
  std::vector<net::LinkUse> arena_;
};

// Whether ranks [0, ranks) of `topo` meet at one switch: every route between rank 0 and another of them
// is two links (GPU -> switch -> GPU), as an in-switch collective (nvls) needs. True for one machine on
// an NVSwitch and for a multi-machine NVLink domain (GB200 NVL72); false across a network.
bool share_one_switch(const net::Topology& topo, int32_t ranks);

// Alpha-beta parameters seen by `ranks` ranks of `topo`: level 1 from the route rank 0 -> rank 1 (same
// machine), level 2 from rank 0 -> rank g (next machine): its latency and bottleneck bandwidth.
AlphaBetaParams alpha_beta_params(const net::Topology& topo, int32_t ranks);

}  // namespace orrery::coll
