// Execution-time models: how long one iteration (one forward pass over a batch) takes on a replica.
//
// Model card
//   What      The time of one engine iteration over a batch mixing prefill chunks and decode steps.
//             Every model sees the batch as BatchShape: per sequence (q new tokens, kv context after
//             the step), and their sums. Chosen by name from exec_model_registry().
//   roofline  (default) t = sum over layers of [ linear ops at T = sum q tokens (GEMMs with TP-sharded
//             weights: QKV and up/gate column-parallel (n / TP), out and down row-parallel (k / TP);
//             norms, RoPE, activation, residual adds by bytes moved) + varlen attention over the
//             batch's (q, kv) with heads / TP ] + 2 all-reduces per layer of T x hidden x dtype bytes
//             when TP > 1 + (PP - 1) stage-to-stage sends of T x hidden x dtype bytes + embedding and
//             final norm on T tokens + LM head on the rows that emit a token + CPU overhead.
//             Kernel times come from compute::ComputeModel (its calibration, docs/compute.md).
//             Collectives: coll::predict_nccl (calibrated NCCL ring, vidur A100 calibration) over one
//             NVSwitch machine of TP GPUs, tabulated at powers of two and interpolated linearly.
//             PP: the time of one batch through all stages in turn; batches of different virtual
//             engines overlap across stages in the replica (serve/replica_driver.h Pipeline).
//   vidur-profile  the linear ops of a layer from a measured per-layer table (vidur's mlp.csv: sum
//             of the medians of the layer's ops at T tokens for the replica's TP degree, linearly
//             interpolated in T, extrapolated linearly from the last two points); the token
//             embedding from its `emb` column once per forward; attention, LM head, collectives and
//             CPU overhead as in roofline (vidur's attention tables are not available).
//   linear    t = d0 + d1 x (sum over the batch of its KV tokens), the WAIT paper's model (Ao et
//             al., arXiv 2504.11320). Defaults for Llama-2-7B on A100-80GB: see kWaitD0, kWaitD1.
//   piecewise t = a + b T + c K (T batch tokens, K batch KV tokens), one least-squares fit for small
//             batches (T <= split) and one for large ones, fitted on a grid of mixed batches to
//             another model (the roofline by default, or a profile).
//   CPU overhead  kCpuOverheadBase + kCpuOverheadPerSeq x sequences per iteration: the scheduler,
//             input preparation and sampling of a Python engine. Order of magnitude from vLLM's
//             profiling (vLLM blog, "vLLM v0.6.0: 2.7x throughput improvement", 2024-09-05:
//             scheduling took 29% of the time of Llama-3-8B on one H100 in v0.5.3); not calibrated.
//             MoE: the routed experts' grouped GEMMs run over the experts the batch reaches, on
//             average E (1 - (1 - k/E)^T) of E for T tokens each routed to k (uniform routing), with
//             the batch's T k rows split evenly over them (a decode step of one sequence reads k
//             experts' weights, a long prefill all E); --expert-weights stores their matrices
//             narrower (fp8, MXFP4's 4.25 bits) and widens them in the kernel (weight bytes only).
//   Range     dense and MoE decoder-only models on catalog GPUs; MoE experts are TP-sharded like a
//             dense MLP (no expert parallelism); batches up to a few thousand tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compute/compute_model.h"
#include "core/units.h"
#include "serve/replica.h"

namespace orrery::serve {

inline constexpr Time kCpuOverheadBase = Time::us(1000);
inline constexpr Time kCpuOverheadPerSeq = Time::us(10);
// Linear-model defaults for Llama-2-7B on A100-80GB (fp16, TP 1): fit_linear() of this project's
// roofline on the WAIT paper's one-type workload (prompt 512, output 20, batches up to 4096 prefill
// tokens), with the compute model as of this writing (docs/serving.md gives the command).
inline constexpr double kWaitD0Ms = 5.82;     // ms per iteration
inline constexpr double kWaitD1Ms = 3.41e-3;  // ms per batch KV token

// The batch as the time models see it.
struct BatchShape {
  std::vector<compute::AttentionSeq> seqs;  // q new tokens, kv = context after the step
  int64_t tokens = 0;      // sum of q
  int64_t kv_tokens = 0;   // sum of kv
  int64_t emitting = 0;    // sequences that emit a token (LM head rows)
  int64_t prefill_seqs = 0;
  int64_t decode_seqs = 0;

  void clear();
  void add(int64_t q, int64_t kv, bool emits, bool prefill);
};

class ExecModel {
 public:
  virtual ~ExecModel() = default;
  // The iteration's time, CPU overhead included. REQUIRES: batch.tokens >= 1.
  virtual Time iteration_time(const BatchShape& batch) const = 0;
  virtual std::string_view name() const = 0;
};

// Inputs every model may use.
struct ExecContext {
  const ReplicaSpec* replica = nullptr;  // model, GPU, TP, PP, dtype
  Time cpu_base = kCpuOverheadBase;
  Time cpu_per_seq = kCpuOverheadPerSeq;
  // vidur-profile: the mlp.csv stream and its name (for errors).
  std::istream* profile = nullptr;
  std::string profile_name;
  // linear: d0, d1.
  Time d0 = Time::seconds(kWaitD0Ms * 1e-3);
  double d1_s = kWaitD1Ms * 1e-3;  // seconds per KV token
  // piecewise: the model to fit ("roofline" or "vidur-profile") and the small/large split (tokens).
  std::string piecewise_base = "roofline";
  int64_t piecewise_split = 128;
};

struct ExecModelInfo {
  std::string name;
  std::string description;
  std::string citation;
};
std::vector<ExecModelInfo> exec_model_registry();
// Builds the model named `name`; InputError at `where` with the nearest name when unknown, or when a
// model's inputs are missing (vidur-profile without a profile).
std::unique_ptr<ExecModel> make_exec_model(std::string_view name, const ExecContext& ctx, const Where& where = {});

// ---- building blocks, exposed for tests ----

// TP all-reduce times (predict_nccl) by message size, tabulated and interpolated.
class CollectiveTable {
 public:
  // ranks GPUs of `gpu` on one NVSwitch (PCIe when the GPU has no scale-up link). ranks == 1: zero.
  CollectiveTable(const hw::GpuSpec& gpu, int64_t ranks, bool send_recv);
  Time time(Bytes size) const;

 private:
  std::vector<double> sizes_;  // bytes, ascending
  std::vector<double> times_;  // seconds
};

// Per-layer times of the replica's model: linear ops by token count (cached), attention by batch.
class LayerCosts {
 public:
  explicit LayerCosts(const ReplicaSpec& spec);
  // Linear ops (everything but the attention core) of all layers of the model at T tokens.
  Time linear_all_layers(int64_t tokens) const;
  // Attention cores of all layers for the batch.
  Time attention_all_layers(std::span<const compute::AttentionSeq> seqs) const;
  // Embedding lookup and final norm at T tokens; LM head on `rows` rows.
  Time pre_post(int64_t tokens, int64_t rows) const;
  // TP all-reduces (2 per layer) and PP sends at T tokens.
  Time communication(int64_t tokens) const;
  const compute::ComputeModel& compute() const { return compute_; }

 private:
  Time linear_uncached(int64_t tokens) const;

  const ReplicaSpec* spec_;
  compute::ComputeModel compute_;
  compute::AttentionHeads heads_;
  int64_t full_layers_ = 0;     // layers with full attention
  int64_t window_layers_ = 0;   // layers with a sliding window
  CollectiveTable all_reduce_;
  CollectiveTable send_recv_;
  mutable std::vector<Time> linear_cache_;  // by token count; Time::max() = not computed
  mutable std::vector<Time> head_cache_;    // LM head by rows
};

// A measured per-layer table (vidur mlp.csv): times of the layer's linear ops by token count.
struct ProfileTable {
  std::vector<int64_t> tokens;   // ascending, distinct
  std::vector<double> layer_ms;  // sum of the layer's op medians (embedding excluded)
  std::vector<double> emb_ms;    // the embedding's median
  // Linear interpolation in tokens (linear extrapolation beyond the ends).
  double layer_at(double t) const;
  double emb_at(double t) const;
};
// Reads a vidur mlp.csv stream, keeping rows with num_tensor_parallel_workers == tp. InputError
// naming file:line and column on malformed input or when no row has that TP degree.
ProfileTable read_vidur_profile(std::istream& in, const std::string& file, int64_t tp);

// Least-squares fit t ~ d0 + d1 x (batch KV tokens) of `model` on the batches a WAIT-style schedule
// forms for prompts of `prompt` tokens and `output` output tokens: n prefills plus n decodes at every
// stage 1..output-1 (contexts prompt + s), for n = 1, 2, ... while the prefill tokens n x prompt stay
// within max_batch_tokens (at least n = 1, 2). The linear model's parameters for the fluid calculator
// and WAIT's thresholds; prefill compute enters through d1, as in the paper's fit.
struct LinearFit {
  double d0_s = 0.0;
  double d1_s = 0.0;  // seconds per KV token
};
LinearFit fit_linear(const ExecModel& model, double prompt, double output, int64_t max_batch_tokens);

}  // namespace orrery::serve
