#!/usr/bin/env python3
"""Measure the per-GPU kernels of the training validation rows on a real GPU (calibration data).

What it measures (bf16, CUDA events, median of --repeats after --warmup runs, random data):
  * ceilings: a 1 GiB device-to-device copy (bytes read + written) and an 8192^3 bf16 matmul;
  * the GEMMs of one transformer layer per GPU for each configuration below, forward (X W), input
    gradient (dY W^T) and weight gradient (X^T dY), with the shapes Megatron-Core runs under tensor
    parallelism tp (column-parallel QKV and FC1 split N, row-parallel proj and FC2 split K), tokens
    T = mbs x seq; the weight gradient also accumulated into an fp32 buffer (Megatron's
    gradient-accumulation fusion writes fp32 main gradients);
  * the LM head GEMM (T x h x V / tp) forward and its two gradients;
  * causal attention forward + backward through PyTorch SDPA with each backend the build offers
    (cuDNN, flash, efficient), heads / tp per GPU, head dim h / heads;
  * the memory-bound ops of a layer: LayerNorm (or RMSNorm) forward and backward on T x h, GeLU (or
    SwiGLU) forward and backward on T x ffn / tp, the residual add; the eager cross-entropy on fp32
    logits T x V / tp, forward + backward, with the peak memory it adds above its inputs;
  * one whole layer per GPU (the ops above chained, eager PyTorch, no communication), forward and
    forward + backward, per SDPA backend;
  * sustained: the E2 layer's forward + backward back to back for --sustain-s seconds, with the SM
    clock and power read by NVML at the start and the end (does the card slow down under load?);
  * serving shapes: the four GEMMs of a Llama-2-7B layer (TP1) at 1 to 4,096 tokens.
The configurations are rows E1-E9 of ../shared/validation/training.csv (Megatron-Core r0.8, seq 4096,
mbs 1 as the validation test assumes) and G1 (Llama-3-8B, seq 8192, mbs 2). Shapes come from the
row's hyperparameters, nothing else.

Output: $OUT/training_kernels.csv, one row per kernel, written as it goes (a run cut short keeps what
it measured): config, op, pass, m, n, k, ms, tflops, bytes (the fewest bytes the op must move: inputs
read once, outputs written once), gbps, extra_mib (cross-entropy: peak allocation above its inputs);
$OUT/training_kernels.json: device name, driver, torch and CUDA versions, clocks, date, arguments.
Runs in about 2-4 minutes on an H100. Usage (on a lent GPU machine):
    python3 tools/gpu/training_kernels.py --out "$OUT"
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

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
# Llama-2-7B (hidden 4096, 32 heads, ffn 11008, SwiGLU), TP1: the serving GEMMs at these token counts.
SERVING_TOKENS = [1, 8, 32, 128, 512, 1024, 4096]


def die(message, code):
    print(f"training_kernels.py: error: {message}", file=sys.stderr)
    sys.exit(code)


def preheat(torch, seconds):
    """8192^3 bf16 matmuls for `seconds`: the card reaches the clock a training job holds at its power limit."""
    if seconds <= 0:
        return
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t_end = time.time() + seconds
    while time.time() < t_end:
        for _ in range(20):
            torch.matmul(a, b)
        torch.cuda.synchronize()
    del a, b


def timed(torch, fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
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


def timed_back_to_back(torch, fn, warmup, repeats, inner):
    """Median ms per call of `inner` back-to-back calls between two CUDA events (the host's launch
    latency overlaps the GPU work instead of being timed), over `repeats` after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(inner):
            fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / inner)
    return statistics.median(ts)


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


class Nvml:
    """SM clock (MHz) and power (W) through NVML, or None where it is not available."""

    def __init__(self):
        self.handle = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nv = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # noqa: BLE001 (NVML missing or refused: clocks are then not reported)
            self.handle = None

    def read(self):
        if self.handle is None:
            return {}
        out = {}
        try:
            out["sm_mhz"] = self.nv.nvmlDeviceGetClockInfo(self.handle, self.nv.NVML_CLOCK_SM)
            out["mem_mhz"] = self.nv.nvmlDeviceGetClockInfo(self.handle, self.nv.NVML_CLOCK_MEM)
            out["power_w"] = self.nv.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
            out["temp_c"] = self.nv.nvmlDeviceGetTemperature(self.handle, self.nv.NVML_TEMPERATURE_GPU)
            out["power_limit_w"] = self.nv.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0
        except Exception:  # noqa: BLE001
            pass
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    ap.add_argument("--sustain-s", type=float, default=15.0)
    ap.add_argument("--preheat-s", type=float, default=0.0,
                    help="run 8192^3 matmuls this long before measuring, and a tenth of it before each "
                         "configuration, so that every kernel is timed at the clock the card holds under "
                         "sustained load (its power limit) rather than in a cool burst")
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
    nvml = Nvml()
    os.makedirs(args.out, exist_ok=True)
    csv = open(os.path.join(args.out, "training_kernels.csv"), "w")
    csv.write("config,op,pass,m,n,k,ms,tflops,bytes,gbps,extra_mib\n")
    summary = []
    meta = {
        "script": "tools/gpu/training_kernels.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "device": torch.cuda.get_device_name(0),
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "warmup": args.warmup,
        "repeats": args.repeats,
        "configs": sorted(wanted),
        "preheat_s": args.preheat_s,
        "clocks": {},
    }

    def write_meta():
        with open(os.path.join(args.out, "training_kernels.json"), "w") as f:
            json.dump(meta, f, indent=2)

    def smi(query):
        try:
            return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    meta["nvidia_smi"] = smi("name,driver_version,power.limit,clocks.max.sm,clocks.max.mem,memory.total")
    meta["clocks"]["start"] = nvml.read()
    write_meta()

    def row(config, op, pas, m, n, k, ms, flops=0.0, nbytes=0.0, extra_mib=None):
        tf = flops / (ms * 1e-3) / 1e12 if flops else 0.0
        gb = nbytes / (ms * 1e-3) / 1e9 if nbytes else 0.0
        extra = "" if extra_mib is None else f"{extra_mib:.1f}"
        csv.write(f"{config},{op},{pas},{m},{n},{k},{ms:.5f},{tf:.1f},{int(nbytes)},{gb:.1f},{extra}\n")
        csv.flush()
        return tf, gb

    def rnd(*shape, dtype=bf16, grad=False, scale=1.0):
        t = torch.randn(*shape, device=dev, dtype=dtype) * scale
        return t.requires_grad_() if grad else t

    def gemm(config, op, pas, m, n, k, fp32_acc=False):
        a = rnd(m, k)
        b = rnd(k, n)
        if fp32_acc:
            c = torch.zeros(m, n, device=dev, dtype=torch.float32)
            fn = lambda: c.add_(torch.matmul(a, b).float())  # noqa: E731 (upper bound of the fused epilogue)
        else:
            fn = lambda: torch.matmul(a, b)  # noqa: E731
        ms = timed(torch, fn, args.warmup, args.repeats)
        return row(config, op, pas, m, n, k, ms, flops=2.0 * m * n * k, nbytes=2.0 * (m * k + k * n + m * n))[0]

    # --- ceilings ---------------------------------------------------------------------------------------
    src = torch.empty(1 << 29, device=dev, dtype=bf16).normal_()
    dst = torch.empty_like(src)
    ms = timed(torch, lambda: dst.copy_(src), args.warmup, args.repeats)
    _, copy_gbps = row("ceiling", "d2d-copy", "forward", 1 << 29, 0, 0, ms, nbytes=2.0 * 2 * (1 << 29))
    del src, dst
    preheat(torch, args.preheat_s)
    meta["clocks"]["after_preheat"] = nvml.read()
    big_tf = gemm("ceiling", "matmul-8192", "forward", 8192, 8192, 8192)
    summary.append(f"ceilings: copy {copy_gbps:.0f} GB/s, 8192^3 bf16 matmul {big_tf:.0f} TFLOP/s")

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                    ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    except ImportError:
        sdpa_kernel = None
        backends = []

    def norm_fn(swiglu, h):
        w = torch.ones(h, device=dev, dtype=bf16, requires_grad=True)
        b = torch.zeros(h, device=dev, dtype=bf16, requires_grad=True)
        if swiglu:  # RMSNorm as torchtitan's eager module computes it (fp32 statistics)
            def f(x):
                xf = x.float()
                return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * w
            return f
        return lambda x: F.layer_norm(x, (h,), w, b)

    def act_fn(swiglu):
        if swiglu:
            def f(u):
                a, g = u.chunk(2, dim=-1)
                return F.silu(a) * g
            return f
        return lambda u: F.gelu(u, approximate="tanh")

    def make_layer(h, hp, kvp, dh, width, out_w, tokens, mbs, seq, swiglu, gqa):
        """One layer per GPU (its own weights), eager: norm, QKV, causal SDPA, proj, residual, norm, FC1, act, FC2."""
        wqkv = rnd(h, (hp + 2 * kvp) * dh, grad=True, scale=0.02)
        wo = rnd(hp * dh, h, grad=True, scale=0.02)
        w1 = rnd(h, width, grad=True, scale=0.02)
        w2 = rnd(out_w, h, grad=True, scale=0.02)
        n1, n2, act = norm_fn(swiglu, h), norm_fn(swiglu, h), act_fn(swiglu)

        def layer(x):
            yq = n1(x) @ wqkv
            qq, kk, vv = yq.split([hp * dh, kvp * dh, kvp * dh], dim=-1)
            qq = qq.view(mbs, seq, hp, dh).transpose(1, 2)
            kk = kk.view(mbs, seq, kvp, dh).transpose(1, 2)
            vv = vv.view(mbs, seq, kvp, dh).transpose(1, 2)
            o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, **gqa)
            x = x + o.transpose(1, 2).reshape(tokens, hp * dh) @ wo
            return x + act(n2(x) @ w1) @ w2
        return layer

    layer_e2 = None
    for (name, h, heads, ffn, vocab, tp, seq, mbs, kv_heads, swiglu) in CONFIGS:
        if name not in wanted:
            continue
        preheat(torch, args.preheat_s / 10)
        try:
            tokens = mbs * seq
            dh = h // heads
            hp = heads // tp
            kvp = max(1, kv_heads // tp)
            # --- GEMMs ----------------------------------------------------------------------------------------
            for (op, m, n, k) in layer_gemms(h, heads, ffn, tp, tokens, kv_heads, swiglu):
                gemm(name, op, "forward", m, n, k)            # Y = X W
                gemm(name, op, "input-grad", m, k, n)         # dX = dY W^T
                gemm(name, op, "weight-grad", k, n, m)        # dW = X^T dY
                gemm(name, op, "weight-grad-fp32", k, n, m, fp32_acc=True)
            gemm(name, "lm-head", "forward", tokens, vocab // tp, h)
            gemm(name, "lm-head", "input-grad", tokens, h, vocab // tp)
            gemm(name, "lm-head", "weight-grad", h, vocab // tp, tokens)
            # --- attention ------------------------------------------------------------------------------------
            q = rnd(mbs, hp, seq, dh, grad=True)
            k_ = rnd(mbs, kvp, seq, dh, grad=True)
            v_ = rnd(mbs, kvp, seq, dh, grad=True)
            gqa = {"enable_gqa": True} if kvp != hp else {}
            # Causal FLOPs, forward 2 x 2 x (seq^2 / 2) x dh per head; backward 2.5x the forward.
            fwd_flops = 4.0 * mbs * hp * seq * seq / 2.0 * dh
            att_bytes = 2.0 * mbs * seq * dh * (2 * hp + 2 * kvp)
            for (label, backend) in backends:
                try:
                    with sdpa_kernel(backend):
                        out = F.scaled_dot_product_attention(q, k_, v_, is_causal=True, **gqa)
                        grad = torch.randn_like(out)
                        fwd = timed(torch, lambda: F.scaled_dot_product_attention(q, k_, v_, is_causal=True, **gqa),
                                    args.warmup, args.repeats)

                        def fb():
                            o = F.scaled_dot_product_attention(q, k_, v_, is_causal=True, **gqa)
                            o.backward(grad)
                        both = timed(torch, fb, args.warmup, args.repeats)
                except (RuntimeError, TypeError) as e:  # backend not available for this shape or build
                    print(f"{name} attention {label}: skipped ({str(e).splitlines()[0] if str(e) else type(e).__name__})",
                          file=sys.stderr)
                    continue
                row(name, f"attention-{label}", "forward", seq, seq, dh, fwd, flops=fwd_flops, nbytes=att_bytes)
                row(name, f"attention-{label}", "backward", seq, seq, dh, both - fwd, flops=2.5 * fwd_flops,
                    nbytes=2.0 * att_bytes)
            del q, k_, v_
            # --- memory-bound ops -----------------------------------------------------------------------------
            x = rnd(tokens, h, grad=True)
            gx = rnd(tokens, h)
            norm = norm_fn(swiglu, h)
            nf = timed(torch, lambda: norm(x), args.warmup, args.repeats)
            nfb = timed(torch, lambda: norm(x).backward(gx), args.warmup, args.repeats)
            label = "rmsnorm" if swiglu else "layernorm"
            row(name, label, "forward", tokens, h, 0, nf, nbytes=2.0 * 2 * tokens * h)
            row(name, label, "backward", tokens, h, 0, nfb - nf, nbytes=2.0 * 3 * tokens * h)
            y = rnd(tokens, h)
            ra = timed(torch, lambda: x.detach() + y, args.warmup, args.repeats)
            row(name, "residual-add", "forward", tokens, h, 0, ra, nbytes=2.0 * 3 * tokens * h)
            del x, gx, y
            width = (2 if swiglu else 1) * ffn // tp
            u = rnd(tokens, width, grad=True)
            act = act_fn(swiglu)
            gu = torch.randn_like(act(u).detach())
            af = timed(torch, lambda: act(u), args.warmup, args.repeats)
            afb = timed(torch, lambda: act(u).backward(gu), args.warmup, args.repeats)
            out_w = ffn // tp
            label = "swiglu" if swiglu else "gelu"
            row(name, label, "forward", tokens, width, 0, af, nbytes=2.0 * tokens * (width + out_w))
            row(name, label, "backward", tokens, width, 0, afb - af, nbytes=2.0 * tokens * (width * 2 + out_w))
            del u, gu
            torch.cuda.empty_cache()
            # Cross-entropy on fp32 logits (torchtitan's eager loss; Megatron fuses its own), with its peak memory.
            v_tp = vocab // tp
            logits = rnd(tokens, v_tp, grad=True)
            target = torch.randint(0, v_tp, (tokens,), device=dev)
            cf = timed(torch, lambda: F.cross_entropy(logits.float(), target), args.warmup, args.repeats)
            cfb = timed(torch, lambda: F.cross_entropy(logits.float(), target).backward(), args.warmup, args.repeats)
            logits.grad = None
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            F.cross_entropy(logits.float(), target).backward()
            torch.cuda.synchronize()
            extra = (torch.cuda.max_memory_allocated() - base) / 2**20
            row(name, "cross-entropy-fp32", "forward", tokens, v_tp, 0, cf, nbytes=(2.0 + 4 + 4) * tokens * v_tp)
            row(name, "cross-entropy-fp32", "backward", tokens, v_tp, 0, cfb - cf, nbytes=(4.0 + 4 + 2) * tokens * v_tp,
                extra_mib=extra)
            del logits, target
            torch.cuda.empty_cache()
            # --- one whole layer ------------------------------------------------------------------------------
            qkv_w = (hp + 2 * kvp) * dh
            layer = make_layer(h, hp, kvp, dh, width, out_w, tokens, mbs, seq, swiglu, gqa)
            gemm_flops = 2.0 * tokens * (h * qkv_w + hp * dh * h + h * width + out_w * h)
            x = rnd(tokens, h, grad=True)
            gx = rnd(tokens, h)
            for (label, backend) in backends:
                try:
                    with sdpa_kernel(backend):
                        lf = timed(torch, lambda: layer(x), args.warmup, args.repeats)
                        lfb = timed(torch, lambda: layer(x).backward(gx), args.warmup, args.repeats)
                except (RuntimeError, TypeError) as e:
                    print(f"{name} layer {label}: skipped ({str(e).splitlines()[0] if str(e) else type(e).__name__})",
                          file=sys.stderr)
                    continue
                row(name, f"layer-{label}", "forward", tokens, h, 0, lf, flops=gemm_flops + fwd_flops)
                tf, _ = row(name, f"layer-{label}", "forward-backward", tokens, h, 0, lfb,
                            flops=3.0 * gemm_flops + 3.5 * fwd_flops)
                summary.append(f"{name} layer ({label}) fwd+bwd {lfb:.3f} ms, {tf:.0f} TFLOP/s")
                if name == "E2" and layer_e2 is None:
                    layer_e2 = (label, backend, layer, x, gx, 3.0 * gemm_flops + 3.5 * fwd_flops)
            del layer, x, gx
            meta["clocks"][name] = nvml.read()
            write_meta()
            torch.cuda.empty_cache()
            print(f"{name}: done", file=sys.stderr)
        except Exception:  # noqa: BLE001 (a failure in one configuration must not lose the others)
            import traceback
            traceback.print_exc()
            print(f"{name}: failed, going on", file=sys.stderr)
            torch.cuda.empty_cache()

    # --- sustained load: does the card hold its clock? ------------------------------------------------------
    def sustained(label, backend, layer, x, gx, flops):
        with sdpa_kernel(backend):
            times = []
            before = nvml.read()
            t_end = time.time() + args.sustain_s
            while time.time() < t_end:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(10):
                    layer(x).backward(gx)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 10)
            after = nvml.read()
        first = statistics.median(times[:5])
        last = statistics.median(times[-5:])
        row("E2", f"sustained-layer-{label}", "first", len(times), 0, 0, first, flops=flops)
        row("E2", f"sustained-layer-{label}", "last", len(times), 0, 0, last, flops=flops)
        meta["clocks"]["sustained_before"] = before
        meta["clocks"]["sustained_after"] = after
        summary.append(f"sustained {args.sustain_s:.0f} s E2 layer: first {first:.3f} ms, last {last:.3f} ms; "
                       f"clocks {before} -> {after}")
        write_meta()

    # --- serving shapes: Llama-2-7B GEMMs at few tokens -----------------------------------------------------
    def serving():
        preheat(torch, args.preheat_s / 10)
        for t in SERVING_TOKENS:
            for (op, m, n, k) in layer_gemms(4096, 32, 11008, 1, t, 32, True):
                gemm(f"L7B-{t}", op, "forward", m, n, k)

    for (part, fn) in (("sustained", lambda: sustained(*layer_e2) if layer_e2 and args.sustain_s > 0 else None),
                       ("serving", serving)):
        try:
            fn()
        except Exception:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            print(f"{part}: failed, going on", file=sys.stderr)
    meta["clocks"]["end"] = nvml.read()
    write_meta()
    csv.close()
    print("\n".join(summary))


if __name__ == "__main__":
    main()
