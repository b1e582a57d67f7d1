#include "serve/capacity.h"

#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "serve/test_support.h"

namespace orrery::serve {
namespace {

using testing::ListSource;
using testing::request;

TEST(FindMaxRate, BisectsToAKnownThresholdOfAMonotoneProbe) {
  // ok(r) = r <= 7.3. From 1: doubling probes 1, 2, 4 (ok) and 8 (fails); bisection of [4, 8] at the
  // midpoints 6 (ok), 7 (ok), 7.5 (fails), 7.25 (ok), 7.375 (fails), 7.3125 (fails): 7.3125 / 7.25 - 1 =
  // 0.86% <= 1%, stop. 10 probes; the threshold lies in [max_ok, min_fail].
  std::vector<double> seen;
  const RateSearch s = find_max_rate([&](double r) { seen.push_back(r); return r <= 7.3; }, 1.0, 0.01, 1e-3, 1e6);
  EXPECT_EQ(seen, (std::vector<double>{1, 2, 4, 8, 6, 7, 7.5, 7.25, 7.375, 7.3125}));
  EXPECT_EQ(s.probes, 10);
  EXPECT_DOUBLE_EQ(s.max_ok, 7.25);
  EXPECT_DOUBLE_EQ(s.min_fail, 7.3125);
  EXPECT_LE(s.max_ok, 7.3);
  EXPECT_GT(s.min_fail, 7.3);
}

TEST(FindMaxRate, HalvesWhenTheStartFails) {
  // ok(r) = r <= 0.3 from 1: 1, 0.5 fail, 0.25 ok; then [0.25, 0.5] bisected to 1%.
  const RateSearch s = find_max_rate([](double r) { return r <= 0.3; }, 1.0, 0.01, 1e-3, 1e6);
  EXPECT_LE(s.max_ok, 0.3);
  EXPECT_GT(s.min_fail, 0.3);
  EXPECT_LE(s.min_fail / s.max_ok - 1.0, 0.01);
}

TEST(FindMaxRate, ReportsNothingWhenNoRateDownToTheFloorPasses) {
  // 1, 0.5, 0.25, 0.125 (the next, 0.0625, is below the floor 0.1).
  const RateSearch s = find_max_rate([](double) { return false; }, 1.0, 0.01, 0.1, 1e6);
  EXPECT_EQ(s.max_ok, 0.0);
  EXPECT_EQ(s.probes, 4);
  EXPECT_DOUBLE_EQ(s.min_fail, 0.125);
}

TEST(FindMaxRate, StopsAtTheCeiling) {
  // 1, 2, 4, 8, 10 (the ceiling) all pass.
  const RateSearch s = find_max_rate([](double) { return true; }, 1.0, 0.01, 0.1, 10.0);
  EXPECT_EQ(s.max_ok, 10.0);
  EXPECT_EQ(s.min_fail, 0.0);
  EXPECT_EQ(s.probes, 5);
}

TEST(Slo, ParsesNamesQuantilesAndTimes) {
  const SloBound b = parse_slo("ttft-p90", "2s");
  EXPECT_EQ(b.metric, SloMetric::kTtft);
  EXPECT_EQ(b.quantile, 0.9);
  EXPECT_EQ(b.limit, Time::seconds(2.0));
  EXPECT_EQ(b.name(), "ttft-p90");
  const SloBound c = parse_slo("TPOT-p99", "200 ms");
  EXPECT_EQ(c.metric, SloMetric::kTpot);
  EXPECT_EQ(c.quantile, 0.99);
  EXPECT_EQ(c.limit, Time::ms(200));
  EXPECT_EQ(parse_slo("e2e-p50", "1.5s").name(), "e2e-p50");
  EXPECT_EQ(slo_names().size(), 9u);  // 3 metrics x 3 quantiles
  const std::vector<SloBound> list = parse_slo_list("ttft-p90=2s, tpot-p99=200ms");
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].name(), "tpot-p99");
  EXPECT_TRUE(parse_slo_list("").empty());
}

TEST(Slo, RejectsBadNamesAndValuesWithAHint) {
  try {
    parse_slo("ttft-p95", "2s", Where{"<command line>", 0, "--slo"});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown SLO 'ttft-p95'"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("ttft-p9"), std::string::npos) << e.hint();  // nearest: ttft-p90 or ttft-p99
  }
  EXPECT_THROW(parse_slo("latency-p90", "2s"), InputError);
  EXPECT_THROW(parse_slo("ttft-p90", "2"), InputError);       // no unit
  EXPECT_THROW(parse_slo("ttft-p90", "0 s"), InputError);     // not positive
  EXPECT_THROW(parse_slo("ttft-p90", "-1 s"), InputError);
  EXPECT_THROW(parse_slo("ttft-p90", "2 parsecs"), InputError);
  EXPECT_THROW(parse_slo_list("ttft-p90:2s"), InputError);    // NAME=TIME expected
}

// Requests of 16 prompt tokens and 1 output token at exactly k / rate: under the linear model with
// d1 = 0 and d0 = 10 ms every iteration takes 10 ms whatever its batch. At rate <= 100/s a request
// finds the server idle: e2e = 10 ms. Above 100/s the gap g < 10 ms and request k waits k (10 - g)
// (mod about g) before it runs alone or with another: the delays sweep [0, g), so more than 1% of them
// exceed 5 ms and e2e-p99 > 15 ms. The SLO e2e-p99 <= 15 ms holds exactly up to 100 req/s.
struct EvenCase {
  model::ModelSpec model = testing::llama2_7b();
  hw::GpuSpec gpu = testing::a100_80gb();
  CapacityOptions options;
  WorkloadFactory workload = [](double rate) {
    std::vector<Request> rs;
    for (int64_t k = 0; k < 400; ++k) rs.push_back(request(k, static_cast<double>(k) / rate, 16, 1));
    return std::unique_ptr<RequestSource>(std::make_unique<ListSource>(std::move(rs)));
  };
  EvenCase() {
    options.slos = {parse_slo("e2e-p99", "15ms")};
    options.base.kv_tokens_override = 100000;
    options.base.watermark = 0.0;
    options.exec_model = "linear";
    options.exec.d0 = Time::ms(10);
    options.exec.d1_s = 0.0;
    options.rel_tol = 0.01;
  }
  CapacityConfig config(int64_t replicas, double price) const {
    CapacityConfig c;
    c.gpu = &gpu;
    c.scheduler = "vllm";
    c.replicas = replicas;
    c.usd_per_gpu_hour = price;
    return c;
  }
};

TEST(MeasureRun, AFlatBacklogIsNotStable) {
  // One sequence per iteration (max_seqs 1) of 10 ms (linear model, d1 = 0): the server completes exactly
  // 100 requests/s. 300 requests at t = 0, then one every 10 ms for 4 s: the backlog of ~300 never
  // drains (critical load), so every later request waits ~3 s and TTFT against arrival is flat (slope
  // ~0). The arrival window is 4 s, its warm-up quarter 1 s: a mean TTFT of ~3 s exceeds it. The same
  // stream without the burst (one every 10 ms) waits nothing and is stable.
  testing::SimCase c(100000, Time::ms(10));
  c.config.max_seqs = 1;
  auto run = [&](int64_t burst) {
    std::vector<Request> rs;
    for (int64_t k = 0; k < burst; ++k) rs.push_back(request(k, 0.0, 16, 1));
    for (int64_t k = 0; k < 400; ++k) rs.push_back(request(burst + k, 0.01 * static_cast<double>(k + 1), 16, 1));
    ListSource src(std::move(rs));
    const std::unique_ptr<Scheduler> s = make_scheduler("vllm", c.config);
    const std::unique_ptr<ExecModel> exec = make_exec_model("linear", c.ctx);
    return measure_run(src, c.spec, plan_memory(c.spec), *s, *exec);
  };
  const RunMetrics flat = run(300);
  // Request k of the stream arrives at 0.01 (k + 1) with 300 + k requests ahead of it, served one per
  // 10 ms from t = 0: it finishes at 0.01 (301 + k), TTFT exactly 3 s for every one: slope 0, which the
  // slope test alone passes.
  EXPECT_NEAR(flat.latency_slope, 0.0, 1e-9);
  EXPECT_NEAR(flat.ttft.mean(), 3.0, 1e-6);
  EXPECT_FALSE(flat.stable);
  // Without the burst request k runs alone from its arrival: TTFT 10 ms.
  const RunMetrics even = run(0);
  EXPECT_NEAR(even.ttft.mean(), 0.01, 1e-6);
  EXPECT_TRUE(even.stable);
}

TEST(Capacity, FindsTheRateAtWhichTheSloStartsToFail) {
  EvenCase c;
  const CapacityResult r = evaluate_capacity(c.model, c.config(1, 2.0), c.workload, c.options);
  ASSERT_TRUE(r.feasible) << r.reason;
  // Bisection of [64, 128] (the doubling 1..128) ends with 100 ok and 101 failing (1% apart).
  EXPECT_DOUBLE_EQ(r.rate, 100.0);
  EXPECT_EQ(r.limit, "e2e-p99");
  EXPECT_NEAR(r.at_capacity.value(SloMetric::kE2e, 0.99), 0.010, 1e-9);
  EXPECT_TRUE(r.at_capacity.stable);
  EXPECT_EQ(r.kv_tokens, 100000);
  // Cost by hand: 1 GPU x $2/h = $2/h at 100 req/s = 360,000 req/h: 2 / 360000 x 1e6 = $5.5556 per 1M.
  EXPECT_DOUBLE_EQ(r.usd_per_hour, 2.0);
  EXPECT_NEAR(r.usd_per_million, 2.0 / 360000.0 * 1e6, 1e-9);
}

TEST(Capacity, ReplicasMultiplyTheRateAndTheGpuHoursButNotTheCostPerRequest) {
  EvenCase c;
  CapacityConfig cfg = c.config(3, 2.0);
  cfg.tp = 2;  // 32 heads: TP 2 is valid; the linear model ignores it
  const CapacityResult r = evaluate_capacity(c.model, cfg, c.workload, c.options);
  ASSERT_TRUE(r.feasible) << r.reason;
  // Round-robin over 3 replicas gives each every third request of the evenly spaced stream: spacing
  // 3 / rate, so each replica is the one-replica case at rate / 3: 100 req/s per replica, 300 in all. GPUs: 2 x 3 = 6, $12/h;
  // 12 / (3600 x 300) x 1e6 = $11.111 per 1M requests (twice the TP-1 cost: twice the GPUs per replica).
  EXPECT_NEAR(r.rate_per_replica, 100.0, 1e-9);
  EXPECT_NEAR(r.rate, 300.0, 1e-9);
  EXPECT_DOUBLE_EQ(r.usd_per_hour, 12.0);
  EXPECT_NEAR(r.usd_per_million, 12.0 / (3600.0 * 300.0) * 1e6, 1e-9);
}

// Two requests at once every 2 / rate seconds (pairs), 2 replicas, the EvenCase timing (every iteration
// 10 ms whatever its batch). Round-robin gives each replica one request of every pair, one per 2 / rate
// s: it meets e2e-p99 <= 15 ms exactly while 2 / rate >= 10 ms, i.e. up to 200 req/s in all. The old
// approximation (one replica at rate / 2: the pairs every 4 / rate s, each pair batched in one 10 ms
// iteration) would have allowed 400 req/s; the router's real split is what is simulated.
TEST(Capacity, ReplicasRunBehindTheRouterNotAsOneReplicaAtAFractionOfTheRate) {
  EvenCase c;
  c.workload = [](double rate) {
    std::vector<Request> rs;
    for (int64_t k = 0; k < 400; ++k) rs.push_back(request(k, static_cast<double>(k / 2) * 2.0 / rate, 16, 1));
    return std::unique_ptr<RequestSource>(std::make_unique<ListSource>(std::move(rs)));
  };
  const CapacityResult r = evaluate_capacity(c.model, c.config(2, 2.0), c.workload, c.options);
  ASSERT_TRUE(r.feasible) << r.reason;
  // Bisection to 1% from the doubling 1 .. 256: the bracket ends within [200, 202).
  EXPECT_GE(r.rate, 200.0 * (1.0 - 1e-9));
  EXPECT_LT(r.rate, 202.0);
  EXPECT_EQ(r.limit, "e2e-p99");
  // With no router (the approximation) the pairs batch together: twice the rate. At exactly 400 the
  // arrivals, rescaled by 1/2 (x 2 in time), can land a nanosecond before the previous iteration ends,
  // so the boundary probe itself may fail: the bracket then ends at [398, 400).
  CapacityConfig split = c.config(2, 2.0);
  split.router.clear();
  const CapacityResult s = evaluate_capacity(c.model, split, c.workload, c.options);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_GE(s.rate, 396.0);
  EXPECT_LT(s.rate, 404.0);
}

TEST(Capacity, AnUnreachableSloOrAModelThatDoesNotFitIsInfeasibleWithAReason) {
  EvenCase c;
  c.options.slos = {parse_slo("e2e-p50", "5ms")};  // below one iteration (10 ms): never met
  const CapacityResult r = evaluate_capacity(c.model, c.config(1, 2.0), c.workload, c.options);
  EXPECT_TRUE(r.fits);
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.reason.find("e2e-p50"), std::string::npos) << r.reason;
  EXPECT_TRUE(std::isnan(r.usd_per_million));

  EvenCase small;
  small.options.base.kv_tokens_override = 0;
  small.gpu.memory = Bytes::GiB(8);  // 13.5 GB of fp16 weights do not fit in 8 GiB
  const CapacityResult s = evaluate_capacity(small.model, small.config(1, 2.0), small.workload, small.options);
  EXPECT_FALSE(s.fits);
  EXPECT_FALSE(s.feasible);
  EXPECT_FALSE(s.reason.empty());

  CapacityConfig bad = c.config(1, 2.0);
  bad.tp = 3;  // does not divide the 32 heads
  const CapacityResult b = evaluate_capacity(c.model, bad, c.workload, c.options);
  EXPECT_FALSE(b.fits);
  EXPECT_NE(b.reason.find("heads"), std::string::npos) << b.reason;
}

TEST(Capacity, RankingIsByCostThenCapacityWhateverTheThreadCount) {
  EvenCase c;
  std::vector<CapacityConfig> configs = {c.config(1, 4.0), c.config(1, 2.0), c.config(1, 0.0), c.config(2, 2.0)};
  configs[0].tp = 2;
  c.options.threads = 1;
  const std::vector<CapacityResult> one = plan_capacity(c.model, configs, c.workload, c.options);
  c.options.threads = 3;
  const std::vector<CapacityResult> three = plan_capacity(c.model, configs, c.workload, c.options);
  // Costs per 1M: #1 and #3 $5.556 (tie broken by capacity: #3 has 200 req/s), #0 $4 x 2 GPUs / 100 req/s
  // = $22.2, #2 unpriced (last among the feasible).
  std::vector<size_t> order;
  for (const CapacityResult& r : one) order.push_back(r.index);
  EXPECT_EQ(order, (std::vector<size_t>{3, 1, 0, 2}));
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].index, three[i].index);
    EXPECT_EQ(one[i].rate, three[i].rate);
    EXPECT_EQ(one[i].probes, three[i].probes);
  }
}

TEST(Capacity, WithoutAnSloTheCapacityIsTheLargestStableRate) {
  // One sequence per iteration (max_seqs 1) of 10 ms (linear model, d1 = 0): the server completes exactly
  // 100 requests/s. At r <= 100 req/s every request finds it idle (TTFT 10 ms, slope 0); above, the
  // backlog grows and TTFT rises against arrival time with slope 1 - 100 / r, 0.0099 s/s at 101 > the
  // 0.005 of serve/capacity.h. The doubling 1..128 and bisection to 1% end at 100 ok, 101 unstable.
  EvenCase c;
  c.options.slos.clear();
  CapacityConfig cfg = c.config(1, 2.0);
  cfg.max_seqs = 1;
  const CapacityResult r = evaluate_capacity(c.model, cfg, c.workload, c.options);
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_DOUBLE_EQ(r.rate, 100.0);
  EXPECT_EQ(r.limit, "unstable");
  EXPECT_TRUE(r.at_capacity.stable);
  // plan_capacity accepts no SLO too (it used to refuse).
  EXPECT_EQ(plan_capacity(c.model, {cfg}, c.workload, c.options).front().rate, 100.0);
}

TEST(Capacity, AProfileTableServesEveryConfigurationAndRulesOutTheTpDegreesItLacks) {
  // A measured per-layer table for TP 1 only: its configurations read their own copy (two identical
  // ones on two threads give the same capacity); TP 2 is infeasible with the table's reason, not an
  // error for the whole plan.
  EvenCase c;
  c.options.exec_model = "vidur-profile";
  c.options.profile_text = std::make_shared<const std::string>(
      "num_tokens,num_tensor_parallel_workers,time_stats.emb.median,time_stats.attn_pre_proj.median\n"
      "1,1,0.01,0.3\n512,1,0.02,1.0\n");
  c.options.profile_name = "mlp.csv";
  c.options.threads = 2;
  CapacityConfig tp2 = c.config(1, 2.0);
  tp2.tp = 2;
  const std::vector<CapacityResult> r = plan_capacity(c.model, {c.config(1, 2.0), c.config(1, 2.0), tp2}, c.workload, c.options);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].feasible) << r[0].reason;
  EXPECT_EQ(r[0].rate, r[1].rate);
  EXPECT_FALSE(r[2].fits);
  EXPECT_NE(r[2].reason.find("no row for TP 2"), std::string::npos) << r[2].reason;
}

TEST(WorkloadStats, RatesAndMeanLengthsPerType) {
  // 5 requests over 2 s: rate (5 - 1) / 2 = 2/s; types 0 (3 of 5) and 1 (2 of 5): 1.2 and 0.8 req/s.
  ListSource src({request(0, 0.0, 10, 4, 0), request(1, 0.5, 20, 6, 1), request(2, 1.0, 30, 8, 0),
                  request(3, 1.5, 40, 10, 1), request(4, 2.0, 50, 12, 0)});
  const WorkloadStats st = workload_stats(src, 100);
  EXPECT_EQ(st.requests, 5);
  EXPECT_DOUBLE_EQ(st.rate, 2.0);
  ASSERT_EQ(st.types.size(), 2u);
  EXPECT_DOUBLE_EQ(st.types[0].rate, 1.2);
  EXPECT_DOUBLE_EQ(st.types[0].prompt, 30.0);  // (10 + 30 + 50) / 3
  EXPECT_DOUBLE_EQ(st.types[1].output, 8.0);   // (6 + 10) / 2
  EXPECT_EQ(st.max_output, 12);
  EXPECT_DOUBLE_EQ(st.mean_prompt, 30.0);
}

}  // namespace
}  // namespace orrery::serve
