// layernorm_forward / layernorm_backward against a double-precision LayerNorm written here:
// values and saved statistics, gradients by central differences, 16-bit dtypes rounding the fp32
// result once, constant rows, and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::to_double;
using test::to_float;

using test::compare;
using test::random_nonzero;
using test::to_host_f32;

using test::rounded;

struct LnRef {
  std::vector<double> y, mean, rstd;
};

// y = (x - mean) / sqrt(var + eps) * gamma + beta per row, biased variance, all in double.
LnRef layernorm_ref(const std::vector<double>& x, const std::vector<double>& gamma,
                    const std::vector<double>& beta, int64_t rows, int64_t d, double eps) {
  LnRef r;
  r.y.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = x.data() + i * d;
    double mu = 0;
    for (int64_t j = 0; j < d; ++j) mu += xr[j];
    mu /= d;
    double var = 0;
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    var /= d;
    const double rs = 1 / std::sqrt(var + eps);
    r.mean.push_back(mu);
    r.rstd.push_back(rs);
    for (int64_t j = 0; j < d; ++j) r.y[i * d + j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
  }
  return r;
}

class CpuLayerNorm : public test::CpuOpsTest {};

TEST_F(CpuLayerNorm, ForwardAndStatisticsMatchDoubleReference) {
  const int64_t rows = 6, d = 13;
  const float eps = 1e-5f;
  auto xv = random_nonzero(rows * d, 101, 2.0f);
  // One row far from zero: a one-pass E[x^2] - E[x]^2 in fp32 would lose its variance.
  for (int64_t j = 0; j < d; ++j) xv[2 * d + j] += 300.0f;
  auto gv = random_nonzero(d, 102), bv = random_nonzero(d, 103);
  Tensor x = make(Shape{rows, d}, DType::F32, xv);
  Tensor gamma = make(Shape{d}, DType::F32, gv), beta = make(Shape{d}, DType::F32, bv);
  Tensor y = poisoned(Shape{rows, d}, DType::F32);
  Tensor mean = poisoned(Shape{rows}, DType::F32), rstd = poisoned(Shape{rows}, DType::F32);
  be->layernorm_forward(eps, x, gamma, beta, y, mean, rstd);

  auto ref = layernorm_ref(to_double(xv), to_double(gv), to_double(bv), rows, d, eps);
  // The fp32 tolerance, not tighter: y is computed from the fp32-rounded mean, as the backward
  // pass assumes, which on the offset row is worth about 1e-6.
  auto ry = compare(to_host_f32(*be, y), to_float(ref.y), test::tolerance_for(DType::F32));
  auto rm = compare(to_host_f32(*be, mean), to_float(ref.mean), 1e-7);
  auto rs = compare(to_host_f32(*be, rstd), to_float(ref.rstd), 1e-6);
  EXPECT_TRUE(ry.ok) << "y: " << ry.message;
  EXPECT_TRUE(rm.ok) << "mean: " << rm.message;
  EXPECT_TRUE(rs.ok) << "rstd: " << rs.message;
  // Each row of the normalised output has mean 0 and variance var / (var + eps) ~ 1.
  auto yv = to_host_f32(*be, y);
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0;
    for (int64_t j = 0; j < d; ++j) m += (yv[i * d + j] - bv[j]) / gv[j];
    EXPECT_NEAR(m / d, 0.0, 1e-4) << "row " << i;
  }
}

// L = sum(W o LN(x; gamma, beta)); with dy = W the backward must give dL/dx, dL/dgamma, dL/dbeta.
TEST_F(CpuLayerNorm, GradientsMatchFiniteDifferences) {
  const int64_t rows = 5, d = 7;  // odd D
  const float eps = 1e-5f;
  for (float offset : {0.0f, 20.0f}) {
    SCOPED_TRACE(::testing::Message() << "offset " << offset);
    auto xv = random_nonzero(rows * d, 111);
    for (auto& v : xv) v += offset;
    auto gv = random_nonzero(d, 112, 2.0f), bv = random_nonzero(d, 113),
         wv = random_nonzero(rows * d, 114);
    Tensor x = make(Shape{rows, d}, DType::F32, xv);
    Tensor gamma = make(Shape{d}, DType::F32, gv), beta = make(Shape{d}, DType::F32, bv);
    Tensor y = poisoned(Shape{rows, d}, DType::F32);
    Tensor mean = poisoned(Shape{rows}, DType::F32), rstd = poisoned(Shape{rows}, DType::F32);
    be->layernorm_forward(eps, x, gamma, beta, y, mean, rstd);
    Tensor dy = make(Shape{rows, d}, DType::F32, wv);
    Tensor dx = poisoned(Shape{rows, d}, DType::F32);
    Tensor dgamma = poisoned(Shape{d}, DType::F32), dbeta = poisoned(Shape{d}, DType::F32);
    be->layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);

    std::vector<double> params = to_double(xv);
    params.insert(params.end(), gv.begin(), gv.end());
    params.insert(params.end(), bv.begin(), bv.end());
    auto loss = [&](const std::vector<double>& p) {
      std::vector<double> xp(p.begin(), p.begin() + rows * d);
      std::vector<double> gp(p.begin() + rows * d, p.begin() + rows * d + d);
      std::vector<double> bp(p.begin() + rows * d + d, p.end());
      auto r = layernorm_ref(xp, gp, bp, rows, d, eps);
      double s = 0;
      for (size_t i = 0; i < r.y.size(); ++i) s += wv[i] * r.y[i];
      return s;
    };
    auto fd = test::central_differences(loss, params);
    std::vector<float> fd_x(fd.begin(), fd.begin() + rows * d);
    std::vector<float> fd_g(fd.begin() + rows * d, fd.begin() + rows * d + d);
    std::vector<float> fd_b(fd.begin() + rows * d + d, fd.end());
    auto rx = compare(to_host_f32(*be, dx), fd_x, 1e-5);
    auto rg = compare(to_host_f32(*be, dgamma), fd_g, 1e-5);
    auto rb = compare(to_host_f32(*be, dbeta), fd_b, 1e-5);
    EXPECT_TRUE(rx.ok) << "dx: " << rx.message;
    EXPECT_TRUE(rg.ok) << "dgamma: " << rg.message;
    EXPECT_TRUE(rb.ok) << "dbeta: " << rb.message;
  }
}

// 16-bit x, y, dy and dx: the fp32 computation on the same decoded values, rounded once.
TEST_F(CpuLayerNorm, SixteenBitTensorsRoundTheFp32ResultOnce) {
  const int64_t rows = 33, d = 24;
  const float eps = 1e-5f;
  Tensor gamma = make(Shape{d}, DType::F32, random_nonzero(d, 121, 1.5f));
  Tensor beta = make(Shape{d}, DType::F32, random_nonzero(d, 122));
  for (DType xt : {DType::F16, DType::BF16}) {
    for (DType yt : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(::testing::Message() << "x " << dtype_name(xt) << ", y " << dtype_name(yt));
      Tensor x = make(Shape{rows, d}, xt, random_nonzero(rows * d, 123, 3.0f));
      Tensor x32 = make(Shape{rows, d}, DType::F32, to_host_f32(*be, x));  // same values
      Tensor y = poisoned(Shape{rows, d}, yt), y32 = poisoned(Shape{rows, d}, DType::F32);
      Tensor mean = poisoned(Shape{rows}, DType::F32), rstd = poisoned(Shape{rows}, DType::F32);
      Tensor mean32 = poisoned(Shape{rows}, DType::F32), rstd32 = poisoned(Shape{rows}, DType::F32);
      be->layernorm_forward(eps, x, gamma, beta, y, mean, rstd);
      be->layernorm_forward(eps, x32, gamma, beta, y32, mean32, rstd32);
      EXPECT_EQ(to_host_f32(*be, mean), to_host_f32(*be, mean32));
      EXPECT_EQ(to_host_f32(*be, rstd), to_host_f32(*be, rstd32));
      auto got = to_host_f32(*be, y), full = to_host_f32(*be, y32);
      EXPECT_EQ(got, rounded(yt, full));
      auto r = compare(got, full, test::tolerance_for(yt));
      EXPECT_TRUE(r.ok) << r.message;

      Tensor dy = make(Shape{rows, d}, yt, random_nonzero(rows * d, 124));
      Tensor dy32 = make(Shape{rows, d}, DType::F32, to_host_f32(*be, dy));
      Tensor dx = poisoned(Shape{rows, d}, xt), dx32 = poisoned(Shape{rows, d}, DType::F32);
      Tensor dg = poisoned(Shape{d}, DType::F32), db = poisoned(Shape{d}, DType::F32);
      Tensor dg32 = poisoned(Shape{d}, DType::F32), db32 = poisoned(Shape{d}, DType::F32);
      be->layernorm_backward(dy, x, gamma, mean, rstd, dx, dg, db);
      be->layernorm_backward(dy32, x32, gamma, mean32, rstd32, dx32, dg32, db32);
      auto gdx = to_host_f32(*be, dx), fdx = to_host_f32(*be, dx32);
      EXPECT_EQ(gdx, rounded(xt, fdx));
      auto rx = compare(gdx, fdx, test::tolerance_for(xt));
      EXPECT_TRUE(rx.ok) << rx.message;
      EXPECT_EQ(to_host_f32(*be, dg), to_host_f32(*be, dg32));  // fp32 sums, not rounded
      EXPECT_EQ(to_host_f32(*be, db), to_host_f32(*be, db32));
    }
  }
}

// A constant row has zero variance: rstd = 1/sqrt(eps), y = beta, dx = 0 and dgamma gets nothing
// from it; all finite.
TEST_F(CpuLayerNorm, ConstantRowNormalisesToBeta) {
  const int64_t d = 5;
  const float eps = 1e-3f;
  Tensor x = make(Shape{1, d}, DType::F32, std::vector<float>(d, 2.5f));
  Tensor gamma = make(Shape{d}, DType::F32, {1, 2, 3, 4, 5});
  Tensor beta = make(Shape{d}, DType::F32, {0.5f, -1, 2, 0, 7});
  Tensor y = poisoned(Shape{1, d}, DType::F32);
  Tensor mean = poisoned(Shape{1}, DType::F32), rstd = poisoned(Shape{1}, DType::F32);
  be->layernorm_forward(eps, x, gamma, beta, y, mean, rstd);
  EXPECT_EQ(to_host_f32(*be, y), to_host_f32(*be, beta));
  EXPECT_EQ(to_host_f32(*be, mean)[0], 2.5f);
  EXPECT_NEAR(to_host_f32(*be, rstd)[0], 1 / std::sqrt(1e-3), 1e-3);
  Tensor dy = make(Shape{1, d}, DType::F32, {1, -2, 3, 0.5f, 1});
  Tensor dx = poisoned(Shape{1, d}, DType::F32);
  Tensor dg = poisoned(Shape{d}, DType::F32), db = poisoned(Shape{d}, DType::F32);
  be->layernorm_backward(dy, x, gamma, mean, rstd, dx, dg, db);
  auto dxv = to_host_f32(*be, dx);
  // dx = rstd * (g - mean(g)) with g = dy * gamma: finite, summing to zero.
  double s = 0;
  for (float v : dxv) {
    EXPECT_TRUE(std::isfinite(v));
    s += v;
  }
  EXPECT_NEAR(s, 0.0, 1e-3);
  EXPECT_EQ(to_host_f32(*be, dg), std::vector<float>(d, 0.0f));
  EXPECT_EQ(to_host_f32(*be, db), to_host_f32(*be, dy));
}

TEST_F(CpuLayerNorm, RejectsMismatchedShapesAndDtypes) {
  const int64_t rows = 3, d = 4;
  Tensor x = make(Shape{rows, d}, DType::F32, random_nonzero(rows * d, 131));
  Tensor gamma = make(Shape{d}, DType::F32, random_nonzero(d, 132));
  Tensor beta = make(Shape{d}, DType::F32, random_nonzero(d, 133));
  Tensor y = poisoned(Shape{rows, d}, DType::F32);
  Tensor mean = poisoned(Shape{rows}, DType::F32), rstd = poisoned(Shape{rows}, DType::F32);
  be->layernorm_forward(1e-5f, x, gamma, beta, y, mean, rstd);  // the valid call works

  Tensor gamma_short = poisoned(Shape{d - 1}, DType::F32);
  Tensor gamma16 = poisoned(Shape{d}, DType::F16);
  Tensor y_wrong = poisoned(Shape{rows, d + 1}, DType::F32);
  Tensor mean_short = poisoned(Shape{rows - 1}, DType::F32);
  Tensor x_int = poisoned(Shape{rows, d}, DType::I32);
  EXPECT_THROW(be->layernorm_forward(1e-5f, x, gamma_short, beta, y, mean, rstd), Error);
  EXPECT_THROW(be->layernorm_forward(1e-5f, x, gamma16, beta, y, mean, rstd), Error);
  EXPECT_THROW(be->layernorm_forward(1e-5f, x, gamma, beta, y_wrong, mean, rstd), Error);
  EXPECT_THROW(be->layernorm_forward(1e-5f, x, gamma, beta, y, mean_short, rstd), Error);
  EXPECT_THROW(be->layernorm_forward(1e-5f, x_int, gamma, beta, y, mean, rstd), Error);
  EXPECT_THROW(be->layernorm_forward(-1.0f, x, gamma, beta, y, mean, rstd), Error);
  Tensor x_as16 = x;  // x's first half read as 16-bit: rows in place would overlap
  x_as16.dtype = DType::BF16;
  EXPECT_THROW(be->layernorm_forward(1e-5f, x, gamma, beta, x_as16, mean, rstd), Error);

  Tensor dy = make(Shape{rows, d}, DType::F32, random_nonzero(rows * d, 134));
  Tensor dx = poisoned(Shape{rows, d}, DType::F32);
  Tensor dg = poisoned(Shape{d}, DType::F32), db = poisoned(Shape{d}, DType::F32);
  be->layernorm_backward(dy, x, gamma, mean, rstd, dx, dg, db);
  Tensor dx16 = poisoned(Shape{rows, d}, DType::F16);  // dx must have x's dtype
  Tensor dy_wrong = poisoned(Shape{rows + 1, d}, DType::F32);
  Tensor dg_short = poisoned(Shape{d - 1}, DType::F32);
  EXPECT_THROW(be->layernorm_backward(dy, x, gamma, mean, rstd, dx16, dg, db), Error);
  EXPECT_THROW(be->layernorm_backward(dy_wrong, x, gamma, mean, rstd, dx, dg, db), Error);
  EXPECT_THROW(be->layernorm_backward(dy, x, gamma, mean, rstd, dx, dg_short, db), Error);
  EXPECT_THROW(be->layernorm_backward(dy, x, gamma, mean_short, rstd, dx, dg, db), Error);
  Tensor x16 = make(Shape{rows, d}, DType::BF16, random_nonzero(rows * d, 135));
  Tensor dx16_on_dy = dy;  // a bf16 dx over the fp32 dy
  dx16_on_dy.dtype = DType::BF16;
  Tensor dx16_ok = poisoned(Shape{rows, d}, DType::BF16);
  be->layernorm_backward(dy, x16, gamma, mean, rstd, dx16_ok, dg, db);
  EXPECT_THROW(be->layernorm_backward(dy, x16, gamma, mean, rstd, dx16_on_dy, dg, db), Error);
}

}  // namespace
}  // namespace mpbench
