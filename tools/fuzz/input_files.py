#!/usr/bin/env python3
"""Input-file fuzzer for the orrery CLI's readers (rule 5: nothing crashes on bad input).

Starts from a valid file per reader (traces: Azure CSV, Mooncake JSONL, Vidur-style CSV, generic CSV; an
edge-list topology; a Hugging Face config.json; a results table for `train --replay`; a pipeline order for `train --schedule-csv`; a calibration YAML; the CSVs of `orrery calibrate`; a
catalog YAML; a Vidur profile CSV), applies one or two random edits (delete, duplicate or swap a line,
truncate, replace a number by a hostile value, insert or delete a character) and runs the command that
reads it. Reports crashes and internal errors, exit 2 with more than one line, exit 1, and runs over 60 s;
exits 1 when anything was reported.
Seeds: the project's own files, and the first lines of ../shared's traces and profile when present.

  python3 tools/fuzz/input_files.py build/release/orrery [RUNS_PER_FILE=120] [SEED_FILE ...]
About 1,300 runs, 5 min on 2 cores; deterministic for a given RUNS_PER_FILE (the ctest cli_fuzz_files: 40).
docs/cli.md, "Robustness checks".
"""
import subprocess, random, re, sys, os, shutil, tempfile, zlib, concurrent.futures as cf
BIN=os.path.abspath(sys.argv[1]); N=int(sys.argv[2]) if len(sys.argv)>2 else 120
ROOT=os.path.abspath(os.path.join(os.path.dirname(__file__),'..','..'))
SHARED=os.environ.get('ORRERY_SHARED_DIR', os.path.join(ROOT,'..','shared'))
WD=tempfile.mkdtemp(prefix='orrery_ffuzz_'); S=os.path.join(WD,'seeds')+'/'; os.makedirs(S)
def head(src, n, dst):
    if os.path.exists(src):
        with open(src, encoding='utf-8') as f, open(S+dst,'w',encoding='utf-8') as o:
            for i, line in enumerate(f):
                if i >= n: break
                o.write(line)
head(os.path.join(SHARED,'data/traces/AzureLLMInferenceTrace_conv.csv'), 40, 'azure.csv')
head(os.path.join(SHARED,'data/traces/mooncake_conversation_trace.jsonl'), 20, 'mooncake.jsonl')
head(os.path.join(SHARED,'data/traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv'), 30, 'vidur.csv')
head(os.path.join(SHARED,'data/profiles/vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv'), 40, 'mlp.csv')
M=os.path.join(ROOT,'data/measured/h100-sxm/')
shutil.copy(M+'calibration.yaml', S+'calib.yaml')
head(M+'training_kernels_hot.csv', 30, 'kernels.csv')
head(M+'attention_sweep.csv', 40, 'sweep.csv')
# A results table for `train --replay`: the header and two rows of data/published/nemo_h100_bf16.csv.
with open(os.path.join(ROOT,'data/published/nemo_h100_bf16.csv'),encoding='utf-8') as f, open(S+'runs.csv','w',encoding='utf-8') as o:
    for line in f:
        if line.startswith('id,') or line.startswith('N1,') or line.startswith('N4,'): o.write(line)
# The optional columns of the Llama 3 and torchtitan tables (stage layers 0, cp_comm_type, tp_comm_overlap,
# fp8_recipe, FSDP under PP with uneven stages): their header and two rows each.
for name, ids, dst in (('llama3_405b_meta.csv', ('L1,', 'L3,'), 'llama3.csv'), ('torchtitan_h100_2412.csv', ('P2t,', 'DAt,'), 'tt.csv'),
                       ('torchtitan_405b_pp_2412.csv', ('S2t,', 'Q2m,'), 'tt405.csv')):
    with open(os.path.join(ROOT,'data/published/'+name),encoding='utf-8') as f, open(S+dst,'w',encoding='utf-8') as o:
        for line in f:
            if line.startswith('id,') or line.startswith(ids): o.write(line)
# The MoE table (optional columns: a config.json beside it, a catalog model, the dispatcher columns).
shutil.copy(os.path.join(ROOT,'data/published/moe_h100_bf16.csv'), S+'moe.csv')
shutil.copy(os.path.join(ROOT,'data/published/grok1_314b_nemo.json'), S+'grok1_314b_nemo.json')
open(S+'generic.csv','w').write('arrival_s,prompt_tokens,output_tokens,prefix_ids\n0,100,10,1 2 3\n0.5,200,20,\n1.0,300,5,4\n')
open(S+'topo.topo','w').write('''switch net tier=1
switch m0.sw tier=0
switch m1.sw tier=0
nic m0.nic0 machine=0
nic m1.nic0 machine=1
gpu m0.g0 machine=0 nic=m0.nic0 rail=0
gpu m0.g1 machine=0 nic=m0.nic0 rail=0
gpu m1.g0 machine=1 nic=m1.nic0 rail=0
gpu m1.g1 machine=1 nic=m1.nic0 rail=0
link m0.g0 m0.sw bw=450GB/s lat=235ns duplex kind=scaleup
link m0.g1 m0.sw bw=450GB/s lat=235ns duplex kind=scaleup
link m1.g0 m1.sw bw=450GB/s lat=235ns duplex kind=scaleup
link m1.g1 m1.sw bw=450GB/s lat=235ns duplex kind=scaleup
link m0.g0 m0.nic0 bw=64GB/s lat=1.2us duplex kind=pcie
link m0.g1 m0.nic0 bw=64GB/s lat=1.2us duplex kind=pcie
link m1.g0 m1.nic0 bw=64GB/s lat=1.2us duplex kind=pcie
link m1.g1 m1.nic0 bw=64GB/s lat=1.2us duplex kind=pcie
link m0.nic0 net bw=400Gb/s lat=150ns duplex
link m1.nic0 net bw=400Gb/s lat=150ns duplex
''')
open(S+'config.json','w').write('''{
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 2048,
  "intermediate_size": 5632,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 22,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 32000
}
''')
# A small gpt-oss config: the per-layer layer_types list, the checkpoint's experts_per_token spelling.
open(S+'oss.json','w').write('''{
  "architectures": ["GptOssForCausalLM"],
  "attention_bias": true,
  "experts_per_token": 2,
  "head_dim": 64,
  "hidden_size": 512,
  "intermediate_size": 512,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "model_type": "gpt_oss",
  "num_attention_heads": 8,
  "num_hidden_layers": 4,
  "num_key_value_heads": 2,
  "num_local_experts": 8,
  "sliding_window": 128,
  "vocab_size": 32000,
  "orrery_published_params": {"total": 1e8, "active_convention": "excluding_input_embedding"}
}
''')
# A pipeline order for `train --schedule-csv` (torch's format): the interleaved zero-bubble order of
# pp 2, vp 2, 4 micro-batches (Schedule.InterleavedZeroBubbleFollowsTorchsOrder), with a pair.
open(S+'order.csv','w').write('0F0,0F1,2F0,2F1,2I0,2W0,0F2,2I1,2W1,0F3,0I0,0W0,2F2,0I1,0W1,2F3,2I2,2W2,2I3,2W3,0I2,0W2,0I3,0W3\n'
                              '1F0,1F1,3F0,3I0,3F1,3I1,3W0,1F2,1I0,3W1,1F3,1I1,1W0,3F2,3I2,1W1,3F3,3I3,3W2,1I2,3W3,1I3,1W2,1W3\n')
open(S+'catalog.yaml','w').write("""gpus:
  - {name: x100, vendor: acme, memory: 96 GiB, memory_bandwidth: 4 TB/s, flops: {bf16: 990 TFLOP/s, fp8: 1980 TFLOP/s},
     pcie: {generation: 5, bandwidth_per_direction: 64 GB/s}, tdp: 700 W, source: "input_files.py fixture"}
""")
cases = {
 'azure.csv':   lambda f: ['serve','--trace',f,'--requests','30'],
 'mooncake.jsonl': lambda f: ['serve','--trace',f],
 'vidur.csv':   lambda f: ['serve','--trace',f],
 'generic.csv': lambda f: ['serve','--trace',f],
 'topo.topo':   lambda f: ['net','collective','--topology',f,'--op','all-reduce','--size','64MiB'],
 'config.json': lambda f: ['train','--model',f,'--gpu','h100-sxm','--gpus','8','--gbs','16'],
 'oss.json':    lambda f: ['train','--model',f,'--gpu','h100-sxm','--gpus','8','--ep','8','--gbs','16'],
 'calib.yaml':  lambda f: ['train','--model','llama3-8b','--gpu','h100-sxm','--gpus','8','--gbs','16','--calibration',f],
 'kernels.csv': lambda f: ['calibrate','--gpu','h100-sxm','--kernels',f],
 'sweep.csv':   lambda f: ['calibrate','--gpu','h100-sxm','--sweep',f],
 'catalog.yaml':lambda f: ['--catalog',f,'catalog','show','gpu','x100'],
 'order.csv':   lambda f: ['train','--model','llama3-8b','--gpu','h100-sxm','--gpus','2','--pp','2','--gbs','4','--seq','1024','--schedule-csv',f],
 'runs.csv':    lambda f: ['train','--replay',f],
 'moe.csv':     lambda f: ['train','--replay',f],
 'llama3.csv':  lambda f: ['train','--replay',f],
 'tt.csv':      lambda f: ['train','--replay',f],
 'mlp.csv':     lambda f: ['serve','--model','llama2-7b','--gpu','a100-sxm-80gb','--exec-model','vidur-profile','--profile',f,'--requests','20'],
}
nasty=['-1','0','1e308','-1e308','nan','inf','99999999999999999999','','abc','1e-320','0.0','-0','3.5','"','{','[','null','true','\x00','\xff']
num=re.compile(r'-?\d+(\.\d+)?([eE][-+]?\d+)?')
def mutate(text, rnd):
    lines=text.split('\n')
    op=rnd.randrange(9)
    if op==0 and len(lines)>1: del lines[rnd.randrange(len(lines))]
    elif op==1: i=rnd.randrange(len(lines)); lines.insert(i, lines[i])
    elif op==2: return text[:rnd.randrange(len(text)+1)]
    elif op in (3,4,5):
        ms=list(num.finditer(text))
        if ms:
            m=rnd.choice(ms); return text[:m.start()]+rnd.choice(nasty)+text[m.end():]
    elif op==6:
        i=rnd.randrange(len(text)+1); return text[:i]+rnd.choice([',',':',' ','\t','\n','#','=','x','"','\\'])+text[i:]
    elif op==7 and len(text)>0:
        i=rnd.randrange(len(text)); return text[:i]+text[i+1:]
    elif op==8 and len(lines)>2:
        i,j=rnd.randrange(len(lines)),rnd.randrange(len(lines)); lines[i],lines[j]=lines[j],lines[i]
    return '\n'.join(lines)
crash = re.compile(r'internal error|terminate called|AddressSanitizer|runtime error|Segmentation|Aborted|LeakSanitizer')
def run(job):
    name,k,text=job
    d=os.path.join(WD,f'{name}.{k}'); os.makedirs(d,exist_ok=True)
    f=os.path.join(d,name)
    open(f,'w',encoding='utf-8',errors='surrogateescape').write(text)
    args=[BIN,'-q']+cases[name](f)
    try: p=subprocess.run(args,capture_output=True,timeout=60,cwd=d)
    except subprocess.TimeoutExpired: return ('TIMEOUT',name,k,'')
    err=p.stderr.decode('utf-8','replace')
    bad=None
    if crash.search(err) or p.returncode not in (0,1,2): bad='CRASH'
    elif p.returncode==2 and len([l for l in err.splitlines() if l.strip()])!=1: bad='MULTILINE'
    elif p.returncode==1: bad='RC1'
    if not bad: subprocess.run(['rm','-rf',d])
    return (bad,name,k,f'rc={p.returncode} '+err[-400:])
jobs=[]
for name in (sys.argv[3:] or cases):
    if not os.path.exists(S+name):
        print('skipped', name, '(no seed: ../shared absent)', file=sys.stderr); continue
    base=open(S+name,encoding='utf-8').read()
    rnd=random.Random(zlib.crc32(name.encode()))
    for k in range(N):
        t=base
        for _ in range(rnd.randrange(1,3)): t=mutate(t,rnd)
        jobs.append((name,k,t))
faults=0
with cf.ThreadPoolExecutor(2) as ex:
    for bad,name,k,err in ex.map(run,jobs):
        if bad:
            faults += 1
            print(bad,name,k,err.strip()[:400],flush=True)
print(f'input_files: {len(jobs)} runs, {faults} reported; failing inputs kept under {WD}')
if not faults: shutil.rmtree(WD, ignore_errors=True)
sys.exit(1 if faults else 0)
