// Streaming reader of the serving-run workloads in ../shared/data/serving-runs (DistServe's OPT-13B
// benchmarks): CSV with header `req_idx,issue_time_s,prompt_len,output_len` (seconds, tokens).
// Each line becomes a Request (id = req_idx, arrival = issue_time_s); errors are InputError naming
// file:line and the column. (This format belongs with the others in io/trace_reader; it lives here until
// that reader gains it.)
#pragma once

#include <istream>
#include <memory>
#include <string>
#include <string_view>

#include "serve/workload.h"

namespace orrery::serve {

inline constexpr std::string_view kServingRunHeader = "req_idx,issue_time_s,prompt_len,output_len";

class ServingRunReader final : public RequestSource {
 public:
  // Reads and checks the header now (InputError on a different header).
  ServingRunReader(std::unique_ptr<std::istream> in, std::string file);
  std::optional<Request> next() override;

 private:
  std::unique_ptr<std::istream> in_;
  std::string file_;
  int64_t line_no_ = 1;
  Time last_;
};

// True when `first_line` is the serving-run header.
bool is_serving_run_header(std::string_view first_line);

}  // namespace orrery::serve
