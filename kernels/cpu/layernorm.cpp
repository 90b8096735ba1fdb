// LayerNorm over the last dimension, CPU reference: forward with saved statistics, and backward.
// Statistics are always fp32 (fp64 accumulation here, so the reference adds no error of its own);
// x and y / dy and dx are decoded and rounded once through their own dtypes.
//
// x, y, dy, dx: (rows, D); gamma, beta, dgamma, dbeta: (D) fp32; mean, rstd: (rows) fp32.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {

void CpuBackend::layernorm_forward_impl(float eps, const Tensor& x, const Tensor& gamma,
                                        const Tensor& beta, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t rows = x.rows(), d = x.cols();
  const float* g = gamma.ptr<float>();
  const float* b = beta.ptr<float>();
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t r = 0; r < rows; ++r) {
    load_row(x, r, d, row.data());
    // Two passes: the shifted sum of squares does not cancel when |mean| >> stddev.
    double sum = 0;
    for (int64_t j = 0; j < d; ++j) sum += row[j];
    const double mu = sum / static_cast<double>(d);
    double sq = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double c = row[j] - mu;
      sq += c * c;
    }
    const float m = static_cast<float>(mu);
    const float s = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
    mean.ptr<float>()[r] = m;
    rstd.ptr<float>()[r] = s;
    // In fp32 from the saved statistics, which is what the backward pass differentiates.
    for (int64_t j = 0; j < d; ++j) row[j] = (row[j] - m) * s * g[j] + b[j];
    store_row(row.data(), y, r, d);
  }
}

// With xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)),  dgamma = sum_rows dy * xhat,
//   dbeta = sum_rows dy.
void CpuBackend::layernorm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                         Tensor& dgamma, Tensor& dbeta) {
  const int64_t rows = x.rows(), d = x.cols();

  const float* gm = gamma.ptr<float>();
  std::vector<float> xr(static_cast<size_t>(d)), gr(static_cast<size_t>(d));
  std::vector<double> dg(static_cast<size_t>(d), 0.0), db(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    load_row(x, r, d, xr.data());
    load_row(dy, r, d, gr.data());  // before dx is written: dx may alias dy
    const float m = mean.ptr<float>()[r], s = rstd.ptr<float>()[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const float xhat = (xr[j] - m) * s;
      const float g = gr[j] * gm[j];
      dg[j] += static_cast<double>(gr[j]) * xhat;
      db[j] += gr[j];
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
      xr[j] = xhat;
      gr[j] = g;
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(d));
    const float mean_gx = static_cast<float>(sum_gx / static_cast<double>(d));
    for (int64_t j = 0; j < d; ++j) xr[j] = s * (gr[j] - mean_g - xr[j] * mean_gx);
    store_row(xr.data(), dx, r, d);
  }
  for (int64_t j = 0; j < d; ++j) {
    dgamma.ptr<float>()[j] = static_cast<float>(dg[j]);
    dbeta.ptr<float>()[j] = static_cast<float>(db[j]);
  }
}

}  // namespace mpbench::cpu
