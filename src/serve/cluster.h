// A serving cluster: several replicas behind a router, colocated or disaggregated into a prefill and a
// decode pool, driven by one event loop.
//
// Model card
//   What      Requests stream in (pulled one at a time, as for one replica: memory holds the requests
//             inside the replicas, not the workload) and a router (serve/router.h) sends each to a
//             replica. Every replica runs its own scheduler and execution-time model
//             (serve/replica_driver.h); all share one des::Engine, so the run is one deterministic event
//             sequence whatever the number of replicas.
//   Colocated Pools of role kFull (one pool of N identical replicas, or several pools of different
//             GPUs / TP): the router picks among all of them. With one replica this is exactly
//             simulate() (serve/simulator.h), which is implemented by it.
//   Pipeline  A kFull replica with PP = p > 1 runs p virtual engines (vLLM's PP design): p drivers,
//             each with its own scheduler (Scheduler::fresh, so make_scheduler's schedulers only) and
//             1/p of the KV blocks and swap space, sharing the stages (Pipeline): up to p batches in
//             flight. A request goes to the engine with the fewest requests. Reports are per replica
//             (engines added up; busy = stage 0 booked). Not for the WAIT family (thresholds sized to
//             the whole replica) nor disaggregated pools: one batch in flight there.
//   Disaggregated  One kPrefill and one kDecode pool (DistServe, OSDI 2024; Splitwise, ISCA 2024). The
//             router picks a prefill replica, which runs the request to its first token (TTFT ends
//             there). The decode router then picks a decode replica, which reserves blocks for the
//             prompt's KV above its watermark (FIFO per decode replica when they do not fit yet: the
//             prefill replica keeps the KV meanwhile, so a full decode pool pushes back on the prefill
//             pool); the KV moves over the network model (serve/kv_transfer.h); when its last byte
//             arrives the decode replica's scheduler takes the request and decodes it to the end. Requests
//             with one output token finish on the prefill replica.
//   Admission A request is rejected (counted, reported) when prompt + output exceeds the context, or
//             its blocks exceed the chosen replica's capacity above the watermark (disaggregated: the
//             prefill replica must hold the prompt and the decode replicas prompt + output).
//   Metrics   The request-level metrics of simulate() over all replicas (vLLM's names), the block
//             counters summed, KV utilization as used blocks / blocks of the whole cluster (time
//             weighted), and per replica: requests, completions, throughput, KV utilization, busy
//             fraction. Disaggregated: transfer count, bytes, time and wait for decode memory.
//   Order     Requests arriving at the same instant are all routed before any idle replica schedules;
//             router ties go to the lowest replica index.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "serve/exec_model.h"
#include "serve/kv_transfer.h"
#include "serve/replica.h"
#include "serve/replica_driver.h"
#include "serve/router.h"
#include "serve/scheduler.h"
#include "serve/simulator.h"

namespace orrery::serve {

// A group of identical replicas.
// Whether replicas run by `scheduler` (a make_scheduler name) take one virtual engine per PP stage:
// every scheduler but the WAIT family, whose thresholds are sized to the whole replica.
bool runs_virtual_engines(std::string_view scheduler);

struct PoolSpec {
  ReplicaRole role = ReplicaRole::kFull;
  int64_t replicas = 1;
  ReplicaSpec replica;                 // model, GPU, TP, PP, KV settings
  MemoryPlan plan;                     // plan_memory(replica)
  const ExecModel* exec = nullptr;     // shared by the pool's replicas
  std::string scheduler = "vllm";      // one instance per replica (simulate_cluster without schedulers)
  SchedulerConfig scheduler_config;
  NodeLink link;                       // KV transfers (disaggregated only)
};

struct ClusterSpec {
  std::vector<PoolSpec> pools;
  std::string router = "round-robin";               // over the kFull pools, or the prefill pool
  std::string decode_router = "least-outstanding";  // disaggregated: prefilled request -> decode replica
  RouterConfig router_config;                       // thresholds (replica counts and capacities are filled in)
  Placement placement = Placement::kPacked;

  bool disaggregated() const;
  int64_t replicas() const;
  // InputError naming the key: no pool, a pool without replicas or exec model, a mix of kFull and
  // prefill/decode pools, not exactly one prefill and one decode pool, pools of different models, a
  // decode-pool scheduler that cannot take prefilled requests, unknown routers.
  void validate(const Where& where = {}) const;
};

// One replica's figures at the end of a run.
struct ReplicaSummary {
  int32_t index = 0;
  int32_t pool = 0;
  ReplicaRole role = ReplicaRole::kFull;
  ReplicaStats stats;
  ReplicaCounters counters;
  int64_t total_blocks = 0;
  double request_throughput = 0.0;   // finished here / run duration
  double kv_utilization_mean = 0.0;  // time weighted over [first arrival, end]
  double busy_fraction = 0.0;
};

struct ClusterResult {
  SimResult total;  // over all replicas
  std::vector<ReplicaSummary> replicas;
  TransferStats transfers;
};

// Runs the cluster to the end of the stream (or options.time_limit). spec must validate.
ClusterResult simulate_cluster(RequestSource& source, const ClusterSpec& spec, const SimOptions& options = {},
                               SimObserver* observer = nullptr);
// The same with the schedulers given, one per replica in pool order (simulate() uses it).
ClusterResult simulate_cluster(RequestSource& source, const ClusterSpec& spec, std::span<Scheduler* const> schedulers,
                               const SimOptions& options = {}, SimObserver* observer = nullptr);

// Schedulers a decode pool accepts (they take requests that arrive prefilled).
bool scheduler_takes_prefilled(std::string_view name);

}  // namespace orrery::serve
