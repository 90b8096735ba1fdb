// Optimizer steps and the loss-scale bookkeeping on device scalars, CPU reference, following
// PyTorch's AdamW / SGD (single-tensor path) and torch._amp_update_scale_.
//
// master, grads, m, v, momentum_buf: flat fp32, one numel; weights_lowp: same numel, fp16/bf16;
// step_count, found_inf, scale, growth_tracker: (1) fp32.
#include <algorithm>
#include <cmath>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"
#include "kernels/optimizer_rules.h"

namespace mpbench::cpu {
namespace {

bool step_skipped(const Tensor* found_inf) {
  return found_inf && found_inf->ptr<float>()[0] != 0.0f;
}

// Updates run over blocks that stay in L1: first the fp32 update, which vectorizes, then the
// cast-down of the same block into the low-precision copy, while it is still in cache.
constexpr int64_t kBlock = 2048;

void adamw_block(int64_t n, float* __restrict p, const float* __restrict g, float* __restrict m,
                 float* __restrict v, const AdamWScalars& s) {
  int64_t i = 0;
#if defined(__SSE2__)
  // The same operations in the same order, four at a time: bit-identical to the scalar loop.
  // Written out because GCC keeps a scalar sqrt (for errno) unless built with -fno-math-errno.
  // adamw_first_moment's two forms: m + w (g - m), or g - (g - m) (1 - w) for w >= 0.5.
  const bool small = s.one_minus_b1 < 0.5f;
  const __m128 w1 = _mm_set1_ps(small ? s.one_minus_b1 : 1.0f - s.one_minus_b1);
  const __m128 b2 = _mm_set1_ps(s.b2), one_b2 = _mm_set1_ps(s.one_minus_b2);
  const __m128 decay = _mm_set1_ps(s.decay), step = _mm_set1_ps(s.step_size);
  const __m128 bc2 = _mm_set1_ps(s.bc2_sqrt), eps = _mm_set1_ps(s.eps);
  for (; i + 4 <= n; i += 4) {
    const __m128 gi = _mm_loadu_ps(g + i), m0 = _mm_loadu_ps(m + i);
    const __m128 diff = _mm_sub_ps(gi, m0);
    const __m128 mi =
        small ? _mm_add_ps(m0, _mm_mul_ps(w1, diff)) : _mm_sub_ps(gi, _mm_mul_ps(diff, w1));
    const __m128 vi =
        _mm_add_ps(_mm_mul_ps(b2, _mm_loadu_ps(v + i)), _mm_mul_ps(_mm_mul_ps(one_b2, gi), gi));
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), bc2), eps);
    const __m128 upd = _mm_div_ps(_mm_mul_ps(step, mi), denom);
    _mm_storeu_ps(p + i, _mm_sub_ps(_mm_mul_ps(_mm_loadu_ps(p + i), decay), upd));
  }
#endif
  for (; i < n; ++i) adamw_element(p[i], g[i], m[i], v[i], s);
}

template <bool kNesterov>
void sgd_block(int64_t n, float* __restrict p, const float* __restrict g, float* __restrict buf,
               float lr, float momentum, float wd) {
  if (momentum == 0.0f) {
    for (int64_t i = 0; i < n; ++i) sgd_element(p[i], g[i], lr, wd);
    return;
  }
  for (int64_t i = 0; i < n; ++i) sgd_element<kNesterov>(p[i], g[i], buf[i], lr, momentum, wd);
}

// master (n) fp32 -> lowp (n) fp16/bf16, elements [begin, begin + n).
void copy_down(const float* master, Tensor* lowp, int64_t begin, int64_t n) {
  if (!lowp) return;
  Tensor dst = lowp->slice(begin, Shape{n});
  encode_f32(master + begin, dst, n);
}

}  // namespace

void CpuBackend::adamw_step_impl(const AdamWParams& p, Tensor& master, const Tensor& grads,
                                 Tensor& m, Tensor& v, Tensor* weights_lowp,
                                 const Tensor& step_count, const Tensor* found_inf) {
  if (step_skipped(found_inf)) return;

  const AdamWScalars scalars = adamw_scalars(p, step_count.ptr<float>()[0]);
  const int64_t n = master.numel();
  float* pw = master.ptr<float>();
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    adamw_block(len, pw + b, grads.ptr<float>() + b, m.ptr<float>() + b, v.ptr<float>() + b,
                scalars);
    copy_down(pw, weights_lowp, b, len);
  }
}

void CpuBackend::sgd_step_impl(const SgdParams& p, Tensor& master, const Tensor& grads,
                               Tensor& momentum_buf, Tensor* weights_lowp,
                               const Tensor* found_inf) {
  if (step_skipped(found_inf)) return;
  // Without momentum PyTorch keeps no buffer.

  float* buf = p.momentum != 0.0f ? momentum_buf.ptr<float>() : nullptr;
  const int64_t n = master.numel();
  float* pw = master.ptr<float>();
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    float* bb = buf ? buf + b : nullptr;
    if (p.nesterov) {
      sgd_block<true>(len, pw + b, grads.ptr<float>() + b, bb, p.lr, p.momentum, p.weight_decay);
    } else {
      sgd_block<false>(len, pw + b, grads.ptr<float>() + b, bb, p.lr, p.momentum, p.weight_decay);
    }
    copy_down(pw, weights_lowp, b, len);
  }
}

// The rule: kernels/optimizer_rules.h.
void CpuBackend::update_loss_scale_impl(Tensor& scale, Tensor& growth_tracker,
                                        const Tensor& found_inf, double growth_factor,
                                        double backoff_factor, int32_t growth_interval) {
  loss_scale_update(scale.ptr<float>()[0], growth_tracker.ptr<int32_t>()[0],
                    found_inf.ptr<float>()[0] != 0.0f, growth_factor, backoff_factor,
                    growth_interval);
}

void CpuBackend::count_step_impl(Tensor& step_count, const Tensor* found_inf) {
  if (step_skipped(found_inf)) return;
  step_count.ptr<float>()[0] += 1.0f;
}

}  // namespace mpbench::cpu
