// The activations on oneDNN's eltwise primitives (JIT-vectorised GELU-tanh and ReLU, forward and
// backward), the elementwise add on its binary primitive, and the bias gradient as column sums over
// row ranges on all threads: the forward activation of a GEMM that keeps its pre-activation, and
// bias_act_backward, which the GEMM's backward epilogue is. dx = dy * act'(pre) is computed from
// the rounded dy (as the reference computes it) and dbias sums the rounded dx (the reference sums
// it before rounding).
#include <fmt/format.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

namespace mpbench::onednn {
namespace {

dnnl::algorithm eltwise_algorithm(Activation act) {
  return act == Activation::Relu ? dnnl::algorithm::eltwise_relu
                                 : dnnl::algorithm::eltwise_gelu_tanh;
}

// A tensor as one flat run of elements: the eltwise primitives do not care for its shape.
dnnl::memory::desc flat_md(const Tensor& t) {
  return {{t.numel()}, data_type(t.dtype), dnnl::memory::format_tag::a};
}

// out[j] = sum over rows of x[i, j], in fp32: each range of rows into its own partial row, then
// the partials added in order.
void column_sums(const Tensor& x, float* out) {
  const int64_t rows = x.rows(), cols = x.cols();
  const int64_t grain = row_grain(cols);
  const int64_t parts = range_count(rows, grain);
  std::vector<float> partial(static_cast<size_t>(parts * cols), 0.0f);
  cpu::detail::dispatch_float(x.dtype, [&](auto e) {
    using E = decltype(e);
    const auto* px = x.ptr<typename E::T>();
    parallel_ranges(rows, grain, [&](int64_t part, int64_t begin, int64_t n) {
      float* acc = partial.data() + part * cols;
      for (int64_t i = begin; i < begin + n; ++i) {
        const auto* row = px + i * cols;
        for (int64_t j = 0; j < cols; ++j) acc[j] += E::load(row[j]);
      }
    });
  });
  for (int64_t j = 0; j < cols; ++j) {
    float s = 0;
    for (int64_t p = 0; p < parts; ++p) s += partial[p * cols + j];
    out[j] = s;
  }
}

}  // namespace

void OnednnBackend::activation_forward(Activation act, const Tensor& pre, Tensor& y) {
  if (act == Activation::None) {
    if (pre.data != y.data) copy_impl(pre, y);
    return;
  }
  const dnnl::memory::desc md = flat_md(pre);
  Cached& p = primitive(
      fmt::format("eltwise_fwd {} {} {}", activation_name(act), dtype_name(pre.dtype), pre.numel()),
      [&] {
        return dnnl::eltwise_forward::primitive_desc(
            {dnnl::prop_kind::forward_training, eltwise_algorithm(act), md, 0.0f, 0.0f},
            user_scratchpad(), engine_);
      });
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, dnnl::memory(md, engine_, pre.data)},
                                                {DNNL_ARG_DST, dnnl::memory(md, engine_, y.data)}};
  execute(p, args);
}

void OnednnBackend::binary_add(const Tensor& a, const Tensor& b, Tensor& out, bool relu) {
  // The primitive computes in place over its first source only: with out aliasing b, the
  // operands swap (the sum is the same).
  const bool swap = out.data == b.data && out.data != a.data;
  const Tensor& s0 = swap ? b : a;
  const Tensor& s1 = swap ? a : b;
  const dnnl::memory::desc md0 = flat_md(s0), md1 = flat_md(s1), mdo = flat_md(out);
  Cached& p = primitive(fmt::format("binary_add {} {} {} {} relu {}", dtype_name(s0.dtype),
                                    dtype_name(s1.dtype), dtype_name(out.dtype), out.numel(), relu),
                        [&] {
                          dnnl::primitive_attr attr = user_scratchpad();
                          dnnl::post_ops ops;
                          if (relu)
                            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
                          attr.set_post_ops(ops);
                          return dnnl::binary::primitive_desc(
                              {dnnl::algorithm::binary_add, md0, md1, mdo}, attr, engine_);
                        });
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC_0, dnnl::memory(md0, engine_, s0.data)},
      {DNNL_ARG_SRC_1, dnnl::memory(md1, engine_, s1.data)},
      {DNNL_ARG_DST, dnnl::memory(mdo, engine_, out.data)}};
  execute(p, args);
}

void OnednnBackend::add_impl(const Tensor& a, const Tensor& b, Tensor& out) {
  if (!native_dtype(a.dtype) || !native_dtype(b.dtype) || !native_dtype(out.dtype)) {
    ++fallback_calls_["add"];
    CpuBackend::add_impl(a, b, out);
    return;
  }
  binary_add(a, b, out, false);
}

void OnednnBackend::bias_act_backward_impl(Activation act, const Tensor& dy, const Tensor& pre_act,
                                           Tensor& dx, Tensor* dbias) {
  if (!native_dtype(dy.dtype)) {  // fp16 (or bf16 below AVX-512): the reference's loop
    ++fallback_calls_["bias_act_backward"];
    CpuBackend::bias_act_backward_impl(act, dy, pre_act, dx, dbias);
    return;
  }
  if (act != Activation::None) {
    const dnnl::algorithm alg = eltwise_algorithm(act);
    const dnnl::memory::desc md = flat_md(dy);
    Cached& p = primitive(
        fmt::format("eltwise_bwd {} {} {}", activation_name(act), dtype_name(dy.dtype), dy.numel()),
        [&] {
          const dnnl::eltwise_forward::primitive_desc hint(
              {dnnl::prop_kind::forward_training, alg, md, 0.0f, 0.0f}, engine_);
          return dnnl::eltwise_backward::primitive_desc({alg, md, md, 0.0f, 0.0f},
                                                        user_scratchpad(), engine_, hint);
        });
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, dnnl::memory(md, engine_, pre_act.data)},
        {DNNL_ARG_DIFF_DST, dnnl::memory(md, engine_, dy.data)},
        {DNNL_ARG_DIFF_SRC, dnnl::memory(md, engine_, dx.data)}};
    execute(p, args);
  } else if (dx.data != dy.data) {
    copy_impl(dy, dx);
  }
  if (dbias) column_sums(dx, dbias->ptr<float>());
}

}  // namespace mpbench::onednn
