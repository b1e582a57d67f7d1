// A serving replica: one model on TP x PP GPUs of one type, its KV-cache memory in paged blocks, and
// the state of the requests it holds.
//
// Model card
//   What      The memory side of an LLM serving engine (vLLM's block manager): how many KV tokens fit,
//             which request holds which blocks, preemption by recompute or by swap to host memory,
//             and automatic prefix caching. The time side is serve/exec_model.h; the policy side
//             (who runs next) is serve/scheduler.h.
//   Memory    Per GPU (every GPU of the replica holds one TP shard of one PP stage):
//               usable    = HBM x gpu_memory_utilization                  (vLLM default 0.90)
//               weights   = dtype_bytes x total_params / (TP x PP)        (embeddings sharded too)
//                           with --expert-weights, the routed experts' matrices at their format's
//                           bytes instead (MXFP4: 4-bit E2M1 values and one 8-bit E8M0 scale per 32,
//                           4.25 bits; fp8: 1 byte), their biases and everything else in dtype
//               workspace = activation peak of one forward over max_batched_tokens tokens:
//                           tokens x dtype_bytes x (2h + (q+k+v)/TP + 2 f/TP) + seqs x vocab/TP x 4
//                           (the largest live tensors of a layer, and fp32 logits of the sampled rows)
//               margin    = kMemoryMargin (1 GiB: CUDA context, cuBLAS/NCCL workspaces, CUDA graphs)
//               kv        = usable - weights - workspace - margin
//             KV bytes per token per GPU = 2 x kv_heads_per_gpu x head_dim x dtype x layers_per_stage
//             with kv_heads_per_gpu = ceil(kv_heads / TP) (GQA heads are replicated when TP > kv_heads);
//             MLA keeps (kv_lora_rank + rope dim) per layer, replicated on every TP rank.
//             blocks = floor(kv / (block_size x bytes per token)); kv_tokens = blocks x block_size.
//             A model whose weights (plus workspace and margin) exceed the usable memory does not fit:
//             MemoryPlan::fits is false (a value, not an exception) and the CLI reports it (exit 2).
//   Blocks    A sequence with c KV tokens holds ceil((c - shared prefix tokens) / block_size) private
//             blocks. Allocation happens when a step is scheduled (the step's new tokens); a
//             watermark (fraction of all blocks, vLLM default 0.01) is kept free when admitting new
//             prompts. Preemption frees a sequence's blocks: by recompute (its tokens so far become a
//             longer prompt, vLLM's RECOMPUTE) or by swap (private blocks copied to host memory over
//             the host link (PCIe, or NVLink-C2C) at hw::kHostCopyEfficiency of its rate, back on swap-in;
//             vLLM's SWAP).
//   Prefix    Requests carrying prefix block hashes (Mooncake hash_ids) share the KV of identical
//             prefixes: each hash stands for prefix_unit_tokens tokens (512 in the Mooncake traces).
//             Units are reference counted; a unit nobody references stays cached and is evicted in
//             least-recently-released order when blocks are needed (vLLM automatic prefix caching,
//             Kwon et al.; the LRU over free blocks of vLLM's evictor).
//   Range     Decoder-only models of model/model_spec.h; one replica; weights in the KV dtype, the
//             routed experts' optionally narrower (ExpertWeights: stored narrow, computed in dtype).
//   Sources   vLLM (Kwon et al., "Efficient Memory Management for Large Language Model Serving with
//             PagedAttention", SOSP 2023) and its engine arguments (gpu_memory_utilization 0.9,
//             block_size 16, swap_space 4 GiB, watermark 0.01).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "compute/compute_model.h"
#include "core/units.h"
#include "hw/hw_catalog.h"
#include "model/model_spec.h"
#include "serve/workload.h"

namespace orrery::serve {

inline constexpr double kDefaultGpuMemoryUtilization = 0.90;  // vLLM EngineArgs default
inline constexpr Bytes kMemoryMargin = Bytes::GiB(1);
inline constexpr int64_t kDefaultBlockSize = 16;    // vLLM default block size (tokens)
inline constexpr double kDefaultWatermark = 0.01;   // vLLM BlockSpaceManager watermark
inline constexpr Bytes kDefaultSwapSpace = Bytes::GiB(4);  // vLLM swap_space per GPU

// How the routed experts' weight matrices are stored (weight-only quantization, as gpt-oss ships its
// experts in MXFP4 and vLLM serves them; the math runs in the replica's dtype).
enum class ExpertWeights { kSame, kFp8, kMxfp4 };
// Bytes per stored element: kSame the dtype's, kFp8 1, kMxfp4 (4 + 8/32) / 8 = 0.53125 (OCP MX v1.0).
double expert_weight_bytes(ExpertWeights w, hw::DType dtype);
// Parses same | fp8 | mxfp4 (InputError naming `where` with the nearest name otherwise).
ExpertWeights parse_expert_weights(const std::string& name, const Where& where);
std::string_view to_string(ExpertWeights w);
// A format other than kSame needs routed experts: InputError naming `where` for a dense model.
void check_expert_weights(const model::ModelSpec& model, ExpertWeights w, const Where& where);

struct ReplicaSpec {
  const model::ModelSpec* model = nullptr;
  const hw::GpuSpec* gpu = nullptr;
  int64_t tp = 1;
  int64_t pp = 1;
  hw::DType dtype = hw::DType::kFp16;
  ExpertWeights expert_weights = ExpertWeights::kSame;  // a narrower format needs an MoE model
  int64_t block_size = kDefaultBlockSize;
  double gpu_memory_utilization = kDefaultGpuMemoryUtilization;
  double watermark = kDefaultWatermark;
  Bytes swap_space = kDefaultSwapSpace;        // host memory for swapped blocks, per GPU
  int64_t workspace_tokens = 4096;             // forward size the activation workspace is sized for
  int64_t workspace_seqs = 256;                // sampled rows the logits workspace is sized for
  int64_t kv_tokens_override = 0;              // > 0: use this KV capacity (tokens) instead of the plan
  int64_t prefix_unit_tokens = 512;            // tokens per prefix hash (Mooncake: 512)
  bool prefix_caching = true;                  // share prefixes when requests carry hashes
  int64_t max_context = 0;                     // 0: the model's max_positions
  const compute::Calibration* calibration = nullptr;  // compute-model constants; null: the GPU's default

  // Checks tp, pp, block size, utilization, watermark (InputError naming the field).
  void validate(const Where& where = {}) const;
  int64_t context_limit() const;
};

struct MemoryPlan {
  Bytes hbm;                 // per GPU
  Bytes usable;              // hbm x utilization
  Bytes weights;             // per GPU
  Bytes workspace;           // per GPU
  Bytes margin;
  Bytes kv;                  // per GPU, for the KV cache (<= 0 when it does not fit)
  Bytes kv_per_token;        // per GPU
  int64_t blocks = 0;
  int64_t kv_tokens = 0;     // blocks x block_size
  bool fits = false;
  std::string reason;        // why it does not fit
};

// The memory plan of `spec` (see the model card). REQUIRES: spec validated, model and gpu set.
MemoryPlan plan_memory(const ReplicaSpec& spec);

using SeqId = int32_t;

enum class SeqState : uint8_t { kWaiting, kRunning, kSwapped, kFinished };

// A request inside the replica.
struct Seq {
  Request req;
  int64_t prefill_target = 0;  // KV tokens to hold before the next token is emitted
  int64_t computed = 0;        // tokens whose KV is stored (shared prefix included)
  int64_t generated = 0;       // output tokens emitted so far (kept across recompute restarts)
  int64_t blocks = 0;          // private device blocks
  int64_t shared_units = 0;    // leading prefix units referenced in the prefix cache
  int64_t admit_order = 0;     // larger = admitted later (the LIFO victim)
  int64_t wasted_tokens = 0;   // tokens computed then lost to restarts
  Time first_scheduled = Time::max();
  Time first_token = Time::max();
  Time last_token;
  int32_t preemptions = 0;     // recompute restarts + swap-outs
  int32_t restarts = 0;
  SeqState state = SeqState::kWaiting;
  int32_t tag = 0;             // free for the scheduler's bookkeeping

  bool in_prefill() const { return computed < prefill_target; }
  // Tokens the next step may compute: the rest of the prefill, or 1 in decode.
  int64_t pending() const { return in_prefill() ? prefill_target - computed : 1; }
  int64_t remaining_output() const { return req.output_tokens - generated; }
};

// One step of the batch: `q` new tokens of sequence `seq`.
struct BatchItem {
  SeqId seq = 0;
  int64_t q = 1;
};

struct Batch {
  std::vector<BatchItem> items;
  std::vector<compute::AttentionSeq> padding;  // work without a sequence (static batching's padding)
  Time extra;                                  // transfers in the step (swap in/out)
  void clear() {
    items.clear();
    padding.clear();
    extra = Time::zero();
  }
  bool empty() const { return items.empty() && padding.empty(); }
};

// Counters the replica keeps for the metrics.
struct ReplicaCounters {
  int64_t preemptions = 0;
  int64_t restarts = 0;
  int64_t swap_outs = 0;
  int64_t swap_ins = 0;
  int64_t wasted_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prefill_tokens = 0;  // computed prefill tokens (recompute included)
  int64_t decode_tokens = 0;
};

// The block manager and the sequences of one replica. Schedulers act through it.
class Replica {
 public:
  // REQUIRES: plan.fits or spec.kv_tokens_override > 0.
  Replica(const ReplicaSpec& spec, const MemoryPlan& plan);

  const ReplicaSpec& spec() const { return spec_; }
  int64_t total_blocks() const { return total_blocks_; }
  int64_t block_size() const { return spec_.block_size; }
  int64_t watermark_blocks() const { return watermark_blocks_; }
  // Blocks available now: free plus cached prefix units nobody references (evictable).
  int64_t allocatable_blocks() const { return free_blocks_ + evictable_blocks_; }
  int64_t used_blocks() const { return total_blocks_ - allocatable_blocks(); }
  // KV tokens stored on the device (private + shared, referenced or not).
  int64_t resident_tokens() const { return resident_tokens_; }

  // Adds an arrived request (state kWaiting, no blocks). Returns its id.
  SeqId add(Request request, int64_t admit_order);
  // Adds a request prefilled on another replica (disaggregated serving, serve/cluster.h): the KV of its
  // `from.computed` tokens arrives by transfer, so they count as computed here, and the blocks for
  // max(from.computed, reserve_tokens) tokens are reserved now, above keep_free; progress (tokens
  // emitted, first token, preemptions) is carried over from `from`. `request` is the original request
  // (its full output). State kWaiting. Returns -1, adding nothing, when the blocks do not fit.
  SeqId add_prefilled(Request request, const Seq& from, int64_t reserve_tokens, int64_t admit_order, int64_t keep_free);
  Seq& seq(SeqId id) { return seqs_[static_cast<size_t>(id)]; }
  const Seq& seq(SeqId id) const { return seqs_[static_cast<size_t>(id)]; }
  int64_t live() const { return live_; }

  // Private blocks `s` needs to hold `tokens` KV tokens.
  int64_t blocks_for(const Seq& s, int64_t tokens) const;
  // Extra blocks needed to compute q more tokens of s.
  int64_t extra_blocks(const Seq& s, int64_t q) const;
  // Reserves blocks for q more tokens of s if allocatable - extra >= keep_free; true on success.
  bool grow(SeqId id, int64_t q, int64_t keep_free = 0);
  // Reserves blocks for a total of `tokens` KV tokens (Orca/static reservation); same rule.
  bool reserve(SeqId id, int64_t tokens, int64_t keep_free = 0);
  // Looks up the prefix cache for a sequence about to start its prefill: the longest cached prefix
  // becomes computed (at most prefill_target - 1 tokens, so the step still has work).
  void attach_prefix(SeqId id);

  // Preemption by recompute: frees the blocks; the tokens so far become the prompt of a restart.
  void preempt_recompute(SeqId id);
  // Preemption by swap: private blocks go to host memory (false, nothing done, when the host space
  // is full). Adds the transfer to `batch.extra`.
  bool swap_out(SeqId id, Batch& batch);
  // Brings a swapped sequence back (false when its blocks do not fit above keep_free).
  bool swap_in(SeqId id, Batch& batch, int64_t keep_free = 0);
  Time swap_time(int64_t blocks) const;

  // Applies a finished step at time `now`: progress, token emission, completion. Calls
  // on_token(seq, emitted_first) for every emitted token and collects finished ids in `finished`.
  template <class OnToken>
  void complete(const Batch& batch, Time now, std::vector<SeqId>& finished, OnToken&& on_token);
  // Frees a finished sequence's slot. REQUIRES: state kFinished.
  void release(SeqId id);

  const ReplicaCounters& counters() const { return counters_; }

 private:
  struct Unit {
    int64_t refs = 0;
    std::list<uint64_t>::iterator lru;  // valid when refs == 0
  };
  void free_private(Seq& s);
  void drop_prefix(Seq& s);
  void register_prefix(Seq& s);
  void take_blocks(int64_t n);  // evicts cached units when free blocks run out
  int64_t unit_blocks() const { return unit_blocks_; }
  bool prefix_active(const Seq& s) const { return spec_.prefix_caching && !s.req.prefix_blocks.empty(); }

  ReplicaSpec spec_;
  int64_t total_blocks_ = 0;
  int64_t free_blocks_ = 0;
  int64_t evictable_blocks_ = 0;
  int64_t watermark_blocks_ = 0;
  int64_t host_blocks_free_ = 0;
  int64_t resident_tokens_ = 0;
  int64_t unit_blocks_ = 0;
  int64_t unit_tokens_ = 0;
  Bytes block_bytes_;
  double swap_bandwidth_ = 0.0;  // bytes/s
  std::vector<Seq> seqs_;
  std::vector<SeqId> free_slots_;
  int64_t live_ = 0;
  std::unordered_map<uint64_t, Unit> units_;
  std::list<uint64_t> lru_;  // unreferenced units, least recently released first
  ReplicaCounters counters_;
};

template <class OnToken>
void Replica::complete(const Batch& batch, Time now, std::vector<SeqId>& finished, OnToken&& on_token) {
  for (const BatchItem& it : batch.items) {
    Seq& s = seq(it.seq);
    const bool decode = !s.in_prefill();
    if (decode) {
      s.prefill_target = s.computed + 1;
      ++counters_.decode_tokens;
    } else {
      counters_.prefill_tokens += it.q;
    }
    s.computed += it.q;
    resident_tokens_ += it.q;
    if (s.computed < s.prefill_target) continue;
    if (!decode && prefix_active(s)) register_prefix(s);
    const bool first = s.generated == 0;
    ++s.generated;
    on_token(s, first);
    if (first) s.first_token = now;
    s.last_token = now;
    if (s.generated >= s.req.output_tokens) {
      s.state = SeqState::kFinished;
      finished.push_back(it.seq);
    }
  }
}

}  // namespace orrery::serve
