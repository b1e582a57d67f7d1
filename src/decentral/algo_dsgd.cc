// DSGD (both orders) and Exact Diffusion / D2: algorithms over a doubly stochastic W.
//
//   dsgd (combine-then-adapt)   x^+ = W x - a g(x)
//   dsgd-atc (adapt-then-combine) x^+ = W (x - a g(x))
//   exact-diffusion             psi = x - a g(x); phi = psi + x - psi_prev; x^+ = ((I + W)/2) phi
//   d2                          the same with x^+ = W phi (needs lambda_min(W) > -1/3)
// psi_prev starts at x^0, so the first step is plain adapt-then-combine. Rules from
// ../shared/validation/decentralized.md.
#include <utility>

#include "core/assert.h"
#include "decentral/algorithm.h"

namespace orrery::decentral {

namespace {

// Mean of the rows (the network average), for the mean-preservation assertion.
[[maybe_unused]] Eigen::RowVectorXd row_mean(const NodeMatrix& m) { return m.colwise().mean(); }

class Dsgd final : public Algorithm {
 public:
  explicit Dsgd(bool atc) : atc_(atc) {}
  void init(const NodeMatrix& x0, StepContext&) override {
    x_ = x0;
    g_.resizeLike(x0);
    t_.resizeLike(x0);
  }
  void step(int64_t k, StepContext& ctx) override {
    const SparseMixing& w = ctx.mix.W(k);
    const double a = ctx.params.lr;
    ctx.gradients(x_, g_);
    if (atc_) {
      t_ = x_ - a * g_;
      ctx.gossip(w, t_, x_);
      ORRERY_ASSERT(!ctx.all_rows() || nearly_equal_rows(row_mean(x_), row_mean(t_), t_.cwiseAbs().maxCoeff()));
    } else {
      ctx.gossip(w, x_, t_);
      ORRERY_ASSERT(!ctx.all_rows() || nearly_equal_rows(row_mean(x_), row_mean(t_), x_.cwiseAbs().maxCoeff()));
      x_ = t_ - a * g_;
    }
    add_gossip_bytes(ctx, w, x_.cols());
  }
  const NodeMatrix& iterates() override { return x_; }

 private:
  bool atc_;
  NodeMatrix x_, g_, t_;
};

class ExactDiffusion final : public Algorithm {
 public:
  explicit ExactDiffusion(bool d2) : d2_(d2) {}
  void init(const NodeMatrix& x0, StepContext&) override {
    x_ = x0;
    psi_prev_ = x0;
    g_.resizeLike(x0);
    psi_.resizeLike(x0);
    phi_.resizeLike(x0);
    t_.resizeLike(x0);
  }
  void step(int64_t k, StepContext& ctx) override {
    const SparseMixing& w = ctx.mix.W(k);
    ctx.gradients(x_, g_);
    psi_ = x_ - ctx.params.lr * g_;
    phi_ = psi_ + x_ - psi_prev_;
    ctx.gossip(w, phi_, t_);
    ORRERY_ASSERT(!ctx.all_rows() || nearly_equal_rows(row_mean(t_), row_mean(phi_), phi_.cwiseAbs().maxCoeff()));
    if (d2_) {
      x_ = t_;
    } else {
      x_ = 0.5 * (phi_ + t_);
    }
    std::swap(psi_prev_, psi_);
    add_gossip_bytes(ctx, w, x_.cols());
  }
  const NodeMatrix& iterates() override { return x_; }

 private:
  bool d2_;
  NodeMatrix x_, g_, psi_, psi_prev_, phi_, t_;
};

}  // namespace

void register_dsgd_family(std::vector<AlgorithmInfo>& out) {
  out.push_back({"dsgd", "decentralized SGD, combine-then-adapt: x+ = W x - a g(x)",
                 "Nedic & Ozdaglar, IEEE TAC 54(1), 2009; Lian et al., NeurIPS 2017", MatrixNeed::kDoubly, false,
                 [] { return std::make_unique<Dsgd>(false); }});
  out.push_back({"dsgd-atc", "decentralized SGD, adapt-then-combine (diffusion): x+ = W (x - a g(x))",
                 "Chen & Sayed, IEEE TSP 60(8), 2012", MatrixNeed::kDoubly, false,
                 [] { return std::make_unique<Dsgd>(true); }});
  out.push_back({"exact-diffusion", "Exact Diffusion: bias-corrected diffusion with (I + W)/2",
                 "Yuan, Ying, Zhao, Sayed, IEEE TSP 67(3), 2019", MatrixNeed::kDoubly, false,
                 [] { return std::make_unique<ExactDiffusion>(false); }});
  out.push_back({"d2", "D2: decentralized training over decentralized data (exact diffusion with W)",
                 "Tang, Lian, Yan, Zhang, Liu, ICML 2018", MatrixNeed::kDoubly, false,
                 [] { return std::make_unique<ExactDiffusion>(true); }});
}

}  // namespace orrery::decentral
