#include "decentral/async_gossip.h"

#include <cmath>

#include <gtest/gtest.h>

#include "decentral/runner.h"

namespace orrery::decentral {
namespace {

std::unique_ptr<Problem> quadratics(int n, int d) {
  QuadraticSpec q;
  for (int i = 0; i < n; ++i) {
    q.h.push_back(1.0 + 0.5 * i);
    q.b.push_back(std::vector<double>(static_cast<size_t>(d), static_cast<double>(i)));
  }
  return make_quadratic(q);
}

// The 5-node digraph of decentralized.md check 6: i -> i+1 mod 5 plus 0 -> 2.
GraphSequence check6_graph() { return GraphSequence(directed_ring_with_chords(5, {{0, 2}})); }

struct Harness {
  Harness(const Problem& p, const GraphSequence& seq, const HeterogeneitySpec& h, AsyncRule rule, double lr,
          const MixingSchedule& mix)
      : profile(h, seq, 1), oracle(p, 0, 1), ctx{mix, oracle, params, RandomStream::derive(1, "test")},
        alg(rule, seq, profile) {
    params.lr = lr;
  }
  AlgoParams params;
  NetworkProfile profile;
  GradientOracle oracle;
  StepContext ctx;
  AsyncGossip alg;
};

TEST(AsyncGossip, PushSumAveragesExactlyDespiteSpeedsLatenciesBandwidthAndChurn) {
  // Pure averaging (zero gradients: h = 0, no linear term) of z0 = (1, 2, 3, 4, 5) over check 6's digraph:
  // push-sum conserves sum x and sum w (shares in flight and held for absent nodes included), so every
  // z_i = x_i / w_i tends to sum x / sum w = 15 / 5 = 3 (decentralized.md check 6: "Push-Sum returns
  // exactly 3"), whatever the speeds, latencies, bandwidths and churn.
  QuadraticSpec q;
  for (int i = 0; i < 5; ++i) {
    q.h.push_back(0.0);
    q.b.push_back({0.0});
    q.x0.push_back({static_cast<double>(i + 1)});
  }
  const auto p = make_quadratic(q);
  const GraphSequence seq = check6_graph();
  HeterogeneitySpec h;
  h.compute = Dist::lognormal(1e-3, 1.0);
  h.latency = Dist::uniform(1e-4, 2e-3);
  h.bandwidth = Dist::fixed(64'000.0);  // 16-byte messages: 0.25 ms each
  h.uplink = Dist::fixed(100'000.0);
  h.churn = ChurnSpec{0.2, 0.05};
  const MixingSchedule mix;
  Harness t(*p, seq, h, AsyncRule::kPushSum, 0.1, mix);
  t.alg.init(p->initial_point(1), t.ctx);
  for (int64_t k = 0; k < 2000; ++k) {
    t.alg.step(k, t.ctx);
    if (k % 100 == 0) {
      EXPECT_NEAR(t.alg.total_weight(), 5.0, 1e-12) << k;
      EXPECT_NEAR(t.alg.total_mass()(0), 15.0, 1e-12) << k;
    }
  }
  const NodeMatrix& z = t.alg.iterates();
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(z(i, 0), 3.0, 1e-9) << i;
  EXPECT_GT(t.alg.dropped_iterations(), 0);  // churn did interrupt iterations
  EXPECT_GT(t.alg.staleness().max, 0);
  // Bytes: (d + 1) doubles per message, one message per out-edge per local update.
  EXPECT_EQ(t.ctx.bytes % 16, 0);
}

TEST(AsyncGossip, DsgdWithIdenticalNodesAndShortLatencyIsSynchronousDsgd) {
  // Every node computes for 1 ms, messages take 0.5 ms: node i's iteration k + 1 ends at (k + 1) ms and
  // mixes the copies its in-neighbours sent at k ms (arrived at k + 0.5 ms), with the gradient taken at its
  // own x_i(k) when the iteration started: x_i(k+1) = sum_j W_ij x_j(k) - a g_i(x_i(k)), which is
  // synchronous combine-then-adapt DSGD exactly (exact gradients). So every metric agrees to rounding.
  const auto p = quadratics(6, 2);
  const GraphSequence seq(ring(6));
  RunSpec sync;
  sync.algorithm = "dsgd";
  sync.iters = 60;
  sync.batch = 0;
  sync.eval_every = 10;
  sync.params.lr = 0.05;
  RunSpec async = sync;
  async.time.mode = TimeMode::kAsync;
  async.time.hetero.compute = Dist::fixed(1e-3);
  async.time.hetero.latency = Dist::fixed(0.5e-3);
  const RunResult a = run(*p, seq, sync);
  const RunResult b = run(*p, seq, async);
  ASSERT_EQ(a.summary.size(), b.summary.size());
  for (size_t k = 0; k < a.summary.size(); ++k) {
    EXPECT_NEAR(a.summary[k].loss.mean, b.summary[k].loss.mean, 1e-12) << k;
    EXPECT_NEAR(a.summary[k].consensus.mean, b.summary[k].consensus.mean, 1e-12) << k;
    EXPECT_EQ(a.summary[k].bytes.mean, b.summary[k].bytes.mean) << k;
    // n local updates per iteration, all at the same instants: iteration k ends at k ms.
    EXPECT_NEAR(b.summary[k].sim_time.mean, 1e-3 * static_cast<double>(b.summary[k].iter), 1e-12) << k;
  }
  EXPECT_TRUE(std::isnan(a.summary.back().staleness_mean.mean));
  EXPECT_FALSE(std::isnan(b.summary.back().staleness_mean.mean));
}

TEST(AsyncGossip, RunsAreDeterministicAndSlowNodesCreateStaleness) {
  const auto p = quadratics(8, 3);
  const GraphSequence seq(ring(8));
  RunSpec s;
  s.algorithm = "push-sum";
  s.iters = 200;
  s.batch = 0;
  s.params.lr = 0.02;
  s.mixing = MixingSpec{MixingRule::kPush, false};
  s.time.mode = TimeMode::kAsync;
  s.time.hetero.compute = Dist::lognormal(1e-3, 1.0);
  s.time.hetero.latency = Dist::fixed(2e-3);
  const RunResult a = run(*p, seq, s);
  const RunResult b = run(*p, seq, s);
  for (size_t k = 0; k < a.summary.size(); ++k) {
    EXPECT_EQ(a.summary[k].loss.mean, b.summary[k].loss.mean);
    EXPECT_EQ(a.summary[k].sim_time.mean, b.summary[k].sim_time.mean);
  }
  // Compute per iteration ~ LogNormal(mean 1 ms, cv 1) (median 0.71 ms), messages take 2 ms: a node faster
  // than 2 ms (most of them) finishes another iteration before its message arrives, so some message is at
  // least one iteration stale.
  EXPECT_GE(a.summary.back().staleness_max.mean, 1.0);
  // The loss falls (the optimum of sum 0.5 h_i (x - i)^2 is below the initial loss at x = 0).
  EXPECT_LT(a.summary.back().loss.mean, a.summary.front().loss.mean);
}

TEST(AsyncGossip, RefusesWhatItCannotRun) {
  const auto p = quadratics(4, 1);
  RunSpec s;
  s.algorithm = "gt";
  s.iters = 2;
  s.time.mode = TimeMode::kAsync;
  s.time.hetero.compute = Dist::fixed(1e-3);
  EXPECT_THROW(run(*p, GraphSequence(ring(4)), s), InputError);  // only push-sum and dsgd
  s.algorithm = "dsgd";
  s.time.hetero.compute.reset();
  EXPECT_THROW(run(*p, GraphSequence(ring(4)), s), InputError);  // no compute time
  s.time.hetero.compute = Dist::fixed(1e-3);
  EXPECT_THROW(run(*p, one_peer_exponential(4), s), InputError);  // dsgd needs a static graph
  s.algorithm = "fedasync";
  EXPECT_THROW(run(*p, GraphSequence(ring(4)), s), InputError);  // federated: own clock
}

TEST(SyncChurn, AbsentNodesSkipStepsAndTheMeanIsPreservedByMetropolis) {
  // Pure gossip (zero gradients) with DSGD under 30% churn on an undirected torus: each step's W is
  // Metropolis on the present subgraph (doubly stochastic, absent rows and columns e_i), so the mean of the
  // node states is preserved exactly and the nodes still reach consensus; the participation is below 1.
  QuadraticSpec q;
  for (int i = 0; i < 9; ++i) {
    q.h.push_back(0.0);
    q.b.push_back({0.0});
    q.c.push_back({0.0});
    q.x0.push_back({static_cast<double>(i)});
  }
  const auto p = make_quadratic(q);
  RunSpec s;
  s.algorithm = "dsgd";
  s.iters = 400;
  s.batch = 0;
  s.eval_every = 100;
  s.time.hetero.compute = Dist::fixed(1e-3);
  s.time.hetero.churn = ChurnSpec{0.3, 0.005};
  const RunResult r = run(*p, GraphSequence(torus(3, 3)), s);
  // Consensus error (1/n) sum (x_i - 4)^2 starts at (1/9) sum (i - 4)^2 = 60/9 and falls to ~0.
  EXPECT_NEAR(r.summary.front().consensus.mean, 60.0 / 9.0, 1e-12);
  EXPECT_LT(r.summary.back().consensus.mean, 1e-6);
  EXPECT_LT(r.summary.back().participation.mean, 0.95);
  EXPECT_GT(r.summary.back().participation.mean, 0.5);
}

TEST(SyncChurn, DirectedGraphsNeedColumnOrRowStochasticAlgorithms) {
  const auto p = quadratics(8, 1);
  RunSpec s;
  s.algorithm = "dsgd";
  s.iters = 2;
  s.time.hetero.compute = Dist::fixed(1e-3);
  s.time.hetero.churn = ChurnSpec{0.2, 0.01};
  EXPECT_THROW(run(*p, GraphSequence(static_exponential(8)), s), InputError);
  s.algorithm = "push-pull";  // row and column stochastic matrices exist on any present subgraph
  EXPECT_NO_THROW(run(*p, GraphSequence(static_exponential(8)), s));
}

}  // namespace
}  // namespace orrery::decentral
