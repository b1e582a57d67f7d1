// Communication costs of a training plan's groups (TP, CP, DP, EP, PP) on the cluster.
//
// Model card
//   What: the time of one collective (or point-to-point transfer) of a plan's group, placed on the
//     cluster in the tp-cp-dp-pp rank order (train/plan.h): a group of n ranks with stride st has
//     g = clamp(G / st, 1, n) members per machine of G GPUs (all n when n*st <= G), so TP groups sit
//     on NVLink and DP/PP groups mostly cross the network.
//   Equations: coll/alpha_beta.h (ring, tree, direct all-to-all, send/recv), two levels:
//     level 1 (scale-up, the NVLink switch domain: a machine, or a GB200 NVL72 rack) alpha1 = NCCL hwLat
//       NVLink (0.47 us per step), B1 = GPU NVLink bandwidth per direction x NCCL's per-generation
//       figure (20 of 25 GB/s per NVLink 3 link, 20.6 of 25 for NVLink 4, 40.1 of 50 for NVLink 5);
//     level 2 (network) alpha2 = NCCL hwLat NET (2.7 us per step), B2 = the machine's NIC bandwidth
//       per GPU x 4096/4122 (InfiniBand packet efficiency); a flat ring spanning machines leaves every
//       machine through its g members' NICs (inter_parallel = g), because the other groups of the
//       machine run the same collective at the same time on their own NICs (one NIC per GPU).
//     The algorithm is NCCL's choice by the same cost model (coll::choose_algorithm); every call adds
//     NCCL's Simple-protocol base latency (tuning.cc baseLat) once. An all-reduce inside one NVLink
//     switch domain on GPUs with NVLink SHARP may instead run as NVLS, 25 us + (n+1)/n S / (B1 x
//     nvlsEfficiency x 15/16) (coll/nccl_model.h), whichever is faster, as NCCL's tuner picks.
//   Assumptions: one NIC per GPU (all catalog nodes of the validation rows); no congestion between
//     different groups beyond that; collectives of a group are symmetric over its members.
//   Range of validity: large messages on non-blocking fabrics. The flow-level executor
//     (coll/executor.h) is the reference for contention; CommModel is the interface a flow-level
//     implementation plugs into.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "coll/alpha_beta.h"
#include "coll/collective.h"
#include "core/units.h"
#include "hw/hw_catalog.h"
#include "train/plan.h"

namespace orrery::train {

// The hardware the plan runs on, reduced to what the cost models need.
struct ClusterSpec {
  const hw::GpuSpec* gpu = nullptr;
  int64_t gpus_per_node = 8;
  // GPUs that share one NVLink switch domain: gpus_per_node, or a rack of machines (GB200 NVL72: 72
  // GPUs in trays of 4). Groups inside it communicate over NVLink. 0: gpus_per_node.
  int64_t scaleup_domain_gpus = 0;
  Bandwidth scaleup_bandwidth;  // per GPU per direction (NVLink); zero: PCIe only
  Bandwidth nic_bandwidth;      // per GPU per direction
  Bandwidth pcie_bandwidth;     // GPU <-> host per direction (offload)
  Bytes host_memory_per_gpu;    // the node's host memory over its GPUs (offload's room); zero: unknown
  Time scaleup_latency = Time::ns(470);   // NCCL hwLat NVLink, Ring/LL (tuning.cc)
  Time network_latency = Time::ns(2700);  // NCCL hwLat NET, Ring/LL (tuning.cc)
  double scaleup_efficiency = 0.8;        // NCCL 20 of 25 GB/s per NVLink link (topo.h); per generation:
                                          // coll::nccl_nvlink_efficiency (0.824 Hopper, 0.802 Blackwell)
  // NCCL's nvlsEfficiency (coll::nccl_nvls_efficiency: 0.85 Hopper, 0.74 Blackwell on an NVSwitch); 0: no
  // NVLink SHARP. With it an all-reduce inside the switch domain may run as NVLS.
  double nvls_efficiency = 0.0;
  double network_efficiency = 4096.0 / 4122.0;  // InfiniBand 4 KiB MTU packet overhead
  Time collective_launch = Time::ns(6800);      // NCCL baseLat Ring/Simple (tuning.cc)

  int64_t domain_gpus() const { return scaleup_domain_gpus > 0 ? scaleup_domain_gpus : gpus_per_node; }
  // From a catalog node (its GPU, NICs, PCIe, NVLink domain) or, with node == nullptr, a GPU alone in
  // machines of `gpus_per_node` with one `nic` per GPU (no NVLS: whether an NVSwitch joins them is
  // unknown). The NVLink efficiency follows the GPU's architecture.
  static ClusterSpec from_catalog(const hw::GpuSpec& gpu, const hw::NodeSpec* node, int64_t gpus_per_node = 8,
                                  Bandwidth nic = Bandwidth(50e9));
};

// A link of one GPU that runs slower than its kind's rate: a degraded NIC, or a degraded NVLink port
// (the scale-up link; PCIe where the GPU has no NVLink).
enum class LinkKind : uint8_t { kNic, kScaleup };
std::string_view link_kind_name(LinkKind k);  // "nic", "nvlink"

struct SlowLink {
  int64_t rank = 0;  // global rank whose link is slow
  LinkKind kind = LinkKind::kNic;
  double factor = 1.0;  // >= 1: the link's bandwidth is divided by it
};

// Bandwidth divisors of the links of the rank a communication model stands for (1 = nominal).
struct LinkFactors {
  double nic = 1.0;
  double scaleup = 1.0;
  bool nominal() const { return nic == 1.0 && scaleup == 1.0; }
};

class CommModel {
 public:
  virtual ~CommModel() = default;
  // Time of `op` (nccl-tests size convention, coll/collective.h) over group `g` of `plan`; zero when the
  // group has one member or size is zero.
  virtual Time collective(coll::Op op, Bytes size, Group g) const = 0;
  // One point-to-point message between neighbouring pipeline stages.
  virtual Time p2p(Bytes size) const = 0;
  // The link kind that carries a rank's traffic of group g (Group::kPp: its pipeline transfers), for
  // the simulator's link sharing between communication streams (train/simulator.h): the network when
  // the group spans NVLink domains, else the scale-up link. nullopt: not known (no sharing).
  virtual std::optional<LinkKind> link(Group g) const {
    (void)g;
    return std::nullopt;
  }
};

class AlphaBetaComm final : public CommModel {
 public:
  // `links`: the rank's own links are slower (SlowLink). A ring or tree runs at its slowest link, so every
  // collective of a group whose traffic uses the slow link kind (the network when the group spans
  // machines, the scale-up link when two or more members share one) sees that level's bandwidth divided
  // by the factor; a pipeline transfer over that link kind likewise.
  AlphaBetaComm(const ClusterSpec& cluster, const Plan& plan, LinkFactors links = {});
  Time collective(coll::Op op, Bytes size, Group g) const override;
  Time p2p(Bytes size) const override;
  std::optional<LinkKind> link(Group g) const override;
  // The alpha-beta parameters of group g (for tests and docs).
  coll::AlphaBetaParams params(Group g) const;
  // Whether `op` of `size` over group g runs as NVLS: an all-reduce inside one NVLink domain of GPUs
  // with NVLink SHARP, where NVLS's closed form beats NCCL's ring/tree choice.
  bool uses_nvls(coll::Op op, Bytes size, Group g) const;

 private:
  Bandwidth intra_node_bandwidth() const;
  // The NVLS time of `op` over a group with parameters p (nullopt where NVLS does not apply), and the
  // time of NCCL's ring/tree choice.
  std::optional<Time> nvls_time(coll::Op op, Bytes size, const coll::AlphaBetaParams& p) const;
  Time nccl_time(coll::Op op, Bytes size, const coll::AlphaBetaParams& p) const;
  ClusterSpec cluster_;
  Plan plan_;
  LinkFactors links_;
};

}  // namespace orrery::train
