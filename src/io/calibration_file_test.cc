#include "io/calibration_file.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/catalog_loader.h"

namespace orrery::io {
namespace {

const hw::GpuSpec& h100() {
  static const Catalog c = [] {
    CatalogOptions o;
    o.use_environment = false;
    return load_catalog(o);
  }();
  return c.hw.get_gpu("h100-sxm", Where{});
}

constexpr const char* kFull = R"(gpu: h100-sxm
source: "our cluster, 2026-11-26"
gemm_efficiency: 0.7
fp8_gemm_factor: 0.9
gemm_memory_efficiency: 0.75
memory_efficiency: 0.85
fp32_accumulate_exposure: 0.5
launch_overhead: 5 us
attention:
  forward: {efficiency: 0.5, half_length: 256, ctas_per_sm_half: 1.5, dropout_pairs_per_s: 1e12}
  backward: {efficiency: 0.45, half_length: 2048, ctas_per_sm_half: 0, dropout_pairs_per_s: 0}
)";

std::string error_of(const std::string& yaml) {
  try {
    parse_calibration(yaml, "cal.yaml", h100(), compute::default_calibration(h100()));
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CalibrationFile, EveryKeyReplacesTheBuiltInConstant) {
  const compute::Calibration base = compute::default_calibration(h100());
  const compute::Calibration c = parse_calibration(kFull, "cal.yaml", h100(), base);
  EXPECT_EQ(c.gemm_efficiency, 0.7);
  EXPECT_EQ(c.fp8_gemm_factor, 0.9);
  EXPECT_EQ(c.gemm_memory_efficiency, 0.75);
  EXPECT_EQ(c.memory_efficiency, 0.85);
  EXPECT_EQ(c.fp32_accumulate_exposure, 0.5);
  EXPECT_EQ(c.launch_overhead, Time::us(5));
  EXPECT_EQ(c.attention.efficiency, 0.5);
  EXPECT_EQ(c.attention.half_length, 256.0);
  EXPECT_EQ(c.attention.ctas_per_sm_half, 1.5);
  EXPECT_EQ(c.attention_backward.efficiency, 0.45);
  EXPECT_EQ(c.attention_backward.half_length, 2048.0);
  EXPECT_EQ(c.attention_backward.ctas_per_sm_half, 0.0);
  EXPECT_EQ(c.attention.dropout_pairs_per_s, 1e12);
  EXPECT_EQ(c.attention_backward.dropout_pairs_per_s, 0.0);  // 0 is a value (no dropout cost), not "unset"
  EXPECT_EQ(c.name, "file");
  EXPECT_NE(c.source.find("cal.yaml"), std::string::npos) << c.source;
  EXPECT_NE(c.source.find("our cluster"), std::string::npos) << c.source;
  // What a file does not set stays the built-in calibration's (the SM count, tiles, latency).
  EXPECT_EQ(c.sm_count, base.sm_count);
  EXPECT_EQ(c.tiles.size(), base.tiles.size());
  EXPECT_EQ(c.memory_latency, base.memory_latency);
}

TEST(CalibrationFile, AnAbsentKeyKeepsTheBuiltInValue) {
  const compute::Calibration base = compute::default_calibration(h100());
  const compute::Calibration c =
      parse_calibration("gpu: h100-sxm\nattention:\n  forward: {efficiency: 0.4}\n", "cal.yaml", h100(), base);
  EXPECT_EQ(c.attention.efficiency, 0.4);
  EXPECT_EQ(c.attention.half_length, base.attention.half_length);
  EXPECT_EQ(c.attention_backward.efficiency, base.attention_backward.efficiency);
  EXPECT_EQ(c.gemm_efficiency, base.gemm_efficiency);
}

TEST(CalibrationFile, ErrorsNameTheFileLineAndKey) {
  struct Case {
    const char* why;
    const char* yaml;
    std::vector<const char*> expected;  // substrings of the one-line error
  };
  const Case cases[] = {
      {"a misspelt key: its line and the nearest known key", "gpu: h100-sxm\ngemm_eficiency: 0.7\n",
       {"cal.yaml:2", "gemm_efficiency"}},
      {"a fraction above 1", "gpu: h100-sxm\nmemory_efficiency: 1.2\n", {"cal.yaml:2", "(0, 1]"}},
      {"a fraction of 0", "gpu: h100-sxm\ngemm_efficiency: 0\n", {"(0, 1]"}},
      {"an fp8 factor above 1", "gpu: h100-sxm\nfp8_gemm_factor: 1.5\n",
       {"cal.yaml:2", "fp8_gemm_factor", "fp8 GEMMs' efficiency over bf16's in (0, 1], got 1.5"}},
      {"not a number", "gpu: h100-sxm\ngemm_efficiency: fast\n", {"expected a number"}},
      {"a negative length inside the attention mapping", "gpu: h100-sxm\nattention:\n  backward: {half_length: -1}\n",
       {"half_length", "expected 0 to 1e+06, got -1"}},
      // Past the bounds that keep kernel times in core::Time's range (found by tools/fuzz/input_files.py).
      {"a half length of 1e308", "gpu: h100-sxm\nattention:\n  backward: {half_length: 1e308}\n",
       {"expected 0 to 1e+06, got 1e+308"}},
      {"an occupancy of 5000 CTAs per SM", "gpu: h100-sxm\nattention:\n  forward: {ctas_per_sm_half: 5000}\n",
       {"expected 0 to 1000, got 5000"}},
      {"a launch overhead of 2 s", "gpu: h100-sxm\nlaunch_overhead: 2 s\n", {"expected 0 to 1 ms per kernel"}},
      {"a negative dropout rate", "gpu: h100-sxm\nattention:\n  forward: {dropout_pairs_per_s: -1}\n",
       {"dropout_pairs_per_s", "expected 0 to 1e+16, got -1"}},
      {"an fp32 accumulation exposure above 1", "gpu: h100-sxm\nfp32_accumulate_exposure: 1.5\n",
       {"cal.yaml:2", "fp32_accumulate_exposure", "expected 0 to 1, got 1.5"}},
      {"a misspelt pass", "gpu: h100-sxm\nattention:\n  foward: {efficiency: 0.5}\n", {"forward"}},
      {"the calibration of another GPU", "gpu: a100-sxm-80gb\n", {"a100-sxm-80gb", "h100-sxm"}},
      {"no gpu key", "gemm_efficiency: 0.7\n", {"gpu"}},
      {"malformed YAML", "gpu: [h100\n", {"malformed YAML"}},
      {"a launch overhead that is not a duration", "gpu: h100-sxm\nlaunch_overhead: 3\n", {"launch_overhead"}},
  };
  for (const Case& k : cases) {
    const std::string e = error_of(k.yaml);
    for (const char* part : k.expected) EXPECT_NE(e.find(part), std::string::npos) << k.why << ": " << e;
  }
}

TEST(CalibrationFile, AMissingFileIsAnInputError) {
  try {
    read_calibration_file("/nonexistent/cal.yaml", h100(), compute::default_calibration(h100()));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cal.yaml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orrery::io
