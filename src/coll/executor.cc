#include "coll/executor.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "core/assert.h"
#include "core/error.h"

namespace orrery::coll {

Time PathProvider::switch_path(int32_t rank, int32_t peer, bool to_switch, std::vector<net::LinkUse>& out) {
  const Time latency = to_switch ? path(rank, peer, pair_key(rank, peer), out) : path(peer, rank, pair_key(peer, rank), out);
  if (out.size() != 2) {
    throw InputError(Where{"", 0, "collective"}.with_key("algorithm"),
                     fmt::format("an in-switch collective (nvls) needs ranks that meet at one switch, but the route "
                                 "between ranks {} and {} has {} links",
                                 rank, peer, out.size()),
                     "use ring, or nvls within one NVLink switch domain");
  }
  out.erase(to_switch ? out.begin() + 1 : out.begin());
  return Time::ps(latency.picoseconds() / 2);
}

Time SwitchPaths::path(int32_t src, int32_t dst, uint64_t /*flow_key*/, std::vector<net::LinkUse>& out) {
  out.clear();
  if (src == dst) return Time::zero();
  out.push_back(net::LinkUse{src, 1});
  out.push_back(net::LinkUse{n_ + dst, 1});
  return latency_;
}

std::vector<Bandwidth> SwitchPaths::capacities() const {
  return std::vector<Bandwidth>(static_cast<size_t>(2 * n_), bandwidth_);
}

Bandwidth RankModel::capacity(int32_t rank) const {
  const double f = slowdown.empty() ? 1.0 : slowdown[static_cast<size_t>(rank)];
  return local_bandwidth / (passes * f);
}

namespace {

class Runner final : public Issuer, public net::FlowListener {
 public:
  Runner(Program& program, net::FlowNetwork& net, PathProvider& paths, const ExecutionOptions& options)
      : program_(program), net_(net), paths_(paths), observer_(options.observer), ranks_(options.ranks) {}

  void send(int32_t src, int32_t dst, Bytes size, uint64_t id, uint32_t stream) override {
    if (asymmetric) return;
    uint64_t slot;
    const Time now = now_();
    if (free_.empty()) {
      slot = messages_.size();
      messages_.push_back(Message{src, dst, id, size, now, stream});
    } else {
      slot = free_.back();
      free_.pop_back();
      messages_[slot] = Message{src, dst, id, size, now, stream};
    }
    Time latency = route(src, dst, scratch_);
    if (!rank_links_.empty() && src != kSwitch) scratch_.push_back(net::LinkUse{rank_links_[static_cast<size_t>(src)], 1});
    if (orbits_ != nullptr) {
      if (!routes_symmetric(src, dst)) {
        asymmetric = true;
        // Sends also happen from program.start(), before the engine runs: stop only a running engine.
        if (engine_ != nullptr && engine_->running()) engine_->stop();
        return;  // the caller discards this run
      }
      fold_onto_orbits();
    }
    ++stats.messages;
    stats.bytes += size;
    ++in_flight_;
    stats.peak_flows = std::max(stats.peak_flows, in_flight_);
    Connection& c = connections_[connection_key(src, dst, stream)];
    if (c.busy) {
      // FIFO: drains after the messages ahead of it; its latency runs meanwhile.
      c.queue.push_back(Queued{slot, scratch_, latency, now});
      return;
    }
    c.busy = true;
    net_.start_flow(scratch_, latency, size, this, slot);
  }

  void on_flow_done(uint64_t tag, Time now) override {
    const Message m = messages_[tag];
    free_.push_back(tag);
    --in_flight_;
    {
      const auto it = connections_.find(connection_key(m.src, m.dst, m.stream));
      ORRERY_ASSERT(it != connections_.end() && it->second.busy);
      Connection& c = it->second;
      if (c.head == c.queue.size()) {
        // Idle with nothing queued: forget it, so that the table holds only connections with work (memory
        // in active flows, not in every pair that ever sent: an all-to-all has n^2 of those).
        connections_.erase(it);
      } else {
        Queued q = std::move(c.queue[c.head]);
        if (++c.head == c.queue.size()) {
          c.queue.clear();
          c.head = 0;
        }
        const Time ready = q.issued + q.latency;  // when its latency would have elapsed
        const Time wait = ready > now ? ready - now : Time::zero();
        net_.start_flow(q.path, wait, messages_[q.slot].size, this, q.slot);
      }
    }
    last_ = now;
    if (observer_) observer_(MessageRecord{m.src, m.dst, m.id, m.size, m.start, now});
    if (m.src != kSwitch) program_.on_send_done(m.src, m.dst, m.id, *this);
    if (orbits_ == nullptr) {
      program_.on_receive(m.dst, m.src, m.id, *this);
    } else {
      // Deliver to the representative of the receiver, from the sender shifted the same way.
      const int32_t p = orbits_->rank_period;
      const int32_t n = program_.ranks();
      const int32_t shift = (m.dst / p) * p;
      program_.on_receive(m.dst - shift, ((m.src - shift) % n + n) % n, m.id, *this);
    }
  }

  const net::LinkOrbits* orbits_ = nullptr;
  bool asymmetric = false;
  uint64_t reroutes = 0;

  // A link changed capacity: apply it; on a failure, move the flows crossing it to new paths with the
  // bytes they had left (they pay the new path's latency again).
  void apply(const LinkEvent& e) {
    net_.set_capacity(e.link, e.capacity);
    const bool down = e.capacity.bytes_per_second() == 0;
    paths_.set_link_down(e.link, down);
    if (!down) return;
    for (const net::FlowNetwork::Aborted& a : net_.abort_flows_on(e.link)) {
      const Message& m = messages_[a.tag];
      const Time latency = route(m.src, m.dst, scratch_);
      if (!rank_links_.empty() && m.src != kSwitch) scratch_.push_back(net::LinkUse{rank_links_[static_cast<size_t>(m.src)], 1});
      ++reroutes;
      net_.start_flow(scratch_, latency, a.remaining, this, a.tag);
    }
  }

  // The links of a message src -> dst into `out`, and its latency; one end may be the switch (kSwitch).
  Time route(int32_t src, int32_t dst, std::vector<net::LinkUse>& out) {
    if (src == kSwitch || dst == kSwitch) {
      const int32_t rank = src == kSwitch ? dst : src;
      const int32_t peer = program_.switch_peer(rank);
      if (peer < 0 || peer >= program_.ranks()) {
        out.clear();
        return Time::zero();
      }
      return paths_.switch_path(rank, peer, dst == kSwitch, out);
    }
    return paths_.path(src, dst, pair_key(src, dst), out);
  }

  // True when every translate (src + t p, dst + t p) routes over the same link orbits, in order, as
  // (src, dst) does; checked once per pair.
  bool routes_symmetric(int32_t src, int32_t dst) {
    const uint64_t pair = pair_key(src, dst);
    if (auto it = checked_.find(pair); it != checked_.end()) return it->second;
    const int32_t n = program_.ranks();
    const int32_t p = orbits_->rank_period;
    bool ok = true;
    std::vector<net::LinkUse>& other = other_;
    for (int32_t t = 1; ok && t < orbits_->translates; ++t) {
      const int32_t s2 = (src + t * p) % n;
      const int32_t d2 = (dst + t * p) % n;
      const uint64_t key2 = pair_key(s2, d2);
      paths_.peek_path(s2, d2, key2, other);
      ok = other.size() == scratch_.size();
      for (size_t i = 0; ok && i < other.size(); ++i) {
        ok = orbits_->representative[static_cast<size_t>(other[i].link)] ==
             orbits_->representative[static_cast<size_t>(scratch_[i].link)];
      }
    }
    checked_.emplace(pair, ok);
    return ok;
  }
  std::unordered_map<uint64_t, bool> checked_;
  std::vector<net::LinkUse> other_;

  // Replaces the path in scratch_ by representative links with orbit weights, merging repeats.
  void fold_onto_orbits() {
    folded_.clear();
    for (const net::LinkUse& u : scratch_) {
      const net::LinkId rep = orbits_->representative[static_cast<size_t>(u.link)];
      const int32_t w = u.count * orbits_->weight(u.link);
      auto it = std::find_if(folded_.begin(), folded_.end(), [rep](const net::LinkUse& x) { return x.link == rep; });
      if (it == folded_.end()) {
        folded_.push_back(net::LinkUse{rep, w});
      } else {
        it->count += w;
      }
    }
    scratch_.swap(folded_);
  }

  Time last() const { return last_; }
  ExecutionStats stats;

 private:
  struct Message {
    int32_t src;
    int32_t dst;
    uint64_t id;
    Bytes size;
    Time start;
    uint32_t stream;
  };
  struct Queued {
    uint64_t slot;
    std::vector<net::LinkUse> path;
    Time latency;
    Time issued;
  };
  // A FIFO per connection: queue[head..] waits. A vector, not a deque: an empty std::deque allocates
  // (libstdc++: a map and a 512-byte node), which cost 600 bytes per pair of a 1,024-GPU all-to-all.
  struct Connection {
    bool busy = false;
    size_t head = 0;
    std::vector<Queued> queue;
  };
  static uint64_t connection_key(int32_t src, int32_t dst, uint32_t stream) {
    // 24 bits per rank (16M ranks; the switch, kSwitch = -1, is 0xFFFFFF) and 16 bits of stream.
    const auto rank24 = [](int32_t r) { return static_cast<uint64_t>(static_cast<uint32_t>(r) & 0xFFFFFFu); };
    return (rank24(src) << 40) | (rank24(dst) << 16) | (stream & 0xFFFFu);
  }
  std::unordered_map<uint64_t, Connection> connections_;
  Time now_() const { return engine_ != nullptr ? engine_->now() : Time::zero(); }

 public:
  des::Engine* engine_ = nullptr;

 private:
  Program& program_;
  net::FlowNetwork& net_;
  PathProvider& paths_;
  const MessageObserver& observer_;
  const RankModel& ranks_;

 public:
  std::vector<net::LinkId> rank_links_;  // per rank: its processing link, when the rank model is on

 private:
  std::vector<Message> messages_;
  std::vector<uint64_t> free_;
  std::vector<net::LinkUse> scratch_;
  std::vector<net::LinkUse> folded_;
  size_t in_flight_ = 0;
  Time last_;
};

}  // namespace

namespace {
std::optional<ExecutionStats> run(Program& program, des::Engine& engine, net::FlowNetwork& net, PathProvider& paths,
                                  const net::LinkOrbits* orbits, const ExecutionOptions& options) {
  const Time start = engine.now();
  const uint64_t events0 = engine.events_processed();
  const uint64_t solves0 = net.solves();
  Runner runner(program, net, paths, options);
  runner.engine_ = &engine;
  runner.orbits_ = orbits;
  for (const LinkEvent& e : options.link_events) {
    engine.schedule_at(e.at, [&runner, e](des::Engine&) { runner.apply(e); }, des::Priority::kNetwork);
  }
  if (options.ranks.local_bandwidth.bytes_per_second() > 0) {
    for (int32_t r = 0; r < program.ranks(); ++r) runner.rank_links_.push_back(net.add_link(options.ranks.capacity(r)));
  }
  const int32_t active = orbits != nullptr ? orbits->rank_period : program.ranks();
  for (int32_t r = 0; r < active && !runner.asymmetric; ++r) program.start(r, runner);
  if (runner.asymmetric) return std::nullopt;
  engine.run();
  if (runner.asymmetric) return std::nullopt;
  ExecutionStats s = runner.stats;
  s.time = (s.messages == 0 ? start : runner.last()) - start;
  s.events = engine.events_processed() - events0;
  s.solves = net.solves() - solves0;
  s.reroutes = runner.reroutes;
  return s;
}
}  // namespace

ExecutionStats execute(Program& program, des::Engine& engine, net::FlowNetwork& net, PathProvider& paths,
                       const ExecutionOptions& options) {
  return *run(program, engine, net, paths, nullptr, options);
}

std::optional<ExecutionStats> execute_symmetric(Program& program, des::Engine& engine, net::FlowNetwork& net,
                                                PathProvider& paths, const net::LinkOrbits& orbits,
                                                const ExecutionOptions& options) {
  ORRERY_CHECK(program.shift_equivariant(orbits.rank_period));
  ORRERY_CHECK(options.ranks.slowdown.empty() && options.ranks.local_bandwidth.bytes_per_second() == 0 &&
               options.link_events.empty());
  return run(program, engine, net, paths, &orbits, options);
}

}  // namespace orrery::coll
