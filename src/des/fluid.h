// Fluid models: state that changes continuously between discrete events.
//
// Model card
//   What: a FluidModel is a piece of simulated state that evolves at piecewise-constant rates
//         between events: bytes of flows progressing at their max-min rates, a tank draining, a
//         battery discharging. Its own discrete events (a flow finishes, the tank runs dry) happen
//         at times it can predict from its current state: next_event_time().
//   Equations: between two engine instants t0 < t1 the model integrates x(t1) = x(t0) + r * (t1 - t0)
//         with the rates r fixed since t0; which x and r is the model's business.
//   Contract with the engine (des/engine.h, Engine::add_fluid):
//     1. Advance before dispatch. Before the engine dispatches any event at a time t later than the
//        last instant it advanced to, it calls advance_to(t) on every registered model, in
//        registration order. Handlers therefore always see state that is current at now(). The
//        engine also advances the models when run_until(t) moves now() to t. Cancelled events do
//        not advance time.
//     2. Notify on change. A handler that changes a model's rates (adds a flow, changes a rate)
//        calls engine.notify_fluid_changed(&model) afterwards. The engine asks next_event_time()
//        and keeps exactly one wake-up for the model, at that time. The wake-up is held beside the
//        event heap and re-keyed in place, so a due time that moves often (a network gaining and
//        losing flows) leaves nothing stale behind. An unchanged due time keeps the wake-up's key;
//        a changed one gets a fresh sequence number, as if scheduled at that moment.
//     3. Due. At t == next_event_time() the engine calls on_due(engine, t), and only then; the
//        model has already been advanced to t. on_due handles what is due (completes flows, emits
//        signals, schedules follow-up events, recomputes rates). After on_due returns the engine
//        asks next_event_time() again and re-arms the wake-up, so on_due need not notify.
//   Wake-ups run in the Priority::kFluid class: at equal time they precede network, default and
//   observer events, so those see the state after everything due at that instant has been settled.
//   (A wake-up armed at now() from a later-class handler takes that handler's class; see the
//   causality rule in des/engine.h.)
//   Assumptions: rates are constant between engine instants; a model's event times are exact
//   picosecond instants that the model computes (rounding is the model's choice and should be
//   documented on the model's card).
#pragma once

#include "core/units.h"

namespace orrery::des {

class Engine;

class FluidModel {
 public:
  virtual ~FluidModel() = default;

  // The earliest time at which the model needs on_due(), or Time::max() if none is foreseen: a
  // prediction from the state at the last advance_to() and the current rates.
  // REQUIRES (model): the result is >= the time of the last advance_to(). Must not change state.
  virtual Time next_event_time() const = 0;

  // Integrates the state from the last advanced instant to t at the current rates.
  // Called by the engine only, with non-decreasing t. Must not schedule events, notify the engine
  // or emit signals whose subscribers might (the engine is between two events).
  virtual void advance_to(Time t) = 0;

  // Handles the discrete changes due at t == next_event_time(); state is already advanced to t.
  // May schedule events, emit signals and change rates; the engine re-arms afterwards.
  virtual void on_due(Engine& engine, Time t) = 0;
};

}  // namespace orrery::des
