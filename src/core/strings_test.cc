#include "core/strings.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(EditDistance, ClassicExamples) {
  // kitten -> sitting: substitute k->s, e->i, insert g = 3 edits (Levenshtein 1966's example).
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
  EXPECT_EQ(edit_distance("", "abc"), 3);
  EXPECT_EQ(edit_distance("H100-SXM", "h100-sxm"), 0);  // case-insensitive
}

TEST(Suggest, NearestNameFirst) {
  const std::vector<std::string> gpus = {"a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200"};
  // 'h100-sxm5' is one deletion from 'h100-sxm'.
  EXPECT_EQ(suggest("h100-sxm5", gpus), "did you mean 'h100-sxm'?");
  EXPECT_EQ(nearest_names("h100", gpus).front(), "h100-sxm");
}

TEST(Suggest, FarNamesListTheValidOnes) {
  const std::vector<std::string> names = {"ring", "tree"};
  EXPECT_EQ(suggest("butterfly-mesh", names), "valid names: ring, tree");
}

TEST(ParseNumber, WholeFiniteNumbersOnly) {
  EXPECT_EQ(parse_number(" 0.01 "), 0.01);
  EXPECT_EQ(parse_number("-2e3"), -2000.0);
  for (const char* bad : {"", "  ", "5%", "0.1x", "abc", "1e999", "nan", "inf"}) {
    EXPECT_FALSE(parse_number(bad).has_value()) << bad;
  }
}

TEST(SplitCsv, FieldsAreTrimmedAndATrailingCommaIsAnEmptyField) {
  const std::vector<std::string_view> f = split_csv(" a, b ,c,");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0], "a");
  EXPECT_EQ(f[1], "b");
  EXPECT_EQ(f[2], "c");
  EXPECT_EQ(f[3], "");
  EXPECT_EQ(split_csv("").size(), 1u);  // one empty field
  std::vector<std::string_view> reused = {"x", "y", "z"};
  split_csv("1,2", reused);  // the reused form clears first
  EXPECT_EQ(reused, (std::vector<std::string_view>{"1", "2"}));
}

}  // namespace
}  // namespace orrery
