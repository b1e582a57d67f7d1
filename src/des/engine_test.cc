#include "des/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "des/fluid.h"
#include "des/observer.h"

namespace orrery::des {
namespace {

// One dispatched event as a handler saw it.
struct Seen {
  int64_t time_ps;
  uint64_t tag;
  friend bool operator==(const Seen&, const Seen&) = default;
};

// Records (now, tag) of every event it handles.
class Recorder : public EventHandler {
 public:
  void on_event(Engine& engine, uint64_t tag) override { seen.push_back({engine.now().picoseconds(), tag}); }
  std::vector<uint64_t> tags() const {
    std::vector<uint64_t> out;
    for (const Seen& s : seen) out.push_back(s.tag);
    return out;
  }
  std::vector<Seen> seen;
};

using Tags = std::vector<uint64_t>;

// ---------------------------------------------------------------------------------------------
// Event order: time, then priority class, then sequence (FIFO).

TEST(EngineOrder, EventsRunInTimeOrderWhateverTheSchedulingOrder) {
  Engine engine;
  Recorder rec;
  engine.schedule_at(Time::ns(30), &rec, 3);
  engine.schedule_at(Time::ns(10), &rec, 1);
  engine.schedule_at(Time::ns(20), &rec, 2);
  EXPECT_EQ(engine.run(), StopReason::kDrained);
  const std::vector<Seen> expected{{10'000, 1}, {20'000, 2}, {30'000, 3}};
  EXPECT_EQ(rec.seen, expected);
  EXPECT_EQ(engine.now(), Time::ns(30));  // the time of the last dispatched event
  EXPECT_EQ(engine.events_processed(), 3u);
}

TEST(EngineOrder, AtEqualTimeTheLowerPriorityClassRunsFirst) {
  Engine engine;
  Recorder rec;
  // Scheduled last-class first, so FIFO alone would give the opposite order.
  engine.schedule_at(Time::ns(5), &rec, 3, Priority::kObserver);
  engine.schedule_at(Time::ns(5), &rec, 2, Priority::kDefault);
  engine.schedule_at(Time::ns(5), &rec, 1, Priority::kNetwork);
  engine.schedule_at(Time::ns(5), &rec, 0, Priority::kFluid);
  engine.run();
  EXPECT_EQ(rec.tags(), (Tags{0, 1, 2, 3}));
}

TEST(EngineOrder, AtEqualTimeAndClassEventsRunInSchedulingOrder) {
  Engine engine;
  Recorder rec;
  for (uint64_t tag = 0; tag < 8; ++tag) engine.schedule_at(Time::ns(7), &rec, tag);
  engine.run();
  EXPECT_EQ(rec.tags(), (Tags{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(EngineOrder, ThreeLevelTiesResolveByTimeThenClassThenSequence) {
  Engine engine;
  Recorder rec;
  // tag: (time, class), scheduled in this order (sequence = position):
  //   A=1: (2 ns, default)   B=2: (1 ns, observer)  C=3: (2 ns, network)
  //   D=4: (2 ns, default)   E=5: (1 ns, default)   F=6: (2 ns, network)
  // Time first: {E, B} at 1 ns before {A, C, D, F} at 2 ns.
  // At 1 ns, class: E (default) before B (observer), although B was scheduled first.
  // At 2 ns, class: network {C, F} before default {A, D}; within each, sequence: C<F, A<D.
  // Expected: E B C F A D.
  engine.schedule_at(Time::ns(2), &rec, 1, Priority::kDefault);
  engine.schedule_at(Time::ns(1), &rec, 2, Priority::kObserver);
  engine.schedule_at(Time::ns(2), &rec, 3, Priority::kNetwork);
  engine.schedule_at(Time::ns(2), &rec, 4, Priority::kDefault);
  engine.schedule_at(Time::ns(1), &rec, 5, Priority::kDefault);
  engine.schedule_at(Time::ns(2), &rec, 6, Priority::kNetwork);
  engine.run();
  EXPECT_EQ(rec.tags(), (Tags{5, 2, 3, 6, 1, 4}));
}

TEST(EventKey, ClassDominatesSequenceAndTimeDominatesBoth) {
  // The key packs class above a 56-bit sequence; a packing bug would let a huge sequence outrank a
  // later class, or a class outrank an earlier time.
  const EventKey fluid_late_seq(Time::ns(1), Priority::kFluid, EventKey::kMaxSequence);
  const EventKey network_early_seq(Time::ns(1), Priority::kNetwork, 1);
  EXPECT_LT(fluid_late_seq, network_early_seq);
  EXPECT_LT(EventKey(Time::ns(1), Priority::kObserver, 9), EventKey(Time::ns(2), Priority::kFluid, 1));
  EXPECT_LT(EventKey(Time::ns(1), Priority::kDefault, 4), EventKey(Time::ns(1), Priority::kDefault, 5));
  EXPECT_EQ(fluid_late_seq.priority(), Priority::kFluid);
  EXPECT_EQ(fluid_late_seq.sequence(), EventKey::kMaxSequence);
  EXPECT_EQ(network_early_seq.time(), Time::ns(1));
}

// ---------------------------------------------------------------------------------------------
// Cancel, run_until, stop, step, scheduling from handlers.

TEST(EngineCancel, ACancelledEventDoesNotRunAndIsNotPending) {
  Engine engine;
  Recorder rec;
  const EventId a = engine.schedule_at(Time::ns(1), &rec, 1);
  const EventId b = engine.schedule_at(Time::ns(2), &rec, 2);
  engine.schedule_at(Time::ns(3), &rec, 3);
  EXPECT_EQ(engine.pending(), 3u);
  EXPECT_TRUE(engine.cancel(b));
  EXPECT_FALSE(engine.cancel(b));  // already cancelled
  EXPECT_EQ(engine.pending(), 2u);
  engine.run();
  EXPECT_EQ(rec.tags(), (Tags{1, 3}));
  EXPECT_EQ(engine.events_processed(), 2u);
  EXPECT_FALSE(engine.cancel(a));  // already ran
  EXPECT_FALSE(engine.cancel(b));  // discarded
  EXPECT_FALSE(engine.cancel(EventId{}));
  EXPECT_EQ(engine.pending(), 0u);
}

TEST(EngineCancel, ADiscardedLastEventDoesNotMoveTheClockAndCannotBeCancelledAgain) {
  Engine engine;
  Recorder rec;
  engine.schedule_at(Time::ns(1), &rec, 1);
  const EventId timeout = engine.schedule_at(Time::ns(100), &rec, 2);
  EXPECT_TRUE(engine.cancel(timeout));
  engine.run();
  // The cancelled timeout was popped at 100 ns but never dispatched: the makespan is 1 ns.
  EXPECT_EQ(engine.now(), Time::ns(1));
  EXPECT_FALSE(engine.cancel(timeout));
  EXPECT_EQ(engine.pending(), 0u);
  // Scheduling at now() after the drain is still legal, runs, and can be cancelled: the discarded
  // timeout (popped at 100 ns) must not make an event at 1 ns look already taken off the queue.
  const EventId again = engine.schedule_at(Time::ns(1), &rec, 3);
  const EventId doomed = engine.schedule_at(Time::ns(1), &rec, 4);
  EXPECT_EQ(engine.pending(), 2u);
  EXPECT_TRUE(engine.cancel(doomed));
  engine.run();
  EXPECT_EQ(rec.tags(), (Tags{1, 3}));
  EXPECT_FALSE(engine.cancel(again));
}

TEST(EngineCancel, AHandlerCanCancelALaterEventButNotItself) {
  Engine engine;
  Recorder rec;
  EventId self;
  EventId later;
  bool cancelled_self = true;
  bool cancelled_later = false;
  self = engine.schedule_at(Time::ns(1), [&](Engine& e) {
    cancelled_self = e.cancel(self);
    cancelled_later = e.cancel(later);
  });
  later = engine.schedule_at(Time::ns(2), &rec, 2);
  engine.run();
  EXPECT_FALSE(cancelled_self);  // it is running, not pending
  EXPECT_TRUE(cancelled_later);
  EXPECT_TRUE(rec.seen.empty());
}

TEST(EngineCancel, ACancelledCallableIsDestroyedWithoutRunning) {
  Engine engine;
  auto token = std::make_shared<int>(0);
  const EventId id = engine.schedule_at(Time::ns(1), [token](Engine&) { ++*token; });
  EXPECT_EQ(token.use_count(), 2);
  EXPECT_TRUE(engine.cancel(id));
  engine.run();
  EXPECT_EQ(*token, 0);
  EXPECT_EQ(token.use_count(), 1);  // the pool released the capture
}

TEST(EngineRun, RunUntilRunsEventsAtExactlyTheLimitAndSetsNow) {
  Engine engine;
  Recorder rec;
  engine.schedule_at(Time::ns(1), &rec, 1);
  engine.schedule_at(Time::ns(2), &rec, 2);
  engine.schedule_at(Time::ns(3), &rec, 4);
  // An event at the limit that schedules another one at the limit: both belong to run_until(2 ns).
  engine.schedule_at(Time::ns(2), [&](Engine& e) { e.schedule_at(Time::ns(2), &rec, 3); });
  EXPECT_EQ(engine.run_until(Time::ns(2)), StopReason::kReachedTime);
  EXPECT_EQ(rec.tags(), (Tags{1, 2, 3}));
  EXPECT_EQ(engine.now(), Time::ns(2));
  EXPECT_EQ(engine.pending(), 1u);
  // No event in (2, 2.5] ns: the clock still moves to the limit.
  EXPECT_EQ(engine.run_until(Time::ps(2500)), StopReason::kReachedTime);
  EXPECT_EQ(engine.now(), Time::ps(2500));
  EXPECT_EQ(rec.seen.size(), 3u);
  EXPECT_EQ(engine.run(), StopReason::kDrained);
  EXPECT_EQ(rec.tags(), (Tags{1, 2, 3, 4}));
  EXPECT_EQ(engine.now(), Time::ns(3));
  // run_until past the last event: drains, then now() is the limit.
  EXPECT_EQ(engine.run_until(Time::ns(10)), StopReason::kReachedTime);
  EXPECT_EQ(engine.now(), Time::ns(10));
}

TEST(EngineRun, StopReturnsAfterTheStoppingHandlerAndRunResumes) {
  Engine engine;
  Recorder rec;
  engine.schedule_at(Time::ns(1), &rec, 1);
  engine.schedule_at(Time::ns(2), [&](Engine& e) {
    rec.seen.push_back({e.now().picoseconds(), 2});
    e.stop();
  });
  engine.schedule_at(Time::ns(2), &rec, 3);  // same instant, after the stopper: must wait
  engine.schedule_at(Time::ns(3), &rec, 4);
  EXPECT_EQ(engine.run_until(Time::ns(5)), StopReason::kStopped);
  EXPECT_EQ(engine.now(), Time::ns(2));  // not the limit: the run was stopped
  EXPECT_EQ(rec.tags(), (Tags{1, 2}));
  EXPECT_EQ(engine.pending(), 2u);
  EXPECT_EQ(engine.run(), StopReason::kDrained);
  EXPECT_EQ(rec.tags(), (Tags{1, 2, 3, 4}));
}

TEST(EngineRun, StepDispatchesOneEventAtATime) {
  Engine engine;
  Recorder rec;
  engine.schedule_at(Time::ns(4), &rec, 2);
  engine.schedule_at(Time::ns(1), &rec, 1);
  EXPECT_TRUE(engine.step());
  EXPECT_EQ(rec.tags(), (Tags{1}));
  EXPECT_EQ(engine.now(), Time::ns(1));
  EXPECT_TRUE(engine.step());
  EXPECT_EQ(engine.now(), Time::ns(4));
  EXPECT_FALSE(engine.step());
  EXPECT_EQ(engine.events_processed(), 2u);
}

TEST(EngineRun, AThrowingHandlerConsumesItsEventAndLeavesTheEngineUsable) {
  // Handlers should not throw; if one does, the exception leaves run(), that event counts as taken
  // off the queue (it must not run again), and the engine can go on.
  Engine engine;
  Recorder rec;
  engine.schedule_at(Time::ns(1), [] { throw std::runtime_error("model bug"); });
  engine.schedule_at(Time::ns(2), &rec, 2);
  EXPECT_THROW(engine.run(), std::runtime_error);
  EXPECT_FALSE(engine.running());
  EXPECT_EQ(engine.now(), Time::ns(1));
  EXPECT_EQ(engine.pending(), 1u);
  EXPECT_EQ(engine.run(), StopReason::kDrained);
  EXPECT_EQ(rec.tags(), (Tags{2}));
}

// A handler that reschedules itself `remaining` times, `delay` apart: the hold model.
class Repeater : public EventHandler {
 public:
  Repeater(Time delay, int remaining) : delay_(delay), remaining_(remaining) {}
  void on_event(Engine& engine, uint64_t tag) override {
    times.push_back(engine.now().picoseconds());
    if (--remaining_ > 0) engine.schedule_after(delay_, this, tag + 1);
  }
  std::vector<int64_t> times;

 private:
  Time delay_;
  int remaining_;
};

TEST(EngineRun, ScheduleAfterFromAHandlerCountsFromNow) {
  Engine engine;
  // First event at 5 ns, then 3 more, 7 ns apart: 5, 12, 19, 26 ns.
  Repeater rep(Time::ns(7), 4);
  engine.schedule_at(Time::ns(5), &rep, 0);
  engine.run();
  EXPECT_EQ(rep.times, (std::vector<int64_t>{5'000, 12'000, 19'000, 26'000}));
  EXPECT_EQ(engine.events_processed(), 4u);
}

TEST(EngineRun, ACallableSchedulingManyCallablesKeepsItsOwnStateValid) {
  // The running callable lives in the engine's pool; scheduling 5000 more grows the pool while it
  // runs. Its captures must stay valid (ASan would flag a moved or freed callable).
  Engine engine;
  int ran = 0;
  std::string label(64, 'x');  // heap-allocated capture
  engine.schedule_at(Time::ns(1), [&ran, label](Engine& e) {
    for (int i = 0; i < 5000; ++i) e.schedule_after(Time::ns(1), [&ran] { ++ran; });
    EXPECT_EQ(label, std::string(64, 'x'));
  });
  engine.run();
  EXPECT_EQ(ran, 5000);
  EXPECT_EQ(engine.events_processed(), 5001u);
}

TEST(EngineRun, CallablesMayBeMoveOnlyOrLargerThanTheInlineBuffer) {
  Engine engine;
  auto owned = std::make_unique<int>(41);
  std::array<int64_t, 16> big{};  // 128 bytes > Callback::kInlineSize: stored out of line
  big[15] = 1;
  int64_t result = 0;
  engine.schedule_at(Time::ns(1), [p = std::move(owned), &result](Engine&) { result += *p + 1; });
  engine.schedule_at(Time::ns(2), [big, &result] { result += big[15]; });
  engine.run();
  EXPECT_EQ(result, 43);  // 41 + 1 + 1
}

TEST(EngineRun, AnEventAtNowInAnEarlierClassRunsAfterTheRunningEvent) {
  // From a default handler at 5 ns, a kFluid event at 5 ns cannot precede the running event. It
  // takes the default class: after the running event and after the default event already queued
  // at 5 ns (FIFO), but before the observer event at 5 ns.
  Engine engine;
  Recorder rec;
  std::vector<Priority> classes;
  engine.on_dispatch().subscribe([&](const DispatchEvent& d) { classes.push_back(d.key.priority()); });
  engine.schedule_at(Time::ns(5), [&](Engine& e) {
    rec.seen.push_back({e.now().picoseconds(), 1});
    e.schedule_at(Time::ns(5), &rec, 4, Priority::kFluid);
  });
  engine.schedule_at(Time::ns(5), &rec, 2);
  engine.schedule_at(Time::ns(5), &rec, 5, Priority::kObserver);
  engine.run();
  EXPECT_EQ(rec.tags(), (Tags{1, 2, 4, 5}));
  EXPECT_EQ(classes, (std::vector<Priority>{Priority::kDefault, Priority::kDefault, Priority::kDefault,
                                            Priority::kObserver}));
}

TEST(EngineRun, SchedulingInThePastIsABrokenInvariant) {
#if defined(ORRERY_ENABLE_ASSERTS)
  EXPECT_DEATH(
      {
        Engine engine;
        Recorder rec;
        engine.run_until(Time::ns(10));
        engine.schedule_at(Time::ns(9), &rec, 0);
      },
      "assertion");
#else
  GTEST_SKIP() << "ORRERY_ASSERT is compiled out in this build type";
#endif
}

// ---------------------------------------------------------------------------------------------
// Two engines are independent values.

// A small deterministic workload: `n` self-rescheduling handlers with pseudo-random delays drawn
// from the workload's own generator, recording (time, tag) of each event.
class Workload : public EventHandler {
 public:
  Workload(Engine& engine, uint64_t seed, int events) : rng_(seed), budget_(events) {
    for (uint64_t tag = 0; tag < 8; ++tag) engine.schedule_at(draw(), this, tag);
  }
  void on_event(Engine& engine, uint64_t tag) override {
    trace.push_back({engine.now().picoseconds(), tag});
    if (--budget_ > 0) engine.schedule_after(draw(), this, tag, tag % 2 ? Priority::kNetwork : Priority::kDefault);
  }
  std::vector<Seen> trace;

 private:
  Time draw() { return Time::ps(static_cast<int64_t>(rng_() % 50)); }  // many equal times
  std::mt19937_64 rng_;
  int budget_;
};

TEST(EngineValue, TwoInterleavedEnginesProduceTheTracesEachProducesAlone) {
  std::vector<Seen> alone_a;
  std::vector<Seen> alone_b;
  {
    Engine a;
    Workload wa(a, 1, 2000);
    a.run();
    alone_a = wa.trace;
  }
  {
    Engine b;
    Workload wb(b, 2, 3000);
    b.run();
    alone_b = wb.trace;
  }
  ASSERT_NE(alone_a, alone_b);  // otherwise the comparison below could not tell them apart

  Engine a;
  Engine b;
  Workload wa(a, 1, 2000);
  Workload wb(b, 2, 3000);
  // Interleave: one event of a, two of b, then run_until slices on both, then drain.
  for (int i = 0; i < 300; ++i) {
    a.step();
    b.step();
    b.step();
  }
  for (int64_t t = 0; t < 2000; t += 37) {
    b.run_until(std::max(b.now(), Time::ps(t)));
    a.run_until(std::max(a.now(), Time::ps(t)));
  }
  a.run();
  b.run();
  EXPECT_EQ(wa.trace, alone_a);
  EXPECT_EQ(wb.trace, alone_b);
  // 8 seed events, plus one reschedule by each of the first budget-1 events: 8 + 1999, 8 + 2999.
  EXPECT_EQ(a.events_processed(), 2007u);
  EXPECT_EQ(b.events_processed(), 3007u);
}

// ---------------------------------------------------------------------------------------------
// Fluid models.

// A tank that drains at a rate handlers may change; due when it runs dry.
// Model: level L(t) = L(t0) - r * (t - t0) between changes; next event at t0 + L(t0) / r (rounded
// to the nearest picosecond by Time::seconds), none when r == 0 or L == 0.
class Tank : public FluidModel {
 public:
  struct Empty {
    Time at;
  };
  Tank(double level, double rate) : level_(level), rate_(rate) {}

  Time next_event_time() const override {
    if (rate_ <= 0.0 || level_ <= 0.0) return Time::max();
    return last_ + Time::seconds(level_ / rate_);
  }
  void advance_to(Time t) override {
    level_ = std::max(0.0, level_ - rate_ * (t - last_).to_seconds());
    last_ = t;
    advances.push_back(t);
  }
  void on_due(Engine&, Time t) override {
    level_ = 0.0;
    ++due_calls;
    on_empty.emit(Empty{t});
  }
  // Called by handlers: changes the rate from now on. REQUIRES: the model is advanced to now.
  void set_rate(Engine& engine, double rate) {
    rate_ = rate;
    engine.notify_fluid_changed(this);
  }
  double level() const { return level_; }

  std::vector<Time> advances;
  int due_calls = 0;
  Signal<Empty> on_empty;

 private:
  double level_;
  double rate_;
  Time last_;
};

TEST(EngineFluid, ATankDrainsToEmptyAtTheHandDerivedTimeAfterRateChanges) {
  // Tank: 5 units at t=0, draining at 2 units/s. Alone it would run dry at 5/2 = 2.5 s.
  // At t=1 s a handler sees L = 5 - 2*1 = 3 and sets r = 0.5 -> it would run dry at 1 + 3/0.5 = 7 s.
  // At t=2 s a handler sees L = 3 - 0.5*1 = 2.5 and sets r = 0.4 -> dry at 2 + 2.5/0.4 = 8.25 s.
  // Expected: on_due once, at exactly 8.25 s = 8'250'000'000'000 ps. The wake-ups once armed for
  // 2.5 s and 7 s were re-keyed: they are not dispatched, not counted, and advance neither the clock
  // nor the tank.
  Engine engine;
  Tank tank(5.0, 2.0);
  engine.add_fluid(&tank);
  EXPECT_EQ(engine.pending(), 1u);  // the wake-up at 2.5 s
  double seen_at_1s = -1.0;
  double seen_at_2s = -1.0;
  engine.schedule_at(Time::seconds(1.0), [&](Engine& e) {
    seen_at_1s = tank.level();
    tank.set_rate(e, 0.5);
  });
  engine.schedule_at(Time::seconds(2.0), [&](Engine& e) {
    seen_at_2s = tank.level();
    tank.set_rate(e, 0.4);
  });
  std::vector<Time> empties;
  tank.on_empty.subscribe([&](const Tank::Empty& ev) { empties.push_back(ev.at); });

  engine.run();

  EXPECT_DOUBLE_EQ(seen_at_1s, 3.0);
  EXPECT_DOUBLE_EQ(seen_at_2s, 2.5);
  EXPECT_EQ(tank.due_calls, 1);
  ASSERT_EQ(empties.size(), 1u);
  EXPECT_EQ(empties[0].picoseconds(), int64_t{8'250'000'000'000});
  EXPECT_EQ(engine.now().picoseconds(), int64_t{8'250'000'000'000});
  // Advanced exactly before each dispatched instant, never at 2.5 s or 7 s.
  EXPECT_EQ(tank.advances, (std::vector<Time>{Time::seconds(1.0), Time::seconds(2.0), Time::ps(8'250'000'000'000)}));
  EXPECT_EQ(engine.events_processed(), 3u);  // two handlers + one wake-up
  EXPECT_EQ(engine.pending(), 0u);
}

TEST(EngineFluid, ADueTimeMovedEarlierSupersedesTheQueuedWakeUp) {
  // Tank: 10 units at 1 unit/s: dry at 10 s. At 1 s: L = 10 - 1 = 9; the rate goes to 3 units/s,
  // so it runs dry at 1 + 9/3 = 4 s. Expected: on_due once at exactly 4 s; the wake-up armed for
  // 10 s is gone: the clock never moves past 4 s and it is not counted as an event.
  Engine engine;
  Tank tank(10.0, 1.0);
  engine.add_fluid(&tank);
  engine.schedule_at(Time::seconds(1.0), [&](Engine& e) { tank.set_rate(e, 3.0); });
  EXPECT_EQ(engine.pending(), 2u);
  engine.run_until(Time::seconds(1.0));
  EXPECT_EQ(engine.pending(), 1u);  // the wake-up, now at 4 s
  EXPECT_EQ(engine.queue_size(), 1u);  // nothing left behind at 10 s
  engine.run();
  EXPECT_EQ(tank.due_calls, 1);
  EXPECT_EQ(engine.now(), Time::seconds(4.0));
  EXPECT_EQ(tank.advances, (std::vector<Time>{Time::seconds(1.0), Time::seconds(4.0)}));
  EXPECT_EQ(engine.events_processed(), 2u);
  EXPECT_EQ(engine.pending(), 0u);
}

TEST(EngineFluid, ADueTimeThatMovesOnEveryChangeKeepsOneWakeUpQueued) {
  // Handlers lower the rate, pushing the due time later each time; the engine re-keys the one
  // wake-up in place rather than leaving one stale heap entry per change.
  // Tank: 10 units at 1 unit/s, due at 10 s. Rates are powers of two so every level is exact:
  //   at 1 s: L = 10 - 1      = 9,     r := 1/2  -> due 1 + 9*2      = 19 s
  //   at 2 s: L = 9 - 1/2     = 8.5,   r := 1/4  -> due 2 + 8.5*4    = 36 s
  //   at 3 s: L = 8.5 - 1/4   = 8.25,  r := 1/8  -> due 3 + 8.25*8   = 69 s
  //   at 4 s: L = 8.25 - 1/8  = 8.125, r := 1/16 -> due 4 + 8.125*16 = 134 s
  // Expected: on_due once, at exactly 134 s; advances at 1, 2, 3, 4 and 134 s (none at 10, 19, 36
  // or 69 s); 5 events (4 handlers, 1 wake-up); after 4 s exactly one entry is queued.
  Engine engine;
  Tank tank(10.0, 1.0);
  engine.add_fluid(&tank);
  for (int k = 1; k <= 4; ++k) {
    engine.schedule_at(Time::seconds(k), [&tank, k](Engine& e) { tank.set_rate(e, 1.0 / (1 << k)); });
  }
  engine.run_until(Time::seconds(4.0));
  EXPECT_EQ(engine.queue_size(), 1u);
  EXPECT_EQ(engine.pending(), 1u);
  std::vector<DispatchEvent> dispatched;
  engine.on_dispatch().subscribe([&](const DispatchEvent& d) { dispatched.push_back(d); });
  engine.run();
  EXPECT_EQ(tank.due_calls, 1);
  EXPECT_EQ(engine.now(), Time::seconds(134.0));
  ASSERT_EQ(dispatched.size(), 1u);
  EXPECT_EQ(dispatched[0].key.time(), Time::seconds(134.0));
  EXPECT_EQ(tank.advances, (std::vector<Time>{Time::seconds(1.0), Time::seconds(2.0), Time::seconds(3.0),
                                              Time::seconds(4.0), Time::seconds(134.0)}));
  EXPECT_EQ(engine.events_processed(), 5u);
}

TEST(EngineFluid, SeveralModelsWakeInKeyOrder) {
  // a: 3 units at 1/s (due 3 s); b and c: 2 units at 1/s (due 2 s), registered in that order.
  // At 1 s a handler sets a's rate to 4/s: L_a = 3 - 1 = 2, due 1 + 2/4 = 1.5 s.
  // Expected wake order: a at 1.5 s, then b and c at 2 s, b first (armed first: lower sequence).
  Engine engine;
  Tank a(3.0, 1.0);
  Tank b(2.0, 1.0);
  Tank c(2.0, 1.0);
  std::vector<std::pair<char, Time>> wakes;
  a.on_empty.subscribe([&](const Tank::Empty& e) { wakes.emplace_back('a', e.at); });
  b.on_empty.subscribe([&](const Tank::Empty& e) { wakes.emplace_back('b', e.at); });
  c.on_empty.subscribe([&](const Tank::Empty& e) { wakes.emplace_back('c', e.at); });
  engine.add_fluid(&a);
  engine.add_fluid(&b);
  engine.add_fluid(&c);
  engine.schedule_at(Time::seconds(1.0), [&](Engine& e) { a.set_rate(e, 4.0); });
  EXPECT_EQ(engine.pending(), 4u);
  engine.run();
  const std::vector<std::pair<char, Time>> expected{
      {'a', Time::ms(1500)}, {'b', Time::seconds(2.0)}, {'c', Time::seconds(2.0)}};
  EXPECT_EQ(wakes, expected);
  EXPECT_EQ(engine.events_processed(), 4u);
}

TEST(EngineFluid, NotifyingWithAnUnchangedDueTimeKeepsTheSameWakeUp) {
  Engine engine;
  Tank tank(1.0, 1.0);  // dry at 1 s
  engine.add_fluid(&tank);
  std::vector<DispatchEvent> dispatched;
  engine.on_dispatch().subscribe([&](const DispatchEvent& d) { dispatched.push_back(d); });
  engine.schedule_at(Time::ms(500), [&](Engine& e) { tank.set_rate(e, 1.0); });  // same rate
  EXPECT_EQ(engine.pending(), 2u);
  engine.run();
  ASSERT_EQ(dispatched.size(), 2u);
  EXPECT_EQ(dispatched[1].kind, EventKind::kFluidWakeUp);
  // The wake-up that fires is the one armed by add_fluid (sequence 1), not a replacement.
  EXPECT_EQ(dispatched[1].key.sequence(), 1u);
  EXPECT_EQ(dispatched[1].key.time(), Time::seconds(1.0));
  EXPECT_EQ(dispatched[1].key.priority(), Priority::kFluid);
}

TEST(EngineFluid, RunUntilAdvancesFluidModelsToTheLimit) {
  // 5 units at 2 units/s: after run_until(0.5 s) the level is 5 - 2*0.5 = 4.
  Engine engine;
  Tank tank(5.0, 2.0);
  engine.add_fluid(&tank);
  engine.run_until(Time::ms(500));
  EXPECT_DOUBLE_EQ(tank.level(), 4.0);
  EXPECT_EQ(tank.due_calls, 0);
  engine.run();
  EXPECT_EQ(engine.now(), Time::ms(2500));  // 0.5 + 4/2 s
  EXPECT_EQ(tank.due_calls, 1);
}

TEST(EngineFluid, ARemovedModelIsNeitherAdvancedNorWoken) {
  Engine engine;
  Tank tank(1.0, 1.0);
  Recorder rec;
  engine.add_fluid(&tank);
  engine.remove_fluid(&tank);
  EXPECT_EQ(engine.pending(), 0u);
  engine.schedule_at(Time::seconds(3.0), &rec, 1);
  engine.run();
  EXPECT_EQ(tank.due_calls, 0);
  EXPECT_TRUE(tank.advances.empty());
  EXPECT_EQ(engine.events_processed(), 1u);
}

TEST(EngineFluid, AWakeUpPrecedesOtherEventsAtTheSameInstant) {
  // The tank runs dry at 1 s; a default handler also at 1 s, scheduled before the tank was even
  // registered, must already see the tank empty (wake-ups are in the first class).
  Engine engine;
  Tank tank(1.0, 1.0);
  int due_calls_seen = -1;
  engine.schedule_at(Time::seconds(1.0), [&] { due_calls_seen = tank.due_calls; });
  engine.add_fluid(&tank);
  engine.run();
  EXPECT_EQ(due_calls_seen, 1);
}

// ---------------------------------------------------------------------------------------------
// Observers.

TEST(Signal, SubscribersAreCalledInSubscriptionOrderUntilUnsubscribed) {
  Signal<int> signal;
  std::vector<std::string> calls;
  EXPECT_FALSE(signal.has_subscribers());
  const SubscriptionId first = signal.subscribe([&](const int& v) { calls.push_back("a" + std::to_string(v)); });
  signal.subscribe([&](const int& v) { calls.push_back("b" + std::to_string(v)); });
  EXPECT_TRUE(signal.has_subscribers());
  signal.emit(1);
  EXPECT_TRUE(signal.unsubscribe(first));
  EXPECT_FALSE(signal.unsubscribe(first));
  signal.emit(2);
  EXPECT_EQ(calls, (std::vector<std::string>{"a1", "b1", "b2"}));
}

TEST(Signal, ChangesMadeDuringEmitTakeEffectAtTheNextEmit) {
  Signal<int> signal;
  std::vector<std::string> calls;
  SubscriptionId second;
  SubscriptionId self;
  self = signal.subscribe([&](const int& v) {
    calls.push_back("a" + std::to_string(v));
    signal.unsubscribe(self);    // removing itself while running
    signal.unsubscribe(second);  // removing one not yet called: it is not called
    signal.subscribe([&](const int& w) { calls.push_back("c" + std::to_string(w)); });  // next emit
  });
  second = signal.subscribe([&](const int& v) { calls.push_back("b" + std::to_string(v)); });
  signal.emit(1);
  signal.emit(2);
  EXPECT_EQ(calls, (std::vector<std::string>{"a1", "c2"}));
  EXPECT_EQ(signal.subscriber_count(), 1u);
}

TEST(EngineObservers, ADispatchObserverSeesEveryEventInOrderAndNothingAfterUnsubscribing) {
  Engine engine;
  Recorder rec;
  std::vector<Seen> observed;
  const SubscriptionId sub = engine.on_dispatch().subscribe([&](const DispatchEvent& d) {
    EXPECT_EQ(d.key.time(), engine.now());  // emitted with the clock already at the event
    observed.push_back({d.key.time().picoseconds(), d.tag});
  });
  for (uint64_t tag = 1; tag <= 5; ++tag) engine.schedule_at(Time::ns(static_cast<int64_t>(6 - tag)), &rec, tag);
  engine.run_until(Time::ns(3));  // 3 events: tags 5, 4, 3 at 1, 2, 3 ns
  EXPECT_EQ(observed, rec.seen);
  ASSERT_EQ(observed.size(), 3u);
  EXPECT_TRUE(engine.on_dispatch().unsubscribe(sub));
  engine.run();
  EXPECT_EQ(observed.size(), 3u);  // no calls once unsubscribed
  EXPECT_EQ(rec.seen.size(), 5u);
}

TEST(EngineObservers, TheFinishObserverHearsEachRunWithItsReason) {
  Engine engine;
  std::vector<StopReason> reasons;
  engine.on_finish().subscribe([&](const RunFinished& f) { reasons.push_back(f.reason); });
  engine.schedule_at(Time::ns(1), [](Engine& e) { e.stop(); });
  engine.schedule_at(Time::ns(2), [] {});
  engine.run();
  engine.run_until(Time::ns(1));  // the clock is already at 1 ns and the next event is at 2 ns
  engine.run();
  EXPECT_EQ(reasons, (std::vector<StopReason>{StopReason::kStopped, StopReason::kReachedTime, StopReason::kDrained}));
}

// ---------------------------------------------------------------------------------------------
// The invariant on a large random case, against an independent reference (std::sort of the keys).

TEST(EngineOrder, HundredThousandRandomEventsComeOutSortedByTimeClassAndSequence) {
  const uint64_t seed = 20240611;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int kEvents = 100'000;
  Engine engine;
  Recorder rec;
  // (time, class, scheduling index): the reference order; the index plays the sequence's role.
  std::vector<std::tuple<int64_t, int, uint64_t>> reference;
  std::vector<EventId> ids;
  for (uint64_t i = 0; i < kEvents; ++i) {
    const int64_t t = static_cast<int64_t>(rng() % 5000);  // 20 events per instant on average: many ties
    const int cls = static_cast<int>(rng() % 4);
    ids.push_back(engine.schedule_at(Time::ps(t), &rec, i, static_cast<Priority>(cls)));
    reference.emplace_back(t, cls, i);
  }
  // Cancel one event in ten; the reference drops them.
  std::vector<bool> cancelled(kEvents, false);
  for (int k = 0; k < kEvents / 10; ++k) {
    const uint64_t i = rng() % kEvents;
    EXPECT_EQ(engine.cancel(ids[i]), !cancelled[i]);
    cancelled[i] = true;
  }
  std::erase_if(reference, [&](const auto& r) { return cancelled[std::get<2>(r)]; });
  EXPECT_EQ(engine.pending(), reference.size());

  std::vector<EventKey> dispatched_keys;
  engine.on_dispatch().subscribe([&](const DispatchEvent& d) { dispatched_keys.push_back(d.key); });
  engine.run();

  std::sort(reference.begin(), reference.end());
  ASSERT_EQ(rec.seen.size(), reference.size());
  for (size_t k = 0; k < reference.size(); ++k) {
    ASSERT_EQ(rec.seen[k].tag, std::get<2>(reference[k])) << "position " << k;
    ASSERT_EQ(rec.seen[k].time_ps, std::get<0>(reference[k])) << "position " << k;
  }
  EXPECT_TRUE(std::is_sorted(dispatched_keys.begin(), dispatched_keys.end()));
  EXPECT_EQ(std::adjacent_find(dispatched_keys.begin(), dispatched_keys.end()), dispatched_keys.end());
}

TEST(EngineOrder, RandomSelfReschedulingWorkloadDispatchesStrictlyIncreasingKeys) {
  // Events scheduled while running (including at now() in earlier classes, which are raised) must
  // keep the dispatched key sequence strictly increasing, with the clock never going back.
  const uint64_t seed = 7;
  SCOPED_TRACE("seed " + std::to_string(seed));
  Engine engine;
  std::mt19937_64 rng(seed);
  int budget = 50'000;
  std::vector<EventKey> keys;
  engine.on_dispatch().subscribe([&](const DispatchEvent& d) { keys.push_back(d.key); });
  struct Spawner : EventHandler {
    std::mt19937_64* rng;
    int* budget;
    void on_event(Engine& e, uint64_t) override {
      for (int k = 0; k < 2 && *budget > 0; ++k, --*budget) {
        e.schedule_after(Time::ps(static_cast<int64_t>((*rng)() % 3)), this, 0, static_cast<Priority>((*rng)() % 4));
      }
    }
  } spawner;
  spawner.rng = &rng;
  spawner.budget = &budget;
  engine.schedule_at(Time::zero(), &spawner, 0);
  engine.run();
  EXPECT_EQ(keys.size(), 50'001u);
  for (size_t k = 1; k < keys.size(); ++k) ASSERT_LT(keys[k - 1], keys[k]) << "position " << k;
}

}  // namespace
}  // namespace orrery::des
