#include "serve/sched_stages.h"

#include <algorithm>

#include "core/assert.h"

namespace orrery::serve {

namespace {
int64_t stage_of(const Seq& s) { return s.in_prefill() ? 0 : s.generated; }
}  // namespace

std::deque<SeqId>& StageQueues::queue(int32_t group, int64_t stage) {
  auto& g = q_[static_cast<size_t>(group)];
  if (static_cast<size_t>(stage) >= g.size()) g.resize(static_cast<size_t>(stage) + 1);
  return g[static_cast<size_t>(stage)];
}

int64_t StageQueues::count(int32_t group, int64_t stage) const {
  const auto& g = q_[static_cast<size_t>(group)];
  return static_cast<size_t>(stage) < g.size() ? static_cast<int64_t>(g[static_cast<size_t>(stage)].size()) : 0;
}

bool StageQueues::admission_blocked(const Replica& r, int32_t group) const {
  const auto& g = q_[static_cast<size_t>(group)];
  if (g.empty() || g[0].empty()) return false;
  const Seq& s = r.seq(g[0].front());
  const int64_t hold = memory_ == MemoryPolicy::kReserve ? s.req.prompt_tokens + s.req.output_tokens : s.prefill_target;
  return r.allocatable_blocks() - r.blocks_for(s, hold) < r.watermark_blocks();
}

void StageQueues::add_waiting(Replica& r, SeqId id, int32_t group) {
  r.seq(id).tag = group;
  queue(group, 0).push_back(id);
  ++totals_[static_cast<size_t>(group)];
  ++held_;
  ++waiting_;
}

bool StageQueues::evict_one(Replica& r) {
  if (resident_.empty()) return false;
  const SeqId victim = std::prev(resident_.end())->second;
  resident_.erase(std::prev(resident_.end()));
  Seq& v = r.seq(victim);
  auto& from = queue(v.tag, stage_of(v));
  from.erase(std::find(from.begin(), from.end(), victim));
  r.preempt_recompute(victim);
  queue(v.tag, 0).push_front(victim);
  ++waiting_;
  ++evictions_;
  return true;
}

int64_t StageQueues::take(Replica& r, int32_t group, int64_t stage, int64_t n, Batch& batch) {
  if (static_cast<size_t>(stage) >= q_[static_cast<size_t>(group)].size()) return 0;
  int64_t taken = 0;
  while (taken < n) {
    auto& q = queue(group, stage);
    if (q.empty()) break;
    const SeqId id = q.front();
    Seq& s = r.seq(id);
    if (stage == 0) {
      r.attach_prefix(id);
      const int64_t hold = memory_ == MemoryPolicy::kReserve ? s.req.prompt_tokens + s.req.output_tokens : s.prefill_target;
      if (!r.reserve(id, hold, r.watermark_blocks())) break;
      s.state = SeqState::kRunning;
      s.admit_order = next_admit_++;
      --waiting_;
    } else {
      bool ok = true;
      while (!r.grow(id, 1, 0)) {
        resident_.erase({s.admit_order, id});  // never evict the request being placed
        const bool evicted = evict_one(r);
        resident_.insert({s.admit_order, id});
        if (!evicted) {
          ok = false;
          break;
        }
      }
      if (!ok) break;
      resident_.erase({s.admit_order, id});
    }
    queue(group, stage).pop_front();
    batch.items.push_back({id, s.pending()});
    in_flight_.emplace_back(id, group);
    ++taken;
  }
  return taken;
}

void StageQueues::on_iteration_end(Replica& r, const std::vector<SeqId>& finished) {
  (void)finished;
  for (const auto& [id, g] : in_flight_) {
    Seq& s = r.seq(id);
    if (s.state == SeqState::kFinished) {
      --totals_[static_cast<size_t>(g)];
      --held_;
      continue;
    }
    resident_.insert({s.admit_order, id});
    queue(g, stage_of(s)).push_back(id);
  }
  in_flight_.clear();
}

}  // namespace orrery::serve
