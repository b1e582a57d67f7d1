#include "train/allocator_trace.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "compute/compute_model.h"
#include "train/comm_model.h"
#include "train/memory.h"
#include "train/test_support.h"

namespace orrery::train {
namespace {

using testing::NoComm;
using testing::test_gpu;

constexpr double kPage = 20.0 * (1 << 20);  // an expandable segment's large-pool page (kLargeBuffer)

// One GPU, one micro-batch of 4,096 tokens, a 2-layer model with a 128,256-token vocabulary: N =
// 4096 x 128256 logits. The eager loss (allocator_trace.h) leaves the bf16 logits' block (2N bytes)
// behind: log_softmax's output does not fit it, the fp32 copy's block merges with it, nll_loss's
// gradient takes 4N of the 6N, and log_softmax's input gradient (4N) does not fit the 2N left. Every
// other tensor is freed last-in first-out or fits a block of its own size, so the reservation exceeds
// the tensors by 2N, up to the page the segment last grew by.
struct OneGpu {
  model::ModelSpec model = model::ModelSpec::llama({2, 1024, 8, 8, 4096, 128256, 4096});
  hw::GpuSpec gpu = test_gpu();
  compute::ComputeModel cm{gpu};
  NoComm comm;
  Plan plan() const {
    Plan p;
    p.seq = 4096;
    p.mbs = 1;
    p.gbs = 1;
    p.eager = true;
    p.allocator = AllocatorMode::kExpandable;
    return p;
  }
  AllocatorEstimate run(const Plan& p) const {
    return allocator_estimate(model, p, model_costs(model, p, cm, comm), 0, MemoryConstants{});
  }
};

TEST(AllocatorTrace, EagerLossLeavesTheLogitsBlockBehind) {
  const OneGpu g;
  const double logits = 4096.0 * 128256.0;
  const AllocatorEstimate e = g.run(g.plan());
  EXPECT_NEAR(e.overhead().to_double(), 2.0 * logits, kPage);
  EXPECT_GT(e.overhead().to_double(), 2.0 * logits - 1.0);  // the hole itself is never given back
}

// Megatron's fused loss frees the logits after their fp32 softmax and allocates their gradient, of
// the same size, into that block: nothing is left behind beyond the last page.
TEST(AllocatorTrace, FusedLossReusesTheLogitsBlock) {
  const OneGpu g;
  Plan p = g.plan();
  p.eager = false;
  EXPECT_LT(g.run(p).overhead().to_double(), kPage);
}

// With tensor parallelism the logits split over the ranks: the hole is 2N / tp.
TEST(AllocatorTrace, TheLogitsHoleSplitsOverTensorParallelRanks) {
  const OneGpu g;
  Plan p = g.plan();
  p.tp = 2;
  p.sp = true;
  EXPECT_NEAR(g.run(p).overhead().to_double(), 4096.0 * 128256.0, kPage);
}

// Without a caching allocator nothing is reserved beyond the tensors, and the memory model adds no
// allocator share.
TEST(AllocatorTrace, NoneAddsNothing) {
  const OneGpu g;
  Plan p = g.plan();
  p.allocator = AllocatorMode::kNone;
  EXPECT_EQ(g.run(p).overhead().count(), 0);
  const MemoryReport m = memory_model(g.model, p, model_costs(g.model, p, g.cm, g.comm), g.gpu);
  EXPECT_EQ(m.stages[0].memory.allocator.count(), 0);
}

// The memory model adds the trace's overhead to each stage's allocator share, and the peak moves with it.
TEST(AllocatorTrace, MemoryModelAddsTheOverheadToThePeak) {
  const OneGpu g;
  Plan p = g.plan();
  const ModelCosts c = model_costs(g.model, p, g.cm, g.comm);
  const MemoryReport with = memory_model(g.model, p, c, g.gpu);
  p.allocator = AllocatorMode::kNone;
  const MemoryReport without = memory_model(g.model, p, c, g.gpu);
  p.allocator = AllocatorMode::kExpandable;
  const Bytes overhead = allocator_estimate(g.model, p, c, 0, MemoryConstants{}).overhead();
  EXPECT_EQ(with.stages[0].memory.allocator, overhead);
  EXPECT_EQ(with.peak, without.peak + overhead);
}

// Offloading every activation (offload_layers -1) also takes the embedding output and the head's
// input off the GPU, as the memory model counts them, where offloading both layers of the model keeps
// them. The loss's fp32 softmax is at the peak either way (computed in the forward, copied back for the
// backward, where its gradient is made in place), and nothing else differs: the peaks differ by
// exactly those two tensors.
TEST(AllocatorTrace, OffloadingEverythingTakesTheEmbeddingAndHeadInputsOffTheGpu) {
  const OneGpu g;
  Plan layers = g.plan();
  layers.eager = false;
  layers.activation_offload = true;
  layers.offload_layers = 2;
  Plan all = layers;
  all.offload_layers = -1;
  const ModelCosts c = model_costs(g.model, layers, g.cm, g.comm);
  const double softmax = 4.0 * 4096.0 * 128256.0;
  const Bytes expected = c.pre.act_none + Bytes::from_double(c.post.act_none.to_double() - softmax);
  ASSERT_GT(expected.count(), 0);
  EXPECT_EQ(g.run(layers).peak_allocated - g.run(all).peak_allocated, expected);
}

}  // namespace
}  // namespace orrery::train
