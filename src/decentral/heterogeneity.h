// Heterogeneous nodes and links, availability churn, and the synchronous clock of gossip runs (issue 4,
// item 5).
//
// Model card
//   What      Per node i: training compute time per sample c_i (seconds), uplink U_i and downlink D_i
//             (bytes/s, shared by the node's concurrent messages), availability intervals. Per directed
//             link j -> i: latency l_ji (seconds) and a bandwidth cap b_ji (bytes/s). Each quantity comes
//             from a named distribution (fixed, uniform, lognormal by mean and coefficient of variation)
//             or from a FedScale-style device-trace file (decentral/device_trace.h).
//   Seeding   Every value is drawn from its own named stream: node i's compute from
//             RandomStream::derive(seed, "decentral.hetero.compute").child("i"), link j -> i's latency
//             from derive(seed, "decentral.hetero.latency").child("j-i"), and so on; so a value depends
//             only on (seed, quantity, node or link), never on the graph's other nodes or the draw order.
//   Messages  A message of b bytes on j -> i takes l_ji + b / r_ji. In the synchronous clock every
//             message of a round is in flight at once, so r_ji is the max-min fair rate (net/maxmin.h) of
//             the round's flows, each crossing j's uplink and i's downlink and capped by b_ji (exact when
//             nodes finish computing together; with staggered finishes a flow may in truth get more).
//             Without node capacities r_ji = b_ji, the alpha-beta send/recv cost a + S/B. The
//             asynchronous runs (decentral/async_gossip.h) use the flow-level network instead
//             (net/flow_network.h: rates re-solved as messages start and finish).
//   Device    A device-trace row gives c_i = 3 * compute_ms_per_sample / 1000 (FedScale's profiles hold
//   traces    the inference latency per sample; its runtime counts backward as twice forward, so a training
//             sample costs 3 times that), U_i = up_kbps * 125 B/s, D_i = down_kbps * 125 B/s, and the
//             availability intervals; node i takes row i mod (rows). FedScale's client round time is
//             client_job_seconds(): 3 * batch * steps * ms_per_sample / 1000 + upload / U + download / D
//             (Lai et al., "FedScale", ICML 2022; ClientMetadata.get_completion_time).
//   Churn     FRACTION:MEAN_OFF: each node alternates available and unavailable periods of exponential
//             length, unavailable periods of mean MEAN_OFF seconds and available ones of mean
//             MEAN_OFF (1 - FRACTION) / FRACTION, so a FRACTION of the time is unavailable in the long
//             run (an alternating renewal process); a node starts unavailable with probability FRACTION.
//             Stream derive(seed, "decentral.hetero.churn").child("i"), generated lazily as time advances.
//   Sync      Local synchrony (the slowest in-neighbour gates progress): node i starts step k + 1 at
//   clock     T_i(k+1) = max_{j in in_k(i) ∪ {i}} (T_j(k) + c_j batch + [j != i] (l_ji + b / r_ji)).
//             With churn a node is present in step k when it is available at T_i(k). Present nodes follow
//             the recursion over their present in-neighbours; an absent node neither computes nor sends and
//             nobody waits for it, while its clock keeps the step's pace, T_i(k+1) = max(T_i(k) + c_i batch,
//             max_{present j in in(i)} (T_j(k) + c_j batch + l_ji)), so it rejoins when its neighbourhood
//             reaches its next available period. When no node is present every clock also moves to at least
//             the earliest return min_i next_available_i(T_i(k)) (infinity when nobody ever returns).
//             Reported time: max_i T_i.
//   Range     Values must be positive and finite; latency and bandwidth per link of the graph's union;
//             times below 9.2e6 s (the engine's picosecond clock).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "decentral/algorithm.h"
#include "decentral/graph.h"

namespace orrery::decentral {

struct DeviceTrace;

constexpr double kNever = std::numeric_limits<double>::infinity();

// A distribution of one positive quantity (unit-free: seconds or bytes/s).
struct Dist {
  enum class Kind { kFixed, kUniform, kLogNormal };
  Kind kind = Kind::kFixed;
  double a = 0;  // fixed: the value; uniform: low; lognormal: mean
  double b = 0;  // uniform: high; lognormal: coefficient of variation
  double sample(RandomStream& rng) const;
  double mean() const;
  static Dist fixed(double v) { return Dist{Kind::kFixed, v, 0}; }
  static Dist lognormal(double mean, double cv) { return Dist{Kind::kLogNormal, mean, cv}; }
  static Dist uniform(double lo, double hi) { return Dist{Kind::kUniform, lo, hi}; }
};

struct ChurnSpec {
  double fraction = 0;      // long-run fraction of time unavailable, in [0, 1)
  double mean_off_s = 1.0;  // mean unavailable period, seconds
  bool enabled() const { return fraction > 0; }
};

struct HeterogeneitySpec {
  std::optional<Dist> compute;    // training seconds per sample, per node
  std::optional<Dist> latency;    // seconds, per directed link
  std::optional<Dist> bandwidth;  // bytes/s, per directed link (a cap on each message's rate)
  std::optional<Dist> uplink;     // bytes/s, per node (shared by its concurrent outgoing messages)
  std::optional<Dist> downlink;   // bytes/s, per node (shared by its concurrent incoming messages)
  std::shared_ptr<const DeviceTrace> trace;  // per-node compute, up/down and availability (overrides those dists)
  ChurnSpec churn;
  bool enabled() const { return compute || latency || bandwidth || uplink || downlink || trace || churn.enabled(); }
};

// "compute=lognormal:20us:1,latency=50us,bandwidth=uniform:1Gb/s:10Gb/s,uplink=100Mb/s". Keys: compute
// (time), latency (time), bandwidth, uplink, downlink (rates). Values: V, fixed:V, uniform:LO:HI,
// lognormal:MEAN:CV. Errors name the key and the expected form.
HeterogeneitySpec parse_heterogeneity(std::string_view text, const Where& where);
// "0.2" or "0.2:5s": unavailable fraction and mean unavailable period (default 1 s).
ChurnSpec parse_churn(std::string_view text, const Where& where);

// When one node is available: sorted disjoint intervals [start, end) in seconds, optionally repeating
// with a period (FedScale's traces repeat with their finish_time), or generated lazily by a churn process.
class Availability {
 public:
  Availability() = default;  // always available
  Availability(std::vector<std::pair<double, double>> intervals, double period);
  Availability(const ChurnSpec& churn, RandomStream rng);
  bool always() const { return always_; }
  bool available(double t) const;
  // The earliest t' >= t at which the node is available (kNever if none).
  double next_available(double t) const;
  // The end of the available period that contains t (kNever if it never ends). REQUIRES: available(t).
  double available_until(double t) const;

 private:
  void extend(double t) const;  // churn: generate periods until one starts after t
  size_t find(double t) const;  // index of the last interval with start <= t, or npos
  bool always_ = true;
  double period_ = 0;
  mutable std::vector<std::pair<double, double>> iv_;
  // Lazy churn generation.
  bool lazy_ = false;
  double on_mean_ = 0, off_mean_ = 0;
  mutable double horizon_ = 0;
  mutable bool next_on_ = true;
  mutable RandomStream rng_ = RandomStream::derive(0, "");
};

// One run's realised heterogeneity (values drawn for one seed); also the federated clients' clock.
class NetworkProfile final : public ClientClock {
 public:
  NetworkProfile(const HeterogeneitySpec& spec, const GraphSequence& seq, uint64_t seed, const Where& where = {});
  NodeIndex num_nodes() const { return static_cast<NodeIndex>(compute_.size()); }
  double compute_per_sample(NodeIndex i) const { return compute_[static_cast<size_t>(i)]; }  // seconds; 0: free
  double uplink(NodeIndex i) const { return up_[static_cast<size_t>(i)]; }                   // bytes/s; 0: unlimited
  double downlink(NodeIndex i) const { return down_[static_cast<size_t>(i)]; }
  bool has_node_capacities() const { return node_caps_; }
  bool has_compute() const { return has_compute_; }
  bool has_churn() const { return churn_; }
  // Per directed link of the graph's union; 0 latency / 0 (unlimited) bandwidth for other pairs.
  double link_latency(NodeIndex from, NodeIndex to) const;
  double link_bandwidth(NodeIndex from, NodeIndex to) const;
  const Availability& availability(NodeIndex i) const { return avail_[static_cast<size_t>(i)]; }

  // ClientClock: FedScale's round time, 3 * batch * steps * ms_per_sample / 1000 + up / U + down / D
  // (with c_i = 3 ms_per_sample / 1000 this is c_i batch steps + ...), unlimited links cost nothing.
  double job_seconds(NodeIndex i, int64_t batch, int64_t steps, int64_t upload_bytes, int64_t download_bytes) const override;
  bool available(NodeIndex i, double t) const override { return availability(i).available(t); }
  // A job starts when the client is next available; if it becomes unavailable before the job ends the
  // job is dropped and redone from the start (same model snapshot) when it returns. kNever if never done.
  double job_end(NodeIndex i, double start, int64_t batch, int64_t steps, int64_t upload_bytes,
                 int64_t download_bytes) const override;

 private:
  std::vector<double> compute_, up_, down_;
  std::vector<Availability> avail_;
  std::unordered_map<uint64_t, std::pair<double, double>> links_;  // (from << 32 | to) -> (latency, bandwidth)
  bool node_caps_ = false, has_compute_ = false, churn_ = false;
};

// The synchronous clock of gossip runs (see the model card).
class SyncClock {
 public:
  SyncClock(const NetworkProfile& profile, const GraphSequence& seq, int64_t batch);
  // Which nodes are present in step k (available at their own T_i(k)); all ones without churn.
  const std::vector<uint8_t>& present(int64_t k);
  // Advances step k whose messages carried `bytes` in total, split evenly over the step's messages (one
  // per directed edge of graph_at(k) between present nodes); returns the reported time.
  double advance(int64_t k, int64_t bytes);
  double time_of(NodeIndex i) const { return t_[static_cast<size_t>(i)]; }

 private:
  // Max-min rates (bytes/s, inf: unlimited) of graph_at(k)'s messages between present nodes, per
  // in-edge (i, position in in(i)), flattened by offsets_.
  const std::vector<double>& rates(int64_t k);
  const NetworkProfile& p_;
  const GraphSequence& seq_;
  double batch_;
  std::vector<double> t_, next_;
  std::vector<uint8_t> present_;
  int64_t present_step_ = -1;
  std::vector<std::vector<double>> rates_;     // per graph of the period (cached without churn)
  std::vector<std::vector<int64_t>> offsets_;  // per graph: first in-edge index of node i
  std::vector<double> scratch_rates_;
};

}  // namespace orrery::decentral
