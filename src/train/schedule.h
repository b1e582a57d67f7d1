// Pipeline schedules: the order in which one pipeline stage runs the forward and backward passes of
// its micro-batches (and, for interleaved schedules, of its virtual chunks).
//
// Model card
//   GPipe (Huang et al. 2019): all m forwards, then all m backwards.
//   1F1B (Narayanan et al. 2019, PipeDream-Flush; Megatron-LM's default): stage s of p runs
//     min(p - s - 1, m) warm-up forwards, then alternates one forward and one backward, then drains.
//   Interleaved 1F1B (Narayanan et al. 2021, SC'21, Sec. 2.2.2) with v chunks per stage: Megatron-Core's
//     order over m*v virtual micro-batches (get_schedule_table): groups of n micro-batches (Plan::
//     microbatch_group_size, default p), each group on chunk 0, then chunk 1, ..., the last group what is
//     left; warm-up min(2(p - s - 1) + (v - 1) n, m v); forward walks the table, backward the same
//     table with the chunks reversed (v - 1 - c). At n = p virtual micro-batch k runs chunk
//     (k mod p v) / p of micro-batch (k / (p v)) p + k mod p.
//   Zero bubble ZB-H1 (Qi et al. 2024, ICLR, "Zero Bubble Pipeline Parallelism"): the 1F1B order with
//     each backward split into B (input gradient, on the critical path) and W (weight gradient); stage
//     s runs W of micro-batch j after B of micro-batch j + s (later stages defer more, so the B chain
//     of the cool-down is not held up by W passes) and the deferred W passes at the end.
//   Ideal bubble with zero communication and equal stages (forward tf, backward tb = B + W):
//     GPipe and 1F1B (p - 1)(tf + tb), a fraction (p - 1)/m of the ideal m(tf + tb);
//     interleaved (p - 1)(tf + tb)/v, a fraction (p - 1)/(v m); ZB-H1 (p - 1)(tf + B - W).
#pragma once

#include <cstdint>
#include <vector>

#include "train/plan.h"

namespace orrery::train {

enum class PassKind : uint8_t { kForward, kBackward, kWeight };

struct PipelinePass {
  PassKind kind = PassKind::kForward;
  int32_t microbatch = 0;
  int32_t chunk = 0;
};

// Program order of stage `stage` (0-based), W passes included for ZB-H1. REQUIRES: a valid plan.
std::vector<PipelinePass> pipeline_order(const Plan& plan, int64_t stage);

// The interleaved order's table (Megatron-Core's get_schedule_table), O(1) per entry: the model chunk
// and micro-batch of entry k, 0 <= k < m v (groups of n micro-batches, each group on chunk 0, then 1,
// ...; the last group takes what is left), and the forwards stage `stage` runs before its first
// backward. Forward j walks entry j; backward j runs entry j's micro-batch on chunk v - 1 - chunk.
// REQUIRES: a valid plan with the interleaved schedule.
int32_t interleaved_chunk(const Plan& plan, int64_t k);
// The entries before entry k (0 <= k <= m v) that run chunk c: n per whole group of n v entries.
int64_t interleaved_count(const Plan& plan, int64_t k, int32_t c);
int32_t interleaved_microbatch(const Plan& plan, int64_t k);
int64_t interleaved_warmup(const Plan& plan, int64_t stage);

}  // namespace orrery::train
