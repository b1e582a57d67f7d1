// Reference max-min fair solver: the textbook per-round progressive filling, for tests only.
//
// Model card
//   What: the same weighted max-min fair allocation as MaxMinSolver (net/maxmin.h), computed the
//         way Bertsekas & Gallager (Data Networks, 2nd ed., 1992, Sec. 6.5.2) state it: every
//         round, raise all unfrozen flows' rates by w_f * delta, where delta is the largest common
//         increment that keeps every link within capacity and every flow within its cap; then
//         freeze the flows that crossed a saturated link or reached their cap.
//   Equations: delta = min( min over links l with unfrozen flows of
//                               (C_l - sum_f count(f,l) r_f) / (sum_{unfrozen f} count(f,l) w_f),
//                           min over unfrozen capped flows of (cap_f - r_f) / w_f ).
//              A link is saturated when C_l - load_l <= 1e-12 * C_l; a flow is at its cap when
//              cap_f - r_f <= 1e-12 * cap_f.
//   Written for clarity, not speed: O(L + E) per round and at most F + L rounds (each round
//   freezes at least one flow), so O((F + L) * (L + E)). Shares no code with MaxMinSolver: it
//   recomputes loads from scratch each round and accumulates increments rather than levels, so
//   the two compute the answer by different floating-point paths.
#pragma once

#include <vector>

#include "net/maxmin.h"

namespace orrery::net {

// The weighted max-min fair rate of each flow, in the order given. Same semantics as
// MaxMinSolver (counts, weights, caps; a flow with an empty path gets its cap).
// REQUIRES: capacities finite and >= 0; every FlowSpec valid (see maxmin.h); links in range.
std::vector<double> reference_max_min(const std::vector<double>& capacities,
                                      const std::vector<FlowSpec>& flows);

}  // namespace orrery::net
