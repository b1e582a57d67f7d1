// Specs built by hand for the serve tests (independent of the shipped catalog).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <optional>
#include <vector>

#include "hw/hw_catalog.h"
#include "model/model_spec.h"
#include "serve/replica.h"
#include "serve/workload.h"

namespace orrery::serve::testing {

// Llama-2-7B (meta-llama/Llama-2-7b-hf config.json): 32 layers, hidden 4096, 32 heads (MHA), ffn 11008,
// vocab 32000, context 4096.
inline model::ModelSpec llama2_7b() {
  model::ModelSpec s = model::ModelSpec::llama(model::GenericArch{32, 4096, 32, 32, 11008, 32000, 4096}, "llama2-7b");
  s.validate();
  return s;
}

// A100 SXM4 80GB (NVIDIA datasheet): 81920 MiB, 2039 GB/s, 312 TFLOP/s fp16 dense, NVLink 300 GB/s and
// PCIe Gen4 32 GB/s per direction.
inline hw::GpuSpec a100_80gb() {
  hw::GpuSpec g;
  g.name = "a100-sxm-80gb";
  g.architecture = "ampere";
  g.vendor = "nvidia";
  g.memory = Bytes::MiB(81920);
  g.memory_bandwidth = Bandwidth(2039e9);
  g.peak_flops[static_cast<size_t>(hw::DType::kFp16)] = FlopRate(312e12);
  g.peak_flops[static_cast<size_t>(hw::DType::kBf16)] = FlopRate(312e12);
  g.scaleup = hw::ScaleupLink{"NVLink 3", 12, Bandwidth(300e9)};
  g.pcie = hw::PcieLink{4, 16, Bandwidth(32e9)};
  return g;
}

// A fixed list of requests as a source.
class ListSource final : public RequestSource {
 public:
  explicit ListSource(std::vector<Request> r) : r_(std::move(r)) {}
  std::optional<Request> next() override {
    if (i_ >= r_.size()) return std::nullopt;
    return r_[i_++];
  }

 private:
  std::vector<Request> r_;
  size_t i_ = 0;
};

inline Request request(int64_t id, double arrival_s, int64_t prompt, int64_t output, int32_t type = 0) {
  Request r;
  r.id = id;
  r.arrival = Time::seconds(arrival_s);
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.type = type;
  return r;
}

}  // namespace orrery::serve::testing

#include "serve/exec_model.h"
#include "serve/scheduler.h"
#include "serve/simulator.h"

namespace orrery::serve::testing {

// Records each completed or rejected request (by id) in order.
class Log final : public SimObserver {
 public:
  struct Entry {
    int64_t id;
    RequestStatus status;
    Time arrival, first_token, finish;
  };
  void on_request(const RequestRecord& r) override {
    entries.push_back({r.request->id, r.status, r.request->arrival, r.first_token, r.finish});
  }
  const Entry& of(int64_t id) const {
    for (const Entry& e : entries) {
      if (e.id == id) return e;
    }
    throw std::runtime_error("no record for request " + std::to_string(id));
  }
  std::vector<Entry> entries;
};

// A replica of llama2_7b on a100_80gb with `kv_tokens` of KV, timed by the linear model d0 + d1 x KV.
struct SimCase {
  model::ModelSpec model = llama2_7b();
  hw::GpuSpec gpu = a100_80gb();
  ReplicaSpec spec;
  ExecContext ctx;
  SchedulerConfig config;
  SimOptions options;

  SimCase(int64_t kv_tokens, Time d0, double d1_s = 0.0) {
    spec.model = &model;
    spec.gpu = &gpu;
    spec.kv_tokens_override = kv_tokens;
    spec.watermark = 0.0;
    ctx.replica = &spec;
    ctx.d0 = d0;
    ctx.d1_s = d1_s;
  }
  SimResult run(const std::string& scheduler, RequestSource& source, SimObserver* obs = nullptr) {
    const std::unique_ptr<Scheduler> s = make_scheduler(scheduler, config);
    const std::unique_ptr<ExecModel> exec = make_exec_model("linear", ctx);
    return simulate(source, spec, plan_memory(spec), *s, *exec, options, obs);
  }
  SimResult run(const std::string& scheduler, std::vector<Request> requests, SimObserver* obs = nullptr) {
    ListSource src(std::move(requests));
    return run(scheduler, src, obs);
  }
};

}  // namespace orrery::serve::testing
