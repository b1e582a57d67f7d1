// `orrery plan serve`: capacity planning for LLM serving (serve/capacity.h, docs/serving.md "Capacity
// planning"). Over a grid of GPU types, TP x PP, schedulers, caps and replica counts, the largest arrival
// rate meeting the SLOs (with --stable-only: the largest stable rate), by bisection on the rate with a
// fixed seed and workload, ranked by cost per 1M requests from the catalog prices. Exit 0 with at least
// one feasible configuration, 1 when none is (the reasons are printed), 2 for bad input.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/output.h"
#include "core/progress.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "io/calibration_file.h"
#include "io/trace_reader.h"
#include "serve/capacity.h"
#include "serve/router.h"
#include "serve/workload_spec.h"

namespace orrery::cli {
namespace {

using io::Json;
namespace sv = orrery::serve;

const Where kCl{"<command line>", 0, ""};

struct PlanServeArgs {
  std::string model;
  std::string gpus = "a100-sxm-80gb,h100-sxm";
  std::string tp = "1,2,4,8";
  std::string pp = "1";
  std::string schedulers = "vllm,sarathi,wait";
  std::string max_seqs = "128";
  std::string max_batched_tokens = "4096";
  std::string chunk_sizes = "512";
  std::string replicas = "1";
  std::string router = "round-robin";
  std::string workload;
  std::string trace;
  std::string trace_format;
  int64_t requests = 2000;
  uint64_t seed = 0;
  std::string dtype = "fp16";
  std::string expert_weights = "same";
  std::string exec_model = "roofline";
  std::string profile;      // --profile FILE: vidur-profile's mlp.csv
  std::string calibration;  // --calibration FILE: for the configurations on its GPU
  std::vector<std::string> slo_values = std::vector<std::string>(9);  // by sv::slo_names()
  bool stable_only = false;  // no latency SLO: the largest stable rate
  int64_t kv_tokens = 0;     // KV capacity override per replica (0: the memory plan)
  std::string cpu_overhead = "1 ms";
  std::string cpu_overhead_per_seq = "10 us";
  int64_t top = 10;
  int threads = 0;
  double tolerance = 0.02;
  double start_rate = 1.0;
};

std::vector<std::string> split(const std::string& text, const std::string& flag) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const std::string t(trim(item));
    if (!t.empty() && std::find(items.begin(), items.end(), t) == items.end()) items.push_back(t);
  }
  if (items.empty()) throw InputError(kCl.with_key(flag), fmt::format("expected a comma-separated list, found '{}'", text));
  return items;
}

std::vector<int64_t> int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> out;
  for (const std::string& s : split(text, flag)) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || v < 1) {
      throw InputError(kCl.with_key(flag), fmt::format("expected positive integers separated by commas, found '{}'", s));
    }
    out.push_back(v);
  }
  return out;
}

// The request stream at any rate: a synthetic spec, or a trace read once (its first --requests requests)
// and rescaled in time.
sv::WorkloadFactory make_factory(const PlanServeArgs& a, std::string& label) {
  if (a.requests < 10) throw InputError(kCl.with_key("--requests"), fmt::format("expected at least 10, found {}", a.requests));
  if (!a.trace.empty() && !a.workload.empty()) {
    throw InputError(kCl.with_key("--trace"), "give either --trace or --workload, not both");
  }
  if (a.trace.empty()) {
    const std::string text = a.workload.empty() ? "default" : a.workload;
    label = text;
    const sv::WorkloadSpec spec = sv::parse_workload_spec(text, kCl.with_key("--workload"));
    const int64_t n = a.requests;
    const uint64_t seed = a.seed;
    return [spec, n, seed](double rate) { return sv::make_workload(spec, rate, seed, n); };
  }
  label = a.trace;
  io::TraceOptions o;
  if (!a.trace_format.empty()) o.format = io::parse_trace_format(a.trace_format, kCl.with_key("--trace-format"));
  std::unique_ptr<io::TraceReader> reader = io::open_trace(a.trace, o);
  auto requests = std::make_shared<std::vector<sv::Request>>();
  while (static_cast<int64_t>(requests->size()) < a.requests) {
    std::optional<sv::Request> r = reader->next();
    if (!r) break;
    requests->push_back(std::move(*r));
  }
  if (requests->size() < 2 || requests->back().arrival <= requests->front().arrival) {
    throw InputError(Where{a.trace, 0, ""}, "the trace needs at least two requests with distinct arrival times to be rescaled");
  }
  const double t0 = requests->front().arrival.to_seconds();
  const double native = static_cast<double>(requests->size() - 1) / (requests->back().arrival.to_seconds() - t0);
  class Scaled final : public sv::RequestSource {
   public:
    Scaled(std::shared_ptr<const std::vector<sv::Request>> r, double factor) : r_(std::move(r)), factor_(factor) {}
    std::optional<sv::Request> next() override {
      if (i_ >= r_->size()) return std::nullopt;
      sv::Request q = (*r_)[i_++];
      const Time t0 = r_->front().arrival;
      q.arrival = t0 + Time::seconds((q.arrival - t0).to_seconds() * factor_);
      return q;
    }

   private:
    std::shared_ptr<const std::vector<sv::Request>> r_;
    double factor_;
    size_t i_ = 0;
  };
  return [requests, native](double rate) { return std::make_unique<Scaled>(requests, native / rate); };
}

std::string money(double v) { return std::isnan(v) ? "-" : fmt::format("{:.2f}", v); }

std::string caps(const sv::CapacityConfig& c) {
  std::string s = fmt::format("{}/{}", c.max_seqs, c.max_batched_tokens);
  if (c.scheduler == "sarathi") s += fmt::format("/{}", c.chunk_size);
  return s;
}

Json config_json(const sv::CapacityResult& r) {
  const sv::CapacityConfig& c = r.config;
  return Json{{"gpu", c.gpu->name},           {"tp", c.tp},
              {"pp", c.pp},                   {"replicas", c.replicas},
              {"gpus", c.tp * c.pp * c.replicas}, {"scheduler", c.scheduler},
              {"max_seqs", c.max_seqs},       {"max_batched_tokens", c.max_batched_tokens},
              {"chunk_size", c.chunk_size}};
}

Json quantiles_json(const Summary& s) {
  if (s.count() == 0) return Json(nullptr);
  return Json{{"p50", s.quantile(0.5)}, {"p90", s.quantile(0.9)}, {"p99", s.quantile(0.99)}, {"mean", s.mean()}};
}

void run_plan_serve(Context& ctx, const PlanServeArgs& a) {
  if (a.model.empty()) throw InputError(kCl.with_key("--model"), "missing; e.g. --model llama2-7b (a catalog name or a config.json)");
  if (a.top < 1) throw InputError(kCl.with_key("--top"), fmt::format("expected at least 1, found {}", a.top));
  if (a.threads < 0) throw InputError(kCl.with_key("--threads"), fmt::format("expected 0 (all cores) or more, found {}", a.threads));
  if (!(a.tolerance > 0.0 && a.tolerance < 1.0)) {
    throw InputError(kCl.with_key("--tolerance"), fmt::format("expected a relative tolerance in (0, 1), found {}", a.tolerance));
  }
  if (!(a.start_rate > 0.0)) throw InputError(kCl.with_key("--start-rate"), fmt::format("must be > 0 requests/s, found {}", a.start_rate));
  const io::Catalog& cat = ctx.catalog();
  const model::ModelSpec model = cat.model(a.model, kCl.with_key("--model"));
  const std::optional<hw::DType> dt = hw::parse_dtype(a.dtype);
  if (!dt) throw InputError(kCl.with_key("--dtype"), "unknown precision '" + a.dtype + "'", suggest(a.dtype, hw::dtype_names()));

  sv::CapacityOptions o;
  const std::vector<std::string> names = sv::slo_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!a.slo_values[i].empty()) o.slos.push_back(sv::parse_slo(names[i], a.slo_values[i], kCl.with_key("--slo-" + names[i])));
  }
  if (a.stable_only && !o.slos.empty()) {
    throw InputError(kCl.with_key("--stable-only"), "asks for the largest stable rate with no latency SLO, but --slo-" +
                                                        o.slos.front().name() + " is given",
                     "drop the --slo-* bounds or --stable-only");
  }
  if (o.slos.empty() && !a.stable_only) {
    o.slos = {sv::parse_slo("ttft-p90", "2s"), sv::parse_slo("tpot-p99", "200ms")};  // the issue's example SLO
  }
  if (a.kv_tokens < 0) throw InputError(kCl.with_key("--kv-tokens"), fmt::format("expected a token count >= 1 (or 0: the memory plan), found {}", a.kv_tokens));
  o.base.kv_tokens_override = a.kv_tokens;
  o.exec.cpu_base = parse_time(a.cpu_overhead, kCl.with_key("--cpu-overhead"));
  o.exec.cpu_per_seq = parse_time(a.cpu_overhead_per_seq, kCl.with_key("--cpu-overhead-per-seq"));
  o.base.dtype = *dt;
  o.base.expert_weights = sv::parse_expert_weights(a.expert_weights, kCl.with_key("--expert-weights"));
  sv::check_expert_weights(model, o.base.expert_weights, kCl.with_key("--expert-weights"));
  o.exec_model = a.exec_model;
  o.start_rate = a.start_rate;
  o.rel_tol = a.tolerance;
  o.floor_rate = std::min(1e-3, a.start_rate);
  o.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  {
    // An unknown execution-time model or scheduler is an error for every configuration: check once here.
    std::vector<std::string> known;
    for (const sv::ExecModelInfo& i : sv::exec_model_registry()) known.emplace_back(i.name);
    if (std::find(known.begin(), known.end(), a.exec_model) == known.end()) {
      throw InputError(kCl.with_key("--exec-model"), "unknown execution-time model '" + a.exec_model + "'", suggest(a.exec_model, known));
    }
    if (a.exec_model == "vidur-profile" && a.profile.empty()) {
      throw InputError(kCl.with_key("--profile"), "missing: --exec-model vidur-profile reads the model's measured mlp.csv",
                       "e.g. --profile profiles/vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv");
    }
    if (!a.profile.empty() && a.exec_model != "vidur-profile") {
      throw InputError(kCl.with_key("--profile"), "is read by --exec-model vidur-profile only, not " + a.exec_model,
                       "add --exec-model vidur-profile");
    }
  }
  std::vector<std::string> sched_names;
  for (const auto& i : sv::scheduler_registry()) sched_names.push_back(i.name);
  const std::vector<std::string> schedulers = split(a.schedulers, "--schedulers");
  for (const std::string& s : schedulers) {
    if (std::find(sched_names.begin(), sched_names.end(), s) == sched_names.end()) {
      throw InputError(kCl.with_key("--schedulers"), "unknown scheduler '" + s + "'", suggest(s, sched_names));
    }
  }
  std::vector<const hw::GpuSpec*> gpus;
  for (const std::string& g : split(a.gpus, "--gpus")) {
    const hw::GpuSpec& spec = cat.hw.get_gpu(g, kCl.with_key("--gpus"));
    if (!spec.peak(*dt)) {
      throw InputError(kCl.with_key("--dtype"), "GPU '" + spec.name + "' has no " + a.dtype + " peak", "try fp16 or bf16");
    }
    gpus.push_back(&spec);
  }
  // --calibration FILE: its constants for the configurations on the GPU it names (one of --gpus).
  std::optional<compute::Calibration> calibration;
  const hw::GpuSpec* calibrated_gpu = nullptr;
  if (!a.calibration.empty()) {
    for (const hw::GpuSpec* g : gpus) {
      try {
        calibration = io::read_calibration_file(a.calibration, *g, compute::default_calibration(*g));
        calibrated_gpu = g;
        break;
      } catch (const InputError& e) {
        if (e.where().key != "gpu") throw;
      }
    }
    if (calibrated_gpu == nullptr) {
      throw InputError(kCl.with_key("--calibration"),
                       fmt::format("'{}' is for a GPU that is not among --gpus ({})", a.calibration, a.gpus),
                       "add its GPU to --gpus");
    }
  }
  const std::vector<int64_t> tps = int_list(a.tp, "--tp"), pps = int_list(a.pp, "--pp");
  if (!a.profile.empty()) {
    // One GPU type: the table was measured on one. Read once; every configuration parses its own copy
    // (a malformed file is an error naming its line; a TP degree it lacks rules out those configurations).
    if (gpus.size() != 1) {
      throw InputError(kCl.with_key("--profile"),
                       fmt::format("a vidur profile is measured on one GPU type; --gpus names {}", gpus.size()),
                       "give --gpus the profile's GPU only");
    }
    o.profile_text = std::make_shared<const std::string>(io::read_file(a.profile));
    o.profile_name = a.profile;
  }
  const std::vector<int64_t> seqs = int_list(a.max_seqs, "--max-seqs"), toks = int_list(a.max_batched_tokens, "--max-batched-tokens");
  const std::vector<int64_t> chunks = int_list(a.chunk_sizes, "--chunk-size"), reps = int_list(a.replicas, "--replicas");

  {
    const std::vector<std::string> routers = sv::router_names();
    if (std::find(routers.begin(), routers.end(), a.router) == routers.end()) {
      throw InputError(kCl.with_key("--router"), "unknown router '" + a.router + "'", suggest(a.router, routers));
    }
  }
  std::vector<sv::CapacityConfig> configs;
  for (const hw::GpuSpec* g : gpus) {
    const hw::PriceSpec* price = cat.hw.find_price(g->name);
    for (int64_t tp : tps) {
      for (int64_t pp : pps) {
        for (const std::string& s : schedulers) {
          for (int64_t ms : seqs) {
            for (int64_t mt : toks) {
              // The chunk size matters to Sarathi only; other schedulers get one configuration.
              const std::vector<int64_t> cs = s == "sarathi" ? chunks : std::vector<int64_t>{chunks.front()};
              for (int64_t ch : cs) {
                for (int64_t r : reps) {
                  sv::CapacityConfig c;
                  c.gpu = g;
                  c.calibration = g == calibrated_gpu ? &*calibration : nullptr;
                  c.tp = tp;
                  c.pp = pp;
                  c.scheduler = s;
                  c.max_seqs = ms;
                  c.max_batched_tokens = mt;
                  c.chunk_size = ch;
                  c.replicas = r;
                  c.router = a.router;
                  c.usd_per_gpu_hour = price != nullptr ? price->usd_per_gpu_hour : 0.0;
                  configs.push_back(c);
                }
              }
            }
          }
        }
      }
    }
  }
  std::string label;
  const sv::WorkloadFactory factory = make_factory(a, label);
  ProgressBar bar("plan serve", configs.size(), ProgressOptions{ctx.global.quiet || ctx.global.json});
  o.progress = [&bar](size_t done, size_t) { bar.update(done); };
  const std::vector<sv::CapacityResult> results = sv::plan_capacity(model, configs, factory, o);
  bar.finish();
  std::vector<const sv::CapacityResult*> feasible, infeasible;
  for (const sv::CapacityResult& r : results) (r.feasible ? feasible : infeasible).push_back(&r);
  ctx.exit_code = feasible.empty() ? 1 : 0;
  const size_t shown = std::min<size_t>(feasible.size(), static_cast<size_t>(a.top));

  if (ctx.global.json) {
    Json j = envelope("plan serve");
    j["model"] = model.name;
    j["workload"] = label;
    j["requests"] = a.requests;
    j["seed"] = a.seed;
    j["exec_model"] = a.exec_model;
    j["dtype"] = a.dtype;
    j["expert_weights"] = a.expert_weights;
    j["profile"] = a.profile.empty() ? Json(nullptr) : Json(a.profile);
    j["cpu_overhead_s"] = o.exec.cpu_base.to_seconds();
    j["cpu_overhead_per_seq_s"] = o.exec.cpu_per_seq.to_seconds();
    j["kv_tokens_override"] = a.kv_tokens > 0 ? Json(a.kv_tokens) : Json(nullptr);
    j["stable_only"] = a.stable_only;
    j["calibration"] = a.calibration.empty() ? Json(nullptr) : Json(a.calibration);
    j["router"] = a.router;
    j["replica_model"] = "cluster";
    Json slos = Json::array();
    for (const sv::SloBound& b : o.slos) slos.push_back(Json{{"name", b.name()}, {"limit_s", b.limit.to_seconds()}});
    j["slos"] = slos;
    j["counts"] = Json{{"configurations", results.size()}, {"feasible", feasible.size()}, {"infeasible", infeasible.size()}};
    Json top = Json::array();
    for (size_t i = 0; i < shown; ++i) {
      const sv::CapacityResult& r = *feasible[i];
      const sv::RunMetrics& m = r.at_capacity;
      top.push_back(Json{{"rank", i + 1},
                         {"config", config_json(r)},
                         {"max_rate", r.rate},
                         {"max_rate_per_replica", r.rate_per_replica},
                         {"kv_capacity_tokens", r.kv_tokens},
                         {"usd_per_gpu_hour", r.config.usd_per_gpu_hour > 0 ? Json(r.config.usd_per_gpu_hour) : Json(nullptr)},
                         {"usd_per_hour", r.config.usd_per_gpu_hour > 0 ? Json(r.usd_per_hour) : Json(nullptr)},
                         {"usd_per_million_requests", std::isnan(r.usd_per_million) ? Json(nullptr) : Json(r.usd_per_million)},
                         {"limit", r.limit},
                         {"probes", r.probes},
                         {"at_max_rate",
                          {{"ttft_s", quantiles_json(m.ttft)},
                           {"tpot_s", quantiles_json(m.tpot)},
                           {"e2e_s", quantiles_json(m.e2e)},
                           {"evictions", m.evictions},
                           {"rejected_context", m.rejected_context},
                           {"latency_slope", m.latency_slope},
                           {"request_throughput", m.request_throughput}}}});
    }
    j["top"] = top;
    Json inf = Json::array();
    for (const sv::CapacityResult* r : infeasible) inf.push_back(Json{{"config", config_json(*r)}, {"reason", r->reason}});
    j["infeasible"] = inf;
    ctx.out << io::dump_json(j);
    return;
  }
  std::string slo_text;
  for (const sv::SloBound& b : o.slos) slo_text += (slo_text.empty() ? "" : ", ") + fmt::format("{} <= {:g} ms", b.name(), b.limit.to_ms());
  if (slo_text.empty()) slo_text = "none (the largest stable rate)";
  ctx.out << fmt::format("{} serving '{}' ({} requests, seed {}), {} model; SLOs: {}\n", model.name, label, a.requests,
                         a.seed, a.exec_model, slo_text);
  ctx.out << fmt::format("configurations: {}, feasible {}, infeasible {}; replicas behind the {} router (docs/serving.md)\n\n",
                         results.size(), feasible.size(), infeasible.size(), a.router);
  if (!feasible.empty()) {
    Table t({"#", "gpu", "tp", "pp", "repl", "scheduler", "caps", "max req/s", "TTFT p90 s", "TPOT p99 ms", "GPUs",
             "$/h", "$/1M req", "limit"},
            fmt::format("top {} by cost per 1M requests at the largest {}", shown,
                        o.slos.empty() ? "stable rate" : "rate meeting the SLOs"));
    for (size_t i = 0; i < shown; ++i) {
      const sv::CapacityResult& r = *feasible[i];
      const sv::CapacityConfig& c = r.config;
      t.add_row({std::to_string(i + 1), c.gpu->name, std::to_string(c.tp), std::to_string(c.pp), std::to_string(c.replicas),
                 c.scheduler, caps(c), fmt::format("{:.2f}", r.rate),
                 fmt::format("{:.3f}", r.at_capacity.value(sv::SloMetric::kTtft, 0.9)),
                 fmt::format("{:.1f}", 1e3 * r.at_capacity.value(sv::SloMetric::kTpot, 0.99)),
                 std::to_string(c.tp * c.pp * c.replicas), c.usd_per_gpu_hour > 0 ? money(r.usd_per_hour) : "-",
                 money(r.usd_per_million), r.limit.empty() ? "-" : r.limit});
    }
    ctx.out << t.render() << "\n";
  } else {
    ctx.out << (o.slos.empty() ? "no configuration is stable at any rate\n\n" : "no configuration meets the SLOs\n\n");
  }
  if (!infeasible.empty()) {
    Table t({"gpu", "tp", "pp", "repl", "scheduler", "caps", "reason"}, "infeasible configurations");
    for (const sv::CapacityResult* r : infeasible) {
      const sv::CapacityConfig& c = r->config;
      t.add_row({c.gpu->name, std::to_string(c.tp), std::to_string(c.pp), std::to_string(c.replicas), c.scheduler, caps(c),
                 r->reason});
    }
    ctx.out << t.render();
  }
}

}  // namespace

void register_plan_serve_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  auto a = std::make_shared<PlanServeArgs>();
  CLI::App* c = plan_group(app)->add_subcommand(
      "serve", "largest request rate meeting latency SLOs per serving configuration, ranked by cost per request");
  c->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  c->add_option("--model", a->model, "catalog model name or path to a config.json")->type_name("NAME");
  c->add_option("--gpus", a->gpus, "GPU types (comma-separated catalog names)")->capture_default_str();
  c->add_option("--tp", a->tp, "TP degrees to try")->capture_default_str();
  c->add_option("--pp", a->pp, "PP degrees to try")->capture_default_str();
  c->add_option("--schedulers", a->schedulers, "schedulers to try (orrery serve list)")->capture_default_str();
  c->add_option("--max-seqs", a->max_seqs, "sequence caps to try")->capture_default_str();
  c->add_option("--max-batched-tokens", a->max_batched_tokens, "token caps to try")->capture_default_str();
  c->add_option("--chunk-size", a->chunk_sizes, "sarathi chunk sizes to try")->capture_default_str();
  c->add_option("--replicas", a->replicas, "replica counts to try")->capture_default_str();
  c->add_option("--router", a->router, "router in front of the replicas: round-robin | least-outstanding | least-kv | prefix-aware")
      ->capture_default_str();
  c->add_option("--workload", a->workload, "synthetic workload spec (default: the Azure conversation fit)");
  c->add_option("--trace", a->trace, "request trace (rescaled to each rate)")->type_name("FILE");
  c->add_option("--trace-format", a->trace_format, "azure | mooncake | vidur | generic (default: detected)");
  c->add_option("--requests", a->requests, "requests per probe (a trace: its first N)")->capture_default_str();
  c->add_option("--seed", a->seed, "seed of the synthetic workload")->capture_default_str();
  c->add_option("--dtype", a->dtype, "weights and KV precision")->capture_default_str();
  c->add_option("--expert-weights", a->expert_weights,
                "MoE models: the routed experts' weights stored as same (--dtype) | fp8 | mxfp4, computed in --dtype")
      ->capture_default_str();
  c->add_option("--exec-model", a->exec_model, "roofline | vidur-profile | linear | piecewise")->capture_default_str();
  c->add_option("--profile", a->profile, "vidur-profile: the model's measured mlp.csv (one --gpus type)")->type_name("FILE");
  c->add_option("--kv-tokens", a->kv_tokens, "KV capacity per replica in tokens (overrides the memory plan)");
  c->add_option("--cpu-overhead", a->cpu_overhead, "CPU time per iteration")->capture_default_str();
  c->add_option("--cpu-overhead-per-seq", a->cpu_overhead_per_seq, "CPU time per sequence per iteration")->capture_default_str();
  c->add_flag("--stable-only", a->stable_only, "no latency SLO: rank by the largest stable rate (docs/serving.md)");
  c->add_option("--calibration", a->calibration,
                "compute-model constants measured on your own GPU (YAML, docs/compute.md \"Calibration files\"), for "
                "the configurations on its GPU (roofline model)");
  const std::vector<std::string> names = sv::slo_names();
  for (size_t i = 0; i < names.size(); ++i) {
    c->add_option("--slo-" + names[i], a->slo_values[i], "SLO bound on " + names[i] + " (a time, e.g. 2s, 200ms)")
        ->type_name("TIME");
  }
  c->add_option("--top", a->top, "configurations to list")->capture_default_str();
  c->add_option("--threads", a->threads, "threads (0 = all cores); results do not depend on it")->capture_default_str();
  c->add_option("--tolerance", a->tolerance, "relative width of the final rate bracket")->capture_default_str();
  c->add_option("--start-rate", a->start_rate, "requests/s per replica where the search starts")->capture_default_str();
  c->footer("Default SLOs (when none is given): --slo-ttft-p90 2s --slo-tpot-p99 200ms. docs/serving.md, docs/cli.md.");
  actions.emplace_back(c, [a](Context& ctx) { run_plan_serve(ctx, *a); });
}

}  // namespace orrery::cli
