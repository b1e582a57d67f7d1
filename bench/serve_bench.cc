// Serving simulator speed (docs/serving.md, "Speed"): vLLM on Llama-2-7B / A100-80GB with the roofline
// model, on
//   1. 10,000 requests of the synthetic workload fitted to the Azure conversation trace (target < 0.1 s;
//      Vidur takes about 38 s for this, so >= 300x);
//   2. the first 10,000 requests of the real Azure conversation trace, when
//      $ORRERY_SHARED_DIR/data/traces/AzureLLMInferenceTrace_conv.csv exists;
//   3. 1,000,000 synthetic requests (target < 10 s, peak RSS < 1 GB).
// Prints the medians (wall and thread CPU time) of `--reps` runs (default 5; 3 for the 1M case) and the process's peak RSS
// (getrusage ru_maxrss) after each case. Usage: serve_bench [--reps N] [--skip-1m]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/catalog_loader.h"
#include "io/trace_reader.h"
#include "serve/exec_model.h"
#include "serve/scheduler.h"
#include "serve/simulator.h"

using namespace orrery;

namespace {

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

// CPU time of this thread (seconds): unlike wall time, not inflated when other processes share the cores.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Case {
  std::string name;
  std::function<std::unique_ptr<serve::RequestSource>()> source;
  int reps;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  bool skip_1m = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--skip-1m") == 0) skip_1m = true;
  }
  io::CatalogOptions co;
  co.use_environment = false;
  const io::Catalog cat = io::load_catalog(co);
  const model::ModelSpec model = cat.model("llama2-7b", {});
  const hw::GpuSpec& gpu = cat.hw.get_gpu("a100-sxm-80gb", {});
  serve::ReplicaSpec spec;
  spec.model = &model;
  spec.gpu = &gpu;
  const serve::MemoryPlan plan = serve::plan_memory(spec);

  std::vector<Case> cases;
  cases.push_back({"azure-conv synthetic, 10k requests", [] { return serve::default_workload(0, 10000); }, reps});
  const char* shared = std::getenv("ORRERY_SHARED_DIR");
  const std::string conv = std::string(shared ? shared : "../shared") + "/data/traces/AzureLLMInferenceTrace_conv.csv";
  if (std::filesystem::exists(conv)) {
    cases.push_back({"azure-conv trace, first 10k requests",
                     [conv] {
                       return std::unique_ptr<serve::RequestSource>(
                           std::make_unique<serve::TakeSource>(io::open_trace(conv), 10000));
                     },
                     reps});
  } else {
    std::printf("(no %s: real-trace case skipped)\n", conv.c_str());
  }
  if (!skip_1m) {
    cases.push_back({"azure-conv synthetic, 1M requests", [] { return serve::default_workload(0, 1000000); },
                     std::min(reps, 3)});
  }

  std::printf("%-40s %10s %10s %10s %10s %10s %12s\n", "case", "completed", "wall_s", "cpu_s", "setup_s", "iters",
              "peak_rss_MB");
  for (const Case& c : cases) {
    std::vector<double> run_s, setup_s, cpu_s;
    serve::SimResult last;
    for (int r = 0; r < c.reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      serve::ExecContext ctx;
      ctx.replica = &spec;
      const auto exec = serve::make_exec_model("roofline", ctx);
      const auto sched = serve::make_scheduler("vllm", serve::SchedulerConfig{});
      auto src = c.source();
      const auto t1 = std::chrono::steady_clock::now();
      const double c1 = cpu_seconds();
      last = serve::simulate(*src, spec, plan, *sched, *exec);
      cpu_s.push_back(cpu_seconds() - c1);
      const auto t2 = std::chrono::steady_clock::now();
      setup_s.push_back(std::chrono::duration<double>(t1 - t0).count());
      run_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    std::sort(run_s.begin(), run_s.end());
    std::sort(setup_s.begin(), setup_s.end());
    std::sort(cpu_s.begin(), cpu_s.end());
    std::printf("%-40s %10lld %10.4f %10.4f %10.4f %10lld %12.1f\n", c.name.c_str(), static_cast<long long>(last.completed),
                run_s[run_s.size() / 2], cpu_s[cpu_s.size() / 2], setup_s[setup_s.size() / 2],
                static_cast<long long>(last.iterations),
                peak_rss_mb());
  }
  return 0;
}
