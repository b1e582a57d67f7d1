// sjf: shortest-job-first with an output-length oracle: vLLM's iteration structure, but the waiting
// queue is ordered by remaining output tokens (fewest first, ties by arrival). An upper bound on what a
// length predictor can give (Fu et al., "Efficient LLM Scheduling by Learning to Rank", NeurIPS 2024;
// Qiu et al., "Efficient Interactive LLM Serving with Proxy Model-based Sequence Length Prediction", 2024).
#include <memory>

#include "serve/sched_continuous.h"

namespace orrery::serve {

std::unique_ptr<Scheduler> make_sjf_scheduler(const SchedulerConfig& c) {
  return std::make_unique<ContinuousScheduler>(c, BatchMode::kPrefillFirst, QueueOrder::kShortestOutput);
}

}  // namespace orrery::serve
