// The fluid benchmark of the WAIT paper: equilibrium memory, batch composition and iteration time of a
// serving system with a linear iteration-time model, and the largest stable arrival rate for a KV
// capacity.
//
// Model card (Ao, Luo, Simchi-Levi, Wang, arXiv 2504.11320; ../shared/validation/serving.md)
//   Inputs    types j with arrival rate lambda_j (req/s), prompt length l_j and output length l'_j
//             (tokens); iteration time tau = d0 + d1 x (batch KV tokens); KV capacity C (tokens).
//   Stages    The paper's prompt passes stages s = 0 (prefill) .. l'_j (l'_j decode steps) and holds
//             l_j + s KV tokens at stage s. Here, as in vLLM and Vidur, the prefill emits the first
//             output token, so a request with L_j output tokens runs in L_j iterations (stages
//             0 .. L_j - 1): the paper's l'_j is L_j - 1 and TypeStats::output is L_j. Then
//             w'_j = (l'_j + 1)(l_j + l'_j / 2) = L_j (l_j + (L_j - 1) / 2) = sum over the stages of the
//             KV of one request, exactly what the simulator's linear model charges it.
//   Equations w_j = lambda_j w'_j, W = sum_j w_j
//             n*_j = d0 lambda_j / (1 - d1 W)         prompts per stage of type j
//             dT*  = d0 / (1 - d1 W)                   iteration time
//             M*   = d0 W / (1 - d1 W)                 KV tokens in use
//             throughput bound = sum_j lambda_j L_j    output tokens/s (every emitted token)
//             stable iff d1 W < 1 and M* <= C. Scaling every rate by a, M*(a) = C gives
//             a* = C / (W (d0 + d1 C)): the largest stable total rate is a* sum_j lambda_j.
//   WAIT      Thresholds (serving.md): n_j prompts per stage of type j must satisfy the paper's
//             conditions  d0 + d1 M^pi <= n_j / lambda_j  for every j, with
//             M^pi = sum_j n_j w'_j <= C  (which imply M^pi >= M*).
//             The per-type period n_j / lambda_j must cover one iteration, so the stage queues do not
//             grow; the smaller n_j, the shorter the latency (a prompt waits about (l'_j + 1) n_j /
//             lambda_j below overload), so wait_thresholds_fluid() takes the smallest integers that
//             meet them with a relative slack s on the iteration time,
//               (1 + s)(d0 + d1 M^pi) <= n_j / lambda_j,
//             so that the server is at most 1 / (1 + s) busy and the prefill queues stay bounded under
//             Poisson noise (s = 0.05 by default, SchedulerConfig::wait_margin): start from
//             n_j = max(1, ceil(n*_j)) and raise the type with the shortest period n_j / lambda_j until
//             the inequality holds for every type. When no thresholds meet
//             them (d1 W >= 1, or M^pi would exceed C) the policy cannot be stable; it then uses the
//             largest memory that fits, n_j proportional to lambda_j with M^pi <= C (most throughput,
//             never an eviction).
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

struct WaitThresholds {
  std::vector<int64_t> n;      // per type, >= 1
  double memory = 0.0;         // M^pi = sum_j n_j w'_j, tokens
  bool meets_conditions = false;  // the paper's conditions hold (false: the memory-capped fallback)
};
// WAIT's thresholds by the rule of the model card. REQUIRES: rates > 0 (types with rate 0 get n = 1),
// d0 > 0, d1 >= 0, slack >= 0, capacity >= 1.
WaitThresholds wait_thresholds_fluid(const std::vector<TypeStats>& types, double d0_s, double d1_s, double slack,
                                     double capacity_tokens);

// Nested WAIT's batch cap tl for a workload whose lengths are known only in aggregate: WAIT's threshold
// for one type with the aggregate rate and mean lengths, spread over its mean decode length
// (tl = n x mean output, at least 1).
int64_t nested_wait_cap_fluid(const TypeStats& aggregate, double d0_s, double d1_s, double slack,
                              double capacity_tokens);

}  // namespace orrery::serve
