// Elementwise dtype conversion (round to nearest even, overflow to inf, NaN stays NaN) and fill.
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

constexpr int kVec = 4;  // 16 bytes of fp32, 8 bytes of fp16/bf16 per access

// Elements [0, n): vectorised over the first n / kVec groups when both pointers allow it, scalar
// for the rest.
template <typename TS, typename TD>
__global__ void cast_kernel(const TS* src, TD* dst, int64_t n, bool vectorized) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t done = 0;
  if (vectorized) {
    const int64_t nvec = n / kVec;
    const auto* s = reinterpret_cast<const Vec<TS, kVec>*>(src);
    auto* d = reinterpret_cast<Vec<TD, kVec>*>(dst);
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nvec; i += stride) {
      Vec<TS, kVec> in = s[i];
      Vec<TD, kVec> out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) out.v[k] = from_f32<TD>(to_f32(in.v[k]));
      d[i] = out;
    }
    done = nvec * kVec;
  }
  for (int64_t i = done + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    dst[i] = from_f32<TD>(to_f32(src[i]));
}

// t[i] through TD and back, in place: the rounding of cast_kernel's from_f32.
template <typename TD>
__global__ void round_kernel(float* t, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    t[i] = to_f32(from_f32<TD>(t[i]));
}

template <typename U>
__global__ void fill_bits_kernel(U* dst, U bits, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = bits;
}

}  // namespace

void cast(DeviceContext& ctx, const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.dtype == dst.dtype) {
    if (src.data != dst.data)
      CUDA_CHECK(
          cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice, ctx.stream()));
    return;
  }
  const bool vectorized = aligned_to(src.data, dtype_size(src.dtype) * kVec) &&
                          aligned_to(dst.data, dtype_size(dst.dtype) * kVec);
  const int grid = ctx.grid_for(vectorized ? (n + kVec - 1) / kVec : n, kThreads);
  dispatch_floats(std::array{src.dtype, dst.dtype}, [&](auto src_tag, auto dst_tag) {
    using TS = typename decltype(src_tag)::type;
    using TD = typename decltype(dst_tag)::type;
    cast_kernel<TS, TD>
        <<<grid, kThreads, 0, ctx.stream()>>>(src.ptr<const TS>(), dst.ptr<TD>(), n, vectorized);
    CUDA_LAUNCH_CHECK();
  });
}

void round_to(DeviceContext& ctx, Tensor& t, DType to) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const int grid = ctx.grid_for(n, kThreads);
  dispatch_floats(std::array{to}, [&](auto tag) {
    using TD = typename decltype(tag)::type;
    round_kernel<TD><<<grid, kThreads, 0, ctx.stream()>>>(t.ptr<float>(), n);
    CUDA_LAUNCH_CHECK();
  });
}

void fill(DeviceContext& ctx, Tensor& t, float value) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const int grid = ctx.grid_for(n, kThreads);
  // The bit pattern is made on the host with the exact conversions of kernels/dtype.h, so a fill
  // stores the same bits on every backend.
  switch (t.dtype) {
    case DType::F32:
      fill_bits_kernel<uint32_t>
          <<<grid, kThreads, 0, ctx.stream()>>>(t.ptr<uint32_t>(), f32_bits(value), n);
      break;
    case DType::I32: {
      int32_t i = static_cast<int32_t>(value);
      uint32_t bits;
      std::memcpy(&bits, &i, 4);
      fill_bits_kernel<uint32_t><<<grid, kThreads, 0, ctx.stream()>>>(t.ptr<uint32_t>(), bits, n);
      break;
    }
    case DType::F16:
      fill_bits_kernel<uint16_t>
          <<<grid, kThreads, 0, ctx.stream()>>>(t.ptr<uint16_t>(), f32_to_f16(value), n);
      break;
    case DType::BF16:
      fill_bits_kernel<uint16_t>
          <<<grid, kThreads, 0, ctx.stream()>>>(t.ptr<uint16_t>(), f32_to_bf16(value), n);
      break;
    case DType::F8E4M3:
    case DType::F8E5M2:
      throw_runtime("internal: fill of an fp8 tensor");  // Backend::fill refuses them
  }
  CUDA_LAUNCH_CHECK();
}

}  // namespace mpbench::cuda
