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
//   ZB-V (Qi et al. 2024, sec. 6): two model chunks per rank placed in a V (Plan::virtual_stage:
//     chunk 0 of rank s is virtual stage s, chunk 1 is 2p - 1 - s), backward split into B and W,
//     in torch.distributed.pipelining's order (ScheduleZBVZeroBubble) for rank s: 2(p - s) - 1
//     forwards of chunk 0; s times F1 F0; p - s times F1 B1 W1; then F0 B0 W0 F1 B1 W1 until the
//     forwards are done; s times B0 B1; p - s times B0 W0; the W passes left of chunk 1, then of chunk
//     0. It lays this out for max(2p - 1, m) micro-batches and drops the passes of those past m. Each
//     rank holds at most 2p chunk-micro-batches of activations (p micro-batches of a whole stage, as
//     1F1B's stage 0) and sends twice 1F1B's activations between stages.
//   DualPipeV (DeepSeek-AI 2024, DeepSeek-V3 report sec. 3.2.1, and deepseek-ai/DualPipe's "cut-in-half"
//     variant; torch.distributed.pipelining's ScheduleDualPipeV): ZB-V's V placement, m >= 2p, and for
//     rank s: 2(p - s - 1) forwards of chunk 0; s + 1 times F0 F1; p - s - 1 times B1 W1 F1; then
//     m - 2p + s + 1 times the pairs (F0 & B1) (F1 & B0), the last rank running its first F0 and B1
//     apart; p - s - 1 times B1 (F1 & B0); s + 1 times B1 B0, the backwards from the middle one on
//     (rank s odd: B1 of i = (s + 1)/2, even: B0 of it) split with their W deferred; p - s - 1 times W B0
//     (B0 split); the W passes left. A pair (X & Y) is a forward and a whole backward (input and weight
//     gradients) run together (PipelinePass::paired); W passes run from a FIFO queue of the split
//     backwards. Activations held per rank: the walk of this order (train/memory.h).
//   Interleaved zero bubble (torch.distributed.pipelining's ScheduleInterleavedZeroBubble, the
//     interleaved ZB1P of Qi et al. 2024) with v > 1 chunks: the interleaved table in torch's rounds of
//     n = m / max(1, floor(m / p)) micro-batches (m a multiple of the rounds), warm-up
//     min((v - 1) n + p - 1 - s, m v) (one forward per hop, not two), then forward warm + j and the
//     input gradient B of entry j; from steady step s on (rank s) each step, the cool-down's too, ends
//     with the W of the oldest waiting B; the W passes left at the end.
//   Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism"; torch's ScheduleLoopedBFS):
//     all m forwards of chunk 0, then of chunk 1, ...; then the backwards from the last chunk down, each
//     chunk's micro-batches last first. It holds every micro-batch of every chunk, as GPipe.
//   Ideal bubble with zero communication and equal stages (forward tf, backward tb = B + W):
//     GPipe and 1F1B (p - 1)(tf + tb), a fraction (p - 1)/m of the ideal m(tf + tb);
//     interleaved (p - 1)(tf + tb)/v, a fraction (p - 1)/(v m); ZB-H1 (p - 1)(tf + B - W); ZB-V
//     with each chunk's F = B = W = t and m >= 2p: (p - 1) t, the first arm's fill (the last rank
//     starts after p - 1 chunk forwards and is then never idle; simulator_test derives it).
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
  // DualPipeV, which splits only some backwards: a whole backward (torch's FULL_BACKWARD) is its B pass
  // and its W pass right after it, both marked full; the input gradient leaves after the W, as after a
  // whole backward, and the layers' saved tensors are freed as the backward goes.
  bool full = false;
  // DualPipeV's pairs: a forward and the whole backward after it (B and its W) overlapped.
  bool paired = false;
};

// Whether `x` is the last pass of an overlapped pair: the pair's backward, or its W when the backward
// is whole under a splitting schedule (DualPipeV).
inline bool closes_pair(const PipelinePass& x) {
  return x.paired && (x.kind == PassKind::kWeight || (x.kind == PassKind::kBackward && !x.full));
}

// Program order of stage `stage` (0-based), W passes included for the schedules that split backwards. REQUIRES: a valid plan.
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
