#include "train/allocator_trace.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "train/memory.h"
#include "train/schedule.h"

namespace orrery::train {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

Bytes times(int64_t params, double bytes_per_param) { return Bytes::from_double(d(params) * bytes_per_param); }

// The tensors of one rank, replayed through the allocator (see the header's model card).
class Trace {
 public:
  Trace(const model::ModelSpec& m, const Plan& p, const ModelCosts& c, int64_t stage, const MemoryConstants& k)
      : m_(m), p_(p), c_(c), k_(k), s_(stage), a_(p.allocator) {
    first_ = s_ == 0;
    last_ = s_ == p_.head_stage();  // ZB-V: rank 0 runs the head and loss too
    // FSDP under PP holds its layers gathered and their gradients unsharded, as ZeRO-1 does (memory.cc).
    zero3_ = p_.fsdp_reshards();
    offload_all_ = p_.activation_offload && p_.offload_layers < 0;
    gpu_optimizer_ = 1.0 - p_.host_optimizer_share();
    // Layers per chunk and what each saves; the first recompute_layers of the stage are fully
    // recomputed and the first offload_layers offload (as train/memory.cc counts them).
    for (int64_t v = 0; v < p_.vp; ++v) {
      const LayerRange r = chunk_layers(p_, m_.layers, s_, v);
      std::vector<Layer> chunk;
      for (int64_t i = 0; i < r.count; ++i) {
        const LayerCost& lc = c_.layer[static_cast<size_t>(r.first + i)];
        params_.push_back({lc.params, p_.local_optimizer_params(lc.params, lc.expert_params)});
        const bool recomputed = p_.recomputes_layer(r.offset + i);
        Layer l;
        l.offloaded = p_.offloads_layer(r.offset + i);
        l.saved = recomputed ? lc.act_input : lc.saved_activations(p_.recompute);
        l.work = c_.layer_input * 2;
        if (recomputed) {
          l.work += lc.act_none;
        } else if (p_.recompute == Recompute::kSelectiveOp) {
          l.work += lc.act_none - l.saved;
        }
        chunk.push_back(l);
      }
      chunks_.push_back(std::move(chunk));
    }
    // Saved activations come as tensors the size of the layer's input as the rank holds it (split over
    // TP with SP): most of Korthikanti's per-layer terms are one or a few of them.
    piece_ = Bytes::from_double(std::max(1.0, c_.layer_input.to_double() / (p_.sp ? d(p_.tp) : 1.0)));
    // The allocator's state repeats once the schedule is in its steady phase: micro-batches beyond 2 pp
    // (a multiple of pp, as interleaving needs; ZB-V's steady iterations start by then) add nothing
    // new, except under GPipe and looped BFS, which hold them all. The interleaved zero-bubble order
    // keeps its rounds of n; its held mix repeats every n v steps from step s on (memory.cc,
    // interleaved_peak_held), within 3 n micro-batches.
    replay_ = p_;
    int64_t cap = 2 * p_.pp;
    if (p_.schedule == Schedule::kInterleavedZeroBubble) {
      replay_.microbatch_group = p_.microbatch_group_size();
      cap = 3 * replay_.microbatch_group;
    }
    // A file's order (kCustom) is replayed whole: nothing says where it repeats.
    const bool holds_all = p_.schedule == Schedule::kGpipe || p_.schedule == Schedule::kLoopedBfs ||
                           p_.schedule == Schedule::kCustom;
    if (!holds_all && p_.microbatches() > cap) replay_.gbs = cap * p_.dp * p_.mbs;
    order_ = pipeline_order(replay_, s_);
    const size_t passes = static_cast<size_t>(replay_.microbatches() * p_.vp);
    saved_.resize(passes);
    loss_.assign(passes, -1);
    if (first_) params_.push_back({c_.pre.params, p_.local_optimizer_params(c_.pre.params, 0)});
    if (last_) params_.push_back({c_.post.params, p_.local_optimizer_params(c_.post.params, 0)});
    const hw::DType act = p_.activation_dtype();
    const double dt = d(hw::dtype_bytes(act));
    const double logits = last_ ? d(p_.mbs) * d(p_.seq / p_.cp) * d(m_.vocab) / d(p_.tp) : 0.0;
    logits_ = Bytes::from_double(dt * logits);
    softmax_ = Bytes::from_double(4.0 * logits);
  }

  AllocatorEstimate run() {
    start();
    for (int step = 0; step < 2; ++step) {
      root_ = head_grad_ = -1;
      // An overlapped pair's forward saves its tensors as its backward frees (memory.cc, v_peak_held): it
      // runs here after the pair's backward (and W).
      const PipelinePass* swapped_in = nullptr;
      for (const PipelinePass& x : order_) {
        if (x.kind == PassKind::kForward && x.paired && p_.overlaps_pairs()) {
          swapped_in = &x;
          continue;
        }
        if (x.kind == PassKind::kForward) forward(x.chunk, x.microbatch);
        if (x.kind == PassKind::kBackward) backward(x.chunk, x.microbatch, x.full);
        if (x.kind == PassKind::kWeight) free_saved(x.chunk, x.microbatch);  // empty after a whole backward
        if (swapped_in != nullptr && closes_pair(x)) {
          forward(swapped_in->chunk, swapped_in->microbatch);
          swapped_in = nullptr;
        }
      }
      free(root_);
      free(head_grad_);
      if (step == 0 && gpu_optimizer_ > 0.0) {
        // Adam's moments, created at the first optimizer step.
        for (const Params& n : params_) alloc(Bytes::from_double(n.local * gpu_optimizer_ * d(p_.moment_bytes())));
      }
    }
    return AllocatorEstimate{a_.peak_allocated(), a_.peak_reserved()};
  }

 private:
  size_t slot(int32_t chunk, int32_t mb) const {
    return static_cast<size_t>(chunk) * static_cast<size_t>(replay_.microbatches()) + static_cast<size_t>(mb);
  }

  int64_t alloc(Bytes b) { return b.count() > 0 ? a_.allocate(b) : -1; }
  void free(int64_t h) {
    if (h >= 0) a_.release(h);
  }

  void start() {
    for (const Params& n : params_) {
      if (!zero3_) {
        alloc(times(n.count, d(k_.weight_bytes)));
        alloc(p_.sharding == Sharding::kZero2 ? Bytes::from_double(n.local * d(p_.grad_bytes)) : times(n.count, d(p_.grad_bytes)));
        if (p_.fsdp_keeps_gathered() && !p_.separate_master()) alloc(Bytes::from_double(n.local * d(k_.weight_bytes)));
      } else if (!p_.separate_master()) {
        alloc(Bytes::from_double(n.local * d(k_.weight_bytes)));  // the 16-bit shard is the parameter (memory.cc)
      }
      if (gpu_optimizer_ > 0.0) alloc(Bytes::from_double(n.local * gpu_optimizer_ * d(p_.master_bytes())));
    }
  }

  void forward(int32_t chunk, int32_t mb) {
    std::vector<int64_t>& held = saved_[slot(chunk, mb)];
    if (zero3_ && root_ < 0 && (first_ || last_)) {
      root_ = alloc(times((first_ ? c_.pre.params : 0) + (last_ ? c_.post.params : 0), d(k_.weight_bytes)));
    }
    // Offloading every activation (offload_layers -1) takes the embedding output, the head's input and
    // the loss's saved softmax to host memory too (as train/memory.cc counts them): the softmax is
    // on the GPU from its forward to the end of the pass and again from its backward on.
    if (p_.runs_embedding(s_, chunk) && !offload_all_) held.push_back(alloc(c_.pre.act_none));
    for (const Layer& l : chunks_[static_cast<size_t>(chunk)]) {
      // Offloaded activations live in host memory (the one in flight is not traced).
      Bytes left = l.offloaded ? Bytes(0) : l.saved;
      while (left.count() > 0) {
        const Bytes piece = std::min(left, piece_);
        held.push_back(alloc(piece));
        left -= piece;
      }
      held.push_back(-2);  // the end of a layer
    }
    if (p_.runs_head(s_, chunk)) {
      if (!offload_all_) held.push_back(alloc(std::max(Bytes(0), c_.post.act_none - softmax_)));
      const int64_t l16 = alloc(logits_);
      if (p_.loss_is_eager()) {
        const int64_t l32 = alloc(softmax_);
        free(l16);
        loss_[slot(chunk, mb)] = alloc(softmax_);  // log_softmax's output
        free(l32);
      } else {
        loss_[slot(chunk, mb)] = alloc(softmax_);  // the fp32 softmax, the gradient in place later
        free(l16);
      }
      if (offload_all_) {
        free(loss_[slot(chunk, mb)]);
        loss_[slot(chunk, mb)] = -1;
      }
    }
  }

  void backward(int32_t chunk, int32_t mb, bool whole) {
    if (p_.runs_head(s_, chunk)) {
      const int64_t saved = offload_all_ ? alloc(softmax_) : loss_[slot(chunk, mb)];  // copied back
      loss_[slot(chunk, mb)] = -1;
      int64_t grad = -1;
      if (p_.loss_is_eager()) {
        const int64_t nll = alloc(softmax_);
        const int64_t g32 = alloc(softmax_);
        free(nll);
        free(saved);
        grad = alloc(logits_);
        free(g32);
      } else {
        grad = alloc(logits_);
        free(saved);
      }
      if (zero3_ && head_grad_ < 0) head_grad_ = alloc(times(c_.post.params, d(k_.weight_bytes)));
      const int64_t dx = alloc(c_.layer_input);
      free(grad);
      free(dx);
    }
    // The chunk's layers in reverse: each one's working set above everything, the layer's saved
    // tensors freed, then the working set.
    const bool zb = p_.splits_backward() && !whole;  // a whole backward frees as it goes (PipelinePass::full)
    std::vector<int64_t>& held = saved_[slot(chunk, mb)];
    if (!zb && p_.runs_head(s_, chunk) && !offload_all_) {
      free(held.back());  // the head's input
      held.pop_back();
    }
    const auto& layers = chunks_[static_cast<size_t>(chunk)];
    size_t end = held.size();
    for (size_t i = layers.size(); i-- > 0;) {
      const int64_t w = alloc(layers[i].work);
      if (!zb && end > 0) {
        // held[.. end) ends with layer i's marker; its tensors precede it.
        size_t begin = end - 1;
        while (begin > 0 && held[begin - 1] != -2) --begin;
        for (size_t j = end - 1; j-- > begin;) {
          free(held[j]);
          held[j] = -1;
        }
        end = begin;
      }
      free(w);
    }
    if (!zb) free_saved(chunk, mb);
  }

  void free_saved(int32_t chunk, int32_t mb) {
    std::vector<int64_t>& held = saved_[slot(chunk, mb)];
    for (auto h = held.rbegin(); h != held.rend(); ++h) free(*h);
    held.clear();
  }

  const model::ModelSpec& m_;
  const Plan& p_;
  const ModelCosts& c_;
  const MemoryConstants& k_;
  int64_t s_;
  CachingAllocator a_;
  bool first_ = false, last_ = false, zero3_ = false;
  bool offload_all_ = false;  // every saved activation to host memory (Plan::offload_layers -1)
  double gpu_optimizer_ = 1.0;  // the share of the optimizer on the GPU (Plan::host_optimizer_share)
  struct Layer {
    Bytes saved;  // one micro-batch's saved activations
    Bytes work;   // the backward working set
    bool offloaded = false;  // its saved activations go to host memory (Plan::offloads_layer)
  };
  std::vector<std::vector<Layer>> chunks_;
  Bytes piece_;
  Plan replay_;
  struct Params {
    int64_t count = 0;  // on the rank
    double local = 0;   // of whose optimizer states it holds (Plan::local_optimizer_params)
  };
  std::vector<Params> params_;  // parameters on the rank: per layer, then the embedding and the head
  Bytes logits_;   // the last stage's logits in the activation dtype (0 elsewhere)
  Bytes softmax_;  // the same in fp32
  std::vector<PipelinePass> order_;
  std::vector<std::vector<int64_t>> saved_;  // per (chunk, micro-batch): the saved tensors' handles
  std::vector<int64_t> loss_;                // per (chunk, micro-batch): the loss's saved tensor
  int64_t root_ = -1;
  int64_t head_grad_ = -1;
};

}  // namespace

AllocatorEstimate allocator_estimate(const model::ModelSpec& model, const Plan& plan, const ModelCosts& costs,
                                     int64_t stage, const MemoryConstants& k) {
  return Trace(model, plan, costs, stage, k).run();
}

}  // namespace orrery::train
