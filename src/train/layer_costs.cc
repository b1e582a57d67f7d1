#include "train/layer_costs.h"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace orrery::train {

Time bulk_extra(Time g, Time c, double share) {
  const double gs = g.to_seconds(), cs = c.to_seconds();
  if (cs * (1.0 - share) >= gs) return Time::seconds(cs - gs);  // the kernels finish under the collective
  return Time::seconds(cs * share);
}

namespace {

enum class Shard { kColumn, kRow, kReplicated, kInner, kOuter };

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

Shard classify(const model::Op& op) {
  const std::string_view n = op.name;
  if (op.kind == model::OpKind::kGemm || op.kind == model::OpKind::kRouter) {
    if (n == "attn.q_a" || n == "attn.kv_a" || n == "moe.router" || n == "moe.shared_gate" ||
        n == "embedding.project_in" || n == "lm_head.project_out") {
      return Shard::kReplicated;
    }
    // DiT: the patch embedding, the conditioning MLPs and the output projection stay whole on every rank.
    if (n == "patch_embed" || n == "proj_out" || starts_with(n, "cond.")) return Shard::kReplicated;
    if (n == "attn.out" || n == "xattn.out" || ends_with(n, ".down")) return Shard::kRow;
    return Shard::kColumn;
  }
  if (op.kind == model::OpKind::kAttention) return Shard::kInner;
  if (n == "attn.rope" || n == "attn.qk_norm" || n == "xattn.qk_norm" || n == "loss" || n == "embedding" || ends_with(n, ".act") ||
      ends_with(n, ".act_dropout") || starts_with(n, "moe.")) {
    return Shard::kInner;
  }
  return Shard::kOuter;
}

double d(int64_t v) { return static_cast<double>(v); }

// Transformer Engine's userbuffer defaults (transformer_engine/pytorch/module/base.py, initialize_ub):
// pipeline and bulk overlaps take 16 SMs, a pipeline splits its GEMM in 4; ring exchanges use the
// copy engines (use_ce) and 1 SM.
constexpr double kUbCommSms = 16.0;
constexpr int kUbPipelineSplits = 4;


// TE's pipelined GEMM + reduce-scatter: `splits` GEMM chunks back to back; chunk i's reduce-scatter
// starts when chunk i is done (and the previous one has finished) and slows the GEMM chunks it runs
// beside to 1 - share. Time beyond the GEMM alone.
Time pipeline_extra(Time g, Time c, int splits, double share) {
  const double gc = g.to_seconds() / splits, cc = c.to_seconds() / splits;
  const double slow = 1.0 / (1.0 - share);  // REQUIRES: share < 1
  double tg = 0.0, tc = 0.0;  // end of the last GEMM chunk, end of the last reduce-scatter
  for (int i = 0; i < splits; ++i) {
    const double beside = std::max(0.0, std::min(tc - tg, gc * slow));  // chunk time spent beside a transfer
    const double end = tg + beside + (gc - beside / slow);
    tc = std::max(end, tc) + cc;
    tg = end;
  }
  return Time::seconds(std::max(0.0, std::max(tg, tc) - g.to_seconds()));
}

// TE's ring exchange (copy engines): tp chunk GEMMs of 1/tp of the rows, chunk i+1 arriving while chunk
// i is multiplied. Time beyond the unchunked GEMM `g` (chunking can cost efficiency too).
Time ring_extra(Time g, Time chunk, Time c_step, int64_t tp) {
  const Time total = std::max(chunk, c_step) * (tp - 1) + chunk;
  return std::max(Time::zero(), total - g);
}

// fp8 training as Megatron-Core runs it with Transformer Engine (TE): the linear layers inside the
// transformer blocks are TE modules and run their three GEMMs in fp8 (E4M3 operands, E5M2 gradients
// under the default hybrid recipe); the output layer (Megatron's ColumnParallelLinear, not TE), the
// router and the replicated projections stay in bf16.
bool te_module_gemm(std::string_view n) {
  return !(n == "lm_head" || n == "lm_head.project_out" || n == "embedding.project_in" || n == "moe.router" ||
           n == "moe.shared_gate" || n == "patch_embed" || n == "proj_out" || starts_with(n, "cond."));
}

// The quantization traffic around one fp8 GEMM of shape g (per micro-batch), memory-bound kernels, as
// Transformer Engine runs them under Megatron-Core's TE layer spec (TE docs, "Low precision training":
// "Performance considerations", "FP8 current scaling", "MXFP8"; TE 2.x normalization.cpp, quantizer.cpp,
// linear.py, layernorm_linear.py). A GEMM needs its input X (m x k) and, in backward, its output
// gradient dY (m x n) row-wise for one GEMM and column-wise for the other; on Hopper column-wise is a
// physical transpose, on Blackwell (non-TN fp8 GEMMs) the row-wise fp8 tensor serves both. Only the
// inputs of attn.qkv and mlp.up(_gate) come from a fusing producer, TELayerNormColumnParallelLinear's
// norm; mlp.down's input is Megatron's own bias-SwiGLU/GeLU output and every dY arrives in bf16, so TE
// quantizes them unfused. Per element of the tensor (bf16 in, fp8 out):
//   delayed scaling: Hopper cast-transpose 2 + 1 + 1 = 4 B, Blackwell cast 2 + 1 = 3 B; after the
//     fused norm the norm writes the fp8 rows itself: Hopper's transpose 1 + 1 = 2 B, Blackwell nothing.
//   current scaling: the tensor is read once more for its amax (+2 B: Hopper 6 B, Blackwell 5 B); after
//     the fused norm, which computes the amax beside its bf16 output (TE's FUSED_NORM_AMAX_FP8), only
//     the cast: Hopper 4 B, Blackwell 3 B.
//   MXFP8: row-wise and column-wise copies with their own 32-element E8M0 scales, one kernel: 2 + 1 + 1
//     + 2/32 B, the norm included (TE fuses it with MXFP8 only on request, NVTE_NORM_FWD_USE_CUDNN).
//   Sequence parallelism (tp > 1) all-gathers the column-parallel GEMMs' input (attn.qkv, mlp.up) and
//     the row-parallel GEMMs' dY (attn.out, mlp.down): they are quantized on each rank's 1/tp of the
//     rows and gathered row-wise in fp8; Hopper cannot gather the transpose, so it transposes the
//     gathered tensor (2 B per element of the whole) and the local cast writes rows only (delayed 3 B,
//     0 fused; current 5 B, 3 fused).
//   weights: quantized once per step and cached over the micro-batches (TE's is_first_microbatch): the
//     unfused bytes of the recipe per parameter, 1/microbatches of it here.
struct Fp8Casts {
  Bytes forward, backward;
};
struct Fp8Layout {
  Fp8Recipe recipe = Fp8Recipe::kDelayed;
  bool transpose = true;  // Hopper: column-wise is a physical transpose
  int64_t tp = 1;
  bool sp = false;
};
// Bytes to quantize one tensor of `elems` elements (all ranks' rows when gathered).
double quantize_bytes(const Fp8Layout& l, double elems, bool fused, bool gathered) {
  constexpr double kMxScales = 2.0 / 32.0;
  const double local = gathered ? elems / d(l.tp) : elems;
  switch (l.recipe) {
    case Fp8Recipe::kMxfp8: return local * (4.0 + kMxScales);
    case Fp8Recipe::kCurrent: {
      const double cast = fused ? 3.0 : 5.0;  // (amax read 2 unless the norm fused it) + read 2 + write 1
      if (!l.transpose) return cast * local;
      return gathered ? cast * local + 2.0 * elems : (cast + 1.0) * elems;
    }
    case Fp8Recipe::kDelayed: break;
  }
  if (!l.transpose) return fused ? 0.0 : 3.0 * local;
  if (gathered) return (fused ? 0.0 : 3.0 * local) + 2.0 * elems;
  return (fused ? 2.0 : 4.0) * elems;
}
Fp8Casts fp8_casts(std::string_view n, const compute::GemmShape& g, int64_t microbatches, const Fp8Layout& l) {
  const bool fused_input = n == "attn.qkv" || n == "mlp.up_gate" || n == "mlp.up";
  const bool split = l.sp && l.tp > 1;
  const bool gathered_input = split && (n == "attn.qkv" || n == "mlp.up_gate" || n == "mlp.up");
  const bool gathered_grad = split && (n == "attn.out" || n == "mlp.down");
  const double count = d(g.count);
  const double in = g.m * d(g.k) * count, out = g.m * d(g.n) * count, w = d(g.k) * d(g.n) * count;
  Fp8Casts q;
  q.forward = Bytes::from_double(quantize_bytes(l, in, fused_input, gathered_input) +
                                 quantize_bytes(l, w, false, false) / d(std::max<int64_t>(1, microbatches)));
  q.backward = Bytes::from_double(quantize_bytes(l, out, false, gathered_grad));
  return q;
}

struct Ctx {
  const model::ModelSpec& m;
  const Plan& p;
  const compute::ComputeModel& cm;
  const CommModel& comm;
  model::Shape shape;  // local: mbs x seq/cp
  Fp8Layout fp8;       // how TE quantizes fp8 GEMM operands on this GPU under this plan
  int64_t window = 0;  // the layer's sliding window (0: none)
  int64_t matmuls = 0;  // op-level SAC: matmuls issued so far in this layer
  bool moe_layer = false;  // the layer's ops include an MoE router
};

size_t mod(RecomputeModule m) { return static_cast<size_t>(m); }

// The output widths of the matmuls an unfused module issues for one inventory GEMM (per rank, before
// TP): a fused QKV projection is q, k, v; a gated up projection is gate, up; anything else is one.
std::vector<double> matmul_widths(const model::ModelSpec& m, const model::Op& op, double n) {
  if (op.name == "attn.qkv") {
    const double q = d(m.q_width()), k = d(m.k_width()), v = d(m.v_width());
    const double f = n / (q + k + v);
    return {q * f, k * f, v * f};
  }
  if (op.name == "mlp.up_gate") return {n / 2.0, n / 2.0};
  return {n};
}

// The activations an fp8 GEMM's module keeps for backward, `saved` being the bf16 input the
// inventory counts (per rank). Transformer Engine's Linear / LayerNormLinear keep the fp8 copy of their
// input for the weight-gradient GEMM instead of the bf16 one (TE 1.x _Linear.forward saves inputmat
// or inputmat_t in fp8; TE 2.x keeps the quantized input with its column-wise usage only): 1 byte per
// element, and the bf16 tensor is freed unless another op holds it. One does: a fused attention core
// keeps its output O for its own backward (FlashAttention and cuDNN compute rowsum(dO * O)), and O is
// the input of the projection after it (attn.out, a DiT's xattn.out). In bf16 the two share one tensor,
// counted once by the inventory; under fp8 O stays beside the projection's fp8 copy (in fp8 under TE's
// FP8 DPA), except with selective recompute, whose checkpointed core keeps nothing.
void add_fp8_saved_input(const Ctx& x, std::string_view name, Bytes saved, LayerCost& c) {
  const double elems = saved.to_double() / d(hw::dtype_bytes(x.p.activation_dtype()));
  // MXFP8 keeps one 1-byte scale per 32 elements beside the column-wise copy.
  c.act_none += Bytes::from_double(elems * (x.p.fp8_recipe == Fp8Recipe::kMxfp8 ? 1.0 + 1.0 / 32.0 : 1.0));
  if ((name == "attn.out" || name == "xattn.out") && x.p.flash_attention) {
    const hw::DType core = x.p.fp8_attention ? hw::DType::kFp8 : x.p.activation_dtype();
    const Bytes held = Bytes::from_double(elems * d(hw::dtype_bytes(core)));
    c.act_none += held;
    c.module_dropped[mod(RecomputeModule::kCoreAttn)] += held;  // the checkpointed core keeps no O
  }
}

// Adds the cost of one op to `c` (add_op below also books it to the recompute modules it belongs to).
void add_op_costs(Ctx& x, const model::Op& op, LayerCost& c) {
  const int64_t tp = x.p.tp;
  const Shard sh = classify(op);
  const hw::DType dt = x.p.precision;
  const bool experts = starts_with(op.name, "moe.experts.");
  double act_div = (sh == Shard::kRow || sh == Shard::kInner || x.p.sp) ? d(tp) : 1.0;
  // A routed expert's column-parallel GEMM saves its input as the dispatcher left it, all-gathered over
  // the etp ranks (Megatron-Core's grouped GEMMs take the permuted tokens whole, not sequence-parallel):
  // etp / tp of the routed rows at full width, with SP or without.
  if (sh == Shard::kColumn && experts) act_div = d(tp) / d(x.p.expert_tp());
  const Bytes saved = Bytes::from_double(op.saved_activations.to_double() / act_div);
  const bool gemm_op = op.kind == model::OpKind::kGemm || op.kind == model::OpKind::kRouter;
  // fp8: Transformer Engine's modules run their GEMMs in fp8; the rest stay in bf16 (header).
  const bool fp8 = gemm_op && dt == hw::DType::kFp8 && te_module_gemm(op.name);
  if (fp8) {
    add_fp8_saved_input(x, op.name, saved, c);
  } else {
    c.act_none += saved;
  }
  c.params += op.params;
  if (gemm_op) {
    if (op.gemm.count == 0) return;
    compute::GemmShape g{op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.count};
    // Routed experts: a rank holds E / ep of them and receives the tokens of its EP group's ranks for
    // them, all-gathered over its etp ranks: at etp = tp the rows of ep ranks' full sequences, at etp
    // < tp (each rank's sequence-parallel share dispatched alone) etp / tp of that; their matrices split
    // over etp ranks (Plan::etp).
    const int64_t split = experts ? x.p.expert_tp() : tp;
    if (experts) {
      g.count = op.gemm.count / x.p.ep;
      g.m = op.gemm.m * d(x.p.ep) * d(split) / d(tp);
    }
    if (sh == Shard::kColumn) g.n = std::max<int64_t>(1, g.n / split);
    if (sh == Shard::kRow) g.k = std::max<int64_t>(1, g.k / split);
    const hw::DType gdt = fp8 ? hw::DType::kFp8 : x.p.activation_dtype();
    const Time f = x.cm.gemm(g, gdt);
    const Time dgrad = x.cm.gemm(compute::GemmShape{g.m, g.k, g.n, g.count}, gdt);
    const compute::GemmShape wg{d(g.k), g.n, static_cast<int64_t>(std::ceil(g.m)), g.count};
    Time wgrad = x.cm.gemm(wg, gdt);
    // Gradient-accumulation fusion (Plan::grad_accum_fusion): the GEMM adds into the fp32 main gradient.
    if (x.p.grad_accum_fusion && x.p.grad_bytes == 4 && op.kind == model::OpKind::kGemm) {
      wgrad += x.cm.fp32_accumulate(wg, x.p.activation_dtype());
    }
    c.fwd += f;
    c.bwd_input += dgrad;
    c.bwd_weight += wgrad;
    c.recompute_full += f;
    if (fp8) {
      const Fp8Casts q = fp8_casts(op.name, g, x.p.microbatches(), x.fp8);
      Time qf = x.cm.memory_bound(q.forward);
      Time qb = q.backward > Bytes(0) ? x.cm.memory_bound(q.backward) : Time::zero();
      if (x.p.fp8_recipe == Fp8Recipe::kCurrent && x.p.sp && tp > 1) {
        // Current scaling synchronizes the amax of each tensor that sequence parallelism gathers over the
        // TP ranks before quantizing it (TE docs, "FP8 current scaling", distributed training): one
        // 4-byte all-reduce per column-parallel input forward and per row-parallel dY backward.
        const Time amax = x.comm.collective(coll::Op::kAllReduce, Bytes(4), Group::kTp);
        if (op.name == "attn.qkv" || op.name == "mlp.up_gate" || op.name == "mlp.up") qf += amax;
        if (op.name == "attn.out" || op.name == "mlp.down") qb += amax;
      }
      c.fwd += qf;
      c.bwd_input += qb;
      c.recompute_full += qf;
    }
    const bool te_column = op.name == "attn.qkv" || op.name == "mlp.up_gate" || op.name == "mlp.up";
    const bool te_row = op.name == "attn.out" || op.name == "mlp.down";
    if (tp > 1 && x.p.sp && x.p.tp_comm_overlap && (te_column || te_row)) {
      // The collective's buffer: the layer input (column: the GEMM's gathered input, m x k; row: its
      // output, m x n), every row of it. Under fp8 the all-gathers move the GEMM operand in fp8 (TE
      // gathers the quantized input, and dY in the row-parallel backward) and the reduce-scatters the
      // GEMM's bf16 output.
      const double elems = g.m * d(te_column ? g.k : g.n) * d(g.count);
      const Time ag = x.comm.collective(coll::Op::kAllGather, Bytes::from_double(elems * d(hw::dtype_bytes(gdt))), Group::kTp);
      const Time rs = x.comm.collective(coll::Op::kReduceScatter, Bytes::from_double(elems * d(hw::dtype_bytes(x.p.activation_dtype()))),
                                        Group::kTp);
      const int64_t sms = x.cm.calibration().sm_count;
      const double share = d(sms) > kUbCommSms ? kUbCommSms / d(sms) : 0.0;  // unknown (0) or tiny SM count: none taken
      const Time step = Time::seconds(ag.to_seconds() / d(tp - 1));  // one chunk's transfer of the ring
      if (te_column) {
        const Time chunk = x.cm.gemm(compute::GemmShape{g.m / d(tp), g.n, g.k, g.count}, gdt);
        c.te_fwd += ring_extra(f, chunk, step, tp);
        c.te_bwd += bulk_extra(dgrad, ag, share) + bulk_extra(wgrad, rs, share);
        c.async_fwd += ring_extra(f, chunk, step, tp);
      } else {
        const Time chunk = x.cm.gemm(compute::GemmShape{g.m / d(tp), g.k, g.n, g.count}, gdt);
        c.te_fwd += pipeline_extra(f, rs, kUbPipelineSplits, share);
        c.te_bwd += ring_extra(dgrad, chunk, step, tp);
        // Async TP's matmul -> reduce-scatter: the row chunks' partial outputs (1/tp of the rows, this
        // GEMM's m x n) copied to their owners beside the next chunk's GEMM, then each rank adds the tp
        // partials it holds: tp chunks read, one written.
        const Time rs_step = Time::seconds(rs.to_seconds() / d(tp - 1));
        const Time out_chunk = x.cm.gemm(compute::GemmShape{g.m / d(tp), g.n, g.k, g.count}, gdt);
        const double part_bytes = g.m / d(tp) * d(g.n) * d(g.count) * d(hw::dtype_bytes(x.p.activation_dtype()));
        c.async_fwd += ring_extra(f, out_chunk, rs_step, tp) + x.cm.memory_bound(Bytes::from_double(part_bytes * d(tp + 1)));
      }
      ++c.te_pairs;
    }
    const Flops fl(2.0 * g.m * d(g.n) * d(g.k) * d(g.count));
    c.fwd_flops += fl;
    c.model_flops += fl * 3.0;
    // Op-level SAC: odd matmuls keep their output (rows x width per rank), even ones run again.
    for (const double w : matmul_widths(x.m, op, d(g.n))) {
      const double share = w / d(g.n);
      if (++x.matmuls % 2 == 1) {
        c.act_op += Bytes::from_double(g.m * w * d(g.count) * d(hw::dtype_bytes(x.p.activation_dtype())));
      } else {
        c.recompute_op += Time::seconds(f.to_seconds() * share);
        c.recompute_op_flops += fl * share;
      }
    }
    return;
  }
  if (op.kind == model::OpKind::kAttention) {
    const int64_t s = x.shape.seq;  // local queries (seq/cp)
    const int64_t full = s * x.p.cp;
    const bool causal = op.mask == model::AttentionMask::kCausal;
    int64_t kv = 0;
    if (causal) {
      // Causal pairs of seq/cp queries under load-balanced ring attention: 1/cp of full*(full+1)/2.
      const double pairs = d(full) * d(full + 1) / 2.0 / d(x.p.cp);
      // The compute model's causal pairs for (q, kv): q*(kv-q) + q(q+1)/2; choose kv to match.
      kv = s + std::max<int64_t>(0, std::llround((pairs - d(s) * d(s + 1) / 2.0) / d(s)));
    } else {
      // No mask: the local queries see every key, all `full` of them under ring attention for
      // self-attention; a DiT's cross-attention keys are the (unsplit) text tokens, op.gemm.n.
      kv = starts_with(op.name, "xattn.") ? op.gemm.n : full;
    }
    std::vector<compute::AttentionSeq> seqs(static_cast<size_t>(x.shape.batch), compute::AttentionSeq{s, kv});
    if (kv < s) {
      // Fewer keys than queries (cross-attention over the text): the compute model takes kv >= q, so
      // the queries go as chunks of at most kv, each over the same kv keys, as the kernel's query tiles do.
      seqs.clear();
      for (int64_t b = 0; b < x.shape.batch; ++b) {
        for (int64_t q0 = 0; q0 < s; q0 += kv) seqs.push_back(compute::AttentionSeq{std::min(kv, s - q0), kv});
      }
    }
    const bool mla = x.m.attention == model::AttentionKind::kMla;
    compute::AttentionHeads h;
    h.heads = std::max<int64_t>(1, x.m.heads / tp);
    h.kv_heads = mla ? h.heads : std::max<int64_t>(1, x.m.kv_heads / tp);
    h.head_dim_qk = mla ? x.m.mla.qk_head_dim() : x.m.head_dim;
    h.head_dim_v = mla ? x.m.mla.v_head_dim : x.m.head_dim;
    h.causal = causal;
    // Attention dropout runs inside the fused kernel (its mask drawn in both passes); unfused, its
    // traffic is in the op's bytes below.
    h.dropout = x.p.flash_attention && x.m.dropout.attention > 0.0;
    // fp8 training keeps the attention core in bf16 unless Plan::fp8_attention (TE's FP8 DPA).
    const hw::DType adt = x.p.fp8_attention ? dt : x.p.activation_dtype();
    Time f = x.cm.attention(seqs, h, adt, compute::Pass::kForward);
    Time b = x.cm.attention(seqs, h, adt, compute::Pass::kBackward);
    if (!x.p.flash_attention) {
      // Unfused attention: the materialized scores' traffic (model/op_inventory.h) on top.
      const Bytes traffic = Bytes::from_double((op.fwd_bytes_read + op.fwd_bytes_written).to_double() / d(tp));
      f += x.cm.memory_bound(traffic);
      b += x.cm.memory_bound(traffic * 2);
    }
    c.fwd += f;
    c.bwd_input += b;
    c.attn_core_bwd += b;
    c.recompute_full += f;
    // Op-level SAC keeps the attention output and its fp32 log-sum-exp (one per query and head).
    const double out_width = d(x.m.heads) * d(h.head_dim_v);
    c.act_op += Bytes::from_double(d(x.shape.tokens()) * (out_width * d(hw::dtype_bytes(adt)) + d(x.m.heads) * 4.0) / d(tp));
    // Matmul FLOPs as the inventory counts them (its attention convention), on this rank. Unmasked
    // self-attention under CP attends all `kv` keys, not only the local chunk of the inventory's shape.
    // Causal self-attention under load-balanced ring CP: each rank computes 1/cp of the full sequence's
    // causal pairs, cp times the pairs of its local chunk alone (the inventory's shape).
    const double local_pairs = model::attended_pairs(s, 0, x.window, model::AttentionFlops::kCausal);
    const double ring_pairs = model::attended_pairs(full, 0, x.window, model::AttentionFlops::kCausal) / d(x.p.cp);
    const double kv_scale = causal ? (local_pairs > 0.0 ? ring_pairs / local_pairs : 1.0) : d(kv) / d(op.gemm.n);
    const Flops fl = op.fwd_flops * kv_scale / d(tp);
    c.fwd_flops += fl;
    c.attn_core_fwd_flops += fl;
    c.model_flops += fl * 3.0;
    // Q, K, V per rank (the op's own kv length: the text tokens for a DiT's cross-attention).
    const double qkv_elems =
        (d(x.shape.tokens()) * d(x.m.q_width()) + d(x.shape.batch) * d(op.gemm.n) * d(x.m.k_width() + x.m.v_width())) / d(tp);
    const double act_bytes = d(hw::dtype_bytes(x.p.activation_dtype()));
    double core_saved = op.saved_activations.to_double() / d(tp);
    if (adt != x.p.activation_dtype()) {
      // TE's FP8 DPA keeps its fp8 Q, K, V for its fp8 backward (NVTE_FP8_DPA_BWD=1, the default),
      // not the bf16 ones the inventory counts.
      const double fewer = qkv_elems * (act_bytes - d(hw::dtype_bytes(adt)));
      core_saved -= fewer;
      c.act_none -= Bytes::from_double(fewer);
    }
    // Selective recompute keeps none of the core's own saved tensors, only Q, K, V (Korthikanti Sec.
    // 4.2) as the recompute checkpoint's inputs: the qkv projection's output, in the activation dtype
    // (under FP8 DPA too: the core quantizes inside). In bf16 they are the core's Q, K, V.
    c.module_dropped[mod(RecomputeModule::kCoreAttn)] += Bytes::from_double(core_saved - qkv_elems * act_bytes);
    // MLA's up-projection recompute frees those Q, K, V (the up projections' outputs) after the core's
    // forward and rebuilds them before its backward (Megatron-Core's CheckpointWithoutOutput); under FP8
    // DPA the core's own fp8 copies stay.
    if (x.m.attention == model::AttentionKind::kMla && adt == x.p.activation_dtype()) {
      c.module_dropped[mod(RecomputeModule::kMlaUpProj)] += Bytes::from_double(qkv_elems * act_bytes);
    }
    return;
  }
  const double div = (sh == Shard::kInner || x.p.sp) ? d(tp) : 1.0;
  const Bytes bytes = Bytes::from_double((op.fwd_bytes_read + op.fwd_bytes_written).to_double() / div);
  const Time f = x.cm.memory_bound(bytes);
  c.fwd += f;
  c.bwd_input += x.cm.memory_bound(Bytes::from_double(op.backward_bytes().to_double() / div));
  c.recompute_full += f;
  c.recompute_op += f;
}

// Books one op to the selective-recompute modules (RecomputeModule) it belongs to, given what it saved
// and the forward time and matmul FLOPs it added: a module re-runs the forward of its ops and drops the
// saved tensors its checkpoint does not keep (plan.h). The attention core's drops are booked where its
// cost is (add_op_costs).
void book_modules(const Ctx& x, const model::Op& op, Bytes saved, Time fwd, Flops flops, LayerCost& c) {
  const std::string& n = op.name;
  const bool mla = x.m.attention == model::AttentionKind::kMla;
  const auto rerun = [&](RecomputeModule m) {
    c.module_recompute[mod(m)] += fwd;
    c.module_flops[mod(m)] += flops;
  };
  const auto drop = [&](RecomputeModule m) { c.module_dropped[mod(m)] += saved; };
  if (n == "attn.core") rerun(RecomputeModule::kCoreAttn);
  // MLA's up projections and RoPE; their inputs (the compressed latents, or without a query LoRA the
  // norm output the kv down projection needs too) are the checkpoint's and stay; RoPE's saved go.
  if (mla && (n == "attn.q_b" || n == "attn.kv_b" || n == "attn.rope" || n == "attn.q")) {
    rerun(RecomputeModule::kMlaUpProj);
    if (n == "attn.rope") drop(RecomputeModule::kMlaUpProj);
  }
  if (n == "moe.experts.act") rerun(RecomputeModule::kMoeAct);
  if (n == "moe.experts.down") drop(RecomputeModule::kMoeAct);  // its input is the activation's output
  // Norms that are modules of their own: MLA's input norm (its output saved by the first down
  // projection) and an MoE layer's pre-MLP norm (its output saved by the router).
  if ((mla && n == "attn.norm") || (x.moe_layer && n == "mlp.norm")) rerun(RecomputeModule::kLayernorm);
  if ((mla && (n == "attn.q_a" || n == "attn.q")) || (x.moe_layer && n == "moe.router")) drop(RecomputeModule::kLayernorm);
  // A dense MLP from its input (the residual stream the norm saves): its norm (fused into the first
  // GEMM by Transformer Engine), GEMMs and activation run again; all but the norm's input go.
  if (!x.moe_layer && starts_with(n, "mlp.") && n != "mlp.dropout" && n != "mlp.residual") {
    rerun(RecomputeModule::kMlp);
    if (n != "mlp.norm") drop(RecomputeModule::kMlp);
  }
  if (starts_with(n, "moe.shared") && n != "moe.shared_add") {
    rerun(RecomputeModule::kSharedExperts);
    drop(RecomputeModule::kSharedExperts);
  }
}

void add_op(Ctx& x, const model::Op& op, LayerCost& c) {
  const Bytes saved0 = c.act_none;
  const Time fwd0 = c.fwd;
  const Flops flops0 = c.fwd_flops;
  add_op_costs(x, op, c);
  book_modules(x, op, c.act_none - saved0, c.fwd - fwd0, c.fwd_flops - flops0, c);
}

LayerCost cost_of(Ctx x, const std::vector<model::Op>& ops, int64_t window = 0) {
  x.window = window;
  x.moe_layer = std::any_of(ops.begin(), ops.end(), [](const model::Op& op) { return op.name == "moe.router"; });
  LayerCost c;
  for (const model::Op& op : ops) add_op(x, op, c);
  // Selective recompute of the plan's modules.
  c.act_selective = c.act_none;
  for (size_t m = 0; m < LayerCost::kModules; ++m) {
    if ((x.p.recompute_modules & module_bit(static_cast<RecomputeModule>(m))) == 0) continue;
    c.act_selective -= c.module_dropped[m];
    c.recompute_selective += c.module_recompute[m];
    c.selective_flops += c.module_flops[m];
  }
  return c;
}

}  // namespace

Bytes LayerCost::saved_activations(Recompute r) const {
  switch (r) {
    case Recompute::kSelective: return act_selective;
    case Recompute::kSelectiveOp: return act_op;
    case Recompute::kNone:
    case Recompute::kFull: break;
  }
  return act_none;
}

Time LayerCost::partial_recompute(Recompute r) const {
  switch (r) {
    case Recompute::kSelective: return recompute_selective;
    case Recompute::kSelectiveOp: return recompute_op;
    case Recompute::kNone:
    case Recompute::kFull: break;
  }
  return Time::zero();
}

Flops LayerCost::partial_recompute_flops(Recompute r) const {
  switch (r) {
    case Recompute::kSelective: return selective_flops;
    case Recompute::kSelectiveOp: return recompute_op_flops;
    case Recompute::kNone:
    case Recompute::kFull: break;
  }
  return Flops(0.0);
}

ModelCosts model_costs(const model::ModelSpec& m, const Plan& p, const compute::ComputeModel& cm, const CommModel& comm) {
  model::InventoryOptions io;
  io.dtype_bytes = hw::dtype_bytes(p.activation_dtype());
  io.attention = model::AttentionFlops::kCausal;
  io.flash_attention = p.flash_attention;
  io.eager = p.eager;
  io.moe_load_factor = p.capacity_factor > 0.0 ? p.capacity_factor : p.load_imbalance;
  const model::Shape shape = model::Shape::training(p.mbs, p.seq / p.cp);
  const model::Inventory inv = model::build_inventory(m, shape, io);
  const Ctx x{m, p, cm, comm, shape, Fp8Layout{p.fp8_recipe, cm.gpu().architecture != "blackwell", p.tp, p.sp}};
  const double dtb = d(io.dtype_bytes);
  const double tp = d(p.tp);

  ModelCosts out;
  out.layer_input = Bytes::from_double(d(shape.tokens()) * d(m.hidden) * dtb);
  // Megatron's scatter-gather optimization sends 1/tp of the boundary tensor even without SP.
  out.boundary_activation = Bytes::from_double(out.layer_input.to_double() / tp);
  out.layer.resize(static_cast<size_t>(m.layers));
  {
    const int64_t sms = cm.calibration().sm_count;
    out.pair_comm_share = d(sms) > kDualPipeCommSms ? kDualPipeCommSms / d(sms) : 0.0;
  }

  // Per-layer communication inside the layer.
  // Each half of a layer (attention, MLP) gathers and scatters the layer input with SP, or all-reduces
  // it without.
  const Time tp_half = p.sp ? comm.collective(coll::Op::kAllGather, out.layer_input, Group::kTp) +
                                  comm.collective(coll::Op::kReduceScatter, out.layer_input, Group::kTp)
                            : comm.collective(coll::Op::kAllReduce, out.layer_input, Group::kTp);
  const Time tp_pass_dense = tp_half * 2;
  const Bytes moe_gathered = Bytes::from_double(out.layer_input.to_double() * d(p.expert_tp()) / tp);
  const Time moe_tp_half = comm.collective(coll::Op::kAllGather, moe_gathered, Group::kEtp) +
                           comm.collective(coll::Op::kReduceScatter, moe_gathered, Group::kEtp);
  const Bytes kv_step = Bytes::from_double(d(shape.tokens()) * d(m.k_width() + m.v_width()) * dtb / tp);
  // Context parallelism's operands per rank: the whole sequence's K and V (all_gather; the ring passes
  // the same bytes) and, for Ulysses, the rank's own Q, K, V and attention output (tokens x widths / tp).
  const Bytes kv_all = kv_step * p.cp;
  const double cp_tok = d(shape.tokens()) * dtb / tp;
  const Bytes cp_qkv = Bytes::from_double(cp_tok * d(m.q_width() + m.k_width() + m.v_width()));
  const Bytes cp_out = Bytes::from_double(cp_tok * d(m.attn_out_width()));
  const bool ulysses = p.cp_comm == CpComm::kA2a || p.cp_comm == CpComm::kA2aP2p;
  if (p.cp > 1) out.cp_buffer = p.cp_comm == CpComm::kAllGather ? kv_all : ulysses ? cp_qkv : Bytes(0);

  for (const model::LayerGroup& g : inv.groups) {
    const int64_t first = g.layer_indices.front();
    LayerCost c = cost_of(x, g.ops, m.is_sliding_layer(first) ? m.sliding_window : 0);
    const model::LayerParams lp = m.layer_params(g.layer_indices.front());
    // Parameters on one rank: TP splits the matrices (norms replicated), EP and ETP the routed experts.
    c.expert_params = lp.routed_experts / (p.expert_tp() * p.ep);
    c.params = (lp.total() - lp.routed_experts - lp.norms) / p.tp + lp.norms + c.expert_params;
    // An MoE layer's MLP half gathers and scatters its tokens over the expert TP ranks: etp / tp of the
    // layer input on etp ranks (at etp = tp the dense half; none at etp = 1).
    const Time tp_pass = m.is_moe_layer(first) && p.expert_tp() != p.tp ? tp_half + moe_tp_half : tp_pass_dense;
    c.tp_fwd = p.tp_comm_overlap ? Time::zero() : tp_pass;
    c.tp_bwd = c.tp_fwd;
    if (p.tp_comm_overlap && p.tp_overlap_async) {
      // PyTorch's async TP (header): the forward's four collectives decomposed beside their GEMMs (or,
      // without the four dense projections, hidden behind the forward's compute), the backward's exposed.
      // Without SP there is nothing it matches (all-reduces, not all-gathers and reduce-scatters).
      c.tp_fwd = !p.sp || p.tp < 2      ? tp_pass
                 : c.te_pairs == 4      ? c.async_fwd
                                        : std::max(Time::zero(), tp_pass - c.fwd);
      c.tp_bwd = tp_pass;
    } else if (p.tp_comm_overlap && p.sp && p.tp > 1 && c.te_pairs == 4) {
      // Transformer Engine's pairing of each collective with one GEMM (header).
      c.tp_fwd = c.te_fwd;
      c.tp_bwd = c.te_bwd;
    } else if (p.tp_comm_overlap) {
      // Overlapped with the pass's compute: only what it cannot cover stays exposed.
      c.tp_fwd = std::max(Time::zero(), tp_pass - c.fwd);
      c.tp_bwd = std::max(Time::zero(), tp_pass - c.bwd_input - c.bwd_weight);
    }
    if (p.cp > 1) {
      // A ring's K, V transfers hide behind the attention core's kernels: K, V forward; K, V and their
      // gradients backward, beside the core's backward. Exposed: what they cannot cover.
      const auto add_ring = [&](Time ring) {
        c.cp_fwd += std::max(Time::zero(), ring - c.module_recompute[mod(RecomputeModule::kCoreAttn)]);
        c.cp_bwd += std::max(Time::zero(), ring * 2 - c.attn_core_bwd);
      };
      switch (p.cp_comm) {
        case CpComm::kP2p: add_ring(comm.collective(coll::Op::kAllGather, kv_all, Group::kCp)); break;
        case CpComm::kAllGather: {
          // Exposed: the gather before the core; in the backward the gather again (the forward keeps only
          // the local chunk) and the reduce-scatter of dK, dV (Transformer Engine's
          // AttnFuncWithCPAndKVAllGather).
          const Time gather = comm.collective(coll::Op::kAllGather, kv_all, Group::kCp);
          c.cp_fwd = gather;
          c.cp_bwd = gather + comm.collective(coll::Op::kReduceScatter, kv_all, Group::kCp);
          break;
        }
        case CpComm::kA2a:
        case CpComm::kA2aP2p: {
          // Exposed: Q, K, V to the head-split layout before the core and the output back after it; in
          // the backward the output's gradient in and dQ, dK, dV back, over all of CP or, hierarchical,
          // over the a2a group. Hierarchical CP then runs the ring over the groups: each rank holds its
          // group's sequence for 1 / cp_a2a of the heads, its own chunk's K, V bytes (kv_step), passed
          // around cp / cp_a2a ranks.
          const Group a2a_group = p.cp_comm == CpComm::kA2a ? Group::kCp : Group::kCpA2a;
          c.cp_fwd = comm.collective(coll::Op::kAllToAll, cp_qkv, a2a_group) +
                     comm.collective(coll::Op::kAllToAll, cp_out, a2a_group);
          c.cp_bwd = c.cp_fwd;
          if (p.cp_comm == CpComm::kA2aP2p) {
            add_ring(comm.collective(coll::Op::kAllGather, kv_step * group_size(p, Group::kCpRing), Group::kCpRing));
          }
          break;
        }
      }
    }
    if (m.is_moe_layer(g.layer_indices.front()) && p.ep > 1) {
      const double copies = p.moe_copies_per_token(m.moe.num_experts, m.moe.top_k);
      const Bytes a2a = Bytes::from_double(d(shape.tokens()) * copies * d(m.hidden) * dtb / (p.sp ? tp : 1.0));
      c.ep_fwd = comm.collective(coll::Op::kAllToAll, a2a, Group::kEp) * 2;
      c.ep_bwd = c.ep_fwd;
    }
    c.act_input = Bytes::from_double(out.layer_input.to_double() / (p.sp ? tp : 1.0));
    c.act_op += c.act_input;
    for (int64_t l : g.layer_indices) out.layer[static_cast<size_t>(l)] = c;
  }
  out.pre = cost_of(x, inv.pre_ops);
  out.post = cost_of(x, inv.post_ops);
  const model::ParamBreakdown pb = m.param_breakdown();
  out.pre.params = pb.token_embedding / p.tp + pb.position_embedding + pb.projections + pb.conditioning;
  // The last stage holds the LM head (a copy of the tied embedding when pp > 1, as Megatron does).
  const int64_t head = pb.lm_head > 0 ? pb.lm_head : (p.pp > 1 ? pb.token_embedding : 0);
  out.post.params = head / p.tp + pb.final_norm;
  return out;
}

}  // namespace orrery::train
