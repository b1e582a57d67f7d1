#include "core/progress.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

namespace orrery {

bool progress_enabled(const ProgressOptions& options) {
  if (options.quiet || options.stream == nullptr) return false;
  if (options.force_tty) return true;
  return ::isatty(::fileno(options.stream)) == 1;
}

std::string render_progress_line(const std::string& label, uint64_t done, uint64_t total, int width,
                                 double elapsed_s) {
  const uint64_t d = std::min(done, total);
  const double frac = total == 0 ? 1.0 : static_cast<double>(d) / static_cast<double>(total);
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::string eta;
  if (frac > 0 && frac < 1) {
    const double remaining = elapsed_s * (1 - frac) / frac;
    eta = fmt::format(" ETA {:.0f}s", remaining);
  }
  return fmt::format("{} [{}] {:3.0f}% {}/{}{}", label, bar, frac * 100, d, total, eta);
}

ProgressBar::ProgressBar(std::string label, uint64_t total, ProgressOptions options)
    : label_(std::move(label)),
      total_(total),
      options_(options),
      enabled_(progress_enabled(options)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done) {
  if (!enabled_ || finished_) return;
  if ((calls_++ & 1023) != 0 && done < total_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
  last_draw_ = now;
  draw(done);
}

void ProgressBar::draw(uint64_t done) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string line = render_progress_line(label_, done, total_, 30, elapsed);
  std::fprintf(options_.stream, "\r%s\x1b[K", line.c_str());
  std::fflush(options_.stream);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  draw(total_);
  std::fputc('\n', options_.stream);
  std::fflush(options_.stream);
}

}  // namespace orrery
