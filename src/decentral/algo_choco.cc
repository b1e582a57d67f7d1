// CHOCO-SGD: decentralized SGD with compressed gossip over a doubly stochastic W.
//
//   x_i^{+1/2} = x_i - a g_i(x_i)
//   q_i = C(x_i^{+1/2} - xhat_i)             (the only message node i sends, to every out-neighbour)
//   xhat_j <- xhat_j + q_j                    (every node keeps the public copies of its in-neighbours)
//   x_i^+ = x_i^{+1/2} + gamma sum_j W(i, j) (xhat_j - xhat_i)
// xhat starts at 0. With the identity compressor and gamma = 1 this is exact gossip x^+ = W x^{+1/2}.
// The difference x - xhat plays the role of error feedback: what C drops is sent later. Node i's random
// compressors (rand-k, QSGD) draw from its own stream (child "compress/i" of the algorithm's), so a node's
// message depends only on its own values and the MPI runtime compresses each row on its owner.
// Koloskova, Stich, Jaggi, "Decentralized stochastic optimization and gossip algorithms with compressed
// communication", ICML 2019 (Algorithm 2).
#include "decentral/algorithm.h"

namespace orrery::decentral {

namespace {

class Choco final : public Algorithm {
 public:
  void init(const NodeMatrix& x0, StepContext& ctx) override {
    x_ = x0;
    rng_ = per_node_streams(ctx.rng, "compress", static_cast<NodeIndex>(x0.rows()));
    xhat_ = NodeMatrix::Zero(x0.rows(), x0.cols());
    g_.resizeLike(x0);
    t_.resizeLike(x0);
    diff_.resize(x0.cols());
    q_.resize(x0.cols());
  }
  void step(int64_t k, StepContext& ctx) override {
    const SparseMixing& w = ctx.mix.W(k);
    const int64_t d = x_.cols();
    ctx.gradients(x_, g_);
    x_ -= ctx.params.lr * g_;
    // Public copies of the other processes' nodes are never read here: gossip fetches those rows.
    const auto n = static_cast<NodeIndex>(x_.rows());
    for (NodeIndex i = ctx.owned_begin(); i < ctx.owned_end(n); ++i) {
      diff_ = x_.row(i) - xhat_.row(i);
      compress(ctx.params.compressor, diff_.data(), q_.data(), d, rng_[static_cast<size_t>(i)], idx_);
      xhat_.row(i) += q_;
    }
    ctx.gossip(w, xhat_, t_);
    x_ += ctx.params.gamma * (t_ - xhat_);
    ctx.bytes += w.messages() * compressed_bytes(ctx.params.compressor, d);
  }
  const NodeMatrix& iterates() override { return x_; }

 private:
  NodeMatrix x_, xhat_, g_, t_;
  Eigen::RowVectorXd diff_, q_;
  std::vector<int32_t> idx_;
  std::vector<RandomStream> rng_;
};

}  // namespace

void register_choco(std::vector<AlgorithmInfo>& out) {
  out.push_back({"choco-sgd", "CHOCO-SGD: DSGD with compressed gossip of public copies xhat (--compress)",
                 "Koloskova, Stich, Jaggi, ICML 2019", MatrixNeed::kDoubly, false,
                 [] { return std::make_unique<Choco>(); }});
}

}  // namespace orrery::decentral
