#include "model/op_inventory.h"

#include <gtest/gtest.h>

#include "model/test_models.h"

#include <string>

namespace orrery::model {
namespace {

// Returns a copy, so that passing a temporary op list is safe.
Op find_op(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op named " << name;
  return Op{};
}

bool has_op(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return true;
  }
  return false;
}

// Llama-3-8B (meta-llama/Meta-Llama-3-8B config.json): 32 layers, h 4096, 32 heads, 8 kv heads,
// head dim 128, ffn 14336, vocab 128256, untied.
ModelSpec llama3_8b() { return ModelSpec::llama(GenericArch{32, 4096, 32, 8, 14336, 128256, 8192}, "llama3-8b"); }

using testing::mixtral_8x7b;

// GPT-3 175B as in Korthikanti et al. Table 3 / training.csv row C2: 96 layers, h 12288, a 96,
// ffn 4h, vocab 51200, s 2048.
ModelSpec gpt_175b() { return ModelSpec::gpt(GenericArch{96, 12288, 96, 96, 4 * 12288, 51200, 2048}); }

TEST(OpInventory, GemmFlopsAreTwoMnkAndBackwardIsTwiceForward) {
  // attn.qkv of Llama-3-8B at b = 2, s = 1024: m = 2048 tokens, n = (32 + 2*8)*128 = 6144, k = 4096.
  const std::vector<Op> ops = layer_ops(llama3_8b(), 0, Shape::training(2, 1024));
  const Op qkv = find_op(ops, "attn.qkv");
  EXPECT_EQ(qkv.kind, OpKind::kGemm);
  EXPECT_DOUBLE_EQ(qkv.gemm.m, 2048.0);
  EXPECT_EQ(qkv.gemm.n, 6144);
  EXPECT_EQ(qkv.gemm.k, 4096);
  EXPECT_EQ(qkv.gemm.count, 1);
  EXPECT_DOUBLE_EQ(qkv.fwd_flops.count(), 2.0 * 2048 * 6144 * 4096);
  EXPECT_DOUBLE_EQ(qkv.bwd_flops.count(), 2.0 * qkv.fwd_flops.count());
  EXPECT_EQ(qkv.params, 4096 * 6144);
  // Forward reads A (2048 x 4096) and B (4096 x 6144) and writes C (2048 x 6144), 2 bytes each.
  EXPECT_EQ(qkv.fwd_bytes_read.count(), 2 * (2048 * 4096 + 4096 * 6144));
  EXPECT_EQ(qkv.fwd_bytes_written.count(), 2 * 2048 * 6144);
  EXPECT_DOUBLE_EQ((GemmDims{3.0, 5, 7, 2}).flops().count(), 2.0 * 3 * 5 * 7 * 2);
}

TEST(OpInventory, AttendedPairsCountFullCausalAndWindowedAttention) {
  // s = 4, no cache: full 4*4 = 16; causal 1+2+3+4 = 10; causal with window 2: 1+2+2+2 = 7.
  EXPECT_DOUBLE_EQ(attended_pairs(4, 0, 0, AttentionFlops::kFull), 16.0);
  EXPECT_DOUBLE_EQ(attended_pairs(4, 0, 0, AttentionFlops::kCausal), 10.0);
  EXPECT_DOUBLE_EQ(attended_pairs(4, 0, 2, AttentionFlops::kCausal), 7.0);
  // One decode token after 9 cached ones sees 10 keys in both conventions; a window of 4 caps it.
  EXPECT_DOUBLE_EQ(attended_pairs(1, 9, 0, AttentionFlops::kCausal), 10.0);
  EXPECT_DOUBLE_EQ(attended_pairs(1, 9, 0, AttentionFlops::kFull), 10.0);
  EXPECT_DOUBLE_EQ(attended_pairs(1, 9, 4, AttentionFlops::kCausal), 4.0);
  // Chunked prefill of 3 tokens after 5 cached: causal 6+7+8 = 21; window 7: 6+7+7 = 20.
  EXPECT_DOUBLE_EQ(attended_pairs(3, 5, 0, AttentionFlops::kCausal), 21.0);
  EXPECT_DOUBLE_EQ(attended_pairs(3, 5, 7, AttentionFlops::kCausal), 20.0);
}

TEST(OpInventory, SlidingWindowCapsTheAttentionCost) {
  // Mistral-style window w = 4096 over s = 8192 (causal): sum_{p=1}^{4096} p + (8192-4096)*4096 =
  // 8,390,656 + 16,777,216 = 25,167,872 pairs; FLOPs 2 * a * pairs * (dh + dh) with a = 32, dh = 128.
  ModelSpec s = llama3_8b();
  s.sliding_window = 4096;
  const Op core = find_op(layer_ops(s, 0, Shape::training(1, 8192)), "attn.core");
  EXPECT_DOUBLE_EQ(core.fwd_flops.count(), 2.0 * 32 * 25'167'872.0 * 256);
}

TEST(OpInventory, AlternatingLayerTypesGiveTwoLayerGroups) {
  // gpt-oss: even layers windowed (w = 128), odd layers full; at s = 4096 (causal) a windowed layer
  // attends sum_{p=1}^{128} p + (4096 - 128) * 128 = 8,256 + 507,904 = 516,160 pairs per head, a full
  // one 4096 * 4097 / 2 = 8,390,656; FLOPs 2 * 64 heads * pairs * (64 + 64).
  const ModelSpec s = testing::gpt_oss();
  const Inventory inv = build_inventory(s, Shape::training(1, 4096));
  ASSERT_EQ(inv.groups.size(), 2u);
  EXPECT_EQ(inv.groups[0].layer_indices.size(), 18u);
  EXPECT_EQ(inv.groups[0].layer_indices[1], 2);
  EXPECT_EQ(inv.groups[1].layer_indices[0], 1);
  EXPECT_DOUBLE_EQ(find_op(inv.groups[0].ops, "attn.core").fwd_flops.count(), 2.0 * 64 * 516'160.0 * 128);
  EXPECT_DOUBLE_EQ(find_op(inv.groups[1].ops, "attn.core").fwd_flops.count(), 2.0 * 64 * 8'390'656.0 * 128);
  // The experts' biases ride on their GEMMs: 128 x (2880 x 5760 + 5760) on the up/gate projection.
  EXPECT_EQ(find_op(inv.groups[0].ops, "moe.experts.up_gate").params, 128LL * (2880 * 5760 + 5760));
}

TEST(OpInventory, TrainingFlopsPerTokenMatchPalmForADenseModel) {
  // PaLM (Chowdhery et al. 2022, App. B): 6N + 12*L*H*Q*T with full T x T attention.
  // Llama-3-8B matmul weights per layer: attention 2*4096^2 + 2*4096*1024 = 41,943,040; SwiGLU
  // 3*4096*14336 = 176,160,768; sum 218,103,808, x32 = 6,979,321,856; + LM head 128256*4096 =
  // 525,336,576 -> N = 7,504,658,432. 6N = 45,027,950,592. Attention at T = 8192: 12*32*32*128*8192 =
  // 12,884,901,888. Expected 57,912,852,480 FLOPs per token.
  const ModelSpec s = llama3_8b();
  EXPECT_EQ(s.matmul_params_per_token(), 7'504'658'432);
  const double expected = 6.0 * 7'504'658'432.0 + 12.0 * 32 * 32 * 128 * 8192;
  const double got = training_flops_per_token(s, 8192, AttentionFlops::kFull).count();
  EXPECT_NEAR(got, expected, 0.01 * expected);
  // Causal attention does (T+1)/(2T) of the attention work: 12,884,901,888 * 8193/16384 less work.
  const double causal = training_flops_per_token(s, 8192, AttentionFlops::kCausal).count();
  EXPECT_NEAR(causal, 6.0 * 7'504'658'432.0 + 12.0 * 32 * 32 * 128 * 8193 / 2.0, 1e-6 * expected);
}

TEST(OpInventory, TrainingFlopsPerTokenMatchPalmForAnMoeModel) {
  // Mixtral-8x7B active matmul weights per layer: attention 41,943,040 + router 8*4096 = 32,768 +
  // two experts 2*3*4096*14336 = 352,321,536 -> 394,297,344; x32 = 12,617,515,008; + LM head
  // 32000*4096 = 131,072,000 -> N = 12,748,587,008. Attention at T = 4096: 12*32*32*128*4096 =
  // 6,442,450,944. Expected 6N + 12LHQT = 82,933,972,992 FLOPs per token.
  const ModelSpec s = mixtral_8x7b();
  EXPECT_EQ(s.matmul_params_per_token(), 12'748'587'008);
  const double expected = 6.0 * 12'748'587'008.0 + 12.0 * 32 * 32 * 128 * 4096;
  const double got = training_flops_per_token(s, 4096, AttentionFlops::kFull).count();
  EXPECT_NEAR(got, expected, 0.01 * expected);
}

TEST(OpInventory, GptLayerActivationsMatchKorthikanti) {
  // Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4.1, 16-bit activations, 1-byte dropout masks,
  // no parallelism or recompute: per layer s*b*h*(34 + 5*a*s/h) bytes.
  //   attention block 11sbh + 5as^2b: QKV input 2sbh; Q and K for QK^T 4sbh; softmax output 2as^2b;
  //     its dropout mask as^2b; dropout output 2as^2b and V for the value product 2sbh; output
  //     projection input 2sbh; dropout mask sbh.
  //   MLP block 19sbh: first linear input 2sbh; GeLU input 8sbh (4h wide); second linear input 8sbh;
  //     dropout mask sbh.
  //   Two LayerNorm inputs: 4sbh.
  // GPT-3 175B, s = 2048, b = 1: 2048*12288*(34 + 5*96*2048/12288) = 2048*12288*114 = 2,868,903,936.
  const ModelSpec s = gpt_175b();
  const int64_t sq = 2048, h = 12288, a = 96;
  for (int64_t b : {1, 4}) {
    const int64_t expected = sq * b * h * 34 + 5 * a * sq * sq * b;
    EXPECT_EQ(activation_bytes_per_layer(s, 0, Shape::training(b, sq)).count(), expected) << "b = " << b;
  }
  EXPECT_EQ(activation_bytes_per_layer(s, 0, Shape::training(1, sq)).count(), 2'868'903'936);
  // Term by term: the attention core saves Q, K, V (6sbh) and the three score-sized tensors (5as^2b).
  const std::vector<Op> ops = layer_ops(s, 0, Shape::training(1, sq));
  EXPECT_EQ(find_op(ops, "attn.core").saved_activations.count(), 6 * sq * h + 5 * a * sq * sq);
  EXPECT_EQ(find_op(ops, "mlp.act").saved_activations.count(), 8 * sq * h);
  EXPECT_EQ(find_op(ops, "mlp.dropout").saved_activations.count(), sq * h);
}

TEST(OpInventory, FlashAttentionDropsTheQuadraticActivationTerm) {
  // With a fused kernel no score-sized tensor is kept: 34sbh plus the fp32 log-sum-exp, 4*a*s*b.
  const ModelSpec s = gpt_175b();
  InventoryOptions o;
  o.flash_attention = true;
  const int64_t sq = 2048, h = 12288, a = 96;
  EXPECT_EQ(activation_bytes_per_layer(s, 0, Shape::training(1, sq), o).count(), 34 * sq * h + 4 * a * sq);
}

TEST(OpInventory, LlamaLayerSavesNoDropoutMasks) {
  const std::vector<Op> ops = layer_ops(llama3_8b(), 0, Shape::training(1, 16));
  EXPECT_FALSE(has_op(ops, "attn.dropout"));
  EXPECT_FALSE(has_op(ops, "mlp.dropout"));
  EXPECT_TRUE(has_op(ops, "attn.rope"));
  EXPECT_TRUE(has_op(ops, "mlp.up_gate"));
}

TEST(OpInventory, MoeExpertsSeeTokensTimesTopKOverExpertsRows) {
  // Mixtral, b = 2, s = 2048: 4096 tokens * top-2 / 8 experts = 1024 rows per expert, 8 GEMMs of
  // 1024 x (2*14336) x 4096; FLOPs 2 * 1024 * 28672 * 4096 * 8 = 2 * 4096 * 2 * 28672 * 4096.
  const ModelSpec s = mixtral_8x7b();
  const std::vector<Op> ops = layer_ops(s, 0, Shape::training(2, 2048));
  const Op up = find_op(ops, "moe.experts.up_gate");
  EXPECT_DOUBLE_EQ(up.gemm.m, 1024.0);
  EXPECT_EQ(up.gemm.n, 2 * 14336);
  EXPECT_EQ(up.gemm.k, 4096);
  EXPECT_EQ(up.gemm.count, 8);
  EXPECT_DOUBLE_EQ(up.fwd_flops.count(), 2.0 * 1024 * 28672 * 4096 * 8);
  const Op router = find_op(ops, "moe.router");
  EXPECT_EQ(router.kind, OpKind::kRouter);
  EXPECT_DOUBLE_EQ(router.fwd_flops.count(), 2.0 * 4096 * 8 * 4096);
  // The load-factor hook scales the rows per expert: 1.25 * 1024 = 1280.
  InventoryOptions o;
  o.moe_load_factor = 1.25;
  EXPECT_DOUBLE_EQ(find_op(layer_ops(s, 0, Shape::training(2, 2048), o), "moe.experts.up_gate").gemm.m, 1280.0);
}

TEST(OpInventory, DecodeAttentionCostGrowsLinearlyWithContext) {
  // One new token per sequence over context c: 2 * b * a * c * (dh + dh) FLOPs; for Llama-3-8B
  // (a = 32, dh = 128) and b = 8: 2*8*32*c*256.
  const ModelSpec s = llama3_8b();
  const Op c1 = find_op(layer_ops(s, 0, Shape::decode(8, 1000)), "attn.core");
  const Op c2 = find_op(layer_ops(s, 0, Shape::decode(8, 2000)), "attn.core");
  EXPECT_DOUBLE_EQ(c1.fwd_flops.count(), 2.0 * 8 * 32 * 1000 * 256);
  EXPECT_DOUBLE_EQ(c2.fwd_flops.count(), 2.0 * c1.fwd_flops.count());
  // The projections do not depend on the context: 8 rows each time.
  EXPECT_DOUBLE_EQ(find_op(layer_ops(s, 0, Shape::decode(8, 2000)), "attn.qkv").gemm.m, 8.0);
  // The K and V cache read: b * c * (2 * 8 kv heads * 128) * 2 bytes = 8*1000*2048*2.
  InventoryOptions flash;
  flash.flash_attention = true;
  const Op f = find_op(layer_ops(s, 0, Shape::decode(8, 1000), flash), "attn.core");
  const int64_t q_bytes = 8 * 4096 * 2;
  EXPECT_EQ(f.fwd_bytes_read.count(), q_bytes + 8 * 1000 * 2048 * 2);
}

TEST(OpInventory, OpParametersSumToTheSpecTotal) {
  // The inventory builds each op's weights independently of ModelSpec::param_breakdown; the two must
  // agree for every architecture kind (tied/untied, biases, learned positions, MoE, shared experts).
  ModelSpec qwen2_moe = mixtral_8x7b();
  qwen2_moe.layers = 4;
  qwen2_moe.qkv_bias = true;
  qwen2_moe.moe.num_shared_experts = 1;
  qwen2_moe.moe.shared_expert_ffn = 20480;
  qwen2_moe.moe.shared_expert_gate = true;
  qwen2_moe.moe.layer_freq = 2;
  qwen2_moe.moe.layer_freq_offset = 1;
  qwen2_moe.validate();
  ModelSpec mla;
  mla.hidden = 256;
  mla.layers = 3;
  mla.heads = 4;
  mla.kv_heads = 4;
  mla.head_dim = 48;
  mla.ffn = 512;
  mla.vocab = 1000;
  mla.attention = AttentionKind::kMla;
  mla.mla = MlaDims{64, 32, 32, 16, 32};
  mla.moe = MoeSpec{8, 2, 64, 1, 64, false, true, 1, 1, 0, {}};
  mla.validate();
  ModelSpec opt = ModelSpec::gpt(GenericArch{2, 64, 4, 4, 256, 1000, 32});
  opt.position_offset = 2;
  opt.word_embed_proj_dim = 32;
  ModelSpec qwen3 = llama3_8b();
  qwen3.qk_norm = true;
  for (const ModelSpec& s : {llama3_8b(), mixtral_8x7b(), gpt_175b(), qwen2_moe, mla, opt, qwen3, testing::gpt_oss(4, 8)}) {
    const Inventory inv = build_inventory(s, Shape::training(1, 8));
    int64_t sum = 0;
    for (const Op& op : inv.pre_ops) sum += op.params;
    for (const Op& op : inv.post_ops) sum += op.params;
    for (const LayerGroup& g : inv.groups) {
      for (const Op& op : g.ops) sum += op.params * static_cast<int64_t>(g.layer_indices.size());
    }
    EXPECT_EQ(sum, s.total_params()) << s.name;
  }
}

TEST(OpInventory, LayersAreGroupedByKind) {
  // DeepSeek-style: first dense layer, then MoE layers: two groups covering all layers once.
  ModelSpec s = mixtral_8x7b();
  s.moe.first_dense_layers = 3;
  const Inventory inv = build_inventory(s, Shape::training(1, 16));
  ASSERT_EQ(inv.groups.size(), 2u);
  EXPECT_EQ(inv.groups[0].layer_indices.size(), 3u);
  EXPECT_EQ(inv.groups[1].layer_indices.size(), 29u);
  EXPECT_TRUE(has_op(inv.groups[0].ops, "mlp.up_gate"));
  EXPECT_TRUE(has_op(inv.groups[1].ops, "moe.router"));
}

TEST(OpInventory, ModelFlopsIncludeTheLmHeadAndExcludeElementwiseOps) {
  // Matmul-scope forward FLOPs = per layer GEMMs + attention, plus the LM head 2*T*V*h.
  const ModelSpec s = llama3_8b();
  const Inventory inv = build_inventory(s, Shape::training(1, 128));
  const Op head = find_op(inv.post_ops, "lm_head");
  EXPECT_DOUBLE_EQ(head.fwd_flops.count(), 2.0 * 128 * 128256 * 4096);
  EXPECT_EQ(head.params, 128256 * 4096);  // untied
  const double all = forward_flops(inv, FlopScope::kAll).count();
  const double matmul = forward_flops(inv, FlopScope::kMatmul).count();
  EXPECT_GT(all, matmul);
  // Elementwise work is a small fraction of a transformer's FLOPs (well under 1% here).
  EXPECT_LT(all - matmul, 0.01 * matmul);
}

TEST(OpInventory, CrossEntropyMovesTheBytesOfItsUnfusedFp32Passes) {
  // Per token and vocabulary entry (V), bf16 logits (2 B): forward reads 2 (upcast) + 4 (max) + 4
  // (subtract) + 4 (exp) + 4 (sum) + 4 (divide) = 22 B and writes 4 (upcast) + 4 (subtract) + 4
  // (exp) + 4 (divide) = 16 B; backward reads 4 + 4 and writes 4 + 2 = 14 B (scale by the upstream
  // gradient, downcast); it keeps the fp32 softmax, 4 B (Korthikanti et al.'s 4*s*b*v).
  const ModelSpec s = llama3_8b();
  const double logits = 2.0 * 128 * 128256;  // 2 sequences of 128 tokens
  const Op loss = find_op(build_inventory(s, Shape::training(2, 128)).post_ops, "loss");
  EXPECT_DOUBLE_EQ(loss.fwd_bytes_read.to_double(), 22.0 * logits);
  EXPECT_DOUBLE_EQ(loss.fwd_bytes_written.to_double(), 16.0 * logits);
  ASSERT_TRUE(loss.bwd_bytes.has_value());
  EXPECT_DOUBLE_EQ(loss.backward_bytes().to_double(), 14.0 * logits);
  EXPECT_DOUBLE_EQ(loss.saved_activations.to_double(), 4.0 * logits);
  // Other memory-bound ops keep the default: backward moves twice the forward's bytes.
  const Op norm = find_op(build_inventory(s, Shape::training(2, 128)).post_ops, "final_norm");
  EXPECT_FALSE(norm.bwd_bytes.has_value());
  EXPECT_DOUBLE_EQ(norm.backward_bytes().to_double(), 2.0 * (norm.fwd_bytes_read + norm.fwd_bytes_written).to_double());
}

TEST(OpInventory, EagerElementwiseOpsMoveTheBytesOfTheirUnfusedKernels) {
  // Per element, bf16 (dt = 2 B). RMSNorm as PyTorch's eager module runs it (x.float(); pow; mean;
  // x * rsqrt; type_as; * weight) reads dt + 4 + 4 + 4 + 4 + dt = 20 B and writes 4 + 4 + 4 + dt + dt
  // = 16 B, where the fused kernel reads dt and writes dt. RoPE through complex fp32 (float(),
  // complex multiply, type_as) reads dt + 4 + 4 = 10 B and writes 4 + 4 + dt = 10 B (fused: 2 and 2).
  // SiLU(gate) * up as two kernels, per output element: silu reads the gate (dt) and writes dt, the
  // multiply reads both (2 dt) and writes dt: read 3 dt = 6 B, write 2 dt = 4 B (fused: read 4 B,
  // write 2 B). FLOPs and saved activations do not change.
  const ModelSpec s = llama3_8b();
  const double tokens = 128.0, h = 4096.0, f = 14336.0, rope = tokens * (32 + 8) * 128.0;
  InventoryOptions eager;
  eager.eager = true;
  const std::vector<Op> a = build_inventory(s, Shape::training(1, 128)).groups[0].ops;
  const std::vector<Op> b = build_inventory(s, Shape::training(1, 128), eager).groups[0].ops;
  const double weight = 2.0 * h;  // the norm reads its weight once either way
  EXPECT_DOUBLE_EQ(find_op(a, "attn.norm").fwd_bytes_read.to_double(), 2.0 * tokens * h + weight);
  EXPECT_DOUBLE_EQ(find_op(b, "attn.norm").fwd_bytes_read.to_double(), 20.0 * tokens * h + weight);
  EXPECT_DOUBLE_EQ(find_op(a, "mlp.norm").fwd_bytes_written.to_double(), 2.0 * tokens * h);
  EXPECT_DOUBLE_EQ(find_op(b, "mlp.norm").fwd_bytes_written.to_double(), 16.0 * tokens * h);
  EXPECT_DOUBLE_EQ(find_op(a, "attn.rope").fwd_bytes_read.to_double(), 2.0 * rope);
  EXPECT_DOUBLE_EQ(find_op(b, "attn.rope").fwd_bytes_read.to_double(), 10.0 * rope);
  EXPECT_DOUBLE_EQ(find_op(b, "attn.rope").fwd_bytes_written.to_double(), 10.0 * rope);
  EXPECT_DOUBLE_EQ(find_op(a, "mlp.act").fwd_bytes_read.to_double(), 4.0 * tokens * f);
  EXPECT_DOUBLE_EQ(find_op(b, "mlp.act").fwd_bytes_read.to_double(), 6.0 * tokens * f);
  EXPECT_DOUBLE_EQ(find_op(b, "mlp.act").fwd_bytes_written.to_double(), 4.0 * tokens * f);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].fwd_flops, b[i].fwd_flops) << a[i].name;
    EXPECT_EQ(a[i].saved_activations, b[i].saved_activations) << a[i].name;
  }
  // LayerNorm is one kernel even in eager PyTorch, and a plain GeLU MLP has nothing to unfuse: a GPT
  // layer is the same either way.
  const std::vector<Op> g = build_inventory(gpt_175b(), Shape::training(1, 128)).groups[0].ops;
  const std::vector<Op> ge = build_inventory(gpt_175b(), Shape::training(1, 128), eager).groups[0].ops;
  ASSERT_EQ(g.size(), ge.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].fwd_bytes_read, ge[i].fwd_bytes_read) << g[i].name;
    EXPECT_EQ(g[i].fwd_bytes_written, ge[i].fwd_bytes_written) << g[i].name;
  }
}

}  // namespace
}  // namespace orrery::model
