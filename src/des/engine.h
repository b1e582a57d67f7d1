// The discrete-event engine: a clock, an event queue and a dispatch loop.
//
// Model card
//   What: a sequential discrete-event simulator. Events are (time, priority class, sequence)
//         keys with a handler; the engine dispatches them in key order and advances the clock to
//         each event's time. Fluid models (des/fluid.h) evolve continuously between events.
//   Event order (EventKey, defined once below and used everywhere): events are totally ordered by
//         1. time (int64 picoseconds), earlier first;
//         2. priority class, lower first (see Priority for the classes and why);
//         3. sequence number, a per-engine counter assigned when the event is scheduled, so events
//            with equal time and class run first-in first-out.
//         Keys are unique, so a run is a deterministic function of its inputs.
//   Causality: keys are dispatched in strictly increasing order. Scheduling before now() is a broken
//         invariant (assertion). An event scheduled at now() never precedes, in key order, an event
//         already taken off the queue: if the last event taken off is at now() and in a later class
//         (a kDefault handler scheduling a kFluid event at now()), the new event takes that class.
//         It then runs after the running event and after the events of that class already queued
//         at now(), never "in the past".
//   Cancellation is lazy: cancel() marks an event; it is discarded when it reaches the queue's top
//         (until then it occupies a heap entry). pending() excludes it.
//   Cost: scheduling and dispatch are O(log4 n) on a flat 4-ary heap of 32-byte entries; a handler
//         that schedules one successor costs one sift (the successor replaces the dispatched top).
//         Handler events (EventHandler*) allocate nothing; callable events keep the callable in a
//         side pool (inline up to Callback::kInlineSize bytes, heap allocated beyond). Measured
//         figures: docs/des.md.
//   The engine is a value: no globals, no singletons; any number of engines may live in one process
//         and do not interact. An engine and everything it drives belong to one thread.
//   Range: times in [0, Time::max()); at most 2^56 events scheduled per engine.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/assert.h"
#include "core/units.h"
#include "des/fluid.h"
#include "des/observer.h"

namespace orrery::des {

class Engine;

// Priority classes order events that fall at the same time. Lower runs first.
enum class Priority : uint8_t {
  // Fluid-model wake-ups (flow completions in the flow-level network). First, so that everything
  // that finishes at t has finished before other handlers at t look at the state.
  kFluid = 0,
  // Discrete network deliveries (alpha-beta messages, packet arrivals). Before default work at the
  // same instant, so a compute step that starts at t sees the data that arrived at t.
  kNetwork = 1,
  // Everything else: compute completions, schedulers, workload arrivals, glue.
  kDefault = 2,
  // Samplers, progress reports, periodic metric snapshots. Last, so they see the settled state at t.
  kObserver = 3,
};

// The total order of events: (time, priority, sequence), lexicographic.
// Stored packed as (time, order) with order = priority << 56 | sequence, so that comparing order as
// one unsigned integer is comparing (priority, sequence) lexicographically. The defaulted comparison
// over the members (time_, then order_) is the event order; this is the only place it is defined.
// (A single 128-bit integer key with branch-free compares measured slower in the heap; see
// docs/des.md.)
class EventKey {
 public:
  static constexpr int kSequenceBits = 56;
  static constexpr uint64_t kMaxSequence = (uint64_t{1} << kSequenceBits) - 1;

  constexpr EventKey() = default;
  constexpr EventKey(Time time, Priority priority, uint64_t sequence)
      : time_(time), order_(uint64_t{static_cast<uint8_t>(priority)} << kSequenceBits | sequence) {}

  constexpr Time time() const { return time_; }
  constexpr Priority priority() const { return static_cast<Priority>(order_ >> kSequenceBits); }
  constexpr uint64_t sequence() const { return order_ & kMaxSequence; }

  friend constexpr std::strong_ordering operator<=>(const EventKey&, const EventKey&) = default;
  friend constexpr bool operator==(const EventKey&, const EventKey&) = default;

 private:
  Time time_ = Time::ps(std::numeric_limits<int64_t>::min());  // default: below every real key
  uint64_t order_ = 0;
};

// Names a scheduled event, for cancel(). A default-constructed EventId names no event.
class EventId {
 public:
  constexpr EventId() = default;
  constexpr explicit EventId(EventKey key) : key_(key) {}
  constexpr const EventKey& key() const { return key_; }
  constexpr bool valid() const { return key_.sequence() != 0; }
  friend constexpr bool operator==(const EventId&, const EventId&) = default;

 private:
  EventKey key_;
};

// The allocation-free event path: implement on_event and schedule with a tag that tells the handler
// what happened (an index, an enum, a packed pair). The handler must outlive its pending events.
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void on_event(Engine& engine, uint64_t tag) = 0;
};

// A move-only type-erased `void(Engine&)` (or `void()`) callable with a small inline buffer, for
// tests and glue code. Callables up to kInlineSize bytes (three pointers: `this` plus two values),
// pointer-aligned, with a noexcept move live inline; larger ones are heap allocated. Kept at 32 bytes
// so that the engine's pool of pending callables stays compact.
class Callback {
 public:
  static constexpr size_t kInlineSize = 24;

  Callback() = default;
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, Callback> &&
             (std::is_invocable_v<std::decay_t<F>&, Engine&> || std::is_invocable_v<std::decay_t<F>&>))
  Callback(F&& f) {  // NOLINT(google-explicit-constructor): lambdas convert implicitly by design.
    emplace(std::forward<F>(f));
  }
  Callback(Callback&& other) noexcept { take(other); }
  Callback& operator=(Callback&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  Callback(const Callback&) = delete;
  Callback& operator=(const Callback&) = delete;
  ~Callback() { reset(); }

  // Replaces the held callable with f.
  template <class F>
  void emplace(F&& f) {
    using Fn = std::decay_t<F>;
    reset();
    if constexpr (fits_inline<Fn>()) {
      ::new (static_cast<void*>(storage_)) Fn(std::forward<F>(f));
      ops_ = &kInlineOps<Fn>;
    } else {
      ::new (static_cast<void*>(storage_)) Fn*(new Fn(std::forward<F>(f)));
      ops_ = &kHeapOps<Fn>;
    }
  }

  explicit operator bool() const { return ops_ != nullptr; }
  // REQUIRES: non-empty.
  void operator()(Engine& engine) { ops_->invoke(storage_, engine); }
  void reset() {
    if (ops_ != nullptr) {
      ops_->destroy(storage_);
      ops_ = nullptr;
    }
  }

 private:
  struct Ops {
    void (*invoke)(void* self, Engine& engine);
    void (*move)(void* dst, void* src) noexcept;  // move-constructs dst from src, destroys src
    void (*destroy)(void* self) noexcept;
  };

  template <class Fn>
  static constexpr bool fits_inline() {
    return sizeof(Fn) <= kInlineSize && alignof(Fn) <= alignof(void*) &&
           std::is_nothrow_move_constructible_v<Fn>;
  }
  template <class Fn>
  static void call(Fn& fn, Engine& engine) {
    if constexpr (std::is_invocable_v<Fn&, Engine&>) {
      fn(engine);
    } else {
      fn();
    }
  }
  template <class Fn>
  static constexpr Ops kInlineOps{
      [](void* self, Engine& engine) { call(*std::launder(static_cast<Fn*>(self)), engine); },
      [](void* dst, void* src) noexcept {
        Fn* s = std::launder(static_cast<Fn*>(src));
        ::new (dst) Fn(std::move(*s));
        s->~Fn();
      },
      [](void* self) noexcept { std::launder(static_cast<Fn*>(self))->~Fn(); }};
  template <class Fn>
  static constexpr Ops kHeapOps{
      [](void* self, Engine& engine) { call(**std::launder(static_cast<Fn**>(self)), engine); },
      [](void* dst, void* src) noexcept { ::new (dst) Fn*(*std::launder(static_cast<Fn**>(src))); },
      [](void* self) noexcept { delete *std::launder(static_cast<Fn**>(self)); }};

  void take(Callback& other) noexcept {
    if (other.ops_ != nullptr) {
      other.ops_->move(storage_, other.storage_);
      ops_ = other.ops_;
      other.ops_ = nullptr;
    }
  }

  alignas(void*) std::byte storage_[kInlineSize];
  const Ops* ops_ = nullptr;
};
static_assert(sizeof(Callback) == 32);

// What kind of handler an event has (for observers).
enum class EventKind : uint8_t {
  kHandler,      // EventHandler::on_event
  kCallable,     // a Callback
  kFluidWakeUp,  // FluidModel::on_due
};

// Emitted by Engine::on_dispatch() just before each event's handler runs (now() == key.time()).
struct DispatchEvent {
  EventKey key;
  EventKind kind;
  const EventHandler* handler;  // the handler for kHandler events, nullptr otherwise
  uint64_t tag;                 // the tag for kHandler events, 0 otherwise
};

// Why run() / run_until() returned.
enum class StopReason : uint8_t {
  kDrained,      // run(): no live event left
  kReachedTime,  // run_until(t): every event with time <= t has run and now() == t
  kStopped,      // a handler called stop()
};

// Emitted by Engine::on_finish() when run() or run_until() returns.
struct RunFinished {
  Time now;
  uint64_t events_processed;  // the engine's total, as events_processed()
  StopReason reason;
};

namespace detail {

// One queued event. Callable events have handler == nullptr and carry their pool slot in tag.
struct HeapEntry {
  EventKey key;
  EventHandler* handler;
  uint64_t tag;
};
static_assert(sizeof(HeapEntry) == 32, "keep heap entries at 32 bytes: two per cache line");
static_assert(std::is_trivially_copyable_v<HeapEntry>);

// Allocates cache-line-aligned storage, so that the heap's groups of four siblings (128 bytes) span
// exactly two cache lines.
template <class T>
struct CacheAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheAlignedAllocator() = default;
  template <class U>
  explicit CacheAlignedAllocator(const CacheAlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, size_t n) { ::operator delete(p, n * sizeof(T), kAlignment); }
  friend bool operator==(const CacheAlignedAllocator&, const CacheAlignedAllocator&) = default;
};

// Min-heap of HeapEntry by key: a flat 4-ary heap over one aligned array. The root sits at position
// kRoot = 3 (positions 0..2 are padding) so that the children of position p, 4p-8 .. 4p-5, start on a
// multiple of four entries: one aligned 128-byte group. The parent of position q is q/4 + 2.
//
// Taking the top is deferred: take_top() returns the top but leaves it in place; the next push()
// overwrites it and sifts the new entry down from the root (one sift instead of a pop's sift-down
// plus a push's sift-up: the common "handler schedules its successor" case), and finish_take()
// removes it if no push came. While a take is open, size() and empty() already exclude the top.
class EventHeap {
 public:
  EventHeap() : entries_(kRoot) {}
  bool empty() const { return size() == 0; }
  size_t size() const { return entries_.size() - kRoot - (taking_ ? 1 : 0); }
  // The least entry. REQUIRES: non-empty; no take open.
  const HeapEntry& top() const { return entries_[kRoot]; }
  void push(const HeapEntry& entry);
  // Opens a take of the top and returns it. REQUIRES: non-empty; no take open.
  HeapEntry take_top() {
    taking_ = true;
    return entries_[kRoot];
  }
  // Closes the open take, if any, removing the taken entry if push() has not replaced it.
  void finish_take() {
    if (taking_) {
      taking_ = false;
      remove_top();
    }
  }

 private:
  static constexpr size_t kRoot = 3;
  void remove_top();
  // Moves `entry` into the hole at `hole` and down to its place.
  void sift_down(size_t hole, const HeapEntry& entry);
  std::vector<HeapEntry, CacheAlignedAllocator<HeapEntry>> entries_;
  bool taking_ = false;
};

// The pending callables, by slot. Fixed-size aligned chunks: a callable never moves while it runs
// (even if it schedules more and the pool grows), and finding a slot is one shift and one mask.
class CallbackPool {
 public:
  Callback& operator[](uint64_t slot) { return chunks_[slot >> kChunkBits]->items[slot & (kChunkSize - 1)]; }
  // Returns a free slot holding an empty Callback (most recently released first: cache-warm).
  uint64_t acquire() {
    if (free_.empty()) grow();
    const uint64_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  // Empties the slot's Callback and returns the slot to the free list.
  void release(uint64_t slot) {
    (*this)[slot].reset();
    free_.push_back(slot);
  }

 private:
  static constexpr int kChunkBits = 10;
  static constexpr uint64_t kChunkSize = uint64_t{1} << kChunkBits;
  struct alignas(64) Chunk {
    Callback items[kChunkSize];
  };
  void grow() {
    const uint64_t base = chunks_.size() * kChunkSize;
    chunks_.push_back(std::make_unique<Chunk>());
    for (uint64_t k = kChunkSize; k-- > 0;) free_.push_back(base + k);  // lowest slot on top
  }
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<uint64_t> free_;
};

}  // namespace detail

class Engine {
 public:
  Engine() = default;
  // Not copyable: handlers and models refer to their engine. Movable while not running.
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  Engine(Engine&&) noexcept = default;
  Engine& operator=(Engine&&) noexcept = default;
  ~Engine() = default;

  // ---- Scheduling. REQUIRES: time >= now() (delay >= 0); handler non-null.
  EventId schedule_at(Time time, EventHandler* handler, uint64_t tag, Priority priority = Priority::kDefault);
  EventId schedule_after(Time delay, EventHandler* handler, uint64_t tag,
                         Priority priority = Priority::kDefault);

  // Callable path: f is `void(Engine&)` or `void()`; it is moved into the engine's pool.
  template <class F>
    requires(std::is_invocable_v<std::decay_t<F>&, Engine&> || std::is_invocable_v<std::decay_t<F>&>)
  EventId schedule_at(Time time, F&& f, Priority priority = Priority::kDefault) {
    const uint64_t slot = callbacks_.acquire();
    callbacks_[slot].emplace(std::forward<F>(f));
    return push(time, priority, nullptr, slot);
  }
  template <class F>
    requires(std::is_invocable_v<std::decay_t<F>&, Engine&> || std::is_invocable_v<std::decay_t<F>&>)
  EventId schedule_after(Time delay, F&& f, Priority priority = Priority::kDefault) {
    return schedule_at(after(delay), std::forward<F>(f), priority);
  }

  // Cancels a pending event. Returns true if it was pending (it will not run); false if it has
  // already run, was already cancelled, or id names no event. REQUIRES: id came from this engine.
  // A cancelled callable is destroyed when the cancelled event reaches the top of the queue.
  bool cancel(EventId id);

  // ---- Running. None of these may be called from inside a handler (no re-entrant runs).
  // Dispatches events until none is left or a handler calls stop(). now() is the time of the last
  // dispatched event.
  StopReason run();
  // Dispatches every event with time <= limit (including those scheduled meanwhile), then sets
  // now() = limit and advances the fluid models to it. If a handler calls stop(), returns at once
  // with now() the stopping event's time. REQUIRES: limit >= now().
  StopReason run_until(Time limit);
  // Dispatches the next live event. Returns false if there was none.
  bool step();
  // From inside a handler: run()/run_until() return after this handler. REQUIRES: running.
  void stop();

  Time now() const { return now_; }
  // Events scheduled and neither dispatched nor cancelled (fluid wake-ups included).
  size_t pending() const { return heap_.size() - cancelled_.size() + armed_fluids_; }
  // Queued entries: pending() plus cancelled events not yet discarded (memory diagnostics, tests).
  size_t queue_size() const { return heap_.size() + armed_fluids_; }
  // Events dispatched so far (handler, callable and fluid wake-ups; not cancelled ones).
  uint64_t events_processed() const { return events_processed_; }
  bool running() const { return running_; }

  // ---- Fluid models (contract in des/fluid.h).
  // Registers a model whose state is current at now(); arms its first wake-up. The model must
  // outlive the engine or be removed first. REQUIRES: not already registered.
  void add_fluid(FluidModel* model);
  // Unregisters a model and drops its wake-up. REQUIRES: registered.
  void remove_fluid(FluidModel* model);
  // Tells the engine that model's next_event_time() may have changed. REQUIRES: registered.
  void notify_fluid_changed(FluidModel* model);

  // ---- Observers. Only invoked when someone subscribed (one branch per event otherwise).
  Signal<DispatchEvent>& on_dispatch() { return on_dispatch_; }
  Signal<RunFinished>& on_finish() { return on_finish_; }

 private:
  struct FluidRecord {
    FluidModel* model = nullptr;  // nullptr once removed
    EventKey wake;                // the wake-up's key, when armed
    bool armed = false;
  };
  static constexpr size_t kNoFluid = static_cast<size_t>(-1);

  Time after(Time delay) const;
  EventKey make_key(Time time, Priority priority);
  EventId push(Time time, Priority priority, EventHandler* handler, uint64_t tag);
  StopReason loop(Time limit, bool single);
  void dispatch(const detail::HeapEntry& entry);
  void dispatch_fluid(size_t index, const EventKey& key);
  void advance_time(Time t);
  size_t fluid_index(const FluidModel* model) const;
  void arm_fluid(size_t index);
  void disarm_fluid(size_t index);
  void finish(StopReason reason);

  detail::EventHeap heap_;
  Time now_;
  uint64_t next_sequence_ = 1;  // 0 is reserved for "no event"
  // The last key taken off the queue (heap or fluid wake-ups; dispatched or discarded) and the last
  // dispatched key. Every queued key is greater than last_popped_ (keys are taken off in increasing
  // order and every new key is above it), which is how cancel() knows whether an event is queued.
  EventKey last_popped_;  // default: below every real key
  EventKey last_dispatched_;
  // Events with sequence < sequence_floor_ are known not to be queued (the heap was empty).
  uint64_t sequence_floor_ = 1;
  std::unordered_set<uint64_t> cancelled_;  // sequences of cancelled events still in the heap

  detail::CallbackPool callbacks_;

  // Fluid wake-ups live here, beside the heap: one key per model, re-keyed in place when the due
  // time moves. next_fluid_ is the armed record with the least key (kNoFluid if none).
  std::vector<FluidRecord> fluids_;
  std::vector<FluidModel*> active_fluids_;  // registration order, for advance_to
  size_t next_fluid_ = kNoFluid;
  size_t armed_fluids_ = 0;
  bool in_fluid_advance_ = false;

  uint64_t events_processed_ = 0;
  bool running_ = false;
  bool stop_requested_ = false;

  Signal<DispatchEvent> on_dispatch_;
  Signal<RunFinished> on_finish_;
};

}  // namespace orrery::des
