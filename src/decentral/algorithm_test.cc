#include "decentral/algorithm.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "decentral/runner.h"

namespace orrery::decentral {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::unique_ptr<Problem> quadratics(int n, int d, double hetero = 0.0) {
  QuadraticSpec q;
  for (int i = 0; i < n; ++i) {
    q.h.push_back(1.0 + hetero * i);
    q.b.push_back(std::vector<double>(static_cast<size_t>(d), static_cast<double>(i)));
  }
  return make_quadratic(q);
}

std::unique_ptr<Problem> small_logistic(int n) {
  SyntheticSpec s;
  s.nodes = n;
  s.dim = 4;
  s.samples = 100 * n;
  return make_logistic_nonconvex(s);
}

TEST(Registry, NamesAreUniqueAndEveryEntryHasADescriptionAndCitation) {
  std::set<std::string> names;
  for (const AlgorithmInfo& a : algorithms()) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_FALSE(a.description.empty()) << a.name;
    EXPECT_FALSE(a.citation.empty()) << a.name;
    EXPECT_TRUE(a.make) << a.name;
  }
  for (const char* required : {"dsgd", "dsgd-atc", "exact-diffusion", "d2", "gt", "push-sum", "push-diging", "push-pull",
                               "push-pull-atc", "pull-diag-gt", "mg-pull-diag-gt", "fedavg", "fedasync", "fedbuff",
                               "scaffold", "choco-sgd"}) {
    EXPECT_TRUE(names.count(required)) << required;
  }
  EXPECT_NE(error_of([] { find_algorithm("push-pul", Where{"", 0, "--algo"}); }).find("did you mean 'push-pull'"),
            std::string::npos);
}

TEST(SparseMixing, ApplyEqualsTheDenseProductAndCountsOffDiagonalMessages) {
  const Graph g = random_strongly_connected(12, 0.2, 4);
  const Eigen::MatrixXd a = pull_matrix(g);
  const SparseMixing m(a);
  RandomStream rng = RandomStream::derive(1, "test.mix");
  NodeMatrix x(12, 3), out, tmp, out2;
  for (Eigen::Index k = 0; k < x.size(); ++k) x.data()[k] = rng.uniform01();
  m.apply(x, out);
  EXPECT_LT((out - a * x).cwiseAbs().maxCoeff(), 1e-15);
  m.apply_power(x, out2, tmp, 3);
  EXPECT_LT((out2 - a * a * a * x).cwiseAbs().maxCoeff(), 1e-14);
  EXPECT_EQ(m.messages(), g.num_edges());
}

TEST(SparseMixing, BlockedApplyAndFusedUpdateAreTheEntryOrderSumsBitForBit) {
  // 300 nodes and 605 columns: apply works in column blocks (65536 / 300 -> 216 columns) of 8-column lanes
  // plus a tail; each element must still be w_0 in_0 + w_1 in_1 + ... in entry order, the values the MPI
  // runtime reproduces, and apply_update must equal apply followed by (t + s add) - sub.
  const Graph g = random_strongly_connected(300, 0.02, 7);
  const SparseMixing m(pull_matrix(g));
  RandomStream rng = RandomStream::derive(2, "test.mix");
  NodeMatrix x(300, 605), add(300, 605), sub(300, 605), out, fused, ref(300, 605);
  for (NodeMatrix* a : {&x, &add, &sub}) {
    for (Eigen::Index k = 0; k < a->size(); ++k) a->data()[k] = rng.uniform01() - 0.5;
  }
  for (NodeIndex i = 0; i < 300; ++i) {
    for (Eigen::Index k = 0; k < 605; ++k) {
      const SparseMixing::Entry* e = m.row_begin(i);
      double acc = e->w * x(e->col, k);
      for (++e; e != m.row_end(i); ++e) acc += e->w * x(e->col, k);
      ref(i, k) = acc;
    }
  }
  m.apply(x, out);
  EXPECT_EQ(out, ref);
  m.apply_update(x, fused, -0.05, add, &sub);
  const NodeMatrix expected = (ref - 0.05 * add) - sub;
  EXPECT_EQ(fused, expected);
  m.apply_update(x, fused, -0.05, add, nullptr);
  EXPECT_EQ(fused, NodeMatrix(ref - 0.05 * add));
}

TEST(Schedule, RequirementsOnTheMixingMatrixAndTheGraphAreInputErrors) {
  const GraphSequence five(directed_ring_with_chords(5, {{0, 2}}));
  // DSGD needs a doubly stochastic W: the 5-node digraph is unbalanced.
  EXPECT_NE(error_of([&] { build_schedule(five, find_algorithm("dsgd", {}), std::nullopt); }).find("directed and not balanced"),
            std::string::npos);
  // Forcing a row-stochastic rule on DSGD (on a directed ring it would be doubly stochastic: (I + P)/2).
  EXPECT_NE(error_of([&] { build_schedule(five, find_algorithm("dsgd", {}), MixingSpec{MixingRule::kPull, false}); }).find("needs a doubly stochastic mixing matrix, but 'pull'"),
            std::string::npos);
  // Push-Sum with a row-stochastic matrix on a digraph whose in- and out-degrees differ.
  EXPECT_NE(error_of([&] { build_schedule(five, find_algorithm("push-sum", {}), MixingSpec{MixingRule::kPull, false}); })
                .find("column-stochastic"),
            std::string::npos);
  // Not strongly connected.
  const GraphSequence split(Graph(4, {{0, 1}, {1, 0}, {2, 3}, {3, 2}}, "two-pairs"));
  EXPECT_NE(error_of([&] { build_schedule(split, find_algorithm("push-pull", {}), std::nullopt); }).find("not strongly connected"),
            std::string::npos);
  // Federated algorithms ignore the graph.
  EXPECT_NO_THROW(build_schedule(split, find_algorithm("fedavg", {}), std::nullopt));
  // Balanced directed graphs get uniform weights; pi of the pull matrix on the 5-node digraph is (4,2,3,4,4)/17.
  EXPECT_NO_THROW(build_schedule(GraphSequence(static_exponential(8)), find_algorithm("dsgd", {}), std::nullopt));
  const MixingSchedule m = build_schedule(five, find_algorithm("push-pull", {}), std::nullopt);
  EXPECT_NEAR(m.pi(1), 2.0 / 17.0, 1e-12);
}

TEST(Run, InconsistentNodeCountsAndBadSettingsAreInputErrors) {
  const auto p = quadratics(4, 1);
  RunSpec s;
  s.iters = 3;
  EXPECT_NE(error_of([&] { run(*p, GraphSequence(ring(5)), s); }).find("inconsistent node counts"), std::string::npos);
  s.params.lr = -1;
  EXPECT_NE(error_of([&] { run(*p, GraphSequence(ring(4)), s); }).find("lr"), std::string::npos);
  s.params.lr = 0.1;
  s.algorithm = "gossip-sgd";
  EXPECT_NE(error_of([&] { run(*p, GraphSequence(ring(4)), s); }).find("unknown algorithm"), std::string::npos);
}

TEST(Run, SameSeedsGiveIdenticalMetricsAndSpreadIsOverSeeds) {
  const auto p = small_logistic(8);
  RunSpec s;
  s.algorithm = "push-pull";
  s.iters = 20;
  s.batch = 10;
  s.seeds = 3;
  s.eval_every = 10;
  const GraphSequence g = parse_topology("exponential:8", {});
  const RunResult a = run(*p, g, s);
  const RunResult b = run(*p, g, s);
  ASSERT_EQ(a.summary.size(), 3u);  // iterations 0, 10, 20
  for (size_t r = 0; r < 3; ++r) {
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(a.per_seed[r][k].grad_norm, b.per_seed[r][k].grad_norm);
  }
  EXPECT_NE(a.per_seed[0][2].grad_norm, a.per_seed[1][2].grad_norm);
  const SummaryPoint& f = a.summary.back();
  EXPECT_LE(f.grad_norm.min, f.grad_norm.mean);
  EXPECT_GE(f.grad_norm.max, f.grad_norm.mean);
  EXPECT_GT(f.grad_norm.std, 0);
  EXPECT_TRUE(std::isnan(f.accuracy.mean));
}

TEST(Run, GossipBytesAreOneMessagePerDirectedEdge) {
  // DSGD on ring:8 with d = 3: 16 directed edges x 3 doubles x 8 bytes = 384 bytes per step.
  const auto p = quadratics(8, 3);
  RunSpec s;
  s.algorithm = "dsgd";
  s.iters = 10;
  s.batch = 0;
  const RunResult r = run(*p, GraphSequence(ring(8)), s);
  EXPECT_DOUBLE_EQ(r.summary.back().bytes.mean, 3840.0);
  // Push-Pull sends x along A's edges and y along B's: twice as much.
  s.algorithm = "push-pull";
  EXPECT_DOUBLE_EQ(run(*p, GraphSequence(ring(8)), s).summary.back().bytes.mean, 7680.0);
}

TEST(Run, OnePeerExponentialGossipAveragesExactlyInOnePeriod) {
  // f = 0: DSGD is pure gossip, and tau = log2(16) = 4 rounds of (I + P_{2^s})/2 give 11^T/n exactly.
  QuadraticSpec q;
  for (int i = 0; i < 16; ++i) {
    q.h.push_back(0.0);
    q.b.push_back({0.0});
    q.x0.push_back({static_cast<double>(i * i)});
  }
  const auto p = make_quadratic(q);
  RunSpec s;
  s.algorithm = "dsgd";
  s.iters = 4;
  s.batch = 0;
  s.eval_every = 1;
  const RunResult r = run(*p, parse_topology("one-peer-exponential:16", {}), s);
  EXPECT_GT(r.summary[3].consensus.mean, 0.0);
  EXPECT_EQ(r.summary[4].consensus.mean, 0.0);
}

TEST(Tracking, PushPullAndPullDiagConserveTheirInvariantsWithStochasticGradients) {
  const auto p = small_logistic(10);
  const GraphSequence g(random_strongly_connected(10, 0.15, 2));
  for (const char* name : {"push-pull", "push-pull-atc", "push-diging", "pull-diag-gt"}) {
    const AlgorithmInfo& info = find_algorithm(name, {});
    const MixingSchedule mix = build_schedule(g, info, std::nullopt);
    GradientOracle oracle(*p, 20, 3);
    AlgoParams params;
    params.lr = 0.05;
    StepContext ctx{mix, oracle, params, RandomStream::derive(3, "decentral.algorithm")};
    auto alg = info.make();
    alg->init(p->initial_point(3), ctx);
    double worst = 0;
    for (int k = 0; k < 200; ++k) {
      alg->step(k, ctx);
      worst = std::max(worst, alg->conservation_error());
    }
    // Gradients are O(1) and 10 nodes sum them: rounding leaves ~1e-15 per step.
    EXPECT_LT(worst, 1e-12) << name;
  }
}

TEST(Tracking, TheTrackedSumSurvivesChurn) {
  // Under churn the runner rebuilds the mixing matrices on the present nodes each step (absent nodes keep
  // a self-loop of weight 1 and no edges, so every column still sums to 1) and an absent node's gradient
  // is zero. Column-stochastic tracking y+ = B y + g+ - g then keeps 1^T y+ = 1^T y + 1^T g+ - 1^T g,
  // so 1^T y = 1^T g holds at every step by induction, whichever nodes come and go; PULL-DIAG-GT keeps
  // its pi-weighted form the same way. 30% churn with 5 ms absences at 1 ms steps: nodes leave and
  // return many times in 300 steps. Rounding: O(1) gradients over 16 nodes, ~1e-15 per step.
  const auto p = small_logistic(16);
  const GraphSequence g(parse_topology("exponential:16", {}));
  for (const char* name : {"push-pull", "push-diging", "pull-diag-gt"}) {
    RunSpec s;
    s.algorithm = name;
    s.iters = 300;
    s.batch = 10;
    s.params.lr = 0.02;
    s.eval_every = 300;
    s.check_invariants = true;
    s.time.compute_per_sample = Time::us(100);
    s.time.hetero.churn = ChurnSpec{0.3, 0.005};
    const RunResult r = run(*p, g, s);
    EXPECT_LT(r.summary.back().participation.mean, 0.9) << name << ": churn did not take nodes away";
    EXPECT_LT(r.conservation_error_max, 1e-12) << name;
  }
}

TEST(Federated, OneLocalStepWithFullParticipationIsGradientDescentOnTheMean) {
  // Quadratics h_i = 1 + i, b_i = i (d = 1), x0 = 0: one FedAvg round with K = 1, server lr 1:
  // x1 = -a mean_i h_i (0 - b_i) = a mean(h_i b_i) = a (0 + 2 + 6 + 12) / 4 = 5 a.
  const auto p = quadratics(4, 1, 1.0);
  RunSpec s;
  s.algorithm = "fedavg";
  s.iters = 1;
  s.batch = 0;
  s.params.local_steps = 1;
  s.params.lr = 0.1;
  s.eval_every = 1;
  const RunResult r = run(*p, GraphSequence(Graph(4, {}, "clients")), s);
  Scratch sc;
  Eigen::VectorXd g(1);
  const double x1 = 0.5;
  const double f = full_objective(*p, &x1, g.data(), sc);
  EXPECT_DOUBLE_EQ(r.summary.back().loss.mean, f);
}

TEST(Federated, ScaffoldRemovesTheClientDriftThatBiasesFedAvg) {
  // Heterogeneous quadratics with 10 local steps: FedAvg's fixed point is biased away from the optimum
  // sum(h b)/sum(h); SCAFFOLD's control variates make it exact.
  const auto p = quadratics(4, 1, 1.0);
  RunSpec s;
  s.iters = 400;
  s.batch = 0;
  s.params.local_steps = 10;
  s.params.lr = 0.05;
  s.algorithm = "fedavg";
  const GraphSequence clients(Graph(4, {}, "clients"));
  const double fedavg = run(*p, clients, s).summary.back().grad_norm.mean;
  s.algorithm = "scaffold";
  const double scaffold = run(*p, clients, s).summary.back().grad_norm.mean;
  EXPECT_GT(fedavg, 1e-3);
  EXPECT_LT(scaffold, 1e-10);
}

TEST(Federated, AsynchronousArrivalsAdvanceSimulatedTimeAndConverge) {
  const auto p = quadratics(4, 1, 0.0);  // identical h = 1: every client pulls towards its own b_i
  RunSpec s;
  s.iters = 400;
  s.batch = 0;
  s.params.local_steps = 1;
  s.params.lr = 0.1;
  s.eval_every = 200;
  for (const char* name : {"fedasync", "fedbuff"}) {
    s.algorithm = name;
    const RunResult r = run(*p, GraphSequence(Graph(4, {}, "clients")), s);
    EXPECT_GT(r.summary[2].sim_time.mean, r.summary[1].sim_time.mean) << name;
    // Each arrival takes 1 local step at speed ~1 (mean 1 s, 4 clients in parallel): 400 arrivals take
    // about 100 s; allow a factor 2 for the lognormal speeds.
    EXPECT_GT(r.summary[2].sim_time.mean, 50.0) << name;
    EXPECT_LT(r.summary[2].sim_time.mean, 200.0) << name;
    // Loss at x = 1.5 (the optimum) is 0.5 mean (i - 1.5)^2 = 0.625; staleness keeps the server near it.
    EXPECT_LT(r.summary[2].loss.mean, 0.625 + 0.1) << name;
  }
}

TEST(Compression, ParseNamesAndBytes) {
  EXPECT_EQ(compressed_bytes(parse_compressor("none", {}), 100), 800);
  EXPECT_EQ(compressed_bytes(parse_compressor("top-k:0.1", {}), 100), 120);  // 10 x (8 + 4)
  EXPECT_EQ(compressed_bytes(parse_compressor("qsgd:4", {}), 100), 8 + 400 / 8);  // 9 levels: 4 bits each
  EXPECT_NE(error_of([] { parse_compressor("topk:0.1", Where{"", 0, "--compress"}); }).find("did you mean 'top-k'"),
            std::string::npos);
  EXPECT_THROW(parse_compressor("top-k:0", {}), InputError);
  EXPECT_THROW(parse_compressor("qsgd:1.5", {}), InputError);
  EXPECT_THROW(parse_compressor("rand-k", {}), InputError);
}

TEST(Summary, MeanSampleStdMinMax) {
  // Values 1, 2, 3, 6: mean 3, sample variance ((4 + 1 + 0 + 9) / 3) = 14/3.
  const Stat s = summarize({1, 2, 3, 6});
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(14.0 / 3.0));
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 6.0);
}

}  // namespace
}  // namespace orrery::decentral

namespace orrery::decentral {
namespace {

TEST(SyncClock, StepTimeIsComputePlusTheSlowestInNeighboursMessage) {
  // DSGD on ring:4, d = 1, batch 1 (exact: 1 sample per quadratic node). Compute 1 ms per sample, latency
  // 1 ms, bandwidth 8 kB/s: one message is 8 bytes = 1 ms. Identical nodes: every step takes
  // 1 + 1 + 1 = 3 ms, so 10 steps end at 30 ms.
  const auto p = quadratics(4, 1);
  RunSpec s;
  s.algorithm = "dsgd";
  s.iters = 10;
  s.batch = 1;
  s.time.compute_per_sample = Time::ms(1);
  s.time.latency = Time::ms(1);
  s.time.bandwidth = Bandwidth(8000.0);
  const RunResult r = run(*p, GraphSequence(ring(4)), s);
  EXPECT_NEAR(r.summary.back().sim_time.mean, 0.030, 1e-12);
  // One slow node gates everyone within its distance: with heterogeneous speeds the time per step is
  // at least the identical-node time, and the run is deterministic in the seed.
  s.time.speed_cv = 0.5;
  const double het = run(*p, GraphSequence(ring(4)), s).summary.back().sim_time.mean;
  EXPECT_EQ(het, run(*p, GraphSequence(ring(4)), s).summary.back().sim_time.mean);
  RunSpec untimed;
  untimed.algorithm = "dsgd";
  untimed.iters = 3;
  EXPECT_TRUE(std::isnan(run(*p, GraphSequence(ring(4)), untimed).summary.back().sim_time.mean));
}

}  // namespace
}  // namespace orrery::decentral
