// LayerNorm over the last dimension, CPU reference: forward with saved statistics, and backward.
// Statistics are always fp32 (fp64 accumulation here, so the reference adds no error of its own);
// x and y / dy and dx are decoded and rounded once through their own dtypes.
//
// x, y, dy, dx: (rows, D); gamma, beta, dgamma, dbeta: (D) fp32; mean, rstd: (rows) fp32.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/row_math.h"

namespace mpbench::cpu {

void CpuBackend::layernorm_forward_impl(float eps, const Tensor& x, const Tensor& gamma,
                                        const Tensor& beta, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t rows = x.rows(), d = x.cols();
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t r = 0; r < rows; ++r) {
    load_row(x, r, d, row.data());
    layernorm_row_forward(row.data(), d, eps, gamma.ptr<float>(), beta.ptr<float>(),
                          mean.ptr<float>() + r, rstd.ptr<float>() + r);
    store_row(row.data(), y, r, d);
  }
}

void CpuBackend::layernorm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                         Tensor& dgamma, Tensor& dbeta) {
  const int64_t rows = x.rows(), d = x.cols();
  std::vector<float> xr(static_cast<size_t>(d)), gr(static_cast<size_t>(d));
  std::vector<double> dg(static_cast<size_t>(d), 0.0), db(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    load_row(x, r, d, xr.data());
    load_row(dy, r, d, gr.data());  // before dx is written: dx may alias dy
    layernorm_row_backward(xr.data(), gr.data(), d, mean.ptr<float>()[r], rstd.ptr<float>()[r],
                           gamma.ptr<float>(), dg.data(), db.data());
    store_row(xr.data(), dx, r, d);
  }
  for (int64_t j = 0; j < d; ++j) {
    dgamma.ptr<float>()[j] = static_cast<float>(dg[j]);
    dbeta.ptr<float>()[j] = static_cast<float>(db[j]);
  }
}

}  // namespace mpbench::cpu
