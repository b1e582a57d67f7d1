#include "decentral/async_gossip.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/strings.h"

namespace orrery::decentral {

namespace {

// Event tags: the kind in the top bits, a node or message slot below.
constexpr uint64_t kKindShift = 60;
constexpr uint64_t kFinish = 1;   // node's iteration ends
constexpr uint64_t kWake = 2;     // node returns (or tries to start again)
constexpr uint64_t kArrive = 3;   // a latency-only message arrives
constexpr uint64_t kIndexMask = (uint64_t{1} << kKindShift) - 1;

uint64_t tag_of(uint64_t kind, uint64_t index) { return kind << kKindShift | index; }

}  // namespace

std::vector<std::string> async_algorithms() { return {"push-sum", "dsgd"}; }

AsyncRule async_rule_for(std::string_view algorithm, const Where& where) {
  if (algorithm == "push-sum") return AsyncRule::kPushSum;
  if (algorithm == "dsgd") return AsyncRule::kDsgd;
  throw InputError(where, fmt::format("asynchronous time is implemented for push-sum and dsgd, not '{}'", algorithm),
                   "use --algo push-sum or --algo dsgd with --time async, or --time sync");
}

AsyncGossip::AsyncGossip(AsyncRule rule, const GraphSequence& seq, const NetworkProfile& profile)
    : rule_(rule), seq_(seq), profile_(profile) {}

AsyncGossip::~AsyncGossip() = default;

void AsyncGossip::schedule(double at, uint64_t tag, bool round_up) {
  if (!(at < 9.0e6)) return;  // never (or beyond the engine's clock): the node is gone for good
  // Wake-ups round up to the picosecond, so that they never land just before the available period they
  // wait for; other events round to the nearest picosecond.
  Time t = Time::seconds(at);
  while (round_up && t.to_seconds() < at) t += Time::ps(1);
  engine_.schedule_at(std::max(engine_.now(), t), this, tag);
}

void AsyncGossip::init(const NodeMatrix& x0, StepContext& ctx) {
  ctx_ = &ctx;
  n_ = static_cast<NodeIndex>(x0.rows());
  d_ = x0.cols();
  x_ = x0;
  g_.setZero(x0.rows(), x0.cols());
  z_ = x0;
  w_.assign(static_cast<size_t>(n_), 1.0);
  iter_.assign(static_cast<size_t>(n_), 0);
  held_.assign(static_cast<size_t>(n_), {});
  if (rule_ == AsyncRule::kDsgd) {
    // The in-edge copies and their weights from the static doubly stochastic W.
    const Graph& g = seq_.graph_at(0);
    const Eigen::MatrixXd& w = ctx.mix.W(0).dense();
    in_offset_.assign(static_cast<size_t>(n_) + 1, 0);
    for (NodeIndex i = 0; i < n_; ++i) in_offset_[static_cast<size_t>(i) + 1] = in_offset_[static_cast<size_t>(i)] + g.in_degree(i);
    copies_.resize(in_offset_.back(), d_);
    copy_iter_.assign(static_cast<size_t>(in_offset_.back()), 0);
    edge_weight_.assign(static_cast<size_t>(in_offset_.back()), 0.0);
    self_weight_.assign(static_cast<size_t>(n_), 0.0);
    for (NodeIndex i = 0; i < n_; ++i) {
      self_weight_[static_cast<size_t>(i)] = w(i, i);
      const auto& in = g.in_neighbors(i);
      for (size_t q = 0; q < in.size(); ++q) {
        const auto e = static_cast<Eigen::Index>(in_offset_[static_cast<size_t>(i)] + static_cast<int64_t>(q));
        copies_.row(e) = x0.row(in[q]);
        edge_weight_[static_cast<size_t>(e)] = w(i, in[q]);
      }
    }
  }
  bool limited = profile_.has_node_capacities();
  const Graph all_links = seq_.union_graph();  // a value: iterate a named copy, not a temporary's member
  for (const Edge& e : all_links.edges()) limited = limited || profile_.link_bandwidth(e.from, e.to) > 0;
  if (limited) {
    std::vector<Bandwidth> caps(2 * static_cast<size_t>(n_), Bandwidth(1.0));
    for (NodeIndex i = 0; i < n_; ++i) {
      if (profile_.uplink(i) > 0) caps[static_cast<size_t>(i)] = Bandwidth(profile_.uplink(i));
      if (profile_.downlink(i) > 0) caps[static_cast<size_t>(n_ + i)] = Bandwidth(profile_.downlink(i));
    }
    net_ = std::make_unique<net::FlowNetwork>(engine_, caps);
  }
  ctx.sim_time = 0;
  for (NodeIndex i = 0; i < n_; ++i) start(i);
}

void AsyncGossip::start(NodeIndex i) {
  const auto ii = static_cast<size_t>(i);
  const double now = engine_.now().to_seconds();
  const Availability& a = profile_.availability(i);
  if (!a.available(now)) {
    schedule(a.next_available(now), tag_of(kWake, ii), true);
    return;
  }
  // The gradient at the node's current model (push-sum: z = x / w).
  if (rule_ == AsyncRule::kPushSum) {
    z_.row(i) = x_.row(i) / w_[ii];
    ctx_->oracle.gradient(i, z_.row(i).data(), g_.row(i).data());
  } else {
    ctx_->oracle.gradient(i, x_.row(i).data(), g_.row(i).data());
  }
  const double end = now + profile_.compute_per_sample(i) * static_cast<double>(std::max<int64_t>(ctx_->oracle.batch(), 1));
  const double until = a.available_until(now);
  if (end > until) {
    // The node leaves before finishing: the iteration is dropped; it resumes when it is next available.
    ++dropped_;
    schedule(a.next_available(until), tag_of(kWake, ii), true);
    return;
  }
  schedule(end, tag_of(kFinish, ii), false);
}

void AsyncGossip::finish(NodeIndex i) {
  const auto ii = static_cast<size_t>(i);
  const double a = ctx_->params.lr;
  const int64_t k = iter_[ii];
  if (rule_ == AsyncRule::kPushSum) {
    // A step of a on z_i = x_i / w_i (x_i -= a w_i g_i): with w_i = 1 (synchronous SGP on a regular graph)
    // this is SGP's x_i -= a g_i; a fast node whose weight has drained by sending shares would otherwise
    // move z_i by a g_i / w_i.
    x_.row(i) -= (a * w_[ii]) * g_.row(i);
    const auto& out = seq_.graph_at(k).out_neighbors(i);
    const double share = 1.0 / static_cast<double>(out.size() + 1);
    x_.row(i) *= share;
    w_[ii] *= share;
    ++iter_[ii];
    for (NodeIndex j : out) send(i, j, 0);
  } else {
    const Graph& g = seq_.graph_at(0);
    Eigen::RowVectorXd next = self_weight_[ii] * x_.row(i) - a * g_.row(i);
    const auto& in = g.in_neighbors(i);
    for (size_t q = 0; q < in.size(); ++q) {
      const auto e = static_cast<size_t>(in_offset_[ii]) + q;
      next += edge_weight_[e] * copies_.row(static_cast<Eigen::Index>(e));
      const int64_t s = iter_[static_cast<size_t>(in[q])] - copy_iter_[e];
      ++stale_.count;
      stale_.sum += static_cast<double>(s);
      stale_.max = std::max(stale_.max, s);
    }
    x_.row(i) = next;
    ++iter_[ii];
    for (NodeIndex j : g.out_neighbors(i)) {
      const auto& jin = g.in_neighbors(j);
      const auto pos = std::lower_bound(jin.begin(), jin.end(), i) - jin.begin();
      send(i, j, in_offset_[static_cast<size_t>(j)] + pos);
    }
  }
  ++updates_;
  start(i);
}

size_t AsyncGossip::acquire_slot() {
  if (free_.empty()) {
    free_.push_back(msgs_.size());
    msgs_.emplace_back();
    payload_.resize(msgs_.size() * static_cast<size_t>(d_));
  }
  const size_t s = free_.back();
  free_.pop_back();
  return s;
}

void AsyncGossip::send(NodeIndex from, NodeIndex to, int64_t edge) {
  const size_t s = acquire_slot();
  Message& m = msgs_[s];
  m = Message{from, to, iter_[static_cast<size_t>(from)], w_[static_cast<size_t>(from)], edge, true};
  std::copy_n(x_.row(from).data(), d_, payload_.data() + s * static_cast<size_t>(d_));
  const int64_t bytes = 8 * (d_ + (rule_ == AsyncRule::kPushSum ? 1 : 0));
  bytes_ += bytes;
  const double latency = profile_.link_latency(from, to);
  const double cap = profile_.link_bandwidth(from, to);
  std::vector<net::LinkUse> path;
  if (net_) {
    if (profile_.uplink(from) > 0) path.push_back({from, 1});
    if (profile_.downlink(to) > 0) path.push_back({n_ + to, 1});
  }
  if (path.empty() && !(cap > 0)) {
    engine_.schedule_after(Time::seconds(latency), this, tag_of(kArrive, s), des::Priority::kNetwork);
    return;
  }
  net_->start_flow(path, Time::seconds(latency), Bytes(bytes), this, s, 1.0,
                   cap > 0 ? cap : std::numeric_limits<double>::infinity());
}

void AsyncGossip::deliver(size_t slot) {
  const Message& m = msgs_[slot];
  const auto dst = static_cast<size_t>(m.dst);
  if (!profile_.availability(m.dst).available(engine_.now().to_seconds())) {
    held_[dst].push_back(slot);  // delivered when the node returns (its wake-up)
    return;
  }
  mix_in(slot);
}

void AsyncGossip::mix_in(size_t slot) {
  Message& m = msgs_[slot];
  const double* p = payload_.data() + slot * static_cast<size_t>(d_);
  if (rule_ == AsyncRule::kPushSum) {
    x_.row(m.dst) += Eigen::Map<const Eigen::RowVectorXd>(p, d_);
    w_[static_cast<size_t>(m.dst)] += m.w;
    const int64_t s = iter_[static_cast<size_t>(m.src)] - m.sender_iter;
    ++stale_.count;
    stale_.sum += static_cast<double>(s);
    stale_.max = std::max(stale_.max, s);
  } else {
    const auto e = static_cast<size_t>(m.edge);
    if (m.sender_iter > copy_iter_[e]) {
      copies_.row(static_cast<Eigen::Index>(e)) = Eigen::Map<const Eigen::RowVectorXd>(p, d_);
      copy_iter_[e] = m.sender_iter;
    }
  }
  m.live = false;
  free_.push_back(slot);
}

void AsyncGossip::on_event(des::Engine&, uint64_t tag) {
  const uint64_t kind = tag >> kKindShift;
  const uint64_t index = tag & kIndexMask;
  if (kind == kArrive) {
    deliver(index);
    return;
  }
  const auto i = static_cast<NodeIndex>(index);
  if (kind == kFinish) {
    finish(i);
    return;
  }
  // kWake: hand over what arrived while the node was away, then start an iteration.
  if (profile_.availability(i).available(engine_.now().to_seconds())) {
    std::vector<size_t> held;
    held.swap(held_[index]);
    for (size_t s : held) mix_in(s);
  }
  start(i);
}

void AsyncGossip::on_flow_done(uint64_t tag, Time) { deliver(tag); }

void AsyncGossip::step(int64_t k, StepContext& ctx) {
  ctx_ = &ctx;
  const int64_t target = (k + 1) * static_cast<int64_t>(n_);
  const int64_t bytes_before = bytes_;
  while (updates_ < target && engine_.step()) {
  }
  ctx.bytes += bytes_ - bytes_before;
  ctx.sim_time = engine_.now().to_seconds();
}

const NodeMatrix& AsyncGossip::iterates() {
  if (rule_ == AsyncRule::kDsgd) return x_;
  for (NodeIndex i = 0; i < n_; ++i) z_.row(i) = x_.row(i) / w_[static_cast<size_t>(i)];
  return z_;
}

double AsyncGossip::total_weight() const {
  double s = 0;
  for (double w : w_) s += w;
  for (const Message& m : msgs_) {
    if (m.live) s += m.w;
  }
  return s;
}

Eigen::RowVectorXd AsyncGossip::total_mass() const {
  Eigen::RowVectorXd s = x_.colwise().sum();
  if (rule_ == AsyncRule::kPushSum) {
    for (size_t slot = 0; slot < msgs_.size(); ++slot) {
      if (msgs_[slot].live) s += Eigen::Map<const Eigen::RowVectorXd>(payload_.data() + slot * static_cast<size_t>(d_), d_);
    }
  }
  return s;
}

}  // namespace orrery::decentral
