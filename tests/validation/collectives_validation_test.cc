// Validation of the calibrated NCCL model (coll/nccl_model.h) against real A100 measurements (vidur's
// network profiles, shared/data/profiles/vidur/network) and the published figures of
// shared/validation/collectives.md. The protocol, the constants and the full error summary are in
// docs/collectives_validation.md.
//
// Protocol in one paragraph: the few constants of vidur_a100_calibration() are fit on the two-rank
// files of the DGX node only (all_reduce and send_recv at (2 workers, 2 per node) and (2, 1)); the
// test CalibrationIsTheFitOfTheTwoRankFiles redoes that fit from the CSVs. Every other configuration
// (all-reduce over 4, 8 and 16 ranks, inside a node and across two; the pairwise-NVLink node) is
// predicted, never fit. For each configuration the test prints size, measured median, predicted time
// and error, then the median |error| over sizes >= 1 MiB, and fails when that median exceeds the
// configuration's bound: 10%, the target, except for the configurations listed with a reason in
// kConfigs (docs/collectives_validation.md explains each).
//
// Data: read from $ORRERY_SHARED_DIR/data/profiles/vidur/network; skipped with a reason when absent.
// Speed: every 8th size of each file is simulated ($ORRERY_VALIDATION_STRIDE overrides; 1 = all).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "coll/nccl_model.h"
#include "net/topology_builders.h"

namespace orrery::coll {
namespace {

constexpr double kMiB = 1048576.0;

// ---- reading vidur's CSVs --------------------------------------------------------------------------

struct Point {
  int64_t size = 0;       // bytes
  double median_ms = 0;   // mean of the `median` column over duplicate rows of the same size
};
using Series = std::vector<Point>;                        // by increasing size
using Profile = std::map<std::pair<int32_t, int32_t>, Series>;  // (num_workers, devices_per_node)

std::optional<std::filesystem::path> network_dir() {
  const char* shared = std::getenv("ORRERY_SHARED_DIR");
  if (shared == nullptr) return std::nullopt;
  const std::filesystem::path dir = std::filesystem::path(shared) / "data/profiles/vidur/network";
  if (!std::filesystem::is_directory(dir)) return std::nullopt;
  return dir;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(cell);
  return out;
}

// Reads one vidur network file. The column of interest is time_stats.<collective>.median (ms).
Profile read_profile(const std::filesystem::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot open " << file;
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv(line);
  auto column = [&](const std::string& suffix) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i].size() >= suffix.size() && header[i].compare(header[i].size() - suffix.size(), suffix.size(), suffix) == 0) {
        return i;
      }
    }
    ADD_FAILURE() << file << ": no column ending in '" << suffix << "'";
    return size_t{0};
  };
  const size_t c_median = column(".median");
  const size_t c_workers = column("num_workers");
  const size_t c_size = column("size");
  const size_t c_per_node = column("devices_per_node");
  std::map<std::pair<int32_t, int32_t>, std::map<int64_t, std::pair<double, int>>> sums;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv(line);
    const auto key = std::make_pair(std::stoi(f[c_workers]), std::stoi(f[c_per_node]));
    auto& cell = sums[key][std::stoll(f[c_size])];
    cell.first += std::stod(f[c_median]);
    cell.second += 1;
  }
  Profile p;
  for (const auto& [key, by_size] : sums) {
    for (const auto& [size, sum] : by_size) p[key].push_back(Point{size, sum.first / sum.second});
  }
  return p;
}

// ---- the measured systems as topologies ----------------------------------------------------------

// vidur's a100_dgx node: DGX A100 (catalog dgx-a100): NVSwitch, A100 NVLink 3 at 300 GB/s per direction,
// one HDR NIC (25 GB/s) per GPU behind PCIe Gen4 (32 GB/s). `g` GPUs used per machine.
net::Topology dgx_a100(int32_t machines, int32_t g) {
  net::FatTreeSpec s;
  s.machines = machines;
  s.gpus_per_machine = g;
  s.intra_node = hw::IntraNode::kNvswitch;
  s.scaleup_bandwidth = Bandwidth(300e9);
  s.pcie_bandwidth = Bandwidth(32e9);
  s.nic_bandwidth = Bandwidth(25e9);
  return net::fat_tree(s);
}

// vidur's a100_pairwise_nvlink node (Azure NC96ads_A100_v4 type): A100 PCIe cards, GPUs 0-1 and 2-3
// joined by an NVLink bridge (NVIDIA A100 PCIe datasheet: 600 GB/s bidirectional, 300 GB/s per
// direction), every other pair through the host over PCIe Gen4 x16 (32 GB/s). Its network is not
// InfiniBand and is not calibrated (see kConfigs); it is built like the DGX's for the record.
net::Topology pairwise_a100(int32_t machines, int32_t g) {
  net::FatTreeSpec s;
  s.machines = machines;
  s.gpus_per_machine = g;
  s.intra_node = hw::IntraNode::kNvlinkPairs;
  s.scaleup_bandwidth = Bandwidth(300e9);
  s.pcie_bandwidth = Bandwidth(32e9);
  s.nic_bandwidth = Bandwidth(25e9);
  return net::fat_tree(s);
}

// ---- configurations ------------------------------------------------------------------------------

enum class Role { kFit, kPredicted, kInformational };
std::string_view role_name(Role r) {
  switch (r) {
    case Role::kFit: return "fit";
    case Role::kPredicted: return "predicted";
    case Role::kInformational: return "informational";
  }
  return "?";
}

struct Config {
  const char* node;  // "a100_dgx" | "a100_pairwise_nvlink"
  const char* file;  // "all_reduce.csv" | "send_recv.csv"
  int32_t workers;
  int32_t per_node;
  Role role;
  double bound;      // the median |error| over sizes >= 1 MiB must not exceed this
  const char* note;  // why the bound is not the 10% target, if it is not
};

constexpr double kTarget = 0.10;

const std::vector<Config>& configs() {
  static const std::vector<Config> kConfigs = {
      {"a100_dgx", "send_recv.csv", 2, 2, Role::kFit, kTarget, ""},
      {"a100_dgx", "send_recv.csv", 2, 1, Role::kFit, kTarget, ""},
      {"a100_dgx", "all_reduce.csv", 2, 2, Role::kFit, kTarget, ""},
      {"a100_dgx", "all_reduce.csv", 2, 1, Role::kFit, kTarget, ""},
      {"a100_dgx", "all_reduce.csv", 4, 4, Role::kPredicted, kTarget, ""},
      {"a100_dgx", "all_reduce.csv", 8, 8, Role::kPredicted, kTarget, ""},
      {"a100_dgx", "all_reduce.csv", 4, 2, Role::kPredicted, kTarget, ""},
      {"a100_dgx", "all_reduce.csv", 8, 4, Role::kPredicted, kTarget, ""},
      {"a100_dgx", "all_reduce.csv", 16, 8, Role::kPredicted, kTarget, ""},
      {"a100_pairwise_nvlink", "all_reduce.csv", 2, 2, Role::kPredicted, kTarget, ""},
      {"a100_pairwise_nvlink", "all_reduce.csv", 4, 4, Role::kPredicted, kTarget, ""},
      {"a100_pairwise_nvlink", "send_recv.csv", 2, 2, Role::kPredicted, kTarget, ""},
      {"a100_pairwise_nvlink", "send_recv.csv", 2, 1, Role::kInformational, 0,
       "different, uncalibrated inter-node fabric (no InfiniBand on this node type)"},
  };
  return kConfigs;
}

int stride() {
  const char* s = std::getenv("ORRERY_VALIDATION_STRIDE");
  if (s == nullptr) return 8;
  return std::max(1, std::atoi(s));
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Summary {
  double median_1mib = 0;  // median |error| over sizes >= 1 MiB
  double max_1mib = 0;
  double median_all = 0;
  double max_all = 0;
  size_t points = 0;
};

Summary validate(const Config& c, const Series& series, std::ostream& out) {
  const bool dgx = std::string_view(c.node) == "a100_dgx";
  const int32_t machines = c.workers / c.per_node;
  const net::Topology topo = dgx ? dgx_a100(machines, c.per_node) : pairwise_a100(machines, c.per_node);
  const Op op = std::string_view(c.file) == "send_recv.csv" ? Op::kSendRecv : Op::kAllReduce;
  const NcclCalibration cal = vidur_a100_calibration();
  out << fmt::format("\n{}/{} (num_workers {}, devices_per_node {}), {}{}\n", c.node, c.file, c.workers, c.per_node,
                     role_name(c.role), c.note[0] != '\0' ? std::string(": ") + c.note : "");
  out << fmt::format("{:>12} {:>10} {:>12} {:>12} {:>8}  {}\n", "size (B)", "size MiB", "measured ms", "predicted ms",
                     "error %", "protocol");
  std::vector<double> e_all, e_1mib;
  const int k = stride();
  for (size_t i = 0; i < series.size(); ++i) {
    // Every k-th size, and always the largest.
    if (i % static_cast<size_t>(k) != 0 && i + 1 != series.size()) continue;
    const Point& p = series[i];
    const NcclPrediction pred = predict_nccl(topo, op, Bytes(p.size), cal);
    const double pred_ms = pred.time.to_ms();
    const double err = (pred_ms - p.median_ms) / p.median_ms;
    out << fmt::format("{:>12} {:>10.3f} {:>12.4f} {:>12.4f} {:>+8.1f}  {}\n", p.size, static_cast<double>(p.size) / kMiB,
                       p.median_ms, pred_ms, 100 * err, protocol_name(pred.protocol));
    e_all.push_back(std::abs(err));
    if (static_cast<double>(p.size) >= kMiB) e_1mib.push_back(std::abs(err));
  }
  Summary s;
  s.points = e_all.size();
  s.median_all = median(e_all);
  s.max_all = e_all.empty() ? 0 : *std::max_element(e_all.begin(), e_all.end());
  s.median_1mib = median(e_1mib);
  s.max_1mib = e_1mib.empty() ? 0 : *std::max_element(e_1mib.begin(), e_1mib.end());
  out << fmt::format("median |error|: {:.1f}% over sizes >= 1 MiB (max {:.1f}%), {:.1f}% over all sizes (max {:.1f}%), "
                     "{} sizes simulated\n",
                     100 * s.median_1mib, 100 * s.max_1mib, 100 * s.median_all, 100 * s.max_all, s.points);
  return s;
}

class VidurNetwork : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = network_dir();
    if (!dir_) GTEST_SKIP() << "vidur network profiles not found (set ORRERY_SHARED_DIR to the shared/ folder)";
  }
  Profile load(const char* node, const char* file) const { return read_profile(*dir_ / node / file); }
  std::optional<std::filesystem::path> dir_;
};

TEST_F(VidurNetwork, EveryConfigurationIsWithinItsBound) {
  std::map<std::string, Profile> cache;
  std::ostringstream summary;
  summary << fmt::format("\n{:<22} {:<15} {:>7} {:>8}  {:<13} {:>10} {:>10} {:>10} {:>10}  {}\n", "node", "file", "workers",
                         "per_node", "role", "med>=1MiB", "max>=1MiB", "med all", "max all", "verdict");
  for (const Config& c : configs()) {
    const std::string key = std::string(c.node) + "/" + c.file;
    if (!cache.count(key)) cache[key] = load(c.node, c.file);
    const auto it = cache[key].find({c.workers, c.per_node});
    ASSERT_NE(it, cache[key].end()) << key << " has no (" << c.workers << ", " << c.per_node << ") rows";
    std::ostringstream table;
    const Summary s = validate(c, it->second, table);
    std::cout << table.str();
    std::string verdict = "-";
    if (c.role != Role::kInformational) {
      verdict = s.median_1mib <= c.bound ? "pass" : "FAIL";
      if (c.bound > kTarget) verdict += fmt::format(" (bound {:.0f}%: known limitation)", 100 * c.bound);
      EXPECT_LE(s.median_1mib, c.bound) << key << " (" << c.workers << ", " << c.per_node << ")";
    }
    summary << fmt::format("{:<22} {:<15} {:>7} {:>8}  {:<13} {:>9.1f}% {:>9.1f}% {:>9.1f}% {:>9.1f}%  {}\n", c.node, c.file,
                           c.workers, c.per_node, role_name(c.role), 100 * s.median_1mib, 100 * s.max_1mib,
                           100 * s.median_all, 100 * s.max_all, verdict);
  }
  std::cout << summary.str();
}

}  // namespace
}  // namespace orrery::coll
