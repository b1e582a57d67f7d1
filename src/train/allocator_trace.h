// The caching allocator's reservation over a training step: the tensors of one rank of a pipeline
// stage, allocated and freed in the order the step runs them, played through train/caching_allocator.h.
// Its overhead (peak reserved minus peak allocated) is the memory model's "allocator" category.
//
// Model card
//   Streams: the compute stream's pool holds the model states the optimizer owns, the activations, the
//     loss's tensors and the backward's working sets; a second pool (the communication streams) holds
//     NCCL's buffers and, under ZeRO-3/FSDP, the gathered layers, the unsharded gradient being reduced
//     and the sharded gradients (FSDP2 allocates them on its all-gather and reduce-scatter streams).
//     These last are constant in the model, so that pool adds no overhead.
//   Order, two steps (the allocator's state carries over; torch reports the peak over the run):
//     start: weights and gradient buffers (without ZeRO-3), the fp32 master copy or sharded parameter;
//     each forward pass of (chunk, micro-batch), in train/schedule.h's order: the first stage's
//       embedding output, the saved activations of the chunk's layers (layer_costs.h, under the plan's
//       recompute), then on the last stage the head's saved input and the loss;
//     each backward pass: the loss's backward, then the largest working set of the chunk's layers (the
//       layer's recomputed activations and 2 x its input for the gradients), above the saved blocks,
//       which are freed before it is (under ZB-H1 by the weight-gradient pass instead);
//     ZeRO-3/FSDP root unit (embedding, final norm, LM head): gathered at the first forward and held
//       to the end of the step, with the LM head's gradient from its backward (see train/memory.h);
//     the optimizer step: Adam's two moments allocated lazily at the first step (torch.optim and
//       apex/TE FusedAdam create their state at the first step, after the first backward).
//   The loss (the last stage's logits, N = b s V / tp of them):
//     eager (PyTorch F.cross_entropy on logits.float(), torchtitan): logits (dt N), their fp32 copy
//       (4N), the logits freed, log_softmax's output (4N, saved), the fp32 copy freed; backward:
//       nll_loss's dense gradient (4N), log_softmax's input gradient (4N), the first freed, the saved
//       output freed, the logits' gradient in their dtype (dt N), the fp32 gradient freed.
//     fused (Megatron's vocab_parallel_cross_entropy): logits (dt N), their fp32 softmax (4N, saved,
//       turned into the gradient in place), the logits freed; backward: the logits' gradient (dt N).
//   Granularity: a layer's saved activations are tensors the size of its input as the rank holds it
//   (b s h dt, / tp with SP; most of Korthikanti's per-layer terms are one or a few of them), its backward
//   working set one block; persistent states one block per layer (and for the embedding and the head)
//   and category. The holes a layer's transient forward tensors leave between its saved ones are not
//   modelled.
//   Activation offload: an offloaded layer's saved activations are not allocated (the one in flight is
//     not traced); offloading everything (Plan::offload_layers -1) also leaves out the embedding output
//     and the head's input, and the loss's saved softmax lives only through its forward pass and again
//     from its backward on (copied back), as train/memory.h counts them.
//   Micro-batches: at most 2 pp are traced (the allocator's state repeats once the schedule is in its
//   steady phase), except under GPipe, which holds them all.
// Range of validity: PyTorch-based trainers (Megatron-LM, NeMo, torchtitan, FSDP) with Adam.
#pragma once

#include "model/model_spec.h"
#include "train/caching_allocator.h"
#include "train/layer_costs.h"
#include "train/plan.h"

namespace orrery::train {

struct MemoryConstants;

struct AllocatorEstimate {
  Bytes peak_allocated;
  Bytes peak_reserved;
  Bytes overhead() const { return peak_reserved - peak_allocated; }
};

// The allocator's peaks for one rank of pipeline stage `stage` over two steps under plan.allocator.
// REQUIRES: a valid plan; costs from model_costs() for it.
AllocatorEstimate allocator_estimate(const model::ModelSpec& model, const Plan& plan, const ModelCosts& costs,
                                     int64_t stage, const MemoryConstants& k);

}  // namespace orrery::train
