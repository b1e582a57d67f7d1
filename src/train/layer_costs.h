// Per-layer costs of a training plan on one rank for one micro-batch: compute times of the forward,
// the backward (input gradient and weight gradient separately, for zero-bubble schedules) and the
// recomputation, the TP/CP/EP communication that sits inside a layer, the activation bytes it saves,
// its parameters and its FLOPs.
//
// Model card
//   What: the op inventory (model/op_inventory.h) of one layer for b = mbs sequences of seq/cp tokens,
//     split over the tensor-parallel ranks as Megatron-LM does (Shoeybi et al. 2019; Korthikanti et
//     al. 2022, arXiv 2205.05198, Sec. 3-4):
//       column-parallel GEMMs (qkv, q, q_b, kv_b, up/up_gate, lm_head): n / tp
//       row-parallel GEMMs (out, down): k / tp
//       replicated GEMMs (MLA down projections q_a, kv_a, MoE router, shared gate): full
//       ops inside the TP region (attention core, RoPE, activation, MoE permute/combine, loss): / tp
//       ops outside it (norms, dropouts, residual adds): / tp only with sequence parallelism
//     Routed experts: E/ep experts per rank, each with ep x (tokens top_k / E) x f rows, f = the
//     capacity factor when set, else the load-imbalance factor (the busiest rank sets the pace).
//     Times: compute::ComputeModel per kernel (GEMM: forward, dgrad m x k x n, wgrad k x n x m;
//     attention: fused kernel by sequence, with the causal work of seq/cp queries under load-balanced
//     ring attention; without FlashAttention, the materialized scores add their memory traffic;
//     memory-bound ops by bytes, backward twice the forward's unless the op states its own
//     traffic, as the cross-entropy does).
//     TP collectives per layer and pass: 2 all-reduces of b*s/cp*h (no SP) or 2 all-gathers + 2
//     reduce-scatters of the same buffer (SP). With --tp-comm-overlap (Transformer Engine's userbuffers,
//     SP only) each collective overlaps the one GEMM TE pairs it with (transformer_engine/pytorch/
//     module/base.py initialize_ub, its defaults): the all-gathers before qkv and up/up_gate run as a
//     ring exchange on the copy engines beside tp GEMM chunks of 1/tp of the rows, the chunks in step
//     with the transfers ((tp-1) max(chunk GEMM, S/tp transfer) + chunk GEMM); the reduce-scatters
//     after out and down as a 4-way pipeline on 16 SMs (split i's reduce-scatter beside split i+1's
//     GEMM, the last one exposed); backward, the grad-output all-gather before the out/down dgrad as a
//     ring exchange, the qkv/up input's all-gather beside their dgrad and their dgrad's
//     reduce-scatter beside their wgrad in bulk on 16 SMs (three collectives per block: the gathered
//     input is not saved). A GEMM beside a collective on k of the GPU's N SMs runs at (N-k)/N while
//     the collective lasts; the exposed time is what the overlapped pair takes beyond the GEMM alone.
//     With --tp-comm-overlap async (PyTorch's async TP: torch.compile's micro-pipeline TP pass,
//     torch/_inductor/fx_passes/micro_pipeline_tp.py, over symmetric-memory copy-engine transfers) the
//     forward's all-gathers before qkv and up run as the same ring exchange, and the reduce-scatters after
//     out and down as its mirror: tp chunk GEMMs of 1/tp of the rows, each chunk's partial output copied
//     to its owner while the next is computed, then the tp partial sums added (memory-bound); the
//     backward's collectives stay exposed. Its authors report up to 20-29% on the forward and ~8% end to
//     end for Llama 3 8B and 70B (dev-discuss "Introducing Async Tensor Parallelism in PyTorch", 2024),
//     the forward's share; torchtitan's 70B FSDP 32 x TP 8 table measures +5.7% (829 -> 876 tokens/s).
//     A recomputed forward overlaps as the forward does. Without SP (all-reduces) the pass matches
//     nothing: both passes' collectives stay exposed.
//     Layers without the four dense projections (MoE, MLA, DiT) keep the older rule: the pass's TP
//     time beyond the pass's whole compute is exposed (async: the forward's only). CP: K and V (backward: their gradients too) go around the
//     ring in cp-1 steps, overlapped with the attention kernel (exposed part only). EP: 2 all-to-alls of
//     tokens*copies*h per pass, copies = Plan::moe_copies_per_token (top_k with Megatron's all-to-all
//     dispatcher; the EP ranks a token reaches with DeepEP's).
//     Saved activations (Korthikanti Sec. 4.1, per op): column-GEMM inputs and outside-region ops / tp
//     only with SP; everything else / tp. Selective recompute drops the attention core's saved tensors
//     except its Q, K, V inputs; full recompute keeps the layer input only (2*b*s*h/cp, / tp with SP).
//     Recompute time: full = the forward again (with its TP collectives); selective = the attention
//     core's forward.
//     Op-level SAC (torchtitan's "selective op" policy, torchtitan parallelize_llama.py): the block's
//     matmuls in the order an unfused module issues them (a fused QKV as q, k, v; a gated up
//     projection as gate, up; Llama: wq wk wv wo w1 w3 w2) have their outputs saved at odd positions
//     (wq, wv, w1, w2) and recomputed at even ones (wk, wo, w3); the attention output and its fp32
//     log-sum-exp are saved; every memory-bound op is recomputed; the block input is kept.
//   Range of validity: decoder-only transformers; the shard rules above are Megatron-LM's.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "compute/compute_model.h"
#include "model/model_spec.h"
#include "train/comm_model.h"
#include "train/plan.h"

namespace orrery::train {

struct LayerCost {
  int64_t params = 0;         // parameters on one rank (after TP and EP)
  int64_t expert_params = 0;  // part of params: routed experts
  Time fwd;                   // forward compute
  Time bwd_input;             // input-gradient compute (dgrad, attention backward, elementwise)
  Time bwd_weight;            // weight-gradient compute (wgrad)
  Time recompute_full;        // forward again (full recompute), compute only
  Time recompute_selective;   // the forward selective recompute re-runs: the plan's modules (below)
  Time attn_core_bwd;         // the attention core's backward (context parallelism's ring hides behind it)
  Time recompute_op;          // op-level SAC: the unsaved matmuls and every memory-bound op, forward
  Time tp_fwd;                // TP collectives of one forward (exposed: not overlapped)
  Time tp_bwd;
  // Transformer Engine's paired overlap (--tp-comm-overlap with SP): the exposed time of the
  // collectives beside the dense projections they pair with, and how many of the four were found.
  Time te_fwd;
  Time te_bwd;
  int te_pairs = 0;
  // PyTorch's async TP (--tp-comm-overlap async): the forward's exposed time beside the same four GEMMs.
  Time async_fwd;
  Time cp_fwd;                // exposed CP ring transfers
  Time cp_bwd;
  Time ep_fwd;                // EP all-to-alls
  Time ep_bwd;
  Bytes act_none;       // saved activations, no recompute
  Bytes act_selective;  // saved activations with selective recompute of the plan's modules
  Bytes act_op;         // saved activations with op-level SAC (block input, kept matmul and attention outputs)
  Bytes act_input;      // layer input only (full recompute checkpoint)
  Flops model_flops;    // forward + backward matmul FLOPs on this rank (no recompute)
  Flops attn_core_fwd_flops;  // matmul FLOPs of the attention core forward on this rank
  Flops fwd_flops;            // forward matmul FLOPs on this rank
  Flops recompute_op_flops;   // matmul FLOPs op-level SAC recomputes on this rank
  Flops selective_flops;      // matmul FLOPs selective recompute re-runs (the plan's modules)
  // Selective recompute module by module (Plan::recompute_modules, indexed by RecomputeModule): the saved
  // activations the module's checkpoint drops, the forward it re-runs and that forward's matmul FLOPs.
  // act_selective, recompute_selective and selective_flops fold in the plan's modules.
  static constexpr size_t kModules = static_cast<size_t>(RecomputeModule::kCount);
  std::array<Bytes, kModules> module_dropped{};
  std::array<Time, kModules> module_recompute{};
  std::array<Flops, kModules> module_flops{};

  // A layer not under full recompute: its saved activations, the recompute time its backward adds,
  // and the matmul FLOPs of that recompute, under `r` (kNone, kSelective or kSelectiveOp).
  Bytes saved_activations(Recompute r) const;
  Time partial_recompute(Recompute r) const;
  Flops partial_recompute_flops(Recompute r) const;
};

struct ModelCosts {
  std::vector<LayerCost> layer;  // one per model layer
  LayerCost pre;                 // embedding lookup (first stage)
  LayerCost post;                // final norm, LM head, loss (last stage)
  Bytes boundary_activation;     // one micro-batch's hidden state sent between pipeline stages
  Bytes layer_input;             // b*s/cp*h*dt (the TP collective buffer)
  // The context-parallel exchange's transient buffer beside a layer's attention (Plan::cp_comm):
  // all_gather the gathered K and V of the whole sequence, a2a the head-split Q, K and V; p2p none
  // counted (a ring step's chunk).
  Bytes cp_buffer;
  // DualPipeV's overlapped pairs: the share of the SMs the EP all-to-alls take while they run beside
  // the other pass's kernels (kDualPipeCommSms of the GPU's; 0 where its SM count is unknown).
  double pair_comm_share = 0.0;
};

// SMs DeepSeek-V3's overlapped forward-backward pairs give their all-to-all and pipeline transfers:
// "only 20 SMs are sufficient to fully utilize the bandwidths of IB and NVLink" (DeepSeek-V3 technical
// report, arXiv 2412.19437, sec. 3.2.2, on H800s of 132 SMs).
inline constexpr double kDualPipeCommSms = 20.0;

// Kernels of `g` (alone) beside a collective of `c` started with them on `share` of the SMs: the kernels
// run at 1 - share while the collective lasts. The time both take beyond the kernels alone:
// max(c - g, c share) (c - g when the kernels finish under the collective). Transformer Engine's bulk
// overlaps and DualPipeV's pairs.
Time bulk_extra(Time g, Time c, double share);

// REQUIRES: validate_plan(model, plan, ...) is empty.
ModelCosts model_costs(const model::ModelSpec& model, const Plan& plan, const compute::ComputeModel& compute,
                       const CommModel& comm);

}  // namespace orrery::train
