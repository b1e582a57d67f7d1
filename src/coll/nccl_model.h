// Calibrated NCCL: the time of a collective as NCCL runs it, predicted with the flow-level program
// (coll/program.h, coll/executor.h) over a topology whose links are derated to what NCCL achieves.
//
// Model card
//   What: t = launch(op, protocol) + T_flow, where T_flow is the flow-level execution of NCCL's ring
//         (collectives) or of direct messages (send/recv, all-to-all) over `topo`, with
//           - every link's capacity multiplied by an efficiency for its kind (scale-up, PCIe, NIC port,
//             switch fabric) and traffic class (collective or point-to-point): the fraction of the raw
//             per-direction bandwidth that NCCL turns into payload on that system;
//           - every message delayed by a per-step hop latency set by the slowest link kind on its route
//             (NCCL's hwLat table; plus a system term on network hops; on rings that span machines every
//             NVLink step costs at least NCCL's network post overhead);
//           - optionally (network_window), at most w messages in flight per network connection, so that
//             each chunk pays the hop latency in series: a per-chunk cost that pipelining cannot hide;
//           - a protocol (LL, LL128, Simple) that scales the bandwidth (phi) and sets the latencies.
//             NCCL's tuner picks the protocol its cost model finds fastest; we evaluate every enabled
//             protocol with the flow model and keep the fastest.
//         launch = NCCL's baseLat (collectives) + a per-call overhead (host launch and measurement
//         harness; larger when the collective spans machines).
//   Equations (a ring of n ranks in one machine, per-rank effective bandwidth B = eff x raw):
//         t ~ overhead + baseLat(p) + 2(n-1) hwLat(kind, p) + 2(n-1)/n S / (B phi(p)),
//         phi(Simple) = 1, phi(LL128) = 0.92 (0.7 with one rank per node), phi(LL) = 1/4 (all-reduce,
//         reduce, or several nodes; else 1/3): NVIDIA/nccl src/graph/tuning.cc. With a window of 1 on a
//         network hop of latency h and rate b, each chunk c costs h + c/b: a ring all-reduce over two
//         single-GPU machines runs at 1 / (h/c + 1/b). The flow model adds pipelining over chunks,
//         contention, and which NIC each channel leaves through (channel c crosses at local GPU c-1).
//         NVLS (NVLink SHARP, Hopper and later NVSwitch systems, one machine): all-reduce, all-gather and
//         reduce-scatter reduced and multicast by the switch (coll/programs.cc NvlsProgram), t =
//         overhead + hwLat[NVLINK][NVLS] + T_flow with every link at eff x nvlsEfficiency x (c-1)/c (c =
//         NCCL's 16 NVLS channels, one kept for synchronization): for all-reduce on 8 GPUs busbw ->
//         2(n-1)/(n+1) x eff x 0.85 x 15/16 x raw. Considered beside the ring when the GPUs support it
//         (NcclOptions::nvls_efficiency > 0) and every rank meets the others at one switch; the faster wins.
//   Assumptions: NCCL's ring for every collective but all-to-all, plus NVLS where enabled (its trees and
//         CollNet are not modelled); send/recv is one message from rank 0 to rank 1, with LL up to 16 KiB
//         (NCCL_P2P_LL_THRESHOLD) and Simple above; LL128 is enabled only on rings whose every hop is
//         scale-up (NCCL needs NVLink, and across machines a GPUDirect RDMA path, not assumed); the
//         reduction costs nothing beyond the efficiency; channels = GPUs per machine.
//   Range of validity: calibrated on A100 (NVLink 3 through NVSwitch, PCIe Gen4) from 1 MiB to 64 MiB
//         (512 MiB on the pairwise node); docs/collectives_validation.md gives the protocol, the error of
//         every measured configuration, and what the model gets wrong.
//   Parameters: NcclCalibration; each constant of the two calibrations cites its source or its fit
//         (nccl_model.cc).
//   Citations: NVIDIA/nccl src/graph/tuning.cc (baseLat, hwLat, protocol factors; commit b6475625;
//         NVLS: nvlsEfficiency, hwLat[NVLINK][NVLS] and the (nChannels-1)/nChannels factor of NCCL 2.19+),
//         src/graph/topo.h, topo.cc (the per-link NVLink and PCIe bandwidths NCCL assumes),
//         src/enqueue.cc (P2P LL threshold); nccl-tests doc/PERFORMANCE.md (algbw, busbw); vidur
//         (Agrawal et al., MLSys 2024) for the A100 measurements.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "coll/collective.h"
#include "coll/executor.h"
#include "core/units.h"
#include "net/routing.h"
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
  LinkEfficiency collective;   // ring collectives
  LinkEfficiency p2p;          // send/recv and all-to-all (grouped sends in NCCL)
  Time collective_overhead;    // per collective call, added to NCCL's baseLat (host launch, harness)
  Time multinode_overhead;     // added to collective_overhead when the collective spans machines
  Time p2p_overhead;           // per send/recv call (NCCL has no baseLat for point-to-point)
  Time network_hop_extra;      // added to NCCL's hwLat on every hop that crosses the network
  // NCCL's network post overhead (tuning.cc getNetOverhead: 1 us on Intel CPUs, 2 us on AMD; x3 for
  // Simple): the least an NVLink step costs on a ring that spans machines.
  Time net_post_overhead = Time::us(1);
  // Messages a collective keeps in flight per connection whose route crosses the network; 0: no limit
  // beyond the program's own (NcclOptions::max_outstanding). 1 makes every chunk pay the hop latency
  // in series (see vidur_a100_calibration()).
  int32_t network_window = 0;
};

// vidur's A100 testbed (shared/data/profiles/vidur/network), fit on its two-rank measurements
// (docs/collectives_validation.md, "Protocol").
NcclCalibration vidur_a100_calibration();
// nccl-tests conditions (large messages, many iterations, GPUDirect RDMA): link efficiencies from
// NCCL's own bandwidth constants and the InfiniBand packet format; no harness overhead. The NVLink
// efficiency is NCCL's per-link figure for the GPU generation (`architecture` as in the GPU catalog:
// ampere 20/25, hopper 20.6/25, blackwell 40.1/50; any other, or empty, NVLink 3's 0.80).
NcclCalibration nccl_tests_calibration(std::string_view architecture = {});

// NCCL's bandwidth per NVLink link over the link's raw per-direction rate for GPUs of `architecture`
// (src/graph/topo.h): ampere 20/25 = 0.80, hopper 20.6/25 = 0.824, blackwell 40.1/50 = 0.802; any
// other, or empty, NVLink 3's 0.80.
double nccl_nvlink_efficiency(std::string_view architecture);

// NCCL's nvlsEfficiency for GPUs of `architecture` on an NVSwitch (hopper 0.85, blackwell 0.74), or 0
// when NVLink SHARP is not available (earlier GPUs, or no NVSwitch: `nvswitch` false).
double nccl_nvls_efficiency(std::string_view architecture, bool nvswitch);
// NCCL's latency of a one-machine NVLS collective: hwLat[NVLINK][NVLS][Simple] = 25 us (baseLat 0).
Time nccl_nvls_latency();
// The share of the (NCCL-efficient) NVLink rate NVLS reaches: nvls_efficiency x (c-1)/c, NCCL keeping one
// of its c NVLS channels for synchronization.
double nccl_nvls_bandwidth_factor(double nvls_efficiency, int32_t channels = 16);

struct NcclOptions {
  // kAuto: the fastest of the ring's protocols and, where enabled, NVLS; kRing or kNvls: only that one
  // (kNvls throws InputError when nvls_efficiency is 0 or the ranks do not share one switch).
  Algorithm algorithm = Algorithm::kAuto;
  double nvls_efficiency = 0.0;       // nccl_nvls_efficiency(); 0: no NVLink SHARP
  int32_t nvls_channels = 16;         // NCCL_NVLS_NCHANNELS default
  Bytes nvls_chunk = Bytes::KiB(128); // NCCL_NVLS_CHUNKSIZE default
  bool choose_protocol = true;        // false: use `protocol`
  Protocol protocol = Protocol::kSimple;
  int32_t channels = 0;               // 0: GPUs per machine (a ring leaves each machine through every NIC)
  Bytes chunk = Bytes::KiB(512);      // NCCL Simple: 4 MiB buffer / 8 steps
  int32_t max_outstanding = 8;        // NCCL_STEPS
  // kRailAligned: cross-rail machine hops relay over NVLink to the GPU on the destination's rail, as
  // NCCL's PXN does by default since 2.12 (NCCL_PXN_DISABLE=0).
  net::RailPolicy routing = net::RailPolicy::kRailAligned;
};

struct NcclPrediction {
  Time time;          // launch + flow
  Algorithm algorithm = Algorithm::kRing;  // ring, direct (all-to-all, send/recv) or nvls
  Protocol protocol;  // the one chosen (or forced); Simple for NVLS
  Time launch;        // the fixed part: baseLat + overhead
  ExecutionStats flow;
};

// Predicts `op` of `size` (nccl-tests convention, coll/collective.h) over every GPU of `topo`, ranks
// in GPU order: NCCL's ring for collectives, direct messages for all-to-all, rank 0 to rank 1 for
// send/recv. Throws InputError when the topology has fewer than 2 GPUs.
NcclPrediction predict_nccl(const net::Topology& topo, Op op, Bytes size, const NcclCalibration& cal,
                            const NcclOptions& options = {});

}  // namespace orrery::coll
