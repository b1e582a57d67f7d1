// Mixing (gossip) matrices for a communication graph, their stochasticity checks and the metrics that
// govern how fast gossip averages.
//
// Model card
//   What      One gossip round is x^+ = W x: node i replaces its value by sum_j W(i, j) x_j, and W(i, j)
//             may be non-zero only when j == i or the graph has the edge j -> i (decentral/graph.h).
//   Rules     Metropolis–Hastings (undirected graphs): W(i,j) = 1 / (1 + max(d_i, d_j)) on edges,
//               W(i,i) = 1 - sum_{j != i} W(i,j). Symmetric and doubly stochastic.
//             Uniform (balanced graphs, in-degree == out-degree at every node): W(i,j) = 1/(d_max + 1) on
//               edges, the rest on the diagonal; doubly stochastic, and exactly 1/(deg + 1) everywhere on
//               a regular graph (ring, torus, hypercube, exponential graphs, complete).
//             Pull (row-stochastic, any digraph): A(i,j) = 1/(1 + indeg_i) for j in in(i) ∪ {i}.
//             Push (column-stochastic, any digraph): B(i,j) = 1/(1 + outdeg_j) for i in out(j) ∪ {j}.
//             Lazy variant of any rule: (I + W)/2 (same stochasticity, eigenvalues moved into [0, 1]
//               for symmetric W).
//   Metrics   As defined in ../shared/validation/decentralized.md (PULL-DIAG-GT, Liang, Chen, Luo, Yuan,
//             ICML 2025, arXiv 2506.04600). For a row-stochastic A:
//               pi       Perron vector, pi^T A = pi^T, sum pi = 1 (unique when A is irreducible);
//               kappa    max pi / min pi;
//               beta     || Pi^{1/2} (A - 1 pi^T) Pi^{-1/2} ||_2, Pi = diag(pi); spectral gap 1 - beta;
//               R        ceil(3 (1 + ln kappa + ln n) / (1 - beta)), MG-PULL-DIAG-GT's gossip rounds.
//             A column-stochastic B is measured through B^T (row-stochastic), so pi is B's right Perron
//             vector (B pi = pi). For a doubly stochastic W, pi = 1/n, kappa = 1 and
//             beta = ||W - 11^T/n||_2, the second-largest singular value of W: the consensus rate, the
//             factor by which one round at least shrinks ||x - mean||. lambda2 = the second-largest
//             |eigenvalue| is the asymptotic per-round rate; it equals beta for normal (e.g. symmetric
//             or circulant) W.
//   Numerics  Dense Eigen::MatrixXd: memory 8 n^2 bytes, metrics cost O(n^3) (an LU solve for pi, a
//             symmetric eigensolver on M^T M for beta, a general eigensolver for lambda2). Practical up
//             to a few thousand nodes; builders refuse more than kMaxDenseNodes. pi is solved exactly
//             (LU of A^T - I with one row replaced by the normalization), not by power iteration.
//   Errors    A rule that does not fit the graph (Metropolis on a directed graph, uniform on an
//             unbalanced one) and unknown rule names throw orrery::InputError with the key and a hint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "core/error.h"
#include "decentral/graph.h"

namespace orrery::decentral {

constexpr NodeIndex kMaxDenseNodes = 4096;

enum class MixingRule { kMetropolis, kUniform, kPull, kPush };

struct MixingSpec {
  MixingRule rule = MixingRule::kMetropolis;
  bool lazy = false;
};

// "metropolis" (alias "metropolis-hastings"), "uniform", "pull" (alias "row"), "push" (alias
// "column"), each optionally prefixed "lazy-". Unknown names throw InputError with a suggestion.
MixingSpec parse_mixing(std::string_view name, const Where& where);
std::string mixing_name(const MixingSpec& spec);
std::vector<std::string> mixing_names();

// The matrices. REQUIRES (InputError): g.num_nodes() <= kMaxDenseNodes, and the rule's graph
// condition (symmetric for Metropolis, balanced for uniform).
Eigen::MatrixXd metropolis_hastings(const Graph& g, const Where& where = {});
Eigen::MatrixXd uniform_weights(const Graph& g, const Where& where = {});
Eigen::MatrixXd pull_matrix(const Graph& g, const Where& where = {});
Eigen::MatrixXd push_matrix(const Graph& g, const Where& where = {});
Eigen::MatrixXd lazy(const Eigen::MatrixXd& w);  // (I + W) / 2
Eigen::MatrixXd mixing_matrix(const Graph& g, const MixingSpec& spec, const Where& where = {});

// Stochasticity: entries >= -tol and every row (column) sum within tol of 1.
bool is_row_stochastic(const Eigen::MatrixXd& w, double tol = 1e-12);
bool is_column_stochastic(const Eigen::MatrixXd& w, double tol = 1e-12);
bool is_doubly_stochastic(const Eigen::MatrixXd& w, double tol = 1e-12);

// The directed graph of W's off-diagonal support: edge j -> i when |W(i, j)| > tol.
Graph support_graph(const Eigen::MatrixXd& w, double tol = 0.0);

// pi with pi^T A = pi^T and sum 1. REQUIRES: A square, row-stochastic and irreducible (its support
// graph strongly connected); otherwise throws InputError (pi would not be unique).
Eigen::VectorXd perron_left(const Eigen::MatrixXd& a, const Where& where = {});
// pi with B pi = pi and sum 1, for a column-stochastic irreducible B.
Eigen::VectorXd perron_right(const Eigen::MatrixXd& b, const Where& where = {});
// || Pi^{1/2} (A - 1 pi^T) Pi^{-1/2} ||_2. REQUIRES: pi > 0, sizes match.
double beta_row(const Eigen::MatrixXd& a, const Eigen::VectorXd& pi);
// The second-largest modulus among the eigenvalues of a square matrix (0 for 1x1).
double second_eigenvalue_modulus(const Eigen::MatrixXd& w);
// ceil(3 (1 + ln kappa + ln n) / (1 - beta)); nullopt when beta >= 1 (no contraction).
std::optional<int64_t> theory_rounds(double kappa, NodeIndex n, double beta);

struct MixingMetrics {
  NodeIndex nodes = 0;
  bool row_stochastic = false;
  bool column_stochastic = false;
  bool doubly_stochastic = false;
  bool symmetric = false;
  Eigen::VectorXd pi;  // left Perron vector (row-stochastic) or right (column-stochastic only)
  double pi_min = 0;
  double pi_max = 0;
  double kappa = 0;
  double beta = 0;           // for doubly stochastic W: ||W - 11^T/n||_2, the consensus rate
  double spectral_gap = 0;   // 1 - beta
  double lambda2 = 0;        // second-largest |eigenvalue|, the asymptotic per-round rate
  std::optional<int64_t> theory_rounds;  // R of MG-PULL-DIAG-GT
};

// All metrics of a row- or column-stochastic irreducible matrix (tolerance `tol` for the
// stochasticity checks). Throws InputError when W is neither or is reducible.
MixingMetrics mixing_metrics(const Eigen::MatrixXd& w, const Where& where = {}, double tol = 1e-12);

// W_{k-1} ... W_1 W_0: the effect of k consecutive rounds, W_t = mixing_matrix(seq.graph_at(t)).
Eigen::MatrixXd period_product(const GraphSequence& seq, const MixingSpec& spec, int64_t rounds,
                               const Where& where = {});

}  // namespace orrery::decentral
