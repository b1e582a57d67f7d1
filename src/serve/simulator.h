// The serving simulation: requests stream in, one replica runs iterations chosen by its scheduler and
// timed by its execution-time model, metrics stream out. (Implemented as a cluster of one replica:
// serve/cluster.h drives serve/replica_driver.h.)
//
// Model card
//   Loop      Event driven on des::Engine with two kinds of events: a request's arrival (the next
//             request is pulled from the RequestSource only then, so memory holds the requests inside
//             the replica, not the workload) and the end of an iteration. An idle replica asks its
//             scheduler for a batch at every arrival; a busy one at the end of each iteration.
//   Admission A request is rejected, reported and counted (never truncated) when prompt + output
//             exceeds the model's context (ReplicaSpec::context_limit) or when its KV (prompt +
//             output tokens in blocks) exceeds the replica's KV capacity above the watermark.
//   Metrics   (names of vLLM's benchmarks/benchmark_serving.py)
//               duration          last completion - first arrival
//               request_throughput  completed requests / duration
//               output_throughput   output tokens of completed requests / duration
//               total_token_throughput  (prompt + output tokens of completed requests) / duration
//               ttft              first token - arrival
//               tpot              (completion - first token) / (output - 1), requests with output > 1
//               itl               time between consecutive tokens of a request (every token after the
//                                 first)
//               e2el              completion - arrival
//               goodput           completed requests with ttft <= slo.ttft and tpot <= slo.tpot, per s
//             plus: processed_token_throughput (every computed token, recomputation included),
//             wasted_tokens (computed then lost to restarts; effective throughput = the completed
//             requests' tokens, so work lost to eviction is excluded), preemptions, restarts, swaps,
//             KV utilization (time-weighted mean and max of used blocks / blocks) and batch size
//             (mean over iterations, max), and a time series sampled every sample_interval.
//             Per-request latencies stream into core/stats.h Summary (exact up to 10^5 samples, then
//             a DDSketch with 0.5% relative error), per-token ITL into serve/token_histogram.h (the same
//             0.5% buckets, weighted adds), so memory does not grow with the request count.
//   Determinism  No randomness: the same request stream gives the same result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/stats.h"
#include "core/units.h"
#include "serve/exec_model.h"
#include "serve/replica.h"
#include "serve/scheduler.h"
#include "serve/token_histogram.h"
#include "serve/workload.h"

namespace orrery::serve {

struct Slo {
  Time ttft = Time::seconds(2.0);  // the example SLO: TTFT <= 2 s
  Time tpot = Time::ms(200);       // and TPOT <= 200 ms
};

struct SimOptions {
  Slo slo;
  Time sample_interval = Time::seconds(1.0);
  int64_t max_samples = 2048;  // the interval doubles when the series would grow past this
  Time time_limit = Time::max();  // stop (requests left unfinished) once simulated time passes this
};

enum class RequestStatus { kDone, kRejectedContext, kRejectedKv, kUnfinished };
std::string_view to_string(RequestStatus s);

struct RequestRecord {
  const Request* request = nullptr;
  RequestStatus status = RequestStatus::kDone;
  Time first_scheduled = Time::max();
  Time first_token = Time::max();
  Time finish = Time::max();
  int32_t preemptions = 0;
  int32_t restarts = 0;
  int64_t wasted_tokens = 0;
  int64_t generated = 0;
  int32_t replica = 0;           // the replica that finished (or rejected) it: its index in the cluster
  int32_t prefill_replica = -1;  // disaggregated serving: the replica that prefilled it
};

struct IterationRecord {
  Time start;
  Time duration;
  int64_t seqs = 0;
  int64_t tokens = 0;
  int64_t prefill_seqs = 0;
  int64_t decode_seqs = 0;
  int64_t kv_tokens = 0;
  int64_t used_blocks = 0;
  int64_t total_blocks = 0;
  int64_t held = 0;
  int64_t waiting = 0;
  Time transfer;  // swap time inside the iteration
  int32_t replica = 0;  // index in the cluster (serve/cluster.h)
  int32_t engine = 0;   // virtual engine of a pipeline-parallel replica (0 without a pipeline)
};

// Observers (per-request CSV, Chrome trace) get every record as it happens.
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  virtual void on_request(const RequestRecord& r) { (void)r; }
  virtual void on_iteration(const IterationRecord& it) { (void)it; }
};

struct Sample {
  Time t;
  double kv_utilization = 0.0;
  int64_t batch = 0;
  int64_t waiting = 0;
  int64_t held = 0;
};

struct SimResult {
  int64_t arrived = 0;
  int64_t completed = 0;
  int64_t rejected_context = 0;
  int64_t rejected_kv = 0;
  int64_t unfinished = 0;
  Time first_arrival;
  Time last_completion;
  Time end;  // simulated time at the end of the run
  double duration_s = 0.0;
  int64_t input_tokens = 0;   // of completed requests
  int64_t output_tokens = 0;  // of completed requests
  double request_throughput = 0.0;
  double output_throughput = 0.0;
  double total_token_throughput = 0.0;
  double processed_token_throughput = 0.0;
  int64_t good_requests = 0;
  double goodput = 0.0;
  Summary ttft;  // seconds
  Summary tpot;
  TokenHistogram itl;  // per token: a weighted histogram (serve/token_histogram.h)
  Summary e2el;
  ReplicaCounters counters;
  int64_t iterations = 0;
  double batch_size_mean = 0.0;
  int64_t batch_size_max = 0;
  double kv_utilization_mean = 0.0;  // time-weighted over [first arrival, end]
  double kv_utilization_max = 0.0;
  int64_t peak_held = 0;
  Time busy;  // time spent in iterations
  std::vector<Sample> samples;
  Time sample_interval;
};

// Runs the simulation to the end of the stream (or options.time_limit).
SimResult simulate(RequestSource& source, const ReplicaSpec& spec, const MemoryPlan& plan, Scheduler& scheduler,
                   const ExecModel& exec, const SimOptions& options = {}, SimObserver* observer = nullptr);

}  // namespace orrery::serve
