#include "train/caching_allocator.h"

#include <algorithm>
#include <limits>

namespace orrery::train {
namespace {

int64_t round_up(int64_t v, int64_t unit) { return (v + unit - 1) / unit * unit; }

}  // namespace

std::string_view allocator_name(AllocatorMode m) {
  switch (m) {
    case AllocatorMode::kNone: return "none";
    case AllocatorMode::kClassic: return "classic";
    case AllocatorMode::kExpandable: return "expandable";
  }
  return "none";
}

void CachingAllocator::note_peaks() {
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  peak_reserved_ = std::max(peak_reserved_, reserved_);
}

void CachingAllocator::insert_free(int64_t b) {
  const Block& x = blocks_[static_cast<size_t>(b)];
  free_[static_cast<size_t>(x.pool)].insert(FreeKey{x.size, x.addr, b});
}

void CachingAllocator::erase_free(int64_t b) {
  const Block& x = blocks_[static_cast<size_t>(b)];
  free_[static_cast<size_t>(x.pool)].erase(FreeKey{x.size, x.addr, b});
}

// A free block of at least `size` bytes made from new driver memory (a new segment, or the pool's
// expandable segment grown at its end); not yet in the free set.
int64_t CachingAllocator::new_memory(int64_t size, int32_t pool, bool small) {
  if (mode_ == AllocatorMode::kExpandable) {
    const int64_t page = small ? kSmallBuffer : kLargeBuffer;
    int64_t& tail = tail_[static_cast<size_t>(pool)];
    if (tail >= 0 && blocks_[static_cast<size_t>(tail)].free) {
      // Grow the free block at the end of the segment by the pages it lacks.
      const int64_t b = tail;
      erase_free(b);
      Block& x = blocks_[static_cast<size_t>(b)];
      const int64_t grow = round_up(size - x.size, page);
      x.size += grow;
      reserved_ += grow;
      next_addr_ = std::max(next_addr_, x.addr + x.size);
      return b;
    }
    const int64_t bytes = round_up(size, page);
    Block x;
    x.size = bytes;
    x.pool = pool;
    x.free = true;
    if (tail >= 0) {
      const Block& last = blocks_[static_cast<size_t>(tail)];
      x.addr = last.addr + last.size;
      x.prev = tail;
    } else {
      // Each pool's segment gets its own address range (far apart: they never touch).
      x.addr = next_addr_ + (int64_t{1} << 50);
    }
    next_addr_ = std::max(next_addr_, x.addr + x.size);
    blocks_.push_back(x);
    const int64_t b = static_cast<int64_t>(blocks_.size()) - 1;
    if (x.prev >= 0) blocks_[static_cast<size_t>(x.prev)].next = b;
    tail_[static_cast<size_t>(pool)] = b;
    reserved_ += bytes;
    return b;
  }
  // Classic: cudaMalloc a new segment (get_allocation_size).
  const int64_t bytes = small ? kSmallBuffer : (size < kMinLargeAlloc ? kLargeBuffer : round_up(size, kRoundLarge));
  Block x;
  x.addr = next_addr_;
  x.size = bytes;
  x.pool = pool;
  x.free = true;
  next_addr_ += bytes + kRoundLarge;  // a gap: segments are never neighbours
  blocks_.push_back(x);
  reserved_ += bytes;
  return static_cast<int64_t>(blocks_.size()) - 1;
}

int64_t CachingAllocator::allocate(Bytes request, int32_t stream) {
  if (mode_ == AllocatorMode::kNone) {
    Block x;
    x.size = request.count();
    blocks_.push_back(x);
    allocated_ += x.size;
    reserved_ += x.size;
    note_peaks();
    return static_cast<int64_t>(blocks_.size()) - 1;
  }
  const int64_t size = std::max(kMinBlockSize, round_up(request.count(), kMinBlockSize));
  const bool small = size <= kSmallSize;
  const int32_t pool = stream * 2 + (small ? 1 : 0);
  while (free_.size() <= static_cast<size_t>(pool)) {
    free_.emplace_back(&nodes_);
    tail_.push_back(-1);
  }
  int64_t b = -1;
  auto& fs = free_[static_cast<size_t>(pool)];
  auto it = fs.lower_bound(FreeKey{size, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min()});
  if (it != fs.end()) {
    b = std::get<2>(*it);
    fs.erase(it);
  } else {
    b = new_memory(size, pool, small);
  }
  // Split off what is left when it is worth keeping (should_split).
  const int64_t left = blocks_[static_cast<size_t>(b)].size - size;
  if (small ? left >= kMinBlockSize : left > kSmallSize) {
    Block rest;
    {
      const Block& x = blocks_[static_cast<size_t>(b)];
      rest.addr = x.addr + size;
      rest.size = left;
      rest.pool = x.pool;
      rest.prev = b;
      rest.next = x.next;
      rest.free = true;
    }
    int64_t r;
    if (!spare_.empty()) {
      r = spare_.back();
      spare_.pop_back();
      blocks_[static_cast<size_t>(r)] = rest;
    } else {
      blocks_.push_back(rest);
      r = static_cast<int64_t>(blocks_.size()) - 1;
    }
    Block& x = blocks_[static_cast<size_t>(b)];
    if (x.next >= 0) blocks_[static_cast<size_t>(x.next)].prev = r;
    x.next = r;
    x.size = size;
    if (tail_[static_cast<size_t>(pool)] == b) tail_[static_cast<size_t>(pool)] = r;
    insert_free(r);
  }
  Block& x = blocks_[static_cast<size_t>(b)];
  x.free = false;
  allocated_ += x.size;
  note_peaks();
  return b;
}

void CachingAllocator::release(int64_t h) {
  Block& x0 = blocks_.at(static_cast<size_t>(h));
  allocated_ -= x0.size;
  if (mode_ == AllocatorMode::kNone) {
    reserved_ -= x0.size;
    x0.size = 0;
    return;
  }
  x0.free = true;
  int64_t b = h;
  // Merge with a free neighbour on either side (same segment: the neighbour links never cross one).
  auto merge = [&](int64_t lo, int64_t hi) {  // hi is absorbed into lo
    Block& l = blocks_[static_cast<size_t>(lo)];
    Block& r = blocks_[static_cast<size_t>(hi)];
    l.size += r.size;
    l.next = r.next;
    if (r.next >= 0) blocks_[static_cast<size_t>(r.next)].prev = lo;
    if (tail_[static_cast<size_t>(l.pool)] == hi) tail_[static_cast<size_t>(l.pool)] = lo;
    r = Block{};
    spare_.push_back(hi);
  };
  const int64_t nx = blocks_[static_cast<size_t>(b)].next;
  if (nx >= 0 && blocks_[static_cast<size_t>(nx)].free) {
    erase_free(nx);
    merge(b, nx);
  }
  const int64_t pv = blocks_[static_cast<size_t>(b)].prev;
  if (pv >= 0 && blocks_[static_cast<size_t>(pv)].free) {
    erase_free(pv);
    merge(pv, b);
    b = pv;
  }
  insert_free(b);
}

}  // namespace orrery::train
