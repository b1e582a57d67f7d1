#include "train/flow_comm.h"

#include <gtest/gtest.h>

#include "train/test_support.h"

#include "compute/compute_model.h"
#include "core/error.h"
#include "net/topology_builders.h"
#include "train/train.h"

namespace orrery::train {
namespace {

using testing::test_gpu;

constexpr double kNic = 50e9;  // bytes/s per NIC and direction
// Network links run at NCCL's InfiniBand efficiency (ClusterSpec::network_efficiency, 4096/4122).
constexpr double kNet = kNic * 4096.0 / 4122.0;

// `machines` 8-GPU machines with NVSwitch (300 GB/s per GPU) and one 50 GB/s NIC per GPU, in a
// rail-optimized 2-tier fat tree of radix 16 (8 machines under each rail's leaf) with leaf oversubscription r.
net::Topology fabric(int32_t machines, double r) {
  net::FatTreeSpec s;
  s.machines = machines;
  s.gpus_per_machine = 8;
  s.tiers = 2;
  s.radix = 16;
  s.oversubscription = r;
  s.rail_optimized = true;
  s.nic_bandwidth = Bandwidth(kNic);
  s.pcie_bandwidth = Bandwidth(64e9);
  s.scaleup_bandwidth = Bandwidth(300e9);  // test_gpu()'s NVLink, as the cluster spec has it
  return net::fat_tree(s);
}

Plan tp8(int64_t dp) {
  Plan p;
  p.tp = 8;
  p.dp = dp;
  p.gbs = dp;
  p.seq = 1024;
  return p;
}

// The test GPU and its cluster spec (one 50 GB/s NIC per GPU, 8 GPUs per machine).
struct Rig {
  hw::GpuSpec gpu = test_gpu();
  ClusterSpec c = ClusterSpec::from_catalog(gpu, nullptr, 8, Bandwidth(kNic));
  double less_launch(Time t) const { return (t - c.collective_launch).to_seconds(); }
};

// Two machines, tp 8, dp 2: eight DP groups of two GPUs, one per rail, each on its own rail leaf, so no
// two groups share a link. A two-rank ring all-reduce sends S per rank over its NIC (2 (n - 1)/n S):
// S / B (B the NIC's rate at NCCL's network efficiency), plus a few microseconds of per-step latency
// (under 1% of S / B at 256 MiB).
TEST(FlowComm, GroupsOnSeparateRailsRunAtTheirNicRate) {
  const Rig r;
  const net::Topology t = fabric(2, 1.0);
  const FlowComm comm(t, r.c, tp8(2));
  const Bytes s = Bytes::MiB(256);
  const double expect = s.to_double() / kNet;
  EXPECT_NEAR(r.less_launch(comm.collective(coll::Op::kAllReduce, s, Group::kDp)), expect, 0.01 * expect);
  EXPECT_EQ(comm.simulations(), 1u);
  comm.collective(coll::Op::kAllReduce, s, Group::kDp);  // cached
  EXPECT_EQ(comm.simulations(), 1u);
  // Inside a machine: a ring of 8 over NVSwitch at NCCL's 0.8 of 300 GB/s, 2 (n - 1)/n S / B.
  const double tp = 2.0 * 7.0 / 8.0 * s.to_double() / (300e9 * r.c.scaleup_efficiency);
  EXPECT_NEAR(r.less_launch(comm.collective(coll::Op::kAllReduce, s, Group::kTp)), tp, 0.01 * tp);
}

// Routed experts' gradients reduce over the expert-data-parallel group, tp x ep ranks apart
// (Megatron-Core's expert grid). tp 1, dp 16, ep 8 on two machines: eight groups {i, i + 8}, one per
// rail, so each two-rank all-reduce of S runs at S / B as in the test above, on the flow model and on
// the closed form alike.
TEST(FlowComm, ExpertDataParallelGroupsPairTheMachinesRailByRail) {
  const Rig r;
  const net::Topology t = fabric(2, 1.0);
  Plan p;
  p.dp = 16;
  p.ep = 8;
  p.gbs = 16;
  p.seq = 1024;
  ASSERT_EQ(group_size(p, Group::kEdpShard), 2);
  const FlowComm comm(t, r.c, p);
  const Bytes s = Bytes::MiB(256);
  const double expect = s.to_double() / kNet;
  EXPECT_NEAR(r.less_launch(comm.collective(coll::Op::kAllReduce, s, Group::kEdpShard)), expect, 0.01 * expect);
  const AlphaBetaComm closed(r.c, p);
  EXPECT_NEAR(r.less_launch(closed.collective(coll::Op::kAllReduce, s, Group::kEdpShard)), expect, 0.01 * expect);
}

// Cross-rail ring hops relay over NVLink to the GPU on the destination's rail (NCCL's PXN, routing
// policy kRailAligned). tp 4, dp 4 on two machines: DP group {0, 4, 8, 12} has two members per machine
// and two channels; each channel's machine-crossing hop goes out through one NIC, a different one per
// channel and per group (groups {1, 5, 9, 13}, ... use NICs 1 and 5, ...), so every crossing runs at
// the NIC's rate: a ring all-gather sends (n - 1)/n S per rank, half per channel: 3/8 S / B. Without
// the relay, the crossings of different groups meet on rail leaves' uplinks (2x slower here).
TEST(FlowComm, CrossRailHopsRelayToTheDestinationRailLikeNcclPxn) {
  const Rig r;
  const net::Topology t = fabric(2, 1.0);
  Plan p = tp8(4);
  p.tp = 4;
  const FlowComm comm(t, r.c, p);
  const Bytes s = Bytes::MiB(256);
  const double expect = 3.0 / 8.0 * s.to_double() / kNet;
  EXPECT_NEAR(r.less_launch(comm.collective(coll::Op::kAllGather, s, Group::kDp)), expect, 0.01 * expect);
}

// All-to-all over 16 machines (tp 8, dp 16: eight DP groups of 16, one per rail; each rail has two
// leaves of 8 machines). Each rank sends S/16 to each of the 15 others. Per leaf, 8 ranks x 8 remote
// ranks x S/16 = 4 S leave through the uplinks, 8 x 50 GB/s / r in all. r = 8: one 50 GB/s uplink,
// 4 S / 50 GB/s, which the NICs (15/16 S at 50 GB/s each) do not limit; r = 1: the uplinks take 4 S at
// 400 GB/s = S / 100 GB/s, the NICs 15/16 S / 50 GB/s: NIC-bound. The alpha-beta model, which assumes
// full bisection, gives the r = 1 figure for both.
TEST(FlowComm, AllToAllAcrossAnOversubscribedTierSlowsToTheUplinkRate) {
  const Rig r;
  const Bytes s = Bytes::MiB(64);
  const net::Topology full = fabric(16, 1.0);
  const net::Topology thin = fabric(16, 8.0);
  const double nic_bound = 15.0 / 16.0 * s.to_double() / kNet;
  const double uplink_bound = 4.0 * s.to_double() / kNet;
  const Time t1 = FlowComm(full, r.c, tp8(16)).collective(coll::Op::kAllToAll, s, Group::kDp);
  const Time t8 = FlowComm(thin, r.c, tp8(16)).collective(coll::Op::kAllToAll, s, Group::kDp);
  EXPECT_NEAR(r.less_launch(t1), nic_bound, 0.03 * nic_bound);
  EXPECT_NEAR(r.less_launch(t8), uplink_bound, 0.03 * uplink_bound);
}

// Pipeline transfers: tp 8, pp 2 on two machines: every GPU of machine 0 sends to the same GPU of
// machine 1 on its own rail at once: S / B each.
TEST(FlowComm, PipelineTransfersRunOnEveryBoundaryAtOnce) {
  const Rig r;
  const net::Topology t = fabric(2, 1.0);
  Plan p = tp8(1);
  p.pp = 2;
  const FlowComm comm(t, r.c, p);
  const Bytes s = Bytes::MiB(64);
  const double expect = s.to_double() / kNet;
  EXPECT_NEAR(comm.p2p(s).to_seconds(), expect, 0.01 * expect);
}

TEST(FlowComm, ATopologyOfAnotherSizeIsAnInputError) {
  const Rig r;
  const net::Topology t = fabric(2, 1.0);
  EXPECT_THROW(FlowComm(t, r.c, tp8(4)), InputError);
}

// End to end: a step timed on a topology runs, is deterministic, and with a fabric that does not
// contend (two machines, one rail leaf per group) lands within 2% of the alpha-beta model's step: both
// charge the same bandwidth terms (same link efficiencies, same algorithm), and differ only in per-step
// latency and chunk pipelining, small next to the bandwidth terms (0.05% apart when written).
TEST(FlowComm, EvaluateTimesTheStepOnTheTopology) {
  const Rig r;
  const compute::ComputeModel cm(r.gpu);
  const auto model = model::ModelSpec::llama({8, 2048, 16, 16, 8192, 32000, 1024});
  const net::Topology t = fabric(2, 1.0);
  Plan p = tp8(2);
  p.gbs = 8;
  p.sp = true;
  EvaluateOptions flow;
  flow.topology = &t;
  const TrainResult a = evaluate(model, p, r.c, cm, flow);
  const TrainResult b = evaluate(model, p, r.c, cm, flow);
  const TrainResult ab = evaluate(model, p, r.c, cm);
  EXPECT_EQ(a.step.step_time, b.step.step_time);
  EXPECT_GT(a.step.step_time, Time::zero());
  EXPECT_NEAR(a.step.step_time / ab.step.step_time, 1.0, 0.02);
  EXPECT_EQ(a.memory.peak, ab.memory.peak);
}

// NVLS (Hopper NVLink SHARP) in the flow model: two machines, tp 8, dp 2, NVLS at NCCL's 0.85. The TP
// all-reduce of 256 MiB runs on both machines at once, each group reducing in its own NVSwitch
// (Program::switch_peer), scale-up links at 300 GB/s x 0.80 (NVLink 3's figure, the test GPU's) x 0.85 x
// 15/16 = 191.25 GB/s. Every GPU moves 9/8 S each way: at least 9/8 S / 191.25 GB/s = 1578.9 us, plus
// NCCL's 25 us NVLS latency in place of the ring's launch; the closed form AlphaBetaComm uses, 25 us +
// 9/8 S / B, is 1604.0 us. The flow run adds the pipeline's fill and drain: the downlinks idle while the
// first chunk of every slice is read and summed, and the last multicasts drain alone, each about one
// round of n chunks at the NVLS rate (8 x 128 KiB / 191.25 GB/s = 5.48 us); allowing four rounds (the
// one-machine program of coll/programs_test.cc needs 2.7): at most 1604.0 + 21.9 us. The ring it
// replaces: 14 x 0.47 us + 1.75 S / 240 GB/s + 6.8 us = 1970.4 us.
TEST(FlowComm, TensorParallelAllReduceRunsAsNvlsInEachMachine) {
  Rig r;
  r.c.nvls_efficiency = 0.85;
  const net::Topology t = fabric(2, 1.0);
  const FlowComm comm(t, r.c, tp8(2));
  const AlphaBetaComm closed(r.c, tp8(2));
  const Bytes s = Bytes::MiB(256);
  ASSERT_TRUE(closed.uses_nvls(coll::Op::kAllReduce, s, Group::kTp));
  const Time ab = closed.collective(coll::Op::kAllReduce, s, Group::kTp);
  EXPECT_NEAR(ab.to_us(), 25 + 1.125 * s.to_double() / 191.25e9 * 1e6, 0.01);
  const Time flow = comm.collective(coll::Op::kAllReduce, s, Group::kTp);
  EXPECT_GE(flow.to_us(), 25 + 1.125 * s.to_double() / 191.25e9 * 1e6);
  EXPECT_LE(flow.to_us(), ab.to_us() + 4 * 8 * 131072 / 191.25e9 * 1e6);
  // Without NVLS the same call is the ring.
  Rig ring;
  const FlowComm rings(t, ring.c, tp8(2));
  EXPECT_GE(rings.collective(coll::Op::kAllReduce, s, Group::kTp).to_us(), 1.75 * s.to_double() / 240e9 * 1e6);
}

}  // namespace
}  // namespace orrery::train
