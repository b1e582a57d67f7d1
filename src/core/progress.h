// A progress bar on stderr for long runs. It draws only when enabled: by default when stderr is a TTY
// and the user did not pass --quiet. Redraws are rate-limited (at most every 100 ms), so calling
// update() in a hot loop costs one clock read every 1024 calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace orrery {

struct ProgressOptions {
  bool quiet = false;      // --quiet
  bool force_tty = false;  // draw even when the stream is not a TTY (tests)
  std::FILE* stream = stderr;
};

// True when a bar should be drawn on `options.stream`.
bool progress_enabled(const ProgressOptions& options);

// Renders one line: "label [#####.....]  42% 420/1000 ETA 3s", `width` cells of bar.
// Pure function, exposed for tests.
std::string render_progress_line(const std::string& label, uint64_t done, uint64_t total, int width,
                                 double elapsed_s);

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, ProgressOptions options = {});
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(uint64_t done);  // absolute progress, 0..total
  void finish();               // draws 100% and ends the line (idempotent)
  bool enabled() const { return enabled_; }

 private:
  void draw(uint64_t done);

  std::string label_;
  uint64_t total_;
  ProgressOptions options_;
  bool enabled_;
  bool finished_ = false;
  uint64_t calls_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace orrery
