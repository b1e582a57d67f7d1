#include <gtest/gtest.h>

#include "coll/executor.h"
#include "coll/topology_paths.h"
#include "net/symmetry.h"
#include "net/topology_builders.h"

namespace orrery::coll {
namespace {

net::Topology small_two_level(int32_t machines) {
  net::TwoLevelSpec s;
  s.machines = machines;
  s.gpus_per_machine = 8;
  s.scaleup_bandwidth = Bandwidth(400e9);
  s.scaleup_latency = Time::ns(936);
  s.network_bandwidth = Bandwidth(50e9);
  s.network_latency = Time::us(2);
  return net::two_level(s);
}

// A rail-optimized 2-tier fat tree of DGX-H100-like machines: 8 GPUs on NVLink (450 GB/s), one 50 GB/s
// NIC per GPU behind 64 GB/s PCIe.
net::Topology dgx_like_fat_tree(int32_t machines) {
  net::FatTreeSpec f;
  f.machines = machines;
  f.gpus_per_machine = 8;
  f.nic_bandwidth = Bandwidth(50e9);
  f.pcie_bandwidth = Bandwidth(64e9);
  f.scaleup_bandwidth = Bandwidth(450e9);
  return net::fat_tree(f);
}

struct Both {
  ExecutionStats full;
  ExecutionStats symmetric;
};

Both run_both(const net::Topology& topo, Op op, Algorithm algo, Bytes size, ProgramOptions o) {
  const auto orbits = net::find_machine_symmetry(topo);
  EXPECT_TRUE(orbits.has_value());
  TopologyPaths paths(topo);
  Both b;
  {
    des::Engine engine;
    net::FlowNetwork net(engine, paths.capacities());
    auto program = make_program(op, algo, topo.num_gpus(), size, o);
    b.full = execute(*program, engine, net, paths);
  }
  {
    des::Engine engine;
    net::FlowNetwork net(engine, paths.capacities());
    auto program = make_program(op, algo, topo.num_gpus(), size, o);
    EXPECT_TRUE(program->shift_equivariant(orbits->rank_period));
    const auto sym = execute_symmetric(*program, engine, net, paths, *orbits);
    EXPECT_TRUE(sym.has_value());
    if (sym) b.symmetric = *sym;
  }
  return b;
}

TEST(MachineSymmetry, TwoLevelShiftsByOneMachine) {
  // Every machine is wired alike to one shared switch: shifting machines by 1 is an automorphism,
  // so 8 ranks represent all 32 and each link orbit has the 4 translates of a per-machine link.
  const net::Topology topo = small_two_level(4);
  const auto o = net::find_machine_symmetry(topo);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->machine_shift, 1);
  EXPECT_EQ(o->rank_period, 8);
  EXPECT_EQ(o->translates, 4);
  for (size_t l = 0; l < topo.num_links(); ++l) EXPECT_EQ(o->orbit_size[l], 4);
}

TEST(SymmetricExecution, RingAllReduceWithChannelsMatchesTheFullSimulation) {
  // 8 channels of rings leave each machine through different NICs; 4 machines. The quotient run
  // simulates one machine's 8 ranks; times must agree with the full 32-rank run.
  const net::Topology topo = small_two_level(4);
  ProgramOptions o;
  o.channels = 8;
  o.ranks_per_node = 8;
  o.chunk = Bytes::KiB(128);
  const Both b = run_both(topo, Op::kAllReduce, Algorithm::kRing, Bytes::MiB(16), o);
  EXPECT_EQ(b.symmetric.time, b.full.time);
  EXPECT_EQ(b.symmetric.messages * 4, b.full.messages);  // one machine of four
}

TEST(SymmetricExecution, HierarchicalAllReduceMatchesTheFullSimulation) {
  const net::Topology topo = small_two_level(4);
  ProgramOptions o;
  o.ranks_per_node = 8;
  o.channels = 2;
  const Both b = run_both(topo, Op::kAllReduce, Algorithm::kHierarchical, Bytes::MiB(8), o);
  EXPECT_EQ(b.symmetric.time, b.full.time);
}

TEST(SymmetricExecution, AllToAllMatchesTheFullSimulation) {
  // All n-1 flows of every rank run at once and share NIC links: the quotient's counted links must
  // reproduce the contention exactly.
  const net::Topology topo = small_two_level(4);
  const Both b = run_both(topo, Op::kAllToAll, Algorithm::kDirect, Bytes::MiB(8), ProgramOptions{});
  EXPECT_EQ(b.symmetric.time, b.full.time);
}

TEST(SymmetricExecution, EcmpThatBreaksRouteSymmetryFallsBack) {
  // A rail-optimized fat tree of 16 DGX-like machines: cross-rail ring hops go through spines chosen
  // by ECMP hashing, so translates of a flow take different spines and the quotient would wrongly pile
  // them onto one spine link. The route check must refuse the symmetric run.
  const net::Topology topo = dgx_like_fat_tree(16);
  const auto orbits = net::find_machine_symmetry(topo);
  ASSERT_TRUE(orbits.has_value());
  TopologyPaths paths(topo);
  des::Engine engine;
  net::FlowNetwork net(engine, paths.capacities());
  ProgramOptions o;
  o.channels = 8;
  o.ranks_per_node = 8;
  auto program = make_program(Op::kAllReduce, Algorithm::kRing, topo.num_gpus(), Bytes::MiB(4), o);
  EXPECT_FALSE(execute_symmetric(*program, engine, net, paths, *orbits).has_value());
  // An all-to-all issues every message from program.start(), before the engine runs: the refusal must
  // happen there too (and must not try to stop an engine that is not running).
  des::Engine engine2;
  net::FlowNetwork net2(engine2, paths.capacities());
  auto a2a = make_program(Op::kAllToAll, Algorithm::kDirect, topo.num_gpus(), Bytes::MiB(4), o);
  EXPECT_FALSE(execute_symmetric(*a2a, engine2, net2, paths, *orbits).has_value());
}

TEST(SymmetricExecution, PxnRoutingKeepsRingsRailLocalAndSymmetric) {
  // The same kind of rail-optimized fat tree, 4 machines, routed like NCCL's PXN: channel c's hop from
  // machine m's last GPU (local c-1) relays over NVLink to machine m's GPU c and leaves on rail c, so
  // no ring flow crosses a spine, the routes of translates are translates, and the symmetric run is
  // allowed and exact.
  // Bound: every channel crosses each machine boundary through one 50 GB/s NIC, carrying 2(n-1)/n of
  // its S/8 bytes, so t >= 2(n-1)/n * S / (8 * 50 GB/s) and busbw = 2(n-1)/n * S / t <= 400 GB/s. The
  // NVLink side is not the limit: a GPU's link to the switch carries 8 flows (7 ring hops and 1 relay),
  // 450/8 = 56 GB/s each. At 256 MiB the 62 steps of 1 MiB per channel keep 8 chunks in flight, so the
  // per-hop latency (a few us against 21 us per step) costs well under 10%: busbw in [360, 400] GB/s.
  // Shortest-path routing on the same fabric sends each of those hops leaf -> spine -> leaf, where
  // ECMP collisions halve it (docs/collectives.md).
  const net::Topology topo = dgx_like_fat_tree(4);
  const auto orbits = net::find_machine_symmetry(topo);
  ASSERT_TRUE(orbits.has_value());
  TopologyPaths paths(topo, net::RailPolicy::kRailAligned);
  ProgramOptions o;
  o.channels = 8;
  o.ranks_per_node = 8;
  const Bytes size = Bytes::MiB(256);
  ExecutionStats full;
  {
    des::Engine engine;
    net::FlowNetwork net(engine, paths.capacities());
    auto program = make_program(Op::kAllReduce, Algorithm::kRing, topo.num_gpus(), size, o);
    full = execute(*program, engine, net, paths);
  }
  des::Engine engine;
  net::FlowNetwork net(engine, paths.capacities());
  auto program = make_program(Op::kAllReduce, Algorithm::kRing, topo.num_gpus(), size, o);
  const auto sym = execute_symmetric(*program, engine, net, paths, *orbits);
  ASSERT_TRUE(sym.has_value());
  EXPECT_EQ(sym->time, full.time);
  const double n = topo.num_gpus();
  const double busbw = 2 * (n - 1) / n * static_cast<double>(size.count()) / full.time.to_seconds();
  EXPECT_LE(busbw, 400e9 * (1 + 1e-9));
  EXPECT_GE(busbw, 360e9);
}

TEST(SymmetricExecution, TreeIsNotShiftEquivariant) {
  // The heap-shaped binary tree treats rank 0 specially: no symmetric execution for it.
  auto p = make_program(Op::kAllReduce, Algorithm::kTree, 32, Bytes::MiB(1), ProgramOptions{});
  EXPECT_FALSE(p->shift_equivariant(8));
}

}  // namespace
}  // namespace orrery::coll
