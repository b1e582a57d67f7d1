#!/usr/bin/env python3
"""Attention dropout and fp32 weight-gradient accumulation over a grid of shapes (calibration data).

megatron_extras.py timed both at rows E1-E4's shapes with one call per timing, where the host's launch
latency (SDPA's backward: 150-280 us) mixes into the backward. This sweep times --inner back-to-back
calls per CUDA-event pair (as attention_sweep.py), so the GPU work is what is timed, over:
  * causal fused attention, batch 1, head dim 128, bf16, heads 4-32 x sequence 1,024-8,192 plus rows
    E1-E9's per-GPU head counts at 4,096, through SDPA's cuDNN and flash backends, dropout 0 and --dropout
    in the same run (forward; backward = forward + backward minus forward);
  * weight-gradient GEMMs dW[k, n] = X^T[k, m] dY[m, n] in bf16 and added into an fp32 buffer inside the
    GEMM (torch.addmm(out_dtype=float32, out=C), cuBLAS with fp32 C and D, beta 1: what Megatron's
    gradient-accumulation fusion runs), at shapes none of rows E1-E4 has (Llama-3-8B/70B/405B layers at
    tp 1/4/8, 8192^3, and square and skewed outputs of 4-64 M elements).
Before measuring, --preheat-s of 8192^3 matmuls and a tenth of a second between shapes (the clock a
training job holds at its power limit).

Output: $OUT/dropout_wgrad_sweep.csv (kind, backend/variant, heads or m, seq or n, k, dropout, pass, ms,
tflops, note), written as it goes; $OUT/dropout_wgrad_sweep.json (device, versions, arguments, clocks).
About 2 minutes on an H100 with --preheat-s 30. Usage (on a lent GPU machine):
    python3 tools/gpu/dropout_wgrad_sweep.py --out "$OUT" --preheat-s 30
"""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training_kernels import Nvml, preheat, timed_back_to_back  # noqa: E402

HEADS = [4, 8, 16, 32]
SEQS = [1024, 2048, 4096, 8192]
TRAINING_HEADS = [7, 10, 12, 18]  # E4-E9's per-GPU heads at 4,096 not on the grid (E1-E3: 16, 16, 12)
# (label, m = tokens, n, k): dW[k, n] = X^T[k, m] dY[m, n]; Llama-3 layers at seq 8192, mbs 1.
WGRAD = [
    ("square-8192", 8192, 8192, 8192),
    ("llama8b-tp1-qkv", 8192, 6144, 4096), ("llama8b-tp1-fc1", 8192, 28672, 4096),
    ("llama8b-tp1-fc2", 8192, 4096, 14336),
    ("llama70b-tp4-qkv", 8192, 2560, 8192), ("llama70b-tp4-proj", 8192, 8192, 2048),
    ("llama70b-tp4-fc1", 8192, 14336, 8192), ("llama70b-tp4-fc2", 8192, 8192, 7168),
    ("llama405b-tp8-qkv", 8192, 2304, 16384), ("llama405b-tp8-fc2", 8192, 16384, 6656),
    ("out4M-k1k", 1024, 2048, 2048), ("out4M-k16k", 16384, 2048, 2048),
    ("out16M-k1k", 1024, 4096, 4096), ("out16M-k8k", 8192, 4096, 4096),
    ("out64M-k1k", 1024, 8192, 8192), ("out64M-k4k", 4096, 8192, 8192),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--inner", type=int, default=10)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--preheat-s", type=float, default=30.0)
    args = ap.parse_args()
    if not 0.0 < args.dropout < 1.0:
        print("dropout_wgrad_sweep.py: error: --dropout: expected a probability in (0, 1)", file=sys.stderr)
        sys.exit(2)
    if min(args.warmup + 1, args.repeats, args.inner) < 1:
        print("dropout_wgrad_sweep.py: error: --warmup >= 0, --repeats >= 1 and --inner >= 1", file=sys.stderr)
        sys.exit(2)
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"dropout_wgrad_sweep.py: error: {e} (this script runs on a lent GPU machine)", file=sys.stderr)
        sys.exit(1)
    if not torch.cuda.is_available():
        print("dropout_wgrad_sweep.py: error: no CUDA device", file=sys.stderr)
        sys.exit(1)
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    os.makedirs(args.out, exist_ok=True)
    nvml = Nvml()
    meta = {"script": "tools/gpu/dropout_wgrad_sweep.py",
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "arguments": vars(args), "clocks": {}}

    def write_meta():
        with open(os.path.join(args.out, "dropout_wgrad_sweep.json"), "w") as f:
            json.dump(meta, f, indent=2)

    def timed(fn):
        return timed_back_to_back(torch, fn, args.warmup, args.repeats, args.inner)

    csv = open(os.path.join(args.out, "dropout_wgrad_sweep.csv"), "w")
    csv.write("kind,variant,heads_or_m,seq_or_n,k,dropout,pass,ms,tflops,note\n")

    def row(kind, variant, x, y, k, p, pas, ms, flops, note=""):
        tf = f"{flops / (ms * 1e-3) / 1e12:.1f}" if ms else ""
        csv.write(f"{kind},{variant},{x},{y},{k},{p:g},{pas},{f'{ms:.5f}' if ms else ''},{tf},{note}\n")
        csv.flush()

    preheat(torch, args.preheat_s)
    meta["clocks"]["after_preheat"] = nvml.read()
    write_meta()
    shapes = [(h, s) for h in HEADS for s in SEQS] + [(h, 4096) for h in TRAINING_HEADS]
    for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        for h, s in shapes:
            q, k, v = (torch.randn(1, h, s, 128, device=dev, dtype=bf16, requires_grad=True) for _ in range(3))
            g = torch.randn(1, h, s, 128, device=dev, dtype=bf16)
            flops = 4.0 * h * 128 * s * (s + 1) / 2.0
            preheat(torch, 0.1)
            for p in (0.0, args.dropout):
                def fwd():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

                def both():
                    fwd().backward(g)
                try:
                    f_ms = timed(fwd)
                    b_ms = timed(both) - f_ms
                except RuntimeError as e:
                    row("attention", label, h, s, 128, p, "forward", 0.0, flops,
                        str(e).splitlines()[0][:80].replace(",", ";") if str(e) else "RuntimeError")
                    continue
                row("attention", label, h, s, 128, p, "forward", f_ms, flops)
                row("attention", label, h, s, 128, p, "backward", b_ms, 2.5 * flops)
                q.grad = k.grad = v.grad = None
            del q, k, v, g
        meta["clocks"][label] = nvml.read()
        write_meta()
    torch.cuda.empty_cache()
    for label, m, n, kk in WGRAD:
        preheat(torch, 0.1)
        xt = torch.randn(kk, m, device=dev, dtype=bf16)
        dy = torch.randn(m, n, device=dev, dtype=bf16)
        c = torch.zeros(kk, n, device=dev, dtype=torch.float32)
        flops = 2.0 * m * n * kk
        row("wgrad", "bf16", kk, n, m, 0.0, label, timed(lambda: xt @ dy), flops)
        try:
            ms = timed(lambda: torch.addmm(c, xt, dy, out_dtype=torch.float32, out=c))
            row("wgrad", "fused-fp32", kk, n, m, 0.0, label, ms, flops, "addmm(out_dtype=fp32; out=C)")
        except (RuntimeError, TypeError) as e:
            row("wgrad", "fused-fp32", kk, n, m, 0.0, label, 0.0, flops, type(e).__name__)
        del xt, dy, c
    meta["clocks"]["wgrad"] = nvml.read()
    write_meta()
    csv.close()
    print(f"dropout_wgrad_sweep.py: wrote {os.path.join(args.out, 'dropout_wgrad_sweep.csv')}")


if __name__ == "__main__":
    main()
