// The CUDA ops of the resnet_bottleneck and transformer families (batchnorm, avgpool, add,
// permute, layernorm, embedding, attention softmax) against the CPU reference on the same fresh
// random non-zero inputs, outputs poisoned first, odd sizes included. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "parity_env.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::column_abs_sums;
using test::Env;
using test::Pair;
using test::random_nonzero;
using test::tolerance_for;

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

// Random values around `offset`, so that statistics such as a mean are far from zero and can be
// compared relatively.
std::vector<float> shifted(size_t n, uint64_t seed, float offset, float scale = 1.0f) {
  auto v = random_nonzero(n, seed, scale);
  for (auto& x : v) x += offset;
  return v;
}

// The dtype of x, and fp32 when that is another one.
std::vector<DType> out_types(DType x) {
  if (x == DType::F32) return {DType::F32};
  return {x, DType::F32};
}

double tol2(DType a, DType b) {
  return std::max(tolerance_for(a), tolerance_for(b));
}

// ---- batchnorm ---------------------------------------------------------------------------------

struct BnCase {
  int64_t rows, c;
};
// Training-mode forward with the residual add and ReLU, on both backends.
void relu_forward_train(Env& env, const Pair& x, const Pair& res, const Pair& gamma,
                        const Pair& beta, Pair& rmean, Pair& rvar, Pair& smean, Pair& srstd,
                        Pair& y) {
  BatchNormDesc d;
  d.relu = true;
  env.cpu->batchnorm_forward_train(d, x.cpu, &res.cpu, gamma.cpu, beta.cpu, rmean.cpu, rvar.cpu,
                                   smean.cpu, srstd.cpu, y.cpu);
  env.dut->batchnorm_forward_train(d, x.dut, &res.dut, gamma.dut, beta.dut, rmean.dut, rvar.dut,
                                   smean.dut, srstd.dut, y.dut);
}

const BnCase kBnCases[] = {{2, 1},    {7, 3},     {33, 64},    {257, 100},
                           {1000, 5}, {4099, 64}, {512, 2048}, {20000, 33}};

TEST(FamilyOpsParity, BatchNormForwardTrainAndEval) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 100;
  for (DType xdt : kFloatTypes)
    for (const auto& bc : kBnCases)
      for (int variant = 0; variant < 3; ++variant) {  // 0 plain, 1 relu, 2 residual + relu
        const DType ydt = variant == 2 && xdt != DType::F32 ? DType::F32 : xdt;  // mixed dtypes
        const Shape s{bc.rows, bc.c};
        const std::string what = fmt::format("{} -> {} rows {} C {} variant {}", dtype_name(xdt),
                                             dtype_name(ydt), bc.rows, bc.c, variant);
        Pair x = env.make(s, xdt, shifted(s.numel(), seed += 11, 3.0f));
        Pair res = env.random(s, DType::BF16, seed + 1);
        Pair gamma = env.random(Shape{bc.c}, DType::F32, seed + 2, 2.0f);
        Pair beta = env.random(Shape{bc.c}, DType::F32, seed + 3);
        Pair rmean = env.random(Shape{bc.c}, DType::F32, seed + 4);
        Pair rvar = env.make(Shape{bc.c}, DType::F32, shifted(bc.c, seed + 5, 2.0f));
        Pair smean = env.poisoned(Shape{bc.c}, DType::F32);
        Pair srstd = env.poisoned(Shape{bc.c}, DType::F32);
        Pair y = env.poisoned(s, ydt);
        BatchNormDesc d;
        d.relu = variant >= 1;
        d.momentum = 0.25f;
        const bool use_res = variant == 2;
        env.cpu->batchnorm_forward_train(d, x.cpu, use_res ? &res.cpu : nullptr, gamma.cpu,
                                         beta.cpu, rmean.cpu, rvar.cpu, smean.cpu, srstd.cpu,
                                         y.cpu);
        env.dut->batchnorm_forward_train(d, x.dut, use_res ? &res.dut : nullptr, gamma.dut,
                                         beta.dut, rmean.dut, rvar.dut, smean.dut, srstd.dut,
                                         y.dut);
        EXPECT_TRUE(env.close(y, tol2(xdt, ydt))) << "train y " << what;
        EXPECT_TRUE(env.close(smean, 1e-5)) << "save_mean " << what;
        EXPECT_TRUE(env.close(srstd, 1e-4)) << "save_rstd " << what;
        EXPECT_TRUE(env.close(rmean, 1e-5)) << "running_mean " << what;
        EXPECT_TRUE(env.close(rvar, 1e-4)) << "running_var " << what;
        if (d.relu) {
          auto hy = env.host_dut(y);
          EXPECT_TRUE(std::all_of(hy.begin(), hy.end(), [](float v) { return v >= 0.0f; })) << what;
        }

        Pair ye = env.poisoned(s, ydt);
        env.cpu->batchnorm_forward_eval(d, x.cpu, use_res ? &res.cpu : nullptr, gamma.cpu, beta.cpu,
                                        rmean.cpu, rvar.cpu, ye.cpu);
        env.dut->batchnorm_forward_eval(d, x.dut, use_res ? &res.dut : nullptr, gamma.dut, beta.dut,
                                        rmean.dut, rvar.dut, ye.dut);
        EXPECT_TRUE(env.close(ye, tol2(xdt, ydt))) << "eval y " << what;
        for (Pair* p : {&x, &res, &gamma, &beta, &rmean, &rvar, &smean, &srstd, &y, &ye})
          env.release(*p);
      }
}

// The rounding before the residual add (autocast's BatchNorm output), on the device too.
TEST(FamilyOpsParity, BatchNormOutputIsRoundedBeforeTheResidualAdd) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  for (DType dt : {DType::F16, DType::BF16}) {
    if (test::reference_against_itself(dt, GemmMath::LowPrecision)) continue;
    EXPECT_TRUE(test::batchnorm_rounds_before_residual(*env.dut, env.dut_alloc, dt, 810));
  }
}

TEST(FamilyOpsParity, BatchNormBackward) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 2000;
  for (DType dt : kFloatTypes)
    for (const auto& bc : kBnCases)
      for (int variant = 0; variant < 3; ++variant) {  // 0 plain, 1 relu mask, 2 mask + d_pre
        const Shape s{bc.rows, bc.c};
        const DType xdt = variant == 2 ? DType::F32 : dt;  // dy and x dtypes may differ
        const std::string what = fmt::format("dy {} x {} rows {} C {} variant {}", dtype_name(dt),
                                             dtype_name(xdt), bc.rows, bc.c, variant);
        Pair x = env.make(s, xdt, shifted(s.numel(), seed += 13, 1.0f));
        Pair dy = env.random(s, dt, seed + 1);
        Pair relu_out = env.random(s, dt, seed + 2);  // about half of it positive
        Pair gamma = env.random(Shape{bc.c}, DType::F32, seed + 3, 2.0f);
        // Statistics as a forward pass would have saved them.
        std::vector<float> hx = env.host_cpu(x), mean(bc.c, 0.0f), rstd(bc.c, 0.0f);
        for (int64_t c = 0; c < bc.c; ++c) {
          double m = 0, q = 0;
          for (int64_t r = 0; r < bc.rows; ++r) m += hx[r * bc.c + c];
          m /= bc.rows;
          for (int64_t r = 0; r < bc.rows; ++r)
            q += (hx[r * bc.c + c] - m) * (hx[r * bc.c + c] - m);
          mean[c] = static_cast<float>(m);
          rstd[c] = static_cast<float>(1.0 / std::sqrt(q / bc.rows + 1e-5));
        }
        Pair smean = env.make(Shape{bc.c}, DType::F32, mean);
        Pair srstd = env.make(Shape{bc.c}, DType::F32, rstd);
        Pair dx = env.poisoned(s, xdt);
        Pair dgamma = env.poisoned(Shape{bc.c}, DType::F32);
        Pair dbeta = env.poisoned(Shape{bc.c}, DType::F32);
        Pair d_pre = env.poisoned(s, DType::BF16);
        const bool mask = variant >= 1, pre = variant == 2;
        env.cpu->batchnorm_backward(dy.cpu, mask ? &relu_out.cpu : nullptr, x.cpu, gamma.cpu,
                                    smean.cpu, srstd.cpu, dx.cpu, dgamma.cpu, dbeta.cpu,
                                    pre ? &d_pre.cpu : nullptr);
        env.dut->batchnorm_backward(dy.dut, mask ? &relu_out.dut : nullptr, x.dut, gamma.dut,
                                    smean.dut, srstd.dut, dx.dut, dgamma.dut, dbeta.dut,
                                    pre ? &d_pre.dut : nullptr);
        auto hdy = env.host_cpu(dy);
        auto dbeta_scale = column_abs_sums(hdy, bc.rows, bc.c);
        std::vector<float> gx(hdy.size());
        for (size_t i = 0; i < gx.size(); ++i) {
          const size_t c = i % bc.c;
          gx[i] = hdy[i] * (hx[i] - mean[c]) * rstd[c];
        }
        auto dgamma_scale = column_abs_sums(gx, bc.rows, bc.c);
        // dx = gamma rstd (g - mean(g) - xhat mean(g xhat)) is g less its projections on 1 and
        // xhat. At rows = 2 nothing else is left: dx is eps / (var + eps), about 1e-4, of its
        // terms, so fp32 rounding in the terms (any order, either backend) is a relative error of
        // order 1e-3 or more in dx. Judge dx against the magnitudes of its terms.
        const auto hmask = env.host_cpu(relu_out), hgamma = env.host_cpu(gamma);
        std::vector<double> mean_g(bc.c, 0.0), mean_gx(bc.c, 0.0);
        std::vector<float> g(hdy.size()), dx_scale(hdy.size());
        for (size_t i = 0; i < g.size(); ++i) {
          const size_t c = i % bc.c;
          g[i] = mask && !(hmask[i] > 0.0f) ? 0.0f : hdy[i];
          mean_g[c] += g[i] / static_cast<double>(bc.rows);
          mean_gx[c] += g[i] * ((hx[i] - mean[c]) * rstd[c]) / static_cast<double>(bc.rows);
        }
        for (size_t i = 0; i < g.size(); ++i) {
          const size_t c = i % bc.c;
          const double xhat = (hx[i] - mean[c]) * rstd[c];
          dx_scale[i] = static_cast<float>(
              std::fabs(hgamma[c] * rstd[c]) *
              (std::fabs(g[i]) + std::fabs(mean_g[c]) + std::fabs(xhat * mean_gx[c])));
        }
        EXPECT_TRUE(env.close(dx, tol2(dt, xdt) * 10, &dx_scale)) << "dx " << what;
        EXPECT_TRUE(env.close(dbeta, 1e-5, &dbeta_scale)) << "dbeta " << what;
        EXPECT_TRUE(env.close(dgamma, 1e-5, &dgamma_scale)) << "dgamma " << what;
        if (pre) EXPECT_TRUE(env.same(d_pre)) << "d_pre " << what;
        for (Pair* p : {&x, &dy, &relu_out, &gamma, &smean, &srstd, &dx, &dgamma, &dbeta, &d_pre})
          env.release(*p);
      }
}

// Statistics of channels holding inf or NaN (an fp16 convolution's overflow): the mean is what
// the reference's sum gives (+-inf, or NaN for +inf with -inf or a NaN) and the variance NaN,
// the running statistics alike, also when the non-finite value is a channel's first (a
// shifted sum would take inf - inf); finite channels are untouched. Over several of the CUDA
// kernel's chunks (4099 rows).
TEST(FamilyOpsParity, BatchNormStatisticsOfNonFiniteChannels) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const int64_t rows = 4099, c = 8;
  const Shape s{rows, c};
  for (DType dt : kFloatTypes) {
    std::vector<float> xv = shifted(s.numel(), 9100, 3.0f);
    xv[5 * c + 0] = INFINITY;           // +inf: mean +inf
    xv[0 * c + 1] = -INFINITY;          // -inf, the channel's first value
    xv[77 * c + 2] = NAN;               // NaN
    xv[9 * c + 3] = INFINITY;           // +inf and -inf: NaN
    xv[4000 * c + 3] = -INFINITY;       //   (in another chunk)
    xv[0 * c + 4] = INFINITY;           // +inf first
    xv[(rows - 1) * c + 5] = INFINITY;  // +inf last
    Pair x = env.make(s, dt, xv);
    Pair res = env.make(s, dt, std::vector<float>(s.numel(), 0.0f));
    Pair gamma = env.make(Shape{c}, DType::F32, std::vector<float>(c, 1.0f));
    Pair beta = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
    Pair rmean = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
    Pair rvar = env.make(Shape{c}, DType::F32, std::vector<float>(c, 1.0f));
    Pair smean = env.poisoned(Shape{c}, DType::F32), srstd = env.poisoned(Shape{c}, DType::F32);
    Pair y = env.poisoned(s, dt);
    relu_forward_train(env, x, res, gamma, beta, rmean, rvar, smean, srstd, y);
    const auto alike = [](float want, float got) {
      if (std::isnan(want)) return std::isnan(got);
      if (std::isinf(want)) return got == want;
      return std::fabs(got - want) <= 1e-4f * std::max(1.0f, std::fabs(want));
    };
    for (Pair* p : {&smean, &srstd, &rmean, &rvar}) {
      const std::vector<float> want = env.host_cpu(*p), got = env.host_dut(*p);
      for (int64_t j = 0; j < c; ++j)
        EXPECT_TRUE(alike(want[j], got[j]))
            << dtype_name(dt) << " channel " << j << ": " << want[j] << " against " << got[j];
    }
    const std::vector<float> want = env.host_cpu(smean);
    EXPECT_EQ(want[0], INFINITY);
    EXPECT_EQ(want[1], -INFINITY);
    EXPECT_TRUE(std::isnan(want[2]) && std::isnan(want[3]));
    EXPECT_TRUE(std::isfinite(want[6]) && std::isfinite(want[7]));
    for (Pair* p : {&x, &res, &gamma, &beta, &rmean, &rvar, &smean, &srstd, &y}) env.release(*p);
  }
}

// The fused ReLU on NaN and +-inf after the residual add (kernels/relu.h): y keeps the NaN, the
// backward's g (d_pre) is dy where y is positive or NaN, 0 where it is 0 even for an inf dy; bit
// for bit, vectorised (C 64) and not (C 5).
TEST(FamilyOpsParity, BatchNormFusedReluOnInfAndNaN) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 9000;
  for (DType dt : kFloatTypes)
    for (int64_t c : {int64_t{64}, int64_t{5}}) {
      const Shape s{257, c};
      const std::string what = fmt::format("{} C {}", dtype_name(dt), c);
      std::vector<float> rv = random_nonzero(s.numel(), seed += 7);
      for (int64_t i = 0; i < s.numel(); i += 7)
        rv[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? -INFINITY : INFINITY;
      Pair x = env.make(s, dt, shifted(s.numel(), seed + 1, 3.0f)), res = env.make(s, dt, rv);
      Pair gamma = env.random(Shape{c}, DType::F32, seed + 2, 2.0f);
      Pair beta = env.random(Shape{c}, DType::F32, seed + 3);
      Pair rmean = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
      Pair rvar = env.make(Shape{c}, DType::F32, std::vector<float>(c, 1.0f));
      Pair smean = env.poisoned(Shape{c}, DType::F32), srstd = env.poisoned(Shape{c}, DType::F32);
      Pair y = env.poisoned(s, dt);
      relu_forward_train(env, x, res, gamma, beta, rmean, rvar, smean, srstd, y);
      const std::vector<float> hy = env.host_dut(y);
      for (int64_t i = 0; i < s.numel(); i += 7) {
        const float want = i % 3 == 0 ? NAN : i % 3 == 1 ? 0.0f : INFINITY;
        EXPECT_TRUE(std::isnan(want) ? std::isnan(hy[i]) : hy[i] == want)
            << what << " y at " << i << ": " << hy[i];
      }
      // The same relu_out on both (the reference's y), dy inf wherever it is 0.
      const std::vector<float> hyc = env.host_cpu(y);
      std::vector<float> dyv(hyc.size());
      for (size_t i = 0; i < hyc.size(); ++i) dyv[i] = hyc[i] == 0.0f ? INFINITY : 0.5f;
      Pair relu_out = env.make(s, dt, hyc), dy = env.make(s, dt, dyv);
      Pair dx = env.poisoned(s, dt), d_pre = env.poisoned(s, dt);
      Pair dgamma = env.poisoned(Shape{c}, DType::F32), dbeta = env.poisoned(Shape{c}, DType::F32);
      env.cpu->batchnorm_backward(dy.cpu, &relu_out.cpu, x.cpu, gamma.cpu, smean.cpu, srstd.cpu,
                                  dx.cpu, dgamma.cpu, dbeta.cpu, &d_pre.cpu);
      env.dut->batchnorm_backward(dy.dut, &relu_out.dut, x.dut, gamma.dut, smean.dut, srstd.dut,
                                  dx.dut, dgamma.dut, dbeta.dut, &d_pre.dut);
      EXPECT_TRUE(env.same(d_pre)) << what << " d_pre";
      const std::vector<float> g = env.host_dut(d_pre);
      for (size_t i = 0; i < g.size(); ++i)
        if (hyc[i] == 0.0f) ASSERT_EQ(g[i], 0.0f) << what << " d_pre at " << i;
      for (Pair* p : {&x, &res, &gamma, &beta, &rmean, &rvar, &smean, &srstd, &y, &relu_out, &dy,
                      &dx, &d_pre, &dgamma, &dbeta})
        env.release(*p);
    }
}

// The model's shapes: ResNet's (N*H*W, C) with many row chunks, a long Welford loop per thread
// and a grid-stride apply that wraps (conv2 stage rows at batch 64, C 64), and the widest
// channels (conv5, C 2048). Forward train with residual + ReLU, then the backward from the
// saved statistics, one dtype each so that the CPU side stays cheap.
TEST(FamilyOpsParity, BatchNormResNetShapes) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 2500;
  for (const auto& [bc, dt] : {std::pair<BnCase, DType>{{64 * 56 * 56, 64}, DType::BF16},
                               std::pair<BnCase, DType>{{64 * 7 * 7, 2048}, DType::F32}}) {
    const Shape s{bc.rows, bc.c};
    const std::string what = fmt::format("{} rows {} C {}", dtype_name(dt), bc.rows, bc.c);
    Pair x = env.make(s, dt, shifted(s.numel(), seed += 17, 3.0f));
    Pair res = env.random(s, dt, seed + 1);
    Pair gamma = env.random(Shape{bc.c}, DType::F32, seed + 2, 2.0f);
    Pair beta = env.random(Shape{bc.c}, DType::F32, seed + 3);
    Pair rmean = env.random(Shape{bc.c}, DType::F32, seed + 4);
    Pair rvar = env.make(Shape{bc.c}, DType::F32, shifted(bc.c, seed + 5, 2.0f));
    Pair smean = env.poisoned(Shape{bc.c}, DType::F32);
    Pair srstd = env.poisoned(Shape{bc.c}, DType::F32);
    Pair y = env.poisoned(s, dt);
    relu_forward_train(env, x, res, gamma, beta, rmean, rvar, smean, srstd, y);
    EXPECT_TRUE(env.close(y, tolerance_for(dt))) << "y " << what;
    EXPECT_TRUE(env.close(smean, 1e-5)) << "save_mean " << what;
    EXPECT_TRUE(env.close(srstd, 1e-4)) << "save_rstd " << what;
    EXPECT_TRUE(env.close(rvar, 1e-4)) << "running_var " << what;

    Pair sm = env.make(Shape{bc.c}, DType::F32, env.host_cpu(smean));
    Pair sr = env.make(Shape{bc.c}, DType::F32, env.host_cpu(srstd));
    Pair ry = env.make(s, dt, env.host_cpu(y));  // the CPU's forward output as the ReLU mask
    Pair dy = env.random(s, dt, seed + 6);
    Pair dx = env.poisoned(s, dt);
    Pair dgamma = env.poisoned(Shape{bc.c}, DType::F32);
    Pair dbeta = env.poisoned(Shape{bc.c}, DType::F32);
    Pair d_pre = env.poisoned(s, dt);
    env.cpu->batchnorm_backward(dy.cpu, &ry.cpu, x.cpu, gamma.cpu, sm.cpu, sr.cpu, dx.cpu,
                                dgamma.cpu, dbeta.cpu, &d_pre.cpu);
    env.dut->batchnorm_backward(dy.dut, &ry.dut, x.dut, gamma.dut, sm.dut, sr.dut, dx.dut,
                                dgamma.dut, dbeta.dut, &d_pre.dut);
    // Scales from the unmasked dy: an upper bound of the masked sums' absolute values.
    const auto hdy = env.host_cpu(dy), hx = env.host_cpu(x), hm = env.host_cpu(sm),
               hr = env.host_cpu(sr);
    std::vector<float> gx(hdy.size());
    for (size_t i = 0; i < gx.size(); ++i) {
      const size_t c = i % static_cast<size_t>(bc.c);
      gx[i] = hdy[i] * (hx[i] - hm[c]) * hr[c];
    }
    const auto dbeta_scale = column_abs_sums(hdy, bc.rows, bc.c);
    const auto dgamma_scale = column_abs_sums(gx, bc.rows, bc.c);
    EXPECT_TRUE(env.close(dx, tolerance_for(dt) * 10)) << "dx " << what;
    EXPECT_TRUE(env.close(dbeta, 1e-5, &dbeta_scale)) << "dbeta " << what;
    EXPECT_TRUE(env.close(dgamma, 1e-5, &dgamma_scale)) << "dgamma " << what;
    EXPECT_TRUE(env.same(d_pre)) << "d_pre " << what;
    for (Pair* p : {&x, &res, &gamma, &beta, &rmean, &rvar, &smean, &srstd, &y, &sm, &sr, &ry, &dy,
                    &dx, &dgamma, &dbeta, &d_pre})
      env.release(*p);
  }
  // One dtype per call, as the models call them: the native CPU's own loops, never the
  // reference's (which it runs for mixed dtypes).
  for (const auto& [op, calls] : env.dut->fallback_calls())
    EXPECT_EQ(op.find("batchnorm"), std::string::npos) << op << ": " << calls;
}

// The fused ReLU of -0 is +0 (kernels/relu.h's select on x <= 0), bit for bit: gamma +0 and beta
// -0 make every normalised value a signed zero, -0 where x is below its channel's mean, in the
// vector lanes and the channel tail (C 19).
TEST(FamilyOpsParity, BatchNormFusedReluTurnsMinusZeroIntoPlusZero) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const int64_t c = 19;
  const Shape s{70, c};
  for (DType dt : kFloatTypes) {
    Pair x = env.random(s, dt, 9200);
    Pair gamma = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
    Pair beta = env.make(Shape{c}, DType::F32, std::vector<float>(c, -0.0f));
    Pair rmean = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
    Pair rvar = env.make(Shape{c}, DType::F32, std::vector<float>(c, 1.0f));
    Pair smean = env.poisoned(Shape{c}, DType::F32), srstd = env.poisoned(Shape{c}, DType::F32);
    Pair y = env.poisoned(s, dt);
    BatchNormDesc d;
    d.relu = true;
    env.cpu->batchnorm_forward_train(d, x.cpu, nullptr, gamma.cpu, beta.cpu, rmean.cpu, rvar.cpu,
                                     smean.cpu, srstd.cpu, y.cpu);
    env.dut->batchnorm_forward_train(d, x.dut, nullptr, gamma.dut, beta.dut, rmean.dut, rvar.dut,
                                     smean.dut, srstd.dut, y.dut);
    EXPECT_TRUE(env.same(y)) << dtype_name(dt);
    const std::vector<float> hy = env.host_dut(y);
    EXPECT_TRUE(std::none_of(hy.begin(), hy.end(), [](float v) { return std::signbit(v); }))
        << dtype_name(dt) << ": a -0 (or negative) y";
    for (Pair* p : {&x, &gamma, &beta, &rmean, &rvar, &smean, &srstd, &y}) env.release(*p);
  }
}

// The backward's ReLU mask without d_pre, where the second pass masks dy itself: a ReLU output of
// exactly 0 blocks dy, a NaN one lets it through (kernels/relu.h), in the vector lanes and the
// channel tail (C 37). The first pass's sums (dbeta, dgamma) and the second's dx alike.
TEST(FamilyOpsParity, BatchNormBackwardMaskBlocksAZeroReluOutputNotANaN) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const int64_t rows = 130, c = 37;
  const Shape s{rows, c};
  for (DType dt : kFloatTypes) {
    std::vector<float> ro = random_nonzero(s.numel(), 9400);
    for (size_t i = 0; i < ro.size(); ++i) {
      if (i % 3 == 0) ro[i] = 0.0f;
      if (i % 5 == 1) ro[i] = std::nanf("");
    }
    Pair x = env.random(s, dt, 9401), dy = env.random(s, dt, 9402), relu_out = env.make(s, dt, ro);
    Pair gamma = env.random(Shape{c}, DType::F32, 9403, 2.0f);
    // Saved statistics of 0 and 1: the mask is what is under test, not them.
    Pair smean = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
    Pair srstd = env.make(Shape{c}, DType::F32, std::vector<float>(c, 1.0f));
    Pair dx = env.poisoned(s, dt);
    Pair dgamma = env.poisoned(Shape{c}, DType::F32), dbeta = env.poisoned(Shape{c}, DType::F32);
    env.cpu->batchnorm_backward(dy.cpu, &relu_out.cpu, x.cpu, gamma.cpu, smean.cpu, srstd.cpu,
                                dx.cpu, dgamma.cpu, dbeta.cpu, nullptr);
    env.dut->batchnorm_backward(dy.dut, &relu_out.dut, x.dut, gamma.dut, smean.dut, srstd.dut,
                                dx.dut, dgamma.dut, dbeta.dut, nullptr);
    const std::string what = dtype_name(dt);
    EXPECT_TRUE(env.close(dx, tolerance_for(dt) * 10)) << "dx " << what;
    EXPECT_TRUE(env.close(dbeta, 1e-5)) << "dbeta " << what;
    EXPECT_TRUE(env.close(dgamma, 1e-5)) << "dgamma " << what;
    for (Pair* p : {&x, &dy, &relu_out, &gamma, &smean, &srstd, &dx, &dgamma, &dbeta})
      env.release(*p);
  }
}

// bf16 outputs below fp32's normal range (gamma 1e-39) are kept, as the reference keeps them.
// The CPU's own VCVTNEPS2BF16 would flush them to 0 (kernels/onednn/parallel.h): the native CPU
// takes it only where oneDNN's ISA has AVX512-BF16, its bf16 GEMMs "native". Elsewhere (a CPU
// without it, or a cap below it: ctest runs this test under ONEDNN_MAX_CPU_ISA=AVX2) no y may be
// 0; with it, it may be, and this says nothing.
TEST(FamilyOpsParity, BatchNormKeepsBf16DenormalsWithoutTheCpusBf16Instructions) {
  SKIP_WITHOUT_DEVICE();
  if (!test::kNativeCpuUnderTest) GTEST_SKIP() << "a question of the native CPU's ISA";
  Env env;
  if (env.dut->info().bf16_gemm == "native")
    GTEST_SKIP() << "AVX512-BF16: the native CPU may convert with the CPU's flushing instruction";
  const int64_t c = 21;
  const Shape s{40, c};
  Pair x = env.random(s, DType::BF16, 9500);
  Pair gamma = env.make(Shape{c}, DType::F32, std::vector<float>(c, 1e-39f));
  Pair beta = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
  Pair rmean = env.make(Shape{c}, DType::F32, std::vector<float>(c, 0.0f));
  Pair rvar = env.make(Shape{c}, DType::F32, std::vector<float>(c, 1.0f));
  Pair smean = env.poisoned(Shape{c}, DType::F32), srstd = env.poisoned(Shape{c}, DType::F32);
  for (bool train : {true, false}) {
    Pair y = env.poisoned(s, DType::BF16);
    BatchNormDesc d;
    if (train) {
      env.cpu->batchnorm_forward_train(d, x.cpu, nullptr, gamma.cpu, beta.cpu, rmean.cpu, rvar.cpu,
                                       smean.cpu, srstd.cpu, y.cpu);
      env.dut->batchnorm_forward_train(d, x.dut, nullptr, gamma.dut, beta.dut, rmean.dut, rvar.dut,
                                       smean.dut, srstd.dut, y.dut);
    } else {
      env.cpu->batchnorm_forward_eval(d, x.cpu, nullptr, gamma.cpu, beta.cpu, rmean.cpu, rvar.cpu,
                                      y.cpu);
      env.dut->batchnorm_forward_eval(d, x.dut, nullptr, gamma.dut, beta.dut, rmean.dut, rvar.dut,
                                      y.dut);
    }
    const std::vector<float> want = env.host_cpu(y), got = env.host_dut(y);
    // (A |y| under bf16's smallest denormal, 9e-41, rounds to 0 on both.)
    int64_t kept = 0, flushed = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (want[i] != 0.0f) (got[i] == 0.0f ? flushed : kept) += 1;
    ASSERT_GT(kept + flushed, s.numel() / 2) << "the reference flushed them";
    EXPECT_EQ(flushed, 0) << (train ? "train" : "eval") << ": bf16 denormals flushed to 0";
    env.release(y);
  }
  for (Pair* p : {&x, &gamma, &beta, &rmean, &rvar, &smean, &srstd}) env.release(*p);
}

// ---- avgpool, add, permute
// -----------------------------------------------------------------------

TEST(FamilyOpsParity, AvgPool) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 3000;
  struct P {
    int64_t n, hw, c;
  };
  for (DType xdt : kFloatTypes)
    for (DType ydt : out_types(xdt))
      for (const P& p : {P{1, 1, 1}, P{2, 49, 3}, P{3, 7, 64}, P{8, 49, 2048}, P{5, 33, 100}}) {
        const std::string what = fmt::format("{} / {} N {} HW {} C {}", dtype_name(xdt),
                                             dtype_name(ydt), p.n, p.hw, p.c);
        Pair x = env.random(Shape{p.n, p.hw, p.c}, xdt, seed += 7);
        Pair y = env.poisoned(Shape{p.n, p.c}, ydt);
        env.cpu->avgpool_forward(x.cpu, y.cpu);
        env.dut->avgpool_forward(x.dut, y.dut);
        EXPECT_TRUE(env.close(y, tol2(xdt, ydt))) << "forward " << what;
        Pair dy = env.random(Shape{p.n, p.c}, ydt, seed + 1);
        Pair dx = env.poisoned(Shape{p.n, p.hw, p.c}, xdt);
        env.cpu->avgpool_backward(dy.cpu, dx.cpu);
        env.dut->avgpool_backward(dy.dut, dx.dut);
        EXPECT_TRUE(env.close(dx, tol2(xdt, ydt))) << "backward " << what;
        for (Pair* q : {&x, &y, &dy, &dx}) env.release(*q);
      }
}

// One image size at three batch sizes, one after the other on one backend: each is its own
// cached pooling primitive (the native CPU's keyed without N pooled the first call's images only).
TEST(FamilyOpsParity, AvgPoolOfOneImageSizeAtAnotherBatch) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 3300;
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t n : {2, 5, 3}) {
      const std::string what = fmt::format("{} N {}", dtype_name(dt), n);
      Pair x = env.random(Shape{n, 49, 16}, dt, seed += 7);
      Pair y = env.poisoned(Shape{n, 16}, dt);
      env.cpu->avgpool_forward(x.cpu, y.cpu);
      env.dut->avgpool_forward(x.dut, y.dut);
      EXPECT_TRUE(env.close(y, tolerance_for(dt))) << "forward " << what;
      Pair dy = env.random(Shape{n, 16}, dt, seed + 1);
      Pair dx = env.poisoned(Shape{n, 49, 16}, dt);
      env.cpu->avgpool_backward(dy.cpu, dx.cpu);
      env.dut->avgpool_backward(dy.dut, dx.dut);
      EXPECT_TRUE(env.close(dx, tolerance_for(dt))) << "backward " << what;
      for (Pair* q : {&x, &y, &dy, &dx}) env.release(*q);
    }
}

// Bit for bit: the forward copies the winner's element, and both backends sum each input's
// gradients in fp32 in the same window order and round once (kernels/pool_window.h).
TEST(FamilyOpsParity, MaxPool) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 3500;
  struct P {
    int64_t n, h, w, c;
    PoolDesc d;
  };
  for (DType dt : kFloatTypes)
    for (const P& p :
         {P{2, 112, 112, 64, {3, 2, 1}}, P{1, 7, 5, 3, {3, 2, 1}}, P{3, 6, 6, 17, {2, 2, 0}},
          P{2, 9, 9, 8, {3, 1, 1}}, P{2, 10, 11, 5, {2, 3, 1}},  // that one: inputs in no window
          // Fewer window rows than the kernel's: the native backward's cached winners of one
          // image's rows must not serve the next image's.
          P{3, 4, 5, 3, {3, 2, 1}}}) {
      const std::string what =
          fmt::format("{} {}x{}x{}x{} {}x{}/s{} pad {}", dtype_name(dt), p.n, p.h, p.w, p.c,
                      p.d.kernel, p.d.kernel, p.d.stride, p.d.pad);
      const int64_t op = (p.h + 2 * p.d.pad - p.d.kernel) / p.d.stride + 1;
      const int64_t oq = (p.w + 2 * p.d.pad - p.d.kernel) / p.d.stride + 1;
      Pair x = env.random(Shape{p.n, p.h, p.w, p.c}, dt, seed += 7);
      Pair y = env.poisoned(Shape{p.n, op, oq, p.c}, dt);
      env.cpu->maxpool2d_forward(p.d, x.cpu, y.cpu);
      env.dut->maxpool2d_forward(p.d, x.dut, y.dut);
      EXPECT_TRUE(env.same(y)) << "forward " << what;
      Pair dy = env.random(Shape{p.n, op, oq, p.c}, dt, seed + 1);
      Pair dx = env.poisoned(Shape{p.n, p.h, p.w, p.c}, dt);
      env.cpu->maxpool2d_backward(p.d, x.cpu, dy.cpu, dx.cpu);
      // The CUDA backward's three paths (tensor_ops.cu): every image's window winners in the
      // workspace at once, an image at a time (a workspace of one image's winners), and the
      // one-pass search without a workspace.
      enum class Ws { AllImages, OneImage, None };
      for (Ws ws : {Ws::AllImages, Ws::OneImage, Ws::None}) {
        Tensor one_image;
        if (ws == Ws::OneImage) {
          one_image = env.dut_alloc.alloc(Shape{(op * oq * p.c + 3) / 4}, DType::F32,
                                          MemCategory::Workspace);
          env.dut->set_workspace(one_image);
        } else if (ws == Ws::None) {
          env.dut->set_workspace(Tensor{});
        }
        test::poison(*env.dut, dx.dut);
        env.dut->maxpool2d_backward(p.d, x.dut, dy.dut, dx.dut);
        EXPECT_TRUE(env.same(dx)) << "backward, workspace path " << static_cast<int>(ws) << ", "
                                  << what;
        env.dut->set_workspace(env.workspace);
        if (one_image.defined()) env.dut_alloc.release(one_image);
      }
      for (Pair* q : {&x, &y, &dy, &dx}) env.release(*q);
    }
  // Ties, -inf and NaN (the rule: the first maximum, the last NaN, an all -inf window's first
  // position) in every channel lane, over windows clipped by the padding; then every window all
  // -inf (random picks rarely fill a whole one), whose dy goes to its first position inside the
  // input, not to a padded one.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float picks[] = {1.0f, 2.0f, 2.0f, 2.0f, -inf, -inf, -inf, nan, 0.0f, -0.0f, -3.0f};
  std::mt19937 rng(3600);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(std::size(picks)) - 1);
  for (bool all_inf : {false, true})
    for (DType dt : kFloatTypes) {
      const PoolDesc d{3, 2, 1};
      const int64_t n = 2, h = 9, w = 8, c = 19, op = 5, oq = 4;
      std::vector<float> xs(static_cast<size_t>(n * h * w * c));
      for (float& v : xs) v = all_inf ? -inf : picks[pick(rng)];
      Pair x = env.make(Shape{n, h, w, c}, dt, xs);
      Pair y = env.poisoned(Shape{n, op, oq, c}, dt);
      env.cpu->maxpool2d_forward(d, x.cpu, y.cpu);
      env.dut->maxpool2d_forward(d, x.dut, y.dut);
      EXPECT_TRUE(env.same(y)) << "forward, special values, " << dtype_name(dt) << " all -inf "
                               << all_inf;
      Pair dy = env.random(Shape{n, op, oq, c}, dt, seed += 7);
      Pair dx = env.poisoned(Shape{n, h, w, c}, dt);
      env.cpu->maxpool2d_backward(d, x.cpu, dy.cpu, dx.cpu);
      env.dut->maxpool2d_backward(d, x.dut, dy.dut, dx.dut);
      EXPECT_TRUE(env.same(dx)) << "backward, special values, " << dtype_name(dt) << " all -inf "
                                << all_inf;
      for (Pair* q : {&x, &y, &dy, &dx}) env.release(*q);
    }
}

TEST(FamilyOpsParity, AddMixedDtypesAndAliases) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 4000;
  for (DType at : kFloatTypes)
    for (DType bt : kFloatTypes)
      for (DType ot : kFloatTypes)
        for (int64_t n : {1, 7, 1000, 4099})
          for (int64_t off : {0, 1}) {  // offset 1: the unaligned, scalar path
            const std::string what = fmt::format("{} + {} -> {} n {} offset {}", dtype_name(at),
                                                 dtype_name(bt), dtype_name(ot), n, off);
            Pair a = env.random(Shape{n + off}, at, seed += 5);
            Pair b = env.random(Shape{n + off}, bt, seed + 1);
            Pair o = env.poisoned(Shape{n + off}, ot);
            Pair av{a.cpu.slice(off, Shape{n}), a.dut.slice(off, Shape{n})};
            Pair bv{b.cpu.slice(off, Shape{n}), b.dut.slice(off, Shape{n})};
            Pair ov{o.cpu.slice(off, Shape{n}), o.dut.slice(off, Shape{n})};
            env.cpu->add(av.cpu, bv.cpu, ov.cpu);
            env.dut->add(av.dut, bv.dut, ov.dut);
            EXPECT_TRUE(env.close(ov, std::max(tol2(at, bt), tolerance_for(ot)))) << what;
            if (ot == at) {  // out aliases a
              env.cpu->add(av.cpu, bv.cpu, av.cpu);
              env.dut->add(av.dut, bv.dut, av.dut);
              EXPECT_TRUE(env.close(av, std::max(tol2(at, bt), tolerance_for(ot))))
                  << "aliased " << what;
            }
            if (ot == bt) {  // out aliases b (oneDNN's binary works in place on a only)
              env.cpu->add(av.cpu, bv.cpu, bv.cpu);
              env.dut->add(av.dut, bv.dut, bv.dut);
              EXPECT_TRUE(env.close(bv, std::max(tol2(at, bt), tolerance_for(ot))))
                  << "b aliased " << what;
            }
            for (Pair* p : {&a, &b, &o}) env.release(*p);
          }
}

TEST(FamilyOpsParity, PermuteBitExact) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  struct P {
    Shape s;
    std::array<int, 5> perm;
  };
  const P cases[] = {
      {Shape{7}, {0, 0, 0, 0, 0}},
      {Shape{3, 5}, {1, 0, 0, 0, 0}},
      {Shape{2, 3, 4}, {2, 0, 1, 0, 0}},
      {Shape{2, 33, 4, 16}, {0, 2, 1, 3, 0}},  // (B, S, H, Dh) -> (B, H, S, Dh)
      {Shape{3, 12, 17, 8}, {0, 2, 1, 3, 0}},
      {Shape{2, 3, 4, 5, 6}, {4, 2, 0, 3, 1}},
      {Shape{2, 3, 1, 5, 7}, {1, 0, 2, 4, 3}},
      {Shape{2, 9, 3, 4, 16}, {2, 0, 3, 1, 4}},    // (B, S, 3, H, Dh) -> (3, B, H, S, Dh)
      {Shape{3, 2, 4, 9, 16}, {1, 3, 0, 2, 4}},    // and back
      {Shape{4, 64, 3, 12, 16}, {2, 0, 3, 1, 4}},  // rows enough for a range per thread
      // One shape in and out, two permutations: cached apart (a key without the permutation
      // would reuse the first's reorder).
      {Shape{4, 4, 4}, {1, 2, 0, 0, 0}},
      {Shape{4, 4, 4}, {2, 0, 1, 0, 0}},
      // Nothing to move: rows of no elements, and no rows.
      {Shape{2, 3, 0}, {1, 0, 2, 0, 0}},
      {Shape{0, 4}, {1, 0, 0, 0, 0}},
  };
  uint64_t seed = 5000;
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32})
    for (const P& p : cases) {
      Shape ds;
      ds.rank = p.s.rank;
      for (int i = 0; i < p.s.rank; ++i) ds.dims[i] = p.s[p.perm[i]];
      std::vector<float> values = random_nonzero(p.s.numel(), seed += 3, 100.0f);
      if (dt == DType::I32)
        for (auto& v : values) v = std::round(v);
      Pair src = env.make(p.s, dt, values);
      Pair dst = env.poisoned(ds, dt);
      env.cpu->permute(src.cpu, dst.cpu, p.perm);
      env.dut->permute(src.dut, dst.dut, p.perm);
      EXPECT_TRUE(env.same(dst)) << dtype_name(dt) << " " << p.s.str() << " -> " << ds.str();
      env.release(src);
      env.release(dst);
    }
  Pair src = env.random(Shape{2, 3}, DType::F32, 1);
  Pair dst = env.poisoned(Shape{3, 2}, DType::F32);
  const std::array<int, 5> repeated{0, 0, 0, 0, 0}, identity{0, 1, 0, 0, 0};
  EXPECT_THROW(env.dut->permute(src.dut, dst.dut, repeated), Error);  // not a permutation
  EXPECT_THROW(env.dut->permute(src.dut, dst.dut, identity), Error);  // (2, 3) is not (3, 2)
}

// ---- layernorm
// -----------------------------------------------------------------------------------

TEST(FamilyOpsParity, LayerNorm) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 6000;
  struct P {
    int64_t rows, d;
  };
  // The transformer's combination is fp32 x (the residual stream) with a 16-bit y and dy.
  const std::vector<DType> all(std::begin(kFloatTypes), std::end(kFloatTypes));
  for (DType xdt : kFloatTypes)
    for (DType ydt : xdt == DType::F32 ? all : out_types(xdt))
      for (const P& p : {P{1, 1}, P{7, 33}, P{33, 768}, P{257, 100}, P{64, 1024}, P{5, 13000},
                         P{4096, 768}, P{20000, 768}}) {
        // More rows than the grid has warps, so the row loop wraps; once per y dtype.
        if (p.rows > 4096 && xdt != DType::F32) continue;
        const Shape s{p.rows, p.d};
        const std::string what =
            fmt::format("x {} y {} rows {} D {}", dtype_name(xdt), dtype_name(ydt), p.rows, p.d);
        Pair x = env.make(s, xdt, shifted(s.numel(), seed += 9, 2.0f));
        Pair gamma = env.random(Shape{p.d}, DType::F32, seed + 1, 2.0f);
        Pair beta = env.random(Shape{p.d}, DType::F32, seed + 2);
        Pair y = env.poisoned(s, ydt);
        Pair mean = env.poisoned(Shape{p.rows}, DType::F32);
        Pair rstd = env.poisoned(Shape{p.rows}, DType::F32);
        env.cpu->layernorm_forward(1e-5f, x.cpu, gamma.cpu, beta.cpu, y.cpu, mean.cpu, rstd.cpu);
        env.dut->layernorm_forward(1e-5f, x.dut, gamma.dut, beta.dut, y.dut, mean.dut, rstd.dut);
        EXPECT_TRUE(env.close(y, tol2(xdt, ydt))) << "y " << what;
        EXPECT_TRUE(env.close(mean, 1e-5)) << "mean " << what;
        if (p.d > 1) EXPECT_TRUE(env.close(rstd, 1e-4)) << "rstd " << what;

        // Backward from the CPU's saved statistics, so both sides start from the same values.
        Pair dy = env.random(s, ydt, seed + 3);
        Pair dx = env.poisoned(s, xdt);
        Pair dgamma = env.poisoned(Shape{p.d}, DType::F32);
        Pair dbeta = env.poisoned(Shape{p.d}, DType::F32);
        Pair smean = env.make(Shape{p.rows}, DType::F32, env.host_cpu(mean));
        Pair srstd = env.make(Shape{p.rows}, DType::F32, env.host_cpu(rstd));
        env.cpu->layernorm_backward(dy.cpu, x.cpu, gamma.cpu, smean.cpu, srstd.cpu, dx.cpu,
                                    dgamma.cpu, dbeta.cpu);
        env.dut->layernorm_backward(dy.dut, x.dut, gamma.dut, smean.dut, srstd.dut, dx.dut,
                                    dgamma.dut, dbeta.dut);
        auto hdy = env.host_cpu(dy), hx = env.host_cpu(x), hm = env.host_cpu(smean),
             hr = env.host_cpu(srstd);
        std::vector<float> gx(hdy.size());
        for (size_t i = 0; i < gx.size(); ++i) {
          const size_t r = i / p.d;
          gx[i] = hdy[i] * (hx[i] - hm[r]) * hr[r];
        }
        auto dbeta_scale = column_abs_sums(hdy, p.rows, p.d);
        auto dgamma_scale = column_abs_sums(gx, p.rows, p.d);
        if (p.d > 1) EXPECT_TRUE(env.close(dx, tol2(xdt, ydt) * 10)) << "dx " << what;
        EXPECT_TRUE(env.close(dbeta, 1e-5, &dbeta_scale)) << "dbeta " << what;
        EXPECT_TRUE(env.close(dgamma, 1e-5, &dgamma_scale)) << "dgamma " << what;
        for (Pair* q :
             {&x, &gamma, &beta, &y, &mean, &rstd, &dy, &dx, &dgamma, &dbeta, &smean, &srstd})
          env.release(*q);
      }
}

// ---- embedding
// -----------------------------------------------------------------------------------

TEST(FamilyOpsParity, Embedding) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 7000;
  struct P {
    int64_t b, s, v, p, d;
  };
  for (DType dt : kFloatTypes)
    for (const P& p : {P{1, 1, 1, 1, 1}, P{2, 7, 11, 9, 33}, P{4, 64, 1000, 128, 768},
                       P{3, 17, 5, 17, 64}, P{8, 128, 50257, 1024, 64}}) {
      const std::string what =
          fmt::format("{} B {} S {} V {} P {} D {}", dtype_name(dt), p.b, p.s, p.v, p.p, p.d);
      std::mt19937 rng(static_cast<uint32_t>(seed));
      // Half of the vocabulary at most, so that some rows of dtok_emb stay unused.
      std::uniform_int_distribution<int> tok(0,
                                             static_cast<int>(std::max<int64_t>(1, p.v / 2)) - 1);
      std::vector<float> toks(p.b * p.s);
      for (auto& t : toks) t = static_cast<float>(tok(rng));
      Pair tokens = env.make(Shape{p.b, p.s}, DType::I32, toks);
      Pair te = env.random(Shape{p.v, p.d}, DType::F32, seed += 5);
      Pair pe = env.random(Shape{p.p, p.d}, DType::F32, seed + 1);
      Pair y = env.poisoned(Shape{p.b * p.s, p.d}, dt);
      env.cpu->embedding_forward(tokens.cpu, te.cpu, pe.cpu, y.cpu);
      env.dut->embedding_forward(tokens.dut, te.dut, pe.dut, y.dut);
      EXPECT_TRUE(env.same(y)) << "forward " << what;

      Pair dy = env.random(Shape{p.b * p.s, p.d}, dt, seed + 2);
      Pair dte = env.poisoned(Shape{p.v, p.d}, DType::F32);
      Pair dpe = env.poisoned(Shape{p.p, p.d}, DType::F32);
      env.cpu->embedding_backward(tokens.cpu, dy.cpu, dte.cpu, dpe.cpu);
      env.dut->embedding_backward(tokens.dut, dy.dut, dte.dut, dpe.dut);
      EXPECT_TRUE(env.close(dte, 1e-5)) << "dtok_emb " << what;
      EXPECT_TRUE(env.close(dpe, 1e-5)) << "dpos_emb " << what;
      // Rows no token uses and positions past S are exactly zero.
      auto hdte = env.host_dut(dte), hdpe = env.host_dut(dpe);
      std::vector<bool> used(p.v, false);
      for (float t : toks) used[static_cast<size_t>(t)] = true;
      for (int64_t v = 0; v < p.v; ++v)
        if (!used[v])
          for (int64_t d = 0; d < p.d; ++d) ASSERT_EQ(hdte[v * p.d + d], 0.0f) << what;
      for (int64_t i = p.s * p.d; i < p.p * p.d; ++i) ASSERT_EQ(hdpe[i], 0.0f) << what;
      // Tied to the head: the sums are added to what the table's gradient holds (here te).
      env.cpu->embedding_backward(tokens.cpu, dy.cpu, te.cpu, dpe.cpu, /*add_to_tok=*/true);
      env.dut->embedding_backward(tokens.dut, dy.dut, te.dut, dpe.dut, /*add_to_tok=*/true);
      EXPECT_TRUE(env.close(te, 1e-5)) << "dtok_emb added " << what;
      for (Pair* q : {&tokens, &te, &pe, &y, &dy, &dte, &dpe}) env.release(*q);
    }
}

// ---- attention softmax
// ---------------------------------------------------------------------------

TEST(FamilyOpsParity, AttentionSoftmax) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 8000;
  struct P {
    int64_t batch, s;
  };
  for (DType xdt : kFloatTypes)
    for (DType ydt : out_types(xdt))
      for (const P& p :
           {P{1, 1}, P{3, 7}, P{2, 33}, P{4, 128}, P{2, 512}, P{1, 1024}, P{1, 12289}, P{20, 1024}})
        for (bool causal : {false, true}) {
          // Rows past 48 KiB of fp32 take the kernel's uncached path; one case of it, as the CPU
          // side is slow at that size.
          if (p.s > 4096 && (xdt != DType::F32 || !causal)) continue;
          // More rows than the grid has warps (the row loop wraps, the causal row index must
          // follow it): bf16 scores, into the model's fp32 probabilities and into bf16.
          if (p.batch * p.s > 16384 && (xdt != DType::BF16 || !causal)) continue;
          // Both of those are CUDA kernel paths; the native CPU has none, and on its threads the
          // reference would take most of the suite's time over them.
          if (test::kNativeCpuUnderTest && (p.s > 4096 || p.batch * p.s > 16384)) continue;
          const Shape s{p.batch, p.s, p.s};
          const std::string what = fmt::format("x {} y {} batch {} S {} causal {}", dtype_name(xdt),
                                               dtype_name(ydt), p.batch, p.s, causal);
          // S = 33 with a negative scale: the largest score is then the smallest x (scores
          // spread over 400, so that an exp shifted by the wrong one overflows).
          const float scale = p.s == 33 ? -0.5f : 0.125f;
          Pair x = env.random(s, xdt, seed += 3, p.s == 33 ? 400.0f : 8.0f);
          Pair y = env.poisoned(s, ydt);
          env.cpu->attention_softmax_forward(x.cpu, scale, causal, y.cpu);
          env.dut->attention_softmax_forward(x.dut, scale, causal, y.dut);
          EXPECT_TRUE(env.close(y, tol2(xdt, ydt))) << "forward " << what;
          auto hy = env.host_dut(y);
          if (causal) {
            bool zeros = true;
            for (int64_t b = 0; b < p.batch; ++b)
              for (int64_t i = 0; i < p.s; ++i)
                for (int64_t j = i + 1; j < p.s; ++j)
                  zeros = zeros && hy[(b * p.s + i) * p.s + j] == 0.0f;
            EXPECT_TRUE(zeros) << "masked entries not exactly 0: " << what;
          }

          // Backward from the CPU's probabilities, dy (and dx, over it for odd S) in the scores'
          // dtype: the model's 16-bit dP and dS beside its fp32 probabilities.
          Pair yy = env.make(s, ydt, env.host_cpu(y));
          Pair dy = env.random(s, xdt, seed + 1);
          const bool alias = p.s % 2 == 1;
          Pair dx = alias ? dy : env.poisoned(s, xdt);
          env.cpu->attention_softmax_backward(dy.cpu, yy.cpu, scale, dx.cpu);
          env.dut->attention_softmax_backward(dy.dut, yy.dut, scale, dx.dut);
          EXPECT_TRUE(env.close(dx, tol2(xdt, ydt) * 10)) << "backward " << what;
          if (causal) {
            auto hdx = env.host_dut(dx);
            bool zeros = true;
            for (int64_t b = 0; b < p.batch; ++b)
              for (int64_t i = 0; i < p.s; ++i)
                for (int64_t j = i + 1; j < p.s; ++j)
                  zeros = zeros && hdx[(b * p.s + i) * p.s + j] == 0.0f &&
                          !std::signbit(hdx[(b * p.s + i) * p.s + j]);
            // +0 whatever the scale's sign, as the reference (not scale * 0 * (dy - dot)).
            EXPECT_TRUE(zeros) << "masked gradients not exactly +0: " << what;
          }
          for (Pair* q : {&x, &y, &yy, &dy}) env.release(*q);
          if (!alias) env.release(dx);
        }
}

}  // namespace
}  // namespace mpbench
