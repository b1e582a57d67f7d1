#!/usr/bin/env bash
# CLI scenarios of heterogeneity, churn and asynchronous time on `orrery gossip run | sweep | devices`.
source "$(dirname "$0")/cli_lib.sh"

small=(--problem logistic-nonconvex --samples 4000 --dim 5 --iters 40 --batch 20 --eval-every 20)
het=(--heterogeneity "compute=lognormal:20us:1,latency=50us")

expect hetero-sync 0 "sim s" -- gossip run --algo dsgd --topology ring:8 "${small[@]}" "${het[@]}"
expect hetero-async 0 "staleness +max stale" -- gossip run --algo push-sum --topology exponential:8 "${small[@]}" "${het[@]}" --time async
expect hetero-churn 0 "present" -- gossip run --algo dsgd --topology ring:8 "${small[@]}" "${het[@]}" --churn 0.2:5ms
expect hetero-json 0 '"staleness_mean"' -- --json gossip run --algo push-sum --topology ring:8 "${small[@]}" "${het[@]}" --time async
expect hetero-sweep 0 "sim s" -- gossip sweep --algo dsgd --topology ring --nodes 4 "${small[@]}" "${het[@]}"
# 40 synchronous steps of 20 samples x 1 ms with identical nodes and no network: 0.8 s.
expect hetero-fixed-time 0 '"mean": 0\.80000000000' -- --json gossip run --algo dsgd --topology ring:4 "${small[@]}" --heterogeneity compute=1ms

# Device traces: generate one, run on it (federated and gossip), and its bad-input paths.
expect devices-gen 0 "wrote 16 devices" -- gossip devices --devices 16 --churn 0.2:60s --out "$tmp/devices.csv"
expect devices-stdout 0 "^device_id,compute_ms_per_sample,bandwidth_kbps,availability" -- gossip devices --devices 3
expect trace-fedasync 0 "fedasync" -- gossip run --algo fedasync --nodes 16 "${small[@]}" --device-trace "$tmp/devices.csv" --local-steps 2
expect trace-gossip 0 "present" -- gossip run --algo push-sum --topology exponential:16 "${small[@]}" --device-trace "$tmp/devices.csv"
printf 'device_id,compute_ms_per_sample,bandwidth_kbps\nphone,35,fast\n' > "$tmp/bad.csv"
expect trace-bad-value 2 "bad.csv:2: bandwidth_kbps: expected a bandwidth" -- gossip run --algo fedavg --nodes 4 "${small[@]}" --device-trace "$tmp/bad.csv"
one_line_error trace-bad-one-line gossip run --algo fedavg --nodes 4 "${small[@]}" --device-trace "$tmp/bad.csv"
printf 'device_id,compute_ms,bandwidth_kbps\n' > "$tmp/badcol.csv"
expect trace-bad-column 2 "did you mean 'compute_ms_per_sample'" -- gossip run --algo fedavg --nodes 4 "${small[@]}" --device-trace "$tmp/badcol.csv"
expect trace-missing 2 "cannot open the device-trace file" -- gossip run --algo fedavg --nodes 4 "${small[@]}" --device-trace "$tmp/none.csv"

# Bad flags: one line, exit 2.
expect bad-hetero-key 2 "did you mean 'compute'" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" --heterogeneity compte=1ms
one_line_error bad-hetero-one-line gossip run --algo dsgd --topology ring:4 "${small[@]}" --heterogeneity compte=1ms
expect bad-hetero-unit 2 "--heterogeneity.compute" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" --heterogeneity compute=5
expect bad-time 2 "did you mean 'async'" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" --time asyn
expect bad-async-algo 2 "asynchronous time is implemented for push-sum and dsgd" -- gossip run --algo gt --topology ring:4 "${small[@]}" "${het[@]}" --time async
expect bad-async-compute 2 "needs a compute time" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" --time async
expect bad-churn 2 "--churn" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" "${het[@]}" --churn 1.5
expect bad-churn-directed 2 "not form a balanced graph" -- gossip run --algo dsgd --topology exponential:8 "${small[@]}" "${het[@]}" --churn 0.2

# Determinism: the same asynchronous run twice gives byte-identical JSON.
a=$("$bin" --json gossip run --algo push-sum --topology ring:8 "${small[@]}" "${het[@]}" --time async --churn 0.2:5ms --seeds 2 2>/dev/null)
b=$("$bin" --json gossip run --algo push-sum --topology ring:8 "${small[@]}" "${het[@]}" --time async --churn 0.2:5ms --seeds 2 2>/dev/null)
if [ "$a" = "$b" ] && [ -n "$a" ]; then pass=$((pass+1)); else echo "FAIL hetero-deterministic"; fail=$((fail+1)); fi

finish gossip-hetero
