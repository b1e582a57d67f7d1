#include "train/layer_costs.h"

#include <gtest/gtest.h>

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
  const int64_t T = 2048, h = 1024, f = 4096, tp = 4;
  const auto model = model::ModelSpec::gpt({2, h, 16, 16, f, 32000, T});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  Plan p;
  p.tp = tp;
  p.sp = true;
  p.tp_comm_overlap = true;
  p.mbs = 1;
  p.seq = T;
  p.gbs = 1;
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

}  // namespace
}  // namespace orrery::train
