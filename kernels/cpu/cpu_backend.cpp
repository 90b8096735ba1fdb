// CpuBackend: memory, transfers and events on the host; every op forwards to kernels/cpu/<op>.cpp.
#include "kernels/cpu/cpu_backend.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "kernels/cpu/ops.h"

namespace mpbench {
namespace {

// 64 bytes: a cache line, and the widest vector load (AVX-512).
constexpr size_t kAlignment = 64;

// The value of a "key : value" line of a /proc file, or "" when absent.
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// MemAvailable in bytes, or 0 when unknown; only used to explain an allocation failure.
size_t available_bytes() {
  const std::string kb = proc_field("/proc/meminfo", "MemAvailable");
  return kb.empty() ? 0 : static_cast<size_t>(std::strtoull(kb.c_str(), nullptr, 10)) * 1024;
}

class CpuEvent final : public Event {
 public:
  void record() override {
    time_ = std::chrono::steady_clock::now();
    recorded_ = true;
  }
  double elapsed_ms(const Event& start) override {
    const auto* s = dynamic_cast<const CpuEvent*>(&start);
    MPB_CHECK(s != nullptr, "elapsed_ms: the start event is not a CPU event");
    MPB_CHECK(recorded_ && s->recorded_, "elapsed_ms: an event was never recorded");
    return std::chrono::duration<double, std::milli>(time_ - s->time_).count();
  }

 private:
  std::chrono::steady_clock::time_point time_;
  bool recorded_ = false;
};

void check_host(const Tensor& t, const char* what) {
  MPB_CHECK(t.defined() || t.numel() == 0, "{}: tensor is not allocated", what);
  MPB_CHECK(t.device == Device::CPU, "{}: tensor is not on the CPU", what);
}

}  // namespace

CpuBackend::CpuBackend() {
  info_.kind = "cpu";
  info_.name = proc_field("/proc/cpuinfo", "model name");
  if (info_.name.empty()) info_.name = "unknown CPU";
  info_.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  describe_blas(info_);
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0)
    info_.total_memory = static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

void* CpuBackend::raw_alloc(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; overflow of the round-up is a failure too.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p =
      rounded >= bytes ? std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment) : nullptr;
  if (!p) {
    throw Error(ErrorKind::OutOfMemory,
                fmt::format("out of host memory: asked for {} bytes, {} bytes available", bytes,
                            available_bytes()),
                /*oom=*/true);
  }
  return p;
}

void CpuBackend::raw_free(void* p) {
  std::free(p);
}

void CpuBackend::fill(Tensor& t, float value) {
  check_host(t, "fill");
  cpu::fill(t, value);
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  check_host(src, "copy: src");
  check_host(dst, "copy: dst");
  MPB_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel(),
            "copy: {} {} into {} {}: dtype and element count must match", dtype_name(src.dtype),
            src.shape.str(), dtype_name(dst.dtype), dst.shape.str());
  if (src.data != dst.data) std::memmove(dst.data, src.data, src.bytes());
}

void CpuBackend::upload(const void* host, Tensor& dst) {
  check_host(dst, "upload");
  MPB_CHECK(host != nullptr || dst.bytes() == 0, "upload: null host pointer");
  if (dst.bytes()) std::memcpy(dst.data, host, dst.bytes());
}

void CpuBackend::download(const Tensor& src, void* host) {
  check_host(src, "download");
  MPB_CHECK(host != nullptr || src.bytes() == 0, "download: null host pointer");
  if (src.bytes()) std::memcpy(host, src.data, src.bytes());
}

std::unique_ptr<Event> CpuBackend::create_event() {
  return std::make_unique<CpuEvent>();
}

void CpuBackend::gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c) {
  cpu::gemm(d, a, b, c, gemm_scratch_);
}

void CpuBackend::bias_act_backward(Activation act, const Tensor& dy, const Tensor& pre_act,
                                   Tensor& dx, Tensor* dbias) {
  cpu::bias_act_backward(act, dy, pre_act, dx, dbias);
}

void CpuBackend::softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                              const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct) {
  cpu::softmax_xent(logits, labels, dlogits, grad_scale, loss_sum, correct);
}

void CpuBackend::cast(const Tensor& src, Tensor& dst) {
  cpu::cast(src, dst);
}

void CpuBackend::unscale_check_norm(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                                    Tensor& norm) {
  cpu::unscale_check_norm(grads, scale, found_inf, norm);
}

void CpuBackend::adamw_step(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m,
                            Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                            const Tensor* found_inf) {
  cpu::adamw_step(p, master, grads, m, v, weights_lowp, step_count, found_inf);
}

void CpuBackend::sgd_step(const SgdParams& p, Tensor& master, const Tensor& grads,
                          Tensor& momentum_buf, Tensor* weights_lowp, const Tensor* found_inf) {
  cpu::sgd_step(p, master, grads, momentum_buf, weights_lowp, found_inf);
}

void CpuBackend::update_loss_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                                   double growth_factor, double backoff_factor,
                                   int32_t growth_interval) {
  cpu::update_loss_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                         growth_interval);
}

void CpuBackend::count_step(Tensor& step_count, const Tensor* found_inf) {
  cpu::count_step(step_count, found_inf);
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

void CpuBackend::conv2d_forward(const ConvDesc& d, const Tensor& x, const Tensor& w, Tensor& y) {
  cpu::conv2d_forward(d, x, w, y, gemm_scratch_);
}

void CpuBackend::conv2d_backward_data(const ConvDesc& d, const Tensor& dy, const Tensor& w,
                                      Tensor& dx) {
  cpu::conv2d_backward_data(d, dy, w, dx, gemm_scratch_);
}

void CpuBackend::conv2d_backward_filter(const ConvDesc& d, const Tensor& x, const Tensor& dy,
                                        Tensor& dw) {
  cpu::conv2d_backward_filter(d, x, dy, dw, gemm_scratch_);
}

void CpuBackend::batchnorm_forward_train(const BatchNormDesc& d, const Tensor& x,
                                         const Tensor* residual, const Tensor& gamma,
                                         const Tensor& beta, Tensor& running_mean,
                                         Tensor& running_var, Tensor& save_mean, Tensor& save_rstd,
                                         Tensor& y) {
  cpu::batchnorm_forward_train(d, x, residual, gamma, beta, running_mean, running_var, save_mean,
                               save_rstd, y);
}

void CpuBackend::batchnorm_forward_eval(const BatchNormDesc& d, const Tensor& x,
                                        const Tensor* residual, const Tensor& gamma,
                                        const Tensor& beta, const Tensor& running_mean,
                                        const Tensor& running_var, Tensor& y) {
  cpu::batchnorm_forward_eval(d, x, residual, gamma, beta, running_mean, running_var, y);
}

void CpuBackend::batchnorm_backward(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                                    const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_rstd, Tensor& dx, Tensor& dgamma,
                                    Tensor& dbeta, Tensor* d_pre) {
  cpu::batchnorm_backward(dy, relu_out, x, gamma, save_mean, save_rstd, dx, dgamma, dbeta, d_pre);
}

void CpuBackend::avgpool_forward(const Tensor& x, Tensor& y) {
  cpu::avgpool_forward(x, y);
}

void CpuBackend::avgpool_backward(const Tensor& dy, Tensor& dx) {
  cpu::avgpool_backward(dy, dx);
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  cpu::add(a, b, out);
}

void CpuBackend::layernorm_forward(float eps, const Tensor& x, const Tensor& gamma,
                                   const Tensor& beta, Tensor& y, Tensor& mean, Tensor& rstd) {
  cpu::layernorm_forward(eps, x, gamma, beta, y, mean, rstd);
}

void CpuBackend::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                    const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                    Tensor& dgamma, Tensor& dbeta) {
  cpu::layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
}

void CpuBackend::embedding_forward(const Tensor& tokens, const Tensor& tok_emb,
                                   const Tensor& pos_emb, Tensor& y) {
  cpu::embedding_forward(tokens, tok_emb, pos_emb, y);
}

void CpuBackend::embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dtok_emb,
                                    Tensor& dpos_emb) {
  cpu::embedding_backward(tokens, dy, dtok_emb, dpos_emb);
}

void CpuBackend::permute(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  cpu::permute(src, dst, perm);
}

void CpuBackend::attention_softmax_forward(const Tensor& x, float scale, bool causal, Tensor& y) {
  cpu::attention_softmax_forward(x, scale, causal, y);
}

void CpuBackend::attention_softmax_backward(const Tensor& dy, const Tensor& y, float scale,
                                            Tensor& dx) {
  cpu::attention_softmax_backward(dy, y, scale, dx);
}

}  // namespace mpbench
