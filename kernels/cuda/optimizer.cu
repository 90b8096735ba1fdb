// Optimizer steps over flat fp32 buffers (PyTorch semantics), and the device-side bookkeeping of
// dynamic loss scaling. found_inf, step_count and the loss scale are read on the device, so a
// step never waits for the host.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

struct AdamWCoeffs {
  float beta1, beta2, eps, decay;  // decay = 1 - lr * weight_decay
  float step_size, bc2_sqrt;       // lr / (1 - beta1^t), sqrt(1 - beta2^t)
};

__device__ __forceinline__ void adamw_one(const AdamWCoeffs& c, float& w, float g, float& m,
                                          float& v) {
  w *= c.decay;
  m = c.beta1 * m + (1.0f - c.beta1) * g;
  v = c.beta2 * v + (1.0f - c.beta2) * g * g;
  w -= c.step_size * m / (sqrtf(v) / c.bc2_sqrt + c.eps);
}

// TL: fp16/bf16 low-precision copy, or float with lowp == nullptr for none.
template <typename TL>
__global__ void adamw_kernel(AdamWParams p, float* w, const float* g, float* m, float* v, TL* lowp,
                             int64_t n, const float* step_count, const float* found_inf,
                             bool vectorized) {
  if (found_inf && found_inf[0] != 0.0f) return;
  // Bias corrections in double, as the CPU reference computes them (1 - beta2^t is tiny early on).
  const double t = static_cast<double>(step_count[0]) + 1.0;
  AdamWCoeffs c;
  c.beta1 = p.beta1;
  c.beta2 = p.beta2;
  c.eps = p.eps;
  c.decay = static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weight_decay);
  c.step_size = static_cast<float>(p.lr / (1.0 - pow(static_cast<double>(p.beta1), t)));
  c.bc2_sqrt = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(p.beta2), t)));
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t done = 0;
  if (vectorized) {
    const int64_t nvec = n / 4;
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nvec; i += stride) {
      auto wv = reinterpret_cast<Vec<float, 4>*>(w)[i];
      auto gv = reinterpret_cast<const Vec<float, 4>*>(g)[i];
      auto mv = reinterpret_cast<Vec<float, 4>*>(m)[i];
      auto vv = reinterpret_cast<Vec<float, 4>*>(v)[i];
#pragma unroll
      for (int k = 0; k < 4; ++k) adamw_one(c, wv.v[k], gv.v[k], mv.v[k], vv.v[k]);
      reinterpret_cast<Vec<float, 4>*>(w)[i] = wv;
      reinterpret_cast<Vec<float, 4>*>(m)[i] = mv;
      reinterpret_cast<Vec<float, 4>*>(v)[i] = vv;
      if (lowp) {
        Vec<TL, 4> lv;
#pragma unroll
        for (int k = 0; k < 4; ++k) lv.v[k] = from_f32<TL>(wv.v[k]);
        reinterpret_cast<Vec<TL, 4>*>(lowp)[i] = lv;
      }
    }
    done = nvec * 4;
  }
  for (int64_t i = done + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    float wi = w[i], mi = m[i], vi = v[i];
    adamw_one(c, wi, g[i], mi, vi);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
    if (lowp) lowp[i] = from_f32<TL>(wi);
  }
}

template <typename TL>
__global__ void sgd_kernel(SgdParams p, float* w, const float* g, float* buf, TL* lowp, int64_t n,
                           const float* found_inf) {
  if (found_inf && found_inf[0] != 0.0f) return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float wi = w[i];
    float d = g[i] + p.weight_decay * wi;
    if (buf) {  // null when momentum == 0: PyTorch keeps no buffer then
      const float b = p.momentum * buf[i] + d;
      buf[i] = b;
      d = p.nesterov ? d + p.momentum * b : b;
    }
    wi -= p.lr * d;
    w[i] = wi;
    if (lowp) lowp[i] = from_f32<TL>(wi);
  }
}

// As torch._amp_update_scale_: the product in double, rounded to float once; an int32 tracker.
__global__ void update_loss_scale_kernel(float* scale, int32_t* tracker, const float* found_inf,
                                         double growth, double backoff, int32_t interval) {
  if (found_inf[0] != 0.0f) {
    scale[0] = static_cast<float>(static_cast<double>(scale[0]) * backoff);
    tracker[0] = 0;
    return;
  }
  const int32_t successful = tracker[0] + 1;
  if (successful >= interval) {
    const float grown = static_cast<float>(static_cast<double>(scale[0]) * growth);
    if (isfinite(grown)) scale[0] = grown;
    tracker[0] = 0;
  } else {
    tracker[0] = successful;
  }
}

__global__ void count_step_kernel(float* step_count, const float* found_inf) {
  if (found_inf && found_inf[0] != 0.0f) return;
  step_count[0] += 1.0f;
}

// Calls f(TypeTag<TL>{}) for the low-precision copy's type (float stands for "none").
template <typename F>
void dispatch_lowp(const Tensor* lowp, F&& f) {
  if (!lowp)
    f(TypeTag<float>{});
  else if (lowp->dtype == DType::F16)
    f(TypeTag<__half>{});
  else
    f(TypeTag<__nv_bfloat16>{});
}

}  // namespace

void adamw_step(DeviceContext& ctx, const AdamWParams& p, Tensor& master, const Tensor& grads,
                Tensor& m, Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                const Tensor* found_inf) {
  const int64_t n = master.numel();
  if (n == 0) return;
  const bool vectorized = aligned_to(master.data, 16) && aligned_to(grads.data, 16) &&
                          aligned_to(m.data, 16) && aligned_to(v.data, 16) &&
                          (!weights_lowp || aligned_to(weights_lowp->data, 8));
  const int grid = ctx.grid_for(vectorized ? (n + 3) / 4 : n, kThreads);
  dispatch_lowp(weights_lowp, [&](auto tag) {
    using TL = typename decltype(tag)::type;
    adamw_kernel<TL><<<grid, kThreads, 0, ctx.stream()>>>(
        p, master.ptr<float>(), grads.ptr<const float>(), m.ptr<float>(), v.ptr<float>(),
        weights_lowp ? weights_lowp->ptr<TL>() : nullptr, n, step_count.ptr<const float>(),
        found_inf ? found_inf->ptr<const float>() : nullptr, vectorized);
    CUDA_LAUNCH_CHECK();
  });
}

void sgd_step(DeviceContext& ctx, const SgdParams& p, Tensor& master, const Tensor& grads,
              Tensor& momentum_buf, Tensor* weights_lowp, const Tensor* found_inf) {
  const int64_t n = master.numel();
  const bool use_buf = p.momentum != 0.0f;
  if (n == 0) return;
  dispatch_lowp(weights_lowp, [&](auto tag) {
    using TL = typename decltype(tag)::type;
    sgd_kernel<TL><<<ctx.grid_for(n, kThreads), kThreads, 0, ctx.stream()>>>(
        p, master.ptr<float>(), grads.ptr<const float>(),
        use_buf ? momentum_buf.ptr<float>() : nullptr,
        weights_lowp ? weights_lowp->ptr<TL>() : nullptr, n,
        found_inf ? found_inf->ptr<const float>() : nullptr);
    CUDA_LAUNCH_CHECK();
  });
}

void update_loss_scale(DeviceContext& ctx, Tensor& scale, Tensor& growth_tracker,
                       const Tensor& found_inf, double growth_factor, double backoff_factor,
                       int32_t growth_interval) {
  update_loss_scale_kernel<<<1, 1, 0, ctx.stream()>>>(
      scale.ptr<float>(), growth_tracker.ptr<int32_t>(), found_inf.ptr<const float>(),
      growth_factor, backoff_factor, growth_interval);
  CUDA_LAUNCH_CHECK();
}

void count_step(DeviceContext& ctx, Tensor& step_count, const Tensor* found_inf) {
  count_step_kernel<<<1, 1, 0, ctx.stream()>>>(step_count.ptr<float>(),
                                               found_inf ? found_inf->ptr<const float>() : nullptr);
  CUDA_LAUNCH_CHECK();
}

}  // namespace mpbench::cuda
