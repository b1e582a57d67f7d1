#include "net/topology.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>

#include "net/routing.h"
#include "net/topology_builders.h"

namespace orrery::net {
namespace {

// The message of the InputError that f throws, or "no error".
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "Expectation: contains \"" << part << "\"\n  Actual: \"" << text << "\"";
}

const Bandwidth kGBps(1e9);  // 1 GB/s

// Sum of the bandwidths of the links from nodes of `from` tier to nodes of `to` tier, for one node.
Bandwidth capacity(const Topology& t, NodeId n, bool outgoing, NodeKind far_kind, int32_t far_tier) {
  Bandwidth sum(0.0);
  for (LinkId l : outgoing ? t.out_links(n) : t.in_links(n)) {
    const TopoNode& far = t.node(outgoing ? t.link(l).dst : t.link(l).src);
    if (far.kind == far_kind && far.tier == far_tier) sum += t.link(l).bandwidth;
  }
  return sum;
}

// The leaf switch that NIC `nic` is cabled to.
NodeId leaf_of_nic(const Topology& t, NodeId nic) {
  for (LinkId l : t.out_links(nic)) {
    if (t.node(t.link(l).dst).tier == 1) return t.link(l).dst;
  }
  return kNoNode;
}

// ---- Topology ---------------------------------------------------------------------------------

TEST(Topology, GpuRanksFollowTheOrderGpusAreAdded) {
  Topology t;
  const NodeId sw = t.add_node(NodeKind::kSwitch, "sw");
  const NodeId a = t.add_gpu("a", 0);
  const NodeId b = t.add_gpu("b", 1);
  EXPECT_EQ(t.gpu(0), a);
  EXPECT_EQ(t.gpu(1), b);
  EXPECT_EQ(t.node(b).rank, 1);
  EXPECT_EQ(t.node(sw).rank, -1);
  EXPECT_FALSE(t.node(a).forwards);  // a GPU is an endpoint, not a router
  EXPECT_TRUE(t.node(sw).forwards);
}

TEST(Topology, DuplexIsOneLinkPerDirection) {
  Topology t;
  const NodeId a = t.add_gpu("a", 0);
  const NodeId b = t.add_gpu("b", 0);
  const auto [ab, ba] = t.add_duplex(a, b, Bandwidth(5e10), Time::ns(100), LinkKind::kScaleup);
  EXPECT_EQ(t.num_links(), 2u);
  EXPECT_EQ(t.link(ab).src, a);
  EXPECT_EQ(t.link(ab).dst, b);
  EXPECT_EQ(t.link(ba).src, b);
  EXPECT_EQ(t.link(ba).dst, a);
  ASSERT_EQ(t.out_links(a).size(), 1u);
  EXPECT_EQ(t.out_links(a)[0], ab);
  ASSERT_EQ(t.in_links(a).size(), 1u);
  EXPECT_EQ(t.in_links(a)[0], ba);
}

TEST(Topology, GpusPerMachineIsZeroUnlessUniform) {
  Topology t;
  t.add_gpu("a", 0);
  t.add_gpu("b", 0);
  t.add_gpu("c", 7);  // machine ids may be sparse
  EXPECT_EQ(t.num_machines(), 2);
  EXPECT_EQ(t.gpus_per_machine(), 0);  // 2 GPUs on machine 0, 1 on machine 7
  t.add_gpu("d", 7);
  EXPECT_EQ(t.gpus_per_machine(), 2);
  EXPECT_EQ(t.machine_of(3), 7);
}

TEST(Topology, SetRailRecordsNicAndRailOnGpuAndNic) {
  Topology t;
  t.add_gpu("g", 0);
  const NodeId nic = t.add_node(NodeKind::kNic, "nic");
  EXPECT_EQ(t.nic_of(0), kNoNode);
  EXPECT_EQ(t.rail_of(0), -1);
  t.set_rail(0, nic, 3);
  EXPECT_EQ(t.nic_of(0), nic);
  EXPECT_EQ(t.rail_of(0), 3);
  EXPECT_EQ(t.node(nic).rail, 3);
}

TEST(TopologyValidate, ZeroBandwidthNamesTheLinkByItsEndpoints) {
  Topology t;
  const NodeId a = t.add_gpu("n0.g0", 0);
  const NodeId b = t.add_gpu("n0.g1", 0);
  t.add_link(a, b, Bandwidth(1e9), Time::zero(), LinkKind::kScaleup);
  t.add_link(b, a, Bandwidth(0.0), Time::zero(), LinkKind::kScaleup);
  EXPECT_EQ(error_of([&] {
              t.validate(Where{"topo.txt", 0, {}});
            }),
            "topo.txt: link 'n0.g1' -> 'n0.g0' has bandwidth 0 B/s; every link needs a positive bandwidth");
}

TEST(TopologyValidate, NegativeLatencyAndSelfLinksAreErrors) {
  Topology t;
  const NodeId a = t.add_gpu("a", 0);
  const NodeId b = t.add_gpu("b", 0);
  t.add_duplex(a, b, Bandwidth(1e9), Time::ns(-1), LinkKind::kScaleup);
  EXPECT_TRUE(contains(error_of([&] { t.validate({}); }), "link 'a' -> 'b' has negative latency"));

  Topology u;
  const NodeId c = u.add_gpu("c", 0);
  u.add_link(c, c, Bandwidth(1e9), Time::zero(), LinkKind::kScaleup);
  EXPECT_TRUE(contains(error_of([&] { u.validate({}); }), "link 'c' -> 'c' connects a node to itself"));
}

TEST(TopologyValidate, NoGpusIsAnError) {
  Topology t;
  t.add_node(NodeKind::kSwitch, "lonely");
  EXPECT_EQ(error_of([&] { t.validate({}); }), "topology has no GPUs");
}

TEST(TopologyValidate, DisconnectedMachinesNameAGpuPair) {
  // Two machines, each GPU pair on its own switch, no network between them.
  Topology t;
  for (int m = 0; m < 2; ++m) {
    const NodeId sw = t.add_node(NodeKind::kSwitch, "n" + std::to_string(m) + ".sw");
    for (int g = 0; g < 2; ++g) {
      const NodeId gpu = t.add_gpu("n" + std::to_string(m) + ".g" + std::to_string(g), m);
      t.add_duplex(gpu, sw, Bandwidth(1e9), Time::zero(), LinkKind::kScaleup);
    }
  }
  // Pivot = n0.sw (gpu 0's first forwarding neighbour); the first GPU it cannot reach is n1.g0,
  // which also cannot reach it, so the search runs forward from n1.g0 and n0.g0 is the first miss.
  EXPECT_EQ(error_of([&] { t.validate({}); }), "topology is disconnected: gpu 'n1.g0' cannot reach gpu 'n0.g0'");
}

TEST(TopologyValidate, OneWayLinkNamesTheGpuThatCannotReply) {
  Topology t;
  const NodeId sw = t.add_node(NodeKind::kSwitch, "sw");
  const NodeId a = t.add_gpu("a", 0);
  const NodeId b = t.add_gpu("b", 1);
  t.add_duplex(a, sw, Bandwidth(1e9), Time::zero(), LinkKind::kNetwork);
  t.add_link(sw, b, Bandwidth(1e9), Time::zero(), LinkKind::kNetwork);  // b can receive but not send
  EXPECT_EQ(error_of([&] { t.validate({}); }), "topology is disconnected: gpu 'b' cannot reach gpu 'a'");
}

TEST(TopologyValidate, GpusDoNotForwardUnlessTold) {
  // A chain g0 - g1 - g2 of direct links: g0 reaches g2 only through g1.
  Topology t;
  const NodeId g0 = t.add_gpu("g0", 0);
  const NodeId g1 = t.add_gpu("g1", 1);
  const NodeId g2 = t.add_gpu("g2", 2);
  t.add_duplex(g0, g1, Bandwidth(1e9), Time::zero(), LinkKind::kScaleup);
  t.add_duplex(g1, g2, Bandwidth(1e9), Time::zero(), LinkKind::kScaleup);
  EXPECT_EQ(error_of([&] { t.validate({}); }), "topology is disconnected: gpu 'g0' cannot reach gpu 'g2'");
  t.set_forwards(g1, true);
  EXPECT_EQ(error_of([&] { t.validate({}); }), "no error");
}

TEST(TopologyValidate, SwitchlessFullMeshIsConnected) {
  // Four GPUs with a direct link between every pair (an xGMI mesh): no forwarding node at all, so
  // validate() falls back to one search per GPU.
  Topology t;
  for (int i = 0; i < 4; ++i) t.add_gpu("g" + std::to_string(i), 0);
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j)
      t.add_duplex(t.gpu(i), t.gpu(j), Bandwidth(6.4e10), Time::zero(), LinkKind::kScaleup);
  }
  EXPECT_EQ(error_of([&] { t.validate({}); }), "no error");
}

// ---- two_level --------------------------------------------------------------------------------

TwoLevelSpec benchmark_two_level(int32_t machines) {
  // The 2-level network of shared/validation/collectives.md: 8 GPUs per machine at 400 GB/s and
  // 936 ns; machines at 50 GB/s per GPU and 2 us.
  return TwoLevelSpec{machines, 8, kGBps * 400, Time::ns(936), kGBps * 50, Time::us(2)};
}

TEST(TwoLevel, HasOneNvswitchPerMachineAndOneNetworkSwitch) {
  const Topology t = two_level(benchmark_two_level(4));
  // nodes: 32 GPUs + 4 NVSwitches + 1 network switch = 37.
  // links: each GPU has up + down to its NVSwitch and up + down to the network switch: 32 x 4 = 128.
  EXPECT_EQ(t.num_gpus(), 32);
  EXPECT_EQ(t.num_nodes(), 37u);
  EXPECT_EQ(t.num_links(), 128u);
  EXPECT_EQ(t.gpus_per_machine(), 8);
  EXPECT_EQ(t.machine_of(9), 1);  // rank 9 = machine 1, GPU 1
  EXPECT_TRUE(contains(t.description, "4 machines x 8 GPUs, 32 GPUs"));
}

TEST(TwoLevel, OddPicosecondLatencyGoesOnTheUplink) {
  TwoLevelSpec s = benchmark_two_level(2);
  s.scaleup_latency = Time::ps(1001);  // 501 up + 500 down
  const Topology t = two_level(s);
  const LinkId up = t.out_links(t.gpu(0))[0];   // GPU -> NVSwitch, added first
  const LinkId down = t.in_links(t.gpu(0))[0];  // NVSwitch -> GPU
  EXPECT_EQ(t.link(up).latency, Time::ps(501));
  EXPECT_EQ(t.link(down).latency, Time::ps(500));
}

TEST(TwoLevel, InvalidSpecNamesTheField) {
  TwoLevelSpec s = benchmark_two_level(2);
  s.network_bandwidth = Bandwidth(0.0);
  EXPECT_EQ(error_of([&] {
              two_level(s, Where{"cluster.yaml", 4, "network"});
            }),
            "cluster.yaml:4: network.network_bandwidth: must be a positive bandwidth, got 0 B/s");
  s = benchmark_two_level(0);
  EXPECT_TRUE(contains(error_of([&] { two_level(s); }), "machines: must be at least 1, got 0"));
}

// ---- fat_tree ---------------------------------------------------------------------------------

FatTreeSpec small_fat_tree(int32_t machines, int32_t radix) {
  FatTreeSpec s;
  s.machines = machines;
  s.gpus_per_machine = 8;
  s.radix = radix;
  s.nic_bandwidth = kGBps * 50;
  s.pcie_bandwidth = kGBps * 64;
  s.scaleup_bandwidth = kGBps * 450;
  return s;
}

TEST(FatTree, RailOptimizedTwoTierWiresOneLeafPerRail) {
  // radix 8: leaves have 4 down + 4 up ports; 4 machines x 8 NICs fill one scalable unit of 4
  // machines, with 8 leaves (one per rail) and 4 spines.
  const Topology t = fat_tree(small_fat_tree(4, 8));
  int leaves = 0;
  int spines = 0;
  for (size_t i = 0; i < t.num_nodes(); ++i) {
    const TopoNode& n = t.node(static_cast<NodeId>(i));
    if (n.kind == NodeKind::kSwitch && n.tier == 1) {
      ++leaves;
      // Each rail leaf holds NIC r of every machine: 4 NICs, all on its own rail.
      int nics = 0;
      for (LinkId l : t.in_links(static_cast<NodeId>(i))) {
        const TopoNode& far = t.node(t.link(l).src);
        if (far.kind == NodeKind::kNic) {
          ++nics;
          EXPECT_EQ(far.rail, n.rail) << n.name << " <- " << far.name;
        }
      }
      EXPECT_EQ(nics, 4) << n.name;
    }
    if (n.kind == NodeKind::kSwitch && n.tier == 2) ++spines;
  }
  EXPECT_EQ(leaves, 8);
  EXPECT_EQ(spines, 4);
  // nodes: 32 GPUs + 4 NVSwitch + 32 NICs + 8 leaves + 4 spines = 80
  // links: GPU-NVSwitch 64 + GPU-NIC 64 + NIC-leaf 64 + leaf-spine 2 x 8 x 4 = 64: 256
  EXPECT_EQ(t.num_nodes(), 80u);
  EXPECT_EQ(t.num_links(), 256u);
  EXPECT_EQ(t.rail_of(13), 5);  // rank 13 = machine 1, GPU 5 -> NIC 5 -> rail 5
  EXPECT_EQ(t.node(t.nic_of(13)).name, "m1.nic5");
}

TEST(FatTree, OversubscriptionDividesLeafUplinkCapacity) {
  // radix 16: 8 down ports per leaf; 8 machines fill every rail leaf. Uplinks: floor(8 / r), each at
  // 8 x 50 GB/s / (r x uplinks), so that up : down capacity = 1 : r exactly.
  for (double r : {1.0, 2.0, 3.0}) {
    FatTreeSpec s = small_fat_tree(8, 16);
    s.oversubscription = r;
    const Topology t = fat_tree(s);
    const NodeId leaf = leaf_of_nic(t, t.nic_of(0));
    ASSERT_NE(leaf, kNoNode);
    const Bandwidth down = capacity(t, leaf, /*outgoing=*/true, NodeKind::kNic, -1);
    const Bandwidth up = capacity(t, leaf, /*outgoing=*/true, NodeKind::kSwitch, 2);
    EXPECT_DOUBLE_EQ(down.bytes_per_second(), 8 * 50e9) << "r = " << r;
    EXPECT_DOUBLE_EQ(up / down, 1.0 / r) << "r = " << r;
  }
}

TEST(FatTree, TooManyMachinesForTwoTiersIsAnError) {
  // radix 8: at most 8 leaves under 8-port spines; 5 machines need 2 units x 8 rails = 16 leaves.
  EXPECT_TRUE(contains(error_of([] { fat_tree(small_fat_tree(5, 8)); }),
                       "machines: a 2-tier fat tree of radix 8 has spines of 8 ports, so at most 8 leaves; 5 machines "
                       "x 8 NICs need 16 leaves; use tiers = 3"));
}

TEST(FatTree, InvalidSpecNamesTheField) {
  FatTreeSpec s = small_fat_tree(4, 8);
  s.oversubscription = 0.5;
  EXPECT_TRUE(contains(error_of([&] { fat_tree(s); }), "oversubscription: must be a finite ratio >= 1"));
  s = small_fat_tree(4, 8);
  s.nic_bandwidth = Bandwidth(-1.0);
  EXPECT_TRUE(contains(error_of([&] { fat_tree(s); }), "nic_bandwidth: must be a positive bandwidth"));
  s = small_fat_tree(4, 8);
  s.tiers = 4;
  EXPECT_TRUE(contains(error_of([&] { fat_tree(s); }), "tiers: must be 2 or 3, got 4"));
  s = small_fat_tree(4, 7);
  EXPECT_TRUE(contains(error_of([&] { fat_tree(s); }), "radix: must be an even number of ports >= 2, got 7"));
  s = small_fat_tree(4, 8);
  s.nics_per_machine = 9;
  EXPECT_TRUE(contains(error_of([&] { fat_tree(s); }), "nics_per_machine: 9 NICs for 8 GPUs"));
  s = small_fat_tree(4, 8);
  s.latency.network = Time::ns(-5);
  EXPECT_TRUE(contains(error_of([&] { fat_tree(s); }), "latency.network: must not be negative"));
}

TEST(FatTree, ThreeTierWithFourThousandGpusHasLinearSize) {
  // 512 machines x 8 GPUs, radix 64, rail-optimized: 32 machines per unit, 32 / 8 = 4 units per pod,
  // 128 machines per pod -> 4 pods of 32 leaves; 32 aggregation switches per pod; 32 x 32 = 1,024 cores.
  FatTreeSpec s = small_fat_tree(512, 64);
  s.tiers = 3;
  const Topology t = fat_tree(s);
  // nodes: 4,096 GPUs + 512 NVSwitch + 4,096 NICs + 128 leaves + 128 aggregation + 1,024 core = 9,984
  // links: GPU-NVSwitch 8,192 + GPU-NIC 8,192 + NIC-leaf 8,192 + leaf-agg 2 x 128 x 32 = 8,192
  //        + agg-core 2 x 4 pods x 32 x 32 = 8,192: 40,960
  EXPECT_EQ(t.num_gpus(), 4096);
  EXPECT_EQ(t.num_nodes(), 9984u);
  EXPECT_EQ(t.num_links(), 40960u);
  EXPECT_TRUE(contains(t.description, "fat-tree 3-tier rail-optimized, 512 machines x 8 GPUs, 4096 GPUs, 1:1"));
}

TEST(FatTree, PlainFabricPacksConsecutiveNicsOnALeaf) {
  // Not rail-optimized, radix 8 (4 NICs per leaf), 2 GPUs per machine: machines 0 and 1 share leaf0.
  FatTreeSpec s = small_fat_tree(4, 8);
  s.gpus_per_machine = 2;
  s.rail_optimized = false;
  const Topology t = fat_tree(s);
  auto leaf_of = [&](int32_t rank) { return t.node(leaf_of_nic(t, t.nic_of(rank))).name; };
  EXPECT_EQ(leaf_of(0), "leaf0");
  EXPECT_EQ(leaf_of(3), "leaf0");  // machine 1, GPU 1: NIC number 3 -> leaf 3 / 4 = 0
  EXPECT_EQ(leaf_of(4), "leaf1");  // NIC number 4 -> leaf 1
}

// ---- spine_leaf, torus, nvswitch_domain ------------------------------------------------------

TEST(SpineLeaf, UplinkBandwidthFollowsTheOversubscription) {
  // 4 hosts x 100 GB/s per leaf = 400 GB/s down; 2 spines at 2:1 -> 2 uplinks of 100 GB/s each.
  SpineLeafSpec s{3, 4, 2, kGBps * 100, Bandwidth(0.0), 2.0, Time::ns(100)};
  const Topology t = spine_leaf(s);
  EXPECT_EQ(t.num_gpus(), 12);
  EXPECT_EQ(t.num_nodes(), 12u + 3u + 2u);
  const NodeId leaf0 = t.link(t.out_links(t.gpu(0))[0]).dst;
  EXPECT_DOUBLE_EQ(capacity(t, leaf0, true, NodeKind::kSwitch, 2).bytes_per_second(), 200e9);
  EXPECT_TRUE(contains(t.description, "2:1"));
  s.uplink_bandwidth = kGBps * 100;
  EXPECT_TRUE(
      contains(error_of([&] { spine_leaf(s); }), "oversubscription: give uplink_bandwidth or oversubscription"));
  s.oversubscription = 1.0;
  EXPECT_TRUE(contains(spine_leaf(s).description, "2:1"));  // 400 GB/s down over 2 x 100 GB/s up
}

TEST(Torus, EachGpuHasTwoLinksPerDimension) {
  // 4 x 4 x 4: 64 GPUs, 3 duplex links added per GPU (its +1 neighbour in x, y, z) = 384 links;
  // every GPU has 6 out-links.
  const Topology t = torus(TorusSpec{{4, 4, 4}, kGBps * 45, Time::ns(500), 4});
  EXPECT_EQ(t.num_gpus(), 64);
  EXPECT_EQ(t.num_links(), 384u);
  for (int32_t r = 0; r < 64; ++r) EXPECT_EQ(t.out_links(t.gpu(r)).size(), 6u);
  EXPECT_EQ(t.gpus_per_machine(), 4);
  EXPECT_TRUE(t.node(t.gpu(5)).forwards);
}

TEST(Torus, SizeTwoDimensionHasOneCable) {
  // 2 x 3: in x the +1 and -1 neighbours coincide, one duplex per row (3); in y a ring of 3 per
  // column (2 x 3 duplex). 9 duplex links = 18 links.
  const Topology t = torus(TorusSpec{{2, 3}, kGBps * 45, Time::ns(500), 1});
  EXPECT_EQ(t.num_links(), 18u);
}

TEST(Torus, InvalidDimensionsNameTheField) {
  EXPECT_TRUE(contains(error_of([] {
                         torus(TorusSpec{{8}, kGBps, Time::zero(), 1});
                       }),
                       "dims: a torus has 2 or 3 dimensions, got 1"));
  EXPECT_TRUE(contains(error_of([] {
                         torus(TorusSpec{{4, 0}, kGBps, Time::zero(), 1});
                       }),
                       "dims[1]: must be at least 1, got 0"));
}

TEST(NvswitchDomain, Nvl72IsOneSwitchOverEighteenTrays) {
  const Topology t = nvswitch_domain(NvswitchDomainSpec{72, kGBps * 900, Time::ns(500), 4});
  EXPECT_EQ(t.num_gpus(), 72);
  EXPECT_EQ(t.num_machines(), 18);  // 72 / 4
  EXPECT_EQ(t.num_nodes(), 73u);
  EXPECT_EQ(t.num_links(), 144u);
}

// ---- from_catalog -----------------------------------------------------------------------------

// Values as in catalog/nodes.yaml and catalog/gpus.yaml.
hw::GpuSpec h100_sxm() {
  hw::GpuSpec g;
  g.name = "h100-sxm";
  g.scaleup = hw::ScaleupLink{"NVLink 4", 18, kGBps * 450};  // 900 GB/s bidirectional
  g.pcie = hw::PcieLink{5, 16, kGBps * 64};
  return g;
}

hw::NodeSpec dgx_h100() {
  hw::NodeSpec n;
  n.name = "dgx-h100";
  n.gpu = "h100-sxm";
  n.gpus_per_node = 8;
  n.scaleup_domain_gpus = 8;
  n.intra_node = hw::IntraNode::kNvswitch;
  n.nics = hw::NicSpec{8, "ib-ndr", Bandwidth(400e9 / 8)};  // 400 Gb/s = 50 GB/s
  n.pcie = hw::PcieLink{5, 16, kGBps * 64};
  n.origin = "catalog/nodes.yaml";
  return n;
}

hw::GpuSpec gb200() {
  hw::GpuSpec g;
  g.name = "gb200";
  g.scaleup = hw::ScaleupLink{"NVLink 5", 18, kGBps * 900};
  g.pcie = hw::PcieLink{6, 16, kGBps * 128};
  return g;
}

hw::NodeSpec gb200_nvl72() {
  hw::NodeSpec n;
  n.name = "gb200-nvl72";
  n.gpu = "gb200";
  n.gpus_per_node = 4;
  n.scaleup_domain_gpus = 72;
  n.intra_node = hw::IntraNode::kNvswitch;
  n.nics = hw::NicSpec{4, "ib-ndr", Bandwidth(400e9 / 8)};
  n.pcie = hw::PcieLink{6, 16, kGBps * 128};
  n.origin = "catalog/nodes.yaml";
  return n;
}

TEST(FromCatalog, DgxH100TimesFourHasEightFiftyGigabyteNicsPerMachine) {
  const Topology t = from_catalog(dgx_h100(), h100_sxm(), 4);
  EXPECT_EQ(t.num_gpus(), 32);
  EXPECT_EQ(t.gpus_per_machine(), 8);
  int nics = 0;
  for (size_t i = 0; i < t.num_nodes(); ++i) {
    const auto id = static_cast<NodeId>(i);
    if (t.node(id).kind != NodeKind::kNic) continue;
    ++nics;
    EXPECT_DOUBLE_EQ(capacity(t, id, true, NodeKind::kSwitch, 1).bytes_per_second(), 50e9) << t.node(id).name;
  }
  EXPECT_EQ(nics, 32);  // 8 per machine
  for (int32_t r = 0; r < 32; ++r) {
    // GPU -> NVSwitch: 450 GB/s per direction; GPU -> NIC: min(node 64, GPU 64) = 64 GB/s PCIe.
    EXPECT_DOUBLE_EQ(capacity(t, t.gpu(r), true, NodeKind::kSwitch, 0).bytes_per_second(), 450e9);
    EXPECT_DOUBLE_EQ(capacity(t, t.gpu(r), true, NodeKind::kNic, -1).bytes_per_second(), 64e9);
    EXPECT_EQ(t.rail_of(r), r % 8);
  }
  EXPECT_EQ(t.description, "fat-tree 2-tier rail-optimized, 4 x dgx-h100, 32 GPUs, 1:1");
}

TEST(FromCatalog, Gb200Nvl72SharesOneSwitchAcrossEighteenTrays) {
  const Topology t = from_catalog(gb200_nvl72(), gb200(), 36);  // two racks
  EXPECT_EQ(t.num_gpus(), 144);
  // Every GPU of trays 0-17 hangs off the same scale-up switch "nvl0.switch", trays 18-35 off "nvl1.switch".
  auto nvswitch_of = [&](int32_t rank) {
    for (LinkId l : t.out_links(t.gpu(rank))) {
      if (t.link(l).kind == LinkKind::kScaleup) return t.node(t.link(l).dst).name;
    }
    return std::string("none");
  };
  EXPECT_EQ(nvswitch_of(0), "nvl0.switch");
  EXPECT_EQ(nvswitch_of(71), "nvl0.switch");
  EXPECT_EQ(nvswitch_of(72), "nvl1.switch");
  int switch_gpus = 0;
  for (LinkId l : t.in_links(t.link(t.out_links(t.gpu(0))[0]).dst))
    switch_gpus += t.node(t.link(l).src).kind == NodeKind::kGpu;
  EXPECT_EQ(switch_gpus, 72);
  EXPECT_DOUBLE_EQ(capacity(t, t.gpu(5), true, NodeKind::kSwitch, 0).bytes_per_second(), 900e9);
}

TEST(FromCatalog, GpuWithoutScaleupTalksThroughTheHost) {
  hw::GpuSpec l40s;
  l40s.name = "l40s";
  l40s.pcie = hw::PcieLink{4, 16, kGBps * 32};  // no scaleup; PCIe Gen4 x16
  hw::NodeSpec node = dgx_h100();
  node.name = "l40s-box";
  const Topology t = from_catalog(node, l40s, 2);
  // GPU -> host link at min(node 64, GPU 32) = 32 GB/s.
  bool via_host = false;
  for (LinkId l : t.out_links(t.gpu(0))) {
    if (t.node(t.link(l).dst).kind == NodeKind::kHost) {
      via_host = true;
      EXPECT_DOUBLE_EQ(t.link(l).bandwidth.bytes_per_second(), 32e9);
      EXPECT_EQ(t.link(l).kind, LinkKind::kPcie);
    }
  }
  EXPECT_TRUE(via_host);
}

TEST(FromCatalog, BadNodeEntriesNameTheCatalogKey) {
  hw::NodeSpec node = gb200_nvl72();
  node.scaleup_domain_gpus = 70;  // not a multiple of 4
  EXPECT_TRUE(contains(error_of([&] { from_catalog(node, gb200(), 18); }),
                       "catalog/nodes.yaml: gb200-nvl72.scaleup_domain_gpus: a scale-up domain of 70 GPUs"));
  node = dgx_h100();
  node.nics.count = 0;
  EXPECT_TRUE(contains(error_of([&] { from_catalog(node, h100_sxm(), 2); }), "dgx-h100.nics.count: 0 NICs for 8 GPUs"));
  FabricOptions o;
  o.oversubscription = 0;
  EXPECT_TRUE(contains(error_of([&] { from_catalog(dgx_h100(), h100_sxm(), 2, o); }), "oversubscription: must be"));
}

// ---- edge lists -------------------------------------------------------------------------------

constexpr const char* kTwoMachines = R"(# two machines, one NIC per GPU
switch net tier=1
switch m0.sw tier=0
nic m0.nic0 machine=0
gpu m0.g0 machine=0 nic=m0.nic0 rail=0
gpu m0.g1 machine=0
link m0.g0 m0.sw bw=450GB/s lat=235ns duplex kind=scaleup
link m0.g1 m0.sw bw=450GB/s lat=235ns duplex kind=scaleup   # trailing comment
link m0.g0 m0.nic0 bw=64GB/s lat=1.2us duplex kind=pcie
link m0.g1 m0.nic0 bw=64GB/s lat=1.2us duplex kind=pcie
link m0.nic0 net bw=400Gb/s lat=150ns duplex
gpu m1.g0 machine=1
link m1.g0 net bw=400Gb/s lat=150ns
link net m1.g0 bw=400Gb/s lat=150ns
)";

TEST(EdgeList, ParsesNodesLinksAndRails) {
  const Topology t = parse_edge_list(kTwoMachines, "two.topo");
  EXPECT_EQ(t.num_gpus(), 3);
  EXPECT_EQ(t.num_nodes(), 6u);
  EXPECT_EQ(t.num_links(), 12u);       // 5 duplex + 2 one-way
  EXPECT_EQ(t.gpus_per_machine(), 0);  // 2 on machine 0, 1 on machine 1
  EXPECT_EQ(t.rail_of(0), 0);
  EXPECT_EQ(t.node(t.nic_of(0)).name, "m0.nic0");
  const TopoLink& nic_up = t.link(8);  // the 5th duplex, first direction
  EXPECT_EQ(t.node(nic_up.src).name, "m0.nic0");
  EXPECT_DOUBLE_EQ(nic_up.bandwidth.bytes_per_second(), 5e10);  // 400 Gb/s
  EXPECT_EQ(nic_up.latency, Time::ns(150));
  EXPECT_EQ(nic_up.kind, LinkKind::kNetwork);  // the default kind
  EXPECT_EQ(t.link(4).kind, LinkKind::kPcie);
  EXPECT_EQ(t.link(4).latency, Time::ns(1200));
}

TEST(EdgeList, GpuMachineDefaultsToItsRankAndForwardFlagMakesItARouter) {
  const Topology t = parse_edge_list(
      "gpu a\ngpu b forward\ngpu c\nlink a b bw=1GB/s lat=0ns duplex\n"
      "link b c bw=1GB/s lat=0ns duplex\n",
      "chain.topo");
  EXPECT_EQ(t.machine_of(2), 2);
  EXPECT_TRUE(t.node(t.gpu(1)).forwards);
}

struct EdgeListError {
  const char* name;
  const char* text;
  const char* expected;  // the message, or for messages from core/unit_parse.h its start
};

class EdgeListErrors : public testing::TestWithParam<EdgeListError> {};

TEST_P(EdgeListErrors, NameFileLineAndToken) {
  const std::string message = error_of([] { parse_edge_list(GetParam().text, "t.topo"); });
  EXPECT_EQ(message.substr(0, std::string(GetParam().expected).size()), GetParam().expected) << message;
}

INSTANTIATE_TEST_SUITE_P(
    EdgeList, EdgeListErrors,
    testing::Values(
        EdgeListError{"UnknownStatement", "gpu a\nswich s\n",
                      "t.topo:2: unknown statement 'swich'; did you mean 'switch'?"},
        EdgeListError{"UnknownNodeSuggestsNearest", "gpu g0\nswitch s0\nlink g0 s1 bw=1GB/s lat=1us\n",
                      "t.topo:3: unknown node 's1' (link destination); did you mean 's0'?"},
        EdgeListError{"MissingBandwidth", "gpu a\nswitch s\nlink a s lat=1us\n",
                      "t.topo:3: bw: link needs a bandwidth; add bw=<per direction>, e.g. bw=400GB/s"},
        EdgeListError{"MissingLatency", "gpu a\nswitch s\nlink a s bw=1GB/s\n",
                      "t.topo:3: lat: link needs a latency; add lat=<one way>, e.g. lat=1us"},
        EdgeListError{"BadUnit", "gpu a\nswitch s\nlink a s bw=400Gbs lat=1us\n",
                      "t.topo:3: bw: unknown unit 'Gbs' in '400Gbs'"},
        EdgeListError{"ZeroBandwidth", "gpu a\nswitch s\nlink a s bw=0GB/s lat=1us\n",
                      "t.topo:3: bw: must be positive, got '0GB/s'"},
        EdgeListError{"DuplicateName", "gpu a\nswitch b\nnic a\n",
                      "t.topo:3: duplicate node name 'a' (first declared on line 1)"},
        EdgeListError{"LinkToItself", "gpu a\nlink a a bw=1GB/s lat=1us\n", "t.topo:2: link from 'a' to itself"},
        EdgeListError{"UnknownKeySuggestsNearest", "gpu a\nswitch s\nlink a s bw=1GB/s lt=1us\n",
                      "t.topo:3: unknown key for link: 'lt=1us'; did you mean 'lat'?"},
        EdgeListError{"UnknownFlag", "gpu a\nswitch s\nlink a s bw=1GB/s lat=1us duplx\n",
                      "t.topo:3: unknown word for link: 'duplx'; did you mean 'duplex'?"},
        EdgeListError{"KeyGivenTwice", "gpu a\nswitch s\nlink a s bw=1GB/s bw=2GB/s lat=1us\n",
                      "t.topo:3: bw: 'bw' given twice"},
        EdgeListError{"KeyWithoutValue", "gpu a\nswitch s\nlink a s bw= lat=1us\n",
                      "t.topo:3: bw: missing value in 'bw='"},
        EdgeListError{"KeyUsedAsFlag", "gpu a machine\n", "t.topo:1: machine: 'machine' needs a value (machine=...)"},
        EdgeListError{"BadInteger", "gpu a machine=two\n",
                      "t.topo:1: machine: expected a non-negative integer, got 'machine=two'"},
        EdgeListError{"NegativeInteger", "switch s tier=-1\n",
                      "t.topo:1: tier: expected a non-negative integer, got 'tier=-1'"},
        EdgeListError{"NicThatIsNotANic", "switch s\ngpu a nic=s\n", "t.topo:2: nic: 's' is a switch, not a nic"},
        EdgeListError{"UnknownLinkKind", "gpu a\nswitch s\nlink a s bw=1GB/s lat=1us kind=nvlink\n",
                      "t.topo:3: kind: unknown link kind 'nvlink'; valid names: scaleup, pcie, network"},
        EdgeListError{"MissingName", "gpu\n", "t.topo:1: gpu: missing a GPU name"},
        EdgeListError{"KeyInPlaceOfName", "gpu machine=0\n", "t.topo:1: gpu: expected a GPU name, got 'machine=0'"},
        EdgeListError{"MissingLinkEndpoint", "gpu a\nlink a\n", "t.topo:2: link: missing the destination node"},
        EdgeListError{"Disconnected", "gpu a\ngpu b\nswitch s\nlink a s bw=1GB/s lat=1us duplex\n",
                      "t.topo: topology is disconnected: gpu 'b' cannot reach gpu 'a'"},
        EdgeListError{"Empty", "# nothing here\n", "t.topo: topology has no GPUs"}),
    [](const testing::TestParamInfo<EdgeListError>& p) { return std::string(p.param.name); });

TEST(EdgeList, MissingFileIsAnInputError) {
  EXPECT_EQ(error_of([] { read_edge_list("/nonexistent/dir/cluster.topo"); }),
            "/nonexistent/dir/cluster.topo: cannot open topology file");
}

TEST(EdgeList, ReadsAFile) {
  const std::string path = testing::TempDir() + "orrery_two_machines.topo";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kTwoMachines, f);
    std::fclose(f);
  }
  EXPECT_EQ(read_edge_list(path).num_gpus(), 3);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace orrery::net
