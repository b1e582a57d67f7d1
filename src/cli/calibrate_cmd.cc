// `orrery calibrate`: fit the compute model's constants to kernels measured on a GPU and write them as a
// calibration file (docs/compute.md, "Calibration files"; compute/calibration_fit.h).
//
// Inputs are the CSV files of tools/gpu/training_kernels.py (--kernels: GEMMs, copies, residual adds,
// one call per timing) and tools/gpu/attention_sweep.py (--sweep: fused attention and weight-streaming
// GEMMs, back-to-back calls). What each constant is fit on:
//   memory_efficiency        copies and residual adds of --kernels, from --min-single-call-ms
//   gemm_memory_efficiency   the sweep's GEMMs of at most 32 rows (weight streaming)
//   gemm_efficiency          the GEMMs of --kernels with 256 rows or more, from --min-single-call-ms
//   attention forward/back.  the sweep's kernels of --attention-kernel, from --min-attention-ms
// A constant whose kernels are absent is not written (the run keeps the built-in value).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/output.h"
#include "compute/calibration_fit.h"
#include "core/error.h"
#include "core/strings.h"
#include "io/atomic_file.h"

namespace orrery::cli {
namespace {

using io::Json;
const Where kCl{"<command line>", 0, ""};

struct CalibrateArgs {
  std::string gpu;
  std::string kernels;
  std::string sweep;
  std::string attention_kernel = "cudnn";
  double min_single_call_ms = 0.1;
  double min_attention_ms = 0.3;
  std::string source;
  std::string out;
};

// A CSV file with a header line, as rows of column -> cell; errors name the file and line.
class Csv {
 public:
  Csv(const std::string& path, const std::vector<std::string>& required) : path_(path) {
    std::ifstream in(path);
    if (!in) throw InputError(Where{path, 0, ""}, "cannot open the file");
    std::string line;
    if (!std::getline(in, line)) throw InputError(Where{path, 1, ""}, "empty file: expected a header line");
    header_ = split_line(line);
    for (const std::string& r : required) {
      if (std::find(header_.begin(), header_.end(), r) == header_.end()) {
        throw InputError(Where{path, 1, r}, "missing column '" + r + "'",
                         "expected the CSV that tools/gpu/ writes (header: " + join(required) + ", ...)");
      }
    }
    int64_t n = 1;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      std::vector<std::string> cells = split_line(line);
      if (cells.size() != header_.size()) {
        throw InputError(Where{path, n, ""}, fmt::format("expected {} cells, found {}", header_.size(), cells.size()));
      }
      rows_.push_back({n, std::move(cells)});
    }
  }
  size_t size() const { return rows_.size(); }
  const std::string& cell(size_t row, const std::string& column) const {
    const auto it = std::find(header_.begin(), header_.end(), column);
    ORRERY_ASSERT(it != header_.end());
    return rows_[row].cells[static_cast<size_t>(it - header_.begin())];
  }
  double number(size_t row, const std::string& column) const {
    const std::string& s = cell(row, column);
    try {
      size_t used = 0;
      const double v = std::stod(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
    throw InputError(Where{path_, rows_[row].line, column}, "expected a number, found '" + s + "'");
  }
  // A finite number > 0 (a time, a byte count, a GEMM's row count).
  double positive(size_t row, const std::string& column) const {
    const double v = number(row, column);
    if (!(v > 0.0 && std::isfinite(v))) {
      throw InputError(where(row, column), "expected a finite positive number, found '" + cell(row, column) + "'");
    }
    return v;
  }
  // A whole number from 1 to 2^40 (a dimension, a head count, a sequence length).
  int64_t count(size_t row, const std::string& column) const {
    const double v = number(row, column);
    if (!(v >= 1.0 && v <= 1099511627776.0 && v == std::floor(v))) {
      throw InputError(where(row, column), "expected a whole number from 1 to 2^40, found '" + cell(row, column) + "'");
    }
    return static_cast<int64_t>(v);
  }
  Where where(size_t row, const std::string& column) const { return Where{path_, rows_[row].line, column}; }

 private:
  struct Row {
    int64_t line;
    std::vector<std::string> cells;
  };
  static std::vector<std::string> split_line(const std::string& line) {
    const std::vector<std::string_view> f = split_csv(line);
    return {f.begin(), f.end()};
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  }
  std::string path_;
  std::vector<std::string> header_;
  std::vector<Row> rows_;
};

struct Fitted {
  std::string constant;  // as the calibration file names it
  std::string value;     // as written in the file
  std::string builtin;
  compute::FitQuality quality;
};

std::string rate_text(const compute::AttentionRate& r) {
  return fmt::format("{{efficiency: {:.2f}, half_length: {:g}, ctas_per_sm_half: {:g}}}", r.efficiency, r.half_length,
                     r.ctas_per_sm_half);
}

void run_calibrate(Context& ctx, const CalibrateArgs& a) {
  if (a.kernels.empty() && a.sweep.empty()) {
    throw InputError(kCl.with_key("--kernels"), "nothing to fit: give --kernels FILE, --sweep FILE or both",
                     "the CSVs of tools/gpu/training_kernels.py and tools/gpu/attention_sweep.py");
  }
  std::string backend;
  if (a.attention_kernel == "cudnn") {
    backend = "cudnn";
  } else if (a.attention_kernel == "fa2") {
    backend = "flash";
  } else {
    throw InputError(kCl.with_key("--attention-kernel"), "expected cudnn or fa2, found '" + a.attention_kernel + "'",
                     suggest(a.attention_kernel, {"cudnn", "fa2"}));
  }
  if (!(a.min_single_call_ms >= 0.0)) throw InputError(kCl.with_key("--min-single-call-ms"), "must not be negative");
  if (!(a.min_attention_ms >= 0.0)) throw InputError(kCl.with_key("--min-attention-ms"), "must not be negative");
  const hw::GpuSpec& gpu = ctx.catalog().hw.get_gpu(a.gpu, kCl.with_key("--gpu"));
  const hw::DType dt = hw::DType::kBf16;
  if (!gpu.peak(dt)) throw InputError(kCl.with_key("--gpu"), "GPU '" + gpu.name + "' has no bf16 peak (the kernels are bf16)");
  const compute::Calibration builtin = compute::default_calibration(gpu);

  std::vector<compute::MeasuredGemm> compute_gemms, streaming_gemms;
  std::vector<compute::MeasuredStream> streams;
  std::vector<compute::MeasuredAttention> attention;
  if (!a.kernels.empty()) {
    const Csv k(a.kernels, {"config", "op", "pass", "m", "n", "k", "ms", "bytes"});
    for (size_t i = 0; i < k.size(); ++i) {
      const std::string& op = k.cell(i, "op");
      const std::string& pass = k.cell(i, "pass");
      const double ms = k.positive(i, "ms");
      if (ms < a.min_single_call_ms) continue;
      const bool gemm = op == "qkv" || op == "proj" || op == "fc1" || op == "fc2" || op == "lm-head";
      if (gemm && (pass == "forward" || pass == "input-grad" || pass == "weight-grad") && k.positive(i, "m") >= 256.0) {
        compute_gemms.push_back({k.positive(i, "m"), k.count(i, "n"), k.count(i, "k"), ms});
      } else if (op == "d2d-copy" || op == "residual-add") {
        streams.push_back({k.positive(i, "bytes"), ms});
      }
    }
  }
  if (!a.sweep.empty()) {
    const Csv s(a.sweep, {"backend", "batch", "heads", "kv_heads", "seq", "pass", "ms"});
    for (size_t i = 0; i < s.size(); ++i) {
      const std::string& b = s.cell(i, "backend");
      const double ms = s.positive(i, "ms");
      if (b == "gemm") {
        // heads = tokens, seq = n x k (attention_sweep.py's GEMM rows).
        const std::string& nk = s.cell(i, "seq");
        const size_t x = nk.find('x');
        if (x == std::string::npos) throw InputError(s.where(i, "seq"), "expected N x K such as 4096x11008, found '" + nk + "'");
        const double m = static_cast<double>(s.count(i, "heads"));
        const auto dim = [&](std::string_view text) {
          int64_t v = 0;
          const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          if (ec != std::errc() || end != text.data() + text.size() || v < 1) {
            throw InputError(s.where(i, "seq"), "expected N x K such as 4096x11008, found '" + nk + "'");
          }
          return v;
        };
        const int64_t n = dim(std::string_view(nk).substr(0, x));
        const int64_t kk = dim(std::string_view(nk).substr(x + 1));
        if (m <= 32.0) streaming_gemms.push_back({m, n, kk, ms});
      } else if (b == backend && ms >= a.min_attention_ms) {
        const std::string& p = s.cell(i, "pass");
        if (p != "forward" && p != "backward") {
          throw InputError(s.where(i, "pass"), "expected forward or backward, found '" + p + "'");
        }
        attention.push_back({s.count(i, "batch"), s.count(i, "heads"), s.count(i, "kv_heads"), s.count(i, "seq"),
                             p == "forward" ? compute::Pass::kForward : compute::Pass::kBackward, ms});
      }
    }
  }

  compute::Calibration c = builtin;
  std::vector<Fitted> fits;
  compute::FitQuality q;
  if (!streams.empty()) {
    c = compute::fit_memory_efficiency(gpu, c, streams, q);
    fits.push_back({"memory_efficiency", fmt::format("{:.2f}", c.memory_efficiency), fmt::format("{:.2f}", builtin.memory_efficiency), q});
  }
  if (!streaming_gemms.empty()) {
    c = compute::fit_gemm_memory_efficiency(gpu, c, streaming_gemms, dt, q);
    fits.push_back({"gemm_memory_efficiency", fmt::format("{:.2f}", c.gemm_memory_efficiency),
                    fmt::format("{:.2f}", builtin.gemm_memory_efficiency), q});
  }
  if (!compute_gemms.empty()) {
    c = compute::fit_gemm_efficiency(gpu, c, compute_gemms, dt, q);
    fits.push_back({"gemm_efficiency", fmt::format("{:.2f}", c.gemm_efficiency), fmt::format("{:.2f}", builtin.gemm_efficiency), q});
  }
  const auto count = [&](compute::Pass p) {
    return std::count_if(attention.begin(), attention.end(), [p](const compute::MeasuredAttention& m) { return m.pass == p; });
  };
  if (count(compute::Pass::kForward) > 0) {
    c = compute::fit_attention(gpu, c, attention, compute::Pass::kForward, dt, q);
    fits.push_back({"attention.forward", rate_text(c.attention), rate_text(builtin.attention), q});
  }
  if (count(compute::Pass::kBackward) > 0) {
    c = compute::fit_attention(gpu, c, attention, compute::Pass::kBackward, dt, q);
    fits.push_back({"attention.backward", rate_text(c.attention_backward), rate_text(builtin.attention_backward), q});
  }
  if (fits.empty()) {
    throw InputError(kCl.with_key(a.sweep.empty() ? "--kernels" : "--sweep"),
                     "no kernel in the files qualifies for any fit (see --min-single-call-ms, --min-attention-ms, "
                     "--attention-kernel)");
  }

  std::string source = a.source;
  if (source.empty()) {
    source = "orrery calibrate from " + (a.kernels.empty() ? std::string() : a.kernels) +
             (a.kernels.empty() || a.sweep.empty() ? "" : " and ") + a.sweep;
  }
  std::string yaml = fmt::format("# Written by `{}` (docs/compute.md, \"Calibration files\").\n", ctx.command_line);
  yaml += fmt::format("gpu: {}\nsource: \"{}\"\n", gpu.name, source);
  bool attention_header = false;
  for (const Fitted& f : fits) {
    const std::string note = fmt::format("# {} kernels, median |error| {:.1f}%, worst {:.1f}%; built-in {}", f.quality.kernels,
                                         100.0 * f.quality.median_abs_error, 100.0 * f.quality.worst_abs_error, f.builtin);
    if (f.constant.rfind("attention.", 0) == 0) {
      if (!attention_header) yaml += "attention:\n";
      attention_header = true;
      yaml += fmt::format("  {}: {}  {}\n", f.constant.substr(10), f.value, note);
    } else {
      yaml += fmt::format("{}: {}  {}\n", f.constant, f.value, note);
    }
  }
  if (!a.out.empty()) io::write_file_atomic(a.out, yaml);

  if (ctx.global.json) {
    Json j = envelope("calibrate");
    j["gpu"] = gpu.name;
    j["source"] = source;
    j["attention_kernel"] = a.attention_kernel;
    j["out"] = a.out.empty() ? Json(nullptr) : Json(a.out);
    Json arr = Json::array();
    for (const Fitted& f : fits) {
      arr.push_back(Json{{"constant", f.constant}, {"value", f.value}, {"builtin", f.builtin}, {"kernels", f.quality.kernels},
                         {"median_abs_error", f.quality.median_abs_error}, {"worst_abs_error", f.quality.worst_abs_error}});
    }
    j["fits"] = arr;
    j["yaml"] = yaml;
    ctx.out << io::dump_json(j);
    return;
  }
  Table t({"constant", "fitted", "built-in", "kernels", "median |error|", "worst |error|"},
          fmt::format("compute-model constants for {} fit to measured kernels", gpu.name));
  for (const Fitted& f : fits) {
    t.add_row({f.constant, f.value, f.builtin, std::to_string(f.quality.kernels),
               fmt::format("{:.1f}%", 100.0 * f.quality.median_abs_error), fmt::format("{:.1f}%", 100.0 * f.quality.worst_abs_error)});
  }
  ctx.out << t.render() << "\n";
  if (a.out.empty()) {
    ctx.out << yaml;
  } else {
    ctx.out << fmt::format("wrote {} (use it with --calibration {})\n", a.out, a.out);
  }
}

}  // namespace

void register_calibrate_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* c = app.add_subcommand(
      "calibrate", "fit the compute model's constants to kernels measured on your GPU and write a calibration file "
                   "(docs/compute.md)");
  c->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  c->add_option("--gpu", a->gpu, "catalog GPU the kernels were measured on")->required()->type_name("NAME");
  c->add_option("--kernels", a->kernels, "tools/gpu/training_kernels.py's CSV (GEMMs, copies, residual adds)")->type_name("FILE");
  c->add_option("--sweep", a->sweep, "tools/gpu/attention_sweep.py's CSV (fused attention, weight-streaming GEMMs)")
      ->type_name("FILE");
  c->add_option("--attention-kernel", a->attention_kernel, "the sweep's attention backend to fit: cudnn | fa2")
      ->capture_default_str();
  c->add_option("--min-single-call-ms", a->min_single_call_ms,
                "leave out --kernels timings shorter than this (the host's launch latency is in them)")
      ->capture_default_str();
  c->add_option("--min-attention-ms", a->min_attention_ms,
                "leave out attention kernels shorter than this (the host's SDPA path can set their pace)")
      ->capture_default_str();
  c->add_option("--source", a->source, "provenance text for the file (default: the input files)");
  c->add_option("--out", a->out, "write the calibration file here (default: print it)")->type_name("FILE");
  actions.emplace_back(c, [a](Context& ctx) { run_calibrate(ctx, *a); });
}

}  // namespace orrery::cli
