// Fitting the compute model's constants to kernels measured on a GPU (the `orrery calibrate` command,
// docs/compute.md "Calibration files"). Each fit searches a grid of round values for the constant(s)
// that minimize median |error| + 0.1 x worst |error| of the model's times against the measured ones,
// so that one bad kernel does not decide a constant and no kernel is left far off. The built-in Hopper
// attention rates are this search's result on the grid of data/measured/h100-sxm/attention_sweep.csv
// (test H100Kernels.BuiltInHopperAttentionIsTheFitOnTheGrid).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compute/compute_model.h"
#include "hw/hw_catalog.h"

namespace orrery::compute {

struct MeasuredGemm {
  double m = 0.0;
  int64_t n = 0;
  int64_t k = 0;
  double ms = 0.0;
};

struct MeasuredStream {  // a streaming kernel (copy, residual add): the fewest bytes it moves
  double bytes = 0.0;
  double ms = 0.0;
};

struct MeasuredAttention {  // causal, head dim 128, every sequence `seq` tokens
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t seq = 1;
  Pass pass = Pass::kForward;
  double ms = 0.0;
};

struct MeasuredAccumulate {  // a weight-gradient GEMM m x n over k, plain and adding into an fp32 C
  double m = 0.0;
  int64_t n = 0;
  int64_t k = 0;
  double plain_ms = 0.0;
  double fused_ms = 0.0;
};

struct MeasuredDropout {  // one causal fused-attention forward (head dim 128) at dropout 0 and at p > 0
  int64_t heads = 1;
  int64_t seq = 1;
  double plain_ms = 0.0;
  double dropped_ms = 0.0;
};

// How well a fitted constant reproduces the kernels it was fit on.
struct FitQuality {
  size_t kernels = 0;
  double median_abs_error = 0.0;  // fractions
  double worst_abs_error = 0.0;
};

// Each fit returns `base` with its constant(s) set to the best grid value and, in `quality`, the fit's
// errors. REQUIRES: the spans are not empty; every measured time > 0.
// gemm_efficiency over 0.30, 0.31, ..., 1.00 (compute-bound GEMMs: give shapes of 256 rows and more).
Calibration fit_gemm_efficiency(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredGemm> gemms,
                                hw::DType dtype, FitQuality& quality);
// gemm_memory_efficiency over the same grid (weight-streaming GEMMs: give shapes of a few rows).
Calibration fit_gemm_memory_efficiency(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredGemm> gemms,
                                       hw::DType dtype, FitQuality& quality);
// memory_efficiency over the same grid.
Calibration fit_memory_efficiency(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredStream> kernels,
                                  FitQuality& quality);
// The attention rate of one pass: efficiency 0.20, 0.22, ..., 0.98; CTAs per SM at half occupancy
// {0, 0.25, 0.5, 1, 1.5, 2, 3}; half length {0, 256, 512, 1024}. Only the kernels of `pass` are used.
Calibration fit_attention(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredAttention> kernels,
                          Pass pass, hw::DType dtype, FitQuality& quality);

// fp32_accumulate_exposure: the least-squares fraction (rounded to 0.01, within [0, 1]) of the extra
// fp32 traffic's time at the datasheet bandwidth that explains fused - plain; `quality` compares the
// whole fused GEMM (ComputeModel::gemm + fp32_accumulate) with its measured time.
Calibration fit_fp32_accumulate(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredAccumulate> gemms,
                                hw::DType dtype, FitQuality& quality);
// attention.dropout_pairs_per_s (the forward): the pooled rate, mask elements (heads x seq (seq + 1) / 2
// per kernel) over the summed extra time, to three significant figures (0 when dropout cost nothing);
// `quality` compares each kernel's extra time with pairs / rate.
Calibration fit_attention_dropout(Calibration base, std::span<const MeasuredDropout> kernels, FitQuality& quality);

}  // namespace orrery::compute
