// Label slow: the symmetric run against the per-rank run at a scale where the per-rank run takes
// seconds (64 machines x 8 GPUs = 512 ranks).
#include <gtest/gtest.h>

#include "coll/executor.h"
#include "coll/topology_paths.h"
#include "net/symmetry.h"
#include "net/topology_builders.h"

namespace orrery::coll {
namespace {

TEST(SymmetricExecutionAtScale, RingAndAllToAllOn512GpusMatchThePerRankRun) {
  net::TwoLevelSpec s;
  s.machines = 64;
  s.gpus_per_machine = 8;
  s.scaleup_bandwidth = Bandwidth(400e9);
  s.scaleup_latency = Time::ns(936);
  s.network_bandwidth = Bandwidth(50e9);
  s.network_latency = Time::us(2);
  const net::Topology topo = net::two_level(s);
  const auto orbits = net::find_machine_symmetry(topo);
  ASSERT_TRUE(orbits.has_value());
  ProgramOptions o;
  o.channels = 8;
  o.ranks_per_node = 8;
  for (Op op : {Op::kAllReduce, Op::kAllToAll}) {
    const Algorithm algo = op == Op::kAllReduce ? Algorithm::kRing : Algorithm::kDirect;
    SCOPED_TRACE(std::string(op_name(op)));
    TopologyPaths paths(topo);
    des::Engine e1;
    net::FlowNetwork n1(e1, paths.capacities());
    auto p1 = make_program(op, algo, topo.num_gpus(), Bytes::MiB(64), o);
    const ExecutionStats full = execute(*p1, e1, n1, paths);
    des::Engine e2;
    net::FlowNetwork n2(e2, paths.capacities());
    auto p2 = make_program(op, algo, topo.num_gpus(), Bytes::MiB(64), o);
    const auto sym = execute_symmetric(*p2, e2, n2, paths, *orbits);
    ASSERT_TRUE(sym.has_value());
    EXPECT_EQ(sym->time, full.time);
    EXPECT_EQ(sym->messages * 64, full.messages);
  }
}

}  // namespace
}  // namespace orrery::coll
