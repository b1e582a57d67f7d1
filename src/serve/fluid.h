// The fluid benchmark of the WAIT paper: equilibrium memory, batch composition and iteration time of a
// serving system with a linear iteration-time model, and the largest stable arrival rate for a KV
// capacity.
//
// Model card (Ao, Luo, Simchi-Levi, Wang, arXiv 2504.11320; ../shared/validation/serving.md)
//   Inputs    types j with arrival rate lambda_j (req/s), prompt length l_j and output length l'_j
//             (tokens); iteration time tau = d0 + d1 x (batch KV tokens); KV capacity C (tokens).
//   Equations w_j = lambda_j (l'_j + 1)(l_j + l'_j / 2), W = sum_j w_j
//             n*_j = d0 lambda_j / (1 - d1 W)         prompts per stage of type j
//             dT*  = d0 / (1 - d1 W)                   iteration time
//             M*   = d0 W / (1 - d1 W)                 KV tokens in use
//             throughput bound = sum_j lambda_j l'_j   output tokens/s
//             stable iff d1 W < 1 and M* <= C. Scaling every rate by a, M*(a) = C gives
//             a* = C / (W (d0 + d1 C)): the largest stable total rate is a* sum_j lambda_j.
//   Range     one replica, the fluid (large-rate) limit; lengths are per-type means.
#pragma once

#include <cstdint>
#include <vector>

#include "serve/scheduler.h"

namespace orrery::serve {

struct FluidResult {
  double w = 0.0;           // W, KV token-seconds per second per unit d1 (tokens^2 / s)
  double load = 0.0;        // d1 W; >= 1: no policy is stable
  bool stable = false;      // load < 1 and M* <= C
  std::vector<double> n_star;
  double dt_star_s = 0.0;   // +inf when load >= 1
  double memory_star = 0.0; // tokens; +inf when load >= 1
  double throughput_bound = 0.0;  // output tokens/s
  double max_stable_rate = 0.0;   // requests/s, same mix
  double rate = 0.0;              // sum of lambda_j
};

// REQUIRES (InputError): types non-empty, rates > 0, lengths >= 1 (output), d0 > 0, d1 >= 0, C >= 1.
FluidResult fluid_equilibrium(const std::vector<TypeStats>& types, double d0_s, double d1_s, double capacity_tokens,
                              const Where& where = {});

}  // namespace orrery::serve
