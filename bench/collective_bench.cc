// Speed of the flow-level collective simulation (issue: network and collectives).
//   - 64 MiB ring all-reduce over 4,096 GPUs on the 2-level topology of collectives.md (8 GPUs per
//     node at 400 GB/s, 936 ns; 50 GB/s per GPU between nodes, 2 us): target < 1 s on one core
//     (ASTRA-sim analytical backend: ~110 s).
//   - 64 MiB all-to-all over 1,024 GPUs: target < 2 s (ASTRA-sim: 208 s).
// Also how the cost grows with ranks and message size, in symmetric and per-rank modes.
// Each benchmark reports flows and events per run as counters; peak RSS is printed at exit.
#include <sys/resource.h>

#include <cstdio>

#include <benchmark/benchmark.h>

#include "coll/executor.h"
#include "coll/topology_paths.h"
#include "net/symmetry.h"
#include "net/topology_builders.h"

namespace {

using namespace orrery;

net::Topology reference_topology(int32_t gpus) {
  net::TwoLevelSpec s;
  s.machines = gpus / 8;
  s.gpus_per_machine = 8;
  s.scaleup_bandwidth = Bandwidth(400e9);
  s.scaleup_latency = Time::ns(936);
  s.network_bandwidth = Bandwidth(50e9);
  s.network_latency = Time::us(2);
  return net::two_level(s);
}

void run(benchmark::State& state, coll::Op op, coll::Algorithm algo, bool symmetric) {
  const auto gpus = static_cast<int32_t>(state.range(0));
  const Bytes size = Bytes::MiB(state.range(1));
  const net::Topology topo = reference_topology(gpus);
  const auto orbits = net::find_machine_symmetry(topo);
  coll::ProgramOptions o;
  o.ranks_per_node = 8;
  o.channels = 8;
  coll::ExecutionStats stats;
  for (auto _ : state) {
    coll::TopologyPaths paths(topo);
    des::Engine engine;
    net::FlowNetwork network(engine, paths.capacities());
    auto program = coll::make_program(op, algo, gpus, size, o);
    stats = symmetric ? coll::execute_symmetric(*program, engine, network, paths, *orbits).value()
                      : coll::execute(*program, engine, network, paths);
    benchmark::DoNotOptimize(stats.time);
  }
  state.counters["sim_time_ms"] = stats.time.to_ms();
  state.counters["flows"] = static_cast<double>(stats.messages);
  state.counters["events"] = static_cast<double>(stats.events);
}

void BM_RingAllReduceSymmetric(benchmark::State& s) { run(s, coll::Op::kAllReduce, coll::Algorithm::kRing, true); }
void BM_RingAllReducePerRank(benchmark::State& s) { run(s, coll::Op::kAllReduce, coll::Algorithm::kRing, false); }
void BM_AllToAllSymmetric(benchmark::State& s) { run(s, coll::Op::kAllToAll, coll::Algorithm::kDirect, true); }
void BM_AllToAllPerRank(benchmark::State& s) { run(s, coll::Op::kAllToAll, coll::Algorithm::kDirect, false); }

// NVLS (in-switch) all-reduce over one NVLink domain: 8 GPUs (a DGX H100, 450 GB/s per GPU) or 72 (a
// GB200 NVL72 rack: 18 trays of 4 at 900 GB/s), 128 KiB chunks as NCCL's NVLS uses, per rank (the
// program is not shift-symmetric). Args: GPUs, MiB.
void BM_NvlsAllReduce(benchmark::State& state) {
  const auto gpus = static_cast<int32_t>(state.range(0));
  const Bytes size = Bytes::MiB(state.range(1));
  net::FatTreeSpec f;
  f.gpus_per_machine = gpus == 72 ? 4 : 8;
  f.machines = gpus / f.gpus_per_machine;
  f.scaleup_domain_machines = f.machines;
  f.scaleup_bandwidth = Bandwidth(gpus == 72 ? 900e9 : 450e9);
  f.pcie_bandwidth = Bandwidth(64e9);
  f.nic_bandwidth = Bandwidth(50e9);
  const net::Topology topo = net::fat_tree(f);
  coll::ProgramOptions o;
  o.chunk = Bytes::KiB(128);
  coll::ExecutionStats stats;
  for (auto _ : state) {
    coll::TopologyPaths paths(topo);
    des::Engine engine;
    net::FlowNetwork network(engine, paths.capacities());
    auto program = coll::make_program(coll::Op::kAllReduce, coll::Algorithm::kNvls, gpus, size, o);
    stats = coll::execute(*program, engine, network, paths);
    benchmark::DoNotOptimize(stats.time);
  }
  state.counters["sim_time_ms"] = stats.time.to_ms();
  state.counters["flows"] = static_cast<double>(stats.messages);
  state.counters["events"] = static_cast<double>(stats.events);
}
BENCHMARK(BM_NvlsAllReduce)->Args({8, 1024})->Args({72, 64})->Args({72, 1024})->Unit(benchmark::kMillisecond);

// The targets.
BENCHMARK(BM_RingAllReduceSymmetric)->Args({4096, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllToAllSymmetric)->Args({1024, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllToAllPerRank)->Args({1024, 64})->Unit(benchmark::kMillisecond)->Iterations(1);
// Growth with ranks (64 MiB) and with size (1,024 GPUs).
BENCHMARK(BM_RingAllReduceSymmetric)->Args({512, 64})->Args({1024, 64})->Args({2048, 64})->Args({8192, 64})
    ->Args({16384, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RingAllReduceSymmetric)->Args({1024, 1})->Args({1024, 16})->Args({1024, 256})->Args({1024, 1024})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RingAllReducePerRank)->Args({256, 64})->Args({512, 64})->Args({1024, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllToAllSymmetric)->Args({256, 64})->Args({512, 64})->Args({2048, 64})->Args({4096, 64})
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS of the whole benchmark process: %.1f MiB\n", static_cast<double>(ru.ru_maxrss) / 1024.0);
  return 0;
}
