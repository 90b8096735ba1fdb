// The attention softmax (forward and backward) and the softmax + cross-entropy loss as vectorised
// loops on all threads (oneDNN's softmax has no causal mask and no loss). The reference's formulas,
// row by row, with two differences that keep them within the parity tests' tolerances: exp is a
// polynomial the compiler vectorises (exp_nonpositive, vector_math.h), and the row sums add in
// vector lanes. Each function is compiled for AVX-512, AVX2 and baseline x86-64, the best chosen at
// load.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"
#include "kernels/onednn/vector_math.h"

namespace mpbench::onednn {
namespace {

// out[j] = exp(row[j] - max) for j < n (out may be row); returns their sum.
MPBENCH_VECTOR_CLONES float exp_shifted_sum(const float* row, float* out, int64_t n, float max) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    out[j] = exp_nonpositive(row[j] - max);
    sum += out[j];
  }
  return sum;
}

// The softmax of scale * row over its first `visible` entries, in place; the rest 0.
MPBENCH_VECTOR_CLONES void softmax_row(float* row, int64_t visible, int64_t n, float scale) {
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) row[j] *= scale;
  // A NaN score makes the row NaN whichever max it gives (exp(NaN - max), or exp(x - NaN)), so
  // the reduction need not skip NaN as the reference's fmax does.
  float max = row[0];
#pragma omp simd reduction(max : max)
  for (int64_t j = 1; j < visible; ++j) max = row[j] > max ? row[j] : max;
  const float inv = 1.0f / exp_shifted_sum(row, row, visible, max);
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
  for (int64_t j = visible; j < n; ++j) row[j] = 0.0f;
}

// g = p == 0 ? 0 : scale * p * (g - sum(g p)) over a row of n: the softmax's backward.
MPBENCH_VECTOR_CLONES void softmax_backward_row(float* g, const float* p, int64_t n, float scale) {
  double dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(g[j]) * p[j];
  const float d = static_cast<float>(dot);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) g[j] = p[j] == 0.0f ? 0.0f : scale * p[j] * (g[j] - d);
}

// The index of the row's largest entry, ties to the lowest, and that entry: cpu::argmax_first's
// answer (NaN entries are never the largest, unless row[0] is NaN, which then stays), from a
// vector max and a scan for its first occurrence. Should the max be one the row does not hold
// (reduction lanes started from a value it lacks; GCC starts them from -inf), the reference's loop
// answers.
MPBENCH_VECTOR_CLONES int64_t argmax_first(const float* row, int64_t n, float* max) {
  float m = row[0];
  if (m != m) {
    *max = m;
    return 0;
  }
#pragma omp simd reduction(max : m)
  for (int64_t j = 1; j < n; ++j) m = row[j] > m ? row[j] : m;
  // Its first occurrence: a vector test per block, the scalar scan in the block that has it.
  constexpr int64_t kBlock = 64;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    int found = 0;
#pragma omp simd reduction(| : found)
    for (int64_t j = b; j < end; ++j) found |= row[j] == m;
    if (found)
      for (int64_t j = b; j < end; ++j)
        if (row[j] == m) {
          *max = m;
          return j;
        }
  }
  return cpu::argmax_first(row, n, max);
}

// out[j] = e[j] * inv_sum * factor: a row of the loss's gradient, in the reference's order.
MPBENCH_VECTOR_CLONES void scale_row(const float* e, float* out, int64_t n, float inv_sum,
                                     float factor) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = e[j] * inv_sum * factor;
}

}  // namespace

// Each (S, S) matrix of the batch on its own: the causal mask counts rows within a matrix.
void OnednnBackend::attention_softmax_forward_impl(const Tensor& x, float scale, bool causal,
                                                   Tensor& y) {
  const int64_t s = x.shape[1];
  parallel_ranges(x.shape[0] * s, row_grain(s), [&](int64_t, int64_t begin, int64_t n) {
    std::vector<float> row(static_cast<size_t>(s));
    for (int64_t r = begin; r < begin + n; ++r) {
      load_row(x, r, s, row.data());
      // Query i sees keys 0..i under the causal mask; masked scores are never read.
      softmax_row(row.data(), causal ? r % s + 1 : s, s, scale);
      store_row(row.data(), y, r, s);
    }
  });
}

// The mask needs no argument: masked probabilities are exactly 0, so their dx is too. Each row is
// read whole before dx is written: dx may alias dy.
void OnednnBackend::attention_softmax_backward_impl(const Tensor& dy, const Tensor& y, float scale,
                                                    Tensor& dx) {
  const int64_t s = dy.shape[1];
  parallel_ranges(dy.shape[0] * s, row_grain(s), [&](int64_t, int64_t begin, int64_t n) {
    std::vector<float> g(static_cast<size_t>(s)), p(static_cast<size_t>(s));
    for (int64_t r = begin; r < begin + n; ++r) {
      load_row(dy, r, s, g.data());
      load_row(y, r, s, p.data());
      softmax_backward_row(g.data(), p.data(), s, scale);
      store_row(g.data(), dx, r, s);
    }
  });
}

// Rows in ranges, each with its own loss and hit count, added in range order.
void OnednnBackend::softmax_xent_impl(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                                      const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                                      int64_t grad_rows) {
  const int64_t rows = logits.shape[0], classes = logits.shape[1];
  const float* x = logits.ptr<float>();
  const int32_t* label = labels.ptr<int32_t>();
  cpu::check_labels(label, rows, classes);
  // The gradient's 1/R and the loss scale fold into one factor, as in the reference.
  const float grad_factor =
      (grad_scale ? grad_scale->ptr<float>()[0] : 1.0f) / static_cast<float>(grad_rows);
  const int64_t grain = row_grain(classes), parts = range_count(rows, grain);
  std::vector<double> part_loss(static_cast<size_t>(parts), 0.0);
  std::vector<int64_t> part_hits(static_cast<size_t>(parts), 0);
  parallel_ranges(rows, grain, [&](int64_t part, int64_t begin, int64_t n) {
    std::vector<float> e(static_cast<size_t>(classes));
    for (int64_t i = begin; i < begin + n; ++i) {
      const float* row = x + i * classes;
      float max;
      const int64_t arg = argmax_first(row, classes, &max);
      const float sum = exp_shifted_sum(row, e.data(), classes, max);
      part_loss[part] += static_cast<double>(std::log(sum) + max - row[label[i]]);
      part_hits[part] += arg == label[i];
      if (!dlogits) continue;
      // An fp32 gradient goes straight to dlogits (logits itself too: the row is read by now).
      const bool f32 = dlogits->dtype == DType::F32;
      float* out = f32 ? dlogits->ptr<float>() + i * classes : e.data();
      const float inv_sum = 1.0f / sum, at_label = e[label[i]];
      scale_row(e.data(), out, classes, inv_sum, grad_factor);
      out[label[i]] = (at_label * inv_sum - 1.0f) * grad_factor;
      if (!f32) store_row(e.data(), *dlogits, i, classes);
    }
  });
  double loss_total = 0;
  int64_t hits = 0;
  for (int64_t p = 0; p < parts; ++p) {
    loss_total += part_loss[p];
    hits += part_hits[p];
  }
  loss_sum.ptr<float>()[0] += static_cast<float>(loss_total / static_cast<double>(rows));
  correct.ptr<float>()[0] += static_cast<float>(hits);
}

}  // namespace mpbench::onednn
