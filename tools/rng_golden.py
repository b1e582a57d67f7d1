#!/usr/bin/env python3
"""Independent reference for orrery's random streams (src/core/random.h).

Pure Python, written from the published algorithms rather than from the C++ code, so that
src/core/random_test.cc can compare the C++ implementation against values it did not produce:

  FNV-1a 64-bit      Fowler, Noll & Vo; offset basis 0xcbf29ce484222325, prime 0x100000001b3.
  splitmix64         Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
                     OOPSLA 2014; constants from Vigna's reference splitmix64.c.
  xoshiro256**       Blackman & Vigna, "Scrambled linear pseudorandom number generators", 2018
                     (reference xoshiro256starstar.c).
  stream derivation  x = seed XOR fnv1a64(path); the four state words are four successive
                     splitmix64 outputs starting from x. A child's path is parent_path + "/" + name.
  uniform01          (next >> 11) * 2^-53, in [0, 1).
  open01             ((next >> 12) + 0.5) * 2^-52, in (0, 1).
  uniform_int(n)     Lemire, "Fast random integer generation in an interval", ACM TOMACS 2019.
  Exponential(rate)  inversion: -ln(open01()) / rate.
  Normal(mu, sigma)  Marsaglia & Bray 1964 polar method, second variate discarded.

Run:  python3 tools/rng_golden.py
The printed lines are pasted into random_test.cc; rerun this script if the algorithms change.
"""

import math

MASK64 = (1 << 64) - 1


def fnv1a64(data: bytes, h: int = 0xCBF29CE484222325) -> int:
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & MASK64
    return h


class SplitMix64:
    def __init__(self, seed: int):
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & MASK64


class Xoshiro256StarStar:
    def __init__(self, seed: int, path: str):
        sm = SplitMix64(seed ^ fnv1a64(path.encode("utf-8")))
        self.s = [sm.next() for _ in range(4)]
        assert any(self.s), "all-zero xoshiro state"
        self.seed = seed
        self.path = path

    def child(self, name: str) -> "Xoshiro256StarStar":
        return Xoshiro256StarStar(self.seed, self.path + "/" + name)

    def next_u64(self) -> int:
        s = self.s
        result = (rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform01(self) -> float:
        return (self.next_u64() >> 11) * 2.0**-53

    def open01(self) -> float:
        return ((self.next_u64() >> 12) + 0.5) * 2.0**-52

    def uniform_int(self, n: int) -> int:
        m = self.next_u64() * n
        low = m & MASK64
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next_u64() * n
                low = m & MASK64
        return m >> 64

    def exponential(self, rate: float) -> float:
        return -math.log(self.open01()) / rate

    def normal(self, mu: float, sigma: float) -> float:
        while True:
            u = 2.0 * self.uniform01() - 1.0
            v = 2.0 * self.uniform01() - 1.0
            s = u * u + v * v
            if 0.0 < s < 1.0:
                return mu + sigma * u * math.sqrt(-2.0 * math.log(s) / s)


def u64_list(values):
    return ", ".join(f"{v}u" for v in values)


def float_list(values):
    return ", ".join(repr(v) for v in values)


def self_check():
    """Checks this script against published vectors before it prints anything."""
    # FNV-1a 64 of "a": 0xaf63dc4c8601ec8c (test vectors in Fowler/Noll/Vo's reference fnv_test.c).
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    # splitmix64 seeded with 1234567 (Vigna's splitmix64.c; the same vector is in many RNG test suites).
    sm = SplitMix64(1234567)
    assert [sm.next() for _ in range(3)] == [6457827717110365317, 3203168211198807973, 9817491932198370423]
    # xoshiro256** from state {1, 2, 3, 4} (reference xoshiro256starstar.c; rand_xoshiro's test vector).
    x = Xoshiro256StarStar(0, "")
    x.s = [1, 2, 3, 4]
    assert [x.next_u64() for _ in range(6)] == [11520, 0, 1509978240, 1215971899390074240,
                                               1216172134540287360, 607988272756665600]


def main():
    self_check()
    sm = SplitMix64(1234567)
    print("splitmix64(1234567) first 3:", u64_list(sm.next() for _ in range(3)))
    print('fnv1a64("") =', f"{fnv1a64(b'')}u")
    print('fnv1a64("a") =', f"{fnv1a64(b'a')}u")
    print('fnv1a64("serve.arrivals") =', f"{fnv1a64(b'serve.arrivals')}u")

    r = Xoshiro256StarStar(42, "serve.arrivals")
    print('derive(42, "serve.arrivals") next_u64 x5:', u64_list(r.next_u64() for _ in range(5)))
    r = Xoshiro256StarStar(0, "")
    print('derive(0, "") next_u64 x5:', u64_list(r.next_u64() for _ in range(5)))
    r = Xoshiro256StarStar(42, "serve.arrivals").child("gpu0")
    print('derive(42, "serve.arrivals").child("gpu0") next_u64 x3:', u64_list(r.next_u64() for _ in range(3)))
    r = Xoshiro256StarStar(42, "serve.arrivals")
    print('derive(42, "serve.arrivals") uniform01 x4:', float_list(r.uniform01() for _ in range(4)))
    r = Xoshiro256StarStar(42, "serve.arrivals")
    print('derive(42, "serve.arrivals") open01 x3:', float_list(r.open01() for _ in range(3)))
    r = Xoshiro256StarStar(7, "golden.exponential")
    print('derive(7, "golden.exponential") Exponential(2.0) x5:', float_list(r.exponential(2.0) for _ in range(5)))
    r = Xoshiro256StarStar(7, "golden.uniform_int")
    print('derive(7, "golden.uniform_int") uniform_int(6) x10:', ", ".join(str(r.uniform_int(6)) for _ in range(10)))
    r = Xoshiro256StarStar(7, "golden.uniform_int")
    n = 3 << 62
    print('derive(7, "golden.uniform_int") uniform_int(3<<62) x4:', u64_list(r.uniform_int(n) for _ in range(4)))
    r = Xoshiro256StarStar(7, "golden.normal")
    print('derive(7, "golden.normal") Normal(1.0, 2.0) x4:', float_list(r.normal(1.0, 2.0) for _ in range(4)))


if __name__ == "__main__":
    main()
