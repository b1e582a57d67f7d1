#include "train/plan.h"

#include <gtest/gtest.h>

#include "train/test_support.h"

#include "model/model_spec.h"

namespace orrery::train {
namespace {

using testing::test_gpu;

model::ModelSpec llama_8b() {
  return model::ModelSpec::llama({32, 4096, 32, 8, 14336, 128256, 8192});
}

bool has_key(const std::vector<ConstraintError>& e, const std::string& key) {
  for (const auto& x : e) {
    if (x.key == key) return true;
  }
  return false;
}

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

TEST(Plan, GroupStridesFollowTpCpDpPpOrder) {
  Plan p;
  p.tp = 8;
  p.cp = 2;
  p.dp = 4;
  p.pp = 2;
  EXPECT_EQ(group_stride(p, Group::kTp), 1);
  EXPECT_EQ(group_stride(p, Group::kCp), 8);
  EXPECT_EQ(group_stride(p, Group::kDp), 16);
  EXPECT_EQ(group_stride(p, Group::kPp), 64);
  p.sharding = Sharding::kZero3;
  p.shard_group = 2;  // HSDP: shards of 2, 2 replicas
  EXPECT_EQ(group_size(p, Group::kDpShard), 2);
  EXPECT_EQ(group_size(p, Group::kDpReplica), 2);
  EXPECT_EQ(group_stride(p, Group::kDpReplica), 32);
}

}  // namespace
}  // namespace orrery::train
