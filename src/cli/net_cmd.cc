// `orrery net collective` and `orrery net sweep`: the time, algbw and busbw (nccl-tests conventions) of
// a collective on a cluster or topology, at flow level or with the alpha-beta model.
#include <chrono>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/output.h"
#include "coll/alpha_beta.h"
#include "coll/executor.h"
#include "coll/nccl_model.h"
#include "coll/topology_paths.h"
#include "core/progress.h"
#include "core/strings.h"
#include "core/unit_parse.h"
#include "io/atomic_file.h"
#include "net/symmetry.h"
#include "net/topology_builders.h"

namespace orrery::cli {
namespace {

using io::Json;

struct NetArgs {
  std::string cluster;    // NODE:COUNT
  std::string topology;   // edge-list file
  std::string two_level;  // MACHINESxGPUS
  std::string scaleup_bw = "400 GB/s";
  std::string scaleup_latency = "936 ns";
  std::string network_bw = "50 GB/s";
  std::string network_latency = "2 us";
  int tiers = 2;
  double oversubscription = 1.0;
  bool no_rail_optimized = false;
  std::string op = "all-reduce";
  std::string size = "64 MiB";
  int64_t ranks = 0;
  std::string algo = "auto";
  std::string model = "flow";
  std::string calibration = "nccl-tests";
  int channels = 0;
  std::string chunk = "512 KiB";
  std::string trace;
  int64_t trace_limit = 200000;
  std::string symmetry = "auto";
  std::string routing = "pxn";
  std::vector<std::string> slow_gpus;    // RANK:FACTOR
  std::string local_bw = "2 TB/s";       // local processing bandwidth for --slow-gpu
  std::vector<std::string> link_events;  // TIME,SRC->DST,FACTOR
  // sweep
  std::string min_size = "1 KiB";
  std::string max_size = "1 GiB";
  int factor = 2;
};

const Where kCl{"<command line>", 0, ""};

std::pair<std::string, int64_t> split_count(const std::string& s, char sep, const std::string& flag) {
  const size_t pos = s.rfind(sep);
  if (pos == std::string::npos || pos == 0 || pos + 1 == s.size()) {
    throw InputError(kCl.with_key(flag), fmt::format("expected NAME{}COUNT, got '{}'", sep, s));
  }
  const std::string count = s.substr(pos + 1);
  char* end = nullptr;
  const long long v = std::strtoll(count.c_str(), &end, 10);
  if (*end != '\0' || v < 1) {
    throw InputError(kCl.with_key(flag), fmt::format("expected a positive count after '{}', got '{}'", sep, count));
  }
  return {s.substr(0, pos), v};
}

// The catalog node of --cluster NODE:COUNT and its GPU.
std::pair<const hw::NodeSpec*, const hw::GpuSpec*> cluster_node(Context& ctx, const std::string& node_name) {
  const io::Catalog& c = ctx.catalog();
  const hw::NodeSpec& node = c.hw.get_node(node_name, kCl.with_key("--cluster"));
  return {&node, &c.hw.get_gpu(node.gpu, Where{node.origin, 0, "nodes." + node.name + ".gpu"})};
}

net::Topology build_topology(Context& ctx, const NetArgs& a) {
  const int given = !a.cluster.empty() + !a.topology.empty() + !a.two_level.empty();
  if (given != 1) {
    throw InputError(kCl.with_key("--cluster"),
                     "give exactly one of --cluster NODE:COUNT, --topology FILE or --two-level MACHINESxGPUS");
  }
  if (!a.topology.empty()) return net::read_edge_list(a.topology);
  if (!a.two_level.empty()) {
    const auto [machines, gpus] = split_count(a.two_level, 'x', "--two-level");
    char* end = nullptr;
    const long long m = std::strtoll(machines.c_str(), &end, 10);
    if (*end != '\0' || m < 1) throw InputError(kCl.with_key("--two-level"), "expected MACHINESxGPUS, e.g. 512x8");
    net::TwoLevelSpec s;
    s.machines = static_cast<int32_t>(m);
    s.gpus_per_machine = static_cast<int32_t>(gpus);
    s.scaleup_bandwidth = parse_bandwidth_positive(a.scaleup_bw, kCl.with_key("--scaleup-bw"));
    s.scaleup_latency = parse_time(a.scaleup_latency, kCl.with_key("--scaleup-latency"));
    s.network_bandwidth = parse_bandwidth_positive(a.network_bw, kCl.with_key("--network-bw"));
    s.network_latency = parse_time(a.network_latency, kCl.with_key("--network-latency"));
    return net::two_level(s, kCl.with_key("--two-level"));
  }
  const auto [node_name, count] = split_count(a.cluster, ':', "--cluster");
  const auto [node, gpu] = cluster_node(ctx, node_name);
  net::FabricOptions f;
  f.tiers = a.tiers;
  f.oversubscription = a.oversubscription;
  f.rail_optimized = !a.no_rail_optimized;
  return net::from_catalog(*node, *gpu, static_cast<int32_t>(count), f, kCl.with_key("--cluster"));
}

enum class Model { kFlow, kAlphaBeta, kNccl };

net::RailPolicy parse_routing(const std::string& r) {
  if (r == "pxn") return net::RailPolicy::kRailAligned;
  if (r == "shortest") return net::RailPolicy::kShortest;
  throw InputError(kCl.with_key("--routing"), "unknown routing '" + r + "'", suggest(r, {"pxn", "shortest"}));
}

Model parse_model(const std::string& m) {
  if (m == "flow") return Model::kFlow;
  if (m == "alpha-beta" || m == "analytic") return Model::kAlphaBeta;
  if (m == "nccl") return Model::kNccl;
  throw InputError(kCl.with_key("--model"), "unknown model '" + m + "'", suggest(m, {"flow", "alpha-beta", "nccl"}));
}

// The GPU architecture of a --cluster node ("" for --topology and --two-level) and whether its GPUs
// share an NVSwitch: what NCCL's per-generation constants and NVLS depend on.
struct ClusterGpu {
  std::string architecture;
  bool nvswitch = false;
};
ClusterGpu cluster_gpu(Context& ctx, const NetArgs& a) {
  if (a.cluster.empty()) return {};
  const auto [node, gpu] = cluster_node(ctx, split_count(a.cluster, ':', "--cluster").first);
  return {gpu->architecture, node->intra_node == hw::IntraNode::kNvswitch};
}

coll::NcclCalibration parse_calibration(const std::string& c, const std::string& architecture) {
  if (c == "nccl-tests") return coll::nccl_tests_calibration(architecture);
  if (c == "vidur-a100") return coll::vidur_a100_calibration();
  throw InputError(kCl.with_key("--calibration"), "unknown calibration '" + c + "'",
                   suggest(c, {"nccl-tests", "vidur-a100"}));
}

struct Outcome {
  coll::Algorithm algo;
  Time time;
  coll::ExecutionStats stats;  // flow model only
  int32_t symmetric_ranks = 0;  // ranks simulated when the run was symmetric, else 0
  std::string protocol;         // nccl model: LL, LL128 or Simple
  double wall_s = 0;
};

struct Setup {
  explicit Setup(net::Topology t) : topo(std::move(t)) {}
  net::Topology topo;
  int32_t ranks = 0;
  coll::Op op = coll::Op::kAllReduce;
  coll::Algorithm algo = coll::Algorithm::kAuto;
  Model model = Model::kFlow;
  coll::ProgramOptions options;
  coll::AlphaBetaParams ab;
  std::optional<net::LinkOrbits> orbits;  // set when symmetric execution is allowed
  coll::RankModel rank_model;
  coll::NcclCalibration calibration;
  net::RailPolicy routing = net::RailPolicy::kRailAligned;
  double nvls_efficiency = 0.0;  // nccl model: NCCL's nvlsEfficiency for the cluster's GPUs, 0 without NVLS
  struct LinkEvent {
    Time at;
    net::LinkId link;
    double factor;
  };
  std::vector<LinkEvent> link_events;
};

// "TIME,SRC->DST,FACTOR": from TIME on, the link SRC->DST (node names, docs/topology.md) runs at FACTOR
// times its bandwidth; 0 takes it down, 1 restores it.
Setup::LinkEvent parse_link_event(const std::string& text, const net::Topology& topo) {
  const Where w = kCl.with_key("--link-event");
  const size_t c1 = text.find(',');
  const size_t c2 = text.rfind(',');
  if (c1 == std::string::npos || c2 == c1) throw InputError(w, "expected TIME,SRC->DST,FACTOR, got '" + text + "'");
  const Time at = parse_time(text.substr(0, c1), w);
  const std::string link = std::string(trim(text.substr(c1 + 1, c2 - c1 - 1)));
  const std::string factor_text = std::string(trim(text.substr(c2 + 1)));
  char* end = nullptr;
  const double factor = std::strtod(factor_text.c_str(), &end);
  if (end == factor_text.c_str() || *end != '\0' || factor < 0) {
    throw InputError(w, "expected a non-negative bandwidth factor, got '" + factor_text + "'");
  }
  const size_t arrow = link.find("->");
  if (arrow == std::string::npos) throw InputError(w, "expected a link as SRC->DST, got '" + link + "'");
  const std::string a = link.substr(0, arrow);
  const std::string b = link.substr(arrow + 2);
  std::vector<std::string> names;
  net::NodeId na = -1;
  net::NodeId nb = -1;
  for (size_t v = 0; v < topo.num_nodes(); ++v) {
    const std::string& name = topo.node(static_cast<net::NodeId>(v)).name;
    if (name == a) na = static_cast<net::NodeId>(v);
    if (name == b) nb = static_cast<net::NodeId>(v);
    if (names.size() < 4096) names.push_back(name);
  }
  if (na < 0) throw InputError(w, "unknown node '" + a + "'", suggest(a, names));
  if (nb < 0) throw InputError(w, "unknown node '" + b + "'", suggest(b, names));
  for (net::LinkId l : topo.out_links(na)) {
    if (topo.link(l).dst == nb) return Setup::LinkEvent{at, l, factor};
  }
  throw InputError(w, "no link from '" + a + "' to '" + b + "'");
}

Setup make_setup(Context& ctx, const NetArgs& a) {
  Setup s(build_topology(ctx, a));
  s.op = coll::parse_op(a.op, kCl.with_key("--op"));
  s.algo = coll::parse_algorithm(a.algo, kCl.with_key("--algo"));
  s.model = parse_model(a.model);
  const ClusterGpu cg = cluster_gpu(ctx, a);
  s.calibration = parse_calibration(a.calibration, cg.architecture);
  s.nvls_efficiency = coll::nccl_nvls_efficiency(cg.architecture, cg.nvswitch);
  const int32_t gpus = s.topo.num_gpus();
  if (a.ranks < 0) throw InputError(kCl.with_key("--ranks"), "must be positive");
  if (a.ranks > gpus) {
    throw InputError(kCl.with_key("--ranks"),
                     fmt::format("the topology holds {} GPUs; {} ranks do not fit", gpus, a.ranks));
  }
  s.ranks = a.ranks == 0 ? gpus : static_cast<int32_t>(a.ranks);
  if (s.ranks < 2 && s.op != coll::Op::kSendRecv) {
    throw InputError(kCl.with_key("--ranks"), "a collective needs at least 2 ranks");
  }
  if (s.algo != coll::Algorithm::kAuto) {
    const auto valid = coll::algorithms_for(s.op);
    if (std::find(valid.begin(), valid.end(), s.algo) == valid.end()) {
      std::vector<std::string> names;
      for (coll::Algorithm v : valid) names.emplace_back(coll::algorithm_name(v));
      throw InputError(kCl.with_key("--algo"),
                       fmt::format("{} has no '{}' algorithm", coll::op_name(s.op), coll::algorithm_name(s.algo)),
                       "valid: " + fmt::format("{}", fmt::join(names, ", ")));
    }
  }
  const int32_t g = s.topo.gpus_per_machine() > 0 ? s.topo.gpus_per_machine() : s.ranks;
  if (s.algo == coll::Algorithm::kNvls && !coll::share_one_switch(s.topo, s.ranks)) {
    throw InputError(kCl.with_key("--algo"),
                     fmt::format("nvls reduces in one NVLink switch, but the {} ranks do not all meet at one switch "
                                 "(they span {} machines of {} GPUs)",
                                 s.ranks, (s.ranks + g - 1) / g, g),
                     "use ring, tree or hier across switch domains");
  }
  s.options.ranks_per_node = s.ranks % g == 0 ? g : s.ranks;
  s.options.channels = a.channels > 0 ? a.channels : std::min(g, 16);
  if (a.channels < 0) throw InputError(kCl.with_key("--channels"), "must be positive");
  s.options.chunk = parse_bytes_positive(a.chunk, kCl.with_key("--chunk"));
  s.routing = parse_routing(a.routing);
  if (a.symmetry != "auto" && a.symmetry != "off") {
    throw InputError(kCl.with_key("--symmetry"), "unknown value '" + a.symmetry + "'", suggest(a.symmetry, {"auto", "off"}));
  }
  for (const std::string& sg : a.slow_gpus) {
    const auto [rank_text, factor] = [&] {
      const size_t colon = sg.find(':');
      if (colon == std::string::npos) throw InputError(kCl.with_key("--slow-gpu"), "expected RANK:FACTOR, got '" + sg + "'");
      return std::pair{sg.substr(0, colon), sg.substr(colon + 1)};
    }();
    char* end = nullptr;
    const long long r = std::strtoll(rank_text.c_str(), &end, 10);
    if (*end != '\0' || r < 0 || r >= s.ranks) {
      throw InputError(kCl.with_key("--slow-gpu"), fmt::format("expected a rank in [0, {}), got '{}'", s.ranks, rank_text));
    }
    const double f = std::strtod(factor.c_str(), &end);
    if (*end != '\0' || !(f >= 1)) {
      throw InputError(kCl.with_key("--slow-gpu"), "expected a slowdown factor >= 1, got '" + factor + "'");
    }
    if (s.rank_model.slowdown.empty()) s.rank_model.slowdown.assign(static_cast<size_t>(s.ranks), 1.0);
    s.rank_model.slowdown[static_cast<size_t>(r)] = f;
  }
  if (!s.rank_model.slowdown.empty()) s.rank_model.local_bandwidth = parse_bandwidth_positive(a.local_bw, kCl.with_key("--local-bw"));
  for (const std::string& e : a.link_events) s.link_events.push_back(parse_link_event(e, s.topo));
  if (s.model == Model::kNccl) {
    if (s.ranks != gpus) {
      throw InputError(kCl.with_key("--ranks"), "the nccl model runs on every GPU of the topology", "leave out --ranks");
    }
    const bool p2p = s.op == coll::Op::kAllToAll || s.op == coll::Op::kSendRecv;
    const bool ring_ok = s.algo == coll::Algorithm::kAuto || (!p2p && s.algo == coll::Algorithm::kRing) ||
                         (!p2p && s.algo == coll::Algorithm::kNvls) || (p2p && s.algo == coll::Algorithm::kDirect);
    if (!ring_ok) {
      throw InputError(kCl.with_key("--algo"),
                       "the nccl model runs NCCL's ring or NVLS (direct for all-to-all and send-recv)",
                       "use --algo auto, ring or nvls, or --model flow for other algorithms");
    }
    if (s.algo == coll::Algorithm::kNvls && s.nvls_efficiency <= 0) {
      throw InputError(kCl.with_key("--algo"),
                       "nvls with --model nccl needs NVLink SHARP: a --cluster node with Hopper or Blackwell GPUs on "
                       "an NVSwitch" + (cg.architecture.empty() ? std::string() : " (this node's GPUs: " + cg.architecture +
                                                                                      (cg.nvswitch ? "" : ", no NVSwitch") + ")"),
                       "use --algo ring, or --model flow for a generic in-switch reduction");
    }
    if (!a.slow_gpus.empty() || !a.link_events.empty()) {
      throw InputError(kCl.with_key("--model"), "--slow-gpu and --link-event need --model flow");
    }
  }
  const bool symmetric_ok = s.rank_model.slowdown.empty() && s.link_events.empty();
  if (a.symmetry == "auto" && s.ranks == gpus && symmetric_ok) s.orbits = net::find_machine_symmetry(s.topo);
  s.ab = coll::alpha_beta_params(s.topo, s.ranks);
  s.ab.inter_parallel = std::min<int64_t>(s.options.channels, g);
  return s;
}

Outcome run_one(const Setup& s, Bytes size, const coll::MessageObserver& observer = {}) {
  coll::ExecutionOptions xo;
  xo.observer = observer;
  xo.ranks = s.rank_model;
  for (const Setup::LinkEvent& e : s.link_events) {
    xo.link_events.push_back(coll::LinkEvent{e.at, e.link, s.topo.link(e.link).bandwidth * e.factor});
  }
  Outcome o;
  o.algo = s.algo == coll::Algorithm::kAuto ? coll::choose_algorithm(s.op, size, s.ab) : s.algo;
  const auto t0 = std::chrono::steady_clock::now();
  if (s.model == Model::kNccl) {
    coll::NcclOptions no;
    no.algorithm = s.algo == coll::Algorithm::kDirect ? coll::Algorithm::kAuto : s.algo;
    no.nvls_efficiency = s.nvls_efficiency;
    no.channels = s.options.channels;
    no.chunk = s.options.chunk;
    no.routing = s.routing;
    const coll::NcclPrediction pr = coll::predict_nccl(s.topo, s.op, size, s.calibration, no);
    o.algo = pr.algorithm;
    o.time = pr.time;
    o.stats = pr.flow;
    o.protocol = std::string(coll::protocol_name(pr.protocol));
  } else if (s.model == Model::kAlphaBeta) {
    o.time = coll::alpha_beta_time(s.op, o.algo, size, s.ab);
  } else {
    coll::TopologyPaths paths(s.topo, s.routing);
    des::Engine engine;
    net::FlowNetwork network(engine, paths.capacities());
    auto program = coll::make_program(s.op, o.algo, s.ranks, size, s.options);
    std::optional<coll::ExecutionStats> sym;
    if (s.orbits && program->shift_equivariant(s.orbits->rank_period)) {
      sym = coll::execute_symmetric(*program, engine, network, paths, *s.orbits, xo);
    }
    if (sym) {
      o.symmetric_ranks = s.orbits->rank_period;
      o.stats = *sym;
    } else {
      // Not symmetric (or routes turned out asymmetric): every rank, on a fresh engine and network.
      des::Engine e2;
      net::FlowNetwork n2(e2, paths.capacities());
      auto p2 = coll::make_program(s.op, o.algo, s.ranks, size, s.options);
      o.stats = coll::execute(*p2, e2, n2, paths, xo);
    }
    o.time = o.stats.time;
  }
  o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

Json config_json(const NetArgs& a, const Setup& s) {
  return Json{{"topology", s.topo.description},
              {"gpus", s.topo.num_gpus()},
              {"ranks", s.ranks},
              {"op", std::string(coll::op_name(s.op))},
              {"algo", a.algo},
              {"model", a.model},
              {"calibration", a.model == "nccl" ? Json(a.calibration) : Json(nullptr)},
              {"routing", a.routing},
              {"channels", s.options.channels},
              {"chunk_bytes", s.options.chunk.count()},
              {"max_outstanding", s.options.max_outstanding},
              {"ranks_per_node", s.options.ranks_per_node}};
}

std::string gbps(Bandwidth b) { return fmt::format("{:.2f}", b.bytes_per_second() / 1e9); }

void run_collective(Context& ctx, const NetArgs& a) {
  const Setup s = make_setup(ctx, a);
  const Bytes size = parse_bytes(a.size, kCl.with_key("--size"));
  Json trace = Json::array();
  int64_t traced = 0;
  bool truncated = false;
  coll::MessageObserver observer;
  if (!a.trace.empty()) {
    observer = [&](const coll::MessageRecord& m) {
      if (traced >= a.trace_limit) {
        truncated = true;
        return;
      }
      ++traced;
      // In-switch collectives (nvls) have messages to and from the switch: its own row, after the ranks.
      const auto end = [](int32_t r) { return r == coll::kSwitch ? std::string("switch") : std::to_string(r); };
      trace.push_back(Json{{"name", end(m.src) + "->" + end(m.dst)},
                           {"cat", "flow"},
                           {"ph", "X"},
                           {"ts", m.start.to_us()},
                           {"dur", (m.finish - m.start).to_us()},
                           {"pid", 0},
                           {"tid", m.src == coll::kSwitch ? s.ranks : m.src},
                           {"args", {{"bytes", m.size.count()}, {"dst", m.dst}, {"id", m.id}}}});
    };
  }
  const Outcome o = run_one(s, size, observer);
  const coll::Bandwidths bw = coll::nccl_bandwidths(s.op, size, s.ranks, o.time);
  if (!a.trace.empty()) {
    Json doc{{"traceEvents", trace}, {"displayTimeUnit", "ns"},
             {"otherData", {{"orrery_version", ORRERY_VERSION}, {"truncated", truncated}}}};
    io::write_file_atomic(a.trace, doc.dump() + "\n");
  }
  if (ctx.global.json) {
    Json j = envelope("net collective");
    j["config"] = config_json(a, s);
    j["result"] = {{"algo", std::string(coll::algorithm_name(o.algo))},
                   {"size_bytes", size.count()},
                   {"time_s", o.time.to_seconds()},
                   {"algbw_bytes_per_s", bw.algbw.bytes_per_second()},
                   {"busbw_bytes_per_s", bw.busbw.bytes_per_second()},
                   {"flows", o.stats.messages},
                   {"events", o.stats.events},
                   {"solves", o.stats.solves},
                   {"peak_flows", o.stats.peak_flows},
                   {"reroutes", o.stats.reroutes},
                   {"protocol", o.protocol.empty() ? Json(nullptr) : Json(o.protocol)},
                   {"symmetric_ranks", o.symmetric_ranks > 0 ? Json(o.symmetric_ranks) : Json(nullptr)},
                   {"simulation_wall_s", o.wall_s},
                   {"trace", a.trace.empty() ? Json(nullptr) : Json(a.trace)},
                   {"trace_truncated", truncated}};
    ctx.out << io::dump_json(j);
    return;
  }
  Table t({"op", "algo", "model", "ranks", "size", "time", "algbw GB/s", "busbw GB/s"}, s.topo.description);
  t.add_row({std::string(coll::op_name(s.op)), std::string(coll::algorithm_name(o.algo)), a.model,
             std::to_string(s.ranks), format_bytes(size), format_time(o.time), gbps(bw.algbw), gbps(bw.busbw)});
  ctx.out << t.render();
  if (!o.protocol.empty()) {
    ctx.out << fmt::format("NCCL protocol {}; calibration {}: {}\n", o.protocol, s.calibration.name, s.calibration.source);
  }
  if (s.model != Model::kAlphaBeta) {
    ctx.out << fmt::format("{} flows, {} events, {} max-min solves, peak {} flows in flight; simulated in {:.3f} s\n",
                           o.stats.messages, o.stats.events, o.stats.solves, o.stats.peak_flows, o.wall_s);
    if (o.stats.reroutes > 0) ctx.out << fmt::format("{} flows rerouted around failed links\n", o.stats.reroutes);
    if (o.symmetric_ranks > 0) {
      ctx.out << fmt::format("symmetric run: {} of {} ranks simulated, each flow standing for its {} machine translates\n",
                             o.symmetric_ranks, s.ranks, s.ranks / o.symmetric_ranks);
    }
  }
  if (truncated) ctx.out << fmt::format("trace: first {} flows written to {}\n", a.trace_limit, a.trace);
}

void run_sweep(Context& ctx, const NetArgs& a) {
  const Setup s = make_setup(ctx, a);
  const Bytes lo = parse_bytes_positive(a.min_size, kCl.with_key("--min-size"));
  const Bytes hi = parse_bytes_positive(a.max_size, kCl.with_key("--max-size"));
  if (hi < lo) throw InputError(kCl.with_key("--max-size"), "must not be below --min-size");
  if (a.factor < 2) throw InputError(kCl.with_key("--factor"), "must be at least 2");
  std::vector<Bytes> sizes;
  for (Bytes b = lo; b <= hi; b = b * a.factor) sizes.push_back(b);
  ProgressBar bar("net sweep", sizes.size(), ProgressOptions{ctx.global.quiet});
  Table t({"size", "algo", "time us", "algbw GB/s", "busbw GB/s"},
          fmt::format("{} over {} ranks, {} model; {}", coll::op_name(s.op), s.ranks, a.model, s.topo.description));
  Json rows = Json::array();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Outcome o = run_one(s, sizes[i]);
    const coll::Bandwidths bw = coll::nccl_bandwidths(s.op, sizes[i], s.ranks, o.time);
    t.add_row({std::to_string(sizes[i].count()), std::string(coll::algorithm_name(o.algo)),
               fmt::format("{:.2f}", o.time.to_us()), gbps(bw.algbw), gbps(bw.busbw)});
    rows.push_back(Json{{"size_bytes", sizes[i].count()},
                        {"algo", std::string(coll::algorithm_name(o.algo))},
                        {"time_s", o.time.to_seconds()},
                        {"algbw_bytes_per_s", bw.algbw.bytes_per_second()},
                        {"busbw_bytes_per_s", bw.busbw.bytes_per_second()}});
    bar.update(i + 1);
  }
  bar.finish();
  if (ctx.global.json) {
    Json j = envelope("net sweep");
    j["config"] = config_json(a, s);
    j["results"] = rows;
    ctx.out << io::dump_json(j);
    return;
  }
  ctx.out << t.render();
}

void add_common(CLI::App* cmd, NetArgs& a) {
  cmd->add_option("--cluster", a.cluster, "catalog node and machine count, e.g. dgx-h100:16")->type_name("NODE:COUNT");
  cmd->add_option("--topology", a.topology, "topology edge-list file (docs/topology.md)")->type_name("FILE");
  cmd->add_option("--two-level", a.two_level,
                  "the 2-level reference topology of collectives.md: MACHINESxGPUS, NVSwitch inside, one NIC per GPU "
                  "into a non-blocking switch")
      ->type_name("MxG");
  cmd->add_option("--scaleup-bw", a.scaleup_bw, "--two-level: per-GPU scale-up bandwidth")->capture_default_str();
  cmd->add_option("--scaleup-latency", a.scaleup_latency, "--two-level: GPU-GPU latency in a machine")->capture_default_str();
  cmd->add_option("--network-bw", a.network_bw, "--two-level: per-GPU network bandwidth")->capture_default_str();
  cmd->add_option("--network-latency", a.network_latency, "--two-level: GPU-GPU latency across machines")->capture_default_str();
  cmd->add_option("--tiers", a.tiers, "--cluster: fat-tree tiers (2 or 3)")->capture_default_str();
  cmd->add_option("--oversubscription", a.oversubscription, "--cluster: leaf downlink:uplink ratio")->capture_default_str();
  cmd->add_flag("--no-rail-optimized", a.no_rail_optimized, "--cluster: plain fat tree instead of rail-optimized");
  cmd->add_option("--op", a.op, "all-reduce | all-gather | reduce-scatter | all-to-all | broadcast | reduce | send-recv")
      ->capture_default_str();
  cmd->add_option("--ranks", a.ranks, "ranks (first N GPUs; default: all GPUs of the topology)");
  cmd->add_option("--algo", a.algo, "auto | ring | tree | halving-doubling | hier | direct | nvls (in-switch reduction: one NVLink switch domain)")->capture_default_str();
  cmd->add_option("--model", a.model,
                  "flow (flow-level max-min simulation) | alpha-beta (closed form) | nccl (flow model with NCCL's "
                  "protocols, latencies and link efficiencies; docs/collectives_validation.md)")
      ->capture_default_str();
  cmd->add_option("--calibration", a.calibration, "--model nccl: nccl-tests (NCCL's own efficiencies) | vidur-a100")
      ->capture_default_str();
  cmd->add_option("--channels", a.channels, "parallel rings (default: GPUs per machine, at most 16)");
  cmd->add_option("--chunk", a.chunk, "pipelining chunk size")->capture_default_str();
  cmd->add_option("--slow-gpu", a.slow_gpus,
                  "straggler: RANK:FACTOR stretches that rank's local work per message (bytes x 3 / --local-bw) by FACTOR; repeatable")
      ->type_name("RANK:FACTOR");
  cmd->add_option("--local-bw", a.local_bw, "local processing bandwidth used with --slow-gpu")->capture_default_str();
  cmd->add_option("--link-event", a.link_events,
                  "TIME,SRC->DST,FACTOR: from TIME the link runs at FACTOR x its bandwidth (0 = down: its flows reroute when "
                  "another path exists; 1 = back up); repeatable")
      ->type_name("T,A->B,F");
  cmd->add_option("--routing", a.routing,
                  "pxn: a GPU sending to another machine's GPU on another rail relays over NVLink to its own machine's "
                  "GPU on that rail, as NCCL >= 2.12 does by default (PXN); shortest: plain shortest paths with ECMP")
      ->capture_default_str();
  cmd->add_option("--symmetry", a.symmetry,
                  "auto: simulate one machine's ranks when topology and algorithm are shift-symmetric (exact); off: every rank")
      ->capture_default_str();
}

}  // namespace

void register_net_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* net = app.add_subcommand("net", "network and collectives: time, algbw and busbw of collectives");
  net->require_subcommand(1);
  auto a = std::make_shared<NetArgs>();
  CLI::App* coll_cmd = net->add_subcommand("collective", "time one collective (nccl-tests conventions)");
  add_common(coll_cmd, *a);
  coll_cmd->add_option("--size", a->size, "buffer size per rank as nccl-tests counts it")->capture_default_str();
  coll_cmd->add_option("--trace", a->trace, "write a Chrome/Perfetto trace of the flows")->type_name("FILE");
  coll_cmd->add_option("--trace-limit", a->trace_limit, "most flows written to the trace")->capture_default_str();
  actions.emplace_back(coll_cmd, [a](Context& ctx) { run_collective(ctx, *a); });

  auto b = std::make_shared<NetArgs>();
  CLI::App* sweep = net->add_subcommand("sweep", "busbw versus message size, like nccl-tests");
  add_common(sweep, *b);
  sweep->add_option("--min-size", b->min_size, "smallest size (-b in nccl-tests)")->capture_default_str();
  sweep->add_option("--max-size", b->max_size, "largest size (-e)")->capture_default_str();
  sweep->add_option("--factor", b->factor, "size multiplier between rows (-f)")->capture_default_str();
  actions.emplace_back(sweep, [b](Context& ctx) { run_sweep(ctx, *b); });
}

}  // namespace orrery::cli
