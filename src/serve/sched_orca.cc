// orca: iteration-level (continuous) batching with selective batching: every running request decodes
// and new prompts join the same iteration with their whole prefill; FCFS. Orca does not page the KV
// cache: by default (memory policy "reserve") a request is admitted only when the KV of its whole
// prompt + output fits, the "Orca (Oracle)" variant of the vLLM paper.
// Yu et al., "Orca: A Distributed Serving System for Transformer-Based Generative Models", OSDI 2022.
#include <memory>

#include "serve/sched_continuous.h"

namespace orrery::serve {

std::unique_ptr<Scheduler> make_orca_scheduler(const SchedulerConfig& c) {
  SchedulerConfig orca = c;
  if (!orca.memory) orca.memory = MemoryPolicy::kReserve;
  return std::make_unique<ContinuousScheduler>(orca, BatchMode::kMixed, QueueOrder::kFcfs);
}

}  // namespace orrery::serve
