// Optimization problems with real gradients for decentralized and federated algorithms.
//
// Model card
//   What      n nodes jointly minimise f(x) = (1/n) sum_i f_i(x) over x in R^d; node i can only evaluate
//             (stochastic) gradients of its own f_i. Node states are the rows of an n x d row-major Eigen
//             matrix (NodeMatrix), so one node's parameters are contiguous.
//   Problems  quadratic          f_i(x) = 0.5 h_i ||x - b_i||^2 (closed-form checks), with optional additive
//                                N(0, s^2) gradient noise per coordinate (the noise-floor check).
//             least-squares      f_i(x) = (1/m_i) sum_{l in node i} 0.5 (a_l^T x - t_l)^2 on synthetic data
//                                a_l ~ N(0, I_d), t_l = a_l^T x_true + noise N(0, 0.1^2), x_true ~ N(0, I_d).
//             logistic-nonconvex the papers' synthetic setup (pkumelon/PushPull, synthetic_experiments;
//                                Push-Pull linear speedup, Liang, Luo, Yuan, arXiv 2506.18075; PULL-DIAG-GT,
//                                arXiv 2506.04600): x_opt ~ N(0, I_d), h_l ~ N(0, I_d), label y_l = +1 with
//                                probability 1/(1 + exp(-h_l^T x_opt)) else -1; f_i(x) = (1/m_i) sum
//                                log(1 + exp(-y_l h_l^T x)) + rho sum_j x_j^2 / (1 + x_j^2). Gradient
//                                -(1/m) sum y_l h_l / (1 + exp(y_l h_l^T x)) + rho 2 x_j / (1 + x_j^2)^2.
//                                Defaults d = 10, 1.44M samples split contiguously, rho = 0.01; initial
//                                x_i = 0.01 N(0, I_d), independently per node.
//             softmax            multinomial logistic regression on a Dataset: logits W^T a + b, W (p x C),
//                                cross-entropy, optional L2 weight decay lambda/2 ||W||^2; x0 = 0.
//             mlp                one hidden ReLU layer of H units: logits W2^T relu(W1^T a + b1) + b2;
//                                x0: Glorot-uniform weights (the same on every node), zero biases.
//   Minibatch A GradientOracle draws, per node and per call, `batch` distinct local samples uniformly
//             without replacement (Floyd's algorithm: O(batch) draws and memory, exactly uniform subsets)
//             from RandomStream::derive(seed, "decentral.minibatch").child(node). batch <= 0 or >= m_i
//             gives the exact local gradient.
//   Metrics   full_objective(): f and grad f at one point on all the data (no noise); test accuracy on
//             the data set's test split where there is one.
//   Storage   Sample features are stored as float (synthetic rows are drawn in double and rounded once, so
//             the data set *is* the float rows; a d = 10 row is 40 bytes); every product, sum, exp and log
//             is computed in double. Full-data metrics and minibatch gradients use the same rows, so the
//             gradients are exact for that data set (finite differences agree to 1e-7).
//   Speed     GradientOracle::gradients draws every node's minibatch first and hands them to
//             Problem::node_gradients at once: logistic-nonconvex then reads the rows of all nodes as one
//             stream with software prefetches running ahead (a minibatch row is a random read from the
//             whole data set, which is far larger than L2), and keeps the dimension a compile-time
//             constant for d <= 16. Softmax/MLP minibatch products run in float GEMMs
//             (Eigen), full-data evaluations in double.
//   Alloc     Gradients evaluate the data in chunks of kChunk samples through a caller-owned Scratch, whose
//             buffers keep their size between calls: no allocation in the inner loop after the first call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "core/random.h"
#include "decentral/dataset.h"
#include "decentral/graph.h"

namespace orrery::decentral {

using NodeMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMatrixXd = NodeMatrix;

// Reusable buffers for gradient evaluation (one per thread of evaluation).
struct Scratch {
  RowMatrixXd chunk;  // gathered features
  RowMatrixXd a, b, c;
  Eigen::VectorXd u, v;
  Eigen::VectorXd node_grad;  // full_objective's per-node gradient
  std::vector<int32_t> ids;
  std::vector<const float*> rows;  // minibatch rows read in place
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> fchunk, fa, fb, fc, fw, fw2, fgw,
      fgw2;  // float GEMM operands (softmax/MLP minibatches)
};

// Local sample positions (indices into [0, local_size(i))); `size < 0` means all local samples.
struct Batch {
  const int32_t* local = nullptr;
  int64_t size = -1;
  bool want_loss = true;  // false: the returned loss may be 0 (training steps skip computing it)
};

class Problem {
 public:
  virtual ~Problem() = default;
  virtual std::string name() const = 0;
  virtual int64_t dim() const = 0;
  virtual NodeIndex num_nodes() const = 0;
  // Samples held by node i (1 for closed-form objectives).
  virtual int64_t local_size(NodeIndex i) const = 0;
  // g (length dim, may be null) = gradient of f_i at x over the batch (plus N(0, s^2) noise drawn from
  // `noise` when the problem is noisy and noise != null). Returns f_i at x over the batch.
  virtual double local_gradient(NodeIndex i, const double* x, double* g, const Batch& batch, RandomStream* noise,
                                Scratch& s) const = 0;
  // Rows [begin, end) of g = node i's gradient at row i of x on batches[i] (noise[i], when noise is non-null,
  // as local_gradient's `noise`): the values of local_gradient for each node, in node order. Problems
  // override it to overlap the nodes' memory reads. REQUIRES: x and g are num_nodes() x dim().
  virtual void node_gradients(const NodeMatrix& x, NodeMatrix& g, NodeIndex begin, NodeIndex end, const Batch* batches,
                              RandomStream* noise, Scratch& s) const;
  // Initial node states (n x d).
  virtual NodeMatrix initial_point(uint64_t seed) const = 0;
  // Accuracy on the test split, when there is one.
  virtual std::optional<double> test_accuracy(const double* /*x*/, Scratch& /*s*/) const { return std::nullopt; }
};

// out[k] = exp(-|x[k]|) for k < n, two lanes at a time (the logistic kernels' one exp per sample):
// -|x| = (128 m + j) ln2 / 128 + r with |r| <= ln2 / 256 (Cody-Waite), 2^(j/128) from a 128-entry
// table, exp(r) by its degree-5 Taylor polynomial, 2^m added into the exponent field. Within 1 ulp of
// the exact value for |x| <= 708 (tested against std::exp); |x| > 708 gives exp(-708) ~ 3e-308
// instead of a smaller subnormal, an absolute difference below 1e-307.
void exp_neg_abs(const double* x, double* out, int64_t n);

// The logistic kernels run in AVX2 where the CPU has it and in baseline SSE2 otherwise, with the same
// bits either way; true forces the baseline (tests compare the two).
void force_baseline_kernels(bool on);

// f(x) = (1/n) sum_i f_i(x) on all the data, without noise; fills grad (length dim) when non-null.
double full_objective(const Problem& p, const double* x, double* grad, Scratch& s);

// Per-node minibatch streams and index arrays of one run.
class GradientOracle {
 public:
  // batch <= 0: exact local gradients. Gradient noise (noisy problems) comes from the same node streams.
  GradientOracle(const Problem& p, int64_t batch, uint64_t seed);
  // g = stochastic gradient of f_i at x on a fresh minibatch; returns the minibatch loss.
  double gradient(NodeIndex i, const double* x, double* g);
  // Every node's gradient at its row of x.
  void gradients(const NodeMatrix& x, NodeMatrix& g);
  void set_batch(int64_t batch) { batch_ = batch; }
  int64_t batch() const { return batch_; }
  // Samples processed so far (for compute-time accounting).
  int64_t samples_processed() const { return samples_; }
  const Problem& problem() const { return p_; }
  Scratch& scratch() { return scratch_; }

 private:
  // Node i's next minibatch (Floyd's algorithm) into `out` (batch_ slots), or the full local batch.
  Batch draw(NodeIndex i, int32_t* out);

  const Problem& p_;
  int64_t batch_;
  std::vector<RandomStream> rng_;
  std::vector<uint64_t> seen_;      // Floyd's sampling: a bitmap of the drawn positions (cleared after use)
  std::vector<int32_t> batch_ids_;  // the current minibatches, batch_ slots per node
  std::vector<Batch> batches_;      // per node
  Scratch scratch_;
  int64_t samples_ = 0;
};

// --- Problems -------------------------------------------------------------------------------------------

struct QuadraticSpec {
  std::vector<double> h;               // curvature per node (n values); f_i = 0.5 h_i ||x - b_i||^2 + c_i^T x
  std::vector<std::vector<double>> c;  // linear terms (empty: none); with h_i = 0, g_i = c_i is constant
  std::vector<std::vector<double>> b;  // minimiser per node (n vectors of length d)
  double noise_sigma = 0.0;            // N(0, s^2) per coordinate added to stochastic gradients
  std::vector<std::vector<double>> x0; // initial states (empty: zeros)
};
std::unique_ptr<Problem> make_quadratic(QuadraticSpec spec);

struct SyntheticSpec {
  NodeIndex nodes = 16;
  int64_t dim = 10;
  int64_t samples = 1'440'000;  // in total, split contiguously (floor(i N / n) boundaries)
  double rho = 0.01;            // nonconvex regularizer weight (logistic)
  double noise = 0.1;           // target noise (least squares)
  uint64_t data_seed = 42;
};
std::unique_ptr<Problem> make_logistic_nonconvex(const SyntheticSpec& spec);
std::unique_ptr<Problem> make_least_squares(const SyntheticSpec& spec);

enum class ClassifierKind { kSoftmax, kMlp };
struct ClassifierSpec {
  ClassifierKind kind = ClassifierKind::kSoftmax;
  int64_t hidden = 64;       // MLP hidden units
  double weight_decay = 0;   // lambda
  NodeIndex nodes = 16;
  PartitionSpec partition;
  uint64_t data_seed = 42;   // partition and initial weights
};
// The data set is shared (not copied) between problems built from it.
std::unique_ptr<Problem> make_classifier(std::shared_ptr<const TrainTest> data, const ClassifierSpec& spec,
                                         const Where& where = {});

}  // namespace orrery::decentral
