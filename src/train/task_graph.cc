#include "train/task_graph.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/assert.h"
#include "des/engine.h"

namespace orrery::train {

StreamId TaskGraph::add_stream(bool ordered) {
  streams_.push_back(StreamInfo{ordered, {}});
  return static_cast<StreamId>(streams_.size() - 1);
}

TaskId TaskGraph::add(const Task& task) {
  ORRERY_CHECK(task.stream >= 0 && static_cast<size_t>(task.stream) < streams_.size());
  ORRERY_CHECK(task.duration >= Time::zero());
  const auto id = static_cast<TaskId>(tasks_.size());
  tasks_.push_back(task);
  num_deps_.push_back(0);
  StreamInfo& s = streams_[static_cast<size_t>(task.stream)];
  if (s.ordered && !task.filler) s.order.push_back(id);
  return id;
}

void TaskGraph::depend(TaskId task, TaskId after) {
  ORRERY_CHECK(task != after && task >= 0 && after >= 0 && static_cast<size_t>(task) < tasks_.size() &&
               static_cast<size_t>(after) < tasks_.size());
  edges_.emplace_back(after, task);
  ++num_deps_[static_cast<size_t>(task)];
}

// The mutable state of one execution.
class TaskGraphRun final : public des::EventHandler {
 public:
  explicit TaskGraphRun(const TaskGraph& g)
      : g_(g), deps_(g.num_deps_), timing_(g.tasks_.size()), streams_(g.streams_.size()), ready_flag_(g.tasks_.size(), 0) {
    // Successors as compressed rows: a counting sort of the edges by `after`, stable.
    const size_t n = g.tasks_.size();
    first_succ_.assign(n + 1, 0);
    for (const auto& [after, task] : g.edges_) ++first_succ_[static_cast<size_t>(after) + 1];
    for (size_t i = 0; i < n; ++i) first_succ_[i + 1] += first_succ_[i];
    succ_.resize(g.edges_.size());
    std::vector<int32_t> fill(first_succ_.begin(), first_succ_.end() - 1);
    for (const auto& [after, task] : g.edges_) succ_[static_cast<size_t>(fill[static_cast<size_t>(after)]++)] = task;
    int32_t resources = 0;
    for (const Task& t : g.tasks_) resources = std::max(resources, t.resource + 1);
    if (resources > 0) {
      resources_.resize(static_cast<size_t>(resources));
      target_.assign(g.tasks_.size(), 0.0);
      pending_.resize(g.tasks_.size());
    }
  }

  std::vector<TaskTiming> run() {
    for (size_t i = 0; i < g_.tasks_.size(); ++i) {
      if (deps_[i] == 0) make_ready(static_cast<TaskId>(i));
    }
    for (size_t s = 0; s < streams_.size(); ++s) try_start(static_cast<StreamId>(s));
    engine_.run();
    if (finished_ != g_.tasks_.size()) throw std::logic_error("task graph has a dependency cycle");
    return std::move(timing_);
  }

  void on_event(des::Engine& engine, uint64_t tag) override {
    const auto id = static_cast<TaskId>(tag);
    const Task& t = g_.tasks_[static_cast<size_t>(id)];
    timing_[static_cast<size_t>(id)].end = engine.now();
    if (t.resource >= 0) {
      ResourceState& r = resources_[static_cast<size_t>(t.resource)];
      advance(r);
      r.active.erase(std::find(r.active.begin(), r.active.end(), id));
      reschedule(r);
    }
    ++finished_;
    streams_[static_cast<size_t>(t.stream)].busy = false;
    for (int32_t e = first_succ_[static_cast<size_t>(id)]; e < first_succ_[static_cast<size_t>(id) + 1]; ++e) {
      const TaskId s = succ_[static_cast<size_t>(e)];
      if (--deps_[static_cast<size_t>(s)] == 0) {
        make_ready(s);
        try_start(g_.tasks_[static_cast<size_t>(s)].stream);
      }
    }
    try_start(t.stream);
  }

 private:
  struct StreamState {
    bool busy = false;
    size_t pos = 0;                // ordered: next program-order task
    std::vector<TaskId> queue;     // FIFO: ready tasks; ordered: ready fillers
    size_t head = 0;
  };

  void make_ready(TaskId id) {
    timing_[static_cast<size_t>(id)].ready = engine_.now();
    ready_flag_[static_cast<size_t>(id)] = 1;
    const Task& t = g_.tasks_[static_cast<size_t>(id)];
    StreamState& s = streams_[static_cast<size_t>(t.stream)];
    if (!g_.streams_[static_cast<size_t>(t.stream)].ordered || t.filler) s.queue.push_back(id);
  }

  // A resource's progress: every running task on it has done v units of work (ps of its duration
  // alone) since v was 0; v grows at 1/k per ps while k tasks run.
  struct ResourceState {
    double v = 0.0;
    Time last;
    std::vector<TaskId> active;  // in start order
  };

  void advance(ResourceState& r) {
    const Time now = engine_.now();
    if (!r.active.empty()) {
      r.v += static_cast<double>((now - r.last).picoseconds()) / static_cast<double>(r.active.size());
    }
    r.last = now;
  }

  // Re-times the completion of every task running on r for the current share 1/k.
  void reschedule(ResourceState& r) {
    const auto k = static_cast<double>(r.active.size());
    for (TaskId id : r.active) {
      des::EventId& e = pending_[static_cast<size_t>(id)];
      if (e.valid()) engine_.cancel(e);
      const double left = std::max(0.0, target_[static_cast<size_t>(id)] - r.v);
      e = engine_.schedule_after(Time::ps(static_cast<int64_t>(std::ceil(left * k))), this, static_cast<uint64_t>(id));
    }
  }

  void start(StreamState& s, TaskId id) {
    s.busy = true;
    timing_[static_cast<size_t>(id)].start = engine_.now();
    const Task& t = g_.tasks_[static_cast<size_t>(id)];
    if (t.resource < 0) {
      engine_.schedule_after(t.duration, this, static_cast<uint64_t>(id));
      return;
    }
    ResourceState& r = resources_[static_cast<size_t>(t.resource)];
    advance(r);
    target_[static_cast<size_t>(id)] = r.v + static_cast<double>(t.duration.picoseconds());
    r.active.push_back(id);
    reschedule(r);
  }

  void try_start(StreamId sid) {
    StreamState& s = streams_[static_cast<size_t>(sid)];
    if (s.busy) return;
    const auto& info = g_.streams_[static_cast<size_t>(sid)];
    if (info.ordered && s.pos < info.order.size()) {
      const TaskId head = info.order[s.pos];
      if (ready_flag_[static_cast<size_t>(head)] != 0) {
        ++s.pos;
        start(s, head);
        return;
      }
    }
    // FIFO streams; ordered streams whose next task is not ready (or that are done): a ready filler.
    if (s.head < s.queue.size()) {
      const TaskId id = s.queue[s.head++];
      start(s, id);
    }
  }

  const TaskGraph& g_;
  std::vector<int32_t> first_succ_;  // task i's successors: succ_[first_succ_[i] .. first_succ_[i+1])
  std::vector<TaskId> succ_;
  des::Engine engine_;
  std::vector<int32_t> deps_;
  std::vector<TaskTiming> timing_;
  std::vector<StreamState> streams_;
  std::vector<uint8_t> ready_flag_;
  size_t finished_ = 0;
  std::vector<ResourceState> resources_;
  std::vector<double> target_;          // per task on a resource: the v at which its work is done
  std::vector<des::EventId> pending_;   // per task on a resource: its completion event
};

std::vector<TaskTiming> TaskGraph::run() const {
  TaskGraphRun r(*this);
  return r.run();
}

}  // namespace orrery::train
