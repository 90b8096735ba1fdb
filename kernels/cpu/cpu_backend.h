#pragma once
// The CPU reference backend: host memory, a steady clock for events, and the ops of
// kernels/cpu/ops.h. It reproduces the numerics of each GPU precision mode, not its speed.
#include <vector>

#include "kernels/backend.h"

namespace mpbench {

class CpuBackend final : public Backend {
 public:
  CpuBackend();

  Device device() const override { return Device::CPU; }
  DeviceInfo info() const override { return info_; }
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* p) override;
  std::optional<DeviceMemInfo> memory_info() override { return std::nullopt; }
  size_t workspace_bytes() const override { return 0; }
  void set_workspace(const Tensor&) override {}

  void fill(Tensor& t, float value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void upload(const void* host, Tensor& dst) override;
  void download(const Tensor& src, void* host) override;
  void synchronize() override {}
  std::unique_ptr<Event> create_event() override;

  void gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c) override;
  void bias_act_backward(Activation act, const Tensor& dy, const Tensor& pre_act, Tensor& dx,
                         Tensor* dbias) override;
  void softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                    const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct) override;
  void cast(const Tensor& src, Tensor& dst) override;
  void unscale_check_norm(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                          Tensor& norm) override;
  void adamw_step(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m, Tensor& v,
                  Tensor* weights_lowp, const Tensor& step_count, const Tensor* found_inf) override;
  void sgd_step(const SgdParams& p, Tensor& master, const Tensor& grads, Tensor& momentum_buf,
                Tensor* weights_lowp, const Tensor* found_inf) override;
  void update_loss_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                         double growth_factor, double backoff_factor,
                         int32_t growth_interval) override;
  void count_step(Tensor& step_count, const Tensor* found_inf) override;

  void conv2d_forward(const ConvDesc& d, const Tensor& x, const Tensor& w, Tensor& y) override;
  void conv2d_backward_data(const ConvDesc& d, const Tensor& dy, const Tensor& w,
                            Tensor& dx) override;
  void conv2d_backward_filter(const ConvDesc& d, const Tensor& x, const Tensor& dy,
                              Tensor& dw) override;
  void batchnorm_forward_train(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                               const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                               Tensor& running_var, Tensor& save_mean, Tensor& save_rstd,
                               Tensor& y) override;
  void batchnorm_forward_eval(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                              const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                              const Tensor& running_var, Tensor& y) override;
  void batchnorm_backward(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                          const Tensor& gamma, const Tensor& save_mean, const Tensor& save_rstd,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta, Tensor* d_pre) override;
  void avgpool_forward(const Tensor& x, Tensor& y) override;
  void avgpool_backward(const Tensor& dy, Tensor& dx) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void layernorm_forward(float eps, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         Tensor& y, Tensor& mean, Tensor& rstd) override;
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                          const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                          Tensor& dbeta) override;
  void embedding_forward(const Tensor& tokens, const Tensor& tok_emb, const Tensor& pos_emb,
                         Tensor& y) override;
  void embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dtok_emb,
                          Tensor& dpos_emb) override;
  void permute(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) override;
  void attention_softmax_forward(const Tensor& x, float scale, bool causal, Tensor& y) override;
  void attention_softmax_backward(const Tensor& dy, const Tensor& y, float scale,
                                  Tensor& dx) override;

 private:
  DeviceInfo info_;
  // Decoded / TF32-rounded GEMM operands, grown to the largest GEMM seen and then reused.
  std::vector<float> gemm_scratch_;
};

}  // namespace mpbench
