// Serving cluster speed (docs/serving.md, "Cluster"): 8 replicas of Llama-2-7B / A100-80GB (vLLM,
// roofline), 100,000 requests of the Azure-conversation-shaped workload at 8x its rate (each replica sees
// about the single-replica default load), for every router, and a 4:4 disaggregated cluster (KV over
// the DGX A100's NVLink and HDR InfiniBand). Prints the median wall and thread CPU time of `--reps` runs
// (default 3) and the process's peak RSS. Usage: serve_cluster_bench [--reps N] [--requests N]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "io/catalog_loader.h"
#include "serve/cluster.h"

using namespace orrery;

namespace {

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  int64_t requests = 100000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    if (std::strcmp(argv[i], "--requests") == 0 && i + 1 < argc) requests = std::atoll(argv[++i]);
  }
  io::CatalogOptions co;
  co.use_environment = false;
  const io::Catalog cat = io::load_catalog(co);
  const model::ModelSpec model = cat.model("llama2-7b", {});
  const hw::GpuSpec& gpu = cat.hw.get_gpu("a100-sxm-80gb", {});
  const hw::NodeSpec& node = cat.hw.get_node("dgx-a100", {});
  serve::PoolSpec pool;
  pool.replica.model = &model;
  pool.replica.gpu = &gpu;
  pool.plan = serve::plan_memory(pool.replica);
  serve::ExecContext ctx;
  ctx.replica = &pool.replica;
  const auto exec = serve::make_exec_model("roofline", ctx);
  pool.exec = exec.get();
  pool.link = serve::NodeLink::from_catalog(gpu, &node);

  struct Case {
    std::string name;
    serve::ClusterSpec spec;
  };
  std::vector<Case> cases;
  for (const serve::RouterInfo& r : serve::router_registry()) {
    Case c{"8 replicas, " + r.name, {}};
    serve::PoolSpec p = pool;
    p.replicas = 8;
    c.spec.pools.push_back(p);
    c.spec.router = r.name;
    cases.push_back(std::move(c));
  }
  {
    Case c{"disaggregated 4:4, least-outstanding", {}};
    serve::PoolSpec p = pool, d = pool;
    p.role = serve::ReplicaRole::kPrefill;
    p.replicas = 4;
    d.role = serve::ReplicaRole::kDecode;
    d.replicas = 4;
    c.spec.pools = {p, d};
    c.spec.router = "least-outstanding";
    cases.push_back(std::move(c));
  }

  std::printf("%lld requests of the Azure-conversation-shaped workload at 8x its rate (%.1f req/s), %d reps\n",
              static_cast<long long>(requests), 8 * serve::kAzureConvRate, reps);
  std::printf("%-40s %10s %10s %10s %10s %12s %12s\n", "case", "completed", "wall_s", "cpu_s", "iters", "ttft_p99_ms",
              "peak_rss_MB");
  for (const Case& c : cases) {
    c.spec.validate();
    std::vector<double> wall, cpu;
    serve::ClusterResult last;
    for (int r = 0; r < reps; ++r) {
      auto src = serve::default_workload(0, requests, 8.0);
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      last = serve::simulate_cluster(*src, c.spec);
      cpu.push_back(cpu_seconds() - c0);
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-40s %10lld %10.3f %10.3f %10lld %12.1f %12.1f\n", c.name.c_str(),
                static_cast<long long>(last.total.completed), median(wall), median(cpu),
                static_cast<long long>(last.total.iterations), last.total.ttft.quantile(0.99) * 1e3, peak_rss_mb());
  }
  return 0;
}
