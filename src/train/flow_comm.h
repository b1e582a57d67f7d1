// Flow-level communication costs of a training plan: each collective of a group kind runs as a flow
// program (coll/programs) over the cluster's topology (net/topology_builders: NVSwitch machines in a
// rail-optimized or plain fat tree, any oversubscription, or an edge list), with every group of that
// kind running it at the same time, so that groups sharing NICs, leaf uplinks or spines contend.
//
// Model card
//   What: collective(op, S, g) = the makespan of `op` on every group of kind g at once (the plan's
//     rank order, rank r on GPU r of the topology), each group running the algorithm NCCL's choice
//     gives for the group's alpha-beta parameters (train/comm_model.h), NCCL-style rings of
//     min(members per machine, 16) channels, plus NCCL's launch latency (ClusterSpec::collective_launch),
//     as AlphaBetaComm adds it. p2p(S) = the makespan of one S-byte message from every rank of every
//     stage but the last to its next stage, all at once (1F1B's steady state sends on every boundary).
//     An all-reduce that AlphaBetaComm runs as NVLS (inside one NVLink domain of Hopper or Blackwell
//     GPUs, when faster) runs as coll::NvlsProgram on every group at once, scale-up links at NCCL's NVLS
//     share, plus NCCL's NVLS latency instead of the ring's launch.
//   Routes: shortest paths with deterministic ECMP, cross-rail machine hops relayed over NVLink to the
//     GPU on the destination's rail (NCCL's PXN; net::RailPolicy::kRailAligned), as NCCL does on
//     rail-optimized fabrics.
//   Links: the topology's capacities times NCCL's efficiencies, as AlphaBetaComm uses them: scale-up
//     x ClusterSpec::scaleup_efficiency, network x ClusterSpec::network_efficiency, PCIe as built.
//   Chunking: messages of at least 512 KiB and at most 2 per ring step and channel, so that a 1 GiB
//     bucket is not millions of flows; bandwidth terms are exact under max-min sharing, latency terms
//     count one chunk per step.
//   What it adds over AlphaBetaComm: link contention between the groups of one kind (oversubscribed
//     tiers, rails, shared NICs) and the topology's real routes. What it leaves out: contention between
//     different kinds running at once on the fabric; each call is timed alone, and the step simulation
//     then shares only each rank's own link between calls that overlap (train/simulator.h, share_links).
//   Cost: one flow simulation per distinct (op, size, group) of the step, cached; a ring over N GPUs
//     is about 4 N x members x channels flows (about 1 s per million on this machine), so use it for
//     clusters up to a few thousand GPUs. The planner keeps the alpha-beta model.
//   Determinism: the executor is deterministic; the cache changes no result.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "coll/topology_paths.h"
#include "net/topology.h"
#include "train/comm_model.h"
#include "train/plan.h"

namespace orrery::train {

class FlowComm final : public CommModel {
 public:
  // REQUIRES: `topology` outlives this object and has plan.gpus() GPUs (throws InputError otherwise).
  FlowComm(const net::Topology& topology, const ClusterSpec& cluster, const Plan& plan);
  Time collective(coll::Op op, Bytes size, Group g) const override;
  Time p2p(Bytes size) const override;
  std::optional<LinkKind> link(Group g) const override { return alpha_beta_.link(g); }
  size_t simulations() const { return simulations_; }  // flow simulations run (cache misses)

 private:
  // The simulated time of (op, size, g) plus `overhead`, simulated once per distinct key.
  Time cached(coll::Op op, Bytes size, Group g, Time overhead) const;
  Time run(coll::Op op, Bytes size, Group g) const;
  const net::Topology& topo_;
  ClusterSpec cluster_;
  Plan plan_;
  AlphaBetaComm alpha_beta_;
  std::unique_ptr<coll::PathProvider> paths_;  // routes are cached inside (PathProvider::path)
  mutable std::map<std::tuple<int, int64_t, int>, Time> cache_;
  mutable size_t simulations_ = 0;
};

}  // namespace orrery::train
