// The one fused pass over all gradients before the optimizer step: detect inf/NaN, unscale by the
// loss scale, and take the L2 norm. CPU reference.
//
// grads: flat fp32; scale, found_inf, norm: (1) fp32.
#include <cmath>

#include "kernels/cpu/cpu_backend.h"

namespace mpbench::cpu {

void CpuBackend::unscale_check_norm_impl(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                                         Tensor& norm) {
  float* g = grads.ptr<float>();
  const int64_t n = grads.numel();
  // found_inf judges the gradients as the backward left them, before the unscale, as PyTorch's
  // _amp_foreach_non_finite_check_and_unscale_ does: a finite g whose g * inv overflows (a scale
  // below 1, or 0) is no overflow of the backward, and its step is taken.
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) finite = finite && std::isfinite(g[i]);
  if (scale) {
    // GradScaler multiplies by the fp32 reciprocal (computed in double) rather than dividing.
    const float inv = static_cast<float>(1.0 / static_cast<double>(scale->ptr<float>()[0]));
    for (int64_t i = 0; i < n; ++i) g[i] *= inv;
  }
  // The norm of the unscaled gradients. Squares of finite floats are finite in double and their
  // sum cannot overflow, so it is inf or NaN only where some unscaled gradient is. Four
  // accumulators keep the additions independent (and a little more accurate).
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) acc[k] += static_cast<double>(g[i + k]) * g[i + k];
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(g[i]) * g[i];
  const double sum_sq = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  found_inf.ptr<float>()[0] = finite ? 0.0f : 1.0f;
  norm.ptr<float>()[0] = static_cast<float>(std::sqrt(sum_sq));
}

}  // namespace mpbench::cpu
