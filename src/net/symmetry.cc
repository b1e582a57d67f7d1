#include "net/symmetry.h"

#include <algorithm>

namespace orrery::net {

std::optional<LinkOrbits> machine_shift_orbits(const Topology& topo, int32_t s) {
  const int32_t machines = topo.num_machines();
  const int32_t g = topo.gpus_per_machine();
  if (s < 1 || machines < 2 || g <= 0 || machines % s != 0 || s == machines) return std::nullopt;
  // Machine-local nodes by machine, in id order; every machine must have the same kinds in order.
  std::vector<std::vector<NodeId>> local(static_cast<size_t>(machines));
  for (size_t v = 0; v < topo.num_nodes(); ++v) {
    const int32_t m = topo.node(static_cast<NodeId>(v)).machine;
    if (m >= 0) local[static_cast<size_t>(m)].push_back(static_cast<NodeId>(v));
  }
  for (const auto& l : local) {
    if (l.size() != local[0].size()) return std::nullopt;
    for (size_t i = 0; i < l.size(); ++i) {
      if (topo.node(l[i]).kind != topo.node(local[0][i]).kind) return std::nullopt;
    }
  }
  std::vector<int32_t> index_in_machine(topo.num_nodes(), -1);
  for (const auto& l : local) {
    for (size_t i = 0; i < l.size(); ++i) index_in_machine[static_cast<size_t>(l[i])] = static_cast<int32_t>(i);
  }
  auto shift_node = [&](NodeId v) -> NodeId {
    const int32_t m = topo.node(v).machine;
    if (m < 0) return v;
    return local[static_cast<size_t>((m + s) % machines)][static_cast<size_t>(index_in_machine[static_cast<size_t>(v)])];
  };
  // GPU ranks must shift by s*g (rank order is machine-major in every builder; check it).
  for (int32_t r = 0; r < topo.num_gpus(); ++r) {
    const NodeId shifted = shift_node(topo.gpu(r));
    if (topo.node(shifted).rank != (r + s * g) % topo.num_gpus()) return std::nullopt;
  }
  // Link map: the j-th parallel link u->v maps to the j-th parallel link shift(u)->shift(v).
  const size_t L = topo.num_links();
  std::vector<LinkId> shift_link(L, -1);
  for (size_t l = 0; l < L; ++l) {
    const TopoLink& a = topo.link(static_cast<LinkId>(l));
    int32_t parallel_index = 0;
    for (LinkId o : topo.out_links(a.src)) {
      if (o == static_cast<LinkId>(l)) break;
      if (topo.link(o).dst == a.dst) ++parallel_index;
    }
    const NodeId su = shift_node(a.src);
    const NodeId sv = shift_node(a.dst);
    int32_t seen = 0;
    for (LinkId o : topo.out_links(su)) {
      const TopoLink& b = topo.link(o);
      if (b.dst != sv) continue;
      if (seen++ != parallel_index) continue;
      if (b.kind != a.kind || b.bandwidth != a.bandwidth || b.latency != a.latency) return std::nullopt;
      shift_link[l] = o;
      break;
    }
    if (shift_link[l] < 0) return std::nullopt;
  }
  LinkOrbits orbits;
  orbits.machine_shift = s;
  orbits.rank_period = s * g;
  orbits.translates = machines / s;
  orbits.representative.assign(L, -1);
  orbits.orbit_size.assign(L, 0);
  std::vector<LinkId> members;
  for (size_t l = 0; l < L; ++l) {
    if (orbits.representative[l] >= 0) continue;
    members.clear();
    LinkId cur = static_cast<LinkId>(l);
    do {
      members.push_back(cur);
      cur = shift_link[static_cast<size_t>(cur)];
    } while (cur != static_cast<LinkId>(l) && members.size() <= L);
    const LinkId rep = *std::min_element(members.begin(), members.end());
    for (LinkId m : members) {
      orbits.representative[static_cast<size_t>(m)] = rep;
      orbits.orbit_size[static_cast<size_t>(m)] = static_cast<int32_t>(members.size());
    }
  }
  return orbits;
}

std::optional<LinkOrbits> find_machine_symmetry(const Topology& topo) {
  const int32_t machines = topo.num_machines();
  for (int32_t s = 1; s < machines; ++s) {
    if (machines % s != 0) continue;
    if (auto o = machine_shift_orbits(topo, s)) return o;
  }
  return std::nullopt;
}

}  // namespace orrery::net
