// static: FasterTransformer-style static (request-level) batching. When the replica is idle it takes up
// to max_seqs waiting requests (FCFS, each with the KV of its whole prompt + output reserved), runs
// their prefill as one iteration padded to the longest prompt, then decode iterations until the longest
// output is done; requests that finish early stay in the batch as padding (their rows are computed and
// discarded) and no request joins a running batch.
// NVIDIA FasterTransformer (github.com/NVIDIA/FasterTransformer); the baseline of Yu et al., "Orca",
// OSDI 2022, Sec. 2.
#include <algorithm>
#include <deque>
#include <memory>

#include "serve/scheduler.h"

namespace orrery::serve {
namespace {

class StaticScheduler final : public Scheduler {
 public:
  explicit StaticScheduler(const SchedulerConfig& c) : config_(c) {}

  void enqueue(Replica& r, SeqId id) override {
    (void)r;
    waiting_.push_back(id);
  }

  void schedule(Replica& r, const SchedulerView& view, Batch& batch) override {
    (void)view;
    if (members_.empty()) form(r);
    if (members_.empty()) return;
    for (Member& m : members_) {
      if (!m.done) {
        const Seq& s = r.seq(m.id);
        batch.items.push_back({m.id, s.pending()});
        if (prefill_) {
          const int64_t pad = max_prompt_ - s.pending();
          if (pad > 0) batch.padding.push_back({pad, max_prompt_});
        }
      } else {
        ++m.kv;
        batch.padding.push_back({1, m.kv});
      }
    }
  }

  void on_iteration_end(Replica& r, const Batch& batch, const std::vector<SeqId>& finished) override {
    (void)batch;
    prefill_ = false;
    for (Member& m : members_) {
      if (m.done) continue;
      const Seq& s = r.seq(m.id);
      m.kv = s.computed;
      if (std::find(finished.begin(), finished.end(), m.id) != finished.end()) {
        m.done = true;
        --live_;
      }
    }
    if (live_ == 0) members_.clear();
  }
  int64_t held() const override { return static_cast<int64_t>(waiting_.size()) + live_; }
  int64_t waiting() const override { return static_cast<int64_t>(waiting_.size()); }

 private:
  struct Member {
    SeqId id;
    bool done = false;
    int64_t kv = 0;
  };
  void form(Replica& r) {
    int64_t tokens = 0;
    max_prompt_ = 0;
    while (!waiting_.empty() && static_cast<int64_t>(members_.size()) < config_.max_seqs) {
      const SeqId id = waiting_.front();
      Seq& s = r.seq(id);
      const int64_t longest = std::max(max_prompt_, s.pending());
      const int64_t padded = longest * static_cast<int64_t>(members_.size() + 1);
      if (!members_.empty() && padded > config_.max_batched_tokens) break;
      // Always reserves the whole request: a static batch never preempts.
      if (!r.reserve(id, s.req.prompt_tokens + s.req.output_tokens, 0)) break;
      s.state = SeqState::kRunning;
      waiting_.pop_front();
      members_.push_back({id, false, 0});
      max_prompt_ = longest;
      tokens = padded;
    }
    (void)tokens;
    live_ = static_cast<int64_t>(members_.size());
    prefill_ = true;
  }

  SchedulerConfig config_;
  std::deque<SeqId> waiting_;
  std::vector<Member> members_;
  int64_t live_ = 0;
  int64_t max_prompt_ = 0;
  bool prefill_ = false;
};

}  // namespace

std::unique_ptr<Scheduler> make_static_scheduler(const SchedulerConfig& c) { return std::make_unique<StaticScheduler>(c); }

}  // namespace orrery::serve
