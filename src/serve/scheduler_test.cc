// Schedulers on hand-traceable runs: the linear time model with d1 = 0 makes every iteration take
// exactly d0 = 10 ms, so each expected time below is a count of iterations.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include "serve/test_support.h"

namespace orrery::serve {
namespace {

using testing::request;
using testing::SimCase;

constexpr double kIt = 0.010;  // seconds per iteration

TEST(Vllm, OneRequestTakesOnePrefillAndOutputMinusOneDecodes) {
  SimCase c(100000, Time::ms(10));
  const SimResult r = c.run("vllm", {request(0, 0, 100, 5)});
  ASSERT_EQ(r.completed, 1);
  EXPECT_NEAR(r.ttft.mean(), kIt, 1e-12);      // the prefill iteration emits the first token
  EXPECT_NEAR(r.e2el.mean(), 5 * kIt, 1e-12);  // then 4 decode iterations
  EXPECT_NEAR(r.tpot.mean(), kIt, 1e-12);      // (50 - 10) ms / 4
  EXPECT_EQ(r.itl.count(), 4);
  EXPECT_EQ(r.iterations, 5);
}

TEST(Vllm, APrefillStallsRunningDecodesButSarathiMixesThem) {
  // A (prompt 100, output 10) at 0, B (prompt 100, output 2) at 5 ms.
  const std::vector<Request> reqs = {request(0, 0, 100, 10), request(1, 0.005, 100, 2)};
  testing::Log v, s;
  SimCase c(100000, Time::ms(10));
  c.run("vllm", reqs, &v);
  // vLLM: [0,10] A's prefill; [10,20] B's prefill alone; then both decode: A's tokens at 10, 30, 40, ...
  EXPECT_NEAR((v.of(1).first_token - v.of(1).arrival).to_seconds(), 0.015, 1e-12);
  EXPECT_NEAR(v.of(0).finish.to_seconds(), 0.030 + 8 * kIt, 1e-12);
  EXPECT_NEAR(v.of(1).finish.to_seconds(), 0.030, 1e-12);
  c.run("sarathi", reqs, &s);
  // Sarathi: [10,20] holds A's decode and B's 100-token prefill (within the 512 budget): no stall.
  EXPECT_NEAR(s.of(0).finish.to_seconds(), 10 * kIt, 1e-12);
  EXPECT_NEAR(s.of(1).finish.to_seconds(), 0.030, 1e-12);
}

TEST(Sarathi, ChunksALongPrefillToTheTokenBudget) {
  SimCase c(100000, Time::ms(10));
  c.config.chunk_size = 512;
  // 1000 prompt tokens = chunks of 512 and 488: the first token comes after 2 iterations.
  const SimResult r = c.run("sarathi", {request(0, 0, 1000, 2)});
  EXPECT_NEAR(r.ttft.mean(), 2 * kIt, 1e-12);
  EXPECT_NEAR(r.e2el.mean(), 3 * kIt, 1e-12);
}

TEST(Static, ABatchRunsToItsLongestRequestBeforeTheNextStarts) {
  SimCase c(100000, Time::ms(10));
  c.config.max_seqs = 2;
  testing::Log log;
  c.run("static", {request(0, 0, 10, 2), request(1, 0, 10, 5), request(2, 0, 10, 1)}, &log);
  EXPECT_NEAR(log.of(0).finish.to_seconds(), 2 * kIt, 1e-12);
  EXPECT_NEAR(log.of(1).finish.to_seconds(), 5 * kIt, 1e-12);
  // Request 2 waits for the whole first batch (5 iterations), then its prefill emits its only token.
  EXPECT_NEAR(log.of(2).finish.to_seconds(), 6 * kIt, 1e-12);
}

TEST(Vllm, MemoryPressurePreemptsTheNewestByRecomputeAndEveryRequestCompletes) {
  // 10 blocks of 16 tokens; 4 requests each growing to 32 + 40 = 72 tokens (5 blocks): 20 > 10.
  SimCase c(160, Time::ms(10));
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request(i, 0, 32, 40));
  const SimResult r = c.run("vllm", reqs);
  EXPECT_EQ(r.completed, 4);
  EXPECT_EQ(r.output_tokens, 160);
  EXPECT_GT(r.counters.restarts, 0);
  EXPECT_GT(r.counters.wasted_tokens, 0);
  EXPECT_EQ(r.counters.swap_outs, 0);
  EXPECT_EQ(r.unfinished, 0);
}

TEST(Vllm, SwapPreemptionKeepsTheWork) {
  SimCase c(160, Time::ms(10));
  c.config.preemption = Preemption::kSwap;
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request(i, 0, 32, 40));
  const SimResult r = c.run("vllm", reqs);
  EXPECT_EQ(r.completed, 4);
  EXPECT_GT(r.counters.swap_outs, 0);
  EXPECT_EQ(r.counters.swap_outs, r.counters.swap_ins);
  EXPECT_EQ(r.counters.restarts, 0);
  EXPECT_EQ(r.counters.wasted_tokens, 0);
}

TEST(Orca, ReservingWholeRequestsNeverPreempts) {
  SimCase c(160, Time::ms(10));
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request(i, 0, 32, 40));
  testing::Log log;
  const SimResult r = c.run("orca", reqs, &log);
  EXPECT_EQ(r.completed, 4);
  EXPECT_EQ(r.counters.preemptions, 0);
  // Two requests (5 blocks each) fit at once: requests 2 and 3 start when 0 and 1 finish at 40 iterations.
  EXPECT_NEAR(log.of(0).finish.to_seconds(), 40 * kIt, 1e-12);
  EXPECT_NEAR(log.of(3).finish.to_seconds(), 80 * kIt, 1e-12);
}

TEST(Sjf, ServesTheShortestOutputFirst) {
  SimCase c(100000, Time::ms(10));
  c.config.max_seqs = 1;
  // A starts alone at 0; C (output 5) arrives before B (output 2).
  const std::vector<Request> reqs = {request(0, 0, 10, 10), request(1, 0.001, 10, 5), request(2, 0.002, 10, 2)};
  testing::Log fcfs, sjf;
  c.run("vllm", reqs, &fcfs);
  c.run("sjf", reqs, &sjf);
  EXPECT_EQ(fcfs.entries[1].id, 1);
  EXPECT_EQ(sjf.entries[1].id, 2);
  EXPECT_EQ(sjf.entries[2].id, 1);
}

TEST(Wait, TheServerWaitsUntilATypeIsEligible) {
  SimCase c(100000, Time::ms(10));
  c.config.types = {{2.0, 10.0, 3.0, 3}};
  c.config.wait_thresholds = {2};
  testing::Log log;
  // r0, r1, r2 at 0; r3 at 1 s. [0, 10 ms]: prefills of r0 and r1. At 10 ms one prompt waits (< 2) and
  // the stream is not exhausted: the server idles, r0 and r1 keep their KV. At 1 s r3 arrives: the batch
  // takes stage 1 (r0, r1) and stage 0 (r2, r3).
  c.run("wait", {request(0, 0, 10, 3), request(1, 0, 10, 3), request(2, 0, 10, 3), request(3, 1.0, 10, 3)}, &log);
  EXPECT_NEAR(log.of(0).first_token.to_seconds(), kIt, 1e-12);
  EXPECT_NEAR(log.of(0).finish.to_seconds(), 1.0 + 2 * kIt, 1e-9);
  EXPECT_NEAR(log.of(2).first_token.to_seconds(), 1.0 + kIt, 1e-9);
  EXPECT_NEAR(log.of(3).finish.to_seconds(), 1.0 + 3 * kIt, 1e-9);
}

TEST(NestedWait, CompletesAMixedWorkload) {
  SimCase c(100000, Time::ms(10), 1e-6);
  c.config.nested_cap = 40;
  c.config.nested_segments = 2;
  c.config.max_output = 50;
  std::vector<Request> reqs;
  for (int i = 0; i < 200; ++i) reqs.push_back(request(i, 0.02 * i, 100, i % 3 == 0 ? 50 : 20));
  const SimResult r = c.run("nested-wait", reqs);
  EXPECT_EQ(r.completed, 200);
  EXPECT_EQ(r.unfinished, 0);
  EXPECT_EQ(r.counters.restarts, 0);
}

TEST(NestedWait, PromptsPausedAtAnEntryRunWhenTheCacheCannotAdmitMore) {
  // KV of 4 blocks of 16 tokens; prompts of 10 tokens with 4 output tokens hold one block each, so at most
  // 4 are resident. Two segments over [0, 4] (entries at stages 0 and 2); tl = 40 with p = 1 (fewer than 32
  // prompts seen): n_1 = 40 / (2 + 2 x 0.99) = 10.05 -> 10, n_2 = round(10.05 x 0.99) = 10. One arrival
  // per 100 ms from t = 0 (40 prompts, the last at 3.9 s), 10 ms iterations.
  // At 0.9 s ten prompts wait: segment 1 runs and 4 fit (prefill [0.90, 0.91]). Then 6 wait (< 10) and the
  // cache is full. By the paper's rule alone the 4 would wait at stage 1 until ten wait again (1.3 s),
  // move to stage 2, the entry of segment 2, and stay there: they can never be 10 (only 4 fit) and no new
  // prompt fits either, so they would finish only when the stream ends (3.8-3.9 s). With the liveness rule
  // (cache full -> every entry counts as met) they run on at once: three more 10 ms iterations, the last
  // token at 0.9 + 4 x 0.01 = 0.94 s.
  SimCase c(64, Time::ms(10));
  c.config.nested_cap = 40;
  c.config.nested_segments = 2;
  c.config.max_output = 4;
  std::vector<Request> reqs;
  for (int i = 0; i < 40; ++i) reqs.push_back(request(i, 0.1 * i, 10, 4));
  testing::Log log;
  const SimResult r = c.run("nested-wait", reqs, &log);
  EXPECT_EQ(r.completed, 40);
  EXPECT_NEAR(log.of(0).finish.to_seconds(), 0.94, 1e-9);
}

TEST(SchedulerRegistry, NamesEveryScheduler) {
  std::vector<std::string> names;
  for (const auto& s : scheduler_registry()) {
    names.push_back(s.name);
    EXPECT_FALSE(s.citation.empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"static", "orca", "vllm", "sarathi", "sjf", "wait", "nested-wait"}));
  EXPECT_THROW(make_scheduler("vlm", SchedulerConfig{}), InputError);
  EXPECT_THROW(make_scheduler("wait", SchedulerConfig{}), InputError);  // needs the workload's types
  SchedulerConfig bad;
  bad.max_seqs = 0;
  EXPECT_THROW(make_scheduler("vllm", bad), InputError);
}

}  // namespace
}  // namespace orrery::serve
