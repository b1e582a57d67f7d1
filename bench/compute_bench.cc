// Cost of one compute-model query (compute/compute_model.h): the training planner calls op() and
// gemm() millions of times, so they must stay allocation-free and cheap.
//
// Variants: gemm() on a large (compute-bound, 36 tile/split-K candidates) and a skinny (decode)
// shape on an A100 spec; attention() over a batch of 64 decodes; linear_layer_ops() of Llama-2-7B
// (allocates its result vector). Shapes cycle through 64 token counts so the branch predictor does not
// see one constant input.
//
// Run: compute_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "compute/compute_model.h"

namespace orrery::compute {
namespace {

hw::GpuSpec a100() {
  hw::GpuSpec g;
  g.name = "a100-sxm-80gb";
  g.architecture = "ampere";
  g.memory_bandwidth = Bandwidth(2039e9);
  g.peak_flops[static_cast<size_t>(hw::DType::kFp16)] = FlopRate(312e12);
  return g;
}

void BM_GemmLarge(benchmark::State& state) {
  const hw::GpuSpec gpu = a100();
  const ComputeModel cm(gpu);
  int64_t i = 0;
  for (auto _ : state) {
    const double m = static_cast<double>(1024 + 64 * (i++ & 63));
    benchmark::DoNotOptimize(cm.gemm({m, 12288, 4096, 1}, hw::DType::kFp16));
  }
}
BENCHMARK(BM_GemmLarge);

void BM_GemmDecode(benchmark::State& state) {
  const hw::GpuSpec gpu = a100();
  const ComputeModel cm(gpu);
  int64_t i = 0;
  for (auto _ : state) {
    const double m = static_cast<double>(1 + (i++ & 63));
    benchmark::DoNotOptimize(cm.gemm({m, 12288, 4096, 1}, hw::DType::kFp16));
  }
}
BENCHMARK(BM_GemmDecode);

void BM_AttentionDecodeBatch64(benchmark::State& state) {
  const hw::GpuSpec gpu = a100();
  const ComputeModel cm(gpu);
  const std::vector<AttentionSeq> seqs(64, AttentionSeq{1, 2048});
  const AttentionHeads heads{32, 32, 128, 128, 0, true};
  for (auto _ : state) {
    benchmark::DoNotOptimize(cm.attention(seqs, heads, hw::DType::kFp16, Pass::kForward));
  }
}
BENCHMARK(BM_AttentionDecodeBatch64);

void BM_LinearLayerOpsLlama2(benchmark::State& state) {
  const hw::GpuSpec gpu = a100();
  const ComputeModel cm(gpu);
  const model::ModelSpec spec = model::ModelSpec::llama({32, 4096, 32, 32, 11008, 32000, 4096}, "llama2-7b");
  int64_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cm.linear_layer_ops(spec, 1 + 8 * (i++ & 63), 1, hw::DType::kFp16));
  }
}
BENCHMARK(BM_LinearLayerOpsLlama2);

}  // namespace
}  // namespace orrery::compute
BENCHMARK_MAIN();
