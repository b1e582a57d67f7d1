#!/usr/bin/env python3
"""Property checks of `orrery train` over random plans (metamorphic testing: no expected value, only
relations between two runs that the physics fixes).

Draws random valid plans (a catalog model, 8-64 GPUs of h100-sxm or a100-80g, tp/pp/cp/ep/mbs/schedule/
sharding/sp at random; draws that `train` rejects with exit 2 are drawn again) and, for each, runs pairs of
plans that differ in one setting. Each relation below holds for every plan, with its reason:

  sums           the time categories add up to the step and the memory categories to the peak
                 (docs/training.md, JSON keys), and tokens/s x step = gbs x seq / gpus
  deterministic  the same command twice gives byte-identical JSON (rule 6)
  recompute      --recompute full: the step is not shorter (the backward redoes the forward) and the
                 tensors' peak not higher (only layer inputs are saved) than --recompute none
  offload        --activation-offload / --optimizer-offload: the tensors' peak is not higher; --offload-layers 1
                 (the first layer of each rank) keeps the tensors' peak at most that without offload, and
                 offloading everything at most that of one layer (two layers' buffers replace each
                 offloaded layer's in-flight micro-batches); a larger --optimizer-offload-fraction keeps
                 the tensors' peak at most that of a smaller one
  optimizer      --optimizer-dtype bf16 --master-weights none (4 instead of 12 bytes of states per
                 parameter): the tensors' peak (the most any stage holds, less its allocator's
                 reservation) is not higher
  fp8            --precision fp8 against bf16 (h100): the tensors' peak is not higher (Transformer Engine
                 keeps fp8 copies of its GEMM inputs, T (h + f) bytes per layer and micro-batch fewer; the
                 attention output kept twice is counted)
  nic            a 400 Gb/s NIC gives a step no longer than a 200 Gb/s one
  straggler      --straggler 0:1.5 (stage 0 1.5x slower): the step is not shorter
  gpu variability --gpu-variability 0.02: the model FLOPs and the peak do not change and the step is not shorter
  slow link      --slow-link 0:nic:3: the step is not shorter
  expert tp      --etp 1 (MoE, tp > 1 with SP): the model FLOPs per step (TFLOP/s x step) do not change (the
                 experts' GEMMs take etp / tp of the rows and tp / etp times the columns) and the weights
                 are not smaller (each rank holds its experts whole)
  grad accum     --grad-accum-fusion yes against no: the model FLOPs and the peak do not change (the fp32
                 accumulation adds only epilogue traffic to the weight-gradient GEMMs) and the step is not
                 shorter
  fsdp impl      --fsdp-impl fsdp2 against flat: the model FLOPs and the peak do not change (FSDP2's copies
                 are memory-bound kernels beside the collectives) and the step is not shorter
  cp comm        --cp-comm-type all_gather and a2a against p2p: the model FLOPs do not change (the attention
                 kernels do the same work) and the tensors' peak is not lower (a gathered or head-split
                 buffer beside the attention); the step not shorter (advisory: more exposed exchange)
  fusion compile --fusion compile against fused, weight gradients apart in both: the step and the model
                 FLOPs do not change (the same block kernels; the loss's bytes do not depend on it) and the
                 tensors' peak is not lower (the eager loss holds 8 B per logit)
  zero2          --dp-sharding zero2 against zero1: the model FLOPs do not change and the tensors' peak is
                 not higher (the gradients sharded); the step not shorter (advisory: it reduce-scatters
                 every micro-batch)
  dropout        --attention-dropout 0.1 against 0: the model FLOPs and the peak do not change (the fused
                 kernel regenerates its mask instead of saving it)
  modules        --recompute selective with --recompute-modules core_attn,moe_act (MoE models) or
                 core_attn,mlp (dense ones) against core_attn alone: the tensors' peak is not higher (a module
                 only drops saved tensors), the step not shorter (it only re-runs forwards), the model
                 FLOPs the same
  async tp       --tp-comm-overlap async against no: the model FLOPs and the peak do not change (PyTorch's
                 async TP only reorders the same GEMMs and transfers; docs/training.md)
  pairs          --overlap-f-b yes against no (dualpipe-v; the same run elsewhere) and
                 --overlap-moe-expert-parallel-comm yes against no (Megatron's combined 1F1B, where it
                 applies): the model FLOPs do not change and the tensors' peak is not higher (a pair swaps
                 its chunks' activations); under dualpipe-v, whose order is the same either way, the step
                 is not longer either (a pair's all-to-alls only shrink)

Relations that look as if they should hold but do not always, and why (reported with -v, not failures):
  --overlap-grad-reduce no can be faster: the overlapped DP reduction shares the NIC with EP all-to-alls
    or pipeline sends on the critical path (link sharing), which it then slows (3% seen on Qwen3 MoE, ep 4).
  --fsdp-prefetch 2 can be slower than 1: the earlier all-gathers share the link with other traffic.
  --grad-bytes 2 can lengthen a tiny step by ~1e-4: the 40 MB bucket holds twice the gradients, so the
    last bucket's reduction starts later.
  fsdp's peak can pass zero2's on small models (gpt2): the gathered layers and FSDP's root unit outweigh
    the sharded bf16 parameters.
  --tp-comm-overlap yes can be slower on small per-GPU GEMMs (Transformer Engine's chunked GEMMs).
  --attention-dropout 0.1 can shorten a step with context parallelism and an overlapped DP reduction
    (0.19% seen, Llama-2-7B, cp 2): the longer attention kernels hide more of the CP ring, and the model puts
    only a ring's exposed part on the NIC, which the DP reduction then has to itself (with the overlap off
    the step is unchanged to the picosecond: the ring's slack absorbs the extra kernel time).
  --power-limit below TDP can shorten a step by ~1e-4: slower compute reorders collectives on shared links.
  --overlap-moe-expert-parallel-comm yes can be slower on one stage: its order runs F i+1 before B i, so
    the first backward, and with it a ZeRO-2 step's per-micro-batch reduce-scatters, start a forward later
    (2.3% seen, Qwen3-30B-A3B, ZeRO-2 on 16 replicas, whose DP stream paces the step).
  --dp-sharding zero2 can be up to ~2% faster than zero1 with few micro-batches (1.9% seen, gpt2, one
    micro-batch per replica): it reduce-scatters layer by layer as the backward goes, where ZeRO-1 waits
    for 40 MB buckets to fill, so its last reduction ends sooner; with many micro-batches its extra
    reductions make it slower.
  smaller or fewer tensors can raise the caching allocator's reservation (--allocator classic: 17 MB on
    a gpt2 FSDP plan with bf16 optimizer states; 13 -> 831 MB beyond the tensors with the optimizer
    offloaded, gpt2 on 64 H100, tp 2, dp 32, FSDP, mbs 2, seq 4096: best fit over 20 MiB segments: where the
    first blocks go decides which later ones fit in the holes): its segment packing is not
    monotone in what is allocated, so every memory relation above compares the tensors.

  python3 tools/fuzz/train_properties.py [-v] build/release/orrery [PLANS [SEED]]   (default 40 plans, seed 1)
Exits 1 when a relation that must hold fails or a run crashes (exit other than 0, 1, 2); prints each with
its commands. J=N sets the parallel runs (default 2). 40 plans: about 1,000 runs, 20 s on 2 cores.
"""
import concurrent.futures as cf
import json
import os
import random
import subprocess
import sys

argv = sys.argv[1:]
VERBOSE = argv[:1] == ['-v']
if VERBOSE:
    argv = argv[1:]
if not argv:
    sys.exit(__doc__)
BIN = os.path.abspath(argv[0])
PLANS = int(argv[1]) if len(argv) > 1 else 40
SEED = int(argv[2]) if len(argv) > 2 else 1
J = int(os.environ.get('J', '2'))

MODELS = ['gpt2', 'llama2-7b', 'llama3-8b', 'mixtral-8x7b', 'qwen3-30b-a3b', 'gpt-oss-20b']
MOE = {'mixtral-8x7b', 'qwen3-30b-a3b', 'gpt-oss-20b'}
EPS = 1e-9


def draw(rng):
    model = rng.choice(MODELS)
    gpus = rng.choice([8, 16, 32, 64])
    tp, pp, cp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4]), rng.choice([1, 1, 2])
    if gpus % (tp * pp * cp):
        return None
    dp = gpus // (tp * pp * cp)
    mbs = rng.choice([1, 2])
    micro = rng.choice([1, 2, 4, 8])
    a = ['--model', model, '--gpu', rng.choice(['h100-sxm', 'a100-80g']), '--gpus', str(gpus), '--tp', str(tp),
         '--pp', str(pp), '--cp', str(cp), '--mbs', str(mbs), '--gbs', str(dp * mbs * micro),
         '--seq', str(rng.choice([2048, 4096])), '--dp-sharding', rng.choice(['none', 'distopt', 'zero2', 'fsdp']),
         '--sp', 'yes' if tp > 1 and rng.random() < 0.7 else 'no', '--allocator', rng.choice(['none', 'classic'])]
    if model in MOE and dp * cp >= 2:
        a += ['--ep', str(rng.choice([e for e in (1, 2, 4, 8) if (dp * cp) % e == 0]))]
    if pp > 1:
        schedule = rng.choice(['1f1b', 'gpipe', 'zero-bubble', 'zb-v', 'dualpipe-v', 'interleaved-zb', 'looped-bfs'])
        a += ['--schedule', schedule]
        if schedule in ('interleaved-zb', 'looped-bfs'):
            a += ['--vp', '2']
    return a


def run(args):
    r = subprocess.run([BIN, '--json', 'train'] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def le(x, y):
    return x <= y * (1 + EPS)


def tensors(d):
    """The most tensor bytes any stage holds (its peak less the caching allocator's reservation). Taken
    per stage: the peak stage (the most with the reservation) need not hold the most tensors."""
    return max(s['total_bytes'] - s['memory']['allocator'] for s in d['memory_by_stage'])


def same_flops(a, b):
    """The same model FLOPs per step (TFLOP/s x step)."""
    fa, fb = a['tflops_per_gpu'] * a['step_time_s'], b['tflops_per_gpu'] * b['step_time_s']
    return abs(fa - fb) <= 1e-9 * fa


def same_work(a, b):
    """The same model FLOPs per step and the same peak memory."""
    return same_flops(a, b) and a['peak_memory_bytes'] == b['peak_memory_bytes']


# name: (args of run a, args of run b, relation(a, b), must hold)
PAIRS = {
    'recompute': (['--recompute', 'none'], ['--recompute', 'full'],
                  lambda a, b: le(a['step_time_s'], b['step_time_s']) and tensors(b) <= tensors(a), True),
    'activation offload': ([], ['--activation-offload'], lambda a, b: tensors(b) <= tensors(a), True),
    'optimizer offload': ([], ['--optimizer-offload'], lambda a, b: tensors(b) <= tensors(a), True),
    'optimizer offload share': (['--optimizer-offload-fraction', '0.25'], ['--optimizer-offload-fraction', '0.75'],
                                lambda a, b: tensors(b) <= tensors(a), True),
    'offload one layer': ([], ['--offload-layers', '1'], lambda a, b: tensors(b) <= tensors(a), True),
    'offload every layer': (['--offload-layers', '1'], ['--activation-offload'], lambda a, b: tensors(b) <= tensors(a), True),
    'optimizer states': ([], ['--optimizer-dtype', 'bf16', '--master-weights', 'none'],
                         lambda a, b: tensors(b) <= tensors(a), True),
    'fp8 memory': (['--precision', 'bf16'], ['--precision', 'fp8'], lambda a, b: tensors(b) <= tensors(a), True),
    'nic': (['--nic-bandwidth', '200 Gb/s'], ['--nic-bandwidth', '400 Gb/s'], lambda a, b: le(b['step_time_s'], a['step_time_s']), True),
    'straggler': ([], ['--straggler', '0:1.5'], lambda a, b: le(a['step_time_s'], b['step_time_s']), True),
    'gpu variability': ([], ['--gpu-variability', '0.02'], lambda a, b: same_work(a, b) and le(a['step_time_s'], b['step_time_s']), True),
    'slow link': ([], ['--slow-link', '0:nic:3'], lambda a, b: le(a['step_time_s'], b['step_time_s']), True),
    'expert tp': ([], ['--etp', '1'],
                  lambda a, b: abs(a['tflops_per_gpu'] * a['step_time_s'] - b['tflops_per_gpu'] * b['step_time_s'])
                  <= 1e-9 * a['tflops_per_gpu'] * a['step_time_s'] and a['memory']['weights'] <= b['memory']['weights'], True),
    'grad accum': (['--grad-accum-fusion', 'no'], ['--grad-accum-fusion', 'yes'],
                   lambda a, b: same_work(a, b) and le(a['step_time_s'], b['step_time_s']), True),
    'fsdp impl': (['--fsdp-impl', 'flat'], ['--fsdp-impl', 'fsdp2'],
                  lambda a, b: same_work(a, b) and le(a['step_time_s'], b['step_time_s']), True),
    'cp comm all_gather': (['--cp-comm-type', 'p2p'], ['--cp-comm-type', 'all_gather'],
                           lambda a, b: same_flops(a, b) and tensors(a) <= tensors(b), True),
    'cp comm a2a': (['--cp-comm-type', 'p2p'], ['--cp-comm-type', 'a2a'],
                    lambda a, b: same_flops(a, b) and tensors(a) <= tensors(b), True),
    'cp comm step': (['--cp-comm-type', 'p2p'], ['--cp-comm-type', 'all_gather'],
                     lambda a, b: le(a['step_time_s'], b['step_time_s']), False),
    'fusion compile': (['--fusion', 'fused', '--grad-accum-fusion', 'no'], ['--fusion', 'compile', '--grad-accum-fusion', 'no'],
                       lambda a, b: a['step_time_s'] == b['step_time_s'] and same_flops(a, b) and tensors(a) <= tensors(b), True),
    'zero2': (['--dp-sharding', 'zero1'], ['--dp-sharding', 'zero2'],
              lambda a, b: same_flops(a, b) and tensors(b) <= tensors(a), True),
    'zero2 step': (['--dp-sharding', 'zero1'], ['--dp-sharding', 'zero2'],
                   lambda a, b: le(a['step_time_s'], b['step_time_s']), False),
    # Under PP, FSDP keeps its layers gathered and accumulates unsharded gradients (Plan::fsdp_keeps_gathered):
    # the distributed optimizer's tensors and more.
    'fsdp under pp': (['--dp-sharding', 'distopt'], ['--dp-sharding', 'fsdp'],
                      lambda a, b: same_flops(a, b) and (a['plan']['pp'] == 1 or tensors(a) <= tensors(b)), True),
    'dropout': (['--attention-dropout', '0'], ['--attention-dropout', '0.1'], same_work, True),
    'dropout step': (['--attention-dropout', '0'], ['--attention-dropout', '0.1'],
                     lambda a, b: le(a['step_time_s'], b['step_time_s']), False),
    'modules moe': (['--recompute', 'selective'], ['--recompute', 'selective', '--recompute-modules', 'core_attn,moe_act'],
                    lambda a, b: tensors(b) <= tensors(a) and le(a['step_time_s'], b['step_time_s']) and same_flops(a, b), True),
    'modules mlp': (['--recompute', 'selective'], ['--recompute', 'selective', '--recompute-modules', 'core_attn,mlp'],
                    lambda a, b: tensors(b) <= tensors(a) and le(a['step_time_s'], b['step_time_s']) and same_flops(a, b), True),
    'overlap-grad-reduce no': ([], ['--overlap-grad-reduce', 'no'], lambda a, b: le(a['step_time_s'], b['step_time_s']), False),
    'fsdp-prefetch 2': ([], ['--fsdp-prefetch', '2'], lambda a, b: le(b['step_time_s'], a['step_time_s']), False),
    'grad-bytes 2': ([], ['--grad-bytes', '2'], lambda a, b: le(b['step_time_s'], a['step_time_s']), False),
    'async tp': (['--tp-comm-overlap', 'no'], ['--tp-comm-overlap', 'async'], same_work, True),
    'tp-comm-overlap yes': ([], ['--tp-comm-overlap', 'yes'], lambda a, b: le(b['step_time_s'], a['step_time_s']), False),
    'power-limit 500 W': ([], ['--power-limit', '500 W'], lambda a, b: le(a['step_time_s'], b['step_time_s']), False),
    # Overlapped forward-backward pairs (DualPipeV's, Megatron's combined 1F1B) only shorten their passes'
    # all-to-all time and swap activations: the same work, never slower, never more tensors.
    'pairs overlapped': (['--overlap-f-b', 'no'], ['--overlap-f-b', 'yes'],
                         lambda a, b: same_flops(a, b) and le(b['step_time_s'], a['step_time_s']) and tensors(b) <= tensors(a), True),
    'combined 1f1b': (['--overlap-moe-expert-parallel-comm', 'no'], ['--overlap-moe-expert-parallel-comm', 'yes'],
                      lambda a, b: same_flops(a, b) and tensors(b) <= tensors(a), True),
    'combined 1f1b step': (['--overlap-moe-expert-parallel-comm', 'no'], ['--overlap-moe-expert-parallel-comm', 'yes'],
                           lambda a, b: le(b['step_time_s'], a['step_time_s']), False),
}


def sums(d, args):
    gpus = int(args[args.index('--gpus') + 1])
    tokens = int(args[args.index('--gbs') + 1]) * int(args[args.index('--seq') + 1]) / gpus
    step = d['step_time_s']
    return (abs(sum(d['time'].values()) - step) <= 1e-6 * step and
            abs(sum(d['memory'].values()) - d['peak_memory_bytes']) <= 1e-6 * d['peak_memory_bytes'] + 1 and
            abs(d['tokens_per_s_per_gpu'] * step - tokens) <= 1e-6 * tokens)


def check(base):
    """Returns (failures, notes) of one base plan that train accepts."""
    rc, out, err = run(base)
    fails, notes = [], []
    if rc not in (0, 1):
        return [f'crash (exit {rc}): train {" ".join(base)}: {err.strip()[-300:]}'], notes
    d = json.loads(out)
    if not sums(d, base):
        fails.append(f'sums: train {" ".join(base)}')
    rc2, out2, _ = run(base)
    if out2 != out:
        fails.append(f'deterministic: train {" ".join(base)}')
    for name, (xa, xb, rel, strict) in PAIRS.items():
        res = [run(base + x) for x in (xa, xb)]
        if any(r[0] not in (0, 1, 2) for r in res):
            fails.append(f'crash: train {" ".join(base)} with {xa or xb}')
            continue
        if any(r[0] == 2 for r in res):
            continue  # the setting does not apply to this plan (e.g. a slow link on one GPU)
        a, b = (json.loads(r[1]) for r in res)
        if not rel(a, b):
            line = (f'{name}: {a["step_time_s"]:.6g} s / {a["peak_memory_bytes"]} B -> {b["step_time_s"]:.6g} s / '
                    f'{b["peak_memory_bytes"]} B: train {" ".join(base)} [{" ".join(xa)}] vs [{" ".join(xb)}]')
            (fails if strict else notes).append(line)
    return fails, notes


def main():
    rng = random.Random(SEED)
    bases = []
    while len(bases) < PLANS * 3:  # about half are rejected (exit 2); the first PLANS accepted are checked
        b = draw(rng)
        if b is not None:
            bases.append(b)
    fails, notes, checked = [], [], 0
    with cf.ThreadPoolExecutor(J) as ex:
        accepted = [b for b, rc in zip(bases, ex.map(lambda b: run(b)[0], bases)) if rc != 2][:PLANS]
        for res in ex.map(check, accepted):
            checked += 1
            fails += res[0]
            notes += res[1]
    for line in fails:
        print('FAIL', line)
    if VERBOSE:
        for line in notes:
            print('note', line)
    print(f'train properties: {checked} plans, {len(fails)} failures, {len(notes)} known non-monotone cases (-v lists them)')
    sys.exit(1 if fails or checked < PLANS else 0)


main()
