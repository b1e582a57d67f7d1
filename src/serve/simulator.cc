#include "serve/simulator.h"

#include "serve/cluster.h"

namespace orrery::serve {

std::string_view to_string(RequestStatus s) {
  switch (s) {
    case RequestStatus::kDone: return "done";
    case RequestStatus::kRejectedContext: return "rejected-context";
    case RequestStatus::kRejectedKv: return "rejected-kv";
    case RequestStatus::kUnfinished: return "unfinished";
  }
  return "?";
}

SimResult simulate(RequestSource& source, const ReplicaSpec& spec, const MemoryPlan& plan, Scheduler& scheduler,
                   const ExecModel& exec, const SimOptions& options, SimObserver* observer) {
  // One replica is a cluster of one (serve/cluster.h): the same event loop and replica driver.
  ClusterSpec cluster;
  PoolSpec pool;
  pool.replica = spec;
  pool.plan = plan;
  pool.exec = &exec;
  cluster.pools.push_back(std::move(pool));
  Scheduler* const schedulers[] = {&scheduler};
  return std::move(simulate_cluster(source, cluster, schedulers, options, observer).total);
}

}  // namespace orrery::serve
