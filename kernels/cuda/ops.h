#pragma once
// The CUDA implementations of the ops in kernels/backend.h, one file per op family, with the
// semantics documented there. Backend has checked the arguments (shapes, dtypes, devices); what
// is left here are the limits of CUDA and its libraries. All enqueue on ctx.stream() and never
// synchronise the host.
#include "kernels/backend.h"
#include "kernels/cuda/device_context.h"

namespace mpbench::cuda {

void gemm(DeviceContext& ctx, const GemmDesc& d, const GemmGeom& g, const Tensor& a,
          const Tensor& b, Tensor& c);

// y = act(p), p = x + bias rounded to y's dtype, bias (N) broadcast over rows; pre_act, when
// given, = p.
// x may alias y or pre_act. Used for the parts of a GEMM epilogue cuBLASLt did not do (not a
// Backend op, so it checks its own arguments).
void bias_act_forward(DeviceContext& ctx, Activation act, const Tensor& x, const Tensor* bias,
                      Tensor* pre_act, Tensor& y);
void bias_act_backward(DeviceContext& ctx, Activation act, const Tensor& dy, const Tensor& pre_act,
                       Tensor& dx, Tensor* dbias);

void softmax_xent(DeviceContext& ctx, const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                  const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct, int64_t grad_rows);

void cast(DeviceContext& ctx, const Tensor& src, Tensor& dst);
void round_to(DeviceContext& ctx, Tensor& t, DType to);
void cast_to_fp8(DeviceContext& ctx, const Tensor& src, const Tensor& scale, Tensor* amax,
                 Tensor& dst, Tensor* dst_t);
void fp8_update_scaling(DeviceContext& ctx, const DelayedScalingRecipe& r, DType format,
                        Tensor& history, Tensor& scale, Tensor& scale_inv, Tensor& amax_used);
void fill(DeviceContext& ctx, Tensor& t, float value);

void unscale_check_norm(DeviceContext& ctx, Tensor& grads, const Tensor* scale, Tensor& found_inf,
                        Tensor& norm);

void adamw_step(DeviceContext& ctx, const AdamWParams& p, Tensor& master, const Tensor& grads,
                Tensor& m, Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                const Tensor* found_inf);
void sgd_step(DeviceContext& ctx, const SgdParams& p, Tensor& master, const Tensor& grads,
              Tensor& momentum_buf, Tensor* weights_lowp, const Tensor* found_inf);
void update_loss_scale(DeviceContext& ctx, Tensor& scale, Tensor& growth_tracker,
                       const Tensor& found_inf, double growth_factor, double backoff_factor,
                       int32_t growth_interval);
void count_step(DeviceContext& ctx, Tensor& step_count, const Tensor* found_inf);

// ---- resnet_bottleneck family: conv.cu (cuDNN), batchnorm.cu, tensor_ops.cu ------------------
// g: the sizes Backend's checks found.
void conv2d_forward(DeviceContext& ctx, const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                    const Tensor& w, Tensor& y);
void conv2d_backward_data(DeviceContext& ctx, const ConvDesc& d, const ConvGeom& g,
                          const Tensor& dy, const Tensor& w, Tensor& dx);
void conv2d_backward_filter(DeviceContext& ctx, const ConvDesc& d, const ConvGeom& g,
                            const Tensor& x, const Tensor& dy, Tensor& dw);
// The context's convolution plans as Backend::conv_algorithms reports them, in first-use order.
std::vector<ConvAlgorithm> conv_algorithms(const DeviceContext& ctx);
void batchnorm_forward_train(DeviceContext& ctx, const BatchNormDesc& d, const Tensor& x,
                             const Tensor* residual, const Tensor& gamma, const Tensor& beta,
                             Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                             Tensor& save_rstd, Tensor& y);
void batchnorm_forward_eval(DeviceContext& ctx, const BatchNormDesc& d, const Tensor& x,
                            const Tensor* residual, const Tensor& gamma, const Tensor& beta,
                            const Tensor& running_mean, const Tensor& running_var, Tensor& y);
void batchnorm_backward(DeviceContext& ctx, const Tensor& dy, const Tensor* relu_out,
                        const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        Tensor* d_pre);
void avgpool_forward(DeviceContext& ctx, const Tensor& x, Tensor& y);
void avgpool_backward(DeviceContext& ctx, const Tensor& dy, Tensor& dx);
void maxpool2d_forward(DeviceContext& ctx, const PoolDesc& d, const Tensor& x, Tensor& y);
void maxpool2d_backward(DeviceContext& ctx, const PoolDesc& d, const Tensor& x, const Tensor& dy,
                        Tensor& dx);
void add(DeviceContext& ctx, const Tensor& a, const Tensor& b, Tensor& out);
void permute(DeviceContext& ctx, const Tensor& src, Tensor& dst, const std::array<int, 5>& perm);

// ---- transformer family: layernorm.cu, embedding.cu, attention.cu ----------------------------
void layernorm_forward(DeviceContext& ctx, float eps, const Tensor& x, const Tensor& gamma,
                       const Tensor& beta, Tensor& y, Tensor& mean, Tensor& rstd);
void layernorm_backward(DeviceContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                        Tensor& dbeta);
void embedding_forward(DeviceContext& ctx, const EmbeddingGeom& e, const Tensor& tokens,
                       const Tensor& tok_emb, const Tensor& pos_emb, Tensor& y);
void embedding_backward(DeviceContext& ctx, const EmbeddingGeom& e, const Tensor& tokens,
                        const Tensor& dy, Tensor& dtok_emb, Tensor& dpos_emb, bool add_to_tok);
void attention_softmax_forward(DeviceContext& ctx, const Tensor& x, float scale, bool causal,
                               Tensor& y);
void attention_softmax_backward(DeviceContext& ctx, const Tensor& dy, const Tensor& y, float scale,
                                Tensor& dx);

}  // namespace mpbench::cuda
