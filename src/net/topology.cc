#include "net/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/assert.h"
#include "core/unit_parse.h"

namespace orrery::net {

std::string_view node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kGpu: return "gpu";
    case NodeKind::kNic: return "nic";
    case NodeKind::kSwitch: return "switch";
    case NodeKind::kHost: return "host";
  }
  return "?";
}

std::string_view link_kind_name(LinkKind k) {
  switch (k) {
    case LinkKind::kScaleup: return "scaleup";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kNetwork: return "network";
  }
  return "?";
}

NodeId Topology::add_gpu(std::string name, int32_t machine) {
  ORRERY_CHECK(machine >= 0);
  const auto id = static_cast<NodeId>(nodes_.size());
  TopoNode n;
  n.kind = NodeKind::kGpu;
  n.name = std::move(name);
  n.rank = static_cast<int32_t>(gpus_.size());
  n.machine = machine;
  n.forwards = false;
  nodes_.push_back(std::move(n));
  out_.emplace_back();
  in_.emplace_back();
  gpus_.push_back(id);
  gpu_nic_.push_back(kNoNode);
  if (machine_gpu_count_[machine]++ == 0) ++num_machines_;
  return id;
}

NodeId Topology::add_node(NodeKind kind, std::string name) {
  ORRERY_CHECK(kind != NodeKind::kGpu);
  const auto id = static_cast<NodeId>(nodes_.size());
  TopoNode n;
  n.kind = kind;
  n.name = std::move(name);
  nodes_.push_back(std::move(n));
  out_.emplace_back();
  in_.emplace_back();
  return id;
}

LinkId Topology::add_link(NodeId src, NodeId dst, Bandwidth bw, Time latency, LinkKind kind) {
  ORRERY_CHECK(src >= 0 && static_cast<size_t>(src) < nodes_.size());
  ORRERY_CHECK(dst >= 0 && static_cast<size_t>(dst) < nodes_.size());
  const auto id = static_cast<LinkId>(links_.size());
  links_.push_back(TopoLink{src, dst, bw, latency, kind});
  out_[static_cast<size_t>(src)].push_back(id);
  in_[static_cast<size_t>(dst)].push_back(id);
  return id;
}

std::pair<LinkId, LinkId> Topology::add_duplex(NodeId a, NodeId b, Bandwidth bw, Time latency, LinkKind kind) {
  const LinkId ab = add_link(a, b, bw, latency, kind);
  const LinkId ba = add_link(b, a, bw, latency, kind);
  return {ab, ba};
}

NodeId Topology::gpu(int32_t rank) const {
  ORRERY_ASSERT(rank >= 0 && rank < num_gpus());
  return gpus_[static_cast<size_t>(rank)];
}

const TopoNode& Topology::node(NodeId id) const {
  ORRERY_ASSERT(id >= 0 && static_cast<size_t>(id) < nodes_.size());
  return nodes_[static_cast<size_t>(id)];
}

const TopoLink& Topology::link(LinkId id) const {
  ORRERY_ASSERT(id >= 0 && static_cast<size_t>(id) < links_.size());
  return links_[static_cast<size_t>(id)];
}

std::span<const LinkId> Topology::out_links(NodeId id) const {
  ORRERY_ASSERT(id >= 0 && static_cast<size_t>(id) < nodes_.size());
  return out_[static_cast<size_t>(id)];
}

std::span<const LinkId> Topology::in_links(NodeId id) const {
  ORRERY_ASSERT(id >= 0 && static_cast<size_t>(id) < nodes_.size());
  return in_[static_cast<size_t>(id)];
}

int32_t Topology::machine_of(int32_t rank) const { return node(gpu(rank)).machine; }

int32_t Topology::gpus_per_machine() const {
  int32_t common = 0;
  for (const auto& [machine, count] : machine_gpu_count_) {
    if (common == 0) common = count;
    if (count != common) return 0;
  }
  return common;
}

void Topology::set_rail(int32_t rank, NodeId nic, int32_t rail) {
  ORRERY_CHECK(rank >= 0 && rank < num_gpus());
  ORRERY_CHECK(nic == kNoNode || (nic >= 0 && static_cast<size_t>(nic) < nodes_.size()));
  gpu_nic_[static_cast<size_t>(rank)] = nic;
  nodes_[static_cast<size_t>(gpu(rank))].rail = rail;
  if (nic != kNoNode) nodes_[static_cast<size_t>(nic)].rail = rail;
}

NodeId Topology::nic_of(int32_t rank) const {
  ORRERY_ASSERT(rank >= 0 && rank < num_gpus());
  return gpu_nic_[static_cast<size_t>(rank)];
}

int32_t Topology::rail_of(int32_t rank) const { return node(gpu(rank)).rail; }

void Topology::set_forwards(NodeId id, bool forwards) {
  ORRERY_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size());
  nodes_[static_cast<size_t>(id)].forwards = forwards;
}

void Topology::set_tier(NodeId id, int32_t tier) {
  ORRERY_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size());
  nodes_[static_cast<size_t>(id)].tier = tier;
}

void Topology::set_node_rail(NodeId id, int32_t rail) {
  ORRERY_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size());
  nodes_[static_cast<size_t>(id)].rail = rail;
}

void Topology::set_machine(NodeId id, int32_t machine) {
  ORRERY_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size());
  ORRERY_CHECK(nodes_[static_cast<size_t>(id)].kind != NodeKind::kGpu);
  nodes_[static_cast<size_t>(id)].machine = machine;
}

std::string Topology::link_name(LinkId id) const {
  const TopoLink& l = link(id);
  return fmt::format("'{}' -> '{}'", node(l.src).name, node(l.dst).name);
}

std::vector<uint8_t> Topology::reach(NodeId from, bool forward) const {
  std::vector<uint8_t> seen(nodes_.size(), 0);
  std::vector<NodeId> queue;
  queue.reserve(nodes_.size());
  seen[static_cast<size_t>(from)] = 1;
  queue.push_back(from);
  for (size_t head = 0; head < queue.size(); ++head) {
    const NodeId x = queue[head];
    if (x != from && !node(x).forwards) continue;  // an endpoint, not a router
    for (LinkId l : forward ? out_links(x) : in_links(x)) {
      const NodeId y = forward ? links_[static_cast<size_t>(l)].dst : links_[static_cast<size_t>(l)].src;
      if (!seen[static_cast<size_t>(y)]) {
        seen[static_cast<size_t>(y)] = 1;
        queue.push_back(y);
      }
    }
  }
  return seen;
}

void Topology::validate(const Where& where) const {
  if (gpus_.empty()) throw InputError(where, "topology has no GPUs");
  for (size_t i = 0; i < links_.size(); ++i) {
    const TopoLink& l = links_[i];
    const auto id = static_cast<LinkId>(i);
    const double bw = l.bandwidth.bytes_per_second();
    if (!(std::isfinite(bw) && bw > 0)) {
      throw InputError(where, fmt::format("link {} has bandwidth {}; every link needs a positive bandwidth",
                                          link_name(id), format_bandwidth(l.bandwidth)));
    }
    if (l.latency < Time::zero()) {
      throw InputError(where, fmt::format("link {} has negative latency {}", link_name(id), format_time(l.latency)));
    }
    if (l.src == l.dst) throw InputError(where, fmt::format("link {} connects a node to itself", link_name(id)));
  }
  if (gpus_.size() == 1) return;

  // Pivot test: if a forwarding node p is reached by every GPU and reaches every GPU, any a reaches
  // any b through a -> p -> b (p forwards, so it may be an intermediate). Candidates: gpu 0 itself if
  // it forwards, else its forwarding neighbours in link order (its NVSwitch reaches only its own
  // machine, its NIC or network switch reaches every GPU).
  const NodeId g0 = gpus_.front();
  std::vector<NodeId> pivots;
  if (node(g0).forwards) {
    pivots.push_back(g0);
  } else {
    for (LinkId l : out_links(g0)) {
      const NodeId x = link(l).dst;
      if (node(x).forwards && std::find(pivots.begin(), pivots.end(), x) == pivots.end()) pivots.push_back(x);
    }
  }
  for (NodeId pivot : pivots) {
    const std::vector<uint8_t> from_pivot = reach(pivot, true);
    const std::vector<uint8_t> to_pivot = reach(pivot, false);
    NodeId bad = kNoNode;
    for (NodeId g : gpus_) {
      if (!from_pivot[static_cast<size_t>(g)] || !to_pivot[static_cast<size_t>(g)]) {
        bad = g;
        break;
      }
    }
    if (bad == kNoNode) return;
    // Most disconnections show from the first GPU that fails: search from it (or towards it).
    const bool reaches_pivot = to_pivot[static_cast<size_t>(bad)] != 0;
    const std::vector<uint8_t> r = reach(bad, /*forward=*/!reaches_pivot);
    for (NodeId g : gpus_) {
      if (g == bad || r[static_cast<size_t>(g)]) continue;
      const NodeId a = reaches_pivot ? g : bad;
      const NodeId b = reaches_pivot ? bad : g;
      throw InputError(
          where, fmt::format("topology is disconnected: gpu '{}' cannot reach gpu '{}'", node(a).name, node(b).name));
    }
  }
  check_pair_connectivity(where);
}

void Topology::check_pair_connectivity(const Where& where) const {
  for (NodeId a : gpus_) {
    const std::vector<uint8_t> r = reach(a, true);
    for (NodeId b : gpus_) {
      if (b != a && !r[static_cast<size_t>(b)]) {
        throw InputError(
            where, fmt::format("topology is disconnected: gpu '{}' cannot reach gpu '{}'", node(a).name, node(b).name));
      }
    }
  }
}

}  // namespace orrery::net
