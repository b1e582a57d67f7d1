// Validation of the compute model's Hopper constants against kernels measured on an H100 SXM
// (data/measured/h100-sxm/, measured by tools/gpu/training_kernels.py, tools/gpu/soak_layers.py and
// tools/gpu/attention_sweep.py on a lent NVIDIA H100 80GB HBM3, 700 W, PyTorch 2.11 / CUDA 13.0 /
// cuDNN 9.19, 2026-11-26; the folder's README.md gives the provenance and what each column means).
//
// What is compared (bf16, one GPU; the per-GPU shapes of rows E1-E9 and G1 of
// ../shared/validation/training.csv, a heads x sequence attention grid and a Llama-2-7B layer):
//   GEMM      ComputeModel::gemm of the same m x n x k (forward, input gradient, weight gradient, LM head,
//             serving shapes)
//   attention ComputeModel::attention, causal, cuDNN (the Hopper default) and FlashAttention-2 (PyTorch
//             SDPA's flash backend), forward and backward: the grid the constants were fit on and the
//             training shapes held out (attention_sweep.csv)
//   streaming ComputeModel::memory_bound of the fewest bytes the op moves (1 GiB copy, residual add)
//   layer     train::model_costs of one layer per GPU (eager elementwise kernels, no sequence
//             parallelism, as the measured layer ran): forward + input and weight gradient
// against measured medians taken at the clock the card holds at its 700 W limit under load, as in a
// training job: training_kernels_hot.csv (every kernel after 60 s of 8192^3 matmuls, 6 s more before
// each configuration, one call per timing), attention_sweep.csv (30 s preheat, 10 back-to-back calls
// per timing, so that the host's launch latency overlaps the GPU work) and soak_layers.csv (E1-E4
// layers cycled for 150 s). training_kernels_burst.csv, the same kernels on a cool card (up to 18%
// faster), and attention_sweep_single_call.csv are kept as data beside them. Single-call timings under
// kSingleCallMinMs carry the host's latency and are not scored. Each table prints predicted, measured
// and the signed error; the test fails when a group's median or worst |error| exceeds its target or
// bound (beside each check). Lines starting "H100 |" and "SUMMARY | H100" form the tables of
// docs/compute.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/strings.h"
#include "compute/calibration_fit.h"
#include "compute/compute_model.h"
#include "io/catalog_loader.h"
#include "model/op_inventory.h"
#include "train/comm_model.h"
#include "train/layer_costs.h"
#include "train/plan.h"

namespace orrery {
namespace {

namespace fs = std::filesystem;

fs::path data_dir() {
  const char* src = std::getenv("ORRERY_SOURCE_DIR");
  return fs::path(src != nullptr ? src : ".") / "data" / "measured" / "h100-sxm";
}

const io::Catalog& catalog() {
  static const io::Catalog c = [] {
    io::CatalogOptions o;
    o.use_environment = false;
    return io::load_catalog(o);
  }();
  return c;
}

std::vector<std::string> split_csv(const std::string& line) {
  const std::vector<std::string_view> f = orrery::split_csv(line);
  return {f.begin(), f.end()};
}

// A CSV file as rows of column name -> cell.
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot open " << file;
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv(line);
    EXPECT_EQ(cells.size(), header.size()) << file << ": " << line;
    std::map<std::string, std::string> r;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) r[header[i]] = cells[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

// The configurations of tools/gpu/training_kernels.py (rows of training.csv: GPT rows E1-E9, Llama G1).
struct Config {
  std::string name;
  int64_t hidden, heads, ffn, vocab, tp, seq, mbs, kv_heads;
  bool swiglu;
};
const std::vector<Config> kConfigs = {
    {"E1", 2048, 16, 8192, 131072, 1, 4096, 1, 16, false},   {"E2", 4096, 32, 16384, 131072, 2, 4096, 1, 32, false},
    {"E3", 6144, 48, 24576, 131072, 4, 4096, 1, 48, false},  {"E4", 7168, 56, 28672, 131072, 8, 4096, 1, 56, false},
    {"E5", 8192, 64, 32768, 131072, 8, 4096, 1, 64, false},  {"E6", 10240, 80, 40960, 131072, 8, 4096, 1, 80, false},
    {"E7", 12288, 96, 49152, 131072, 8, 4096, 1, 96, false}, {"E8", 16384, 128, 65536, 131072, 8, 4096, 1, 128, false},
    {"E9", 18432, 144, 73728, 131072, 8, 4096, 1, 144, false}, {"G1", 4096, 32, 14336, 128256, 1, 8192, 2, 8, true},
};

struct Errors {
  std::vector<double> abs_pct;
  void add(double predicted, double measured) { abs_pct.push_back(std::fabs(predicted / measured - 1.0) * 100.0); }
  double median() const {
    std::vector<double> v = abs_pct;
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0.0;
    return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
  double worst() const { return abs_pct.empty() ? 0.0 : *std::max_element(abs_pct.begin(), abs_pct.end()); }
};

void print_row(const std::string& group, const std::string& what, double predicted, double measured) {
  std::cout << fmt::format("H100 | {:<10} | {:<34} | {:>9.4f} | {:>9.4f} | {:>+7.1f}%\n", group, what, predicted, measured,
                           (predicted / measured - 1.0) * 100.0);
}

// The per-kernel targets (as for the A100 profiles, tests/validation/compute_validation_test.cc):
// median |error| <= 10% per group; the worst kernel within 12%, where met (printed either way).
constexpr double kMedianTarget = 10.0;
// Kernels timed one call at a time (training_kernels_hot.csv) are scored from this duration up.
constexpr double kSingleCallMinMs = 0.1;
constexpr double kWorstTarget = 12.0;

void print_summary(const std::string& group, const Errors& e) {
  std::cout << fmt::format("SUMMARY | H100 {:<10} | n {:>3} | median |error| {:5.1f}% | worst {:5.1f}% | {}\n", group,
                           e.abs_pct.size(), e.median(), e.worst(),
                           e.median() > kMedianTarget  ? "median target NOT MET"
                           : e.worst() > kWorstTarget  ? "median target met, worst NOT MET"
                                                       : "targets met");
}

class H100Kernels : public ::testing::Test {
 protected:
  void SetUp() override {
    rows_ = read_csv(data_dir() / "training_kernels_hot.csv");
    ASSERT_FALSE(rows_.empty());
  }
  const hw::GpuSpec& gpu() const { return catalog().hw.get_gpu("h100-sxm", Where{}); }
  std::vector<std::map<std::string, std::string>> rows_;
};

// GEMMs: every layer GEMM (forward, input-grad, weight-grad), LM head and serving-shape GEMM.
// Median held to the target. The worst is not met (2026-11-26: 26.6%, the 4096 x 4096 projection at
// 1-512 tokens, which cuBLAS runs slower per byte than the larger weight-streaming GEMMs; docs/compute.md):
// the bound only stops it from growing.
TEST_F(H100Kernels, GemmTimesMatchTheMeasuredKernels) {
  const compute::ComputeModel cm(gpu());
  Errors all;
  const auto check = [&](const std::string& what, double m, int64_t n, int64_t k, double measured) {
    compute::GemmShape g;
    g.m = m;
    g.n = n;
    g.k = k;
    const double predicted = cm.gemm(g, hw::DType::kBf16).to_ms();
    print_row("gemm", fmt::format("{} {}x{}x{}", what, m, n, k), predicted, measured);
    all.add(predicted, measured);
  };
  for (const auto& r : rows_) {
    const std::string op = r.at("op"), pass = r.at("pass");
    const bool layer_gemm = op == "qkv" || op == "proj" || op == "fc1" || op == "fc2" || op == "lm-head";
    if (!layer_gemm || pass == "weight-grad-fp32") continue;
    // One call on an idle queue: under 0.1 ms the host's launch latency (5-10 us) is 5% or more of it;
    // those shapes are timed back to back in attention_sweep.csv (below).
    if (std::stod(r.at("ms")) < kSingleCallMinMs) continue;
    check(r.at("config") + " " + op + " " + pass, std::stod(r.at("m")), std::stoll(r.at("n")), std::stoll(r.at("k")),
          std::stod(r.at("ms")));
  }
  // Weight-streaming GEMMs of a Llama-2-7B layer at 1-512 tokens, 10 back-to-back calls over four weight
  // copies in turn (the "gemm" rows of attention_sweep.csv: heads = tokens, seq = n x k).
  for (const auto& r : read_csv(data_dir() / "attention_sweep.csv")) {
    if (r.at("backend") != "gemm") continue;
    const std::string nk = r.at("seq");
    const size_t x = nk.find('x');
    ASSERT_NE(x, std::string::npos) << nk;
    check("L7B back-to-back", std::stod(r.at("heads")), std::stoll(nk.substr(0, x)), std::stoll(nk.substr(x + 1)),
          std::stod(r.at("ms")));
  }
  print_summary("gemm", all);
  EXPECT_GE(all.abs_pct.size(), 100u);
  EXPECT_LE(all.median(), kMedianTarget);
  EXPECT_LE(all.worst(), 30.0);
}

// Causal attention per SDPA backend, cuDNN (the calibration's Hopper default) and flash (PyTorch's
// FlashAttention-2), forward and backward, from attention_sweep.csv (10 back-to-back calls per timing, so
// the host's SDPA path overlaps the kernels). The grid (batch 1, heads 4-64 x sequence 512-16,384) is
// what the constants were fit on (compute::fit_attention, the search `orrery calibrate` runs; test
// BuiltInHopperAttentionIsTheFitOnTheGrid below), using its kernels of 0.3 ms and more (kFitMinMs); the training rows' shapes (7-18 heads at 4k; 2 x 32 heads over 8 kv heads at 8k) are
// held out. Targets: held out, median |error| <= 10% per backend and pass, met except FlashAttention-2's
// backward (10.0% on 2026-11-26: its bound, 12%, only stops growth); the fit set's worst kernels are
// reported under bounds that only stop growth. Grid kernels under 0.3 ms are printed, not scored: their floor (23 us forward,
// 150-280 us backward, whatever the shape) is the host's.
constexpr double kFitMinMs = 0.3;

TEST_F(H100Kernels, AttentionTimesMatchTheMeasuredKernels) {
  struct Backend {
    std::string label;
    compute::AttentionKernel kernel;
  };
  const auto sweep = read_csv(data_dir() / "attention_sweep.csv");
  ASSERT_FALSE(sweep.empty());
  for (const Backend& b : {Backend{"cudnn", compute::AttentionKernel::kCudnn},
                           Backend{"flash", compute::AttentionKernel::kFlashAttention2}}) {
    const compute::ComputeModel cm(gpu(), compute::with_attention_kernel(compute::default_calibration(gpu()), gpu(),
                                                                         b.kernel, Where{}));
    for (const compute::Pass pass : {compute::Pass::kForward, compute::Pass::kBackward}) {
      const std::string pass_name = pass == compute::Pass::kForward ? "forward" : "backward";
      Errors fit, held, host_bound;
      for (const auto& r : sweep) {
        if (r.at("backend") != b.label || r.at("pass") != pass_name) continue;
        const int64_t batch = std::stoll(r.at("batch")), h = std::stoll(r.at("heads")), seq = std::stoll(r.at("seq"));
        const compute::AttentionHeads heads{h, std::stoll(r.at("kv_heads")), 128, 128, 0, true};
        const std::vector<compute::AttentionSeq> seqs(static_cast<size_t>(batch), compute::AttentionSeq{seq, seq});
        const double predicted = cm.attention(seqs, heads, hw::DType::kBf16, pass).to_ms();
        const double measured = std::stod(r.at("ms"));
        const bool grid = batch == 1 && (h == 4 || h == 8 || h == 16 || h == 32 || h == 64);
        const std::string set = !grid ? "held out" : measured >= kFitMinMs ? "fit" : "host-bound";
        print_row("attention", fmt::format("{} {} {}x{}h s{} ({})", b.label, pass_name.substr(0, 3), batch, h, seq, set),
                  predicted, measured);
        (!grid ? held : measured >= kFitMinMs ? fit : host_bound).add(predicted, measured);
      }
      const std::string tag = b.label + "-" + pass_name.substr(0, 3);
      print_summary(tag + " fit", fit);
      print_summary(tag + " held", held);
      EXPECT_EQ(held.abs_pct.size(), 5u) << tag;
      EXPECT_GE(fit.abs_pct.size(), 10u) << tag;
      EXPECT_LE(held.median(), tag == "flash-bac" ? 12.0 : kMedianTarget) << tag;
      EXPECT_LE(held.worst(), 20.0) << tag;
      EXPECT_LE(fit.median(), kMedianTarget) << tag;
      EXPECT_LE(fit.worst(), 40.0) << tag;
    }
  }
}

// Where the built-in Hopper attention constants come from: compute::fit_attention (the grid search of
// `orrery calibrate`) on the grid kernels of attention_sweep.csv of kFitMinMs and more, the training
// shapes left out. The built-in rates must be what that fit gives, for both libraries and passes, so a
// constant edited without refitting, or a fit that no longer finds them, fails here.
TEST_F(H100Kernels, BuiltInHopperAttentionIsTheFitOnTheGrid) {
  const auto sweep = read_csv(data_dir() / "attention_sweep.csv");
  for (const auto& [label, kernel] : {std::pair<std::string, compute::AttentionKernel>{"cudnn", compute::AttentionKernel::kCudnn},
                                      {"flash", compute::AttentionKernel::kFlashAttention2}}) {
    std::vector<compute::MeasuredAttention> grid;
    for (const auto& r : sweep) {
      const int64_t batch = std::stoll(r.at("batch")), h = std::stoll(r.at("heads"));
      const bool in_grid = batch == 1 && (h == 4 || h == 8 || h == 16 || h == 32 || h == 64);
      if (r.at("backend") != label || !in_grid || std::stod(r.at("ms")) < kFitMinMs) continue;
      grid.push_back({batch, h, std::stoll(r.at("kv_heads")), std::stoll(r.at("seq")),
                      r.at("pass") == "forward" ? compute::Pass::kForward : compute::Pass::kBackward, std::stod(r.at("ms"))});
    }
    const compute::Calibration builtin = compute::with_attention_kernel(compute::default_calibration(gpu()), gpu(), kernel, Where{});
    compute::FitQuality q;
    compute::Calibration fit = compute::fit_attention(gpu(), builtin, grid, compute::Pass::kForward, hw::DType::kBf16, q);
    fit = compute::fit_attention(gpu(), fit, grid, compute::Pass::kBackward, hw::DType::kBf16, q);
    for (const auto& [pass, got, want] : {std::tuple<const char*, compute::AttentionRate, compute::AttentionRate>{
                                              "forward", fit.attention, builtin.attention},
                                          {"backward", fit.attention_backward, builtin.attention_backward}}) {
      std::cout << fmt::format("FIT | {} {}: e {:.2f} half {:g} c {:g} (built-in {:.2f} {:g} {:g})\n", label, pass, got.efficiency,
                               got.half_length, got.ctas_per_sm_half, want.efficiency, want.half_length, want.ctas_per_sm_half);
      EXPECT_DOUBLE_EQ(got.efficiency, want.efficiency) << label << " " << pass;
      EXPECT_DOUBLE_EQ(got.half_length, want.half_length) << label << " " << pass;
      EXPECT_DOUBLE_EQ(got.ctas_per_sm_half, want.ctas_per_sm_half) << label << " " << pass;
    }
  }
}

// Streaming kernels (a copy and the residual add: one read or two reads and a write per element, no
// arithmetic to speak of): bytes / (HBM x memory_efficiency). Median held to the target; the worst (E1's
// 25 us add, 22.4%: fixed costs beyond the 3 us launch) is not met, and its bound only stops growth.
TEST_F(H100Kernels, StreamingKernelsRunAtTheCalibratedBandwidth) {
  const compute::ComputeModel cm(gpu());
  Errors e;
  for (const auto& r : rows_) {
    if (r.at("op") != "d2d-copy" && r.at("op") != "residual-add") continue;
    if (std::stod(r.at("ms")) < kSingleCallMinMs) continue;
    const double predicted = cm.memory_bound(Bytes::from_double(std::stod(r.at("bytes")))).to_ms();
    const double measured = std::stod(r.at("ms"));
    print_row("streaming", fmt::format("{} {} {} MB", r.at("config"), r.at("op"), std::stod(r.at("bytes")) / 1e6), predicted,
              measured);
    e.add(predicted, measured);
  }
  print_summary("streaming", e);
  EXPECT_GE(e.abs_pct.size(), 5u);
  EXPECT_LE(e.median(), kMedianTarget);
  EXPECT_LE(e.worst(), 25.0);
}

// One whole GPT layer per GPU, forward + backward, eager, cuDNN attention: train::model_costs against
// the hot medians (training_kernels_hot.csv) and the steady-state medians at the power limit
// (soak_layers.csv, E1-E4, after the first 30 s); G1's Llama layer (eager RMSNorm and SwiGLU, GQA) with
// cuDNN and with FlashAttention-2, less the model's RoPE op (the measured layer has none). Targets: the
// issue's for training, median |error| <= 5% and worst <= 12%.
TEST_F(H100Kernels, LayerTimesMatchTheMeasuredLayers) {
  const hw::GpuSpec& g = gpu();
  std::map<std::string, std::vector<double>> soak;
  for (const auto& r : read_csv(data_dir() / "soak_layers.csv")) {
    if (std::stod(r.at("elapsed_s")) >= 30.0) soak[r.at("work")].push_back(std::stod(r.at("ms_per_iter")));
  }
  Errors hot, steady;
  for (const Config& c : kConfigs) {
    for (const auto& [label, kernel] : {std::pair<std::string, compute::AttentionKernel>{"cudnn", compute::AttentionKernel::kCudnn},
                                        {"flash", compute::AttentionKernel::kFlashAttention2}}) {
      // The GPT rows with cuDNN (Megatron's kernel); G1 with both (torchtitan runs SDPA's flash).
      if (!c.swiglu && label != "cudnn") continue;
      const compute::ComputeModel cm(g, compute::with_attention_kernel(compute::default_calibration(g), g, kernel, Where{}));
      model::GenericArch a;
      a.layers = 1;
      a.hidden = c.hidden;
      a.heads = c.heads;
      a.kv_heads = c.kv_heads;
      a.ffn = c.ffn;
      a.vocab = c.vocab;
      a.seq = c.seq;
      // The measured layer (tools/gpu/training_kernels.py): GPT with LayerNorm, no biases, no dropout;
      // Llama with torchtitan's eager RMSNorm and SwiGLU but no RoPE, whose op is taken out below.
      model::ModelSpec spec = c.swiglu ? model::ModelSpec::llama(a) : model::ModelSpec::gpt(a);
      spec.dropout = model::Dropout{};
      train::Plan p;
      p.tp = c.tp;
      p.mbs = c.mbs;
      p.gbs = c.mbs;
      p.seq = c.seq;
      p.eager = true;
      const train::ClusterSpec cluster = train::ClusterSpec::from_catalog(g, nullptr, 8);
      const train::AlphaBetaComm comm(cluster, p);
      const train::LayerCost& lc = train::model_costs(spec, p, cm, comm).layer.front();
      double predicted = (lc.fwd + lc.bwd_input + lc.bwd_weight).to_ms();
      if (c.swiglu) {
        model::InventoryOptions io;
        io.flash_attention = true;
        io.eager = true;
        const model::Shape shape = model::Shape::training(c.mbs, c.seq);
        for (const model::Op& op : model::layer_ops(spec, 0, shape, io)) {
          if (op.name != "attn.rope") continue;
          predicted -= (cm.op(op, shape, spec, hw::DType::kBf16, compute::Pass::kForward) +
                        cm.op(op, shape, spec, hw::DType::kBf16, compute::Pass::kBackward))
                           .to_ms();
        }
      }
      for (const auto& r : rows_) {
        if (r.at("config") != c.name || r.at("op") != "layer-" + label || r.at("pass") != "forward-backward") continue;
        const double measured = std::stod(r.at("ms"));
        print_row("layer", c.name + " " + label + " fwd+bwd hot", predicted, measured);
        hot.add(predicted, measured);
      }
      if (auto it = soak.find(c.name); it != soak.end()) {
        std::vector<double> v = it->second;
        std::sort(v.begin(), v.end());
        const double measured = v[v.size() / 2];
        print_row("layer", c.name + " fwd+bwd steady state", predicted, measured);
        steady.add(predicted, measured);
      }
    }
  }
  print_summary("layer-hot", hot);
  print_summary("layer-steady", steady);
  EXPECT_EQ(hot.abs_pct.size(), 11u);
  EXPECT_EQ(steady.abs_pct.size(), 4u);
  for (const Errors* e : {&hot, &steady}) {
    EXPECT_LE(e->median(), 5.0);
    EXPECT_LE(e->worst(), 12.0);
  }
}


// ---- Megatron's extra kernel costs and fp8 GEMMs (measured 2026-11-28: tools/gpu/megatron_extras.py and
// tools/gpu/fp8_gemms.py, both after a 60 s preheat, one call per timing; data/measured/h100-sxm/README.md).

double extras_ms(const std::vector<std::map<std::string, std::string>>& rows, const std::string& config,
                 const std::string& op, const std::string& variant, const std::string& pass) {
  for (const auto& r : rows) {
    if (r.at("config") == config && r.at("op") == op && r.at("variant") == variant && r.at("pass") == pass) {
      return std::stod(r.at("ms"));
    }
  }
  ADD_FAILURE() << "megatron_extras.csv has no row " << config << " " << op << " " << variant << " " << pass;
  return 1.0;
}

// Attention dropout (AttentionRate::dropout_pairs_per_s, compute_model.cc): the built-in rates are the
// pooled measurements of rows E1-E4's causal attention (16, 16, 12 and 7 heads of 128 at 4,096 tokens,
// each h x 4,096 x 4,097 / 2 mask elements), SDPA at dropout 0 and 0.1:
//   forward, cuDNN and FlashAttention-2: summed elements over the summed forward delta;
//   backward, cuDNN: E1 and E2, whose forward with dropout (0.42 ms) outlasts the host's gap before the
//     backward, so forward + backward less forward is the backward's GPU time; less the back-to-back
//     backward at dropout 0 (training_kernels_hot.csv);
//   backward, FlashAttention-2: the pooled forward + backward delta less the forward delta.
// Each is then checked per row against the measured delta: printed, not scored (the rates are the fit).
TEST_F(H100Kernels, BuiltInAttentionDropoutRatesAreTheMeasuredOnes) {
  const auto ex = read_csv(data_dir() / "megatron_extras.csv");
  ASSERT_FALSE(ex.empty());
  const double pairs = 4096.0 * 4097.0 / 2.0;
  const std::vector<std::pair<std::string, double>> heads = {{"E1", 16}, {"E2", 16}, {"E3", 12}, {"E4", 7}};
  const Where w{"<test>", 0, ""};
  const compute::Calibration cudnn = compute::default_calibration(gpu());
  const compute::Calibration fa2 =
      compute::with_attention_kernel(cudnn, gpu(), compute::AttentionKernel::kFlashAttention2, w);
  const auto pooled = [&](const std::string& lib, bool backward) {
    double elements = 0.0, seconds = 0.0;
    for (const auto& [cfg, h] : heads) {
      const double fwd = extras_ms(ex, cfg, "attention", lib + "-dropout0.1", "forward") -
                         extras_ms(ex, cfg, "attention", lib + "-dropout0", "forward");
      const double both = extras_ms(ex, cfg, "attention", lib + "-dropout0.1", "forward-backward") -
                          extras_ms(ex, cfg, "attention", lib + "-dropout0", "forward-backward");
      elements += h * pairs;
      seconds += (backward ? both - fwd : fwd) * 1e-3;
    }
    return elements / seconds;
  };
  double cudnn_bwd_elements = 0.0, cudnn_bwd_s = 0.0;
  for (const auto& [cfg, h] : {std::pair<std::string, double>{"E1", 16}, {"E2", 16}}) {
    double hot_backward = 0.0;
    for (const auto& r : rows_) {
      if (r.at("config") == cfg && r.at("op") == "attention-cudnn" && r.at("pass") == "backward") hot_backward = std::stod(r.at("ms"));
    }
    ASSERT_GT(hot_backward, 0.0) << cfg;
    const double with = extras_ms(ex, cfg, "attention", "cudnn-dropout0.1", "forward-backward") -
                        extras_ms(ex, cfg, "attention", "cudnn-dropout0.1", "forward");
    cudnn_bwd_elements += h * pairs;
    cudnn_bwd_s += (with - hot_backward) * 1e-3;
  }
  const double measured[4] = {pooled("cudnn", false), cudnn_bwd_elements / cudnn_bwd_s, pooled("flash", false),
                              pooled("flash", true)};
  const double builtin[4] = {cudnn.attention.dropout_pairs_per_s, cudnn.attention_backward.dropout_pairs_per_s,
                             fa2.attention.dropout_pairs_per_s, fa2.attention_backward.dropout_pairs_per_s};
  const char* names[4] = {"cudnn forward", "cudnn backward", "fa2 forward", "fa2 backward"};
  for (int i = 0; i < 4; ++i) {
    std::cout << fmt::format("dropout rate {:<15} measured {:.3e} pairs/s, built-in {:.3e}\n", names[i], measured[i], builtin[i]);
    EXPECT_NEAR(builtin[i] / measured[i], 1.0, 0.005) << names[i];  // rounded to three figures
  }
  // `orrery calibrate --extras` (compute::fit_attention_dropout) finds the two forward rates too.
  for (const auto& [lib, expected] : {std::pair<std::string, double>{"cudnn", builtin[0]}, {"flash", builtin[2]}}) {
    std::vector<compute::MeasuredDropout> kernels;
    for (const auto& [cfg, h] : heads) {
      kernels.push_back({static_cast<int64_t>(h), 4096, extras_ms(ex, cfg, "attention", lib + "-dropout0", "forward"),
                         extras_ms(ex, cfg, "attention", lib + "-dropout0.1", "forward")});
    }
    compute::FitQuality q;
    EXPECT_DOUBLE_EQ(compute::fit_attention_dropout(cudnn, kernels, q).attention.dropout_pairs_per_s, expected) << lib;
  }
  for (const auto& [cfg, h] : heads) {
    for (const auto& [lib, rate] : {std::pair<std::string, double>{"cudnn", builtin[0]}, {"flash", builtin[2]}}) {
      print_row("dropout", fmt::format("{} {} {:.0f} heads forward +ms", cfg, lib, h), h * pairs / rate * 1e3,
                extras_ms(ex, cfg, "attention", lib + "-dropout0.1", "forward") -
                    extras_ms(ex, cfg, "attention", lib + "-dropout0", "forward"));
    }
  }
}

// Gradient-accumulation fusion (Calibration::fp32_accumulate_exposure): the built-in exposure is the
// least-squares fraction f of x = 6 B x outputs / 3.35 TB/s that explains y = fused - bf16 over the 16
// weight-gradient GEMMs of rows E1-E4 (min sum (y - f x)^2: f = sum xy / sum x^2). Then the whole fused
// GEMM, ComputeModel::gemm + fp32_accumulate, against its measured time, scored from kSingleCallMinMs
// like the other single-call GEMMs: the per-kernel median target holds (6.4% on 2026-11-28); the
// worst does not (18.6%: E4's 896 x 7,168 projection, 0.11 ms in one call, where the plain bf16 GEMM is
// already 13% under its measured time), and its bound only stops it from growing.
TEST_F(H100Kernels, BuiltInFp32AccumulateExposureIsTheFitOnTheWgradGemms) {
  const auto ex = read_csv(data_dir() / "megatron_extras.csv");
  const compute::ComputeModel cm(gpu());
  const double bw = gpu().memory_bandwidth.bytes_per_second();
  double sxy = 0.0, sxx = 0.0;
  Errors fused;
  int shapes = 0;
  for (const auto& r : ex) {
    if (r.at("pass") != "weight-grad" || r.at("variant") != "fused-fp32") continue;
    const std::string cfg = r.at("config"), op = r.at("op");
    const compute::GemmShape g{std::stod(r.at("m")), std::stoll(r.at("n")), std::stoll(r.at("k")), 1};
    const double measured = std::stod(r.at("ms"));
    const double x = 6.0 * g.m * static_cast<double>(g.n) / bw;
    const double y = (measured - extras_ms(ex, cfg, op, "bf16", "weight-grad")) * 1e-3;
    sxy += x * y;
    sxx += x * x;
    ++shapes;
    const double predicted = (cm.gemm(g, hw::DType::kBf16) + cm.fp32_accumulate(g, hw::DType::kBf16)).to_ms();
    print_row("wgrad+fp32", fmt::format("{} {} {:.0f}x{}x{}", cfg, op, g.m, g.n, g.k), predicted, measured);
    if (measured >= kSingleCallMinMs) fused.add(predicted, measured);
  }
  ASSERT_EQ(shapes, 16);
  std::cout << fmt::format("fp32 accumulation exposure: least squares {:.4f}, built-in {:.2f}\n", sxy / sxx,
                           cm.calibration().fp32_accumulate_exposure);
  EXPECT_NEAR(cm.calibration().fp32_accumulate_exposure, sxy / sxx, 0.005);
  // `orrery calibrate --extras` (compute::fit_fp32_accumulate) finds the built-in value.
  std::vector<compute::MeasuredAccumulate> pairs;
  for (const auto& r : ex) {
    if (r.at("pass") != "weight-grad" || r.at("variant") != "fused-fp32") continue;
    pairs.push_back({std::stod(r.at("m")), std::stoll(r.at("n")), std::stoll(r.at("k")),
                     extras_ms(ex, r.at("config"), r.at("op"), "bf16", "weight-grad"), std::stod(r.at("ms"))});
  }
  compute::FitQuality fit_q;
  EXPECT_DOUBLE_EQ(compute::fit_fp32_accumulate(gpu(), cm.calibration(), pairs, hw::DType::kBf16, fit_q).fp32_accumulate_exposure,
                   cm.calibration().fp32_accumulate_exposure);
  print_summary("wgrad+fp32", fused);
  EXPECT_GE(fused.abs_pct.size(), 12u);
  EXPECT_LE(fused.median(), kMedianTarget);
  EXPECT_LE(fused.worst(), 20.0);
}

// fp8 GEMMs (Calibration::fp8_gemm_factor, 0.882 from mamf-finder's best-shape matmuls, not from these):
// held out. Each of rows F1-F6 of data/published/nemo_h100_fp8.csv runs its layer's 12 GEMMs (forward,
// input and weight gradient of qkv, proj, fc1, fc2) in bf16 and in fp8 (E4M3 forward, E4M3 x E5M2
// gradients, bf16 output) at the power-limited clock; the model's fp8 over bf16 time of the same 12
// shapes against the measured ratio, per row, and each fp8 GEMM's time against the model.
TEST_F(H100Kernels, Fp8GemmsHoldTheirPublishedShareOfBf16OnTheNemoShapes) {
  const auto rows = read_csv(data_dir() / "fp8_gemms.csv");
  ASSERT_FALSE(rows.empty());
  const compute::ComputeModel cm(gpu());
  std::map<std::string, std::array<double, 4>> by_config;  // measured bf16, fp8; predicted bf16, fp8 (ms)
  Errors ratio, fp8;
  for (const auto& r : rows) {
    if (r.at("config") == "square" || r.at("ms").empty()) continue;
    const compute::GemmShape g{std::stod(r.at("m")), std::stoll(r.at("n")), std::stoll(r.at("k")), 1};
    const bool is_fp8 = r.at("dtype") == "fp8";
    const double measured = std::stod(r.at("ms"));
    const double predicted = cm.gemm(g, is_fp8 ? hw::DType::kFp8 : hw::DType::kBf16).to_ms();
    auto& acc = by_config[r.at("config")];
    acc[is_fp8 ? 1 : 0] += measured;
    acc[is_fp8 ? 3 : 2] += predicted;
    if (is_fp8) {
      print_row("fp8 gemm", fmt::format("{} {} {} {:.0f}x{}x{}", r.at("config"), r.at("op"), r.at("pass"), g.m, g.n, g.k),
                predicted, measured);
      fp8.add(predicted, measured);
    }
  }
  ASSERT_EQ(by_config.size(), 6u);
  for (const auto& [cfg, a] : by_config) {
    print_row("fp8/bf16", cfg + " layer GEMMs, time ratio", a[3] / a[2], a[1] / a[0]);
    ratio.add(a[3] / a[2], a[1] / a[0]);
  }
  print_summary("fp8 gemm", fp8);
  print_summary("fp8/bf16", ratio);
  EXPECT_EQ(fp8.abs_pct.size(), 72u);
  EXPECT_LE(fp8.median(), kMedianTarget);
  EXPECT_LE(ratio.median(), kMedianTarget);
  EXPECT_LE(ratio.worst(), kWorstTarget);
}

}  // namespace
}  // namespace orrery
