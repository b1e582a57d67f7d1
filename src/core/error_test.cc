#include "core/error.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(InputError, OneLineWithFileLineKeyAndHint) {
  const InputError e(Where{"gpus.yaml", 12, "gpus[2].name"}, "unknown GPU 'h100-sxm5'", "did you mean 'h100-sxm'?");
  EXPECT_STREQ(e.what(), "gpus.yaml:12: gpus[2].name: unknown GPU 'h100-sxm5'; did you mean 'h100-sxm'?");
}

TEST(InputError, EmptyPartsAreLeftOut) {
  EXPECT_STREQ(InputError(Where{"", 0, "--size"}, "must be positive").what(), "--size: must be positive");
  EXPECT_STREQ(InputError(Where{"a.json", 0, ""}, "bad").what(), "a.json: bad");
}

TEST(Where, KeysNestWithDotsAndBrackets) {
  const Where w{"f", 1, "gpus"};
  EXPECT_EQ(w.with_key("[3]").with_key("memory").key, "gpus[3].memory");
  EXPECT_EQ(Where{}.with_key("x").key, "x");
}

}  // namespace
}  // namespace orrery
