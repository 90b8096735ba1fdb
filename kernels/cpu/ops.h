#pragma once
// The CPU reference ops, one family per file (kernels/cpu/<op>.cpp, mirrored by
// kernels/cuda/<op>.cu). Semantics are those documented on `Backend` in kernels/backend.h; this
// header only adds the shapes and the per-backend scratch the GEMM needs.
//
// Numerics: fp16/bf16 are stored as 16-bit patterns and decoded exactly (kernels/dtype.h); all
// math is fp32 and each output is rounded once to its dtype, so the CPU reproduces the GPU's
// overflow, underflow and loss-scale skips.
#include <vector>

#include "kernels/backend.h"

namespace mpbench::cpu {

// ---- gemm.cpp --------------------------------------------------------------------------------
// a: (M, K), or (K, M) with trans_a; b: (K, N), or (N, K) with trans_b; c: (M, N).
// Rank 3: (batch, ., .) for all three, batched over dim 0.
// scratch holds decoded / TF32-rounded operands; it grows as needed and is reused across calls.
void gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c,
          std::vector<float>& scratch);

// ---- bias_act.cpp ----------------------------------------------------------------------------
// dy, pre_act, dx: (rows, N), one dtype; dbias: (N) fp32 or null. dx may alias dy.
void bias_act_backward(Activation act, const Tensor& dy, const Tensor& pre_act, Tensor& dx,
                       Tensor* dbias);
// The activation and its derivative, shared by the GEMM epilogue and the backward pass.
float activation_forward(Activation act, float x);
float activation_derivative(Activation act, float x);

// ---- softmax_xent.cpp ------------------------------------------------------------------------
// logits: (N, C) fp32; labels: (N) int32; dlogits: (N, C) any float dtype or null;
// grad_scale, loss_sum, correct: (1) fp32.
void softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                  const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct);

// ---- cast.cpp --------------------------------------------------------------------------------
// src, dst: same numel, any float dtypes (fp32, fp16, bf16).
void cast(const Tensor& src, Tensor& dst);
// t: any shape and dtype; value converted once (int32: truncated toward zero).
void fill(Tensor& t, float value);
// Decodes n elements of a float tensor into fp32 / rounds fp32 into one, from element 0.
void decode_f32(const Tensor& src, float* out, int64_t n);
void encode_f32(const float* in, Tensor& dst, int64_t n);

// ---- grad_stats.cpp --------------------------------------------------------------------------
// grads: flat fp32; scale, found_inf, norm: (1) fp32.
void unscale_check_norm(Tensor& grads, const Tensor* scale, Tensor& found_inf, Tensor& norm);

// ---- optimizer.cpp ---------------------------------------------------------------------------
// master, grads, m, v, momentum_buf: flat fp32, one numel; weights_lowp: same numel, fp16/bf16;
// step_count, found_inf, scale, growth_tracker: (1) fp32.
void adamw_step(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m, Tensor& v,
                Tensor* weights_lowp, const Tensor& step_count, const Tensor* found_inf);
void sgd_step(const SgdParams& p, Tensor& master, const Tensor& grads, Tensor& momentum_buf,
              Tensor* weights_lowp, const Tensor* found_inf);
void update_loss_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                       float growth_factor, float backoff_factor, int growth_interval);
void count_step(Tensor& step_count, const Tensor* found_inf);

// ---- shared checks (cast.cpp) ----------------------------------------------------------------
// Throws a Runtime error naming `what` unless t is a defined host tensor of dtype dt.
void check_tensor(const Tensor& t, DType dt, const char* what);
// The same for a one-element fp32 device scalar.
void check_scalar(const Tensor& t, const char* what);
bool is_float_dtype(DType dt);

}  // namespace mpbench::cpu
