// Per-stage queues shared by the WAIT and Nested WAIT schedulers (serving.md, Ao et al. 2025).
//
// A request's stage is its decode progress: 0 while it waits for its prefill, s >= 1 once it has emitted
// s tokens. Requests are grouped (by type for WAIT; one group for Nested WAIT) and queued per stage in
// the order they reached it. take() moves up to n requests from the front of one (group, stage) queue
// into the batch, allocating their KV blocks (the prefill's at stage 0, one decode slot otherwise); when
// a decode slot is missing it evicts the most recently admitted resident request not in this batch
// (LIFO evict-and-restart: it loses its KV and goes back to stage 0). Callers take the highest stages
// first, so the newest requests are the ones evicted.
#pragma once

#include <cstdint>
#include <deque>
#include <set>
#include <utility>
#include <vector>

#include "serve/scheduler.h"

namespace orrery::serve {

class StageQueues {
 public:
  StageQueues(int32_t groups, MemoryPolicy memory) : q_(static_cast<size_t>(groups)), memory_(memory) {}

  void add_waiting(Replica& r, SeqId id, int32_t group);
  int64_t count(int32_t group, int64_t stage) const;
  // True when (group, 0) has a waiting request whose prefill take() could not place now: its blocks
  // (the reservation rule of the memory policy) would leave less than the watermark free.
  bool admission_blocked(const Replica& r, int32_t group) const;
  // One past the highest stage with a queue (queues may be empty).
  int64_t stages(int32_t group) const { return static_cast<int64_t>(q_[static_cast<size_t>(group)].size()); }
  int64_t total(int32_t group) const { return totals_[static_cast<size_t>(group)]; }
  // Moves up to n requests of (group, stage) into the batch; returns how many.
  int64_t take(Replica& r, int32_t group, int64_t stage, int64_t n, Batch& batch);
  // Puts the batch's unfinished requests at their new stage. Returns the stages they reached.
  void on_iteration_end(Replica& r, const std::vector<SeqId>& finished);
  // Called for each request reaching `stage` >= 1 unfinished (for Nested WAIT's continuation rates).
  template <class F>
  void for_each_in_flight(Replica& r, F&& f) const {
    for (const auto& [id, g] : in_flight_) f(r.seq(id), g);
  }
  int64_t held() const { return held_; }
  int64_t waiting() const { return waiting_; }
  int64_t evictions() const { return evictions_; }

 private:
  std::deque<SeqId>& queue(int32_t group, int64_t stage);
  bool evict_one(Replica& r);

  std::vector<std::vector<std::deque<SeqId>>> q_;
  std::vector<int64_t> totals_ = std::vector<int64_t>(q_.size(), 0);
  MemoryPolicy memory_;
  std::set<std::pair<int64_t, SeqId>> resident_;  // (admit order, id), not in the batch being built
  std::vector<std::pair<SeqId, int32_t>> in_flight_;
  int64_t next_admit_ = 0;
  int64_t held_ = 0;
  int64_t waiting_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace orrery::serve
