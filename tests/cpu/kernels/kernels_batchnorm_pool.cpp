// CPU batchnorm (training, evaluation, backward; with the fused residual add and ReLU), global
// average pooling, max pooling, add and permute, against double-precision references written
// here: forward values, running statistics, fp16/bf16 outputs against the fp32 result rounded,
// gradients against central differences or the scattered reference, permute against index
// arithmetic, and the argument checks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/pool_window.h"
#include "kernels/relu.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::round_to;
using test::rounded;
using test::to_double;
using test::to_float;

using test::compare;
using test::random_nonzero;
using test::to_host_f32;

// ---- batchnorm --------------------------------------------------------------------------------

struct BnRef {
  std::vector<double> y, mean, var;  // var biased
};

// Training-mode batchnorm of x (rows, C) in double, then [+ residual] and [ReLU].
BnRef bn_ref(int64_t rows, int64_t c, const std::vector<double>& x, const std::vector<double>& g,
             const std::vector<double>& b, const std::vector<double>* res, bool relu, double eps) {
  BnRef r{std::vector<double>(x.size()), std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < c; ++j) r.mean[j] += x[i * c + j] / rows;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const double dev = x[i * c + j] - r.mean[j];
      r.var[j] += dev * dev / rows;
    }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < c; ++j) {
      double v = g[j] * (x[i * c + j] - r.mean[j]) / std::sqrt(r.var[j] + eps) + b[j];
      if (res) v += (*res)[i * c + j];
      r.y[i * c + j] = relu ? std::max(v, 0.0) : v;
    }
  return r;
}

class CpuBatchNorm : public test::CpuOpsTest {
 protected:
  const int64_t rows = 12, c = 3;
  Tensor vec(const std::vector<float>& v) { return make(Shape{c}, DType::F32, v); }
  Tensor out_c() {
    Tensor t = alloc.alloc(Shape{c}, DType::F32, MemCategory::Activations);
    test::poison(*be, t);
    return t;
  }
  Tensor out_act(DType dt) {
    Tensor t = alloc.alloc(Shape{rows, c}, dt, MemCategory::Activations);
    test::poison(*be, t);
    return t;
  }
  // Values spread so that channel means are not near zero and the variance is not tiny.
  std::vector<float> act_values(uint64_t seed, float offset) {
    auto v = random_nonzero(rows * c, seed, 2.0f);
    for (int64_t i = 0; i < rows * c; ++i) v[i] += offset * static_cast<float>(i % c + 1);
    return v;
  }
};

TEST_F(CpuBatchNorm, TrainForwardMatchesReferenceAndUpdatesRunningStatistics) {
  for (bool with_res : {false, true}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "residual " << with_res << " relu " << relu);
      const auto xv = act_values(1, 0.5f), rv_ = act_values(2, -0.3f);
      const auto gv = random_nonzero(c, 3), bv = random_nonzero(c, 4);
      const std::vector<float> rm0 = {0.25f, -0.5f, 1.0f}, rvar0 = {1.0f, 0.5f, 2.0f};
      Tensor x = make(Shape{rows, c}, DType::F32, xv), res = make(Shape{rows, c}, DType::F32, rv_);
      Tensor gamma = vec(gv), beta = vec(bv), rm = vec(rm0), rvar = vec(rvar0);
      Tensor sm = out_c(), sr = out_c(), y = out_act(DType::F32);
      BatchNormDesc d;
      d.relu = relu;
      d.momentum = 0.2f;
      be->batchnorm_forward_train(d, x, with_res ? &res : nullptr, gamma, beta, rm, rvar, sm, sr,
                                  y);
      const auto rd = to_double(rv_);
      const BnRef ref = bn_ref(rows, c, to_double(xv), to_double(gv), to_double(bv),
                               with_res ? &rd : nullptr, relu, d.eps);
      auto r = compare(to_host_f32(*be, y), to_float(ref.y), 1e-5);
      EXPECT_TRUE(r.ok) << r.message;
      std::vector<float> rstd_ref(c), rm_ref(c), rv_ref(c);
      for (int64_t j = 0; j < c; ++j) {
        rstd_ref[j] = static_cast<float>(1.0 / std::sqrt(ref.var[j] + d.eps));
        rm_ref[j] = static_cast<float>(0.8 * rm0[j] + 0.2 * ref.mean[j]);
        // The running variance takes the unbiased estimate, as PyTorch does.
        rv_ref[j] = static_cast<float>(0.8 * rvar0[j] + 0.2 * ref.var[j] * rows / (rows - 1));
      }
      EXPECT_TRUE(compare(to_host_f32(*be, sm), to_float(ref.mean), 1e-6).ok);
      EXPECT_TRUE(compare(to_host_f32(*be, sr), rstd_ref, 1e-6).ok);
      auto rrm = compare(to_host_f32(*be, rm), rm_ref, 1e-6);
      auto rrv = compare(to_host_f32(*be, rvar), rv_ref, 1e-6);
      EXPECT_TRUE(rrm.ok) << "running_mean: " << rrm.message;
      EXPECT_TRUE(rrv.ok) << "running_var: " << rrv.message;
      if (relu) {
        for (float v : to_host_f32(*be, y)) EXPECT_GE(v, 0.0f);
      }
    }
  }
}

TEST_F(CpuBatchNorm, OutputIsRoundedBeforeTheResidualAdd) {
  for (DType dt : {DType::F16, DType::BF16})
    EXPECT_TRUE(test::batchnorm_rounds_before_residual(*be, alloc, dt, 800));
}

TEST_F(CpuBatchNorm, EvalUsesRunningStatisticsAndUpdatesNothing) {
  const auto xv = act_values(5, 0.5f), rv_ = act_values(6, 0.1f);
  const auto gv = random_nonzero(c, 7), bv = random_nonzero(c, 8);
  // A running variance of 0 (a channel that never varied) is normalised by eps alone.
  const std::vector<float> rm0 = {0.25f, -0.5f, 1.0f}, rvar0 = {1.0f, 0.0f, 2.0f};
  Tensor x = make(Shape{rows, c}, DType::F32, xv), res = make(Shape{rows, c}, DType::F32, rv_);
  Tensor gamma = vec(gv), beta = vec(bv), rm = vec(rm0), rvar = vec(rvar0);
  for (bool relu : {false, true}) {
    Tensor y = out_act(DType::F32);
    BatchNormDesc d;
    d.relu = relu;
    be->batchnorm_forward_eval(d, x, &res, gamma, beta, rm, rvar, y);
    std::vector<float> ref(rows * c);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < c; ++j) {
        double v =
            gv[j] * (xv[i * c + j] - rm0[j]) / std::sqrt(rvar0[j] + 1e-5) + bv[j] + rv_[i * c + j];
        ref[i * c + j] = static_cast<float>(relu ? std::max(v, 0.0) : v);
      }
    auto r = compare(to_host_f32(*be, y), ref, 1e-5);
    EXPECT_TRUE(r.ok) << r.message;
  }
  EXPECT_EQ(to_host_f32(*be, rm), rm0);
  EXPECT_EQ(to_host_f32(*be, rvar), rvar0);
}

// y = relu(bn(x) + residual); L = sum(G o y). batchnorm_backward with relu_out = y must give
// dL/dx, dL/dgamma, dL/dbeta, and d_pre = dL/dresidual, all by central differences.
TEST_F(CpuBatchNorm, BackwardMatchesFiniteDifferences) {
  for (bool with_res : {false, true}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "residual " << with_res << " relu " << relu);
      const auto xv = act_values(11, 0.5f), rv_ = act_values(12, 0.2f);
      const auto gv = random_nonzero(c, 13), bv = random_nonzero(c, 14);
      const auto Gv = random_nonzero(rows * c, 15);
      Tensor x = make(Shape{rows, c}, DType::F32, xv), res = make(Shape{rows, c}, DType::F32, rv_);
      Tensor gamma = vec(gv), beta = vec(bv), rm = vec({0, 0, 0}), rvar = vec({1, 1, 1});
      Tensor sm = out_c(), sr = out_c(), y = out_act(DType::F32);
      BatchNormDesc d;
      d.relu = relu;
      be->batchnorm_forward_train(d, x, with_res ? &res : nullptr, gamma, beta, rm, rvar, sm, sr,
                                  y);
      Tensor dy = make(Shape{rows, c}, DType::F32, Gv);
      Tensor dx = out_act(DType::F32), d_pre = out_act(DType::F32);
      Tensor dgamma = out_c(), dbeta = out_c();
      be->batchnorm_backward(dy, relu ? &y : nullptr, x, gamma, sm, sr, dx, dgamma, dbeta,
                             with_res ? &d_pre : nullptr);

      auto x_d = to_double(xv), g_d = to_double(gv), b_d = to_double(bv), r_d = to_double(rv_);
      auto loss = [&](const std::vector<double>& xx, const std::vector<double>& gg,
                      const std::vector<double>& bb, const std::vector<double>& rr) {
        const BnRef f = bn_ref(rows, c, xx, gg, bb, with_res ? &rr : nullptr, relu, d.eps);
        double s = 0;
        for (size_t i = 0; i < f.y.size(); ++i) s += Gv[i] * f.y[i];
        return s;
      };
      const double h = 1e-5;
      const auto fd_x = test::central_differences(
          [&](const std::vector<double>& v) { return loss(v, g_d, b_d, r_d); }, x_d, h);
      const auto fd_g = test::central_differences(
          [&](const std::vector<double>& v) { return loss(x_d, v, b_d, r_d); }, g_d, h);
      const auto fd_b = test::central_differences(
          [&](const std::vector<double>& v) { return loss(x_d, g_d, v, r_d); }, b_d, h);
      auto rx = compare(to_host_f32(*be, dx), fd_x, 1e-4);
      auto rg = compare(to_host_f32(*be, dgamma), fd_g, 1e-4);
      auto rb = compare(to_host_f32(*be, dbeta), fd_b, 1e-4);
      EXPECT_TRUE(rx.ok) << "dx: " << rx.message;
      EXPECT_TRUE(rg.ok) << "dgamma: " << rg.message;
      EXPECT_TRUE(rb.ok) << "dbeta: " << rb.message;
      if (with_res) {
        const auto fd_r = test::central_differences(
            [&](const std::vector<double>& v) { return loss(x_d, g_d, b_d, v); }, r_d, h);
        auto rr = compare(to_host_f32(*be, d_pre), fd_r, 1e-4);
        EXPECT_TRUE(rr.ok) << "d_pre: " << rr.message;
      }
      if (relu) {  // the mask really bites: some outputs were clamped
        int clamped = 0;
        for (float v : to_host_f32(*be, y)) clamped += v == 0.0f;
        EXPECT_GT(clamped, 0);
      }
    }
  }
}

// fp16/bf16 activations (x, residual, y, dy, dx, d_pre) with fp32 statistics: each 16-bit
// output is the fp32 computation on the same values, rounded once, except that y's normalised
// value is rounded before the residual add (OutputIsRoundedBeforeTheResidualAdd).
TEST_F(CpuBatchNorm, LowPrecisionActivationsAreTheFp32ResultRounded) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto xv = rounded(dt, act_values(21, 0.5f)), rv_ = rounded(dt, act_values(22, 0.2f));
    const auto Gv = rounded(dt, random_nonzero(rows * c, 23));
    const auto gv = random_nonzero(c, 24), bv = random_nonzero(c, 25);
    std::vector<float> outs[2][5];  // [fp32, dt][y, dx, d_pre, dgamma, running_var]
    std::vector<float> normalised;  // fp32, without the residual and ReLU
    for (int k = 0; k < 2; ++k) {
      const DType t = k == 0 ? DType::F32 : dt;
      Tensor x = make(Shape{rows, c}, t, xv), res = make(Shape{rows, c}, t, rv_);
      Tensor gamma = vec(gv), beta = vec(bv), rm = vec({0, 0, 0}), rvar = vec({1, 1, 1});
      Tensor sm = out_c(), sr = out_c(), y = out_act(t);
      BatchNormDesc d;
      d.relu = true;
      be->batchnorm_forward_train(d, x, &res, gamma, beta, rm, rvar, sm, sr, y);
      if (k == 0) {
        Tensor rm2 = vec({0, 0, 0}), rvar2 = vec({1, 1, 1}), bn = out_act(t);
        BatchNormDesc plain;
        be->batchnorm_forward_train(plain, x, nullptr, gamma, beta, rm2, rvar2, sm, sr, bn);
        normalised = to_host_f32(*be, bn);
      }
      Tensor dy = make(Shape{rows, c}, t, Gv);
      Tensor dx = out_act(t), d_pre = out_act(t), dgamma = out_c(), dbeta = out_c();
      be->batchnorm_backward(dy, &y, x, gamma, sm, sr, dx, dgamma, dbeta, &d_pre);
      outs[k][0] = to_host_f32(*be, y);
      outs[k][1] = to_host_f32(*be, dx);
      outs[k][2] = to_host_f32(*be, d_pre);
      outs[k][3] = to_host_f32(*be, dgamma);
      outs[k][4] = to_host_f32(*be, rvar);
    }
    // y: the rounded normalised value plus the residual, rounded; d_pre: dy where that y is
    // positive (exact, dy being 16-bit already); dx sees the 16-bit y only through its sign.
    std::vector<float> y_want = rounded(dt, normalised);
    for (size_t i = 0; i < y_want.size(); ++i) y_want[i] = relu_forward(y_want[i] + rv_[i]);
    EXPECT_EQ(outs[1][0], rounded(dt, y_want));
    std::vector<float> d_pre_want(Gv.size());
    for (size_t i = 0; i < Gv.size(); ++i) d_pre_want[i] = outs[1][0][i] > 0.0f ? Gv[i] : 0.0f;
    EXPECT_EQ(outs[1][2], d_pre_want);
    auto rx = compare(outs[1][1], rounded(dt, outs[0][1]), test::tolerance_for(dt));
    EXPECT_TRUE(rx.ok) << "dx: " << rx.message;
    // Statistics stay fp32: identical whatever the activation dtype.
    EXPECT_EQ(outs[1][3], outs[0][3]);
    EXPECT_EQ(outs[1][4], outs[0][4]);
  }
}

// The fused ReLU is PyTorch's (kernels/relu.h): a NaN after the residual add stays NaN, and the
// backward's g (d_pre) is dy where y is positive or NaN, 0 where y is 0, even for an inf dy.
TEST_F(CpuBatchNorm, FusedReluKeepsNaNAndSelectsTheGradient) {
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto rv_ = act_values(41, 0.2f);
    rv_[1] = NAN;
    rv_[4] = -INFINITY;
    rv_[8] = INFINITY;
    Tensor x = make(Shape{rows, c}, dt, act_values(42, 0.5f)), res = make(Shape{rows, c}, dt, rv_);
    Tensor gamma = vec(random_nonzero(c, 43)), beta = vec(random_nonzero(c, 44));
    Tensor rm = vec({0, 0, 0}), rvar = vec({1, 1, 1}), sm = out_c(), sr = out_c(), y = out_act(dt);
    BatchNormDesc d;
    d.relu = true;
    be->batchnorm_forward_train(d, x, &res, gamma, beta, rm, rvar, sm, sr, y);
    const std::vector<float> yv = to_host_f32(*be, y);
    EXPECT_TRUE(std::isnan(yv[1])) << yv[1];
    EXPECT_EQ(yv[4], 0.0f);
    EXPECT_EQ(yv[8], INFINITY);

    std::vector<float> dyv(rows * c);
    for (int64_t i = 0; i < rows * c; ++i) dyv[i] = yv[i] > 0.0f ? 0.5f : INFINITY;
    dyv[1] = 0.75f;  // y NaN: passed on
    Tensor dy = make(Shape{rows, c}, dt, dyv);
    Tensor dx = out_act(dt), d_pre = out_act(dt), dgamma = out_c(), dbeta = out_c();
    be->batchnorm_backward(dy, &y, x, gamma, sm, sr, dx, dgamma, dbeta, &d_pre);
    const std::vector<float> g = to_host_f32(*be, d_pre);
    for (int64_t i = 0; i < rows * c; ++i)
      EXPECT_EQ(g[i], std::isnan(yv[i]) || yv[i] > 0.0f ? dyv[i] : 0.0f) << "element " << i;
  }
}

TEST_F(CpuBatchNorm, MixedDtypesForResidualAndOutput) {
  // bf16 x with an fp32 residual into an fp32 y: BatchNorm's output in x's dtype (autocast's), the
  // add in fp32, as PyTorch adds a bf16 tensor to an fp32 one.
  const auto xv = rounded(DType::BF16, act_values(31, 0.5f)), rv_ = act_values(32, 0.2f);
  const auto gv = random_nonzero(c, 33), bv = random_nonzero(c, 34);
  Tensor x = make(Shape{rows, c}, DType::BF16, xv), res = make(Shape{rows, c}, DType::F32, rv_);
  Tensor gamma = vec(gv), beta = vec(bv), rm = vec({0, 0, 0}), rvar = vec({1, 1, 1});
  Tensor sm = out_c(), sr = out_c(), y = out_act(DType::F32);
  BatchNormDesc d;
  be->batchnorm_forward_train(d, x, &res, gamma, beta, rm, rvar, sm, sr, y);
  // The normalised bf16 values from the same op without the residual (a double reference could sit
  // on the other side of a bf16 rounding boundary).
  Tensor rm2 = vec({0, 0, 0}), rvar2 = vec({1, 1, 1}), bn = out_act(DType::BF16);
  be->batchnorm_forward_train(d, x, nullptr, gamma, beta, rm2, rvar2, sm, sr, bn);
  std::vector<float> want = to_host_f32(*be, bn);
  for (size_t i = 0; i < want.size(); ++i) want[i] += rv_[i];
  EXPECT_EQ(to_host_f32(*be, y), want);
}

TEST_F(CpuBatchNorm, RejectsMismatchedArguments) {
  Tensor x = make(Shape{rows, c}, DType::F32, act_values(41, 0.5f));
  Tensor gamma = vec({1, 1, 1}), beta = vec({0, 0, 0}), rm = vec({0, 0, 0}), rvar = vec({1, 1, 1});
  Tensor sm = out_c(), sr = out_c(), y = out_act(DType::F32);
  BatchNormDesc d;
  Tensor short_gamma = make(Shape{2}, DType::F32, {1, 1});
  EXPECT_THROW(be->batchnorm_forward_train(d, x, nullptr, short_gamma, beta, rm, rvar, sm, sr, y),
               Error);
  Tensor y_bad = make(Shape{rows, c + 1}, DType::F32, random_nonzero(rows * (c + 1), 1));
  EXPECT_THROW(be->batchnorm_forward_train(d, x, nullptr, gamma, beta, rm, rvar, sm, sr, y_bad),
               Error);
  Tensor res_bad = make(Shape{rows - 1, c}, DType::F32, random_nonzero((rows - 1) * c, 2));
  EXPECT_THROW(be->batchnorm_forward_train(d, x, &res_bad, gamma, beta, rm, rvar, sm, sr, y),
               Error);
  EXPECT_THROW(be->batchnorm_forward_eval(d, x, &res_bad, gamma, beta, rm, rvar, y), Error);
  Tensor gamma16 = make(Shape{c}, DType::F16, {1, 1, 1});
  EXPECT_THROW(be->batchnorm_forward_eval(d, x, nullptr, gamma16, beta, rm, rvar, y), Error);
  Tensor one_row = make(Shape{1, c}, DType::F32, {1, 2, 3});
  Tensor y1 = make(Shape{1, c}, DType::F32, {0, 0, 0});
  EXPECT_THROW(be->batchnorm_forward_train(d, one_row, nullptr, gamma, beta, rm, rvar, sm, sr, y1),
               Error);  // no variance from one value per channel, as in PyTorch
  d.momentum = 1.5f;    // past 1 the running statistics extrapolate
  EXPECT_THROW(be->batchnorm_forward_train(d, x, nullptr, gamma, beta, rm, rvar, sm, sr, y), Error);
  d.momentum = BatchNormDesc{}.momentum;

  be->batchnorm_forward_train(d, x, nullptr, gamma, beta, rm, rvar, sm, sr, y);
  Tensor dx = out_act(DType::F32), dg = out_c(), db = out_c();
  Tensor dx16 = out_act(DType::F16);
  EXPECT_THROW(be->batchnorm_backward(y, nullptr, x, gamma, sm, sr, dx16, dg, db, nullptr),
               Error);  // dx must have x's dtype
  EXPECT_THROW(be->batchnorm_backward(y_bad, nullptr, x, gamma, sm, sr, dx, dg, db, nullptr),
               Error);
  EXPECT_THROW(be->batchnorm_backward(y, &y_bad, x, gamma, sm, sr, dx, dg, db, nullptr), Error);
  EXPECT_THROW(be->batchnorm_backward(y, nullptr, x, gamma, sm, sr, dx, short_gamma, db, nullptr),
               Error);
  be->batchnorm_backward(y, &y, x, gamma, sm, sr, dx, dg, db, nullptr);  // valid call works
  // d_pre may take dy's place in dy's dtype, not x's or relu_out's (the GPU reads those, and dy,
  // again after writing it).
  Tensor g = make(Shape{rows, c}, DType::F32, act_values(42, 0.5f));
  EXPECT_THROW(be->batchnorm_backward(g, &y, x, gamma, sm, sr, dx, dg, db, &x), Error);
  EXPECT_THROW(be->batchnorm_backward(g, &y, x, gamma, sm, sr, dx, dg, db, &y), Error);
  Tensor g_as_bf16{g.data, g.shape, DType::BF16, g.device};  // dy's first half, read as bf16
  EXPECT_THROW(be->batchnorm_backward(g, &y, x, gamma, sm, sr, dx, dg, db, &g_as_bf16), Error);
  be->batchnorm_backward(g, &y, x, gamma, sm, sr, dx, dg, db, &g);
}

// ---- avgpool, add -----------------------------------------------------------------------------

class CpuPoolAdd : public test::CpuOpsTest {};

TEST_F(CpuPoolAdd, AvgPoolForwardAndBackward) {
  const int64_t n = 3, hw = 7, c = 5;
  const auto xv = random_nonzero(n * hw * c, 1), gv = random_nonzero(n * c, 2);
  Tensor x = make(Shape{n, hw, c}, DType::F32, xv);
  Tensor y = alloc.alloc(Shape{n, c}, DType::F32, MemCategory::Activations);
  Tensor dy = make(Shape{n, c}, DType::F32, gv);
  Tensor dx = alloc.alloc(Shape{n, hw, c}, DType::F32, MemCategory::Activations);
  test::poison(*be, y);
  test::poison(*be, dx);
  be->avgpool_forward(x, y);
  be->avgpool_backward(dy, dx);
  auto pool = [&](const std::vector<double>& v) {
    std::vector<double> out(n * c, 0.0);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i)
        for (int64_t j = 0; j < c; ++j) out[b * c + j] += v[(b * hw + i) * c + j] / hw;
    return out;
  };
  auto r = compare(to_host_f32(*be, y), to_float(pool(to_double(xv))), 1e-6);
  EXPECT_TRUE(r.ok) << r.message;
  const auto fd = test::central_differences(
      [&](const std::vector<double>& v) {
        const auto p = pool(v);
        double s = 0;
        for (size_t i = 0; i < p.size(); ++i) s += gv[i] * p[i];
        return s;
      },
      to_double(xv), 1e-3);
  auto rd = compare(to_host_f32(*be, dx), fd, 1e-6);
  EXPECT_TRUE(rd.ok) << rd.message;
}

TEST_F(CpuPoolAdd, AvgPoolLowPrecisionIsTheFp32ResultRounded) {
  const int64_t n = 2, hw = 49, c = 8;
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto xv = rounded(dt, random_nonzero(n * hw * c, 3, 4.0f));
    const auto gv = rounded(dt, random_nonzero(n * c, 4));
    std::vector<float> y32, dx32, y16, dx16;
    for (DType t : {DType::F32, dt}) {
      Tensor x = make(Shape{n, hw, c}, t, xv), dy = make(Shape{n, c}, t, gv);
      Tensor y = alloc.alloc(Shape{n, c}, t, MemCategory::Activations);
      Tensor dx = alloc.alloc(Shape{n, hw, c}, t, MemCategory::Activations);
      test::poison(*be, y);
      test::poison(*be, dx);
      be->avgpool_forward(x, y);
      be->avgpool_backward(dy, dx);
      (t == DType::F32 ? y32 : y16) = to_host_f32(*be, y);
      (t == DType::F32 ? dx32 : dx16) = to_host_f32(*be, dx);
    }
    EXPECT_EQ(y16, rounded(dt, y32));
    EXPECT_EQ(dx16, rounded(dt, dx32));
    EXPECT_TRUE(compare(y16, y32, test::tolerance_for(dt)).ok);
  }
  Tensor x = make(Shape{2, 3, 4}, DType::F32, random_nonzero(24, 5));
  Tensor y_bad = make(Shape{2, 3}, DType::F32, random_nonzero(6, 6));
  EXPECT_THROW(be->avgpool_forward(x, y_bad), Error);
  EXPECT_THROW(be->avgpool_backward(y_bad, x), Error);
  Tensor x2 = x.reshaped(Shape{6, 4});
  Tensor y_ok = make(Shape{2, 4}, DType::F32, random_nonzero(8, 7));
  EXPECT_THROW(be->avgpool_forward(x2, y_ok), Error);  // x must be (N, HW, C)
}

// ---- max pool ---------------------------------------------------------------------------------

// Max pooling of x (n, h, w, c) in double, written from PyTorch's kernel: per window, scanning
// row-major from -inf, a value takes over when greater or NaN; the gradient is scattered to the
// winners and summed in double.
struct MaxPoolRef {
  int64_t p = 0, q = 0;
  std::vector<double> y;
  std::vector<int64_t> winner;  // per output, the input index (n, h, w, c) it came from
};
MaxPoolRef maxpool_ref(const std::vector<double>& x, int64_t n, int64_t h, int64_t w, int64_t c,
                       const PoolDesc& d) {
  MaxPoolRef r;
  r.p = (h + 2 * d.pad - d.kernel) / d.stride + 1;
  r.q = (w + 2 * d.pad - d.kernel) / d.stride + 1;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t op = 0; op < r.p; ++op)
      for (int64_t oq = 0; oq < r.q; ++oq)
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t hs = std::max<int64_t>(op * d.stride - d.pad, 0);
          const int64_t ws = std::max<int64_t>(oq * d.stride - d.pad, 0);
          const int64_t he = std::min(op * d.stride - d.pad + d.kernel, h);
          const int64_t we = std::min(oq * d.stride - d.pad + d.kernel, w);
          int64_t best = ((b * h + hs) * w + ws) * c + ch;
          double best_v = -INFINITY;
          for (int64_t i = hs; i < he; ++i)
            for (int64_t j = ws; j < we; ++j) {
              const int64_t idx = ((b * h + i) * w + j) * c + ch;
              if (x[idx] > best_v || std::isnan(x[idx])) {
                best = idx;
                best_v = x[idx];
              }
            }
          r.y.push_back(x[best]);
          r.winner.push_back(best);
        }
  return r;
}

class CpuMaxPool : public test::CpuOpsTest {};

TEST_F(CpuMaxPool, ForwardAndBackwardMatchTheReferenceInEveryDtype) {
  struct Case {
    int64_t n, h, w, c;
    PoolDesc d;
  };
  const std::vector<Case> cases = {
      {2, 8, 8, 3, {3, 2, 1}},  // the ResNet stem's pool
      {1, 7, 5, 2, {3, 2, 1}},  // odd sizes: the last window hangs over the padding
      {2, 6, 6, 4, {2, 2, 0}}, {1, 5, 5, 3, {3, 1, 1}},
      {3, 4, 4, 1, {1, 1, 0}}, {1, 1, 1, 5, {3, 2, 1}},  // one pixel: the padding never wins
  };
  uint64_t seed = 40;
  for (const Case& k : cases)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(fmt::format("{}x{}x{}x{} {}x{}/s{} pad {} {}", k.n, k.h, k.w, k.c, k.d.kernel,
                               k.d.kernel, k.d.stride, k.d.pad, dtype_name(dt)));
      const auto xv = rounded(dt, random_nonzero(k.n * k.h * k.w * k.c, ++seed, 3.0f));
      const MaxPoolRef ref = maxpool_ref(to_double(xv), k.n, k.h, k.w, k.c, k.d);
      const Shape ys{k.n, ref.p, ref.q, k.c};
      const auto gv = rounded(dt, random_nonzero(ys.numel(), ++seed));
      Tensor x = make(Shape{k.n, k.h, k.w, k.c}, dt, xv), y = poisoned(ys, dt);
      Tensor dy = make(ys, dt, gv), dx = poisoned(x.shape, dt);
      be->maxpool2d_forward(k.d, x, y);
      be->maxpool2d_backward(k.d, x, dy, dx);
      EXPECT_EQ(to_host_f32(*be, y), to_float(ref.y));  // a copy of the winner: exact
      std::vector<double> dref(xv.size(), 0.0);
      for (size_t i = 0; i < ref.winner.size(); ++i) dref[ref.winner[i]] += gv[i];
      // At most ceil(kernel / stride)^2 terms, summed in fp32 and rounded once.
      const auto r = compare(to_host_f32(*be, dx), rounded(dt, to_float(dref)),
                             dt == DType::F32 ? 1e-6 : test::tolerance_for(dt));
      EXPECT_TRUE(r.ok) << r.message;
      // Bit for bit: each input's fp32 sum from 0 over the windows it won in row-major order,
      // the order the CUDA kernel gathers in, so that the two backends agree exactly.
      std::vector<float> dgather(xv.size(), 0.0f);
      for (size_t i = 0; i < ref.winner.size(); ++i)
        dgather[static_cast<size_t>(ref.winner[i])] += gv[i];
      EXPECT_EQ(to_host_f32(*be, dx), rounded(dt, dgather));
    }
}

// The CUDA backward's two passes, run here through the same helpers (kernels/pool_window.h):
// each window's winner as an offset, then per input the gather of the windows it won, in the
// 32-bit indices the kernels use. Bit for bit the reference's scatter, ties, NaN and -inf
// included, so that a GPU run of them can only differ in the launch.
TEST_F(CpuMaxPool, GatherOfStoredWinnersIsTheReferenceBitForBit) {
  struct Case {
    int64_t n, h, w, c;
    PoolDesc d;
  };
  const std::vector<Case> cases = {{2, 9, 9, 3, {3, 2, 1}},  {1, 7, 5, 2, {3, 2, 1}},
                                   {2, 6, 6, 4, {2, 2, 0}},  {1, 5, 5, 3, {3, 1, 1}},
                                   {1, 11, 9, 2, {5, 3, 2}}, {1, 1, 1, 5, {3, 2, 1}}};
  uint64_t seed = 90;
  for (const Case& k : cases) {
    SCOPED_TRACE(fmt::format("{}x{}x{}x{} {}x{}/s{} pad {}", k.n, k.h, k.w, k.c, k.d.kernel,
                             k.d.kernel, k.d.stride, k.d.pad));
    // Few distinct values, so that windows tie; some NaN and -inf.
    std::vector<float> xv = random_nonzero(k.n * k.h * k.w * k.c, ++seed, 3.0f);
    for (size_t i = 0; i < xv.size(); ++i) {
      xv[i] = std::round(xv[i]);
      if (i % 17 == 5) xv[i] = NAN;
      if (i % 13 == 7) xv[i] = -INFINITY;
    }
    const PoolGeom g{k.h,
                     k.w,
                     (k.h + 2 * k.d.pad - k.d.kernel) / k.d.stride + 1,
                     (k.w + 2 * k.d.pad - k.d.kernel) / k.d.stride + 1,
                     k.d.kernel,
                     k.d.stride,
                     k.d.pad};
    const Shape ys{k.n, g.p, g.q, k.c};
    const auto gv = random_nonzero(ys.numel(), ++seed);
    Tensor x = make(Shape{k.n, k.h, k.w, k.c}, DType::F32, xv);
    Tensor dy = make(ys, DType::F32, gv), dx = poisoned(x.shape, DType::F32);
    be->maxpool2d_backward(k.d, x, dy, dx);

    const int c = static_cast<int>(k.c);
    std::vector<uint8_t> winners(static_cast<size_t>(ys.numel()));
    for (int i = 0; i < static_cast<int>(winners.size()); ++i) {
      const int ch = i % c, oq = (i / c) % g.q, op = (i / c / g.q) % g.p, b = i / c / g.q / g.p;
      const float* plane = xv.data() + b * k.h * k.w * c + ch;
      winners[i] = static_cast<uint8_t>(pool_winner_offset(
          g, op, oq, [&](int64_t h, int64_t w) { return plane[(h * g.w + w) * c]; }));
    }
    std::vector<float> gathered(xv.size());
    for (int i = 0; i < static_cast<int>(xv.size()); ++i) {
      const int ch = i % c, w = (i / c) % k.w, h = (i / c / k.w) % k.h, b = i / c / k.w / k.h;
      const int out0 = b * static_cast<int>(g.p * g.q);
      gathered[i] = pool_gather<int>(
          g, h, w, [&](int op, int oq) { return int{winners[(out0 + op * g.q + oq) * c + ch]}; },
          [&](int op, int oq) { return gv[(out0 + op * g.q + oq) * c + ch]; });
    }
    const auto want = to_host_f32(*be, dx);
    ASSERT_EQ(want.size(), gathered.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(f32_bits(gathered[i]), f32_bits(want[i])) << i;
  }
}

TEST_F(CpuMaxPool, TiesGoToTheFirstMaximumAndNanToTheLast) {
  const PoolDesc d{2, 2, 0};
  // One 2x2 window per case, one channel: (equal values), (-inf everywhere), (NaN twice).
  const float inf = INFINITY, nan = NAN;
  for (const auto& [values, winner] :
       std::vector<std::pair<std::vector<float>, int>>{{{1, 1, 1, 1}, 0},
                                                       {{-inf, -inf, -inf, -inf}, 0},
                                                       {{1, nan, 2, nan}, 3},
                                                       {{0, 5, 5, 1}, 1}}) {
    Tensor x = make(Shape{1, 2, 2, 1}, DType::F32, values),
           y = poisoned(Shape{1, 1, 1, 1}, DType::F32);
    Tensor dy = make(Shape{1, 1, 1, 1}, DType::F32, {7.0f}), dx = poisoned(x.shape, DType::F32);
    be->maxpool2d_forward(d, x, y);
    be->maxpool2d_backward(d, x, dy, dx);
    const auto got = to_host_f32(*be, dx);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], i == winner ? 7.0f : 0.0f) << i;
    const float yv = to_host_f32(*be, y)[0];
    if (std::isnan(values[winner])) {
      EXPECT_TRUE(std::isnan(yv));
    } else {
      EXPECT_EQ(yv, values[winner]);
    }
  }
}

TEST_F(CpuMaxPool, RejectsMismatchedArguments) {
  const PoolDesc d;  // 3x3 / 2, pad 1: 8x8 -> 4x4
  Tensor x = make(Shape{1, 8, 8, 2}, DType::F32, random_nonzero(128, 1));
  Tensor y = poisoned(Shape{1, 4, 4, 2}, DType::F32), dx = poisoned(x.shape, DType::F32);
  Tensor y_bad = poisoned(Shape{1, 3, 4, 2}, DType::F32);
  Tensor y16 = poisoned(Shape{1, 4, 4, 2}, DType::BF16);
  EXPECT_THROW(be->maxpool2d_forward(d, x, y_bad), Error);
  EXPECT_THROW(be->maxpool2d_forward(d, x, y16), Error);                       // one dtype
  EXPECT_THROW(be->maxpool2d_forward(d, x.reshaped(Shape{64, 2}), y), Error);  // not NHWC
  EXPECT_THROW(be->maxpool2d_forward(PoolDesc{3, 2, 2}, x, y), Error);         // pad > kernel / 2
  EXPECT_THROW(be->maxpool2d_forward(PoolDesc{3, 0, 1}, x, y), Error);
  EXPECT_THROW(be->maxpool2d_backward(d, x, y, x), Error);  // dx aliases x
  // dx over dy's memory (dy the first of it): the backward would write dy while reading it.
  Tensor shared = poisoned(x.shape, DType::F32);
  EXPECT_THROW(be->maxpool2d_backward(d, x, shared.slice(0, y.shape), shared), Error);
  EXPECT_THROW(be->maxpool2d_backward(d, x, y_bad, dx), Error);
  be->maxpool2d_forward(d, x, y);  // the right shapes pass
  be->maxpool2d_backward(d, x, y, dx);
}

TEST_F(CpuPoolAdd, AddAnyDtypesAndInPlace) {
  const int64_t n = 5000;  // more than one internal block
  const auto av = random_nonzero(n, 1), bv = random_nonzero(n, 2);
  for (DType da : {DType::F32, DType::F16, DType::BF16}) {
    for (DType db : {DType::F32, DType::BF16}) {
      for (DType dout : {DType::F32, DType::F16}) {
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(da) << " + " << dtype_name(db) << " -> " << dtype_name(dout));
        Tensor a = make(Shape{n}, da, av), b = make(Shape{50, 100}, db, bv);
        Tensor out = alloc.alloc(Shape{100, 50}, dout, MemCategory::Activations);
        test::poison(*be, out);
        be->add(a, b, out);
        const auto ah = to_host_f32(*be, a), bh = to_host_f32(*be, b);
        std::vector<float> ref(n);
        for (int64_t i = 0; i < n; ++i) ref[i] = round_to(dout, ah[i] + bh[i]);
        EXPECT_EQ(to_host_f32(*be, out), ref);
      }
    }
  }
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor a = make(Shape{n}, dt, av), b = make(Shape{n}, dt, bv);
    const auto ah = to_host_f32(*be, a), bh = to_host_f32(*be, b);
    be->add(a, b, a);  // out aliases a
    be->add(a, b, b);  // out aliases b: b = (a + b) + b
    const auto got = to_host_f32(*be, b);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], round_to(dt, round_to(dt, ah[i] + bh[i]) + bh[i])) << i;
  }
  Tensor a = make(Shape{4}, DType::F32, {1, 2, 3, 4}),
         b = make(Shape{5}, DType::F32, {1, 2, 3, 4, 5});
  EXPECT_THROW(be->add(a, b, a), Error);
  Tensor ai = alloc.alloc(Shape{4}, DType::I32, MemCategory::Activations);
  EXPECT_THROW(be->add(ai, a, a), Error);
  // out over a's memory as bf16: each element written would land on a's elements not read yet.
  Tensor a16 = a;
  a16.dtype = DType::BF16;
  Tensor c = make(Shape{4}, DType::F32, {1, 2, 3, 4});
  EXPECT_THROW(be->add(a, c, a16), Error);
  EXPECT_THROW(be->add(c, a, a16), Error);
  EXPECT_EQ(to_host_f32(*be, a), (std::vector<float>{1, 2, 3, 4}));
}

// ---- permute ----------------------------------------------------------------------------------

class CpuPermute : public test::CpuOpsTest {
 protected:
  // dst[i0..] = src[j] with j[perm[k]] = i_k, by plain index arithmetic on flat offsets.
  static std::vector<float> permute_ref(const std::vector<float>& src, const Shape& s,
                                        const std::array<int, 5>& perm) {
    const int rank = s.rank;
    std::vector<int64_t> dshape(rank), sstride(rank);
    for (int k = 0; k < rank; ++k) dshape[k] = s[perm[k]];
    int64_t st = 1;
    for (int k = rank - 1; k >= 0; --k) sstride[k] = st, st *= s[k];
    std::vector<float> out(src.size());
    for (int64_t o = 0; o < static_cast<int64_t>(src.size()); ++o) {
      int64_t rem = o, soff = 0;
      for (int k = rank - 1; k >= 0; --k) {
        const int64_t i = rem % dshape[k];
        rem /= dshape[k];
        soff += i * sstride[perm[k]];
      }
      out[o] = src[soff];
    }
    return out;
  }
  static Shape permuted(const Shape& s, const std::array<int, 5>& perm) {
    Shape d = s;
    for (int k = 0; k < s.rank; ++k) d.dims[k] = s[perm[k]];
    return d;
  }
};

TEST_F(CpuPermute, MatchesIndexArithmetic) {
  struct Case {
    Shape s;
    std::array<int, 5> perm;
  };
  const Case cases[] = {
      {Shape{2, 5, 3, 4, 6}, {2, 0, 3, 1, 4}},  // (B, S, 3, H, Dh) -> (3, B, H, S, Dh): QKV split
      {Shape{2, 4, 5, 6}, {0, 2, 1, 3}},        // (B, H, S, Dh) <-> (B, S, H, Dh)
      {Shape{7, 3}, {1, 0, 0, 0, 0}},           // transpose; entries past the rank ignored
      {Shape{3, 4, 5}, {2, 1, 0}},
      {Shape{3, 4, 5}, {0, 1, 2}},  // identity
      {Shape{9}, {0}},
  };
  for (const Case& c : cases) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(::testing::Message()
                   << c.s.str() << " " << dtype_name(dt) << " perm " << c.perm[0] << c.perm[1]
                   << c.perm[2] << c.perm[3] << c.perm[4]);
      // Distinct small integers: exact in every dtype, so any misplaced element shows.
      std::vector<float> v(c.s.numel());
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 251) - 125.0f;
      Tensor src = make(c.s, dt, v);
      Tensor dst = alloc.alloc(permuted(c.s, c.perm), dt, MemCategory::Activations);
      test::poison(*be, dst);
      be->permute(src, dst, c.perm);
      EXPECT_EQ(to_host_f32(*be, dst), permute_ref(v, c.s, c.perm));
    }
  }
}

TEST_F(CpuPermute, Int32AndTheQkvLayoutByHand) {
  // (B, S, 3, H, Dh) = (1, 2, 3, 2, 2); element value encodes its source index b s t h d.
  const Shape s{1, 2, 3, 2, 2};
  std::vector<int32_t> v(s.numel());
  for (int si = 0; si < 2; ++si)
    for (int t = 0; t < 3; ++t)
      for (int h = 0; h < 2; ++h)
        for (int d = 0; d < 2; ++d)
          v[((si * 3 + t) * 2 + h) * 2 + d] = si * 100 + t * 10 + h * 2 + d;
  Tensor src = alloc.alloc(s, DType::I32, MemCategory::Activations);
  be->upload(v.data(), src);
  Tensor dst = alloc.alloc(Shape{3, 1, 2, 2, 2}, DType::I32, MemCategory::Activations);
  test::poison(*be, dst);
  be->permute(src, dst, {2, 0, 3, 1, 4});
  std::vector<int32_t> got(dst.numel());
  be->download(dst, got.data());
  // dst (t, b, h, s, d) holds src (b, s, t, h, d).
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < 2; ++h)
      for (int si = 0; si < 2; ++si)
        for (int d = 0; d < 2; ++d)
          EXPECT_EQ(got[((t * 2 + h) * 2 + si) * 2 + d], si * 100 + t * 10 + h * 2 + d);
}

TEST_F(CpuPermute, RejectsMismatches) {
  Tensor src = make(Shape{2, 3, 4}, DType::F32, random_nonzero(24, 1));
  Tensor dst = alloc.alloc(Shape{4, 3, 2}, DType::F32, MemCategory::Activations);
  be->permute(src, dst, {2, 1, 0});
  try {
    be->permute(src, dst, {1, 0, 2});  // would need (3, 2, 4)
    FAIL() << "shape mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dimension"), std::string::npos) << e.what();
  }
  EXPECT_THROW(be->permute(src, dst, {2, 2, 0}), Error);  // not a permutation
  // Not one either, though every dimension it names matches: 3 and 3.
  Tensor square = make(Shape{2, 3, 3}, DType::F32, random_nonzero(18, 3));
  Tensor square_out = alloc.alloc(Shape{2, 3, 3}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(be->permute(square, square_out, {0, 1, 1}), Error);
  EXPECT_THROW(be->permute(src, dst, {3, 1, 0}), Error);  // out of range
  Tensor dst16 = alloc.alloc(Shape{4, 3, 2}, DType::F16, MemCategory::Activations);
  EXPECT_THROW(be->permute(src, dst16, {2, 1, 0}), Error);  // dtype differs
  Tensor dst2 = alloc.alloc(Shape{4, 6}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(be->permute(src, dst2, {1, 0, 0}), Error);  // rank differs
  Tensor same = make(Shape{3, 3}, DType::F32, random_nonzero(9, 2));
  EXPECT_THROW(be->permute(same, same, {1, 0}), Error);  // in place is not supported
}

}  // namespace
}  // namespace mpbench
