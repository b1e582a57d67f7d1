#include "net/maxmin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/random.h"
#include "net/maxmin_reference.h"

namespace orrery::net {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

FlowSpec flow_on(std::vector<LinkUse> path, double weight = 1.0, double rate_cap = kInf) {
  FlowSpec s;
  s.path = std::move(path);
  s.weight = weight;
  s.rate_cap = rate_cap;
  return s;
}

// ---- Oracles shared by the randomised tests ---------------------------------------------------

// |actual - expected| within 1e-9 relative; rates that should be 0 may be off by 1e-9 B/s absolute
// (capacities in these tests are 0 or >= 1 B/s, so a non-zero fair share is far above that).
testing::AssertionResult close(double actual, double expected) {
  const double tol = 1e-9 * std::max(std::fabs(expected), 1.0);
  if (std::fabs(actual - expected) <= tol) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "Expectation: " << expected << ", Actual: " << actual
                                     << " (difference " << actual - expected << ")";
}

// Checks the definition of weighted max-min fairness directly, independently of how the rates were
// computed: rates are feasible (0 <= r_f <= cap_f, every link within capacity) and every flow is
// either at its cap or has a bottleneck: a saturated link on which its normalised rate r_f / w_f is
// the largest (Bertsekas & Gallager 1992, Prop. 6.5.2 generalised to weights and counts).
testing::AssertionResult is_max_min_fair(const std::vector<double>& caps,
                                         const std::vector<FlowSpec>& flows,
                                         const std::vector<double>& rates) {
  constexpr double kTol = 1e-9;
  std::vector<double> load(caps.size(), 0.0);
  std::vector<double> max_normalised(caps.size(), 0.0);
  for (size_t f = 0; f < flows.size(); ++f) {
    for (const LinkUse& u : flows[f].path) {
      const auto l = static_cast<size_t>(u.link);
      load[l] += u.count * rates[f];
      max_normalised[l] = std::max(max_normalised[l], rates[f] / flows[f].weight);
    }
  }
  for (size_t l = 0; l < caps.size(); ++l) {
    if (load[l] > caps[l] + kTol * std::max(caps[l], 1.0)) {
      return testing::AssertionFailure() << "link " << l << " overloaded: load " << load[l]
                                         << " > capacity " << caps[l];
    }
  }
  for (size_t f = 0; f < flows.size(); ++f) {
    const double r = rates[f];
    const double cap = flows[f].rate_cap;
    if (!(r >= 0.0) || r > cap * (1 + kTol)) {
      return testing::AssertionFailure() << "flow " << f << " rate " << r << " outside [0, " << cap << "]";
    }
    if (std::isfinite(cap) && r >= cap * (1 - kTol)) continue;  // held by its cap
    bool has_bottleneck = false;
    for (const LinkUse& u : flows[f].path) {
      const auto l = static_cast<size_t>(u.link);
      const bool saturated = load[l] >= caps[l] - kTol * std::max(caps[l], 1.0);
      const bool largest = r / flows[f].weight >= max_normalised[l] * (1 - kTol) - kTol;
      has_bottleneck = has_bottleneck || (saturated && largest);
    }
    if (!has_bottleneck) {
      return testing::AssertionFailure() << "flow " << f << " (rate " << r << ") has no bottleneck link";
    }
  }
  return testing::AssertionSuccess();
}

// ---- Hand-derived cases -----------------------------------------------------------------------

TEST(MaxMinSolver, TwoFlowsOnOneLinkSplitEvenly) {
  // One link, C = 100, two flows of weight 1: the level rises until 2t = 100, so t = 50 each.
  MaxMinSolver s({100.0});
  const FlowId a = s.add_flow(flow_on({{0}}));
  const FlowId b = s.add_flow(flow_on({{0}}));
  s.solve();
  EXPECT_EQ(s.rate(a), 50.0);
  EXPECT_EQ(s.rate(b), 50.0);
  EXPECT_EQ(s.link_load(0), 100.0);  // 50 + 50
}

TEST(MaxMinSolver, AFlowBottleneckedElsewhereLeavesItsUnusedShareToTheOthers) {
  // Link A (C = 100) carries f1 and f2; f2 also crosses link B (C = 20). B saturates first, at level
  // 20 (A would saturate at 100/2 = 50), freezing f2 = 20; A then has 100 - 20 = 80 left for f1.
  MaxMinSolver s({100.0, 20.0});
  const FlowId f1 = s.add_flow(flow_on({{0}}));
  const FlowId f2 = s.add_flow(flow_on({{0}, {1}}));
  s.solve();
  EXPECT_EQ(s.rate(f2), 20.0);
  EXPECT_EQ(s.rate(f1), 80.0);
  EXPECT_EQ(s.link_load(0), 100.0);  // both links saturated
  EXPECT_EQ(s.link_load(1), 20.0);
}

TEST(MaxMinSolver, ParkingLotGivesTheLongFlowTheShareOfItsTightestLink) {
  // Links L1 = 60, L2 = 120, L3 = 180 in a line; the long flow f0 crosses all three, short flows
  // f1, f2, f3 cross one each. Saturation levels with two flows per link: 30, 60, 90. L1 goes
  // first at 30: f0 = f1 = 30. Then L2 has 120 - 30 = 90 for f2 alone, L3 has 180 - 30 = 150 for
  // f3 alone.
  MaxMinSolver s({60.0, 120.0, 180.0});
  const FlowId f0 = s.add_flow(flow_on({{0}, {1}, {2}}));
  const FlowId f1 = s.add_flow(flow_on({{0}}));
  const FlowId f2 = s.add_flow(flow_on({{1}}));
  const FlowId f3 = s.add_flow(flow_on({{2}}));
  s.solve();
  EXPECT_EQ(s.rate(f0), 30.0);
  EXPECT_EQ(s.rate(f1), 30.0);
  EXPECT_EQ(s.rate(f2), 90.0);
  EXPECT_EQ(s.rate(f3), 150.0);
  EXPECT_EQ(s.link_load(0), 60.0);
  EXPECT_EQ(s.link_load(1), 120.0);
  EXPECT_EQ(s.link_load(2), 180.0);
}

TEST(MaxMinSolver, AFlowOfWeightTwoGetsTwiceTheShareOfAFlowOfWeightOne) {
  // C = 90 shared by w = 2 and w = 1: the level t satisfies 2t + t = 90, t = 30, so rates 60 and 30.
  MaxMinSolver s({90.0});
  const FlowId heavy = s.add_flow(flow_on({{0}}, 2.0));
  const FlowId light = s.add_flow(flow_on({{0}}, 1.0));
  s.solve();
  EXPECT_EQ(s.rate(heavy), 60.0);
  EXPECT_EQ(s.rate(light), 30.0);
}

TEST(MaxMinSolver, WeightsScaleTheLevelNotTheBottleneck) {
  // f1 (w = 2) and f2 (w = 1) share A = 90; f1 also crosses B = 20. B saturates at level 20/2 = 10,
  // A at 90/3 = 30, so f1 freezes at 2 * 10 = 20 and f2 takes the remaining 90 - 20 = 70.
  MaxMinSolver s({90.0, 20.0});
  const FlowId f1 = s.add_flow(flow_on({{0}, {1}}, 2.0));
  const FlowId f2 = s.add_flow(flow_on({{0}}, 1.0));
  s.solve();
  EXPECT_EQ(s.rate(f1), 20.0);
  EXPECT_EQ(s.rate(f2), 70.0);
}

TEST(MaxMinSolver, ARateCapBelowTheFairShareFreezesTheFlowAtItsCap) {
  // C = 100, three flows, f1 capped at 10. The cap is reached at level 10 < 100/3, so f1 = 10; the
  // other two share 100 - 10 = 90, 45 each.
  MaxMinSolver s({100.0});
  const FlowId f1 = s.add_flow(flow_on({{0}}, 1.0, 10.0));
  const FlowId f2 = s.add_flow(flow_on({{0}}));
  const FlowId f3 = s.add_flow(flow_on({{0}}));
  s.solve();
  EXPECT_EQ(s.rate(f1), 10.0);
  EXPECT_EQ(s.rate(f2), 45.0);
  EXPECT_EQ(s.rate(f3), 45.0);
}

TEST(MaxMinSolver, ARateCapAboveTheFairShareDoesNotBind) {
  // C = 100, two flows, one capped at 60 > 50: the link saturates first, 50 each.
  MaxMinSolver s({100.0});
  const FlowId capped = s.add_flow(flow_on({{0}}, 1.0, 60.0));
  const FlowId free = s.add_flow(flow_on({{0}}));
  s.solve();
  EXPECT_EQ(s.rate(capped), 50.0);
  EXPECT_EQ(s.rate(free), 50.0);
}

TEST(MaxMinSolver, AWeightedCapIsReachedAtLevelCapOverWeight) {
  // C = 100; f1 (w = 4, cap 40) and f2 (w = 1). f1's cap is reached at level 40/4 = 10; the link
  // would saturate at 100/5 = 20. So f1 = 40 and f2 = 100 - 40 = 60.
  MaxMinSolver s({100.0});
  const FlowId f1 = s.add_flow(flow_on({{0}}, 4.0, 40.0));
  const FlowId f2 = s.add_flow(flow_on({{0}}));
  s.solve();
  EXPECT_EQ(s.rate(f1), 40.0);
  EXPECT_EQ(s.rate(f2), 60.0);
}

TEST(MaxMinSolver, AFlowCrossingALinkWithCountTwoLoadsItTwice) {
  // C = 90; f1 uses the link with count 2, f2 with count 1: 2r + r = 90, so r = 30 each, and the
  // link carries 2 * 30 + 30 = 90.
  MaxMinSolver s({90.0});
  const FlowId f1 = s.add_flow(flow_on({{0, 2}}));
  const FlowId f2 = s.add_flow(flow_on({{0, 1}}));
  s.solve();
  EXPECT_EQ(s.rate(f1), 30.0);
  EXPECT_EQ(s.rate(f2), 30.0);
  EXPECT_EQ(s.link_load(0), 90.0);
}

TEST(MaxMinSolver, AQuotientNetworkGivesTheRepresentativeTheRateOfEachSymmetricFlow) {
  // Full network: uplinks U0, U1 (100 each) and a core link K (150); four flows, flow i crosses
  // U_(i mod 2) and K. U alone would allow 100/2 = 50 per flow, K allows 150/4 = 37.5, so each flow
  // gets 37.5.
  // Quotient: one flow class of |F| = 4, link class {U0, U1} of size 2 crossed once per flow, so
  // count = 4*1/2 = 2; link class {K} of size 1, count = 4*1/1 = 4. Representative constraints
  // 2r <= 100 and 4r <= 150 give r = 37.5, the same rate.
  MaxMinSolver full({100.0, 100.0, 150.0});
  std::vector<FlowId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(full.add_flow(flow_on({{i % 2}, {2}})));
  full.solve();
  MaxMinSolver quotient({100.0, 150.0});
  const FlowId rep = quotient.add_flow(flow_on({{0, 2}, {1, 4}}));
  quotient.solve();
  EXPECT_EQ(quotient.rate(rep), 37.5);
  for (FlowId id : ids) EXPECT_EQ(full.rate(id), quotient.rate(rep));
  EXPECT_EQ(quotient.link_load(1), full.link_load(2));  // 4 * 37.5 = 150 on K
}

TEST(MaxMinSolver, ALinkListedTwiceInAPathCountsAsTheSumOfItsCounts) {
  // A path {0 (count 1), 0 (count 1)} is the same constraint as {0 (count 2)}: with another flow of
  // count 1 on C = 90, 2r + r = 90, r = 30.
  MaxMinSolver s({90.0});
  const FlowId twice = s.add_flow(flow_on({{0}, {0}}));
  const FlowId once = s.add_flow(flow_on({{0}}));
  s.solve();
  EXPECT_EQ(s.rate(twice), 30.0);
  EXPECT_EQ(s.rate(once), 30.0);
  s.remove_flow(twice);  // both incidences unlinked, once gets the whole link
  s.solve();
  EXPECT_EQ(s.rate(once), 90.0);
}

TEST(MaxMinSolver, AFlowThroughAZeroCapacityLinkGetsRateExactlyZero) {
  // f1 crosses A (C = 0) and B (C = 100); f2 crosses B only. A saturates at level 0, freezing
  // f1 = 0 exactly; f2 then has all of B: 100.
  MaxMinSolver s({0.0, 100.0});
  const FlowId f1 = s.add_flow(flow_on({{0}, {1}}));
  const FlowId f2 = s.add_flow(flow_on({{1}}));
  s.solve();
  EXPECT_EQ(s.rate(f1), 0.0);
  EXPECT_FALSE(std::signbit(s.rate(f1)));
  EXPECT_EQ(s.rate(f2), 100.0);
}

TEST(MaxMinSolver, AFlowWithAnEmptyPathGetsItsCap) {
  // No link constrains it, so progressive filling stops at its cap: 7.
  MaxMinSolver s({100.0});
  const FlowId local = s.add_flow(flow_on({}, 1.0, 7.0));
  EXPECT_EQ(s.solve(), std::vector<FlowId>{local});
  EXPECT_EQ(s.rate(local), 7.0);
  EXPECT_EQ(s.last_solve_links(), 0u);
}

TEST(MaxMinSolver, SetCapacityChangesTheRatesOfExactlyTheAffectedComponent) {
  // Component X: link 0 (100) with f1, f2. Component Y: link 1 (60) with f3, f4, f5, where f5 also
  // crosses link 2 (10). Before: f1 = f2 = 50; f5 = 10 (link 2), f3 = f4 = (60 - 10)/2 = 25.
  // Link 0 drops to 40: X becomes f1 = f2 = 20, Y is neither visited nor changed.
  MaxMinSolver s({100.0, 60.0, 10.0});
  const FlowId f1 = s.add_flow(flow_on({{0}}));
  const FlowId f2 = s.add_flow(flow_on({{0}}));
  const FlowId f3 = s.add_flow(flow_on({{1}}));
  const FlowId f4 = s.add_flow(flow_on({{1}}));
  const FlowId f5 = s.add_flow(flow_on({{1}, {2}}));
  s.solve();
  EXPECT_EQ(s.rate(f3), 25.0);
  EXPECT_EQ(s.rate(f5), 10.0);
  s.set_capacity(0, 40.0);
  const std::vector<FlowId> changed = s.solve();
  EXPECT_EQ(changed, (std::vector<FlowId>{f1, f2}));
  EXPECT_EQ(s.rate(f1), 20.0);
  EXPECT_EQ(s.rate(f2), 20.0);
  EXPECT_EQ(s.rate(f3), 25.0);
  EXPECT_EQ(s.rate(f4), 25.0);
  EXPECT_EQ(s.rate(f5), 10.0);
  EXPECT_EQ(s.last_solve_flows(), 2u);
  EXPECT_EQ(s.last_solve_links(), 1u);
  EXPECT_EQ(s.capacity(0), 40.0);
  EXPECT_EQ(s.link_load(0), 40.0);
}

TEST(MaxMinSolver, ALinkThatGoesDownAndComesBackRestoresTheRates) {
  // Parking lot of the test above: link 2 (180) goes down, so f0 and f3 drop to 0 and f1, f2 get
  // their links alone: 60 and 120. Restored, the rates are the original 30, 30, 90, 150.
  MaxMinSolver s({60.0, 120.0, 180.0});
  const FlowId f0 = s.add_flow(flow_on({{0}, {1}, {2}}));
  const FlowId f1 = s.add_flow(flow_on({{0}}));
  const FlowId f2 = s.add_flow(flow_on({{1}}));
  const FlowId f3 = s.add_flow(flow_on({{2}}));
  s.solve();
  s.set_capacity(2, 0.0);
  EXPECT_EQ(s.solve(), (std::vector<FlowId>{f0, f1, f2, f3}));
  EXPECT_EQ(s.rate(f0), 0.0);
  EXPECT_EQ(s.rate(f3), 0.0);
  EXPECT_EQ(s.rate(f1), 60.0);
  EXPECT_EQ(s.rate(f2), 120.0);
  s.set_capacity(2, 180.0);
  s.solve();
  EXPECT_EQ(s.rate(f0), 30.0);
  EXPECT_EQ(s.rate(f1), 30.0);
  EXPECT_EQ(s.rate(f2), 90.0);
  EXPECT_EQ(s.rate(f3), 150.0);
}

TEST(MaxMinSolver, RemovingAFlowGivesItsShareBackAndReportsOnlyTheFlowsThatChanged) {
  // Link 0 (100): f1, f2, f3 at 100/3 each. Link 1 (30): f4 alone at 30. Removing f3 gives f1 and
  // f2 50 each; f4 is in another component and is not reported.
  MaxMinSolver s({100.0, 30.0});
  const FlowId f1 = s.add_flow(flow_on({{0}}));
  const FlowId f2 = s.add_flow(flow_on({{0}}));
  const FlowId f3 = s.add_flow(flow_on({{0}}));
  const FlowId f4 = s.add_flow(flow_on({{1}}));
  EXPECT_EQ(s.solve(), (std::vector<FlowId>{f1, f2, f3, f4}));  // all new
  EXPECT_DOUBLE_EQ(s.rate(f1), 100.0 / 3.0);
  s.remove_flow(f3);
  EXPECT_FALSE(s.active(f3));
  EXPECT_EQ(s.num_flows(), 3u);
  EXPECT_EQ(s.solve(), (std::vector<FlowId>{f1, f2}));
  EXPECT_EQ(s.rate(f1), 50.0);
  EXPECT_EQ(s.rate(f2), 50.0);
  EXPECT_EQ(s.rate(f4), 30.0);
}

TEST(MaxMinSolver, ANewFlowIsReportedEvenWhenItsRateIsZero) {
  // Link 0 is down: the new flow's rate is 0, the same as its placeholder before solve(), but the
  // caller has never been told its rate, so it is reported.
  MaxMinSolver s({0.0});
  const FlowId f = s.add_flow(flow_on({{0}}));
  EXPECT_EQ(s.rate(f), 0.0);
  EXPECT_EQ(s.solve(), std::vector<FlowId>{f});
  EXPECT_TRUE(s.solve().empty());  // nothing touched since
  EXPECT_EQ(s.last_solve_flows(), 0u);
}

TEST(MaxMinSolver, FlowIdsOfRemovedFlowsAreReusedMostRecentlyRemovedFirst) {
  MaxMinSolver s({100.0});
  const FlowId a = s.add_flow(flow_on({{0}}));
  const FlowId b = s.add_flow(flow_on({{0}}));
  const FlowId c = s.add_flow(flow_on({{0}}));
  s.remove_flow(a);
  s.remove_flow(c);
  EXPECT_EQ(s.add_flow(flow_on({{0}})), c);
  EXPECT_EQ(s.add_flow(flow_on({{0}})), a);
  EXPECT_EQ(s.add_flow(flow_on({{0}})), 3);  // free list empty: a new id
  EXPECT_EQ(s.flow_id_bound(), 4u);
  s.solve();
  EXPECT_EQ(s.rate(b), 25.0);  // four flows on 100
}

TEST(MaxMinSolver, AddLinkAppendsALinkThatNewFlowsCanUse) {
  // Link 1 (C = 12) added after construction; a flow on it alone gets 12.
  MaxMinSolver s({100.0});
  const LinkId l = s.add_link(12.0);
  EXPECT_EQ(l, 1);
  EXPECT_EQ(s.num_links(), 2u);
  const FlowId f = s.add_flow(flow_on({{l}}));
  s.solve();
  EXPECT_EQ(s.rate(f), 12.0);
}

TEST(MaxMinSolverDeathTest, RemovingAFlowTwiceIsAContractViolation) {
  MaxMinSolver s({100.0});
  const FlowId f = s.add_flow(flow_on({{0}}));
  s.remove_flow(f);
  EXPECT_DEATH(s.remove_flow(f), "active\\(id\\)");
}

// ---- Incremental solution touches only what changed -------------------------------------------

TEST(MaxMinSolver, IncrementalSolveVisitsOnlyTheTouchedComponent) {
  // Component X: links 0, 1 with 3 flows; component Y: links 2, 3, 4 with 5 flows (chained through
  // shared links). Touching Y visits exactly Y's 5 flows and 3 links, X's 3 flows and 2 links for X.
  MaxMinSolver s({10.0, 20.0, 30.0, 40.0, 50.0});
  s.add_flow(flow_on({{0}}));
  s.add_flow(flow_on({{0}, {1}}));
  const FlowId x3 = s.add_flow(flow_on({{1}}));
  s.add_flow(flow_on({{2}}));
  s.add_flow(flow_on({{2}, {3}}));
  s.add_flow(flow_on({{3}}));
  s.add_flow(flow_on({{3}, {4}}));
  const FlowId y5 = s.add_flow(flow_on({{4}}));
  s.solve();
  EXPECT_EQ(s.last_solve_flows(), 8u);  // first solve: everything is new

  s.set_capacity(4, 45.0);
  s.solve();
  EXPECT_EQ(s.last_solve_flows(), 5u);
  EXPECT_EQ(s.last_solve_links(), 3u);

  // Removing a flow of X: X keeps links 0 and 1 and 2 flows. Link 0 (10) is shared by {0} and
  // {0,1}, 5 each; link 1 then carries only the {0,1} flow: load 5.
  s.remove_flow(x3);
  s.solve();
  EXPECT_EQ(s.last_solve_flows(), 2u);
  EXPECT_EQ(s.last_solve_links(), 2u);
  EXPECT_EQ(s.link_load(1), 5.0);

  // A flow across links 1 and 4 bridges X and Y: the solve visits 2 + 5 + 1 flows and 2 + 3 links.
  s.add_flow(flow_on({{1}, {4}}));
  s.solve();
  EXPECT_EQ(s.last_solve_flows(), 8u);
  EXPECT_EQ(s.last_solve_links(), 5u);

  // Removing y5 touches only link 4, but the bridge still joins X and Y: 2 + 4 + 1 flows.
  s.remove_flow(y5);
  s.solve();
  EXPECT_EQ(s.last_solve_flows(), 7u);
  EXPECT_EQ(s.last_solve_links(), 5u);
}

// ---- Randomised comparison with the reference and with the definition ---------------------------

// A random instance family with many ties: capacities often round numbers or 0, counts 1-3, weights
// often 1, some caps, occasional repeated links and empty paths.
class RandomInstances {
 public:
  explicit RandomInstances(uint64_t seed) : rng_(RandomStream::derive(seed, "test.maxmin")) {}

  double capacity() {
    const double u = rng_.uniform01();
    if (u < 0.05) return 0.0;
    if (u < 0.45) return kRound[rng_.uniform_int(4)];
    return 1.0 + 999.0 * rng_.uniform01();
  }

  FlowSpec flow(int num_links) {
    FlowSpec s;
    if (rng_.uniform01() < 0.25) {
      s.rate_cap = rng_.uniform01() < 0.5 ? kRound[rng_.uniform_int(4)] : 1.0 + 199.0 * rng_.uniform01();
    }
    if (rng_.uniform01() < 0.4) s.weight = rng_.uniform01() < 0.5 ? 2.0 : 0.25 + 3.75 * rng_.uniform01();
    if (rng_.uniform01() < 0.03) {
      if (!std::isfinite(s.rate_cap)) s.rate_cap = 5.0;
      return s;  // empty path
    }
    const auto len = 1 + rng_.uniform_int(4);
    for (uint64_t i = 0; i < len; ++i) {
      const auto link = static_cast<LinkId>(rng_.uniform_int(static_cast<uint64_t>(num_links)));
      const auto count = static_cast<int32_t>(1 + rng_.uniform_int(3));
      s.path.push_back({link, count});  // a repeated link is allowed: the counts add
    }
    return s;
  }

  uint64_t uniform_int(uint64_t n) { return rng_.uniform_int(n); }
  double uniform01() { return rng_.uniform01(); }

 private:
  static constexpr double kRound[4] = {10.0, 20.0, 50.0, 100.0};
  RandomStream rng_;
};

// What the test knows about the solver's state, kept independently of it.
struct Mirror {
  std::vector<double> capacities;
  std::map<FlowId, FlowSpec> flows;
  std::vector<FlowId> added;  // since the last solve(); an id may be a reused one
};

// One random mutation of both the solver and the mirror.
void random_operation(RandomInstances& gen, MaxMinSolver& s, Mirror& m) {
  const double u = gen.uniform01();
  const int num_links = static_cast<int>(m.capacities.size());
  if (u < 0.40 || m.flows.empty()) {
    FlowSpec spec = gen.flow(num_links);
    const FlowId id = s.add_flow(spec);
    m.flows[id] = spec;
    m.added.push_back(id);
  } else if (u < 0.70) {
    auto it = m.flows.begin();
    std::advance(it, static_cast<long>(gen.uniform_int(m.flows.size())));
    s.remove_flow(it->first);
    m.flows.erase(it);
  } else if (u < 0.97) {
    const auto l = static_cast<LinkId>(gen.uniform_int(static_cast<uint64_t>(num_links)));
    const double c = gen.capacity();
    s.set_capacity(l, c);
    m.capacities[static_cast<size_t>(l)] = c;
  } else {
    const double c = gen.capacity();
    s.add_link(c);
    m.capacities.push_back(c);
  }
}

TEST(MaxMinSolver, IncrementalSolvesMatchTheReferenceAndTheDefinitionOn500RandomInstances) {
  // 500 instances of 5-30 links and 1-60 initial flows; each runs 8 rounds of 1-5 random
  // add/remove/set_capacity/add_link operations followed by solve(). After every solve the rates
  // of all active flows must equal reference_max_min on the current flow set (1e-9 relative), and
  // both must satisfy the bottleneck characterisation; link loads must be the sum of count * rate;
  // the changed list must be sorted and hold exactly the new flows and those whose rate changed.
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    RandomInstances gen(seed);
    Mirror m;
    const auto num_links = 5 + gen.uniform_int(26);
    for (uint64_t l = 0; l < num_links; ++l) m.capacities.push_back(gen.capacity());
    MaxMinSolver s(m.capacities);
    const auto num_flows = 1 + gen.uniform_int(60);
    for (uint64_t i = 0; i < num_flows; ++i) {
      FlowSpec spec = gen.flow(static_cast<int>(num_links));
      const FlowId id = s.add_flow(spec);
      m.flows[id] = spec;
    }
    std::map<FlowId, double> before;  // rates the caller was told; absent for new flows
    for (int round = 0; round < 8; ++round) {
      if (round > 0) {
        const auto ops = 1 + gen.uniform_int(5);
        for (uint64_t k = 0; k < ops; ++k) random_operation(gen, s, m);
      }
      const std::vector<FlowId> changed = s.solve();
      for (FlowId id : m.added) before.erase(id);  // a reused id is a new flow
      m.added.clear();

      std::vector<FlowId> ids;
      std::vector<FlowSpec> specs;
      for (const auto& [id, spec] : m.flows) {
        ids.push_back(id);
        specs.push_back(spec);
      }
      ASSERT_EQ(s.num_flows(), ids.size());
      const std::vector<double> expected = reference_max_min(m.capacities, specs);
      std::vector<double> actual;
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_TRUE(s.active(ids[i]));
        actual.push_back(s.rate(ids[i]));
        ASSERT_TRUE(close(actual[i], expected[i])) << "flow " << ids[i] << ", round " << round;
      }
      ASSERT_TRUE(is_max_min_fair(m.capacities, specs, actual)) << "solver, round " << round;
      ASSERT_TRUE(is_max_min_fair(m.capacities, specs, expected)) << "reference, round " << round;

      std::vector<double> load(m.capacities.size(), 0.0);
      for (size_t i = 0; i < ids.size(); ++i) {
        for (const LinkUse& use : specs[i].path) load[static_cast<size_t>(use.link)] += use.count * actual[i];
      }
      for (size_t l = 0; l < load.size(); ++l) {
        ASSERT_TRUE(close(s.link_load(static_cast<LinkId>(l)), load[l])) << "link " << l;
      }

      ASSERT_TRUE(std::is_sorted(changed.begin(), changed.end()));
      ASSERT_TRUE(std::adjacent_find(changed.begin(), changed.end()) == changed.end());
      std::vector<FlowId> expected_changed;
      for (size_t i = 0; i < ids.size(); ++i) {
        const auto it = before.find(ids[i]);
        if (it == before.end() || it->second != actual[i]) expected_changed.push_back(ids[i]);
      }
      ASSERT_EQ(changed, expected_changed) << "round " << round;
      before.clear();
      for (size_t i = 0; i < ids.size(); ++i) before[ids[i]] = actual[i];
    }
  }
}

TEST(MaxMinSolver, WithUnitWeightsEveryFlowHasALinkOnWhichItsRateIsExactlyTheLargest) {
  // With w = 1 and no caps a flow's rate is the level at which it froze, bit for bit, and the
  // levels of successive events never decrease (a level recomputed after a freeze is clamped to
  // the current one, since rounding at a tie can put it an ulp below). So the link that froze a
  // flow carries no flow with a larger rate: the bottleneck property holds exactly, with no
  // tolerance. Instances: 200 seeds, 3-12 links of capacity 10, 20, 30 or 60 and 10-40 flows of
  // 1-3 links with counts 1-3, so that many links saturate at equal levels.
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    RandomStream rng = RandomStream::derive(seed, "test.maxmin.exact");
    constexpr double kCaps[4] = {10.0, 20.0, 30.0, 60.0};
    std::vector<double> caps(3 + rng.uniform_int(10));
    for (double& c : caps) c = kCaps[rng.uniform_int(4)];
    MaxMinSolver s(caps);
    std::vector<FlowSpec> specs(10 + rng.uniform_int(31));
    for (FlowSpec& spec : specs) {
      const auto len = 1 + rng.uniform_int(3);
      for (uint64_t i = 0; i < len; ++i) {
        spec.path.push_back({static_cast<LinkId>(rng.uniform_int(caps.size())),
                             static_cast<int32_t>(1 + rng.uniform_int(3))});
      }
      s.add_flow(spec);
    }
    s.solve();
    std::vector<double> max_rate(caps.size(), 0.0);
    for (size_t f = 0; f < specs.size(); ++f) {
      for (const LinkUse& u : specs[f].path) {
        double& m = max_rate[static_cast<size_t>(u.link)];
        m = std::max(m, s.rate(static_cast<FlowId>(f)));
      }
    }
    for (size_t f = 0; f < specs.size(); ++f) {
      bool largest_somewhere = false;
      for (const LinkUse& u : specs[f].path) {
        const double r = s.rate(static_cast<FlowId>(f));
        largest_somewhere = largest_somewhere || r == max_rate[static_cast<size_t>(u.link)];
      }
      ASSERT_TRUE(largest_somewhere) << "flow " << f << " rate " << s.rate(static_cast<FlowId>(f));
    }
  }
}

// ---- Determinism ------------------------------------------------------------------------------

struct Trace {
  std::vector<std::vector<FlowId>> changed;
  std::vector<std::vector<double>> rates;  // indexed by FlowId, NaN for inactive ids
};

// Runs a fixed random operation sequence; solves after every operation or only every `solve_every`.
Trace run_sequence(uint64_t seed, int solve_every) {
  RandomInstances gen(seed);
  Mirror m;
  for (int l = 0; l < 20; ++l) m.capacities.push_back(gen.capacity());
  MaxMinSolver s(m.capacities);
  Trace t;
  for (int op = 1; op <= 400; ++op) {
    random_operation(gen, s, m);
    if (op % solve_every != 0) continue;
    t.changed.push_back(s.solve());
    std::vector<double> r(s.flow_id_bound(), std::numeric_limits<double>::quiet_NaN());
    for (size_t id = 0; id < r.size(); ++id) {
      if (s.active(static_cast<FlowId>(id))) r[id] = s.rate(static_cast<FlowId>(id));
    }
    t.rates.push_back(std::move(r));
  }
  return t;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

TEST(MaxMinSolver, TheSameOperationSequenceGivesBitIdenticalRatesAndChangedLists) {
  // Two independent solvers fed the same 400 operations (40 solves) must agree bit for bit.
  for (uint64_t seed : {7u, 8u, 9u}) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    const Trace a = run_sequence(seed, 10);
    const Trace b = run_sequence(seed, 10);
    ASSERT_EQ(a.changed, b.changed);
    ASSERT_EQ(a.rates.size(), 40u);  // 400 operations / 10
    for (size_t i = 0; i < a.rates.size(); ++i) ASSERT_TRUE(bitwise_equal(a.rates[i], b.rates[i])) << i;
  }
}

TEST(MaxMinSolver, RatesDependOnTheCurrentStateNotOnHowOftenSolveWasCalled) {
  // A component's rates are a function of its flows, links and capacities only: solving after every
  // operation and solving after every 25th give bit-identical rates at the common points (every 25th
  // operation), because components are independent and the event order is a total order.
  for (uint64_t seed : {11u, 12u, 13u}) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    const Trace often = run_sequence(seed, 1);
    const Trace rarely = run_sequence(seed, 25);
    ASSERT_EQ(often.rates.size(), 400u);
    ASSERT_EQ(rarely.rates.size(), 16u);
    for (size_t i = 0; i < rarely.rates.size(); ++i) {
      ASSERT_TRUE(bitwise_equal(often.rates[25 * i + 24], rarely.rates[i]))
          << "after operation " << 25 * (i + 1);
    }
  }
}

}  // namespace
}  // namespace orrery::net
