#include "compute/calibration_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace orrery::compute {
namespace {

FitQuality quality_of(const std::vector<double>& predicted_ms, const std::vector<double>& measured_ms) {
  std::vector<double> e;
  e.reserve(predicted_ms.size());
  for (size_t i = 0; i < predicted_ms.size(); ++i) e.push_back(std::fabs(predicted_ms[i] / measured_ms[i] - 1.0));
  FitQuality q;
  q.kernels = e.size();
  if (e.empty()) return q;
  std::sort(e.begin(), e.end());
  q.median_abs_error = e.size() % 2 == 1 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
  q.worst_abs_error = e.back();
  return q;
}

double loss(const FitQuality& q) { return q.median_abs_error + 0.1 * q.worst_abs_error; }

// Tries every calibration `candidates` yields and keeps the one of least loss (the first on ties, so
// the grids' order decides between equals).
Calibration search(const std::vector<Calibration>& candidates, const std::vector<double>& measured,
                   const std::function<std::vector<double>(const Calibration&)>& predict, FitQuality& quality) {
  ORRERY_ASSERT(!candidates.empty() && !measured.empty());
  size_t best = 0;
  FitQuality best_q;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const FitQuality q = quality_of(predict(candidates[i]), measured);
    if (i == 0 || loss(q) < loss(best_q)) {
      best = i;
      best_q = q;
    }
  }
  quality = best_q;
  return candidates[best];
}

std::vector<double> fraction_grid() {
  std::vector<double> g;
  for (int i = 30; i <= 100; ++i) g.push_back(i / 100.0);
  return g;
}

template <typename T>
std::vector<double> measured_of(std::span<const T> kernels) {
  std::vector<double> v;
  for (const T& k : kernels) {
    ORRERY_ASSERT(k.ms > 0.0);
    v.push_back(k.ms);
  }
  return v;
}

Calibration fit_gemm(const hw::GpuSpec& gpu, const Calibration& base, std::span<const MeasuredGemm> gemms, hw::DType dtype,
                     double Calibration::*field, FitQuality& quality) {
  std::vector<Calibration> candidates;
  for (const double e : fraction_grid()) {
    Calibration c = base;
    c.*field = e;
    candidates.push_back(c);
  }
  return search(candidates, measured_of(gemms),
                [&](const Calibration& c) {
                  const ComputeModel cm(gpu, c);
                  std::vector<double> p;
                  for (const MeasuredGemm& g : gemms) p.push_back(cm.gemm(GemmShape{g.m, g.n, g.k, 1}, dtype).to_ms());
                  return p;
                },
                quality);
}

}  // namespace

Calibration fit_gemm_efficiency(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredGemm> gemms,
                                hw::DType dtype, FitQuality& quality) {
  return fit_gemm(gpu, base, gemms, dtype, &Calibration::gemm_efficiency, quality);
}

Calibration fit_gemm_memory_efficiency(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredGemm> gemms,
                                       hw::DType dtype, FitQuality& quality) {
  return fit_gemm(gpu, base, gemms, dtype, &Calibration::gemm_memory_efficiency, quality);
}

Calibration fit_memory_efficiency(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredStream> kernels,
                                  FitQuality& quality) {
  std::vector<Calibration> candidates;
  for (const double e : fraction_grid()) {
    Calibration c = base;
    c.memory_efficiency = e;
    candidates.push_back(c);
  }
  return search(candidates, measured_of(kernels),
                [&](const Calibration& c) {
                  const ComputeModel cm(gpu, c);
                  std::vector<double> p;
                  for (const MeasuredStream& s : kernels) p.push_back(cm.memory_bound(Bytes::from_double(s.bytes)).to_ms());
                  return p;
                },
                quality);
}

Calibration fit_attention(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredAttention> kernels,
                          Pass pass, hw::DType dtype, FitQuality& quality) {
  std::vector<MeasuredAttention> of_pass;
  for (const MeasuredAttention& k : kernels) {
    if (k.pass == pass) of_pass.push_back(k);
  }
  std::vector<Calibration> candidates;
  for (const double c0 : {0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0}) {
    for (const double half : {0.0, 256.0, 512.0, 1024.0}) {
      for (int e = 20; e < 100; e += 2) {
        Calibration c = base;
        AttentionRate& r = pass == Pass::kForward ? c.attention : c.attention_backward;
        r = AttentionRate{e / 100.0, half, c0, r.dropout_pairs_per_s};  // the dropout rate is fit apart
        candidates.push_back(c);
      }
    }
  }
  return search(candidates, measured_of(std::span<const MeasuredAttention>(of_pass)),
                [&](const Calibration& c) {
                  const ComputeModel cm(gpu, c);
                  std::vector<double> p;
                  for (const MeasuredAttention& k : of_pass) {
                    const std::vector<AttentionSeq> seqs(static_cast<size_t>(k.batch), AttentionSeq{k.seq, k.seq});
                    const AttentionHeads heads{k.heads, k.kv_heads, 128, 128, 0, true};
                    p.push_back(cm.attention(seqs, heads, dtype, pass).to_ms());
                  }
                  return p;
                },
                quality);
}

Calibration fit_fp32_accumulate(const hw::GpuSpec& gpu, Calibration base, std::span<const MeasuredAccumulate> gemms,
                                hw::DType dtype, FitQuality& quality) {
  ORRERY_ASSERT(!gemms.empty());
  // The extra time is exposure x x with x the extra traffic at the datasheet bandwidth
  // (ComputeModel::fp32_accumulate at exposure 1): least squares through the origin, sum xy / sum x^2.
  Calibration unit = base;
  unit.fp32_accumulate_exposure = 1.0;
  const ComputeModel at_one(gpu, unit);
  double sxy = 0.0, sxx = 0.0;
  for (const MeasuredAccumulate& g : gemms) {
    ORRERY_ASSERT(g.plain_ms > 0.0 && g.fused_ms > 0.0);
    const double x = at_one.fp32_accumulate(GemmShape{g.m, g.n, g.k, 1}, dtype).to_ms();
    sxy += x * (g.fused_ms - g.plain_ms);
    sxx += x * x;
  }
  base.fp32_accumulate_exposure = sxx > 0.0 ? std::clamp(std::round(100.0 * sxy / sxx) / 100.0, 0.0, 1.0) : 0.0;
  const ComputeModel cm(gpu, base);
  std::vector<double> predicted, measured;
  for (const MeasuredAccumulate& g : gemms) {
    const GemmShape s{g.m, g.n, g.k, 1};
    predicted.push_back((cm.gemm(s, dtype) + cm.fp32_accumulate(s, dtype)).to_ms());
    measured.push_back(g.fused_ms);
  }
  quality = quality_of(predicted, measured);
  return base;
}

Calibration fit_attention_dropout(Calibration base, std::span<const MeasuredDropout> kernels, FitQuality& quality) {
  ORRERY_ASSERT(!kernels.empty());
  // Pooled: every mask element drawn over the summed extra time, to three significant figures.
  double elements = 0.0, seconds = 0.0;
  for (const MeasuredDropout& k : kernels) {
    ORRERY_ASSERT(k.heads >= 1 && k.seq >= 1 && k.plain_ms > 0.0 && k.dropped_ms > 0.0);
    elements += static_cast<double>(k.heads) * static_cast<double>(k.seq) * static_cast<double>(k.seq + 1) / 2.0;
    seconds += (k.dropped_ms - k.plain_ms) * 1e-3;
  }
  if (!(seconds > 0.0)) {
    quality = FitQuality{kernels.size(), 1.0, 1.0};
    base.attention.dropout_pairs_per_s = 0.0;  // no measurable cost
    return base;
  }
  const double rate = elements / seconds;
  const double scale = std::pow(10.0, std::floor(std::log10(rate)) - 2.0);
  base.attention.dropout_pairs_per_s = std::round(rate / scale) * scale;
  std::vector<double> predicted, measured;
  for (const MeasuredDropout& k : kernels) {
    const double pairs = static_cast<double>(k.heads) * static_cast<double>(k.seq) * static_cast<double>(k.seq + 1) / 2.0;
    predicted.push_back(pairs / base.attention.dropout_pairs_per_s * 1e3);
    measured.push_back(std::max(1e-9, k.dropped_ms - k.plain_ms));
  }
  quality = quality_of(predicted, measured);
  return base;
}

}  // namespace orrery::compute
