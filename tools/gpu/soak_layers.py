#!/usr/bin/env python3
"""Sustained load on one H100: do the per-layer times of the training rows hold after minutes of work?

training_kernels.py times each kernel in short bursts, when the card still runs near its 1,980 MHz boost;
a training job runs for hours at its power limit. This script cycles the whole eager layer (forward +
backward, cuDNN attention, one GPU's tensor-parallel shard, as in training_kernels.py) of rows E1-E4 of
../shared/validation/training.csv, and an 8192^3 bf16 matmul, for --seconds seconds, and writes one row per
batch of --iters iterations: elapsed seconds, what ran, ms per iteration, TFLOP/s, SM clock, power and
temperature read by NVML right after the batch.
Output: $OUT/soak_layers.csv and $OUT/soak_layers.json (device, versions, arguments).
Usage (on a lent GPU machine): python3 tools/gpu/soak_layers.py --out "$OUT" --seconds 150
"""
import argparse
import datetime
import json
import os
import sys
import time

# (name, hidden, heads, ffn, tp, seq, mbs): rows E1-E4 (GPT, MHA, GeLU, vocab not needed here).
CONFIGS = [("E1", 2048, 16, 8192, 1, 4096, 1), ("E2", 4096, 32, 16384, 2, 4096, 1),
           ("E3", 6144, 48, 24576, 4, 4096, 1), ("E4", 7168, 56, 28672, 8, 4096, 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seconds", type=float, default=150.0)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import pynvml
    except ImportError as e:
        print(f"soak_layers.py: error: {e} (this script runs on a lent GPU machine)", file=sys.stderr)
        sys.exit(1)
    pynvml.nvmlInit()
    nv = pynvml.nvmlDeviceGetHandleByIndex(0)
    dev, bf16 = torch.device("cuda"), torch.bfloat16

    def rnd(*shape, grad=False, scale=1.0):
        t = torch.randn(*shape, device=dev, dtype=bf16) * scale
        return t.requires_grad_() if grad else t

    work = []
    for (name, h, heads, ffn, tp, seq, mbs) in CONFIGS:
        hp, dh, T = heads // tp, h // heads, mbs * seq
        wqkv, wo = rnd(h, 3 * hp * dh, grad=True, scale=0.02), rnd(hp * dh, h, grad=True, scale=0.02)
        w1, w2 = rnd(h, ffn // tp, grad=True, scale=0.02), rnd(ffn // tp, h, grad=True, scale=0.02)
        ln = [(torch.ones(h, device=dev, dtype=bf16, requires_grad=True),
               torch.zeros(h, device=dev, dtype=bf16, requires_grad=True)) for _ in range(2)]
        x, gx = rnd(T, h, grad=True), rnd(T, h)

        def step(x=x, gx=gx, wqkv=wqkv, wo=wo, w1=w1, w2=w2, ln=ln, h=h, hp=hp, dh=dh, T=T, mbs=mbs, seq=seq):
            y = F.layer_norm(x, (h,), *ln[0]) @ wqkv
            q, k, v = (t.view(mbs, seq, hp, dh).transpose(1, 2) for t in y.split(hp * dh, dim=-1))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            z = x + o.transpose(1, 2).reshape(T, hp * dh) @ wo
            out = z + F.gelu(F.layer_norm(z, (h,), *ln[1]) @ w1, approximate="tanh") @ w2
            out.backward(gx)
        flops = 3.0 * 2 * T * (h * 3 * hp * dh + hp * dh * h + 2 * h * ffn // tp) + 3.5 * 4.0 * mbs * hp * seq * seq / 2 * dh
        work.append((name, step, flops))
    a, b = rnd(8192, 8192), rnd(8192, 8192)
    work.append(("matmul-8192", lambda: torch.matmul(a, b), 2.0 * 8192 ** 3))

    csv = open(os.path.join(args.out, "soak_layers.csv"), "w")
    csv.write("elapsed_s,work,ms_per_iter,tflops,sm_mhz,power_w,temp_c\n")
    t0 = time.time()
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for (_, fn, _) in work:  # warm-up: handles, cuDNN plans
            fn()
        torch.cuda.synchronize()
        while time.time() - t0 < args.seconds:
            for (name, fn, flops) in work:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(args.iters):
                    fn()
                e.record()
                torch.cuda.synchronize()
                ms = s.elapsed_time(e) / args.iters
                csv.write(f"{time.time() - t0:.2f},{name},{ms:.5f},{flops / ms / 1e9:.1f},"
                          f"{pynvml.nvmlDeviceGetClockInfo(nv, pynvml.NVML_CLOCK_SM)},"
                          f"{pynvml.nvmlDeviceGetPowerUsage(nv) / 1000:.1f},"
                          f"{pynvml.nvmlDeviceGetTemperature(nv, pynvml.NVML_TEMPERATURE_GPU)}\n")
            csv.flush()
    csv.close()
    meta = {"script": "tools/gpu/soak_layers.py", "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "seconds": args.seconds, "iters": args.iters,
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(nv) / 1000}
    with open(os.path.join(args.out, "soak_layers.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(open(os.path.join(args.out, "soak_layers.csv")).read()[-3000:])


if __name__ == "__main__":
    main()
