#include "serve/replica.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "model/test_models.h"
#include "serve/test_support.h"

namespace orrery::serve {
namespace {

using testing::a100_80gb;
using testing::llama2_7b;

struct Fixture {
  model::ModelSpec model = llama2_7b();
  hw::GpuSpec gpu = a100_80gb();
  ReplicaSpec spec() const {
    ReplicaSpec s;
    s.model = &model;
    s.gpu = &gpu;
    return s;
  }
};

TEST(MemoryPlan, Llama7bOnA100FollowsTheStatedFormula) {
  Fixture f;
  const ReplicaSpec s = f.spec();
  const MemoryPlan p = plan_memory(s);
  // KV per token: 2 (K and V) x 32 kv heads x 128 head dim x 2 bytes x 32 layers = 524288 B (0.5 MiB).
  EXPECT_EQ(p.kv_per_token.count(), 2 * 32 * 128 * 2 * 32);
  // Weights: 2 bytes x parameters (6,738,415,616 for Llama-2-7B, docs/model.md).
  EXPECT_EQ(f.model.total_params(), 6738415616);
  EXPECT_EQ(p.weights.count(), 2 * 6738415616);
  // Workspace: 4096 tokens x 2 B x (2h + 3h + 2f) + 256 rows x 32000 x 4 B.
  const double ws = 4096.0 * 2 * (2 * 4096 + 3 * 4096 + 2 * 11008) + 256.0 * 32000 * 4;
  EXPECT_NEAR(p.workspace.to_double(), ws, 1.0);
  // Usable 0.9 x 81920 MiB; KV = usable - weights - workspace - 1 GiB; blocks of 16 tokens (8 MiB).
  const double kv = 0.9 * 81920.0 * 1048576.0 - 2.0 * 6738415616 - ws - 1073741824.0;
  EXPECT_EQ(p.blocks, static_cast<int64_t>(kv / (16.0 * 524288.0)));
  EXPECT_EQ(p.kv_tokens, p.blocks * 16);
  EXPECT_TRUE(p.fits);
}

TEST(MemoryPlan, Mxfp4ExpertsReproduceGptOssCheckpointSizes) {
  // gpt-oss model card (arXiv:2508.10925), Table 1: checkpoints of 60.8 GiB (120b) and 12.8 GiB (20b),
  // the MoE weights in MXFP4 (4.25 bits per parameter), everything else (attention, router, embedding,
  // unembedding, the experts' biases) in bf16. 120b: expert matrices 36 x 128 x 3 x 2880^2 =
  // 114,661,785,600 at 0.53125 B = 60,914,073,600 B; the other 2,167,371,072 parameters at 2 B =
  // 4,334,742,144 B; 65,248,815,744 B = 60.77 GiB. 20b: 24 x 32 x 3 x 2880^2 = 19,110,297,600 at
  // 0.53125 B plus 1,804,459,584 at 2 B = 13,761,264,768 B = 12.82 GiB.
  const hw::GpuSpec h200 = [] {
    hw::GpuSpec g = a100_80gb();
    g.memory = Bytes::GiB(141);
    return g;
  }();
  for (const auto& [layers, experts, bytes, gib] : {std::tuple{36, 128, 65'248'815'744LL, 60.8},
                                                    std::tuple{24, 32, 13'761'264'768LL, 12.8}}) {
    const model::ModelSpec oss = model::testing::gpt_oss(layers, experts);
    ReplicaSpec s;
    s.model = &oss;
    s.gpu = &h200;
    s.dtype = hw::DType::kBf16;
    s.expert_weights = ExpertWeights::kMxfp4;
    const MemoryPlan p = plan_memory(s);
    EXPECT_NEAR(p.weights.to_double(), static_cast<double>(bytes), 1.0);
    EXPECT_NEAR(p.weights.to_double() / 1073741824.0, gib, 0.05);
    // In bf16 throughout the same model holds 2 B per parameter.
    s.expert_weights = ExpertWeights::kSame;
    EXPECT_EQ(plan_memory(s).weights.count(), 2 * oss.total_params());
    // fp8 experts: 1 B per expert matrix element.
    s.expert_weights = ExpertWeights::kFp8;
    const double matrices = static_cast<double>(layers) * experts * 3.0 * 2880.0 * 2880.0;
    EXPECT_NEAR(plan_memory(s).weights.to_double(), 2.0 * static_cast<double>(oss.total_params()) - matrices, 1.0);
  }
}

TEST(ReplicaSpec, ExpertWeightsNeedExpertsAndAKnownFormat) {
  Fixture f;
  ReplicaSpec s = f.spec();
  s.expert_weights = ExpertWeights::kMxfp4;
  try {
    s.validate(Where{"<command line>", 0, ""});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "expert-weights");
    EXPECT_NE(std::string(e.what()).find("'llama2-7b' has no routed experts"), std::string::npos) << e.what();
  }
  try {
    (void)parse_expert_weights("mxfp5", Where{"<command line>", 0, "--expert-weights"});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'mxfp4'?"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_expert_weights("fp8", Where{}), ExpertWeights::kFp8);
  EXPECT_DOUBLE_EQ(expert_weight_bytes(ExpertWeights::kMxfp4, hw::DType::kBf16), 0.53125);
  EXPECT_DOUBLE_EQ(expert_weight_bytes(ExpertWeights::kSame, hw::DType::kBf16), 2.0);
}

TEST(MemoryPlan, TensorParallelismSplitsKvHeadsAndGqaHeadsAreReplicated) {
  Fixture f;
  ReplicaSpec s = f.spec();
  s.tp = 4;
  EXPECT_EQ(plan_memory(s).kv_per_token.count(), 524288 / 4);
  // 8 kv heads over TP 16 (head count 32 divides): one kv head per GPU, not half of one.
  model::ModelSpec gqa = model::ModelSpec::llama(model::GenericArch{32, 4096, 32, 8, 11008, 32000, 4096});
  s.model = &gqa;
  s.tp = 16;
  EXPECT_EQ(plan_memory(s).kv_per_token.count(), 2 * 1 * 128 * 2 * 32);
}

TEST(MemoryPlan, ModelLargerThanTheGpuDoesNotFit) {
  Fixture f;
  // A Llama-2-70B-sized model: ~69B parameters, 138 GB of fp16 weights > 0.9 x 80 GiB.
  model::ModelSpec big = model::ModelSpec::llama(model::GenericArch{80, 8192, 64, 8, 28672, 32000, 4096});
  ReplicaSpec s = f.spec();
  s.model = &big;
  const MemoryPlan p = plan_memory(s);
  EXPECT_FALSE(p.fits);
  EXPECT_FALSE(p.reason.empty());
  s.tp = 4;  // 34.5 GB per GPU: fits
  EXPECT_TRUE(plan_memory(s).fits);
}

TEST(ReplicaSpec, RejectsInvalidParallelism) {
  Fixture f;
  ReplicaSpec s = f.spec();
  s.tp = 3;  // 32 heads do not divide by 3
  EXPECT_THROW(s.validate(), InputError);
  s.tp = 1;
  s.block_size = 0;
  EXPECT_THROW(s.validate(), InputError);
}

Replica small_replica(Fixture& f, int64_t kv_tokens, double watermark = 0.0) {
  ReplicaSpec s = f.spec();
  s.kv_tokens_override = kv_tokens;
  s.watermark = watermark;
  return Replica(s, plan_memory(s));
}

TEST(Replica, BlocksAreAllocatedPerStepAndFreedOnRecompute) {
  Fixture f;
  Replica r = small_replica(f, 160);  // 10 blocks of 16
  const SeqId a = r.add(testing::request(0, 0, 20, 5), 0);
  // 20 prompt tokens need ceil(20/16) = 2 blocks.
  EXPECT_EQ(r.extra_blocks(r.seq(a), r.seq(a).pending()), 2);
  ASSERT_TRUE(r.grow(a, 20));
  EXPECT_EQ(r.allocatable_blocks(), 8);
  r.seq(a).computed = 20;
  // Token 21..32 fit in block 2; token 33 needs a third.
  EXPECT_EQ(r.extra_blocks(r.seq(a), 12), 0);
  EXPECT_EQ(r.extra_blocks(r.seq(a), 13), 1);
  r.seq(a).generated = 3;
  r.preempt_recompute(a);
  EXPECT_EQ(r.allocatable_blocks(), 10);
  // The restart recomputes the prompt and the 3 tokens generated so far.
  EXPECT_EQ(r.seq(a).prefill_target, 23);
  EXPECT_EQ(r.seq(a).computed, 0);
  EXPECT_EQ(r.counters().wasted_tokens, 20);
  EXPECT_EQ(r.counters().restarts, 1);
}

TEST(Replica, WatermarkKeepsBlocksFreeForAdmission) {
  Fixture f;
  Replica r = small_replica(f, 1600, 0.1);  // 100 blocks, watermark 10
  EXPECT_EQ(r.watermark_blocks(), 10);
  const SeqId a = r.add(testing::request(0, 0, 91 * 16, 1), 0);
  EXPECT_FALSE(r.reserve(a, 91 * 16, r.watermark_blocks()));  // 100 - 91 = 9 < 10
  EXPECT_TRUE(r.reserve(a, 90 * 16, r.watermark_blocks()));   // 100 - 90 = 10
}

TEST(Replica, SwapMovesBlocksOverPcie) {
  Fixture f;
  Replica r = small_replica(f, 1600);
  const SeqId a = r.add(testing::request(0, 0, 64, 4), 0);
  ASSERT_TRUE(r.grow(a, 64));
  r.seq(a).computed = 64;
  Batch b;
  ASSERT_TRUE(r.swap_out(a, b));
  EXPECT_EQ(r.allocatable_blocks(), 100);
  // 4 blocks x 16 tokens x 524288 B over 0.8 x 32 GB/s.
  EXPECT_NEAR(b.extra.to_seconds(), 4.0 * 16 * 524288 / (0.8 * 32e9), 1e-9);
  ASSERT_TRUE(r.swap_in(a, b));
  EXPECT_EQ(r.allocatable_blocks(), 96);
  EXPECT_EQ(r.seq(a).computed, 64);
}

TEST(Replica, PrefixCachingSharesIdenticalPrefixes) {
  Fixture f;
  ReplicaSpec s = f.spec();
  s.kv_tokens_override = 16 * 100;
  s.watermark = 0.0;
  s.prefix_unit_tokens = 32;  // 2 blocks per prefix unit
  Replica r(s, plan_memory(s));
  Request q = testing::request(0, 0, 80, 2);
  q.prefix_blocks = {7, 8};
  const SeqId a = r.add(q, 0);
  r.attach_prefix(a);
  EXPECT_EQ(r.seq(a).computed, 0);  // cold cache
  ASSERT_TRUE(r.grow(a, 80));
  Batch b;
  b.items.push_back({a, 80});
  std::vector<SeqId> done;
  r.complete(b, Time::ms(1), done, [](const Seq&, bool) {});
  // After its prefill the two full units (64 tokens) are shared; 16 private tokens remain in 1 block.
  EXPECT_EQ(r.seq(a).shared_units, 2);
  EXPECT_EQ(r.seq(a).blocks, 1);
  EXPECT_EQ(r.used_blocks(), 5);
  q.id = 1;
  const SeqId c = r.add(q, 1);
  r.attach_prefix(c);
  // Both units hit: 64 tokens are already computed; the step computes the other 16.
  EXPECT_EQ(r.seq(c).computed, 64);
  EXPECT_EQ(r.seq(c).pending(), 16);
  EXPECT_EQ(r.counters().prefix_hit_tokens, 64);
  EXPECT_EQ(r.extra_blocks(r.seq(c), 16), 1);
}

}  // namespace
}  // namespace orrery::serve
