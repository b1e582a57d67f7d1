#include "core/unit_parse.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

const Where kWhere{"cluster.yaml", 7, "nodes.nic_bandwidth"};

TEST(UnitParse, BitsPerSecondAreEighthOfBytes) {
  // 400 Gb/s = 400e9 bit/s / 8 = 50e9 B/s.
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gb/s", kWhere).bytes_per_second(), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbps", kWhere).bytes_per_second(), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("900 GB/s", kWhere).bytes_per_second(), 900e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1 GiB/s", kWhere).bytes_per_second(), 1073741824.0);
}

TEST(UnitParse, DecimalAndBinaryBytes) {
  // 80 GiB = 80 * 2^30 = 85899345920 B; 80 GB = 8e10 B; 1.5 KiB = 1536 B.
  EXPECT_EQ(parse_bytes("80 GiB", kWhere).count(), 85'899'345'920);
  EXPECT_EQ(parse_bytes("80 GB", kWhere).count(), 80'000'000'000);
  EXPECT_EQ(parse_bytes("1.5 KiB", kWhere).count(), 1536);
  EXPECT_EQ(parse_bytes("64MiB", kWhere).count(), 64 << 20);
}

TEST(UnitParse, TimesAreExactPicoseconds) {
  // 1.5 us = 1.5e6 ps; 2 ms = 2e9 ps; 936 ns = 936000 ps.
  EXPECT_EQ(parse_time("1.5 us", kWhere).picoseconds(), 1'500'000);
  EXPECT_EQ(parse_time("2 ms", kWhere).picoseconds(), 2'000'000'000);
  EXPECT_EQ(parse_time("936 ns", kWhere).picoseconds(), 936'000);
  EXPECT_EQ(parse_time("1e-3 s", kWhere), Time::ms(1));
}

TEST(UnitParse, ComputeRateAndPower) {
  EXPECT_DOUBLE_EQ(parse_flop_rate("989.4 TFLOP/s", kWhere).per_second(), 989.4e12);
  EXPECT_DOUBLE_EQ(parse_flop_rate("2.5 PFLOP/s", kWhere).per_second(), 2.5e15);
  EXPECT_DOUBLE_EQ(parse_power("700 W", kWhere).watts(), 700.0);
}

TEST(UnitParse, MissingUnitNamesFileLineAndKey) {
  try {
    parse_bandwidth("400", kWhere);
    FAIL() << "a bare number must be rejected";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cluster.yaml:7: nodes.nic_bandwidth"), std::string::npos) << msg;
    EXPECT_NE(msg.find("has no unit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("400 Gb/s"), std::string::npos) << msg;  // the example of the expected form
  }
}

TEST(UnitParse, UnknownUnitSuggestsNearest) {
  try {
    parse_bandwidth("400 Gb/sec", kWhere);
    FAIL() << "unknown unit must be rejected";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown unit 'Gb/sec'"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("Gb/s"), std::string::npos) << e.hint();
  }
}

TEST(UnitParse, WrongKindOfUnitIsRejected) {
  // A size is not a duration.
  EXPECT_THROW(parse_time("80 GiB", kWhere), InputError);
  EXPECT_THROW(parse_bytes("2 ms", kWhere), InputError);
}

TEST(UnitParse, NegativeAndZeroAreRejectedWhereRequired) {
  EXPECT_THROW(parse_bytes("-1 GiB", kWhere), InputError);
  EXPECT_THROW(parse_bandwidth_positive("0 GB/s", kWhere), InputError);
  EXPECT_THROW(parse_time_positive("0 s", kWhere), InputError);
  EXPECT_EQ(parse_time("0 s", kWhere), Time::zero());
}

TEST(UnitParse, GarbageIsRejected) {
  EXPECT_THROW(parse_bytes("lots", kWhere), InputError);
  EXPECT_THROW(parse_bytes("", kWhere), InputError);
  EXPECT_THROW(parse_bytes("1e400 B", kWhere), InputError);
}

TEST(UnitFormat, ThreeSignificantDigits) {
  EXPECT_EQ(format_time(Time::us(1500)), "1.50 ms");
  EXPECT_EQ(format_bytes(Bytes::GiB(80)), "80.0 GiB");
  EXPECT_EQ(format_bandwidth(Bandwidth(450e9)), "450 GB/s");
  EXPECT_EQ(format_flop_rate(FlopRate(989.4e12)), "989 TFLOP/s");
  EXPECT_EQ(format_count(6.74e9), "6.74 B");
}

}  // namespace
}  // namespace orrery
