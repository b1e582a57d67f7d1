// Collective operations: names, sizes and the nccl-tests conventions for reporting them.
//
// Conventions (NVIDIA nccl-tests, doc/PERFORMANCE.md):
//   S is the buffer size per rank as nccl-tests counts it: for all-reduce, broadcast and reduce the
//   buffer each rank holds; for all-gather the gathered (output) buffer; for reduce-scatter the input
//   buffer; for all-to-all the bytes each rank sends in total; for send/recv the message.
//   algbw = S / t.  busbw = algbw * factor, factor = 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
//   reduce-scatter and all-to-all, 1 for broadcast, reduce and send/recv, so that busbw is comparable
//   with the per-rank link bandwidth whatever the rank count n.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/units.h"

namespace orrery::coll {

enum class Op { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce, kSendRecv };

// kAuto chooses by the alpha-beta cost of the candidates (coll/choice.h), as NCCL's tuner does with
// its own cost model.
// kNvls: NVLink SHARP (NCCL's NVLS), the reduction and the multicast done by the switch that all ranks
// share (coll/program.h kSwitch); all-reduce, all-gather and reduce-scatter within one switch domain.
enum class Algorithm { kAuto, kRing, kTree, kHalvingDoubling, kHierarchical, kDirect, kNvls };

std::string_view op_name(Op op);            // "all-reduce"
std::string_view algorithm_name(Algorithm a);  // "ring"
std::vector<std::string> op_names();
std::vector<std::string> algorithm_names();
// Parse a user-given name; unknown names throw InputError at `where` with the nearest valid name.
Op parse_op(std::string_view name, const Where& where);
Algorithm parse_algorithm(std::string_view name, const Where& where);

// The algorithms that implement `op` (kAuto excluded), in preference order for ties.
std::vector<Algorithm> algorithms_for(Op op);

// The algorithms NCCL itself chooses among for `op` (ring and tree; direct for all-to-all and
// send/recv), which kAuto considers. Halving-doubling (MPI's) and hierarchical are explicit choices.
std::vector<Algorithm> nccl_algorithms(Op op);

// nccl-tests bus-bandwidth factor for op over n ranks.
double bus_factor(Op op, int64_t n);

struct Bandwidths {
  Bandwidth algbw;
  Bandwidth busbw;
};
// algbw = S / t, busbw = algbw * bus_factor(op, n). REQUIRES: t > 0.
Bandwidths nccl_bandwidths(Op op, Bytes size, int64_t n, Time t);

}  // namespace orrery::coll
