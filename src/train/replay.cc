#include "train/replay.h"

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "compute/compute_model.h"
#include "core/error.h"
#include "core/strings.h"

namespace orrery::train {
namespace {

const std::vector<std::string>& archs() {
  static const std::vector<std::string> v = {"gpt", "llama"};
  return v;
}

void check_choice(const std::string& value, const std::vector<std::string>& choices, const Where& where,
                  bool empty_ok) {
  if (value.empty() && empty_ok) return;
  for (const std::string& c : choices) {
    if (value == c) return;
  }
  throw InputError(where, fmt::format("expected one of {}{}, found '{}'", fmt::join(choices, " | "),
                                      empty_ok ? " or empty" : "", value),
                   suggest(value, choices));
}

std::string fmt_count(int64_t v) { return fmt::format("{}", v); }

}  // namespace

const std::vector<std::string>& measured_run_columns() {
  static const std::vector<std::string> v = {
      "id",  "source", "arch", "params_b", "layers", "hidden", "heads", "kv_heads", "ffn",       "vocab",
      "seq", "gpu",    "gpus", "tp",       "pp",     "dp",     "cp",    "ep",       "vp",        "mbs",
      "gbs", "sp",     "recompute", "precision", "dp_sharding", "metric", "value",  "notes"};
  return v;
}

const std::vector<std::string>& measured_run_optional_columns() {
  static const std::vector<std::string> v = {"model",           "capacity_factor",     "grad_bytes",        "attention_kernel",
                                             "moe_dispatcher", "moe_ranks_per_token", "first_stage_layers", "last_stage_layers",
                                             "optimizer_dtype", "master_weights", "fp8_recipe", "etp", "dropout",
                                             "cp_comm_type", "tp_comm_overlap", "microbatch_group_size", "ep_overlap",
                                             "schedule"};
  return v;
}

const std::vector<std::string>& measured_run_metrics() {
  static const std::vector<std::string> v = {"tflops_per_gpu", "step_time_s", "tokens_per_s_per_gpu", "peak_memory_gib",
                                             "peak_memory_gb"};
  return v;
}

const std::vector<MeasuredGpu>& measured_gpus() {
  // catalog/gpus.yaml names; NIC per GPU as the sources state their clusters.
  static const std::vector<MeasuredGpu> v = {
      {"a100-80g", "a100-sxm-80gb", 200},          // Selene: 8 x 200 Gb/s HDR per 8-GPU node
      {"h100-sxm", "h100-sxm", 400},               // DGX H100: 8 x 400 Gb/s NDR
      {"h100-sxm-96g-500w", "h100-sxm-96gb", 400},  // Grand Teton: 400 Gb/s RDMA per GPU; 500 W in the catalog
      {"h800", "h800", 400},                        // assumption: 400 Gb/s per GPU (the PR does not say)
      {"gb200", "gb200", 400},                      // GB200 NVL72 tray: 4 x ConnectX-7 400 Gb/s, one per GPU
      {"b200", "b200", 400},                        // DGX B200: 8 x ConnectX-7 400 Gb/s, one per GPU
  };
  return v;
}

const MeasuredGpu& measured_gpu(const MeasuredRun& r) {
  std::vector<std::string> ids;
  for (const MeasuredGpu& g : measured_gpus()) {
    if (r.gpu == g.id) return g;
    ids.emplace_back(g.id);
  }
  throw InputError(Where{r.file, r.line, "gpu"},
                   fmt::format("unknown GPU id '{}' (row {}); expected one of {}", r.gpu, r.id, fmt::join(ids, " | ")),
                   suggest(r.gpu, ids));
}

std::vector<MeasuredRun> read_measured_runs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(Where{path, 0, ""}, "cannot open the results table");
  std::vector<std::string> header;
  std::map<std::string, size_t> col;
  std::vector<MeasuredRun> runs;
  std::set<std::string> ids;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string_view t = trim(line);
    if (t.empty() || t.front() == '#') continue;
    const Where at{path, n, ""};
    std::vector<std::string> cells;
    for (std::string_view c : split_csv(line)) cells.emplace_back(c);
    if (header.empty()) {
      header = cells;
      for (size_t k = 0; k < header.size(); ++k) col[header[k]] = k;
      for (const std::string& c : measured_run_columns()) {
        if (col.count(c) == 0) {
          throw InputError(at.with_key(c), fmt::format("the header has no column '{}'; expected the columns {}", c,
                                                       fmt::join(measured_run_columns(), ",")),
                           suggest(c, header));
        }
      }
      continue;
    }
    if (cells.size() != header.size()) {
      throw InputError(at, fmt::format("expected {} cells as in the header, found {}", header.size(), cells.size()));
    }
    auto cell = [&](const std::string& c) -> const std::string& { return cells[col.at(c)]; };
    static const std::string kNone;
    auto optional = [&](const std::string& c) -> const std::string& { return col.count(c) ? cells[col.at(c)] : kNone; };
    MeasuredRun r;
    r.file = path;
    r.line = n;
    r.id = cell("id");
    if (r.id.empty()) throw InputError(at.with_key("id"), "empty; every row needs an id");
    if (!ids.insert(r.id).second) throw InputError(at.with_key("id"), fmt::format("duplicate id '{}'", r.id));
    auto integer = [&](const std::string& c, int64_t min, int64_t max, bool empty_ok) -> int64_t {
      const std::string& v = cell(c);
      if (v.empty()) {
        if (empty_ok) return 0;
        throw InputError(at.with_key(c), fmt::format("empty; expected an integer in [{}, {}] (row {})", min, max, r.id));
      }
      int64_t x = 0;
      size_t used = 0;
      try {
        x = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || x < min || x > max) {
        throw InputError(at.with_key(c), fmt::format("expected an integer in [{}, {}], found '{}' (row {})", min, max, v, r.id));
      }
      return x;
    };
    auto real = [&](const std::string& c) -> double {
      const std::string& v = cell(c);
      double x = 0.0;
      size_t used = 0;
      try {
        x = std::stod(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (v.empty() || used != v.size() || !std::isfinite(x) || !(x > 0.0) || x > 1e12) {
        throw InputError(at.with_key(c), fmt::format("expected a positive number, found '{}' (row {})", v, r.id));
      }
      return x;
    };
    constexpr int64_t kBig = int64_t{1} << 24;  // sizes, degrees and counts (check_training_scale's bound)
    r.source = cell("source");
    // A named model replaces arch and the sizes (empty cells allowed; given ones are checked against it).
    const std::string& model = optional("model");
    const bool named = !model.empty();
    if (named) {
      const bool file = model.find('/') != std::string::npos || (model.size() > 5 && model.substr(model.size() - 5) == ".json");
      r.model = model;
      if (file && model.front() != '/') {
        const size_t slash = path.find_last_of('/');
        r.model = slash == std::string::npos ? model : path.substr(0, slash + 1) + model;
      }
      if (file && !std::ifstream(r.model)) {
        throw InputError(at.with_key("model"), fmt::format("row {}: no config.json at '{}' (a path is relative to the table's folder)", r.id, r.model));
      }
    }
    r.arch = cell("arch");
    check_choice(r.arch, archs(), at.with_key("arch"), named);
    r.params_b = named && cell("params_b").empty() ? 0.0 : real("params_b");
    r.layers = integer("layers", 1, kBig, named);
    r.hidden = integer("hidden", 1, kBig, named);
    r.heads = integer("heads", 1, kBig, named);
    r.kv_heads = integer("kv_heads", 1, kBig, true);
    if (r.kv_heads == 0 && !named) r.kv_heads = r.heads;
    r.ffn = integer("ffn", 1, kBig, true);
    if (r.ffn == 0 && !named) r.ffn = 4 * r.hidden;
    r.vocab = integer("vocab", 1, kBig, named);
    r.seq = integer("seq", 1, kBig, true);
    r.gpu = cell("gpu");
    measured_gpu(r);
    r.gpus = integer("gpus", 1, kBig, false);
    r.tp = integer("tp", 1, kBig, false);
    r.pp = integer("pp", 1, kBig, false);
    r.dp = integer("dp", 1, kBig, false);
    r.cp = integer("cp", 1, kBig, false);
    r.ep = integer("ep", 1, kBig, false);
    r.vp = integer("vp", 1, kBig, true);
    r.mbs = integer("mbs", 1, kBig, true);
    r.gbs = integer("gbs", 1, int64_t{1} << 30, false);
    r.sp = cell("sp");
    check_choice(r.sp, {"yes", "no"}, at.with_key("sp"), true);
    // The plan's own parsers (train/plan.h), so a row admits exactly what `orrery train` does.
    r.recompute = cell("recompute");
    if (!r.recompute.empty()) parse_recompute(r.recompute, at.with_key("recompute"));
    r.precision = cell("precision");
    parse_precision(r.precision, at.with_key("precision"));
    r.dp_sharding = cell("dp_sharding");
    if (!r.dp_sharding.empty()) parse_sharding(r.dp_sharding, at.with_key("dp_sharding"));
    r.metric = cell("metric");
    check_choice(r.metric, measured_run_metrics(), at.with_key("metric"), false);
    r.value = real("value");
    r.notes = cell("notes");
    if (named && r.metric == "tflops_per_gpu") {
      throw InputError(at.with_key("metric"), fmt::format("row {}: tflops_per_gpu needs arch and its sizes (the dense "
                                                          "GPT/Llama formula); a model row reports step_time_s, "
                                                          "tokens_per_s_per_gpu or peak memory", r.id));
    }
    if (const std::string& v = optional("capacity_factor"); !v.empty()) r.capacity_factor = real("capacity_factor");
    if (const std::string& v = optional("grad_bytes"); !v.empty()) {
      r.grad_bytes = integer("grad_bytes", 2, 4, false);
      if (r.grad_bytes == 3) throw InputError(at.with_key("grad_bytes"), fmt::format("expected 2 or 4, found 3 (row {})", r.id));
    }
    if (!optional("first_stage_layers").empty()) r.first_stage_layers = integer("first_stage_layers", 0, kBig, false);
    if (!optional("last_stage_layers").empty()) r.last_stage_layers = integer("last_stage_layers", 0, kBig, false);
    if (!optional("etp").empty()) r.etp = integer("etp", 1, kBig, false);
    if (!optional("microbatch_group_size").empty()) r.microbatch_group = integer("microbatch_group_size", 1, kBig, false);
    if (const std::string& v = optional("dropout"); !v.empty()) {
      size_t used = 0;
      try {
        r.dropout = std::stod(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || !(r.dropout >= 0.0 && r.dropout < 1.0)) {
        throw InputError(at.with_key("dropout"), fmt::format("expected a probability in [0, 1), found '{}' (row {})", v, r.id));
      }
    }
    r.attention_kernel = optional("attention_kernel");
    if (!r.attention_kernel.empty()) compute::parse_attention_kernel(r.attention_kernel, at.with_key("attention_kernel"));
    r.optimizer_dtype = optional("optimizer_dtype");
    if (!r.optimizer_dtype.empty()) parse_optimizer_dtype(r.optimizer_dtype, at.with_key("optimizer_dtype"));
    r.fp8_recipe = optional("fp8_recipe");
    if (!r.fp8_recipe.empty()) parse_fp8_recipe(r.fp8_recipe, at.with_key("fp8_recipe"));
    r.cp_comm_type = optional("cp_comm_type");
    if (!r.cp_comm_type.empty()) parse_cp_comm(r.cp_comm_type, at.with_key("cp_comm_type"));
    r.tp_comm_overlap = to_lower(trim(optional("tp_comm_overlap")));
    if (!r.tp_comm_overlap.empty() && r.tp_comm_overlap != "yes" && r.tp_comm_overlap != "te" &&
        r.tp_comm_overlap != "async" && r.tp_comm_overlap != "no") {
      throw InputError(at.with_key("tp_comm_overlap"),
                       fmt::format("expected yes, te, async or no, found '{}' (row {})", optional("tp_comm_overlap"), r.id),
                       suggest(r.tp_comm_overlap, {"yes", "te", "async", "no"}));
    }
    r.ep_overlap = to_lower(trim(optional("ep_overlap")));
    if (!r.ep_overlap.empty() && r.ep_overlap != "yes" && r.ep_overlap != "no") {
      throw InputError(at.with_key("ep_overlap"), fmt::format("expected yes or no, found '{}' (row {})", optional("ep_overlap"), r.id),
                       suggest(r.ep_overlap, {"yes", "no"}));
    }
    r.schedule = optional("schedule");
    if (!r.schedule.empty()) r.schedule = std::string(schedule_name(parse_schedule(r.schedule, at.with_key("schedule"))));
    r.master_weights = optional("master_weights");
    if (!r.master_weights.empty()) parse_master_weights(r.master_weights, at.with_key("master_weights"));
    r.moe_dispatcher = optional("moe_dispatcher");
    if (!r.moe_dispatcher.empty()) parse_moe_dispatcher(r.moe_dispatcher, at.with_key("moe_dispatcher"));
    if (const std::string& v = optional("moe_ranks_per_token"); !v.empty()) {
      r.moe_ranks_per_token = real("moe_ranks_per_token");
      if (r.moe_dispatcher != "deepep") {
        throw InputError(at.with_key("moe_ranks_per_token"),
                         fmt::format("row {}: applies to moe_dispatcher deepep (alltoall sends top_k copies)", r.id));
      }
    }
    if (r.tp * r.pp * r.dp * r.cp != r.gpus) {
      throw InputError(at.with_key("gpus"), fmt::format("row {}: tp x pp x dp x cp = {} x {} x {} x {} = {}, not gpus = {}",
                                                        r.id, r.tp, r.pp, r.dp, r.cp, r.tp * r.pp * r.dp * r.cp, r.gpus));
    }
    try {
      if (!named) measured_model(r);  // the sizes make a valid model (heads divide hidden, ...)
    } catch (const InputError& e) {
      throw InputError(at.with_key(e.where().key), fmt::format("row {}: {}", r.id, e.message()), e.hint());
    }
    runs.push_back(std::move(r));
  }
  if (header.empty()) throw InputError(Where{path, 0, ""}, "no header line; expected the columns of docs/training.md");
  if (runs.empty()) throw InputError(Where{path, 0, ""}, "the table has a header but no rows");
  return runs;
}

model::ModelSpec measured_model(const MeasuredRun& r) {
  model::GenericArch g;
  g.layers = r.layers;
  g.hidden = r.hidden;
  g.heads = r.heads;
  g.kv_heads = r.kv_heads;
  g.ffn = r.ffn;
  g.vocab = r.vocab;
  g.seq = r.seq > 0 ? r.seq : 4096;
  model::ModelSpec m = r.arch == "gpt" ? model::ModelSpec::gpt(g) : model::ModelSpec::llama(g);
  // Embedding tying: the choice whose parameter count is nearer the stated size (Megatron-Core's E rows
  // untie: E1's 1.7 B is 1.49 B tied + the 0.27 B LM head).
  model::ModelSpec other = m;
  other.tied_embeddings = !m.tied_embeddings;
  const double pb = r.params_b * 1e9;
  if (std::fabs(static_cast<double>(other.total_params()) - pb) < std::fabs(static_cast<double>(m.total_params()) - pb)) {
    return other;
  }
  return m;
}

void check_measured_model(const MeasuredRun& r, const model::ModelSpec& m) {
  const int64_t ffn = m.is_moe() ? m.moe.expert_ffn : m.ffn;
  const std::pair<const char*, std::pair<int64_t, int64_t>> sizes[] = {
      {"layers", {r.layers, m.layers}}, {"hidden", {r.hidden, m.hidden}},     {"heads", {r.heads, m.heads}},
      {"kv_heads", {r.kv_heads, m.kv_heads}}, {"ffn", {r.ffn, ffn}}, {"vocab", {r.vocab, m.vocab}}};
  for (const auto& [column, v] : sizes) {
    if (v.first != 0 && v.first != v.second) {
      throw InputError(Where{r.file, r.line, column},
                       fmt::format("row {}: {} = {} but the model '{}' has {}{}", r.id, column, v.first, r.model, v.second,
                                   std::string(column) == "ffn" && m.is_moe() ? " (a routed expert's)" : ""));
    }
  }
}

std::vector<std::pair<std::string, std::string>> replay_flags(const MeasuredRun& r) {
  const MeasuredGpu& gpu = measured_gpu(r);
  const int64_t vp = r.vp > 0 ? r.vp : 1;
  const bool old_megatron = r.source == "megatron-sc21-t1" || r.source == "korthikanti-t5";
  const bool torchtitan = r.source == "torchtitan-2412";
  // Megatron-Core's README states TP overlap; NeMo's published configurations set ub_tp_comm_overlap, and
  // Megatron-Bridge's performance recipes tp_comm_overlap.
  const bool tp_overlap = r.source == "megatron-core-r0.8" || r.source.rfind("nemo-dgxc", 0) == 0 ||
                          r.source.rfind("mbridge", 0) == 0;
  std::string recompute = r.recompute.empty() ? "none" : r.recompute;
  // torchtitan's "selective" is its op-level policy (selective_ac_option = 'op' in its Llama 3 configs).
  if (torchtitan && recompute == "selective") recompute = "selective-op";
  std::vector<std::pair<std::string, std::string>> f;
  if (!r.model.empty()) {
    f.emplace_back("--model", r.model);
  } else {
    const model::ModelSpec m = measured_model(r);
    f = {{"--arch", r.arch},
         {"--layers", fmt_count(r.layers)},
         {"--hidden", fmt_count(r.hidden)},
         {"--heads", fmt_count(r.heads)},
         {"--kv-heads", fmt_count(r.kv_heads)},
         {"--ffn", fmt_count(r.ffn)},
         {"--vocab", fmt_count(r.vocab)},
         {"--tie-embeddings", m.tied_embeddings ? "yes" : "no"}};
  }
  const std::string attention = !r.attention_kernel.empty() ? r.attention_kernel : torchtitan ? "fa2" : "default";
  const std::vector<std::pair<std::string, std::string>> rest = {
      {"--seq", fmt_count(r.seq > 0 ? r.seq : 4096)},
      {"--gpu", gpu.catalog},
      {"--nic-bandwidth", fmt::format("{:g} Gb/s", gpu.nic_gbps)},
      {"--gpus", fmt_count(r.gpus)},
      {"--tp", fmt_count(r.tp)},
      {"--pp", fmt_count(r.pp)},
      {"--dp", fmt_count(r.dp)},
      {"--cp", fmt_count(r.cp)},
      {"--ep", fmt_count(r.ep)},
      {"--vp", fmt_count(vp)},
      {"--schedule", !r.schedule.empty() ? r.schedule : vp > 1 ? "interleaved" : "1f1b"},
      {"--mbs", fmt_count(r.mbs > 0 ? r.mbs : 1)},
      {"--gbs", fmt_count(r.gbs)},
      {"--sp", r.sp.empty() ? (r.tp > 1 ? "yes" : "no") : r.sp},
      {"--recompute", recompute},
      {"--precision", r.precision},
      {"--dp-sharding", r.dp_sharding.empty() ? "none" : r.dp_sharding},
      {"--grad-bytes", fmt_count(r.grad_bytes > 0 ? r.grad_bytes : 4)},
      {"--flash-attention", old_megatron ? "no" : "yes"},
      {"--attention-kernel", attention},
      {"--fusion", r.notes.find("eager") != std::string::npos          ? "eager"
                   : r.notes.find("torch.compile") != std::string::npos ? "compile"
                                                                          : "fused"},
      // Megatron's weight gradients go into fp32 main gradients inside the GEMM (gradient-accumulation
      // fusion, on by default since Megatron-LM added it after the SC21 paper's runs); torchtitan's
      // autograd writes bf16 gradients that FSDP2 reduces.
      {"--grad-accum-fusion", torchtitan || r.source == "megatron-sc21-t1" ? "no" : "yes"},
      {"--tp-comm-overlap", !r.tp_comm_overlap.empty() ? r.tp_comm_overlap : tp_overlap ? "yes" : "no"},
      // torchtitan's launcher (run_llama_train.sh, now run_train.sh) sets expandable_segments:True.
      {"--allocator", torchtitan ? "expandable" : "classic"},
  };
  f.insert(f.end(), rest.begin(), rest.end());
  if (r.capacity_factor > 0.0) f.emplace_back("--capacity-factor", fmt::format("{:g}", r.capacity_factor));
  if (!r.moe_dispatcher.empty()) f.emplace_back("--moe-dispatcher", r.moe_dispatcher);
  if (r.moe_ranks_per_token > 0.0) f.emplace_back("--moe-ranks-per-token", fmt::format("{:g}", r.moe_ranks_per_token));
  if (r.first_stage_layers >= 0) f.emplace_back("--first-stage-layers", fmt_count(r.first_stage_layers));
  if (r.last_stage_layers >= 0) f.emplace_back("--last-stage-layers", fmt_count(r.last_stage_layers));
  if (r.etp > 0) f.emplace_back("--etp", fmt_count(r.etp));
  if (r.microbatch_group > 0) f.emplace_back("--microbatch-group-size", fmt_count(r.microbatch_group));
  if (!r.optimizer_dtype.empty()) f.emplace_back("--optimizer-dtype", r.optimizer_dtype);
  if (!r.master_weights.empty()) f.emplace_back("--master-weights", r.master_weights);
  if (!r.fp8_recipe.empty()) f.emplace_back("--fp8-recipe", r.fp8_recipe);
  if (!r.cp_comm_type.empty()) f.emplace_back("--cp-comm-type", r.cp_comm_type);
  if (!r.ep_overlap.empty()) f.emplace_back("--overlap-moe-expert-parallel-comm", r.ep_overlap);
  // Sharded data parallelism: torchtitan and NeMo AutoModel run PyTorch's FSDP2 (fully_shard), whose
  // collectives copy their buffers; Megatron-Bridge's "FSDP" is Megatron-FSDP (buffer views).
  if (r.dp_sharding == "fsdp" || r.dp_sharding == "zero3" || r.dp_sharding == "hsdp") {
    const bool fsdp2 = torchtitan || r.source.rfind("nemo-automodel", 0) == 0;
    f.emplace_back("--fsdp-impl", fsdp2 ? "fsdp2" : "flat");
  }
  if (r.dropout >= 0.0) {
    f.emplace_back("--attention-dropout", fmt::format("{:g}", r.dropout));
    f.emplace_back("--hidden-dropout", fmt::format("{:g}", r.dropout));
  }
  return f;
}

std::string replay_command(const MeasuredRun& r) {
  std::string out = "orrery train";
  for (const auto& [flag, value] : replay_flags(r)) {
    out += " " + flag;
    if (!value.empty()) out += value.find(' ') != std::string::npos ? " '" + value + "'" : " " + value;
  }
  return out;
}

double measured_metric(const MeasuredRun& r, const model::ModelSpec& model, const Plan& plan, const TrainResult& res) {
  const double t = res.step.step_time.to_seconds();
  const double B = static_cast<double>(plan.gbs), s = static_cast<double>(plan.seq),
               L = static_cast<double>(model.layers), h = static_cast<double>(model.hidden),
               V = static_cast<double>(model.vocab), gpus = static_cast<double>(plan.gpus());
  if (r.metric == "tflops_per_gpu" && r.source == "megatron-sc21-t1") {
    return 96.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h)) / (t * gpus) * 1e-12;
  }
  if (r.metric == "tflops_per_gpu") {
    // Megatron-Core counts a gated (SwiGLU) MLP's three matrices as 3/2 of a plain one's two.
    const double g = static_cast<double>(model.kv_heads), a = static_cast<double>(model.heads),
                 f = static_cast<double>(model.ffn) * (model.mlp == model::MlpKind::kGated ? 1.5 : 1.0);
    return 12.0 * B * s * L * h * h * (1.0 + g / a + s / h + f / h + V / (2.0 * L * h)) / (t * gpus) * 1e-12;
  }
  if (r.metric == "step_time_s") return t;
  if (r.metric == "tokens_per_s_per_gpu") return res.tokens_per_s_per_gpu;
  const MemoryBreakdown& m = res.memory.stages.at(static_cast<size_t>(res.memory.peak_stage)).memory;
  if (r.metric == "peak_memory_gib") return (m.tensors() + m.allocator).to_gib();
  return m.tensors().to_gb();  // peak_memory_gb (read_measured_runs admits no other metric)
}

}  // namespace orrery::train
