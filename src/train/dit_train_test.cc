// Training a video diffusion transformer (Wan2.1-T2V-14B at 81 x 720 x 1280) on 64 H100: the attention
// costs follow the ops' own masks (no causal mask, cross-attention over the text), and the memory of
// a plan that fits and one that does not, against hand derivations.
#include <gtest/gtest.h>

#include <vector>

#include "io/catalog_loader.h"
#include "train/layer_costs.h"
#include "train/train.h"

namespace orrery::train {
namespace {

struct Wan14b {
  io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  model::ModelSpec model = catalog.model("wan2.1-t2v-14b", {});
  const hw::GpuSpec& gpu = catalog.hw.get_gpu("h100-sxm", {});
  ClusterSpec cluster = ClusterSpec::from_catalog(gpu, catalog.hw.find_node("dgx-h100"));
  compute::ComputeModel cm{gpu};

  // 64 GPUs: tp x cp x dp = 64, FSDP over dp, SP, one 75,600-token sample per micro-batch.
  Plan plan(int64_t tp, int64_t cp, Recompute recompute) const {
    Plan p;
    p.tp = tp;
    p.cp = cp;
    p.dp = 64 / (tp * cp);
    p.sp = true;
    p.seq = model.dit.tokens();
    p.mbs = 1;
    p.gbs = 64;
    p.sharding = Sharding::kZero3;
    p.recompute = recompute;
    return p;
  }
};

TEST(DitTraining, AttentionIsUnmaskedOverTheWholeVideoAndTheText) {
  // Per rank and block, with s = 75,600 video tokens split over cp = 4 (s/cp = 18,900 queries) and the
  // heads over tp = 2: self-attention without a mask sees all s keys (ring attention brings the other
  // chunks): 2 * (a/tp) * (s/cp) * s * (dh + dh) = 4 * (s/cp) * s * h / tp; cross-attention over the
  // T = 512 text tokens: 4 * (s/cp) * T * h / tp. (A causal mask would count about half the first.)
  Wan14b w;
  const Plan p = w.plan(2, 4, Recompute::kNone);
  const AlphaBetaComm comm(w.cluster, p);
  const ModelCosts c = model_costs(w.model, p, w.cm, comm);
  const double s = 75'600, q = s / 4, h = 5120, T = 512;
  const double expected = 4.0 * q * s * h / 2.0 + 4.0 * q * T * h / 2.0;
  EXPECT_NEAR(c.layer[0].attn_core_fwd_flops.count() / expected, 1.0, 1e-12);
  ASSERT_EQ(c.layer.size(), 40u);
}

TEST(DitTraining, Wan14bFitsWithFullRecomputeAndNotWithout) {
  // TP2 (SP) x CP4 x DP8 (FSDP). Saved activations of one block for one sample (model/dit_test.cc,
  // SavedActivationsPerBlock), here for s = 75,600/4 = 18,900 local tokens, every tensor split over
  // tp = 2 by SP or by heads: [2 (19 s h + 2 s f + 3 T h) + 8 a s] / 2 = 2.372 GB; 40 blocks: 94.9 GB,
  // above the 80 GB of an H100 before any weight. Full recompute keeps only each block's input,
  // 2 s h / tp = 193.5 MB, 40 blocks: 7.7 GB, so the difference of the two plans' activations is
  // 40 x (2.372 GB - 0.194 GB) = 87.1 GB; model states (FSDP over 8, TP 2: 14.3e9/16 params x
  // 2 + 4 + 12 bytes = 16 GB) are the same.
  Wan14b w;
  const TrainResult none = evaluate(w.model, w.plan(2, 4, Recompute::kNone), w.cluster, w.cm);
  const TrainResult full = evaluate(w.model, w.plan(2, 4, Recompute::kFull), w.cluster, w.cm);
  EXPECT_FALSE(none.memory.fits);
  EXPECT_TRUE(full.memory.fits);
  EXPECT_GT(none.memory.peak.to_double(), w.gpu.memory.to_double());

  const double s = 18'900, h = 5120, f = 13824, T = 512, a = 40, tp = 2;
  const double block = (2.0 * (19.0 * s * h + 2.0 * s * f + 3.0 * T * h) + 8.0 * a * s) / tp;
  const double input = 2.0 * s * h / tp;
  const MemoryBreakdown& mn = none.memory.stages.at(0).memory;
  const MemoryBreakdown& mf = full.memory.stages.at(0).memory;
  EXPECT_NEAR((mn.activations - mf.activations).to_double() / (40.0 * (block - input)), 1.0, 1e-9);
  EXPECT_EQ(mn.weights, mf.weights);
  EXPECT_EQ(mn.optimizer, mf.optimizer);
  // The step: 64 samples of 75,600 tokens; recomputation costs time but not model FLOPs.
  EXPECT_DOUBLE_EQ(none.tokens_per_s_per_gpu * none.step.step_time.to_seconds() * 64.0, 64.0 * 75'600.0);
  EXPECT_GT(full.step.step_time, none.step.step_time);
  EXPECT_LT(full.mfu, full.hfu);
}

TEST(HardwareFlops, DoNotDependOnHowTheSequenceIsSplitUnderRingAttention) {
  // Llama-3-8B, 32,768 tokens per sample, full recompute, 8 GPUs as dp x cp. The step's hardware FLOPs
  // (model FLOPs plus the recomputed forward) are a property of the model, the batch and the recompute
  // mode; split evenly over the 8 GPUs they are the same per GPU for cp = 1, 2, 4, so hfu x step time
  // (= hardware FLOPs per GPU / peak) and mfu x step time must agree to rounding. Under load-balanced
  // ring attention a rank computes 1/cp of the whole sequence's causal pairs, not the pairs of its
  // 8,192-token chunk alone (cp times fewer), which the recompute count once took.
  io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  const model::ModelSpec m = catalog.model("llama3-8b", {});
  const hw::GpuSpec& gpu = catalog.hw.get_gpu("h100-sxm", {});
  const ClusterSpec cluster = ClusterSpec::from_catalog(gpu, catalog.hw.find_node("dgx-h100"));
  const compute::ComputeModel cm{gpu};
  std::vector<double> hfu_t, mfu_t;
  for (int64_t cp : {1, 2, 4}) {
    Plan p;
    p.cp = cp;
    p.dp = 8 / cp;
    p.seq = 32768;
    p.mbs = 1;
    p.gbs = 8;
    p.sharding = Sharding::kZero3;
    p.recompute = Recompute::kFull;
    const TrainResult r = evaluate(m, p, cluster, cm);
    const double t = r.step.step_time.to_seconds();
    hfu_t.push_back(r.hfu * t);
    mfu_t.push_back(r.mfu * t);
  }
  for (size_t i = 1; i < hfu_t.size(); ++i) {
    EXPECT_NEAR(hfu_t[i] / hfu_t[0], 1.0, 1e-9) << "cp index " << i;
    EXPECT_NEAR(mfu_t[i] / mfu_t[0], 1.0, 1e-9) << "cp index " << i;
  }
  EXPECT_GT(hfu_t[0], mfu_t[0]);  // full recompute adds a forward
}

}  // namespace
}  // namespace orrery::train
