#include "serve/cluster.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>

#include "core/assert.h"
#include "des/engine.h"

namespace orrery::serve {

bool scheduler_takes_prefilled(std::string_view name) {
  // Continuous batchers admit a waiting sequence with whatever it has computed (sched_continuous.h);
  // static batching and the WAIT family count stages from the prefill.
  return name == "vllm" || name == "sarathi" || name == "orca" || name == "sjf";
}

bool runs_virtual_engines(std::string_view scheduler) {
  return !scheduler.empty() && scheduler != "wait" && scheduler != "nested-wait";
}

bool ClusterSpec::disaggregated() const {
  return std::any_of(pools.begin(), pools.end(), [](const PoolSpec& p) { return p.role != ReplicaRole::kFull; });
}

int64_t ClusterSpec::replicas() const {
  int64_t n = 0;
  for (const PoolSpec& p : pools) n += p.replicas;
  return n;
}

void ClusterSpec::validate(const Where& where) const {
  if (pools.empty()) throw InputError(where.with_key("replicas"), "a cluster needs at least one pool of replicas");
  int64_t prefill = 0, decode = 0;
  for (const PoolSpec& p : pools) {
    if (p.replicas < 1) throw InputError(where.with_key("replicas"), "every pool needs at least one replica");
    ORRERY_CHECK(p.exec != nullptr && p.replica.model != nullptr && p.replica.gpu != nullptr);
    if (p.role == ReplicaRole::kPrefill) ++prefill;
    if (p.role == ReplicaRole::kDecode) ++decode;
    if (p.replica.model->name != pools.front().replica.model->name) {
      throw InputError(where.with_key("model"), "all pools must serve the same model");
    }
  }
  if (disaggregated()) {
    if (prefill != 1 || decode != 1 || pools.size() != 2) {
      throw InputError(where.with_key("disagg"), "a disaggregated cluster has exactly one prefill and one decode pool");
    }
    for (const PoolSpec& p : pools) {
      if (p.role == ReplicaRole::kDecode && !scheduler_takes_prefilled(p.scheduler)) {
        throw InputError(where.with_key("scheduler"),
                         "the decode pool cannot run '" + p.scheduler + "': it takes requests that arrive prefilled",
                         "use vllm, sarathi, orca or sjf");
      }
    }
  }
  RouterConfig rc = router_config;
  (void)make_router(router, rc, where.with_key("router"));
  if (disaggregated()) (void)make_router(decode_router, rc, where.with_key("decode-router"));
}

namespace {

// The memory policy a scheduler uses when SchedulerConfig::memory is unset (scheduler.h).
MemoryPolicy default_memory(std::string_view scheduler) {
  return scheduler == "orca" || scheduler == "static" ? MemoryPolicy::kReserve : MemoryPolicy::kEvictLifo;
}

// The prefill-to-decode hand-over of one request.
struct Handover {
  int32_t prefill = 0;  // driver index
  SeqId pseq = 0;
  int32_t decode = 0;
  SeqId dseq = -1;
  Time ready;  // first token produced
  Time start;  // transfer started
  Bytes bytes;
};

class ClusterSim final : public des::EventHandler, public ReplicaDriver::Listener, public net::FlowListener {
 public:
  ClusterSim(RequestSource& source, const ClusterSpec& spec, std::span<Scheduler* const> schedulers,
             const SimOptions& options, SimObserver* observer)
      : source_(source),
        spec_(spec),
        options_(options),
        metrics_(result_.total, options.slo, observer),
        sampler_(result_.total, options.sample_interval, options.max_samples) {
    ORRERY_CHECK(static_cast<int64_t>(schedulers.size()) == spec.replicas());
    size_t k = 0;
    std::vector<int64_t> gpus;
    std::vector<const NodeLink*> links;
    for (size_t pi = 0; pi < spec.pools.size(); ++pi) {
      const PoolSpec& pool = spec.pools[pi];
      for (int64_t i = 0; i < pool.replicas; ++i, ++k) {
        const auto index = static_cast<int32_t>(drivers_.size());
        Scheduler& first = *schedulers[k];
        const bool reserve_whole = pool.scheduler_config.memory.value_or(default_memory(pool.scheduler)) ==
                                   MemoryPolicy::kReserve;
        // Pipeline parallelism: one virtual engine per stage, each with its own scheduler (fresh() never
        // fails for a named scheduler) and 1/p of the KV blocks (vLLM's PP virtual engines), sharing the
        // stages (Pipeline).
        const int64_t engines = pool.role == ReplicaRole::kFull && runs_virtual_engines(first.name())
                                    ? std::max<int64_t>(1, pool.replica.pp)
                                    : 1;
        ReplicaSpec ve_spec = pool.replica;
        MemoryPlan ve_plan = pool.plan;
        Group& group = groups_.emplace_back();
        if (engines > 1) {
          ve_plan.blocks = pool.plan.blocks / engines;
          ve_plan.kv_tokens = ve_plan.blocks * pool.replica.block_size;
          ve_plan.kv = Bytes(pool.plan.kv.count() / engines);
          if (ve_spec.kv_tokens_override > 0) ve_spec.kv_tokens_override /= engines;
          ve_spec.swap_space = Bytes(ve_spec.swap_space.count() / engines);
          group.pipeline = std::make_unique<Pipeline>(static_cast<int32_t>(engines));
        }
        for (int64_t v = 0; v < engines; ++v) {
          const auto d = static_cast<int32_t>(drivers_.size());
          Scheduler* sched = &first;
          if (v > 0) {
            owned_schedulers_.push_back(first.fresh());
            sched = owned_schedulers_.back().get();
          }
          drivers_.push_back(std::make_unique<ReplicaDriver>(engine_, d, pool.role, ve_spec, ve_plan, *sched, *pool.exec,
                                                             view_, metrics_, *this, reserve_whole));
          drivers_.back()->set_pipeline(group.pipeline.get(), static_cast<int32_t>(k), static_cast<int32_t>(v));
          pool_of_.push_back(static_cast<int32_t>(pi));
          gpus.push_back(pool.replica.tp * pool.replica.pp);
          links.push_back(&pool.link);
          group.engines.push_back(d);
        }
        (pool.role == ReplicaRole::kDecode ? decode_ : entry_).push_back(index);
      }
    }
    entry_router_ = make_router(spec.router, router_config(entry_), {});
    if (!decode_.empty()) {
      decode_router_ = make_router(spec.decode_router, router_config(decode_), {});
      const std::vector<int64_t> order = placement_order();
      std::vector<int64_t> g;
      std::vector<const NodeLink*> l;
      for (int64_t i : order) {
        g.push_back(gpus[static_cast<size_t>(i)]);
        l.push_back(links[static_cast<size_t>(i)]);
      }
      const std::vector<ReplicaPlace> placed = place_replicas(g, l);
      std::vector<KvNetwork::Endpoint> ends(drivers_.size());
      for (size_t j = 0; j < order.size(); ++j) {
        const auto i = static_cast<size_t>(order[j]);
        ends[i] = KvNetwork::Endpoint{gpus[i], links[i], placed[j]};
      }
      network_ = std::make_unique<KvNetwork>(engine_, std::move(ends));
      pending_.resize(drivers_.size());
      output_of_.resize(drivers_.size());
      prefill_of_.resize(drivers_.size());
      kv_model_ = spec.pools.front().replica.model;
      kv_dtype_ = spec.pools.front().replica.dtype;
    }
    loads_.reserve(drivers_.size());
  }

  ClusterResult run() {
    pull();
    if (pending_req_) {
      result_.total.first_arrival = pending_req_->arrival;
      sampler_.start(pending_req_->arrival);
      engine_.schedule_at(pending_req_->arrival, this, 0);
    }
    if (options_.time_limit == Time::max()) {
      engine_.run();
    } else {
      engine_.run_until(options_.time_limit);
    }
    finish();
    return std::move(result_);
  }

  // Arrivals.
  void on_event(des::Engine& engine, uint64_t tag) override {
    (void)tag;
    const Time now = engine.now();
    for (auto& d : drivers_) d->account(now);
    arrive(now);
    // Requests arriving at the same instant are all routed before the replicas look.
    if (pending_req_ && pending_req_->arrival == now) return;
    for (auto& d : drivers_) d->kick(now);
  }

  void on_iteration_start(ReplicaDriver& d, Time now) override {
    (void)d;
    if (!sampler_.due(now)) return;
    int64_t used = 0, total = 0, batch = 0, waiting = 0, held = 0;
    for (const auto& x : drivers_) {
      used += x->replica().used_blocks();
      total += x->replica().total_blocks();
      batch += x->batch_seqs();
      waiting += x->scheduler().waiting();
      held += x->scheduler().held();
    }
    sampler_.add(Sample{now, static_cast<double>(used) / static_cast<double>(total), batch, waiting, held});
  }

  void on_finished(ReplicaDriver& d, SeqId id, Time now) override {
    const Seq& s = d.replica().seq(id);
    switch (d.role()) {
      case ReplicaRole::kFull:
        metrics_.done(s, now, d.replica_id(), -1);
        --in_system_;
        return;
      case ReplicaRole::kDecode:
        metrics_.done(s, now, d.index(), prefill_of_[static_cast<size_t>(d.index())][static_cast<size_t>(id)]);
        --in_system_;
        return;
      case ReplicaRole::kPrefill: break;
    }
    const int64_t output = output_of_[static_cast<size_t>(d.index())][static_cast<size_t>(id)];
    if (output <= 1) {
      metrics_.done(s, now, d.index(), d.index());
      --in_system_;
      d.release_handed_over(id);
      return;
    }
    const size_t h = new_handover();
    Handover& ho = handovers_[h];
    ho.prefill = d.index();
    ho.pseq = id;
    ho.ready = now;
    fill_loads(decode_);
    ho.decode = decode_[decode_router_->route(s.req, loads_)];
    std::deque<size_t>& queue = pending_[static_cast<size_t>(ho.decode)];
    if (!queue.empty() || !start_transfer(h, now)) queue.push_back(h);
  }

  void on_iteration_end(ReplicaDriver& d, Time now) override {
    if (d.role() != ReplicaRole::kDecode) return;
    std::deque<size_t>& queue = pending_[static_cast<size_t>(d.index())];
    while (!queue.empty() && start_transfer(queue.front(), now)) queue.pop_front();
  }

  // A KV transfer's last byte arrived.
  void on_flow_done(uint64_t tag, Time now) override {
    const Handover ho = handovers_[tag];
    free_handovers_.push_back(tag);
    TransferStats& t = result_.transfers;
    ++t.count;
    if (network_->co_located(ho.prefill, ho.decode)) ++t.intra_node;
    t.bytes += ho.bytes;
    t.time.add((now - ho.start).to_seconds());
    ReplicaDriver& p = *drivers_[static_cast<size_t>(ho.prefill)];
    ReplicaDriver& d = *drivers_[static_cast<size_t>(ho.decode)];
    p.account(now);
    p.release_handed_over(ho.pseq);
    d.enqueue_received(ho.dseq);
    d.kick(now);
    p.kick(now);
  }

 private:
  RouterConfig router_config(const std::vector<int32_t>& members) const {
    RouterConfig rc = spec_.router_config;
    rc.replicas = static_cast<int64_t>(members.size());
    rc.capacity_units.clear();
    const ReplicaSpec& first = spec_.pools[static_cast<size_t>(pool_of_[static_cast<size_t>(members.front())])].replica;
    rc.prefix_unit_tokens = first.prefix_unit_tokens;
    for (int32_t i : members) {
      const Replica& r = drivers_[static_cast<size_t>(i)]->replica();
      const int64_t unit_blocks = (r.spec().prefix_unit_tokens + r.block_size() - 1) / r.block_size();
      int64_t blocks = 0;
      for (int32_t e : group_of(i).engines) blocks += drivers_[static_cast<size_t>(e)]->replica().total_blocks();
      rc.capacity_units.push_back(std::max<int64_t>(1, blocks / unit_blocks));
    }
    return rc;
  }

  // Driver indices in placement order.
  std::vector<int64_t> placement_order() const {
    std::vector<int64_t> order;
    if (spec_.placement == Placement::kPacked) {
      for (size_t i = 0; i < drivers_.size(); ++i) order.push_back(static_cast<int64_t>(i));
      return order;
    }
    for (size_t k = 0; k < std::max(entry_.size(), decode_.size()); ++k) {
      if (k < entry_.size()) order.push_back(entry_[k]);
      if (k < decode_.size()) order.push_back(decode_[k]);
    }
    return order;
  }

  void pull() {
    pending_req_ = source_.next();
    if (!pending_req_) view_.arrivals_done = true;
  }

  void fill_loads(const std::vector<int32_t>& members) {
    loads_.clear();
    for (int32_t i : members) {
      int64_t outstanding = 0, used = 0, total = 0;
      for (int32_t e : group_of(i).engines) {
        const Replica& r = drivers_[static_cast<size_t>(e)]->replica();
        outstanding += r.live();
        used += r.used_blocks();
        total += r.total_blocks();
      }
      if (!pending_.empty()) outstanding += static_cast<int64_t>(pending_[static_cast<size_t>(i)].size());
      loads_.push_back(ReplicaLoad{outstanding, used, total});
    }
  }

  void arrive(Time now) {
    ORRERY_CHECK(pending_req_.has_value());
    Request req = std::move(*pending_req_);
    pending_req_.reset();
    SimResult& res = result_.total;
    ++res.arrived;
    fill_loads(entry_);
    ReplicaDriver& d = engine_for(entry_[entry_router_->route(req, loads_)]);
    RequestStatus status = RequestStatus::kDone;
    const int64_t output = req.output_tokens;
    if (d.role() == ReplicaRole::kPrefill) {
      status = drivers_[static_cast<size_t>(decode_.front())]->admission(req);
      req.output_tokens = 1;
      if (status == RequestStatus::kDone) status = d.admission(req);
    } else {
      status = d.admission(req);
    }
    if (status != RequestStatus::kDone) {
      req.output_tokens = output;
      metrics_.reject(req, status, d.replica_id());
    } else {
      const SeqId id = d.admit(std::move(req), res.arrived);
      if (d.role() == ReplicaRole::kPrefill) {
        std::vector<int64_t>& out = output_of_[static_cast<size_t>(d.index())];
        if (out.size() <= static_cast<size_t>(id)) out.resize(static_cast<size_t>(id) + 1);
        out[static_cast<size_t>(id)] = output;
      }
      ++in_system_;
      res.peak_held = std::max(res.peak_held, in_system_);
    }
    pull();
    if (pending_req_) {
      ORRERY_CHECK(pending_req_->arrival >= now);
      engine_.schedule_at(pending_req_->arrival, this, 0);
    }
  }

  // The virtual engine of driver `first`'s replica a new request goes to: the one with the fewest
  // requests (vLLM adds a request to the virtual engine with the fewest unfinished sequences); ties to
  // the lowest. A replica without pipeline engines is its one driver.
  ReplicaDriver& engine_for(int32_t first) {
    const std::vector<int32_t>& engines = group_of(first).engines;
    int32_t best = engines.front();
    for (int32_t e : engines) {
      if (drivers_[static_cast<size_t>(e)]->replica().live() < drivers_[static_cast<size_t>(best)]->replica().live()) best = e;
    }
    return *drivers_[static_cast<size_t>(best)];
  }

  size_t new_handover() {
    if (!free_handovers_.empty()) {
      const size_t h = free_handovers_.back();
      free_handovers_.pop_back();
      handovers_[h] = Handover{};
      return h;
    }
    handovers_.emplace_back();
    return handovers_.size() - 1;
  }

  // Reserves the decode replica's blocks and starts the transfer; false when the blocks do not fit.
  bool start_transfer(size_t h, Time now) {
    Handover& ho = handovers_[h];
    ReplicaDriver& p = *drivers_[static_cast<size_t>(ho.prefill)];
    ReplicaDriver& d = *drivers_[static_cast<size_t>(ho.decode)];
    const Seq& ps = p.replica().seq(ho.pseq);
    Request req;
    req.id = ps.req.id;
    req.arrival = ps.req.arrival;
    req.prompt_tokens = ps.req.prompt_tokens;
    req.output_tokens = output_of_[static_cast<size_t>(ho.prefill)][static_cast<size_t>(ho.pseq)];
    req.type = ps.req.type;
    d.account(now);
    const SeqId id = d.receive(std::move(req), ps, ++received_);
    if (id < 0) return false;
    std::vector<int32_t>& from = prefill_of_[static_cast<size_t>(ho.decode)];
    if (from.size() <= static_cast<size_t>(id)) from.resize(static_cast<size_t>(id) + 1);
    from[static_cast<size_t>(id)] = ho.prefill;
    ho.dseq = id;
    ho.start = now;
    ho.bytes = kv_transfer_bytes(*kv_model_, kv_dtype_, ps.computed);
    result_.transfers.wait.add((now - ho.ready).to_seconds());
    network_->start(ho.prefill, ho.decode, ho.bytes, this, h);
    return true;
  }

  void finish() {
    SimResult& r = result_.total;
    const Time end = std::max(engine_.now(), r.first_arrival);
    for (auto& d : drivers_) d->account(end);
    r.end = end;
    r.unfinished = r.arrived - r.completed - r.rejected_context - r.rejected_kv;
    double kv_block_seconds = 0.0, batch_sum = 0.0;
    int64_t total_blocks = 0;
    for (const auto& d : drivers_) {
      const ReplicaStats& st = d->stats();
      add_counters(r.counters, d->replica().counters());
      r.iterations += st.iterations;
      batch_sum += st.batch_sum;
      r.batch_size_max = std::max(r.batch_size_max, st.batch_size_max);
      kv_block_seconds += st.kv_block_seconds;
      r.kv_utilization_max = std::max(r.kv_utilization_max, st.kv_utilization_max);
      total_blocks += d->replica().total_blocks();
    }
    const Time last = r.completed > 0 ? r.last_completion : end;
    r.duration_s = (last - r.first_arrival).to_seconds();
    if (r.duration_s > 0.0) {
      r.request_throughput = static_cast<double>(r.completed) / r.duration_s;
      r.output_throughput = static_cast<double>(r.output_tokens) / r.duration_s;
      r.total_token_throughput = static_cast<double>(r.input_tokens + r.output_tokens) / r.duration_s;
      r.processed_token_throughput =
          static_cast<double>(r.counters.prefill_tokens + r.counters.decode_tokens) / r.duration_s;
      r.goodput = static_cast<double>(r.good_requests) / r.duration_s;
    }
    const double span = (end - r.first_arrival).to_seconds();
    r.kv_utilization_mean = span > 0.0 ? kv_block_seconds / span / static_cast<double>(total_blocks) : 0.0;
    r.batch_size_mean = r.iterations > 0 ? batch_sum / static_cast<double>(r.iterations) : 0.0;
    // One summary per replica: a pipeline's virtual engines add up; its busy time is the time its first
    // stage was booked.
    for (size_t k = 0; k < groups_.size(); ++k) {
      const Group& group = groups_[k];
      const int32_t first = group.engines.front();
      ReplicaSummary s;
      s.index = static_cast<int32_t>(k);
      s.pool = pool_of_[static_cast<size_t>(first)];
      s.role = drivers_[static_cast<size_t>(first)]->role();
      for (int32_t e : group.engines) {
        const ReplicaDriver& d = *drivers_[static_cast<size_t>(e)];
        add_stats(s.stats, d.stats());
        add_counters(s.counters, d.replica().counters());
        s.total_blocks += d.replica().total_blocks();
      }
      if (group.pipeline != nullptr) s.stats.busy = group.pipeline->busy();
      r.busy += s.stats.busy;
      if (r.duration_s > 0.0) s.request_throughput = static_cast<double>(s.stats.finished) / r.duration_s;
      if (span > 0.0) {
        s.kv_utilization_mean = s.stats.kv_block_seconds / span / static_cast<double>(s.total_blocks);
        s.busy_fraction = s.stats.busy.to_seconds() / span;
      }
      result_.replicas.push_back(s);
    }
  }

  // Per replica (ReplicaDriver::replica_id): its drivers, the virtual engines of a pipeline-parallel
  // replica or its one driver, and their shared Pipeline (nullptr: one batch in flight).
  struct Group {
    std::vector<int32_t> engines;
    std::unique_ptr<Pipeline> pipeline;
  };
  const Group& group_of(int32_t driver) const {
    return groups_[static_cast<size_t>(drivers_[static_cast<size_t>(driver)]->replica_id())];
  }
  static void add_stats(ReplicaStats& a, const ReplicaStats& b) {
    a.admitted += b.admitted;
    a.finished += b.finished;
    a.iterations += b.iterations;
    a.batch_sum += b.batch_sum;
    a.batch_size_max = std::max(a.batch_size_max, b.batch_size_max);
    a.kv_block_seconds += b.kv_block_seconds;
    a.kv_utilization_max = std::max(a.kv_utilization_max, b.kv_utilization_max);
    a.busy += b.busy;
    a.peak_live += b.peak_live;
  }
  static void add_counters(ReplicaCounters& a, const ReplicaCounters& b) {
    a.preemptions += b.preemptions;
    a.restarts += b.restarts;
    a.swap_outs += b.swap_outs;
    a.swap_ins += b.swap_ins;
    a.wasted_tokens += b.wasted_tokens;
    a.prefix_hit_tokens += b.prefix_hit_tokens;
    a.prefill_tokens += b.prefill_tokens;
    a.decode_tokens += b.decode_tokens;
  }

  RequestSource& source_;
  const ClusterSpec& spec_;
  SimOptions options_;
  ClusterResult result_;
  MetricsSink metrics_;
  Sampler sampler_;
  SchedulerView view_;
  des::Engine engine_;
  std::vector<std::unique_ptr<ReplicaDriver>> drivers_;
  std::vector<Group> groups_;                                 // per replica
  std::vector<std::unique_ptr<Scheduler>> owned_schedulers_;  // the further engines' schedulers
  std::vector<int32_t> pool_of_;
  std::vector<int32_t> entry_;   // replicas requests arrive at (kFull or kPrefill)
  std::vector<int32_t> decode_;  // kDecode replicas
  std::unique_ptr<Router> entry_router_;
  std::unique_ptr<Router> decode_router_;
  std::vector<ReplicaLoad> loads_;
  std::optional<Request> pending_req_;
  int64_t in_system_ = 0;
  // Disaggregated serving.
  std::unique_ptr<KvNetwork> network_;
  const model::ModelSpec* kv_model_ = nullptr;
  hw::DType kv_dtype_ = hw::DType::kFp16;
  std::vector<Handover> handovers_;
  std::vector<size_t> free_handovers_;
  std::vector<std::deque<size_t>> pending_;        // per decode driver: hand-overs waiting for blocks
  std::vector<std::vector<int64_t>> output_of_;    // per prefill driver, by SeqId: the request's output
  std::vector<std::vector<int32_t>> prefill_of_;   // per decode driver, by SeqId: its prefill driver
  int64_t received_ = 0;
};

}  // namespace

ClusterResult simulate_cluster(RequestSource& source, const ClusterSpec& spec, std::span<Scheduler* const> schedulers,
                               const SimOptions& options, SimObserver* observer) {
  ClusterSim sim(source, spec, schedulers, options, observer);
  return sim.run();
}

ClusterResult simulate_cluster(RequestSource& source, const ClusterSpec& spec, const SimOptions& options,
                               SimObserver* observer) {
  std::vector<std::unique_ptr<Scheduler>> owned;
  std::vector<Scheduler*> schedulers;
  for (const PoolSpec& p : spec.pools) {
    for (int64_t i = 0; i < p.replicas; ++i) {
      owned.push_back(make_scheduler(p.scheduler, p.scheduler_config, Where{"", 0, "scheduler"}));
      schedulers.push_back(owned.back().get());
    }
  }
  return simulate_cluster(source, spec, schedulers, options, observer);
}

}  // namespace orrery::serve
