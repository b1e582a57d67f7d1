// Schedulers: who runs in the next iteration of a replica.
//
// Model card
//   What      An iteration-level scheduler (Orca's insight): after every iteration the replica asks its
//             scheduler for the next batch. A scheduler owns its queues, admits and preempts through
//             the Replica (serve/replica.h: blocks, recompute, swap) and fills a Batch of (sequence,
//             new tokens) items. Each scheduler is one file implementing this interface and one
//             registry entry (name, one-line description, citation); docs/serving.md shows how to add
//             one.
//   Memory    The memory rule is a policy shared by all schedulers (MemoryPolicy): kEvictLifo admits
//             greedily (a prompt's blocks above the watermark) and, when a step cannot get a block,
//             preempts the most recently admitted sequence (vLLM; restart by recompute, or swap when
//             preemption = kSwap); kReserve admits a request only when the blocks for its whole
//             prompt + output fit (never evicts; output lengths are an oracle here, as in Orca's
//             "Oracle" variant of the vLLM paper).
//   Registry  static, orca, vllm, sarathi, sjf, wait, nested-wait (scheduler_registry()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "serve/replica.h"

namespace orrery::serve {

enum class MemoryPolicy { kEvictLifo, kReserve };
enum class Preemption { kRecompute, kSwap };

// One request type of a workload as the fluid model and WAIT see it (means over the type).
struct TypeStats {
  double rate = 0.0;           // requests/s
  double prompt = 0.0;         // mean prompt tokens
  double output = 0.0;         // mean output tokens
  int64_t max_output = 0;
};

struct SchedulerConfig {
  int64_t max_seqs = 128;             // sequences per batch (vLLM max_num_seqs as in vidur)
  int64_t max_batched_tokens = 4096;  // tokens per batch (vLLM max_num_batched_tokens as in vidur)
  int64_t chunk_size = 512;           // Sarathi token budget per iteration
  // nullopt: the scheduler's default (kReserve for orca and static, kEvictLifo for the others).
  std::optional<MemoryPolicy> memory;
  Preemption preemption = Preemption::kRecompute;
  // WAIT: per-type thresholds n_j (empty: from the fluid model with `types`, d0, d1 and capacity).
  std::vector<int64_t> wait_thresholds;
  std::vector<TypeStats> types;  // by Request::type
  double d0_s = 0.0;             // linear iteration-time model for the thresholds
  double d1_s = 0.0;
  double wait_margin = 0.05;     // slack s of wait_thresholds_fluid (serve/fluid.h)
  // Nested WAIT: the batch cap tl spread over L equal-width segments of the decode range.
  int64_t nested_cap = 0;        // 0: from the fluid model (sum of the WAIT thresholds over stages)
  int64_t nested_segments = 4;
  int64_t max_output = 0;        // decode range (largest output length); 0: learned online
};

// What the replica tells the scheduler besides its state.
struct SchedulerView {
  bool arrivals_done = false;  // the request stream is exhausted (WAIT drains)
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // A new request (state kWaiting, no blocks).
  virtual void enqueue(Replica& r, SeqId id) = 0;
  // A request prefilled on another replica whose KV has arrived (disaggregated decode, serve/cluster.h):
  // state kWaiting, its blocks already reserved (Replica::add_prefilled). It must not wait behind
  // requests that need blocks, or the blocks it holds could starve them. Default: enqueue().
  virtual void enqueue_prefilled(Replica& r, SeqId id) { enqueue(r, id); }
  // Fills `batch` (cleared by the caller) for the next iteration; leaving it empty idles the replica
  // until the next arrival.
  virtual void schedule(Replica& r, const SchedulerView& view, Batch& batch) = 0;
  // After the iteration: `finished` sequences (state kFinished, released right after this call).
  virtual void on_iteration_end(Replica& r, const Batch& batch, const std::vector<SeqId>& finished) = 0;
  // Requests the scheduler holds (waiting, running, swapped, paused).
  virtual int64_t held() const = 0;
  virtual int64_t waiting() const = 0;
  // A new, empty scheduler of the same name and configuration (the further virtual engines of a
  // pipeline-parallel replica, serve/cluster.h), or nullptr when this one was not made by make_scheduler.
  std::unique_ptr<Scheduler> fresh() const;
  // Its make_scheduler name ("" when made otherwise).
  const std::string& name() const { return origin_name_; }

 private:
  friend std::unique_ptr<Scheduler> make_scheduler(std::string_view, const SchedulerConfig&, const Where&);
  std::string origin_name_;
  std::optional<SchedulerConfig> origin_config_;
};

struct SchedulerInfo {
  std::string name;
  std::string description;
  std::string citation;
};
std::vector<SchedulerInfo> scheduler_registry();
// InputError at `where` (with the nearest name) for an unknown name or an invalid config.
std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const SchedulerConfig& config, const Where& where = {});
void validate(const SchedulerConfig& config, const Where& where = {});

// Factories, one per scheduler file.
std::unique_ptr<Scheduler> make_static_scheduler(const SchedulerConfig& c);
std::unique_ptr<Scheduler> make_orca_scheduler(const SchedulerConfig& c);
std::unique_ptr<Scheduler> make_vllm_scheduler(const SchedulerConfig& c);
std::unique_ptr<Scheduler> make_sarathi_scheduler(const SchedulerConfig& c);
std::unique_ptr<Scheduler> make_sjf_scheduler(const SchedulerConfig& c);
std::unique_ptr<Scheduler> make_wait_scheduler(const SchedulerConfig& c, const Where& where);
std::unique_ptr<Scheduler> make_nested_wait_scheduler(const SchedulerConfig& c, const Where& where);


}  // namespace orrery::serve
