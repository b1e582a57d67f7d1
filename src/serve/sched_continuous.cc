#include "serve/sched_continuous.h"

#include <algorithm>

#include "core/assert.h"

namespace orrery::serve {

ContinuousScheduler::ContinuousScheduler(const SchedulerConfig& config, BatchMode mode, QueueOrder order)
    : config_(config), mode_(mode), order_(order) {}

bool ContinuousScheduler::waiting_empty() const { return order_ == QueueOrder::kFcfs ? fcfs_.empty() : sjf_.empty(); }
int64_t ContinuousScheduler::waiting_size() const {
  return static_cast<int64_t>(order_ == QueueOrder::kFcfs ? fcfs_.size() : sjf_.size());
}
SeqId ContinuousScheduler::waiting_front() const {
  return order_ == QueueOrder::kFcfs ? fcfs_.front() : std::get<2>(*sjf_.begin());
}
void ContinuousScheduler::waiting_pop() {
  if (order_ == QueueOrder::kFcfs) {
    fcfs_.pop_front();
  } else {
    sjf_.erase(sjf_.begin());
  }
}
void ContinuousScheduler::waiting_push(Replica& r, SeqId id, bool front) {
  const Seq& s = r.seq(id);
  if (order_ == QueueOrder::kShortestOutput) {
    sjf_.emplace(s.remaining_output(), s.req.id, id);
  } else if (front) {
    fcfs_.push_front(id);
  } else {
    fcfs_.push_back(id);
  }
}

int64_t ContinuousScheduler::held() const {
  return waiting_size() + static_cast<int64_t>(running_.size() + swapped_.size() + prefilled_.size());
}

void ContinuousScheduler::enqueue(Replica& r, SeqId id) { waiting_push(r, id, false); }

void ContinuousScheduler::enqueue_prefilled(Replica& r, SeqId id) {
  (void)r;
  prefilled_.push_back(id);
}

bool ContinuousScheduler::admit(Replica& r, SeqId id) {
  Seq& s = r.seq(id);
  const int64_t hold = config_.memory.value_or(MemoryPolicy::kEvictLifo) == MemoryPolicy::kReserve ? s.req.prompt_tokens + s.req.output_tokens : s.prefill_target;
  if (!r.reserve(id, hold, r.watermark_blocks())) return false;
  s.state = SeqState::kRunning;
  s.admit_order = next_admit_++;
  return true;
}

void ContinuousScheduler::preempt(Replica& r, SeqId id, Batch& batch) {
  if (config_.preemption == Preemption::kSwap && r.swap_out(id, batch)) {
    swapped_.push_back(id);
    return;
  }
  r.preempt_recompute(id);
  waiting_push(r, id, true);
}

bool ContinuousScheduler::make_room(Replica& r, size_t i, Batch& batch, bool& preempted) {
  const SeqId id = running_[i];
  while (!r.grow(id, 1, 0)) {
    const SeqId victim = running_.back();
    running_.pop_back();
    preempt(r, victim, batch);
    preempted = true;
    if (victim == id) return false;
  }
  return true;
}

void ContinuousScheduler::schedule_prefills(Replica& r, Batch& batch, int64_t& tokens, bool chunked) {
  const int64_t budget = chunked ? config_.chunk_size : config_.max_batched_tokens;
  while (!waiting_empty() && static_cast<int64_t>(running_.size()) < config_.max_seqs) {
    const SeqId id = waiting_front();
    r.attach_prefix(id);
    Seq& s = r.seq(id);
    const int64_t left = budget - tokens;
    if (left <= 0) break;
    int64_t q = s.pending();
    if (chunked) {
      q = std::min(q, left);
    } else if (q > left && !(tokens == 0 && batch.items.empty())) {
      break;  // a prompt longer than the whole budget still runs alone
    }
    if (!admit(r, id)) break;
    waiting_pop();
    running_.push_back(id);
    batch.items.push_back({id, q});
    tokens += q;
  }
}

void ContinuousScheduler::schedule(Replica& r, const SchedulerView& view, Batch& batch) {
  (void)view;
  while (!prefilled_.empty() && static_cast<int64_t>(running_.size()) < config_.max_seqs) {
    const SeqId id = prefilled_.front();
    prefilled_.pop_front();
    Seq& s = r.seq(id);
    s.state = SeqState::kRunning;
    s.admit_order = next_admit_++;
    running_.push_back(id);
  }
  int64_t tokens = 0;
  if (mode_ == BatchMode::kPrefillFirst && swapped_.empty()) {
    schedule_prefills(r, batch, tokens, false);
    if (!batch.items.empty()) return;
  }
  const int64_t budget = mode_ == BatchMode::kChunked ? config_.chunk_size : config_.max_batched_tokens;
  bool preempted = false;
  // Decodes of the running sequences, oldest first; ongoing chunked prefills are skipped here.
  for (size_t i = 0; i < running_.size(); ++i) {
    const SeqId id = running_[i];
    if (r.seq(id).in_prefill()) continue;
    if (!make_room(r, i, batch, preempted)) break;
    batch.items.push_back({id, 1});
    ++tokens;
  }
  if (mode_ == BatchMode::kChunked) {
    for (const SeqId id : running_) {
      const Seq& s = r.seq(id);
      if (!s.in_prefill() || tokens >= budget) continue;
      const int64_t q = std::min(s.pending(), budget - tokens);
      batch.items.push_back({id, q});
      tokens += q;
    }
  }
  if (!preempted) {
    while (!swapped_.empty() && static_cast<int64_t>(running_.size()) < config_.max_seqs && tokens < budget) {
      const SeqId id = swapped_.front();
      if (!r.swap_in(id, batch, r.watermark_blocks())) break;
      swapped_.pop_front();
      running_.push_back(id);
      if (r.grow(id, 1, 0)) {
        batch.items.push_back({id, 1});
        ++tokens;
      }
    }
  }
  if (mode_ != BatchMode::kPrefillFirst && swapped_.empty()) schedule_prefills(r, batch, tokens, mode_ == BatchMode::kChunked);
}

void ContinuousScheduler::on_iteration_end(Replica& r, const Batch& batch, const std::vector<SeqId>& finished) {
  (void)batch;
  if (finished.empty()) return;
  std::erase_if(running_, [&](SeqId id) { return r.seq(id).state == SeqState::kFinished; });
}

}  // namespace orrery::serve
