// GEMM on oneDNN's matmul: f32, or bf16 operands with fp32 accumulation into a bf16 or fp32 C.
// The forward epilogue rides on the primitive (bias argument, GELU post-op on an fp32 C; alpha as
// the output scale, beta as a sum post-op); with pre_act the matmul writes the pre-activation and
// one pass applies the activation, as it does for ReLU (oneDNN's relu post-op turns NaN into 0:
// eltwise.cpp). The backward epilogue is the matmul followed by bias_act_backward, which is what it
// is defined to equal. B stays in the caller's layout, except where that layout is slow (below):
// then in the one the primitive picks, reordered each call. Big bf16 weight gradients (A^T B, fp32
// C) go to the inner product's backward-weights where the matmul has no AMX (weight_gradient_gemm).
#include <fmt/format.h>

#include "kernels/onednn/onednn_backend.h"

namespace mpbench::onednn {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

// A row-major (rows, cols) matrix, stored transposed if `trans`, `batch` of them back to back.
dnnl::memory::desc matrix(int64_t batch, int64_t rows, int64_t cols, bool trans, DType t) {
  const dims strides2 = trans ? dims{1, rows} : dims{cols, 1};
  if (batch == 1) return {{rows, cols}, data_type(t), strides2};
  return {{batch, rows, cols}, data_type(t), {rows * cols, strides2[0], strides2[1]}};
}

// A bf16 weight gradient big enough for the choice to matter: C (M, N) fp32 = A^T B with A and
// B both stored (K, *) (the batch's rows by features), overwritten, nothing else on it.
bool bf16_weight_gradient(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b,
                          const Tensor& c) {
  return g.batch == 1 && d.trans_a && !d.trans_b && d.alpha == 1.0f && d.beta == 0.0f && !d.bias &&
         d.act == Activation::None && !d.pre_act && d.dact == Activation::None && !d.dbias &&
         a.dtype == DType::BF16 && b.dtype == DType::BF16 && c.dtype == DType::F32 &&
         g.m * g.n >= (int64_t{1} << 20);
}

}  // namespace

// C = A^T B as oneDNN's inner-product backward-weights (diff_weights (M, N) = diff_dst^T src,
// diff_dst = A (K, M), src = B (K, N)), where brgemm's matmul has no AMX: there it copies the
// transposed A block by block, and on a Zen 4 (avx512_bf16) the inner product's kernel
// (x64:gemm:jit) ran the BERT layer's four big weight gradients 4-18% faster and GPT-2's
// 50257 x 768 head 30% faster (a throwaway oneDNN program, best of 15; equal below about 1M
// outputs, slower on the MLP's). Returns false where the matmul is kept.
bool OnednnBackend::weight_gradient_gemm(const GemmGeom& g, const Tensor& a, const Tensor& b,
                                         Tensor& c, const std::string& matmul_impl) {
  if (matmul_impl.find("amx") != std::string::npos) return false;
  const dnnl::memory::desc src({g.k, g.n}, dt::bf16, dims{g.n, 1}),
      diff_dst({g.k, g.m}, dt::bf16, dims{g.m, 1}), diff_w({g.m, g.n}, dt::f32, dims{g.n, 1});
  Cached& p = primitive(fmt::format("ip_bwd_weights {}x{}x{} bf16->fp32", g.m, g.n, g.k), [&] {
    const dnnl::memory::desc any_w({g.m, g.n}, dt::bf16, dnnl::memory::format_tag::any);
    const dnnl::inner_product_forward::primitive_desc hint(
        {dnnl::prop_kind::forward_training, src, any_w, diff_dst}, engine_);
    return dnnl::inner_product_backward_weights::primitive_desc({src, diff_w, diff_dst},
                                                                user_scratchpad(), engine_, hint);
  });
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(src, engine_, b.data)},
      {DNNL_ARG_DIFF_DST, dnnl::memory(diff_dst, engine_, a.data)},
      {DNNL_ARG_DIFF_WEIGHTS, dnnl::memory(diff_w, engine_, c.data)}};
  execute(p, args);
  return true;
}

void OnednnBackend::gemm_impl(const GemmDesc& d, const GemmGeom& g, const Tensor& a,
                              const Tensor& b, Tensor& c) {
  // No oneDNN CPU path for fp16, fp8 or TF32 (nor bf16 below AVX-512): the reference's emulation
  // (the modes themselves are unsupported rows here; only a direct call gets this far).
  const bool native = native_dtype(a.dtype) && native_dtype(c.dtype) &&
                      !(a.dtype == DType::F32 && d.math == GemmMath::TF32) &&
                      (!d.bias || native_dtype(d.bias->dtype));
  if (!native) {
    fall_back("gemm");
    CpuBackend::gemm_impl(d, g, a, b, c);
    return;
  }
  const bool backward = d.dact != Activation::None || d.dbias != nullptr;
  // With pre_act the primitive writes the pre-activation, and the activation is a pass of its own;
  // so is ReLU, on C after its rounding (which commutes with ReLU), and GELU on a 16-bit C: it
  // applies to the rounded GEMM output, as under autocast, where the post-op would see the fp32.
  const Activation fused_act =
      d.pre_act || d.act == Activation::Relu || c.dtype != DType::F32 ? Activation::None : d.act;
  Tensor& out = d.pre_act ? *d.pre_act : c;
  const bool with_bias = d.bias && !backward;
  // oneDNN applies the output scale (alpha) to the bias argument too: with alpha, the bias is a
  // binary add after the scale instead, so that C = act(alpha A B + bias).
  const bool bias_post_op = with_bias && d.alpha != 1.0f;
  // (N) broadcast over the rows (and the batch).
  auto bias_md = [&] {
    const dt t = data_type(d.bias->dtype);
    return g.batch == 1 ? dnnl::memory::desc({1, g.n}, t, dims{g.n, 1})
                        : dnnl::memory::desc({1, 1, g.n}, t, dims{g.n, g.n, 1});
  };
  const std::string key = fmt::format(
      "matmul {}x{}x{}x{} {}{} {}->{} alpha {} beta {} bias {} act {}", g.batch, g.m, g.n, g.k,
      d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', dtype_name(a.dtype), dtype_name(c.dtype),
      d.alpha, d.beta, with_bias ? dtype_name(d.bias->dtype) : "-", activation_name(fused_act));
  // fp32 B stored row-major with rows a multiple of 4 KiB apart: on the Intel Xeon we measured
  // (AMX, 48 KiB 12-way L1) brgemm's reads of such a B fall into a few cache sets, and
  // 1024x768x3072 took 30 ms instead of 13. There the weights go to the layout the primitive
  // picks ("any": BA16a64b), reordered each call (~1 ms of the 13); other GEMMs keep the plain
  // layout (the reorder cost more than it gave on the MLP's: 1.33 -> 1.51 ms a step).
  const bool any_weights =
      g.batch == 1 && b.dtype == DType::F32 && !d.trans_b && (g.n * 4) % 4096 == 0;
  const auto plain_wei = matrix(g.batch, g.k, g.n, d.trans_b, b.dtype);
  Cached& p = primitive(key, [&] {
    const auto src = matrix(g.batch, g.m, g.k, d.trans_a, a.dtype);
    const auto wei = any_weights ? dnnl::memory::desc({g.k, g.n}, data_type(b.dtype),
                                                      dnnl::memory::format_tag::any)
                                 : plain_wei;
    const auto dst = matrix(g.batch, g.m, g.n, false, c.dtype);
    dnnl::primitive_attr attr = user_scratchpad();
    if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
    dnnl::post_ops ops;
    if (d.beta != 0.0f) ops.append_sum(d.beta);
    if (bias_post_op) ops.append_binary(dnnl::algorithm::binary_add, bias_md());
    if (fused_act == Activation::Gelu)
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
    attr.set_post_ops(ops);
    if (with_bias && !bias_post_op)
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias_md(), dst), attr,
                                          engine_);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, engine_);
  });
  if (bf16_weight_gradient(d, g, a, b, c) && weight_gradient_gemm(g, a, b, c, p.impl)) return;
  const ChosenWeights weights = chosen_weights(p, DNNL_ARG_WEIGHTS, plain_wei, b.data, false);
  if (weights.reordered) reorder_weights(p, weights, key);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(matrix(g.batch, g.m, g.k, d.trans_a, a.dtype), engine_, a.data)},
      {DNNL_ARG_WEIGHTS, weights.chosen},
      {DNNL_ARG_DST, dnnl::memory(matrix(g.batch, g.m, g.n, false, c.dtype), engine_, out.data)}};
  if (with_bias) {
    const int arg =
        bias_post_op ? DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1 : DNNL_ARG_BIAS;
    args[arg] = dnnl::memory(bias_md(), engine_, d.bias->data);
  }
  execute(p, args);
  if (backward) {
    bias_act_backward_impl(d.dact, c, d.dact_input ? *d.dact_input : c, c, d.dbias);
  } else if (d.pre_act || fused_act != d.act) {
    activation_forward(d.act, out, c);
  }
}

}  // namespace mpbench::onednn
