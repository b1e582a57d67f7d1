#include "io/calibration_file.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "io/yaml_util.h"

namespace orrery::io {
namespace {

// A fraction of a datasheet figure: (0, 1].
void fraction(Fields& f, std::string_view key, double& out) {
  const auto v = f.opt_double(key);
  if (!v) return;
  if (!(*v > 0.0 && *v <= 1.0)) {
    throw InputError(f.where_of_key(key), fmt::format("expected a fraction of the datasheet figure in (0, 1], got {}", *v));
  }
  out = *v;
}

// From 0 to `most`: far above any kernel's, and low enough that a kernel time stays inside core::Time
// (a half length of 1e308 tokens made every attention kernel take longer than 9.2e6 s).
void bounded(Fields& f, std::string_view key, double most, double& out) {
  const auto v = f.opt_double(key);
  if (!v) return;
  if (!(*v >= 0.0 && *v <= most)) throw InputError(f.where_of_key(key), fmt::format("expected 0 to {:g}, got {}", most, *v));
  out = *v;
}

void attention_rate(const YAML::Node& node, const Where& where, compute::AttentionRate& r) {
  Fields f(node, where);
  fraction(f, "efficiency", r.efficiency);
  bounded(f, "half_length", 1e6, r.half_length);          // tokens (Hopper's fits: 512-1024)
  bounded(f, "ctas_per_sm_half", 1e3, r.ctas_per_sm_half);  // CTAs per SM (fits: 0-2)
  // Dropout mask elements per second (H100: 5.8e11-1.7e12); 0: no dropout cost.
  bounded(f, "dropout_pairs_per_s", 1e16, r.dropout_pairs_per_s);
  f.finish();
}

}  // namespace

compute::Calibration parse_calibration(std::string_view text, const std::string& file, const hw::GpuSpec& gpu,
                                       compute::Calibration base) {
  const YAML::Node root = load_yaml(text, file);
  Fields f(root, Where{file, 1, ""});
  const std::string for_gpu = f.req_string("gpu");
  if (for_gpu != gpu.name) {
    throw InputError(f.where_of_key("gpu"),
                     fmt::format("the calibration is for GPU '{}', the run uses '{}'", for_gpu, gpu.name),
                     "measure the run's GPU, or run on '" + for_gpu + "'");
  }
  const std::string source = f.opt_string("source").value_or("");
  compute::Calibration c = std::move(base);
  fraction(f, "gemm_efficiency", c.gemm_efficiency);
  if (const auto v = f.opt_double("fp8_gemm_factor")) {
    if (!(*v > 0.0 && *v <= 1.0)) {
      throw InputError(f.where_of_key("fp8_gemm_factor"),
                       fmt::format("expected fp8 GEMMs' efficiency over bf16's in (0, 1], got {}", *v));
    }
    c.fp8_gemm_factor = *v;
  }
  fraction(f, "gemm_memory_efficiency", c.gemm_memory_efficiency);
  fraction(f, "memory_efficiency", c.memory_efficiency);
  bounded(f, "fp32_accumulate_exposure", 1.0, c.fp32_accumulate_exposure);
  if (const auto t = f.opt_time("launch_overhead")) {
    if (t->to_seconds() < 0.0 || t->to_seconds() > 1e-3) {
      throw InputError(f.where_of_key("launch_overhead"), fmt::format("expected 0 to 1 ms per kernel, got {} s", t->to_seconds()));
    }
    c.launch_overhead = *t;
  }
  if (const auto att = f.opt_node("attention")) {
    const Where aw = f.where_of_key("attention");
    Fields a(*att, aw);
    if (const auto fwd = a.opt_node("forward")) attention_rate(*fwd, a.where_of_key("forward"), c.attention);
    if (const auto bwd = a.opt_node("backward")) attention_rate(*bwd, a.where_of_key("backward"), c.attention_backward);
    a.finish();
  }
  f.finish();
  c.name = "file";
  c.source = source.empty() ? "calibration file " + file : fmt::format("calibration file {}: {}", file, source);
  return c;
}

compute::Calibration read_calibration_file(const std::string& path, const hw::GpuSpec& gpu, compute::Calibration base) {
  std::ifstream in(path);
  if (!in) throw InputError(Where{path, 0, ""}, "cannot open the calibration file", "check the path given to --calibration");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_calibration(text.str(), path, gpu, std::move(base));
}

}  // namespace orrery::io
