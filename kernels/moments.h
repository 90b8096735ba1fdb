#pragma once
// Per-channel mean and squared deviations from sums of x - shift over blocks of rows, merged by
// Chan et al.'s rule: the batch normalisation statistics of the native CPU (in double) and of
// the CUDA kernels (in float), so that the two cannot disagree on an inf or a NaN.
#include "kernels/host_device.h"

namespace mpbench {

// Whether v is neither inf nor NaN, the same on the host and the device.
template <class T>
MPB_HOST_DEVICE inline bool moments_finite(T v) {
  return v - v == T(0);
}

// The shift a block's sums subtract, which keeps its squares from cancelling: its first value,
// or 0 where that is inf or NaN (x - inf would make every other term NaN, and the mean NaN where
// the reference's plain sum gives +-inf).
template <class T>
MPB_HOST_DEVICE inline T moments_shift(T first) {
  return moments_finite(first) ? first : T(0);
}

// Merges (nb, mb, m2b) into the running count n, mean and squared deviations m2. A non-finite
// mean on either side (an inf or NaN among the rows) follows the sum's rule, +-inf staying and
// inf - inf giving NaN, and the squared deviations become NaN, as the reference's two passes
// give them.
template <class T>
MPB_HOST_DEVICE inline void merge_moments(T& n, T& mean, T& m2, T nb, T mb, T m2b) {
  if (nb == T(0)) return;
  const T total = n + nb;
  if (!moments_finite(mean) || !moments_finite(mb)) {
    mean += mb;
    m2 = mean - mean;  // NaN
    n = total;
    return;
  }
  const T delta = mb - mean, fb = nb / total;
  mean += delta * fb;
  m2 += m2b + delta * delta * n * fb;
  n = total;
}

}  // namespace mpbench
