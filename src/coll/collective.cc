#include "coll/collective.h"

#include <array>

#include "core/strings.h"

namespace orrery::coll {
namespace {
constexpr std::array<std::string_view, 7> kOpNames = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                                       "broadcast",  "reduce",     "send-recv"};
constexpr std::array<std::string_view, 7> kAlgoNames = {"auto", "ring", "tree", "halving-doubling", "hier", "direct", "nvls"};
}  // namespace

std::string_view op_name(Op op) { return kOpNames[static_cast<size_t>(op)]; }
std::string_view algorithm_name(Algorithm a) { return kAlgoNames[static_cast<size_t>(a)]; }
std::vector<std::string> op_names() { return {kOpNames.begin(), kOpNames.end()}; }
std::vector<std::string> algorithm_names() { return {kAlgoNames.begin(), kAlgoNames.end()}; }

Op parse_op(std::string_view name, const Where& where) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == name) return static_cast<Op>(i);
  }
  // Accept nccl-tests / underscore spellings as aliases.
  const std::string n = to_lower(name);
  if (n == "allreduce" || n == "all_reduce") return Op::kAllReduce;
  if (n == "allgather" || n == "all_gather") return Op::kAllGather;
  if (n == "reducescatter" || n == "reduce_scatter") return Op::kReduceScatter;
  if (n == "alltoall" || n == "all_to_all") return Op::kAllToAll;
  if (n == "sendrecv" || n == "send_recv" || n == "p2p") return Op::kSendRecv;
  throw InputError(where, "unknown collective '" + std::string(name) + "'", suggest(name, op_names()));
}

Algorithm parse_algorithm(std::string_view name, const Where& where) {
  for (size_t i = 0; i < kAlgoNames.size(); ++i) {
    if (kAlgoNames[i] == name) return static_cast<Algorithm>(i);
  }
  if (name == "hierarchical") return Algorithm::kHierarchical;
  if (name == "rhd" || name == "recursive-halving-doubling") return Algorithm::kHalvingDoubling;
  throw InputError(where, "unknown algorithm '" + std::string(name) + "'", suggest(name, algorithm_names()));
}

std::vector<Algorithm> algorithms_for(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return {Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling, Algorithm::kHierarchical, Algorithm::kNvls};
    case Op::kAllGather:
    case Op::kReduceScatter:
      return {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kHierarchical, Algorithm::kNvls};
    case Op::kAllToAll:
      return {Algorithm::kDirect};
    case Op::kBroadcast:
    case Op::kReduce:
      return {Algorithm::kRing, Algorithm::kTree};
    case Op::kSendRecv:
      return {Algorithm::kDirect};
  }
  return {};
}

std::vector<Algorithm> nccl_algorithms(Op op) {
  switch (op) {
    case Op::kAllReduce:
    case Op::kBroadcast:
    case Op::kReduce: return {Algorithm::kRing, Algorithm::kTree};
    case Op::kAllGather:
    case Op::kReduceScatter: return {Algorithm::kRing};
    case Op::kAllToAll:
    case Op::kSendRecv: return {Algorithm::kDirect};
  }
  return {};
}

double bus_factor(Op op, int64_t n) {
  const double dn = static_cast<double>(n);
  switch (op) {
    case Op::kAllReduce: return 2.0 * (dn - 1) / dn;
    case Op::kAllGather:
    case Op::kReduceScatter:
    case Op::kAllToAll: return (dn - 1) / dn;
    case Op::kBroadcast:
    case Op::kReduce:
    case Op::kSendRecv: return 1.0;
  }
  return 1.0;
}

Bandwidths nccl_bandwidths(Op op, Bytes size, int64_t n, Time t) {
  const Bandwidth algbw = size / t;
  return {algbw, algbw * bus_factor(op, n)};
}

}  // namespace orrery::coll
