// The ops of amp_fp8 on the GPU: the scaled cast (hardware conversions, which round to nearest
// even and saturate as kernels/fp8.h does) with its amax, and the delayed-scaling update, which
// runs kernels/fp8.h's own rule one thread per tensor.
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/fp8.h"

namespace mpbench::cuda {

namespace {

constexpr int kTile = 32;  // the transposed copy goes through 32 x 32 tiles of shared memory

// dst[i] = fp8(src[i] * scale); amax = max(amax, max |src|). With dst_t, src is (rows, cols) and
// each block casts 32 x 32 tiles, writing each also transposed (coalesced both ways); without,
// the threads stride over the elements.
template <typename TS>
__global__ void cast_to_fp8_kernel(const TS* src, int64_t rows, int64_t cols, const float* scale,
                                   float* amax, __nv_fp8_interpretation_t format, uint8_t* dst,
                                   uint8_t* dst_t) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const float s = *scale;
  float m = 0.0f;
  auto cast_one = [&](int64_t i) {
    const float v = to_f32(src[i]);
    m = fmaxf(m, fabsf(v));
    const uint8_t code = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, format);
    dst[i] = code;
    return code;
  };
  if (!dst_t) {
    const int64_t n = rows * cols, stride = int64_t{gridDim.x} * blockDim.x * blockDim.y;
    for (int64_t i =
             blockIdx.x * int64_t{blockDim.x} * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
         i < n; i += stride)
      cast_one(i);
  } else {
    const int64_t tiles_c = (cols + kTile - 1) / kTile;
    const int64_t tiles = ((rows + kTile - 1) / kTile) * tiles_c;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int64_t r0 = (t / tiles_c) * kTile, c0 = (t % tiles_c) * kTile;
      for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
        const int64_t r = r0 + i, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[i][threadIdx.x] = cast_one(r * cols + c);
      }
      __syncthreads();
      for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
        const int64_t c = c0 + i, r = r0 + threadIdx.x;
        if (r < rows && c < cols) dst_t[c * rows + r] = tile[threadIdx.x][i];
      }
      __syncthreads();
    }
  }
  if (!amax) return;
  m = warp_max(m);
  // Non-negative floats order as their bit patterns, so an integer max is a float max.
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

__global__ void fp8_update_scaling_kernel(float* history, int64_t len, int64_t tensors,
                                          AmaxCompute compute, float scaled_max, float* scale,
                                          float* scale_inv, float* amax_used) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t < tensors)
    delayed_scaling_update(history + t, len, tensors, compute, scaled_max, scale + t, scale_inv + t,
                           amax_used + t);
}

}  // namespace

void cast_to_fp8(DeviceContext& ctx, const Tensor& src, const Tensor& scale, Tensor* amax,
                 Tensor& dst, Tensor* dst_t) {
  const int64_t n = src.numel();
  if (n == 0) return;
  // A transposed copy needs the (rows, cols) view; a plain cast takes the elements as one row.
  const int64_t rows = dst_t ? src.shape[0] : 1, cols = dst_t ? src.shape[1] : n;
  const dim3 block(kTile, 8);
  const int64_t work = dst_t ? ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile)
                             : (n + kTile * 8 - 1) / (kTile * 8);
  const int grid = ctx.grid_for(work, 1);
  const auto format = dst.dtype == DType::F8E4M3 ? __NV_E4M3 : __NV_E5M2;
  dispatch_float(src.dtype, [&](auto tag) {
    using TS = typename decltype(tag)::type;
    cast_to_fp8_kernel<TS><<<grid, block, 0, ctx.stream()>>>(
        src.ptr<const TS>(), rows, cols, scale.ptr<const float>(),
        amax ? amax->ptr<float>() : nullptr, format, dst.ptr<uint8_t>(),
        dst_t ? dst_t->ptr<uint8_t>() : nullptr);
    CUDA_LAUNCH_CHECK();
  });
}

void fp8_update_scaling(DeviceContext& ctx, const DelayedScalingRecipe& r, DType format,
                        Tensor& history, Tensor& scale, Tensor& scale_inv, Tensor& amax_used) {
  const int64_t tensors = scale.numel();
  if (tensors == 0) return;
  const int threads = 128;
  const int grid = static_cast<int>((tensors + threads - 1) / threads);
  fp8_update_scaling_kernel<<<grid, threads, 0, ctx.stream()>>>(
      history.ptr<float>(), r.amax_history_len, tensors, r.amax_compute,
      fp8_scaled_max(format, r.margin), scale.ptr<float>(), scale_inv.ptr<float>(),
      amax_used.ptr<float>());
  CUDA_LAUNCH_CHECK();
}

}  // namespace mpbench::cuda
