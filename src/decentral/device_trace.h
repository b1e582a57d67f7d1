// FedScale-style device traces: per-device compute speed, bandwidth and availability intervals, a reader
// with file:line errors, a writer, and a small synthetic generator.
//
// Model card
//   Format    CSV with a header line; '#' starts a comment line; blank lines are skipped. Columns (any
//             order; names case-insensitive):
//               device_id              text, unique
//               compute_ms_per_sample  > 0: inference latency of the model per sample, in ms (FedScale's
//                                      'computation'); a training sample costs 3 times that
//               bandwidth_kbps         > 0: up- and downlink, kilobits (1000 bit) per second (FedScale's
//                                      'communication'), or both of
//               up_kbps, down_kbps     > 0: uplink and downlink separately
//               availability           optional: "start-end;start-end" in seconds, sorted, disjoint,
//                                      start < end; empty or "always": always available
//               period_s               optional, > 0: the availability repeats with this period (FedScale's
//                                      behaviour traces repeat with their finish_time); it must cover the
//                                      intervals. Without it a device is unavailable after its last interval.
//             Modelled on FedScale's client profiles (Lai, Dai, Singapuram, Liu, Zhu, Madhyastha, Chowdhury,
//             "FedScale: Benchmarking Model and System Performance of Federated Learning at Scale", ICML
//             2022): the device-capacity file's 'computation' (ms per sample) and 'communication' (kbps),
//             and the behaviour trace's active / inactive times with finish_time
//             (fedscale/cloud/internal/client_metadata.py: is_active, get_completion_time).
//   Generator synthetic_device_trace(): compute_ms_per_sample = (5 ms / 3) * LogNormal(1, 0.6), i.e.
//             FedScale's lognormal completion-time mode (get_completion_time_lognormal:
//             mean_seconds_per_sample = 0.005, device speed LogNormal(mu = 1, sigma = 0.6), after
//             PAPAYA, Huba et al., MLSys 2022) written as an inference latency; bandwidth lognormal with
//             mean 20 Mbit/s and standard deviation 10 Mbit/s (SelecEval's default client bandwidth,
//             jsincn.github.io/SelecEval, normal(20, 10) Mbit/s, made positive as a lognormal with the same
//             mean and deviation); availability from the churn process of decentral/heterogeneity.h over
//             [0, horizon) with period = horizon (always available when the fraction is 0). Streams:
//             RandomStream::derive(seed, "decentral.device_trace.<quantity>").child(device).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "decentral/heterogeneity.h"

namespace orrery::decentral {

struct DeviceProfile {
  std::string id;
  double compute_ms_per_sample = 0;
  double up_kbps = 0;
  double down_kbps = 0;
  std::vector<std::pair<double, double>> availability;  // empty: always available
  double period_s = 0;                                   // 0: no repetition
  int64_t line = 0;                                      // where it was read (0: generated)
};

struct DeviceTrace {
  std::string file;
  std::vector<DeviceProfile> devices;
  bool has_availability() const;
};

DeviceTrace parse_device_trace(std::string_view text, const std::string& file);
DeviceTrace read_device_trace(const std::string& path);
// The trace in the format above (bandwidth_kbps when up == down for every device, else up/down columns);
// parse_device_trace(format_device_trace(t)) gives t back (values to 17 significant digits).
std::string format_device_trace(const DeviceTrace& trace);

struct SyntheticDeviceSpec {
  int64_t devices = 100;
  uint64_t seed = 1;
  ChurnSpec churn;        // availability; fraction 0: always available
  double horizon_s = 3600;
};
DeviceTrace synthetic_device_trace(const SyntheticDeviceSpec& spec, const Where& where = {});

}  // namespace orrery::decentral
