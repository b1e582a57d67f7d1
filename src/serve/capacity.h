// Capacity planning for serving: per deployment configuration (GPU type, TP x PP, scheduler, caps,
// replicas), the largest arrival rate that meets latency SLOs, and its cost per request.
//
// Model card
//   What      For a fixed workload shape (a synthetic spec or a trace, rescaled to any rate) and a fixed
//             seed, each configuration is simulated at a sequence of arrival rates; the largest rate
//             whose run meets every SLO and is stable is the configuration's capacity. Configurations
//             are ranked by cost per request at that rate from the catalog's GPU-hour prices.
//   SLOs      Bounds on quantiles of per-request metrics (vLLM benchmark names): ttft, tpot, e2e
//             (end-to-end latency) at p50, p90 or p99, e.g. ttft-p90 <= 2 s, tpot-p99 <= 200 ms. They
//             are measured over the requests that arrive after a warm-up (the first quarter of the
//             arrival window), so the empty system at t = 0 does not flatter a configuration.
//   Stable    A run is stable when its queueing delay does not trend upwards: the least-squares
//             slope of TTFT against arrival time, over the measured requests, is at most
//             kMaxLatencySlope = 0.005 s per s. A queue with a relative overload d = 1 - mu/lambda
//             makes the wait grow at about d / (1 - d) seconds per second, so this rejects overloads
//             of about 0.5% and more. TTFT rather than end-to-end latency: the latter also varies with
//             each request's output length, noise that a short run with long-tailed lengths would
//             read as a trend. Requests left unfinished also make a run unstable, and so does a mean
//             TTFT of the measured requests above the warm-up window (kWarmupFraction of the arrival
//             span): a backlog that stays flat, which the slope test alone passes (a critically loaded
//             queue, or a scheduler stalled until the stream ends).
//   Search    find_max_rate(): from a start rate, double (or halve) until the probe's verdict changes,
//             then bisect until the bracket [ok, fail] is within a relative tolerance. It assumes the
//             verdict is monotone in the rate (true of latency quantiles of work-conserving schedulers
//             up to simulation noise; WAIT's thresholds change with the rate in steps, so its verdict
//             can be non-monotone near a step: the search then reports one of the transitions).
//   Replicas  A configuration with R > 1 replicas runs the whole stream at lambda through its router
//             to R replicas in one event loop (serve/cluster.h): router imbalance, the smoothing of
//             round-robin and prefix affinity are in the capacity. With an empty router name the old
//             approximation remains: ONE replica at rate lambda / R (a perfect router that splits a
//             Poisson stream into R Poisson streams; a trace rescaled by 1/R), capacity = R x one's.
//   Cost      usd_per_hour = tp x pp x replicas x price (USD per GPU-hour, catalog/prices.yaml);
//             usd per 1M requests = usd_per_hour / (3600 x capacity) x 1e6. With the one-replica
//             approximation the cost per request does not depend on R.
//   Determinism  Every probe uses the same seed and workload; configurations run on a thread pool and
//             the results are ordered by a total order (cost, capacity, configuration index), so the
//             output is the same for any thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/stats.h"
#include "core/units.h"
#include "serve/cluster.h"
#include "serve/exec_model.h"
#include "serve/replica.h"
#include "serve/scheduler.h"
#include "serve/simulator.h"
#include "serve/workload.h"

namespace orrery::serve {

// ---- SLOs ----

enum class SloMetric { kTtft, kTpot, kE2e };

struct SloBound {
  SloMetric metric = SloMetric::kTtft;
  double quantile = 0.9;  // 0.5, 0.9 or 0.99
  Time limit;
  std::string name() const;  // "ttft-p90"
};

// The nine names "ttft-p50" ... "e2e-p99".
std::vector<std::string> slo_names();
// One bound from its name ("tpot-p99") and a time ("200ms", "2 s"). InputError at `where` (with the
// nearest name) for an unknown name, or a value that is not a positive time with a unit.
SloBound parse_slo(std::string_view name, std::string_view value, const Where& where = {});
// A comma-separated list "ttft-p90=2s,tpot-p99=200ms" (empty: no bound).
std::vector<SloBound> parse_slo_list(std::string_view text, const Where& where = {});

// ---- one run: SLO quantiles and stability ----

inline constexpr double kMaxLatencySlope = 0.005;  // s of latency per s of arrival time (see Stable)
inline constexpr double kWarmupFraction = 0.25;    // of the arrival window, not measured

struct RunMetrics {
  int64_t arrived = 0;
  int64_t completed = 0;
  int64_t measured = 0;           // completed requests that arrived after the warm-up
  int64_t rejected_context = 0;   // longer than the model's context (a property of the workload)
  int64_t rejected_kv = 0;        // longer than this replica's KV capacity
  int64_t unfinished = 0;
  int64_t evictions = 0;          // restarts by recompute (LIFO eviction)
  Summary ttft, tpot, e2e;        // seconds, measured requests
  double latency_slope = 0.0;     // d TTFT / d arrival over the measured requests (s/s)
  bool stable = false;
  double request_throughput = 0.0;  // completed / duration (req/s)
  double kv_utilization_mean = 0.0;
  double batch_size_mean = 0.0;
  double iteration_s_mean = 0.0;  // busy time / iterations
  double value(SloMetric m, double q) const;  // quantile of ttft/tpot/e2e (0 when nothing measured)
};

// The same for a cluster (serve/cluster.h): the metrics over all its replicas.
RunMetrics measure_cluster_run(RequestSource& source, const ClusterSpec& spec, const SimOptions& options = {},
                               SimObserver* observer = nullptr);
// Runs `scheduler` on `source` and measures it (see the model card). `observer` also sees every record.
RunMetrics measure_run(RequestSource& source, const ReplicaSpec& spec, const MemoryPlan& plan, Scheduler& scheduler,
                       const ExecModel& exec, const SimOptions& options = {}, SimObserver* observer = nullptr);

// The first SLO that `m` misses (nullopt when it meets them all).
std::optional<SloBound> first_missed(const RunMetrics& m, const std::vector<SloBound>& slos);

// ---- the rate search ----

struct RateSearch {
  double max_ok = 0.0;      // largest rate found to pass (0: none, down to the floor)
  double min_fail = 0.0;    // smallest rate found to fail (0: none, up to the ceiling)
  int probes = 0;
};
// Largest rate for which ok(rate) holds (model card, Search). REQUIRES: start > 0, floor > 0,
// ceiling >= start >= floor, rel_tol > 0.
RateSearch find_max_rate(const std::function<bool(double)>& ok, double start, double rel_tol, double floor,
                         double ceiling, int max_probes = 64);

// ---- per-workload statistics (rates and mean lengths per request type) ----

struct WorkloadStats {
  std::vector<TypeStats> types;  // by Request::type
  int64_t requests = 0;
  double rate = 0.0;  // (n - 1) / arrival span
  double span_s = 0.0;  // last - first arrival
  double mean_prompt = 0.0;
  double mean_output = 0.0;
  int64_t max_output = 0;
};
WorkloadStats workload_stats(RequestSource& source, int64_t limit);

// ---- capacity planning over configurations ----

struct CapacityConfig {
  const hw::GpuSpec* gpu = nullptr;
  int64_t tp = 1;
  int64_t pp = 1;
  std::string scheduler = "vllm";
  int64_t max_seqs = 128;
  int64_t max_batched_tokens = 4096;
  int64_t chunk_size = 512;
  int64_t replicas = 1;
  std::string router = "round-robin";  // replicas > 1: serve/router.h; empty: one replica at rate / replicas
  double usd_per_gpu_hour = 0.0;  // 0: no price known
  const compute::Calibration* calibration = nullptr;  // compute-model constants; null: the GPU's default
};

// A fresh request stream at `rate` requests/s (total over all replicas). Called concurrently from the
// pool's threads: it must be thread-safe and return the same stream for the same rate.
using WorkloadFactory = std::function<std::unique_ptr<RequestSource>(double rate)>;

struct CapacityOptions {
  std::vector<SloBound> slos;  // empty: stability alone (the largest stable rate, limit "unstable")
  ReplicaSpec base;          // dtype, block size, utilization, watermark, KV override (model/gpu/tp/pp set per config)
  std::string exec_model = "roofline";
  ExecContext exec;          // CPU overheads, linear d0/d1 (replica is set per config; its profile stream is unused)
  // vidur-profile: the text of the per-layer table (vidur's mlp.csv) and its name for errors. Each
  // configuration reads its own copy, so that configurations on several threads share no stream.
  std::shared_ptr<const std::string> profile_text;
  std::string profile_name;
  double start_rate = 1.0;   // requests/s per replica where the search starts
  double rel_tol = 0.02;     // relative width of the final bracket
  double floor_rate = 1e-3;  // per replica
  double ceiling_rate = 1e5;
  int threads = 1;
  std::function<void(size_t done, size_t total)> progress;  // called from the calling thread
};

struct CapacityResult {
  size_t index = 0;  // in the configuration list
  CapacityConfig config;
  bool fits = false;       // the model fits on the GPUs
  bool feasible = false;   // fits and some rate meets the SLOs
  std::string reason;      // why not feasible
  std::string limit;       // what failed just above the capacity ("ttft-p90", "unstable", "rejects")
  int64_t kv_tokens = 0;   // per replica
  double rate_per_replica = 0.0;
  double rate = 0.0;       // capacity, requests/s over all replicas
  double usd_per_hour = 0.0;
  double usd_per_million = 0.0;  // NaN when no price is known
  RunMetrics at_capacity;  // the run at the capacity rate
  int probes = 0;
};

// Ranks results: feasible first, by cost per request (priced before unpriced), then by capacity
// (higher first), then by index.
void rank_capacity(std::vector<CapacityResult>& results);

// Evaluates every configuration (ranked with rank_capacity). With no SLO the capacity is the largest
// stable rate. InputError only for options that are invalid for all configurations (bad tolerances); a
// configuration that does not fit or is invalid for the model (TP not dividing the heads, a TP degree
// the profile table lacks) is a result with fits = false and a reason.
std::vector<CapacityResult> plan_capacity(const model::ModelSpec& model, const std::vector<CapacityConfig>& configs,
                                          const WorkloadFactory& workload, const CapacityOptions& options);

// The runs of one configuration at any rate: its replica, memory plan, execution-time model and (WAIT,
// Nested WAIT) the linear fit for the thresholds, built once.
class CapacityProbe {
 public:
  // Never throws for a configuration that does not fit or is invalid for the model: fits() is false and
  // reason() says why. InputError for options invalid everywhere (an unknown execution-time model).
  CapacityProbe(const model::ModelSpec& model, const CapacityConfig& config, const WorkloadFactory& workload,
                const CapacityOptions& options);
  bool fits() const { return fits_; }
  const CapacityConfig& config() const { return config_; }
  const std::string& reason() const { return reason_; }
  int64_t kv_tokens() const { return kv_tokens_; }
  const LinearFit& fit() const { return fit_; }  // WAIT-style schedulers only
  // The scheduler configuration used at `per_replica` requests/s (WAIT: types and rates of the stream).
  SchedulerConfig scheduler_config(double per_replica) const;
  // One run at `per_replica` requests/s per replica (the workload at per_replica x replicas, rescaled).
  // REQUIRES: fits().
  RunMetrics run(double per_replica, SimObserver* observer = nullptr) const;

 private:
  CapacityConfig config_;
  WorkloadFactory workload_;
  ReplicaSpec spec_;
  MemoryPlan plan_;
  std::unique_ptr<ExecModel> exec_;
  SchedulerConfig base_;
  LinearFit fit_;
  bool fits_ = false;
  std::string reason_;
  int64_t kv_tokens_ = 0;
};

// One configuration (what plan_capacity runs per configuration).
CapacityResult evaluate_capacity(const model::ModelSpec& model, const CapacityConfig& config,
                                 const WorkloadFactory& workload, const CapacityOptions& options);
// The same on a probe already built for it (a caller that also runs the configuration at chosen rates).
// `options` supplies the SLOs and the search bounds.
CapacityResult evaluate_capacity(const CapacityProbe& probe, const CapacityOptions& options);

}  // namespace orrery::serve
