#!/usr/bin/env python3
"""Fit the Hopper fused-attention constants of src/compute/compute_model.cc to kernels measured on an H100.

Data: data/measured/h100-sxm/attention_sweep.csv (tools/gpu/attention_sweep.py: causal attention, head dim
128, bf16, batch 1, heads 4-64 x sequence 512-16,384, each timed over 10 back-to-back calls after the card
reached its power-limited clock). The model (compute_model.h):
    t = F / (peak * e_pass * L / (L + half) * C / (C + c0 * SMs)) + fixed_pass
with F the causal FLOPs (backward: 2.5 x the forward's), L the keys per sequence, C = batch x heads x
ceil(seq / 128) CTAs, peak 989.4 TFLOP/s and 132 SMs (H100 SXM). Per kernel family (cudnn, flash =
FlashAttention-2) and pass the search picks e, c0, half and fixed minimizing the median |error| over the pass's 30 grid kernels plus a tenth of the worst, on a
coarse grid of round values. The training shapes in the same file (7-18 heads at 4,096, and 2 x 32 heads
over 8 kv heads at 8,192: rows E1-E9 and G1 of ../shared/validation/training.csv) are held out and only
reported. Kernels under 0.3 ms (--min-ms) are left out of the fit: even back to back, PyTorch's SDPA host
path (a 23 us forward and 150-280 us backward floor in the H100 data) can set their pace. No dependencies
beyond Python 3. Usage: python3 tools/calibration/fit_hopper_attention.py [--data attention_sweep.csv]
"""
import csv
import math
import os
import statistics
import sys

PEAK, SMS = 989.4e12, 132
MIN_MS = 0.3         # kernels shorter than this are left out of the fit (set by --min-ms)
FIXED_US = [3.0]     # the per-call time beyond the FLOPs: the compute model's launch overhead
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "data", "measured", "h100-sxm", "attention_sweep.csv")


def predict(r, p):
    b, h, s = int(r["batch"]), int(r["heads"]), int(r["seq"])
    flops = 4.0 * b * h * s * s / 2.0 * 128
    ctas = b * h * math.ceil(s / 128)
    k = "bwd" if r["pass"] == "backward" else "fwd"
    rate = PEAK * p["e_" + k] * s / (s + p["half_" + k]) * ctas / (ctas + p["c0_" + k] * SMS)
    return (2.5 if k == "bwd" else 1.0) * flops / rate * 1e3 + p["fixed_" + k] * 1e-3


def errors(rows, p):
    return [predict(r, p) / float(r["ms"]) - 1.0 for r in rows]


def loss(rows, p):
    e = [abs(x) for x in errors(rows, p)]
    return statistics.median(e) + 0.1 * max(e)


def main():
    global MIN_MS
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=DATA, help="attention_sweep.csv of tools/gpu/attention_sweep.py")
    ap.add_argument("--min-ms", type=float, default=MIN_MS,
                    help="fit on kernels of at least this many ms (below, the host's SDPA path can set the pace)")
    args = ap.parse_args()
    MIN_MS = args.min_ms
    try:
        rows = [r for r in csv.DictReader(open(args.data)) if r["backend"] in ("cudnn", "flash")]
    except OSError as e:
        print(f"fit_hopper_attention.py: error: {args.data}: {e.strerror}", file=sys.stderr)
        return 2
    for family in ("cudnn", "flash"):
        fam = [r for r in rows if r["backend"] == family]
        grid = [r for r in fam if int(r["batch"]) == 1 and int(r["heads"]) in (4, 8, 16, 32, 64)
                and float(r["ms"]) >= MIN_MS]
        held = [r for r in fam if not (int(r["batch"]) == 1 and int(r["heads"]) in (4, 8, 16, 32, 64))]
        # Each pass on its own kernels: e, c0, half and fixed (the backward is a different kernel, or
        # several: the dO.O preprocessing, the main loop and the dQ conversion).
        p = {}
        for pas in ("forward", "backward"):
            sub = [r for r in grid if r["pass"] == pas]
            key = "bwd" if pas == "backward" else "fwd"
            cand = None
            for c0 in (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0):
                for half in (0, 256, 512, 1024):
                    for e100 in range(20, 100, 2):
                        for fixed in FIXED_US:
                            q = {"c0_" + key: c0, "half_" + key: half, "e_" + key: e100 / 100.0, "fixed_" + key: fixed}
                            l_ = loss(sub, q)
                            if cand is None or l_ < cand[0]:
                                cand = (l_, q)
            p.update(cand[1])
        best = (0.0, p)
        p = best[1]
        for k in ("fwd", "bwd"):
            print(f"{family} {k}: e {p['e_' + k]:.2f}  c0 {p['c0_' + k]}  half {p['half_' + k]}  fixed {p['fixed_' + k]} us")
        print(f"  as a calibration file's attention block (docs/compute.md), for {family}:")
        for k, name in (("fwd", "forward"), ("bwd", "backward")):
            print(f"    {name}: {{efficiency: {p['e_' + k]:.2f}, half_length: {p['half_' + k]:g}, "
                  f"ctas_per_sm_half: {p['c0_' + k]:g}}}")
        for name, sub in (("grid (fit)", grid), ("training shapes (held out)", held)):
            for pas in ("forward", "backward"):
                e = [abs(x) * 100 for x in errors([r for r in sub if r["pass"] == pas], p)]
                print(f"  {name:<27} {pas:<8} n {len(e):>2}  median |error| {statistics.median(e):5.1f}%  "
                      f"worst {max(e):5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
