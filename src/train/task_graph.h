// A rank program as a task graph executed in the event engine: tasks (compute kernels, collectives,
// transfers) of known duration on streams, with dependencies between them.
//
// Model card
//   What: each stream runs one task at a time, as a CUDA stream does. An ordered stream (a compute
//     stream) runs its tasks in program order: the next one starts when it is ready (every dependency
//     done) and the stream is free; filler tasks (zero-bubble weight-gradient passes) may run out of
//     order, whenever the next ordered task is not ready, and the remaining ones run at the end. A FIFO
//     stream (a communication stream) runs its tasks in the order they become ready. A task's
//     duration is fixed when the graph is built (from the compute and communication models), so
//     overlap, waiting and pipeline bubbles come out of the execution.
//   Shared links: a task may name a resource (a rank's network or NVLink egress, one PCIe direction).
//     Tasks of different streams that run at once on one resource share it equally (processor
//     sharing, the max-min fair share of equal flows on one bottleneck): with k of them running, each
//     does its work, measured as its duration alone on the resource, at rate 1/k, and k changes when
//     one starts or ends. Tasks without a resource, and tasks on different resources, do not interact.
//   Determinism: ready tasks are queued in (ready time, task id) order through the engine's total
//     event order; the run is a pure function of the graph.
//   Cost: O(tasks + dependencies) events, each O(log n) in the engine's queue; no allocation per event.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"

namespace orrery::train {

using TaskId = int32_t;
using StreamId = int32_t;

struct Task {
  StreamId stream = 0;
  Time duration;
  bool filler = false;     // ordered streams only: may run out of order to fill idle time
  uint16_t category = 0;   // caller's label (what kind of work), carried to the result
  int32_t label = 0;       // caller's payload (micro-batch, chunk, ...)
  int32_t resource = -1;   // >= 0: the shared resource this task's duration is work on (model card)
};

struct TaskTiming {
  Time ready;  // all dependencies done
  Time start;
  Time end;
};

class TaskGraph {
 public:
  // Streams are created in order; ordered = program-order compute stream.
  StreamId add_stream(bool ordered);
  // Appends a task to its stream (program order for ordered streams). REQUIRES: the stream exists.
  TaskId add(const Task& task);
  // `after` must finish before `task` starts. REQUIRES: both exist, after != task.
  void depend(TaskId task, TaskId after);

  size_t size() const { return tasks_.size(); }
  const Task& task(TaskId id) const { return tasks_[static_cast<size_t>(id)]; }
  size_t num_streams() const { return streams_.size(); }
  // Every depend(task, after) call in order, as (after, task).
  const std::vector<std::pair<TaskId, TaskId>>& dependencies() const { return edges_; }

  // Executes the graph from time zero. Returns one timing per task. Throws std::logic_error when a
  // dependency cycle leaves tasks unfinished (a bug in the graph builder).
  std::vector<TaskTiming> run() const;

 private:
  friend class TaskGraphRun;
  struct StreamInfo {
    bool ordered = false;
    std::vector<TaskId> order;  // ordered streams: program order
  };
  std::vector<Task> tasks_;
  std::vector<StreamInfo> streams_;
  // Dependencies in the order depend() was called: (after, task). A run lays them out by `after`
  // (compressed rows, the order within a row kept), so successors are released in that order.
  std::vector<std::pair<TaskId, TaskId>> edges_;
  std::vector<int32_t> num_deps_;
};

}  // namespace orrery::train
