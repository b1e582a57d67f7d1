#include "decentral/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>

#include "core/random.h"
#include "core/strings.h"

namespace orrery::decentral {

namespace {

uint32_t be32(const std::string& s, size_t at) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[at + k])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

void shuffle(std::vector<int32_t>& v, RandomStream& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.uniform_int(i)]);
}

// Contiguous near-equal shards of `order`: node i gets [floor(i N / n), floor((i+1) N / n)).
std::vector<std::vector<int32_t>> shards(const std::vector<int32_t>& order, NodeIndex nodes) {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(nodes));
  const int64_t total = static_cast<int64_t>(order.size());
  for (NodeIndex i = 0; i < nodes; ++i) {
    const int64_t lo = i * total / nodes;
    const int64_t hi = (i + 1) * total / nodes;
    out[static_cast<size_t>(i)].assign(order.begin() + lo, order.begin() + hi);
  }
  return out;
}

}  // namespace

std::string read_maybe_gzip(const std::string& path, std::string_view missing_hint) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(Where{path, 0, ""}, "file not found", std::string(missing_hint));
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(Where{path, 0, ""}, "cannot open the file", std::string(missing_hint));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int got = gzread(f, buf, sizeof buf);
    if (got < 0) {
      gzclose(f);
      throw InputError(Where{path, 0, ""}, "corrupt gzip data");
    }
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  gzclose(f);
  return out;
}

Dataset parse_idx(const std::string& images, const std::string& labels, const std::string& file, float scale) {
  if (images.size() < 16 || be32(images, 0) != 0x00000803u) {
    throw InputError(Where{file, 0, "images"}, "not an IDX image file (expected magic 0x00000803 and 16 header bytes)");
  }
  if (labels.size() < 8 || be32(labels, 0) != 0x00000801u) {
    throw InputError(Where{file, 0, "labels"}, "not an IDX label file (expected magic 0x00000801 and 8 header bytes)");
  }
  const uint64_t count = be32(images, 4);
  const uint64_t rows = be32(images, 8);
  const uint64_t cols = be32(images, 12);
  const uint64_t label_count = be32(labels, 4);
  if (label_count != count) {
    throw InputError(Where{file, 0, "labels"}, fmt::format("{} labels for {} images", label_count, count));
  }
  const uint64_t pixels = rows * cols;
  if (count == 0 || pixels == 0 || images.size() != 16 + count * pixels || labels.size() != 8 + count) {
    throw InputError(Where{file, 0, ""}, fmt::format("truncated IDX data: header says {} images of {}x{}, file has {} "
                                                     "image bytes and {} label bytes",
                                                     count, rows, cols, images.size() - 16, labels.size() - 8));
  }
  Dataset d;
  d.name = file;
  d.features.resize(static_cast<Eigen::Index>(count), static_cast<Eigen::Index>(pixels));
  float* out = d.features.data();
  for (uint64_t k = 0; k < count * pixels; ++k) out[k] = static_cast<float>(static_cast<unsigned char>(images[16 + k])) * scale;
  d.labels.resize(count);
  int32_t max_label = 0;
  for (uint64_t k = 0; k < count; ++k) {
    d.labels[k] = static_cast<unsigned char>(labels[8 + k]);
    max_label = std::max(max_label, d.labels[k]);
  }
  d.classes = max_label + 1;
  return d;
}

TrainTest read_fashion_mnist(const std::string& dir) {
  const std::string hint =
      fmt::format("dataset 'fashion-mnist' not found at {}; install the Debian package dataset-fashion-mnist", dir);
  const auto load = [&](const std::string& stem) {
    const std::string images = dir + "/" + stem + "-images-idx3-ubyte.gz";
    const std::string labels = dir + "/" + stem + "-labels-idx1-ubyte.gz";
    const auto pick = [](const std::string& gz) {
      std::error_code ec;
      if (std::filesystem::exists(gz, ec)) return gz;
      const std::string plain = gz.substr(0, gz.size() - 3);
      return std::filesystem::exists(plain, ec) ? plain : gz;
    };
    const std::string img_path = pick(images);
    const std::string lab_path = pick(labels);
    std::error_code ec;
    if (!std::filesystem::exists(img_path, ec) || !std::filesystem::exists(lab_path, ec)) {
      throw InputError(Where{img_path, 0, ""}, hint);
    }
    Dataset d = parse_idx(read_maybe_gzip(img_path, hint), read_maybe_gzip(lab_path, hint), img_path, 1.0f / 255.0f);
    d.name = "fashion-mnist/" + stem;
    return d;
  };
  TrainTest tt{load("train"), load("t10k")};
  if (tt.train.features.cols() != tt.test.features.cols()) {
    throw InputError(Where{dir, 0, ""}, "train and test images differ in size");
  }
  tt.test.classes = tt.train.classes = std::max(tt.train.classes, tt.test.classes);
  return tt;
}

Dataset parse_digits_csv(std::string_view text, const std::string& file) {
  Dataset d;
  d.name = "digits";
  std::vector<float> values;
  int64_t width = -1;
  int64_t line_no = 0;
  int32_t max_label = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    int64_t fields = 0;
    size_t at = 0;
    std::vector<int> row;
    while (at <= line.size()) {
      size_t comma = line.find(',', at);
      if (comma == std::string_view::npos) comma = line.size();
      const std::string_view tok = trim(line.substr(at, comma - at));
      int v = 0;
      const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec != std::errc() || p != tok.data() + tok.size() || tok.empty()) {
        throw InputError(Where{file, line_no, ""}, fmt::format("field {}: expected an integer, got '{}'", fields + 1, tok));
      }
      row.push_back(v);
      ++fields;
      at = comma + 1;
    }
    if (width < 0) width = fields;
    if (fields != width || fields < 2) {
      throw InputError(Where{file, line_no, ""}, fmt::format("expected {} fields like the first line, got {}", width, fields));
    }
    const int label = row.back();
    if (label < 0 || label > 1000) throw InputError(Where{file, line_no, ""}, fmt::format("label {} out of range", label));
    for (int64_t k = 0; k + 1 < fields; ++k) {
      const int v = row[static_cast<size_t>(k)];
      if (v < 0 || v > 16) {
        throw InputError(Where{file, line_no, ""}, fmt::format("pixel {} is {}, expected 0..16", k + 1, v));
      }
      values.push_back(static_cast<float>(v) / 16.0f);
    }
    d.labels.push_back(label);
    max_label = std::max(max_label, label);
  }
  if (d.labels.empty()) throw InputError(Where{file, 0, ""}, "no samples");
  d.features = Eigen::Map<FeatureMatrix>(values.data(), static_cast<Eigen::Index>(d.labels.size()),
                                         static_cast<Eigen::Index>(width - 1));
  d.classes = max_label + 1;
  return d;
}

TrainTest read_digits(const std::string& path) {
  const std::string hint = fmt::format(
      "dataset 'digits' not found at {}; install the Debian package python3-sklearn (it ships digits.csv.gz)", path);
  return TrainTest{parse_digits_csv(read_maybe_gzip(path, hint), path), Dataset{}};
}

PartitionSpec parse_partition(std::string_view text_in, const Where& where) {
  const std::string text = to_lower(trim(text_in));
  PartitionSpec s;
  if (text == "iid") return s;
  if (text == "contiguous") {
    s.kind = PartitionKind::kContiguous;
    return s;
  }
  if (text == "by-label" || text == "label") {
    s.kind = PartitionKind::kByLabel;
    return s;
  }
  if (text.starts_with("dirichlet")) {
    s.kind = PartitionKind::kDirichlet;
    if (text.size() > 9) {
      const std::string_view a = std::string_view(text).substr(10);
      double v = 0;
      const auto [p, ec] = std::from_chars(a.data(), a.data() + a.size(), v);
      if (text[9] != ':' || ec != std::errc() || p != a.data() + a.size() || !(v > 0) || !std::isfinite(v)) {
        throw InputError(where, fmt::format("expected dirichlet:ALPHA with ALPHA > 0, got '{}'", text));
      }
      s.alpha = v;
    }
    return s;
  }
  throw InputError(where, fmt::format("unknown partition '{}'", text),
                   suggest(text, {"iid", "contiguous", "by-label", "dirichlet"}));
}

std::string partition_name(const PartitionSpec& spec) {
  switch (spec.kind) {
    case PartitionKind::kIid: return "iid";
    case PartitionKind::kContiguous: return "contiguous";
    case PartitionKind::kByLabel: return "by-label";
    case PartitionKind::kDirichlet: return fmt::format("dirichlet:{:g}", spec.alpha);
  }
  return "iid";
}

std::vector<std::vector<int32_t>> partition(const std::vector<int32_t>& labels, int32_t classes, NodeIndex nodes,
                                            const PartitionSpec& spec, uint64_t seed, const Where& where) {
  const int64_t total = static_cast<int64_t>(labels.size());
  if (nodes < 1 || nodes > total) {
    throw InputError(where, fmt::format("cannot split {} samples over {} nodes (need 1 <= nodes <= samples)", total, nodes));
  }
  RandomStream rng = RandomStream::derive(seed, "decentral.partition");
  std::vector<int32_t> order(static_cast<size_t>(total));
  std::iota(order.begin(), order.end(), 0);
  switch (spec.kind) {
    case PartitionKind::kContiguous: return shards(order, nodes);
    case PartitionKind::kIid: shuffle(order, rng); return shards(order, nodes);
    case PartitionKind::kByLabel:
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return labels[static_cast<size_t>(a)] < labels[static_cast<size_t>(b)]; });
      return shards(order, nodes);
    case PartitionKind::kDirichlet: break;
  }
  std::vector<std::vector<int32_t>> by_class(static_cast<size_t>(std::max(classes, 1)));
  for (int32_t k = 0; k < total; ++k) {
    const int32_t c = labels[static_cast<size_t>(k)];
    if (c < 0 || c >= classes) throw InputError(where, fmt::format("label {} outside [0, {})", c, classes));
    by_class[static_cast<size_t>(c)].push_back(k);
  }
  const Gamma gamma(spec.alpha, 1.0, where.with_key("alpha"));
  std::vector<double> p(static_cast<size_t>(nodes));
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<std::vector<int32_t>> out(static_cast<size_t>(nodes));
    for (std::vector<int32_t> members : by_class) {
      if (members.empty()) continue;
      shuffle(members, rng);
      double sum = 0;
      for (double& v : p) sum += (v = gamma.sample(rng));
      double cum = 0;
      int64_t lo = 0;
      const int64_t m = static_cast<int64_t>(members.size());
      for (NodeIndex i = 0; i < nodes; ++i) {
        cum += p[static_cast<size_t>(i)];
        const int64_t hi = i + 1 == nodes ? m : std::min<int64_t>(m, std::llround(cum / sum * static_cast<double>(m)));
        for (int64_t k = lo; k < hi; ++k) out[static_cast<size_t>(i)].push_back(members[static_cast<size_t>(k)]);
        lo = std::max(lo, hi);
      }
    }
    if (std::all_of(out.begin(), out.end(), [](const auto& v) { return !v.empty(); })) {
      for (auto& v : out) std::sort(v.begin(), v.end());
      return out;
    }
  }
  throw InputError(where, fmt::format("dirichlet:{:g} left a node without samples in 100 draws for {} nodes", spec.alpha, nodes),
                   "use a larger alpha or fewer nodes");
}

}  // namespace orrery::decentral
