#!/usr/bin/env bash
# CLI scenarios of `orrery gossip run | sweep | list` (decentralized and federated optimization).
source "$(dirname "$0")/cli_lib.sh"

small=(--problem logistic-nonconvex --samples 4000 --dim 5 --iters 50 --batch 20 --eval-every 25)

expect gossip-list 0 "pull-diag-gt.*Liang, Chen, Luo, Yuan" -- gossip list
expect gossip-list-json 0 '"name": "push-pull"' -- --json gossip list
expect gossip-run 0 "push-pull on logistic-nonconvex \(16 nodes, d = 5\)" -- gossip run --algo push-pull --topology exponential:16 "${small[@]}"
expect gossip-run-seeds 0 "±" -- gossip run --algo push-pull --topology exponential:8 "${small[@]}" --seeds 3
expect gossip-run-json 0 '"grad_norm_pi"' -- --json gossip run --algo pull-diag-gt --topology directed-ring:5:chords=0-2 "${small[@]}"
expect gossip-run-fed 0 "fedavg" -- gossip run --algo fedavg --nodes 8 "${small[@]}" --local-steps 2 --client-fraction 0.5
expect gossip-run-choco 0 "choco-sgd" -- gossip run --algo choco-sgd --topology ring:8 "${small[@]}" --compress top-k:0.4
expect gossip-run-least-squares 0 "least-squares" -- gossip run --algo gt --topology torus:3x3 --problem least-squares --samples 900 --iters 20
expect gossip-run-digits 0 "dsgd on softmax \(4 nodes, d = 650\)" -- gossip run --algo dsgd --topology ring:4 --problem softmax:digits --iters 5 --batch 8 --lr 0.5
expect gossip-sweep 0 "exponential +push-pull" -- gossip sweep --algo push-pull,dsgd --topology exponential --nodes 1,4 "${small[@]}"
# 50 synchronous steps of 1 ms compute (batch 1 x 1 ms) plus a 1 ms message: 0.1 s.
expect gossip-run-time 0 '"mean": 0\.1000000000' -- --json gossip run --algo dsgd --topology ring:4 --problem logistic-nonconvex --samples 4000 --dim 5 --iters 50 --batch 1 --compute-per-sample "1 ms" --link-latency "1 ms"
expect gossip-bad-time-unit 2 "--compute-per-sample" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" --compute-per-sample "1 parsec"

# Output files: CSV written atomically with one row per evaluation point (0, 25, 50) plus the header.
"$bin" gossip run --algo push-pull --topology exponential:8 "${small[@]}" --csv "$tmp/run.csv" >/dev/null 2>&1
if [ "$(wc -l < "$tmp/run.csv")" -eq 4 ] && head -1 "$tmp/run.csv" | grep -q "^iter,loss_mean,loss_std"; then pass=$((pass+1)); else echo "FAIL gossip-csv"; fail=$((fail+1)); fi
# Determinism: the same command twice gives byte-identical JSON.
a=$("$bin" --json gossip run --algo push-pull --topology exponential:8 "${small[@]}" --seeds 2 2>/dev/null)
b=$("$bin" --json gossip run --algo push-pull --topology exponential:8 "${small[@]}" --seeds 2 2>/dev/null)
if [ "$a" = "$b" ] && [ -n "$a" ]; then pass=$((pass+1)); else echo "FAIL gossip-deterministic"; fail=$((fail+1)); fi

# Bad input: one line, exit 2.
expect gossip-bad-algo 2 "unknown algorithm 'push-pul'; did you mean 'push-pull'" -- gossip run --algo push-pul --topology ring:4 "${small[@]}"
one_line_error gossip-bad-algo-line gossip run --algo push-pul --topology ring:4 "${small[@]}"
expect gossip-bad-problem 2 "did you mean 'logistic-nonconvex'" -- gossip run --algo dsgd --topology ring:4 --problem logistic-nonconvx
expect gossip-not-strong 2 "not strongly connected" -- gossip run --algo push-pull --topology erdos-renyi:20:0.05:seed=1 "${small[@]}"
expect gossip-not-doubly 2 "needs a doubly stochastic mixing matrix" -- gossip run --algo dsgd --topology directed-ring:5:chords=0-2 "${small[@]}"
expect gossip-wrong-stochastic 2 "needs a column-stochastic mixing matrix, but 'pull'" -- gossip run --algo push-sum --topology directed-ring:5:chords=0-2 --mixing pull "${small[@]}"
expect gossip-missing-dataset 2 "install the Debian package dataset-fashion-mnist" -- gossip run --algo dsgd --topology ring:4 --problem softmax:fashion-mnist --data "$tmp/none"
one_line_error gossip-missing-dataset-line gossip run --algo dsgd --topology ring:4 --problem softmax:fashion-mnist --data "$tmp/none"
expect gossip-bad-partition 2 "did you mean 'by-label'" -- gossip run --algo dsgd --topology ring:4 --problem softmax:digits --partition by-lable
expect gossip-bad-compress 2 "--compress.*did you mean 'top-k'" -- gossip run --algo choco-sgd --topology ring:4 "${small[@]}" --compress topk:0.1
expect gossip-bad-iters 2 "iters" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" --iters -1
# A regularizer so large that the iterates overflow is a diverged run (metrics inf/nan), not a broken invariant.
expect gossip-diverged 0 "" -- gossip run --algo dsgd --topology ring:4 --problem logistic-nonconvex --samples 400 --dim 4 --iters 10 --batch 10 --rho 1e308
# A minibatch past 1e7 samples per node is an error (decentral/runner.cc), not a failed allocation.
expect gossip-bad-batch 2 "batch: expected 0 \(exact local gradients\) to 1e7 samples, got 100000000000" -- gossip run --algo dsgd --topology ring:4 --problem logistic-nonconvex --samples 4000 --dim 5 --iters 5 --batch 100000000000
expect gossip-bad-lr 2 "lr" -- gossip run --algo dsgd --topology ring:4 "${small[@]}" --lr 0
expect gossip-no-topology 2 "--topology: missing" -- gossip run --algo push-pull "${small[@]}"
expect gossip-too-few-samples 2 "--samples" -- gossip run --algo dsgd --topology ring:8 --samples 4
expect gossip-sweep-bad-nodes 2 "--nodes" -- gossip sweep --algo dsgd --topology ring --nodes 4,x "${small[@]}"
expect gossip-sweep-bad-family 2 "without a node count" -- gossip sweep --algo dsgd --topology ring:8 --nodes 4 "${small[@]}"
expect gossip-bad-flag 2 "not expected: 5 --iter" -- gossip run --algo dsgd --topology ring:4 --iter 5

finish cli_gossip
