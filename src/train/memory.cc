#include "train/memory.h"

#include <algorithm>
#include <utility>

#include "train/allocator_trace.h"
#include "train/schedule.h"

namespace orrery::train {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

Bytes scaled(int64_t params, double bytes_per_param) {
  return Bytes::from_double(static_cast<double>(params) * bytes_per_param);
}

// The interleaved schedule's micro-batches held per chunk at the instant stage s holds the most
// activations, `resident[c]` bytes per micro-batch of chunk c. Chunks differ (the first carries the
// embedding's output, the last the loss's softmax, uneven end chunks their layers), and the in-flight
// count min(2(p - s - 1) + (v - 1) n + 1, m v) is of chunks, not of each chunk's micro-batches: the last
// stage holds n of chunk 0 and one of its last chunk, whose loss it runs next. Walks the order
// (train/schedule.h): the warm-up's forwards, then forward warm + j before backward j; the most is held
// after some forward (or, without a steady phase, after the warm-up). While both walk whole groups of n v
// table entries the held mix repeats every n v steps, so the walk covers the first n v steps and those
// from where the forwards near the last group: O(n v) steps, O(v) to start each range. Under combined
// 1F1B (Plan::ep_a2a_overlap) a steady pair frees its backward's chunk before its forward's counts.
// The interleaved zero-bubble order (torch's) walks the same table with its own warm-up, and what
// frees a chunk is its W pass, which lags: steady step j runs forward warm + j, the B of entry j and,
// from j = s on, the W of entry j - s, so after forward warm + j the entries before max(0, j - s) are
// freed; the mix repeats every n v steps from step s on.
std::vector<double> interleaved_peak_held(const Plan& p, int64_t s, const std::vector<int64_t>& resident) {
  const int64_t v = p.vp, total = p.microbatches() * v, warm = interleaved_warmup(p, s);
  const int64_t lag = p.schedule == Schedule::kInterleavedZeroBubble ? s : 0;
  const int64_t steps = total - warm, period = p.microbatch_group_size() * v;
  const int64_t whole = (p.microbatches() / p.microbatch_group_size()) * period;  // entries in whole groups
  std::vector<int64_t> held(static_cast<size_t>(v), 0);
  int64_t sum = 0;
  // The mix after forward `f` entries and `b` backwards.
  auto set = [&](int64_t f, int64_t b) {
    sum = 0;
    for (int32_t c = 0; c < v; ++c) {
      held[static_cast<size_t>(c)] =
          interleaved_count(p, f, c) - interleaved_count(p, b, static_cast<int32_t>(v - 1 - c));
      sum += held[static_cast<size_t>(c)] * resident[static_cast<size_t>(c)];
    }
  };
  auto add = [&](int64_t c, int64_t by) {
    held[static_cast<size_t>(c)] += by;
    sum += by * resident[static_cast<size_t>(c)];
  };
  set(warm, 0);
  std::vector<int64_t> best = held;
  int64_t best_sum = sum;
  auto walk = [&](int64_t from, int64_t to) {
    if (from >= to) return;
    set(warm + from, std::max<int64_t>(0, from - lag));
    for (int64_t j = from; j < to; ++j) {
      const int64_t fc = interleaved_chunk(p, warm + j);
      const bool frees = j >= lag;  // the zero-bubble order's first s steps free nothing
      const int64_t bc = frees ? v - 1 - interleaved_chunk(p, j - lag) : 0;
      // Combined 1F1B's pairs swap (v_peak_held): the backward frees as the forward saves.
      const bool swap = frees && p.ep_a2a_overlap &&
                        (fc != bc || interleaved_microbatch(p, warm + j) != interleaved_microbatch(p, j));
      if (swap) add(bc, -1);
      add(fc, 1);
      if (sum > best_sum) {
        best_sum = sum;
        best = held;
      }
      if (frees && !swap) add(bc, -1);
    }
  };
  const int64_t first = std::min(steps, lag + period);
  walk(0, first);
  walk(std::max(first, whole - warm), steps);
  return {best.begin(), best.end()};
}

// ZB-V: the chunk-micro-batches stage s holds per chunk at its peak (by `resident` bytes per
// micro-batch of each chunk), walking its order (train/schedule.h): a forward adds one, its W pass
// frees it. From m = 2p on, the steady phase starts with a forward of chunk 0 (2p - s - 1 of them run
// before it) and each of its iterations F0 B0 W0 F1 B1 W1 returns to the same mix, and the cool-down
// only frees, so the walk over min(m, 2p) micro-batches finds the peak of any m. DualPipeV (m >= 2p)
// likewise: its steady pairs (F0 & B1) (F1 & B0) return to the same mix, and its cool-down frees a
// chunk-micro-batch before each forward it runs. An overlapped pair interleaves its forward and its
// backward layer by layer, the backward freeing a layer's activations as the forward saves one of its
// own (equal chunks), so the pair swaps one chunk-micro-batch for the other: the walk frees the
// backward's before it adds the forward's (Megatron-Bridge's Qwen3-30B-A3B run holds one micro-batch
// with combined 1F1B on: docs/training.md). `most` gets the largest count held, whatever the bytes.
//
// An order read from a file (Schedule::kCustom) walks the same way over the whole of it (nothing says
// where it repeats), with any number of chunks; a backward frees at its W where the order splits them,
// at its B where it does not.
std::vector<double> v_peak_held(const Plan& p, int64_t s, const std::vector<int64_t>& resident, int64_t* most) {
  Plan q = p;
  if (p.schedule != Schedule::kCustom) q.gbs = std::min(p.microbatches(), 2 * p.pp) * p.dp * p.mbs;
  const size_t v = resident.size();
  const PassKind frees = p.splits_backward() ? PassKind::kWeight : PassKind::kBackward;
  std::vector<int64_t> held(v, 0), best(v, 0);
  int64_t best_sum = -1, sum = 0, count = 0, total = 0;
  int32_t swapped_in = -1;  // an overlapped pair's forward chunk, added as its backward frees (below)
  auto take = [&](int32_t chunk, int64_t delta) {
    held[static_cast<size_t>(chunk)] += delta;
    sum += delta * resident[static_cast<size_t>(chunk)];
    total += delta;
    if (sum > best_sum) {
      best_sum = sum;
      best = held;
    }
    count = std::max(count, total);
  };
  for (const PipelinePass& x : pipeline_order(q, s)) {
    if (x.kind == PassKind::kForward && x.paired && p.overlaps_pairs()) {
      swapped_in = x.chunk;
    } else if (x.kind == PassKind::kForward) {
      take(x.chunk, 1);
    } else if (x.kind == frees) {
      take(x.chunk, -1);
      if (closes_pair(x) && swapped_in >= 0) take(std::exchange(swapped_in, -1), 1);
    }
  }
  if (most != nullptr) *most = count;
  std::vector<double> out;
  out.reserve(v);
  for (int64_t b : best) out.push_back(d(b));
  return out;
}

}  // namespace

MemoryBreakdown model_state_memory(int64_t params, const Plan& p, const MemoryConstants& k, int64_t expert_params) {
  // What ZeRO shards is held for the rank's shard only: its local parameters (the dense ones over
  // shard_size ranks, the routed experts' over expert_shard_size; all of them unsharded).
  const double all = d(params), local = p.local_optimizer_params(params, expert_params);
  // FSDP under PP holds its parameters gathered and its gradients unsharded (Plan::fsdp_keeps_gathered).
  const bool grads_sharded = p.sharding == Sharding::kZero2 || p.fsdp_reshards();
  MemoryBreakdown m;
  m.weights = Bytes::from_double(d(k.weight_bytes) * (p.fsdp_reshards() ? local : all));
  m.gradients = Bytes::from_double(d(p.grad_bytes) * (grads_sharded ? local : all));
  m.optimizer = Bytes::from_double(d(p.master_bytes() + p.moment_bytes()) * local * (1.0 - p.host_optimizer_share()));
  return m;
}

double inflight_microbatches(const Plan& p, int64_t s) {
  const int64_t m = p.microbatches();
  switch (p.schedule) {
    case Schedule::kGpipe:
    case Schedule::kLoopedBfs: return d(m);  // every forward before the first backward
    case Schedule::kInterleavedZeroBubble:
      // The warm-up's (v - 1) n + p - 1 - s forwards, then one more per steady step and, from step s
      // on, one W: (v - 1) n + p chunk passes at the most on every stage (interleaved_peak_held).
      return d(std::min((p.vp - 1) * p.microbatch_group_size() + p.pp, m * p.vp)) / d(p.vp);
    case Schedule::kOneFOneB: return d(std::min(p.pp - s, m));  // combined 1F1B's pairs swap (v_peak_held)
    case Schedule::kZeroBubble: return d(std::min(p.pp, m));  // W of j runs after B of j + s
    case Schedule::kInterleaved: {
      if (!p.ep_a2a_overlap) return d(std::min(interleaved_warmup(p, s) + 1, m * p.vp)) / d(p.vp);
      double held = 0.0;  // the pairs swap: the walk's count at its peak
      for (double c : interleaved_peak_held(p, s, std::vector<int64_t>(static_cast<size_t>(p.vp), 1))) held += c;
      return held / d(p.vp);
    }
    case Schedule::kZeroBubbleV:
    case Schedule::kDualPipeV:
    case Schedule::kCustom: {  // chunk-micro-batches at the most, in whole-stage micro-batches
      int64_t most = 0;
      v_peak_held(p, s, std::vector<int64_t>(static_cast<size_t>(p.vp), 1), &most);
      return d(most) / d(p.vp);
    }
  }
  return d(m);
}

MemoryReport memory_model(const model::ModelSpec& model, const Plan& p, const ModelCosts& c, const hw::GpuSpec& gpu,
                          const MemoryConstants& k, Bytes host_capacity) {
  MemoryReport r;
  r.capacity = gpu.memory;
  r.host_capacity = host_capacity;
  int64_t groups = 0;
  for (Group g : {Group::kTp, Group::kCp, Group::kDp, Group::kEp, Group::kPp}) groups += group_size(p, g) > 1 ? 1 : 0;
  // With EP the experts' gradients reduce over a communicator of their own (the expert-data-parallel group).
  if (p.ep > 1 && group_size(p, Group::kEdpShard) > 1) ++groups;
  if (p.expert_tp() > 1 && p.expert_tp() != p.tp) ++groups;  // and the expert TP ranks, when not a TP group
  r.stages.reserve(static_cast<size_t>(p.pp));
  for (int64_t s = 0; s < p.pp; ++s) {
    StageMemory st;
    st.stage = s;
    st.layers = stage_layers(p, model.layers, s);
    Bytes act_mb;            // one micro-batch's saved activations on this stage
    Bytes largest_layer;     // one layer's full activations (backward working set)
    Bytes largest_recomputed;  // op-level SAC: the most one layer recomputes (backward working set)
    bool any_full = false;   // some layer under full recompute
    Bytes act_off_mb;        // of act_mb, the layers that offload (Plan::offloads_layer)
    int64_t off_layers = 0;
    int64_t max_layer_params = 0;
    int64_t max_layer_sharded = 0;  // of a layer's parameters, those whose gradients ZeRO-2 shards
    const bool dense_sharded = p.shard_size() > 1, experts_sharded = p.expert_shard_size() > 1;
    st.chunk_activations.assign(static_cast<size_t>(p.vp), Bytes(0));
    st.chunk_offloaded.assign(static_cast<size_t>(p.vp), Bytes(0));
    for (int64_t v = 0; v < p.vp; ++v) {
      const LayerRange range = chunk_layers(p, model.layers, s, v);
      const Bytes before = act_mb;
      const Bytes before_off = act_off_mb;
      for (int64_t i = 0; i < range.count; ++i) {
        const LayerCost& lc = c.layer[static_cast<size_t>(range.first + i)];
        st.params += lc.params;
        st.expert_params += lc.expert_params;
        max_layer_params = std::max(max_layer_params, lc.params);
        max_layer_sharded = std::max(max_layer_sharded, (dense_sharded ? lc.params - lc.expert_params : 0) +
                                                            (experts_sharded ? lc.expert_params : 0));
        Bytes a = lc.saved_activations(p.recompute);
        // Op-level SAC materializes the rest of a layer again in its backward.
        if (p.recompute == Recompute::kSelectiveOp) largest_recomputed = std::max(largest_recomputed, lc.act_none - a);
        if (p.recomputes_layer(range.offset + i)) {
          a = lc.act_input;
          any_full = true;
        }
        act_mb += a;
        if (p.offloads_layer(range.offset + i)) {
          act_off_mb += a;
          ++off_layers;
        }
        largest_layer = std::max(largest_layer, lc.act_none);
      }
      st.chunk_activations[static_cast<size_t>(v)] = act_mb - before;
      st.chunk_offloaded[static_cast<size_t>(v)] = act_off_mb - before_off;
    }
    if (s == 0) {
      st.params += c.pre.params;
      act_mb += c.pre.act_none;
      st.chunk_activations.front() += c.pre.act_none;
    }
    if (s == p.head_stage()) {
      st.params += c.post.params;
      act_mb += c.post.act_none;
      st.chunk_activations.back() += c.post.act_none;
    }
    st.inflight_microbatches = inflight_microbatches(p, s);
    MemoryBreakdown& mb = st.memory;
    mb = model_state_memory(st.params, p, k, st.expert_params);
    if (p.fsdp_keeps_gathered()) {
      // FSDP under PP (Plan::fsdp_keeps_gathered; model_state_memory holds every layer's 16-bit
      // parameters and unsharded gradients): one layer's 16-bit gradient from its backward until it is
      // added into the reduce dtype's; the sharded gradients replace them only at the end. The shard is
      // the fp32 master (under optimizer), or without one the 16-bit parameter itself.
      if (!p.separate_master()) {
        mb.weights += Bytes::from_double(d(k.weight_bytes) * p.local_optimizer_params(st.params, st.expert_params));
      }
      if (p.grad_bytes != k.weight_bytes) mb.gradients += scaled(max_layer_params, d(k.weight_bytes));
    } else if (p.sharding == Sharding::kZero3) {
      // FSDP: the sharded parameter is the fp32 master (under optimizer); bf16 copies of the layers
      // being computed, prefetched or kept unsharded are materialized.
      const int64_t gathered = std::min(st.layers, 1 + p.fsdp_prefetch + p.unsharded_layers);
      mb.weights = scaled(max_layer_params * gathered, d(k.weight_bytes));
      // Without a separate master copy (none, or only its low bits) the shard is the 16-bit weight itself.
      if (!p.separate_master()) {
        mb.weights += Bytes::from_double(d(k.weight_bytes) * p.local_optimizer_params(st.params, st.expert_params));
      }
      mb.gradients += scaled(max_layer_params, d(p.grad_bytes));  // one layer's unsharded gradient
      // The root unit (embedding, final norm, LM head) is not resharded after forward: held gathered
      // through the step, with the LM head's unsharded gradient from its backward to the end.
      mb.weights += scaled((s == 0 ? c.pre.params : 0) + (s == p.head_stage() ? c.post.params : 0), d(k.weight_bytes));
      if (s == p.head_stage()) mb.gradients += scaled(c.post.params, d(k.weight_bytes));
    } else if (p.sharding == Sharding::kZero2) {
      // ZeRO-2 reduce-scatters each layer's gradients as the backward produces them (simulator.cc,
      // reduce_each): the layer's unsharded gradient exists until its reduction, for the parameters
      // it shards (the routed experts' only over an expert shard group of more than one rank).
      mb.gradients += scaled(max_layer_sharded, d(p.grad_bytes));
    }
    // Offload keeps the layer being computed and the one whose copy is in flight on the GPU. Offloading
    // everything (offload_layers -1) takes the embedding output and the logits' buffers with it.
    if (p.activation_offload && p.offload_layers < 0) {
      st.chunk_offloaded = st.chunk_activations;
      act_off_mb = act_mb;
      off_layers = st.layers;
    }
    st.offload_held = off_layers > 0 ? std::min(st.inflight_microbatches, 2.0 / d(off_layers)) : 0.0;
    // What stays on the GPU of each chunk, held per chunk (interleaved: at the peak's mix of chunks).
    std::vector<int64_t> resident(static_cast<size_t>(p.vp));
    for (size_t ch = 0; ch < resident.size(); ++ch) resident[ch] = (st.chunk_activations[ch] - st.chunk_offloaded[ch]).count();
    st.chunk_inflight.assign(resident.size(), st.inflight_microbatches);
    if (p.interleaves()) st.chunk_inflight = interleaved_peak_held(p, s, resident);
    if (p.v_shape() || p.schedule == Schedule::kCustom) st.chunk_inflight = v_peak_held(p, s, resident, nullptr);
    double resident_held = 0.0;
    for (size_t ch = 0; ch < resident.size(); ++ch) resident_held += d(resident[ch]) * st.chunk_inflight[ch];
    mb.activations = Bytes::from_double(resident_held + act_off_mb.to_double() * st.offload_held);
    // On the host: every in-flight micro-batch's offloaded activations (pinned buffers for all of them,
    // the two layers' worth being copied included), and the optimizer's host share with the gradients
    // of its parameters, copied down each step.
    st.host = Bytes::from_double(p.host_optimizer_share() * p.local_optimizer_params(st.params, st.expert_params) *
                                     d(p.master_bytes() + p.moment_bytes() + p.grad_bytes) +
                                 act_off_mb.to_double() * st.inflight_microbatches);
    Bytes temp = (any_full ? largest_layer : largest_recomputed) + c.layer_input * 2 + c.cp_buffer;
    if (s == p.head_stage()) {
      // The loss's backward beside its saved fp32 softmax (counted in activations): Megatron's
      // vocab_parallel_cross_entropy turns that buffer into the gradient in place, and the upcast's
      // backward adds the logits' gradient in their dtype (dt per logit); PyTorch's F.cross_entropy
      // (log_softmax + nll_loss, eager) holds nll_loss's dense fp32 gradient and log_softmax's fp32
      // input gradient at once (8 per logit).
      const double dt = d(hw::dtype_bytes(p.activation_dtype()));
      const double per_logit = p.loss_is_eager() ? 8.0 : dt;
      temp += Bytes::from_double(per_logit * d(p.mbs) * d(p.seq / p.cp) * d(model.vocab) / d(p.tp));
    }
    mb.temporary = temp;
    mb.communication = k.nccl_per_group * groups;
    mb.context = k.cuda_context;
    mb.allocator = Bytes::from_double(mb.tensors().to_double() * k.allocator_fraction);
    r.stages.push_back(st);
  }
  // The caching allocator's reservation beyond the tensors (train/allocator_trace.h).
  if (p.allocator != AllocatorMode::kNone) {
    for (StageMemory& st : r.stages) st.memory.allocator += allocator_estimate(model, p, c, st.stage, k).overhead();
  }
  for (const StageMemory& st : r.stages) {
    if (st.memory.total() > r.peak) {
      r.peak = st.memory.total();
      r.peak_stage = st.stage;
    }
  }
  r.peak_rank = r.peak_stage * group_stride(p, Group::kPp);
  for (const StageMemory& st : r.stages) r.host_peak = std::max(r.host_peak, st.host);
  r.host_fits = host_capacity.count() <= 0 || r.host_peak <= host_capacity;
  r.fits = r.peak <= r.capacity && r.host_fits;
  // By layer, for the peak stage.
  const StageMemory& ps = r.stages[static_cast<size_t>(r.peak_stage)];
  const double per_param = ps.params > 0 ? (ps.memory.weights + ps.memory.gradients + ps.memory.optimizer).to_double() /
                                               d(ps.params)
                                         : 0.0;
  for (int64_t v = 0; v < p.vp; ++v) {
    const LayerRange range = chunk_layers(p, model.layers, r.peak_stage, v);
    for (int64_t i = 0; i < range.count; ++i) {
      const int64_t l = range.first + i;
      const LayerCost& lc = c.layer[static_cast<size_t>(l)];
      const int64_t offset = range.offset + i;
      const Bytes a = p.recomputes_layer(offset) ? lc.act_input : lc.saved_activations(p.recompute);
      const double held = p.offloads_layer(offset) ? ps.offload_held : ps.chunk_inflight[static_cast<size_t>(v)];
      r.peak_layers.push_back(LayerMemory{l, Bytes::from_double(per_param * d(lc.params)), Bytes::from_double(a.to_double() * held)});
    }
  }
  return r;
}

}  // namespace orrery::train
