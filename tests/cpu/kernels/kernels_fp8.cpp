// FP8 numerics on the host (kernels/fp8.h): every one of the 256 codes of E4M3 and E5M2 decoded
// and encoded back, the values the formats are defined by, round-to-nearest-even at every
// boundary between neighbours, saturation, NaN and signed zero; and Transformer Engine's delayed
// scaling against sequences worked out by hand; then the CPU backend's FP8 ops (the scaled cast
// with its amax and transpose, the FP8 GEMM, the batched update) against those host rules.
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "kernels/fp8.h"
#include "test_util.h"

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

// A step whose amax is 0 is no step for the tensor's scaling, as in TE's bulk update: the history
// does not roll (a window of 3 still holds the 8 two zero steps later) and the scale stays.
TEST(DelayedScaling, AZeroAmaxStepNeitherRollsNorRescales) {
  DelayedScalingRecipe r;
  r.amax_history_len = 3;
  DelayedScalingState s = make_delayed_scaling(r);
  record_amax(s, 8.0f);
  update_delayed_scaling(s, r, DType::F8E4M3);
  const std::vector<float> after_8 = s.amax_history;
  for (int i = 0; i < 2; ++i) {
    update_delayed_scaling(s, r, DType::F8E4M3);
    EXPECT_EQ(s.amax_history, after_8);
    EXPECT_FLOAT_EQ(s.scale, 448.0f / 8);
    EXPECT_EQ(s.amax_used, 0.0f);
  }
  record_amax(s, 1.0f);
  update_delayed_scaling(s, r, DType::F8E4M3);
  EXPECT_FLOAT_EQ(s.scale, 448.0f / 8);  // the 8 is still in the window
  EXPECT_EQ(s.amax_used, 8.0f);
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

// An amax so small that fp8_max / amax overflows: the scale is FLT_MAX (TE's update), and
// scale_inv its inverse.
TEST(DelayedScaling, OverflowingScaleIsFltMaxAndScaleInvFollows) {
  DelayedScalingRecipe r;
  r.amax_history_len = 2;
  DelayedScalingState s = make_delayed_scaling(r);
  record_amax(s, 1e-38f);
  update_delayed_scaling(s, r, DType::F8E4M3);
  EXPECT_EQ(s.scale, FLT_MAX);
  EXPECT_EQ(s.scale_inv, 1.0f / FLT_MAX);
  record_amax(s, 3.5f);
  update_delayed_scaling(s, r, DType::F8E4M3);
  EXPECT_FLOAT_EQ(s.scale, 128.0f);  // max(1e-38, 3.5) = 3.5: 448 / 3.5
  EXPECT_FLOAT_EQ(s.scale_inv, 1.0f / 128.0f);
}

// ---- the CPU backend's FP8 ops -------------------------------------------------------------

class CpuFp8 : public test::CpuOpsTest {
 protected:
  float read(const Tensor& t) { return test::to_host_f32(*be, t)[0]; }
  std::vector<uint8_t> codes(const Tensor& t) {
    std::vector<uint8_t> c(t.numel());
    be->download(t, c.data());
    return c;
  }
};

// Each element is x * scale rounded once in fp32, then encoded; the amax is the max |x| (NaN
// passed over) folded into what the slot held; the transposed copy holds the same codes.
TEST_F(CpuFp8, CastScalesRecordsTheAmaxAndTransposes) {
  const std::vector<float> x = {0.5f, -3.0f, 1000.0f, std::nanf(""), 0.001f, -0.0f};
  Tensor src = make(Shape{2, 3}, DType::BF16, x);
  const std::vector<float> xs = test::to_host_f32(*be, src);  // the bf16 values
  for (DType f : kFormats) {
    SCOPED_TRACE(dtype_name(f));
    Tensor scale = scalar(4.0f), amax = scalar(2.0f);
    Tensor dst = alloc.alloc(Shape{2, 3}, f, MemCategory::Activations);
    Tensor dst_t = alloc.alloc(Shape{3, 2}, f, MemCategory::Activations);
    be->cast_to_fp8(src, scale, &amax, dst, &dst_t);
    const std::vector<uint8_t> c = codes(dst), ct = codes(dst_t);
    for (int64_t i = 0; i < 6; ++i) {
      EXPECT_EQ(c[i], f32_to_fp8(xs[i] * 4.0f, f)) << i;
      EXPECT_EQ(ct[(i % 3) * 2 + i / 3], c[i]) << i;
    }
    EXPECT_EQ(read(amax), xs[2]);  // 1000 in bf16; the NaN passed over
    // Without an amax (evaluation) nothing is recorded; a larger amax already there stays.
    Tensor big = scalar(5000.0f);
    be->cast_to_fp8(src, scale, &big, dst);
    EXPECT_EQ(read(big), 5000.0f);
    be->cast_to_fp8(src, scale, nullptr, dst);
    EXPECT_EQ(codes(dst), c);
  }
  Tensor scale = scalar(1.0f);
  Tensor bad = alloc.alloc(Shape{2, 3}, DType::BF16, MemCategory::Activations);
  EXPECT_THROW(be->cast_to_fp8(src, scale, nullptr, bad), Error);
  Tensor wrong_t = alloc.alloc(Shape{2, 3}, DType::F8E4M3, MemCategory::Activations);
  Tensor dst = alloc.alloc(Shape{2, 3}, DType::F8E4M3, MemCategory::Activations);
  EXPECT_THROW(be->cast_to_fp8(src, scale, nullptr, dst, &wrong_t), Error);
  EXPECT_THROW(be->fill(dst, 0.0f), Error);
}

// C = alpha * sa * sb * sum_k A[i,k] B[j,k] (+ bias, act), from the operands' decoded values,
// in every output dtype and with mixed formats (the backward GEMMs' e5m2 x e4m3). The bf16 bias
// also off a 16-byte boundary, which sends CUDA's FP8 GEMM down its unfused path (the bias and
// activation added to fp32 or bf16 C afterwards): the same case on both backends.
TEST_F(CpuFp8, GemmMatchesTheScaledReference) {
  const int64_t m = 32, n = 16, k = 48;
  const std::vector<float> av = test::random_nonzero(m * k, 81, 6.0f);
  const std::vector<float> bv = test::random_nonzero(n * k, 82, 6.0f);
  const std::vector<float> biasv = test::random_nonzero(n + 1, 83);
  for (DType fa : kFormats) {
    for (DType cdt : {DType::BF16, DType::F32}) {
      for (Activation act : {Activation::None, Activation::Gelu}) {
        for (int64_t off : {0, 1}) {
          SCOPED_TRACE(std::string(dtype_name(fa)) + " -> " + dtype_name(cdt) + " " +
                       activation_name(act) + (off ? " unaligned bias" : ""));
          Tensor a = make(Shape{m, k}, fa, av), b = make(Shape{n, k}, DType::F8E4M3, bv);
          Tensor bias = make(Shape{n + 1}, DType::BF16, biasv).slice(off, Shape{n});
          Tensor c = alloc.alloc(Shape{m, n}, cdt, MemCategory::Activations);
          Tensor sa = scalar(0.25f), sb = scalar(1.0f / 64);
          GemmDesc d;
          d.trans_b = true;
          d.math = GemmMath::LowPrecision;
          d.alpha = 2.0f;
          d.act = act;
          d.bias = &bias;
          d.a_scale_inv = &sa;
          d.b_scale_inv = &sb;
          be->gemm(d, a, b, c);
          const std::vector<float> ah = test::to_host_f32(*be, a), bh = test::to_host_f32(*be, b);
          const std::vector<float> bias_h = test::to_host_f32(*be, bias);
          std::vector<float> want(m * n), scale(m * n);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double acc = 0, mag = 0;
              for (int64_t p = 0; p < k; ++p) {
                acc += static_cast<double>(ah[i * k + p]) * bh[j * k + p];
                mag += std::fabs(static_cast<double>(ah[i * k + p]) * bh[j * k + p]);
              }
              // The activation takes the GEMM's output rounded to C's dtype (GemmDesc).
              const float v =
                  test::round_to(cdt, static_cast<float>(2.0 * 0.25 / 64 * acc + bias_h[j]));
              want[i * n + j] =
                  test::round_to(cdt, static_cast<float>(test::activation_ref(act, v)));
              scale[i * n + j] = static_cast<float>(2.0 * 0.25 / 64 * mag + std::fabs(bias_h[j]));
            }
          const auto r = test::compare(test::to_host_f32(*be, c), want,
                                       test::tolerance_for(cdt, GemmMath::LowPrecision), &scale);
          EXPECT_TRUE(r.ok) << r.message;
        }
      }
    }
  }
}

// Code 0xff is a NaN in both formats (E4M3's NaNs are 0x7f and 0xff, it has no inf): an operand
// row holding one gives a row of NaN, the other rows stay finite.
TEST_F(CpuFp8, GemmDecodesTheNaNCode) {
  const int64_t m = 16, n = 16, k = 16;
  for (DType fa : kFormats) {
    SCOPED_TRACE(dtype_name(fa));
    Tensor a = make(Shape{m, k}, fa, test::random_nonzero(m * k, 84));
    Tensor b = make(Shape{n, k}, DType::F8E4M3, test::random_nonzero(n * k, 85));
    a.ptr<uint8_t>()[3] = 0xff;  // row 0
    Tensor c = alloc.alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
    Tensor one = scalar(1.0f);
    GemmDesc d;
    d.trans_b = true;
    d.math = GemmMath::LowPrecision;
    d.a_scale_inv = &one;
    d.b_scale_inv = &one;
    be->gemm(d, a, b, c);
    const std::vector<float> got = test::to_host_f32(*be, c);
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_TRUE(std::isnan(got[j])) << "row 0, column " << j << ": " << got[j];
      EXPECT_TRUE(std::isfinite(got[n + j])) << "row 1, column " << j << ": " << got[n + j];
    }
  }
}

// What cuBLASLt's FP8 kernels cannot take is refused on every backend alike.
TEST_F(CpuFp8, GemmRefusesWhatCublasLtCannotRun) {
  auto t = [&](Shape s, DType dt) { return alloc.alloc(s, dt, MemCategory::Activations); };
  Tensor sa = scalar(1.0f), sb = scalar(1.0f);
  Tensor a = t(Shape{16, 32}, DType::F8E4M3), b = t(Shape{16, 32}, DType::F8E4M3);
  Tensor c = t(Shape{16, 16}, DType::BF16);
  GemmDesc ok;
  ok.trans_b = true;
  ok.math = GemmMath::LowPrecision;
  ok.a_scale_inv = &sa;
  ok.b_scale_inv = &sb;
  EXPECT_NO_THROW(be->gemm(ok, a, b, c));
  GemmDesc nn = ok;
  nn.trans_b = false;  // B (K, N): not the TN layout
  Tensor b_kn = t(Shape{32, 16}, DType::F8E4M3);
  EXPECT_THROW(be->gemm(nn, a, b_kn, c), Error);
  GemmDesc no_scale = ok;
  no_scale.b_scale_inv = nullptr;
  EXPECT_THROW(be->gemm(no_scale, a, b, c), Error);
  Tensor a5 = t(Shape{16, 32}, DType::F8E5M2), b5 = t(Shape{16, 32}, DType::F8E5M2);
  EXPECT_THROW(be->gemm(ok, a5, b5, c), Error);  // e5m2 x e5m2
  Tensor c8 = t(Shape{16, 16}, DType::F8E4M3), c16 = t(Shape{16, 16}, DType::F16);
  EXPECT_THROW(be->gemm(ok, a, b, c8), Error);
  EXPECT_THROW(be->gemm(ok, a, b, c16), Error);
  Tensor a_odd = t(Shape{10, 32}, DType::F8E4M3), c_odd = t(Shape{10, 16}, DType::BF16);
  EXPECT_THROW(be->gemm(ok, a_odd, b, c_odd), Error);  // M = 10
  Tensor bias32 = t(Shape{16}, DType::F32);
  GemmDesc fbias = ok;
  fbias.bias = &bias32;
  EXPECT_THROW(be->gemm(fbias, a, b, c), Error);  // an FP8 GEMM's bias is bf16
  GemmDesc beta = ok;
  beta.beta = 1.0f;
  EXPECT_THROW(be->gemm(beta, a, b, c), Error);  // cuBLASLt's FP8 GEMM adds no C
  Tensor db = t(Shape{16}, DType::F32);
  GemmDesc bwd = ok;
  bwd.dbias = &db;
  EXPECT_THROW(be->gemm(bwd, a, b, c), Error);
  Tensor abf = t(Shape{16, 32}, DType::BF16);
  EXPECT_THROW(be->gemm(ok, abf, b, c), Error);  // bf16 x fp8
}

// The backend's batched update is the host rule column by column (the history slot major), for
// each format, with a tensor whose amax stays 0 (its scale stays 1).
TEST_F(CpuFp8, BatchedUpdateIsTheHostRulePerColumn) {
  DelayedScalingRecipe r;
  r.amax_history_len = 5;  // not the tensors' 3: a transposed history fails
  r.margin = 1;
  for (DType f : kFormats) {
    SCOPED_TRACE(dtype_name(f));
    Tensor hist = alloc.alloc(Shape{5, 3}, DType::F32, MemCategory::Activations);
    Tensor scale = make(Shape{3}, DType::F32, {1, 1, 1}),
           inv = make(Shape{3}, DType::F32, {1, 1, 1});
    Tensor used = make(Shape{3}, DType::F32, {0, 0, 0});
    be->fill(hist, 0.0f);
    std::vector<DelayedScalingState> host(3, make_delayed_scaling(r));
    Tensor code = alloc.alloc(Shape{1}, f, MemCategory::Activations), one = scalar(1.0f);
    const float amaxes[4][3] = {{2, 0, 0.5f}, {8, 0, 0.25f}, {1, 0, 7}, {0.5f, 0, 1}};
    for (const auto& step : amaxes) {
      for (int t = 0; t < 3; ++t) {
        Tensor slot = hist.slice(t, Shape{1});
        be->cast_to_fp8(make(Shape{1}, DType::F32, {step[t]}), one, &slot, code);
        record_amax(host[t], step[t]);
        update_delayed_scaling(host[t], r, f);
      }
      be->fp8_update_scaling(r, f, hist, scale, inv, used);
      const std::vector<float> s = test::to_host_f32(*be, scale), si = test::to_host_f32(*be, inv);
      const std::vector<float> u = test::to_host_f32(*be, used), h = test::to_host_f32(*be, hist);
      for (int t = 0; t < 3; ++t) {
        EXPECT_EQ(s[t], host[t].scale) << t;
        EXPECT_EQ(si[t], host[t].scale_inv) << t;
        EXPECT_EQ(u[t], host[t].amax_used) << t;
        for (int i = 0; i < 5; ++i) EXPECT_EQ(h[i * 3 + t], host[t].amax_history[i]) << t;
      }
      EXPECT_EQ(s[1], 1.0f);
    }
  }
  Tensor hist = alloc.alloc(Shape{2, 4}, DType::F32, MemCategory::Activations);
  Tensor v = alloc.alloc(Shape{2}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(be->fp8_update_scaling(r, DType::F8E4M3, hist, v, v, v), Error);  // 2 slots, not 5
  EXPECT_THROW(be->fp8_update_scaling(r, DType::BF16, hist, v, v, v), Error);
}

}  // namespace
}  // namespace mpbench
