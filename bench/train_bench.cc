// Speed of the training simulator (issue 6): one step of Llama-3.1-405B on 16,384 H100 (TP8, PP16,
// DP128, seq 8192, global batch 2048 sequences = 16M tokens, mbs 1: 16 micro-batches per pipeline,
// interleaving off and on; with the CLI's default caching-allocator trace in the memory, and without),
// and the memory-only evaluation a planner uses as its first filter.
// Target: a step under 1 s. Figures: docs/training.md and docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include "bench_main.h"
#include "compute/compute_model.h"
#include "io/catalog_loader.h"
#include "net/topology_builders.h"
#include "train/train.h"

namespace {

using namespace orrery;

struct Setup {
  io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  // The catalog's 126 layers, on 16 stages as 7 + 14 x 8 + 7 (Llama 3 paper, sec. 3.3.2).
  model::ModelSpec model = catalog.model("llama3.1-405b", {});
  // Interleaving needs pp * vp to divide the layers: a 128-layer variant for the vp = 2 case.
  model::ModelSpec model128 = [this] {
    model::ModelSpec m = model;
    m.layers = 128;
    return m;
  }();
  const hw::GpuSpec& gpu = catalog.hw.get_gpu("h100-sxm", {});
  train::ClusterSpec cluster = train::ClusterSpec::from_catalog(gpu, catalog.hw.find_node("dgx-h100"));
  compute::ComputeModel cm{gpu};
  train::Plan plan() const {
    train::Plan p;
    p.tp = 8;
    p.pp = 16;
    p.dp = 128;
    p.seq = 8192;
    p.gbs = 2048;
    p.mbs = 1;
    p.sp = true;
    p.sharding = train::Sharding::kZero1;
    p.first_stage_layers = 7;
    p.last_stage_layers = 7;
    p.allocator = train::AllocatorMode::kClassic;  // the CLI's default: the memory traces the allocator
    return p;
  }
};

const Setup& setup() {
  static const Setup s;
  return s;
}

void BM_Llama405bStep(benchmark::State& state) {
  const Setup& s = setup();
  train::Plan p = s.plan();
  if (state.range(1) == 0) p.allocator = train::AllocatorMode::kNone;
  const model::ModelSpec* model = &s.model;
  if (state.range(0) > 1) {
    p.schedule = train::Schedule::kInterleaved;
    p.vp = state.range(0);
    p.first_stage_layers = 0;
    p.last_stage_layers = 0;
    model = &s.model128;
  }
  if (!train::validate_plan(*model, p, p.gpus(), s.gpu).empty()) {
    state.SkipWithError("invalid plan");
    return;
  }
  double step = 0.0;
  for (auto _ : state) {
    const train::TrainResult r = train::evaluate(*model, p, s.cluster, s.cm);
    step = r.step.step_time.to_seconds();
    benchmark::DoNotOptimize(step);
  }
  state.counters["simulated_step_s"] = step;
  state.counters["gpus"] = static_cast<double>(p.gpus());
}
BENCHMARK(BM_Llama405bStep)
    ->ArgNames({"vp", "allocator"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond);

void BM_Llama405bMemoryOnly(benchmark::State& state) {
  const Setup& s = setup();
  train::Plan p = s.plan();
  p.allocator = train::AllocatorMode::kNone;  // as the planner's filter computes it
  train::EvaluateOptions o;
  o.simulate = false;
  for (auto _ : state) {
    const train::TrainResult r = train::evaluate(s.model, p, s.cluster, s.cm, o);
    benchmark::DoNotOptimize(r.memory.peak);
  }
}
BENCHMARK(BM_Llama405bMemoryOnly)->Unit(benchmark::kMicrosecond);

// Flow-level communication (train/flow_comm.h): DeepSeek-V3 on 512 H100 (64 dgx-h100 in a 2-tier
// rail-optimized fat tree with leaf oversubscription 1 or 4), tp 8, ep 64, gbs 512, seq 4096; each
// iteration builds its FlowComm afresh, so every distinct collective is simulated again.
void BM_DeepSeekV3FlowComm(benchmark::State& state) {
  const Setup& s = setup();
  static const model::ModelSpec model = s.catalog.model("deepseek-v3", {});
  net::FabricOptions f;
  f.oversubscription = static_cast<double>(state.range(0));
  const hw::NodeSpec* node = s.catalog.hw.find_node("dgx-h100");
  const net::Topology topo = net::from_catalog(*node, s.gpu, 64, f);
  train::Plan p;
  p.tp = 8;
  p.ep = 64;
  p.dp = 64;
  p.gbs = 512;
  p.seq = 4096;
  p.sp = true;
  p.sharding = train::Sharding::kZero1;
  p.recompute = train::Recompute::kFull;
  if (!train::validate_plan(model, p, p.gpus(), s.gpu).empty()) {
    state.SkipWithError("invalid plan");
    return;
  }
  train::EvaluateOptions o;
  o.topology = &topo;
  double step = 0.0;
  for (auto _ : state) {
    const train::TrainResult r = train::evaluate(model, p, s.cluster, s.cm, o);
    step = r.step.step_time.to_seconds();
    benchmark::DoNotOptimize(step);
  }
  state.counters["simulated_step_s"] = step;
}
BENCHMARK(BM_DeepSeekV3FlowComm)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ValidatePlan(benchmark::State& state) {
  const Setup& s = setup();
  const train::Plan p = s.plan();
  for (auto _ : state) benchmark::DoNotOptimize(train::validate_plan(s.model, p, 16384, s.gpu));
}
BENCHMARK(BM_ValidatePlan);

}  // namespace

ORRERY_BENCHMARK_MAIN()
