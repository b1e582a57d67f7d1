// Validation of the compute model (compute/compute_model.h) against real per-op GPU profiles:
// vidur's mlp.csv files (shared/data/profiles/vidur/compute/{a100,a40}/<org>/<model>/mlp.csv; fp16,
// one transformer layer sharded for tensor parallelism, CUDA kernel time per op, median column) and
// the sanity and decode-attention values of shared/validation/serving.md.
//
// Protocol: the Ampere constants were read off the A100 files (compute_model.cc says which rows);
// the A40 (GA102, GDDR6, a different SM count, bandwidth and resident-thread limit) uses the same
// constants and is the held-out check. Nothing is fit per model or per row.
// For every row the predicted per-layer linear-op total (ComputeModel::linear_layer_ops, summed over
// the op columns the file has, embedding excluded, as shared/data/profiles/README.md defines it) is
// compared with the sum of the measured medians. Target (the issue's): median |error| <= 10% per GPU
// and overall. The test prints, per (gpu, model, tp), the rows at power-of-two token counts and a
// summary line (median, p90 and max |error|); lines starting "SUMMARY |" and "OP |" form the tables
// of docs/compute.md. ORRERY_VALIDATION_VERBOSE=1 prints every row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/strings.h"
#include "compute/compute_model.h"
#include "io/catalog_loader.h"
#include "shared_dir.h"

namespace orrery::compute {
namespace {

namespace fs = std::filesystem;

// The op columns of vidur's mlp.csv (shared/data/profiles/README.md); "emb" is not a per-layer op.
const std::vector<std::string> kLinearOps = {"input_layernorm", "attn_pre_proj",  "attn_rope",
                                             "attn_post_proj",  "post_attention_layernorm", "mlp_up_proj",
                                             "mlp_act",         "mlp_down_proj",  "add"};

std::optional<fs::path> profiles_dir() { return validation::shared_path("data/profiles/vidur/compute"); }

const io::Catalog& catalog() {
  static const io::Catalog c = [] {
    io::CatalogOptions o;
    o.use_environment = false;
    return io::load_catalog(o);
  }();
  return c;
}

// vidur's GPU folder -> catalog GPU. The vidur A100 profiles are from the 80 GB SXM part.
std::string catalog_gpu(const std::string& vidur_gpu) {
  if (vidur_gpu == "a100") return "a100-sxm-80gb";
  if (vidur_gpu == "a40") return "a40";
  return "";
}

// vidur model folder -> ModelSpec: catalog entries where the repository ships one, otherwise built
// from the published config.json (cited beside each).
std::optional<model::ModelSpec> model_for(const std::string& vidur_model) {
  const std::map<std::string, std::string> in_catalog = {
      {"Llama-2-7b-hf", "llama2-7b"},   {"Llama-2-70b-hf", "llama2-70b"},
      {"Meta-Llama-3-8B", "llama3-8b"}, {"Meta-Llama-3-70B", "llama3-70b"},
      {"CodeLlama-34b-Instruct-hf", "codellama-34b"}};
  if (auto it = in_catalog.find(vidur_model); it != in_catalog.end()) {
    return catalog().model(it->second, Where{"compute_validation_test", 0, vidur_model});
  }
  if (vidur_model == "Qwen-72B") {
    // https://huggingface.co/Qwen/Qwen-72B/blob/main/config.json: hidden_size 8192, 64 heads (MHA,
    // kv_channels 128), 80 layers, intermediate_size 49152 = two 24576-wide matrices (w1, w2), i.e.
    // a gated MLP of width 24576; vocab 152064 (padded); bias on c_attn (q/k/v).
    model::ModelSpec s = model::ModelSpec::llama({80, 8192, 64, 64, 24576, 152064, 32768}, "qwen-72b");
    s.qkv_bias = true;
    s.validate();
    return s;
  }
  if (vidur_model == "internlm-20b") {
    // https://huggingface.co/internlm/internlm-20b/blob/main/config.json: hidden_size 5120, 40 heads
    // (MHA), 60 layers, intermediate_size 13824 (SwiGLU), vocab 103168, RMSNorm, RoPE.
    return model::ModelSpec::llama({60, 5120, 40, 40, 13824, 103168, 4096}, "internlm-20b");
  }
  if (vidur_model == "phi-2") {
    // https://huggingface.co/microsoft/phi-2/blob/main/config.json: hidden_size 2560, 32 heads,
    // 32 layers, intermediate_size 10240, plain MLP with gelu_new, LayerNorm, biases, vocab 51200.
    // (Its parallel attention/MLP block and partial rotary embedding are not expressible; the layer's
    // GEMM shapes are.)
    model::ModelSpec s = model::ModelSpec::llama({32, 2560, 32, 32, 10240, 51200, 2048}, "phi-2");
    s.mlp = model::MlpKind::kPlain;
    s.activation = model::Activation::kGeluTanh;
    s.norm = model::NormKind::kLayerNorm;
    s.qkv_bias = s.out_bias = s.mlp_bias = true;
    s.validate();
    return s;
  }
  return std::nullopt;
}

std::vector<std::string> split_csv(const std::string& line) {
  const std::vector<std::string_view> f = orrery::split_csv(line);
  return {f.begin(), f.end()};
}

struct Row {
  int64_t tokens = 0;
  int tp = 0;
  std::map<std::string, double> median_ms;  // the op columns present in the file
  int64_t n_head = 0, n_kv_head = 0, n_embd = 0, n_expanded_embd = 0;
};

std::vector<Row> read_mlp_csv(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot open " << file;
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  auto need = [&](const std::string& name) {
    auto it = col.find(name);
    if (it == col.end()) {
      ADD_FAILURE() << file << ": no column '" << name << "'";
      return size_t{0};
    }
    return it->second;
  };
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv(line);
    Row r;
    r.tokens = std::stoll(f[need("num_tokens")]);
    r.tp = std::stoi(f[need("num_tensor_parallel_workers")]);
    r.n_head = std::stoll(f[need("n_head")]);
    r.n_kv_head = std::stoll(f[need("n_kv_head")]);
    r.n_embd = std::stoll(f[need("n_embd")]);
    r.n_expanded_embd = std::stoll(f[need("n_expanded_embd")]);
    for (const std::string& op : kLinearOps) {
      auto it = col.find("time_stats." + op + ".median");
      if (it != col.end() && !f[it->second].empty()) r.median_ms[op] = std::stod(f[it->second]);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::floor(q * static_cast<double>(v.size() - 1)))];
}

bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Median |relative error| of the linear-op total on every row of every file of one GPU (or all).
TEST(ComputeValidation, LinearOpsOfVidurProfilesWithinTenPercent) {
  const auto dir = profiles_dir();
  if (!dir) GTEST_SKIP() << "shared/data/profiles/vidur/compute not found (set ORRERY_SHARED_DIR)";
  const bool verbose = std::getenv("ORRERY_VALIDATION_VERBOSE") != nullptr;

  std::map<std::string, std::vector<double>> errors_by_gpu;  // |error| of the total per row
  std::map<std::pair<std::string, std::string>, std::vector<double>> op_errors;  // (gpu, op) signed
  std::vector<double> all_errors;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(*dir)) {
    if (e.is_regular_file() && e.path().filename() == "mlp.csv") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no mlp.csv under " << *dir;

  std::cout << fmt::format("{:<5} {:<26} {:>3} {:>7} {:>12} {:>12} {:>8}\n", "gpu", "model", "tp", "tokens",
                           "measured ms", "predicted ms", "error %");
  for (const fs::path& file : files) {
    const std::string vidur_gpu = file.parent_path().parent_path().parent_path().filename().string();
    const std::string vidur_model = file.parent_path().filename().string();
    const std::string gpu_name = catalog_gpu(vidur_gpu);
    ASSERT_FALSE(gpu_name.empty()) << "no catalog GPU for vidur's '" << vidur_gpu << "'";
    const hw::GpuSpec& gpu = catalog().hw.get_gpu(gpu_name, Where{file.string(), 0, "gpu"});
    const auto spec = model_for(vidur_model);
    ASSERT_TRUE(spec.has_value()) << "no model spec for vidur's '" << vidur_model << "'";
    const ComputeModel cm(gpu);

    std::map<int, std::vector<double>> by_tp;
    for (const Row& r : read_mlp_csv(file)) {
      // The file's model columns must be the spec's (a wrong mapping fails here, not silently).
      ASSERT_EQ(r.n_head, spec->heads) << file;
      ASSERT_EQ(r.n_kv_head, spec->kv_heads) << file;
      ASSERT_EQ(r.n_embd, spec->hidden) << file;
      ASSERT_EQ(r.n_expanded_embd, spec->ffn) << file;
      const LayerOpTimes pred = cm.linear_layer_ops(*spec, r.tokens, r.tp, hw::DType::kFp16);
      double measured = 0.0;
      double predicted = 0.0;
      for (const auto& [op, ms] : r.median_ms) {
        measured += ms;
        const double p = pred.get(op).to_ms();
        ASSERT_GT(p, 0.0) << "model has no op '" << op << "'";
        predicted += p;
        if (ms > 0.0) op_errors[{vidur_gpu, op}].push_back((p - ms) / ms);
      }
      const double err = (predicted - measured) / measured;
      errors_by_gpu[vidur_gpu].push_back(std::fabs(err));
      all_errors.push_back(std::fabs(err));
      by_tp[r.tp].push_back(std::fabs(err));
      if (verbose || power_of_two(r.tokens)) {
        std::cout << fmt::format("{:<5} {:<26} {:>3} {:>7} {:>12.4f} {:>12.4f} {:>+8.1f}\n", vidur_gpu, vidur_model,
                                 r.tp, r.tokens, measured, predicted, 100.0 * err);
      }
    }
    for (const auto& [tp, errs] : by_tp) {
      std::cout << fmt::format("SUMMARY | {:<5} | {:<26} | tp {} | rows {:>4} | median |err| {:5.1f}% | p90 {:5.1f}% | max {:5.1f}%\n",
                               vidur_gpu, vidur_model, tp, errs.size(), 100.0 * median(errs),
                               100.0 * quantile(errs, 0.9), 100.0 * *std::max_element(errs.begin(), errs.end()));
    }
  }
  for (const auto& [key, errs] : op_errors) {
    std::vector<double> abs_errs;
    for (double e : errs) abs_errs.push_back(std::fabs(e));
    std::cout << fmt::format("OP | {:<5} | {:<24} | median |err| {:5.1f}% | median err {:+6.1f}%\n", key.first,
                             key.second, 100.0 * median(abs_errs), 100.0 * median(errs));
  }
  // Target (the issue's): median |error| of the linear-op total within 10%, per GPU and overall.
  constexpr double kTarget = 0.10;
  for (const auto& [g, errs] : errors_by_gpu) {
    const double m = median(errs);
    std::cout << fmt::format("SUMMARY | {:<5} | all models | rows {:>5} | median |err| {:5.1f}% | p90 {:5.1f}% | max {:5.1f}% (target {:.0f}%)\n",
                             g, errs.size(), 100.0 * m, 100.0 * quantile(errs, 0.9),
                             100.0 * *std::max_element(errs.begin(), errs.end()), 100.0 * kTarget);
    EXPECT_LE(m, kTarget) << g;
  }
  EXPECT_EQ(errors_by_gpu.size(), 2u) << "expected profiles of both the A100 and the A40";
  const double overall = median(all_errors);
  std::cout << fmt::format("SUMMARY | all   | all models | rows {:>5} | median |err| {:5.1f}%\n", all_errors.size(),
                           100.0 * overall);
  EXPECT_LE(overall, kTarget);
}

// shared/validation/serving.md: "A100, Llama-2-7B, TP1: the per-layer linear ops (embedding excluded)
// take 0.290 ms at 1 token, 0.383 ms at 128, 2.12 ms at 1,024 and 8.17 ms at 4,096 tokens". Target 15%.
TEST(ComputeValidation, ServingSanityValuesForLlama2OnA100WithinFifteenPercent) {
  const hw::GpuSpec& gpu = catalog().hw.get_gpu("a100-sxm-80gb", Where{});
  const model::ModelSpec spec = catalog().model("llama2-7b", Where{});
  const ComputeModel cm(gpu);
  const std::vector<std::pair<int64_t, double>> points = {{1, 0.290}, {128, 0.383}, {1024, 2.12}, {4096, 8.17}};
  for (const auto& [tokens, measured] : points) {
    const double predicted = cm.linear_layer_ops(spec, tokens, 1, hw::DType::kFp16).linear_total().to_ms();
    const double err = (predicted - measured) / measured;
    std::cout << fmt::format("sanity | tokens {:>5} | measured {:6.3f} ms | predicted {:6.3f} ms | error {:+5.1f}%\n",
                             tokens, measured, predicted, 100.0 * err);
    EXPECT_LE(std::fabs(err), 0.15) << tokens << " tokens";
  }
}

// shared/validation/serving.md: "Decode attention per layer measured on A100 for Llama-2-7B: batch 1
// with 1,728 KV tokens 0.025 ms; batch 64, 1,728: 1.017 ms; batch 128, 1,664: 1.752 ms." Each decode
// reads its KV: tokens * 32 kv heads * (128 + 128) * 2 B = 16 KiB per token, e.g. 64 * 1728 * 16 KiB
// = 1.81 GB, which at the streaming bandwidth (0.90 * 2,039 GB/s) takes 0.99 ms; batch 1 is limited
// by its 32 (sequence, head) blocks' requests in flight. Target 10%.
TEST(ComputeValidation, DecodeAttentionOnA100MatchesMeasuredPointsWithinTenPercent) {
  const hw::GpuSpec& gpu = catalog().hw.get_gpu("a100-sxm-80gb", Where{});
  const ComputeModel cm(gpu);
  const AttentionHeads heads{32, 32, 128, 128, 0, true};
  struct Point {
    int64_t batch;
    int64_t kv;
    double measured_ms;
  };
  for (const Point& p : {Point{1, 1728, 0.025}, Point{64, 1728, 1.017}, Point{128, 1664, 1.752}}) {
    const std::vector<AttentionSeq> seqs(static_cast<size_t>(p.batch), AttentionSeq{1, p.kv});
    const double predicted = cm.attention(seqs, heads, hw::DType::kFp16, Pass::kForward).to_ms();
    const double err = (predicted - p.measured_ms) / p.measured_ms;
    std::cout << fmt::format("decode | batch {:>3} | kv {:>5} | measured {:6.3f} ms | predicted {:6.3f} ms | error {:+5.1f}%\n",
                             p.batch, p.kv, p.measured_ms, predicted, 100.0 * err);
    EXPECT_LE(std::fabs(err), 0.10) << "batch " << p.batch;
  }
}

}  // namespace
}  // namespace orrery::compute
