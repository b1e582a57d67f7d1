#include "train/simulator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "train/test_support.h"

#include "train/schedule.h"
#include "train/task_graph.h"

namespace orrery::train {
namespace {

using testing::synthetic;
using testing::test_gpu;

// Every collective takes `coll`, every pipeline transfer `p2p`.
class FixedComm final : public CommModel {
 public:
  FixedComm(Time coll, Time p2p) : coll_(coll), p2p_(p2p) {}
  Time collective(coll::Op, Bytes, Group) const override { return coll_; }
  Time p2p(Bytes) const override { return p2p_; }

 private:
  Time coll_, p2p_;
};

struct Fixture {
  model::ModelSpec model = model::ModelSpec::llama({16, 1024, 8, 8, 4096, 32000, 1024});
  hw::GpuSpec gpu = test_gpu();
  compute::ComputeModel cm{gpu};
  Time opt() const { return cm.memory_bound(Bytes(0)); }  // the optimizer of a rank with no parameters
};

Time ms(double v) { return Time::seconds(v * 1e-3); }

TEST(TaskGraph, OrderedStreamRunsInProgramOrderAndFifoInReadyOrder) {
  TaskGraph g;
  const StreamId a = g.add_stream(true);
  const StreamId b = g.add_stream(false);
  const TaskId x = g.add({a, Time::ms(2)});
  const TaskId y = g.add({a, Time::ms(1)});
  const TaskId s = g.add({b, Time::ms(5)});
  g.depend(y, s);  // y waits for s although x finished earlier
  const auto t = g.run();
  EXPECT_EQ(t[static_cast<size_t>(x)].end, Time::ms(2));
  EXPECT_EQ(t[static_cast<size_t>(y)].start, Time::ms(5));
  EXPECT_EQ(t[static_cast<size_t>(y)].end, Time::ms(6));
}

TEST(TaskGraph, FillerRunsWhileTheNextTaskWaits) {
  TaskGraph g;
  const StreamId a = g.add_stream(true);
  const StreamId b = g.add_stream(false);
  const TaskId wait = g.add({b, Time::ms(3)});
  const TaskId head = g.add({a, Time::ms(1)});
  Task f{a, Time::ms(2)};
  f.filler = true;
  const TaskId fill = g.add(f);
  g.depend(head, wait);
  const auto t = g.run();
  EXPECT_EQ(t[static_cast<size_t>(fill)].start, Time::zero());
  EXPECT_EQ(t[static_cast<size_t>(head)].start, Time::ms(3));
}

// Link sharing (processor sharing on a resource). Two 4 ms tasks on one resource from two streams,
// both ready at 0: each runs at half rate throughout and both end at 8 ms.
TEST(TaskGraph, TasksOnOneResourceShareItEqually) {
  TaskGraph g;
  const StreamId a = g.add_stream(false);
  const StreamId b = g.add_stream(false);
  Task t{a, Time::ms(4)};
  t.resource = 0;
  const TaskId x = g.add(t);
  t.stream = b;
  const TaskId y = g.add(t);
  const auto r = g.run();
  EXPECT_EQ(r[static_cast<size_t>(x)].end, Time::ms(8));
  EXPECT_EQ(r[static_cast<size_t>(y)].end, Time::ms(8));
}

// A = 3 ms of work from 0; B = 1 ms of work, ready at 1 ms (after a 1 ms task elsewhere). 0-1: A alone
// does 1 ms. From 1 both run at half rate: B's 1 ms takes 2 ms (ends at 3), A does 1 more. From 3 A is
// alone with 1 ms left: ends at 4. On different resources they would end at 3 and 2; on one stream the
// second simply waits for the first, at full rate.
TEST(TaskGraph, ShareChangesWhenATaskJoinsOrLeaves) {
  for (int variant = 0; variant < 3; ++variant) {
    TaskGraph g;
    const StreamId a = g.add_stream(false);
    const StreamId b = g.add_stream(false);
    const StreamId c = g.add_stream(false);
    Task ta{a, Time::ms(3)};
    ta.resource = 0;
    const TaskId x = g.add(ta);
    const TaskId gate = g.add({c, Time::ms(1)});
    Task tb{variant == 2 ? a : b, Time::ms(1)};
    tb.resource = variant == 1 ? 1 : 0;
    const TaskId y = g.add(tb);
    g.depend(y, gate);
    const auto r = g.run();
    const Time ex = r[static_cast<size_t>(x)].end;
    const Time ey = r[static_cast<size_t>(y)].end;
    if (variant == 0) {
      EXPECT_EQ(ex, Time::ms(4));
      EXPECT_EQ(ey, Time::ms(3));
    } else if (variant == 1) {
      EXPECT_EQ(ex, Time::ms(3));
      EXPECT_EQ(ey, Time::ms(2));
    } else {
      EXPECT_EQ(ex, Time::ms(3));
      EXPECT_EQ(ey, Time::ms(4));
    }
  }
}

// Zero communication, equal stages: GPipe and 1F1B take (m + p - 1)(tf + tb) (bubble (p-1)/m of the
// ideal m (tf + tb)), plus the optimizer kernel.
TEST(Simulator, GpipeAnd1F1BBubbleIsPMinusOneOverM) {
  Fixture f;
  const int64_t p = 4, m = 8;
  // Per stage (4 layers): tf = 4 ms, tb = 8 ms (input 4 + weight 4).
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  for (Schedule s : {Schedule::kGpipe, Schedule::kOneFOneB}) {
    Plan plan;
    plan.pp = p;
    plan.gbs = m;
    plan.schedule = s;
    const StepResult r = simulate_step(f.model, plan, c, f.cm, comm);
    const Time ideal = ms(12) * m;
    EXPECT_EQ(r.step_time, ideal + ms(12) * (p - 1) + f.opt()) << schedule_name(s);
    EXPECT_NEAR((r.step_time - f.opt()) / ideal - 1.0, (p - 1.0) / m, 1e-9);
  }
}

// Interleaved with v chunks: bubble (p - 1)(tf + tb)/v, a fraction (p-1)/(v m).
TEST(Simulator, InterleavedBubbleShrinksByV) {
  Fixture f;
  const int64_t p = 4, m = 8, v = 2;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  Plan plan;
  plan.pp = p;
  plan.vp = v;
  plan.gbs = m;
  plan.schedule = Schedule::kInterleaved;
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm);
  const Time ideal = ms(12) * m;
  EXPECT_EQ(r.step_time, ideal + ms(6) * (p - 1) + f.opt());
}

// ZB-H1 (Qi et al. 2024, Sec. 2): bubble (p - 1)(T_F + T_B - T_W); with T_F = T_B = T_W = T that is
// (p - 1) T, a third of 1F1B's (p - 1) 3T.
TEST(Simulator, ZeroBubbleH1BubbleIsPMinusOneTimesFPlusBMinusW) {
  Fixture f;
  const int64_t p = 4, m = 8;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  Plan plan;
  plan.pp = p;
  plan.gbs = m;
  plan.schedule = Schedule::kZeroBubble;
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_EQ(r.step_time, ms(12) * m + ms(4) * (p - 1) + f.opt());
}

// ZB-V (Qi et al. 2024, sec. 6) with each chunk's F = B = W = t: the V has no bubble in its steady
// phase, so each rank is busy for its 2 chunks x m micro-batches x 3 passes = 6 m t, and the last rank
// cannot start before micro-batch 0 has come down the first arm through p - 1 chunk forwards; it is
// then never idle: step = (6m + p - 1) t. By hand for p = 2, m = 4 (virtual stages 0 and 3 on rank 0,
// 1 and 2 on rank 1; the orders are Schedule.ZeroBubbleVFollowsTorchsOrder's), in units of t:
//   rank 0: F0.0 0-1, F0.1 1-2, F0.2 2-3, F3.0 3-4, B3.0 4-5, W3.0 5-6, F3.1 6-7, B3.1 7-8, W3.1 8-9,
//           F0.3 9-10, B0.0 10-11, W0.0 11-12, F3.2 12-13, B3.2 13-14, W3.2 14-15, B0.1 15-16,
//           W0.1 16-17, F3.3 17-18, B3.3 18-19, W3.3 19-20, B0.2 20-21, W0.2 21-22, B0.3 22-23, W0.3 23-24
//   rank 1: F1.0 1-2, F2.0 2-3, F1.1 3-4, F2.1 4-5, B2.0 5-6, W2.0 6-7, F1.2 7-8, B1.0 8-9, W1.0 9-10,
//           F2.2 10-11, B2.1 11-12, W2.1 12-13, F1.3 13-14, B1.1 14-15, W1.1 15-16, F2.3 16-17,
//           B2.2 17-18, W2.2 18-19, B1.2 19-20, B2.3 20-21, B1.3 21-22, W1.2 22-23, W2.3 23-24, W1.3 24-25
// (F<virtual stage>.<micro-batch>; each pass waits for its rank's previous one, a forward for the
// previous virtual stage's, a B for the next one's): 25 = 6 x 4 + 1. Against ZB-H1's (p - 1) 2t on
// the same stages (its T_F = 2t per stage) and 1F1B's (p - 1) 6t.
TEST(Simulator, ZeroBubbleVBubbleIsTheFirstArmsFill) {
  Fixture f;
  const FixedComm comm(Time::zero(), Time::zero());
  for (const auto& [p, m, layers] : {std::tuple<int64_t, int64_t, int64_t>{2, 4, 4}, {4, 8, 16}, {4, 12, 8}}) {
    // One chunk of layers / (2p) layers of 1 ms per pass each: t = layers / (2p) ms.
    const ModelCosts c = synthetic(static_cast<int>(layers), ms(1), ms(1), ms(1));
    const Time t = ms(1) * (layers / (2 * p));
    Plan plan;
    plan.pp = p;
    plan.vp = 2;
    plan.gbs = m;
    plan.schedule = Schedule::kZeroBubbleV;
    const model::ModelSpec model = model::ModelSpec::llama({layers, 1024, 8, 8, 4096, 32000, 1024});
    ASSERT_TRUE(validate_plan(model, plan, p, f.gpu).empty());
    const StepResult r = simulate_step(model, plan, c, f.cm, comm);
    EXPECT_EQ(r.step_time, t * (6 * m + p - 1) + f.opt()) << "p " << p << " m " << m;
  }
}

// The orders and timelines worked by hand below: p = 2, two chunks per rank (the V's, or interleaved),
// m = 4; the timelines on four_layers(), one layer per chunk.
Plan two_chunk_plan(Schedule schedule) {
  Plan plan;
  plan.pp = 2;
  plan.vp = 2;
  plan.gbs = 4;
  plan.schedule = schedule;
  return plan;
}
const model::ModelSpec& four_layers() {
  static const model::ModelSpec m = model::ModelSpec::llama({4, 1024, 8, 8, 4096, 32000, 1024});
  return m;
}

// The step's backward passes start where `b_start` (ms by rank, chunk, micro-batch) says, each once.
void expect_backward_starts(const StepResult& r, const std::map<std::tuple<int, int, int>, int>& b_start) {
  size_t seen = 0;
  for (const PassTiming& x : r.passes) {
    if (x.kind != PassKind::kBackward) continue;
    EXPECT_EQ(x.start, ms(b_start.at({x.stage, x.chunk, x.microbatch})))
        << "rank " << x.stage << " chunk " << x.chunk << " mb " << x.microbatch;
    ++seen;
  }
  EXPECT_EQ(seen, b_start.size());
}

// DualPipeV with each chunk's F = B = W = t and no communication, p = 2, m = 4 (orders as in
// Schedule.DualPipeVFollowsTorchsOrder; virtual stages 0 and 3 on rank 0, 1 and 2 on rank 1; a whole
// backward B* takes 2t and its input gradient leaves at its end), by hand in units of t:
//   rank 0: F0.0 0-1, F0.1 1-2, F0.2 2-3, F3.0 3-4, B3.0 4-5, W3.0 5-6, F3.1 6-7, F0.3 7-8, B3.1* 8-10,
//           F3.2 10-11, B0.0* 11-13, B3.2* 13-15, F3.3 15-16, B0.1* 17-19, B3.3* 19-21, B0.2 21-22,
//           W0.2 22-23, B0.3 23-24, W0.3 24-25
//   rank 1: F1.0 1-2, F2.0 2-3, F1.1 3-4, F2.1 4-5, F1.2 5-6, B2.0* 6-8, F2.2 8-9, B1.0* 9-11,
//           F1.3 11-12, B2.1* 12-14, F2.3 14-15, B1.1* 15-17, B2.2* 17-19, B1.2* 19-21, B2.3 21-22,
//           B1.3 22-23, W2.3 23-24, W1.3 24-25
// (F<virtual stage>.<micro-batch>): 25t, each rank busy 24t. With no collectives the pairs change
// nothing, overlapped or not. Rank 0's B0.1* waits for B1.1*'s end at 17, not its B part's at 16.
TEST(Simulator, DualPipeVStepFollowsItsOrder) {
  Fixture f;
  const FixedComm comm(Time::zero(), Time::zero());
  const ModelCosts c = synthetic(4, ms(1), ms(1), ms(1));  // one layer per chunk: t = 1 ms
  Plan plan = two_chunk_plan(Schedule::kDualPipeV);
  const model::ModelSpec& model = four_layers();
  ASSERT_TRUE(validate_plan(model, plan, 2, f.gpu).empty());
  // Backward starts by (rank, chunk, micro-batch), from the hand timeline above.
  const std::map<std::tuple<int, int, int>, int> b_start = {
      {{0, 1, 0}, 4},  {{0, 1, 1}, 8},  {{0, 0, 0}, 11}, {{0, 1, 2}, 13}, {{0, 0, 1}, 17}, {{0, 1, 3}, 19},
      {{0, 0, 2}, 21}, {{0, 0, 3}, 23}, {{1, 1, 0}, 6},  {{1, 0, 0}, 9},  {{1, 1, 1}, 12}, {{1, 0, 1}, 15},
      {{1, 1, 2}, 17}, {{1, 0, 2}, 19}, {{1, 1, 3}, 21}, {{1, 0, 3}, 22}};
  StepOptions opts;
  opts.record_passes = true;
  for (bool overlap : {true, false}) {
    plan.overlap_f_b = overlap;
    const StepResult r = simulate_step(model, plan, c, f.cm, comm, opts);
    EXPECT_EQ(r.step_time, ms(25) + f.opt()) << overlap;
    expect_backward_starts(r, b_start);
  }
}

// The interleaved zero-bubble order (Schedule.InterleavedZeroBubbleFollowsTorchsOrder, p = 2, v = 2,
// m = 4) with each chunk's F = B = W = t and no communication; virtual stages 0 and 2 on rank 0, 1 and 3
// on rank 1 (chunk c of rank s is c p + s). By hand in units of t, F<virtual stage>.<micro-batch>, each
// pass waiting for its rank's previous one, a forward for the previous virtual stage's, a B for the
// next one's (the last virtual stage's for its own forward):
//   rank 0: F0.0 0-1, F0.1 1-2, F2.0 2-3, F2.1 3-4, B2.0 5-6, W2.0 6-7, F0.2 7-8, B2.1 8-9, W2.1 9-10,
//           F0.3 10-11, B0.0 11-12, W0.0 12-13, F2.2 13-14, B0.1 14-15, W0.1 15-16, F2.3 16-17,
//           B2.2 17-18, W2.2 18-19, B2.3 19-20, W2.3 20-21, B0.2 21-22, W0.2 22-23, B0.3 23-24, W0.3 24-25
//   rank 1: F1.0 1-2, F1.1 2-3, F3.0 3-4, B3.0 4-5, F3.1 5-6, B3.1 6-7, W3.0 7-8, F1.2 8-9, B1.0 9-10,
//           W3.1 10-11, F1.3 11-12, B1.1 12-13, W1.0 13-14, F3.2 14-15, B3.2 15-16, W1.1 16-17,
//           F3.3 17-18, B3.3 18-19, W3.2 19-20, B1.2 20-21, W3.3 21-22, B1.3 22-23, W1.2 23-24, W1.3 24-25
// 25t, each rank busy 24t; Megatron's interleaved 1F1B on the same chunks idles (p - 1)(tf + tb)/v =
// 3t (Simulator.InterleavedBubbleShrinksByV's rule), 27t.
TEST(Simulator, InterleavedZeroBubbleStepFollowsItsOrder) {
  Fixture f;
  const FixedComm comm(Time::zero(), Time::zero());
  const ModelCosts c = synthetic(4, ms(1), ms(1), ms(1));  // one layer per chunk: t = 1 ms
  Plan plan = two_chunk_plan(Schedule::kInterleavedZeroBubble);
  const model::ModelSpec& model = four_layers();
  ASSERT_TRUE(validate_plan(model, plan, 2, f.gpu).empty());
  const std::map<std::tuple<int, int, int>, int> b_start = {
      {{0, 1, 0}, 5},  {{0, 1, 1}, 8},  {{0, 0, 0}, 11}, {{0, 0, 1}, 14}, {{0, 1, 2}, 17}, {{0, 1, 3}, 19},
      {{0, 0, 2}, 21}, {{0, 0, 3}, 23}, {{1, 1, 0}, 4},  {{1, 1, 1}, 6},  {{1, 0, 0}, 9},  {{1, 0, 1}, 12},
      {{1, 1, 2}, 15}, {{1, 1, 3}, 18}, {{1, 0, 2}, 20}, {{1, 0, 3}, 22}};
  StepOptions opts;
  opts.record_passes = true;
  const StepResult r = simulate_step(model, plan, c, f.cm, comm, opts);
  EXPECT_EQ(r.step_time, ms(25) + f.opt());
  expect_backward_starts(r, b_start);
  plan.schedule = Schedule::kInterleaved;
  EXPECT_EQ(simulate_step(model, plan, c, f.cm, comm).step_time, ms(27) + f.opt());
}

// Every interleaved zero-bubble order runs to the end (no rank waits on a pass that waits on it), with
// fewer micro-batches than stages too (torch pads those with idle slots), and keeps each rank busy its
// 3 v m chunk passes.
TEST(Simulator, InterleavedZeroBubbleOrdersRunToTheEnd) {
  Fixture f;
  const FixedComm comm(Time::zero(), Time::zero());
  for (const auto& [pp, v, m] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 8}, {4, 2, 1}, {4, 2, 2}, {4, 2, 3},
                                 {4, 4, 6}, {4, 2, 10}, {3, 2, 12}, {2, 4, 6}, {8, 2, 24}, {8, 2, 5}}) {
    const int64_t layers = pp * v;
    const ModelCosts c = synthetic(static_cast<int>(layers), ms(1), ms(1), ms(1));
    const model::ModelSpec model = model::ModelSpec::llama({layers, 1024, 8, 8, 4096, 32000, 1024});
    Plan plan;
    plan.pp = pp;
    plan.vp = v;
    plan.gbs = m;
    plan.schedule = Schedule::kInterleavedZeroBubble;
    ASSERT_TRUE(validate_plan(model, plan, pp, f.gpu).empty()) << pp << " " << v << " " << m;
    StepOptions opts;
    opts.record_passes = true;
    const StepResult r = simulate_step(model, plan, c, f.cm, comm, opts);
    std::vector<Time> busy(static_cast<size_t>(pp));
    for (const PassTiming& x : r.passes) busy[static_cast<size_t>(x.stage)] += x.end - x.start;
    for (int64_t s = 0; s < pp; ++s) {
      EXPECT_EQ(busy[static_cast<size_t>(s)], ms(3) * (v * m)) << "p " << pp << " v " << v << " m " << m << " stage " << s;
    }
    EXPECT_GE(r.step_time, ms(3) * (v * m) + f.opt());
  }
}

// Looped BFS (Schedule.LoopedBfsRunsEachChunkBreadthFirst), p = 2, v = 2, m = 3, each chunk's F = t and
// whole backward 2t, no communication; by hand (F/B<virtual stage>.<micro-batch>):
//   rank 0: F0.0 0-1, F0.1 1-2, F0.2 2-3, F2.0 3-4, F2.1 4-5, F2.2 5-6, B2.2 9-11, B2.1 11-13,
//           B2.0 13-15, B0.2 15-17, B0.1 17-19, B0.0 19-21
//   rank 1: F1.0 1-2, F1.1 2-3, F1.2 3-4, F3.0 4-5, F3.1 5-6, F3.2 6-7, B3.2 7-9, B3.1 9-11, B3.0 11-13,
//           B1.2 13-15, B1.1 15-17, B1.0 17-19
// 21t, each rank busy 18t.
TEST(Simulator, LoopedBfsStepFollowsItsOrder) {
  Fixture f;
  const FixedComm comm(Time::zero(), Time::zero());
  const ModelCosts c = synthetic(4, ms(1), ms(1), ms(1));
  Plan plan = two_chunk_plan(Schedule::kLoopedBfs);
  plan.gbs = 3;
  const model::ModelSpec& model = four_layers();
  ASSERT_TRUE(validate_plan(model, plan, 2, f.gpu).empty());
  EXPECT_EQ(simulate_step(model, plan, c, f.cm, comm).step_time, ms(21) + f.opt());
}

// DualPipeV's pairs on one rank (p = 1, so the step is the compute stream's sum): rank 0's order has
// the first F0 and B1 apart, then (F1 & B0), then m - 2 times (F0 & B1) (F1 & B0): 2m - 3 pairs. A
// chunk of n layers has kernels n tf forward, n (tb + tw) backward, exposed TP collectives n g each
// way and EP all-to-alls n ef and n eb. Back to back a pass costs all of them; a pair overlapped costs
// the rest of its work K = n (tf + tb + tw + 2g), the TP collectives included as they are, plus
// bulk_extra(K, C, share) = max(C - K, C share) for its all-to-alls C = n (ef + eb) (the kernels slowed
// to 1 - share while the all-to-alls run beside them), so each pair saves C - max(C - K, C share). With
// n = 2, tf = tb = tw = 1 ms, share 1/4: ef = eb = 1 ms, g = 0 (C = 4 < K = 6) saves 4 - 1 = 3 ms a
// pair; ef = eb = 4 ms (C = 16 > K) saves 16 - 10 = 6 ms = K; with g = 1 ms, K = 10 and it saves
// 16 - 6 = 10 ms.
TEST(Simulator, DualPipeVPairsHideTheirAllToAllsBehindEachOthersWork) {
  Fixture f;
  const FixedComm comm(Time::zero(), Time::zero());
  const model::ModelSpec model = model::ModelSpec::llama({4, 1024, 8, 8, 4096, 32000, 1024});
  for (const auto& [e, g, saved] : {std::tuple<double, double, double>{1.0, 0.0, 3.0}, {4.0, 0.0, 6.0}, {4.0, 1.0, 10.0}}) {
    ModelCosts c = synthetic(4, ms(1), ms(1), ms(1));
    for (LayerCost& l : c.layer) {
      l.ep_fwd = l.ep_bwd = ms(e);
      l.tp_fwd = l.tp_bwd = ms(g);
    }
    c.pair_comm_share = 0.25;
    for (int64_t m : {2, 4, 7}) {
      Plan plan;
      plan.pp = 1;
      plan.vp = 2;
      plan.gbs = m;
      plan.schedule = Schedule::kDualPipeV;
      ASSERT_TRUE(validate_plan(model, plan, 1, f.gpu).empty());
      plan.overlap_f_b = false;
      const StepResult apart = simulate_step(model, plan, c, f.cm, comm);
      // Back to back: 2 chunks x m micro-batches x 2 layers x (3 ms of kernels + 2e + 2g of collectives).
      EXPECT_EQ(apart.step_time, ms(4.0 * static_cast<double>(m) * (3.0 + 2.0 * e + 2.0 * g)) + f.opt());
      plan.overlap_f_b = true;
      const StepResult paired = simulate_step(model, plan, c, f.cm, comm);
      EXPECT_NEAR((apart.step_time - paired.step_time).to_seconds(), 1e-3 * saved * static_cast<double>(2 * m - 3), 1e-11)
          << "e " << e << " g " << g << " m " << m;
    }
  }
}

// Megatron-Core's combined 1F1B (Plan::ep_a2a_overlap) on one stage: F0, then (F i+1 & B i) for i < m - 1,
// then B m-1 (combined_1f1b_schedule_for_no_pipelining): m - 1 pairs of a forward and a whole backward of
// the stage's 2 layers, K = 2 (tf + tb + tw) = 6 ms of kernels and C = 2 (ef + eb) of all-to-alls, each
// saving C - max(C - K, C/4) as DualPipeV's pairs do (above): 3 ms at ef = eb = 1 ms, 6 ms at 4 ms. On the
// interleaved schedule the steady phase's F B pairs are the ones marked (Megatron pairs them there).
TEST(Simulator, CombinedOneFOneBPairsEachForwardWithThePreviousBackward) {
  Fixture f;
  const FixedComm comm(Time::zero(), Time::zero());
  const model::ModelSpec model = model::ModelSpec::llama({2, 1024, 8, 8, 4096, 32000, 1024});
  Plan plan;
  plan.gbs = 5;
  plan.ep_a2a_overlap = true;
  std::string text;
  for (const PipelinePass& x : pipeline_order(plan, 0)) {
    text += std::string(x.paired ? "&" : "") + (x.kind == PassKind::kForward ? "F" : "B") + std::to_string(x.microbatch) + " ";
  }
  EXPECT_EQ(text, "F0 &F1 &B0 &F2 &B1 &F3 &B2 &F4 &B3 B4 ");
  for (const auto& [e, saved] : {std::pair<double, double>{1.0, 3.0}, {4.0, 6.0}}) {
    ModelCosts c = synthetic(2, ms(1), ms(1), ms(1));
    for (LayerCost& l : c.layer) l.ep_fwd = l.ep_bwd = ms(e);
    c.pair_comm_share = 0.25;
    for (int64_t m : {2, 5}) {
      plan.gbs = m;
      plan.ep_a2a_overlap = false;
      const StepResult apart = simulate_step(model, plan, c, f.cm, comm);
      EXPECT_EQ(apart.step_time, ms(2.0 * static_cast<double>(m) * (3.0 + 2.0 * e)) + f.opt());
      plan.ep_a2a_overlap = true;
      const StepResult paired = simulate_step(model, plan, c, f.cm, comm);
      EXPECT_NEAR((apart.step_time - paired.step_time).to_seconds(), 1e-3 * saved * static_cast<double>(m - 1), 1e-11)
          << "e " << e << " m " << m;
    }
  }
  // Interleaved, pp 2, vp 2, m 4: stage s runs 2 (2 - s - 1) + (2 - 1) 2 forwards before the steady phase
  // (4 and 2), whose 8 - warm-up F B steps pair but where the backward needs that very forward. The table
  // (groups of 2): entries 0-7 run (chunk, micro-batch) (0,0) (0,1) (1,0) (1,1) (0,2) (0,3) (1,2) (1,3); the
  // backward of entry j runs its micro-batch on the other chunk. Stage 0: F(4+j) with B(j), j < 4: (0,2)
  // with (1,0), (0,3) with (1,1), (1,2) with (0,0), (1,3) with (0,1): 4 pairs. Stage 1: F(2+j) with B(j),
  // j < 6: (1,0) with (1,0), (1,1) with (1,1), then (0,2) with (0,0) and (0,3) with (0,1), then (1,2) and
  // (1,3) with themselves again: the loss chunk's forward is followed by its own backward, which depends
  // on it, so 2 pairs.
  Plan v;
  v.pp = 2;
  v.vp = 2;
  v.gbs = 4;
  v.ep = 2;
  v.schedule = Schedule::kInterleaved;
  v.ep_a2a_overlap = true;
  for (int64_t s = 0; s < 2; ++s) {
    const auto o = pipeline_order(v, s);
    int64_t pairs = 0;
    for (size_t i = 0; i + 1 < o.size(); ++i) {
      if (o[i].paired && o[i].kind == PassKind::kForward) {
        EXPECT_TRUE(o[i + 1].paired && o[i + 1].kind == PassKind::kBackward);
        ++pairs;
      }
    }
    EXPECT_EQ(pairs, s == 0 ? 4 : 2) << "stage " << s;
  }
}

// Without overlap the DP all-reduce is exposed once after the last backward: m (tf + tb) + T_dp.
// With overlap, the buckets of all layers but the last one finished hide behind the backward.
TEST(Simulator, DataParallelReductionIsExposedOnlyWithoutOverlap) {
  Fixture f;
  const int64_t m = 4;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1'000'000);
  const FixedComm comm(ms(5), Time::zero());
  Plan plan;
  plan.dp = 2;
  plan.gbs = 2 * m;
  plan.overlap_grad_reduce = false;
  plan.bucket_bytes = 1;  // one bucket per layer with overlap
  const Time opt = f.cm.memory_bound(Bytes::from_double(16 * 1e6 * 30.0));
  const StepResult exposed = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_EQ(exposed.step_time, ms(48) * m + ms(5) + opt);
  EXPECT_EQ(exposed.breakdown[static_cast<size_t>(TimeCategory::kDp)], ms(5));
  plan.overlap_grad_reduce = true;
  const StepResult hidden = simulate_step(f.model, plan, c, f.cm, comm);
  // 1F1B on one stage: F0 B0 F1 B1 ...; the last backward starts at 3 x 48 + 16 ms. 16 layer buckets of
  // 5 ms queue on the DP stream; the first starts after the first layer's backward (2 ms): they end
  // 2 + 16 x 5 = 82 ms into it, after its 32 ms, so the optimizer waits for them.
  EXPECT_EQ(hidden.step_time, ms(48) * (m - 1) + ms(16) + ms(2) + ms(5) * 16 + opt);
  // Buckets of 4 layers (16 MB of fp32 gradients): complete when the backward (2 ms a layer) has gone
  // through their lowest layer, 8, 16, 24 and 32 ms into it; each 5 ms reduction ends before the next
  // bucket completes, so only the last one's 5 ms follow the backward's 32 ms.
  plan.bucket_bytes = 16'000'000;
  EXPECT_EQ(simulate_step(f.model, plan, c, f.cm, comm).step_time, ms(48) * (m - 1) + ms(16) + ms(32) + ms(5) + opt);
}

// A ring all-reduce over the plan's group g moves 2 (n - 1) / n of its bytes through each rank's link
// (Patarasuk and Yuan 2009); at 1 GB/s, zero for a one-rank group, as CommModel's contract says.
class RingComm final : public CommModel {
 public:
  explicit RingComm(const Plan& plan) : plan_(plan) {}
  Time collective(coll::Op, Bytes size, Group g) const override {
    const auto n = static_cast<double>(group_size(plan_, g));
    return n <= 1 ? Time::zero() : Time::seconds(size.to_double() * 2.0 * (n - 1.0) / n / 1e9);
  }
  Time p2p(Bytes) const override { return Time::zero(); }

 private:
  const Plan& plan_;
};

// Routed experts' gradients reduce over the expert-data-parallel group (Megatron-Core's
// expert_data_parallel group, dp x cp / ep ranks), the rest over dp x cp. 4 layers of 1 M parameters,
// 0.75 M of them routed experts', fp32 gradients: 4 MB dense and 12 MB expert gradients per rank, one
// exposed all-reduce after the backward (no overlap), dp 4, at 1 GB/s with the ring's 2 (n - 1) / n:
//   ep 1: both over 4 ranks:             (4 + 12) MB x 1.5 = 24 ms
//   ep 2: dense over 4, experts over 2:  4 x 1.5 + 12 x 1 = 18 ms
//   ep 4: experts over 1 rank (each rank holds the only copy of its experts): 4 x 1.5 = 6 ms.
TEST(Simulator, RoutedExpertGradientsReduceOverTheExpertDataParallelGroup) {
  Fixture f;
  f.model = model::ModelSpec::llama({4, 1024, 8, 8, 4096, 32000, 1024});
  ModelCosts c = synthetic(4, ms(1), ms(1), ms(1), 1'000'000);
  for (LayerCost& l : c.layer) l.expert_params = 750'000;
  Plan plan;
  plan.dp = 4;
  plan.gbs = 4;
  plan.overlap_grad_reduce = false;
  const RingComm comm(plan);
  StepOptions o;
  o.trace_stages = {0};
  for (const auto& [ep, dp_ms, expert_events] : {std::tuple{1, 24.0, 1}, std::tuple{2, 18.0, 1}, std::tuple{4, 6.0, 0}}) {
    plan.ep = ep;
    const StepResult r = simulate_step(f.model, plan, c, f.cm, comm, o);
    EXPECT_NEAR(r.breakdown[static_cast<size_t>(TimeCategory::kDp)].to_seconds(), dp_ms * 1e-3, 1e-12) << "ep " << ep;
    int experts = 0;
    for (const TraceEvent& e : r.trace) experts += e.name.rfind("expert all-reduce 12.0 MB", 0) == 0 ? 1 : 0;
    EXPECT_EQ(experts, expert_events) << "ep " << ep;
  }
}

// ZeRO-1 with the parameter all-gather overlapped (Megatron-Core's overlap_param_gather): the gathers
// run bucket by bucket on their own stream and a layer's first forward waits only for its own bucket.
// 16 layers of tf = tb = tw = 1 ms, one bucket per layer, every collective g ms, gradient reduction
// not overlapped (one exposed reduce-scatter of g ms after the last backward), m = 4 (48 ms each).
// g = 0.5 ms < tf: layer k's bucket is gathered by 0.5 (k + 1) ms, before layer k - 1's forward
// ends, so only the first bucket is exposed: step = 0.5 + 4 x 48 + 0.5 + optimizer.
// g = 3 ms > tf: the first forward runs at the gathers' pace, layer k ending at 3 (k + 1) + 1, the
// last at 49 ms instead of 16: step = 33 + 4 x 48 + 3 + optimizer. Gathering the whole chunk before
// its first layer (the model before 2026-11-26) would expose 16 x 3 = 48 ms there instead of 33.
TEST(Simulator, ParameterGatherOverlapsTheFirstForwardBucketByBucket) {
  Fixture f;
  const int64_t m = 4;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1'000'000);
  Plan plan;
  plan.dp = 2;
  plan.gbs = 2 * m;
  plan.sharding = Sharding::kZero1;
  plan.overlap_grad_reduce = false;
  plan.overlap_param_gather = true;
  plan.bucket_bytes = 1;
  const Time opt = f.cm.memory_bound(Bytes::from_double(16 * 1e6 / 2 * 30.0));
  const FixedComm fast(ms(0.5), Time::zero());
  EXPECT_EQ(simulate_step(f.model, plan, c, f.cm, fast).step_time, ms(0.5) + ms(48) * m + ms(0.5) + opt);
  const FixedComm slow(ms(3), Time::zero());
  const StepResult r = simulate_step(f.model, plan, c, f.cm, slow);
  EXPECT_EQ(r.step_time, ms(33) + ms(48) * m + ms(3) + opt);
  EXPECT_EQ(r.breakdown[static_cast<size_t>(TimeCategory::kDp)], ms(36));
  // Buckets of 4 layers (16 MB of fp32 gradients each): 4 gathers of 3 ms ending at 3, 6, 9, 12 ms.
  // Bucket 0's layers run 3-7 ms; each later gather ends before the previous bucket's 4 ms of layers
  // do (6 <= 7, 9 <= 11, 12 <= 15): only the first gather is exposed.
  plan.bucket_bytes = 16'000'000;
  EXPECT_EQ(simulate_step(f.model, plan, c, f.cm, slow).step_time, ms(3) + ms(48) * m + ms(3) + opt);
}

// Activation offload, layer by layer (Transformer Engine's double-buffered handler): pp 1, one
// micro-batch, L = 16 synthetic layers of forward f = 1 ms and backward b = 2 ms (input 1 + weight 1),
// each saving S bytes, copied over the test GPU's 32 GB/s PCIe at hw::kHostCopyEfficiency (0.8), in
// x = S / 25.6 GB/s per direction. Slow copies, S = 76.8 MB, x = 3 ms > f, b: layer l's copy to the host starts when its forward ends and
// the copies run back to back, d2h(l) = [f + l x, f + (l + 1) x]; the forward of layer l >= 2 waits for
// d2h(l - 2), so the forward ends at f + (L - 2) x + f. The top two layers' copies back start as their
// copies out end (the forward has ended), r(L-2) = [f + (L-1) x, f + L x], r(L-1) = [f + L x, f + (L+1) x];
// every lower one starts when the backward two layers up has ended and the host-to-device copy stream
// is free, which with x > b is the previous copy's end: r(l) ends at f + (2L - 1 - l) x + b for l <= L-3,
// and B(0) runs after r(0): step = f + (2L - 1) x + 2b + optimizer = 1 + 93 + 4 = 98 ms + optimizer
// (without offload L (f + b) = 48 ms). Fast copies, S = 12.8 MB, x = 0.5 ms <= f, b: every copy out ends
// before the forward two layers up starts, and every copy back (after the top two, which start when
// the forward ends, one after the other) before the backward that needs it: only the top two copies
// back are exposed, step = L (f + b) + 2x = 49 ms + optimizer. Offloading only the first 8 layers
// (Plan::offload_layers) with the slow copies: d2h(l) as above for l < 8, the last ending at f + 8x =
// 25 ms; layer 8 waits for d2h(6) (22 ms) and layer 9 for d2h(7), so the forward ends at 25 + 7f = 32
// ms. Layers 15..8 need nothing back: their backward runs 32-48 ms, B(9) ending at 46. r(7) starts
// then (46-49), r(6) when B(8) ends and the stream is free (49-52); from there each copy back follows
// the backward two layers up and the previous copy (x > b), r(l) ending at 49 + 3 (7 - l), so B(0)
// runs 70-72: step = 72 ms + optimizer.
TEST(Simulator, ActivationOffloadCopiesLayerByLayerBesideTheCompute) {
  Fixture f;
  const int64_t layers = 16;
  auto step = [&](double saved_mb, int64_t offload_layers) {
    ModelCosts c = synthetic(layers, ms(1), ms(1), ms(1));
    for (LayerCost& l : c.layer) l.act_none = Bytes::from_double(saved_mb * 1e6);
    Plan plan;
    plan.gbs = 1;
    plan.activation_offload = offload_layers != 0;
    plan.offload_layers = offload_layers == 0 ? -1 : offload_layers;
    return simulate_step(f.model, plan, c, f.cm, testing::NoComm{}).step_time;
  };
  // Copy times are S / (0.8 x 32 GB/s), exact to well under a nanosecond.
  auto near = [&](Time a, Time b) { EXPECT_NEAR(a.to_seconds(), b.to_seconds(), 1e-9); };
  near(step(76.8, 0), ms(48) + f.opt());
  near(step(76.8, -1), ms(98) + f.opt());
  near(step(12.8, -1), ms(49) + f.opt());
  near(step(76.8, 8), ms(72) + f.opt());
  // The same slow layers on a GPU whose host path is NVLink-C2C at 4 x the PCIe rate: x = 0.75 ms <= f,
  // b, so only the top two copies back are exposed (the fast case above): 48 + 1.5 ms.
  hw::GpuSpec c2c = f.gpu;
  c2c.host_link = hw::HostLink{"NVLink-C2C", Bandwidth(128e9)};
  const compute::ComputeModel cm(c2c);
  ModelCosts c = synthetic(layers, ms(1), ms(1), ms(1));
  for (LayerCost& l : c.layer) l.act_none = Bytes::from_double(76.8e6);
  Plan plan;
  plan.gbs = 1;
  plan.activation_offload = true;
  near(simulate_step(f.model, plan, c, cm, testing::NoComm{}).step_time, ms(49.5) + f.opt());
}

// Optimizer offload of a share F (Plan::optimizer_offload_fraction) on one GPU with 16 layers of 6.25 M
// parameters (1e8 in all, no sharding): the host's F x 1e8 parameters send their gradients down and
// their parameters up (4 + 2 bytes each) at 0.8 x 32 GB/s = 25.6 GB/s and take 1 / 0.69e9 s each on the
// CPU (kCpuAdamParamsPerSecond), while the GPU steps the other (1 - F) x 1e8 at its memory-bound rate;
// the step's optimizer task is the longer of the two. F = 1: 6e8 / 25.6e9 s + 1e8 / 0.69e9 s =
// 23.4375 + 144.9275 ms of offload; F = 0.5 half of that; F = 0.001 leaves the GPU's part the longer.
// The rest of the step (the layers' compute) is the same in all of them.
TEST(Simulator, OptimizerOffloadStepsTheHostShareBesideTheGpuShare) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 6'250'000);
  auto run = [&](bool offload, double fraction) {
    Plan plan;
    plan.gbs = 1;
    plan.optimizer_offload = offload;
    plan.optimizer_offload_fraction = fraction;
    return simulate_step(f.model, plan, c, f.cm, testing::NoComm{});
  };
  const double params = 1e8;
  const Plan base;
  auto gpu_part = [&](double share) {
    return f.cm.memory_bound(Bytes::from_double(share * params * static_cast<double>(base.optimizer_step_bytes())));
  };
  const Time layers = run(false, 1.0).step_time - gpu_part(1.0);
  auto cpu_part = [&](double share) { return Time::seconds(share * (6e8 / 25.6e9 + 1e8 / 0.69e9)); };
  auto near = [](Time a, Time b) { EXPECT_NEAR(a.to_seconds(), b.to_seconds(), 1e-9); };
  ASSERT_EQ(kCpuAdamParamsPerSecond, 0.69e9);  // the rate the expectations above are derived with
  near(cpu_part(1.0), ms(23.4375 + 144.92753623188406));
  const StepResult all = run(true, 1.0);
  near(all.step_time, layers + cpu_part(1.0));
  near(all.breakdown[static_cast<size_t>(TimeCategory::kOffload)], cpu_part(1.0));
  near(run(true, 0.5).step_time, layers + cpu_part(0.5));
  ASSERT_GT(gpu_part(0.999), cpu_part(0.001));
  near(run(true, 0.001).step_time, layers + gpu_part(0.999));
}

// Delayed fp8 scaling: Transformer Engine all-reduces the amaxes after every forward and every backward
// pass of a chunk, on the compute stream. pp 1, tp 2, dp 1, m = 4 micro-batches, every collective 0.1 ms
// (FixedComm; the synthetic layers have no TP collectives of their own and dp 1 reduces nothing): only
// the TP level is a group, so the step grows by m x 2 passes x 0.1 ms = 0.8 ms over bf16's, and current
// scaling, which keeps no amax history, adds nothing. The breakdown books it as data-parallel time.
TEST(Simulator, DelayedFp8ScalingReducesAmaxesAfterEachPass) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  const FixedComm comm(ms(0.1), Time::zero());
  Plan plan;
  plan.tp = 2;
  plan.gbs = 4;
  const StepResult bf16 = simulate_step(f.model, plan, c, f.cm, comm);
  plan.precision = hw::DType::kFp8;
  plan.fp8_recipe = Fp8Recipe::kDelayed;
  const StepResult delayed = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_EQ(delayed.step_time, bf16.step_time + ms(0.8));
  EXPECT_EQ(delayed.breakdown[static_cast<size_t>(TimeCategory::kDp)],
            bf16.breakdown[static_cast<size_t>(TimeCategory::kDp)] + ms(0.8));
  plan.fp8_recipe = Fp8Recipe::kCurrent;
  EXPECT_EQ(simulate_step(f.model, plan, c, f.cm, comm).step_time, bf16.step_time);
}

// A stage with its own communication model (a slow link on one of its ranks): the exposed all-reduce of
// the test above takes that model's 12 ms instead of 5 ms, so the step grows by exactly 7 ms.
TEST(Simulator, AStagesOwnCommunicationModelTimesItsCollectives) {
  Fixture f;
  const int64_t m = 4;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1'000'000);
  const FixedComm comm(ms(5), Time::zero());
  const FixedComm slow(ms(12), Time::zero());
  Plan plan;
  plan.dp = 2;
  plan.gbs = 2 * m;
  plan.overlap_grad_reduce = false;
  const StepResult nominal = simulate_step(f.model, plan, c, f.cm, comm);
  StepOptions o;
  o.stage_comm = {&slow};
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm, o);
  EXPECT_EQ(r.step_time - nominal.step_time, ms(7));
  EXPECT_EQ(r.breakdown[static_cast<size_t>(TimeCategory::kDp)], ms(12));
}

// A pipeline transfer takes the slower end's time. pp = 2, m = 1, 1F1B, 8 layers per stage of
// tf = tb = tw = 1 ms: F on stage 0 (8), send (x), F and B on stage 1 (8 + 16), send back (x), B on
// stage 0 (16): 48 ms + 2x. Stage 1's model sends in 3 ms, stage 0's in 0: x = 3 ms whichever stage
// holds the slow model.
TEST(Simulator, APipelineTransferRunsAtItsSlowerEnd) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  const FixedComm slow(Time::zero(), ms(3));
  Plan plan;
  plan.pp = 2;
  plan.gbs = 1;
  for (size_t stage : {0u, 1u}) {
    StepOptions o;
    o.stage_comm.assign(2, nullptr);
    o.stage_comm[stage] = &slow;
    const StepResult r = simulate_step(f.model, plan, c, f.cm, comm, o);
    EXPECT_EQ(r.step_time, ms(48) + ms(6) + f.opt()) << "slow stage " << stage;
  }
}

// Every collective takes `coll` alone and runs on the network (CommModel::link), so a rank's
// communication streams share its NIC.
class SharedNicComm final : public CommModel {
 public:
  explicit SharedNicComm(Time coll) : coll_(coll) {}
  Time collective(coll::Op, Bytes, Group) const override { return coll_; }
  Time p2p(Bytes) const override { return Time::zero(); }
  std::optional<LinkKind> link(Group) const override { return LinkKind::kNic; }

 private:
  Time coll_;
};

// FSDP (ZeRO-3) over 2 ranks: in the backward the all-gather of the next layer (dp-gather stream)
// runs beside the reduce-scatter of the last one (dp stream), both on the rank's NIC. Under equal
// sharing a collective of c ms alone that overlaps the other stream's collectives for X ms (only two
// streams, so at most two run at once) does X/2 of work in that time and c - X/2 alone: its duration
// is c + X/2. The test checks that on every DP task of the traced stage, that some do overlap, and that
// without link sharing every one lasts exactly c and the step is shorter.
TEST(Simulator, FsdpGatherAndReduceShareTheNic) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1'000'000);
  const Time coll = ms(3);
  const SharedNicComm comm(coll);
  Plan plan;
  plan.dp = 2;
  plan.gbs = 2;
  plan.sharding = Sharding::kZero3;
  StepOptions o;
  o.trace_stages = {0};
  const StepResult shared = simulate_step(f.model, plan, c, f.cm, comm, o);
  Time overlapped_total;
  int checked = 0;
  for (const TraceEvent& e : shared.trace) {
    if (e.stream != "dp" && e.stream != "dp-gather") continue;
    Time x;
    for (const TraceEvent& other : shared.trace) {
      if ((other.stream != "dp" && other.stream != "dp-gather") || other.stream == e.stream) continue;
      const Time lo = std::max(e.start, other.start);
      const Time hi = std::min(e.end, other.end);
      if (hi > lo) x += hi - lo;
    }
    const int64_t expect = (coll + x).picoseconds() - x.picoseconds() / 2;
    EXPECT_NEAR(static_cast<double>((e.end - e.start).picoseconds()), static_cast<double>(expect), 4.0) << e.name;
    overlapped_total += x;
    ++checked;
  }
  EXPECT_GE(checked, 32);  // 16 gathers before the forward, 16 before the backward, 16 reductions
  EXPECT_GT(overlapped_total, Time::zero());
  o.share_links = false;
  const StepResult alone = simulate_step(f.model, plan, c, f.cm, comm, o);
  for (const TraceEvent& e : alone.trace) {
    if (e.stream == "dp" || e.stream == "dp-gather") {
      EXPECT_EQ(e.end - e.start, coll) << e.name;
    }
  }
  EXPECT_GT(shared.step_time, alone.step_time);
}

// FSDP2's copies (Plan::fsdp_impl, torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py). ZeRO-3
// over 2 ranks, 16 layers of 1,000,000 parameters, one micro-batch, every collective 10 us (each
// layer's all-gather, prefetched one layer ahead, hides behind the 1 ms layer before it). On the
// compute stream each layer adds, forward and backward, the copy-out of its gathered bf16 buffer into
// the parameters (read 2 + write 2 B per element: 4 MB), and in the backward the copy-in of its bf16
// gradients cast to the fp32 reduce dtype (2 + 4 B: 6 MB): 16 x (2 x t(4 MB) + t(6 MB)) with t the
// memory-bound time of those bytes. The all-gather's own copy-in (the rank's fp32 shard, half of the
// layer, cast to bf16: 500,000 x (4 + 2) B) runs on the gather stream, hidden except before the first
// layer, whose forward waits for it: + t(3 MB). The flat implementation (Megatron-FSDP, FSDP1) copies
// nothing; a DP-sharded plan without ZeRO-3 is the same under either.
TEST(Simulator, Fsdp2CopiesItsBuffersAroundEachCollective) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1'000'000);
  const FixedComm comm(ms(0.01), Time::zero());
  Plan plan;
  plan.dp = 2;
  plan.gbs = 2;
  plan.sharding = Sharding::kZero3;
  const StepResult flat = simulate_step(f.model, plan, c, f.cm, comm);
  plan.fsdp_impl = FsdpImpl::kFsdp2;
  const StepResult fsdp2 = simulate_step(f.model, plan, c, f.cm, comm);
  const auto t = [&](double bytes) { return f.cm.memory_bound(Bytes::from_double(bytes)); };
  const Time per_layer = t(4e6) * 2 + t(6e6);
  const Time expected = per_layer * 16 + t(3e6);
  EXPECT_EQ(fsdp2.step_time - flat.step_time, expected);
  // The compute-stream copies count as DP time, as does the first gather's longer wait.
  EXPECT_EQ(fsdp2.breakdown[static_cast<size_t>(TimeCategory::kDp)] - flat.breakdown[static_cast<size_t>(TimeCategory::kDp)],
            expected);
  EXPECT_EQ(fsdp2.breakdown[static_cast<size_t>(TimeCategory::kCompute)], flat.breakdown[static_cast<size_t>(TimeCategory::kCompute)]);
  plan.sharding = Sharding::kZero2;
  const StepResult zero2 = simulate_step(f.model, plan, c, f.cm, comm);
  plan.fsdp_impl = FsdpImpl::kFlat;
  EXPECT_EQ(simulate_step(f.model, plan, c, f.cm, comm).step_time, zero2.step_time);
}

// A pass's exposed collective shares the NIC with the DP stream. Two layers, one micro-batch, dp 2,
// per-layer gradient buckets reduced during the backward (4 ms each alone), each layer's backward 2 ms
// of kernels and 2 ms of expert all-to-all exposed (alone), forward 1 ms per layer without any:
//   forward 0-2; layer 1: kernels 2-4, all-to-all 4-6 (alone); its reduce-scatter starts at 6;
//   layer 0: kernels 6-8 while the reduction runs alone (2 of its 4 ms done by 8); from 8 the
//   all-to-all and the reduction share the NIC: 2 ms of work left each at half rate, both end at 12;
//   layer 0's reduction then runs alone 12-16; the optimizer follows. Step 16 ms + optimizer.
// Without link sharing the pieces are 4 ms each and the reductions run beside them at full rate:
// layer 1 2-6, its reduction 6-10, layer 0 6-10, its reduction 10-14: 14 ms + optimizer.
// Breakdown with sharing: compute 2 + 2 + 2, EP 2 + 4 (2 of them the shared stretch), DP 4 (the wait).
TEST(Simulator, APassCollectiveSharesTheNicWithTheDpStream) {
  const model::ModelSpec model = model::ModelSpec::llama({2, 1024, 8, 8, 4096, 32000, 1024});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm{gpu};
  ModelCosts c = synthetic(2, ms(1), ms(1), ms(1), 1'000'000);
  for (LayerCost& l : c.layer) l.ep_bwd = ms(2);
  const SharedNicComm comm(ms(4));
  Plan plan;
  plan.dp = 2;
  plan.gbs = 2;
  plan.bucket_bytes = 1;
  const Time opt = cm.memory_bound(Bytes::from_double(2 * 1e6 * 30.0));
  const StepResult shared = simulate_step(model, plan, c, cm, comm);
  EXPECT_EQ(shared.step_time, ms(16) + opt);
  EXPECT_EQ(shared.breakdown[static_cast<size_t>(TimeCategory::kCompute)], ms(6));
  EXPECT_EQ(shared.breakdown[static_cast<size_t>(TimeCategory::kEp)], ms(6));
  EXPECT_EQ(shared.breakdown[static_cast<size_t>(TimeCategory::kDp)], ms(4));
  StepOptions o;
  o.share_links = false;
  EXPECT_EQ(simulate_step(model, plan, c, cm, comm, o).step_time, ms(14) + opt);
}

TEST(Simulator, BreakdownSumsToStepTimeAndIsDeterministic) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1000);
  const FixedComm comm(ms(1), ms(0.5));
  Plan plan;
  plan.pp = 4;
  plan.dp = 2;
  plan.gbs = 16;
  plan.sharding = Sharding::kZero1;
  StepOptions o;
  o.trace_stages = {0, 3};
  const StepResult a = simulate_step(f.model, plan, c, f.cm, comm, o);
  const StepResult b = simulate_step(f.model, plan, c, f.cm, comm, o);
  EXPECT_EQ(a.step_time, b.step_time);
  Time sum;
  for (Time t : a.breakdown) sum += t;
  EXPECT_EQ(sum, a.step_time);
  EXPECT_GT(a.breakdown[static_cast<size_t>(TimeCategory::kPp)], Time::zero());
  ASSERT_FALSE(a.trace.empty());
  for (const TraceEvent& e : a.trace) EXPECT_TRUE(e.stage == 0 || e.stage == 3);
}

// A straggler stage twice as slow sets the pace: the steady state runs at its rate, so with m = 8 and
// p = 2 the step is at least m x its (tf + tb).
TEST(Simulator, SlowStageSetsThePace) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  Plan plan;
  plan.pp = 2;
  plan.gbs = 8;
  StepOptions o;
  o.stage_slowdown = {1.0, 2.0};
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm, o);
  // Stage 1: 8 layers, tf + tb = 24 ms, doubled: 48 ms per micro-batch; plus stage 0's first forward
  // (8 ms) before it and stage 0's last backward (16 ms) after it.
  EXPECT_EQ(r.step_time, ms(48) * 8 + ms(8) + ms(16) + f.opt());
}

// Uneven stages, pp = 2: 6 + 10 layers of tf = tb = tw = 1 ms, m = 8, 1F1B, free communication.
// Stage 1 (10 layers, tf + tb = 30 ms per micro-batch) is the bottleneck and, once fed, never idles:
// stage 0 (18 ms per micro-batch) stays ahead. Step = stage 0's first forward (6 ms) + 8 x 30 ms +
// stage 0's last backward (12 ms) + the optimizer.
TEST(Simulator, UnevenStagesLargestStageSetsThePace) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  Plan plan;
  plan.pp = 2;
  plan.gbs = 8;
  plan.first_stage_layers = 6;
  plan.last_stage_layers = 10;
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_EQ(r.step_time, ms(6) + ms(30) * 8 + ms(12) + f.opt());
  // Mirrored (10 + 6): stage 0 is the bottleneck (30 ms per micro-batch, 240 ms of work) and idles
  // once: after its two warm-up forwards (20 ms) it waits for micro-batch 0's gradient, back at
  // 10 + 6 + 12 = 28 ms; then it never waits (stage 1 returns each gradient 18 ms after the forward,
  // inside stage 0's next 30 ms). Step = 240 + 8 = 248 ms.
  plan.first_stage_layers = 10;
  plan.last_stage_layers = 6;
  const StepResult mirrored = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_EQ(mirrored.step_time, ms(248) + f.opt());
}

// A first stage without layers (Plan::first_stage_layers 0, Llama 3's embedding-only first chunk):
// pp 2, the 16 layers of tf = tb = tw = 1 ms all on stage 1, the embedding 2 ms forward and 1 ms
// backward on stage 0, m = 4, 1F1B, free communication. Stage 1 (48 ms per micro-batch) starts when
// micro-batch 0's embedding is done (2 ms) and never idles (stage 0 has the next input ready within 3 ms
// of each backward); stage 0's last backward (1 ms) follows stage 1's: step = 2 + 4 x 48 + 1 = 195 ms,
// plus the optimizer.
// The same under ZeRO-1 on dp 2 with free collectives, where the first forward runs layer by layer (the
// parameter buckets): the empty chunk is still one piece that carries the embedding.
TEST(Simulator, EmptyFirstStageCarriesTheEmbeddingAlone) {
  Fixture f;
  ModelCosts c = synthetic(16, ms(1), ms(1), ms(1));
  c.pre.fwd = ms(2);
  c.pre.bwd_weight = ms(1);
  Plan plan;
  plan.pp = 2;
  plan.gbs = 4;
  plan.first_stage_layers = 0;
  const StepResult r = simulate_step(f.model, plan, c, f.cm, testing::NoComm{});
  EXPECT_EQ(r.step_time, ms(195) + f.opt());
  plan.dp = 2;
  plan.gbs = 8;
  plan.sharding = Sharding::kZero1;
  const StepResult sharded = simulate_step(f.model, plan, c, f.cm, testing::NoComm{});
  EXPECT_EQ(sharded.step_time, ms(195) + f.opt());
}

// ZeRO-2 keeps only its shard of the gradients, so it reduce-scatters after every micro-batch's backward
// (DeepSpeed's stage 2: deepspeedai/DeepSpeed#2252), layer by layer; ZeRO-1 reduces once, in the last
// micro-batch. dp 2, pp 1, 16 layers of tf = tb = tw = 1 ms with 1e6 parameters each, m = 4, every
// collective 5 ms, parameter all-gather after the optimizer (no overlap). A layer's reduce-scatter is
// ready 2 ms after its backward starts; the first at 16 + 2 = 18 ms, and from then the gradient
// stream never idles: 4 x 16 reductions of 5 ms (320 ms) outrun the 4 x 48 ms of compute. The
// optimizer waits for the last micro-batch's reductions: step = 18 + 320 + optimizer + 5 (the gather).
TEST(Simulator, Zero2ReducesAfterEveryMicroBatch) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1000000);
  const FixedComm comm(ms(5), Time::zero());
  Plan plan;
  plan.dp = 2;
  plan.gbs = 8;
  plan.sharding = Sharding::kZero2;
  plan.overlap_param_gather = false;
  const Time opt = optimizer_step_time(plan, plan.local_optimizer_params(16000000, 0), f.cm);
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_EQ(r.step_time, ms(18 + 320 + 5) + opt);
  // ZeRO-1 reduces 64 MB of fp32 gradients once: its 40 MB buckets (10 and 6 layers) wait for the last
  // micro-batch, so the step is within two reductions of the compute (4 x 48 ms) and the gather.
  plan.sharding = Sharding::kZero1;
  const StepResult z1 = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_LE(z1.step_time, ms(4 * 48 + 2 * 5 + 5) + opt);
  EXPECT_GE(z1.step_time, ms(4 * 48 + 5) + opt);
}

// FSDP under pipeline parallelism (Plan::fsdp_keeps_gathered, PyTorch's pipelining): each layer is
// gathered once, at its first forward, and the stage's gradients are reduce-scattered once, after its
// last backward. dp 2, pp 2 (8 layers per stage), 16 layers of tf = tb = tw = 1 ms with 1e6 parameters,
// m = 4 (1F1B), every collective 5 ms, transfers free. Each stage's gather stream has layer i gathered
// at 5 (i + 1) ms, so stage 0's first forward ends at 41 ms instead of 8: a pipeline of forward 8 and
// backward 16 ms per stage, (m + p - 1) x 24 = 120 ms, shifted by 33 ms, ends stage 0's last backward
// at 153 ms (stage 1's at 137). Then 8 reduce-scatters of 5 ms: stage 0 at 193 ms, and its optimizer.
// ZeRO-3 as it runs without PP would gather every layer in every forward and backward instead
// (8 x 2 x 4 x 5 = 320 ms of gathers per stage): slower than this step's 193.
TEST(Simulator, FsdpUnderPipelineGathersOnceAndReducesAfterTheLastBackward) {
  Fixture f;
  const ModelCosts c = synthetic(16, ms(1), ms(1), ms(1), 1000000);
  const FixedComm comm(ms(5), Time::zero());
  Plan plan;
  plan.dp = 2;
  plan.pp = 2;
  plan.gbs = 8;
  plan.sharding = Sharding::kZero3;
  ASSERT_TRUE(plan.fsdp_keeps_gathered());
  const Time opt = optimizer_step_time(plan, plan.local_optimizer_params(8000000, 0), f.cm);
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm);
  EXPECT_EQ(r.step_time, ms(193) + opt);
  // The same pipeline under ZeRO-1 (bucketed gathers and reductions, which overlap the last backward)
  // is no slower: FSDP under PP moves the same bytes, later.
  plan.sharding = Sharding::kZero1;
  EXPECT_LE(simulate_step(f.model, plan, c, f.cm, comm).step_time, r.step_time);
}

// Interleaved with uneven end chunks: 14 layers of tf = tb = tw = 1 ms on pp 4 x vp 2 with one layer in
// the first and the last model chunk (model chunks k = c pp + s hold 1, 2, 2, 2, 2, 2, 2, 1 layers), m = 8.
// Each stage's compute stream does its layers' forward and backward, 3 ms per layer and micro-batch:
// stages 0 and 3 hold 1 + 2 = 3 layers (72 ms), stages 1 and 2 hold 2 + 2 = 4 (96 ms), each plus its
// optimizer step (one kernel launch: no parameters in these costs). The step is at
// least the busiest stage's 96 ms and, with free communication, at most the whole pipeline's work.
TEST(Simulator, InterleavedUnevenEndChunksDoEachStagesLayers) {
  Fixture f;
  const ModelCosts c = synthetic(14, ms(1), ms(1), ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  Plan plan;
  plan.pp = 4;
  plan.vp = 2;
  plan.schedule = Schedule::kInterleaved;
  plan.gbs = 8;
  plan.first_stage_layers = 1;
  plan.last_stage_layers = 1;
  const StepResult r = simulate_step(f.model, plan, c, f.cm, comm);
  ASSERT_EQ(r.stage_compute.size(), 4u);
  EXPECT_EQ(r.stage_compute[0], ms(72) + f.opt());  // and each stage's optimizer step
  EXPECT_EQ(r.stage_compute[1], ms(96) + f.opt());
  EXPECT_EQ(r.stage_compute[2], ms(96) + f.opt());
  EXPECT_EQ(r.stage_compute[3], ms(72) + f.opt());
  EXPECT_GE(r.step_time, ms(96));
  EXPECT_LE(r.step_time, ms(72 + 96 + 96 + 72) + f.opt());
}

TEST(Schedule, OneFOneBWarmupAndInterleavedChunks) {
  Plan p;
  p.pp = 4;
  p.gbs = 8;
  const auto o = pipeline_order(p, 0);
  ASSERT_EQ(o.size(), 16u);
  // Stage 0: 3 warm-up forwards, then F3 B0.
  EXPECT_EQ(o[3].kind, PassKind::kForward);
  EXPECT_EQ(o[3].microbatch, 3);
  EXPECT_EQ(o[4].kind, PassKind::kBackward);
  EXPECT_EQ(o[4].microbatch, 0);
  p.schedule = Schedule::kInterleaved;
  p.vp = 2;
  const auto q = pipeline_order(p, 0);
  ASSERT_EQ(q.size(), 32u);
  // Megatron: virtual micro-batch 4 on stage 0 is micro-batch 0 of chunk 1.
  EXPECT_EQ(q[4].chunk, 1);
  EXPECT_EQ(q[4].microbatch, 0);
}

// An order of v chunks per rank (the V's two by default) and m micro-batches with every backward split:
// every pass once, F before B before W.
void expect_v_passes_once_in_order(const std::vector<PipelinePass>& o, int64_t m, const std::string& where, int v = 2) {
  ASSERT_EQ(o.size(), static_cast<size_t>(3 * v * m)) << where;
  std::map<std::tuple<int, int, int>, size_t> at;  // (chunk, micro-batch, kind) -> position
  for (size_t i = 0; i < o.size(); ++i) {
    EXPECT_TRUE(at.emplace(std::tuple{o[i].chunk, o[i].microbatch, static_cast<int>(o[i].kind)}, i).second) << where;
  }
  for (int c = 0; c < v; ++c) {
    for (int mb = 0; mb < m; ++mb) {
      const size_t fw = at.at({c, mb, 0}), b = at.at({c, mb, 1}), w = at.at({c, mb, 2});
      EXPECT_LT(fw, b) << where;
      EXPECT_LT(b, w) << where;
    }
  }
}

// An order as text: F, B or W, then <chunk>.<micro-batch>, each followed by a space.
std::string order_text(const std::vector<PipelinePass>& o) {
  std::string out;
  for (const PipelinePass& x : o) {
    out += x.kind == PassKind::kForward ? 'F' : x.kind == PassKind::kBackward ? 'B' : 'W';
    out += std::to_string(x.chunk) + "." + std::to_string(x.microbatch) + " ";
  }
  return out;
}

// ZB-V's order against torch.distributed.pipelining's ScheduleZBVZeroBubble
// (_calculate_single_rank_operations), worked by hand for p = 2, m = 4 (n = max(2p - 1, m) = 4):
//   rank 0: warm-up 2(2 - 0) - 1 = 3 x F0; 0 x (F1 F0); 2 x (F1 B1 W1); steady while f1 < f0 or f0 < 4:
//     F0.3 B0.0 W0.0 F1.2 B1.2 W1.2 | (f0 = 4) B0.1 W0.1 F1.3 B1.3 W1.3; cool-down 0 x (B0 B1),
//     2 x (B0 W0): B0.2 W0.2 B0.3 W0.3.
//   rank 1: warm-up 1 x F0; 1 x (F1 F0); 1 x (F1 B1 W1): F0.0 F1.0 F0.1 F1.1 B1.0 W1.0; steady F0.2 B0.0
//     W0.0 F1.2 B1.1 W1.1 | F0.3 B0.1 W0.1 F1.3 B1.2 W1.2; cool-down 1 x (B0 B1): B0.2 B1.3; 1 x (B0 W0):
//     B0.3 W0.2; the W left of chunk 1: W1.3; of chunk 0: W0.3.
// (F<chunk>.<micro-batch>.) With m < 2p - 1 it drops the passes of micro-batches m and above from the
// order for 2p - 1; every order holds each pass once, F before B before W.
TEST(Schedule, ZeroBubbleVFollowsTorchsOrder) {
  const Plan p = two_chunk_plan(Schedule::kZeroBubbleV);
  auto text = order_text;
  EXPECT_EQ(text(pipeline_order(p, 0)),
            "F0.0 F0.1 F0.2 F1.0 B1.0 W1.0 F1.1 B1.1 W1.1 F0.3 B0.0 W0.0 F1.2 B1.2 W1.2 B0.1 W0.1 F1.3 B1.3 W1.3 "
            "B0.2 W0.2 B0.3 W0.3 ");
  EXPECT_EQ(text(pipeline_order(p, 1)),
            "F0.0 F1.0 F0.1 F1.1 B1.0 W1.0 F0.2 B0.0 W0.0 F1.2 B1.1 W1.1 F0.3 B0.1 W0.1 F1.3 B1.2 W1.2 B0.2 B1.3 "
            "B0.3 W0.2 W1.3 W0.3 ");
  for (const auto& [pp, m] : {std::pair<int64_t, int64_t>{4, 1}, {4, 3}, {4, 7}, {4, 9}, {8, 64}, {3, 5}}) {
    Plan q = p;
    q.pp = pp;
    q.gbs = m;
    for (int64_t s = 0; s < pp; ++s) {
      expect_v_passes_once_in_order(pipeline_order(q, s), m, fmt::format("pp {} m {} stage {}", pp, m, s));
    }
  }
}

// DualPipeV's order against torch.distributed.pipelining's ScheduleDualPipeV
// (_calculate_single_rank_operations), worked by hand for p = 2, m = 4. `*` marks a whole backward (B
// and its W, PipelinePass::full), `&` a pass of an overlapped pair (PipelinePass::paired).
//   rank 0: step 1, 2(p - 0 - 1) = 2 x F0: F0.0 F0.1; step 2, 1 x (F0 F1): F0.2 F1.0; step 3, 1 x (B1 W1
//     F1), B1 split and its W popped at once: B1.0 W1.0 F1.1; step 4, m - 2p + 0 + 1 = 1 x (F0 & B1)
//     (F1 & B0): F0.3 & B1.1*, F1.2 & B0.0*; step 5, 1 x (B1, F1 & B0): B1.2*, F1.3 & B0.1*; step 6, 1 x
//     (B1 B0), i = 0 = (0 + 1)/2 and rank 0 even: B1.3* then the split starts: B0.2 (W queued); step 7,
//     1 x (W, B0): W0.2 B0.3; step 8, 1 x W: W0.3.
//   rank 1 (the V's turn): step 2, 2 x (F0 F1): F0.0 F1.0 F0.1 F1.1; step 4, 4 - 4 + 2 = 2 iterations,
//     the first F0 and B1 not overlapped: F0.2 B1.0*, F1.2 & B0.0*, F0.3 & B1.1*, F1.3 & B0.1*; step 6,
//     2 x (B1 B0), split from i = 1 = (1 + 1)/2 on (rank 1 odd: from its B1): B1.2* B0.2* B1.3 B0.3;
//     step 8, 2 x W: W1.3 W0.3.
// Every order holds each pass once, F before B before W, the W right after its B when whole; a pair is
// a forward and the whole backward after it.
TEST(Schedule, DualPipeVFollowsTorchsOrder) {
  const Plan p = two_chunk_plan(Schedule::kDualPipeV);
  auto text = [](const std::vector<PipelinePass>& o) {
    std::string out;
    for (const PipelinePass& x : o) {
      if (x.kind == PassKind::kWeight && x.full) continue;  // shown as the B's `*`
      if (x.paired) out += '&';
      out += x.kind == PassKind::kForward ? 'F' : x.kind == PassKind::kBackward ? 'B' : 'W';
      out += std::to_string(x.chunk) + "." + std::to_string(x.microbatch) + (x.full ? "* " : " ");
    }
    return out;
  };
  EXPECT_EQ(text(pipeline_order(p, 0)),
            "F0.0 F0.1 F0.2 F1.0 B1.0 W1.0 F1.1 &F0.3 &B1.1* &F1.2 &B0.0* B1.2* &F1.3 &B0.1* B1.3* B0.2 W0.2 B0.3 W0.3 ");
  EXPECT_EQ(text(pipeline_order(p, 1)),
            "F0.0 F1.0 F0.1 F1.1 F0.2 B1.0* &F1.2 &B0.0* &F0.3 &B1.1* &F1.3 &B0.1* B1.2* B0.2* B1.3 B0.3 W1.3 W0.3 ");
  for (const auto& [pp, m] : {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {4, 13}, {3, 6}, {8, 64}, {5, 10}}) {
    Plan q = p;
    q.pp = pp;
    q.gbs = m;
    for (int64_t s = 0; s < pp; ++s) {
      const auto o = pipeline_order(q, s);
      expect_v_passes_once_in_order(o, m, fmt::format("pp {} m {} stage {}", pp, m, s));
      for (size_t i = 0; i < o.size(); ++i) {
        if (o[i].kind == PassKind::kBackward && o[i].full) {
          ASSERT_LT(i + 1, o.size());
          EXPECT_TRUE(o[i + 1].kind == PassKind::kWeight && o[i + 1].full && o[i + 1].microbatch == o[i].microbatch &&
                      o[i + 1].chunk == o[i].chunk);
        }
        if (o[i].paired && o[i].kind == PassKind::kForward) {
          ASSERT_LT(i + 2, o.size());
          EXPECT_TRUE(o[i + 1].paired && o[i + 1].full && o[i + 1].kind == PassKind::kBackward);
          EXPECT_NE(o[i + 1].chunk, o[i].chunk);
        }
      }
    }
  }
}

// The micro-batch group (Plan::microbatch_group_size) against Megatron-Core's own example, the
// docstring of get_schedule_table (schedules.py) for PP 2, N 3, M 5, VP 2:
//   virtual micro-batch | 0 1 2 3 4 5 6 7 8 9
//   micro-batch         | 0 1 2 0 1 2 3 4 3 4
//   model chunk         | 0 0 0 1 1 1 0 0 1 1
// Every stage runs its forwards in that order and its backwards in it with the chunks reversed; stage
// 0 warms up with 2 (pp - 0 - 1) + (vp - 1) N = 5 forwards, stage 1 with 3, then alternates.
TEST(Schedule, InterleavedGroupsFollowMegatronsTable) {
  Plan p;
  p.pp = 2;
  p.vp = 2;
  p.schedule = Schedule::kInterleaved;
  p.gbs = 5;
  p.microbatch_group = 3;
  const int mb[] = {0, 1, 2, 0, 1, 2, 3, 4, 3, 4};
  const int chunk[] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1};
  for (int64_t s = 0; s < 2; ++s) {
    const auto o = pipeline_order(p, s);
    ASSERT_EQ(o.size(), 20u);
    int f = 0, b = 0, first_backward = -1;
    for (size_t i = 0; i < o.size(); ++i) {
      if (o[i].kind == PassKind::kForward) {
        EXPECT_EQ(o[i].microbatch, mb[f]) << "stage " << s << " forward " << f;
        EXPECT_EQ(o[i].chunk, chunk[f]) << "stage " << s << " forward " << f;
        ++f;
      } else {
        if (first_backward < 0) first_backward = static_cast<int>(i);
        EXPECT_EQ(o[i].microbatch, mb[b]) << "stage " << s << " backward " << b;
        EXPECT_EQ(o[i].chunk, 1 - chunk[b]) << "stage " << s << " backward " << b;
        ++b;
      }
    }
    EXPECT_EQ(first_backward, s == 0 ? 6 : 4);  // warm-up 5 (3), then one forward before the first backward
  }
  // At the default group (N = pp) the order is the one above for m a multiple of pp.
  Plan d = p;
  d.microbatch_group = 0;
  d.gbs = 4;
  Plan n2 = d;
  n2.microbatch_group = 2;
  const auto od = pipeline_order(d, 0), on = pipeline_order(n2, 0);
  ASSERT_EQ(od.size(), on.size());
  for (size_t i = 0; i < od.size(); ++i) {
    EXPECT_EQ(od[i].microbatch, on[i].microbatch);
    EXPECT_EQ(od[i].chunk, on[i].chunk);
  }
}

// The interleaved zero-bubble order against torch.distributed.pipelining's ScheduleInterleavedZeroBubble
// (_calculate_single_rank_operations and _get_1f1b_rank_ops with enable_zero_bubble), worked by hand for
// p = 2, v = 2, m = 4: rounds max(1, 4 / 2) = 2 of n = 2; the forward table (chunk.micro-batch) 0.0 0.1
// 1.0 1.1 0.2 0.3 1.2 1.3, the backward's the same with the chunks reversed: 1.0 1.1 0.0 0.1 1.2 1.3 0.2
// 0.3. Warm-up (v - 1) n + p - 1 - s: 3 forwards on rank 0, 2 on rank 1; each steady step a forward, the
// next B, and from step s on the W of the oldest B; the cool-down's B passes likewise; the Ws left.
//   rank 0: F0.0 F0.1 F1.0 | F1.1 B1.0 W1.0 | F0.2 B1.1 W1.1 | F0.3 B0.0 W0.0 | F1.2 B0.1 W0.1 | F1.3 B1.2 W1.2
//           | B1.3 W1.3 | B0.2 W0.2 | B0.3 W0.3
//   rank 1: F0.0 F0.1 | F1.0 B1.0 | F1.1 B1.1 W1.0 | F0.2 B0.0 W1.1 | F0.3 B0.1 W0.0 | F1.2 B1.2 W0.1
//           | F1.3 B1.3 W1.2 | B0.2 W1.3 | B0.3 W0.2 | W0.3
// Every order of several (p, v, m) holds each pass once, F before B before W.
TEST(Schedule, InterleavedZeroBubbleFollowsTorchsOrder) {
  const Plan p = two_chunk_plan(Schedule::kInterleavedZeroBubble);
  auto text = order_text;
  EXPECT_EQ(text(pipeline_order(p, 0)),
            "F0.0 F0.1 F1.0 F1.1 B1.0 W1.0 F0.2 B1.1 W1.1 F0.3 B0.0 W0.0 F1.2 B0.1 W0.1 F1.3 B1.2 W1.2 B1.3 W1.3 "
            "B0.2 W0.2 B0.3 W0.3 ");
  EXPECT_EQ(text(pipeline_order(p, 1)),
            "F0.0 F0.1 F1.0 B1.0 F1.1 B1.1 W1.0 F0.2 B0.0 W1.1 F0.3 B0.1 W0.0 F1.2 B1.2 W0.1 F1.3 B1.3 W1.2 B0.2 "
            "W1.3 B0.3 W0.2 W0.3 ");
  for (const auto& [pp, v, m] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 8}, {4, 3, 3}, {4, 2, 10}, {3, 4, 12},
                                 {8, 2, 64}, {2, 5, 6}}) {
    Plan q = p;
    q.pp = pp;
    q.vp = v;
    q.gbs = m;
    for (int64_t s = 0; s < pp; ++s) {
      expect_v_passes_once_in_order(pipeline_order(q, s), m, fmt::format("pp {} v {} m {} stage {}", pp, v, m, s),
                                    static_cast<int>(v));
    }
  }
}

// Looped BFS (torch's ScheduleLoopedBFS) for p = 2, v = 2, m = 3 on either rank: F0.0 F0.1 F0.2 F1.0 F1.1
// F1.2, then B1.2 B1.1 B1.0 B0.2 B0.1 B0.0.
TEST(Schedule, LoopedBfsRunsEachChunkBreadthFirst) {
  Plan p = two_chunk_plan(Schedule::kLoopedBfs);
  p.gbs = 3;
  for (int64_t s = 0; s < 2; ++s) {
    EXPECT_EQ(order_text(pipeline_order(p, s)), "F0.0 F0.1 F0.2 F1.0 F1.1 F1.2 B1.2 B1.1 B1.0 B0.2 B0.1 B0.0 ") << "stage " << s;
  }
}

}  // namespace
}  // namespace orrery::train
