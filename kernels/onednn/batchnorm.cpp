// Batch normalisation (with the bottleneck's residual add and ReLU) on all threads: each pass
// over the rows split into one range per thread, its per-channel sums in its own double partials,
// added in range order; the same formulas as the reference (kernels/cpu/batchnorm.cpp), read and
// written through each tensor's own dtype, the inner loops over channels, which vectorise.
// oneDNN 2.6's batch normalisation has neither the residual add nor our saved statistics (it
// keeps the variance, and no running statistics), hence loops of our own.
#include <cmath>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

namespace mpbench::onednn {
namespace {

using cpu::detail::dispatch_float;

constexpr int64_t kGrain = 1 << 14;  // elements per range at the least

int64_t grain_rows(int64_t c) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c));
}

// Per channel, the sum over rows of what f(i, row, acc) adds to acc for row i, each range into
// its own partials; row is a scratch row of c floats (decoding a row first is what vectorises).
template <class F>
std::vector<double> channel_sums(int64_t rows, int64_t c, F&& f) {
  const int64_t grain = grain_rows(c), parts = range_count(rows, grain);
  std::vector<double> partial(static_cast<size_t>(parts * c), 0.0);
  parallel_ranges(rows, grain, [&](int64_t part, int64_t begin, int64_t n) {
    double* acc = partial.data() + part * c;
    std::vector<float> row(static_cast<size_t>(c));
    for (int64_t i = begin; i < begin + n; ++i) f(i, row.data(), acc);
  });
  std::vector<double> sum(static_cast<size_t>(c), 0.0);
  for (int64_t p = 0; p < parts; ++p)
    for (int64_t j = 0; j < c; ++j) sum[j] += partial[p * c + j];
  return sum;
}

// y = [relu](gamma * (x - mean) * rstd + beta [+ residual]) on all threads.
void normalise(const Tensor& x, const Tensor* residual, const float* mean, const float* rstd,
               const float* gamma, const float* beta, bool relu, Tensor& y) {
  const int64_t rows = x.rows(), c = x.cols();
  dispatch_float(x.dtype, [&](auto ex) {
    using EX = decltype(ex);
    dispatch_float(y.dtype, [&](auto ey) {
      using EY = decltype(ey);
      dispatch_float(residual ? residual->dtype : DType::F32, [&](auto er) {
        using ER = decltype(er);
        const auto* px = x.ptr<typename EX::T>();
        const auto* pr = residual ? residual->ptr<typename ER::T>() : nullptr;
        auto* py = y.ptr<typename EY::T>();
        parallel_ranges(rows, grain_rows(c), [&](int64_t, int64_t begin, int64_t n) {
          std::vector<float> v(static_cast<size_t>(c));
          for (int64_t i = begin; i < begin + n; ++i) {
            for (int64_t j = 0; j < c; ++j)
              v[j] = gamma[j] * ((EX::load(px[i * c + j]) - mean[j]) * rstd[j]) + beta[j];
            if (pr)
              for (int64_t j = 0; j < c; ++j) v[j] += ER::load(pr[i * c + j]);
            if (relu)
              for (int64_t j = 0; j < c; ++j) v[j] = v[j] > 0.0f ? v[j] : 0.0f;
            for (int64_t j = 0; j < c; ++j) py[i * c + j] = EY::store(v[j]);
          }
        });
      });
    });
  });
}

}  // namespace

void OnednnBackend::batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x,
                                                 const Tensor* residual, const Tensor& gamma,
                                                 const Tensor& beta, Tensor& running_mean,
                                                 Tensor& running_var, Tensor& save_mean,
                                                 Tensor& save_rstd, Tensor& y) {
  const int64_t rows = x.rows(), c = x.cols();
  std::vector<double> sum, sq, mean_d(static_cast<size_t>(c));
  dispatch_float(x.dtype, [&](auto e) {
    using E = decltype(e);
    const auto* px = x.ptr<typename E::T>();
    // Two passes (mean, then squared deviations), as the reference: E[x^2] - E[x]^2 cancels.
    sum = channel_sums(rows, c, [&](int64_t i, float* row, double* acc) {
      for (int64_t j = 0; j < c; ++j) row[j] = E::load(px[i * c + j]);
      for (int64_t j = 0; j < c; ++j) acc[j] += row[j];
    });
    for (int64_t j = 0; j < c; ++j) mean_d[j] = sum[j] / static_cast<double>(rows);
    sq = channel_sums(rows, c, [&](int64_t i, float* row, double* acc) {
      for (int64_t j = 0; j < c; ++j) row[j] = E::load(px[i * c + j]);
      for (int64_t j = 0; j < c; ++j) {
        const double dev = row[j] - mean_d[j];
        acc[j] += dev * dev;
      }
    });
  });
  cpu::batchnorm_statistics(d, rows, mean_d.data(), sq.data(), save_mean, save_rstd, running_mean,
                            running_var);
  normalise(x, residual, save_mean.ptr<float>(), save_rstd.ptr<float>(), gamma.ptr<float>(),
            beta.ptr<float>(), d.relu, y);
}

void OnednnBackend::batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x,
                                                const Tensor* residual, const Tensor& gamma,
                                                const Tensor& beta, const Tensor& running_mean,
                                                const Tensor& running_var, Tensor& y) {
  const std::vector<float> rstd = cpu::batchnorm_eval_rstd(d, running_var);
  normalise(x, residual, running_mean.ptr<float>(), rstd.data(), gamma.ptr<float>(),
            beta.ptr<float>(), d.relu, y);
}

// g = dy masked by relu_out > 0; dbeta = sum g, dgamma = sum g xhat,
// dx = gamma rstd (g - dbeta / rows - xhat dgamma / rows). Per row every input is read before
// the outputs are written, so d_pre may alias dy and dx may alias x.
void OnednnBackend::batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out,
                                            const Tensor& x, const Tensor& gamma,
                                            const Tensor& save_mean, const Tensor& save_rstd,
                                            Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                            Tensor* d_pre) {
  if (relu_out && relu_out->dtype != dy.dtype) {  // never in a model: the reference's loop
    ++fallback_calls_;
    CpuBackend::batchnorm_backward_impl(dy, relu_out, x, gamma, save_mean, save_rstd, dx, dgamma,
                                        dbeta, d_pre);
    return;
  }
  const int64_t rows = x.rows(), c = x.cols();
  const float* mean = save_mean.ptr<float>();
  const float* rstd = save_rstd.ptr<float>();
  const float* gam = gamma.ptr<float>();
  // relu_out in dy's dtype (checked above), x and dx in x's, d_pre in its own.
  dispatch_float(dy.dtype, [&](auto eg) {
    using EG = decltype(eg);
    dispatch_float(x.dtype, [&](auto exx) {
      using EX = decltype(exx);
      const auto* pdy = dy.ptr<typename EG::T>();
      const auto* pmask = relu_out ? relu_out->ptr<typename EG::T>() : nullptr;
      const auto* px = x.ptr<typename EX::T>();
      // Row i's g (masked by the ReLU's output, a select as in the reference) into `g`.
      auto load_g = [&](int64_t i, float* g) {
        for (int64_t j = 0; j < c; ++j) g[j] = EG::load(pdy[i * c + j]);
        if (pmask)
          for (int64_t j = 0; j < c; ++j) g[j] = EG::load(pmask[i * c + j]) > 0.0f ? g[j] : 0.0f;
      };
      auto load_xhat = [&](int64_t i, float* xh) {
        for (int64_t j = 0; j < c; ++j) xh[j] = (EX::load(px[i * c + j]) - mean[j]) * rstd[j];
      };
      // Both sums in one pass: [sum g | sum g xhat] per range.
      const int64_t grain = grain_rows(c), parts = range_count(rows, grain);
      std::vector<double> partial(static_cast<size_t>(parts * 2 * c), 0.0);
      parallel_ranges(rows, grain, [&](int64_t part, int64_t begin, int64_t n) {
        std::vector<float> g(static_cast<size_t>(c)), xh(static_cast<size_t>(c));
        double* sg = partial.data() + part * 2 * c;
        double* sgx = sg + c;
        for (int64_t i = begin; i < begin + n; ++i) {
          load_g(i, g.data());
          load_xhat(i, xh.data());
          for (int64_t j = 0; j < c; ++j) {
            sg[j] += g[j];
            sgx[j] += static_cast<double>(g[j]) * xh[j];
          }
        }
      });
      std::vector<float> mean_g(static_cast<size_t>(c)), mean_gx(static_cast<size_t>(c));
      for (int64_t j = 0; j < c; ++j) {
        double sg = 0, sgx = 0;
        for (int64_t p = 0; p < parts; ++p) {
          sg += partial[p * 2 * c + j];
          sgx += partial[p * 2 * c + c + j];
        }
        dbeta.ptr<float>()[j] = static_cast<float>(sg);
        dgamma.ptr<float>()[j] = static_cast<float>(sgx);
        mean_g[j] = static_cast<float>(sg / static_cast<double>(rows));
        mean_gx[j] = static_cast<float>(sgx / static_cast<double>(rows));
      }
      dispatch_float(d_pre ? d_pre->dtype : DType::F32, [&](auto ep) {
        using EP = decltype(ep);
        auto* pdx = dx.ptr<typename EX::T>();
        auto* ppre = d_pre ? d_pre->ptr<typename EP::T>() : nullptr;
        parallel_ranges(rows, grain, [&](int64_t, int64_t begin, int64_t n) {
          std::vector<float> g(static_cast<size_t>(c)), xh(static_cast<size_t>(c));
          for (int64_t i = begin; i < begin + n; ++i) {
            load_g(i, g.data());
            load_xhat(i, xh.data());
            if (ppre)
              for (int64_t j = 0; j < c; ++j) ppre[i * c + j] = EP::store(g[j]);
            for (int64_t j = 0; j < c; ++j)
              pdx[i * c + j] =
                  EX::store(gam[j] * rstd[j] * (g[j] - mean_g[j] - xh[j] * mean_gx[j]));
          }
        });
      });
    });
  });
}

}  // namespace mpbench::onednn
