#pragma once
// The CPU reference backend: host memory, a steady clock for events, and the ops of
// kernels/cpu/<op>.cpp. It reproduces the numerics of each GPU precision mode, not its speed.
// The native CPU backend (kernels/onednn) derives from it for host memory, events and the ops
// it does not run on oneDNN.
#include <vector>

#include "kernels/backend.h"

namespace mpbench::cpu {

class CpuBackend : public Backend {
 public:
  CpuBackend();

  Device device() const override { return Device::CPU; }
  DeviceInfo info() const override { return info_; }
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* p) override;
  std::optional<DeviceMemInfo> memory_info() override { return std::nullopt; }
  size_t workspace_bytes() const override { return 0; }
  void set_workspace(const Tensor&) override {}

  void synchronize() override {}
  std::unique_ptr<Event> create_event() override;

 protected:
  // Each op in kernels/cpu/<op>.cpp, with its arguments checked by Backend.
  void fill_impl(Tensor& t, float value) override;
  void copy_impl(const Tensor& src, Tensor& dst) override;
  void upload_impl(const void* host, Tensor& dst) override;
  void download_impl(const Tensor& src, void* host) override;
  void gemm_impl(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b,
                 Tensor& c) override;
  void bias_act_backward_impl(Activation act, const Tensor& dy, const Tensor& pre_act, Tensor& dx,
                              Tensor* dbias) override;
  void softmax_xent_impl(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                         const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                         int64_t grad_rows) override;
  void cast_impl(const Tensor& src, Tensor& dst) override;
  void round_to_impl(Tensor& t, DType to) override;
  void cast_to_fp8_impl(const Tensor& src, const Tensor& scale, Tensor* amax, Tensor& dst,
                        Tensor* dst_t) override;
  void fp8_update_scaling_impl(const DelayedScalingRecipe& r, DType format, Tensor& history,
                               Tensor& scale, Tensor& scale_inv, Tensor& amax_used) override;
  void unscale_check_norm_impl(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                               Tensor& norm) override;
  void adamw_step_impl(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m,
                       Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                       const Tensor* found_inf) override;
  void sgd_step_impl(const SgdParams& p, Tensor& master, const Tensor& grads, Tensor& momentum_buf,
                     Tensor* weights_lowp, const Tensor* found_inf) override;
  void update_loss_scale_impl(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                              double growth_factor, double backoff_factor,
                              int32_t growth_interval) override;
  void count_step_impl(Tensor& step_count, const Tensor* found_inf) override;
  void conv2d_forward_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x, const Tensor& w,
                           Tensor& y) override;
  void conv2d_backward_data_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& dy,
                                 const Tensor& w, Tensor& dx) override;
  void conv2d_backward_filter_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                   const Tensor& dy, Tensor& dw) override;
  void batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                                    const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                    Tensor& running_var, Tensor& save_mean, Tensor& save_rstd,
                                    Tensor& y) override;
  void batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                                   const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   Tensor& y) override;
  void batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                               const Tensor& gamma, const Tensor& save_mean,
                               const Tensor& save_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                               Tensor* d_pre) override;
  void avgpool_forward_impl(const Tensor& x, Tensor& y) override;
  void avgpool_backward_impl(const Tensor& dy, Tensor& dx) override;
  void maxpool2d_forward_impl(const PoolDesc& d, const Tensor& x, Tensor& y) override;
  void maxpool2d_backward_impl(const PoolDesc& d, const Tensor& x, const Tensor& dy,
                               Tensor& dx) override;
  void add_impl(const Tensor& a, const Tensor& b, Tensor& out) override;
  void layernorm_forward_impl(float eps, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              Tensor& y, Tensor& mean, Tensor& rstd) override;
  void layernorm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                               const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                               Tensor& dbeta) override;
  void embedding_forward_impl(const EmbeddingGeom& g, const Tensor& tokens, const Tensor& tok_emb,
                              const Tensor& pos_emb, Tensor& y) override;
  void embedding_backward_impl(const EmbeddingGeom& g, const Tensor& tokens, const Tensor& dy,
                               Tensor& dtok_emb, Tensor& dpos_emb, bool add_to_tok) override;
  void permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) override;
  void attention_softmax_forward_impl(const Tensor& x, float scale, bool causal,
                                      Tensor& y) override;
  void attention_softmax_backward_impl(const Tensor& dy, const Tensor& y, float scale,
                                       Tensor& dx) override;

 protected:
  DeviceInfo info_;

 private:
  // The decoded / TF32-rounded operands of a GEMM, the column matrix of a convolution: grown to
  // the largest seen, then reused.
  std::vector<float> scratch_;
};

}  // namespace mpbench::cpu
