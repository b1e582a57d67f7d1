#include "coll/nccl_model.h"

#include <gtest/gtest.h>

#include "net/topology_builders.h"

namespace orrery::coll {
namespace {

net::Topology nvswitch_machines(int32_t machines, int32_t g, Bandwidth nvlink, Bandwidth nic) {
  net::FatTreeSpec s;
  s.machines = machines;
  s.gpus_per_machine = g;
  s.intra_node = hw::IntraNode::kNvswitch;
  s.scaleup_bandwidth = nvlink;
  s.pcie_bandwidth = Bandwidth(32e9);
  s.nic_bandwidth = nic;
  return net::fat_tree(s);
}

// A calibration with round numbers and nothing hidden: every efficiency 1 unless set.
NcclCalibration plain() {
  NcclCalibration c;
  c.name = "plain";
  c.collective_overhead = Time::us(10);
  c.p2p_overhead = Time::us(5);
  return c;
}

TEST(NcclProtocolConstants, AreThoseOfTuningCc) {
  // NVIDIA/nccl src/graph/tuning.cc, ring: baseLat {6.6, 14, 8.4} us; hwLat NVLink {0.6, 1.9, 3.4},
  // PCI {1.0, 2.5, 5.7}, NET {2.7, 4.0, 14.0} us for {LL, LL128, Simple}.
  const ProtocolConstants simple = nccl_protocol_constants(Protocol::kSimple, Op::kAllReduce, 1, 8);
  EXPECT_EQ(simple.base_latency, Time::ns(8400));
  EXPECT_EQ(simple.hop_scaleup, Time::ns(3400));
  EXPECT_EQ(simple.hop_pcie, Time::ns(5700));
  EXPECT_EQ(simple.hop_network, Time::ns(14000));
  EXPECT_EQ(simple.bandwidth_factor, 1.0);
  const ProtocolConstants ll128 = nccl_protocol_constants(Protocol::kLL128, Op::kAllReduce, 1, 8);
  EXPECT_EQ(ll128.base_latency, Time::ns(14000));
  EXPECT_EQ(ll128.hop_scaleup, Time::ns(1900));
  EXPECT_DOUBLE_EQ(ll128.bandwidth_factor, 0.92);
  // One rank per node: LL128 sends and receives through the same NIC, 0.7.
  EXPECT_DOUBLE_EQ(nccl_protocol_constants(Protocol::kLL128, Op::kAllReduce, 2, 1).bandwidth_factor, 0.7);
  const ProtocolConstants ll = nccl_protocol_constants(Protocol::kLL, Op::kAllReduce, 1, 8);
  EXPECT_EQ(ll.base_latency, Time::ns(6600));
  EXPECT_EQ(ll.hop_network, Time::ns(2700));
  EXPECT_DOUBLE_EQ(ll.bandwidth_factor, 0.25);
  // LL all-gather inside one node: 1/3; on two nodes: 1/4.
  EXPECT_DOUBLE_EQ(nccl_protocol_constants(Protocol::kLL, Op::kAllGather, 1, 8).bandwidth_factor, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(nccl_protocol_constants(Protocol::kLL, Op::kAllGather, 2, 8).bandwidth_factor, 0.25);
}

TEST(NcclModel, TwoRankRingOnNvswitchIsTheAlphaBetaForm) {
  // 2 GPUs on an NVSwitch at 300 GB/s, scale-up efficiency 0.5: B = 150 GB/s per rank. Ring all-reduce
  // of S = 64 MiB with Simple: launch 10 + 8.4 us, then each rank sends 2 (n-1)/n S = S over its link:
  // S / B = 447.392 us. The ring's two steps overlap chunk by chunk, so one 3.4 us hop is exposed, not
  // two: expected 10 + 8.4 + 3.4 + 447.392 = 469.19 us (the closed form's 2 hops give 472.59).
  NcclCalibration cal = plain();
  cal.collective.scaleup = 0.5;
  NcclOptions o;
  o.choose_protocol = false;
  const NcclPrediction p = predict_nccl(nvswitch_machines(1, 2, Bandwidth(300e9), Bandwidth(25e9)), Op::kAllReduce,
                                        Bytes::MiB(64), cal, o);
  EXPECT_EQ(p.protocol, Protocol::kSimple);
  EXPECT_EQ(p.launch, Time::ns(18400));
  EXPECT_NEAR(p.time.to_us(), 469.19, 0.5);
}

TEST(NcclModel, SendRecvIsOneMessageAtTheP2pEfficiency) {
  // 64 MiB from rank 0 to rank 1 over NVLink at 0.8 x 300 = 240 GB/s: 5 + 3.4 + 279.62 = 288.02 us.
  NcclCalibration cal = plain();
  cal.p2p.scaleup = 0.8;
  const NcclPrediction p =
      predict_nccl(nvswitch_machines(1, 2, Bandwidth(300e9), Bandwidth(25e9)), Op::kSendRecv, Bytes::MiB(64), cal);
  EXPECT_EQ(p.protocol, Protocol::kSimple);
  EXPECT_NEAR(p.time.to_us(), 288.02, 0.3);
  // Up to 16 KiB NCCL sends point-to-point messages with LL.
  EXPECT_EQ(predict_nccl(nvswitch_machines(1, 2, Bandwidth(300e9), Bandwidth(25e9)), Op::kSendRecv, Bytes::KiB(16), cal)
                .protocol,
            Protocol::kLL);
}

TEST(NcclModel, NetworkWindowOfOneMakesEveryChunkPayTheHopLatency) {
  // Two machines with one GPU each; the NIC port runs at 0.4 x 25 = 10 GB/s (PCIe 32 GB/s is not the
  // bottleneck); a network hop costs 14 (NCCL) + 6 = 20 us. Ring all-reduce of 64 MiB, Simple, chunks of
  // 512 KiB: each rank sends S = 64 MiB = 128 chunks over one connection.
  //   no window: the chunks pipeline, 20 + S / b = 20 + 6710.89 = 6730.89 us;
  //   window 1: each chunk costs h + c/b = 20 + 52.43 us in series: 128 x 72.43 = 9270.89 us,
  //   i.e. an effective 1 / (h/c + 1/b) = 7.24 GB/s.
  // Launch: 10 + 8.4 us in both.
  NcclCalibration cal = plain();
  cal.collective.network = 0.4;
  cal.network_hop_extra = Time::us(6);
  NcclOptions o;
  o.choose_protocol = false;
  const net::Topology topo = nvswitch_machines(2, 1, Bandwidth(300e9), Bandwidth(25e9));
  const NcclPrediction free_flow = predict_nccl(topo, Op::kAllReduce, Bytes::MiB(64), cal, o);
  EXPECT_NEAR(free_flow.time.to_us(), 18.4 + 6730.89, 0.005 * 6730.89);
  cal.network_window = 1;
  const NcclPrediction windowed = predict_nccl(topo, Op::kAllReduce, Bytes::MiB(64), cal, o);
  EXPECT_NEAR(windowed.time.to_us(), 18.4 + 9270.89, 0.005 * 9270.89);
  // The window holds network connections only: inside a machine it changes nothing.
  const net::Topology one = nvswitch_machines(1, 2, Bandwidth(300e9), Bandwidth(25e9));
  cal.network_window = 0;
  const Time a = predict_nccl(one, Op::kAllReduce, Bytes::MiB(64), cal, o).time;
  cal.network_window = 1;
  EXPECT_EQ(predict_nccl(one, Op::kAllReduce, Bytes::MiB(64), cal, o).time, a);
}

TEST(NcclModel, MultinodeOverheadIsPaidOnlyAcrossMachines) {
  // launch = overhead 10 + baseLat(Simple) 8.4 us, + 7 us when the collective spans machines.
  NcclCalibration cal = plain();
  cal.multinode_overhead = Time::us(7);
  NcclOptions o;
  o.choose_protocol = false;
  const net::Topology one = nvswitch_machines(1, 2, Bandwidth(300e9), Bandwidth(25e9));
  const net::Topology two = nvswitch_machines(2, 1, Bandwidth(300e9), Bandwidth(25e9));
  EXPECT_EQ(predict_nccl(one, Op::kAllReduce, Bytes::MiB(1), cal, o).launch, Time::ns(18400));
  EXPECT_EQ(predict_nccl(two, Op::kAllReduce, Bytes::MiB(1), cal, o).launch, Time::ns(25400));
}

TEST(NcclModel, ProtocolFollowsSizeAndLL128NeedsAnNvlinkRing) {
  // 8 A100s on NVSwitch with vidur's calibration (B = 168.86 GB/s). LL: 6.6 + 14 x 0.6 = 15 us of
  // latency but a quarter of the bandwidth; LL128: 14 + 14 x 1.9 = 40.6 us at 0.92; Simple: 8.4 + 14 x 3.4
  // = 56 us at 1. LL wins below ~0.1 MiB; LL128 wins while 15.4 us of latency outweigh 8.7% of
  // 1.75 S / B, up to S ~ 17 MB; Simple above.
  const NcclCalibration cal = vidur_a100_calibration();
  const net::Topology dgx = nvswitch_machines(1, 8, Bandwidth(300e9), Bandwidth(25e9));
  EXPECT_EQ(predict_nccl(dgx, Op::kAllReduce, Bytes::KiB(32), cal).protocol, Protocol::kLL);
  EXPECT_EQ(predict_nccl(dgx, Op::kAllReduce, Bytes::MiB(4), cal).protocol, Protocol::kLL128);
  EXPECT_EQ(predict_nccl(dgx, Op::kAllReduce, Bytes::MiB(64), cal).protocol, Protocol::kSimple);
  // Four GPUs in NVLink pairs: the ring crosses PCIe twice, so NCCL leaves LL128 off.
  net::FatTreeSpec s;
  s.machines = 1;
  s.gpus_per_machine = 4;
  s.intra_node = hw::IntraNode::kNvlinkPairs;
  s.scaleup_bandwidth = Bandwidth(300e9);
  s.pcie_bandwidth = Bandwidth(32e9);
  s.nic_bandwidth = Bandwidth(25e9);
  EXPECT_EQ(predict_nccl(net::fat_tree(s), Op::kAllReduce, Bytes::MiB(4), cal).protocol, Protocol::kSimple);
}

TEST(NcclModel, SwitchToSwitchLinksTakeTheFabricEfficiency) {
  // Two machines, rail-optimized: NIC ports (NIC <-> leaf) are `network`, leaf <-> spine are `fabric`,
  // GPU <-> NIC is `pcie`, GPU <-> NVSwitch `scaleup`.
  const net::Topology topo = nvswitch_machines(2, 2, Bandwidth(300e9), Bandwidth(25e9));
  const LinkEfficiency e{0.1, 0.2, 0.3, 0.4};
  int seen[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < topo.num_links(); ++i) {
    const net::LinkId id = static_cast<net::LinkId>(i);
    const net::TopoLink& l = topo.link(id);
    const net::NodeKind a = topo.node(l.src).kind, b = topo.node(l.dst).kind;
    const double f = e.of(topo, id);
    if (l.kind == net::LinkKind::kScaleup) {
      EXPECT_EQ(f, 0.1);
      ++seen[0];
    } else if (l.kind == net::LinkKind::kPcie) {
      EXPECT_EQ(f, 0.2);
      ++seen[1];
    } else if (a == net::NodeKind::kSwitch && b == net::NodeKind::kSwitch) {
      EXPECT_EQ(f, 0.4);
      ++seen[3];
    } else {
      EXPECT_EQ(f, 0.3);
      ++seen[2];
    }
  }
  for (int k : seen) EXPECT_GT(k, 0);
}

TEST(NcclModel, RejectsATopologyWithOneGpu) {
  EXPECT_THROW(predict_nccl(nvswitch_machines(1, 1, Bandwidth(300e9), Bandwidth(25e9)), Op::kAllReduce, Bytes::MiB(1),
                            plain()),
               InputError);
}

}  // namespace
}  // namespace orrery::coll
