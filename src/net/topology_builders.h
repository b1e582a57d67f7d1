// Builders of common GPU-cluster topologies, and a plain-text edge-list reader.
//
// Model card
//   What      Each builder turns a small spec (strong units) into a validated Topology. The exact
//             wiring, node names and link latencies of each are in docs/topology.md, with a picture.
//             two_level        M machines x G GPUs; one NVSwitch per machine; every GPU's own network
//                              port on one non-blocking network switch (the ASTRA-sim 2-level network).
//             fat_tree         machines with NICs under a 2-tier (leaf-spine) or 3-tier (pods of
//                              leaf + aggregation, core on top) Clos of radix-k switches, rail-optimized
//                              or not, with leaf oversubscription r:1.
//             spine_leaf       the plain 2-tier Clos of single-GPU hosts.
//             torus            2-D or 3-D wraparound torus of GPUs (TPU ICI), no switches.
//             nvswitch_domain  N GPUs on one scale-up switch (GB200 NVL72).
//             from_catalog     a catalog node type x machine count, wired as a fat tree.
//   Latency   Where a spec gives a GPU-to-GPU latency through a switch (two_level, nvswitch_domain,
//             FabricLatencies::scaleup) each of the two links carries half of it (the up-link the
//             odd picosecond), so a one-switch route has exactly that latency. Other latencies are per
//             link. Defaults of FabricLatencies follow NCCL's own latency model (NVIDIA/nccl
//             src/graph/tuning.cc, hwLat, Ring/LL: NVLink 0.47 us, PCI 1.0 us, NET 2.7 us per step)
//             and are assumptions, not measurements of a particular machine.
//   Errors    Invalid specs throw InputError at where.with_key(<field>), e.g. "oversubscription".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "hw/hw_catalog.h"
#include "net/topology.h"

namespace orrery::net {

// two_level: inside a machine GPU -> NVSwitch -> GPU; between machines GPU -> network switch -> GPU.
struct TwoLevelSpec {
  int32_t machines = 0;
  int32_t gpus_per_machine = 0;
  Bandwidth scaleup_bandwidth;  // per GPU, per direction (GPU <-> NVSwitch links)
  Time scaleup_latency;         // GPU to GPU through the NVSwitch (half on each link)
  Bandwidth network_bandwidth;  // per GPU, per direction (GPU <-> network switch links)
  Time network_latency;         // GPU to GPU through the network switch (half on each link)
};
Topology two_level(const TwoLevelSpec& spec, const Where& where = {});

// Latencies of a machine-and-fabric topology (fat_tree, from_catalog). See docs/topology.md.
struct FabricLatencies {
  // GPU to GPU through the scale-up switch (half per link), or over one direct mesh/pair link.
  // NCCL hwLat NVLink Ring/LL = 0.47 us.
  Time scaleup = Time::ns(470);
  // GPU <-> host link (a GPU-host-GPU route costs twice this). NCCL hwLat PCI Ring/LL = 1.0 us.
  Time pcie = Time::ns(500);
  // GPU <-> NIC link, NIC processing and PCIe included. 1.2 us, so that a same-leaf route GPU-NIC-
  // leaf-NIC-GPU costs 2 x 1.2 + 2 x 0.15 = 2.7 us = NCCL hwLat NET Ring/LL.
  Time nic = Time::ns(1200);
  // Each NIC-switch and switch-switch link: one switch traversal plus cable. 150 ns is an assumption
  // (InfiniBand switch port-to-port latencies are quoted at 100-200 ns; no vendor figure in catalog).
  Time network = Time::ns(150);
};

struct FatTreeSpec {
  int32_t machines = 0;
  int32_t gpus_per_machine = 8;
  int32_t nics_per_machine = 0;   // 0: one per GPU. GPU i uses NIC i mod nics_per_machine (= its rail).
  int32_t tiers = 2;              // 2: leaf-spine; 3: pods of leaf + aggregation, core on top
  int32_t radix = 64;             // switch ports (NVIDIA Quantum-2 QM9700: 64 x 400 Gb/s)
  double oversubscription = 1.0;  // leaf downlink : uplink capacity = r : 1, r >= 1
  bool rail_optimized = true;
  Bandwidth nic_bandwidth;   // per NIC per direction = switch port speed
  Bandwidth pcie_bandwidth;  // GPU <-> NIC and GPU <-> host links, per direction
  // Scale-up inside the machine: kNvswitch (one switch per scale-up domain), kXgmiMesh (a direct
  // link between every GPU pair at scaleup_bandwidth / (G - 1)), kNvlinkPairs (GPU 2i <-> 2i+1 at
  // scaleup_bandwidth, other pairs via the host), kPcie (all via the host at pcie_bandwidth).
  hw::IntraNode intra_node = hw::IntraNode::kNvswitch;
  Bandwidth scaleup_bandwidth;          // per GPU per direction; unused for kPcie
  int32_t scaleup_domain_machines = 1;  // kNvswitch: machines sharing one switch (NVL72: 18 trays)
  FabricLatencies latency;
};
Topology fat_tree(const FatTreeSpec& spec, const Where& where = {});

// spine_leaf: `leaves` leaf switches with `hosts_per_leaf` single-GPU hosts each and `spines` spines,
// every leaf linked once to every spine. Uplink bandwidth per leaf-spine link is either given, or
// derived from the oversubscription r: hosts_per_leaf x host_bandwidth / (spines x r).
struct SpineLeafSpec {
  int32_t leaves = 0;
  int32_t hosts_per_leaf = 0;
  int32_t spines = 0;
  Bandwidth host_bandwidth;       // per host link per direction
  Bandwidth uplink_bandwidth;     // per leaf-spine link per direction; zero: derived from oversubscription
  double oversubscription = 1.0;  // used only when uplink_bandwidth is zero
  Time link_latency;              // every link
};
Topology spine_leaf(const SpineLeafSpec& spec, const Where& where = {});

// torus: GPUs at integer coordinates, rank = x + X (y + Y z); each GPU linked to its 2D neighbours
// (+-1 per dimension, with wraparound) by a duplex link. A dimension of size 2 has a single duplex
// link (its +1 and -1 neighbours coincide), size 1 none. GPUs forward (no switches).
struct TorusSpec {
  std::vector<int32_t> dims;     // 2 or 3 sizes
  Bandwidth bandwidth;           // per link per direction
  Time latency;                  // per link
  int32_t gpus_per_machine = 1;  // consecutive ranks share a machine (TPU v4: 4 chips per host)
};
Topology torus(const TorusSpec& spec, const Where& where = {});

// nvswitch_domain: N GPUs on one scale-up switch.
struct NvswitchDomainSpec {
  int32_t gpus = 0;
  Bandwidth bandwidth;           // per GPU per direction
  Time latency;                  // GPU to GPU (half on each link)
  int32_t gpus_per_machine = 0;  // 0: all GPUs in one machine; GB200 NVL72: 4 per compute tray
};
Topology nvswitch_domain(const NvswitchDomainSpec& spec, const Where& where = {});

struct FabricOptions {
  int32_t tiers = 2;
  double oversubscription = 1.0;
  bool rail_optimized = true;
  int32_t radix = 64;
  FabricLatencies latency;
};
// `machines` machines of catalog type `node` (with GPU `gpu`) in a fat tree: scale-up from the
// node's intra_node and scaleup_domain_gpus and the GPU's scaleup bandwidth (no scale-up links:
// GPUs talk through a host node over PCIe); one NIC link per NIC at the node's NIC bandwidth;
// GPU <-> NIC and GPU <-> host links at min(node PCIe, GPU PCIe) bandwidth.
Topology from_catalog(const hw::NodeSpec& node, const hw::GpuSpec& gpu, int32_t machines,
                      const FabricOptions& options = {}, const Where& where = {});

// Edge lists: see docs/topology.md for the format. Errors name file:line and the offending token.
Topology parse_edge_list(std::string_view text, const std::string& file);
Topology read_edge_list(const std::string& path);

}  // namespace orrery::net
