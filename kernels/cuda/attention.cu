// Attention probabilities: row softmax of scale * x over each (S, S) matrix, optionally causal.
// One warp per row. Forward: the row's unmasked prefix is scaled into fp32 once, into the warp's
// slice of shared memory when it fits (S <= 12288), then max, sum of exponentials and the output
// read it from there; masked columns (j > i) are only written, as exact zeros. Backward: two
// passes over the row (dot product, then dx), L1-resident at these row lengths.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

constexpr int kVec = 4;
constexpr int kWarps = kThreads / 32;

template <typename TX, typename TY>
__global__ void attention_softmax_forward_kernel(const TX* x, TY* y, int64_t rows, int64_t cols,
                                                 float scale, bool causal, bool cache,
                                                 bool vectorized) {
  extern __shared__ __align__(16) float smem[];  // read as float4 rows when vectorized
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* buf = smem + static_cast<int64_t>(warp) * cols;
  for (int64_t r = blockIdx.x * int64_t{warps} + warp; r < rows; r += int64_t{gridDim.x} * warps) {
    const TX* xr = x + r * cols;
    TY* yr = y + r * cols;
    // Row i of its (S, S) matrix sees columns j <= i.
    const int64_t limit = causal ? (r % cols) + 1 : cols;
    float mx = -INFINITY;
    for_row_elements<kVec>(xr, limit, vectorized, lane, [&](int64_t j, float v) {
      v *= scale;
      if (cache) buf[j] = v;
      mx = fmaxf(mx, v);
    });
    mx = warp_max(mx);
    float sum = 0.0f;
    if (cache) {
      for_row_elements<kVec>(buf, limit, vectorized, lane, [&](int64_t j, float v) {
        const float e = expf(v - mx);
        buf[j] = e;
        sum += e;
      });
    } else {
      for_row_elements<kVec>(xr, limit, vectorized, lane,
                             [&](int64_t j, float v) { sum += expf(v * scale - mx); });
    }
    const float inv = 1.0f / warp_sum(sum);
    if (cache) {
      for_row_elements<kVec>(buf, limit, vectorized, lane,
                             [&](int64_t j, float e) { yr[j] = from_f32<TY>(e * inv); });
    } else {
      for_row_elements<kVec>(xr, limit, vectorized, lane, [&](int64_t j, float v) {
        yr[j] = from_f32<TY>(expf(v * scale - mx) * inv);
      });
    }
    for (int64_t j = limit + lane; j < cols; j += 32) yr[j] = from_f32<TY>(0.0f);
  }
}

// dx = scale * y * (dy - sum_j dy_j y_j); where y is 0 (masked) dx is exactly +0.
// No __restrict__: dx may alias dy; the dot product is complete (warp reduction) before any lane
// writes, and each lane then reads its own elements before writing them.
template <typename TD, typename TY, typename TX>
__global__ void attention_softmax_backward_kernel(const TD* dy, const TY* y, TX* dx, int64_t rows,
                                                  int64_t cols, float scale) {
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t r = blockIdx.x * int64_t{warps} + warp; r < rows; r += int64_t{gridDim.x} * warps) {
    const TD* dyr = dy + r * cols;
    const TY* yr = y + r * cols;
    TX* dxr = dx + r * cols;
    float dot = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) dot += to_f32(dyr[j]) * to_f32(yr[j]);
    dot = warp_sum(dot);
    for (int64_t j = lane; j < cols; j += 32) {
      const float p = to_f32(yr[j]);
      dxr[j] = from_f32<TX>(p == 0.0f ? 0.0f : scale * p * (to_f32(dyr[j]) - dot));
    }
  }
}

}  // namespace

void attention_softmax_forward(DeviceContext& ctx, const Tensor& x, float scale, bool causal,
                               Tensor& y) {
  const int64_t cols = x.cols();
  const int64_t rows = x.rows();
  if (rows == 0 || cols == 0) return;
  const RowLaunch l = row_launch(ctx, rows, cols, kWarps);
  const bool vec = cols % kVec == 0 && aligned_to(x.data, dtype_size(x.dtype) * kVec);
  dispatch_floats(std::array{x.dtype, y.dtype}, [&](auto xt, auto yt) {
    using TX = typename decltype(xt)::type;
    using TY = typename decltype(yt)::type;
    attention_softmax_forward_kernel<TX, TY><<<l.grid, l.warps * 32, l.smem, ctx.stream()>>>(
        x.ptr<const TX>(), y.ptr<TY>(), rows, cols, scale, causal, l.cache, vec);
    CUDA_LAUNCH_CHECK();
  });
}

void attention_softmax_backward(DeviceContext& ctx, const Tensor& dy, const Tensor& y, float scale,
                                Tensor& dx) {
  const int64_t cols = y.cols();
  const int64_t rows = y.rows();
  if (rows == 0 || cols == 0) return;
  const int grid = ctx.grid_for(rows, kWarps);
  dispatch_floats(std::array{dy.dtype, y.dtype, dx.dtype}, [&](auto dt, auto yt, auto xt) {
    using TD = typename decltype(dt)::type;
    using TY = typename decltype(yt)::type;
    using TX = typename decltype(xt)::type;
    attention_softmax_backward_kernel<TD, TY, TX><<<grid, kThreads, 0, ctx.stream()>>>(
        dy.ptr<const TD>(), y.ptr<const TY>(), dx.ptr<TX>(), rows, cols, scale);
    CUDA_LAUNCH_CHECK();
  });
}

}  // namespace mpbench::cuda
