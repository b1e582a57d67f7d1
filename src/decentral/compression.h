// Compression operators for communication-efficient decentralized and federated optimization.
//
// Model card
//   What      C: R^d -> R^d applied to a message before it is sent.
//   Operators none      C(x) = x.
//             top-k     keep the k = max(1, round(ratio d)) entries of largest |x_j| (ties: lower index),
//                       zero the rest. Deterministic; ||C(x) - x||^2 <= (1 - k/d) ||x||^2 (Stich, Cordonnier,
//                       Jaggi, NeurIPS 2018, "Sparsified SGD with memory").
//             rand-k    keep k uniformly random entries (without replacement), unscaled: contractive in
//                       expectation, E||C(x) - x||^2 = (1 - k/d) ||x||^2 (as used by CHOCO; Koloskova,
//                       Stich, Jaggi, ICML 2019).
//             qsgd:s    stochastic quantization to s levels (Alistarh et al., NeurIPS 2017):
//                       C(x)_j = ||x|| sign(x_j) xi_j / s, xi_j = floor(s |x_j| / ||x||) + Bernoulli(frac);
//                       unbiased, E C(x) = x; variance <= min(d / s^2, sqrt(d) / s) ||x||^2.
//   Bytes     top-k / rand-k: k (8-byte value + 4-byte index); qsgd: 8 bytes (the norm) plus
//             ceil(d ceil(log2(2s + 1)) / 8); none: 8 d.
//   Error feedback (Seide et al. 2014; Karimireddy et al., ICML 2019): the sender keeps e, sends
//             q = C(v + e) and sets e <- v + e - q, so nothing is lost, only delayed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/random.h"

namespace orrery::decentral {

enum class CompressorKind { kNone, kTopK, kRandK, kQsgd };

struct CompressorSpec {
  CompressorKind kind = CompressorKind::kNone;
  double ratio = 1.0;  // top-k / rand-k: k / d
  int64_t levels = 1;  // qsgd: s
};

// "none", "top-k:RATIO", "rand-k:RATIO" (0 < RATIO <= 1), "qsgd:S" (S >= 1).
CompressorSpec parse_compressor(std::string_view text, const Where& where);
std::string compressor_name(const CompressorSpec& spec);

// Entries kept by top-k / rand-k for a d-vector.
int64_t kept_entries(const CompressorSpec& spec, int64_t d);
// Bytes of one compressed d-vector.
int64_t compressed_bytes(const CompressorSpec& spec, int64_t d);

// out = C(in), both of length d (may not alias). `rng` for rand-k and qsgd; `scratch` holds indices.
void compress(const CompressorSpec& spec, const double* in, double* out, int64_t d, RandomStream& rng,
              std::vector<int32_t>& scratch);

}  // namespace orrery::decentral
