// Algorithms over a row-stochastic A only: PULL-DIAG-GT, MG-PULL-DIAG-GT and row-stochastic DGD.
//
//   pull-diag-gt     x^+ = A (x - a y);  y^+ = A (y + D_{k+1}^{-1} g^+ - D_k^{-1} g);  y^0 = g^0 (D_0 = I)
//                    D_k = Diag(A^k): each node keeps its own row of A^k (V^{k+1} = A V^k, V^0 = I), so
//                    a message carries x, y and an n-vector. pi^T y = pi^T D_k^{-1} g at every step
//                    (asserted in debug builds for a static A).
//   mg-pull-diag-gt  the same with A^R per step (R gossip rounds, --rounds) and an R-times minibatch, so
//                    D_k = Diag(A^{R k}).
//   row-dgd          x^+ = A (x - a g(x)): converges near the pi-weighted optimum, not the optimum.
// Liang, Chen, Luo, Yuan, "Understanding the influence of digraphs on decentralized optimization", ICML 2025,
// arXiv 2506.04600; rules from ../shared/validation/decentralized.md.
#include <utility>

#include "core/assert.h"
#include "decentral/algorithm.h"

namespace orrery::decentral {

namespace {

class PullDiag final : public Algorithm {
 public:
  explicit PullDiag(bool multi) : multi_(multi) {}
  void init(const NodeMatrix& x0, StepContext& ctx) override {
    rounds_ = multi_ ? std::max<int64_t>(1, ctx.params.rounds) : 1;
    if (multi_ && ctx.oracle.batch() > 0) ctx.oracle.set_batch(ctx.oracle.batch() * rounds_);
    const auto n = x0.rows();
    x_ = x0;
    v_ = NodeMatrix::Identity(n, n);
    vt_.resizeLike(v_);
    vtmp_.resizeLike(v_);
    dinv_ = Eigen::VectorXd::Ones(n);
    g_.resizeLike(x0);
    g_new_.resizeLike(x0);
    t_.resizeLike(x0);
    tmp_.resizeLike(x0);
    ctx.gradients(x_, g_);
    y_ = g_;
  }
  void step(int64_t k, StepContext& ctx) override {
    const double a = ctx.params.lr;
    t_ = x_ - a * y_;
    mix(t_, x_, k, ctx, x_.cols());
    mix(v_, vt_, k, ctx, 0);
    std::swap(v_, vt_);
    ctx.gradients(x_, g_new_);
    // t = y + D_{k+1}^{-1} g^+ - D_k^{-1} g, with dinv_ still D_k^{-1}.
    t_ = y_ - (g_.array().colwise() * dinv_.array()).matrix();
    dinv_ = v_.diagonal().cwiseInverse();
    t_ += (g_new_.array().colwise() * dinv_.array()).matrix();
    mix(t_, y_, k, ctx, x_.cols() + v_.cols());
    std::swap(g_, g_new_);
    if (ctx.mix.a.size() == 1) pi_ = ctx.mix.pi;
    ORRERY_ASSERT(!ctx.all_rows() || conservation_error() <= 1e-9 * (1.0 + (g_.array().colwise() * dinv_.array()).abs().sum()));
  }
  const NodeMatrix& iterates() override { return x_; }
  const NodeMatrix* tracker() const override { return &y_; }
  double conservation_error() const override {
    if (pi_.size() == 0) return 0.0;
    const Eigen::RowVectorXd lhs = pi_.transpose() * y_;
    const Eigen::RowVectorXd rhs = pi_.transpose() * (g_.array().colwise() * dinv_.array()).matrix();
    return (lhs - rhs).cwiseAbs().maxCoeff();
  }

 private:
  // out = A^R in over rounds k R .. k R + R - 1 of the (possibly time-varying) sequence.
  void mix(const NodeMatrix& in, NodeMatrix& out, int64_t k, StepContext& ctx, int64_t doubles) {
    const NodeMatrix* src = &in;
    for (int64_t r = 0; r < rounds_; ++r) {
      const SparseMixing& a = ctx.mix.A(k * rounds_ + r);
      NodeMatrix& buf = &in == &v_ ? vtmp_ : tmp_;
      NodeMatrix& dst = ((rounds_ - 1 - r) % 2 == 0) ? out : buf;
      ctx.gossip(a, *src, dst);
      src = &dst;
      if (doubles > 0) add_gossip_bytes(ctx, a, doubles);
    }
  }
  bool multi_;
  int64_t rounds_ = 1;
  NodeMatrix x_, y_, g_, g_new_, t_, tmp_, v_, vt_, vtmp_;
  Eigen::VectorXd dinv_;
  Eigen::VectorXd pi_;  // set for a static A only
};

class RowDgd final : public Algorithm {
 public:
  void init(const NodeMatrix& x0, StepContext&) override {
    x_ = x0;
    g_.resizeLike(x0);
    t_.resizeLike(x0);
  }
  void step(int64_t k, StepContext& ctx) override {
    const SparseMixing& a = ctx.mix.A(k);
    ctx.gradients(x_, g_);
    t_ = x_ - ctx.params.lr * g_;
    ctx.gossip(a, t_, x_);
    add_gossip_bytes(ctx, a, x_.cols());
  }
  const NodeMatrix& iterates() override { return x_; }

 private:
  NodeMatrix x_, g_, t_;
};

}  // namespace

void register_pull_diag_family(std::vector<AlgorithmInfo>& out) {
  out.push_back({"pull-diag-gt", "PULL-DIAG-GT: row-stochastic gradient tracking de-biased by Diag(A^k)",
                 "Liang, Chen, Luo, Yuan, ICML 2025, arXiv 2506.04600", MatrixNeed::kRow, false,
                 [] { return std::make_unique<PullDiag>(false); }, true});
  out.push_back({"mg-pull-diag-gt", "MG-PULL-DIAG-GT: PULL-DIAG-GT with R gossip rounds and an R-times batch per step",
                 "Liang, Chen, Luo, Yuan, ICML 2025, arXiv 2506.04600", MatrixNeed::kRow, false,
                 [] { return std::make_unique<PullDiag>(true); }, true});
  out.push_back({"row-dgd", "DGD over a row-stochastic A: x+ = A (x - a g); biased to the pi-weighted optimum",
                 "Mai & Abed, ACC 2016; Xi, Mai, Xin, Abed, Khan, IEEE TAC 63(10), 2018 (the bias it corrects)",
                 MatrixNeed::kRow, false, [] { return std::make_unique<RowDgd>(); }});
}

}  // namespace orrery::decentral
