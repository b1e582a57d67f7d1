#include "core/unit_parse.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/strings.h"

namespace orrery {
namespace {

struct UnitDef {
  std::string_view name;
  double factor;  // multiply the number by this to get the base unit
};

// Base units: picoseconds, bytes, bytes/s, FLOP/s, watts.
constexpr std::array kTimeUnits = {
    UnitDef{"ps", 1.0},  UnitDef{"ns", 1e3},  UnitDef{"us", 1e6},   UnitDef{"\xC2\xB5s", 1e6},
    UnitDef{"ms", 1e9},  UnitDef{"s", 1e12},  UnitDef{"min", 6e13}, UnitDef{"h", 3.6e15},
};
constexpr double kKi = 1024.0;
constexpr std::array kByteUnits = {
    UnitDef{"B", 1.0},         UnitDef{"kB", 1e3},         UnitDef{"KB", 1e3},
    UnitDef{"MB", 1e6},        UnitDef{"GB", 1e9},         UnitDef{"TB", 1e12},
    UnitDef{"PB", 1e15},       UnitDef{"KiB", kKi},        UnitDef{"MiB", kKi * kKi},
    UnitDef{"GiB", kKi * kKi * kKi}, UnitDef{"TiB", kKi * kKi * kKi * kKi},
    UnitDef{"PiB", kKi * kKi * kKi * kKi * kKi},
};
constexpr std::array kBandwidthUnits = {
    UnitDef{"B/s", 1.0},      UnitDef{"kB/s", 1e3},     UnitDef{"KB/s", 1e3},     UnitDef{"MB/s", 1e6},
    UnitDef{"GB/s", 1e9},     UnitDef{"TB/s", 1e12},    UnitDef{"KiB/s", kKi},    UnitDef{"MiB/s", kKi * kKi},
    UnitDef{"GiB/s", kKi * kKi * kKi}, UnitDef{"GBps", 1e9},  UnitDef{"MBps", 1e6},
    UnitDef{"b/s", 0.125},    UnitDef{"bit/s", 0.125},  UnitDef{"kb/s", 125.0},   UnitDef{"Mb/s", 1.25e5},
    UnitDef{"Gb/s", 1.25e8},  UnitDef{"Tb/s", 1.25e11}, UnitDef{"kbit/s", 125.0}, UnitDef{"Mbit/s", 1.25e5},
    UnitDef{"Gbit/s", 1.25e8}, UnitDef{"Tbit/s", 1.25e11}, UnitDef{"Mbps", 1.25e5}, UnitDef{"Gbps", 1.25e8},
};
constexpr std::array kFlopRateUnits = {
    UnitDef{"FLOP/s", 1.0},   UnitDef{"kFLOP/s", 1e3},  UnitDef{"MFLOP/s", 1e6},  UnitDef{"GFLOP/s", 1e9},
    UnitDef{"TFLOP/s", 1e12}, UnitDef{"PFLOP/s", 1e15}, UnitDef{"EFLOP/s", 1e18}, UnitDef{"FLOPS", 1.0},
    UnitDef{"GFLOPS", 1e9},   UnitDef{"TFLOPS", 1e12},  UnitDef{"PFLOPS", 1e15},
};
constexpr std::array kPowerUnits = {UnitDef{"W", 1.0}, UnitDef{"kW", 1e3}};

template <size_t N>
double parse_with_units(std::string_view text, const Where& where, const std::array<UnitDef, N>& units,
                        std::string_view what, std::string_view example) {
  const std::string_view t = trim(text);
  const std::string buf(t);
  const char* begin = buf.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  if (end == begin) {
    throw InputError(where, fmt::format("expected {} with a unit such as '{}', got '{}'", what, example, text));
  }
  if (errno == ERANGE || !std::isfinite(value)) {
    throw InputError(where, fmt::format("{} '{}' is out of range", what, text));
  }
  const std::string_view unit = trim(std::string_view(end));
  if (unit.empty()) {
    throw InputError(where, fmt::format("'{}' has no unit: expected {} with a unit such as '{}'", text, what,
                                        example));
  }
  std::vector<std::string> names;
  for (const UnitDef& u : units) {
    if (u.name == unit) {
      if (value < 0) throw InputError(where, fmt::format("{} must not be negative, got '{}'", what, text));
      return value * u.factor;
    }
    names.emplace_back(u.name);
  }
  throw InputError(where, fmt::format("unknown unit '{}' in '{}' (expected {} such as '{}')", unit, text, what, example),
                   suggest(unit, names));
}

template <class T>
T require_positive(T v, std::string_view text, const Where& where) {
  if (!(v > T{})) throw InputError(where, fmt::format("must be positive, got '{}'", text));
  return v;
}

}  // namespace

Time parse_time(std::string_view text, const Where& where) {
  const double ps = parse_with_units(text, where, kTimeUnits, "a duration", "1.5 us");
  if (ps > 9.2e18) throw InputError(where, fmt::format("duration '{}' exceeds the 106-day range of Time", text));
  return Time::ps(std::llround(ps));
}

Bytes parse_bytes(std::string_view text, const Where& where) {
  const double b = parse_with_units(text, where, kByteUnits, "a size", "80 GiB");
  if (b > 9.2e18) throw InputError(where, fmt::format("size '{}' exceeds 8 EiB", text));
  return Bytes(std::llround(b));
}

Bandwidth parse_bandwidth(std::string_view text, const Where& where) {
  return Bandwidth(parse_with_units(text, where, kBandwidthUnits, "a bandwidth", "400 Gb/s"));
}

FlopRate parse_flop_rate(std::string_view text, const Where& where) {
  return FlopRate(parse_with_units(text, where, kFlopRateUnits, "a compute rate", "989 TFLOP/s"));
}

Power parse_power(std::string_view text, const Where& where) {
  return Power(parse_with_units(text, where, kPowerUnits, "a power", "700 W"));
}

Time parse_time_positive(std::string_view text, const Where& where) {
  return require_positive(parse_time(text, where), text, where);
}
Bytes parse_bytes_positive(std::string_view text, const Where& where) {
  return require_positive(parse_bytes(text, where), text, where);
}
Bandwidth parse_bandwidth_positive(std::string_view text, const Where& where) {
  return require_positive(parse_bandwidth(text, where), text, where);
}
FlopRate parse_flop_rate_positive(std::string_view text, const Where& where) {
  return require_positive(parse_flop_rate(text, where), text, where);
}

namespace {
// Three significant digits: 1.23, 12.3, 123.
std::string sig3(double v) {
  const double a = std::fabs(v);
  if (a >= 100 || a == 0) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

struct Scale {
  double factor;
  const char* suffix;
};

template <size_t N>
std::string scaled(double v, const std::array<Scale, N>& scales) {
  for (const Scale& s : scales) {
    if (std::fabs(v) >= s.factor * 0.9995) return sig3(v / s.factor) + " " + s.suffix;
  }
  return sig3(v / scales.back().factor) + " " + scales.back().suffix;
}
}  // namespace

std::string format_time(Time t) {
  static constexpr std::array<Scale, 6> kScales = {
      {{3.6e15, "h"}, {1e12, "s"}, {1e9, "ms"}, {1e6, "us"}, {1e3, "ns"}, {1, "ps"}}};
  const double ps = static_cast<double>(t.picoseconds());
  if (std::fabs(ps) >= 3.6e15) return scaled(ps, kScales);
  static constexpr std::array<Scale, 5> kSmall = {{{1e12, "s"}, {1e9, "ms"}, {1e6, "us"}, {1e3, "ns"}, {1, "ps"}}};
  return scaled(ps, kSmall);
}

std::string format_bytes(Bytes b) {
  static constexpr std::array<Scale, 6> kScales = {{{kKi * kKi * kKi * kKi * kKi, "PiB"},
                                                    {kKi * kKi * kKi * kKi, "TiB"},
                                                    {kKi * kKi * kKi, "GiB"},
                                                    {kKi * kKi, "MiB"},
                                                    {kKi, "KiB"},
                                                    {1, "B"}}};
  return scaled(b.to_double(), kScales);
}

std::string format_bandwidth(Bandwidth bw) {
  static constexpr std::array<Scale, 5> kScales = {
      {{1e12, "TB/s"}, {1e9, "GB/s"}, {1e6, "MB/s"}, {1e3, "kB/s"}, {1, "B/s"}}};
  return scaled(bw.bytes_per_second(), kScales);
}

std::string format_flop_rate(FlopRate r) {
  static constexpr std::array<Scale, 5> kScales = {
      {{1e18, "EFLOP/s"}, {1e15, "PFLOP/s"}, {1e12, "TFLOP/s"}, {1e9, "GFLOP/s"}, {1, "FLOP/s"}}};
  return scaled(r.per_second(), kScales);
}

std::string format_count(double n) {
  static constexpr std::array<Scale, 4> kScales = {{{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "k"}}};
  if (std::fabs(n) < 999.5) return sig3(n);
  return scaled(n, kScales);
}

}  // namespace orrery
