#pragma once
// splitmix64 and xoshiro256**: small generators whose output is the same on every platform, so a
// seed gives the same data and initial weights everywhere (the std:: distributions do not promise
// that).
#include <cmath>
#include <cstdint>

namespace mpbench {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** with a Gaussian on top. Only integer arithmetic, IEEE division and sqrt, and log,
// so that the stream is the same on every platform (std::normal_distribution is not).
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) {
    uint64_t sm = seed ^ (0x6a09e667f3bcc909ull * (stream + 1));
    for (uint64_t& w : state_) w = splitmix64(sm);
  }
  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, n) without modulo bias worth mentioning (Lemire's multiply-high).
  uint32_t below(uint32_t n) {
    return static_cast<uint32_t>(((next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }
  // Uniform in (-1, 1) from 53 random bits.
  double uniform_pm1() { return static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0; }
  // Uniform in (0, 1), never 0 (its log is taken).
  double uniform01() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  // Marsaglia's polar method: no sin/cos, whose last bits vary between libms.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = uniform_pm1();
      v = uniform_pm1();
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
  }
  // Gamma(shape, 1) for shape >= 1: Marsaglia and Tsang's method.
  double gamma(double shape) {
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      const double x = normal(), t = 1.0 + c * x;
      if (t <= 0) continue;
      const double v = t * t * t;
      if (std::log(uniform01()) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace mpbench
