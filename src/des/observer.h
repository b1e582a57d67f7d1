// Typed signals: how models publish what happens without knowing who listens.
//
// Model card
//   What: a Signal<Event> is a list of subscribers (std::function<void(const Event&)>) that emit()
//         calls in subscription order. Models own signals for their own typed events (FlowCompleted,
//         RequestFinished, ...); metrics, trace writers and progress bars subscribe to them
//         ("observers, not metric calls", docs/design.md).
//   Cost: emit() on a signal without subscribers is one branch; has_subscribers() lets a model skip
//         building an expensive event record when nobody listens.
//   Determinism: call order is subscription order, always; no hashing, no pointer order.
//   Re-entrancy: a subscriber may subscribe or unsubscribe (itself or others) while the signal is
//         emitting. A subscription made during emit() is first called by the next emit(); a
//         subscriber removed during emit() and not yet called is not called. Removal of the storage
//         is deferred until the outermost emit() returns, so a subscriber may unsubscribe itself.
//   Threads: none. A signal belongs to one simulation, which runs on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace orrery::des {

// Names one subscription of one signal. value 0 is never issued.
struct SubscriptionId {
  uint64_t value = 0;
  friend constexpr bool operator==(SubscriptionId, SubscriptionId) = default;
};

template <class Event>
class Signal {
 public:
  using Subscriber = std::function<void(const Event&)>;

  Signal() = default;
  // A subscription belongs to one signal: copying one would silently duplicate or drop observers.
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;
  // REQUIRES (move): the source is not emitting.
  Signal(Signal&&) noexcept = default;
  Signal& operator=(Signal&&) noexcept = default;
  ~Signal() = default;

  // Adds a subscriber called after all earlier ones. REQUIRES: fn is non-empty.
  SubscriptionId subscribe(Subscriber fn) {
    SubscriptionId id{next_id_++};
    if (emitting_ > 0) {
      added_during_emit_.push_back(Slot{id.value, std::move(fn)});
    } else {
      slots_.push_back(Slot{id.value, std::move(fn)});
    }
    ++live_;
    return id;
  }

  // Removes a subscription. Returns false (and does nothing) if id is not subscribed here.
  bool unsubscribe(SubscriptionId id) {
    if (id.value == 0) return false;
    for (auto* list : {&slots_, &added_during_emit_}) {
      for (size_t i = 0; i < list->size(); ++i) {
        Slot& slot = (*list)[i];
        if (slot.id != id.value) continue;
        --live_;
        if (emitting_ > 0) {
          slot.id = 0;  // dead; storage reclaimed when the outermost emit() returns
          has_dead_ = true;
        } else {
          list->erase(list->begin() + static_cast<std::ptrdiff_t>(i));
        }
        return true;
      }
    }
    return false;
  }

  // Calls every subscriber present when emit() starts, in subscription order.
  void emit(const Event& event) const {
    if (slots_.empty()) return;
    ++emitting_;
    const size_t n = slots_.size();  // later subscriptions go to added_during_emit_
    for (size_t i = 0; i < n; ++i) {
      if (slots_[i].id != 0) slots_[i].fn(event);
    }
    if (--emitting_ == 0) settle();
  }

  bool has_subscribers() const { return live_ > 0; }
  size_t subscriber_count() const { return live_; }

 private:
  struct Slot {
    uint64_t id;  // 0: unsubscribed during emit, awaiting removal
    Subscriber fn;
  };

  // Applies the subscriptions and removals deferred while emitting.
  void settle() const {
    if (has_dead_) {
      std::erase_if(slots_, [](const Slot& s) { return s.id == 0; });
      std::erase_if(added_during_emit_, [](const Slot& s) { return s.id == 0; });
      has_dead_ = false;
    }
    for (Slot& s : added_during_emit_) slots_.push_back(std::move(s));
    added_during_emit_.clear();
  }

  // mutable: emit() is logically const (it does not change the set of subscribers as seen from
  // outside), but it must apply the changes that subscribers made while it was running.
  mutable std::vector<Slot> slots_;
  mutable std::vector<Slot> added_during_emit_;
  mutable int emitting_ = 0;
  mutable bool has_dead_ = false;
  size_t live_ = 0;
  uint64_t next_id_ = 1;
};

}  // namespace orrery::des
