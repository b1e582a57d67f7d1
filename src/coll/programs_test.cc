#include "coll/program.h"

#include <gtest/gtest.h>

#include "coll/alpha_beta.h"
#include "coll/executor.h"
#include "coll/topology_paths.h"
#include "net/topology_builders.h"

namespace orrery::coll {
namespace {

ExecutionStats run_on(PathProvider& paths, Op op, Algorithm algo, int32_t n, Bytes size, ProgramOptions o = {}) {
  des::Engine engine;
  net::FlowNetwork net(engine, paths.capacities());
  auto program = make_program(op, algo, n, size, o);
  return execute(*program, engine, net, paths);
}

// Two levels: m nodes x g ranks. Inside a node each rank has an egress and an ingress link of B1 to
// the node's switch (latency a1); between nodes each rank has its own NIC up and down links of B2
// (latency a2) into a non-blocking core. Links: [0, n) egress, [n, 2n) ingress, [2n, 3n) NIC up,
// [3n, 4n) NIC down; plus, when oversubscribed, one uplink and one downlink per node of
// g * B2 / o at [4n, 4n + m) and [4n + m, 4n + 2m).
class TwoLevelPaths final : public PathProvider {
 public:
  TwoLevelPaths(int32_t m, int32_t g, Level intra, Level inter, double oversubscription = 0)
      : m_(m), g_(g), n_(m * g), intra_(intra), inter_(inter), o_(oversubscription) {}
  Time path(int32_t src, int32_t dst, uint64_t, std::vector<net::LinkUse>& out) override {
    out.clear();
    if (src == dst) return Time::zero();
    if (src / g_ == dst / g_) {
      out = {{src, 1}, {n_ + dst, 1}};
      return intra_.alpha;
    }
    out = {{2 * n_ + src, 1}, {3 * n_ + dst, 1}};
    if (o_ > 0) {
      out.push_back({4 * n_ + src / g_, 1});
      out.push_back({4 * n_ + m_ + dst / g_, 1});
    }
    return inter_.alpha;
  }
  std::vector<Bandwidth> capacities() const override {
    std::vector<Bandwidth> c(static_cast<size_t>(2 * n_), intra_.bandwidth);
    c.resize(static_cast<size_t>(4 * n_), inter_.bandwidth);
    if (o_ > 0) c.resize(static_cast<size_t>(4 * n_ + 2 * m_), inter_.bandwidth * (g_ / o_));
    return c;
  }

 private:
  int32_t m_, g_, n_;
  Level intra_, inter_;
  double o_;
};

TEST(FlowPrograms, RingAllReduceOnAUniformSwitchMatchesTheClosedForm) {
  // n = 8, B = 100 GB/s, a = 1 us, S = 8 MiB, one chunk per step (chunk >= S/n), one channel: every
  // step moves S/n over a private egress/ingress pair at full rate, and the 2(n-1) steps run in
  // lockstep: T = 2(n-1)(a + S/(nB)) = 2(n-1)a + 2(n-1)/n S/B = 14 us + 146.800640 us = 160.800640 us.
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  ProgramOptions o;
  o.chunk = Bytes::MiB(8);
  const ExecutionStats s = run_on(paths, Op::kAllReduce, Algorithm::kRing, 8, Bytes::MiB(8), o);
  EXPECT_EQ(s.time, Time::ps(160'800'640));
  EXPECT_EQ(s.messages, 8u * 14u);  // n ranks x 2(n-1) steps
  const AlphaBetaParams p{8, 8, Level{Time::us(1), Bandwidth(100e9)}, Level{}, 1.0};
  EXPECT_EQ(s.time, alpha_beta_time(Op::kAllReduce, Algorithm::kRing, Bytes::MiB(8), p));
}

TEST(FlowPrograms, PipelinedChunksOverlapTheirLatencies) {
  // Same ring with 4 chunks per step and up to 8 in flight per connection: the chunks pipeline, so
  // the time is at most the unchunked time (160.8 us) and at least the bandwidth term
  // 2(n-1)/n S/B = 146.8 us. With one chunk in flight each chunk pays its own latency serially:
  // 14 steps * 4 * (1 us + 1 MiB/4 / 100 GB/s) = 14 * 4 * 3.62144 us = 202.80064 us.
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  ProgramOptions o;
  o.chunk = Bytes::KiB(256);  // S/n = 1 MiB -> 4 chunks
  const ExecutionStats s = run_on(paths, Op::kAllReduce, Algorithm::kRing, 8, Bytes::MiB(8), o);
  EXPECT_LE(s.time, Time::ps(160'800'640));
  EXPECT_GE(s.time, Time::ps(146'800'640));
  EXPECT_EQ(s.messages, 8u * 14u * 4u);
  o.max_outstanding = 1;
  const ExecutionStats serial = run_on(paths, Op::kAllReduce, Algorithm::kRing, 8, Bytes::MiB(8), o);
  EXPECT_EQ(serial.time, Time::ps(202'800'640));
}

TEST(FlowPrograms, HierarchicalAllReduceMatchesTheTwoLevelFormula) {
  // 4 nodes x 8 ranks; intra a1 = 1 us, B1 = 400 GB/s; inter a2 = 2 us, B2 = 50 GB/s; S = 64 MiB.
  // Phases run in lockstep on symmetric ranks, so the flow time equals the closed form
  // 2(g-1)a1 + 2(g-1)/g S/B1 + 2(m-1)a2 + 2(m-1)/m (S/g)/B2 = 571.25952 us (see alpha_beta_test).
  const Level intra{Time::us(1), Bandwidth(400e9)};
  const Level inter{Time::us(2), Bandwidth(50e9)};
  TwoLevelPaths paths(4, 8, intra, inter);
  ProgramOptions o;
  o.ranks_per_node = 8;
  o.chunk = Bytes::MiB(64);
  const ExecutionStats s = run_on(paths, Op::kAllReduce, Algorithm::kHierarchical, 32, Bytes::MiB(64), o);
  const AlphaBetaParams p{32, 8, intra, inter, 1.0};
  EXPECT_EQ(s.time, alpha_beta_time(Op::kAllReduce, Algorithm::kHierarchical, Bytes::MiB(64), p));
}

TEST(FlowPrograms, AllToAllAcrossAnOversubscribedTierSlowsByTheRatio) {
  // 16 nodes x 1 rank, alpha 0: every byte crosses the node uplink. Without oversubscription each
  // rank's NIC (B2) carries (n-1)/n S; with o = 4 the node uplink is B2/4 and the time is 4x.
  const Level intra{Time::zero(), Bandwidth(400e9)};
  const Level inter{Time::zero(), Bandwidth(50e9)};
  TwoLevelPaths flat(16, 1, intra, inter);
  TwoLevelPaths over(16, 1, intra, inter, 4.0);
  const ExecutionStats a = run_on(flat, Op::kAllToAll, Algorithm::kDirect, 16, Bytes::MiB(16));
  const ExecutionStats b = run_on(over, Op::kAllToAll, Algorithm::kDirect, 16, Bytes::MiB(16));
  // Base: 15/16 * 16 MiB / 50 GB/s = 314.5728 us.
  EXPECT_EQ(a.time, Time::ps(314'572'800));
  EXPECT_NEAR(b.time / a.time, 4.0, 1e-9);
  EXPECT_EQ(a.messages, 16u * 15u);
}

TEST(FlowPrograms, SendRecvIsLatencyPlusSizeOverBandwidth) {
  SwitchPaths paths(2, Bandwidth(50e9), Time::us(3));
  // 3 us + 1e8 B / 5e10 B/s = 3 us + 2 ms.
  const ExecutionStats s = run_on(paths, Op::kSendRecv, Algorithm::kDirect, 2, Bytes(100'000'000));
  EXPECT_EQ(s.time, Time::us(2003));
}

TEST(FlowPrograms, EveryAlgorithmCompletesAndMovesTheExpectedBytes) {
  // Bytes sent per rank: ring all-reduce 2(n-1)/n S; all-gather, reduce-scatter (n-1)/n S;
  // all-to-all (n-1)/n S; halving-doubling all-reduce 2(n-1)/n S (S/2 + S/4 + ... twice).
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  const Bytes S = Bytes::MiB(8);
  const int64_t n = 8;
  struct Case {
    Op op;
    Algorithm algo;
    int64_t bytes_per_rank;
  };
  for (const Case& c : {Case{Op::kAllReduce, Algorithm::kRing, 2 * (n - 1) * S.count() / n},
                        Case{Op::kAllGather, Algorithm::kRing, (n - 1) * S.count() / n},
                        Case{Op::kReduceScatter, Algorithm::kRing, (n - 1) * S.count() / n},
                        Case{Op::kAllToAll, Algorithm::kDirect, (n - 1) * S.count() / n},
                        Case{Op::kAllReduce, Algorithm::kHalvingDoubling, 2 * (n - 1) * S.count() / n}}) {
    SCOPED_TRACE(std::string(op_name(c.op)) + "/" + std::string(algorithm_name(c.algo)));
    const ExecutionStats s = run_on(paths, c.op, c.algo, 8, S);
    EXPECT_GT(s.time, Time::zero());
    EXPECT_EQ(s.bytes.count(), c.bytes_per_rank * n);
  }
}

TEST(FlowPrograms, TreeBroadcastAndReduceReachEveryRank) {
  // A pipelined binary-tree broadcast moves S to each of the n-1 non-root ranks: (n-1) S in total.
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  const ExecutionStats b = run_on(paths, Op::kBroadcast, Algorithm::kTree, 8, Bytes::MiB(4));
  EXPECT_EQ(b.bytes.count(), 7 * Bytes::MiB(4).count());
  const ExecutionStats r = run_on(paths, Op::kReduce, Algorithm::kTree, 8, Bytes::MiB(4));
  EXPECT_EQ(r.bytes.count(), 7 * Bytes::MiB(4).count());
  // Double binary tree all-reduce: each of the 2 trees reduces and broadcasts S/2 over n-1 edges:
  // 2 * 2 * (n-1) * S/2 = 2 (n-1) S.
  const ExecutionStats a = run_on(paths, Op::kAllReduce, Algorithm::kTree, 8, Bytes::MiB(4));
  EXPECT_EQ(a.bytes.count(), 2 * 7 * Bytes::MiB(4).count());
}

TEST(FlowPrograms, ChainBroadcastApproachesSizeOverBandwidthWithManyChunks) {
  // One chunk in flight per connection: the pipelined chain takes (n - 2 + c)(a + S/(cB)); with
  // S = 64 MiB, c = 128 chunks of 512 KiB, n = 8, a = 1 us, B = 100 GB/s: 134 * (1 us + 5.24288 us)
  // = 836.54592 us. With 8 in flight the latencies overlap: between S/B = 671.09 us plus one chunk's
  // trip down the chain, and the one-slot time.
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  ProgramOptions o;
  o.max_outstanding = 1;
  const ExecutionStats s = run_on(paths, Op::kBroadcast, Algorithm::kRing, 8, Bytes::MiB(64), o);
  EXPECT_EQ(s.time, Time::ps(836'545'920));
  const ExecutionStats fast = run_on(paths, Op::kBroadcast, Algorithm::kRing, 8, Bytes::MiB(64));
  EXPECT_LT(fast.time, s.time);
  EXPECT_GE(fast.time, Time::ps(671'088'640));
}

ExecutionStats run_with(PathProvider& paths, Op op, Algorithm algo, int32_t n, Bytes size, const ExecutionOptions& x,
                        ProgramOptions o = {}) {
  des::Engine engine;
  net::FlowNetwork net(engine, paths.capacities());
  auto program = make_program(op, algo, n, size, o);
  return execute(*program, engine, net, paths, x);
}

TEST(Stragglers, ASlowSenderIsLimitedByItsProcessingThroughput) {
  // Send/recv of 100 MB; the sender's processing link is 2 TB/s / (3 passes * 100) = 6.667 GB/s, below
  // the 50 GB/s network: T = 3 us + 1e8 * 300 / 2e12 s = 3 us + 15 ms.
  SwitchPaths paths(2, Bandwidth(50e9), Time::us(3));
  ExecutionOptions x;
  x.ranks.local_bandwidth = Bandwidth(2e12);
  x.ranks.slowdown = {100.0, 1.0};
  const ExecutionStats s = run_with(paths, Op::kSendRecv, Algorithm::kDirect, 2, Bytes(100'000'000), x);
  EXPECT_EQ(s.time, Time::us(15'003));
}

TEST(Stragglers, OneSlowRankGatesTheWholeRing) {
  // Ring all-reduce, n = 8, one chunk per step, B = 100 GB/s, a = 1 us, S = 8 MiB. Rank 5 processes at
  // 2 TB/s / (3 * 20) = 33.33 GB/s. It must send 2(n-1) messages of S/n in order at that rate, so
  // T >= 14 * 1 MiB / 33.33 GB/s = 440.4 us; and the run is no slower than lockstep steps gated by it:
  // T <= 14 * (1 us + 1 MiB / 33.33 GB/s) = 454.4 us.
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  ExecutionOptions x;
  x.ranks.local_bandwidth = Bandwidth(2e12);
  x.ranks.slowdown.assign(8, 1.0);
  x.ranks.slowdown[5] = 20.0;
  ProgramOptions o;
  o.chunk = Bytes::MiB(8);
  const ExecutionStats s = run_with(paths, Op::kAllReduce, Algorithm::kRing, 8, Bytes::MiB(8), x, o);
  const double slow = 2e12 / 60.0;
  EXPECT_GE(s.time, Time::seconds(14 * 1048576.0 / slow));
  EXPECT_LE(s.time, Time::seconds(14 * (1e-6 + 1048576.0 / slow)));
  // With every rank at full speed (processing 666.7 GB/s > B) the closed form holds again.
  x.ranks.slowdown.assign(8, 1.0);
  EXPECT_EQ(run_with(paths, Op::kAllReduce, Algorithm::kRing, 8, Bytes::MiB(8), x, o).time, Time::ps(160'800'640));
}

TEST(LinkEvents, AFailedLinkStallsTheCollectiveUntilItReturns) {
  // Send/recv of 100 MB at 50 GB/s (2 ms + 3 us alone). The sender's egress link (link 0) is down
  // from 1.003 ms to 4.003 ms: 3 ms of stall, so the transfer ends at 5.003 ms.
  SwitchPaths paths(2, Bandwidth(50e9), Time::us(3));
  des::Engine engine;
  net::FlowNetwork net(engine, paths.capacities());
  engine.schedule_at(Time::us(1003), [&](des::Engine&) { net.set_capacity(0, Bandwidth(0)); });
  engine.schedule_at(Time::us(4003), [&](des::Engine&) { net.set_capacity(0, Bandwidth(50e9)); });
  auto program = make_program(Op::kSendRecv, Algorithm::kDirect, 2, Bytes(100'000'000), {});
  EXPECT_EQ(execute(*program, engine, net, paths).time, Time::us(5003));
}

TEST(LinkEvents, AFailedLinkReroutesItsFlowsOntoTheOtherPath) {
  // g0 and g1 joined through two switches, each hop 50 GB/s and 1 us (path latency 2 us). Send 100 MB:
  // alone it takes 2 us + 2 ms. The route goes through one switch; its first hop fails at 1.002 ms,
  // when 50 MB have arrived. The flow moves to the other switch with its 50 MB left, pays the 2 us
  // latency again and drains in 1 ms: it ends at 1.002 + 0.002 + 1.000 = 2.004 ms.
  const net::Topology topo = net::parse_edge_list(
      "gpu g0 machine=0\ngpu g1 machine=1\nswitch s1\nswitch s2\n"
      "link g0 s1 bw=50GB/s lat=1us duplex kind=network\nlink s1 g1 bw=50GB/s lat=1us duplex kind=network\n"
      "link g0 s2 bw=50GB/s lat=1us duplex kind=network\nlink s2 g1 bw=50GB/s lat=1us duplex kind=network\n",
      "two-switches.topo");
  TopologyPaths paths(topo);
  std::vector<net::LinkUse> route;
  paths.path(0, 1, pair_key(0, 1), route);  // the flow key the executor uses for a message 0 -> 1
  ASSERT_EQ(route.size(), 2u);
  des::Engine engine;
  net::FlowNetwork net(engine, paths.capacities());
  auto program = make_program(Op::kSendRecv, Algorithm::kDirect, 2, Bytes(100'000'000), {});
  ExecutionOptions x;
  x.link_events.push_back(LinkEvent{Time::us(1002), route[0].link, Bandwidth(0)});
  const ExecutionStats s = execute(*program, engine, net, paths, x);
  EXPECT_EQ(s.time, Time::us(2004));
  EXPECT_EQ(s.reroutes, 1u);
}

TEST(LinkEvents, WithoutAnotherPathTheFlowStallsUntilRepair) {
  // The same transfer on a single-switch path: down from 1.002 ms to 3.002 ms stalls it for 2 ms,
  // and it ends at 4.002 ms; nothing is rerouted.
  const net::Topology topo = net::parse_edge_list(
      "gpu g0 machine=0\ngpu g1 machine=1\nswitch s1\n"
      "link g0 s1 bw=50GB/s lat=1us duplex kind=network\nlink s1 g1 bw=50GB/s lat=1us duplex kind=network\n",
      "one-switch.topo");
  TopologyPaths paths(topo);
  std::vector<net::LinkUse> route;
  paths.path(0, 1, pair_key(0, 1), route);
  des::Engine engine;
  net::FlowNetwork net(engine, paths.capacities());
  auto program = make_program(Op::kSendRecv, Algorithm::kDirect, 2, Bytes(100'000'000), {});
  ExecutionOptions x;
  x.link_events.push_back(LinkEvent{Time::us(1002), route[0].link, Bandwidth(0)});
  x.link_events.push_back(LinkEvent{Time::us(3002), route[0].link, Bandwidth(50e9)});
  const ExecutionStats s = execute(*program, engine, net, paths, x);
  EXPECT_EQ(s.time, Time::us(4002));
  EXPECT_EQ(s.reroutes, 1u);  // moved onto the only (dead) path again, where it waits
}

TEST(TopologyPathsCache, RoutesThroughTheGrownCacheAreTheRoutersRoutes) {
  // 16 machines x 8 GPUs: 128 x 127 = 16,256 ordered pairs, so the table (1,024 slots, at most 3/4 full)
  // grows five times; every pair is asked twice (a miss, then a hit) and once more after the growth,
  // and each answer must equal the uncached route (peek_path: the router's own).
  const net::Topology topo = net::two_level({16, 8, Bandwidth(400e9), Time::ns(936), Bandwidth(50e9), Time::us(2)});
  TopologyPaths paths(topo);
  std::vector<net::LinkUse> cached, fresh;
  auto same = [](const std::vector<net::LinkUse>& a, const std::vector<net::LinkUse>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].link != b[i].link || a[i].count != b[i].count) return false;
    }
    return true;
  };
  size_t mismatches = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (int32_t a = 0; a < 128; ++a) {
      for (int32_t b = 0; b < 128; ++b) {
        if (pass == 1 && b % 2 == 1) continue;  // the second pass: half the pairs, all hits
        const Time t1 = paths.path(a, b, pair_key(a, b), cached);
        const Time t2 = paths.peek_path(a, b, pair_key(a, b), fresh);
        if (t1 != t2 || !same(cached, fresh)) ++mismatches;
        if (a == b && !cached.empty()) ++mismatches;
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  // Within a machine: GPU -> NVSwitch -> GPU (2 links); across: GPU -> network switch -> GPU (2 links).
  paths.path(0, 127, pair_key(0, 127), cached);
  EXPECT_EQ(cached.size(), 2u);
}

TEST(FlowPrograms, BadParametersAreInputErrors) {
  EXPECT_THROW(make_program(Op::kAllReduce, Algorithm::kHalvingDoubling, 6, Bytes(1), {}), InputError);
  EXPECT_THROW(make_program(Op::kAllToAll, Algorithm::kRing, 8, Bytes(1), {}), InputError);
  ProgramOptions o;
  o.ranks_per_node = 3;
  EXPECT_THROW(make_program(Op::kAllReduce, Algorithm::kHierarchical, 8, Bytes(1), o), InputError);
  o = {};
  o.root = 9;
  EXPECT_THROW(make_program(Op::kBroadcast, Algorithm::kRing, 8, Bytes(1), o), InputError);
}

TEST(FlowPrograms, SameInputsGiveIdenticalResults) {
  SwitchPaths paths(16, Bandwidth(50e9), Time::us(2));
  const ExecutionStats a = run_on(paths, Op::kAllReduce, Algorithm::kTree, 16, Bytes::MiB(32));
  const ExecutionStats b = run_on(paths, Op::kAllReduce, Algorithm::kTree, 16, Bytes::MiB(32));
  EXPECT_EQ(a.time, b.time);
  EXPECT_EQ(a.events, b.events);
}

// ---- NVLS: the switch reduces and multicasts (NvlsProgram) -----------------------------------------
// SwitchPaths(8, 100 GB/s, a = 1 us): a message into or out of the switch crosses one link and pays
// a/2 = 0.5 us. S = 8 MiB, slices S/n = 1 MiB; with chunk = 1 MiB every slice is one message.
TEST(Nvls, AllReduceOfOneChunkPerSliceRunsItsFourHopsInTurn) {
  // (1) every rank pushes its 8 slices at once, 8 flows on its uplink: 0.5 + 8 MiB / B = 0.5 + 83.88608;
  // (2) the switch sends each sum to its owner, one flow per downlink: 0.5 + 1 MiB / B = 0.5 + 10.48576;
  // (3) each owner pushes its sum up, alone on its uplink: 0.5 + 10.48576;
  // (4) the switch copies every slice to every rank, 8 flows per downlink: 0.5 + 83.88608.
  // T = 2 + 2 x 83.88608 + 2 x 10.48576 = 190.74368 us.
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  ProgramOptions o;
  o.chunk = Bytes::MiB(1);
  const ExecutionStats s = run_on(paths, Op::kAllReduce, Algorithm::kNvls, 8, Bytes::MiB(8), o);
  EXPECT_EQ(s.time, Time::ps(190'743'680));
  // Bytes moved: pushes n S, sums down S, sums up S, copies n S: 2 (n + 1) S = 18 x 8 MiB.
  EXPECT_EQ(s.bytes.count(), 18 * Bytes::MiB(8).count());
  // Reduce-scatter is steps (1) and (2): 95.37184 us; all-gather is (3) and (4) with each rank's own
  // slice: the same 95.37184 us. Each moves (n + 1) S.
  const ExecutionStats rs = run_on(paths, Op::kReduceScatter, Algorithm::kNvls, 8, Bytes::MiB(8), o);
  EXPECT_EQ(rs.time, Time::ps(95'371'840));
  EXPECT_EQ(rs.bytes.count(), 9 * Bytes::MiB(8).count());
  const ExecutionStats ag = run_on(paths, Op::kAllGather, Algorithm::kNvls, 8, Bytes::MiB(8), o);
  EXPECT_EQ(ag.time, Time::ps(95'371'840));
  EXPECT_EQ(ag.bytes.count(), 9 * Bytes::MiB(8).count());
}

TEST(Nvls, PipelinedAllReduceApproachesNPlusOneOverNTimesSOverB) {
  // With 64 KiB chunks (16 per slice, 8 in flight per owner) the four hops overlap. Every uplink and
  // every downlink carries (n+1)/n S = 9 MiB, so T >= 9 MiB / 100 GB/s = 94.37184 us. The downlinks
  // idle while the first chunks are read and summed, and the last multicasts drain alone: the bound is
  // not reached, but overlapping keeps T within 20% of it (113.246208 us), where a reduction followed
  // by the multicast would take at least 2 x 8 MiB / B = 167.77216 us. The ring's 2(n-1)/n S / B alone
  // is 146.8 us. The closed form of alpha_beta.h, 2a + (n+1)/n S/B, gives 96.37184 us.
  SwitchPaths paths(8, Bandwidth(100e9), Time::us(1));
  ProgramOptions o;
  o.chunk = Bytes::KiB(64);
  const ExecutionStats s = run_on(paths, Op::kAllReduce, Algorithm::kNvls, 8, Bytes::MiB(8), o);
  EXPECT_GE(s.time, Time::ps(94'371'840));
  EXPECT_LE(s.time, Time::ps(113'246'208));
  AlphaBetaParams p;
  p.ranks = 8;
  p.ranks_per_node = 8;
  p.intra = Level{Time::us(1), Bandwidth(100e9)};
  EXPECT_EQ(alpha_beta_time(Op::kAllReduce, Algorithm::kNvls, Bytes::MiB(8), p), Time::ps(96'371'840));
}

TEST(Nvls, RanksThatDoNotShareOneSwitchAreAnInputError) {
  // Two 8-GPU machines: a GPU reaches the other machine's GPUs through its NIC and the fabric, not
  // through the NVSwitch, so there is no one switch to reduce in. One machine works.
  const auto h100_machines = [](int32_t m) {
    net::FatTreeSpec f;
    f.machines = m;
    f.scaleup_bandwidth = Bandwidth(450e9);  // 8 GPUs per machine on an NVSwitch (the defaults)
    f.pcie_bandwidth = Bandwidth(64e9);
    f.nic_bandwidth = Bandwidth(50e9);
    return net::fat_tree(f);
  };
  const net::Topology two = h100_machines(2);
  TopologyPaths across(two);
  EXPECT_THROW(run_on(across, Op::kAllReduce, Algorithm::kNvls, 16, Bytes::MiB(8)), InputError);
  const net::Topology one = h100_machines(1);
  EXPECT_FALSE(share_one_switch(two, 16));
  EXPECT_TRUE(share_one_switch(two, 8));  // the first machine's 8 ranks
  EXPECT_TRUE(share_one_switch(one, 8));
  // A GB200 NVL72 rack: 18 trays of 4 GPUs on one NVLink switch domain: all 72 meet at one switch.
  net::FatTreeSpec rack;
  rack.machines = 18;
  rack.gpus_per_machine = 4;
  rack.scaleup_domain_machines = 18;
  rack.scaleup_bandwidth = Bandwidth(900e9);
  rack.pcie_bandwidth = Bandwidth(64e9);
  rack.nic_bandwidth = Bandwidth(50e9);
  EXPECT_TRUE(share_one_switch(net::fat_tree(rack), 72));
  TopologyPaths within(one);
  const ExecutionStats s = run_on(within, Op::kAllReduce, Algorithm::kNvls, 8, Bytes::MiB(8));
  EXPECT_EQ(s.bytes.count(), 18 * Bytes::MiB(8).count());
  // At 450 GB/s per direction: at least 9 MiB / 450 GB/s = 20.97152 us.
  EXPECT_GE(s.time, Time::ps(20'971'520));
  // Across nodes the closed form refuses too.
  AlphaBetaParams p;
  p.ranks = 16;
  p.ranks_per_node = 8;
  p.intra = Level{Time::us(1), Bandwidth(450e9)};
  p.inter = Level{Time::us(2), Bandwidth(50e9)};
  EXPECT_THROW(alpha_beta_time(Op::kAllReduce, Algorithm::kNvls, Bytes::MiB(8), p), InputError);
  EXPECT_THROW(make_program(Op::kBroadcast, Algorithm::kNvls, 8, Bytes::MiB(8), {}), InputError);
}

}  // namespace
}  // namespace orrery::coll
