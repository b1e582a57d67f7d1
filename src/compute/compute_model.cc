// Compute model: calibrated kernel times (the model card and equations are in compute_model.h; the
// derivation of every constant and the validation against measured profiles are in docs/compute.md).
//
// Calibration constants and where they come from
//   SM counts: NVIDIA architecture whitepapers (A100 108 SMs, GA100 whitepaper 2020; A40 84 SMs =
//     10,752 CUDA cores / 128 per SM, A40 datasheet and GA102 whitepaper; H100 SXM5 132 and H100 PCIe
//     114, Hopper whitepaper 2022; H200 132, same GH100 configuration as H100 SXM; L40S 142 = 18,176
//     CUDA cores / 128, L40S datasheet; B200 and GB200 148 per GPU, reported in the Blackwell
//     technical brief summaries (unconfirmed by a whitepaper); MI300X 304 compute units, AMD CDNA3
//     whitepaper 2023; H800 and H100 SXM 96GB 132: their datasheet dense bf16 rate, 989.4 TFLOP/s, is the
//     H100 SXM's, 132 SMs x 4,096 FLOP/clk x 1.83 GHz). They are per product, so they are keyed by
//     catalog GPU name.
//   Resident threads per SM: CUDA C++ Programming Guide, table "Technical Specifications per Compute
//     Capability": 2048 for 8.0 (A100), 9.0 (Hopper) and 10.0 (Blackwell); 1536 for 8.6 (A40) and
//     8.9 (L40S). MI300X: 2048 per CU assumed (32 wave64 slots).
//   Ampere efficiencies (gemm_efficiency 0.72, gemm_memory_efficiency 0.78, memory_efficiency 0.90,
//     memory_latency 434 ns) are read off the A100 rows of vidur's measured profiles
//     (shared/data/profiles/vidur/compute/a100; fp16 cuBLAS under vLLM): the largest GEMMs
//     (Llama-2-7B, 4,096 tokens, TP1) run at 69-74% of the 312 TFLOP/s dense peak; single-token
//     (weight-streaming) GEMMs at 1.50-1.55 TB/s = 0.74-0.76 of 2,039 GB/s (0.78 keeps the smaller
//     TP-sharded ones, which carry more launch overhead, on the measured side); the torch residual
//     add at 1.78-1.87 TB/s = 0.88-0.92; vLLM's unvectorized SiLU-and-mul at 1.02 TB/s, which Little's
//     law (108 SMs x 2048 threads x 2 B in flight / latency) gives with a 434 ns DRAM latency. The A40
//     (GA102, GDDR6) uses the same constants and is the held-out check (docs/compute.md).
//   Published context: FlashAttention-2 reaches 50-73% of A100 peak in its forward pass (Dao 2023,
//     arXiv:2307.08691), hence attention efficiency 0.73 at long sequences; short sequences are
//     slower (its benchmarks roughly halve from 16k to 512 tokens), modelled by L/(L + 512).
//     Hopper attention: fit to kernels measured on an H100 (kKernelEfficiencies below).
//   Hopper GEMM 0.67, transferred from the A100 rather than assumed: best-shape bf16 matmuls measured
//     by mamf-finder (S. Bekman, ml-engineering, compute/accelerator; the table is reproduced in
//     mag-/gpu_benchmark README) reach 267.9 TFLOP/s on A100 SXM (0.859 of 312) and 792.1 on H100
//     SXM (0.801 of 989.4); model-shaped GEMMs run at 0.72 of peak on the A100 (above), i.e. 0.84 of
//     the best shape, and the same share of the H100's best shape is 0.72 x 0.801 / 0.859 = 0.671.
//   Power limit: a GPU capped below its TDP (GpuSpec::power_limit) runs its tensor cores at
//     (limit / tdp)^0.575 of the rate its constants assume. The exponent comes from two published
//     measurements of the same GH100 die: mamf-finder's H100 PCIe, 499.5 TFLOP/s on 114 SMs at 350 W,
//     is 0.730 of the H100 SXM's 792.1 on 132 SMs at 700 W per SM, at 0.579 of its power per SM:
//     ln 0.730 / ln 0.579 = 0.575. A 500 W cap on a 700 W H100 gives 0.824. Memory-bound kernels are
//     not scaled (HBM runs on its own clock).
//   L2 operand feed: a CTA streams (tm + tn) * k operand elements through L2; the GA100 whitepaper's
//     5,120 B/clk of L2 read bandwidth over 108 SMs x 2,048 FLOP/clk is 0.0231 B per dense FLOP,
//     assumed for every architecture; it makes small tiles (64x64) lose to large ones on big GEMMs.
//   Tiles: CUTLASS's default tensor-core threadblock shapes (NVIDIA/cutlass media/docs/efficient_gemm.md
//     and the sm80/sm90 profiler kernel lists): 256x128, 128x256, 128x128, 128x64, 64x128, 64x64.
//   Transition sharpness p = 5: the smooth max of compute and memory time; at the ridge point it adds
//     15% (2^(1/5)), which is what the A100 QKV projection shows at 128 tokens (measured 74.5 us vs
//     the 65-67 us of either bound alone).
//   Launch overhead 3 us: the smallest kernels in the profiles (residual add of 1 token, norms)
//     take 1-5 us of GPU time.
#include "compute/compute_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "core/strings.h"
#include "model/op_inventory.h"

namespace orrery::compute {

namespace {

// Per-product SM counts and resident threads per SM (sources in the file header).
struct SmSpec {
  std::string_view gpu;
  int64_t sms;
  int64_t threads;
};
constexpr std::array kSmSpecs = {
    SmSpec{"a100-sxm-40gb", 108, 2048}, SmSpec{"a100-sxm-80gb", 108, 2048}, SmSpec{"a40", 84, 1536},
    SmSpec{"h100-sxm", 132, 2048},      SmSpec{"h100-pcie", 114, 2048},     SmSpec{"h200", 132, 2048},
    SmSpec{"b200", 148, 2048},          SmSpec{"gb200", 148, 2048},         SmSpec{"l40s", 142, 1536},
    SmSpec{"mi300x", 304, 2048},        SmSpec{"h800", 132, 2048},          SmSpec{"h100-sxm-96gb", 132, 2048},
};

// GA100 whitepaper: L2 read bandwidth 5,120 B/clk, against 108 SMs x 2,048 dense fp16 FLOP/clk each
// (312 TFLOP/s at 1.41 GHz). Assumed the same balance on every architecture (not published elsewhere).
constexpr double kL2BytesPerFlop = 5120.0 / (108.0 * 2048.0);
// Tensor-core throughput vs power per SM (file header): ln(499.5/114 / (792.1/132)) / ln(350/114 / (700/132)).
constexpr double kPowerLimitExponent = 0.575;

std::vector<GemmTile> cutlass_tiles() {
  return {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};
}

double d(int64_t v) { return static_cast<double>(v); }

// Smooth maximum (a^p + b^p)^(1/p): equals the larger bound far from the ridge, 2^(1/p) x it on it.
double smooth_max(double a, double b, double p) {
  const double hi = std::max(a, b);
  const double lo = std::min(a, b);
  if (hi <= 0.0) return 0.0;
  return hi * std::pow(1.0 + std::pow(lo / hi, p), 1.0 / p);
}

FlopRate peak_or_throw(const hw::GpuSpec& gpu, hw::DType dtype) {
  auto p = gpu.peak(dtype);
  if (!p) {
    std::vector<std::string> have;
    for (hw::DType t : hw::kAllDTypes) {
      if (gpu.peak(t)) have.emplace_back(hw::dtype_name(t));
    }
    std::string hint = "choose one of:";
    for (const auto& h : have) hint += " " + h;
    throw InputError(Where{gpu.origin, 0, gpu.name + ".flops"},
                     "GPU '" + gpu.name + "' has no dense " + std::string(hw::dtype_name(dtype)) + " peak", hint);
  }
  return *p;
}

}  // namespace

Time LayerOpTimes::get(std::string_view name) const {
  for (const Entry& e : ops) {
    if (e.name == name) return e.time;
  }
  return Time::zero();
}

Time LayerOpTimes::linear_total() const {
  Time t;
  for (const Entry& e : ops) {
    if (e.name != "emb") t += e.time;
  }
  return t;
}

// Fused-attention rates (e, half length, CTAs per SM at half occupancy) per library; where they come
// from is written above kKernelEfficiencies below.
// The last number is the dropout mask's rate (AttentionRate::dropout_pairs_per_s), attended pairs x heads
// per second, measured on an H100 SXM at its power-limited clock (data/measured/h100-sxm/megatron_extras.csv:
// causal attention of rows E1-E4, 16, 16, 12 and 7 heads of 128 at 4,096 tokens, SDPA at dropout 0 and 0.1,
// one call per timing; test H100Kernels.BuiltInAttentionDropoutRatesAreTheMeasuredOnes):
//   forward: the pooled forward delta (heads x 4,096 x 4,097 / 2 pairs over the summed extra time):
//     cuDNN 5.82e11 (11.8-18.2 us per head), FlashAttention-2 1.68e12 (4.1-6.1 us per head);
//   backward: SDPA's single-call forward + backward also holds the host's launch gap before the backward
//     (150-280 us, data/measured/h100-sxm/README.md), so the backward is read where the forward with
//     dropout outlasts that gap: cuDNN, E1 and E2 (forward 0.42 ms), forward + backward less forward at
//     dropout 0.1 against the back-to-back backward at dropout 0 of training_kernels_hot.csv, 0.154 and
//     0.053 ms for 16 heads: 1.30e12; FlashAttention-2 (whose forward stays under the gap) the pooled
//     forward + backward delta less the forward delta: 1.46e12, the least certain of the four.
// Ampere's FlashAttention-2 and FlashAttention-3 (which has no dropout) have none measured: 0.
constexpr AttentionRate kFa2Ampere{0.73, 512.0, 0.0, 0.0};
constexpr AttentionRate kCudnnHopperFwd{0.62, 1024.0, 0.5, 5.82e11};
constexpr AttentionRate kCudnnHopperBwd{0.54, 1024.0, 1.0, 1.30e12};
constexpr AttentionRate kFa2HopperFwd{0.36, 1024.0, 2.0, 1.68e12};
constexpr AttentionRate kFa2HopperBwd{0.32, 1024.0, 0.5, 1.46e12};
constexpr AttentionRate kFa3Hopper{0.64, 512.0, 0.0, 0.0};
// fp32 accumulation inside a GEMM (Calibration::fp32_accumulate_exposure): the least-squares fraction of
// 6 B per output element at the datasheet 3.35 TB/s that the measured weight-gradient GEMMs of rows E1-E4
// (16 shapes, 2-8 k x 2-8 k outputs over 4,096 tokens) take beyond the same GEMM in bf16, when cuBLAS adds
// the product into an fp32 C (torch.addmm(out_dtype=float32, out=C), Megatron's gradient-accumulation
// fusion): 0.65, residuals rms 12 us of 1-53 us (data/measured/h100-sxm/megatron_extras.csv, test
// H100Kernels.BuiltInFp32AccumulateExposureIsTheFitOnTheWgradGemms). Other architectures take it (not
// measured there).
constexpr double kFp32AccumulateExposure = 0.65;

// Per-architecture efficiencies (sources in the file header and docs/compute.md). `attention` is the
// forward efficiency of the architecture's default library; where kKernelEfficiencies has that library,
// its rates (both passes) are used and this is the same number.
struct ArchConstants {
  std::string_view arch;
  double gemm;
  double fp8_gemm;  // Calibration::fp8_gemm_factor (file header)
  double gemm_memory;
  double memory;
  double attention;
  int64_t launch_us;
  std::string_view source;
};
// fp8 over bf16 GEMM efficiency, from mamf-finder's best-shape matmuls measured in the same run
// (S. Bekman, ml-engineering compute/accelerator README, "Maximum Achievable Matmul FLOPS comparison
// table", torch 2.7.0+cu126 on H100 SXM, 2.7.1+cu128 on B200): H100 SXM float8_e4m3fn 1402.6 of
// 1979 TFLOP/s (0.7087) against bf16 794.5 of 989 (0.8033): 0.882; B200 SXM 3432.5 of 4500 (0.7628)
// against 1745.0 of 2250 (0.7756): 0.984.
constexpr double kHopperFp8GemmFactor = (1402.6 / 1979.0) / (794.5 / 989.0);
constexpr double kBlackwellFp8GemmFactor = (3432.5 / 4500.0) / (1745.0 / 2250.0);
// Blackwell GEMMs, transferred from the A100 as Hopper's are (file header), with the same table's A100
// SXM row (271.2 of 312 TFLOP/s, torch 2.6.0+cu126) as the reference: B200 SXM 1745.0 of 2250 gives
// 0.72 x 0.7756 / 0.8692 = 0.642; GB200 (product override below) 1822.0 of 2500, fp8 3615.6 of 5000
// (torch 2.10 nightly, cu130): 0.72 x 0.7288 / 0.8692 = 0.604 and fp8 0.7231 / 0.7288 = 0.992.
constexpr double kA100Mamf = 271.2 / 312.0;
constexpr double kBlackwellGemm = 0.72 * (1745.0 / 2250.0) / kA100Mamf;
struct ProductGemm {
  std::string_view gpu;
  double gemm;
  double fp8_gemm;
};
constexpr std::array kProductGemms = {
    ProductGemm{"gb200", 0.72 * (1822.0 / 2500.0) / kA100Mamf, (3615.6 / 5000.0) / (1822.0 / 2500.0)},
};
constexpr std::array kArchConstants = {
    ArchConstants{"ampere", 0.72, 1.0, 0.78, 0.90, kFa2Ampere.efficiency, 3,
                  "fit to vidur's A100 profiles (GEMM and bandwidth efficiencies), A40 held out; FlashAttention-2 "
                  "(Dao 2023) for attention; SMs from NVIDIA whitepapers (docs/compute.md)"},
    ArchConstants{"ada-lovelace", 0.72, 1.0, 0.78, 0.90, kFa2Ampere.efficiency, 3,
                  "the Ampere constants (vidur A100 fit), not validated on Ada (docs/compute.md)"},
    ArchConstants{"hopper", 0.67, kHopperFp8GemmFactor, 0.78, 0.90, kCudnnHopperFwd.efficiency, 3,
                  "GEMM: the A100 model-shaped fraction (vidur) scaled by measured best-shape matmul rates, H100 "
                  "SXM 792.1 vs A100 SXM 267.9 TFLOP/s (mamf-finder); bandwidth fractions as measured on Ampere; "
                  "fused attention (cuDNN) fit to kernels measured on an H100 (data/measured/h100-sxm, docs/compute.md)"},
    ArchConstants{"blackwell", kBlackwellGemm, kBlackwellFp8GemmFactor, 0.78, 0.90, kCudnnHopperFwd.efficiency, 3,
                  "GEMM: the A100 model-shaped fraction scaled by measured best-shape matmul rates, B200 SXM "
                  "1745.0 of 2250 vs A100 SXM 271.2 of 312 TFLOP/s (mamf-finder; GB200 its own 1822.0 of 2500); "
                  "the other constants Hopper's; checked against NeMo steps on GB200 (docs/training.md)"},
    ArchConstants{"cdna3", 0.55, 1.0, 0.70, 0.80, 0.40, 4,
                  "rough CDNA3 figures (not validated): hipBLASLt bf16 GEMMs reach about half of MI300X's dense "
                  "peak"},
};

namespace {

// Fused-attention rates per architecture and library, forward and backward (AttentionRate: e, half
// length, CTAs per SM at half occupancy).
// Ampere and Ada, FlashAttention-2: 0.73 at long sequences (Dao 2023, the calibration's own), the
//   L/(L + 512) shape, no occupancy term; backward as the forward (not measured).
// Hopper, cuDNN and FlashAttention-2: fit by compute::fit_attention (`orrery calibrate`'s search; test
//   H100Kernels.BuiltInHopperAttentionIsTheFitOnTheGrid) to causal kernels
//   measured on an H100 SXM (data/measured/h100-sxm/attention_sweep.csv: batch 1, head dim 128, heads
//   4-64 x sequence 512-16,384, 10 back-to-back calls per timing at the power-limited clock), on the
//   kernels of 0.3 ms and more (below that PyTorch's SDPA host path, whose floor in the data is 23 us
//   forward and 150-280 us backward, can set the pace); the training rows' shapes in the same file
//   (7-18 heads at 4k, 2 x 32 heads over 8 kv heads at 8k) are held out: median |error| cuDNN 5.7%
//   forward, 1.5% backward; FlashAttention-2 7.3%, 10.0%. At the published long-sequence benchmark's
//   shape (Shah et al. 2024, arXiv:2407.08608, Fig. 5, H100 SXM5, 16 heads at 16k keys: cuDNN 539
//   TFLOP/s, FA2 335) these constants give 1.04 and 0.89 of the published rates (docs/compute.md).
// Hopper FlashAttention-3: 0.64 (616 TFLOP/s at 16k, same figure), the L/(L + 512) shape; not measured.
// Blackwell takes the Hopper figures (not validated).
struct KernelEfficiency {
  std::string_view arch;
  AttentionKernel kernel;
  AttentionRate forward;
  AttentionRate backward;
};
constexpr std::array kKernelEfficiencies = {
    KernelEfficiency{"ampere", AttentionKernel::kFlashAttention2, kFa2Ampere, kFa2Ampere},
    KernelEfficiency{"ada-lovelace", AttentionKernel::kFlashAttention2, kFa2Ampere, kFa2Ampere},
    KernelEfficiency{"hopper", AttentionKernel::kFlashAttention2, kFa2HopperFwd, kFa2HopperBwd},
    KernelEfficiency{"hopper", AttentionKernel::kCudnn, kCudnnHopperFwd, kCudnnHopperBwd},
    KernelEfficiency{"hopper", AttentionKernel::kFlashAttention3, kFa3Hopper, kFa3Hopper},
    KernelEfficiency{"blackwell", AttentionKernel::kFlashAttention2, kFa2HopperFwd, kFa2HopperBwd},
    KernelEfficiency{"blackwell", AttentionKernel::kCudnn, kCudnnHopperFwd, kCudnnHopperBwd},
    KernelEfficiency{"blackwell", AttentionKernel::kFlashAttention3, kFa3Hopper, kFa3Hopper},
};
// The library each architecture's default calibration stands for: cuDNN on Hopper and Blackwell (what
// Transformer Engine, so Megatron-Core, runs), FlashAttention-2 elsewhere.
AttentionKernel default_attention_kernel(std::string_view arch) {
  return arch == "hopper" || arch == "blackwell" ? AttentionKernel::kCudnn : AttentionKernel::kFlashAttention2;
}
constexpr std::array kKernelNames = {std::pair<std::string_view, AttentionKernel>{"default", AttentionKernel::kDefault},
                                     std::pair<std::string_view, AttentionKernel>{"fa2", AttentionKernel::kFlashAttention2},
                                     std::pair<std::string_view, AttentionKernel>{"cudnn", AttentionKernel::kCudnn},
                                     std::pair<std::string_view, AttentionKernel>{"fa3", AttentionKernel::kFlashAttention3}};

}  // namespace

std::string_view attention_kernel_name(AttentionKernel k) {
  for (const auto& [name, kernel] : kKernelNames) {
    if (kernel == k) return name;
  }
  return "?";
}

AttentionKernel parse_attention_kernel(std::string_view name, const Where& where) {
  std::vector<std::string> names;
  for (const auto& [n, kernel] : kKernelNames) {
    if (n == name) return kernel;
    names.emplace_back(n);
  }
  throw InputError(where, "unknown attention kernel '" + std::string(name) + "'", suggest(name, names));
}

Calibration with_attention_kernel(Calibration c, const hw::GpuSpec& gpu, AttentionKernel k, const Where& where) {
  if (k == AttentionKernel::kDefault) return c;
  std::vector<std::string> have;
  for (const KernelEfficiency& e : kKernelEfficiencies) {
    if (e.arch != gpu.architecture) continue;
    if (e.kernel == k) {
      c.attention = e.forward;
      c.attention_backward = e.backward;
      return c;
    }
    have.emplace_back(attention_kernel_name(e.kernel));
  }
  throw InputError(where,
                   "no published " + std::string(attention_kernel_name(k)) + " efficiency for GPU '" + gpu.name +
                       "' (architecture " + gpu.architecture + ")",
                   have.empty() ? std::string("use the default") : fmt::format("available: default, {}", fmt::join(have, ", ")));
}

Calibration default_calibration(const hw::GpuSpec& gpu) {
  Calibration c;
  c.tiles = cutlass_tiles();
  c.l2_bytes_per_flop = kL2BytesPerFlop;
  c.name = "generic";
  c.source = "generic roofline defaults (architecture '" + gpu.architecture + "' has no calibration; not validated)";
  for (const ArchConstants& a : kArchConstants) {
    if (a.arch != gpu.architecture) continue;
    c.name = std::string(a.arch);
    c.gemm_efficiency = a.gemm;
    c.fp8_gemm_factor = a.fp8_gemm;
    c.gemm_memory_efficiency = a.gemm_memory;
    c.memory_efficiency = a.memory;
    c.attention.efficiency = a.attention;
    c.attention_backward = c.attention;
    for (const KernelEfficiency& e : kKernelEfficiencies) {
      if (e.arch == a.arch && e.kernel == default_attention_kernel(a.arch)) {
        c.attention = e.forward;
        c.attention_backward = e.backward;
      }
    }
    c.launch_overhead = Time::us(a.launch_us);
    c.fp32_accumulate_exposure = kFp32AccumulateExposure;
    c.source = std::string(a.source);
  }
  for (const ProductGemm& g : kProductGemms) {
    if (g.gpu != gpu.name) continue;
    c.gemm_efficiency = g.gemm;
    c.fp8_gemm_factor = g.fp8_gemm;
  }
  if (gpu.power_limit && gpu.tdp.watts() > 0.0 && gpu.power_limit->watts() < gpu.tdp.watts()) {
    c.tensor_clock_factor = std::pow(gpu.power_limit->watts() / gpu.tdp.watts(), kPowerLimitExponent);
  }
  for (const SmSpec& s : kSmSpecs) {
    if (s.gpu == gpu.name) {
      c.sm_count = s.sms;
      c.max_threads_per_sm = s.threads;
    }
  }
  return c;
}

ComputeModel::ComputeModel(const hw::GpuSpec& gpu) : ComputeModel(gpu, default_calibration(gpu)) {}

ComputeModel::ComputeModel(const hw::GpuSpec& gpu, Calibration calibration)
    : gpu_(&gpu), calibration_(std::move(calibration)) {
  if (calibration_.tiles.empty()) calibration_.tiles.push_back(GemmTile{});
  if (calibration_.sm_count > 0 && calibration_.l2_bytes_per_flop > 0.0) {
    auto ref = gpu.peak(hw::DType::kFp16);
    if (!ref) ref = gpu.peak(hw::DType::kBf16);
    if (ref) l2_per_sm_ = calibration_.l2_bytes_per_flop * ref->per_second() / static_cast<double>(calibration_.sm_count);
  }
}

Time ComputeModel::gemm(const GemmShape& s, hw::DType dtype) const {
  const double peak = peak_or_throw(*gpu_, dtype).per_second() * calibration_.tensor_clock_factor *
                      (dtype == hw::DType::kFp8 ? calibration_.fp8_gemm_factor : 1.0);
  ORRERY_ASSERT(s.m >= 0.0 && s.n >= 1 && s.k >= 1 && s.count >= 1);
  if (s.m <= 0.0) return calibration_.launch_overhead;
  const Calibration& c = calibration_;
  const double eb = hw::dtype_bytes(dtype);
  const double count = d(s.count);
  const double bw = gpu_->memory_bandwidth.bytes_per_second() * c.gemm_memory_efficiency;
  const double wb = s.weight_bytes > 0.0 ? s.weight_bytes : eb;
  const double base_bytes = count * (eb * (s.m * d(s.k) + s.m * d(s.n)) + wb * d(s.k) * d(s.n));
  const double p = c.transition_sharpness;

  if (c.sm_count <= 0) {
    const double t_c = 2.0 * s.m * d(s.n) * d(s.k) * count / (peak * c.gemm_efficiency);
    return Time::seconds(smooth_max(t_c, base_bytes / bw, p)) + c.launch_overhead;
  }
  // The library's heuristic: the (tile, split-K) candidate with the shortest time. Split-K is tried
  // only while the CTAs do not fill the SMs; its fp32 partial sums are written and read back. The
  // memory time depends on the split only, so each split needs one smooth max, of its fastest tile.
  const double sms = d(c.sm_count);
  const double per_sm_rate = peak / sms * c.gemm_efficiency;
  double best = -1.0;
  for (int64_t split = 1; split <= std::max<int64_t>(1, c.max_split_k); split *= 2) {
    const double k_per_cta = std::ceil(d(s.k) / d(split));
    double t_c = -1.0;
    for (const GemmTile& tile : c.tiles) {
      const double ctas = count * std::ceil(s.m / d(tile.m)) * std::ceil(d(s.n) / d(tile.n)) * d(split);
      if (split > 1 && ctas > sms) continue;
      double t_cta = 2.0 * d(tile.m) * d(tile.n) * k_per_cta / per_sm_rate;
      if (l2_per_sm_ > 0.0) t_cta = std::max(t_cta, eb * d(tile.m + tile.n) * k_per_cta / l2_per_sm_);
      const double t = std::ceil(ctas / sms) * t_cta;
      if (t_c < 0.0 || t < t_c) t_c = t;
    }
    if (t_c < 0.0) break;  // no tile leaves room for this split (nor for larger ones)
    const double partials = split > 1 ? 2.0 * 4.0 * count * s.m * d(s.n) * d(split) : 0.0;
    const double t = smooth_max(t_c, (base_bytes + partials) / bw, p);
    if (best < 0.0 || t < best) best = t;
  }
  return Time::seconds(best) + c.launch_overhead;
}

Time ComputeModel::attention(std::span<const AttentionSeq> seqs, const AttentionHeads& h, hw::DType dtype,
                             Pass pass) const {
  const double peak = peak_or_throw(*gpu_, dtype).per_second() * calibration_.tensor_clock_factor;
  const Calibration& c = calibration_;
  const double eb = hw::dtype_bytes(dtype);
  const double width = d(h.head_dim_qk + h.head_dim_v);
  const model::AttentionFlops mode = h.causal ? model::AttentionFlops::kCausal : model::AttentionFlops::kFull;
  const bool backward = pass == Pass::kBackward;
  const AttentionRate& r = backward ? c.attention_backward : c.attention;
  double t_c = 0.0;  // at full occupancy; each sequence at the rate its key count gives
  double bytes = 0.0;
  double units = 0.0;
  double ctas = 0.0;
  double mask_elements = 0.0;  // attended pairs x heads: the dropout mask's elements
  for (const AttentionSeq& s : seqs) {
    ORRERY_ASSERT(s.q >= 1 && s.kv >= s.q);
    const double pairs = model::attended_pairs(s.q, s.kv - s.q, h.window, mode);
    mask_elements += d(h.heads) * pairs;
    const double flops = 2.0 * d(h.heads) * pairs * width;
    const double kv_read = h.window > 0 ? std::min(d(s.kv), d(h.window + s.q - 1)) : d(s.kv);
    t_c += flops / attention_rate(r, peak, kv_read, 0.0);
    bytes += eb * (d(s.q) * d(h.heads) * width + kv_read * d(h.kv_heads) * width);
    const double q_tiles = std::ceil(d(s.q) / d(std::max<int64_t>(1, c.attention_q_tile)));
    ctas += d(h.heads) * q_tiles;
    // Blocks streaming K/V at once: a decode runs one per (sequence, kv head), its query heads sharing
    // it; a prefill one per (head, query tile).
    units += s.q > 1 ? d(h.heads) * q_tiles : d(h.kv_heads);
  }
  if (seqs.empty()) return c.launch_overhead;
  // Dropout: one mask element per attended pair and head, drawn in this pass (AttentionRate).
  const double t_dropout =
      h.dropout && r.dropout_pairs_per_s > 0.0 ? mask_elements / (r.dropout_pairs_per_s * c.tensor_clock_factor) : 0.0;
  t_c *= (backward ? 2.5 : 1.0) / attention_occupancy(r, ctas);
  if (backward) bytes *= 2.0;
  return Time::seconds(smooth_max(t_c, bytes / attention_bandwidth(units), c.transition_sharpness) + t_dropout) +
         c.launch_overhead;
}

Time ComputeModel::fp32_accumulate(const GemmShape& s, hw::DType out_dtype) const {
  ORRERY_ASSERT(s.m >= 0.0 && s.n >= 1 && s.count >= 1);
  const double extra = d(s.count) * s.m * d(s.n) * (4.0 + 4.0 - d(hw::dtype_bytes(out_dtype)));
  return Time::seconds(calibration_.fp32_accumulate_exposure * extra / gpu_->memory_bandwidth.bytes_per_second());
}

double ComputeModel::attention_rate(const AttentionRate& r, double peak, double length, double ctas) const {
  return peak * r.efficiency * length / (length + r.half_length) * attention_occupancy(r, ctas);
}

double ComputeModel::attention_occupancy(const AttentionRate& r, double ctas) const {
  if (calibration_.sm_count <= 0 || r.ctas_per_sm_half <= 0.0 || ctas <= 0.0) return 1.0;
  return ctas / (ctas + r.ctas_per_sm_half * d(calibration_.sm_count));
}

double ComputeModel::attention_bandwidth(double units) const {
  const Calibration& c = calibration_;
  const double bw = gpu_->memory_bandwidth.bytes_per_second() * c.memory_efficiency;
  if (c.sm_count <= 0) return bw;
  // Few (sequence, kv head) blocks cannot keep enough requests in flight to saturate HBM.
  return std::min(bw, units * c.decode_bytes_in_flight.to_double() / c.memory_latency.to_seconds());
}

Time ComputeModel::memory_bound(Bytes bytes) const {
  return Time::seconds(bytes.to_double() /
                       (gpu_->memory_bandwidth.bytes_per_second() * calibration_.memory_efficiency)) +
         calibration_.launch_overhead;
}

Time ComputeModel::scalar_memory_bound(Bytes bytes, int64_t access_bytes) const {
  ORRERY_ASSERT(access_bytes >= 1);
  const Calibration& c = calibration_;
  double bw = gpu_->memory_bandwidth.bytes_per_second() * c.memory_efficiency;
  if (c.sm_count > 0) {
    const double in_flight = d(c.sm_count) * d(c.max_threads_per_sm) * d(access_bytes);
    bw = std::min(bw, in_flight / c.memory_latency.to_seconds());
  }
  return Time::seconds(bytes.to_double() / bw) + c.launch_overhead;
}

Time ComputeModel::op(const model::Op& op, const model::Shape& shape, const model::ModelSpec& spec, hw::DType dtype,
                      Pass pass) const {
  const double peak = peak_or_throw(*gpu_, dtype).per_second() * calibration_.tensor_clock_factor;
  const Calibration& c = calibration_;
  switch (op.kind) {
    case model::OpKind::kGemm:
    case model::OpKind::kRouter: {
      if (op.gemm.count == 0 || op.gemm.m <= 0.0) return c.launch_overhead;
      const GemmShape fwd{op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.count};
      if (pass == Pass::kForward) return gemm(fwd, dtype);
      // dgrad: dA[m x k] = dC[m x n] B^T; wgrad: dB[k x n] = A^T[k x m] dC[m x n].
      const GemmShape dgrad{op.gemm.m, op.gemm.k, op.gemm.n, op.gemm.count};
      const auto m_rows = static_cast<int64_t>(std::ceil(op.gemm.m));
      const GemmShape wgrad{d(op.gemm.k), op.gemm.n, std::max<int64_t>(1, m_rows), op.gemm.count};
      return gemm(dgrad, dtype) + gemm(wgrad, dtype);
    }
    case model::OpKind::kAttention: {
      // The inventory decided the FLOP convention (causal, window) and the bytes (flash or not);
      // the kernel's rate depends on the keys per sequence.
      const double length = d(shape.kv_len());
      const double q_tiles = std::ceil(d(shape.seq) / d(std::max<int64_t>(1, c.attention_q_tile)));
      const double ctas = d(shape.batch) * d(spec.heads) * q_tiles;
      const bool backward = pass == Pass::kBackward;
      const double flops = (backward ? 2.5 : 1.0) * op.fwd_flops.count();
      double bytes = (op.fwd_bytes_read + op.fwd_bytes_written).to_double();
      if (backward) bytes *= 2.0;
      const double rate = attention_rate(backward ? c.attention_backward : c.attention, peak, length, ctas);
      const double units = shape.seq > 1 ? ctas
                                         : d(shape.batch) * d(spec.attention == model::AttentionKind::kMla ? spec.heads
                                                                                                            : spec.kv_heads);
      return Time::seconds(smooth_max(flops / rate, bytes / attention_bandwidth(units), c.transition_sharpness)) +
             c.launch_overhead;
    }
    case model::OpKind::kElementwise:
    case model::OpKind::kNorm:
    case model::OpKind::kEmbedding:
      break;
  }
  // Elementwise backward reads the output gradient and the saved input and writes the input gradient:
  // about twice the forward's traffic, unless the op states its own (Op::backward_bytes).
  return memory_bound(pass == Pass::kBackward ? op.backward_bytes() : op.fwd_bytes_read + op.fwd_bytes_written);
}

LayerOpTimes ComputeModel::linear_layer_ops(const model::ModelSpec& spec, int64_t tokens, int tp,
                                            hw::DType dtype) const {
  peak_or_throw(*gpu_, dtype);
  const Where where{"", 0, "tensor_parallel"};
  if (tp < 1) throw InputError(where, "tensor parallelism must be >= 1, found " + std::to_string(tp));
  if (spec.heads % tp != 0) {
    throw InputError(where, "tensor parallelism " + std::to_string(tp) + " does not divide the " +
                                std::to_string(spec.heads) + " attention heads of '" + spec.name + "'",
                     "use a divisor of the head count");
  }
  if (tokens < 1) throw InputError(Where{"", 0, "tokens"}, "tokens must be >= 1, found " + std::to_string(tokens));
  const int64_t h = spec.hidden;
  const double t = d(tokens);
  const double eb = hw::dtype_bytes(dtype);
  const bool mla = spec.attention == model::AttentionKind::kMla;
  const int64_t heads = spec.heads / tp;
  const int64_t kv_heads = mla ? heads : std::max<int64_t>(1, spec.kv_heads / tp);
  const int64_t dv = mla ? spec.mla.v_head_dim : spec.head_dim;
  const int64_t rope_dim = mla ? spec.mla.qk_rope_head_dim : spec.head_dim;
  const auto bytes = [](double v) { return Bytes::from_double(v); };
  // vLLM's custom kernels (RMSNorm, rotary, SiLU-and-mul) move one fp16 element per thread access;
  // torch's residual add and embedding are vectorized.
  const int64_t access = hw::dtype_bytes(dtype);

  LayerOpTimes out;
  out.ops.reserve(11);
  // Embedding: a row gather (vocab-parallel under TP); read the rows and ids, write the output.
  out.ops.push_back({"emb", scalar_memory_bound(bytes(t * d(h) * eb * 2.0 + t * 4.0), access)});
  // RMSNorm reads its input twice (variance, then normalize) and writes once.
  const Time norm = scalar_memory_bound(bytes(3.0 * t * d(h) * eb), access);
  out.ops.push_back({"input_layernorm", norm});
  if (!mla) {
    const int64_t qkv_n = (heads + 2 * kv_heads) * spec.head_dim;
    out.ops.push_back({"attn_pre_proj", gemm(GemmShape{t, qkv_n, h, 1}, dtype)});
  } else {
    const model::MlaDims& m = spec.mla;
    Time pre;
    if (m.q_lora_rank > 0) {
      pre += gemm(GemmShape{t, m.q_lora_rank, h, 1}, dtype);
      pre += gemm(GemmShape{t, heads * m.qk_head_dim(), m.q_lora_rank, 1}, dtype);
    } else {
      pre += gemm(GemmShape{t, heads * m.qk_head_dim(), h, 1}, dtype);
    }
    pre += gemm(GemmShape{t, m.kv_lora_rank + m.qk_rope_head_dim, h, 1}, dtype);
    pre += gemm(GemmShape{t, heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank, 1}, dtype);
    out.ops.push_back({"attn_pre_proj", pre});
  }
  if (spec.positions == model::PositionKind::kRope) {
    // In place on q and k: read and write each rotated element.
    out.ops.push_back({"attn_rope", scalar_memory_bound(bytes(2.0 * t * d(heads + kv_heads) * d(rope_dim) * eb), access)});
  }
  out.ops.push_back({"attn_post_proj", gemm(GemmShape{t, h, heads * dv, 1}, dtype)});
  out.ops.push_back({"post_attention_layernorm", norm});

  const bool gated = spec.mlp == model::MlpKind::kGated;
  if (!spec.is_moe()) {
    const int64_t f = spec.ffn / tp;
    out.ops.push_back({"mlp_up_proj", gemm(GemmShape{t, gated ? 2 * f : f, h, 1}, dtype)});
    out.ops.push_back({"mlp_act", scalar_memory_bound(bytes((gated ? 3.0 : 2.0) * t * d(f) * eb), access)});
    out.ops.push_back({"mlp_down_proj", gemm(GemmShape{t, h, f, 1}, dtype)});
  } else {
    // Every layer as an MoE layer; experts sharded by TP on their intermediate size.
    const model::MoeSpec& moe = spec.moe;
    const double rows = t * d(moe.top_k) / d(moe.num_experts);
    const int64_t fe = std::max<int64_t>(1, moe.expert_ffn / tp);
    const int64_t fs = moe.num_shared_experts * moe.shared_expert_ffn / tp;
    out.ops.push_back({"moe_router", gemm(GemmShape{t, moe.num_experts, h, 1}, dtype)});
    Time up = gemm(GemmShape{rows, 2 * fe, h, moe.num_experts}, dtype);
    Time down = gemm(GemmShape{rows, h, fe, moe.num_experts}, dtype);
    double act_elems = t * d(moe.top_k) * d(fe);
    if (fs > 0) {
      up += gemm(GemmShape{t, 2 * fs, h, 1}, dtype);
      down += gemm(GemmShape{t, h, fs, 1}, dtype);
      act_elems += t * d(fs);
    }
    out.ops.push_back({"mlp_up_proj", up});
    out.ops.push_back({"mlp_act", scalar_memory_bound(bytes(3.0 * act_elems * eb), access)});
    out.ops.push_back({"mlp_down_proj", down});
  }
  // One residual add (vidur's `add` column): read two tensors, write one.
  out.ops.push_back({"add", memory_bound(bytes(3.0 * t * d(h) * eb))});
  return out;
}

}  // namespace orrery::compute
