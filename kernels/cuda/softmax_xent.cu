// Softmax cross-entropy with the loss gradient, fused: logits (N, C) fp32, labels (N) int32,
// dlogits (N, C) any float dtype. One warp per row, all math in fp32. Each block writes its loss
// and count to the context's scratch and a one-block finalize adds them in a fixed order, so the
// loss has the same bits on every run (atomic adds across blocks would not).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kMaxBlocks = 1024;

template <typename TG>
__global__ void softmax_xent_kernel(const float* logits, const int32_t* labels, TG* dlogits,
                                    const float* grad_scale, float* partial_loss,
                                    float* partial_correct, int64_t rows, int64_t cols, float inv_n,
                                    float inv_grad_rows) {
  __shared__ float block_loss[kWarpsPerBlock];
  __shared__ float block_correct[kWarpsPerBlock];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float coeff = (grad_scale ? grad_scale[0] : 1.0f) * inv_grad_rows;
  float warp_loss = 0.0f, warp_correct = 0.0f;

  for (int64_t row = blockIdx.x * int64_t{kWarpsPerBlock} + warp; row < rows;
       row += int64_t{gridDim.x} * kWarpsPerBlock) {
    const float* x = logits + row * cols;
    // Max and argmax; ties go to the lowest index, as in the CPU reference (and PyTorch). A lane
    // takes its first element unconditionally (am < 0: it owns none yet), so a row of -inf still
    // gets index 0; lanes that own no element (cols < 32) keep am = -1 and never win the merge.
    // NaN entries never win, as in the CPU's loop, so that the merge is a total order and all
    // lanes agree (a lane holding a NaN max would keep it and pass over the others' maxima);
    // a NaN in column 0 is the CPU's answer, NaN and index 0.
    float mx = -INFINITY;
    int64_t am = -1;
    for (int64_t j = lane; j < cols; j += 32) {
      const float v = x[j];
      if (!isnan(v) && (am < 0 || v > mx)) {
        mx = v;
        am = j;
      }
    }
    for (int off = 16; off > 0; off /= 2) {
      const float omx = __shfl_xor_sync(0xffffffffu, mx, off);
      const int64_t oam = __shfl_xor_sync(0xffffffffu, am, off);
      if (oam >= 0 && (am < 0 || omx > mx || (omx == mx && oam < am))) {
        mx = omx;
        am = oam;
      }
    }
    if (isnan(x[0])) {
      mx = x[0];
      am = 0;
    }
    const int32_t label = labels[row];
    const bool valid = label >= 0 && label < cols;
    // Read before any lane writes the row's gradient, which may be the logits' own buffer
    // (dlogits may alias logits): lanes are not ordered after the shuffles.
    const float x_label = valid ? x[label] : 0.0f;
    float sum = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) sum += expf(x[j] - mx);
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);

    if (lane == 0) {
      // An out-of-range label cannot be reported from here; a NaN loss makes it visible.
      warp_loss += valid ? logf(sum) + mx - x_label : NAN;
      warp_correct += (valid && am == label) ? 1.0f : 0.0f;
    }
    if (dlogits) {
      __syncwarp();  // every lane's reads of the row (x_label's too) before any write to it
      TG* g = dlogits + row * cols;
      const float inv_sum = 1.0f / sum;
      for (int64_t j = lane; j < cols; j += 32) {
        float p = expf(x[j] - mx) * inv_sum;
        g[j] = from_f32<TG>((p - (j == label ? 1.0f : 0.0f)) * coeff);
      }
    }
  }

  if (lane == 0) {
    block_loss[warp] = warp_loss;
    block_correct[warp] = warp_correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float l = 0.0f, c = 0.0f;
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      l += block_loss[w];
      c += block_correct[w];
    }
    partial_loss[blockIdx.x] = l * inv_n;
    partial_correct[blockIdx.x] = c;
  }
}

__global__ void softmax_xent_finalize_kernel(const float* partial_loss,
                                             const float* partial_correct, int blocks,
                                             float* loss_sum, float* correct) {
  __shared__ float shared[kThreads];
  const float l = sum_partials(partial_loss, blocks, shared);
  const float c = sum_partials(partial_correct, blocks, shared);
  if (threadIdx.x == 0) {
    loss_sum[0] += l;
    correct[0] += c;
  }
}

}  // namespace

void softmax_xent(DeviceContext& ctx, const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                  const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct, int64_t grad_rows) {
  const int64_t rows = logits.shape[0], cols = logits.shape[1];
  if (rows == 0 || cols == 0) return;
  const float inv_n = 1.0f / static_cast<float>(rows);
  const float inv_grad_rows = 1.0f / static_cast<float>(grad_rows);
  const int grid = std::min(kMaxBlocks, ctx.grid_for(rows, kWarpsPerBlock));
  MPB_CHECK(ctx.scratch_floats() >= 2 * static_cast<size_t>(kMaxBlocks), "scratch too small");
  float* partial_loss = ctx.scratch();
  float* partial_correct = ctx.scratch() + kMaxBlocks;
  const float* gs = grad_scale ? grad_scale->ptr<const float>() : nullptr;
  auto launch = [&](auto tag) {
    using TG = typename decltype(tag)::type;
    softmax_xent_kernel<TG><<<grid, kThreads, 0, ctx.stream()>>>(
        logits.ptr<const float>(), labels.ptr<const int32_t>(),
        dlogits ? dlogits->ptr<TG>() : nullptr, gs, partial_loss, partial_correct, rows, cols,
        inv_n, inv_grad_rows);
    CUDA_LAUNCH_CHECK();
  };
  if (dlogits)
    dispatch_float(dlogits->dtype, launch);
  else
    launch(TypeTag<float>{});
  softmax_xent_finalize_kernel<<<1, kThreads, 0, ctx.stream()>>>(
      partial_loss, partial_correct, grid, loss_sum.ptr<float>(), correct.ptr<float>());
  CUDA_LAUNCH_CHECK();
}

}  // namespace mpbench::cuda
