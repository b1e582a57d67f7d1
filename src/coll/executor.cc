#include "coll/executor.h"

#include "core/assert.h"

namespace orrery::coll {

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

namespace {

class Runner final : public Issuer, public net::FlowListener {
 public:
  Runner(Program& program, net::FlowNetwork& net, PathProvider& paths, const MessageObserver& observer)
      : program_(program), net_(net), paths_(paths), observer_(observer) {}

  void send(int32_t src, int32_t dst, Bytes size, uint64_t id) override {
    uint64_t slot;
    if (free_.empty()) {
      slot = messages_.size();
      messages_.push_back(Message{src, dst, id, size, now_()});
    } else {
      slot = free_.back();
      free_.pop_back();
      messages_[slot] = Message{src, dst, id, size, now_()};
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) | static_cast<uint32_t>(dst);
    const Time latency = paths_.path(src, dst, key, scratch_);
    ++stats.messages;
    stats.bytes += size;
    ++in_flight_;
    stats.peak_flows = std::max(stats.peak_flows, in_flight_);
    net_.start_flow(scratch_, latency, size, this, slot);
  }

  void on_flow_done(uint64_t tag, Time now) override {
    const Message m = messages_[tag];
    free_.push_back(tag);
    --in_flight_;
    last_ = now;
    if (observer_) observer_(MessageRecord{m.src, m.dst, m.id, m.size, m.start, now});
    program_.on_send_done(m.src, m.dst, m.id, *this);
    program_.on_receive(m.dst, m.src, m.id, *this);
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
  };
  Time now_() const { return engine_ != nullptr ? engine_->now() : Time::zero(); }

 public:
  des::Engine* engine_ = nullptr;

 private:
  Program& program_;
  net::FlowNetwork& net_;
  PathProvider& paths_;
  const MessageObserver& observer_;
  std::vector<Message> messages_;
  std::vector<uint64_t> free_;
  std::vector<net::LinkUse> scratch_;
  size_t in_flight_ = 0;
  Time last_;
};

}  // namespace

ExecutionStats execute(Program& program, des::Engine& engine, net::FlowNetwork& net, PathProvider& paths,
                       const MessageObserver& observer) {
  const Time start = engine.now();
  const uint64_t events0 = engine.events_processed();
  const uint64_t solves0 = net.solves();
  Runner runner(program, net, paths, observer);
  runner.engine_ = &engine;
  for (int32_t r = 0; r < program.ranks(); ++r) program.start(r, runner);
  engine.run();
  ExecutionStats s = runner.stats;
  s.time = (s.messages == 0 ? start : runner.last()) - start;
  s.events = engine.events_processed() - events0;
  s.solves = net.solves() - solves0;
  return s;
}

}  // namespace orrery::coll
