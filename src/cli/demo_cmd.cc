// `orrery demo`: answers one representative question per pillar that exists, on built-in defaults,
// prints readable tables and writes them (with version, seed and resolved configuration) to a folder.
//
// Pillars so far: the foundation (catalogs + model op inventory). Its questions:
//  1. How big are these models, what does training them cost in FLOPs per token, and how many GPUs
//     does the training state alone need?  Model state in mixed-precision Adam is 16 bytes per
//     parameter (2 fp16/bf16 weights + 2 gradients + 12 fp32 master weights, momentum and variance;
//     Rajbhandari et al., "ZeRO", SC'20, Sec. 3.1); fully sharded (ZeRO-3) over G GPUs it needs
//     G >= 16*Psi / memory, a lower bound that ignores activations and buffers.
//  2. What does a FLOP cost on each GPU, and what would training a reference model on T tokens cost at
//     an assumed MFU?  GPU-hours = tokens * FLOPs/token / (MFU * peak bf16 * 3600 s). The MFU is an
//     input here; the training pillar will predict it.
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/model_report.h"
#include "cli/output.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "model/op_inventory.h"

namespace orrery::cli {
namespace {

using io::Json;

struct DemoConfig {
  std::string out = "orrery-out/demo";
  uint64_t seed = 0;
  std::vector<std::string> models = {"llama3-8b", "llama3-70b", "llama3.1-405b", "mixtral-8x7b", "deepseek-v3",
                                     "gpt3-175b"};
  std::vector<std::string> gpus = {"a100-sxm-80gb", "h100-sxm", "h200", "b200", "mi300x", "l40s"};
  std::string state_gpu = "h100-sxm";
  std::string reference_model = "llama3-70b";
  int64_t seq = 4096;
  double tokens = 1e12;
  double mfu = 0.40;
};

constexpr double kAdamMixedPrecisionBytesPerParam = 16.0;  // ZeRO paper, Sec. 3.1

void run_demo(Context& ctx, const DemoConfig& cfg) {
  const Where cl{"<command line>", 0, ""};
  if (!(cfg.mfu > 0 && cfg.mfu <= 1)) throw InputError(cl.with_key("--mfu"), fmt::format("must be in (0, 1], got {}", cfg.mfu));
  if (!(cfg.tokens > 0)) throw InputError(cl.with_key("--tokens"), "must be positive");
  const io::Catalog& c = ctx.catalog();
  const hw::GpuSpec& state_gpu = c.hw.get_gpu(cfg.state_gpu, cl.with_key("--state-gpu"));

  // Question 1: models.
  Table mt({"model", "params", "active", "published", "error", "train FLOP/token", "state (16 B/param)",
            fmt::format("min {} (ZeRO-3)", cfg.state_gpu), "KV/token bf16"},
           fmt::format("Q1. Model size, training FLOPs per token (seq {}, PaLM convention) and GPUs for the "
                       "training state alone",
                       cfg.seq));
  Json models = Json::array();
  for (const std::string& name : cfg.models) {
    const model::ModelSpec m = c.model(name, cl.with_key("--models"));
    const double total = static_cast<double>(m.total_params());
    const double flops = model::training_flops_per_token(m, cfg.seq, model::AttentionFlops::kFull).count();
    const double state = kAdamMixedPrecisionBytesPerParam * total;
    const auto min_gpus = static_cast<int64_t>(std::ceil(state / state_gpu.memory.to_double()));
    const double pub = m.provenance.published_total_params;
    mt.add_row({name, format_count(total), m.is_moe() ? format_count(static_cast<double>(m.active_params())) : "-",
                pub > 0 ? format_count(pub) : "-",
                pub > 0 ? fmt::format("{:+.2f}%", relative_error(total, pub) * 100) : "-", fmt::format("{:.3g}", flops),
                format_bytes(Bytes::from_double(state)), std::to_string(min_gpus),
                format_bytes(m.kv_cache_bytes_per_token(2))});
    models.push_back(Json{{"name", name},
                          {"total_params", m.total_params()},
                          {"active_params", m.active_params()},
                          {"published_total_params", pub > 0 ? Json(pub) : Json(nullptr)},
                          {"training_flops_per_token", flops},
                          {"training_state_bytes", state},
                          {"min_gpus_for_state", min_gpus},
                          {"kv_cache_bytes_per_token_bf16", m.kv_cache_bytes_per_token(2).count()}});
  }

  // Question 2: GPUs.
  const model::ModelSpec ref = c.model(cfg.reference_model, cl.with_key("--reference-model"));
  const double ref_flops = model::training_flops_per_token(ref, cfg.seq, model::AttentionFlops::kFull).count();
  Table gt({"gpu", "bf16 dense", "HBM", "HBM bw", "ridge FLOP/B", "$/GPU-h", "$/EFLOP at peak", "GPU-hours", "cost"},
           fmt::format("Q2. What a FLOP costs, and training {} on {:.3g} tokens at {:.0f}% MFU", cfg.reference_model,
                       cfg.tokens, cfg.mfu * 100));
  Json gpus = Json::array();
  for (const std::string& name : cfg.gpus) {
    const hw::GpuSpec& g = c.hw.get_gpu(name, cl.with_key("--gpus"));
    const auto peak = g.peak(hw::DType::kBf16);
    if (!peak) throw InputError(Where{g.origin, 0, "gpus." + name + ".flops.bf16"}, "the demo needs a bf16 peak");
    const hw::PriceSpec* price = c.hw.find_price(name);
    const double ridge = peak->per_second() / g.memory_bandwidth.bytes_per_second();
    const double gpu_hours = cfg.tokens * ref_flops / (cfg.mfu * peak->per_second() * 3600.0);
    const double usd_h = price ? price->usd_per_gpu_hour : std::nan("");
    const double usd_per_eflop = usd_h / (peak->per_second() * 3600.0) * 1e18;
    gt.add_row({name, format_flop_rate(*peak), format_bytes(g.memory), format_bandwidth(g.memory_bandwidth),
                fmt::format("{:.0f}", ridge), price ? fmt::format("{:.2f}", usd_h) : "-",
                price ? fmt::format("{:.3f}", usd_per_eflop) : "-", format_count(gpu_hours),
                price ? "$" + format_count(gpu_hours * usd_h) : "-"});
    gpus.push_back(Json{{"name", name},
                        {"bf16_peak_flops_per_s", peak->per_second()},
                        {"memory_bytes", g.memory.count()},
                        {"memory_bandwidth_bytes_per_s", g.memory_bandwidth.bytes_per_second()},
                        {"ridge_flops_per_byte", ridge},
                        {"usd_per_gpu_hour", price ? Json(usd_h) : Json(nullptr)},
                        {"usd_per_eflop_at_peak", price ? Json(usd_per_eflop) : Json(nullptr)},
                        {"gpu_hours", gpu_hours},
                        {"usd", price ? Json(gpu_hours * usd_h) : Json(nullptr)}});
  }

  // Assemble everything before writing anything: an error above leaves no output behind.
  Json doc = envelope("demo");
  doc["seed"] = cfg.seed;
  doc["config"] = {{"out", cfg.out},
                   {"models", cfg.models},
                   {"gpus", cfg.gpus},
                   {"state_gpu", cfg.state_gpu},
                   {"reference_model", cfg.reference_model},
                   {"seq", cfg.seq},
                   {"tokens", cfg.tokens},
                   {"mfu", cfg.mfu},
                   {"adam_mixed_precision_bytes_per_param", kAdamMixedPrecisionBytesPerParam},
                   {"catalog", c.loaded}};
  doc["results"] = {{"models", models}, {"gpus", gpus}};
  const std::string tables = mt.render() + "\n" + gt.render();
  const std::string notes =
      "Notes: state = mixed-precision Adam, 16 B/param (ZeRO, SC'20); min GPUs ignore activations and buffers.\n"
      "GPU-hours = tokens x FLOP/token / (MFU x bf16 peak); the MFU is an assumption here, not a prediction.\n";

  io::write_file_atomic(cfg.out + "/models.csv", mt.to_csv());
  io::write_file_atomic(cfg.out + "/gpus.csv", gt.to_csv());
  io::write_file_atomic(cfg.out + "/summary.txt", tables + "\n" + notes);
  io::write_file_atomic(cfg.out + "/demo.json", io::dump_json(doc));

  if (ctx.global.json) {
    ctx.out << io::dump_json(doc);
  } else {
    ctx.out << tables << "\n" << notes << "Results written to " << cfg.out << "/ (demo.json, models.csv, gpus.csv, summary.txt)\n";
  }
}

}  // namespace

void register_demo_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  auto cfg = std::make_shared<DemoConfig>();
  CLI::App* demo = app.add_subcommand("demo", "answer one representative question per pillar on built-in defaults");
  demo->add_option("--out", cfg->out, "folder for the result files")->capture_default_str()->type_name("DIR");
  demo->add_option("--seed", cfg->seed, "random seed (recorded in the results)")->capture_default_str();
  demo->add_option("--models", cfg->models, "catalog models or config.json paths for Q1")
      ->delimiter(',')
      ->capture_default_str();
  demo->add_option("--gpus", cfg->gpus, "catalog GPUs for Q2")->delimiter(',')->capture_default_str();
  demo->add_option("--state-gpu", cfg->state_gpu, "GPU whose memory bounds Q1's GPU count")->capture_default_str();
  demo->add_option("--reference-model", cfg->reference_model, "model trained in Q2")->capture_default_str();
  demo->add_option("--seq", cfg->seq, "sequence length")->capture_default_str()->check(CLI::PositiveNumber);
  demo->add_option("--tokens", cfg->tokens, "training tokens for Q2")->capture_default_str();
  demo->add_option("--mfu", cfg->mfu, "assumed model FLOPs utilization for Q2, in (0, 1]")->capture_default_str();
  actions.emplace_back(demo, [cfg](Context& ctx) { run_demo(ctx, *cfg); });
}

}  // namespace orrery::cli
