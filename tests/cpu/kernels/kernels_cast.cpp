// cast between float dtypes with the hardware's edge cases (fp16 max and overflow, subnormals,
// NaN, bf16 ties), plus fill / copy / upload / download.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

class CpuCast : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_reference_backend();
  TrackingAllocator alloc{*be};

  Tensor f32(const std::vector<float>& v) {
    Tensor t = alloc.alloc(Shape{static_cast<int64_t>(v.size())}, DType::F32, MemCategory::Data);
    be->upload(v.data(), t);
    return t;
  }
  Tensor bits16(DType dt, const std::vector<uint16_t>& v) {
    Tensor t = alloc.alloc(Shape{static_cast<int64_t>(v.size())}, dt, MemCategory::Data);
    be->upload(v.data(), t);
    return t;
  }
  // fp32 values cast to a 16-bit dtype, returned as raw bit patterns.
  std::vector<uint16_t> to_bits(DType dt, const std::vector<float>& v) {
    Tensor src = f32(v);
    Tensor dst = alloc.alloc(src.shape, dt, MemCategory::Data);
    be->fill(dst, 1234.0f);
    be->cast(src, dst);
    std::vector<uint16_t> out(v.size());
    be->download(dst, out.data());
    return out;
  }
  // Bit patterns of one 16-bit dtype cast to another, returned as raw bit patterns.
  std::vector<uint16_t> cast_bits(DType from, DType to, const std::vector<uint16_t>& v) {
    Tensor src = bits16(from, v);
    Tensor dst = alloc.alloc(src.shape, to, MemCategory::Data);
    be->cast(src, dst);
    std::vector<uint16_t> out(v.size());
    be->download(dst, out.data());
    return out;
  }
  std::vector<float> from_bits(DType dt, const std::vector<uint16_t>& v) {
    Tensor src = bits16(dt, v);
    Tensor dst = alloc.alloc(src.shape, DType::F32, MemCategory::Data);
    be->cast(src, dst);
    std::vector<float> out(v.size());
    be->download(dst, out.data());
    return out;
  }
};

TEST_F(CpuCast, Fp16RangeOverflowAndSubnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  const auto bits = to_bits(DType::F16, {
                                            65504.0f,               // max finite
                                            65519.0f,               // rounds down to max
                                            65520.0f,               // the tie rounds up to inf
                                            -65520.0f,              //
                                            1e6f,                   //
                                            tiny,                   //
                                            tiny / 2,               // tie -> even (0)
                                            tiny / 2 * 1.01f,       // just above the tie -> 1
                                            3 * tiny / 2,           // tie between 1 and 2 -> 2
                                            std::ldexp(1.0f, -14),  // smallest normal
                                            -0.0f,                  //
                                            1.0f + std::ldexp(1.0f, -11),      // tie -> 1.0
                                            1.0f + 3 * std::ldexp(1.0f, -11),  // tie -> up
                                        });
  const std::vector<uint16_t> want = {0x7bff, 0x7bff, 0x7c00, 0xfc00, 0x7c00, 0x0001, 0x0000,
                                      0x0001, 0x0002, 0x0400, 0x8000, 0x3c00, 0x3c02};
  ASSERT_EQ(bits.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(bits[i], want[i]) << "element " << i << std::hex << " got 0x" << bits[i];
}

TEST_F(CpuCast, Fp16DecodesSubnormalsInfAndNaN) {
  const auto v = from_bits(DType::F16, {0x0001, 0x03ff, 0x8001, 0x7c00, 0xfc00, 0x7e00, 0x7bff});
  EXPECT_EQ(v[0], std::ldexp(1.0f, -24));
  EXPECT_EQ(v[1], std::ldexp(1023.0f, -24));
  EXPECT_EQ(v[2], -std::ldexp(1.0f, -24));
  EXPECT_EQ(v[3], INFINITY);
  EXPECT_EQ(v[4], -INFINITY);
  EXPECT_TRUE(std::isnan(v[5]));
  EXPECT_EQ(v[6], 65504.0f);
}

TEST_F(CpuCast, EveryFp16PatternDecodesExactly) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  const auto got = from_bits(DType::F16, all);
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(f32_bits(got[h]), f32_bits(f16_to_f32(static_cast<uint16_t>(h)))) << std::hex << h;
}

TEST_F(CpuCast, NaNAndInfSurviveEveryDirection) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto bits = to_bits(dt, {NAN, -NAN, INFINITY, -INFINITY});
    const auto back = from_bits(dt, bits);
    EXPECT_TRUE(std::isnan(back[0]));
    EXPECT_TRUE(std::isnan(back[1]));
    EXPECT_EQ(back[2], INFINITY);
    EXPECT_EQ(back[3], -INFINITY);
  }
  // A NaN whose payload lies only in the bits the cast drops stays a (quiet) NaN of its sign,
  // not an infinity.
  const std::vector<float> low_nans = {bits_f32(0x7f800001u), bits_f32(0xff800001u)};
  EXPECT_EQ(to_bits(DType::BF16, low_nans), (std::vector<uint16_t>{0x7fc0, 0xffc0}));
  EXPECT_EQ(to_bits(DType::F16, low_nans), (std::vector<uint16_t>{0x7e00, 0xfe00}));
}

// TF32's input rounding (the tensor cores' and the reference's): to nearest, ties to even.
TEST(Tf32, RoundsToNearestEven) {
  EXPECT_EQ(f32_bits(round_to_tf32(bits_f32(0x3f801000u))), 0x3f800000u);  // tie, even below
  EXPECT_EQ(f32_bits(round_to_tf32(bits_f32(0x3f803000u))), 0x3f804000u);  // tie, even above
  EXPECT_EQ(f32_bits(round_to_tf32(bits_f32(0x3f801001u))), 0x3f802000u);  // past the tie
  EXPECT_EQ(f32_bits(round_to_tf32(bits_f32(0x3f800fffu))), 0x3f800000u);  // short of it
  EXPECT_EQ(f32_bits(round_to_tf32(bits_f32(0x7f800001u))), 0x7f800001u);  // NaN as it is
}

TEST_F(CpuCast, Bf16RoundsToNearestEvenAndOverflows) {
  const auto bits = to_bits(DType::BF16, {
                                             1.0f + std::ldexp(1.0f, -8),           // tie -> 1.0
                                             1.0f + 3 * std::ldexp(1.0f, -8),       // tie -> up
                                             1.0f + std::ldexp(1.0f, -8) * 1.001f,  // above -> up
                                             FLT_MAX,                               // rounds to inf
                                             std::ldexp(1.0f, -130),  // fp32 subnormal: kept
                                             -2.0f,
                                         });
  const std::vector<uint16_t> want = {0x3f80, 0x3f82, 0x3f81, 0x7f80, 0x0008, 0xc000};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(bits[i], want[i]) << "element " << i << std::hex << " got 0x" << bits[i];
}

TEST_F(CpuCast, SixteenBitToSixteenBitRoundsOnce) {
  // fp16 1 + 2^-10 + 2^-9 ... : fp16 -> bf16 must round the exact value, not a double-rounded one.
  // 0x3c03 = 1 + 3 * 2^-10: bf16 keeps 7 bits -> 1 + 0 * 2^-7 (3 * 2^-10 < 2^-8 half-ulp).
  // 0x3c14 = 1 + 20 * 2^-10 = 1 + 2.5 * 2^-7: a tie -> 1 + 2 * 2^-7 (even).
  const auto got = cast_bits(DType::F16, DType::BF16, {0x3c03, 0x3c14, 0x7bff, 0x0001});
  EXPECT_EQ(got[0], 0x3f80);
  EXPECT_EQ(got[1], 0x3f82);
  EXPECT_EQ(bf16_to_f32(got[2]), 65536.0f);  // 65504 rounds up in bf16
  EXPECT_EQ(bf16_to_f32(got[3]), std::ldexp(1.0f, -24));
  // bf16 -> fp16: 65536 does not fit fp16 -> inf; 2^-30 underflows to 0.
  const auto got2 =
      cast_bits(DType::BF16, DType::F16,
                {f32_to_bf16(65536.0f), f32_to_bf16(std::ldexp(1.0f, -30)), f32_to_bf16(-1.5f)});
  EXPECT_EQ(got2[0], 0x7c00);
  EXPECT_EQ(got2[1], 0x0000);
  EXPECT_EQ(got2[2], 0xbe00);
}

// round_to keeps fp32 storage and gives exactly what a cast to the dtype and back gives:
// nearest even, fp16 overflow to inf, NaN kept; fp32 to bf16 or fp16 only.
TEST_F(CpuCast, RoundToIsACastThereAndBack) {
  const std::vector<float> v = {1.0f,        65504.0f, 65520.0f, -70000.0f, 1.00048828125f,
                                1.00390625f, 6.0e-8f,  2.9e-8f,  NAN,       3.3895314e38f};
  for (DType to : {DType::F16, DType::BF16}) {
    Tensor t = f32(v), there = alloc.alloc(t.shape, to, MemCategory::Data),
           back = alloc.alloc(t.shape, DType::F32, MemCategory::Data);
    be->cast(t, there);
    be->cast(there, back);
    be->round_to(t, to);
    std::vector<uint32_t> got(v.size()), want(v.size());
    be->download(t, got.data());
    be->download(back, want.data());
    EXPECT_EQ(got, want) << dtype_name(to);
  }
  std::vector<float> got(v.size());
  Tensor t = f32(v);
  be->round_to(t, DType::F16);
  be->download(t, got.data());
  EXPECT_TRUE(std::isinf(got[2]) && std::isinf(got[3]) && std::isnan(got[8]));
  EXPECT_EQ(got[1], 65504.0f);
  Tensor h = bits16(DType::F16, {0, 0});
  EXPECT_THROW(be->round_to(h, DType::BF16), Error);
  Tensor f = f32({1.0f});
  EXPECT_THROW(be->round_to(f, DType::F32), Error);
}

TEST_F(CpuCast, SameDtypeCopiesBitsAndShapesMustAgree) {
  Tensor a = f32({1.5f, -2.0f, NAN});
  Tensor b = alloc.alloc(Shape{3}, DType::F32, MemCategory::Data);
  be->cast(a, b);
  std::vector<float> out(3);
  be->download(b, out.data());
  EXPECT_EQ(std::memcmp(out.data(), a.data, 12), 0);
  Tensor wrong = alloc.alloc(Shape{4}, DType::F16, MemCategory::Data);
  EXPECT_THROW(be->cast(a, wrong), Error);
  Tensor ints = alloc.alloc(Shape{3}, DType::I32, MemCategory::Data);
  EXPECT_THROW(be->cast(a, ints), Error);
  // A (1, 3) view casts into a (3) buffer: only the element count matters.
  Tensor h = alloc.alloc(Shape{1, 3}, DType::F16, MemCategory::Data);
  be->cast(a.reshaped(Shape{1, 3}), h);
  EXPECT_EQ(test::to_host_f32(*be, h)[1], -2.0f);
  // In place: between dtypes of one size, element by element; between sizes, refused (the
  // narrower elements would land on wider ones a parallel loop has not read yet).
  Tensor hb = h.viewed_as(Shape{3}, DType::BF16);
  be->cast(h, hb);
  EXPECT_EQ(test::to_host_f32(*be, hb)[1], -2.0f);
  Tensor ab = a.viewed_as(Shape{3}, DType::BF16);
  EXPECT_THROW(be->cast(a, ab), Error);
}

TEST_F(CpuCast, FillCopyAndTransfers) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = alloc.alloc(Shape{5, 3}, dt, MemCategory::Data);
    be->fill(t, -3.0f);
    for (float v : test::to_host_f32(*be, t)) EXPECT_EQ(v, -3.0f);
    Tensor u = alloc.alloc(Shape{15}, dt, MemCategory::Data);
    be->fill(u, 7.0f);
    be->copy(t, u);
    for (float v : test::to_host_f32(*be, u)) EXPECT_EQ(v, -3.0f);
  }
  Tensor h = alloc.alloc(Shape{2}, DType::F16, MemCategory::Data);
  be->fill(h, 70000.0f);  // converted like any value: overflows to inf
  EXPECT_EQ(test::to_host_f32(*be, h)[0], INFINITY);
  Tensor i = alloc.alloc(Shape{2}, DType::I32, MemCategory::Data);
  EXPECT_THROW(be->fill(i, NAN), Error);
  Tensor f = alloc.alloc(Shape{2}, DType::F32, MemCategory::Data);
  EXPECT_THROW(be->copy(h, f), Error);  // dtypes differ
  std::vector<float> host = {1.25f, -8.0f};
  be->upload(host.data(), f);
  std::vector<float> back(2);
  be->download(f, back.data());
  EXPECT_EQ(back, host);
}

}  // namespace
}  // namespace mpbench
