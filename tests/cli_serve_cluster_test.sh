#!/usr/bin/env bash
# `orrery serve --replicas N --router R` and `--disagg P:D`: every router, the JSON keys of a cluster
# (per-replica lines, router name, KV transfers), per-request CSV with the replica columns, determinism,
# and the bad-input rules (exit 2, one line, nearest router name).
source "$(dirname "$0")/cli_lib.sh"

wl="prompt=256,output=32"
expect cluster-list 0 "prefix-aware" -- serve list
expect cluster-help 0 "--disagg" -- serve --help
for r in round-robin least-outstanding least-kv prefix-aware; do
  expect "router-$r" 0 "successful requests +300" -- serve --replicas 3 --router "$r" --workload "$wl" --rate 20 --requests 300
done
expect disagg 0 "KV transfers" -- serve --disagg 1:2 --workload "$wl" --rate 10 --requests 200
expect disagg-sarathi 0 "successful requests +200" -- serve --disagg 2:1 --scheduler sarathi --workload "$wl" --rate 10 --requests 200
expect disagg-decode-tp 0 "decode \(a100-sxm-80gb TP 2\)" -- serve --disagg 1:1 --decode-tp 2 --workload "$wl" --rate 5 --requests 50
expect disagg-decode-gpu 0 "h100-sxm TP 1" -- serve --disagg 1:1 --decode-gpu h100-sxm --workload "$wl" --rate 5 --requests 50
expect disagg-interleaved 0 "KV transfers" -- serve --disagg 2:2 --placement interleaved --workload "$wl" --rate 5 --requests 50

# --json: the single-replica metric names over the cluster, plus router, per-replica lines, transfers.
if "$bin" serve --replicas 2 --router least-outstanding --workload "$wl" --rate 10 --requests 200 --json | python3 -c '
import json,sys; d=json.load(sys.stdin); r=d["result"]; c=d["config"]["cluster"]
assert r["completed"]==200 and c["router"]=="least-outstanding" and c["replicas"]==2 and not c["disaggregated"]
assert len(d["replicas"])==2 and sum(x["requests"] for x in d["replicas"])==200
for x in d["replicas"]: assert x["role"]=="full" and 0<=x["kv_utilization_mean"]<=x["kv_utilization_max"]<=1
assert 0<r["busy_fraction"]<=1 and 0<r["kv_utilization_mean"]<=r["kv_utilization_max"]<=1
for k in ["ttft_ms","tpot_ms","itl_ms","e2el_ms"]: assert r[k]["p99"]>=r[k]["p50"]>0, k' 2>/dev/null; then
  pass=$((pass+1)); else echo "FAIL cluster-json"; fail=$((fail+1)); fi
# Disaggregated: every completed request moved prompt x 0.5 MiB of Llama-2-7B KV (256 x 524,288 B).
if "$bin" serve --disagg 1:1 --workload "$wl" --rate 5 --requests 100 --json | python3 -c '
import json,sys; d=json.load(sys.stdin); t=d["kv_transfer"]; c=d["config"]["cluster"]
assert c["disaggregated"] and c["prefill_replicas"]==1 and c["decode_replicas"]==1
assert t["transfers"]==100 and t["bytes"]==100*256*524288 and t["time_ms"]["mean"]>0
assert [x["role"] for x in d["replicas"]]==["prefill","decode"] and "decode_memory" in d' 2>/dev/null; then
  pass=$((pass+1)); else echo "FAIL disagg-json"; fail=$((fail+1)); fi

# Per-request CSV names the replicas; same seed -> byte-identical files.
for x in a b; do
  "$bin" serve --disagg 2:2 --router prefix-aware --workload "$wl" --rate 10 --requests 100 \
    --requests-csv "$tmp/$x.csv" --trace-out "$tmp/$x.json" -q >/dev/null
done
if [ "$(wc -l < "$tmp/a.csv")" -eq 101 ] && head -1 "$tmp/a.csv" | grep -q "replica,prefill_replica" \
   && cmp -s "$tmp/a.csv" "$tmp/b.csv" && cmp -s "$tmp/a.json" "$tmp/b.json" \
   && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert {e["pid"] for e in d["traceEvents"]}=={0,1,2,3}
assert [e["args"]["name"] for e in d["traceEvents"] if e["ph"]=="M"]==["replica 0 (prefill)","replica 1 (prefill)","replica 2 (decode)","replica 3 (decode)"]' "$tmp/a.json"; then
  pass=$((pass+1)); else echo "FAIL cluster-csv-trace-deterministic"; fail=$((fail+1)); fi

# ---- bad input: exit 2, one line ----
expect unknown-router 2 "did you mean 'least-outstanding'" -- serve --replicas 2 --router least-outstandin --requests 10
one_line_error unknown-router-one-line serve --replicas 2 --router least-outstandin --requests 10
expect unknown-decode-router 2 "--decode-router.*did you mean 'least-kv'" -- serve --disagg 1:1 --decode-router least-kb --requests 10
expect zero-replicas 2 "--replicas: must be 1 to 1048576, got 0" -- serve --replicas 0 --requests 10
expect bad-disagg 2 "--disagg: expected P:D" -- serve --disagg 2 --requests 10
expect bad-disagg-zero 2 "--disagg: expected P:D" -- serve --disagg 0:1 --requests 10
expect bad-disagg-text 2 "--disagg: expected P:D" -- serve --disagg a:b --requests 10
# Past 2^20 replicas: an error, not a run that allocates for 10^12 of them.
expect replicas-range 2 "--replicas: must be 1 to 1048576, got 1000000000000" -- serve --replicas 1000000000000 --requests 10
expect disagg-range 2 "--disagg: expected P:D with 1 to 1048576 replicas each" -- serve --disagg 1:2000000 --requests 10
one_line_error bad-disagg-one-line serve --disagg 2 --requests 10
expect disagg-and-replicas 2 "not both" -- serve --disagg 1:1 --replicas 2 --requests 10
expect disagg-wait 2 "--scheduler" -- serve --disagg 1:1 --scheduler wait --requests 10
expect decode-gpu-alone 2 "--decode-gpu: only with --disagg" -- serve --decode-gpu h100-sxm --replicas 2 --requests 10
expect unknown-decode-gpu 2 "--decode-gpu.*did you mean" -- serve --disagg 1:1 --decode-gpu h100-sx --requests 10
expect bad-decode-tp 2 "--decode-tp" -- serve --disagg 1:1 --decode-tp 3 --requests 10
expect bad-placement 2 "did you mean 'packed'" -- serve --disagg 1:1 --placement packd --requests 10
expect unknown-node 2 "--node" -- serve --disagg 1:1 --node dgx-a10 --requests 10
finish cli_serve_cluster
