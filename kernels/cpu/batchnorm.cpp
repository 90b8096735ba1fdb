// Batch normalisation over the channels of an NHWC activation, CPU reference, with the residual
// add and ReLU of a bottleneck block fused in, forward (training and evaluation) and backward.
//
// x, residual, y, dy, relu_out, dx, d_pre: (rows = N*H*W, C), each in its own float dtype (any
// rank: the last dimension is C); gamma, beta, running_mean, running_var, save_mean, save_rstd,
// dgamma, dbeta: (C) fp32.
//
// Rows are decoded one at a time into fp32; the per-channel sums run in double so that the
// reference is not itself a source of error over many rows; each output is rounded once (and the
// normalised value once more before a residual add, as under autocast).
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"
#include "kernels/relu.h"

namespace mpbench::cpu {
namespace {

// y = [relu](gamma * (x - mean) * rstd + beta [+ residual]), row by row. With a residual the
// normalised value is first rounded to x's dtype: autocast's BatchNorm writes its output in its
// input's dtype, and the add (rounded again) is an op of its own.
void normalise(const Tensor& x, const Tensor* residual, const float* mean, const float* rstd,
               const float* gamma, const float* beta, bool relu, Tensor& y) {
  const int64_t rows = x.rows(), c = x.cols();
  std::vector<float> xr(c), rr(residual ? c : 0), out(c);
  detail::dispatch_float(x.dtype, [&](auto e) {
    using E = decltype(e);
    for (int64_t i = 0; i < rows; ++i) {
      load_row(x, i, c, xr.data());
      if (residual) load_row(*residual, i, c, rr.data());
      for (int64_t j = 0; j < c; ++j) {
        float v = gamma[j] * ((xr[j] - mean[j]) * rstd[j]) + beta[j];
        if (residual) v = E::load(E::store(v)) + rr[j];
        out[j] = relu ? relu_forward(v) : v;
      }
      store_row(out.data(), y, i, c);
    }
  });
}

}  // namespace

void batchnorm_statistics(const BatchNormDesc& d, int64_t rows, const double* mean_d,
                          const double* sq, Tensor& save_mean, Tensor& save_rstd,
                          Tensor& running_mean, Tensor& running_var) {
  float* mean = save_mean.ptr<float>();
  float* rstd = save_rstd.ptr<float>();
  float* rm = running_mean.ptr<float>();
  float* rv = running_var.ptr<float>();
  const float m = d.momentum;
  for (int64_t j = 0; j < save_mean.numel(); ++j) {
    const double var = sq[j] / static_cast<double>(rows);
    const double unbiased = sq[j] / static_cast<double>(rows - 1);
    mean[j] = static_cast<float>(mean_d[j]);
    rstd[j] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(d.eps)));
    rm[j] = (1.0f - m) * rm[j] + m * mean[j];
    rv[j] = (1.0f - m) * rv[j] + m * static_cast<float>(unbiased);
  }
}

std::vector<float> batchnorm_eval_rstd(const BatchNormDesc& d, const Tensor& running_var) {
  const float* rv = running_var.ptr<float>();
  std::vector<float> rstd(static_cast<size_t>(running_var.numel()));
  for (size_t j = 0; j < rstd.size(); ++j)
    rstd[j] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv[j]) + d.eps));
  return rstd;
}

void CpuBackend::batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x,
                                              const Tensor* residual, const Tensor& gamma,
                                              const Tensor& beta, Tensor& running_mean,
                                              Tensor& running_var, Tensor& save_mean,
                                              Tensor& save_rstd, Tensor& y) {
  const int64_t rows = x.rows(), c = x.cols();

  // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels.
  std::vector<float> xr(c);
  std::vector<double> sum(c, 0.0), sq(c, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    load_row(x, i, c, xr.data());
    for (int64_t j = 0; j < c; ++j) sum[j] += xr[j];
  }
  std::vector<double> mean_d(c);
  for (int64_t j = 0; j < c; ++j) mean_d[j] = sum[j] / static_cast<double>(rows);
  for (int64_t i = 0; i < rows; ++i) {
    load_row(x, i, c, xr.data());
    for (int64_t j = 0; j < c; ++j) {
      const double dev = xr[j] - mean_d[j];
      sq[j] += dev * dev;
    }
  }

  batchnorm_statistics(d, rows, mean_d.data(), sq.data(), save_mean, save_rstd, running_mean,
                       running_var);
  normalise(x, residual, save_mean.ptr<float>(), save_rstd.ptr<float>(), gamma.ptr<float>(),
            beta.ptr<float>(), d.relu, y);
}

void CpuBackend::batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x,
                                             const Tensor* residual, const Tensor& gamma,
                                             const Tensor& beta, const Tensor& running_mean,
                                             const Tensor& running_var, Tensor& y) {
  const std::vector<float> rstd = batchnorm_eval_rstd(d, running_var);
  normalise(x, residual, running_mean.ptr<float>(), rstd.data(), gamma.ptr<float>(),
            beta.ptr<float>(), d.relu, y);
}

// With xhat = (x - mean) * rstd and g the gradient at the BN output:
//   dbeta = sum g, dgamma = sum g xhat, dx = gamma rstd (g - dbeta / rows - xhat dgamma / rows).
void CpuBackend::batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                                         const Tensor& gamma, const Tensor& save_mean,
                                         const Tensor& save_rstd, Tensor& dx, Tensor& dgamma,
                                         Tensor& dbeta, Tensor* d_pre) {
  const int64_t rows = x.rows(), c = x.cols();

  const float* mean = save_mean.ptr<float>();
  const float* rstd = save_rstd.ptr<float>();
  const float* gam = gamma.ptr<float>();
  std::vector<float> g(c), xr(c), mask(relu_out ? c : 0), out(c);
  // g for row i: dy, zero where the forward's ReLU blocked it (kernels/relu.h).
  auto load_g = [&](int64_t i) {
    load_row(dy, i, c, g.data());
    if (!relu_out) return;
    load_row(*relu_out, i, c, mask.data());
    // A select, not a branch: the mask is close to random, and a branch here mispredicted
    // often enough to make this backward several times slower than the one without ReLU.
    for (int64_t j = 0; j < c; ++j) g[j] = relu_backward(g[j], mask[j]);
  };

  std::vector<double> sum_g(c, 0.0), sum_gx(c, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    load_g(i);
    load_row(x, i, c, xr.data());
    for (int64_t j = 0; j < c; ++j) {
      sum_g[j] += g[j];
      sum_gx[j] += static_cast<double>(g[j]) * ((xr[j] - mean[j]) * rstd[j]);
    }
  }
  std::vector<float> mean_g(c), mean_gx(c);
  for (int64_t j = 0; j < c; ++j) {
    dbeta.ptr<float>()[j] = static_cast<float>(sum_g[j]);
    dgamma.ptr<float>()[j] = static_cast<float>(sum_gx[j]);
    mean_g[j] = static_cast<float>(sum_g[j] / static_cast<double>(rows));
    mean_gx[j] = static_cast<float>(sum_gx[j] / static_cast<double>(rows));
  }
  // Per row, every input is read before the outputs are written, so d_pre may alias dy and dx
  // may alias x.
  for (int64_t i = 0; i < rows; ++i) {
    load_g(i);
    load_row(x, i, c, xr.data());
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - mean[j]) * rstd[j];
      out[j] = gam[j] * rstd[j] * (g[j] - mean_g[j] - xhat * mean_gx[j]);
    }
    if (d_pre) store_row(g.data(), *d_pre, i, c);
    store_row(out.data(), dx, i, c);
  }
}

}  // namespace mpbench::cpu
