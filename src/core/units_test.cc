#include "core/units.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(Time, NamedConstructorsAgreeInPicoseconds) {
  // 1 ms = 1e3 us = 1e6 ns = 1e9 ps.
  EXPECT_EQ(Time::ms(1).picoseconds(), 1'000'000'000);
  EXPECT_EQ(Time::us(1000), Time::ms(1));
  EXPECT_EQ(Time::ns(1'000'000), Time::ms(1));
  EXPECT_EQ(Time::seconds(1.5e-6), Time::ns(1500));
}

TEST(Time, SecondsRoundToNearestPicosecond) {
  // 0.4 ps rounds down to 0 and 0.6 ps rounds up to 1.
  EXPECT_EQ(Time::seconds(0.4e-12).picoseconds(), 0);
  EXPECT_EQ(Time::seconds(0.6e-12).picoseconds(), 1);
  EXPECT_DOUBLE_EQ(Time::ms(250).to_seconds(), 0.25);
}

TEST(Time, HoldsMoreThanAHundredDays) {
  // int64 picoseconds reach 9.22e18 ps = 9.22e6 s = 106.7 days; 100 days = 8.64e6 s must fit.
  const Time hundred_days = Time::seconds(100 * 86400.0);
  EXPECT_GT(hundred_days, Time::zero());
  EXPECT_LT(hundred_days, Time::max());
}

TEST(Units, BytesOverBandwidthIsTransferTime) {
  // 1 GiB over 50 GB/s: 1073741824 / 5e10 = 0.021474836 s = 21474836.48 ns -> 21474836480 ps.
  const Time t = Bytes::GiB(1) / Bandwidth(50e9);
  EXPECT_EQ(t.picoseconds(), 21'474'836'480);
}

TEST(Units, FlopsOverRateIsComputeTime) {
  // 989.4e12 FLOP at 989.4 TFLOP/s takes exactly one second.
  EXPECT_EQ((Flops(989.4e12) / FlopRate(989.4e12)), Time::ms(1000));
}

TEST(Units, RatesFromAmountsOverTime) {
  // 2 GB in 10 ms = 200 GB/s; 1 TFLOP in 2 ms = 500 TFLOP/s.
  EXPECT_DOUBLE_EQ((Bytes(2'000'000'000) / Time::ms(10)).bytes_per_second(), 2e11);
  EXPECT_DOUBLE_EQ((Flops(1e12) / Time::ms(2)).per_second(), 5e14);
}

TEST(Units, BinaryPrefixes) {
  EXPECT_EQ(Bytes::KiB(1).count(), 1024);
  EXPECT_EQ(Bytes::MiB(64).count(), 64 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(Bytes::GiB(80).to_gib(), 80.0);
}

}  // namespace
}  // namespace orrery
