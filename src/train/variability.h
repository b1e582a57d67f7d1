// GPU-to-GPU speed variability: the slowest GPU of a synchronous job sets its pace.
//
// Model card
//   What: every GPU of a job runs at its own persistent speed, normally distributed around the
//     typical GPU's (the one the compute model describes) with relative standard deviation sigma;
//     manufacturing and power management make identical GPUs differ (Sinha et al., SC'22, "Not All
//     GPUs Are Created Equal", arXiv 2208.11035: 8% average performance variation across the GPUs of
//     V100 and MI60 clusters, outliers up to 1.5x slower than the median). A training step waits at
//     its pipeline transfers and data-parallel collectives for every rank, so the job computes at the
//     pace of its slowest GPU: compute times scale by 1 + sigma E[max of n standard normals], n the
//     job's GPU count. The expectation is the integral of x n phi(x) Phi(x)^(n-1) (order statistics),
//     computed numerically.
//   Range of validity: persistent per-GPU speeds (clock and power-management differences), not
//     transient jitter; communication is not slowed. sigma is an input: no H100 or Blackwell
//     distribution is published, and a cluster's own is measured by timing one kernel on each GPU.
//   Tests: Variability.* (variability_test.cc: the closed forms for n = 2 and 3 and Harter's table).
#pragma once

#include <cstdint>

namespace orrery::train {

// E[max of n independent standard normal variables]; 0 for n = 1. REQUIRES: n >= 1.
double expected_max_of_normals(int64_t n);

// The compute-time factor of a job of `gpus` GPUs whose speeds vary with relative standard deviation
// `sigma`: 1 + sigma E[max of gpus normals]. REQUIRES: sigma >= 0, gpus >= 1.
double slowest_gpu_factor(double sigma, int64_t gpus);

}  // namespace orrery::train
