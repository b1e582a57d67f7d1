// One serving replica inside a shared event engine: the iteration loop of an inference engine.
//
// Model card
//   What      The per-replica half of a serving simulation, shared by simulate() (one replica,
//             serve/simulator.h) and simulate_cluster() (several replicas behind a router, possibly
//             disaggregated, serve/cluster.h): when idle and kicked, ask the scheduler for a batch, time
//             it with the execution-time model, and at the iteration's end apply it (KV progress,
//             tokens, completions) and release the finished requests. Arrivals, routing, KV transfers
//             and the end of the run belong to the caller, which owns the des::Engine.
//   Roles     kFull     prefill and decode on the same replica (colocated serving).
//             kPrefill  requests run to their first token (the caller admits them with output 1);
//                       finished ones are handed to the Listener and keep their KV blocks until the
//                       caller calls release_handed_over() (the KV transfer reads them).
//             kDecode   takes requests prefilled elsewhere (Replica::add_prefilled) and decodes them.
//   Metrics   Request-level figures (TTFT, TPOT, ITL, E2EL, goodput, completed tokens) go to the run's
//             MetricsSink; iteration-level ones (iterations, batch sizes, the time integral of used KV
//             blocks, busy time, block-manager counters) stay per replica (ReplicaStats).
//   Order     Everything happens in the events of the shared engine; a replica's iteration end is its
//             own event (handler = the driver), so replicas interleave in the engine's total order.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "des/engine.h"
#include "serve/exec_model.h"
#include "serve/replica.h"
#include "serve/scheduler.h"
#include "serve/simulator.h"

namespace orrery::serve {

enum class ReplicaRole { kFull, kPrefill, kDecode };
std::string_view to_string(ReplicaRole r);

// Request-level metrics of a run, written into its SimResult (one per run, shared by its replicas).
class MetricsSink {
 public:
  MetricsSink(SimResult& result, const Slo& slo, SimObserver* observer)
      : result_(result), slo_(slo), observer_(observer) {}
  void reject(const Request& req, RequestStatus status, int32_t replica);
  // A request emitted its last token at `now` on `replica` (prefilled on `prefill_replica`, or -1).
  void done(const Seq& s, Time now, int32_t replica, int32_t prefill_replica);
  void token_gap(double seconds) { result_.itl.add(seconds); }
  SimObserver* observer() const { return observer_; }

 private:
  SimResult& result_;
  Slo slo_;
  SimObserver* observer_;
};

// The time series of SimResult::samples: a row when an iteration starts at or after the next sample
// time; the interval doubles (every other row dropped) to keep at most max_samples rows.
class Sampler {
 public:
  Sampler(SimResult& result, Time interval, int64_t max_samples)
      : result_(result), interval_(interval), max_samples_(max_samples) {
    result_.sample_interval = interval;
  }
  void start(Time t) { next_ = t; }
  bool due(Time now) const { return now >= next_; }
  void add(const Sample& s);

 private:
  SimResult& result_;
  Time interval_;
  int64_t max_samples_;
  Time next_;
};

// Iteration-level figures of one replica.
struct ReplicaStats {
  int64_t admitted = 0;        // requests added to the replica
  int64_t finished = 0;        // requests that finished here (prefill role: handed over)
  int64_t iterations = 0;
  double batch_sum = 0.0;      // sequences summed over iterations
  int64_t batch_size_max = 0;
  double kv_block_seconds = 0.0;  // integral of used blocks over time
  double kv_utilization_max = 0.0;
  Time busy;
  int64_t peak_live = 0;
};

// The stages of a pipeline-parallel replica, shared by its virtual engines (serve/cluster.h). An
// iteration of duration t that starts at s runs on stage i during [s + floor(i t / p), s + floor((i+1)
// t / p)): the execution-time model's whole-replica time split evenly over the p stages (their layers
// are split evenly). A batch starts as soon as every stage is free when its turn comes, so up to p
// batches are in flight, one per stage.
class Pipeline {
 public:
  explicit Pipeline(int32_t stages);
  // The earliest start s >= now of an iteration of duration t; books its stages.
  Time reserve(Time now, Time t);
  // Time stage 0 has been booked (the replica's busy time: a new batch enters every stage in turn).
  Time busy() const { return busy_; }

 private:
  std::vector<Time> free_;  // per stage: when it is next free
  Time busy_;
};

class ReplicaDriver final : public des::EventHandler {
 public:
  // The caller's side of the replica's events.
  class Listener {
   public:
    virtual ~Listener() = default;
    // An iteration of `d` starts at `now` (after its batch was scheduled).
    virtual void on_iteration_start(ReplicaDriver& d, Time now) { (void)d, (void)now; }
    // Sequence `id` of `d` finished (state kFinished). Roles kFull/kDecode: the driver releases it
    // right after this call; role kPrefill: it stays until release_handed_over(id).
    virtual void on_finished(ReplicaDriver& d, SeqId id, Time now) = 0;
    // An iteration of `d` ended and its finished sequences were released (blocks may be free now);
    // called before `d` schedules its next iteration.
    virtual void on_iteration_end(ReplicaDriver& d, Time now) { (void)d, (void)now; }
  };

  // REQUIRES: plan.fits or spec.kv_tokens_override > 0. Keeps references to everything but `spec`.
  // reserve_whole: the scheduler's memory policy is MemoryPolicy::kReserve (prompt + output per request).
  ReplicaDriver(des::Engine& engine, int32_t index, ReplicaRole role, const ReplicaSpec& spec, const MemoryPlan& plan,
                Scheduler& scheduler, const ExecModel& exec, const SchedulerView& view, MetricsSink& metrics,
                Listener& listener, bool reserve_whole = false);

  int32_t index() const { return index_; }
  // The replica this driver runs, for reports (iterations, requests): its index unless it is one of a
  // pipeline's virtual engines (set_pipeline).
  int32_t replica_id() const { return replica_id_; }
  // Makes this driver a virtual engine of a pipeline-parallel replica `replica_id`: its iterations
  // start when `pipeline` (shared with the replica's other engines; outlives the driver) has room.
  void set_pipeline(Pipeline* pipeline, int32_t replica_id, int32_t engine) {
    pipeline_ = pipeline;
    replica_id_ = replica_id;
    engine_id_ = engine;
  }
  ReplicaRole role() const { return role_; }
  Replica& replica() { return replica_; }
  const Replica& replica() const { return replica_; }
  Scheduler& scheduler() { return scheduler_; }
  const Scheduler& scheduler() const { return scheduler_; }
  const ReplicaStats& stats() const { return stats_; }
  bool busy() const { return busy_; }
  int64_t batch_seqs() const { return busy_ ? static_cast<int64_t>(shape_.seqs.size()) : 0; }

  // Why `req` cannot be served here (kRejectedContext, kRejectedKv), or kDone when it can: prompt +
  // output within the context, and their blocks within the capacity above the watermark.
  RequestStatus admission(const Request& req) const;
  // Adds an admitted request and gives it to the scheduler. REQUIRES: admission(req) == kDone.
  SeqId admit(Request req, int64_t order);
  // Adds a prefilled request (role kDecode) without giving it to the scheduler yet (the KV is still in
  // flight), reserving its blocks (prompt + output when the scheduler's memory policy reserves whole
  // requests); -1 when they do not fit above the watermark. See Replica::add_prefilled.
  SeqId receive(Request req, const Seq& from, int64_t order);
  // The KV of a received request has arrived: the scheduler may run it.
  void enqueue_received(SeqId id);
  // Role kPrefill: frees a handed-over sequence once its KV has left.
  void release_handed_over(SeqId id);

  // Adds used blocks x elapsed time to the KV integral; call before anything changes the blocks.
  void account(Time now);
  // Starts an iteration at `now` if the replica is idle and its scheduler has work.
  void kick(Time now) {
    if (!busy_) start_iteration(now);
  }

  void on_event(des::Engine& engine, uint64_t tag) override;

 private:
  void start_iteration(Time now);
  void end_iteration(Time now);

  des::Engine& engine_;
  int32_t index_;
  int32_t replica_id_;
  int32_t engine_id_ = 0;
  Pipeline* pipeline_ = nullptr;
  ReplicaRole role_;
  Replica replica_;
  Scheduler& scheduler_;
  const ExecModel& exec_;
  const SchedulerView& view_;
  MetricsSink& metrics_;
  Listener& listener_;
  Batch batch_;
  BatchShape shape_;
  std::vector<SeqId> finished_;
  bool busy_ = false;
  Time last_account_;
  bool accounted_ = false;
  ReplicaStats stats_;
  bool reserve_whole_ = false;
};

}  // namespace orrery::serve
