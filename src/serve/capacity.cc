#include "serve/capacity.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "core/assert.h"
#include "core/parallel.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "serve/fluid.h"

namespace orrery::serve {

// ---- SLOs ----

namespace {

constexpr std::string_view kMetricNames[] = {"ttft", "tpot", "e2e"};
constexpr double kQuantiles[] = {0.5, 0.9, 0.99};
constexpr std::string_view kQuantileNames[] = {"p50", "p90", "p99"};

}  // namespace

std::string SloBound::name() const {
  std::string q = "p?";
  for (size_t i = 0; i < std::size(kQuantiles); ++i) {
    if (quantile == kQuantiles[i]) q = std::string(kQuantileNames[i]);
  }
  return std::string(kMetricNames[static_cast<size_t>(metric)]) + "-" + q;
}

std::vector<std::string> slo_names() {
  std::vector<std::string> names;
  for (std::string_view m : kMetricNames) {
    for (std::string_view q : kQuantileNames) names.push_back(std::string(m) + "-" + std::string(q));
  }
  return names;
}

SloBound parse_slo(std::string_view name, std::string_view value, const Where& where) {
  const std::string key = to_lower(trim(name));
  const std::vector<std::string> names = slo_names();
  const auto it = std::find(names.begin(), names.end(), key);
  if (it == names.end()) {
    throw InputError(where, "unknown SLO '" + std::string(name) + "': expected METRIC-QUANTILE with METRIC ttft, tpot or e2e and QUANTILE p50, p90 or p99",
                     suggest(key, names));
  }
  const size_t i = static_cast<size_t>(it - names.begin());
  SloBound b;
  b.metric = static_cast<SloMetric>(i / std::size(kQuantiles));
  b.quantile = kQuantiles[i % std::size(kQuantiles)];
  b.limit = parse_time_positive(value, where.with_key(key));
  return b;
}

std::vector<SloBound> parse_slo_list(std::string_view text, const Where& where) {
  std::vector<SloBound> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw InputError(where, "expected NAME=TIME in '" + std::string(item) + "'", "e.g. ttft-p90=2s,tpot-p99=200ms");
    }
    out.push_back(parse_slo(item.substr(0, eq), item.substr(eq + 1), where));
  }
  return out;
}

// ---- one run ----

double RunMetrics::value(SloMetric m, double q) const {
  const Summary& s = m == SloMetric::kTtft ? ttft : m == SloMetric::kTpot ? tpot : e2e;
  return s.count() > 0 ? s.quantile(q) : 0.0;
}

namespace {

// Keeps (arrival, ttft, tpot, e2e) of every completed request and the last arrival seen.
class RunRecorder final : public SimObserver {
 public:
  explicit RunRecorder(SimObserver* next) : next_(next) {}
  void on_iteration(const IterationRecord& it) override {
    if (next_ != nullptr) next_->on_iteration(it);
  }
  struct Row {
    double arrival, ttft, tpot, e2e;
    bool has_tpot;
  };
  void on_request(const RequestRecord& r) override {
    if (next_ != nullptr) next_->on_request(r);
    const double arrival = r.request->arrival.to_seconds();
    last_arrival = std::max(last_arrival, arrival);
    if (r.status != RequestStatus::kDone) return;
    const Request& q = *r.request;
    Row row{arrival, (r.first_token - q.arrival).to_seconds(), 0.0, (r.finish - q.arrival).to_seconds(), q.output_tokens > 1};
    if (row.has_tpot) row.tpot = (r.finish - r.first_token).to_seconds() / static_cast<double>(q.output_tokens - 1);
    rows.push_back(row);
  }
  std::vector<Row> rows;
  double last_arrival = 0.0;

 private:
  SimObserver* next_;
};

}  // namespace

namespace {

RunMetrics metrics_of(const SimResult& r, const RunRecorder& rec);

}  // namespace

RunMetrics measure_run(RequestSource& source, const ReplicaSpec& spec, const MemoryPlan& plan, Scheduler& scheduler,
                       const ExecModel& exec, const SimOptions& options, SimObserver* observer) {
  RunRecorder rec(observer);
  const SimResult r = simulate(source, spec, plan, scheduler, exec, options, &rec);
  return metrics_of(r, rec);
}

RunMetrics measure_cluster_run(RequestSource& source, const ClusterSpec& spec, const SimOptions& options,
                               SimObserver* observer) {
  RunRecorder rec(observer);
  const ClusterResult r = simulate_cluster(source, spec, options, &rec);
  return metrics_of(r.total, rec);
}

namespace {

RunMetrics metrics_of(const SimResult& r, const RunRecorder& rec) {
  RunMetrics m;
  m.arrived = r.arrived;
  m.completed = r.completed;
  m.rejected_context = r.rejected_context;
  m.rejected_kv = r.rejected_kv;
  m.unfinished = r.unfinished;
  m.evictions = r.counters.restarts;
  m.request_throughput = r.request_throughput;
  m.kv_utilization_mean = r.kv_utilization_mean;
  m.batch_size_mean = r.batch_size_mean;
  m.iteration_s_mean = r.iterations > 0 ? r.busy.to_seconds() / static_cast<double>(r.iterations) : 0.0;
  const double t0 = r.first_arrival.to_seconds();
  const double cutoff = t0 + kWarmupFraction * (rec.last_arrival - t0);
  // Least-squares slope of TTFT on arrival time over the measured requests (two passes for accuracy).
  double sx = 0.0, sy = 0.0;
  for (const RunRecorder::Row& row : rec.rows) {
    if (row.arrival < cutoff) continue;
    ++m.measured;
    sx += row.arrival;
    sy += row.ttft;
    m.ttft.add(row.ttft);
    m.e2e.add(row.e2e);
    if (row.has_tpot) m.tpot.add(row.tpot);
  }
  if (m.measured >= 2) {
    const double mx = sx / static_cast<double>(m.measured), my = sy / static_cast<double>(m.measured);
    double sxy = 0.0, sxx = 0.0;
    for (const RunRecorder::Row& row : rec.rows) {
      if (row.arrival < cutoff) continue;
      sxy += (row.arrival - mx) * (row.ttft - my);
      sxx += (row.arrival - mx) * (row.arrival - mx);
    }
    m.latency_slope = sxx > 0.0 ? sxy / sxx : 0.0;
  }
  // A run whose measured requests wait, on average, longer than the warm-up window itself cannot show a
  // queue that drains, whatever its slope: a backlog that stays flat (a critically loaded queue, or a
  // scheduler that stalls until the stream ends) would otherwise pass.
  const double window = rec.last_arrival - t0;
  m.stable = m.unfinished == 0 && m.latency_slope <= kMaxLatencySlope &&
             (m.measured == 0 || m.ttft.mean() <= kWarmupFraction * window);
  return m;
}

}  // namespace

std::optional<SloBound> first_missed(const RunMetrics& m, const std::vector<SloBound>& slos) {
  for (const SloBound& b : slos) {
    if (m.value(b.metric, b.quantile) > b.limit.to_seconds()) return b;
  }
  return std::nullopt;
}

// ---- the rate search ----

RateSearch find_max_rate(const std::function<bool(double)>& ok, double start, double rel_tol, double floor,
                         double ceiling, int max_probes) {
  ORRERY_CHECK(start > 0.0 && floor > 0.0 && ceiling >= start && start >= floor && rel_tol > 0.0);
  RateSearch s;
  auto probe = [&](double r) {
    ++s.probes;
    const bool pass = ok(r);
    if (pass) {
      s.max_ok = std::max(s.max_ok, r);
    } else if (s.min_fail == 0.0 || r < s.min_fail) {
      s.min_fail = r;
    }
    return pass;
  };
  if (probe(start)) {
    for (double r = std::min(2.0 * start, ceiling); s.probes < max_probes; r = std::min(2.0 * r, ceiling)) {
      if (!probe(r) || r >= ceiling) break;
    }
  } else {
    for (double r = start / 2.0; r >= floor && s.probes < max_probes; r /= 2.0) {
      if (probe(r)) break;
    }
  }
  while (s.max_ok > 0.0 && s.min_fail > 0.0 && s.min_fail / s.max_ok - 1.0 > rel_tol && s.probes < max_probes) {
    probe(0.5 * (s.max_ok + s.min_fail));
  }
  return s;
}

// ---- workload statistics ----

WorkloadStats workload_stats(RequestSource& src, int64_t limit) {
  WorkloadStats st;
  std::map<int32_t, std::array<double, 4>> acc;  // count, prompt sum, output sum, max output
  double first = 0.0, last = 0.0;
  while (st.requests < limit) {
    std::optional<Request> r = src.next();
    if (!r) break;
    if (st.requests == 0) first = r->arrival.to_seconds();
    last = r->arrival.to_seconds();
    auto& a = acc[std::max<int32_t>(0, r->type)];
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
  const double span = last - first;
  st.span_s = span;
  st.rate = st.requests > 1 && span > 0.0 ? static_cast<double>(st.requests - 1) / span : 0.0;
  st.mean_prompt /= static_cast<double>(st.requests);
  st.mean_output /= static_cast<double>(st.requests);
  st.types.assign(static_cast<size_t>(acc.rbegin()->first + 1), TypeStats{});
  for (const auto& [t, a] : acc) {
    TypeStats& ts = st.types[static_cast<size_t>(t)];
    ts.rate = st.rate * a[0] / static_cast<double>(st.requests);
    ts.prompt = a[1] / a[0];
    ts.output = a[2] / a[0];
    ts.max_output = static_cast<int64_t>(a[3]);
  }
  return st;
}

// ---- capacity planning ----

namespace {

constexpr int64_t kStatsRequests = 100000;  // requests read for WAIT's rates and lengths

bool wait_like(std::string_view scheduler) { return scheduler == "wait" || scheduler == "nested-wait"; }

std::unique_ptr<RequestSource> replica_stream(const WorkloadFactory& workload, double per_replica, int64_t replicas) {
  std::unique_ptr<RequestSource> src = workload(per_replica * static_cast<double>(replicas));
  if (replicas > 1) src = std::make_unique<RateScaledSource>(std::move(src), 1.0 / static_cast<double>(replicas));
  return src;
}

}  // namespace

CapacityProbe::CapacityProbe(const model::ModelSpec& model, const CapacityConfig& config, const WorkloadFactory& workload,
                             const CapacityOptions& options)
    : config_(config), workload_(workload), spec_(options.base) {
  spec_.model = &model;
  spec_.gpu = config.gpu;
  spec_.calibration = config.calibration;
  spec_.tp = config.tp;
  spec_.pp = config.pp;
  spec_.workspace_tokens = config.max_batched_tokens;
  spec_.workspace_seqs = config.max_seqs;
  try {
    spec_.validate();
  } catch (const InputError& e) {
    reason_ = e.message();
    return;
  }
  plan_ = plan_memory(spec_);
  if (!plan_.fits && spec_.kv_tokens_override == 0) {
    reason_ = plan_.reason;
    return;
  }
  kv_tokens_ = spec_.kv_tokens_override > 0
                   ? (spec_.kv_tokens_override + spec_.block_size - 1) / spec_.block_size * spec_.block_size
                   : plan_.kv_tokens;
  ExecContext ctx = options.exec;
  ctx.replica = &spec_;
  std::istringstream profile;
  ctx.profile = nullptr;
  if (options.profile_text) {
    profile.str(*options.profile_text);
    ctx.profile = &profile;
    ctx.profile_name = options.profile_name;
  }
  try {
    exec_ = make_exec_model(options.exec_model, ctx);
  } catch (const InputError& e) {
    // A profile table without rows for this TP degree rules out this configuration only.
    if (e.where().key != "num_tensor_parallel_workers") throw;
    reason_ = "profile " + e.message() + (e.hint().empty() ? "" : " (" + e.hint() + ")");
    return;
  }
  fits_ = true;
  base_.max_seqs = config.max_seqs;
  base_.max_batched_tokens = config.max_batched_tokens;
  base_.chunk_size = config.chunk_size;
  if (wait_like(config.scheduler)) {
    std::unique_ptr<RequestSource> pre = replica_stream(workload, options.start_rate, config.replicas);
    const WorkloadStats st = workload_stats(*pre, kStatsRequests);
    fit_ = options.exec_model == "linear" ? LinearFit{ctx.d0.to_seconds(), ctx.d1_s}
                                          : fit_linear(*exec_, st.mean_prompt, st.mean_output, config.max_batched_tokens);
  }
}

SchedulerConfig CapacityProbe::scheduler_config(double per_replica) const {
  SchedulerConfig c = base_;
  if (!wait_like(config_.scheduler)) return c;
  std::unique_ptr<RequestSource> pre = replica_stream(workload_, per_replica, config_.replicas);
  const WorkloadStats st = workload_stats(*pre, kStatsRequests);
  c.types = st.types;
  c.d0_s = fit_.d0_s;
  c.d1_s = fit_.d1_s;
  c.max_output = st.max_output;
  const TypeStats all{st.rate, st.mean_prompt, st.mean_output, st.max_output};
  c.nested_cap = st.rate > 0.0 ? nested_wait_cap_fluid(all, fit_.d0_s, fit_.d1_s, c.wait_margin, static_cast<double>(kv_tokens_))
                               : std::max<int64_t>(1, static_cast<int64_t>(st.mean_output));
  return c;
}

RunMetrics CapacityProbe::run(double per_replica, SimObserver* observer) const {
  ORRERY_CHECK(fits_);
  if (config_.replicas > 1 && !config_.router.empty()) {
    // The whole stream through the router to the replicas (serve/cluster.h).
    ClusterSpec cluster;
    PoolSpec pool;
    pool.replicas = config_.replicas;
    pool.replica = spec_;
    pool.plan = plan_;
    pool.exec = exec_.get();
    pool.scheduler = config_.scheduler;
    pool.scheduler_config = scheduler_config(per_replica);
    cluster.pools.push_back(std::move(pool));
    cluster.router = config_.router;
    std::unique_ptr<RequestSource> src = workload_(per_replica * static_cast<double>(config_.replicas));
    return measure_cluster_run(*src, cluster, SimOptions{}, observer);
  }
  const std::unique_ptr<Scheduler> sched = make_scheduler(config_.scheduler, scheduler_config(per_replica));
  std::unique_ptr<RequestSource> src = replica_stream(workload_, per_replica, config_.replicas);
  return measure_run(*src, spec_, plan_, *sched, *exec_, SimOptions{}, observer);
}

CapacityResult evaluate_capacity(const model::ModelSpec& model, const CapacityConfig& config,
                                 const WorkloadFactory& workload, const CapacityOptions& options) {
  return evaluate_capacity(CapacityProbe(model, config, workload, options), options);
}

CapacityResult evaluate_capacity(const CapacityProbe& probe, const CapacityOptions& options) {
  const CapacityConfig& config = probe.config();
  CapacityResult res;
  res.config = config;
  res.usd_per_hour = static_cast<double>(config.tp * config.pp * config.replicas) * config.usd_per_gpu_hour;
  res.usd_per_million = std::numeric_limits<double>::quiet_NaN();
  if (!probe.fits()) {
    res.reason = probe.reason();
    return res;
  }
  res.fits = true;
  res.kv_tokens = probe.kv_tokens();
  bool have_ok = false;
  double fail_rate = 0.0;
  auto ok = [&](double per_replica) {
    RunMetrics m = probe.run(per_replica);
    std::string why;
    if (m.rejected_kv > 0) {
      why = "rejects";
    } else if (m.measured == 0) {
      why = "no requests";
    } else if (const std::optional<SloBound> miss = first_missed(m, options.slos)) {
      why = miss->name();
    } else if (!m.stable) {
      why = "unstable";
    }
    if (why.empty()) {
      if (!have_ok || per_replica > res.rate_per_replica) {
        have_ok = true;
        res.rate_per_replica = per_replica;
        res.at_capacity = std::move(m);
      }
      return true;
    }
    if (fail_rate == 0.0 || per_replica < fail_rate) {
      fail_rate = per_replica;
      res.limit = why;
    }
    return false;
  };
  const RateSearch s = find_max_rate(ok, options.start_rate, options.rel_tol, options.floor_rate, options.ceiling_rate);
  res.probes = s.probes;
  if (!have_ok) {
    std::ostringstream floor;
    floor << options.floor_rate;
    res.reason = "no rate down to " + floor.str() + " req/s per replica " +
                 (options.slos.empty() ? "is stable" : "meets the SLOs") + " (" + res.limit + ")";
    return res;
  }
  res.feasible = true;
  res.rate = res.rate_per_replica * static_cast<double>(config.replicas);
  if (config.usd_per_gpu_hour > 0.0) res.usd_per_million = res.usd_per_hour / (3600.0 * res.rate) * 1e6;
  return res;
}

void rank_capacity(std::vector<CapacityResult>& results) {
  std::sort(results.begin(), results.end(), [](const CapacityResult& a, const CapacityResult& b) {
    if (a.feasible != b.feasible) return a.feasible;
    const bool pa = !std::isnan(a.usd_per_million), pb = !std::isnan(b.usd_per_million);
    if (pa != pb) return pa;
    if (pa && a.usd_per_million != b.usd_per_million) return a.usd_per_million < b.usd_per_million;
    if (a.rate != b.rate) return a.rate > b.rate;
    return a.index < b.index;
  });
}

std::vector<CapacityResult> plan_capacity(const model::ModelSpec& model, const std::vector<CapacityConfig>& configs,
                                          const WorkloadFactory& workload, const CapacityOptions& options) {
  if (!(options.rel_tol > 0.0 && options.rel_tol < 1.0)) throw InputError(Where{}.with_key("tolerance"), "must be in (0, 1)");
  if (!(options.floor_rate > 0.0) || !(options.start_rate >= options.floor_rate) ||
      !(options.ceiling_rate >= options.start_rate)) {
    throw InputError(Where{}.with_key("rate"), "need 0 < floor <= start <= ceiling");
  }
  std::vector<CapacityResult> results(configs.size());
  const size_t n = configs.size();
  parallel_for(
      n, 1, options.threads,
      [&](size_t i) {
        results[i] = evaluate_capacity(model, configs[i], workload, options);
        results[i].index = i;
      },
      [&](size_t done) {
        if (options.progress) options.progress(done, n);
      });
  rank_capacity(results);
  return results;
}

}  // namespace orrery::serve
