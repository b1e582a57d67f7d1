# Scenario checks of `orrery plan serve` (docs/serving.md "Capacity planning"): the table, --json keys,
# determinism across thread counts, infeasible configurations with reasons, exit 1 when nothing meets
# the SLOs, bad input (one line, exit 2, nearest name).
. "$(dirname "$0")/cli_lib.sh"

small=(plan serve --model llama2-7b --gpus a100-sxm-80gb,h100-sxm --tp 1,3 --schedulers vllm,sarathi
       --workload "prompt=512,output=20" --requests 400 --tolerance 0.05 --quiet)
expect table 0 "top [0-9]+ by cost per 1M requests" -- "${small[@]}"
expect infeasible-tp 0 "infeasible configurations" -- "${small[@]}"
expect infeasible-reason 0 "heads" -- "${small[@]}"
expect help 0 "--slo-ttft-p90" -- plan serve --help
expect group-help 0 "serve" -- plan --help

# JSON: documented keys; ranked by cost per 1M requests (non-decreasing); the same for 1 and 3 threads.
"$bin" "${small[@]}" --json --threads 1 >"$tmp/t1.json" 2>/dev/null
"$bin" "${small[@]}" --json --threads 3 >"$tmp/t3.json" 2>/dev/null
if python3 - "$tmp/t1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["command"] == "plan serve"
for k in ("model", "workload", "slos", "counts", "top", "infeasible", "requests", "seed"):
    assert k in j, k
assert [s["name"] for s in j["slos"]] == ["ttft-p90", "tpot-p99"]
costs = [t["usd_per_million_requests"] for t in j["top"]]
assert costs == sorted(costs), costs
for t in j["top"]:
    assert t["max_rate"] > 0 and t["config"]["gpus"] >= 1
    assert t["at_max_rate"]["ttft_s"]["p90"] <= 2.0 and t["at_max_rate"]["tpot_s"]["p99"] <= 0.2
    # cost per 1M requests = GPUs x $/GPU-h / (3600 x rate) x 1e6
    c = t["config"]["gpus"] * t["usd_per_gpu_hour"] / (3600 * t["max_rate"]) * 1e6
    assert abs(c - t["usd_per_million_requests"]) < 1e-9 * c
assert all(i["config"]["tp"] == 3 for i in j["infeasible"])
PY
then pass=$((pass+1)); else echo "FAIL json: keys or ordering"; fail=$((fail+1)); fi
if cmp -s <(grep -v orrery_version "$tmp/t1.json") <(grep -v orrery_version "$tmp/t3.json"); then pass=$((pass+1)); else
  echo "FAIL threads: --threads 1 and 3 differ"; fail=$((fail+1)); fi

# Replicas: two replicas behind round-robin have about twice the capacity. Round-robin splits the Poisson
# stream into two Erlang-2 streams (each less bursty than Poisson at the same rate), so each replica
# carries at least about what one replica carries alone; a 400-request probe's SLO quantiles and the 2%
# search bracket move the figure by a few percent. 1.8x-2.4x catches a capacity not multiplied by the
# replicas (1x) or counted twice (4x).
"$bin" plan serve --model llama2-7b --gpus a100-sxm-80gb --tp 1 --schedulers vllm --workload "prompt=512,output=20" \
  --requests 400 --replicas 1,2 --json --quiet >"$tmp/r.json" 2>/dev/null
if python3 -c "
import json; j = json.load(open('$tmp/r.json'))
r = {t['config']['replicas']: t['max_rate'] for t in j['top']}
assert 1.8 * r[1] <= r[2] <= 2.4 * r[1], r
assert j['router'] == 'round-robin' and j['replica_model'] == 'cluster', (j['router'], j['replica_model'])
"; then pass=$((pass+1)); else echo "FAIL replicas: capacity does not double"; fail=$((fail+1)); fi

# Nothing meets an SLO below one iteration: exit 1 with the reason.
expect no-feasible 1 "no configuration meets the SLOs" -- plan serve --model llama2-7b --gpus a100-sxm-80gb --tp 1 \
  --schedulers vllm --workload "prompt=512,output=20" --requests 200 --slo-e2e-p50 1ms --quiet
# A model that fits nowhere is listed with the memory reason.
expect no-fit 1 "no room for the KV cache" -- plan serve --model llama3-70b --gpus a100-sxm-80gb --tp 1 --schedulers vllm \
  --workload "prompt=512,output=20" --requests 200 --quiet

# Bad input: one line, exit 2, a hint.
expect bad-gpu 2 "did you mean 'a100-sxm-80gb'" -- plan serve --model llama2-7b --gpus a100-sxm-80gbb
one_line_error bad-gpu-line plan serve --model llama2-7b --gpus a100-sxm-80gbb
expect bad-scheduler 2 "unknown scheduler 'vlm'.*vllm" -- plan serve --model llama2-7b --schedulers vlm
expect bad-slo 2 "slo-ttft-p90" -- plan serve --model llama2-7b --slo-ttft-p90 2
expect bad-slo-zero 2 "" -- plan serve --model llama2-7b --slo-tpot-p99 0ms
expect bad-slo-flag 2 "slo-ttft-p90" -- plan serve --model llama2-7b --slo-ttft-p95 2s
expect bad-tp 2 "--tp" -- plan serve --model llama2-7b --tp 1,x
expect bad-tp-zero 2 "--tp" -- plan serve --model llama2-7b --tp 0
expect no-model 2 "--model" -- plan serve
expect bad-model 2 "llama2-7b" -- plan serve --model llama2-7
expect bad-exec 2 "roofline" -- plan serve --model llama2-7b --exec-model rooflin
expect bad-router 2 "unknown router 'least-outstandng'.*least-outstanding" -- plan serve --model llama2-7b --router least-outstandng
one_line_error bad-router-line plan serve --model llama2-7b --router least-outstandng
expect bad-requests 2 "--requests" -- plan serve --model llama2-7b --requests 1
expect bad-tolerance 2 "--tolerance" -- plan serve --model llama2-7b --tolerance 0
expect both-inputs 2 "either --trace or --workload" -- plan serve --model llama2-7b --trace x.csv --workload default
expect missing-trace 2 "" -- plan serve --model llama2-7b --trace "$tmp/none.csv"
expect bad-workload 2 "workload" -- plan serve --model llama2-7b --workload "prompt=abc"
one_line_error bad-workload-line plan serve --model llama2-7b --workload "prompt=abc"

# --calibration FILE applies to the configurations on its GPU only: with half the A100's streaming
# fractions the A100's capacity falls (its decode steps stream the weights and KV about twice as slowly)
# and the H100's stays exactly as it was. A file whose GPU is not among --gpus is an error.
tmpk=$(mktemp -d)
printf 'gpu: a100-sxm-80gb\ngemm_memory_efficiency: 0.39\nmemory_efficiency: 0.45\n' > "$tmpk/half.yaml"
ps=(plan serve --model llama2-7b --gpus a100-sxm-80gb,h100-sxm --tp 1 --schedulers vllm --requests 500)
if python3 - "$("$bin" --json "${ps[@]}" 2>/dev/null)" "$("$bin" --json "${ps[@]}" --calibration "$tmpk/half.yaml" 2>/dev/null)" <<'PY' 2>/dev/null
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
ra = {t["config"]["gpu"]: t["max_rate"] for t in a["top"]}
rb = {t["config"]["gpu"]: t["max_rate"] for t in b["top"]}
assert a["calibration"] is None and b["calibration"].endswith("half.yaml")
assert rb["h100-sxm"] == ra["h100-sxm"]
assert rb["a100-sxm-80gb"] < 0.85 * ra["a100-sxm-80gb"], (ra, rb)
PY
then pass=$((pass+1)); else echo "FAIL plan serve calibration"; fail=$((fail+1)); fi
expect plan-serve-calibration-gpu 2 "is for a GPU that is not among --gpus" -- plan serve --model llama2-7b --gpus h100-sxm --tp 1 --schedulers vllm --requests 200 --calibration "$tmpk/half.yaml"
rm -rf "$tmpk"

# --stable-only: no latency SLO, the largest stable rate (what limits every configuration just above it
# is instability; the run at the capacity has a TTFT slope within serve/capacity.h's 0.005 s/s).
st=(plan serve --model llama2-7b --gpus a100-sxm-80gb --tp 1 --schedulers vllm,sarathi --workload "prompt=512,output=20"
    --requests 2000 --stable-only --quiet)
expect stable-only-table 0 "at the largest stable rate" -- "${st[@]}"
expect stable-only-slos 0 "SLOs: none" -- "${st[@]}"
if python3 - "$("$bin" --json "${st[@]}" 2>/dev/null)" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
assert j["stable_only"] is True and j["slos"] == [], (j["stable_only"], j["slos"])
assert j["profile"] is None and j["kv_tokens_override"] is None and j["cpu_overhead_s"] == 0.001
assert len(j["top"]) == 2
for t in j["top"]:
    assert t["limit"] == "unstable", t["limit"]
    assert t["at_max_rate"]["latency_slope"] <= 0.005
PY
then pass=$((pass+1)); else echo "FAIL stable-only json"; fail=$((fail+1)); fi
expect stable-only-with-slo 2 "--stable-only.*slo-ttft-p90" -- plan serve --model llama2-7b --stable-only --slo-ttft-p90 2s
one_line_error stable-only-with-slo-line plan serve --model llama2-7b --stable-only --slo-ttft-p90 2s

# vidur-profile from a measured per-layer table (a small synthetic one here: 0.3 ms per layer at one
# token, 1 ms at 512, 8 ms at 4,096; TP 1 only) and --kv-tokens. With --kv-tokens 1000 (63 blocks of
# 16) one (512, 20) request holds 32 blocks at admission and 34 at its end, so a second is never
# admitted beside it (32 + 32 > 63 - the 1% watermark): requests are served one at a time, each taking
# at least 20 decode steps x 32 layers x 0.3 ms = 192 ms, so the stable rate is below 1 / 0.192 =
# 5.2 req/s; with the memory plan's cache (about 400k tokens) requests batch and it is over twice that.
printf 'num_tokens,num_tensor_parallel_workers,time_stats.emb.median,time_stats.attn_pre_proj.median\n1,1,0.01,0.3\n512,1,0.02,1.0\n4096,1,0.1,8.0\n' >"$tmp/mlp.csv"
pf=(plan serve --model llama2-7b --gpus a100-sxm-80gb --tp 1 --schedulers vllm --workload "prompt=512,output=20"
    --requests 1000 --stable-only --exec-model vidur-profile --profile "$tmp/mlp.csv" --quiet --json)
if python3 - "$("$bin" "${pf[@]}" 2>/dev/null)" "$("$bin" "${pf[@]}" --kv-tokens 1000 2>/dev/null)" \
    "$("$bin" "${pf[@]}" --cpu-overhead 0ms --cpu-overhead-per-seq 0us 2>/dev/null)" <<'PY'
import json, sys
full, small, nocpu = (json.loads(x) for x in sys.argv[1:4])
assert full["exec_model"] == "vidur-profile" and full["profile"].endswith("mlp.csv")
rf, rs, r0 = (j["top"][0]["max_rate"] for j in (full, small, nocpu))
assert small["kv_tokens_override"] == 1000 and small["top"][0]["kv_capacity_tokens"] == 1008
assert 0 < rs < 1 / 0.192, rs
assert rf > 2 * rs, (rf, rs)
assert nocpu["cpu_overhead_s"] == 0 and r0 >= rf, (r0, rf)
PY
then pass=$((pass+1)); else echo "FAIL vidur-profile / kv-tokens / cpu-overhead"; fail=$((fail+1)); fi
# A TP degree the table lacks rules out those configurations only, with the reason.
expect profile-missing-tp 0 "profile no row for TP 2" -- plan serve --model llama2-7b --gpus a100-sxm-80gb --tp 1,2 \
  --schedulers vllm --workload "prompt=512,output=20" --requests 300 --exec-model vidur-profile --profile "$tmp/mlp.csv" --quiet
expect profile-needed 2 "--profile.*missing" -- plan serve --model llama2-7b --exec-model vidur-profile
expect profile-unread 2 "--profile.*vidur-profile only" -- plan serve --model llama2-7b --profile "$tmp/mlp.csv"
expect profile-two-gpus 2 "one GPU type" -- plan serve --model llama2-7b --exec-model vidur-profile --profile "$tmp/mlp.csv"
expect profile-no-file 2 "cannot open" -- plan serve --model llama2-7b --gpus a100-sxm-80gb --exec-model vidur-profile --profile "$tmp/none.csv"
printf 'num_tokens,num_tensor_parallel_workers,time_stats.emb.median,time_stats.attn_pre_proj.median\n1,1,0.01,x\n' >"$tmp/bad.csv"
expect profile-bad-line 2 "bad.csv:2" -- plan serve --model llama2-7b --gpus a100-sxm-80gb --exec-model vidur-profile --profile "$tmp/bad.csv"
one_line_error profile-bad-line-one plan serve --model llama2-7b --gpus a100-sxm-80gb --exec-model vidur-profile --profile "$tmp/bad.csv"
# A KV capacity below one request's prompt (16 tokens against 512) rejects every request at any rate:
# nothing is stable, exit 1, with the reason.
expect stable-only-none 1 "no configuration is stable at any rate" -- plan serve --model llama2-7b --gpus a100-sxm-80gb \
  --tp 1 --schedulers vllm --workload "prompt=512,output=20" --requests 200 --kv-tokens 1 --stable-only --quiet
expect stable-only-none-reason 1 "is stable \(rejects\)" -- plan serve --model llama2-7b --gpus a100-sxm-80gb \
  --tp 1 --schedulers vllm --workload "prompt=512,output=20" --requests 200 --kv-tokens 1 --stable-only --quiet
expect bad-kv-tokens 2 "--kv-tokens" -- plan serve --model llama2-7b --kv-tokens -5
expect bad-cpu-overhead 2 "--cpu-overhead" -- plan serve --model llama2-7b --cpu-overhead 1

expect plan-serve-expert-weights-dense 2 "'llama2-7b' has no routed experts to store as fp8" -- plan serve --model llama2-7b --expert-weights fp8

finish plan_serve
