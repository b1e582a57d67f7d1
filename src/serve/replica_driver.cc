#include "serve/replica_driver.h"

#include <algorithm>

#include "core/assert.h"

namespace orrery::serve {

std::string_view to_string(ReplicaRole r) {
  switch (r) {
    case ReplicaRole::kFull: return "full";
    case ReplicaRole::kPrefill: return "prefill";
    case ReplicaRole::kDecode: return "decode";
  }
  return "?";
}

void MetricsSink::reject(const Request& req, RequestStatus status, int32_t replica) {
  (status == RequestStatus::kRejectedContext ? result_.rejected_context : result_.rejected_kv) += 1;
  if (observer_ != nullptr) {
    RequestRecord rec;
    rec.request = &req;
    rec.status = status;
    rec.replica = replica;
    observer_->on_request(rec);
  }
}

void MetricsSink::done(const Seq& s, Time now, int32_t replica, int32_t prefill_replica) {
  ++result_.completed;
  result_.last_completion = now;
  result_.input_tokens += s.req.prompt_tokens;
  result_.output_tokens += s.req.output_tokens;
  const double ttft = (s.first_token - s.req.arrival).to_seconds();
  const double e2el = (now - s.req.arrival).to_seconds();
  result_.ttft.add(ttft);
  result_.e2el.add(e2el);
  double tpot = 0.0;
  if (s.req.output_tokens > 1) {
    tpot = (now - s.first_token).to_seconds() / static_cast<double>(s.req.output_tokens - 1);
    result_.tpot.add(tpot);
  }
  if (ttft <= slo_.ttft.to_seconds() && tpot <= slo_.tpot.to_seconds()) ++result_.good_requests;
  if (observer_ != nullptr) {
    RequestRecord rec;
    rec.request = &s.req;
    rec.first_scheduled = s.first_scheduled;
    rec.first_token = s.first_token;
    rec.finish = now;
    rec.preemptions = s.preemptions;
    rec.restarts = s.restarts;
    rec.wasted_tokens = s.wasted_tokens;
    rec.generated = s.generated;
    rec.replica = replica;
    rec.prefill_replica = prefill_replica;
    observer_->on_request(rec);
  }
}

void Sampler::add(const Sample& s) {
  result_.samples.push_back(s);
  if (static_cast<int64_t>(result_.samples.size()) > max_samples_) {
    // Halve the resolution: keep every other sample.
    std::vector<Sample> kept;
    for (size_t i = 0; i < result_.samples.size(); i += 2) kept.push_back(result_.samples[i]);
    result_.samples = std::move(kept);
    interval_ = interval_ * 2;
    result_.sample_interval = interval_;
  }
  while (next_ <= s.t) next_ += interval_;
}

Pipeline::Pipeline(int32_t stages) : free_(static_cast<size_t>(std::max(stages, 1)), Time::zero()) {}

Time Pipeline::reserve(Time now, Time t) {
  const auto p = static_cast<int64_t>(free_.size());
  // Stage i starts floor(i t / p) after the iteration.
  const auto offset = [&](int64_t i) { return Time::ps(t.picoseconds() * i / p); };
  Time s = now;
  for (int64_t i = 0; i < p; ++i) s = std::max(s, free_[static_cast<size_t>(i)] - offset(i));
  for (int64_t i = 0; i < p; ++i) free_[static_cast<size_t>(i)] = s + offset(i + 1);
  busy_ += offset(1);
  return s;
}

ReplicaDriver::ReplicaDriver(des::Engine& engine, int32_t index, ReplicaRole role, const ReplicaSpec& spec,
                             const MemoryPlan& plan, Scheduler& scheduler, const ExecModel& exec,
                             const SchedulerView& view, MetricsSink& metrics, Listener& listener, bool reserve_whole)
    : engine_(engine),
      index_(index),
      replica_id_(index),
      role_(role),
      replica_(spec, plan),
      scheduler_(scheduler),
      exec_(exec),
      view_(view),
      metrics_(metrics),
      listener_(listener),
      reserve_whole_(reserve_whole) {}

RequestStatus ReplicaDriver::admission(const Request& req) const {
  const int64_t total = req.prompt_tokens + req.output_tokens;
  if (total > replica_.spec().context_limit()) return RequestStatus::kRejectedContext;
  const int64_t blocks = (total + replica_.block_size() - 1) / replica_.block_size();
  if (blocks > replica_.total_blocks() - replica_.watermark_blocks()) return RequestStatus::kRejectedKv;
  return RequestStatus::kDone;
}

SeqId ReplicaDriver::admit(Request req, int64_t order) {
  const SeqId id = replica_.add(std::move(req), order);
  scheduler_.enqueue(replica_, id);
  ++stats_.admitted;
  stats_.peak_live = std::max(stats_.peak_live, replica_.live());
  return id;
}

SeqId ReplicaDriver::receive(Request req, const Seq& from, int64_t order) {
  ORRERY_ASSERT(role_ == ReplicaRole::kDecode);
  const int64_t reserve = reserve_whole_ ? req.prompt_tokens + req.output_tokens : 0;
  const SeqId id = replica_.add_prefilled(std::move(req), from, reserve, order, replica_.watermark_blocks());
  if (id >= 0) {
    ++stats_.admitted;
    stats_.peak_live = std::max(stats_.peak_live, replica_.live());
  }
  return id;
}

void ReplicaDriver::enqueue_received(SeqId id) { scheduler_.enqueue_prefilled(replica_, id); }

void ReplicaDriver::release_handed_over(SeqId id) {
  ORRERY_ASSERT(role_ == ReplicaRole::kPrefill);
  replica_.release(id);
}

void ReplicaDriver::account(Time now) {
  if (!accounted_) {
    accounted_ = true;
    last_account_ = now;
    return;
  }
  if (now > last_account_) {
    stats_.kv_block_seconds += static_cast<double>(replica_.used_blocks()) * (now - last_account_).to_seconds();
    last_account_ = now;
  }
}

void ReplicaDriver::start_iteration(Time now) {
  batch_.clear();
  scheduler_.schedule(replica_, view_, batch_);
  if (batch_.empty()) return;
  shape_.clear();
  for (const BatchItem& it : batch_.items) {
    Seq& s = replica_.seq(it.seq);
    if (s.first_scheduled == Time::max()) s.first_scheduled = now;
    const bool prefill = s.in_prefill();
    const bool emits = !prefill || s.computed + it.q >= s.prefill_target;
    shape_.add(it.q, s.computed + it.q, emits, prefill);
  }
  for (const compute::AttentionSeq& p : batch_.padding) shape_.add(p.q, p.kv, false, p.q > 1);
  const Time t = exec_.iteration_time(shape_) + batch_.extra;
  // A virtual engine's batch enters the pipeline when its stages have room (at once otherwise).
  const Time begin = pipeline_ != nullptr ? pipeline_->reserve(now, t) : now;
  busy_ = true;
  ++stats_.iterations;
  const int64_t seqs = static_cast<int64_t>(shape_.seqs.size());
  stats_.batch_sum += static_cast<double>(seqs);
  stats_.batch_size_max = std::max(stats_.batch_size_max, seqs);
  const double util = static_cast<double>(replica_.used_blocks()) / static_cast<double>(replica_.total_blocks());
  stats_.kv_utilization_max = std::max(stats_.kv_utilization_max, util);
  stats_.busy += t;
  listener_.on_iteration_start(*this, now);
  if (SimObserver* obs = metrics_.observer(); obs != nullptr) {
    IterationRecord rec;
    rec.start = begin;
    rec.duration = t;
    rec.seqs = seqs;
    rec.tokens = shape_.tokens;
    rec.prefill_seqs = shape_.prefill_seqs;
    rec.decode_seqs = shape_.decode_seqs;
    rec.kv_tokens = shape_.kv_tokens;
    rec.used_blocks = replica_.used_blocks();
    rec.total_blocks = replica_.total_blocks();
    rec.held = scheduler_.held();
    rec.waiting = scheduler_.waiting();
    rec.transfer = batch_.extra;
    rec.replica = replica_id_;
    rec.engine = engine_id_;
    obs->on_iteration(rec);
  }
  engine_.schedule_at(begin + t, this, 0);
}

void ReplicaDriver::end_iteration(Time now) {
  busy_ = false;
  finished_.clear();
  // Every token after a request's first is one inter-token latency sample.
  replica_.complete(batch_, now, finished_, [&](const Seq& s, bool first) {
    if (!first) metrics_.token_gap((now - s.last_token).to_seconds());
  });
  scheduler_.on_iteration_end(replica_, batch_, finished_);
  for (const SeqId id : finished_) {
    ++stats_.finished;
    listener_.on_finished(*this, id, now);
    if (role_ != ReplicaRole::kPrefill) replica_.release(id);
  }
}

void ReplicaDriver::on_event(des::Engine& engine, uint64_t tag) {
  (void)tag;
  const Time now = engine.now();
  account(now);
  end_iteration(now);
  listener_.on_iteration_end(*this, now);
  kick(now);
}

}  // namespace orrery::serve
