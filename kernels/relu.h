#pragma once
// ReLU as PyTorch computes it, one rule for the CPU reference, the native backend and the CUDA
// kernels. Both directions are selects on x <= 0, never arithmetic with a 0/1 mask:
//   forward   relu(x) = x <= 0 ? 0 : x   (clamp_min: relu(NaN) = NaN, relu(-inf) = 0)
//   backward  dx = x <= 0 ? 0 : dy       (threshold_backward: an inf dy where x <= 0 gives 0, not
//                                         inf * 0 = NaN; a NaN x passes dy on)
// x may be the pre-activation or ReLU's output: the two agree on x <= 0, NaN included. relu(-0)
// is +0, as it always was here (PyTorch's CPU clamp_min keeps the -0).
#include "kernels/host_device.h"

namespace mpbench {

MPB_HOST_DEVICE inline bool relu_blocks(float x) {
  return x <= 0.0f;
}
MPB_HOST_DEVICE inline float relu_forward(float x) {
  return relu_blocks(x) ? 0.0f : x;
}
MPB_HOST_DEVICE inline float relu_backward(float dy, float x) {
  return relu_blocks(x) ? 0.0f : dy;
}

}  // namespace mpbench
