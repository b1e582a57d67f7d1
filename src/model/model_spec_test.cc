#include "model/model_spec.h"

#include <gtest/gtest.h>

#include "model/test_models.h"

#include <cmath>
#include <string>

namespace orrery::model {
namespace {

// Llama-2-7B: 32 layers, h = 4096, 32 heads (MHA), ffn 11008, vocab 32000, untied, RMSNorm.
ModelSpec llama2_7b() { return ModelSpec::llama(GenericArch{32, 4096, 32, 32, 11008, 32000, 4096}, "llama2-7b"); }

using testing::mixtral_8x7b;

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json): h 7168, 61 layers (first 3 dense, ffn 18432),
// 128 heads, MLA q_lora 1536, kv_lora 512, nope 128, rope 64, v 128; 256 routed experts of 2048,
// top-8, 1 shared expert of 2048; vocab 129280, untied.
ModelSpec deepseek_v3() {
  ModelSpec s;
  s.name = "deepseek-v3";
  s.family = Family::kDeepSeekV3;
  s.hidden = 7168;
  s.layers = 61;
  s.heads = 128;
  s.kv_heads = 128;
  s.head_dim = 192;
  s.ffn = 18432;
  s.vocab = 129280;
  s.max_positions = 163840;
  s.attention = AttentionKind::kMla;
  s.mla = MlaDims{1536, 512, 128, 64, 128};
  s.moe.num_experts = 256;
  s.moe.top_k = 8;
  s.moe.expert_ffn = 2048;
  s.moe.num_shared_experts = 1;
  s.moe.shared_expert_ffn = 2048;
  s.moe.router_bias = true;
  s.moe.first_dense_layers = 3;
  s.validate();
  return s;
}

TEST(ModelSpec, Llama2_7bCountMatchesTheHandDerivation) {
  // Per layer: attention 4*4096^2 = 67,108,864; SwiGLU 3*4096*11008 = 135,266,304; two RMSNorms
  // 2*4096 = 8,192; total 202,383,360. 32 layers: 6,476,267,520. Embedding and untied LM head
  // 2*32000*4096 = 262,144,000; final norm 4,096. Sum: 6,738,415,616 (published 6.74B).
  const ModelSpec s = llama2_7b();
  const ParamBreakdown b = s.param_breakdown();
  EXPECT_EQ(b.layers.at(0).attention, 67'108'864);
  EXPECT_EQ(b.layers.at(0).mlp, 135'266'304);
  EXPECT_EQ(b.layers.at(0).norms, 8'192);
  EXPECT_EQ(b.token_embedding, 131'072'000);
  EXPECT_EQ(b.lm_head, 131'072'000);
  EXPECT_EQ(b.final_norm, 4'096);
  EXPECT_EQ(s.total_params(), 6'738'415'616);
  // A dense model's every parameter is active.
  EXPECT_EQ(s.active_params(), s.total_params());
  // Non-embedding: total minus the two 131,072,000 tables.
  EXPECT_EQ(s.non_embedding_params(), 6'738'415'616 - 262'144'000);
}

TEST(ModelSpec, GptCountMatchesNarayananEquation) {
  // Narayanan et al. 2021 (arXiv 2104.04473) Sec. 5.1: P = 12*l*h^2*(1 + 13/(12h) + (V+s)/(12*l*h)),
  // i.e. 12lh^2 + 13lh + Vh + sh; it leaves out the final LayerNorm (2h). Row A1 of
  // shared/validation/training.csv: l = 24, h = 2304, V = 51200, s = 2048 ("1.7B").
  const int64_t l = 24, h = 2304, v = 51200, seq = 2048;
  const ModelSpec s = ModelSpec::gpt(GenericArch{l, h, 24, 24, 4 * h, v, seq});
  const int64_t narayanan = 12 * l * h * h + 13 * l * h + v * h + seq * h;  // 1,652,226,048
  EXPECT_EQ(s.total_params(), narayanan + 2 * h);
  EXPECT_TRUE(s.tied_embeddings);
  EXPECT_EQ(s.param_breakdown().lm_head, 0);
}

TEST(ModelSpec, MixtralTotalAndActiveMatchTheHandDerivation) {
  // Attention: 2*4096^2 (q, o) + 2*4096*1024 (k, v) = 41,943,040. Expert: 3*4096*14336 = 176,160,768.
  // Router 8*4096 = 32,768; norms 8,192. Layer total 41,943,040 + 8*176,160,768 + 32,768 + 8,192 =
  // 1,451,270,144; x32 = 46,440,644,608; + 2*32000*4096 + 4096 = 46,702,792,704 (published 46.7B).
  // Active layer: 41,943,040 + 2*176,160,768 + 32,768 + 8,192 = 394,305,536; x32 + 262,148,096 =
  // 12,879,925,248 (published 12.9B).
  const ModelSpec s = mixtral_8x7b();
  EXPECT_EQ(s.total_params(), 46'702'792'704);
  EXPECT_EQ(s.active_params(), 12'879'925'248);
  EXPECT_EQ(s.num_moe_layers(), 32);
  const LayerParams l = s.layer_params(0);
  EXPECT_EQ(l.router, 32'768);
  EXPECT_EQ(l.routed_experts, 8 * 176'160'768);
  EXPECT_EQ(l.shared_experts, 0);
}

TEST(ModelSpec, DeepSeekV3TotalAndActiveMatchTheHandDerivation) {
  // MLA per layer: q_a 7168*1536 = 11,010,048; q_a norm 1,536; q_b 1536*128*192 = 37,748,736;
  // kv_a 7168*576 = 4,128,768; kv_a norm 512; kv_b 512*128*256 = 16,777,216; o 128*128*7168 =
  // 117,440,512; sum 187,107,328. Block norms 2*7168 = 14,336.
  // Dense layer: + 3*7168*18432 = 396,361,728 -> 583,483,392 (x3 = 1,750,450,176).
  // MoE layer: + 256 experts * 44,040,192 + 1 shared 44,040,192 + router 256*7168 + bias 256
  //            = 11,507,286,272 (x58 = 667,422,603,776).
  // Embedding + head 2*129280*7168 = 1,853,358,080; final norm 7,168. Total 671,026,419,200 (671B).
  const ModelSpec s = deepseek_v3();
  EXPECT_EQ(s.layer_params(0).attention, 187'107'328);
  EXPECT_EQ(s.layer_params(0).total(), 583'483'392);
  EXPECT_EQ(s.layer_params(3).total(), 11'507'286'272);
  EXPECT_EQ(s.total_params(), 671'026'419'200);
  // Active MoE layer: 187,121,664 + 9 experts (8 routed + 1 shared) * 44,040,192 + 1,835,264 router =
  // 585,318,656 (x58 = 33,948,482,048). Without the input embedding: + 1,750,450,176 dense layers +
  // 926,679,040 head + 7,168 norm = 36,625,618,432 (DeepSeek: 36.7B); with it, + 926,679,040.
  EXPECT_EQ(s.active_params(ActiveEmbedding::kExclude), 36'625'618'432);
  EXPECT_EQ(s.active_params(ActiveEmbedding::kInclude), 36'625'618'432 + 926'679'040);
}

TEST(ModelSpec, DeepSeekLayersBeforeFirstKDenseReplaceAreDense) {
  const ModelSpec s = deepseek_v3();
  EXPECT_FALSE(s.is_moe_layer(0));
  EXPECT_FALSE(s.is_moe_layer(2));
  EXPECT_TRUE(s.is_moe_layer(3));
  EXPECT_TRUE(s.is_moe_layer(60));
  EXPECT_EQ(s.num_moe_layers(), 61 - 3);
}

TEST(ModelSpec, QwenSparseStepAndMlpOnlyLayersPickTheMoeLayers) {
  // Qwen2-MoE rule: layer i is sparse when (i + 1) % decoder_sparse_step == 0 and i is not in
  // mlp_only_layers. With step 2 and mlp_only_layers = [3]: layers 1 and 5 are MoE, 0, 2, 3, 4 dense.
  ModelSpec s = mixtral_8x7b();
  s.layers = 6;
  s.moe.layer_freq = 2;
  s.moe.layer_freq_offset = 1;
  s.moe.dense_layers = {3};
  s.validate();
  EXPECT_FALSE(s.is_moe_layer(0));
  EXPECT_TRUE(s.is_moe_layer(1));
  EXPECT_FALSE(s.is_moe_layer(2));
  EXPECT_FALSE(s.is_moe_layer(3));
  EXPECT_FALSE(s.is_moe_layer(4));
  EXPECT_TRUE(s.is_moe_layer(5));
  EXPECT_EQ(s.num_moe_layers(), 2);
}

TEST(ModelSpec, QkvBiasAddsTheQueryKeyAndValueWidths) {
  // Qwen2-7B attention: h 3584, 28 heads, 4 kv heads, head dim 128: q 3584^2 = 12,845,056 + bias
  // 3,584; k and v 3584*512 = 1,835,008 each + bias 512 each; o 12,845,056 without bias.
  // Sum 29,364,736.
  ModelSpec s = ModelSpec::llama(GenericArch{28, 3584, 28, 4, 18944, 152064, 4096});
  s.qkv_bias = true;
  EXPECT_EQ(s.layer_params(0).attention, 29'364'736);
}

TEST(ModelSpec, QkNormAddsTwoHeadDimNormsPerLayer) {
  ModelSpec s = llama2_7b();
  const int64_t before = s.layer_params(0).attention;
  s.qk_norm = true;
  // One RMSNorm of width head_dim = 128 on queries and one on keys.
  EXPECT_EQ(s.layer_params(0).attention - before, 2 * 128);
}

TEST(ModelSpec, OptCountsOffsetPositionsAndProjections) {
  // A small OPT-like model: h 64, 2 layers, 4 heads, ffn 256, vocab 1000, 32 positions (+2 offset),
  // word_embed_proj_dim 32, tied. Per layer: 12*64^2 + 13*64 = 49,152 + 832 = 49,984.
  // Token table 1000*32 = 32,000; positions (32+2)*64 = 2,176; project_in/out 2*32*64 = 4,096;
  // final LayerNorm 128. Total 2*49,984 + 32,000 + 2,176 + 4,096 + 128 = 138,368.
  ModelSpec s = ModelSpec::gpt(GenericArch{2, 64, 4, 4, 256, 1000, 32});
  s.family = Family::kOpt;
  s.activation = Activation::kRelu;
  s.position_offset = 2;
  s.word_embed_proj_dim = 32;
  s.validate();
  EXPECT_EQ(s.layer_params(0).total(), 49'984);
  const ParamBreakdown b = s.param_breakdown();
  EXPECT_EQ(b.position_embedding, 2'176);
  EXPECT_EQ(b.projections, 4'096);
  EXPECT_EQ(s.total_params(), 138'368);
}

TEST(ModelSpec, MatmulParamsCountTheTiedLmHeadButNotTheLookupOrNorms) {
  // GPT with h 64, 2 layers, ffn 256, vocab 1000: per-layer matmul weights 4*64^2 + 2*64*256 =
  // 49,152; LM head (the tied table) 1000*64 = 64,000. N = 2*49,152 + 64,000 = 162,304.
  const ModelSpec s = ModelSpec::gpt(GenericArch{2, 64, 4, 4, 256, 1000, 32});
  EXPECT_EQ(s.matmul_params_per_token(), 162'304);
}

TEST(ModelSpec, KvCacheBytesPerTokenFollowTheAttentionKind) {
  // Llama-3-8B: 2 (K, V) * 8 kv heads * 128 * 32 layers * 2 bytes = 131,072 bytes.
  const ModelSpec llama3 = ModelSpec::llama(GenericArch{32, 4096, 32, 8, 14336, 128256, 8192});
  EXPECT_EQ(llama3.kv_cache_bytes_per_token().count(), 131'072);
  // DeepSeek-V3 caches the latent: (512 + 64) * 61 layers * 2 bytes = 70,272 bytes.
  EXPECT_EQ(deepseek_v3().kv_cache_bytes_per_token().count(), 70'272);
}

TEST(ModelSpec, SlidingWindowAppliesFromItsFirstLayer) {
  ModelSpec s = llama2_7b();
  EXPECT_FALSE(s.is_sliding_layer(0));
  s.sliding_window = 4096;
  s.sliding_window_first_layer = 28;
  EXPECT_FALSE(s.is_sliding_layer(27));
  EXPECT_TRUE(s.is_sliding_layer(28));
}

TEST(ModelSpec, GptOssCountsMatchItsModelCard) {
  // gpt-oss model card (OpenAI 2025, arXiv:2508.10925), Table 1, gpt-oss-120b: MLP 114.71B, attention
  // 0.96B, embedding + unembedding 1.16B, total 116.83B, active 5.13B (unembedding counted, embedding
  // not). By hand, per layer: attention q 2880*4096 + 4096, k and v 2880*512 + 512 each, o 4096*2880 +
  // 2880, sinks 64 = 26,550,144; MLP router 2880*128 + 128 = 368,768 and 128 experts of (2880*5760 +
  // 5760) + (2880*2880 + 2880) = 24,891,840 each = 3,186,524,288; norms 2*2880.
  const ModelSpec s = testing::gpt_oss();
  const LayerParams l = s.layer_params(0);
  EXPECT_EQ(l.attention, 26'550'144);
  EXPECT_EQ(l.router, 368'768);
  EXPECT_EQ(l.routed_experts, 128LL * 24'891'840);
  EXPECT_EQ(l.mlp, 3'186'524'288);
  EXPECT_EQ(l.norms, 5'760);
  EXPECT_EQ(s.layer_params(1).total(), l.total());  // a full-attention layer has the same weights
  const ParamBreakdown b = s.param_breakdown();
  EXPECT_EQ(b.token_embedding + b.lm_head, 1'158'266'880);  // 2 * 201088 * 2880
  // 36 * (26,550,144 + 3,186,524,288 + 5,760) + 1,158,266,880 + 2880 (final norm).
  EXPECT_EQ(s.total_params(), 116'829'156'672);
  EXPECT_LT(std::abs(static_cast<double>(s.total_params()) / 116.83e9 - 1.0), 0.0005);
  // Active: 36 * (26,550,144 + 5,760 + 368,768 + 4 * 24,891,840) + 2880 + 579,133,440 (unembedding).
  EXPECT_EQ(s.active_params(ActiveEmbedding::kExclude), 5'132'849'472);
  EXPECT_LT(std::abs(static_cast<double>(s.active_params(ActiveEmbedding::kExclude)) / 5.13e9 - 1.0), 0.001);
  // gpt-oss-20b (same table: 20.91B total, 3.61B active): 24 layers of 32 experts.
  const ModelSpec small = testing::gpt_oss(24, 32);
  EXPECT_EQ(small.total_params(), 20'914'757'184);
  EXPECT_EQ(small.active_params(ActiveEmbedding::kExclude), 3'608'307'264);
}

TEST(ModelSpec, LayerTypesPickTheSlidingLayers) {
  // gpt-oss alternates: even layers use the 128-token window, odd ones attend fully.
  ModelSpec s = testing::gpt_oss();
  EXPECT_TRUE(s.is_sliding_layer(0));
  EXPECT_FALSE(s.is_sliding_layer(1));
  EXPECT_TRUE(s.is_sliding_layer(34));
  EXPECT_FALSE(s.is_sliding_layer(35));
  // The per-layer list replaces the first-layer rule, and no window means no sliding layer.
  s.sliding_window_first_layer = 30;
  EXPECT_TRUE(s.is_sliding_layer(0));
  s.sliding_window = 0;
  EXPECT_FALSE(s.is_sliding_layer(0));
}

TEST(ModelSpec, WindowedLayersHoldOnlyTheirWindowOfKvCache) {
  // gpt-oss-120b: 2 x 8 kv heads x 64 x 2 B = 2 KiB per token and layer. A 4,096-token sequence: 18
  // full layers x 4,096 + 18 windowed layers x 128 = 76,032 layer-tokens = 155,713,536 B; per token
  // over all 36 layers 73,728 B. A 100-token sequence fits every window: 36 x 100 x 2,048 B.
  const ModelSpec s = testing::gpt_oss();
  EXPECT_EQ(s.kv_cache_bytes_per_token(2).count(), 73'728);
  EXPECT_EQ(s.kv_cache_bytes_per_sequence(4096, 2).count(), 155'713'536);
  EXPECT_EQ(s.kv_cache_bytes_per_sequence(100, 2).count(), 36LL * 100 * 2048);
  // Without windows a sequence holds tokens x the per-token bytes.
  const ModelSpec dense = llama2_7b();
  EXPECT_EQ(dense.kv_cache_bytes_per_sequence(4096, 2), dense.kv_cache_bytes_per_token(2) * 4096);
}

TEST(ModelSpec, ValidateRejectsALayerTypeListOfTheWrongLength) {
  ModelSpec s = testing::gpt_oss();
  s.sliding_layers.pop_back();
  try {
    s.validate();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "sliding_layers");
    EXPECT_NE(std::string(e.what()).find("35 entries"), std::string::npos) << e.what();
  }
}

TEST(ModelSpec, ValidateNamesTheKeyOfAZeroSize) {
  ModelSpec s = llama2_7b();
  s.hidden = 0;
  try {
    s.validate(Where{"spec.json", 0, ""});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "hidden");
    EXPECT_EQ(e.where().file, "spec.json");
    EXPECT_NE(std::string(e.what()).find("must be positive"), std::string::npos) << e.what();
  }
}

TEST(ModelSpec, ValidateRejectsKvHeadsThatDoNotDivideHeads) {
  ModelSpec s = llama2_7b();
  s.kv_heads = 5;  // 32 % 5 != 0
  try {
    s.validate();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "kv_heads");
  }
}

TEST(ModelSpec, ValidateRejectsTopKAboveTheExpertCount) {
  ModelSpec s = mixtral_8x7b();
  s.moe.top_k = 9;
  try {
    s.validate();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "moe.top_k");
  }
}

TEST(ModelSpec, ValidateRejectsADropoutProbabilityOfOne) {
  ModelSpec s = llama2_7b();
  s.dropout.hidden = 1.0;
  EXPECT_THROW(s.validate(), InputError);
}

TEST(ModelSpec, GenericBuilderRejectsHeadsThatDoNotDivideHidden) {
  try {
    ModelSpec::gpt(GenericArch{2, 100, 7, 7, 400, 1000, 32});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "heads");
    EXPECT_NE(std::string(e.what()).find("must divide hidden"), std::string::npos) << e.what();
  }
}

TEST(ModelSpec, AllMoeModelMayHaveNoDenseFfn) {
  ModelSpec s = mixtral_8x7b();
  s.ffn = 0;  // every layer is MoE, so the dense size is unused
  EXPECT_NO_THROW(s.validate());
  ModelSpec d = deepseek_v3();
  d.ffn = 0;  // but DeepSeek's first three layers are dense
  EXPECT_THROW(d.validate(), InputError);
}

}  // namespace
}  // namespace orrery::model
