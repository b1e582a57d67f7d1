#include "train/plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/strings.h"
#include "train/schedule_csv.h"

namespace orrery::train {
namespace {

template <class E, size_t N>
E parse_named(std::string_view name, const std::array<std::pair<std::string_view, E>, N>& table, const Where& where,
              std::string_view what) {
  const std::string lower = to_lower(trim(name));
  std::vector<std::string> names;
  for (const auto& [n, e] : table) {
    if (n == lower) return e;
    names.emplace_back(n);
  }
  throw InputError(where, fmt::format("unknown {} '{}'", what, name), suggest(name, names));
}

// The canonical name of `e`: its first entry in the parser's table (aliases follow it).
template <class E, size_t N>
std::string_view name_in(const std::array<std::pair<std::string_view, E>, N>& table, E e) {
  for (const auto& [n, v] : table) {
    if (v == e) return n;
  }
  return "?";
}

constexpr std::array kSchedules = {std::pair<std::string_view, Schedule>{"gpipe", Schedule::kGpipe},
                                   std::pair<std::string_view, Schedule>{"1f1b", Schedule::kOneFOneB},
                                   std::pair<std::string_view, Schedule>{"interleaved", Schedule::kInterleaved},
                                   std::pair<std::string_view, Schedule>{"interleaved1f1b", Schedule::kInterleaved},
                                   std::pair<std::string_view, Schedule>{"zero-bubble", Schedule::kZeroBubble},
                                   std::pair<std::string_view, Schedule>{"zb-h1", Schedule::kZeroBubble},
                                   std::pair<std::string_view, Schedule>{"zb-v", Schedule::kZeroBubbleV},
                                   std::pair<std::string_view, Schedule>{"zbv", Schedule::kZeroBubbleV},
                                   std::pair<std::string_view, Schedule>{"zbvzerobubble", Schedule::kZeroBubbleV},
                                   std::pair<std::string_view, Schedule>{"dualpipe-v", Schedule::kDualPipeV},
                                   std::pair<std::string_view, Schedule>{"dualpipev", Schedule::kDualPipeV},
                                   std::pair<std::string_view, Schedule>{"interleaved-zb", Schedule::kInterleavedZeroBubble},
                                   std::pair<std::string_view, Schedule>{"interleavedzerobubble", Schedule::kInterleavedZeroBubble},
                                   std::pair<std::string_view, Schedule>{"looped-bfs", Schedule::kLoopedBfs},
                                   std::pair<std::string_view, Schedule>{"loopedbfs", Schedule::kLoopedBfs}};
constexpr std::array kShardings = {std::pair<std::string_view, Sharding>{"none", Sharding::kNone},
                                   std::pair<std::string_view, Sharding>{"zero1", Sharding::kZero1},
                                   std::pair<std::string_view, Sharding>{"zero2", Sharding::kZero2},
                                   std::pair<std::string_view, Sharding>{"zero3", Sharding::kZero3},
                                   std::pair<std::string_view, Sharding>{"distopt", Sharding::kZero1},
                                   std::pair<std::string_view, Sharding>{"fsdp", Sharding::kZero3},
                                   std::pair<std::string_view, Sharding>{"hsdp", Sharding::kZero3}};
constexpr std::array kRecomputes = {std::pair<std::string_view, Recompute>{"none", Recompute::kNone},
                                    std::pair<std::string_view, Recompute>{"selective", Recompute::kSelective},
                                    std::pair<std::string_view, Recompute>{"selective-op", Recompute::kSelectiveOp},
                                    std::pair<std::string_view, Recompute>{"full", Recompute::kFull}};
constexpr std::array kGradSyncs = {std::pair<std::string_view, GradSync>{"dense", GradSync::kDense},
                                   std::pair<std::string_view, GradSync>{"sparse", GradSync::kSparseAllGather},
                                   std::pair<std::string_view, GradSync>{"zen", GradSync::kZen}};
constexpr std::array kMoeDispatchers = {
    std::pair<std::string_view, MoeDispatcher>{"alltoall", MoeDispatcher::kAllToAll},
    std::pair<std::string_view, MoeDispatcher>{"deepep", MoeDispatcher::kDeepEp}};
constexpr std::array kPrecisions = {std::pair<std::string_view, hw::DType>{"bf16", hw::DType::kBf16},
                                    std::pair<std::string_view, hw::DType>{"fp16", hw::DType::kFp16},
                                    std::pair<std::string_view, hw::DType>{"fp8", hw::DType::kFp8}};
constexpr std::array kMasterWeights = {
    std::pair<std::string_view, MasterWeights>{"fp32", MasterWeights::kFp32},
    std::pair<std::string_view, MasterWeights>{"fp16", MasterWeights::kFp16},
    std::pair<std::string_view, MasterWeights>{"remainders", MasterWeights::kRemainders},
    std::pair<std::string_view, MasterWeights>{"none", MasterWeights::kNone}};
constexpr std::array kFp8Recipes = {std::pair<std::string_view, Fp8Recipe>{"delayed", Fp8Recipe::kDelayed},
                                    std::pair<std::string_view, Fp8Recipe>{"current", Fp8Recipe::kCurrent},
                                    std::pair<std::string_view, Fp8Recipe>{"mxfp8", Fp8Recipe::kMxfp8}};
constexpr std::array kFsdpImpls = {std::pair<std::string_view, FsdpImpl>{"fsdp2", FsdpImpl::kFsdp2},
                                   std::pair<std::string_view, FsdpImpl>{"flat", FsdpImpl::kFlat}};
constexpr std::array kCpComms = {std::pair<std::string_view, CpComm>{"p2p", CpComm::kP2p},
                                 std::pair<std::string_view, CpComm>{"all_gather", CpComm::kAllGather},
                                 std::pair<std::string_view, CpComm>{"a2a", CpComm::kA2a},
                                 std::pair<std::string_view, CpComm>{"a2a+p2p", CpComm::kA2aP2p}};
constexpr std::array kOptimizerDtypes = {std::pair<std::string_view, hw::DType>{"fp32", hw::DType::kFp32},
                                         std::pair<std::string_view, hw::DType>{"bf16", hw::DType::kBf16},
                                         std::pair<std::string_view, hw::DType>{"fp16", hw::DType::kFp16}};

}  // namespace

Fp8Recipe parse_fp8_recipe(std::string_view name, const Where& where) {
  return parse_named(name, kFp8Recipes, where, "fp8 recipe");
}
FsdpImpl parse_fsdp_impl(std::string_view name, const Where& where) {
  return parse_named(name, kFsdpImpls, where, "FSDP implementation");
}
CpComm parse_cp_comm(std::string_view name, const Where& where) {
  return parse_named(name, kCpComms, where, "context-parallel communication type");
}
MasterWeights parse_master_weights(std::string_view name, const Where& where) {
  return parse_named(name, kMasterWeights, where, "master-weight copy");
}
hw::DType parse_optimizer_dtype(std::string_view name, const Where& where) {
  return parse_named(name, kOptimizerDtypes, where, "optimizer-state dtype");
}

int64_t Plan::master_bytes() const {
  switch (master_weights) {
    case MasterWeights::kFp32: return 4;
    case MasterWeights::kFp16:
    case MasterWeights::kRemainders: return 2;
    case MasterWeights::kNone: break;
  }
  return 0;
}
int64_t Plan::moment_bytes() const { return 2 * hw::dtype_bytes(optimizer_dtype); }
bool Plan::separate_master() const {
  return master_weights == MasterWeights::kFp32 || master_weights == MasterWeights::kFp16;
}
int64_t Plan::optimizer_step_bytes() const {
  return 2 * (master_bytes() + moment_bytes()) + grad_bytes + (separate_master() ? 2 : 4);
}
Plan Plan::in_precision(hw::DType p) const {
  Plan out = *this;
  out.precision = p;
  out.fp8_attention = fp8_attention && p == hw::DType::kFp8;
  if (p != hw::DType::kFp8) out.fp8_recipe = Fp8Recipe::kDelayed;
  return out;
}


constexpr std::array<std::pair<std::string_view, RecomputeModule>, 6> kRecomputeModules = {{
    {"core_attn", RecomputeModule::kCoreAttn},
    {"mla_up_proj", RecomputeModule::kMlaUpProj},
    {"moe_act", RecomputeModule::kMoeAct},
    {"layernorm", RecomputeModule::kLayernorm},
    {"mlp", RecomputeModule::kMlp},
    {"shared_experts", RecomputeModule::kSharedExperts},
}};

std::string_view recompute_module_name(RecomputeModule m) { return name_in(kRecomputeModules, m); }

uint32_t parse_recompute_modules(std::string_view list, const Where& where) {
  uint32_t modules = 0;
  for (const std::string_view item : split_csv(list)) {
    const std::string_view name = trim(item);
    if (name.empty()) continue;
    if (name == "moe") {
      throw InputError(where, "module 'moe' (the whole MoE layer) is not modelled: its recompute runs the expert "
                              "all-to-alls again", "recompute moe_act and shared_experts, or --recompute full");
    }
    modules |= module_bit(parse_named(name, kRecomputeModules, where, "recompute module"));
  }
  if (modules == 0) throw InputError(where, "expected at least one module, e.g. core_attn,mla_up_proj");
  return modules;
}

std::vector<std::string> recompute_module_names(uint32_t modules) {
  std::vector<std::string> names;
  for (const auto& [name, m] : kRecomputeModules) {
    if (modules & module_bit(m)) names.emplace_back(name);
  }
  return names;
}

std::string recompute_modules_error(const model::ModelSpec& m, uint32_t modules) {
  const auto has = [&](RecomputeModule mod) { return (modules & module_bit(mod)) != 0; };
  const bool mla = m.attention == model::AttentionKind::kMla;
  if (modules == 0) return "no module to recompute";
  if (has(RecomputeModule::kMlaUpProj) && !mla) {
    return fmt::format("mla_up_proj needs multi-latent attention; model '{}' has none", m.name);
  }
  if (has(RecomputeModule::kMoeAct) && !m.is_moe()) return fmt::format("moe_act needs an MoE model; '{}' is dense", m.name);
  if (has(RecomputeModule::kSharedExperts) && m.moe.num_shared_experts == 0) {
    return fmt::format("shared_experts: model '{}' has no shared experts", m.name);
  }
  if (has(RecomputeModule::kLayernorm) && !mla && !m.is_moe()) {
    return fmt::format("layernorm: every norm of model '{}' is fused into the GEMM after it (Transformer Engine), so "
                       "none runs as a module to recompute", m.name);
  }
  if (has(RecomputeModule::kMlp)) {
    bool dense = false;
    for (int64_t l = 0; l < m.layers && !dense; ++l) dense = !m.is_moe_layer(l);
    if (!dense) return fmt::format("mlp: model '{}' has no dense MLP layer (recompute moe_act or shared_experts)", m.name);
  }
  return {};
}

bool Plan::custom_places_v() const { return custom != nullptr && custom->v; }
bool Plan::custom_splits() const { return custom != nullptr && custom->split; }

std::string_view schedule_name(Schedule s) { return s == Schedule::kCustom ? "custom" : name_in(kSchedules, s); }
std::string_view sharding_name(Sharding s) { return name_in(kShardings, s); }
std::string_view recompute_name(Recompute r) { return name_in(kRecomputes, r); }
std::string_view grad_sync_name(GradSync g) { return name_in(kGradSyncs, g); }
std::string_view moe_dispatcher_name(MoeDispatcher d) { return name_in(kMoeDispatchers, d); }
std::string_view master_weights_name(MasterWeights m) { return name_in(kMasterWeights, m); }
std::string_view fp8_recipe_name(Fp8Recipe r) { return name_in(kFp8Recipes, r); }
std::string_view fsdp_impl_name(FsdpImpl f) { return name_in(kFsdpImpls, f); }
std::string_view cp_comm_name(CpComm c) { return name_in(kCpComms, c); }

MoeDispatcher parse_moe_dispatcher(std::string_view name, const Where& where) {
  return parse_named(name, kMoeDispatchers, where, "MoE token dispatcher");
}

Schedule parse_schedule(std::string_view name, const Where& where) {
  return parse_named(name, kSchedules, where, "pipeline schedule");
}
Sharding parse_sharding(std::string_view name, const Where& where) {
  return parse_named(name, kShardings, where, "data-parallel sharding");
}
Recompute parse_recompute(std::string_view name, const Where& where) {
  return parse_named(name, kRecomputes, where, "recompute mode");
}
GradSync parse_grad_sync(std::string_view name, const Where& where) {
  return parse_named(name, kGradSyncs, where, "gradient synchronization");
}
hw::DType parse_precision(std::string_view name, const Where& where) {
  return parse_named(name, kPrecisions, where, "training precision");
}

double Plan::moe_copies_per_token(int64_t experts, int64_t top_k) const {
  if (moe_dispatcher == MoeDispatcher::kAllToAll || ep <= 1) return static_cast<double>(top_k);
  if (moe_ranks_per_token > 0.0) return moe_ranks_per_token;
  // P(a given rank holds none of the k experts) = C(E - E/ep, k) / C(E, k) = prod_i (E - E/ep - i) / (E - i).
  const int64_t per_rank = experts / ep;
  double none = 1.0;
  for (int64_t i = 0; i < top_k; ++i) {
    const int64_t left = experts - per_rank - i;
    none *= left > 0 ? static_cast<double>(left) / static_cast<double>(experts - i) : 0.0;
  }
  return static_cast<double>(ep) * (1.0 - none);
}

int64_t Plan::shard_size() const {
  if (sharding == Sharding::kNone) return 1;
  // Context-parallel ranks hold the same parameters: Megatron-Core reduces gradients and shards its
  // distributed optimizer over the data-parallel group with context parallelism (dp x cp ranks), as
  // torchtitan's FSDP shards over its dp_shard x cp mesh.
  return (shard_group > 0 ? shard_group : dp) * cp;
}

int64_t Plan::expert_shard_size() const {
  if (sharding == Sharding::kNone) return 1;
  return std::max<int64_t>(1, shard_size() * tp / std::max<int64_t>(1, expert_tp() * ep));
}

double Plan::local_optimizer_params(int64_t params, int64_t expert_params) const {
  return static_cast<double>(params - expert_params) / static_cast<double>(shard_size()) +
         static_cast<double>(expert_params) / static_cast<double>(expert_shard_size());
}

std::string_view group_name(Group g) {
  switch (g) {
    case Group::kTp: return "tp";
    case Group::kCp: return "cp";
    case Group::kDp: return "dp";
    case Group::kEp: return "ep";
    case Group::kPp: return "pp";
    case Group::kDpShard: return "dp-shard";
    case Group::kDpReplica: return "dp-replica";
    case Group::kEdpShard: return "edp-shard";
    case Group::kEdpReplica: return "edp-replica";
    case Group::kEtp: return "etp";
    case Group::kCpA2a: return "cp-a2a";
    case Group::kCpRing: return "cp-ring";
  }
  return "?";
}

int64_t group_size(const Plan& p, Group g) {
  switch (g) {
    case Group::kTp: return p.tp;
    case Group::kCp: return p.cp;
    case Group::kDp: return p.dp * p.cp;
    case Group::kEp: return p.ep;
    case Group::kPp: return p.pp;
    case Group::kDpShard: return p.sharding == Sharding::kNone ? p.dp * p.cp : p.shard_size();
    case Group::kDpReplica: return p.sharding == Sharding::kNone || p.shard_group <= 0 ? 1 : p.dp / p.shard_group;
    case Group::kEdpShard:
      return p.sharding == Sharding::kNone
                 ? std::max<int64_t>(1, p.tp * p.dp * p.cp / std::max<int64_t>(1, p.expert_tp() * p.ep))
                 : p.expert_shard_size();
    case Group::kEdpReplica: return group_size(p, Group::kDpReplica);
    case Group::kEtp: return p.expert_tp();
    case Group::kCpA2a: return p.cp_comm == CpComm::kA2aP2p && p.cp_a2a > 0 ? p.cp_a2a : 1;
    case Group::kCpRing: return p.cp_comm == CpComm::kA2aP2p && p.cp_a2a > 0 ? p.cp / p.cp_a2a : 1;
  }
  return 1;
}

int64_t group_stride(const Plan& p, Group g) {
  switch (g) {
    case Group::kTp: return 1;
    case Group::kCp: return p.tp;
    case Group::kEp: return p.expert_tp();  // the expert grid's ep ranks follow its etp ranks (cp folded in)
    case Group::kDp: return p.tp;         // with the cp ranks, which hold the same parameters
    case Group::kPp: return p.tp * p.cp * p.dp;
    case Group::kDpShard: return p.tp;
    case Group::kDpReplica: return p.tp * p.cp * (p.sharding == Sharding::kNone || p.shard_group <= 0 ? p.dp : p.shard_group);
    case Group::kEdpShard: return p.expert_tp() * p.ep;
    case Group::kEdpReplica: return group_stride(p, Group::kDpReplica);
    case Group::kEtp: return 1;
    case Group::kCpA2a: return p.tp;
    case Group::kCpRing: return p.tp * std::max<int64_t>(1, p.cp_a2a);
  }
  return 1;
}

int64_t machine_cp_a2a(const Plan& p, int64_t domain_gpus) {
  int64_t best = 1;
  for (int64_t d = 1; d <= std::min(p.cp, domain_gpus); ++d) {  // d x tp <= domain: d <= domain
    if (p.cp % d == 0 && d * std::max<int64_t>(1, p.tp) <= domain_gpus) best = d;
  }
  return best;
}

LayerRange chunk_layers(const Plan& p, int64_t layers, int64_t s, int64_t c) {
  if (!p.uneven_stages()) {
    const int64_t per = layers / (p.pp * p.vp);
    return LayerRange{p.virtual_stage(s, c) * per, per, c * per};
  }
  // Model chunk k = Plan::virtual_stage(s, c) of K = pp vp (with vp = 1, the stages):
  // the first holds first_stage_layers, the last last_stage_layers (-1: the share), the rest the share.
  const int64_t chunks = p.pp * p.vp;
  const int64_t first_set = std::max<int64_t>(0, p.first_stage_layers), last_set = std::max<int64_t>(0, p.last_stage_layers);
  const int64_t middle = chunks - (p.first_stage_layers >= 0 ? 1 : 0) - (p.last_stage_layers >= 0 ? 1 : 0);
  const int64_t share = middle > 0 ? (layers - first_set - last_set) / middle : 0;
  const int64_t first = p.first_stage_layers >= 0 ? p.first_stage_layers : share;
  const int64_t last = p.last_stage_layers >= 0 ? p.last_stage_layers : share;
  auto size = [&](int64_t k) { return k == 0 ? first : k == chunks - 1 ? last : share; };
  auto start = [&](int64_t k) { return k == 0 ? 0 : first + (k - 1) * share; };  // k <= chunks - 1
  const int64_t k = p.virtual_stage(s, c);
  int64_t offset = 0;  // this rank's layers in its chunks before c
  for (int64_t b = 0; b < c; ++b) offset += size(p.virtual_stage(s, b));
  return LayerRange{start(k), size(k), offset};
}

int64_t stage_layers(const Plan& p, int64_t layers, int64_t s) {
  if (!p.uneven_stages()) return layers / p.pp;
  int64_t n = 0;
  for (int64_t c = 0; c < p.vp; ++c) n += chunk_layers(p, layers, s, c).count;
  return n;
}

int64_t max_stage_layers(const Plan& p, int64_t layers) {
  int64_t most = 0;
  for (int64_t s : {int64_t{0}, p.pp / 2, p.pp - 1}) most = std::max(most, stage_layers(p, layers, s));
  return most;
}

bool balance_uneven_stages(Plan& p, int64_t layers) {
  if (p.vp != 1 || p.pp < 2 || layers % p.pp == 0) return false;
  const int64_t share = (layers + p.pp - 1) / p.pp;
  const int64_t rest = layers - (p.pp - 2) * share;
  const int64_t first = rest / 2;
  const int64_t last = rest - first;
  if (first < 1 || last > share) return false;
  p.first_stage_layers = first;
  p.last_stage_layers = last;
  return true;
}

bool shorten_end_chunks(Plan& p, int64_t layers) {
  const int64_t chunks = p.pp * p.vp;
  if (p.vp < 2 || layers % chunks == 0 || (layers + 2) % chunks != 0) return false;
  p.first_stage_layers = (layers + 2) / chunks - 1;
  p.last_stage_layers = p.first_stage_layers;
  return true;
}

std::vector<ConstraintError> validate_plan(const model::ModelSpec& m, const Plan& p, int64_t gpus,
                                           const hw::GpuSpec& gpu) {
  std::vector<ConstraintError> e;
  auto add = [&e](std::string key, std::string msg) { e.push_back({std::move(key), std::move(msg)}); };
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp}, {"cp", p.cp},
                                {"ep", p.ep}, {"vp", p.vp}, {"mbs", p.mbs}, {"gbs", p.gbs}, {"seq", p.seq}}) {
    if (v < 1) add(name, fmt::format("{}={} must be at least 1", name, v));
  }
  // Upper limits first, so that the products below (dp*mbs, dp*tp*pp*cp, ...) stay inside int64.
  for (const auto& [name, v, most] :
       {std::tuple<const char*, int64_t, int64_t>{"dp", p.dp, kMaxDegree}, {"tp", p.tp, kMaxDegree}, {"pp", p.pp, kMaxDegree},
        {"cp", p.cp, kMaxDegree}, {"ep", p.ep, kMaxDegree}, {"etp", p.etp, kMaxDegree}, {"vp", p.vp, kMaxDegree},
        {"mbs", p.mbs, kMaxBatch},
        {"gbs", p.gbs, kMaxBatch}, {"seq", p.seq, kMaxSeq}}) {
    if (v > most) add(name, fmt::format("{}={} exceeds the largest supported value, {}", name, v, most));
  }
  if (!e.empty()) return e;
  if (static_cast<double>(p.dp) * static_cast<double>(p.tp) * static_cast<double>(p.pp) * static_cast<double>(p.cp) >
      static_cast<double>(kMaxDegree)) {
    add("gpus", fmt::format("dp*tp*pp*cp = {}*{}*{}*{} exceeds the largest supported GPU count, {}", p.dp, p.tp, p.pp,
                            p.cp, kMaxDegree));
    return e;
  }
  if (m.heads % p.tp != 0) add("tp_heads", fmt::format("tp={} does not divide heads={}", p.tp, m.heads));
  if (m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0) {
    add("tp_kv_heads", fmt::format("tp={} and kv_heads={}: neither divides the other", p.tp, m.kv_heads));
  }
  if (m.ffn > 0 && m.ffn % p.tp != 0) add("tp_ffn", fmt::format("tp={} does not divide ffn={}", p.tp, m.ffn));
  if (m.is_moe() && p.expert_tp() > 0 && m.moe.expert_ffn % p.expert_tp() != 0) {
    add("tp_ffn", fmt::format("{}={} does not divide the expert ffn={}", p.etp > 0 ? "etp" : "tp", p.expert_tp(),
                              m.moe.expert_ffn));
  }
  if (p.first_stage_layers < -1 || p.last_stage_layers < -1) {
    add("pp_layers", fmt::format("first/last stage layers ({}, {}) must be >= 0 (-1: the other chunks' share)",
                                 p.first_stage_layers, p.last_stage_layers));
  } else if (p.uneven_stages()) {
    if (p.pp < 2) {
      add("pp_layers", fmt::format("uneven first/last stage layers need pp >= 2 (pp={})", p.pp));
    } else {
      const int64_t chunks = p.pp * p.vp;
      const int64_t middle = chunks - (p.first_stage_layers >= 0 ? 1 : 0) - (p.last_stage_layers >= 0 ? 1 : 0);
      const int64_t rest = m.layers - std::max<int64_t>(0, p.first_stage_layers) - std::max<int64_t>(0, p.last_stage_layers);
      if (middle == 0 ? rest != 0 : (rest < middle || rest % middle != 0)) {
        add("pp_layers", fmt::format("layers={} minus first/last stage layers ({}, {}) = {} does not split evenly over "
                                     "the {} other {}",
                                     m.layers, p.first_stage_layers, p.last_stage_layers, rest, middle,
                                     p.vp > 1 ? "model chunk(s) (pp*vp)" : "stage(s)"));
      }
    }
  } else if (m.layers % (p.pp * p.vp) != 0) {
    add("pp_layers", p.vp > 1 ? fmt::format("pp*vp={}*{}={} does not divide layers={}", p.pp, p.vp, p.pp * p.vp, m.layers)
                              : fmt::format("pp={} does not divide layers={} (uneven stages: --first-stage-layers, "
                                            "--last-stage-layers)",
                                            p.pp, m.layers));
  }
  if (p.gbs % (p.dp * p.mbs) != 0) {
    add("gbs", fmt::format("dp*mbs={}*{}={} does not divide gbs={}", p.dp, p.mbs, p.dp * p.mbs, p.gbs));
  } else if (p.schedule == Schedule::kInterleaved && p.vp > 1) {
    // Megatron-Core's interleaved order: groups of n micro-batches, n in [pp, m]; a last group shorter
    // than pp would leave a stage waiting on itself ("dependency bubbles", schedules.py).
    const int64_t m_mb = p.microbatches(), n = p.microbatch_group_size();
    if (p.microbatch_group == 0 && m_mb % p.pp != 0) {
      add("vp_microbatches", fmt::format("the interleaved schedule needs micro-batches m={} to be a multiple of pp={}",
                                         m_mb, p.pp));
    } else if (n < p.pp || n > m_mb || (m_mb % n != 0 && m_mb % n < p.pp)) {
      add("vp_microbatches", fmt::format("the interleaved schedule's micro-batch group n={} must lie in [pp, m] = [{}, {}] "
                                         "and leave a last group of 0 or at least pp (m mod n = {})",
                                         n, p.pp, m_mb, m_mb % n));
    }
  } else if (p.schedule == Schedule::kInterleavedZeroBubble && p.microbatches() % p.torch_rounds() != 0) {
    // torch's ScheduleInterleavedZeroBubble raises unless its rounds divide m (Plan::torch_rounds).
    add("vp_microbatches", fmt::format("the interleaved-zb schedule runs rounds of m/r micro-batches, r = max(1, "
                                       "floor(m/pp)) = {}: it needs m={} to be a multiple of {}",
                                       p.torch_rounds(), p.microbatches(), p.torch_rounds()));
  } else if (p.schedule == Schedule::kCustom && p.custom != nullptr && p.custom->microbatches != p.microbatches()) {
    add("schedule_csv", fmt::format("{} runs m={} micro-batches per step; the plan has gbs/(dp*mbs) = {}/({}*{}) = {}",
                                    p.custom->file, p.custom->microbatches, p.gbs, p.dp, p.mbs, p.microbatches()));
  } else if (p.schedule == Schedule::kDualPipeV && p.microbatches() < 2 * p.pp) {
    // torch's ScheduleDualPipeV raises below one micro-batch per virtual stage (its order's steady phase
    // runs m - 2 pp + s + 1 pairs on rank s).
    add("vp_microbatches", fmt::format("the dualpipe-v schedule needs at least 2*pp={} micro-batches (found m={})",
                                       2 * p.pp, p.microbatches()));
  }
  if (p.microbatch_group < 0 || (p.microbatch_group > 0 && (p.schedule != Schedule::kInterleaved || p.vp < 2))) {
    add("microbatch_group", fmt::format("a micro-batch group size ({}) applies to the interleaved schedule (vp > 1) and "
                                        "must be positive (interleaved-zb takes torch's rounds)", p.microbatch_group));
  }
  if (p.schedule == Schedule::kCustom) {
    if (p.custom == nullptr) {
      add("schedule_csv", "the custom schedule needs its order (--schedule-csv FILE)");
    } else if (p.custom->ranks != p.pp || p.custom->stages != p.pp * p.vp) {
      add("schedule_csv", fmt::format("{} has {} rank rows and {} stages; the plan has pp={} and pp*vp={}", p.custom->file,
                                      p.custom->ranks, p.custom->stages, p.pp, p.pp * p.vp));
    }
  } else if (p.v_shape() && p.vp != 2) {
    add("vp_schedule", fmt::format("the {} schedule runs two model chunks per pipeline rank in a V: it needs vp=2 "
                                   "(found vp={})",
                                   schedule_name(p.schedule), p.vp));
  } else if (p.schedule == Schedule::kInterleavedZeroBubble && p.vp < 2) {
    add("vp_schedule", fmt::format("the interleaved-zb schedule runs vp > 1 model chunks per pipeline rank (found vp={}); "
                                   "with one chunk it is zero-bubble (ZB-H1)",
                                   p.vp));
  } else if (p.vp > 1 && p.schedule != Schedule::kInterleaved && p.schedule != Schedule::kInterleavedZeroBubble &&
             p.schedule != Schedule::kLoopedBfs && !p.v_shape()) {
    add("vp_schedule", fmt::format("vp={} needs --schedule interleaved, interleaved-zb, looped-bfs, zb-v or dualpipe-v "
                                   "(schedule is {})", p.vp,
                                   schedule_name(p.schedule)));
  }
  if (p.ep_a2a_overlap && !p.combined_1f1b_applies()) {
    add("ep_overlap", fmt::format("overlapping the expert all-to-alls with the other micro-batch (Megatron-Core's combined "
                                  "1F1B) needs ep > 1 and pp=1 (1f1b) or the interleaved schedule with vp > 1 (ep={}, pp={}, "
                                  "schedule {}, vp={}); dualpipe-v pairs its own (--overlap-f-b)",
                                  p.ep, p.pp, schedule_name(p.schedule), p.vp));
  }
  if (p.cp > 1 && p.seq % (2 * p.cp) != 0) {
    add("cp_seq", fmt::format("2*cp={} does not divide seq={} (load-balanced ring attention)", 2 * p.cp, p.seq));
  }
  if (p.cp_comm == CpComm::kA2aP2p && (p.cp_a2a < 1 || p.cp % std::max<int64_t>(1, p.cp_a2a) != 0)) {
    add("cp_heads", fmt::format("cp-comm-type a2a+p2p needs the a2a group size (--hierarchical-cp-sizes) to divide "
                                "cp={} (found {})",
                                p.cp, p.cp_a2a));
  } else if (p.cp_comm != CpComm::kA2aP2p && p.cp_a2a > 0) {
    add("cp_heads", fmt::format("hierarchical CP sizes apply to --cp-comm-type a2a+p2p (found {})", cp_comm_name(p.cp_comm)));
  } else if (p.cp > 1 && (p.cp_comm == CpComm::kA2a || p.cp_comm == CpComm::kA2aP2p) && p.tp >= 1 &&
             m.heads % p.tp == 0) {
    // Ulysses splits each rank's heads over its a2a ranks (TE's flash_attn_a2a_communicate).
    const int64_t over = p.cp_comm == CpComm::kA2a ? p.cp : p.cp_a2a;
    const int64_t q_heads = m.heads / p.tp;
    const int64_t kv_heads = m.kv_heads >= p.tp ? m.kv_heads / p.tp : 1;
    if (q_heads % over != 0 || kv_heads % over != 0) {
      add("cp_heads", fmt::format("cp-comm-type {} splits each rank's heads over {} rank(s): {} query and {} key/value "
                                  "head(s) per TP rank do not divide (p2p or all_gather do not need it)",
                                  cp_comm_name(p.cp_comm), over, q_heads, kv_heads));
    }
  }
  if (p.sp && p.tp == 1) add("sp", "sequence parallelism needs tp > 1");
  if (p.sp && (p.seq / p.cp) % p.tp != 0) {
    add("sp", fmt::format("tp={} does not divide the per-rank sequence seq/cp={}", p.tp, p.seq / p.cp));
  }
  const bool etp_divides = p.etp <= 0 || p.tp % p.etp == 0;  // else the etp key below says why
  if (p.ep > 1) {
    if (!m.is_moe()) {
      add("ep", fmt::format("ep={} needs an MoE model ({} is dense)", p.ep, m.name));
    } else if (m.moe.num_experts % p.ep != 0) {
      add("ep", fmt::format("ep={} does not divide experts={}", p.ep, m.moe.num_experts));
    }
    // Megatron-Core's expert grid: etp x ep x edp x pp ranks, so etp x ep divides tp x dp x cp.
    if (etp_divides && (p.tp * p.dp * p.cp) % (p.expert_tp() * p.ep) != 0) {
      add("ep", p.etp > 0 && p.etp != p.tp
                    ? fmt::format("etp*ep={}*{} does not divide tp*dp*cp={}", p.expert_tp(), p.ep, p.tp * p.dp * p.cp)
                    : fmt::format("ep={} does not divide dp*cp={}", p.ep, p.dp * p.cp));
    }
  }
  if (p.etp < 0) {
    add("etp", fmt::format("etp={} must be at least 1 (0: tp)", p.etp));
  } else if (p.etp > 0 && p.etp != p.tp) {
    if (!m.is_moe()) {
      add("etp", fmt::format("etp={} needs an MoE model ({} is dense)", p.etp, m.name));
    } else if (p.tp % p.etp != 0) {
      add("etp", fmt::format("etp={} does not divide tp={} (the expert TP ranks are the first of each TP group)", p.etp, p.tp));
    } else if (!p.sp) {
      add("etp", fmt::format("etp={} below tp={} needs sequence parallelism (each rank dispatches its own tokens)", p.etp,
                             p.tp));
    }
  }
  if (p.shard_group > 0) {
    if (p.dp % p.shard_group != 0) {
      add("shard", fmt::format("shard group {} does not divide dp={}", p.shard_group, p.dp));
    }
    if (p.sharding == Sharding::kNone && p.shard_group > 1) {
      add("shard", fmt::format("shard group {} given without sharding (choose zero1|zero2|zero3)", p.shard_group));
    }
    // EP takes its ranks from one shard group (torchtitan's dp_shard x cp mesh; Megatron-Core's expert
    // shards): the expert shard group is that group's ranks over ep.
    if (p.sharding != Sharding::kNone && p.ep > 1 && p.dp % p.shard_group == 0 && etp_divides &&
        (p.shard_group * p.cp * p.tp) % (p.expert_tp() * p.ep) != 0) {
      add("shard", p.etp > 0 && p.etp != p.tp
                       ? fmt::format("etp*ep={}*{} does not divide the shard group x cp x tp={}x{}x{} (EP lies inside a "
                                     "shard group)",
                                     p.expert_tp(), p.ep, p.shard_group, p.cp, p.tp)
                       : fmt::format("ep={} does not divide the shard group x cp={}x{}={} (EP lies inside a shard group)",
                                     p.ep, p.shard_group, p.cp, p.shard_group * p.cp));
    }
  }
  if (p.recompute == Recompute::kSelective) {
    if (std::string why = recompute_modules_error(m, p.recompute_modules); !why.empty()) add("recompute_modules", why);
  }
  if (p.recompute_layers < -1) {
    add("recompute_layers", fmt::format("recompute_layers={}: expected -1 (every layer) or a count >= 0", p.recompute_layers));
  } else if (p.recompute == Recompute::kFull && p.recompute_layers >= 0 && e.empty()) {
    const int64_t most = max_stage_layers(p, m.layers);
    if (most > 0 && p.recompute_layers > most) {
      add("recompute_layers",
          fmt::format("recompute_layers={} exceeds the layers per pipeline rank ({})", p.recompute_layers, most));
    }
  }
  if (p.offload_layers == 0 || p.offload_layers < -1) {
    add("offload_layers", fmt::format("offload_layers={}: expected -1 (every activation) or a count >= 1", p.offload_layers));
  } else if (p.offload_layers > 0 && !p.activation_offload) {
    add("offload_layers", fmt::format("offload_layers={} given without activation offload", p.offload_layers));
  } else if (p.offload_layers > 0 && e.empty()) {
    const int64_t most = max_stage_layers(p, m.layers);
    if (most > 0 && p.offload_layers > most) {
      add("offload_layers", fmt::format("offload_layers={} exceeds the layers per pipeline rank ({})", p.offload_layers, most));
    }
  }
  if (!(p.optimizer_offload_fraction > 0.0 && p.optimizer_offload_fraction <= 1.0)) {
    add("optimizer_offload_fraction",
        fmt::format("optimizer offload fraction {} must be in (0, 1]", p.optimizer_offload_fraction));
  } else if (p.optimizer_offload_fraction < 1.0 && !p.optimizer_offload) {
    add("optimizer_offload_fraction",
        fmt::format("optimizer offload fraction {} given without optimizer offload", p.optimizer_offload_fraction));
  }
  if (!(p.cpu_adam_params_per_s > 0.0 && std::isfinite(p.cpu_adam_params_per_s))) {
    add("cpu_adam_rate", fmt::format("CPU Adam rate {} must be a positive number of parameters per second", p.cpu_adam_params_per_s));
  }
  if (!(p.load_imbalance >= 1.0 && std::isfinite(p.load_imbalance))) {
    add("load_imbalance", fmt::format("load imbalance {} must be a finite number >= 1", p.load_imbalance));
  }
  if (!(p.moe_ranks_per_token >= 0.0 && std::isfinite(p.moe_ranks_per_token))) {
    add("moe_ranks_per_token", fmt::format("MoE ranks per token {} must be a finite number >= 0", p.moe_ranks_per_token));
  } else if (p.moe_ranks_per_token > 0.0) {
    if (p.moe_dispatcher != MoeDispatcher::kDeepEp) {
      add("moe_ranks_per_token", "MoE ranks per token applies to the deepep dispatcher (alltoall sends top_k copies)");
    } else if (m.is_moe() && p.ep > 1 && (p.moe_ranks_per_token < 1.0 ||
                              p.moe_ranks_per_token > static_cast<double>(std::min(m.moe.top_k, p.ep)))) {
      add("moe_ranks_per_token", fmt::format("MoE ranks per token {} must be in [1, min(top_k, ep)] = [1, {}]",
                                             p.moe_ranks_per_token, std::min(m.moe.top_k, p.ep)));
    }
  }
  if (!(p.capacity_factor >= 0.0 && std::isfinite(p.capacity_factor))) {
    add("capacity_factor", fmt::format("capacity factor {} must be a finite number >= 0", p.capacity_factor));
  }
  if (!(p.grad_density > 0.0 && p.grad_density <= 1.0)) {
    add("grad_density", fmt::format("gradient density {} must be in (0, 1]", p.grad_density));
  }
  if (p.fp8_attention && p.precision != hw::DType::kFp8) {
    add("fp8_attention", fmt::format("fp8 attention applies to precision fp8 (precision is {})", hw::dtype_name(p.precision)));
  }
  if (p.fp8_recipe != Fp8Recipe::kDelayed && p.precision != hw::DType::kFp8) {
    add("fp8_recipe", fmt::format("the {} fp8 recipe applies to precision fp8 (precision is {})", fp8_recipe_name(p.fp8_recipe),
                                  hw::dtype_name(p.precision)));
  }
  if (p.fp8_recipe == Fp8Recipe::kMxfp8 && gpu.architecture != "blackwell") {
    add("fp8_recipe", fmt::format("MXFP8 needs Blackwell's block-scaled tensor cores (GPU '{}' is {})", gpu.name,
                                  gpu.architecture.empty() ? std::string("of unknown architecture") : gpu.architecture));
  }
  if (p.master_weights == MasterWeights::kRemainders &&
      (p.optimizer_dtype != hw::DType::kFp32 || p.activation_dtype() != hw::DType::kBf16)) {
    // Apex's store_param_remainders: the low 16 bits that make a bf16 weight its fp32 master value.
    add("master_weights", fmt::format("remainders complete bf16 weights to an fp32 optimizer (optimizer dtype {}, weights {})",
                                      hw::dtype_name(p.optimizer_dtype), hw::dtype_name(p.activation_dtype())));
  }
  if (p.bucket_bytes < 1) add("bucket_bytes", fmt::format("bucket size {} must be positive", p.bucket_bytes));
  if (p.fsdp_prefetch < 0) add("fsdp_prefetch", fmt::format("fsdp prefetch {} must be >= 0", p.fsdp_prefetch));
  if (p.unsharded_layers > 0 && p.fsdp_keeps_gathered()) {
    add("unsharded_layers", fmt::format("unsharded layers {} with pp={}: FSDP under pipeline parallelism keeps every layer "
                                        "gathered through the step already (PyTorch's pipelining; docs/training.md)",
                                        p.unsharded_layers, p.pp));
  }
  // Last: a wrong degree usually breaks the product too, and the divisibility message says more.
  if (p.gpus() != gpus) {
    add("gpus", fmt::format("dp*tp*pp*cp = {}*{}*{}*{} = {} does not equal gpus={}", p.dp, p.tp, p.pp, p.cp, p.gpus(),
                            gpus));
  }
  if (!gpu.peak(p.precision)) {
    add("precision", fmt::format("GPU '{}' has no dense {} peak", gpu.name, hw::dtype_name(p.precision)));
  }
  return e;
}

void require_valid_plan(const model::ModelSpec& model, const Plan& plan, int64_t gpus, const hw::GpuSpec& gpu,
                        const Where& where) {
  const auto errors = validate_plan(model, plan, gpus, gpu);
  if (!errors.empty()) {
    std::string more = errors.size() > 1 ? fmt::format(" (and {} more)", errors.size() - 1) : "";
    throw InputError(where.with_key(errors.front().key), errors.front().message + more);
  }
}

}  // namespace orrery::train
