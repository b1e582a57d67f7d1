// Calibrated NCCL: the time of a collective as NCCL runs it, predicted with the flow-level program
// (coll/program.h, coll/executor.h) over a topology whose links are derated to what NCCL achieves.
//
// Model card
//   What: t = launch(op, protocol) + T_flow, where T_flow is the flow-level execution of NCCL's ring
//         (collectives) or of one message (send/recv) over `topo`, with
//           - every link's capacity multiplied by an efficiency for its kind (scale-up, PCIe, network)
//             and traffic class (collective or point-to-point): the fraction of the raw per-direction
//             bandwidth that NCCL's Simple protocol turns into payload;
//           - every message delayed by a per-step hop latency chosen by the slowest link kind on its
//             route (NCCL's hwLat table, plus a testbed term on network hops);
//           - a protocol (LL, LL128, Simple) that scales the bandwidth and sets the latencies; NCCL's
//             tuner picks the protocol with the smallest estimated time, and so do we, evaluating each
//             enabled protocol with the flow model.
//         launch = NCCL's baseLat for the protocol (collectives) plus a per-call overhead of the host
//         and of the measurement harness (a calibration constant).
//   Equations (a ring of n ranks, one machine, per-rank effective bandwidth B = eff * raw):
//         t ~ overhead + baseLat(p) + 2(n-1) hwLat(kind, p) + 2(n-1)/n S / (B phi(p))
//         where phi(Simple) = 1, phi(LL128) = 0.92 (0.7 with one rank per node), phi(LL) = 1/4
//         (all-reduce, reduce, or several nodes; 1/3 otherwise): NVIDIA/nccl src/graph/tuning.cc.
//         The flow model adds what the formula leaves out: pipelining over chunks, contention, and
//         which NIC each channel leaves through.
//   Assumptions: NCCL's ring for every collective (its trees, NVLS and CollNet are not modelled);
//         send/recv is one message from rank 0 to rank 1 with protocol LL up to 16 KiB
//         (NCCL_P2P_LL_THRESHOLD) and Simple above; LL128 is enabled only on rings whose every hop is
//         scale-up (NCCL enables it on NVLink paths, and across nodes only with a GPUDirect RDMA path,
//         which we do not assume); the reduction itself costs nothing beyond the efficiency.
//   Range of validity: calibrated on A100 (NVLink 3 through NVSwitch, and PCIe Gen4) between 1 MiB and
//         64 MiB (512 MiB for the pairwise node): see docs/collectives_validation.md for the protocol,
//         the errors per configuration, and what the model gets wrong.
//   Parameters: NcclCalibration below; each constant cites its source or the fit that produced it.
//   Citations: NVIDIA/nccl src/graph/tuning.cc (baseLat, hwLat, protocol factors; commit b6475625),
//         src/graph/topo.h and topo.cc (per-link NVLink and PCIe bandwidths NCCL assumes);
//         nccl-tests doc/PERFORMANCE.md (algbw, busbw); vidur (Agrawal et al., MLSys 2024) for the
//         A100 measurements.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "coll/collective.h"
#include "coll/executor.h"
#include "core/units.h"
#include "net/topology.h"

namespace orrery::coll {

enum class Protocol { kLL, kLL128, kSimple };
std::string_view protocol_name(Protocol p);  // "LL", "LL128", "Simple"

// NCCL's constants for one protocol of the ring algorithm (NVIDIA/nccl src/graph/tuning.cc).
struct ProtocolConstants {
  Time base_latency;        // baseLat[Ring][p]: per-collective latency
  Time hop_scaleup;         // hwLat[NVLINK][Ring][p]: per ring step over NVLink
  Time hop_pcie;            // hwLat[PCI][Ring][p]
  Time hop_network;         // hwLat[NET][Ring][p]
  double bandwidth_factor;  // busBw multiplier relative to Simple
};
// The constants of protocol p for op over `nodes` machines with `ranks_per_node` ranks on each.
ProtocolConstants nccl_protocol_constants(Protocol p, Op op, int32_t nodes, int32_t ranks_per_node);

// Fraction of a link's raw per-direction bandwidth NCCL achieves, per link kind (net::LinkKind). Network
// links are split in two: `network` for a NIC's (or a GPU's own) port to its first switch, where host
// and NIC limits show, and `fabric` for switch-to-switch links, which only carry packets.
struct LinkEfficiency {
  double scaleup = 1.0;
  double pcie = 1.0;
  double network = 1.0;
  double fabric = 1.0;
  // The efficiency of link `id` of `topo`.
  double of(const net::Topology& topo, net::LinkId id) const;
};

// The constants of one system (testbed, NCCL version, measurement method). See nccl_model.cc for the
// value and source of each constant of the two calibrations below.
struct NcclCalibration {
  std::string name;
  std::string source;          // one line: where the numbers come from
  LinkEfficiency collective;   // every op but send/recv
  LinkEfficiency p2p;          // send/recv
  Time collective_overhead;    // per collective call, added to NCCL's baseLat (host launch, harness)
  Time p2p_overhead;           // per send/recv call (NCCL has no baseLat for point-to-point)
  Time network_hop_extra;      // added to NCCL's hwLat on every hop that crosses the network
};

// vidur's A100 testbed (shared/data/profiles/vidur/network), fit on its two-rank measurements
// (docs/collectives_validation.md, "Protocol").
NcclCalibration vidur_a100_calibration();
// nccl-tests conditions (large messages, many iterations, GPUDirect RDMA): link efficiencies from
// NCCL's own bandwidth constants and the InfiniBand packet format; no harness overhead.
NcclCalibration nccl_tests_calibration();

struct NcclOptions {
  bool choose_protocol = true;        // false: use `protocol`
  Protocol protocol = Protocol::kSimple;
  int32_t channels = 0;               // 0: GPUs per machine (NCCL leaves each node through as many NICs)
  Bytes chunk = Bytes::KiB(512);      // NCCL Simple: 4 MiB buffer / 8 steps
  int32_t max_outstanding = 8;        // NCCL_STEPS
};

struct NcclPrediction {
  Time time;          // launch + flow
  Protocol protocol;  // the one chosen (or forced)
  Time launch;        // the fixed part: baseLat + overhead
  ExecutionStats flow;
};

// Predicts `op` of `size` (nccl-tests convention, coll/collective.h) over every GPU of `topo`, ranks
// in GPU order, with NCCL's ring (send/recv: rank 0 to rank 1). Throws InputError when the topology
// has fewer than 2 GPUs or the op has no ring (all-to-all).
NcclPrediction predict_nccl(const net::Topology& topo, Op op, Bytes size, const NcclCalibration& cal,
                            const NcclOptions& options = {});

}  // namespace orrery::coll
