// End-to-end replay of the serving runs in ../shared/data/serving-runs (issue 5, "Fidelity: end-to-end"):
// every workload (OPT-13B on one A100-80GB, DistServe's ShareGPT request streams) replays with the
// vLLM scheduler and the settings of the runs (data README: gpu_memory_utilization 0.95, block size 16,
// max_num_seqs 1024, max_num_batched_tokens 16384). The measured latencies of these runs are withheld
// (README: "kept back to check simulators against"), so the test prints the predicted table and checks
// what must hold without them:
//   - every request is served (max prompt + output is 2045 <= OPT's 2048 context; none is rejected);
//   - for the vllm-* runs (which ran on this very setup, one A100 with vLLM, at 1-4 req/s): the replica
//     keeps up, the last completion coming within 10% + 30 s of the last arrival at N / rate. The
//     distserve-* streams ran on 3-4 GPUs (prefill and decode instances); on one vLLM GPU they are a
//     what-if and rates above ~4 req/s overload it, which the table shows (no stability check there);
//   - TTFT p50 is above one prefill of the median prompt (the roofline cannot beat its own prefill).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/catalog_loader.h"
#include "serve/exec_model.h"
#include "serve/scheduler.h"
#include "serve/serving_run_reader.h"
#include "serve/simulator.h"

namespace orrery::serve {
namespace {

TEST(ServingRuns, EveryWorkloadReplaysOnOpt13bWithVllm) {
  const char* shared = std::getenv("ORRERY_SHARED_DIR");
  const std::filesystem::path dir = std::filesystem::path(shared ? shared : "../shared") / "data" / "serving-runs";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir << " (set ORRERY_SHARED_DIR)";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".csv") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 37u);

  io::CatalogOptions co;
  co.use_environment = false;
  const io::Catalog cat = io::load_catalog(co);
  const model::ModelSpec opt = cat.model("opt-13b", {});
  ReplicaSpec spec;
  spec.model = &opt;
  spec.gpu = &cat.hw.get_gpu("a100-sxm-80gb", {});
  spec.gpu_memory_utilization = 0.95;
  spec.workspace_tokens = 16384;
  spec.workspace_seqs = 1024;
  const MemoryPlan plan = plan_memory(spec);
  ASSERT_TRUE(plan.fits);
  ExecContext ctx;
  ctx.replica = &spec;
  const auto exec = make_exec_model("roofline", ctx);
  SchedulerConfig sc;
  sc.max_seqs = 1024;
  sc.max_batched_tokens = 16384;
  BatchShape one;
  one.add(512, 512, true, true);
  const double prefill_512 = exec->iteration_time(one).to_seconds();

  std::cout << fmt::format("KV capacity {} tokens; one 512-token prefill {:.1f} ms\n", plan.kv_tokens, prefill_512 * 1e3);
  std::cout << fmt::format("{:<32} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}\n", "workload", "N", "rate",
                           "req/s", "ttft_p50", "ttft_p90", "tpot_p50", "tpot_p90", "preem");
  for (const auto& f : files) {
    ServingRunReader src(std::make_unique<std::ifstream>(f), f.string());
    const auto sched = make_scheduler("vllm", sc);
    const SimResult r = simulate(src, spec, plan, *sched, *exec);
    const std::string name = f.stem().string();
    // <engine>[-layout]-<N>-<rate>
    const double rate = std::stod(name.substr(name.rfind('-') + 1));
    const std::string rest = name.substr(0, name.rfind('-'));
    const int64_t n = std::stoll(rest.substr(rest.rfind('-') + 1));
    std::cout << fmt::format("{:<32} {:>5} {:>6.1f} {:>9.3f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>6}\n", name, n, rate,
                             r.request_throughput, r.ttft.quantile(0.5) * 1e3, r.ttft.quantile(0.9) * 1e3,
                             r.tpot.quantile(0.5) * 1e3, r.tpot.quantile(0.9) * 1e3, r.counters.preemptions);
    EXPECT_EQ(r.completed, n) << name;
    EXPECT_EQ(r.rejected_context + r.rejected_kv, 0) << name;
    const double span = static_cast<double>(n) / rate;  // the last arrival is at N / rate
    if (name.rfind("vllm-", 0) == 0) {
      EXPECT_LE(r.duration_s, 1.1 * span + 30.0) << name;
    }
    EXPECT_GT(r.ttft.quantile(0.5), 0.5 * prefill_512) << name;
  }
}

}  // namespace
}  // namespace orrery::serve
