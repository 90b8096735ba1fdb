// FP8 numerics on the host (kernels/fp8.h): every one of the 256 codes of E4M3 and E5M2 decoded
// and encoded back, the values the formats are defined by, round-to-nearest-even at every
// boundary between neighbours, saturation, NaN and signed zero; and Transformer Engine's delayed
// scaling against sequences worked out by hand.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "kernels/error.h"
#include "kernels/fp8.h"

namespace mpbench {
namespace {

constexpr DType kFormats[] = {DType::F8E4M3, DType::F8E5M2};

bool is_nan_code(uint8_t c, DType f) {
  return f == DType::F8E4M3 ? (c & 0x7F) == 0x7F : (c & 0x7F) > 0x7C;
}

TEST(Fp8, DefiningValues) {
  const DType e4 = DType::F8E4M3, e5 = DType::F8E5M2;
  EXPECT_EQ(fp8_to_f32(0x38, e4), 1.0f);
  EXPECT_EQ(fp8_to_f32(0x7E, e4), 448.0f);
  EXPECT_EQ(fp8_to_f32(0xFE, e4), -448.0f);
  EXPECT_EQ(fp8_to_f32(0x08, e4), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8_to_f32(0x01, e4), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_to_f32(0x07, e4), 7 * std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8_to_f32(0x7F, e4)));
  EXPECT_TRUE(std::isnan(fp8_to_f32(0xFF, e4)));
  EXPECT_EQ(fp8_to_f32(0x3C, e5), 1.0f);
  EXPECT_EQ(fp8_to_f32(0x7B, e5), 57344.0f);
  EXPECT_EQ(fp8_to_f32(0x04, e5), std::ldexp(1.0f, -14));
  EXPECT_EQ(fp8_to_f32(0x01, e5), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_to_f32(0x7C, e5), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8_to_f32(0xFC, e5), -std::numeric_limits<float>::infinity());
  for (uint8_t c : {0x7D, 0x7E, 0x7F}) EXPECT_TRUE(std::isnan(fp8_to_f32(c, e5))) << int(c);
  EXPECT_EQ(fp8_max(e4), 448.0f);
  EXPECT_EQ(fp8_max(e5), 57344.0f);
  EXPECT_STREQ(dtype_name(e4), "fp8_e4m3");
}

// Decoding all 256 codes and encoding them back gives the code itself (NaNs: a NaN code), and
// the finite values are strictly increasing with the code on each side of zero.
TEST(Fp8, EveryCodeRoundTrips) {
  for (DType f : kFormats) {
    SCOPED_TRACE(dtype_name(f));
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const float v = fp8_to_f32(code, f);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(is_nan_code(code, f)) << c;
        EXPECT_TRUE(is_nan_code(f32_to_fp8(v, f), f)) << c;
        continue;
      }
      if (std::isinf(v)) {
        ++infs;
        continue;  // saturating: encodes to the largest finite (below)
      }
      EXPECT_EQ(f32_to_fp8(v, f), code) << c << " = " << v;
      EXPECT_EQ(std::signbit(v), (code & 0x80) != 0) << c;
      if ((c & 0x7F) > 0 && !is_nan_code(static_cast<uint8_t>(c - 1), f)) {
        const float below = std::fabs(fp8_to_f32(static_cast<uint8_t>(c - 1), f));
        EXPECT_LT(below, std::fabs(v)) << c;
      }
    }
    EXPECT_EQ(nans, f == DType::F8E4M3 ? 2 : 6);
    EXPECT_EQ(infs, f == DType::F8E4M3 ? 0 : 2);
  }
}

// Between every two neighbouring finite values, the midpoint goes to the one with an even
// mantissa (an even code) and anything off it to the nearer one.
TEST(Fp8, RoundsToNearestEvenAtEveryBoundary) {
  for (DType f : kFormats) {
    SCOPED_TRACE(dtype_name(f));
    for (int c = 0; c < 127; ++c) {
      const uint8_t lo = static_cast<uint8_t>(c), hi = static_cast<uint8_t>(c + 1);
      const float a = fp8_to_f32(lo, f), b = fp8_to_f32(hi, f);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const float mid = (a + b) / 2;  // exact: one more bit than fp8 has
      for (float sign : {1.0f, -1.0f}) {
        const uint8_t s = sign < 0 ? 0x80 : 0;
        EXPECT_EQ(f32_to_fp8(sign * mid, f), s | (c % 2 == 0 ? lo : hi)) << c;
        EXPECT_EQ(f32_to_fp8(sign * std::nextafter(mid, 0.0f), f), s | lo) << c;
        EXPECT_EQ(f32_to_fp8(sign * std::nextafter(mid, INFINITY), f), s | hi) << c;
      }
    }
  }
}

TEST(Fp8, SaturatesKeepsNanAndTheSignOfZero) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_fp8(449.0f, DType::F8E4M3), 0x7E);
  EXPECT_EQ(f32_to_fp8(464.0f, DType::F8E4M3), 0x7E);  // would round to 480, past the max
  EXPECT_EQ(f32_to_fp8(1e30f, DType::F8E4M3), 0x7E);
  EXPECT_EQ(f32_to_fp8(inf, DType::F8E4M3), 0x7E);
  EXPECT_EQ(f32_to_fp8(-inf, DType::F8E4M3), 0xFE);
  EXPECT_EQ(f32_to_fp8(61440.0f, DType::F8E5M2), 0x7B);
  EXPECT_EQ(f32_to_fp8(inf, DType::F8E5M2), 0x7B);
  EXPECT_EQ(f32_to_fp8(-1e38f, DType::F8E5M2), 0xFB);
  EXPECT_TRUE(std::isnan(fp8_to_f32(f32_to_fp8(std::nanf(""), DType::F8E4M3), DType::F8E4M3)));
  EXPECT_EQ(f32_to_fp8(0.0f, DType::F8E4M3), 0x00);
  EXPECT_EQ(f32_to_fp8(-0.0f, DType::F8E5M2), 0x80);
  // Half the smallest subnormal is a tie with zero, which is even; just above it is not.
  EXPECT_EQ(f32_to_fp8(std::ldexp(1.0f, -10), DType::F8E4M3), 0x00);
  EXPECT_EQ(f32_to_fp8(std::nextafter(std::ldexp(1.0f, -10), 1.0f), DType::F8E4M3), 0x01);
  EXPECT_EQ(f32_to_fp8(-std::ldexp(1.0f, -20), DType::F8E5M2), 0x80);
  // 1 + 2^-4 is the tie between 1 and 1.125 in E4M3 (even: 1); 1 + 3 * 2^-4 goes up to 1.25.
  EXPECT_EQ(fp8_to_f32(f32_to_fp8(1.0625f, DType::F8E4M3), DType::F8E4M3), 1.0f);
  EXPECT_EQ(fp8_to_f32(f32_to_fp8(1.1875f, DType::F8E4M3), DType::F8E4M3), 1.25f);
}

// History length 3, amax "max", margin 0, E4M3 (448): the scale follows the largest amax of the
// last three steps; a step whose amax is 0 leaves the scale as it was.
TEST(DelayedScaling, MaxOverTheHistoryWindow) {
  DelayedScalingRecipe r;
  r.amax_history_len = 3;
  DelayedScalingState s = make_delayed_scaling(r);
  EXPECT_EQ(s.scale, 1.0f);
  const float amaxes[] = {2.0f, 8.0f, 1.0f, 0.5f, 0.25f, 4.0f};
  const float want[] = {448.0f / 2, 448.0f / 8, 448.0f / 8, 448.0f / 8, 448.0f / 1, 448.0f / 4};
  for (int i = 0; i < 6; ++i) {
    record_amax(s, amaxes[i] / 2);
    record_amax(s, amaxes[i]);  // two casts in a step: the larger counts
    update_delayed_scaling(s, r, DType::F8E4M3);
    EXPECT_FLOAT_EQ(s.scale, want[i]) << "step " << i;
    EXPECT_EQ(s.amax_history[0], 0.0f);
  }
  EXPECT_FLOAT_EQ(s.amax_used, 4.0f);
  // A tensor whose amax is 0 (all zeros, say): the scale stays; so do NaN and inf amaxes.
  DelayedScalingRecipe one;
  one.amax_history_len = 1;
  DelayedScalingState z = make_delayed_scaling(one);
  for (float a : {0.0f, std::numeric_limits<float>::infinity()}) {
    record_amax(z, a);
    update_delayed_scaling(z, one, DType::F8E5M2);
    EXPECT_EQ(z.scale, 1.0f) << a;
  }
  record_amax(z, std::nanf(""));  // passed over: slot 0 stays 0
  update_delayed_scaling(z, one, DType::F8E5M2);
  EXPECT_EQ(z.scale, 1.0f);
  record_amax(z, 7.0f);
  update_delayed_scaling(z, one, DType::F8E5M2);
  EXPECT_FLOAT_EQ(z.scale, 57344.0f / 7.0f);
}

// most_recent takes the step's own amax; the margin divides by 2^margin; the history rolls as
// Transformer Engine's does (the newest amax to the end, slot 0 cleared for the next step).
TEST(DelayedScaling, MostRecentMarginAndTheRoll) {
  DelayedScalingRecipe r;
  r.amax_history_len = 4;
  r.amax_compute = AmaxCompute::MostRecent;
  r.margin = 2;
  DelayedScalingState s = make_delayed_scaling(r);
  record_amax(s, 8.0f);
  update_delayed_scaling(s, r, DType::F8E4M3);
  EXPECT_FLOAT_EQ(s.scale, 448.0f / 4 / 8.0f);
  EXPECT_EQ(s.amax_history, (std::vector<float>{0, 0, 0, 8}));
  record_amax(s, 2.0f);
  update_delayed_scaling(s, r, DType::F8E4M3);
  EXPECT_FLOAT_EQ(s.scale, 448.0f / 4 / 2.0f);  // not the history's 8
  EXPECT_EQ(s.amax_history, (std::vector<float>{0, 0, 8, 2}));
  DelayedScalingRecipe bad;
  bad.amax_history_len = 0;
  EXPECT_THROW(make_delayed_scaling(bad), Error);
}

}  // namespace
}  // namespace mpbench
