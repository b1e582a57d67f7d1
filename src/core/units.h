// Strong unit types used throughout orrery.
//
// Model card
//   Time       int64 picoseconds. Range +-9.2e6 s (about 106 days), resolution 1 ps. Integer so that
//              event ordering is exact and runs are bit-reproducible.
//   Bytes      int64 bytes. Sizes of tensors, messages and memories.
//   Flops      double, a count of floating-point operations (not a rate).
//   FlopRate   double, FLOP per second.
//   Bandwidth  double, bytes per second.
// Conversions between types are explicit (named constructors and accessors); arithmetic that mixes
// types exists only where it has a physical meaning (Bytes / Bandwidth -> Time, Flops / FlopRate -> Time).
// Unit strings ("400 Gb/s", "80 GiB", "1.5 us") are parsed at the edges, in core/unit_parse.h.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

#include "core/assert.h"

namespace orrery {

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ps(int64_t v) { return Time(v); }
  static constexpr Time ns(int64_t v) { return Time(v * 1000); }
  static constexpr Time us(int64_t v) { return Time(v * 1000 * 1000); }
  static constexpr Time ms(int64_t v) { return Time(v * 1000 * 1000 * 1000); }
  // Rounds to the nearest picosecond. REQUIRES: |s| < 9.2e6 and finite.
  static Time seconds(double s) {
    ORRERY_ASSERT(std::isfinite(s) && std::fabs(s) < 9.2e6);
    return Time(std::llround(s * 1e12));
  }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t picoseconds() const { return ps_; }
  constexpr double to_seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double to_ms() const { return static_cast<double>(ps_) * 1e-9; }
  constexpr double to_us() const { return static_cast<double>(ps_) * 1e-6; }

  constexpr Time operator+(Time o) const { return Time(ps_ + o.ps_); }
  constexpr Time operator-(Time o) const { return Time(ps_ - o.ps_); }
  constexpr Time& operator+=(Time o) { ps_ += o.ps_; return *this; }
  constexpr Time& operator-=(Time o) { ps_ -= o.ps_; return *this; }
  constexpr Time operator*(int64_t k) const { return Time(ps_ * k); }
  constexpr double operator/(Time o) const { return static_cast<double>(ps_) / static_cast<double>(o.ps_); }
  constexpr auto operator<=>(const Time&) const = default;

 private:
  constexpr explicit Time(int64_t v) : ps_(v) {}
  int64_t ps_ = 0;
};

class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(int64_t n) : n_(n) {}
  static constexpr Bytes KiB(int64_t v) { return Bytes(v << 10); }
  static constexpr Bytes MiB(int64_t v) { return Bytes(v << 20); }
  static constexpr Bytes GiB(int64_t v) { return Bytes(v << 30); }
  // Rounds to the nearest byte. REQUIRES: finite and within int64.
  static Bytes from_double(double v) {
    ORRERY_ASSERT(std::isfinite(v) && std::fabs(v) < 9.2e18);
    return Bytes(std::llround(v));
  }
  constexpr int64_t count() const { return n_; }
  constexpr double to_double() const { return static_cast<double>(n_); }
  constexpr double to_gib() const { return static_cast<double>(n_) / static_cast<double>(int64_t{1} << 30); }
  constexpr double to_gb() const { return static_cast<double>(n_) * 1e-9; }

  constexpr Bytes operator+(Bytes o) const { return Bytes(n_ + o.n_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(n_ - o.n_); }
  constexpr Bytes& operator+=(Bytes o) { n_ += o.n_; return *this; }
  constexpr Bytes& operator-=(Bytes o) { n_ -= o.n_; return *this; }
  constexpr Bytes operator*(int64_t k) const { return Bytes(n_ * k); }
  constexpr double operator/(Bytes o) const { return static_cast<double>(n_) / static_cast<double>(o.n_); }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  int64_t n_ = 0;
};

// Defines a double-valued strong type with the usual linear arithmetic.
#define ORRERY_DOUBLE_UNIT(Name, accessor)                                                       \
  class Name {                                                                                   \
   public:                                                                                       \
    constexpr Name() = default;                                                                  \
    constexpr explicit Name(double v) : v_(v) {}                                                 \
    constexpr double accessor() const { return v_; }                                             \
    constexpr Name operator+(Name o) const { return Name(v_ + o.v_); }                           \
    constexpr Name operator-(Name o) const { return Name(v_ - o.v_); }                           \
    constexpr Name& operator+=(Name o) { v_ += o.v_; return *this; }                             \
    constexpr Name& operator-=(Name o) { v_ -= o.v_; return *this; }                             \
    constexpr Name operator*(double k) const { return Name(v_ * k); }                            \
    constexpr Name operator/(double k) const { return Name(v_ / k); }                            \
    constexpr double operator/(Name o) const { return v_ / o.v_; }                               \
    constexpr auto operator<=>(const Name&) const = default;                                     \
                                                                                                 \
   private:                                                                                      \
    double v_ = 0.0;                                                                             \
  }

ORRERY_DOUBLE_UNIT(Flops, count);               // floating-point operations
ORRERY_DOUBLE_UNIT(FlopRate, per_second);       // FLOP/s
ORRERY_DOUBLE_UNIT(Bandwidth, bytes_per_second);  // B/s
ORRERY_DOUBLE_UNIT(Power, watts);               // W

#undef ORRERY_DOUBLE_UNIT

// Physically meaningful mixed arithmetic.
inline Time operator/(Bytes b, Bandwidth bw) { return Time::seconds(b.to_double() / bw.bytes_per_second()); }
inline Time operator/(Flops f, FlopRate r) { return Time::seconds(f.count() / r.per_second()); }
inline Bandwidth operator/(Bytes b, Time t) { return Bandwidth(b.to_double() / t.to_seconds()); }
inline FlopRate operator/(Flops f, Time t) { return FlopRate(f.count() / t.to_seconds()); }

}  // namespace orrery
