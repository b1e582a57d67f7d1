// Unit strings at the edges: parsing config values such as "400 Gb/s", "900 GB/s", "80 GiB",
// "1.5 us", "2 ms", "989.4 TFLOP/s", "700 W", and formatting values for tables.
//
// Grammar: <number> [spaces] <unit>, number in decimal or scientific notation. A unit is mandatory:
// a bare number is an InputError ("expected a size with a unit such as '80 GiB'"), as is an unknown unit
// (with the nearest valid unit suggested). Negative values are rejected; callers that need strictly
// positive values use the *_positive variants.
//
// Units (case-sensitive, because 'b' is a bit and 'B' a byte):
//   time       ps ns us µs ms s min h
//   bytes      B; decimal kB KB MB GB TB PB (10^3k); binary KiB MiB GiB TiB PiB (2^10k)
//   bandwidth  bytes: B/s kB/s MB/s GB/s TB/s KiB/s MiB/s GiB/s (also GBps); bits: b/s kb/s Mb/s Gb/s Tb/s
//              (also bit/s, Gbit/s, Gbps): 1 Gb/s = 1.25e8 B/s
//   compute    FLOP/s kFLOP/s MFLOP/s GFLOP/s TFLOP/s PFLOP/s EFLOP/s (also TFLOPS)
//   power      W kW
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "core/units.h"

namespace orrery {

Time parse_time(std::string_view text, const Where& where);
Bytes parse_bytes(std::string_view text, const Where& where);
Bandwidth parse_bandwidth(std::string_view text, const Where& where);
FlopRate parse_flop_rate(std::string_view text, const Where& where);
Power parse_power(std::string_view text, const Where& where);

// As above, and zero is rejected too ("must be positive").
Time parse_time_positive(std::string_view text, const Where& where);
Bytes parse_bytes_positive(std::string_view text, const Where& where);
Bandwidth parse_bandwidth_positive(std::string_view text, const Where& where);
FlopRate parse_flop_rate_positive(std::string_view text, const Where& where);

// Human-readable forms with 3-4 significant digits: "1.50 ms", "80.0 GiB", "450 GB/s", "989 TFLOP/s".
std::string format_time(Time t);
std::string format_bytes(Bytes b);          // binary prefixes (KiB, MiB, GiB, TiB)
std::string format_bandwidth(Bandwidth bw);  // decimal bytes (MB/s, GB/s, TB/s)
std::string format_flop_rate(FlopRate r);    // decimal (GFLOP/s, TFLOP/s, PFLOP/s)
std::string format_count(double n);          // 6.74e9 -> "6.74 B", 1.3e6 -> "1.30 M"

}  // namespace orrery
