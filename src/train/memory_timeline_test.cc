#include "train/memory_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "train/test_support.h"

#include "compute/compute_model.h"
#include "train/comm_model.h"
#include "train/layer_costs.h"
#include "train/schedule.h"

namespace orrery::train {
namespace {

using testing::NoComm;
using testing::test_gpu;

struct Simulated {
  MemoryReport memory;
  StepResult step;
};

// A 16-layer Llama-style model on p pipeline stages with m micro-batches, no communication cost.
Simulated run(Schedule schedule, int64_t p, int64_t m, int64_t v = 1, bool offload = false, int64_t offload_layers = -1) {
  static const auto model = model::ModelSpec::llama({16, 1024, 8, 8, 4096, 32000, 1024});
  static const hw::GpuSpec gpu = test_gpu();
  static const compute::ComputeModel cm(gpu);
  const NoComm comm;
  Plan plan;
  plan.pp = p;
  plan.vp = v;
  plan.gbs = m;
  plan.seq = 1024;
  plan.schedule = schedule;
  plan.activation_offload = offload;
  plan.offload_layers = offload_layers;
  const ModelCosts c = model_costs(model, plan, cm, comm);
  StepOptions o;
  o.record_passes = true;
  Simulated r{memory_model(model, plan, c, gpu), simulate_step(model, plan, c, cm, comm, o)};
  return r;
}

Plan plan_of(Schedule schedule, int64_t p, int64_t m, int64_t v = 1) {
  Plan plan;
  plan.pp = p;
  plan.vp = v;
  plan.gbs = m;
  plan.schedule = schedule;
  return plan;
}

int32_t most_chunks(const std::vector<MemorySample>& t) {
  int32_t n = 0;
  for (const MemorySample& s : t) n = std::max(n, s.chunks_held);
  return n;
}

// GPipe holds all m micro-batches before the first backward; 1F1B holds min(p - s, m) on stage s
// (Narayanan et al. 2021, Sec. 2.2; the memory model's closed form). With equal chunks the timeline's
// peak is the report's total to the byte: the report multiplies one micro-batch's activations by the
// same count and adds the same backward working set.
TEST(MemoryTimeline, GpipeAnd1F1BHoldTheClosedFormCountAndReachTheReportedPeak) {
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kOneFOneB}) {
    for (int64_t m : {2, 8}) {
      const int64_t p = 4;
      const Simulated r = run(schedule, p, m);
      const Plan plan = plan_of(schedule, p, m);
      for (int64_t s = 0; s < p; ++s) {
        const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
        const int64_t expected = schedule == Schedule::kGpipe ? m : std::min(p - s, m);
        EXPECT_EQ(most_chunks(t), expected) << schedule_name(schedule) << " m " << m << " stage " << s;
        EXPECT_EQ(timeline_peak(t).total, r.memory.stages[static_cast<size_t>(s)].memory.total())
            << schedule_name(schedule) << " m " << m << " stage " << s;
      }
    }
  }
}

// Interleaved 1F1B with v chunks: Megatron-LM's warm-up 2(p - s - 1) + (v - 1)p forwards plus the one of
// the steady state, at most m v: stage 0 of p = 4, v = 2, m = 8 holds 6 + 4 + 1 = 11 chunks, stage 3
// holds 0 + 4 + 1 = 5.
TEST(MemoryTimeline, InterleavedHoldsMegatronsWarmUpPlusOneChunks) {
  const int64_t p = 4, m = 8, v = 2;
  const Simulated r = run(Schedule::kInterleaved, p, m, v);
  const Plan plan = plan_of(Schedule::kInterleaved, p, m, v);
  for (int64_t s = 0; s < p; ++s) {
    const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
    EXPECT_EQ(most_chunks(t), std::min(2 * (p - s - 1) + (v - 1) * p + 1, m * v)) << "stage " << s;
  }
}

// Interleaved chunks differ: the last stage's last chunk carries the loss's saved softmax. p = 4, v = 2,
// m = 8 (groups of n = 4): stage 3 runs 4 warm-up forwards of chunk 0, then pairs forward 4 + k with
// backward k over the table (entry k's chunks reversed): F(c1 mb0) B(c1 mb0) ... F(c1 mb3) B(c1 mb3),
// F(c0 mb4) B(c0 mb4), ... So it holds at most 4 of chunk 0 and 1 of chunk 1 (or 5 of chunk 0, less, as
// a1 > a0): 4 a0 + a1 of activations, not the average count's (4 + 1)/2 (a0 + a1). The timeline, which
// replays the simulated passes, reaches the same. Stage 0 holds 6 + 4 + 1 = 11 chunks in all, as before.
TEST(MemoryTimeline, InterleavedLastStageHoldsOneLossChunkAtItsPeak) {
  const Simulated r = run(Schedule::kInterleaved, 4, 8, 2);
  const StageMemory& last = r.memory.stages[3];
  const double a0 = last.chunk_activations[0].to_double(), a1 = last.chunk_activations[1].to_double();
  ASSERT_GT(a1, a0);
  EXPECT_EQ(last.chunk_inflight, (std::vector<double>{4, 1}));
  EXPECT_NEAR(last.memory.activations.to_double(), 4 * a0 + a1, 1.0);
  const std::vector<double>& first = r.memory.stages[0].chunk_inflight;
  EXPECT_EQ(first[0] + first[1], 11.0);
  const std::vector<MemorySample> t = memory_timeline(plan_of(Schedule::kInterleaved, 4, 8, 2), r.memory, 3, r.step.passes);
  Bytes most;
  for (const MemorySample& x : t) most = std::max(most, x.activations);
  EXPECT_NEAR(most.to_double(), last.memory.activations.to_double(), 1.0);
}

// ZB-H1 as scheduled (train/schedule.h): stage s runs W of micro-batch j after B of micro-batch j + s,
// and the timeline frees a micro-batch's activations after its W. While B(k) runs, micro-batches
// k - s .. k - 1 wait for their W and k .. k + p - s - 1 have run their forward: p in all, on every
// stage (min(p, m) with fewer micro-batches), the memory model's count, so the peaks agree.
TEST(MemoryTimeline, ZeroBubbleHoldsPMicrobatchesOnEveryStageUntilTheirWeightPasses) {
  const int64_t p = 4;
  for (int64_t m : {3, 8}) {
    const Simulated r = run(Schedule::kZeroBubble, p, m);
    const Plan plan = plan_of(Schedule::kZeroBubble, p, m);
    for (int64_t s = 0; s < p; ++s) {
      const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
      EXPECT_EQ(most_chunks(t), std::min(p, m)) << "m " << m << " stage " << s;
      EXPECT_EQ(timeline_peak(t).total, r.memory.stages[static_cast<size_t>(s)].memory.total()) << "m " << m << " stage " << s;
    }
  }
}

// ZB-V (train/schedule.h): every rank holds up to 2p chunks (2 p - s - 1 of chunk 0 and s + 1 of chunk
// 1 at its first F1 B1 W1 group), each freed by its W pass; the B pass after the most-held forward
// runs with them all, so the timeline's peak is the report's. With m = 3 < 2p - 1 rank 0 holds its 3
// forwards of chunk 0 and then one of chunk 1: 4.
TEST(MemoryTimeline, ZeroBubbleVHoldsTwoPChunksOnEveryRankUntilTheirWeightPasses) {
  const int64_t p = 4;
  for (int64_t m : {3, 8, 12}) {
    const Simulated r = run(Schedule::kZeroBubbleV, p, m, 2);
    const Plan plan = plan_of(Schedule::kZeroBubbleV, p, m, 2);
    for (int64_t s = 0; s < p; ++s) {
      const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
      if (m >= 2 * p) {
        EXPECT_EQ(most_chunks(t), 2 * p) << "m " << m << " stage " << s;
      }
      EXPECT_EQ(timeline_peak(t).total, r.memory.stages[static_cast<size_t>(s)].memory.total()) << "m " << m << " stage " << s;
    }
    if (m == 3) {
      EXPECT_EQ(most_chunks(memory_timeline(plan, r.memory, 0, r.step.passes)), 4);
    }
  }
}

// The interleaved zero-bubble order (train/schedule.h) on p = 4, v = 2: every rank holds up to
// min((v - 1) n + p, m v) chunks (n = m / max(1, floor(m / p)): 8 at m = 8 and 12, n = 4; at m = 3,
// n = 3, all 6 forwards, fewer than 3 + 4), each freed by its W pass, so the timeline's peak is the
// report's. Looped BFS holds all m v.
TEST(MemoryTimeline, TorchsInterleavedSchedulesHoldWhatTheReportCounts) {
  const int64_t p = 4;
  for (int64_t m : {3, 8, 12}) {
    const Simulated r = run(Schedule::kInterleavedZeroBubble, p, m, 2);
    const Plan plan = plan_of(Schedule::kInterleavedZeroBubble, p, m, 2);
    const int64_t n = m / std::max<int64_t>(1, m / p);
    for (int64_t s = 0; s < p; ++s) {
      const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
      EXPECT_EQ(most_chunks(t), std::min(n + p, 2 * m)) << "m " << m << " stage " << s;
      EXPECT_EQ(timeline_peak(t).total, r.memory.stages[static_cast<size_t>(s)].memory.total()) << "m " << m << " stage " << s;
    }
  }
  const Simulated bfs = run(Schedule::kLoopedBfs, p, 5, 2);
  for (int64_t s = 0; s < p; ++s) {
    const std::vector<MemorySample> t = memory_timeline(plan_of(Schedule::kLoopedBfs, p, 5, 2), bfs.memory, s, bfs.step.passes);
    EXPECT_EQ(most_chunks(t), 10) << "stage " << s;
    EXPECT_EQ(timeline_peak(t).total, bfs.memory.stages[static_cast<size_t>(s)].memory.total()) << "stage " << s;
  }
}

// Every allocation is freed: the step starts and ends with the model states, buffers and context only
// (the report's total less activations and temporary), and time runs forward.
TEST(MemoryTimeline, StartsAndEndsWithTheStaticMemoryAndIsOrderedInTime) {
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kZeroBubble, Schedule::kZeroBubbleV,
                            Schedule::kInterleavedZeroBubble, Schedule::kLoopedBfs}) {
    const int64_t v = schedule == Schedule::kZeroBubbleV || schedule == Schedule::kInterleavedZeroBubble ||
                              schedule == Schedule::kLoopedBfs
                          ? 2
                          : 1;
    const Simulated r = run(schedule, 2, 4, v);
    const Plan plan = plan_of(schedule, 2, 4, v);
    for (int64_t s = 0; s < 2; ++s) {
      const MemoryBreakdown& mb = r.memory.stages[static_cast<size_t>(s)].memory;
      const Bytes fixed = mb.total() - mb.activations - mb.temporary;
      const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
      ASSERT_GE(t.size(), 2u);
      EXPECT_EQ(t.front().time, Time::zero());
      EXPECT_EQ(t.front().total, fixed);
      EXPECT_EQ(t.back().total, fixed) << schedule_name(schedule) << " stage " << s;
      EXPECT_EQ(t.back().activations.count(), 0);
      EXPECT_EQ(t.back().temporary.count(), 0);
      EXPECT_EQ(t.back().chunks_held, 0);
      for (size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i - 1].time, t[i].time);
      EXPECT_LE(t.back().time, r.step.step_time);
      // Every forward's start is a sample (the ramp up over the pass starts there).
      for (const PassTiming& x : r.step.passes) {
        if (x.stage != s || x.kind != PassKind::kForward) continue;
        EXPECT_TRUE(std::any_of(t.begin(), t.end(), [&](const MemorySample& m) { return m.time == x.start; }))
            << schedule_name(schedule) << " stage " << s << " mb " << x.microbatch;
      }
    }
  }
}

// With activation offload the GPU holds only the report's on-GPU share while a pass runs, so the peak
// is the report's total (that share plus the backward working set) and no chunk stays resident.
TEST(MemoryTimeline, OffloadHoldsOnlyTheOnGpuShareDuringPasses) {
  const Simulated r = run(Schedule::kOneFOneB, 2, 4, 1, true);
  Plan plan = plan_of(Schedule::kOneFOneB, 2, 4);
  plan.activation_offload = true;
  for (int64_t s = 0; s < 2; ++s) {
    const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
    EXPECT_EQ(most_chunks(t), 0);
    EXPECT_EQ(timeline_peak(t).total, r.memory.stages[static_cast<size_t>(s)].memory.total());
  }
}

// Offloading the first 4 of each stage's 8 layers: the other 4 stay from forward to backward as
// without offload, so the chunks held reach the schedule's in-flight count (1F1B: p - s), and the peak
// is again the report's total (those chunks, the offloaded layers' two in flight and the backward's
// working set, all in one backward pass).
TEST(MemoryTimeline, PartialOffloadKeepsTheOtherLayersAsWithoutOffload) {
  const Simulated r = run(Schedule::kOneFOneB, 2, 4, 1, true, 4);
  Plan plan = plan_of(Schedule::kOneFOneB, 2, 4);
  plan.activation_offload = true;
  plan.offload_layers = 4;
  for (int64_t s = 0; s < 2; ++s) {
    const std::vector<MemorySample> t = memory_timeline(plan, r.memory, s, r.step.passes);
    EXPECT_EQ(most_chunks(t), 2 - s);
    EXPECT_EQ(timeline_peak(t).total, r.memory.stages[static_cast<size_t>(s)].memory.total());
  }
}

}  // namespace
}  // namespace orrery::train
