// Every CUDA op against the CPU reference backend on the same fresh random non-zero inputs, with
// outputs poisoned first, plus the CUDA-only parts (OOM, events, graphs, info, GEMM speed as a
// check that cuBLASLt and not the fallback kernel ran). Skips when there is no CUDA device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/cpu/ops.h"
#include "parity_env.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::column_abs_sums;
using test::compare;
using test::from_host_f32;
using test::poison;
using test::random_nonzero;
using test::to_host_f32;
using test::tolerance_for;

using test::Env;
using test::Pair;

// ---- GEMM ------------------------------------------------------------------------------------

struct GemmConfig {
  DType ab, c;
  GemmMath math;
};

struct Epilogue {
  const char* name;
  Activation act;
  bool bias, bias_f32, pre_act;
  float alpha, beta;
  // Backward epilogue: C *= dact'(dact_input), dbias = column sums of C.
  Activation dact = Activation::None;
  bool dbias = false;
};

const Epilogue kEpilogues[] = {
    {"plain", Activation::None, false, false, false, 1.0f, 0.0f},
    {"bias", Activation::None, true, false, false, 1.0f, 0.0f},
    {"relu_bias", Activation::Relu, true, false, false, 1.0f, 0.0f},
    {"gelu_bias", Activation::Gelu, true, false, false, 1.0f, 0.0f},
    {"gelu", Activation::Gelu, false, false, false, 1.0f, 0.0f},
    {"relu_bias_pre", Activation::Relu, true, false, true, 1.0f, 0.0f},
    {"gelu_bias32_pre", Activation::Gelu, true, true, true, 1.0f, 0.0f},
    {"bias32_pre", Activation::None, true, true, true, 1.0f, 0.0f},
    {"relu_bias32", Activation::Relu, true, true, false, 1.0f, 0.0f},
    {"alpha_beta", Activation::None, false, false, false, 0.5f, 0.75f},
    // alpha scales the product, not the bias (oneDNN's output scale would scale both).
    {"alpha_bias_relu", Activation::Relu, true, false, false, 0.5f, 0.0f},
    {"alpha_bias32_gelu_pre", Activation::Gelu, true, true, true, 2.0f, 0.0f},
    {"gelu_pre", Activation::Gelu, false, false, true, 1.0f, 0.0f},
    // The backward epilogues (cuBLASLt's DGELU[_BGRAD], or the GEMM + bias_act_backward fallback).
    {"dgelu", Activation::None, false, false, false, 1.0f, 0.0f, Activation::Gelu, false},
    {"dgelu_bgrad", Activation::None, false, false, false, 0.5f, 0.0f, Activation::Gelu, true},
    {"drelu", Activation::None, false, false, false, 1.0f, 0.0f, Activation::Relu, false},
    {"drelu_bgrad", Activation::None, false, false, false, 1.0f, 0.0f, Activation::Relu, true},
    {"bgrad", Activation::None, false, false, false, 1.0f, 0.0f, Activation::None, true},
};

void run_gemm_case(Env& env, const GemmConfig& cfg, int64_t batch, int64_t m, int64_t n, int64_t k,
                   bool ta, bool tb, const Epilogue& e, uint64_t seed) {
  auto shape = [&](int64_t r, int64_t c) { return batch > 0 ? Shape{batch, r, c} : Shape{r, c}; };
  Pair a = env.random(ta ? shape(k, m) : shape(m, k), cfg.ab, seed);
  Pair b = env.random(tb ? shape(n, k) : shape(k, n), cfg.ab, seed + 1);
  Pair c =
      e.beta != 0.0f ? env.random(shape(m, n), cfg.c, seed + 2) : env.poisoned(shape(m, n), cfg.c);
  Pair bias, pre;
  GemmDesc d;
  d.trans_a = ta;
  d.trans_b = tb;
  d.alpha = e.alpha;
  d.beta = e.beta;
  d.math = cfg.math;
  d.act = e.act;
  if (e.bias) bias = env.random(Shape{n}, e.bias_f32 ? DType::F32 : cfg.c, seed + 3);
  if (e.pre_act) pre = env.poisoned(shape(m, n), cfg.c);
  Pair dact_in, dbias;
  if (e.dact != Activation::None) dact_in = env.random(shape(m, n), cfg.c, seed + 4, 3.0f);
  if (e.dbias) dbias = env.poisoned(Shape{n}, DType::F32);
  d.dact = e.dact;

  // The error scale of each output: alpha * sum_k |a||b| + |beta c| + |bias|, in double.
  std::vector<float> scale(static_cast<size_t>((batch > 0 ? batch : 1) * m * n));
  {
    auto ha = env.host_cpu(a), hb = env.host_cpu(b);
    auto hc = e.beta != 0.0f ? env.host_cpu(c) : std::vector<float>(scale.size(), 0.0f);
    auto hbias = e.bias ? env.host_cpu(bias) : std::vector<float>(n, 0.0f);
    for (int64_t bt = 0; bt < (batch > 0 ? batch : 1); ++bt)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) {
            double av = ha[bt * m * k + (ta ? p * m + i : i * k + p)];
            double bv = hb[bt * k * n + (tb ? j * k + p : p * n + j)];
            acc += std::fabs(av * bv);
          }
          const int64_t o = bt * m * n + i * n + j;
          scale[o] = static_cast<float>(std::fabs(e.alpha) * acc + std::fabs(e.beta * hc[o]) +
                                        std::fabs(hbias[j]));
          // GELU's derivative reaches 1.13 (ReLU's 1).
          if (e.dact != Activation::None) scale[o] *= 1.2f;
        }
  }
  // The bias gradient's error scale: the sum of its column's scales.
  std::vector<float> dbias_scale(static_cast<size_t>(n), 0.0f);
  for (size_t o = 0; o < scale.size(); ++o) dbias_scale[o % n] += scale[o];
  d.bias = e.bias ? &bias.cpu : nullptr;
  d.pre_act = e.pre_act ? &pre.cpu : nullptr;
  d.dact_input = e.dact != Activation::None ? &dact_in.cpu : nullptr;
  d.dbias = e.dbias ? &dbias.cpu : nullptr;
  env.cpu->gemm(d, a.cpu, b.cpu, c.cpu);
  d.bias = e.bias ? &bias.dut : nullptr;
  d.pre_act = e.pre_act ? &pre.dut : nullptr;
  d.dact_input = e.dact != Activation::None ? &dact_in.dut : nullptr;
  d.dbias = e.dbias ? &dbias.dut : nullptr;
  env.dut->gemm(d, a.dut, b.dut, c.dut);

  const double tol = std::max(tolerance_for(cfg.ab, cfg.math), tolerance_for(cfg.c, cfg.math));
  const std::string what = fmt::format(
      "{} -> {} math {}, batch {} M {} N {} K {}, trans_a {} trans_b {}, {}", dtype_name(cfg.ab),
      dtype_name(cfg.c), static_cast<int>(cfg.math), batch, m, n, k, ta, tb, e.name);
  EXPECT_TRUE(env.close(c, tol, &scale)) << "C: " << what;
  if (e.pre_act) EXPECT_TRUE(env.close(pre, tol, &scale)) << "pre_act: " << what;
  if (e.dbias) EXPECT_TRUE(env.close(dbias, tol, &dbias_scale)) << "dbias: " << what;
  for (Pair* p : {&a, &b, &c, &bias, &pre, &dact_in, &dbias}) env.release(*p);
}

const GemmConfig kGemmConfigs[] = {
    {DType::F32, DType::F32, GemmMath::Strict},
    {DType::F32, DType::F32, GemmMath::TF32},
    {DType::F16, DType::F16, GemmMath::LowPrecision},
    {DType::BF16, DType::BF16, GemmMath::LowPrecision},
    {DType::F16, DType::F32, GemmMath::LowPrecision},
    {DType::BF16, DType::F32, GemmMath::LowPrecision},
};

TEST(CudaParity, GemmShapesTransposesEpilogues) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  struct Mnk {
    int64_t m, n, k;
  };
  const Mnk shapes[] = {{1, 1, 1},       {1, 1, 64},   {7, 33, 1},    {33, 7, 128},
                        {128, 128, 128}, {257, 33, 7}, {1, 257, 128}, {128, 1, 257},
                        {257, 257, 257}, {64, 128, 32}};
  uint64_t seed = 1000;
  for (const auto& cfg : kGemmConfigs)
    for (const auto& s : shapes)
      for (int t = 0; t < 4 && !test::reference_against_itself(cfg.ab, cfg.math); ++t)
        for (const auto& e : kEpilogues)
          run_gemm_case(env, cfg, 0, s.m, s.n, s.k, t & 1, t & 2, e, seed += 10);
}

// A 16-bit C's activation takes the GEMM's rounded output on the device too (GemmDesc): cuBLASLt's
// GELU epilogue rounds once, from fp32, and so serves fp32 C only.
TEST(CudaParity, GemmActivationTakesTheRoundedOutput) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  for (DType dt : {DType::F16, DType::BF16}) {
    if (test::reference_against_itself(dt, GemmMath::LowPrecision)) continue;
    for (Activation act : {Activation::Relu, Activation::Gelu})
      EXPECT_TRUE(
          test::activation_takes_rounded_gemm_output(*env.dut, env.dut_alloc, dt, act, 7100));
  }
}

// And the backward epilogue is the GEMM followed by bias_act_backward, bit for bit, on a 16-bit C
// (cuBLASLt's DGELU epilogues round once: they serve fp32 C only).
TEST(CudaParity, GemmBackwardEpilogueIsGemmThenBiasActBackward) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  for (DType dt : {DType::F16, DType::BF16}) {
    if (test::reference_against_itself(dt, GemmMath::LowPrecision)) continue;
    // A native CPU without a bf16 GEMM (AVX2) runs the fused GEMM on the reference (std::tanh,
    // double sums) and bias_act_backward on its own loop (a vector tanh, fp32 sums): one
    // backend, two paths, not bit for bit. amp_bf16 is unsupported there.
    if (test::kNativeCpuUnderTest && !test::native_bf16_available()) continue;
    for (Activation act : {Activation::Relu, Activation::Gelu})
      EXPECT_TRUE(test::backward_epilogue_is_gemm_then_bias_act_backward(*env.dut, env.dut_alloc,
                                                                         dt, act, 7200));
  }
}

// Weight-gradient shapes, A^T B with fp32 C over a million outputs: the native CPU's inner-product
// path where its matmul has no AMX (kernels/onednn/gemm.cpp); odd sizes too. With alpha or beta
// set, the path is not taken, and the result must not change either.
TEST(CudaParity, GemmWeightGradients) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const GemmConfig& cfg = kGemmConfigs[5];  // bf16 -> fp32
  ASSERT_EQ(cfg.ab, DType::BF16);
  ASSERT_EQ(cfg.c, DType::F32);
  uint64_t seed = 6000;
  // alpha and beta apart as well as together: the native CPU's weight-gradient path overwrites C
  // with the plain product, and each alone must keep the GEMM off it.
  const Epilogue beta_only{"beta", Activation::None, false, false, false, 1.0f, 0.75f};
  const Epilogue alpha_only{"alpha", Activation::None, false, false, false, 0.5f, 0.0f};
  for (const Epilogue& e : {kEpilogues[0], kEpilogues[9], kEpilogues[15], beta_only, alpha_only}) {
    run_gemm_case(env, cfg, 0, 1024, 1024, 96, true, false, e, seed += 10);
    run_gemm_case(env, cfg, 0, 1031, 1027, 33, true, false, e, seed += 10);
  }
}

// The native CPU's weight-gradient path (an inner product that computes exactly C = A^T B into
// one fp32 matrix) at a million outputs: one size at two K, each its own cached primitive; and
// the rest of what must keep a GEMM off it, each alone (a bias, an activation, a bias gradient, a
// batch, a 16-bit C), giving the reference's C.
TEST(CudaParity, GemmWeightGradientsAtAnotherKOrWithWhatThePathCannotRun) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const GemmConfig& to_f32 = kGemmConfigs[5];  // bf16 -> fp32
  const GemmConfig& to_bf16 = kGemmConfigs[3];
  ASSERT_EQ(to_f32.c, DType::F32);
  ASSERT_EQ(to_bf16.c, DType::BF16);
  uint64_t seed = 6500;
  for (int64_t k : {16, 24})
    run_gemm_case(env, to_f32, 0, 1024, 1024, k, true, false, kEpilogues[0], seed += 10);
  for (const Epilogue& e : {kEpilogues[1], kEpilogues[4], kEpilogues[17]}) {  // bias, gelu, bgrad
    ASSERT_EQ(e.alpha, 1.0f);
    ASSERT_EQ(e.beta, 0.0f);
    run_gemm_case(env, to_f32, 0, 1024, 1024, 16, true, false, e, seed += 10);
  }
  run_gemm_case(env, to_f32, 2, 1024, 1024, 16, true, false, kEpilogues[0], seed += 10);
  run_gemm_case(env, to_bf16, 0, 1024, 1024, 16, true, false, kEpilogues[0], seed += 10);
}

TEST(CudaParity, GemmBatched) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 5000;
  for (const auto& cfg : kGemmConfigs)
    for (int t = 0; t < 4 && !test::reference_against_itself(cfg.ab, cfg.math); ++t)
      for (const auto& e : {kEpilogues[0], kEpilogues[2], kEpilogues[6], kEpilogues[9],
                            kEpilogues[12], kEpilogues[14]}) {
        run_gemm_case(env, cfg, 3, 33, 7, 65, t & 1, t & 2, e, seed += 10);
        run_gemm_case(env, cfg, 4, 64, 128, 64, t & 1, t & 2, e, seed += 10);
      }
}

// Views that start mid-buffer (odd element offsets) must not reuse plans chosen for aligned
// pointers, and the epilogue must cope with a misaligned bias.
TEST(CudaParity, GemmMisalignedViews) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  for (const auto& cfg : kGemmConfigs) {
    const int64_t m = 64, n = 96, k = 48;
    Pair a = env.random(Shape{m * k + 1}, cfg.ab, 1);
    Pair b = env.random(Shape{k * n + 3}, cfg.ab, 2);
    Pair bias = env.random(Shape{n + 1}, cfg.c, 3);
    Pair c = env.poisoned(Shape{m * n + 1}, cfg.c);
    for (int64_t off : {0, 1}) {
      poison(*env.cpu, c.cpu);
      poison(*env.dut, c.dut);
      GemmDesc d;
      d.math = cfg.math;
      d.act = Activation::Relu;
      Tensor bias_c = bias.cpu.slice(off, Shape{n}), bias_g = bias.dut.slice(off, Shape{n});
      Tensor ac = a.cpu.slice(off, Shape{m, k}), ag = a.dut.slice(off, Shape{m, k});
      Tensor bc = b.cpu.slice(off, Shape{k, n}), bg = b.dut.slice(off, Shape{k, n});
      Tensor cc = c.cpu.slice(off, Shape{m, n}), cg = c.dut.slice(off, Shape{m, n});
      d.bias = &bias_c;
      env.cpu->gemm(d, ac, bc, cc);
      d.bias = &bias_g;
      env.dut->gemm(d, ag, bg, cg);
      Pair view{cc, cg};
      EXPECT_TRUE(env.close(
          view, std::max(tolerance_for(cfg.ab, cfg.math), tolerance_for(cfg.c, cfg.math))))
          << dtype_name(cfg.ab) << " -> " << dtype_name(cfg.c) << " offset " << off;
    }
  }
}

TEST(CudaParity, GemmRejectsWhatTheCpuRejects) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  Pair a = env.random(Shape{4, 5}, DType::F32, 1), b = env.random(Shape{6, 3}, DType::F32, 2);
  Pair c = env.poisoned(Shape{4, 3}, DType::F32);
  GemmDesc d;
  EXPECT_THROW(env.dut->gemm(d, a.dut, b.dut, c.dut), Error);  // K 5 vs 6
  Pair h = env.random(Shape{4, 6}, DType::F16, 3);
  d.math = GemmMath::TF32;
  EXPECT_THROW(env.dut->gemm(d, h.dut, b.dut, c.dut), Error);  // dtypes differ
}

// ---- bias_act_backward ---------------------------------------------------------------------

TEST(CudaParity, BiasActBackward) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 7000;
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu})
      for (int64_t rows : {1, 7, 33, 257, 4096})
        for (int64_t n : {1, 7, 33, 128, 1000})
          for (int mode = 0; mode < 3; ++mode) {  // 0: no dbias, 1: dbias, 2: dbias, dx aliases dy
            if (rows * n > 1 << 20) continue;
            Pair dy = env.random(Shape{rows, n}, dt, seed += 3);
            Pair pre = env.random(Shape{rows, n}, dt, seed + 1, 3.0f);
            Pair dx = mode == 2 ? dy : env.poisoned(Shape{rows, n}, dt);
            Pair dbias = env.poisoned(Shape{n}, DType::F32);
            env.cpu->bias_act_backward(act, dy.cpu, pre.cpu, dx.cpu, mode ? &dbias.cpu : nullptr);
            env.dut->bias_act_backward(act, dy.dut, pre.dut, dx.dut, mode ? &dbias.dut : nullptr);
            const std::string what = fmt::format("{} {} rows {} n {} mode {}", dtype_name(dt),
                                                 activation_name(act), rows, n, mode);
            EXPECT_TRUE(env.close(dx, tolerance_for(dt))) << "dx " << what;
            if (mode) {  // a column's sum can cancel: judged against the sum of its |dx|
              const auto dbias_scale = column_abs_sums(env.host_cpu(dx), rows, n);
              EXPECT_TRUE(env.close(dbias, test::dbias_tolerance(dt), &dbias_scale))
                  << "dbias " << what;
              // Against its own dx, closely: the sums of dx as stored (that tolerance would also
              // pass the unrounded dx's, about 2^-9 of a column's |dx| away in bf16).
              const std::vector<float> own = env.host_dut(dx);
              std::vector<float> sums(static_cast<size_t>(n));
              for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t i = 0; i < rows; ++i) s += own[i * n + j];
                sums[j] = static_cast<float>(s);
              }
              const auto own_scale = column_abs_sums(own, rows, n);
              const auto c = compare(env.host_dut(dbias), sums, 2e-5, &own_scale);
              EXPECT_TRUE(c.ok) << "dbias against the device's own dx " << what << ": "
                                << c.message;
            }
            for (Pair* p : {&dy, &pre, &dbias}) env.release(*p);
            if (mode != 2) env.release(dx);
          }
}

// The bias gradient sums dx as stored, whatever the backend's tanh (test_util.cpp).
TEST(CudaParity, BiasGradientSumsTheRoundedDx) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu})
      EXPECT_TRUE(test::bias_gradient_sums_the_rounded_dx(*env.dut, env.dut_alloc, dt, act, 7300));
}

// ReLU and GELU over their whole range, not only +-3: near 0, where tanh saturates (|x| 10 and
// more) and where x^3 overflows (1e13). Each element within the dtype's tolerance of its own scale
// (|x| for the forward, 1.2 for the derivative, which GELU's reaches 1.13): a norm over the grid
// would let the large values hide errors elsewhere, and GELU's derivative crosses 0 near -0.75.
// The forward is a GEMM that copies x (K 1, B all ones) with the activation epilogue and its
// pre-activation; the backward takes dy = 1, so that dx is the derivative itself.
TEST(CudaParity, ActivationsOverTheirWholeRange) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  constexpr int64_t kCols = 8;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<float> x;
    for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * 0.01f);
    for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, -1e-6f, 1e3f, -1e3f, 3e4f, -3e4f})
      x.push_back(v);
    if (dt != DType::F16)
      for (float v : {1e13f, -1e13f}) x.push_back(v);
    const int64_t m = static_cast<int64_t>(x.size());
    std::vector<float> rows_x;  // x repeated along each row of the GEMM's output
    for (float v : x) rows_x.insert(rows_x.end(), kCols, v);
    for (Activation act : {Activation::Relu, Activation::Gelu}) {
      const std::string what = fmt::format("{} {}", dtype_name(dt), activation_name(act));
      Pair in = env.make(Shape{m, 1}, dt, x);
      Pair ones = env.make(Shape{1, kCols}, dt, std::vector<float>(kCols, 1.0f));
      Pair y = env.poisoned(Shape{m, kCols}, dt), pre = env.poisoned(Shape{m, kCols}, dt);
      GemmDesc d;
      d.act = act;
      d.pre_act = &pre.cpu;
      env.cpu->gemm(d, in.cpu, ones.cpu, y.cpu);
      d.pre_act = &pre.dut;
      env.dut->gemm(d, in.dut, ones.dut, y.dut);
      Pair pre_in = env.make(Shape{m, kCols}, dt, rows_x);
      Pair dy = env.make(Shape{m, kCols}, dt, std::vector<float>(rows_x.size(), 1.0f));
      Pair dx = env.poisoned(Shape{m, kCols}, dt);
      env.cpu->bias_act_backward(act, dy.cpu, pre_in.cpu, dx.cpu, nullptr);
      env.dut->bias_act_backward(act, dy.dut, pre_in.dut, dx.dut, nullptr);
      const double tol = tolerance_for(dt);
      for (bool forward : {true, false}) {
        const std::vector<float> got = env.host_dut(forward ? y : dx),
                                 ref = env.host_cpu(forward ? y : dx);
        int bad = 0;
        for (size_t i = 0; i < got.size() && bad < 3; ++i) {
          const double scale = forward ? std::fabs(rows_x[i]) : 1.2;
          if (std::fabs(static_cast<double>(got[i]) - ref[i]) <= tol * scale) continue;
          ADD_FAILURE() << what << (forward ? " forward" : " derivative") << " at x " << rows_x[i]
                        << ": " << got[i] << " (reference " << ref[i] << ")";
          ++bad;
        }
      }
      EXPECT_TRUE(env.close(pre, 0.0)) << "pre-activation " << what;
      for (Pair* p : {&in, &ones, &y, &pre, &pre_in, &dy, &dx}) env.release(*p);
    }
  }
}

// ReLU on NaN and +-inf, where a max(x, 0) (cuBLASLt's RELU epilogues, oneDNN's relu post-op)
// or a multiply by a 0/1 derivative would differ from the reference's selects (kernels/relu.h,
// kernels/cpu/kernels_bias_act.cpp): bit for bit. The GEMMs have K 1 and B all ones, so every
// product is exact: forward over x with and without bias (zeros) and pre-activation; backward
// over every pair of a dy and a pre-activation, alone and as the GEMM's backward epilogue.
TEST(CudaParity, ReluOnInfAndNaN) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const float inf = INFINITY, nan = std::nanf("");
  const std::vector<float> xs = {nan, -inf, inf, -1.0f, -0.0f, 0.0f, 2.0f, 1e-30f};
  const std::vector<float> dys = {inf, -inf, nan, 1.0f, -2.0f};
  const int64_t rows = 33, n = static_cast<int64_t>(xs.size() * dys.size());
  std::vector<float> x_col, pre_v, dy_col;  // pre_v(i, j) = xs[j % 8], dy_col[i] = dys[i % 5]
  for (int64_t i = 0; i < rows; ++i) {
    x_col.push_back(xs[i % xs.size()]);
    dy_col.push_back(dys[i % dys.size()]);
    for (int64_t j = 0; j < n; ++j) pre_v.push_back(xs[j % xs.size()]);
  }
  const GemmConfig configs[] = {kGemmConfigs[0], kGemmConfigs[2], kGemmConfigs[3]};
  for (const GemmConfig& cfg : configs) {
    const DType dt = cfg.c;
    Pair ones = env.make(Shape{1, n}, dt, std::vector<float>(n, 1.0f));
    Pair bias = env.make(Shape{n}, dt, std::vector<float>(n, 0.0f));
    Pair x = env.make(Shape{rows, 1}, dt, x_col);
    for (bool with_bias : {false, true})
      for (bool keep_pre : {false, true}) {
        const std::string what =
            fmt::format("{} forward bias {} pre_act {}", dtype_name(dt), with_bias, keep_pre);
        Pair y = env.poisoned(Shape{rows, n}, dt), pre = env.poisoned(Shape{rows, n}, dt);
        GemmDesc d;
        d.math = cfg.math;
        d.act = Activation::Relu;
        d.bias = with_bias ? &bias.cpu : nullptr;
        d.pre_act = keep_pre ? &pre.cpu : nullptr;
        env.cpu->gemm(d, x.cpu, ones.cpu, y.cpu);
        d.bias = with_bias ? &bias.dut : nullptr;
        d.pre_act = keep_pre ? &pre.dut : nullptr;
        env.dut->gemm(d, x.dut, ones.dut, y.dut);
        EXPECT_TRUE(env.same(y)) << what;
        env.release(y);
        env.release(pre);
      }

    Pair pre = env.make(Shape{rows, n}, dt, pre_v);
    std::vector<float> dy_v;
    for (float v : dy_col) dy_v.insert(dy_v.end(), n, v);
    Pair dy = env.make(Shape{rows, n}, dt, dy_v), dy1 = env.make(Shape{rows, 1}, dt, dy_col);
    for (bool epilogue : {false, true}) {
      const std::string what =
          fmt::format("{} backward{}", dtype_name(dt), epilogue ? " epilogue" : "");
      Pair dx = env.poisoned(Shape{rows, n}, dt), db = env.poisoned(Shape{n}, DType::F32);
      if (epilogue) {
        GemmDesc d;
        d.math = cfg.math;
        d.dact = Activation::Relu;
        d.dact_input = &pre.cpu;
        d.dbias = &db.cpu;
        env.cpu->gemm(d, dy1.cpu, ones.cpu, dx.cpu);
        d.dact_input = &pre.dut;
        d.dbias = &db.dut;
        env.dut->gemm(d, dy1.dut, ones.dut, dx.dut);
      } else {
        env.cpu->bias_act_backward(Activation::Relu, dy.cpu, pre.cpu, dx.cpu, &db.cpu);
        env.dut->bias_act_backward(Activation::Relu, dy.dut, pre.dut, dx.dut, &db.dut);
      }
      EXPECT_TRUE(env.same(dx)) << what;
      EXPECT_TRUE(env.same(db)) << what << " dbias";
      // Where the unit is off, the gradient is 0 whatever dy is.
      const std::vector<float> got = env.host_dut(dx);
      for (int64_t i = 0; i < rows * n; ++i)
        if (pre_v[i] <= 0.0f) ASSERT_EQ(got[i], 0.0f) << what << " element " << i;
      env.release(dx);
      env.release(db);
    }
    for (Pair* p : {&ones, &bias, &x, &pre, &dy, &dy1}) env.release(*p);
  }
}

// ---- softmax_xent --------------------------------------------------------------------------

TEST(CudaParity, SoftmaxXent) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 9000;
  for (int64_t rows : {1, 7, 33, 128, 257, 4099})
    for (int64_t classes : {1, 2, 10, 33, 1000}) {
      std::mt19937 rng(static_cast<uint32_t>(seed));
      std::uniform_int_distribution<int> label(0, static_cast<int>(classes - 1));
      std::vector<float> labels(rows);
      for (auto& l : labels) l = static_cast<float>(label(rng));
      Pair lab = env.make(Shape{rows}, DType::I32, labels);
      Pair logits = env.random(Shape{rows, classes}, DType::F32, seed += 7, 5.0f);
      for (int variant = 0; variant < 6; ++variant) {
        // 0: no gradient; 1-3: dlogits fp32/fp16/bf16 with a loss scale; 4: fp32, no scale;
        // 5: fp32 with a scale, divided by 3x the rows (data parallel's global batch).
        const DType gdt = variant == 2 ? DType::F16 : variant == 3 ? DType::BF16 : DType::F32;
        Pair loss = env.scalar(1.5f), correct = env.scalar(2.0f), scale = env.scalar(1024.0f);
        Pair dlogits = env.poisoned(Shape{rows, classes}, gdt);
        const bool grad = variant != 0, scaled = variant != 0 && variant != 4;
        const int64_t grad_rows = variant == 5 ? 3 * rows : 0;
        env.cpu->softmax_xent(logits.cpu, lab.cpu, grad ? &dlogits.cpu : nullptr,
                              scaled ? &scale.cpu : nullptr, loss.cpu, correct.cpu, grad_rows);
        env.dut->softmax_xent(logits.dut, lab.dut, grad ? &dlogits.dut : nullptr,
                              scaled ? &scale.dut : nullptr, loss.dut, correct.dut, grad_rows);
        const std::string what =
            fmt::format("rows {} classes {} variant {}", rows, classes, variant);
        EXPECT_TRUE(env.close(loss, 1e-5)) << "loss " << what;
        EXPECT_EQ(env.host_dut(correct), env.host_cpu(correct)) << "correct " << what;
        if (grad) EXPECT_TRUE(env.close(dlogits, tolerance_for(gdt))) << "dlogits " << what;
        if (variant == 0) {
          // The blocks' partials are added in a fixed order: a second call gives the same bits.
          Pair again = env.scalar(1.5f), again_correct = env.scalar(2.0f);
          env.dut->softmax_xent(logits.dut, lab.dut, nullptr, nullptr, again.dut,
                                again_correct.dut);
          EXPECT_EQ(env.host_dut(again), env.host_dut(loss)) << "repeat " << what;
        }
      }
    }
}

// Rows with NaN, inf and -inf logits (what an overflowed fp16 step feeds the loss): each row's
// argmax is the CPU's (NaN entries never win, a NaN in column 0 is the answer), whichever lane
// of a GPU warp holds the NaN. Labels are the CPU's argmax, so every disagreement lowers the count.
TEST(CudaParity, SoftmaxXentArgmaxOverNaNAndInfRows) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const int64_t classes = 100;
  for (int pattern = 0; pattern < 8; ++pattern) {
    std::vector<float> v = random_nonzero(static_cast<size_t>(4 * classes), 9500 + pattern);
    for (int64_t r = 0; r < 4; ++r) {
      float* row = v.data() + r * classes;
      const int64_t top = 24 + 17 * r;  // the largest finite entry, in another lane per row
      row[top] = 10.0f;
      switch (pattern) {
        case 0:  // column 0 decides
          row[0] = nan;
          break;
        case 1:  // one lane's NaN
          row[8 + r] = nan;
          break;
        case 2:
          for (int64_t j = 1; j < classes; j += 3)
            if (j != top) row[j] = nan;
          break;
        case 3:
          for (int64_t j = 0; j < classes; ++j) row[j] = nan;
          break;
        case 4:  // the first inf
          row[top + 1] = inf;
          row[top + 2] = inf;
          break;
        case 5:
          for (int64_t j = 0; j < classes; ++j) row[j] = -inf;
          break;
        case 6:
          row[40] = -inf;
          row[top + 1] = nan;
          break;
        default:  // every entry of lane 1 but its first
          for (int64_t j = 33; j < classes; j += 32) row[j] = nan;
          break;
      }
    }
    std::vector<float> labels(4);
    for (int64_t r = 0; r < 4; ++r) {
      float max = 0.0f;
      labels[r] = static_cast<float>(cpu::argmax_first(v.data() + r * classes, classes, &max));
    }
    Pair logits = env.make(Shape{4, classes}, DType::F32, v);
    Pair lab = env.make(Shape{4}, DType::I32, labels);
    Pair loss = env.scalar(0.0f), correct = env.scalar(0.0f);
    Pair dlogits = env.poisoned(Shape{4, classes}, DType::F32);
    env.cpu->softmax_xent(logits.cpu, lab.cpu, &dlogits.cpu, nullptr, loss.cpu, correct.cpu);
    env.dut->softmax_xent(logits.dut, lab.dut, &dlogits.dut, nullptr, loss.dut, correct.dut);
    EXPECT_EQ(env.host_cpu(correct)[0], 4.0f) << "pattern " << pattern;
    EXPECT_EQ(env.host_dut(correct)[0], 4.0f) << "pattern " << pattern;
    EXPECT_EQ(std::isnan(env.host_dut(loss)[0]), std::isnan(env.host_cpu(loss)[0]))
        << "pattern " << pattern;
  }
}

// ---- cast, fill, transfers ------------------------------------------------------------------

std::vector<float> special_values(size_t n, uint64_t seed) {
  std::vector<float> v = random_nonzero(n, seed, 4.0f);
  const float specials[] = {std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::nanf(""),
                            -0.0f,
                            0.0f,
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -70000.0f,
                            3.0e38f,
                            1.0e-8f,   // fp16 subnormal
                            6.0e-8f,   // near the smallest fp16 subnormal
                            2.9e-8f,   // below half of it: rounds to 0 in fp16
                            1.0e-40f,  // fp32 subnormal
                            -1.2e-38f,
                            1.00048828125f /* fp16 tie */,
                            1.00390625f /* bf16 tie */,
                            3.3895314e38f};
  for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]) && i * 3 < n; ++i)
    v[i * 3] = specials[i];
  return v;
}

TEST(CudaParity, CastAllPairsWithSpecials) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  uint64_t seed = 11000;
  for (DType from : types)
    for (DType to : types)
      for (int64_t n : {1, 7, 64, 1000, 4099})
        for (int64_t off : {0, 1}) {  // offset 1: the scalar (unaligned) path
          Pair src = env.make(Shape{n + off}, from, special_values(n + off, seed += 5));
          Pair dst = env.poisoned(Shape{n + off}, to);
          Tensor sc = src.cpu.slice(off, Shape{n}), sg = src.dut.slice(off, Shape{n});
          Tensor dc = dst.cpu.slice(off, Shape{n}), dg = dst.dut.slice(off, Shape{n});
          env.cpu->cast(sc, dc);
          env.dut->cast(sg, dg);
          Pair view{dc, dg};
          EXPECT_TRUE(env.same(view))
              << dtype_name(from) << " -> " << dtype_name(to) << " n " << n << " offset " << off;
        }
}

// round_to: fp32 rounded in place through fp16 or bf16, the specials included (fp16 overflow
// to inf, subnormals, ties), bit for bit the reference's.
TEST(CudaParity, RoundToWithSpecials) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 11500;
  for (DType to : {DType::F16, DType::BF16})
    for (int64_t n : {1, 7, 1000, 4099}) {
      Pair t = env.make(Shape{n}, DType::F32, special_values(n, seed += 5));
      env.cpu->round_to(t.cpu, to);
      env.dut->round_to(t.dut, to);
      EXPECT_TRUE(env.same(t)) << dtype_name(to) << " n " << n;
    }
}

TEST(CudaParity, FillUploadDownloadCopy) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32})
    for (int64_t n : {1, 5, 1000}) {
      Pair t = env.poisoned(Shape{n}, dt);
      for (float v : {0.0f, -3.0f, 1.0e-7f, 70000.0f}) {
        if (dt == DType::I32 && v != std::trunc(v)) continue;
        env.cpu->fill(t.cpu, v);
        env.dut->fill(t.dut, v);
        EXPECT_TRUE(env.same(t)) << dtype_name(dt) << " fill " << v;
      }
      Pair src = env.random(Shape{n}, dt == DType::I32 ? DType::F32 : dt, 42, 100.0f);
      if (dt == DType::I32) src = env.make(Shape{n}, dt, std::vector<float>(n, -17.0f));
      Pair dst = env.poisoned(Shape{n}, dt);
      env.cpu->copy(src.cpu, dst.cpu);
      env.dut->copy(src.dut, dst.dut);
      EXPECT_TRUE(env.same(dst)) << dtype_name(dt) << " copy";
    }
}

// ---- unscale_check_norm --------------------------------------------------------------------

TEST(CudaParity, UnscaleCheckNorm) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 13000;
  for (int64_t n : {1, 7, 1000, 100003})
    for (int64_t off : {0, 1})
      for (bool scaled : {false, true})
        for (int bad = 0; bad < 3; ++bad) {  // 0: finite, 1: an inf, 2: a NaN
          std::vector<float> g = random_nonzero(n + off, seed += 3, scaled ? 4096.0f : 1.0f);
          if (bad) g[off + (n - 1) / 2] = bad == 1 ? -INFINITY : std::nanf("");
          Pair grads = env.make(Shape{n + off}, DType::F32, g);
          Pair scale = env.scalar(1024.0f);
          Pair found = env.poisoned(Shape{1}, DType::F32),
               norm = env.poisoned(Shape{1}, DType::F32);
          Tensor gc = grads.cpu.slice(off, Shape{n}), gg = grads.dut.slice(off, Shape{n});
          env.cpu->unscale_check_norm(gc, scaled ? &scale.cpu : nullptr, found.cpu, norm.cpu);
          env.dut->unscale_check_norm(gg, scaled ? &scale.dut : nullptr, found.dut, norm.dut);
          const std::string what =
              fmt::format("n {} offset {} scaled {} bad {}", n, off, scaled, bad);
          EXPECT_TRUE(env.same(grads)) << "grads " << what;
          EXPECT_EQ(env.host_dut(found), env.host_cpu(found)) << "found_inf " << what;
          EXPECT_EQ(env.host_dut(found)[0], bad ? 1.0f : 0.0f) << what;
          const float ng = env.host_dut(norm)[0], nc = env.host_cpu(norm)[0];
          if (bad) {  // inf for an inf, NaN for a NaN, as the reference's sqrt of the sum gives
            EXPECT_FALSE(std::isfinite(ng)) << "norm " << what;
            EXPECT_EQ(std::isnan(ng), std::isnan(nc))
                << "norm " << what << ": " << ng << ", " << nc;
          } else {
            EXPECT_NEAR(ng, nc, 1e-5 * nc) << "norm " << what;
          }
        }
}

// The check judges the gradients as scaled (kernels/cpu/grad_stats.cpp): a scale below 1 that
// overflows a finite gradient, or a scale of 0, flags nothing; the unscaled values (inf, NaN for
// 0 * inf) and the norm are the reference's. The big gradient sits in a vector body and in a tail.
TEST(CudaParity, UnscaleCheckJudgesTheScaledGradients) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  for (int64_t n : {7, 1000, 100003})
    for (float s : {0.5f, 0.0f})
      for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
        std::vector<float> g = random_nonzero(n, 13500 + n + at);
        g[at] = 3e38f;
        g[n / 3] = 0.0f;
        Pair grads = env.make(Shape{n}, DType::F32, g);
        Pair scale = env.scalar(s);
        Pair found = env.poisoned(Shape{1}, DType::F32), norm = env.poisoned(Shape{1}, DType::F32);
        env.cpu->unscale_check_norm(grads.cpu, &scale.cpu, found.cpu, norm.cpu);
        env.dut->unscale_check_norm(grads.dut, &scale.dut, found.dut, norm.dut);
        const std::string what = fmt::format("n {} scale {} at {}", n, s, at);
        EXPECT_TRUE(env.same(grads)) << "grads " << what;
        EXPECT_EQ(env.host_dut(found)[0], 0.0f) << what;
        EXPECT_EQ(env.host_cpu(found)[0], 0.0f) << what;
        const float ng = env.host_dut(norm)[0], nc = env.host_cpu(norm)[0];
        EXPECT_FALSE(std::isfinite(ng)) << "norm " << what;
        EXPECT_EQ(std::isnan(ng), std::isnan(nc)) << "norm " << what << ": " << ng << ", " << nc;
        for (Pair* p : {&grads, &scale, &found, &norm}) env.release(*p);
      }
}

// ---- optimizers and loss scaling -----------------------------------------------------------

TEST(CudaParity, AdamW) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 15000;
  // 70000: a range per thread on the native CPU, with each copy dtype (an fp16 copy's offsets
  // were untested past the first thread's).
  for (int64_t n : {1, 7, 1000, 4099, 70000})
    for (int lowp = 0; lowp < 3; ++lowp)
      for (int skip = 0; skip < 3; ++skip) {  // 0: no found_inf, 1: found_inf = 0, 2: = 1
        const DType ldt = lowp == 2 ? DType::BF16 : DType::F16;
        AdamWParams p;
        p.lr = 1e-2f;
        p.weight_decay = 0.05f;
        const std::vector<float> w0 = random_nonzero(n, seed += 5);
        Pair w = env.make(Shape{n}, DType::F32, w0);
        Pair m = env.make(Shape{n}, DType::F32, std::vector<float>(n, 0.0f));
        Pair v = env.make(Shape{n}, DType::F32, std::vector<float>(n, 0.0f));
        Pair low = env.make(Shape{n}, ldt, std::vector<float>(n, 7.0f));
        Pair step = env.scalar(0.0f), found = env.scalar(skip == 2 ? 1.0f : 0.0f);
        for (int it = 0; it < 3; ++it) {
          Pair g = env.random(Shape{n}, DType::F32, seed + 100 + it, 0.1f);
          env.cpu->adamw_step(p, w.cpu, g.cpu, m.cpu, v.cpu, lowp ? &low.cpu : nullptr, step.cpu,
                              skip ? &found.cpu : nullptr);
          env.dut->adamw_step(p, w.dut, g.dut, m.dut, v.dut, lowp ? &low.dut : nullptr, step.dut,
                              skip ? &found.dut : nullptr);
          env.cpu->count_step(step.cpu, skip ? &found.cpu : nullptr);
          env.dut->count_step(step.dut, skip ? &found.dut : nullptr);
        }
        const std::string what = fmt::format("n {} lowp {} skip {}", n, lowp, skip);
        EXPECT_EQ(env.host_dut(step), env.host_cpu(step)) << what;
        if (skip == 2) {
          EXPECT_EQ(env.host_dut(w), w0) << "skipped step wrote master weights " << what;
          EXPECT_EQ(env.host_dut(low), std::vector<float>(n, 7.0f)) << "skipped step wrote lowp";
          EXPECT_EQ(env.host_dut(m), std::vector<float>(n, 0.0f)) << what;
          EXPECT_EQ(env.host_dut(step)[0], 0.0f) << what;
          continue;
        }
        EXPECT_TRUE(env.close(w, 1e-5)) << "master " << what;
        EXPECT_TRUE(env.close(m, 1e-5)) << "m " << what;
        EXPECT_TRUE(env.close(v, 1e-5)) << "v " << what;
        if (lowp) EXPECT_TRUE(env.close(low, tolerance_for(ldt))) << "lowp " << what;
      }
}

TEST(CudaParity, Sgd) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 17000;
  // 70001: a range per thread on the native CPU. Odd sizes keep a bf16 copy, 1000 an fp16 one.
  for (int64_t n : {1, 7, 1000, 4099, 70001})
    for (float momentum : {0.0f, 0.9f})
      for (bool nesterov : {false, true})
        for (int variant = 0; variant < 3; ++variant) {  // 0: plain, 1: 16-bit copy + wd, 2: skip
          if (nesterov && momentum == 0.0f) continue;
          SgdParams p;
          p.lr = 0.05f;
          p.momentum = momentum;
          p.nesterov = nesterov;
          p.weight_decay = variant == 1 ? 0.01f : 0.0f;
          const std::vector<float> w0 = random_nonzero(n, seed += 5);
          Pair w = env.make(Shape{n}, DType::F32, w0);
          Pair buf = env.make(Shape{n}, DType::F32, std::vector<float>(n, 0.0f));
          const DType low_dt = n % 2 ? DType::BF16 : DType::F16;
          Pair low = env.make(Shape{n}, low_dt, std::vector<float>(n, 7.0f));
          Pair found = env.scalar(variant == 2 ? 1.0f : 0.0f);
          // With momentum 0 there is no buffer at all: the op must not touch it.
          Tensor no_buf;
          for (int it = 0; it < 3; ++it) {
            Pair g = env.random(Shape{n}, DType::F32, seed + 100 + it, 0.1f);
            env.cpu->sgd_step(p, w.cpu, g.cpu, momentum ? buf.cpu : no_buf,
                              variant ? &low.cpu : nullptr, &found.cpu);
            env.dut->sgd_step(p, w.dut, g.dut, momentum ? buf.dut : no_buf,
                              variant ? &low.dut : nullptr, &found.dut);
          }
          const std::string what = fmt::format("n {} momentum {} nesterov {} variant {}", n,
                                               momentum, nesterov, variant);
          if (variant == 2) {
            EXPECT_EQ(env.host_dut(w), w0) << what;
            EXPECT_EQ(env.host_dut(low), std::vector<float>(n, 7.0f)) << what;
            continue;
          }
          EXPECT_TRUE(env.close(w, 1e-5)) << "master " << what;
          if (momentum != 0.0f) EXPECT_TRUE(env.close(buf, 1e-5)) << "buf " << what;
          if (variant) EXPECT_TRUE(env.close(low, tolerance_for(low_dt))) << "lowp " << what;
        }
}

TEST(CudaParity, UpdateLossScaleSequences) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  struct Seq {
    float init;
    double growth, backoff;
    int32_t interval;
    std::vector<bool> found;
  };
  const Seq seqs[] = {
      {65536.0f, 2.0, 0.5, 3, {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0}},
      {1.0f, 2.0, 0.25, 1, {0, 0, 0, 0, 1, 0, 1, 1, 1, 0}},
      {3.0e38f, 2.0, 0.5, 1, {0, 0, 0, 1, 0, 0}},  // never grows to inf
      {65536.0f, 2.0, 0.5, 2000, std::vector<bool>(2003, false)},
      // Non-dyadic factors: the product in double, rounded to float once, as PyTorch does.
      {65536.0f, 1.7, 0.3, 2, test::found_inf_pattern(98, 7, 0.3)},
  };
  for (const auto& s : seqs) {
    Pair scale = env.scalar(s.init), step = env.scalar(0.0f);
    Pair tracker = env.make(Shape{1}, DType::I32, {0.0f});
    test::GradScalerRef ref{s.init};
    for (size_t i = 0; i < s.found.size(); ++i) {
      Pair found = env.scalar(s.found[i] ? 1.0f : 0.0f);
      ref.update(s.found[i], s.growth, s.backoff, s.interval);
      env.cpu->update_loss_scale(scale.cpu, tracker.cpu, found.cpu, s.growth, s.backoff,
                                 s.interval);
      env.dut->update_loss_scale(scale.dut, tracker.dut, found.dut, s.growth, s.backoff,
                                 s.interval);
      env.cpu->count_step(step.cpu, &found.cpu);
      env.dut->count_step(step.dut, &found.dut);
      if (s.found.size() < 100 || i + 5 > s.found.size()) {
        ASSERT_EQ(env.host_dut(scale)[0], ref.scale) << "step " << i;
        ASSERT_EQ(env.host_cpu(scale)[0], ref.scale) << "step " << i;
        ASSERT_EQ(env.host_dut(tracker)[0], static_cast<float>(ref.tracker)) << "step " << i;
        ASSERT_EQ(env.host_dut(tracker), env.host_cpu(tracker)) << "step " << i;
        ASSERT_EQ(env.host_dut(step), env.host_cpu(step)) << "step " << i;
        EXPECT_TRUE(std::isfinite(env.host_dut(scale)[0]));
      }
      env.release(found);
    }
  }
  // count_step without found_inf always counts.
  Pair step = env.scalar(41.0f);
  env.dut->count_step(step.dut, nullptr);
  EXPECT_EQ(env.host_dut(step)[0], 42.0f);
}

// ---- amp_fp8 --------------------------------------------------------------------------------

// The hardware conversions round and saturate as kernels/fp8.h does: the same codes, amax and
// transposed copies as the CPU, over specials, both formats, fp32 and bf16 sources, and shapes
// that are and are not whole 32 x 32 tiles.
TEST(CudaParity, CastToFp8SameCodesAmaxAndTranspose) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 12000;
  for (DType f : {DType::F8E4M3, DType::F8E5M2})
    for (DType from : {DType::F32, DType::BF16})
      for (Shape s : {Shape{1, 1}, Shape{7, 45}, Shape{64, 32}, Shape{100, 130}})
        for (float scale : {1.0f, 96.0f, 1.0f / 4096}) {
          SCOPED_TRACE(
              fmt::format("{} -> {} {} scale {}", dtype_name(from), dtype_name(f), s.str(), scale));
          std::vector<float> v = random_nonzero(static_cast<size_t>(s.numel()), seed += 3, 8.0f);
          v[0] = 1e6f;                             // saturates
          if (v.size() > 2) v[2] = std::nanf("");  // passed over by the amax
          Pair src = env.make(s, from, v), sc = env.scalar(scale), amax = env.scalar(0.5f);
          Pair dst = env.poisoned(s, f), dst_t = env.poisoned(Shape{s[1], s[0]}, f);
          env.cpu->cast_to_fp8(src.cpu, sc.cpu, &amax.cpu, dst.cpu, &dst_t.cpu);
          env.dut->cast_to_fp8(src.dut, sc.dut, &amax.dut, dst.dut, &dst_t.dut);
          EXPECT_TRUE(env.same(dst));
          EXPECT_TRUE(env.same(dst_t));
          EXPECT_TRUE(env.same(amax));
          // Without the transpose, the flat path.
          Pair flat = env.poisoned(s, f);
          env.cpu->cast_to_fp8(src.cpu, sc.cpu, nullptr, flat.cpu);
          env.dut->cast_to_fp8(src.dut, sc.dut, nullptr, flat.dut);
          EXPECT_TRUE(env.same(flat));
        }
}

TEST(CudaParity, Fp8UpdateScalingIsTheSameRule) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  DelayedScalingRecipe r;
  r.amax_history_len = 5;
  r.margin = 1;
  const int64_t t = 300;  // more than one block of the update kernel
  for (AmaxCompute c : {AmaxCompute::Max, AmaxCompute::MostRecent}) {
    r.amax_compute = c;
    std::vector<float> h = random_nonzero(static_cast<size_t>(t * 5), 12500, 100.0f);
    for (float& x : h) x = std::fabs(x);
    // Slot i of tensor j at h[i * t + j] (slot major).
    h[0] = 0.0f;
    for (int i = 0; i < 5; ++i) h[i * t + 1] = 0.0f;  // tensor 1: an amax of 0 keeps its scale
    h[2] = 1e-39f;                                    // tensor 2: the scale overflows to FLT_MAX
    for (int i = 1; i < 5; ++i) h[i * t + 2] = 0.0f;
    Pair hist = env.make(Shape{5, t}, DType::F32, h);
    Pair scale = env.make(Shape{t}, DType::F32, std::vector<float>(t, 3.0f));
    Pair inv = env.poisoned(Shape{t}, DType::F32), used = env.poisoned(Shape{t}, DType::F32);
    for (int step = 0; step < 3; ++step) {
      env.cpu->fp8_update_scaling(r, DType::F8E5M2, hist.cpu, scale.cpu, inv.cpu, used.cpu);
      env.dut->fp8_update_scaling(r, DType::F8E5M2, hist.dut, scale.dut, inv.dut, used.dut);
      EXPECT_TRUE(env.same(hist));
      EXPECT_TRUE(env.same(scale));
      EXPECT_TRUE(env.same(inv));
      EXPECT_TRUE(env.same(used));
    }
    EXPECT_EQ(env.host_dut(scale)[1], 3.0f);
  }
}

// The error scale and tolerance of an FP8 GEMM against the CPU's exact decode. Hopper's FP8
// tensor cores keep about 13 mantissa bits in the accumulator between promotions to fp32
// (DeepSeek-V3 report, 3.3.2), so each of the k additions may lose u = 2^-14 of a running sum
// that is at most sa*sb*sum|a||b|: Higham's worst-case bound is k*u on that scale, plus C's own
// rounding (and the bias's, which the scale includes). A wrong GEMM (a scale, a layout, a dropped
// bias) is off by O(1) on the same scale, so the bound still tells right from wrong.
std::vector<float> fp8_error_scale(const std::vector<float>& a, const std::vector<float>& b,
                                   const std::vector<float>& bias, float sab, int64_t m, int64_t n,
                                   int64_t k) {
  std::vector<float> scale(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double mag = 0;
      for (int64_t p = 0; p < k; ++p) mag += std::fabs(double{a[i * k + p]} * b[j * k + p]);
      scale[i * n + j] = static_cast<float>(sab * mag + (bias.empty() ? 0.0 : std::fabs(bias[j])));
    }
  return scale;
}
double fp8_gemm_tolerance(int64_t k, DType c) {
  return static_cast<double>(k) * std::ldexp(1.0, -14) + tolerance_for(c, GemmMath::LowPrecision);
}

// cuBLASLt's FP8 GEMMs (sm_89+) against the CPU's exact decode: forward (e4m3 x e4m3, bf16 out,
// bias and GELU with its pre-activation: the BIAS epilogue, then GELU by bias_act_forward, as for
// every 16-bit C) and the backward's e5m2 x e4m3 into fp32. A bias off cuBLASLt's 16-byte
// alignment takes the unfused path: the plain FP8 matmul, then the bf16 bias and the activation
// added to C by bias_act_forward, fp32 C included. Two cases read their scales
// as training does, views 16 bytes apart in one buffer (on the H200, training's views 4 bytes
// apart were refused where separate scalars ran).
TEST(CudaParity, Fp8GemmMatchesTheCpu) {
  SKIP_WITHOUT_CUDA();
  Env env;
  const DeviceInfo info = env.dut->info();
  if (!precision_supported(Precision::AMP_FP8, info.cc_major, info.cc_minor))
    GTEST_SKIP() << "FP8 GEMMs need compute capability 8.9, this GPU is " << info.cc_major << "."
                 << info.cc_minor;
  struct Case {
    int64_t m, n, k;
    DType a, c;
    bool epilogue;
    bool unaligned_bias = false;
    bool packed_scales = false;  // views 16 bytes apart in one buffer, as Fp8Scaling lays them out
  };
  const Case cases[] = {{64, 48, 32, DType::F8E4M3, DType::BF16, true},
                        {128, 256, 64, DType::F8E4M3, DType::BF16, false},
                        {32, 64, 128, DType::F8E5M2, DType::F32, false},
                        {256, 768, 512, DType::F8E5M2, DType::BF16, false},
                        {64, 48, 32, DType::F8E4M3, DType::F32, true, true},
                        {64, 48, 32, DType::F8E4M3, DType::BF16, true, true},
                        {128, 256, 64, DType::F8E4M3, DType::BF16, false, false, true},
                        {32, 64, 128, DType::F8E5M2, DType::F32, false, false, true}};
  const float sa_v = 0.125f, sb_v = 1.0f / 32;
  uint64_t seed = 12800;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}x{}x{} {} -> {}{}{}", c.m, c.n, c.k, dtype_name(c.a),
                             dtype_name(c.c), c.unaligned_bias ? " (unaligned bias)" : "",
                             c.packed_scales ? " (scales in one buffer)" : ""));
    Pair a = env.random(Shape{c.m, c.k}, c.a, seed += 3, 4.0f);
    Pair b = env.random(Shape{c.n, c.k}, DType::F8E4M3, seed += 3, 4.0f);
    // One element more, so that a view from the second is 2 bytes off any 16-byte boundary.
    Pair bias_buf = env.random(Shape{c.n + 1}, DType::BF16, seed += 3);
    const int64_t off = c.unaligned_bias ? 1 : 0;
    Pair bias{bias_buf.cpu.slice(off, Shape{c.n}), bias_buf.dut.slice(off, Shape{c.n})};
    Pair sa = env.scalar(sa_v), sb = env.scalar(sb_v);
    Pair packed = env.make(Shape{12}, DType::F32, {0, 0, 0, 0, sa_v, 0, 0, 0, sb_v, 0, 0, 0});
    if (c.packed_scales) {
      sa = Pair{packed.cpu.slice(4, Shape{1}), packed.dut.slice(4, Shape{1})};
      sb = Pair{packed.cpu.slice(8, Shape{1}), packed.dut.slice(8, Shape{1})};
    }
    Pair out = env.poisoned(Shape{c.m, c.n}, c.c), pre = env.poisoned(Shape{c.m, c.n}, c.c);
    auto run = [&](Backend& be, const Tensor& ta, const Tensor& tb, const Tensor& tbias,
                   const Tensor& tsa, const Tensor& tsb, Tensor& tout, Tensor& tpre) {
      GemmDesc d;
      d.trans_b = true;
      d.math = GemmMath::LowPrecision;
      d.a_scale_inv = &tsa;
      d.b_scale_inv = &tsb;
      if (c.epilogue) {
        d.bias = &tbias;
        d.act = Activation::Gelu;
        d.pre_act = &tpre;
      }
      be.gemm(d, ta, tb, tout);
    };
    run(*env.cpu, a.cpu, b.cpu, bias.cpu, sa.cpu, sb.cpu, out.cpu, pre.cpu);
    run(*env.dut, a.dut, b.dut, bias.dut, sa.dut, sb.dut, out.dut, pre.dut);
    const std::vector<float> bias_h = c.epilogue ? env.host_cpu(bias) : std::vector<float>();
    const std::vector<float> scale =
        fp8_error_scale(env.host_cpu(a), env.host_cpu(b), bias_h, sa_v * sb_v, c.m, c.n, c.k);
    const double tol = fp8_gemm_tolerance(c.k, c.c);
    if (c.epilogue) {
      EXPECT_TRUE(env.close(pre, tol, &scale));
      // GELU's slope is at most 1.13, so its output's error is within 1.13x the input's.
      std::vector<float> gelu_scale(scale);
      for (float& v : gelu_scale) v *= 1.13f;
      EXPECT_TRUE(env.close(out, tol, &gelu_scale));
    } else {
      EXPECT_TRUE(env.close(out, tol, &scale));
    }
  }
}

// Scale views 4 bytes apart in one buffer, the layout Fp8Scaling had when every FP8 training GEMM
// on the H200 (2026-12-04) returned CUBLAS_STATUS_NOT_SUPPORTED while this file's cases, each
// scale its own allocation, passed; the slots are 16 bytes apart since, on a theory nobody has
// run. The outcome is printed (the device check's log keeps it): accepted, the result must be
// right; refused, the theory holds. Either way it settles it.
TEST(CudaParity, Fp8GemmWithScalesFourBytesApart) {
  SKIP_WITHOUT_CUDA();
  Env env;
  const DeviceInfo info = env.dut->info();
  if (!precision_supported(Precision::AMP_FP8, info.cc_major, info.cc_minor))
    GTEST_SKIP() << "FP8 GEMMs need compute capability 8.9";
  const int64_t m = 64, n = 48, k = 32;
  Pair a = env.random(Shape{m, k}, DType::F8E4M3, 12900, 4.0f);
  Pair b = env.random(Shape{n, k}, DType::F8E4M3, 12903, 4.0f);
  Pair packed = env.make(Shape{4}, DType::F32, {0.0f, 0.125f, 1.0f / 32, 0.0f});
  const Pair sa{packed.cpu.slice(1, Shape{1}), packed.dut.slice(1, Shape{1})};
  const Pair sb{packed.cpu.slice(2, Shape{1}), packed.dut.slice(2, Shape{1})};
  Pair out = env.poisoned(Shape{m, n}, DType::BF16);
  auto run = [&](Backend& be, const Tensor& ta, const Tensor& tb, const Tensor& tsa,
                 const Tensor& tsb, Tensor& tout) {
    GemmDesc d;
    d.trans_b = true;
    d.math = GemmMath::LowPrecision;
    d.a_scale_inv = &tsa;
    d.b_scale_inv = &tsb;
    be.gemm(d, ta, tb, tout);
  };
  run(*env.cpu, a.cpu, b.cpu, sa.cpu, sb.cpu, out.cpu);
  try {
    run(*env.dut, a.dut, b.dut, sa.dut, sb.dut, out.dut);
  } catch (const Error& e) {
    std::cout << "[ FP8 scales 4 bytes apart: refused: " << e.what() << " ]" << std::endl;
    return;
  }
  std::cout << "[ FP8 scales 4 bytes apart: accepted ]" << std::endl;
  const std::vector<float> scale =
      fp8_error_scale(env.host_cpu(a), env.host_cpu(b), {}, 0.125f / 32, m, n, k);
  EXPECT_TRUE(env.close(out, fp8_gemm_tolerance(k, DType::BF16), &scale));
}

// ---- CUDA-only behaviour -------------------------------------------------------------------

TEST(CudaParity, OutOfMemoryIsAnOomErrorAndRecoverable) {
  SKIP_WITHOUT_CUDA();
  Env env;
  try {
    env.dut->raw_alloc(size_t{1} << 50);  // 1 PiB
    ADD_FAILURE() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_oom()) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  // The error must not be sticky: the device keeps working.
  Pair t = env.poisoned(Shape{100}, DType::F32);
  env.dut->fill(t.dut, 3.0f);
  EXPECT_EQ(env.host_dut(t), std::vector<float>(100, 3.0f));
}

TEST(CudaParity, InfoMemoryEvents) {
  SKIP_WITHOUT_CUDA();
  Env env;
  DeviceInfo info = env.dut->info();
  EXPECT_EQ(info.kind, "cuda");
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 7);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.total_memory, size_t{0});
  EXPECT_FALSE(info.driver_version.empty());
  EXPECT_FALSE(info.runtime_version.empty());
  EXPECT_FALSE(info.cublas_version.empty());
  std::printf("device: %s cc %d.%d, %d SMs, driver %s, runtime %s, cuBLAS %s, cuDNN %s\n",
              info.name.c_str(), info.cc_major, info.cc_minor, info.sm_count,
              info.driver_version.c_str(), info.runtime_version.c_str(),
              info.cublas_version.c_str(), info.cudnn_version.c_str());
  auto mem = env.dut->memory_info();
  ASSERT_TRUE(mem.has_value());
  EXPECT_GT(mem->total_bytes, size_t{0});
  EXPECT_LE(mem->free_bytes, mem->total_bytes);
  EXPECT_EQ(env.dut->workspace_bytes(), info.cc_major >= 9 ? size_t{32} << 20 : size_t{4} << 20);
  auto start = env.dut->create_event(), stop = env.dut->create_event();
  Pair t = env.poisoned(Shape{1 << 20}, DType::F32);
  start->record();
  env.dut->fill(t.dut, 1.0f);
  stop->record();
  double ms = stop->elapsed_ms(*start);
  EXPECT_GE(ms, 0.0);
  EXPECT_LT(ms, 10000.0);
}

// One small training step (cast, GEMM with fp32 logits, softmax-xent, weight-gradient GEMM,
// unscale/check, AdamW, loss scale) captured once and replayed must match running it eagerly.
TEST(CudaParity, GraphReplayMatchesEager) {
  SKIP_WITHOUT_CUDA();
  Env env;
  Backend& be = *env.dut;
  TrackingAllocator& al = env.dut_alloc;
  const int64_t batch = 64, in = 96, classes = 10;
  auto alloc = [&](Shape s, DType dt) { return al.alloc(s, dt, MemCategory::Activations); };
  Tensor x = alloc(Shape{batch, in}, DType::F16), labels = alloc(Shape{batch}, DType::I32);
  Tensor master = alloc(Shape{in * classes}, DType::F32),
         w16 = alloc(Shape{in, classes}, DType::F16);
  Tensor bias = alloc(Shape{classes}, DType::F32),
         logits = alloc(Shape{batch, classes}, DType::F32);
  Tensor dlogits = alloc(Shape{batch, classes}, DType::F16);
  Tensor grads = alloc(Shape{in * classes}, DType::F32), m = alloc(Shape{in * classes}, DType::F32);
  Tensor v = alloc(Shape{in * classes}, DType::F32);
  Tensor scale = alloc(Shape{1}, DType::F32), tracker = alloc(Shape{1}, DType::I32);
  Tensor found = alloc(Shape{1}, DType::F32), norm = alloc(Shape{1}, DType::F32);
  Tensor step = alloc(Shape{1}, DType::F32), loss = alloc(Shape{1}, DType::F32);
  Tensor correct = alloc(Shape{1}, DType::F32);
  std::vector<float> lab(batch);
  for (int64_t i = 0; i < batch; ++i) lab[i] = static_cast<float>((i * 7) % classes);

  auto reset = [&] {
    from_host_f32(be, random_nonzero(batch * in, 1), x);
    from_host_f32(be, lab, labels);
    from_host_f32(be, random_nonzero(in * classes, 2, 0.1f), master);
    from_host_f32(be, random_nonzero(classes, 3, 0.1f), bias);
    for (Tensor* t : {&m, &v, &tracker, &step, &loss, &correct}) be.fill(*t, 0.0f);
    be.fill(scale, 1024.0f);
  };
  AdamWParams ap;
  auto train_step = [&] {
    Tensor w16_flat = w16.reshaped(Shape{in * classes});
    be.cast(master, w16_flat);
    GemmDesc fwd;
    fwd.math = GemmMath::LowPrecision;
    fwd.bias = &bias;
    be.gemm(fwd, x, w16, logits);
    be.softmax_xent(logits, labels, &dlogits, &scale, loss, correct);
    GemmDesc bwd;
    bwd.math = GemmMath::LowPrecision;
    bwd.trans_a = true;
    Tensor grads2d = grads.reshaped(Shape{in, classes});
    be.gemm(bwd, x, dlogits, grads2d);
    be.unscale_check_norm(grads, &scale, found, norm);
    be.adamw_step(ap, master, grads, m, v, &w16_flat, step, &found);
    be.update_loss_scale(scale, tracker, found, 2.0, 0.5, 2);
    be.count_step(step, &found);
  };
  auto snapshot = [&] {
    std::vector<std::vector<float>> out;
    for (Tensor* t : {&master, &m, &v, &scale, &tracker, &step, &loss, &correct, &norm})
      out.push_back(to_host_f32(be, *t));
    return out;
  };

  reset();
  for (int i = 0; i < 3; ++i) train_step();
  auto eager = snapshot();

  reset();
  be.synchronize();
  ASSERT_TRUE(be.supports_graphs());
  be.begin_capture();
  train_step();
  be.end_capture();
  for (int i = 0; i < 3; ++i) be.replay();
  auto replayed = snapshot();

  const char* names[] = {"master", "m", "v", "scale", "tracker", "step", "loss", "correct", "norm"};
  for (size_t i = 0; i < eager.size(); ++i) {
    auto r = compare(replayed[i], eager[i], 1e-6);
    EXPECT_TRUE(r.ok) << names[i] << ": " << r.message;
  }
  EXPECT_EQ(replayed[5][0], 3.0f);  // three counted steps: nothing overflowed at scale 1024
}

// cuBLASLt, not the one-thread-per-element fallback, must run the common shapes: the fallback
// is two orders of magnitude below these floors on any GPU this tool targets.
TEST(CudaParity, GemmRunsOnCublasLt) {
  SKIP_WITHOUT_CUDA();
  Env env;
  const int64_t s = 4096;
  struct Mode {
    DType dt;
    GemmMath math;
    double min_tflops;
  };
  for (const Mode& mode :
       {Mode{DType::F32, GemmMath::Strict, 8.0}, Mode{DType::F32, GemmMath::TF32, 40.0},
        Mode{DType::F16, GemmMath::LowPrecision, 100.0},
        Mode{DType::BF16, GemmMath::LowPrecision, 100.0}}) {
    Tensor a = env.dut_alloc.alloc(Shape{s, s}, mode.dt, MemCategory::Activations);
    Tensor b = env.dut_alloc.alloc(Shape{s, s}, mode.dt, MemCategory::Activations);
    Tensor c = env.dut_alloc.alloc(Shape{s, s}, mode.dt, MemCategory::Activations);
    Tensor bias = env.dut_alloc.alloc(Shape{s}, mode.dt, MemCategory::Activations);
    for (Tensor* t : {&a, &b, &bias}) env.dut->fill(*t, 0.01f);
    GemmDesc d;
    d.math = mode.math;
    d.bias = &bias;
    d.act = Activation::Relu;
    env.dut->gemm(d, a, b, c);  // plan + warm-up
    auto start = env.dut->create_event(), stop = env.dut->create_event();
    const int reps = 5;
    start->record();
    for (int i = 0; i < reps; ++i) env.dut->gemm(d, a, b, c);
    stop->record();
    const double ms = stop->elapsed_ms(*start) / reps;
    const double tflops = 2.0 * s * s * s / (ms * 1e-3) / 1e12;
    std::printf("gemm %s math %d %lldx%lldx%lld: %.3f ms, %.1f TFLOP/s\n", dtype_name(mode.dt),
                static_cast<int>(mode.math), static_cast<long long>(s), static_cast<long long>(s),
                static_cast<long long>(s), ms, tflops);
    EXPECT_GE(tflops, mode.min_tflops) << dtype_name(mode.dt);
    auto out = to_host_f32(*env.dut, c.slice(0, Shape{8}));
    const float expect = static_cast<float>(s) * 0.01f * 0.01f + 0.01f;
    EXPECT_NEAR(out[0], expect, expect * 2e-2);
    for (Tensor* t : {&a, &b, &c, &bias}) env.dut_alloc.release(*t);
  }
}

}  // namespace
}  // namespace mpbench
