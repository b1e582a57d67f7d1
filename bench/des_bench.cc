// Event-engine throughput on the hold model (des/engine.h).
//
// The hold model (Vaucher & Duval 1975; Jones 1986, "An empirical comparison of priority-queue and
// event-set implementations", CACM 29(4)) keeps N events pending: each dispatched event schedules one
// successor at now + delay, so the queue size stays N and every event costs one pop and one push.
// Delays are exponential with mean 1 us (at least 1 ps), 4,096 of them drawn up front and cycled,
// so that neither the random-number generator nor a large table (competing with the heap for cache)
// is measured. Reported: items_per_second = events dispatched per second.
//
// Variants: the allocation-free EventHandler path, the callable path (a lambda held in the engine's
// side pool), and the handler path with one fluid model registered (advanced at every new instant,
// re-armed every 64 events).
//
// Run: des_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "des/engine.h"
#include "des/fluid.h"

namespace orrery::des {
namespace {

constexpr uint64_t kDelayTableSize = uint64_t{1} << 12;  // 32 KiB
constexpr int64_t kEventsPerIteration = int64_t{1} << 16;

std::vector<Time> make_delays() {
  std::mt19937_64 rng(42);
  std::exponential_distribution<double> exp_us(1.0);
  std::vector<Time> delays(kDelayTableSize);
  for (Time& d : delays) d = std::max(Time::ps(1), Time::seconds(exp_us(rng) * 1e-6));
  return delays;
}

const std::vector<Time>& delays() {
  static const std::vector<Time> table = make_delays();
  return table;
}

// Hold model over the EventHandler path: one handler, the tag names the logical entity.
class HoldHandler : public EventHandler {
 public:
  void on_event(Engine& engine, uint64_t tag) override {
    if (--budget == 0) engine.stop();
    engine.schedule_after(next_delay(), this, tag);
  }
  Time next_delay() { return delays()[next_++ & (kDelayTableSize - 1)]; }
  int64_t budget = 0;

 private:
  uint64_t next_ = 0;
};

// Hold model over the callable path.
class HoldCallable {
 public:
  explicit HoldCallable(Engine& engine) : engine_(engine) {}
  void fire() {
    if (--budget == 0) engine_.stop();
    engine_.schedule_after(next_delay(), [this] { fire(); });
  }
  Time next_delay() { return delays()[next_++ & (kDelayTableSize - 1)]; }
  int64_t budget = 0;

 private:
  Engine& engine_;
  uint64_t next_ = 0;
};

// A reservoir that drains at a rate the workload changes now and then, and refills when empty.
class Reservoir : public FluidModel {
 public:
  Time next_event_time() const override {
    return rate_ > 0.0 ? last_ + Time::seconds(level_ / rate_) : Time::max();
  }
  void advance_to(Time t) override {
    level_ -= rate_ * (t - last_).to_seconds();
    last_ = t;
  }
  void on_due(Engine&, Time) override { level_ = 1e-3; }  // refill
  void set_rate(Engine& engine, double rate) {
    rate_ = rate;
    engine.notify_fluid_changed(this);
  }

 private:
  double level_ = 1e-3;
  double rate_ = 1.0;
  Time last_;
};

class HoldWithFluid : public EventHandler {
 public:
  explicit HoldWithFluid(Reservoir& reservoir) : reservoir_(reservoir) {}
  void on_event(Engine& engine, uint64_t tag) override {
    if (--budget == 0) engine.stop();
    if ((++count_ & 63) == 0) reservoir_.set_rate(engine, (count_ & 64) != 0 ? 0.5 : 2.0);
    engine.schedule_after(next_delay(), this, tag);
  }
  Time next_delay() { return delays()[next_++ & (kDelayTableSize - 1)]; }
  int64_t budget = 0;

 private:
  Reservoir& reservoir_;
  uint64_t next_ = 0;
  uint64_t count_ = 0;
};

// Fills the engine with n events, runs 2n to reach the steady state, then measures.
// extra: pending events besides the n of the hold model (a fluid model's wake-up).
template <class Setup>
void run_hold(benchmark::State& state, Engine& engine, int64_t& budget, Setup setup, size_t extra = 0) {
  const int64_t n = state.range(0);
  for (int64_t i = 0; i < n; ++i) setup(i);
  budget = 2 * n;
  engine.run();
  for (auto _ : state) {
    budget = kEventsPerIteration;
    engine.run();
  }
  if (engine.pending() != static_cast<size_t>(n) + extra) state.SkipWithError("hold model lost events");
  state.SetItemsProcessed(state.iterations() * kEventsPerIteration);
}

void BM_HoldHandler(benchmark::State& state) {
  Engine engine;
  HoldHandler hold;
  run_hold(
      state, engine, hold.budget,
      [&](int64_t i) { engine.schedule_after(hold.next_delay(), &hold, static_cast<uint64_t>(i)); });
}

void BM_HoldCallable(benchmark::State& state) {
  Engine engine;
  HoldCallable hold(engine);
  run_hold(
      state, engine, hold.budget, [&](int64_t) { engine.schedule_after(hold.next_delay(), [&hold] { hold.fire(); }); });
}

void BM_HoldHandlerWithFluid(benchmark::State& state) {
  Engine engine;
  Reservoir reservoir;
  HoldWithFluid hold(reservoir);
  engine.add_fluid(&reservoir);
  run_hold(
      state, engine, hold.budget,
      [&](int64_t i) { engine.schedule_after(hold.next_delay(), &hold, static_cast<uint64_t>(i)); },
      /*extra=*/1);
}

BENCHMARK(BM_HoldHandler)->Arg(1'000)->Arg(10'000)->Arg(100'000);
BENCHMARK(BM_HoldCallable)->Arg(1'000)->Arg(10'000)->Arg(100'000);
BENCHMARK(BM_HoldHandlerWithFluid)->Arg(1'000)->Arg(10'000)->Arg(100'000);

}  // namespace
}  // namespace orrery::des

BENCHMARK_MAIN();
