// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp): what it reserves
// from the driver for a sequence of tensor allocations and frees, beyond the bytes the tensors hold.
// torch.cuda.max_memory_reserved (what torchtitan logs, what nvidia-smi shows, what an OOM sees) is
// this reservation; max_memory_allocated is the tensors.
//
// Model card
//   Sizes: every request is rounded up to a multiple of 512 bytes (kMinBlockSize); requests of at most
//     1 MiB (kSmallSize) use the small pool, larger ones the large pool.
//   Pools: one per (stream, small/large). A freed block goes back to the pool of the stream it was
//     allocated on and only serves later requests on that stream.
//   Best fit: a request takes the smallest free block of its pool that holds it, the lowest address
//     among equals (BlockComparator orders by size, then address). A larger block is split when what is
//     left is at least 512 bytes (small pool) or more than 1 MiB (large pool); otherwise the request
//     takes the whole block. Freed blocks merge with free neighbours in the same segment.
//   New memory, when no free block fits:
//     classic (PyTorch's default): a new segment from cudaMalloc of 2 MiB (kSmallBuffer) for small
//       requests, 20 MiB (kLargeBuffer) for requests under 10 MiB (kMinLargeAlloc), otherwise the request
//       rounded up to 2 MiB (kRoundLarge); segments never merge with each other.
//     expandable (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): one segment per pool that grows at
//       its end, mapping pages of 2 MiB (small pool) or 20 MiB (large pool); a free block at the end is
//       extended rather than left behind.
//   Reserved: the segments' bytes (mapped pages). Allocated: the blocks handed out (rounded sizes).
// Not modelled: freeing cached blocks and retrying when cudaMalloc fails near the capacity
//   (release_cached_blocks), max_split_size_mb and garbage_collection_threshold, CUDA graphs' private
//   pools, record_stream's delayed reuse.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/units.h"

namespace orrery::train {

enum class AllocatorMode : uint8_t {
  kNone,        // reserved = allocated (no caching allocator: the tensors alone)
  kClassic,     // PyTorch's default segments
  kExpandable,  // expandable_segments:True
};

std::string_view allocator_name(AllocatorMode m);

class CachingAllocator {
 public:
  explicit CachingAllocator(AllocatorMode mode) : mode_(mode) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `size` bytes on `stream`; returns its handle. REQUIRES: size > 0.
  int64_t allocate(Bytes size, int32_t stream = 0);
  // Returns the block to its pool. REQUIRES: a live handle from allocate().
  void release(int64_t handle);

  Bytes allocated() const { return Bytes(allocated_); }
  Bytes reserved() const { return Bytes(reserved_); }
  Bytes peak_allocated() const { return Bytes(peak_allocated_); }
  Bytes peak_reserved() const { return Bytes(peak_reserved_); }

  static constexpr int64_t kMinBlockSize = 512;
  static constexpr int64_t kSmallSize = int64_t{1} << 20;
  static constexpr int64_t kSmallBuffer = int64_t{2} << 20;
  static constexpr int64_t kLargeBuffer = int64_t{20} << 20;
  static constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
  static constexpr int64_t kRoundLarge = int64_t{2} << 20;

 private:
  struct Block {
    int64_t addr = 0;
    int64_t size = 0;
    int32_t pool = 0;
    int64_t prev = -1;  // neighbours in the same segment
    int64_t next = -1;
    bool free = false;
  };
  using FreeKey = std::tuple<int64_t, int64_t, int64_t>;  // size, address, block index

  int64_t new_memory(int64_t size, int32_t pool, bool small);
  void insert_free(int64_t b);
  void erase_free(int64_t b);
  void note_peaks();

  AllocatorMode mode_;
  std::pmr::unsynchronized_pool_resource nodes_;  // the free sets' nodes (a trace makes many)
  std::vector<Block> blocks_;
  std::vector<int64_t> spare_;            // indices of merged-away blocks, reused
  std::vector<std::pmr::set<FreeKey>> free_;  // by pool
  std::vector<int64_t> tail_;             // expandable: the last block of each pool's segment (-1: none)
  int64_t next_addr_ = 0;
  int64_t allocated_ = 0;
  int64_t reserved_ = 0;
  int64_t peak_allocated_ = 0;
  int64_t peak_reserved_ = 0;
};

}  // namespace orrery::train
