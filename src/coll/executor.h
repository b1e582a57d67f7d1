// Runs a collective flow program (coll/program.h) over the flow-level network (net/flow_network.h):
// each message becomes a flow along the path the PathProvider gives; its completion tells the sender
// (send done) and the receiver (message arrived), which issue what their state machines allow next.
// The collective's time is the instant its last message arrives.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "coll/program.h"
#include "des/engine.h"
#include "net/flow_network.h"
#include "net/symmetry.h"

namespace orrery::coll {

// The flow key the executor gives a message from src to dst (PathProviders use it for ECMP): the pair
// itself, so every message between two ranks takes the same path.
inline uint64_t pair_key(int32_t src, int32_t dst) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) | static_cast<uint32_t>(dst);
}

// Resolves a rank-to-rank transfer to links of the flow network.
class PathProvider {
 public:
  virtual ~PathProvider() = default;
  // Replaces `out` with the path from src to dst (empty when src == dst) and returns its latency.
  // flow_key selects among equal-cost paths (ECMP).
  virtual Time path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) = 0;
  // As path(), for a one-off look-up that need not be cached (the symmetric run's route check).
  virtual Time peek_path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) {
    return path(src, dst, flow_key, out);
  }
  // The half of a route that an in-switch operation uses (coll/program.h kSwitch): to_switch, the links
  // from `rank` into the first switch of its route to another rank; otherwise the links from the last
  // switch into `rank`. Returns their latency. The default takes the route between `rank` and `peer`
  // (Program::switch_peer), which must be two links through one switch (else InputError), and half of
  // its latency.
  virtual Time switch_path(int32_t rank, int32_t peer, bool to_switch, std::vector<net::LinkUse>& out);
  // Marks a link down (or back up); later paths avoid down links when another path exists.
  virtual void set_link_down(net::LinkId /*link*/, bool /*down*/) {}
  // The capacities of the links the paths refer to, for building the FlowNetwork.
  virtual std::vector<Bandwidth> capacities() const = 0;
};

// n ranks behind one non-blocking switch: rank r owns egress link r and ingress link n + r, each of
// `bandwidth`; every transfer crosses its source's egress and its destination's ingress and pays
// `latency`. The textbook setting of the alpha-beta formulas, used by tests and as a simple fabric.
class SwitchPaths final : public PathProvider {
 public:
  SwitchPaths(int32_t n, Bandwidth bandwidth, Time latency) : n_(n), bandwidth_(bandwidth), latency_(latency) {}
  Time path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) override;
  std::vector<Bandwidth> capacities() const override;

 private:
  int32_t n_;
  Bandwidth bandwidth_;
  Time latency_;
};

struct ExecutionStats {
  Time time;                // from start to the last arrival
  uint64_t messages = 0;    // flows started
  Bytes bytes;              // bytes moved
  uint64_t events = 0;      // engine events processed
  uint64_t solves = 0;      // max-min re-solves
  size_t peak_flows = 0;    // most flows in flight at once
  uint64_t reroutes = 0;    // flows moved off failed links
};

// One delivered message, for traces.
struct MessageRecord {
  int32_t src;
  int32_t dst;
  uint64_t id;
  Bytes size;
  Time start;   // when the sender issued it
  Time finish;  // when its last byte arrived
};
using MessageObserver = std::function<void(const MessageRecord&)>;

// Local work on the sender for every byte it sends (reading the input, reducing, writing the send
// buffer: `passes` bytes of local memory traffic per byte sent), as a throughput limit: each rank gets
// a virtual link of local_bandwidth / (passes * slowdown) that all its outgoing messages cross, so a
// straggler GPU (slower clock, throttling, a noisy neighbour) slows every transfer it feeds. Off when
// local_bandwidth is zero.
struct RankModel {
  Bandwidth local_bandwidth;     // e.g. the GPU's HBM bandwidth
  double passes = 3.0;           // a reduce step reads two buffers and writes one
  std::vector<double> slowdown;  // per rank, >= 1; empty: all 1
  Bandwidth capacity(int32_t rank) const;
};

// A link that changes capacity at a time: a slowdown (0 < capacity < nominal), a failure (capacity 0:
// the flows on it are rerouted onto other paths when the PathProvider has one, else they stall), or a
// repair (back to nominal; flows already rerouted stay where they are, new ones may use it again).
struct LinkEvent {
  Time at;
  net::LinkId link = -1;
  Bandwidth capacity;
};

struct ExecutionOptions {
  MessageObserver observer;  // sees every delivered message in delivery order
  RankModel ranks;
  std::vector<LinkEvent> link_events;
};

// Runs `program` from engine.now() until it has no messages in flight. `net` must have been built from
// `paths.capacities()`. Deterministic: same inputs give the same result bit for bit. Events the caller
// scheduled on `engine` (a link slowing or failing: net.set_capacity at time t) happen during the run.
ExecutionStats execute(Program& program, des::Engine& engine, net::FlowNetwork& net, PathProvider& paths,
                       const ExecutionOptions& options = {});

// Symmetric execution (net/symmetry.h): only ranks [0, orbits.rank_period) run; every message they
// send stands for its orbit of translates, its path is mapped onto representative links with orbit
// weights, and a message that arrives at rank r + t*p is delivered to rank r as coming from its sender
// shifted by -t*p. Exact when the program is shift-equivariant for the period (REQUIRES:
// program.shift_equivariant(orbits.rank_period)) and routes are shift-symmetric: for every simulated
// pair the routes of all its translates are checked to cross the same link orbits in the same order
// (ECMP that spreads translates over different spines fails the check). Returns nullopt when the check
// fails; the caller then runs execute() on a fresh engine and network.
// stats.messages and stats.bytes count the simulated (representative) messages only. The rank model
// breaks the symmetry: REQUIRES options.ranks off (zero local_bandwidth, no slowdowns) and no link events.
std::optional<ExecutionStats> execute_symmetric(Program& program, des::Engine& engine, net::FlowNetwork& net,
                                                PathProvider& paths, const net::LinkOrbits& orbits,
                                                const ExecutionOptions& options = {});

}  // namespace orrery::coll
