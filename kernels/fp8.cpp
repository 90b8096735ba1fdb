#include "kernels/fp8.h"

#include <cfenv>
#include <cmath>

#include "kernels/error.h"

namespace mpbench {

namespace {

struct Fp8Layout {
  int mantissa_bits, bias;
  float max;
  uint8_t nan;  // the canonical NaN, positive
};

Fp8Layout layout(DType f) {
  MPB_CHECK(is_fp8(f), "internal: {} is not an fp8 dtype", dtype_name(f));
  return f == DType::F8E4M3 ? Fp8Layout{3, 7, kE4M3Max, 0x7F} : Fp8Layout{2, 15, kE5M2Max, 0x7F};
}

// Rounds to the nearest integer, ties to even, whatever the caller's rounding mode.
float round_half_even(float v) {
  const float r = std::round(v);  // ties away from zero
  if (std::fabs(r - v) == 0.5f) return 2.0f * std::round(v / 2.0f);
  return r;
}

}  // namespace

float fp8_max(DType f) {
  return layout(f).max;
}

float fp8_clip_threshold(DType f) {
  const Fp8Layout l = layout(f);
  int e;
  std::frexp(l.max, &e);  // max = frac * 2^e: its step is 2^(e - 1 - mantissa bits)
  return l.max + std::ldexp(1.0f, e - 2 - l.mantissa_bits);
}

float fp8_scaled_max(DType f, int margin) {
  return fp8_max(f) * std::ldexp(1.0f, -margin);
}

uint8_t f32_to_fp8(float x, DType f) {
  const Fp8Layout l = layout(f);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | l.nan;
  float a = std::fabs(x);
  if (a > l.max) a = l.max;  // saturate (infinity included)
  const int m = l.mantissa_bits;
  const int min_exp = 1 - l.bias;  // of the smallest normal
  int e;
  std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1): the leading bit is 2^(e - 1)
  const int exp = std::max(e - 1, min_exp);
  // The step between neighbours at this exponent (subnormals share the smallest normal's).
  const float step = std::ldexp(1.0f, exp - m);
  const float q = round_half_even(a / step);  // exact division by a power of two
  // q in [0, 2^(m+1)]: below 2^m only for subnormals; 2^(m+1) carries into the next exponent,
  // which the code's layout does by itself (mantissa overflow increments the exponent field).
  uint32_t code;
  if (a < std::ldexp(1.0f, min_exp))
    code = static_cast<uint32_t>(q);  // subnormal (or the smallest normal, when it rounds up)
  else
    code = (static_cast<uint32_t>(exp + l.bias) << m) + (static_cast<uint32_t>(q) - (1u << m));
  return static_cast<uint8_t>(sign | code);
}

float fp8_to_f32(uint8_t code, DType f) {
  const Fp8Layout l = layout(f);
  const int m = l.mantissa_bits;
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int exp_field = (code & 0x7F) >> m;
  const int man = code & ((1 << m) - 1);
  const int exp_max = (1 << (7 - m)) - 1;
  if (f == DType::F8E4M3 && exp_field == exp_max && man == (1 << m) - 1) return std::nanf("");
  if (f == DType::F8E5M2 && exp_field == exp_max) return man == 0 ? sign * INFINITY : std::nanf("");
  if (exp_field == 0) return sign * std::ldexp(static_cast<float>(man), 1 - l.bias - m);
  return sign * std::ldexp(static_cast<float>((1 << m) + man), exp_field - l.bias - m);
}

DelayedScalingState make_delayed_scaling(const DelayedScalingRecipe& r) {
  MPB_CHECK(r.amax_history_len >= 1, "delayed scaling: amax history length {}", r.amax_history_len);
  DelayedScalingState s;
  s.amax_history.assign(static_cast<size_t>(r.amax_history_len), 0.0f);
  return s;
}

void record_amax(DelayedScalingState& s, float amax) {
  MPB_CHECK(!s.amax_history.empty(), "delayed scaling: no amax history");
  s.amax_history[0] = std::fmax(s.amax_history[0], amax);  // a NaN is passed over, as fmaxf does
}

void update_delayed_scaling(DelayedScalingState& s, const DelayedScalingRecipe& r, DType f) {
  MPB_CHECK(static_cast<int64_t>(s.amax_history.size()) == r.amax_history_len,
            "delayed scaling: history of {} slots, recipe {}", s.amax_history.size(),
            r.amax_history_len);
  delayed_scaling_update(s.amax_history.data(), r.amax_history_len, 1, r.amax_compute,
                         fp8_scaled_max(f, r.margin), &s.scale, &s.scale_inv, &s.amax_used);
}

}  // namespace mpbench
