// Batch normalisation as vectorised loops on all threads, on the (rows, C) channels-last rows the
// models keep, with the bottleneck's residual add and ReLU fused in. oneDNN 2.6's primitive has
// neither (the residual add was a pass of its own after it, the ReLU mask one before its
// backward), and these loops read each tensor once per pass.
//
// Forward: one pass sums each channel's x - shift and its square over a block of rows in fp32
// (the shift: the block's first row, so that the squares do not cancel) and merges the blocks'
// means and squared deviations in double (Chan et al., kernels/moments.h, as the CUDA kernels
// do); one pass then writes
//   y = [relu](gamma ((x - mean) rstd) + beta [+ residual]),
// the normalised value rounded to the dtype before a residual add: the reference's formula.
// Backward: one pass sums g and g xhat (g: dy where ReLU let it through, kernels/relu.h, also
// written to d_pre), one writes
//   dx = gamma rstd (g - mean(g) - xhat mean(g xhat)),
// reading g from d_pre when there is one. Each range of rows sums into its own partials, added in
// range order. The loops take fp32 or bf16, one dtype for all of a call's activations, as the
// models call them; other mixes run the reference's loops. Where the CPU has AVX512-BF16, the
// bf16 rows of the second passes are written by its own conversion (normalise_row_hw,
// input_gradient_row_hw: ResNet-50's conv2 stage at batch 8 on a Zen 4, forward 9.5-10.3 -> 8.1
// ms a step, backward 11.3-13.1 -> 11.0-11.3).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"
#include "kernels/moments.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"
#include "kernels/relu.h"

namespace mpbench::onednn {
namespace {

using cpu::detail::Elem;

// Rows per block: the fp32 sums run over a block before they go to double.
constexpr int64_t kBlockRows = 64;

// Adds each channel's sums over `rows` rows of x - shift and its square to s1, s2.
template <class E>
MPBENCH_VECTOR_CLONES void shifted_sums(const typename E::T* x, int64_t rows, int64_t c,
                                        const float* shift, float* s1, float* s2) {
  for (int64_t i = 0; i < rows; ++i) {
    const typename E::T* r = x + i * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      const float v = E::load(r[j]) - shift[j];
      s1[j] += v;
      s2[j] += v * v;
    }
  }
}

// y = [relu](gamma ((x - mean) rstd) + beta [+ res]) over `rows` rows; y may alias x or res.
template <class E, bool kResidual, bool kRelu>
MPBENCH_VECTOR_CLONES void normalise_rows(const typename E::T* x, const typename E::T* res,
                                          typename E::T* y, int64_t rows, int64_t c,
                                          const float* mean, const float* rstd, const float* gamma,
                                          const float* beta) {
  for (int64_t i = 0; i < rows * c; i += c) {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      float v = gamma[j] * ((E::load(x[i + j]) - mean[j]) * rstd[j]) + beta[j];
      // Rounded to the dtype before the add, as the reference (kernels/cpu/batchnorm.cpp).
      if (kResidual) v = E::load(E::store(v)) + E::load(res[i + j]);
      y[i + j] = E::store(kRelu ? relu_forward(v) : v);
    }
  }
}

// g = dy, zeroed where ReLU blocked it (kernels/relu.h; a select: the mask is close to random),
// written to g when kStore (which may alias dy), and the sums of g and g xhat added to sg, sgx.
template <class E, bool kMask, bool kStore>
MPBENCH_VECTOR_CLONES void gradient_sums(const typename E::T* dy, const typename E::T* relu_out,
                                         const typename E::T* x, typename E::T* g, int64_t rows,
                                         int64_t c, const float* mean, const float* rstd, float* sg,
                                         float* sgx) {
  for (int64_t i = 0; i < rows * c; i += c) {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      const typename E::T d = dy[i + j];
      const bool blocked = kMask && relu_blocks(E::load(relu_out[i + j]));
      const float gv = blocked ? 0.0f : E::load(d);
      if (kStore) g[i + j] = blocked ? E::store(0.0f) : d;
      sg[j] += gv;
      sgx[j] += gv * ((E::load(x[i + j]) - mean[j]) * rstd[j]);
    }
  }
}

// dx = gamma rstd (g - mean_g - xhat mean_gx), g = dy masked as above; dx may alias dy or x.
template <class E, bool kMask>
MPBENCH_VECTOR_CLONES void input_gradient(const typename E::T* dy, const typename E::T* relu_out,
                                          const typename E::T* x, typename E::T* dx, int64_t rows,
                                          int64_t c, const float* mean, const float* rstd,
                                          const float* gamma, const float* mean_g,
                                          const float* mean_gx) {
  for (int64_t i = 0; i < rows * c; i += c) {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      const float gv =
          kMask ? relu_backward(E::load(dy[i + j]), E::load(relu_out[i + j])) : E::load(dy[i + j]);
      const float xhat = (E::load(x[i + j]) - mean[j]) * rstd[j];
      dx[i + j] = E::store(gamma[j] * rstd[j] * (gv - mean_g[j] - xhat * mean_gx[j]));
    }
  }
}

#ifdef MPBENCH_BF16_HW_BUILT
// normalise_rows and input_gradient for one bf16 row, 16 channels at a time with the CPU's own
// conversions (parallel.h: a third of the time the reference's rounding takes here, which made a
// bf16 forward slower than an fp32 one). The same formulas in the same order, with the products
// that GCC's vector clones contract into FMAs contracted here too, so they differ from those loops
// only where a value is a bf16 denormal (flushed to 0); a clang build's loops, which round such
// products apart, differ in the last bf16 place of a few cancelling values.
MPBENCH_BF16_HW void normalise_row_hw(const uint16_t* x, const uint16_t* res, uint16_t* y,
                                      int64_t c, const float* mean, const float* rstd,
                                      const float* gamma, const float* beta, bool relu) {
  for (int64_t j = 0; j < c; j += 16) {
    const __mmask16 m = bf16_x16::mask(c - j);
    const __m512 t =
        _mm512_mul_ps(_mm512_sub_ps(bf16_x16::load(x + j, m), _mm512_maskz_loadu_ps(m, mean + j)),
                      _mm512_maskz_loadu_ps(m, rstd + j));
    __m512 v =
        _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, gamma + j), t, _mm512_maskz_loadu_ps(m, beta + j));
    if (res) v = _mm512_add_ps(bf16_x16::round(v), bf16_x16::load(res + j, m));
    bf16_x16::store(y + j, m, relu ? bf16_x16::relu(v) : v);
  }
}

MPBENCH_BF16_HW void input_gradient_row_hw(const uint16_t* g, const uint16_t* relu_out,
                                           const uint16_t* x, uint16_t* dx, int64_t c,
                                           const float* mean, const float* rstd, const float* gamma,
                                           const float* mean_g, const float* mean_gx) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t j = 0; j < c; j += 16) {
    const __mmask16 m = bf16_x16::mask(c - j);
    __m512 gv = bf16_x16::load(g + j, m);
    if (relu_out) {  // kernels/relu.h's select on ReLU's output
      const __mmask16 blocked =
          _mm512_cmp_ps_mask(bf16_x16::load(relu_out + j, m), zero, _CMP_LE_OQ);
      gv = _mm512_mask_mov_ps(gv, blocked, zero);
    }
    const __m512 r = _mm512_maskz_loadu_ps(m, rstd + j);
    const __m512 xhat = _mm512_mul_ps(
        _mm512_sub_ps(bf16_x16::load(x + j, m), _mm512_maskz_loadu_ps(m, mean + j)), r);
    const __m512 d = _mm512_fnmadd_ps(xhat, _mm512_maskz_loadu_ps(m, mean_gx + j),
                                      _mm512_sub_ps(gv, _mm512_maskz_loadu_ps(m, mean_g + j)));
    bf16_x16::store(dx + j, m,
                    _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, gamma + j), r), d));
  }
}
#endif

template <class E>
constexpr bool kIsBf16 = std::is_same_v<E, Elem<DType::BF16>>;

// Merges a block's sums of x - shift over nb rows into the moments of the n rows before it, and
// zeroes the sums for the next block.
MPBENCH_VECTOR_CLONES void merge_block(int64_t c, double n, double nb, const float* shift,
                                       float* s1, float* s2, double* mean, double* m2) {
  for (int64_t j = 0; j < c; ++j) {
    const double d = s1[j] / nb;  // the block's mean - shift
    double seen = n;
    merge_moments(seen, mean[j], m2[j], nb, shift[j] + d, std::max(0.0, s2[j] - s1[j] * d));
    s1[j] = 0.0f;
    s2[j] = 0.0f;
  }
}

// Each channel's mean and squared deviations from it over the rows of a (rows, c) tensor, on all
// threads: blocks by shifted_sums, merged per range of rows, the ranges merged in range order.
template <class E>
void moments(const typename E::T* x, int64_t rows, int64_t c, std::vector<double>& mean,
             std::vector<double>& m2) {
  const int64_t grain = row_grain(c), ranges = range_count(rows, grain);
  std::vector<double> parts(static_cast<size_t>(ranges * 2 * c), 0.0);
  std::vector<int64_t> counts(static_cast<size_t>(ranges), 0);
  parallel_ranges(rows, grain, [&](int64_t part, int64_t begin, int64_t n) {
    std::vector<float> s(static_cast<size_t>(3 * c), 0.0f);
    float *s1 = s.data(), *s2 = s1 + c, *shift = s2 + c;
    double* pm = parts.data() + part * 2 * c;
    for (int64_t r = begin; r < begin + n; r += kBlockRows) {
      const int64_t nb = std::min(kBlockRows, begin + n - r);
      const typename E::T* block = x + r * c;
      for (int64_t j = 0; j < c; ++j) shift[j] = moments_shift(E::load(block[j]));
      shifted_sums<E>(block, nb, c, shift, s1, s2);
      merge_block(c, static_cast<double>(r - begin), static_cast<double>(nb), shift, s1, s2, pm,
                  pm + c);
    }
    counts[part] = n;
  });
  mean.assign(static_cast<size_t>(c), 0.0);
  m2.assign(static_cast<size_t>(c), 0.0);
  int64_t seen = 0;
  for (int64_t p = 0; p < ranges; ++p) {
    for (int64_t j = 0; j < c; ++j) {
      double n = static_cast<double>(seen);
      merge_moments(n, mean[j], m2[j], static_cast<double>(counts[p]), parts[p * 2 * c + j],
                    parts[p * 2 * c + c + j]);
    }
    seen += counts[p];
  }
}

// Two per-channel sums over the rows of a (rows, c) tensor, on all threads: f(off, rows, s1, s2)
// adds a block's to the fp32 s1, s2; each range of rows gathers its blocks' in double, and the
// ranges' are added in range order into first and second.
template <class F>
void channel_sums(int64_t rows, int64_t c, std::vector<double>& first, std::vector<double>& second,
                  F&& f) {
  const int64_t grain = row_grain(c), ranges = range_count(rows, grain);
  std::vector<double> parts(static_cast<size_t>(ranges * 2 * c), 0.0);
  parallel_ranges(rows, grain, [&](int64_t part, int64_t begin, int64_t n) {
    std::vector<float> s(static_cast<size_t>(2 * c), 0.0f);
    double* d = parts.data() + part * 2 * c;
    for (int64_t r = begin; r < begin + n; r += kBlockRows) {
      f(r * c, std::min(kBlockRows, begin + n - r), s.data(), s.data() + c);
      add_block_sums(c, s.data(), s.data() + c, d, d + c);
    }
  });
  first.assign(static_cast<size_t>(c), 0.0);
  second.assign(static_cast<size_t>(c), 0.0);
  for (int64_t p = 0; p < ranges; ++p)
    for (int64_t j = 0; j < c; ++j) {
      first[j] += parts[p * 2 * c + j];
      second[j] += parts[p * 2 * c + c + j];
    }
}

// Calls f(off, rows) for blocks of rows of a (rows, c) tensor, on all threads.
template <class F>
void for_blocks(int64_t rows, int64_t c, F&& f) {
  parallel_ranges(rows, row_grain(c), [&](int64_t, int64_t begin, int64_t n) {
    for (int64_t r = begin; r < begin + n; r += kBlockRows)
      f(r * c, std::min(kBlockRows, begin + n - r));
  });
}

// y = [relu](gamma ((x - mean) rstd) + beta [+ residual]) on all threads, one dtype E; bf16 rows
// by normalise_row_hw where hw_bf16.
template <class E>
void normalise(const Tensor& x, const Tensor* residual, const float* mean, const float* rstd,
               const float* gamma, const float* beta, bool relu, Tensor& y, bool hw_bf16) {
  using T = typename E::T;
  const int64_t c = x.cols();
  const T* px = x.ptr<T>();
  const T* pr = residual ? residual->ptr<T>() : nullptr;
  T* py = y.ptr<T>();
  (void)hw_bf16;  // without MPBENCH_BF16_HW_BUILT
#ifdef MPBENCH_BF16_HW_BUILT
  if constexpr (kIsBf16<E>)
    if (hw_bf16) {
      for_blocks(x.rows(), c, [&](int64_t off, int64_t rows) {
        for (int64_t i = off; i < off + rows * c; i += c)
          normalise_row_hw(px + i, pr ? pr + i : nullptr, py + i, c, mean, rstd, gamma, beta, relu);
      });
      return;
    }
#endif
  for_blocks(x.rows(), c, [&](int64_t off, int64_t rows) {
    auto run = [&](auto kernel) {
      kernel(px + off, pr ? pr + off : nullptr, py + off, rows, c, mean, rstd, gamma, beta);
    };
    if (residual)
      relu ? run(normalise_rows<E, true, true>) : run(normalise_rows<E, true, false>);
    else
      relu ? run(normalise_rows<E, false, true>) : run(normalise_rows<E, false, false>);
  });
}

}  // namespace

void OnednnBackend::batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x,
                                                 const Tensor* residual, const Tensor& gamma,
                                                 const Tensor& beta, Tensor& running_mean,
                                                 Tensor& running_var, Tensor& save_mean,
                                                 Tensor& save_rstd, Tensor& y) {
  const int64_t rows = x.rows(), c = x.cols();
  const bool native = rows > 0 && one_native_dtype({&x, residual, &y}, [&](auto e) {
                        using E = decltype(e);
                        std::vector<double> mean, sq;
                        moments<E>(x.ptr<typename E::T>(), rows, c, mean, sq);
                        cpu::batchnorm_statistics(d, rows, mean.data(), sq.data(), save_mean,
                                                  save_rstd, running_mean, running_var);
                        normalise<E>(x, residual, save_mean.ptr<float>(), save_rstd.ptr<float>(),
                                     gamma.ptr<float>(), beta.ptr<float>(), d.relu, y, hw_bf16_);
                      });
  if (!native) {
    fall_back("batchnorm_forward_train");
    CpuBackend::batchnorm_forward_train_impl(d, x, residual, gamma, beta, running_mean, running_var,
                                             save_mean, save_rstd, y);
  }
}

void OnednnBackend::batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x,
                                                const Tensor* residual, const Tensor& gamma,
                                                const Tensor& beta, const Tensor& running_mean,
                                                const Tensor& running_var, Tensor& y) {
  const bool native = one_native_dtype({&x, residual, &y}, [&](auto e) {
    const std::vector<float> rstd = cpu::batchnorm_eval_rstd(d, running_var);
    normalise<decltype(e)>(x, residual, running_mean.ptr<float>(), rstd.data(), gamma.ptr<float>(),
                           beta.ptr<float>(), d.relu, y, hw_bf16_);
  });
  if (!native) {
    fall_back("batchnorm_forward_eval");
    CpuBackend::batchnorm_forward_eval_impl(d, x, residual, gamma, beta, running_mean, running_var,
                                            y);
  }
}

void OnednnBackend::batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out,
                                            const Tensor& x, const Tensor& gamma,
                                            const Tensor& save_mean, const Tensor& save_rstd,
                                            Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                            Tensor* d_pre) {
  const int64_t rows = x.rows(), c = x.cols();
  // d_pre is written in the first pass, which x must outlive, and read in the second, which dx
  // must not overwrite first (the reference writes it beside dx in the second).
  const bool apart = !d_pre || (d_pre->data != x.data && d_pre->data != dx.data);
  const bool native =
      rows > 0 && apart && one_native_dtype({&dy, relu_out, &x, &dx, d_pre}, [&](auto e) {
        using E = decltype(e);
        using T = typename E::T;
        const float* mean = save_mean.ptr<float>();
        const float* rstd = save_rstd.ptr<float>();
        const T* pdy = dy.ptr<T>();
        const T* pro = relu_out ? relu_out->ptr<T>() : nullptr;
        const T* px = x.ptr<T>();
        T* pg = d_pre ? d_pre->ptr<T>() : nullptr;
        std::vector<double> sum_g, sum_gx;
        channel_sums(rows, c, sum_g, sum_gx, [&](int64_t off, int64_t n, float* a, float* b) {
          auto run = [&](auto kernel) {
            kernel(pdy + off, pro ? pro + off : nullptr, px + off, pg ? pg + off : nullptr, n, c,
                   mean, rstd, a, b);
          };
          if (pro)
            pg ? run(gradient_sums<E, true, true>) : run(gradient_sums<E, true, false>);
          else
            pg ? run(gradient_sums<E, false, true>) : run(gradient_sums<E, false, false>);
        });
        std::vector<float> mean_g(static_cast<size_t>(c)), mean_gx(static_cast<size_t>(c));
        for (int64_t j = 0; j < c; ++j) {
          dbeta.ptr<float>()[j] = static_cast<float>(sum_g[j]);
          dgamma.ptr<float>()[j] = static_cast<float>(sum_gx[j]);
          mean_g[j] = static_cast<float>(sum_g[j] / static_cast<double>(rows));
          mean_gx[j] = static_cast<float>(sum_gx[j] / static_cast<double>(rows));
        }
        // d_pre holds g: read it instead of dy and the mask.
        const T* g = pg ? pg : pdy;
        const bool mask = pro && !pg;
        T* pdx = dx.ptr<T>();
#ifdef MPBENCH_BF16_HW_BUILT
        if constexpr (kIsBf16<E>)
          if (hw_bf16_) {
            for_blocks(rows, c, [&](int64_t off, int64_t n) {
              for (int64_t i = off; i < off + n * c; i += c)
                input_gradient_row_hw(g + i, mask ? pro + i : nullptr, px + i, pdx + i, c, mean,
                                      rstd, gamma.ptr<float>(), mean_g.data(), mean_gx.data());
            });
            return;
          }
#endif
        for_blocks(rows, c, [&](int64_t off, int64_t n) {
          auto run = [&](auto kernel) {
            kernel(g + off, mask ? pro + off : nullptr, px + off, pdx + off, n, c, mean, rstd,
                   gamma.ptr<float>(), mean_g.data(), mean_gx.data());
          };
          mask ? run(input_gradient<E, true>) : run(input_gradient<E, false>);
        });
      });
  if (!native) {
    fall_back("batchnorm_backward");
    CpuBackend::batchnorm_backward_impl(dy, relu_out, x, gamma, save_mean, save_rstd, dx, dgamma,
                                        dbeta, d_pre);
  }
}

}  // namespace mpbench::onednn
