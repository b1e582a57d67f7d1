// Labelled data sets for the decentralized-optimization problems, and how they are split over nodes.
//
// Model card
//   What      A classification data set (features in [0, 1] as float, integer labels) read from the files
//             Debian packages ship, and partitions of its samples over n nodes.
//   Sources   Fashion-MNIST (Xiao, Rasul, Vollgraf, arXiv 1708.07747, 2017): the IDX files of the Debian
//             package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,
//             labels-idx1}-ubyte.gz; 60,000 + 10,000 images of 28 x 28 = 784 pixels, 10 classes; pixels
//             scaled by 1/255). IDX format (LeCun et al.): big-endian magic 0x00000803 (images) or
//             0x00000801 (labels), then the dimensions as big-endian uint32, then uint8 data.
//             scikit-learn's digits (UCI optdigits test set, 1,797 images of 8 x 8 = 64 pixels with values
//             0..16, 10 classes; scaled by 1/16): the CSV sklearn/datasets/data/digits.csv.gz inside the
//             Debian package python3-sklearn, 65 comma-separated integers per line, the label last. It has
//             no separate test set.
//             Files may be gzip-compressed or plain (zlib's gzread reads both).
//   Partitions iid         a seeded uniform shuffle, then contiguous near-equal shards (sizes differ by <= 1);
//             contiguous  the samples in file order, contiguous near-equal shards (the papers' synthetic
//                         setup splits its data this way);
//             by-label    samples sorted by label (stable), then contiguous near-equal shards: each node
//                         sees one or a few classes (McMahan et al.'s pathological non-IID split);
//             dirichlet:a for every class c, proportions p ~ Dirichlet(a, ..., a) over the nodes and the
//                         class's (shuffled) samples cut by the cumulative proportions (Hsu, Qi, Brown,
//                         arXiv 1909.06335, 2019); small a is very skewed. Redrawn (up to 100 times) until
//                         every node has at least one sample.
//             All draws come from RandomStream::derive(seed, "decentral.partition").
//   Errors    Missing files throw InputError naming the path and the Debian package to install; malformed
//             files name file:line (CSV) or the byte offset (IDX).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "core/error.h"
#include "decentral/graph.h"

namespace orrery::decentral {

using FeatureMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Dataset {
  std::string name;
  FeatureMatrix features;       // samples x features, values in [0, 1]
  std::vector<int32_t> labels;  // in [0, classes)
  int32_t classes = 0;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

struct TrainTest {
  Dataset train;
  Dataset test;  // empty (size 0) when the data set has none
};

// Default locations of the Debian packages' files.
inline constexpr std::string_view kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr std::string_view kDigitsCsv = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

// Reads Fashion-MNIST from `dir` (the four IDX files). Throws InputError when missing or malformed.
TrainTest read_fashion_mnist(const std::string& dir = std::string(kFashionMnistDir));
// Reads scikit-learn's digits CSV. Throws InputError when missing or malformed.
TrainTest read_digits(const std::string& path = std::string(kDigitsCsv));
// Parsers over in-memory bytes (tests); `file` names the source in errors.
Dataset parse_idx(const std::string& images, const std::string& labels, const std::string& file, float scale);
Dataset parse_digits_csv(std::string_view text, const std::string& file);
// The whole content of a file, decompressed when gzip-compressed. Throws InputError when unreadable.
std::string read_maybe_gzip(const std::string& path, std::string_view missing_hint);

enum class PartitionKind { kIid, kContiguous, kByLabel, kDirichlet };

struct PartitionSpec {
  PartitionKind kind = PartitionKind::kIid;
  double alpha = 0.5;  // Dirichlet concentration
};

// "iid", "contiguous", "by-label", "dirichlet:ALPHA" (alpha > 0).
PartitionSpec parse_partition(std::string_view text, const Where& where);
std::string partition_name(const PartitionSpec& spec);

// Node i's sample indices (into `labels`), each node non-empty. REQUIRES (InputError): nodes <= samples.
std::vector<std::vector<int32_t>> partition(const std::vector<int32_t>& labels, int32_t classes, NodeIndex nodes,
                                            const PartitionSpec& spec, uint64_t seed, const Where& where = {});

}  // namespace orrery::decentral
