#!/usr/bin/env bash
# End-to-end checks of the orrery binary: exit codes, one-line errors naming the flag/file/key and
# the nearest valid name, --json validity, atomic and deterministic result folders.
# Run by ctest (label fast) with ORRERY set to the binary.
source "$(dirname "$0")/cli_lib.sh"

expect help 0 "catalog" -- --help
expect version 0 "^orrery [0-9]+\.[0-9]+\.[0-9]+" -- --version
expect catalog-help 0 "list" -- catalog --help
expect show-help 0 "--seq" -- catalog show --help
expect list-gpus 0 "h100-sxm" -- catalog list gpus
expect list-all 0 "Interconnects" -- catalog list
expect show-gpu 0 "989" -- catalog show gpu h100-sxm
expect unknown-gpu 2 "did you mean 'h100-sxm'" -- catalog show gpu h100-sxm5
one_line_error unknown-gpu-one-line catalog show gpu h100-sxm5
expect unknown-kind 2 "unknown catalog kind 'gpx'; did you mean 'gpu'" -- catalog show gpx h100-sxm
expect unknown-subcommand 2 "did you mean 'catalog'" -- catlog list
one_line_error unknown-subcommand-one-line catlog list
expect unknown-flag 2 "did you mean '--json'" -- catalog list --jsn
expect bad-seq 2 "seq" -- catalog show model llama3-8b --seq -5
expect missing-catalog-path 2 "--catalog: catalog path '/nonexistent.yaml' does not exist" -- --catalog /nonexistent.yaml catalog list

# --json parses and carries the envelope.
if "$bin" catalog show gpu h100-sxm --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["entry"]["name"]=="h100-sxm" and "orrery_version" in d' 2>/dev/null; then
  pass=$((pass+1)); else echo "FAIL show-gpu-json"; fail=$((fail+1)); fi
if "$bin" catalog list --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["gpus"])>=9 and len(d["models"])>=7' 2>/dev/null; then
  pass=$((pass+1)); else echo "FAIL list-json"; fail=$((fail+1)); fi

# A user catalog file with a bad unit: one line naming file:line: key, exit 2.
cat > "$tmp/bad.yaml" <<'YAML'
gpus:
  - name: x100
    vendor: acme
    memory: 80
YAML
expect bad-user-yaml 2 "bad.yaml:4: gpus\[0\].memory: '80' has no unit" -- --catalog "$tmp/bad.yaml" catalog list gpus
one_line_error bad-user-yaml-one-line --catalog "$tmp/bad.yaml" catalog list gpus

# A model config.json missing a required field names the field.
echo '{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}' > "$tmp/cfg.json"
expect bad-model-json 2 "hidden_size" -- catalog show model "$tmp/cfg.json"
# gpt-oss: windowed and full layers alternate (18 of 36), each head has a sink; the model card counts
# active parameters without the input embedding (5.13B: src/model/model_spec_test.cc derives 5,132,849,472).
expect show-gpt-oss 0 "window 128 on 18 of 36 layers; sinks" -- catalog show model gpt-oss-120b
if "$bin" catalog show model gpt-oss-120b --json | python3 -c '
import json, sys
e = json.load(sys.stdin)["entry"]
assert e["config"]["sliding_layers"] == 18 and e["config"]["attention_sinks"] is True
assert e["published"]["active_convention"] == "excluding_input_embedding"
assert e["params"]["active_excluding_input_embedding"] == 5132849472
assert abs(e["published"]["active_relative_error"]) < 0.001
# 4,096 tokens: 18 full layers x 4,096 + 18 windowed x 128, at 2 KiB per token and layer (model_spec_test.cc)
assert e["kv_cache_bytes_per_sequence_bf16"] == 155713536, e["kv_cache_bytes_per_sequence_bf16"]
' 2>/dev/null; then pass=$((pass+1)); else echo "FAIL show-gpt-oss-json"; fail=$((fail+1)); fi
echo '{"architectures": ["GptOssForCausalLM"], "hidden_size": 256, "intermediate_size": 128, "num_attention_heads": 8,
 "num_hidden_layers": 2, "vocab_size": 100, "layer_types": ["full_attention", "sliding"]}' > "$tmp/oss.json"
expect bad-layer-types 2 "oss.json:2: key 'layer_types': unsupported layer type 'sliding'; did you mean 'sliding_attention'" -- catalog show model "$tmp/oss.json"
one_line_error bad-layer-types-one-line catalog show model "$tmp/oss.json"

# The demo's checks are in cli_demo_test.sh (its own ctest entry, so that it runs beside the others).


# Network commands.
expect net-help 0 "--two-level" -- net collective --help
expect net-no-sub 2 "valid subcommands: collective, sweep" -- net
expect net-ring 0 "all-reduce +ring +flow +16" -- net collective --two-level 2x8 --algo ring --size 16MiB
expect net-ab 0 "alpha-beta" -- net collective --two-level 2x8 --model alpha-beta
expect net-nccl 0 "NCCL protocol" -- net collective --two-level 1x8 --model nccl --size 64MiB
expect net-nccl-bad-algo 2 "--algo: the nccl model runs NCCL's ring or NVLS" -- net collective --two-level 1x8 --model nccl --algo tree
# NVLS: NCCL's choice for large all-reduces on one H100 node (busbw 2(n-1)/(n+1) x 450 x 0.824 x 0.85 x
# 15/16 = 459.6 GB/s at most: docs/collectives_validation.md); the A100 has no NVLink SHARP.
expect net-nccl-nvls 0 "all-reduce +nvls +nccl +8 .* 45[0-9]\.[0-9]+$" -- net collective --cluster dgx-h100:1 --model nccl --size 1GiB
expect net-nccl-nvls-a100 2 "--algo: nvls with --model nccl needs NVLink SHARP.*ampere" -- net collective --cluster dgx-a100:1 --model nccl --algo nvls
expect net-nvls-two-nodes 2 "--algo: nvls reduces in one NVLink switch, but the 16 ranks do not all meet at one switch" -- net collective --cluster dgx-h100:2 --algo nvls
expect net-nvls-flow 0 "all-reduce +nvls +flow" -- net collective --cluster dgx-h100:1 --algo nvls --size 64MiB
expect net-nvls-bcast 2 "broadcast has no 'nvls' algorithm" -- net collective --cluster dgx-h100:1 --op broadcast --algo nvls
expect net-nccl-bad-cal 2 "unknown calibration 'vidur'; did you mean 'vidur-a100'" -- net collective --two-level 1x8 --model nccl --calibration vidur
expect net-cluster 0 "all-gather" -- net collective --cluster dgx-h100:2 --op all-gather --size 1MiB
# Rings across 4 rail-optimized DGX H100 machines: with PXN routing (the default, as NCCL since 2.12) each
# channel crosses a machine boundary through one 50 GB/s NIC on its own rail, so busbw <= 8 x 50 = 400 GB/s
# and at 256 MiB the pipelined latency costs under 10%: 36x.xx-399.xx. Shortest-path routing sends the
# cross-rail hop leaf -> spine -> leaf: each leaf hashes its 4 machines' flows onto 4 spine uplinks, and
# all 16 such choices (8 leaves, up and down) are collision-free with odds (4!/4^4)^16 ~ 1e-17; a link
# with two flows halves that channel, and the slowest channel sets a ring's pace: at most 200.
expect net-ring-pxn 0 "all-reduce +ring +flow +32 .* 3[6-9][0-9]\.[0-9]+$" -- net collective --cluster dgx-h100:4 --algo ring --size 256MiB
expect net-ring-shortest 0 "all-reduce +ring +flow +32 .* (1[0-9][0-9]|200)\.[0-9]+$" -- net collective --cluster dgx-h100:4 --algo ring --size 256MiB --routing shortest
expect net-bad-routing 2 "--routing: unknown routing 'pnx'; did you mean 'pxn'" -- net collective --cluster dgx-h100:2 --routing pnx
expect net-sweep 0 "busbw" -- net sweep --two-level 2x4 --min-size 1KiB --max-size 1MiB --factor 4
expect net-too-many-ranks 2 "--ranks: the topology holds 16 GPUs; 64 ranks do not fit" -- net collective --two-level 2x8 --ranks 64
expect net-bad-algo 2 "unknown algorithm 'rign'; did you mean 'ring'" -- net collective --two-level 2x8 --algo rign
expect net-bad-op 2 "unknown collective 'allreduc'" -- net collective --two-level 2x8 --op allreduc
expect net-op-algo 2 "all-to-all has no 'ring' algorithm" -- net collective --two-level 2x8 --op all-to-all --algo ring
expect net-zero-bw 2 "--scaleup-bw: must be positive" -- net collective --two-level 2x8 --scaleup-bw "0 GB/s"
expect net-bad-unit 2 "--network-bw: unknown unit" -- net collective --two-level 2x8 --network-bw "50 GB/sec"
expect net-no-topology 2 "give exactly one of" -- net collective --op all-reduce
expect net-bad-node 2 "unknown node 'dgx-h10'; did you mean 'dgx-h100'" -- net collective --cluster dgx-h10:2
expect net-bad-model 2 "unknown model 'packet'" -- net collective --two-level 2x8 --model packet
expect net-link-event 0 "send-recv" -- net collective --two-level 2x1 --op send-recv --size 100MB --link-event "1 ms,m0.g0->net,0.5"
expect net-link-event-bad-node 2 "--link-event: unknown node 'nt'; did you mean 'net'" -- net collective --two-level 2x1 --link-event "0 s,m0.g0->nt,0.5"
expect net-link-event-bad-form 2 "--link-event: expected TIME,SRC->DST,FACTOR" -- net collective --two-level 2x1 --link-event "1ms"
expect net-slow-gpu 0 "ring" -- net collective --two-level 1x8 --algo ring --slow-gpu 3:4
expect net-slow-gpu-bad-rank 2 "--slow-gpu: expected a rank in \[0, 8\)" -- net collective --two-level 1x8 --slow-gpu 9:2
expect net-slow-gpu-bad-factor 2 "--slow-gpu: expected a slowdown factor >= 1" -- net collective --two-level 1x8 --slow-gpu 3:0.5
printf 'gpu g0\ngpu g1\nswitch s0\nlink g0 s0 bw=100GB/s lat=1us duplex\n' > "$tmp/disc.topo"
expect net-disconnected 2 "disconnected" -- net collective --topology "$tmp/disc.topo"
if "$bin" net collective --two-level 2x4 --size 1MiB --json --trace "$tmp/t.json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["result"]["time_s"]>0 and d["result"]["busbw_bytes_per_s"]>0' && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["traceEvents"])>0' "$tmp/t.json"; then
  pass=$((pass+1)); else echo "FAIL net-json-trace"; fail=$((fail+1)); fi

# Decentralized: graphs and mixing matrices.
expect gossip-topo 0 "beta \(consensus rate\) +0\.600000" -- gossip topo --topology exponential:16
expect gossip-5node 0 "0\.810217" -- gossip topo --topology directed-ring:5:chords=0-2 --mixing pull
expect gossip-json 0 "\"theory_rounds\": 53" -- --json gossip topo --topology directed-ring:5:chords=0-2
expect gossip-bad-topology 2 "--topology.*did you mean 'exponential'" -- gossip topo --topology exponentail:16
expect gossip-bad-mixing 2 "--mixing.*did you mean 'metropolis'" -- gossip topo --topology ring:8 --mixing metropolys
expect gossip-directed-metropolis 2 "--mixing.*use 'pull'" -- gossip topo --topology exponential:8 --mixing metropolis
expect gossip-disconnected 0 "not strongly connected" -- gossip topo --topology erdos-renyi:20:0.05:seed=1
one_line_error gossip-bad-topology-line gossip topo --topology torus:4

# A mistyped flag of a subcommand gets the nearest flag of that subcommand, not only the global ones.
expect subcommand-flag-hint 2 "did you mean '--size'" -- net collective --cluster dgx-h100:1 --sise 1MiB
finish cli
