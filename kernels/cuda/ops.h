#pragma once
// The CUDA implementations of the ops in kernels/backend.h, one file per op family
// (gemm.cu, bias_act.cu, softmax_xent.cu, cast.cu, optimizer.cu, grad_stats.cu), same semantics
// as kernels/cpu/. All enqueue on ctx.stream() and never synchronise the host.
#include "kernels/backend.h"
#include "kernels/cuda/device_context.h"

namespace mpbench::cuda {

void gemm(DeviceContext& ctx, const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c);

// y = act(x + bias) where bias (N) is broadcast over rows; pre_act, when given, = x + bias.
// x may alias y or pre_act. Used for the parts of a GEMM epilogue cuBLASLt did not do.
void bias_act_forward(DeviceContext& ctx, Activation act, const Tensor& x, const Tensor* bias,
                      Tensor* pre_act, Tensor& y);
void bias_act_backward(DeviceContext& ctx, Activation act, const Tensor& dy, const Tensor& pre_act,
                       Tensor& dx, Tensor* dbias);

void softmax_xent(DeviceContext& ctx, const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                  const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct);

void cast(DeviceContext& ctx, const Tensor& src, Tensor& dst);
void fill(DeviceContext& ctx, Tensor& t, float value);

void unscale_check_norm(DeviceContext& ctx, Tensor& grads, const Tensor* scale, Tensor& found_inf,
                        Tensor& norm);

void adamw_step(DeviceContext& ctx, const AdamWParams& p, Tensor& master, const Tensor& grads,
                Tensor& m, Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                const Tensor* found_inf);
void sgd_step(DeviceContext& ctx, const SgdParams& p, Tensor& master, const Tensor& grads,
              Tensor& momentum_buf, Tensor* weights_lowp, const Tensor* found_inf);
void update_loss_scale(DeviceContext& ctx, Tensor& scale, Tensor& growth_tracker,
                       const Tensor& found_inf, float growth_factor, float backoff_factor,
                       int growth_interval);
void count_step(DeviceContext& ctx, Tensor& step_count, const Tensor* found_inf);

}  // namespace mpbench::cuda
