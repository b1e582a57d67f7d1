#include "serve/exec_model.h"

#include <sstream>

#include <gtest/gtest.h>

#include "model/test_models.h"
#include "serve/test_support.h"

namespace orrery::serve {
namespace {

struct Fixture {
  model::ModelSpec model = testing::llama2_7b();
  hw::GpuSpec gpu = testing::a100_80gb();
  ReplicaSpec spec;
  ExecContext ctx;
  explicit Fixture(int64_t tp = 1) {
    spec.model = &model;
    spec.gpu = &gpu;
    spec.tp = tp;
    ctx.replica = &spec;
  }
};

BatchShape decode_batch(int64_t n, int64_t context) {
  BatchShape b;
  for (int64_t i = 0; i < n; ++i) b.add(1, context, true, false);
  return b;
}

TEST(RooflineExec, IsTheSumOfItsComponents) {
  Fixture f;
  const auto exec = make_exec_model("roofline", f.ctx);
  const LayerCosts costs(f.spec);
  BatchShape b = decode_batch(8, 1000);
  b.add(200, 200, true, true);
  // Model card: linear ops + attention + LM head on the emitting rows + communication (0 at TP 1) +
  // CPU overhead (1 ms + 10 us per sequence).
  const Time expect = costs.linear_all_layers(b.tokens) + costs.attention_all_layers(b.seqs) +
                      costs.pre_post(b.tokens, b.emitting) + Time::us(1000) + Time::us(10) * 9;
  EXPECT_EQ(exec->iteration_time(b), expect);
  EXPECT_EQ(costs.communication(b.tokens), Time::zero());
}

TEST(RooflineExec, LinearOpsOfADecodeStepAreBoundByReadingTheWeights) {
  Fixture f;
  const LayerCosts costs(f.spec);
  // One decode token: every layer's weights (~202M parameters, 2 B each) are read once. At the
  // compute model's bandwidth the linear ops cannot be faster than weights / HBM bandwidth.
  const double weight_bytes = 2.0 * 32 * (4 * 4096.0 * 4096 + 3 * 4096.0 * 11008);
  EXPECT_GE(costs.linear_all_layers(1).to_seconds(), weight_bytes / 2039e9);
  // ... and more tokens never take less time.
  EXPECT_LE(costs.linear_all_layers(1), costs.linear_all_layers(64));
  EXPECT_LE(costs.linear_all_layers(64), costs.linear_all_layers(2048));
}

TEST(RooflineExec, ADecodeStepReadsOnlyTheExpertsItsTokensChose) {
  // Mixtral-shaped (8 experts, top-2, expert ffn 14336, h 4096, 32 layers). One decode token reaches
  // 8 (1 - (1 - 2/8)^1) = 2 experts: its expert GEMMs read 2 experts' weights, 2 B x 2 x 3 x 4096 x
  // 14336 per layer, so the linear ops take at least that over the HBM bandwidth and less than reading
  // all 8 (every other weight of the layer, 2 B x (4 x 4096^2 ... ), is under one expert's 352 MB x 2).
  // 2,048 tokens reach all 8 (1 - 0.75^2048 ~ 1): the rows split over all of them.
  model::ModelSpec moe = model::testing::mixtral_8x7b();
  Fixture f;
  f.model = moe;
  const LayerCosts costs(f.spec);
  const double expert = 2.0 * 3 * 4096.0 * 14336;
  const double bw = 2039e9;
  EXPECT_GE(costs.linear_all_layers(1).to_seconds(), 32 * 2 * expert / bw);
  EXPECT_LT(costs.linear_all_layers(1).to_seconds(), 32 * 8 * expert / bw);
  // MXFP4 experts (0.53125 B per element) make the same step faster, but no faster than reading the
  // two experts at that width.
  ReplicaSpec bf16_spec = f.spec;
  bf16_spec.dtype = hw::DType::kBf16;
  ReplicaSpec mxfp4_spec = bf16_spec;
  mxfp4_spec.expert_weights = ExpertWeights::kMxfp4;
  const LayerCosts bf16(bf16_spec);
  const LayerCosts mxfp4(mxfp4_spec);
  EXPECT_LT(mxfp4.linear_all_layers(1), bf16.linear_all_layers(1));
  EXPECT_GE(mxfp4.linear_all_layers(1).to_seconds(), 32 * 2 * expert * 0.53125 / 2.0 / bw);
}

TEST(RooflineExec, TensorParallelismAddsTwoAllReducesPerLayer) {
  Fixture f(2);
  const LayerCosts costs(f.spec);
  const CollectiveTable ar(f.gpu, 2, false);
  // 2 all-reduces x 32 layers of T x 4096 x 2 bytes.
  EXPECT_EQ(costs.communication(128), ar.time(Bytes(128 * 4096 * 2)) * 64);
  EXPECT_GT(costs.communication(128), Time::zero());
}

TEST(CollectiveTable, InterpolatesBetweenPowersOfTwo) {
  const hw::GpuSpec gpu = testing::a100_80gb();
  const CollectiveTable t(gpu, 4, false);
  const Time lo = t.time(Bytes::MiB(1)), hi = t.time(Bytes::MiB(2));
  // Linear in size between the tabulated points.
  EXPECT_NEAR(t.time(Bytes(3 << 19)).to_seconds(), (lo.to_seconds() + hi.to_seconds()) / 2, 1e-12);
  EXPECT_EQ(CollectiveTable(gpu, 1, false).time(Bytes::MiB(1)), Time::zero());
}

TEST(LinearExec, IsD0PlusD1TimesBatchKvTokens) {
  Fixture f;
  f.ctx.d0 = Time::ms(5);
  f.ctx.d1_s = 2e-6;
  const auto exec = make_exec_model("linear", f.ctx);
  // 10 sequences of 1000 KV tokens: 5 ms + 2 us x 10000 = 25 ms.
  EXPECT_NEAR(exec->iteration_time(decode_batch(10, 1000)).to_seconds(), 0.025, 1e-12);
}

TEST(FitLinear, RecoversTheLinearModelExactly) {
  Fixture f;
  f.ctx.d0 = Time::ms(7);
  f.ctx.d1_s = 3e-6;
  const auto exec = make_exec_model("linear", f.ctx);
  const LinearFit fit = fit_linear(*exec, 512, 20, 4096);
  EXPECT_NEAR(fit.d0_s, 0.007, 1e-9);
  EXPECT_NEAR(fit.d1_s, 3e-6, 1e-12);
}

TEST(PiecewiseExec, FollowsTheRooflineOnDecodeBatches) {
  Fixture f;
  const auto roof = make_exec_model("roofline", f.ctx);
  const auto pw = make_exec_model("piecewise", f.ctx);
  // Two planes fitted on a grid that contains these batches: within 25% of the model they fit.
  for (int64_t n : {4, 32, 128}) {
    const BatchShape b = decode_batch(n, 1024);
    const double r = roof->iteration_time(b).to_seconds(), p = pw->iteration_time(b).to_seconds();
    EXPECT_NEAR(p, r, 0.25 * r) << n << " sequences";
  }
}

constexpr const char* kProfile =
    "time_stats.emb.median,time_stats.input_layernorm.median,time_stats.attn_pre_proj.median,time_stats.mlp_up_proj.median,"
    "num_tokens,num_tensor_parallel_workers\n"
    "0.01,0.1,0.2,0.3,1,1\n"
    "0.03,0.1,0.6,0.9,9,1\n"
    "0.05,0.1,0.4,0.5,1,2\n";

TEST(ProfileTable, SumsTheLayerOpsAndInterpolatesInTokens) {
  std::istringstream in(kProfile);
  const ProfileTable t = read_vidur_profile(in, "mlp.csv", 1);
  ASSERT_EQ(t.tokens.size(), 2u);
  EXPECT_DOUBLE_EQ(t.layer_ms[0], 0.6);   // 0.1 + 0.2 + 0.3
  EXPECT_DOUBLE_EQ(t.layer_ms[1], 1.6);   // 0.1 + 0.6 + 0.9
  EXPECT_DOUBLE_EQ(t.layer_at(5), 1.1);   // halfway between 1 and 9 tokens
  EXPECT_DOUBLE_EQ(t.emb_at(5), 0.02);
  EXPECT_DOUBLE_EQ(t.layer_at(17), 2.6);  // extrapolated along the last segment
}

TEST(ProfileTable, AFallingLastSegmentExtrapolatesInProportionNeverBelowZero) {
  // Layer 0.6 ms at 1 token, 1.6 ms at 9, 1.2 ms at 10 (noise: the last segment falls by 0.4 ms per token).
  // Along that segment 4,096 tokens would take 1.2 - 0.4 x 4,086 < 0 ms; in proportion to the last point it
  // takes 1.2 x 4,096 / 10 = 491.52 ms. Below the first point: 0.6 x 0.5 / 1 = 0.3 ms.
  std::istringstream in(
      "time_stats.emb.median,time_stats.input_layernorm.median,time_stats.attn_pre_proj.median,time_stats.mlp_up_proj.median,"
      "num_tokens,num_tensor_parallel_workers\n"
      "0.01,0.1,0.2,0.3,1,1\n0.03,0.1,0.6,0.9,9,1\n0.03,0.1,0.5,0.6,10,1\n");
  const ProfileTable t = read_vidur_profile(in, "mlp.csv", 1);
  ASSERT_EQ(t.tokens.size(), 3u);
  EXPECT_NEAR(t.layer_at(4096), 491.52, 1e-9);
  EXPECT_NEAR(t.layer_at(0.5), 0.3, 1e-12);
  EXPECT_NEAR(t.layer_at(9.5), 1.4, 1e-12);  // inside: halfway between 1.6 and 1.2
}

TEST(ProfileTable, AcceptsVidursDescendingOrderAndRepeatedBoundaryCounts) {
  // vidur's profiler writes num_tokens from 4096 down to 1, with 4096 and 2048 each in two rows
  // (../shared/data/profiles/vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv); the first row of a
  // repeated count is kept, so the table is the same as kProfile's whatever the order.
  std::istringstream in(
      "time_stats.emb.median,time_stats.input_layernorm.median,time_stats.attn_pre_proj.median,time_stats.mlp_up_proj.median,"
      "num_tokens,num_tensor_parallel_workers\n"
      "0.03,0.1,0.6,0.9,9,1\n"
      "0.07,0.1,0.7,0.9,9,1\n"
      "0.01,0.1,0.2,0.3,1,1\n");
  const ProfileTable t = read_vidur_profile(in, "mlp.csv", 1);
  ASSERT_EQ(t.tokens.size(), 2u);
  EXPECT_EQ(t.tokens[0], 1);
  EXPECT_EQ(t.tokens[1], 9);
  EXPECT_DOUBLE_EQ(t.layer_ms[1], 1.6);  // the first 9-token row: 0.1 + 0.6 + 0.9
  EXPECT_DOUBLE_EQ(t.emb_at(5), 0.02);
}

TEST(ProfileTable, ReportsMissingColumnsTpAndBadNumbers) {
  std::istringstream no_tp("time_stats.emb.median,num_tokens\n0.1,1\n");
  EXPECT_THROW(read_vidur_profile(no_tp, "a.csv", 1), InputError);
  std::istringstream in(kProfile);
  try {
    read_vidur_profile(in, "mlp.csv", 8);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("TP 8"), std::string::npos) << e.what();
  }
  std::istringstream bad(std::string(kProfile) + "x,0.1,0.2,0.3,17,1\n");
  try {
    read_vidur_profile(bad, "mlp.csv", 1);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().line, 5);
  }
}

TEST(ExecModelRegistry, UnknownNamesAndMissingProfilesAreInputErrors) {
  Fixture f;
  EXPECT_THROW(make_exec_model("rooflin", f.ctx), InputError);
  EXPECT_THROW(make_exec_model("vidur-profile", f.ctx), InputError);
  EXPECT_EQ(exec_model_registry().size(), 4u);
}

}  // namespace
}  // namespace orrery::serve
