#!/usr/bin/env python3
"""Time fp8 and bf16 GEMMs of the NeMo FP8 rows at the power-limited clock (calibration data).

The compute model runs fp8 GEMMs at the fp8 peak x gemm_efficiency x fp8_gemm_factor, the factor taken
from mamf-finder's published best-shape fp8 over bf16 efficiency on an H100 (0.882; docs/compute.md).
Those are short runs on a cool card; a training job holds the card at its power limit, where fp8's
tensor cores may lose more clock than bf16's. This script measures the ratio where it matters: each
forward, dgrad and wgrad GEMM of one layer of rows F1-F6 of data/published/nemo_h100_fp8.csv (per-GPU
shards, mbs x seq/cp tokens), in bf16 (torch.matmul) and in fp8 (torch._scaled_mm, E4M3 x E4M3 for the
forward, E4M3 x E5M2 for the gradient GEMMs as Transformer Engine's hybrid recipe runs them, bf16
output), plus 8192^3, each after a preheat of 8192^3 bf16 matmuls.

Output: $OUT/fp8_gemms.csv (config, op, pass, m, n, k, dtype, ms, tflops, note), written as it goes;
$OUT/fp8_gemms.json (device, versions, arguments, SM clock and power after the preheat). A GEMM the
build refuses is a row with ms empty and the reason in `note`. About 2 minutes on an H100 with
--preheat-s 60. Usage (on a lent GPU machine):
    python3 tools/gpu/fp8_gemms.py --out "$OUT" --preheat-s 60
"""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training_kernels import Nvml, preheat, timed  # noqa: E402

# Row: (hidden, heads, kv_heads, ffn, gated MLP, tp, tokens per GPU = mbs x seq / cp), as in
# data/published/nemo_h100_fp8.csv.
CONFIGS = {
    "F1": (4096, 32, 8, 14336, True, 1, 1 * 8192 // 2),
    "F2": (8192, 64, 8, 28672, True, 4, 1 * 8192 // 2),
    "F3": (16384, 128, 8, 53248, True, 8, 1 * 8192 // 2),
    "F4": (6144, 48, 8, 24576, False, 4, 4 * 4096),
    "F5": (18432, 96, 8, 73728, False, 8, 1 * 4096),
    "F6": (12288, 96, 96, 49152, False, 4, 1 * 2048),
}


def layer_gemms(h, heads, kv_heads, ffn, gated, tp, tokens):
    """(op, m, n, k) of one layer's forward GEMMs on one GPU: out[m, n] = in[m, k] @ W[k, n]."""
    dh = h // heads
    qkv = (heads + 2 * kv_heads) * dh
    up = 2 * ffn if gated else ffn
    return [("qkv", tokens, qkv // tp, h), ("proj", tokens, h, h // tp), ("fc1", tokens, up // tp, h),
            ("fc2", tokens, h, ffn // tp)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--preheat-s", type=float, default=0.0,
                    help="8192^3 bf16 matmuls this long first and a tenth of it before each configuration")
    args = ap.parse_args()
    wanted = [c for c in args.configs.split(",") if c]
    unknown = [c for c in wanted if c not in CONFIGS]
    if unknown:
        print(f"fp8_gemms.py: error: --configs: unknown {unknown}; valid: {', '.join(CONFIGS)}", file=sys.stderr)
        sys.exit(2)
    try:
        import torch
    except ImportError:
        print("fp8_gemms.py: error: PyTorch is not installed (this script runs on a lent GPU machine)", file=sys.stderr)
        sys.exit(1)
    if not torch.cuda.is_available():
        print("fp8_gemms.py: error: no CUDA device", file=sys.stderr)
        sys.exit(1)
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    os.makedirs(args.out, exist_ok=True)
    csv = open(os.path.join(args.out, "fp8_gemms.csv"), "w")
    csv.write("config,op,pass,m,n,k,dtype,ms,tflops,note\n")
    nvml = Nvml()
    meta = {
        "script": "tools/gpu/fp8_gemms.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "arguments": vars(args),
        "clocks": {},
    }

    def write_meta():
        with open(os.path.join(args.out, "fp8_gemms.json"), "w") as f:
            json.dump(meta, f, indent=2)

    def row(config, op, pas, m, n, k, dtype, ms, note=""):
        tf = f"{2.0 * m * n * k / (ms * 1e-3) / 1e12:.1f}" if ms else ""
        csv.write(f"{config},{op},{pas},{m},{n},{k},{dtype},{f'{ms:.5f}' if ms else ''},{tf},{note}\n")
        csv.flush()

    one = torch.ones((), device=dev, dtype=torch.float32)

    def gemm_pair(config, op, pas, m, n, k, grad):
        a = torch.randn(m, k, device=dev, dtype=bf16)
        b = torch.randn(k, n, device=dev, dtype=bf16)
        row(config, op, pas, m, n, k, "bf16", timed(torch, lambda: a @ b, args.warmup, args.repeats))
        # _scaled_mm: a row-major, b column-major (the transpose of a row-major n x k).
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e5m2 if grad else torch.float8_e4m3fn).t()
        fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=bf16)  # noqa: E731
        try:
            fn()
            torch.cuda.synchronize()
            row(config, op, pas, m, n, k, "fp8", timed(torch, fn, args.warmup, args.repeats),
                "e4m3 x e5m2" if grad else "e4m3 x e4m3")
        except (RuntimeError, TypeError) as e:
            row(config, op, pas, m, n, k, "fp8", 0.0, f"{type(e).__name__}: {str(e).splitlines()[0][:80]}")
        del a, b, a8, b8

    preheat(torch, args.preheat_s)
    meta["clocks"]["after_preheat"] = nvml.read()
    write_meta()
    gemm_pair("square", "8192^3", "forward", 8192, 8192, 8192, False)
    for name in wanted:
        preheat(torch, args.preheat_s / 10)
        for op, m, n, k in layer_gemms(*CONFIGS[name]):
            gemm_pair(name, op, "forward", m, n, k, False)
            gemm_pair(name, op, "input-grad", m, k, n, True)    # dX[m, k] = dY[m, n] W^T
            gemm_pair(name, op, "weight-grad", k, n, m, True)   # dW[k, n] = X^T[k, m] dY[m, n]
        meta["clocks"][name] = nvml.read()
        write_meta()
    csv.close()
    print(f"fp8_gemms.py: wrote {os.path.join(args.out, 'fp8_gemms.csv')}")


if __name__ == "__main__":
    main()
