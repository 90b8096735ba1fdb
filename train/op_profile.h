#pragma once
// Where a training step's time goes, op by op (`mpbench profile`). OpProfiler is a Backend that
// forwards every call to the real one and, while enabled, brackets each op with a pair of the
// backend's events (CUDA events on the GPU, a steady clock on the CPU). The time of an op is
// the stream time between its two events: its kernels, plus any time the device sat idle waiting
// for the host to enqueue them, which is part of what a step costs.
//
// Each op is filed under the scope it ran in — "<layer> fwd", "<layer> bwd" (the model says
// which layer runs through LayerObserver), or "step" for the loss, the gradient check, the
// optimizer and the batch copies — and a detail string of its shape and dtypes, so that two
// GEMMs of one layer with different shapes stay apart. Events are read only in collect(), so
// profiling adds no host synchronisation to the steps (it does add the event records).
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "models/model.h"
#include "train/trainer.h"

namespace mpbench {

struct OpTotal {
  std::string scope;   // "layer1 bwd", "step"
  std::string op;      // the Backend method: "gemm", "conv2d_backward_filter", ...
  std::string detail;  // shape and dtypes, e.g. "8192x2304x768 bf16 +bias"
  int64_t calls = 0;
  double ms = 0;     // summed over the profiled calls
  double flops = 0;  // summed over the calls, for GEMMs and convolutions (else 0)
  double bytes = 0;  // summed over the calls: the least each must move, for the memory-bound
                     // ops (0 for GEMMs and convolutions, which FLOPs judge)
};

class OpProfiler final : public Backend, public LayerObserver {
 public:
  explicit OpProfiler(Backend& inner) : inner_(inner) {}

  // Ops are timed only while enabled (not during warm-up or evaluation).
  void set_enabled(bool enabled) { enabled_ = enabled; }
  void on_layer(const std::string& layer, bool backward) override;
  // Waits for every recorded op and returns the totals so far, in first-seen order.
  std::vector<OpTotal> collect();

  // ---- Backend: forwarded, the ops timed ----------------------------------------------------
  Device device() const override { return inner_.device(); }
  DeviceInfo info() const override { return inner_.info(); }
  void* raw_alloc(size_t bytes) override { return inner_.raw_alloc(bytes); }
  void raw_free(void* p) override { inner_.raw_free(p); }
  std::optional<DeviceMemInfo> memory_info() override { return inner_.memory_info(); }
  size_t workspace_bytes() const override { return inner_.workspace_bytes(); }
  void set_workspace(const Tensor& ws) override { inner_.set_workspace(ws); }
  void fill(Tensor& t, float value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void upload(const void* host, Tensor& dst) override { inner_.upload(host, dst); }
  void download(const Tensor& src, void* host) override { inner_.download(src, host); }
  void synchronize() override { inner_.synchronize(); }
  std::unique_ptr<Event> create_event() override { return inner_.create_event(); }
  // A captured graph would hide the ops, so steps always run eagerly under the profiler.
  bool supports_graphs() const override { return false; }

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
  // Runs f bracketed by a pair of events and files its time under (scope, op, detail); only
  // called while enabled.
  template <typename F>
  void timed(const char* op, const std::string& detail, double flops, double bytes, F&& f);
  // Resolves the pending events into the totals (blocks until they complete).
  void resolve();

  struct Pending {
    size_t total;  // index into totals_
    std::unique_ptr<Event> start, stop;
  };
  Backend& inner_;
  bool enabled_ = false;
  std::string scope_ = "step";
  std::vector<OpTotal> totals_;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index_;
  std::vector<Pending> pending_;
  std::vector<std::unique_ptr<Event>> spare_;  // events of resolved ops, reused
};

// A profiled training run: `steps` steps after the spec's warm-up are timed op by op (not the
// warm-up, not the evaluations between epochs); the spec must run at least that many.
struct ProfiledRun {
  RunResult run;
  int64_t steps = 0;   // steps profiled
  double step_ms = 0;  // median device time of a profiled step (events between steps)
  std::vector<OpTotal> ops;
};
// Trains as train_and_measure does with `opts` (its on_progress and memory_limit are kept; the
// profiler takes the layer observer and the phases), timing every op of the first `steps`
// training steps after the warm-up.
ProfiledRun profile_training(const Spec& spec, const Dataset& data, Precision p, int64_t steps,
                             Backend& be, TrainOptions opts = {});

// What an op's achieved rate is held against: the card's datasheet peak for the mode and its
// memory bandwidth (train/device_specs.h). Absent for a CPU or a card not in the table.
struct Ceilings {
  double peak_tflops = 0;  // the mode's dense peak
  double memory_gbps = 0;
};
std::optional<Ceilings> ceilings_for(const DeviceInfo& device, Precision p);
// The share of its ceiling an op reached, in percent: TFLOP/s against the peak when it has
// FLOPs, else GB/s against the bandwidth when it has bytes; nullopt when it has neither.
std::optional<double> percent_of_ceiling(const OpTotal& op, const Ceilings& c);

// "8192x2304x768 bf16 +bias" for a GEMM, and 2*M*N*K (times the batch) FLOPs.
std::string gemm_detail(const GemmDesc& d, const Tensor& a, const Tensor& c);
double gemm_flops(const GemmDesc& d, const Tensor& a, const Tensor& c);

}  // namespace mpbench
