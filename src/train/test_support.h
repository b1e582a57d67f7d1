// Shared fixtures of the train/ unit tests.
#pragma once

#include <string>
#include <vector>

#include "hw/hw_catalog.h"
#include "model/model_spec.h"
#include "train/comm_model.h"
#include "train/layer_costs.h"
#include "train/plan.h"

namespace orrery::train::testing {

// An A100-like GPU (datasheet figures of catalog/gpus.yaml a100-sxm-80gb, 80 GiB), without fp8.
inline hw::GpuSpec test_gpu() {
  hw::GpuSpec g;
  g.name = "test-gpu";
  g.architecture = "ampere";
  g.memory = Bytes::GiB(80);
  g.memory_bandwidth = Bandwidth(2e12);
  g.peak_flops[static_cast<size_t>(hw::DType::kBf16)] = FlopRate(312e12);
  g.peak_flops[static_cast<size_t>(hw::DType::kFp16)] = FlopRate(312e12);
  g.scaleup = hw::ScaleupLink{"NVLink 3", 12, Bandwidth(300e9)};
  g.pcie = hw::PcieLink{4, 16, Bandwidth(32e9)};
  return g;
}

// `m`'s layers as a Mixtral-like MoE: 8 experts of `expert_ffn`, top-2.
inline model::ModelSpec as_moe(model::ModelSpec m, int64_t expert_ffn) {
  m.family = model::Family::kMixtral;
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn = expert_ffn;
  m.validate();
  return m;
}
// A small Mixtral-style MoE: `layers` layers of h 1024, 8 heads, 8 experts of ffn 4096, top-2, vocab 32000.
inline model::ModelSpec small_moe(int64_t layers, int64_t seq) {
  return as_moe(model::ModelSpec::llama({layers, 1024, 8, 8, 4096, 32000, seq}), 4096);
}

// Synthetic costs: every layer's forward tf (and full recompute), input-gradient tb, weight-gradient tw,
// `params` parameters (0: the optimizer costs one kernel launch); no embedding or head work.
inline ModelCosts synthetic(int64_t layers, Time tf, Time tb, Time tw, int64_t params = 0) {
  ModelCosts c;
  c.layer.resize(static_cast<size_t>(layers));
  for (LayerCost& l : c.layer) {
    l.fwd = tf;
    l.bwd_input = tb;
    l.bwd_weight = tw;
    l.recompute_full = tf;
    l.params = params;
  }
  return c;
}

// Whether validate_plan's errors include the constraint `key`.
inline bool has_key(const std::vector<ConstraintError>& e, const std::string& key) {
  for (const auto& x : e) {
    if (x.key == key) return true;
  }
  return false;
}

// Communication that takes no time (closed forms that leave it out).
class NoComm final : public CommModel {
 public:
  Time collective(coll::Op, Bytes, Group) const override { return Time::zero(); }
  Time p2p(Bytes) const override { return Time::zero(); }
};

}  // namespace orrery::train::testing
