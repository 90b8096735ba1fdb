// Optimizer steps and the loss-scale bookkeeping on device scalars, CPU reference, following
// PyTorch's AdamW / SGD (single-tensor path) and torch._amp_update_scale_.
//
// master, grads, m, v, momentum_buf: flat fp32, one numel; weights_lowp: same numel, fp16/bf16;
// step_count, found_inf, scale, growth_tracker: (1) fp32.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {
namespace {

bool step_skipped(const Tensor* found_inf, const char* what) {
  if (!found_inf) return false;
  check_scalar(*found_inf, what);
  return found_inf->ptr<float>()[0] != 0.0f;
}

void check_same_numel(const Tensor& t, const Tensor& master, DType dt, const char* what) {
  check_tensor(t, dt, what);
  MPB_CHECK(t.numel() == master.numel(), "{}: {} elements, master weights have {}", what, t.numel(),
            master.numel());
}

void check_lowp(const Tensor* w, const Tensor& master, const char* what) {
  if (!w) return;
  MPB_CHECK(w->dtype == DType::F16 || w->dtype == DType::BF16,
            "{}: the low-precision copy must be fp16 or bf16, got {}", what, dtype_name(w->dtype));
  check_same_numel(*w, master, w->dtype, what);
}

// The loops are templates over the copy's element type so that the cast-down happens in the
// same pass as the update. E is Elem<F32> when there is no copy (out is then unused).
template <class E, bool kCopy>
void adamw_loop(int64_t n, float* p, const float* g, float* m, float* v, typename E::T* out,
                float decay, float b1, float b2, float step_size, float bc2_sqrt, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    float w = p[i] * decay;
    const float mi = b1 * m[i] + (1.0f - b1) * g[i];
    const float vi = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    w -= step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = w;
    if constexpr (kCopy) out[i] = E::store(w);
  }
}

template <class E, bool kCopy, bool kNesterov>
void sgd_loop(int64_t n, float* p, const float* g, float* buf, typename E::T* out, float lr,
              float momentum, float wd) {
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] + wd * p[i];
    if (momentum != 0.0f) {
      const float b = momentum * buf[i] + d;
      buf[i] = b;
      d = kNesterov ? d + momentum * b : b;
    }
    const float w = p[i] - lr * d;
    p[i] = w;
    if constexpr (kCopy) out[i] = E::store(w);
  }
}

// Calls f(Elem<copy dtype>{}, bool_constant<has copy>{}).
template <class F>
void dispatch_copy(const Tensor* lowp, F&& f) {
  if (!lowp) {
    f(detail::Elem<DType::F32>{}, std::false_type{});
  } else if (lowp->dtype == DType::F16) {
    f(detail::Elem<DType::F16>{}, std::true_type{});
  } else {
    f(detail::Elem<DType::BF16>{}, std::true_type{});
  }
}

}  // namespace

void adamw_step(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m, Tensor& v,
                Tensor* weights_lowp, const Tensor& step_count, const Tensor* found_inf) {
  check_tensor(master, DType::F32, "adamw_step: master");
  check_same_numel(grads, master, DType::F32, "adamw_step: grads");
  check_same_numel(m, master, DType::F32, "adamw_step: m");
  check_same_numel(v, master, DType::F32, "adamw_step: v");
  check_lowp(weights_lowp, master, "adamw_step: weights_lowp");
  check_scalar(step_count, "adamw_step: step_count");
  if (step_skipped(found_inf, "adamw_step: found_inf")) return;

  // Bias corrections in double, as PyTorch computes them from a host step count.
  const double t = static_cast<double>(step_count.ptr<float>()[0]) + 1.0;
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), t);
  // PyTorch's arrangement of the same formula: p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
  const auto step_size = static_cast<float>(p.lr / bc1);
  const auto bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const auto decay = static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weight_decay);
  void* lowp_raw = weights_lowp ? weights_lowp->data : nullptr;
  dispatch_copy(weights_lowp, [&](auto e, auto copy) {
    using E = decltype(e);
    adamw_loop<E, decltype(copy)::value>(
        master.numel(), master.ptr<float>(), grads.ptr<float>(), m.ptr<float>(), v.ptr<float>(),
        static_cast<typename E::T*>(lowp_raw), decay, p.beta1, p.beta2, step_size, bc2_sqrt, p.eps);
  });
}

void sgd_step(const SgdParams& p, Tensor& master, const Tensor& grads, Tensor& momentum_buf,
              Tensor* weights_lowp, const Tensor* found_inf) {
  check_tensor(master, DType::F32, "sgd_step: master");
  check_same_numel(grads, master, DType::F32, "sgd_step: grads");
  MPB_CHECK(!p.nesterov || p.momentum > 0.0f, "sgd_step: nesterov needs momentum > 0, got {}",
            p.momentum);
  // Without momentum PyTorch keeps no buffer, so none is required here.
  if (p.momentum != 0.0f) check_same_numel(momentum_buf, master, DType::F32, "sgd_step: momentum");
  check_lowp(weights_lowp, master, "sgd_step: weights_lowp");
  if (step_skipped(found_inf, "sgd_step: found_inf")) return;

  float* buf = p.momentum != 0.0f ? momentum_buf.ptr<float>() : nullptr;
  void* lowp_raw = weights_lowp ? weights_lowp->data : nullptr;
  dispatch_copy(weights_lowp, [&](auto e, auto copy) {
    using E = decltype(e);
    auto* out = static_cast<typename E::T*>(lowp_raw);
    if (p.nesterov) {
      sgd_loop<E, decltype(copy)::value, true>(master.numel(), master.ptr<float>(),
                                               grads.ptr<float>(), buf, out, p.lr, p.momentum,
                                               p.weight_decay);
    } else {
      sgd_loop<E, decltype(copy)::value, false>(master.numel(), master.ptr<float>(),
                                                grads.ptr<float>(), buf, out, p.lr, p.momentum,
                                                p.weight_decay);
    }
  });
}

void update_loss_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                       float growth_factor, float backoff_factor, int growth_interval) {
  check_scalar(scale, "update_loss_scale: scale");
  check_scalar(growth_tracker, "update_loss_scale: growth_tracker");
  check_scalar(found_inf, "update_loss_scale: found_inf");
  MPB_CHECK(growth_interval > 0, "update_loss_scale: growth_interval must be > 0, got {}",
            growth_interval);
  float& s = scale.ptr<float>()[0];
  float& tracker = growth_tracker.ptr<float>()[0];
  if (found_inf.ptr<float>()[0] != 0.0f) {
    s *= backoff_factor;
    tracker = 0.0f;
    return;
  }
  const float successful = tracker + 1.0f;
  if (successful >= static_cast<float>(growth_interval)) {
    const float grown = s * growth_factor;
    if (std::isfinite(grown)) s = grown;
    tracker = 0.0f;
  } else {
    tracker = successful;
  }
}

void count_step(Tensor& step_count, const Tensor* found_inf) {
  check_scalar(step_count, "count_step: step_count");
  if (step_skipped(found_inf, "count_step: found_inf")) return;
  step_count.ptr<float>()[0] += 1.0f;
}

}  // namespace mpbench::cpu
