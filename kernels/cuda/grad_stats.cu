// One fused pass over the flat fp32 gradients: detect inf/NaN, unscale, sum of squares; then a
// one-block finalize writes found_inf and the L2 norm. Per-block partials go to the context's
// scratch and are summed in a fixed order, so the norm is deterministic. The squares are summed
// in double, as the CPU reference does: an fp32 sum overflows to inf for finite gradients (one
// |g| > 1.8e19, or a norm above that), giving an infinite norm with found_inf == 0. The kernel
// is bound by memory, so the double adds cost nothing.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

constexpr int kMaxBlocks = 1024;

// The check before the unscale, as the CPU reference's (kernels/cpu/grad_stats.cpp) and PyTorch's.
__device__ __forceinline__ void unscale_one(float& g, float inv, bool scaled, double& sq,
                                            float& bad) {
  if (!isfinite(g)) bad = 1.0f;
  if (scaled) g *= inv;
  const double d = g;
  sq += d * d;
}

__global__ void unscale_partial_kernel(float* grads, int64_t n, const float* scale,
                                       double* partial_sq, float* partial_bad, bool vectorized) {
  __shared__ double shared_sq[kThreads];
  __shared__ float shared_bad[kThreads];
  const bool scaled = scale != nullptr;
  const float inv = scaled ? 1.0f / scale[0] : 1.0f;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  double sq = 0.0;
  float bad = 0.0f;
  int64_t done = 0;
  if (vectorized) {
    auto* g4 = reinterpret_cast<Vec<float, 4>*>(grads);
    const int64_t nvec = n / 4;
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nvec; i += stride) {
      Vec<float, 4> v = g4[i];
#pragma unroll
      for (int k = 0; k < 4; ++k) unscale_one(v.v[k], inv, scaled, sq, bad);
      if (scaled) g4[i] = v;
    }
    done = nvec * 4;
  }
  for (int64_t i = done + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    float v = grads[i];
    unscale_one(v, inv, scaled, sq, bad);
    if (scaled) grads[i] = v;
  }
  const double block_sq = block_sum(sq, shared_sq);
  const float block_bad = block_sum(bad, shared_bad);
  if (threadIdx.x == 0) {
    partial_sq[blockIdx.x] = block_sq;
    partial_bad[blockIdx.x] = block_bad;
  }
}

__global__ void unscale_finalize_kernel(const double* partial_sq, const float* partial_bad,
                                        int blocks, float* found_inf, float* norm) {
  __shared__ double shared_sq[kThreads];
  __shared__ float shared_bad[kThreads];
  const double sq = sum_partials(partial_sq, blocks, shared_sq);
  const float bad = sum_partials(partial_bad, blocks, shared_bad);
  if (threadIdx.x == 0) {
    found_inf[0] = bad != 0.0f ? 1.0f : 0.0f;
    norm[0] = static_cast<float>(sqrt(sq));
  }
}

}  // namespace

void unscale_check_norm(DeviceContext& ctx, Tensor& grads, const Tensor* scale, Tensor& found_inf,
                        Tensor& norm) {
  const int64_t n = grads.numel();
  const bool vectorized = aligned_to(grads.data, 16);
  const int blocks =
      n == 0 ? 1 : std::min(kMaxBlocks, ctx.grid_for(vectorized ? (n + 3) / 4 : n, kThreads));
  // Partials: kMaxBlocks doubles (the scratch is cudaMalloc'd, so 8-byte aligned), then the flags.
  MPB_CHECK(ctx.scratch_floats() >= 3 * static_cast<size_t>(kMaxBlocks), "scratch too small");
  auto* partial_sq = reinterpret_cast<double*>(ctx.scratch());
  float* partial_bad = ctx.scratch() + 2 * kMaxBlocks;
  unscale_partial_kernel<<<blocks, kThreads, 0, ctx.stream()>>>(
      grads.ptr<float>(), n, scale ? scale->ptr<const float>() : nullptr, partial_sq, partial_bad,
      vectorized);
  CUDA_LAUNCH_CHECK();
  unscale_finalize_kernel<<<1, kThreads, 0, ctx.stream()>>>(
      partial_sq, partial_bad, blocks, found_inf.ptr<float>(), norm.ptr<float>());
  CUDA_LAUNCH_CHECK();
}

}  // namespace mpbench::cuda
