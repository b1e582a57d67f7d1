// Speed of the training planner (issue 6, "Speed"): the full search for Llama-3-70B (catalog
// llama3-70b) on 1,024 H100 (h100-sxm in dgx-h100 nodes), seq 8192, global batch 1,024 sequences,
// default search space and memory budget (the GPU's 80 GiB). Target: under 10 s wall on the 2-core
// development machine. Args: threads, the CP range searched, pruning on/off, and the caching allocator
// (1: classic, the CLI's default, whose reservation simulated plans add to their memory; 0: none). Wall time (UseRealTime), one planner run per iteration.
// Counters: candidates enumerated / valid / within the budget / simulated / skipped by the bound.
// Figures: docs/planner.md and docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string_view>

#include "bench_main.h"
#include "compute/compute_model.h"
#include "io/catalog_loader.h"
#include "train/planner.h"

namespace {

using namespace orrery;

struct Setup {
  io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  model::ModelSpec model = catalog.model("llama3-70b", {});
  const hw::GpuSpec& gpu = catalog.hw.get_gpu("h100-sxm", {});
  train::ClusterSpec cluster = train::ClusterSpec::from_catalog(gpu, catalog.hw.find_node("dgx-h100"));
  compute::ComputeModel cm{gpu};
  train::PlannerOptions options(int threads) const {
    train::PlannerOptions o;
    o.gpus = 1024;
    o.seq = 8192;
    o.gbs = 1024;
    o.top_k = 10;
    o.threads = threads;
    return o;
  }
};

const Setup& setup() {
  static const Setup s;
  return s;
}

void BM_PlanLlama3_70bOn1024H100(benchmark::State& state) {
  const Setup& s = setup();
  train::PlannerOptions o = s.options(static_cast<int>(state.range(0)));
  o.space.max_cp = state.range(1);
  o.prune = state.range(2) != 0;
  o.base.allocator = state.range(3) != 0 ? train::AllocatorMode::kClassic : train::AllocatorMode::kNone;
  // Wall time of the two phases, from the progress callback (called on this thread).
  using Clock = std::chrono::steady_clock;
  Clock::time_point start, simulate_start;
  o.progress = [&](std::string_view phase, uint64_t done, uint64_t) {
    if (phase == "simulate" && done == 0) simulate_start = Clock::now();
  };
  train::PlannerResult r;
  double filter_s = 0.0, simulate_s = 0.0;
  for (auto _ : state) {
    start = Clock::now();
    r = train::plan_training(s.model, s.cluster, s.cm, o);
    benchmark::DoNotOptimize(r.counts.simulated);
    filter_s = std::chrono::duration<double>(simulate_start - start).count();
    simulate_s = std::chrono::duration<double>(Clock::now() - simulate_start).count();
  }
  state.counters["filter_s"] = filter_s;
  state.counters["simulate_s"] = simulate_s;
  state.counters["enumerated"] = static_cast<double>(r.counts.enumerated);
  state.counters["valid"] = static_cast<double>(r.counts.enumerated - r.counts.invalid);
  state.counters["fits"] = static_cast<double>(r.counts.fits);
  state.counters["simulated"] = static_cast<double>(r.counts.simulated);
  state.counters["pruned"] = static_cast<double>(r.counts.pruned);
  state.counters["bound_violations"] = static_cast<double>(r.bound_violations);
  state.counters["best_tok_s_gpu"] = r.top.empty() ? 0.0 : r.top.front().tokens_per_s_per_gpu;
}
BENCHMARK(BM_PlanLlama3_70bOn1024H100)
    ->ArgNames({"threads", "max_cp", "prune", "allocator"})
    ->Args({1, 1, 1, 1})
    ->Args({2, 1, 1, 1})
    ->Args({1, 8, 1, 1})
    ->Args({2, 8, 1, 1})
    ->Args({2, 8, 1, 0})
    ->Args({2, 1, 0, 1})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

}  // namespace

ORRERY_BENCHMARK_MAIN()
