// Network topology: the graph that routes and flows run on.
//
// Model card
//   What      A directed multigraph. Nodes are GPUs, NICs, switches (scale-up NVSwitch/NVLink Switch,
//             leaf, spine, aggregation, core) and hosts (CPU root complex / PCIe switch). Links are
//             one-directional: a full-duplex cable is two links, one per direction, each with its own
//             bandwidth and latency, so traffic in one direction never slows the other.
//   Quantities  bandwidth per link per direction (bytes/s), latency per link (ps, a constant one-way
//             delay: serialization is the flow model's business, not the topology's).
//   Forwarding  A node either forwards traffic (switches, NICs, hosts; GPUs in switchless fabrics such
//             as a TPU torus) or is only an endpoint (GPUs by default: a GPU is not a router). Routes
//             never pass *through* a non-forwarding node. NCCL's PXN relay through a peer GPU is a
//             routing policy that concatenates two routes (net/routing.h), not forwarding.
//   Ranks     GPUs are numbered 0, 1, 2, ... in the order they are added (the rank). Each GPU belongs to
//             a machine (one OS image, a "node" in the hw catalog) and may have a NIC and a rail.
//   Memory    Linear: one TopoNode per node, one TopoLink (32 bytes) per link, and each link id stored
//             once in its source's out-list and once in its destination's in-list.
//   Validity  validate() checks positive bandwidths, non-negative latencies, no self-links, and that
//             every GPU can reach every other GPU through forwarding nodes. Builders
//             (net/topology_builders.h) always return validated topologies.
//   See docs/topology.md for the wiring of each builder and for the defaults and their sources.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "net/ids.h"

namespace orrery::net {

inline constexpr NodeId kNoNode = -1;

enum class NodeKind { kGpu, kNic, kSwitch, kHost };
// kScaleup: NVLink/xGMI/NVSwitch; kPcie: GPU to host or to its NIC; kNetwork: NIC-switch and
// switch-switch fabric (also the GPU's own network port in two_level / spine_leaf).
enum class LinkKind : uint8_t { kScaleup, kPcie, kNetwork };

std::string_view node_kind_name(NodeKind k);  // "gpu", "nic", "switch", "host"
std::string_view link_kind_name(LinkKind k);  // "scaleup", "pcie", "network"

struct TopoNode {
  NodeKind kind = NodeKind::kSwitch;
  std::string name;      // unique by convention ("m3.g5", "leaf.su0.r2"); used in messages
  int32_t rank = -1;     // GPUs: 0, 1, 2, ...; -1 otherwise
  int32_t machine = -1;  // GPUs and per-machine parts (NICs, NVSwitch, host); -1 for shared switches
  int32_t rail = -1;     // GPUs and NICs of rail-optimized fabrics; -1 when not on a rail
  int32_t tier = -1;     // switches: 0 scale-up, 1 leaf, 2 spine/aggregation, 3 core; -1 otherwise
  bool forwards = true;  // may a route pass through this node? false for GPUs unless set otherwise
};

struct TopoLink {
  NodeId src = kNoNode;
  NodeId dst = kNoNode;
  Bandwidth bandwidth;  // per direction (this link is one direction)
  Time latency;
  LinkKind kind = LinkKind::kNetwork;
};

// Not thread-safe to mutate; const member functions may be called concurrently.
class Topology {
 public:
  // Adds a GPU node with the next rank (0, 1, 2, ...). REQUIRES: machine >= 0. forwards = false.
  NodeId add_gpu(std::string name, int32_t machine);
  // Adds a non-GPU node. REQUIRES: kind != kGpu.
  NodeId add_node(NodeKind kind, std::string name);
  // Adds one directed link. REQUIRES: src and dst are existing nodes. Values are checked by validate().
  LinkId add_link(NodeId src, NodeId dst, Bandwidth bw, Time latency, LinkKind kind);
  // Two links, a->b then b->a, with the same bandwidth (per direction) and latency.
  std::pair<LinkId, LinkId> add_duplex(NodeId a, NodeId b, Bandwidth bw, Time latency, LinkKind kind);

  int32_t num_gpus() const { return static_cast<int32_t>(gpus_.size()); }
  size_t num_nodes() const { return nodes_.size(); }
  size_t num_links() const { return links_.size(); }
  // Number of distinct machines that hold at least one GPU.
  int32_t num_machines() const { return num_machines_; }

  // REQUIRES: 0 <= rank < num_gpus().
  NodeId gpu(int32_t rank) const;
  // REQUIRES: a valid id.
  const TopoNode& node(NodeId id) const;
  const TopoLink& link(LinkId id) const;
  std::span<const LinkId> out_links(NodeId id) const;  // in increasing LinkId order
  std::span<const LinkId> in_links(NodeId id) const;   // in increasing LinkId order

  int32_t machine_of(int32_t rank) const;
  // GPUs per machine when every machine that has GPUs has the same number; 0 otherwise (or no GPUs).
  int32_t gpus_per_machine() const;

  // Records that GPU `rank` reaches the fabric through `nic` (kNoNode: none) on `rail` (-1: none);
  // sets the rail on the GPU node and on the NIC node.
  void set_rail(int32_t rank, NodeId nic, int32_t rail);
  NodeId nic_of(int32_t rank) const;    // kNoNode when not set
  int32_t rail_of(int32_t rank) const;  // -1 when not set
  // Whether routes may pass through `id` (see the model card).
  void set_forwards(NodeId id, bool forwards);
  void set_tier(NodeId id, int32_t tier);
  void set_node_rail(NodeId id, int32_t rail);   // for rail switches (GPUs and NICs: set_rail)
  void set_machine(NodeId id, int32_t machine);  // for per-machine non-GPU parts (REQUIRES: not a GPU)

  // Throws InputError at `where` if a link has a non-positive or non-finite bandwidth or a negative
  // latency, or links a node to itself (naming the link by its endpoints), if there are no GPUs, or
  // if some GPU cannot reach another ("topology is disconnected: gpu 'n3.g0' cannot reach gpu
  // 'n0.g0'"). Cost O(nodes + links) per forwarding neighbour of GPU 0 tried as a pivot (one that
  // reaches and is reached by every GPU: its NIC or network switch in every switched fabric); when
  // none is, one search per GPU, O(GPUs x (nodes + links)).
  void validate(const Where& where) const;

  // One line, e.g. "fat-tree 2-tier rail-optimized, 16 x dgx-h100, 128 GPUs, 1:1".
  std::string description;

 private:
  std::string link_name(LinkId id) const;  // "'a' -> 'b'"
  // Nodes reachable from `from` (forward = true) or that reach `from` (forward = false), passing only
  // through forwarding nodes; `from` itself is always an endpoint, never an intermediate.
  std::vector<uint8_t> reach(NodeId from, bool forward) const;
  void check_pair_connectivity(const Where& where) const;

  std::vector<TopoNode> nodes_;
  std::vector<TopoLink> links_;
  std::vector<std::vector<LinkId>> out_;
  std::vector<std::vector<LinkId>> in_;
  std::vector<NodeId> gpus_;                      // by rank
  std::vector<NodeId> gpu_nic_;                   // by rank
  std::map<int32_t, int32_t> machine_gpu_count_;  // machine id -> GPUs (ids may be sparse)
  int32_t num_machines_ = 0;
};

}  // namespace orrery::net
