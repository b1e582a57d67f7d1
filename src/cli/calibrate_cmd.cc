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
  std::string extras;
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
  if (a.kernels.empty() && a.sweep.empty() && a.extras.empty()) {
    throw InputError(kCl.with_key("--kernels"), "nothing to fit: give --kernels FILE, --sweep FILE, --extras FILE or several",
                     "the CSVs of tools/gpu/training_kernels.py, tools/gpu/attention_sweep.py and tools/gpu/megatron_extras.py");
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
  // The built-in constants of the chosen library (the attention rates and their dropout rates differ).
  const compute::Calibration builtin = compute::with_attention_kernel(
      compute::default_calibration(gpu), gpu,
      backend == "cudnn" ? compute::AttentionKernel::kCudnn : compute::AttentionKernel::kFlashAttention2,
      kCl.with_key("--attention-kernel"));

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

  // megatron_extras.py: weight-gradient GEMMs plain (variant bf16) and fused into an fp32 C (fused-fp32),
  // paired by (config, op); attention forwards of the chosen backend at dropout 0 and at p > 0, paired by
  // config. Its attention rows give no head count: heads = the FLOPs the script counted (tflops x time)
  // over 4 x 128 x seq (seq + 1) / 2 (causal, head dim in k). Refused variants (ms empty) are skipped.
  std::vector<compute::MeasuredAccumulate> accumulate;
  std::vector<compute::MeasuredDropout> dropout;
  if (!a.extras.empty()) {
    const Csv x(a.extras, {"config", "op", "variant", "pass", "m", "n", "k", "ms", "tflops"});
    std::map<std::pair<std::string, std::string>, std::pair<size_t, size_t>> wgrad;  // (config, op) -> bf16 row, fused row
    std::map<std::string, std::pair<size_t, size_t>> attn;                            // config -> dropout 0 row, p > 0 row
    constexpr size_t kNone = static_cast<size_t>(-1);
    for (size_t i = 0; i < x.size(); ++i) {
      if (x.cell(i, "ms").empty()) continue;
      const std::string& op = x.cell(i, "op");
      const std::string& variant = x.cell(i, "variant");
      if (x.cell(i, "pass") == "weight-grad" && (variant == "bf16" || variant == "fused-fp32")) {
        auto& slot = wgrad.try_emplace({x.cell(i, "config"), op}, kNone, kNone).first->second;
        (variant == "bf16" ? slot.first : slot.second) = i;
      } else if (op == "attention" && x.cell(i, "pass") == "forward" && variant.rfind(backend + "-dropout", 0) == 0) {
        const std::string p = variant.substr(backend.size() + 8);
        auto& slot = attn.try_emplace(x.cell(i, "config"), kNone, kNone).first->second;
        (p == "0" ? slot.first : slot.second) = i;
      }
    }
    for (const auto& [key, rows] : wgrad) {
      if (rows.first == kNone || rows.second == kNone) continue;
      accumulate.push_back({x.positive(rows.second, "m"), x.count(rows.second, "n"), x.count(rows.second, "k"),
                            x.positive(rows.first, "ms"), x.positive(rows.second, "ms")});
    }
    for (const auto& [config, rows] : attn) {
      if (rows.first == kNone || rows.second == kNone) continue;
      const int64_t seq = x.count(rows.first, "m");
      const double head_dim = static_cast<double>(x.count(rows.first, "k"));
      const double flops = x.positive(rows.first, "tflops") * 1e12 * x.positive(rows.first, "ms") * 1e-3;
      const double heads = std::round(flops / (4.0 * head_dim * static_cast<double>(seq) * static_cast<double>(seq + 1) / 2.0));
      if (heads < 1.0) throw InputError(x.where(rows.first, "tflops"), "the FLOP count gives no attention head");
      dropout.push_back({static_cast<int64_t>(heads), seq, x.positive(rows.first, "ms"), x.positive(rows.second, "ms")});
    }
  }

  compute::Calibration c = builtin;
  std::vector<Fitted> fits;
  compute::FitQuality q;
  if (!accumulate.empty()) {
    c = compute::fit_fp32_accumulate(gpu, c, accumulate, dt, q);
    fits.push_back({"fp32_accumulate_exposure", fmt::format("{:.2f}", c.fp32_accumulate_exposure),
                    fmt::format("{:.2f}", builtin.fp32_accumulate_exposure), q});
  }
  compute::FitQuality dropout_q;
  if (!dropout.empty()) c = compute::fit_attention_dropout(c, dropout, dropout_q);
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
  // The forward's line carries the dropout rate when it was fit (alone when the sweep gave no forward).
  const auto with_dropout = [&](std::string text) {
    if (dropout.empty()) return text;
    text.pop_back();  // '}'
    return text + fmt::format(", dropout_pairs_per_s: {:.3g}}}", c.attention.dropout_pairs_per_s);
  };
  if (count(compute::Pass::kForward) > 0) {
    c = compute::fit_attention(gpu, c, attention, compute::Pass::kForward, dt, q);
    fits.push_back({"attention.forward", with_dropout(rate_text(c.attention)), rate_text(builtin.attention), q});
  }
  const bool forward_line = count(compute::Pass::kForward) > 0;
  if (!dropout.empty()) {
    fits.push_back({"attention.forward.dropout_pairs_per_s", fmt::format("{:.3g}", c.attention.dropout_pairs_per_s),
                    fmt::format("{:.3g}", builtin.attention.dropout_pairs_per_s), dropout_q});
  }
  if (count(compute::Pass::kBackward) > 0) {
    c = compute::fit_attention(gpu, c, attention, compute::Pass::kBackward, dt, q);
    fits.push_back({"attention.backward", rate_text(c.attention_backward), rate_text(builtin.attention_backward), q});
  }
  if (fits.empty()) {
    throw InputError(kCl.with_key(!a.sweep.empty() ? "--sweep" : !a.kernels.empty() ? "--kernels" : "--extras"),
                     "no kernel in the files qualifies for any fit (see --min-single-call-ms, --min-attention-ms, "
                     "--attention-kernel)");
  }

  std::string source = a.source;
  if (source.empty()) {
    std::vector<std::string> files;
    for (const std::string* f : {&a.kernels, &a.sweep, &a.extras}) {
      if (!f->empty()) files.push_back(*f);
    }
    source = fmt::format("orrery calibrate from {}", fmt::join(files, " and "));
  }
  std::string yaml = fmt::format("# Written by `{}` (docs/compute.md, \"Calibration files\").\n", ctx.command_line);
  yaml += fmt::format("gpu: {}\nsource: \"{}\"\n", gpu.name, source);
  bool attention_header = false;
  for (const Fitted& f : fits) {
    // The dropout rate goes inside the forward's mapping: merged into the sweep's line, or alone.
    if (f.constant == "attention.forward.dropout_pairs_per_s" && forward_line) continue;
    const std::string note = fmt::format("# {} kernels, median |error| {:.1f}%, worst {:.1f}%; built-in {}", f.quality.kernels,
                                         100.0 * f.quality.median_abs_error, 100.0 * f.quality.worst_abs_error, f.builtin);
    if (f.constant.rfind("attention.", 0) == 0) {
      if (!attention_header) yaml += "attention:\n";
      attention_header = true;
      if (f.constant == "attention.forward.dropout_pairs_per_s") {
        yaml += fmt::format("  forward: {{dropout_pairs_per_s: {}}}  {}\n", f.value, note);
      } else {
        yaml += fmt::format("  {}: {}  {}\n", f.constant.substr(10), f.value, note);
      }
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
  c->add_option("--extras", a->extras,
                "tools/gpu/megatron_extras.py's CSV (weight gradients added into fp32, attention at dropout 0 and p): "
                "fits fp32_accumulate_exposure and the forward's dropout rate")
      ->type_name("FILE");
  c->add_option("--attention-kernel", a->attention_kernel, "the attention backend to fit (--sweep, --extras): cudnn | fa2")
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
