#include "decentral/heterogeneity.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/error.h"
#include "decentral/device_trace.h"
#include "decentral/graph.h"

namespace orrery::decentral {
namespace {

TEST(Availability, ChurnIsUnavailableForTheRequestedFractionInTheLongRun) {
  // Alternating renewal process: off periods Exp(mean m), on periods Exp(mean m (1 - f) / f); the long-run
  // unavailable fraction is m / (m + m (1 - f) / f) = f. Over T = 2e4 m there are ~4e3 cycles for f = 0.2,
  // so the measured fraction has a standard error of about sqrt(f (1 - f) ... ) ~ 0.005; 0.02 cannot be
  // missed by chance (4 sigma) yet catches a wrong on/off mean (f = 0.25 would give 0.25).
  const ChurnSpec c{0.2, 1.0};
  const Availability a(c, RandomStream::derive(7, "test.churn"));
  const double horizon = 20'000.0;
  double off = 0;
  double t = 0;
  while (t < horizon) {
    if (a.available(t)) {
      t = std::min(horizon, a.available_until(t));
    } else {
      const double back = std::min(horizon, a.next_available(t));
      off += back - t;
      t = back;
    }
  }
  EXPECT_NEAR(off / horizon, 0.2, 0.02);
}

}  // namespace
}  // namespace orrery::decentral

namespace orrery::decentral {
namespace {

TEST(Heterogeneity, SpecParsesEveryDistributionWithUnits) {
  const HeterogeneitySpec h =
      parse_heterogeneity("compute=lognormal:20us:1, latency=50us, bandwidth=uniform:1Gb/s:10Gb/s, uplink=fixed:8MB/s",
                          Where{"<command line>", 0, "--heterogeneity"});
  ASSERT_TRUE(h.compute && h.latency && h.bandwidth && h.uplink);
  EXPECT_FALSE(h.downlink.has_value());
  EXPECT_EQ(h.compute->kind, Dist::Kind::kLogNormal);
  EXPECT_DOUBLE_EQ(h.compute->a, 20e-6);
  EXPECT_DOUBLE_EQ(h.compute->b, 1.0);
  EXPECT_DOUBLE_EQ(h.latency->a, 50e-6);
  // 1 Gb/s = 1.25e8 B/s (core/unit_parse.h).
  EXPECT_DOUBLE_EQ(h.bandwidth->a, 1.25e8);
  EXPECT_DOUBLE_EQ(h.bandwidth->b, 1.25e9);
  EXPECT_DOUBLE_EQ(h.uplink->a, 8e6);
}

TEST(Heterogeneity, BadSpecsNameTheKeyAndTheExpectedForm) {
  const Where w{"<command line>", 0, "--heterogeneity"};
  const auto message = [&](const char* text) {
    try {
      parse_heterogeneity(text, w);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("compte=20us").find("did you mean 'compute'"), std::string::npos);
  EXPECT_NE(message("compute").find("expected KEY=DISTRIBUTION"), std::string::npos);
  EXPECT_NE(message("compute=20").find("--heterogeneity.compute"), std::string::npos);  // a unit is required
  EXPECT_NE(message("compute=lognormal:20us").find("lognormal:MEAN:CV"), std::string::npos);
  EXPECT_NE(message("latency=uniform:5us:1us").find("LO <= HI"), std::string::npos);
  EXPECT_NE(message("compute=gauss:1us:2").find("unknown distribution 'gauss'"), std::string::npos);
  EXPECT_NE(message("bandwidth=lognormal:1Gb/s:-1").find("coefficient of variation"), std::string::npos);
  EXPECT_THROW(parse_churn("1.0", w), InputError);
  EXPECT_THROW(parse_churn("-0.1", w), InputError);
  EXPECT_THROW(parse_churn("0.2:5", w), InputError);  // the mean period needs a unit
  EXPECT_THROW(parse_churn("0.2:5s:1", w), InputError);
  const ChurnSpec c = parse_churn("0.25:2s", w);
  EXPECT_DOUBLE_EQ(c.fraction, 0.25);
  EXPECT_DOUBLE_EQ(c.mean_off_s, 2.0);
}

TEST(NetworkProfile, ValuesAreSeededPerNodeAndLinkByName) {
  // Node 3's compute depends on (seed, "compute", node 3) only: the same on a ring of 8 and a ring of 16,
  // and different for another seed.
  HeterogeneitySpec h;
  h.compute = Dist::lognormal(1e-3, 1.0);
  h.latency = Dist::uniform(1e-6, 2e-6);
  const NetworkProfile a(h, GraphSequence(ring(8)), 5);
  const NetworkProfile b(h, GraphSequence(ring(16)), 5);
  const NetworkProfile c(h, GraphSequence(ring(8)), 6);
  EXPECT_EQ(a.compute_per_sample(3), b.compute_per_sample(3));
  EXPECT_NE(a.compute_per_sample(3), c.compute_per_sample(3));
  EXPECT_EQ(a.link_latency(3, 4), b.link_latency(3, 4));
  EXPECT_GE(a.link_latency(3, 4), 1e-6);
  EXPECT_LT(a.link_latency(3, 4), 2e-6);
  EXPECT_EQ(a.link_latency(0, 4), 0.0);  // not a link of the ring
}

TEST(NetworkProfile, LognormalComputeHasTheRequestedMeanAndSpread) {
  // 4,096 nodes of LogNormal(mean 1 ms, cv 1): the sample mean has a standard error of 1 ms / 64 = 1.6%
  // of the mean, so 6% is ~4 standard errors; the sample cv of a lognormal with cv 1 converges slowly
  // (heavy tail), so it is only checked to lie in [0.7, 1.3].
  HeterogeneitySpec h;
  h.compute = Dist::lognormal(1e-3, 1.0);
  const NetworkProfile p(h, GraphSequence(Graph(4096, {})), 11);
  double s = 0, ss = 0;
  for (NodeIndex i = 0; i < 4096; ++i) {
    s += p.compute_per_sample(i);
    ss += p.compute_per_sample(i) * p.compute_per_sample(i);
  }
  const double mean = s / 4096;
  const double cv = std::sqrt(ss / 4096 - mean * mean) / mean;
  EXPECT_NEAR(mean, 1e-3, 0.06e-3);
  EXPECT_GT(cv, 0.7);
  EXPECT_LT(cv, 1.3);
}

TEST(SyncClock, NodeCapacitiesShareTheUplinkMaxMinFairly) {
  // Star of 3 (hub 0): in a round the hub sends to 2 leaves and receives from 2. Uplinks and downlinks of
  // 1,000 B/s, no compute, no latency. Every message is a flow over its sender's uplink and receiver's
  // downlink: the hub's uplink carries 2 flows (500 B/s each), its downlink 2 (500 B/s each); the
  // leaves' links carry one each. Max-min: every flow gets 500 B/s. Messages of 100 bytes: DSGD sends 4
  // per round (400 bytes), each takes 100 / 500 = 0.2 s, so one round ends at 0.2 s.
  HeterogeneitySpec h;
  h.uplink = Dist::fixed(1000.0);
  h.downlink = Dist::fixed(1000.0);
  const GraphSequence seq(star(3));
  const NetworkProfile p(h, seq, 1);
  SyncClock clock(p, seq, 1);
  EXPECT_NEAR(clock.advance(0, 400), 0.2, 1e-12);
  EXPECT_NEAR(clock.advance(1, 400), 0.4, 1e-12);
}

TEST(SyncClock, ChurnedNodesAreAbsentForTheirFractionOfSteps) {
  // Identical nodes (1 ms per step, no network), churn 0.2 with 20 ms mean unavailable periods: a node is
  // absent in a step when it is unavailable at its start. Every clock advances 1 ms per step whether
  // present or not, so over 20,000 steps (20 s, ~200 churn cycles per node, 8 nodes) the absent fraction
  // estimates the unavailable fraction 0.2 with a standard error of about 0.01; 0.04 is 4 of them.
  HeterogeneitySpec h;
  h.compute = Dist::fixed(1e-3);
  h.churn = ChurnSpec{0.2, 0.02};
  const GraphSequence seq(ring(8));
  const NetworkProfile p(h, seq, 3);
  SyncClock clock(p, seq, 1);
  int64_t absent = 0;
  const int64_t steps = 20'000;
  for (int64_t k = 0; k < steps; ++k) {
    for (uint8_t on : clock.present(k)) absent += on ? 0 : 1;
    clock.advance(k, 0);
  }
  EXPECT_NEAR(static_cast<double>(absent) / (8.0 * steps), 0.2, 0.04);
  EXPECT_NEAR(clock.time_of(0), steps * 1e-3, 1e-9);
}

TEST(FedScale, ClientRoundTimeIsComputePlusTransfersOverBandwidth) {
  // decentralized.md check 8: round time = 3 * batch * steps * ms_per_sample / 1000 + (upload + download
  // kbit) / kbps. A device of 35 ms per sample and 2,000 kbps, batch 20, 5 local steps, a 100 kB model
  // (800 kbit) each way: 3 * 20 * 5 * 35 / 1000 = 10.5 s plus 1,600 / 2,000 = 0.8 s, 11.3 s in all.
  auto trace = std::make_shared<DeviceTrace>(
      parse_device_trace("device_id,compute_ms_per_sample,bandwidth_kbps\nphone,35,2000\n", "mem.csv"));
  HeterogeneitySpec h;
  h.trace = trace;
  const NetworkProfile p(h, GraphSequence(Graph(4, {})), 1);
  EXPECT_NEAR(p.job_seconds(2, 20, 5, 100'000, 100'000), 11.3, 1e-12);
  // Always available: the job ends that long after it starts.
  EXPECT_NEAR(p.job_end(2, 7.0, 20, 5, 100'000, 100'000), 18.3, 1e-12);
}

TEST(FedScale, AJobThatOutlastsTheAvailablePeriodIsRedoneWhenTheClientReturns) {
  // Available [0, 10) and [20, 40) s; a 6 s job asked for at 5 s does not fit before 10 s, so it is
  // dropped and redone from 20 s: done at 26 s. Asked for at 12 s it waits for 20 s too.
  auto trace = std::make_shared<DeviceTrace>(parse_device_trace(
      "device_id,compute_ms_per_sample,bandwidth_kbps,availability\nd,100,1000,0-10;20-40\n", "mem.csv"));
  HeterogeneitySpec h;
  h.trace = trace;
  const NetworkProfile p(h, GraphSequence(Graph(1, {})), 1);
  // 3 * 20 * 1 * 100 / 1000 = 6 s of compute, no transfers.
  EXPECT_NEAR(p.job_seconds(0, 20, 1, 0, 0), 6.0, 1e-12);
  EXPECT_NEAR(p.job_end(0, 5.0, 20, 1, 0, 0), 26.0, 1e-12);
  EXPECT_NEAR(p.job_end(0, 12.0, 20, 1, 0, 0), 26.0, 1e-12);
  EXPECT_EQ(p.job_end(0, 35.0, 20, 1, 0, 0), kNever);  // no period after 40 s
}

}  // namespace
}  // namespace orrery::decentral
