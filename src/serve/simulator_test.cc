#include "serve/simulator.h"

#include <cmath>

#include <gtest/gtest.h>

#include "serve/test_support.h"
#include "serve/workload_spec.h"

namespace orrery::serve {
namespace {

using testing::request;
using testing::SimCase;

TEST(Simulator, RejectsRequestsLongerThanTheContextOrTheKvCapacityAndKeepsGoing) {
  SimCase c(1600, Time::ms(10));  // 100 blocks = 1600 tokens; Llama-2 context 4096
  testing::Log log;
  const SimResult r =
      c.run("vllm", {request(0, 0, 4000, 97), request(1, 0, 1500, 200), request(2, 0, 100, 3)}, &log);
  EXPECT_EQ(r.arrived, 3);
  EXPECT_EQ(r.rejected_context, 1);  // 4000 + 97 > 4096
  EXPECT_EQ(r.rejected_kv, 1);       // 1700 tokens > 1600
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(log.of(0).status, RequestStatus::kRejectedContext);
  EXPECT_EQ(log.of(1).status, RequestStatus::kRejectedKv);
  EXPECT_EQ(log.of(2).status, RequestStatus::kDone);
}

TEST(Simulator, SameStreamGivesTheSameResult) {
  auto run = [] {
    SimCase c(20000, Time::ms(8), 2e-6);
    const WorkloadSpec w = parse_workload_spec("prompt=lognormal:5:1:1:2000,output=uniform:1:200");
    auto src = make_workload(w, 30.0, 7, 2000);
    return c.run("vllm", *src);
  };
  const SimResult a = run(), b = run();
  EXPECT_EQ(a.completed, b.completed);
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_EQ(a.last_completion, b.last_completion);
  EXPECT_EQ(a.counters.preemptions, b.counters.preemptions);
  EXPECT_EQ(a.ttft.quantile(0.99), b.ttft.quantile(0.99));
}

TEST(Simulator, ConservesTokensAndStreamsInBoundedMemory) {
  // 200,000 requests at a stable rate: every request completes, and the replica never holds more than a
  // few hundred at once (the workload is pulled one request at a time).
  SimCase c(100000, Time::ms(5), 1e-7);
  const WorkloadSpec w = parse_workload_spec("prompt=64,output=8");
  auto src = make_workload(w, 200.0, 1, 200000);
  const SimResult r = c.run("vllm", *src);
  EXPECT_EQ(r.completed, 200000);
  EXPECT_EQ(r.input_tokens, 200000 * 64);
  EXPECT_EQ(r.output_tokens, 200000 * 8);
  // Decode tokens = output - 1 per request (the prefill emits the first); no restarts here.
  EXPECT_EQ(r.counters.decode_tokens, 200000 * 7);
  EXPECT_EQ(r.counters.prefill_tokens, 200000 * 64);
  EXPECT_LT(r.peak_held, 1000);
  EXPECT_LE(static_cast<int64_t>(r.samples.size()), c.options.max_samples);
  EXPECT_FALSE(r.ttft.is_exact());  // past 10^5 samples the sketch took over
}

TEST(Simulator, ThroughputMetricsFollowTheirDefinitions) {
  SimCase c(100000, Time::ms(10));
  // Two requests, back to back: A (100, 5) at 0 finishes at 50 ms; B (100, 3) at 1 s finishes at 1.03 s.
  const SimResult r = c.run("vllm", {request(0, 0, 100, 5), request(1, 1.0, 100, 3)});
  EXPECT_NEAR(r.duration_s, 1.03, 1e-9);
  EXPECT_NEAR(r.request_throughput, 2 / 1.03, 1e-9);
  EXPECT_NEAR(r.output_throughput, 8 / 1.03, 1e-9);
  EXPECT_NEAR(r.total_token_throughput, 208 / 1.03, 1e-9);
  EXPECT_EQ(r.good_requests, 2);
  // Busy 80 ms of 1.03 s; the KV holds blocks only while a request runs.
  EXPECT_NEAR(r.busy.to_seconds(), 0.08, 1e-9);
  EXPECT_GT(r.kv_utilization_mean, 0.0);
  EXPECT_LT(r.kv_utilization_mean, r.kv_utilization_max);
}

TEST(Simulator, GoodputCountsOnlyRequestsMeetingBothSlos) {
  SimCase c(100000, Time::ms(10));
  c.options.slo.ttft = Time::ms(15);
  // A's TTFT is 10 ms; B arrives with A and, with max_seqs 1, waits 50 ms: TTFT 60 ms > 15 ms.
  c.config.max_seqs = 1;
  const SimResult r = c.run("vllm", {request(0, 0, 100, 5), request(1, 0, 100, 5)});
  EXPECT_EQ(r.completed, 2);
  EXPECT_EQ(r.good_requests, 1);
}

}  // namespace
}  // namespace orrery::serve

namespace orrery::serve {
namespace {

TEST(TokenHistogram, WeightedAddsEqualRepeatedAddsAndQuantilesStayWithinAlpha) {
  TokenHistogram a, b;
  for (int i = 1; i <= 1000; ++i) {
    a.add(0.001 * i, 3);
    for (int k = 0; k < 3; ++k) b.add(0.001 * i);
  }
  EXPECT_EQ(a.count(), 3000);
  EXPECT_NEAR(a.mean(), 0.5005, 1e-12);  // mean of 0.001..1.000
  for (double q : {0.1, 0.5, 0.9, 0.99}) {
    EXPECT_EQ(a.quantile(q), b.quantile(q));
    // Rank floor(q x 2999) of the sorted values (each repeated 3 times): value 0.001 x (rank / 3 + 1).
    const double exact = 0.001 * (std::floor(std::floor(q * 2999) / 3) + 1);
    EXPECT_NEAR(a.quantile(q), exact, 0.005 * exact) << q;
  }
  EXPECT_DOUBLE_EQ(a.quantile(0), 0.001);
  EXPECT_DOUBLE_EQ(a.quantile(1), 1.0);
}

}  // namespace
}  // namespace orrery::serve
