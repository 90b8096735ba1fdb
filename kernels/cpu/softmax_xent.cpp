// Fused softmax + cross-entropy (forward loss, accuracy count, and the logits gradient), CPU
// reference. Always fp32 math, whatever the mode: the logits reach the loss as fp32.
//
// logits: (N, C) fp32; labels: (N) int32 in [0, C); dlogits: (N, C) any float dtype;
// grad_scale, loss_sum, correct: (1) fp32.
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {

int64_t argmax_first(const float* row, int64_t n, float* max) {
  int64_t arg = 0;
  float m = row[0];
  for (int64_t j = 1; j < n; ++j) {
    if (row[j] > m) {
      m = row[j];
      arg = j;
    }
  }
  *max = m;
  return arg;
}

void check_labels(const int32_t* labels, int64_t rows, int64_t classes) {
  for (int64_t i = 0; i < rows; ++i)
    MPB_CHECK(labels[i] >= 0 && labels[i] < classes,
              "softmax_xent: label {} of row {} is outside [0, {})", labels[i], i, classes);
}

void CpuBackend::softmax_xent_impl(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                                   const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                                   int64_t grad_rows) {
  const int64_t rows = logits.shape[0], classes = logits.shape[1];
  const float scale = grad_scale ? grad_scale->ptr<float>()[0] : 1.0f;
  const float* x = logits.ptr<float>();
  const int32_t* y = labels.ptr<int32_t>();
  check_labels(y, rows, classes);

  // The gradient's 1/R and the loss scale fold into one factor (the GPU's scale * (1/R) is the
  // same float for a power-of-two scale, GradScaler's).
  const float grad_factor = scale / static_cast<float>(grad_rows);
  double loss_total = 0;
  int64_t hits = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = x + i * classes;
    float max;
    const int64_t arg = argmax_first(row, classes, &max);
    float sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(row[j] - max);
    const float log_sum = std::log(sum);
    loss_total += static_cast<double>(log_sum + max - row[y[i]]);
    hits += arg == y[i];
    if (!dlogits) continue;
    const float inv_sum = 1.0f / sum;
    detail::dispatch_float(dlogits->dtype, [&](auto e) {
      using E = decltype(e);
      auto* d = dlogits->ptr<typename E::T>() + i * classes;
      for (int64_t j = 0; j < classes; ++j) {
        const float p = std::exp(row[j] - max) * inv_sum;
        d[j] = E::store((p - (j == y[i] ? 1.0f : 0.0f)) * grad_factor);
      }
    });
  }
  loss_sum.ptr<float>()[0] += static_cast<float>(loss_total / static_cast<double>(rows));
  correct.ptr<float>()[0] += static_cast<float>(hits);
}

}  // namespace mpbench::cpu
