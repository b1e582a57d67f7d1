#include "train/caching_allocator.h"

#include <gtest/gtest.h>

namespace orrery::train {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
Bytes mib(int64_t v) { return Bytes(v * kMiB); }

// Sizes round up to 512 B; a small request takes a 2 MiB segment (classic).
TEST(CachingAllocator, SmallRequestRoundsTo512AndTakesA2MiBSegment) {
  CachingAllocator a(AllocatorMode::kClassic);
  a.allocate(Bytes(1000));
  EXPECT_EQ(a.allocated().count(), 1024);
  EXPECT_EQ(a.reserved().count(), 2 * kMiB);
  a.allocate(Bytes(1));  // the rest of the same segment (split: 2 MiB - 1 KiB >= 512 left)
  EXPECT_EQ(a.allocated().count(), 1024 + 512);
  EXPECT_EQ(a.reserved().count(), 2 * kMiB);
}

// A 5 MiB request gets a 20 MiB segment (1-10 MiB: kLargeBuffer); the 15 MiB left is split off and
// serves a second 5 MiB request; a third needs 5 more but 10 are left: no new segment either.
TEST(CachingAllocator, MidSizeRequestsShareA20MiBSegment) {
  CachingAllocator a(AllocatorMode::kClassic);
  a.allocate(mib(5));
  a.allocate(mib(5));
  a.allocate(mib(5));
  EXPECT_EQ(a.reserved().count(), 20 * kMiB);
  EXPECT_EQ(a.allocated().count(), 15 * kMiB);
  a.allocate(mib(6));  // 5 MiB left: a second 20 MiB segment
  EXPECT_EQ(a.reserved().count(), 40 * kMiB);
}

// A block left over by less than 1 MiB is not split (large pool): the request takes all 12 MiB.
TEST(CachingAllocator, LargeBlockWithUnder1MiBLeftIsNotSplit) {
  CachingAllocator a(AllocatorMode::kClassic);
  const int64_t h = a.allocate(mib(12));
  a.release(h);
  a.allocate(Bytes(11 * kMiB + kMiB / 2));
  EXPECT_EQ(a.allocated().count(), 12 * kMiB);
  EXPECT_EQ(a.reserved().count(), 12 * kMiB);
}

// Freed blocks serve only their own stream: the same 100 MiB on another stream is new memory.
TEST(CachingAllocator, BlocksAreReusedOnlyOnTheirStream) {
  CachingAllocator a(AllocatorMode::kClassic);
  a.release(a.allocate(mib(100), 0));
  a.allocate(mib(100), 0);
  EXPECT_EQ(a.reserved().count(), 100 * kMiB);
  a.allocate(mib(100), 1);
  EXPECT_EQ(a.reserved().count(), 200 * kMiB);
}

// The eager cross-entropy's order (allocator_trace.h) with L = 100 MiB logits and 200 MiB fp32
// tensors: L, F = L.float(), free L, S = log_softmax(F), free F, G1, G2. Peak allocated: S + G1 + G2
// = 600 MiB. Classic: segments L (100), F (200), S (200, the 100 MiB hole is too small), G1 reuses F's
// segment, G2 a new one: 700 MiB reserved. Expandable: L [0,100), F [100,300), S [300,500); F's free
// range merges with L's into [0,300), G1 takes [0,200), G2 does not fit the 100 left and S is at the
// end: [500,700). Both leave L's 100 MiB behind.
TEST(CachingAllocator, EagerCrossEntropyLeavesTheLogitsHole) {
  for (AllocatorMode mode : {AllocatorMode::kClassic, AllocatorMode::kExpandable}) {
    CachingAllocator a(mode);
    const int64_t l = a.allocate(mib(100));
    const int64_t f = a.allocate(mib(200));
    a.release(l);
    a.allocate(mib(200));
    a.release(f);
    a.allocate(mib(200));
    a.allocate(mib(200));
    EXPECT_EQ(a.peak_allocated().count(), 600 * kMiB) << allocator_name(mode);
    EXPECT_EQ(a.peak_reserved().count(), 700 * kMiB) << allocator_name(mode);
  }
}

// The fused order: L, S, free L, then the 100 MiB gradient fits L's hole exactly.
TEST(CachingAllocator, FusedCrossEntropyReusesTheLogitsBlock) {
  CachingAllocator a(AllocatorMode::kExpandable);
  const int64_t l = a.allocate(mib(100));
  a.allocate(mib(200));
  a.release(l);
  a.allocate(mib(100));
  EXPECT_EQ(a.peak_reserved().count(), 300 * kMiB);
  EXPECT_EQ(a.peak_allocated().count(), 300 * kMiB);
}

// Expandable segments grow a free block at their end: 30 MiB maps 40 (20 MiB pages); freed, a 50 MiB
// request extends that free tail by one page (60 reserved). Classic cannot reuse the 30 MiB segment
// for 50 MiB: 80 reserved.
TEST(CachingAllocator, ExpandableSegmentGrowsItsFreeTail) {
  CachingAllocator e(AllocatorMode::kExpandable);
  e.release(e.allocate(mib(30)));
  e.allocate(mib(50));
  EXPECT_EQ(e.reserved().count(), 60 * kMiB);
  CachingAllocator c(AllocatorMode::kClassic);
  c.release(c.allocate(mib(30)));
  c.allocate(mib(50));
  EXPECT_EQ(c.reserved().count(), 80 * kMiB);
}

// Freed neighbours merge: three 100 MiB blocks of one expandable segment, the outer two freed and then
// the middle, make one 300 MiB block that holds a 300 MiB request without new memory.
TEST(CachingAllocator, FreedNeighboursMerge) {
  CachingAllocator a(AllocatorMode::kExpandable);
  const int64_t x = a.allocate(mib(100));
  const int64_t y = a.allocate(mib(100));
  const int64_t z = a.allocate(mib(100));
  a.release(x);
  a.release(z);
  a.release(y);
  EXPECT_EQ(a.allocated().count(), 0);
  a.allocate(mib(300));
  EXPECT_EQ(a.reserved().count(), 300 * kMiB);
}

// Without a caching allocator reserved is the tensors.
TEST(CachingAllocator, NoneReservesTheTensorsAlone) {
  CachingAllocator a(AllocatorMode::kNone);
  const int64_t x = a.allocate(Bytes(1000));
  a.allocate(Bytes(3000));
  a.release(x);
  EXPECT_EQ(a.reserved().count(), 3000);
  EXPECT_EQ(a.peak_reserved().count(), 4000);
}

}  // namespace
}  // namespace orrery::train
