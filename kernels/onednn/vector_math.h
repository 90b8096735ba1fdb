#pragma once
// Branch-free float functions that the native backend's vector loops inline, where libm's would
// keep a loop scalar.
#include <cstdint>
#include <cstring>

namespace mpbench::onednn {

// exp(x) for x <= 0 (a stable softmax's arguments), -inf (0) or NaN (NaN): Cephes' expf, within
// 2 ulp of libm's in [-87, 0]; below -87, where the result is under 1e-38, 0.
inline float exp_nonpositive(float x) {
  // Keeps 2^n a normal float; NaN too goes to -87 (its result is replaced below), since converting
  // NaN to an integer is undefined.
  const float xc = x >= -87.0f ? x : -87.0f;
  // n = round(xc / ln 2) by the 1.5 * 2^23 trick, r = xc - n ln 2 in two parts (exact n * hi).
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  const float y = x < -87.0f ? 0.0f : p * two_n;
  return x != x ? x : y;
}

// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|): within about 1e-7 of libm's absolutely
// (relatively less near 0, where 1 - e cancels): what GELU needs, which adds it to 1. +-inf give
// +-1, NaN NaN.
inline float tanh_approx(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float e = exp_nonpositive(-2.0f * ax);
  const float t = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -t : t;
}

}  // namespace mpbench::onednn
