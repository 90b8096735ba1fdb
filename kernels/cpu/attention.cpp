// Attention probabilities (the softmax between Q K^T and the product with V), CPU reference.
// Always fp32 math, whatever the dtypes of the score and probability tensors, as in autocast.
//
// x, y, dy, dx: (batch, S, S); row i of each (S, S) matrix is query i, column j key j.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {

void CpuBackend::attention_softmax_forward_impl(const Tensor& x, float scale, bool causal,
                                                Tensor& y) {
  const int64_t s = x.shape[1], rows = x.shape[0] * s;
  std::vector<float> row(static_cast<size_t>(s));
  for (int64_t r = 0; r < rows; ++r) {
    load_row(x, r, s, row.data());
    // Query i sees keys 0..i under the causal mask; the rest are never read, so a masked score
    // of any value (even inf or NaN) cannot leak into the row.
    const int64_t visible = causal ? r % s + 1 : s;
    float max = scale * row[0];
    for (int64_t j = 1; j < visible; ++j) max = std::fmax(max, scale * row[j]);
    float sum = 0;
    for (int64_t j = 0; j < visible; ++j) {
      row[j] = std::exp(scale * row[j] - max);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
    for (int64_t j = visible; j < s; ++j) row[j] = 0.0f;
    store_row(row.data(), y, r, s);
  }
}

// The mask needs no argument here: masked probabilities are exactly 0, so their dx is too.
void CpuBackend::attention_softmax_backward_impl(const Tensor& dy, const Tensor& y, float scale,
                                                 Tensor& dx) {
  const int64_t s = dy.shape[1], rows = dy.shape[0] * s;
  std::vector<float> g(static_cast<size_t>(s)), p(static_cast<size_t>(s));
  for (int64_t r = 0; r < rows; ++r) {
    load_row(dy, r, s, g.data());  // read whole before dx is written: dx may alias dy
    load_row(y, r, s, p.data());
    double dot = 0;
    for (int64_t j = 0; j < s; ++j) dot += static_cast<double>(g[j]) * p[j];
    const float d = static_cast<float>(dot);
    for (int64_t j = 0; j < s; ++j) g[j] = p[j] == 0.0f ? 0.0f : scale * p[j] * (g[j] - d);
    store_row(g.data(), dx, r, s);
  }
}

}  // namespace mpbench::cpu
