#pragma once
// GELU, tanh approximation, one definition for the CPU reference, the native backend and the CUDA
// kernels (and cuBLASLt's and oneDNN's GELU epilogues' definition):
//   gelu(x) = 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2 / pi), c = 0.044715
// given t = tanh(the argument): the reference takes t from std::tanh, the native backend's vector
// loops from a tanh they can vectorise (vector_math.h), CUDA from tanhf. The argument rounds in
// one order for the forward and in another for the derivative, as it always has on the CPU (the
// training recording holds the reference to both). Compilers may contract these products and sums
// into FMAs (nvcc does by default, as for PyTorch's own GELU kernels; so may g++ for the native
// backend's x86-64-v4 loops): an ulp of fp32 from the reference, within every parity tolerance.
#include "kernels/host_device.h"

namespace mpbench {

constexpr float kGeluK = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

MPB_HOST_DEVICE inline float gelu_arg(float x) {
  return kGeluK * (x + kGeluC * x * x * x);
}
MPB_HOST_DEVICE inline float gelu_derivative_arg(float x) {
  const float x2 = x * x;
  return kGeluK * (x + kGeluC * x2 * x);
}
MPB_HOST_DEVICE inline float gelu_from_tanh(float x, float t) {
  return 0.5f * x * (1.0f + t);
}
// GELU'(x): the backward multiplies dy by it, as PyTorch's gelu_backward does, so an inf dy where
// GELU' is 0 (x below about -10) is NaN.
MPB_HOST_DEVICE inline float gelu_derivative_from_tanh(float x, float t) {
  const float x2 = x * x;
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluC * x2);
}

}  // namespace mpbench
