#!/usr/bin/env bash
# End-to-end checks of `orrery demo` (src/cli/demo_cmd.cc): the results folder is written atomically and
# byte-identically for the same inputs, a bad input leaves nothing behind, and the pillars' answers hold
# what they must whatever the models' constants. Run by ctest (label fast) with ORRERY set to the binary.
source "$(dirname "$0")/cli_lib.sh"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"  # the runs below change folder

# Demo: writes a results folder atomically; same inputs give byte-identical files.
demo_small=(--allreduce-size 32MiB --cluster-machines 4 --serve-requests 400 --gossip-iters 200)
# The two runs go at once (two cores; the determinism must not depend on what runs beside), each from
# its own folder with the same relative --out, which the results record.
mkdir -p "$tmp/a" "$tmp/b"
(cd "$tmp/b" && "$bin" demo --out d1 --quiet "${demo_small[@]}" > "$tmp/b.out" 2>&1) &
first=$!
(cd "$tmp/a" && expect demo 0 "" -- demo --out d1 --quiet "${demo_small[@]}"; echo "$pass $fail" > "$tmp/a.tally")
read -r pass fail < "$tmp/a.tally"
if wait "$first"; then pass=$((pass+1)); else echo "FAIL demo-again: $(head -5 "$tmp/b.out")"; fail=$((fail+1)); fi
mv "$tmp/a/d1" "$tmp/d1"
if [ -f "$tmp/d1/demo.json" ] && diff -r "$tmp/d1" "$tmp/b/d1" > /dev/null; then pass=$((pass+1)); else echo "FAIL demo-deterministic"; fail=$((fail+1)); fi
# An error in the inputs leaves no output folder behind.
expect demo-bad-mfu 2 "--mfu: must be in \(0, 1\]" -- demo --out "$tmp/bad" --mfu 1.5
if [ -e "$tmp/bad" ]; then echo "FAIL demo-bad-left-output"; fail=$((fail+1)); else pass=$((pass+1)); fi
expect demo-bad-model 2 "unknown model 'llama3-7b'.*did you mean" -- demo --out "$tmp/bad" --models llama3-7b
if ls "$tmp/d1" | grep -q '\.tmp\.'; then echo "FAIL demo-left-temporary"; fail=$((fail+1)); else pass=$((pass+1)); fi
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["seed"] is not None and "config" in d and d["orrery_version"]' "$tmp/d1/demo.json"; then
  pass=$((pass+1)); else echo "FAIL demo-json-provenance"; fail=$((fail+1)); fi
# The pillars' questions (Q4-Q6), checked against what holds whatever the models' constants:
# - Q4: the first try (Llama-3-70B, TP 8 x PP 2, no sharding) keeps bf16 weights (2 B), fp32 gradients
#   (4 B) and fp32 master weights, Adam moments (12 B) of total / (tp pp) parameters on every GPU (its two
#   stages hold 40 layers each plus the embedding or the equally large output layer): >= 18 B x that,
#   73.9 GiB, before any activation, within 6 GiB of the 79.65 GiB budget; with 8k-token activations it
#   does not fit (fits = false exactly when the peak exceeds the budget). The planner's plans fit.
# - Q5: a scheduler that reserves every request's whole length (orca) admits no more than paged vLLM,
#   so its largest stable rate is not above vLLM's; vLLM and Sarathi are stable at the demo's 8 req/s.
# - Q6: gradient tracking gossips two d-vectors per message where DSGD gossips one: exactly twice the
#   bytes; asynchronous nodes never wait, so by the same simulated time they complete at least as many
#   iterations as synchronous DSGD, and their 200 iterations take no longer.
if python3 - "$tmp/d1/demo.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r, cfg = d["results"], d["config"]
t = r["training"]
total = next(m["total_params"] for m in r["models"] if m["name"] == t["model"])
per_gpu = total / (cfg["training"]["tp"] * cfg["training"]["pp"])
ft = t["first_try"]
assert ft["peak_memory_bytes"] >= 17.99 * per_gpu, (ft, per_gpu)
assert ft["fits"] is False and ft["peak_memory_bytes"] > t["memory_budget_bytes"]
assert ft["memory"]["weights"] + ft["memory"]["gradients"] + ft["memory"]["optimizer"] >= 17.99 * per_gpu
assert len(t["planner"]["top"]) == cfg["training"]["top"]
speeds = [p["tokens_per_s_per_gpu"] for p in t["planner"]["top"]]
assert speeds == sorted(speeds, reverse=True)
for p in t["planner"]["top"]:
    assert p["peak_memory_bytes"] <= t["memory_budget_bytes"] and 0 < p["mfu"] < 1
s = {x["scheduler"]: x for x in r["serving"]["schedulers"]}
rate = r["serving"]["rate"]
for name in ("vllm", "sarathi"):
    assert s[name]["stable"] and s[name]["largest_stable_rate"] >= rate, s[name]
assert s["orca"]["largest_stable_rate"] <= s["vllm"]["largest_stable_rate"]
g = {(x["algorithm"], x["time"]): x for x in r["decentralized"]["runs"]}
assert g[("gt", "sync")]["bytes_sent"] == 2 * g[("dsgd", "sync")]["bytes_sent"]
for a in ("dsgd", "push-sum"):
    assert g[(a, "async")]["iterations_by_horizon"] >= g[("dsgd", "sync")]["iterations_by_horizon"]
    assert g[(a, "async")]["final_sim_time_s"] <= g[("dsgd", "sync")]["final_sim_time_s"]
for f in ("training.csv", "serving.csv", "decentralized.csv"):
    assert open(sys.argv[1].replace("demo.json", f)).read().count("\n") >= 3
PY
then pass=$((pass+1)); else echo "FAIL demo-pillars"; fail=$((fail+1)); fi
expect demo-bad-train-gpus 2 "--train-gpus.*multiple of tp x pp" -- demo --out "$tmp/bad" --train-gpus 63
expect demo-bad-scheduler 2 "--serve-schedulers.*unknown scheduler 'vlm'.*vllm" -- demo --out "$tmp/bad" --serve-schedulers vlm,sarathi
expect demo-bad-topology 2 "--gossip-topology" -- demo --out "$tmp/bad" --gossip-topology ring:x
expect demo-bad-rate 2 "--serve-rate" -- demo --out "$tmp/bad" --serve-rate 0
expect demo-bad-gbs 2 "--train-gbs: dp\*mbs=4\*1=4 does not divide gbs=7" -- demo --out "$tmp/bad" --train-gbs 7
expect demo-bad-tp 2 "--train-tp: tp=3 does not divide heads=64" -- demo --out "$tmp/bad" --train-tp 3 --train-gpus 48
expect demo-bad-seq 2 "--train-seq" -- demo --out "$tmp/bad" --train-seq 99999999999
if [ -e "$tmp/bad" ]; then echo "FAIL demo-bad-pillar-left-output"; fail=$((fail+1)); else pass=$((pass+1)); fi

finish demo
