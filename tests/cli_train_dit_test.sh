# Scenario checks of `orrery train` with a video diffusion transformer (docs/training.md, "Video
# diffusion transformers"): the token count from frames, resolution, VAE and patch; --json; bad input.
. "$(dirname "$0")/cli_lib.sh"

wan=(train --model wan2.1-t2v-14b --gpu h100-sxm --gpus 64 --tp 2 --cp 4 --sp yes --dp-sharding fsdp --gbs 64)
# 81 frames of 720x1280, VAE 4x8x8, patch 1x2x2: 21 x 45 x 80 = 75,600 tokens.
expect tokens 0 "75600 = 21 x 45 x 80" -- "${wan[@]}" --recompute full
expect fits 0 "fits +yes" -- "${wan[@]}" --recompute full
# Without recompute the 40 blocks keep 94.9 GB of activations per GPU (src/train/dit_train_test.cc).
expect no-fit 0 "fits +NO" -- "${wan[@]}"
# 480P (480x832): 21 x 30 x 52 = 32,760; 121 frames at 480x832: 31 x 30 x 52 = 48,360.
expect tokens-480p 0 "32760 = 21 x 30 x 52" -- "${wan[@]}" --recompute full --resolution 480x832
expect tokens-flags 0 "48360 = 31 x 30 x 52" -- "${wan[@]}" --recompute full --frames 121 --height 480 --width 832
# A temporal patch of 3: 7 x 45 x 80 = 25,200.
expect patch 0 "25200 = 7 x 45 x 80" -- "${wan[@]}" --recompute full --patch 3x2x2

if "$bin" --json "${wan[@]}" --recompute full --text-tokens 256 | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["plan"]["seq"] == 75600, d["plan"]["seq"]
v = d["video"]
assert (v["frames"], v["height"], v["width"], v["latent_frames"], v["tokens"], v["text_tokens"]) == (81, 720, 1280, 21, 75600, 256), v
assert v["vae_compression"] == [4, 8, 8] and v["patch"] == [1, 2, 2]
assert d["fits"] is True and 0 < d["mfu"] < d["hfu"] < 1
' 2>/dev/null; then pass=$((pass+1)); else echo "FAIL json video"; fail=$((fail+1)); fi

expect catalog-show 0 "wan2.1-t2v-14b \(dit\)" -- catalog show model wan2.1-t2v-14b
# catalog show: the video sample and its token count, FLOPs at that count, no causal row or KV cache.
expect catalog-show-tokens 0 "video tokens +75600 = 21 x 45 x 80" -- catalog show model wan2.1-t2v-14b
expect catalog-show-flops-seq 0 "FLOPs at sequence length 75600, the video token count" -- catalog show model wan2.1-t2v-14b
expect catalog-show-seq-given 0 "FLOPs at sequence length 4096 \(PaLM" -- catalog show model wan2.1-t2v-14b --seq 4096
if "$bin" --json catalog show model wan2.1-t2v-14b | python3 -c '
import json, sys
e = json.load(sys.stdin)["entry"]
assert e["video"]["tokens"] == 75600 and e["flops"]["seq"] == 75600, e["video"]
assert e["flops"]["training_per_token_causal"] is None and e["kv_cache_bytes_per_token_bf16"] is None
# 12 L H Q T of full attention over T = 75,600 (40 layers, 40 heads of 128) is most of it: 1.858e11 + 6N.
assert e["flops"]["training_per_token"] > e["flops"]["six_n_per_token"] + 12 * 40 * 40 * 128 * 75600
' 2>/dev/null; then pass=$((pass+1)); else echo "FAIL catalog show json video"; fail=$((fail+1)); fi
# Llama-3-8B KV per token: 32 layers x 8 kv heads x 128 x (K, V) x 2 bytes = 131,072.
if "$bin" --json catalog show model llama3-8b | python3 -c '
import json, sys
e = json.load(sys.stdin)["entry"]
assert e["video"] is None and e["kv_cache_bytes_per_token_bf16"] == 131072 and e["flops"]["training_per_token_causal"] > 0
' 2>/dev/null; then pass=$((pass+1)); else echo "FAIL catalog show json llm"; fail=$((fail+1)); fi
expect catalog-list 0 "wan2.1-t2v-1.3b +dit" -- catalog list models

# Bad input: one line, exit 2, naming the flag.
expect frames 2 "--frames: frames - 1 = 79 must be a multiple of the VAE's temporal compression 4" -- "${wan[@]}" --frames 80
one_line_error frames-one-line "${wan[@]}" --frames 80
expect frames-negative 2 "--frames: frames must be positive" -- "${wan[@]}" --frames -3
expect frames-huge 2 "--frames: frames x height x width give more than 2\^31 video tokens" -- "${wan[@]}" --frames 4000000001
expect resolution 2 "--resolution: height = 700 must be a multiple" -- "${wan[@]}" --resolution 700x1280
expect resolution-form 2 "--resolution: expected 2 positive integers" -- "${wan[@]}" --resolution 720
expect width 2 "--width: width = 1000 must be a multiple" -- "${wan[@]}" --width 1000
expect vae 2 "--vae-compression: the height and width compression must be equal" -- "${wan[@]}" --vae-compression 4x8x16
expect patch-t 2 "--patch: patch_t = 2 does not divide the 21 latent frames" -- "${wan[@]}" --patch 2x2x2
expect text-tokens 2 "--text-tokens: text_tokens must be positive" -- "${wan[@]}" --text-tokens -1
expect seq-conflict 2 "--seq: a DiT's sequence is its video token count, 75600" -- "${wan[@]}" --seq 4096
expect seq-same 0 "75600" -- "${wan[@]}" --recompute full --seq 75600
expect not-dit 2 "--frames: video flags need a video diffusion transformer" -- train --model llama3-8b --gpu h100-sxm --gpus 8 --gbs 8 --frames 81
one_line_error not-dit-one-line train --model llama3-8b --gpu h100-sxm --gpus 8 --gbs 8 --frames 81

# plan train derives the sequence from the video the same way (no --seq needed): 480x832 is 32,760.
plan=(plan train --model wan2.1-t2v-14b --gpu h100-sxm --gpus 64 --gbs 64 --top 2 --max-cp 4 --quiet)
expect plan-default-seq 0 "seq 75600, global batch 64" -- "${plan[@]}"
expect plan-480p 0 "seq 32760, global batch 64" -- "${plan[@]}" --resolution 480x832
if "$bin" --json "${plan[@]}" --frames 121 --resolution 480x832 | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["seq"] == 48360, d["seq"]
' 2>/dev/null; then pass=$((pass+1)); else echo "FAIL plan json seq"; fail=$((fail+1)); fi
expect plan-seq-contradicts 2 "--seq: a DiT's sequence is its video token count, 75600" -- "${plan[@]}" --seq 4096
expect plan-not-dit 2 "--resolution: video flags need a video diffusion transformer" -- plan train --model llama3-8b --gpu h100-sxm --gpus 8 --gbs 8 --seq 4096 --resolution 720x1280
expect plan-bad-resolution 2 "--resolution: expected 2 positive integers" -- "${plan[@]}" --resolution 720by1280

finish cli_train_dit
