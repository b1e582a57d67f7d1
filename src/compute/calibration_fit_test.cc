#include "compute/calibration_fit.h"

#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace orrery::compute {
namespace {

// The H100 SXM's datasheet figures as in catalog/gpus.yaml (132 SMs come with its catalog name).
const hw::GpuSpec& test_h100() {
  static const hw::GpuSpec g = [] {
    hw::GpuSpec s;
    s.name = "h100-sxm";
    s.architecture = "hopper";
    s.origin = "test";
    s.memory_bandwidth = Bandwidth(3.35e12);
    s.peak_flops[static_cast<size_t>(hw::DType::kBf16)] = FlopRate(989.4e12);
    s.peak_flops[static_cast<size_t>(hw::DType::kFp16)] = FlopRate(989.4e12);
    return s;
  }();
  return g;
}

// Kernels timed by the model itself at known constants: every fit must find those constants again
// (they lie on its grid, where the loss is exactly 0, and nowhere else is it 0 for these shapes).
TEST(CalibrationFit, RecoversTheGemmEfficiencyThatProducedTheTimes) {
  const hw::GpuSpec& gpu = test_h100();
  Calibration truth = default_calibration(gpu);
  truth.gemm_efficiency = 0.55;
  const ComputeModel cm(gpu, truth);
  std::vector<MeasuredGemm> gemms;
  for (const auto& [m, n, k] : std::vector<std::tuple<double, int64_t, int64_t>>{
           {4096, 6144, 2048}, {4096, 2048, 8192}, {8192, 4096, 4096}, {16384, 28672, 4096}}) {
    gemms.push_back({m, n, k, cm.gemm(GemmShape{m, n, k, 1}, hw::DType::kBf16).to_ms()});
  }
  FitQuality q;
  const Calibration fit = fit_gemm_efficiency(gpu, default_calibration(gpu), gemms, hw::DType::kBf16, q);
  EXPECT_DOUBLE_EQ(fit.gemm_efficiency, 0.55);
  EXPECT_EQ(q.kernels, 4u);
  EXPECT_LT(q.worst_abs_error, 1e-9);
}

TEST(CalibrationFit, RecoversTheStreamingFractions) {
  const hw::GpuSpec& gpu = test_h100();
  Calibration truth = default_calibration(gpu);
  truth.memory_efficiency = 0.81;
  truth.gemm_memory_efficiency = 0.66;
  const ComputeModel cm(gpu, truth);
  const std::vector<MeasuredStream> streams = {{2.0 * (1 << 30), cm.memory_bound(Bytes(2LL << 30)).to_ms()},
                                               {4.0e8, cm.memory_bound(Bytes(400000000)).to_ms()}};
  std::vector<MeasuredGemm> skinny;
  for (const int64_t n : {12288, 4096, 22016}) {
    skinny.push_back({1.0, n, 4096, cm.gemm(GemmShape{1.0, n, 4096, 1}, hw::DType::kBf16).to_ms()});
  }
  FitQuality q;
  EXPECT_DOUBLE_EQ(fit_memory_efficiency(gpu, default_calibration(gpu), streams, q).memory_efficiency, 0.81);
  EXPECT_LT(q.worst_abs_error, 1e-9);
  EXPECT_DOUBLE_EQ(fit_gemm_memory_efficiency(gpu, default_calibration(gpu), skinny, hw::DType::kBf16, q).gemm_memory_efficiency,
                   0.66);
  EXPECT_LT(q.worst_abs_error, 1e-9);
}

TEST(CalibrationFit, RecoversEachAttentionPassFromAHeadsBySequenceGrid) {
  const hw::GpuSpec& gpu = test_h100();
  Calibration truth = default_calibration(gpu);
  truth.attention = AttentionRate{0.5, 512.0, 1.5};
  truth.attention_backward = AttentionRate{0.4, 1024.0, 0.5};
  const ComputeModel cm(gpu, truth);
  std::vector<MeasuredAttention> kernels;
  for (const int64_t h : {4, 16, 64}) {
    for (const int64_t s : {1024, 4096, 16384}) {
      for (const Pass p : {Pass::kForward, Pass::kBackward}) {
        const std::vector<AttentionSeq> seqs(1, AttentionSeq{s, s});
        const AttentionHeads heads{h, h, 128, 128, 0, true};
        kernels.push_back({1, h, h, s, p, cm.attention(seqs, heads, hw::DType::kBf16, p).to_ms()});
      }
    }
  }
  FitQuality q;
  const Calibration f = fit_attention(gpu, default_calibration(gpu), kernels, Pass::kForward, hw::DType::kBf16, q);
  EXPECT_DOUBLE_EQ(f.attention.efficiency, 0.5);
  EXPECT_DOUBLE_EQ(f.attention.half_length, 512.0);
  EXPECT_DOUBLE_EQ(f.attention.ctas_per_sm_half, 1.5);
  EXPECT_EQ(q.kernels, 9u);  // the forward kernels only
  // The backward fit leaves the forward alone.
  const Calibration b = fit_attention(gpu, f, kernels, Pass::kBackward, hw::DType::kBf16, q);
  EXPECT_DOUBLE_EQ(b.attention_backward.efficiency, 0.4);
  EXPECT_DOUBLE_EQ(b.attention_backward.half_length, 1024.0);
  EXPECT_DOUBLE_EQ(b.attention_backward.ctas_per_sm_half, 0.5);
  EXPECT_DOUBLE_EQ(b.attention.efficiency, 0.5);
}

// fp32 accumulation: times made by the model at exposure 0.40 (plain GEMM, and the GEMM plus the
// exposed epilogue) give 0.40 back and reproduce every fused time exactly; an exposure of 1.7 implied by
// the data is clamped to 1 (no more than the whole extra traffic shows), and fused times no slower than
// plain ones give 0.
TEST(CalibrationFit, RecoversTheFp32AccumulationExposureByLeastSquares) {
  const hw::GpuSpec& gpu = test_h100();
  Calibration truth = default_calibration(gpu);
  truth.fp32_accumulate_exposure = 0.40;
  const ComputeModel cm(gpu, truth);
  std::vector<MeasuredAccumulate> gemms;
  for (const auto& [m, n, k] : std::vector<std::tuple<double, int64_t, int64_t>>{
           {2048, 6144, 4096}, {896, 7168, 4096}, {7168, 3584, 4096}, {8192, 8192, 8192}}) {
    const GemmShape s{m, n, k, 1};
    const double plain = cm.gemm(s, hw::DType::kBf16).to_ms();
    gemms.push_back({m, n, k, plain, plain + cm.fp32_accumulate(s, hw::DType::kBf16).to_ms()});
  }
  FitQuality q;
  const Calibration fit = fit_fp32_accumulate(gpu, default_calibration(gpu), gemms, hw::DType::kBf16, q);
  EXPECT_DOUBLE_EQ(fit.fp32_accumulate_exposure, 0.40);
  EXPECT_EQ(q.kernels, 4u);
  EXPECT_LT(q.worst_abs_error, 1e-9);
  std::vector<MeasuredAccumulate> slow = gemms, none = gemms;
  for (MeasuredAccumulate& g : slow) g.fused_ms = g.plain_ms + (g.fused_ms - g.plain_ms) * 1.7 / 0.40;
  for (MeasuredAccumulate& g : none) g.fused_ms = g.plain_ms;
  EXPECT_DOUBLE_EQ(fit_fp32_accumulate(gpu, truth, slow, hw::DType::kBf16, q).fp32_accumulate_exposure, 1.0);
  EXPECT_DOUBLE_EQ(fit_fp32_accumulate(gpu, truth, none, hw::DType::kBf16, q).fp32_accumulate_exposure, 0.0);
}

// Attention dropout: extra forward times of h x s(s+1)/2 mask elements at 4.00e11 per second (16 heads
// at 4,096: 0.3356 ms) give 4.00e11 back with no error; no extra time at all gives 0 (no cost).
TEST(CalibrationFit, RecoversTheDropoutMaskRateFromTheExtraForwardTime) {
  const hw::GpuSpec& gpu = test_h100();
  std::vector<MeasuredDropout> kernels;
  for (const auto& [h, s] : std::vector<std::pair<int64_t, int64_t>>{{16, 4096}, {7, 4096}, {32, 2048}, {4, 8192}}) {
    const double extra = static_cast<double>(h) * static_cast<double>(s) * static_cast<double>(s + 1) / 2.0 / 4.0e11 * 1e3;
    kernels.push_back({h, s, 0.2, 0.2 + extra});
  }
  FitQuality q;
  const Calibration fit = fit_attention_dropout(default_calibration(gpu), kernels, q);
  EXPECT_DOUBLE_EQ(fit.attention.dropout_pairs_per_s, 4.0e11);
  EXPECT_LT(q.worst_abs_error, 1e-9);
  EXPECT_EQ(fit.attention_backward.dropout_pairs_per_s, default_calibration(gpu).attention_backward.dropout_pairs_per_s);
  for (MeasuredDropout& k : kernels) k.dropped_ms = k.plain_ms;
  EXPECT_EQ(fit_attention_dropout(default_calibration(gpu), kernels, q).attention.dropout_pairs_per_s, 0.0);
}

// Fitting the attention rates keeps the dropout rate (fit apart, by fit_attention_dropout).
TEST(CalibrationFit, TheAttentionRateFitKeepsTheDropoutRate) {
  const hw::GpuSpec& gpu = test_h100();
  Calibration base = default_calibration(gpu);
  base.attention.dropout_pairs_per_s = 3.0e11;
  const ComputeModel cm(gpu, base);
  std::vector<MeasuredAttention> kernels;
  for (const int64_t h : {8, 16, 32}) {
    const std::vector<AttentionSeq> seqs(1, AttentionSeq{4096, 4096});
    const AttentionHeads heads{h, h, 128, 128, 0, true};
    kernels.push_back({1, h, h, 4096, Pass::kForward, cm.attention(seqs, heads, hw::DType::kBf16, Pass::kForward).to_ms()});
  }
  FitQuality q;
  EXPECT_EQ(fit_attention(gpu, base, kernels, Pass::kForward, hw::DType::kBf16, q).attention.dropout_pairs_per_s, 3.0e11);
}

}  // namespace
}  // namespace orrery::compute
