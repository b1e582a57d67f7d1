#include "coll/alpha_beta.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace orrery::coll {
namespace {

int64_t ceil_log2(int64_t n) {
  int64_t k = 0;
  while ((int64_t{1} << k) < n) ++k;
  return k;
}

Time seconds(double s) { return Time::seconds(s); }

}  // namespace

Time alpha_beta_time(Op op, Algorithm algo, Bytes size, const AlphaBetaParams& p) {
  const Where w{"", 0, "alpha-beta"};
  if (p.ranks < 1) throw InputError(w.with_key("ranks"), fmt::format("must be at least 1, got {}", p.ranks));
  const auto algos = algorithms_for(op);
  if (std::find(algos.begin(), algos.end(), algo) == algos.end()) {
    std::string valid;
    for (Algorithm a : algos) valid += (valid.empty() ? "" : ", ") + std::string(algorithm_name(a));
    throw InputError(w.with_key("algorithm"),
                     fmt::format("{} has no '{}' algorithm", op_name(op), algorithm_name(algo)), "valid: " + valid);
  }
  const int64_t n = p.ranks;
  if (n == 1) return Time::zero();
  const int64_t g = std::clamp<int64_t>(p.ranks_per_node, 1, n);
  const bool multi_node = n > g;
  const Level flat = multi_node ? Level{std::max(p.intra.alpha, p.inter.alpha),
                                        std::min(p.intra.bandwidth, p.inter.bandwidth * (static_cast<double>(std::max<int64_t>(1, p.inter_parallel)) / p.oversubscription))}
                                : p.intra;
  if (!(flat.bandwidth.bytes_per_second() > 0)) throw InputError(w.with_key("bandwidth"), "must be positive");
  const double S = size.to_double();
  const double dn = static_cast<double>(n);
  const double a = flat.alpha.to_seconds();
  const double B = flat.bandwidth.bytes_per_second();
  const double lg = static_cast<double>(ceil_log2(n));

  switch (algo) {
    case Algorithm::kRing:
      switch (op) {
        case Op::kAllReduce: return seconds(2 * (dn - 1) * a + 2 * (dn - 1) / dn * S / B);
        case Op::kAllGather:
        case Op::kReduceScatter: return seconds((dn - 1) * a + (dn - 1) / dn * S / B);
        case Op::kBroadcast:
        case Op::kReduce: return seconds((dn - 1) * a + S / B);
        default: break;
      }
      break;
    case Algorithm::kHalvingDoubling:
      if (op == Op::kAllReduce) return seconds(2 * lg * a + 2 * (dn - 1) / dn * S / B);
      return seconds(lg * a + (dn - 1) / dn * S / B);
    case Algorithm::kTree:
      if (op == Op::kAllReduce) return seconds(2 * lg * a + 2 * S / B);
      return seconds(lg * a + S / B);
    case Algorithm::kHierarchical: {
      const double dg = static_cast<double>(g);
      const double dm = static_cast<double>((n + g - 1) / g);
      const double a1 = p.intra.alpha.to_seconds();
      const double b1 = p.intra.bandwidth.bytes_per_second();
      const double a2 = p.inter.alpha.to_seconds();
      const double b2 = p.inter.bandwidth.bytes_per_second() / p.oversubscription;
      const double k = op == Op::kAllReduce ? 2.0 : 1.0;
      const double intra = k * ((dg - 1) * a1 + (dg - 1) / dg * S / b1);
      const double inter = dm > 1 ? k * ((dm - 1) * a2 + (dm - 1) / dm * (S / dg) / b2) : 0.0;
      return seconds(intra + inter);
    }
    case Algorithm::kDirect: {
      if (op == Op::kSendRecv) return seconds(a + S / B);
      // all-to-all: the (g-1) peers in the node over level 1, the (n-g) others over level 2.
      const double dg = static_cast<double>(g);
      const double b1 = p.intra.bandwidth.bytes_per_second();
      const double b2 = p.inter.bandwidth.bytes_per_second() / p.oversubscription;
      const double t_intra = (dg - 1) / dn * S / b1;
      const double t_inter = multi_node ? (dn - dg) / dn * S / b2 : 0.0;
      return seconds((dn - 1) * a + std::max(t_intra, t_inter));
    }
    case Algorithm::kNvls: {
      // In-switch reduction and multicast (coll/programs.cc NvlsProgram): one switch crossing per phase,
      // (n+1)/n S per direction for all-reduce, S for reduce-scatter and all-gather.
      if (multi_node) {
        throw InputError(w.with_key("algorithm"),
                         fmt::format("nvls reduces in one NVLink switch: {} ranks span {} nodes of {}", n, (n + g - 1) / g, g),
                         "use ring, tree or hier across nodes");
      }
      if (op == Op::kAllReduce) return seconds(2 * a + (dn + 1) / dn * S / B);
      return seconds(a + S / B);
    }
    case Algorithm::kAuto: break;
  }
  throw InputError(w.with_key("algorithm"), fmt::format("{} has no '{}' algorithm", op_name(op), algorithm_name(algo)));
}

Algorithm choose_algorithm(Op op, Bytes size, const AlphaBetaParams& p) {
  Algorithm best = nccl_algorithms(op).front();
  Time best_t = Time::max();
  for (Algorithm a : nccl_algorithms(op)) {
    const Time t = alpha_beta_time(op, a, size, p);
    if (t < best_t) {
      best_t = t;
      best = a;
    }
  }
  return best;
}

}  // namespace orrery::coll
