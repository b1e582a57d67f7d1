// Machine-shift symmetry of a topology, for symmetric ("quotient") simulation.
//
// Model card
//   What: many clusters look the same from every machine: shifting every machine-local node (GPUs,
//         NVSwitch, NICs, host) from machine m to machine m + s (mod M), and keeping shared switches
//         in place, maps the topology onto itself. When a collective is equivariant under the same
//         shift of ranks (rank r -> r + s*g), every translate of a flow behaves exactly like the flow,
//         so it suffices to simulate the ranks of s machines: each simulated flow stands for its whole
//         orbit of k = M/s translates, and on each orbit of links (all with equal capacity) it counts
//         once per link of that orbit on its path. Max-min fairness on this quotient network (net/maxmin.h
//         with per-link counts) gives exactly the rates of the full network.
//   Assumptions: the shift is an automorphism (checked link by link: endpoints, kind, bandwidth and
//         latency); routes of shifted pairs are shifted routes (true when routing has no ECMP choice that
//         depends on the node ids, e.g. a single switch per tier; with ECMP the quotient gives the
//         symmetric average, not the hash-specific collisions).
//   Cost: O(nodes + links) to build; the simulation then costs about 1/k of the full one.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "net/ids.h"
#include "net/topology.h"

namespace orrery::net {

struct LinkOrbits {
  int32_t machine_shift = 0;  // s
  int32_t rank_period = 0;    // p = s * gpus_per_machine: ranks [0, p) represent everyone
  int32_t translates = 0;     // k = machines / s
  std::vector<LinkId> representative;  // per link: the orbit's representative (smallest id)
  std::vector<int32_t> orbit_size;     // per link: size of its orbit (divides translates)
  // A simulated flow crossing link l stands for `translates` flows, of which translates/orbit_size
  // cross each member of l's orbit: its count on the representative link.
  int32_t weight(LinkId l) const { return translates / orbit_size[static_cast<size_t>(l)]; }
};

// The orbits of the shift by `machine_shift` machines, or nullopt when that shift is not an
// automorphism (or the topology's machines are not uniform, or the shift does not divide the machine
// count). REQUIRES: machine_shift >= 1.
std::optional<LinkOrbits> machine_shift_orbits(const Topology& topo, int32_t machine_shift);

// The smallest machine shift that is an automorphism and divides the machine count (1, 2, ...,
// machines), or nullopt. A shift of all machines (the identity) is not a symmetry worth using.
std::optional<LinkOrbits> find_machine_symmetry(const Topology& topo);

}  // namespace orrery::net
