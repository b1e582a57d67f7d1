// Compute model: first roofline implementation (calibration refined in later work; see
// docs/compute.md once written).
#include "compute/compute_model.h"

#include <algorithm>

#include "core/error.h"

namespace orrery::compute {

Calibration default_calibration(const hw::GpuSpec& gpu) {
  Calibration c;
  c.name = gpu.architecture;
  c.source = "placeholder roofline (uncalibrated)";
  return c;
}

ComputeModel::ComputeModel(const hw::GpuSpec& gpu) : ComputeModel(gpu, default_calibration(gpu)) {}

ComputeModel::ComputeModel(const hw::GpuSpec& gpu, Calibration calibration)
    : gpu_(&gpu), calibration_(std::move(calibration)) {}

namespace {
FlopRate peak_or_throw(const hw::GpuSpec& gpu, hw::DType dtype) {
  auto p = gpu.peak(dtype);
  if (!p) {
    throw InputError(Where{gpu.origin, 0, gpu.name},
                     "GPU '" + gpu.name + "' has no dense " + std::string(hw::dtype_name(dtype)) + " peak",
                     "choose a precision the GPU supports");
  }
  return *p;
}
}  // namespace

Time ComputeModel::gemm(const GemmShape& s, hw::DType dtype) const {
  const double flops = 2.0 * s.m * static_cast<double>(s.n) * static_cast<double>(s.k) * static_cast<double>(s.count);
  const double bytes = static_cast<double>(hw::dtype_bytes(dtype)) * static_cast<double>(s.count) *
                       (s.m * static_cast<double>(s.k) + static_cast<double>(s.k) * static_cast<double>(s.n) +
                        s.m * static_cast<double>(s.n));
  const double t_c = flops / (peak_or_throw(*gpu_, dtype).per_second() * calibration_.gemm_efficiency);
  const double t_m = bytes / (gpu_->memory_bandwidth.bytes_per_second() * calibration_.memory_efficiency);
  return Time::seconds(std::max(t_c, t_m)) + calibration_.launch_overhead;
}

Time ComputeModel::attention(std::span<const AttentionSeq> seqs, const AttentionHeads& h, hw::DType dtype,
                             Pass pass) const {
  double flops = 0.0;
  double bytes = 0.0;
  const double eb = hw::dtype_bytes(dtype);
  for (const auto& s : seqs) {
    const double pairs = h.causal ? static_cast<double>(s.q) * static_cast<double>(s.kv - s.q) +
                                        static_cast<double>(s.q) * static_cast<double>(s.q + 1) / 2.0
                                  : static_cast<double>(s.q) * static_cast<double>(s.kv);
    flops += 2.0 * static_cast<double>(h.heads) * pairs * static_cast<double>(h.head_dim_qk + h.head_dim_v);
    bytes += eb * (static_cast<double>(s.q) * static_cast<double>(h.heads) * static_cast<double>(h.head_dim_qk + h.head_dim_v) +
                   static_cast<double>(s.kv) * static_cast<double>(h.kv_heads) * static_cast<double>(h.head_dim_qk + h.head_dim_v));
  }
  if (pass == Pass::kBackward) {
    flops *= 2.5;
    bytes *= 2.0;
  }
  const double t_c = flops / (peak_or_throw(*gpu_, dtype).per_second() * calibration_.attention_efficiency);
  const double t_m = bytes / (gpu_->memory_bandwidth.bytes_per_second() * calibration_.memory_efficiency);
  return Time::seconds(std::max(t_c, t_m)) + calibration_.launch_overhead;
}

Time ComputeModel::memory_bound(Bytes bytes) const {
  return Time::seconds(bytes.to_double() / (gpu_->memory_bandwidth.bytes_per_second() * calibration_.memory_efficiency)) +
         calibration_.launch_overhead;
}

Time ComputeModel::op(const model::Op& op, const model::Shape& shape, const model::ModelSpec& spec, hw::DType dtype,
                      Pass pass) const {
  (void)shape;
  (void)spec;
  switch (op.kind) {
    case model::OpKind::kGemm:
    case model::OpKind::kRouter: {
      GemmShape g{op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.count};
      if (g.count == 0) break;
      Time t = gemm(g, dtype);
      return pass == Pass::kForward ? t : t * 2;
    }
    default:
      break;
  }
  const Flops f = pass == Pass::kForward ? op.fwd_flops : op.bwd_flops;
  const double t_c = f.count() / (peak_or_throw(*gpu_, dtype).per_second() * calibration_.attention_efficiency);
  Bytes b = op.fwd_bytes_read + op.fwd_bytes_written;
  if (pass == Pass::kBackward) b = b + b;
  const double t_m = b.to_double() / (gpu_->memory_bandwidth.bytes_per_second() * calibration_.memory_efficiency);
  return Time::seconds(std::max(t_c, t_m)) + calibration_.launch_overhead;
}

}  // namespace orrery::compute
