// Slow links in training (train/comm_model.h SlowLink, EvaluateOptions::slow_links).
#include <gtest/gtest.h>

#include "train/test_support.h"

#include "compute/compute_model.h"
#include "train/comm_model.h"
#include "train/train.h"

namespace orrery::train {
namespace {

using testing::test_gpu;

// 8 GPUs per machine, NVLink 300 GB/s per direction, one 50 GB/s NIC per GPU.
ClusterSpec cluster_of(const hw::GpuSpec& gpu) { return ClusterSpec::from_catalog(gpu, nullptr, 8, Bandwidth(50e9)); }

// tp 8 fills a machine; dp 2 spans two machines (stride 8: one member per machine).
Plan tp8_dp2() {
  Plan p;
  p.tp = 8;
  p.dp = 2;
  p.gbs = 8;
  p.seq = 1024;
  p.sp = true;
  return p;
}

// A ring runs at its slowest link: a NIC at half rate halves the network level of a group that spans
// machines (DP here) and leaves a machine-local group (TP) alone; a slow NVLink port does the opposite.
TEST(SlowLink, DividesTheBandwidthOfTheLevelItSlows) {
  const hw::GpuSpec gpu = test_gpu();
  const ClusterSpec c = cluster_of(gpu);
  const Plan p = tp8_dp2();
  const AlphaBetaComm nominal(c, p);
  const AlphaBetaComm nic(c, p, LinkFactors{2.0, 1.0});
  const AlphaBetaComm nvlink(c, p, LinkFactors{1.0, 4.0});
  const double net = nominal.params(Group::kDp).inter.bandwidth.bytes_per_second();
  const double scaleup = nominal.params(Group::kTp).intra.bandwidth.bytes_per_second();
  EXPECT_DOUBLE_EQ(nic.params(Group::kDp).inter.bandwidth.bytes_per_second(), net / 2.0);
  EXPECT_DOUBLE_EQ(nic.params(Group::kTp).intra.bandwidth.bytes_per_second(), scaleup);
  EXPECT_EQ(nic.collective(coll::Op::kAllReduce, Bytes::MiB(64), Group::kTp),
            nominal.collective(coll::Op::kAllReduce, Bytes::MiB(64), Group::kTp));
  EXPECT_DOUBLE_EQ(nvlink.params(Group::kTp).intra.bandwidth.bytes_per_second(), scaleup / 4.0);
  EXPECT_DOUBLE_EQ(nvlink.params(Group::kDp).inter.bandwidth.bytes_per_second(), net);
  // Two ranks, one per machine: the all-reduce is one network ring of 2 (dp 2, stride 8), and the time
  // grows by the bandwidth term 2 (n - 1)/n S / B = S / B at half the rate: S / (B / 2) - S / B = S / B.
  const Bytes s = Bytes::MiB(256);
  const Time t1 = nominal.collective(coll::Op::kAllReduce, s, Group::kDp);
  const Time t2 = nic.collective(coll::Op::kAllReduce, s, Group::kDp);
  EXPECT_NEAR((t2 - t1).to_seconds(), s.to_double() / net, 1e-9);
}

// Pipeline transfers across machines (tp 8, pp 2: stride 8) go over the NIC: S / B more at half rate.
TEST(SlowLink, SlowsPipelineTransfersOverItsKind) {
  const hw::GpuSpec gpu = test_gpu();
  const ClusterSpec c = cluster_of(gpu);
  Plan p = tp8_dp2();
  p.dp = 1;
  p.pp = 2;
  const AlphaBetaComm nominal(c, p);
  const AlphaBetaComm nic(c, p, LinkFactors{2.0, 1.0});
  const Bytes s = Bytes::MiB(32);
  const double b = c.nic_bandwidth.bytes_per_second() * c.network_efficiency;
  EXPECT_NEAR((nic.p2p(s) - nominal.p2p(s)).to_seconds(), s.to_double() / b, 1e-9);
  const AlphaBetaComm nvlink(c, p, LinkFactors{1.0, 2.0});
  EXPECT_EQ(nvlink.p2p(s), nominal.p2p(s));
}

struct Job {
  hw::GpuSpec gpu = test_gpu();
  ClusterSpec cluster = cluster_of(gpu);
  compute::ComputeModel cm{gpu};
  model::ModelSpec model = model::ModelSpec::llama({8, 2048, 16, 16, 8192, 32000, 1024});
};

TrainResult eval(const Job& j, const Plan& p, std::vector<SlowLink> links) {
  EvaluateOptions o;
  o.slow_links = std::move(links);
  return evaluate(j.model, p, j.cluster, j.cm, o);
}

// End to end: a factor of 1 changes nothing; a slow NIC on a job that never leaves a machine (tp 8 on 8
// GPUs) changes nothing; a slow NVLink port slows that job's TP collectives; a slow NIC on a rank of
// the second stage of tp 8, pp 2 slows the step, and the step is the same whichever rank of that stage
// holds it (the stage is simulated as its slowest rank).
TEST(SlowLink, ChangesTheStepOnlyWhereItsLinkIsUsed) {
  const Job j;
  Plan local = tp8_dp2();
  local.dp = 1;
  local.tp_comm_overlap = false;
  const TrainResult base = eval(j, local, {});
  EXPECT_EQ(eval(j, local, {SlowLink{3, LinkKind::kNic, 1.0}}).step.step_time, base.step.step_time);
  EXPECT_EQ(eval(j, local, {SlowLink{3, LinkKind::kNic, 8.0}}).step.step_time, base.step.step_time);
  const TrainResult slow_tp = eval(j, local, {SlowLink{3, LinkKind::kScaleup, 2.0}});
  EXPECT_GT(slow_tp.step.breakdown[static_cast<size_t>(TimeCategory::kTp)],
            base.step.breakdown[static_cast<size_t>(TimeCategory::kTp)]);
  EXPECT_GT(slow_tp.step.step_time, base.step.step_time);

  Plan pp2 = tp8_dp2();
  pp2.dp = 1;
  pp2.pp = 2;
  const TrainResult p0 = eval(j, pp2, {});
  const TrainResult a = eval(j, pp2, {SlowLink{8, LinkKind::kNic, 50.0}});
  const TrainResult b = eval(j, pp2, {SlowLink{15, LinkKind::kNic, 50.0}});
  EXPECT_GT(a.step.step_time, p0.step.step_time);
  EXPECT_EQ(a.step.step_time, b.step.step_time);
  EXPECT_EQ(a.memory.peak, p0.memory.peak);  // memory does not depend on link speed
}

}  // namespace
}  // namespace orrery::train
