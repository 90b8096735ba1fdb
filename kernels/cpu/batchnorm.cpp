// Batch normalisation over the channels of an NHWC activation, CPU reference, with the residual
// add and ReLU of a bottleneck block fused in, forward (training and evaluation) and backward.
//
// x, residual, y, dy, relu_out, dx, d_pre: (rows = N*H*W, C), each in its own float dtype (any
// rank: the last dimension is C); gamma, beta, running_mean, running_var, save_mean, save_rstd,
// dgamma, dbeta: (C) fp32.
//
// Rows are decoded one at a time into fp32; the per-channel sums run in double so that the
// reference is not itself a source of error over many rows; each output is rounded once.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"

namespace mpbench::cpu {
namespace {

struct RowsC {
  int64_t rows, c;
};

void check_act(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  const std::string what = std::string(op) + ": " + name;
  MPB_CHECK(t.defined() && t.device == Device::CPU, "{}: tensor is not allocated on the CPU", what);
  MPB_CHECK(is_float_dtype(t.dtype), "{}: must be a float tensor, got {}", what,
            dtype_name(t.dtype));
  MPB_CHECK(t.shape == x.shape, "{}: shape {} differs from x {}", what, t.shape.str(),
            x.shape.str());
}

void check_channels(const char* op, const char* name, const Tensor& t, int64_t c) {
  const std::string what = std::string(op) + ": " + name;
  check_tensor(t, DType::F32, what.c_str());
  MPB_CHECK(t.numel() == c, "{}: has {} elements {}, x has {} channels", what, t.numel(),
            t.shape.str(), c);
}

RowsC check_x(const char* op, const Tensor& x) {
  MPB_CHECK(x.defined() && x.device == Device::CPU, "{}: x is not allocated on the CPU", op);
  MPB_CHECK(is_float_dtype(x.dtype), "{}: x must be a float tensor, got {}", op,
            dtype_name(x.dtype));
  MPB_CHECK(x.shape.rank >= 1 && x.numel() > 0, "{}: x {} is empty", op, x.shape.str());
  return {x.rows(), x.cols()};
}

// y = [relu](gamma * (x - mean) * rstd + beta [+ residual]), row by row.
void normalise(const Tensor& x, const Tensor* residual, const float* mean, const float* rstd,
               const float* gamma, const float* beta, bool relu, Tensor& y) {
  const int64_t rows = x.rows(), c = x.cols();
  std::vector<float> xr(c), rr(residual ? c : 0), out(c);
  for (int64_t i = 0; i < rows; ++i) {
    load_row(x, i, c, xr.data());
    if (residual) load_row(*residual, i, c, rr.data());
    for (int64_t j = 0; j < c; ++j) {
      float v = gamma[j] * ((xr[j] - mean[j]) * rstd[j]) + beta[j];
      if (residual) v += rr[j];
      out[j] = relu && !(v > 0.0f) ? 0.0f : v;
    }
    store_row(out.data(), y, i, c);
  }
}

void check_forward(const char* op, const Tensor& x, const Tensor* residual, const Tensor& gamma,
                   const Tensor& beta, const Tensor& y, int64_t c) {
  if (residual) check_act(op, "residual", *residual, x);
  check_act(op, "y", y, x);
  check_channels(op, "gamma", gamma, c);
  check_channels(op, "beta", beta, c);
}

}  // namespace

void batchnorm_forward_train(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                             const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, Tensor& save_mean, Tensor& save_rstd, Tensor& y) {
  const char* op = "batchnorm_forward_train";
  const auto [rows, c] = check_x(op, x);
  check_forward(op, x, residual, gamma, beta, y, c);
  check_channels(op, "running_mean", running_mean, c);
  check_channels(op, "running_var", running_var, c);
  check_channels(op, "save_mean", save_mean, c);
  check_channels(op, "save_rstd", save_rstd, c);
  // As in PyTorch: one value per channel has no variance to normalise by.
  MPB_CHECK(rows > 1, "{}: training needs more than one value per channel, x is {}", op,
            x.shape.str());
  MPB_CHECK(d.eps > 0.0f && d.momentum >= 0.0f && d.momentum <= 1.0f,
            "{}: eps {} must be > 0 and momentum {} in [0, 1]", op, d.eps, d.momentum);

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

  float* mean = save_mean.ptr<float>();
  float* rstd = save_rstd.ptr<float>();
  float* rm = running_mean.ptr<float>();
  float* rv = running_var.ptr<float>();
  const float m = d.momentum;
  for (int64_t j = 0; j < c; ++j) {
    const double var = sq[j] / static_cast<double>(rows);
    const double unbiased = sq[j] / static_cast<double>(rows - 1);
    mean[j] = static_cast<float>(mean_d[j]);
    rstd[j] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(d.eps)));
    rm[j] = (1.0f - m) * rm[j] + m * mean[j];
    rv[j] = (1.0f - m) * rv[j] + m * static_cast<float>(unbiased);
  }
  normalise(x, residual, mean, rstd, gamma.ptr<float>(), beta.ptr<float>(), d.relu, y);
}

void batchnorm_forward_eval(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                            const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, Tensor& y) {
  const char* op = "batchnorm_forward_eval";
  const auto [rows, c] = check_x(op, x);
  (void)rows;
  check_forward(op, x, residual, gamma, beta, y, c);
  check_channels(op, "running_mean", running_mean, c);
  check_channels(op, "running_var", running_var, c);
  MPB_CHECK(d.eps > 0.0f, "{}: eps {} must be > 0", op, d.eps);
  const float* rv = running_var.ptr<float>();
  std::vector<float> rstd(c);
  for (int64_t j = 0; j < c; ++j)
    rstd[j] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv[j]) + d.eps));
  normalise(x, residual, running_mean.ptr<float>(), rstd.data(), gamma.ptr<float>(),
            beta.ptr<float>(), d.relu, y);
}

// With xhat = (x - mean) * rstd and g the gradient at the BN output:
//   dbeta = sum g, dgamma = sum g xhat, dx = gamma rstd (g - dbeta / rows - xhat dgamma / rows).
void batchnorm_backward(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                        const Tensor& gamma, const Tensor& save_mean, const Tensor& save_rstd,
                        Tensor& dx, Tensor& dgamma, Tensor& dbeta, Tensor* d_pre) {
  const char* op = "batchnorm_backward";
  // Plain variables, not a structured binding: C++17 does not let the lambda below capture one
  // (g++ accepts it, clang rejects it).
  const RowsC shape = check_x(op, x);
  const int64_t rows = shape.rows, c = shape.c;
  check_act(op, "dy", dy, x);
  if (relu_out) check_act(op, "relu_out", *relu_out, x);
  check_act(op, "dx", dx, x);
  MPB_CHECK(dx.dtype == x.dtype, "{}: dx is {}, must have x's dtype {}", op, dtype_name(dx.dtype),
            dtype_name(x.dtype));
  if (d_pre) check_act(op, "d_pre", *d_pre, x);
  check_channels(op, "gamma", gamma, c);
  check_channels(op, "save_mean", save_mean, c);
  check_channels(op, "save_rstd", save_rstd, c);
  check_channels(op, "dgamma", dgamma, c);
  check_channels(op, "dbeta", dbeta, c);

  const float* mean = save_mean.ptr<float>();
  const float* rstd = save_rstd.ptr<float>();
  const float* gam = gamma.ptr<float>();
  std::vector<float> g(c), xr(c), mask(relu_out ? c : 0), out(c);
  // g for row i: dy, zero where the forward's ReLU output was not positive.
  auto load_g = [&](int64_t i) {
    load_row(dy, i, c, g.data());
    if (!relu_out) return;
    load_row(*relu_out, i, c, mask.data());
    // A select, not a branch: the mask is close to random, and a branch here mispredicted
    // often enough to make this backward several times slower than the one without ReLU.
    for (int64_t j = 0; j < c; ++j) g[j] = mask[j] > 0.0f ? g[j] : 0.0f;
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
