// CPU conv2d (NHWC x KRSC) against a direct double-precision convolution written here: forward
// values in every math mode, the fp16/bf16 outputs against the fp32 result rounded once, dx and dw
// against central differences of the double forward, and the argument checks.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::round_to;
using test::to_float;

using test::compare;
using test::random_nonzero;
using test::to_host_f32;

struct ConvCase {
  int64_t n, h, w, c, k, r, s, stride, pad;
  int64_t p() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t q() const { return (w + 2 * pad - s) / stride + 1; }
  Shape x_shape() const { return Shape{n, h, w, c}; }
  Shape w_shape() const { return Shape{k, r, s, c}; }
  Shape y_shape() const { return Shape{n, p(), q(), k}; }
};

::testing::Message describe(const ConvCase& c) {
  return ::testing::Message() << "x (" << c.n << ", " << c.h << ", " << c.w << ", " << c.c
                              << ") w (" << c.k << ", " << c.r << ", " << c.s << ", " << c.c
                              << ") stride " << c.stride << " pad " << c.pad;
}

// y[n, p, q, k] = sum_{r, s, c} x[n, p*stride - pad + r, q*stride - pad + s, c] w[k, r, s, c],
// the padding reading as zero: the definition, with no im2col.
template <class T>
std::vector<double> conv_ref(const ConvCase& g, const std::vector<T>& x, const std::vector<T>& w) {
  std::vector<double> y(g.n * g.p() * g.q() * g.k, 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t p = 0; p < g.p(); ++p)
      for (int64_t q = 0; q < g.q(); ++q)
        for (int64_t k = 0; k < g.k; ++k) {
          double acc = 0;
          for (int64_t r = 0; r < g.r; ++r)
            for (int64_t s = 0; s < g.s; ++s) {
              const int64_t h = p * g.stride - g.pad + r, wi = q * g.stride - g.pad + s;
              if (h < 0 || h >= g.h || wi < 0 || wi >= g.w) continue;
              for (int64_t c = 0; c < g.c; ++c)
                acc += static_cast<double>(x[((n * g.h + h) * g.w + wi) * g.c + c]) *
                       static_cast<double>(w[((k * g.r + r) * g.s + s) * g.c + c]);
            }
          y[((n * g.p() + p) * g.q() + q) * g.k + k] = acc;
        }
  return y;
}

// dx and dw of y = conv(x, w) given dy: the same sum, each product sent to its input position
// (dx) or filter tap (dw).
std::array<std::vector<double>, 2> conv_grads_ref(const ConvCase& g, const std::vector<float>& x,
                                                  const std::vector<float>& w,
                                                  const std::vector<float>& dy) {
  std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t p = 0; p < g.p(); ++p)
      for (int64_t q = 0; q < g.q(); ++q)
        for (int64_t k = 0; k < g.k; ++k) {
          const double d = dy[((n * g.p() + p) * g.q() + q) * g.k + k];
          for (int64_t r = 0; r < g.r; ++r)
            for (int64_t s = 0; s < g.s; ++s) {
              const int64_t h = p * g.stride - g.pad + r, wi = q * g.stride - g.pad + s;
              if (h < 0 || h >= g.h || wi < 0 || wi >= g.w) continue;
              for (int64_t c = 0; c < g.c; ++c) {
                const int64_t xi = ((n * g.h + h) * g.w + wi) * g.c + c;
                const int64_t wj = ((k * g.r + r) * g.s + s) * g.c + c;
                dx[xi] += d * w[wj];
                dw[wj] += d * x[xi];
              }
            }
        }
  return {dx, dw};
}

const ConvCase kCases[] = {
    {2, 5, 5, 3, 4, 3, 3, 1, 1},  // 3x3, same padding
    {1, 7, 5, 2, 3, 3, 3, 2, 1},  // 3x3 stride 2 on odd, non-square input
    {2, 7, 5, 2, 3, 3, 3, 2, 1},  // the same, two images (im2col's image stride is H x W)
    {2, 6, 6, 2, 3, 3, 3, 2, 0},  // stride 2 unpadded: the last row and column are never read
    {2, 4, 3, 5, 6, 1, 1, 1, 0},  // pointwise: the GEMM on x itself
    {2, 5, 5, 3, 4, 1, 1, 2, 0},  // 1x1 projection with stride 2
    {1, 4, 5, 3, 2, 2, 3, 1, 2},  // non-square filter, padding wider than half the filter
    {3, 3, 3, 1, 1, 3, 3, 1, 0},  // one output pixel per image, one channel
};

class CpuConv : public test::CpuOpsTest {
 protected:
  struct Out {
    std::vector<float> y, dx, dw;
  };

  // Forward and both backward passes of case g in dtype dt and math mode, from the given values
  // (converted into dt), with every output poisoned first.
  Out run(const ConvCase& g, DType dt, GemmMath math, const std::vector<float>& xv,
          const std::vector<float>& wv, const std::vector<float>& gv) {
    Tensor x = make(g.x_shape(), dt, xv);
    Tensor w = make(g.w_shape(), dt, wv);
    Tensor dy = make(g.y_shape(), dt, gv);
    Tensor y = alloc.alloc(g.y_shape(), dt, MemCategory::Activations);
    Tensor dx = alloc.alloc(g.x_shape(), dt, MemCategory::Activations);
    Tensor dw = alloc.alloc(g.w_shape(), dt, MemCategory::Gradients);
    test::poison(*be, y);
    test::poison(*be, dx);
    test::poison(*be, dw);
    ConvDesc d;
    d.stride = g.stride;
    d.pad = g.pad;
    d.math = math;
    be->conv2d_forward(d, x, w, y);
    be->conv2d_backward_data(d, dy, w, dx);
    be->conv2d_backward_filter(d, x, dy, dw);
    return {to_host_f32(*be, y), to_host_f32(*be, dx), to_host_f32(*be, dw)};
  }
};

TEST_F(CpuConv, ForwardFp32MatchesDirectConvolution) {
  for (const ConvCase& g : kCases) {
    SCOPED_TRACE(describe(g));
    const auto xv = random_nonzero(g.x_shape().numel(), 1);
    const auto wv = random_nonzero(g.w_shape().numel(), 2);
    const auto gv = random_nonzero(g.y_shape().numel(), 3);
    const Out o = run(g, DType::F32, GemmMath::Strict, xv, wv, gv);
    auto r = compare(o.y, to_float(conv_ref(g, xv, wv)), 1e-5);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST_F(CpuConv, Tf32MatchesDirectConvolutionOnRoundedInputs) {
  for (const ConvCase& g : kCases) {
    SCOPED_TRACE(describe(g));
    const auto xv = random_nonzero(g.x_shape().numel(), 4);
    const auto wv = random_nonzero(g.w_shape().numel(), 5);
    const auto gv = random_nonzero(g.y_shape().numel(), 6);
    const Out o = run(g, DType::F32, GemmMath::TF32, xv, wv, gv);
    std::vector<float> xt(xv), wt(wv);
    for (float& v : xt) v = round_to_tf32(v);
    for (float& v : wt) v = round_to_tf32(v);
    auto r = compare(o.y, to_float(conv_ref(g, xt, wt)), 1e-5);
    EXPECT_TRUE(r.ok) << r.message;
    // And TF32 is really in effect: the unrounded inputs give a result off by about 2^-11.
    auto strict = compare(o.y, to_float(conv_ref(g, xv, wv)), 1e-5);
    EXPECT_FALSE(strict.ok) << "TF32 result equals the fp32 one to 1e-5";
    EXPECT_TRUE(
        compare(o.y, to_float(conv_ref(g, xv, wv)), test::tolerance_for(DType::F32, GemmMath::TF32))
            .ok);
    // The backward passes' GEMMs round their inputs too: dx from dy and w, dw from dy and x.
    std::vector<float> gt(gv);
    for (float& v : gt) v = round_to_tf32(v);
    const auto rounded = conv_grads_ref(g, xt, wt, gt), exact = conv_grads_ref(g, xv, wv, gv);
    const std::pair<const std::vector<float>*, const char*> grads[] = {{&o.dx, "dx"},
                                                                       {&o.dw, "dw"}};
    for (int i = 0; i < 2; ++i) {
      const std::vector<float>& got = *grads[i].first;
      EXPECT_TRUE(compare(got, to_float(rounded[i]), 1e-5).ok) << grads[i].second;
      EXPECT_FALSE(compare(got, to_float(exact[i]), 1e-5).ok)
          << grads[i].second << ": TF32 result equals the fp32 one to 1e-5";
    }
  }
}

// The same values in fp16/bf16 and in fp32: each 16-bit output is the fp32 output rounded once
// (one ulp at most apart, where the fp32 sums differ in their last bits from the order of
// accumulation), for y, dx and dw alike.
TEST_F(CpuConv, LowPrecisionOutputsAreTheFp32ResultRounded) {
  for (DType dt : {DType::F16, DType::BF16}) {
    for (const ConvCase& g : kCases) {
      SCOPED_TRACE(describe(g) << " " << dtype_name(dt));
      std::vector<float> xv = random_nonzero(g.x_shape().numel(), 7);
      std::vector<float> wv = random_nonzero(g.w_shape().numel(), 8);
      std::vector<float> gv = random_nonzero(g.y_shape().numel(), 9);
      for (auto* v : {&xv, &wv, &gv})
        for (float& e : *v) e = round_to(dt, e);  // values exact in both dtypes
      const Out lo = run(g, dt, GemmMath::LowPrecision, xv, wv, gv);
      const Out hi = run(g, DType::F32, GemmMath::Strict, xv, wv, gv);
      const double ulp = dt == DType::F16 ? 1.0 / 1024 : 1.0 / 128;
      const std::pair<const std::vector<float>*, const std::vector<float>*> outs[] = {
          {&lo.y, &hi.y}, {&lo.dx, &hi.dx}, {&lo.dw, &hi.dw}};
      const char* names[] = {"y", "dx", "dw"};
      for (int i = 0; i < 3; ++i) {
        std::vector<float> rounded(*outs[i].second);
        for (float& e : rounded) e = round_to(dt, e);
        auto r = compare(*outs[i].first, rounded, test::tolerance_for(dt));
        EXPECT_TRUE(r.ok) << names[i] << ": " << r.message;
        const std::vector<float>& got = *outs[i].first;
        const std::vector<float>& ref = *outs[i].second;
        double scale = 0;
        for (float v : ref) scale = std::max(scale, std::fabs(static_cast<double>(v)));
        for (size_t j = 0; j < ref.size(); ++j) {
          const double err =
              std::fabs(got[j] - ref[j]) / std::max<double>(std::fabs(ref[j]), 1e-3 * scale);
          ASSERT_LE(err, ulp + 1e-4)
              << names[i] << " element " << j << ": " << got[j] << " vs " << ref[j];
        }
      }
    }
  }
}

// L(x, w) = sum(G o conv(x, w)): backward_data(G, w) and backward_filter(x, G) must be dL/dx and
// dL/dw, checked by central differences of the double forward.
TEST_F(CpuConv, GradientsMatchFiniteDifferences) {
  for (const ConvCase& g : kCases) {
    SCOPED_TRACE(describe(g));
    const auto xv = random_nonzero(g.x_shape().numel(), 10);
    const auto wv = random_nonzero(g.w_shape().numel(), 11);
    const auto gv = random_nonzero(g.y_shape().numel(), 12);
    const Out o = run(g, DType::F32, GemmMath::Strict, xv, wv, gv);
    const std::vector<double> xd(xv.begin(), xv.end()), wd(wv.begin(), wv.end());
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& w) {
      const auto y = conv_ref(g, x, w);
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += gv[i] * y[i];
      return s;
    };
    const auto fd_x = test::central_differences(
        [&](const std::vector<double>& x) { return loss(x, wd); }, xd, 1e-3);
    const auto fd_w = test::central_differences(
        [&](const std::vector<double>& w) { return loss(xd, w); }, wd, 1e-3);
    auto rx = compare(o.dx, fd_x, 1e-5);
    auto rw = compare(o.dw, fd_w, 1e-5);
    EXPECT_TRUE(rx.ok) << "dx: " << rx.message;
    EXPECT_TRUE(rw.ok) << "dw: " << rw.message;
  }
}

// A 16-bit column matrix of an odd length (3 x 9 here) takes half a float more than half its
// elements: the first conv of a fresh backend sizes the scratch to it exactly, so that the
// sanitizer build sees a write past it.
TEST_F(CpuConv, SixteenBitColumnsOfAnOddLengthFitTheirScratch) {
  const ConvCase g{3, 3, 3, 1, 1, 3, 3, 1, 0};
  for (DType dt : {DType::F16, DType::BF16}) {
    std::vector<float> xv = random_nonzero(g.x_shape().numel(), 17);
    std::vector<float> wv = random_nonzero(g.w_shape().numel(), 18);
    for (auto* v : {&xv, &wv})
      for (float& e : *v) e = round_to(dt, e);
    const Out o =
        run(g, dt, GemmMath::LowPrecision, xv, wv, random_nonzero(g.y_shape().numel(), 19));
    EXPECT_TRUE(compare(o.y, to_float(conv_ref(g, xv, wv)), test::tolerance_for(dt)).ok);
  }
}

TEST_F(CpuConv, UnreadInputPositionsGetZeroGradient) {
  // Stride 2 without padding over 6 rows reads rows 0..4 only: row 5 of dx must be exactly 0.
  const ConvCase g{2, 6, 6, 2, 3, 3, 3, 2, 0};
  const Out o =
      run(g, DType::F32, GemmMath::Strict, random_nonzero(g.x_shape().numel(), 13),
          random_nonzero(g.w_shape().numel(), 14), random_nonzero(g.y_shape().numel(), 15));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t wi = 0; wi < g.w; ++wi)
      for (int64_t c = 0; c < g.c; ++c) {
        EXPECT_EQ(o.dx[((n * g.h + 5) * g.w + wi) * g.c + c], 0.0f);
        EXPECT_EQ(o.dx[((n * g.h + wi) * g.w + 5) * g.c + c], 0.0f);
      }
}

TEST_F(CpuConv, Fp16OverflowsLikeTheHardware) {
  // 1x1 conv of 256 * 256 over 1 channel: 65536 is finite in fp32, inf once rounded to fp16.
  const ConvCase g{1, 2, 2, 1, 1, 1, 1, 1, 0};
  const Out o = run(g, DType::F16, GemmMath::LowPrecision, {256, 256, 1, 1}, {256}, {1, 1, 1, 1});
  EXPECT_TRUE(std::isinf(o.y[0]) && o.y[0] > 0);
  EXPECT_EQ(o.y[2], 256.0f);
}

TEST_F(CpuConv, ScratchIsReusedAcrossShapes) {
  // A large padded conv, then smaller ones through the same backend: no stale column data.
  const ConvCase big{2, 9, 9, 8, 4, 3, 3, 1, 1};
  const ConvCase small{1, 3, 3, 2, 2, 3, 3, 1, 1};
  for (const ConvCase& g : {big, small, big}) {
    SCOPED_TRACE(describe(g));
    for (DType dt : {DType::F32, DType::BF16}) {
      auto xv = random_nonzero(g.x_shape().numel(), 16);
      auto wv = random_nonzero(g.w_shape().numel(), 17);
      for (float& e : xv) e = round_to(dt, e);
      for (float& e : wv) e = round_to(dt, e);
      const GemmMath math = dt == DType::F32 ? GemmMath::Strict : GemmMath::LowPrecision;
      const Out o = run(g, dt, math, xv, wv, random_nonzero(g.y_shape().numel(), 18));
      auto r = compare(o.y, to_float(conv_ref(g, xv, wv)), test::tolerance_for(dt));
      EXPECT_TRUE(r.ok) << r.message;
    }
  }
}

TEST_F(CpuConv, RejectsMismatchedArguments) {
  const ConvCase g{1, 5, 5, 3, 4, 3, 3, 1, 1};
  Tensor x = make(g.x_shape(), DType::F32, random_nonzero(g.x_shape().numel(), 1));
  Tensor w = make(g.w_shape(), DType::F32, random_nonzero(g.w_shape().numel(), 2));
  Tensor y = make(g.y_shape(), DType::F32, random_nonzero(g.y_shape().numel(), 3));
  ConvDesc d;
  d.pad = 1;
  be->conv2d_forward(d, x, w, y);  // the valid call works

  Tensor y_bad = make(Shape{1, 4, 4, 4}, DType::F32, random_nonzero(64, 4));  // P would be 5
  try {
    be->conv2d_forward(d, x, w, y_bad);
    FAIL() << "wrong output shape accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected (1, 5, 5, 4)"), std::string::npos) << e.what();
  }
  Tensor w_bad = make(Shape{4, 3, 3, 2}, DType::F32, random_nonzero(72, 5));  // C 2 != 3
  EXPECT_THROW(be->conv2d_forward(d, x, w_bad, y), Error);
  EXPECT_THROW(be->conv2d_backward_filter(d, x, y, w_bad), Error);
  EXPECT_THROW(be->conv2d_backward_data(d, y_bad, w, x), Error);
  Tensor x16 = make(g.x_shape(), DType::F16, random_nonzero(g.x_shape().numel(), 6));
  EXPECT_THROW(be->conv2d_forward(d, x16, w, y), Error);  // mixed dtypes
  Tensor x_rank3 = x.reshaped(Shape{5, 5, 3});
  EXPECT_THROW(be->conv2d_forward(d, x_rank3, w, y), Error);
  ConvDesc lowp = d;
  lowp.math = GemmMath::LowPrecision;
  EXPECT_THROW(be->conv2d_forward(lowp, x, w, y), Error);  // lowp math on fp32 data
  ConvDesc zero_stride = d;
  zero_stride.stride = 0;
  EXPECT_THROW(be->conv2d_forward(zero_stride, x, w, y), Error);
  ConvDesc no_pad;  // a 3x3 filter on 5x5 unpadded gives 3x3, not the 5x5 y
  EXPECT_THROW(be->conv2d_forward(no_pad, x, w, y), Error);
  Tensor tiny = make(Shape{1, 1, 1, 3}, DType::F32, random_nonzero(3, 7));
  Tensor y1 = make(Shape{1, 1, 1, 4}, DType::F32, random_nonzero(4, 8));
  EXPECT_THROW(be->conv2d_forward(no_pad, tiny, w, y1), Error);  // filter larger than input
}

}  // namespace
}  // namespace mpbench
