#pragma once
// FP8 numerics, exact on the host (the CPU reference of amp_fp8): the two OCP formats and
// Transformer Engine's delayed scaling.
//
//   E4M3 (forward: activations, weights): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits. No
//     infinities; S.1111.111 is NaN, so the largest finite value is 1.75 * 2^8 = 448. Smallest
//     normal 2^-6, subnormals k * 2^-9.
//   E5M2 (backward: output gradients): 1 sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE
//     style: S.11111.00 is infinity, S.11111.{01,10,11} NaN; largest finite 1.75 * 2^15 = 57344.
//     Smallest normal 2^-14, subnormals k * 2^-16.
//
// Encoding rounds to nearest, ties to even, and saturates as the hardware casts do with
// __NV_SATFINITE: a magnitude beyond the largest finite value, infinity included, becomes the
// largest finite value of that sign; NaN stays NaN (0x7F / 0xFF); the sign of zero is kept.
// The two formats are the dtypes DType::F8E4M3 and DType::F8E5M2.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/host_device.h"

namespace mpbench {

constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;
// f: DType::F8E4M3 or DType::F8E5M2 (anything else throws).
float fp8_max(DType f);

// Where saturation starts to lose information: magnitudes above fp8_max(f) plus half its step
// (464 for E4M3, 61440 for E5M2) would round past the largest value; up to it they round to it.
float fp8_clip_threshold(DType f);

uint8_t f32_to_fp8(float x, DType f);
float fp8_to_f32(uint8_t code, DType f);

// Delayed scaling (Transformer Engine's DelayedScaling recipe), per tensor. A tensor is cast as
// fp8(x * scale) and read back as fp8 * (1 / scale); the cast records max |x| into the history's
// newest slot (slot 0, the largest of the step's casts). After each step update_delayed_scaling
// takes the amax to scale by from the whole history ("max") or slot 0 alone ("most_recent"),
// rolls the history one slot (slot 0's value goes to the end, the others move down one, slot 0
// starts at 0 again), and sets scale = fp8_max * 2^-margin / amax, keeping the old scale when that
// amax is 0 or not finite. A step whose amax is 0 (a tensor of zeros, or one no cast saw) leaves
// the history and the scale as they were, as TE's bulk update (its kernel_bulk) does.
// A scale whose division overflowed (an amax below fp8_max / FLT_MAX) becomes FLT_MAX, as TE's
// update does. The GEMMs read the tensor back with scale_inv = 1 / scale, set by the same update.
enum class AmaxCompute { Max, MostRecent };
struct DelayedScalingRecipe {
  int64_t amax_history_len = 1024;
  AmaxCompute amax_compute = AmaxCompute::Max;
  int margin = 0;
};

// The update of one tensor, the one place of the rule (the CPU backend and the CUDA kernel both
// run it): its history's len slots, slot i at history[i * stride], *scale, *scale_inv and
// *amax_used (the amax it scaled by) in place.
MPB_HOST_DEVICE inline void delayed_scaling_update(float* history, int64_t len, int64_t stride,
                                                   AmaxCompute compute, float scaled_max,
                                                   float* scale, float* scale_inv,
                                                   float* amax_used) {
  const float newest = history[0];
  if (newest == 0.0f) {  // nothing to learn from: no roll, the scale kept
    *amax_used = 0.0f;
    *scale_inv = 1.0f / *scale;
    return;
  }
  float amax = newest;
  if (compute == AmaxCompute::Max) {
    amax = 0.0f;
    for (int64_t i = 0; i < len; ++i) amax = fmaxf(amax, history[i * stride]);
  }
  for (int64_t i = 0; i + 1 < len; ++i)  // slot 0 to the end...
    history[i * stride] = history[(i + 1) * stride];
  history[(len - 1) * stride] = newest;
  history[0] = 0.0f;  // ...and slot 0 starts the next step at 0
  *amax_used = amax;
  if (amax > 0.0f && amax <= FLT_MAX) {  // false for 0, inf and NaN: the scale stays
    float s = scaled_max / amax;
    if (s > FLT_MAX) s = FLT_MAX;
    *scale = s;
  }
  *scale_inv = 1.0f / *scale;
}
// fp8_max(f) * 2^-margin: what the update divides by the amax.
float fp8_scaled_max(DType f, int margin);

// One tensor's state on the host (the tests' view of the rule).
struct DelayedScalingState {
  std::vector<float> amax_history;  // amax_history_len slots, all 0 at the start
  float scale = 1.0f;
  float scale_inv = 1.0f;
  float amax_used = 0.0f;  // the amax of the last update, for the run's series
};
DelayedScalingState make_delayed_scaling(const DelayedScalingRecipe& r);
// What a cast does to the state: slot 0 becomes max(slot 0, amax); maxima pass over NaN (fmaxf),
// an infinite amax stays and makes the update keep the scale.
void record_amax(DelayedScalingState& s, float amax);
void update_delayed_scaling(DelayedScalingState& s, const DelayedScalingRecipe& r, DType f);

}  // namespace mpbench
