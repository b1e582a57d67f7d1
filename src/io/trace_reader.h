// Streaming readers for LLM request traces, producing serve::Request streams.
//
// Formats (docs/workloads.md has the full description and examples):
//   azure     Azure LLM inference trace 2023 CSV: TIMESTAMP ("YYYY-MM-DD HH:MM:SS[.fffffff]", no time
//             zone), ContextTokens, GeneratedTokens. Arrivals are relative to the first row's timestamp.
//   mooncake  Mooncake FAST'25 JSON Lines: {"timestamp": ms, "input_length": n, "output_length": n,
//             "hash_ids": [...]}; hash_ids (optional) become Request::prefix_blocks.
//   vidur     vidur's trace CSV: num_prefill_tokens, num_decode_tokens and, optionally, arrived_at
//             (seconds); other columns (num_total_tokens, pd_ratio...) are ignored. Without arrived_at
//             every arrival is 0: pair the lengths with synthetic arrivals (serve::ReArrivedSource).
//   generic   orrery's CSV: arrival_s, prompt_tokens, output_tokens and optionally prefix_ids (block
//             hashes, non-negative integers separated by spaces or ';').
// Every reader pulls one line at a time from a std::istream (O(1) memory in the trace length),
// accepts CRLF line endings and blank lines, requires non-decreasing arrival times, token counts
// >= 1, and reports bad input as InputError "file:line: key: what (column c)" with a hint.
// With skip_bad_lines, a malformed data line is counted (skipped_lines()) and reading goes on;
// header errors and an undetectable format are always fatal.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "serve/workload.h"

namespace orrery::io {

enum class TraceFormat { kAzure, kMooncake, kVidur, kGeneric };

// "azure", "mooncake", "vidur", "generic".
std::string_view to_string(TraceFormat f);
// The format named `name`; InputError at `where` with a suggestion otherwise.
TraceFormat parse_trace_format(std::string_view name, const Where& where = {});

// The format of a trace from its first non-blank line (a JSON object -> mooncake; a CSV header ->
// the format whose required columns it has or, failing that, the first format with two of its three
// columns, whose reader then names the missing one); `path`'s extension only rules out CSV for
// .jsonl/.json files.
// InputError naming the file and the header, with the nearest known column, when no format fits.
TraceFormat detect_trace_format(std::string_view first_line, const std::string& path);

struct TraceOptions {
  std::optional<TraceFormat> format;  // nullopt: detect from the first line
  bool skip_bad_lines = false;        // count and skip malformed data lines instead of throwing
};

class TraceReader final : public serve::RequestSource {
 public:
  // Reads from `in`; `file` names it in errors. Reads and checks the header (or first JSON line)
  // now: header errors throw here.
  TraceReader(std::unique_ptr<std::istream> in, std::string file, TraceOptions options = {});
  ~TraceReader() override;
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  std::optional<serve::Request> next() override;

  TraceFormat format() const { return format_; }
  // Data lines skipped as malformed (only with skip_bad_lines).
  int64_t skipped_lines() const { return skipped_; }
  // 1-based number of the last line read.
  int64_t line() const { return line_no_; }

 private:
  struct Columns;
  std::optional<serve::Request> parse_line(std::string_view line);
  serve::Request parse_csv(std::string_view line);
  serve::Request parse_mooncake(std::string_view line);
  Time checked_arrival(Time t, std::string_view key, std::string_view text, int column);
  bool read_line(std::string& line);
  [[noreturn]] void fail(std::string_view key, std::string message, std::string hint = {}) const;

  std::unique_ptr<std::istream> in_;
  std::string file_;
  TraceOptions options_;
  TraceFormat format_ = TraceFormat::kGeneric;
  std::unique_ptr<Columns> columns_;
  std::string pending_;  // first data line when it was read to detect the format (mooncake)
  bool has_pending_ = false;
  int64_t line_no_ = 0;
  int64_t pending_line_no_ = 0;
  int64_t skipped_ = 0;
  int64_t next_id_ = 0;
  std::optional<Time> last_arrival_;
  std::optional<int64_t> azure_epoch_s_;  // first Azure timestamp, whole seconds since 1970 (UTC-less)
  int64_t azure_epoch_ps_ = 0;            // its fractional part, picoseconds
  std::vector<std::string_view> fields_;  // scratch, reused across lines
};

// Opens `path` for streaming; InputError when it cannot be opened.
std::unique_ptr<TraceReader> open_trace(const std::string& path, TraceOptions options = {});
// Reads a trace held in memory (tests, small inline traces); `name` stands for the file in errors.
std::unique_ptr<TraceReader> read_trace_text(std::string text, const std::string& name, TraceOptions options = {});

}  // namespace orrery::io
