#include "train/schedule_csv.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "train/simulator.h"
#include "train/test_support.h"

namespace orrery::train {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_schedule_csv(text, "order.csv");
  } catch (const InputError& e) {
    return e.where().to_string() + ": " + e.message() + (e.hint().empty() ? "" : " " + e.hint());
  }
  return "";
}

bool same(const PipelinePass& a, const PipelinePass& b) {
  return std::tie(a.kind, a.microbatch, a.chunk, a.full, a.paired) == std::tie(b.kind, b.microbatch, b.chunk, b.full, b.paired);
}

// Written and read back, every built-in order is itself: passes, chunks, micro-batches, whole backwards
// and pairs, on every rank; the placement (the V or the interleaved table) and the splitting come back
// as the plan has them.
TEST(ScheduleCsv, BuiltInOrdersComeBackUnchanged) {
  struct Case {
    Schedule schedule;
    int64_t pp, vp, m;
    bool pairs;
  };
  for (const Case& x : {Case{Schedule::kOneFOneB, 4, 1, 8, false}, Case{Schedule::kGpipe, 3, 1, 5, false},
                        Case{Schedule::kZeroBubble, 4, 1, 6, false}, Case{Schedule::kInterleaved, 4, 2, 8, false},
                        Case{Schedule::kInterleaved, 2, 3, 4, true}, Case{Schedule::kZeroBubbleV, 4, 2, 9, false},
                        Case{Schedule::kDualPipeV, 3, 2, 8, true}, Case{Schedule::kInterleavedZeroBubble, 4, 2, 10, false},
                        Case{Schedule::kLoopedBfs, 2, 3, 3, false}}) {
    Plan p;
    p.pp = x.pp;
    p.vp = x.vp;
    p.gbs = x.m;
    p.schedule = x.schedule;
    if (x.pairs && x.schedule == Schedule::kInterleaved) {
      p.ep = 2;  // combined 1F1B's pairs
      p.ep_a2a_overlap = true;
    }
    const std::string where = std::string(schedule_name(x.schedule)) + " pp " + std::to_string(x.pp);
    const CustomSchedule cs = parse_schedule_csv(schedule_csv_text(p), "rt.csv");
    EXPECT_EQ(cs.ranks, x.pp) << where;
    EXPECT_EQ(cs.stages, x.pp * x.vp) << where;
    EXPECT_EQ(cs.microbatches, x.m) << where;
    EXPECT_EQ(cs.v, p.v_shape()) << where;
    EXPECT_EQ(cs.split, p.splits_backward()) << where;
    Plan q = p;
    q.ep_a2a_overlap = false;
    q.overlap_f_b = true;
    use_custom_schedule(q, std::make_shared<const CustomSchedule>(cs));
    EXPECT_EQ(q.vp, x.vp) << where;
    for (int64_t s = 0; s < x.pp; ++s) {
      const std::vector<PipelinePass> a = pipeline_order(p, s), b = pipeline_order(q, s);
      ASSERT_EQ(a.size(), b.size()) << where << " rank " << s;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same(a[i], b[i])) << where << " rank " << s << " pass " << i;
    }
  }
}

// torch's format by hand: p = 2 ranks, stages 0 and 2 on rank 0, 1 and 3 on rank 1 (the interleaved
// placement), m = 2; rank 1's empty cells are idle steps, the communication actions are skipped, and
// rank 0 ends with an overlapped pair of its forward of stage 2 and its whole backward of stage 0,
// written once the split I/W of the others make the order a splitting one.
TEST(ScheduleCsv, ReadsTorchsFormat) {
  const std::string text =
      "# rank 0\n"
      "0F0,0F1,0SEND_F0,2F0,2I0,2W0,0B0,2F1,2I1,2W1,0B1\n"
      ",1F0,1F1,3F0,3I0,3W0,1I0,1W0,3F1,3I1,3W1,1I1,1W1\n";
  const CustomSchedule cs = parse_schedule_csv(text, "t.csv");
  EXPECT_EQ(cs.ranks, 2);
  EXPECT_EQ(cs.stages, 4);
  EXPECT_EQ(cs.microbatches, 2);
  EXPECT_FALSE(cs.v);
  EXPECT_TRUE(cs.split);
  ASSERT_EQ(cs.order[0].size(), 12u);  // 10 actions, the two B written as B + W (whole)
  EXPECT_TRUE(same(cs.order[0][2], PipelinePass{PassKind::kForward, 0, 1}));
  EXPECT_TRUE(same(cs.order[0][5], PipelinePass{PassKind::kBackward, 0, 0, true}));
  EXPECT_TRUE(same(cs.order[0][6], PipelinePass{PassKind::kWeight, 0, 0, true}));
  ASSERT_EQ(cs.order[1].size(), 12u);
  EXPECT_TRUE(same(cs.order[1][5], PipelinePass{PassKind::kBackward, 0, 0}));  // 1I0
  // The V: stages 0 and 3 on rank 0, 1 and 2 on rank 1; no I or W, so B is a plain backward.
  const CustomSchedule v = parse_schedule_csv("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n", "v.csv");
  EXPECT_TRUE(v.v);
  EXPECT_FALSE(v.split);
  EXPECT_TRUE(same(v.order[0][1], PipelinePass{PassKind::kForward, 0, 1}));
  EXPECT_TRUE(same(v.order[0][2], PipelinePass{PassKind::kBackward, 0, 1}));
  // A pair.
  const CustomSchedule pair = parse_schedule_csv("0F0,0F1,0B0,0B1\n", "one.csv");
  EXPECT_EQ(pair.order[0].size(), 4u);
  const CustomSchedule paired = parse_schedule_csv("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n", "one.csv");
  ASSERT_EQ(paired.order[0].size(), 4u);
  EXPECT_TRUE(paired.order[0][1].paired && paired.order[0][2].paired);
  EXPECT_FALSE(paired.order[0][0].paired || paired.order[0][3].paired);
}

// Every malformed or inconsistent file is one InputError naming the file, the line and the step.
TEST(ScheduleCsv, ErrorsNameTheFileLineAndStep) {
  struct Case {
    std::string text, expected;
  };
  for (const Case& x : {
           Case{"", "order.csv: no pipeline rank rows"},
           Case{"0F0,0X0,0B0\n", "order.csv:1: step 1: unknown action type in '0X0'"},
           Case{"0F0,0Fx,0B0\n", "order.csv:1: step 1: expected a micro-batch number after '0F' in '0Fx'"},
           Case{"0F0,F0,0B0\n", "order.csv:1: step 1: expected an action <stage><F|B|I|W><micro-batch> such as 2F0, found 'F0'"},
           Case{"0F0,0SEND_Fx\n", "order.csv:1: step 1: expected a micro-batch number after SEND_F in '0SEND_Fx'"},
           Case{"0F0,1F0\n1B0,0B0\n", "order.csv:2: step 0: stage 1 runs on ranks 0 and 1"},
           Case{"0F0,0B0\n2F0,2B0\n", "order.csv: the actions name stages 0 2: expected stages 0 .. pp*vp - 1 for the 2 rank rows"},
           Case{"0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n2X", "order.csv:3: step 0: unknown action type in '2X'"},
           Case{"0F0,1F0,1B0,0B0\n2F0,3F0,3B0,2B0\n", "order.csv: stage placement not supported"},
           Case{"0F0,0F0,0B0\n", "order.csv:1: step 1: '0F0' runs twice (first on line 1, step 0)"},
           Case{"0F1,0B1\n", "order.csv:1: no forward of stage 0 micro-batch 0 (0F0)"},
           Case{"0F0,0F1,0B0\n", "order.csv:1: no backward of stage 0 micro-batch 1: expected 0B1, or 0I1 and 0W1"},
           Case{"0F0,0I0,0B0,0W0\n", "order.csv:1: stage 0 micro-batch 0 runs a whole backward (B) and a split one (I/W)"},
           Case{"0F0,0W0,0I0\n", "order.csv:1: step 1: the order cannot run: rank 0 waits at '0W0' for 0I0"},
           Case{"0F0,0B0\n1B0,1F0\n", "order.csv:1: step 1: the order cannot run: rank 0 waits at '0B0' for 1B0 (or 1I0)"},
           Case{"0F0,(0F1;0F2)OVERLAP_F_B\n", "order.csv:1: step 1: an overlapped pair is a forward and a whole backward"},
           Case{"0F0,(0F1;0B0)\n", "order.csv:1: step 1: expected an overlapped pair"},
       }) {
    const std::string e = error_of(x.text);
    EXPECT_EQ(e.substr(0, x.expected.size()), x.expected) << x.text;
  }
  EXPECT_NE(error_of("0F0,0Z0\n").find("did you mean"), std::string::npos);
  try {
    read_schedule_csv("/nonexistent/order.csv");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(), "cannot open the schedule file");
  }
}

// The plan must match the file: pp rows, pp vp stages, gbs / (dp mbs) micro-batches (key schedule_csv).
TEST(ScheduleCsv, PlanMustMatchTheFile) {
  const model::ModelSpec model = model::ModelSpec::llama({8, 1024, 8, 8, 4096, 32000, 1024});
  const hw::GpuSpec gpu = testing::test_gpu();
  Plan p;
  p.pp = 2;
  p.gbs = 2;
  use_custom_schedule(p, std::make_shared<const CustomSchedule>(parse_schedule_csv(
                             "0F0,2F0,0F1,2F1,2B0,0B0,2B1,0B1\n1F0,3F0,1F1,3B0,3F1,1B0,3B1,1B1\n", "o.csv")));
  EXPECT_EQ(p.vp, 2);
  EXPECT_TRUE(validate_plan(model, p, 2, gpu).empty());
  p.gbs = 4;
  auto e = validate_plan(model, p, 2, gpu);
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front().key, "schedule_csv");
  EXPECT_EQ(e.front().message, "o.csv runs m=2 micro-batches per step; the plan has gbs/(dp*mbs) = 4/(1*1) = 4");
  p.gbs = 2;
  p.vp = 4;
  e = validate_plan(model, p, 2, gpu);
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front().message, "o.csv has 2 rank rows and 4 stages; the plan has pp=2 and pp*vp=8");
}

}  // namespace
}  // namespace orrery::train
