// Asynchronous gossip in the event engine: every node loops compute -> update -> send, never waiting for
// its neighbours, and mixes in whatever messages have arrived.
//
// Model card
//   What      n nodes on a graph sequence, with the per-node compute times, per-link latencies and
//             bandwidths, node up/downlinks and availability of a NetworkProfile (decentral/heterogeneity.h).
//             Node i repeats: at the start of its local iteration k_i it draws a minibatch and computes a
//             stochastic gradient g_i at its current model (taking batch * c_i simulated seconds); at the
//             end it updates, sends to its out-neighbours in graph_at(k_i), and starts k_i + 1 at once.
//   Rules     async push-sum (asynchronous SGP; Assran, Loizou, Ballas, Rabbat, "Stochastic Gradient Push
//             for distributed deep learning", ICML 2019; Assran & Rabbat, "Asynchronous gradient push",
//             IEEE TAC 66(1), 2021): g_i at z_i = x_i / w_i; at the end x_i <- x_i - a w_i g_i (a step of
//             a on z_i: with heterogeneous speeds a fast node's w_i drains geometrically between arrivals,
//             and the unscaled x_i -= a g_i would move z_i by a g_i / w_i and diverge; with w_i = 1, the
//             synchronous regular case, it is SGP's step; the network average then moves by the
//             w-weighted mean gradient, so the fixed point leans towards nodes holding more weight), then
//             (x_i, w_i) <- (x_i, w_i) / (|out_i| + 1) and one share (x_i, w_i) goes to each out-neighbour;
//             an arriving share is added at once: x_i += x_msg, w_i += w_msg. The metrics read z = x / w.
//             Invariant: sum_i w_i + (weights in flight or buffered) = n exactly in exact arithmetic, and
//             likewise for x apart from the gradient steps.
//             async dsgd (asynchronous decentralized SGD with stale neighbour copies, in the spirit of
//             AD-PSGD, Lian, Zhang, Zhang, Liu, ICML 2018, with a static doubly stochastic W instead of
//             pairwise averaging): node i keeps the latest received copy x^_j of each in-neighbour
//             (initially x_j^0); at the end of an iteration x_i <- W_ii x_i + sum_j W_ij x^_j - a g_i,
//             then sends x_i to its out-neighbours; an arriving copy replaces an older one. Static graphs.
//   Staleness The number of iterations the sender has completed since the state a message carries, when the
//             receiver mixes it in (push-sum: on arrival; dsgd: when the copy is used; a copy used twice
//             counts twice). Reported as mean and max over all mixes so far.
//   Network   A message of b bytes on j -> i waits the link latency l_ji and then drains as a flow of the
//             flow-level network (net/flow_network.h) crossing j's uplink and i's downlink (where limited),
//             capped by the link bandwidth b_ji, at max-min fair rates re-solved as messages start and end.
//             Without any bandwidth limit it arrives after l_ji. Bytes: d + 1 doubles (push-sum), d (dsgd).
//   Churn     A node computes only while available: it starts an iteration at its next available instant;
//             an iteration that would run past the end of its available period is dropped (the gradient is
//             discarded and nothing is sent) and the node resumes when it is next available. Messages that
//             reach an unavailable node are held and delivered when it returns (so push-sum loses no mass);
//             an unavailable node sends nothing. An absent in-neighbour's last copy keeps its weight (dsgd).
//   Iteration One iteration of the runner = n more local updates in total (every node one on average),
//             so loss vs iterations is comparable with the synchronous runs; sim_time is the event time of
//             the update that completes the iteration.
//   Determinism Events are ordered by (time in picoseconds, priority class, scheduling sequence) in the
//             engine (des/engine.h), and every handler schedules in node order, so ties break by a stable
//             key and a seed gives the same run bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "des/engine.h"
#include "decentral/algorithm.h"
#include "decentral/heterogeneity.h"
#include "net/flow_network.h"

namespace orrery::decentral {

enum class AsyncRule { kPushSum, kDsgd };

// The asynchronous rule for a synchronous algorithm's name ("push-sum", "dsgd"); InputError otherwise.
AsyncRule async_rule_for(std::string_view algorithm, const Where& where);
std::vector<std::string> async_algorithms();

struct StalenessStats {
  int64_t count = 0;
  double sum = 0;
  int64_t max = 0;
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
};

class AsyncGossip final : public Algorithm, private des::EventHandler, private net::FlowListener {
 public:
  // `profile` and `seq` must outlive the algorithm. REQUIRES: seq static for kDsgd (checked by the runner).
  AsyncGossip(AsyncRule rule, const GraphSequence& seq, const NetworkProfile& profile);
  ~AsyncGossip() override;
  void init(const NodeMatrix& x0, StepContext& ctx) override;
  void step(int64_t k, StepContext& ctx) override;
  const NodeMatrix& iterates() override;

  const StalenessStats& staleness() const { return stale_; }
  int64_t local_updates() const { return updates_; }
  int64_t dropped_iterations() const { return dropped_; }
  double now() const { return engine_.now().to_seconds(); }
  // Push-sum: sum_i w_i plus the weights in flight or held for unavailable nodes.
  double total_weight() const;
  // Push-sum: sum_i x_i plus the shares in flight or held (dsgd: sum_i x_i).
  Eigen::RowVectorXd total_mass() const;
  // Every node's local iteration count.
  const std::vector<int64_t>& local_iterations() const { return iter_; }

 private:
  struct Message {
    NodeIndex src = 0, dst = 0;
    int64_t sender_iter = 0;
    double w = 0;
    int64_t edge = 0;  // dsgd: the receiver's in-edge index of src
    bool live = false;
  };
  void on_event(des::Engine& engine, uint64_t tag) override;
  void on_flow_done(uint64_t tag, Time now) override;
  void start(NodeIndex i);
  void finish(NodeIndex i);
  void send(NodeIndex from, NodeIndex to, int64_t edge);
  void deliver(size_t slot);
  void mix_in(size_t slot);
  size_t acquire_slot();
  void schedule(double at, uint64_t tag, bool round_up);

  AsyncRule rule_;
  const GraphSequence& seq_;
  const NetworkProfile& profile_;
  StepContext* ctx_ = nullptr;
  des::Engine engine_;
  std::unique_ptr<net::FlowNetwork> net_;  // when some bandwidth is limited
  NodeIndex n_ = 0;
  Eigen::Index d_ = 0;
  NodeMatrix x_, g_, z_, copies_;
  std::vector<double> w_;
  std::vector<int64_t> iter_, copy_iter_, in_offset_;
  std::vector<double> self_weight_, edge_weight_;
  std::vector<Message> msgs_;
  std::vector<double> payload_;  // d values per message slot
  std::vector<size_t> free_;
  std::vector<std::vector<size_t>> held_;  // per node: messages waiting for it to return
  StalenessStats stale_;
  int64_t updates_ = 0, dropped_ = 0, bytes_ = 0;
};

}  // namespace orrery::decentral
