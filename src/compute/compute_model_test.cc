#include "compute/compute_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/op_inventory.h"

namespace orrery::compute {
namespace {

// Datasheet figures as in catalog/gpus.yaml (the test builds the specs so it needs no catalog).
hw::GpuSpec make_gpu(std::string name, std::string arch, double bandwidth, double fp16) {
  hw::GpuSpec g;
  g.name = std::move(name);
  g.architecture = std::move(arch);
  g.origin = "test";
  g.memory_bandwidth = Bandwidth(bandwidth);
  g.peak_flops[static_cast<size_t>(hw::DType::kFp16)] = FlopRate(fp16);
  g.peak_flops[static_cast<size_t>(hw::DType::kBf16)] = FlopRate(fp16);
  g.peak_flops[static_cast<size_t>(hw::DType::kFp32)] = FlopRate(fp16 / 16.0);
  return g;
}

const hw::GpuSpec& h100() {
  static const hw::GpuSpec g = [] {
    hw::GpuSpec s = make_gpu("h100-sxm", "hopper", 3.35e12, 989.4e12);
    s.peak_flops[static_cast<size_t>(hw::DType::kFp8)] = FlopRate(1978.9e12);
    return s;
  }();
  return g;
}
const hw::GpuSpec& a100() {
  static const hw::GpuSpec g = make_gpu("a100-sxm-80gb", "ampere", 2039e9, 312e12);
  return g;
}
const hw::GpuSpec& a40() {
  static const hw::GpuSpec g = make_gpu("a40", "ampere", 696e9, 149.7e12);
  return g;
}

double us(Time t) { return t.to_us(); }

model::ModelSpec llama2_7b() {
  return model::ModelSpec::llama({32, 4096, 32, 32, 11008, 32000, 4096}, "llama2-7b");
}

TEST(DefaultCalibration, KnowsSmCountsAndThreadLimitsPerProduct) {
  // Whitepapers: A100 108 SMs (cc 8.0, 2048 threads/SM); A40 84 SMs (cc 8.6, 1536); H100 SXM 132.
  EXPECT_EQ(default_calibration(a100()).sm_count, 108);
  EXPECT_EQ(default_calibration(a100()).max_threads_per_sm, 2048);
  EXPECT_EQ(default_calibration(a40()).sm_count, 84);
  EXPECT_EQ(default_calibration(a40()).max_threads_per_sm, 1536);
  EXPECT_EQ(default_calibration(h100()).sm_count, 132);
  EXPECT_EQ(default_calibration(h100()).name, "hopper");
  // Hopper GEMMs: the A100's model-shaped fraction 0.72 scaled by the measured best-shape rates
  // (mamf-finder: H100 SXM 792.1 of 989.4, A100 SXM 267.9 of 312 TFLOP/s) = 0.671.
  EXPECT_NEAR(default_calibration(h100()).gemm_efficiency, 0.72 * (792.1 / 989.4) / (267.9 / 312.0), 0.005);
  EXPECT_EQ(default_calibration(h100()).tensor_clock_factor, 1.0);  // no power limit
  const hw::GpuSpec other = make_gpu("x1", "future-arch", 1e12, 100e12);
  EXPECT_EQ(default_calibration(other).name, "generic");
  EXPECT_EQ(default_calibration(other).sm_count, 0);
}

// Blackwell GEMMs, transferred from the A100 as Hopper's are, with mamf-finder's current table (A100
// SXM 271.2 of 312 TFLOP/s): B200 SXM 1745.0 of 2250 -> 0.72 x 0.7756 / 0.8692 = 0.642 for the
// architecture; GB200 measured on its own, 1822.0 of 2500 -> 0.604, fp8 3615.6 of 5000 -> 0.992 of that.
TEST(DefaultCalibration, BlackwellGemmsFollowMamfFindersB200AndGb200Rates) {
  hw::GpuSpec b200 = make_gpu("b200", "blackwell", 8e12, 2250e12);
  b200.peak_flops[static_cast<size_t>(hw::DType::kFp8)] = FlopRate(4500e12);
  hw::GpuSpec gb200 = make_gpu("gb200", "blackwell", 8e12, 2500e12);
  EXPECT_NEAR(default_calibration(b200).gemm_efficiency, 0.642, 0.0005);
  EXPECT_NEAR(default_calibration(b200).fp8_gemm_factor, 0.9835, 0.0001);
  EXPECT_NEAR(default_calibration(gb200).gemm_efficiency, 0.604, 0.0005);
  EXPECT_NEAR(default_calibration(gb200).fp8_gemm_factor, 0.992, 0.0005);
  EXPECT_EQ(default_calibration(gb200).sm_count, 148);
}

TEST(Gemm, Large8192CubedBf16OnH100TakesFlopsOverCalibratedRateTimesWaveQuantization) {
  // 2*8192^3 FLOP at 989.4 TFLOP/s * eff (eff = 0.67). Tile candidates: 256x128 gives 2048 tiles =
  // 16 waves of 132 SMs (2112 slots, 3.1% idle); 128x64 gives 8192 tiles = 63 waves (8316 slots,
  // 1.5% idle); 64x64 gives 16384 tiles = 125 waves (16500 slots, 0.7% idle) and is still
  // compute-fed by L2: 128*8192*2 B per CTA at 0.0231 B/FLOP * 989.4e12 / 132 = 12.1 us < the
  // 2*64*64*8192 / (989.4e12 * 0.67 / 132) = 13.4 us of MMA. So 64x64 wins, and HBM
  // (3 * 8192^2 * 2 B / (3.35e12 * 0.78) = 0.15 ms) is far below compute.
  const ComputeModel cm(h100());
  const double eff = cm.calibration().gemm_efficiency;
  ASSERT_NEAR(eff, 0.67, 0.005);  // the derivation above holds for this constant
  const double ideal = 2.0 * std::pow(8192.0, 3) / (989.4e12 * eff);
  const double expected = ideal * (125.0 * 132.0 / 16384.0) + cm.calibration().launch_overhead.to_seconds();
  const double t = cm.gemm({8192, 8192, 8192, 1}, hw::DType::kBf16).to_seconds();
  EXPECT_NEAR(t, expected, expected * 1e-4);
}

// fp8 GEMMs run at peak_fp8 x gemm_efficiency x fp8_gemm_factor. Hopper's factor is mamf-finder's
// fp8 over bf16 efficiency on H100 SXM in one run (torch 2.7.0+cu126): 1402.6/1979 over 794.5/989 =
// 0.882. On 8192^3 the fp8 GEMM's compute term is (989.4 / 1978.9) / 0.882 = 0.567 of the bf16 one's
// with the same tile (64x64: 125 waves, as above; at 1 B per operand its L2 feed is half the bf16
// one's, still below its MMA time), and HBM stays far below compute, so t_fp8 / t_bf16 = 0.567 less
// the launch; a calibration of factor 1 gives 0.5.
TEST(Gemm, Fp8RunsAtTheMeasuredShareOfBf16Efficiency) {
  const ComputeModel cm(h100());
  EXPECT_NEAR(cm.calibration().fp8_gemm_factor, 0.882, 0.0005);
  const double launch = cm.calibration().launch_overhead.to_seconds();
  const GemmShape g{8192, 8192, 8192, 1};
  const double bf = cm.gemm(g, hw::DType::kBf16).to_seconds() - launch;
  const double f8 = cm.gemm(g, hw::DType::kFp8).to_seconds() - launch;
  EXPECT_NEAR(f8 / bf, (989.4 / 1978.9) / ((1402.6 / 1979.0) / (794.5 / 989.0)), 1e-3);
  Calibration one = cm.calibration();
  one.fp8_gemm_factor = 1.0;
  const ComputeModel ideal(h100(), one);
  EXPECT_NEAR((ideal.gemm(g, hw::DType::kFp8).to_seconds() - launch) / bf, 989.4 / 1978.9, 1e-3);
  EXPECT_EQ(default_calibration(a100()).fp8_gemm_factor, 1.0);  // no fp8 on Ampere: nothing to scale
}

TEST(PowerLimit, ACapBelowTdpSlowsTensorCoreWorkByThePowerLawAndLeavesMemoryBoundWorkAlone) {
  // 500 W on a 700 W H100: tensor throughput x (500/700)^0.575 = 0.824 (exponent from mamf-finder's
  // H100 PCIe vs SXM: ln(4.382/6.001) / ln(3.070/5.303)). A compute-bound GEMM and a long-sequence
  // attention take 1/0.824 times as long; a streaming kernel's time does not change.
  hw::GpuSpec capped = h100();
  capped.tdp = Power(700.0);
  capped.power_limit = Power(500.0);
  hw::GpuSpec full = capped;
  full.power_limit.reset();
  const ComputeModel a(full), b(capped);
  const double f = std::pow(500.0 / 700.0, 0.575);
  EXPECT_NEAR(b.calibration().tensor_clock_factor, f, 1e-12);
  EXPECT_NEAR(f, 0.824, 0.001);
  const double launch = a.calibration().launch_overhead.to_seconds();
  const GemmShape g{8192, 8192, 8192, 1};
  EXPECT_NEAR((b.gemm(g, hw::DType::kBf16).to_seconds() - launch) / (a.gemm(g, hw::DType::kBf16).to_seconds() - launch),
              1.0 / f, 1e-3);
  const std::vector<AttentionSeq> seqs(4, AttentionSeq{8192, 8192});
  AttentionHeads h;
  h.heads = 32;
  h.kv_heads = 8;
  h.head_dim_qk = h.head_dim_v = 128;
  EXPECT_NEAR((b.attention(seqs, h, hw::DType::kBf16, Pass::kForward).to_seconds() - launch) /
                  (a.attention(seqs, h, hw::DType::kBf16, Pass::kForward).to_seconds() - launch),
              1.0 / f, 1e-3);
  EXPECT_EQ(a.memory_bound(Bytes::GiB(1)), b.memory_bound(Bytes::GiB(1)));
  // A limit at or above the TDP changes nothing.
  hw::GpuSpec same = full;
  same.power_limit = Power(700.0);
  EXPECT_EQ(ComputeModel(same).calibration().tensor_clock_factor, 1.0);
}

TEST(AttentionKernel, HopperRatesAgreeWithThePublishedLongSequenceBenchmark) {
  // The Hopper rates are fit to kernels measured on a power-limited H100 (data/measured/h100-sxm). The
  // FlashAttention-3 paper (Shah et al. 2024, Fig. 5: H100 SXM5, causal, head dim 128, 16k tokens in all,
  // hidden 2048, so 16 heads x one 16k sequence = 16 x 128 = 2,048 CTAs) gives the forward at 16k keys:
  // FlashAttention-2 335, cuDNN 539, FlashAttention-3 616 TFLOP/s, from short benchmarks at an unknown
  // clock. The model's rate at that shape over the published one: the clock factor, between 666/787 =
  // 0.85 (the same H100 hot against cool, data/measured/h100-sxm) and 1 (a benchmark as cool as the
  // paper's), times the fits' own error, up to 10% (their held-out medians are 1.5-10%): between
  // 0.85 x 0.90 = 0.76 and 1.0 x 1.10 = 1.10.
  const Where w{"<test>", 0, "--attention-kernel"};
  const Calibration base = default_calibration(h100());
  const ComputeModel cudnn(h100(), base);
  const auto model_tflops = [&](const char* name) {
    const ComputeModel cm(h100(), with_attention_kernel(base, h100(), parse_attention_kernel(name, w), w));
    AttentionHeads heads;
    heads.heads = heads.kv_heads = 16;
    heads.head_dim_qk = heads.head_dim_v = 128;
    const std::vector<AttentionSeq> seqs(1, AttentionSeq{16384, 16384});
    const double flops = 4.0 * 16.0 * 16384.0 * 16385.0 / 2.0 * 128.0;
    const double t = cm.attention(seqs, heads, hw::DType::kBf16, Pass::kForward).to_seconds();
    return flops / (t - base.launch_overhead.to_seconds()) / 1e12;
  };
  for (const auto& [name, published] : {std::pair<const char*, double>{"fa2", 335.0}, {"cudnn", 539.0}, {"fa3", 616.0}}) {
    const double ratio = model_tflops(name) / published;
    EXPECT_GE(ratio, 0.76) << name;
    EXPECT_LE(ratio, 1.10) << name;
  }
  // The default on Hopper is cuDNN, the kernel Transformer Engine (so Megatron-Core) runs, both passes.
  const Calibration c = with_attention_kernel(base, h100(), AttentionKernel::kCudnn, w);
  EXPECT_EQ(c.attention.efficiency, base.attention.efficiency);
  EXPECT_EQ(c.attention_backward.efficiency, base.attention_backward.efficiency);
  EXPECT_EQ(with_attention_kernel(base, h100(), AttentionKernel::kDefault, w).attention.efficiency, base.attention.efficiency);
  // Ampere's calibration is FlashAttention-2's own (Dao 2023: 0.73 of the A100's peak), both passes,
  // with no occupancy term (not measured there).
  const Calibration amp = default_calibration(a100());
  EXPECT_EQ(with_attention_kernel(amp, a100(), AttentionKernel::kFlashAttention2, w).attention.efficiency,
            amp.attention.efficiency);
  EXPECT_EQ(amp.attention.efficiency, 0.73);
  EXPECT_EQ(amp.attention_backward.efficiency, 0.73);
  EXPECT_EQ(amp.attention.ctas_per_sm_half, 0.0);
}

TEST(AttentionKernel, EachPassTakesItsOwnRateAndOccupancy) {
  // A compute-bound causal attention (2 x 32 heads over 8 kv heads, 8k keys) against the rate's formula:
  // t = F / (peak e L/(L + half) C/(C + c SMs)) + launch, F = 2 heads pairs (dqk + dv), pairs = L(L+1)/2
  // per sequence, C = 2 x 32 x 64 CTAs, backward 2.5 F at the backward's constants.
  const Calibration base = default_calibration(h100());
  const ComputeModel cm(h100(), base);
  const std::vector<AttentionSeq> seqs(2, AttentionSeq{8192, 8192});
  AttentionHeads heads;
  heads.heads = 32;
  heads.kv_heads = 8;
  heads.head_dim_qk = heads.head_dim_v = 128;
  const double f = 2.0 * 2.0 * 32.0 * (8192.0 * 8193.0 / 2.0) * 256.0;
  const double ctas = 2.0 * 32.0 * 64.0;
  const auto expected = [&](const AttentionRate& r, double flops) {
    const double rate = 989.4e12 * r.efficiency * 8192.0 / (8192.0 + r.half_length) * ctas /
                        (ctas + r.ctas_per_sm_half * static_cast<double>(base.sm_count));
    return flops / rate + base.launch_overhead.to_seconds();
  };
  EXPECT_NEAR(cm.attention(seqs, heads, hw::DType::kBf16, Pass::kForward).to_seconds(), expected(base.attention, f),
              1e-3 * expected(base.attention, f));
  EXPECT_NEAR(cm.attention(seqs, heads, hw::DType::kBf16, Pass::kBackward).to_seconds(),
              expected(base.attention_backward, 2.5 * f), 1e-3 * expected(base.attention_backward, 2.5 * f));
  // Fewer CTAs, lower occupancy: one 4k sequence over 4 heads (128 CTAs) runs at a lower rate than
  // over 64 heads (2,048 CTAs), by the ratio of the two occupancy factors (the memory time, 1-2% of the
  // compute time here, moves the smooth max by under 1e-3).
  const auto per_head = [&](int64_t h) {
    AttentionHeads hh;
    hh.heads = hh.kv_heads = h;
    const std::vector<AttentionSeq> one(1, AttentionSeq{4096, 4096});
    return (cm.attention(one, hh, hw::DType::kBf16, Pass::kForward) - base.launch_overhead).to_seconds() / static_cast<double>(h);
  };
  const double c0 = base.attention.ctas_per_sm_half * static_cast<double>(base.sm_count);
  EXPECT_NEAR(per_head(4) / per_head(64), (2048.0 / (2048.0 + c0)) / (128.0 / (128.0 + c0)), 1e-3);
}

// Attention dropout inside the fused kernel: one mask element per attended pair and head, drawn in the
// forward and again in the backward, at the pass's measured rate (compute_model.cc: H100 cuDNN 5.82e11
// forward and 1.30e12 backward pairs per second). 16 heads over one causal 4,096-token sequence have
// 16 x 4,096 x 4,097 / 2 = 134.25 M pairs: +0.2307 ms forward, +0.1033 ms backward, whatever the rest of
// the kernel's time. FlashAttention-3 (no dropout; rate 0) and Ampere's FlashAttention-2 (not measured)
// add nothing, and a 500 W cap slows the draws as it slows the tensor cores ((500/700)^0.575).
TEST(AttentionKernel, DropoutDrawsOneMaskElementPerAttendedPairAtThePassRate) {
  const std::vector<AttentionSeq> one(1, AttentionSeq{4096, 4096});
  AttentionHeads plain;
  plain.heads = plain.kv_heads = 16;
  AttentionHeads dropped = plain;
  dropped.dropout = true;
  const double pairs = 16.0 * 4096.0 * 4097.0 / 2.0;
  const auto extra = [&](const ComputeModel& cm, Pass p) {
    return (cm.attention(one, dropped, hw::DType::kBf16, p) - cm.attention(one, plain, hw::DType::kBf16, p)).to_seconds();
  };
  const ComputeModel h(h100());
  EXPECT_NEAR(extra(h, Pass::kForward), pairs / 5.82e11, 1e-9);
  EXPECT_NEAR(extra(h, Pass::kBackward), pairs / 1.30e12, 1e-9);
  const Where w{"<command line>", 0, "--attention-kernel"};
  const ComputeModel fa3(h100(), with_attention_kernel(default_calibration(h100()), h100(), AttentionKernel::kFlashAttention3, w));
  EXPECT_EQ(extra(fa3, Pass::kForward), 0.0);
  EXPECT_EQ(extra(ComputeModel(a100()), Pass::kBackward), 0.0);
  hw::GpuSpec capped = h100();
  capped.tdp = Power(700.0);
  capped.power_limit = Power(500.0);
  EXPECT_NEAR(extra(ComputeModel(capped), Pass::kForward), pairs / (5.82e11 * std::pow(500.0 / 700.0, 0.575)), 1e-9);
}

// fp32 accumulation inside a GEMM (Megatron's weight gradients into fp32 main gradients): the epilogue
// reads C and writes D in fp32 (8 B per output element) where a bf16 GEMM writes 2 B, and 0.65 of that
// traffic's time at the datasheet bandwidth shows (compute_model.cc). E1's qkv weight gradient, a 2,048
// x 6,144 output: 0.65 x 12.58 M x 6 B / 3.35 TB/s = 14.65 us (measured: +40 us; the fit's residuals
// are 12 us rms over 16 shapes, data/measured/h100-sxm/megatron_extras.csv). Twice the outputs (count
// 2) cost twice; a GEMM whose plain output is fp32 already adds 4 B per element, not 6 B.
TEST(Gemm, Fp32AccumulationAddsTheExposedShareOfItsExtraTraffic) {
  const ComputeModel cm(h100());
  const GemmShape qkv{2048.0, 6144, 4096, 1};
  EXPECT_NEAR(cm.fp32_accumulate(qkv, hw::DType::kBf16).to_us(), 0.65 * 2048.0 * 6144.0 * 6.0 / 3.35e12 * 1e6, 1e-6);
  EXPECT_NEAR(cm.fp32_accumulate(GemmShape{2048.0, 6144, 4096, 2}, hw::DType::kBf16).to_us(),
              2.0 * cm.fp32_accumulate(qkv, hw::DType::kBf16).to_us(), 1e-6);
  EXPECT_NEAR(cm.fp32_accumulate(qkv, hw::DType::kFp32).to_us(), cm.fp32_accumulate(qkv, hw::DType::kBf16).to_us() * 4.0 / 6.0,
              1e-6);
  Calibration none = default_calibration(h100());
  none.fp32_accumulate_exposure = 0.0;
  EXPECT_EQ(ComputeModel(h100(), none).fp32_accumulate(qkv, hw::DType::kBf16), Time::zero());
}

TEST(AttentionKernel, UnknownNamesAndUnpublishedPairsAreInputErrors) {
  const Where w{"<command line>", 0, "--attention-kernel"};
  try {
    parse_attention_kernel("fa4", w);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fa4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fa3"), std::string::npos) << e.what();  // nearest name
  }
  // FlashAttention-3 needs Hopper: on an A100 the error lists what is published there.
  try {
    with_attention_kernel(default_calibration(a100()), a100(), AttentionKernel::kFlashAttention3, w);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("no published fa3 efficiency"), std::string::npos) << m;
    EXPECT_NE(m.find("a100-sxm-80gb"), std::string::npos) << m;
    EXPECT_NE(m.find("fa2"), std::string::npos) << m;
  }
  // An architecture without a calibration has only the default.
  const hw::GpuSpec other = make_gpu("x1", "future-arch", 1e12, 100e12);
  EXPECT_THROW(with_attention_kernel(default_calibration(other), other, AttentionKernel::kCudnn, w), InputError);
  EXPECT_EQ(with_attention_kernel(default_calibration(other), other, AttentionKernel::kDefault, w).attention.efficiency,
            default_calibration(other).attention.efficiency);
}

TEST(Gemm, OneTileMoreThanTheSmCountTakesTwoWaves) {
  // One 128x128 tile shape, no split-K, bandwidth made irrelevant: 108 tiles on 108 SMs is one wave,
  // 109 tiles is two waves of the same per-tile time.
  Calibration c = default_calibration(a100());
  c.tiles = {{128, 128}};
  c.max_split_k = 1;
  c.gemm_memory_efficiency = 1e9;
  c.l2_bytes_per_flop = 0.0;
  const ComputeModel cm(a100(), c);
  const Time launch = c.launch_overhead;
  const Time one = cm.gemm({128.0 * 108, 128, 8192, 1}, hw::DType::kFp16) - launch;
  const Time two = cm.gemm({128.0 * 109, 128, 8192, 1}, hw::DType::kFp16) - launch;
  // Per tile: 2*128*128*8192 / (312e12/108 * 0.72) = 129.0 us.
  EXPECT_NEAR(us(one), 2.0 * 128 * 128 * 8192 / (312e12 / 108 * 0.72) * 1e6, 0.01);
  EXPECT_NEAR(two / one, 2.0, 1e-6);
}

TEST(Gemm, SingleTokenProjectionIsWeightBandwidthBound) {
  // Llama-2-7B QKV at one token: 2 B * (4096 + 4096*12288 + 12288) = 100.7 MB over 2,039 GB/s * 0.78
  // = 63.3 us; the padded-tile compute (2 waves of 64x64 tiles, 32 us) adds (32/63)^5 < 4% inside the
  // smooth max, i.e. < 1% of time. (vidur measured 65 us on an A100.)
  const ComputeModel cm(a100());
  const double bytes = 2.0 * (4096.0 + 4096.0 * 12288 + 12288);
  const double expected = bytes / (2039e9 * cm.calibration().gemm_memory_efficiency) * 1e6 + 3.0;
  EXPECT_NEAR(us(cm.gemm({1, 12288, 4096, 1}, hw::DType::kFp16)), expected, 0.01 * expected);
}

TEST(Gemm, TimeNeverDecreasesWithRowsOrDepth) {
  // Each candidate's time is non-decreasing in m and k, and the candidate set only shrinks with m
  // (split-K needs free SMs), so the minimum is non-decreasing.
  const ComputeModel cm(a100());
  Time prev;
  for (int64_t m = 1; m <= 4096; ++m) {
    const Time t = cm.gemm({static_cast<double>(m), 12288, 4096, 1}, hw::DType::kFp16);
    ASSERT_GE(t, prev) << "m = " << m;
    prev = t;
  }
  prev = Time::zero();
  for (int64_t k = 64; k <= 16384; k += 64) {
    const Time t = cm.gemm({512, 4096, k, 1}, hw::DType::kFp16);
    ASSERT_GE(t, prev) << "k = " << k;
    prev = t;
  }
}

TEST(Gemm, EmptyGemmCostsOnlyTheLaunch) {
  const ComputeModel cm(a100());
  EXPECT_EQ(cm.gemm({0.0, 4096, 4096, 8}, hw::DType::kFp16), cm.calibration().launch_overhead);
}

TEST(Gemm, WithoutSmCountItIsAPlainRoofline) {
  // Unknown product: t = smooth_max(2mnk/(peak*eff), bytes/(bw*eff_mem)) + launch; compute-bound here
  // (8192^3: 1.1 ms of compute vs 0.2 ms of memory at 1e12 B/s... (0.2/1.1)^5 ~ 2e-4 inside the root).
  const hw::GpuSpec g = make_gpu("x1", "future-arch", 2e12, 1000e12);
  const ComputeModel cm(g);
  const Calibration& c = cm.calibration();
  const double tc = 2.0 * std::pow(8192.0, 3) / (1000e12 * c.gemm_efficiency);
  const double tm = 3.0 * 8192.0 * 8192.0 * 2.0 / (2e12 * c.gemm_memory_efficiency);
  const double expected = tc * std::pow(1.0 + std::pow(tm / tc, c.transition_sharpness), 1.0 / c.transition_sharpness) +
                          c.launch_overhead.to_seconds();
  EXPECT_NEAR(cm.gemm({8192, 8192, 8192, 1}, hw::DType::kBf16).to_seconds(), expected, expected * 1e-6);
}

TEST(Gemm, NarrowWeightsAreReadAtTheirStoredWidth) {
  // Weight-only quantization (serve --expert-weights): a one-token projection of n = k = 8192 reads
  // 2 B x (k + n) of activations and w B x k n of weights. Plain roofline (no SM count): the compute,
  // 2 x 8192^2 FLOPs = 0.13 us at 1000 TFLOP/s, is (0.13/17)^5 ~ 3e-11 of the memory time inside the
  // smooth max, so t = bytes / (bw x eff_mem) + launch. MXFP4: w = 4.25 / 8 = 0.53125.
  const hw::GpuSpec g = make_gpu("x1", "future-arch", 2e12, 1000e12);
  const ComputeModel cm(g);
  const Calibration& c = cm.calibration();
  for (const double w : {2.0, 1.0, 0.53125}) {
    const double bytes = 2.0 * (8192.0 + 8192.0) + w * 8192.0 * 8192.0;
    const double expected = bytes / (2e12 * c.gemm_memory_efficiency) + c.launch_overhead.to_seconds();
    GemmShape shape{1, 8192, 8192, 1};
    shape.weight_bytes = w;
    EXPECT_NEAR(cm.gemm(shape, hw::DType::kBf16).to_seconds(), expected, expected * 1e-6) << w;
  }
  // 0 means the compute dtype's width: the same as stating 2 B for bf16.
  GemmShape stated{1, 8192, 8192, 1};
  stated.weight_bytes = 2.0;
  EXPECT_EQ(cm.gemm({1, 8192, 8192, 1}, hw::DType::kBf16), cm.gemm(stated, hw::DType::kBf16));
}

TEST(Gemm, DtypeTheGpuLacksIsAnInputError) {
  const ComputeModel cm(a100());
  try {
    (void)cm.gemm({128, 128, 128, 1}, hw::DType::kFp8);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a100-sxm-80gb"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("fp16"), std::string::npos) << e.hint();
  }
  const std::vector<AttentionSeq> seqs = {{1, 100}};
  EXPECT_THROW((void)cm.attention(seqs, AttentionHeads{}, hw::DType::kFp8, Pass::kForward), InputError);
  EXPECT_THROW((void)cm.linear_layer_ops(llama2_7b(), 16, 1, hw::DType::kFp4), InputError);
  const auto ops = model::layer_ops(llama2_7b(), 0, model::Shape::training(1, 128));
  EXPECT_THROW((void)cm.op(ops[0], model::Shape::training(1, 128), llama2_7b(), hw::DType::kFp8, Pass::kForward),
               InputError);
}

TEST(MemoryBound, BytesOverStreamingBandwidthPlusLaunch) {
  // 1 GB at 2,039 GB/s * 0.90 = 544.9 us, plus 3 us.
  const ComputeModel cm(a100());
  EXPECT_NEAR(us(cm.memory_bound(Bytes(1'000'000'000))), 1e9 / (2039e9 * 0.90) * 1e6 + 3.0, 1e-3);
}

TEST(MemoryBound, UnvectorizedKernelsAreCappedByLittlesLaw) {
  // A100: 108 SMs * 2048 threads * 2 B in flight / 434 ns = 1.019 TB/s < 0.9 * 2,039 GB/s.
  const ComputeModel cm(a100());
  const double cap = 108.0 * 2048.0 * 2.0 / 434e-9;
  EXPECT_NEAR(us(cm.scalar_memory_bound(Bytes(1'000'000'000), 2)), 1e9 / cap * 1e6 + 3.0, 1e-3);
  // 16-byte accesses: 8x the in-flight bytes, so HBM bounds it again.
  EXPECT_EQ(cm.scalar_memory_bound(Bytes(1'000'000'000), 16), cm.memory_bound(Bytes(1'000'000'000)));
}

TEST(Attention, LongPrefillRunsAtFlashAttentionRateForItsLength) {
  // One causal 8192-token sequence, 32 heads of 128: pairs = 8192*8193/2, FLOPs = 2*32*pairs*256 =
  // 5.50e11; rate = 312e12 * 0.73 * 8192/(8192+512); memory (Q,K,V,O: 67 MB) is negligible.
  const ComputeModel cm(a100());
  const std::vector<AttentionSeq> seqs = {{8192, 8192}};
  const AttentionHeads heads{32, 32, 128, 128, 0, true};
  const double flops = 2.0 * 32 * (8192.0 * 8193.0 / 2.0) * 256;
  const double expected = flops / (312e12 * 0.73 * 8192.0 / 8704.0) * 1e6 + 3.0;
  const double t = us(cm.attention(seqs, heads, hw::DType::kFp16, Pass::kForward));
  EXPECT_NEAR(t, expected, 0.002 * expected);
  // Backward: 2.5x the forward's FLOPs (dQ, dK, dV and the recomputed scores).
  const double tb = us(cm.attention(seqs, heads, hw::DType::kFp16, Pass::kBackward));
  EXPECT_NEAR((tb - 3.0) / (t - 3.0), 2.5, 0.01);
}

TEST(Attention, ShortSequencesRunAtALowerRatePerFlop) {
  const ComputeModel cm(a100());
  const AttentionHeads heads{32, 32, 128, 128, 0, true};
  const std::vector<AttentionSeq> short_seqs(16, AttentionSeq{512, 512});
  const std::vector<AttentionSeq> long_seq = {{8192, 8192}};
  const auto per_pair = [&](const std::vector<AttentionSeq>& s, double pairs) {
    return (cm.attention(s, heads, hw::DType::kFp16, Pass::kForward) - cm.calibration().launch_overhead).to_seconds() /
           pairs;
  };
  // Rate ratio from L/(L+512): (8192/8704) / (512/1024) = 1.88.
  const double ratio = per_pair(short_seqs, 16 * 512.0 * 513 / 2) / per_pair(long_seq, 8192.0 * 8193 / 2);
  EXPECT_NEAR(ratio, (8192.0 / 8704.0) / 0.5, 0.05);
}

TEST(Attention, DecodeReadsTheKvCacheAtStreamingBandwidth) {
  // H100, 64 decodes of 4096 tokens, 8 kv heads of 128 (Llama-3-8B): 64*4096*8*256*2 B = 1.07 GB at
  // 3.35 TB/s * 0.90 = 356 us; 512 (seq, head) blocks keep 512*16 KiB in flight, far above need.
  const ComputeModel cm(h100());
  const std::vector<AttentionSeq> seqs(64, AttentionSeq{1, 4096});
  const AttentionHeads heads{32, 8, 128, 128, 0, true};
  const double bytes = 2.0 * 64 * (32.0 * 256 + 4096.0 * 8 * 256);
  const double expected = bytes / (3.35e12 * 0.90) * 1e6 + 3.0;
  EXPECT_NEAR(us(cm.attention(seqs, heads, hw::DType::kBf16, Pass::kForward)), expected, 0.01 * expected);
}

TEST(Attention, APrefillStreamsKvFromEveryQueryTileNotFromItsKvHeadsAlone) {
  // Llama-3-70B's attention under TP 8 on an A100: 8 query heads over 1 kv head per GPU, one 4,096-token
  // prefill. Its CTAs (8 heads x 32 query tiles = 256) each stream K/V, so the bytes (Q and O 4096 x 8
  // x 256 x 2 B, K and V 4096 x 1 x 256 x 2 B: 18.9 MB) go at the streaming rate, 0.90 x 2,039
  // GB/s (10 us), far under the compute time (2 x 8 x 4096 x 4097 / 2 x 256 FLOPs = 34.4 GFLOP at
  // 312e12 x 0.73 x 4096 / 4608 = 202 TFLOP/s: 170 us). Counted as a decode's one block per kv head,
  // 16 KiB in flight / 434 ns = 38 GB/s, the same bytes would take 500 us and set the pace.
  const ComputeModel cm(a100());
  const std::vector<AttentionSeq> seqs = {{4096, 4096}};
  const AttentionHeads heads{8, 1, 128, 128, 0, true};
  const double compute = 2.0 * 8 * (4096.0 * 4097.0 / 2.0) * 256 / (312e12 * 0.73 * 4096.0 / 4608.0) * 1e6;
  const double memory = 2.0 * (4096.0 * 8 * 256 + 4096.0 * 1 * 256) / (2039e9 * 0.90) * 1e6;
  ASSERT_LT(memory, 0.1 * compute);
  // The smooth max of the two adds (1 + (memory/compute)^5)^(1/5) - 1 < 1e-5 here.
  EXPECT_NEAR(us(cm.attention(seqs, heads, hw::DType::kFp16, Pass::kForward)), compute + 3.0, 0.002 * compute);
}

TEST(Attention, SlidingWindowCapsTheKeysRead) {
  const ComputeModel cm(h100());
  const std::vector<AttentionSeq> seqs(64, AttentionSeq{1, 32768});
  AttentionHeads full{32, 8, 128, 128, 0, true};
  AttentionHeads windowed = full;
  windowed.window = 4096;
  const std::vector<AttentionSeq> short_ctx(64, AttentionSeq{1, 4096});
  EXPECT_EQ(cm.attention(seqs, windowed, hw::DType::kBf16, Pass::kForward),
            cm.attention(short_ctx, full, hw::DType::kBf16, Pass::kForward));
}

TEST(Op, GemmBackwardIsDgradPlusWgradAboutTwiceForward) {
  // mlp.up_gate of Llama-2-7B at 4096 tokens: forward 4096x22016x4096; dgrad 4096x4096x22016 and
  // wgrad 4096x22016x4096 have the same FLOPs, so backward = 2x forward up to wave quantization.
  const ComputeModel cm(h100());
  const model::ModelSpec spec = llama2_7b();
  const model::Shape shape = model::Shape::training(1, 4096);
  const auto ops = model::layer_ops(spec, 0, shape);
  const auto it = std::find_if(ops.begin(), ops.end(), [](const model::Op& o) { return o.name == "mlp.up_gate"; });
  ASSERT_NE(it, ops.end());
  const Time fwd = cm.op(*it, shape, spec, hw::DType::kBf16, Pass::kForward);
  const Time bwd = cm.op(*it, shape, spec, hw::DType::kBf16, Pass::kBackward);
  EXPECT_EQ(fwd, cm.gemm({4096, 22016, 4096, 1}, hw::DType::kBf16));
  EXPECT_EQ(bwd, cm.gemm({4096, 4096, 22016, 1}, hw::DType::kBf16) + cm.gemm({4096, 22016, 4096, 1}, hw::DType::kBf16));
  EXPECT_NEAR(bwd / fwd, 2.0, 0.1);
}

TEST(Op, EveryOpKindHasAPositiveTimeAndElementwiseBackwardMovesTwiceTheBytes) {
  const ComputeModel cm(h100());
  const model::ModelSpec spec = llama2_7b();
  const model::Shape shape = model::Shape::training(2, 2048);
  model::InventoryOptions options;
  options.flash_attention = true;
  const model::Inventory inv = model::build_inventory(spec, shape, options);
  const Time launch = cm.calibration().launch_overhead;
  auto check = [&](const model::Op& op) {
    const Time f = cm.op(op, shape, spec, hw::DType::kBf16, Pass::kForward);
    const Time b = cm.op(op, shape, spec, hw::DType::kBf16, Pass::kBackward);
    EXPECT_GT(f, launch) << op.name;
    if (op.bwd_bytes) {
      // The op states its backward traffic (the cross-entropy: 12V + 2V bytes per token in bf16,
      // less than its 38V forward, whose passes build the softmax the backward reuses).
      EXPECT_EQ(b, cm.memory_bound(*op.bwd_bytes)) << op.name;
      return;
    }
    EXPECT_GT(b, f) << op.name;
    if (op.kind == model::OpKind::kElementwise || op.kind == model::OpKind::kNorm) {
      EXPECT_NEAR((b - launch) / (f - launch), 2.0, 1e-6) << op.name;
    }
  };
  for (const auto& op : inv.pre_ops) check(op);
  for (const auto& g : inv.groups) {
    for (const auto& op : g.ops) check(op);
  }
  for (const auto& op : inv.post_ops) check(op);
}

TEST(LinearLayerOps, NamesMatchVidurColumnsAndShardByTensorParallelism) {
  const ComputeModel cm(a100());
  const model::ModelSpec spec = llama2_7b();
  const LayerOpTimes t1 = cm.linear_layer_ops(spec, 2048, 1, hw::DType::kFp16);
  std::vector<std::string> names;
  for (const auto& e : t1.ops) names.emplace_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                                             "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj",
                                             "add"}));
  // The QKV projection is the GEMM 2048 x (32+2*32)*128 x 4096.
  EXPECT_EQ(t1.get("attn_pre_proj"), cm.gemm({2048, 12288, 4096, 1}, hw::DType::kFp16));
  EXPECT_EQ(t1.get("missing"), Time::zero());
  Time sum;
  for (const auto& e : t1.ops) {
    if (e.name != "emb") sum += e.time;
  }
  EXPECT_EQ(t1.linear_total(), sum);
  // TP2 halves every sharded GEMM's FLOPs; compute-bound at 2048 tokens, so the MLP up projection
  // takes between 0.45x and 0.6x (wave quantization of the smaller grid).
  const LayerOpTimes t2 = cm.linear_layer_ops(spec, 2048, 2, hw::DType::kFp16);
  const double r = t2.get("mlp_up_proj") / t1.get("mlp_up_proj");
  EXPECT_GT(r, 0.45);
  EXPECT_LT(r, 0.6);
  // Norms and the residual add are not sharded.
  EXPECT_EQ(t2.get("input_layernorm"), t1.get("input_layernorm"));
}

TEST(LinearLayerOps, KvHeadsNeverShardBelowOne) {
  // Llama-3-8B shape (32 heads, 8 kv heads) at TP16: 2 query heads and max(1, 8/16) = 1 kv head, so
  // QKV is tokens x (2 + 2*1)*128 x 4096.
  const ComputeModel cm(a100());
  const model::ModelSpec spec = model::ModelSpec::llama({32, 4096, 32, 8, 14336, 128256, 8192}, "llama3-8b");
  const LayerOpTimes t = cm.linear_layer_ops(spec, 64, 16, hw::DType::kBf16);
  EXPECT_EQ(t.get("attn_pre_proj"), cm.gemm({64, 4 * 128, 4096, 1}, hw::DType::kBf16));
}

TEST(LinearLayerOps, TensorParallelismThatDoesNotDivideTheHeadsIsAnInputError) {
  const ComputeModel cm(a100());
  try {
    (void)cm.linear_layer_ops(llama2_7b(), 16, 3, hw::DType::kFp16);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "tensor_parallel");
    EXPECT_NE(std::string(e.what()).find("32 attention heads"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)cm.linear_layer_ops(llama2_7b(), 16, 0, hw::DType::kFp16), InputError);
  EXPECT_THROW((void)cm.linear_layer_ops(llama2_7b(), 0, 1, hw::DType::kFp16), InputError);
}

TEST(LinearLayerOps, MoeLayerAddsARouterAndSplitsRowsOverExperts) {
  // Mixtral-like: 8 experts, top-2, expert ffn 14336: 1024 tokens -> 256 rows per expert.
  model::ModelSpec spec = model::ModelSpec::llama({32, 4096, 32, 8, 14336, 32000, 4096}, "moe");
  spec.ffn = 0;
  spec.moe.num_experts = 8;
  spec.moe.top_k = 2;
  spec.moe.expert_ffn = 14336;
  spec.validate();
  const ComputeModel cm(h100());
  const LayerOpTimes t = cm.linear_layer_ops(spec, 1024, 1, hw::DType::kBf16);
  EXPECT_EQ(t.get("moe_router"), cm.gemm({1024, 8, 4096, 1}, hw::DType::kBf16));
  EXPECT_EQ(t.get("mlp_up_proj"), cm.gemm({256, 2 * 14336, 4096, 8}, hw::DType::kBf16));
}

}  // namespace
}  // namespace orrery::compute
