// Hardware specifications (GPUs, nodes, interconnects, prices) and the catalog that holds them.
//
// Specs are immutable values validated when read (io/catalog_loader.h parses the YAML files in
// catalog/ and the user's own files). Conventions, stated once:
//   - FLOP/s are dense peak figures from the vendor datasheet (sparsity figures halved).
//   - Link bandwidths are per direction (NVIDIA's "900 GB/s NVLink" for H100 is 450 GB/s each way).
//   - NIC bandwidth is the signalling data rate per port per direction (400 Gb/s NDR = 50 GB/s).
//   - Memory capacity is as marketed (decimal GB unless the vendor says GiB).
// Every entry records its `source` (document it was written from) and `origin` (catalog file it was
// read from), so a user override is visible in `orrery catalog show`.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/units.h"

namespace orrery::hw {

enum class DType { kFp64, kFp32, kTf32, kBf16, kFp16, kFp8, kFp4, kInt8 };
inline constexpr std::array kAllDTypes = {DType::kFp64, DType::kFp32, DType::kTf32, DType::kBf16,
                                          DType::kFp16, DType::kFp8,  DType::kFp4,  DType::kInt8};
std::string_view dtype_name(DType d);  // "bf16"
std::optional<DType> parse_dtype(std::string_view name);
std::vector<std::string> dtype_names();
int dtype_bytes(DType d);  // storage size: fp32 4, bf16 2, fp8 1, fp4 counts as 1 (packed pairs)

struct ScaleupLink {
  std::string technology;  // "NVLink 4", "Infinity Fabric"
  int links = 0;
  Bandwidth bandwidth_per_direction;  // per GPU, all links together
};

struct PcieLink {
  int generation = 0;
  int lanes = 16;
  Bandwidth bandwidth_per_direction;
};

// A GPU's path to its host memory where it is not PCIe (NVLink-C2C to a Grace CPU).
struct HostLink {
  std::string technology;             // "NVLink-C2C"
  Bandwidth bandwidth_per_direction;  // per GPU (a link shared by two GPUs: half of it)
};

// Pinned host<->device copies (cudaMemcpyAsync) reach about 80% of the link's per-direction rate: an A100
// on PCIe Gen4 x16 measures 25 of 32 GB/s (BaM's authors, github.com/ZaidQureshi/bam issue #54). Serving's
// KV-cache swap and training's activation and optimizer offload copy at this fraction.
inline constexpr double kHostCopyEfficiency = 0.8;

struct GpuSpec {
  std::string name;  // catalog id, e.g. "h100-sxm"
  std::string display_name;
  std::string vendor;
  std::string architecture;
  Bytes memory;
  Bandwidth memory_bandwidth;
  std::array<std::optional<FlopRate>, kAllDTypes.size()> peak_flops;  // indexed by DType
  std::optional<ScaleupLink> scaleup;
  PcieLink pcie;
  std::optional<HostLink> host_link;  // host-memory path other than PCIe; unset: PCIe
  Power tdp;                         // the product's board power (the power its figures assume)
  std::optional<Power> power_limit;  // a lower configured cap (e.g. 500 W on a 700 W part); unset: tdp
  std::string form_factor;
  std::string source;
  std::string origin;

  std::optional<FlopRate> peak(DType d) const { return peak_flops[static_cast<size_t>(d)]; }
  Power power() const { return power_limit ? *power_limit : tdp; }
  // Bandwidth of copies between this GPU's memory and its host's, per direction (activation and
  // optimizer offload): the host link where there is one, else PCIe.
  Bandwidth host_bandwidth() const { return host_link ? host_link->bandwidth_per_direction : pcie.bandwidth_per_direction; }
  // What pinned copies reach of it (kHostCopyEfficiency).
  Bandwidth host_copy_bandwidth() const { return host_bandwidth() * kHostCopyEfficiency; }
};

enum class IntraNode { kNvswitch, kPcie, kXgmiMesh, kNvlinkPairs };
std::string_view intra_node_name(IntraNode k);
std::optional<IntraNode> parse_intra_node(std::string_view name);

struct NicSpec {
  int count = 0;             // compute-fabric NICs per node
  std::string interconnect;  // id in the interconnect catalog
  Bandwidth bandwidth;       // per NIC, per direction
};

struct NodeSpec {
  std::string name;
  std::string display_name;
  std::string gpu;  // id in the GPU catalog
  int gpus_per_node = 0;
  int scaleup_domain_gpus = 0;  // GPUs sharing one NVLink/NVSwitch domain (72 for GB200 NVL72)
  IntraNode intra_node = IntraNode::kNvswitch;
  NicSpec nics;
  PcieLink pcie;
  Bytes host_memory;
  std::string cpus;
  std::string source;
  std::string origin;
};

struct InterconnectSpec {
  std::string name;
  std::string display_name;
  std::string kind;  // infiniband | roce | ethernet
  Bandwidth bandwidth;  // per port, per direction
  std::optional<Time> switch_latency;
  std::optional<Time> nic_latency;
  std::string source;
  std::string origin;
};

struct PriceSpec {
  std::string gpu;  // id in the GPU catalog
  double usd_per_gpu_hour = 0;
  std::string kind;  // on-demand | reserved | spot
  std::string provider;
  std::string date;  // YYYY-MM
  std::string source;
  std::string origin;
};

// Name-indexed collections. add_* replaces an entry of the same name (user files override built-ins);
// find_* returns nullptr when absent; get_* throws InputError naming `where` and the nearest names.
class HwCatalog {
 public:
  void add_gpu(GpuSpec g) { gpus_[g.name] = std::move(g); }
  void add_node(NodeSpec n) { nodes_[n.name] = std::move(n); }
  void add_interconnect(InterconnectSpec i) { interconnects_[i.name] = std::move(i); }
  void add_price(PriceSpec p) { prices_[p.gpu] = std::move(p); }

  const GpuSpec* find_gpu(std::string_view name) const;
  const NodeSpec* find_node(std::string_view name) const;
  const InterconnectSpec* find_interconnect(std::string_view name) const;
  const PriceSpec* find_price(std::string_view gpu) const;

  const GpuSpec& get_gpu(std::string_view name, const Where& where) const;
  const NodeSpec& get_node(std::string_view name, const Where& where) const;
  const InterconnectSpec& get_interconnect(std::string_view name, const Where& where) const;

  const std::map<std::string, GpuSpec, std::less<>>& gpus() const { return gpus_; }
  const std::map<std::string, NodeSpec, std::less<>>& nodes() const { return nodes_; }
  const std::map<std::string, InterconnectSpec, std::less<>>& interconnects() const { return interconnects_; }
  const std::map<std::string, PriceSpec, std::less<>>& prices() const { return prices_; }

  std::vector<std::string> gpu_names() const;
  std::vector<std::string> node_names() const;
  std::vector<std::string> interconnect_names() const;

  // Cross-references: every node's gpu and NIC interconnect and every price's gpu must exist.
  // Throws InputError naming the entry's origin file and key.
  void check_references() const;

 private:
  std::map<std::string, GpuSpec, std::less<>> gpus_;
  std::map<std::string, NodeSpec, std::less<>> nodes_;
  std::map<std::string, InterconnectSpec, std::less<>> interconnects_;
  std::map<std::string, PriceSpec, std::less<>> prices_;
};

}  // namespace orrery::hw
