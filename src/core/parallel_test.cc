#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace orrery {
namespace {

TEST(ParallelFor, VisitsEveryIndexOnceForAnyThreadCountAndGrain) {
  for (int threads : {1, 2, 5}) {
    for (size_t grain : {size_t{1}, size_t{3}, size_t{64}}) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{100}}) {
        std::vector<std::atomic<int>> hits(n);
        size_t last_progress = 0;
        parallel_for(n, grain, threads, [&](size_t i) { ++hits[i]; }, [&](size_t done) { last_progress = done; });
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << i << " threads " << threads << " grain " << grain;
        EXPECT_EQ(last_progress, n);  // the final report is the whole range
      }
    }
  }
}

TEST(ParallelFor, RethrowsTheExceptionOfTheLowestIndexAfterAllStop) {
  // Indices 3, 40 and 77 throw; whichever thread meets which first, the caller sees index 3's, and
  // every other index still ran.
  for (int threads : {1, 4}) {
    std::atomic<int> ran{0};
    try {
      parallel_for(100, 2, threads, [&](size_t i) {
        ++ran;
        if (i == 3 || i == 40 || i == 77) throw std::runtime_error("index " + std::to_string(i));
      });
      FAIL() << "expected an exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "index 3");
    }
    EXPECT_EQ(ran.load(), 100);
  }
}

}  // namespace
}  // namespace orrery
