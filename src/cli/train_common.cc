// Pieces shared by `orrery train` and `orrery plan train`.
#include "cli/train_common.h"

#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/app.h"
#include "core/error.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/calibration_file.h"
#include "model/op_inventory.h"
#include "train/plan.h"
#include "train/schedule_csv.h"
#include "net/topology_builders.h"

namespace orrery::cli {

namespace {

const Where kCl{"<command line>", 0, ""};

}  // namespace

std::vector<int64_t> parse_dims(const std::string& text, size_t n, const char* flag, const char* example) {
  std::vector<int64_t> dims;
  std::stringstream ss(to_lower(trim(text)));
  std::string item;
  bool ok = true;
  while (std::getline(ss, item, 'x')) {
    try {
      size_t used = 0;
      const int64_t v = std::stoll(item, &used);
      ok = ok && used == item.size() && v > 0;
      dims.push_back(v);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || dims.size() != n) {
    throw InputError(kCl.with_key(flag), fmt::format("expected {} positive integers separated by 'x', e.g. {}; found '{}'",
                                                     n, example, text));
  }
  return dims;
}

int64_t apply_video(model::ModelSpec& m, const VideoArgs& a, int64_t seq, bool seq_given) {
  const bool video_flags = a.frames != 0 || a.height != 0 || a.width != 0 || a.text_tokens != 0 ||
                           !a.resolution.empty() || !a.vae_compression.empty() || !a.patch.empty();
  if (!m.is_dit()) {
    if (video_flags) {
      const char* flag = a.frames != 0 ? "--frames" : !a.resolution.empty() ? "--resolution" : "--patch";
      throw InputError(kCl.with_key(flag), fmt::format("video flags need a video diffusion transformer; {} is a {} model",
                                                       m.name, model::to_string(m.family)),
                       "e.g. --model wan2.1-t2v-14b");
    }
    return seq;
  }
  model::DitSpec& v = m.dit;
  if (!a.resolution.empty()) {
    const std::vector<int64_t> hw = parse_dims(a.resolution, 2, "--resolution", "720x1280 (height x width)");
    v.height = hw[0];
    v.width = hw[1];
  }
  // Explicit values (negative ones too) reach the geometry check, which names them.
  if (a.frames != 0) v.frames = a.frames;
  if (a.height != 0) v.height = a.height;
  if (a.width != 0) v.width = a.width;
  if (a.text_tokens != 0) v.text_tokens = a.text_tokens;
  if (!a.vae_compression.empty()) {
    const std::vector<int64_t> c = parse_dims(a.vae_compression, 3, "--vae-compression", "4x8x8 (time x height x width)");
    if (c[1] != c[2]) {
      throw InputError(kCl.with_key("--vae-compression"),
                       fmt::format("the height and width compression must be equal, found '{}'", a.vae_compression));
    }
    v.vae_t = c[0];
    v.vae_s = c[1];
  }
  if (!a.patch.empty()) {
    const std::vector<int64_t> p = parse_dims(a.patch, 3, "--patch", "1x2x2 (time x height x width)");
    v.patch_t = p[0];
    v.patch_h = p[1];
    v.patch_w = p[2];
  }
  const model::FieldError e = model::video_error(v);
  if (!e.field.empty()) {
    const std::string& f = e.field;
    const char* flag = f == "frames"                  ? "--frames"
                       : f == "height"                ? (a.height != 0 ? "--height" : "--resolution")
                       : f == "width"                 ? (a.width != 0 ? "--width" : "--resolution")
                       : f == "text_tokens"           ? "--text-tokens"
                       : f == "vae_t" || f == "vae_s" ? "--vae-compression"
                       : f.rfind("patch", 0) == 0     ? "--patch"
                                                      : "--model";
    throw InputError(kCl.with_key(flag), e.message);
  }
  const int64_t tokens = v.tokens();
  if (seq_given && seq != tokens) {
    throw InputError(kCl.with_key("--seq"),
                     fmt::format("a DiT's sequence is its video token count, {} here ({} frames of {}x{}); drop --seq "
                                 "or set it to {}",
                                 tokens, v.frames, v.height, v.width, tokens));
  }
  return tokens;
}

void check_training_scale(const model::ModelSpec& model, int64_t seq, int64_t gbs, int64_t gpus,
                          const hw::GpuSpec& gpu, hw::DType precision) {
  constexpr int64_t kMaxGpus = train::kMaxDegree, kMaxSeq = train::kMaxSeq, kMaxGbs = train::kMaxBatch;
  constexpr double kMaxStepAtPeak = 1e5;  // seconds
  if (gpus <= 0 || gpus > kMaxGpus) {
    throw InputError(kCl.with_key("--gpus"), fmt::format("expected a positive GPU count up to {}, found {}", kMaxGpus, gpus));
  }
  if (seq <= 0 || seq > kMaxSeq) {
    throw InputError(kCl.with_key("--seq"), fmt::format("expected a positive sequence length up to {}, found {}", kMaxSeq, seq));
  }
  if (gbs <= 0 || gbs > kMaxGbs) {
    throw InputError(kCl.with_key("--gbs"),
                     fmt::format("expected a positive global batch (sequences) up to {}, found {}", kMaxGbs, gbs));
  }
  const std::optional<FlopRate> peak = gpu.peak(precision);
  if (!peak) return;  // the plan's validation names the missing peak
  const double per_gpu = model::training_flops_per_token(model, seq, model::AttentionFlops::kFull).count() *
                         static_cast<double>(gbs) * static_cast<double>(seq) / static_cast<double>(gpus);
  const double seconds = per_gpu / peak->per_second();
  if (!(seconds <= kMaxStepAtPeak)) {
    throw InputError(kCl.with_key("--gbs"),
                     fmt::format("a step of {} x {} tokens on {} GPUs needs at least {:.3g} s at the {}'s peak, beyond "
                                 "the simulator's range ({:.0e} s per step); lower --gbs or --seq, or add GPUs",
                                 gbs, seq, gpus, seconds, gpu.name, kMaxStepAtPeak));
  }
}

void add_dropout_options(CLI::App* c, DropoutArgs& d) {
  c->add_option("--attention-dropout", d.attention,
                "attention-probability dropout in [0, 1) (default: the model's; --arch gpt 0.1, Megatron-LM's default); "
                "inside fused attention it costs a mask draw per attended pair (docs/compute.md)");
  c->add_option("--hidden-dropout", d.hidden,
                "dropout on each block's output and the embedding in [0, 1) (default: the model's); saves a 1-byte mask");
}

void apply_dropout(model::ModelSpec& m, const DropoutArgs& d) {
  // A probability in [0, 1), or an InputError naming the flag.
  const auto probability = [](const std::string& text, const char* flag) {
    const std::optional<double> p = parse_number(text);
    if (!p || !(*p >= 0.0 && *p < 1.0)) {
      throw InputError(kCl.with_key(flag), fmt::format("expected a probability in [0, 1), found {}", text));
    }
    return *p;
  };
  const double attention = d.attention.empty() ? m.dropout.attention : probability(d.attention, "--attention-dropout");
  const double hidden = d.hidden.empty() ? m.dropout.hidden : probability(d.hidden, "--hidden-dropout");
  m.dropout.attention = attention;
  if (!d.hidden.empty()) {
    m.dropout.hidden = hidden;
    m.dropout.embedding = hidden;
  }
}

io::Json dropout_json(const model::ModelSpec& m) {
  return io::Json{{"attention", m.dropout.attention}, {"hidden", m.dropout.hidden}};
}

void add_video_options(CLI::App* c, VideoArgs& v) {
  c->add_option("--frames", v.frames, "DiT: video frames per sample (default: the model's, e.g. 81)");
  c->add_option("--resolution", v.resolution, "DiT: video height x width in pixels, e.g. 720x1280")->type_name("HxW");
  c->add_option("--height", v.height, "DiT: video height in pixels");
  c->add_option("--width", v.width, "DiT: video width in pixels");
  c->add_option("--vae-compression", v.vae_compression, "DiT: VAE compression time x height x width, e.g. 4x8x8")
      ->type_name("TxSxS");
  c->add_option("--patch", v.patch, "DiT: patch size over latent time x height x width, e.g. 1x2x2")->type_name("TxHxW");
  c->add_option("--text-tokens", v.text_tokens, "DiT: text tokens per sample (default: the model's, e.g. 512)");
}

hw::GpuSpec with_power_limit(const hw::GpuSpec& gpu, const std::string& power_limit) {
  hw::GpuSpec g = gpu;
  if (power_limit.empty()) return g;
  const Where w = kCl.with_key("--power-limit");
  const Power p = parse_power(power_limit, w);
  if (!(p.watts() > 0.0)) throw InputError(w, fmt::format("expected a positive power, found '{}'", power_limit));
  if (p.watts() > g.tdp.watts()) {
    throw InputError(w, fmt::format("{:.0f} W is above the {:.0f} W TDP of '{}'", p.watts(), g.tdp.watts(), g.name),
                     "a power limit can only lower the board power");
  }
  g.power_limit = p;
  return g;
}

void add_optimizer_state_flags(CLI::App& c, std::string& optimizer_dtype, std::string& master_weights) {
  c.add_option("--optimizer-dtype", optimizer_dtype,
               "Adam's two moments: fp32 | bf16 | fp16 (Megatron-Core's --exp-avg-dtype, Apex distributed Adam's dtype)")
      ->capture_default_str();
  c.add_option("--master-weights", master_weights,
               "the optimizer's copy of the parameters: fp32 | fp16 | remainders (Apex's bf16 low bits, 2 B) | "
               "none (the 16-bit weights are updated in place)")
      ->capture_default_str();
}

// --gpu-variability SIGMA: the relative standard deviation of the GPUs' speeds, in [0, 0.5]; 0 when not
// given. InputError naming the flag otherwise.
double parse_gpu_variability(const std::string& text) {
  if (text.empty()) return 0.0;
  const std::optional<double> v = parse_number(text);
  if (!v || !(*v >= 0.0 && *v <= 0.5)) {
    throw InputError(kCl.with_key("--gpu-variability"),
                     fmt::format("expected a relative standard deviation in [0, 0.5] (e.g. 0.01 for 1%), found {}", text));
  }
  return *v;
}

void add_gpu_variability_flag(CLI::App& c, std::string& sigma) {
  c.add_option("--gpu-variability", sigma,
               "relative standard deviation of the GPUs' speeds (e.g. 0.01): the slowest of --gpus GPUs paces the "
               "step, compute x (1 + SIGMA E[max of N normals]) (docs/training.md)")
      ->type_name("SIGMA");
}

void add_fsdp_impl_flag(CLI::App& c, std::string& fsdp_impl) {
  c.add_option("--fsdp-impl", fsdp_impl,
               "--dp-sharding fsdp/hsdp: fsdp2 (PyTorch's fully_shard: per-parameter shards, copied in and out "
               "around each all-gather and reduce-scatter) | flat (Megatron-FSDP, FSDP1: views of the buffers, no copies)")
      ->capture_default_str();
}

void add_cp_comm_flag(CLI::App& c, std::string& cp_comm) {
  c.add_option("--cp-comm-type", cp_comm,
               "--cp > 1: how context parallelism moves the attention's operands (Megatron-Core's --cp-comm-type): p2p "
               "(ring attention, K/V chunks overlapped with the attention kernels) | all_gather (the whole K/V gathered "
               "before the attention, exposed; Llama 3's) | a2a (DeepSpeed-Ulysses: Q, K, V and the output all-to-all, "
               "exposed; the heads per TP rank must divide by cp) | a2a+p2p (hierarchical: a2a inside groups, the ring "
               "across; --hierarchical-cp-sizes)")
      ->capture_default_str();
}

void add_fp8_recipe_flag(CLI::App& c, std::string& fp8_recipe) {
  c.add_option("--fp8-recipe", fp8_recipe,
               "--precision fp8: Transformer Engine's scaling: delayed (amax history) | current (NeMo's FP8-CS: each "
               "tensor's own amax) | mxfp8 (32-element block scales, Blackwell)")
      ->capture_default_str();
}

void add_kernel_options(CLI::App* c, KernelArgs& k) {
  c->add_option("--power-limit", k.power_limit,
                "GPU power cap, e.g. '500 W' (lowers tensor-core throughput; default: the catalog's limit or TDP)");
  c->add_option("--attention-kernel", k.attention_kernel,
                "fused attention library: default | fa2 (PyTorch SDPA) | cudnn (Transformer Engine) | fa3")
      ->capture_default_str();
  c->add_option("--fusion", k.fusion,
                "elementwise kernels: fused (Megatron/TE, loss included) | compile (torch.compile on each transformer "
                "block, the loss in eager PyTorch: torchtitan) | eager (PyTorch modules op by op)")
      ->capture_default_str();
  c->add_option("--allocator", k.allocator,
                "PyTorch caching allocator whose reservation the memory counts: classic (PyTorch's default) | "
                "expandable (expandable_segments:True) | none (the tensors alone, torch's max_memory_allocated)")
      ->capture_default_str();
  c->add_option("--grad-accum-fusion", k.grad_accum_fusion,
                "weight-gradient GEMMs add into the fp32 main gradients (Megatron-Core's gradient-accumulation "
                "fusion): auto (yes with --fusion fused and --grad-bytes 4; PyTorch autograd otherwise) | yes | no")
      ->capture_default_str();
  c->add_option("--calibration", k.calibration,
                "compute-model constants measured on your own GPU (YAML, docs/compute.md \"Calibration files\"); "
                "they replace the built-in ones they name");
}

compute::Calibration training_calibration(const hw::GpuSpec& gpu, const KernelArgs& k) {
  const Where w = kCl.with_key("--attention-kernel");
  compute::Calibration c = compute::with_attention_kernel(compute::default_calibration(gpu), gpu,
                                                          compute::parse_attention_kernel(k.attention_kernel, w), w);
  if (!k.calibration.empty()) c = io::read_calibration_file(k.calibration, gpu, std::move(c));
  return c;
}

io::Json calibration_json(const compute::Calibration& c, const KernelArgs& k) {
  return io::Json{{"name", c.name}, {"source", c.source},
                  {"file", k.calibration.empty() ? io::Json(nullptr) : io::Json(k.calibration)}};
}

bool parse_yes_no(const std::string& v, const std::string& flag) {
  const std::string l = to_lower(trim(v));
  if (l == "yes" || l == "true" || l == "on" || l == "1") return true;
  if (l == "no" || l == "false" || l == "off" || l == "0") return false;
  throw InputError(Where{"<command line>", 0, flag}, fmt::format("expected yes or no, found '{}'", v));
}

void parse_tp_overlap(const std::string& v, train::Plan& p) {
  const std::string l = to_lower(trim(v));
  if (l == "async") {
    p.tp_comm_overlap = true;
    p.tp_overlap_async = true;
    return;
  }
  if (l == "te") {
    p.tp_comm_overlap = true;
    p.tp_overlap_async = false;
    return;
  }
  const std::string yes_no = l == "yes" || l == "true" || l == "on" || l == "1" ? "yes"
                             : l == "no" || l == "false" || l == "off" || l == "0" ? "no"
                                                                                  : "";
  if (yes_no.empty()) {
    throw InputError(Where{"<command line>", 0, "--tp-comm-overlap"},
                     fmt::format("expected yes, te, async or no, found '{}'", v), suggest(l, {"yes", "te", "async", "no"}));
  }
  p.tp_comm_overlap = yes_no == "yes";
  p.tp_overlap_async = false;
}

std::string tp_overlap_label(const train::Plan& p) {
  return !p.tp_comm_overlap ? "no" : p.tp_overlap_async ? "async" : "te";
}

std::string fusion_label(const std::string& fusion) {
  return fusion == "compile" ? std::string("compiled (loss eager)") : fusion;
}

void apply_fusion(const std::string& fusion, train::Plan& p) {
  if (fusion != "fused" && fusion != "compile" && fusion != "eager") {
    throw InputError(kCl.with_key("--fusion"), fmt::format("expected fused, compile or eager, found '{}'", fusion),
                     suggest(fusion, {"fused", "compile", "eager"}));
  }
  p.eager = fusion == "eager";
  p.eager_loss = fusion != "fused";
}

uint32_t parse_recompute_modules_flag(const std::string& list, train::Recompute recompute) {
  const uint32_t core = train::module_bit(train::RecomputeModule::kCoreAttn);
  if (list.empty()) return core;
  const Where w = kCl.with_key("--recompute-modules");
  const uint32_t modules = train::parse_recompute_modules(list, w);
  if (recompute != train::Recompute::kSelective && modules != core) {
    throw InputError(w, "applies to --recompute selective (Megatron-Core's --recompute-granularity selective)");
  }
  return modules;
}

bool parse_grad_accum_fusion(const std::string& value, bool megatron, int64_t grad_bytes) {
  const std::string l = to_lower(trim(value));
  if (l == "auto") return megatron && grad_bytes == 4;
  if (l == "yes" || l == "no") return l == "yes";
  throw InputError(kCl.with_key("--grad-accum-fusion"), fmt::format("expected auto, yes or no, found '{}'", value),
                   suggest(l, {"auto", "yes", "no"}));
}

train::AllocatorMode parse_allocator(const std::string& name) {
  for (train::AllocatorMode m :
       {train::AllocatorMode::kNone, train::AllocatorMode::kClassic, train::AllocatorMode::kExpandable}) {
    if (name == train::allocator_name(m)) return m;
  }
  throw InputError(kCl.with_key("--allocator"), fmt::format("expected none, classic or expandable, found '{}'", name),
                   suggest(name, {"none", "classic", "expandable"}));
}

// --comm-model flow: the cluster's topology, from --topology FILE or from the catalog node in a fat
// tree (--tiers, --oversubscription, --no-rail-optimized). Empty for the alpha-beta model.
std::optional<net::Topology> training_topology(const FabricArgs& a, const hw::GpuSpec& gpu, const hw::NodeSpec* node,
                                               int64_t gpus) {
  if (a.comm_model != "flow") {
    if (a.comm_model != "alpha-beta") {
      throw InputError(kCl.with_key("--comm-model"), fmt::format("unknown communication model '{}'", a.comm_model),
                       suggest(a.comm_model, {"alpha-beta", "flow"}));
    }
    if (!a.topology.empty() || a.tiers != 2 || a.oversubscription != 1.0 || a.no_rail_optimized) {
      throw InputError(kCl.with_key("--comm-model"),
                       "--topology, --tiers, --oversubscription and --no-rail-optimized describe the fabric for "
                       "--comm-model flow; the alpha-beta model assumes a non-blocking fabric");
    }
    return std::nullopt;
  }
  if (!a.topology.empty()) {
    net::Topology t = net::read_edge_list(a.topology);
    if (t.num_gpus() != gpus) {
      throw InputError(kCl.with_key("--topology"),
                       fmt::format("'{}' has {} GPUs but --gpus is {}", a.topology, t.num_gpus(), gpus));
    }
    return t;
  }
  if (node == nullptr) {
    throw InputError(kCl.with_key("--comm-model"),
                     fmt::format("flow needs a catalog node with {} GPUs (--node) or --topology FILE", gpu.name));
  }
  if (gpus % node->gpus_per_node != 0) {
    throw InputError(kCl.with_key("--gpus"), fmt::format("{} GPUs do not fill whole {} machines of {} GPUs", gpus,
                                                          node->name, node->gpus_per_node));
  }
  net::FabricOptions f;
  f.tiers = a.tiers;
  f.oversubscription = a.oversubscription;
  f.rail_optimized = !a.no_rail_optimized;
  return net::from_catalog(*node, gpu, static_cast<int32_t>(gpus / node->gpus_per_node), f, kCl.with_key("fabric"));
}

void add_fabric_options(CLI::App* c, FabricArgs& f) {
  c->add_option("--comm-model", f.comm_model,
                "collective and pipeline-transfer times: alpha-beta (closed forms, non-blocking fabric) | flow "
                "(flow-level on the cluster's topology, every group at once; slower, for up to a few thousand GPUs)")
      ->capture_default_str();
  c->add_option("--topology", f.topology, "--comm-model flow: topology edge-list file (docs/topology.md)")->type_name("FILE");
  c->add_option("--tiers", f.tiers, "--comm-model flow: fat-tree tiers of the catalog node's cluster (2 or 3)")->capture_default_str();
  c->add_option("--oversubscription", f.oversubscription, "--comm-model flow: leaf downlink:uplink ratio")->capture_default_str();
  c->add_flag("--no-rail-optimized", f.no_rail_optimized, "--comm-model flow: plain fat tree instead of rail-optimized");
}

std::string fabric_description(const FabricArgs& a, const std::optional<net::Topology>& topology) {
  if (!topology) return "alpha-beta (non-blocking fabric)";
  const std::string what = a.topology.empty()
                               ? fmt::format("a {}-tier {}fat tree, {:g}:1", a.tiers, a.no_rail_optimized ? "" : "rail-optimized ",
                                             a.oversubscription)
                               : a.topology;
  return fmt::format("flow-level on {} ({} GPUs)", what, topology->num_gpus());
}

io::Json fabric_json(const FabricArgs& a) {
  if (!a.topology.empty()) return io::Json{{"topology", a.topology}};
  return io::Json{{"tiers", a.tiers}, {"oversubscription", a.oversubscription}, {"rail_optimized", !a.no_rail_optimized}};
}

std::string sharding_label(const train::Plan& p) {
  // "+uK": K layers per pipeline rank kept gathered (selective unsharding).
  const std::string kept = p.sharding == train::Sharding::kZero3 && p.unsharded_layers > 0
                               ? fmt::format("+u{}", p.unsharded_layers)
                               : std::string();
  if (p.sharding == train::Sharding::kZero3 && p.shard_group > 0) return fmt::format("hsdp-{}{}", p.shard_group, kept);
  return std::string(train::sharding_name(p.sharding)) + kept;
}

std::string moe_routing(const model::ModelSpec& m, const train::Plan& p, bool per_plan,
                        const std::vector<train::MoeDispatcher>& searched) {
  std::string dispatcher(train::moe_dispatcher_name(p.moe_dispatcher));
  if (searched.size() > 1) {
    std::vector<std::string_view> names;
    for (train::MoeDispatcher d : searched) names.push_back(train::moe_dispatcher_name(d));
    dispatcher = fmt::format("{} (searched)", fmt::join(names, " or "));
  }
  std::string copies;
  if (per_plan) {
    copies = fmt::format(" ({:.2f} copies per token)", p.moe_copies_per_token(m.moe.num_experts, m.moe.top_k));
  } else if (p.moe_ranks_per_token > 0) {
    copies = fmt::format(" ({:g} EP ranks per token)", p.moe_ranks_per_token);
  }
  return fmt::format("top-{} of {} experts{}, {} dispatcher{}, {}, load imbalance {:g}", m.moe.top_k, m.moe.num_experts,
                     per_plan ? fmt::format(", ep {}, edp {}{}", p.ep,
                                            p.tp * p.dp * p.cp / std::max<int64_t>(1, p.expert_tp() * p.ep),
                                            p.expert_tp() != p.tp ? fmt::format(", etp {}", p.expert_tp()) : std::string())
                              : std::string(),
                     dispatcher,
                     copies, p.capacity_factor > 0 ? fmt::format("capacity factor {:g}", p.capacity_factor) : "dropless",
                     p.load_imbalance);
}

std::string schedule_label(const train::Plan& p) {
  if (p.pp == 1) return "-";
  return std::string(train::schedule_name(p.schedule));
}

std::string recompute_label(const train::Plan& p) {
  // "full:K": full recompute on the first K layers of each pipeline rank (Plan::recompute_layers).
  if (p.recompute == train::Recompute::kFull && p.recompute_layers >= 0) return fmt::format("full:{}", p.recompute_layers);
  // "selective:core_attn+mla_up_proj": selective recompute of modules other than the default attention core.
  const uint32_t core = train::module_bit(train::RecomputeModule::kCoreAttn);
  if (p.recompute == train::Recompute::kSelective && p.recompute_modules != core) {
    return fmt::format("selective:{}", fmt::join(train::recompute_module_names(p.recompute_modules), "+"));
  }
  return std::string(train::recompute_name(p.recompute));
}

std::string offload_label(const train::Plan& p) {
  std::vector<std::string> parts;
  if (p.activation_offload) parts.push_back(p.offload_layers >= 0 ? fmt::format("act:{}", p.offload_layers) : "act");
  if (p.optimizer_offload) {
    parts.push_back(p.optimizer_offload_fraction < 1.0 ? fmt::format("opt:{:g}", p.optimizer_offload_fraction) : "opt");
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, "+"));
}

std::vector<std::string> plan_header(PlanColumns columns) {
  std::vector<std::string> h = {"tp", "pp", "cp", "ep", "dp", "vp", "schedule", "mbs", "sharding", "recompute", "sp"};
  if (columns.offload) h.emplace_back("offload");
  if (columns.precision) h.emplace_back("precision");
  return h;
}

std::vector<std::string> plan_cells(const train::Plan& p, PlanColumns columns) {
  const std::string pp = p.uneven_stages() ? fmt::format("{} ({}..{})", p.pp, p.first_stage_layers, p.last_stage_layers)
                                           : std::to_string(p.pp);
  // "4 a2a": context parallelism that does not exchange around the ring (Plan::cp_comm).
  const std::string cp = p.cp > 1 && p.cp_comm != train::CpComm::kP2p
                             ? fmt::format("{} {}", p.cp, train::cp_comm_name(p.cp_comm))
                             : std::to_string(p.cp);
  // "8 deepep": expert parallelism whose tokens go through DeepEP (the default all-to-all unmarked);
  // "8 etp1": the experts split over 1 rank where the dense matrices split over tp (Plan::etp).
  std::string ep = p.ep > 1 && p.moe_dispatcher == train::MoeDispatcher::kDeepEp ? fmt::format("{} deepep", p.ep)
                                                                                 : std::to_string(p.ep);
  if (p.expert_tp() != p.tp) ep += fmt::format(" etp{}", p.expert_tp());
  std::vector<std::string> cells = {std::to_string(p.tp),  pp,                   cp,                   ep,
                                    std::to_string(p.dp),  std::to_string(p.vp), schedule_label(p),    std::to_string(p.mbs),
                                    sharding_label(p),     recompute_label(p),  p.sp ? "yes" : "no"};
  if (columns.offload) cells.push_back(offload_label(p));
  if (columns.precision) cells.emplace_back(p.fp8_attention ? "fp8 (+attention)" : hw::dtype_name(p.precision));
  return cells;
}

io::Json plan_json(const train::Plan& p) {
  return io::Json{{"dp", p.dp},
                  {"tp", p.tp},
                  {"pp", p.pp},
                  {"cp", p.cp},
                  {"ep", p.ep},
                  {"etp", p.expert_tp()},
                  {"vp", p.vp},
                  {"microbatch_group_size", p.microbatch_group_size()},
                  // 0 when even (-1 in Plan): the planner never empties an end chunk (balance_uneven_stages
                  // gives each at least one layer); train --json writes the resolved counts over these.
                  {"first_stage_layers", std::max<int64_t>(0, p.first_stage_layers)},
                  {"last_stage_layers", std::max<int64_t>(0, p.last_stage_layers)},
                  {"sp", p.sp},
                  {"schedule", train::schedule_name(p.schedule)},
                  {"schedule_file", p.custom != nullptr ? p.custom->file : std::string()},
                  {"mbs", p.mbs},
                  {"microbatches", p.microbatches()},
                  {"dp_sharding", train::sharding_name(p.sharding)},
                  {"shard_group", p.shard_group},
                  {"unsharded_layers", p.unsharded_layers},
                  {"fsdp_impl", train::fsdp_impl_name(p.fsdp_impl)},
                  {"fsdp_keeps_gathered", p.fsdp_keeps_gathered()},
                  {"cp_comm_type", train::cp_comm_name(p.cp_comm)},
                  {"cp_a2a_size", p.cp_a2a},
                  {"recompute", train::recompute_name(p.recompute)},
                  {"recompute_layers", p.recompute_layers},
                  {"recompute_modules", p.recompute == train::Recompute::kSelective
                                            ? io::Json(train::recompute_module_names(p.recompute_modules))
                                            : io::Json::array()},
                  {"activation_offload", p.activation_offload},
                  {"offload_layers", p.offload_layers},
                  {"optimizer_offload", p.optimizer_offload},
                  {"optimizer_offload_fraction", p.optimizer_offload_fraction},
                  {"cpu_adam_params_per_s", p.cpu_adam_params_per_s},
                  {"precision", hw::dtype_name(p.precision)},
                  {"fp8_attention", p.fp8_attention},
                  {"fp8_recipe", train::fp8_recipe_name(p.fp8_recipe)},
                  {"moe_dispatcher", train::moe_dispatcher_name(p.moe_dispatcher)}};
}

void add_cpu_adam_rate_flag(CLI::App& cmd, double& rate) {
  cmd.add_option("--cpu-adam-rate", rate,
                 "optimizer offload: the host's Adam step in parameters per second per GPU (Megatron's measured "
                 "0.69e9 by default; DeepSpeed's vectorized CPU-Adam about 1e9; docs/training.md)")
      ->capture_default_str();
}

std::string gib(Bytes b) { return fmt::format("{:.2f}", b.to_gib()); }

io::Json memory_json(const train::MemoryBreakdown& m) {
  return io::Json{{"weights", m.weights.count()},         {"gradients", m.gradients.count()},
                  {"optimizer", m.optimizer.count()},     {"activations", m.activations.count()},
                  {"temporary", m.temporary.count()},     {"communication", m.communication.count()},
                  {"cuda_context", m.context.count()},    {"allocator", m.allocator.count()}};
}

io::Json time_json(const std::array<Time, train::kNumTimeCategories>& breakdown) {
  io::Json t = io::Json::object();
  for (size_t i = 0; i < train::kNumTimeCategories; ++i) {
    t[std::string(train::time_category_name(static_cast<train::TimeCategory>(i)))] = breakdown[i].to_seconds();
  }
  return t;
}

}  // namespace orrery::cli
