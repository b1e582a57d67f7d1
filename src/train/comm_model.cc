#include "train/comm_model.h"

#include <algorithm>
#include <optional>

#include "coll/nccl_model.h"

namespace orrery::train {

ClusterSpec ClusterSpec::from_catalog(const hw::GpuSpec& gpu, const hw::NodeSpec* node, int64_t gpus_per_node,
                                      Bandwidth nic) {
  ClusterSpec c;
  c.gpu = &gpu;
  c.gpus_per_node = node != nullptr ? node->gpus_per_node : gpus_per_node;
  c.scaleup_bandwidth = gpu.scaleup ? gpu.scaleup->bandwidth_per_direction : Bandwidth(0.0);
  if (node != nullptr && node->nics.count > 0) {
    c.nic_bandwidth = node->nics.bandwidth * (static_cast<double>(node->nics.count) / static_cast<double>(c.gpus_per_node));
  } else {
    c.nic_bandwidth = nic;
  }
  c.scaleup_domain_gpus = node != nullptr && node->scaleup_domain_gpus > 0 ? node->scaleup_domain_gpus : c.gpus_per_node;
  c.scaleup_efficiency = coll::nccl_nvlink_efficiency(gpu.architecture);
  c.nvls_efficiency = coll::nccl_nvls_efficiency(gpu.architecture, node != nullptr && node->intra_node == hw::IntraNode::kNvswitch);
  c.pcie_bandwidth = gpu.pcie.bandwidth_per_direction;
  if (node != nullptr && node->gpus_per_node > 0) c.host_memory_per_gpu = Bytes(node->host_memory.count() / node->gpus_per_node);
  if (node != nullptr && node->pcie.bandwidth_per_direction.bytes_per_second() > 0) {
    c.pcie_bandwidth = std::min(c.pcie_bandwidth, node->pcie.bandwidth_per_direction);
  }
  return c;
}

std::string_view link_kind_name(LinkKind k) { return k == LinkKind::kNic ? "nic" : "nvlink"; }

AlphaBetaComm::AlphaBetaComm(const ClusterSpec& cluster, const Plan& plan, LinkFactors links)
    : cluster_(cluster), plan_(plan), links_(links) {}

coll::AlphaBetaParams AlphaBetaComm::params(Group g) const {
  const int64_t n = group_size(plan_, g);
  const int64_t stride = group_stride(plan_, g);
  const int64_t gpn = std::max<int64_t>(1, cluster_.domain_gpus());
  // Members of the group in one NVLink domain: consecutive members are `stride` ranks apart.
  const int64_t per_node = stride >= gpn ? 1 : std::clamp<int64_t>(gpn / stride, 1, n);
  coll::AlphaBetaParams p;
  p.ranks = n;
  p.ranks_per_node = per_node;
  const Bandwidth intra = intra_node_bandwidth();
  p.intra = coll::Level{cluster_.scaleup_latency, intra};
  p.inter = coll::Level{cluster_.network_latency, cluster_.nic_bandwidth * (cluster_.network_efficiency / links_.nic)};
  p.inter_parallel = per_node;
  return p;
}

// NVLink/NVSwitch when the GPU has it; otherwise PCIe at 75% of its per-direction rate.
Bandwidth AlphaBetaComm::intra_node_bandwidth() const {
  const Bandwidth nominal = cluster_.scaleup_bandwidth.bytes_per_second() > 0
                                ? cluster_.scaleup_bandwidth * cluster_.scaleup_efficiency
                                : cluster_.pcie_bandwidth * 0.75;
  return nominal * (1.0 / links_.scaleup);
}

Time AlphaBetaComm::nccl_time(coll::Op op, Bytes size, const coll::AlphaBetaParams& p) const {
  const coll::Algorithm algo = coll::choose_algorithm(op, size, p);
  return coll::alpha_beta_time(op, algo, size, p) + cluster_.collective_launch;
}

// NVLS inside the switch domain: the closed form 2a + (n+1)/n S/B with 2a = NCCL's NVLS latency (its
// baseLat is 0) and B the NVLink rate at NVLS's efficiency. Only for all-reduces of GPUs with NVLink
// SHARP whose group lies inside one NVLink domain.
std::optional<Time> AlphaBetaComm::nvls_time(coll::Op op, Bytes size, const coll::AlphaBetaParams& p) const {
  if (op != coll::Op::kAllReduce || cluster_.nvls_efficiency <= 0 || cluster_.scaleup_bandwidth.bytes_per_second() <= 0 ||
      p.ranks > p.ranks_per_node) {
    return std::nullopt;
  }
  coll::AlphaBetaParams q = p;
  q.intra = coll::Level{Time::ps(coll::nccl_nvls_latency().picoseconds() / 2),
                        p.intra.bandwidth * coll::nccl_nvls_bandwidth_factor(cluster_.nvls_efficiency)};
  return coll::alpha_beta_time(op, coll::Algorithm::kNvls, size, q);
}

bool AlphaBetaComm::uses_nvls(coll::Op op, Bytes size, Group g) const {
  if (group_size(plan_, g) <= 1 || size.count() <= 0) return false;
  const coll::AlphaBetaParams p = params(g);
  const std::optional<Time> nvls = nvls_time(op, size, p);
  return nvls && *nvls < nccl_time(op, size, p);
}

Time AlphaBetaComm::collective(coll::Op op, Bytes size, Group g) const {
  const int64_t n = group_size(plan_, g);
  if (n <= 1 || size.count() <= 0) return Time::zero();
  const coll::AlphaBetaParams p = params(g);
  const Time nccl = nccl_time(op, size, p);
  const std::optional<Time> nvls = nvls_time(op, size, p);
  return nvls && *nvls < nccl ? *nvls : nccl;
}

// The placement params() and p2p() use: a group spans NVLink domains when fewer than all its members
// share one; neighbouring stages share one when their stride is below the domain's size.
std::optional<LinkKind> AlphaBetaComm::link(Group g) const {
  if (g == Group::kPp) return group_stride(plan_, Group::kPp) < cluster_.domain_gpus() ? LinkKind::kScaleup : LinkKind::kNic;
  const coll::AlphaBetaParams p = params(g);
  return p.ranks_per_node < p.ranks ? LinkKind::kNic : LinkKind::kScaleup;
}

Time AlphaBetaComm::p2p(Bytes size) const {
  if (plan_.pp <= 1 || size.count() <= 0) return Time::zero();
  const int64_t stride = group_stride(plan_, Group::kPp);
  const bool same_node = stride < cluster_.domain_gpus();
  // A GPU without NVLink (L40S, PCIe cards) sends to its neighbour stage over PCIe.
  const Bandwidth bw =
      same_node ? intra_node_bandwidth() : cluster_.nic_bandwidth * (cluster_.network_efficiency / links_.nic);
  const Time lat = same_node ? cluster_.scaleup_latency : cluster_.network_latency;
  return lat + size / bw;
}

}  // namespace orrery::train
