// nested-wait: Nested WAIT, for unknown output lengths (Ao et al., arXiv 2504.11320), as defined in
// ../shared/validation/serving.md. The decode range [0, max_output] is cut into L equal-width segments
// (boundaries b_0 = 0 < b_1 < ... < b_L); segment k holds the prompts whose decode progress s lies in
// [b_{k-1}, b_k) (the last segment is open-ended), and its entry queue is stage b_{k-1} (stage 0 = waiting
// for prefill). Threshold n_k is both the per-stage cap inside segment k and the number that must wait at
// its entry. Each round: the largest k such that every segment k' <= k meets its entry threshold; batch
// min(n_k', queue) prompts from every stage of segments 1..k; later segments pause with KV retained.
// Thresholds by the paper's single knob: q_k = min(p_k + 0.05, 0.99), n_k = n_1 prod_{r<k} q_r, with n_1
// such that sum_k n_k x width_k = tl (the batch cap spread over stages and segments); p_k, the fraction
// of prompts reaching b_{k-1} that also reached b_{k-2}, is estimated online from the prompts seen so
// far (1 until 32 have reached the earlier boundary). Draining: once the stream is exhausted every
// entry threshold counts as met.
// Liveness (orrery's rule; the paper sizes the thresholds so that memory suffices and does not say what
// happens when it does not): when the KV cache is too full to admit the next prompt's prefill, every
// entry threshold also counts as met, so that the prompts paused at later segments' entries run on and
// free their KV. Without it, paused prompts can hold the whole cache while the entries they wait for
// can only be filled by new prompts that no longer fit: a deadlock until the stream ends (measured: the
// 0.7 x (512, 20) + 0.3 x (512, 50) mix at 25.75 req/s stalled from 162 s to the last arrival at 777 s).
#include <algorithm>
#include <cmath>
#include <memory>

#include "serve/sched_stages.h"

namespace orrery::serve {
namespace {

class NestedWaitScheduler final : public Scheduler {
 public:
  explicit NestedWaitScheduler(const SchedulerConfig& c)
      : config_(c), queues_(1, c.memory.value_or(MemoryPolicy::kEvictLifo)) {
    const int64_t range = std::max<int64_t>(c.max_output, c.nested_segments);
    for (int64_t k = 0; k <= c.nested_segments; ++k) {
      bounds_.push_back(static_cast<int64_t>(std::llround(static_cast<double>(k * range) / static_cast<double>(c.nested_segments))));
    }
    reached_.assign(bounds_.size(), 0);
    recompute_thresholds();
  }

  void enqueue(Replica& r, SeqId id) override {
    queues_.add_waiting(r, id, 0);
    ++reached_[0];
  }

  void schedule(Replica& r, const SchedulerView& view, Batch& batch) override {
    const int64_t segments = static_cast<int64_t>(bounds_.size()) - 1;
    const bool all_met = view.arrivals_done || queues_.admission_blocked(r, 0);
    int64_t k = 0;
    while (k < segments) {
      const int64_t entry = bounds_[static_cast<size_t>(k)];
      const bool met = all_met || queues_.count(0, entry) >= n_[static_cast<size_t>(k)];
      if (!met) break;
      ++k;
    }
    if (k == 0) return;
    // Stages of segments 1..k, highest first; the last segment runs to the end of the queues.
    const int64_t end = k == segments ? queues_.stages(0) : bounds_[static_cast<size_t>(k)];
    for (int64_t s = end - 1; s >= 0; --s) queues_.take(r, 0, s, n_[static_cast<size_t>(segment_of(s))], batch);
  }

  void on_iteration_end(Replica& r, const Batch& batch, const std::vector<SeqId>& finished) override {
    (void)batch;
    // Continuation statistics: a prompt whose progress just reached a boundary (unfinished) survived it.
    queues_.for_each_in_flight(r, [&](const Seq& s, int32_t) {
      if (s.state == SeqState::kFinished || s.in_prefill()) return;
      for (size_t b = 1; b + 1 < bounds_.size(); ++b) {
        if (s.generated == bounds_[b]) ++reached_[b];
      }
    });
    queues_.on_iteration_end(r, finished);
    if (++iterations_ % 256 == 0) recompute_thresholds();
  }
  int64_t held() const override { return queues_.held(); }
  int64_t waiting() const override { return queues_.waiting(); }

 private:
  int64_t segment_of(int64_t stage) const {
    for (size_t k = 1; k + 1 < bounds_.size(); ++k) {
      if (stage < bounds_[k]) return static_cast<int64_t>(k) - 1;
    }
    return static_cast<int64_t>(bounds_.size()) - 2;
  }
  void recompute_thresholds() {
    const size_t segments = bounds_.size() - 1;
    std::vector<double> rel(segments, 1.0);
    for (size_t k = 1; k < segments; ++k) {
      const double p = reached_[k - 1] >= 32 ? static_cast<double>(reached_[k]) / static_cast<double>(reached_[k - 1]) : 1.0;
      rel[k] = rel[k - 1] * std::min(p + 0.05, 0.99);
    }
    double weighted = 0.0;
    for (size_t k = 0; k < segments; ++k) weighted += rel[k] * static_cast<double>(bounds_[k + 1] - bounds_[k]);
    const double n1 = static_cast<double>(config_.nested_cap) / weighted;
    n_.assign(segments, 1);
    for (size_t k = 0; k < segments; ++k) n_[k] = std::max<int64_t>(1, std::llround(n1 * rel[k]));
  }

  SchedulerConfig config_;
  StageQueues queues_;
  std::vector<int64_t> bounds_;
  std::vector<int64_t> reached_;  // prompts that reached boundary k (k = 0: admitted)
  std::vector<int64_t> n_;
  int64_t iterations_ = 0;
};

}  // namespace

std::unique_ptr<Scheduler> make_nested_wait_scheduler(const SchedulerConfig& c, const Where& where) {
  if (c.nested_segments < 1) throw InputError(where.with_key("nested-segments"), "must be >= 1");
  if (c.nested_cap < 1) {
    throw InputError(where.with_key("nested-cap"), "the batch cap tl must be >= 1",
                     "the paper's grid is 20, 40, ..., 200");
  }
  return std::make_unique<NestedWaitScheduler>(c);
}

}  // namespace orrery::serve
