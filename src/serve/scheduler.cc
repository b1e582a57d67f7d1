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

std::vector<int64_t> wait_thresholds(const std::vector<TypeStats>& types, double d0_s, double d1_s, double margin,
                                     int64_t capacity_tokens) {
  double sum_w = 0.0;
  for (const TypeStats& t : types) sum_w += t.rate * (t.output + 1.0) * (t.prompt + t.output / 2.0);
  const double denom = 1.0 - (1.0 + margin) * d1_s * sum_w;
  std::vector<int64_t> n(types.size(), 1);
  double dt = denom > 0.0 ? d0_s / denom : 0.0;
  for (size_t j = 0; j < types.size(); ++j) {
    n[j] = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((1.0 + margin) * types[j].rate * dt)));
  }
  // M^pi = sum_j n_j (l'_j + 1)(l_j + l'_j / 2) must not exceed C; unstable or too large: scale down.
  auto memory = [&] {
    double m = 0.0;
    for (size_t j = 0; j < types.size(); ++j) {
      m += static_cast<double>(n[j]) * (types[j].output + 1.0) * (types[j].prompt + types[j].output / 2.0);
    }
    return m;
  };
  const double cap = static_cast<double>(capacity_tokens);
  if (denom <= 0.0 || memory() > cap) {
    double rate_sum = 0.0;
    for (const TypeStats& t : types) rate_sum += t.rate;
    // n_j proportional to lambda_j with M^pi = C.
    double per_rate_mem = 0.0;
    for (const TypeStats& t : types) per_rate_mem += t.rate / rate_sum * (t.output + 1.0) * (t.prompt + t.output / 2.0);
    const double total = cap / per_rate_mem;
    for (size_t j = 0; j < types.size(); ++j) {
      n[j] = std::max<int64_t>(1, static_cast<int64_t>(std::floor(total * types[j].rate / rate_sum)));
    }
  }
  return n;
}

std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const SchedulerConfig& config, const Where& where) {
  validate(config, where);
  if (name == "static") return make_static_scheduler(config);
  if (name == "orca") return make_orca_scheduler(config);
  if (name == "vllm") return make_vllm_scheduler(config);
  if (name == "sarathi") return make_sarathi_scheduler(config);
  if (name == "sjf") return make_sjf_scheduler(config);
  if (name == "wait") return make_wait_scheduler(config, where);
  if (name == "nested-wait") return make_nested_wait_scheduler(config, where);
  std::vector<std::string> names;
  for (const auto& i : scheduler_registry()) names.push_back(i.name);
  throw InputError(where, "unknown scheduler '" + std::string(name) + "'", suggest(name, names));
}

}  // namespace orrery::serve
