// Identifiers shared by the network modules (topology, routing, max-min flow network).
// Both are dense indices into a Topology's node and link arrays, assigned 0, 1, 2, ... in the order
// the nodes and links are added; -1 means "none".
#pragma once

#include <cstdint>

namespace orrery::net {

using LinkId = int32_t;
using NodeId = int32_t;

}  // namespace orrery::net
