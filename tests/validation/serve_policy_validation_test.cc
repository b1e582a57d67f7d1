// Policy-level validation of the serving schedulers against the WAIT paper's synthetic experiments
// (Ao, Luo, Simchi-Levi, Wang, arXiv 2504.11320; ../shared/validation/serving.md): Llama-2-7B on one
// A100-80GB with a KV capacity of 137,000 tokens (the paper's Vidur setup, ~1.37e5), Poisson arrivals,
// (a) one type prompt 512 / output 20, (b) 0.7 x (512, 20) + 0.3 x (512, 50).
//
// Paper (Vidur, its own time model; largest stable rate lambda*): (a) vLLM ~19, Sarathi ~22, WAIT ~23;
// (b) 18, 21, 22 req/s; WAIT the lowest latency for lambda 12..24 with the gap to Sarathi growing toward
// overload; no eviction under WAIT. orrery uses its own roofline time model, so the lambda* differ; the
// claims checked here are the ones that do not depend on the time model's constants:
//   1. lambda*(WAIT) >= lambda*(Sarathi) (the paper's stability ordering, WAIT's half);
//   2. WAIT never evicts (the thresholds keep M^pi <= C: sched_wait.cc), at every rate tried, including
//      overload;
//   3. WAIT's latency relative to Sarathi's falls toward overload, and just above Sarathi's lambda*
//      WAIT's mean latency is below Sarathi's;
//   4. the fluid calculator (serve/fluid.h) predicts the equilibrium of a policy that batches every
//      resident request in every iteration (the fluid model's own dynamics) under the linear time model
//      it assumes: mean iteration time = dT* and mean batch KV = M*.
// The other half of the ordering (Sarathi >= vLLM) is printed, not asserted here: with orrery's default
// time model (roofline, 1 ms of CPU per iteration) it does not hold (docs/serving.md, "Policy-level
// validation", explains why). PaperSimulatorSetup* below asserts the whole ordering in the setup the
// paper's numbers were made in.
//
// "Largest stable rate" (serve/capacity.h): the largest rate whose run of 20,000 requests has no upward
// queueing trend (least-squares slope of TTFT vs arrival time <= 0.005 s/s after a 25% warm-up),
// found by doubling from 8 req/s and bisection to 1%.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/atomic_file.h"
#include "io/catalog_loader.h"
#include "serve/capacity.h"
#include "serve/fluid.h"
#include "serve/workload_spec.h"
#include "shared_dir.h"

namespace orrery::serve {
namespace {

constexpr int64_t kKvTokens = 137000;      // the paper's Vidur KV capacity
constexpr int64_t kSearchRequests = 20000;  // per probe of the stability search
constexpr int64_t kTableRequests = 10000;   // per row of the latency table
constexpr uint64_t kSeed = 1;

struct Setup {
  io::Catalog catalog = io::load_catalog(io::CatalogOptions{{}, false});
  model::ModelSpec model = catalog.model("llama2-7b", {});
  const hw::GpuSpec* gpu = &catalog.hw.get_gpu("a100-sxm-80gb", {});
};

Setup& setup() {
  static Setup s;
  return s;
}

WorkloadFactory factory(const std::string& spec_text, int64_t requests) {
  const WorkloadSpec spec = parse_workload_spec(spec_text);
  return [spec, requests](double rate) { return make_workload(spec, rate, kSeed, requests); };
}

CapacityOptions options() {
  CapacityOptions o;
  o.base.kv_tokens_override = kKvTokens;
  o.start_rate = 8.0;
  o.rel_tol = 0.01;
  o.floor_rate = 1.0;
  o.ceiling_rate = 200.0;
  return o;
}

CapacityConfig config(const std::string& scheduler) {
  CapacityConfig c;
  c.gpu = setup().gpu;
  c.scheduler = scheduler;
  return c;
}

const std::vector<std::string> kSchedulers = {"vllm", "sarathi", "wait", "nested-wait"};

struct Experiment {
  std::string name;
  std::string workload;
  std::map<std::string, double> paper;  // lambda* in the paper
  std::vector<double> rates;            // latency table
};

void run_experiment(const Experiment& e) {
  const CapacityOptions opt = options();
  // Largest stable rates.
  std::map<std::string, CapacityResult> star;
  for (const std::string& s : kSchedulers) {
    star[s] = evaluate_capacity(setup().model, config(s), factory(e.workload, kSearchRequests), opt);
    ASSERT_TRUE(star[s].feasible) << s << ": " << star[s].reason;
  }
  std::printf("\n%s: largest stable rate (req/s), roofline, C = %lld tokens\n", e.name.c_str(),
              static_cast<long long>(kKvTokens));
  std::printf("%-12s %10s %10s %8s %12s %10s\n", "scheduler", "lambda*", "above it", "paper", "latency s", "evictions");
  for (const std::string& s : kSchedulers) {
    const CapacityResult& r = star[s];
    const auto p = e.paper.find(s);
    std::printf("%-12s %10.2f %10s %8s %12.2f %10lld\n", s.c_str(), r.rate, r.limit.empty() ? "-" : r.limit.c_str(),
                p == e.paper.end() ? "-" : fmt::format("{:.0f}", p->second).c_str(), r.at_capacity.e2e.mean(),
                static_cast<long long>(r.at_capacity.evictions));
  }
  // Claim 1: WAIT is at least as stable as Sarathi (1% bracket: compare the bracket ends).
  EXPECT_GE(star["wait"].rate, star["sarathi"].rate) << "the paper's ordering WAIT >= Sarathi";
  const bool sarathi_over_vllm = star["sarathi"].rate >= star["vllm"].rate;
  std::printf("ordering WAIT >= Sarathi: %s; Sarathi >= vLLM: %s (paper: both)\n",
              star["wait"].rate >= star["sarathi"].rate ? "holds" : "FAILS",
              sarathi_over_vllm ? "holds" : "does not hold with these defaults (see PaperSimulatorSetup*)");

  // Latency table.
  std::printf("\n%s: latency by rate (%lld requests, seed %llu)\n", e.name.c_str(), static_cast<long long>(kTableRequests),
              static_cast<unsigned long long>(kSeed));
  std::printf("%6s %-12s %10s %10s %10s %10s %8s\n", "rate", "scheduler", "mean s", "p90 s", "TTFT s", "evictions", "stable");
  std::map<std::string, std::map<double, RunMetrics>> table;
  for (const std::string& s : kSchedulers) {
    const CapacityProbe probe(setup().model, config(s), factory(e.workload, kTableRequests), opt);
    ASSERT_TRUE(probe.fits());
    for (double rate : e.rates) table[s][rate] = probe.run(rate);
  }
  for (double rate : e.rates) {
    for (const std::string& s : kSchedulers) {
      const RunMetrics& m = table[s][rate];
      std::printf("%6.1f %-12s %10.3f %10.3f %10.3f %10lld %8s\n", rate, s.c_str(), m.e2e.mean(), m.e2e.quantile(0.9),
                  m.ttft.mean(), static_cast<long long>(m.evictions), m.stable ? "yes" : "no");
    }
  }
  // Claim 2: WAIT never evicts, at any rate (overload included) and at its capacity.
  for (double rate : e.rates) EXPECT_EQ(table["wait"][rate].evictions, 0) << "WAIT evicted at rate " << rate;
  EXPECT_EQ(star["wait"].at_capacity.evictions, 0);
  // Claim 3: WAIT's latency relative to Sarathi's falls from the lowest rate to the first rate of the
  // table above Sarathi's lambda* at which WAIT is stable, where WAIT is faster.
  const double low = e.rates.front();
  double high = 0.0;
  for (double rate : e.rates) {
    if (rate > star["sarathi"].rate && table["wait"][rate].stable) {
      high = rate;
      break;
    }
  }
  ASSERT_GT(high, 0.0) << "no table rate above Sarathi's lambda* where WAIT is stable";
  const double ratio_low = table["wait"][low].e2e.mean() / table["sarathi"][low].e2e.mean();
  const double ratio_high = table["wait"][high].e2e.mean() / table["sarathi"][high].e2e.mean();
  std::printf("WAIT / Sarathi mean latency: %.2f at %.0f req/s, %.2f at %.0f req/s (paper: < 1 from 12 req/s)\n",
              ratio_low, low, ratio_high, high);
  EXPECT_LT(ratio_high, ratio_low);
  EXPECT_LT(ratio_high, 1.0);
}

TEST(ServePolicyValidation, OneTypePrompt512Output20) {
  run_experiment({"one type (512, 20)",
                  "prompt=512,output=20",
                  {{"vllm", 19}, {"sarathi", 22}, {"wait", 23}, {"nested-wait", 23}},
                  {12, 18, 22, 24, 26, 27, 30}});
}

TEST(ServePolicyValidation, MixOf512By20And512By50) {
  run_experiment({"mix 0.7 x (512, 20) + 0.3 x (512, 50)",
                  "type=0.7/512/20,type=0.3/512/50",
                  {{"vllm", 18}, {"sarathi", 21}, {"wait", 22}, {"nested-wait", 22}},
                  {12, 18, 22, 24, 25, 26, 28}});
}

// The paper's own simulator setup. The paper's numbers come from Vidur (its authors' repository,
// Luoxiaogan/vidur_or; docs/serving.md cites the files): per-op kernel times measured on an A100, no CPU
// time per iteration (Vidur's default, skip_cpu_overhead_modeling = True in vidur/config/config.py),
// vLLM with Vidur's default caps (128 sequences, 4,096 tokens: the authors' scripts pass none) and
// Sarathi with chunk 512 and 512 sequences (their scripts). orrery's counterpart: the vidur-profile
// execution-time model on the measured Llama-2-7B A100 table of ../shared (linear ops; attention and
// LM head from the roofline), CPU overhead 0, the same caps, C = 137,000. Claim: the paper's stability
// ordering WAIT >= Sarathi >= vLLM, each ">=" to the search's resolution (the 1% bracket: a lambda* is
// known to within rel_tol, so a pair within it cannot be ordered). With orrery's default CPU time per
// iteration (1 ms) the same check fails for Sarathi >= vLLM (vLLM 26.0 against Sarathi 25.5 req/s on
// the one-type workload): vLLM runs fewer, larger prefill iterations and pays that cost less often.
void run_paper_setup(const std::string& name, const std::string& workload, const std::map<std::string, double>& paper) {
  const std::string file = "data/profiles/vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv";
  const std::optional<std::filesystem::path> path = validation::shared_path(file);
  if (!path) GTEST_SKIP() << "../shared/" << file << " not found (set ORRERY_SHARED_DIR)";
  CapacityOptions o = options();
  o.exec_model = "vidur-profile";
  o.profile_text = std::make_shared<const std::string>(io::read_file(path->string()));
  o.profile_name = file;
  o.exec.cpu_base = Time::zero();
  o.exec.cpu_per_seq = Time::zero();
  std::map<std::string, CapacityResult> star;
  for (const std::string& s : kSchedulers) {
    CapacityConfig c = config(s);
    c.max_seqs = s == "sarathi" ? 512 : 128;
    star[s] = evaluate_capacity(setup().model, c, factory(workload, kSearchRequests), o);
    ASSERT_TRUE(star[s].feasible) << s << ": " << star[s].reason;
  }
  std::printf("\n%s: largest stable rate (req/s), the paper's simulator setup (measured linear ops, no CPU time)\n",
              name.c_str());
  std::printf("%-12s %10s %8s %12s %10s\n", "scheduler", "lambda*", "paper", "latency s", "evictions");
  for (const std::string& s : kSchedulers) {
    const CapacityResult& r = star[s];
    std::printf("%-12s %10.3f %8.0f %12.2f %10lld\n", s.c_str(), r.rate, paper.at(s), r.at_capacity.e2e.mean(),
                static_cast<long long>(r.at_capacity.evictions));
  }
  const double res = o.rel_tol;
  const double wait = star["wait"].rate, sarathi = star["sarathi"].rate, vllm = star["vllm"].rate;
  std::printf("Sarathi / vLLM lambda* %.3f (paper %.3f), WAIT / Sarathi %.3f (paper %.3f); resolution %.0f%%\n",
              sarathi / vllm, paper.at("sarathi") / paper.at("vllm"), wait / sarathi, paper.at("wait") / paper.at("sarathi"),
              100 * res);
  EXPECT_GE(wait, sarathi * (1.0 - res)) << "the paper's ordering WAIT >= Sarathi";
  EXPECT_GE(sarathi, vllm * (1.0 - res)) << "the paper's ordering Sarathi >= vLLM";
  EXPECT_EQ(star["wait"].at_capacity.evictions, 0);
}

TEST(ServePolicyValidation, PaperSimulatorSetupOneType) {
  run_paper_setup("one type (512, 20)", "prompt=512,output=20",
                  {{"vllm", 19}, {"sarathi", 22}, {"wait", 23}, {"nested-wait", 23}});
}

TEST(ServePolicyValidation, PaperSimulatorSetupMix) {
  run_paper_setup("mix 0.7 x (512, 20) + 0.3 x (512, 50)", "type=0.7/512/20,type=0.3/512/50",
                  {{"vllm", 18}, {"sarathi", 21}, {"wait", 22}, {"nested-wait", 22}});
}

// Per-iteration means after a warm-up (the first 10% of the run's iterations by start time).
class IterationMeans final : public SimObserver {
 public:
  void on_iteration(const IterationRecord& it) override { its_.push_back({it.start.to_seconds(), it.duration.to_seconds(), it.kv_tokens}); }
  void compute() {
    const double t0 = its_.front().start, t1 = its_.back().start;
    double d = 0.0, kv = 0.0;
    int64_t n = 0;
    for (const Item& i : its_) {
      if (i.start < t0 + 0.1 * (t1 - t0)) continue;
      d += i.duration;
      kv += static_cast<double>(i.kv);
      ++n;
    }
    duration = d / static_cast<double>(n);
    kv_tokens = kv / static_cast<double>(n);
  }
  double duration = 0.0, kv_tokens = 0.0;

 private:
  struct Item {
    double start, duration;
    int64_t kv;
  };
  std::vector<Item> its_;
};

TEST(ServePolicyValidation, FluidEquilibriumMatchesTheSimulationUnderItsOwnAssumptions) {
  // The fluid model's dynamics: every iteration batches every resident request (prefills of all the
  // prompts that arrived during the previous iteration plus one decode step of everyone else), and an
  // iteration costs d0 + d1 x (batch KV). Sarathi with unlimited caps (chunk, tokens, sequences) and
  // enough KV never to evict does exactly that; the linear model is the fluid's time model (d0, d1 =
  // this project's defaults for Llama-2-7B / A100). Derivation: the batch of iteration k + 1 holds the
  // A_{k-s} arrivals of iteration k - s at stage s, with E[A_m | dT_m] = lambda dT_m, so
  // E[dT] = d0 + d1 sum_s (l + s) lambda E[dT] => E[dT] = d0 / (1 - d1 W) = dT* exactly in steady state,
  // and E[batch KV] = (E[dT] - d0) / d1 = M*, provided the server never idles (an idle server starts a
  // batch of one arrival; with >= 8 requests in the system on average the probability of an empty
  // system is below e^-8 = 3e-4). Statistical error of the mean over ~3e4 iterations whose batch
  // composition decorrelates within L = 20-50 iterations: sd(dT) ~ d1 l sqrt(lambda L dT) ~ 6 ms at
  // lambda = 20, SE ~ 6 ms / sqrt(3e4 / 20) ~ 0.15 ms = 0.8% of dT*; the tolerance 3% on dT and 4% on M*
  // (M's relative error is dT's times dT / (dT - d0) ~ 1.4) is ~4 SE: a missing stage in w' (21 vs 20
  // stages: W 5% too large) moves dT* by load / (1 - load) x 5% > 10% and fails it.
  const double d0 = kWaitD0Ms * 1e-3, d1 = kWaitD1Ms * 1e-3;
  CapacityOptions o = options();
  o.base.kv_tokens_override = 10'000'000;
  o.exec_model = "linear";
  CapacityConfig c = config("sarathi");
  c.chunk_size = 1'000'000;
  c.max_batched_tokens = 1'000'000;
  c.max_seqs = 1'000'000;
  struct Case {
    std::string workload;
    double rate;
  };
  std::printf("\nfluid equilibrium vs simulation (linear model d0 = %.2f ms, d1 = %.3g ms/token, batch everything)\n",
              kWaitD0Ms, kWaitD1Ms);
  std::printf("%-34s %6s %6s %10s %10s %7s %10s %10s %7s\n", "workload", "rate", "load", "dT* ms", "sim ms", "err",
              "M* tok", "sim tok", "err");
  for (const Case& k : {Case{"prompt=512,output=20", 20.0}, Case{"prompt=512,output=20", 24.0},
                        Case{"type=0.7/512/20,type=0.3/512/50", 14.0}, Case{"type=0.7/512/20,type=0.3/512/50", 16.0}}) {
    const WorkloadFactory f = factory(k.workload, kSearchRequests);
    std::unique_ptr<RequestSource> pre = f(k.rate);
    const WorkloadStats st = workload_stats(*pre, kSearchRequests);
    const FluidResult fl = fluid_equilibrium(st.types, d0, d1, static_cast<double>(kKvTokens));
    const CapacityProbe probe(setup().model, c, f, o);
    IterationMeans means;
    const RunMetrics m = probe.run(k.rate, &means);
    means.compute();
    const double dt_err = means.duration / fl.dt_star_s - 1.0;
    const double m_err = means.kv_tokens / fl.memory_star - 1.0;
    std::printf("%-34s %6.1f %6.3f %10.3f %10.3f %6.1f%% %10.0f %10.0f %6.1f%%\n", k.workload.c_str(), k.rate, fl.load,
                fl.dt_star_s * 1e3, means.duration * 1e3, 100 * dt_err, fl.memory_star, means.kv_tokens, 100 * m_err);
    EXPECT_EQ(m.evictions, 0);
    EXPECT_LT(std::abs(dt_err), 0.03) << k.workload << " at " << k.rate;
    EXPECT_LT(std::abs(m_err), 0.04) << k.workload << " at " << k.rate;
  }
}

}  // namespace
}  // namespace orrery::serve
