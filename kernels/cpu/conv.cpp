// 2-D convolution in NHWC with KRSC filters, CPU reference: im2col + the CPU GEMM, so that the
// fp16 / bf16 / TF32 numerics of a convolution are exactly those of cpu::gemm.
//
// x (N, H, W, C), w (K, R, S, C), y (N, P, Q, K); the column matrix col (N*P*Q, R*S*C) holds, in
// row (n, p, q), the input patch under the filter at output pixel (p, q), zeros where it hangs
// over the padding. Then
//   forward          y (NPQ, K)    = col (NPQ, RSC) * w^T           (w viewed as (K, RSC))
//   backward_data    dcol (NPQ, RSC) = dy (NPQ, K) * w (K, RSC), fp32, scatter-added into dx
//   backward_filter  dw (K, RSC)   = dy^T (K, NPQ) * col (NPQ, RSC)
// A 1x1, stride-1, unpadded convolution is a plain GEMM on x itself: no column matrix.
//
// The column matrix is a pure gather, so it is built in x's own dtype (16-bit patterns copied
// exactly), which is what the GEMM reads in the low-precision modes, as cuDNN's implicit GEMM
// reads fp16 inputs. It lives in the backend's scratch; the GEMM decodes its operands
// into a second, per-thread buffer (gemm_scratch below), since cpu::gemm resizes the vector it is
// given and so cannot share the one that holds one of its operands.
#include <algorithm>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {
namespace {

// A row-major (rows, cols) view of dtype dt, offset_floats into scratch.
Tensor scratch_view(std::vector<float>& scratch, int64_t offset_floats, int64_t rows, int64_t cols,
                    DType dt) {
  Tensor t;
  t.data = scratch.data() + offset_floats;
  t.shape = Shape{rows, cols};
  t.dtype = dt;
  t.device = Device::CPU;
  return t;
}

// Floats of scratch needed to hold n elements of dtype dt.
int64_t floats_for(int64_t n, DType dt) {
  return dt == DType::F32 ? n : (n + 1) / 2;
}

// x (N, H, W, C) -> col (NPQ, RSC), in x's element type T (float or a 16-bit pattern).
template <class T>
void im2col(const ConvGeom& g, const T* x, T* col) {
  const int64_t rsc = g.rsc();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t p = 0; p < g.p; ++p)
      for (int64_t q = 0; q < g.q; ++q) {
        T* row = col + ((n * g.p + p) * g.q + q) * rsc;
        for (int64_t r = 0; r < g.r; ++r) {
          const int64_t h = p * g.stride - g.pad + r;
          for (int64_t s = 0; s < g.s; ++s) {
            const int64_t wi = q * g.stride - g.pad + s;
            T* dst = row + (r * g.s + s) * g.c;
            if (h < 0 || h >= g.h || wi < 0 || wi >= g.w) {
              std::fill(dst, dst + g.c, T{0});  // +0 is all-zero bits in every float dtype
            } else {
              const T* src = x + ((n * g.h + h) * g.w + wi) * g.c;
              std::copy(src, src + g.c, dst);
            }
          }
        }
      }
}

// dcol (NPQ, RSC) fp32 scatter-added into dx (N, H, W, C) fp32, which must start at zero.
void col2im(const ConvGeom& g, const float* dcol, float* dx) {
  const int64_t rsc = g.rsc();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t p = 0; p < g.p; ++p)
      for (int64_t q = 0; q < g.q; ++q) {
        const float* row = dcol + ((n * g.p + p) * g.q + q) * rsc;
        for (int64_t r = 0; r < g.r; ++r) {
          const int64_t h = p * g.stride - g.pad + r;
          if (h < 0 || h >= g.h) continue;
          for (int64_t s = 0; s < g.s; ++s) {
            const int64_t wi = q * g.stride - g.pad + s;
            if (wi < 0 || wi >= g.w) continue;
            const float* src = row + (r * g.s + s) * g.c;
            float* dst = dx + ((n * g.h + h) * g.w + wi) * g.c;
            for (int64_t c = 0; c < g.c; ++c) dst[c] += src[c];
          }
        }
      }
}

// The column matrix of x in x's dtype, built in scratch (or x itself for a pointwise conv).
Tensor column_matrix(const ConvGeom& g, const Tensor& x, std::vector<float>& scratch) {
  if (g.is_pointwise()) return x.reshaped(Shape{g.npq(), g.rsc()});
  const int64_t need = floats_for(g.npq() * g.rsc(), x.dtype);
  if (static_cast<int64_t>(scratch.size()) < need) scratch.resize(static_cast<size_t>(need));
  Tensor col = scratch_view(scratch, 0, g.npq(), g.rsc(), x.dtype);
  if (x.dtype == DType::F32) {
    im2col(g, x.ptr<float>(), col.ptr<float>());
  } else {
    im2col(g, x.ptr<uint16_t>(), col.ptr<uint16_t>());
  }
  return col;
}

// The GEMM's own buffer for decoded / TF32-rounded operands; see the file comment.
std::vector<float>& gemm_scratch() {
  static thread_local std::vector<float> s;
  return s;
}

}  // namespace

// x (N, H, W, C), w (K, R, S, C) -> y (N, P, Q, K).
void CpuBackend::conv2d_forward_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                     const Tensor& w, Tensor& y) {
  const Tensor col = column_matrix(g, x, scratch_);
  GemmDesc gd;
  gd.trans_b = true;
  gd.math = d.math;
  Tensor y2 = y.reshaped(Shape{g.npq(), g.k});
  cpu::gemm(gd, GemmGeom{1, g.npq(), g.k, g.rsc()}, col, w.reshaped(Shape{g.k, g.rsc()}), y2,
            gemm_scratch());
}

// dy (N, P, Q, K), w (K, R, S, C) -> dx (N, H, W, C), overwritten.
void CpuBackend::conv2d_backward_data_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& dy,
                                           const Tensor& w, Tensor& dx) {
  std::vector<float>& scratch = scratch_;
  const GemmGeom gg{1, g.npq(), g.rsc(), g.k};
  const Tensor dy2 = dy.reshaped(Shape{g.npq(), g.k});
  const Tensor w2 = w.reshaped(Shape{g.k, g.rsc()});
  GemmDesc gd;
  gd.math = d.math;
  if (g.is_pointwise()) {
    Tensor dx2 = dx.reshaped(Shape{g.npq(), g.rsc()});
    cpu::gemm(gd, gg, dy2, w2, dx2, gemm_scratch());
    return;
  }
  // Scratch: [dcol (NPQ, RSC) fp32 | dx accumulator (NHWC) fp32 unless dx is fp32 itself]. The
  // overlapping patches of one input pixel are summed in fp32 and rounded once into dx.
  const int64_t col_elems = g.npq() * g.rsc();
  const int64_t x_elems = dx.numel();
  const bool direct = dx.dtype == DType::F32;
  const int64_t need = col_elems + (direct ? 0 : x_elems);
  if (static_cast<int64_t>(scratch.size()) < need) scratch.resize(static_cast<size_t>(need));
  Tensor dcol = scratch_view(scratch, 0, g.npq(), g.rsc(), DType::F32);
  cpu::gemm(gd, gg, dy2, w2, dcol, gemm_scratch());
  float* acc = direct ? dx.ptr<float>() : scratch.data() + col_elems;
  std::fill(acc, acc + x_elems, 0.0f);
  col2im(g, dcol.ptr<float>(), acc);
  if (!direct) encode_f32(acc, dx, x_elems);
}

// x (N, H, W, C), dy (N, P, Q, K) -> dw (K, R, S, C) in x's dtype, overwritten.
void CpuBackend::conv2d_backward_filter_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                             const Tensor& dy, Tensor& dw) {
  const Tensor col = column_matrix(g, x, scratch_);
  GemmDesc gd;
  gd.trans_a = true;
  gd.math = d.math;
  Tensor dw2 = dw.reshaped(Shape{g.k, g.rsc()});
  cpu::gemm(gd, GemmGeom{1, g.k, g.rsc(), g.npq()}, dy.reshaped(Shape{g.npq(), g.k}), col, dw2,
            gemm_scratch());
}

}  // namespace mpbench::cpu
