// `orrery serve`: simulate an LLM serving replica on a request trace or a synthetic workload (TTFT, TPOT,
// ITL, throughput, goodput, preemptions, KV utilization); `orrery serve fluid`: the WAIT paper's fluid
// equilibrium; `orrery serve list`: the schedulers, routers and execution-time models. With --replicas or
// --disagg, a cluster of replicas behind a router (serve/cluster.h). docs/serving.md.
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/output.h"
#include "cli/train_common.h"
#include "core/progress.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "io/calibration_file.h"
#include "io/trace_reader.h"
#include "serve/cluster.h"
#include "serve/capacity.h"
#include "serve/fluid.h"
#include "serve/serving_run_reader.h"
#include "serve/simulator.h"
#include "serve/workload_spec.h"

namespace orrery::cli {
namespace {

using io::Json;
namespace sv = orrery::serve;

const Where kCl{"<command line>", 0, ""};

struct ServeArgs {
  std::string model = "llama2-7b";
  std::string gpu = "a100-sxm-80gb";
  int64_t tp = 1;
  int64_t pp = 1;
  std::string dtype = "fp16";
  std::string expert_weights = "same";
  std::string scheduler = "vllm";
  std::string trace;
  std::string trace_format;
  std::string workload;
  std::optional<double> rate;
  std::optional<int64_t> requests;
  std::string exec_model = "roofline";
  std::string profile;
  std::string calibration;  // --calibration FILE: compute-model constants for the --gpu replicas
  std::string requests_csv;
  std::string trace_out;
  int64_t trace_limit = 100000;
  bool skip_bad_lines = false;
  bool fail_on_reject = false;
  uint64_t seed = 0;
  int64_t block_size = sv::kDefaultBlockSize;
  double watermark = sv::kDefaultWatermark;
  double gpu_memory_utilization = sv::kDefaultGpuMemoryUtilization;
  std::string swap_space = "4 GiB";
  int64_t kv_tokens = 0;
  int64_t max_context = 0;
  int64_t max_seqs = 128;
  int64_t max_batched_tokens = 4096;
  int64_t chunk_size = 512;
  std::string preemption = "recompute";
  std::string memory;
  bool no_prefix_caching = false;
  int64_t prefix_unit_tokens = 512;
  double d0_ms = sv::kWaitD0Ms;
  double d1_ms = sv::kWaitD1Ms;
  std::string cpu_overhead = "1 ms";
  std::string cpu_overhead_per_seq = "10 us";
  std::string slo_ttft = "2 s";
  std::string slo_tpot = "200 ms";
  std::vector<int64_t> wait_thresholds;
  double wait_margin = 0.05;
  int64_t nested_cap = 0;
  int64_t nested_segments = 4;
  std::string time_limit;
  // Cluster (serve/cluster.h).
  int64_t replicas = 1;
  std::string router = "round-robin";
  std::string disagg;  // "P:D"
  std::string decode_gpu;
  int64_t decode_tp = 0;  // 0: --tp
  std::string decode_router = "least-outstanding";
  std::string placement = "packed";
  std::string node;
};

// Everything a run needs, resolved from the arguments.
struct Setup {
  model::ModelSpec model;
  const hw::GpuSpec* gpu = nullptr;
  sv::ReplicaSpec replica;
  std::optional<compute::Calibration> calibration;  // --calibration, when it applies to this GPU
  sv::MemoryPlan plan;
  std::unique_ptr<sv::ExecModel> exec;
  std::ifstream profile;
  sv::ExecContext exec_ctx;
  int64_t capacity_tokens = 0;
};

// Per-type statistics of the first requests of a stream (rates, mean lengths), for WAIT and the fluid model
// (serve/capacity.h; the same figures plan serve uses).
using StreamStats = sv::WorkloadStats;

void add_common_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("--model", a.model, "catalog model or path to a config.json")->capture_default_str();
  cmd->add_option("--gpu", a.gpu, "catalog GPU")->capture_default_str();
  cmd->add_option("--calibration", a.calibration,
                  "compute-model constants measured on your own GPU (YAML, docs/compute.md \"Calibration files\"), "
                  "for the replicas on --gpu (roofline model)");
  cmd->add_option("--tp", a.tp, "tensor-parallel degree")->capture_default_str();
  cmd->add_option("--pp", a.pp, "pipeline-parallel degree")->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "weights and KV precision")->capture_default_str();
  cmd->add_option("--expert-weights", a.expert_weights,
                  "MoE models: the routed experts' weights stored as same (--dtype) | fp8 | mxfp4 (4.25 bits, as gpt-oss ships them), computed in --dtype")
      ->capture_default_str();
  cmd->add_option("--trace", a.trace, "request trace (azure, mooncake, vidur or generic CSV; docs/workloads.md)")
      ->type_name("FILE");
  cmd->add_option("--trace-format", a.trace_format, "azure | mooncake | vidur | generic | serving-run (default: detected)");
  cmd->add_option("--workload", a.workload,
                  "synthetic workload: 'default' (Azure conversation fit) or e.g. 'prompt=512,output=20' "
                  "(docs/serving.md)");
  cmd->add_option("--rate", a.rate, "arrival rate, requests/s (a trace is rescaled to it)");
  cmd->add_option("--requests", a.requests, "number of requests (default 10000 synthetic, all of a trace)");
  cmd->add_flag("--skip-bad-lines", a.skip_bad_lines, "skip and count malformed trace lines instead of failing");
  cmd->add_option("--seed", a.seed, "random seed of the synthetic workload")->capture_default_str();
  cmd->add_option("--exec-model", a.exec_model, "roofline | vidur-profile | linear | piecewise")->capture_default_str();
  cmd->add_option("--profile", a.profile, "vidur-profile: the model's mlp.csv")->type_name("FILE");
  cmd->add_option("--d0-ms", a.d0_ms, "linear model: fixed time per iteration (ms)")->capture_default_str();
  cmd->add_option("--d1-ms", a.d1_ms, "linear model: time per batch KV token (ms)")->capture_default_str();
  cmd->add_option("--cpu-overhead", a.cpu_overhead, "CPU time per iteration")->capture_default_str();
  cmd->add_option("--cpu-overhead-per-seq", a.cpu_overhead_per_seq, "CPU time per sequence per iteration")
      ->capture_default_str();
  cmd->add_option("--block-size", a.block_size, "KV block size (tokens)")->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", a.gpu_memory_utilization, "fraction of HBM the engine may use")
      ->capture_default_str();
  cmd->add_option("--kv-tokens", a.kv_tokens, "KV capacity in tokens (overrides the memory plan)");
  cmd->add_option("--max-context", a.max_context, "longest prompt + output (default: the model's context)");
}

void add_serve_options(CLI::App* cmd, ServeArgs& a) {
  add_common_options(cmd, a);
  cmd->add_option("--scheduler", a.scheduler, "static | orca | vllm | sarathi | sjf | wait | nested-wait")
      ->capture_default_str();
  cmd->add_option("--requests-csv", a.requests_csv, "write one CSV row per request")->type_name("FILE");
  cmd->add_option("--trace-out", a.trace_out, "write a Chrome/Perfetto trace of the iterations")->type_name("FILE");
  cmd->add_option("--trace-limit", a.trace_limit, "most iterations written to --trace-out")->capture_default_str();
  cmd->add_flag("--fail-on-reject", a.fail_on_reject,
                "exit 2 on the first request longer than the context or the KV capacity (default: reject and go on)");
  cmd->add_option("--watermark", a.watermark, "fraction of KV blocks kept free when admitting")->capture_default_str();
  cmd->add_option("--swap-space", a.swap_space, "host memory for swapped KV blocks per GPU")->capture_default_str();
  cmd->add_option("--max-seqs", a.max_seqs, "sequences per batch")->capture_default_str();
  cmd->add_option("--max-batched-tokens", a.max_batched_tokens, "tokens per batch")->capture_default_str();
  cmd->add_option("--chunk-size", a.chunk_size, "sarathi: token budget per iteration")->capture_default_str();
  cmd->add_option("--preemption", a.preemption, "recompute | swap")->capture_default_str();
  cmd->add_option("--memory", a.memory, "evict-lifo | reserve (default: reserve for orca and static, else evict-lifo)");
  cmd->add_flag("--no-prefix-caching", a.no_prefix_caching, "ignore the trace's prefix hashes");
  cmd->add_option("--prefix-unit-tokens", a.prefix_unit_tokens, "tokens per prefix hash")->capture_default_str();
  cmd->add_option("--slo-ttft", a.slo_ttft, "goodput SLO on TTFT")->capture_default_str();
  cmd->add_option("--slo-tpot", a.slo_tpot, "goodput SLO on TPOT")->capture_default_str();
  cmd->add_option("--wait-thresholds", a.wait_thresholds, "wait: n_j per type (default: fluid model)")->delimiter(',');
  cmd->add_option("--wait-margin", a.wait_margin, "wait, nested-wait: relative slack s on the iteration time in the fluid thresholds (serve/fluid.h)")->capture_default_str();
  cmd->add_option("--nested-cap", a.nested_cap, "nested-wait: batch cap tl (default: from the fluid model)");
  cmd->add_option("--nested-segments", a.nested_segments, "nested-wait: segments L")->capture_default_str();
  cmd->add_option("--time-limit", a.time_limit, "stop the simulation at this simulated time (e.g. '1 h')");
  cmd->add_option("--replicas", a.replicas, "replicas behind the router (colocated prefill and decode)")
      ->capture_default_str();
  cmd->add_option("--router", a.router, "round-robin | least-outstanding | least-kv | prefix-aware")
      ->capture_default_str();
  cmd->add_option("--disagg", a.disagg, "disaggregated prefill:decode replicas, e.g. 1:1 (DistServe, Splitwise)")
      ->type_name("P:D");
  cmd->add_option("--decode-gpu", a.decode_gpu, "--disagg: GPU of the decode replicas (default: --gpu)");
  cmd->add_option("--decode-tp", a.decode_tp, "--disagg: TP of the decode replicas (default: --tp)");
  cmd->add_option("--decode-router", a.decode_router, "--disagg: router from the prefill to the decode pool")
      ->capture_default_str();
  cmd->add_option("--placement", a.placement, "--disagg: packed (prefill pool, then decode pool) | interleaved")
      ->capture_default_str();
  cmd->add_option("--node", a.node, "catalog node of --gpu (KV-transfer links; default: the first node with that GPU)");
}

// True when `path` opens and starts with the serving-run header (../shared/data/serving-runs).
bool serving_run_file(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  return in && std::getline(in, first) && sv::is_serving_run_header(first);
}

// A fresh request stream (called twice when statistics are needed first).
std::unique_ptr<sv::RequestSource> open_source(const ServeArgs& a, io::TraceReader** reader) {
  if (a.rate && !(*a.rate > 0.0 && *a.rate <= 1e9)) {
    throw InputError(kCl.with_key("--rate"), fmt::format("must be > 0 and at most 1e9 requests/s, got {}", *a.rate));
  }
  if (a.requests && *a.requests < 1) throw InputError(kCl.with_key("--requests"), "must be >= 1");
  if (!a.trace.empty() && !a.workload.empty()) {
    throw InputError(kCl.with_key("--trace"), "give either --trace or --workload, not both");
  }
  if (!a.trace.empty() && (a.trace_format == "serving-run" || (a.trace_format.empty() && serving_run_file(a.trace)))) {
    auto open_run = [&] {
      return std::make_unique<sv::ServingRunReader>(std::make_unique<std::ifstream>(a.trace), a.trace);
    };
    std::unique_ptr<sv::RequestSource> src = open_run();
    if (a.rate) {
      auto pass = open_run();
      const StreamStats st = sv::workload_stats(*pass, a.requests.value_or(INT64_MAX));
      if (st.rate <= 0.0) throw InputError(kCl.with_key("--rate"), "cannot rescale a trace with one arrival time");
      src = std::make_unique<sv::RateScaledSource>(std::move(src), *a.rate / st.rate, kCl.with_key("--rate"));
    }
    if (a.requests) src = std::make_unique<sv::TakeSource>(std::move(src), *a.requests);
    return src;
  }
  if (!a.trace.empty()) {
    io::TraceOptions o;
    o.skip_bad_lines = a.skip_bad_lines;
    if (!a.trace_format.empty()) o.format = io::parse_trace_format(a.trace_format, kCl.with_key("--trace-format"));
    std::unique_ptr<io::TraceReader> tr = io::open_trace(a.trace, o);
    if (reader != nullptr) *reader = tr.get();
    std::unique_ptr<sv::RequestSource> src = std::move(tr);
    if (a.rate) {
      // Native rate from a first pass over the same stream (O(1) memory).
      io::TraceOptions o2 = o;
      std::unique_ptr<io::TraceReader> pass = io::open_trace(a.trace, o2);
      std::unique_ptr<sv::RequestSource> counted =
          a.requests ? std::unique_ptr<sv::RequestSource>(std::make_unique<sv::TakeSource>(std::move(pass), *a.requests))
                     : std::move(pass);
      const StreamStats st = sv::workload_stats(*counted, INT64_MAX);
      if (st.rate <= 0.0) {
        throw InputError(kCl.with_key("--rate"), "cannot rescale the trace: it has fewer than two distinct arrival times");
      }
      src = std::make_unique<sv::RateScaledSource>(std::move(src), *a.rate / st.rate, kCl.with_key("--rate"));
    }
    if (a.requests) src = std::make_unique<sv::TakeSource>(std::move(src), *a.requests);
    return src;
  }
  const sv::WorkloadSpec spec = sv::parse_workload_spec(a.workload.empty() ? "default" : a.workload, kCl.with_key("--workload"));
  return sv::make_workload(spec, a.rate, a.seed, a.requests.value_or(10000), kCl.with_key("--workload"));
}

Setup make_setup(Context& ctx, const ServeArgs& a) {
  Setup s;
  const io::Catalog& c = ctx.catalog();
  s.model = c.model(a.model, kCl.with_key("--model"));
  s.gpu = &c.hw.get_gpu(a.gpu, kCl.with_key("--gpu"));
  const std::optional<hw::DType> dt = hw::parse_dtype(a.dtype);
  if (!dt) throw InputError(kCl.with_key("--dtype"), "unknown precision '" + a.dtype + "'", suggest(a.dtype, hw::dtype_names()));
  s.replica.model = &s.model;
  s.replica.gpu = s.gpu;
  s.replica.tp = a.tp;
  s.replica.pp = a.pp;
  s.replica.dtype = *dt;
  s.replica.expert_weights = sv::parse_expert_weights(a.expert_weights, kCl.with_key("--expert-weights"));
  s.replica.block_size = a.block_size;
  s.replica.watermark = a.watermark;
  s.replica.gpu_memory_utilization = a.gpu_memory_utilization;
  s.replica.swap_space = parse_bytes(a.swap_space, kCl.with_key("--swap-space"));
  s.replica.kv_tokens_override = a.kv_tokens;
  s.replica.max_context = a.max_context;
  s.replica.prefix_caching = !a.no_prefix_caching;
  s.replica.prefix_unit_tokens = a.prefix_unit_tokens;
  s.replica.workspace_tokens = a.max_batched_tokens;
  s.replica.workspace_seqs = a.max_seqs;
  if (!a.calibration.empty()) {
    s.calibration = io::read_calibration_file(a.calibration, *s.gpu, compute::default_calibration(*s.gpu));
    s.replica.calibration = &*s.calibration;
  }
  s.replica.validate(kCl.with_key(""));
  if (!s.gpu->peak(*dt)) {
    throw InputError(kCl.with_key("--dtype"), "GPU '" + s.gpu->name + "' has no " + a.dtype + " peak", "try fp16 or bf16");
  }
  s.plan = sv::plan_memory(s.replica);
  if (!s.plan.fits && a.kv_tokens == 0) {
    throw InputError(kCl.with_key("--model"),
                     fmt::format("{} does not fit on {} with TP {} PP {}: {}", s.model.name, s.gpu->name, a.tp, a.pp,
                                 s.plan.reason),
                     "use a larger --tp/--pp or a GPU with more memory");
  }
  s.capacity_tokens = a.kv_tokens > 0 ? (a.kv_tokens + a.block_size - 1) / a.block_size * a.block_size : s.plan.kv_tokens;
  s.exec_ctx.replica = &s.replica;
  s.exec_ctx.cpu_base = parse_time(a.cpu_overhead, kCl.with_key("--cpu-overhead"));
  s.exec_ctx.cpu_per_seq = parse_time(a.cpu_overhead_per_seq, kCl.with_key("--cpu-overhead-per-seq"));
  // Bounds far above any GPU (the WAIT paper's A100 fit: d0 ~ 10 ms, d1 ~ 1e-4 ms per token) that keep an
  // iteration inside core::Time's range (9.2e6 s) at the largest KV capacity, 2^32 tokens.
  if (!(a.d0_ms >= 0.0 && a.d0_ms <= 1e5)) {
    throw InputError(kCl.with_key("--d0-ms"), fmt::format("must be from 0 to 1e5 ms, got {}", a.d0_ms));
  }
  if (!(a.d1_ms >= 0.0 && a.d1_ms <= 1.0)) {
    throw InputError(kCl.with_key("--d1-ms"), fmt::format("must be from 0 to 1 ms per KV token, got {}", a.d1_ms));
  }
  s.exec_ctx.d0 = Time::seconds(a.d0_ms * 1e-3);
  s.exec_ctx.d1_s = a.d1_ms * 1e-3;
  if (!a.profile.empty()) {
    s.profile.open(a.profile);
    if (!s.profile) throw InputError(kCl.with_key("--profile"), "cannot open '" + a.profile + "'");
    s.exec_ctx.profile = &s.profile;
    s.exec_ctx.profile_name = a.profile;
  }
  s.exec = sv::make_exec_model(a.exec_model, s.exec_ctx, kCl.with_key("--exec-model"));
  return s;
}

// d0, d1 of the linear model, or fitted to the execution model on WAIT-style batches of the mean lengths.
sv::LinearFit linear_params(const ServeArgs& a, const Setup& s, const StreamStats& st, int64_t max_batch_tokens) {
  if (a.exec_model == "linear") return sv::LinearFit{a.d0_ms * 1e-3, a.d1_ms * 1e-3};
  return sv::fit_linear(*s.exec, st.mean_prompt, st.mean_output, max_batch_tokens);
}

// ---- observers: per-request CSV, Chrome trace, progress ----

class Recorder final : public sv::SimObserver {
 public:
  Recorder(const ServeArgs& a, std::optional<int64_t> total, bool quiet, bool cluster = false)
      : csv_(!a.requests_csv.empty()), trace_(!a.trace_out.empty()), cluster_(cluster), limit_(a.trace_limit) {
    if (csv_) {
      rows_ = "id,arrival_s,prompt_tokens,output_tokens,status,first_scheduled_s,first_token_s,finish_s,ttft_s,tpot_s,"
              "e2el_s,preemptions,restarts,wasted_tokens";
      rows_ += cluster_ ? ",replica,prefill_replica\n" : "\n";
    }
    if (total) bar_ = std::make_unique<ProgressBar>("serve", static_cast<uint64_t>(*total), ProgressOptions{quiet});
  }
  void on_request(const sv::RequestRecord& r) override {
    ++seen_;
    if (bar_) bar_->update(seen_);
    if (!csv_) return;
    const sv::Request& q = *r.request;
    auto t = [](Time x) { return x == Time::max() ? std::string() : fmt::format("{:.6f}", x.to_seconds()); };
    std::string ttft, tpot, e2el;
    if (r.status == sv::RequestStatus::kDone) {
      ttft = fmt::format("{:.6f}", (r.first_token - q.arrival).to_seconds());
      e2el = fmt::format("{:.6f}", (r.finish - q.arrival).to_seconds());
      if (q.output_tokens > 1) {
        tpot = fmt::format("{:.6f}", (r.finish - r.first_token).to_seconds() / static_cast<double>(q.output_tokens - 1));
      }
    }
    rows_ += fmt::format("{},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{}", q.id, q.arrival.to_seconds(), q.prompt_tokens,
                         q.output_tokens, sv::to_string(r.status), t(r.first_scheduled), t(r.first_token), t(r.finish),
                         ttft, tpot, e2el, r.preemptions, r.restarts, r.wasted_tokens);
    if (cluster_) {
      rows_ += fmt::format(",{},{}", r.replica, r.prefill_replica >= 0 ? std::to_string(r.prefill_replica) : "");
    }
    rows_ += "\n";
  }
  void on_iteration(const sv::IterationRecord& it) override {
    if (!trace_) return;
    if (static_cast<int64_t>(events_.size()) >= limit_) {
      truncated_ = true;
      return;
    }
    events_.push_back(Json{{"name", it.prefill_seqs > 0 ? "mixed" : "decode"},
                           {"cat", "iteration"},
                           {"ph", "X"},
                           {"ts", it.start.to_us()},
                           {"dur", it.duration.to_us()},
                           {"pid", it.replica},
                           {"tid", it.engine},  // a pipeline's virtual engines overlap: one row each
                           {"args",
                            {{"seqs", it.seqs},
                             {"tokens", it.tokens},
                             {"prefill_seqs", it.prefill_seqs},
                             {"decode_seqs", it.decode_seqs},
                             {"kv_tokens", it.kv_tokens},
                             {"used_blocks", it.used_blocks},
                             {"waiting", it.waiting},
                             {"swap_us", it.transfer.to_us()}}}});
    events_.push_back(Json{{"name", it.engine == 0 ? std::string("kv_blocks") : fmt::format("kv_blocks engine {}", it.engine)},
                           {"ph", "C"},
                           {"ts", it.start.to_us()},
                           {"pid", it.replica},
                           {"args", {{"used", it.used_blocks}, {"waiting", it.waiting}}}});
  }
  // Cluster traces: one named process row per replica ("replica 3 (decode)").
  void name_replicas(const std::vector<sv::ReplicaSummary>& replicas) {
    if (!trace_) return;
    for (const sv::ReplicaSummary& x : replicas) {
      events_.push_back(Json{{"name", "process_name"},
                             {"ph", "M"},
                             {"pid", x.index},
                             {"args", {{"name", fmt::format("replica {} ({})", x.index, sv::to_string(x.role))}}}});
    }
  }
  void write(const ServeArgs& a) {
    if (bar_) bar_->finish();
    if (csv_) io::write_file_atomic(a.requests_csv, rows_);
    if (trace_) {
      Json doc{{"traceEvents", std::move(events_)},
               {"displayTimeUnit", "ms"},
               {"otherData", {{"orrery_version", ORRERY_VERSION}, {"truncated", truncated_}}}};
      io::write_file_atomic(a.trace_out, doc.dump() + "\n");
    }
  }

 private:
  bool csv_;
  bool trace_;
  bool cluster_;
  int64_t limit_;
  std::string rows_;
  Json events_ = Json::array();
  bool truncated_ = false;
  uint64_t seen_ = 0;
  std::unique_ptr<ProgressBar> bar_;
};

// Fails on the first rejected request (--fail-on-reject).
class RejectGuard final : public sv::SimObserver {
 public:
  RejectGuard(sv::SimObserver& inner, const Setup& s) : inner_(inner), setup_(s) {}
  void on_request(const sv::RequestRecord& r) override {
    if (r.status == sv::RequestStatus::kRejectedContext || r.status == sv::RequestStatus::kRejectedKv) {
      const sv::Request& q = *r.request;
      const bool ctx = r.status == sv::RequestStatus::kRejectedContext;
      throw InputError(kCl.with_key("--fail-on-reject"),
                       fmt::format("request {} (prompt {} + output {} tokens) exceeds the {} ({} tokens)", q.id,
                                   q.prompt_tokens, q.output_tokens, ctx ? "model context" : "KV capacity",
                                   ctx ? setup_.replica.context_limit() : setup_.capacity_tokens),
                       "drop --fail-on-reject to reject such requests and go on");
    }
    inner_.on_request(r);
  }
  void on_iteration(const sv::IterationRecord& it) override { inner_.on_iteration(it); }

 private:
  sv::SimObserver& inner_;
  const Setup& setup_;
};

template <class S>
Json summary_json(const S& s, double scale) {
  if (s.count() == 0) return Json{{"count", 0}};
  return Json{{"count", s.count()},       {"mean", s.mean() * scale},          {"p50", s.quantile(0.5) * scale},
              {"p90", s.quantile(0.9) * scale}, {"p99", s.quantile(0.99) * scale}, {"max", s.max() * scale}};
}

template <class S>
std::string ms_row(const S& s, double q) {
  if (s.count() == 0) return "-";
  return fmt::format("{:.2f}", (q < 0 ? s.mean() : s.quantile(q)) * 1e3);
}

sv::SchedulerConfig scheduler_config(const ServeArgs& a) {
  sv::SchedulerConfig sc;
  sc.max_seqs = a.max_seqs;
  sc.max_batched_tokens = a.max_batched_tokens;
  sc.chunk_size = a.chunk_size;
  if (a.preemption == "swap") {
    sc.preemption = sv::Preemption::kSwap;
  } else if (a.preemption != "recompute") {
    throw InputError(kCl.with_key("--preemption"), "expected recompute or swap, got '" + a.preemption + "'",
                     suggest(a.preemption, {"recompute", "swap"}));
  }
  if (a.memory == "reserve") {
    sc.memory = sv::MemoryPolicy::kReserve;
  } else if (a.memory == "evict-lifo") {
    sc.memory = sv::MemoryPolicy::kEvictLifo;
  } else if (!a.memory.empty()) {
    throw InputError(kCl.with_key("--memory"), "expected evict-lifo or reserve, got '" + a.memory + "'",
                     suggest(a.memory, {"evict-lifo", "reserve"}));
  }
  sc.wait_thresholds = a.wait_thresholds;
  sc.wait_margin = a.wait_margin;
  sc.nested_cap = a.nested_cap;
  sc.nested_segments = a.nested_segments;
  return sc;
}

// WAIT and Nested WAIT: per-type rates and lengths from a first pass over the stream, scaled by `share`
// (the fraction of the stream one replica sees), and the linear fit of the execution model.
std::optional<sv::LinearFit> fit_wait(const ServeArgs& a, const Setup& s, sv::SchedulerConfig& sc, double share) {
  if (a.scheduler != "wait" && a.scheduler != "nested-wait") return std::nullopt;
  std::unique_ptr<sv::RequestSource> pre = open_source(a, nullptr);
  StreamStats st = sv::workload_stats(*pre, 100000);
  st.rate *= share;
  for (sv::TypeStats& t : st.types) t.rate *= share;
  const sv::LinearFit fit = linear_params(a, s, st, a.max_batched_tokens);
  sc.types = st.types;
  sc.d0_s = fit.d0_s;
  sc.d1_s = fit.d1_s;
  sc.max_output = st.max_output;
  if (a.scheduler == "nested-wait" && sc.nested_cap == 0 && st.requests > 0) {
    // tl = the fluid WAIT threshold of the aggregated workload, spread over its mean decode length.
    const sv::TypeStats all{st.rate, st.mean_prompt, st.mean_output, st.max_output};
    sc.nested_cap = sv::nested_wait_cap_fluid(all, fit.d0_s, fit.d1_s, a.wait_margin, static_cast<double>(s.capacity_tokens));
  }
  return fit;
}

sv::SimOptions sim_options(const ServeArgs& a) {
  sv::SimOptions so;
  so.slo.ttft = parse_time(a.slo_ttft, kCl.with_key("--slo-ttft"));
  so.slo.tpot = parse_time(a.slo_tpot, kCl.with_key("--slo-tpot"));
  if (!a.time_limit.empty()) so.time_limit = parse_time_positive(a.time_limit, kCl.with_key("--time-limit"));
  return so;
}

Json config_json(const ServeArgs& a, const Setup& s, const sv::SimOptions& so) {
  return Json{{"model", s.model.name},
              {"gpu", s.gpu->name},
              {"tp", a.tp},
              {"pp", a.pp},
              {"virtual_engines", a.pp > 1 && sv::runs_virtual_engines(a.scheduler) ? a.pp : int64_t{1}},
              {"dtype", a.dtype},
              {"expert_weights", a.expert_weights},
              {"scheduler", a.scheduler},
              {"exec_model", a.exec_model},
              {"calibration", a.calibration.empty() ? Json(nullptr) : Json(a.calibration)},
              {"workload", a.trace.empty() ? (a.workload.empty() ? "default" : a.workload) : ""},
              {"trace", a.trace},
              {"rate", a.rate ? Json(*a.rate) : Json(nullptr)},
              {"seed", a.seed},
              {"block_size", a.block_size},
              {"max_seqs", a.max_seqs},
              {"max_batched_tokens", a.max_batched_tokens},
              {"chunk_size", a.chunk_size},
              {"slo_ttft_s", so.slo.ttft.to_seconds()},
              {"slo_tpot_s", so.slo.tpot.to_seconds()}};
}

Json memory_json(const Setup& s) {
  return Json{{"hbm_bytes", s.plan.hbm.count()},
              {"usable_bytes", s.plan.usable.count()},
              {"weights_bytes", s.plan.weights.count()},
              {"workspace_bytes", s.plan.workspace.count()},
              {"margin_bytes", s.plan.margin.count()},
              {"kv_bytes_per_token", s.plan.kv_per_token.count()},
              {"kv_capacity_tokens", s.capacity_tokens}};
}

Json result_json(const sv::SimResult& r, int64_t skipped) {
  return Json{{"arrived", r.arrived},
              {"completed", r.completed},
              {"rejected_context", r.rejected_context},
              {"rejected_kv", r.rejected_kv},
              {"unfinished", r.unfinished},
              {"skipped_lines", skipped},
              {"duration_s", r.duration_s},
              {"total_input_tokens", r.input_tokens},
              {"total_output_tokens", r.output_tokens},
              {"request_throughput", r.request_throughput},
              {"output_throughput", r.output_throughput},
              {"total_token_throughput", r.total_token_throughput},
              {"processed_token_throughput", r.processed_token_throughput},
              {"goodput", r.goodput},
              {"good_requests", r.good_requests},
              {"ttft_ms", summary_json(r.ttft, 1e3)},
              {"tpot_ms", summary_json(r.tpot, 1e3)},
              {"itl_ms", summary_json(r.itl, 1e3)},
              {"e2el_ms", summary_json(r.e2el, 1e3)},
              {"preemptions", r.counters.preemptions},
              {"restarts", r.counters.restarts},
              {"swap_outs", r.counters.swap_outs},
              {"wasted_tokens", r.counters.wasted_tokens},
              {"prefix_hit_tokens", r.counters.prefix_hit_tokens},
              {"iterations", r.iterations},
              {"batch_size_mean", r.batch_size_mean},
              {"batch_size_max", r.batch_size_max},
              {"kv_utilization_mean", r.kv_utilization_mean},
              {"kv_utilization_max", r.kv_utilization_max},
              {"peak_requests_held", r.peak_held},
              {"busy_fraction", r.end > r.first_arrival ? r.busy / (r.end - r.first_arrival) : 0.0}};
}

Json samples_json(const sv::SimResult& r) {
  Json samples = Json::array();
  for (const sv::Sample& x : r.samples) samples.push_back({x.t.to_seconds(), x.kv_utilization, x.batch, x.waiting, x.held});
  return Json{{"columns", {"t_s", "kv_utilization", "batch", "waiting", "held"}},
              {"interval_s", r.sample_interval.to_seconds()},
              {"rows", samples}};
}

// The metric rows of vLLM's benchmark report (and ours) for a run.
void add_result_rows(Table& t, const sv::SimResult& r, const sv::SimOptions& so, int64_t skipped) {
  t.add_row({"successful requests", std::to_string(r.completed)});
  if (r.rejected_context + r.rejected_kv > 0) {
    t.add_row({"rejected (context / KV)", fmt::format("{} / {}", r.rejected_context, r.rejected_kv)});
  }
  if (r.unfinished > 0) t.add_row({"unfinished", std::to_string(r.unfinished)});
  if (skipped > 0) t.add_row({"skipped trace lines", std::to_string(skipped)});
  t.add_row({"duration (s)", fmt::format("{:.2f}", r.duration_s)});
  t.add_row({"total input tokens", std::to_string(r.input_tokens)});
  t.add_row({"total generated tokens", std::to_string(r.output_tokens)});
  t.add_row({"request throughput (req/s)", fmt::format("{:.2f}", r.request_throughput)});
  t.add_row({"output token throughput (tok/s)", fmt::format("{:.2f}", r.output_throughput)});
  t.add_row({"total token throughput (tok/s)", fmt::format("{:.2f}", r.total_token_throughput)});
  t.add_row({"processed token throughput (tok/s)", fmt::format("{:.2f}", r.processed_token_throughput)});
  t.add_row({fmt::format("goodput (req/s, TTFT <= {} s, TPOT <= {} ms)", so.slo.ttft.to_seconds(), so.slo.tpot.to_ms()),
             fmt::format("{:.2f}", r.goodput)});
  auto latency_row = [&t](const char* name, const auto& sum) {
    t.add_row({fmt::format("{} mean / p50 / p90 / p99 (ms)", name),
               fmt::format("{} / {} / {} / {}", ms_row(sum, -1), ms_row(sum, 0.5), ms_row(sum, 0.9), ms_row(sum, 0.99))});
  };
  latency_row("TTFT", r.ttft);
  latency_row("TPOT", r.tpot);
  latency_row("ITL", r.itl);
  latency_row("E2EL", r.e2el);
  t.add_row({"preemptions (restarts / swaps)",
             fmt::format("{} ({} / {})", r.counters.preemptions, r.counters.restarts, r.counters.swap_outs)});
  t.add_row({"wasted tokens (recomputed)", std::to_string(r.counters.wasted_tokens)});
  if (r.counters.prefix_hit_tokens > 0) t.add_row({"prefix cache hit tokens", std::to_string(r.counters.prefix_hit_tokens)});
  t.add_row({"iterations", std::to_string(r.iterations)});
  t.add_row({"batch size mean / max", fmt::format("{:.1f} / {}", r.batch_size_mean, r.batch_size_max)});
  t.add_row({"KV utilization mean / max", fmt::format("{:.1f}% / {:.1f}%", 100 * r.kv_utilization_mean, 100 * r.kv_utilization_max)});
}

// virtual_engines: the replicas run one virtual engine per PP stage (serve/cluster.h), each with 1/PP of the KV.
void note_rejections(Context& ctx, const sv::SimResult& r, const Setup& s, bool virtual_engines) {
  const int64_t rejected = r.rejected_context + r.rejected_kv;
  if (rejected > 0 && !ctx.global.quiet) {
    // A pipeline-parallel replica's virtual engines each hold 1/PP of the KV (serve/cluster.h).
    const std::string per =
        virtual_engines && s.replica.pp > 1 ? fmt::format(" ({} per virtual engine)", s.capacity_tokens / s.replica.pp) : "";
    std::cerr << fmt::format("orrery: note: {} requests rejected ({} longer than the context of {} tokens, {} larger than "
                             "the KV capacity of {} tokens{}); --requests-csv lists them\n",
                             rejected, r.rejected_context, s.replica.context_limit(), r.rejected_kv, s.capacity_tokens, per);
  }
}

void run_cluster(Context& ctx, const ServeArgs& a);

void run_serve(Context& ctx, const ServeArgs& a) {
  if (a.replicas != 1 || !a.disagg.empty()) {
    run_cluster(ctx, a);
    return;
  }
  Setup s = make_setup(ctx, a);
  sv::SchedulerConfig sc = scheduler_config(a);
  const std::optional<sv::LinearFit> fit = fit_wait(a, s, sc, 1.0);
  std::unique_ptr<sv::Scheduler> sched = sv::make_scheduler(a.scheduler, sc, kCl.with_key("--scheduler"));
  const sv::SimOptions so = sim_options(a);

  io::TraceReader* reader = nullptr;
  std::unique_ptr<sv::RequestSource> src = open_source(a, &reader);
  std::optional<int64_t> total;
  if (a.trace.empty()) total = a.requests.value_or(10000);
  Recorder rec(a, total, ctx.global.quiet || ctx.global.json);
  RejectGuard guard(rec, s);
  sv::SimObserver* obs = a.fail_on_reject ? static_cast<sv::SimObserver*>(&guard) : &rec;
  const sv::SimResult r = sv::simulate(*src, s.replica, s.plan, *sched, *s.exec, so, obs);
  rec.write(a);
  const int64_t skipped = reader != nullptr ? reader->skipped_lines() : 0;

  if (ctx.global.json) {
    Json j = envelope("serve");
    j["config"] = config_json(a, s, so);
    j["memory"] = memory_json(s);
    if (fit) j["linear_fit"] = {{"d0_s", fit->d0_s}, {"d1_s_per_token", fit->d1_s}};
    j["result"] = result_json(r, skipped);
    j["samples"] = samples_json(r);
    ctx.out << io::dump_json(j);
  } else {
    Table t({"metric", "value"},
            fmt::format("{} on {} (TP {} PP {}{}), scheduler {}, {} model; KV capacity {} tokens", s.model.name,
                        s.gpu->name, a.tp, a.pp,
                        a.pp > 1 && sv::runs_virtual_engines(a.scheduler) ? fmt::format(", {} virtual engines", a.pp) : "",
                        a.scheduler, a.exec_model, s.capacity_tokens));
    add_result_rows(t, r, so, skipped);
    ctx.out << t.render();
  }
  note_rejections(ctx, r, s, sv::runs_virtual_engines(a.scheduler));
}

// ---- cluster: --replicas N, --router, --disagg P:D ----

// Replicas of a cluster (--replicas, each side of --disagg).
constexpr int64_t kMaxReplicas = int64_t{1} << 20;

// P and D of --disagg "P:D".
std::pair<int64_t, int64_t> parse_disagg(const std::string& text) {
  const Where w = kCl.with_key("--disagg");
  const std::string bad =
      fmt::format("expected P:D with 1 to {} replicas each (e.g. 1:1 or 2:3), got '{}'", kMaxReplicas, text);
  const size_t colon = text.find(':');
  auto number = [&](std::string_view part) {
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || ptr != part.data() + part.size() || v < 1 || v > kMaxReplicas) throw InputError(w, bad);
    return v;
  };
  if (colon == std::string::npos) throw InputError(w, bad);
  return {number(std::string_view(text).substr(0, colon)), number(std::string_view(text).substr(colon + 1))};
}

sv::Placement parse_placement(const std::string& text) {
  if (text == "packed") return sv::Placement::kPacked;
  if (text == "interleaved") return sv::Placement::kInterleaved;
  throw InputError(kCl.with_key("--placement"), "expected packed or interleaved, got '" + text + "'",
                   suggest(text, {"packed", "interleaved"}));
}

std::string router_name(const std::string& name, const char* flag) {
  const std::vector<std::string> names = sv::router_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw InputError(kCl.with_key(flag), "unknown router '" + name + "'", suggest(name, names));
  }
  return name;
}

sv::PoolSpec make_pool(Context& ctx, const ServeArgs& a, const Setup& s, sv::ReplicaRole role, int64_t replicas,
                       const sv::SchedulerConfig& sc) {
  sv::PoolSpec p;
  p.role = role;
  p.replicas = replicas;
  p.replica = s.replica;
  p.plan = s.plan;
  p.exec = s.exec.get();
  p.scheduler = a.scheduler;
  p.scheduler_config = sc;
  // --node names the machine of --gpu; a decode pool of another GPU takes the first node holding it.
  const bool other_gpu = role == sv::ReplicaRole::kDecode && s.gpu->name != a.gpu;
  p.link = sv::NodeLink::from_catalog(*s.gpu, training_node(ctx.catalog().hw, *s.gpu, other_gpu ? "" : a.node));
  return p;
}

Json replicas_json(const sv::ClusterResult& cr) {
  Json out = Json::array();
  for (const sv::ReplicaSummary& x : cr.replicas) {
    out.push_back({{"index", x.index},
                   {"role", sv::to_string(x.role)},
                   {"requests", x.stats.admitted},
                   {"finished", x.stats.finished},
                   {"request_throughput", x.request_throughput},
                   {"iterations", x.stats.iterations},
                   {"batch_size_mean", x.stats.iterations > 0 ? x.stats.batch_sum / static_cast<double>(x.stats.iterations) : 0.0},
                   {"kv_utilization_mean", x.kv_utilization_mean},
                   {"kv_utilization_max", x.stats.kv_utilization_max},
                   {"busy_fraction", x.busy_fraction},
                   {"preemptions", x.counters.preemptions},
                   {"prefix_hit_tokens", x.counters.prefix_hit_tokens},
                   {"prefill_tokens", x.counters.prefill_tokens},
                   {"decode_tokens", x.counters.decode_tokens}});
  }
  return out;
}

void run_cluster(Context& ctx, const ServeArgs& a) {
  if (a.replicas < 1 || a.replicas > kMaxReplicas) {
    throw InputError(kCl.with_key("--replicas"), fmt::format("must be 1 to {}, got {}", kMaxReplicas, a.replicas));
  }
  const bool disagg = !a.disagg.empty();
  if (disagg && a.replicas != 1) {
    throw InputError(kCl.with_key("--replicas"), "give either --replicas N (colocated) or --disagg P:D, not both");
  }
  const auto [prefill_n, decode_n] = disagg ? parse_disagg(a.disagg) : std::pair<int64_t, int64_t>{a.replicas, 0};
  sv::ClusterSpec spec;
  spec.router = router_name(a.router, "--router");
  spec.decode_router = router_name(a.decode_router, "--decode-router");
  spec.placement = parse_placement(a.placement);
  if (disagg && !sv::scheduler_takes_prefilled(a.scheduler)) {
    throw InputError(kCl.with_key("--scheduler"), "--disagg needs a continuous-batching scheduler, not '" + a.scheduler + "'",
                     "use vllm, sarathi, orca or sjf");
  }
  if (a.decode_tp < 0) throw InputError(kCl.with_key("--decode-tp"), "must be >= 1");
  if (!disagg && (!a.decode_gpu.empty() || a.decode_tp > 0)) {
    throw InputError(kCl.with_key(a.decode_gpu.empty() ? "--decode-tp" : "--decode-gpu"), "only with --disagg P:D");
  }

  Setup s = make_setup(ctx, a);
  std::unique_ptr<Setup> ds;
  if (disagg) {
    ServeArgs d = a;
    if (!a.decode_gpu.empty()) d.gpu = a.decode_gpu;
    if (d.gpu != a.gpu) d.calibration.clear();  // a calibration file is for one GPU: the --gpu replicas
    if (a.decode_tp > 0) d.tp = a.decode_tp;
    try {
      // Initialised in place from the returned value: a Setup points into itself (model, replica spec).
      ds.reset(new Setup(make_setup(ctx, d)));  // NOLINT(cppcoreguidelines-owning-memory)
    } catch (const InputError& e) {
      // Name the decode flags, not --gpu / --tp.
      const std::string& k = e.where().key;
      if (k != "--gpu" && k != "tp" && k != "--model") throw;
      const char* flag = k == "--gpu" || (k == "--model" && !a.decode_gpu.empty()) ? "--decode-gpu" : "--decode-tp";
      throw InputError(kCl.with_key(flag), e.message(), e.hint());
    }
  }
  sv::SchedulerConfig sc = scheduler_config(a);
  const std::optional<sv::LinearFit> fit = fit_wait(a, s, sc, 1.0 / static_cast<double>(prefill_n));
  (void)sv::make_scheduler(a.scheduler, sc, kCl.with_key("--scheduler"));  // validates the configuration
  spec.pools.push_back(make_pool(ctx, a, s, disagg ? sv::ReplicaRole::kPrefill : sv::ReplicaRole::kFull, prefill_n, sc));
  if (disagg) spec.pools.push_back(make_pool(ctx, a, *ds, sv::ReplicaRole::kDecode, decode_n, sc));
  spec.validate(kCl);
  const sv::SimOptions so = sim_options(a);

  io::TraceReader* reader = nullptr;
  std::unique_ptr<sv::RequestSource> src = open_source(a, &reader);
  std::optional<int64_t> total;
  if (a.trace.empty()) total = a.requests.value_or(10000);
  Recorder rec(a, total, ctx.global.quiet || ctx.global.json, true);
  RejectGuard guard(rec, s);
  sv::SimObserver* obs = a.fail_on_reject ? static_cast<sv::SimObserver*>(&guard) : &rec;
  const sv::ClusterResult cr = sv::simulate_cluster(*src, spec, so, obs);
  rec.name_replicas(cr.replicas);
  rec.write(a);
  const sv::SimResult& r = cr.total;
  const int64_t skipped = reader != nullptr ? reader->skipped_lines() : 0;
  const sv::TransferStats& tr = cr.transfers;
  const std::string decode_gpu = ds ? ds->gpu->name : "";
  const int64_t decode_tp = ds ? ds->replica.tp : 0;

  if (ctx.global.json) {
    Json j = envelope("serve");
    j["config"] = config_json(a, s, so);
    Json cluster = {{"replicas", spec.replicas()},
                    {"router", spec.router},
                    {"disaggregated", disagg}};
    if (disagg) {
      cluster["prefill_replicas"] = prefill_n;
      cluster["decode_replicas"] = decode_n;
      cluster["decode_gpu"] = decode_gpu;
      cluster["decode_tp"] = decode_tp;
      cluster["decode_router"] = spec.decode_router;
      cluster["placement"] = std::string(sv::to_string(spec.placement));
    }
    j["config"]["cluster"] = cluster;
    j["memory"] = memory_json(s);
    if (ds) j["decode_memory"] = memory_json(*ds);
    if (fit) j["linear_fit"] = {{"d0_s", fit->d0_s}, {"d1_s_per_token", fit->d1_s}};
    j["result"] = result_json(r, skipped);
    // The busy time of all replicas over replicas x span: the mean fraction of time a replica computes.
    j["result"]["busy_fraction"] = r.end > r.first_arrival ? r.busy / (r.end - r.first_arrival) /
                                                                 static_cast<double>(spec.replicas())
                                                           : 0.0;
    j["replicas"] = replicas_json(cr);
    if (disagg) {
      j["kv_transfer"] = {{"transfers", tr.count},
                          {"intra_node", tr.intra_node},
                          {"bytes", tr.bytes.count()},
                          {"time_ms", summary_json(tr.time, 1e3)},
                          {"wait_ms", summary_json(tr.wait, 1e3)}};
    }
    j["samples"] = samples_json(r);
    ctx.out << io::dump_json(j);
  } else {
    const std::string shape =
        disagg ? fmt::format("{} prefill ({} TP {}) : {} decode ({} TP {}) replicas, routers {} / {}", prefill_n, s.gpu->name,
                             a.tp, decode_n, decode_gpu, decode_tp, spec.router, spec.decode_router)
               : fmt::format("{} replicas of {} (TP {} PP {}), router {}", prefill_n, s.gpu->name, a.tp, a.pp, spec.router);
    Table t({"metric", "value"}, fmt::format("{}: {}, scheduler {}, {} model; KV capacity {} tokens per replica",
                                             s.model.name, shape, a.scheduler, a.exec_model, s.capacity_tokens));
    add_result_rows(t, r, so, skipped);
    if (disagg) {
      t.add_row({"KV transfers (over NVLink)", fmt::format("{} ({})", tr.count, tr.intra_node)});
      t.add_row({"KV bytes moved (GB)", fmt::format("{:.3f}", tr.bytes.to_gb())});
      t.add_row({"KV transfer mean / p50 / p99 (ms)",
                 fmt::format("{} / {} / {}", ms_row(tr.time, -1), ms_row(tr.time, 0.5), ms_row(tr.time, 0.99))});
      t.add_row({"wait for decode KV mean / p99 / max (ms)",
                 fmt::format("{} / {} / {}", ms_row(tr.wait, -1), ms_row(tr.wait, 0.99),
                             tr.wait.count() > 0 ? fmt::format("{:.2f}", tr.wait.max() * 1e3) : "-")});
    }
    Table per({"replica", "role", "requests", "req/s", "iterations", "batch mean", "KV util mean / max", "busy",
               "preemptions"});
    for (const sv::ReplicaSummary& x : cr.replicas) {
      per.add_row({std::to_string(x.index), std::string(sv::to_string(x.role)), std::to_string(x.stats.admitted),
                   fmt::format("{:.2f}", x.request_throughput), std::to_string(x.stats.iterations),
                   fmt::format("{:.1f}", x.stats.iterations > 0 ? x.stats.batch_sum / static_cast<double>(x.stats.iterations) : 0.0),
                   fmt::format("{:.1f}% / {:.1f}%", 100 * x.kv_utilization_mean, 100 * x.stats.kv_utilization_max),
                   fmt::format("{:.1f}%", 100 * x.busy_fraction), std::to_string(x.counters.preemptions)});
    }
    ctx.out << t.render() << "\n" << per.render();
  }
  // Disaggregated pools and the WAIT family keep one batch in flight (no virtual engines).
  note_rejections(ctx, r, s, a.disagg.empty() && sv::runs_virtual_engines(a.scheduler));
}

void run_fluid(Context& ctx, const ServeArgs& a) {
  Setup s = make_setup(ctx, a);
  std::unique_ptr<sv::RequestSource> src = open_source(a, nullptr);
  const StreamStats st = sv::workload_stats(*src, a.requests.value_or(100000));
  if (st.requests < 2) throw InputError(kCl.with_key("--workload"), "the fluid model needs at least two requests");
  const sv::LinearFit fit = linear_params(a, s, st, 4096);
  std::vector<sv::TypeStats> types;
  for (const sv::TypeStats& t : st.types) {
    if (t.rate > 0.0) types.push_back(t);
  }
  const sv::FluidResult f = sv::fluid_equilibrium(types, fit.d0_s, fit.d1_s, static_cast<double>(s.capacity_tokens),
                                                  kCl.with_key("--workload"));
  if (ctx.global.json) {
    Json j = envelope("serve fluid");
    j["config"] = {{"model", s.model.name}, {"gpu", s.gpu->name}, {"tp", a.tp}, {"pp", a.pp}, {"exec_model", a.exec_model}};
    Json jt = Json::array();
    for (size_t i = 0; i < types.size(); ++i) {
      jt.push_back({{"rate", types[i].rate},
                    {"prompt", types[i].prompt},
                    {"output", types[i].output},
                    {"n_star", std::isfinite(f.n_star[i]) ? Json(f.n_star[i]) : Json(nullptr)}});
    }
    j["types"] = jt;
    j["result"] = {{"d0_s", fit.d0_s},
                   {"d1_s_per_token", fit.d1_s},
                   {"capacity_tokens", s.capacity_tokens},
                   {"load", f.load},
                   {"stable", f.stable},
                   {"dt_star_s", std::isfinite(f.dt_star_s) ? Json(f.dt_star_s) : Json(nullptr)},
                   {"memory_star_tokens", std::isfinite(f.memory_star) ? Json(f.memory_star) : Json(nullptr)},
                   {"throughput_bound", f.throughput_bound},
                   {"rate", f.rate},
                   {"max_stable_rate", f.max_stable_rate}};
    ctx.out << io::dump_json(j);
    return;
  }
  Table t({"quantity", "value"}, fmt::format("fluid equilibrium: {} on {} (TP {}), {} model", s.model.name, s.gpu->name,
                                             a.tp, a.exec_model));
  t.add_row({"d0 (ms) / d1 (ms per KV token)", fmt::format("{:.4g} / {:.4g}", fit.d0_s * 1e3, fit.d1_s * 1e3)});
  t.add_row({"arrival rate (req/s)", fmt::format("{:.4g}", f.rate)});
  for (size_t i = 0; i < types.size(); ++i) {
    t.add_row({fmt::format("type {}: rate, prompt, output, n*", i),
               fmt::format("{:.4g}, {:.1f}, {:.1f}, {:.3g}", types[i].rate, types[i].prompt, types[i].output, f.n_star[i])});
  }
  t.add_row({"load d1 W", fmt::format("{:.4g}", f.load)});
  t.add_row({"iteration time dT* (ms)", fmt::format("{:.4g}", f.dt_star_s * 1e3)});
  t.add_row({"KV memory M* (tokens)", fmt::format("{:.6g}", f.memory_star)});
  t.add_row({"KV capacity C (tokens)", std::to_string(s.capacity_tokens)});
  t.add_row({"stable", f.stable ? "yes" : "no"});
  t.add_row({"throughput bound (output tok/s)", fmt::format("{:.6g}", f.throughput_bound)});
  t.add_row({"largest stable rate (req/s)", fmt::format("{:.4g}", f.max_stable_rate)});
  ctx.out << t.render();
}

void run_list(Context& ctx) {
  if (ctx.global.json) {
    Json j = envelope("serve list");
    Json s = Json::array(), e = Json::array();
    for (const auto& i : sv::scheduler_registry()) s.push_back({{"name", i.name}, {"description", i.description}, {"citation", i.citation}});
    for (const auto& i : sv::exec_model_registry()) e.push_back({{"name", i.name}, {"description", i.description}, {"citation", i.citation}});
    j["schedulers"] = s;
    j["exec_models"] = e;
    Json r = Json::array();
    for (const auto& i : sv::router_registry()) r.push_back({{"name", i.name}, {"description", i.description}, {"citation", i.citation}});
    j["routers"] = r;
    ctx.out << io::dump_json(j);
    return;
  }
  Table s({"scheduler", "description", "citation"});
  for (const auto& i : sv::scheduler_registry()) s.add_row({i.name, i.description, i.citation});
  Table e({"exec model", "description", "citation"});
  for (const auto& i : sv::exec_model_registry()) e.add_row({i.name, i.description, i.citation});
  Table r({"router", "description", "citation"});
  for (const auto& i : sv::router_registry()) r.add_row({i.name, i.description, i.citation});
  ctx.out << s.render() << "\n" << e.render() << "\n" << r.render();
}

}  // namespace

void register_serve_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* serve = app.add_subcommand("serve", "simulate LLM serving: TTFT, TPOT, throughput per scheduler (docs/serving.md)");
  auto a = std::make_shared<ServeArgs>();
  add_serve_options(serve, *a);

  CLI::App* fluid = serve->add_subcommand("fluid", "the fluid equilibrium (M*, n*, dT*, largest stable rate) of a workload");
  auto f = std::make_shared<ServeArgs>();
  add_common_options(fluid, *f);
  CLI::App* list = serve->add_subcommand("list", "the schedulers, execution-time models and routers with citations");

  actions.emplace_back(fluid, [f](Context& ctx) { run_fluid(ctx, *f); });
  actions.emplace_back(list, [](Context& ctx) { run_list(ctx); });
  actions.emplace_back(serve, [a](Context& ctx) { run_serve(ctx, *a); });
}

}  // namespace orrery::cli
