#!/usr/bin/env python3
"""Causal fused attention on one GPU over heads x sequence length: how does the rate depend on the
kernel's parallelism (CTAs = batch x heads x ceil(seq / 128))?

training_kernels.py measures attention only at the training rows' shapes (7-18 heads at 4k, 64
head-sequences at 8k). This sweep covers batch 1, head dim 128, bf16, causal, heads 4-64 and sequence
512-16,384 (64 to 8,192 CTAs), through PyTorch SDPA's cuDNN and flash (FlashAttention-2) backends,
forward and forward + backward, CUDA events around --inner back-to-back calls (so that the host's
launch latency, tens of microseconds for an SDPA call and more for autograd's backward, overlaps the
GPU work instead of being timed; --inner 1 times one call on an idle queue, as training_kernels.py
does), median of --repeats after --warmup. Also, the same way: the attention shapes of rows E1-E9 and
G1 of training.csv, and the weight-streaming GEMMs of a Llama-2-7B layer at 1-512 tokens, each of
those over four copies of its weight in turn (one copy, 34-180 MB, would sit in the 50 MB L2 from one
call to the next). Before measuring, the
card runs 8192^3 matmuls for --preheat-s seconds, and for a tenth of a second between shapes, so every
shape is timed at the clock the card holds at its power limit (as training_kernels.py --preheat-s).
Output: $OUT/attention_sweep.csv (backend, batch, heads, kv_heads, seq, ctas, pass, ms, tflops; the GEMM
rows: backend "gemm", heads = tokens, seq = n x k) and $OUT/attention_sweep.json.
Usage (on a lent GPU machine): python3 tools/gpu/attention_sweep.py --out "$OUT"
"""
import argparse
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training_kernels import timed_back_to_back  # noqa: E402

HEADS = [4, 8, 16, 32, 64]
SEQS = [512, 1024, 2048, 4096, 8192, 16384]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--preheat-s", type=float, default=30.0)
    ap.add_argument("--inner", type=int, default=10)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"attention_sweep.py: error: {e} (this script runs on a lent GPU machine)", file=sys.stderr)
        sys.exit(1)
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    a, b = torch.randn(8192, 8192, device=dev, dtype=bf16), torch.randn(8192, 8192, device=dev, dtype=bf16)

    def preheat(seconds):
        t_end = time.time() + seconds
        while time.time() < t_end:
            for _ in range(5):
                torch.matmul(a, b)
            torch.cuda.synchronize()

    def timed(fn):
        return timed_back_to_back(torch, fn, args.warmup, args.repeats, args.inner)

    preheat(args.preheat_s)
    csv = open(os.path.join(args.out, "attention_sweep.csv"), "w")
    csv.write("backend,batch,heads,kv_heads,seq,ctas,pass,ms,tflops\n")
    # (batch, heads, kv_heads, seq): the grid, then the training rows' per-GPU shapes (E1-E9: 16, 16, 12,
    # 7, 8, 10, 12, 16, 18 heads at 4096; G1: 2 x 32 heads over 8 kv heads at 8192).
    shapes = [(1, h, h, s) for h in HEADS for s in SEQS]
    shapes += [(1, h, h, 4096) for h in (7, 10, 12, 18)] + [(2, 32, 8, 8192)]
    for (label, backend) in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
        for (bt, h, kvh, s) in shapes:
            q = torch.randn(bt, h, s, 128, device=dev, dtype=bf16, requires_grad=True)
            k, v = (torch.randn(bt, kvh, s, 128, device=dev, dtype=bf16, requires_grad=True) for _ in range(2))
            gqa = {"enable_gqa": True} if kvh != h else {}
            flops = 4.0 * bt * h * s * s / 2.0 * 128
            preheat(0.1)
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
                    g = torch.randn_like(out)
                    fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa))
                    both = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa).backward(g))
            except (RuntimeError, TypeError) as e:
                print(f"{label} b{bt} h{h} s{s}: skipped ({str(e).splitlines()[0] if str(e) else type(e).__name__})",
                      file=sys.stderr)
                continue
            ctas = bt * h * ((s + 127) // 128)
            csv.write(f"{label},{bt},{h},{kvh},{s},{ctas},forward,{fwd:.5f},{flops / fwd / 1e9:.1f}\n")
            csv.write(f"{label},{bt},{h},{kvh},{s},{ctas},backward,{both - fwd:.5f},{2.5 * flops / (both - fwd) / 1e9:.1f}\n")
            csv.flush()
            del q, k, v
    # Weight-streaming GEMMs, Llama-2-7B TP1 (qkv 4096 -> 12288, proj 4096 -> 4096, gate+up 4096 -> 22016,
    # down 11008 -> 4096), each call on the next of four weight copies.
    preheat(0.1)
    for t in (1, 8, 32, 128, 512):
        for (n, kk) in ((12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008)):
            x = torch.randn(t, kk, device=dev, dtype=bf16)
            ws = [torch.randn(kk, n, device=dev, dtype=bf16) for _ in range(4)]
            it = [0]

            def call():
                it[0] = (it[0] + 1) % 4
                return torch.matmul(x, ws[it[0]])
            ms = timed(call)
            csv.write(f"gemm,1,{t},0,{n}x{kk},0,forward,{ms:.5f},{2.0 * t * n * kk / ms / 1e9:.1f}\n")
            csv.flush()
            del x, ws
    csv.close()
    meta = {"script": "tools/gpu/attention_sweep.py", "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "warmup": args.warmup, "repeats": args.repeats,
            "preheat_s": args.preheat_s, "inner": args.inner}
    with open(os.path.join(args.out, "attention_sweep.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(open(os.path.join(args.out, "attention_sweep.csv")).read())


if __name__ == "__main__":
    main()
