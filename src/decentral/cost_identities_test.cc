// decentralized.md check 8, the cost identities, through the models the decentralized runs use: ring
// all-reduce through the collective flow program and the flow-level network; FedScale's client round time
// through NetworkProfile and a federated run's simulated clock.
#include <map>
#include <memory>

#include <gtest/gtest.h>

#include "coll/executor.h"
#include "coll/program.h"
#include "decentral/device_trace.h"
#include "decentral/runner.h"

namespace orrery::decentral {
namespace {

TEST(CostIdentities, RingAllReduceMovesTwoNMinusOneOverNTimesMBytesPerNode) {
  // Ring all-reduce of M bytes over n ranks: n - 1 reduce-scatter and n - 1 all-gather steps, each sending
  // one M/n block, so every rank sends 2 (n - 1) / n M bytes (decentralized.md check 8). M = 3 MiB is a
  // multiple of n for n = 2, 4, 8 (and of the 512 KiB chunks of M/n up to n = 6... the program splits
  // blocks into chunks, which does not change the bytes).
  for (int32_t n : {2, 3, 4, 8}) {
    const Bytes m = Bytes::MiB(3) * n;  // divisible by n
    des::Engine engine;
    coll::SwitchPaths paths(n, Bandwidth(10e9), Time::us(2));
    net::FlowNetwork network(engine, paths.capacities());
    coll::ProgramOptions o;
    auto program = coll::make_program(coll::Op::kAllReduce, coll::Algorithm::kRing, n, m, o);
    std::map<int32_t, int64_t> sent;
    coll::ExecutionOptions eo;
    eo.observer = [&](const coll::MessageRecord& r) { sent[r.src] += r.size.count(); };
    coll::execute(*program, engine, network, paths, eo);
    ASSERT_EQ(static_cast<int32_t>(sent.size()), n);
    const int64_t expected = 2 * (n - 1) * (m.count() / n);
    for (const auto& [rank, bytes] : sent) EXPECT_EQ(bytes, expected) << "n = " << n << ", rank " << rank;
  }
}

TEST(CostIdentities, FedAvgRoundsLastFedScalesClientRoundTime) {
  // Every client has the device of 35 ms per sample and 2,000 kbps. FedAvg with batch 20 and 5 local
  // steps on a d = 10 least-squares problem moves 80 bytes (0.64 kbit) each way per client and round:
  // round time = 3 * 20 * 5 * 35 / 1000 + (0.64 + 0.64) / 2000 = 10.5 + 0.00064 s (check 8). The clients
  // are identical, so 4 rounds end at 4 x 10.50064 s.
  SyntheticSpec sp;
  sp.nodes = 4;
  sp.dim = 10;
  sp.samples = 400;
  const auto p = make_least_squares(sp);
  RunSpec s;
  s.algorithm = "fedavg";
  s.iters = 4;
  s.batch = 20;
  s.eval_every = 1;
  s.params.local_steps = 5;
  s.params.lr = 0.01;
  s.time.hetero.trace = std::make_shared<DeviceTrace>(
      parse_device_trace("device_id,compute_ms_per_sample,bandwidth_kbps\nphone,35,2000\n", "mem.csv"));
  const RunResult r = run(*p, GraphSequence(Graph(4, {})), s);
  for (const SummaryPoint& pt : r.summary) {
    EXPECT_NEAR(pt.sim_time.mean, static_cast<double>(pt.iter) * (10.5 + 1.28 / 2000.0), 1e-9) << pt.iter;
  }
  // FedAsync with the same device: client i's k-th arrival is at k x 10.50064 s.
  s.algorithm = "fedasync";
  const RunResult a = run(*p, GraphSequence(Graph(4, {})), s);
  EXPECT_NEAR(a.summary.back().sim_time.mean, 10.5 + 1.28 / 2000.0, 1e-9);  // the 4 first arrivals tie
}

}  // namespace
}  // namespace orrery::decentral
