// bias_act_backward against central differences in double, alone and as the backward of a whole
// GEMM + bias + activation layer; 16-bit dtypes, aliasing, and dbias accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::compare;
using test::from_host_f32;
using test::random_nonzero;
using test::to_host_f32;

// act'(x) in double, written independently of the kernel's fp32 version.
float activation_derivative_ref(Activation act, double x) {
  if (act == Activation::Relu) return x > 0 ? 1.0f : 0.0f;
  if (act == Activation::None) return 1.0f;
  const double k = std::sqrt(2 / M_PI), c = 0.044715;
  const double t = std::tanh(k * (x + c * x * x * x));
  return static_cast<float>(0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x));
}

class CpuBiasAct : public test::CpuOpsTest {};

// f(pre, bias) = sum(W o act(pre + bias)): with dy = W, dx must be df/dpre and dbias df/dbias.
TEST_F(CpuBiasAct, GradientsMatchFiniteDifferences) {
  const int64_t rows = 9, n = 7;
  for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
    SCOPED_TRACE(activation_name(act));
    // Inputs at least 0.02 from ReLU's kink, so the differences never straddle it.
    auto pre_v = random_nonzero(rows * n, 31, 3.0f);
    for (auto& x : pre_v) x = x > 0 ? x + 0.02f : x - 0.02f;
    auto w_v = random_nonzero(rows * n, 32);
    Tensor pre = make(Shape{rows, n}, DType::F32, pre_v);
    Tensor dy = make(Shape{rows, n}, DType::F32, w_v);
    Tensor dx = poisoned(Shape{rows, n}, DType::F32);
    Tensor dbias = poisoned(Shape{n}, DType::F32);
    be->bias_act_backward(act, dy, pre, dx, &dbias);

    auto f = [&](const std::vector<double>& p) {
      double s = 0;
      for (size_t i = 0; i < p.size(); ++i) s += w_v[i] * test::activation_ref(act, p[i]);
      return s;
    };
    const double h = 1e-4;
    std::vector<double> base(pre_v.begin(), pre_v.end());
    std::vector<float> fd_dx(base.size()), fd_db(n);
    for (size_t i = 0; i < base.size(); ++i) {
      auto up = base, down = base;
      up[i] += h;
      down[i] -= h;
      fd_dx[i] = static_cast<float>((f(up) - f(down)) / (2 * h));
    }
    for (int64_t j = 0; j < n; ++j) {  // a bias shift moves a whole column
      auto up = base, down = base;
      for (int64_t i = 0; i < rows; ++i) up[i * n + j] += h, down[i * n + j] -= h;
      fd_db[j] = static_cast<float>((f(up) - f(down)) / (2 * h));
    }
    auto rx = compare(to_host_f32(*be, dx), fd_dx, 1e-5);
    auto rb = compare(to_host_f32(*be, dbias), fd_db, 1e-5);
    EXPECT_TRUE(rx.ok) << "dx: " << rx.message;
    EXPECT_TRUE(rb.ok) << "dbias: " << rb.message;
  }
}

// The whole layer: Y = act(X W^T + b) by the GEMM epilogue, then dZ = bias_act_backward(dY),
// dX = dZ W, dW = dZ^T X. All four gradients against differences of the double-precision layer.
TEST_F(CpuBiasAct, LinearLayerBackwardMatchesFiniteDifferences) {
  const int64_t batch = 5, in = 6, out = 4;
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    SCOPED_TRACE(activation_name(act));
    auto xv = random_nonzero(batch * in, 41), wv = random_nonzero(out * in, 42),
         bv = random_nonzero(out, 43), gv = random_nonzero(batch * out, 44);
    Tensor x = make(Shape{batch, in}, DType::F32, xv);
    Tensor w = make(Shape{out, in}, DType::F32, wv);
    Tensor b = make(Shape{out}, DType::F32, bv);
    Tensor g = make(Shape{batch, out}, DType::F32, gv);
    Tensor y = poisoned(Shape{batch, out}, DType::F32);
    Tensor pre = poisoned(Shape{batch, out}, DType::F32);
    GemmDesc fwd;
    fwd.trans_b = true;
    fwd.bias = &b;
    fwd.act = act;
    fwd.pre_act = &pre;
    be->gemm(fwd, x, w, y);

    Tensor dz = poisoned(Shape{batch, out}, DType::F32);
    Tensor db = poisoned(Shape{out}, DType::F32);
    be->bias_act_backward(act, g, pre, dz, &db);
    Tensor dx = poisoned(Shape{batch, in}, DType::F32);
    Tensor dw = poisoned(Shape{out, in}, DType::F32);
    be->gemm(GemmDesc{}, dz, w, dx);
    GemmDesc dw_desc;
    dw_desc.trans_a = true;
    be->gemm(dw_desc, dz, x, dw);

    // L = sum(G o act(X W^T + b)) in double; params = [X | W | b].
    std::vector<double> params;
    for (auto* v : {&xv, &wv, &bv}) params.insert(params.end(), v->begin(), v->end());
    auto loss = [&](const std::vector<double>& p) {
      const double* px = p.data();
      const double* pw = px + batch * in;
      const double* pb = pw + out * in;
      double s = 0;
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t j = 0; j < out; ++j) {
          double z = pb[j];
          for (int64_t l = 0; l < in; ++l) z += px[i * in + l] * pw[j * in + l];
          s += gv[i * out + j] * test::activation_ref(act, z);
        }
      return s;
    };
    const double h = 1e-5;
    std::vector<float> fd(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      auto up = params, down = params;
      up[i] += h;
      down[i] -= h;
      fd[i] = static_cast<float>((loss(up) - loss(down)) / (2 * h));
    }
    std::vector<float> got = to_host_f32(*be, dx);
    for (const Tensor* t : {&dw, &db}) {
      auto v = to_host_f32(*be, *t);
      got.insert(got.end(), v.begin(), v.end());
    }
    auto r = compare(got, fd, 1e-5);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST_F(CpuBiasAct, LowPrecisionRoundsDxOnceAndDbiasSumsTheRoundedDx) {
  const int64_t rows = 64, n = 11;
  for (DType dt : {DType::F16, DType::BF16}) {
    for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " " << activation_name(act));
      Tensor pre = make(Shape{rows, n}, dt, random_nonzero(rows * n, 51, 2.0f));
      Tensor dy = make(Shape{rows, n}, dt, random_nonzero(rows * n, 52));
      Tensor dx = poisoned(Shape{rows, n}, dt);
      Tensor db = poisoned(Shape{n}, DType::F32);
      be->bias_act_backward(act, dy, pre, dx, &db);
      auto pv = to_host_f32(*be, pre), gv = to_host_f32(*be, dy), got = to_host_f32(*be, dx);
      std::vector<double> col(n, 0);
      for (int64_t i = 0; i < rows * n; ++i) {
        const float d = activation_derivative_ref(act, pv[i]);
        const float exact = gv[i] * d;
        col[i % n] += got[i];
        const float rounded =
            dt == DType::F16 ? f16_to_f32(f32_to_f16(exact)) : bf16_to_f32(f32_to_bf16(exact));
        // fp32 math then one rounding: bit-exact up to the fp32 evaluation of act'.
        ASSERT_NEAR(got[i], rounded, std::fabs(rounded) * (dt == DType::F16 ? 1e-3 : 8e-3))
            << "element " << i;
      }
      auto dbv = to_host_f32(*be, db);
      for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(dbv[j], col[j], 1e-5 * (1 + std::fabs(col[j])));
      EXPECT_TRUE(test::bias_gradient_sums_the_rounded_dx(*be, alloc, dt, act, 53));
    }
  }
}

// No rows, or rows of nothing: no work, and a bias gradient of zeros (a last dimension of 0 once
// divided an element count by it).
TEST_F(CpuBiasAct, EmptyRowsOrColumnsAreNoWork) {
  for (Shape s : {Shape{4, 0}, Shape{0, 5}, Shape{2, 0, 3}}) {
    SCOPED_TRACE(s.str());
    Tensor dy = poisoned(s, DType::F32), pre = poisoned(s, DType::F32),
           dx = poisoned(s, DType::F32);
    Tensor db = poisoned(Shape{s[-1]}, DType::F32);
    be->bias_act_backward(Activation::Gelu, dy, pre, dx, &db);
    for (float v : to_host_f32(*be, db)) EXPECT_EQ(v, 0.0f);
  }
}

// ReLU is PyTorch's select in both directions, on every path: relu(NaN) = NaN (clamp_min), and
// threshold_backward's dx = x <= 0 ? 0 : dy, so an inf gradient where the unit is off gives 0,
// not inf * 0 = NaN (a NaN x passes dy on). The forward by the GEMM epilogue, with and without
// its pre-activation; the backward alone, with dbias, and as the GEMM's backward epilogue.
TEST_F(CpuBiasAct, ReluIsASelectOnInfAndNaN) {
  const float inf = INFINITY, nan = NAN;
  auto expect_same = [](const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i])
          << what << " element " << i << ": " << got[i] << ", want " << want[i];
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<float> x = {nan, -inf, inf, -1.0f, -0.0f, 0.0f, 2.0f};
    const int64_t m = static_cast<int64_t>(x.size());
    Tensor in = make(Shape{m, 1}, dt, x), one = make(Shape{1, 1}, dt, {1.0f});
    for (bool keep_pre : {false, true}) {
      Tensor y = poisoned(Shape{m, 1}, dt), pre = poisoned(Shape{m, 1}, dt);
      GemmDesc d;
      d.act = Activation::Relu;
      d.pre_act = keep_pre ? &pre : nullptr;
      be->gemm(d, in, one, y);
      expect_same(to_host_f32(*be, y), {nan, 0.0f, inf, 0.0f, 0.0f, 0.0f, 2.0f},
                  keep_pre ? "forward with pre_act" : "forward");
    }

    // Two columns: dbias sums what the select lets through.
    const std::vector<float> pre_v = {-1.0f, 3.0f, 0.0f, 1.0f, nan, -inf, -2.0f, 5.0f};
    const std::vector<float> dy_v = {inf, 1.0f, -inf, 2.0f, 1.0f, nan, nan, 4.0f};
    const std::vector<float> want = {0.0f, 1.0f, 0.0f, 2.0f, 1.0f, 0.0f, 0.0f, 4.0f};
    Tensor pre = make(Shape{4, 2}, dt, pre_v), dy = make(Shape{4, 2}, dt, dy_v);
    Tensor dx = poisoned(Shape{4, 2}, dt), db = poisoned(Shape{2}, DType::F32);
    be->bias_act_backward(Activation::Relu, dy, pre, dx, &db);
    expect_same(to_host_f32(*be, dx), want, "backward");
    expect_same(to_host_f32(*be, db), {1.0f, 7.0f}, "dbias");

    // dY (4, 1) times a row of ones: the products are dy itself, then the epilogue's select.
    Tensor dcol = make(Shape{4, 1}, dt, {inf, -inf, 1.0f, inf});
    Tensor ones = make(Shape{1, 2}, dt, {1.0f, 1.0f});
    Tensor act_in = make(Shape{4, 2}, dt, {-1.0f, 0.0f, nan, -2.0f, 3.0f, -inf, -5.0f, 1.0f});
    Tensor c = poisoned(Shape{4, 2}, dt), db2 = poisoned(Shape{2}, DType::F32);
    GemmDesc bwd;
    bwd.dact = Activation::Relu;
    bwd.dact_input = &act_in;
    bwd.dbias = &db2;
    be->gemm(bwd, dcol, ones, c);
    expect_same(to_host_f32(*be, c), {0.0f, 0.0f, -inf, 0.0f, 1.0f, 0.0f, 0.0f, inf},
                "backward epilogue");
    expect_same(to_host_f32(*be, db2), {-inf, inf}, "backward epilogue dbias");
  }
}

TEST_F(CpuBiasAct, DxMayAliasDyAndDbiasIsOptional) {
  const int64_t rows = 4, n = 3;
  auto pv = random_nonzero(rows * n, 61), gv = random_nonzero(rows * n, 62);
  Tensor pre = make(Shape{rows, n}, DType::F32, pv);
  Tensor dy = make(Shape{rows, n}, DType::F32, gv);
  Tensor ref = poisoned(Shape{rows, n}, DType::F32);
  be->bias_act_backward(Activation::Relu, dy, pre, ref, nullptr);
  be->bias_act_backward(Activation::Relu, dy, pre, dy, nullptr);
  EXPECT_EQ(to_host_f32(*be, dy), to_host_f32(*be, ref));
  for (int64_t i = 0; i < rows * n; ++i)
    EXPECT_EQ(to_host_f32(*be, ref)[i], pv[i] > 0 ? gv[i] : 0.0f);
  Tensor wrong = poisoned(Shape{rows, n + 1}, DType::F32);
  EXPECT_THROW(be->bias_act_backward(Activation::Relu, dy, pre, wrong, nullptr), Error);
  Tensor db_wrong = poisoned(Shape{n + 1}, DType::F32);
  EXPECT_THROW(be->bias_act_backward(Activation::Relu, dy, pre, ref, &db_wrong), Error);
}

}  // namespace
}  // namespace mpbench
