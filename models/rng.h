#pragma once
// splitmix64: a tiny generator whose output is the same on every platform, so a seed gives the
// same data and initial weights everywhere (the std:: distributions do not promise that).
#include <cstdint>

namespace mpbench {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace mpbench
