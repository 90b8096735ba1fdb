// Token + position embedding lookup and its backward.
// Forward: one thread per group of 4 (or 1) output elements; the sum is formed in fp32 and
// rounded once, as on the CPU, so the result is bit-identical to the reference.
// Backward: dpos_emb is a deterministic column sum over the batch (one thread per (s, d));
// dtok_emb is zeroed and then scattered with fp32 atomicAdd, one thread per dy element, because
// any token may repeat anywhere in the batch. The order of those atomic additions is not fixed,
// so dtok_emb is not bitwise deterministic from run to run (it is within fp32 rounding).
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

constexpr int kVec = 4;

// An out-of-range token cannot be reported from the device; its row becomes NaN so the loss shows
// it (the CPU reference rejects it on the host).
template <typename TY>
__global__ void embedding_forward_kernel(const int32_t* tokens, const float* tok_emb,
                                         const float* pos_emb, TY* y, int64_t rows, int64_t seq,
                                         int64_t vocab, int64_t dim, bool vectorized) {
  const int v = vectorized ? kVec : 1;
  const int64_t groups = dim / v;
  const int64_t total = rows * groups;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / groups;
    const int64_t d0 = (i - r * groups) * v;
    const int64_t s = r % seq;
    const int32_t tok = tokens[r];
    const bool valid = tok >= 0 && tok < vocab;
    const float* te = tok_emb + (valid ? tok : 0) * dim + d0;
    const float* pe = pos_emb + s * dim + d0;
    TY* out = y + r * dim + d0;
    if (vectorized) {
      const Vec<float, kVec> a = *reinterpret_cast<const Vec<float, kVec>*>(te);
      const Vec<float, kVec> b = *reinterpret_cast<const Vec<float, kVec>*>(pe);
      Vec<TY, kVec> o;
#pragma unroll
      for (int k = 0; k < kVec; ++k) o.v[k] = from_f32<TY>(valid ? a.v[k] + b.v[k] : NAN);
      *reinterpret_cast<Vec<TY, kVec>*>(out) = o;
    } else {
      out[0] = from_f32<TY>(valid ? te[0] + pe[0] : NAN);
    }
  }
}

// Rows s >= S of dpos_emb are written as zeros here too, so no separate memset is needed.
template <typename TD>
__global__ void embedding_pos_grad_kernel(const TD* dy, float* dpos, int64_t batch, int64_t seq,
                                          int64_t positions, int64_t dim) {
  const int64_t total = positions * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t s = i / dim;
    float acc = 0.0f;
    if (s < seq) {
      const int64_t stride = seq * dim;
      for (int64_t b = 0; b < batch; ++b) acc += to_f32(dy[b * stride + i]);
    }
    dpos[i] = acc;
  }
}

// Consecutive threads handle consecutive d of one row: coalesced reads of dy, and atomics to
// consecutive addresses of one dtok_emb row.
template <typename TD>
__global__ void embedding_tok_grad_kernel(const int32_t* tokens, const TD* dy, float* dtok,
                                          int64_t rows, int64_t vocab, int64_t dim) {
  const int64_t total = rows * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / dim;
    const int32_t tok = tokens[r];
    if (tok < 0 || tok >= vocab) continue;
    atomicAdd(dtok + tok * dim + (i - r * dim), to_f32(dy[i]));
  }
}

}  // namespace

void embedding_forward(DeviceContext& ctx, const EmbeddingGeom& e, const Tensor& tokens,
                       const Tensor& tok_emb, const Tensor& pos_emb, Tensor& y) {
  const int64_t rows = e.batch * e.seq;
  if (rows == 0 || e.dim == 0) return;
  const bool vec = e.dim % kVec == 0 && aligned_to(tok_emb.data, 4 * kVec) &&
                   aligned_to(pos_emb.data, 4 * kVec) &&
                   aligned_to(y.data, dtype_size(y.dtype) * kVec);
  const int grid = ctx.grid_for(vec ? rows * (e.dim / kVec) : rows * e.dim, kThreads);
  dispatch_float(y.dtype, [&](auto yt) {
    using TY = typename decltype(yt)::type;
    embedding_forward_kernel<TY><<<grid, kThreads, 0, ctx.stream()>>>(
        tokens.ptr<const int32_t>(), tok_emb.ptr<const float>(), pos_emb.ptr<const float>(),
        y.ptr<TY>(), rows, e.seq, e.vocab, e.dim, vec);
    CUDA_LAUNCH_CHECK();
  });
}

void embedding_backward(DeviceContext& ctx, const EmbeddingGeom& e, const Tensor& tokens,
                        const Tensor& dy, Tensor& dtok_emb, Tensor& dpos_emb, bool add_to_tok) {
  if (!add_to_tok && dtok_emb.numel() > 0)
    CUDA_CHECK(cudaMemsetAsync(dtok_emb.data, 0, dtok_emb.bytes(), ctx.stream()));
  const int64_t rows = e.batch * e.seq;
  dispatch_float(dy.dtype, [&](auto dt) {
    using TD = typename decltype(dt)::type;
    if (e.positions * e.dim > 0) {
      embedding_pos_grad_kernel<TD>
          <<<ctx.grid_for(e.positions * e.dim, kThreads), kThreads, 0, ctx.stream()>>>(
              dy.ptr<const TD>(), dpos_emb.ptr<float>(), e.batch, e.seq, e.positions, e.dim);
      CUDA_LAUNCH_CHECK();
    }
    if (rows * e.dim > 0) {
      embedding_tok_grad_kernel<TD>
          <<<ctx.grid_for(rows * e.dim, kThreads), kThreads, 0, ctx.stream()>>>(
              tokens.ptr<const int32_t>(), dy.ptr<const TD>(), dtok_emb.ptr<float>(), rows, e.vocab,
              e.dim);
      CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace mpbench::cuda
