#include "train/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "train/test_support.h"

#include "model/model_spec.h"

namespace orrery::train {
namespace {

using testing::test_gpu;

model::ModelSpec llama_8b() {
  return model::ModelSpec::llama({32, 4096, 32, 8, 14336, 128256, 8192});
}

using testing::has_key;

TEST(Plan, ValidPlanHasNoErrors) {
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  p.gbs = 64;
  p.seq = 8192;
  p.sp = true;
  EXPECT_TRUE(validate_plan(llama_8b(), p, 64, test_gpu()).empty());
}

TEST(Plan, TpNotDividingHeadsNamesTheConstraint) {
  Plan p;
  p.tp = 3;
  p.dp = 1;
  p.gbs = 4;
  const auto e = validate_plan(llama_8b(), p, 3, test_gpu());
  ASSERT_TRUE(has_key(e, "tp_heads"));
  EXPECT_EQ(e.front().message, "tp=3 does not divide heads=32");
}

TEST(Plan, EveryConstraintHasItsKey) {
  const auto m = llama_8b();
  const auto gpu = test_gpu();
  {
    Plan p;  // 1*1*1*1 != 8
    EXPECT_TRUE(has_key(validate_plan(m, p, 8, gpu), "gpus"));
  }
  {
    Plan p;
    p.pp = 5;  // 5 does not divide 32 layers
    p.gbs = 5;
    EXPECT_TRUE(has_key(validate_plan(m, p, 5, gpu), "pp_layers"));
  }
  {
    Plan p;
    p.dp = 4;
    p.mbs = 2;
    p.gbs = 12;  // dp*mbs = 8 does not divide 12
    EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "gbs"));
  }
  {
    Plan p;
    p.vp = 2;  // vp without the interleaved schedule
    p.pp = 2;
    p.gbs = 4;
    EXPECT_TRUE(has_key(validate_plan(m, p, 2, gpu), "vp_schedule"));
    p.schedule = Schedule::kZeroBubbleV;  // the V is two chunks per rank: vp 2 valid, 1 and 4 not
    EXPECT_TRUE(validate_plan(m, p, 2, gpu).empty());
    for (int64_t bad : {1, 4}) {
      p.vp = bad;
      const auto e = validate_plan(m, p, 2, gpu);
      ASSERT_TRUE(has_key(e, "vp_schedule")) << bad;
      EXPECT_NE(e.front().message.find("needs vp=2"), std::string::npos) << e.front().message;
    }
    // DualPipeV: the same V, and at least one micro-batch per virtual stage (torch's ScheduleDualPipeV
    // raises below 2 pp): m = 4 on pp 2 valid, 3 not.
    p.schedule = Schedule::kDualPipeV;
    p.vp = 2;
    EXPECT_TRUE(validate_plan(m, p, 2, gpu).empty());
    p.gbs = 3;
    const auto e = validate_plan(m, p, 2, gpu);
    ASSERT_TRUE(has_key(e, "vp_microbatches"));
    EXPECT_NE(e.front().message.find("at least 2*pp=4 micro-batches (found m=3)"), std::string::npos) << e.front().message;
    p.gbs = 4;
    p.vp = 1;
    EXPECT_TRUE(has_key(validate_plan(m, p, 2, gpu), "vp_schedule"));
  }
  {
    // torch's ScheduleInterleavedZeroBubble: several stages per rank, and rounds of m / r micro-batches,
    // r = max(1, floor(m / pp)) dividing m. On pp 2: m = 4 (r 2), 3 (r 1) and 6 (r 3) valid; 5 (r 2) and
    // 9 (r 4) not. One chunk per rank is ZB-H1's order, named as such; no Megatron group size.
    Plan p;
    p.pp = 2;
    p.vp = 2;
    p.schedule = Schedule::kInterleavedZeroBubble;
    for (int64_t ok : {4, 3, 6}) {
      p.gbs = ok;
      EXPECT_TRUE(validate_plan(m, p, 2, gpu).empty()) << ok;
    }
    for (const auto& [bad, rounds] : {std::pair<int64_t, int64_t>{5, 2}, {9, 4}}) {
      p.gbs = bad;
      const auto e = validate_plan(m, p, 2, gpu);
      ASSERT_TRUE(has_key(e, "vp_microbatches")) << bad;
      EXPECT_NE(e.front().message.find(fmt::format("needs m={} to be a multiple of {}", bad, rounds)), std::string::npos)
          << e.front().message;
    }
    p.gbs = 4;
    p.microbatch_group = 2;
    EXPECT_TRUE(has_key(validate_plan(m, p, 2, gpu), "microbatch_group"));
    p.microbatch_group = 0;
    p.vp = 1;
    const auto e = validate_plan(m, p, 2, gpu);
    ASSERT_TRUE(has_key(e, "vp_schedule"));
    EXPECT_NE(e.front().message.find("zero-bubble (ZB-H1)"), std::string::npos) << e.front().message;
    // Looped BFS takes any number of chunks.
    p.schedule = Schedule::kLoopedBfs;
    for (int64_t v : {1, 2, 4}) {
      p.vp = v;
      EXPECT_TRUE(validate_plan(m, p, 2, gpu).empty()) << v;
    }
  }
  {
    // Megatron-Core's combined 1F1B needs EP (Megatron asserts expert_model_parallel_size > 1) and pp 1
    // or the interleaved schedule ("if PP > 1, set virtual_pipeline_model_parallel_size").
    const auto moe = testing::small_moe(4, 1024);
    Plan p;
    p.dp = 2;
    p.ep = 2;
    p.gbs = 8;
    p.ep_a2a_overlap = true;
    EXPECT_TRUE(validate_plan(moe, p, 2, gpu).empty());
    p.ep = 1;
    EXPECT_TRUE(has_key(validate_plan(moe, p, 2, gpu), "ep_overlap"));
    p.ep = 2;
    p.dp = 1;
    p.pp = 2;
    EXPECT_TRUE(has_key(validate_plan(moe, p, 2, gpu), "ep_overlap"));  // 1F1B across stages: no pairs
    p.dp = 1;
    p.ep = 1;
  }
  {
    Plan p;
    p.schedule = Schedule::kInterleaved;
    p.vp = 2;
    p.pp = 4;
    p.gbs = 6;  // m = 6 not a multiple of pp = 4
    EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "vp_microbatches"));
  }
  {
    // The interleaved micro-batch group: m = 10 on pp 4 is no multiple of pp, but groups of 6 and 4 are
    // Megatron's (n in [pp, m], a last group of at least pp); groups of 7 leave 3 < pp; 3 < pp and
    // 11 > m are out of range; a group without interleaving is no setting.
    Plan p;
    p.schedule = Schedule::kInterleaved;
    p.vp = 2;
    p.pp = 4;
    p.gbs = 10;
    EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "vp_microbatches"));
    p.microbatch_group = 6;
    EXPECT_TRUE(validate_plan(m, p, 4, gpu).empty());
    for (int64_t bad : {7, 3, 11}) {
      p.microbatch_group = bad;
      EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "vp_microbatches")) << bad;
    }
    p.microbatch_group = 4;
    p.vp = 1;
    p.schedule = Schedule::kOneFOneB;
    EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "microbatch_group"));
  }
  {
    Plan p;
    p.cp = 3;
    p.seq = 8192;  // 2*cp = 6 does not divide 8192
    EXPECT_TRUE(has_key(validate_plan(m, p, 3, gpu), "cp_seq"));
  }
  {
    Plan p;
    p.sp = true;  // tp = 1
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "sp"));
  }
  {
    Plan p;
    p.ep = 2;  // dense model
    p.dp = 2;
    p.gbs = 2;
    EXPECT_TRUE(has_key(validate_plan(m, p, 2, gpu), "ep"));
  }
  {
    Plan p;
    p.dp = 4;
    p.gbs = 4;
    p.sharding = Sharding::kZero3;
    p.shard_group = 3;
    EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "shard"));
  }
  {
    Plan p;
    p.precision = hw::DType::kFp8;  // the test GPU has no fp8 peak
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "precision"));
  }
  {
    Plan p;
    p.tp = 0;
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "tp"));
  }
  {
    // Llama 3 8B: 32 layers on pp 1. Layer counts: -1 (all) or within the rank's 32.
    Plan p;
    p.recompute = Recompute::kFull;
    p.recompute_layers = -2;
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "recompute_layers"));
    p.recompute_layers = 33;
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "recompute_layers"));
    p.recompute_layers = 32;
    EXPECT_FALSE(has_key(validate_plan(m, p, 1, gpu), "recompute_layers"));
    p.offload_layers = 4;  // without activation offload
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "offload_layers"));
    p.activation_offload = true;
    EXPECT_FALSE(has_key(validate_plan(m, p, 1, gpu), "offload_layers"));
    for (int64_t bad : {int64_t{0}, int64_t{-2}, int64_t{33}}) {
      p.offload_layers = bad;
      EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "offload_layers")) << bad;
    }
  }
  {
    // The optimizer's host share: in (0, 1], and below 1 only with optimizer offload.
    Plan p;
    EXPECT_FALSE(has_key(validate_plan(m, p, 1, gpu), "optimizer_offload_fraction"));
    p.optimizer_offload_fraction = 0.5;
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "optimizer_offload_fraction"));
    p.optimizer_offload = true;
    EXPECT_FALSE(has_key(validate_plan(m, p, 1, gpu), "optimizer_offload_fraction"));
    for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
      p.optimizer_offload_fraction = bad;
      EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "optimizer_offload_fraction")) << bad;
    }
    // The host's CPU Adam rate: positive and finite.
    EXPECT_FALSE(has_key(validate_plan(m, p, 1, gpu), "cpu_adam_rate"));
    for (double bad : {0.0, -1e9, std::numeric_limits<double>::infinity(), std::nan("")}) {
      p.cpu_adam_params_per_s = bad;
      EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "cpu_adam_rate")) << bad;
    }
  }
  {
    Plan p;
    p.master_weights = MasterWeights::kRemainders;  // bf16 weights' low bits of an fp32 optimizer
    EXPECT_FALSE(has_key(validate_plan(m, p, 1, gpu), "master_weights"));
    p.optimizer_dtype = hw::DType::kBf16;
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "master_weights"));
    p.optimizer_dtype = hw::DType::kFp32;
    p.precision = hw::DType::kFp16;  // fp16 weights have no bf16 remainder
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "master_weights"));
  }
  {
    Plan p;
    p.fp8_recipe = Fp8Recipe::kCurrent;  // an fp8 recipe on a bf16 plan
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "fp8_recipe"));
    p.fp8_recipe = Fp8Recipe::kMxfp8;  // and MXFP8 on the Ampere-like test GPU
    const std::vector<ConstraintError> e = validate_plan(m, p, 1, gpu);
    EXPECT_EQ(std::count_if(e.begin(), e.end(), [](const ConstraintError& x) { return x.key == "fp8_recipe"; }), 2);
  }
}

// Values past the supported range are reported before anything is multiplied: dp*mbs with mbs = 2^62
// and dp = 4 would overflow int64 (2^64), and a NaN load factor would pass a plain `< 1` test.
TEST(Plan, OutOfRangeAndNonFiniteValuesAreConstraintsNotOverflows) {
  const auto m = llama_8b();
  const auto gpu = test_gpu();
  {
    Plan p;
    p.dp = 4;
    p.mbs = int64_t{1} << 62;
    p.gbs = 4;
    const auto e = validate_plan(m, p, 4, gpu);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].key, "mbs");
  }
  {
    Plan p;
    p.seq = kMaxSeq + 1;
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "seq"));
    p.seq = kMaxSeq;  // the limit itself is valid
    EXPECT_FALSE(has_key(validate_plan(m, p, 1, gpu), "seq"));
  }
  {
    Plan p;  // each degree 2^12 is within range, their product 2^48 is not
    p.dp = p.tp = p.pp = p.cp = int64_t{1} << 12;
    const auto e = validate_plan(m, p, 1, gpu);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].key, "gpus");
  }
  {
    Plan p;
    p.load_imbalance = std::nan("");
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "load_imbalance"));
    p.load_imbalance = 1.0;
    p.capacity_factor = std::numeric_limits<double>::infinity();
    EXPECT_TRUE(has_key(validate_plan(m, p, 1, gpu), "capacity_factor"));
  }
}

// Copies of a token the EP all-to-all moves. Megatron's all-to-all dispatcher: top_k. DeepEP: the EP
// ranks reached. With 8 experts, top-2 (Mixtral), derived by counting the 28 expert pairs:
//   ep 8 (one expert per rank): both experts always on different ranks -> 2 = 8 (1 - C(7,2)/C(8,2)) = 8 x 7/28;
//   ep 4 (two per rank): 4 of the 28 pairs share a rank -> (4 x 1 + 24 x 2) / 28 = 13/7 = 4 (1 - C(6,2)/C(8,2)).
// With 128 experts, top-8 over ep 8 (Qwen3-30B-A3B): 8 (1 - prod_{i<8} (112 - i)/(128 - i)) = 5.3394 (the
// product is 0.332580, computed separately). A stated rank count replaces the expectation; ep 1 moves nothing
// but reports top_k.
TEST(Plan, MoeCopiesPerTokenFollowTheDispatcher) {
  Plan p;
  p.ep = 8;
  EXPECT_EQ(p.moe_copies_per_token(8, 2), 2.0);  // alltoall: top_k
  p.moe_dispatcher = MoeDispatcher::kDeepEp;
  EXPECT_NEAR(p.moe_copies_per_token(8, 2), 2.0, 1e-12);
  p.ep = 4;
  EXPECT_NEAR(p.moe_copies_per_token(8, 2), 13.0 / 7.0, 1e-12);
  p.ep = 8;
  EXPECT_NEAR(p.moe_copies_per_token(128, 8), 5.3394, 1e-4);
  p.moe_ranks_per_token = 1.0;
  EXPECT_EQ(p.moe_copies_per_token(128, 8), 1.0);
  p.ep = 1;
  EXPECT_EQ(p.moe_copies_per_token(128, 8), 8.0);
}

// moe_ranks_per_token: only with deepep, and within [1, min(top_k, ep)] (Mixtral, ep 4: [1, 2]).
TEST(Plan, MoeRanksPerTokenIsCheckedAgainstTheDispatcherAndTheRouting) {
  const model::ModelSpec m = testing::small_moe(4, 2048);
  const auto gpu = test_gpu();
  Plan p;
  p.dp = 4;
  p.ep = 4;
  p.gbs = 4;
  p.moe_ranks_per_token = 1.0;
  EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "moe_ranks_per_token"));  // alltoall
  p.moe_dispatcher = MoeDispatcher::kDeepEp;
  EXPECT_FALSE(has_key(validate_plan(m, p, 4, gpu), "moe_ranks_per_token"));
  p.moe_ranks_per_token = 2.5;
  EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "moe_ranks_per_token"));
  p.moe_ranks_per_token = std::nan("");
  EXPECT_TRUE(has_key(validate_plan(m, p, 4, gpu), "moe_ranks_per_token"));
  EXPECT_EQ(parse_moe_dispatcher("deepep", Where{}), MoeDispatcher::kDeepEp);
  EXPECT_EQ(moe_dispatcher_name(MoeDispatcher::kAllToAll), "alltoall");
  EXPECT_THROW(parse_moe_dispatcher("deep-ep", Where{}), InputError);
}

// HSDP with EP: the EP ranks lie inside one shard group (torchtitan's dp_shard x cp mesh), so ep must
// divide the shard group x cp; shard groups of 2 cannot hold ep 4, shard groups of 4 can.
TEST(Plan, HsdpShardGroupMustHoldTheEpRanks) {
  const model::ModelSpec m = testing::small_moe(4, 2048);
  const auto gpu = test_gpu();
  Plan p;
  p.dp = 8;
  p.ep = 4;
  p.gbs = 8;
  p.sharding = Sharding::kZero3;
  p.shard_group = 2;
  EXPECT_TRUE(has_key(validate_plan(m, p, 8, gpu), "shard"));
  p.shard_group = 4;
  EXPECT_FALSE(has_key(validate_plan(m, p, 8, gpu), "shard"));
  p.cp = 2;  // shard group 2 x cp 2 = 4 ranks hold ep 4
  p.dp = 4;
  p.shard_group = 2;
  p.gbs = 4;
  p.seq = 2048;
  EXPECT_FALSE(has_key(validate_plan(m, p, 8, gpu), "shard"));
}

// Expert TP (Plan::etp): an MoE model's, dividing tp (the first etp ranks of each TP group), below tp
// with SP, and etp x ep dividing tp x dp x cp (Megatron-Core's expert grid of etp x ep x edp x pp).
TEST(Plan, ExpertTensorParallelismIsCheckedAgainstTpSpAndTheGrid) {
  const model::ModelSpec moe = testing::small_moe(4, 2048);
  const auto gpu = test_gpu();
  Plan p;
  p.tp = 4;
  p.dp = 2;
  p.ep = 2;
  p.gbs = 2;
  p.sp = true;
  p.etp = 1;
  EXPECT_TRUE(validate_plan(moe, p, 8, gpu).empty());
  p.ep = 8;  // etp x ep = 8 divides tp x dp = 8 (ep borrows the TP ranks under etp 1)
  EXPECT_TRUE(validate_plan(moe, p, 8, gpu).empty());
  p.etp = 2;  // 2 x 8 = 16 does not divide 8
  EXPECT_TRUE(has_key(validate_plan(moe, p, 8, gpu), "ep"));
  p.ep = 2;
  p.etp = 3;  // does not divide tp 4
  EXPECT_TRUE(has_key(validate_plan(moe, p, 8, gpu), "etp"));
  p.etp = 1;
  p.sp = false;
  EXPECT_TRUE(has_key(validate_plan(moe, p, 8, gpu), "etp"));
  p.sp = true;
  p.etp = -1;
  EXPECT_TRUE(has_key(validate_plan(moe, p, 8, gpu), "etp"));
  p.etp = 1;
  EXPECT_TRUE(has_key(validate_plan(llama_8b(), p, 8, gpu), "etp"));  // dense
  p.etp = 4;  // = tp: nothing to check beyond ep
  EXPECT_FALSE(has_key(validate_plan(moe, p, 8, gpu), "etp"));
}

TEST(Plan, RequireValidPlanThrowsInputErrorWithTheKey) {
  Plan p;
  p.tp = 3;
  p.gbs = 1;
  try {
    require_valid_plan(llama_8b(), p, 3, test_gpu(), Where{"<command line>", 0, ""});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "tp_heads");
    EXPECT_NE(std::string(e.what()).find("tp=3 does not divide heads=32"), std::string::npos);
  }
}

TEST(Plan, ParsersAcceptCsvAliasesAndSuggestNames) {
  const Where w{"<command line>", 0, "--dp-sharding"};
  EXPECT_EQ(parse_sharding("distopt", w), Sharding::kZero1);
  EXPECT_EQ(parse_sharding("fsdp", w), Sharding::kZero3);
  EXPECT_EQ(parse_schedule("1F1B", w), Schedule::kOneFOneB);
  EXPECT_EQ(parse_recompute("selective", w), Recompute::kSelective);
  EXPECT_EQ(parse_recompute("selective-op", w), Recompute::kSelectiveOp);
  EXPECT_EQ(recompute_name(Recompute::kSelectiveOp), "selective-op");
  EXPECT_EQ(parse_precision("fp16", w), hw::DType::kFp16);
  try {
    parse_schedule("interleave", w);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.hint().find("interleaved"), std::string::npos);
  }
  EXPECT_THROW(parse_precision("fp32", w), InputError);
  EXPECT_THROW(parse_grad_sync("sparsest", w), InputError);
}

// Optimizer-state bytes per parameter and what Adam's step moves (plan.h). The step reads and writes
// the master copy and both moments, reads the main gradient, and writes the 16-bit weight from a
// separate master or reads and writes it in place (no master, or Apex's remainders beside it):
//   fp32 master, fp32 moments, fp32 gradients: 2 (4 + 8) + 4 + 2 = 30 (the 26 + g of before)
//   NeMo's distributed Adam at dtype bf16 on a bf16 model (no master, bf16 moments), bf16 gradients:
//     2 (0 + 4) + 2 + 4 = 14
//   Apex's remainders with fp32 moments (NeMo's default for bf16 models), bf16 gradients: 2 (2 + 8) + 2 + 4 = 26
//   Megatron-Core's precision-aware optimizer with fp16 main params and bf16 moments: 2 (2 + 4) + 4 + 2 = 18
TEST(Plan, OptimizerStatesFollowTheirDtypeAndMasterCopy) {
  Plan p;
  EXPECT_EQ(p.master_bytes(), 4);
  EXPECT_EQ(p.moment_bytes(), 8);
  EXPECT_EQ(p.optimizer_step_bytes(), 30);
  p.optimizer_dtype = hw::DType::kBf16;
  p.master_weights = MasterWeights::kNone;
  p.grad_bytes = 2;
  EXPECT_EQ(p.master_bytes() + p.moment_bytes(), 4);
  EXPECT_EQ(p.optimizer_step_bytes(), 14);
  p.optimizer_dtype = hw::DType::kFp32;
  p.master_weights = MasterWeights::kRemainders;
  EXPECT_EQ(p.master_bytes() + p.moment_bytes(), 10);
  EXPECT_EQ(p.optimizer_step_bytes(), 26);
  p.optimizer_dtype = hw::DType::kBf16;
  p.master_weights = MasterWeights::kFp16;
  p.grad_bytes = 4;
  EXPECT_EQ(p.optimizer_step_bytes(), 18);
  const Where w{"plan.yaml", 3, "master_weights"};
  EXPECT_EQ(parse_master_weights(" Remainders ", w), MasterWeights::kRemainders);
  EXPECT_EQ(master_weights_name(parse_master_weights("none", w)), "none");
  EXPECT_EQ(parse_optimizer_dtype("bf16", w), hw::DType::kBf16);
  try {
    parse_optimizer_dtype("fp8", w);
    ADD_FAILURE() << "fp8 moments accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "master_weights");
    EXPECT_NE(e.message().find("unknown optimizer-state dtype 'fp8'"), std::string::npos);
  }
}

TEST(Plan, GroupStridesFollowTpCpDpPpOrder) {
  Plan p;
  p.tp = 8;
  p.cp = 2;
  p.dp = 4;
  p.pp = 2;
  EXPECT_EQ(group_stride(p, Group::kTp), 1);
  EXPECT_EQ(group_stride(p, Group::kCp), 8);
  EXPECT_EQ(group_stride(p, Group::kPp), 64);
  // Gradients reduce over dp x cp = 8 ranks (the cp ranks hold the same parameters): ranks tp apart.
  EXPECT_EQ(group_size(p, Group::kDp), 8);
  EXPECT_EQ(group_stride(p, Group::kDp), 8);
  EXPECT_EQ(group_size(p, Group::kDpShard), 8);
  EXPECT_EQ(p.shard_size(), 1);  // unsharded
  p.sharding = Sharding::kZero1;
  EXPECT_EQ(p.shard_size(), 8);  // the distributed optimizer shards over dp x cp
  p.sharding = Sharding::kZero3;
  p.shard_group = 2;  // HSDP: shard groups of 2 DP ranks (x 2 cp ranks = 4 ranks), 2 replicas
  EXPECT_EQ(group_size(p, Group::kDpShard), 4);
  EXPECT_EQ(group_stride(p, Group::kDpShard), 8);
  EXPECT_EQ(p.shard_size(), 4);
  EXPECT_EQ(group_size(p, Group::kDpReplica), 2);
  EXPECT_EQ(group_stride(p, Group::kDpReplica), 32);
}

// Megatron-Core's expert grid (parallel_state.py: expert_decoder_rank_generator with tp = expert TP,
// ep, dp = world / (etp ep pp), cp = 1, order tp-cp-ep-dp-pp): on tp 8, cp 2, dp 4, pp 2 (128 ranks)
// with ep 4, expert TP ranks are 1 apart, EP ranks 8 apart (cp folded into ep), and the expert-data-
// parallel ranks 128 / (8 x 4 x 2) = 2 of them, 8 x 4 = 32 apart.
TEST(Plan, ExpertGroupsFollowMegatronCoresExpertGrid) {
  Plan p;
  p.tp = 8;
  p.cp = 2;
  p.dp = 4;
  p.pp = 2;
  p.ep = 4;
  EXPECT_EQ(group_size(p, Group::kEp), 4);
  EXPECT_EQ(group_stride(p, Group::kEp), 8);
  EXPECT_EQ(group_size(p, Group::kEdpShard), 2);  // unsharded: all of EDP reduces expert gradients
  EXPECT_EQ(group_stride(p, Group::kEdpShard), 32);
  EXPECT_EQ(group_size(p, Group::kEdpReplica), 1);
  p.sharding = Sharding::kZero1;  // the distributed optimizer shards experts over EDP: dp x cp / ep
  EXPECT_EQ(group_size(p, Group::kEdpShard), 2);
  EXPECT_EQ(p.expert_shard_size(), 2);
  // HSDP, shard groups of 2 DP ranks x 2 cp ranks = 4 ranks: the 4 EP ranks fill one, so each expert
  // shard is a single rank, replicated over the dp / 2 = 2 shard groups, 4 x 8 = 32 ranks apart.
  p.sharding = Sharding::kZero3;
  p.shard_group = 2;
  EXPECT_EQ(group_size(p, Group::kEdpShard), 1);
  EXPECT_EQ(group_size(p, Group::kEdpReplica), 2);
  EXPECT_EQ(group_stride(p, Group::kEdpReplica), 32);
  // Expert TP 1 (--expert-tensor-parallel-size 1) on the same 128 ranks: etp 1, ep 4, edp 128 / (1 x 4 x
  // 2) = 16; EP ranks 1 apart, EDP ranks 4 apart; the expert shard of ZeRO-1 over all 16.
  p.sharding = Sharding::kNone;
  p.shard_group = 0;
  p.etp = 1;
  EXPECT_EQ(group_size(p, Group::kEtp), 1);
  EXPECT_EQ(group_stride(p, Group::kEp), 1);
  EXPECT_EQ(group_size(p, Group::kEdpShard), 16);
  EXPECT_EQ(group_stride(p, Group::kEdpShard), 4);
  p.sharding = Sharding::kZero1;
  EXPECT_EQ(p.expert_shard_size(), 16);
  p.etp = 2;  // etp 2: edp 8, EP ranks 2 apart, EDP ranks 8 apart
  EXPECT_EQ(group_size(p, Group::kEtp), 2);
  EXPECT_EQ(group_stride(p, Group::kEp), 2);
  EXPECT_EQ(p.expert_shard_size(), 8);
  EXPECT_EQ(group_stride(p, Group::kEdpShard), 8);
  // Dense: no experts, EDP is the DP group (dp x cp, tp apart).
  p = Plan{};
  p.tp = 2;
  p.dp = 8;
  EXPECT_EQ(group_size(p, Group::kEdpShard), group_size(p, Group::kDpShard));
  EXPECT_EQ(group_stride(p, Group::kEdpShard), group_stride(p, Group::kDpShard));
}

// Llama 3 405B: 126 layers on 16 pipeline stages as 7 + 14 x 8 + 7 (Dubey et al. 2024, "The Llama 3
// Herd of Models", sec. 3.3.2: one layer fewer on the first and on the last stage than 128 / 16 = 8).
TEST(Plan, UnevenStagesSplitTheMiddleEvenly) {
  model::ModelSpec m = llama_8b();
  m.layers = 126;
  Plan p;
  p.pp = 16;
  p.gbs = 16;
  EXPECT_TRUE(has_key(validate_plan(m, p, 16, test_gpu()), "pp_layers"));  // 16 does not divide 126
  p.first_stage_layers = 7;
  p.last_stage_layers = 7;
  EXPECT_TRUE(validate_plan(m, p, 16, test_gpu()).empty());
  const LayerRange first = chunk_layers(p, m.layers, 0, 0);
  const LayerRange second = chunk_layers(p, m.layers, 1, 0);
  const LayerRange last = chunk_layers(p, m.layers, 15, 0);
  EXPECT_EQ(first.first, 0);
  EXPECT_EQ(first.count, 7);
  EXPECT_EQ(second.first, 7);
  EXPECT_EQ(second.count, 8);
  EXPECT_EQ(last.first, 119);  // 126 - 7
  EXPECT_EQ(last.count, 7);
  int64_t total = 0;
  int64_t next = 0;
  for (int64_t s = 0; s < 16; ++s) {
    const LayerRange r = chunk_layers(p, m.layers, s, 0);
    EXPECT_EQ(r.first, next) << "stage " << s;  // contiguous, in order
    next = r.first + r.count;
    total += r.count;
  }
  EXPECT_EQ(total, 126);
  EXPECT_EQ(max_stage_layers(p, m.layers), 8);
  // Only the first given (-1: the share): the other 15 stages share 126 - 6 = 120, 8 each.
  p.first_stage_layers = 6;
  p.last_stage_layers = -1;
  EXPECT_TRUE(validate_plan(m, p, 16, test_gpu()).empty());
  EXPECT_EQ(chunk_layers(p, m.layers, 15, 0).count, 8);
  // 126 - 6 - 7 = 113 does not split over 14 stages.
  p.last_stage_layers = 7;
  const auto e = validate_plan(m, p, 16, test_gpu());
  ASSERT_TRUE(has_key(e, "pp_layers"));
  EXPECT_NE(e.front().message.find("113"), std::string::npos) << e.front().message;
  // With interleaving the split is over the 32 model chunks: 126 - 7 - 7 = 112 does not split over 30.
  p.first_stage_layers = 7;
  p.vp = 2;
  p.schedule = Schedule::kInterleaved;
  EXPECT_TRUE(has_key(validate_plan(m, p, 16, test_gpu()), "pp_layers"));
}

// Every layer exactly once, in model-chunk order (chunk k = c pp + s holds the layers after chunk k - 1's).
void expect_chunks_in_order(const Plan& p, int64_t layers) {
  int64_t next = 0;
  for (int64_t k = 0; k < p.pp * p.vp; ++k) {
    const LayerRange r = chunk_layers(p, layers, k % p.pp, k / p.pp);
    EXPECT_EQ(r.first, next) << "chunk " << k;
    next = r.first + r.count;
  }
  EXPECT_EQ(next, layers);
}

// Interleaved with uneven end chunks, as NeMo runs Llama 3.1 405B on GB200 (Megatron-Core's
// account-for-embedding/loss-in-pipeline-split: 126 layers + embedding + loss = 128 over pp 8 x vp 8 =
// 64 model chunks of 2, the first and the last holding one layer beside the embedding and the loss).
// Model chunk k = c pp + s: chunk 0 (s 0, c 0) layer 0; chunk k in 1..62 layers 1 + 2(k-1) and the next;
// chunk 63 (s 7, c 7) layer 125. Rank 0 holds 1 + 7 x 2 = 15 layers, rank 7 7 x 2 + 1 = 15, the others 16.
TEST(Plan, InterleavedUnevenEndChunks) {
  model::ModelSpec m = llama_8b();
  m.layers = 126;
  Plan p;
  p.pp = 8;
  p.vp = 8;
  p.dp = 2;
  p.gbs = 16;
  p.schedule = Schedule::kInterleaved;
  p.first_stage_layers = 1;
  p.last_stage_layers = 1;
  EXPECT_TRUE(validate_plan(m, p, 16, test_gpu()).empty());
  const LayerRange a = chunk_layers(p, m.layers, 0, 0), b = chunk_layers(p, m.layers, 1, 0),
                   c = chunk_layers(p, m.layers, 0, 1), z = chunk_layers(p, m.layers, 7, 7);
  EXPECT_EQ(a.first, 0);
  EXPECT_EQ(a.count, 1);
  EXPECT_EQ(b.first, 1);
  EXPECT_EQ(b.count, 2);
  EXPECT_EQ(c.first, 15);  // chunk 8: 1 + 7 x 2
  EXPECT_EQ(c.count, 2);
  EXPECT_EQ(c.offset, 1);  // rank 0's chunk 0 holds one layer
  EXPECT_EQ(z.first, 125);
  EXPECT_EQ(z.count, 1);
  EXPECT_EQ(z.offset, 14);
  EXPECT_EQ(stage_layers(p, m.layers, 0), 15);
  EXPECT_EQ(stage_layers(p, m.layers, 3), 16);
  EXPECT_EQ(stage_layers(p, m.layers, 7), 15);
  EXPECT_EQ(max_stage_layers(p, m.layers), 16);
  expect_chunks_in_order(p, m.layers);
}

// Empty end chunks, as Llama 3 405B ran (Dubey et al. 2024, sec. 3.3.2: the first model chunk on the
// first stage holds only the embedding, the last on the last stage only the output projection and the
// loss, and the first and last stages hold one layer fewer than the others). 126 layers over pp 16 x
// vp 8 = 128 chunks, two of them empty: the other 126 hold one layer each. Chunk k = c pp + s; chunk 0
// (s 0, c 0) is empty, chunk k in 1..126 holds layer k - 1, chunk 127 (s 15, c 7) is empty. Rank 0
// holds 7 layers (chunks 16, 32, ..., 112: layers 15, 31, ..., 111), rank 15 7, the others 8.
TEST(Plan, EmptyEndChunksHoldNoLayer) {
  model::ModelSpec m = llama_8b();
  m.layers = 126;
  Plan p;
  p.pp = 16;
  p.vp = 8;
  p.gbs = 16;
  p.schedule = Schedule::kInterleaved;
  p.first_stage_layers = 0;
  p.last_stage_layers = 0;
  EXPECT_TRUE(p.uneven_stages());
  EXPECT_TRUE(validate_plan(m, p, 16, test_gpu()).empty());
  EXPECT_EQ(chunk_layers(p, m.layers, 0, 0).count, 0);
  EXPECT_EQ(chunk_layers(p, m.layers, 15, 7).count, 0);
  const LayerRange r1 = chunk_layers(p, m.layers, 1, 0), r0 = chunk_layers(p, m.layers, 0, 1);
  EXPECT_EQ(r1.first, 0);
  EXPECT_EQ(r1.count, 1);
  EXPECT_EQ(r0.first, 15);  // chunk 16
  EXPECT_EQ(r0.offset, 0);  // rank 0's first layer: its chunk 0 holds none
  EXPECT_EQ(stage_layers(p, m.layers, 0), 7);
  EXPECT_EQ(stage_layers(p, m.layers, 1), 8);
  EXPECT_EQ(stage_layers(p, m.layers, 15), 7);
  expect_chunks_in_order(p, m.layers);
  // 126 layers do not split over the 126 other chunks when only the first is emptied (127 others).
  p.last_stage_layers = -1;
  EXPECT_TRUE(has_key(validate_plan(m, p, 16, test_gpu()), "pp_layers"));
  // Below -1 (the share) is no layer count.
  p.last_stage_layers = -2;
  EXPECT_TRUE(has_key(validate_plan(m, p, 16, test_gpu()), "pp_layers"));
}

// balance_uneven_stages: middle stages get ceil(L / pp), the first the smaller half of the rest.
//   L = 126, pp = 16: ceil = 8, rest = 126 - 14 * 8 = 14 -> 7 and 7 (Meta's split).
//   L = 80, pp = 3: ceil = 27, rest = 80 - 27 = 53 -> 26 and 27.
//   L = 17, pp = 8: ceil = 3, rest = 17 - 18 < 0 -> impossible.
TEST(Plan, BalancedUnevenStages) {
  Plan p;
  p.pp = 16;
  ASSERT_TRUE(balance_uneven_stages(p, 126));
  EXPECT_EQ(p.first_stage_layers, 7);
  EXPECT_EQ(p.last_stage_layers, 7);
  Plan q;
  q.pp = 3;
  ASSERT_TRUE(balance_uneven_stages(q, 80));
  EXPECT_EQ(q.first_stage_layers, 26);
  EXPECT_EQ(q.last_stage_layers, 27);
  Plan r;
  r.pp = 8;
  EXPECT_FALSE(balance_uneven_stages(r, 17));
  EXPECT_FALSE(r.uneven_stages());
  Plan even;
  even.pp = 4;
  EXPECT_FALSE(balance_uneven_stages(even, 32));  // 4 divides 32: nothing to balance
}

// --recompute-modules: Megatron-Core's module names, in any order, into a set; an unknown name is an input
// error with the nearest one, "moe" (the whole MoE layer, whose recompute re-runs the expert all-to-alls)
// is refused with that reason, an empty list too. Under selective recompute a module the model lacks
// breaks the `recompute_modules` constraint (a Llama has no MLA, no experts, and every norm fused into
// the GEMM after it); the other recompute modes ignore the set (the planner keeps it on every plan).
TEST(Plan, RecomputeModulesParseAndMustExistInTheModel) {
  const Where w{"<command line>", 0, "--recompute-modules"};
  EXPECT_EQ(parse_recompute_modules(" moe_act,core_attn ", w),
            module_bit(RecomputeModule::kMoeAct) | module_bit(RecomputeModule::kCoreAttn));
  EXPECT_EQ(recompute_module_names(parse_recompute_modules("shared_experts,mla_up_proj", w)),
            (std::vector<std::string>{"mla_up_proj", "shared_experts"}));
  const auto error_of = [&](const char* list) {
    try {
      parse_recompute_modules(list, w);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of("core_atn").find("did you mean 'core_attn'"), std::string::npos) << error_of("core_atn");
  EXPECT_NE(error_of("moe").find("all-to-alls"), std::string::npos) << error_of("moe");
  EXPECT_NE(error_of("").find("at least one module"), std::string::npos) << error_of("");

  Plan p;
  p.dp = 8;
  p.gbs = 8;
  p.seq = 4096;
  p.recompute = Recompute::kSelective;
  EXPECT_TRUE(validate_plan(llama_8b(), p, 8, test_gpu()).empty());  // core_attn, the default
  for (const RecomputeModule m : {RecomputeModule::kMlaUpProj, RecomputeModule::kMoeAct, RecomputeModule::kSharedExperts,
                                  RecomputeModule::kLayernorm}) {
    p.recompute_modules = module_bit(m);
    EXPECT_TRUE(has_key(validate_plan(llama_8b(), p, 8, test_gpu()), "recompute_modules")) << recompute_module_name(m);
  }
  p.recompute_modules = module_bit(RecomputeModule::kMlp);
  EXPECT_TRUE(validate_plan(llama_8b(), p, 8, test_gpu()).empty());
  const model::ModelSpec moe = testing::small_moe(4, 2048);  // every layer MoE, no shared expert
  EXPECT_NE(recompute_modules_error(moe, module_bit(RecomputeModule::kMlp)).find("no dense MLP layer"), std::string::npos);
  EXPECT_EQ(recompute_modules_error(moe, module_bit(RecomputeModule::kMoeAct) | module_bit(RecomputeModule::kLayernorm)), "");
  EXPECT_NE(recompute_modules_error(moe, module_bit(RecomputeModule::kSharedExperts)).find("no shared experts"),
            std::string::npos);
  p.recompute = Recompute::kFull;
  p.recompute_modules = module_bit(RecomputeModule::kMlaUpProj);
  EXPECT_TRUE(validate_plan(llama_8b(), p, 8, test_gpu()).empty());
}

}  // namespace
}  // namespace orrery::train

namespace orrery::train {
namespace {

// Placement of model chunks (Plan::virtual_stage). Interleaved pp 4 x vp 2: chunk c of rank s is
// virtual stage 4c + s, the head on rank 3. ZB-V pp 4: the V 0 1 2 3 | 3 2 1 0 over the ranks, so chunk
// 1 of rank s is 7 - s and rank 0 runs both the embedding (virtual stage 0) and the head (7). Each
// mapping is a bijection of (rank, chunk) onto the 8 virtual stages, and its inverse gives them back.
// Layers go by virtual stage: 16 layers in 8 chunks of 2 put chunk 1 of rank 1 (virtual stage 5, or 6
// in the V) at layer 10 (12). With one layer in the first and the last chunk, 26 layers are
// 1 + 6 x 4 + 1 (chunk k starts at 0, 1, 5, 9, 13, 17, 21, 25): the head's chunk is layer 25 on rank 3
// after its 4 layers of chunk 0 (virtual stage 3), or on the V's rank 0 after its 1 layer (0).
TEST(Plan, VirtualStagesFollowTheInterleavedOrderOrTheV) {
  for (Schedule schedule : {Schedule::kInterleaved, Schedule::kZeroBubbleV}) {
    Plan p;
    p.pp = 4;
    p.vp = 2;
    p.schedule = schedule;
    const bool v = schedule == Schedule::kZeroBubbleV;
    std::vector<int> seen(8, 0);
    for (int64_t s = 0; s < 4; ++s) {
      for (int64_t c = 0; c < 2; ++c) {
        const int64_t k = p.virtual_stage(s, c);
        EXPECT_EQ(k, c == 0 ? s : (v ? 7 - s : 4 + s));
        ++seen[static_cast<size_t>(k)];
        EXPECT_EQ(p.stage_of_virtual(k), s);
        EXPECT_EQ(p.chunk_of_virtual(k), c);
        EXPECT_EQ(p.runs_embedding(s, c), s == 0 && c == 0);
        EXPECT_EQ(p.runs_head(s, c), c == 1 && s == (v ? 0 : 3));
      }
    }
    EXPECT_EQ(seen, std::vector<int>(8, 1));
    EXPECT_EQ(p.head_stage(), v ? 0 : 3);
    EXPECT_EQ(p.splits_backward(), v);
    // Even layers: 16 over 8 chunks of 2, placed by virtual stage.
    EXPECT_EQ(chunk_layers(p, 16, 1, 1).first, v ? 12 : 10);
    p.first_stage_layers = 1;
    p.last_stage_layers = 1;
    const LayerRange head = chunk_layers(p, 26, v ? 0 : 3, 1);
    EXPECT_EQ(head.first, 25);
    EXPECT_EQ(head.count, 1);
    EXPECT_EQ(head.offset, v ? 1 : 4);  // after the rank's chunk 0: 1 layer (V's rank 0) or 4 (rank 3)
    EXPECT_EQ(stage_layers(p, 26, 0), v ? 2 : 5);  // V: layers 0 and 25; interleaved: 0 and 13-16
  }
}

// shorten_end_chunks against the 405B layouts of its comment (126 layers): pp 16 x vp 8, 128 chunks,
// share (126 + 2) / 128 = 1, end chunks of 0 layers (Llama 3); pp 8 x vp 8, 64 chunks, share 2, ends 1
// (NeMo's 1 + 62 x 2 + 1); pp 8 x vp 2, 16 chunks, share 8, ends 7 (torchtitan's 7 + 14 x 8 + 7), as
// pp 4 x vp 4. Each passes validate_plan's pp_layers and puts the 126 layers on the ranks. No change
// where the chunks divide the layers (pp 2 x vp 3: 6 | 126), where they divide neither the layers nor
// the layers + 2 (pp 5 x vp 2: 10) or at vp 1.
TEST(Plan, ShortenedEndChunksGiveThe405bLayouts) {
  const auto model = model::ModelSpec::llama({126, 16384, 128, 8, 53248, 128256, 8192});
  for (const auto& [pp, vp, ends] : {std::tuple<int64_t, int64_t, int64_t>{16, 8, 0}, {8, 8, 1}, {8, 2, 7}, {4, 4, 7}}) {
    Plan p;
    p.pp = pp;
    p.vp = vp;
    p.gbs = pp;
    p.schedule = Schedule::kInterleaved;
    ASSERT_TRUE(shorten_end_chunks(p, model.layers)) << pp << " x " << vp;
    EXPECT_EQ(p.first_stage_layers, ends);
    EXPECT_EQ(p.last_stage_layers, ends);
    EXPECT_TRUE(validate_plan(model, p, pp, test_gpu()).empty()) << pp << " x " << vp;
    int64_t total = 0;
    for (int64_t s = 0; s < pp; ++s) total += stage_layers(p, model.layers, s);
    EXPECT_EQ(total, model.layers);
  }
  for (const auto& [pp, vp] : {std::pair<int64_t, int64_t>{2, 3}, {5, 2}, {16, 1}}) {
    Plan p;
    p.pp = pp;
    p.vp = vp;
    EXPECT_FALSE(shorten_end_chunks(p, model.layers)) << pp << " x " << vp;
    EXPECT_EQ(p.first_stage_layers, -1);
  }
}

}  // namespace
}  // namespace orrery::train
