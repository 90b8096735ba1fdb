#pragma once
// The optimizers' and the loss scaler's element rules (PyTorch's), one definition for the CPU
// reference, the native backend and the CUDA kernels. static inline, as kernels/cpu/row_math.h's
// formulas, so that each file compiles its own copy its own way (the native backend's inside its
// vector clones). Compilers may contract the products and sums into FMAs (nvcc does by default;
// so may g++ for the native backend's x86-64-v4 loops): an ulp of fp32 from the reference, within
// every parity tolerance. The loss-scale rule has no such freedom: a double product rounded once.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/host_device.h"

namespace mpbench {

// AdamW's per-step scalars, PyTorch's (torch.optim.adam._single_tensor_adam): p = p (1 - lr wd)
// - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps), each constant taken in double from the
// hyperparameters as written and rounded to fp32 once, as a Python float scalar is when it meets
// an fp32 tensor: 1 - beta2 is fp32(0.001), not 1 - fp32(0.999) (1.3e-5 smaller, a bias in v of
// every step). The bias corrections from the steps taken so far (a host count in PyTorch; 1 -
// beta2^t is tiny early on).
struct AdamWScalars {
  float decay, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps;
};
static inline MPB_HOST_DEVICE AdamWScalars adamw_scalars(const AdamWParams& p, float steps_taken) {
  const double t = static_cast<double>(steps_taken) + 1.0;
  const double bc1 = 1.0 - pow(p.beta1, t);
  const double bc2 = 1.0 - pow(p.beta2, t);
  return {static_cast<float>(1.0 - p.lr * p.weight_decay),
          static_cast<float>(1.0 - p.beta1),
          static_cast<float>(p.beta2),
          static_cast<float>(1.0 - p.beta2),
          static_cast<float>(p.lr / bc1),
          static_cast<float>(sqrt(bc2)),
          static_cast<float>(p.eps)};
}
// exp_avg.lerp_(grad, 1 - beta1): ATen's lerp, its two forms by the weight's size.
static inline MPB_HOST_DEVICE float adamw_first_moment(float m, float g, float w) {
  return w < 0.5f ? m + w * (g - m) : g - (g - m) * (1.0f - w);
}
// One element of AdamW: m and v updated first (v: exp_avg_sq.mul_(beta2).addcmul_(grad, grad,
// value=1 - beta2)), then p from them.
static inline MPB_HOST_DEVICE void adamw_element(float& p, float g, float& m, float& v,
                                                 const AdamWScalars& s) {
  const float mi = adamw_first_moment(m, g, s.one_minus_b1);
  const float vi = s.b2 * v + s.one_minus_b2 * g * g;
  m = mi;
  v = vi;
  p = p * s.decay - s.step_size * mi / (sqrtf(vi) / s.bc2_sqrt + s.eps);
}

// One element of SGD (PyTorch's single-tensor path), with momentum: d = g + wd p, buf = momentum
// buf + d, p -= lr (Nesterov: d + momentum buf; else buf). Without momentum (no buffer):
// p -= lr (g + wd p).
template <bool kNesterov>
static inline MPB_HOST_DEVICE void sgd_element(float& p, float g, float& buf, float lr,
                                               float momentum, float wd) {
  const float d = g + wd * p;
  const float b = momentum * buf + d;
  buf = b;
  p -= lr * (kNesterov ? d + momentum * b : b);
}
static inline MPB_HOST_DEVICE void sgd_element(float& p, float g, float lr, float wd) {
  p -= lr * (g + wd * p);
}

// torch._amp_update_scale_: the float32 scale times a double factor, rounded to float once (a
// growth to inf keeps the scale); the tracker an int32 count of consecutive finite steps.
static inline MPB_HOST_DEVICE void loss_scale_update(float& scale, int32_t& tracker, bool found_inf,
                                                     double growth_factor, double backoff_factor,
                                                     int32_t growth_interval) {
  if (found_inf) {
    scale = static_cast<float>(static_cast<double>(scale) * backoff_factor);
    tracker = 0;
    return;
  }
  const int32_t successful = tracker + 1;
  if (successful >= growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(scale) * growth_factor);
    if (grown <= FLT_MAX) scale = grown;  // false for inf (and NaN)
    tracker = 0;
  } else {
    tracker = successful;
  }
}

}  // namespace mpbench
