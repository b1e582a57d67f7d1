// Speed of the MPI runtime against the in-process run (docs/decentral_algorithms.md, "MPI runtime").
// Run it under mpirun: `mpirun --oversubscribe -np 4 build/release/bench/decentral_mpi_bench`. For each
// case, rank 0 first runs the in-process simulation alone (the other ranks wait), then every rank runs
// the same case on the MPI runtime; each is repeated and the median iterations per second of the step
// loop are printed (wall time of the run minus its full-data metric evaluations, which only rank 0 does
// in both modes), with the ratio and the payload bytes each rank sent per iteration.
//   logistic  Push-Pull, logistic-nonconvex, d = 10, 1.44M samples, batch 200, exponential graph (the
//             papers' synthetic setup) with n = ranks nodes and with n = 4 ranks.
//   digits    Push-Pull, mlp:digits (64 hidden units, d = 4,810), batch 64 per node, n = ranks: gradients
//             that cost more than the exchange.
//   churn     the logistic case with n = 4 x ranks under availability churn (30% unavailable, 5 ms mean off
//             periods, 0.1 ms compute per sample): the step's matrices rebuilt on the present nodes.
//   fedavg    FedAvg on mlp:digits, 4 clients per rank, all sampled, 5 local steps of batch 64 per round:
//             the round's 4 x ranks client jobs split over the ranks, one MPI_Allgatherv of the uploads.
// usage: decentral_mpi_bench [--repeats R] [--iters K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "decentral/dataset.h"
#include "decentral/mpi_runtime.h"
#include "decentral/problem.h"
#include "decentral/runner.h"

using namespace orrery::decentral;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string name;
  std::unique_ptr<Problem> problem;
  GraphSequence seq;
  int64_t batch;
  double lr;
  std::string algorithm = "push-pull";
  bool churn = false;
};

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  int64_t iters = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::max<int64_t>(1, std::atoll(argv[i + 1]));
  }
  std::unique_ptr<MpiRuntime> mpi;
  try {
    mpi = MpiRuntime::start({});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decentral_mpi_bench: %s\n", e.what());
    return 1;
  }
  const int ranks = mpi->size();
  std::vector<Case> cases;
  for (NodeIndex n : {static_cast<NodeIndex>(ranks), static_cast<NodeIndex>(4 * ranks)}) {
    SyntheticSpec s;
    s.nodes = n;
    cases.push_back({fmt::format("logistic n={}", n), make_logistic_nonconvex(s),
                     parse_topology(fmt::format("exponential:{}", n), {}), 200, 0.05});
  }
  {
    SyntheticSpec s;
    s.nodes = static_cast<NodeIndex>(4 * ranks);
    cases.push_back({fmt::format("churn n={}", s.nodes), make_logistic_nonconvex(s),
                     parse_topology(fmt::format("exponential:{}", s.nodes), {}), 200, 0.05, "push-pull", true});
  }
  {
    auto data = std::make_shared<const TrainTest>(read_digits());
    ClassifierSpec c;
    c.kind = ClassifierKind::kMlp;
    c.nodes = static_cast<NodeIndex>(ranks);
    cases.push_back({fmt::format("mlp:digits n={}", ranks), make_classifier(data, c),
                     parse_topology(fmt::format("exponential:{}", ranks), {}), 64, 0.1});
    c.nodes = static_cast<NodeIndex>(4 * ranks);
    cases.push_back({fmt::format("fedavg digits n={}", c.nodes), make_classifier(data, c),
                     GraphSequence(Graph(c.nodes, {}, "clients")), 64, 0.1, "fedavg"});
  }
  if (mpi->is_root()) {
    std::printf("%d ranks, %lld iterations, median of %d\n", ranks, static_cast<long long>(iters), repeats);
    std::printf("%-22s %14s %14s %8s %16s\n", "case", "in-process it/s", "MPI it/s", "ratio", "sent B/it/rank");
  }
  for (const Case& c : cases) {
    RunSpec spec;
    spec.algorithm = c.algorithm;
    spec.iters = iters;
    spec.batch = c.batch;
    spec.params.lr = c.lr;
    spec.eval_every = iters;
    if (c.churn) {
      spec.time.compute_per_sample = orrery::Time::seconds(1e-4);
      spec.time.hetero.churn = parse_churn("0.3:0.005s", {});
    }
    const GraphSequence& seq = c.seq;
    std::vector<double> local, dist;
    const int64_t sent0 = mpi->bytes_sent();
    for (int r = 0; r < repeats; ++r) {
      if (mpi->is_root()) {
        const RunResult res = run(*c.problem, seq, spec);
        local.push_back(static_cast<double>(iters) / (res.seconds - res.eval_seconds));
      }
      mpi->barrier();
      const RunResult res = run(*c.problem, seq, spec, {}, {}, mpi.get());
      mpi->barrier();
      dist.push_back(static_cast<double>(iters) / (res.seconds - res.eval_seconds));
    }
    const double sent = static_cast<double>(mpi->bytes_sent() - sent0) / static_cast<double>(repeats * iters);
    if (mpi->is_root()) {
      const double a = median(local), b = median(dist);
      std::printf("%-22s %14.0f %14.0f %8.2f %16.0f\n", c.name.c_str(), a, b, b / a, sent);
    }
    mpi->barrier();
  }
  return 0;
}
