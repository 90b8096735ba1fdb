#pragma once
// Shared device helpers: fp32 <-> storage conversions, dtype dispatch, vector access.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_context.h"
#include "kernels/tensor.h"

namespace mpbench::cuda {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_f32(float x) {
  return x;
}
__device__ __forceinline__ float to_f32(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// V contiguous elements moved as one aligned load/store (at most 16 bytes).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

inline bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the storage type of a float dtype.
template <typename F>
void dispatch_float(DType dt, F&& f) {
  switch (dt) {
    case DType::F32:
      f(TypeTag<float>{});
      return;
    case DType::F16:
      f(TypeTag<__half>{});
      return;
    case DType::BF16:
      f(TypeTag<__nv_bfloat16>{});
      return;
    default:
      throw_runtime(fmt::format("expected a float dtype, got {}", dtype_name(dt)));
  }
}

// Calls f(TypeTag<T1>{}, ..., TypeTag<TN>{}) with the storage types of N float dtypes, for the
// kernels templated on each operand's type: dispatch_floats(std::array{x.dtype, y.dtype}, f).
template <size_t N, typename F, typename... Tags>
void dispatch_floats(const std::array<DType, N>& dtypes, F&& f, Tags... tags) {
  if constexpr (sizeof...(Tags) == N) {
    f(tags...);
  } else {
    dispatch_float(dtypes[sizeof...(Tags)],
                   [&](auto tag) { dispatch_floats(dtypes, f, tags..., tag); });
  }
}

inline cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::I32:
      return CUDA_R_32I;
    case DType::F8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::F8E5M2:
      return CUDA_R_8F_E5M2;
  }
  return CUDA_R_32F;
}

inline void check_on_device(const Tensor& t, const char* what) {
  MPB_CHECK(t.device == Device::CUDA, "{}: tensor is not on the CUDA device", what);
  MPB_CHECK(t.data != nullptr || t.numel() == 0, "{}: tensor has no data", what);
}

// Sum / max over the 32 lanes of a full warp; every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Fixed-order tree sum over a block of blockDim.x (a power of two) threads, shared holding one
// slot per thread; every thread must call it and gets the sum. The same inputs give the same
// bits on every run, which atomics across blocks would not.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  T r = shared[0];
  __syncthreads();
  return r;
}

// The fixed-order sum of n per-block partials, by one block (a two-pass reduction's second pass);
// every thread must call it and gets the sum.
template <typename T>
__device__ T sum_partials(const T* partial, int n, T* shared) {
  T v = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += partial[i];
  return block_sum(v, shared);
}

// For the warp-per-row kernels: calls f(j, v) for the elements j < limit of a row that this lane
// owns, in groups of V read with one vector load when `vectorized` (row aligned to V elements),
// single elements otherwise. Every pass uses the same ownership, so a lane only ever reads back
// the shared-memory slots it wrote itself.
template <int V, typename T, typename F>
__device__ __forceinline__ void for_row_elements(const T* row, int64_t limit, bool vectorized,
                                                 int lane, F&& f) {
  if (vectorized) {
    const auto* rv = reinterpret_cast<const Vec<T, V>*>(row);
    const int64_t groups = (limit + V - 1) / V;
    for (int64_t g = lane; g < groups; g += 32) {
      const Vec<T, V> in = rv[g];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int64_t j = g * V + k;
        if (j < limit) f(j, to_f32(in.v[k]));
      }
    }
  } else {
    for (int64_t j = lane; j < limit; j += 32) f(j, to_f32(row[j]));
  }
}

// Launch shape of the one-warp-per-row kernels (layernorm, attention softmax): a warp caches its
// row as fp32 in dynamic shared memory when `warps` such rows fit the default 48 KiB per block (no
// opt-in attribute needed), otherwise it re-reads the row from global memory.
struct RowLaunch {
  bool cache = false;
  int warps = 0;
  size_t smem = 0;
  int grid = 0;
};
inline RowLaunch row_launch(const DeviceContext& ctx, int64_t rows, int64_t cols, int max_warps) {
  constexpr int64_t kSmemBytes = 48 * 1024;
  const int64_t row_bytes = cols * static_cast<int64_t>(sizeof(float));
  RowLaunch l;
  l.cache = row_bytes <= kSmemBytes;
  l.warps =
      l.cache ? static_cast<int>(std::min<int64_t>(max_warps, kSmemBytes / row_bytes)) : max_warps;
  l.smem = l.cache ? static_cast<size_t>(l.warps * row_bytes) : 0;
  l.grid = ctx.grid_for(rows, l.warps);
  return l;
}

// The end of a column-partials kernel: a (kRowThreads x kColTile) block has summed two values per
// column over its rows in (a, b); this adds them over threadIdx.y and writes row blockIdx.y of
// the (chunks, cols) partial sums. Summation order is fixed, so the result is deterministic.
template <int kRowThreads, int kColTile>
__device__ void write_column_partials(float a, float b, int64_t col, int64_t cols, float* part_a,
                                      float* part_b) {
  __shared__ float s_a[kRowThreads][kColTile + 1];
  __shared__ float s_b[kRowThreads][kColTile + 1];
  s_a[threadIdx.y][threadIdx.x] = a;
  s_b[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float sa = 0.0f, sb = 0.0f;
    for (int t = 0; t < kRowThreads; ++t) {
      sa += s_a[t][threadIdx.x];
      sb += s_b[t][threadIdx.x];
    }
    part_a[blockIdx.y * cols + col] = sa;
    part_b[blockIdx.y * cols + col] = sb;
  }
}

}  // namespace mpbench::cuda
