// Video diffusion transformers (Family::kDit): parameters, token counts, geometry errors, and the
// op inventory's FLOPs and saved activations, each against a hand derivation.
#include <gtest/gtest.h>

#include <string>

#include "model/model_spec.h"
#include "model/op_inventory.h"

namespace orrery::model {
namespace {

// Wan2.1-T2V-14B (huggingface.co/Wan-AI/Wan2.1-T2V-14B-Diffusers transformer/config.json): 40 blocks,
// 40 heads of 128 (h = 5120), ffn 13824, text_dim 4096, in/out channels 16, patch (1, 2, 2), freq 256.
ModelSpec wan_14b() { return ModelSpec::dit_model(40, 5120, 40, 13824, "wan2.1-t2v-14b"); }
// Wan2.1-T2V-1.3B: 30 blocks, 12 heads of 128 (h = 1536), ffn 8960, the rest as the 14B; 480P video.
ModelSpec wan_1_3b() {
  ModelSpec s = ModelSpec::dit_model(30, 1536, 12, 8960, "wan2.1-t2v-1.3b");
  s.dit.height = 480;
  s.dit.width = 832;
  s.validate();
  return s;
}

double d(int64_t v) { return static_cast<double>(v); }

TEST(DitParams, Wan14bBlockAndTotalMatchTheHandCount) {
  // One block, h = 5120, f = 13824 (diffusers WanTransformerBlock):
  //   self-attention q/k/v/out with biases 4h^2 + 4h = 104,878,080, + q and k RMSNorm across heads 2h
  //   = 10,240: 104,888,320; cross-attention the same 104,888,320;
  //   norms: affine cross-attention LayerNorm 2h = 10,240 + adaLN table 6h = 30,720: 40,960;
  //   MLP 2hf + f + h = 141,557,760 + 13,824 + 5,120 = 141,576,704.
  //   Block: 8h^2 + 2hf + 21h + f = 351,394,304.
  const ModelSpec s = wan_14b();
  const ParamBreakdown b = s.param_breakdown();
  const LayerParams& l = b.layers.at(0);
  EXPECT_EQ(l.attention, 104'888'320);
  EXPECT_EQ(l.cross_attention, 104'888'320);
  EXPECT_EQ(l.norms, 40'960);
  EXPECT_EQ(l.mlp, 141'576'704);
  EXPECT_EQ(l.total(), 351'394'304);
  // Conditioning: patch embedding 16*1*2*2*5120 + 5120 = 332,800; timestep MLP 256*5120 + 5120 +
  // 5120^2 + 5120 = 27,535,360; modulation projection 6*5120^2 + 6*5120 = 157,317,120; text MLP
  // 4096*5120 + 5120 + 5120^2 + 5120 = 47,196,160. Sum 232,381,440.
  EXPECT_EQ(b.conditioning, 232'381'440);
  // Output: shift/scale table 2h = 10,240; projection 5120*64 + 64 = 327,744.
  EXPECT_EQ(b.final_norm, 10'240);
  EXPECT_EQ(b.lm_head, 327'744);
  // Total: 40 * 351,394,304 + 232,381,440 + 10,240 + 327,744 = 14,288,491,584.
  EXPECT_EQ(s.total_params(), 14'288'491'584);
  // Published: "14B" (model card, a rounded name): +2.1%. The bf16 transformer checkpoint is 28.6 GB
  // (2 bytes per parameter: 14.3e9), which our count matches to 0.1%.
  EXPECT_LT(d(s.total_params()) / 14e9 - 1.0, 0.025);
  EXPECT_NEAR(2.0 * d(s.total_params()) / 28.6e9, 1.0, 0.002);
  // Every parameter is used by every sample; there is no token table.
  EXPECT_EQ(s.active_params(), s.total_params());
  EXPECT_EQ(s.embedding_params(), 0);
}

TEST(DitParams, Wan1_3bTotalMatchesTheHandCount) {
  // h = 1536, f = 8960: block 8h^2 + 2hf + 21h + f = 18,874,368 + 27,525,120 + 32,256 + 8,960 =
  // 46,440,704; 30 blocks 1,393,221,120. Conditioning 64*1536 + 1536 + 256*1536 + 1536 + 1536^2 + 1536
  // + 6*1536^2 + 6*1536 + 4096*1536 + 1536 + 1536^2 + 1536 = 25,674,240; output 2*1536 + 1536*64 + 64
  // = 101,440. Total 1,418,996,800 ("1.3B" by name; 2.84 GB in bf16 = 1.42e9).
  const ModelSpec s = wan_1_3b();
  EXPECT_EQ(s.param_breakdown().layers.at(0).total(), 46'440'704);
  EXPECT_EQ(s.total_params(), 1'418'996'800);
  EXPECT_NEAR(2.0 * d(s.total_params()) / 2.84e9, 1.0, 0.002);
}

TEST(DitParams, MatmulParamsPerVideoToken) {
  // Per video token: patch embedding 64*h, per block self-attention 4h^2 + cross q/out 2h^2 + MLP 2hf,
  // output projection 64*h. h = 5120: 327,680 + 40 * (157,286,400 + 141,557,760) + 327,680
  // = 11,954,421,760.
  EXPECT_EQ(wan_14b().matmul_params_per_token(), 11'954'421'760);
}

TEST(DitTokens, Wan720pIs21By45By80) {
  // 81 frames -> (81 - 1)/4 + 1 = 21 latent frames; 720/8/2 = 45 rows; 1280/8/2 = 80 columns.
  const ModelSpec s = wan_14b();
  EXPECT_EQ(s.dit.latent_frames(), 21);
  EXPECT_EQ(s.dit.tokens(), 75'600);
  // 480P (832 x 480): 21 x 30 x 52 = 32,760 (the figure Wan2.1's generate.py uses for 480P,
  // seq_len = ceil(h*w/(ph*pw) * F / sp) with 1 GPU).
  EXPECT_EQ(wan_1_3b().dit.tokens(), 32'760);
  // A temporal patch of 3 over the 21 latent frames: 7 x 45 x 80 = 25,200.
  DitSpec v = s.dit;
  v.patch_t = 3;
  EXPECT_TRUE(video_error(v).field.empty());
  EXPECT_EQ(v.tokens(), 25'200);
}

// The field named by validate() for a geometry that does not divide.
std::string failing_key(const DitSpec& v) {
  ModelSpec s = wan_14b();
  s.dit = v;
  try {
    s.validate(Where{"<test>", 0, ""});
  } catch (const InputError& e) {
    return e.where().key;
  }
  return "";
}

TEST(DitTokens, GeometryThatDoesNotDivideNamesItsField) {
  const DitSpec ok = wan_14b().dit;
  DitSpec v = ok;
  v.frames = 80;  // 79 is not a multiple of 4
  EXPECT_EQ(failing_key(v), "dit.frames");
  EXPECT_NE(video_error(v).message.find("e.g. 77 frames"), std::string::npos) << video_error(v).message;
  v = ok;
  v.height = 700;  // 700 % 16 = 12
  EXPECT_EQ(failing_key(v), "dit.height");
  v = ok;
  v.width = 1000;  // 1000 % 16 = 8
  EXPECT_EQ(failing_key(v), "dit.width");
  v = ok;
  v.patch_t = 2;  // 21 latent frames are odd
  EXPECT_EQ(failing_key(v), "dit.patch_t");
  v = ok;
  v.frames = 4'000'000'001;  // 1e9 latent frames x 3,600 patches: more than 2^31 tokens
  EXPECT_EQ(failing_key(v), "dit.frames");
  v.height = 1'600'000'000;  // the bound is checked without overflowing int64
  v.width = 1'600'000'000;
  EXPECT_EQ(failing_key(v), "dit.frames");
  v = ok;
  v.text_tokens = 0;
  EXPECT_EQ(failing_key(v), "dit.text_tokens");
  EXPECT_EQ(failing_key(ok), "");
  // heads x head_dim must be the hidden size.
  ModelSpec s = wan_14b();
  s.head_dim = 100;
  EXPECT_THROW(s.validate(), InputError);
  // A DiT has no vocabulary.
  s = wan_14b();
  s.vocab = 32000;
  EXPECT_THROW(s.validate(), InputError);
}

TEST(DitInventory, BlockForwardFlopsPerTokenMatchTheDerivation) {
  // Forward matmul FLOPs of one block for a sample of s video tokens and T text tokens, per video token:
  //   GEMMs on video tokens 2 * (4h^2 + 2h^2 + 2hf) (self q/k/v/out, cross q/out, MLP up/down);
  //   self-attention, no mask: 2 * s * a * (dh + dh) / per query = 4 * s * h;
  //   cross-attention over T keys: 4 * T * h;
  //   cross-attention k/v projection of the T text tokens: 2 * T * h * 2h, i.e. 4 * T * h^2 / s.
  const ModelSpec m = wan_14b();
  const double h = d(m.hidden), f = d(m.ffn), T = d(m.dit.text_tokens);
  for (const int64_t s : {int64_t{1024}, int64_t{75'600}}) {
    const double sd = d(s);
    const double expected = 2.0 * (6.0 * h * h + 2.0 * h * f) + 4.0 * sd * h + 4.0 * T * h + 4.0 * T * h * h / sd;
    for (AttentionFlops convention : {AttentionFlops::kCausal, AttentionFlops::kFull}) {
      InventoryOptions o;
      o.attention = convention;  // a DiT's attention has no mask: the convention must not matter
      const std::vector<Op> ops = layer_ops(m, 0, Shape::training(1, s), o);
      EXPECT_NEAR(forward_flops(ops).count() / sd / expected, 1.0, 1e-12) << "s = " << s;
      EXPECT_DOUBLE_EQ(backward_flops(ops).count(), 2.0 * forward_flops(ops).count());
    }
  }
}

TEST(DitInventory, AttentionOpsCarryTheirMaskAndKvLength) {
  const ModelSpec m = wan_14b();
  const std::vector<Op> ops = layer_ops(m, 0, Shape::training(2, 75'600));
  int found = 0;
  for (const Op& op : ops) {
    if (op.kind != OpKind::kAttention) continue;
    EXPECT_EQ(op.mask, AttentionMask::kNone) << op.name;
    if (op.name == "attn.core") {
      EXPECT_EQ(op.gemm.n, 75'600);
    }
    if (op.name == "xattn.core") {
      EXPECT_EQ(op.gemm.n, 512);
    }
    EXPECT_EQ(op.gemm.count, 2 * 40) << op.name;  // batch x heads
    ++found;
  }
  EXPECT_EQ(found, 2);
  // An LLM's self-attention stays causal.
  const ModelSpec llama = ModelSpec::llama(GenericArch{2, 256, 4, 4, 512, 1000, 128});
  for (const Op& op : layer_ops(llama, 0, Shape::training(1, 128))) {
    if (op.kind == OpKind::kAttention) {
      EXPECT_EQ(op.mask, AttentionMask::kCausal);
    }
  }
}

TEST(DitInventory, OpParametersAddUpToTheParameterCount) {
  // The ops own every parameter exactly once: per block the layer total, before the blocks the
  // conditioning, after them the output table and projection.
  const ModelSpec m = wan_14b();
  const Inventory inv = build_inventory(m, Shape::training(1, 4096));
  auto params = [](const std::vector<Op>& ops) {
    int64_t n = 0;
    for (const Op& op : ops) n += op.params;
    return n;
  };
  const ParamBreakdown b = m.param_breakdown();
  ASSERT_EQ(inv.groups.size(), 1u);
  EXPECT_EQ(inv.groups[0].layer_indices.size(), 40u);
  EXPECT_EQ(params(inv.groups[0].ops), b.layers[0].total());
  EXPECT_EQ(params(inv.pre_ops), b.conditioning);
  EXPECT_EQ(params(inv.post_ops), b.final_norm + b.lm_head);
}

TEST(DitInventory, SavedActivationsPerBlock) {
  // Korthikanti's rule (each op keeps the inputs its backward needs; flash attention keeps Q, K, V and
  // an fp32 log-sum-exp per query and head), 2-byte activations, batch 1, s video and T text tokens:
  //   s*h tensors: norm1, modulate1, qkv input, q and k RMSNorm (2), attention Q/K/V (3), out input,
  //   gate1, cross norm, cross q input, cross q norm (1), cross attention Q (1), cross out input,
  //   norm3, modulate3, MLP up input, gate3: 19 of them;
  //   s*f tensors: GeLU input and down input: 2;  T*h tensors: cross k norm and cross K, V: 3;
  //   log-sum-exp: 2 attentions x 4 bytes x a x s.
  //   bytes = 2 * (19 s h + 2 s f + 3 T h) + 8 a s.
  const ModelSpec m = wan_14b();
  InventoryOptions o;
  o.flash_attention = true;
  const int64_t s = 75'600;
  const double h = d(m.hidden), f = d(m.ffn), T = d(m.dit.text_tokens), a = d(m.heads), sd = d(s);
  const double expected = 2.0 * (19.0 * sd * h + 2.0 * sd * f + 3.0 * T * h) + 8.0 * a * sd;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 0, Shape::training(1, s), o).to_double(), expected);
}

TEST(DitInventory, TrainingFlopsPerTokenAddTheEndsToTheBlocks) {
  // training_flops_per_token = 3 x forward; forward = 40 blocks (above) + patch embedding 2*64*h +
  // output projection 2*h*64 per token + the per-sample conditioning: timestep MLP and modulation
  // projection 2*(256h + h^2 + 6h^2) once, text MLP 2*T*(4096h + h^2), both divided by s.
  const ModelSpec m = wan_14b();
  const int64_t s = 75'600;
  const double h = d(m.hidden), f = d(m.ffn), T = d(m.dit.text_tokens), sd = d(s);
  const double block = 2.0 * (6.0 * h * h + 2.0 * h * f) + 4.0 * sd * h + 4.0 * T * h + 4.0 * T * h * h / sd;
  const double ends = 4.0 * 64.0 * h + 2.0 * (256.0 * h + 7.0 * h * h) / sd + 2.0 * T * (4096.0 * h + h * h) / sd;
  const double expected = 3.0 * (40.0 * block + ends);
  EXPECT_NEAR(training_flops_per_token(m, s, AttentionFlops::kFull).count() / expected, 1.0, 1e-12);
}

}  // namespace
}  // namespace orrery::model
