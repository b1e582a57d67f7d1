#include "hw/hw_catalog.h"

#include "core/strings.h"

namespace orrery::hw {
namespace {

constexpr std::array<std::string_view, kAllDTypes.size()> kDTypeNames = {"fp64", "fp32", "tf32", "bf16",
                                                                          "fp16", "fp8",  "fp4",  "int8"};
constexpr std::array<std::string_view, 4> kIntraNodeNames = {"nvswitch", "pcie", "xgmi-mesh", "nvlink-pairs"};

template <class Map>
std::vector<std::string> keys_of(const Map& m) {
  std::vector<std::string> out;
  out.reserve(m.size());
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

template <class Map>
const typename Map::mapped_type* find_in(const Map& m, std::string_view name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

template <class Map>
const typename Map::mapped_type& get_in(const Map& m, std::string_view name, const Where& where,
                                        std::string_view kind) {
  if (const auto* v = find_in(m, name)) return *v;
  throw InputError(where, "unknown " + std::string(kind) + " '" + std::string(name) + "'", suggest(name, keys_of(m)));
}

}  // namespace

std::string_view dtype_name(DType d) { return kDTypeNames[static_cast<size_t>(d)]; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kDTypeNames.size(); ++i) {
    if (kDTypeNames[i] == name) return kAllDTypes[i];
  }
  return std::nullopt;
}

std::vector<std::string> dtype_names() { return {kDTypeNames.begin(), kDTypeNames.end()}; }

int dtype_bytes(DType d) {
  switch (d) {
    case DType::kFp64: return 8;
    case DType::kFp32:
    case DType::kTf32: return 4;
    case DType::kBf16:
    case DType::kFp16: return 2;
    case DType::kFp8:
    case DType::kFp4:
    case DType::kInt8: return 1;
  }
  return 0;
}

std::string_view intra_node_name(IntraNode k) { return kIntraNodeNames[static_cast<size_t>(k)]; }

std::optional<IntraNode> parse_intra_node(std::string_view name) {
  for (size_t i = 0; i < kIntraNodeNames.size(); ++i) {
    if (kIntraNodeNames[i] == name) return static_cast<IntraNode>(i);
  }
  return std::nullopt;
}

const GpuSpec* HwCatalog::find_gpu(std::string_view name) const { return find_in(gpus_, name); }
const NodeSpec* HwCatalog::find_node(std::string_view name) const { return find_in(nodes_, name); }
const InterconnectSpec* HwCatalog::find_interconnect(std::string_view name) const {
  return find_in(interconnects_, name);
}
const PriceSpec* HwCatalog::find_price(std::string_view gpu) const { return find_in(prices_, gpu); }

const GpuSpec& HwCatalog::get_gpu(std::string_view name, const Where& where) const {
  return get_in(gpus_, name, where, "GPU");
}
const NodeSpec& HwCatalog::get_node(std::string_view name, const Where& where) const {
  return get_in(nodes_, name, where, "node");
}
const InterconnectSpec& HwCatalog::get_interconnect(std::string_view name, const Where& where) const {
  return get_in(interconnects_, name, where, "interconnect");
}

std::vector<std::string> HwCatalog::gpu_names() const { return keys_of(gpus_); }
std::vector<std::string> HwCatalog::node_names() const { return keys_of(nodes_); }
std::vector<std::string> HwCatalog::interconnect_names() const { return keys_of(interconnects_); }

void HwCatalog::check_references() const {
  for (const auto& [name, node] : nodes_) {
    const Where w{node.origin, 0, "nodes." + name};
    get_gpu(node.gpu, w.with_key("gpu"));
    if (!node.nics.interconnect.empty()) get_interconnect(node.nics.interconnect, w.with_key("nics.interconnect"));
  }
  for (const auto& [gpu, price] : prices_) {
    get_gpu(gpu, Where{price.origin, 0, "prices." + gpu + ".gpu"});
  }
}

}  // namespace orrery::hw
