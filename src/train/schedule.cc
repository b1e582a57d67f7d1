#include "train/schedule.h"

#include <algorithm>
#include <utility>

#include "train/schedule_csv.h"

namespace orrery::train {

std::vector<PipelinePass> pipeline_order(const Plan& plan, int64_t stage) {
  const auto m = static_cast<int32_t>(plan.microbatches());
  const auto p = static_cast<int32_t>(plan.pp);
  const auto s = static_cast<int32_t>(stage);
  std::vector<PipelinePass> out;
  const bool split = plan.splits_backward();
  auto fwd = [&](int32_t mb, int32_t c) { out.push_back({PassKind::kForward, mb, c}); };
  auto bwd = [&](int32_t mb, int32_t c) {
    out.push_back({PassKind::kBackward, mb, c});
    if (split) out.push_back({PassKind::kWeight, mb, c});  // GPipe / interleaved never split
  };
  switch (plan.schedule) {
    case Schedule::kGpipe:
      out.reserve(static_cast<size_t>(2 * m));
      for (int32_t i = 0; i < m; ++i) fwd(i, 0);
      for (int32_t i = 0; i < m; ++i) bwd(i, 0);
      break;
    case Schedule::kOneFOneB:
    case Schedule::kZeroBubble: {
      out.reserve(static_cast<size_t>((split ? 3 : 2) * m));
      const int32_t warm = std::min(p - s - 1, m);
      // ZB-H1: stage s runs the W of micro-batch j after the B of micro-batch j + s (the later stages,
      // whose B passes lead the backward chain, defer more), and the deferred ones at the end.
      int32_t next_w = 0;
      auto bwd_zb = [&](int32_t mb) {
        out.push_back({PassKind::kBackward, mb, 0});
        if (!split) return;
        if (mb - s >= next_w) out.push_back({PassKind::kWeight, next_w++, 0});
      };
      if (plan.ep_a2a_overlap && p == 1 && !split) {
        // Megatron-Core's combined 1F1B without pipelining: F0, then (F i+1 & B i), then the last B.
        out.push_back({PassKind::kForward, 0, 0});
        for (int32_t i = 0; i + 1 < m; ++i) {
          out.push_back({PassKind::kForward, i + 1, 0, false, true});
          out.push_back({PassKind::kBackward, i, 0, false, true});
        }
        out.push_back({PassKind::kBackward, m - 1, 0});
        break;
      }
      for (int32_t i = 0; i < warm; ++i) fwd(i, 0);
      for (int32_t i = 0; i < m - warm; ++i) {
        fwd(warm + i, 0);
        bwd_zb(i);
      }
      for (int32_t i = m - warm; i < m; ++i) bwd_zb(i);
      while (split && next_w < m) out.push_back({PassKind::kWeight, next_w++, 0});
      break;
    }
    case Schedule::kInterleaved: {
      const auto v = static_cast<int32_t>(plan.vp);
      const int32_t total = m * v;
      out.reserve(static_cast<size_t>(2 * total));
      // Megatron-Core's schedule table (get_schedule_table): groups of n micro-batches, each group on
      // chunk 0, then chunk 1, ...; the last group takes what is left. Backward walks the same table
      // with the chunks reversed.
      auto f = [&](int32_t k) { fwd(interleaved_microbatch(plan, k), interleaved_chunk(plan, k)); };
      auto b = [&](int32_t k) { bwd(interleaved_microbatch(plan, k), v - 1 - interleaved_chunk(plan, k)); };
      const auto warm = static_cast<int32_t>(interleaved_warmup(plan, s));
      for (int32_t k = 0; k < warm; ++k) f(k);
      for (int32_t j = 0; j < total - warm; ++j) {  // the steady phase: Megatron-Core's combined 1F1B pairs these
        f(warm + j);
        b(j);
        // A forward and the backward of the same chunk and micro-batch (the last stage's loss chunk at
        // the start of its steady phase) depend on each other: they cannot overlap.
        PipelinePass& fw = out[out.size() - 2];
        if (plan.ep_a2a_overlap && (fw.chunk != out.back().chunk || fw.microbatch != out.back().microbatch)) {
          fw.paired = out.back().paired = true;
        }
      }
      for (int32_t j = total - warm; j < total; ++j) b(j);
      break;
    }
    case Schedule::kInterleavedZeroBubble: {
      // torch.distributed.pipelining's ScheduleInterleavedZeroBubble (_get_1f1b_rank_ops with
      // enable_zero_bubble): the interleaved table in rounds of n = Plan::microbatch_group_size()
      // micro-batches, warm-up (v - 1) n + p - 1 - s forwards, then forward warm + j and B of entry j;
      // from steady step s on each step ends with the W of the oldest B still waiting (entry j - s),
      // the cool-down's B passes likewise, and the W passes left at the end.
      const auto v = static_cast<int32_t>(plan.vp);
      const int32_t total = m * v;
      out.reserve(static_cast<size_t>(3 * total));
      auto f = [&](int32_t k) { fwd(interleaved_microbatch(plan, k), interleaved_chunk(plan, k)); };
      auto pass = [&](PassKind kind, int32_t j) {
        out.push_back({kind, interleaved_microbatch(plan, j), v - 1 - interleaved_chunk(plan, j)});
      };
      auto input = [&](int32_t j) {
        pass(PassKind::kBackward, j);
        if (j >= s) pass(PassKind::kWeight, j - s);
      };
      const auto warm = static_cast<int32_t>(interleaved_warmup(plan, s));
      for (int32_t k = 0; k < warm; ++k) f(k);
      for (int32_t j = 0; j < total - warm; ++j) {
        f(warm + j);
        input(j);
      }
      for (int32_t j = total - warm; j < total; ++j) input(j);
      for (int32_t j = std::max(0, total - s); j < total; ++j) pass(PassKind::kWeight, j);
      break;
    }
    case Schedule::kCustom:
      // The file's order (train/schedule_csv.h), checked against the plan by validate_plan.
      out = plan.custom->order.at(static_cast<size_t>(s));
      break;
    case Schedule::kLoopedBfs: {
      // torch.distributed.pipelining's ScheduleLoopedBFS (Lamy-Poirier 2023, breadth-first): every
      // micro-batch's forward on chunk 0, then on chunk 1, ...; then the backwards, last chunk first,
      // each chunk's micro-batches last first.
      const auto v = static_cast<int32_t>(plan.vp);
      out.reserve(static_cast<size_t>(2 * m * v));
      for (int32_t c = 0; c < v; ++c) {
        for (int32_t i = 0; i < m; ++i) fwd(i, c);
      }
      for (int32_t c = v - 1; c >= 0; --c) {
        for (int32_t i = m - 1; i >= 0; --i) bwd(i, c);
      }
      break;
    }
    case Schedule::kZeroBubbleV: {
      // torch.distributed.pipelining's ScheduleZBVZeroBubble (_calculate_single_rank_operations), with
      // chunk 0 = virtual stage s and chunk 1 = 2p - 1 - s. It lays the order out for
      // n = max(2p - 1, m) micro-batches and drops the passes of micro-batches m and above.
      const int32_t n = std::max(2 * p - 1, m);
      out.reserve(static_cast<size_t>(6 * m));
      int32_t f0 = 0, f1 = 0, b0 = 0, b1 = 0;
      auto put = [&](PassKind kind, int32_t mb, int32_t c) {
        if (mb < m) out.push_back({kind, mb, c});
      };
      auto f = [&](int32_t c) { put(PassKind::kForward, c == 0 ? f0++ : f1++, c); };
      auto bw = [&](int32_t c) {  // B then W of the same micro-batch
        const int32_t mb = c == 0 ? b0++ : b1++;
        put(PassKind::kBackward, mb, c);
        put(PassKind::kWeight, mb, c);
      };
      for (int32_t i = 0; i < 2 * (p - s) - 1; ++i) f(0);  // warm-up: chunk 0 fills the V's first arm
      for (int32_t i = 0; i < s; ++i) {
        f(1);
        f(0);
      }
      for (int32_t i = 0; i < p - s; ++i) {  // the first backwards come back up the second arm
        f(1);
        bw(1);
      }
      while (f1 < f0 || f0 < n) {  // steady: F0 B0 W0 F1 B1 W1
        if (f0 < n) f(0);
        bw(0);
        f(1);
        bw(1);
      }
      int32_t w0 = b0, w1 = b1;  // cool-down: B passes first, the W passes they leave behind at the end
      for (int32_t i = 0; i < s; ++i) {
        put(PassKind::kBackward, b0++, 0);
        put(PassKind::kBackward, b1++, 1);
      }
      for (int32_t i = 0; i < p - s; ++i) {
        put(PassKind::kBackward, b0++, 0);
        put(PassKind::kWeight, w0++, 0);
      }
      while (w1 < b1) put(PassKind::kWeight, w1++, 1);
      while (w0 < b0) put(PassKind::kWeight, w0++, 0);
      break;
    }
    case Schedule::kDualPipeV: {
      // torch.distributed.pipelining's ScheduleDualPipeV (_calculate_single_rank_operations), chunk 0 =
      // virtual stage s, chunk 1 = 2p - 1 - s; m >= 2p (validate_plan).
      out.reserve(static_cast<size_t>(6 * m));
      int32_t f[2] = {0, 0}, b[2] = {0, 0};
      std::vector<std::pair<int32_t, int32_t>> queued;  // split backwards' W passes: (chunk, micro-batch), FIFO
      size_t next_w = 0;
      auto fw = [&](int32_t c, bool paired = false) { out.push_back({PassKind::kForward, f[c]++, c, false, paired}); };
      auto whole = [&](int32_t c, bool paired = false) {  // B and its W as one backward
        out.push_back({PassKind::kBackward, b[c], c, true, paired});
        out.push_back({PassKind::kWeight, b[c]++, c, true, paired});
      };
      auto input = [&](int32_t c) {  // B alone; its W waits in the queue
        out.push_back({PassKind::kBackward, b[c], c});
        queued.emplace_back(c, b[c]++);
      };
      auto weight = [&] {
        if (next_w == queued.size()) return;
        const auto [c, mb] = queued[next_w++];
        out.push_back({PassKind::kWeight, mb, c});
      };
      auto pair = [&](int32_t cf, int32_t cb) {
        fw(cf, true);
        whole(cb, true);
      };
      for (int32_t i = 0; i < 2 * (p - s - 1); ++i) fw(0);
      for (int32_t i = 0; i <= s; ++i) {
        fw(0);
        fw(1);
      }
      for (int32_t i = 0; i < p - s - 1; ++i) {
        input(1);
        weight();
        fw(1);
      }
      for (int32_t i = 0; i < m - 2 * p + s + 1; ++i) {  // the steady pairs
        if (i == 0 && s == p - 1) {  // the V's turn: not overlapped, to shorten the bubble
          fw(0);
          whole(1);
        } else {
          pair(0, 1);
        }
        pair(1, 0);
      }
      for (int32_t i = 0; i < p - s - 1; ++i) {
        whole(1);
        pair(1, 0);
      }
      bool defer = false;  // from the middle of the B1 B0 phase on, the backwards defer their W
      for (int32_t i = 0; i <= s; ++i) {
        if (i == (s + 1) / 2 && s % 2 == 1) defer = true;
        defer ? input(1) : whole(1);
        if (i == (s + 1) / 2 && s % 2 == 0) defer = true;
        defer ? input(0) : whole(0);
      }
      for (int32_t i = 0; i < p - s - 1; ++i) {
        weight();
        defer ? input(0) : whole(0);
      }
      while (next_w < queued.size()) weight();
      break;
    }
  }
  return out;
}

namespace {

// Entry k's group: its first entry, its first micro-batch and its size in micro-batches.
struct TableGroup {
  int64_t first_entry = 0;
  int64_t first_microbatch = 0;
  int64_t size = 0;
};
TableGroup table_group(const Plan& plan, int64_t k) {
  const int64_t m = plan.microbatches(), n = plan.microbatch_group_size(), v = plan.vp;
  const int64_t full = m / n;  // groups of n; a last one of m - full n if that is not 0
  const int64_t g = std::min(k / (n * v), full);
  return TableGroup{g * n * v, g * n, g < full ? n : m - full * n};
}

}  // namespace

int32_t interleaved_chunk(const Plan& plan, int64_t k) {
  const TableGroup g = table_group(plan, k);
  return static_cast<int32_t>((k - g.first_entry) / g.size);
}

int64_t interleaved_count(const Plan& plan, int64_t k, int32_t c) {
  const TableGroup g = table_group(plan, k);
  return g.first_microbatch + std::clamp<int64_t>(k - g.first_entry - c * g.size, 0, g.size);
}

int32_t interleaved_microbatch(const Plan& plan, int64_t k) {
  const TableGroup g = table_group(plan, k);
  return static_cast<int32_t>(g.first_microbatch + (k - g.first_entry) % g.size);
}

int64_t interleaved_warmup(const Plan& plan, int64_t stage) {
  const int64_t total = plan.microbatches() * plan.vp, p = plan.pp;
  // torch's zero-bubble variant warms up one forward per hop instead of two (_get_warmup_ops,
  // multiply_factor 1): its B passes are shorter and its W passes fill the wait.
  const int64_t per_hop = plan.schedule == Schedule::kInterleavedZeroBubble ? 1 : 2;
  return plan.vp == 1 ? std::min(p - stage - 1, total)
                      : std::min(per_hop * (p - stage - 1) + (plan.vp - 1) * plan.microbatch_group_size(), total);
}

}  // namespace orrery::train
