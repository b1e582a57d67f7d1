#include "serve/simulator.h"

#include <algorithm>

#include "core/assert.h"
#include "des/engine.h"

namespace orrery::serve {

std::string_view to_string(RequestStatus s) {
  switch (s) {
    case RequestStatus::kDone: return "done";
    case RequestStatus::kRejectedContext: return "rejected-context";
    case RequestStatus::kRejectedKv: return "rejected-kv";
    case RequestStatus::kUnfinished: return "unfinished";
  }
  return "?";
}

namespace {

enum Tag : uint64_t { kArrival = 0, kIterationEnd = 1 };

class Simulation final : public des::EventHandler {
 public:
  Simulation(RequestSource& source, const ReplicaSpec& spec, const MemoryPlan& plan, Scheduler& scheduler,
             const ExecModel& exec, const SimOptions& options, SimObserver* observer)
      : source_(source),
        replica_(spec, plan),
        scheduler_(scheduler),
        exec_(exec),
        options_(options),
        observer_(observer),
        interval_(options.sample_interval) {
    result_.sample_interval = interval_;
  }

  SimResult run() {
    pull();
    if (pending_) {
      result_.first_arrival = pending_->arrival;
      last_account_ = pending_->arrival;
      next_sample_ = pending_->arrival;
      engine_.schedule_at(pending_->arrival, this, kArrival);
    }
    if (options_.time_limit == Time::max()) {
      engine_.run();
    } else {
      engine_.run_until(options_.time_limit);
    }
    finish();
    return std::move(result_);
  }

  void on_event(des::Engine& engine, uint64_t tag) override {
    const Time now = engine.now();
    account(now);
    if (tag == kArrival) {
      arrive(now);
    } else {
      end_iteration(now);
    }
    // Requests arriving at the same instant are all queued before the scheduler looks.
    const bool more_now = tag == kArrival && pending_ && pending_->arrival == now;
    if (!busy_ && !more_now) start_iteration(now);
  }

 private:
  void pull() {
    pending_ = source_.next();
    if (!pending_) view_.arrivals_done = true;
  }

  void account(Time now) {
    if (now > last_account_) {
      kv_integral_ += static_cast<double>(replica_.used_blocks()) * (now - last_account_).to_seconds();
      last_account_ = now;
    }
  }

  void reject(const Request& req, RequestStatus status) {
    (status == RequestStatus::kRejectedContext ? result_.rejected_context : result_.rejected_kv) += 1;
    if (observer_ != nullptr) {
      RequestRecord rec;
      rec.request = &req;
      rec.status = status;
      observer_->on_request(rec);
    }
  }

  void arrive(Time now) {
    ORRERY_CHECK(pending_.has_value());
    Request req = std::move(*pending_);
    pending_.reset();
    ++result_.arrived;
    const int64_t total = req.prompt_tokens + req.output_tokens;
    if (total > replica_.spec().context_limit()) {
      reject(req, RequestStatus::kRejectedContext);
    } else if (ceil_blocks(total) > replica_.total_blocks() - replica_.watermark_blocks()) {
      reject(req, RequestStatus::kRejectedKv);
    } else {
      const SeqId id = replica_.add(std::move(req), result_.arrived);
      scheduler_.enqueue(replica_, id);
      result_.peak_held = std::max(result_.peak_held, replica_.live());
    }
    pull();
    if (pending_) {
      ORRERY_CHECK(pending_->arrival >= now);
      engine_.schedule_at(pending_->arrival, this, kArrival);
    }
  }

  int64_t ceil_blocks(int64_t tokens) const { return (tokens + replica_.block_size() - 1) / replica_.block_size(); }

  void start_iteration(Time now) {
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
    busy_ = true;
    iteration_start_ = now;
    ++result_.iterations;
    const int64_t seqs = static_cast<int64_t>(shape_.seqs.size());
    batch_sum_ += static_cast<double>(seqs);
    result_.batch_size_max = std::max(result_.batch_size_max, seqs);
    const double util = static_cast<double>(replica_.used_blocks()) / static_cast<double>(replica_.total_blocks());
    result_.kv_utilization_max = std::max(result_.kv_utilization_max, util);
    result_.busy += t;
    if (now >= next_sample_) sample(now, util, seqs);
    if (observer_ != nullptr) {
      IterationRecord rec;
      rec.start = now;
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
      observer_->on_iteration(rec);
    }
    engine_.schedule_at(now + t, this, kIterationEnd);
  }

  void sample(Time now, double util, int64_t seqs) {
    result_.samples.push_back(Sample{now, util, seqs, scheduler_.waiting(), scheduler_.held()});
    if (static_cast<int64_t>(result_.samples.size()) > options_.max_samples) {
      // Halve the resolution: keep every other sample.
      std::vector<Sample> kept;
      for (size_t i = 0; i < result_.samples.size(); i += 2) kept.push_back(result_.samples[i]);
      result_.samples = std::move(kept);
      interval_ = interval_ * 2;
      result_.sample_interval = interval_;
    }
    while (next_sample_ <= now) next_sample_ += interval_;
  }

  void end_iteration(Time now) {
    busy_ = false;
    finished_.clear();
    // Every token after a request's first is one inter-token latency sample.
    replica_.complete(batch_, now, finished_, [&](const Seq& s, bool first) {
      if (!first) result_.itl.add((now - s.last_token).to_seconds());
    });
    scheduler_.on_iteration_end(replica_, batch_, finished_);
    for (const SeqId id : finished_) {
      const Seq& s = replica_.seq(id);
      record_done(s, now);
      replica_.release(id);
    }
  }

  void record_done(const Seq& s, Time now) {
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
    if (ttft <= options_.slo.ttft.to_seconds() && tpot <= options_.slo.tpot.to_seconds()) ++result_.good_requests;
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
      observer_->on_request(rec);
    }
  }

  void finish() {
    const Time end = std::max(engine_.now(), result_.first_arrival);
    account(end);
    result_.end = end;
    result_.unfinished = replica_.live();
    result_.counters = replica_.counters();
    const Time last = result_.completed > 0 ? result_.last_completion : end;
    result_.duration_s = (last - result_.first_arrival).to_seconds();
    if (result_.duration_s > 0.0) {
      result_.request_throughput = static_cast<double>(result_.completed) / result_.duration_s;
      result_.output_throughput = static_cast<double>(result_.output_tokens) / result_.duration_s;
      result_.total_token_throughput =
          static_cast<double>(result_.input_tokens + result_.output_tokens) / result_.duration_s;
      result_.processed_token_throughput =
          static_cast<double>(result_.counters.prefill_tokens + result_.counters.decode_tokens) / result_.duration_s;
      result_.goodput = static_cast<double>(result_.good_requests) / result_.duration_s;
    }
    const double span = (end - result_.first_arrival).to_seconds();
    result_.kv_utilization_mean = span > 0.0 ? kv_integral_ / span / static_cast<double>(replica_.total_blocks()) : 0.0;
    result_.batch_size_mean = result_.iterations > 0 ? batch_sum_ / static_cast<double>(result_.iterations) : 0.0;
  }

  RequestSource& source_;
  Replica replica_;
  Scheduler& scheduler_;
  const ExecModel& exec_;
  SimOptions options_;
  SimObserver* observer_;
  des::Engine engine_;
  std::optional<Request> pending_;
  SchedulerView view_;
  Batch batch_;
  BatchShape shape_;
  std::vector<SeqId> finished_;
  bool busy_ = false;
  Time iteration_start_;
  Time last_account_;
  Time next_sample_;
  Time interval_;
  double kv_integral_ = 0.0;
  double batch_sum_ = 0.0;
  SimResult result_;
};

}  // namespace

SimResult simulate(RequestSource& source, const ReplicaSpec& spec, const MemoryPlan& plan, Scheduler& scheduler,
                   const ExecModel& exec, const SimOptions& options, SimObserver* observer) {
  Simulation sim(source, spec, plan, scheduler, exec, options, observer);
  return sim.run();
}

}  // namespace orrery::serve
