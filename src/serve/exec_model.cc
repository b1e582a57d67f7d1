#include "serve/exec_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "coll/nccl_model.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/strings.h"
#include "model/op_inventory.h"
#include "net/topology_builders.h"

namespace orrery::serve {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Megatron-style TP sharding of an inventory GEMM by its name.
bool column_parallel(std::string_view name) {
  return name == "attn.qkv" || name == "attn.q" || name == "attn.q_b" || name == "attn.kv_b" || ends_with(name, ".up_gate") ||
         ends_with(name, ".up");
}
bool row_parallel(std::string_view name) { return name == "attn.out" || ends_with(name, ".down"); }
// Elementwise ops that run on a TP shard (per-head or per-intermediate-column tensors).
bool sharded_elementwise(std::string_view name) {
  return name == "attn.rope" || name == "attn.qk_norm" || ends_with(name, ".act");
}

Time cpu_overhead(const ExecContext& ctx, const BatchShape& b) {
  return ctx.cpu_base + ctx.cpu_per_seq * static_cast<int64_t>(b.seqs.size());
}

}  // namespace

void BatchShape::clear() {
  seqs.clear();
  tokens = kv_tokens = emitting = prefill_seqs = decode_seqs = 0;
}

void BatchShape::add(int64_t q, int64_t kv, bool emits, bool prefill) {
  seqs.push_back(compute::AttentionSeq{q, kv});
  tokens += q;
  kv_tokens += kv;
  emitting += emits ? 1 : 0;
  (prefill ? prefill_seqs : decode_seqs) += 1;
}

// ---- collectives ----

CollectiveTable::CollectiveTable(const hw::GpuSpec& gpu, int64_t ranks, bool send_recv) {
  if (ranks <= 1) return;
  net::FatTreeSpec s;
  s.machines = 1;
  s.gpus_per_machine = static_cast<int32_t>(ranks);
  s.pcie_bandwidth = gpu.pcie.bandwidth_per_direction;
  s.nic_bandwidth = gpu.pcie.bandwidth_per_direction;
  if (gpu.scaleup) {
    s.intra_node = hw::IntraNode::kNvswitch;
    s.scaleup_bandwidth = gpu.scaleup->bandwidth_per_direction;
  } else {
    s.intra_node = hw::IntraNode::kPcie;
  }
  const net::Topology topo = net::fat_tree(s);
  const coll::NcclCalibration cal = coll::vidur_a100_calibration();
  // 1 KiB .. 1 GiB in powers of two: 21 flow-model runs.
  for (int e = 10; e <= 30; ++e) {
    const Bytes size(int64_t{1} << e);
    const Time t = coll::predict_nccl(topo, send_recv ? coll::Op::kSendRecv : coll::Op::kAllReduce, size, cal).time;
    sizes_.push_back(size.to_double());
    times_.push_back(t.to_seconds());
  }
}

Time CollectiveTable::time(Bytes size) const {
  if (sizes_.empty() || size.count() <= 0) return Time::zero();
  const double x = size.to_double();
  if (x <= sizes_.front()) return Time::seconds(times_.front());
  auto it = std::upper_bound(sizes_.begin(), sizes_.end(), x);
  size_t i = it == sizes_.end() ? sizes_.size() - 1 : static_cast<size_t>(it - sizes_.begin());
  const double x0 = sizes_[i - 1], x1 = sizes_[i];
  const double y0 = times_[i - 1], y1 = times_[i];
  return Time::seconds(y0 + (y1 - y0) * (x - x0) / (x1 - x0));
}

// ---- per-layer costs ----

LayerCosts::LayerCosts(const ReplicaSpec& spec)
    : spec_(&spec),
      compute_(*spec.gpu, spec.calibration != nullptr ? *spec.calibration : compute::default_calibration(*spec.gpu)),
      all_reduce_(*spec.gpu, spec.tp, false),
      send_recv_(*spec.gpu, spec.pp > 1 ? 2 : 1, true) {
  const model::ModelSpec& m = *spec.model;
  const bool mla = m.attention == model::AttentionKind::kMla;
  heads_.heads = m.heads / spec.tp;
  heads_.kv_heads = mla ? heads_.heads : ceil_div(m.kv_heads, spec.tp);
  heads_.head_dim_qk = mla ? m.mla.qk_head_dim() : m.head_dim;
  heads_.head_dim_v = mla ? m.mla.v_head_dim : m.head_dim;
  heads_.causal = true;
  window_layers_ = m.num_sliding_layers();
  full_layers_ = m.layers - window_layers_;
}

Time LayerCosts::linear_uncached(int64_t tokens) const {
  const model::ModelSpec& m = *spec_->model;
  model::InventoryOptions o;
  o.dtype_bytes = hw::dtype_bytes(spec_->dtype);
  o.flash_attention = true;
  o.include_loss = false;
  const model::Shape shape{1, tokens, 0};
  const model::Inventory inv = model::build_inventory(m, shape, o);
  const int64_t tp = spec_->tp;
  auto op_time = [&](const model::Op& op) {
    if (op.kind == model::OpKind::kAttention) return Time::zero();
    if ((op.kind == model::OpKind::kGemm || op.kind == model::OpKind::kRouter) && op.gemm.count > 0) {
      compute::GemmShape g{op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.count};
      if (op.name.starts_with("moe.experts.")) {
        // A grouped GEMM skips the experts no token chose: of E experts, T tokens choosing k distinct
        // ones each (uniform routing) reach E (1 - (1 - k/E)^T) on average, and the batch's rows split
        // over those. A decode step of a few sequences reads a few experts' weights, not all E.
        const double experts = static_cast<double>(op.gemm.count);
        const double hit = experts * (1.0 - std::pow(1.0 - static_cast<double>(m.moe.top_k) / experts,
                                                     static_cast<double>(tokens)));
        g.count = std::clamp<int64_t>(std::llround(hit), 1, op.gemm.count);
        g.m = op.gemm.m * experts / static_cast<double>(g.count);
        // Routed experts stored narrow (--expert-weights) are read at that width and widened in the kernel.
        if (spec_->expert_weights != ExpertWeights::kSame) {
          g.weight_bytes = expert_weight_bytes(spec_->expert_weights, spec_->dtype);
        }
      }
      if (column_parallel(op.name)) g.n = ceil_div(g.n, tp);
      if (row_parallel(op.name)) g.k = ceil_div(g.k, tp);
      return compute_.gemm(g, spec_->dtype);
    }
    if (!sharded_elementwise(op.name) || tp == 1) return compute_.op(op, shape, m, spec_->dtype, compute::Pass::kForward);
    model::Op s = op;
    const double f = 1.0 / static_cast<double>(tp);
    s.fwd_flops = op.fwd_flops * f;
    s.fwd_bytes_read = Bytes::from_double(op.fwd_bytes_read.to_double() * f);
    s.fwd_bytes_written = Bytes::from_double(op.fwd_bytes_written.to_double() * f);
    return compute_.op(s, shape, m, spec_->dtype, compute::Pass::kForward);
  };
  Time t;
  for (const model::LayerGroup& g : inv.groups) {
    Time layer;
    for (const model::Op& op : g.ops) layer += op_time(op);
    t += layer * static_cast<int64_t>(g.layer_indices.size());
  }
  // Input side (embedding lookups, OPT project_in) and the final norm / OPT project_out; the LM head
  // runs on the emitting rows only (pre_post).
  for (const model::Op& op : inv.pre_ops) t += op_time(op);
  for (const model::Op& op : inv.post_ops) {
    if (op.name != "lm_head") t += op_time(op);
  }
  return t;
}

Time LayerCosts::linear_all_layers(int64_t tokens) const {
  ORRERY_ASSERT(tokens >= 1);
  const size_t i = static_cast<size_t>(tokens);
  if (i >= linear_cache_.size()) linear_cache_.resize(std::max(i + 1, linear_cache_.size() * 2), Time::max());
  if (linear_cache_[i] == Time::max()) linear_cache_[i] = linear_uncached(tokens);
  return linear_cache_[i];
}

Time LayerCosts::attention_all_layers(std::span<const compute::AttentionSeq> seqs) const {
  if (seqs.empty()) return Time::zero();
  Time t;
  if (full_layers_ > 0) {
    t += compute_.attention(seqs, heads_, spec_->dtype, compute::Pass::kForward) * full_layers_;
  }
  if (window_layers_ > 0) {
    compute::AttentionHeads w = heads_;
    w.window = spec_->model->sliding_window;
    t += compute_.attention(seqs, w, spec_->dtype, compute::Pass::kForward) * window_layers_;
  }
  return t;
}

Time LayerCosts::pre_post(int64_t tokens, int64_t rows) const {
  (void)tokens;
  if (rows <= 0) return Time::zero();
  const size_t i = static_cast<size_t>(rows);
  if (i >= head_cache_.size()) head_cache_.resize(std::max(i + 1, head_cache_.size() * 2), Time::max());
  if (head_cache_[i] == Time::max()) {
    const model::ModelSpec& m = *spec_->model;
    const compute::GemmShape g{static_cast<double>(rows), ceil_div(m.vocab, spec_->tp), m.embed_dim(), 1};
    head_cache_[i] = compute_.gemm(g, spec_->dtype);
  }
  return head_cache_[i];
}

Time LayerCosts::communication(int64_t tokens) const {
  const model::ModelSpec& m = *spec_->model;
  const Bytes msg(tokens * m.hidden * hw::dtype_bytes(spec_->dtype));
  Time t;
  if (spec_->tp > 1) t += all_reduce_.time(msg) * (2 * m.layers);
  if (spec_->pp > 1) t += send_recv_.time(msg) * (spec_->pp - 1);
  return t;
}

// ---- profile tables ----

namespace {

// Piecewise linear through the profiled points. Outside them: below the first point, in proportion to the
// tokens (the first point scaled); above the last, along the last segment when it rises, else in proportion
// (a last segment that falls, measurement noise, extrapolated far would reach negative times: a profile
// of the first 40 rows, extrapolated to a 4,096-token prefill, scheduled events in the past).
double interpolate(const std::vector<int64_t>& xs, const std::vector<double>& ys, double x) {
  ORRERY_CHECK(!xs.empty());
  if (xs.size() == 1 || x <= static_cast<double>(xs.front())) return ys.front() * x / static_cast<double>(xs.front());
  if (x >= static_cast<double>(xs.back())) {
    const size_t n = xs.size();
    const double slope = (ys[n - 1] - ys[n - 2]) / static_cast<double>(xs[n - 1] - xs[n - 2]);
    if (!(slope > 0.0)) return ys.back() * x / static_cast<double>(xs.back());
  }
  size_t i = static_cast<size_t>(std::upper_bound(xs.begin(), xs.end(), x,
                                                  [](double v, int64_t e) { return v < static_cast<double>(e); }) -
                                 xs.begin());
  i = std::clamp<size_t>(i, 1, xs.size() - 1);
  const double x0 = static_cast<double>(xs[i - 1]), x1 = static_cast<double>(xs[i]);
  return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0);
}

double parse_number(std::string_view text, const Where& where, std::string_view what) {
  std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0.0) {
    throw InputError(where, "expected a non-negative number for " + std::string(what) + ", got '" + s + "'");
  }
  return v;
}

}  // namespace

double ProfileTable::layer_at(double t) const { return interpolate(tokens, layer_ms, t); }
double ProfileTable::emb_at(double t) const { return interpolate(tokens, emb_ms, t); }

ProfileTable read_vidur_profile(std::istream& in, const std::string& file, int64_t tp) {
  // The per-layer ops of vidur's mlp.csv (profiles/README.md); absent ones (phi-2 has no
  // post_attention_layernorm) are skipped.
  static constexpr std::array<std::string_view, 9> kLayerOps = {
      "input_layernorm", "attn_pre_proj", "attn_rope",   "attn_post_proj", "post_attention_layernorm",
      "mlp_up_proj",     "mlp_act",       "mlp_down_proj", "add"};
  std::string line;
  int64_t line_no = 0;
  if (!std::getline(in, line)) throw InputError(Where{file, 0, ""}, "empty profile file", "expected vidur's mlp.csv");
  ++line_no;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string_view> header = split_csv(line);
  std::vector<std::string> names(header.begin(), header.end());
  auto column = [&](const std::string& name) -> int {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  auto require = [&](const std::string& name) {
    const int c = column(name);
    if (c < 0) {
      throw InputError(Where{file, 1, name}, "missing column in the profile header", suggest(name, names));
    }
    return c;
  };
  const int c_tokens = require("num_tokens");
  const int c_tp = require("num_tensor_parallel_workers");
  const int c_emb = require("time_stats.emb.median");
  std::vector<int> c_ops;
  for (std::string_view op : kLayerOps) {
    const int c = column("time_stats." + std::string(op) + ".median");
    if (c >= 0) c_ops.push_back(c);
  }
  if (c_ops.empty()) require("time_stats.attn_pre_proj.median");

  ProfileTable t;
  struct Row {
    int64_t tokens;
    double layer_ms, emb_ms;
  };
  std::vector<Row> rows;
  std::vector<int> tps;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    const std::vector<std::string_view> f = split_csv(line);
    const Where w{file, line_no, ""};
    if (f.size() != header.size()) {
      throw InputError(w, "expected " + std::to_string(header.size()) + " fields, got " + std::to_string(f.size()));
    }
    const double row_tp = parse_number(f[static_cast<size_t>(c_tp)], w.with_key(names[static_cast<size_t>(c_tp)]), "the TP degree");
    if (std::find(tps.begin(), tps.end(), static_cast<int>(row_tp)) == tps.end()) tps.push_back(static_cast<int>(row_tp));
    if (static_cast<int64_t>(row_tp) != tp) continue;
    const double tokens = parse_number(f[static_cast<size_t>(c_tokens)], w.with_key("num_tokens"), "the token count");
    if (tokens < 1.0) throw InputError(w.with_key("num_tokens"), "must be >= 1");
    double layer = 0.0;
    for (int c : c_ops) layer += parse_number(f[static_cast<size_t>(c)], w.with_key(names[static_cast<size_t>(c)]), "a time (ms)");
    const double emb = parse_number(f[static_cast<size_t>(c_emb)], w.with_key("time_stats.emb.median"), "a time (ms)");
    rows.push_back({static_cast<int64_t>(tokens), layer, emb});
  }
  // vidur writes the token counts in any order (its profiler emits 4096 down to 1, with the boundary
  // counts 4096 and 2048 twice): sort them, keeping the first row of a repeated count.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.tokens < b.tokens; });
  for (const Row& r : rows) {
    if (!t.tokens.empty() && r.tokens == t.tokens.back()) continue;
    t.tokens.push_back(r.tokens);
    t.layer_ms.push_back(r.layer_ms);
    t.emb_ms.push_back(r.emb_ms);
  }
  if (t.tokens.empty()) {
    std::string have;
    for (int x : tps) have += (have.empty() ? "" : ", ") + std::to_string(x);
    throw InputError(Where{file, 0, "num_tensor_parallel_workers"},
                     "no row for TP " + std::to_string(tp), have.empty() ? "" : "the file has TP " + have);
  }
  return t;
}

// ---- the models ----

namespace {

class RooflineExec final : public ExecModel {
 public:
  explicit RooflineExec(const ExecContext& ctx) : ctx_(ctx), costs_(*ctx.replica) {}
  Time iteration_time(const BatchShape& b) const override {
    return costs_.linear_all_layers(b.tokens) + costs_.attention_all_layers(b.seqs) + costs_.pre_post(b.tokens, b.emitting) +
           costs_.communication(b.tokens) + cpu_overhead(ctx_, b);
  }
  std::string_view name() const override { return "roofline"; }

 private:
  ExecContext ctx_;
  LayerCosts costs_;
};

class ProfileExec final : public ExecModel {
 public:
  ProfileExec(const ExecContext& ctx, ProfileTable table) : ctx_(ctx), costs_(*ctx.replica), table_(std::move(table)) {
    ctx_.profile = nullptr;  // read into table_; the stream may not outlive this constructor's caller
    const model::ModelSpec& m = *ctx.replica->model;
    layers_ = m.layers;
  }
  Time iteration_time(const BatchShape& b) const override {
    const double t = static_cast<double>(b.tokens);
    const Time linear = Time::seconds((static_cast<double>(layers_) * table_.layer_at(t) + table_.emb_at(t)) * 1e-3);
    return linear + costs_.attention_all_layers(b.seqs) + costs_.pre_post(b.tokens, b.emitting) +
           costs_.communication(b.tokens) + cpu_overhead(ctx_, b);
  }
  std::string_view name() const override { return "vidur-profile"; }

 private:
  ExecContext ctx_;
  LayerCosts costs_;
  ProfileTable table_;
  int64_t layers_ = 0;
};

class LinearExec final : public ExecModel {
 public:
  explicit LinearExec(const ExecContext& ctx) : d0_(ctx.d0), d1_(ctx.d1_s) {}
  Time iteration_time(const BatchShape& b) const override {
    return d0_ + Time::seconds(d1_ * static_cast<double>(b.kv_tokens));
  }
  std::string_view name() const override { return "linear"; }

 private:
  Time d0_;
  double d1_;
};

// Solves the 3x3 normal equations of y ~ a + b x1 + c x2.
std::array<double, 3> least_squares3(const std::vector<std::array<double, 3>>& rows) {
  double m[3][4] = {};
  for (const auto& r : rows) {
    const double v[3] = {1.0, r[0], r[1]};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) m[i][j] += v[i] * v[j];
      m[i][3] += v[i] * r[2];
    }
  }
  for (int c = 0; c < 3; ++c) {
    int p = c;
    for (int r = c + 1; r < 3; ++r) {
      if (std::abs(m[r][c]) > std::abs(m[p][c])) p = r;
    }
    for (int k = 0; k < 4; ++k) std::swap(m[c][k], m[p][k]);
    ORRERY_CHECK(m[c][c] != 0.0);
    for (int r = 0; r < 3; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (int k = c; k < 4; ++k) m[r][k] -= f * m[c][k];
    }
  }
  return {m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]};
}

class PiecewiseExec final : public ExecModel {
 public:
  PiecewiseExec(const ExecModel& base, int64_t split) : split_(split) {
    std::vector<std::array<double, 3>> small, large;
    BatchShape b;
    auto sample = [&] {
      const std::array<double, 3> row{static_cast<double>(b.tokens), static_cast<double>(b.kv_tokens),
                                      base.iteration_time(b).to_seconds()};
      (b.tokens <= split_ ? small : large).push_back(row);
    };
    // Decode batches (T = b sequences) over contexts, prefills of one prompt, and mixes of both.
    for (int64_t seqs : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      for (int64_t ctx : {64, 256, 512, 1024, 2048}) {
        b.clear();
        for (int64_t i = 0; i < seqs; ++i) b.add(1, ctx, true, false);
        sample();
        for (int64_t prompt : {64, 256, 512, 1024}) {
          b.add(prompt, prompt, true, true);
          sample();
        }
      }
    }
    for (int64_t prompt : {8, 16, 32, 64, 96, 128, 256, 512, 1024, 2048, 4096}) {
      b.clear();
      b.add(prompt, prompt, true, true);
      sample();
    }
    small_ = least_squares3(small);
    large_ = least_squares3(large);
  }
  Time iteration_time(const BatchShape& b) const override {
    const auto& c = b.tokens <= split_ ? small_ : large_;
    const double t = c[0] + c[1] * static_cast<double>(b.tokens) + c[2] * static_cast<double>(b.kv_tokens);
    return Time::seconds(std::max(t, 0.0));
  }
  std::string_view name() const override { return "piecewise"; }
  const std::array<double, 3>& small() const { return small_; }

 private:
  int64_t split_;
  std::array<double, 3> small_{};
  std::array<double, 3> large_{};
};

std::unique_ptr<ExecModel> make_profile(const ExecContext& ctx, const Where& where) {
  if (ctx.profile == nullptr) {
    throw InputError(where, "the vidur-profile model needs a profile table", "pass --profile PATH/TO/mlp.csv");
  }
  return std::make_unique<ProfileExec>(ctx, read_vidur_profile(*ctx.profile, ctx.profile_name, ctx.replica->tp));
}

}  // namespace

std::vector<ExecModelInfo> exec_model_registry() {
  return {
      {"roofline", "per-op roofline of the TP-sharded layer ops, varlen attention and NCCL all-reduces (default)",
       "compute::ComputeModel (docs/compute.md); NCCL model docs/collectives.md"},
      {"vidur-profile", "measured per-layer linear-op tables (vidur mlp.csv, --profile), attention from the roofline",
       "Agrawal et al., Vidur, MLSys 2024"},
      {"linear", "tau = d0 + d1 x (batch KV tokens) (--d0-ms, --d1-ms)",
       "Ao et al., arXiv 2504.11320 (WAIT / Nested WAIT)"},
      {"piecewise", "small- and large-batch linear fits a + b T + c K to the roofline or a profile",
       "least squares on a grid of batches (docs/serving.md)"},
  };
}

std::unique_ptr<ExecModel> make_exec_model(std::string_view name, const ExecContext& ctx, const Where& where) {
  ORRERY_CHECK(ctx.replica != nullptr);
  if (name == "roofline") return std::make_unique<RooflineExec>(ctx);
  if (name == "vidur-profile") return make_profile(ctx, where);
  if (name == "linear") {
    if (ctx.d0 < Time::zero() || !(ctx.d1_s >= 0.0)) throw InputError(where, "linear model needs d0 >= 0 and d1 >= 0");
    return std::make_unique<LinearExec>(ctx);
  }
  if (name == "piecewise") {
    if (ctx.piecewise_base == "piecewise" || ctx.piecewise_base == "linear") {
      throw InputError(where, "piecewise fits roofline or vidur-profile, not " + ctx.piecewise_base);
    }
    const std::unique_ptr<ExecModel> base = make_exec_model(ctx.piecewise_base, ctx, where);
    return std::make_unique<PiecewiseExec>(*base, ctx.piecewise_split);
  }
  std::vector<std::string> names;
  for (const auto& i : exec_model_registry()) names.push_back(i.name);
  throw InputError(where, "unknown execution-time model '" + std::string(name) + "'", suggest(name, names));
}

LinearFit fit_linear(const ExecModel& model, double prompt, double output, int64_t max_batch_tokens) {
  std::vector<std::array<double, 3>> rows;
  BatchShape b;
  const auto p = std::max<int64_t>(1, static_cast<int64_t>(std::llround(prompt)));
  const auto d = std::max<int64_t>(1, static_cast<int64_t>(std::llround(output)));
  const int64_t max_n = std::max<int64_t>(2, max_batch_tokens / p);
  for (int64_t n = 1; n <= max_n; ++n) {
    b.clear();
    for (int64_t i = 0; i < n; ++i) {
      b.add(p, p, true, true);
      for (int64_t s = 1; s < d; ++s) b.add(1, p + s, true, false);
    }
    rows.push_back({static_cast<double>(b.kv_tokens), 0.0, model.iteration_time(b).to_seconds()});
  }
  // Simple linear regression on (kv, t).
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(rows.size());
  for (const auto& r : rows) {
    sx += r[0];
    sy += r[2];
    sxx += r[0] * r[0];
    sxy += r[0] * r[2];
  }
  LinearFit f;
  const double den = n * sxx - sx * sx;
  f.d1_s = den > 0.0 ? (n * sxy - sx * sy) / den : 0.0;
  f.d0_s = (sy - f.d1_s * sx) / n;
  return f;
}

}  // namespace orrery::serve
