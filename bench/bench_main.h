// main() of the Google Benchmark programs that time the orrery binary's work: the binary's heap settings
// first (src/cli/main.cc, core/heap.h), so that the figures are the CLI's, then Google Benchmark's usual main.
#pragma once

#include <benchmark/benchmark.h>

#include "core/heap.h"

#define ORRERY_BENCHMARK_MAIN()                                            \
  int main(int argc, char** argv) {                                        \
    orrery::keep_freed_memory();                                           \
    benchmark::Initialize(&argc, argv);                                    \
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;      \
    benchmark::RunSpecifiedBenchmarks();                                   \
    benchmark::Shutdown();                                                 \
    return 0;                                                              \
  }
