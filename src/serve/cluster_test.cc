#include "serve/cluster.h"

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "serve/test_support.h"
#include "serve/workload_spec.h"

namespace orrery::serve {
namespace {

using testing::ListSource;
using testing::request;

// Every request record with the replica that finished it.
class ReplicaLog final : public SimObserver {
 public:
  struct Entry {
    int64_t id;
    RequestStatus status;
    Time first_token, finish;
    int32_t replica, prefill_replica;
  };
  void on_request(const RequestRecord& r) override {
    entries.push_back({r.request->id, r.status, r.first_token, r.finish, r.replica, r.prefill_replica});
  }
  const Entry& of(int64_t id) const {
    for (const Entry& e : entries) {
      if (e.id == id) return e;
    }
    throw std::runtime_error("no record for request " + std::to_string(id));
  }
  std::vector<Entry> entries;
};

// Llama-2-7B on A100-80GB replicas with the linear model d0 + d1 x KV tokens (test_support.h), so that
// every expected time below is a count of iterations.
struct ClusterCase {
  model::ModelSpec model = testing::llama2_7b();
  hw::GpuSpec gpu = testing::a100_80gb();
  std::vector<std::unique_ptr<ExecModel>> execs;
  ClusterSpec spec;
  SimOptions options;

  PoolSpec& add_pool(ReplicaRole role, int64_t replicas, int64_t kv_tokens, Time d0, double d1_s = 0.0) {
    PoolSpec p;
    p.role = role;
    p.replicas = replicas;
    p.replica.model = &model;
    p.replica.gpu = &gpu;
    p.replica.kv_tokens_override = kv_tokens;
    p.replica.watermark = 0.0;
    p.plan = plan_memory(p.replica);
    ExecContext ctx;
    ctx.replica = &p.replica;
    ctx.d0 = d0;
    ctx.d1_s = d1_s;
    execs.push_back(make_exec_model("linear", ctx));
    p.exec = execs.back().get();
    // One GPU per node, 50 GB/s and 10 us to any other: every transfer crosses the network.
    p.link.gpu = gpu.name;
    p.link.gpus_per_node = 1;
    p.link.network_per_gpu = Bandwidth(50e9);
    p.link.network_latency = Time::us(10);
    p.link.scaleup_per_gpu = Bandwidth(240e9);
    p.link.scaleup_latency = Time::us(7);
    spec.pools.push_back(std::move(p));
    return spec.pools.back();
  }
  ClusterResult run(std::vector<Request> requests, SimObserver* obs = nullptr) {
    ListSource src(std::move(requests));
    spec.validate();
    return simulate_cluster(src, spec, options, obs);
  }
};

std::vector<Request> drain(RequestSource& src) {
  std::vector<Request> out;
  while (std::optional<Request> r = src.next()) out.push_back(std::move(*r));
  return out;
}

TEST(Cluster, RoundRobinOverIdenticalReplicasEqualsIndependentRunsOnTheThinnedStreams) {
  // Round-robin sends request k to replica k mod N, and replicas share nothing but the clock, so each
  // replica of the cluster must behave exactly as a lone replica fed every N-th request. Poisson
  // arrivals (no two requests, and no arrival and iteration end, at the same picosecond) and a
  // load that makes vLLM batch, preempt and restart.
  const int64_t n = 3;
  const WorkloadSpec w = parse_workload_spec("prompt=lognormal:6:0.8:16:1500,output=lognormal:4:1:2:400");
  auto src = make_workload(w, 45.0, 11, 900);
  const std::vector<Request> all = drain(*src);

  ClusterCase c;
  c.add_pool(ReplicaRole::kFull, n, 12000, Time::ms(8), 2e-6);
  ReplicaLog log;
  const ClusterResult cr = c.run(all, &log);

  int64_t preemptions = 0, completed = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<Request> part;
    for (size_t k = static_cast<size_t>(i); k < all.size(); k += static_cast<size_t>(n)) part.push_back(all[k]);
    testing::SimCase one(12000, Time::ms(8), 2e-6);
    testing::Log one_log;
    const SimResult r = one.run("vllm", part, &one_log);
    const ReplicaSummary& rep = cr.replicas[static_cast<size_t>(i)];
    EXPECT_EQ(rep.stats.iterations, r.iterations) << "replica " << i;
    EXPECT_EQ(rep.counters.preemptions, r.counters.preemptions) << "replica " << i;
    EXPECT_EQ(rep.stats.finished, r.completed) << "replica " << i;
    for (const testing::Log::Entry& e : one_log.entries) {
      const ReplicaLog::Entry& ce = log.of(e.id);
      EXPECT_EQ(ce.replica, i) << "request " << e.id;
      EXPECT_EQ(ce.first_token, e.first_token) << "request " << e.id;
      EXPECT_EQ(ce.finish, e.finish) << "request " << e.id;
    }
    preemptions += r.counters.preemptions;
    completed += r.completed;
  }
  EXPECT_GT(preemptions, 0);  // the case exercises eviction
  EXPECT_EQ(cr.total.counters.preemptions, preemptions);
  EXPECT_EQ(cr.total.completed, completed);
}

TEST(Cluster, HeterogeneousPoolsKeepTheirOwnTimeModels) {
  // A pool of one 10 ms replica and a pool of one 20 ms replica behind round-robin: r0 (t = 0, output
  // 3) runs 3 iterations on replica 0 and finishes at 30 ms; r1 (t = 1 ms, output 3) on replica 1 at
  // 1 + 3 x 20 = 61 ms.
  ClusterCase c;
  c.add_pool(ReplicaRole::kFull, 1, 10000, Time::ms(10));
  c.add_pool(ReplicaRole::kFull, 1, 10000, Time::ms(20));
  ReplicaLog log;
  const ClusterResult r = c.run({request(0, 0.0, 100, 3), request(1, 0.001, 100, 3)}, &log);
  EXPECT_EQ(log.of(0).replica, 0);
  EXPECT_EQ(log.of(0).finish, Time::ms(30));
  EXPECT_EQ(log.of(1).replica, 1);
  EXPECT_EQ(log.of(1).finish, Time::ms(61));
  EXPECT_EQ(r.replicas[1].pool, 1);
}

TEST(Cluster, LeastOutstandingBeatsRoundRobinOnSkewedLengths) {
  // Two replicas that run one request at a time (max_seqs 1) with 10 ms iterations: a request of L
  // output tokens holds its replica for L iterations (the prefill emits the first token).
  // r0 (t=0, L=100), r1 (1 ms, 2), r2 (30 ms, 2), r3 (60 ms, 2), r4 (90 ms, 2).
  //   round-robin: r0, r2, r4 on replica 0; r1, r3 on replica 1.
  //     r0 0..1000, r2 waits for r0: 1000..1020 (E2EL 990), r4 1020..1040 (E2EL 950);
  //     r1 1..21 (20), r3 60..80 (20).  Mean E2EL (1000 + 20 + 990 + 20 + 950) / 5 = 596 ms.
  //   least-outstanding: r0 -> 0 (tie, lowest index); r1 -> 1; r2, r3, r4 find replica 1 empty
  //     (r1 ended at 21 ms, each later one 20 ms after its start): E2EL 20 each.
  //     Mean (1000 + 4 x 20) / 5 = 216 ms.
  const std::vector<Request> reqs = {request(0, 0.0, 100, 100), request(1, 0.001, 100, 2), request(2, 0.030, 100, 2),
                                     request(3, 0.060, 100, 2), request(4, 0.090, 100, 2)};
  auto run = [&](const std::string& router, ReplicaLog& log) {
    ClusterCase c;
    c.add_pool(ReplicaRole::kFull, 2, 10000, Time::ms(10)).scheduler_config.max_seqs = 1;
    c.spec.router = router;
    return c.run(reqs, &log).total;
  };
  ReplicaLog rr_log, lo_log;
  const SimResult rr = run("round-robin", rr_log);
  const SimResult lo = run("least-outstanding", lo_log);
  EXPECT_NEAR(rr.e2el.mean(), 0.596, 1e-9);
  EXPECT_NEAR(lo.e2el.mean(), 0.216, 1e-9);
  EXPECT_EQ(rr_log.of(2).replica, 0);
  EXPECT_EQ(rr_log.of(2).finish, Time::ms(1020));
  EXPECT_EQ(rr_log.of(4).finish, Time::ms(1040));
  for (int64_t id : {1, 2, 3, 4}) EXPECT_EQ(lo_log.of(id).replica, 1) << id;
  EXPECT_EQ(lo_log.of(4).finish, Time::ms(110));
}

TEST(Cluster, PrefixAwareRoutingKeepsAPrefixOnOneReplicaAndHitsAtLeastAsOftenAsRoundRobin) {
  // Two prefixes A = (1, 2, 3) and B = (7, 8, 9), 3 units of 512 tokens each, prompts of 1,600 tokens,
  // arriving A A B B A A B B one second apart (each done long before the next: no load imbalance, no
  // eviction with 100,000 KV tokens). A request reuses at most floor((1600 - 1) / 512) = 3 units =
  // 1,536 tokens of a cached prefix.
  //   round-robin: A->0, A->1, B->0, B->1, ...: each replica misses each prefix once (4 misses), so
  //     4 of the 8 requests hit: 4 x 1536 = 6,144 tokens.
  //   prefix-aware: the first A goes to replica 0 (no match; equal loads, lowest index), the first
  //     B too (no match; both idle, cached units are not in use); every later request matches 3 units
  //     there (1536 > 0.5 x
  //     1600): 6 hits, 9,216 tokens, and every A and every B on one replica.
  std::vector<Request> reqs;
  const char pattern[] = "AABBAABB";
  for (int i = 0; i < 8; ++i) {
    Request r = request(i, i * 1.0, 1600, 2);
    r.prefix_blocks = pattern[i] == 'A' ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{7, 8, 9};
    reqs.push_back(r);
  }
  auto run = [&](const std::string& router, ReplicaLog& log) {
    ClusterCase c;
    c.add_pool(ReplicaRole::kFull, 2, 100000, Time::ms(10));
    c.spec.router = router;
    return c.run(reqs, &log).total;
  };
  ReplicaLog rr_log, pa_log;
  const SimResult rr = run("round-robin", rr_log);
  const SimResult pa = run("prefix-aware", pa_log);
  EXPECT_EQ(rr.counters.prefix_hit_tokens, 4 * 1536);
  EXPECT_EQ(pa.counters.prefix_hit_tokens, 6 * 1536);
  EXPECT_GE(pa.counters.prefix_hit_tokens, rr.counters.prefix_hit_tokens);
  std::map<char, std::set<int32_t>> where;
  for (int i = 0; i < 8; ++i) where[pattern[i]].insert(pa_log.of(i).replica);
  EXPECT_EQ(where['A'].size(), 1u);
  EXPECT_EQ(where['B'].size(), 1u);
}

TEST(Cluster, DisaggregatedTtftIsThePrefillAndDecodingStartsAfterTheKvTransfer) {
  // 1 prefill + 1 decode replica, 10 ms iterations, one request (prompt 1000, output 5) at t = 0.
  //   Prefill: one iteration, first token at 10 ms = TTFT.
  //   KV: 1000 tokens x 32 layers x 2 x 32 KV heads x 128 x 2 B = 524,288,000 B over the network
  //       (one GPU per node): T = 10 us + 524,288,000 B / 50 GB/s = 10 us + 10.48576 ms.
  //   Decode: tokens 2..5 in 4 iterations after the transfer: finish = 10 ms + T + 40 ms.
  // The flow network rounds a completion up to the next picosecond (net/flow_network.h): +-2 ps.
  ClusterCase c;
  c.add_pool(ReplicaRole::kPrefill, 1, 20000, Time::ms(10));
  c.add_pool(ReplicaRole::kDecode, 1, 20000, Time::ms(10));
  ReplicaLog log;
  const ClusterResult r = c.run({request(0, 0.0, 1000, 5)}, &log);
  const Time transfer = Time::us(10) + Time::seconds(524288000.0 / 50e9);
  ASSERT_EQ(r.total.completed, 1);
  EXPECT_EQ(log.of(0).first_token, Time::ms(10));
  EXPECT_NEAR(r.total.ttft.mean(), 0.010, 1e-12);
  EXPECT_NEAR(static_cast<double>((log.of(0).finish - (Time::ms(50) + transfer)).picoseconds()), 0.0, 2.0);
  EXPECT_EQ(log.of(0).replica, 1);
  EXPECT_EQ(log.of(0).prefill_replica, 0);
  EXPECT_EQ(r.transfers.count, 1);
  EXPECT_EQ(r.transfers.intra_node, 0);
  EXPECT_EQ(r.transfers.bytes, Bytes(524288000));
  EXPECT_NEAR(r.transfers.time.mean(), transfer.to_seconds(), 2e-12);
  EXPECT_EQ(r.transfers.wait.max(), 0.0);
  // The prefill replica computed the prompt, the decode replica the 4 later tokens.
  EXPECT_EQ(r.replicas[0].counters.prefill_tokens, 1000);
  EXPECT_EQ(r.replicas[0].counters.decode_tokens, 0);
  EXPECT_EQ(r.replicas[1].counters.decode_tokens, 4);
}

TEST(Cluster, CoLocatedPrefillAndDecodeReplicasTransferOverNvlink) {
  // Eight GPUs per node: the TP-1 prefill and decode replicas share node 0, so the KV crosses the
  // scale-up links: T = 7 us + 524,288,000 B / 240 GB/s.
  ClusterCase c;
  c.add_pool(ReplicaRole::kPrefill, 1, 20000, Time::ms(10)).link.gpus_per_node = 8;
  c.add_pool(ReplicaRole::kDecode, 1, 20000, Time::ms(10)).link.gpus_per_node = 8;
  const ClusterResult r = c.run({request(0, 0.0, 1000, 5)});
  EXPECT_EQ(r.transfers.intra_node, 1);
  EXPECT_NEAR(r.transfers.time.mean(), 7e-6 + 524288000.0 / 240e9, 2e-12);
}

TEST(Cluster, APrefilledRequestWaitsForDecodeBlocksAndTheTransferFollows) {
  // Two requests (prompt 1000, output 5) at t = 0; the prefill replica runs both prompts in one 10 ms
  // iteration. The decode replica holds 1,104 tokens = 69 blocks of 16: the first request reserves
  // ceil(1000 / 16) = 63 blocks, so the second (63 more) waits until the first has finished and freed
  // its blocks: first transfer 10 ms..10 ms + T, its decode 4 iterations until 50 ms + T; the second
  // transfer then starts (wait 40 ms + T) and its request finishes at 50 ms + T + T + 40 ms.
  ClusterCase c;
  c.add_pool(ReplicaRole::kPrefill, 1, 20000, Time::ms(10));
  c.add_pool(ReplicaRole::kDecode, 1, 1104, Time::ms(10));
  ReplicaLog log;
  const ClusterResult r = c.run({request(0, 0.0, 1000, 5), request(1, 0.0, 1000, 5)}, &log);
  const double t = 10e-6 + 524288000.0 / 50e9;
  ASSERT_EQ(r.total.completed, 2);
  EXPECT_NEAR(log.of(0).finish.to_seconds(), 0.050 + t, 1e-11);
  EXPECT_NEAR(log.of(1).finish.to_seconds(), 0.090 + 2 * t, 1e-11);
  EXPECT_NEAR(r.transfers.wait.max(), 0.040 + t, 1e-11);
  EXPECT_EQ(r.total.counters.preemptions, 0);
}

TEST(Cluster, APrefilledRequestRunsAheadOfAWaitingRequestThatNeedsBlocks) {
  // 100 blocks of 16 tokens. A (prompt 1500) waits: it needs ceil(1500 / 16) = 94 blocks. B arrives
  // prefilled (200 tokens of KV, first token emitted): add_prefilled reserves ceil(200 / 16) = 13
  // blocks, leaving 87 < 94, so A cannot be admitted; B holds its blocks already and must decode
  // anyway (behind A in the FCFS queue it would wait for blocks it holds itself).
  const model::ModelSpec m = testing::llama2_7b();
  const hw::GpuSpec g = testing::a100_80gb();
  ReplicaSpec spec;
  spec.model = &m;
  spec.gpu = &g;
  spec.kv_tokens_override = 1600;
  spec.watermark = 0.0;
  Replica r(spec, plan_memory(spec));
  const std::unique_ptr<Scheduler> sched = make_scheduler("vllm", SchedulerConfig{});
  const SeqId a = r.add(request(0, 0.0, 1500, 5), 0);
  sched->enqueue(r, a);
  Seq from;
  from.computed = 200;
  from.prefill_target = 200;
  from.generated = 1;
  const SeqId b = r.add_prefilled(request(1, 0.0, 200, 5), from, 0, 1, 0);
  ASSERT_GE(b, 0);
  EXPECT_EQ(r.allocatable_blocks(), 87);
  sched->enqueue_prefilled(r, b);
  Batch batch;
  sched->schedule(r, SchedulerView{}, batch);
  ASSERT_EQ(batch.items.size(), 1u);
  EXPECT_EQ(batch.items[0].seq, b);
  EXPECT_EQ(batch.items[0].q, 1);
  EXPECT_EQ(sched->waiting(), 1);  // A
}

TEST(Cluster, OneOutputTokenFinishesOnThePrefillReplica) {
  // Output 1: the prefill's token is the whole answer; nothing moves to the decode pool.
  ClusterCase c;
  c.add_pool(ReplicaRole::kPrefill, 1, 20000, Time::ms(10));
  c.add_pool(ReplicaRole::kDecode, 1, 20000, Time::ms(10));
  ReplicaLog log;
  const ClusterResult r = c.run({request(0, 0.0, 500, 1)}, &log);
  EXPECT_EQ(r.total.completed, 1);
  EXPECT_EQ(r.transfers.count, 0);
  EXPECT_EQ(log.of(0).finish, Time::ms(10));
  EXPECT_EQ(log.of(0).replica, 0);
}

// Every request ends exactly once (done or rejected) and the counts add up, under memory pressure.
void expect_conservation(const ClusterResult& r, const ReplicaLog& log, int64_t n) {
  std::map<int64_t, int> seen;
  for (const ReplicaLog::Entry& e : log.entries) ++seen[e.id];
  EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
  for (const auto& [id, k] : seen) EXPECT_EQ(k, 1) << "request " << id;
  EXPECT_EQ(r.total.arrived, n);
  EXPECT_EQ(r.total.completed + r.total.rejected_context + r.total.rejected_kv, n);
  EXPECT_EQ(r.total.unfinished, 0);
  int64_t finished = 0;
  for (const ReplicaSummary& s : r.replicas) {
    if (s.role != ReplicaRole::kPrefill) finished += s.stats.finished;
  }
  EXPECT_LE(finished, r.total.completed);  // plus the one-token requests finished on prefill replicas
}

TEST(Cluster, EveryRequestFinishesOnceWithEveryRouterColocatedAndDisaggregated) {
  const WorkloadSpec w = parse_workload_spec("prompt=lognormal:6.5:0.9:16:3500,output=lognormal:4.5:1:1:600");
  auto src = make_workload(w, 60.0, 3, 1500);
  std::vector<Request> all = drain(*src);
  for (size_t i = 0; i < all.size(); ++i) all[i].prefix_blocks = {i % 7, 100 + i % 3};
  for (const RouterInfo& info : router_registry()) {
    SCOPED_TRACE(info.name);
    {
      ClusterCase c;
      c.add_pool(ReplicaRole::kFull, 4, 16000, Time::ms(6), 3e-6);
      c.spec.router = info.name;
      ReplicaLog log;
      expect_conservation(c.run(all, &log), log, static_cast<int64_t>(all.size()));
    }
    {
      ClusterCase c;
      c.add_pool(ReplicaRole::kPrefill, 2, 16000, Time::ms(6), 3e-6);
      c.add_pool(ReplicaRole::kDecode, 3, 8000, Time::ms(6), 3e-6).scheduler = "sarathi";
      c.spec.router = info.name;
      c.spec.decode_router = info.name;
      ReplicaLog log;
      const ClusterResult r = c.run(all, &log);
      expect_conservation(r, log, static_cast<int64_t>(all.size()));
      EXPECT_GT(r.transfers.wait.max(), 0.0);  // the decode pool was full at times
    }
  }
}

TEST(Cluster, SameInputsGiveTheSameResult) {
  const WorkloadSpec w = parse_workload_spec("prompt=lognormal:6:1:16:2000,output=uniform:1:300");
  auto run = [&] {
    auto src = make_workload(w, 50.0, 5, 1000);
    ClusterCase c;
    c.add_pool(ReplicaRole::kPrefill, 2, 16000, Time::ms(6), 3e-6);
    c.add_pool(ReplicaRole::kDecode, 2, 16000, Time::ms(6), 3e-6);
    c.spec.router = "prefix-aware";
    c.spec.validate();
    return simulate_cluster(*src, c.spec, c.options);
  };
  const ClusterResult a = run(), b = run();
  EXPECT_EQ(a.total.last_completion, b.total.last_completion);
  EXPECT_EQ(a.total.ttft.quantile(0.99), b.total.ttft.quantile(0.99));
  EXPECT_EQ(a.transfers.time.sum(), b.transfers.time.sum());
  for (size_t i = 0; i < a.replicas.size(); ++i) EXPECT_EQ(a.replicas[i].stats.iterations, b.replicas[i].stats.iterations);
}

TEST(Cluster, InvalidSpecsAreInputErrors) {
  {
    ClusterCase c;
    EXPECT_THROW(c.spec.validate(), InputError);  // no pool
  }
  {
    ClusterCase c;
    c.add_pool(ReplicaRole::kPrefill, 1, 20000, Time::ms(10));
    c.add_pool(ReplicaRole::kDecode, 1, 20000, Time::ms(10)).scheduler = "wait";
    EXPECT_THROW(c.spec.validate(), InputError);
  }
  {
    ClusterCase c;
    c.add_pool(ReplicaRole::kPrefill, 1, 20000, Time::ms(10));
    EXPECT_THROW(c.spec.validate(), InputError);  // no decode pool
  }
  {
    ClusterCase c;
    c.add_pool(ReplicaRole::kFull, 2, 20000, Time::ms(10));
    c.spec.router = "least-outstandng";
    try {
      c.spec.validate();
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("least-outstanding"), std::string::npos) << e.what();
    }
  }
}

// ---- pipeline parallelism: virtual engines (serve/replica_driver.h Pipeline) ------------------------
TEST(Pipeline, ABatchEntersEachStageWhenTheBatchAheadLeavesIt) {
  // Two stages. A 10 ms iteration at 0 holds stage 0 for [0, 5) and stage 1 for [5, 10). The next one
  // can enter stage 0 at 5 and reach stage 1 at 10, when it frees: it starts at 5 (frees [10, 15)).
  // A 4 ms one asked for at 6: stage 0 is free at 10, stage 1 at 15, which it would reach 2 ms after
  // its start: start = max(6, 10 - 0, 15 - 2) = 13. Stage 0 was booked 5 + 5 + 2 = 12 ms.
  Pipeline p(2);
  EXPECT_EQ(p.reserve(Time::zero(), Time::ms(10)), Time::zero());
  EXPECT_EQ(p.reserve(Time::zero(), Time::ms(10)), Time::ms(5));
  EXPECT_EQ(p.reserve(Time::ms(6), Time::ms(4)), Time::ms(13));
  EXPECT_EQ(p.busy(), Time::ms(12));
}

// Records iteration starts and engines.
class IterationLog final : public SimObserver {
 public:
  void on_iteration(const IterationRecord& it) override { starts.emplace_back(it.start, it.engine); }
  void on_request(const RequestRecord& r) override { finish[r.request->id] = r.finish; }
  std::vector<std::pair<Time, int32_t>> starts;
  std::map<int64_t, Time> finish;
};

TEST(Cluster, PipelineParallelReplicasRunOneBatchPerStageInFlight) {
  // Llama-2-7B with PP 2, 10 ms per iteration whatever the batch, vLLM capped at one sequence per
  // batch, two requests (prompt 100, output 3) at t = 0. Each of the replica's two virtual engines (one
  // scheduler and half the KV blocks each) takes one: the fewest requests, ties to engine 0.
  //   engine 0: iterations at 0, 10, 20 (each holds stage 0 for 5 ms, then stage 1 for 5 ms): A's
  //             tokens at 10, 20, 30 ms;
  //   engine 1: its first batch enters stage 0 when engine 0's leaves it, at 5; then 15, 25: B's
  //             tokens at 15, 25, 35 ms.
  // With one batch in flight (PP 1, or the cap of one sequence on one scheduler) B would wait for A:
  // A at 30 ms, B at 60 ms. Stage 0 is booked 6 x 5 ms = 30 ms.
  ClusterCase c;
  PoolSpec& pool = c.add_pool(ReplicaRole::kFull, 1, 20000, Time::ms(10));
  pool.replica.pp = 2;
  pool.scheduler_config.max_seqs = 1;
  IterationLog log;
  const ClusterResult r = c.run({request(0, 0.0, 100, 3), request(1, 0.0, 100, 3)}, &log);
  ASSERT_EQ(r.total.completed, 2);
  EXPECT_EQ(log.finish.at(0), Time::ms(30));
  EXPECT_EQ(log.finish.at(1), Time::ms(35));
  const std::vector<std::pair<Time, int32_t>> want = {{Time::ms(0), 0},  {Time::ms(5), 1},  {Time::ms(10), 0},
                                                      {Time::ms(15), 1}, {Time::ms(20), 0}, {Time::ms(25), 1}};
  EXPECT_EQ(log.starts, want);
  ASSERT_EQ(r.replicas.size(), 1u);
  EXPECT_EQ(r.replicas[0].stats.iterations, 6);
  EXPECT_EQ(r.replicas[0].stats.busy, Time::ms(30));
  EXPECT_EQ(r.replicas[0].total_blocks, 20000 / 16);  // the engines' halves add up (block size 16)

  ClusterCase one;
  PoolSpec& flat = one.add_pool(ReplicaRole::kFull, 1, 20000, Time::ms(10));
  flat.scheduler_config.max_seqs = 1;
  IterationLog flat_log;
  ASSERT_EQ(one.run({request(0, 0.0, 100, 3), request(1, 0.0, 100, 3)}, &flat_log).total.completed, 2);
  EXPECT_EQ(flat_log.finish.at(0), Time::ms(30));
  EXPECT_EQ(flat_log.finish.at(1), Time::ms(60));
}

TEST(Cluster, EachVirtualEngineHoldsItsShareOfTheKvCache) {
  // 6,000 KV tokens over 2 engines: 3,000 each (vLLM gives each virtual engine 1/p of the blocks). A
  // request of 4,000 tokens (within Llama-2's 4,096 context) fits the replica but no engine: rejected
  // for KV. With PP 1 it runs.
  ClusterCase c;
  c.add_pool(ReplicaRole::kFull, 1, 6000, Time::ms(10)).replica.pp = 2;
  const ClusterResult r = c.run({request(0, 0.0, 3000, 1000)});
  EXPECT_EQ(r.total.rejected_kv, 1);
  ClusterCase one;
  one.add_pool(ReplicaRole::kFull, 1, 6000, Time::ms(10));
  EXPECT_EQ(one.run({request(0, 0.0, 3000, 1000)}).total.completed, 1);
}

}  // namespace
}  // namespace orrery::serve
