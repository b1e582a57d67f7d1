// wait: WAIT, the fluid-guided policy for known output lengths (Ao, Luo, Simchi-Levi, Wang, "Optimizing
// LLM Inference: Fluid-Guided Online Scheduling with Memory Constraints", arXiv 2504.11320), exactly as
// ../shared/validation/serving.md defines it: type j (Request::type) has a threshold n_j and is eligible
// when at least n_j of its prompts wait for prefill; when the server is idle and some type is eligible,
// the batch takes, for every eligible type j and every stage s, min(n_j, count at (j, s)) prompts; if no
// type is eligible the server waits. Selected prompts advance one stage; unselected residents keep their
// KV. Thresholds: SchedulerConfig::wait_thresholds, or the smallest ones meeting the paper's conditions
// (serve/fluid.h wait_thresholds_fluid, slack SchedulerConfig::wait_margin, C = the replica's KV blocks).
// A stage queue s >= 1 never holds more than n_j prompts (a round moves min(n_j, count) out of it and
// at most n_j into it), so the resident KV stays within M^pi <= C and nothing is evicted; the LIFO
// eviction below is a safety net for thresholds given by hand.
// Draining: once the request stream is exhausted every type with prompts is eligible.
#include <memory>

#include "serve/fluid.h"
#include "serve/sched_stages.h"

namespace orrery::serve {
namespace {

class WaitScheduler final : public Scheduler {
 public:
  explicit WaitScheduler(const SchedulerConfig& c)
      : config_(c), queues_(static_cast<int32_t>(c.types.size()), c.memory.value_or(MemoryPolicy::kEvictLifo)) {}

  void enqueue(Replica& r, SeqId id) override {
    const int32_t type = r.seq(id).req.type;
    ORRERY_CHECK(type >= 0 && static_cast<size_t>(type) < config_.types.size());
    queues_.add_waiting(r, id, type);
  }

  void schedule(Replica& r, const SchedulerView& view, Batch& batch) override {
    if (thresholds_.empty()) {
      thresholds_ = !config_.wait_thresholds.empty()
                        ? config_.wait_thresholds
                        : wait_thresholds_fluid(config_.types, config_.d0_s, config_.d1_s, config_.wait_margin,
                                                static_cast<double>(r.total_blocks() * r.block_size()))
                              .n;
    }
    for (int32_t j = 0; j < static_cast<int32_t>(config_.types.size()); ++j) {
      const int64_t n = thresholds_[static_cast<size_t>(j)];
      const bool eligible = queues_.count(j, 0) >= n || (view.arrivals_done && queues_.total(j) > 0);
      if (!eligible) continue;
      // Highest stages first: under memory pressure the newest prompts are the ones evicted.
      for (int64_t s = queues_.stages(j) - 1; s >= 0; --s) queues_.take(r, j, s, n, batch);
    }
  }

  void on_iteration_end(Replica& r, const Batch& batch, const std::vector<SeqId>& finished) override {
    (void)batch;
    queues_.on_iteration_end(r, finished);
  }
  int64_t held() const override { return queues_.held(); }
  int64_t waiting() const override { return queues_.waiting(); }

 private:
  SchedulerConfig config_;
  StageQueues queues_;
  std::vector<int64_t> thresholds_;
};

}  // namespace

std::unique_ptr<Scheduler> make_wait_scheduler(const SchedulerConfig& c, const Where& where) {
  if (c.types.empty()) {
    throw InputError(where, "the wait scheduler needs the workload's request types (rates and lengths)",
                     "use a synthetic --workload, or nested-wait for a trace");
  }
  if (!c.wait_thresholds.empty() && c.wait_thresholds.size() != c.types.size()) {
    throw InputError(where.with_key("wait-thresholds"), "expected one threshold per request type (" +
                                                            std::to_string(c.types.size()) + ")");
  }
  for (int64_t n : c.wait_thresholds) {
    if (n < 1) throw InputError(where.with_key("wait-thresholds"), "thresholds must be >= 1");
  }
  return std::make_unique<WaitScheduler>(c);
}

}  // namespace orrery::serve
