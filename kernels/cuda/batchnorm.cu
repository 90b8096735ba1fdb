// Batch normalisation over the channels of (rows = N*H*W, C), NHWC.
//
// Training forward: a pass over row chunks (block = 32 channels x 8 row threads, coalesced over C)
// sums each thread's rows shifted by its first one, merges the threads' (mean, M2) and writes
// per-chunk partials to the context's scratch; a finalize kernel merges them in a fixed chunk
// order (Chan et al.), so the statistics are deterministic, writes save_mean / save_rstd,
// updates the running statistics and leaves per-channel (mean, gamma*rstd, beta) in scratch for
// the elementwise apply kernel. Backward has the same shape: per-chunk sums of g and
// g*(x - mean), a finalize writing dgamma / dbeta and the dx coefficients, then an elementwise
// dx kernel. No op allocates or synchronises, so all of it can be graph-captured.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/moments.h"
#include "kernels/relu.h"

namespace mpbench::cuda {

namespace {

constexpr int kColTile = 32, kRowThreads = 8;
constexpr int kVec = 4;

// Residual, relu_out and d_pre take any float dtype; a uniform runtime switch keeps the number of
// kernel instantiations down (the branch is the same for the whole grid).
__device__ __forceinline__ float load_any(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::F16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case DType::BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_any(void* p, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::F16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      return;
    case DType::BF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      return;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

// The kVec elements of vector i of a buffer of any float dtype (aligned to kVec elements).
template <typename T>
__device__ __forceinline__ void load_vec(const void* p, int64_t i, float (&out)[kVec]) {
  const Vec<T, kVec> v = static_cast<const Vec<T, kVec>*>(p)[i];
#pragma unroll
  for (int k = 0; k < kVec; ++k) out[k] = to_f32(v.v[k]);
}
__device__ __forceinline__ void load_vec_any(const void* p, DType dt, int64_t i,
                                             float (&out)[kVec]) {
  switch (dt) {
    case DType::F16:
      load_vec<__half>(p, i, out);
      return;
    case DType::BF16:
      load_vec<__nv_bfloat16>(p, i, out);
      return;
    default:
      load_vec<float>(p, i, out);
  }
}

// Per-channel coefficients kVec at a time: group g holds channels g * kVec ...
__device__ __forceinline__ Vec<float, kVec> coef_vec(const float* c, int64_t g) {
  return reinterpret_cast<const Vec<float, kVec>*>(c)[g];
}

// Number of rows r0 + k * step (k >= 0) below r1.
__device__ __forceinline__ float rows_seen(int64_t r0, int64_t r1, int64_t step) {
  return r0 < r1 ? static_cast<float>((r1 - r0 + step - 1) / step) : 0.0f;
}

template <typename T>
__global__ void bn_stats_partial_kernel(const T* __restrict__ x, float* part_mean, float* part_m2,
                                        int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  __shared__ float s_mean[kRowThreads][kColTile + 1];
  __shared__ float s_m2[kRowThreads][kColTile + 1];
  const int64_t col = blockIdx.x * int64_t{kColTile} + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  const int64_t first = r0 + threadIdx.y;
  float mean = 0.0f, m2 = 0.0f;
  if (col < cols && first < r1) {
    // Sums of v - shift and of its square, the shift being the thread's first value (see
    // kernels/moments.h, shared with the native CPU): FMAs
    // only, where Welford's division per element left the kernel compute-bound on 16-bit data
    // (PyTorch's Welford statistics kernel read bf16 at 0.7 TB/s on the H200). A shift drawn
    // from the channel keeps the sum of squares from cancelling.
    const float shift = moments_shift(to_f32(x[first * cols + col]));
    float sum = 0.0f, sq = 0.0f;
    int64_t r = first;
    // Four independent loads in flight per thread.
    for (; r + 3 * kRowThreads < r1; r += 4 * kRowThreads) {
      float v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = to_f32(x[(r + k * kRowThreads) * cols + col]) - shift;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        sum += v[k];
        sq = fmaf(v[k], v[k], sq);
      }
    }
    for (; r < r1; r += kRowThreads) {
      const float v = to_f32(x[r * cols + col]) - shift;
      sum += v;
      sq = fmaf(v, v, sq);
    }
    const float d = sum / rows_seen(first, r1, kRowThreads);
    mean = shift + d;
    m2 = fmaxf(sq - sum * d, 0.0f);
  }
  s_mean[threadIdx.y][threadIdx.x] = mean;
  s_m2[threadIdx.y][threadIdx.x] = m2;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float tn = 0.0f, tm = 0.0f, tm2 = 0.0f;
    for (int t = 0; t < kRowThreads; ++t)
      merge_moments(tn, tm, tm2, rows_seen(r0 + t, r1, kRowThreads), s_mean[t][threadIdx.x],
                    s_m2[t][threadIdx.x]);
    part_mean[blockIdx.y * cols + col] = tm;
    part_m2[blockIdx.y * cols + col] = tm2;
  }
}

// coef layout: [mean (C) | gamma * rstd (C) | beta (C)], what bn_apply_kernel reads.
// part_mean / part_m2 may be save_mean / save_rstd themselves (one chunk): each thread reads its
// channel before writing it.
__global__ void bn_stats_finalize_kernel(const float* part_mean, const float* part_m2,
                                         int64_t chunks, int64_t rows, int64_t rows_per_chunk,
                                         int64_t cols, float eps, float momentum,
                                         const float* gamma, const float* beta, float* running_mean,
                                         float* running_var, float* save_mean, float* save_rstd,
                                         float* coef) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t r0 = k * rows_per_chunk;
      const float nb = static_cast<float>(min(rows, r0 + rows_per_chunk) - r0);
      merge_moments(n, mean, m2, nb, part_mean[k * cols + c], part_m2[k * cols + c]);
    }
    const float var = m2 / static_cast<float>(rows);
    const float rstd = 1.0f / sqrtf(var + eps);
    const float unbiased = m2 / static_cast<float>(rows - 1);
    save_mean[c] = mean;
    save_rstd[c] = rstd;
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
    coef[c] = mean;
    coef[cols + c] = gamma[c] * rstd;
    coef[2 * cols + c] = beta[c];
  }
}

__global__ void bn_eval_coef_kernel(const float* running_mean, const float* running_var,
                                    const float* gamma, const float* beta, int64_t cols, float eps,
                                    float* coef) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    coef[c] = running_mean[c];
    coef[cols + c] = gamma[c] * (1.0f / sqrtf(running_var[c] + eps));
    coef[2 * cols + c] = beta[c];
  }
}

// y = [relu]((x - mean) * (gamma * rstd) + beta [+ residual]), the normalised value rounded to
// x's dtype before the residual add (as the reference). Vectorised over groups of kVec
// channels when cols % kVec == 0 and the pointers allow it. The channel index is carried along
// the grid-stride loop instead of a 64-bit modulo per element.
template <typename TX, typename TY>
__global__ void bn_apply_kernel(const TX* x, const void* res, DType res_dt, const float* coef,
                                bool relu, TY* y, int64_t rows, int64_t cols, bool vectorized) {
  const int v = vectorized ? kVec : 1;
  const int64_t groups_per_row = cols / v;
  const int64_t total = rows * groups_per_row;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= total) return;
  int64_t g = i % groups_per_row;
  const int64_t g_step = stride % groups_per_row;
  const float* mean = coef;
  const float* scale = coef + cols;
  const float* shift = coef + 2 * cols;
  for (; i < total; i += stride) {
    const int64_t c0 = g * v;
    if (vectorized) {
      const Vec<TX, kVec> in = reinterpret_cast<const Vec<TX, kVec>*>(x)[i];
      const Vec<float, kVec> m = coef_vec(mean, g), sc = coef_vec(scale, g),
                             sh = coef_vec(shift, g);
      float r[kVec];
      if (res) load_vec_any(res, res_dt, i, r);
      Vec<TY, kVec> out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        float o = (to_f32(in.v[k]) - m.v[k]) * sc.v[k] + sh.v[k];
        if (res) o = to_f32(from_f32<TX>(o)) + r[k];
        if (relu) o = relu_forward(o);
        out.v[k] = from_f32<TY>(o);
      }
      reinterpret_cast<Vec<TY, kVec>*>(y)[i] = out;
    } else {
      float o = (to_f32(x[i]) - mean[c0]) * scale[c0] + shift[c0];
      if (res) o = to_f32(from_f32<TX>(o)) + load_any(res, res_dt, i);
      if (relu) o = relu_forward(o);
      y[i] = from_f32<TY>(o);
    }
    g += g_step;
    if (g >= groups_per_row) g -= groups_per_row;
  }
}

// Per-chunk column sums of g and g * (x - mean), g = dy where ReLU let it through (relu.h);
// writes d_pre = g.
template <typename TD, typename TX>
__global__ void bn_backward_partial_kernel(const TD* dy, const void* relu_out, DType relu_dt,
                                           const TX* x, const float* save_mean, void* d_pre,
                                           DType d_pre_dt, float* part_g, float* part_gx,
                                           int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  const int64_t col = blockIdx.x * int64_t{kColTile} + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float sg = 0.0f, sgx = 0.0f;
  if (col < cols) {
    const float mean = save_mean[col];
    auto grad = [&](int64_t i) {
      const float g = to_f32(dy[i]);
      return relu_out ? relu_backward(g, load_any(relu_out, relu_dt, i)) : g;
    };
    int64_t r = r0 + threadIdx.y;
    // Four rows' loads in flight per thread before they are used (d_pre, which may alias dy,
    // is written only at the elements just read).
    for (; r + 3 * kRowThreads < r1; r += 4 * kRowThreads) {
      float g[4], xc[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t i = (r + k * kRowThreads) * cols + col;
        g[k] = grad(i);
        xc[k] = to_f32(x[i]) - mean;
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (d_pre) store_any(d_pre, d_pre_dt, (r + k * kRowThreads) * cols + col, g[k]);
        sg += g[k];
        sgx += g[k] * xc[k];
      }
    }
    for (; r < r1; r += kRowThreads) {
      const int64_t i = r * cols + col;
      const float g = grad(i);
      if (d_pre) store_any(d_pre, d_pre_dt, i, g);
      sg += g;
      sgx += g * (to_f32(x[i]) - mean);
    }
  }
  write_column_partials<kRowThreads, kColTile>(sg, sgx, col, cols, part_g, part_gx);
}

// coef layout: [mean | gamma * rstd | dbeta / N | rstd * dgamma / N], so that
// dx = gamma * rstd * (g - dbeta / N - xhat * dgamma / N) = coef1 * (g - coef2 - (x - mean) coef3).
// part_g / part_gx may be dbeta / dgamma themselves (one chunk).
__global__ void bn_backward_finalize_kernel(const float* part_g, const float* part_gx,
                                            int64_t chunks, int64_t rows, int64_t cols,
                                            const float* gamma, const float* save_mean,
                                            const float* save_rstd, float* dgamma, float* dbeta,
                                            float* coef) {
  const float inv_n = 1.0f / static_cast<float>(rows);
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      sg += part_g[k * cols + c];
      sgx += part_gx[k * cols + c];
    }
    const float rstd = save_rstd[c];
    const float dg = sgx * rstd;
    dbeta[c] = sg;
    dgamma[c] = dg;
    coef[c] = save_mean[c];
    coef[cols + c] = gamma[c] * rstd;
    coef[2 * cols + c] = sg * inv_n;
    coef[3 * cols + c] = rstd * dg * inv_n;
  }
}

template <typename TD, typename TX>
__global__ void bn_backward_dx_kernel(const TD* dy, const void* relu_out, DType relu_dt,
                                      const TX* x, const float* coef, TX* dx, int64_t rows,
                                      int64_t cols, bool vectorized) {
  const int v = vectorized ? kVec : 1;
  const int64_t groups_per_row = cols / v;
  const int64_t total = rows * groups_per_row;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= total) return;
  int64_t g = i % groups_per_row;
  const int64_t g_step = stride % groups_per_row;
  const float* mean = coef;
  const float* k1 = coef + cols;
  const float* k2 = coef + 2 * cols;
  const float* k3 = coef + 3 * cols;
  for (; i < total; i += stride) {
    const int64_t c0 = g * v;
    if (vectorized) {
      const Vec<TD, kVec> d = reinterpret_cast<const Vec<TD, kVec>*>(dy)[i];
      const Vec<TX, kVec> xv = reinterpret_cast<const Vec<TX, kVec>*>(x)[i];
      const Vec<float, kVec> m = coef_vec(mean, g), a = coef_vec(k1, g), b = coef_vec(k2, g),
                             c = coef_vec(k3, g);
      float ro[kVec];
      if (relu_out) load_vec_any(relu_out, relu_dt, i, ro);
      Vec<TX, kVec> out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        float gr = to_f32(d.v[k]);
        if (relu_out) gr = relu_backward(gr, ro[k]);
        out.v[k] = from_f32<TX>(a.v[k] * (gr - b.v[k] - (to_f32(xv.v[k]) - m.v[k]) * c.v[k]));
      }
      reinterpret_cast<Vec<TX, kVec>*>(dx)[i] = out;
    } else {
      float gr = to_f32(dy[i]);
      if (relu_out) gr = relu_backward(gr, load_any(relu_out, relu_dt, i));
      dx[i] = from_f32<TX>(k1[c0] * (gr - k2[c0] - (to_f32(x[i]) - mean[c0]) * k3[c0]));
    }
    g += g_step;
    if (g >= groups_per_row) g -= groups_per_row;
  }
}

struct Chunking {
  int64_t chunks = 1, rows_per_chunk = 1;
};

// Enough row chunks to fill the device, limited by the scratch left after `reserved` floats
// (two partial floats per chunk and channel) and by the grid's y limit.
Chunking plan_chunks(const DeviceContext& ctx, int64_t rows, int64_t cols, int64_t reserved) {
  const int64_t col_tiles = (cols + kColTile - 1) / kColTile;
  const int64_t target_blocks = 8 * int64_t{ctx.prop().multiProcessorCount};
  int64_t chunks = (target_blocks + col_tiles - 1) / col_tiles;
  // At least 64 rows (8 per thread) per chunk, so the merge does not dominate.
  chunks = std::min(chunks, (rows + 63) / 64);
  const int64_t room = static_cast<int64_t>(ctx.scratch_floats()) - reserved;
  chunks = std::min(chunks, room / (2 * cols));
  chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, 65535));
  Chunking ch;
  ch.rows_per_chunk = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
  ch.chunks = std::max<int64_t>(1, (rows + ch.rows_per_chunk - 1) / ch.rows_per_chunk);
  return ch;
}

// The apply kernel's scratch needs (coefficients) must fit next to nothing else.
void check_coef_room(const DeviceContext& ctx, int64_t floats, const char* what) {
  MPB_CHECK(static_cast<size_t>(floats) <= ctx.scratch_floats(),
            "{}: {} channels do not fit the reduction scratch", what, floats);
}

bool vector_ok(int64_t cols, std::initializer_list<const Tensor*> ts) {
  if (cols % kVec != 0) return false;
  for (const Tensor* t : ts)
    if (t && !aligned_to(t->data, dtype_size(t->dtype) * kVec)) return false;
  return true;
}

void launch_apply(DeviceContext& ctx, const Tensor& x, const Tensor* residual, const float* coef,
                  bool relu, Tensor& y) {
  const int64_t rows = x.rows(), cols = x.cols();
  const bool vec = vector_ok(cols, {&x, &y, residual});
  const int64_t work = vec ? rows * (cols / kVec) : rows * cols;
  const int grid = ctx.grid_for(work, kThreads);
  dispatch_floats(std::array{x.dtype, y.dtype}, [&](auto xt, auto yt) {
    using TX = typename decltype(xt)::type;
    using TY = typename decltype(yt)::type;
    bn_apply_kernel<TX, TY><<<grid, kThreads, 0, ctx.stream()>>>(
        x.ptr<const TX>(), residual ? residual->data : nullptr,
        residual ? residual->dtype : DType::F32, coef, relu, y.ptr<TY>(), rows, cols, vec);
    CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

void batchnorm_forward_train(DeviceContext& ctx, const BatchNormDesc& d, const Tensor& x,
                             const Tensor* residual, const Tensor& gamma, const Tensor& beta,
                             Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                             Tensor& save_rstd, Tensor& y) {
  const int64_t rows = x.rows(), cols = x.cols();
  if (cols == 0) return;
  const int64_t coef_floats = 3 * cols;
  check_coef_room(ctx, coef_floats, "batchnorm_forward_train");
  const Chunking ch = plan_chunks(ctx, rows, cols, coef_floats);
  float* coef = ctx.scratch();
  float* part_mean = ch.chunks == 1 ? save_mean.ptr<float>() : ctx.scratch() + coef_floats;
  float* part_m2 = ch.chunks == 1 ? save_rstd.ptr<float>() : part_mean + ch.chunks * cols;
  const dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile),
                  static_cast<unsigned>(ch.chunks));
  MPB_CHECK((cols + kColTile - 1) / kColTile <= 0x7fffffff, "batchnorm: too many channels ({})",
            cols);
  dispatch_float(x.dtype, [&](auto xt) {
    using TX = typename decltype(xt)::type;
    bn_stats_partial_kernel<TX><<<grid, dim3(kColTile, kRowThreads), 0, ctx.stream()>>>(
        x.ptr<const TX>(), part_mean, part_m2, rows, cols, ch.rows_per_chunk);
    CUDA_LAUNCH_CHECK();
  });
  bn_stats_finalize_kernel<<<ctx.grid_for(cols, kThreads), kThreads, 0, ctx.stream()>>>(
      part_mean, part_m2, ch.chunks, rows, ch.rows_per_chunk, cols, d.eps, d.momentum,
      gamma.ptr<const float>(), beta.ptr<const float>(), running_mean.ptr<float>(),
      running_var.ptr<float>(), save_mean.ptr<float>(), save_rstd.ptr<float>(), coef);
  CUDA_LAUNCH_CHECK();
  launch_apply(ctx, x, residual, coef, d.relu, y);
}

void batchnorm_forward_eval(DeviceContext& ctx, const BatchNormDesc& d, const Tensor& x,
                            const Tensor* residual, const Tensor& gamma, const Tensor& beta,
                            const Tensor& running_mean, const Tensor& running_var, Tensor& y) {
  const int64_t rows = x.rows(), cols = x.cols();
  if (rows == 0 || cols == 0) return;
  check_coef_room(ctx, 3 * cols, "batchnorm_forward_eval");
  float* coef = ctx.scratch();
  bn_eval_coef_kernel<<<ctx.grid_for(cols, kThreads), kThreads, 0, ctx.stream()>>>(
      running_mean.ptr<const float>(), running_var.ptr<const float>(), gamma.ptr<const float>(),
      beta.ptr<const float>(), cols, d.eps, coef);
  CUDA_LAUNCH_CHECK();
  launch_apply(ctx, x, residual, coef, d.relu, y);
}

void batchnorm_backward(DeviceContext& ctx, const Tensor& dy, const Tensor* relu_out,
                        const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        Tensor* d_pre) {
  const int64_t rows = x.rows(), cols = x.cols();
  if (cols == 0) return;
  if (rows == 0) {
    CUDA_CHECK(cudaMemsetAsync(dgamma.data, 0, dgamma.bytes(), ctx.stream()));
    CUDA_CHECK(cudaMemsetAsync(dbeta.data, 0, dbeta.bytes(), ctx.stream()));
    return;
  }
  const int64_t coef_floats = 4 * cols;
  check_coef_room(ctx, coef_floats, "batchnorm_backward");
  const Chunking ch = plan_chunks(ctx, rows, cols, coef_floats);
  float* coef = ctx.scratch();
  float* part_g = ch.chunks == 1 ? dbeta.ptr<float>() : ctx.scratch() + coef_floats;
  float* part_gx = ch.chunks == 1 ? dgamma.ptr<float>() : part_g + ch.chunks * cols;
  const dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile),
                  static_cast<unsigned>(ch.chunks));
  const void* relu_ptr = relu_out ? relu_out->data : nullptr;
  const DType relu_dt = relu_out ? relu_out->dtype : DType::F32;
  dispatch_floats(std::array{dy.dtype, x.dtype}, [&](auto dt, auto xt) {
    using TD = typename decltype(dt)::type;
    using TX = typename decltype(xt)::type;
    bn_backward_partial_kernel<TD, TX><<<grid, dim3(kColTile, kRowThreads), 0, ctx.stream()>>>(
        dy.ptr<const TD>(), relu_ptr, relu_dt, x.ptr<const TX>(), save_mean.ptr<const float>(),
        d_pre ? d_pre->data : nullptr, d_pre ? d_pre->dtype : DType::F32, part_g, part_gx, rows,
        cols, ch.rows_per_chunk);
    CUDA_LAUNCH_CHECK();
  });
  bn_backward_finalize_kernel<<<ctx.grid_for(cols, kThreads), kThreads, 0, ctx.stream()>>>(
      part_g, part_gx, ch.chunks, rows, cols, gamma.ptr<const float>(),
      save_mean.ptr<const float>(), save_rstd.ptr<const float>(), dgamma.ptr<float>(),
      dbeta.ptr<float>(), coef);
  CUDA_LAUNCH_CHECK();
  const bool vec = vector_ok(cols, {&dy, &x, &dx, relu_out});
  const int grid_dx = ctx.grid_for(vec ? rows * (cols / kVec) : rows * cols, kThreads);
  dispatch_floats(std::array{dy.dtype, x.dtype}, [&](auto dt, auto xt) {
    using TD = typename decltype(dt)::type;
    using TX = typename decltype(xt)::type;
    bn_backward_dx_kernel<TD, TX><<<grid_dx, kThreads, 0, ctx.stream()>>>(
        dy.ptr<const TD>(), relu_ptr, relu_dt, x.ptr<const TX>(), coef, dx.ptr<TX>(), rows, cols,
        vec);
    CUDA_LAUNCH_CHECK();
  });
}

}  // namespace mpbench::cuda
