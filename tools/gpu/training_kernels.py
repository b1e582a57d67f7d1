#!/usr/bin/env python3
"""Measure the per-GPU kernels of the training validation rows on a real GPU (calibration data).

What it measures (bf16, CUDA events, median of --repeats after --warmup runs):
  * the GEMMs of one transformer layer per GPU for each configuration below, forward (X W), input
    gradient (dY W^T) and weight gradient (X^T dY), with the shapes Megatron-Core runs under tensor
    parallelism tp (column-parallel QKV and FC1 split N, row-parallel proj and FC2 split K), tokens
    T = mbs x seq; the weight gradient also accumulated into an fp32 buffer (Megatron's
    gradient-accumulation fusion writes fp32 main gradients);
  * the LM head GEMM (T x h x V / tp) forward and its two gradients;
  * causal attention forward + backward through PyTorch SDPA with each backend the build offers
    (cuDNN, flash, efficient), heads / tp per GPU, head dim h / heads.
The configurations are rows E1-E9 of ../shared/validation/training.csv (Megatron-Core r0.8, seq 4096,
mbs 1 as the validation test assumes) and G1 (Llama-3-8B, seq 8192, mbs 2). Shapes come from the
row's hyperparameters, nothing else.

Output: $OUT/training_kernels.csv (one row per kernel: config, op, pass, m, n, k, ms, tflops) and
$OUT/training_kernels.json (device name, driver, torch and CUDA versions, clocks, date, arguments).
Runs in about 3-5 minutes on an H100. Usage (on a lent GPU machine):
    python3 tools/gpu/training_kernels.py --out "$OUT"
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

# (name, hidden, heads, ffn, vocab, tp, seq, mbs, kv_heads, swiglu): E rows of training.csv (GPT: MHA, ffn 4h, GeLU) and
# G1 (Llama-3-8B: GQA 8 kv heads, SwiGLU ffn 14336, so FC1 is 2 x ffn wide).
CONFIGS = [
    ("E1", 2048, 16, 8192, 131072, 1, 4096, 1, 16, False),
    ("E2", 4096, 32, 16384, 131072, 2, 4096, 1, 32, False),
    ("E3", 6144, 48, 24576, 131072, 4, 4096, 1, 48, False),
    ("E4", 7168, 56, 28672, 131072, 8, 4096, 1, 56, False),
    ("E5", 8192, 64, 32768, 131072, 8, 4096, 1, 64, False),
    ("E6", 10240, 80, 40960, 131072, 8, 4096, 1, 80, False),
    ("E7", 12288, 96, 49152, 131072, 8, 4096, 1, 96, False),
    ("E8", 16384, 128, 65536, 131072, 8, 4096, 1, 128, False),
    ("E9", 18432, 144, 73728, 131072, 8, 4096, 1, 144, False),
    ("G1", 4096, 32, 14336, 128256, 1, 8192, 2, 8, True),
]


def die(message, code):
    print(f"training_kernels.py: error: {message}", file=sys.stderr)
    sys.exit(code)


def timed(torch, fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def layer_gemms(h, heads, ffn, tp, tokens, kv_heads, swiglu):
    """(op, m, n, k) of the forward GEMMs of one layer on one GPU: out[m, n] = in[m, k] @ W[k, n]."""
    dh = h // heads
    qkv = (heads + 2 * kv_heads) * dh
    fc1 = 2 * ffn if swiglu else ffn
    return [
        ("qkv", tokens, qkv // tp, h),
        ("proj", tokens, h, h // tp),
        ("fc1", tokens, fc1 // tp, h),
        ("fc2", tokens, h, ffn // tp),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        die("PyTorch is not installed (this script runs on a lent GPU machine)", 1)
    if not torch.cuda.is_available():
        die("no CUDA device", 1)
    wanted = set(args.configs.split(","))
    unknown = wanted - {c[0] for c in CONFIGS}
    if unknown:
        die(f"--configs: unknown {sorted(unknown)}; valid: {', '.join(c[0] for c in CONFIGS)}", 2)
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    rows = []

    def gemm(config, op, pas, m, n, k, fp32_acc=False):
        a = torch.randn(m, k, device=dev, dtype=bf16)
        b = torch.randn(k, n, device=dev, dtype=bf16)
        if fp32_acc:
            c = torch.zeros(m, n, device=dev, dtype=torch.float32)
            fn = lambda: c.add_(torch.matmul(a, b).float())  # noqa: E731 (upper bound of the fused epilogue)
        else:
            fn = lambda: torch.matmul(a, b)  # noqa: E731
        ms = timed(torch, fn, args.warmup, args.repeats)
        rows.append((config, op, pas, m, n, k, ms, 2.0 * m * n * k / (ms * 1e-3) / 1e12))
        del a, b

    for (name, h, heads, ffn, vocab, tp, seq, mbs, kv_heads, swiglu) in CONFIGS:
        if name not in wanted:
            continue
        tokens = mbs * seq
        for (op, m, n, k) in layer_gemms(h, heads, ffn, tp, tokens, kv_heads, swiglu):
            gemm(name, op, "forward", m, n, k)            # Y = X W
            gemm(name, op, "input-grad", m, k, n)         # dX = dY W^T
            gemm(name, op, "weight-grad", k, n, m)        # dW = X^T dY
            gemm(name, op, "weight-grad-fp32", k, n, m, fp32_acc=True)
        gemm(name, "lm-head", "forward", tokens, vocab // tp, h)
        gemm(name, "lm-head", "input-grad", tokens, h, vocab // tp)
        gemm(name, "lm-head", "weight-grad", h, vocab // tp, tokens)
        # Causal attention, forward + backward, per GPU: heads / tp query heads.
        dh = h // heads
        q = torch.randn(mbs, heads // tp, seq, dh, device=dev, dtype=bf16, requires_grad=True)
        kv = max(1, kv_heads // tp)
        k_ = torch.randn(mbs, kv, seq, dh, device=dev, dtype=bf16, requires_grad=True)
        v_ = torch.randn(mbs, kv, seq, dh, device=dev, dtype=bf16, requires_grad=True)
        if kv != heads // tp:
            rep = (heads // tp) // kv
            k_e, v_e = k_.repeat_interleave(rep, dim=1).detach().requires_grad_(), v_.repeat_interleave(rep, dim=1).detach().requires_grad_()
        else:
            k_e, v_e = k_, v_
        # Causal FLOPs, forward 2 x 2 x (seq^2 / 2) x dh per head; backward 2.5x the forward.
        fwd_flops = 4.0 * mbs * (heads // tp) * seq * seq / 2.0 * dh
        backends = []
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                        ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
        except ImportError:
            sdpa_kernel = None
        for (label, backend) in backends:
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k_e, v_e, is_causal=True)
                    grad = torch.randn_like(out)
                    fwd = timed(torch, lambda: F.scaled_dot_product_attention(q, k_e, v_e, is_causal=True), args.warmup, args.repeats)

                    def fb():
                        o = F.scaled_dot_product_attention(q, k_e, v_e, is_causal=True)
                        o.backward(grad)
                    both = timed(torch, fb, args.warmup, args.repeats)
            except RuntimeError as e:  # backend not available for this shape or build
                print(f"{name} attention {label}: skipped ({str(e).splitlines()[0]})", file=sys.stderr)
                continue
            rows.append((name, f"attention-{label}", "forward", seq, seq, dh, fwd, fwd_flops / (fwd * 1e-3) / 1e12))
            bwd = both - fwd
            rows.append((name, f"attention-{label}", "backward", seq, seq, dh, bwd, 2.5 * fwd_flops / (bwd * 1e-3) / 1e12))
        del q, k_, v_, k_e, v_e
        torch.cuda.empty_cache()
        print(f"{name}: done", file=sys.stderr)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "training_kernels.csv"), "w") as f:
        f.write("config,op,pass,m,n,k,ms,tflops\n")
        for r in rows:
            f.write(f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]},{r[5]},{r[6]:.5f},{r[7]:.1f}\n")

    def smi(query):
        try:
            return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    meta = {
        "script": "tools/gpu/training_kernels.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "nvidia_smi": smi("name,driver_version,power.limit,clocks.max.sm,clocks.max.mem"),
        "warmup": args.warmup,
        "repeats": args.repeats,
        "configs": sorted(wanted),
    }
    with open(os.path.join(args.out, "training_kernels.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(f"wrote {len(rows)} kernels to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
