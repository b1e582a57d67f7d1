// Gradient tracking: DIGing over a doubly stochastic W, Push-Pull over (A, B), Push-DIGing and Push-Sum /
// SGP over a column-stochastic B.
//
//   gt (DIGing)     x^+ = W x - a y;          y^+ = W y + g^+ - g;   y^0 = g^0
//   push-pull       x^+ = A x - a y;          y^+ = B y + g^+ - g;   y^0 = g^0
//   push-pull-atc   x^+ = A (x - a y);        same y
//   push-diging     u^+ = B (u - a y); v^+ = B v; x = u / v; y^+ = B y + g(x^+) - g(x); v^0 = 1
//   push-sum (SGP)  x^+ = B (x - a g(z)); w^+ = B w; z = x / w; w^0 = 1
// B preserves column sums, so 1^T y = 1^T g at every step (asserted in debug builds), and a doubly
// stochastic W also preserves the mean of y. Rules from ../shared/validation/decentralized.md.
#include <utility>

#include "core/assert.h"
#include "decentral/algorithm.h"

namespace orrery::decentral {

namespace {

enum class Form { kDiging, kPushPull, kPushPullAtc };

class Tracking final : public Algorithm {
 public:
  explicit Tracking(Form form) : form_(form) {}
  void init(const NodeMatrix& x0, StepContext& ctx) override {
    x_ = x0;
    g_.resizeLike(x0);
    g_new_.resizeLike(x0);
    t_.resizeLike(x0);
    ctx.gradients(x_, g_);
    y_ = g_;
  }
  void step(int64_t k, StepContext& ctx) override {
    const double a = ctx.params.lr;
    const SparseMixing& mx = form_ == Form::kDiging ? ctx.mix.W(k) : ctx.mix.A(k);
    const SparseMixing& my = form_ == Form::kDiging ? ctx.mix.W(k) : ctx.mix.B(k);
    if (form_ == Form::kPushPullAtc) {
      t_ = x_ - a * y_;
      ctx.gossip(mx, t_, x_);
    } else {
      ctx.gossip_update(mx, x_, t_, -a, y_, nullptr);  // x+ = A x - a y
      std::swap(x_, t_);
    }
    ctx.gradients(x_, g_new_);
    ctx.gossip_update(my, y_, t_, 1.0, g_new_, &g_);  // y+ = B y + g+ - g
    std::swap(y_, t_);
    std::swap(g_, g_new_);
    ORRERY_ASSERT(!ctx.all_rows() || nearly_equal_rows(y_.colwise().sum(), g_.colwise().sum(), g_.cwiseAbs().sum()));
    add_gossip_bytes(ctx, mx, x_.cols());
    add_gossip_bytes(ctx, my, x_.cols());
  }
  const NodeMatrix& iterates() override { return x_; }
  const NodeMatrix* tracker() const override { return &y_; }
  double conservation_error() const override { return (y_.colwise().sum() - g_.colwise().sum()).cwiseAbs().maxCoeff(); }

 private:
  Form form_;
  NodeMatrix x_, y_, g_, g_new_, t_;
};

class PushDiging final : public Algorithm {
 public:
  void init(const NodeMatrix& x0, StepContext& ctx) override {
    u_ = x_ = x0;
    v_ = NodeMatrix::Ones(x0.rows(), 1);
    vt_.resizeLike(v_);
    g_.resizeLike(x0);
    g_new_.resizeLike(x0);
    t_.resizeLike(x0);
    ctx.gradients(x_, g_);
    y_ = g_;
  }
  void step(int64_t k, StepContext& ctx) override {
    const SparseMixing& b = ctx.mix.B(k);
    t_ = u_ - ctx.params.lr * y_;
    ctx.gossip(b, t_, u_);
    ctx.gossip(b, v_, vt_);
    std::swap(v_, vt_);
    x_ = u_.array().colwise() / v_.col(0).array();
    ctx.gradients(x_, g_new_);
    ctx.gossip(b, y_, t_);
    y_ = t_ + g_new_ - g_;
    std::swap(g_, g_new_);
    ORRERY_ASSERT(!ctx.all_rows() || nearly_equal_rows(y_.colwise().sum(), g_.colwise().sum(), g_.cwiseAbs().sum()));
    add_gossip_bytes(ctx, b, 2 * x_.cols() + 1);
  }
  const NodeMatrix& iterates() override { return x_; }
  const NodeMatrix* tracker() const override { return &y_; }
  double conservation_error() const override { return (y_.colwise().sum() - g_.colwise().sum()).cwiseAbs().maxCoeff(); }

 private:
  NodeMatrix u_, v_, vt_, x_, y_, g_, g_new_, t_;
};

class PushSum final : public Algorithm {
 public:
  void init(const NodeMatrix& x0, StepContext&) override {
    x_ = z_ = x0;
    w_ = NodeMatrix::Ones(x0.rows(), 1);
    wt_.resizeLike(w_);
    g_.resizeLike(x0);
    t_.resizeLike(x0);
  }
  void step(int64_t k, StepContext& ctx) override {
    const SparseMixing& b = ctx.mix.B(k);
    ctx.gradients(z_, g_);
    t_ = x_ - ctx.params.lr * g_;
    ctx.gossip(b, t_, x_);
    ORRERY_ASSERT(!ctx.all_rows() || nearly_equal_rows(x_.colwise().sum(), t_.colwise().sum(), t_.cwiseAbs().sum()));
    ctx.gossip(b, w_, wt_);
    std::swap(w_, wt_);
    z_ = x_.array().colwise() / w_.col(0).array();
    add_gossip_bytes(ctx, b, x_.cols() + 1);
  }
  const NodeMatrix& iterates() override { return z_; }

 private:
  NodeMatrix x_, z_, w_, wt_, g_, t_;
};

}  // namespace

void register_tracking_family(std::vector<AlgorithmInfo>& out) {
  out.push_back({"gt", "gradient tracking (DIGing): x+ = W x - a y, y+ = W y + g+ - g",
                 "Nedic, Olshevsky, Shi, SIAM J. Optim. 27(4), 2017; Qu & Li, IEEE TCNS 5(3), 2018",
                 MatrixNeed::kDoubly, false, [] { return std::make_unique<Tracking>(Form::kDiging); }});
  out.push_back({"push-pull", "Push-Pull: x+ = A x - a y (pull), y+ = B y + g+ - g (push)",
                 "Pu, Shi, Xu, Nedic, IEEE TAC 66(1), 2021; Liang, Luo, Yuan, arXiv 2506.18075",
                 MatrixNeed::kRowAndColumn, false, [] { return std::make_unique<Tracking>(Form::kPushPull); }});
  out.push_back({"push-pull-atc", "Push-Pull, adapt-then-combine form: x+ = A (x - a y)",
                 "Pu, Shi, Xu, Nedic, IEEE TAC 66(1), 2021 (AB / Push-Pull, Xin & Khan, IEEE CSL 2018)",
                 MatrixNeed::kRowAndColumn, false, [] { return std::make_unique<Tracking>(Form::kPushPullAtc); }});
  out.push_back({"push-diging", "Push-DIGing: push-sum de-biasing plus gradient tracking over column-stochastic B",
                 "Nedic, Olshevsky, Shi, SIAM J. Optim. 27(4), 2017", MatrixNeed::kColumn, false,
                 [] { return std::make_unique<PushDiging>(); }});
  out.push_back({"push-sum", "Push-Sum / stochastic gradient push (SGP): mix x and weights w with B, read x / w",
                 "Kempe, Dobra, Gehrke, FOCS 2003; Nedic & Olshevsky, IEEE TAC 60(3), 2015; Assran et al., ICML 2019",
                 MatrixNeed::kColumn, false, [] { return std::make_unique<PushSum>(); }});
}

}  // namespace orrery::decentral
