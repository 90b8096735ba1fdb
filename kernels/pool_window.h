#pragma once
// The window rule of the max pool (Backend::maxpool2d_*), compiled into both the CPU reference and
// the CUDA kernels so that the two pick the same winner and sum the same gradients. (CUDA device
// code calls numeric_limits through --expt-relaxed-constexpr.)
#include <cstdint>
#include <limits>

#include "kernels/host_device.h"

namespace mpbench {

struct PoolGeom {
  int64_t h = 0, w = 0;  // input rows and columns
  int64_t p = 0, q = 0;  // output rows and columns
  int64_t kernel = 0, stride = 0, pad = 0;
};

// The input position h * W + w that wins output (op, oq)'s window, value(h, w) reading the input
// channel as float. PyTorch's rule: scanning in row-major order from -inf, a value wins when it is
// greater than the best so far or NaN (so the first maximum, or the last NaN); a window whose
// values are all -inf goes to its first position.
template <typename Value>
MPB_HOST_DEVICE inline int64_t pool_winner(const PoolGeom& g, int64_t op, int64_t oq,
                                           const Value& value) {
  const int64_t h0 = op * g.stride - g.pad, w0 = oq * g.stride - g.pad;
  int64_t best = -1;
  float best_v = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < g.kernel; ++i) {
    const int64_t h = h0 + i;
    if (h < 0 || h >= g.h) continue;
    for (int64_t j = 0; j < g.kernel; ++j) {
      const int64_t w = w0 + j;
      if (w < 0 || w >= g.w) continue;
      const float v = value(h, w);
      if (best < 0) best = h * g.w + w;
      if (v > best_v || v != v) {
        best = h * g.w + w;
        best_v = v;
      }
    }
  }
  return best;
}

// The outputs whose windows hold input row h: [*first, *last] (empty when first > last).
MPB_HOST_DEVICE inline void pool_windows_of(int64_t h, int64_t size_out, int64_t kernel,
                                            int64_t stride, int64_t pad, int64_t* first,
                                            int64_t* last) {
  const int64_t lo = h + pad - kernel + 1;  // the window starting at p * stride - pad holds h
  *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  const int64_t hi = (h + pad) / stride;
  *last = hi < size_out - 1 ? hi : size_out - 1;
}

}  // namespace mpbench
