// The training simulator's entry point: one plan of one model on one cluster -> memory, step time,
// throughput, MFU and HFU, with a breakdown. A planner calls validate_plan() (train/plan.h) first and
// evaluate() on the valid plans; each evaluation allocates only per-stage state.
//
// Model card (metrics; docs/training.md states them with examples)
//   tokens_per_s_per_gpu = gbs * seq / (step_time * gpus)
//   model FLOPs per step  = gbs * seq * F_tok, F_tok = model::training_flops_per_token(model, seq, kFull):
//                           6 N + 12 L a d_h s (PaLM, Chowdhery et al. 2022, App. B; non-causal attention
//                           as PaLM and Megatron-LM count it), N = matmul parameters incl. the LM head
//   tflops_per_gpu        = model FLOPs per step / (step_time * gpus)
//   mfu                   = tflops_per_gpu / dense peak of the plan's precision (catalog)
//   hfu                   = (model FLOPs + recompute FLOPs) / (step_time * gpus * peak): recompute
//                           FLOPs are the forward matmul FLOPs redone (full: the whole layer; selective:
//                           the attention core), so hfu >= mfu and they are equal without recompute.
#pragma once

#include "compute/compute_model.h"
#include "model/model_spec.h"
#include "net/topology.h"
#include "train/comm_model.h"
#include "train/layer_costs.h"
#include "train/memory.h"
#include "train/memory_timeline.h"
#include "train/plan.h"
#include "train/simulator.h"

namespace orrery::train {

struct EvaluateOptions {
  MemoryConstants memory;
  StepOptions step;
  bool simulate = true;  // false: memory only (a planner's first filter)
  bool memory_timeline = false;  // fill TrainResult::memory_timeline and StepResult::passes (needs simulate)
  // Links slower than nominal (train/comm_model.h). The stage of each rank gets its own communication
  // model: symmetry is kept by simulating that stage as the slow rank (the step waits for its slowest
  // rank). REQUIRES: 0 <= rank < plan.gpus(), factor >= 1.
  std::vector<SlowLink> slow_links;
  // The cluster's topology (train/flow_comm.h): when set, collectives and pipeline transfers are timed
  // at flow level on it (FlowComm) instead of by the alpha-beta model. REQUIRES: topology->num_gpus() ==
  // plan.gpus() and no slow_links (a slow link is a topology edit there).
  const net::Topology* topology = nullptr;
};

struct TrainResult {
  MemoryReport memory;
  StepResult step;
  double tokens_per_s_per_gpu = 0.0;
  double tflops_per_gpu = 0.0;
  double mfu = 0.0;
  double hfu = 0.0;
  Flops model_flops;  // per step, whole job
  FlopRate peak;      // dense peak of the precision, per GPU
  std::vector<MemorySample> memory_timeline;  // of the peak stage (EvaluateOptions::memory_timeline)
};

// REQUIRES: validate_plan(model, plan, plan.gpus(), *cluster.gpu) is empty.
TrainResult evaluate(const model::ModelSpec& model, const Plan& plan, const ClusterSpec& cluster,
                     const compute::ComputeModel& compute, const EvaluateOptions& options = {});

}  // namespace orrery::train
