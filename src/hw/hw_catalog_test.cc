#include "hw/hw_catalog.h"

#include <gtest/gtest.h>

namespace orrery::hw {
namespace {

GpuSpec make_gpu(std::string name) {
  GpuSpec g;
  g.name = std::move(name);
  g.memory = Bytes::GiB(80);
  return g;
}

TEST(HwCatalog, LaterEntryWithSameNameOverrides) {
  HwCatalog c;
  c.add_gpu(make_gpu("h100-sxm"));
  GpuSpec user = make_gpu("h100-sxm");
  user.memory = Bytes::GiB(96);
  user.origin = "my-gpus.yaml";
  c.add_gpu(user);
  ASSERT_NE(c.find_gpu("h100-sxm"), nullptr);
  EXPECT_EQ(c.find_gpu("h100-sxm")->memory, Bytes::GiB(96));
  EXPECT_EQ(c.gpus().size(), 1u);
}

TEST(HwCatalog, UnknownNameSuggestsNearest) {
  HwCatalog c;
  c.add_gpu(make_gpu("h100-sxm"));
  c.add_gpu(make_gpu("a100-sxm-80gb"));
  try {
    c.get_gpu("h100-sxm5", Where{"<command line>", 0, "--gpu"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "<command line>: --gpu: unknown GPU 'h100-sxm5'; did you mean 'h100-sxm'?");
  }
}

TEST(HwCatalog, DanglingReferenceIsAnError) {
  HwCatalog c;
  NodeSpec n;
  n.name = "dgx-x";
  n.gpu = "x100";
  n.origin = "nodes.yaml";
  c.add_node(n);
  EXPECT_THROW(c.check_references(), InputError);
  c.add_gpu(make_gpu("x100"));
  EXPECT_NO_THROW(c.check_references());
}

TEST(DType, NamesRoundTripAndSizes) {
  for (DType d : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_FALSE(parse_dtype("bfloat16").has_value());
  EXPECT_EQ(dtype_bytes(DType::kBf16), 2);
  EXPECT_EQ(dtype_bytes(DType::kFp8), 1);
}

}  // namespace
}  // namespace orrery::hw
