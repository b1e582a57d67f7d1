#include "train/schedule.h"

#include <algorithm>
#include <utility>

namespace orrery::train {

std::vector<PipelinePass> pipeline_order(const Plan& plan, int64_t stage) {
  const auto m = static_cast<int32_t>(plan.microbatches());
  const auto p = static_cast<int32_t>(plan.pp);
  const auto s = static_cast<int32_t>(stage);
  std::vector<PipelinePass> out;
  const bool split = plan.schedule == Schedule::kZeroBubble;
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
      const auto n = static_cast<int32_t>(plan.microbatch_group_size());
      std::vector<std::pair<int32_t, int32_t>> table;  // (micro-batch, chunk)
      table.reserve(static_cast<size_t>(total));
      for (int32_t lo = 0; lo < m; lo += n) {
        const int32_t hi = lo + n >= m ? m : lo + n;
        for (int32_t c = 0; c < v; ++c) {
          for (int32_t mb = lo; mb < hi; ++mb) table.emplace_back(mb, c);
        }
      }
      auto f = [&](int32_t k) { fwd(table[static_cast<size_t>(k)].first, table[static_cast<size_t>(k)].second); };
      auto b = [&](int32_t k) { bwd(table[static_cast<size_t>(k)].first, v - 1 - table[static_cast<size_t>(k)].second); };
      const int32_t warm = v == 1 ? std::min(p - s - 1, total) : std::min(2 * (p - s - 1) + (v - 1) * n, total);
      for (int32_t k = 0; k < warm; ++k) f(k);
      for (int32_t j = 0; j < total - warm; ++j) {
        f(warm + j);
        b(j);
      }
      for (int32_t j = total - warm; j < total; ++j) b(j);
      break;
    }
  }
  return out;
}

}  // namespace orrery::train
