#include "serve/router.h"

#include <map>

#include <gtest/gtest.h>

#include "coll/alpha_beta.h"
#include "serve/kv_transfer.h"
#include "serve/test_support.h"

namespace orrery::serve {
namespace {

std::unique_ptr<Router> router(const std::string& name, int64_t replicas, int64_t abs = 32) {
  RouterConfig c;
  c.replicas = replicas;
  c.balance_abs_threshold = abs;
  return make_router(name, c);
}

Request prefixed(int64_t prompt, std::vector<uint64_t> hashes) {
  Request r = testing::request(0, 0.0, prompt, 10);
  r.prefix_blocks = std::move(hashes);
  return r;
}

TEST(Router, RoundRobinTakesReplicasInTurnWhateverTheirLoad) {
  auto r = router("round-robin", 3);
  const std::vector<ReplicaLoad> loads = {{9, 0, 10}, {0, 0, 10}, {0, 0, 10}};
  std::vector<size_t> got;
  for (int i = 0; i < 7; ++i) got.push_back(r->route(Request{}, loads));
  EXPECT_EQ(got, (std::vector<size_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(Router, LeastOutstandingPicksTheFewestHeldRequestsLowestIndexOnTies) {
  auto r = router("least-outstanding", 3);
  EXPECT_EQ(r->route(Request{}, std::vector<ReplicaLoad>{{3, 0, 10}, {1, 9, 10}, {1, 0, 10}}), 1u);
  EXPECT_EQ(r->route(Request{}, std::vector<ReplicaLoad>{{0, 0, 10}, {0, 0, 10}, {0, 0, 10}}), 0u);
}

TEST(Router, LeastKvComparesFractionsOfEachReplicasBlocks) {
  auto r = router("least-kv", 3);
  // 30/100 = 0.3, 5/10 = 0.5, 30/100 with fewer outstanding: replica 2.
  EXPECT_EQ(r->route(Request{}, std::vector<ReplicaLoad>{{4, 30, 100}, {0, 5, 10}, {2, 30, 100}}), 2u);
}

TEST(Router, PrefixAwareFollowsTheLongestPrefixItRoutedAboveTheCacheThreshold) {
  auto r = router("prefix-aware", 2);
  const std::vector<ReplicaLoad> idle = {{0, 0, 100}, {0, 0, 100}};
  const std::vector<ReplicaLoad> one_busy = {{0, 50, 100}, {0, 0, 100}};
  // First sight of (1, 2): no match, equal loads -> replica 0, which now holds hashes 1 and 2.
  EXPECT_EQ(r->route(prefixed(1100, {1, 2}), idle), 0u);
  // 2 units = 1024 tokens > 0.5 x 1100: replica 0 again although it uses more KV.
  EXPECT_EQ(r->route(prefixed(1100, {1, 2}), one_busy), 0u);
  // (1, 9): 1 unit = 512 tokens <= 0.5 x 1100 -> least outstanding (tie), then least KV use: replica 1.
  EXPECT_EQ(r->route(prefixed(1100, {1, 9}), one_busy), 1u);
  // (1, 9) now matches 2 units on replica 1 only.
  EXPECT_EQ(r->route(prefixed(1100, {1, 9}), idle), 1u);
}

TEST(Router, PrefixAwareFallsBackToTheShortestQueueWhenLoadIsImbalanced) {
  // SGLang's rule: imbalanced when max - min > abs and max > rel x min. With abs = 4: loads 9 and 4
  // differ by 5 > 4 and 9 > 1.0001 x 4, so the match on replica 0 is ignored.
  auto r = router("prefix-aware", 2, 4);
  EXPECT_EQ(r->route(prefixed(2048, {5, 6, 7}), std::vector<ReplicaLoad>{{0, 0, 100}, {0, 0, 100}}), 0u);
  // Loads 8 and 4 differ by exactly 4: balanced, the 3-unit match on replica 0 wins.
  EXPECT_EQ(r->route(prefixed(2048, {5, 6, 7}), std::vector<ReplicaLoad>{{8, 0, 100}, {4, 0, 100}}), 0u);
  EXPECT_EQ(r->route(prefixed(2048, {5, 6, 7}), std::vector<ReplicaLoad>{{9, 0, 100}, {4, 0, 100}}), 1u);
}

TEST(Router, PrefixAwareForgetsTheLeastRecentlyRoutedHashesBeyondTheReplicasCapacity) {
  RouterConfig c;
  c.replicas = 2;
  c.capacity_units = {2, 2};
  auto r = make_router("prefix-aware", c);
  const std::vector<ReplicaLoad> idle = {{0, 0, 100}, {0, 0, 100}};
  const std::vector<ReplicaLoad> zero_busy = {{0, 50, 100}, {0, 0, 100}};
  EXPECT_EQ(r->route(prefixed(1100, {1, 2}), idle), 0u);       // replica 0 holds {1, 2}
  EXPECT_EQ(r->route(prefixed(1100, {3, 4}), idle), 0u);       // no match, all tied -> 0: {3, 4}
  EXPECT_EQ(r->route(prefixed(1100, {1, 2}), zero_busy), 1u);  // 1, 2 evicted: no match, least KV use
}

TEST(Router, UnknownNamesAndBadThresholdsAreInputErrors) {
  RouterConfig c;
  try {
    (void)make_router("prefix-awre", c, Where{"<command line>", 0, "--router"});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'prefix-aware'"), std::string::npos) << e.what();
  }
  c.cache_threshold = 1.5;
  EXPECT_THROW((void)make_router("prefix-aware", c), InputError);
  c = RouterConfig{};
  c.replicas = 0;
  EXPECT_THROW((void)make_router("round-robin", c), InputError);
}

TEST(KvTransfer, BytesAreLayersTimesKAndVTimesKvHeadsTimesHeadDimTimesDtype) {
  // Llama-2-7B: 32 layers x 2 x 32 KV heads x 128 x 2 B = 524,288 B per token.
  const model::ModelSpec m = testing::llama2_7b();
  EXPECT_EQ(kv_transfer_bytes(m, hw::DType::kFp16, 1), Bytes(524288));
  EXPECT_EQ(kv_transfer_bytes(m, hw::DType::kFp16, 1000), Bytes(524288000));
  EXPECT_EQ(kv_transfer_bytes(m, hw::DType::kFp8, 10), Bytes(2621440));
}

TEST(KvTransfer, CatalogLinksApplyNcclAndInfinibandEfficiencies) {
  // DGX A100: 8 GPUs, 8 HDR NICs of 200 Gb/s = 25 GB/s per GPU, x 4096/4122 payload; NVLink 300 GB/s
  // per direction x 0.8.
  const hw::GpuSpec gpu = testing::a100_80gb();
  hw::NodeSpec node;
  node.gpus_per_node = 8;
  node.nics.count = 8;
  node.nics.bandwidth = Bandwidth(25e9);
  const NodeLink l = NodeLink::from_catalog(gpu, &node);
  EXPECT_EQ(l.gpus_per_node, 8);
  EXPECT_NEAR(l.network_per_gpu.bytes_per_second(), 25e9 * 4096.0 / 4122.0, 1.0);
  EXPECT_NEAR(l.scaleup_per_gpu.bytes_per_second(), 240e9, 1.0);
  EXPECT_EQ(l.network_latency, Time::ns(6800 + 2700));
  EXPECT_EQ(l.scaleup_latency, Time::ns(6800 + 470));
  // No node: alone on its PCIe link.
  const NodeLink alone = NodeLink::from_catalog(gpu, nullptr);
  EXPECT_EQ(alone.gpus_per_node, 1);
  EXPECT_NEAR(alone.network_per_gpu.bytes_per_second(), 32e9 * 0.75, 1.0);
}

TEST(KvTransfer, NvlinkFollowsTheGenerationAndTheDomainSpansARack) {
  // A GB200 NVL72 tray: 4 Blackwell GPUs of 900 GB/s NVLink in a 72-GPU NVLink domain, 4 NICs of 50 GB/s.
  // KV moves over NVLink between any replicas of the rack (72 GPUs per "node" for placement) at NCCL's
  // Blackwell share, 40.1 of 50 GB/s per link: 900 x 0.802 = 721.8 GB/s per GPU; the NIC share stays per
  // tray: 4 x 50 / 4 GB/s x 4096/4122. An H100's NVLink 4 counts 20.6 of 25: 450 x 0.824 = 370.8 GB/s.
  hw::GpuSpec gb200 = testing::a100_80gb();
  gb200.architecture = "blackwell";
  gb200.scaleup = hw::ScaleupLink{"NVLink 5", 18, Bandwidth(900e9)};
  hw::NodeSpec tray;
  tray.gpus_per_node = 4;
  tray.scaleup_domain_gpus = 72;
  tray.nics.count = 4;
  tray.nics.bandwidth = Bandwidth(50e9);
  const NodeLink l = NodeLink::from_catalog(gb200, &tray);
  EXPECT_EQ(l.gpus_per_node, 72);
  EXPECT_NEAR(l.scaleup_per_gpu.bytes_per_second(), 900e9 * 0.802, 1.0);
  EXPECT_NEAR(l.network_per_gpu.bytes_per_second(), 50e9 * 4096.0 / 4122.0, 1.0);
  hw::GpuSpec h100 = testing::a100_80gb();
  h100.architecture = "hopper";
  h100.scaleup = hw::ScaleupLink{"NVLink 4", 18, Bandwidth(450e9)};
  EXPECT_NEAR(NodeLink::from_catalog(h100, nullptr).scaleup_per_gpu.bytes_per_second(), 450e9 * 0.824, 1.0);
}

// Records when each transfer's last byte arrives.
class Arrivals final : public net::FlowListener {
 public:
  void on_flow_done(uint64_t tag, Time now) override { done[tag] = now; }
  std::map<uint64_t, Time> done;
};

TEST(KvTransfer, ALoneTransferTakesTheAlphaBetaSendRecvTimeAndTwoShareTheSendersLinks) {
  // TP 2 prefill replica on node 0, TP 4 decode replicas on nodes 1 and 2 (4 GPUs per node), 25 GB/s
  // NIC per GPU: B = min(2 x 25, 4 x 25) = 50 GB/s, a = 9.5 us; S = 100 MB.
  //   alone: a + S / B, coll/alpha_beta.h's send/recv between two nodes at B.
  //   two at once from the prefill replica to both decode replicas: its 50 GB/s egress is shared,
  //   25 GB/s each (max-min), both done at a + 2 S / B.
  NodeLink l;
  l.gpu = "a";
  l.gpus_per_node = 4;
  l.network_per_gpu = Bandwidth(25e9);
  l.scaleup_per_gpu = Bandwidth(240e9);
  const Bytes size(100000000);
  coll::AlphaBetaParams p;
  p.ranks = 2;
  p.ranks_per_node = 1;
  p.inter = coll::Level{l.network_latency, Bandwidth(50e9)};
  p.intra = p.inter;
  const Time alone = coll::alpha_beta_time(coll::Op::kSendRecv, coll::Algorithm::kDirect, size, p);
  EXPECT_EQ(alone, Time::ns(9500) + Time::ms(2));
  {
    des::Engine engine;
    KvNetwork net(engine, {{2, &l, {0, false}}, {4, &l, {1, false}}, {4, &l, {2, false}}});
    EXPECT_FALSE(net.co_located(0, 1));
    EXPECT_EQ(net.lone_time(0, 1, size), alone);
    Arrivals a;
    net.start(0, 1, size, &a, 7);
    engine.run();
    EXPECT_NEAR(static_cast<double>((a.done.at(7) - alone).picoseconds()), 0.0, 2.0);  // ps rounding
  }
  {
    des::Engine engine;
    KvNetwork net(engine, {{2, &l, {0, false}}, {4, &l, {1, false}}, {4, &l, {2, false}}});
    Arrivals a;
    net.start(0, 1, size, &a, 1);
    net.start(0, 2, size, &a, 2);
    engine.run();
    const Time both = Time::ns(9500) + Time::ms(4);
    for (uint64_t k : {1u, 2u}) EXPECT_NEAR(static_cast<double>((a.done.at(k) - both).picoseconds()), 0.0, 2.0);
  }
}

TEST(KvTransfer, PlacementFillsNodesInOrderAndKeepsGpuTypesApart) {
  NodeLink a;
  a.gpu = "a";
  a.gpus_per_node = 8;
  NodeLink b = a;
  b.gpu = "b";
  // TP 4, 4, 4 of type a: nodes 0, 0, 1; TP 16: two whole nodes (2, 3), spanning; TP 2 of type b: node 4.
  const std::vector<ReplicaPlace> p = place_replicas({4, 4, 4, 16, 2}, {&a, &a, &a, &a, &b});
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].node, 0);
  EXPECT_EQ(p[1].node, 0);
  EXPECT_EQ(p[2].node, 1);
  EXPECT_EQ(p[3].node, 2);
  EXPECT_TRUE(p[3].spans_nodes);
  EXPECT_EQ(p[4].node, 4);
  EXPECT_FALSE(p[4].spans_nodes);
}

}  // namespace
}  // namespace orrery::serve
