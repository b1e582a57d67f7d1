#include "train/train.h"

namespace orrery::train {

TrainResult evaluate(const model::ModelSpec& model, const Plan& plan, const ClusterSpec& cluster,
                     const compute::ComputeModel& compute, const EvaluateOptions& options) {
  TrainResult r;
  const AlphaBetaComm comm(cluster, plan);
  const ModelCosts costs = model_costs(model, plan, compute, comm);
  r.memory = memory_model(model, plan, costs, *cluster.gpu, options.memory);
  r.peak = cluster.gpu->peak(plan.precision).value_or(FlopRate(0.0));
  const double tokens = static_cast<double>(plan.gbs) * static_cast<double>(plan.seq);
  r.model_flops = model::training_flops_per_token(model, plan.seq, model::AttentionFlops::kFull) * tokens;
  if (!options.simulate) return r;
  r.step = simulate_step(model, plan, costs, compute, comm, options.step);
  if (options.memory_timeline) {
    r.memory_timeline = memory_timeline(plan, r.memory, r.memory.peak_stage, r.step.passes, options.memory);
  }
  const double t = r.step.step_time.to_seconds();
  const double gpus = static_cast<double>(plan.gpus());
  if (t > 0.0) {
    r.tokens_per_s_per_gpu = tokens / (t * gpus);
    r.tflops_per_gpu = r.model_flops.count() / (t * gpus) * 1e-12;
    if (r.peak.per_second() > 0.0) {
      r.mfu = r.model_flops.count() / (t * gpus * r.peak.per_second());
      r.hfu = (r.model_flops.count() + r.step.recompute_flops.count()) / (t * gpus * r.peak.per_second());
    }
  }
  return r;
}

}  // namespace orrery::train
