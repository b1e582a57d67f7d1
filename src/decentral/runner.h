// Runs a decentralized or federated algorithm on a problem over a (time-varying) graph, for several seeds,
// and records metrics with their spread over seeds.
//
// Model card
//   What      For each seed s = seed0 .. seed0 + seeds - 1: x^0 = problem.initial_point(s), a GradientOracle
//             with minibatch `batch` per node and per step (streams from s), the algorithm's own stream
//             RandomStream::derive(s, "decentral.algorithm"), then `iters` steps. Seeds are independent;
//             results do not depend on how many run at once.
//   Metrics   At k = 0, e, 2e, ..., iters (e = eval_every; the last point is always iters), on all the data:
//               loss         f(xbar), xbar = (1/n) sum_i x_i (the simple mean of the node iterates);
//               grad_norm    ||grad f(xbar)||;
//               grad_norm_pi ||grad f(x_pi)||, x_pi = sum_i pi_i x_i with pi the Perron vector of the
//                            row-stochastic A (uniform for doubly stochastic or federated algorithms,
//                            and taken as uniform when every pi_i is within 1e-9 relative of 1/n);
//               consensus    (1/n) sum_i ||x_i - xbar||^2;
//               accuracy     test accuracy at xbar (NaN without a test set);
//               bytes        bytes sent by all nodes so far;
//               sim_time     simulated seconds: the asynchronous algorithms' clock, or the TimeModel's
//                            synchronous clock for gossip algorithms when set; NaN otherwise;
//               staleness    asynchronous gossip: mean and max staleness of the messages mixed so far;
//               participation with churn: the fraction of node-steps that took part so far.
//             Each is summarised over seeds as mean, sample standard deviation, min and max.
//   Checks    (InputError) unknown algorithm; node counts of problem and graph differ; the graph (the union
//             of one period) is not strongly connected; the mixing matrix is not stochastic the way the
//             algorithm needs (doubly / row / column); iters, batch, seeds, lr out of range; churn with a
//             doubly stochastic algorithm on a directed graph (the present subgraph is not balanced);
//             asynchronous time for an algorithm other than push-sum and dsgd, without a compute time, or
//             dsgd on a time-varying graph; asynchronous time on the MPI runtime.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/units.h"
#include "decentral/algorithm.h"
#include "decentral/graph.h"
#include "decentral/heterogeneity.h"
#include "decentral/mixing.h"
#include "decentral/problem.h"

namespace orrery::decentral {

// Simulated time of gossip and federated runs (issue item 5; model cards in decentral/heterogeneity.h and
// decentral/async_gossip.h). The four scalar fields are the short form of `hetero`: node i's compute per
// sample ~ LogNormal(compute_per_sample, CV speed_cv) (fixed when speed_cv = 0), a fixed link latency and
// bandwidth; they fill the corresponding distributions of `hetero` when those are unset.
//   sync   Local synchrony: node i starts step k + 1 when its own step k is done and the step-k messages of
//          all its present in-neighbours have arrived (SyncClock); with churn, absent nodes skip the step:
//          the step's mixing matrices are rebuilt on the subgraph of present nodes (an absent node keeps
//          its row and column e_i) and an absent node's gradient is zero.
//   async  Event-driven asynchronous gossip (AsyncGossip: push-sum or dsgd), staleness reported.
//   Federated algorithms keep their own event clock; with `hetero` their clients' job times come from
//   NetworkProfile::job_end (FedScale's round time, availability and dropped jobs).
enum class TimeMode { kSync, kAsync };

struct TimeModel {
  Time compute_per_sample = Time::zero();
  double speed_cv = 0.0;
  Time latency = Time::zero();
  Bandwidth bandwidth{0.0};  // 0: infinite
  HeterogeneitySpec hetero;
  TimeMode mode = TimeMode::kSync;
  bool enabled() const {
    return compute_per_sample > Time::zero() || latency > Time::zero() || bandwidth.bytes_per_second() > 0 ||
           hetero.enabled() || mode == TimeMode::kAsync;
  }
  // hetero with the scalar fields folded in.
  HeterogeneitySpec resolved() const;
};

struct RunSpec {
  std::string algorithm = "push-pull";
  AlgoParams params;
  int64_t iters = 1000;
  int64_t batch = 200;       // per node and step, 0..1e7; 0: exact local gradients
  int64_t seeds = 1;
  uint64_t seed = 1;         // first seed
  int64_t eval_every = 0;    // 0: iters / 100 (at least 1)
  std::optional<MixingSpec> mixing;  // override of the algorithm's default mixing rule
  // params.lr is the effective step: algorithms whose tracker holds the gradient sum (tracks_sum) run
  // with lr / n, so that every algorithm moves the mean by about lr times the mean gradient.
  bool effective_lr = false;
  TimeModel time;  // gossip algorithms' simulated seconds (federated asynchronous ones keep their own clock)
  // After every step, the algorithm's conserved-quantity error (Algorithm::conservation_error: 1^T y -
  // 1^T g for column-stochastic tracking, the pi-weighted form for PULL-DIAG-GT) is taken into
  // RunResult::conservation_error_max. Costs one pass over the tracker per step: for tests and debugging.
  bool check_invariants = false;
};

struct Stat {
  double mean = 0, std = 0, min = 0, max = 0;
};

struct MetricPoint {
  int64_t iter = 0;
  double loss = 0, grad_norm = 0, grad_norm_pi = 0, consensus = 0, accuracy = 0, bytes = 0, sim_time = 0;
  // Asynchronous gossip: mean and max staleness of the messages mixed so far (NaN otherwise).
  double staleness_mean = 0, staleness_max = 0;
  // Churn: fraction of node-steps (sync) or of local iterations started (async: 1 - dropped / started)
  // that took part so far (NaN without churn).
  double participation = 0;
};

struct SummaryPoint {
  int64_t iter = 0;
  Stat loss, grad_norm, grad_norm_pi, consensus, accuracy, bytes, sim_time, staleness_mean, staleness_max, participation;
};

struct RunResult {
  std::string algorithm;
  std::string problem;
  std::string graph;
  NodeIndex nodes = 0;
  int64_t dim = 0;
  std::vector<std::vector<MetricPoint>> per_seed;  // [seed][point]
  std::vector<SummaryPoint> summary;               // [point]
  double seconds = 0;                              // wall-clock of the run (not deterministic; not in files)
  double eval_seconds = 0;                         // of which the full-data metric evaluations (same caveat)
  double conservation_error_max = 0;               // with RunSpec::check_invariants, over steps and seeds
};

// The mixing matrices `info` needs on `seq` (the default rule, or `override`), checked.
MixingSchedule build_schedule(const GraphSequence& seq, const AlgorithmInfo& info,
                              const std::optional<MixingSpec>& override_spec, const Where& where = {});

using ProgressFn = std::function<void(int64_t done, int64_t total)>;

// With an `exchange` (decentral/mpi_runtime.h) every process calls run() with the same arguments; each
// computes its own block of nodes and the root alone evaluates the metrics on the gathered iterates, so its
// result is byte-identical to the in-process run's; the others return a result without points. Federated
// algorithms run each client's jobs on the process owning it and share the uploads (algo_federated.cc).
RunResult run(const Problem& problem, const GraphSequence& seq, const RunSpec& spec, const ProgressFn& progress = {},
              const Where& where = {}, GossipExchange* exchange = nullptr);

// Mean, sample standard deviation (0 for one value), min, max.
Stat summarize(const std::vector<double>& values);

}  // namespace orrery::decentral
