#include "train/train.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "train/flow_comm.h"

namespace orrery::train {

TrainResult evaluate(const model::ModelSpec& model, const Plan& plan, const ClusterSpec& cluster,
                     const compute::ComputeModel& compute, const EvaluateOptions& options) {
  TrainResult r;
  const AlphaBetaComm alpha_beta(cluster, plan);
  if (options.topology != nullptr && !options.slow_links.empty()) {
    throw std::invalid_argument("evaluate: slow_links run with the alpha-beta model; on a topology, edit the link");
  }
  std::unique_ptr<FlowComm> flow;
  if (options.topology != nullptr) flow = std::make_unique<FlowComm>(*options.topology, cluster, plan);
  const CommModel& comm = flow ? static_cast<const CommModel&>(*flow) : alpha_beta;
  const ModelCosts costs = model_costs(model, plan, compute, comm);
  r.memory = memory_model(model, plan, costs, *cluster.gpu, options.memory, cluster.host_memory_per_gpu);
  r.peak = cluster.gpu->peak(plan.precision).value_or(FlopRate(0.0));
  const double tokens = static_cast<double>(plan.gbs) * static_cast<double>(plan.seq);
  r.model_flops = model::training_flops_per_token(model, plan.seq, model::AttentionFlops::kFull) * tokens;
  if (!options.simulate) return r;
  StepOptions step = options.step;
  step.record_passes = step.record_passes || options.memory_timeline;
  std::vector<std::unique_ptr<AlphaBetaComm>> stage_comm;
  std::vector<std::unique_ptr<ModelCosts>> stage_costs;
  if (!options.slow_links.empty()) {
    std::vector<LinkFactors> links(static_cast<size_t>(plan.pp));
    const int64_t stride = group_stride(plan, Group::kPp);
    for (const SlowLink& l : options.slow_links) {
      LinkFactors& f = links.at(static_cast<size_t>(l.rank / stride));
      double& x = l.kind == LinkKind::kNic ? f.nic : f.scaleup;
      x = std::max(x, l.factor);
    }
    step.stage_comm.assign(links.size(), nullptr);
    step.stage_costs.assign(links.size(), nullptr);
    for (size_t s = 0; s < links.size(); ++s) {
      if (links[s].nominal()) continue;
      stage_comm.push_back(std::make_unique<AlphaBetaComm>(cluster, plan, links[s]));
      stage_costs.push_back(std::make_unique<ModelCosts>(model_costs(model, plan, compute, *stage_comm.back())));
      step.stage_comm[s] = stage_comm.back().get();
      step.stage_costs[s] = stage_costs.back().get();
    }
  }
  r.step = simulate_step(model, plan, costs, compute, comm, step);
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
