#pragma once
// Row formulas the reference (kernels/cpu/) and the native backend (kernels/onednn/)
// share, static inline so that each file compiles its own copy its own way: the reference as plain
// loops, summing in order; the native backend inside its vector clones (MPBENCH_VECTOR_CLONES),
// where OpenMP's simd clauses let the sums run in vector lanes. Without OpenMP (the reference's
// files) MPBENCH_SIMD is nothing.
#include <cmath>
#include <cstdint>

#include "kernels/backend.h"

#ifdef _OPENMP
#define MPBENCH_PRAGMA(x) _Pragma(#x)
#define MPBENCH_SIMD(...) MPBENCH_PRAGMA(omp simd __VA_ARGS__)
#else
#define MPBENCH_SIMD(...)
#endif

namespace mpbench::cpu {

// LayerNorm of one row of d in place: (row - mean) * rstd * g + b; *mean, *rstd its statistics,
// two-pass in double (the shifted sum of squares does not cancel when |mean| >> stddev), the
// output in fp32 from the saved statistics, which is what the backward pass differentiates.
static inline void layernorm_row_forward(float* row, int64_t d, float eps, const float* g,
                                         const float* b, float* mean, float* rstd) {
  double sum = 0;
  MPBENCH_SIMD(reduction(+ : sum))
  for (int64_t j = 0; j < d; ++j) sum += row[j];
  const double mu = sum / static_cast<double>(d);
  double sq = 0;
  MPBENCH_SIMD(reduction(+ : sq))
  for (int64_t j = 0; j < d; ++j) {
    const double c = row[j] - mu;
    sq += c * c;
  }
  const float m = static_cast<float>(mu);
  const float s = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
  *mean = m;
  *rstd = s;
  MPBENCH_SIMD()
  for (int64_t j = 0; j < d; ++j) row[j] = (row[j] - m) * s * g[j] + b[j];
}

// Its backward for one row, with xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)) into x; dg += dy * xhat, db += dy, in
// Acc: double in the reference; the native backend sums a block of rows in float first.
template <class Acc>
static inline void layernorm_row_backward(float* x, float* dy, int64_t d, float m, float s,
                                          const float* gamma, Acc* dg, Acc* db) {
  double sum_g = 0, sum_gx = 0;
  MPBENCH_SIMD(reduction(+ : sum_g, sum_gx))
  for (int64_t j = 0; j < d; ++j) {
    const float xhat = (x[j] - m) * s;
    const float g = dy[j] * gamma[j];
    dg[j] += static_cast<Acc>(dy[j]) * xhat;
    db[j] += dy[j];
    sum_g += g;
    sum_gx += static_cast<double>(g) * xhat;
    x[j] = xhat;
    dy[j] = g;
  }
  const float mean_g = static_cast<float>(sum_g / static_cast<double>(d));
  const float mean_gx = static_cast<float>(sum_gx / static_cast<double>(d));
  MPBENCH_SIMD()
  for (int64_t j = 0; j < d; ++j) x[j] = s * (dy[j] - mean_g - x[j] * mean_gx);
}

}  // namespace mpbench::cpu
