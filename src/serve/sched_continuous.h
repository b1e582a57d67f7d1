// The continuous-batching core shared by the Orca, vLLM, Sarathi-Serve and SJF schedulers.
//
// Model card
//   What      Iteration-level scheduling over three queues: waiting (new and restarted requests),
//             running (admitted, in admission order: the last is the newest, the LIFO victim) and
//             swapped (preempted to host memory). Per iteration, by mode:
//               kPrefillFirst  vLLM v0's default scheduler: admit waiting prompts (whole prefills,
//                              within max_batched_tokens and max_seqs, blocks above the watermark);
//                              if any was admitted the batch is those prefills only; otherwise every
//                              running sequence decodes one token (a missing block preempts the newest
//                              running sequence), then swapped sequences come back while they fit.
//               kMixed         Orca: every running sequence decodes, and new prompts join the same
//                              batch with their whole prefill (selective batching).
//               kChunked       Sarathi-Serve: running decodes first (never stalled by prefills), then
//                              ongoing chunked prefills, then new prompts, each prefill cut to the
//                              remaining token budget (chunk_size tokens per iteration).
//             Order of the waiting queue: kFcfs (arrival; restarted requests go to its front, as in
//             vLLM) or kShortestOutput (an output-length oracle: fewest remaining output tokens first,
//             ties by arrival).
//   Memory    Prompt blocks are allocated at admission (the whole prefill, or prompt + output under
//             MemoryPolicy::kReserve); a decode step needs at most one more block.
//   Sources   vLLM v0 core/scheduler.py (_schedule_default, _schedule_running, _schedule_swapped,
//             _schedule_prefills); Yu et al., "Orca", OSDI 2022; Agrawal et al., "Taming
//             Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024.
#pragma once

#include <deque>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "serve/scheduler.h"

namespace orrery::serve {

enum class BatchMode { kPrefillFirst, kMixed, kChunked };
enum class QueueOrder { kFcfs, kShortestOutput };

class ContinuousScheduler final : public Scheduler {
 public:
  ContinuousScheduler(const SchedulerConfig& config, BatchMode mode, QueueOrder order);
  void enqueue(Replica& r, SeqId id) override;
  // Prefilled requests join the running set at the next schedule(), ahead of the waiting queue, while
  // it has fewer than max_seqs sequences (their blocks are reserved: nothing to admit).
  void enqueue_prefilled(Replica& r, SeqId id) override;
  void schedule(Replica& r, const SchedulerView& view, Batch& batch) override;
  void on_iteration_end(Replica& r, const Batch& batch, const std::vector<SeqId>& finished) override;
  int64_t held() const override;
  int64_t waiting() const override { return waiting_size(); }

 private:
  // The waiting queue in either order.
  bool waiting_empty() const;
  int64_t waiting_size() const;
  SeqId waiting_front() const;
  void waiting_pop();
  void waiting_push(Replica& r, SeqId id, bool front);

  bool admit(Replica& r, SeqId id);
  // Makes room for a decode step of running_[i]; false when running_[i] itself was preempted.
  bool make_room(Replica& r, size_t i, Batch& batch, bool& preempted);
  void preempt(Replica& r, SeqId id, Batch& batch);
  void schedule_prefills(Replica& r, Batch& batch, int64_t& tokens, bool chunked);

  SchedulerConfig config_;
  BatchMode mode_;
  QueueOrder order_;
  std::deque<SeqId> fcfs_;
  std::set<std::tuple<int64_t, int64_t, SeqId>> sjf_;  // (remaining output, arrival order, id)
  std::vector<SeqId> running_;
  std::deque<SeqId> swapped_;
  std::deque<SeqId> prefilled_;
  int64_t next_admit_ = 0;
};

}  // namespace orrery::serve
