// LayerNorm over the last dimension, statistics in fp32.
// Forward: one warp per row; the row is converted to fp32 once into the warp's slice of shared
// memory (when it fits), then the two-pass mean / variance and the output read it from there.
// Backward: one warp per row for dx (two passes over the row), and a separate column reduction
// for dgamma / dbeta (block = 32 columns x 8 row threads over row chunks, per-chunk partials in
// the context's scratch summed in a fixed order), so every output is deterministic.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

constexpr int kVec = 4;
constexpr int kWarps = kThreads / 32;
constexpr int kColTile = 32, kRowThreads = 8;

template <typename TX, typename TY>
__global__ void layernorm_forward_kernel(const TX* x, const float* gamma, const float* beta, TY* y,
                                         float* mean_out, float* rstd_out, int64_t rows,
                                         int64_t cols, float eps, bool cache, bool vectorized) {
  extern __shared__ __align__(16) float smem[];  // read as float4 rows when vectorized
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* buf = smem + static_cast<int64_t>(warp) * cols;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = blockIdx.x * int64_t{warps} + warp; r < rows; r += int64_t{gridDim.x} * warps) {
    const TX* xr = x + r * cols;
    float s = 0.0f;
    for_row_elements<kVec>(xr, cols, vectorized, lane, [&](int64_t j, float v) {
      if (cache) buf[j] = v;
      s += v;
    });
    const float mean = warp_sum(s) * inv_cols;
    float q = 0.0f;
    auto sq = [&](int64_t j, float v) {
      const float d = v - mean;
      q += d * d;
    };
    if (cache) {
      for_row_elements<kVec>(buf, cols, vectorized, lane, sq);
    } else {
      for_row_elements<kVec>(xr, cols, vectorized, lane, sq);
    }
    const float rstd = 1.0f / sqrtf(warp_sum(q) * inv_cols + eps);
    if (lane == 0) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
    TY* yr = y + r * cols;
    auto out = [&](int64_t j, float v) {
      yr[j] = from_f32<TY>((v - mean) * rstd * gamma[j] + beta[j]);
    };
    if (cache) {
      for_row_elements<kVec>(buf, cols, vectorized, lane, out);
    } else {
      for_row_elements<kVec>(xr, cols, vectorized, lane, out);
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd.
// No __restrict__: dx may alias x or dy; each lane reads its elements before writing them.
template <typename TD, typename TX>
__global__ void layernorm_dx_kernel(const TD* dy, const TX* x, const float* gamma,
                                    const float* mean_in, const float* rstd_in, TX* dx,
                                    int64_t rows, int64_t cols) {
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = blockIdx.x * int64_t{warps} + warp; r < rows; r += int64_t{gridDim.x} * warps) {
    const TD* dyr = dy + r * cols;
    const TX* xr = x + r * cols;
    const float mean = mean_in[r], rstd = rstd_in[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) {
      const float g = to_f32(dyr[j]) * gamma[j];
      sg += g;
      sgx += g * (to_f32(xr[j]) - mean) * rstd;
    }
    const float a = warp_sum(sg) * inv_cols;
    const float b = warp_sum(sgx) * inv_cols;
    TX* dxr = dx + r * cols;
    for (int64_t j = lane; j < cols; j += 32) {
      const float g = to_f32(dyr[j]) * gamma[j];
      const float xhat = (to_f32(xr[j]) - mean) * rstd;
      dxr[j] = from_f32<TX>(rstd * (g - a - xhat * b));
    }
  }
}

template <typename TD, typename TX>
__global__ void layernorm_param_partial_kernel(const TD* dy, const TX* x, const float* mean_in,
                                               const float* rstd_in, float* part_gamma,
                                               float* part_beta, int64_t rows, int64_t cols,
                                               int64_t rows_per_chunk) {
  const int64_t col = blockIdx.x * int64_t{kColTile} + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float sg = 0.0f, sb = 0.0f;
  if (col < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      const int64_t i = r * cols + col;
      const float d = to_f32(dy[i]);
      sg += d * ((to_f32(x[i]) - mean_in[r]) * rstd_in[r]);
      sb += d;
    }
  }
  write_column_partials<kRowThreads, kColTile>(sg, sb, col, cols, part_gamma, part_beta);
}

__global__ void column_sums_kernel(const float* part_gamma, const float* part_beta, int64_t chunks,
                                   int64_t cols, float* dgamma, float* dbeta) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float a = 0.0f, b = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      a += part_gamma[k * cols + c];
      b += part_beta[k * cols + c];
    }
    dgamma[c] = a;
    dbeta[c] = b;
  }
}

}  // namespace

void layernorm_forward(DeviceContext& ctx, float eps, const Tensor& x, const Tensor& gamma,
                       const Tensor& beta, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t rows = x.rows(), cols = x.cols();
  if (rows == 0 || cols == 0) return;
  const RowLaunch l = row_launch(ctx, rows, cols, kWarps);
  const bool vec = cols % kVec == 0 && aligned_to(x.data, dtype_size(x.dtype) * kVec);
  dispatch_floats(std::array{x.dtype, y.dtype}, [&](auto xt, auto yt) {
    using TX = typename decltype(xt)::type;
    using TY = typename decltype(yt)::type;
    layernorm_forward_kernel<TX, TY><<<l.grid, l.warps * 32, l.smem, ctx.stream()>>>(
        x.ptr<const TX>(), gamma.ptr<const float>(), beta.ptr<const float>(), y.ptr<TY>(),
        mean.ptr<float>(), rstd.ptr<float>(), rows, cols, eps, l.cache, vec);
    CUDA_LAUNCH_CHECK();
  });
}

void layernorm_backward(DeviceContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                        Tensor& dbeta) {
  const int64_t rows = x.rows(), cols = x.cols();
  if (cols == 0) return;
  if (rows == 0) {
    CUDA_CHECK(cudaMemsetAsync(dgamma.data, 0, dgamma.bytes(), ctx.stream()));
    CUDA_CHECK(cudaMemsetAsync(dbeta.data, 0, dbeta.bytes(), ctx.stream()));
    return;
  }
  // The parameter gradients first: dx may alias dy or x.
  const int64_t col_tiles = (cols + kColTile - 1) / kColTile;
  const int64_t target_blocks = 4 * int64_t{ctx.prop().multiProcessorCount};
  int64_t chunks = (target_blocks + col_tiles - 1) / col_tiles;
  chunks = std::min(chunks, (rows + kRowThreads - 1) / kRowThreads);
  chunks = std::min(chunks, static_cast<int64_t>(ctx.scratch_floats()) / (2 * cols));
  chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, 65535));
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  MPB_CHECK(col_tiles <= 0x7fffffff, "layernorm_backward: too many columns ({})", cols);
  float* part_gamma = chunks == 1 ? dgamma.ptr<float>() : ctx.scratch();
  float* part_beta = chunks == 1 ? dbeta.ptr<float>() : ctx.scratch() + chunks * cols;
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
  dispatch_floats(std::array{dy.dtype, x.dtype}, [&](auto dt, auto xt) {
    using TD = typename decltype(dt)::type;
    using TX = typename decltype(xt)::type;
    layernorm_param_partial_kernel<TD, TX><<<grid, dim3(kColTile, kRowThreads), 0, ctx.stream()>>>(
        dy.ptr<const TD>(), x.ptr<const TX>(), mean.ptr<const float>(), rstd.ptr<const float>(),
        part_gamma, part_beta, rows, cols, rows_per_chunk);
    CUDA_LAUNCH_CHECK();
    if (chunks > 1) {
      column_sums_kernel<<<ctx.grid_for(cols, kThreads), kThreads, 0, ctx.stream()>>>(
          part_gamma, part_beta, chunks, cols, dgamma.ptr<float>(), dbeta.ptr<float>());
      CUDA_LAUNCH_CHECK();
    }
    layernorm_dx_kernel<TD, TX><<<ctx.grid_for(rows, kWarps), kThreads, 0, ctx.stream()>>>(
        dy.ptr<const TD>(), x.ptr<const TX>(), gamma.ptr<const float>(), mean.ptr<const float>(),
        rstd.ptr<const float>(), dx.ptr<TX>(), rows, cols);
    CUDA_LAUNCH_CHECK();
  });
}

}  // namespace mpbench::cuda
