#include "decentral/mixing.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/assert.h"
#include "core/strings.h"

namespace orrery::decentral {

namespace {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

Index idx(NodeIndex v) { return static_cast<Index>(v); }

void require_dense(const Graph& g, const Where& where) {
  if (g.num_nodes() > kMaxDenseNodes) {
    throw InputError(where, fmt::format("dense mixing matrices are limited to {} nodes, got {}", kMaxDenseNodes,
                                        g.num_nodes()));
  }
}

// Fills the diagonal so that every row sums to 1.
void fill_diagonal_rows(MatrixXd& w) {
  for (Index i = 0; i < w.rows(); ++i) {
    w(i, i) = 0.0;
    w(i, i) = 1.0 - w.row(i).sum();
  }
}

}  // namespace

std::vector<std::string> mixing_names() {
  return {"metropolis", "uniform", "pull", "push", "lazy-metropolis", "lazy-uniform", "lazy-pull", "lazy-push"};
}

MixingSpec parse_mixing(std::string_view name_in, const Where& where) {
  const std::string name = to_lower(trim(name_in));
  std::string_view base = name;
  MixingSpec s;
  if (base.starts_with("lazy-")) {
    s.lazy = true;
    base.remove_prefix(5);
  }
  if (base == "metropolis" || base == "metropolis-hastings") {
    s.rule = MixingRule::kMetropolis;
  } else if (base == "uniform") {
    s.rule = MixingRule::kUniform;
  } else if (base == "pull" || base == "row") {
    s.rule = MixingRule::kPull;
  } else if (base == "push" || base == "column") {
    s.rule = MixingRule::kPush;
  } else {
    throw InputError(where, fmt::format("unknown mixing rule '{}'", name), suggest(name, mixing_names()));
  }
  return s;
}

std::string mixing_name(const MixingSpec& spec) {
  const char* base = "metropolis";
  switch (spec.rule) {
    case MixingRule::kMetropolis: base = "metropolis"; break;
    case MixingRule::kUniform: base = "uniform"; break;
    case MixingRule::kPull: base = "pull"; break;
    case MixingRule::kPush: base = "push"; break;
  }
  return (spec.lazy ? "lazy-" : "") + std::string(base);
}

MatrixXd metropolis_hastings(const Graph& g, const Where& where) {
  require_dense(g, where);
  if (!g.is_symmetric()) {
    throw InputError(where, fmt::format("Metropolis–Hastings weights need an undirected graph; '{}' is directed", g.name()),
                     "use 'pull' (row-stochastic) or 'push' (column-stochastic)");
  }
  MatrixXd w = MatrixXd::Zero(idx(g.num_nodes()), idx(g.num_nodes()));
  for (const Edge& e : g.edges()) {
    w(idx(e.to), idx(e.from)) = 1.0 / (1.0 + std::max(g.out_degree(e.to), g.out_degree(e.from)));
  }
  fill_diagonal_rows(w);
  return w;
}

MatrixXd uniform_weights(const Graph& g, const Where& where) {
  require_dense(g, where);
  if (!g.is_balanced()) {
    throw InputError(where,
                     fmt::format("uniform weights need in-degree == out-degree at every node; '{}' is not balanced", g.name()),
                     "use 'metropolis' for undirected graphs, 'pull' or 'push' for directed ones");
  }
  NodeIndex d_max = 0;
  for (NodeIndex v = 0; v < g.num_nodes(); ++v) d_max = std::max(d_max, g.in_degree(v));
  MatrixXd w = MatrixXd::Zero(idx(g.num_nodes()), idx(g.num_nodes()));
  const double weight = 1.0 / (1.0 + d_max);
  for (const Edge& e : g.edges()) w(idx(e.to), idx(e.from)) = weight;
  fill_diagonal_rows(w);
  return w;
}

MatrixXd pull_matrix(const Graph& g, const Where& where) {
  require_dense(g, where);
  MatrixXd a = MatrixXd::Zero(idx(g.num_nodes()), idx(g.num_nodes()));
  for (NodeIndex i = 0; i < g.num_nodes(); ++i) {
    const double weight = 1.0 / (1.0 + g.in_degree(i));
    a(idx(i), idx(i)) = weight;
    for (NodeIndex j : g.in_neighbors(i)) a(idx(i), idx(j)) = weight;
  }
  return a;
}

MatrixXd push_matrix(const Graph& g, const Where& where) {
  require_dense(g, where);
  MatrixXd b = MatrixXd::Zero(idx(g.num_nodes()), idx(g.num_nodes()));
  for (NodeIndex j = 0; j < g.num_nodes(); ++j) {
    const double weight = 1.0 / (1.0 + g.out_degree(j));
    b(idx(j), idx(j)) = weight;
    for (NodeIndex i : g.out_neighbors(j)) b(idx(i), idx(j)) = weight;
  }
  return b;
}

MatrixXd lazy(const MatrixXd& w) {
  return 0.5 * (MatrixXd::Identity(w.rows(), w.cols()) + w);
}

MatrixXd mixing_matrix(const Graph& g, const MixingSpec& spec, const Where& where) {
  MatrixXd w;
  switch (spec.rule) {
    case MixingRule::kMetropolis: w = metropolis_hastings(g, where); break;
    case MixingRule::kUniform: w = uniform_weights(g, where); break;
    case MixingRule::kPull: w = pull_matrix(g, where); break;
    case MixingRule::kPush: w = push_matrix(g, where); break;
  }
  return spec.lazy ? lazy(w) : w;
}

bool is_row_stochastic(const MatrixXd& w, double tol) {
  if (w.rows() != w.cols() || w.rows() == 0) return false;
  if (w.minCoeff() < -tol) return false;
  return ((w.rowwise().sum().array() - 1.0).abs() <= tol).all();
}

bool is_column_stochastic(const MatrixXd& w, double tol) {
  if (w.rows() != w.cols() || w.rows() == 0) return false;
  if (w.minCoeff() < -tol) return false;
  return ((w.colwise().sum().array() - 1.0).abs() <= tol).all();
}

bool is_doubly_stochastic(const MatrixXd& w, double tol) {
  return is_row_stochastic(w, tol) && is_column_stochastic(w, tol);
}

Graph support_graph(const MatrixXd& w, double tol) {
  ORRERY_CHECK(w.rows() == w.cols() && w.rows() <= kMaxNodes);
  std::vector<Edge> edges;
  for (Index i = 0; i < w.rows(); ++i) {
    for (Index j = 0; j < w.cols(); ++j) {
      if (i != j && std::abs(w(i, j)) > tol) edges.push_back({static_cast<NodeIndex>(j), static_cast<NodeIndex>(i)});
    }
  }
  return Graph(static_cast<NodeIndex>(w.rows()), std::move(edges), "support");
}

VectorXd perron_left(const MatrixXd& a, const Where& where) {
  if (!is_row_stochastic(a, 1e-9)) throw InputError(where, "the Perron vector pi^T A = pi^T needs a row-stochastic A");
  const Graph support = support_graph(a);
  if (!is_strongly_connected(support)) {
    throw InputError(where,
                     fmt::format("the matrix is reducible (its graph has {} strongly connected components), so its "
                                 "Perron vector is not unique",
                                 strongly_connected_components(support).count),
                     "use a strongly connected graph");
  }
  // (A^T - I) pi = 0 has a one-dimensional solution space for irreducible A; replacing the last
  // equation (which is minus the sum of the others) by sum(pi) = 1 makes the system nonsingular.
  const Index n = a.rows();
  MatrixXd m = a.transpose() - MatrixXd::Identity(n, n);
  m.row(n - 1).setOnes();
  VectorXd rhs = VectorXd::Zero(n);
  rhs(n - 1) = 1.0;
  VectorXd pi = m.partialPivLu().solve(rhs);
  pi /= pi.sum();
  return pi;
}

VectorXd perron_right(const MatrixXd& b, const Where& where) {
  if (!is_column_stochastic(b, 1e-9)) throw InputError(where, "the right Perron vector B pi = pi needs a column-stochastic B");
  return perron_left(b.transpose(), where);
}

double beta_row(const MatrixXd& a, const VectorXd& pi) {
  ORRERY_CHECK(a.rows() == a.cols() && a.rows() == pi.size());
  ORRERY_CHECK(pi.minCoeff() > 0.0);
  const Index n = a.rows();
  const VectorXd s = pi.array().sqrt();
  const VectorXd s_inv = s.cwiseInverse();
  const MatrixXd centered = a - VectorXd::Ones(n) * pi.transpose();
  const MatrixXd m = s.asDiagonal() * centered * s_inv.asDiagonal();
  if (n == 1) return std::abs(m(0, 0));
  // The largest singular value as the square root of M^T M's largest eigenvalue: accurate to rounding
  // relative to ||M||_2 (eigenvalue errors are eps ||M^T M|| = eps ||M||^2), which is all beta needs,
  // and the symmetric solver is already here for lambda2 (an SVD nearly tripled this file's compile time).
  const Eigen::SelfAdjointEigenSolver<MatrixXd> es(m.transpose() * m, Eigen::EigenvaluesOnly);
  return std::sqrt(std::max(0.0, es.eigenvalues()(n - 1)));
}

double second_eigenvalue_modulus(const MatrixXd& w) {
  ORRERY_CHECK(w.rows() == w.cols());
  if (w.rows() <= 1) return 0.0;
  std::vector<double> moduli;
  if (w.isApprox(w.transpose(), 1e-14)) {
    const Eigen::SelfAdjointEigenSolver<MatrixXd> es(w, Eigen::EigenvaluesOnly);
    for (Index i = 0; i < w.rows(); ++i) moduli.push_back(std::abs(es.eigenvalues()(i)));
  } else {
    const Eigen::EigenSolver<MatrixXd> es(w, false);
    for (Index i = 0; i < w.rows(); ++i) moduli.push_back(std::abs(es.eigenvalues()(i)));
  }
  std::sort(moduli.begin(), moduli.end(), std::greater<>());
  return moduli[1];
}

std::optional<int64_t> theory_rounds(double kappa, NodeIndex n, double beta) {
  ORRERY_CHECK(kappa >= 1.0 && n >= 1);
  if (!(beta < 1.0)) return std::nullopt;
  const double r = std::ceil(3.0 * (1.0 + std::log(kappa) + std::log(static_cast<double>(n))) / (1.0 - beta));
  return static_cast<int64_t>(r);
}

MixingMetrics mixing_metrics(const MatrixXd& w, const Where& where, double tol) {
  if (w.rows() != w.cols() || w.rows() == 0) {
    throw InputError(where, fmt::format("a mixing matrix must be square and non-empty, got {}x{}", w.rows(), w.cols()));
  }
  MixingMetrics m;
  m.nodes = static_cast<NodeIndex>(w.rows());
  m.row_stochastic = is_row_stochastic(w, tol);
  m.column_stochastic = is_column_stochastic(w, tol);
  m.doubly_stochastic = m.row_stochastic && m.column_stochastic;
  m.symmetric = w.isApprox(w.transpose(), 1e-14);
  if (!m.row_stochastic && !m.column_stochastic) {
    throw InputError(where, "the mixing matrix is neither row- nor column-stochastic");
  }
  // A column-stochastic B is measured as the row-stochastic B^T.
  const MatrixXd a = m.row_stochastic ? w : MatrixXd(w.transpose());
  m.pi = perron_left(a, where);
  m.pi_min = m.pi.minCoeff();
  m.pi_max = m.pi.maxCoeff();
  m.kappa = m.pi_max / m.pi_min;
  m.beta = beta_row(a, m.pi);
  m.spectral_gap = 1.0 - m.beta;
  m.lambda2 = second_eigenvalue_modulus(w);
  m.theory_rounds = theory_rounds(m.kappa, m.nodes, m.beta);
  return m;
}

MatrixXd period_product(const GraphSequence& seq, const MixingSpec& spec, int64_t rounds, const Where& where) {
  ORRERY_CHECK(rounds >= 0);
  MatrixXd p = MatrixXd::Identity(idx(seq.num_nodes()), idx(seq.num_nodes()));
  for (int64_t t = 0; t < rounds; ++t) p = mixing_matrix(seq.graph_at(t), spec, where) * p;
  return p;
}

}  // namespace orrery::decentral
