// Conversions between float dtypes, and fill.
// Rounding, overflow, subnormals and NaN follow the hardware through kernels/dtype.h.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"
#include "kernels/fp8.h"

namespace mpbench::cpu {

using detail::dispatch_float;

namespace {

// Every fp16 value decoded once by f16_to_f32 (256 KiB): the GEMM decodes its fp16 operands, and
// a load from the table is several times cheaper than the branchy bit manipulation.
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

}  // namespace

// src: (n) any float or fp8 dtype -> out: (n) fp32.
void decode_f32(const Tensor& src, float* out, int64_t n) {
  if (is_fp8(src.dtype)) {  // 256 codes: decoded once into a table
    float table[256];
    for (int c = 0; c < 256; ++c) table[c] = fp8_to_f32(static_cast<uint8_t>(c), src.dtype);
    const uint8_t* s = src.ptr<uint8_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = table[s[i]];
    return;
  }
  if (src.dtype == DType::F16) {
    const float* table = f16_table();
    const uint16_t* s = src.ptr<uint16_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = table[s[i]];
    return;
  }
  dispatch_float(src.dtype, [&](auto e) {
    using E = decltype(e);
    const auto* s = src.ptr<typename E::T>();
    for (int64_t i = 0; i < n; ++i) out[i] = E::load(s[i]);
  });
}

// in: (n) fp32 -> dst: (n) any float dtype, rounded to nearest even.
void encode_f32(const float* in, Tensor& dst, int64_t n) {
  dispatch_float(dst.dtype, [&](auto e) {
    using E = decltype(e);
    auto* d = dst.ptr<typename E::T>();
    for (int64_t i = 0; i < n; ++i) d[i] = E::store(in[i]);
  });
}

// src, dst: same numel, any float dtypes. fp16 <-> bf16 goes through fp32, which holds both
// exactly, so there is one rounding.
void CpuBackend::cast_impl(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.dtype == dst.dtype) {
    std::memmove(dst.data, src.data, src.bytes());
    return;
  }
  if (src.dtype == DType::F16 && dst.dtype == DType::F32) {
    decode_f32(src, dst.ptr<float>(), n);
    return;
  }
  dispatch_float(src.dtype, [&](auto es) {
    using Es = decltype(es);
    dispatch_float(dst.dtype, [&](auto ed) {
      using Ed = decltype(ed);
      const auto* s = src.ptr<typename Es::T>();
      auto* d = dst.ptr<typename Ed::T>();
      for (int64_t i = 0; i < n; ++i) d[i] = Ed::store(Es::load(s[i]));
    });
  });
}

void CpuBackend::round_to_impl(Tensor& t, DType to) {
  auto* d = t.ptr<float>();
  const int64_t n = t.numel();
  dispatch_float(to, [&](auto e) {
    using E = decltype(e);
    for (int64_t i = 0; i < n; ++i) d[i] = E::load(E::store(d[i]));
  });
}

// t: any shape and dtype.
void CpuBackend::fill_impl(Tensor& t, float value) {
  const int64_t n = t.numel();
  if (t.dtype == DType::I32) {
    auto* d = t.ptr<int32_t>();
    const auto v = static_cast<int32_t>(value);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
    return;
  }
  dispatch_float(t.dtype, [&](auto e) {
    using E = decltype(e);
    const auto v = E::store(value);
    auto* d = t.ptr<typename E::T>();
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

void load_row(const Tensor& t, int64_t r, int64_t n, float* out) {
  decode_f32(t.slice(r * n, Shape{n}), out, n);
}

void store_row(const float* in, Tensor& t, int64_t r, int64_t n) {
  Tensor row = t.slice(r * n, Shape{n});
  encode_f32(in, row, n);
}

}  // namespace mpbench::cpu
