#include "decentral/algorithm.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <fmt/format.h>

#include "core/assert.h"
#include "core/strings.h"

namespace orrery::decentral {

namespace {
std::atomic<uint64_t> g_next_mixing_id{1};
}  // namespace

SparseMixing::SparseMixing(const Eigen::MatrixXd& w) : dense_(w), id_(g_next_mixing_id.fetch_add(1, std::memory_order_relaxed)) {
  ORRERY_CHECK(w.rows() == w.cols());
  const auto n = static_cast<NodeIndex>(w.rows());
  start_.reserve(static_cast<size_t>(n) + 1);
  diag_.resize(static_cast<size_t>(n));
  start_.push_back(0);
  for (NodeIndex i = 0; i < n; ++i) {
    for (NodeIndex j = 0; j < n; ++j) {
      const double v = w(i, j);
      if (v == 0.0) continue;
      entries_.push_back(Entry{j, v});
      if (i != j) ++messages_;
    }
    diag_[static_cast<size_t>(i)] = w(i, i);
    start_.push_back(static_cast<int64_t>(entries_.size()));
  }
}

namespace {

// Columns per block of SparseMixing::apply: the block of every input row (n x block doubles) stays in L2
// (~512 KiB) while each row is read once per out-neighbour, instead of streaming the whole n x d input
// from memory deg + 1 times (softmax on Fashion-MNIST: 256 x 7,850 doubles = 16 MB per matrix).
Eigen::Index block_columns(NodeIndex n, Eigen::Index d) {
  constexpr Eigen::Index kL2Doubles = 64 * 1024;
  const Eigen::Index b = std::max<Eigen::Index>(8, kL2Doubles / std::max<Eigen::Index>(n, 1)) / 8 * 8;
  return std::min(d, b);
}

}  // namespace

// Per element, out(i, k) = w_0 in(j_0, k) + w_1 in(j_1, k) + ... in the row's entry order, whatever the
// blocking (the MPI runtime relies on these exact values).
template <class Epilogue>
void SparseMixing::apply_blocked(const NodeMatrix& in, NodeMatrix& out, Epilogue&& epilogue) const {
  ORRERY_ASSERT(&in != &out);
  ORRERY_ASSERT(in.rows() == size());
  out.resize(in.rows(), in.cols());
  const Eigen::Index d = in.cols();
  const Eigen::Index block = block_columns(size(), d);
  for (Eigen::Index c0 = 0; c0 < d; c0 += block) {
    const Eigen::Index c1 = std::min(d, c0 + block);
    for (NodeIndex i = 0; i < size(); ++i) {
      double* o = out.row(i).data();
      const Entry* begin = row_begin(i);
      const Entry* end = row_end(i);
      // kLanes columns at a time summed in registers over the row's entries (one load per input value,
      // no load and store of the output per entry).
      constexpr Eigen::Index kLanes = 8;
      Eigen::Index k = c0;
      for (; k + kLanes <= c1; k += kLanes) {
        double acc[kLanes];
        const double* src = in.row(begin->col).data() + k;
        for (Eigen::Index q = 0; q < kLanes; ++q) acc[q] = begin->w * src[q];
        for (const Entry* e = begin + 1; e != end; ++e) {
          const double* s = in.row(e->col).data() + k;
          const double w = e->w;
          for (Eigen::Index q = 0; q < kLanes; ++q) acc[q] += w * s[q];
        }
        for (Eigen::Index q = 0; q < kLanes; ++q) o[k + q] = acc[q];
      }
      for (; k < c1; ++k) {
        double acc = begin->w * in(begin->col, k);
        for (const Entry* e = begin + 1; e != end; ++e) acc += e->w * in(e->col, k);
        o[k] = acc;
      }
      epilogue(i, c0, c1, o);
    }
  }
}

void SparseMixing::apply(const NodeMatrix& in, NodeMatrix& out) const {
  apply_blocked(in, out, [](NodeIndex, Eigen::Index, Eigen::Index, double*) {});
}

void SparseMixing::apply_update(const NodeMatrix& in, NodeMatrix& out, double scale, const NodeMatrix& add,
                                const NodeMatrix* sub) const {
  ORRERY_ASSERT(&add != &out && sub != &out);
  apply_blocked(in, out, [&](NodeIndex i, Eigen::Index c0, Eigen::Index c1, double* o) {
    const double* a = add.row(i).data();
    if (sub == nullptr) {
      for (Eigen::Index k = c0; k < c1; ++k) o[k] = o[k] + scale * a[k];
      return;
    }
    const double* b = sub->row(i).data();
    for (Eigen::Index k = c0; k < c1; ++k) o[k] = (o[k] + scale * a[k]) - b[k];
  });
}

void SparseMixing::apply_power(const NodeMatrix& in, NodeMatrix& out, NodeMatrix& tmp, int64_t rounds) const {
  ORRERY_ASSERT(rounds >= 1);
  // Alternate buffers so that the last round lands in `out`.
  const NodeMatrix* src = &in;
  for (int64_t r = 0; r < rounds; ++r) {
    NodeMatrix& dst = ((rounds - 1 - r) % 2 == 0) ? out : tmp;
    apply(*src, dst);
    src = &dst;
  }
}

std::string_view need_name(MatrixNeed need) {
  switch (need) {
    case MatrixNeed::kNone: return "none";
    case MatrixNeed::kDoubly: return "doubly stochastic W";
    case MatrixNeed::kRow: return "row-stochastic A";
    case MatrixNeed::kColumn: return "column-stochastic B";
    case MatrixNeed::kRowAndColumn: return "row-stochastic A and column-stochastic B";
  }
  return "none";
}

void add_gossip_bytes(StepContext& ctx, const SparseMixing& m, int64_t doubles_per_message) {
  ctx.bytes += m.messages() * doubles_per_message * 8;
}

std::vector<RandomStream> per_node_streams(const RandomStream& rng, std::string_view purpose, NodeIndex n) {
  std::vector<RandomStream> out;
  out.reserve(static_cast<size_t>(n));
  for (NodeIndex i = 0; i < n; ++i) out.push_back(rng.child(fmt::format("{}/{}", purpose, i)));
  return out;
}

bool nearly_equal_rows(const Eigen::RowVectorXd& a, const Eigen::RowVectorXd& b, double scale) {
  // A diverged run (a step size or regularizer so large that the iterates overflow) holds inf or NaN:
  // no identity can be checked on it, and its metrics report the divergence (inf / nan) as the result.
  const double gap = (a - b).cwiseAbs().maxCoeff();
  if (!std::isfinite(scale) || !std::isfinite(gap)) return true;
  return gap <= 1e-9 * (1.0 + scale);
}

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> all = [] {
    std::vector<AlgorithmInfo> v;
    register_dsgd_family(v);
    register_tracking_family(v);
    register_pull_diag_family(v);
    register_federated_family(v);
    register_choco(v);
    return v;
  }();
  return all;
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> names;
  for (const AlgorithmInfo& a : algorithms()) names.push_back(a.name);
  return names;
}

const AlgorithmInfo& find_algorithm(std::string_view name_in, const Where& where) {
  const std::string name = to_lower(trim(name_in));
  for (const AlgorithmInfo& a : algorithms()) {
    if (a.name == name) return a;
  }
  throw InputError(where, fmt::format("unknown algorithm '{}'", name), suggest(name, algorithm_names()));
}

}  // namespace orrery::decentral
