#include "net/flow_network.h"

#include <vector>

#include <gtest/gtest.h>

namespace orrery::net {
namespace {

// Records completion times by tag.
class Recorder : public FlowListener {
 public:
  void on_flow_done(uint64_t tag, Time now) override { done.emplace_back(tag, now); }
  std::vector<std::pair<uint64_t, Time>> done;
};

const Bandwidth k100MBps(100e6);

TEST(FlowNetwork, ALoneFlowTakesLatencyPlusSizeOverBandwidth) {
  // alpha-beta: 2 us + 1 MB / 100 MB/s = 2 us + 10 ms = 10.002 ms.
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  Recorder rec;
  const std::vector<LinkUse> path = {{0, 1}};
  net.start_flow(path, Time::us(2), Bytes(1'000'000), &rec, 7);
  engine.run();
  ASSERT_EQ(rec.done.size(), 1u);
  EXPECT_EQ(rec.done[0].first, 7u);
  EXPECT_EQ(rec.done[0].second, Time::us(10'002));
}

TEST(FlowNetwork, TwoFlowsOnOneLinkShareItEvenly) {
  // Each gets 50 MB/s: 1 MB takes 20 ms for both.
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  Recorder rec;
  const std::vector<LinkUse> path = {{0, 1}};
  net.start_flow(path, Time::zero(), Bytes(1'000'000), &rec, 1);
  net.start_flow(path, Time::zero(), Bytes(1'000'000), &rec, 2);
  engine.run();
  ASSERT_EQ(rec.done.size(), 2u);
  EXPECT_EQ(rec.done[0].second, Time::ms(20));
  EXPECT_EQ(rec.done[1].second, Time::ms(20));
}

TEST(FlowNetwork, ALateArrivalSlowsTheFirstFlowFromThenOn) {
  // Flow A (1 MB) alone for 5 ms drains 0.5 MB; then B (0.25 MB) arrives and both get 50 MB/s:
  // B needs 5 ms (ends at 10 ms) and A drains 0.25 MB meanwhile; A's last 0.25 MB alone at 100 MB/s
  // takes 2.5 ms: A ends at 12.5 ms.
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  Recorder rec;
  const std::vector<LinkUse> path = {{0, 1}};
  net.start_flow(path, Time::zero(), Bytes(1'000'000), &rec, 1);
  engine.schedule_at(Time::ms(5), [&](des::Engine&) { net.start_flow(path, Time::zero(), Bytes(250'000), &rec, 2); });
  engine.run();
  ASSERT_EQ(rec.done.size(), 2u);
  EXPECT_EQ(rec.done[0], (std::pair<uint64_t, Time>{2, Time::ms(10)}));
  EXPECT_EQ(rec.done[1], (std::pair<uint64_t, Time>{1, Time::us(12'500)}));
}

TEST(FlowNetwork, AFlowBottleneckedElsewhereLeavesItsShareToOthers) {
  // Link 0 (100 MB/s) carries A and B; B also crosses link 1 (20 MB/s). Max-min: B = 20, A = 80 MB/s.
  // A: 0.8 MB / 80 MB/s = 10 ms; B: 0.2 MB / 20 MB/s = 10 ms.
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps, Bandwidth(20e6)});
  Recorder rec;
  const std::vector<LinkUse> a = {{0, 1}};
  const std::vector<LinkUse> b = {{0, 1}, {1, 1}};
  net.start_flow(a, Time::zero(), Bytes(800'000), &rec, 1);
  net.start_flow(b, Time::zero(), Bytes(200'000), &rec, 2);
  engine.run();
  ASSERT_EQ(rec.done.size(), 2u);
  EXPECT_EQ(rec.done[0].second, Time::ms(10));
  EXPECT_EQ(rec.done[1].second, Time::ms(10));
}

TEST(FlowNetwork, ASlowedLinkStretchesTheRemainingTransfer) {
  // 1 MB at 100 MB/s; at 4 ms (0.4 MB done) the link drops to 25 MB/s: 0.6 MB / 25 MB/s = 24 ms more,
  // so the flow ends at 28 ms.
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  Recorder rec;
  const std::vector<LinkUse> path = {{0, 1}};
  net.start_flow(path, Time::zero(), Bytes(1'000'000), &rec, 1);
  engine.schedule_at(Time::ms(4), [&](des::Engine&) { net.set_capacity(0, Bandwidth(25e6)); });
  engine.run();
  ASSERT_EQ(rec.done.size(), 1u);
  EXPECT_EQ(rec.done[0].second, Time::ms(28));
}

TEST(FlowNetwork, ADownLinkStallsUntilItComesBack) {
  // Down from 2 ms to 7 ms: 0.2 MB done before, 0.8 MB after at 100 MB/s = 8 ms: ends at 15 ms.
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  Recorder rec;
  const std::vector<LinkUse> path = {{0, 1}};
  net.start_flow(path, Time::zero(), Bytes(1'000'000), &rec, 1);
  engine.schedule_at(Time::ms(2), [&](des::Engine&) { net.set_capacity(0, Bandwidth(0)); });
  engine.schedule_at(Time::ms(7), [&](des::Engine&) { net.set_capacity(0, k100MBps); });
  engine.run();
  ASSERT_EQ(rec.done.size(), 1u);
  EXPECT_EQ(rec.done[0].second, Time::ms(15));
}

// A listener that chains: each completion starts the next transfer (a pipeline of n hops).
class Chain : public FlowListener {
 public:
  Chain(FlowNetwork& net, int hops) : net_(net), hops_(hops) {}
  void on_flow_done(uint64_t tag, Time now) override {
    last = now;
    if (static_cast<int>(tag) + 1 < hops_) start(tag + 1);
  }
  void start(uint64_t tag) {
    const std::vector<LinkUse> path = {{0, 1}};
    net_.start_flow(path, Time::us(1), Bytes(100'000), this, tag);
  }
  Time last;

 private:
  FlowNetwork& net_;
  int hops_;
};

TEST(FlowNetwork, ChainedTransfersAddUp) {
  // 5 sequential transfers of (1 us + 100 kB / 100 MB/s = 1 ms + 1 us) = 5.005 ms.
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  Chain chain(net, 5);
  chain.start(0);
  engine.run();
  EXPECT_EQ(chain.last, Time::us(5005));
  EXPECT_EQ(net.flows_completed(), 5u);
}

TEST(FlowNetwork, ZeroSizeFlowCompletesAfterItsLatency) {
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  Recorder rec;
  const std::vector<LinkUse> path = {{0, 1}};
  net.start_flow(path, Time::us(3), Bytes(0), &rec, 9);
  engine.run();
  ASSERT_EQ(rec.done.size(), 1u);
  EXPECT_EQ(rec.done[0].second, Time::us(3));
}

TEST(FlowNetwork, ObserversSeeEveryCompletion) {
  des::Engine engine;
  FlowNetwork net(engine, {k100MBps});
  std::vector<FlowCompleted> seen;
  net.completed_signal().subscribe([&](const FlowCompleted& c) { seen.push_back(c); });
  const std::vector<LinkUse> path = {{0, 1}};
  net.start_flow(path, Time::zero(), Bytes(1'000'000), nullptr, 3);
  engine.run();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].tag, 3u);
  EXPECT_EQ(seen[0].finish, Time::ms(10));
  EXPECT_EQ(seen[0].size, Bytes(1'000'000));
}

}  // namespace
}  // namespace orrery::net
