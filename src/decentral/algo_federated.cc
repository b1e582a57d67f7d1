// Federated algorithms: a server model and n clients; the graph only sets n.
//
//   fedavg    each round, m = max(1, round(fraction n)) clients drawn without replacement start from the
//             server model x, run K local SGD steps (x_i <- x_i - a g_i(x_i)) and upload delta_i = x_i - x;
//             x <- x + a_s mean_i delta_i. With a compressor, uploads are C(delta_i + e_i) with error
//             feedback e_i <- delta_i + e_i - C(...).
//   scaffold  the same with control variates: local steps use g_i(x_i) - c_i + c;
//             c_i^+ = c_i - c + (x - x_i) / (K a); x <- x + a_s mean delta_i; c <- c + (1/n) sum_S (c_i^+ - c_i)
//             (Karimireddy et al., option II).
//   fedasync  event-driven: every client repeatedly takes the current server model, runs K local steps and
//             returns; the server mixes x <- (1 - alpha_t) x + alpha_t x_i with alpha_t = alpha (1 + tau)^-p,
//             tau = server versions since the client's snapshot (staleness).
//   fedbuff   the same event stream; the server buffers M staleness-weighted deltas (1 + tau)^-p delta_i
//             and applies x <- x + a_s mean(buffer) every M arrivals.
//   Client time (fedasync, fedbuff): a job of K local steps takes K s_i U seconds, s_i ~ LogNormal with
//   mean 1 and coefficient of variation `speed_cv` per client (drawn once), U ~ Uniform(0.5, 1.5) per job;
//   one iteration = one client arrival; sim_time reports the arrival's simulated time.
//   With a client clock (StepContext::clients: --heterogeneity, --device-trace, --churn) a job takes FedScale's
//   round time instead, starts when the client is available and is redone when the client leaves mid-job;
//   FedAvg/SCAFFOLD then sample only clients available at the round's start and report the round's end.
//   The initial server model is the mean of the initial node states. Bytes: one model download and one
//   upload per client job (SCAFFOLD also moves its control variates).
//   Processes (decentral/mpi_runtime.h): every process keeps the server state and makes the server's draws
//   (client sampling, job times), which do not depend on model values; a client's local steps, its random
//   compressor (its own stream, child "upload/i" of the algorithm's) and its error-feedback memory run on
//   the process owning it, and the uploads of a round reach every process through StepContext::share before
//   the server sums them in sampling order: the in-process arithmetic, bit for bit.
#include <algorithm>
#include <cmath>

#include "core/assert.h"
#include "decentral/algorithm.h"

namespace orrery::decentral {

namespace {

using Eigen::RowVectorXd;

class FederatedBase : public Algorithm {
 public:
  const NodeMatrix& iterates() override {
    view_.rowwise() = server_;
    return view_;
  }

 protected:
  void setup(const NodeMatrix& x0, StepContext& ctx) {
    server_ = x0.colwise().mean();
    view_.resizeLike(x0);
    local_.resize(x0.cols());
    g_.resize(x0.cols());
    delta_.resize(x0.cols());
    acc_ = RowVectorXd::Zero(x0.cols());
    if (ctx.params.compressor.kind != CompressorKind::kNone) {
      rng_ = per_node_streams(ctx.rng, "upload", static_cast<NodeIndex>(x0.rows()));
    }
  }
  // K local SGD steps of client i from `start` into local_ (with an optional control-variate correction).
  void local_sgd(NodeIndex i, const RowVectorXd& start, StepContext& ctx, const RowVectorXd* correction) {
    local_ = start;
    for (int64_t s = 0; s < ctx.params.local_steps; ++s) {
      ctx.oracle.gradient(i, local_.data(), g_.data());
      if (correction != nullptr) g_ += *correction;
      local_ -= ctx.params.lr * g_;
    }
  }
  // Client i's upload of delta_ (compressed with error feedback when a compressor is set), in place.
  void compress_upload(NodeIndex i, StepContext& ctx) {
    const int64_t d = delta_.size();
    if (ctx.params.compressor.kind == CompressorKind::kNone) return;
    if (errors_.rows() == 0) errors_ = NodeMatrix::Zero(view_.rows(), d);
    auto e = errors_.row(i);
    e += delta_;
    compress(ctx.params.compressor, e.data(), delta_.data(), d, rng_[static_cast<size_t>(i)], idx_);
    e -= delta_;
  }
  // The bytes of one upload (the same whatever the values).
  static int64_t upload_bytes(const StepContext& ctx, int64_t d) { return compressed_bytes(ctx.params.compressor, d); }

  RowVectorXd server_, local_, g_, delta_, acc_;
  NodeMatrix view_, errors_;
  NodeMatrix up_;                // the round's uploads, one row per client job (shared between processes)
  std::vector<NodeIndex> jobs_;  // the clients of up_'s rows
  std::vector<int32_t> idx_;
  std::vector<RandomStream> rng_;  // per client: its compressor's draws
};

class FedAvg final : public FederatedBase {
 public:
  explicit FedAvg(bool scaffold) : scaffold_(scaffold) {}
  void init(const NodeMatrix& x0, StepContext& ctx) override {
    setup(x0, ctx);
    order_.resize(static_cast<size_t>(x0.rows()));
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int32_t>(i);
    if (scaffold_) {
      c_ = RowVectorXd::Zero(x0.cols());
      ci_ = NodeMatrix::Zero(x0.rows(), x0.cols());
      dc_ = RowVectorXd::Zero(x0.cols());
      corr_.resize(x0.cols());
    }
  }
  void step(int64_t, StepContext& ctx) override {
    const int64_t n = static_cast<int64_t>(order_.size());
    const int64_t d = server_.size();
    // With a client clock only the clients available at the round's start are sampled (all when none is).
    int64_t pool = n;
    const double round_start = ctx.clients != nullptr ? (std::isnan(ctx.sim_time) ? 0.0 : ctx.sim_time) : 0.0;
    if (ctx.clients != nullptr) {
      const auto up = [&](int32_t c) { return ctx.clients->available(c, round_start); };
      pool = std::stable_partition(order_.begin(), order_.end(), up) - order_.begin();
      if (pool == 0) pool = n;
    }
    const int64_t m = std::clamp<int64_t>(std::llround(ctx.params.client_fraction * static_cast<double>(pool)), 1, pool);
    for (int64_t j = 0; j < m; ++j) {
      const uint64_t pick = static_cast<uint64_t>(j) + ctx.rng.uniform_int(static_cast<uint64_t>(pool - j));
      std::swap(order_[static_cast<size_t>(j)], order_[pick]);
    }
    // The sampled clients train on their owners' processes; row j of up_ is client j's upload (then, for
    // SCAFFOLD, its control-variate change c_i^+ - c_i = -c + (x - x_i) / (K a) = -c - delta / (K a)).
    jobs_.assign(order_.begin(), order_.begin() + m);
    up_.resize(m, scaffold_ ? 2 * d : d);
    const double k_lr = static_cast<double>(ctx.params.local_steps) * ctx.params.lr;
    for (int64_t j = 0; j < m; ++j) {
      const NodeIndex i = jobs_[static_cast<size_t>(j)];
      if (!ctx.owns(i)) continue;
      if (scaffold_) corr_ = c_ - ci_.row(i);
      local_sgd(i, server_, ctx, scaffold_ ? &corr_ : nullptr);
      delta_ = local_ - server_;
      if (scaffold_) {
        auto dci = up_.row(j).tail(d);
        dci = -c_ - delta_ / k_lr;
        ci_.row(i) += dci;
      }
      compress_upload(i, ctx);
      up_.row(j).head(d) = delta_;
    }
    ctx.share(jobs_, up_);
    acc_.setZero();
    if (scaffold_) dc_.setZero();
    for (int64_t j = 0; j < m; ++j) {
      acc_ += up_.row(j).head(d);
      if (scaffold_) dc_ += up_.row(j).tail(d);
    }
    ctx.bytes += m * ((scaffold_ ? 16 : 8) * d + upload_bytes(ctx, d) + (scaffold_ ? 8 * d : 0));
    server_ += ctx.params.server_lr * acc_ / static_cast<double>(m);
    if (scaffold_) c_ += dc_ / static_cast<double>(n);
    if (ctx.clients != nullptr) {
      // The round ends when its last sampled client is done (a client that leaves mid-job redoes it on return).
      double end = round_start;
      for (int64_t j = 0; j < m; ++j) {
        end = std::max(end, ctx.clients->job_end(order_[static_cast<size_t>(j)], round_start, ctx.oracle.batch(),
                                                 ctx.params.local_steps, 8 * d, 8 * d));
      }
      ctx.sim_time = end;
    }
  }

 private:
  bool scaffold_;
  std::vector<int32_t> order_;
  RowVectorXd c_, dc_, corr_;
  NodeMatrix ci_;
};

class FedAsync final : public FederatedBase {
 public:
  explicit FedAsync(bool buffered) : buffered_(buffered) {}
  void init(const NodeMatrix& x0, StepContext& ctx) override {
    setup(x0, ctx);
    const auto n = static_cast<size_t>(x0.rows());
    snap_.resizeLike(x0);
    snap_.rowwise() = server_;
    version_.assign(n, 0);
    speed_.resize(n);
    finish_.resize(n);
    const LogNormal speed = LogNormal::from_mean_cv(1.0, ctx.params.speed_cv, Where{"", 0, "speed-cv"});
    for (size_t i = 0; i < n; ++i) speed_[i] = speed.sample(ctx.rng);
    for (size_t i = 0; i < n; ++i) finish_[i] = next_finish(i, 0.0, ctx);
    ctx.sim_time = 0;
  }
  void step(int64_t, StepContext& ctx) override {
    const size_t i = static_cast<size_t>(std::min_element(finish_.begin(), finish_.end()) - finish_.begin());
    const double now = finish_[i];
    ctx.sim_time = now;
    const auto node = static_cast<NodeIndex>(i);
    // The arriving client's job runs on its owner's process; its upload reaches every process.
    jobs_.assign(1, node);
    up_.resize(1, server_.size());
    if (ctx.owns(node)) {
      local_sgd(node, snap_.row(node), ctx, nullptr);
      delta_ = local_ - snap_.row(node);
      compress_upload(node, ctx);
      up_.row(0) = delta_;
    }
    ctx.share(jobs_, up_);
    delta_ = up_.row(0);
    const double tau = static_cast<double>(version_[i] <= server_version_ ? server_version_ - version_[i] : 0);
    const double w = std::pow(1.0 + tau, -ctx.params.staleness_power);
    ctx.bytes += 8 * server_.size() + upload_bytes(ctx, server_.size());
    if (!buffered_) {
      const double alpha = ctx.params.async_alpha * w;
      server_ += alpha * delta_ + alpha * (snap_.row(node) - server_);
      ++server_version_;
    } else {
      acc_ += w * delta_;
      if (++count_ >= ctx.params.buffer) {
        server_ += ctx.params.server_lr * acc_ / static_cast<double>(count_);
        acc_.setZero();
        count_ = 0;
        ++server_version_;
      }
    }
    snap_.row(node) = server_;
    version_[i] = server_version_;
    finish_[i] = next_finish(i, now, ctx);
  }

 private:
  double duration(size_t i, StepContext& ctx) {
    return static_cast<double>(ctx.params.local_steps) * speed_[i] * (0.5 + ctx.rng.uniform01());
  }
  // With a client clock: FedScale's job time from `now`, with waits for availability and redone jobs.
  double next_finish(size_t i, double now, StepContext& ctx) {
    if (ctx.clients == nullptr) return now + duration(i, ctx);
    const int64_t bytes = 8 * server_.size();
    return ctx.clients->job_end(static_cast<NodeIndex>(i), now, ctx.oracle.batch(), ctx.params.local_steps, bytes, bytes);
  }
  bool buffered_;
  NodeMatrix snap_;
  std::vector<int64_t> version_;
  std::vector<double> speed_, finish_;
  int64_t server_version_ = 0;
  int64_t count_ = 0;
};

}  // namespace

void register_federated_family(std::vector<AlgorithmInfo>& out) {
  out.push_back({"fedavg", "FedAvg: sampled clients run K local SGD steps, the server averages their models",
                 "McMahan, Moore, Ramage, Hampson, Aguera y Arcas, AISTATS 2017", MatrixNeed::kNone, true,
                 [] { return std::make_unique<FedAvg>(false); }});
  out.push_back({"scaffold", "SCAFFOLD: FedAvg with control variates correcting client drift",
                 "Karimireddy, Kale, Mohri, Reddi, Stich, Suresh, ICML 2020", MatrixNeed::kNone, true,
                 [] { return std::make_unique<FedAvg>(true); }});
  out.push_back({"fedasync", "FedAsync: the server mixes each arriving client model with a staleness-weighted alpha",
                 "Xie, Koyejo, Gupta, arXiv 1903.03934, 2019", MatrixNeed::kNone, true,
                 [] { return std::make_unique<FedAsync>(false); }});
  out.push_back({"fedbuff", "FedBuff: buffered asynchronous aggregation of staleness-weighted client deltas",
                 "Nguyen et al., AISTATS 2022", MatrixNeed::kNone, true,
                 [] { return std::make_unique<FedAsync>(true); }});
}

}  // namespace orrery::decentral
