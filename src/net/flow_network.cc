#include "net/flow_network.h"

#include <algorithm>
#include <cmath>

#include "core/assert.h"

namespace orrery::net {

namespace {
std::vector<double> to_doubles(const std::vector<Bandwidth>& caps) {
  std::vector<double> out;
  out.reserve(caps.size());
  for (Bandwidth b : caps) out.push_back(b.bytes_per_second());
  return out;
}
}  // namespace

FlowNetwork::FlowNetwork(des::Engine& engine, const std::vector<Bandwidth>& capacities)
    : engine_(engine), solver_(to_doubles(capacities)), now_(engine.now()) {
  engine_.add_fluid(this);
}

FlowNetwork::~FlowNetwork() { engine_.remove_fluid(this); }

void FlowNetwork::start_flow(std::span<const LinkUse> path, Time latency, Bytes size, FlowListener* listener,
                             uint64_t tag, double weight, double rate_cap) {
  ORRERY_ASSERT(size.count() >= 0 && latency >= Time::zero());
  Pending p{std::vector<LinkUse>(path.begin(), path.end()), size, engine_.now(), listener, tag, weight, rate_cap};
  if (latency == Time::zero()) {
    inject(std::move(p));
    return;
  }
  uint64_t slot;
  if (free_pending_.empty()) {
    slot = pending_.size();
    pending_.push_back(std::move(p));
    pending_live_.push_back(1);
  } else {
    slot = free_pending_.back();
    free_pending_.pop_back();
    pending_[slot] = std::move(p);
    pending_live_[slot] = 1;
  }
  engine_.schedule_after(latency, this, slot, des::Priority::kNetwork);
}

void FlowNetwork::on_event(des::Engine& /*engine*/, uint64_t tag) {
  if (tag == kResolveTag) {
    resolve_scheduled_ = false;
    if (dirty_) resolve();
    return;
  }
  if (pending_live_[tag] == 0) {  // aborted while in its latency phase
    free_pending_.push_back(tag);
    return;
  }
  pending_live_[tag] = 0;
  Pending p = std::move(pending_[tag]);
  free_pending_.push_back(tag);
  inject(std::move(p));
}

void FlowNetwork::inject(Pending&& p) {
  const Time now = engine_.now();
  if (p.size.count() == 0 || p.path.empty()) {
    // Nothing to drain (or a transfer to itself): done once the latency has passed. Deliver through a
    // zero-delay event so that the listener never runs inside start_flow().
    FlowListener* listener = p.listener;
    const uint64_t tag = p.tag;
    const FlowCompleted done{tag, p.size, p.start, now};
    engine_.schedule_at(now, [this, listener, tag, done](des::Engine& e) {
      ++completed_;
      if (on_completed_.has_subscribers()) on_completed_.emit(done);
      if (listener != nullptr) listener->on_flow_done(tag, e.now());
    }, des::Priority::kNetwork);
    return;
  }
  std::vector<LinkUse> kept = p.path;
  const FlowId id = solver_.add_flow(FlowSpec{std::move(p.path), p.weight, p.rate_cap});
  if (static_cast<size_t>(id) >= records_.size()) records_.resize(static_cast<size_t>(id) + 1);
  Record& r = records_[static_cast<size_t>(id)];
  r.remaining = p.size.to_double();
  r.rate = 0;
  r.anchor = now;
  r.start = p.start;
  r.size = p.size;
  r.listener = p.listener;
  r.tag = p.tag;
  r.path = std::move(kept);
  ++r.version;
  mark_dirty();
}

std::vector<FlowNetwork::Aborted> FlowNetwork::abort_flows_on(LinkId link) {
  std::vector<Aborted> out;
  const Time now = engine_.now();
  auto crosses = [link](const std::vector<LinkUse>& path) {
    return std::any_of(path.begin(), path.end(), [link](const LinkUse& u) { return u.link == link; });
  };
  for (size_t id = 0; id < records_.size(); ++id) {
    const auto fid = static_cast<FlowId>(id);
    if (!solver_.active(fid) || !crosses(records_[id].path)) continue;
    Record& r = records_[id];
    const double left = std::max(0.0, r.remaining - r.rate * (now - r.anchor).to_seconds());
    out.push_back(Aborted{r.listener, r.tag, Bytes::from_double(std::ceil(left))});
    solver_.remove_flow(fid);
    ++r.version;
  }
  for (size_t slot = 0; slot < pending_.size(); ++slot) {
    if (pending_live_[slot] == 0 || !crosses(pending_[slot].path)) continue;
    pending_live_[slot] = 0;  // its injection event will find it dead
    out.push_back(Aborted{pending_[slot].listener, pending_[slot].tag, pending_[slot].size});
  }
  if (!out.empty()) mark_dirty();
  return out;
}

void FlowNetwork::set_capacity(LinkId link, Bandwidth bandwidth) {
  solver_.set_capacity(link, bandwidth.bytes_per_second());
  mark_dirty();
}

void FlowNetwork::mark_dirty() {
  dirty_ = true;
  if (!resolve_scheduled_) {
    resolve_scheduled_ = true;
    engine_.schedule_at(engine_.now(), this, kResolveTag, des::Priority::kObserver);
  }
}

void FlowNetwork::resolve() {
  dirty_ = false;
  ++solves_;
  const Time now = engine_.now();
  for (FlowId id : solver_.solve()) {
    Record& r = records_[static_cast<size_t>(id)];
    r.remaining = std::max(0.0, r.remaining - r.rate * (now - r.anchor).to_seconds());
    r.anchor = now;
    r.rate = solver_.rate(id);
    ++r.version;
    if (r.rate > 0) {
      const double ps = std::ceil(r.remaining / r.rate * 1e12);
      const Time finish = ps < 9e18 ? now + Time::ps(static_cast<int64_t>(ps)) : Time::max();
      due_.push(Due{finish, id, r.version});
    }
  }
  engine_.notify_fluid_changed(this);
}

void FlowNetwork::drop_stale() const {
  while (!due_.empty()) {
    const Due& d = due_.top();
    const Record& r = records_[static_cast<size_t>(d.id)];
    if (solver_.active(d.id) && r.version == d.version) return;
    due_.pop();
  }
}

Time FlowNetwork::next_event_time() const {
  drop_stale();
  return due_.empty() ? Time::max() : due_.top().finish;
}

void FlowNetwork::advance_to(Time t) { now_ = t; }

void FlowNetwork::on_due(des::Engine& /*engine*/, Time t) {
  finished_.clear();
  drop_stale();
  while (!due_.empty() && due_.top().finish <= t) {
    const Due d = due_.top();
    due_.pop();
    Record& r = records_[static_cast<size_t>(d.id)];
    solver_.remove_flow(d.id);
    ++r.version;
    ++completed_;
    if (on_completed_.has_subscribers()) on_completed_.emit(FlowCompleted{r.tag, r.size, r.start, t});
    finished_.emplace_back(r.listener, r.tag);
    drop_stale();
  }
  dirty_ = true;
  // on_due is never re-entered (only the engine calls it), so iterating finished_ while listeners
  // start new flows is safe: start_flow() does not touch finished_.
  for (const auto& [listener, tag] : finished_) {
    if (listener != nullptr) listener->on_flow_done(tag, t);
  }
  resolve();
}

}  // namespace orrery::net
