#!/usr/bin/env python3
"""Time two kernels that Megatron-Core runs and training_kernels.py does not (calibration data).

docs/training.md ("What is still wrong") names them as candidates for the step time the E rows of
../shared/validation/training.csv hold beyond their layers' plain kernels; neither enters the model
before it is measured:
  * the weight gradient added into fp32 main gradients inside the GEMM (Megatron's gradient-accumulation
    fusion, forced on with bf16 by accumulate_allreduce_grads_in_fp32): D = C + X^T dY with bf16 X, dY
    and fp32 C, D, next to the plain bf16 GEMM and the unfused upper bound (bf16 GEMM, cast, add);
  * fused causal attention with dropout 0.1 (Megatron's default attention dropout) next to dropout 0,
    forward and forward + backward, per PyTorch SDPA backend that accepts it (cuDNN, flash).
Shapes: the per-GPU shards of rows E1-E9 (seq 4096, mbs 1, heads / tp), from training_kernels.CONFIGS.

Output: $OUT/megatron_extras.csv (config, op, variant, pass, m, n, k, ms, tflops, note), written as it
goes; $OUT/megatron_extras.json (device, versions, arguments, which fused fp32 GEMM call the build took).
A variant the build refuses is a row with ms empty and the reason in `note`. About 1-2 minutes on an
H100. Usage (on a lent GPU machine):
    python3 tools/gpu/megatron_extras.py --out "$OUT" --preheat-s 60
"""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training_kernels import CONFIGS, layer_gemms, preheat, timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--configs", default="E1,E2,E3,E4")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--preheat-s", type=float, default=0.0,
                    help="8192^3 matmuls this long first and a tenth of it before each configuration (the clock "
                         "a training job holds at the power limit; training_kernels.py --preheat-s)")
    args = ap.parse_args()
    e_rows = {c[0]: c for c in CONFIGS if c[0].startswith("E")}
    wanted = [c for c in args.configs.split(",") if c]
    unknown = [c for c in wanted if c not in e_rows]
    if unknown:
        print(f"megatron_extras.py: error: --configs: unknown {unknown}; valid: {', '.join(e_rows)}", file=sys.stderr)
        sys.exit(2)
    if not 0.0 <= args.dropout < 1.0:
        print("megatron_extras.py: error: --dropout: expected a probability in [0, 1)", file=sys.stderr)
        sys.exit(2)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("megatron_extras.py: error: PyTorch is not installed (this script runs on a lent GPU machine)",
              file=sys.stderr)
        sys.exit(1)
    if not torch.cuda.is_available():
        print("megatron_extras.py: error: no CUDA device", file=sys.stderr)
        sys.exit(1)
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    os.makedirs(args.out, exist_ok=True)
    csv = open(os.path.join(args.out, "megatron_extras.csv"), "w")
    csv.write("config,op,variant,pass,m,n,k,ms,tflops,note\n")
    meta = {
        "script": "tools/gpu/megatron_extras.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "arguments": vars(args),
        "fused_fp32_call": None,  # as named in the csv's note (its comma written as ';')
    }

    def write_meta():
        with open(os.path.join(args.out, "megatron_extras.json"), "w") as f:
            json.dump(meta, f, indent=2)

    def row(config, op, variant, pas, m, n, k, ms, flops, note=""):
        tf = f"{flops / (ms * 1e-3) / 1e12:.1f}" if ms else ""
        ms_text = f"{ms:.5f}" if ms else ""
        note = note.replace(",", ";")  # one cell (the 2026-11-28 run wrote the call's comma unquoted)
        csv.write(f"{config},{op},{variant},{pas},{m},{n},{k},{ms_text},{tf},{note}\n")
        csv.flush()

    # The fused fp32 epilogue: the first of these calls the build accepts (PyTorch's out_dtype on addmm
    # runs cuBLAS with bf16 inputs and fp32 C and D, beta = 1).
    def fused_calls(c, x, dy):
        return [
            ("addmm(out_dtype=fp32, out=C)", lambda: torch.addmm(c, x, dy, out_dtype=torch.float32, out=c)),
            ("addmm(out_dtype=fp32)", lambda: torch.addmm(c, x, dy, out_dtype=torch.float32)),
        ]

    preheat(torch, args.preheat_s)
    for name in wanted:
        _, h, heads, ffn, _, tp, seq, mbs, kv_heads, swiglu = e_rows[name]
        preheat(torch, args.preheat_s / 10)
        tokens = mbs * seq
        # Weight gradients: W-grad[k, n] = X^T[k, tokens] dY[tokens, n].
        for op, m, n, k in layer_gemms(h, heads, ffn, tp, tokens, kv_heads, swiglu):
            xt = torch.randn(k, m, device=dev, dtype=bf16)
            dy = torch.randn(m, n, device=dev, dtype=bf16)
            c = torch.zeros(k, n, device=dev, dtype=torch.float32)
            flops = 2.0 * m * n * k
            row(name, op, "bf16", "weight-grad", k, n, m, timed(torch, lambda: xt @ dy, args.warmup, args.repeats), flops)
            row(name, op, "unfused-fp32", "weight-grad", k, n, m,
                timed(torch, lambda: c.add_((xt @ dy).float()), args.warmup, args.repeats), flops)
            done = False
            reasons = []
            for label, fn in fused_calls(c, xt, dy):
                try:
                    fn()
                    torch.cuda.synchronize()
                except (RuntimeError, TypeError) as e:
                    reasons.append(f"{label}: {type(e).__name__}")
                    continue
                meta["fused_fp32_call"] = label
                row(name, op, "fused-fp32", "weight-grad", k, n, m, timed(torch, fn, args.warmup, args.repeats), flops,
                    label)
                done = True
                break
            if not done:
                row(name, op, "fused-fp32", "weight-grad", k, n, m, 0.0, flops, "; ".join(reasons))
            del xt, dy, c
        # Causal attention per SDPA backend, dropout 0 and --dropout.
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:
            row(name, "attention", "-", "-", seq, seq, h // heads, 0.0, 0.0, "torch.nn.attention missing")
            continue
        hp = heads // tp
        dh = h // heads
        q, k_, v = (torch.randn(mbs, hp, seq, dh, device=dev, dtype=bf16, requires_grad=True) for _ in range(3))
        grad = torch.randn(mbs, hp, seq, dh, device=dev, dtype=bf16)
        causal_flops = 4.0 * mbs * hp * dh * seq * (seq + 1) / 2.0  # QK^T and PV over the causal pairs
        for backend_name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            for p in (0.0, args.dropout):
                variant = f"{backend_name}-dropout{p:g}"

                def fwd():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k_, v, dropout_p=p, is_causal=True)

                def fwd_bwd():
                    fwd().backward(grad)
                try:
                    f_ms = timed(torch, fwd, args.warmup, args.repeats)
                    fb_ms = timed(torch, fwd_bwd, args.warmup, args.repeats)
                except RuntimeError as e:
                    reason = str(e).splitlines()[0][:80].replace(",", ";")
                    row(name, "attention", variant, "forward", seq, seq, dh, 0.0, causal_flops, reason)
                    continue
                row(name, "attention", variant, "forward", seq, seq, dh, f_ms, causal_flops)
                row(name, "attention", variant, "forward-backward", seq, seq, dh, fb_ms, 3.5 * causal_flops)
                q.grad = k_.grad = v.grad = None
        del q, k_, v, grad
        torch.cuda.empty_cache()
        write_meta()  # after each configuration: a run cut short keeps its metadata
    csv.close()
    write_meta()


if __name__ == "__main__":
    main()
