#include "decentral/compression.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/strings.h"

namespace orrery::decentral {

CompressorSpec parse_compressor(std::string_view text_in, const Where& where) {
  const std::string text = to_lower(trim(text_in));
  CompressorSpec s;
  if (text == "none" || text == "identity") return s;
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const std::vector<std::string> names{"none", "top-k", "rand-k", "qsgd"};
  if (name != "top-k" && name != "rand-k" && name != "qsgd") {
    throw InputError(where, fmt::format("unknown compressor '{}'", text), suggest(name, names));
  }
  if (colon == std::string::npos) {
    throw InputError(where, fmt::format("'{}' needs a parameter: top-k:RATIO, rand-k:RATIO or qsgd:LEVELS", text));
  }
  const std::string_view arg = std::string_view(text).substr(colon + 1);
  double v = 0;
  const auto [p, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), v);
  const bool parsed = ec == std::errc() && p == arg.data() + arg.size() && std::isfinite(v);
  if (name == "qsgd") {
    if (!parsed || v < 1 || v != std::floor(v) || v > 1e6) {
      throw InputError(where, fmt::format("qsgd needs an integer level count >= 1, got '{}'", arg));
    }
    s.kind = CompressorKind::kQsgd;
    s.levels = static_cast<int64_t>(v);
    return s;
  }
  if (!parsed || !(v > 0) || v > 1) throw InputError(where, fmt::format("{} needs a ratio in (0, 1], got '{}'", name, arg));
  s.kind = name == "top-k" ? CompressorKind::kTopK : CompressorKind::kRandK;
  s.ratio = v;
  return s;
}

std::string compressor_name(const CompressorSpec& spec) {
  switch (spec.kind) {
    case CompressorKind::kNone: return "none";
    case CompressorKind::kTopK: return fmt::format("top-k:{:g}", spec.ratio);
    case CompressorKind::kRandK: return fmt::format("rand-k:{:g}", spec.ratio);
    case CompressorKind::kQsgd: return fmt::format("qsgd:{}", spec.levels);
  }
  return "none";
}

int64_t kept_entries(const CompressorSpec& spec, int64_t d) {
  if (spec.kind != CompressorKind::kTopK && spec.kind != CompressorKind::kRandK) return d;
  return std::clamp<int64_t>(std::llround(spec.ratio * static_cast<double>(d)), 1, d);
}

int64_t compressed_bytes(const CompressorSpec& spec, int64_t d) {
  switch (spec.kind) {
    case CompressorKind::kNone: return 8 * d;
    case CompressorKind::kTopK:
    case CompressorKind::kRandK: return 12 * kept_entries(spec, d);
    case CompressorKind::kQsgd: {
      const int64_t bits = static_cast<int64_t>(std::ceil(std::log2(2.0 * static_cast<double>(spec.levels) + 1.0)));
      return 8 + (d * bits + 7) / 8;
    }
  }
  return 8 * d;
}

void compress(const CompressorSpec& spec, const double* in, double* out, int64_t d, RandomStream& rng,
              std::vector<int32_t>& scratch) {
  switch (spec.kind) {
    case CompressorKind::kNone: std::copy(in, in + d, out); return;
    case CompressorKind::kTopK:
    case CompressorKind::kRandK: {
      const int64_t k = kept_entries(spec, d);
      scratch.resize(static_cast<size_t>(d));
      std::iota(scratch.begin(), scratch.end(), 0);
      if (spec.kind == CompressorKind::kTopK) {
        std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), [&](int32_t a, int32_t b) {
          const double fa = std::abs(in[a]);
          const double fb = std::abs(in[b]);
          return fa != fb ? fa > fb : a < b;
        });
      } else {
        for (int64_t j = 0; j < k; ++j) {
          const uint64_t pick = static_cast<uint64_t>(j) + rng.uniform_int(static_cast<uint64_t>(d - j));
          std::swap(scratch[static_cast<size_t>(j)], scratch[pick]);
        }
      }
      std::fill(out, out + d, 0.0);
      for (int64_t j = 0; j < k; ++j) out[scratch[static_cast<size_t>(j)]] = in[scratch[static_cast<size_t>(j)]];
      return;
    }
    case CompressorKind::kQsgd: {
      double norm2 = 0;
      for (int64_t j = 0; j < d; ++j) norm2 += in[j] * in[j];
      const double norm = std::sqrt(norm2);
      if (norm == 0) {
        std::fill(out, out + d, 0.0);
        return;
      }
      const double s = static_cast<double>(spec.levels);
      for (int64_t j = 0; j < d; ++j) {
        const double level = s * std::abs(in[j]) / norm;
        double xi = std::floor(level);
        if (rng.uniform01() < level - xi) xi += 1.0;
        out[j] = std::copysign(norm * xi / s, in[j]);
      }
      return;
    }
  }
}

}  // namespace orrery::decentral
