#pragma once
// The window rule of the max pool (Backend::maxpool2d_*), compiled into both the CPU reference and
// the CUDA kernels so that the two pick the same winner and sum the same gradients. (CUDA device
// code calls numeric_limits through --expt-relaxed-constexpr.)
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/host_device.h"

namespace mpbench {

struct PoolGeom {
  int64_t h = 0, w = 0;  // input rows and columns
  int64_t p = 0, q = 0;  // output rows and columns
  int64_t kernel = 0, stride = 0, pad = 0;
};

// The input that wins output (op, oq)'s window, as its offset i * kernel + j in the window (row
// i, column j), value(h, w) reading the input channel as float; -1 for a window of padding only.
// PyTorch's rule: scanning in row-major order from -inf, a value wins when it is greater than the
// best so far or NaN (so the first maximum, or the last NaN); a window whose values are all -inf
// goes to its first position.
template <typename Value>
MPB_HOST_DEVICE inline int pool_winner_offset(const PoolGeom& g, int64_t op, int64_t oq,
                                              const Value& value) {
  const int64_t h0 = op * g.stride - g.pad, w0 = oq * g.stride - g.pad;
  const int k = static_cast<int>(g.kernel);
  int best = -1;
  float best_v = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < k; ++i) {
    const int64_t h = h0 + i;
    if (h < 0 || h >= g.h) continue;
    for (int j = 0; j < k; ++j) {
      const int64_t w = w0 + j;
      if (w < 0 || w >= g.w) continue;
      const float v = value(h, w);
      if (best < 0) best = i * k + j;
      if (v > best_v || v != v) {
        best = i * k + j;
        best_v = v;
      }
    }
  }
  return best;
}

// Offset off of output (op, oq)'s window as its input position h * W + w.
MPB_HOST_DEVICE inline int64_t pool_offset_position(const PoolGeom& g, int64_t op, int64_t oq,
                                                    int off) {
  const int k = static_cast<int>(g.kernel);
  return (op * g.stride - g.pad + off / k) * g.w + (oq * g.stride - g.pad + off % k);
}

// The winner as its input position h * W + w, or -1.
template <typename Value>
MPB_HOST_DEVICE inline int64_t pool_winner(const PoolGeom& g, int64_t op, int64_t oq,
                                           const Value& value) {
  const int off = pool_winner_offset(g, op, oq, value);
  return off < 0 ? -1 : pool_offset_position(g, op, oq, off);
}

// The outputs whose windows hold input row h: [*first, *last] (empty when first > last). I: a
// signed index type (a GPU kernel's 32-bit one where the sizes allow).
template <typename I>
MPB_HOST_DEVICE inline void pool_windows_of(I h, I size_out, I kernel, I stride, I pad, I* first,
                                            I* last) {
  static_assert(std::is_signed<I>::value, "h + pad - kernel + 1 may be negative");
  const I lo = h + pad - kernel + 1;  // the window starting at p * stride - pad holds h
  *first = lo <= 0 ? I{0} : (lo + stride - 1) / stride;
  const I hi = (h + pad) / stride;
  *last = hi < size_out - 1 ? hi : size_out - 1;
}

// The gradient of input (h, w): the dy of every window it won, added in fp32 from 0 in row-major
// window order (the order in which the CPU reference scatters them, so the sums agree bit for
// bit). winner(op, oq): that window's pool_winner_offset; dy(op, oq): its gradient as float.
template <typename I, typename Winner, typename Dy>
MPB_HOST_DEVICE inline float pool_gather(const PoolGeom& g, I h, I w, const Winner& winner,
                                         const Dy& dy) {
  const I kernel = static_cast<I>(g.kernel), stride = static_cast<I>(g.stride),
          pad = static_cast<I>(g.pad);
  I p0, p1, q0, q1;
  pool_windows_of<I>(h, static_cast<I>(g.p), kernel, stride, pad, &p0, &p1);
  pool_windows_of<I>(w, static_cast<I>(g.q), kernel, stride, pad, &q0, &q1);
  float acc = 0.0f;
  for (I op = p0; op <= p1; ++op) {
    const I i = h + pad - op * stride;  // h's row in window (op, *)
    for (I oq = q0; oq <= q1; ++oq)
      if (winner(op, oq) == static_cast<int>(i * kernel + (w + pad - oq * stride)))
        acc += dy(op, oq);
  }
  return acc;
}

}  // namespace mpbench
