#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "core/assert.h"

namespace orrery {

void parallel_for(size_t n, size_t grain, int threads, const std::function<void(size_t)>& fn,
                  const std::function<void(size_t)>& progress) {
  ORRERY_CHECK(grain >= 1);
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex error_mutex;
  size_t error_index = std::numeric_limits<size_t>::max();
  std::exception_ptr error;
  auto work = [&](bool caller) {
    for (;;) {
      const size_t begin = next.fetch_add(grain);
      if (begin >= n) break;
      const size_t end = std::min(n, begin + grain);
      for (size_t i = begin; i < end; ++i) {
        try {
          fn(i);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(error_mutex);
          if (i < error_index) {
            error_index = i;
            error = std::current_exception();
          }
        }
      }
      const size_t now = done.fetch_add(end - begin) + (end - begin);
      if (caller && progress) progress(now);
    }
  };
  const size_t chunks = std::max<size_t>(1, (n + grain - 1) / grain);
  const size_t helpers = std::min(static_cast<size_t>(std::max(1, threads)), chunks) - 1;
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work, false);
  work(true);
  for (std::thread& t : pool) t.join();
  if (progress) progress(n);
  if (error) std::rethrow_exception(error);
}

}  // namespace orrery
