// `orrery serve`: simulate an LLM serving replica on a request trace or a synthetic workload (TTFT, TPOT,
// ITL, throughput, goodput, preemptions, KV utilization); `orrery serve fluid`: the WAIT paper's fluid
// equilibrium; `orrery serve list`: the schedulers and execution-time models. docs/serving.md.
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/output.h"
#include "core/progress.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "io/trace_reader.h"
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
  std::string scheduler = "vllm";
  std::string trace;
  std::string trace_format;
  std::string workload;
  std::optional<double> rate;
  std::optional<int64_t> requests;
  std::string exec_model = "roofline";
  std::string profile;
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
};

// Everything a run needs, resolved from the arguments.
struct Setup {
  model::ModelSpec model;
  const hw::GpuSpec* gpu = nullptr;
  sv::ReplicaSpec replica;
  sv::MemoryPlan plan;
  std::unique_ptr<sv::ExecModel> exec;
  std::ifstream profile;
  sv::ExecContext exec_ctx;
  int64_t capacity_tokens = 0;
};

// Per-type statistics of the first requests of a stream (rates, mean lengths), for WAIT and the fluid model.
struct StreamStats {
  std::vector<sv::TypeStats> types;
  int64_t requests = 0;
  double rate = 0.0;
  double span_s = 0.0;
  int64_t max_output = 0;
  double mean_prompt = 0.0;
  double mean_output = 0.0;
};

StreamStats stream_stats(sv::RequestSource& src, int64_t limit) {
  StreamStats st;
  std::map<int32_t, std::array<double, 4>> acc;  // count, prompt sum, output sum, max output
  std::optional<Time> first;
  Time last;
  while (st.requests < limit) {
    std::optional<sv::Request> r = src.next();
    if (!r) break;
    if (!first) first = r->arrival;
    last = r->arrival;
    auto& a = acc[r->type];
    a[0] += 1;
    a[1] += static_cast<double>(r->prompt_tokens);
    a[2] += static_cast<double>(r->output_tokens);
    a[3] = std::max(a[3], static_cast<double>(r->output_tokens));
    st.mean_prompt += static_cast<double>(r->prompt_tokens);
    st.mean_output += static_cast<double>(r->output_tokens);
    st.max_output = std::max(st.max_output, r->output_tokens);
    ++st.requests;
  }
  if (st.requests == 0) return st;
  st.span_s = (last - *first).to_seconds();
  st.rate = st.requests > 1 && st.span_s > 0.0 ? static_cast<double>(st.requests - 1) / st.span_s : 0.0;
  st.mean_prompt /= static_cast<double>(st.requests);
  st.mean_output /= static_cast<double>(st.requests);
  const int32_t types = acc.rbegin()->first + 1;
  st.types.assign(static_cast<size_t>(std::max(types, 1)), sv::TypeStats{});
  for (const auto& [t, a] : acc) {
    if (t < 0) continue;
    sv::TypeStats& ts = st.types[static_cast<size_t>(t)];
    ts.rate = st.rate * a[0] / static_cast<double>(st.requests);
    ts.prompt = a[1] / a[0];
    ts.output = a[2] / a[0];
    ts.max_output = static_cast<int64_t>(a[3]);
  }
  return st;
}

void add_common_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("--model", a.model, "catalog model or path to a config.json")->capture_default_str();
  cmd->add_option("--gpu", a.gpu, "catalog GPU")->capture_default_str();
  cmd->add_option("--tp", a.tp, "tensor-parallel degree")->capture_default_str();
  cmd->add_option("--pp", a.pp, "pipeline-parallel degree")->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "weights and KV precision")->capture_default_str();
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
  cmd->add_option("--wait-margin", a.wait_margin, "wait: threshold safety margin")->capture_default_str();
  cmd->add_option("--nested-cap", a.nested_cap, "nested-wait: batch cap tl (default: from the fluid model)");
  cmd->add_option("--nested-segments", a.nested_segments, "nested-wait: segments L")->capture_default_str();
  cmd->add_option("--time-limit", a.time_limit, "stop the simulation at this simulated time (e.g. '1 h')");
}

// True when `path` opens and starts with the serving-run header (../shared/data/serving-runs).
bool serving_run_file(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  return in && std::getline(in, first) && sv::is_serving_run_header(first);
}

// A fresh request stream (called twice when statistics are needed first).
std::unique_ptr<sv::RequestSource> open_source(const ServeArgs& a, io::TraceReader** reader) {
  if (a.rate && !(*a.rate > 0.0)) {
    throw InputError(kCl.with_key("--rate"), fmt::format("must be > 0 requests/s, got {}", *a.rate));
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
      const StreamStats st = stream_stats(*pass, a.requests.value_or(INT64_MAX));
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
      const StreamStats st = stream_stats(*counted, INT64_MAX);
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
  if (!(a.d0_ms >= 0.0) || !(a.d1_ms >= 0.0)) throw InputError(kCl.with_key("--d0-ms"), "d0 and d1 must be >= 0");
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
  Recorder(const ServeArgs& a, std::optional<int64_t> total, bool quiet)
      : csv_(!a.requests_csv.empty()), trace_(!a.trace_out.empty()), limit_(a.trace_limit) {
    if (csv_) {
      rows_ = "id,arrival_s,prompt_tokens,output_tokens,status,first_scheduled_s,first_token_s,finish_s,ttft_s,tpot_s,"
              "e2el_s,preemptions,restarts,wasted_tokens\n";
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
    rows_ += fmt::format("{},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{}\n", q.id, q.arrival.to_seconds(), q.prompt_tokens,
                         q.output_tokens, sv::to_string(r.status), t(r.first_scheduled), t(r.first_token), t(r.finish),
                         ttft, tpot, e2el, r.preemptions, r.restarts, r.wasted_tokens);
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
                           {"pid", 0},
                           {"tid", 0},
                           {"args",
                            {{"seqs", it.seqs},
                             {"tokens", it.tokens},
                             {"prefill_seqs", it.prefill_seqs},
                             {"decode_seqs", it.decode_seqs},
                             {"kv_tokens", it.kv_tokens},
                             {"used_blocks", it.used_blocks},
                             {"waiting", it.waiting},
                             {"swap_us", it.transfer.to_us()}}}});
    events_.push_back(Json{{"name", "kv_blocks"},
                           {"ph", "C"},
                           {"ts", it.start.to_us()},
                           {"pid", 0},
                           {"args", {{"used", it.used_blocks}, {"waiting", it.waiting}}}});
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

void run_serve(Context& ctx, const ServeArgs& a) {
  Setup s = make_setup(ctx, a);
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
  std::optional<sv::LinearFit> fit;
  if (a.scheduler == "wait" || a.scheduler == "nested-wait") {
    std::unique_ptr<sv::RequestSource> pre = open_source(a, nullptr);
    const StreamStats st = stream_stats(*pre, 100000);
    fit = linear_params(a, s, st, a.max_batched_tokens);
    sc.types = st.types;
    sc.d0_s = fit->d0_s;
    sc.d1_s = fit->d1_s;
    sc.max_output = st.max_output;
    if (a.scheduler == "nested-wait" && sc.nested_cap == 0 && st.requests > 0) {
      // tl = the fluid WAIT threshold of the aggregated workload, spread over its mean decode length.
      const sv::TypeStats all{st.rate, st.mean_prompt, st.mean_output, st.max_output};
      const int64_t n = sv::wait_thresholds({all}, fit->d0_s, fit->d1_s, a.wait_margin, s.capacity_tokens)[0];
      sc.nested_cap = std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(n) * st.mean_output)));
    }
  }
  std::unique_ptr<sv::Scheduler> sched = sv::make_scheduler(a.scheduler, sc, kCl.with_key("--scheduler"));

  sv::SimOptions so;
  so.slo.ttft = parse_time(a.slo_ttft, kCl.with_key("--slo-ttft"));
  so.slo.tpot = parse_time(a.slo_tpot, kCl.with_key("--slo-tpot"));
  if (!a.time_limit.empty()) so.time_limit = parse_time_positive(a.time_limit, kCl.with_key("--time-limit"));

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
  const int64_t rejected = r.rejected_context + r.rejected_kv;

  if (ctx.global.json) {
    Json j = envelope("serve");
    j["config"] = {{"model", s.model.name},
                   {"gpu", s.gpu->name},
                   {"tp", a.tp},
                   {"pp", a.pp},
                   {"dtype", a.dtype},
                   {"scheduler", a.scheduler},
                   {"exec_model", a.exec_model},
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
    j["memory"] = {{"hbm_bytes", s.plan.hbm.count()},
                   {"usable_bytes", s.plan.usable.count()},
                   {"weights_bytes", s.plan.weights.count()},
                   {"workspace_bytes", s.plan.workspace.count()},
                   {"margin_bytes", s.plan.margin.count()},
                   {"kv_bytes_per_token", s.plan.kv_per_token.count()},
                   {"kv_capacity_tokens", s.capacity_tokens}};
    if (fit) j["linear_fit"] = {{"d0_s", fit->d0_s}, {"d1_s_per_token", fit->d1_s}};
    Json samples = Json::array();
    for (const sv::Sample& x : r.samples) {
      samples.push_back({x.t.to_seconds(), x.kv_utilization, x.batch, x.waiting, x.held});
    }
    j["result"] = {{"arrived", r.arrived},
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
    j["samples"] = {{"columns", {"t_s", "kv_utilization", "batch", "waiting", "held"}},
                    {"interval_s", r.sample_interval.to_seconds()},
                    {"rows", samples}};
    ctx.out << io::dump_json(j);
  } else {
    Table t({"metric", "value"},
            fmt::format("{} on {} (TP {} PP {}), scheduler {}, {} model; KV capacity {} tokens", s.model.name,
                        s.gpu->name, a.tp, a.pp, a.scheduler, a.exec_model, s.capacity_tokens));
    t.add_row({"successful requests", std::to_string(r.completed)});
    if (rejected > 0) {
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
    ctx.out << t.render();
  }
  if (rejected > 0 && !ctx.global.quiet) {
    std::cerr << fmt::format("orrery: note: {} requests rejected ({} longer than the context of {} tokens, {} larger than "
                             "the KV capacity of {} tokens); --requests-csv lists them\n",
                             rejected, r.rejected_context, s.replica.context_limit(), r.rejected_kv, s.capacity_tokens);
  }
}

void run_fluid(Context& ctx, const ServeArgs& a) {
  Setup s = make_setup(ctx, a);
  std::unique_ptr<sv::RequestSource> src = open_source(a, nullptr);
  const StreamStats st = stream_stats(*src, a.requests.value_or(100000));
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
    ctx.out << io::dump_json(j);
    return;
  }
  Table s({"scheduler", "description", "citation"});
  for (const auto& i : sv::scheduler_registry()) s.add_row({i.name, i.description, i.citation});
  Table e({"exec model", "description", "citation"});
  for (const auto& i : sv::exec_model_registry()) e.add_row({i.name, i.description, i.citation});
  ctx.out << s.render() << "\n" << e.render();
}

}  // namespace

void register_serve_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* serve = app.add_subcommand("serve", "simulate LLM serving: TTFT, TPOT, throughput per scheduler (docs/serving.md)");
  auto a = std::make_shared<ServeArgs>();
  add_serve_options(serve, *a);

  CLI::App* fluid = serve->add_subcommand("fluid", "the fluid equilibrium (M*, n*, dT*, largest stable rate) of a workload");
  auto f = std::make_shared<ServeArgs>();
  add_common_options(fluid, *f);
  CLI::App* list = serve->add_subcommand("list", "the schedulers and execution-time models with citations");

  actions.emplace_back(fluid, [f](Context& ctx) { run_fluid(ctx, *f); });
  actions.emplace_back(list, [](Context& ctx) { run_list(ctx); });
  actions.emplace_back(serve, [a](Context& ctx) { run_serve(ctx, *a); });
}

}  // namespace orrery::cli
