// Speed scenarios of the decentralized pillar (docs/decentral_algorithms.md, "Speed"): prints the median
// CPU time (one thread) of a few repetitions of each.
//   synthetic   Push-Pull, the papers' setup: logistic-nonconvex, n = 16, d = 10, 1.44M samples, batch 200,
//               lr 0.05, exponential graph, 3,000 iterations, 20 seeds, full-data metrics at the end only.
//   per-iter    the same with the full-data ||grad f(xbar)|| after every iteration (as the reference NumPy
//               code does), 1 seed; compare with bench/numpy_pushpull.py.
//   fashion     softmax regression on Fashion-MNIST, n = 256 (IID), exponential graph, Push-Pull, batch 32,
//               100 iterations, metrics at the end (skipped when the data set is not installed).
// usage: decentral_bench [--repeats R] [--only synthetic|per-iter|fashion]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "decentral/dataset.h"
#include "decentral/problem.h"
#include "decentral/runner.h"

using namespace orrery::decentral;

namespace {

// CPU seconds of this process (one thread): on a shared machine wall time also counts the time other
// processes hold the core, CPU time does not. decentral runs are single-threaded, so on an idle core the
// two agree.
double seconds_of(const std::function<void()>& f) {
  const std::clock_t c0 = std::clock();
  f();
  return static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 3;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
  }
  const auto want = [&](const char* name) { return only.empty() || only == name; };

  if (want("synthetic") || want("per-iter")) {
    std::unique_ptr<Problem> p;
    const double gen = seconds_of([&] { p = make_logistic_nonconvex(SyntheticSpec{}); });
    std::printf("synthetic data (1.44M samples, d = 10): %.3f s\n", gen);
    const GraphSequence g = parse_topology("exponential:16", {});
    if (want("synthetic")) {
      RunSpec s;
      s.algorithm = "push-pull";
      s.iters = 3000;
      s.seeds = 20;
      s.eval_every = 3000;
      std::vector<double> t;
      double final_norm = 0;
      for (int r = 0; r < repeats; ++r) t.push_back(seconds_of([&] { final_norm = run(*p, g, s).summary.back().grad_norm.mean; }));
      std::printf("synthetic: push-pull n=16, 3000 iterations x 20 seeds: median %.3f s (%d runs), %.2f us/iteration; "
                  "final ||grad f(xbar)|| mean %.3e\n",
                  median(t), repeats, median(t) / 60000 * 1e6, final_norm);
    }
    if (want("per-iter")) {
      RunSpec s;
      s.algorithm = "push-pull";
      s.iters = 100;
      s.seeds = 1;
      s.eval_every = 1;
      std::vector<double> t;
      for (int r = 0; r < repeats; ++r) t.push_back(seconds_of([&] { run(*p, g, s); }));
      std::printf("per-iter: push-pull n=16 with the full-data gradient norm every iteration: median %.3f ms/iteration\n",
                  median(t) / 100 * 1e3);
      s.eval_every = 100;
      t.clear();
      for (int r = 0; r < repeats; ++r) t.push_back(seconds_of([&] { run(*p, g, s); }));
      std::printf("per-iter: push-pull n=16 without per-iteration metrics: median %.3f ms/iteration\n", median(t) / 100 * 1e3);
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
    std::vector<double> t;
    double acc = 0;
    for (int r = 0; r < repeats; ++r) t.push_back(seconds_of([&] { acc = run(*p, g, s).summary.back().accuracy.mean; }));
    std::printf("fashion: softmax n=256, batch 32, 100 iterations (metrics at the end): median %.3f s; test accuracy %.4f\n",
                median(t), acc);
  }
  return 0;
}
