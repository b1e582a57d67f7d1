// The flow-level network: transfers progress at max-min fair rates over shared links, as a fluid model
// of the event engine.
//
// Model card
//   What: each flow is a transfer of S bytes along a path of links. It first waits the path latency
//         (propagation, switching and per-message software overhead: the alpha term), then its bytes
//         drain at its max-min fair rate (net/maxmin.h), which is re-solved whenever a flow enters or
//         leaves or a link's capacity changes. A flow completes when its bytes are drained.
//   Equations: between rate changes a flow's remaining bytes fall linearly, x(t) = x(t0) - r (t - t0);
//         its completion time is t0 + ceil(x(t0) / r) in picoseconds. A lone flow on a path with
//         latency a and bottleneck bandwidth B therefore takes a + S/B: the alpha-beta cost.
//   Assumptions: fluid (no packets, no slow start, no head-of-line blocking); rates change
//         instantaneously; flows that enter or leave at the same instant are batched into one re-solve
//         (the solve runs after every other event of that instant, priority class kObserver); only the
//         connected component of links and flows touched since the last solve is re-solved.
//   Range of validity: transfers long against a round-trip (>= a few KiB on NVLink/InfiniBand); for
//         small messages the latency term dominates and is taken as given.
//   Cost: O(1) to advance time; O(component) per solve; O(log F) per completion (a heap of finish times
//         keyed by (time, flow id) with lazy invalidation).
//   Citation: the flow-level model of SimGrid (Velho, Schnorr, Casanova & Legrand, "On the validity of
//         flow-level TCP network models for grid and cloud simulations", ACM TOMACS 2013).
#pragma once

#include <cstdint>
#include <limits>
#include <queue>
#include <span>
#include <vector>

#include "core/units.h"
#include "des/engine.h"
#include "des/fluid.h"
#include "des/observer.h"
#include "net/maxmin.h"

namespace orrery::net {

// Told when a flow's last byte arrives. Called from inside the engine; may start new flows.
class FlowListener {
 public:
  virtual ~FlowListener() = default;
  virtual void on_flow_done(uint64_t tag, Time now) = 0;
};

// Emitted for observers (metrics, Chrome traces) when a flow completes.
struct FlowCompleted {
  uint64_t tag;
  Bytes size;
  Time start;   // when start_flow() was called
  Time finish;  // when the last byte arrived
};

class FlowNetwork final : public des::FluidModel, public des::EventHandler {
 public:
  // Registers itself with `engine` as a fluid model; `capacities` are the links' bandwidths.
  FlowNetwork(des::Engine& engine, const std::vector<Bandwidth>& capacities);
  ~FlowNetwork() override;
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;

  // Starts a transfer now. REQUIRES: every link exists; size >= 0; latency >= 0.
  void start_flow(std::span<const LinkUse> path, Time latency, Bytes size, FlowListener* listener, uint64_t tag,
                  double weight = 1.0, double rate_cap = std::numeric_limits<double>::infinity());

  // Adds a link (e.g. a virtual one modelling a device's processing throughput); returns its id.
  LinkId add_link(Bandwidth capacity) { return solver_.add_link(capacity.bytes_per_second()); }

  // Changes a link's capacity from now on (a slow or failed link: 0 stalls the flows crossing it).
  void set_capacity(LinkId link, Bandwidth bandwidth);
  Bandwidth capacity(LinkId link) const { return Bandwidth(solver_.capacity(link)); }

  // Removes every flow (draining or still in its latency phase) whose path crosses `link` and returns
  // them with the bytes they still had to send, in flow order, so the caller can restart them elsewhere
  // (rerouting around a failed link). O(flows); failures are rare events.
  struct Aborted {
    FlowListener* listener;
    uint64_t tag;
    Bytes remaining;
  };
  std::vector<Aborted> abort_flows_on(LinkId link);

  size_t active_flows() const { return solver_.num_flows(); }
  uint64_t flows_completed() const { return completed_; }
  uint64_t solves() const { return solves_; }
  des::Signal<FlowCompleted>& completed_signal() { return on_completed_; }

  // The solver, read-only (link loads and rates for tests and metrics).
  const MaxMinSolver& solver() const { return solver_; }

 private:
  struct Record {
    double remaining = 0;  // bytes at `anchor`
    double rate = 0;       // bytes/s since `anchor`
    Time anchor;
    Time start;
    Bytes size;
    FlowListener* listener = nullptr;
    uint64_t tag = 0;
    uint32_t version = 0;
    std::vector<LinkUse> path;  // kept for abort_flows_on
  };
  struct Pending {
    std::vector<LinkUse> path;
    Bytes size;
    Time start;
    FlowListener* listener = nullptr;
    uint64_t tag = 0;
    double weight = 1.0;
    double rate_cap = 0;
  };
  struct Due {
    Time finish;
    FlowId id;
    uint32_t version;
    bool operator>(const Due& o) const { return finish != o.finish ? finish > o.finish : id > o.id; }
  };

  // des::FluidModel
  Time next_event_time() const override;
  void advance_to(Time t) override;
  void on_due(des::Engine& engine, Time t) override;
  // des::EventHandler: injection after latency (tag = pending slot) or the batched re-solve.
  void on_event(des::Engine& engine, uint64_t tag) override;

  void inject(Pending&& p);
  void mark_dirty();
  void resolve();
  void drop_stale() const;

  static constexpr uint64_t kResolveTag = std::numeric_limits<uint64_t>::max();

  des::Engine& engine_;
  MaxMinSolver solver_;
  std::vector<Record> records_;  // indexed by FlowId
  std::vector<Pending> pending_;
  std::vector<uint64_t> free_pending_;
  std::vector<uint8_t> pending_live_;  // per pending slot: not yet injected nor aborted
  mutable std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  bool dirty_ = false;
  bool resolve_scheduled_ = false;
  Time now_;
  uint64_t completed_ = 0;
  uint64_t solves_ = 0;
  std::vector<std::pair<FlowListener*, uint64_t>> finished_;  // scratch for on_due
  des::Signal<FlowCompleted> on_completed_;
};

}  // namespace orrery::net
