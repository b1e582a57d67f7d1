#include "coll/alpha_beta.h"

#include <gtest/gtest.h>

namespace orrery::coll {
namespace {

// 8 ranks in one node: alpha 1 us, B = 100 GB/s.
AlphaBetaParams one_node() { return AlphaBetaParams{8, 8, Level{Time::us(1), Bandwidth(100e9)}, Level{}, 1.0}; }

TEST(AlphaBeta, RingAllReduceMatchesThakur) {
  // 2(n-1)a + 2(n-1)/n S/B = 14 us + 1.75 * 1e9 / 1e11 s = 14 us + 17.5 ms = 17.514 ms.
  EXPECT_EQ(alpha_beta_time(Op::kAllReduce, Algorithm::kRing, Bytes(1'000'000'000), one_node()), Time::us(17'514));
}

TEST(AlphaBeta, RingAllGatherIsHalfTheAllReduce) {
  // (n-1)a + (n-1)/n S/B = 7 us + 8.75 ms.
  EXPECT_EQ(alpha_beta_time(Op::kAllGather, Algorithm::kRing, Bytes(1'000'000'000), one_node()), Time::us(8'757));
}

TEST(AlphaBeta, HalvingDoublingHasLogarithmicLatency) {
  // 2 log2(8) a + 2(n-1)/n S/B with S = 0: 6 us.
  EXPECT_EQ(alpha_beta_time(Op::kAllReduce, Algorithm::kHalvingDoubling, Bytes(0), one_node()), Time::us(6));
}

TEST(AlphaBeta, HierarchicalAddsIntraAndInterTerms) {
  // g = 8, m = 4 nodes; a1 = 1 us, B1 = 400 GB/s; a2 = 2 us, B2 = 50 GB/s; S = 64 MiB = 67108864 B.
  // intra: 2 * (7 us + 7/8 * S / 4e11) = 2 * (7 us + 146.80064 us) = 307.60128 us
  // inter: 2 * (3 * 2 us + 3/4 * (S/8) / 5e10) = 2 * (6 us + 125.829120 us) = 263.65824 us
  // total 571.25952 us.
  const AlphaBetaParams p{32, 8, Level{Time::us(1), Bandwidth(400e9)}, Level{Time::us(2), Bandwidth(50e9)}, 1.0};
  EXPECT_EQ(alpha_beta_time(Op::kAllReduce, Algorithm::kHierarchical, Bytes::MiB(64), p), Time::ps(571'259'520));
}

TEST(AlphaBeta, FlatRingAcrossNodesRunsAtTheSlowestLevel) {
  // 32 ranks, flat ring: a = max(1, 2) us = 2 us, B = min(400, 50) GB/s:
  // 62 * 2 us + 62/32 * 64 MiB / 5e10 = 124 us + 2600.468 us.
  const AlphaBetaParams p{32, 8, Level{Time::us(1), Bandwidth(400e9)}, Level{Time::us(2), Bandwidth(50e9)}, 1.0};
  const double expected_s = 62 * 2e-6 + 62.0 / 32.0 * 67108864.0 / 50e9;
  EXPECT_EQ(alpha_beta_time(Op::kAllReduce, Algorithm::kRing, Bytes::MiB(64), p), Time::seconds(expected_s));
}

TEST(AlphaBeta, ParallelRingsUseEveryNicOfTheNode) {
  // 8 channels leave each node through 8 NICs: B = min(400, 8 * 50) GB/s = 400 GB/s, a = 2 us:
  // 62 * 2 us + 62/32 * 64 MiB / 4e11.
  AlphaBetaParams p{32, 8, Level{Time::us(1), Bandwidth(400e9)}, Level{Time::us(2), Bandwidth(50e9)}, 1.0};
  p.inter_parallel = 8;
  const double expected_s = 62 * 2e-6 + 62.0 / 32.0 * 67108864.0 / 400e9;
  EXPECT_EQ(alpha_beta_time(Op::kAllReduce, Algorithm::kRing, Bytes::MiB(64), p), Time::seconds(expected_s));
}

TEST(AlphaBeta, OversubscriptionSlowsAllToAllByItsRatio) {
  // One rank per node so every byte crosses the scale-out tier: with alpha 0 the time is
  // (n-1)/n S / (B2/o), exactly o times the non-oversubscribed time.
  AlphaBetaParams p{16, 1, Level{Time::zero(), Bandwidth(400e9)}, Level{Time::zero(), Bandwidth(50e9)}, 1.0};
  const Time base = alpha_beta_time(Op::kAllToAll, Algorithm::kDirect, Bytes::MiB(64), p);
  p.oversubscription = 4.0;
  const Time slow = alpha_beta_time(Op::kAllToAll, Algorithm::kDirect, Bytes::MiB(64), p);
  EXPECT_NEAR(slow / base, 4.0, 1e-9);
}

TEST(AlphaBeta, AutoPicksTreeForSmallAndRingForLargeAllReduce) {
  // 64 ranks, a = 5 us, B = 50 GB/s; auto considers NCCL's ring and tree. At 1 KiB the latency
  // terms decide: ring 126 a = 630 us vs tree 12 a = 60 us. At 1 GiB the bandwidth terms decide:
  // ring 2*63/64 S/B = 42.28 ms (+0.63 ms) vs tree 2 S/B = 42.95 ms (+0.06 ms).
  const AlphaBetaParams p{64, 64, Level{Time::us(5), Bandwidth(50e9)}, Level{}, 1.0};
  EXPECT_EQ(choose_algorithm(Op::kAllReduce, Bytes::KiB(1), p), Algorithm::kTree);
  EXPECT_EQ(choose_algorithm(Op::kAllReduce, Bytes::GiB(1), p), Algorithm::kRing);
}

TEST(AlphaBeta, UnknownCombinationIsAnInputError) {
  EXPECT_THROW(alpha_beta_time(Op::kAllToAll, Algorithm::kRing, Bytes(1), one_node()), InputError);
  EXPECT_THROW(parse_algorithm("rign", Where{"", 0, "--algo"}), InputError);
  try {
    parse_algorithm("rign", Where{"", 0, "--algo"});
  } catch (const InputError& e) {
    EXPECT_EQ(e.hint(), "did you mean 'ring'?");
  }
}

TEST(NcclConventions, BusBandwidthFactors) {
  // nccl-tests PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather (n-1)/n, broadcast 1.
  EXPECT_DOUBLE_EQ(bus_factor(Op::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(Op::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Op::kBroadcast, 8), 1.0);
  // 1 GB all-reduce in 10 ms over 8 ranks: algbw 100 GB/s, busbw 175 GB/s.
  const Bandwidths b = nccl_bandwidths(Op::kAllReduce, Bytes(1'000'000'000), 8, Time::ms(10));
  EXPECT_DOUBLE_EQ(b.algbw.bytes_per_second(), 1e11);
  EXPECT_DOUBLE_EQ(b.busbw.bytes_per_second(), 1.75e11);
}

}  // namespace
}  // namespace orrery::coll
