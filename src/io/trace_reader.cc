#include "io/trace_reader.h"

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/assert.h"
#include "core/strings.h"

namespace orrery::io {

namespace {

constexpr std::array<std::string_view, 4> kFormatNames = {"azure", "mooncake", "vidur", "generic"};

// Column names per CSV format: arrival (empty when the format has none), prompt, output, and the
// optional ones.
struct CsvSchema {
  TraceFormat format;
  std::string_view arrival;  // required unless optional_arrival
  bool optional_arrival;
  std::string_view prompt;
  std::string_view output;
  std::string_view prefix;  // optional column; empty when the format has none
};

constexpr std::array<CsvSchema, 3> kCsvSchemas = {{
    {TraceFormat::kAzure, "TIMESTAMP", false, "ContextTokens", "GeneratedTokens", ""},
    {TraceFormat::kVidur, "arrived_at", true, "num_prefill_tokens", "num_decode_tokens", ""},
    {TraceFormat::kGeneric, "arrival_s", false, "prompt_tokens", "output_tokens", "prefix_ids"},
}};

const CsvSchema& schema_of(TraceFormat f) {
  for (const CsvSchema& s : kCsvSchemas) {
    if (s.format == f) return s;
  }
  ORRERY_CHECK(false && "not a CSV format");
  return kCsvSchemas[0];
}

// Largest arrival offset a Time holds with margin (Time::seconds requires |s| < 9.2e6).
constexpr double kMaxArrivalS = 9.0e6;

std::vector<std::string> header_names(std::string_view line) {
  std::vector<std::string_view> fields;
  split_csv(line, fields);
  std::vector<std::string> names;
  for (std::string_view f : fields) names.emplace_back(f);
  return names;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool parse_int(std::string_view text, int64_t& out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

bool parse_double(std::string_view text, double& out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty() && std::isfinite(out);
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant, "chrono-Compatible
// Low-Level Date Algorithms", days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Parses "YYYY-MM-DD HH:MM:SS" with an optional fraction of up to 12 digits into whole seconds
// since 1970 and picoseconds. False on any deviation from that shape.
bool parse_azure_timestamp(std::string_view s, int64_t& seconds, int64_t& ps) {
  auto num = [&](size_t pos, size_t len, int64_t lo, int64_t hi, int64_t& v) {
    if (pos + len > s.size()) return false;
    v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    return v >= lo && v <= hi;
  };
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
      s[16] != ':') {
    return false;
  }
  if (!num(0, 4, 0, 9999, y) || !num(5, 2, 1, 12, mo) || !num(8, 2, 1, 31, d) || !num(11, 2, 0, 23, h) ||
      !num(14, 2, 0, 59, mi) || !num(17, 2, 0, 60, se)) {
    return false;
  }
  ps = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20 || s.size() > 32) return false;
    int64_t scale = 100'000'000'000;  // 1e11 ps per tenth of a second
    for (size_t i = 20; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      ps += (s[i] - '0') * scale;
      scale /= 10;
    }
  }
  seconds = days_from_civil(y, mo, d) * 86'400 + h * 3600 + mi * 60 + se;
  return true;
}

std::string in_quotes(std::string_view s) {
  constexpr size_t kMax = 60;
  return "'" + std::string(s.substr(0, kMax)) + (s.size() > kMax ? "...'" : "'");
}

std::string format_seconds(Time t) {
  std::ostringstream os;
  os.precision(12);
  os << t.to_seconds() << " s";
  return os.str();
}

}  // namespace

std::string_view to_string(TraceFormat f) { return kFormatNames[static_cast<size_t>(f)]; }

TraceFormat parse_trace_format(std::string_view name, const Where& where) {
  for (size_t i = 0; i < kFormatNames.size(); ++i) {
    if (name == kFormatNames[i]) return static_cast<TraceFormat>(i);
  }
  const std::vector<std::string> names(kFormatNames.begin(), kFormatNames.end());
  throw InputError(where, "unknown trace format " + in_quotes(name), suggest(name, names));
}

TraceFormat detect_trace_format(std::string_view first_line, const std::string& path) {
  const std::string_view line = trim(first_line);
  const bool json_ext = path.ends_with(".jsonl") || path.ends_with(".json");
  if (!line.empty() && line.front() == '{') return TraceFormat::kMooncake;
  const Where where{path, 1, ""};
  if (json_ext) {
    throw InputError(where, "cannot detect the trace format: the file name ends in .jsonl/.json but the first line " +
                                in_quotes(line) + " is not a JSON object",
                     "Mooncake traces have one JSON object per line; name the format explicitly if it is a CSV");
  }
  const std::vector<std::string> names = header_names(line);
  auto has = [&](std::string_view col) {
    for (const std::string& n : names) {
      if (n == col) return true;
    }
    return false;
  };
  for (const CsvSchema& s : kCsvSchemas) {
    if ((s.optional_arrival || has(s.arrival)) && has(s.prompt) && has(s.output)) return s.format;
  }
  // A header with two of a format's three columns is most likely that format with a misspelt column:
  // return it, so that the reader reports the missing column with a suggestion.
  for (const CsvSchema& s : kCsvSchemas) {
    const int found = (has(s.arrival) ? 1 : 0) + (has(s.prompt) ? 1 : 0) + (has(s.output) ? 1 : 0);
    if (found >= 2) return s.format;
  }
  // No format fits: point at the header column nearest to a known one, if any.
  std::vector<std::string> known;
  for (const CsvSchema& s : kCsvSchemas) {
    for (std::string_view c : {s.arrival, s.prompt, s.output}) known.emplace_back(c);
  }
  std::string hint;
  for (const std::string& n : names) {
    const std::vector<std::string> near = nearest_names(n, known, 1);
    if (!near.empty() && near.front() != n) {
      hint = "column '" + n + "': " + suggest(n, known);
      break;
    }
  }
  if (hint.empty()) hint = "pass the format explicitly (azure, mooncake, vidur, generic)";
  throw InputError(where,
                   "cannot detect the trace format from the header " + in_quotes(line) +
                       ": expected azure (TIMESTAMP, ContextTokens, GeneratedTokens), vidur (num_prefill_tokens, "
                       "num_decode_tokens[, arrived_at]), generic (arrival_s, prompt_tokens, output_tokens"
                       "[, prefix_ids]) or one JSON object per line (mooncake)",
                   hint);
}

// Column indices of a CSV trace's header.
struct TraceReader::Columns {
  size_t count = 0;
  std::vector<std::string> names;
  std::optional<size_t> arrival;
  size_t prompt = 0;
  size_t output = 0;
  std::optional<size_t> prefix;
};

TraceReader::~TraceReader() = default;

TraceReader::TraceReader(std::unique_ptr<std::istream> in, std::string file, TraceOptions options)
    : in_(std::move(in)), file_(std::move(file)), options_(options) {
  ORRERY_CHECK(in_ != nullptr);
  std::string first;
  bool got = false;
  while (read_line(first)) {
    if (!trim(first).empty()) {
      got = true;
      break;
    }
  }
  if (!got) throw InputError(Where{file_, 0, ""}, "the trace is empty (no header or first request)");
  // A UTF-8 byte-order mark before the header is not part of the first column's name.
  if (first.starts_with("\xEF\xBB\xBF")) first.erase(0, 3);
  format_ = options_.format ? *options_.format : detect_trace_format(first, file_);
  if (format_ == TraceFormat::kMooncake) {
    pending_ = std::move(first);
    pending_line_no_ = line_no_;
    has_pending_ = true;
    return;
  }
  const CsvSchema& schema = schema_of(format_);
  columns_ = std::make_unique<Columns>();
  columns_->names = header_names(first);
  columns_->count = columns_->names.size();
  auto find = [&](std::string_view name, bool required) -> std::optional<size_t> {
    for (size_t i = 0; i < columns_->names.size(); ++i) {
      if (columns_->names[i] == name) return i;
    }
    if (required) {
      fail(name,
           "missing column '" + std::string(name) + "' in the " + std::string(to_string(format_)) +
               " trace header (columns: " + join(columns_->names) + ")",
           suggest(name, columns_->names));
    }
    return std::nullopt;
  };
  columns_->arrival = find(schema.arrival, !schema.optional_arrival);
  columns_->prompt = *find(schema.prompt, true);
  columns_->output = *find(schema.output, true);
  if (!schema.prefix.empty()) columns_->prefix = find(schema.prefix, false);
}

bool TraceReader::read_line(std::string& line) {
  if (!std::getline(*in_, line)) return false;
  ++line_no_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

void TraceReader::fail(std::string_view key, std::string message, std::string hint) const {
  throw InputError(Where{file_, line_no_, std::string(key)}, std::move(message), std::move(hint));
}

std::optional<serve::Request> TraceReader::next() {
  std::string line;
  while (true) {
    if (has_pending_) {
      line = std::move(pending_);
      has_pending_ = false;
    } else if (!read_line(line)) {
      return std::nullopt;
    }
    if (trim(line).empty()) continue;
    try {
      serve::Request r = format_ == TraceFormat::kMooncake ? parse_mooncake(line) : parse_csv(line);
      r.id = next_id_++;
      return r;
    } catch (const InputError&) {
      if (!options_.skip_bad_lines) throw;
      ++skipped_;
    }
  }
}

Time TraceReader::checked_arrival(Time t, std::string_view key, std::string_view text, int column) {
  if (last_arrival_ && t < *last_arrival_) {
    fail(key,
         "arrival " + format_seconds(t) + " (" + in_quotes(text) +
             (column > 0 ? ", column " + std::to_string(column) : std::string()) +
             ") is earlier than the previous request's " + format_seconds(*last_arrival_),
         "requests must be sorted by arrival time");
  }
  last_arrival_ = t;
  return t;
}

serve::Request TraceReader::parse_csv(std::string_view line) {
  const Columns& c = *columns_;
  split_csv(line, fields_);
  if (fields_.size() != c.count) {
    fail("", "expected " + std::to_string(c.count) + " comma-separated fields (" + join(c.names) + "), found " +
                 std::to_string(fields_.size()));
  }
  auto tokens = [&](size_t col) -> int64_t {
    const std::string_view text = fields_[col];
    int64_t v = 0;
    if (!parse_int(text, v)) {
      fail(c.names[col], "expected a whole number of tokens in column " + std::to_string(col + 1) + ", found " +
                             in_quotes(text));
    }
    if (v < 1) {
      fail(c.names[col], "token counts must be >= 1, found " + std::to_string(v) + " in column " +
                             std::to_string(col + 1));
    }
    return v;
  };
  serve::Request r;
  r.prompt_tokens = tokens(c.prompt);
  r.output_tokens = tokens(c.output);
  if (c.arrival) {
    const size_t col = *c.arrival;
    const std::string_view text = fields_[col];
    const int column = static_cast<int>(col + 1);
    Time t;
    if (format_ == TraceFormat::kAzure) {
      int64_t s = 0, ps = 0;
      if (!parse_azure_timestamp(text, s, ps)) {
        fail(c.names[col], "expected a timestamp 'YYYY-MM-DD HH:MM:SS.fffffff' in column " + std::to_string(column) +
                               ", found " + in_quotes(text));
      }
      if (!azure_epoch_s_) {
        azure_epoch_s_ = s;
        azure_epoch_ps_ = ps;
      }
      const int64_t ds = s - *azure_epoch_s_;
      if (ds > static_cast<int64_t>(kMaxArrivalS) || ds < -static_cast<int64_t>(kMaxArrivalS)) {
        fail(c.names[col], "timestamp " + in_quotes(text) + " is more than 9e6 s from the first request's");
      }
      t = Time::ps(ds * 1'000'000'000'000 + (ps - azure_epoch_ps_));
    } else {
      double s = 0.0;
      if (!parse_double(text, s)) {
        fail(c.names[col], "expected an arrival time in seconds in column " + std::to_string(column) + ", found " +
                               in_quotes(text));
      }
      if (s < 0.0 || s > kMaxArrivalS) {
        fail(c.names[col], "arrival time must be in [0, 9e6] s, found " + in_quotes(text) + " in column " +
                               std::to_string(column));
      }
      t = Time::seconds(s);
    }
    r.arrival = checked_arrival(t, c.names[col], text, column);
  }
  if (c.prefix) {
    std::string_view text = fields_[*c.prefix];
    while (!text.empty()) {
      const size_t end = text.find_first_of(" ;");
      const std::string_view item = text.substr(0, end);
      if (!item.empty()) {
        uint64_t v = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (ec != std::errc() || ptr != item.data() + item.size()) {
          fail(c.names[*c.prefix], "expected non-negative integer block ids separated by spaces or ';' in column " +
                                       std::to_string(*c.prefix + 1) + ", found " + in_quotes(item));
        }
        r.prefix_blocks.push_back(v);
      }
      if (end == std::string_view::npos) break;
      text.remove_prefix(end + 1);
    }
  }
  return r;
}

serve::Request TraceReader::parse_mooncake(std::string_view line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    fail("", "malformed JSON at column " + std::to_string(e.byte) + ": " + e.what(),
         "Mooncake traces have one JSON object per line");
  }
  if (!j.is_object()) fail("", "expected a JSON object per line, found " + in_quotes(line));
  auto field = [&](const char* key) -> const nlohmann::json& {
    const auto it = j.find(key);
    if (it == j.end()) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : j.items()) keys.push_back(k);
      fail(key, "missing field '" + std::string(key) + "'", suggest(key, keys));
    }
    return *it;
  };
  auto tokens = [&](const char* key) -> int64_t {
    const nlohmann::json& v = field(key);
    if (!v.is_number_integer()) fail(key, "expected a whole number of tokens, found " + in_quotes(v.dump()));
    const int64_t n = v.get<int64_t>();
    if (n < 1) fail(key, "token counts must be >= 1, found " + std::to_string(n));
    return n;
  };
  serve::Request r;
  r.prompt_tokens = tokens("input_length");
  r.output_tokens = tokens("output_length");
  const nlohmann::json& ts = field("timestamp");
  if (!ts.is_number()) fail("timestamp", "expected a time in milliseconds, found " + in_quotes(ts.dump()));
  const double ms = ts.get<double>();
  if (!(ms >= 0.0 && ms <= kMaxArrivalS * 1e3)) {
    fail("timestamp", "arrival time must be in [0, 9e9] ms, found " + in_quotes(ts.dump()));
  }
  const Time t = ts.is_number_integer() ? Time::ms(ts.get<int64_t>()) : Time::seconds(ms * 1e-3);
  r.arrival = checked_arrival(t, "timestamp", ts.dump(), 0);
  const auto h = j.find("hash_ids");
  if (h != j.end()) {
    if (!h->is_array()) fail("hash_ids", "expected an array of block ids, found " + in_quotes(h->dump()));
    r.prefix_blocks.reserve(h->size());
    for (const nlohmann::json& id : *h) {
      if (!id.is_number_unsigned()) {
        fail("hash_ids", "expected non-negative integer block ids, found " + in_quotes(id.dump()));
      }
      r.prefix_blocks.push_back(id.get<uint64_t>());
    }
  }
  return r;
}

std::unique_ptr<TraceReader> open_trace(const std::string& path, TraceOptions options) {
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) throw InputError(Where{path, 0, ""}, "cannot open the trace file", "check the path");
  return std::make_unique<TraceReader>(std::move(in), path, options);
}

std::unique_ptr<TraceReader> read_trace_text(std::string text, const std::string& name, TraceOptions options) {
  return std::make_unique<TraceReader>(std::make_unique<std::istringstream>(std::move(text)), name, options);
}

}  // namespace orrery::io
