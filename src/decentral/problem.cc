#include "decentral/problem.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

#include <sys/mman.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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
using RowMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using FloatRowsMap = Map<RowMatrixXf>;

// Sample rows (float) in memory that the kernel may back with transparent huge pages (madvise): a minibatch
// reads rows at random from the whole data set (58 MB for the synthetic setup: 14k 4-KiB pages, far beyond
// the TLB, but 28 2-MiB pages), so nearly every row read would be a TLB miss too.
class RowStore {
 public:
  RowStore(Index rows, Index cols) : mem_(allocate(rows * cols)), rows_(mem_.get(), rows, cols) {}
  FloatRowsMap& rows() { return rows_; }
  const FloatRowsMap& rows() const { return rows_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  static float* allocate(Index count) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = std::max<size_t>(static_cast<size_t>(count) * sizeof(float), 1);
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advisory: failure (no THP) only costs speed
#endif
    return static_cast<float*>(p);
  }
  std::unique_ptr<float, Free> mem_;
  FloatRowsMap rows_;
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

// Samples are float rows (synthetic rows in a RowStore, data sets in their FeatureMatrix). The generic path
// gathers a chunk of rows, widened to double, and hands it to accumulate().
class SampleProblem : public Problem {
 public:
  NodeIndex num_nodes() const override { return static_cast<NodeIndex>(nodes_.size()); }
  int64_t local_size(NodeIndex i) const override { return static_cast<int64_t>(nodes_[static_cast<size_t>(i)].size()); }

  double local_gradient(NodeIndex i, const double* x, double* g, const Batch& batch, RandomStream*,
                        Scratch& s) const override {
    const std::vector<int32_t>& ids = nodes_[static_cast<size_t>(i)];
    const int64_t m = batch.size < 0 ? static_cast<int64_t>(ids.size()) : batch.size;
    if (g != nullptr) Map<VectorXd>(g, idx(dim())).setZero();
    if (s.chunk.rows() != kChunk || s.chunk.cols() != features_) s.chunk.resize(kChunk, features_);
    if (static_cast<Index>(s.ids.size()) < kChunk) s.ids.resize(static_cast<size_t>(kChunk));
    double loss = 0;
    for (int64_t lo = 0; lo < m; lo += kChunk) {
      const Index c = std::min<Index>(kChunk, idx(m - lo));
      for (Index r = 0; r < c; ++r) {
        const int64_t local = batch.size < 0 ? lo + r : batch.local[lo + r];
        const int32_t id = ids[static_cast<size_t>(local)];
        s.ids[static_cast<size_t>(r)] = id;
        prefetch_row(row(id));
      }
      for (Index r = 0; r < c; ++r) s.chunk.row(r) = Map<const Eigen::RowVectorXf>(row(s.ids[static_cast<size_t>(r)]), features_).cast<double>();
      loss += accumulate(ConstRowsMap(s.chunk.data(), c, features_), s.ids.data(), c, x, g, batch.want_loss, s);
    }
    const double inv = m > 0 ? 1.0 / static_cast<double>(m) : 0.0;
    if (g != nullptr) Map<VectorXd>(g, idx(dim())) *= inv;
    return loss * inv + regularize(x, g);
  }

 protected:
  const float* row(int64_t id) const { return rows_ + id * features_; }
  // The row's first and last byte: a row of a few floats straddles two cache lines in some positions.
  void prefetch_row(const float* r) const {
    const char* p = reinterpret_cast<const char*>(r);
    const size_t bytes = static_cast<size_t>(features_) * sizeof(float);
    for (size_t off = 0; off < bytes && off < 512; off += 64) __builtin_prefetch(p + off);
    __builtin_prefetch(p + bytes - 1);
  }
  // Marks the nodes whose samples are consecutive rows (their rows are read in place, without the index array).
  void find_contiguous() {
    contiguous_.clear();
    for (const std::vector<int32_t>& ids : nodes_) {
      bool c = !ids.empty();
      for (size_t k = 1; k < ids.size() && c; ++k) c = ids[k] == ids[k - 1] + 1;
      contiguous_.push_back(c);
    }
  }
  // Adds the sum over the chunk's c samples of the per-sample gradients to g (when non-null); returns the
  // sum of their losses (or 0 when !want_loss and g is non-null).
  virtual double accumulate(const ConstRowsMap& chunk, const int32_t* ids, Index c, const double* x, double* g,
                            bool want_loss, Scratch& s) const = 0;
  // Adds the regularizer's gradient to g (when non-null); returns its value.
  virtual double regularize(const double*, double*) const { return 0.0; }

  const float* rows_ = nullptr;  // samples x features_, row-major
  Index features_ = 0;
  std::shared_ptr<const void> owner_;  // keeps rows_ alive
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

// Synthetic rows a_l ~ N(0, I_d), rounded to float, against a truth w ~ N(0, I_d) (drawn first), with
// target(l) = make_target(a_l^T w, rng, N(0, 1)) (a_l the float row) drawn right after the row, all from
// derive(data_seed, stream).
template <class MakeTarget>
std::shared_ptr<RowStore> synthetic_rows(const SyntheticSpec& spec, std::string_view stream, std::vector<double>& target,
                                         MakeTarget make_target) {
  RandomStream rng = RandomStream::derive(spec.data_seed, stream);
  const Normal normal(0.0, 1.0);
  VectorXd w(idx(spec.dim));
  for (Index j = 0; j < w.size(); ++j) w(j) = normal.sample(rng);
  auto store = std::make_shared<RowStore>(idx(spec.samples), idx(spec.dim));
  FloatRowsMap& rows = store->rows();
  target.resize(static_cast<size_t>(spec.samples));
  for (Index l = 0; l < rows.rows(); ++l) {
    for (Index j = 0; j < rows.cols(); ++j) rows(l, j) = static_cast<float>(normal.sample(rng));
    target[static_cast<size_t>(l)] = make_target(rows.row(l).cast<double>().dot(w), rng, normal);
  }
  return store;
}

// Minibatch rows are random reads from a data set far larger than L2. Two prefetch distances: rows
// kPrefetchFar ahead are requested into L2 (prefetcht2), rows kPrefetchNear ahead into L1 (prefetcht0), so
// that many misses are in flight without the L1 fill buffers filling up. The 20-seed synthetic benchmark
// (192M minibatch rows, 40-byte rows of a 58 MB set; docs/decentral_algorithms.md), idle 2-core AMD EPYC
// guest, median of 3-5 runs: far/near 64/8 3.67 s, 128/16 3.00, 128/32 2.56, 128/48 2.31, 256/64 2.14,
// 256/96 2.00, 512/128 1.98, 512/192 2.06. (On the loaded Intel guests of earlier sessions 64/8 was
// best among 8-96 near distances; that machine's measurements varied by 40% from minute to minute.)
constexpr Index kPrefetchFar = 512;
constexpr Index kPrefetchNear = 128;

// Rows through a pointer array (minibatches); p[k] exists for k < avail, so the look-ahead may run on into
// the next node's rows.
struct IndirectRows {
  const float* const* p;
  Index avail;
  Index bytes;
  const float* operator[](Index k) const { return p[k]; }
  template <int kLocality>
  void prefetch_row(Index k) const {
    if (k >= avail) return;
    const char* q = reinterpret_cast<const char*>(p[k]);
    for (Index off = 0; off < bytes; off += 64) __builtin_prefetch(q + off, 0, kLocality);
    __builtin_prefetch(q + bytes - 1, 0, kLocality);
  }
  // Called before row k is read.
  void prefetch(Index k) const {
    prefetch_row<1>(k + kPrefetchFar);
    prefetch_row<3>(k + kPrefetchNear);
  }
  // Before the first row: the first kPrefetchFar rows.
  void warm_up() const {
    for (Index k = 0; k < kPrefetchFar; ++k) prefetch_row<1>(k);
  }
};

// Consecutive rows (a contiguous node's samples): a software prefetch kStreamAhead bytes ahead of the
// rows being read keeps more of the stream in flight than the hardware prefetcher alone (full-data
// evaluation of the synthetic set: 27 -> 21 ms CPU with 2 or 4 KiB ahead on the development machine).
constexpr uintptr_t kStreamAhead = 4096;
struct StridedRows {
  const float* first;
  Index d;
  const float* operator[](Index k) const { return first + k * d; }
  void prefetch(Index k) const {
    // An address past the data is harmless for a prefetch (it never faults); uintptr_t keeps the
    // arithmetic defined.
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(first + k * d) + kStreamAhead), 0, 3);
  }
};

// z^T x in double with two partial sums (even and odd j, then added): a fixed order that maps onto one
// two-lane vector register (Pairs below computes exactly the same).
inline double dot_pairs(const float* z, const double* x, Index d) {
  double even = 0, odd = 0;
  Index j = 0;
  for (; j + 1 < d; j += 2) {
    even += static_cast<double>(z[j]) * x[j];
    odd += static_cast<double>(z[j + 1]) * x[j + 1];
  }
  if (j < d) even += static_cast<double>(z[j]) * x[j];
  return even + odd;
}

// Two doubles in one vector register (GCC/Clang vector extensions: SSE2 on x86-64, NEON on arm64).
using V2d = double __attribute__((vector_size(16)));
using V2f = float __attribute__((vector_size(8)));
inline V2d load_pair(const float* p) {
#ifdef __SSE2__
  // One 8-byte load and one cvtps2pd (GCC 12 turns __builtin_convertvector into two scalar conversions);
  // memcpy, not a double* load: the floats are only 4-byte aligned.
  double bits;
  std::memcpy(&bits, p, sizeof bits);
  return _mm_cvtps_pd(_mm_castpd_ps(_mm_set_sd(bits)));
#else
  V2f f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, V2d);
#endif
}

// x and the gradient sums of a kD-dimensional problem held as kD / 2 pairs (+ one scalar for odd kD), in
// registers. Rows are taken two at a time (a = an even row of a chunk, b = the next): the gradient sum
// of the a rows goes to g, that of the b rows to gb, and add_to() adds g + gb. dot() and axpy() are the
// one-row forms (a chunk's odd last row, into g); the two-row kernels below do the same arithmetic,
// lane for lane.
template <int kD>
struct Pairs {
  static constexpr int kP = kD / 2;
  static constexpr bool kOdd = kD % 2 == 1;
  V2d x[kP > 0 ? kP : 1];
  V2d g[kP > 0 ? kP : 1];
  V2d gb[kP > 0 ? kP : 1];
  double x_last = 0, g_last = 0, gb_last = 0;
  explicit Pairs(const double* xs) {
    for (int p = 0; p < kP; ++p) {
      x[p] = V2d{xs[2 * p], xs[2 * p + 1]};
      g[p] = V2d{0.0, 0.0};
      gb[p] = V2d{0.0, 0.0};
    }
    if constexpr (kOdd) x_last = xs[kD - 1];
  }
  // (sum of the even products, plus the odd last one) + (sum of the odd products), in p order.
  double dot(const float* z) const {
    V2d acc{0.0, 0.0};
    for (int p = 0; p < kP; ++p) acc += load_pair(z + 2 * p) * x[p];
    double even = acc[0];
    if constexpr (kOdd) even += static_cast<double>(z[kD - 1]) * x_last;
    return even + acc[1];
  }
  void axpy(double c, const float* z) {
    const V2d cc{c, c};
    for (int p = 0; p < kP; ++p) g[p] += cc * load_pair(z + 2 * p);
    if constexpr (kOdd) g_last += c * static_cast<double>(z[kD - 1]);
  }
  void add_to(double* out) const {
    for (int p = 0; p < kP; ++p) {
      out[2 * p] += g[p][0] + gb[p][0];
      out[2 * p + 1] += g[p][1] + gb[p][1];
    }
    if constexpr (kOdd) out[kD - 1] += g_last + gb_last;
  }
};

// The two-row kernels: t[r] = z_r^T x for the rows c0 .. c0 + c of a chunk (dots), and the gradient
// sums g += t[r] z_r (rows c0 + 2i) and gb += t[r] z_r (rows c0 + 2i + 1) (axpys). The baseline forms
// use two-lane SSE2 vectors; the AVX2 forms hold both rows in one four-lane vector and do the same
// operations in the same order without fused multiply-adds, so both give the same bits (test
// LogisticKernels.Avx2AndBaselineAgreeBitForBit); which one runs is decided once per process.
std::atomic<bool> g_force_baseline{false};
bool use_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx2");
  return has && !g_force_baseline.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// A row's dot product does not depend on its partner, so the baseline takes the rows one by one.
template <int kD, class Rows>
void dots_baseline(const Rows& rows, Index c0, Index c, const Pairs<kD>& px, double* t) {
  for (Index r = 0; r < c; ++r) {
    rows.prefetch(c0 + r);
    t[r] = px.dot(rows[c0 + r]);
  }
}

template <int kD, class Rows>
void axpys_baseline(const Rows& rows, Index c0, Index c, const double* t, Pairs<kD>& px) {
  constexpr int kP = Pairs<kD>::kP;
  Index r = 0;
  for (; r + 1 < c; r += 2) {
    const float* a = rows[c0 + r];
    const float* b = rows[c0 + r + 1];
    const V2d ca{t[r], t[r]}, cb{t[r + 1], t[r + 1]};
    for (int p = 0; p < kP; ++p) {
      px.g[p] += ca * load_pair(a + 2 * p);
      px.gb[p] += cb * load_pair(b + 2 * p);
    }
    if constexpr (Pairs<kD>::kOdd) {
      px.g_last += t[r] * static_cast<double>(a[kD - 1]);
      px.gb_last += t[r + 1] * static_cast<double>(b[kD - 1]);
    }
  }
  if (r < c) px.axpy(t[r], rows[c0 + r]);
}

#if defined(__x86_64__) && defined(__GNUC__)
using V4d = double __attribute__((vector_size(32)));

// Floats 2p, 2p + 1 of row a and of row b as four doubles.
// Two 8-byte loads, one unpack, one vcvtps2pd (__m128i loads may alias the floats).
__attribute__((target("avx2"), always_inline)) inline V4d load_two_pairs(const float* a, const float* b) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpacklo_epi64(lo, hi)));  // __m256d is a V4d
}

template <int kD, class Rows>
__attribute__((target("avx2"))) void dots_avx2(const Rows& rows, Index c0, Index c, const Pairs<kD>& px, double* t) {
  constexpr int kP = Pairs<kD>::kP;
  V4d xx[kP > 0 ? kP : 1];
  for (int p = 0; p < kP; ++p) xx[p] = V4d{px.x[p][0], px.x[p][1], px.x[p][0], px.x[p][1]};
  Index r = 0;
  for (; r + 1 < c; r += 2) {
    rows.prefetch(c0 + r);
    rows.prefetch(c0 + r + 1);
    const float* a = rows[c0 + r];
    const float* b = rows[c0 + r + 1];
    V4d acc{0.0, 0.0, 0.0, 0.0};
    for (int p = 0; p < kP; ++p) acc += load_two_pairs(a + 2 * p, b + 2 * p) * xx[p];
    double even_a = acc[0], even_b = acc[2];
    if constexpr (Pairs<kD>::kOdd) {
      even_a += static_cast<double>(a[kD - 1]) * px.x_last;
      even_b += static_cast<double>(b[kD - 1]) * px.x_last;
    }
    t[r] = even_a + acc[1];
    t[r + 1] = even_b + acc[3];
  }
  if (r < c) {
    rows.prefetch(c0 + r);
    t[r] = px.dot(rows[c0 + r]);
  }
}

template <int kD, class Rows>
__attribute__((target("avx2"))) void axpys_avx2(const Rows& rows, Index c0, Index c, const double* t, Pairs<kD>& px) {
  constexpr int kP = Pairs<kD>::kP;
  V4d gg[kP > 0 ? kP : 1];
  for (int p = 0; p < kP; ++p) gg[p] = V4d{px.g[p][0], px.g[p][1], px.gb[p][0], px.gb[p][1]};
  Index r = 0;
  for (; r + 1 < c; r += 2) {
    const float* a = rows[c0 + r];
    const float* b = rows[c0 + r + 1];
    const V4d cc{t[r], t[r], t[r + 1], t[r + 1]};
    for (int p = 0; p < kP; ++p) gg[p] += cc * load_two_pairs(a + 2 * p, b + 2 * p);
    if constexpr (Pairs<kD>::kOdd) {
      px.g_last += t[r] * static_cast<double>(a[kD - 1]);
      px.gb_last += t[r + 1] * static_cast<double>(b[kD - 1]);
    }
  }
  for (int p = 0; p < kP; ++p) {
    px.g[p] = V2d{gg[p][0], gg[p][1]};
    px.gb[p] = V2d{gg[p][2], gg[p][3]};
  }
  if (r < c) px.axpy(t[r], rows[c0 + r]);
}
#else
template <int kD, class Rows>
void dots_avx2(const Rows& rows, Index c0, Index c, const Pairs<kD>& px, double* t) {
  dots_baseline(rows, c0, c, px, t);
}
template <int kD, class Rows>
void axpys_avx2(const Rows& rows, Index c0, Index c, const double* t, Pairs<kD>& px) {
  axpys_baseline(rows, c0, c, t, px);
}
#endif

// Sums over rows[lo .. lo + m) of the logistic loss log(1 + exp(-t)) (when want_loss) and, into g (when
// non-null), of its gradient -z / (1 + exp(t)), with t = z^T x in double. kD > 0 fixes the dimension at
// compile time (x and the gradient sum in registers); kD = 0 reads it from d.
template <int kD, class Rows>
double logistic_rows(const Rows& rows, Index lo, Index m, Index d_runtime, const double* x, double* g, bool want_loss,
                     Scratch& s) {
  const Index d = kD > 0 ? kD : d_runtime;
  if (s.v.size() < kChunk) s.v.resize(kChunk);
  if (s.u.size() < kChunk) s.u.resize(kChunk);
  Pairs<kD> pairs(x);
  const bool wide = use_avx2();
  double loss = 0;
  for (Index c0 = lo; c0 < lo + m; c0 += kChunk) {
    const Index c = std::min<Index>(kChunk, lo + m - c0);
    double* t = s.v.data();
    if constexpr (kD > 0) {
      if (wide) {
        dots_avx2(rows, c0, c, pairs, t);
      } else {
        dots_baseline(rows, c0, c, pairs, t);
      }
    } else {
      for (Index r = 0; r < c; ++r) {
        rows.prefetch(c0 + r);
        t[r] = dot_pairs(rows[c0 + r], x, d);
      }
    }
    // log(1 + exp(-t)) = max(-t, 0) + log(1 + e) and its derivative -1 / (1 + exp(t)) = -(t >= 0 ? e : 1) / (1 + e),
    // with e = exp(-|t|) <= 1 (no overflow): one exp per sample. The sum of the c logs is the log of the
    // product of the (1 + e) in (1, 2] (at most 2^256, no overflow; rounding <= c ulps, i.e. <= 3e-14 absolute
    // on a sum of order c): one log per chunk instead of one per sample.
    auto tv = s.v.head(c).array();
    auto e = s.u.head(c).array();
    exp_neg_abs(t, s.u.data(), c);
    if (want_loss || g == nullptr) loss += (-tv).max(0.0).sum() + std::log((1.0 + e).prod());
    if (g == nullptr) continue;
    tv = -(tv >= 0.0).select(e, 1.0) / (1.0 + e);
    if constexpr (kD > 0) {
      if (wide) {
        axpys_avx2(rows, c0, c, t, pairs);
      } else {
        axpys_baseline(rows, c0, c, t, pairs);
      }
    } else {
      for (Index r = 0; r < c; ++r) {
        const float* z = rows[c0 + r];
        for (Index j = 0; j < d; ++j) g[j] += t[r] * static_cast<double>(z[j]);
      }
    }
  }
  if constexpr (kD > 0) {
    if (g != nullptr) pairs.add_to(g);
  }
  return loss;
}

// Calls f(std::integral_constant<int, D>) with D = d for d <= kMax, else D = 0 (runtime dimension).
template <int kMax, class F>
auto with_dim(Index d, F&& f) {
  if constexpr (kMax == 0) {
    return f(std::integral_constant<int, 0>{});
  } else {
    if (d == kMax) return f(std::integral_constant<int, kMax>{});
    return with_dim<kMax - 1>(d, std::forward<F>(f));
  }
}

constexpr int kMaxFixedDim = 16;

class Logistic final : public SampleProblem {
 public:
  explicit Logistic(const SyntheticSpec& spec) : rho_(spec.rho), dim_(spec.dim) {
    check_synthetic(spec);
    std::vector<double> y;
    std::shared_ptr<RowStore> store = synthetic_rows(spec, "decentral.data.logistic", y, [](double z, RandomStream& rng, const Normal&) {
      return rng.uniform01() < 1.0 / (1.0 + std::exp(-z)) ? 1.0 : -1.0;
    });
    // Store z_l = y_l h_l: the loss and gradient only need y_l h_l (log(1 + exp(-z_l^T x)) and
    // -z_l / (1 + exp(z_l^T x))), and y = +-1 makes z_l^T x = y_l (h_l^T x) exactly (a sign flip of every
    // product), so the results are bit-for-bit those of the (h, y) form while a minibatch row is one read,
    // not a row plus a label somewhere else.
    FloatRowsMap& rows = store->rows();
    for (Index l = 0; l < rows.rows(); ++l) rows.row(l) *= static_cast<float>(y[static_cast<size_t>(l)]);
    rows_ = rows.data();
    features_ = rows.cols();
    owner_ = std::move(store);
    nodes_ = contiguous(spec.samples, spec.nodes, Where{"", 0, "problem"});
    find_contiguous();
  }
  std::string name() const override { return "logistic-nonconvex"; }
  int64_t dim() const override { return dim_; }

  double local_gradient(NodeIndex i, const double* x, double* g, const Batch& batch, RandomStream*,
                        Scratch& s) const override {
    const std::vector<int32_t>& ids = nodes_[static_cast<size_t>(i)];
    const Index m = batch.size < 0 ? static_cast<Index>(ids.size()) : idx(batch.size);
    if (g != nullptr) Map<VectorXd>(g, idx(dim_)).setZero();
    double loss = 0;
    if (batch.size < 0 && contiguous_[static_cast<size_t>(i)]) {
      const StridedRows rows{row(ids.front()), features_};
      loss = with_dim<kMaxFixedDim>(features_, [&](auto kd) {
        return logistic_rows<decltype(kd)::value>(rows, 0, m, features_, x, g, batch.want_loss, s);
      });
    } else {
      if (static_cast<Index>(s.rows.size()) < m) s.rows.resize(static_cast<size_t>(m));
      for (Index k = 0; k < m; ++k) s.rows[static_cast<size_t>(k)] = row(sample_id(i, batch.size < 0 ? k : batch.local[k]));
      IndirectRows{s.rows.data(), m, features_ * idx(sizeof(float))}.warm_up();
      loss = indirect(s.rows.data(), m, 0, m, x, g, batch.want_loss, s);
    }
    return finish(m, x, g, loss);
  }

  // All nodes' minibatch rows as one pointer array, read as one prefetched stream.
  void node_gradients(const NodeMatrix& x, NodeMatrix& g, NodeIndex begin, NodeIndex end, const Batch* batches,
                      RandomStream* noise, Scratch& s) const override {
    Index total = 0;
    for (NodeIndex i = begin; i < end; ++i) total += std::max<Index>(0, idx(batches[i].size));
    if (static_cast<Index>(s.rows.size()) < total) s.rows.resize(static_cast<size_t>(total));
    Index k = 0;
    for (NodeIndex i = begin; i < end; ++i) {
      for (int64_t r = 0; r < batches[i].size; ++r) s.rows[static_cast<size_t>(k++)] = row(sample_id(i, batches[i].local[r]));
    }
    IndirectRows{s.rows.data(), total, features_ * idx(sizeof(float))}.warm_up();
    Index lo = 0;
    for (NodeIndex i = begin; i < end; ++i) {
      const Batch& b = batches[i];
      double* gi = g.row(i).data();
      if (b.size < 0) {
        local_gradient(i, x.row(i).data(), gi, b, noise != nullptr ? &noise[i] : nullptr, s);
        continue;
      }
      const Index m = idx(b.size);
      Map<VectorXd>(gi, idx(dim_)).setZero();
      const double loss = indirect(s.rows.data(), total, lo, m, x.row(i).data(), gi, b.want_loss, s);
      finish(m, x.row(i).data(), gi, loss);
      lo += m;
    }
  }

  NodeMatrix initial_point(uint64_t seed) const override {
    RandomStream rng = RandomStream::derive(seed, "decentral.init");
    const Normal normal(0.0, 0.01);
    NodeMatrix x(num_nodes(), idx(dim_));
    for (Index i = 0; i < x.size(); ++i) x.data()[i] = normal.sample(rng);
    return x;
  }

 private:
  // The row index of node i's local sample `local` (contiguous nodes: first + local, without reading ids).
  int64_t sample_id(NodeIndex i, int64_t local) const {
    const std::vector<int32_t>& ids = nodes_[static_cast<size_t>(i)];
    return contiguous_[static_cast<size_t>(i)] ? ids.front() + local : ids[static_cast<size_t>(local)];
  }
  double indirect(const float* const* p, Index avail, Index lo, Index m, const double* x, double* g, bool want_loss,
                  Scratch& s) const {
    const IndirectRows rows{p, avail, features_ * idx(sizeof(float))};
    return with_dim<kMaxFixedDim>(features_, [&](auto kd) {
      return logistic_rows<decltype(kd)::value>(rows, lo, m, features_, x, g, want_loss, s);
    });
  }
  // Turns the sums over m samples into means and adds the regularizer; returns f_i over the batch.
  double finish(Index m, const double* x, double* g, double loss) const {
    const double inv = m > 0 ? 1.0 / static_cast<double>(m) : 0.0;
    if (g != nullptr) Map<VectorXd>(g, idx(dim_)) *= inv;
    return loss * inv + regularize(x, g);
  }
  double accumulate(const ConstRowsMap&, const int32_t*, Index, const double*, double*, bool, Scratch&) const override {
    return 0.0;  // unused: local_gradient is overridden
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
    std::shared_ptr<RowStore> store = synthetic_rows(spec, "decentral.data.least_squares", t_,
                                                     [noise](double z, RandomStream& rng, const Normal& n) { return z + noise * n.sample(rng); });
    rows_ = store->rows().data();
    features_ = store->rows().cols();
    owner_ = std::move(store);
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
    rows_ = train.features.data();
    features_ = train.features.cols();
    owner_ = data_;
    nodes_ = partition(train.labels, train.classes, spec.nodes, spec.partition, spec.data_seed, where.with_key("partition"));
  }
  std::string name() const override { return spec_.kind == ClassifierKind::kMlp ? "mlp" : "softmax"; }
  int64_t dim() const override { return dim_; }
  double local_gradient(NodeIndex i, const double* x, double* g, const Batch& batch, RandomStream* noise,
                        Scratch& s) const override {
    if (batch.size < 0 || batch.want_loss || g == nullptr) return SampleProblem::local_gradient(i, x, g, batch, noise, s);
    return minibatch_f32(i, x, g, batch, s);
  }
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
    const double loss = softmax_delta(ids, c, s);
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
  // Softmax of the logits in s.b's first c rows, in place: s.b becomes probabilities minus one-hot (the
  // gradient of the loss with respect to the logits). Returns the summed cross-entropy.
  double softmax_delta(const int32_t* ids, Index c, Scratch& s) const {
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
    return loss;
  }
  // Training minibatch (gradient only): the products with the feature rows and the weights in float GEMMs
  // (the features are float already; no widening copy), the softmax and every sum over the batch in double.
  // Rounding: each float product sums k terms (k = features, hidden units or rows) with error <= k u sum|terms|
  // (u = 2^-24; Higham, Accuracy and Stability, eq. 3.5), relative ~1e-6 to 1e-5 at k = 784; full-data
  // metrics stay in double.
  double minibatch_f32(NodeIndex i, const double* x, double* g, const Batch& batch, Scratch& s) const {
    const std::vector<int32_t>& ids = nodes_[static_cast<size_t>(i)];
    const bool mlp = spec_.kind == ClassifierKind::kMlp;
    const Index k1 = mlp ? h_ : c_;  // width of the first product
    Map<VectorXd>(g, idx(dim_)).setZero();
    s.fw = CMap(x, p_, k1).cast<float>();
    if (mlp) s.fw2 = CMap(x + p_ * h_ + h_, h_, c_).cast<float>();
    const auto shape = [](auto& m, Index rows, Index cols) {
      if (m.rows() != rows || m.cols() != cols) m.resize(rows, cols);
    };
    shape(s.fchunk, kChunk, p_);
    shape(s.fa, kChunk, k1);
    shape(s.fb, kChunk, c_);
    shape(s.fgw, p_, k1);
    if (mlp) {
      shape(s.fc, kChunk, h_);
      shape(s.fgw2, h_, c_);
    }
    if (s.b.rows() != kChunk || s.b.cols() != c_) s.b.resize(kChunk, c_);
    if (static_cast<Index>(s.ids.size()) < kChunk) s.ids.resize(static_cast<size_t>(kChunk));
    for (int64_t lo = 0; lo < batch.size; lo += kChunk) {
      const Index c = std::min<Index>(kChunk, idx(batch.size - lo));
      for (Index r = 0; r < c; ++r) {
        const int32_t id = ids[static_cast<size_t>(batch.local[lo + r])];
        s.ids[static_cast<size_t>(r)] = id;
        std::memcpy(s.fchunk.row(r).data(), row(id), static_cast<size_t>(p_) * sizeof(float));
      }
      const auto chunk = s.fchunk.topRows(c);
      auto fa = s.fa.topRows(c);
      auto fb = s.fb.topRows(c);
      fa.noalias() = chunk * s.fw;  // c x k1
      if (!mlp) {
        s.b.topRows(c) = fa.cast<double>();
        s.b.topRows(c).rowwise() += Map<const Eigen::RowVectorXd>(x + p_ * c_, c_);
        softmax_delta(s.ids.data(), c, s);
        fb = s.b.topRows(c).cast<float>();
        s.fgw.noalias() = chunk.transpose() * fb;
        MMap(g, p_, c_) += s.fgw.cast<double>();
        Map<Eigen::RowVectorXd>(g + p_ * c_, c_) += s.b.topRows(c).colwise().sum();
        continue;
      }
      // Hidden activations relu(a W1 + b1) in double, then the same softmax layer on them.
      if (s.a.rows() != kChunk || s.a.cols() != h_) s.a.resize(kChunk, h_);
      s.a.topRows(c) = fa.cast<double>();
      s.a.topRows(c).rowwise() += Map<const Eigen::RowVectorXd>(x + p_ * h_, h_);
      s.a.topRows(c) = s.a.topRows(c).cwiseMax(0.0);
      fa = s.a.topRows(c).cast<float>();
      fb.noalias() = fa * s.fw2;
      s.b.topRows(c) = fb.cast<double>();
      s.b.topRows(c).rowwise() += Map<const Eigen::RowVectorXd>(x + p_ * h_ + h_ + h_ * c_, c_);
      softmax_delta(s.ids.data(), c, s);
      fb = s.b.topRows(c).cast<float>();
      s.fgw2.noalias() = fa.transpose() * fb;
      MMap(g + p_ * h_ + h_, h_, c_) += s.fgw2.cast<double>();
      Map<Eigen::RowVectorXd>(g + p_ * h_ + h_ + h_ * c_, c_) += s.b.topRows(c).colwise().sum();
      auto fc = s.fc.topRows(c);
      fc.noalias() = fb * s.fw2.transpose();  // c x H
      fc = (fa.array() > 0.0f).select(fc, 0.0f);  // relu'
      s.fgw.noalias() = chunk.transpose() * fc;
      MMap(g, p_, h_) += s.fgw.cast<double>();
      Map<Eigen::RowVectorXd>(g + p_ * h_, h_) += fc.cast<double>().colwise().sum();
    }
    const double inv = batch.size > 0 ? 1.0 / static_cast<double>(batch.size) : 0.0;
    Map<VectorXd>(g, idx(dim_)) *= inv;
    return regularize(x, g);
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

namespace {

// 2^(j/128) for j = 0..127, each the double nearest (computed once with std::exp2, which glibc rounds
// correctly in practice; the test compares the final results with std::exp).
struct Exp2Table {
  double v[128];
  Exp2Table() {
    for (int j = 0; j < 128; ++j) v[j] = std::exp2(static_cast<double>(j) / 128.0);
  }
};
const Exp2Table& exp2_table() {
  static const Exp2Table t;
  return t;
}

// exp(-|x|) for the sizeof(V) / 8 lanes at x (out: the same count). Written once for two- and
// four-lane vectors: every lane does the same operations, so both widths give the same bits.
// -|x| = (128 m + j) ln2 / 128 + r with |r| <= ln2 / 256; exp(r) - 1 by its degree-5 Taylor polynomial
// (truncation r^6 / 720 < 6e-19); ln 2 / 128 split Cody-Waite style (the high part keeps 32
// significant bits, so k * hi is exact for |k| <= 708 * 128 / ln 2 < 2^17).
template <class V, class VL>
__attribute__((always_inline)) inline void exp_neg_abs_lanes(const double* x, double* out, const double* table) {
  constexpr int kLanes = sizeof(V) / sizeof(double);
  constexpr double kInvLn2x128 = 184.6649652337873;  // 128 / ln 2
  constexpr double kLn2Hi = 0x1.62e42fee00000p-8;    // ln 2 / 128 to 32 bits
  constexpr double kLn2Lo = 0x1.a39ef35793c76p-40;   // ln 2 / 128 - kLn2Hi
  constexpr double kShift = 6755399441055744.0;      // 1.5 * 2^52: adding it rounds to an integer
  constexpr double kLowest = -708.0;                 // exp(-708) = 3.3e-308 is still normal
  V a;
  std::memcpy(&a, x, sizeof a);
  V v = -__builtin_bit_cast(V, __builtin_bit_cast(VL, a) & (VL{} + 0x7fffffffffffffffLL));
  const V lowest = V{} + kLowest;
  v = v < lowest ? lowest : v;
  const V shift = V{} + kShift;
  const V shifted = v * kInvLn2x128 + shift;
  const V k = shifted - shift;  // the integer nearest v * 128 / ln 2 (k <= 0)
  const V r = (v - k * kLn2Hi) - k * kLn2Lo;
  // exp(r) - 1, so that the result is s + s q (one rounding on top of the table's half ulp).
  const V q = r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0)))));
  const VL ki = __builtin_bit_cast(VL, shifted) - __builtin_bit_cast(VL, shift);
  const VL j = ki & 127;
  const VL m = ki >> 7;  // arithmetic shift: floor(k / 128)
  V t;
  for (int i = 0; i < kLanes; ++i) t[i] = table[j[i]];
  // 2^m times 2^(j/128): add m to the exponent field (t is in [1, 2) and m >= -1022).
  const V scaled = __builtin_bit_cast(V, __builtin_bit_cast(VL, t) + (m << 52));
  const V e = scaled + scaled * q;
  std::memcpy(out, &e, sizeof e);
}

using V2l = long long __attribute__((vector_size(16)));

void exp_neg_abs_baseline(const double* x, double* out, int64_t n, const double* table) {
  int64_t i = 0;
  for (; i + 1 < n; i += 2) exp_neg_abs_lanes<V2d, V2l>(x + i, out + i, table);
  if (i < n) {
    double two[2] = {x[i], x[i]};
    exp_neg_abs_lanes<V2d, V2l>(two, two, table);
    out[i] = two[0];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
using V4l = long long __attribute__((vector_size(32)));
__attribute__((target("avx2"))) void exp_neg_abs_avx2(const double* x, double* out, int64_t n, const double* table) {
  int64_t i = 0;
  for (; i + 3 < n; i += 4) exp_neg_abs_lanes<V4d, V4l>(x + i, out + i, table);
  exp_neg_abs_baseline(x + i, out + i, n - i, table);
}
#endif

}  // namespace

void exp_neg_abs(const double* x, double* out, int64_t n) {
  const double* table = exp2_table().v;
#if defined(__x86_64__) && defined(__GNUC__)
  if (use_avx2()) {
    exp_neg_abs_avx2(x, out, n, table);
    return;
  }
#endif
  exp_neg_abs_baseline(x, out, n, table);
}

void force_baseline_kernels(bool on) { g_force_baseline.store(on, std::memory_order_relaxed); }

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

void Problem::node_gradients(const NodeMatrix& x, NodeMatrix& g, NodeIndex begin, NodeIndex end, const Batch* batches,
                             RandomStream* noise, Scratch& s) const {
  for (NodeIndex i = begin; i < end; ++i) {
    local_gradient(i, x.row(i).data(), g.row(i).data(), batches[i], noise != nullptr ? &noise[i] : nullptr, s);
  }
}

Batch GradientOracle::draw(NodeIndex i, int32_t* out) {
  const int64_t m = p_.local_size(i);
  if (batch_ <= 0 || batch_ >= m) {
    samples_ += m;
    return Batch{nullptr, -1, false};
  }
  // Floyd's algorithm (Bentley & Floyd, CACM 30(9), 1987): a uniform batch_-subset of {0..m-1} in
  // O(batch_) draws. Membership is a bitmap of m bits, cleared again through the picks (O(batch_)).
  // A local copy of the node's stream (written back below): its state stays in registers while the
  // bitmap is written.
  RandomStream rng = rng_[static_cast<size_t>(i)];
  const size_t words = (static_cast<size_t>(m) + 63) / 64;
  if (seen_.size() < words) seen_.resize(words, 0);
  const auto test_and_set = [&](int64_t v) {  // true when v was absent
    uint64_t& w = seen_[static_cast<size_t>(v) >> 6];
    const uint64_t bit = uint64_t{1} << (v & 63);
    const bool absent = (w & bit) == 0;
    w |= bit;
    return absent;
  };
  for (int64_t j = m - batch_, count = 0; j < m; ++j, ++count) {
    const auto t = static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(j) + 1));
    // j itself is never drawn before step j (earlier picks are < j), so marking it needs no test.
    const int64_t pick = test_and_set(t) ? t : j;
    if (pick == j) seen_[static_cast<size_t>(j) >> 6] |= uint64_t{1} << (j & 63);
    out[count] = static_cast<int32_t>(pick);
  }
  for (int64_t r = 0; r < batch_; ++r) seen_[static_cast<size_t>(out[r]) >> 6] = 0;
  rng_[static_cast<size_t>(i)] = rng;
  samples_ += batch_;
  return Batch{out, batch_, false};
}

double GradientOracle::gradient(NodeIndex i, const double* x, double* g) {
  if (static_cast<int64_t>(batch_ids_.size()) < std::max<int64_t>(batch_, 0)) batch_ids_.resize(static_cast<size_t>(batch_));
  const Batch b = draw(i, batch_ids_.data());
  return p_.local_gradient(i, x, g, b, &rng_[static_cast<size_t>(i)], scratch_);
}

void GradientOracle::gradients(const NodeMatrix& x, NodeMatrix& g) {
  const NodeIndex n = p_.num_nodes();
  const NodeIndex begin = 0;
  const NodeIndex end = n;
  const size_t slots = static_cast<size_t>(std::max<int64_t>(batch_, 0));
  if (batch_ids_.size() < slots * static_cast<size_t>(n)) batch_ids_.resize(slots * static_cast<size_t>(n));
  batches_.resize(static_cast<size_t>(n));
  // Every node's draws come from its own stream, so drawing them all first gives the same minibatches.
  for (NodeIndex i = begin; i < end; ++i) batches_[static_cast<size_t>(i)] = draw(i, batch_ids_.data() + slots * static_cast<size_t>(i));
  p_.node_gradients(x, g, begin, end, batches_.data(), rng_.data(), scratch_);
}

std::unique_ptr<Problem> make_quadratic(QuadraticSpec spec) { return std::make_unique<Quadratic>(std::move(spec)); }
std::unique_ptr<Problem> make_logistic_nonconvex(const SyntheticSpec& spec) { return std::make_unique<Logistic>(spec); }
std::unique_ptr<Problem> make_least_squares(const SyntheticSpec& spec) { return std::make_unique<LeastSquares>(spec); }
std::unique_ptr<Problem> make_classifier(std::shared_ptr<const TrainTest> data, const ClassifierSpec& spec,
                                         const Where& where) {
  return std::make_unique<Classifier>(std::move(data), spec, where);
}

}  // namespace orrery::decentral
