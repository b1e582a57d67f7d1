#include "train/simulator.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "train/schedule.h"
#include "train/task_graph.h"

namespace orrery::train {

std::string_view time_category_name(TimeCategory c) {
  switch (c) {
    case TimeCategory::kCompute: return "compute";
    case TimeCategory::kRecompute: return "recompute";
    case TimeCategory::kTp: return "tp";
    case TimeCategory::kCp: return "cp";
    case TimeCategory::kEp: return "ep";
    case TimeCategory::kPp: return "pp";
    case TimeCategory::kDp: return "dp";
    case TimeCategory::kBubble: return "bubble";
    case TimeCategory::kOffload: return "offload";
    case TimeCategory::kOptimizer: return "optimizer";
    case TimeCategory::kCount: break;
  }
  return "?";
}

Time fsdp2_gather_copy_in(const Plan& p, const compute::ComputeModel& cm, int64_t params, int64_t group) {
  const int64_t shard_bytes = p.master_bytes() > 0 ? p.master_bytes() : 2;
  return cm.memory_bound(Bytes::from_double(static_cast<double>(params) / static_cast<double>(group) *
                                            static_cast<double>(shard_bytes + 2)));
}

Time fsdp2_compute_copies(const Plan& p, const compute::ComputeModel& cm, double elems, bool gather, bool reduce) {
  if (elems <= 0.0) return Time::zero();
  Time t;
  if (gather) t += cm.memory_bound(Bytes::from_double(elems * 4.0));
  if (reduce) t += cm.memory_bound(Bytes::from_double(elems * (2.0 + static_cast<double>(p.grad_bytes))));
  return t;
}

Time optimizer_step_time(const Plan& p, double local, const compute::ComputeModel& cm) {
  const double f = p.host_optimizer_share();
  const Time gpu = cm.memory_bound(Bytes::from_double((1.0 - f) * local * static_cast<double>(p.optimizer_step_bytes())));
  if (f <= 0.0) return gpu;
  const double host = f * local;
  const Time cpu = Bytes::from_double(host * (static_cast<double>(p.grad_bytes) + 2.0)) / cm.gpu().host_copy_bandwidth() +
                   Time::seconds(host / p.cpu_adam_params_per_s);
  return std::max(gpu, cpu);
}

namespace {

double d(int64_t v) { return static_cast<double>(v); }
constexpr auto cat(TimeCategory c) { return static_cast<uint16_t>(c); }

// The parts of a compute task's duration, by category.
struct Parts {
  Time compute, recompute, tp, cp, ep;
  Time dp;  // FSDP2's copies on the compute stream (Plan::fsdp_impl)
  Time total() const { return compute + recompute + tp + cp + ep + dp; }
};

struct StageStreams {
  StreamId compute, pp_fwd, pp_bwd, dp, dp_gather, d2h, h2d;
};

class Builder {
 public:
  Builder(const model::ModelSpec& m, const Plan& p, const ModelCosts& c, const compute::ComputeModel& cm,
          const CommModel& comm, const StepOptions& o)
      : m_(m), p_(p), c_(c), cm_(cm), comm_(comm), o_(o), host_copy_(cm.gpu().host_copy_bandwidth()) {
    m_mb_ = static_cast<int32_t>(p.microbatches());
    v_ = static_cast<int32_t>(p.vp);
    pp_ = static_cast<int32_t>(p.pp);
    ranges_.resize(static_cast<size_t>(pp_) * static_cast<size_t>(v_));
    for (int32_t s = 0; s < pp_; ++s) {
      for (int32_t k = 0; k < v_; ++k) ranges_[range_idx(s, k)] = chunk_layers(p, m.layers, s, k);
    }
    const size_t n = static_cast<size_t>(pp_) * static_cast<size_t>(v_) * static_cast<size_t>(m_mb_);
    f_first_.assign(n, -1);
    f_last_.assign(n, -1);
    b_first_.assign(n, -1);
    b_last_.assign(n, -1);
    send_f_.assign(n, -1);
    send_b_.assign(n, -1);
    w_first_.assign(n, -1);
    w_last_.assign(n, -1);
    if (p.activation_offload) to_host_.resize(n);
    traced_.assign(static_cast<size_t>(pp_), 0);
    for (int32_t s : o.trace_stages) {
      if (s >= 0 && s < pp_) traced_[static_cast<size_t>(s)] = 1;
    }
    const Plan& pl = p_;
    dp_reduce_ = group_size(pl, Group::kDpShard) > 1 || group_size(pl, Group::kDpReplica) > 1;
  }

  StepResult run() {
    for (int32_t s = 0; s < pp_; ++s) build_stage(s);
    link_pipeline();
    for (int32_t s = 0; s < pp_; ++s) build_tail(s);
    const std::vector<TaskTiming> t = g_.run();
    return summarize(t);
  }

 private:
  size_t idx(int32_t s, int32_t c, int32_t mb) const {
    return (static_cast<size_t>(s) * static_cast<size_t>(v_) + static_cast<size_t>(c)) * static_cast<size_t>(m_mb_) +
           static_cast<size_t>(mb);
  }
  size_t range_idx(int32_t s, int32_t c) const { return static_cast<size_t>(s) * static_cast<size_t>(v_) + static_cast<size_t>(c); }
  const LayerRange& range(int32_t s, int32_t c) const { return ranges_[range_idx(s, c)]; }
  int64_t n_layers(int32_t s, int32_t c) const { return range(s, c).count; }
  int64_t layer_of(int32_t s, int32_t c, int64_t i) const { return range(s, c).first + i; }
  // Stage s's communication model and layer costs: a slow link makes one stage's differ (StepOptions).
  const CommModel& comm(int32_t s) const {
    const auto i = static_cast<size_t>(s);
    return i < o_.stage_comm.size() && o_.stage_comm[i] != nullptr ? *o_.stage_comm[i] : comm_;
  }
  // A collective's time, memoized: ZeRO-3 asks for the same per-layer all-gather and reduce-scatter
  // once per layer and micro-batch (same model, op, bytes and group: same time).
  Time collective(int32_t s, coll::Op op, Bytes bytes, Group g) {
    const CommModel* model = &comm(s);
    for (const CollectiveMemo& e : memo_) {
      if (e.model == model && e.op == op && e.bytes == bytes && e.group == g) return e.time;
    }
    const Time t = model->collective(op, bytes, g);
    if (memo_.size() >= kMemoSize) memo_.erase(memo_.begin());
    memo_.push_back(CollectiveMemo{model, op, bytes, g, t});
    return t;
  }
  const ModelCosts& costs(int32_t s) const {
    const auto i = static_cast<size_t>(s);
    return i < o_.stage_costs.size() && o_.stage_costs[i] != nullptr ? *o_.stage_costs[i] : c_;
  }
  // A pipeline transfer runs at the slower of its two ends.
  Time send_time(int32_t from, int32_t to) const {
    return std::max(comm(from).p2p(c_.boundary_activation), comm(to).p2p(c_.boundary_activation));
  }
  double slow(int32_t s) const {
    const double stage =
        static_cast<size_t>(s) < o_.stage_slowdown.size() ? std::max(1.0, o_.stage_slowdown[static_cast<size_t>(s)]) : 1.0;
    return stage * std::max(1.0, o_.compute_slowdown);
  }
  bool full_recompute(int32_t s, int32_t c, int64_t i) const { return p_.recomputes_layer(range(s, c).offset + i); }

  // The shared resource of stage s's traffic of group g (its network or its scale-up egress), or -1
  // when links are not shared or the model does not say which link carries it.
  int32_t link_resource(int32_t s, Group g) const {
    if (!o_.share_links) return -1;
    const std::optional<LinkKind> k = comm(s).link(g);
    if (!k) return -1;
    return 2 * s + (*k == LinkKind::kNic ? 0 : 1);
  }

  // `name()` gives the trace's label; it runs only for traced stages (a template, not std::function:
  // a capturing lambda would cost an allocation per task).
  template <class NameFn>
  TaskId add_task(int32_t s, StreamId stream, Time dur, TimeCategory category, const Parts& parts, bool filler,
                  std::string_view stream_name, const NameFn& name, int32_t resource = -1) {
    Task t;
    t.stream = stream;
    t.resource = resource;
    t.duration = dur;
    t.filler = filler;
    t.category = cat(category);
    t.label = s;
    const TaskId id = g_.add(t);
    parts_.push_back(parts);
    stage_of_.push_back(s);
    if (o_.trace_stages.empty()) return id;  // no trace: no labels kept
    if (traced_[static_cast<size_t>(s)] != 0) {
      trace_names_.push_back(name());
      trace_streams_.emplace_back(stream_name);
    } else {
      trace_names_.emplace_back();
      trace_streams_.emplace_back();
    }
    return id;
  }
  void dep(TaskId task, TaskId after) {
    if (task < 0 || after < 0) return;
    g_.depend(task, after);
  }

  // The parts of one pass over layers [lo, hi) of chunk c on stage s.
  Parts pass_parts(int32_t s, int32_t c, PassKind kind, int64_t lo, int64_t hi) const {
    Parts r;
    const bool split = p_.splits_backward();
    const ModelCosts& sc = costs(s);
    for (int64_t i = lo; i < hi; ++i) {
      const LayerCost& l = sc.layer[static_cast<size_t>(layer_of(s, c, i))];
      switch (kind) {
        case PassKind::kForward:
          r.compute += l.fwd;
          r.tp += l.tp_fwd;
          r.cp += l.cp_fwd;
          r.ep += l.ep_fwd;
          break;
        case PassKind::kBackward:
          r.compute += l.bwd_input + (split ? Time::zero() : l.bwd_weight);
          r.tp += l.tp_bwd;
          r.cp += l.cp_bwd;
          r.ep += l.ep_bwd;
          if (full_recompute(s, c, i)) {
            r.recompute += l.recompute_full;
            r.tp += l.tp_fwd;
            r.cp += l.cp_fwd;
            r.ep += l.ep_fwd;
          } else {
            r.recompute += l.partial_recompute(p_.recompute);
          }
          break;
        case PassKind::kWeight:
          r.compute += l.bwd_weight;
          break;
      }
    }
    const bool first_piece_fwd = lo == 0;
    const bool last_piece = hi == n_layers(s, c);
    const bool pre_here = p_.runs_embedding(s, c);
    const bool post_here = p_.runs_head(s, c);
    auto add_edge = [&](const LayerCost& e) {
      switch (kind) {
        case PassKind::kForward: r.compute += e.fwd; break;
        case PassKind::kBackward: r.compute += e.bwd_input + (split ? Time::zero() : e.bwd_weight); break;
        case PassKind::kWeight: r.compute += e.bwd_weight; break;
      }
    };
    if (pre_here && first_piece_fwd) add_edge(sc.pre);
    if (post_here && last_piece) add_edge(sc.post);
    const double f = slow(s);
    if (f != 1.0) {
      r.compute = Time::seconds(r.compute.to_seconds() * f);
      r.recompute = Time::seconds(r.recompute.to_seconds() * f);
    }
    return r;
  }

  int64_t piece_params(int32_t s, int32_t c, int64_t lo, int64_t hi) const {
    int64_t n = 0;
    for (int64_t i = lo; i < hi; ++i) n += c_.layer[static_cast<size_t>(layer_of(s, c, i))].params;
    if (p_.runs_embedding(s, c) && lo == 0) n += c_.pre.params;
    if (p_.runs_head(s, c) && hi == n_layers(s, c)) n += c_.post.params;
    return n;
  }
  // A piece's parameters as the DP collectives split them: routed experts' reduce and gather over the
  // expert-data-parallel groups (Group::kEdpShard, kEdpReplica), the rest over the dense ones.
  struct ParamSplit {
    int64_t dense = 0;
    int64_t experts = 0;
  };
  ParamSplit piece_split(int32_t s, int32_t c, int64_t lo, int64_t hi) const {
    ParamSplit r;
    for (int64_t i = lo; i < hi; ++i) r.experts += c_.layer[static_cast<size_t>(layer_of(s, c, i))].expert_params;
    r.dense = piece_params(s, c, lo, hi) - r.experts;
    return r;
  }
  // The same over all of stage s's chunks.
  ParamSplit stage_split(int32_t s) const {
    ParamSplit r;
    for (int32_t c = 0; c < v_; ++c) {
      const ParamSplit chunk = piece_split(s, c, 0, n_layers(s, c));
      r.dense += chunk.dense;
      r.experts += chunk.experts;
    }
    return r;
  }
  // The all-gathers of a piece's 16-bit parameters on `stream`, one task per group that has more than
  // one rank (dense over the shard group, experts over the expert shard group); `what()` names them in
  // the trace. Returns the first and last task (-1 for none): the stream runs them in creation order.
  template <class NameFn>
  std::pair<TaskId, TaskId> gather_params(int32_t s, StreamId stream, ParamSplit ps, const NameFn& what) {
    std::pair<TaskId, TaskId> r{-1, -1};
    for (const auto& [params, g] : {std::pair{ps.dense, Group::kDpShard}, std::pair{ps.experts, Group::kEdpShard}}) {
      if (params <= 0) continue;
      const Bytes bytes = Bytes::from_double(d(params) * 2.0);
      Time t = collective(s, coll::Op::kAllGather, bytes, g);
      if (t <= Time::zero()) continue;
      // FSDP2's copy-in on the all-gather's stream: the rank's shard, in the dtype it is kept in, cast
      // into the 16-bit flat input.
      if (fsdp2()) t += fsdp2_gather_copy_in(p_, cm_, params, group_size(p_, g));
      const TaskId ag = add_task(s, stream, t, TimeCategory::kDp, Parts{}, false, "dp-gather", [&] {
        return fmt::format("{}{} {:.1f} MB", g == Group::kEdpShard ? "expert " : "", what(), bytes.to_double() * 1e-6);
      }, link_resource(s, g));
      if (r.first < 0) r.first = ag;
      r.second = ag;
    }
    return r;
  }

  // FSDP2 (Plan::fsdp_impl): ZeRO-3 with per-parameter shards, whose collectives copy their buffers.
  bool fsdp2() const { return p_.sharding == Sharding::kZero3 && p_.fsdp_impl == FsdpImpl::kFsdp2; }
  // FSDP2's compute-stream copies for a piece's parameters (fsdp2_compute_copies), over the groups that
  // gather or reduce them.
  Time fsdp2_copies(ParamSplit ps, bool gather, bool reduce) const {
    double elems = 0.0;
    if (group_size(p_, Group::kDpShard) > 1) elems += d(ps.dense);
    if (group_size(p_, Group::kEdpShard) > 1) elems += d(ps.experts);
    return fsdp2_compute_copies(p_, cm_, elems, gather, reduce);
  }

  // Transformer Engine's delayed scaling: when a model chunk's fp8_autocast region ends, in forward and
  // again in backward, TE all-reduces the amaxes of the region's fp8 tensors over the stage's
  // tp x dp x cp ranks (Megatron-Core's amax reduction group) on the compute stream before the next
  // kernel (FP8GlobalStateManager.reduce_and_update_fp8_tensors): per layer 4 GEMMs x 3 fp32 amaxes
  // (input, weight, output) forward, x 2 (output and input gradients) backward, a few hundred bytes,
  // so their latency. Timed as the TP-level all-reduce then the DP x CP one (two levels of one
  // group). Current scaling and MXFP8 keep no amax history (their per-tensor TP reductions are in the
  // layer costs, train/layer_costs.h).
  Time amax_reduction(int32_t s, int32_t c, PassKind kind) {
    if (p_.precision != hw::DType::kFp8 || p_.fp8_recipe != Fp8Recipe::kDelayed) return Time::zero();
    const Bytes bytes(n_layers(s, c) * (kind == PassKind::kForward ? 48 : 32));
    Time t;
    for (Group g : {Group::kTp, Group::kDp}) {
      if (group_size(p_, g) > 1) t += collective(s, coll::Op::kAllReduce, bytes, g);
    }
    return t;
  }

  // Activation offload (Plan::offloads_layer): whether chunk c's layer i goes to host memory, and the
  // bytes one micro-batch of it saves.
  bool offloads(int32_t s, int32_t c, int64_t i) const { return p_.offloads_layer(range(s, c).offset + i); }
  Bytes layer_saved(int32_t s, int32_t c, int64_t i) const {
    const LayerCost& l = c_.layer[static_cast<size_t>(layer_of(s, c, i))];
    return full_recompute(s, c, i) ? l.act_input : l.saved_activations(p_.recompute);
  }

  // Gradient reduction of a piece's gradients over the DP groups, one task per collective group: the
  // dense gradients over the shard group (HSDP: then their shard over the replicas, once per step),
  // the routed experts' over the expert shard and replica groups. Sparse synchronization exchanges all
  // of them over dp x cp. Returns the last task (-1 for none): the stream runs them in creation order.
  TaskId reduce_grads(int32_t s, const StageStreams& st, ParamSplit ps, TaskId after, bool last_mb) {
    TaskId last = -1;
    const bool sharded = p_.sharding != Sharding::kNone;
    auto add = [&](Time t, Group g, Bytes bytes, std::string_view what) {
      if (t <= Time::zero()) return;
      const TaskId id = add_task(
          s, st.dp, t, TimeCategory::kDp, Parts{}, false, "dp",
          [&] { return fmt::format("{} {:.1f} MB", what, bytes.to_double() * 1e-6); }, link_resource(s, g));
      dep(id, after);
      last = id;
    };
    if (p_.grad_sync != GradSync::kDense) {
      const Bytes bytes = Bytes::from_double(d(ps.dense + ps.experts) * d(p_.grad_bytes));
      const Bytes sparse = Bytes::from_double(bytes.to_double() * p_.grad_density *
                                              (d(p_.grad_bytes) + 4.0) / d(p_.grad_bytes));
      const int64_t n = group_size(p_, Group::kDp);
      if (p_.grad_sync == GradSync::kSparseAllGather) {
        add(collective(s, coll::Op::kAllGather, sparse * n, Group::kDp), Group::kDp, bytes, "sparse all-gather");
      } else {
        add(collective(s, coll::Op::kAllReduce, sparse, Group::kDp), Group::kDp, bytes, "zen exchange");
      }
      return last;
    }
    const std::array<std::tuple<int64_t, Group, Group, std::string_view>, 2> parts = {
        std::tuple{ps.dense, Group::kDpShard, Group::kDpReplica,
                   sharded ? std::string_view("reduce-scatter") : std::string_view("all-reduce")},
        std::tuple{ps.experts, Group::kEdpShard, Group::kEdpReplica,
                   sharded ? std::string_view("expert reduce-scatter") : std::string_view("expert all-reduce")}};
    for (const auto& [params, shard, replica, what] : parts) {
      if (params <= 0) continue;
      const Bytes bytes = Bytes::from_double(d(params) * d(p_.grad_bytes));
      Time t = collective(s, sharded ? coll::Op::kReduceScatter : coll::Op::kAllReduce, bytes, shard);
      if (sharded && last_mb && group_size(p_, replica) > 1) {  // the rank's shard over the replicas
        t += collective(s, coll::Op::kAllReduce, Bytes::from_double(bytes.to_double() / d(group_size(p_, shard))), replica);
      }
      add(t, shard, bytes, what);
    }
    return last;
  }

  void build_stage(int32_t s) {
    StageStreams st{g_.add_stream(true),  g_.add_stream(false), g_.add_stream(false), g_.add_stream(false),
                    g_.add_stream(false), g_.add_stream(false), g_.add_stream(false)};
    streams_.push_back(st);
    const std::vector<PipelinePass> order = pipeline_order(p_, s);
    // FSDP under PP (Plan::fsdp_keeps_gathered) gathers each layer once, at the first forward, and
    // reduce-scatters the chunk's accumulated gradients once, after its last backward.
    const bool zero3 = p_.fsdp_reshards() && group_size(p_, Group::kDpShard) > 1;
    const bool kept = p_.fsdp_keeps_gathered() && dp_reduce_;
    // Sharded gradients (ZeRO-2 and -3) are reduce-scattered after every micro-batch's backward, layer
    // by layer: a rank keeps only its shard of the accumulated gradients, so it cannot wait for the last
    // micro-batch as ZeRO-0/1 do (DeepSpeed's stage 2, deepspeedai/DeepSpeed#2252; PyTorch FSDP's
    // SHARD_GRAD_OP). The last micro-batch's reductions gate the optimizer step.
    const bool reduce_each = zero3 || (p_.sharding == Sharding::kZero2 && group_size(p_, Group::kDpShard) > 1);
    std::vector<TaskId> dp_tasks;
    const bool split = p_.splits_backward();
    const PassKind grad_kind = split ? PassKind::kWeight : PassKind::kBackward;
    std::vector<TaskId> compute_order;  // non-filler compute tasks in program order (prefetch anchors)
    // Per chunk and layer: the last micro-batch's gradient task and the first forward's task, where
    // those passes run layer by layer (gradient buckets, parameter buckets).
    std::vector<std::vector<TaskId>> last_grad_layers(static_cast<size_t>(v_));
    std::vector<TaskId> chunk_first_forward(static_cast<size_t>(v_), -1);
    std::vector<TaskId> prev_w(static_cast<size_t>(v_) * static_cast<size_t>(m_mb_), -1);
    // ZeRO-1/2 parameter all-gather overlapped with the first forward pass of each chunk, bucket by
    // bucket (Megatron-Core's overlap_param_gather: a forward pre-hook waits for the bucket that holds
    // a module's parameters; the gathers run back to back on their own stream).
    // FSDP under PP gathers the same way, unit by unit (its forward pre-hooks; fsdp_units).
    const bool gather_overlap = !zero3 && dp_reduce_ &&
                                (((p_.sharding == Sharding::kZero1 || p_.sharding == Sharding::kZero2) &&
                                  p_.overlap_param_gather) ||
                                 kept) &&
                                group_size(p_, Group::kDpShard) > 1;
    std::vector<std::vector<TaskId>> first_forward_layers(static_cast<size_t>(v_));
    for (int32_t c = 0; c < v_; ++c) {
      // One slot per piece: a chunk without layers (Plan::first_stage_layers 0) is one empty piece that
      // carries the embedding or the LM head and loss.
      const auto slots = static_cast<size_t>(std::max<int64_t>(1, n_layers(s, c)));
      last_grad_layers[static_cast<size_t>(c)].assign(slots, -1);
      first_forward_layers[static_cast<size_t>(c)].assign(slots, -1);
    }
    // Overlapped pairs (DualPipeV's F & B W, combined 1F1B's F & B): the pair's EP all-to-alls beside the
    // rest of its work cost bulk_extra(rest, all-to-alls, share) instead of their own time
    // (train/simulator.h).
    double comm_scale = 1.0;
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const PipelinePass& pass = order[pos];
      const int32_t c = pass.chunk;
      const int32_t mb = pass.microbatch;
      if (!pass.paired) {
        comm_scale = 1.0;
      } else if (pass.kind == PassKind::kForward && p_.overlaps_pairs()) {
        // The pair: this forward up to the pass that closes it.
        Parts sum;
        for (size_t k = pos; k < order.size(); ++k) {
          const PipelinePass& y = order[k];
          const Parts q = pass_parts(s, y.chunk, y.kind, 0, n_layers(s, y.chunk));
          sum.compute += q.compute + q.recompute + q.tp + q.cp;
          sum.ep += q.ep;
          if (closes_pair(y)) break;
        }
        comm_scale = sum.ep > Time::zero()
                         ? bulk_extra(sum.compute, sum.ep, costs(s).pair_comm_share).to_seconds() / sum.ep.to_seconds()
                         : 1.0;
      }
      const bool last_mb = mb == m_mb_ - 1;
      const bool first_forward =
          gather_overlap && pass.kind == PassKind::kForward && chunk_first_forward[static_cast<size_t>(c)] < 0;
      // Activation offload, layer by layer as Transformer Engine's double-buffered offload handler runs
      // it (get_cpu_offload_context): a layer's copy to the host starts when its forward ends, and the
      // forward two layers up waits for it (two layers' buffers on the GPU: memory.cc); in the backward
      // a layer's copy back starts once the backward two layers up has freed its buffer (the top two
      // when the pass is next on the compute stream), and its backward waits for it.
      const bool offload_pass = pass.kind != PassKind::kWeight && n_layers(s, c) > 0 && offloads(s, c, 0);
      // Per-layer tasks where something happens between layers: FSDP gathers and reductions, the
      // parameter buckets of the first forward, the gradient buckets of the last micro-batch and the
      // offload copies.
      const bool per_layer = zero3 || first_forward || offload_pass || (reduce_each && pass.kind == grad_kind) ||
                             (last_mb && pass.kind == grad_kind && dp_reduce_ && p_.overlap_grad_reduce && !kept);
      const TaskId before_pass = compute_order.empty() ? -1 : compute_order.back();
      std::vector<TaskId>& to_host = offload_pass ? to_host_[idx(s, c, mb)] : no_tasks_;
      if (offload_pass && pass.kind == PassKind::kForward) to_host.assign(static_cast<size_t>(n_layers(s, c)), -1);
      std::vector<TaskId> pieces_by_layer(offload_pass ? static_cast<size_t>(n_layers(s, c)) : 0, -1);
      // A chunk without layers runs one empty piece [0, 0) (its embedding or head, if any).
      const int64_t pieces = per_layer ? std::max<int64_t>(1, n_layers(s, c)) : 1;
      const int64_t width = per_layer ? std::min<int64_t>(1, n_layers(s, c)) : n_layers(s, c);
      TaskId first = -1;
      TaskId prev = -1;
      for (int64_t k = 0; k < pieces; ++k) {
        // Forward pieces go up the layers, backward and weight pieces down.
        const int64_t lo = pass.kind == PassKind::kForward ? k * width : (pieces - 1 - k) * width;
        const int64_t hi = lo + width;
        Parts parts = pass_parts(s, c, pass.kind, lo, hi);
        if (comm_scale != 1.0) parts.ep = Time::seconds(parts.ep.to_seconds() * comm_scale);
        const bool gathers = zero3 && pass.kind != PassKind::kWeight && range(s, c).offset + lo >= p_.unsharded_layers;
        if (zero3 && fsdp2()) parts.dp += fsdp2_copies(piece_split(s, c, lo, hi), gathers, pass.kind == grad_kind);
        const bool filler = false;  // the schedule places every W pass (train/schedule.h)
        const char kind_char = pass.kind == PassKind::kForward ? 'F' : pass.kind == PassKind::kBackward ? 'B' : 'W';
        const auto piece_name = [&] {
          return per_layer ? fmt::format("{} mb{} c{} l{}", kind_char, mb, c, lo) : fmt::format("{} mb{} c{}", kind_char, mb, c);
        };
        // With link sharing, the piece's exposed TP/CP/EP collectives follow its kernels as tasks of their
        // own on the compute stream, each on its group's link, so that they share it with the
        // communication streams; without, the piece is one task.
        const bool split_comm = o_.share_links && parts.tp + parts.cp + parts.ep > Time::zero();
        Parts kernels = parts;
        if (split_comm) kernels.tp = kernels.cp = kernels.ep = Time::zero();
        const TaskId id = add_task(s, st.compute, kernels.total(), TimeCategory::kCompute, kernels, filler, "compute", piece_name);
        TaskId id_last = id;
        if (split_comm) {
          const std::array<std::pair<Group, Time Parts::*>, 3> comms = {
              std::pair{Group::kTp, &Parts::tp}, std::pair{Group::kCp, &Parts::cp}, std::pair{Group::kEp, &Parts::ep}};
          for (const auto& [group, field] : comms) {
            if (parts.*field <= Time::zero()) continue;
            Parts q;
            q.*field = parts.*field;
            id_last = add_task(
                s, st.compute, q.total(), TimeCategory::kCompute, q, filler, "compute",
                [&] { return fmt::format("{} {}", piece_name(), group_name(group)); }, link_resource(s, group));
          }
        }
        if (filler) {
          dep(id, prev >= 0 ? prev : b_last_[idx(s, c, mb)]);
        } else {
          compute_order.push_back(id_last);
        }
        if (gathers) {
          const auto [ag_first, ag_last] =
              gather_params(s, st.dp_gather, piece_split(s, c, lo, hi), [&] { return fmt::format("all-gather l{}", lo); });
          const auto anchor = static_cast<int64_t>(compute_order.size()) - 2 - p_.fsdp_prefetch;
          if (!filler && anchor >= 0) dep(ag_first, compute_order[static_cast<size_t>(anchor)]);
          dep(id, ag_last);
        }
        if (reduce_each && pass.kind == grad_kind) {
          const TaskId r = reduce_grads(s, st, piece_split(s, c, lo, hi), id_last, last_mb);
          if (last_mb && r >= 0) dp_tasks.push_back(r);
        } else if (per_layer && pass.kind == grad_kind && last_mb) {
          last_grad_layers[static_cast<size_t>(c)][static_cast<size_t>(lo)] = id_last;
        }
        if (first_forward) first_forward_layers[static_cast<size_t>(c)][static_cast<size_t>(lo)] = id;
        if (offload_pass) {
          const auto at = static_cast<size_t>(lo);
          pieces_by_layer[at] = id_last;
          if (pass.kind == PassKind::kForward) {
            if (lo >= 2) dep(id, to_host[at - 2]);
            if (offloads(s, c, lo)) {
              const TaskId down = add_task(s, st.d2h, layer_saved(s, c, lo) / host_copy_, TimeCategory::kOffload, Parts{}, false,
                                           "offload-d2h", [&] { return fmt::format("offload mb{} c{} l{}", mb, c, lo); });
              dep(down, id_last);
              to_host[at] = down;
            }
          } else if (offloads(s, c, lo) && to_host.size() > at) {
            const TaskId up = add_task(s, st.h2d, layer_saved(s, c, lo) / host_copy_, TimeCategory::kOffload, Parts{}, false,
                                       "offload-h2d", [&] { return fmt::format("reload mb{} c{} l{}", mb, c, lo); });
            dep(up, to_host[at]);
            dep(up, at + 2 < pieces_by_layer.size() ? pieces_by_layer[at + 2] : before_pass);
            dep(id, up);
          }
        }
        if (first < 0) first = id;
        prev = id_last;
      }
      if (pass.kind != PassKind::kWeight) {
        const Time t = amax_reduction(s, c, pass.kind);
        if (t > Time::zero()) {
          const TaskId a = add_task(s, st.compute, t, TimeCategory::kDp, Parts{}, false, "compute",
                                    [&] { return fmt::format("amax all-reduce mb{} c{}", mb, c); });
          prev = a;
        }
      }
      const size_t i = idx(s, c, mb);
      if (pass.kind == PassKind::kForward) {
        f_first_[i] = first;
        f_last_[i] = prev;
        if (chunk_first_forward[static_cast<size_t>(c)] < 0) chunk_first_forward[static_cast<size_t>(c)] = first;
        // The output goes to the next virtual stage, on another rank unless the V turns here (ZB-V).
        const int32_t next = p_.runs_head(s, c) ? s : virtual_rank(s, c, 1);
        if (next != s) {
          const TaskId send = add_task(s, st.pp_fwd, send_time(s, next), TimeCategory::kPp, Parts{}, false,
                                       "pp-send-fwd", [&] { return fmt::format("send act mb{} c{}", mb, c); },
                                       link_resource(s, Group::kPp));
          dep(send, prev);
          send_f_[i] = send;
        }
      } else if (pass.kind == PassKind::kWeight) {
        w_first_[i] = first;
        w_last_[i] = prev;
      } else {
        b_first_[i] = first;
        b_last_[i] = prev;
        dep(first, f_last_[i]);
      }
      // The input gradient goes to the previous virtual stage after the backward (after its W when the
      // backward is whole: PipelinePass::full).
      if ((pass.kind == PassKind::kBackward && !pass.full) || (pass.kind == PassKind::kWeight && pass.full)) {
        const int32_t prev_rank = p_.runs_embedding(s, c) ? s : virtual_rank(s, c, -1);
        if (prev_rank != s) {
          const TaskId send = add_task(s, st.pp_bwd, send_time(s, prev_rank), TimeCategory::kPp, Parts{}, false,
                                       "pp-send-bwd", [&] { return fmt::format("send grad mb{} c{}", mb, c); },
                                       link_resource(s, Group::kPp));
          dep(send, prev);
          send_b_[i] = send;
        }
      }
    }
    // Data-parallel gradient reduction (ZeRO-0/1; ZeRO-2's ran above, after every backward) in buckets,
    // and the parameter all-gather (ZeRO-1/2).
    if (!zero3 && dp_reduce_) {
      if (kept) {
        // PyTorch's pipelining calls the chunk's post_backward once its last backward has ended: one
        // reduce-scatter per layer (FSDP unit), back to back.
        for (int32_t c = 0; c < v_; ++c) {
          const TaskId after = split ? w_last(s, c) : b_last_[idx(s, c, m_mb_ - 1)];
          for (const auto& [lo, hi] : fsdp_units(s, c)) {
            dp_tasks.push_back(reduce_grads(s, st, piece_split(s, c, lo, hi), after, true));
          }
        }
      } else if (!reduce_each && p_.overlap_grad_reduce) {
        // A bucket is reduced once the backward has gone down through its lowest layer.
        for (int32_t c = 0; c < v_; ++c) {
          for (const auto& [lo, hi] : dp_buckets(s, c)) {
            dp_tasks.push_back(
                reduce_grads(s, st, piece_split(s, c, lo, hi), last_grad_layers[static_cast<size_t>(c)][static_cast<size_t>(lo)], true));
          }
        }
      } else if (!reduce_each) {
        const TaskId t = reduce_grads(s, st, stage_split(s), compute_order.back(), true);
        for (int32_t c = 0; c < v_; ++c) dep(t, split ? w_last(s, c) : b_last_[idx(s, c, m_mb_ - 1)]);
        dp_tasks.push_back(t);
      }
      if (gather_overlap) {
        for (int32_t c = 0; c < v_; ++c) {
          // In forward order: all are ready at step start, and the stream runs them in creation order.
          const std::vector<std::pair<int64_t, int64_t>> buckets = kept ? fsdp_units(s, c) : dp_buckets(s, c);
          for (auto b = buckets.rbegin(); b != buckets.rend(); ++b) {
            const auto [lo, hi] = *b;
            const TaskId ag = gather_params(s, st.dp_gather, piece_split(s, c, lo, hi), [&] {
                                return fmt::format("param all-gather c{} l{}-{}", c, lo, hi - 1);
                              }).second;
            dep(first_forward_layers[static_cast<size_t>(c)][static_cast<size_t>(lo)], ag);
          }
        }
      }
    }
    dp_tasks_.push_back(std::move(dp_tasks));
  }

  // The DP buckets of chunk c as layer ranges [lo, hi), from the top layer down: they fill with whole
  // layers' gradients as the backward pass produces them, up to bucket_bytes, and the parameter
  // all-gather uses the same buckets (Megatron-Core's ParamAndGradBuffer, one per model chunk).
  // A chunk without layers is one bucket [0, 0): its embedding's or head's gradients, if any.
  std::vector<std::pair<int64_t, int64_t>> dp_buckets(int32_t s, int32_t c) const {
    std::vector<std::pair<int64_t, int64_t>> buckets;
    int64_t hi = n_layers(s, c);
    if (hi == 0) return {{0, 0}};
    double bytes = 0;
    for (int64_t i = hi - 1; i >= 0; --i) {
      bytes += d(piece_params(s, c, i, i + 1)) * d(p_.grad_bytes);
      if (bytes >= d(p_.bucket_bytes) || i == 0) {
        buckets.emplace_back(i, hi);
        hi = i;
        bytes = 0;
      }
    }
    return buckets;
  }

  // FSDP's units of chunk c as layer ranges, one per layer from the top down (as dp_buckets lists its
  // buckets); a chunk without layers is one unit [0, 0).
  std::vector<std::pair<int64_t, int64_t>> fsdp_units(int32_t s, int32_t c) const {
    const int64_t n = n_layers(s, c);
    if (n == 0) return {{0, 0}};
    std::vector<std::pair<int64_t, int64_t>> units;
    for (int64_t i = n - 1; i >= 0; --i) units.emplace_back(i, i + 1);
    return units;
  }

  TaskId w_last(int32_t s, int32_t c) const { return w_last_[idx(s, c, m_mb_ - 1)]; }

  // The rank of the virtual stage `step` (+1: next, -1: previous) from chunk c of rank s.
  int32_t virtual_rank(int32_t s, int32_t c, int32_t step) const {
    return static_cast<int32_t>(p_.stage_of_virtual(p_.virtual_stage(s, c) + step));
  }

  void link_pipeline() {
    for (int32_t s = 0; s < pp_; ++s) {
      for (int32_t c = 0; c < v_; ++c) {
        const int64_t k = p_.virtual_stage(s, c);
        for (int32_t mb = 0; mb < m_mb_; ++mb) {
          const size_t i = idx(s, c, mb);
          // Forward input from the previous virtual stage: its send, or on this rank its last task.
          if (k > 0) {
            const auto ps = static_cast<int32_t>(p_.stage_of_virtual(k - 1));
            const auto pc = static_cast<int32_t>(p_.chunk_of_virtual(k - 1));
            dep(f_first_[i], ps != s ? send_f_[idx(ps, pc, mb)] : f_last_[idx(ps, pc, mb)]);
          }
          // Output gradient from the next virtual stage.
          if (k < int64_t{pp_} * v_ - 1) {
            const auto ns = static_cast<int32_t>(p_.stage_of_virtual(k + 1));
            const auto nc = static_cast<int32_t>(p_.chunk_of_virtual(k + 1));
            dep(b_first_[i], ns != s ? send_b_[idx(ns, nc, mb)] : b_last_[idx(ns, nc, mb)]);
          }
        }
      }
    }
  }

  void build_tail(int32_t s) {
    const StageStreams& st = streams_[static_cast<size_t>(s)];
    const ParamSplit stage = stage_split(s);
    const Time t = optimizer_step_time(p_, p_.local_optimizer_params(stage.dense + stage.experts, stage.experts), cm_);
    const TimeCategory category = p_.optimizer_offload ? TimeCategory::kOffload : TimeCategory::kOptimizer;
    Parts parts;
    const TaskId opt = add_task(s, st.compute, t, category, parts, false, "compute", [] { return std::string("optimizer"); });
    for (TaskId d : dp_tasks_[static_cast<size_t>(s)]) dep(opt, d);
    // The optimizer runs after every W pass of the stage (ZB-H1, ZB-V).
    for (int32_t c = 0; c < v_; ++c) {
      for (int32_t mb = 0; mb < m_mb_; ++mb) {
        if (p_.splits_backward()) dep(opt, w_last_[idx(s, c, mb)]);
      }
    }
    if ((p_.sharding == Sharding::kZero1 || p_.sharding == Sharding::kZero2) && !p_.overlap_param_gather &&
        group_size(p_, Group::kDpShard) > 1) {
      const TaskId ag = gather_params(s, st.dp_gather, stage, [] { return std::string("param all-gather"); }).first;
      dep(ag, opt);
    }
  }

  void record_passes(const std::vector<TaskTiming>& t, StepResult& r) const {
    r.passes.reserve(f_first_.size() * (p_.splits_backward() ? 3 : 2));
    for (int32_t s = 0; s < pp_; ++s) {
      for (int32_t c = 0; c < v_; ++c) {
        for (int32_t mb = 0; mb < m_mb_; ++mb) {
          const size_t i = idx(s, c, mb);
          auto add_pass = [&](PassKind kind, TaskId first, TaskId last) {
            if (first < 0 || last < 0) return;
            r.passes.push_back(PassTiming{s, c, mb, kind, t[static_cast<size_t>(first)].start, t[static_cast<size_t>(last)].end});
          };
          add_pass(PassKind::kForward, f_first_[i], f_last_[i]);
          add_pass(PassKind::kBackward, b_first_[i], b_last_[i]);
          add_pass(PassKind::kWeight, w_first_[i], w_last_[i]);
        }
      }
    }
  }

  StepResult summarize(const std::vector<TaskTiming>& t) {
    StepResult r;
    r.tasks = g_.size();
    for (const TaskTiming& x : t) r.step_time = std::max(r.step_time, x.end);
    r.stage_compute.assign(static_cast<size_t>(pp_), Time::zero());
    for (size_t i = 0; i < g_.size(); ++i) {
      const Task& task = g_.task(static_cast<TaskId>(i));
      if (task.stream == streams_[static_cast<size_t>(stage_of_[i])].compute) {
        r.stage_compute[static_cast<size_t>(stage_of_[i])] += task.duration;
      }
    }
    r.breakdown_stage = static_cast<int32_t>(std::max_element(r.stage_compute.begin(), r.stage_compute.end()) -
                                             r.stage_compute.begin());
    const int32_t bs = r.breakdown_stage;
    std::vector<TaskId> compute;
    Time stage_end;
    TaskId stage_last = -1;
    for (size_t i = 0; i < g_.size(); ++i) {
      if (stage_of_[i] != bs) continue;
      if (t[i].end > stage_end) {
        stage_end = t[i].end;
        stage_last = static_cast<TaskId>(i);
      }
      if (g_.task(static_cast<TaskId>(i)).stream == streams_[static_cast<size_t>(bs)].compute) {
        compute.push_back(static_cast<TaskId>(i));
      }
    }
    // Each task's binding dependency: the one that finished last (the first listed among equals).
    std::vector<TaskId> binding(g_.size(), -1);
    for (const auto& [after, task] : g_.dependencies()) {
      TaskId& b = binding[static_cast<size_t>(task)];
      if (b < 0 || t[static_cast<size_t>(after)].end > t[static_cast<size_t>(b)].end) b = after;
    }
    std::sort(compute.begin(), compute.end(), [&](TaskId a, TaskId b) {
      return t[static_cast<size_t>(a)].start < t[static_cast<size_t>(b)].start ||
             (t[static_cast<size_t>(a)].start == t[static_cast<size_t>(b)].start && a < b);
    });
    auto& br = r.breakdown;
    auto add = [&br](TimeCategory c, Time x) { br[static_cast<size_t>(c)] += x; };
    Time prev_end;
    for (TaskId id : compute) {
      const TaskTiming& x = t[static_cast<size_t>(id)];
      const Time gap = x.start - prev_end;
      if (gap > Time::zero()) {
        const TaskId bind = binding[static_cast<size_t>(id)];
        const auto c = bind >= 0 ? static_cast<TimeCategory>(g_.task(bind).category) : TimeCategory::kBubble;
        if (c == TimeCategory::kPp) {
          const Time waiting_upstream = std::clamp(t[static_cast<size_t>(bind)].ready - prev_end, Time::zero(), gap);
          add(TimeCategory::kBubble, waiting_upstream);
          add(TimeCategory::kPp, gap - waiting_upstream);
        } else if (c == TimeCategory::kDp || c == TimeCategory::kOffload) {
          add(c, gap);
        } else {
          add(TimeCategory::kBubble, gap);
        }
      }
      const Task& task = g_.task(id);
      const Parts& p = parts_[static_cast<size_t>(id)];
      if (static_cast<TimeCategory>(task.category) == TimeCategory::kCompute) {
        add(TimeCategory::kCompute, p.compute);
        add(TimeCategory::kRecompute, p.recompute);
        add(TimeCategory::kTp, p.tp);
        add(TimeCategory::kCp, p.cp);
        add(TimeCategory::kEp, p.ep);
        add(TimeCategory::kDp, p.dp);
        // A collective of the pass that shared its link ran longer than alone: the excess is its own.
        const Time stretch = (x.end - x.start) - task.duration;
        if (stretch > Time::zero()) {
          add(p.tp > Time::zero() ? TimeCategory::kTp : p.cp > Time::zero() ? TimeCategory::kCp : TimeCategory::kEp, stretch);
        }
      } else {
        add(static_cast<TimeCategory>(task.category), task.duration);
      }
      prev_end = x.end;
    }
    if (stage_end > prev_end && stage_last >= 0) {
      const auto c = static_cast<TimeCategory>(g_.task(stage_last).category);
      add(c == TimeCategory::kCompute ? TimeCategory::kBubble : c, stage_end - prev_end);
      prev_end = stage_end;
    }
    add(TimeCategory::kBubble, r.step_time - prev_end);
    // Recompute FLOPs of the whole job: per micro-batch, per stage, times the ranks of a stage.
    double rec = 0.0;
    for (int32_t s = 0; s < pp_; ++s) {
      for (int32_t c = 0; c < v_; ++c) {
        for (int64_t i = 0; i < n_layers(s, c); ++i) {
          const LayerCost& l = c_.layer[static_cast<size_t>(layer_of(s, c, i))];
          if (full_recompute(s, c, i)) {
            rec += l.fwd_flops.count();
          } else {
            rec += l.partial_recompute_flops(p_.recompute).count();
          }
        }
      }
    }
    r.recompute_flops = Flops(rec * d(m_mb_) * d(p_.tp * p_.cp * p_.dp));
    if (o_.record_passes) record_passes(t, r);
    if (!o_.trace_stages.empty()) {
      for (size_t i = 0; i < g_.size(); ++i) {
        if (traced_[static_cast<size_t>(stage_of_[i])] == 0) continue;
        r.trace.push_back(TraceEvent{stage_of_[i], trace_streams_[i], trace_names_[i], t[i].start, t[i].end});
      }
    }
    return r;
  }

  const model::ModelSpec& m_;
  const Plan& p_;
  const ModelCosts& c_;
  const compute::ComputeModel& cm_;
  const CommModel& comm_;
  const StepOptions& o_;
  int32_t m_mb_ = 0, v_ = 1, pp_ = 1;
  std::vector<LayerRange> ranges_;  // per (stage, chunk)
  bool dp_reduce_ = false;
  TaskGraph g_;
  std::vector<StageStreams> streams_;
  std::vector<Parts> parts_;
  std::vector<int32_t> stage_of_;
  std::vector<std::string> trace_names_;
  std::vector<std::string> trace_streams_;
  std::vector<uint8_t> traced_;
  std::vector<TaskId> f_first_, f_last_, b_first_, b_last_, w_first_, w_last_, send_f_, send_b_;
  // Activation offload: per (stage, chunk, micro-batch), each layer's copy-to-host task (-1: none).
  std::vector<std::vector<TaskId>> to_host_;
  std::vector<TaskId> no_tasks_;
  Bandwidth host_copy_;
  std::vector<std::vector<TaskId>> dp_tasks_;
  struct CollectiveMemo {
    const CommModel* model;
    coll::Op op;
    Bytes bytes;
    Group group;
    Time time;
  };
  static constexpr size_t kMemoSize = 8;  // the distinct collectives of a layer's passes, with room
  std::vector<CollectiveMemo> memo_;
};

}  // namespace

StepResult simulate_step(const model::ModelSpec& model, const Plan& plan, const ModelCosts& costs,
                         const compute::ComputeModel& compute, const CommModel& comm, const StepOptions& options) {
  Builder b(model, plan, costs, compute, comm, options);
  return b.run();
}

}  // namespace orrery::train
