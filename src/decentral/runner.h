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
//                            synchronous clock for gossip algorithms when set; NaN otherwise.
//             Each is summarised over seeds as mean, sample standard deviation, min and max.
//   Checks    (InputError) unknown algorithm; node counts of problem and graph differ; the graph (the union
//             of one period) is not strongly connected; the mixing matrix is not stochastic the way the
//             algorithm needs (doubly / row / column); iters, batch, seeds, lr out of range.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/units.h"
#include "decentral/algorithm.h"
#include "decentral/graph.h"
#include "decentral/mixing.h"
#include "decentral/problem.h"

namespace orrery::decentral {

// Synchronous wall-clock of gossip algorithms (issue item 5, first piece). Node i computes its step in
// batch * compute_per_sample * s_i (s_i ~ LogNormal, mean 1, CV speed_cv, drawn once per node from
// RandomStream::derive(seed, "decentral.hetero")); a message over a link takes latency + bytes /
// bandwidth. Local synchrony: node i starts step k + 1 when its own step k is done and the step-k
// messages of all its in-neighbours have arrived, T_i(k+1) = max_{j in in(i) ∪ {i}} (T_j(k) + c_j +
// [j != i] (latency + b / bandwidth)), b = the step's bytes per message. Simulated time = max_i T_i.
struct TimeModel {
  Time compute_per_sample = Time::zero();
  double speed_cv = 0.0;
  Time latency = Time::zero();
  Bandwidth bandwidth{0.0};  // 0: infinite
  bool enabled() const { return compute_per_sample > Time::zero() || latency > Time::zero() || bandwidth.bytes_per_second() > 0; }
};

struct RunSpec {
  std::string algorithm = "push-pull";
  AlgoParams params;
  int64_t iters = 1000;
  int64_t batch = 200;       // per node and step; <= 0: exact local gradients
  int64_t seeds = 1;
  uint64_t seed = 1;         // first seed
  int64_t eval_every = 0;    // 0: iters / 100 (at least 1)
  std::optional<MixingSpec> mixing;  // override of the algorithm's default mixing rule
  // params.lr is the effective step: algorithms whose tracker holds the gradient sum (tracks_sum) run
  // with lr / n, so that every algorithm moves the mean by about lr times the mean gradient.
  bool effective_lr = false;
  TimeModel time;  // gossip algorithms' simulated seconds (federated asynchronous ones keep their own clock)
};

struct Stat {
  double mean = 0, std = 0, min = 0, max = 0;
};

struct MetricPoint {
  int64_t iter = 0;
  double loss = 0, grad_norm = 0, grad_norm_pi = 0, consensus = 0, accuracy = 0, bytes = 0, sim_time = 0;
};

struct SummaryPoint {
  int64_t iter = 0;
  Stat loss, grad_norm, grad_norm_pi, consensus, accuracy, bytes, sim_time;
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
};

// The mixing matrices `info` needs on `seq` (the default rule, or `override`), checked.
MixingSchedule build_schedule(const GraphSequence& seq, const AlgorithmInfo& info,
                              const std::optional<MixingSpec>& override_spec, const Where& where = {});

using ProgressFn = std::function<void(int64_t done, int64_t total)>;

RunResult run(const Problem& problem, const GraphSequence& seq, const RunSpec& spec, const ProgressFn& progress = {},
              const Where& where = {});

// Mean, sample standard deviation (0 for one value), min, max.
Stat summarize(const std::vector<double>& values);

}  // namespace orrery::decentral
