#include "net/routing.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "core/random.h"
#include "net/topology_builders.h"

namespace orrery::net {
namespace {

const Bandwidth kGBps(1e9);

std::vector<LinkKind> kinds(const Topology& t, const Route& r) {
  std::vector<LinkKind> out;
  for (LinkId l : r.links) out.push_back(t.link(l).kind);
  return out;
}

// The node a route reaches after its first n links.
const TopoNode& node_after(const Topology& t, const Route& r, size_t n) { return t.node(t.link(r.links[n - 1]).dst); }

// Checks that the route is a chain of links from src to dst and that latency and bottleneck are the
// sum and the minimum over its links.
testing::AssertionResult well_formed(const Topology& t, const Route& r, NodeId src, NodeId dst) {
  NodeId at = src;
  Time latency = Time::zero();
  double bottleneck = std::numeric_limits<double>::infinity();
  for (LinkId l : r.links) {
    if (t.link(l).src != at) return testing::AssertionFailure() << "link " << l << " does not start at node " << at;
    at = t.link(l).dst;
    latency += t.link(l).latency;
    bottleneck = std::min(bottleneck, t.link(l).bandwidth.bytes_per_second());
  }
  if (at != dst) return testing::AssertionFailure() << "route ends at " << at << ", not " << dst;
  if (latency != r.latency) return testing::AssertionFailure() << "latency is not the sum of link latencies";
  if (bottleneck != r.bottleneck.bytes_per_second())
    return testing::AssertionFailure() << "bottleneck is not the minimum";
  return testing::AssertionSuccess();
}

TwoLevelSpec benchmark_two_level(int32_t machines) {
  // shared/validation/collectives.md: 8 GPUs per machine at 400 GB/s, 936 ns; 50 GB/s per GPU, 2 us.
  return TwoLevelSpec{machines, 8, kGBps * 400, Time::ns(936), kGBps * 50, Time::us(2)};
}

FatTreeSpec dgx_like_fat_tree(int32_t machines, int32_t radix) {
  FatTreeSpec s;
  s.machines = machines;
  s.gpus_per_machine = 8;
  s.radix = radix;
  s.nic_bandwidth = kGBps * 50;
  s.pcie_bandwidth = kGBps * 64;
  s.scaleup_bandwidth = kGBps * 450;
  return s;  // default latencies: scale-up 470 ns GPU to GPU, NIC link 1.2 us, network link 150 ns
}

// ---- hash -------------------------------------------------------------------------------------

TEST(EcmpHash, MixIsTheFirstOutputOfSplitMix64) {
  // Vigna's reference splitmix64.c seeded with 1234567 first outputs 6457827717110365317 (the same
  // published value core/random_test.cc checks).
  EXPECT_EQ(splitmix64_mix(1234567), 6457827717110365317u);
  for (uint64_t seed : {0ull, 1ull, 42ull, 0xFFFFFFFFFFFFFFFFull})
    EXPECT_EQ(splitmix64_mix(seed), SplitMix64(seed).next());
}

TEST(EcmpHash, DependsOnEveryInput) {
  const uint64_t h = ecmp_hash(1, 2, 3, 4);
  EXPECT_NE(h, ecmp_hash(2, 1, 3, 4));
  EXPECT_NE(h, ecmp_hash(1, 2, 4, 4));
  EXPECT_NE(h, ecmp_hash(1, 2, 3, 5));
  EXPECT_EQ(h, ecmp_hash(1, 2, 3, 4));
}

// ---- hop counts and latencies -----------------------------------------------------------------

TEST(Routing, TwoLevelRoutesCrossOneSwitch) {
  const Topology t = two_level(benchmark_two_level(4));
  const Router router(t);
  // Same machine: GPU -> NVSwitch -> GPU, 2 scale-up links, 468 + 468 ns = 936 ns, 400 GB/s.
  const Route in = router.gpu_route(0, 5);
  EXPECT_TRUE(well_formed(t, in, t.gpu(0), t.gpu(5)));
  EXPECT_EQ(kinds(t, in), (std::vector{LinkKind::kScaleup, LinkKind::kScaleup}));
  EXPECT_EQ(in.latency, Time::ns(936));
  EXPECT_DOUBLE_EQ(in.bottleneck.bytes_per_second(), 400e9);
  // Different machines: GPU -> network switch -> GPU, 2 network links, 1 + 1 us = 2 us, 50 GB/s.
  const Route out = router.gpu_route(3, 30);
  EXPECT_TRUE(well_formed(t, out, t.gpu(3), t.gpu(30)));
  EXPECT_EQ(kinds(t, out), (std::vector{LinkKind::kNetwork, LinkKind::kNetwork}));
  EXPECT_EQ(out.latency, Time::us(2));
  EXPECT_DOUBLE_EQ(out.bottleneck.bytes_per_second(), 50e9);
  EXPECT_EQ(router.searches(), 0u);  // both on the two-hop fast path
}

TEST(Routing, FatTreeSameRailIsOneLeafHop) {
  // radix 8: machines 0-3 form one unit; rank 0 (m0.g0) and rank 8 (m1.g0) are both on rail 0:
  // GPU -PCIe-> NIC -> leaf r0 -> NIC -PCIe-> GPU. Latency 1.2 + 0.15 + 0.15 + 1.2 = 2.7 us
  // (NCCL's NET Ring/LL hwLat); bottleneck the 50 GB/s NIC link.
  const Topology t = fat_tree(dgx_like_fat_tree(4, 8));
  const Router router(t);
  const Route r = router.gpu_route(0, 8);
  EXPECT_TRUE(well_formed(t, r, t.gpu(0), t.gpu(8)));
  EXPECT_EQ(kinds(t, r), (std::vector{LinkKind::kPcie, LinkKind::kNetwork, LinkKind::kNetwork, LinkKind::kPcie}));
  EXPECT_EQ(node_after(t, r, 2).name, "leaf.su0.r0");
  EXPECT_EQ(r.latency, Time::ns(2700));
  EXPECT_DOUBLE_EQ(r.bottleneck.bytes_per_second(), 50e9);
}

TEST(Routing, FatTreeCrossRailGoesThroughASpine) {
  // rank 0 (rail 0) to rank 9 (m1.g1, rail 1), shortest policy: NIC 0 -> leaf r0 -> spine -> leaf r1
  // -> NIC 1: 6 links, 2 x 1.2 us + 4 x 150 ns = 3.0 us. (GPUs do not forward, so no path through
  // m0.g1's NIC exists.)
  const Topology t = fat_tree(dgx_like_fat_tree(4, 8));
  const Router router(t);
  const Route r = router.gpu_route(0, 9);
  EXPECT_TRUE(well_formed(t, r, t.gpu(0), t.gpu(9)));
  ASSERT_EQ(r.links.size(), 6u);
  EXPECT_EQ(kinds(t, r).front(), LinkKind::kPcie);
  EXPECT_EQ(node_after(t, r, 3).tier, 2);  // a spine
  EXPECT_EQ(r.latency, Time::ns(3000));
}

TEST(Routing, ThreeTierCrossPodGoesThroughACore) {
  // radix 8, 2 GPUs (= NICs, rails) per machine: 4 machines per unit, (8/2) / 2 = 2 units per pod,
  // 8 machines per pod; 16 machines = 2 pods. Rank 2k is GPU 0 of machine k (rail 0).
  FatTreeSpec s = dgx_like_fat_tree(16, 8);
  s.gpus_per_machine = 2;
  s.tiers = 3;
  const Topology t = fat_tree(s);
  const Router router(t);
  // Same unit (machines 0, 1): leaf only, 4 links.
  EXPECT_EQ(router.gpu_route(0, 2).links.size(), 4u);
  // Same pod, other unit (machine 0 -> 4): leaf -> aggregation -> leaf, 6 links.
  const Route pod = router.gpu_route(0, 8);
  ASSERT_EQ(pod.links.size(), 6u);
  EXPECT_EQ(node_after(t, pod, 3).tier, 2);
  // Other pod (machine 0 -> 8): leaf -> agg -> core -> agg -> leaf, 8 links, latency
  // 2 x 1.2 us + 6 x 150 ns = 3.3 us.
  const Route far = router.gpu_route(0, 16);
  EXPECT_TRUE(well_formed(t, far, t.gpu(0), t.gpu(16)));
  ASSERT_EQ(far.links.size(), 8u);
  EXPECT_EQ(node_after(t, far, 4).tier, 3);
  EXPECT_EQ(far.latency, Time::ns(3300));
}

TEST(Routing, TorusDistanceIsTheSumOfWrappedOffsets) {
  // 5 x 4 x 3 torus, rank = x + 5 (y + 4 z). Hops between a and b = sum over dimensions of
  // min(|d|, n - |d|); every hop is one 100 ns link.
  const std::vector<int32_t> dims = {5, 4, 3};
  const Topology t = torus(TorusSpec{dims, kGBps * 45, Time::ns(100), 1});
  const Router router(t);
  auto coord = [&](int32_t r, size_t d) { return d == 0 ? r % 5 : d == 1 ? (r / 5) % 4 : r / 20; };
  for (int32_t a = 0; a < t.num_gpus(); ++a) {
    for (int32_t b = 0; b < t.num_gpus(); ++b) {
      int32_t expected = 0;
      for (size_t d = 0; d < dims.size(); ++d) {
        const int32_t delta = std::abs(coord(a, d) - coord(b, d));
        expected += std::min(delta, dims[d] - delta);
      }
      const Route r = router.gpu_route(a, b, static_cast<uint64_t>(a * 7 + b));
      ASSERT_TRUE(well_formed(t, r, t.gpu(a), t.gpu(b)));
      ASSERT_EQ(static_cast<int32_t>(r.links.size()), expected) << a << " -> " << b;
      ASSERT_EQ(r.latency, Time::ns(100) * expected);
      ASSERT_EQ(router.distance(t.gpu(a), t.gpu(b)), expected);
    }
  }
}

TEST(Routing, SharedNicPrefersTheNvswitchOverTheNic) {
  // 8 GPUs, 4 NICs: GPUs 0 and 4 share NIC 0, so GPU 0 -> NIC 0 -> GPU 4 is as short as
  // GPU 0 -> NVSwitch -> GPU 4. The tie goes to the scale-up link kind.
  FatTreeSpec s = dgx_like_fat_tree(2, 8);
  s.nics_per_machine = 4;
  const Topology t = fat_tree(s);
  const Router router(t);
  for (uint64_t key = 0; key < 16; ++key) {
    EXPECT_EQ(kinds(t, router.gpu_route(0, 4, key)), (std::vector{LinkKind::kScaleup, LinkKind::kScaleup}));
  }
  EXPECT_EQ(t.rail_of(4), 0);
}

TEST(Routing, FromCatalogGb200RoutesInsideTheRackOverNvlink) {
  hw::GpuSpec gpu;
  gpu.name = "gb200";
  gpu.scaleup = hw::ScaleupLink{"NVLink 5", 18, kGBps * 900};
  gpu.pcie = hw::PcieLink{6, 16, kGBps * 128};
  hw::NodeSpec node;
  node.name = "gb200-nvl72";
  node.gpus_per_node = 4;
  node.scaleup_domain_gpus = 72;
  node.nics = hw::NicSpec{4, "ib-ndr", kGBps * 50};
  node.pcie = hw::PcieLink{6, 16, kGBps * 128};
  const Topology t = from_catalog(node, gpu, 36);
  const Router router(t);
  // Tray 0 to tray 17, same rack: 2 NVLink hops, 470 ns, 900 GB/s.
  const Route in_rack = router.gpu_route(0, 71);
  EXPECT_EQ(kinds(t, in_rack), (std::vector{LinkKind::kScaleup, LinkKind::kScaleup}));
  EXPECT_EQ(in_rack.latency, Time::ns(470));
  // Tray 0 to tray 18 (next rack), same rail 0: over the InfiniBand leaf.
  const Route cross = router.gpu_route(0, 72);
  EXPECT_EQ(kinds(t, cross), (std::vector{LinkKind::kPcie, LinkKind::kNetwork, LinkKind::kNetwork, LinkKind::kPcie}));
  EXPECT_DOUBLE_EQ(cross.bottleneck.bytes_per_second(), 50e9);
}

TEST(Routing, RouteToSelfIsEmpty) {
  const Topology t = two_level(benchmark_two_level(1));
  const Route r = Router(t).gpu_route(3, 3);
  EXPECT_TRUE(r.links.empty());
  EXPECT_EQ(r.latency, Time::zero());
  EXPECT_TRUE(std::isinf(r.bottleneck.bytes_per_second()));
}

TEST(Routing, DistanceIsMinusOneWhenUnreachable) {
  Topology t;  // not validated: a GPU with an out-link only
  const NodeId a = t.add_gpu("a", 0);
  const NodeId b = t.add_gpu("b", 0);
  t.add_link(a, b, kGBps, Time::zero(), LinkKind::kScaleup);
  const Router router(t);
  EXPECT_EQ(router.distance(a, b), 1);
  EXPECT_EQ(router.distance(b, a), -1);
}

// ---- rail policy ------------------------------------------------------------------------------

TEST(RailPolicy, CrossRailRouteFirstCrossesTheScaleupFabric) {
  // m0.g0 (rail 0) -> m1.g3 (rank 11, rail 3). PXN: m0.g0 -> NVSwitch -> m0.g3 (the proxy on rail 3),
  // then m0.g3 -> NIC 3 -> leaf r3 -> NIC 3 of m1 -> m1.g3. Latency 470 ns + 2.7 us = 3.17 us,
  // against 3.0 us through a spine without it.
  const Topology t = fat_tree(dgx_like_fat_tree(4, 8));
  const Router pxn(t, RailPolicy::kRailAligned);
  const Route r = pxn.gpu_route(0, 11);
  EXPECT_TRUE(well_formed(t, r, t.gpu(0), t.gpu(11)));
  EXPECT_EQ(kinds(t, r), (std::vector{LinkKind::kScaleup, LinkKind::kScaleup, LinkKind::kPcie, LinkKind::kNetwork,
                                      LinkKind::kNetwork, LinkKind::kPcie}));
  EXPECT_EQ(node_after(t, r, 2).name, "m0.g3");
  EXPECT_EQ(node_after(t, r, 4).name, "leaf.su0.r3");
  EXPECT_EQ(r.latency, Time::ns(3170));
  EXPECT_EQ(kinds(t, Router(t).gpu_route(0, 11)).front(), LinkKind::kPcie);  // shortest: straight to NIC 0
}

TEST(RailPolicy, SameRailAndIntraMachineRoutesAreUnchanged) {
  const Topology t = fat_tree(dgx_like_fat_tree(4, 8));
  const Router shortest(t);
  const Router pxn(t, RailPolicy::kRailAligned);
  for (int32_t dst : {1, 8, 16, 31}) {  // 1: same machine; 8, 16: same rail; 31: m3.g7 is cross-rail
    const Route a = shortest.gpu_route(0, dst, 5);
    const Route b = pxn.gpu_route(0, dst, 5);
    if (dst == 31) {
      EXPECT_NE(a.links, b.links);
    } else {
      EXPECT_EQ(a.links, b.links) << "dst " << dst;
    }
  }
}

// ---- ECMP -------------------------------------------------------------------------------------

TEST(Ecmp, FlowKeysSpreadOverSpinesWithinABinomialBand) {
  // Two leaves with one host each and S spines: host -> leaf0 -> spine -> leaf1 -> host, the spine
  // chosen by hash. With 1,000 flow keys each spine's count is Binomial(1000, 1/S): mean 1000/S,
  // sigma = sqrt(1000 (1/S)(1 - 1/S)); S = 4: 250 +- 5 x 13.69 = [181.5, 318.5]; S = 8: 125 +-
  // 5 x 10.46 = [72.7, 177.3].
  for (int32_t spines : {4, 8}) {
    const Topology t = spine_leaf(SpineLeafSpec{2, 1, spines, kGBps * 50, Bandwidth(0.0), 1.0, Time::ns(100)});
    const Router router(t);
    std::vector<int> count(static_cast<size_t>(spines), 0);
    for (uint64_t key = 0; key < 1000; ++key) {
      const Route r = router.gpu_route(0, 1, key);
      ASSERT_EQ(r.links.size(), 4u);
      const TopoNode& spine = node_after(t, r, 2);
      ASSERT_EQ(spine.tier, 2);
      ++count[static_cast<size_t>(std::atoi(spine.name.c_str() + 5))];  // "spine<i>"
    }
    const double p = 1.0 / spines;
    const double mean = 1000 * p;
    const double sigma = std::sqrt(1000 * p * (1 - p));
    for (int32_t s = 0; s < spines; ++s) {
      EXPECT_GE(count[static_cast<size_t>(s)], mean - 5 * sigma) << "spine " << s << " of " << spines;
      EXPECT_LE(count[static_cast<size_t>(s)], mean + 5 * sigma) << "spine " << s << " of " << spines;
    }
  }
}

TEST(Ecmp, ChoiceIsTheHashOfSourceDestinationKeyAndHop) {
  // At hop 1 (at leaf0) the candidates are leaf0's uplinks in LinkId order: spine0, spine1, ...; the
  // route takes number ecmp_hash(src, dst, key, 1) mod 4 (model card of net/routing.h).
  const Topology t = spine_leaf(SpineLeafSpec{2, 1, 4, kGBps * 50, Bandwidth(0.0), 1.0, Time::ns(100)});
  const Router router(t);
  for (uint64_t key = 0; key < 32; ++key) {
    const Route r = router.gpu_route(0, 1, key);
    const uint64_t expected = ecmp_hash(t.gpu(0), t.gpu(1), key, 1) % 4;
    EXPECT_EQ(node_after(t, r, 2).name, "spine" + std::to_string(expected)) << "key " << key;
  }
}

// Hop counts from src to every node by a plain forward breadth-first search over the Topology (the
// slow reference): only forwarding nodes are expanded, src always is.
std::vector<int32_t> reference_hops(const Topology& t, NodeId src) {
  std::vector<int32_t> hops(t.num_nodes(), -1);
  std::vector<NodeId> queue = {src};
  hops[static_cast<size_t>(src)] = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const NodeId x = queue[head];
    if (x != src && !t.node(x).forwards) continue;
    for (LinkId l : t.out_links(x)) {
      const NodeId y = t.link(l).dst;
      if (hops[static_cast<size_t>(y)] < 0) {
        hops[static_cast<size_t>(y)] = hops[static_cast<size_t>(x)] + 1;
        queue.push_back(y);
      }
    }
  }
  return hops;
}

// Every GPU pair (and a few keys) on a set of topologies: shortest routes are as long as the
// reference search says, and the route does not depend on the fast path, on field composition, on
// the cache size or on the order of earlier queries.
TEST(Ecmp, RoutesDoNotDependOnFastPathCacheOrQueryOrder) {
  FatTreeSpec shared = dgx_like_fat_tree(2, 8);
  shared.nics_per_machine = 4;
  FatTreeSpec three = dgx_like_fat_tree(16, 8);
  three.gpus_per_machine = 2;
  three.tiers = 3;
  FatTreeSpec plain = dgx_like_fat_tree(6, 16);
  plain.rail_optimized = false;
  plain.oversubscription = 2;
  const std::vector<Topology> topologies = {
      two_level(benchmark_two_level(3)),
      fat_tree(dgx_like_fat_tree(8, 16)),
      fat_tree(shared),
      fat_tree(three),
      fat_tree(plain),
      torus(TorusSpec{{4, 3, 2}, kGBps * 45, Time::ns(100), 1}),
      spine_leaf(SpineLeafSpec{3, 2, 3, kGBps * 50, Bandwidth(0.0), 1.0, Time::ns(100)})};
  for (const Topology& t : topologies) {
    for (RailPolicy policy : {RailPolicy::kShortest, RailPolicy::kRailAligned}) {
      const Router fast(t, RouterOptions{policy, size_t{256} << 20, true, true});
      const Router plain_search(t, RouterOptions{policy, size_t{256} << 20, false, false});
      const Router tiny_cache(t, RouterOptions{policy, 1, true, true});  // 4 fields: evicts often
      const int32_t n = t.num_gpus();
      for (uint64_t key : {0ull, 1ull, 977ull}) {
        for (int32_t a = 0; a < n; ++a) {
          const std::vector<int32_t> hops = reference_hops(t, t.gpu(a));
          for (int32_t b = 0; b < n; ++b) {
            const Route r = fast.gpu_route(a, b, key);
            ASSERT_TRUE(well_formed(t, r, t.gpu(a), t.gpu(b))) << t.description;
            if (policy == RailPolicy::kShortest) {
              ASSERT_EQ(static_cast<int32_t>(r.links.size()), hops[static_cast<size_t>(t.gpu(b))])
                  << t.description << ": " << a << " -> " << b;
            }
            ASSERT_EQ(r.links, plain_search.gpu_route(a, b, key).links) << t.description << ": " << a << " -> " << b;
            // Reverse order of queries for the tiny cache.
            ASSERT_EQ(tiny_cache.gpu_route(n - 1 - a, n - 1 - b, key).links,
                      fast.gpu_route(n - 1 - a, n - 1 - b, key).links)
                << t.description;
          }
        }
      }
    }
  }
}

TEST(Ecmp, TwoRoutersGiveTheSameRoutes) {
  const Topology t = fat_tree(dgx_like_fat_tree(8, 16));
  const Router a(t);
  const Router b(t);
  for (uint64_t key = 0; key < 200; ++key) {
    EXPECT_EQ(a.gpu_route(static_cast<int32_t>(key % 64), 63, key).links,
              b.gpu_route(static_cast<int32_t>(key % 64), 63, key).links);
  }
}

// ---- cache ------------------------------------------------------------------------------------

TEST(RouterCache, EvictsTheLeastRecentlyUsedHubField) {
  // Fast paths off, so every route searches or uses a cached field. A GPU's distances are composed
  // from one hub field, its rail leaf's (GPU <- NIC <- leaf: the NIC has one forwarding in-neighbour,
  // the leaf 4 NICs + 4 spines). Ranks 8..12 are m1.g0..g4 on rails 0..4: five different leaves.
  // Room for 4 fields: rails 0, 1, 2, 3, 4 take 5 searches and rail 4 evicts rail 0 (least recently
  // used), so rail 0 again is a 6th. Room for 5: rail 0 is still cached, 5 searches.
  const Topology t = fat_tree(dgx_like_fat_tree(4, 8));
  const size_t field = t.num_nodes() * sizeof(uint16_t);
  const Router four(t, RouterOptions{RailPolicy::kShortest, 4 * field, false, true});
  const Router five(t, RouterOptions{RailPolicy::kShortest, 5 * field, false, true});
  EXPECT_EQ(four.cache_capacity(), 4u);
  EXPECT_EQ(five.cache_capacity(), 5u);
  for (int32_t dst : {8, 9, 10, 11, 12, 8}) {
    four.gpu_route(0, dst);
    five.gpu_route(0, dst);
  }
  EXPECT_EQ(four.searches(), 6u);
  EXPECT_EQ(five.searches(), 5u);
  EXPECT_EQ(four.cached_fields(), 4u);
  // Any budget keeps at least kMinCachedFields (one destination may need that many hub fields).
  EXPECT_EQ(Router(t, RouterOptions{RailPolicy::kShortest, 1, true, true}).cache_capacity(), Router::kMinCachedFields);
}

TEST(RouterCache, ComposedFieldsShareOneSearchPerLeaf) {
  // Without composition every destination GPU needs its own search: ranks 8 and 16 (rail 0 of
  // machines 1 and 2) take 2. Composed, both hang off leaf r0: 1.
  const Topology t = fat_tree(dgx_like_fat_tree(4, 8));
  const Router plain(t, RouterOptions{RailPolicy::kShortest, size_t{1} << 20, false, false});
  const Router composed(t, RouterOptions{RailPolicy::kShortest, size_t{1} << 20, false, true});
  for (int32_t dst : {8, 16}) {
    EXPECT_EQ(plain.gpu_route(0, dst).links, composed.gpu_route(0, dst).links);
  }
  EXPECT_EQ(plain.searches(), 2u);
  EXPECT_EQ(composed.searches(), 1u);
}

// Not a timed assertion: prints route() throughput for an all-to-all so that regressions are visible.
TEST(RouterSpeed, PrintsAllToAllRouteThroughput) {
  const Topology t = fat_tree(dgx_like_fat_tree(32, 64));  // 256 GPUs, 2-tier, 32 spines
  const Router router(t);
  const auto start = std::chrono::steady_clock::now();
  size_t links = 0;
  for (int32_t a = 0; a < t.num_gpus(); ++a) {
    for (int32_t b = 0; b < t.num_gpus(); ++b) links += router.gpu_route(a, b, static_cast<uint64_t>(a)).links.size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double routes = static_cast<double>(t.num_gpus()) * t.num_gpus();
  std::printf(
      "[ info ] all-to-all over %d GPUs: %.0f routes in %.3f s = %.2f M routes/s (%zu searches, mean %.2f links)\n",
      t.num_gpus(), routes, s, routes / s * 1e-6, router.searches(), static_cast<double>(links) / routes);
  EXPECT_GT(links, 0u);
}

}  // namespace
}  // namespace orrery::net
