#include "decentral/problem.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

#include <sys/mman.h>

#include <fmt/format.h>

#include "core/assert.h"

namespace orrery::decentral {

namespace {

using Eigen::Index;
using Eigen::Map;
using Eigen::VectorXd;

constexpr Index kChunk = 256;

Index idx(int64_t v) { return static_cast<Index>(v); }

using RowsMap = Map<RowMatrixXd>;
using ConstRowsMap = Map<const RowMatrixXd>;

// Sample rows (double) in memory that the kernel may back with transparent huge pages (madvise): a
// minibatch reads rows at random from the whole data set (115 MB for the synthetic setup: 28k 4-KiB
// pages, far beyond the TLB, but 58 2-MiB pages), so nearly every row read used to be a TLB miss too.
class RowStore {
 public:
  RowStore(Index rows, Index cols) : mem_(allocate(rows * cols)), rows_(mem_.get(), rows, cols) {}
  RowsMap& rows() { return rows_; }
  const RowsMap& rows() const { return rows_; }

 private:
  struct Free {
    void operator()(double* p) const { std::free(p); }
  };
  static double* allocate(Index count) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = std::max<size_t>(static_cast<size_t>(count) * sizeof(double), 1);
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advisory: failure (no THP) only costs speed
#endif
    return static_cast<double*>(p);
  }
  std::unique_ptr<double, Free> mem_;
  RowsMap rows_;
};

// --- quadratic -------------------------------------------------------------------------------------------

class Quadratic final : public Problem {
 public:
  explicit Quadratic(QuadraticSpec spec) : spec_(std::move(spec)) {
    ORRERY_CHECK(!spec_.h.empty() && spec_.h.size() == spec_.b.size());
    dim_ = static_cast<int64_t>(spec_.b.front().size());
    for (const auto& b : spec_.b) ORRERY_CHECK(static_cast<int64_t>(b.size()) == dim_);
    ORRERY_CHECK(spec_.c.empty() || spec_.c.size() == spec_.h.size());
    for (const auto& c : spec_.c) ORRERY_CHECK(static_cast<int64_t>(c.size()) == dim_);
  }
  std::string name() const override { return "quadratic"; }
  int64_t dim() const override { return dim_; }
  NodeIndex num_nodes() const override { return static_cast<NodeIndex>(spec_.h.size()); }
  int64_t local_size(NodeIndex) const override { return 1; }
  double local_gradient(NodeIndex i, const double* x, double* g, const Batch&, RandomStream* noise,
                        Scratch&) const override {
    const double h = spec_.h[static_cast<size_t>(i)];
    const std::vector<double>& b = spec_.b[static_cast<size_t>(i)];
    double f = 0;
    const std::vector<double>* c = spec_.c.empty() ? nullptr : &spec_.c[static_cast<size_t>(i)];
    for (int64_t j = 0; j < dim_; ++j) {
      const double r = x[j] - b[static_cast<size_t>(j)];
      const double cj = c != nullptr ? (*c)[static_cast<size_t>(j)] : 0.0;
      f += 0.5 * h * r * r + cj * x[j];
      if (g != nullptr) g[j] = h * r + cj;
    }
    if (g != nullptr && noise != nullptr && spec_.noise_sigma > 0) {
      const Normal normal(0.0, spec_.noise_sigma);
      for (int64_t j = 0; j < dim_; ++j) g[j] += normal.sample(*noise);
    }
    return f;
  }
  NodeMatrix initial_point(uint64_t) const override {
    NodeMatrix x = NodeMatrix::Zero(num_nodes(), idx(dim_));
    for (size_t i = 0; i < spec_.x0.size() && i < static_cast<size_t>(num_nodes()); ++i) {
      for (size_t j = 0; j < spec_.x0[i].size() && j < static_cast<size_t>(dim_); ++j) {
        x(static_cast<Index>(i), static_cast<Index>(j)) = spec_.x0[i][j];
      }
    }
    return x;
  }

 private:
  QuadraticSpec spec_;
  int64_t dim_ = 0;
};

// --- problems over samples -------------------------------------------------------------------------------

// Features either double (synthetic) or float (data sets), gathered into double chunks.
class SampleProblem : public Problem {
 public:
  NodeIndex num_nodes() const override { return static_cast<NodeIndex>(nodes_.size()); }
  int64_t local_size(NodeIndex i) const override { return static_cast<int64_t>(nodes_[static_cast<size_t>(i)].size()); }

  double local_gradient(NodeIndex i, const double* x, double* g, const Batch& batch, RandomStream*,
                        Scratch& s) const override {
    const std::vector<int32_t>& ids = nodes_[static_cast<size_t>(i)];
    const int64_t m = batch.size < 0 ? static_cast<int64_t>(ids.size()) : batch.size;
    if (g != nullptr) Map<VectorXd>(g, idx(dim())).setZero();
    if (s.chunk.rows() != kChunk || s.chunk.cols() != features()) s.chunk.resize(kChunk, features());
    if (static_cast<Index>(s.ids.size()) < kChunk) s.ids.resize(static_cast<size_t>(kChunk));
    double loss = 0;
    // All samples of a node whose rows are contiguous (double features): read them in place.
    const bool in_place = batch.size < 0 && f64_ != nullptr && contiguous_[static_cast<size_t>(i)];
    for (int64_t lo = 0; lo < m; lo += kChunk) {
      const Index c = std::min<Index>(kChunk, idx(m - lo));
      if (in_place) {
        const int32_t first = ids[static_cast<size_t>(lo)];
        const ConstRowsMap rows(f64_->rows().row(first).data(), c, features());
        loss += accumulate(rows, ids.data() + lo, c, x, g, batch.want_loss, s);
        continue;
      }
      for (Index r = 0; r < c; ++r) {
        const int64_t local = batch.size < 0 ? lo + r : batch.local[lo + r];
        const int32_t id = ids[static_cast<size_t>(local)];
        s.ids[static_cast<size_t>(r)] = id;
        prefetch_row(id);
      }
      gather(s.ids.data(), c, s.chunk);
      loss += accumulate(ConstRowsMap(s.chunk.data(), c, features()), s.ids.data(), c, x, g, batch.want_loss, s);
    }
    const double inv = m > 0 ? 1.0 / static_cast<double>(m) : 0.0;
    if (g != nullptr) Map<VectorXd>(g, idx(dim())) *= inv;
    return loss * inv + regularize(x, g);
  }

 protected:
  Index features() const { return f64_ != nullptr ? f64_->rows().cols() : f32_->cols(); }
  // Marks the nodes whose samples are consecutive rows (full-data evaluations read those in place).
  void find_contiguous() {
    contiguous_.clear();
    for (const std::vector<int32_t>& ids : nodes_) {
      bool c = true;
      for (size_t k = 1; k < ids.size() && c; ++k) c = ids[k] == ids[k - 1] + 1;
      contiguous_.push_back(c);
    }
  }
  // Minibatch rows are scattered over the data set (often far larger than the caches): issuing every
  // row's loads before gathering overlaps the cache misses.
  void prefetch_row(int32_t id) const {
    if (f64_ != nullptr) {
      prefetch_row(f64_->rows().row(id).data());
    } else {
      const char* p = reinterpret_cast<const char*>(f32_->row(id).data());
      const size_t bytes = static_cast<size_t>(features()) * sizeof(float);
      for (size_t off = 0; off < bytes && off < 512; off += 64) __builtin_prefetch(p + off);
    }
  }
  void prefetch_row(const double* row) const {
    const char* p = reinterpret_cast<const char*>(row);
    const size_t bytes = static_cast<size_t>(features()) * sizeof(double);
    // The row's last byte too: an 80-byte row straddles two cache lines in most positions.
    for (size_t off = 0; off < bytes && off < 512; off += 64) __builtin_prefetch(p + off);
    __builtin_prefetch(p + bytes - 1);
  }
  void gather(const int32_t* ids, Index c, RowMatrixXd& out) const {
    if (f64_ != nullptr) {
      const size_t bytes = static_cast<size_t>(features()) * sizeof(double);
      for (Index r = 0; r < c; ++r) std::memcpy(out.row(r).data(), f64_->rows().row(ids[r]).data(), bytes);
    } else {
      for (Index r = 0; r < c; ++r) out.row(r) = f32_->row(ids[r]).cast<double>();
    }
  }
  // Adds the sum over the chunk's first c samples of the per-sample gradients to g (when non-null);
  // returns the sum of their losses.
  // chunk has c rows.
  virtual double accumulate(const ConstRowsMap& chunk, const int32_t* ids, Index c, const double* x, double* g,
                            bool want_loss, Scratch& s) const = 0;
  // Adds the regularizer's gradient to g (when non-null); returns its value.
  virtual double regularize(const double*, double*) const { return 0.0; }

  std::shared_ptr<const RowStore> f64_;
  std::shared_ptr<const FeatureMatrix> f32_;
  std::vector<std::vector<int32_t>> nodes_;
  std::vector<bool> contiguous_;  // per node: its samples are rows first .. first + m - 1
};

std::vector<std::vector<int32_t>> contiguous(int64_t samples, NodeIndex n, const Where& where) {
  std::vector<int32_t> labels(static_cast<size_t>(samples), 0);
  return partition(labels, 1, n, PartitionSpec{PartitionKind::kContiguous, 0}, 0, where);
}

void check_synthetic(const SyntheticSpec& spec) {
  const Where w{"", 0, "problem"};
  if (spec.nodes < 1) throw InputError(w, "needs at least one node");
  if (spec.dim < 1 || spec.dim > 100'000) throw InputError(w.with_key("dim"), fmt::format("expected 1..100000, got {}", spec.dim));
  if (spec.samples < spec.nodes || spec.samples > 100'000'000) {
    throw InputError(w.with_key("samples"), fmt::format("expected between the node count ({}) and 1e8, got {}", spec.nodes, spec.samples));
  }
  if (!(spec.rho >= 0) || !std::isfinite(spec.rho)) throw InputError(w.with_key("rho"), "expected a finite rho >= 0");
}

// Synthetic rows a_l ~ N(0, I_d) against a truth w ~ N(0, I_d) (drawn first), with target(l) =
// make_target(a_l^T w, rng, N(0, 1)) drawn right after the row, all from derive(data_seed, stream).
template <class MakeTarget>
std::shared_ptr<RowStore> synthetic_rows(const SyntheticSpec& spec, std::string_view stream,
                                                  std::vector<double>& target, MakeTarget make_target) {
  RandomStream rng = RandomStream::derive(spec.data_seed, stream);
  const Normal normal(0.0, 1.0);
  VectorXd w(idx(spec.dim));
  for (Index j = 0; j < w.size(); ++j) w(j) = normal.sample(rng);
  auto store = std::make_shared<RowStore>(idx(spec.samples), idx(spec.dim));
  RowsMap& rows = store->rows();
  target.resize(static_cast<size_t>(spec.samples));
  for (Index l = 0; l < rows.rows(); ++l) {
    for (Index j = 0; j < rows.cols(); ++j) rows(l, j) = normal.sample(rng);
    target[static_cast<size_t>(l)] = make_target(rows.row(l).dot(w), rng, normal);
  }
  return store;
}

class Logistic final : public SampleProblem {
 public:
  explicit Logistic(const SyntheticSpec& spec) : rho_(spec.rho), dim_(spec.dim) {
    check_synthetic(spec);
    std::vector<double> y;
    std::shared_ptr<RowStore> rows = synthetic_rows(spec, "decentral.data.logistic", y, [](double z, RandomStream& rng, const Normal&) {
      return rng.uniform01() < 1.0 / (1.0 + std::exp(-z)) ? 1.0 : -1.0;
    });
    // Store z_l = y_l h_l: the loss and gradient only need y_l h_l (log(1 + exp(-z_l^T x)) and
    // -z_l / (1 + exp(z_l^T x))), and y = +-1 makes z_l^T x = y_l (h_l^T x) exactly (a sign flip of every
    // product), so the results are bit-for-bit those of the (h, y) form while a minibatch row is one read,
    // not a row plus a label somewhere else.
    for (Index l = 0; l < rows->rows().rows(); ++l) rows->rows().row(l) *= y[static_cast<size_t>(l)];
    f64_ = std::move(rows);
    nodes_ = contiguous(spec.samples, spec.nodes, Where{"", 0, "problem"});
    find_contiguous();
  }
  std::string name() const override { return "logistic-nonconvex"; }
  // Training steps (a minibatch, gradient only): one fused pass over the batch's rows read in place (no
  // gather copy, no matrix-vector kernel call for a 200 x 10 block): t_r = z_r^T x, then one vectorised
  // exp over the batch, then g += sum_r c_r z_r while the rows are still in L1.
  double local_gradient(NodeIndex i, const double* x, double* g, const Batch& batch, RandomStream* noise,
                        Scratch& s) const override {
    if (batch.size < 0 || batch.want_loss || g == nullptr) return SampleProblem::local_gradient(i, x, g, batch, noise, s);
    const std::vector<int32_t>& ids = nodes_[static_cast<size_t>(i)];
    const RowsMap& data = f64_->rows();
    const Index d = idx(dim_);
    const int64_t m = batch.size;
    if (s.v.size() < kChunk) s.v.resize(kChunk);
    if (static_cast<Index>(s.rows.size()) < kChunk) s.rows.resize(static_cast<size_t>(kChunk));
    Map<VectorXd> gv(g, d);
    gv.setZero();
    for (int64_t lo = 0; lo < m; lo += kChunk) {
      const Index c = std::min<Index>(kChunk, idx(m - lo));
      const double** rows = s.rows.data();
      // Contiguous nodes (always, for this problem's split): row = first + local, without a random read of ids.
      const bool in_order = contiguous_[static_cast<size_t>(i)] && !ids.empty();
      const int32_t first = in_order ? ids.front() : 0;
      for (Index r = 0; r < c; ++r) {
        const int32_t local = batch.local[lo + r];
        rows[r] = data.row(in_order ? first + local : ids[static_cast<size_t>(local)]).data();
        prefetch_row(rows[r]);
      }
      auto t = s.v.head(c);
      for (Index r = 0; r < c; ++r) {
        double acc = 0;
        for (Index j = 0; j < d; ++j) acc += rows[r][j] * x[j];
        t(r) = acc;
      }
      t.array() = -1.0 / (1.0 + t.array().exp());
      for (Index r = 0; r < c; ++r) {
        const double cr = t(r);
        for (Index j = 0; j < d; ++j) g[j] += cr * rows[r][j];
      }
    }
    gv *= m > 0 ? 1.0 / static_cast<double>(m) : 0.0;
    return regularize(x, g);
  }
  int64_t dim() const override { return dim_; }
  NodeMatrix initial_point(uint64_t seed) const override {
    RandomStream rng = RandomStream::derive(seed, "decentral.init");
    const Normal normal(0.0, 0.01);
    NodeMatrix x(num_nodes(), idx(dim_));
    for (Index i = 0; i < x.size(); ++i) x.data()[i] = normal.sample(rng);
    return x;
  }

 private:
  double accumulate(const ConstRowsMap& chunk, const int32_t* /*ids*/, Index c, const double* x, double* g,
                    bool want_loss, Scratch& s) const override {
    if (s.u.size() < kChunk) s.u.resize(kChunk);
    if (s.v.size() < kChunk) s.v.resize(kChunk);
    const Map<const VectorXd> xv(x, idx(dim_));
    // Rows are z_l = y_l h_l, so t = z_l^T x = y_l h_l^T x. Loss log(1 + exp(-t)) = max(-t, 0) + log(1 + e)
    // with e = exp(-|t|) (stable); d loss / d x = -z_l sigmoid(-t) = -z_l (t >= 0 ? e / (1 + e) : 1 / (1 + e)):
    // one exp per sample.
    auto t = s.v.head(c);
    auto z = s.u.head(c);
    t.noalias() = chunk.topRows(c) * xv;
    double loss = 0;
    if (want_loss || g == nullptr) {
      z.array() = (-t.array().abs()).exp();
      loss = ((-t.array()).max(0.0) + (1.0 + z.array()).log()).sum();  // e <= 1: log(1 + e) is accurate to 1e-16 absolute
      if (g == nullptr) return loss;
      for (Index r = 0; r < c; ++r) {
        const double e = z(r);
        z(r) = -(t(r) >= 0 ? e / (1.0 + e) : 1.0 / (1.0 + e));
      }
    } else {
      z.array() = -1.0 / (1.0 + t.array().exp());
    }
    Map<VectorXd>(g, idx(dim_)).noalias() += chunk.topRows(c).transpose() * z;
    return loss;
  }
  double regularize(const double* x, double* g) const override {
    double r = 0;
    for (int64_t j = 0; j < dim_; ++j) {
      const double q = 1.0 + x[j] * x[j];
      r += x[j] * x[j] / q;
      if (g != nullptr) g[j] += rho_ * 2.0 * x[j] / (q * q);
    }
    return rho_ * r;
  }
  double rho_;
  int64_t dim_;
};

class LeastSquares final : public SampleProblem {
 public:
  explicit LeastSquares(const SyntheticSpec& spec) : dim_(spec.dim) {
    check_synthetic(spec);
    const double noise = spec.noise;
    f64_ = synthetic_rows(spec, "decentral.data.least_squares", t_, [noise](double z, RandomStream& rng, const Normal& n) {
      return z + noise * n.sample(rng);
    });
    nodes_ = contiguous(spec.samples, spec.nodes, Where{"", 0, "problem"});
    find_contiguous();
  }
  std::string name() const override { return "least-squares"; }
  int64_t dim() const override { return dim_; }
  NodeMatrix initial_point(uint64_t) const override { return NodeMatrix::Zero(num_nodes(), idx(dim_)); }

 private:
  double accumulate(const ConstRowsMap& chunk, const int32_t* ids, Index c, const double* x, double* g,
                    bool /*want_loss*/, Scratch& s) const override {
    if (s.u.size() < kChunk) s.u.resize(kChunk);
    const Map<const VectorXd> xv(x, idx(dim_));
    auto r = s.u.head(c);
    r.noalias() = chunk.topRows(c) * xv;
    for (Index k = 0; k < c; ++k) r(k) -= t_[static_cast<size_t>(ids[k])];
    const double loss = 0.5 * r.squaredNorm();
    if (g != nullptr) Map<VectorXd>(g, idx(dim_)).noalias() += chunk.topRows(c).transpose() * r;
    return loss;
  }
  std::vector<double> t_;
  int64_t dim_;
};

// Softmax regression or a one-hidden-layer ReLU MLP. Parameter layout (row-major blocks):
// softmax [W (p x C) | b (C)]; mlp [W1 (p x H) | b1 (H) | W2 (H x C) | b2 (C)].
class Classifier final : public SampleProblem {
 public:
  Classifier(std::shared_ptr<const TrainTest> data, const ClassifierSpec& spec, const Where& where)
      : data_(std::move(data)), spec_(spec) {
    const Dataset& train = data_->train;
    if (train.size() == 0) throw InputError(where, "the data set has no training samples");
    if (spec.kind == ClassifierKind::kMlp && (spec.hidden < 1 || spec.hidden > 100'000)) {
      throw InputError(where.with_key("hidden"), fmt::format("expected 1..100000 hidden units, got {}", spec.hidden));
    }
    if (!(spec.weight_decay >= 0) || !std::isfinite(spec.weight_decay)) {
      throw InputError(where.with_key("weight-decay"), "expected a finite value >= 0");
    }
    p_ = train.features.cols();
    c_ = train.classes;
    h_ = spec.kind == ClassifierKind::kMlp ? idx(spec.hidden) : 0;
    dim_ = spec.kind == ClassifierKind::kMlp ? p_ * h_ + h_ + h_ * c_ + c_ : p_ * c_ + c_;
    // Share the training features without copying them.
    f32_ = std::shared_ptr<const FeatureMatrix>(data_, &data_->train.features);
    nodes_ = partition(train.labels, train.classes, spec.nodes, spec.partition, spec.data_seed, where.with_key("partition"));
  }
  std::string name() const override { return spec_.kind == ClassifierKind::kMlp ? "mlp" : "softmax"; }
  int64_t dim() const override { return dim_; }
  NodeMatrix initial_point(uint64_t) const override {
    NodeMatrix x = NodeMatrix::Zero(num_nodes(), idx(dim_));
    if (spec_.kind == ClassifierKind::kSoftmax) return x;
    // Glorot-uniform weights, identical on every node (from the data seed, not the run seed).
    RandomStream rng = RandomStream::derive(spec_.data_seed, "decentral.init.mlp");
    Eigen::RowVectorXd w0 = Eigen::RowVectorXd::Zero(idx(dim_));
    const double l1 = std::sqrt(6.0 / static_cast<double>(p_ + h_));
    const double l2 = std::sqrt(6.0 / static_cast<double>(h_ + c_));
    for (Index k = 0; k < p_ * h_; ++k) w0(k) = (2.0 * rng.uniform01() - 1.0) * l1;
    const Index w2 = p_ * h_ + h_;
    for (Index k = 0; k < h_ * c_; ++k) w0(w2 + k) = (2.0 * rng.uniform01() - 1.0) * l2;
    x.rowwise() = w0;
    return x;
  }
  std::optional<double> test_accuracy(const double* x, Scratch& s) const override {
    const Dataset& test = data_->test;
    if (test.size() == 0) return std::nullopt;
    if (s.chunk.rows() != kChunk || s.chunk.cols() != p_) s.chunk.resize(kChunk, p_);
    int64_t correct = 0;
    for (Index lo = 0; lo < test.size(); lo += kChunk) {
      const Index c = std::min<Index>(kChunk, test.size() - lo);
      s.chunk.topRows(c) = test.features.middleRows(lo, c).cast<double>();
      forward(ConstRowsMap(s.chunk.data(), c, p_), c, x, s);
      for (Index r = 0; r < c; ++r) {
        Index best = 0;
        s.b.row(r).maxCoeff(&best);
        correct += best == test.labels[static_cast<size_t>(lo + r)];
      }
    }
    return static_cast<double>(correct) / static_cast<double>(test.size());
  }

 private:
  using CMap = Map<const RowMatrixXd>;
  using MMap = Map<RowMatrixXd>;
  // Logits of the chunk's first c samples into s.b (hidden activations in s.a for the MLP).
  void forward(const ConstRowsMap& chunk, Index c, const double* x, Scratch& s) const {
    if (s.b.rows() != kChunk || s.b.cols() != c_) s.b.resize(kChunk, c_);
    if (spec_.kind == ClassifierKind::kSoftmax) {
      const CMap w(x, p_, c_);
      const Map<const Eigen::RowVectorXd> b(x + p_ * c_, c_);
      s.b.topRows(c).noalias() = chunk.topRows(c) * w;
      s.b.topRows(c).rowwise() += b;
      return;
    }
    if (s.a.rows() != kChunk || s.a.cols() != h_) s.a.resize(kChunk, h_);
    const CMap w1(x, p_, h_);
    const Map<const Eigen::RowVectorXd> b1(x + p_ * h_, h_);
    const CMap w2(x + p_ * h_ + h_, h_, c_);
    const Map<const Eigen::RowVectorXd> b2(x + p_ * h_ + h_ + h_ * c_, c_);
    s.a.topRows(c).noalias() = chunk.topRows(c) * w1;
    s.a.topRows(c).rowwise() += b1;
    s.a.topRows(c) = s.a.topRows(c).cwiseMax(0.0);
    s.b.topRows(c).noalias() = s.a.topRows(c) * w2;
    s.b.topRows(c).rowwise() += b2;
  }
  double accumulate(const ConstRowsMap& chunk, const int32_t* ids, Index c, const double* x, double* g,
                    bool /*want_loss*/, Scratch& s) const override {
    forward(chunk, c, x, s);
    // Softmax in place (s.b becomes probabilities minus one-hot: the gradient of the loss wrt the logits).
    double loss = 0;
    for (Index r = 0; r < c; ++r) {
      auto row = s.b.row(r);
      const double mx = row.maxCoeff();
      row.array() = (row.array() - mx).exp();
      const double sum = row.sum();
      const int32_t y = data_->train.labels[static_cast<size_t>(ids[r])];
      loss += std::log(sum) - std::log(row(y));
      row /= sum;
      row(y) -= 1.0;
    }
    if (g == nullptr) return loss;
    if (spec_.kind == ClassifierKind::kSoftmax) {
      MMap gw(g, p_, c_);
      Map<Eigen::RowVectorXd> gb(g + p_ * c_, c_);
      gw.noalias() += chunk.topRows(c).transpose() * s.b.topRows(c);
      gb += s.b.topRows(c).colwise().sum();
      return loss;
    }
    const CMap w2(x + p_ * h_ + h_, h_, c_);
    MMap gw1(g, p_, h_);
    Map<Eigen::RowVectorXd> gb1(g + p_ * h_, h_);
    MMap gw2(g + p_ * h_ + h_, h_, c_);
    Map<Eigen::RowVectorXd> gb2(g + p_ * h_ + h_ + h_ * c_, c_);
    gw2.noalias() += s.a.topRows(c).transpose() * s.b.topRows(c);
    gb2 += s.b.topRows(c).colwise().sum();
    if (s.c.rows() != kChunk || s.c.cols() != h_) s.c.resize(kChunk, h_);
    s.c.topRows(c).noalias() = s.b.topRows(c) * w2.transpose();
    s.c.topRows(c) = (s.a.topRows(c).array() > 0.0).select(s.c.topRows(c), 0.0);
    gw1.noalias() += chunk.topRows(c).transpose() * s.c.topRows(c);
    gb1 += s.c.topRows(c).colwise().sum();
    return loss;
  }
  double regularize(const double* x, double* g) const override {
    if (spec_.weight_decay == 0) return 0.0;
    // Weight decay on the weight blocks only.
    double r = 0;
    const auto block = [&](Index lo, Index len) {
      for (Index k = lo; k < lo + len; ++k) {
        r += x[k] * x[k];
        if (g != nullptr) g[k] += spec_.weight_decay * x[k];
      }
    };
    if (spec_.kind == ClassifierKind::kSoftmax) {
      block(0, p_ * c_);
    } else {
      block(0, p_ * h_);
      block(p_ * h_ + h_, h_ * c_);
    }
    return 0.5 * spec_.weight_decay * r;
  }

  std::shared_ptr<const TrainTest> data_;
  ClassifierSpec spec_;
  Index p_ = 0, c_ = 0, h_ = 0;
  int64_t dim_ = 0;
};

}  // namespace

double full_objective(const Problem& p, const double* x, double* grad, Scratch& s) {
  const NodeIndex n = p.num_nodes();
  const Index d = idx(p.dim());
  double f = 0;
  if (grad != nullptr) Map<VectorXd>(grad, d).setZero();
  if (grad != nullptr && s.node_grad.size() != d) s.node_grad.resize(d);
  for (NodeIndex i = 0; i < n; ++i) {
    if (grad != nullptr) {
      f += p.local_gradient(i, x, s.node_grad.data(), Batch{}, nullptr, s);
      Map<VectorXd>(grad, d) += s.node_grad;
    } else {
      f += p.local_gradient(i, x, nullptr, Batch{}, nullptr, s);
    }
  }
  if (grad != nullptr) Map<VectorXd>(grad, d) /= static_cast<double>(n);
  return f / static_cast<double>(n);
}

GradientOracle::GradientOracle(const Problem& p, int64_t batch, uint64_t seed) : p_(p), batch_(batch) {
  const RandomStream base = RandomStream::derive(seed, "decentral.minibatch");
  const NodeIndex n = p.num_nodes();
  rng_.reserve(static_cast<size_t>(n));
  for (NodeIndex i = 0; i < n; ++i) rng_.push_back(base.child(std::to_string(i)));
}

double GradientOracle::gradient(NodeIndex i, const double* x, double* g) {
  const size_t k = static_cast<size_t>(i);
  const int64_t m = p_.local_size(i);
  if (batch_ <= 0 || batch_ >= m) {
    samples_ += m;
    return p_.local_gradient(i, x, g, Batch{nullptr, -1, false}, &rng_[k], scratch_);
  }
  // Floyd's algorithm (Bentley & Floyd, CACM 30(9), 1987): a uniform batch_-subset of {0..m-1} in
  // O(batch_) draws, without touching an m-sized array. Membership is an open-addressing table.
  RandomStream& rng = rng_[k];
  size_t cap = 16;
  while (cap < 2 * static_cast<size_t>(batch_)) cap *= 2;
  if (table_.size() != cap) table_.resize(cap);
  std::fill(table_.begin(), table_.end(), -1);
  batch_ids_.resize(static_cast<size_t>(batch_));
  const auto insert = [&](int32_t v) {  // true when v was absent
    size_t h = (static_cast<uint32_t>(v) * 2654435761u) & (cap - 1);
    while (table_[h] != -1) {
      if (table_[h] == v) return false;
      h = (h + 1) & (cap - 1);
    }
    table_[h] = v;
    return true;
  };
  int64_t count = 0;
  for (int64_t j = m - batch_; j < m; ++j) {
    const auto t = static_cast<int32_t>(rng.uniform_int(static_cast<uint64_t>(j) + 1));
    const int32_t pick = insert(t) ? t : static_cast<int32_t>(j);
    if (pick != t) insert(pick);
    batch_ids_[static_cast<size_t>(count++)] = pick;
  }
  samples_ += batch_;
  return p_.local_gradient(i, x, g, Batch{batch_ids_.data(), batch_, false}, &rng, scratch_);
}

void GradientOracle::gradients(const NodeMatrix& x, NodeMatrix& g) {
  for (NodeIndex i = 0; i < p_.num_nodes(); ++i) gradient(i, x.row(i).data(), g.row(i).data());
}

std::unique_ptr<Problem> make_quadratic(QuadraticSpec spec) { return std::make_unique<Quadratic>(std::move(spec)); }
std::unique_ptr<Problem> make_logistic_nonconvex(const SyntheticSpec& spec) { return std::make_unique<Logistic>(spec); }
std::unique_ptr<Problem> make_least_squares(const SyntheticSpec& spec) { return std::make_unique<LeastSquares>(spec); }
std::unique_ptr<Problem> make_classifier(std::shared_ptr<const TrainTest> data, const ClassifierSpec& spec,
                                         const Where& where) {
  return std::make_unique<Classifier>(std::move(data), spec, where);
}

}  // namespace orrery::decentral
