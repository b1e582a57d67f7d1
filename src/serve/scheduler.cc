#include "serve/scheduler.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"

namespace orrery::serve {

std::vector<SchedulerInfo> scheduler_registry() {
  return {
      {"static", "FasterTransformer static batching: fixed batches padded to the longest request",
       "NVIDIA FasterTransformer; Yu et al., Orca, OSDI 2022, Sec. 2"},
      {"orca", "iteration-level batching, prefills and decodes in one batch, KV reserved per request",
       "Yu et al., Orca, OSDI 2022"},
      {"vllm", "vLLM v0: paged KV, FCFS, prefill-first iterations, preempt newest (recompute or swap)",
       "Kwon et al., PagedAttention, SOSP 2023"},
      {"sarathi", "Sarathi-Serve: stall-free decodes plus chunked prefills within a token budget",
       "Agrawal et al., Sarathi-Serve, OSDI 2024"},
      {"sjf", "vLLM with the waiting queue ordered by true output length (oracle shortest-job-first)",
       "Fu et al., Learning to Rank, NeurIPS 2024 (oracle bound)"},
      {"wait", "WAIT: per-type thresholds from the fluid model, known output lengths",
       "Ao et al., arXiv 2504.11320"},
      {"nested-wait", "Nested WAIT: segment thresholds for unknown output lengths, one batch-cap knob",
       "Ao et al., arXiv 2504.11320"},
  };
}

void validate(const SchedulerConfig& c, const Where& where) {
  if (c.max_seqs < 1) throw InputError(where.with_key("max-seqs"), "must be >= 1");
  if (c.max_batched_tokens < 1) throw InputError(where.with_key("max-batched-tokens"), "must be >= 1");
  if (c.chunk_size < 1) throw InputError(where.with_key("chunk-size"), "must be >= 1");
  if (!(c.wait_margin >= 0.0)) throw InputError(where.with_key("wait-margin"), "must be >= 0");
}

std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const SchedulerConfig& config, const Where& where) {
  validate(config, where);
  std::unique_ptr<Scheduler> s;
  if (name == "static") s = make_static_scheduler(config);
  if (name == "orca") s = make_orca_scheduler(config);
  if (name == "vllm") s = make_vllm_scheduler(config);
  if (name == "sarathi") s = make_sarathi_scheduler(config);
  if (name == "sjf") s = make_sjf_scheduler(config);
  if (name == "wait") s = make_wait_scheduler(config, where);
  if (name == "nested-wait") s = make_nested_wait_scheduler(config, where);
  if (s == nullptr) {
    std::vector<std::string> names;
    for (const auto& i : scheduler_registry()) names.push_back(i.name);
    throw InputError(where, "unknown scheduler '" + std::string(name) + "'", suggest(name, names));
  }
  s->origin_name_ = std::string(name);
  s->origin_config_ = config;
  return s;
}

std::unique_ptr<Scheduler> Scheduler::fresh() const {
  if (!origin_config_) return nullptr;
  return make_scheduler(origin_name_, *origin_config_);
}

}  // namespace orrery::serve
