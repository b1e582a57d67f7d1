#include "io/catalog_loader.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "io/atomic_file.h"

namespace orrery::io {
namespace {

// A minimal valid GPU entry; tests mutate one line at a time to exercise each error path.
constexpr const char* kGpuYaml = R"(gpus:
  - name: x100
    vendor: acme
    memory: 80 GiB
    memory_bandwidth: 3 TB/s
    flops:
      bf16: 1000 TFLOP/s
    pcie: {generation: 5, bandwidth_per_direction: 64 GB/s}
    tdp: 700 W
    source: "Acme X100 datasheet, 2030"
)";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

std::string error_of(const std::string& yaml) {
  Catalog c;
  try {
    add_catalog_yaml(c, yaml, "user.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CatalogYaml, ValidEntryIsReadWithUnits) {
  Catalog c;
  add_catalog_yaml(c, kGpuYaml, "user.yaml");
  const hw::GpuSpec* g = c.hw.find_gpu("x100");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->memory, Bytes::GiB(80));
  EXPECT_DOUBLE_EQ(g->memory_bandwidth.bytes_per_second(), 3e12);
  EXPECT_DOUBLE_EQ(g->peak(hw::DType::kBf16)->per_second(), 1e15);
  EXPECT_FALSE(g->peak(hw::DType::kFp8).has_value());
  EXPECT_EQ(g->origin, "user.yaml");
}

// host_link (optional): a GPU whose host path is not PCIe. Host copies then use it, at 80% of its rate
// (hw::kHostCopyEfficiency); without one they use PCIe's 64 GB/s at 80%, 51.2 GB/s.
TEST(CatalogYaml, HostLinkIsOptionalAndReplacesPcieForHostCopies) {
  Catalog c;
  add_catalog_yaml(c, kGpuYaml, "user.yaml");
  EXPECT_FALSE(c.hw.find_gpu("x100")->host_link.has_value());
  EXPECT_DOUBLE_EQ(c.hw.find_gpu("x100")->host_copy_bandwidth().bytes_per_second(), 51.2e9);
  Catalog d;
  add_catalog_yaml(d, replace(kGpuYaml, "    tdp: 700 W", "    host_link: {technology: NVLink-C2C, bandwidth_per_direction: 225 GB/s}\n    tdp: 700 W"),
                   "user.yaml");
  const hw::GpuSpec* g = d.hw.find_gpu("x100");
  ASSERT_TRUE(g->host_link.has_value());
  EXPECT_EQ(g->host_link->technology, "NVLink-C2C");
  EXPECT_DOUBLE_EQ(g->host_copy_bandwidth().bytes_per_second(), 180e9);
  const std::string bad = error_of(replace(kGpuYaml, "    tdp: 700 W", "    host_link: {technology: NVLink-C2C, bandwith: 225 GB/s}\n    tdp: 700 W"));
  EXPECT_NE(bad.find("user.yaml:9: gpus[0].host_link"), std::string::npos) << bad;
  EXPECT_NE(bad.find("bandwidth_per_direction"), std::string::npos) << bad;
}

TEST(CatalogYaml, MissingUnitNamesFileLineAndKey) {
  // memory is on line 4 of the document.
  EXPECT_EQ(error_of(replace(kGpuYaml, "80 GiB", "80")),
            "user.yaml:4: gpus[0].memory: '80' has no unit: expected a size with a unit such as '80 GiB'");
}

TEST(CatalogYaml, MisspelledKeySuggestsTheKnownOne) {
  const std::string e = error_of(replace(kGpuYaml, "    memory_bandwidth:", "    memory_bandwith:"));
  EXPECT_NE(e.find("user.yaml:5: gpus[0].memory_bandwith: unknown key 'memory_bandwith'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'memory_bandwidth'?"), std::string::npos) << e;
}

TEST(CatalogYaml, MissingRequiredKeyIsNamed) {
  const std::string e = error_of(replace(kGpuYaml, "    tdp: 700 W\n", ""));
  EXPECT_NE(e.find("gpus[0].tdp: missing required key 'tdp'"), std::string::npos) << e;
}

TEST(CatalogYaml, APowerLimitAboveTheTdpIsRejected) {
  const std::string e = error_of(replace(kGpuYaml, "    tdp: 700 W\n", "    tdp: 700 W\n    power_limit: 750 W\n"));
  EXPECT_NE(e.find("gpus[0].power_limit: a power limit of 750 W is above the tdp of 700 W"), std::string::npos) << e;
  const std::string z = error_of(replace(kGpuYaml, "    tdp: 700 W\n", "    tdp: 700 W\n    power_limit: 0 W\n"));
  EXPECT_NE(z.find("gpus[0].power_limit: must be positive"), std::string::npos) << z;
}

TEST(CatalogYaml, UnknownDtypeSuggestsNearest) {
  const std::string e = error_of(replace(kGpuYaml, "bf16: 1000", "bf61: 1000"));
  EXPECT_NE(e.find("user.yaml:7: gpus[0].flops.bf61: unknown dtype 'bf61'"), std::string::npos) << e;
}

TEST(CatalogYaml, ZeroAndNegativeSizesAreRejected) {
  EXPECT_NE(error_of(replace(kGpuYaml, "80 GiB", "0 GiB")).find("must be positive"), std::string::npos);
  EXPECT_NE(error_of(replace(kGpuYaml, "3 TB/s", "-3 TB/s")).find("must not be negative"), std::string::npos);
}

TEST(CatalogYaml, MissingSourceIsAnError) {
  const std::string e = error_of(replace(kGpuYaml, "    source: \"Acme X100 datasheet, 2030\"\n", ""));
  EXPECT_NE(e.find("missing required key 'source'"), std::string::npos) << e;
}

TEST(CatalogYaml, MalformedYamlReportsLine) {
  const std::string e = error_of("gpus:\n  - name: x\n    flops: {bf16: 1\n");
  EXPECT_EQ(e.rfind("user.yaml:", 0), 0u) << e;
  EXPECT_NE(e.find("malformed YAML"), std::string::npos) << e;
}

TEST(CatalogYaml, UnknownTopLevelKeySuggests) {
  const std::string e = error_of("gpu:\n  - name: x\n");
  EXPECT_NE(e.find("unknown top-level key 'gpu'; did you mean 'gpus'?"), std::string::npos) << e;
}

TEST(CatalogYaml, DuplicateInOneFileIsAnError) {
  std::string two = kGpuYaml;
  two += std::string(kGpuYaml).substr(std::string("gpus:\n").size());
  EXPECT_NE(error_of(two).find("duplicate entry 'x100'"), std::string::npos);
}

class BuiltinCatalog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CatalogOptions o;
    o.use_environment = false;
    catalog_ = new Catalog(load_catalog(o));
  }
  static void TearDownTestSuite() { delete catalog_; }
  static Catalog* catalog_;
};
Catalog* BuiltinCatalog::catalog_ = nullptr;

TEST_F(BuiltinCatalog, HasTheGpusNodesAndInterconnectsTheIssueLists) {
  for (const char* g : {"a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi300x", "l40s",
                        "a40"}) {
    EXPECT_NE(catalog_->hw.find_gpu(g), nullptr) << g;
    EXPECT_NE(catalog_->hw.find_price(g), nullptr) << "no price for " << g;
  }
  for (const char* n : {"dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72"}) EXPECT_NE(catalog_->hw.find_node(n), nullptr) << n;
  for (const char* i : {"ib-hdr", "ib-ndr", "roce-200", "roce-400"}) {
    EXPECT_NE(catalog_->hw.find_interconnect(i), nullptr) << i;
  }
}

TEST_F(BuiltinCatalog, H100FiguresMatchTheDatasheet) {
  // NVIDIA H100 Tensor Core GPU datasheet: H100 SXM BF16 tensor 1,979 TFLOP/s with sparsity, i.e.
  // 989.5 dense (the datasheet's rounding; the exact dense figure is 989.4); 3.35 TB/s HBM3; 700 W.
  const hw::GpuSpec* h = catalog_->hw.find_gpu("h100-sxm");
  ASSERT_NE(h, nullptr);
  EXPECT_NEAR(h->peak(hw::DType::kBf16)->per_second(), 989.5e12, 0.2e12);
  EXPECT_DOUBLE_EQ(h->memory_bandwidth.bytes_per_second(), 3.35e12);
  EXPECT_DOUBLE_EQ(h->tdp.watts(), 700.0);
  EXPECT_FALSE(h->power_limit.has_value());
  // torchtitan's Grand Teton H100: the 700 W part at its platform's default 500 W limit.
  const hw::GpuSpec* gt = catalog_->hw.find_gpu("h100-sxm-96gb");
  ASSERT_NE(gt, nullptr);
  EXPECT_DOUBLE_EQ(gt->tdp.watts(), 700.0);
  ASSERT_TRUE(gt->power_limit.has_value());
  EXPECT_DOUBLE_EQ(gt->power_limit->watts(), 500.0);
  // NVLink 4: 900 GB/s total bidirectional -> 450 GB/s per direction.
  ASSERT_TRUE(h->scaleup.has_value());
  EXPECT_DOUBLE_EQ(h->scaleup->bandwidth_per_direction.bytes_per_second(), 450e9);
}

TEST_F(BuiltinCatalog, A100FiguresMatchTheDatasheet) {
  // NVIDIA A100 datasheet: BF16 tensor 312 TFLOP/s dense; 80GB SXM: 2,039 GB/s; 40GB SXM: 1,555 GB/s.
  const hw::GpuSpec* a = catalog_->hw.find_gpu("a100-sxm-80gb");
  ASSERT_NE(a, nullptr);
  EXPECT_DOUBLE_EQ(a->peak(hw::DType::kBf16)->per_second(), 312e12);
  EXPECT_DOUBLE_EQ(a->memory_bandwidth.bytes_per_second(), 2.039e12);
  EXPECT_DOUBLE_EQ(catalog_->hw.find_gpu("a100-sxm-40gb")->memory_bandwidth.bytes_per_second(), 1.555e12);
}

TEST_F(BuiltinCatalog, EveryEntryHasASource) {
  for (const auto& [n, g] : catalog_->hw.gpus()) EXPECT_FALSE(g.source.empty()) << n;
  for (const auto& [n, g] : catalog_->hw.nodes()) EXPECT_FALSE(g.source.empty()) << n;
  for (const auto& [n, g] : catalog_->hw.interconnects()) EXPECT_FALSE(g.source.empty()) << n;
  for (const auto& [n, g] : catalog_->hw.prices()) EXPECT_FALSE(g.source.empty()) << n;
}

TEST_F(BuiltinCatalog, DgxH100NodeReferencesCatalogEntries) {
  // DGX H100: 8 GPUs, 8 ConnectX-7 NDR 400 Gb/s compute NICs (NVIDIA DGX H100 user guide).
  const hw::NodeSpec* n = catalog_->hw.find_node("dgx-h100");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->gpus_per_node, 8);
  EXPECT_EQ(n->nics.count, 8);
  EXPECT_DOUBLE_EQ(n->nics.bandwidth.bytes_per_second(), 50e9);
  EXPECT_EQ(n->gpu, "h100-sxm");
}

TEST_F(BuiltinCatalog, UnknownModelSuggestsNearest) {
  try {
    catalog_->model("llama3-8", Where{"<command line>", 0, "--model"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'llama3-8b'"), std::string::npos) << e.what();
  }
}

TEST(CatalogPaths, UserFolderOverridesBuiltinAndIsRecorded) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "orrery_catalog_test";
  std::filesystem::remove_all(dir);
  write_file_atomic((dir / "mine.yaml").string(),
                    replace(replace(kGpuYaml, "x100", "h100-sxm"), "80 GiB", "96 GiB"));
  CatalogOptions o;
  o.use_environment = false;
  o.paths = {dir.string()};
  const Catalog c = load_catalog(o);
  EXPECT_EQ(c.hw.find_gpu("h100-sxm")->memory, Bytes::GiB(96));
  EXPECT_EQ(c.hw.find_gpu("h100-sxm")->origin, (dir / "mine.yaml").string());
  EXPECT_EQ(c.loaded.back(), (dir / "mine.yaml").string());
  std::filesystem::remove_all(dir);
}

TEST(CatalogPaths, MissingPathIsAnInputError) {
  CatalogOptions o;
  o.use_environment = false;
  o.builtin = false;
  o.paths = {"/nonexistent/orrery/catalog.yaml"};
  EXPECT_THROW(load_catalog(o), InputError);
}

TEST(CatalogPaths, DanglingNodeGpuIsAnError) {
  Catalog c;
  add_catalog_yaml(c, R"(nodes:
  - name: box
    gpu: x999
    gpus_per_node: 8
    intra_node: nvswitch
    nics: {count: 8, interconnect: ib-ndr, bandwidth: 400 Gb/s}
    pcie: {generation: 5, bandwidth_per_direction: 64 GB/s}
    host_memory: 2 TB
    source: test
)",
                   "n.yaml");
  try {
    c.hw.check_references();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown GPU 'x999'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orrery::io
