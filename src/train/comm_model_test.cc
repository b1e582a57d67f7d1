// The alpha-beta communication model of training (train/comm_model.h): NVLS and NVLink domains.
#include "train/comm_model.h"

#include <gtest/gtest.h>

namespace orrery::train {
namespace {

// An H100 machine as the catalog describes a DGX H100: 8 GPUs on an NVSwitch, NVLink 450 GB/s per
// direction at NCCL's Hopper figure 0.824 (370.8 GB/s), NVLink SHARP at NCCL's 0.85.
ClusterSpec h100_machine() {
  ClusterSpec c;
  c.gpus_per_node = 8;
  c.scaleup_bandwidth = Bandwidth(450e9);
  c.scaleup_efficiency = 0.824;
  c.nvls_efficiency = 0.85;
  c.nic_bandwidth = Bandwidth(50e9);
  return c;
}

Plan tp(int64_t degree) {
  Plan p;
  p.tp = degree;
  p.gbs = 8;
  p.seq = 1024;
  return p;
}

TEST(AlphaBetaComm, TensorParallelAllReduceRunsAsNvlsWhenThatIsFaster) {
  // TP 8 all-reduce of S = 256 MiB. Ring: 14 x 0.47 us + 1.75 S / 370.8 GB/s + 6.8 us (baseLat) =
  // 1280.27 us. NVLS: 25 us + 1.125 S / (370.8 x 0.85 x 15/16 = 295.48 GB/s) = 1047.03 us: NVLS.
  // At 64 KiB NCCL's tree (2 log2 8 x 0.47 us + 2 S / 370.8 GB/s + 6.8 us = 9.97 us; the ring: 13.69 us)
  // beats NVLS's 25.25 us. Reduce-scatter (sequence parallelism) stays a
  // ring: NVLS moves S per link against the ring's 7/8 S, after a larger latency.
  const ClusterSpec c = h100_machine();
  const AlphaBetaComm comm(c, tp(8));
  EXPECT_NEAR(comm.collective(coll::Op::kAllReduce, Bytes::MiB(256), Group::kTp).to_us(), 1047.027, 0.01);
  EXPECT_NEAR(comm.collective(coll::Op::kAllReduce, Bytes::KiB(64), Group::kTp).to_us(), 9.973, 0.01);
  ClusterSpec no_sharp = c;
  no_sharp.nvls_efficiency = 0.0;
  const AlphaBetaComm ring(no_sharp, tp(8));
  EXPECT_NEAR(ring.collective(coll::Op::kAllReduce, Bytes::MiB(256), Group::kTp).to_us(), 1280.268, 0.01);
  EXPECT_EQ(comm.collective(coll::Op::kReduceScatter, Bytes::MiB(256), Group::kTp),
            ring.collective(coll::Op::kReduceScatter, Bytes::MiB(256), Group::kTp));
  EXPECT_NEAR(ring.collective(coll::Op::kReduceScatter, Bytes::MiB(256), Group::kTp).to_us(), 643.534, 0.01);
}

TEST(AlphaBetaComm, GroupsInsideAnNvlinkRackStayOnNvlink) {
  // GB200 NVL72: trays of 4 GPUs, 72 GPUs on one NVLink switch domain. A TP 8 group spans two trays but
  // one domain: one level (scale-up), 8 members per "node". Counted per tray, it would cross the network.
  ClusterSpec c;
  c.gpus_per_node = 4;
  c.scaleup_domain_gpus = 72;
  c.scaleup_bandwidth = Bandwidth(900e9);
  c.nic_bandwidth = Bandwidth(50e9);
  EXPECT_EQ(AlphaBetaComm(c, tp(8)).params(Group::kTp).ranks_per_node, 8);
  ClusterSpec per_tray = c;
  per_tray.scaleup_domain_gpus = 0;
  EXPECT_EQ(AlphaBetaComm(per_tray, tp(8)).params(Group::kTp).ranks_per_node, 4);
  // Pipeline stages 8 ranks apart (tp 8, pp 2) are neighbours in the rack: S / (900 GB/s x 0.8) + 0.47 us.
  Plan p = tp(8);
  p.pp = 2;
  const Bytes s = Bytes::MiB(72);
  EXPECT_NEAR(AlphaBetaComm(c, p).p2p(s).to_us(), 0.47 + s.to_double() / 720e9 * 1e6, 1e-3);
  EXPECT_NEAR(AlphaBetaComm(per_tray, p).p2p(s).to_us(), 2.7 + s.to_double() / (50e9 * 4096.0 / 4122.0) * 1e6, 1e-3);
}

}  // namespace
}  // namespace orrery::train
