#pragma once
// What the CPU reference ops (kernels/cpu/<op>.cpp, the CpuBackend members of
// kernels/cpu/cpu_backend.h) share: the GEMM the convolutions run on and the conversions
// between a tensor's dtype and fp32.
//
// Numerics: fp16/bf16 are stored as 16-bit patterns and decoded exactly (kernels/dtype.h); all
// math is fp32 and each output is rounded to its dtype where autocast's op would write it (once
// per op; twice where autocast has two ops, e.g. a GEMM's output then its activation), so the CPU
// reproduces the GPU's overflow, underflow and loss-scale skips.
#include <array>
#include <vector>

#include "kernels/backend.h"
#include "kernels/pool_window.h"

namespace mpbench::cpu {

// ---- gemm.cpp --------------------------------------------------------------------------------
// Backend::gemm's semantics, on operands already checked, with g their sizes. scratch holds
// decoded / TF32-rounded operands; it grows as needed and is reused across calls.
void gemm(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b, Tensor& c,
          std::vector<float>& scratch);

// ---- cast.cpp --------------------------------------------------------------------------------
// Decodes n elements of a float tensor into fp32 / rounds fp32 into one, from element 0.
void decode_f32(const Tensor& src, float* out, int64_t n);
void encode_f32(const float* in, Tensor& dst, int64_t n);
// Row r of a (rows, n) float tensor decoded to fp32 / rounded from fp32: the row-wise ops
// (layernorm, batchnorm, attention softmax) work on one fp32 row at a time.
void load_row(const Tensor& t, int64_t r, int64_t n, float* out);
void store_row(const float* in, Tensor& t, int64_t r, int64_t n);

// ---- embedding.cpp ---------------------------------------------------------------------------
// Every token in [0, vocab), or a one-line error naming the op and where (checked on the host).
void check_tokens(const char* op, const EmbeddingGeom& e, const Tensor& tokens);

// ---- softmax_xent.cpp ------------------------------------------------------------------------
// The index of a row's largest entry, ties going to the lowest (the accuracy count's rule); *max
// receives that entry, the max of a stable softmax. Shared with the native backend's loss.
int64_t argmax_first(const float* row, int64_t n, float* max);
// Every label in [0, classes), or a one-line error naming the row (checked on the host: a GPU
// cannot read the labels without a synchronisation).
void check_labels(const int32_t* labels, int64_t rows, int64_t classes);

// ---- tensor_ops.cpp --------------------------------------------------------------------------
// A max pool's sizes: x (N, H, W, C) pooled into y (N, P, Q, C).
PoolGeom pool_geom(const PoolDesc& d, const Tensor& x, const Tensor& y);
// A permute's walk over dst's rows (its last dimension) in order, from row `first_row`: src's
// strides taken in dst's dimension order (dst's dimension k is src's perm[k]), and the src
// offset of the current row's first element, advanced row by row as an odometer.
struct PermuteRows {
  PermuteRows(const Shape& src, const Shape& dst, const std::array<int, 5>& perm,
              int64_t first_row);
  void next();  // to the next row of dst
  int rank;
  int64_t stride[Shape::kMaxRank];
  int64_t offset = 0;

 private:
  int64_t dims_[Shape::kMaxRank], index_[Shape::kMaxRank] = {};
};

// ---- batchnorm.cpp ---------------------------------------------------------------------------
// From the per-channel batch means and sums of squared deviations (double, over `rows` rows):
// save_mean, save_rstd and the running statistics' update (the unbiased variance, as PyTorch).
// Shared with the native backend, which has them from oneDNN's batch mean and variance.
void batchnorm_statistics(const BatchNormDesc& d, int64_t rows, const double* mean,
                          const double* sq, Tensor& save_mean, Tensor& save_rstd,
                          Tensor& running_mean, Tensor& running_var);
// 1 / sqrt(running_var + eps) per channel, for evaluation.
std::vector<float> batchnorm_eval_rstd(const BatchNormDesc& d, const Tensor& running_var);

}  // namespace mpbench::cpu
