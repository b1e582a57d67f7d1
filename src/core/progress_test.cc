#include "core/progress.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(Progress, LineShowsBarPercentAndCounts) {
  // 42 of 100 with a 10-cell bar: floor(0.42*10) = 4 filled cells.
  const std::string line = render_progress_line("sim", 42, 100, 10, 4.2);
  EXPECT_EQ(line.substr(0, 21), "sim [####......]  42%");
  // ETA = elapsed * (1 - f) / f = 4.2 * 0.58 / 0.42 = 5.8 s -> "6s".
  EXPECT_NE(line.find("ETA 6s"), std::string::npos) << line;
}

TEST(Progress, DisabledWhenQuietOrNotATty) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar("x", 10, ProgressOptions{.quiet = false, .force_tty = false, .stream = f});
    EXPECT_FALSE(bar.enabled());  // a temporary file is not a TTY
    bar.update(5);
  }
  {
    ProgressBar bar("x", 10, ProgressOptions{.quiet = true, .force_tty = true, .stream = f});
    EXPECT_FALSE(bar.enabled());
    bar.update(10);
  }
  EXPECT_EQ(std::ftell(f), 0L);  // nothing written
  std::fclose(f);
}

TEST(Progress, ForcedBarDrawsAndEndsTheLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar("x", 10, ProgressOptions{.quiet = false, .force_tty = true, .stream = f});
    bar.update(10);
  }
  std::rewind(f);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  const std::string out(buf, n);
  EXPECT_NE(out.find("100% 10/10"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
  std::fclose(f);
}

}  // namespace
}  // namespace orrery
