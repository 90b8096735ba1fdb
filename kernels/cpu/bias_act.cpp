// Backward of the GEMM epilogue y = act(x + bias), CPU reference. The forward half lives in the
// GEMM epilogue (gemm.cpp); both use the activations of elementwise.h.
//
// dy, pre_act, dx: (rows, N), one dtype; dbias: (N) fp32. dx may alias dy.
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {

using detail::dispatch_act;
using detail::dispatch_float;

void CpuBackend::bias_act_backward_impl(Activation act, const Tensor& dy, const Tensor& pre_act,
                                        Tensor& dx, Tensor* dbias) {
  const int64_t rows = dy.rows(), n = dy.cols();
  std::vector<double> col_sums;
  if (dbias) col_sums.assign(static_cast<size_t>(n), 0.0);
  dispatch_float(dy.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    dispatch_act(act, [&](auto a) {
      detail::bias_act_backward_rows<E, decltype(a)::value>(
          dy.ptr<T>(), pre_act.ptr<T>(), dx.ptr<T>(), rows, n, dbias ? col_sums.data() : nullptr);
    });
  });
  if (dbias) {
    float* out = dbias->ptr<float>();
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(col_sums[j]);
  }
}

}  // namespace mpbench::cpu
