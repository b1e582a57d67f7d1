// Per-GPU memory over one training step: the memory model's categories (train/memory.h) replayed on
// the passes the step simulation ran (train/simulator.h), so the profile follows the schedule that
// was simulated (warm-up, steady 1F1B, cool-down, deferred weight-gradient passes, stragglers).
//
// Model card
//   Constant over the step: weights, gradients, optimizer states, communication buffers, CUDA context
//     (the stage's MemoryReport figures; ZeRO-3's gathered layers are counted at their peak).
//   Activations: the forward pass of (chunk c, micro-batch i) adds chunk c's saved activations for one
//     micro-batch (StageMemory::chunk_activations) when it ends; they are freed when the backward of the
//     same (c, i) ends, or under ZB-H1 when its weight-gradient (W) pass ends, since W still reads the
//     layers' inputs. With activation offload the offloaded layers' on-GPU share (two layers' in
//     flight, memory.cc) is held while an F or B pass runs and nothing between passes; the layers that
//     do not offload (Plan::offload_layers) are held as without offload.
//   Temporary buffers: the report's backward working set while a B pass runs.
//   Allocator overhead: MemoryConstants::allocator_fraction of the tensors at each instant. The traced
//     caching allocator's reservation (Plan::allocator, train/allocator_trace.h) is not in the samples:
//     they count what is allocated, while the reservation stays at its peak over a steady step (the
//     report's figure).
//   Events at one instant apply together, one sample per distinct instant plus the state at time zero:
//     a pass's buffers are released as it ends and the next pass allocates as it starts, so no instant
//     holds both. Each forward's start is an instant too, so that a line through the samples ramps up
//     over the forward and down over the backward instead of stepping.
//   Agreement with the closed forms: the most chunks held at once equals the memory model's in-flight
//     count (GPipe m, 1F1B min(p - s, m), interleaved min(2(p - s - 1) + (v - 1)p + 1, m v) chunks) when
//     the simulation runs the schedule of train/schedule.h; the peak total then equals the report's for
//     1F1B and GPipe (equal chunks), tested in memory_timeline_test.cc.
// Range of validity: as train/memory.h; no caching-allocator fragmentation over time.
#pragma once

#include <cstdint>
#include <vector>

#include "train/memory.h"
#include "train/plan.h"
#include "train/simulator.h"

namespace orrery::train {

struct MemorySample {
  Time time;
  Bytes activations;   // saved activations held
  Bytes temporary;     // backward working set in use
  Bytes total;         // everything on the GPU at this instant (the report's categories)
  int32_t chunks_held = 0;  // (chunk, micro-batch) forward passes whose activations are held
};

// The memory of one rank of `stage` over the step. REQUIRES: `memory` from memory_model() and
// `passes` from simulate_step() for the same plan; 0 <= stage < plan.pp.
std::vector<MemorySample> memory_timeline(const Plan& plan, const MemoryReport& memory, int64_t stage,
                                          const std::vector<PassTiming>& passes, const MemoryConstants& k = {});

// The sample with the largest total (the first of equals); a zero sample when `samples` is empty.
MemorySample timeline_peak(const std::vector<MemorySample>& samples);

}  // namespace orrery::train
