// Speed scenarios of the decentralized pillar (docs/decentral_algorithms.md, "Speed"): prints the median
// wall and CPU time (getrusage) of a few repetitions of each, and the algorithm-only part.
//   synthetic   Push-Pull, the papers' setup: logistic-nonconvex, n = 16, d = 10, 1.44M samples, batch 200,
//               lr 0.05, exponential graph, 3,000 iterations, 20 seeds, full-data metrics at the end only.
//   per-iter    the same with the full-data ||grad f(xbar)|| after every iteration (as the reference NumPy
//               code does), 1 seed; compare with bench/numpy_pushpull.py.
//   fashion     softmax regression on Fashion-MNIST, n = 256 (IID), exponential graph, Push-Pull, batch 32,
//               100 iterations, metrics at the end (skipped when the data set is not installed).
// usage: decentral_bench [--repeats R] [--only synthetic|per-iter|fashion] [--seeds S (synthetic, default 20)]
//                        [--kernels baseline|auto] (baseline: the SSE2 logistic kernels even where AVX2 runs)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "decentral/dataset.h"
#include "decentral/problem.h"
#include "decentral/runner.h"

using namespace orrery::decentral;

namespace {

// One measured run: wall seconds, CPU seconds of this process (getrusage, user + system) and the runner's
// wall seconds spent in full-data metric evaluations. On a shared machine wall time also counts the time
// other processes hold the core, CPU time does not; decentral runs are single-threaded, so on an idle core
// the two agree.
struct Timing {
  double wall = 0, cpu = 0, eval = 0;
};

double cpu_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

Timing time_run(const std::function<RunResult()>& f) {
  const double c0 = cpu_now();
  const auto w0 = std::chrono::steady_clock::now();
  const RunResult r = f();
  Timing t;
  t.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  t.cpu = cpu_now() - c0;
  t.eval = r.eval_seconds;
  return t;
}

double seconds_of(const std::function<void()>& f) {
  const double c0 = cpu_now();
  f();
  return cpu_now() - c0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Medians over the repetitions of wall, CPU, evaluation and algorithm-only (wall minus evaluation) time.
struct Medians {
  double wall, cpu, eval, algo;
};
Medians medians(const std::vector<Timing>& t) {
  std::vector<double> w, c, e, a;
  for (const Timing& x : t) {
    w.push_back(x.wall);
    c.push_back(x.cpu);
    e.push_back(x.eval);
    a.push_back(x.wall - x.eval);
  }
  return {median(w), median(c), median(e), median(a)};
}

void print(const char* what, const std::vector<Timing>& t) {
  const Medians m = medians(t);
  std::printf("%s: median of %zu runs: wall %.3f s, CPU %.3f s; metric evaluations %.3f s, algorithm only %.3f s (wall)\n",
              what, t.size(), m.wall, m.cpu, m.eval, m.algo);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 3;
  int seeds = 20;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--seeds") == 0) seeds = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--kernels") == 0) orrery::decentral::force_baseline_kernels(std::strcmp(argv[i + 1], "baseline") == 0);
  }
  const auto want = [&](const char* name) { return only.empty() || only == name; };

  if (want("synthetic") || want("per-iter")) {
    std::unique_ptr<Problem> p;
    const double gen = seconds_of([&] { p = make_logistic_nonconvex(SyntheticSpec{}); });
    std::printf("synthetic data (1.44M samples, d = 10): %.3f s CPU\n", gen);
    const GraphSequence g = parse_topology("exponential:16", {});
    if (want("synthetic")) {
      RunSpec s;
      s.algorithm = "push-pull";
      s.iters = 3000;
      s.seeds = seeds;
      s.eval_every = 3000;
      std::vector<Timing> t;
      double final_norm = 0;
      for (int r = 0; r < repeats; ++r) {
        t.push_back(time_run([&] {
          RunResult res = run(*p, g, s);
          final_norm = res.summary.back().grad_norm.mean;
          return res;
        }));
      }
      const std::string what = "synthetic: push-pull n=16, 3000 iterations x " + std::to_string(seeds) + " seeds, metrics at k = 0 and 3000";
      print(what.c_str(), t);
      const Medians m = medians(t);
      std::printf("synthetic: %.2f us/iteration (algorithm only, wall); %.1f ms per evaluation; final ||grad f(xbar)|| mean %.3e\n",
                  m.algo / (3000.0 * seeds) * 1e6, m.eval / (2.0 * seeds) * 1e3, final_norm);
    }
    if (want("per-iter")) {
      RunSpec s;
      s.algorithm = "push-pull";
      s.iters = 100;
      s.seeds = 1;
      s.eval_every = 1;
      std::vector<Timing> t;
      for (int r = 0; r < repeats; ++r) t.push_back(time_run([&] { return run(*p, g, s); }));
      print("per-iter: push-pull n=16, 100 iterations, full-data metrics every iteration", t);
      s.eval_every = 100;
      t.clear();
      for (int r = 0; r < repeats; ++r) t.push_back(time_run([&] { return run(*p, g, s); }));
      print("per-iter: push-pull n=16, 100 iterations, metrics at k = 0 and 100", t);
    }
  }
  if (want("fashion")) {
    if (!std::filesystem::exists(std::string(kFashionMnistDir))) {
      std::printf("fashion: skipped (install dataset-fashion-mnist)\n");
      return 0;
    }
    std::shared_ptr<const TrainTest> data;
    const double load = seconds_of([&] { data = std::make_shared<const TrainTest>(read_fashion_mnist()); });
    std::printf("fashion-mnist load: %.3f s\n", load);
    ClassifierSpec c;
    c.nodes = 256;
    const auto p = make_classifier(data, c);
    const GraphSequence g = parse_topology("exponential:256", {});
    RunSpec s;
    s.algorithm = "push-pull";
    s.iters = 100;
    s.batch = 32;
    s.params.lr = 0.1;
    s.eval_every = 100;
    std::vector<Timing> t;
    double acc = 0;
    for (int r = 0; r < repeats; ++r) {
      t.push_back(time_run([&] {
        RunResult res = run(*p, g, s);
        acc = res.summary.back().accuracy.mean;
        return res;
      }));
    }
    print("fashion: softmax n=256, batch 32, 100 iterations, metrics at k = 0 and 100", t);
    std::printf("fashion: test accuracy %.4f\n", acc);
  }
  return 0;
}
