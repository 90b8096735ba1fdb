// GEMM with the fused forward epilogue (bias, pre-activation, activation) or the backward one
// (activation derivative, bias gradient), CPU reference.
//
// a: (M, K), or (K, M) with trans_a; b: (K, N), or (N, K) with trans_b; c: (M, N);
// bias: (N) fp32 or c's dtype; pre_act: like c. Rank 3: (batch, ., .) for a, b and c.
//
// Every mode runs on OpenBLAS sgemm with fp32 accumulation; what differs is what sgemm sees:
//   Strict, fp32 operands     the buffers themselves (no copies, so the overhead is the call)
//   TF32                      the operands rounded to a 10-bit mantissa, like the tensor cores
//   16-bit operands           their exact fp32 values
//   FP8 operands              their exact fp32 values, alpha times both scale_invs
// and then the fp32 result, with the bias, is rounded to c's dtype; an activation applies to that
// rounded value and is rounded again, as under autocast, where a 16-bit Linear's output is the
// activation's input (for ReLU the two roundings are one). The backward epilogue reproduces
// gemm() + bias_act_backward() bit for bit, so it rounds the product to c's dtype before
// multiplying by the derivative (and rounds again): a model that fuses the pair trains on the CPU
// exactly as one that does not.
#include <cblas.h>

#include <climits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {
namespace {

using detail::dispatch_act;
using detail::dispatch_float;

// Operand of `n` elements starting at element `offset`, as fp32 in `out`, TF32-rounded if asked.
void load_operand(const Tensor& t, int64_t offset, int64_t n, bool tf32, float* out) {
  if (t.dtype == DType::F32) {
    const float* s = t.ptr<float>() + offset;
    if (tf32) {
      for (int64_t i = 0; i < n; ++i) out[i] = round_to_tf32(s[i]);
    } else {
      std::copy(s, s + n, out);
    }
    return;
  }
  // fp16, bf16 and fp8 values are exact in TF32, so there is nothing to round.
  decode_f32(t.slice(offset, Shape{n}), out, n);
}

// acc: (M, N) fp32 result of the GEMM (with alpha and beta applied). Adds the bias, rounds into
// pre_act, applies the activation to the rounded value and rounds into c (same dtype, offset
// elements into their buffers). acc may be c's own buffer when c is fp32.
template <class E, Activation A>
void epilogue(const float* acc, const float* bias, int64_t m, int64_t n, typename E::T* c,
              typename E::T* pre_act) {
  for (int64_t i = 0; i < m; ++i) {
    const float* row = acc + i * n;
    typename E::T* c_row = c + i * n;
    typename E::T* p_row = pre_act ? pre_act + i * n : nullptr;
    for (int64_t j = 0; j < n; ++j) {
      float x = row[j];
      if (bias) x += bias[j];
      const typename E::T pre = E::store(x);
      if (p_row) p_row[j] = pre;
      c_row[j] = A == Activation::None ? pre : E::store(detail::act_forward<A>(E::load(pre)));
    }
  }
}

}  // namespace

void gemm(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b, Tensor& c,
          std::vector<float>& scratch) {
  MPB_CHECK(g.m < INT_MAX && g.n < INT_MAX && g.k < INT_MAX && g.m * g.k < INT_MAX &&
                g.k * g.n < INT_MAX && g.m * g.n < INT_MAX,
            "gemm: A {}, B {} exceed the 32-bit BLAS interface", a.shape.str(), b.shape.str());
  const int64_t a_elems = g.m * g.k, b_elems = g.k * g.n, c_elems = g.m * g.n;
  const bool tf32 = d.math == GemmMath::TF32;
  const bool direct_ab = a.dtype == DType::F32 && !tf32;
  const bool direct_c = c.dtype == DType::F32;
  const bool backward = d.dact != Activation::None || d.dbias != nullptr;
  const bool has_epilogue =
      d.bias != nullptr || d.pre_act != nullptr || d.act != Activation::None || backward;
  std::vector<double> col_sums(d.dbias ? static_cast<size_t>(g.n) : 0, 0.0);

  // Scratch layout: [A | B] when the operands need converting, [C] when C is 16-bit, [bias].
  const int64_t ab_size = direct_ab ? 0 : a_elems + b_elems;
  const int64_t c_size = direct_c ? 0 : c_elems;
  const int64_t bias_size = d.bias ? g.n : 0;
  const size_t need = static_cast<size_t>(ab_size + c_size + bias_size);
  if (scratch.size() < need) scratch.resize(need);
  float* s_a = scratch.data();
  float* s_b = s_a + (direct_ab ? 0 : a_elems);
  float* s_c = scratch.data() + ab_size;
  float* s_bias = s_c + c_size;
  if (d.bias) decode_f32(*d.bias, s_bias, g.n);

  // FP8 operands are read back scaled: the scales fold into alpha, as cuBLASLt applies them.
  float alpha = d.alpha;
  if (d.a_scale_inv)
    alpha *= *d.a_scale_inv->ptr<const float>() * *d.b_scale_inv->ptr<const float>();
  const int lda = static_cast<int>(d.trans_a ? g.m : g.k);
  const int ldb = static_cast<int>(d.trans_b ? g.k : g.n);
  const int ldc = static_cast<int>(g.n);
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const float* pa;
    const float* pb;
    if (direct_ab) {
      pa = a.ptr<float>() + bi * a_elems;
      pb = b.ptr<float>() + bi * b_elems;
    } else {
      load_operand(a, bi * a_elems, a_elems, tf32, s_a);
      load_operand(b, bi * b_elems, b_elems, tf32, s_b);
      pa = s_a;
      pb = s_b;
    }
    float* pc;
    if (direct_c) {
      pc = c.ptr<float>() + bi * c_elems;
    } else {
      pc = s_c;
      if (d.beta != 0.0f) decode_f32(c.slice(bi * c_elems, Shape{c_elems}), s_c, c_elems);
    }
    cblas_sgemm(CblasRowMajor, d.trans_a ? CblasTrans : CblasNoTrans,
                d.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(g.m), static_cast<int>(g.n),
                static_cast<int>(g.k), alpha, pa, lda, pb, ldb, d.beta, pc, ldc);

    if (direct_c && !has_epilogue) continue;
    dispatch_float(c.dtype, [&](auto e) {
      using E = decltype(e);
      using T = typename E::T;
      T* c_out = c.ptr<T>() + bi * c_elems;
      if (backward) {
        // Rounding the product into C first makes C = gemm() followed by bias_act_backward(),
        // bit for bit.
        if (!direct_c)
          for (int64_t i = 0; i < c_elems; ++i) c_out[i] = E::store(pc[i]);
        const T* pre = d.dact_input ? d.dact_input->ptr<T>() + bi * c_elems : nullptr;
        dispatch_act(d.dact, [&](auto act) {
          detail::bias_act_backward_rows<E, decltype(act)::value>(
              c_out, pre, c_out, g.m, g.n, d.dbias ? col_sums.data() : nullptr);
        });
        return;
      }
      T* p_out = d.pre_act ? d.pre_act->ptr<T>() + bi * c_elems : nullptr;
      dispatch_act(d.act, [&](auto act) {
        epilogue<E, decltype(act)::value>(pc, d.bias ? s_bias : nullptr, g.m, g.n, c_out, p_out);
      });
    });
  }
  if (d.dbias) {
    float* out = d.dbias->ptr<float>();
    for (int64_t j = 0; j < g.n; ++j) out[j] = static_cast<float>(col_sums[j]);
  }
}

void CpuBackend::gemm_impl(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b,
                           Tensor& c) {
  cpu::gemm(d, g, a, b, c, scratch_);
}

}  // namespace mpbench::cpu
