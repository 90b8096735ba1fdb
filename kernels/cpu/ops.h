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
// Row r of a (rows, n) float tensor decoded to fp32 / rounded from fp32: the row-wise ops
// (layernorm, batchnorm, attention softmax) work on one fp32 row at a time.
void load_row(const Tensor& t, int64_t r, int64_t n, float* out);
void store_row(const float* in, Tensor& t, int64_t r, int64_t n);

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
                       double growth_factor, double backoff_factor, int32_t growth_interval);
void count_step(Tensor& step_count, const Tensor* found_inf);

// ---- conv.cpp ---------------------------------------------------------------------------------
// x (N, H, W, C), w (K, R, S, C), y (N, P, Q, K): im2col + the CPU GEMM (so fp16/bf16/TF32
// numerics are the GEMM's). scratch holds the column matrix.
void conv2d_forward(const ConvDesc& d, const Tensor& x, const Tensor& w, Tensor& y,
                    std::vector<float>& scratch);
void conv2d_backward_data(const ConvDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx,
                          std::vector<float>& scratch);
void conv2d_backward_filter(const ConvDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw,
                            std::vector<float>& scratch);

// ---- batchnorm.cpp ----------------------------------------------------------------------------
// x, residual, y, dy, dx: (rows, C); gamma .. save_rstd, dgamma, dbeta: (C) fp32.
void batchnorm_forward_train(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                             const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, Tensor& save_mean, Tensor& save_rstd, Tensor& y);
void batchnorm_forward_eval(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                            const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, Tensor& y);
void batchnorm_backward(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                        const Tensor& gamma, const Tensor& save_mean, const Tensor& save_rstd,
                        Tensor& dx, Tensor& dgamma, Tensor& dbeta, Tensor* d_pre);

// ---- tensor_ops.cpp ---------------------------------------------------------------------------
// avgpool: x (N, HW, C) -> y (N, C). add: one numel, any float dtypes. permute: rank <= 5.
void avgpool_forward(const Tensor& x, Tensor& y);
void avgpool_backward(const Tensor& dy, Tensor& dx);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void permute(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm);

// ---- layernorm.cpp ----------------------------------------------------------------------------
// x, y, dy, dx: (rows, D); gamma, beta, dgamma, dbeta: (D) fp32; mean, rstd: (rows) fp32.
void layernorm_forward(float eps, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       Tensor& y, Tensor& mean, Tensor& rstd);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

// ---- embedding.cpp ----------------------------------------------------------------------------
// tokens (B, S) int32; tok_emb (V, D), pos_emb (P, D) fp32; y, dy (B*S, D).
void embedding_forward(const Tensor& tokens, const Tensor& tok_emb, const Tensor& pos_emb,
                       Tensor& y);
void embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dtok_emb, Tensor& dpos_emb);

// ---- attention.cpp ----------------------------------------------------------------------------
// x, y, dy, dx: (batch, S, S).
void attention_softmax_forward(const Tensor& x, float scale, bool causal, Tensor& y);
void attention_softmax_backward(const Tensor& dy, const Tensor& y, float scale, Tensor& dx);

// ---- shared checks (cast.cpp) ----------------------------------------------------------------
// Throws a Runtime error naming `what` unless t is a defined host tensor of dtype dt.
void check_tensor(const Tensor& t, DType dt, const char* what);
// The same for a one-element fp32 device scalar.
void check_scalar(const Tensor& t, const char* what, DType dt = DType::F32);
bool is_float_dtype(DType dt);

}  // namespace mpbench::cpu
