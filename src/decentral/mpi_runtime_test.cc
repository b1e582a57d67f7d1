// The MPI runtime against the in-process simulation. Run under `mpirun -np 4` (ctest decentral_mpi_test);
// alone it runs as one rank. Expected values are the in-process run's own iterates, computed on every rank
// beforehand: the runtime must reproduce them bit for bit (mpi_runtime.h: each rank's rows are computed by
// SparseMixing::apply from the same inputs, its gradients from the node's own minibatch stream).
// Comparisons happen on rank 0 with EXPECT (never ASSERT), so no rank leaves a collective the others enter.
#include "decentral/mpi_runtime.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include "decentral/runner.h"

namespace orrery::decentral {
namespace {

MpiRuntime* g_mpi = nullptr;

std::unique_ptr<Problem> logistic(NodeIndex n) {
  SyntheticSpec s;
  s.nodes = n;
  s.dim = 6;
  s.samples = 300 * n;
  return make_logistic_nonconvex(s);
}

bool same_bits(const NodeMatrix& a, const NodeMatrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size()) * sizeof(double)) == 0;
}

// Iterates (and trackers) after each of `steps` steps, in-process or on the runtime (gathered on rank 0).
struct Trajectory {
  std::vector<NodeMatrix> x, y;
  int64_t bytes = 0;
};

Trajectory trajectory(const Problem& p, const GraphSequence& seq, const std::string& algo, const AlgoParams& params,
                      int steps, GossipExchange* exchange) {
  const AlgorithmInfo& info = find_algorithm(algo, {});
  const MixingSchedule mix = build_schedule(seq, info, std::nullopt);
  if (exchange != nullptr) exchange->setup(p.num_nodes(), mix, {});
  GradientOracle oracle(p, 16, 7);
  StepContext ctx{mix, oracle, params, RandomStream::derive(7, "decentral.algorithm")};
  ctx.exchange = exchange;
  auto alg = info.make();
  alg->init(p.initial_point(7), ctx);
  Trajectory t;
  const auto record = [&](const NodeMatrix& m, std::vector<NodeMatrix>& out) {
    NodeMatrix full = m;
    if (exchange != nullptr) exchange->gather(m, full);
    out.push_back(std::move(full));
  };
  for (int k = 0; k < steps; ++k) {
    alg->step(k, ctx);
    record(alg->iterates(), t.x);
    if (alg->tracker() != nullptr) record(*alg->tracker(), t.y);
  }
  t.bytes = ctx.bytes;
  return t;
}

void expect_same_trajectory(const Problem& p, const GraphSequence& seq, const std::string& algo,
                            const AlgoParams& params = {}) {
  constexpr int kSteps = 12;
  const Trajectory local = trajectory(p, seq, algo, params, kSteps, nullptr);
  const Trajectory dist = trajectory(p, seq, algo, params, kSteps, g_mpi);
  if (!g_mpi->is_root()) return;
  ASSERT_EQ(dist.x.size(), local.x.size());
  ASSERT_EQ(dist.y.size(), local.y.size());
  for (size_t k = 0; k < local.x.size(); ++k) {
    EXPECT_TRUE(same_bits(dist.x[k], local.x[k])) << algo << " on " << seq.name() << ": iterates differ after step " << k;
  }
  for (size_t k = 0; k < local.y.size(); ++k) {
    EXPECT_TRUE(same_bits(dist.y[k], local.y[k])) << algo << " on " << seq.name() << ": trackers differ after step " << k;
  }
  EXPECT_EQ(dist.bytes, local.bytes) << algo;
}

// run() on the runtime against run() in-process: every metric of every evaluation point of every seed, bit
// for bit (NaN fields compare as bits too).
// Returns the in-process result.
RunResult expect_same_metrics(const Problem& p, const GraphSequence& seq, const RunSpec& s) {
  RunResult local = run(p, seq, s);
  const RunResult dist = run(p, seq, s, {}, {}, g_mpi);
  if (!g_mpi->is_root()) {
    EXPECT_TRUE(dist.summary.empty());
    return local;
  }
  EXPECT_EQ(dist.per_seed.size(), local.per_seed.size());
  for (size_t r = 0; r < local.per_seed.size() && r < dist.per_seed.size(); ++r) {
    EXPECT_EQ(dist.per_seed[r].size(), local.per_seed[r].size());
    if (dist.per_seed[r].size() != local.per_seed[r].size()) continue;
    for (size_t k = 0; k < local.per_seed[r].size(); ++k) {
      const MetricPoint& a = dist.per_seed[r][k];
      const MetricPoint& b = local.per_seed[r][k];
      for (double MetricPoint::*f : {&MetricPoint::loss, &MetricPoint::grad_norm, &MetricPoint::grad_norm_pi,
                                      &MetricPoint::consensus, &MetricPoint::bytes, &MetricPoint::sim_time,
                                      &MetricPoint::participation}) {
        EXPECT_EQ(std::memcmp(&(a.*f), &(b.*f), sizeof(double)), 0) << s.algorithm << " seed " << r << " point " << k;
      }
    }
  }
  return local;
}

TEST(MpiRuntime, BlocksCoverTheNodesInOrder) {
  // floor(r n / P): 6 nodes on 4 ranks -> 0, 1, 3, 4, 6 (blocks of 1, 2, 1, 2).
  const NodeIndex want[] = {0, 1, 3, 4, 6};
  for (int r = 0; r <= 4; ++r) EXPECT_EQ(block_begin(6, r, 4), want[r]);
  EXPECT_TRUE(mpi_available());
}

TEST(MpiRuntime, DsgdOnARingOneNodePerRankMatchesInProcess) {
  const auto p = logistic(4);
  expect_same_trajectory(*p, parse_topology("ring:4", {}), "dsgd");
  expect_same_trajectory(*p, parse_topology("ring:4", {}), "dsgd-atc");
}

TEST(MpiRuntime, PushPullOnADirectedGraphWithUnevenBlocksMatchesInProcess) {
  const auto p = logistic(6);
  const GraphSequence g = parse_topology("directed-ring:6:chords=0-3,4-1", {});
  expect_same_trajectory(*p, g, "push-pull");
  expect_same_trajectory(*p, g, "push-pull-atc");
}

TEST(MpiRuntime, MgPullDiagGtWithTwoRoundsMatchesInProcess) {
  const auto p = logistic(8);
  AlgoParams params;
  params.rounds = 2;
  params.lr = 0.01;
  expect_same_trajectory(*p, parse_topology("exponential:8", {}), "mg-pull-diag-gt", params);
  expect_same_trajectory(*logistic(5), parse_topology("directed-ring:5:chords=0-2", {}), "pull-diag-gt", params);
}

TEST(MpiRuntime, TimeVaryingOnePeerExponentialMatchesInProcess) {
  const auto p = logistic(8);
  const GraphSequence g = parse_topology("one-peer-exponential:8", {});
  for (const char* algo : {"dsgd", "push-sum", "gt"}) expect_same_trajectory(*p, g, algo);
}

TEST(MpiRuntime, EveryOtherGossipAlgorithmMatchesInProcess) {
  const auto p = logistic(7);
  AlgoParams params;
  params.compressor = CompressorSpec{CompressorKind::kRandK, 0.4, 1};
  for (const char* algo : {"exact-diffusion", "d2", "push-diging", "row-dgd", "choco-sgd"}) {
    const bool directed = std::string(algo) == "push-diging" || std::string(algo) == "row-dgd";
    expect_same_trajectory(*p, parse_topology(directed ? "directed-ring:7:chords=0-3" : "ring:7", {}), algo, params);
  }
}

TEST(MpiRuntime, RunnerMetricsAreByteIdenticalOverSeeds) {
  RunSpec s;
  s.algorithm = "push-pull";
  s.iters = 30;
  s.batch = 16;
  s.seeds = 2;
  s.eval_every = 1;
  expect_same_metrics(*logistic(8), parse_topology("exponential:8", {}), s);
}

TEST(MpiRuntime, FederatedAlgorithmsMatchInProcess) {
  // 7 clients: uneven blocks on 4 ranks (1, 2, 2, 2), so a round's sampled clients come from several ranks
  // in an order that is not the ranks' (the server sums the uploads in sampling order).
  const auto p = logistic(7);
  const GraphSequence clients(Graph(7, {}, "clients"));
  AlgoParams params;
  params.local_steps = 3;
  params.client_fraction = 0.5;
  params.buffer = 3;
  for (const char* algo : {"fedavg", "scaffold", "fedasync", "fedbuff"}) expect_same_trajectory(*p, clients, algo, params);
  // Random compressors with error feedback: each client's draws are its own stream's, on its owner.
  params.compressor = CompressorSpec{CompressorKind::kQsgd, 0, 4};
  for (const char* algo : {"fedavg", "fedbuff"}) expect_same_trajectory(*p, clients, algo, params);
  params.compressor = CompressorSpec{CompressorKind::kRandK, 0.4, 1};
  for (const char* algo : {"scaffold", "fedasync"}) expect_same_trajectory(*p, clients, algo, params);
}

TEST(MpiRuntime, ChocoWithQsgdMatchesInProcess) {
  // QSGD draws as many uniforms as a message has non-zero norm, so its draws depend on values: each node
  // compresses from its own stream on the process owning it.
  AlgoParams params;
  params.compressor = CompressorSpec{CompressorKind::kQsgd, 0, 4};
  params.gamma = 0.5;
  expect_same_trajectory(*logistic(6), parse_topology("ring:6", {}), "choco-sgd", params);
}

TEST(MpiRuntime, FederatedRunWithClientClockAndChurnIsByteIdentical) {
  // FedAvg with FedScale-style job times and availability churn: the client clock is the same on every
  // process, so the sampled pools, round ends (sim_time) and metrics must be the in-process run's.
  RunSpec s;
  s.algorithm = "fedavg";
  s.iters = 20;
  s.batch = 16;
  s.seeds = 2;
  s.eval_every = 1;
  s.params.client_fraction = 0.5;
  s.time.hetero = parse_heterogeneity("compute=lognormal:1ms:0.5,uplink=10Mb/s,downlink=50Mb/s", {});
  s.time.hetero.churn = parse_churn("0.3:0.05s", {});
  expect_same_metrics(*logistic(8), GraphSequence(Graph(8, {}, "clients")), s);
}

TEST(MpiRuntime, GossipUnderChurnIsByteIdentical) {
  // Churn rebuilds the step's mixing matrices on the present nodes every step (patterns inside the base
  // graph's, so the base exchange plans carry them); absent nodes skip the step. Mean off period 5 ms
  // against ~1.6 ms steps (16 samples x 0.1 ms): nodes leave and return many times in 40 steps.
  RunSpec s;
  s.iters = 40;
  s.batch = 16;
  s.eval_every = 1;
  s.time.compute_per_sample = Time::seconds(1e-4);
  s.time.latency = Time::seconds(1e-4);
  s.time.hetero.churn = parse_churn("0.3:0.005s", {});
  const auto p = logistic(7);
  for (const char* algo : {"dsgd", "gt", "exact-diffusion"}) {
    s.algorithm = algo;
    const RunResult r = expect_same_metrics(*p, parse_topology("ring:7", {}), s);
    // Churn took place: some node-steps were skipped (a 30% unavailable fraction).
    EXPECT_LT(r.per_seed[0].back().participation, 0.95) << algo;
  }
  for (const char* algo : {"push-pull", "push-sum"}) {
    s.algorithm = algo;
    expect_same_metrics(*p, parse_topology("directed-ring:7:chords=0-3,5-2", {}), s);
  }
  s.algorithm = "push-sum";  // time-varying and directed: one base plan per round of the period
  expect_same_metrics(*logistic(8), parse_topology("one-peer-exponential:8", {}), s);
}

TEST(MpiRuntime, AsynchronousGossipIsRefused) {
  RunSpec s;
  s.algorithm = "push-sum";
  s.iters = 2;
  s.time.compute_per_sample = Time::seconds(1e-3);
  s.time.mode = TimeMode::kAsync;
  try {
    run(*logistic(4), parse_topology("ring:4", {}), s, {}, {}, g_mpi);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("asynchronous gossip time runs in-process only"), std::string::npos) << e.what();
  }
}

TEST(MpiRuntime, FewerNodesThanRanksIsRefused) {
  if (g_mpi->size() < 2) GTEST_SKIP() << "needs at least 2 ranks (run under mpirun -np 4)";
  const auto n = static_cast<NodeIndex>(g_mpi->size() - 1);
  const auto p = logistic(n);
  RunSpec s;
  s.algorithm = "dsgd";
  s.iters = 2;
  try {
    run(*p, parse_topology(fmt::format("complete:{}", n), {}), s, {}, {}, g_mpi);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at least one node per rank"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orrery::decentral

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto mpi = orrery::decentral::MpiRuntime::start({});
  orrery::decentral::g_mpi = mpi.get();
  if (!mpi->is_root()) {
    // One report, from rank 0: every comparison is made there.
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  mpi.reset();  // MPI_Finalize
  return any;
}
