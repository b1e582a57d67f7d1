#include "decentral/algorithm.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/assert.h"
#include "core/strings.h"

namespace orrery::decentral {

SparseMixing::SparseMixing(const Eigen::MatrixXd& w) : dense_(w) {
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

void SparseMixing::apply(const NodeMatrix& in, NodeMatrix& out) const {
  ORRERY_ASSERT(&in != &out);
  ORRERY_ASSERT(in.rows() == size());
  out.resize(in.rows(), in.cols());
  const Eigen::Index d = in.cols();
  for (NodeIndex i = 0; i < size(); ++i) {
    double* o = out.row(i).data();
    const Entry* e = row_begin(i);
    const Entry* end = row_end(i);
    {
      const double* src = in.row(e->col).data();
      const double w = e->w;
      for (Eigen::Index k = 0; k < d; ++k) o[k] = w * src[k];
    }
    for (++e; e != end; ++e) {
      const double* src = in.row(e->col).data();
      const double w = e->w;
      for (Eigen::Index k = 0; k < d; ++k) o[k] += w * src[k];
    }
  }
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

bool nearly_equal_rows(const Eigen::RowVectorXd& a, const Eigen::RowVectorXd& b, double scale) {
  return (a - b).cwiseAbs().maxCoeff() <= 1e-9 * (1.0 + scale);
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
