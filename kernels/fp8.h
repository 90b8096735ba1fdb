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
#include <cstdint>
#include <string>
#include <vector>

namespace mpbench {

enum class Fp8Format { E4M3, E5M2 };

constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;
float fp8_max(Fp8Format f);
const char* fp8_format_name(Fp8Format f);  // "fp8_e4m3", "fp8_e5m2"

uint8_t f32_to_fp8(float x, Fp8Format f);
float fp8_to_f32(uint8_t code, Fp8Format f);

// Delayed scaling (Transformer Engine's DelayedScaling recipe), per tensor. A tensor is cast as
// fp8(x * scale) and read back as fp8 * (1 / scale); the cast records max |x| into the history's
// newest slot (slot 0, the largest of the step's casts). After each step update_delayed_scaling
// takes the amax to scale by from the whole history ("max") or slot 0 alone ("most_recent"),
// rolls the history one slot (slot 0's value goes to the end, the others move down one, slot 0
// starts at 0 again), and sets scale = fp8_max * 2^-margin / amax, keeping the old scale when that
// amax is 0 or not finite.
enum class AmaxCompute { Max, MostRecent };
struct DelayedScalingRecipe {
  int64_t amax_history_len = 1024;
  AmaxCompute amax_compute = AmaxCompute::Max;
  int margin = 0;
};
struct DelayedScalingState {
  std::vector<float> amax_history;  // amax_history_len slots, all 0 at the start
  float scale = 1.0f;
  float amax_used = 0.0f;  // the amax of the last update, for the run's series
};
DelayedScalingState make_delayed_scaling(const DelayedScalingRecipe& r);
// What a cast does to the state: slot 0 becomes max(slot 0, amax); maxima pass over NaN (fmaxf),
// an infinite amax stays and makes the update keep the scale.
void record_amax(DelayedScalingState& s, float amax);
void update_delayed_scaling(DelayedScalingState& s, const DelayedScalingRecipe& r, Fp8Format f);

}  // namespace mpbench
