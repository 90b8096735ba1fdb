// LayerNorm as vectorised loops on all threads (oneDNN 2.6's layer normalisation takes one dtype
// for x and y, where amp_bf16 reads fp32 and writes bf16): the reference's row formulas
// (kernels/cpu/row_math.h), their double statistics summed in vector lanes. The backward pass's
// parameter gradients sum blocks of rows in float, each range's blocks into its own double
// partials, added in range order (a double add per element and row took half its time).
#include <cmath>
#include <vector>

#include "kernels/cpu/row_math.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

namespace mpbench::onednn {
namespace {

// The shared row formulas (kernels/cpu/row_math.h), compiled into each vector clone.
MPBENCH_VECTOR_CLONES void normalise_row(float* row, int64_t d, float eps, const float* g,
                                         const float* b, float* mean, float* rstd) {
  cpu::layernorm_row_forward(row, d, eps, g, b, mean, rstd);
}
MPBENCH_VECTOR_CLONES void backward_row(float* x, float* dy, int64_t d, float m, float s,
                                        const float* gamma, float* dg, float* db) {
  cpu::layernorm_row_backward(x, dy, d, m, s, gamma, dg, db);
}

// Rows per block of the parameter gradients' float sums.
constexpr int64_t kBlockRows = 64;

}  // namespace

void OnednnBackend::layernorm_forward_impl(float eps, const Tensor& x, const Tensor& gamma,
                                           const Tensor& beta, Tensor& y, Tensor& mean,
                                           Tensor& rstd) {
  const int64_t d = x.cols();
  parallel_ranges(x.rows(), row_grain(d), [&](int64_t, int64_t begin, int64_t n) {
    std::vector<float> row(static_cast<size_t>(d));
    for (int64_t r = begin; r < begin + n; ++r) {
      load_row(x, r, d, row.data());
      normalise_row(row.data(), d, eps, gamma.ptr<float>(), beta.ptr<float>(),
                    mean.ptr<float>() + r, rstd.ptr<float>() + r);
      store_row(row.data(), y, r, d);
    }
  });
}

// Each row is read whole before dx is written: dx may alias dy.
void OnednnBackend::layernorm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                            const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                            Tensor& dgamma, Tensor& dbeta) {
  const int64_t d = x.cols(), grain = row_grain(d), parts = range_count(x.rows(), grain);
  std::vector<double> dg(static_cast<size_t>(parts * d), 0.0), db(dg.size(), 0.0);
  parallel_ranges(x.rows(), grain, [&](int64_t part, int64_t begin, int64_t n) {
    std::vector<float> xr(static_cast<size_t>(d)), gr(xr.size()), bg(xr.size()), bb(xr.size());
    for (int64_t r = begin; r < begin + n; ++r) {
      load_row(x, r, d, xr.data());
      load_row(dy, r, d, gr.data());
      backward_row(xr.data(), gr.data(), d, mean.ptr<float>()[r], rstd.ptr<float>()[r],
                   gamma.ptr<float>(), bg.data(), bb.data());
      store_row(xr.data(), dx, r, d);
      if ((r - begin) % kBlockRows == kBlockRows - 1 || r == begin + n - 1)
        add_block_sums(d, bg.data(), bb.data(), dg.data() + part * d, db.data() + part * d);
    }
  });
  for (int64_t j = 0; j < d; ++j) {
    double g = 0, b = 0;
    for (int64_t p = 0; p < parts; ++p) {
      g += dg[p * d + j];
      b += db[p * d + j];
    }
    dgamma.ptr<float>()[j] = static_cast<float>(g);
    dbeta.ptr<float>()[j] = static_cast<float>(b);
  }
}

}  // namespace mpbench::onednn
