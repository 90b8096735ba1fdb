// The CUDA backend: device memory, transfers, events and graphs here; each op family lives in its
// own file (see ops.h) and is only forwarded to, its arguments checked by Backend.
#include <dlfcn.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_context.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/stream.h"

namespace mpbench {

namespace {

using cuda::DeviceContext;

// "13.0" from 13000 (CUDA's major * 1000 + minor * 10).
std::string cuda_version_string(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}
// "9.10.2" from 91002 (cuBLAS and cuDNN 9: major * 10000 + minor * 100 + patch).
std::string lib_version_string(size_t v) {
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

class CudaEvent : public Event {
 public:
  explicit CudaEvent(cudaStream_t stream) : stream_(stream) {
    CUDA_CHECK(cudaEventCreate(&event_));
  }
  ~CudaEvent() override {
    if (event_) cudaEventDestroy(event_);  // teardown: an error has nowhere to go
  }
  void record() override { CUDA_CHECK(cudaEventRecord(event_, stream_)); }
  double elapsed_ms(const Event& start) override {
    const auto* s = dynamic_cast<const CudaEvent*>(&start);
    MPB_CHECK(s != nullptr, "elapsed_ms: start event is not a CUDA event");
    CUDA_CHECK(cudaEventSynchronize(event_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, s->event_, event_));
    return ms;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t event_ = nullptr;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int device) : ctx_(device) {}

  Device device() const override { return Device::CUDA; }

  std::map<std::string, int64_t> fallback_calls() const override {
    if (ctx_.naive_gemms() == 0) return {};
    return {{"gemm", ctx_.naive_gemms()}};
  }
  std::vector<std::string> take_warnings() override { return ctx_.take_warnings(); }
  std::string fallback_path() const override {
    return "the naive GEMM kernel (cuBLASLt offered no algorithm)";
  }
  DeviceInfo info() const override {
    const cudaDeviceProp& p = ctx_.prop();
    DeviceInfo d;
    d.kind = "cuda";
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.total_memory = p.totalGlobalMem;
    d.sm_count = p.multiProcessorCount;
    int v = 0;
    CUDA_CHECK(cudaDriverGetVersion(&v));
    d.driver_version = cuda_version_string(v);
    CUDA_CHECK(cudaRuntimeGetVersion(&v));
    d.runtime_version = cuda_version_string(v);
    d.cublas_version = lib_version_string(cublasLtGetVersion());
#if defined(MPBENCH_HAVE_CUDNN)
    d.cudnn_version = lib_version_string(cudnnGetVersion());
#endif
    return d;
  }

  void* raw_alloc(size_t bytes) override {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so the next call does not see it
      size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("out of memory: asked for {} bytes, {} free", bytes, free_b), true);
    }
    CUDA_CHECK(err);
    return p;
  }

  void raw_free(void* p) override {
    // Called from allocator destructors, so it must not throw; a failing cudaFree means the
    // context is already broken and that error was reported where it happened.
    if (p && cudaFree(p) != cudaSuccess) cudaGetLastError();
  }

  std::optional<DeviceMemInfo> memory_info() override {
    DeviceMemInfo m;
    CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
    return m;
  }

  size_t workspace_bytes() const override {
    return ctx_.workspace_bytes();
  }
  void set_workspace(const Tensor& ws) override {
    if (ws.defined()) cuda::check_on_device(ws, "set_workspace");
    ctx_.set_workspace(ws.data, ws.bytes());
  }
  void set_conv_workspace_provider(ConvWorkspaceProvider provider) override {
    ctx_.set_conv_workspace_provider(std::move(provider));
  }
  std::vector<ConvAlgorithm> conv_algorithms() const override {
    return cuda::conv_algorithms(ctx_);
  }
  size_t conv_workspace_bytes() const override {
    return ctx_.conv_workspace_size();
  }

  void synchronize() override {
    if (ctx_.capturing) abandon_capture();  // a sync would invalidate the capture, and fail
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
  }

  std::unique_ptr<Event> create_event() override {
    return std::make_unique<CudaEvent>(ctx_.stream());
  }

  void begin_capture() override {
    if (ctx_.capturing) abandon_capture();
    // Relaxed: host-side calls made while a step is captured (cudaMalloc for a first-use
    // buffer, cudaMemGetInfo for memory sampling) must not invalidate the capture.
    CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeRelaxed));
    ctx_.capturing = true;
  }

  void end_capture() override {
    MPB_CHECK(ctx_.capturing, "end_capture without begin_capture");
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(ctx_.stream(), &graph);
    ctx_.capturing = false;
    CUDA_CHECK(err);
    cudaGraphExec_t exec = nullptr;
    err = cudaGraphInstantiate(&exec, graph, 0);
    const cudaError_t graph_destroyed = cudaGraphDestroy(graph);  // the instance needs it no more
    CUDA_CHECK(err);
    // The new instance is held and the old one destroyed before either code can throw.
    cudaGraphExec_t old = std::exchange(ctx_.graph_exec, exec);
    const cudaError_t old_destroyed = old ? cudaGraphExecDestroy(old) : cudaSuccess;
    if (graph_destroyed != cudaSuccess)
      cuda::throw_cuda("cudaGraphDestroy(graph)", graph_destroyed, __FILE__, __LINE__);
    if (old_destroyed != cudaSuccess)
      cuda::throw_cuda("cudaGraphExecDestroy(old)", old_destroyed, __FILE__, __LINE__);
    // Uploaded now, on the stream, so that the first launch (the first timed step) does not.
    CUDA_CHECK(cudaGraphUpload(exec, ctx_.stream()));
  }

  void replay() override {
    MPB_CHECK(ctx_.graph_exec != nullptr, "replay without a captured graph");
    MPB_CHECK(!ctx_.capturing, "replay while capturing");
    CUDA_CHECK(cudaGraphLaunch(ctx_.graph_exec, ctx_.stream()));
  }

 protected:
  // Each op in kernels/cuda/<op>.cu, with its arguments checked by Backend.
  bool has_graphs() const override {
    return true;
  }
  void fill_impl(Tensor& t, float value) override {
    cuda::fill(ctx_, t, value);
  }
  void copy_impl(const Tensor& src, Tensor& dst) override {
    if (src.bytes() == 0 || src.data == dst.data) return;
    CUDA_CHECK(
        cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice, ctx_.stream()));
  }
  void upload_impl(const void* host, Tensor& dst) override {
    // Pageable source: the runtime stages it before returning, so the caller may free it.
    CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, ctx_.stream()));
  }
  void download_impl(const Tensor& src, void* host) override {
    CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, ctx_.stream()));
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
  }
  void gemm_impl(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b,
                 Tensor& c) override {
    cuda::gemm(ctx_, d, g, a, b, c);
  }
  void bias_act_backward_impl(Activation act, const Tensor& dy, const Tensor& pre_act, Tensor& dx,
                              Tensor* dbias) override {
    cuda::bias_act_backward(ctx_, act, dy, pre_act, dx, dbias);
  }
  void softmax_xent_impl(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                         const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                         int64_t grad_rows) override {
    cuda::softmax_xent(ctx_, logits, labels, dlogits, grad_scale, loss_sum, correct, grad_rows);
  }
  void cast_impl(const Tensor& src, Tensor& dst) override {
    cuda::cast(ctx_, src, dst);
  }
  void round_to_impl(Tensor& t, DType to) override {
    cuda::round_to(ctx_, t, to);
  }
  void cast_to_fp8_impl(const Tensor& src, const Tensor& scale, Tensor* amax, Tensor& dst,
                        Tensor* dst_t) override {
    cuda::cast_to_fp8(ctx_, src, scale, amax, dst, dst_t);
  }
  void fp8_update_scaling_impl(const DelayedScalingRecipe& r, DType format, Tensor& history,
                               Tensor& scale, Tensor& scale_inv, Tensor& amax_used) override {
    cuda::fp8_update_scaling(ctx_, r, format, history, scale, scale_inv, amax_used);
  }
  void unscale_check_norm_impl(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                               Tensor& norm) override {
    cuda::unscale_check_norm(ctx_, grads, scale, found_inf, norm);
  }
  void adamw_step_impl(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m,
                       Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                       const Tensor* found_inf) override {
    cuda::adamw_step(ctx_, p, master, grads, m, v, weights_lowp, step_count, found_inf);
  }
  void sgd_step_impl(const SgdParams& p, Tensor& master, const Tensor& grads, Tensor& momentum_buf,
                     Tensor* weights_lowp, const Tensor* found_inf) override {
    cuda::sgd_step(ctx_, p, master, grads, momentum_buf, weights_lowp, found_inf);
  }
  void update_loss_scale_impl(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                              double growth_factor, double backoff_factor,
                              int32_t growth_interval) override {
    cuda::update_loss_scale(ctx_, scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                            growth_interval);
  }
  void count_step_impl(Tensor& step_count, const Tensor* found_inf) override {
    cuda::count_step(ctx_, step_count, found_inf);
  }

  void conv2d_forward_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x, const Tensor& w,
                           Tensor& y) override {
    cuda::conv2d_forward(ctx_, d, g, x, w, y);
  }
  void conv2d_backward_data_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& dy,
                                 const Tensor& w, Tensor& dx) override {
    cuda::conv2d_backward_data(ctx_, d, g, dy, w, dx);
  }
  void conv2d_backward_filter_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                   const Tensor& dy, Tensor& dw) override {
    cuda::conv2d_backward_filter(ctx_, d, g, x, dy, dw);
  }
  void batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                                    const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                    Tensor& running_var, Tensor& save_mean, Tensor& save_rstd,
                                    Tensor& y) override {
    cuda::batchnorm_forward_train(ctx_, d, x, residual, gamma, beta, running_mean, running_var,
                                  save_mean, save_rstd, y);
  }
  void batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                                   const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   Tensor& y) override {
    cuda::batchnorm_forward_eval(ctx_, d, x, residual, gamma, beta, running_mean, running_var, y);
  }
  void batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                               const Tensor& gamma, const Tensor& save_mean,
                               const Tensor& save_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                               Tensor* d_pre) override {
    cuda::batchnorm_backward(ctx_, dy, relu_out, x, gamma, save_mean, save_rstd, dx, dgamma, dbeta,
                             d_pre);
  }
  void avgpool_forward_impl(const Tensor& x, Tensor& y) override {
    cuda::avgpool_forward(ctx_, x, y);
  }
  void avgpool_backward_impl(const Tensor& dy, Tensor& dx) override {
    cuda::avgpool_backward(ctx_, dy, dx);
  }
  void maxpool2d_forward_impl(const PoolDesc& d, const Tensor& x, Tensor& y) override {
    cuda::maxpool2d_forward(ctx_, d, x, y);
  }
  void maxpool2d_backward_impl(const PoolDesc& d, const Tensor& x, const Tensor& dy,
                               Tensor& dx) override {
    cuda::maxpool2d_backward(ctx_, d, x, dy, dx);
  }
  void add_impl(const Tensor& a, const Tensor& b, Tensor& out) override {
    cuda::add(ctx_, a, b, out);
  }
  void layernorm_forward_impl(float eps, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              Tensor& y, Tensor& mean, Tensor& rstd) override {
    cuda::layernorm_forward(ctx_, eps, x, gamma, beta, y, mean, rstd);
  }
  void layernorm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                               const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                               Tensor& dbeta) override {
    cuda::layernorm_backward(ctx_, dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
  }
  void embedding_forward_impl(const EmbeddingGeom& g, const Tensor& tokens, const Tensor& tok_emb,
                              const Tensor& pos_emb, Tensor& y) override {
    cuda::embedding_forward(ctx_, g, tokens, tok_emb, pos_emb, y);
  }
  void embedding_backward_impl(const EmbeddingGeom& g, const Tensor& tokens, const Tensor& dy,
                               Tensor& dtok_emb, Tensor& dpos_emb, bool add_to_tok) override {
    cuda::embedding_backward(ctx_, g, tokens, dy, dtok_emb, dpos_emb, add_to_tok);
  }
  void permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) override {
    cuda::permute(ctx_, src, dst, perm);
  }
  void attention_softmax_forward_impl(const Tensor& x, float scale, bool causal,
                                      Tensor& y) override {
    cuda::attention_softmax_forward(ctx_, x, scale, causal, y);
  }
  void attention_softmax_backward_impl(const Tensor& dy, const Tensor& y, float scale,
                                       Tensor& dx) override {
    cuda::attention_softmax_backward(ctx_, dy, y, scale, dx);
  }

  void abort_capture() noexcept override {
    if (ctx_.capturing) abandon_capture();
  }

 private:
  // A capture left open by an exception: end it and drop whatever was recorded.
  void abandon_capture() noexcept {
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(ctx_.stream(), &graph) == cudaSuccess && graph)
      cudaGraphDestroy(graph);
    cudaGetLastError();
    ctx_.capturing = false;
  }

  DeviceContext ctx_;

 public:
  cudaStream_t stream() const {
    return ctx_.stream();
  }
};

}  // namespace

cudaStream_t cuda_stream_of(Backend& be) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  MPB_CHECK(cuda != nullptr, "a CUDA backend expected");
  return cuda->stream();
}

int cuda_device_count(std::string* why_not) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    // The runtime says "driver version is insufficient" also where there is no driver at all
    // (a machine without a GPU): no upgrade would help there.
    void* driver = err == cudaErrorInsufficientDriver ? dlopen("libcuda.so.1", RTLD_LAZY) : nullptr;
    if (driver) dlclose(driver);
    if (why_not)
      *why_not = err == cudaErrorInsufficientDriver && !driver
                     ? "no CUDA device: no NVIDIA driver (libcuda.so.1 is not installed)"
                     : std::string("no CUDA device: ") + cudaGetErrorString(err);
    return 0;
  }
  if (n == 0 && why_not) *why_not = "no CUDA device: cudaGetDeviceCount reported none";
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  std::string why;
  int n = cuda_device_count(&why);
  if (n == 0) throw_bad_input("--device cuda: " + why);
  if (device_index < 0 || device_index >= n)
    throw_bad_input(
        fmt::format("--device cuda:{}: there are only {} CUDA device(s)", device_index, n));
  return std::make_unique<CudaBackend>(device_index);
}

}  // namespace mpbench
