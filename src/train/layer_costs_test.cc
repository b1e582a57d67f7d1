#include "train/layer_costs.h"

#include <array>
#include <gtest/gtest.h>

#include "io/catalog_loader.h"
#include "train/test_support.h"

namespace orrery::train {
namespace {

using testing::test_gpu;

// Every collective takes `c`.
class FixedComm final : public CommModel {
 public:
  explicit FixedComm(Time c) : c_(c) {}
  Time collective(coll::Op, Bytes, Group) const override { return c_; }
  Time p2p(Bytes) const override { return Time::zero(); }

 private:
  Time c_;
};

// The TP-overlap tests' layer: GPT, T = 2048 tokens of width h = 1024, ffn 4096, on tp = 4 with SP and
// --tp-comm-overlap (async: PyTorch's pass, else Transformer Engine's pairing), one micro-batch.
constexpr int64_t kOverlapT = 2048, kOverlapH = 1024, kOverlapF = 4096, kOverlapTp = 4;
model::ModelSpec overlap_model() { return model::ModelSpec::gpt({2, kOverlapH, 16, 16, kOverlapF, 32000, kOverlapT}); }
Plan overlap_plan(bool async) {
  Plan p;
  p.tp = kOverlapTp;
  p.sp = true;
  p.tp_comm_overlap = true;
  p.tp_overlap_async = async;
  p.mbs = 1;
  p.seq = kOverlapT;
  p.gbs = 1;
  return p;
}

// Transformer Engine's paired TP overlap (layer_costs.h) on a GPT layer, tp = 4 with SP, T = 2048
// tokens, h = 1024, f = 4h. Megatron's shards: qkv m=T n=3h/4 k=h, out m=T n=h k=h/4, up m=T n=f/4 k=h,
// down m=T n=h k=f/4; dgrad (m, k, n), wgrad (k, n, m); a ring exchange's chunk is the GEMM on T/4 rows.
// With every collective taking c:
//  c far above every GEMM (the communication bounds each pair):
//    ring (qkv, up forward; out, down dgrad): (tp-1) max(chunk, c/(tp-1)) + chunk - g = c + chunk - g
//    pipeline (out, down forward; 4 splits of g/4, transfers of c/4, each behind the last): the GEMM
//      chunks end long before the transfers, which run back to back from g/4: g/4 + c - g = c - 3g/4
//    bulk (qkv, up backward: the input's all-gather beside dgrad, the reduce-scatter beside wgrad): c - g
//  c far below every GEMM: ring: tp x chunk - g (only the chunking's cost); pipeline: c/4 + 3/4 c x
//    share; bulk: c x share (share = 16 SMs of the GPU's; a few ns here).
TEST(LayerCosts, TransformerEngineOverlapPairsEachTpCollectiveWithOneGemm) {
  const int64_t T = kOverlapT, h = kOverlapH, f = kOverlapF, tp = kOverlapTp;
  const auto model = overlap_model();
  const hw::GpuSpec gpu = test_gpu();  // the compute model keeps a reference
  const compute::ComputeModel cm(gpu);
  Plan p = overlap_plan(false);
  const hw::DType dt = p.precision;
  auto gemm = [&](double m, int64_t n, int64_t k) { return cm.gemm(compute::GemmShape{m, n, k, 1}, dt).to_seconds(); };
  struct Pair {
    double fwd, dgrad, wgrad, chunk;  // chunk: forward (column) or dgrad (row) on T/tp rows
  };
  const double t = static_cast<double>(T);
  const Pair qkv{gemm(t, 3 * h / tp, h), gemm(t, h, 3 * h / tp), gemm(h, 3 * h / tp, T), gemm(t / tp, 3 * h / tp, h)};
  const Pair up{gemm(t, f / tp, h), gemm(t, h, f / tp), gemm(h, f / tp, T), gemm(t / tp, f / tp, h)};
  const Pair out{gemm(t, h, h / tp), gemm(t, h / tp, h), gemm(h / tp, h, T), gemm(t / tp, h / tp, h)};
  const Pair down{gemm(t, h, f / tp), gemm(t, f / tp, h), gemm(f / tp, h, T), gemm(t / tp, f / tp, h)};

  {
    const double c = 1.0;  // 1 s: far above every GEMM of this layer (microseconds)
    const ModelCosts mc = model_costs(model, p, cm, FixedComm(Time::seconds(c)));
    const LayerCost& l = mc.layer[1];
    EXPECT_EQ(l.te_pairs, 4);
    const double fwd = (c + qkv.chunk - qkv.fwd) + (c + up.chunk - up.fwd) + (c - 0.75 * out.fwd) + (c - 0.75 * down.fwd);
    const double bwd = (c - qkv.dgrad) + (c - qkv.wgrad) + (c - up.dgrad) + (c - up.wgrad) +
                       (c + out.chunk - out.dgrad) + (c + down.chunk - down.dgrad);
    EXPECT_NEAR(l.tp_fwd.to_seconds(), fwd, 1e-9);
    EXPECT_NEAR(l.tp_bwd.to_seconds(), bwd, 1e-9);
  }
  {
    const double c = 1e-9;  // 1 ns: far below every GEMM
    const ModelCosts mc = model_costs(model, p, cm, FixedComm(Time::seconds(c)));
    const LayerCost& l = mc.layer[1];
    const double fwd = (tp * qkv.chunk - qkv.fwd) + (tp * up.chunk - up.fwd);  // + O(c) from the pipelines
    const double bwd = (tp * out.chunk - out.dgrad) + (tp * down.chunk - down.dgrad);
    EXPECT_NEAR(l.tp_fwd.to_seconds(), std::max(0.0, fwd), 1e-8);
    EXPECT_NEAR(l.tp_bwd.to_seconds(), std::max(0.0, bwd), 1e-8);
  }
  // Without SP (all-reduces) or without TP overlap the pairing does not apply: the older rules hold.
  p.sp = false;
  {
    const ModelCosts mc = model_costs(model, p, cm, FixedComm(Time::seconds(1.0)));
    EXPECT_EQ(mc.layer[1].te_pairs, 0);
    EXPECT_NEAR(mc.layer[1].tp_fwd.to_seconds(), 2.0 - mc.layer[1].fwd.to_seconds(), 1e-9);  // 2 all-reduces
  }
}

// PyTorch's async TP (--tp-comm-overlap async) decomposes the forward's four collectives beside their
// GEMMs and leaves the backward's exposed (layer_costs.h). Derived as the test above: with every collective
// c = 1 s (far above the GEMMs) each forward ring takes (tp - 1) transfers of c / (tp - 1) plus one chunk
// GEMM, c + chunk - GEMM beyond the GEMM; the reduce-scatters' rings (out, down: chunks of T/tp rows of
// the forward GEMM) add the sum of the tp partial outputs each rank receives, tp + 1 chunks of T/tp x h
// bf16 moved by a memory-bound kernel. The backward is the four collectives whole: 4c. With c = 1 ns the
// rings are the tp chunk GEMMs' time beyond the unchunked GEMM (at least zero) plus the same sums.
TEST(LayerCosts, AsyncTpOverlapsTheForwardsCollectivesAndExposesTheBackwards) {
  const int64_t T = kOverlapT, h = kOverlapH, f = kOverlapF, tp = kOverlapTp;
  const auto model = overlap_model();
  const hw::GpuSpec gpu = test_gpu();  // the compute model keeps a reference
  const compute::ComputeModel cm(gpu);
  Plan p = overlap_plan(true);
  const hw::DType dt = p.precision;
  auto gemm = [&](double m, int64_t n, int64_t k) { return cm.gemm(compute::GemmShape{m, n, k, 1}, dt).to_seconds(); };
  const double t = static_cast<double>(T);
  // Forward GEMM, then its chunk of T/tp rows.
  const std::array<std::pair<double, double>, 4> fwd{{{gemm(t, 3 * h / tp, h), gemm(t / tp, 3 * h / tp, h)},
                                                      {gemm(t, f / tp, h), gemm(t / tp, f / tp, h)},
                                                      {gemm(t, h, h / tp), gemm(t / tp, h, h / tp)},
                                                      {gemm(t, h, f / tp), gemm(t / tp, h, f / tp)}}};
  const double sum = cm.memory_bound(Bytes::from_double(static_cast<double>(tp + 1) * t / tp * h * 2.0)).to_seconds();
  {
    const double c = 1.0;
    const LayerCost l = model_costs(model, p, cm, FixedComm(Time::seconds(c))).layer[1];
    double expect = 2 * sum;
    for (const auto& [g, chunk] : fwd) expect += c + chunk - g;
    EXPECT_NEAR(l.tp_fwd.to_seconds(), expect, 1e-9);
    EXPECT_NEAR(l.tp_bwd.to_seconds(), 4 * c, 1e-9);
  }
  {
    const double c = 1e-9;
    const LayerCost l = model_costs(model, p, cm, FixedComm(Time::seconds(c))).layer[1];
    double expect = 2 * sum;
    for (const auto& [g, chunk] : fwd) expect += std::max(0.0, tp * chunk - g);
    EXPECT_NEAR(l.tp_fwd.to_seconds(), expect, 1e-8);
    EXPECT_NEAR(l.tp_bwd.to_seconds(), 4 * c, 1e-12);
  }
  // Without SP (two all-reduces a pass) async TP matches nothing: both passes expose them whole.
  p.sp = false;
  const LayerCost no_sp = model_costs(model, p, cm, FixedComm(Time::seconds(1.0))).layer[1];
  EXPECT_NEAR(no_sp.tp_fwd.to_seconds(), 2.0, 1e-12);
  EXPECT_NEAR(no_sp.tp_bwd.to_seconds(), 2.0, 1e-12);
  p.sp = true;
  // Without overlap both passes expose the four collectives whole (PyTorch saves the gathered input for
  // the weight gradient, so its backward, like async TP's, has four where Transformer Engine's has six).
  p.tp_comm_overlap = false;
  p.tp_overlap_async = false;
  const LayerCost none = model_costs(model, p, cm, FixedComm(Time::seconds(1.0))).layer[1];
  EXPECT_NEAR(none.tp_fwd.to_seconds(), 4.0, 1e-12);
  EXPECT_NEAR(none.tp_bwd.to_seconds(), 4.0, 1e-12);
}

// A collective's time is its bytes at 1 B/ps, so each pass's EP time shows the bytes the all-to-alls move:
// 2 per pass of tokens x copies x h x 2 B. Mixtral-like, 8 experts, top-2, ep 4, T = 1024 tokens,
// h = 1024: alltoall 2 x 1024 x 2 x 1024 x 2 B = 8,388,608 B; deepep with the uniform expectation
// 13/7 copies (plan_test.cc) 2 x 1024 x 13/7 x 2048 B = 7,789,421.7 B; deepep reaching one rank 4,194,304 B.
class BytesComm final : public CommModel {
 public:
  Time collective(coll::Op, Bytes b, Group) const override { return Time::ps(b.count()); }
  Time p2p(Bytes) const override { return Time::zero(); }
};

TEST(LayerCosts, ExpertAllToAllsMoveTheDispatchersCopies) {
  const model::ModelSpec m = testing::small_moe(2, 1024);
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  Plan p;
  p.dp = 4;
  p.ep = 4;
  p.seq = 1024;
  p.gbs = 4;
  const BytesComm comm;
  EXPECT_EQ(model_costs(m, p, cm, comm).layer[0].ep_fwd.picoseconds(), 8'388'608);
  p.moe_dispatcher = MoeDispatcher::kDeepEp;
  EXPECT_NEAR(static_cast<double>(model_costs(m, p, cm, comm).layer[0].ep_fwd.picoseconds()), 2.0 * 1024 * 13.0 / 7.0 * 2048, 1.0);
  p.moe_ranks_per_token = 1.0;
  EXPECT_EQ(model_costs(m, p, cm, comm).layer[0].ep_bwd.picoseconds(), 4'194'304);
}

// A collective's time is its bytes at 1 B/ps on a group of two or more ranks, zero on one (as
// CommModel's contract has it).
class GroupBytesComm final : public CommModel {
 public:
  explicit GroupBytesComm(const Plan& p) : p_(p) {}
  Time collective(coll::Op, Bytes b, Group g) const override { return Time::ps(group_size(p_, g) > 1 ? b.count() : 0); }
  Time p2p(Bytes) const override { return Time::zero(); }

 private:
  const Plan& p_;
};

// Expert tensor parallelism (Plan::etp) on the Mixtral-like layer (8 experts of f = 4096, top-2, h =
// 1024), tp 4 with SP, ep 2, T = 1024 tokens (layer input T h 2 B = 2,097,152 B):
// - a rank holds the routed experts over etp x ep: E_r / 8 at etp 4, E_r / 2 at etp 1;
// - its expert FLOPs do not change: (E / ep) experts x (rows m ep etp / tp) x (f / etp) columns;
// - the TP time: the attention half gathers and scatters the layer input over the 4 TP ranks, the MoE
//   half etp / tp of it over the etp ranks: etp 4: 2 x (2 + 2) x 2,097,152 / 2 = 8,388,608 ps; etp 2:
//   4,194,304 + 2 x 1,048,576 = 6,291,456; etp 1: 4,194,304 (nothing to gather over one rank);
// - the all-to-alls move each rank's own tokens either way: 2 x (T / tp) x 2 copies x h x 2 B;
// - the experts' up GEMM saves its input as gathered over the etp ranks: etp / tp of the 2 T routed rows
//   at full width, 2 T h 2 B x etp / 4 = 4 MiB x etp / 4 (the rest of the layer saves the same).
TEST(LayerCosts, ExpertTensorParallelismSplitsTheExpertsOverEtpRanks) {
  const model::ModelSpec m = testing::small_moe(2, 1024);
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  Plan p;
  p.tp = 4;
  p.sp = true;
  p.dp = 2;
  p.ep = 2;
  p.seq = 1024;
  p.gbs = 2;
  const GroupBytesComm comm(p);
  const int64_t routed = m.layer_params(0).routed_experts;
  const ModelCosts full = model_costs(m, p, cm, comm);
  EXPECT_EQ(full.layer[0].expert_params, routed / 8);
  EXPECT_EQ(full.layer[0].tp_fwd.picoseconds(), 8'388'608);
  for (const auto& [etp, tp_ps] : {std::pair<int64_t, int64_t>{2, 6'291'456}, {1, 4'194'304}}) {
    p.etp = etp;
    const ModelCosts c = model_costs(m, p, cm, comm);
    EXPECT_EQ(c.layer[0].expert_params, routed / (etp * 2)) << "etp " << etp;
    EXPECT_EQ(c.layer[0].tp_fwd.picoseconds(), tp_ps) << "etp " << etp;
    EXPECT_NEAR(c.layer[0].fwd_flops.count(), full.layer[0].fwd_flops.count(), 1e-9 * full.layer[0].fwd_flops.count())
        << "etp " << etp;
    EXPECT_EQ(c.layer[0].ep_fwd, full.layer[0].ep_fwd) << "etp " << etp;
    EXPECT_EQ(c.layer[0].ep_fwd.picoseconds(), 2 * 1024 / 4 * 2 * 1024 * 2);
    EXPECT_EQ((full.layer[0].act_none - c.layer[0].act_none).count(), 2 * 1024 * 1024 * 2 * (4 - etp) / 4) << "etp " << etp;
  }
}

// A catalog GPU (the fp8 tests need its fp8 peak, SM count and architecture's calibration).
const hw::GpuSpec& catalog_gpu(const std::string& name) {
  static const io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  return catalog.hw.get_gpu(name, {});
}
const hw::GpuSpec& catalog_h100() { return catalog_gpu("h100-sxm"); }

// Two Megatron kernel costs on a GPT layer (h = 1024, 16 heads of 64, f = 4h, T = 2,048 tokens, tp 2
// with SP) on an H100:
//  * gradient-accumulation fusion: each of the four weight-gradient GEMMs adds into the fp32 main
//    gradient, 0.65 x 6 B per output element at 3.35 TB/s (compute_model.cc). Their outputs are the
//    rank's weights, 12 h^2 / tp = 6 h^2: +0.65 x 6 x 6,291,456 / 3.35e12 = 7.32 us of wgrad, and
//    nothing with 2-byte main gradients (the GEMM adds into bf16 as it would write it);
//  * attention dropout (Megatron's 0.1) inside the fused kernel: 8 heads x 2,048 x 2,049 / 2 pairs per
//    pass, at 5.82e11 pairs/s forward (+28.8 us) and 1.30e12 backward (+12.9 us); the full and
//    selective recomputes run that forward again. (Unfused attention, --flash-attention no, moves its
//    dropout mask through memory instead: model/op_inventory.cc.)
TEST(LayerCosts, MegatronsFp32GradientAccumulationAndAttentionDropoutCostTheirMeasuredRates) {
  const int64_t h = 1024, T = 2048;
  model::ModelSpec with_dropout = model::ModelSpec::gpt({2, h, 16, 16, 4 * h, 32000, T});
  ASSERT_EQ(with_dropout.dropout.attention, 0.1);  // Megatron-LM's default (model_spec.cc)
  model::ModelSpec no_dropout = with_dropout;
  no_dropout.dropout.attention = 0.0;
  const compute::ComputeModel cm(catalog_h100());
  Plan p;
  p.tp = 2;
  p.sp = true;
  p.seq = T;
  p.gbs = 1;
  const FixedComm comm(Time::zero());
  const ModelCosts base = model_costs(no_dropout, p, cm, comm);
  Plan fused = p;
  fused.grad_accum_fusion = true;
  const ModelCosts acc = model_costs(no_dropout, fused, cm, comm);
  EXPECT_NEAR((acc.layer[0].bwd_weight - base.layer[0].bwd_weight).to_us(), 0.65 * 6.0 * 6.0 * h * h / 3.35e12 * 1e6, 1e-3);
  EXPECT_EQ(acc.layer[0].fwd, base.layer[0].fwd);
  EXPECT_EQ(acc.layer[0].bwd_input, base.layer[0].bwd_input);
  fused.grad_bytes = 2;
  EXPECT_EQ(model_costs(no_dropout, fused, cm, comm).layer[0].bwd_weight, base.layer[0].bwd_weight);

  const ModelCosts drop = model_costs(with_dropout, p, cm, comm);
  const double pairs = 8.0 * 2048.0 * 2049.0 / 2.0;
  // Only the attention core changes: with fused attention the inventory's ops are the same either way.
  EXPECT_NEAR((drop.layer[0].fwd - base.layer[0].fwd).to_us(), pairs / 5.82e11 * 1e6, 1e-3);
  EXPECT_NEAR((drop.layer[0].recompute_full - base.layer[0].recompute_full).to_us(), pairs / 5.82e11 * 1e6, 1e-3);
  EXPECT_NEAR((drop.layer[0].recompute_selective - base.layer[0].recompute_selective).to_us(), pairs / 5.82e11 * 1e6, 1e-3);
  EXPECT_NEAR((drop.layer[0].bwd_input - base.layer[0].bwd_input).to_us(), pairs / 1.30e12 * 1e6, 1e-3);
  EXPECT_EQ(drop.layer[0].bwd_weight, base.layer[0].bwd_weight);
}

// fp8 as Megatron-Core runs it with Transformer Engine (layer_costs.cc, te_module_gemm and fp8_casts):
// on a Llama layer (tp 1, T = 2048 tokens, h = 1024, 8 heads of 128 = 8 kv heads, f = 4096 gated) with
// m = 4 micro-batches, the fp8 layer differs from the bf16 one only in its four GEMMs and their casts:
//   GEMMs (fwd m x n x k; dgrad m x k x n; wgrad k x n x m): qkv T x 3h x h, out T x h x h,
//     up_gate T x 2f x h, down T x h x f, each in fp8 instead of bf16;
//   forward casts (one memory-bound kernel per GEMM): qkv 2 T h, out 4 T h, up_gate 2 T h, down 4 T f
//     bytes (inputs after TELayerNormColumnParallelLinear's norm are written in fp8 by the norm: a
//     transpose of 1 + 1 B; the attention output and Megatron's SwiGLU output need a cast-transpose,
//     2 + 1 + 1 B), plus each weight's cast-transpose 4 k n B over the m micro-batches;
//   backward casts: dY of qkv 4 T 3h, out 4 T h, up_gate 4 T 2f, down 4 T h (every dY arrives in bf16);
// and the attention core, the norms and the LM head and loss are the bf16 ones (TE's default recipe
// keeps the core in bf16; Megatron's output layer is not a TE module). With fp8 attention on, the
// forward grows by the core's fp8 time less its bf16 time.
TEST(LayerCosts, Fp8RunsTransformerEngineGemmsInFp8WithTheirCasts) {
  const compute::ComputeModel cm(catalog_h100());
  const int64_t T = 2048, h = 1024, f = 4096, m = 4;
  const auto model = model::ModelSpec::llama({2, h, 8, 8, f, 32000, T});
  Plan bf;
  bf.seq = T;
  bf.gbs = m;
  Plan f8 = bf;
  f8.precision = hw::DType::kFp8;
  const FixedComm comm(Time::zero());
  const ModelCosts a = model_costs(model, bf, cm, comm);
  const ModelCosts b = model_costs(model, f8, cm, comm);
  struct G {
    double m;
    int64_t n, k;
  };
  const double t = static_cast<double>(T);
  const G gemms[] = {{t, 3 * h, h}, {t, h, h}, {t, 2 * f, h}, {t, h, f}};
  const double fwd_cast[] = {2.0 * t * h, 4.0 * t * h, 2.0 * t * h, 4.0 * t * f};
  const double bwd_cast[] = {4.0 * t * 3 * h, 4.0 * t * h, 4.0 * t * 2 * f, 4.0 * t * h};
  double dfwd = 0.0, dbwd = 0.0, dw = 0.0;
  for (size_t i = 0; i < 4; ++i) {
    const G& g = gemms[i];
    auto both = [&](compute::GemmShape s) {
      return cm.gemm(s, hw::DType::kFp8).to_seconds() - cm.gemm(s, hw::DType::kBf16).to_seconds();
    };
    dfwd += both({g.m, g.n, g.k, 1}) +
            cm.memory_bound(Bytes::from_double(fwd_cast[i] + 4.0 * static_cast<double>(g.k * g.n) / m)).to_seconds();
    dbwd += both({g.m, g.k, g.n, 1}) + (bwd_cast[i] > 0.0 ? cm.memory_bound(Bytes::from_double(bwd_cast[i])).to_seconds() : 0.0);
    dw += both({static_cast<double>(g.k), g.n, static_cast<int64_t>(g.m), 1});
  }
  const LayerCost& la = a.layer[0];
  const LayerCost& lb = b.layer[0];
  const double tol = 1e-11;  // a few ps of rounding over the sums
  EXPECT_NEAR(lb.fwd.to_seconds() - la.fwd.to_seconds(), dfwd, tol);
  EXPECT_NEAR(lb.bwd_input.to_seconds() - la.bwd_input.to_seconds(), dbwd, tol);
  EXPECT_NEAR(lb.bwd_weight.to_seconds() - la.bwd_weight.to_seconds(), dw, tol);
  EXPECT_LT(dfwd, 0.0);  // fp8 pays for its casts and still wins on GEMMs this size
  EXPECT_EQ(b.post.fwd, a.post.fwd);
  EXPECT_EQ(b.post.bwd_input, a.post.bwd_input);
  EXPECT_EQ(b.post.bwd_weight, a.post.bwd_weight);

  f8.fp8_attention = true;
  const ModelCosts c = model_costs(model, f8, cm, comm);
  compute::AttentionHeads heads;
  heads.heads = 8;
  heads.kv_heads = 8;
  heads.head_dim_qk = 128;
  heads.head_dim_v = 128;
  heads.causal = true;
  const std::vector<compute::AttentionSeq> seqs = {compute::AttentionSeq{T, T}};
  const double dcore = cm.attention(seqs, heads, hw::DType::kFp8, compute::Pass::kForward).to_seconds() -
                       cm.attention(seqs, heads, hw::DType::kBf16, compute::Pass::kForward).to_seconds();
  EXPECT_LT(dcore, 0.0);
  EXPECT_NEAR(c.layer[0].fwd.to_seconds() - lb.fwd.to_seconds(), dcore, tol);
}

// The fp8 recipes' quantization kernels (layer_costs.cc, quantize_bytes), on the Llama layer above (tp 1,
// T = 2048, h = 1024, f = 4096 gated, m = 4 micro-batches), per GEMM: input X (qkv T h after the norm,
// out T h from the attention, up_gate T h after the norm, down T f after the activation), output
// gradient dY (T 3h, T h, T 2f, T h) and weights W (h 3h, h h, h 2f, f h) over the m micro-batches. Bytes
// per element (fused: qkv's and up_gate's X, written by TELayerNormColumnParallelLinear's norm; out's X
// and down's X, the attention and Megatron SwiGLU outputs, and every dY come in bf16):
//   Hopper, delayed:  X 2 fused / 4; dY 4; W 4
//   Hopper, current:  X 4 fused (the norm computes the amax) / 6 (an amax read of 2 before the 4 of
//                     cast-transpose); dY and W 6
//   B200, delayed:    X 0 fused / 3; dY 3; W 3 (no transpose on Blackwell)
//   B200, MXFP8:      X, dY and W 4 + 1/16 (row- and column-wise copies with a 1-byte scale per 32
//                     elements each; TE does not fuse the norm with MXFP8 by default)
// The layer's forward and input-gradient times differ from bf16's by the GEMMs (fp8 against bf16, as
// Fp8RunsTransformerEngineGemmsInFp8WithTheirCasts composes them) plus these kernels, each one
// memory-bound kernel per GEMM and pass. With sequence parallelism (tp 2) current scaling adds one amax
// all-reduce per gathered tensor: qkv's and up_gate's X forward, out's and down's dY backward.
TEST(LayerCosts, Fp8RecipesQuantizeAsTransformerEngineDoes) {
  const int64_t T = 2048, h = 1024, f = 4096, m = 4;
  const auto model = model::ModelSpec::llama({2, h, 8, 8, f, 32000, T});
  const double t = static_cast<double>(T);
  struct G {
    double m;
    int64_t n, k;
    bool fused_x;
  };
  const G gemms[] = {{t, 3 * h, h, true}, {t, h, h, false}, {t, 2 * f, h, true}, {t, h, f, false}};
  struct Rate {
    double x_fused, x, dy, w;
  };
  auto check = [&](const hw::GpuSpec& gpu, Fp8Recipe recipe, Rate r) {
    const compute::ComputeModel cm(gpu);
    Plan bf;
    bf.seq = T;
    bf.gbs = m;
    Plan f8 = bf;
    f8.precision = hw::DType::kFp8;
    f8.fp8_recipe = recipe;
    const FixedComm comm(Time::zero());
    const LayerCost a = model_costs(model, bf, cm, comm).layer[0];
    const LayerCost b = model_costs(model, f8, cm, comm).layer[0];
    double dfwd = 0.0, dbwd = 0.0;
    for (const G& g : gemms) {
      auto both = [&](compute::GemmShape sh) {
        return cm.gemm(sh, hw::DType::kFp8).to_seconds() - cm.gemm(sh, hw::DType::kBf16).to_seconds();
      };
      const double x = g.m * static_cast<double>(g.k), dy = g.m * static_cast<double>(g.n);
      const double w = static_cast<double>(g.k * g.n);
      const double fwd_bytes = (g.fused_x ? r.x_fused : r.x) * x + r.w * w / m;
      const double bwd_bytes = r.dy * dy;
      dfwd += both({g.m, g.n, g.k, 1}) + cm.memory_bound(Bytes::from_double(fwd_bytes)).to_seconds();
      dbwd += both({g.m, g.k, g.n, 1}) + (bwd_bytes > 0.0 ? cm.memory_bound(Bytes::from_double(bwd_bytes)).to_seconds() : 0.0);
    }
    EXPECT_NEAR(b.fwd.to_seconds() - a.fwd.to_seconds(), dfwd, 1e-11) << gpu.name << " " << fp8_recipe_name(recipe);
    EXPECT_NEAR(b.bwd_input.to_seconds() - a.bwd_input.to_seconds(), dbwd, 1e-11) << gpu.name << " " << fp8_recipe_name(recipe);
  };
  const hw::GpuSpec& h100 = catalog_h100();
  const hw::GpuSpec& b200 = catalog_gpu("b200");
  const double mx = 1.0 / 16.0;
  check(h100, Fp8Recipe::kDelayed, {2.0, 4.0, 4.0, 4.0});
  check(h100, Fp8Recipe::kCurrent, {4.0, 6.0, 6.0, 6.0});
  check(b200, Fp8Recipe::kDelayed, {0.0, 3.0, 3.0, 3.0});
  check(b200, Fp8Recipe::kMxfp8, {4.0 + mx, 4.0 + mx, 4.0 + mx, 4.0 + mx});

  // Current scaling's amax all-reduces under SP: with every collective at c, one c per gathered tensor.
  const compute::ComputeModel cm(h100);
  Plan sp;
  sp.tp = 2;
  sp.sp = true;
  sp.seq = T;
  sp.gbs = m;
  sp.precision = hw::DType::kFp8;
  sp.fp8_recipe = Fp8Recipe::kCurrent;
  const Time c = Time::us(7);
  const LayerCost quiet = model_costs(model, sp, cm, FixedComm(Time::zero())).layer[0];
  const LayerCost slow = model_costs(model, sp, cm, FixedComm(c)).layer[0];
  EXPECT_EQ((slow.fwd - quiet.fwd).picoseconds(), (c * 2).picoseconds());
  EXPECT_EQ((slow.bwd_input - quiet.bwd_input).picoseconds(), (c * 2).picoseconds());
  sp.fp8_recipe = Fp8Recipe::kDelayed;  // no amax exchange: the history gives the scale
  EXPECT_EQ(model_costs(model, sp, cm, FixedComm(c)).layer[0].fwd, model_costs(model, sp, cm, FixedComm(Time::zero())).layer[0].fwd);
}

// The activations fp8 keeps for backward (layer_costs.cc, add_fp8_saved_input), on the Llama layer
// above (tp 1, T = 2048 tokens, h = 1024 = 8 heads of 128 with 8 kv heads, f = 4096 gated). A TE
// module keeps its GEMM input in fp8 (1 B) where bf16 keeps it in bf16 (2 B): qkv's input (the norm's
// output, T h), up_gate's (T h) and down's (the activation's output, T f) each save T x width bytes.
// The attention output O (T h) is out's input and the fused core's saved output: bf16 counts it once
// (2 T h); fp8 keeps the core's bf16 O and out's fp8 copy (3 T h), one T h more. Per micro-batch:
//   no recompute:        fp8 - bf16 = -T h - T h - T f + T h = -T (h + f)
//   selective recompute: the checkpointed core keeps no O, so O is out's fp8 copy alone:
//                        fp8 - bf16 = -T h (qkv) - T h (out) - T h (up_gate) - T f (down) = -T (3h + f)
//   op-level SAC: it keeps matmul and attention outputs, bf16 in both: no change.
// TE's FP8 DPA (fp8 attention) keeps the core's Q, K, V (3 T h) and O (T h) in fp8: 4 T h fewer than
// fp8 with the bf16 core; under selective recompute its checkpoint keeps the bf16 Q, K, V as before.
TEST(LayerCosts, Fp8KeepsTransformerEnginesFp8GemmInputsForBackward) {
  const compute::ComputeModel cm(catalog_h100());
  const int64_t T = 2048, h = 1024, f = 4096;
  const auto model = model::ModelSpec::llama({2, h, 8, 8, f, 32000, T});
  Plan bf;
  bf.seq = T;
  bf.gbs = 4;
  Plan f8 = bf;
  f8.precision = hw::DType::kFp8;
  Plan dpa = f8;
  dpa.fp8_attention = true;
  const FixedComm comm(Time::zero());
  const LayerCost a = model_costs(model, bf, cm, comm).layer[0];
  const LayerCost b = model_costs(model, f8, cm, comm).layer[0];
  const LayerCost c = model_costs(model, dpa, cm, comm).layer[0];
  EXPECT_EQ(b.act_none.count() - a.act_none.count(), -T * (h + f));
  EXPECT_EQ(b.act_selective.count() - a.act_selective.count(), -T * (3 * h + f));
  EXPECT_EQ(b.act_op, a.act_op);
  EXPECT_EQ(c.act_none.count() - b.act_none.count(), -4 * T * h);
  EXPECT_EQ(c.act_selective, b.act_selective);
}

// Every collective takes 1 us per byte: far above this layer's GEMMs (microseconds in all).
class SlowBytesComm final : public CommModel {
 public:
  Time collective(coll::Op, Bytes b, Group) const override { return Time::us(b.count()); }
  Time p2p(Bytes) const override { return Time::zero(); }
};

// fp8 with Transformer Engine's paired TP overlap (tp 4, SP): the all-gathers move the quantized operand
// (1 B: the column GEMMs' input forward and for wgrad, the row GEMMs' dY for dgrad), the
// reduce-scatters the GEMMs' bf16 output (2 B). With collectives far above the GEMMs each pair costs its
// collective less GEMM time (TransformerEngineOverlapPairsEachTpCollectiveWithOneGemm), so on T tokens
// of width h (every buffer is T x h: the qkv and up inputs, the out and down outputs):
//   forward: qkv, up ring all-gathers + out, down pipeline reduce-scatters = (1 + 1 + 2 + 2) T h us
//   backward: qkv, up bulk all-gather and reduce-scatter (1 + 2 each) + out, down ring all-gathers of
//     dY (1 each) = 8 T h us;
// in bf16 8 and 12 T h us. The GEMMs' microseconds are within the 1 ms tolerance.
TEST(LayerCosts, Fp8TpOverlapGathersFp8AndReducesBf16) {
  const compute::ComputeModel cm(catalog_h100());
  const int64_t T = 256, h = 256, tp = 4;
  const auto model = model::ModelSpec::gpt({2, h, 8, 8, 4 * h, 1000, T});
  Plan p;
  p.tp = tp;
  p.sp = true;
  p.tp_comm_overlap = true;
  p.seq = T;
  p.gbs = 1;
  const SlowBytesComm comm;
  const double th = static_cast<double>(T * h) * 1e-6;  // seconds per byte of every buffer
  const LayerCost bf = model_costs(model, p, cm, comm).layer[0];
  EXPECT_NEAR(bf.tp_fwd.to_seconds(), 8 * th, 1e-3);
  EXPECT_NEAR(bf.tp_bwd.to_seconds(), 12 * th, 1e-3);
  p.precision = hw::DType::kFp8;
  const LayerCost f8 = model_costs(model, p, cm, comm).layer[0];
  EXPECT_NEAR(f8.tp_fwd.to_seconds(), 6 * th, 1e-3);
  EXPECT_NEAR(f8.tp_bwd.to_seconds(), 8 * th, 1e-3);
}

// Selective recompute by module (Plan::recompute_modules) on DeepSeek-V3 (MLA, 3 dense layers, then MoE
// layers with a shared expert), tp 1, ep 1, one 1,024-token sequence, bf16 (2 B), T = 1,024 tokens; the
// bytes each module's checkpoint drops, from the model's dimensions:
//   mla_up_proj     the core's Q, K, V: T a (2 (dn + dr) + dv) x 2 B (RoPE saves nothing fused); it re-runs
//                   the two up projections (2 T (q_lora a (dn + dr) + kv_lora a (dn + dv)) FLOPs) and RoPE
//   moe_act         the routed experts' down-projection input: T k f_e x 2 B (dropless, balanced)
//   shared_experts  the shared expert's activation input and down input: T (2 f_s + f_s) x 2 B (its up
//                   projection's input is the router's), 2 T (h 2 f_s + f_s h) FLOPs
//   layernorm       MLA's input-norm output (saved by the query down projection) and, in an MoE layer, the
//                   pre-MLP norm's (saved by the router): 2 T h x 2 B; in a dense layer only the first
//   mlp             a dense layer's MLP: the up projection's input, the activation's input, the down
//                   projection's input: T (h + 2 f + f) x 2 B, 2 T (h 2 f + f h) FLOPs
// Modules add up (their drops are disjoint), and the default set is the attention core alone.
TEST(LayerCosts, SelectiveRecomputeModulesDropWhatTheirCheckpointsDoNotKeep) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  static const io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  const model::ModelSpec m = catalog.model("deepseek-v3", {});
  ASSERT_EQ(m.attention, model::AttentionKind::kMla);
  ASSERT_FALSE(m.is_moe_layer(0));
  ASSERT_TRUE(m.is_moe_layer(5));
  const compute::ComputeModel cm(catalog_h100());
  const FixedComm comm(Time::zero());
  Plan p;
  p.seq = 1024;
  p.gbs = 1;
  p.recompute = Recompute::kSelective;
  const double T = 1024.0, h = d(m.hidden), a = d(m.heads);
  const model::MlaDims& mla = m.mla;
  const double dn = d(mla.qk_nope_head_dim), dr = d(mla.qk_rope_head_dim), dv = d(mla.v_head_dim);
  const auto costs = [&](uint32_t modules) {
    p.recompute_modules = modules;
    return model_costs(m, p, cm, comm);
  };
  const auto bit = [](RecomputeModule x) { return module_bit(x); };
  const ModelCosts core = costs(bit(RecomputeModule::kCoreAttn));
  const auto dropped = [&](const ModelCosts& c, size_t layer) {
    return (c.layer[layer].act_none - c.layer[layer].act_selective).to_double();
  };
  const double core_dense = dropped(core, 0), core_moe = dropped(core, 5);

  const ModelCosts up = costs(bit(RecomputeModule::kMlaUpProj));
  EXPECT_DOUBLE_EQ(dropped(up, 5), T * a * (2.0 * (dn + dr) + dv) * 2.0);
  EXPECT_DOUBLE_EQ(up.layer[5].selective_flops.count(),
                   2.0 * T * (d(mla.q_lora_rank) * a * (dn + dr) + d(mla.kv_lora_rank) * a * (dn + dv)));
  EXPECT_GT(up.layer[5].recompute_selective, Time::zero());
  EXPECT_LT(up.layer[5].recompute_selective, up.layer[5].fwd);

  const ModelCosts act = costs(bit(RecomputeModule::kMoeAct));
  EXPECT_DOUBLE_EQ(dropped(act, 5), T * d(m.moe.top_k) * d(m.moe.expert_ffn) * 2.0);
  EXPECT_DOUBLE_EQ(dropped(act, 0), 0.0);  // a dense layer has no experts
  EXPECT_EQ(act.layer[5].selective_flops.count(), 0.0);

  const double fs = d(m.moe.shared_expert_ffn * m.moe.num_shared_experts);
  const ModelCosts shared = costs(bit(RecomputeModule::kSharedExperts));
  EXPECT_DOUBLE_EQ(dropped(shared, 5), T * 3.0 * fs * 2.0);
  EXPECT_DOUBLE_EQ(shared.layer[5].selective_flops.count(), 2.0 * T * (h * 2.0 * fs + fs * h));

  const ModelCosts norm = costs(bit(RecomputeModule::kLayernorm));
  EXPECT_DOUBLE_EQ(dropped(norm, 5), 2.0 * T * h * 2.0);
  EXPECT_DOUBLE_EQ(dropped(norm, 0), T * h * 2.0);

  const double f = d(m.ffn);
  const ModelCosts mlp = costs(bit(RecomputeModule::kMlp));
  EXPECT_DOUBLE_EQ(dropped(mlp, 0), T * (h + 2.0 * f + f) * 2.0);
  EXPECT_DOUBLE_EQ(dropped(mlp, 5), 0.0);  // an MoE layer has no dense MLP
  EXPECT_DOUBLE_EQ(mlp.layer[0].selective_flops.count(), 2.0 * T * (h * 2.0 * f + f * h));

  const uint32_t all = bit(RecomputeModule::kCoreAttn) | bit(RecomputeModule::kMlaUpProj) | bit(RecomputeModule::kMoeAct) |
                       bit(RecomputeModule::kSharedExperts) | bit(RecomputeModule::kLayernorm) | bit(RecomputeModule::kMlp);
  const ModelCosts every = costs(all);
  EXPECT_NEAR(dropped(every, 5), core_moe + dropped(up, 5) + dropped(act, 5) + dropped(shared, 5) + dropped(norm, 5), 1.0);
  EXPECT_NEAR(dropped(every, 0), core_dense + dropped(up, 0) + dropped(norm, 0) + dropped(mlp, 0), 1.0);
  EXPECT_NEAR(every.layer[5].recompute_selective.to_seconds(),
              (core.layer[5].recompute_selective + up.layer[5].recompute_selective + act.layer[5].recompute_selective +
               shared.layer[5].recompute_selective + norm.layer[5].recompute_selective)
                  .to_seconds(),
              1e-12);
  // The attention core's own time, which context parallelism's ring hides behind, is the same whatever
  // the modules (cp 1 here: compare the module's booking).
  EXPECT_EQ(every.layer[5].module_recompute[static_cast<size_t>(RecomputeModule::kCoreAttn)],
            core.layer[5].recompute_selective);
}


// Context parallelism's three exchanges (Plan::cp_comm) on a Llama layer, h = 1024, 8 query and 4
// key/value heads of 128, cp 2, tp 1, mbs 1, seq 1024: 512 local tokens, bf16. With an all-gather
// taking its bytes in ps, a reduce-scatter twice that, an all-to-all three times:
//   K, V of the whole sequence: 512 x (512 + 512) x 2 B x cp = 2,097,152 B;
//   all_gather: forward the gather, 2,097,152 ps; backward the gather again and the reduce-scatter of
//     dK, dV, 2,097,152 + 4,194,304 = 6,291,456 ps; its buffer the gathered K, V, 2,097,152 B;
//   a2a: Q, K, V 512 x (1024 + 512 + 512) x 2 B = 2,097,152 B and the output 512 x 1024 x 2 B =
//     1,048,576 B, each all-to-all, 3 x 3,145,728 = 9,437,184 ps both ways; its buffer Q, K, V;
//   p2p: the ring's gather hidden behind the attention kernels, never more than all_gather's.
// a2a needs the heads per TP rank to divide by cp: 4 key/value heads do not split over cp 8.
class OpBytesComm final : public CommModel {
 public:
  Time collective(coll::Op op, Bytes b, Group) const override {
    const int64_t k = op == coll::Op::kAllGather ? 1 : op == coll::Op::kReduceScatter ? 2 : op == coll::Op::kAllToAll ? 3 : 0;
    return Time::ps(k * b.count());
  }
  Time p2p(Bytes) const override { return Time::zero(); }
};

TEST(LayerCosts, ContextParallelExchangesFollowTheirCommType) {
  const model::ModelSpec m = model::ModelSpec::llama({2, 1024, 8, 4, 4096, 32000, 1024});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  Plan p;
  p.cp = 2;
  p.seq = 1024;
  p.gbs = 1;
  const OpBytesComm comm;
  p.cp_comm = CpComm::kAllGather;
  const ModelCosts ag = model_costs(m, p, cm, comm);
  EXPECT_EQ(ag.layer[0].cp_fwd.picoseconds(), 2'097'152);
  EXPECT_EQ(ag.layer[0].cp_bwd.picoseconds(), 6'291'456);
  EXPECT_EQ(ag.cp_buffer.count(), 2'097'152);
  p.cp_comm = CpComm::kA2a;
  const ModelCosts a2a = model_costs(m, p, cm, comm);
  EXPECT_EQ(a2a.layer[0].cp_fwd.picoseconds(), 9'437'184);
  EXPECT_EQ(a2a.layer[0].cp_bwd.picoseconds(), 9'437'184);
  EXPECT_EQ(a2a.cp_buffer.count(), 2'097'152);
  p.cp_comm = CpComm::kP2p;
  const ModelCosts ring = model_costs(m, p, cm, comm);
  EXPECT_LE(ring.layer[0].cp_fwd, ag.layer[0].cp_fwd);
  EXPECT_LE(ring.layer[0].cp_bwd, ag.layer[0].cp_bwd);
  EXPECT_EQ(ring.cp_buffer.count(), 0);
  // The attention kernels are the same work whichever way the operands move.
  EXPECT_EQ(ring.layer[0].fwd, a2a.layer[0].fwd);
  EXPECT_EQ(ring.layer[0].fwd, ag.layer[0].fwd);
  p.cp_comm = CpComm::kA2a;
  EXPECT_TRUE(validate_plan(m, p, 2, gpu).empty());
  p.cp = 8;
  p.dp = 1;
  p.seq = 1024;
  const auto e = validate_plan(m, p, 8, gpu);
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front().key, "cp_heads") << e.front().message;
  p.cp_comm = CpComm::kAllGather;
  EXPECT_TRUE(validate_plan(m, p, 8, gpu).empty());
}

// Hierarchical CP (a2a+p2p) on the same layer at cp 4 in a2a groups of 2: the all-to-alls run over the
// a2a group (Group::kCpA2a, 2 ranks tp apart) with a2a's bytes, then the ring over the cp / 2 = 2 groups
// (Group::kCpRing, tp x 2 apart) passes each rank's K, V (kv_step, 512 x 1024 x 2 B at cp 4 = 256
// local tokens: 524,288 B) around, exposed beyond the attention core: here every collective on the
// ring's group takes 1 s, far above the core, so the ring adds 1 s - core forward and 2 s - core backward.
// Group sizes and strides: kCpA2a 2 ranks 1 apart (tp 1), kCpRing 2 ranks 2 apart; 1 rank each otherwise.
class RingHeavyComm final : public CommModel {
 public:
  Time collective(coll::Op op, Bytes b, Group g) const override {
    if (g == Group::kCpRing) return Time::seconds(1.0);
    return Time::ps((op == coll::Op::kAllToAll ? 3 : 1) * b.count());
  }
  Time p2p(Bytes) const override { return Time::zero(); }
};

TEST(LayerCosts, HierarchicalCpRunsItsA2aInsideGroupsAndItsRingAcross) {
  const model::ModelSpec m = model::ModelSpec::llama({2, 1024, 8, 4, 4096, 32000, 1024});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  Plan p;
  p.cp = 4;
  p.seq = 1024;
  p.gbs = 1;
  p.cp_comm = CpComm::kA2aP2p;
  p.cp_a2a = 2;
  EXPECT_EQ(group_size(p, Group::kCpA2a), 2);
  EXPECT_EQ(group_stride(p, Group::kCpA2a), 1);
  EXPECT_EQ(group_size(p, Group::kCpRing), 2);
  EXPECT_EQ(group_stride(p, Group::kCpRing), 2);
  EXPECT_TRUE(validate_plan(m, p, 4, gpu).empty());
  using testing::has_key;
  const RingHeavyComm comm;
  const ModelCosts c = model_costs(m, p, cm, comm);
  const LayerCost& l = c.layer[0];
  // a2a part: Q, K, V 256 x (1024 + 512 + 512) x 2 B and the output 256 x 1024 x 2 B, 3 ps per byte.
  const Time a2a = Time::ps(3 * (256 * 2048 * 2 + 256 * 1024 * 2));
  const Time core_fwd = l.module_recompute[static_cast<size_t>(RecomputeModule::kCoreAttn)];
  EXPECT_EQ(l.cp_fwd, a2a + Time::seconds(1.0) - core_fwd);
  EXPECT_EQ(l.cp_bwd, a2a + Time::seconds(2.0) - l.attn_core_bwd);
  // Without hierarchical CP both levels have one rank; sizes need a2a+p2p and must divide cp; the heads
  // per TP rank must split over the a2a group (4 key/value heads: not over 8 at cp 8).
  Plan q;
  EXPECT_EQ(group_size(q, Group::kCpA2a), 1);
  EXPECT_EQ(group_size(q, Group::kCpRing), 1);
  p.cp_a2a = 3;
  EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "cp_heads"));
  p.cp_a2a = 2;
  p.cp_comm = CpComm::kP2p;
  EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "cp_heads"));
  p.cp_comm = CpComm::kA2aP2p;
  p.cp = 8;
  p.cp_a2a = 8;
  EXPECT_TRUE(has_key(validate_plan(m, p, 8, gpu), "cp_heads"));
  // machine_cp_a2a: the most CP ranks, tp apart, in an 8-GPU domain: tp 2, cp 8 -> 4; tp 8 -> 1.
  p.tp = 2;
  EXPECT_EQ(machine_cp_a2a(p, 8), 4);
  p.tp = 8;
  EXPECT_EQ(machine_cp_a2a(p, 8), 1);
}

}  // namespace
}  // namespace orrery::train
