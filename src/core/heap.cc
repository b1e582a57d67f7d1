#include "core/heap.h"

#include <cstdlib>  // defines __GLIBC__ under glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace orrery {

bool keep_freed_memory() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  constexpr int kMiB = 1 << 20;
  // Each mallopt returns 1 on success. Setting the mmap threshold also ends glibc's dynamic one, which
  // rises only as mapped blocks are freed and never past 32 MiB. Blocks over 64 MiB that a thread's own
  // arena (64 MiB heaps) cannot hold are still mapped.
  return mallopt(M_MMAP_THRESHOLD, 256 * kMiB) == 1 && mallopt(M_TRIM_THRESHOLD, 256 * kMiB) == 1 &&
         mallopt(M_TOP_PAD, 64 * kMiB) == 1;
#else
  return false;
#endif
}

}  // namespace orrery
