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
                         float growth_factor, float backoff_factor, int growth_interval) override;
  void count_step(Tensor& step_count, const Tensor* found_inf) override;

 private:
  DeviceInfo info_;
  // Decoded / TF32-rounded GEMM operands, grown to the largest GEMM seen and then reused.
  std::vector<float> gemm_scratch_;
};

}  // namespace mpbench
