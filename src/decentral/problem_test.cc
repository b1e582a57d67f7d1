#include "decentral/problem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "decentral/dataset.h"

namespace orrery::decentral {
namespace {

// Central differences of f along each coordinate; the truncation error is O(h^2 f''') ~ 1e-10 for h = 1e-5
// on these smooth (or, for the MLP, piecewise-smooth away from kinks) losses, the rounding error
// O(eps f / h) ~ 1e-11.
Eigen::VectorXd numeric_gradient(const Problem& p, Eigen::VectorXd x) {
  Scratch s;
  const double h = 1e-5;
  Eigen::VectorXd g(x.size());
  for (Eigen::Index j = 0; j < x.size(); ++j) {
    const double x0 = x(j);
    x(j) = x0 + h;
    const double fp = full_objective(p, x.data(), nullptr, s);
    x(j) = x0 - h;
    const double fm = full_objective(p, x.data(), nullptr, s);
    x(j) = x0;
    g(j) = (fp - fm) / (2 * h);
  }
  return g;
}

void expect_gradient_matches(const Problem& p, const Eigen::VectorXd& x) {
  Scratch s;
  Eigen::VectorXd g(p.dim());
  full_objective(p, x.data(), g.data(), s);
  const Eigen::VectorXd fd = numeric_gradient(p, x);
  EXPECT_LT((g - fd).cwiseAbs().maxCoeff(), 1e-7 * (1 + fd.cwiseAbs().maxCoeff())) << p.name();
}

Eigen::VectorXd random_point(int64_t d, uint64_t seed, double scale) {
  RandomStream rng = RandomStream::derive(seed, "test.point");
  Eigen::VectorXd x(d);
  for (Eigen::Index j = 0; j < x.size(); ++j) x(j) = scale * (2 * rng.uniform01() - 1);
  return x;
}

// A small labelled data set: 30 samples, 6 features in [0, 1], 3 classes.
std::shared_ptr<const TrainTest> tiny_data() {
  auto tt = std::make_shared<TrainTest>();
  RandomStream rng = RandomStream::derive(9, "test.tiny");
  tt->train.features.resize(30, 6);
  for (Eigen::Index k = 0; k < tt->train.features.size(); ++k) tt->train.features.data()[k] = static_cast<float>(rng.uniform01());
  for (int k = 0; k < 30; ++k) tt->train.labels.push_back(k % 3);
  tt->train.classes = 3;
  tt->test = tt->train;
  return tt;
}

TEST(Logistic, LossAtZeroIsLogTwoAndTheGradientMatchesFiniteDifferences) {
  SyntheticSpec s;
  s.nodes = 3;
  s.dim = 5;
  s.samples = 300;
  const auto p = make_logistic_nonconvex(s);
  // At x = 0 every sample costs log(1 + e^0) = ln 2 and the regularizer is 0.
  Scratch sc;
  const Eigen::VectorXd zero = Eigen::VectorXd::Zero(5);
  EXPECT_NEAR(full_objective(*p, zero.data(), nullptr, sc), std::log(2.0), 1e-15);
  expect_gradient_matches(*p, random_point(5, 1, 1.0));
}

TEST(Logistic, InitialPointIsOneHundredthOfAStandardNormalPerNode) {
  SyntheticSpec s;
  s.nodes = 64;
  s.dim = 10;
  s.samples = 640;
  const NodeMatrix x = make_logistic_nonconvex(s)->initial_point(3);
  // 640 draws of N(0, 1e-4): the sample standard deviation is within 10% of 0.01 with probability
  // 1 - 2e-5 (relative SE 1/sqrt(2 * 640) = 2.8%, so 10% is 3.6 SE).
  const double sd = std::sqrt(x.array().square().mean());
  EXPECT_NEAR(sd, 0.01, 0.001);
  EXPECT_NE(x(0, 0), x(1, 0));
}

TEST(LeastSquares, GradientMatchesFiniteDifferences) {
  SyntheticSpec s;
  s.nodes = 2;
  s.dim = 4;
  s.samples = 100;
  expect_gradient_matches(*make_least_squares(s), random_point(4, 2, 2.0));
}

TEST(Classifier, SoftmaxAndMlpGradientsMatchFiniteDifferences) {
  ClassifierSpec c;
  c.nodes = 3;
  c.weight_decay = 0.1;
  const auto softmax = make_classifier(tiny_data(), c);
  EXPECT_EQ(softmax->dim(), 6 * 3 + 3);
  expect_gradient_matches(*softmax, random_point(softmax->dim(), 3, 1.0));
  c.kind = ClassifierKind::kMlp;
  c.hidden = 4;
  const auto mlp = make_classifier(tiny_data(), c);
  EXPECT_EQ(mlp->dim(), 6 * 4 + 4 + 4 * 3 + 3);
  expect_gradient_matches(*mlp, random_point(mlp->dim(), 4, 1.0));
}

TEST(Classifier, SoftmaxAtZeroHasLossLogCAndChanceAccuracyOnBalancedLabels) {
  ClassifierSpec c;
  c.nodes = 2;
  const auto p = make_classifier(tiny_data(), c);
  Scratch s;
  const Eigen::VectorXd zero = Eigen::VectorXd::Zero(p->dim());
  // Uniform probabilities 1/3: loss ln 3; argmax ties pick class 0, right for 10 of 30 samples.
  EXPECT_NEAR(full_objective(*p, zero.data(), nullptr, s), std::log(3.0), 1e-12);
  EXPECT_DOUBLE_EQ(*p->test_accuracy(zero.data(), s), 1.0 / 3.0);
}

TEST(GradientOracle, FullBatchGivesTheExactLocalGradientAndSeedsReproduce) {
  SyntheticSpec s;
  s.nodes = 2;
  s.dim = 3;
  s.samples = 200;
  const auto p = make_logistic_nonconvex(s);
  const Eigen::VectorXd x = random_point(3, 5, 1.0);
  Scratch sc;
  Eigen::VectorXd exact(3), g(3), g2(3);
  p->local_gradient(1, x.data(), exact.data(), Batch{}, nullptr, sc);
  GradientOracle full(*p, 100, 1);  // batch = local size
  full.gradient(1, x.data(), g.data());
  EXPECT_LT((g - exact).cwiseAbs().maxCoeff(), 1e-15);
  GradientOracle a(*p, 10, 7), b(*p, 10, 7), c(*p, 10, 8);
  a.gradient(0, x.data(), g.data());
  b.gradient(0, x.data(), g2.data());
  EXPECT_EQ(g, g2);
  c.gradient(0, x.data(), g2.data());
  EXPECT_NE(g, g2);
  EXPECT_EQ(a.samples_processed(), 10);
}

TEST(GradientOracle, MinibatchGradientsAreUnbiased) {
  // Least squares with 40 local samples, batch 8 without replacement: the mean of N = 20000 minibatch
  // gradients is the exact gradient up to sampling error. Each coordinate's minibatch variance is at most
  // the per-sample variance (finite-population correction (40-8)/39 < 1) over 8; we allow 5 SE.
  SyntheticSpec s;
  s.nodes = 1;
  s.dim = 3;
  s.samples = 40;
  const auto p = make_least_squares(s);
  const Eigen::VectorXd x = random_point(3, 6, 1.0);
  Scratch sc;
  Eigen::VectorXd exact(3), g(3), sum = Eigen::VectorXd::Zero(3), sq = Eigen::VectorXd::Zero(3);
  p->local_gradient(0, x.data(), exact.data(), Batch{}, nullptr, sc);
  // Per-sample gradient variance, from single-sample gradients.
  Eigen::VectorXd var = Eigen::VectorXd::Zero(3);
  for (int32_t k = 0; k < 40; ++k) {
    p->local_gradient(0, x.data(), g.data(), Batch{&k, 1}, nullptr, sc);
    var += (g - exact).cwiseAbs2() / 40.0;
  }
  GradientOracle o(*p, 8, 11);
  const int n = 20000;
  for (int t = 0; t < n; ++t) {
    o.gradient(0, x.data(), g.data());
    sum += g;
  }
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(sum(j) / n, exact(j), 5 * std::sqrt(var(j) / 8 / n)) << j;
}

TEST(Quadratic, NoiseOnlyOnStochasticGradients) {
  QuadraticSpec q{{2.0}, {}, {{1.0}}, 0.5, {}};
  const auto p = make_quadratic(q);
  Scratch sc;
  const double x = 3.0;
  double g = 0;
  p->local_gradient(0, &x, &g, Batch{}, nullptr, sc);
  EXPECT_DOUBLE_EQ(g, 4.0);  // h (x - b) = 2 * 2
  GradientOracle o(*p, 0, 1);
  o.gradient(0, &x, &g);
  EXPECT_NE(g, 4.0);
}

// --- partitions -------------------------------------------------------------------------------------------

std::vector<int32_t> balanced_labels(int per_class, int classes) {
  std::vector<int32_t> l;
  for (int k = 0; k < per_class * classes; ++k) l.push_back(k % classes);
  return l;
}

void expect_exact_cover(const std::vector<std::vector<int32_t>>& parts, size_t total) {
  std::set<int32_t> seen;
  size_t count = 0;
  for (const auto& p : parts) {
    EXPECT_FALSE(p.empty());
    count += p.size();
    seen.insert(p.begin(), p.end());
  }
  EXPECT_EQ(count, total);
  EXPECT_EQ(seen.size(), total);
}

TEST(Partition, IidAndContiguousShardsDifferInSizeByAtMostOne) {
  const auto labels = balanced_labels(10, 10);  // 100 samples
  for (const char* kind : {"iid", "contiguous"}) {
    const auto parts = partition(labels, 10, 7, parse_partition(kind, {}), 1);
    expect_exact_cover(parts, 100);
    for (const auto& p : parts) EXPECT_TRUE(p.size() == 14 || p.size() == 15) << kind;  // 100 / 7 = 14.3
  }
  EXPECT_EQ(partition(labels, 10, 4, parse_partition("contiguous", {}), 1)[1].front(), 25);
}

TEST(Partition, ByLabelGivesEachOfTenNodesOneClass) {
  const auto labels = balanced_labels(20, 10);
  const auto parts = partition(labels, 10, 10, parse_partition("by-label", {}), 1);
  expect_exact_cover(parts, 200);
  for (size_t i = 0; i < parts.size(); ++i) {
    for (int32_t k : parts[i]) EXPECT_EQ(labels[static_cast<size_t>(k)], static_cast<int32_t>(i));
  }
}

TEST(Partition, SmallDirichletAlphaSkewsTheLabelMix) {
  const auto labels = balanced_labels(100, 10);
  // Measure skew as the mean over nodes of the largest class share: 0.1-ish for IID-like splits, near 1
  // for alpha -> 0.
  const auto skew = [&](double alpha) {
    const auto parts = partition(labels, 10, 10, PartitionSpec{PartitionKind::kDirichlet, alpha}, 3);
    expect_exact_cover(parts, 1000);
    double total = 0;
    for (const auto& p : parts) {
      std::vector<int> count(10, 0);
      for (int32_t k : p) ++count[static_cast<size_t>(labels[static_cast<size_t>(k)])];
      total += static_cast<double>(*std::max_element(count.begin(), count.end())) / static_cast<double>(p.size());
    }
    return total / 10;
  };
  const double skewed = skew(0.1);
  const double mixed = skew(100.0);
  EXPECT_GT(skewed, 0.5);
  EXPECT_LT(mixed, 0.25);
}

TEST(Partition, BadSpecsAndTooManyNodesAreInputErrors) {
  EXPECT_THROW(parse_partition("dirichlet:-1", {}), InputError);
  EXPECT_THROW(parse_partition("dirichlet:x", {}), InputError);
  try {
    parse_partition("by-lable", Where{"", 0, "--partition"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'by-label'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(partition(balanced_labels(1, 3), 3, 4, PartitionSpec{}, 1), InputError);
  EXPECT_EQ(parse_partition("dirichlet:0.5", {}).alpha, 0.5);
}

// --- data files -------------------------------------------------------------------------------------------

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>((v >> 16) & 255), static_cast<char>((v >> 8) & 255),
          static_cast<char>(v & 255)};
}

TEST(Idx, ParsesImagesAndLabelsAndScalesPixels) {
  const std::string images = be32(0x803) + be32(2) + be32(1) + be32(2) + std::string("\x00\xff\x80\x01", 4);
  const std::string labels = be32(0x801) + be32(2) + std::string("\x03\x01", 2);
  const Dataset d = parse_idx(images, labels, "x", 1.0f / 255.0f);
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.features.cols(), 2);
  EXPECT_FLOAT_EQ(d.features(0, 1), 1.0f);
  EXPECT_FLOAT_EQ(d.features(1, 0), 128.0f / 255.0f);
  EXPECT_EQ(d.labels[0], 3);
  EXPECT_EQ(d.classes, 4);
}

TEST(Idx, BadMagicTruncationAndCountMismatchAreInputErrors) {
  const std::string labels = be32(0x801) + be32(1) + std::string("\x00", 1);
  EXPECT_THROW(parse_idx(be32(0x801) + be32(1) + be32(1) + be32(1) + "a", labels, "x", 1), InputError);
  EXPECT_THROW(parse_idx(be32(0x803) + be32(1) + be32(2) + be32(2) + "ab", labels, "x", 1), InputError);
  EXPECT_THROW(parse_idx(be32(0x803) + be32(2) + be32(1) + be32(1) + "ab", labels, "x", 1), InputError);
}

TEST(DigitsCsv, ParsesAndNamesTheLineOfBadData) {
  const Dataset d = parse_digits_csv("0,16,8,1\n16,0,0,9\n", "d.csv");
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.features.cols(), 3);
  EXPECT_FLOAT_EQ(d.features(0, 2), 0.5f);
  EXPECT_EQ(d.labels[1], 9);
  EXPECT_EQ(d.classes, 10);
  const auto message = [](std::string_view text) {
    try {
      parse_digits_csv(text, "d.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("0,1,2\n0,x,1\n").find("d.csv:2"), std::string::npos);
  EXPECT_NE(message("0,1,2\n0,1\n").find("expected 3 fields"), std::string::npos);
  EXPECT_NE(message("0,17,2\n").find("expected 0..16"), std::string::npos);
  EXPECT_NE(message("").find("no samples"), std::string::npos);
}

TEST(Datasets, AMissingFashionMnistNamesThePackageToInstall) {
  try {
    read_fashion_mnist("/nonexistent/fashion");
    FAIL();
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dataset 'fashion-mnist' not found at /nonexistent/fashion"), std::string::npos) << m;
    EXPECT_NE(m.find("install the Debian package dataset-fashion-mnist"), std::string::npos) << m;
  }
  EXPECT_THROW(read_digits("/nonexistent/digits.csv.gz"), InputError);
}

TEST(Datasets, TheDebianPackagesFilesHaveTheirPublishedShapes) {
  // Fashion-MNIST: 60,000 training and 10,000 test images of 28 x 28, 10 classes (Xiao et al. 2017);
  // scikit-learn digits: 1,797 images of 8 x 8, 10 classes (sklearn docs, load_digits).
  if (!std::filesystem::exists(std::string(kDigitsCsv))) GTEST_SKIP() << "python3-sklearn is not installed";
  const TrainTest digits = read_digits();
  EXPECT_EQ(digits.train.size(), 1797);
  EXPECT_EQ(digits.train.features.cols(), 64);
  EXPECT_EQ(digits.train.classes, 10);
  if (!std::filesystem::exists(std::string(kFashionMnistDir))) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const TrainTest f = read_fashion_mnist();
  EXPECT_EQ(f.train.size(), 60000);
  EXPECT_EQ(f.test.size(), 10000);
  EXPECT_EQ(f.train.features.cols(), 784);
  EXPECT_EQ(f.train.classes, 10);
  EXPECT_LE(f.train.features.maxCoeff(), 1.0f);
}

// --- speed paths (docs/decentral_algorithms.md, "Speed") ----------------------------------------------------

TEST(Logistic, FixedAndRuntimeDimensionKernelsMatchFiniteDifferences) {
  // d <= 16 runs a kernel with the dimension fixed at compile time (even and odd d), d > 16 the generic one.
  for (int64_t d : {10, 7, 20}) {
    SyntheticSpec s;
    s.nodes = 2;
    s.dim = d;
    s.samples = 400;
    expect_gradient_matches(*make_logistic_nonconvex(s), random_point(d, 20 + static_cast<uint64_t>(d), 0.5));
  }
}

TEST(GradientOracle, AllNodesAtOnceEqualsOneNodeAtATimeBitForBit) {
  // gradients() draws every node's minibatch first and reads all rows as one prefetched stream; every node's
  // draws come from its own stream, so the values are exactly those of per-node gradient() calls.
  for (int64_t d : {10, 20}) {
    SyntheticSpec s;
    s.nodes = 5;
    s.dim = d;
    s.samples = 5000;
    const auto p = make_logistic_nonconvex(s);
    const NodeMatrix x = p->initial_point(3);
    NodeMatrix all(5, d), one(5, d);
    GradientOracle a(*p, 37, 9), b(*p, 37, 9);
    for (int step = 0; step < 3; ++step) {
      a.gradients(x, all);
      for (NodeIndex i = 0; i < 5; ++i) b.gradient(i, x.row(i).data(), one.row(i).data());
      EXPECT_EQ(all, one) << "d = " << d << ", step " << step;
    }
    EXPECT_EQ(a.samples_processed(), 3 * 5 * 37);
  }
}

// Records the positions of every minibatch it is asked for.
class RecordingProblem final : public Problem {
 public:
  explicit RecordingProblem(int64_t m) : m_(m) {}
  std::string name() const override { return "recording"; }
  int64_t dim() const override { return 1; }
  NodeIndex num_nodes() const override { return 1; }
  int64_t local_size(NodeIndex) const override { return m_; }
  double local_gradient(NodeIndex, const double*, double* g, const Batch& batch, RandomStream*, Scratch&) const override {
    batches.emplace_back(batch.local, batch.local + batch.size);
    if (g != nullptr) *g = 0;
    return 0;
  }
  NodeMatrix initial_point(uint64_t) const override { return NodeMatrix::Zero(1, 1); }
  mutable std::vector<std::vector<int32_t>> batches;

 private:
  int64_t m_;
};

TEST(GradientOracle, MinibatchesAreDistinctPositionsDrawnUniformly) {
  // Floyd's algorithm over m = 100 positions, batch 30, N = 4000 draws: each position is in a batch with
  // probability 30/100, so its count is Binomial(4000, 0.3): mean 1200, SD sqrt(4000 * 0.3 * 0.7) = 29.0.
  // 100 counts all within 4.5 SD (130) fails with probability < 100 * 7e-6.
  RecordingProblem p(100);
  GradientOracle o(p, 30, 5);
  const NodeMatrix x = NodeMatrix::Zero(1, 1);
  NodeMatrix g(1, 1);
  for (int t = 0; t < 4000; ++t) o.gradients(x, g);
  ASSERT_EQ(p.batches.size(), 4000u);
  std::vector<int> count(100, 0);
  for (const std::vector<int32_t>& b : p.batches) {
    ASSERT_EQ(b.size(), 30u);
    EXPECT_EQ(std::set<int32_t>(b.begin(), b.end()).size(), 30u);
    for (int32_t v : b) {
      ASSERT_TRUE(v >= 0 && v < 100) << v;
      ++count[static_cast<size_t>(v)];
    }
  }
  for (int v = 0; v < 100; ++v) EXPECT_NEAR(count[static_cast<size_t>(v)], 1200, 130) << v;
}

TEST(Classifier, FloatMinibatchGradientsAgreeWithTheDoublePath) {
  // A minibatch made of all of a node's samples takes the float-GEMM path; Batch{} (all samples) the double
  // one. Each float product sums k <= 30 terms of size <= max|x| (features in [0, 1], probabilities <= 1), so
  // its error is <= (k + 2) u sum|terms| with u = 2^-24 = 6e-8 (inputs rounded once, Higham eq. 3.5):
  // <= 32 * 6e-8 * 30 = 6e-5 absolute on a sum, 2e-6 after the 1/30 mean. We allow 1e-5.
  for (ClassifierKind kind : {ClassifierKind::kSoftmax, ClassifierKind::kMlp}) {
    ClassifierSpec c;
    c.kind = kind;
    c.hidden = 4;
    c.nodes = 1;
    c.weight_decay = 0.1;
    const auto p = make_classifier(tiny_data(), c);
    const Eigen::VectorXd x = random_point(p->dim(), 8, 1.0);
    Scratch s;
    Eigen::VectorXd exact(p->dim()), fast(p->dim());
    p->local_gradient(0, x.data(), exact.data(), Batch{}, nullptr, s);
    std::vector<int32_t> all(30);
    for (int32_t k = 0; k < 30; ++k) all[static_cast<size_t>(k)] = k;
    p->local_gradient(0, x.data(), fast.data(), Batch{all.data(), 30, false}, nullptr, s);
    EXPECT_LT((fast - exact).cwiseAbs().maxCoeff(), 1e-5) << p->name();
    EXPECT_GT(exact.cwiseAbs().maxCoeff(), 1e-2) << p->name();  // a gradient worth comparing
  }
}

TEST(ExpNegAbs, WithinOneUlpOfStdExpOverTheWholeRange) {
  // exp(-|x|) against the C library's correctly rounded-in-practice exp: arguments on a grid across
  // [0, 708] (every reduction interval m ln 2 +- ln2/2, both signs of x), the interval ends, and 0.
  // |x| > 708 is clamped to exp(-708) (documented): below 1e-307 absolute.
  std::vector<double> xs = {0.0, -0.0, 1e-300, 0.5 * std::log(2.0), -0.5 * std::log(2.0), 1.0, 708.0, -708.0};
  for (int k = 0; k <= 200000; ++k) xs.push_back((k % 2 ? -1.0 : 1.0) * 708.0 * k / 200000.0);
  std::vector<double> out(xs.size()), base(xs.size());
  exp_neg_abs(xs.data(), out.data(), static_cast<int64_t>(xs.size()));
  force_baseline_kernels(true);  // the two-lane form must give the same bits as the four-lane one
  exp_neg_abs(xs.data(), base.data(), static_cast<int64_t>(xs.size()));
  force_baseline_kernels(false);
  EXPECT_EQ(out, base);
  double worst_ulp = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const double want = std::exp(-std::fabs(xs[k]));
    const double ulp = std::nextafter(want, 1.0) - want;
    worst_ulp = std::max(worst_ulp, std::fabs(out[k] - want) / ulp);
  }
  std::printf("exp_neg_abs: worst error %.3f ulp over %zu arguments\n", worst_ulp, xs.size());
  EXPECT_LE(worst_ulp, 1.0);  // the table (half an ulp) and one rounding of s + s q
  EXPECT_EQ(out[0], 1.0);
  // An odd count takes the scalar tail; a huge argument gives (almost) zero.
  const double big[3] = {1000.0, -750.0, 3.0};
  double e[3];
  exp_neg_abs(big, e, 3);
  EXPECT_LT(e[0], 1e-307);
  EXPECT_LT(e[1], 1e-307);
  EXPECT_NEAR(e[2], std::exp(-3.0), 2e-16 * std::exp(-3.0));
}

TEST(LogisticKernels, Avx2AndBaselineAgreeBitForBit) {
  // The AVX2 kernels hold two rows in one four-lane vector and do the baseline's operations in the
  // same order without fused multiply-adds, so losses and gradients must be identical to the last
  // bit: even and odd dimensions (the odd last feature is a scalar), an odd number of samples per node
  // (a chunk's last row taken alone), full-data metrics and minibatches. On a CPU without AVX2 both
  // runs take the baseline and the check holds trivially.
  for (const int64_t dim : {10, 7}) {
    SyntheticSpec s;
    s.nodes = 4;
    s.dim = dim;
    s.samples = 4 * 1001;
    const auto p = make_logistic_nonconvex(s);
    const NodeMatrix x = p->initial_point(5) * 300.0;  // |z^T x| of order 1-10: both exp branches
    auto run = [&](bool baseline) {
      force_baseline_kernels(baseline);
      Scratch sc;
      Eigen::VectorXd grad(dim);
      std::vector<double> out;
      const Eigen::RowVectorXd mean = x.colwise().mean();
      out.push_back(full_objective(*p, mean.data(), grad.data(), sc));
      out.insert(out.end(), grad.data(), grad.data() + dim);
      GradientOracle oracle(*p, 33, 9);
      NodeMatrix g(x.rows(), x.cols());
      for (int it = 0; it < 3; ++it) {
        oracle.gradients(x, g);
        out.insert(out.end(), g.data(), g.data() + g.size());
      }
      force_baseline_kernels(false);
      return out;
    };
    const std::vector<double> fast = run(false), base = run(true);
    ASSERT_EQ(fast.size(), base.size());
    for (size_t k = 0; k < fast.size(); ++k) EXPECT_EQ(fast[k], base[k]) << "dim " << dim << " value " << k;
  }
}

}  // namespace
}  // namespace orrery::decentral
