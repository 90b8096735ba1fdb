// Optimizer steps over flat fp32 buffers (PyTorch semantics), and the device-side bookkeeping of
// dynamic loss scaling. found_inf, step_count and the loss scale are read on the device, so a
// step never waits for the host.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/optimizer_rules.h"

namespace mpbench::cuda {

namespace {

// TL: fp16/bf16 low-precision copy, or float with lowp == nullptr for none.
template <typename TL>
__global__ void adamw_kernel(AdamWParams p, float* w, const float* g, float* m, float* v, TL* lowp,
                             int64_t n, const float* step_count, const float* found_inf,
                             bool vectorized) {
  if (found_inf && found_inf[0] != 0.0f) return;
  const AdamWScalars c = adamw_scalars(p, step_count[0]);
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
      for (int k = 0; k < 4; ++k) adamw_element(wv.v[k], gv.v[k], mv.v[k], vv.v[k], c);
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
    adamw_element(wi, g[i], mi, vi, c);
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
    if (!buf)  // null when momentum == 0: PyTorch keeps no buffer then
      sgd_element(wi, g[i], p.lr, p.weight_decay);
    else if (p.nesterov)
      sgd_element<true>(wi, g[i], buf[i], p.lr, p.momentum, p.weight_decay);
    else
      sgd_element<false>(wi, g[i], buf[i], p.lr, p.momentum, p.weight_decay);
    w[i] = wi;
    if (lowp) lowp[i] = from_f32<TL>(wi);
  }
}

// The rule: kernels/optimizer_rules.h.
__global__ void update_loss_scale_kernel(float* scale, int32_t* tracker, const float* found_inf,
                                         double growth, double backoff, int32_t interval) {
  loss_scale_update(scale[0], tracker[0], found_inf[0] != 0.0f, growth, backoff, interval);
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
