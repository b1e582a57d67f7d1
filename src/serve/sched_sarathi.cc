// sarathi: Sarathi-Serve's stall-free batching. Every iteration runs all ongoing decodes first, then
// continues chunked prefills and admits new prompts, cutting prefills to the remaining token budget
// (chunk_size, default 512, decodes included); FCFS; vLLM's block manager and preemption.
// Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024.
#include <memory>

#include "serve/sched_continuous.h"

namespace orrery::serve {

std::unique_ptr<Scheduler> make_sarathi_scheduler(const SchedulerConfig& c) {
  return std::make_unique<ContinuousScheduler>(c, BatchMode::kChunked, QueueOrder::kFcfs);
}

}  // namespace orrery::serve
