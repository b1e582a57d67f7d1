// `orrery demo`: answers one representative question per pillar that exists, on built-in defaults,
// prints readable tables and writes them (with version, seed and resolved configuration) to a folder.
//
// Foundation (catalogs + model op inventory):
//  1. How big are these models, what does training them cost in FLOPs per token, and how many GPUs
//     does the training state alone need?  Model state in mixed-precision Adam is 16 bytes per
//     parameter (2 fp16/bf16 weights + 2 gradients + 12 fp32 master weights, momentum and variance;
//     Rajbhandari et al., "ZeRO", SC'20, Sec. 3.1); fully sharded (ZeRO-3) over G GPUs it needs
//     G >= 16*Psi / memory, a lower bound that ignores activations and buffers.
//  2. What does a FLOP cost on each GPU, and what would training a reference model on T tokens cost at
//     an assumed MFU?  GPU-hours = tokens * FLOPs/token / (MFU * peak bf16 * 3600 s). The MFU is an
//     input here; Q4 predicts it for a plan.
// Network:
//  3. How long does a gradient all-reduce take on a catalog cluster (8 x DGX H100 by default) with each
//     NCCL algorithm, at flow level and in the alpha-beta model?
// The three pillars (cli/demo_pillars.h):
//  4. Training: does the first plan one would try fit, and which plans does the planner find?
//  5. Serving: TTFT, TPOT, throughput and the largest stable rate of each scheduler on the default
//     (Azure-conversation-fitted) workload.
//  6. Decentralized: synchronous against asynchronous gossip on nodes of unequal speed, at equal
//     simulated time.
#include <cmath>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/demo_pillars.h"
#include "cli/model_report.h"
#include "cli/output.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "coll/alpha_beta.h"
#include "coll/executor.h"
#include "coll/topology_paths.h"
#include "model/op_inventory.h"
#include "net/symmetry.h"
#include "net/topology_builders.h"

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
  std::string cluster_node = "dgx-h100";
  int32_t cluster_machines = 8;
  std::string allreduce_size = "256 MiB";
  DemoTraining training;
  DemoServing serving;
  DemoGossip gossip;
};

constexpr double kAdamMixedPrecisionBytesPerParam = 16.0;  // ZeRO paper, Sec. 3.1

void run_demo(Context& ctx, const DemoConfig& cfg) {
  const Where cl{"<command line>", 0, ""};
  if (!(cfg.mfu > 0 && cfg.mfu <= 1)) throw InputError(cl.with_key("--mfu"), fmt::format("must be in (0, 1], got {}", cfg.mfu));
  if (!(cfg.tokens > 0)) throw InputError(cl.with_key("--tokens"), "must be positive");
  const io::Catalog& c = ctx.catalog();
  const hw::GpuSpec& state_gpu = c.hw.get_gpu(cfg.state_gpu, cl.with_key("--state-gpu"));
  // Every pillar's inputs before any question runs, so a bad flag is reported at once.
  check_demo_training(c, cfg.training);
  check_demo_serving(c, cfg.serving);
  check_demo_gossip(cfg.gossip);

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

  // Question 3: network.
  const hw::NodeSpec& node = c.hw.get_node(cfg.cluster_node, cl.with_key("--cluster-node"));
  if (cfg.cluster_machines < 1) throw InputError(cl.with_key("--cluster-machines"), "must be positive");
  const Bytes ar_size = parse_bytes_positive(cfg.allreduce_size, cl.with_key("--allreduce-size"));
  const net::Topology topo =
      net::from_catalog(node, c.hw.get_gpu(node.gpu, Where{node.origin, 0, "nodes." + node.name + ".gpu"}),
                        cfg.cluster_machines, net::FabricOptions{}, cl.with_key("--cluster-node"));
  const int32_t ranks = topo.num_gpus();
  const auto orbits = net::find_machine_symmetry(topo);
  coll::ProgramOptions po;
  po.ranks_per_node = topo.gpus_per_machine() > 0 ? topo.gpus_per_machine() : ranks;
  po.channels = std::min(po.ranks_per_node, 16);
  coll::AlphaBetaParams ab = coll::alpha_beta_params(topo, ranks);
  ab.inter_parallel = po.channels;
  Table nt({"algorithm", "flow time", "busbw GB/s", "alpha-beta time", "busbw GB/s"},
           fmt::format("Q3. All-reduce of {} over {} ({} GPUs)", format_bytes(ar_size), topo.description, ranks));
  Json net_rows = Json::array();
  for (coll::Algorithm algo : {coll::Algorithm::kRing, coll::Algorithm::kTree, coll::Algorithm::kHierarchical}) {
    coll::TopologyPaths paths(topo, net::RailPolicy::kRailAligned);  // NCCL's PXN, as net collective
    std::optional<coll::ExecutionStats> sym;
    {
      des::Engine engine;
      net::FlowNetwork network(engine, paths.capacities());
      auto program = coll::make_program(coll::Op::kAllReduce, algo, ranks, ar_size, po);
      if (orbits && program->shift_equivariant(orbits->rank_period)) {
        sym = coll::execute_symmetric(*program, engine, network, paths, *orbits);
      }
    }
    coll::ExecutionStats st;
    if (sym) {
      st = *sym;
    } else {
      des::Engine engine;
      net::FlowNetwork network(engine, paths.capacities());
      auto program = coll::make_program(coll::Op::kAllReduce, algo, ranks, ar_size, po);
      st = coll::execute(*program, engine, network, paths);
    }
    const Time ab_t = coll::alpha_beta_time(coll::Op::kAllReduce, algo, ar_size, ab);
    const auto fb = coll::nccl_bandwidths(coll::Op::kAllReduce, ar_size, ranks, st.time);
    const auto abb = coll::nccl_bandwidths(coll::Op::kAllReduce, ar_size, ranks, ab_t);
    nt.add_row({std::string(coll::algorithm_name(algo)), format_time(st.time),
                fmt::format("{:.1f}", fb.busbw.bytes_per_second() / 1e9), format_time(ab_t),
                fmt::format("{:.1f}", abb.busbw.bytes_per_second() / 1e9)});
    net_rows.push_back(Json{{"algo", std::string(coll::algorithm_name(algo))},
                            {"flow_time_s", st.time.to_seconds()},
                            {"flow_busbw_bytes_per_s", fb.busbw.bytes_per_second()},
                            {"alpha_beta_time_s", ab_t.to_seconds()},
                            {"alpha_beta_busbw_bytes_per_s", abb.busbw.bytes_per_second()}});
  }

  // Questions 4-6: the pillars.
  const DemoSection q4 = demo_training(c, cfg.training);
  const DemoSection q5 = demo_serving(c, cfg.serving, cfg.seed);
  const DemoSection q6 = demo_gossip(cfg.gossip, cfg.seed);

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
                   {"cluster_node", cfg.cluster_node},
                   {"cluster_machines", cfg.cluster_machines},
                   {"allreduce_size_bytes", ar_size.count()},
                   {"training",
                    {{"model", cfg.training.model},
                     {"gpu", cfg.training.gpu},
                     {"gpus", cfg.training.gpus},
                     {"tp", cfg.training.tp},
                     {"pp", cfg.training.pp},
                     {"seq", cfg.training.seq},
                     {"gbs", cfg.training.gbs},
                     {"top", cfg.training.top}}},
                   {"serving",
                    {{"model", cfg.serving.model},
                     {"gpu", cfg.serving.gpu},
                     {"rate", cfg.serving.rate},
                     {"requests", cfg.serving.requests},
                     {"schedulers", cfg.serving.schedulers},
                     {"workload", "default"}}},
                   {"gossip",
                    {{"topology", cfg.gossip.topology},
                     {"iters", cfg.gossip.iters},
                     {"heterogeneity", cfg.gossip.heterogeneity},
                     {"horizon_s", cfg.gossip.horizon_s}}},
                   {"catalog", c.loaded}};
  doc["results"] = {{"models", models},     {"gpus", gpus},         {"allreduce", net_rows},
                    {"training", q4.json},  {"serving", q5.json},   {"decentralized", q6.json}};
  const std::string tables = mt.render() + "\n" + gt.render() + "\n" + nt.render() + "\n" + q4.table.render() + "\n" +
                             q5.table.render() + "\n" + q6.table.render();
  const std::string notes =
      "Notes: state = mixed-precision Adam, 16 B/param (ZeRO, SC'20); min GPUs ignore activations and buffers.\n"
      "GPU-hours = tokens x FLOP/token / (MFU x bf16 peak); the MFU is an assumption here, not a prediction" +
      (q4.json["planner"]["top"].empty()
           ? std::string(".\n")
           : fmt::format(" (Q4 predicts {:.1f}% for its best plan).\n", 100.0 * q4.json["planner"]["top"][0]["mfu"].get<double>())) +
      "Q3: flow = flow-level max-min simulation of the NCCL-style algorithm on the catalog cluster's rail-optimized\n"
      "fat tree (link figures from the catalog, latencies from NCCL's cost model; docs/topology.md), without\n"
      "NCCL protocol efficiencies (docs/collectives_validation.md has the calibrated model).\n" +
      q4.note + q5.note + q6.note;

  io::write_file_atomic(cfg.out + "/models.csv", mt.to_csv());
  io::write_file_atomic(cfg.out + "/gpus.csv", gt.to_csv());
  io::write_file_atomic(cfg.out + "/allreduce.csv", nt.to_csv());
  io::write_file_atomic(cfg.out + "/training.csv", q4.table.to_csv());
  io::write_file_atomic(cfg.out + "/serving.csv", q5.table.to_csv());
  io::write_file_atomic(cfg.out + "/decentralized.csv", q6.table.to_csv());
  io::write_file_atomic(cfg.out + "/summary.txt", tables + "\n" + notes);
  io::write_file_atomic(cfg.out + "/demo.json", io::dump_json(doc));

  if (ctx.global.json) {
    ctx.out << io::dump_json(doc);
  } else {
    ctx.out << tables << "\n" << notes << "Results written to " << cfg.out
            << "/ (demo.json, models.csv, gpus.csv, allreduce.csv, training.csv, serving.csv, decentralized.csv, "
               "summary.txt)\n";
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
  demo->add_option("--cluster-node", cfg->cluster_node, "catalog node type for Q3")->capture_default_str();
  demo->add_option("--cluster-machines", cfg->cluster_machines, "machines for Q3")->capture_default_str();
  demo->add_option("--allreduce-size", cfg->allreduce_size, "all-reduce size for Q3")->capture_default_str();
  demo->add_option("--train-model", cfg->training.model, "model trained in Q4")->capture_default_str();
  demo->add_option("--train-gpu", cfg->training.gpu, "GPU of Q4")->capture_default_str();
  demo->add_option("--train-gpus", cfg->training.gpus, "GPU count of Q4")->capture_default_str();
  demo->add_option("--train-tp", cfg->training.tp, "TP of Q4's first plan")->capture_default_str();
  demo->add_option("--train-pp", cfg->training.pp, "PP of Q4's first plan")->capture_default_str();
  demo->add_option("--train-seq", cfg->training.seq, "sequence length of Q4")->capture_default_str();
  demo->add_option("--train-gbs", cfg->training.gbs, "global batch (sequences) of Q4")->capture_default_str();
  demo->add_option("--train-top", cfg->training.top, "planner plans shown in Q4")->capture_default_str();
  demo->add_option("--serve-model", cfg->serving.model, "model served in Q5")->capture_default_str();
  demo->add_option("--serve-gpu", cfg->serving.gpu, "GPU of Q5 (one replica)")->capture_default_str();
  demo->add_option("--serve-rate", cfg->serving.rate, "arrival rate of Q5, requests/s")->capture_default_str();
  demo->add_option("--serve-requests", cfg->serving.requests, "requests per run of Q5")->capture_default_str();
  demo->add_option("--serve-schedulers", cfg->serving.schedulers, "schedulers compared in Q5")
      ->delimiter(',')
      ->capture_default_str();
  demo->add_option("--gossip-topology", cfg->gossip.topology, "graph of Q6 (orrery gossip topo)")->capture_default_str();
  demo->add_option("--gossip-iters", cfg->gossip.iters, "iterations of Q6")->capture_default_str();
  demo->add_option("--gossip-heterogeneity", cfg->gossip.heterogeneity, "node and link speeds of Q6 (orrery gossip run --heterogeneity)")
      ->capture_default_str();
  demo->add_option("--gossip-horizon", cfg->gossip.horizon_s, "simulated seconds at which Q6 compares the runs")
      ->capture_default_str();
  actions.emplace_back(demo, [cfg](Context& ctx) { run_demo(ctx, *cfg); });
}

}  // namespace orrery::cli
