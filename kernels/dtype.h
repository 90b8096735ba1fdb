#pragma once
// Element types and exact host-side conversions. fp16/bf16 are stored as their 16-bit patterns;
// conversions from fp32 round to nearest even and follow the hardware on overflow (to inf),
// subnormals (kept, fp16) and NaN (stays NaN, quiet). The FP8 formats (amp_fp8's GEMM operands,
// one byte each) are encoded with a scale by their own op and coded in kernels/fp8.h.
#include <cstdint>
#include <cstring>
#include <string>

namespace mpbench {

enum class DType { F32, F16, BF16, I32, F8E4M3, F8E5M2 };

inline size_t dtype_size(DType t) {
  if (t == DType::F8E4M3 || t == DType::F8E5M2) return 1;
  return (t == DType::F32 || t == DType::I32) ? 4 : 2;
}
inline bool is_fp8(DType t) {
  return t == DType::F8E4M3 || t == DType::F8E5M2;
}
// "fp32", "fp16", "bf16", "int32", "fp8_e4m3", "fp8_e5m2"
const char* dtype_name(DType t);

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_f32(uint16_t h) {
  return bits_f32(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even; overflows into inf exactly like the hardware
  return static_cast<uint16_t>(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    u = sign | ((112u - e) << 23) | ((man & 0x3ffu) << 13);
  }
  return bits_f32(u);
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (absu < 0x38800000u) {
    // Result is subnormal (or zero) in fp16: value = m * 2^-24, round m to nearest even.
    if (absu < 0x33000000u) return sign;  // below half the smallest subnormal: +-0
    uint32_t e = absu >> 23;
    uint32_t man = (absu & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // 113 - e + 13
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t lsb = (absu >> 13) & 1u;
  absu += 0xfffu + lsb;
  return static_cast<uint16_t>(sign | (((absu >> 23) - 112u) << 10) | ((absu >> 13) & 0x3ffu));
}

// TF32 keeps fp32's exponent and 10 mantissa bits; the tensor cores round the inputs to nearest.
inline float round_to_tf32(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return f;  // inf / NaN unchanged
  u += 0xfffu + ((u >> 13) & 1u);
  u &= 0xffffe000u;
  return bits_f32(u);
}

}  // namespace mpbench
