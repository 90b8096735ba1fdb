// The activations (ReLU and GELU-tanh, forward and backward) as vectorised loops on all threads:
// the forward activation of a GEMM that keeps its pre-activation or applies ReLU, and
// bias_act_backward, which the GEMM's backward epilogue is, with the bias gradient's column sums
// in the same pass (oneDNN's eltwise primitive and a second pass for the sums took 1.3x the time
// for GELU, 1.5-2.1x for ReLU: bench_ops' native/bias_act_backward, paired, on a Zen 4). tanh is
// vector_math.h's; dx (ReLU's a select, GELU's dy * act'(pre)) and dbias are the reference's
// formulas (dbias summed from dx as stored, rounded to its dtype, in fp32 per thread). The
// elementwise add is oneDNN's binary primitive.
//
// ReLU never runs as oneDNN's eltwise or post-op: in oneDNN 2.6 (brgemm and jit kernels, AVX2 and
// AVX-512) its relu turns NaN into 0, and its backward's dd * alpha below 0 is inf * 0 = NaN.
#include <fmt/format.h>

#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"
#include "kernels/onednn/vector_math.h"

namespace mpbench::onednn {
namespace {

// A tensor as one flat run of elements: the binary primitive does not care for its shape.
dnnl::memory::desc flat_md(const Tensor& t) {
  return {{t.numel()}, data_type(t.dtype), dnnl::memory::format_tag::a};
}

template <Activation A>
inline float forward(float x) {
  if constexpr (A == Activation::Gelu)
    return gelu_from_tanh(x, tanh_approx(gelu_arg(x)));
  else
    return cpu::detail::act_forward<A>(x);
}
template <Activation A>
inline float backward(float dy, float x) {
  if constexpr (A == Activation::Gelu)
    return dy * gelu_derivative_from_tanh(x, tanh_approx(gelu_derivative_arg(x)));
  else
    return cpu::detail::act_backward<A>(dy, x);
}

// y = act(x) over n elements; y may alias x.
template <class E, Activation A>
MPBENCH_VECTOR_CLONES void forward_block(const typename E::T* x, typename E::T* y, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] = E::store(forward<A>(E::load(x[j])));
}

// dx = act_backward(dy, pre) over `rows` rows of n, dx may alias dy; with kSums each row's dx as
// stored (rounded to its dtype) added to sums.
template <class E, Activation A, bool kSums>
MPBENCH_VECTOR_CLONES void backward_rows(const typename E::T* dy, const typename E::T* pre,
                                         typename E::T* dx, int64_t rows, int64_t n, float* sums) {
  for (int64_t i = 0; i < rows * n; i += n) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const auto g = E::store(backward<A>(E::load(dy[i + j]), E::load(pre[i + j])));
      if (kSums) sums[j] += E::load(g);
      dx[i + j] = g;
    }
  }
}

}  // namespace

void OnednnBackend::activation_forward(Activation act, const Tensor& pre, Tensor& y) {
  if (act == Activation::None) {
    if (pre.data != y.data) copy_impl(pre, y);
    return;
  }
  const bool native = one_native_dtype({&pre, &y}, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    cpu::detail::dispatch_act(act, [&](auto a) {
      const T* x = pre.ptr<T>();
      T* out = y.ptr<T>();
      parallel_ranges(pre.numel(), kGrain, [&](int64_t, int64_t begin, int64_t n) {
        forward_block<E, decltype(a)::value>(x + begin, out + begin, n);
      });
    });
  });
  if (!native)
    throw_runtime(std::string("internal: activation_forward on ") + dtype_name(pre.dtype));
}

// out = a + b elementwise in fp32, rounded once to out's dtype; out may alias a or b.
void OnednnBackend::add_impl(const Tensor& a, const Tensor& b, Tensor& out) {
  if (!native_dtype(a.dtype) || !native_dtype(b.dtype) || !native_dtype(out.dtype)) {
    fall_back("add");
    CpuBackend::add_impl(a, b, out);
    return;
  }
  // The primitive computes in place over its first source only: with out aliasing b, the
  // operands swap (the sum is the same).
  const bool swap = out.data == b.data && out.data != a.data;
  const Tensor& s0 = swap ? b : a;
  const Tensor& s1 = swap ? a : b;
  const dnnl::memory::desc md0 = flat_md(s0), md1 = flat_md(s1), mdo = flat_md(out);
  Cached& p =
      primitive(fmt::format("binary_add {} {} {} {}", dtype_name(s0.dtype), dtype_name(s1.dtype),
                            dtype_name(out.dtype), out.numel()),
                [&] {
                  return dnnl::binary::primitive_desc({dnnl::algorithm::binary_add, md0, md1, mdo},
                                                      user_scratchpad(), engine_);
                });
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC_0, dnnl::memory(md0, engine_, s0.data)},
      {DNNL_ARG_SRC_1, dnnl::memory(md1, engine_, s1.data)},
      {DNNL_ARG_DST, dnnl::memory(mdo, engine_, out.data)}};
  execute(p, args);
}

void OnednnBackend::bias_act_backward_impl(Activation act, const Tensor& dy, const Tensor& pre_act,
                                           Tensor& dx, Tensor* dbias) {
  const int64_t rows = dy.rows(), n = dy.cols(), grain = row_grain(n);
  std::vector<float> partial(dbias ? static_cast<size_t>(range_count(rows, grain) * n) : 0, 0.0f);
  const bool native = one_native_dtype({&dy, &pre_act, &dx}, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    cpu::detail::dispatch_act(act, [&](auto a) {
      constexpr Activation A = decltype(a)::value;
      const T *g = dy.ptr<T>(), *p = pre_act.ptr<T>();
      T* out = dx.ptr<T>();
      parallel_ranges(rows, grain, [&](int64_t part, int64_t begin, int64_t count) {
        const int64_t at = begin * n;
        if (dbias)
          backward_rows<E, A, true>(g + at, p + at, out + at, count, n, partial.data() + part * n);
        else
          backward_rows<E, A, false>(g + at, p + at, out + at, count, n, nullptr);
      });
    });
  });
  if (!native) {  // fp16: the reference's loop
    fall_back("bias_act_backward");
    CpuBackend::bias_act_backward_impl(act, dy, pre_act, dx, dbias);
    return;
  }
  if (!dbias) return;
  const int64_t parts = static_cast<int64_t>(partial.size()) / std::max<int64_t>(n, 1);
  float* db = dbias->ptr<float>();
  for (int64_t j = 0; j < n; ++j) {
    float s = 0;
    for (int64_t q = 0; q < parts; ++q) s += partial[q * n + j];
    db[j] = s;
  }
}

}  // namespace mpbench::onednn
