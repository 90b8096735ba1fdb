// C (M, N) = act(alpha * op(A) op(B) + beta * C + bias) through cuBLASLt.
// a: (M, K) or (K, M) with trans_a, optionally (batch, ., .); b: (K, N) or (N, K) with trans_b;
// c: (M, N) or (batch, M, N). Row-major is handled by computing C^T = op(B)^T op(A)^T in
// cuBLASLt's column-major terms (see build_plan in device_context.cu).
//
// In those terms cuBLASLt's D is (N, M) column-major with ld N: its rows are our columns, so the
// bias (broadcast over D's columns) and the bias gradient (reduced over D's columns) both run
// over our N, and an epilogue aux matrix (pre-activation) has ld N like C.
//
// Backward epilogue (GemmDesc::dact, dbias): GELU goes through DGELU / DGELU_BGRAD when C is fp32
// and cuBLASLt offers an algorithm (nothing to round between the product and the derivative).
// Everything else (a 16-bit C, which autocast rounds before the derivative and whose bias
// gradient sums the rounded dx; ReLU, whose DRELU wants a bitmask we do not keep and whose select
// must give 0, not inf * 0, for an inf gradient; strict fp32, whose GELU epilogues may use a fast
// tanh; batches; no algorithm) runs the plain GEMM and then bias_act_backward in place. The
// forward epilogue never applies ReLU either (below).
//
// FP8 operands (amp_fp8) take the same path with their scale_inv pointers set on the plan and
// per-operand types (E4M3 x E5M2 in the backward GEMMs); cuBLASLt requires the "TN" layout that
// Backend::gemm's checks enforce, and there is no naive fallback for them.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

// The one table from GemmMath to the cuBLASLt compute type. 16-bit operands always accumulate
// in plain fp32 (there is no TF32 or "pedantic" question for them); fp32 operands in strict mode
// must never touch TF32 tensor cores or reduced-precision split-K reductions.
cublasComputeType_t compute_type_for(GemmMath math, DType operand) {
  static const cublasComputeType_t table[3][2] = {
      // fp32 operands               16-bit operands
      {CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_COMPUTE_32F},   // Strict
      {CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F},  // TF32
      {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F},            // LowPrecision
  };
  return table[static_cast<int>(math)][operand == DType::F32 ? 0 : 1];
}

uint32_t alignment_of(const void* p) {
  if (!p) return 0;
  uintptr_t u = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && (u & (2 * a - 1)) == 0) a *= 2;
  return a;
}

// act: None or GELU (ReLU never rides on cuBLASLt: see gemm()).
cublasLtEpilogue_t epilogue_for(bool bias, Activation act) {
  if (act == Activation::Gelu) return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// TF32 input rounding exactly as the CPU reference does it (kernels/dtype.h round_to_tf32).
__device__ __forceinline__ float round_tf32(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return f;
  u += 0xfffu + ((u >> 13) & 1u);
  return __uint_as_float(u & 0xffffe000u);
}

// Fallback when cuBLASLt offers no algorithm (e.g. an odd alignment combination): one thread per
// output element, fp32 accumulation in k order. Correct, not fast.
template <typename TI, typename TO>
__global__ void naive_gemm_kernel(const TI* a, const TI* b, TO* c, int64_t m, int64_t n, int64_t k,
                                  int64_t batch, int64_t stride_a, int64_t stride_b,
                                  int64_t stride_c, bool trans_a, bool trans_b, float alpha,
                                  float beta, bool tf32) {
  int64_t total = batch * m * n;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    int64_t bt = idx / (m * n);
    int64_t r = idx - bt * m * n;
    int64_t i = r / n, j = r - (r / n) * n;
    const TI* ab = a + bt * stride_a;
    const TI* bb = b + bt * stride_b;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      float av = to_f32(ab[trans_a ? p * m + i : i * k + p]);
      float bv = to_f32(bb[trans_b ? j * k + p : p * n + j]);
      if (tf32) {
        av = round_tf32(av);
        bv = round_tf32(bv);
      }
      acc = fmaf(av, bv, acc);
    }
    float out = alpha * acc;
    TO* cp = c + bt * stride_c + i * n + j;
    if (beta != 0.0f) out += beta * to_f32(*cp);
    *cp = from_f32<TO>(out);
  }
}

}  // namespace

void gemm(DeviceContext& ctx, const GemmDesc& d, const GemmGeom& g, const Tensor& a,
          const Tensor& b, Tensor& c) {
  const int64_t m = g.m, n = g.n, k = g.k, batch = g.batch;
  const bool backward = d.dact != Activation::None || d.dact_input || d.dbias;
  GemmKey key;
  key.m = m;
  key.n = n;
  key.k = k;
  key.batch = batch;
  key.trans_a = d.trans_a;
  key.trans_b = d.trans_b;
  if (batch > 1) {
    key.stride_a = m * k;
    key.stride_b = k * n;
    key.stride_c = m * n;
  }
  key.a_type = cuda_type(a.dtype);
  key.b_type = cuda_type(b.dtype);
  key.c_type = cuda_type(c.dtype);
  key.compute_type = compute_type_for(d.math, a.dtype);
  key.align_a = alignment_of(a.data);
  key.align_b = alignment_of(b.data);
  key.align_c = alignment_of(c.data);

  // Whether cuBLASLt's GELU epilogues (with or without aux) may serve this GEMM. They may use a
  // fast tanh, which strict fp32 must not. They round once, from the fp32 accumulator, where
  // autocast rounds the GEMM's output to its 16-bit dtype first and then GELU's (forward) or the
  // derivative's product (backward), as the reference does: so an fp32 C only, where there is
  // nothing to round; a 16-bit C takes the matmul and then bias_act_forward / bias_act_backward,
  // as ReLU always does.
  const bool gelu_fusable = d.math != GemmMath::Strict && c.dtype == DType::F32;
  // ... and those with an aux matrix (ld N, so N must be a multiple of 8); batches would need
  // batch strides for the bias (gradient) too, and no layer has them.
  const bool gelu_aux_ok = gelu_fusable && batch == 1 && n % 8 == 0;
  // FP8 operands' scale_inv pointers (device scalars), set on the plan for every call.
  const void* a_scale = d.a_scale_inv ? d.a_scale_inv->data : nullptr;
  const void* b_scale = d.b_scale_inv ? d.b_scale_inv->data : nullptr;
  auto run_plan = [&](const GemmPlan& p, const void* bias_ptr, const void* aux_ptr, void* out) {
    if (a_scale) set_fp8_scales(p.desc, a_scale, b_scale);
    if (bias_ptr) {
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &bias_ptr, sizeof(bias_ptr)));
    }
    if (aux_ptr) {
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &aux_ptr, sizeof(aux_ptr)));
    }
    const float alpha = d.alpha, beta = d.beta;
    // cuBLASLt's A is our B and vice versa (column-major transpose trick).
    return cublasLtMatmul(ctx.lt(), p.desc, &alpha, b.data, p.layout_a, a.data, p.layout_b, &beta,
                          out, p.layout_c, out, p.layout_c, &p.algo, ctx.workspace(),
                          ctx.workspace_size(), ctx.stream());
  };
  // A fused plan (bias, activation, GELU aux and DGELU epilogues) that the heuristic offered can
  // still be refused when it runs, e.g. for an fp32 bias gradient beside 16-bit C. Nothing has been
  // launched then, so the plan is marked unusable and the unfused path runs instead, now and for
  // every later call with this key. Any other status is an error.
  auto run_fused = [&](GemmPlan& p, const void* bias_ptr, const void* aux_ptr, void* out) {
    const cublasStatus_t st = run_plan(p, bias_ptr, aux_ptr, out);
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE)
      throw_cublas("cublasLtMatmul (fused epilogue)", st, __FILE__, __LINE__);
    p.ok = false;
    p.why_not = fmt::format("cublasLtMatmul returned {}", cublasLtGetStatusName(st));
    return false;
  };

  if (backward) {
    if (d.dact == Activation::Gelu && gelu_aux_ok) {
      GemmKey fk = key;
      fk.epilogue = d.dbias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
      fk.bias_type = d.dbias ? CUDA_R_32F : -1;  // dbias is fp32 whatever C's dtype
      fk.align_bias = d.dbias ? alignment_of(d.dbias->data) : 0;
      fk.align_aux = alignment_of(d.dact_input->data);
      const void* db = d.dbias ? d.dbias->data : nullptr;
      GemmPlan& p = ctx.gemm_plan(fk, db, d.dact_input->data);
      if (p.ok && run_fused(p, db, d.dact_input->data, c.data)) return;
    }
    GemmDesc plain = d;
    plain.dact = Activation::None;
    plain.dact_input = nullptr;
    plain.dbias = nullptr;
    gemm(ctx, plain, g, a, b, c);
    bias_act_backward(ctx, d.dact, c, d.dact_input ? *d.dact_input : c, c, d.dbias);
    return;
  }

  // GELU with its pre-activation: GELU_AUX[_BIAS] writes both in the matmul.
  if (d.act == Activation::Gelu && d.pre_act && gelu_aux_ok &&
      (!d.bias || alignment_of(d.bias->data) >= 16)) {
    GemmKey fk = key;
    fk.epilogue = d.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    fk.bias_type = d.bias ? cuda_type(d.bias->dtype) : -1;
    fk.align_bias = d.bias ? alignment_of(d.bias->data) : 0;
    fk.align_aux = alignment_of(d.pre_act->data);
    const void* bias_ptr = d.bias ? d.bias->data : nullptr;
    GemmPlan& p = ctx.gemm_plan(fk, bias_ptr, d.pre_act->data, a_scale, b_scale);
    if (p.ok && run_fused(p, bias_ptr, d.pre_act->data, c.data)) return;
  }

  Tensor& target = d.pre_act ? *d.pre_act : c;  // where the matmul itself writes
  key.align_c = alignment_of(target.data);

  // What the cuBLASLt epilogue does; the rest is done by bias_act_forward afterwards. A bias
  // needs 16-byte alignment for the epilogue kernels (added afterwards, a 16-bit P is rounded
  // twice, the product and then the sum: only a direct call gives one, every layer's is aligned).
  // The pre-activation is needed for backward, but RELU_AUX stores a bitmask, so with pre_act the
  // matmul stops after the bias. GELU only where gelu_fusable (above). ReLU is always
  // bias_act_forward's (kernels/relu.h): the RELU epilogues are documented only as max(x, 0), which
  // says nothing of NaN (a max such as fmaxf's turns it into 0), and PyTorch's ReLU keeps it.
  bool epi_bias = d.bias != nullptr && alignment_of(d.bias->data) >= 16;
  Activation epi_act = d.act;
  // The activation follows the bias: when the bias is added afterwards, so is the activation.
  if (d.pre_act || (d.bias && !epi_bias) || d.act == Activation::Relu ||
      (d.act == Activation::Gelu && !gelu_fusable))
    epi_act = Activation::None;

  GemmPlan* plan = nullptr;
  bool done = false;
  key.epilogue = epilogue_for(epi_bias, epi_act);
  if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    key.bias_type = epi_bias ? cuda_type(d.bias->dtype) : -1;
    key.align_bias = epi_bias ? alignment_of(d.bias->data) : 0;
    const void* bias_ptr = epi_bias ? d.bias->data : nullptr;
    plan = &ctx.gemm_plan(key, bias_ptr, nullptr, a_scale, b_scale);
    done = plan->ok && run_fused(*plan, bias_ptr, nullptr, target.data);
  }
  if (!done) {  // the plain matmul; bias and activation follow in bias_act_forward
    epi_bias = false;
    epi_act = Activation::None;
    key.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    key.bias_type = -1;
    key.align_bias = 0;
    plan = &ctx.gemm_plan(key, nullptr, nullptr, a_scale, b_scale);
  }

  if (!done && plan->ok) {
    // A refusal here (the heuristic offered the algorithm) says which GEMM and what it was given:
    // the shape, dtypes and pointer alignments are what cuBLASLt's rules are about.
    const cublasStatus_t st = run_plan(*plan, nullptr, nullptr, target.data);
    if (st != CUBLAS_STATUS_SUCCESS) {
      const std::string what = fmt::format(
          "cublasLtMatmul of a {}x{}x{} {}/{}->{} GEMM (trans_a {}, trans_b {}, alignment of A {}, "
          "B {}, C {}{})",
          m, n, k, dtype_name(a.dtype), dtype_name(b.dtype), dtype_name(c.dtype), d.trans_a,
          d.trans_b, key.align_a, key.align_b, key.align_c,
          a_scale ? fmt::format(", of the scales {} and {}", alignment_of(a_scale),
                                alignment_of(b_scale))
                  : std::string());
      throw_cublas(what.c_str(), st, __FILE__, __LINE__);
    }
    done = true;
  }
  if (!done && a_scale) {  // the naive kernel has no FP8 path: a failed row says why
    throw_runtime(fmt::format("cuBLASLt offers no FP8 algorithm for a {}x{}x{} {}/{}->{} GEMM: {}",
                              m, n, k, dtype_name(a.dtype), dtype_name(b.dtype),
                              dtype_name(c.dtype), plan->why_not));
  }
  if (!done) {
    const float alpha = d.alpha, beta = d.beta;
    // Correct but one to two orders of magnitude slower than cuBLASLt: a benchmark that lands
    // here must say so, or its times would be read as cuBLASLt's.
    if (ctx.count_naive_gemm())
      ctx.warn(fmt::format(
          "cuBLASLt offers no algorithm for a {}x{}x{}{} {}->{} GEMM ({} math: {}); it runs on "
          "mpbench's naive kernel, far slower (said once per run)",
          m, n, k, batch > 1 ? fmt::format(" (batch {})", batch) : std::string(),
          dtype_name(a.dtype), dtype_name(c.dtype),
          d.math == GemmMath::Strict ? "strict fp32"
                                     : (d.math == GemmMath::TF32 ? "TF32" : "16-bit"),
          plan->why_not));
    const int64_t sa = m * k, sb = k * n;
    const bool tf32 = d.math == GemmMath::TF32 && a.dtype == DType::F32;
    const int grid = ctx.grid_for(batch * m * n, kThreads);
    dispatch_floats(std::array{a.dtype, c.dtype}, [&](auto in_tag, auto out_tag) {
      using TI = typename decltype(in_tag)::type;
      using TO = typename decltype(out_tag)::type;
      naive_gemm_kernel<TI, TO><<<grid, kThreads, 0, ctx.stream()>>>(
          a.ptr<const TI>(), b.ptr<const TI>(), target.ptr<TO>(), m, n, k, batch, sa, sb, m * n,
          d.trans_a, d.trans_b, alpha, beta, tf32);
      CUDA_LAUNCH_CHECK();
    });
  }

  const bool post_bias = d.bias != nullptr && !epi_bias;
  const bool post_act = d.act != Activation::None && epi_act == Activation::None;
  if (d.pre_act) {
    // target is pre_act: add the bias there if the matmul did not, then C = act(pre_act).
    bias_act_forward(ctx, d.act, *d.pre_act, post_bias ? d.bias : nullptr,
                     post_bias ? d.pre_act : nullptr, c);
  } else if (post_bias || post_act) {
    bias_act_forward(ctx, post_act ? d.act : Activation::None, c, post_bias ? d.bias : nullptr,
                     nullptr, c);
  }
}

}  // namespace mpbench::cuda
