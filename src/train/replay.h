// Replaying measured training runs: a results table in the columns of ../shared/validation/training.csv
// read into runs, each mapped onto the `orrery train` flags that replay it (docs/training.md, "Replaying
// measured runs"). The validation test (tests/validation/train_validation_test.cc) and `orrery train
// --replay FILE` share these rules, so a row's prediction and its printed command line agree.
//
// Rules for what a source leaves unstated, applied to every row alike:
//   mbs empty -> 1; vp empty -> 1 (no interleaving; schedule 1f1b, interleaved when vp > 1);
//   recompute empty -> none (Megatron-Core's default); sp empty -> yes when tp > 1 (Megatron-Core's
//   recommended setting with TP); dp_sharding empty -> none; seq empty -> 4096 (Llama-2's context; such a
//   row is printed but not scored: activations and step time scale with it).
// Software stack per source (the sources' own descriptions; docs/training.md, "Validation"):
//   megatron-sc21-t1, korthikanti-t5 (2021-22): no fused attention (they predate FlashAttention).
//   megatron-core-r0.8: TP communication overlap (the source states DP/TP/PP overlap); nemo-dgxc-*
//   (data/published/nemo_h100_bf16.csv) too (NeMo's published configurations set ub_tp_comm_overlap), and
//   mbridge-* (data/published/mbridge_fp8.csv: Megatron-Bridge's performance recipes set tp_comm_overlap).
//   torchtitan-2412: attention through PyTorch SDPA's FlashAttention-2 (--attention-kernel fa2), and
//   "selective" recompute is torchtitan's op-level policy (selective-op); its launcher
//   (run_llama_train.sh, later run_train.sh) sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
//   (--allocator expandable). Every other source: PyTorch's default allocator (--allocator classic).
//   notes containing "eager": unfused PyTorch elementwise kernels (--fusion eager); else notes containing
//   "torch.compile": the transformer blocks compiled, the loss eager (--fusion compile, torchtitan's
//   apply_compile); else fused (Megatron-Core and Transformer Engine).
//   Embedding tying: tied or untied, whichever parameter count is nearer params_b.
//   Gradient bytes: 4 (fp32 main gradients: Megatron-LM, FSDP2 with fp32 reduce) -- the CLI default.
//   Sharded DP (fsdp, zero3, hsdp): torchtitan-2412 and nemo-automodel-* run PyTorch's FSDP2
//   (--fsdp-impl fsdp2, the copies around its collectives); every other source Megatron-FSDP (flat).
// Optional columns (a table may leave them out; an empty cell is "not stated"), for runs the sizes above
// cannot describe or whose stack states more:
//   model: a catalog model name, or a config.json path relative to the table's folder (MoE, MLA,
//     explicit head_dim ...); it replaces arch and the size columns, which may then be empty (those
//     given must agree with the model: check_measured_model). Such a row's metric is not tflops_per_gpu
//     (that formula is the dense GPT/Llama one).
//   capacity_factor: MoE token capacity (--capacity-factor; empty: dropless).
//   grad_bytes: 2 or 4 main-gradient bytes (--grad-bytes; e.g. NeMo's grad_sync_dtype bf16).
//   attention_kernel: default | fa2 | cudnn | fa3 (--attention-kernel; e.g. NVTE_FUSED_ATTN=0 runs TE
//     on flash-attn 2).
//   moe_dispatcher: alltoall | deepep (--moe-dispatcher; empty: alltoall).
//   moe_ranks_per_token: with deepep, the EP ranks a token reaches when the router fixes it
//     (--moe-ranks-per-token; empty: the expectation under uniform routing).
//   etp: the experts' tensor-parallel size (--etp, Megatron-Core's --expert-tensor-parallel-size;
//     empty: tp).
//   first_stage_layers, last_stage_layers: layers on the first / last model chunk (--first-stage-layers,
//     --last-stage-layers; e.g. 1 and 1 for NeMo's account-for-embedding/loss-in-pipeline-split on
//     126 layers over pp 8 x vp 8; 0 and 0 for Llama 3's embedding-only first and loss-only last chunk;
//     empty: the other chunks' share).
//   optimizer_dtype: fp32 | bf16 | fp16, Adam's moments (--optimizer-dtype; empty: fp32).
//   fp8_recipe: delayed | current | mxfp8 (--fp8-recipe; empty: delayed), for precision fp8 rows.
//   dropout: the attention and hidden dropout probability in [0, 1) (--attention-dropout and
//     --hidden-dropout; empty: the model's, Megatron-LM's 0.1 for arch gpt). NeMo's Nemotron-4 yamls set
//     both to 0, its GPT-3 175B yaml to 0.1 (data/published/nemo_h100_bf16.csv's header).
//   master_weights: fp32 | fp16 | remainders | none (--master-weights; empty: fp32).
//   cp_comm_type: p2p | all_gather | a2a, context parallelism's exchange (--cp-comm-type; empty: p2p);
//     e.g. all_gather for Llama 3's long-context stage.
//   microbatch_group_size: the interleaved schedule's micro-batch group (--microbatch-group-size; empty: pp).
//   tp_comm_overlap: yes | te | async | no (PyTorch's async TP), where a run states it (--tp-comm-overlap; empty: the source's rule above);
//   ep_overlap: yes | no, Megatron-Core's overlap_moe_expert_parallel_comm (--overlap-moe-expert-parallel-comm; empty: no);
//   schedule: any --schedule name (e.g. torchtitan's interleaved-zb or looped-bfs; empty: interleaved
//     when vp > 1, else 1f1b);
//     e.g. torchtitan's async TP. NeMo's
//     distributed_fused_adam with optim.dtype bf16 on a bf16 model: bf16 moments and no master copy.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_spec.h"
#include "train/train.h"

namespace orrery::train {

// One measured run: a data row of the table, cells as written ("" = not stated by the source).
struct MeasuredRun {
  std::string file;
  int64_t line = 0;  // 1-based line of the row in `file`
  std::string id, source, arch, gpu, sp, recompute, precision, dp_sharding, metric, notes;
  std::string model;             // optional column: catalog name or config.json path (resolved), "" = arch
  std::string attention_kernel;  // optional column, "" = the source's rule
  double capacity_factor = 0.0;  // optional column, 0 = not stated (dropless)
  int64_t grad_bytes = 0;        // optional column, 0 = not stated (4)
  std::string moe_dispatcher;      // optional column, "" = alltoall
  double moe_ranks_per_token = 0;  // optional column, 0 = not stated
  int64_t first_stage_layers = -1, last_stage_layers = -1;  // optional columns, -1 = the share (0: none)
  int64_t etp = 0;                                         // optional column, 0 = tp
  int64_t microbatch_group = 0;                            // optional column microbatch_group_size, 0 = pp
  std::string optimizer_dtype, master_weights;  // optional columns, "" = fp32
  std::string fp8_recipe;                       // optional column, "" = delayed
  std::string cp_comm_type;                     // optional column, "" = p2p
  std::string tp_comm_overlap;                  // optional column: yes | te | async | no, "" = the source's rule
  std::string ep_overlap;                       // optional column: yes | no (Megatron's combined 1F1B), "" = no
  std::string schedule;                         // optional column: a --schedule name (canonical), "" = the vp rule
  double dropout = -1.0;  // optional column: attention and hidden dropout, -1 = not stated (the model's)
  double params_b = 0.0;  // billions, as the source states the model size
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  int64_t seq = 0;  // 0: not stated
  int64_t gpus = 0, tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
  int64_t vp = 0, mbs = 0;  // 0: not stated
  int64_t gbs = 0;
  double value = 0.0;  // the measured figure, in the metric's unit
  // Whether the row can be checked: its sequence length is stated.
  bool scored() const { return seq > 0; }
};

// The columns a table must have (any order; extra columns are ignored).
const std::vector<std::string>& measured_run_columns();
// The optional columns read where present (above).
const std::vector<std::string>& measured_run_optional_columns();
// The metrics a row may report (the sources' definitions: docs/training.md, "Validation").
const std::vector<std::string>& measured_run_metrics();

// Reads a results table: '#' lines are comments, the first other line is the header, then one run per
// line. Throws InputError naming the file, the line and the column, with what was expected (and the
// nearest valid name for an unknown column value), for: a missing file, a missing column, a row with the
// wrong number of cells, a number that does not parse or is out of range, an unknown arch, metric, sp,
// recompute, precision or dp_sharding, a duplicate id, and a table without rows.
std::vector<MeasuredRun> read_measured_runs(const std::string& path);

// training.csv's GPU ids (the sources' hardware) and the catalog GPU each maps to, with the per-GPU
// network bandwidth the source states (used where the catalog has no node with that GPU).
struct MeasuredGpu {
  const char* id;
  const char* catalog;
  double nic_gbps;  // Gb/s per GPU
};
const std::vector<MeasuredGpu>& measured_gpus();
// The mapping of a row's gpu id; InputError naming the row's line and the column, with the nearest id.
const MeasuredGpu& measured_gpu(const MeasuredRun& r);

// The model the row describes: ModelSpec::gpt or ::llama of its sizes (seq 4096 when not stated), with
// the embedding tying whose parameter count is nearer params_b. REQUIRES: r.model empty.
model::ModelSpec measured_model(const MeasuredRun& r);
// A `model` row's stated sizes (layers, hidden, heads, kv_heads, ffn, vocab; empty cells skipped) against
// the model it names: InputError naming the row's line and the first column that disagrees.
void check_measured_model(const MeasuredRun& r, const model::ModelSpec& m);

// The run as `orrery train` flags, in a fixed order: (flag, value) pairs, e.g. {"--tp", "8"}. Every
// column maps onto a flag (params_b onto --tie-embeddings, gpu onto --gpu and --nic-bandwidth, source and
// notes onto --attention-kernel, --flash-attention, --tp-comm-overlap and --fusion).
std::vector<std::pair<std::string, std::string>> replay_flags(const MeasuredRun& r);
// "orrery train --arch gpt --layers 24 ..." (shell-safe: values with spaces are quoted).
std::string replay_command(const MeasuredRun& r);

// The row's metric from a simulated step, as its source defines it:
//   tflops_per_gpu, megatron-sc21-t1 (A rows): 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) / (step x GPUs)
//     (counts full recompute; Narayanan et al. 2021, eq. 3);
//   tflops_per_gpu, any other source: Megatron-Core's num_floating_point_operations,
//     12 B s L h^2 (1 + g/a + s/h + f'/h + V/(2 L h)) / (step x GPUs) (no recompute, non-causal attention;
//     f' = 3/2 f for a gated MLP);
//   step_time_s; tokens_per_s_per_gpu;
//   peak_memory_gib: the peak stage's tensors plus the allocator's reservation (torchtitan's figure);
//   peak_memory_gb: the peak stage's tensors in decimal GB (torch's max allocated).
double measured_metric(const MeasuredRun& r, const model::ModelSpec& model, const Plan& plan, const TrainResult& result);

}  // namespace orrery::train
