// vllm: vLLM v0's default scheduler. FCFS admission of whole prefills (max_seqs 128, max_batched_tokens
// 4096 as in vidur's vLLM configuration; blocks above a 1% watermark), prefill-only iterations when a
// prompt was admitted, otherwise one decode step for every running request; on a missing block the newest
// running request is preempted, by recompute (default) or by swap to host memory (--preemption swap).
// Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention",
// SOSP 2023; vllm-project/vllm v0 core/scheduler.py.
#include <memory>

#include "serve/sched_continuous.h"

namespace orrery::serve {

std::unique_ptr<Scheduler> make_vllm_scheduler(const SchedulerConfig& c) {
  return std::make_unique<ContinuousScheduler>(c, BatchMode::kPrefillFirst, QueueOrder::kFcfs);
}

}  // namespace orrery::serve
