#include "net/topology_builders.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "core/strings.h"
#include "core/unit_parse.h"

namespace orrery::net {
namespace {

// ---- spec checks ------------------------------------------------------------------------------

void require_at_least(int64_t value, int64_t min, const Where& where, std::string_view key) {
  if (value < min) {
    throw InputError(where.with_key(key), fmt::format("must be at least {}, got {}", min, value));
  }
}

void require_positive(Bandwidth b, const Where& where, std::string_view key) {
  const double v = b.bytes_per_second();
  if (!(std::isfinite(v) && v > 0)) {
    throw InputError(where.with_key(key), fmt::format("must be a positive bandwidth, got {}", format_bandwidth(b)));
  }
}

void require_non_negative(Time t, const Where& where, std::string_view key) {
  if (t < Time::zero()) {
    throw InputError(where.with_key(key), fmt::format("must not be negative, got {}", format_time(t)));
  }
}

void require_ratio(double r, const Where& where, std::string_view key) {
  if (!(std::isfinite(r) && r >= 1.0)) {
    throw InputError(where.with_key(key),
                     fmt::format("must be a finite ratio >= 1 (downlink:uplink capacity r:1), got {}", r),
                     "1 is a non-blocking (1:1) fabric");
  }
}

std::string ratio_text(double r) { return fmt::format("{:g}:1", r); }

// A GPU-to-GPU latency through one switch, split over the up- and the down-link; the up-link carries
// the odd picosecond so that the two add up exactly.
struct Split {
  Time up;
  Time down;
};
Split split(Time total) {
  const int64_t ps = total.picoseconds();
  return Split{Time::ps(ps - ps / 2), Time::ps(ps / 2)};
}

void add_switched(Topology& t, NodeId gpu, NodeId sw, Bandwidth bw, Split lat, LinkKind kind) {
  t.add_link(gpu, sw, bw, lat.up, kind);
  t.add_link(sw, gpu, bw, lat.down, kind);
}

// ---- machines and fat trees -------------------------------------------------------------------

// Adds machine m's GPUs, scale-up fabric and NICs; returns the NIC node ids (index = rail).
std::vector<NodeId> add_machine(Topology& t, const FatTreeSpec& s, int32_t m, int32_t nics, NodeId& domain_switch) {
  const int32_t g = s.gpus_per_machine;
  std::vector<NodeId> gpus;
  gpus.reserve(static_cast<size_t>(g));
  for (int32_t i = 0; i < g; ++i) gpus.push_back(t.add_gpu(fmt::format("m{}.g{}", m, i), m));

  auto add_host = [&] {
    const NodeId host = t.add_node(NodeKind::kHost, fmt::format("m{}.host", m));
    t.set_machine(host, m);
    for (NodeId gpu : gpus) t.add_duplex(gpu, host, s.pcie_bandwidth, s.latency.pcie, LinkKind::kPcie);
  };
  switch (s.intra_node) {
    case hw::IntraNode::kNvswitch: {
      if (m % s.scaleup_domain_machines == 0) {
        const bool per_machine = s.scaleup_domain_machines == 1;
        domain_switch =
            t.add_node(NodeKind::kSwitch, per_machine ? fmt::format("m{}.nvswitch", m)
                                                      : fmt::format("nvl{}.switch", m / s.scaleup_domain_machines));
        t.set_tier(domain_switch, 0);
        if (per_machine) t.set_machine(domain_switch, m);
      }
      for (NodeId gpu : gpus)
        add_switched(t, gpu, domain_switch, s.scaleup_bandwidth, split(s.latency.scaleup), LinkKind::kScaleup);
      break;
    }
    case hw::IntraNode::kXgmiMesh: {
      const Bandwidth per_peer = g > 1 ? s.scaleup_bandwidth / static_cast<double>(g - 1) : s.scaleup_bandwidth;
      for (int32_t i = 0; i < g; ++i) {
        for (int32_t j = i + 1; j < g; ++j) {
          t.add_duplex(gpus[static_cast<size_t>(i)], gpus[static_cast<size_t>(j)], per_peer, s.latency.scaleup,
                       LinkKind::kScaleup);
        }
      }
      break;
    }
    case hw::IntraNode::kNvlinkPairs: {
      for (int32_t i = 0; i + 1 < g; i += 2) {
        t.add_duplex(gpus[static_cast<size_t>(i)], gpus[static_cast<size_t>(i + 1)], s.scaleup_bandwidth,
                     s.latency.scaleup, LinkKind::kScaleup);
      }
      add_host();
      break;
    }
    case hw::IntraNode::kPcie: add_host(); break;
  }

  std::vector<NodeId> nic_ids;
  nic_ids.reserve(static_cast<size_t>(nics));
  for (int32_t j = 0; j < nics; ++j) {
    const NodeId nic = t.add_node(NodeKind::kNic, fmt::format("m{}.nic{}", m, j));
    t.set_machine(nic, m);
    nic_ids.push_back(nic);
  }
  for (int32_t i = 0; i < g; ++i) {
    const int32_t rail = i % nics;
    t.add_duplex(gpus[static_cast<size_t>(i)], nic_ids[static_cast<size_t>(rail)], s.pcie_bandwidth, s.latency.nic,
                 LinkKind::kPcie);
    t.set_rail(t.node(gpus[static_cast<size_t>(i)]).rank, nic_ids[static_cast<size_t>(rail)], rail);
  }
  return nic_ids;
}

void check_fat_tree_spec(const FatTreeSpec& s, const Where& where) {
  require_at_least(s.machines, 1, where, "machines");
  require_at_least(s.gpus_per_machine, 1, where, "gpus_per_machine");
  require_at_least(s.nics_per_machine, 0, where, "nics_per_machine");
  if (s.nics_per_machine > s.gpus_per_machine) {
    throw InputError(where.with_key("nics_per_machine"),
                     fmt::format("{} NICs for {} GPUs per machine: more NICs than GPUs is not modelled",
                                 s.nics_per_machine, s.gpus_per_machine));
  }
  if (s.tiers != 2 && s.tiers != 3) {
    throw InputError(where.with_key("tiers"), fmt::format("must be 2 or 3, got {}", s.tiers));
  }
  if (s.radix < 2 || s.radix % 2 != 0) {
    throw InputError(where.with_key("radix"), fmt::format("must be an even number of ports >= 2, got {}", s.radix));
  }
  require_ratio(s.oversubscription, where, "oversubscription");
  require_positive(s.nic_bandwidth, where, "nic_bandwidth");
  require_positive(s.pcie_bandwidth, where, "pcie_bandwidth");
  if (s.intra_node != hw::IntraNode::kPcie) require_positive(s.scaleup_bandwidth, where, "scaleup_bandwidth");
  require_at_least(s.scaleup_domain_machines, 1, where, "scaleup_domain_machines");
  if (s.scaleup_domain_machines > 1 && s.intra_node != hw::IntraNode::kNvswitch) {
    throw InputError(where.with_key("scaleup_domain_machines"),
                     "a scale-up domain spanning machines needs intra_node = nvswitch");
  }
  require_non_negative(s.latency.scaleup, where, "latency.scaleup");
  require_non_negative(s.latency.pcie, where, "latency.pcie");
  require_non_negative(s.latency.nic, where, "latency.nic");
  require_non_negative(s.latency.network, where, "latency.network");
}

// Builds the fat tree; `what` names the machines in the description ("16 x dgx-h100").
Topology build_fat_tree(const FatTreeSpec& s, const Where& where, const std::string& what) {
  check_fat_tree_spec(s, where);
  const int64_t machines = s.machines;
  const int32_t nics = s.nics_per_machine > 0 ? s.nics_per_machine : s.gpus_per_machine;
  const int64_t k = s.radix;
  const int64_t down = k / 2;  // leaf ports towards NICs
  const auto up = static_cast<int64_t>(std::max(1.0, std::floor(static_cast<double>(down) / s.oversubscription)));
  // Uplink bandwidth such that leaf capacity down : up is exactly r : 1 (= the port speed when r divides k/2).
  const Bandwidth up_bw =
      s.nic_bandwidth * (static_cast<double>(down) / (s.oversubscription * static_cast<double>(up)));
  const int64_t leaves_per_pod_max = k / 2;  // aggregation switch ports towards leaves (3-tier)

  // Where NIC j of machine m attaches: (pod, leaf index within the pod).
  int64_t machines_per_pod = 0;  // rail-optimized 3-tier
  int64_t nics_per_pod = 0;      // plain 3-tier
  if (s.tiers == 3) {
    if (s.rail_optimized) {
      const int64_t units_per_pod = leaves_per_pod_max / nics;
      if (units_per_pod < 1) {
        throw InputError(where.with_key("radix"),
                         fmt::format("a rail-optimized 3-tier pod needs radix/2 >= NICs per machine ({} < {})",
                                     leaves_per_pod_max, nics));
      }
      machines_per_pod = units_per_pod * down;
    } else {
      nics_per_pod = leaves_per_pod_max * down;
    }
  }
  struct Place {
    int64_t pod;
    int64_t leaf;
  };
  auto place = [&](int64_t m, int64_t j) -> Place {
    if (s.rail_optimized) {
      if (s.tiers == 2) return {0, (m / down) * nics + j};
      return {m / machines_per_pod, ((m % machines_per_pod) / down) * nics + j};
    }
    const int64_t e = m * nics + j;
    if (s.tiers == 2) return {0, e / down};
    return {e / nics_per_pod, (e % nics_per_pod) / down};
  };
  const Place last = place(machines - 1, nics - 1);
  const int64_t pods = last.pod + 1;
  std::vector<int64_t> leaves_in_pod(static_cast<size_t>(pods), 0);
  for (int64_t m = 0; m < machines; ++m) {
    for (int64_t j = 0; j < nics; ++j) {
      const Place p = place(m, j);
      auto& n = leaves_in_pod[static_cast<size_t>(p.pod)];
      n = std::max(n, p.leaf + 1);
    }
  }
  const std::string too_big_hint = "use tiers = 3, a larger radix, or fewer machines";
  if (s.tiers == 2 && leaves_in_pod[0] > k) {
    throw InputError(where.with_key("machines"),
                     fmt::format("a 2-tier fat tree of radix {} has spines of {} ports, so at most {} leaves; {} "
                                 "machines x {} NICs need {} leaves",
                                 k, k, k, machines, nics, leaves_in_pod[0]),
                     too_big_hint);
  }
  if (s.tiers == 3 && pods > k) {
    throw InputError(where.with_key("machines"),
                     fmt::format("a 3-tier fat tree of radix {} has core switches of {} ports, so at most {} pods; "
                                 "{} machines x {} NICs need {} pods",
                                 k, k, k, machines, nics, pods),
                     "use a larger radix or fewer machines");
  }

  Topology t;
  std::vector<std::vector<NodeId>> machine_nics;
  machine_nics.reserve(static_cast<size_t>(machines));
  NodeId domain_switch = kNoNode;
  for (int64_t m = 0; m < machines; ++m) {
    machine_nics.push_back(add_machine(t, s, static_cast<int32_t>(m), nics, domain_switch));
  }

  // Leaves.
  std::vector<std::vector<NodeId>> leaves(static_cast<size_t>(pods));
  for (int64_t p = 0; p < pods; ++p) {
    const std::string prefix = s.tiers == 3 ? fmt::format("pod{}.", p) : std::string();
    for (int64_t l = 0; l < leaves_in_pod[static_cast<size_t>(p)]; ++l) {
      const std::string name = s.rail_optimized ? fmt::format("{}leaf.su{}.r{}", prefix, l / nics, l % nics)
                                                : fmt::format("{}leaf{}", prefix, l);
      const NodeId leaf = t.add_node(NodeKind::kSwitch, name);
      t.set_tier(leaf, 1);
      if (s.rail_optimized) t.set_node_rail(leaf, static_cast<int32_t>(l % nics));
      leaves[static_cast<size_t>(p)].push_back(leaf);
    }
  }
  for (int64_t m = 0; m < machines; ++m) {
    for (int64_t j = 0; j < nics; ++j) {
      const Place p = place(m, j);
      const NodeId leaf = leaves[static_cast<size_t>(p.pod)][static_cast<size_t>(p.leaf)];
      t.add_duplex(machine_nics[static_cast<size_t>(m)][static_cast<size_t>(j)], leaf, s.nic_bandwidth,
                   s.latency.network, LinkKind::kNetwork);
    }
  }

  if (s.tiers == 2) {
    std::vector<NodeId> spines;
    for (int64_t i = 0; i < up; ++i) {
      spines.push_back(t.add_node(NodeKind::kSwitch, fmt::format("spine{}", i)));
      t.set_tier(spines.back(), 2);
    }
    for (NodeId leaf : leaves[0]) {
      for (NodeId spine : spines) t.add_duplex(leaf, spine, up_bw, s.latency.network, LinkKind::kNetwork);
    }
  } else {
    // Each pod: `up` aggregation switches, each leaf linked once to each; aggregation a has k/2 uplinks,
    // to cores a*(k/2) .. a*(k/2) + k/2 - 1, so each core has one link per pod.
    const int64_t agg_up = k / 2;
    std::vector<NodeId> cores;
    for (int64_t c = 0; c < up * agg_up; ++c) {
      cores.push_back(t.add_node(NodeKind::kSwitch, fmt::format("core{}", c)));
      t.set_tier(cores.back(), 3);
    }
    for (int64_t p = 0; p < pods; ++p) {
      std::vector<NodeId> aggs;
      for (int64_t a = 0; a < up; ++a) {
        aggs.push_back(t.add_node(NodeKind::kSwitch, fmt::format("pod{}.agg{}", p, a)));
        t.set_tier(aggs.back(), 2);
      }
      for (NodeId leaf : leaves[static_cast<size_t>(p)]) {
        for (NodeId agg : aggs) t.add_duplex(leaf, agg, up_bw, s.latency.network, LinkKind::kNetwork);
      }
      for (int64_t a = 0; a < up; ++a) {
        for (int64_t u = 0; u < agg_up; ++u) {
          t.add_duplex(aggs[static_cast<size_t>(a)], cores[static_cast<size_t>(a * agg_up + u)], up_bw,
                       s.latency.network, LinkKind::kNetwork);
        }
      }
    }
  }

  t.description =
      fmt::format("fat-tree {}-tier {}, {}, {} GPUs, {}", s.tiers, s.rail_optimized ? "rail-optimized" : "plain", what,
                  t.num_gpus(), ratio_text(s.oversubscription));
  t.validate(where);
  return t;
}

}  // namespace

// ---- builders ---------------------------------------------------------------------------------

Topology two_level(const TwoLevelSpec& spec, const Where& where) {
  require_at_least(spec.machines, 1, where, "machines");
  require_at_least(spec.gpus_per_machine, 1, where, "gpus_per_machine");
  require_positive(spec.scaleup_bandwidth, where, "scaleup_bandwidth");
  require_non_negative(spec.scaleup_latency, where, "scaleup_latency");
  require_positive(spec.network_bandwidth, where, "network_bandwidth");
  require_non_negative(spec.network_latency, where, "network_latency");
  Topology t;
  const NodeId net = t.add_node(NodeKind::kSwitch, "net");
  t.set_tier(net, 1);
  for (int32_t m = 0; m < spec.machines; ++m) {
    const NodeId sw = t.add_node(NodeKind::kSwitch, fmt::format("m{}.nvswitch", m));
    t.set_tier(sw, 0);
    t.set_machine(sw, m);
    for (int32_t i = 0; i < spec.gpus_per_machine; ++i) {
      const NodeId gpu = t.add_gpu(fmt::format("m{}.g{}", m, i), m);
      add_switched(t, gpu, sw, spec.scaleup_bandwidth, split(spec.scaleup_latency), LinkKind::kScaleup);
      add_switched(t, gpu, net, spec.network_bandwidth, split(spec.network_latency), LinkKind::kNetwork);
    }
  }
  t.description = fmt::format("two-level, {} machines x {} GPUs, {} GPUs, scale-up {} per GPU, network {} per GPU",
                              spec.machines, spec.gpus_per_machine, t.num_gpus(),
                              format_bandwidth(spec.scaleup_bandwidth), format_bandwidth(spec.network_bandwidth));
  t.validate(where);
  return t;
}

Topology fat_tree(const FatTreeSpec& spec, const Where& where) {
  return build_fat_tree(spec, where, fmt::format("{} machines x {} GPUs", spec.machines, spec.gpus_per_machine));
}

Topology spine_leaf(const SpineLeafSpec& spec, const Where& where) {
  require_at_least(spec.leaves, 1, where, "leaves");
  require_at_least(spec.hosts_per_leaf, 1, where, "hosts_per_leaf");
  require_at_least(spec.spines, 1, where, "spines");
  require_positive(spec.host_bandwidth, where, "host_bandwidth");
  require_non_negative(spec.link_latency, where, "link_latency");
  require_ratio(spec.oversubscription, where, "oversubscription");
  Bandwidth uplink = spec.uplink_bandwidth;
  const double down_capacity = spec.host_bandwidth.bytes_per_second() * spec.hosts_per_leaf;
  if (uplink.bytes_per_second() != 0.0) {
    require_positive(uplink, where, "uplink_bandwidth");
    if (spec.oversubscription != 1.0) {
      throw InputError(where.with_key("oversubscription"), "give uplink_bandwidth or oversubscription, not both",
                       "the ratio follows from uplink_bandwidth");
    }
  } else {
    uplink = Bandwidth(down_capacity / (spec.spines * spec.oversubscription));
  }
  Topology t;
  std::vector<NodeId> leaves;
  for (int32_t l = 0; l < spec.leaves; ++l) {
    leaves.push_back(t.add_node(NodeKind::kSwitch, fmt::format("leaf{}", l)));
    t.set_tier(leaves.back(), 1);
    for (int32_t h = 0; h < spec.hosts_per_leaf; ++h) {
      const NodeId host = t.add_gpu(fmt::format("leaf{}.h{}", l, h), l * spec.hosts_per_leaf + h);
      t.add_duplex(host, leaves.back(), spec.host_bandwidth, spec.link_latency, LinkKind::kNetwork);
    }
  }
  for (int32_t s = 0; s < spec.spines; ++s) {
    const NodeId spine = t.add_node(NodeKind::kSwitch, fmt::format("spine{}", s));
    t.set_tier(spine, 2);
    for (NodeId leaf : leaves) t.add_duplex(leaf, spine, uplink, spec.link_latency, LinkKind::kNetwork);
  }
  const double ratio = down_capacity / (uplink.bytes_per_second() * spec.spines);
  t.description = fmt::format("spine-leaf, {} leaves x {} hosts, {} spines, {} GPUs, {}", spec.leaves,
                              spec.hosts_per_leaf, spec.spines, t.num_gpus(), ratio_text(ratio));
  t.validate(where);
  return t;
}

Topology torus(const TorusSpec& spec, const Where& where) {
  if (spec.dims.size() != 2 && spec.dims.size() != 3) {
    throw InputError(where.with_key("dims"), fmt::format("a torus has 2 or 3 dimensions, got {}", spec.dims.size()));
  }
  int64_t count = 1;
  int64_t diameter = 0;
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    require_at_least(spec.dims[i], 1, where, fmt::format("dims[{}]", i));
    count *= spec.dims[i];
    diameter += spec.dims[i] / 2;
  }
  if (count > (int64_t{1} << 24) || diameter >= 0xFFFF) {
    throw InputError(where.with_key("dims"), fmt::format("{} GPUs is more than the 16,777,216 supported", count));
  }
  require_positive(spec.bandwidth, where, "bandwidth");
  require_non_negative(spec.latency, where, "latency");
  require_at_least(spec.gpus_per_machine, 1, where, "gpus_per_machine");

  const int32_t nx = spec.dims[0];
  const int32_t ny = spec.dims[1];
  const int32_t nz = spec.dims.size() == 3 ? spec.dims[2] : 1;
  Topology t;
  std::vector<NodeId> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int32_t z = 0; z < nz; ++z) {
    for (int32_t y = 0; y < ny; ++y) {
      for (int32_t x = 0; x < nx; ++x) {
        const auto rank = static_cast<int32_t>(ids.size());
        const std::string name =
            spec.dims.size() == 3 ? fmt::format("t{}.{}.{}", x, y, z) : fmt::format("t{}.{}", x, y);
        ids.push_back(t.add_gpu(name, rank / spec.gpus_per_machine));
        t.set_forwards(ids.back(), true);
      }
    }
  }
  auto id = [&](int32_t x, int32_t y, int32_t z) { return ids[static_cast<size_t>(x + nx * (y + ny * z))]; };
  for (int32_t z = 0; z < nz; ++z) {
    for (int32_t y = 0; y < ny; ++y) {
      for (int32_t x = 0; x < nx; ++x) {
        // Link to the +1 neighbour in each dimension; for size 2 only from coordinate 0 (one cable).
        if (nx > 2 || (nx == 2 && x == 0))
          t.add_duplex(id(x, y, z), id((x + 1) % nx, y, z), spec.bandwidth, spec.latency, LinkKind::kScaleup);
        if (ny > 2 || (ny == 2 && y == 0))
          t.add_duplex(id(x, y, z), id(x, (y + 1) % ny, z), spec.bandwidth, spec.latency, LinkKind::kScaleup);
        if (nz > 2 || (nz == 2 && z == 0))
          t.add_duplex(id(x, y, z), id(x, y, (z + 1) % nz), spec.bandwidth, spec.latency, LinkKind::kScaleup);
      }
    }
  }
  std::string shape;
  for (size_t i = 0; i < spec.dims.size(); ++i) shape += (i ? "x" : "") + std::to_string(spec.dims[i]);
  t.description = fmt::format("torus {}, {} GPUs, {} per link", shape, t.num_gpus(), format_bandwidth(spec.bandwidth));
  t.validate(where);
  return t;
}

Topology nvswitch_domain(const NvswitchDomainSpec& spec, const Where& where) {
  require_at_least(spec.gpus, 1, where, "gpus");
  require_positive(spec.bandwidth, where, "bandwidth");
  require_non_negative(spec.latency, where, "latency");
  require_at_least(spec.gpus_per_machine, 0, where, "gpus_per_machine");
  const int32_t per_machine = spec.gpus_per_machine > 0 ? spec.gpus_per_machine : spec.gpus;
  Topology t;
  const NodeId sw = t.add_node(NodeKind::kSwitch, "nvswitch");
  t.set_tier(sw, 0);
  for (int32_t r = 0; r < spec.gpus; ++r) {
    const int32_t m = r / per_machine;
    const NodeId gpu = t.add_gpu(fmt::format("m{}.g{}", m, r % per_machine), m);
    add_switched(t, gpu, sw, spec.bandwidth, split(spec.latency), LinkKind::kScaleup);
  }
  t.description = fmt::format("nvswitch domain, {} GPUs in {} machines, {} per GPU", t.num_gpus(), t.num_machines(),
                              format_bandwidth(spec.bandwidth));
  t.validate(where);
  return t;
}

Topology from_catalog(const hw::NodeSpec& node, const hw::GpuSpec& gpu, int32_t machines, const FabricOptions& options,
                      const Where& where) {
  Where node_where = where;
  if (node_where.file.empty()) node_where.file = node.origin;
  node_where = node_where.with_key(node.name);
  require_at_least(machines, 1, where, "machines");
  require_at_least(node.gpus_per_node, 1, node_where, "gpus_per_node");

  FatTreeSpec s;
  s.machines = machines;
  s.gpus_per_machine = node.gpus_per_node;
  s.tiers = options.tiers;
  s.radix = options.radix;
  s.oversubscription = options.oversubscription;
  s.rail_optimized = options.rail_optimized;
  s.latency = options.latency;

  // PCIe: the GPU <-> host/NIC link cannot be faster than either end's figure.
  const double node_pcie = node.pcie.bandwidth_per_direction.bytes_per_second();
  const double gpu_pcie = gpu.pcie.bandwidth_per_direction.bytes_per_second();
  if (node_pcie <= 0 && gpu_pcie <= 0) {
    throw InputError(node_where.with_key("pcie"),
                     fmt::format("neither node '{}' nor GPU '{}' gives a PCIe bandwidth", node.name, gpu.name));
  }
  s.pcie_bandwidth =
      Bandwidth(node_pcie > 0 && gpu_pcie > 0 ? std::min(node_pcie, gpu_pcie) : std::max(node_pcie, gpu_pcie));

  const bool has_scaleup = gpu.scaleup.has_value() && gpu.scaleup->bandwidth_per_direction.bytes_per_second() > 0;
  s.intra_node = has_scaleup ? node.intra_node : hw::IntraNode::kPcie;
  if (has_scaleup) s.scaleup_bandwidth = gpu.scaleup->bandwidth_per_direction;
  const int32_t domain = node.scaleup_domain_gpus > 0 ? node.scaleup_domain_gpus : node.gpus_per_node;
  if (s.intra_node == hw::IntraNode::kNvswitch && domain != node.gpus_per_node) {
    if (domain < node.gpus_per_node || domain % node.gpus_per_node != 0) {
      throw InputError(node_where.with_key("scaleup_domain_gpus"),
                       fmt::format("a scale-up domain of {} GPUs over machines of {} GPUs: only whole machines "
                                   "(a multiple of gpus_per_node) are modelled",
                                   domain, node.gpus_per_node));
    }
    s.scaleup_domain_machines = domain / node.gpus_per_node;
  }

  if (node.nics.count < 1 || node.nics.count > node.gpus_per_node) {
    throw InputError(node_where.with_key("nics.count"),
                     fmt::format("{} NICs for {} GPUs: from_catalog needs 1 to gpus_per_node compute NICs",
                                 node.nics.count, node.gpus_per_node));
  }
  require_positive(node.nics.bandwidth, node_where, "nics.bandwidth");
  s.nics_per_machine = node.nics.count;
  s.nic_bandwidth = node.nics.bandwidth;
  return build_fat_tree(s, where, fmt::format("{} x {}", machines, node.name));
}

// ---- edge lists -------------------------------------------------------------------------------

namespace {

struct Token {
  std::string_view key;    // "bw" for "bw=400GB/s"; the whole token for a bare word
  std::string_view value;  // "400GB/s"; empty for a bare word
  bool has_value = false;
  std::string_view text;
};

Token split_token(std::string_view tok) {
  Token t;
  t.text = tok;
  const size_t eq = tok.find('=');
  if (eq == std::string_view::npos) {
    t.key = tok;
  } else {
    t.key = tok.substr(0, eq);
    t.value = tok.substr(eq + 1);
    t.has_value = true;
  }
  return t;
}

class EdgeListParser {
 public:
  EdgeListParser(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  Topology parse() {
    size_t pos = 0;
    int64_t line_no = 0;
    while (pos <= text_.size()) {
      const size_t end = std::min(text_.find('\n', pos), text_.size());
      ++line_no;
      std::string_view line = text_.substr(pos, end - pos);
      if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
      line_ = line_no;
      parse_line(line);
      pos = end + 1;
    }
    topo_.description = fmt::format("edge list '{}', {} GPUs", file_, topo_.num_gpus());
    topo_.validate(Where{file_, 0, {}});
    return std::move(topo_);
  }

 private:
  Where at(std::string_view key = {}) const { return Where{file_, line_, std::string(key)}; }

  void parse_line(std::string_view line) {
    std::vector<std::string_view> words;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      const size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
      if (i > start) words.push_back(line.substr(start, i - start));
    }
    if (words.empty()) return;
    const std::string_view kw = words[0];
    if (kw == "gpu") return parse_gpu(words);
    if (kw == "nic") return parse_node(words, NodeKind::kNic);
    if (kw == "switch") return parse_node(words, NodeKind::kSwitch);
    if (kw == "host") return parse_node(words, NodeKind::kHost);
    if (kw == "link") return parse_link(words);
    throw InputError(at(), fmt::format("unknown statement '{}'", kw),
                     suggest(kw, {"gpu", "nic", "switch", "host", "link"}));
  }

  // Checks the remaining tokens: each a key=value from `keys` or a bare word from `flags`, at most once.
  std::vector<Token> options(const std::vector<std::string_view>& words, size_t first,
                             const std::vector<std::string>& keys, const std::vector<std::string>& flags,
                             std::string_view statement) const {
    std::vector<Token> out;
    for (size_t i = first; i < words.size(); ++i) {
      Token t = split_token(words[i]);
      const auto& allowed = t.has_value ? keys : flags;
      if (std::find(allowed.begin(), allowed.end(), t.key) == allowed.end()) {
        std::vector<std::string> all = keys;
        all.insert(all.end(), flags.begin(), flags.end());
        if (!t.has_value && std::find(keys.begin(), keys.end(), t.key) != keys.end()) {
          throw InputError(at(t.key), fmt::format("'{}' needs a value ({}=...)", t.text, t.key));
        }
        if (t.has_value && std::find(flags.begin(), flags.end(), t.key) != flags.end()) {
          throw InputError(at(t.key), fmt::format("'{}' takes no value, got '{}'", t.key, t.text));
        }
        throw InputError(at(), fmt::format("unknown {} for {}: '{}'", t.has_value ? "key" : "word", statement, t.text),
                         suggest(t.key, all));
      }
      if (t.has_value && t.value.empty()) {
        throw InputError(at(t.key), fmt::format("missing value in '{}'", t.text));
      }
      for (const Token& seen : out) {
        if (seen.key == t.key) throw InputError(at(t.key), fmt::format("'{}' given twice", t.key));
      }
      out.push_back(t);
    }
    return out;
  }

  static const Token* find(const std::vector<Token>& tokens, std::string_view key) {
    for (const Token& t : tokens) {
      if (t.key == key) return &t;
    }
    return nullptr;
  }

  int32_t parse_int(const Token& t) const {
    int32_t v = 0;
    const char* b = t.value.data();
    const char* e = b + t.value.size();
    const auto [ptr, ec] = std::from_chars(b, e, v);
    if (ec != std::errc() || ptr != e || v < 0) {
      throw InputError(at(t.key), fmt::format("expected a non-negative integer, got '{}'", t.text));
    }
    return v;
  }

  std::string_view name_at(const std::vector<std::string_view>& words, size_t i, std::string_view what) const {
    if (i >= words.size()) throw InputError(at(), fmt::format("{}: missing {}", words[0], what));
    const std::string_view name = words[i];
    if (name.find('=') != std::string_view::npos) {
      throw InputError(at(), fmt::format("{}: expected {}, got '{}'", words[0], what, name));
    }
    return name;
  }

  NodeId declare(std::string_view name, NodeKind kind, int32_t machine) {
    if (auto it = ids_.find(std::string(name)); it != ids_.end()) {
      throw InputError(at(), fmt::format("duplicate node name '{}' (first declared on line {})", name,
                                         lines_[static_cast<size_t>(it->second)]));
    }
    const NodeId id =
        kind == NodeKind::kGpu ? topo_.add_gpu(std::string(name), machine) : topo_.add_node(kind, std::string(name));
    ids_.emplace(std::string(name), id);
    names_.emplace_back(name);
    lines_.push_back(line_);
    return id;
  }

  NodeId lookup(std::string_view name, std::string_view role) const {
    auto it = ids_.find(std::string(name));
    if (it == ids_.end()) {
      throw InputError(at(), fmt::format("unknown node '{}' ({})", name, role), suggest(name, names_));
    }
    return it->second;
  }

  void parse_gpu(const std::vector<std::string_view>& words) {
    const std::string_view name = name_at(words, 1, "a GPU name");
    const auto opts = options(words, 2, {"machine", "rail", "nic"}, {"forward"}, "gpu");
    const Token* machine = find(opts, "machine");
    const int32_t m = machine ? parse_int(*machine) : topo_.num_gpus();
    NodeId nic = kNoNode;
    if (const Token* n = find(opts, "nic")) {
      nic = lookup(n->value, "nic=");
      if (topo_.node(nic).kind != NodeKind::kNic) {
        throw InputError(at("nic"),
                         fmt::format("'{}' is a {}, not a nic", n->value, node_kind_name(topo_.node(nic).kind)));
      }
    }
    const Token* rail = find(opts, "rail");
    const NodeId id = declare(name, NodeKind::kGpu, m);
    if (find(opts, "forward")) topo_.set_forwards(id, true);
    if (nic != kNoNode || rail) topo_.set_rail(topo_.node(id).rank, nic, rail ? parse_int(*rail) : -1);
  }

  void parse_node(const std::vector<std::string_view>& words, NodeKind kind) {
    const std::string_view name = name_at(words, 1, fmt::format("a {} name", node_kind_name(kind)));
    const std::vector<std::string> keys =
        kind == NodeKind::kSwitch ? std::vector<std::string>{"machine", "tier"} : std::vector<std::string>{"machine"};
    const auto opts = options(words, 2, keys, {}, node_kind_name(kind));
    const NodeId id = declare(name, kind, 0);
    if (const Token* m = find(opts, "machine")) topo_.set_machine(id, parse_int(*m));
    if (const Token* tier = find(opts, "tier")) topo_.set_tier(id, parse_int(*tier));
  }

  void parse_link(const std::vector<std::string_view>& words) {
    const NodeId a = lookup(name_at(words, 1, "the source node"), "link source");
    const NodeId b = lookup(name_at(words, 2, "the destination node"), "link destination");
    if (a == b) throw InputError(at(), fmt::format("link from '{}' to itself", words[1]));
    const auto opts = options(words, 3, {"bw", "lat", "kind"}, {"duplex"}, "link");
    const Token* bw = find(opts, "bw");
    if (!bw) throw InputError(at("bw"), "link needs a bandwidth", "add bw=<per direction>, e.g. bw=400GB/s");
    const Token* lat = find(opts, "lat");
    if (!lat) throw InputError(at("lat"), "link needs a latency", "add lat=<one way>, e.g. lat=1us");
    const Bandwidth bandwidth = parse_bandwidth_positive(bw->value, at("bw"));
    const Time latency = parse_time(lat->value, at("lat"));
    LinkKind kind = LinkKind::kNetwork;
    if (const Token* k = find(opts, "kind")) {
      if (k->value == "scaleup") {
        kind = LinkKind::kScaleup;
      } else if (k->value == "pcie") {
        kind = LinkKind::kPcie;
      } else if (k->value == "network") {
        kind = LinkKind::kNetwork;
      } else {
        throw InputError(at("kind"), fmt::format("unknown link kind '{}'", k->value),
                         suggest(k->value, {"scaleup", "pcie", "network"}));
      }
    }
    if (find(opts, "duplex")) {
      topo_.add_duplex(a, b, bandwidth, latency, kind);
    } else {
      topo_.add_link(a, b, bandwidth, latency, kind);
    }
  }

  std::string_view text_;
  std::string file_;
  int64_t line_ = 0;
  Topology topo_;
  std::unordered_map<std::string, NodeId> ids_;  // lookups only: iteration order never matters
  std::vector<std::string> names_;               // in declaration order, for suggestions
  std::vector<int64_t> lines_;                   // declaration line by NodeId
};

}  // namespace

Topology parse_edge_list(std::string_view text, const std::string& file) { return EdgeListParser(text, file).parse(); }

Topology read_edge_list(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Where{path, 0, {}}, "cannot open topology file");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_edge_list(buf.str(), path);
}

}  // namespace orrery::net
