// Max-min solver throughput (net/maxmin.h) on three shapes of network.
//
//   Churn4096DisjointFlows: 4096 flows, each on 2-3 private links; every 8th flow also crosses one
//       of 64 shared links, so the network splits into 64 components of 8 flows plus 3584 singleton
//       components. Each iteration removes one flow (drawn from a pre-drawn table), adds it back
//       (its FlowId is reused) and solves: the incremental case of a flow-level simulation where
//       one transfer ends and the next starts. items_per_second = solves per second.
//   Churn1024FlowsSharedCore: 16 racks, each with a NIC transmit and receive link (50 GB/s) and a
//       rack uplink and downlink oversubscribed 4:1 (12.5 GB/s for four NICs' worth): 64 links;
//       1024 flows between random rack pairs (tx, up, down, rx), all in one component. Each
//       iteration removes one flow, adds one between a new random pair and solves, so every solve
//       re-runs the whole component. items_per_second = solves per second.
//   FullSolve100kFlowsFatTree: a k = 32 fat tree (Al-Fares et al., SIGCOMM 2008): 8192 hosts,
//       512 edge, 512 aggregation and 256 core switches, every cable two directed links of
//       100 GB/s (49,152 links, full bisection); 100,000 flows between random host
//       pairs, each on one random ECMP path (2, 4 or 6 links). Each iteration marks every link
//       dirty (untimed) and solves from scratch. items_per_second = flows solved per second.
//
// Random choices come from a fixed seed and are drawn before timing starts.
//
// Run: maxmin_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "net/maxmin.h"

namespace orrery::net {
namespace {

constexpr uint64_t kSeed = 42;
constexpr size_t kTableSize = size_t{1} << 16;

FlowSpec on_links(std::vector<LinkUse> path) {
  FlowSpec s;
  s.path = std::move(path);
  return s;
}

void BM_Churn4096DisjointFlows(benchmark::State& state) {
  constexpr int kFlows = 4096;
  constexpr int kShared = 64;
  RandomStream rng = RandomStream::derive(kSeed, "bench.maxmin.churn_disjoint");
  MaxMinSolver solver;
  std::vector<LinkId> shared;
  for (int i = 0; i < kShared; ++i) shared.push_back(solver.add_link(25e9));
  std::vector<FlowSpec> specs;
  std::vector<FlowId> ids;
  for (int f = 0; f < kFlows; ++f) {
    std::vector<LinkUse> path;
    const int num_private = 2 + static_cast<int>(rng.uniform_int(2));
    for (int k = 0; k < num_private; ++k) path.push_back({solver.add_link(50e9 * (1.0 + rng.uniform01()))});
    if (f % 8 == 0) path.push_back({shared[static_cast<size_t>(f / 8 % kShared)]});
    specs.push_back(on_links(path));
    ids.push_back(solver.add_flow(specs.back()));
  }
  solver.solve();
  std::vector<uint32_t> victims(kTableSize);
  for (uint32_t& v : victims) v = static_cast<uint32_t>(rng.uniform_int(kFlows));

  size_t next = 0;
  size_t visited = 0;
  for (auto _ : state) {
    const uint32_t v = victims[next++ & (kTableSize - 1)];
    solver.remove_flow(ids[v]);
    ids[v] = solver.add_flow(specs[v]);
    benchmark::DoNotOptimize(solver.solve().data());
    visited += solver.last_solve_flows();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["flows_per_solve"] =
      benchmark::Counter(static_cast<double>(visited) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_Churn4096DisjointFlows);

void BM_Churn1024FlowsSharedCore(benchmark::State& state) {
  constexpr int kRacks = 16;
  constexpr int kFlows = 1024;
  RandomStream rng = RandomStream::derive(kSeed, "bench.maxmin.churn_shared");
  MaxMinSolver solver;
  std::vector<LinkId> tx, rx, up, down;
  for (int r = 0; r < kRacks; ++r) {
    tx.push_back(solver.add_link(50e9));
    rx.push_back(solver.add_link(50e9));
    up.push_back(solver.add_link(12.5e9));
    down.push_back(solver.add_link(12.5e9));
  }
  auto random_flow = [&] {
    const auto s = static_cast<size_t>(rng.uniform_int(kRacks));
    auto d = static_cast<size_t>(rng.uniform_int(kRacks - 1));
    if (d >= s) ++d;
    return on_links({{tx[s]}, {up[s]}, {down[d]}, {rx[d]}});
  };
  std::vector<FlowId> ids;
  for (int f = 0; f < kFlows; ++f) ids.push_back(solver.add_flow(random_flow()));
  solver.solve();
  std::vector<FlowSpec> arrivals;
  std::vector<uint32_t> victims;
  for (size_t i = 0; i < kTableSize; ++i) {
    arrivals.push_back(random_flow());
    victims.push_back(static_cast<uint32_t>(rng.uniform_int(kFlows)));
  }

  size_t next = 0;
  size_t visited = 0;
  for (auto _ : state) {
    const size_t i = next++ & (kTableSize - 1);
    solver.remove_flow(ids[victims[i]]);
    ids[victims[i]] = solver.add_flow(arrivals[i]);
    benchmark::DoNotOptimize(solver.solve().data());
    visited += solver.last_solve_flows();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["flows_per_solve"] =
      benchmark::Counter(static_cast<double>(visited) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_Churn1024FlowsSharedCore);

// A k-ary fat tree's directed links and random ECMP paths between hosts.
class FatTree {
 public:
  FatTree(MaxMinSolver& solver, int k) : k_(k), half_(k / 2) {
    const int hosts = k * k * k / 4;
    const int edges = k * half_;  // k pods of k/2 edge switches; as many aggregation switches
    for (int h = 0; h < hosts; ++h) {
      host_up_.push_back(solver.add_link(100e9));
      host_down_.push_back(solver.add_link(100e9));
    }
    // Edge e (pod e / half_) connects to every aggregation switch of its pod.
    for (int e = 0; e < edges; ++e) {
      for (int a = 0; a < half_; ++a) {
        edge_up_.push_back(solver.add_link(100e9));
        edge_down_.push_back(solver.add_link(100e9));
      }
    }
    // Aggregation switch a connects to k/2 core switches.
    for (int a = 0; a < edges; ++a) {
      for (int c = 0; c < half_; ++c) {
        agg_up_.push_back(solver.add_link(100e9));
        agg_down_.push_back(solver.add_link(100e9));
      }
    }
  }

  std::vector<LinkUse> path(int src, int dst, RandomStream& rng) const {
    const int src_edge = src / half_;
    const int dst_edge = dst / half_;
    std::vector<LinkUse> p{{host_up_[static_cast<size_t>(src)]}};
    if (src_edge != dst_edge) {
      const int a = static_cast<int>(rng.uniform_int(static_cast<uint64_t>(half_)));  // agg within pod
      p.push_back({edge_up_[index(src_edge, a)]});
      if (src_edge / half_ != dst_edge / half_) {
        const int c = static_cast<int>(rng.uniform_int(static_cast<uint64_t>(half_)));  // core via agg a
        const int src_agg = src_edge / half_ * half_ + a;
        const int dst_agg = dst_edge / half_ * half_ + a;  // core switches of group a reach agg a of each pod
        p.push_back({agg_up_[index(src_agg, c)]});
        p.push_back({agg_down_[index(dst_agg, c)]});
      }
      p.push_back({edge_down_[index(dst_edge, a)]});
    }
    p.push_back({host_down_[static_cast<size_t>(dst)]});
    return p;
  }

  int hosts() const { return k_ * k_ * k_ / 4; }

 private:
  size_t index(int sw, int port) const { return static_cast<size_t>(sw * half_ + port); }
  int k_;
  int half_;
  std::vector<LinkId> host_up_, host_down_, edge_up_, edge_down_, agg_up_, agg_down_;
};

void BM_FullSolve100kFlowsFatTree(benchmark::State& state) {
  constexpr int kFlows = 100'000;
  RandomStream rng = RandomStream::derive(kSeed, "bench.maxmin.fat_tree");
  MaxMinSolver solver;
  const FatTree tree(solver, 32);
  for (int f = 0; f < kFlows; ++f) {
    const auto src = static_cast<int>(rng.uniform_int(static_cast<uint64_t>(tree.hosts())));
    auto dst = static_cast<int>(rng.uniform_int(static_cast<uint64_t>(tree.hosts() - 1)));
    if (dst >= src) ++dst;
    solver.add_flow(on_links(tree.path(src, dst, rng)));
  }
  solver.solve();
  const auto num_links = static_cast<LinkId>(solver.num_links());
  for (auto _ : state) {
    state.PauseTiming();
    for (LinkId l = 0; l < num_links; ++l) solver.set_capacity(l, solver.capacity(l));
    state.ResumeTiming();
    benchmark::DoNotOptimize(solver.solve().data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kFlows);
  state.counters["links"] = benchmark::Counter(static_cast<double>(solver.num_links()));
  state.counters["flows_per_solve"] = benchmark::Counter(static_cast<double>(solver.last_solve_flows()));
}
BENCHMARK(BM_FullSolve100kFlowsFatTree)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace orrery::net

BENCHMARK_MAIN();
