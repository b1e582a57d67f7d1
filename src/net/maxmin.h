// Max-min fair bandwidth sharing: the rate solver of the flow-level network model.
//
// Model card
//   What: flows cross links of fixed capacity; the solver gives every flow the rate it receives
//         under weighted max-min fairness (Bertsekas & Gallager, Data Networks, 2nd ed., 1992,
//         Sec. 6.5.2). A rate vector r is max-min fair when no flow's rate can be raised without
//         lowering the rate of a flow whose (normalised) rate is already no larger.
//   Equations: link l of capacity C_l (bytes/s) constrains
//                  sum over flows f on l of  count(f,l) * r_f  <=  C_l,
//              and flow f has a cap 0 < cap_f <= inf and a weight w_f > 0. Progressive filling
//              raises a common level t from 0, with every unfrozen flow at r_f = w_f * t. Link l
//              saturates at t_l = (C_l - frozen load on l) / (sum over unfrozen f on l of
//              count(f,l) * w_f); a flow's cap is reached at t = cap_f / w_f. At the smallest such
//              level the saturated link's flows (or the capped flow) freeze; repeat until all are
//              frozen. The result is the unique weighted max-min fair vector: every flow either is
//              at its cap or has a saturated bottleneck link on which r_f / w_f is the largest.
//   count: a flow may stand for a class of symmetric flows in a reduced ("quotient") network, in
//              which one representative link stands for a class of equivalent links. If each of
//              the |F| members of a flow class crosses m links of a link class of size |L|, then by
//              symmetry every link of the class carries |F|*m/|L| of them (a member counted once
//              per crossing), and the representative constraint is count * r <= C with
//              count = |F|*m/|L| (an integer >= 1). In an ordinary network count = 1. A link
//              listed twice in one path counts as the sum of the two counts.
//   Caps: an injection limit (NIC, host, or a rate-limited sender) freezes the flow at cap_f; it
//              acts as a private virtual link of capacity cap_f.
//   Capacity changes: set_capacity models a link slowing down or failing; capacity 0 gives every
//              flow crossing the link rate exactly 0.
//   Incremental solution: flows that (transitively) share no link are independent, so solve()
//              re-runs progressive filling only on the connected components of the bipartite
//              flow-link graph touched since the previous solve(); other flows keep their rates.
//   Complexity: solve() costs O(F_c + L_c + E_c + U log L_c + K log K) for the touched
//              components, with F_c flows, L_c links, E_c (flow, link) incidences, U <= E_c
//              saturation-level updates (one per link touched by each event, not per incidence),
//              K capped flows; for bounded path length that is O((F_c + L_c) log L_c). Links
//              live in an indexed heap of at most L_c entries. add_flow and remove_flow are
//              O(path length); set_capacity is O(1). solve() allocates nothing once its scratch
//              vectors have grown.
//   Numerics: a link saturates when its event is popped, not when a running remainder reaches 0,
//              so no tolerance decides saturation (a remainder test such as "remaining <= eps" is
//              what needs one). Levels are absolute (t, not increments), so rounding does not
//              accumulate across rounds; a level computed after a freeze is clamped to be no
//              lower than the current level, so rounding at a tie cannot move the filling
//              backwards. Mathematically a positive-capacity link always has a positive level, so
//              a rate is 0 only behind a zero-capacity link, and then exactly 0 (0 / W). No
//              relative epsilon merges near-equal levels either: merging would make one
//              component's rates depend on the levels of another solved in the same call. Results
//              agree with the textbook per-round algorithm (maxmin_reference.h) to about 1e-13
//              relative. Ties are broken by kind (caps before links), then FlowId / LinkId; the
//              rates of a component are a function of its current flows (in incidence order),
//              capacities and weights only, so the same calls give bit-identical results however
//              often solve() ran in between.
//   Assumptions: fluid flows (no packets, no protocol dynamics: TCP/RoCE converge to roughly
//              max-min shares only over many RTTs); capacities and rates are constant between
//              calls to solve().
//   Contracts: the REQUIRES of the mutators (add_link, add_flow, remove_flow, set_capacity) are
//              checked in every build (ORRERY_CHECK, cheap beside the work they do); those of the
//              accessors only where ORRERY_ASSERT is on (Debug, sanitizers).
//   Thread safety: none; one solver per simulation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace orrery::net {

using LinkId = int32_t;
using FlowId = int32_t;

// One link of a flow's path. REQUIRES: count >= 1.
struct LinkUse {
  LinkId link;
  int32_t count = 1;
};

// A flow's static description. REQUIRES: weight > 0 and finite; rate_cap > 0 (may be infinite);
// the path is non-empty or the cap is finite (a flow with an empty path gets its cap).
struct FlowSpec {
  std::vector<LinkUse> path;
  double weight = 1.0;
  double rate_cap = std::numeric_limits<double>::infinity();
};

class MaxMinSolver {
 public:
  MaxMinSolver() = default;
  // Links 0 .. capacities.size()-1. REQUIRES: every capacity finite and >= 0 (bytes/s).
  explicit MaxMinSolver(std::vector<double> capacities);

  // Appends a link with no flows and returns its id. REQUIRES: 0 <= capacity < inf.
  LinkId add_link(double capacity);

  // Adds a flow; its rate is 0 until the next solve(), which reports it as changed. O(path).
  // FlowIds of removed flows are reused, most recently removed first.
  // REQUIRES: spec valid (see FlowSpec); every link in the path exists.
  FlowId add_flow(FlowSpec spec);

  // Removes an active flow; the flows that shared its links are re-solved by the next solve().
  // O(path). REQUIRES: active(id).
  void remove_flow(FlowId id);

  // Changes a link's capacity (0 = link down). REQUIRES: link exists, 0 <= capacity < inf.
  void set_capacity(LinkId link, double capacity);

  // Re-solves the connected components touched since the last call (by add_flow, remove_flow,
  // set_capacity). Returns the active flows whose rate changed (bitwise), plus every flow added
  // since the last call, in increasing FlowId order. The reference stays valid until the next
  // non-const call.
  const std::vector<FlowId>& solve();

  // The flow's rate (bytes/s) as of the last solve(); 0 for a flow added since. REQUIRES: active(id).
  double rate(FlowId id) const;
  bool active(FlowId id) const;
  double weight(FlowId id) const;    // REQUIRES: active(id).
  double rate_cap(FlowId id) const;  // REQUIRES: active(id).

  size_t num_flows() const { return num_active_; }  // active flows
  size_t num_links() const { return links_.size(); }
  // One past the largest FlowId ever handed out (for sizing per-flow arrays).
  size_t flow_id_bound() const { return flows_.size(); }

  double capacity(LinkId link) const;  // REQUIRES: link exists.
  // Sum of count * rate over the flows on the link, as of the last solve(). REQUIRES: link exists.
  double link_load(LinkId link) const;

  // Flows and links the last solve() visited (the touched components), for tests and benchmarks.
  size_t last_solve_flows() const { return last_solve_flows_; }
  size_t last_solve_links() const { return last_solve_links_; }

 private:
  // A flow's use of one link, with its position in that link's incidence list (for O(1) removal).
  struct PathEntry {
    LinkId link;
    int32_t count;
    int32_t slot;
  };
  // One entry of a link's incidence list, pointing back at the flow's path entry. Carries
  // count * weight so that a link's total weight is summed without visiting its flows.
  struct Incidence {
    FlowId flow;
    int32_t path_index;
    double count_weight;
  };
  struct Flow {
    std::vector<PathEntry> path;
    double weight = 1.0;
    double rate_cap = 0.0;
    double rate = 0.0;      // as of the last solve()
    double new_rate = 0.0;  // scratch of solve()
    uint32_t seen = 0;      // epoch of the last search that reached it
    bool active = false;
    bool fresh = false;     // added since the last solve(): always reported as changed
    bool frozen = false;    // scratch of solve()
    bool changed = false;   // scratch of solve(): to be reported
  };
  // Everything solve() touches for one link, in one cache line.
  struct Link {
    double capacity = 0.0;
    double load = 0.0;             // sum of count * rate, as of the last solve()
    double frozen_load = 0.0;      // scratch: sum of count * rate of frozen flows
    double unfrozen_weight = 0.0;  // scratch: sum of count * weight of unfrozen flows
    double level = 0.0;            // scratch: the level at which the link saturates
    int32_t unfrozen_count = 0;    // scratch: unfrozen incidences
    int32_t heap_pos = -1;         // scratch: index in heap_, or -1
    uint32_t seen = 0;             // epoch of the last search that reached it
    bool dirty = false;            // changed since the last solve()
    bool touched = false;          // scratch: level to be recomputed after the current event
  };
  // A heap entry: a link and its saturation level, or a capped flow and its cap level.
  struct Event {
    double level;
    int32_t id;
  };
  // The order of events: by level, ties by id, so the order never depends on insertion order.
  static bool before(const Event& a, const Event& b) {
    return a.level < b.level || (a.level == b.level && a.id < b.id);
  }

  void mark_link_dirty(LinkId link);
  void next_epoch();
  void collect_components();
  void progressive_fill();
  void freeze(FlowId flow, double rate);
  void update_touched_links(double level);
  void heap_sift_up(size_t pos);
  void heap_sift_down(size_t pos);
  void heap_place(size_t pos, Event e);

  // Persistent state.
  std::vector<Link> links_;
  std::vector<std::vector<Incidence>> on_link_;  // per link
  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  size_t num_active_ = 0;
  std::vector<LinkId> dirty_links_;  // since the last solve()
  std::vector<FlowId> dirty_flows_;  // flows with an empty path, which no link leads to

  // Scratch for solve(), grown as needed and reused. Marks use an epoch so nothing is cleared.
  uint32_t epoch_ = 0;
  std::vector<LinkId> comp_links_;
  std::vector<FlowId> comp_flows_;
  std::vector<Event> heap_;       // links with unfrozen flows, a 4-ary min-heap by before()
  std::vector<Event> cap_events_; // capped flows, sorted by before()
  std::vector<LinkId> touched_;   // links whose level changed in the current event
  std::vector<FlowId> changed_;
  size_t last_solve_flows_ = 0;
  size_t last_solve_links_ = 0;
};

}  // namespace orrery::net
