#!/usr/bin/env python3
"""Flag fuzzer for the orrery CLI (rule 5: nothing crashes on bad input).

For every value-taking option of each command (read from its --help), runs the command with that option set
to each of a list of hostile values (empty, negative, NaN, inf, 1e308, 2^64, a 300-byte name...) and reports
any run that crashes or reports an internal error (exit code other than 0, 1 or 2, or an 'internal error'
line), any exit 2 whose stderr is not exactly one line, and any run over 60 s (TIMEOUT). Huge values of
--requests are left out: simulating 2^63 requests is a long run by request, not a fault. Exits 1 when
anything was reported.

  python3 tools/fuzz/cli_flags.py [--every K] build/release/orrery [COMMAND ...]   # e.g. 'serve fluid'
--every K runs every K-th case only (the ctest cli_fuzz_flags: K = 5). J=N sets the parallel runs
(default 2). About 6,700 runs, 15 min on 2 cores; docs/cli.md, "Robustness checks".
"""
import subprocess, re, sys, os, tempfile, concurrent.futures as cf
argv = sys.argv[1:]
EVERY = 1
if argv[:1] == ['--every']:
    EVERY = int(argv[1]); argv = argv[2:]
BIN = os.path.abspath(argv[0])
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
WD = tempfile.mkdtemp(prefix='orrery_fuzz_')
bases = {
 'train': ['train','--model','llama3-8b','--gpu','h100-sxm','--gpus','8','--gbs','16','--seq','4096'],
 'serve': ['serve','--model','llama2-7b','--gpu','a100-sxm-80gb','--scheduler','vllm','--requests','200','--rate','4'],
 'serve fluid': ['serve','fluid','--workload','prompt=512,output=20','--rate','20'],
 'net collective': ['net','collective','--cluster','dgx-h100:2','--op','all-reduce','--size','64MiB'],
 'net sweep': ['net','sweep','--cluster','dgx-h100:2','--op','all-reduce'],
 'gossip run': ['gossip','run','--algo','dsgd','--topology','ring:4','--problem','logistic-nonconvex','--samples','400','--dim','4','--iters','10','--batch','10'],
 'gossip topo': ['gossip','topo','--topology','ring:5'],
 'gossip sweep': ['gossip','sweep','--nodes','2,4','--topology','ring','--algo','dsgd','--iters','10','--samples','400','--dim','4'],
 'gossip devices': ['gossip','devices','--devices','4','--horizon','1h'],
 'plan train': ['plan','train','--model','llama3-8b','--gpu','h100-sxm','--gpus','8','--seq','4096','--gbs','16','--top','2'],
 'plan serve': ['plan','serve','--model','llama2-7b','--gpus','a100-sxm-80gb','--tp','1','--schedulers','vllm','--requests','300'],
 'catalog show': ['catalog','show','gpu','h100-sxm'],
 'calibrate': ['calibrate','--gpu','h100-sxm','--kernels',ROOT+'/data/measured/h100-sxm/training_kernels_hot.csv','--sweep',ROOT+'/data/measured/h100-sxm/attention_sweep.csv'],
 'serve list': ['serve','list'],
 'gossip list': ['gossip','list'],
}
vals = ['', '-1', '0', 'abc', 'nan', 'inf', '1e308', '-1e308', '99999999999999999999', '1.5', ' ', ',', ':', '1:2:3', '=', 'x'*300, '0x10', '1e-320', '-0', '5GiB', '1/0']
crash = re.compile(r'terminate called|AddressSanitizer|runtime error|Segmentation|Aborted|core dumped|std::|what\(\)|LeakSanitizer|Assertion')
def opts(sub):
    h = subprocess.run([BIN]+sub.split()+['--help'], capture_output=True, text=True).stdout
    out=[]
    for line in h.splitlines():
        m = re.match(r'\s+(?:-\w,)?(--[\w-]+)(?:,--[\w-]+)?\s+(\S+)?', line)
        if m and m.group(1) not in ('--help','--json','--quiet','--version'):
            takes = m.group(2) is not None and re.match(r'^[A-Z][A-Z_]*(=|$)', m.group(2)) is not None
            out.append((m.group(1), takes))
    return out
def run(args):
    try:
        p = subprocess.run([BIN,'-q']+args, capture_output=True, text=True, timeout=60, cwd=WD)
    except subprocess.TimeoutExpired:
        return ('TIMEOUT', args, '', 'timeout')
    err = p.stderr
    bad = None
    if crash.search(err) or 'internal error' in err or p.returncode not in (0,1,2): bad='CRASH'
    elif p.returncode==2 and len([l for l in err.splitlines() if l.strip()])!=1: bad='MULTILINE'
    return (bad, args, f'rc={p.returncode} '+err[-600:], p.returncode)
jobs=[]
only = argv[1:] or list(bases)
for name in only:
    if name not in bases: sys.exit(f'unknown command {name!r}; one of: ' + ', '.join(bases))
for name in only:
    base = bases[name]
    for opt,takes in opts(name):
        if not takes: continue
        for v in vals:
            if opt == '--requests' and v in ('99999999999999999999', '1e308', 'inf'): continue
            a = list(base)
            if opt in a:
                i = a.index(opt); a[i+1]=v
            else:
                a += [opt, v]
            jobs.append(a)
jobs = jobs[::EVERY]
print(len(jobs), 'runs; scratch folder', WD, file=sys.stderr)
faults = 0
rcs = {}  # exit code -> runs, counted here rather than in the worker threads
with cf.ThreadPoolExecutor(int(os.environ.get('J','2'))) as ex:
    for bad,args,err,rc in ex.map(run, jobs):
        rcs[rc] = rcs.get(rc, 0) + 1
        if bad:
            faults += 1
            print(bad, ' '.join(repr(x) if (' ' in x or x=='') else x for x in args), '\n   ', err.strip().replace('\n','\n    ')[:600], flush=True)
print(f'cli_flags: {len(jobs)} runs (exit codes: ' + ', '.join(f'{k}: {v}' for k, v in sorted(rcs.items(), key=str)) + f'), {faults} reported')
sys.exit(1 if faults else 0)
