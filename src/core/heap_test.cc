#include "core/heap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace orrery {
namespace {

// core/heap.h. Under glibc's defaults a 48 MiB block is mapped (the threshold starts at 128 KiB and
// never rises past 32 MiB) and, had it come from the heap, the heap top would be trimmed back to 128 KiB
// at its free. With the settings it comes from the heap and stays there, free, at the top.
TEST(Heap, KeepFreedMemoryServesLargeBlocksFromTheHeapAndKeepsThem) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  ASSERT_TRUE(keep_freed_memory());
  const size_t mapped = mallinfo2().hblks;
  constexpr size_t kBytes = size_t{48} << 20;
  void* p = std::malloc(kBytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBytes);
  EXPECT_EQ(mallinfo2().hblks, mapped);  // not mapped
  std::free(p);
  EXPECT_GE(mallinfo2().keepcost, kBytes);  // the freed block is still at the heap's top
#else
  EXPECT_FALSE(keep_freed_memory());
  GTEST_SKIP() << "glibc's allocator only (the sanitizers bring their own)";
#endif
}

}  // namespace
}  // namespace orrery
