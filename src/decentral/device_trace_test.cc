#include "decentral/device_trace.h"

#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace orrery::decentral {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_device_trace(text, "devices.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeviceTrace, ReadsColumnsInAnyOrderWithCommentsAndAvailability) {
  const DeviceTrace t = parse_device_trace(
      "# a comment\n"
      "availability,device_id,down_kbps,up_kbps,compute_ms_per_sample,period_s\n"
      "\n"
      "0-3600;7200-9000,pixel,20000,5000,35.5,86400\n"
      "always,iphone,40000,10000,12,\n",
      "devices.csv");
  ASSERT_EQ(t.devices.size(), 2u);
  EXPECT_EQ(t.devices[0].id, "pixel");
  EXPECT_EQ(t.devices[0].line, 4);
  EXPECT_DOUBLE_EQ(t.devices[0].compute_ms_per_sample, 35.5);
  EXPECT_DOUBLE_EQ(t.devices[0].up_kbps, 5000);
  EXPECT_DOUBLE_EQ(t.devices[0].down_kbps, 20000);
  ASSERT_EQ(t.devices[0].availability.size(), 2u);
  EXPECT_DOUBLE_EQ(t.devices[0].availability[1].first, 7200);
  EXPECT_DOUBLE_EQ(t.devices[0].period_s, 86400);
  EXPECT_TRUE(t.devices[1].availability.empty());
  EXPECT_TRUE(t.has_availability());
}

TEST(DeviceTrace, EveryBadInputNamesFileLineAndKey) {
  const std::string h = "device_id,compute_ms_per_sample,bandwidth_kbps,availability\n";
  EXPECT_NE(error_of("").find("empty device trace"), std::string::npos);
  EXPECT_NE(error_of(h).find("no devices"), std::string::npos);
  EXPECT_NE(error_of("device_id,compute_ms,bandwidth_kbps\n").find("did you mean 'compute_ms_per_sample'"), std::string::npos);
  EXPECT_NE(error_of("device_id,bandwidth_kbps\n").find("needs the columns"), std::string::npos);
  EXPECT_NE(error_of("device_id,compute_ms_per_sample\n").find("bandwidth_kbps or both"), std::string::npos);
  EXPECT_NE(error_of("device_id,compute_ms_per_sample,bandwidth_kbps,up_kbps\n").find("bandwidth_kbps or both"), std::string::npos);
  EXPECT_NE(error_of("device_id,device_id,compute_ms_per_sample,bandwidth_kbps\n").find("appears twice"), std::string::npos);
  EXPECT_NE(error_of(h + "a,1,2\n").find("devices.csv:2: expected 4 fields"), std::string::npos);
  EXPECT_NE(error_of(h + "a,fast,2,always\n").find("devices.csv:2: compute_ms_per_sample: expected a compute time"), std::string::npos);
  EXPECT_NE(error_of(h + "a,1,0,always\n").find("devices.csv:2: bandwidth_kbps"), std::string::npos);
  EXPECT_NE(error_of(h + "a,1,2,5\n").find("START-END"), std::string::npos);
  EXPECT_NE(error_of(h + "a,1,2,5-3\n").find("START < END"), std::string::npos);
  EXPECT_NE(error_of(h + "a,1,2,0-10;5-20\n").find("sorted and disjoint"), std::string::npos);
  EXPECT_NE(error_of(h + "a,1,2,always\na,1,2,always\n").find("devices.csv:3: device_id: duplicate"), std::string::npos);
  EXPECT_NE(error_of(h + ",1,2,always\n").find("expected a device id"), std::string::npos);
  EXPECT_NE(error_of("device_id,compute_ms_per_sample,bandwidth_kbps,availability,period_s\na,1,2,0-10,5\n").find("after the period"),
            std::string::npos);
  EXPECT_THROW(read_device_trace("/nonexistent/devices.csv"), InputError);
}

TEST(DeviceTrace, WriterAndReaderRoundTrip) {
  SyntheticDeviceSpec s;
  s.devices = 20;
  s.seed = 4;
  s.churn = ChurnSpec{0.3, 60.0};
  s.horizon_s = 3600;
  const DeviceTrace t = synthetic_device_trace(s);
  const DeviceTrace back = parse_device_trace(format_device_trace(t), "round.csv");
  ASSERT_EQ(back.devices.size(), t.devices.size());
  for (size_t i = 0; i < t.devices.size(); ++i) {
    EXPECT_EQ(back.devices[i].id, t.devices[i].id);
    EXPECT_EQ(back.devices[i].compute_ms_per_sample, t.devices[i].compute_ms_per_sample);
    EXPECT_EQ(back.devices[i].up_kbps, t.devices[i].up_kbps);
    EXPECT_EQ(back.devices[i].availability, t.devices[i].availability);
    EXPECT_EQ(back.devices[i].period_s, 3600);
  }
}

TEST(DeviceTrace, SyntheticDevicesFollowTheCitedDistributions) {
  // compute_ms_per_sample = (5/3) LogNormal(1, 0.6): mean (5/3) exp(1 + 0.18) = 5.42 ms; bandwidth
  // lognormal with mean 20,000 kbps and cv 0.5. 2,000 devices: standard errors about 0.6% x sqrt(e^0.36 - 1)
  // = 1.0% (compute) and 1.1% (bandwidth) of the means; 5% is ~4.5 of them.
  SyntheticDeviceSpec s;
  s.devices = 2000;
  const DeviceTrace t = synthetic_device_trace(s);
  double c = 0, b = 0;
  for (const DeviceProfile& d : t.devices) {
    c += d.compute_ms_per_sample;
    b += d.up_kbps;
    EXPECT_TRUE(d.availability.empty());
  }
  EXPECT_NEAR(c / 2000, 5.0 / 3.0 * std::exp(1.18), 0.05 * 5.42);
  EXPECT_NEAR(b / 2000, 20'000, 0.05 * 20'000);
  EXPECT_THROW(synthetic_device_trace(SyntheticDeviceSpec{0, 1, {}, 10}), InputError);
}

}  // namespace
}  // namespace orrery::decentral
