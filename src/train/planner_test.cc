#include "train/planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "io/catalog_loader.h"
#include "net/topology_builders.h"
#include "train/simulator.h"
#include "train/test_support.h"

namespace orrery::train {
namespace {

hw::GpuSpec test_gpu() {
  hw::GpuSpec g;
  g.name = "test-gpu";
  g.architecture = "ampere";
  g.memory = Bytes::GiB(80);
  g.memory_bandwidth = Bandwidth(2e12);
  g.peak_flops[static_cast<size_t>(hw::DType::kBf16)] = FlopRate(312e12);
  g.pcie = hw::PcieLink{4, 16, Bandwidth(32e9)};
  // NVLink 3 as on an A100 SXM: 12 links, 300 GB/s per direction. (Without a scale-up link,
  // AlphaBetaComm::p2p divides by a zero bandwidth for stages in one machine.)
  g.scaleup = hw::ScaleupLink{"NVLink 3", 12, Bandwidth(300e9)};
  return g;
}

// The hand-derived case: 8 GPUs in one 8-GPU machine, a Llama-style model with 8 heads (8 KV heads)
// and 4 layers, seq 128, global batch 16 sequences, no CP.
struct Small {
  model::ModelSpec model = model::ModelSpec::llama({4, 512, 8, 8, 2048, 1000, 128});
  hw::GpuSpec gpu = test_gpu();
  ClusterSpec cluster = ClusterSpec::from_catalog(gpu, nullptr, 8, Bandwidth(50e9));
  compute::ComputeModel cm{gpu};
  // The same layers as a Mixtral-like MoE: 8 experts of 1024, top-2.
  model::ModelSpec moe() const { return testing::as_moe(model, 1024); }
  PlannerOptions options() const {
    PlannerOptions o;
    o.gpus = 8;
    o.seq = 128;
    o.gbs = 16;
    o.space.max_cp = 1;
    o.top_k = 5;
    o.threads = 1;
    return o;
  }
  // Two 8-GPU machines: 16 GPUs, a global batch of 32 sequences.
  PlannerOptions two_machines() const {
    PlannerOptions o = options();
    o.gpus = 16;
    o.gbs = 32;
    return o;
  }
  // One schedule (1F1B), no sharding, no recompute and mbs 1: one candidate per shape and expert grid.
  PlannerOptions narrow() const {
    PlannerOptions o = options();
    o.space.schedules = {Schedule::kOneFOneB};
    o.space.shardings = {Sharding::kNone};
    o.space.hsdp = false;
    o.space.recomputes = {Recompute::kNone};
    o.space.max_mbs = 1;
    return o;
  }
};

// tp in divisors(heads=8) = {1,2,4,8} (max_tp = 8 GPUs per node), pp in divisors(layers=4) = {1,2,4},
// dp = 8/(tp pp) when tp pp divides 8: (1,1,8) (1,2,4) (1,4,2) (2,1,4) (2,2,2) (2,4,1) (4,1,2) (4,2,1)
// (8,1,1) -- nine shapes; (4,4), (8,2), (8,4) need 16 or more GPUs. With one schedule, sharding,
// recompute, SP setting and mbs, one candidate per shape.
TEST(Planner, EnumeratesTheNineDegreeShapesOfEightGpus) {
  Small s;
  PlannerOptions o = s.options();
  o.space.schedules = {Schedule::kOneFOneB};
  o.space.shardings = {Sharding::kNone};
  o.space.hsdp = false;
  o.space.recomputes = {Recompute::kNone};
  o.space.sp_off = false;
  o.space.max_mbs = 1;
  const std::vector<Plan> plans = enumerate_plans(s.model, s.cluster, o);
  std::set<std::tuple<int64_t, int64_t, int64_t>> shapes;
  for (const Plan& p : plans) shapes.insert({p.tp, p.pp, p.dp});
  const std::set<std::tuple<int64_t, int64_t, int64_t>> expected = {
      {1, 1, 8}, {1, 2, 4}, {1, 4, 2}, {2, 1, 4}, {2, 2, 2}, {2, 4, 1}, {4, 1, 2}, {4, 2, 1}, {8, 1, 1}};
  EXPECT_EQ(plans.size(), 9u);
  EXPECT_EQ(shapes, expected);
}

// Expert TP sizes (SearchSpace::expert_tps) on the nine shapes with an 8-expert model, SP on only:
// each MoE plan takes etp = tp's own (0) or 1 where 1 < tp, and ep over the divisors of 8 with etp x ep
// dividing tp x dp (Megatron-Core's expert grid). tp 1: etp 1 is tp's own, ep | dp; tp 2 (dp 4, pp 1):
// with etp 2, ep in {1, 2, 4}; with etp 1, ep in {1, 2, 4, 8}. etp 1 without SP is never enumerated.
TEST(Planner, ExpertTensorParallelSizesJoinTheExpertGrid) {
  Small s;
  const model::ModelSpec moe = s.moe();
  PlannerOptions o = s.narrow();
  o.space.expert_tps = {0, 1};
  std::set<std::tuple<int64_t, int64_t, int64_t>> tp2;  // (etp, ep, sp) of tp 2, pp 1
  for (const Plan& p : enumerate_plans(moe, s.cluster, o)) {
    if (p.etp > 0) {
      EXPECT_TRUE(p.sp) << "etp " << p.etp << " tp " << p.tp;
      EXPECT_LT(p.etp, p.tp);
      EXPECT_EQ(p.tp % p.etp, 0);
    }
    EXPECT_EQ((p.tp * p.dp * p.cp) % (p.expert_tp() * p.ep), 0);
    if (p.tp == 2 && p.pp == 1) tp2.insert({p.expert_tp(), p.ep, p.sp ? 1 : 0});
  }
  const std::set<std::tuple<int64_t, int64_t, int64_t>> expected = {
      {2, 1, 0}, {2, 2, 0}, {2, 4, 0}, {2, 1, 1}, {2, 2, 1}, {2, 4, 1}, {1, 1, 1}, {1, 2, 1}, {1, 4, 1}, {1, 8, 1}};
  EXPECT_EQ(tp2, expected);
}

// Interleaving and ZB-V with end chunks one layer short (shorten_end_chunks) join the search under
// uneven stages: for 126 layers (Llama 3.1 405B's count) on 128 GPUs the enumeration holds Llama 3's pp
// 16 x vp 8 with empty end chunks, NeMo's pp 8 x vp 8 with ends of 1, torchtitan's pp 8 x vp 2 with ends
// of 7, and the V on pp 8 (16 chunks: ends 7) and pp 2 (4 chunks, (126 + 2) / 4 = 32: ends 31); without
// uneven stages none of them. pp 16 stays with it (16 does not divide 126) at vp 1 as 7 + 14 x 8 + 7.
TEST(Planner, ShortenedEndChunksAreSearchedWithUnevenStages) {
  Small s;
  const model::ModelSpec model = model::ModelSpec::llama({126, 512, 8, 8, 2048, 1000, 128});
  PlannerOptions o = s.narrow();
  o.gpus = 128;
  o.gbs = 128;
  o.space.schedules = {Schedule::kOneFOneB, Schedule::kInterleaved, Schedule::kZeroBubbleV};
  auto has = [&](const std::vector<Plan>& plans, int64_t pp, int64_t vp, Schedule schedule, int64_t ends) {
    return std::any_of(plans.begin(), plans.end(), [&](const Plan& p) {
      return p.pp == pp && p.vp == vp && p.schedule == schedule && p.first_stage_layers == ends && p.last_stage_layers == ends;
    });
  };
  const std::vector<Plan> plans = enumerate_plans(model, s.cluster, o);
  EXPECT_TRUE(has(plans, 16, 8, Schedule::kInterleaved, 0));
  EXPECT_TRUE(has(plans, 8, 8, Schedule::kInterleaved, 1));
  EXPECT_TRUE(has(plans, 8, 2, Schedule::kInterleaved, 7));
  EXPECT_TRUE(has(plans, 8, 2, Schedule::kZeroBubbleV, 7));
  EXPECT_TRUE(has(plans, 2, 2, Schedule::kZeroBubbleV, 31));
  EXPECT_TRUE(has(plans, 16, 1, Schedule::kOneFOneB, 7));
  for (const Plan& p : plans) {
    if (p.vp > 1 && model.layers % (p.pp * p.vp) != 0) {
      EXPECT_EQ(p.first_stage_layers, (model.layers + 2) / (p.pp * p.vp) - 1) << p.pp << " x " << p.vp;
    }
  }
  o.space.uneven_stages = false;
  const std::vector<Plan> even = enumerate_plans(model, s.cluster, o);
  EXPECT_FALSE(has(even, 16, 8, Schedule::kInterleaved, 0));
  EXPECT_FALSE(has(even, 8, 2, Schedule::kZeroBubbleV, 7));
  for (const Plan& p : even) EXPECT_FALSE(p.uneven_stages()) << p.pp << " x " << p.vp;
}

// Selective recompute's module sets are a search dimension (SearchSpace::recompute_module_sets): every
// selective candidate once per set, carrying it; candidates of other modes once, whatever the sets. On
// the MoE shapes with one schedule, sharding, SP setting and mbs: the nine degree shapes with ep in
// {1, 2, 4, 8} dividing dp, each once per mode: selective x 2 sets + none = 3 per (shape, ep).
TEST(Planner, SelectiveRecomputeModuleSetsAreSearched) {
  Small s;
  const model::ModelSpec moe = s.moe();
  PlannerOptions o = s.narrow();
  o.space.sp_off = false;
  const size_t per_mode = enumerate_plans(moe, s.cluster, o).size();
  ASSERT_GT(per_mode, 0u);
  const uint32_t core = module_bit(RecomputeModule::kCoreAttn);
  const uint32_t with_act = core | module_bit(RecomputeModule::kMoeAct);
  o.space.recomputes = {Recompute::kNone, Recompute::kSelective};
  o.space.recompute_module_sets = {core, with_act};
  std::map<std::pair<Recompute, uint32_t>, size_t> seen;
  const std::vector<Plan> plans = enumerate_plans(moe, s.cluster, o);
  for (const Plan& p : plans) ++seen[{p.recompute, p.recompute == Recompute::kSelective ? p.recompute_modules : 0u}];
  EXPECT_EQ(plans.size(), 3 * per_mode);
  EXPECT_EQ((seen[{Recompute::kSelective, core}]), per_mode);
  EXPECT_EQ((seen[{Recompute::kSelective, with_act}]), per_mode);
  EXPECT_EQ((seen[{Recompute::kNone, 0u}]), per_mode);
}

// The full default space (no CP) on the same shapes. Per shape: schedules S(pp): pp=1 -> 1 (1f1b: no
// pipeline); pp=2 -> gpipe, 1f1b, zero-bubble + interleaved and interleaved-zb, each with vp in
// {v >= 2 dividing 4/2} = {2} and vp 3 (6 chunks do not divide the 4 layers but divide 4 + 2: end chunks
// of 0 layers, shorten_end_chunks) + zb-v and dualpipe-v (vp 2: 4/2 = 2 layers per stage, even): 9;
// pp=4 -> 3 (4/4 = 1 layer per stage; 8 chunks divide neither 4 nor 4 + 2; no V). mbs M(dp): powers of
// two dividing 16/dp: dp=8 -> 2, dp=4 -> 3, dp=2 -> 4, dp=1 -> 5. Shardings H(dp): dp=1 -> 1; else none,
// zero1, zero2, zero3 plus HSDP groups g | dp, 1 < g < dp: dp=8 -> 4+2, dp=4 -> 4+1, dp=2 -> 4.
// Recompute 3. SP 2 when tp > 1.
//   (1,1,8) 1*2*6*3 = 36     (1,2,4) 9*3*5*3 = 405    (1,4,2) 3*4*4*3 = 144
//   (2,1,4) 1*3*5*3*2 = 90   (2,2,2) 9*4*4*3*2 = 864  (2,4,1) 3*5*1*3*2 = 90
//   (4,1,2) 1*4*4*3*2 = 96   (4,2,1) 9*5*1*3*2 = 270  (8,1,1) 1*5*1*3*2 = 30      total 2025.
// Invalid: interleaved needs m = 16/(dp mbs) to be a multiple of pp = 2, which fails only at m = 1
// (mbs = 16/dp), for each of vp 2 and 3; dualpipe-v needs m >= 2 pp = 4, which fails at m = 1 and 2: so
// 2 mbs values per shape and (shape's shardings x recomputes x SP) for each reason: (1,2,4) 2*5*3 = 30,
// (2,2,2) 2*4*3*2 = 48, (4,2,1) 2*1*3*2 = 12, 90 plans for each, 180, all under vp_microbatches.
// interleaved-zb needs m to be a multiple of max(1, floor(m / 2)), which every power of two is: none.
TEST(Planner, CountsCandidatesAndInvalidReasonsAsDerived) {
  Small s;
  const PlannerResult r = plan_training(s.model, s.cluster, s.cm, s.options());
  EXPECT_EQ(r.counts.enumerated, 2025);
  EXPECT_EQ(r.counts.invalid, 180);
  ASSERT_FALSE(r.reasons.empty());
  EXPECT_EQ(r.reasons.front().key, "vp_microbatches");
  EXPECT_EQ(r.reasons.front().count, 180);
  // A model of ~13 M parameters fits every valid plan in 80 GiB.
  EXPECT_EQ(r.counts.over_budget, 0);
  EXPECT_EQ(r.counts.fits, 2025 - 180);
  EXPECT_EQ(r.counts.simulated + r.counts.pruned, r.counts.fits);
  EXPECT_EQ(r.bound_violations, 0);
}

void expect_same(const std::vector<Candidate>& a, const std::vector<Candidate>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index) << what << " #" << i;
    EXPECT_EQ(a[i].step_time, b[i].step_time) << what << " #" << i;
    EXPECT_EQ(a[i].peak, b[i].peak) << what << " #" << i;
    EXPECT_EQ(a[i].bound_tokens_per_s_per_gpu, b[i].bound_tokens_per_s_per_gpu) << what << " #" << i;
  }
}

// The search run twice on `m`, simulating every plan and then pruning (keeping the candidates of the
// first): pruning must change neither the top nor the front, and no simulated plan may beat its bound.
struct BothWays {
  PlannerResult all, pruned;
};
BothWays search_every_plan_and_pruned(const model::ModelSpec& m, const Small& s, PlannerOptions o) {
  o.keep_candidates = true;
  o.prune = false;
  BothWays r{plan_training(m, s.cluster, s.cm, o), {}};
  o.prune = true;
  r.pruned = plan_training(m, s.cluster, s.cm, o);
  EXPECT_EQ(r.all.bound_violations, 0) << m.name;
  expect_same(r.all.top, r.pruned.top, "top");
  expect_same(r.all.pareto, r.pruned.pareto, "pareto");
  for (const Candidate& c : r.all.candidates) {
    if (c.status != CandidateStatus::kSimulated) continue;
    EXPECT_LE(c.tokens_per_s_per_gpu, c.bound_tokens_per_s_per_gpu * (1 + 1e-12)) << m.name << " candidate " << c.index;
  }
  return r;
}

TEST(Planner, ResultsDoNotDependOnTheThreadCount) {
  Small s;
  PlannerOptions o = s.options();
  // A budget halfway between the smallest and the largest peak, so that every list is filled.
  o.keep_candidates = true;
  Bytes lo = Bytes(int64_t{1} << 62), hi;
  for (const Candidate& c : plan_training(s.model, s.cluster, s.cm, o).candidates) {
    if (c.status == CandidateStatus::kInvalid) continue;
    lo = std::min(lo, c.peak);
    hi = std::max(hi, c.peak);
  }
  o.keep_candidates = false;
  o.budget = Bytes((lo.count() + hi.count()) / 2);
  o.threads = 1;
  const PlannerResult one = plan_training(s.model, s.cluster, s.cm, o);
  o.threads = 3;
  const PlannerResult three = plan_training(s.model, s.cluster, s.cm, o);
  ASSERT_GT(one.counts.over_budget, 0);
  ASSERT_GT(one.counts.fits, 0);
  EXPECT_EQ(one.counts.simulated, three.counts.simulated);
  EXPECT_EQ(one.counts.pruned, three.counts.pruned);
  expect_same(one.top, three.top, "top");
  expect_same(one.pareto, three.pareto, "pareto");
  expect_same(one.fastest_over_budget, three.fastest_over_budget, "fastest over budget");
  expect_same(one.closest_over_budget, three.closest_over_budget, "closest over budget");
  ASSERT_EQ(one.reasons.size(), three.reasons.size());
  for (size_t i = 0; i < one.reasons.size(); ++i) {
    EXPECT_EQ(one.reasons[i].key, three.reasons[i].key);
    EXPECT_EQ(one.reasons[i].count, three.reasons[i].count);
    EXPECT_EQ(one.reasons[i].example, three.reasons[i].example);
  }
}

// Pruning is exact: the plans it skips could not be in the top K or on the front (planner.h), so the
// results equal those of simulating every plan, and no simulated plan beats its bound.
TEST(Planner, PruningByTheBoundChangesNoResult) {
  Small s;
  PlannerOptions o = s.options();
  o.threads = 2;
  const BothWays r = search_every_plan_and_pruned(s.model, s, o);
  EXPECT_EQ(r.all.counts.simulated, r.all.counts.fits);
  EXPECT_GT(r.pruned.counts.pruned, 0);
}

// Under FSDP2's copies (Plan::fsdp_impl) the bound adds them as the simulator does (the compute
// stream's per layer and pass, the gather stream's with each all-gather), so it still holds for every
// ZeRO-3 plan, dense and MoE, and pruning stays exact.
TEST(Planner, PruningIsExactUnderFsdp2Copies) {
  Small s;
  for (const model::ModelSpec& m : {s.model, s.moe()}) {
    PlannerOptions o = s.options();
    o.base.fsdp_impl = FsdpImpl::kFsdp2;
    o.threads = 2;
    const PlannerResult all = search_every_plan_and_pruned(m, s, o).all;
    // The copies tighten the bound of every ZeRO-3 plan and leave the others' as they are.
    o.base.fsdp_impl = FsdpImpl::kFlat;
    o.keep_candidates = true;
    o.prune = false;
    const PlannerResult flat = plan_training(m, s.cluster, s.cm, o);
    ASSERT_EQ(flat.candidates.size(), all.candidates.size());
    int64_t zero3 = 0;
    for (size_t i = 0; i < all.candidates.size(); ++i) {
      const Candidate& a = all.candidates[i];
      const Candidate& b = flat.candidates[i];
      if (a.status != CandidateStatus::kSimulated) continue;
      // Under PP, FSDP gathers and reduces once per step (Plan::fsdp_keeps_gathered): no per-pass copies.
      if (a.plan.sharding == Sharding::kZero3 && group_size(a.plan, Group::kDpShard) > 1 && !a.plan.fsdp_keeps_gathered()) {
        ++zero3;
        EXPECT_LT(a.bound_tokens_per_s_per_gpu, b.bound_tokens_per_s_per_gpu) << m.name << " candidate " << i;
      } else {
        EXPECT_EQ(a.bound_tokens_per_s_per_gpu, b.bound_tokens_per_s_per_gpu) << m.name << " candidate " << i;
      }
    }
    EXPECT_GT(zero3, 0) << m.name;
  }
}

// A uniform compute slowdown (StepOptions::compute_slowdown, --gpu-variability) scales the kernels in
// the bound as in the simulation: the bound still holds for every plan, pruning stays exact, and every
// plan is slower than without it.
TEST(Planner, PruningIsExactUnderAComputeSlowdown) {
  Small s;
  PlannerOptions o = s.options();
  o.threads = 2;
  o.keep_candidates = true;
  o.prune = false;
  const PlannerResult nominal = plan_training(s.model, s.cluster, s.cm, o);
  o.evaluate.step.compute_slowdown = 1.05;
  const PlannerResult all = search_every_plan_and_pruned(s.model, s, o).all;
  ASSERT_EQ(all.candidates.size(), nominal.candidates.size());
  int64_t simulated = 0;
  for (size_t i = 0; i < all.candidates.size(); ++i) {
    const Candidate& a = all.candidates[i];
    if (a.status != CandidateStatus::kSimulated) continue;
    ++simulated;
    EXPECT_LT(a.tokens_per_s_per_gpu, nominal.candidates[i].tokens_per_s_per_gpu) << "candidate " << i;
    // A bound set by ZeRO-3's collectives rather than by the kernels does not move.
    EXPECT_LE(a.bound_tokens_per_s_per_gpu, nominal.candidates[i].bound_tokens_per_s_per_gpu) << "candidate " << i;
  }
  EXPECT_GT(simulated, 0);
}

// The same on a small MoE model (8 experts, top-2) with EP and CP in the space, and with activations
// offloaded (copies the bound leaves out): the bound holds for every plan, so pruning stays exact.
TEST(Planner, PruningIsExactWithExpertAndContextParallelism) {
  Small s;
  const model::ModelSpec moe = s.moe();
  PlannerOptions o = s.options();
  o.space.max_cp = 4;
  o.space.recomputes = {Recompute::kNone, Recompute::kFull};
  o.base.activation_offload = true;
  o.threads = 2;
  o.prune = false;
  const PlannerResult all = plan_training(moe, s.cluster, s.cm, o);
  o.prune = true;
  const PlannerResult pruned = plan_training(moe, s.cluster, s.cm, o);
  int64_t with_ep = 0, with_cp = 0;
  for (const Plan& p : enumerate_plans(moe, s.cluster, o)) {
    with_ep += p.ep > 1 ? 1 : 0;
    with_cp += p.cp > 1 ? 1 : 0;
  }
  EXPECT_GT(with_ep, 0);
  EXPECT_GT(with_cp, 0);
  EXPECT_GT(all.counts.simulated, 0);
  EXPECT_EQ(all.bound_violations, 0);
  expect_same(all.top, pruned.top, "top");
  expect_same(all.pareto, pruned.pareto, "pareto");
  EXPECT_GT(pruned.counts.pruned, 0);
}

// --moe-dispatcher alltoall,deepep: each plan whose tokens cross EP ranks (ep > 1) comes once per
// dispatcher, the rest once; so the search's space is the union of the two single-dispatcher spaces, and
// (the pruning being exact) its best plan is the better of their two best.
TEST(Planner, SearchesEachListedMoeDispatcherWhereTokensCrossRanks) {
  Small s;
  const model::ModelSpec moe = testing::small_moe(4, 128);
  PlannerOptions o = s.options();
  o.base.moe_ranks_per_token = 1.0;  // deepep's; an alltoall plan must drop it to stay valid
  o.base.moe_dispatcher = MoeDispatcher::kDeepEp;
  PlannerOptions a2a = o;
  a2a.base.moe_dispatcher = MoeDispatcher::kAllToAll;
  a2a.base.moe_ranks_per_token = 0.0;
  PlannerOptions both = o;
  both.space.moe_dispatchers = {MoeDispatcher::kAllToAll, MoeDispatcher::kDeepEp};
  const std::vector<Plan> one = enumerate_plans(moe, s.cluster, a2a);
  const std::vector<Plan> two = enumerate_plans(moe, s.cluster, both);
  int64_t ep_plans = 0;
  for (const Plan& p : one) ep_plans += p.ep > 1 ? 1 : 0;
  ASSERT_GT(ep_plans, 0);
  EXPECT_EQ(static_cast<int64_t>(two.size()), static_cast<int64_t>(one.size()) + ep_plans);
  int64_t deepep = 0;
  for (const Plan& p : two) {
    if (p.moe_dispatcher == MoeDispatcher::kDeepEp) {
      ++deepep;
      EXPECT_DOUBLE_EQ(p.moe_ranks_per_token, 1.0);
    } else {
      EXPECT_GT(p.ep, 1) << "plans without EP keep the base's dispatcher (deepep here)";
      EXPECT_EQ(p.moe_ranks_per_token, 0.0);
    }
    for (const ConstraintError& e : validate_plan(moe, p, o.gpus, s.gpu)) EXPECT_NE(e.key, "moe_ranks_per_token");
  }
  EXPECT_EQ(deepep, static_cast<int64_t>(one.size()));  // every ep > 1 plan once, and the ep = 1 ones
  const PlannerResult r_a2a = plan_training(moe, s.cluster, s.cm, a2a);
  const PlannerResult r_deep = plan_training(moe, s.cluster, s.cm, o);
  const PlannerResult r_both = plan_training(moe, s.cluster, s.cm, both);
  ASSERT_FALSE(r_a2a.top.empty());
  ASSERT_FALSE(r_deep.top.empty());
  ASSERT_FALSE(r_both.top.empty());
  EXPECT_DOUBLE_EQ(r_both.top.front().tokens_per_s_per_gpu,
                   std::max(r_a2a.top.front().tokens_per_s_per_gpu, r_deep.top.front().tokens_per_s_per_gpu));
}

// --cp-comm-type p2p,a2a: every plan with context parallelism once per listed exchange, the others once
// (nothing to exchange), so the list's search holds each single search's plans and its best is the
// better of theirs; the pruned search finds that best exactly as the full one does. 8 heads (and 8
// key/value heads) split over cp 2 or 4 at tp 1 or 2, so Ulysses is valid wherever cp is.
TEST(Planner, SearchesEachListedCpCommType) {
  Small s;
  PlannerOptions ring = s.options();
  ring.space.max_cp = 4;
  PlannerOptions a2a = ring;
  a2a.base.cp_comm = CpComm::kA2a;
  PlannerOptions both = ring;
  both.space.cp_comms = {CpComm::kP2p, CpComm::kA2a};
  const std::vector<Plan> one = enumerate_plans(s.model, s.cluster, ring);
  const std::vector<Plan> two = enumerate_plans(s.model, s.cluster, both);
  size_t with_cp = 0;
  for (const Plan& p : one) with_cp += p.cp > 1 ? 1 : 0;
  ASSERT_GT(with_cp, 0u);
  ASSERT_EQ(two.size(), one.size() + with_cp);
  for (const Plan& p : two) {
    if (p.cp == 1) {
      EXPECT_EQ(p.cp_comm, CpComm::kP2p);
    }
  }
  const PlannerResult r_ring = plan_training(s.model, s.cluster, s.cm, ring);
  const PlannerResult r_a2a = plan_training(s.model, s.cluster, s.cm, a2a);
  PlannerResult r_both = plan_training(s.model, s.cluster, s.cm, both);
  ASSERT_FALSE(r_ring.top.empty());
  ASSERT_FALSE(r_a2a.top.empty());
  ASSERT_FALSE(r_both.top.empty());
  EXPECT_DOUBLE_EQ(r_both.top.front().tokens_per_s_per_gpu,
                   std::max(r_ring.top.front().tokens_per_s_per_gpu, r_a2a.top.front().tokens_per_s_per_gpu));
  PlannerOptions full = both;
  full.prune = false;
  const PlannerResult r_full = plan_training(s.model, s.cluster, s.cm, full);
  EXPECT_DOUBLE_EQ(r_full.top.front().tokens_per_s_per_gpu, r_both.top.front().tokens_per_s_per_gpu);
}

// --precision bf16,fp16 searches every plan in each: the space is the two single-precision spaces side
// by side (twice the plans, each shape once per precision), and the best plan is the better of the two
// searches' bests. With fp8 listed and fp8 attention and current scaling asked for, only the fp8 plans
// carry them (a bf16 plan with either breaks its constraint, fp8_attention or fp8_recipe).
TEST(Planner, SearchesEachListedPrecision) {
  Small s;
  hw::GpuSpec gpu = test_gpu();  // with the A100's fp16 peak (= bf16) and an fp8 one for the last part
  gpu.peak_flops[static_cast<size_t>(hw::DType::kFp16)] = FlopRate(312e12);
  gpu.peak_flops[static_cast<size_t>(hw::DType::kFp8)] = FlopRate(624e12);
  const ClusterSpec cluster = ClusterSpec::from_catalog(gpu, nullptr, 8, Bandwidth(50e9));
  const compute::ComputeModel cm{gpu};
  PlannerOptions bf = s.options();
  PlannerOptions fp = bf;
  fp.base.precision = hw::DType::kFp16;
  PlannerOptions both = bf;
  both.space.precisions = {hw::DType::kBf16, hw::DType::kFp16};
  const std::vector<Plan> one = enumerate_plans(s.model, cluster, bf);
  const std::vector<Plan> two = enumerate_plans(s.model, cluster, both);
  ASSERT_FALSE(one.empty());
  ASSERT_EQ(two.size(), 2 * one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(two[2 * i].precision, hw::DType::kBf16);
    EXPECT_EQ(two[2 * i + 1].precision, hw::DType::kFp16);
    EXPECT_EQ(two[2 * i + 1].tp, one[i].tp);
    EXPECT_EQ(two[2 * i + 1].mbs, one[i].mbs);
    EXPECT_EQ(two[2 * i + 1].sharding, one[i].sharding);
  }
  const PlannerResult r_bf = plan_training(s.model, cluster, cm, bf);
  const PlannerResult r_fp = plan_training(s.model, cluster, cm, fp);
  const PlannerResult r_both = plan_training(s.model, cluster, cm, both);
  ASSERT_FALSE(r_bf.top.empty());
  ASSERT_FALSE(r_fp.top.empty());
  ASSERT_FALSE(r_both.top.empty());
  EXPECT_DOUBLE_EQ(r_both.top.front().tokens_per_s_per_gpu,
                   std::max(r_bf.top.front().tokens_per_s_per_gpu, r_fp.top.front().tokens_per_s_per_gpu));

  PlannerOptions f8 = bf;
  f8.base.fp8_attention = true;
  f8.base.fp8_recipe = Fp8Recipe::kCurrent;
  f8.space.precisions = {hw::DType::kBf16, hw::DType::kFp8};
  for (const Plan& p : enumerate_plans(s.model, cluster, f8)) {
    const bool fp8 = p.precision == hw::DType::kFp8;
    EXPECT_EQ(p.fp8_attention, fp8);
    EXPECT_EQ(p.fp8_recipe, fp8 ? Fp8Recipe::kCurrent : Fp8Recipe::kDelayed);
    for (const ConstraintError& e : validate_plan(s.model, p, f8.gpus, gpu)) {
      EXPECT_NE(e.key, "fp8_attention");
      EXPECT_NE(e.key, "fp8_recipe");
    }
  }
}

// Every collective takes `coll`, every pipeline transfer `p2p` (as in simulator_test.cc).
// `link`: the link kind every group's traffic uses (for the simulator's link sharing); none by default.
class FixedComm final : public CommModel {
 public:
  FixedComm(Time coll, Time p2p, std::optional<LinkKind> link = std::nullopt) : coll_(coll), p2p_(p2p), link_(link) {}
  Time collective(coll::Op, Bytes, Group) const override { return coll_; }
  Time p2p(Bytes) const override { return p2p_; }
  std::optional<LinkKind> link(Group) const override { return link_; }

 private:
  Time coll_, p2p_;
  std::optional<LinkKind> link_;
};

// Where the simulation is the textbook pipeline (equal stages, no communication), the bound is exact.
// 16 layers of tf = tb_input = tb_weight = 1 ms on p = 4 stages (4 layers each: F = 4 ms, B = 8 ms),
// m = 8 micro-batches, no parameters (the optimizer is one kernel launch, opt):
//   1F1B:        stage 3: chain_f 3*4 + m*12 + chain_b 3*8 + opt = 132 ms + opt
//                (the (m + p - 1)(F + B) of Narayanan et al. 2019 = 11 * 12 ms)
//   interleaved v = 2 (chunks of 2 layers, F0 = 2, B0 = 4): 3*2 + 96 + 3*4 = 114 ms + opt
//                (m (F + B) + (p - 1)(F + B)/v)
//   ZB-H1:       3*4 + 96 + opt = 108 ms + opt  (m (F + B) + (p - 1)(F + B_input - W), Qi et al. 2024)
//   ZB-V (chunks of 2 layers, F0 = 2 on the V's first arm): rank 3: 3*2 + 96 + opt = 102 ms + opt
//                ((6m + p - 1) t at t = 2 ms per chunk pass)
// and the simulator's step equals each (simulator_test.cc derives the same four figures).
TEST(ThroughputBound, EqualsTheIdealPipelineStep) {
  const model::ModelSpec model = model::ModelSpec::llama({16, 1024, 8, 8, 4096, 32000, 1024});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  const Time opt = cm.memory_bound(Bytes(0));
  const ModelCosts c = testing::synthetic(16, Time::ms(1), Time::ms(1), Time::ms(1));
  const FixedComm comm(Time::zero(), Time::zero());
  for (const auto& [schedule, vp, ms] : {std::tuple<Schedule, int64_t, int64_t>{Schedule::kOneFOneB, 1, 132},
                                         {Schedule::kInterleaved, 2, 114},
                                         {Schedule::kZeroBubble, 1, 108},
                                         {Schedule::kZeroBubbleV, 2, 102}}) {
    Plan p;
    p.pp = 4;
    p.vp = vp;
    p.gbs = 8;
    p.seq = 2048;
    p.schedule = schedule;
    const Time step = Time::ms(ms) + opt;
    const double expected = 8.0 * 2048.0 / (step.to_seconds() * 4.0);
    EXPECT_NEAR(throughput_upper_bound(model, p, c, cm, comm), expected, expected * 1e-12) << schedule_name(schedule);
    EXPECT_EQ(simulate_step(model, p, c, cm, comm).step_time, step) << schedule_name(schedule);
  }
}

// ZeRO-3's collectives on one link. 4 layers of 0.1 ms forward, input and weight gradient each, dp 2,
// m = 2 micro-batches; every collective takes 4 ms alone. Per micro-batch the gather stream runs one
// all-gather per layer before its forward and one before its backward (8 x 4 = 32 ms) and the gradient
// stream one reduce-scatter per layer (4 x 4 = 16 ms). Sharing the NIC (processor sharing conserves
// work), the link is busy for their sum, 2 x (32 + 16) = 96 ms, which the compute (2 x 1.2 ms) does not
// reach: step_lb = 96 ms and bound = gbs seq / (96 ms x 2 GPUs). Without sharing each stream alone:
// 2 x max(32, 16) = 64 ms. The simulated step may not be shorter than either.
// ZeRO-2 reduce-scatters each layer after every micro-batch's backward too, 2 x 4 x 4 = 32 ms on the
// gradient stream (its parameter all-gathers, once per step, the bound leaves out): step_lb = 32 ms.
// ZeRO-1 reduces once, in the last micro-batch: its bound is the compute's, far above.
TEST(ThroughputBound, ShardedCollectivesOnOneLinkAddUp) {
  const model::ModelSpec model = model::ModelSpec::llama({4, 1024, 8, 8, 4096, 32000, 1024});
  const hw::GpuSpec gpu = test_gpu();
  const compute::ComputeModel cm(gpu);
  const ModelCosts c = testing::synthetic(4, Time::us(100), Time::us(100), Time::us(100), 1000);
  Plan p;
  p.dp = 2;
  p.gbs = 4;
  p.seq = 2048;
  p.sharding = Sharding::kZero3;
  ASSERT_EQ(p.microbatches(), 2);
  const FixedComm comm(Time::ms(4), Time::zero(), LinkKind::kNic);
  const auto tokens = [&](double step_ms) { return 4.0 * 2048.0 / (step_ms * 1e-3 * 2.0); };
  EXPECT_NEAR(throughput_upper_bound(model, p, c, cm, comm, true), tokens(96), tokens(96) * 1e-12);
  EXPECT_NEAR(throughput_upper_bound(model, p, c, cm, comm, false), tokens(64), tokens(64) * 1e-12);
  EXPECT_GE(simulate_step(model, p, c, cm, comm).step_time, Time::ms(96));
  StepOptions alone;
  alone.share_links = false;
  EXPECT_GE(simulate_step(model, p, c, cm, comm, alone).step_time, Time::ms(64));
  // Without a known link (no sharing in the simulation either) the streams count alone.
  const FixedComm unknown(Time::ms(4), Time::zero());
  EXPECT_NEAR(throughput_upper_bound(model, p, c, cm, unknown, true), tokens(64), tokens(64) * 1e-12);
  p.sharding = Sharding::kZero2;
  EXPECT_NEAR(throughput_upper_bound(model, p, c, cm, comm, true), tokens(32), tokens(32) * 1e-12);
  EXPECT_GE(simulate_step(model, p, c, cm, comm).step_time, Time::ms(32));
  p.sharding = Sharding::kZero1;
  EXPECT_GT(throughput_upper_bound(model, p, c, cm, comm, true), tokens(32) * 10.0);
}

// Selective unsharding (SearchSpace::unshard): each ZeRO-3 plan within the budget gets a variant keeping
// the most layers per pipeline rank gathered that the budget allows. Checked from the memory model
// itself, not the planner's output: the variant fits and one more layer would not (unless it keeps
// them all), the variants follow the plans in their order, and the search can only gain.
bool same_shape(const Plan& a, const Plan& b) {
  return a.tp == b.tp && a.pp == b.pp && a.cp == b.cp && a.ep == b.ep && a.dp == b.dp && a.vp == b.vp &&
         a.schedule == b.schedule && a.mbs == b.mbs && a.sharding == b.sharding && a.shard_group == b.shard_group &&
         a.recompute == b.recompute && a.recompute_layers == b.recompute_layers && a.sp == b.sp &&
         a.unsharded_layers == b.unsharded_layers && a.activation_offload == b.activation_offload &&
         a.offload_layers == b.offload_layers && a.optimizer_offload == b.optimizer_offload &&
         a.optimizer_offload_fraction == b.optimizer_offload_fraction;
}

// A plan's peak as the search measures it: the tensors' (the caching allocator's reservation apart).
Bytes search_peak(const Small& s, Plan p, const PlannerOptions& o) {
  p.allocator = AllocatorMode::kNone;
  const AlphaBetaComm comm(s.cluster, p);
  return memory_model(s.model, p, model_costs(s.model, p, s.cm, comm), s.gpu, o.evaluate.memory).peak;
}

// The search with the variants `space` adds to o's and without them (o as given). The variants are
// counted in `enumerated` (`variants` of them), follow the enumerated plans (indices from the count
// without them) and the categories still add up.
struct VariantRuns {
  PlannerResult with, without;
  size_t enumerated = 0;  // without the variants: the first variant's index
};
VariantRuns run_variants(const Small& s, const PlannerOptions& o, const std::function<void(SearchSpace&)>& space,
                         const std::function<int64_t(const PlannerCounts&)>& variants) {
  VariantRuns runs;
  PlannerOptions on = o;
  space(on.space);
  runs.with = plan_training(s.model, s.cluster, s.cm, on);
  runs.without = plan_training(s.model, s.cluster, s.cm, o);
  const PlannerCounts& c = runs.with.counts;
  EXPECT_GT(variants(c), 0);
  EXPECT_EQ(c.enumerated, runs.without.counts.enumerated + variants(c));
  EXPECT_EQ(c.enumerated, c.invalid + c.over_budget + c.fits + c.errors);
  runs.enumerated = static_cast<size_t>(runs.without.counts.enumerated);
  for (size_t i = runs.enumerated; i < runs.with.candidates.size(); ++i) EXPECT_EQ(runs.with.candidates[i].index, i);
  EXPECT_EQ(runs.with.bound_violations, 0);
  return runs;
}

TEST(Planner, UnshardingVariantsKeepTheMostLayersTheBudgetAllows) {
  Small s;
  PlannerOptions o = s.options();
  o.keep_candidates = true;
  o.space.shardings = {Sharding::kZero3};
  o.space.hsdp = false;
  const PlannerResult plain = plan_training(s.model, s.cluster, s.cm, o);
  // A budget that the sharded plans' tensors fill to different degrees: the smallest peak of a plan
  // sharded over dp > 1 plus 12 MiB (a layer's bf16 weights are 8.4 MB: 4 h^2 + 3 h f = 4.2 M parameters).
  Bytes low = Bytes(int64_t{1} << 62);
  for (const Candidate& c : plain.candidates) {
    if (c.status != CandidateStatus::kInvalid && c.plan.dp > 1 && c.peak < low) low = c.peak;
  }
  o.budget = low + Bytes::MiB(12);
  const VariantRuns runs = run_variants(
      s, o, [](SearchSpace& sp) { sp.unshard = true; }, [](const PlannerCounts& c) { return c.unsharded; });
  const PlannerResult& r = runs.with;
  const PlannerResult& off = runs.without;
  const size_t n = runs.enumerated;
  size_t last_source = 0;
  bool some_partial = false;
  for (size_t i = n; i < r.candidates.size(); ++i) {
    const Candidate& v = r.candidates[i];
    ASSERT_GE(v.plan.unsharded_layers, 1);
    EXPECT_LE(v.peak, r.budget);
    // Its source: the same plan without unsharding, within the budget, earlier in the order.
    size_t src = n;
    for (size_t j = last_source; j < n; ++j) {
      Plan p = r.candidates[j].plan;
      p.unsharded_layers = v.plan.unsharded_layers;
      if (r.candidates[j].status != CandidateStatus::kInvalid && r.candidates[j].status != CandidateStatus::kOverBudget &&
          r.candidates[j].plan.unsharded_layers == 0 && same_shape(p, v.plan)) {
        src = j;
        break;
      }
    }
    ASSERT_LT(src, n) << "variant " << i << " has no source plan after " << last_source;
    last_source = src + 1;
    const int64_t most = max_stage_layers(v.plan, s.model.layers);
    if (v.plan.unsharded_layers < most) {
      some_partial = true;
      Plan more = v.plan;
      more.unsharded_layers += 1;
      EXPECT_GT(search_peak(s, more, o), r.budget) << "variant " << i << " could keep one more layer";
    }
  }
  EXPECT_TRUE(some_partial);  // the budget above binds for some plan
  ASSERT_FALSE(r.top.empty());
  ASSERT_FALSE(off.top.empty());
  EXPECT_GE(r.top[0].tokens_per_s_per_gpu, off.top[0].tokens_per_s_per_gpu);
}

// Partial recompute (SearchSpace::partial_recompute). The budget lies halfway between one plan's peak
// without recompute and its peak with full recompute (tp 1, pp 1, dp 8, mbs 2: its 4 layers on one rank,
// one micro-batch in flight). With A a layer's activations, a its input and T the rest (weights,
// gradients, optimizer, buffers): none = T + 4A, full = T + 4a + A (the inputs kept, one layer
// re-materialized in its backward: train/memory.h), k layers recomputed = T + (4 - k) A + k a + A, so
// the midpoint T + 2.5 A + 2 a admits k = 3 (T + 2A + 3a, as a < A / 2) and not k = 2 (T + 3A + 2a):
// that plan's variant recomputes 3 of its 4 layers. For every variant: full recompute on 1 <= k < the
// rank's layers, within the budget, its source (the same plan without recompute) over it, one layer
// fewer over it too, and no slower than its full-recompute twin when both are simulated (it does k of
// the twin's 4 layers' recompute work). The best plan can only gain.
TEST(Planner, PartialRecomputeVariantsRecomputeTheFewestLayersThatFit) {
  Small s;
  PlannerOptions o = s.options();
  o.keep_candidates = true;
  o.prune = false;
  o.space.shardings = {Sharding::kNone};
  o.space.hsdp = false;
  o.space.recomputes = {Recompute::kNone, Recompute::kFull};
  o.space.sp_off = false;
  const PlannerResult plain = plan_training(s.model, s.cluster, s.cm, o);
  const Candidate* none = nullptr;
  const Candidate* full = nullptr;
  for (const Candidate& c : plain.candidates) {
    const Plan& p = c.plan;
    if (c.status == CandidateStatus::kInvalid || p.tp != 1 || p.pp != 1 || p.mbs != 2) continue;
    (p.recompute == Recompute::kNone ? none : full) = &c;
  }
  ASSERT_NE(none, nullptr);
  ASSERT_NE(full, nullptr);
  ASSERT_GT(none->peak, full->peak);
  o.budget = Bytes((none->peak.count() + full->peak.count()) / 2);
  const VariantRuns runs = run_variants(
      s, o, [](SearchSpace& sp) { sp.partial_recompute = true; }, [](const PlannerCounts& c) { return c.partial_recompute; });
  const PlannerResult& r = runs.with;
  const PlannerResult& off = runs.without;
  const size_t n = runs.enumerated;
  EXPECT_EQ(r.counts.unsharded, 0);
  bool chosen = false;
  for (size_t i = n; i < r.candidates.size(); ++i) {
    const Candidate& v = r.candidates[i];
    ASSERT_EQ(v.plan.recompute, Recompute::kFull);
    const int64_t k = v.plan.recompute_layers;
    ASSERT_GE(k, 1);
    EXPECT_LT(k, max_stage_layers(v.plan, s.model.layers));
    EXPECT_LE(v.peak, r.budget);
    const Candidate* source = nullptr;
    const Candidate* twin = nullptr;
    for (size_t j = 0; j < n; ++j) {
      Plan p = r.candidates[j].plan;
      const Recompute rc = p.recompute;
      p.recompute = Recompute::kFull;
      p.recompute_layers = k;
      if (!same_shape(p, v.plan)) continue;
      (rc == Recompute::kNone ? source : twin) = &r.candidates[j];
    }
    ASSERT_NE(source, nullptr) << "variant " << i;
    EXPECT_EQ(source->status, CandidateStatus::kOverBudget);
    if (k > 1) {
      Plan fewer = v.plan;
      fewer.recompute_layers = k - 1;
      EXPECT_GT(search_peak(s, fewer, o), r.budget) << "variant " << i << " could recompute one layer fewer";
    }
    if (twin != nullptr && twin->status == CandidateStatus::kSimulated && v.status == CandidateStatus::kSimulated) {
      EXPECT_LE(v.step_time, twin->step_time) << "variant " << i;
    }
    if (v.plan.tp == 1 && v.plan.pp == 1 && v.plan.mbs == 2) {
      chosen = true;
      EXPECT_EQ(k, 3);
      EXPECT_EQ(v.status, CandidateStatus::kSimulated);
    }
  }
  EXPECT_TRUE(chosen);
  ASSERT_FALSE(r.top.empty());
  ASSERT_FALSE(off.top.empty());
  EXPECT_GE(r.top[0].tokens_per_s_per_gpu, off.top[0].tokens_per_s_per_gpu);
}

// Offload variants (SearchSpace::activation_offload, optimizer_offload), on the plan tp 1, pp 1, dp 8,
// mbs 2, ZeRO-1, no recompute: its 4 layers on one rank, one micro-batch in flight. With A a layer's
// saved activations and T the rest, offloading the first K layers keeps min(K, 2) of them on the GPU
// (the layer computed and the one whose copy is in flight; train/memory.h): K = 1 and 2 leave T + 4A,
// K = 3 gives T + 3A. The budget T + 3.5 A therefore admits K = 3 and not K = 2. A share F of its
// optimizer on the host takes F x O off the GPU, O being ZeRO-1's 12 bytes per parameter over dp 8
// (about 17.8 M parameters: 27 MB, more than A / 2 = 2.9 MB at seq 128, mbs 2, hidden 512), so its
// optimizer-offload variant puts the fewest twentieths on the host that cover A / 2: k = ceil(20 A / (2 O)).
// For every variant: within the budget, its source (the same plan without that offload) over it,
// activation offload only on one stage without recompute and with one layer fewer over the budget,
// optimizer offload only on sharded plans and with one twentieth fewer over the budget.
TEST(Planner, OffloadVariantsOffloadWhatMakesAPlanFit) {
  Small s;
  PlannerOptions o = s.options();
  o.keep_candidates = true;
  o.prune = false;
  o.space.shardings = {Sharding::kNone, Sharding::kZero1};
  o.space.hsdp = false;
  o.space.recomputes = {Recompute::kNone};
  o.space.sp_off = false;
  const PlannerResult plain = plan_training(s.model, s.cluster, s.cm, o);
  const Candidate* chosen = nullptr;
  for (const Candidate& c : plain.candidates) {
    const Plan& p = c.plan;
    if (c.status != CandidateStatus::kInvalid && p.tp == 1 && p.pp == 1 && p.mbs == 2 && p.sharding == Sharding::kZero1) chosen = &c;
  }
  ASSERT_NE(chosen, nullptr);
  const Plan cp = chosen->plan;
  const AlphaBetaComm comm(s.cluster, cp);
  const Bytes layer_act = model_costs(s.model, cp, s.cm, comm).layer[0].saved_activations(Recompute::kNone);
  ASSERT_GT(chosen->memory.optimizer * 2, layer_act);  // the derivation's premise
  o.budget = chosen->peak - Bytes(layer_act.count() / 2);
  const VariantRuns runs = run_variants(
      s, o,
      [](SearchSpace& sp) {
        sp.activation_offload = true;
        sp.optimizer_offload = true;
      },
      [](const PlannerCounts& c) { return c.activation_offload + c.optimizer_offload; });
  const PlannerResult& r = runs.with;
  const size_t n = runs.enumerated;
  EXPECT_GT(r.counts.activation_offload, 0);
  EXPECT_GT(r.counts.optimizer_offload, 0);
  int64_t chosen_k = 0;
  int64_t chosen_twentieths = 0;
  for (size_t i = n; i < r.candidates.size(); ++i) {
    const Candidate& v = r.candidates[i];
    EXPECT_LE(v.peak, r.budget) << "variant " << i;
    EXPECT_NE(v.plan.activation_offload, v.plan.optimizer_offload) << "variant " << i << ": one kind each";
    Plan source = v.plan;
    source.activation_offload = false;
    source.offload_layers = -1;
    source.optimizer_offload = false;
    source.optimizer_offload_fraction = 1.0;
    const Candidate* src = nullptr;
    for (size_t j = 0; j < n; ++j) {
      if (same_shape(r.candidates[j].plan, source)) src = &r.candidates[j];
    }
    ASSERT_NE(src, nullptr) << "variant " << i;
    EXPECT_EQ(src->status, CandidateStatus::kOverBudget) << "variant " << i;
    const bool is_chosen = same_shape(source, cp);
    if (v.plan.activation_offload) {
      const int64_t k = v.plan.offload_layers;
      EXPECT_EQ(v.plan.pp, 1);
      EXPECT_EQ(v.plan.recompute, Recompute::kNone);
      ASSERT_GE(k, 1);
      EXPECT_LT(k, s.model.layers);
      if (k > 1) {
        Plan fewer = v.plan;
        fewer.offload_layers = k - 1;
        EXPECT_GT(search_peak(s, fewer, o), r.budget) << "variant " << i << " could offload one layer fewer";
      }
      if (is_chosen) chosen_k = k;
    } else {
      EXPECT_NE(v.plan.sharding, Sharding::kNone);
      const double twentieths = v.plan.optimizer_offload_fraction * kOptimizerOffloadSteps;
      const int64_t k = std::llround(twentieths);
      EXPECT_DOUBLE_EQ(twentieths, static_cast<double>(k)) << "variant " << i;
      ASSERT_GE(k, 1);
      ASSERT_LE(k, kOptimizerOffloadSteps);
      if (k > 1) {
        Plan less = v.plan;
        less.optimizer_offload_fraction = static_cast<double>(k - 1) / kOptimizerOffloadSteps;
        EXPECT_GT(search_peak(s, less, o), r.budget) << "variant " << i << " could offload a twentieth less";
      }
      if (is_chosen) chosen_twentieths = k;
    }
  }
  EXPECT_EQ(chosen_k, 3);
  EXPECT_EQ(chosen_twentieths, static_cast<int64_t>(std::ceil(20.0 * layer_act.to_double() / (2.0 * chosen->memory.optimizer.to_double()))));
}

// The host's memory bounds the offloads: with one byte of host memory per GPU no offload variant fits
// (each puts something on the host), and plans that offload by their base settings are over budget
// for the reason host_memory, listed under it but not among the over-GPU-budget plans.
TEST(Planner, OffloadsMustFitTheHostMemory) {
  Small s;
  PlannerOptions o = s.options();
  o.keep_candidates = true;
  o.space.shardings = {Sharding::kZero1};
  o.space.hsdp = false;
  o.space.recomputes = {Recompute::kNone};
  // A budget 1 MiB under the largest peak of a single-stage plan: that plan is over it, and a twentieth
  // of its optimizer (12 bytes x ~17.8 M parameters / 8 / 20 > 1 MiB) or a layer's activations bring
  // it within, where the host has room.
  Bytes largest;
  for (const Candidate& c : plan_training(s.model, s.cluster, s.cm, o).candidates) {
    if (c.status != CandidateStatus::kInvalid && c.plan.pp == 1) largest = std::max(largest, c.peak);
  }
  o.keep_candidates = false;
  o.budget = largest - Bytes::MiB(1);
  o.space.activation_offload = true;
  o.space.optimizer_offload = true;
  const PlannerResult room = plan_training(s.model, s.cluster, s.cm, o);
  EXPECT_GT(room.counts.activation_offload + room.counts.optimizer_offload, 0);
  s.cluster.host_memory_per_gpu = Bytes(1);
  const PlannerResult r = plan_training(s.model, s.cluster, s.cm, o);
  EXPECT_EQ(r.counts.activation_offload, 0);
  EXPECT_EQ(r.counts.optimizer_offload, 0);
  o.space.activation_offload = false;
  o.space.optimizer_offload = false;
  o.base.optimizer_offload = true;
  o.budget = Bytes(0);  // the GPU's memory: every valid plan's tensors fit it
  const PlannerResult host = plan_training(s.model, s.cluster, s.cm, o);
  EXPECT_EQ(host.counts.fits, 0);
  ASSERT_GT(host.counts.over_budget, 0);
  ASSERT_FALSE(host.reasons.empty());
  int64_t host_memory = 0;
  for (const ReasonCount& rc : host.reasons) {
    if (rc.key == "host_memory") host_memory = rc.count;
  }
  EXPECT_EQ(host_memory, host.counts.over_budget);
  EXPECT_TRUE(host.fastest_over_budget.empty());
  EXPECT_TRUE(host.closest_over_budget.empty());
}

TEST(Planner, ReportsWhyEveryPlanFailsWhenNoneFits) {
  Small s;
  PlannerOptions o = s.options();
  o.budget = Bytes::MiB(1);  // below the CUDA context alone (512 MiB, train/memory.h)
  o.keep_candidates = true;
  const PlannerResult r = plan_training(s.model, s.cluster, s.cm, o);
  EXPECT_TRUE(r.top.empty());
  EXPECT_TRUE(r.pareto.empty());
  EXPECT_EQ(r.counts.fits, 0);
  EXPECT_EQ(r.counts.over_budget, 2025 - 180);
  ASSERT_EQ(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[0].key, "memory");
  EXPECT_EQ(r.reasons[0].count, 2025 - 180);
  EXPECT_NE(r.reasons[0].example.find("exceeds the budget"), std::string::npos);
  EXPECT_EQ(r.reasons[1].key, "vp_microbatches");
  // The lists hold the K best by their own order: the highest bounds, the smallest peaks.
  Bytes min_peak = Bytes(int64_t{1} << 62);
  double max_bound = 0.0;
  for (const Candidate& c : r.candidates) {
    if (c.status != CandidateStatus::kOverBudget) continue;
    min_peak = std::min(min_peak, c.peak);
    max_bound = std::max(max_bound, c.bound_tokens_per_s_per_gpu);
  }
  ASSERT_EQ(r.closest_over_budget.size(), 5u);
  ASSERT_EQ(r.fastest_over_budget.size(), 5u);
  EXPECT_EQ(r.closest_over_budget.front().peak, min_peak);
  EXPECT_EQ(r.fastest_over_budget.front().bound_tokens_per_s_per_gpu, max_bound);
  for (size_t i = 1; i < 5; ++i) {
    EXPECT_LE(r.closest_over_budget[i - 1].peak, r.closest_over_budget[i].peak);
    EXPECT_GE(r.fastest_over_budget[i - 1].bound_tokens_per_s_per_gpu, r.fastest_over_budget[i].bound_tokens_per_s_per_gpu);
  }
}

// The planner's memory filter and simulation are evaluate()'s: the same peak and step for its picks.
TEST(Planner, AgreesWithEvaluateOnItsPicks) {
  Small s;
  const PlannerResult r = plan_training(s.model, s.cluster, s.cm, s.options());
  ASSERT_FALSE(r.top.empty());
  for (const Candidate& c : r.top) {
    EvaluateOptions memory_only;
    memory_only.simulate = false;
    EXPECT_EQ(evaluate(s.model, c.plan, s.cluster, s.cm, memory_only).memory.peak, c.peak);
    const TrainResult t = evaluate(s.model, c.plan, s.cluster, s.cm);
    EXPECT_EQ(t.step.step_time, c.step_time);
    EXPECT_EQ(t.tokens_per_s_per_gpu, c.tokens_per_s_per_gpu);
  }
}

// A 1.3 B-parameter model on one DGX H100 (8 GPUs, NVLink), seq 2048, global batch 64: plain data
// parallelism fits (18 bytes/parameter = 23 GB of model states plus activations of one 2048-token
// sequence, far below 80 GB), so the best plan uses neither TP nor PP nor CP nor recomputation:
//  - PP adds a bubble of (p - 1)/m of the step (m = 64/(dp mbs)) and pipeline transfers;
//  - TP and CP split each GEMM and attention kernel into smaller, less efficient ones and add exposed
//    collectives inside every layer (2 all-reduces of b s h per pass for TP);
//  - recomputation adds forward work;
// while DP's only cost, the gradient all-reduce, overlaps with the last backward except its last bucket.
// The catalog node decides NCCL's per-generation constants and the NVLink domain (train/comm_model.h):
// a DGX H100 has NVLink SHARP on its NVSwitch (0.85) and NVLink 4 at 20.6 of 25 GB/s; a GB200 NVL72 tray
// of 4 GPUs sits in a 72-GPU NVLink domain (0.74, 40.1 of 50 GB/s); a DGX A100 has no NVLS (0.80).
TEST(ClusterSpec, FromCatalogTakesNcclsConstantsAndTheNvlinkDomain) {
  const io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  const ClusterSpec h100 = ClusterSpec::from_catalog(catalog.hw.get_gpu("h100-sxm", {}), catalog.hw.find_node("dgx-h100"));
  EXPECT_DOUBLE_EQ(h100.scaleup_efficiency, 0.824);
  EXPECT_DOUBLE_EQ(h100.nvls_efficiency, 0.85);
  EXPECT_EQ(h100.domain_gpus(), 8);
  const ClusterSpec gb200 = ClusterSpec::from_catalog(catalog.hw.get_gpu("gb200", {}), catalog.hw.find_node("gb200-nvl72"));
  EXPECT_EQ(gb200.gpus_per_node, 4);
  EXPECT_EQ(gb200.domain_gpus(), 72);
  EXPECT_DOUBLE_EQ(gb200.nvls_efficiency, 0.74);
  EXPECT_DOUBLE_EQ(gb200.scaleup_efficiency, 0.802);
  const ClusterSpec a100 = ClusterSpec::from_catalog(catalog.hw.get_gpu("a100-sxm-80gb", {}), catalog.hw.find_node("dgx-a100"));
  EXPECT_DOUBLE_EQ(a100.nvls_efficiency, 0.0);
  EXPECT_DOUBLE_EQ(a100.scaleup_efficiency, 0.80);
  // Without a node the GPUs' switch is unknown: no NVLS.
  EXPECT_DOUBLE_EQ(ClusterSpec::from_catalog(catalog.hw.get_gpu("h100-sxm", {}), nullptr).nvls_efficiency, 0.0);
}

TEST(Planner, PicksPlainDataParallelismForASmallModel) {
  const io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false, true});
  const hw::GpuSpec& gpu = catalog.hw.get_gpu("h100-sxm", {});
  const ClusterSpec cluster = ClusterSpec::from_catalog(gpu, catalog.hw.find_node("dgx-h100"));
  const compute::ComputeModel cm(gpu);
  const model::ModelSpec model = model::ModelSpec::llama({24, 2048, 16, 16, 5504, 32000, 2048});
  PlannerOptions o;
  o.gpus = 8;
  o.seq = 2048;
  o.gbs = 64;
  o.top_k = 3;
  o.threads = 2;
  const PlannerResult r = plan_training(model, cluster, cm, o);
  ASSERT_FALSE(r.top.empty());
  const Plan& best = r.top.front().plan;
  EXPECT_EQ(best.tp, 1);
  EXPECT_EQ(best.pp, 1);
  EXPECT_EQ(best.cp, 1);
  EXPECT_EQ(best.dp, 8);
  EXPECT_EQ(best.recompute, Recompute::kNone);
  EXPECT_EQ(r.bound_violations, 0);
}


// Two 8-GPU machines (NVSwitch 300 GB/s per GPU, one 50 GB/s NIC per GPU) under a 4:1 oversubscribed leaf.
net::Topology two_machines_at_four_to_one() {
  net::FatTreeSpec f;
  f.machines = 2;
  f.gpus_per_machine = 8;
  f.radix = 16;
  f.oversubscription = 4.0;
  f.nic_bandwidth = Bandwidth(50e9);
  f.pcie_bandwidth = Bandwidth(32e9);
  f.scaleup_bandwidth = Bandwidth(300e9);
  return net::fat_tree(f);
}

// On a topology the search stays the alpha-beta one and its best 3 K plans are re-simulated with
// flow-level communication: the top K is theirs, sorted by the flow runs, each with its alpha-beta
// throughput beside; the Pareto front and the counts of the search do not change; any thread count
// gives the same result. Two 8-GPU machines (16 GPUs) in a 2-tier rail-optimized fat tree at 4:1.
TEST(Planner, OnATopologyTheBestPlansAreReRankedByFlowRuns) {
  Small s;
  PlannerOptions o = s.two_machines();
  o.top_k = 2;
  const net::Topology topo = two_machines_at_four_to_one();
  const PlannerResult ab = plan_training(s.model, s.cluster, s.cm, o);
  o.evaluate.topology = &topo;
  const PlannerResult flow = plan_training(s.model, s.cluster, s.cm, o);
  o.threads = 2;
  const PlannerResult flow2 = plan_training(s.model, s.cluster, s.cm, o);
  // The pruning keeps the 3 K plans phase 3 re-simulates, as a search for the top 3 K would.
  PlannerOptions top6 = s.options();
  top6.gpus = 16;
  top6.gbs = 32;
  top6.top_k = 6;
  EXPECT_EQ(flow.counts.simulated, plan_training(s.model, s.cluster, s.cm, top6).counts.simulated);
  EXPECT_GE(flow.counts.simulated, ab.counts.simulated);
  EXPECT_EQ(flow.counts.flow_simulated, std::min<int64_t>(3 * 2, ab.counts.simulated));
  ASSERT_EQ(flow.top.size(), 2u);
  EXPECT_GE(flow.top[0].tokens_per_s_per_gpu, flow.top[1].tokens_per_s_per_gpu);
  for (const Candidate& c : flow.top) EXPECT_GT(c.alpha_beta_tokens_per_s_per_gpu, 0.0);
  ASSERT_EQ(flow.pareto.size(), ab.pareto.size());
  for (size_t i = 0; i < ab.pareto.size(); ++i) EXPECT_EQ(flow.pareto[i].index, ab.pareto[i].index);
  for (size_t i = 0; i < flow.top.size(); ++i) {
    EXPECT_EQ(flow.top[i].index, flow2.top[i].index);
    EXPECT_EQ(flow.top[i].step_time, flow2.top[i].step_time);
  }
}

// PlannerOptions::flow_rerank re-simulates the alpha-beta search's best N plans on the topology, N = 12
// for a top 2 here: the pruning keeps 12 (as a search for the top 12 without a topology simulates), the
// 12 are re-run, and the flow top 2 are among the alpha-beta top 12.
TEST(Planner, FlowRerankReSimulatesTheSearchsBestN) {
  Small s;
  PlannerOptions o = s.two_machines();
  o.top_k = 12;
  const PlannerResult ab12 = plan_training(s.model, s.cluster, s.cm, o);
  ASSERT_EQ(ab12.top.size(), 12u);
  const net::Topology topo = two_machines_at_four_to_one();
  o.top_k = 2;
  o.flow_rerank = 12;
  o.evaluate.topology = &topo;
  EXPECT_EQ(flow_rerank_count(o), 12u);
  const PlannerResult flow = plan_training(s.model, s.cluster, s.cm, o);
  EXPECT_EQ(flow.counts.simulated, ab12.counts.simulated);
  EXPECT_EQ(flow.counts.flow_simulated, 12);
  ASSERT_EQ(flow.top.size(), 2u);
  for (const Candidate& c : flow.top) {
    EXPECT_TRUE(std::any_of(ab12.top.begin(), ab12.top.end(), [&](const Candidate& a) { return a.index == c.index; }))
        << c.index;
  }
  o.flow_rerank = 0;
  EXPECT_EQ(flow_rerank_count(o), 6u);  // 3 x top
  o.evaluate.topology = nullptr;
  EXPECT_EQ(flow_rerank_count(o), 0u);  // no topology, no phase 3
}

// The reported plans carry the caching allocator's reservation (planner.h, "Memory"): with the eager
// loss under expandable segments it is the search's peak plus the bf16 logits' block the loss leaves
// behind, 2 mbs seq V / tp bytes (allocator_trace_test.cc), up to the 20 MiB page the segment grew by;
// without an allocator it is the peak itself. The search itself does not change.
TEST(Planner, ReportedPlansCarryTheAllocatorsReservation) {
  const model::ModelSpec model = model::ModelSpec::llama({4, 512, 8, 8, 2048, 128256, 4096});
  const hw::GpuSpec gpu = test_gpu();
  const ClusterSpec cluster = ClusterSpec::from_catalog(gpu, nullptr, 8, Bandwidth(50e9));
  const compute::ComputeModel cm{gpu};
  PlannerOptions o;
  o.gpus = 8;
  o.seq = 4096;
  o.gbs = 16;
  o.space.max_cp = 1;
  o.space.max_pp = 1;
  o.top_k = 5;
  o.threads = 1;
  o.base.eager = true;
  const PlannerResult none = plan_training(model, cluster, cm, o);
  o.base.allocator = AllocatorMode::kExpandable;
  const PlannerResult traced = plan_training(model, cluster, cm, o);
  ASSERT_EQ(none.top.size(), 5u);
  ASSERT_EQ(traced.top.size(), 5u);
  for (size_t k = 0; k < none.top.size(); ++k) {
    const Candidate& a = none.top[k];
    const Candidate& b = traced.top[k];
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.reserved, a.peak);
    EXPECT_EQ(b.peak, a.peak);
    const double hole = 2.0 * static_cast<double>(b.plan.mbs) * 4096.0 * 128256.0 / static_cast<double>(b.plan.tp);
    EXPECT_NEAR((b.reserved - b.peak).to_double(), hole, 20.0 * (1 << 20)) << k;
  }
}

}  // namespace
}  // namespace orrery::train
