// A minimal deterministic fork-join loop for the planners (train/planner.cc, serve/capacity.cc).
#pragma once

#include <cstddef>
#include <functional>

namespace orrery {

// Runs fn(i) for every i in [0, n) on `threads` threads (the caller is one of them; threads <= 1 runs
// everything on the caller), taking chunks of `grain` indices in order from a shared counter. Results
// must be written by index, so they do not depend on the thread count. The caller's thread reports
// progress(done) after each of its chunks, and progress(n) at the end. An exception thrown by fn is
// rethrown here, the one of the lowest index, after every thread has stopped. REQUIRES: grain >= 1.
void parallel_for(size_t n, size_t grain, int threads, const std::function<void(size_t)>& fn,
                  const std::function<void(size_t done)>& progress = {});

}  // namespace orrery
