#include "serve/replica.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/assert.h"
#include "core/error.h"
#include "core/strings.h"

namespace orrery::serve {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

double expert_weight_bytes(ExpertWeights w, hw::DType dtype) {
  switch (w) {
    case ExpertWeights::kSame: return static_cast<double>(hw::dtype_bytes(dtype));
    case ExpertWeights::kFp8: return 1.0;
    case ExpertWeights::kMxfp4: return (4.0 + 8.0 / 32.0) / 8.0;
  }
  return static_cast<double>(hw::dtype_bytes(dtype));
}

constexpr std::pair<ExpertWeights, std::string_view> kExpertWeightNames[] = {
    {ExpertWeights::kSame, "same"}, {ExpertWeights::kFp8, "fp8"}, {ExpertWeights::kMxfp4, "mxfp4"}};

std::string_view to_string(ExpertWeights w) {
  for (const auto& [value, name] : kExpertWeightNames) {
    if (value == w) return name;
  }
  return "?";
}

ExpertWeights parse_expert_weights(const std::string& name, const Where& where) {
  std::vector<std::string> names;
  for (const auto& [value, known] : kExpertWeightNames) {
    if (name == known) return value;
    names.emplace_back(known);
  }
  throw InputError(where, "unknown expert weight format '" + name + "'", suggest(name, names));
}

void check_expert_weights(const model::ModelSpec& model, ExpertWeights w, const Where& where) {
  if (w == ExpertWeights::kSame || model.is_moe()) return;
  throw InputError(where, "'" + model.name + "' has no routed experts to store as " + std::string(to_string(w)),
                   "use --expert-weights with an MoE model, e.g. gpt-oss-120b");
}

void ReplicaSpec::validate(const Where& where) const {
  ORRERY_CHECK(model != nullptr && gpu != nullptr);
  if (model->is_dit()) {
    throw InputError(where.with_key("model"),
                     "'" + model->name + "' is a video diffusion transformer: it generates no tokens to serve",
                     "serve a language model, e.g. llama2-7b; DiTs are for `orrery train`");
  }
  check_expert_weights(*model, expert_weights, where.with_key("expert-weights"));
  if (tp < 1) throw InputError(where.with_key("tp"), "must be >= 1, got " + std::to_string(tp));
  if (pp < 1) throw InputError(where.with_key("pp"), "must be >= 1, got " + std::to_string(pp));
  if (model->heads % tp != 0) {
    throw InputError(where.with_key("tp"), "the model's " + std::to_string(model->heads) +
                                               " attention heads do not divide over TP " + std::to_string(tp),
                     "use a TP degree that divides the head count");
  }
  if (pp > model->layers) {
    throw InputError(where.with_key("pp"), "more pipeline stages (" + std::to_string(pp) + ") than layers (" +
                                               std::to_string(model->layers) + ")");
  }
  // Upper limits keep block and token arithmetic (ceil_div, blocks x block bytes) inside int64.
  constexpr int64_t kMaxBlockSize = int64_t{1} << 20, kMaxTokens = int64_t{1} << 32, kMaxBatch = int64_t{1} << 24;
  if (block_size < 1 || block_size > kMaxBlockSize) {
    throw InputError(where.with_key("block-size"), fmt::format("must be 1 to {} tokens, got {}", kMaxBlockSize, block_size));
  }
  if (!(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0)) {
    throw InputError(where.with_key("gpu-memory-utilization"), "must be in (0, 1]");
  }
  if (!(watermark >= 0.0 && watermark < 1.0)) throw InputError(where.with_key("watermark"), "must be in [0, 1)");
  if (swap_space < Bytes(0)) throw InputError(where.with_key("swap-space"), "must be >= 0");
  if (kv_tokens_override < 0 || kv_tokens_override > kMaxTokens) {
    throw InputError(where.with_key("kv-tokens"), fmt::format("must be 0 (from the memory plan) to {}, got {}", kMaxTokens,
                                                              kv_tokens_override));
  }
  if (prefix_unit_tokens < 1 || prefix_unit_tokens > kMaxTokens) {
    throw InputError(where.with_key("prefix-unit-tokens"), fmt::format("must be 1 to {}, got {}", kMaxTokens, prefix_unit_tokens));
  }
  if (workspace_tokens < 0 || workspace_tokens > kMaxBatch) {
    throw InputError(where.with_key("max-batched-tokens"), fmt::format("must be 0 to {}, got {}", kMaxBatch, workspace_tokens));
  }
  if (workspace_seqs < 0 || workspace_seqs > kMaxBatch) {
    throw InputError(where.with_key("max-seqs"), fmt::format("must be 0 to {}, got {}", kMaxBatch, workspace_seqs));
  }
  if (max_context < 0 || max_context > kMaxTokens) {
    throw InputError(where.with_key("max-context"), fmt::format("must be 0 (the model's) to {}, got {}", kMaxTokens, max_context));
  }
}

int64_t ReplicaSpec::context_limit() const { return max_context > 0 ? max_context : model->max_positions; }

MemoryPlan plan_memory(const ReplicaSpec& spec) {
  const model::ModelSpec& m = *spec.model;
  const int64_t dt = hw::dtype_bytes(spec.dtype);
  MemoryPlan p;
  p.hbm = spec.gpu->memory;
  p.usable = Bytes::from_double(p.hbm.to_double() * spec.gpu_memory_utilization);
  // The routed experts' matrices (biases apart) at their stored width, everything else at dt.
  const auto expert_matrices = static_cast<double>(m.routed_expert_matrix_params());
  const double weight_bytes = (static_cast<double>(m.total_params()) - expert_matrices) * static_cast<double>(dt) +
                              expert_matrices * expert_weight_bytes(spec.expert_weights, spec.dtype);
  p.weights = Bytes::from_double(weight_bytes / static_cast<double>(spec.tp * spec.pp));
  const double tokens = static_cast<double>(spec.workspace_tokens);
  const double tp = static_cast<double>(spec.tp);
  const double layer_live = 2.0 * static_cast<double>(m.hidden) +
                            static_cast<double>(m.q_width() + m.k_width() + m.v_width()) / tp +
                            2.0 * static_cast<double>(std::max(m.ffn, m.moe.expert_ffn * std::max<int64_t>(1, m.moe.top_k))) / tp;
  p.workspace = Bytes::from_double(tokens * static_cast<double>(dt) * layer_live +
                                   static_cast<double>(spec.workspace_seqs) * static_cast<double>(m.vocab) / tp * 4.0);
  p.margin = kMemoryMargin;
  p.kv = p.usable - p.weights - p.workspace - p.margin;

  const int64_t layers_per_stage = ceil_div(m.layers, spec.pp);
  int64_t per_layer = 0;
  if (m.attention == model::AttentionKind::kMla) {
    per_layer = (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * dt;
  } else {
    per_layer = 2 * ceil_div(m.kv_heads, spec.tp) * m.head_dim * dt;
  }
  p.kv_per_token = Bytes(per_layer * layers_per_stage);
  const Bytes block_bytes = p.kv_per_token * spec.block_size;
  if (p.kv > Bytes(0)) p.blocks = p.kv.count() / block_bytes.count();
  p.kv_tokens = p.blocks * spec.block_size;
  p.fits = p.blocks >= 1;
  if (!p.fits) {
    p.reason = "needs " + std::to_string((p.weights + p.workspace + p.margin).to_gb()) + " GB per GPU for weights (" +
               std::to_string(p.weights.to_gb()) + " GB), activation workspace and margin, but only " +
               std::to_string(p.usable.to_gb()) + " GB are usable (" + std::to_string(spec.gpu_memory_utilization) +
               " x HBM): no room for the KV cache";
  }
  return p;
}

Replica::Replica(const ReplicaSpec& spec, const MemoryPlan& plan) : spec_(spec) {
  const int64_t blocks = spec.kv_tokens_override > 0 ? ceil_div(spec.kv_tokens_override, spec.block_size) : plan.blocks;
  ORRERY_CHECK(blocks >= 1);
  total_blocks_ = blocks;
  free_blocks_ = blocks;
  watermark_blocks_ = static_cast<int64_t>(std::floor(spec.watermark * static_cast<double>(blocks)));
  block_bytes_ = plan.kv_per_token * spec.block_size;
  host_blocks_free_ = block_bytes_.count() > 0 ? spec.swap_space.count() / block_bytes_.count() : 0;
  swap_bandwidth_ = spec.gpu->host_copy_bandwidth().bytes_per_second();  // NVLink-C2C where there is one
  unit_tokens_ = spec.prefix_unit_tokens;
  unit_blocks_ = ceil_div(unit_tokens_, spec.block_size);
}

SeqId Replica::add(Request request, int64_t admit_order) {
  SeqId id = 0;
  if (!free_slots_.empty()) {
    id = free_slots_.back();
    free_slots_.pop_back();
    seqs_[static_cast<size_t>(id)] = Seq{};
  } else {
    id = static_cast<SeqId>(seqs_.size());
    seqs_.emplace_back();
  }
  Seq& s = seq(id);
  s.req = std::move(request);
  s.prefill_target = s.req.prompt_tokens;
  s.admit_order = admit_order;
  ++live_;
  return id;
}

SeqId Replica::add_prefilled(Request request, const Seq& from, int64_t reserve_tokens, int64_t admit_order,
                             int64_t keep_free) {
  const int64_t need = ceil_div(std::max(from.computed, reserve_tokens), spec_.block_size);
  if (allocatable_blocks() - need < keep_free) return -1;
  const SeqId id = add(std::move(request), admit_order);
  Seq& s = seq(id);
  s.computed = from.computed;
  s.prefill_target = from.computed;
  s.generated = from.generated;
  s.first_scheduled = from.first_scheduled;
  s.first_token = from.first_token;
  s.last_token = from.last_token;
  s.preemptions = from.preemptions;
  s.restarts = from.restarts;
  s.wasted_tokens = from.wasted_tokens;
  take_blocks(need);
  s.blocks = need;
  resident_tokens_ += s.computed;
  return id;
}

int64_t Replica::blocks_for(const Seq& s, int64_t tokens) const {
  const int64_t private_tokens = std::max<int64_t>(0, tokens - s.shared_units * unit_tokens_);
  return ceil_div(private_tokens, spec_.block_size);
}

int64_t Replica::extra_blocks(const Seq& s, int64_t q) const {
  return std::max<int64_t>(0, blocks_for(s, s.computed + q) - s.blocks);
}

void Replica::take_blocks(int64_t n) {
  while (free_blocks_ < n) {
    ORRERY_CHECK(!lru_.empty());
    const uint64_t h = lru_.front();
    lru_.pop_front();
    units_.erase(h);
    evictable_blocks_ -= unit_blocks_;
    free_blocks_ += unit_blocks_;
    resident_tokens_ -= unit_tokens_;
  }
  free_blocks_ -= n;
}

bool Replica::grow(SeqId id, int64_t q, int64_t keep_free) {
  Seq& s = seq(id);
  const int64_t need = extra_blocks(s, q);
  if (need == 0) return true;
  if (allocatable_blocks() - need < keep_free) return false;
  take_blocks(need);
  s.blocks += need;
  return true;
}

bool Replica::reserve(SeqId id, int64_t tokens, int64_t keep_free) {
  Seq& s = seq(id);
  const int64_t need = std::max<int64_t>(0, blocks_for(s, tokens) - s.blocks);
  if (need == 0) return true;
  if (allocatable_blocks() - need < keep_free) return false;
  take_blocks(need);
  s.blocks += need;
  return true;
}

void Replica::attach_prefix(SeqId id) {
  Seq& s = seq(id);
  if (!prefix_active(s) || s.computed > 0 || s.shared_units > 0) return;
  int64_t hits = 0;
  const int64_t max_units = (s.prefill_target - 1) / unit_tokens_;
  for (uint64_t h : s.req.prefix_blocks) {
    if (hits >= max_units) break;
    auto it = units_.find(h);
    if (it == units_.end()) break;
    if (it->second.refs == 0) {
      lru_.erase(it->second.lru);
      evictable_blocks_ -= unit_blocks_;
    }
    ++it->second.refs;
    ++hits;
  }
  s.shared_units = hits;
  s.computed = hits * unit_tokens_;
  counters_.prefix_hit_tokens += s.computed;
}

void Replica::register_prefix(Seq& s) {
  // Full units of the prompt beyond the hits become shared, while they are new to the cache and
  // their private blocks can be handed over (units must stay contiguous from the start).
  const int64_t full_units = std::min<int64_t>(static_cast<int64_t>(s.req.prefix_blocks.size()),
                                               s.req.prompt_tokens / unit_tokens_);
  while (s.shared_units < full_units) {
    const uint64_t h = s.req.prefix_blocks[static_cast<size_t>(s.shared_units)];
    if (units_.count(h) != 0 || s.blocks < unit_blocks_) break;
    units_.emplace(h, Unit{1, {}});
    s.blocks -= unit_blocks_;
    ++s.shared_units;
  }
}

void Replica::drop_prefix(Seq& s) {
  for (int64_t i = 0; i < s.shared_units; ++i) {
    auto it = units_.find(s.req.prefix_blocks[static_cast<size_t>(i)]);
    ORRERY_CHECK(it != units_.end() && it->second.refs > 0);
    if (--it->second.refs == 0) {
      it->second.lru = lru_.insert(lru_.end(), it->first);
      evictable_blocks_ += unit_blocks_;
    }
  }
  // Shared tokens stay resident (cached) until evicted; they leave this sequence's count.
  s.shared_units = 0;
}

void Replica::free_private(Seq& s) {
  free_blocks_ += s.blocks;
  s.blocks = 0;
}

void Replica::preempt_recompute(SeqId id) {
  Seq& s = seq(id);
  const int64_t shared_tokens = s.shared_units * unit_tokens_;
  s.wasted_tokens += s.computed - std::min(s.computed, shared_tokens);
  counters_.wasted_tokens += s.computed - std::min(s.computed, shared_tokens);
  resident_tokens_ -= s.computed - std::min(s.computed, shared_tokens);
  free_private(s);
  drop_prefix(s);
  s.computed = 0;
  s.prefill_target = s.req.prompt_tokens + s.generated;
  s.state = SeqState::kWaiting;
  ++s.preemptions;
  ++s.restarts;
  ++counters_.preemptions;
  ++counters_.restarts;
}

Time Replica::swap_time(int64_t blocks) const {
  if (blocks <= 0 || swap_bandwidth_ <= 0.0) return Time::zero();
  return Time::seconds(static_cast<double>(blocks) * block_bytes_.to_double() / swap_bandwidth_);
}

bool Replica::swap_out(SeqId id, Batch& batch) {
  Seq& s = seq(id);
  if (s.blocks > host_blocks_free_) return false;
  host_blocks_free_ -= s.blocks;
  batch.extra += swap_time(s.blocks);
  resident_tokens_ -= s.computed - std::min(s.computed, s.shared_units * unit_tokens_);
  free_blocks_ += s.blocks;  // the count stays in s.blocks: what comes back on swap-in
  s.state = SeqState::kSwapped;
  ++s.preemptions;
  ++counters_.preemptions;
  ++counters_.swap_outs;
  return true;
}

bool Replica::swap_in(SeqId id, Batch& batch, int64_t keep_free) {
  Seq& s = seq(id);
  ORRERY_CHECK(s.state == SeqState::kSwapped);
  if (allocatable_blocks() - s.blocks < keep_free) return false;
  take_blocks(s.blocks);
  host_blocks_free_ += s.blocks;
  batch.extra += swap_time(s.blocks);
  resident_tokens_ += s.computed - std::min(s.computed, s.shared_units * unit_tokens_);
  s.state = SeqState::kRunning;
  ++counters_.swap_ins;
  return true;
}

void Replica::release(SeqId id) {
  Seq& s = seq(id);
  ORRERY_CHECK(s.state == SeqState::kFinished);
  resident_tokens_ -= s.computed - std::min(s.computed, s.shared_units * unit_tokens_);
  free_private(s);
  drop_prefix(s);
  s.req.prefix_blocks = {};
  free_slots_.push_back(id);
  --live_;
}

}  // namespace orrery::serve
