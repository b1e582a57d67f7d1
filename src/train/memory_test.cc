#include "train/memory.h"

#include <algorithm>
#include <tuple>

#include <gtest/gtest.h>

#include "train/test_support.h"

#include "compute/compute_model.h"
#include "train/comm_model.h"
#include "train/layer_costs.h"
#include "train/schedule.h"

namespace orrery::train {
namespace {

using testing::NoComm;
using testing::test_gpu;

// ZeRO, Rajbhandari et al. 2020, Fig. 1: Psi = 7.5B parameters, N_d = 64, K = 12, fp16 gradients:
// baseline (2 + 2 + K) Psi = 120 GB; P_os 2 Psi + 2 Psi + K Psi / N_d = 31.4 GB;
// P_os+g 2 Psi + (2 + K) Psi / N_d = 16.6 GB; P_os+g+p (2 + 2 + K) Psi / N_d = 1.875 GB.
TEST(Memory, ZeroModelStatesMatchTheZeroPaper) {
  const int64_t psi = 7'500'000'000;
  Plan p;
  p.dp = 64;
  p.grad_bytes = 2;
  auto gb = [&](Sharding s) {
    p.sharding = s;
    const MemoryBreakdown m = model_state_memory(psi, p);
    return (m.weights + m.gradients + m.optimizer).to_gb();
  };
  EXPECT_NEAR(gb(Sharding::kNone), 120.0, 1e-6);
  EXPECT_NEAR(gb(Sharding::kZero1), 30.0 + 90.0 / 64.0, 1e-6);   // 31.41 GB
  EXPECT_NEAR(gb(Sharding::kZero2), 15.0 + 105.0 / 64.0, 1e-6);  // 16.64 GB
  EXPECT_NEAR(gb(Sharding::kZero3), 120.0 / 64.0, 1e-6);         // 1.875 GB
  p.optimizer_offload = true;
  p.sharding = Sharding::kZero1;
  EXPECT_EQ(model_state_memory(psi, p).optimizer.count(), 0);
  // A share of the optimizer on the host (Megatron's --optimizer-offload-fraction) keeps the rest:
  // 0.25 on the host leaves 0.75 x 12 Psi / 64 = 1.0547 GB; weights and gradients do not move.
  p.optimizer_offload_fraction = 0.25;
  const MemoryBreakdown m = model_state_memory(psi, p);
  EXPECT_NEAR(m.optimizer.to_gb(), 0.75 * 90.0 / 64.0, 1e-6);
  EXPECT_NEAR((m.weights + m.gradients).to_gb(), 30.0, 1e-6);
}

// Routed experts under expert parallelism: each expert's parameters live on the ranks of one EP group,
// so their replicas, over which ZeRO shards them, are the expert-data-parallel group: dp x cp / ep ranks
// (Megatron-Core's expert_data_parallel group). dp 8, ep 4, P = 10e9 parameters on the rank of which
// E = 8e9 routed: ZeRO-1 keeps 12 (P - E) / 8 + 12 E / 2 = 3 + 48 = 51 GB of optimizer states (not
// 12 P / 8 = 15 GB, which shards the experts twice); ZeRO-3 shards weights and gradients the same way,
// 6 (P - E) / 8 + 6 E / 2 = 25.5 GB. With ep = dp the experts are not sharded at all (one replica each).
TEST(Memory, RoutedExpertsShardOverTheExpertDataParallelRanks) {
  Plan p;
  p.dp = 8;
  p.ep = 4;
  p.sharding = Sharding::kZero1;
  const int64_t params = 10'000'000'000, experts = 8'000'000'000;
  EXPECT_EQ(p.expert_shard_size(), 2);
  EXPECT_NEAR(model_state_memory(params, p, {}, experts).optimizer.to_gb(), 51.0, 1e-6);
  EXPECT_NEAR(p.local_optimizer_params(params, experts), 2e9 / 8 + 8e9 / 2, 1.0);
  p.sharding = Sharding::kZero3;
  const MemoryBreakdown z3 = model_state_memory(params, p, {}, experts);
  EXPECT_NEAR((z3.weights + z3.gradients).to_gb(), 25.5, 1e-6);
  p.ep = 8;
  EXPECT_EQ(p.expert_shard_size(), 1);
  EXPECT_NEAR(model_state_memory(params, p, {}, experts).optimizer.to_gb(), 12.0 * 2.0 / 8.0 + 12.0 * 8.0, 1e-6);
  p.sharding = Sharding::kNone;
  EXPECT_NEAR(model_state_memory(params, p, {}, experts).optimizer.to_gb(), 120.0, 1e-6);
}

// Each communicator a rank uses holds NCCL's buffers (MemoryConstants::nccl_per_group, per group of more
// than one rank). An MoE plan on dp 8: ep 4 uses the DP, the EP and the expert-data-parallel
// communicator (8 / 4 = 2 ranks): 3 of them; ep 8 leaves each expert on one rank (no expert-data-
// parallel group): 2; dense (ep 1) only the DP one.
TEST(Memory, EachCommunicatorHoldsItsNcclBuffers) {
  const model::ModelSpec model = testing::small_moe(4, 1024);
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  const NoComm comm;
  const MemoryConstants k;
  Plan p;
  p.dp = 8;
  p.gbs = 8;
  p.seq = 1024;
  for (const auto& [ep, communicators] : {std::pair{1, 1}, std::pair{4, 3}, std::pair{8, 2}}) {
    p.ep = ep;
    const MemoryReport r = memory_model(model, p, model_costs(model, p, cm, comm), gpu);
    EXPECT_EQ(r.stages[0].memory.communication, k.nccl_per_group * communicators) << "ep " << ep;
  }
}

// The optimizer's states as Plan::optimizer_dtype and Plan::master_weights set them, sharded over dp 8
// (ZeRO-1, Megatron's distributed optimizer), Psi = 8e9: fp32 master + fp32 moments 12 Psi / 8 = 12 GB;
// NeMo's distributed Adam at dtype bf16 (bf16 moments, no master) 4 Psi / 8 = 4 GB; Apex's remainders
// with fp32 moments 10 Psi / 8 = 10 GB. Weights and gradients do not change.
TEST(Memory, OptimizerStatesFollowTheirDtypeAndMasterCopy) {
  const int64_t psi = 8'000'000'000;
  Plan p;
  p.dp = 8;
  p.sharding = Sharding::kZero1;
  EXPECT_NEAR(model_state_memory(psi, p).optimizer.to_gb(), 12.0, 1e-9);
  p.optimizer_dtype = hw::DType::kBf16;
  p.master_weights = MasterWeights::kNone;
  const MemoryBreakdown m = model_state_memory(psi, p);
  EXPECT_NEAR(m.optimizer.to_gb(), 4.0, 1e-9);
  EXPECT_NEAR(m.weights.to_gb(), 16.0, 1e-9);
  EXPECT_NEAR(m.gradients.to_gb(), 32.0, 1e-9);
  p.optimizer_dtype = hw::DType::kFp32;
  p.master_weights = MasterWeights::kRemainders;
  EXPECT_NEAR(model_state_memory(psi, p).optimizer.to_gb(), 10.0, 1e-9);
}

TEST(Memory, HsdpShardsOverTheShardGroupOnly) {
  Plan p;
  p.dp = 64;
  p.sharding = Sharding::kZero3;
  p.shard_group = 8;
  // 16 bytes/param with fp32 gradients (2 + 4 + 12) / 8.
  const MemoryBreakdown m = model_state_memory(8'000'000'000, p);
  EXPECT_NEAR((m.weights + m.gradients + m.optimizer).to_gb(), 8.0 * 18.0 / 8.0, 1e-6);
}

// GPT layer of Korthikanti et al. 2022 (Sec. 4.1, Table 2), 2-byte activations, dropout everywhere,
// no FlashAttention: per layer s*b*h*(34 + 5 a s / h) bytes; with TP t: s b h (10 + 24/t + 5 a s/(h t));
// with TP and SP: s b h (34/t + 5 a s/(h t)); selective with SP: 34 s b h / t; full: 2 s b h.
TEST(Memory, ActivationsPerLayerFollowKorthikanti) {
  const auto model = model::ModelSpec::gpt({4, 4096, 32, 32, 16384, 51200, 2048});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  const NoComm comm;
  const double s = 2048, b = 2, h = 4096, a = 32, t = 8;
  Plan p;
  p.tp = 8;
  p.mbs = 2;
  p.seq = 2048;
  p.gbs = 2;
  p.flash_attention = false;
  p.precision = hw::DType::kFp16;
  {
    const ModelCosts c = model_costs(model, p, cm, comm);
    EXPECT_NEAR(c.layer[1].act_none.to_double(), s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 64.0);
  }
  p.sp = true;
  {
    const ModelCosts c = model_costs(model, p, cm, comm);
    EXPECT_NEAR(c.layer[1].act_none.to_double(), s * b * h * (34 / t + 5 * a * s / (h * t)), 64.0);
    EXPECT_NEAR(c.layer[1].act_selective.to_double(), 34 * s * b * h / t, 64.0);
    EXPECT_NEAR(c.layer[1].act_input.to_double(), 2 * s * b * h / t, 1.0);
  }
}

// torchtitan's op-level SAC on a Llama layer (GQA, SwiGLU), TP 1, bf16 (2 B), T = b*s tokens. The
// matmuls in torchtitan's order wq wk wv wo w1 w3 w2: outputs of wq (q = a*dh), wv (v = g*dh), w1 (f)
// and w2 (h) saved; wk, wo, w3 recomputed. Saved per layer: the block input (h), those four outputs,
// the attention output (a*dh) and its fp32 log-sum-exp (a per token):
//   T * (2 (h + a dh + g dh + f + h + a dh) + 4 a) bytes.
// Recomputed matmul FLOPs: 2 T (h g dh [wk] + a dh h [wo] + h f [w3]).
TEST(Memory, OpLevelSacKeepsEveryOtherMatmulOutputAndTheAttentionOutput) {
  const double h = 4096, a = 32, g = 8, dh = 128, f = 14336, b = 2, seq = 1024, T = b * seq;
  const auto model = model::ModelSpec::llama({2, 4096, 32, 8, 14336, 128256, 8192});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  const NoComm comm;
  Plan p;
  p.mbs = 2;
  p.seq = 1024;
  p.gbs = 2;
  p.recompute = Recompute::kSelectiveOp;
  const ModelCosts c = model_costs(model, p, cm, comm);
  const LayerCost& l = c.layer[1];
  EXPECT_NEAR(l.act_op.to_double(), T * (2.0 * (h + a * dh + g * dh + f + h + a * dh) + 4.0 * a), 1.0);
  EXPECT_EQ(l.saved_activations(Recompute::kSelectiveOp), l.act_op);
  EXPECT_LT(l.act_op, l.act_selective);  // it saves less than Korthikanti's selective recompute
  EXPECT_NEAR(l.recompute_op_flops.count(), 2.0 * T * (h * g * dh + a * dh * h + h * f), 1.0);
  EXPECT_EQ(l.partial_recompute_flops(Recompute::kSelectiveOp), l.recompute_op_flops);
  // Its recompute time covers those matmuls and every memory-bound op, but not the attention core.
  EXPECT_GT(l.recompute_op, Time::zero());
  EXPECT_LT(l.recompute_op, l.recompute_full);
  EXPECT_EQ(l.partial_recompute(Recompute::kNone), Time::zero());
  EXPECT_EQ(l.partial_recompute(Recompute::kSelective), l.recompute_selective);
}

TEST(Memory, InflightMicrobatchesFollowTheSchedule) {
  Plan p;
  p.pp = 4;
  p.dp = 1;
  p.gbs = 8;  // m = 8
  p.schedule = Schedule::kGpipe;
  EXPECT_EQ(inflight_microbatches(p, 0), 8.0);
  p.schedule = Schedule::kOneFOneB;
  EXPECT_EQ(inflight_microbatches(p, 0), 4.0);  // min(p - 0, m)
  EXPECT_EQ(inflight_microbatches(p, 3), 1.0);
  p.schedule = Schedule::kZeroBubble;
  EXPECT_EQ(inflight_microbatches(p, 3), 4.0);  // 1 in flight + 3 awaiting W (W of j after B of j + 3)
  p.schedule = Schedule::kInterleaved;
  p.vp = 2;
  // Korthikanti Sec. 4.2.3: stage 0 holds p (1 + (p-1)/(p v)) micro-batches' worth = 4 * (1 + 3/8) = 5.5.
  EXPECT_DOUBLE_EQ(inflight_microbatches(p, 0), 4.0 * (1.0 + 3.0 / 8.0));
  // Larger micro-batch groups warm up longer (Megatron: 2 (p - s - 1) + (v - 1) n forwards before the
  // first backward, plus the one in flight): m = 10, n = 6, stage 0 holds min(6 + 6 + 1, 20) = 13 chunk
  // passes, 6.5 micro-batches' worth; stage 3 min(0 + 6 + 1, 20) = 7, 3.5.
  p.gbs = 10;
  p.microbatch_group = 6;
  EXPECT_DOUBLE_EQ(inflight_microbatches(p, 0), 6.5);
  EXPECT_DOUBLE_EQ(inflight_microbatches(p, 3), 3.5);
  // ZB-V (train/schedule.h): rank s has run 2(p - s) - 1 + s forwards of chunk 0 and s of chunk 1 when
  // its first F1 B1 W1 group starts, so it holds 2p - s - 1 + s + 1 = 2p chunk passes at that F1, p
  // micro-batches' worth of a whole stage on every rank (Qi et al. 2024: ZB-V's activation memory is
  // 1F1B's). With m = 2 < 2p - 1 the order keeps micro-batches 0 and 1: stage 0 runs F0.0 F0.1 and
  // holds both before chunk 1 starts (F1.0, 3 chunk passes: then B1.0 W1.0 free one), 1.5 in all.
  p.microbatch_group = 0;
  p.schedule = Schedule::kZeroBubbleV;
  p.vp = 2;
  for (int64_t m : {8, 9, 64}) {
    p.gbs = m;
    for (int64_t s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(inflight_microbatches(p, s), 4.0) << "m " << m << " stage " << s;
  }
  p.gbs = 2;
  EXPECT_DOUBLE_EQ(inflight_microbatches(p, 0), 1.5);
  // DualPipeV (train/schedule.h, m >= 2p): rank s runs 2(p - s - 1) + 2(s + 1) = 2p forwards before
  // its first backward; each B1 W1 F1 of its third step frees one and adds one. Run back to back
  // (overlap_f_b off), the first steady pair starts with a forward (2p + 1 held) and then frees one in
  // its whole backward, and every later pair returns there: 2p + 1 chunk passes, p + 1/2 micro-batches'
  // worth on every rank. Overlapped, a pair swaps the backward's chunk for the forward's (memory.cc): 2p,
  // except on the last rank, whose first F0 and B1 run apart: 2p + 1 there.
  p.schedule = Schedule::kDualPipeV;
  for (bool overlap : {false, true}) {
    p.overlap_f_b = overlap;
    for (int64_t m : {8, 9, 64}) {
      p.gbs = m;
      for (int64_t s = 0; s < 4; ++s) {
        EXPECT_DOUBLE_EQ(inflight_microbatches(p, s), overlap && s < 3 ? 4.0 : 4.5) << "m " << m << " stage " << s;
      }
    }
  }
  // Megatron-Core's combined 1F1B with one stage: F0, then (F i+1 & B i): each pair swaps one micro-batch
  // for the next, so one is held, as without it.
  Plan one;
  one.ep = 2;
  one.dp = 2;
  one.gbs = 16;
  one.ep_a2a_overlap = true;
  EXPECT_DOUBLE_EQ(inflight_microbatches(one, 0), 1.0);
}

TEST(Memory, PeakIsOnTheFirstStageFor1F1BAndFitVerdictUsesCapacity) {
  const auto model = model::ModelSpec::gpt({8, 4096, 32, 32, 16384, 51200, 2048});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  const NoComm comm;
  Plan p;
  p.pp = 4;
  p.gbs = 8;
  p.seq = 2048;
  p.precision = hw::DType::kFp16;
  const ModelCosts c = model_costs(model, p, cm, comm);
  const MemoryReport r = memory_model(model, p, c, gpu);
  ASSERT_EQ(r.stages.size(), 4u);
  // Stage 0 holds 4 micro-batches of 2 layers, stage 2 holds 2: activations differ by exactly 2x.
  EXPECT_NEAR(r.stages[0].memory.activations.to_double() - c.pre.act_none.to_double() * 4,
              2.0 * r.stages[2].memory.activations.to_double(), 64.0);
  EXPECT_EQ(r.fits, r.peak <= gpu.memory);
  EXPECT_EQ(r.peak_rank, r.peak_stage * 1);  // pp stride = tp*cp*dp = 1
  Bytes sum;
  for (const LayerMemory& l : r.peak_layers) sum += l.activations;
  EXPECT_GT(sum.count(), 0);
}

// GPT, 8 layers on pp 2 (4 per stage), 1F1B with m = 8 micro-batches of seq 2048 in fp16: the offload
// tests' model and plan, with A one layer's saved activations per micro-batch and E the embedding output.
struct OffloadCase {
  model::ModelSpec model = model::ModelSpec::gpt({8, 4096, 32, 32, 16384, 51200, 2048});
  hw::GpuSpec gpu = test_gpu();
  compute::ComputeModel cm{gpu};
  Plan p = [] {
    Plan q;
    q.pp = 2;
    q.gbs = 8;
    q.seq = 2048;
    q.precision = hw::DType::kFp16;
    return q;
  }();
  ModelCosts c = model_costs(model, p, cm, NoComm{});
  double a = c.layer[0].act_none.to_double();
  double e = c.pre.act_none.to_double();
};

// Activation offload of the first K layers of each rank (Plan::offload_layers, Megatron's
// --cpu-offloading-num-layers). GPT, 8 layers on pp 2 (4 per stage), 1F1B with m = 8: stage 0 holds
// 2 micro-batches, stage 1 one. With A one layer's saved activations per micro-batch and E the
// embedding output (stage 0 only), the offloaded layers keep min(in flight, 2 / K) micro-batches of
// their K layers (two layers' buffers) and the others stay as without offload:
//   none:         stage 0 = 2 (4A + E)
//   all (-1):     stage 0 = (4A + E) x min(2, 2/4) = (4A + E) / 2  (the embedding output goes too)
//   K = 2:        stage 0 = 2 (2A + E) + 2A x min(2, 1) = 6A + 2E;  stage 1 = 2A + 2A x min(1, 1): unchanged
//   K = 3:        stage 0 = 2 (A + E) + 3A x min(2, 2/3) = 4A + 2E
// By layer (the peak stage, 0): K = 2 holds A on each of layers 0-1 and 2A on layers 2-3. With full
// recompute on the first 2 layers instead, those hold 2 x their input and layers 2-3 2A.
TEST(Memory, OffloadingTheFirstLayersKeepsTwoOfThemInFlight) {
  const OffloadCase oc;
  const auto& [model, gpu, cm, p, c, a, e] = oc;
  ASSERT_GT(e, 0.0);
  auto act = [&](const Plan& q, size_t stage) { return memory_model(model, q, c, gpu).stages[stage].memory.activations.to_double(); };
  const double none0 = act(p, 0), none1 = act(p, 1);
  EXPECT_NEAR(none0, 2.0 * (4.0 * a + e), 64.0);
  Plan q = p;
  q.activation_offload = true;
  EXPECT_NEAR(act(q, 0), (4.0 * a + e) / 2.0, 64.0);
  q.offload_layers = 2;
  EXPECT_NEAR(act(q, 0), 6.0 * a + 2.0 * e, 64.0);
  EXPECT_NEAR(act(q, 1), none1, 64.0);
  const MemoryReport r = memory_model(model, q, c, gpu);
  ASSERT_EQ(r.peak_stage, 0);
  ASSERT_EQ(r.peak_layers.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(r.peak_layers[i].activations.to_double(), i < 2 ? a : 2.0 * a, 64.0) << i;
  q.offload_layers = 3;
  EXPECT_NEAR(act(q, 0), 4.0 * a + 2.0 * e, 64.0);
  Plan rc = p;
  rc.recompute = Recompute::kFull;
  rc.recompute_layers = 2;
  const MemoryReport rr = memory_model(model, rc, c, gpu);
  ASSERT_EQ(rr.peak_layers.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(rr.peak_layers[i].activations.to_double(), 2.0 * (i < 2 ? c.layer[0].act_input.to_double() : a), 64.0) << i;
  }
}

// Host memory of the offloads (StageMemory::host), on the model and plan above. Activations: every
// in-flight micro-batch's offloaded layers, K = 2 on stage 0 (2 in flight) = 2 x 2A = 4A, and all of
// stage 0's (-1, the embedding output too) 2 (4A + E). Optimizer, a share F = 0.25 on the host, no
// sharding: F x the optimizer's 12 bytes (fp32 master and moments) plus the 4-byte gradient copied down
// per parameter of the stage, 0.25 x 16 P. The peak is the larger stage's; a capacity below it does
// not fit (host_fits, and so fits), one above it does.
TEST(Memory, OffloadsHoldHostMemoryForTheirInFlightActivationsAndOptimizerShare) {
  const OffloadCase oc;
  const auto& [model, gpu, cm, p, c, a, e] = oc;
  EXPECT_EQ(memory_model(model, p, c, gpu).host_peak.count(), 0);
  Plan q = p;
  q.activation_offload = true;
  q.offload_layers = 2;
  EXPECT_NEAR(memory_model(model, q, c, gpu).stages[0].host.to_double(), 4.0 * a, 64.0);
  q.offload_layers = -1;
  EXPECT_NEAR(memory_model(model, q, c, gpu).stages[0].host.to_double(), 2.0 * (4.0 * a + e), 64.0);
  Plan o = p;
  o.optimizer_offload = true;
  o.optimizer_offload_fraction = 0.25;
  const MemoryReport r = memory_model(model, o, c, gpu);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_NEAR(r.stages[s].host.to_double(), 0.25 * 16.0 * static_cast<double>(r.stages[s].params), 64.0) << s;
  }
  const Bytes host = std::max(r.stages[0].host, r.stages[1].host);
  EXPECT_EQ(r.host_peak, host);
  EXPECT_TRUE(r.host_fits);  // capacity unknown
  const MemoryReport tight = memory_model(model, o, c, gpu, {}, host - Bytes(1));
  EXPECT_FALSE(tight.host_fits);
  EXPECT_FALSE(tight.fits);
  const MemoryReport room = memory_model(model, o, c, gpu, {}, host);
  EXPECT_TRUE(room.host_fits);
  EXPECT_EQ(room.fits, room.peak <= room.capacity);
}

// The loss's backward on the last stage, beside the saved fp32 softmax: Megatron's in-place
// vocab_parallel_cross_entropy adds only the bf16 logits gradient (2 b s V / tp bytes); PyTorch's eager
// F.cross_entropy holds nll_loss's fp32 gradient and log_softmax's fp32 input gradient (8 b s V / tp).
// Only the last stage's temporary differs, by 6 b s V / tp; stage 0 is unchanged.
TEST(Memory, EagerCrossEntropyHoldsTwoFp32LogitGradientsInItsBackward) {
  const auto model = model::ModelSpec::llama({4, 1024, 8, 8, 4096, 128256, 4096});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  const NoComm comm;
  Plan p;
  p.pp = 2;
  p.tp = 2;
  p.mbs = 2;
  p.seq = 2048;
  p.gbs = 8;
  const ModelCosts fused_costs = model_costs(model, p, cm, comm);
  const MemoryReport fused = memory_model(model, p, fused_costs, gpu);
  p.eager = true;
  const ModelCosts eager_costs = model_costs(model, p, cm, comm);
  const MemoryReport eager = memory_model(model, p, eager_costs, gpu);
  const double logits = 2.0 * 2048 * 128256 / 2.0;  // b s V / tp
  const Bytes fused_layers = fused.stages[1].memory.temporary - Bytes::from_double(2.0 * logits);
  const Bytes eager_layers = eager.stages[1].memory.temporary - Bytes::from_double(8.0 * logits);
  // What remains is one layer's backward working set: stage 0's temporary (same layers, no loss).
  EXPECT_NEAR(fused_layers.to_double(), fused.stages[0].memory.temporary.to_double(), 1.0);
  EXPECT_NEAR(eager_layers.to_double(), eager.stages[0].memory.temporary.to_double(), 1.0);
  EXPECT_EQ(fused.stages[0].memory.temporary, eager.stages[0].memory.temporary);
}

// A Llama-like model of 4 layers (h 1024) on dp 8 x `pp` stages, seq 2048, gbs 16, under `sharding`,
// with its costs.
struct ShardedDp8 {
  model::ModelSpec model = model::ModelSpec::llama({4, 1024, 8, 8, 4096, 32000, 2048});
  hw::GpuSpec gpu = test_gpu();
  Plan plan;
  ModelCosts costs;
};
ShardedDp8 sharded_dp8(Sharding sharding, int64_t pp) {
  ShardedDp8 r;
  r.plan.dp = 8;
  r.plan.pp = pp;
  r.plan.sharding = sharding;
  r.plan.seq = 2048;
  r.plan.gbs = 16;
  r.costs = model_costs(r.model, r.plan, compute::ComputeModel(r.gpu), NoComm{});
  return r;
}

// FSDP's root unit (memory.h): the embedding and the LM head stay gathered through the step (bf16, 2
// bytes per parameter) and the head's unsharded gradient (2 bytes) is held until the backward ends. With
// dp 8, one stage of 4 layers and one layer prefetched:
//   weights   = 2 layers x P_layer x 2 + (P_embedding + P_head) x 2
//   gradients = P_stage x 4 / 8 + P_layer x 4 + P_head x 2
TEST(Memory, Zero3RootUnitStaysGatheredWithTheHeadGradient) {
  const ShardedDp8 x = sharded_dp8(Sharding::kZero3, 1);
  const auto& model = x.model;
  const hw::GpuSpec& gpu = x.gpu;
  Plan p = x.plan;
  const ModelCosts& c = x.costs;
  const MemoryReport m = memory_model(model, p, c, gpu);
  const double layer = static_cast<double>(c.layer[0].params);
  const double emb = static_cast<double>(c.pre.params), head = static_cast<double>(c.post.params);
  ASSERT_GT(emb, 0.0);
  ASSERT_GT(head, 0.0);
  const double stage = 4 * layer + emb + head;
  EXPECT_NEAR(m.stages[0].memory.weights.to_double(), 2 * layer * 2 + (emb + head) * 2, 1.0);
  EXPECT_NEAR(m.stages[0].memory.gradients.to_double(), stage * 4 / 8 + layer * 4 + head * 2, 1.0);
  // Without a separate master (none, or Apex's remainders) FSDP's shard is the 16-bit weight itself:
  // 2 B per local parameter / 8 under weights, beside the gathered layers and the root unit.
  p.master_weights = MasterWeights::kRemainders;
  const MemoryReport r = memory_model(model, p, c, gpu);
  EXPECT_NEAR(r.stages[0].memory.weights.to_double(), 2 * layer * 2 + (emb + head) * 2 + stage * 2 / 8, 1.0);
  EXPECT_NEAR(r.stages[0].memory.optimizer.to_double(), stage * (2 + 8) / 8, 1.0);
}

// FSDP under pipeline parallelism (Plan::fsdp_keeps_gathered, PyTorch's pipelining): every layer of the
// stage stays gathered and its gradients accumulate unsharded in fp32, with one layer's bf16 gradient
// before it is added in; the shard is the fp32 master with Adam's moments. dp 8, pp 2 (stage 0: 2
// layers and the embedding; stage 1: 2 layers and the head):
//   weights = P_stage x 2;  gradients = P_stage x 4 + P_layer x 2;  optimizer = P_stage x (4 + 8) / 8
// against ZeRO-3 at pp 1 above, which gathers 2 layers and shards the gradients.
TEST(Memory, FsdpUnderPipelineKeepsLayersGatheredAndGradientsUnsharded) {
  const ShardedDp8 x = sharded_dp8(Sharding::kZero3, 2);
  ASSERT_TRUE(x.plan.fsdp_keeps_gathered());
  Plan p = x.plan;
  const ModelCosts& c = x.costs;
  const MemoryReport m = memory_model(x.model, p, c, x.gpu);
  const double layer = static_cast<double>(c.layer[0].params);
  const double stage0 = 2 * layer + static_cast<double>(c.pre.params);
  const double stage1 = 2 * layer + static_cast<double>(c.post.params);
  for (const auto& [s, params] : {std::pair{0, stage0}, std::pair{1, stage1}}) {
    const MemoryBreakdown& mb = m.stages[static_cast<size_t>(s)].memory;
    EXPECT_NEAR(mb.weights.to_double(), params * 2, 1.0) << s;
    EXPECT_NEAR(mb.gradients.to_double(), params * 4 + layer * 2, 1.0) << s;
    EXPECT_NEAR(mb.optimizer.to_double(), params * 12 / 8, 1.0) << s;
  }
  // bf16 gradients accumulate in place (no second copy); without a master the shard is the bf16 weight.
  p.grad_bytes = 2;
  p.master_weights = MasterWeights::kRemainders;
  const MemoryReport r = memory_model(x.model, p, c, x.gpu);
  EXPECT_NEAR(r.stages[0].memory.gradients.to_double(), stage0 * 2, 1.0);
  EXPECT_NEAR(r.stages[0].memory.weights.to_double(), stage0 * 2 + stage0 * 2 / 8, 1.0);
  // Keeping chosen layers gathered means nothing here: the plan names the conflict.
  p.unsharded_layers = 1;
  EXPECT_TRUE(testing::has_key(validate_plan(x.model, p, 16, x.gpu), "unsharded_layers"));
}

// ZeRO-2 (memory.h): the gradients sharded over dp, plus the unsharded gradient of the layer whose
// reduce-scatter is pending (it reduces layer by layer after every micro-batch's backward: simulator.cc).
// dp 8, pp 2 (stage 0: 2 layers and the embedding; stage 1: 2 layers and the head), fp32 gradients:
//   gradients = P_stage x 4 / 8 + P_layer x 4;   weights = P_stage x 2 (whole, unlike ZeRO-3)
TEST(Memory, Zero2HoldsItsShardAndTheLayerBeingReduced) {
  const ShardedDp8 x = sharded_dp8(Sharding::kZero2, 2);
  const auto& model = x.model;
  const hw::GpuSpec& gpu = x.gpu;
  Plan p = x.plan;
  const ModelCosts& c = x.costs;
  const compute::ComputeModel cm(gpu);
  const NoComm comm;
  const MemoryReport m = memory_model(model, p, c, gpu);
  const double layer = static_cast<double>(c.layer[0].params);
  const double stage0 = 2 * layer + static_cast<double>(c.pre.params);
  EXPECT_NEAR(m.stages[0].memory.gradients.to_double(), stage0 * 4 / 8 + layer * 4, 1.0);
  EXPECT_NEAR(m.stages[0].memory.weights.to_double(), stage0 * 2, 1.0);
  // On one rank nothing is sharded and nothing waits to be reduced.
  p.dp = 1;
  p.gbs = 2;
  const MemoryReport one = memory_model(model, p, model_costs(model, p, cm, comm), gpu);
  EXPECT_NEAR(one.stages[0].memory.gradients.to_double(), stage0 * 4, 1.0);
  // An MoE on dp 2 with ep 2: the routed experts' expert-data-parallel group has one rank, so their
  // gradients are whole and none of theirs waits; the dense ones are halved and a layer's wait:
  //   gradients = (P_dense / 2 + P_experts) x 4 + P_layer_dense x 4   (pp 1: every layer and the edges)
  const model::ModelSpec moe = testing::small_moe(2, 2048);
  Plan q;
  q.dp = 2;
  q.ep = 2;
  q.sharding = Sharding::kZero2;
  q.seq = 2048;
  q.gbs = 2;
  const ModelCosts mc = model_costs(moe, q, cm, comm);
  double dense = static_cast<double>(mc.pre.params + mc.post.params), experts = 0.0, layer_dense = 0.0;
  for (const LayerCost& l : mc.layer) {
    dense += static_cast<double>(l.params - l.expert_params);
    experts += static_cast<double>(l.expert_params);
    layer_dense = std::max(layer_dense, static_cast<double>(l.params - l.expert_params));
  }
  ASSERT_GT(experts, 0.0);
  const MemoryReport mm = memory_model(moe, q, mc, gpu);
  EXPECT_NEAR(mm.stages[0].memory.gradients.to_double(), (dense / 2 + experts) * 4 + layer_dense * 4, 1.0);
}

}  // namespace
}  // namespace orrery::train

namespace orrery::train {
namespace {

// The most activations stage s holds over its program order (train/schedule.h): a chunk's are added
// when its forward runs and removed when its backward does (its W pass, where the backward is split);
// an overlapped pair's forward adds its chunk only once the pair's backward has freed its own (the
// layer-by-layer swap, memory.cc).
double order_peak(const Plan& p, int64_t s, const StageMemory& st) {
  double held = 0.0, most = 0.0;
  const std::vector<PipelinePass> order = pipeline_order(p, s);
  std::vector<double> swaps;  // paired forwards' chunks waiting for their backward
  for (const PipelinePass& pass : order) {
    if (pass.kind == (p.splits_backward() ? PassKind::kBackward : PassKind::kWeight)) continue;
    const double a = st.chunk_activations[static_cast<size_t>(pass.chunk)].to_double();
    if (pass.kind == PassKind::kForward && pass.paired && p.overlaps_pairs()) {
      swaps.push_back(a);
      continue;
    }
    held += pass.kind == PassKind::kForward ? a : -a;
    most = std::max(most, held);
    if (pass.kind != PassKind::kForward && pass.paired && !swaps.empty()) {
      held += swaps.back();
      swaps.pop_back();
      most = std::max(most, held);
    }
  }
  return most;
}

// The interleaved peak, by definition: walk the stage's program order (train/schedule.h), adding a
// chunk's activations when its forward runs and removing them when its backward does, and keep the most.
// The memory model's O(n v) walk (memory.cc, interleaved_peak_held) must agree on every stage, with
// whole and partial micro-batch groups, uneven end chunks (the first holds the embedding alone) and
// the loss on the last chunk.
TEST(Memory, InterleavedPeakFollowsTheProgramOrder) {
  const model::ModelSpec model = model::ModelSpec::llama({24, 1024, 8, 8, 4096, 32000, 2048});
  const hw::GpuSpec gpu = test_gpu();
  struct Case {
    int64_t p, v, m, n, first;
  };
  // n 0: the default, pp. Megatron's rule holds in each: pp <= n <= m, the last group 0 or at least pp.
  for (const Case& x : {Case{4, 2, 8, 0, -1}, Case{4, 3, 12, 0, -1}, Case{2, 2, 5, 3, -1}, Case{4, 2, 10, 5, -1},
                        Case{4, 2, 16, 0, 0}, Case{2, 3, 8, 3, -1}, Case{3, 2, 11, 4, -1}, Case{2, 2, 20, 3, -1},
                        Case{4, 2, 40, 6, -1}, Case{4, 3, 64, 0, -1}}) {
    Plan p;
    p.pp = x.p;
    p.vp = x.v;
    p.schedule = Schedule::kInterleaved;
    p.gbs = x.m;
    p.seq = 2048;
    p.microbatch_group = x.n;
    p.first_stage_layers = x.first;
    const ModelCosts c = model_costs(model, p, compute::ComputeModel(gpu), NoComm{});
    // Combined 1F1B (Plan::ep_a2a_overlap) too: its steady pairs swap, which order_peak walks as such.
    for (bool combined : {false, true}) {
      p.ep_a2a_overlap = combined;
      const MemoryReport r = memory_model(model, p, c, gpu);
      for (int64_t s = 0; s < p.pp; ++s) {
        const StageMemory& st = r.stages[static_cast<size_t>(s)];
        EXPECT_NEAR(st.memory.activations.to_double(), order_peak(p, s, st), 1.0)
            << "p " << x.p << " v " << x.v << " m " << x.m << " n " << x.n << " stage " << s << " combined " << combined;
      }
    }
  }
}

// ZB-V the same way, a chunk's activations held from its forward to its W pass, over the whole order:
// the memory model walks only min(m, 2p) micro-batches (memory.cc, v_peak_held), which must not
// matter. Rank 0 runs both ends of the V: the embedding's output in chunk 0, the head's input and the
// loss's fp32 softmax in chunk 1, and the head's parameters; the last rank neither. DualPipeV (same
// placement, its own order; m >= 2p) likewise.
TEST(Memory, ZeroBubbleVPeakFollowsTheProgramOrder) {
  const model::ModelSpec model = model::ModelSpec::llama({24, 1024, 8, 8, 4096, 32000, 2048});
  const hw::GpuSpec gpu = test_gpu();
  for (const auto& [pp, m, first, schedule] :
       {std::tuple<int64_t, int64_t, int64_t, Schedule>{4, 8, -1, Schedule::kZeroBubbleV}, {4, 3, -1, Schedule::kZeroBubbleV},
        {4, 64, -1, Schedule::kZeroBubbleV}, {3, 7, -1, Schedule::kZeroBubbleV}, {2, 40, -1, Schedule::kZeroBubbleV},
        {4, 17, 0, Schedule::kZeroBubbleV}, {6, 96, -1, Schedule::kZeroBubbleV}, {4, 8, -1, Schedule::kDualPipeV},
        {4, 64, -1, Schedule::kDualPipeV}, {3, 7, -1, Schedule::kDualPipeV}, {2, 40, -1, Schedule::kDualPipeV},
        {4, 17, 0, Schedule::kDualPipeV}, {6, 96, -1, Schedule::kDualPipeV}}) {
    Plan p;
    p.pp = pp;
    p.vp = 2;
    p.schedule = schedule;
    p.gbs = m;
    p.seq = 2048;
    p.first_stage_layers = first;
    p.last_stage_layers = first;
    const ModelCosts c = model_costs(model, p, compute::ComputeModel(gpu), NoComm{});
    const MemoryReport r = memory_model(model, p, c, gpu);
    for (int64_t s = 0; s < p.pp; ++s) {
      const StageMemory& st = r.stages[static_cast<size_t>(s)];
      EXPECT_NEAR(st.memory.activations.to_double(), order_peak(p, s, st), 1.0) << "p " << pp << " m " << m << " stage " << s;
      int64_t layer_params = 0;
      for (int64_t ch = 0; ch < 2; ++ch) {
        const LayerRange range = chunk_layers(p, model.layers, s, ch);
        for (int64_t i = 0; i < range.count; ++i) layer_params += c.layer[static_cast<size_t>(range.first + i)].params;
      }
      EXPECT_EQ(st.params, layer_params + (s == 0 ? c.pre.params + c.post.params : 0)) << "stage " << s;
    }
    // Even chunks: rank 0's chunk 1 holds the same layers' worth as rank 1's and the loss's softmax.
    if (first < 0) {
      EXPECT_GT(r.stages[0].chunk_activations[1], r.stages[1].chunk_activations[1]);
    }
  }
}

// The interleaved zero-bubble order (torch's ScheduleInterleavedZeroBubble) the same way, over the
// whole order: the memory model walks 3 n micro-batches (memory.cc, v_peak_held). Counted: rank s
// runs w = (v - 1) n + p - 1 - s warm-up forwards, then each steady step j a forward and, from j = s
// on, a W, so it holds w + s + 1 = (v - 1) n + p chunk-micro-batches (at most m v) whatever s: in
// whole-stage micro-batches ((v - 1) n + p) / v, against the interleaved 1F1B's (2 (p - s - 1) +
// (v - 1) n + 1) / v, more on the last ranks, fewer on the first. n = m / max(1, floor(m / p)).
TEST(Memory, InterleavedZeroBubblePeakFollowsTheProgramOrder) {
  const model::ModelSpec model = model::ModelSpec::llama({24, 1024, 8, 8, 4096, 32000, 2048});
  const hw::GpuSpec gpu = test_gpu();
  struct Case {
    int64_t p, v, m, first;
  };
  for (const Case& x : {Case{4, 2, 8, -1}, Case{4, 3, 12, -1}, Case{2, 2, 6, -1}, Case{4, 2, 10, -1}, Case{4, 2, 3, -1},
                        Case{4, 2, 16, 0}, Case{2, 3, 8, -1}, Case{3, 2, 12, -1}, Case{2, 2, 20, -1}, Case{4, 2, 40, -1},
                        Case{4, 3, 64, -1}, Case{3, 4, 6, -1}}) {
    Plan p;
    p.pp = x.p;
    p.vp = x.v;
    p.schedule = Schedule::kInterleavedZeroBubble;
    p.gbs = x.m;
    p.seq = 2048;
    p.first_stage_layers = x.first;
    p.last_stage_layers = x.first;
    ASSERT_TRUE(validate_plan(model, p, x.p, gpu).empty()) << "p " << x.p << " v " << x.v << " m " << x.m;
    const int64_t n = x.m / std::max<int64_t>(1, x.m / x.p);
    const ModelCosts c = model_costs(model, p, compute::ComputeModel(gpu), NoComm{});
    const MemoryReport r = memory_model(model, p, c, gpu);
    for (int64_t s = 0; s < p.pp; ++s) {
      const StageMemory& st = r.stages[static_cast<size_t>(s)];
      EXPECT_NEAR(st.memory.activations.to_double(), order_peak(p, s, st), 1.0)
          << "p " << x.p << " v " << x.v << " m " << x.m << " stage " << s;
      int64_t held = 0, most = 0;  // chunk passes between a forward and its W, over the whole order
      for (const PipelinePass& pass : pipeline_order(p, s)) {
        if (pass.kind != PassKind::kBackward) held += pass.kind == PassKind::kForward ? 1 : -1;
        most = std::max(most, held);
      }
      EXPECT_EQ(most, std::min((x.v - 1) * n + x.p, x.m * x.v)) << "p " << x.p << " v " << x.v << " m " << x.m << " stage " << s;
      EXPECT_DOUBLE_EQ(st.inflight_microbatches, static_cast<double>(most) / static_cast<double>(x.v))
          << "p " << x.p << " v " << x.v << " m " << x.m << " stage " << s;
    }
  }
}

// Looped BFS runs every forward before the first backward: every chunk holds all m micro-batches.
TEST(Memory, LoopedBfsHoldsEveryMicroBatch) {
  const model::ModelSpec model = model::ModelSpec::llama({24, 1024, 8, 8, 4096, 32000, 2048});
  const hw::GpuSpec gpu = test_gpu();
  Plan p;
  p.pp = 3;
  p.vp = 2;
  p.schedule = Schedule::kLoopedBfs;
  p.gbs = 7;
  p.seq = 2048;
  ASSERT_TRUE(validate_plan(model, p, 3, gpu).empty());
  const ModelCosts c = model_costs(model, p, compute::ComputeModel(gpu), NoComm{});
  const MemoryReport r = memory_model(model, p, c, gpu);
  for (int64_t s = 0; s < p.pp; ++s) {
    const StageMemory& st = r.stages[static_cast<size_t>(s)];
    EXPECT_EQ(st.inflight_microbatches, 7.0);
    EXPECT_NEAR(st.memory.activations.to_double(), order_peak(p, s, st), 1.0) << "stage " << s;
    EXPECT_NEAR(st.memory.activations.to_double(),
                7.0 * (st.chunk_activations[0] + st.chunk_activations[1]).to_double(), 1.0) << "stage " << s;
  }
}

}  // namespace
}  // namespace orrery::train

