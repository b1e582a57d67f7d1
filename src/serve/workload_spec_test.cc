#include "serve/workload_spec.h"

#include <gtest/gtest.h>

namespace orrery::serve {
namespace {

TEST(WorkloadSpec, ParsesOneTypeAndMixes) {
  const WorkloadSpec one = parse_workload_spec("prompt=512,output=20");
  ASSERT_EQ(one.types.size(), 1u);
  EXPECT_DOUBLE_EQ(one.types[0].prompt.mean(), 512.0);
  EXPECT_DOUBLE_EQ(one.types[0].output.mean(), 20.0);
  EXPECT_FALSE(one.gamma);
  const WorkloadSpec mix = parse_workload_spec("type=0.7/512/20, type=0.3/512/50, arrivals=gamma:2, rate=5");
  ASSERT_EQ(mix.types.size(), 2u);
  EXPECT_DOUBLE_EQ(mix.types[1].weight, 0.3);
  EXPECT_DOUBLE_EQ(mix.types[1].output.mean(), 50.0);
  EXPECT_TRUE(mix.gamma);
  EXPECT_DOUBLE_EQ(mix.cv, 2.0);
  EXPECT_DOUBLE_EQ(*mix.rate, 5.0);
  // uniform 10..30 has mean 20.
  EXPECT_DOUBLE_EQ(parse_workload_spec("prompt=uniform:10:30,output=1").types[0].prompt.mean(), 20.0);
  EXPECT_TRUE(parse_workload_spec("default").is_default);
}

TEST(WorkloadSpec, StreamsAtTheGivenRateWithTheTypeIndex) {
  const WorkloadSpec mix = parse_workload_spec("type=1/10/1,type=1/20/2");
  auto src = make_workload(mix, 100.0, 3, 4000);
  int64_t n = 0;
  Time last;
  while (auto r = src->next()) {
    EXPECT_EQ(r->prompt_tokens, r->type == 0 ? 10 : 20);
    last = r->arrival;
    ++n;
  }
  EXPECT_EQ(n, 4000);
  // 4000 Poisson arrivals at 100/s span ~40 s (sd of the sum: sqrt(4000)/100 = 0.63 s; 5 sd bound).
  EXPECT_NEAR(last.to_seconds(), 40.0, 3.2);
}

TEST(WorkloadSpec, BadSpecsAreInputErrorsNamingTheKey) {
  for (const char* bad : {"", "prompt=512", "promt=512,output=2", "prompt=abc,output=2", "prompt=uniform:5,output=2",
                          "arrivals=weibull,prompt=1,output=1", "type=0/1/1", "type=1/1", "prompt=1,output=1,type=1/1/1"}) {
    EXPECT_THROW(parse_workload_spec(bad), InputError) << bad;
  }
  try {
    parse_workload_spec("promt=512,output=2");
  } catch (const InputError& e) {
    EXPECT_NE(e.hint().find("prompt"), std::string::npos);
  }
  const WorkloadSpec one = parse_workload_spec("prompt=1,output=1");
  EXPECT_THROW(make_workload(one, std::nullopt, 0, 10), InputError);  // no rate
  EXPECT_THROW(make_workload(one, 0.0, 0, 10), InputError);
  EXPECT_THROW(make_workload(one, -2.0, 0, 10), InputError);
}

}  // namespace
}  // namespace orrery::serve
