// The discrete-event engine. Model card, event order and contracts: des/engine.h.
#include "des/engine.h"

#include <algorithm>

namespace orrery::des {

namespace {

// Internal events (handler == nullptr) carry in tag either a callable's pool slot or, with this bit
// set, the index of a fluid model record.
constexpr uint64_t kFluidBit = uint64_t{1} << 63;

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
// The child scan is a plain loop with branches on purpose: predicted branches let the CPU load the
// next level speculatively, which measured faster than a branch-free tournament (docs/des.md).

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

EventId Engine::push(Time time, Priority priority, EventHandler* handler, uint64_t tag) {
  ORRERY_ASSERT(time >= now_);  // scheduling in the past
  ORRERY_ASSERT(!in_fluid_advance_);
  ORRERY_ASSERT(next_sequence_ <= EventKey::kMaxSequence);
  // Causality: never precede, in key order, an event already taken off the queue. Only an event at
  // the same instant in an earlier class could; it takes that event's class instead.
  if (time == last_popped_.time() && priority < last_popped_.priority()) priority = last_popped_.priority();
  const EventKey key(time, priority, next_sequence_++);
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

// Returns kDrained when the heap empties, kReachedTime when the next event is after limit, and
// kStopped after a stop() or, with single, after one dispatch.
StopReason Engine::loop(Time limit, bool single) {
  while (!heap_.empty()) {
    if (heap_.top().key.time() > limit) return StopReason::kReachedTime;
    // The taken entry stays in the heap until the handler's first push replaces it, or until the
    // guard closes the take (also if the handler throws).
    TakeGuard take(heap_);
    const detail::HeapEntry entry = heap_.take_top();
    last_popped_ = entry.key;
    if ((!cancelled_.empty() && cancelled_.erase(entry.key.sequence()) != 0) || is_stale(entry)) {
      discard(entry);
      continue;
    }
    dispatch(entry);
    if (single || stop_requested_) return StopReason::kStopped;
  }
  // Nothing is queued, so no event scheduled so far can be cancelled any more. Discarded events may
  // have been popped beyond now(); fall back to the last dispatched key so that scheduling at now()
  // stays valid.
  last_popped_ = last_dispatched_;
  sequence_floor_ = next_sequence_;
  return StopReason::kDrained;
}

bool Engine::is_stale(const detail::HeapEntry& entry) const {
  if (entry.handler != nullptr || (entry.tag & kFluidBit) == 0) return false;
  return fluids_[entry.tag & ~kFluidBit].live_sequence != entry.key.sequence();
}

void Engine::discard(const detail::HeapEntry& entry) {
  if (entry.handler != nullptr) return;
  if ((entry.tag & kFluidBit) != 0) {
    --stale_wake_ups_;
  } else {
    callbacks_.release(entry.tag);
  }
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
  } else if ((entry.tag & kFluidBit) != 0) {
    if (on_dispatch_.has_subscribers()) {
      on_dispatch_.emit(DispatchEvent{entry.key, EventKind::kFluidWakeUp, nullptr, 0});
    }
    const size_t index = entry.tag & ~kFluidBit;
    fluids_[index].live_sequence = 0;
    fluids_[index].model->on_due(*this, now_);
    // on_due may have removed the model or registered others (fluids_ may have reallocated).
    if (fluids_[index].model != nullptr) arm_fluid(index);
  } else {
    if (on_dispatch_.has_subscribers()) {
      on_dispatch_.emit(DispatchEvent{entry.key, EventKind::kCallable, nullptr, 0});
    }
    callbacks_[entry.tag](*this);  // the pool does not move it, even if it schedules more
    callbacks_.release(entry.tag);
  }
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
  fluids_.push_back(FluidRecord{model, Time::zero(), 0});
  active_fluids_.push_back(model);
  arm_fluid(fluids_.size() - 1);
}

void Engine::remove_fluid(FluidModel* model) {
  ORRERY_ASSERT(!in_fluid_advance_);
  FluidRecord& record = fluids_[fluid_index(model)];
  if (record.live_sequence != 0) {
    record.live_sequence = 0;
    ++stale_wake_ups_;
  }
  record.model = nullptr;
  std::erase(active_fluids_, model);
}

void Engine::notify_fluid_changed(FluidModel* model) {
  ORRERY_ASSERT(!in_fluid_advance_);
  arm_fluid(fluid_index(model));
}

// Keeps exactly one live wake-up for the model, at its next_event_time().
void Engine::arm_fluid(size_t index) {
  FluidRecord& record = fluids_[index];
  const Time due = record.model->next_event_time();
  ORRERY_ASSERT(due >= now_);
  if (record.live_sequence != 0) {
    if (record.wake_time == due) return;  // the live wake-up is still right
    record.live_sequence = 0;             // supersede it: it becomes stale
    ++stale_wake_ups_;
  }
  if (due == Time::max()) return;
  const EventId id = push(due, Priority::kFluid, nullptr, kFluidBit | index);
  record.live_sequence = id.key().sequence();
  record.wake_time = due;
}

}  // namespace orrery::des
