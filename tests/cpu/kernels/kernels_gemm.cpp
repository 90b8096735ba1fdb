// CPU GEMM against a naive double-precision reference in every math mode and dtype, the fused
// epilogue, batching, argument checks, and the GEMM gradients against central differences.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::to_float;

using test::compare;
using test::from_host_f32;
using test::random_nonzero;
using test::to_host_f32;

struct Case {
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
};

// C = act(alpha op(A) op(B) + beta C0 + bias) in double from the values the operands hold.
std::vector<double> gemm_ref(const Case& c, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& c0,
                             const std::vector<float>& bias, float alpha, float beta,
                             Activation act, bool tf32, std::vector<double>* pre = nullptr) {
  std::vector<double> out(c.batch * c.m * c.n);
  if (pre) pre->assign(out.size(), 0);
  auto in = [&](float v) { return tf32 ? static_cast<double>(round_to_tf32(v)) : v; };
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    const float* pa = a.data() + bi * c.m * c.k;
    const float* pb = b.data() + bi * c.k * c.n;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < c.k; ++l) {
          const double av = in(c.trans_a ? pa[l * c.m + i] : pa[i * c.k + l]);
          const double bv = in(c.trans_b ? pb[j * c.k + l] : pb[l * c.n + j]);
          s += av * bv;
        }
        const int64_t o = bi * c.m * c.n + i * c.n + j;
        double x = alpha * s;
        if (beta != 0) x += beta * static_cast<double>(c0[o]);
        if (!bias.empty()) x += bias[j];
        if (pre) (*pre)[o] = x;
        out[o] = test::activation_ref(act, x);
      }
    }
  }
  return out;
}

// Largest |got - ref| / |ref| over elements whose reference is not tiny: catches any element
// that is off by more than one rounding, which a norm-wise comparison could average away.
double max_elem_rel(const std::vector<float>& got, const std::vector<double>& ref) {
  double worst = 0, scale = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - ref[i]) / std::max(std::fabs(ref[i]), 1e-3 * scale));
  return worst;
}

class CpuGemm : public test::CpuOpsTest {
 protected:
  static Shape shape(int64_t batch, int64_t r, int64_t c) {
    return batch == 0 ? Shape{r, c} : Shape{batch, r, c};
  }

  // One GEMM of case `c` (batch 0 = rank 2) against the double reference.
  void check(const Case& c, DType in_dt, DType out_dt, GemmMath math, float alpha = 1.0f,
             float beta = 0.0f, Activation act = Activation::None, bool with_bias = false,
             DType bias_dt = DType::F32) {
    SCOPED_TRACE(::testing::Message()
                 << "batch " << c.batch << " m " << c.m << " n " << c.n << " k " << c.k << " ta "
                 << c.trans_a << " tb " << c.trans_b << " in " << dtype_name(in_dt) << " out "
                 << dtype_name(out_dt) << " math " << static_cast<int>(math) << " alpha " << alpha
                 << " beta " << beta << " act " << activation_name(act) << " bias " << with_bias);
    const int64_t nb = std::max<int64_t>(c.batch, 1);
    Case flat = c;
    flat.batch = nb;
    Tensor a = make(c.trans_a ? shape(c.batch, c.k, c.m) : shape(c.batch, c.m, c.k), in_dt,
                    random_nonzero(nb * c.m * c.k, 11));
    Tensor b = make(c.trans_b ? shape(c.batch, c.n, c.k) : shape(c.batch, c.k, c.n), in_dt,
                    random_nonzero(nb * c.k * c.n, 12));
    Tensor out = make(shape(c.batch, c.m, c.n), out_dt, random_nonzero(nb * c.m * c.n, 13));
    if (beta == 0.0f) test::poison(*be, out);  // beta == 0 must not read C
    const std::vector<float> c0 = to_host_f32(*be, out);
    std::vector<float> bias_v;
    Tensor bias;
    if (with_bias) {
      bias = make(Shape{c.n}, bias_dt, random_nonzero(c.n, 14));
      bias_v = to_host_f32(*be, bias);
    }
    Tensor pre;
    if (act != Activation::None) {
      pre = alloc.alloc(out.shape, out_dt, MemCategory::Activations);
      test::poison(*be, pre);
    }

    GemmDesc d;
    d.trans_a = c.trans_a;
    d.trans_b = c.trans_b;
    d.alpha = alpha;
    d.beta = beta;
    d.math = math;
    d.act = act;
    d.bias = with_bias ? &bias : nullptr;
    d.pre_act = act != Activation::None ? &pre : nullptr;
    be->gemm(d, a, b, out);

    std::vector<double> pre_ref;
    auto ref = gemm_ref(flat, to_host_f32(*be, a), to_host_f32(*be, b), c0, bias_v, alpha, beta,
                        act, math == GemmMath::TF32, &pre_ref);
    // A 16-bit C's activation takes the pre-activation rounded to that dtype (autocast's Linear
    // output), which pre_act holds (checked against pre_ref below).
    if (act != Activation::None && out_dt != DType::F32) {
      const auto pre_got = to_host_f32(*be, pre);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = test::activation_ref(act, pre_got[i]);
    }
    const auto got = to_host_f32(*be, out);
    // The reference sees the same (rounded) inputs, so only fp32 accumulation and the final
    // rounding to C's dtype separate the two.
    const double tol = out_dt == DType::F32 ? 1e-5 : test::tolerance_for(out_dt);
    auto r = compare(got, to_float(ref), tol);
    EXPECT_TRUE(r.ok) << r.message;
    if (out_dt != DType::F32) {
      // Each element is at most one 16-bit rounding away (a neighbour at worst, when the fp32 sum
      // sits on a rounding boundary): no element may be off by more than one ulp.
      const double ulp = out_dt == DType::F16 ? 1.0 / 1024 : 1.0 / 128;
      EXPECT_LE(max_elem_rel(got, ref), ulp + 1e-4);
    }
    if (act != Activation::None) {
      auto rp = compare(to_host_f32(*be, pre), to_float(pre_ref), tol);
      EXPECT_TRUE(rp.ok) << "pre_act: " << rp.message;
    }
  }
};

const Case kShapes[] = {
    {0, 7, 13, 5, false, false},    {0, 7, 13, 5, true, false},  {0, 7, 13, 5, false, true},
    {0, 7, 13, 5, true, true},      {0, 1, 1, 1, false, false},  {0, 33, 17, 64, false, true},
    {0, 128, 10, 256, false, true}, {3, 7, 13, 5, false, false}, {3, 7, 13, 5, true, true},
    {2, 5, 9, 11, false, true},
};

TEST_F(CpuGemm, StrictFp32MatchesDoubleReference) {
  for (const Case& c : kShapes) check(c, DType::F32, DType::F32, GemmMath::Strict);
}

TEST_F(CpuGemm, Tf32MatchesReferenceOnRoundedInputs) {
  for (const Case& c : kShapes) check(c, DType::F32, DType::F32, GemmMath::TF32);
}

TEST_F(CpuGemm, Fp16AndBf16OperandsWithEitherOutput) {
  for (DType dt : {DType::F16, DType::BF16}) {
    for (const Case& c : kShapes) {
      check(c, dt, dt, GemmMath::LowPrecision);
      check(c, dt, DType::F32, GemmMath::LowPrecision);
    }
  }
}

TEST_F(CpuGemm, AlphaAndBetaReadC) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const GemmMath math = dt == DType::F32 ? GemmMath::Strict : GemmMath::LowPrecision;
    check({0, 7, 13, 5, false, true}, dt, dt, math, 0.5f, 0.75f);
    check({3, 7, 13, 5, true, false}, dt, dt, math, -2.0f, 1.0f);
  }
  check({0, 7, 13, 5, true, true}, DType::F16, DType::F32, GemmMath::LowPrecision, 1.5f, -0.5f);
  // A negative beta reads a 16-bit C as well.
  for (DType dt : {DType::F16, DType::BF16})
    check({0, 7, 13, 5, false, true}, dt, dt, GemmMath::LowPrecision, 0.5f, -0.75f);
}

TEST_F(CpuGemm, EpilogueBiasAndActivations) {
  for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
    check({0, 7, 13, 5, false, true}, DType::F32, DType::F32, GemmMath::Strict, 1.0f, 0.0f, act,
          true);
    check({0, 7, 13, 5, false, false}, DType::F32, DType::F32, GemmMath::TF32, 0.5f, 0.0f, act,
          true);
    check({2, 7, 13, 5, true, true}, DType::F32, DType::F32, GemmMath::Strict, 1.0f, 0.0f, act,
          false);
    for (DType dt : {DType::F16, DType::BF16}) {
      check({0, 7, 13, 5, false, true}, dt, dt, GemmMath::LowPrecision, 1.0f, 0.0f, act, true, dt);
      check({0, 9, 6, 17, true, false}, dt, dt, GemmMath::LowPrecision, 1.0f, 0.0f, act, true,
            DType::F32);
      check({0, 7, 13, 5, false, true}, dt, DType::F32, GemmMath::LowPrecision, 1.0f, 0.0f, act,
            true);
    }
  }
}

TEST_F(CpuGemm, ActivationTakesTheRoundedGemmOutput) {
  for (DType dt : {DType::F16, DType::BF16})
    for (Activation act : {Activation::Relu, Activation::Gelu})
      EXPECT_TRUE(test::activation_takes_rounded_gemm_output(*be, alloc, dt, act, 7000));
}

TEST_F(CpuGemm, Tf32RoundsInputsToTenMantissaBits) {
  // 1 + 2^-11 + 2^-20 is just above the tie between 1 and 1 + 2^-10, so TF32 rounds it up.
  const float x = 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20);
  Tensor a = make(Shape{1, 1}, DType::F32, {x});
  Tensor b = make(Shape{1, 1}, DType::F32, {1.0f});
  Tensor c = make(Shape{1, 1}, DType::F32, {0.0f});
  GemmDesc d;
  be->gemm(d, a, b, c);
  EXPECT_EQ(to_host_f32(*be, c)[0], x);
  d.math = GemmMath::TF32;
  be->gemm(d, a, b, c);
  EXPECT_EQ(to_host_f32(*be, c)[0], 1.0f + std::ldexp(1.0f, -10));
}

TEST_F(CpuGemm, Fp16OutputOverflowsToInfLikeTheHardware) {
  // 256 * 256 = 65536 is finite in fp32 accumulation but rounds past fp16's 65504 to inf.
  Tensor a = make(Shape{1, 1}, DType::F16, {256.0f});
  Tensor b = make(Shape{1, 1}, DType::F16, {256.0f});
  Tensor c16 = make(Shape{1, 1}, DType::F16, {0.0f});
  Tensor c32 = make(Shape{1, 1}, DType::F32, {0.0f});
  GemmDesc d;
  d.math = GemmMath::LowPrecision;
  be->gemm(d, a, b, c16);
  be->gemm(d, a, b, c32);
  EXPECT_TRUE(std::isinf(to_host_f32(*be, c16)[0]));
  EXPECT_EQ(to_host_f32(*be, c32)[0], 65536.0f);
}

TEST_F(CpuGemm, RejectsBadArguments) {
  Tensor a = make(Shape{4, 3}, DType::F32, random_nonzero(12, 1));
  Tensor b = make(Shape{5, 2}, DType::F32, random_nonzero(10, 2));
  Tensor c = make(Shape{4, 2}, DType::F32, random_nonzero(8, 3));
  GemmDesc d;
  try {
    be->gemm(d, a, b, c);
    FAIL() << "K mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inner dimensions"), std::string::npos) << e.what();
  }
  Tensor a16 = make(Shape{4, 5}, DType::F16, random_nonzero(20, 1));
  Tensor b16 = make(Shape{5, 2}, DType::F16, random_nonzero(10, 1));
  Tensor b32 = make(Shape{5, 2}, DType::F32, random_nonzero(10, 1));
  EXPECT_THROW(be->gemm(d, a16, b32, c), Error);  // mixed operand dtypes
  Tensor cbf = make(Shape{4, 2}, DType::BF16, random_nonzero(8, 1));
  EXPECT_THROW(be->gemm(d, a16, b16, cbf), Error);  // C neither fp16 nor fp32
  Tensor a32 = make(Shape{4, 5}, DType::F32, random_nonzero(20, 1));
  d.math = GemmMath::LowPrecision;
  EXPECT_THROW(be->gemm(d, a32, b32, c), Error);  // lowp math on fp32 operands
  d.math = GemmMath::Strict;
  Tensor c_wrong = make(Shape{4, 3}, DType::F32, random_nonzero(12, 1));
  EXPECT_THROW(be->gemm(d, a32, b32, c_wrong), Error);
  Tensor bias = make(Shape{3}, DType::F32, random_nonzero(3, 1));
  d.bias = &bias;
  EXPECT_THROW(be->gemm(d, a32, b32, c), Error);  // bias length != N
  d.bias = nullptr;
  d.act = Activation::Relu;
  d.beta = 1.0f;
  EXPECT_THROW(be->gemm(d, a32, b32, c), Error);  // epilogue with beta != 0
  d.act = Activation::None;
  Tensor pre = make(Shape{4, 2}, DType::F32, random_nonzero(8, 4));
  d.pre_act = &pre;
  EXPECT_THROW(be->gemm(d, a32, b32, c), Error);  // beta would read pre_act, not C
  d = GemmDesc{};
  Tensor a3 = make(Shape{2, 4, 5}, DType::F32, random_nonzero(40, 1));
  EXPECT_THROW(be->gemm(d, a3, b32, c), Error);  // mixed ranks
  be->gemm(d, a32, b32, c);                      // and the valid call still works
  // A batched B of another batch than A and C.
  Tensor a2 = make(Shape{2, 4, 5}, DType::F32, random_nonzero(40, 1));
  Tensor b1 = make(Shape{1, 5, 2}, DType::F32, random_nonzero(10, 1));
  Tensor c2 = make(Shape{2, 4, 2}, DType::F32, random_nonzero(16, 1));
  EXPECT_THROW(be->gemm(d, a2, b1, c2), Error);
  // A bias of neither fp32 nor C's dtype, a pre_act of C's shape in another dtype.
  Tensor c16 = make(Shape{4, 2}, DType::F16, random_nonzero(8, 1));
  Tensor bias_bf16 = make(Shape{2}, DType::BF16, random_nonzero(2, 1));
  GemmDesc lowp;
  lowp.math = GemmMath::LowPrecision;
  lowp.bias = &bias_bf16;
  EXPECT_THROW(be->gemm(lowp, a16, b16, c16), Error);
  Tensor pre_bf16 = make(Shape{4, 2}, DType::BF16, random_nonzero(8, 1));
  GemmDesc with_pre;
  with_pre.act = Activation::Relu;
  with_pre.pre_act = &pre_bf16;
  EXPECT_THROW(be->gemm(with_pre, a32, b32, c), Error);

  // Each of A, B and C past 2^31 - 1 elements is refused before anything is read (the views'
  // shapes are larger than their buffers, which are never touched).
  const int64_t big = int64_t{1} << 16, wide = int64_t{1} << 15;
  const std::array<std::array<Shape, 3>, 3> too_large = {{
      {Shape{big, wide}, Shape{wide, 1}, Shape{big, 1}},  // A: M x K
      {Shape{1, big}, Shape{big, wide}, Shape{1, wide}},  // B: K x N
      {Shape{big, 1}, Shape{1, wide}, Shape{big, wide}},  // C: M x N
  }};
  for (const auto& shapes : too_large) {
    Tensor va = a32, vb = b32, vc = c;
    va.shape = shapes[0], vb.shape = shapes[1], vc.shape = shapes[2];
    try {
      be->gemm(d, va, vb, vc);
      ADD_FAILURE() << "accepted A " << va.shape.str() << ", B " << vb.shape.str();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("exceed the 32-bit BLAS interface"), std::string::npos)
          << e.what();
    }
  }
}

// The backward epilogue is defined as gemm() followed by bias_act_backward() on its result; the
// CPU reference must reproduce that bit for bit (the models rely on it to keep their CPU
// trajectories when they fuse), in every dtype, math mode and with batching.
TEST_F(CpuGemm, BackwardEpilogueEqualsGemmThenBiasActBackward) {
  struct Mode {
    DType in, out;
    GemmMath math;
  };
  const Mode modes[] = {{DType::F32, DType::F32, GemmMath::Strict},
                        {DType::F32, DType::F32, GemmMath::TF32},
                        {DType::F16, DType::F16, GemmMath::LowPrecision},
                        {DType::BF16, DType::BF16, GemmMath::LowPrecision},
                        {DType::F16, DType::F32, GemmMath::LowPrecision}};
  const Case cases[] = {{0, 9, 13, 6, false, false},
                        {0, 16, 24, 32, false, true},
                        {0, 7, 5, 11, true, false},
                        {2, 5, 8, 7, true, true}};
  for (const Mode& mo : modes) {
    for (const Case& c : cases) {
      for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
        for (bool with_dbias : {false, true}) {
          if (act == Activation::None && !with_dbias) continue;  // that is a plain GEMM
          SCOPED_TRACE(::testing::Message()
                       << "in " << dtype_name(mo.in) << " out " << dtype_name(mo.out) << " math "
                       << static_cast<int>(mo.math) << " batch " << c.batch << " m " << c.m << " n "
                       << c.n << " k " << c.k << " act " << activation_name(act) << " dbias "
                       << with_dbias);
          const int64_t nb = std::max<int64_t>(c.batch, 1);
          Tensor a = make(c.trans_a ? shape(c.batch, c.k, c.m) : shape(c.batch, c.m, c.k), mo.in,
                          random_nonzero(nb * c.m * c.k, 31));
          Tensor b = make(c.trans_b ? shape(c.batch, c.n, c.k) : shape(c.batch, c.k, c.n), mo.in,
                          random_nonzero(nb * c.k * c.n, 32));
          // Pre-activations of both signs and around GELU's curved region.
          Tensor pre =
              make(shape(c.batch, c.m, c.n), mo.out, random_nonzero(nb * c.m * c.n, 33, 3.0f));
          Tensor fused = poisoned(pre.shape, mo.out);
          Tensor plain = poisoned(pre.shape, mo.out);
          Tensor db_fused = poisoned(Shape{c.n}, DType::F32);
          Tensor db_plain = poisoned(Shape{c.n}, DType::F32);

          GemmDesc d;
          d.trans_a = c.trans_a;
          d.trans_b = c.trans_b;
          d.alpha = 0.75f;
          d.math = mo.math;
          be->gemm(d, a, b, plain);
          be->bias_act_backward(act, plain, act == Activation::None ? plain : pre, plain,
                                with_dbias ? &db_plain : nullptr);

          d.dact = act;
          d.dact_input = act == Activation::None ? nullptr : &pre;
          d.dbias = with_dbias ? &db_fused : nullptr;
          be->gemm(d, a, b, fused);

          const auto got = to_host_f32(*be, fused), want = to_host_f32(*be, plain);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
          if (with_dbias) {
            const auto gb = to_host_f32(*be, db_fused), wb = to_host_f32(*be, db_plain);
            for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(gb[j], wb[j]) << "dbias " << j;
          }
          if (act == Activation::Relu) {
            // And the derivative really is applied: elements with pre <= 0 are exactly zero.
            const auto pv = to_host_f32(*be, pre);
            for (size_t i = 0; i < got.size(); ++i)
              if (pv[i] <= 0) ASSERT_EQ(got[i], 0.0f) << "element " << i;
          }
        }
      }
    }
  }
}

// The bias gradient against a double reference of its definition: column sums over all rows
// (and batches) of (op(A) op(B)) * gelu'(pre).
TEST_F(CpuGemm, BackwardEpilogueBiasGradientIsColumnSums) {
  const int64_t m = 37, n = 6, k = 4;
  auto av = random_nonzero(m * k, 41), bv = random_nonzero(k * n, 42),
       pv = random_nonzero(m * n, 43, 2.0f);
  Tensor a = make(Shape{m, k}, DType::F32, av);
  Tensor b = make(Shape{k, n}, DType::F32, bv);
  Tensor pre = make(Shape{m, n}, DType::F32, pv);
  Tensor c = poisoned(Shape{m, n}, DType::F32);
  Tensor db = poisoned(Shape{n}, DType::F32);
  GemmDesc d;
  d.dact = Activation::Gelu;
  d.dact_input = &pre;
  d.dbias = &db;
  be->gemm(d, a, b, c);
  std::vector<double> sums(n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += static_cast<double>(av[i * k + l]) * bv[l * n + j];
      // gelu'(x) by central differences of the double GELU.
      const double x = pv[i * n + j], h = 1e-5;
      const double dg = (test::activation_ref(Activation::Gelu, x + h) -
                         test::activation_ref(Activation::Gelu, x - h)) /
                        (2 * h);
      sums[j] += s * dg;
    }
  }
  auto r = compare(to_host_f32(*be, db), to_float(sums), 1e-4);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(CpuGemm, BackwardEpilogueRejectsBadArguments) {
  Tensor a = make(Shape{4, 5}, DType::F32, random_nonzero(20, 1));
  Tensor b = make(Shape{5, 3}, DType::F32, random_nonzero(15, 2));
  Tensor c = make(Shape{4, 3}, DType::F32, random_nonzero(12, 3));
  Tensor pre = make(Shape{4, 3}, DType::F32, random_nonzero(12, 4));
  Tensor pre_t = make(Shape{3, 4}, DType::F32, random_nonzero(12, 4));
  Tensor pre16 = make(Shape{4, 3}, DType::F16, random_nonzero(12, 4));
  Tensor db = make(Shape{3}, DType::F32, random_nonzero(3, 5));
  Tensor db_short = make(Shape{2}, DType::F32, random_nonzero(2, 5));
  Tensor db16 = make(Shape{3}, DType::F16, random_nonzero(3, 5));
  Tensor bias = make(Shape{3}, DType::F32, random_nonzero(3, 6));
  auto expect_throw = [&](GemmDesc d, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_THROW(be->gemm(d, a, b, c), Error);
  };
  GemmDesc ok;
  ok.dact = Activation::Gelu;
  ok.dact_input = &pre;
  ok.dbias = &db;
  be->gemm(ok, a, b, c);  // the valid call works

  GemmDesc d = ok;
  d.dact_input = nullptr;
  expect_throw(d, "dact without dact_input");
  d = ok;
  d.dact = Activation::None;
  expect_throw(d, "dact_input without dact");
  d = ok;
  d.dact_input = &pre_t;
  expect_throw(d, "dact_input shape");
  d = ok;
  d.dact_input = &pre16;
  expect_throw(d, "dact_input dtype");
  d = ok;
  d.dbias = &db_short;
  expect_throw(d, "dbias length");
  d = ok;
  d.dbias = &db16;
  expect_throw(d, "dbias not fp32");
  d = ok;
  d.beta = 1.0f;
  expect_throw(d, "beta != 0");
  d = ok;
  d.bias = &bias;
  expect_throw(d, "with a forward bias");
  d = ok;
  d.act = Activation::Relu;
  expect_throw(d, "with a forward activation");
  d = ok;
  d.pre_act = &pre;
  expect_throw(d, "with pre_act");
  d = GemmDesc{};
  d.dbias = &db;
  be->gemm(d, a, b, c);  // the bias gradient alone is valid
}

// L(A, B) = sum(G o op(A) op(B)); the backward GEMMs (with the transposes a layer uses) must give
// dL/dA and dL/dB of the stored operands, checked by central differences in double.
TEST_F(CpuGemm, BackwardGemmsMatchFiniteDifferences) {
  const int64_t m = 6, n = 5, k = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "trans_a " << ta << " trans_b " << tb);
      auto av = random_nonzero(m * k, 21), bv = random_nonzero(k * n, 22),
           gv = random_nonzero(m * n, 23);
      Tensor a = make(ta ? Shape{k, m} : Shape{m, k}, DType::F32, av);
      Tensor b = make(tb ? Shape{n, k} : Shape{k, n}, DType::F32, bv);
      Tensor g = make(Shape{m, n}, DType::F32, gv);
      Tensor da = alloc.alloc(a.shape, DType::F32, MemCategory::Gradients);
      Tensor db = alloc.alloc(b.shape, DType::F32, MemCategory::Gradients);
      test::poison(*be, da);
      test::poison(*be, db);
      GemmDesc d;
      if (!ta && !tb) {                                       // C = A B
        d.trans_b = true, be->gemm(d, g, b, da);              // dA = G B^T
        d = {}, d.trans_a = true, be->gemm(d, a, g, db);      // dB = A^T G
      } else if (!ta && tb) {                                 // C = A Bs^T
        be->gemm(d, g, b, da);                                // dA = G Bs
        d.trans_a = true, be->gemm(d, g, a, db);              // dBs = G^T A
      } else if (ta && !tb) {                                 // C = As^T B
        d.trans_b = true, be->gemm(d, b, g, da);              // dAs = B G^T
        d = {}, be->gemm(d, a, g, db);                        // dB = As G
      } else {                                                // C = As^T Bs^T
        d.trans_a = d.trans_b = true, be->gemm(d, b, g, da);  // dAs = Bs^T G^T
        be->gemm(d, g, a, db);                                // dBs = G^T As^T
      }
      auto loss = [&](const std::vector<float>& x, const std::vector<float>& y, int which,
                      size_t idx, double h) {
        // Perturbs element idx of A (which 0) or B (which 1) by h, in double.
        std::vector<double> xa(x.begin(), x.end()), yb(y.begin(), y.end());
        (which == 0 ? xa : yb)[idx] += h;
        double s = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double cij = 0;
            for (int64_t l = 0; l < k; ++l)
              cij += (ta ? xa[l * m + i] : xa[i * k + l]) * (tb ? yb[j * k + l] : yb[l * n + j]);
            s += gv[i * n + j] * cij;
          }
        return s;
      };
      const double h = 1e-3;
      std::vector<float> fd_a(av.size()), fd_b(bv.size());
      for (size_t i = 0; i < av.size(); ++i)
        fd_a[i] = static_cast<float>((loss(av, bv, 0, i, h) - loss(av, bv, 0, i, -h)) / (2 * h));
      for (size_t i = 0; i < bv.size(); ++i)
        fd_b[i] = static_cast<float>((loss(av, bv, 1, i, h) - loss(av, bv, 1, i, -h)) / (2 * h));
      auto ra = compare(to_host_f32(*be, da), fd_a, 1e-5);
      auto rb = compare(to_host_f32(*be, db), fd_b, 1e-5);
      EXPECT_TRUE(ra.ok) << "dA: " << ra.message;
      EXPECT_TRUE(rb.ok) << "dB: " << rb.message;
    }
  }
}

TEST_F(CpuGemm, ScratchIsReusedAcrossSizes) {
  // A large 16-bit GEMM then a small one: the scratch must not leak stale values into results.
  check({0, 64, 48, 80, false, true}, DType::BF16, DType::BF16, GemmMath::LowPrecision, 1.0f, 0.5f);
  check({0, 3, 2, 4, true, false}, DType::BF16, DType::BF16, GemmMath::LowPrecision, 1.0f, 0.5f);
  check({0, 3, 2, 4, true, false}, DType::F32, DType::F32, GemmMath::TF32);
}

}  // namespace
}  // namespace mpbench
