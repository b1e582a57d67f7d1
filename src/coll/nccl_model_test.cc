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

// ---- NVLS ------------------------------------------------------------------------------------------
TEST(NcclModel, NvlsRunsTheSwitchProgramAtItsOwnEfficiencyAndLatency) {
  // 8 GPUs on an NVSwitch at 400 GB/s, the plain calibration (efficiency 1, 10 us per call), NVLS
  // efficiency 0.8 over 16 channels: links at 400 x 0.8 x 15/16 = 300 GB/s. S = 24 MiB with 3 MiB chunks
  // (one per slice), so the four hops run in turn (coll/programs.cc): 24 MiB / 300 GB/s = 83.88608 us of
  // reads, 3 MiB / 300 GB/s = 10.48576 us down to the owner and as much back up, 83.88608 us of
  // multicast: 188.74368 us, no per-hop latency; launch 10 + 25 (hwLat[NVLINK][NVLS]) = 35 us.
  const net::Topology node = nvswitch_machines(1, 8, Bandwidth(400e9), Bandwidth(25e9));
  NcclOptions o;
  o.algorithm = Algorithm::kNvls;
  o.nvls_efficiency = 0.8;
  o.nvls_chunk = Bytes::MiB(3);
  const NcclPrediction p = predict_nccl(node, Op::kAllReduce, Bytes::MiB(24), plain(), o);
  EXPECT_EQ(p.algorithm, Algorithm::kNvls);
  EXPECT_EQ(p.protocol, Protocol::kSimple);
  EXPECT_EQ(p.launch, Time::us(35));
  EXPECT_NEAR(p.time.to_us(), 35 + 188.74368, 1e-3);
}

TEST(NcclModel, NvlsWinsLargeAllReducesAndTheRingSmallOnes) {
  // Same node, NVLS efficiency 0.85 (Hopper): NVLS links at 400 x 0.85 x 15/16 = 318.75 GB/s.
  // 256 MiB: ring Simple 1.75 x 256 MiB / 400 GB/s = 1174 us; NVLS 1.125 x 256 MiB / 318.75 GB/s = 947
  // us: NVLS. 32 KiB: ring LL 10 + 6.6 + 14 x 0.6 = 25 us + 1.75 x 32 KiB / 100 GB/s = 0.6 us; NVLS at
  // least 10 + 25 = 35 us: the ring. Reduce-scatter and all-gather move S per link with NVLS against
  // the ring's 7/8 S: the ring, at any size. Without NVLS efficiency (A100) it is never considered.
  const net::Topology node = nvswitch_machines(1, 8, Bandwidth(400e9), Bandwidth(25e9));
  NcclOptions o;
  o.nvls_efficiency = 0.85;
  EXPECT_EQ(predict_nccl(node, Op::kAllReduce, Bytes::MiB(256), plain(), o).algorithm, Algorithm::kNvls);
  EXPECT_EQ(predict_nccl(node, Op::kAllReduce, Bytes::KiB(32), plain(), o).algorithm, Algorithm::kRing);
  EXPECT_EQ(predict_nccl(node, Op::kReduceScatter, Bytes::MiB(256), plain(), o).algorithm, Algorithm::kRing);
  EXPECT_EQ(predict_nccl(node, Op::kAllGather, Bytes::MiB(256), plain(), o).algorithm, Algorithm::kRing);
  o.nvls_efficiency = 0.0;
  EXPECT_EQ(predict_nccl(node, Op::kAllReduce, Bytes::MiB(256), plain(), o).algorithm, Algorithm::kRing);
  // Forcing the ring keeps it.
  o.nvls_efficiency = 0.85;
  o.algorithm = Algorithm::kRing;
  EXPECT_EQ(predict_nccl(node, Op::kAllReduce, Bytes::MiB(256), plain(), o).algorithm, Algorithm::kRing);
}

TEST(NcclModel, NvlsNeedsSharpGpusOneSwitchAndAReduction) {
  const net::Topology node = nvswitch_machines(1, 8, Bandwidth(400e9), Bandwidth(25e9));
  NcclOptions o;
  o.algorithm = Algorithm::kNvls;
  EXPECT_THROW(predict_nccl(node, Op::kAllReduce, Bytes::MiB(64), plain(), o), InputError);  // efficiency 0
  o.nvls_efficiency = 0.85;
  EXPECT_THROW(predict_nccl(node, Op::kBroadcast, Bytes::MiB(64), plain(), o), InputError);
  EXPECT_THROW(predict_nccl(nvswitch_machines(2, 8, Bandwidth(400e9), Bandwidth(25e9)), Op::kAllReduce, Bytes::MiB(64),
                            plain(), o),
               InputError);
  o.algorithm = Algorithm::kTree;
  EXPECT_THROW(predict_nccl(node, Op::kAllReduce, Bytes::MiB(64), plain(), o), InputError);
  // Two machines with NVLS enabled but not forced: the ring, as NCCL without CollNet (NVLS across
  // machines is NVLS_TREE over SHARP switches, not modelled).
  o.algorithm = Algorithm::kAuto;
  EXPECT_EQ(predict_nccl(nvswitch_machines(2, 8, Bandwidth(400e9), Bandwidth(25e9)), Op::kAllReduce, Bytes::MiB(64),
                         plain(), o)
                .algorithm,
            Algorithm::kRing);
}

TEST(NcclModel, PerGenerationConstantsAreNcclsOwn) {
  // NVIDIA/nccl src/graph/tuning.cc nvlsEfficiency: Ampere 0, Hopper 0.85, Blackwell 0.74; src/graph/topo.h
  // SM80/SM90/SM100_NVLINK_BW 20.0, 20.6, 40.1 GB/s per link of 25, 25, 50 GB/s.
  EXPECT_EQ(nccl_nvls_efficiency("ampere", true), 0.0);
  EXPECT_EQ(nccl_nvls_efficiency("hopper", true), 0.85);
  EXPECT_EQ(nccl_nvls_efficiency("blackwell", true), 0.74);
  EXPECT_EQ(nccl_nvls_efficiency("hopper", false), 0.0);
  EXPECT_DOUBLE_EQ(nccl_tests_calibration().collective.scaleup, 0.80);
  EXPECT_DOUBLE_EQ(nccl_tests_calibration("ampere").collective.scaleup, 0.80);
  EXPECT_DOUBLE_EQ(nccl_tests_calibration("hopper").collective.scaleup, 0.824);
  EXPECT_DOUBLE_EQ(nccl_tests_calibration("blackwell").p2p.scaleup, 0.802);
}

}  // namespace
}  // namespace orrery::coll
