#include "train/memory_timeline.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "train/schedule.h"

namespace orrery::train {
namespace {

struct Event {
  Time time;
  Bytes activations;  // signed change
  Bytes temporary;
  int32_t chunks = 0;
};

}  // namespace

std::vector<MemorySample> memory_timeline(const Plan& plan, const MemoryReport& memory, int64_t stage,
                                          const std::vector<PassTiming>& passes, const MemoryConstants& k) {
  const StageMemory& st = memory.stages.at(static_cast<size_t>(stage));
  const MemoryBreakdown& mb = st.memory;
  const Bytes fixed_tensors = mb.weights + mb.gradients + mb.optimizer + mb.communication;
  const bool split = plan.splits_backward();
  std::vector<Event> ev;
  ev.reserve(passes.size() * 2);
  // Activation offload: the offloaded layers' share on the GPU while a pass runs (memory.cc).
  Bytes offloaded;
  for (const Bytes& b : st.chunk_offloaded) offloaded += b;
  const Bytes in_flight = Bytes::from_double(offloaded.to_double() * st.offload_held);
  // An overlapped pair's forward saves its activations as the pair's backward frees its own (memory.cc,
  // v_peak_held): they count from the end of the pair's last pass, with the backward's release.
  std::map<std::pair<int32_t, int32_t>, Time> swapped_at;  // (chunk, micro-batch) of a paired forward
  if (plan.overlaps_pairs()) {
    std::map<std::tuple<int32_t, int32_t, PassKind>, Time> ends;
    for (const PassTiming& x : passes) {
      if (x.stage == stage) ends[{x.chunk, x.microbatch, x.kind}] = x.end;
    }
    const PipelinePass* f = nullptr;
    for (const PipelinePass& x : pipeline_order(plan, stage)) {
      if (x.kind == PassKind::kForward && x.paired) f = &x;
      if (f != nullptr && closes_pair(x)) {
        if (const auto it = ends.find({x.chunk, x.microbatch, x.kind}); it != ends.end()) swapped_at[{f->chunk, f->microbatch}] = it->second;
        f = nullptr;
      }
    }
  }
  for (const PassTiming& x : passes) {
    if (x.stage != stage) continue;
    const size_t c = static_cast<size_t>(x.chunk);
    // The part offloaded is on the GPU while a pass runs (the layers in flight, memory.cc); the rest
    // stays from its forward to its backward.
    const Bytes chunk = st.chunk_activations.at(c) - st.chunk_offloaded.at(c);
    if (plan.activation_offload && x.kind != PassKind::kWeight) {
      ev.push_back(Event{x.start, in_flight, Bytes(0), 0});
      ev.push_back(Event{x.end, Bytes(0) - in_flight, Bytes(0), 0});
    }
    if (chunk.count() == 0) {
      // nothing stays on the GPU between the passes
    } else if (x.kind == PassKind::kForward) {
      // A sample where the forward starts: the activations ramp up over the pass (a plot drawn through
      // the samples shows the ramp, not a step from the previous sample).
      ev.push_back(Event{x.start, Bytes(0), Bytes(0), 0});
      const auto swap = swapped_at.find({x.chunk, x.microbatch});
      ev.push_back(Event{swap != swapped_at.end() ? swap->second : x.end, chunk, Bytes(0), 1});
    } else if (x.kind == (split ? PassKind::kWeight : PassKind::kBackward)) {
      ev.push_back(Event{x.end, Bytes(0) - chunk, Bytes(0), -1});
    }
    if (x.kind == PassKind::kBackward) {
      ev.push_back(Event{x.start, Bytes(0), mb.temporary, 0});
      ev.push_back(Event{x.end, Bytes(0), Bytes(0) - mb.temporary, 0});
    }
  }
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.time < b.time; });
  auto sample = [&](Time t, Bytes act, Bytes temp, int32_t chunks) {
    const Bytes tensors = fixed_tensors + act + temp;
    const Bytes total = tensors + mb.context + Bytes::from_double(tensors.to_double() * k.allocator_fraction);
    return MemorySample{t, act, temp, total, chunks};
  };
  std::vector<MemorySample> out;
  out.reserve(ev.size() + 1);
  Bytes act, temp;
  int32_t chunks = 0;
  out.push_back(sample(Time::zero(), act, temp, chunks));
  for (size_t i = 0; i < ev.size();) {
    const Time t = ev[i].time;
    for (; i < ev.size() && ev[i].time == t; ++i) {
      act += ev[i].activations;
      temp += ev[i].temporary;
      chunks += ev[i].chunks;
    }
    if (out.back().time == t) {
      out.back() = sample(t, act, temp, chunks);
    } else {
      out.push_back(sample(t, act, temp, chunks));
    }
  }
  return out;
}

MemorySample timeline_peak(const std::vector<MemorySample>& samples) {
  MemorySample best;
  for (const MemorySample& s : samples) {
    if (s.total > best.total) best = s;
  }
  return best;
}

}  // namespace orrery::train
