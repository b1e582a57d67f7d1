// The discrete-event engine. Model card, event order and contracts: des/engine.h.
#include "des/engine.h"

#include <algorithm>

namespace orrery::des {

namespace {

// Clears Engine::running_ however the run ends (a handler may throw).
class RunningGuard {
 public:
  explicit RunningGuard(bool& running) : running_(running) { running_ = true; }
  RunningGuard(const RunningGuard&) = delete;
  RunningGuard& operator=(const RunningGuard&) = delete;
  ~RunningGuard() { running_ = false; }

 private:
  bool& running_;
};

// Closes the heap's open take when a dispatch ends, however it ends.
class TakeGuard {
 public:
  explicit TakeGuard(detail::EventHeap& heap) : heap_(heap) {}
  TakeGuard(const TakeGuard&) = delete;
  TakeGuard& operator=(const TakeGuard&) = delete;
  ~TakeGuard() { heap_.finish_take(); }

 private:
  detail::EventHeap& heap_;
};

}  // namespace

// ---- EventHeap: flat 4-ary min-heap (layout in engine.h). A hole moves instead of swapping entries.
// The child scan is a plain loop with branches on purpose: it measured faster than a branch-free
// tournament, presumably because predicted branches let the CPU load the next level speculatively
// (docs/des.md).

namespace detail {

void EventHeap::push(const HeapEntry& entry) {
  if (taking_) {
    // Replace the taken top: the new entry goes in at the root and sifts down.
    taking_ = false;
    sift_down(kRoot, entry);
    return;
  }
  size_t hole = entries_.size();
  entries_.push_back(entry);
  HeapEntry* v = entries_.data();
  while (hole > kRoot) {
    const size_t parent = hole / 4 + 2;
    if (!(entry.key < v[parent].key)) break;
    v[hole] = v[parent];
    hole = parent;
  }
  v[hole] = entry;
}

void EventHeap::remove_top() {
  ORRERY_ASSERT(entries_.size() > kRoot);
  const HeapEntry last = entries_.back();
  entries_.pop_back();
  if (entries_.size() > kRoot) sift_down(kRoot, last);
}

void EventHeap::sift_down(size_t hole, const HeapEntry& entry) {
  HeapEntry* v = entries_.data();
  const size_t end = entries_.size();
  for (;;) {
    const size_t first = 4 * hole - 8;
    if (first >= end) break;
    size_t best = first;
    const size_t stop = std::min(first + 4, end);
    for (size_t c = first + 1; c < stop; ++c) {
      if (v[c].key < v[best].key) best = c;
    }
    if (!(v[best].key < entry.key)) break;
    v[hole] = v[best];
    hole = best;
  }
  v[hole] = entry;
}

}  // namespace detail

// ---- Scheduling

Time Engine::after(Time delay) const {
  ORRERY_ASSERT(delay >= Time::zero());
  ORRERY_ASSERT(delay <= Time::max() - now_);
  return now_ + delay;
}

EventKey Engine::make_key(Time time, Priority priority) {
  ORRERY_ASSERT(time >= now_);  // scheduling in the past
  ORRERY_ASSERT(!in_fluid_advance_);
  ORRERY_ASSERT(next_sequence_ <= EventKey::kMaxSequence);
  // Causality: never precede, in key order, an event already taken off the queue. Only an event at
  // the same instant in an earlier class could; it takes that event's class instead.
  if (time == last_popped_.time() && priority < last_popped_.priority()) priority = last_popped_.priority();
  return EventKey(time, priority, next_sequence_++);
}

EventId Engine::push(Time time, Priority priority, EventHandler* handler, uint64_t tag) {
  const EventKey key = make_key(time, priority);
  heap_.push(detail::HeapEntry{key, handler, tag});
  return EventId(key);
}

EventId Engine::schedule_at(Time time, EventHandler* handler, uint64_t tag, Priority priority) {
  ORRERY_ASSERT(handler != nullptr);
  return push(time, priority, handler, tag);
}

EventId Engine::schedule_after(Time delay, EventHandler* handler, uint64_t tag, Priority priority) {
  ORRERY_ASSERT(handler != nullptr);
  return push(after(delay), priority, handler, tag);
}

bool Engine::cancel(EventId id) {
  if (!id.valid()) return false;
  const EventKey& key = id.key();
  ORRERY_ASSERT(key.sequence() < next_sequence_);  // an id from this engine
  // Queued <=> key > last_popped_ (pops are monotone and every push is above last_popped_), unless
  // the heap has been empty since it was scheduled (sequence below the floor).
  if (key.sequence() < sequence_floor_ || !(last_popped_ < key)) return false;
  return cancelled_.insert(key.sequence()).second;
}

// ---- Running

StopReason Engine::run() {
  ORRERY_ASSERT(!running_);
  StopReason reason;
  {
    RunningGuard guard(running_);
    stop_requested_ = false;
    reason = loop(Time::max(), /*single=*/false);
  }
  finish(reason);
  return reason;
}

StopReason Engine::run_until(Time limit) {
  ORRERY_ASSERT(!running_);
  ORRERY_ASSERT(limit >= now_);
  StopReason reason;
  {
    RunningGuard guard(running_);
    stop_requested_ = false;
    reason = loop(limit, /*single=*/false);
    if (reason != StopReason::kStopped) {
      if (limit > now_) advance_time(limit);
      reason = StopReason::kReachedTime;
    }
  }
  finish(reason);
  return reason;
}

bool Engine::step() {
  ORRERY_ASSERT(!running_);
  RunningGuard guard(running_);
  stop_requested_ = false;
  return loop(Time::max(), /*single=*/true) != StopReason::kDrained;
}

void Engine::stop() {
  ORRERY_ASSERT(running_);
  stop_requested_ = true;
}

// Returns kDrained when nothing is queued, kReachedTime when the next event is after limit, and
// kStopped after a stop() or, with single, after one dispatch. The next event is the least key over
// the heap's top and the earliest armed fluid wake-up (those live beside the heap, one per model).
StopReason Engine::loop(Time limit, bool single) {
  for (;;) {
    if (next_fluid_ != kNoFluid && (heap_.empty() || fluids_[next_fluid_].wake < heap_.top().key)) {
      const size_t index = next_fluid_;
      const EventKey key = fluids_[index].wake;
      if (key.time() > limit) return StopReason::kReachedTime;
      last_popped_ = key;
      disarm_fluid(index);
      dispatch_fluid(index, key);
    } else {
      if (heap_.empty()) break;
      if (heap_.top().key.time() > limit) return StopReason::kReachedTime;
      // The taken entry stays in the heap until the handler's first push replaces it, or until the
      // guard closes the take (also if the handler throws).
      TakeGuard take(heap_);
      const detail::HeapEntry entry = heap_.take_top();
      last_popped_ = entry.key;
      if (!cancelled_.empty() && cancelled_.erase(entry.key.sequence()) != 0) {
        if (entry.handler == nullptr) callbacks_.release(entry.tag);
        continue;
      }
      dispatch(entry);
    }
    if (single || stop_requested_) return StopReason::kStopped;
  }
  // Nothing is queued, so no event scheduled so far can be cancelled any more. Cancelled events may
  // have been popped beyond now(); fall back to the last dispatched key so that scheduling at now()
  // stays valid.
  last_popped_ = last_dispatched_;
  sequence_floor_ = next_sequence_;
  return StopReason::kDrained;
}

void Engine::dispatch(const detail::HeapEntry& entry) {
  if (entry.key.time() > now_) advance_time(entry.key.time());
  last_dispatched_ = entry.key;
  ++events_processed_;
  if (entry.handler != nullptr) {
    if (on_dispatch_.has_subscribers()) {
      on_dispatch_.emit(DispatchEvent{entry.key, EventKind::kHandler, entry.handler, entry.tag});
    }
    entry.handler->on_event(*this, entry.tag);
  } else {
    if (on_dispatch_.has_subscribers()) {
      on_dispatch_.emit(DispatchEvent{entry.key, EventKind::kCallable, nullptr, 0});
    }
    callbacks_[entry.tag](*this);  // the pool does not move it, even if it schedules more
    callbacks_.release(entry.tag);
  }
}

void Engine::dispatch_fluid(size_t index, const EventKey& key) {
  if (key.time() > now_) advance_time(key.time());
  last_dispatched_ = key;
  ++events_processed_;
  if (on_dispatch_.has_subscribers()) on_dispatch_.emit(DispatchEvent{key, EventKind::kFluidWakeUp, nullptr, 0});
  fluids_[index].model->on_due(*this, now_);
  // on_due may have removed the model or registered others (fluids_ may have reallocated).
  if (fluids_[index].model != nullptr) arm_fluid(index);
}

void Engine::advance_time(Time t) {
  now_ = t;
  if (active_fluids_.empty()) return;
  in_fluid_advance_ = true;
  for (FluidModel* model : active_fluids_) model->advance_to(t);
  in_fluid_advance_ = false;
}

void Engine::finish(StopReason reason) {
  if (on_finish_.has_subscribers()) on_finish_.emit(RunFinished{now_, events_processed_, reason});
}

// ---- Fluid models

size_t Engine::fluid_index(const FluidModel* model) const {
  size_t i = 0;
  while (i < fluids_.size() && fluids_[i].model != model) ++i;
  ORRERY_CHECK(model != nullptr && i < fluids_.size());  // REQUIRES: registered
  return i;
}

void Engine::add_fluid(FluidModel* model) {
  ORRERY_CHECK(model != nullptr);
  ORRERY_ASSERT(!in_fluid_advance_);
  ORRERY_ASSERT(std::find(active_fluids_.begin(), active_fluids_.end(), model) == active_fluids_.end());
  fluids_.push_back(FluidRecord{model, EventKey(), false});
  active_fluids_.push_back(model);
  arm_fluid(fluids_.size() - 1);
}

void Engine::remove_fluid(FluidModel* model) {
  ORRERY_ASSERT(!in_fluid_advance_);
  const size_t index = fluid_index(model);
  disarm_fluid(index);
  fluids_[index].model = nullptr;
  std::erase(active_fluids_, model);
}

void Engine::notify_fluid_changed(FluidModel* model) {
  ORRERY_ASSERT(!in_fluid_advance_);
  arm_fluid(fluid_index(model));
}

// Keeps exactly one wake-up for the model, at its next_event_time(). An unchanged due time keeps the
// wake-up's key (and so its place among equal-time events); a changed one gets a fresh key, exactly
// as if it were scheduled now. Wake-ups live in fluids_, not in the heap, so re-arming leaves nothing
// stale behind however often the due time moves.
void Engine::arm_fluid(size_t index) {
  FluidRecord& record = fluids_[index];
  const Time due = record.model->next_event_time();
  ORRERY_ASSERT(due >= now_);
  if (record.armed && record.wake.time() == due) return;
  disarm_fluid(index);
  if (due == Time::max()) return;
  record.wake = make_key(due, Priority::kFluid);
  record.armed = true;
  ++armed_fluids_;
  if (next_fluid_ == kNoFluid || record.wake < fluids_[next_fluid_].wake) next_fluid_ = index;
}

void Engine::disarm_fluid(size_t index) {
  if (!fluids_[index].armed) return;
  fluids_[index].armed = false;
  --armed_fluids_;
  if (next_fluid_ != index) return;
  // Find the new earliest wake-up: a scan, since models are few.
  next_fluid_ = kNoFluid;
  for (size_t i = 0; i < fluids_.size(); ++i) {
    if (fluids_[i].armed && (next_fluid_ == kNoFluid || fluids_[i].wake < fluids_[next_fluid_].wake)) next_fluid_ = i;
  }
}

}  // namespace orrery::des
