#include "train/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/parallel.h"

namespace orrery::train {

std::string_view candidate_status_name(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::kInvalid: return "invalid";
    case CandidateStatus::kOverBudget: return "over-budget";
    case CandidateStatus::kPruned: return "pruned";
    case CandidateStatus::kSimulated: return "simulated";
    case CandidateStatus::kError: return "error";
  }
  return "?";
}

namespace {

double d(int64_t v) { return static_cast<double>(v); }

// Divisors of n up to max (0 = no limit), ascending; O(sqrt n).
std::vector<int64_t> divisors(int64_t n, int64_t max) {
  std::vector<int64_t> small, large;
  for (int64_t k = 1; k <= n / k; ++k) {
    if (n % k != 0) continue;
    small.push_back(k);
    if (k != n / k) large.push_back(n / k);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  if (max > 0) small.erase(std::upper_bound(small.begin(), small.end(), max), small.end());
  return small;
}

// Powers of two dividing n, up to max (0 = no limit).
std::vector<int64_t> powers_of_two_dividing(int64_t n, int64_t max) {
  std::vector<int64_t> r;
  for (int64_t k = 1; k <= n && (max <= 0 || k <= max) && n % k == 0; k *= 2) {
    r.push_back(k);
    if (k > n / 2) break;  // the next power would exceed n (and could overflow)
  }
  return r;
}

// The Pareto staircase of (memory, throughput) points seen so far: the best throughput at or below a
// memory, in O(log n).
class Staircase {
 public:
  // Highest throughput of a point with memory <= mem (-infinity when none).
  double best_at_most(Bytes mem) const {
    auto it = steps_.upper_bound(mem.count());
    if (it == steps_.begin()) return -std::numeric_limits<double>::infinity();
    return std::prev(it)->second;
  }
  void add(Bytes mem, double tput) {
    if (best_at_most(mem) >= tput) return;  // dominated
    auto it = steps_.lower_bound(mem.count());
    while (it != steps_.end() && it->second <= tput) it = steps_.erase(it);  // now dominated by the new point
    steps_[mem.count()] = tput;
  }

 private:
  std::map<int64_t, double> steps_;  // memory -> throughput, both increasing
};

// The plan as the search costs its memory: the tensors alone (planner.h, "Memory").
Plan tensors_only(Plan p) {
  p.allocator = AllocatorMode::kNone;
  return p;
}

// A simulation's figures into its candidate.
void record_run(Candidate& c, const TrainResult& t) {
  c.status = CandidateStatus::kSimulated;
  c.step_time = t.step.step_time;
  c.tokens_per_s_per_gpu = t.tokens_per_s_per_gpu;
  c.tflops_per_gpu = t.tflops_per_gpu;
  c.mfu = t.mfu;
  c.hfu = t.hfu;
  c.breakdown = t.step.breakdown;
}

bool faster(const Candidate& a, const Candidate& b) {
  if (a.tokens_per_s_per_gpu != b.tokens_per_s_per_gpu) return a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu;
  if (a.peak != b.peak) return a.peak < b.peak;
  return a.index < b.index;
}

// The time of one collective of `bytes_per_param` x n bytes, remembering the last n (the layers of a
// model mostly have the same parameter count).
// A simulator failure on one plan (a broken invariant in train/, e.g. ORRERY_CHECK) is recorded on the
// candidate, so that one bad plan does not end a search of 10^5; it is reported as a reason.
void set_error(Candidate& c, const std::exception& e) {
  c.status = CandidateStatus::kError;
  c.reason_key = "internal-error";
  c.reason = e.what();
}

class CollectiveMemo {
 public:
  CollectiveMemo(const CommModel& comm, coll::Op op, Group group, int64_t bytes_per_param)
      : comm_(comm), op_(op), group_(group), bytes_per_param_(bytes_per_param) {}
  Time time(int64_t params) {
    if (params <= 0) return Time::zero();
    if (params != last_params_) {
      last_params_ = params;
      last_ = comm_.collective(op_, Bytes::from_double(d(params) * d(bytes_per_param_)), group_);
    }
    return last_;
  }

 private:
  const CommModel& comm_;
  coll::Op op_;
  Group group_;
  int64_t bytes_per_param_;
  int64_t last_params_ = -1;
  Time last_;
};

// The largest k in [lo, hi] with pred(k), where pred holds on [lo, K] and not beyond, by bisection.
// REQUIRES: pred(lo).
template <class Pred>
int64_t last_true(int64_t lo, int64_t hi, Pred pred) {
  if (pred(hi)) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (pred(mid) ? lo : hi) = mid;
  }
  return lo;
}

// The smallest k in [1, n - 1] with fits(k), where fits holds from some k on (by bisection on "does
// not fit"); -1: none. The variant rules' pick for counts whose peak falls as k grows: layers
// recomputed or offloaded (n = the rank's layers), twentieths of the optimizer on the host (n = 21).
int64_t smallest_fitting_count(const std::function<bool(int64_t)>& fits, int64_t n) {
  if (n < 2 || !fits(n - 1)) return -1;
  if (fits(1)) return 1;
  return last_true(1, n - 1, [&](int64_t k) { return !fits(k); }) + 1;
}

}  // namespace

std::vector<Plan> enumerate_plans(const model::ModelSpec& model, const ClusterSpec& cluster,
                                  const PlannerOptions& o) {
  const SearchSpace& sp = o.space;
  std::vector<Plan> plans;
  // Default: TP inside one machine, or up to 8 inside a larger NVLink domain (GB200 NVL72 trays hold 4).
  const int64_t max_tp = sp.max_tp > 0 ? sp.max_tp : std::max(cluster.gpus_per_node, std::min<int64_t>(cluster.domain_gpus(), 8));
  for (int64_t tp : divisors(model.heads, max_tp)) {
    std::vector<int64_t> pps = divisors(model.layers, sp.max_pp);
    if (sp.uneven_stages) {
      for (int64_t pp = 2; pp <= model.layers && (sp.max_pp <= 0 || pp <= sp.max_pp); pp *= 2) {
        Plan probe;
        probe.pp = pp;
        if (model.layers % pp != 0 && balance_uneven_stages(probe, model.layers)) pps.push_back(pp);
      }
      std::sort(pps.begin(), pps.end());
    }
    for (int64_t pp : pps) {
      const bool uneven = model.layers % pp != 0;
      for (int64_t cp = 1; cp <= (sp.max_cp > 0 ? sp.max_cp : o.gpus) && cp <= o.seq; cp *= 2) {
        if (cp > 1 && o.seq % (2 * cp) != 0) continue;
        if (o.gpus % (tp * pp * cp) != 0) continue;  // no integer dp
        const int64_t dp = o.gpus / (tp * pp * cp);
        // (etp, ep): the expert TP sizes listed that divide tp (0: tp's own), each with the EP degrees
        // its expert grid allows.
        std::vector<std::pair<int64_t, int64_t>> expert_grids = {{0, 1}};
        if (model.is_moe()) {
          expert_grids.clear();
          std::vector<int64_t> etps;
          for (int64_t e : sp.expert_tps) {
            const int64_t etp = e >= tp ? 0 : e;  // at or above tp: the plan's tp
            if (etp < 0 || (etp > 0 && tp % etp != 0)) continue;
            if (std::find(etps.begin(), etps.end(), etp) == etps.end()) etps.push_back(etp);
          }
          for (int64_t etp : etps) {
            for (int64_t ep : divisors(model.moe.num_experts, sp.max_ep)) {
              if ((tp * dp * cp) % ((etp > 0 ? etp : tp) * ep) == 0) expert_grids.emplace_back(etp, ep);
            }
          }
        }
        std::vector<std::pair<Schedule, int64_t>> schedules;
        if (pp == 1) {
          schedules.emplace_back(Schedule::kOneFOneB, 1);  // no pipeline: gradient accumulation
        } else {
          // vp >= 2 splits the layers evenly over pp x vp chunks, or (uneven stages) with end chunks one
          // layer short (shorten_end_chunks).
          auto chunks_fit = [&](int64_t vp) {
            Plan probe;
            probe.pp = pp;
            probe.vp = vp;
            return model.layers % (pp * vp) == 0 || (sp.uneven_stages && shorten_end_chunks(probe, model.layers));
          };
          for (Schedule s : sp.schedules) {
            if (s == Schedule::kZeroBubbleV || s == Schedule::kDualPipeV) {
              if (chunks_fit(2)) schedules.emplace_back(s, 2);  // the V's two chunks
              continue;
            }
            if (s != Schedule::kInterleaved && s != Schedule::kInterleavedZeroBubble && s != Schedule::kLoopedBfs) {
              schedules.emplace_back(s, 1);
              continue;
            }
            for (int64_t vp = 2; pp * vp <= model.layers + 2 && (sp.max_vp <= 0 || vp <= sp.max_vp); ++vp) {
              if (chunks_fit(vp)) schedules.emplace_back(s, vp);
            }
          }
        }
        // mbs: powers of two dividing gbs/dp; when dp does not divide gbs, mbs 1 stands for the
        // shape so that validate_plan reports why.
        std::vector<int64_t> mbss = o.gbs % dp == 0 ? powers_of_two_dividing(o.gbs / dp, sp.max_mbs) : std::vector<int64_t>{1};
        if (mbss.empty()) mbss.push_back(1);
        std::vector<std::pair<Sharding, int64_t>> shardings;
        if (dp == 1) {
          shardings.emplace_back(Sharding::kNone, 0);  // nothing to shard over
        } else {
          for (Sharding s : sp.shardings) shardings.emplace_back(s, 0);
          if (sp.hsdp) {
            for (int64_t g : divisors(dp, dp - 1)) {
              if (g > 1) shardings.emplace_back(Sharding::kZero3, g);
            }
          }
        }
        std::vector<bool> sps = {false};
        if (tp > 1) {
          sps.clear();
          if (sp.sp_on) sps.push_back(true);
          if (sp.sp_off) sps.push_back(false);
        }
        // (cp exchange, etp, ep, dispatcher): every listed CP exchange where there is context parallelism,
        // every listed dispatcher where tokens cross EP ranks.
        const std::vector<CpComm> cp_comms = cp > 1 && !sp.cp_comms.empty() ? sp.cp_comms : std::vector<CpComm>{o.base.cp_comm};
        std::vector<std::tuple<CpComm, int64_t, int64_t, MoeDispatcher>> routings;
        for (const CpComm cp_comm : cp_comms) {
          for (const auto& [etp, ep] : expert_grids) {
            if (ep == 1 || sp.moe_dispatchers.empty()) {
              routings.emplace_back(cp_comm, etp, ep, o.base.moe_dispatcher);
            } else {
              for (MoeDispatcher d : sp.moe_dispatchers) routings.emplace_back(cp_comm, etp, ep, d);
            }
          }
        }
        for (const auto& [cp_comm, etp, ep, dispatcher] : routings) {
          for (const auto& [schedule, vp] : schedules) {
            for (int64_t mbs : mbss) {
              for (const auto& [sharding, group] : shardings) {
                for (Recompute rc : sp.recomputes) {
                  const bool several_sets = rc == Recompute::kSelective && !sp.recompute_module_sets.empty();
                  const size_t sets = several_sets ? sp.recompute_module_sets.size() : 1;
                  for (size_t set = 0; set < sets; ++set) {
                    for (bool seqpar : sps) {
                      if (etp > 0 && !seqpar) continue;  // expert TP below tp needs SP
                      Plan p = o.base;
                      p.dp = dp;
                      p.tp = tp;
                      p.pp = pp;
                      p.cp = cp;
                      p.ep = ep;
                      p.etp = etp;
                      p.cp_comm = cp_comm;
                      // Hierarchical CP: a2a inside the NVLink domain, the ring across.
                      p.cp_a2a = cp_comm == CpComm::kA2aP2p ? machine_cp_a2a(p, cluster.domain_gpus()) : 0;
                      p.moe_dispatcher = dispatcher;
                      if (dispatcher == MoeDispatcher::kAllToAll) p.moe_ranks_per_token = 0.0;  // deepep's
                      p.vp = vp;
                      p.schedule = schedule;
                      p.mbs = mbs;
                      p.gbs = o.gbs;
                      p.seq = o.seq;
                      p.sharding = sharding;
                      p.shard_group = group;
                      p.recompute = rc;
                      if (several_sets) p.recompute_modules = sp.recompute_module_sets[set];
                      p.recompute_layers = -1;
                      p.sp = seqpar;
                      p.first_stage_layers = -1;
                      p.last_stage_layers = -1;
                      if (!shorten_end_chunks(p, model.layers) && uneven) balance_uneven_stages(p, model.layers);
                      // --overlap-moe-expert-parallel-comm: on every plan whose order has Megatron's pairs.
                      p.ep_a2a_overlap = o.base.ep_a2a_overlap && p.combined_1f1b_applies();
                      if (sp.precisions.empty()) {
                        plans.push_back(p);
                      } else {
                        for (hw::DType precision : sp.precisions) plans.push_back(p.in_precision(precision));
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return plans;
}

size_t flow_rerank_count(const PlannerOptions& o) {
  if (o.evaluate.topology == nullptr) return 0;
  return o.flow_rerank > 0 ? o.flow_rerank : o.top_k * kFlowRerankFactor;
}

double throughput_upper_bound(const model::ModelSpec& model, const Plan& p, const ModelCosts& c,
                              const compute::ComputeModel& cm, const CommModel& comm, bool share_links,
                              double compute_slowdown) {
  // The simulation scales the kernels (not the collectives) by the slowdown (simulator.cc, pass_parts),
  // rounding each piece's scaled sum to the picosecond; rounding each term down here keeps the bound's
  // step below it whatever the grouping.
  const double k = std::max(1.0, compute_slowdown);
  const auto slow = [k](Time t) {
    return k == 1.0 ? t : Time::ps(static_cast<int64_t>(std::floor(static_cast<double>(t.picoseconds()) * k)));
  };
  const int64_t pp = p.pp;
  const int64_t v = p.vp;
  const int64_t m = p.microbatches();
  const bool zero_bubble = p.splits_backward();
  // DualPipeV's pairs hide their EP all-to-alls but for at least `share` of them (bulk_extra); every
  // pass counts that much, less 3 ps per layer for the simulator's rounding of each scaled part.
  const bool pairs = p.overlaps_pairs();
  const auto exposed = [&](Time t) {
    if (!pairs) return t;
    const auto ps = static_cast<int64_t>(std::floor(static_cast<double>(t.picoseconds()) * c.pair_comm_share)) - 3;
    return Time::ps(std::max<int64_t>(0, ps));
  };
  const Time hop = pp > 1 ? comm.p2p(c.boundary_activation) : Time::zero();
  // FSDP under PP (Plan::fsdp_keeps_gathered) collects once per step, as ZeRO-1 does: compute bounds it.
  const bool zero3 = p.fsdp_reshards() && group_size(p, Group::kDpShard) > 1;
  // ZeRO-2 reduce-scatters every micro-batch's gradients too (the simulator's reduce_each).
  const bool zero2 = p.sharding == Sharding::kZero2 && group_size(p, Group::kDpShard) > 1;
  // FSDP2's copies, as the simulator adds them: on the compute stream per layer and pass, and on the
  // gather stream with each all-gather.
  const bool fsdp2 = zero3 && p.fsdp_impl == FsdpImpl::kFsdp2;
  const bool experts_sharded = group_size(p, Group::kEdpShard) > 1;
  CollectiveMemo gather{comm, coll::Op::kAllGather, Group::kDpShard, 2};
  CollectiveMemo reduce{comm, coll::Op::kReduceScatter, Group::kDpShard, p.grad_bytes};
  CollectiveMemo expert_gather{comm, coll::Op::kAllGather, Group::kEdpShard, 2};
  CollectiveMemo expert_reduce{comm, coll::Op::kReduceScatter, Group::kEdpShard, p.grad_bytes};
  Time chain_f;  // micro-batch 0's forward through the stages before s
  Time chain_b;  // the last backward's way down through the stages before s
  Time opt0;
  Time step_lb;
  for (int64_t s = 0; s < pp; ++s) {
    Time work, f0, b0;
    int64_t params = 0, experts = 0;
    for (int64_t ch = 0; ch < v; ++ch) {
      Time f, b;
      const LayerRange range = chunk_layers(p, model.layers, s, ch);
      for (int64_t i = 0; i < range.count; ++i) {
        const LayerCost& l = c.layer[static_cast<size_t>(range.first + i)];
        params += l.params;
        experts += l.expert_params;
        f += slow(l.fwd) + l.tp_fwd + l.cp_fwd + exposed(l.ep_fwd);
        b += slow(l.bwd_input + l.bwd_weight) + l.tp_bwd + l.cp_bwd + exposed(l.ep_bwd);
        if (fsdp2) {
          int64_t dense = l.params - l.expert_params;
          if (p.runs_embedding(s, ch) && i == 0) dense += c.pre.params;
          if (p.runs_head(s, ch) && i == range.count - 1) dense += c.post.params;
          const double elems = d(dense) + (experts_sharded ? d(l.expert_params) : 0.0);
          const bool gathered = range.offset + i >= p.unsharded_layers;
          f += fsdp2_compute_copies(p, cm, elems, gathered, false);
          b += fsdp2_compute_copies(p, cm, elems, gathered, true);
        }
        const bool full = p.recompute == Recompute::kFull &&
                          (p.recompute_layers < 0 || range.offset + i < p.recompute_layers);
        if (full) {
          b += slow(l.recompute_full) + l.tp_fwd + l.cp_fwd + exposed(l.ep_fwd);
        } else {
          b += slow(l.partial_recompute(p.recompute));
        }
      }
      if (p.runs_embedding(s, ch)) {
        f += slow(c.pre.fwd);
        b += slow(c.pre.bwd_input + c.pre.bwd_weight);
        params += c.pre.params;
      }
      if (p.runs_head(s, ch)) {
        f += slow(c.post.fwd);
        b += slow(c.post.bwd_input + c.post.bwd_weight);
        params += c.post.params;
      }
      if (ch == 0) {
        f0 = f;
        b0 = b;
      }
      work += f + b;
    }
    const Time opt = optimizer_step_time(p, p.local_optimizer_params(params, experts), cm);  // the simulator's task
    if (s == 0) opt0 = opt;
    const Time tail = zero_bubble ? opt : std::max(opt, chain_b + opt0);
    step_lb = std::max(step_lb, chain_f + work * m + tail);
    if (zero3 || zero2) {
      // ZeRO-3: the FIFO gather stream runs one all-gather per layer for every forward and backward
      // pass, the gradient stream one reduce-scatter per layer for every backward (ZeRO-2: the
      // reduce-scatters alone); each of a layer's collectives in two parts, the dense parameters' over
      // the shard group and the routed experts' over the expert shard group (the simulator's
      // gather_params and reduce_grads).
      Time gathers, reductions, expert_gathers, expert_reductions;
      for (int64_t ch = 0; ch < v; ++ch) {
        const LayerRange range = chunk_layers(p, model.layers, s, ch);
        for (int64_t i = 0; i < range.count; ++i) {
          const LayerCost& l = c.layer[static_cast<size_t>(range.first + i)];
          int64_t n = l.params - l.expert_params;
          if (p.runs_embedding(s, ch) && i == 0) n += c.pre.params;
          if (p.runs_head(s, ch) && i == range.count - 1) n += c.post.params;
          if (zero3 && range.offset + i >= p.unsharded_layers) {
            const Time g = gather.time(n), eg = expert_gather.time(l.expert_params);
            gathers += g * 2;
            expert_gathers += eg * 2;
            if (fsdp2 && g > Time::zero()) gathers += fsdp2_gather_copy_in(p, cm, n, group_size(p, Group::kDpShard)) * 2;
            if (fsdp2 && eg > Time::zero()) {
              expert_gathers += fsdp2_gather_copy_in(p, cm, l.expert_params, group_size(p, Group::kEdpShard)) * 2;
            }
          }
          if (p.grad_sync == GradSync::kDense) {
            reductions += reduce.time(n);
            expert_reductions += expert_reduce.time(l.expert_params);
          }
        }
      }
      Time busiest = std::max(gathers + expert_gathers, reductions + expert_reductions);
      // With link sharing both streams' collectives of one link (processor sharing conserves it:
      // train/task_graph.h) keep it busy for their sum: the shard group's, and the expert shard group's
      // on the same link or on its own.
      if (share_links) {
        const std::optional<LinkKind> dense_link = comm.link(Group::kDpShard);
        const std::optional<LinkKind> expert_link = comm.link(Group::kEdpShard);
        const Time dense_work = gathers + reductions;
        const Time expert_work = expert_gathers + expert_reductions;
        if (dense_link && expert_link && *dense_link == *expert_link) {
          busiest = std::max(busiest, dense_work + expert_work);
        } else {
          if (dense_link) busiest = std::max(busiest, dense_work);
          if (expert_link) busiest = std::max(busiest, expert_work);
        }
      }
      step_lb = std::max(step_lb, busiest * m);
    }
    chain_f += f0 + hop;
    chain_b += b0 + hop;
  }
  if (step_lb <= Time::zero()) return std::numeric_limits<double>::infinity();
  return d(p.gbs) * d(p.seq) / (step_lb.to_seconds() * d(p.gpus()));
}

PlannerResult plan_training(const model::ModelSpec& model, const ClusterSpec& cluster,
                            const compute::ComputeModel& compute, const PlannerOptions& o) {
  PlannerResult r;
  const hw::GpuSpec& gpu = *cluster.gpu;
  r.budget = o.budget.count() > 0 ? o.budget : gpu.memory;
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<Plan> plans = enumerate_plans(model, cluster, o);
  const size_t n = plans.size();
  std::vector<Candidate> cands(n);
  auto report = [&o](std::string_view phase, uint64_t done, uint64_t total) {
    if (o.progress) o.progress(phase, done, total);
  };

  EvaluateOptions eo = o.evaluate;
  eo.simulate = true;
  eo.step = StepOptions{};
  eo.step.compute_slowdown = o.evaluate.step.compute_slowdown;  // every plan's GPUs alike (--gpu-variability)
  eo.topology = nullptr;  // the search runs on the alpha-beta model; a topology re-ranks (phase 3)

  // A valid candidate's memory (the tensors': the search's, planner.h; the allocator's reservation is
  // added to the plans reported), bound and status against the budget; a throw sets kError.
  auto cost = [&](Candidate& c) {
    bool host_fits = true;
    try {
      const AlphaBetaComm comm(cluster, c.plan);
      const ModelCosts costs = model_costs(model, c.plan, compute, comm);
      const MemoryReport mem = memory_model(model, tensors_only(c.plan), costs, gpu, o.evaluate.memory, cluster.host_memory_per_gpu);
      c.peak = mem.peak;
      c.host_peak = mem.host_peak;
      host_fits = mem.host_fits;
      c.peak_stage = mem.peak_stage;
      c.memory = mem.stages[static_cast<size_t>(mem.peak_stage)].memory;
      c.bound_tokens_per_s_per_gpu =
          throughput_upper_bound(model, c.plan, costs, compute, comm, eo.step.share_links, eo.step.compute_slowdown);
    } catch (const std::exception& e) {
      set_error(c, e);
      return;
    }
    if (c.peak > r.budget) {
      c.status = CandidateStatus::kOverBudget;
      c.reason_key = "memory";
      c.reason = fmt::format("peak {:.2f} GiB on stage {} exceeds the budget of {:.2f} GiB by {:.2f} GiB",
                             c.peak.to_gib(), c.peak_stage, r.budget.to_gib(), (c.peak - r.budget).to_gib());
    } else if (!host_fits) {
      c.status = CandidateStatus::kOverBudget;
      c.reason_key = "host_memory";
      c.reason = fmt::format("offload holds {:.2f} GiB of host memory per GPU, more than the node's {:.2f} GiB per GPU",
                             c.host_peak.to_gib(), cluster.host_memory_per_gpu.to_gib());
    } else {
      c.status = CandidateStatus::kPruned;  // until simulated
    }
  };

  // Phase 1: validity and memory (evaluate() with simulate = false), and the throughput bound.
  report("filter", 0, n);
  parallel_for(
      n, 64, threads,
      [&](size_t i) {
        Candidate& c = cands[i];
        c.index = i;
        c.plan = plans[i];
        const std::vector<ConstraintError> errors = validate_plan(model, c.plan, o.gpus, gpu);
        if (!errors.empty()) {
          c.status = CandidateStatus::kInvalid;
          c.reason_key = errors.front().key;
          c.reason = errors.front().message;
          return;
        }
        cost(c);
      },
      [&](size_t done) { report("filter", done, n); });

  // Phase 1b: budget-filling variants (SearchSpace::partial_recompute, activation_offload,
  // optimizer_offload, unshard). For each candidate
  // `eligible` accepts, `pick` chooses a layer count k from `fits(k)` (the plan with `apply(plan, k)`
  // within the budget on the memory model) and the busiest pipeline rank's layers; -1: no variant. A
  // variant joins the candidates after them, in their order, and is costed like them.
  struct VariantRule {
    std::function<bool(const Candidate&)> eligible;
    std::function<void(Plan&, int64_t)> apply;
    std::function<int64_t(const std::function<bool(int64_t)>& fits, int64_t layers)> pick;
  };
  auto add_variants = [&](const VariantRule& rule) -> int64_t {
    const size_t from = cands.size();
    std::vector<int64_t> pick(from, -1);
    parallel_for(from, 64, threads, [&](size_t i) {
      const Candidate& c = cands[i];
      if (!rule.eligible(c)) return;
      try {
        const AlphaBetaComm comm(cluster, c.plan);
        const ModelCosts costs = model_costs(model, c.plan, compute, comm);
        auto fits_with = [&](int64_t k) {
          Plan p = tensors_only(c.plan);
          rule.apply(p, k);
          const MemoryReport m = memory_model(model, p, costs, gpu, o.evaluate.memory, cluster.host_memory_per_gpu);
          return m.peak <= r.budget && m.host_fits;
        };
        pick[i] = rule.pick(fits_with, max_stage_layers(c.plan, model.layers));
      } catch (const std::exception&) {
        // the plan's own evaluation reports it when simulated
      }
    });
    for (size_t i = 0; i < from; ++i) {
      if (pick[i] < 0) continue;
      Candidate v;
      v.index = cands.size();
      v.plan = cands[i].plan;
      rule.apply(v.plan, pick[i]);
      cands.push_back(std::move(v));
    }
    // Valid as their plans are (the layer counts are within the ranks' layers), and within the budget
    // by construction (the bisection's peak is cost's).
    parallel_for(cands.size() - from, 64, threads, [&](size_t k) { cost(cands[from + k]); });
    return static_cast<int64_t>(cands.size() - from);
  };

  // Partial recompute: a plan without recompute that is over the budget, recomputing (full) the fewest
  // layers per pipeline rank that bring it within (Megatron's --recompute-num-layers; the rest keep
  // their activations). The peak falls with each layer from one on (the first adds the recomputed
  // layer's working set), and k = all is the enumerated full-recompute plan: the smallest k in
  // [1, layers - 1] that fits, by bisection on "does not fit".
  if (o.space.partial_recompute) {
    r.counts.partial_recompute = add_variants(VariantRule{
        [](const Candidate& c) {
          return c.status == CandidateStatus::kOverBudget && c.plan.recompute == Recompute::kNone;
        },
        [](Plan& p, int64_t k) {
          p.recompute = Recompute::kFull;
          p.recompute_layers = k;
        },
        smallest_fitting_count});
  }
  // Activation offload: a single-stage plan without recompute or offload that is over the budget,
  // offloading the first K layers' activations, the smallest K in [1, layers - 1] that fits. Each layer
  // offloaded takes its saved activations off the GPU but for the two layers' worth in flight
  // (memory.h), so the peak does not grow with K: bisection on "does not fit", as above.
  if (o.space.activation_offload) {
    r.counts.activation_offload = add_variants(VariantRule{
        [](const Candidate& c) {
          return c.status == CandidateStatus::kOverBudget && c.plan.pp == 1 && c.plan.recompute == Recompute::kNone &&
                 !c.plan.activation_offload;
        },
        [](Plan& p, int64_t k) {
          p.activation_offload = true;
          p.offload_layers = k;
        },
        smallest_fitting_count});
  }
  // Optimizer offload: a sharded plan over the budget with the smallest share of its optimizer on the
  // host that fits, in steps of 1 / kOptimizerOffloadSteps (k steps: fraction k / steps; the GPU's
  // share of the optimizer memory falls with k): the same bisection over k in [1, steps].
  if (o.space.optimizer_offload) {
    r.counts.optimizer_offload = add_variants(VariantRule{
        [](const Candidate& c) {
          return c.status == CandidateStatus::kOverBudget && c.plan.sharding != Sharding::kNone &&
                 !c.plan.optimizer_offload;
        },
        [](Plan& p, int64_t k) {
          p.optimizer_offload = true;
          p.optimizer_offload_fraction = static_cast<double>(k) / static_cast<double>(kOptimizerOffloadSteps);
        },
        [](const std::function<bool(int64_t)>& fits, int64_t) {
          return smallest_fitting_count(fits, kOptimizerOffloadSteps + 1);
        }});
  }
  // Selective unsharding: a ZeRO-3 plan within the budget keeping the most layers per pipeline rank
  // gathered that still fit (the peak grows with each; none kept fits: the candidate itself).
  if (o.space.unshard) {
    r.counts.unsharded = add_variants(VariantRule{
        [](const Candidate& c) {
          return c.status == CandidateStatus::kPruned && c.plan.fsdp_reshards() &&
                 group_size(c.plan, Group::kDpShard) > 1 && c.plan.unsharded_layers == 0;
        },
        [](Plan& p, int64_t k) { p.unsharded_layers = k; },
        [](const std::function<bool(int64_t)>& fits, int64_t layers) -> int64_t {
          const int64_t k = last_true(0, layers, fits);
          return k >= 1 ? k : -1;
        }});
  }

  std::vector<size_t> fitting;
  for (const Candidate& c : cands) {
    if (c.status == CandidateStatus::kPruned) fitting.push_back(c.index);
  }

  // Phase 2: simulate the plans within the budget, highest bound first, in rounds.
  std::sort(fitting.begin(), fitting.end(), [&](size_t a, size_t b) {
    const double x = cands[a].bound_tokens_per_s_per_gpu, y = cands[b].bound_tokens_per_s_per_gpu;
    return x != y ? x > y : a < b;
  });
  auto simulate = [&](size_t i) {
    Candidate& c = cands[i];
    TrainResult t;
    try {
      t = evaluate(model, tensors_only(c.plan), cluster, compute, eo);
    } catch (const std::exception& e) {
      set_error(c, e);
      return;
    }
    record_run(c, t);
  };
  const uint64_t total = fitting.size();
  uint64_t settled = 0;  // simulated or pruned
  report("simulate", 0, total);
  // The pruning keeps the plans that can enter the top `keep`: K, or on a topology as many as phase 3
  // re-simulates if that is more.
  const size_t keep = o.top_k == 0 ? 0 : std::max(o.top_k, flow_rerank_count(o));
  std::vector<double> best;  // min-heap of the `keep` best throughputs so far
  Staircase staircase;
  size_t pos = 0;
  while (pos < fitting.size()) {
    const double kth = keep == 0              ? std::numeric_limits<double>::infinity()
                       : best.size() < keep ? -std::numeric_limits<double>::infinity()
                                             : best.front();
    std::vector<size_t> round;
    while (pos < fitting.size() && (!o.prune || round.size() < kRoundSize)) {
      const size_t i = fitting[pos++];
      const Candidate& c = cands[i];
      if (o.prune && c.bound_tokens_per_s_per_gpu < kth && staircase.best_at_most(c.peak) > c.bound_tokens_per_s_per_gpu) {
        ++settled;
        continue;  // stays kPruned
      }
      round.push_back(i);
    }
    // Longest first (a simulation's cost grows with its tasks: stages x chunks x micro-batches, per
    // layer with ZeRO-3), so that the round does not end waiting on one long simulation.
    auto tasks = [&](size_t i) {
      const Plan& p = cands[i].plan;
      const int64_t per_layer = p.fsdp_reshards() ? max_stage_layers(p, model.layers) / p.vp : 1;
      return p.pp * p.vp * p.microbatches() * per_layer;
    };
    std::stable_sort(round.begin(), round.end(), [&](size_t a, size_t b) { return tasks(a) > tasks(b); });
    parallel_for(round.size(), 1, threads, [&](size_t k) { simulate(round[k]); },
                 [&](size_t done) { report("simulate", settled + done, total); });
    settled += round.size();
    for (size_t i : round) {
      const Candidate& c = cands[i];
      if (c.status != CandidateStatus::kSimulated) continue;
      staircase.add(c.peak, c.tokens_per_s_per_gpu);
      if (keep > 0) {
        best.push_back(c.tokens_per_s_per_gpu);
        std::push_heap(best.begin(), best.end(), std::greater<>());
        if (best.size() > keep) {
          std::pop_heap(best.begin(), best.end(), std::greater<>());
          best.pop_back();
        }
      }
    }
  }
  report("simulate", total, total);

  // Results, with full tie-breaks.
  std::vector<const Candidate*> sim, over;
  std::map<std::string, ReasonCount> reasons;
  for (const Candidate& c : cands) {
    if (c.status == CandidateStatus::kSimulated) {
      sim.push_back(&c);
      if (c.tokens_per_s_per_gpu > c.bound_tokens_per_s_per_gpu * (1.0 + 1e-9)) ++r.bound_violations;
    }
    if (c.status == CandidateStatus::kPruned) ++r.counts.pruned;
    if (c.status == CandidateStatus::kInvalid) ++r.counts.invalid;
    if (c.status == CandidateStatus::kError) ++r.counts.errors;
    if (c.status == CandidateStatus::kOverBudget) {
      ++r.counts.over_budget;
      // The over-budget lists rank GPU memory; plans over the host's memory are counted under their
      // reason (host_memory) only.
      if (c.reason_key == "memory") over.push_back(&c);
    }
    if (c.status == CandidateStatus::kInvalid || c.status == CandidateStatus::kOverBudget ||
        c.status == CandidateStatus::kError) {
      ReasonCount& rc = reasons[c.reason_key];
      if (rc.count++ == 0) {
        rc.key = c.reason_key;
        rc.example = c.reason;
      }
    }
  }
  r.counts.enumerated = static_cast<int64_t>(cands.size());  // the plans and the variants (phase 1b)
  r.counts.simulated = static_cast<int64_t>(sim.size());
  r.counts.fits = r.counts.simulated + r.counts.pruned;
  std::sort(sim.begin(), sim.end(), [](const Candidate* a, const Candidate* b) { return faster(*a, *b); });
  if (o.evaluate.topology == nullptr) {
    for (size_t k = 0; k < std::min(o.top_k, sim.size()); ++k) r.top.push_back(*sim[k]);
  } else {
    // Phase 3: the search's best N plans (flow_rerank_count) simulated again with flow-level
    // communication and re-ranked by those runs (planner.h).
    const size_t n_flow = std::min(flow_rerank_count(o), sim.size());
    std::vector<std::optional<Candidate>> flow(n_flow);
    EvaluateOptions fo = o.evaluate;
    fo.simulate = true;
    fo.step = StepOptions{};
    fo.step.compute_slowdown = o.evaluate.step.compute_slowdown;
    report("flow", 0, n_flow);
    parallel_for(n_flow, 1, threads, [&](size_t j) {
      Candidate c = *sim[j];
      try {
        const TrainResult t = evaluate(model, c.plan, cluster, compute, fo);
        c.alpha_beta_tokens_per_s_per_gpu = c.tokens_per_s_per_gpu;
        record_run(c, t);
        flow[j] = std::move(c);
      } catch (const std::exception&) {
        // Left out of the re-ranking; the search simulated the plan without error.
      }
    }, [&](size_t done) { report("flow", done, n_flow); });
    std::vector<Candidate> ranked;
    for (std::optional<Candidate>& c : flow) {
      if (c) ranked.push_back(std::move(*c));
    }
    r.counts.flow_simulated = static_cast<int64_t>(ranked.size());
    std::sort(ranked.begin(), ranked.end(), faster);
    for (size_t k = 0; k < std::min(o.top_k, ranked.size()); ++k) r.top.push_back(ranked[k]);
  }
  std::sort(sim.begin(), sim.end(), [](const Candidate* a, const Candidate* b) {
    if (a->peak != b->peak) return a->peak < b->peak;
    return faster(*a, *b);
  });
  double front = -std::numeric_limits<double>::infinity();
  for (const Candidate* c : sim) {
    if (c->tokens_per_s_per_gpu > front) {
      r.pareto.push_back(*c);
      front = c->tokens_per_s_per_gpu;
    }
  }
  std::sort(over.begin(), over.end(), [](const Candidate* a, const Candidate* b) {
    if (a->bound_tokens_per_s_per_gpu != b->bound_tokens_per_s_per_gpu) {
      return a->bound_tokens_per_s_per_gpu > b->bound_tokens_per_s_per_gpu;
    }
    return a->index < b->index;
  });
  for (size_t k = 0; k < std::min(o.top_k, over.size()); ++k) r.fastest_over_budget.push_back(*over[k]);
  std::sort(over.begin(), over.end(), [](const Candidate* a, const Candidate* b) {
    return a->peak != b->peak ? a->peak < b->peak : a->index < b->index;
  });
  for (size_t k = 0; k < std::min(o.top_k, over.size()); ++k) r.closest_over_budget.push_back(*over[k]);
  // The reported plans' memory as the caching allocator reserves it (train/allocator_trace.h), traced
  // once per plan (the best plans are in the top K and on the front).
  std::map<size_t, Bytes> reserved;
  for (const auto* list : {&r.top, &r.pareto, &r.fastest_over_budget, &r.closest_over_budget}) {
    for (const Candidate& c : *list) reserved.emplace(c.index, c.peak);
  }
  std::vector<std::pair<const size_t, Bytes>*> slots;
  for (auto& e : reserved) slots.push_back(&e);
  if (o.base.allocator != AllocatorMode::kNone) {
    parallel_for(
        slots.size(), 1, threads,
        [&](size_t i) {
          const Plan& p = cands[slots[i]->first].plan;
          try {
            const AlphaBetaComm comm(cluster, p);
            slots[i]->second = memory_model(model, p, model_costs(model, p, compute, comm), gpu, o.evaluate.memory).peak;
          } catch (const std::exception&) {
            // Costed before without error; the tensors' figure stays.
          }
        },
        [](size_t) {});
  }
  for (auto* list : {&r.top, &r.pareto, &r.fastest_over_budget, &r.closest_over_budget}) {
    for (Candidate& c : *list) c.reserved = reserved.at(c.index);
  }
  for (auto& [key, rc] : reasons) r.reasons.push_back(std::move(rc));
  if (o.keep_candidates) r.candidates = std::move(cands);
  std::stable_sort(r.reasons.begin(), r.reasons.end(),
                   [](const ReasonCount& a, const ReasonCount& b) { return a.count > b.count; });
  return r;
}

}  // namespace orrery::train
