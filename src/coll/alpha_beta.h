// Alpha-beta (latency-bandwidth) cost model of collectives: closed forms, no simulation.
//
// Model card
//   What: the time of a collective over n ranks as (number of sequential steps) x alpha plus (bytes on
//         the busiest link) / beta, per algorithm (Hockney 1994; Thakur, Rabenseifner & Gropp, "Optimization
//         of collective communication operations in MPICH", IJHPCA 2005; Sanders, Speck & Träff 2009 for
//         two-tree pipelines). Two levels: g ranks per node on the scale-up fabric (alpha1, B1 per rank)
//         and m = n/g nodes on the scale-out fabric (alpha2, B2 per rank).
//   Equations (S = nccl-tests buffer size, coll/collective.h; a flat algorithm spanning nodes runs at the
//   slowest level: alpha = max(alpha1, alpha2), B = min(B1, P * B2 / o) with P parallel inter-node
//   paths (channels); within one node, level 1):
//     ring all-reduce          2(n-1) a + 2(n-1)/n S/B
//     ring all-gather, r-s     (n-1) a + (n-1)/n S/B
//     halving-doubling a-r     2 ceil(log2 n) a + 2(n-1)/n S/B            (Rabenseifner)
//     halving-doubling a-g,r-s ceil(log2 n) a + (n-1)/n S/B
//     double binary tree a-r   2 ceil(log2 n) a + 2 S/B                   (pipelined reduce + broadcast)
//     tree broadcast, reduce   ceil(log2 n) a + S/B                      (pipelined two-tree)
//     ring (chain) broadcast   (n-1) a + S/B                             (pipelined chain, bandwidth term at its limit)
//     hierarchical a-r         2(g-1) a1 + 2(g-1)/g S/B1 + 2(m-1) a2 + 2(m-1)/m (S/g)/B2
//     hierarchical a-g, r-s    (g-1) a1 + (g-1)/g S/B1 + (m-1) a2 + (m-1)/m (S/g)/B2
//     direct all-to-all        (n-1) a + max((g-1)/n S/B1, (n-g)/n S/(B2/o))  (o = oversubscription of the scale-out tier)
//     send/recv                a + S/B
//     nvls all-reduce          2 a + (n+1)/n S/B                          (in-switch reduce + multicast; one node)
//     nvls a-g, r-s            a + S/B
//   Assumptions: full-duplex links; every rank has its own bandwidth B at each level (no sharing beyond
//   the stated oversubscription); no compute cost for reductions; power-of-two n for halving-doubling
//   (otherwise ceil(log2 n) steps, an optimistic bound).
//   Range of validity: large messages on uncongested fabrics; the flow-level model (coll/flow_model.h)
//   is the reference when links are shared.
#pragma once

#include "coll/collective.h"

namespace orrery::coll {

struct Level {
  Time alpha;           // per-step latency
  Bandwidth bandwidth;  // per rank, per direction
};

struct AlphaBetaParams {
  int64_t ranks = 0;
  int64_t ranks_per_node = 0;  // g; ranks <= g means a single node
  Level intra;                 // scale-up fabric
  Level inter;                 // scale-out fabric
  double oversubscription = 1.0;
  // Inter-node paths a flat algorithm uses in parallel per node: NCCL runs one ring per channel and
  // lets each leave the node through a different GPU and NIC, so a flat ring's per-rank bandwidth is
  // min(B1, parallel * B2). 1 = a single ring through one NIC.
  int64_t inter_parallel = 1;
};

// Time of `op` with `algo` (not kAuto) for buffer size S. Throws InputError when the algorithm does not
// implement the op or the parameters are invalid (ranks < 1, non-positive bandwidth).
Time alpha_beta_time(Op op, Algorithm algo, Bytes size, const AlphaBetaParams& p);

// The algorithm with the smallest alpha-beta time among nccl_algorithms(op) (ties: earlier in that
// list), as NCCL's tuner picks by its own cost model.
Algorithm choose_algorithm(Op op, Bytes size, const AlphaBetaParams& p);

}  // namespace orrery::coll
