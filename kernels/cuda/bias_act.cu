// Bias + activation outside the GEMM epilogue, and its backward.
// x, pre_act, y, dy, dx: (rows, N); bias, dbias: (N).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/gelu.h"
#include "kernels/relu.h"

namespace mpbench::cuda {

namespace {

// The activations' rules are kernels/relu.h's and kernels/gelu.h's, the CPU backends' too.
__device__ __forceinline__ float apply_act(float x, Activation act) {
  switch (act) {
    case Activation::Relu:
      return relu_forward(x);
    case Activation::Gelu:
      return gelu_from_tanh(x, tanhf(gelu_arg(x)));
    case Activation::None:
      break;
  }
  return x;
}

// dx for dy at x: ReLU's a select (kernels/relu.h), GELU's dy times the derivative.
__device__ __forceinline__ float act_backward(float dy, float x, Activation act) {
  switch (act) {
    case Activation::Relu:
      return relu_backward(dy, x);
    case Activation::Gelu:
      return dy * gelu_derivative_from_tanh(x, tanhf(gelu_derivative_arg(x)));
    case Activation::None:
      break;
  }
  return dy;
}

// No __restrict__: x may alias pre or y; each element is read before it is written.
template <typename T, typename TB>
__global__ void bias_act_forward_kernel(const T* x, const TB* bias, T* pre, T* y, int64_t total,
                                        int64_t cols, Activation act) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    float v = to_f32(x[i]);
    if (bias) v += to_f32(bias[i % cols]);
    // The activation takes the rounded value, as the reference's epilogue (kernels/cpu/gemm.cpp).
    const T p = from_f32<T>(v);
    if (pre) pre[i] = p;
    y[i] = from_f32<T>(apply_act(to_f32(p), act));
  }
}

template <typename T>
__global__ void act_backward_kernel(const T* dy, const T* pre, T* dx, int64_t total,
                                    Activation act) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    dx[i] = from_f32<T>(act_backward(to_f32(dy[i]), to_f32(pre[i]), act));
  }
}

constexpr int kColTile = 32, kRowThreads = 8;

// Block (32, 8) covers 32 columns of one chunk of rows: writes dx and the fp32 column sums of
// dx as stored (rounded to T, as every backend sums it), either straight into dbias (one chunk)
// or into per-chunk partials that column_sum_kernel adds up in a fixed order, so dbias is
// deterministic.
template <typename T>
__global__ void act_backward_dbias_kernel(const T* dy, const T* pre, T* dx, float* out,
                                          int64_t rows, int64_t cols, int64_t rows_per_chunk,
                                          Activation act) {
  __shared__ float partial[kRowThreads][kColTile + 1];
  const int64_t col = blockIdx.x * int64_t{kColTile} + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float sum = 0.0f;
  if (col < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      int64_t i = r * cols + col;
      const T g = from_f32<T>(act_backward(to_f32(dy[i]), to_f32(pre[i]), act));
      dx[i] = g;
      sum += to_f32(g);  // dx as stored: autocast's bias gradient sums the 16-bit dx
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float s = 0.0f;
    for (int t = 0; t < kRowThreads; ++t) s += partial[t][threadIdx.x];
    out[blockIdx.y * cols + col] = s;
  }
}

__global__ void column_sum_kernel(const float* partials, float* dbias, int64_t chunks,
                                  int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) s += partials[k * cols + c];
    dbias[c] = s;
  }
}

}  // namespace

void bias_act_forward(DeviceContext& ctx, Activation act, const Tensor& x, const Tensor* bias,
                      Tensor* pre_act, Tensor& y) {
  check_on_device(x, "bias_act x");
  check_on_device(y, "bias_act y");
  MPB_CHECK(x.dtype == y.dtype && x.numel() == y.numel(), "bias_act: x {} {} vs y {} {}",
            dtype_name(x.dtype), x.shape.str(), dtype_name(y.dtype), y.shape.str());
  const int64_t total = y.numel(), cols = y.cols();
  if (bias) {
    check_on_device(*bias, "bias_act bias");
    // Any float dtype: Backend::gemm decides which go with C's (an FP8 GEMM's bias is bf16
    // whatever C is, so its unfused path adds a bf16 bias to fp32).
    MPB_CHECK(bias->numel() == cols && (bias->dtype == DType::F32 || bias->dtype == DType::F16 ||
                                        bias->dtype == DType::BF16),
              "bias_act: bias {} {} for {} columns of {}", dtype_name(bias->dtype),
              bias->shape.str(), cols, dtype_name(y.dtype));
  }
  if (pre_act) {
    check_on_device(*pre_act, "bias_act pre_act");
    MPB_CHECK(pre_act->dtype == y.dtype && pre_act->numel() == total, "bias_act: pre_act mismatch");
  }
  if (total == 0) return;
  const int grid = ctx.grid_for(total, kThreads);
  // Without a bias the bias type is y's (the kernel reads no bias then).
  dispatch_floats(std::array{y.dtype, bias ? bias->dtype : y.dtype}, [&](auto tag, auto btag) {
    using T = typename decltype(tag)::type;
    using TB = typename decltype(btag)::type;
    T* pre = pre_act ? pre_act->ptr<T>() : nullptr;
    bias_act_forward_kernel<T, TB><<<grid, kThreads, 0, ctx.stream()>>>(
        x.ptr<const T>(), bias ? bias->ptr<const TB>() : nullptr, pre, y.ptr<T>(), total, cols,
        act);
    CUDA_LAUNCH_CHECK();
  });
}

void bias_act_backward(DeviceContext& ctx, Activation act, const Tensor& dy, const Tensor& pre_act,
                       Tensor& dx, Tensor* dbias) {
  const int64_t total = dx.numel(), cols = dx.cols(), rows = dx.rows();
  if (total == 0) {
    if (dbias && cols > 0)
      CUDA_CHECK(cudaMemsetAsync(dbias->data, 0, dbias->bytes(), ctx.stream()));
    return;
  }
  dispatch_float(dx.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!dbias) {
      act_backward_kernel<T><<<ctx.grid_for(total, kThreads), kThreads, 0, ctx.stream()>>>(
          dy.ptr<const T>(), pre_act.ptr<const T>(), dx.ptr<T>(), total, act);
      CUDA_LAUNCH_CHECK();
      return;
    }
    // Enough row chunks to fill the device, limited by the scratch space for the partials.
    const int64_t col_tiles = (cols + kColTile - 1) / kColTile;
    const int64_t target_blocks = 4 * int64_t{ctx.prop().multiProcessorCount};
    int64_t chunks = (target_blocks + col_tiles - 1) / col_tiles;
    chunks = std::min(chunks, (rows + kRowThreads - 1) / kRowThreads);
    chunks = std::min(chunks, static_cast<int64_t>(ctx.scratch_floats()) / cols);
    chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, 65535));
    const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
    MPB_CHECK(col_tiles <= 0x7fffffff, "bias_act_backward: too many columns ({})", cols);
    float* out = chunks == 1 ? dbias->ptr<float>() : ctx.scratch();
    dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
    act_backward_dbias_kernel<T><<<grid, dim3(kColTile, kRowThreads), 0, ctx.stream()>>>(
        dy.ptr<const T>(), pre_act.ptr<const T>(), dx.ptr<T>(), out, rows, cols, rows_per_chunk,
        act);
    CUDA_LAUNCH_CHECK();
    if (chunks > 1) {
      column_sum_kernel<<<ctx.grid_for(cols, kThreads), kThreads, 0, ctx.stream()>>>(
          ctx.scratch(), dbias->ptr<float>(), chunks, cols);
      CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace mpbench::cuda
