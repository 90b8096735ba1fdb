// The ops of amp_fp8 on the CPU: the scaled cast with its amax, and the delayed-scaling update,
// both exact (kernels/fp8.h).
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {

// In fp32: x * scale rounds once, then the encode rounds once more, as the GPU's cast does.
void CpuBackend::cast_to_fp8_impl(const Tensor& src, const Tensor& scale, Tensor* amax, Tensor& dst,
                                  Tensor* dst_t) {
  const int64_t n = src.numel();
  const float s = *scale.ptr<const float>();
  std::vector<float> x(static_cast<size_t>(n));
  decode_f32(src, x.data(), n);
  uint8_t* out = dst.ptr<uint8_t>();
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    m = std::fmax(m, std::fabs(x[i]));
    out[i] = f32_to_fp8(x[i] * s, dst.dtype);
  }
  if (amax) *amax->ptr<float>() = std::fmax(*amax->ptr<float>(), m);
  if (dst_t) permute_impl(dst, *dst_t, {1, 0, 2, 3, 4});
}

void CpuBackend::fp8_update_scaling_impl(const DelayedScalingRecipe& r, DType format,
                                         Tensor& history, Tensor& scale, Tensor& scale_inv,
                                         Tensor& amax_used) {
  const float scaled_max = fp8_scaled_max(format, r.margin);
  const int64_t tensors = scale.numel();
  for (int64_t t = 0; t < tensors; ++t)
    delayed_scaling_update(history.ptr<float>() + t, r.amax_history_len, tensors, r.amax_compute,
                           scaled_max, scale.ptr<float>() + t, scale_inv.ptr<float>() + t,
                           amax_used.ptr<float>() + t);
}

}  // namespace mpbench::cpu
