#include "coll/nccl_model.h"

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "coll/program.h"
#include "coll/topology_paths.h"
#include "core/assert.h"
#include "des/engine.h"
#include "net/flow_network.h"
#include "net/routing.h"

namespace orrery::coll {

std::string_view protocol_name(Protocol p) {
  switch (p) {
    case Protocol::kLL: return "LL";
    case Protocol::kLL128: return "LL128";
    case Protocol::kSimple: return "Simple";
  }
  return "?";
}

namespace {

// NVIDIA/nccl src/graph/tuning.cc at commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2 (NCCL 2.2x),
// ring rows, microseconds, indexed {LL, LL128, Simple}:
//   baseLat[Ring]        = { 6.6, 14.0, 8.4 }
//   hwLat[NVLINK][Ring]  = { 0.6,  1.9, 3.4 }
//   hwLat[PCI][Ring]     = { 1.0,  2.5, 5.7 }
//   hwLat[NET][Ring]     = { 2.7,  4.0, 14.0 }
constexpr std::array<int64_t, 3> kBaseLatNs{6600, 14000, 8400};
constexpr std::array<int64_t, 3> kHopNvlinkNs{600, 1900, 3400};
constexpr std::array<int64_t, 3> kHopPciNs{1000, 2500, 5700};
constexpr std::array<int64_t, 3> kHopNetNs{2700, 4000, 14000};

// NVLS (NCCL 2.19+, src/graph/tuning.cc): baseLat[NVLS] = 0 and hwLat[NVLINK][NVLS][Simple] = 25 us;
// the latency of a one-machine NVLS collective is that hwLat alone. Simple is its only protocol.
constexpr int64_t kNvlsLatencyNs = 25000;

// NCCL_P2P_LL_THRESHOLD default (src/enqueue.cc): point-to-point messages up to this size use LL.
constexpr int64_t kP2pLLThreshold = 16384;

size_t index_of(Protocol p) { return static_cast<size_t>(p); }

// InfiniBand payload fraction at the 4096-byte MTU: each packet adds LRH (8 B), BTH (12 B), ICRC (4 B)
// and VCRC (2 B) (InfiniBand Architecture Specification vol. 1, ch. 5-7).
constexpr double kInfinibandPacketEfficiency = 4096.0 / 4122.0;

}  // namespace

ProtocolConstants nccl_protocol_constants(Protocol p, Op op, int32_t nodes, int32_t ranks_per_node) {
  const size_t i = index_of(p);
  ProtocolConstants c;
  c.base_latency = Time::ns(kBaseLatNs[i]);
  c.hop_scaleup = Time::ns(kHopNvlinkNs[i]);
  c.hop_pcie = Time::ns(kHopPciNs[i]);
  c.hop_network = Time::ns(kHopNetNs[i]);
  switch (p) {
    case Protocol::kSimple: c.bandwidth_factor = 1.0; break;
    case Protocol::kLL128:
      // "busBw * (ppn < 2 ? 0.7 : 0.92 /*120.0/128.0*/)": 120 of every 128 bytes are payload.
      c.bandwidth_factor = ranks_per_node < 2 ? 0.7 : 0.92;
      break;
    case Protocol::kLL:
      // "busBw * ((nNodes > 1 || coll == AllReduce || coll == Reduce) ? 1.0/4.0 : 1.0/3.0)": 4 bytes of
      // data and a 4-byte flag per 8-byte store, and the flag polling on top.
      c.bandwidth_factor = (nodes > 1 || op == Op::kAllReduce || op == Op::kReduce) ? 0.25 : 1.0 / 3.0;
      break;
  }
  return c;
}

double LinkEfficiency::of(const net::Topology& topo, net::LinkId id) const {
  const net::TopoLink& l = topo.link(id);
  switch (l.kind) {
    case net::LinkKind::kScaleup: return scaleup;
    case net::LinkKind::kPcie: return pcie;
    case net::LinkKind::kNetwork: {
      const bool switches =
          topo.node(l.src).kind == net::NodeKind::kSwitch && topo.node(l.dst).kind == net::NodeKind::kSwitch;
      return switches ? fabric : network;
    }
  }
  return 1.0;
}

// ---------------------------------------------------------------------------------------------------
// Calibrations. Raw bandwidths are those the topology is built with: A100 NVLink 3, 300 GB/s per
// direction (12 links x 25 GB/s); PCIe Gen4 x16, 32 GB/s; the DGX A100's HDR NIC, 25 GB/s (catalog).

NcclCalibration vidur_a100_calibration() {
  NcclCalibration c;
  c.name = "vidur-a100";
  c.source =
      "fit on vidur a100_dgx two-rank files (all_reduce and send_recv, (2,2) and (2,1)), sizes >= 1 MiB, "
      "weighted least squares on t = a + S/B; see docs/collectives_validation.md";
  // a100_dgx/all_reduce.csv (2,2): B = 168.86 GB/s (2-rank ring: busbw = algbw), / 300 GB/s raw.
  c.collective.scaleup = 168.86 / 300.0;
  // a100_dgx/send_recv.csv (2,2): B = 269.67 GB/s, / 300 GB/s raw. Above NCCL's own 240 GB/s
  // (20 GB/s per link): vidur times the kernel of rank 0 only, which need not last the whole transfer.
  c.p2p.scaleup = 269.67 / 300.0;
  // No PCIe measurement in the fit family: NCCL's own estimate of a Gen4 x16 link, width x speed / 80
  // = 16 x 120 / 80 = 24 GB/s (src/graph/topo.cc ncclTopoAddPci), / 32 GB/s raw.
  c.collective.pcie = 24.0 / 32.0;
  c.p2p.pcie = 24.0 / 32.0;
  // a100_dgx/send_recv.csv (2,1): B = 7.773 GB/s, / 25 GB/s (the HDR NIC of a DGX A100; vidur's testbed
  // NIC is not documented and runs at a third of that: see the doc). Collectives get the same link rate;
  // their lower rate (all_reduce (2,1): 5.94 GB/s) comes from network_window below.
  c.collective.network = 7.773 / 25.0;
  c.p2p.network = 7.773 / 25.0;
  // Switch-to-switch links carry InfiniBand packets: 4096-byte MTU, 26 bytes of LRH, BTH, ICRC and VCRC.
  c.collective.fabric = kInfinibandPacketEfficiency;
  c.p2p.fabric = kInfinibandPacketEfficiency;
  // all_reduce (2,2) intercept 42.90 us = overhead + baseLat(Simple) 8.4 + 2 hwLat(NVLink, Simple) 3.4.
  c.collective_overhead = Time::ns(27696);
  // send_recv (2,2) intercept 10.19 us = overhead + one hwLat(NVLink, Simple) 3.4.
  c.p2p_overhead = Time::ns(6786);
  // send_recv (2,1) intercept 29.18 us = 6.79 + hwLat(NET, Simple) 14.0 + extra: extra = 8.39 us.
  c.network_hop_extra = Time::ns(8395);
  // NCCL's network post overhead on AMD CPUs (a DGX A100 has two AMD EPYC 7742).
  c.net_post_overhead = Time::us(2);
  // One chunk in flight per network connection: each 512 KiB chunk then costs 22.4 us + 512 KiB / 7.773
  // GB/s, i.e. 5.82 GB/s for the ring all-reduce over two nodes, against 5.94 GB/s measured
  // (all_reduce (2,1), not used for this): the serial per-chunk cost explains why collectives run
  // slower than send/recv on this network.
  c.network_window = 1;
  // all_reduce (2,1): the remaining fixed cost, fit through the flow model (weighted mean residual over
  // sizes >= 1 MiB, relative weights), a per-collective cost of going through the network proxies.
  c.multinode_overhead = Time::ns(6071);
  return c;
}

NcclCalibration nccl_tests_calibration(std::string_view architecture) {
  NcclCalibration c;
  c.name = "nccl-tests";
  c.source = "NCCL's per-link bandwidth constants and the InfiniBand packet format; no harness overhead";
  const double nvlink = nccl_nvlink_efficiency(architecture);
  if (!architecture.empty()) c.source += fmt::format(" ({} NVLink: {:.3f} of the line rate)", architecture, nvlink);
  c.collective.scaleup = nvlink;
  c.p2p.scaleup = nvlink;
  // NCCL's PCIe estimate width x speed / 80 is 75% of the raw rate for every generation.
  c.collective.pcie = 0.75;
  c.p2p.pcie = 0.75;
  // InfiniBand, 4096-byte MTU: 26 bytes of LRH, BTH, ICRC and VCRC per packet: 4096 / 4122.
  c.collective.network = kInfinibandPacketEfficiency;
  c.p2p.network = kInfinibandPacketEfficiency;
  c.collective.fabric = kInfinibandPacketEfficiency;
  c.p2p.fabric = kInfinibandPacketEfficiency;
  return c;
}

double nccl_nvlink_efficiency(std::string_view architecture) {
  // NCCL's bandwidth per NVLink link over the raw per-direction rate of that link (src/graph/topo.h):
  // SM80_NVLINK_BW 20.0 of NVLink 3's 25 GB/s, SM90_NVLINK_BW 20.6 of NVLink 4's 25 GB/s,
  // SM100_NVLINK_BW 40.1 of NVLink 5's 50 GB/s. Unknown generations get NVLink 3's.
  if (architecture == "hopper") return 20.6 / 25.0;
  if (architecture == "blackwell") return 40.1 / 50.0;
  return 20.0 / 25.0;
}

double nccl_nvls_efficiency(std::string_view architecture, bool nvswitch) {
  if (!nvswitch) return 0.0;
  // NVIDIA/nccl src/graph/tuning.cc nvlsEfficiency[] (per compute-capability class): Volta 0, Ampere 0
  // (no NVLink SHARP before the third-generation NVSwitch), Hopper 0.85, Blackwell 0.74.
  if (architecture == "hopper") return 0.85;
  if (architecture == "blackwell") return 0.74;
  return 0.0;
}

Time nccl_nvls_latency() { return Time::ns(kNvlsLatencyNs); }

double nccl_nvls_bandwidth_factor(double nvls_efficiency, int32_t channels) {
  const double c = static_cast<double>(std::max(channels, 1));
  return nvls_efficiency * (c - 1) / c;
}

// ---------------------------------------------------------------------------------------------------
namespace {

// Which latency class a route falls in: its slowest link kind.
enum class HopClass : uint8_t { kScaleup, kPcie, kNetwork };

HopClass classify(const net::Topology& topo, const std::vector<net::LinkUse>& links) {
  HopClass c = HopClass::kScaleup;
  for (const net::LinkUse& u : links) {
    switch (topo.link(u.link).kind) {
      case net::LinkKind::kNetwork: return HopClass::kNetwork;
      case net::LinkKind::kPcie: c = HopClass::kPcie; break;
      case net::LinkKind::kScaleup: break;
    }
  }
  return c;
}

// TopologyPaths with NCCL's effective capacities and per-step latencies.
class CalibratedPaths final : public PathProvider {
 public:
  struct Hops {
    Time scaleup;
    Time pcie;
    Time network;
  };
  CalibratedPaths(const net::Topology& topo, TopologyPaths& inner, const LinkEfficiency& eff, double factor,
                  Hops hops)
      : topo_(topo), inner_(inner), eff_(eff), factor_(factor), hops_(hops) {}

  Time path(int32_t src, int32_t dst, uint64_t flow_key, std::vector<net::LinkUse>& out) override {
    inner_.path(src, dst, flow_key, out);
    if (out.empty()) return Time::zero();
    switch (hop_class(src, dst, out)) {
      case HopClass::kScaleup: return hops_.scaleup;
      case HopClass::kPcie: return hops_.pcie;
      case HopClass::kNetwork: return hops_.network;
    }
    return hops_.network;
  }

  // The latency class of the route src -> dst (`route`: its links, or empty to look them up).
  HopClass hop_class(int32_t src, int32_t dst, std::vector<net::LinkUse> route = {}) {
    const uint64_t key = pair_key(src, dst);
    auto it = class_.find(key);
    if (it == class_.end()) {
      if (route.empty()) {
        const uint64_t flow_key = key;  // the executor's flow key for the pair
        inner_.path(src, dst, flow_key, route);
      }
      it = class_.emplace(key, classify(topo_, route)).first;
    }
    return it->second;
  }

  std::vector<Bandwidth> capacities() const override {
    std::vector<Bandwidth> caps = inner_.capacities();
    for (size_t l = 0; l < caps.size(); ++l) {
      caps[l] = caps[l] * (eff_.of(topo_, static_cast<net::LinkId>(l)) * factor_);
    }
    return caps;
  }

 private:
  const net::Topology& topo_;
  TopologyPaths& inner_;
  LinkEfficiency eff_;
  double factor_;
  Hops hops_;
  std::unordered_map<uint64_t, HopClass> class_;
};

// Decorates a program: a message on a connection (src, dst, stream) for which `limited(src, dst)` is
// true waits until fewer than `window` messages of that connection are in flight; waiting messages
// leave in the order the program issued them, and their latency starts when they leave. The program
// itself is unchanged and keeps its own limits.
class WindowedProgram final : public Program {
 public:
  WindowedProgram(Program& inner, std::function<bool(int32_t, int32_t)> limited, int32_t window)
      : inner_(inner), limited_(std::move(limited)), window_(window) {}

  int32_t ranks() const override { return inner_.ranks(); }
  uint64_t messages_per_rank() const override { return inner_.messages_per_rank(); }
  void start(int32_t rank, Issuer& out) override {
    Gate gate(*this, out);
    inner_.start(rank, gate);
  }
  void on_send_done(int32_t rank, int32_t dst, uint64_t id, Issuer& out) override {
    const auto s = stream_of_.find(sent_key(rank, dst, id));
    if (s != stream_of_.end()) {
      const uint32_t stream = s->second;
      stream_of_.erase(s);
      Conn& c = conns_[conn_key(rank, dst, stream)];
      --c.in_flight;
      while (c.in_flight < window_ && !c.waiting.empty()) {
        const Waiting m = c.waiting.front();
        c.waiting.pop_front();
        issue(c, rank, dst, m.size, m.id, stream, out);
      }
    }
    Gate gate(*this, out);
    inner_.on_send_done(rank, dst, id, gate);
  }
  void on_receive(int32_t rank, int32_t src, uint64_t id, Issuer& out) override {
    Gate gate(*this, out);
    inner_.on_receive(rank, src, id, gate);
  }

 private:
  struct Waiting {
    Bytes size;
    uint64_t id;
  };
  struct Conn {
    int32_t in_flight = 0;
    std::deque<Waiting> waiting;
  };
  static uint64_t conn_key(int32_t src, int32_t dst, uint32_t stream) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 40) |
           (static_cast<uint64_t>(static_cast<uint32_t>(dst)) << 16) | (stream & 0xFFFFu);
  }
  // Message ids are unique per sender and destination while in flight.
  static std::pair<uint64_t, uint64_t> sent_key(int32_t src, int32_t dst, uint64_t id) {
    return {pair_key(src, dst), id};
  }
  struct PairHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& k) const {
      return std::hash<uint64_t>()(k.first * 0x9E3779B97F4A7C15ull ^ k.second);
    }
  };
  void issue(Conn& c, int32_t src, int32_t dst, Bytes size, uint64_t id, uint32_t stream, Issuer& out) {
    ++c.in_flight;
    stream_of_[sent_key(src, dst, id)] = stream;
    out.send(src, dst, size, id, stream);
  }

  class Gate final : public Issuer {
   public:
    Gate(WindowedProgram& w, Issuer& out) : w_(w), out_(out) {}
    void send(int32_t src, int32_t dst, Bytes size, uint64_t id, uint32_t stream) override {
      if (!w_.limited_(src, dst)) {
        out_.send(src, dst, size, id, stream);
        return;
      }
      Conn& c = w_.conns_[conn_key(src, dst, stream)];
      if (c.in_flight < w_.window_ && c.waiting.empty()) {
        w_.issue(c, src, dst, size, id, stream, out_);
      } else {
        c.waiting.push_back(Waiting{size, id});
      }
    }

   private:
    WindowedProgram& w_;
    Issuer& out_;
  };

  Program& inner_;
  std::function<bool(int32_t, int32_t)> limited_;
  int32_t window_;
  std::unordered_map<uint64_t, Conn> conns_;
  std::unordered_map<std::pair<uint64_t, uint64_t>, uint32_t, PairHash> stream_of_;
};

struct RunResult {
  Time launch;
  ExecutionStats flow;
};

RunResult run_protocol(const net::Topology& topo, TopologyPaths& routes, Op op, Algorithm algo, Bytes size,
                       Protocol p, int32_t nodes, int32_t g, bool p2p, const NcclCalibration& cal,
                       const ProgramOptions& po) {
  const ProtocolConstants k = nccl_protocol_constants(p, op, nodes, g);
  // NCCL (tuning.cc): "Inter-node rings still have to launch nsteps * net overhead": on rings that span
  // machines every intra-node step costs at least the network post overhead, x3 for Simple.
  Time scaleup_hop = k.hop_scaleup;
  if (nodes > 1 && !p2p) scaleup_hop = std::max(scaleup_hop, cal.net_post_overhead * (p == Protocol::kSimple ? 3 : 1));
  const CalibratedPaths::Hops hops{scaleup_hop, k.hop_pcie, k.hop_network + cal.network_hop_extra};
  CalibratedPaths paths(topo, routes, p2p ? cal.p2p : cal.collective, k.bandwidth_factor, hops);
  des::Engine engine;
  net::FlowNetwork network(engine, paths.capacities());
  auto program = make_program(op, algo, topo.num_gpus(), size, po);
  RunResult r;
  if (!p2p && cal.network_window > 0 && nodes > 1) {
    WindowedProgram windowed(
        *program, [&paths](int32_t src, int32_t dst) { return paths.hop_class(src, dst) == HopClass::kNetwork; },
        cal.network_window);
    r.flow = execute(windowed, engine, network, paths);
  } else {
    r.flow = execute(*program, engine, network, paths);
  }
  r.launch = p2p ? cal.p2p_overhead : cal.collective_overhead + k.base_latency;
  if (!p2p && nodes > 1) r.launch += cal.multinode_overhead;
  return r;
}

// NVLS over one machine: NvlsProgram with every link at eff x nvlsEfficiency x (c-1)/c (NCCL keeps one
// of its c NVLS channels for synchronization), no per-message hop latency: NCCL's NVLS latency, one
// hwLat, is charged once in the launch.
RunResult run_nvls(const net::Topology& topo, TopologyPaths& routes, Op op, Bytes size, const NcclCalibration& cal,
                   const NcclOptions& options) {
  const double factor = nccl_nvls_bandwidth_factor(options.nvls_efficiency, options.nvls_channels);
  CalibratedPaths paths(topo, routes, cal.collective, factor, CalibratedPaths::Hops{});
  des::Engine engine;
  net::FlowNetwork network(engine, paths.capacities());
  ProgramOptions po;
  po.chunk = options.nvls_chunk;
  po.max_outstanding = options.max_outstanding;
  auto program = make_program(op, Algorithm::kNvls, topo.num_gpus(), size, po);
  RunResult r;
  r.flow = execute(*program, engine, network, paths);
  r.launch = cal.collective_overhead + nccl_nvls_latency();
  return r;
}

// NCCL enables LL128 on NVLink paths; across nodes it needs a GPUDirect RDMA path (not assumed).
bool all_hops_scaleup(const net::Topology& topo, int32_t n) {
  const net::Router router(topo);
  for (int32_t r = 0; r < n; ++r) {
    const net::Route route = router.gpu_route(r, (r + 1) % n);
    for (net::LinkId l : route.links) {
      if (topo.link(l).kind != net::LinkKind::kScaleup) return false;
    }
  }
  return true;
}

}  // namespace

NcclPrediction predict_nccl(const net::Topology& topo, Op op, Bytes size, const NcclCalibration& cal,
                            const NcclOptions& options) {
  const Where w{"", 0, "nccl model"};
  const int32_t n = topo.num_gpus();
  if (n < 2) throw InputError(w.with_key("ranks"), fmt::format("needs at least 2 GPUs, the topology has {}", n));
  const int32_t per_machine = topo.gpus_per_machine();
  const int32_t g = per_machine > 0 ? per_machine : n;
  const int32_t nodes = topo.num_machines();
  const bool p2p = op == Op::kSendRecv || op == Op::kAllToAll;
  const Algorithm algo = p2p ? Algorithm::kDirect : Algorithm::kRing;
  const bool nvls_op = op == Op::kAllReduce || op == Op::kAllGather || op == Op::kReduceScatter;
  if (options.algorithm != Algorithm::kAuto && options.algorithm != algo &&
      !(options.algorithm == Algorithm::kNvls && nvls_op)) {
    throw InputError(w.with_key("algorithm"),
                     fmt::format("the nccl model runs {} for {}, not '{}'", algorithm_name(algo), op_name(op),
                                 algorithm_name(options.algorithm)),
                     nvls_op ? "use auto, ring or nvls" : "use auto or " + std::string(algorithm_name(algo)));
  }
  // One NVLink switch domain: one machine, or several sharing the switch (GB200 NVL72's trays).
  const bool nvls_possible = nvls_op && options.nvls_efficiency > 0 && share_one_switch(topo, n);
  if (options.algorithm == Algorithm::kNvls && !nvls_possible) {
    throw InputError(w.with_key("algorithm"),
                     options.nvls_efficiency > 0
                         ? std::string("nvls needs every GPU in one NVLink switch domain")
                         : std::string("nvls needs NVLink SHARP: Hopper or Blackwell GPUs on an NVSwitch"),
                     "use ring");
  }

  ProgramOptions po;
  po.channels = options.channels > 0 ? options.channels : g;
  po.chunk = options.chunk;
  po.max_outstanding = options.max_outstanding;
  po.ranks_per_node = g;
  po.root = 0;
  po.peer = 1;

  TopologyPaths routes(topo, options.routing);
  std::vector<Protocol> candidates;
  if (!options.choose_protocol) {
    candidates.push_back(options.protocol);
  } else if (p2p) {
    // NCCL picks the point-to-point protocol by size alone (src/enqueue.cc).
    const Bytes per_peer = op == Op::kAllToAll ? Bytes(size.count() / n) : size;
    candidates.push_back(per_peer.count() <= kP2pLLThreshold ? Protocol::kLL : Protocol::kSimple);
  } else {
    candidates = {Protocol::kSimple, Protocol::kLL};
    if (all_hops_scaleup(topo, n)) candidates.push_back(Protocol::kLL128);
  }

  NcclPrediction best;
  bool have = false;
  const auto consider = [&](const RunResult& r, Algorithm a, Protocol p) {
    const Time t = r.launch + r.flow.time;
    if (have && t >= best.time) return;
    best = NcclPrediction{t, a, p, r.launch, r.flow};
    have = true;
  };
  if (options.algorithm != Algorithm::kNvls) {
    for (Protocol p : candidates) consider(run_protocol(topo, routes, op, algo, size, p, nodes, g, p2p, cal, po), algo, p);
  }
  if (nvls_possible && options.algorithm != Algorithm::kRing) {
    consider(run_nvls(topo, routes, op, size, cal, options), Algorithm::kNvls, Protocol::kSimple);
  }
  ORRERY_ASSERT(have);
  return best;
}

}  // namespace orrery::coll
