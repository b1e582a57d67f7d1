#include "serve/serving_run_reader.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/strings.h"

namespace orrery::serve {

bool is_serving_run_header(std::string_view first_line) {
  std::string_view l = trim(first_line);
  return l == kServingRunHeader;
}

ServingRunReader::ServingRunReader(std::unique_ptr<std::istream> in, std::string file)
    : in_(std::move(in)), file_(std::move(file)) {
  std::string header;
  if (!std::getline(*in_, header) || !is_serving_run_header(header)) {
    throw InputError(Where{file_, 1, ""}, "expected the header '" + std::string(kServingRunHeader) + "'");
  }
}

std::optional<Request> ServingRunReader::next() {
  std::string line;
  while (std::getline(*in_, line)) {
    ++line_no_;
    if (trim(line).empty()) continue;
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t i = 0; i <= line.size(); ++i) {
      if (i == line.size() || line[i] == ',') {
        f.emplace_back(trim(std::string_view(line).substr(start, i - start)));
        start = i + 1;
      }
    }
    static constexpr const char* kCols[] = {"req_idx", "issue_time_s", "prompt_len", "output_len"};
    if (f.size() != 4) {
      throw InputError(Where{file_, line_no_, ""}, "expected 4 fields, got " + std::to_string(f.size()));
    }
    double v[4];
    for (int c = 0; c < 4; ++c) {
      char* end = nullptr;
      v[c] = std::strtod(f[static_cast<size_t>(c)].c_str(), &end);
      if (f[static_cast<size_t>(c)].empty() || *end != '\0' || !std::isfinite(v[c]) || v[c] < 0) {
        throw InputError(Where{file_, line_no_, kCols[c]},
                         "expected a non-negative number, got '" + f[static_cast<size_t>(c)] + "'");
      }
    }
    Request r;
    r.id = static_cast<int64_t>(v[0]);
    r.arrival = Time::seconds(v[1]);
    r.prompt_tokens = static_cast<int64_t>(v[2]);
    r.output_tokens = static_cast<int64_t>(v[3]);
    if (r.prompt_tokens < 1 || r.output_tokens < 1) {
      throw InputError(Where{file_, line_no_, r.prompt_tokens < 1 ? "prompt_len" : "output_len"}, "must be >= 1 token");
    }
    if (r.arrival < last_) throw InputError(Where{file_, line_no_, "issue_time_s"}, "arrival times must not decrease");
    last_ = r.arrival;
    return r;
  }
  return std::nullopt;
}

}  // namespace orrery::serve
