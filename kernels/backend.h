#pragma once
// The op interface. Every op has a CPU reference (kernels/cpu/<op>.cpp) and a CUDA implementation
// (kernels/cuda/<op>.cu) behind this one class; models and the trainer see only `Backend`.
//
// Conventions:
//  - Tensors are row-major views (kernels/tensor.h) on the backend's device.
//  - Device scalars (loss scale, found-inf flag, step count, loss sums) are 1-element fp32
//    tensors, so that a training step never needs to read a value back to the host.
//  - Parameters, gradients and optimizer state live in flat fp32 buffers; the ops that touch
//    all parameters (unscale/check/norm, optimizer steps) take the whole flat buffer at once.
//  - Ops enqueue work in order; only download(), synchronize() and Event::elapsed_ms block.
#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/fp8.h"
#include "kernels/precision.h"
#include "kernels/tensor.h"

namespace mpbench {

// GELU is the tanh approximation (what cuBLASLt's GELU epilogue computes).
enum class Activation { None, Relu, Gelu };
const char* activation_name(Activation a);

struct GemmDesc {
  bool trans_a = false;  // A is stored (K, M) instead of (M, K)
  bool trans_b = false;  // B is stored (N, K) instead of (K, N)
  float alpha = 1.0f;
  float beta = 0.0f;  // C = alpha * op(A) op(B) + beta * C; C is read only when beta != 0
  GemmMath math = GemmMath::Strict;
  // Forward epilogue: C = act(P), P = alpha * op(A) op(B) + bias rounded to C's dtype: the
  // activation takes the rounded value and is rounded again, as under autocast a 16-bit Linear's
  // output is the activation's input. pre_act, when given (same shape and dtype as C), receives P,
  // for the backward pass. Requires beta == 0 when bias, act or pre_act is set.
  Activation act = Activation::None;
  const Tensor* bias = nullptr;  // (N), dtype of C or fp32
  Tensor* pre_act = nullptr;
  // Backward epilogue (the backward of another layer's forward epilogue, riding on this GEMM):
  // C = act's backward of (alpha * op(A) op(B)) at dact_input elementwise (GELU: times its
  // derivative; ReLU: a select, kernels/relu.h), dact_input being that layer's
  // pre-activation (same shape and dtype as C; for ReLU its output serves as well). dbias (fp32,
  // (N)), when given, is overwritten with the column sums of that C, accumulated in fp32. The
  // result equals gemm() followed by bias_act_backward(dact, C, dact_input, C, dbias). Excludes
  // the forward epilogue and requires beta == 0; dact None with dbias gives the bias gradient
  // alone.
  Activation dact = Activation::None;
  const Tensor* dact_input = nullptr;
  Tensor* dbias = nullptr;
  // FP8 operands (amp_fp8): A and B fp8_e4m3 or fp8_e5m2 (not both e5m2, which the tensor cores
  // lack), read as A * a_scale_inv[0] and B * b_scale_inv[0] (fp32 scalars, both required), so
  // C = alpha * a_scale_inv * b_scale_inv * op(A) op(B) [+ bias, act] in bf16 or fp32, fp32
  // accumulation. Only the layout cuBLASLt's FP8 kernels take: A (M, K) and B stored (N, K)
  // (trans_a false, trans_b true: its "TN"), sizes per fp8_gemm_fits, no batch, beta 0, a bf16
  // bias, no backward epilogue.
  const Tensor* a_scale_inv = nullptr;
  const Tensor* b_scale_inv = nullptr;
};

// The sizes of one GEMM, from the checks of Backend::gemm: op(A) (M, K), op(B) (K, N), C (M, N),
// `batch` of each (1 for rank-2 operands).
struct GemmGeom {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};
// Whether cuBLASLt's FP8 GEMMs take these sizes: M, N and K all multiples of 16 (16-byte leading
// dimensions of one-byte operands). The one place of the rule: Backend::gemm refuses other FP8
// GEMMs, and a Linear runs such a GEMM in bf16 instead.
inline bool fp8_gemm_fits(int64_t m, int64_t n, int64_t k) {
  return m % kFp8TensorCoreMultiple == 0 && n % kFp8TensorCoreMultiple == 0 &&
         k % kFp8TensorCoreMultiple == 0;
}

// "8192x2304x768 bf16 +bias" for a GEMM (M x N x K, the batch, the dtypes, the epilogue), and
// its 2*M*N*K (times the batch) FLOPs: what the profiler files it under.
std::string gemm_detail(const GemmDesc& d, const Tensor& a, const Tensor& c);
double gemm_flops(const GemmDesc& d, const Tensor& a, const Tensor& c);

// Convolution in NHWC with KRSC filters (PyTorch's channels_last, cuDNN's NHWC filter format):
//   x (N, H, W, C), w (K, R, S, C), y (N, P, Q, K), P = (H + 2 pad - R) / stride + 1 (Q alike).
// All three share one dtype; products accumulate in fp32. No dilation, no groups.
struct ConvDesc {
  int64_t stride = 1;
  int64_t pad = 0;
  GemmMath math = GemmMath::Strict;
};

// The most workspace one convolution algorithm may take: the one value and its default
// (TrainOptions::conv_workspace_limit). PyTorch lets cuDNN's top-ranked algorithm take whatever
// workspace it asks for if its caching allocator can give it; so do we, through the run's
// allocator, so that memory (the device's, or --memory-limit) decides. The cap is generous but
// finite because our buffer is held for the whole run where PyTorch's is transient: an outlier
// request (an FFT algorithm on a large image) must not take a large share of the card for a few
// percent of speed.
inline constexpr size_t kDefaultConvWorkspaceLimit = size_t{4} << 30;  // 4 GiB

// Where a backend gets its convolution workspace, which is its own (apart from the GEMM
// workspace) and grows when an algorithm needs more. The trainer gives one that allocates through
// the run's TrackingAllocator under MemCategory::Workspace, so that training memory, --memory-limit
// and oom rows count it. alloc returns at least `bytes` bytes on the backend's device or throws
// Error with is_oom(); release frees a tensor alloc returned. Without a provider (alloc empty) the
// convolutions use the GEMM workspace as it is.
struct ConvWorkspaceProvider {
  std::function<Tensor(size_t bytes)> alloc;
  std::function<void(const Tensor&)> release;
  size_t limit = kDefaultConvWorkspaceLimit;  // the most one algorithm may take
};

// One convolution algorithm a backend chose (cuDNN's, on the GPU), for the run's record: which
// op on which shape, the algorithm and math type, and the workspace it runs with.
struct ConvAlgorithm {
  std::string op;                      // "forward", "backward_data", "backward_filter"
  int64_t n = 0, h = 0, w = 0, c = 0;  // x
  int64_t k = 0, r = 0, s = 0;         // w
  int64_t stride = 1, pad = 0;
  std::string dtype;      // of x, w and y: "fp32", "fp16", "bf16"
  int64_t algo = 0;       // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by op; -1: a GEMM
  std::string algo_name;  // "implicit_precomp_gemm", "algo_1", ...; "cublaslt_gemm" (pointwise)
  std::string math;       // cudnnMathType_t: "default", "tensor_op", "fma"
  size_t workspace_bytes = 0;
  // An algorithm cuDNN ranked higher (and that would otherwise have run) was passed over because
  // its workspace could not be had: over the limit, out of memory, or while a CUDA graph holds
  // the buffer.
  bool workspace_limited = false;
};

// The sizes of an embedding op, from its checks: tokens (batch, seq), tables (vocab, dim) and
// (positions, dim).
struct EmbeddingGeom {
  int64_t batch = 0, seq = 0, vocab = 0, positions = 0, dim = 0;
};

// The sizes of one convolution, from the checks of Backend's convolution ops.
struct ConvGeom {
  int64_t n = 0, h = 0, w = 0, c = 0;  // x
  int64_t k = 0, r = 0, s = 0;         // w
  int64_t p = 0, q = 0;                // y
  int64_t stride = 1, pad = 0;

  int64_t npq() const { return n * p * q; }
  int64_t rsc() const { return r * s * c; }
  bool is_pointwise() const { return r == 1 && s == 1 && stride == 1 && pad == 0; }
};

// 2 * N*P*Q * K * R*S*C for every pass of a convolution: y (or dy) holds N*P*Q*K values, each a
// dot product of length R*S*C.
inline double conv_flops(const ConvGeom& g) {
  return 2.0 * static_cast<double>(g.npq()) * static_cast<double>(g.k) *
         static_cast<double>(g.rsc());
}

// Max pooling over k x k windows of an NHWC tensor: x (N, H, W, C) -> y (N, P, Q, C) with
// P = (H + 2 pad - kernel) / stride + 1 (Q alike), as the ResNet stem's 3x3 stride-2 pad-1 pool.
// Padding never wins a window (PyTorch pads with -inf); pad <= kernel / 2, as PyTorch requires.
struct PoolDesc {
  int64_t kernel = 3;
  int64_t stride = 2;
  int64_t pad = 1;
};

// Batch normalisation over the channels of an NHWC tensor viewed as (rows = N*H*W, C).
struct BatchNormDesc {
  float eps = 1e-5f;
  float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch statistic
  bool relu = false;      // apply ReLU after the (optional) residual add
};

// The spec's values as written (doubles, as PyTorch's Python floats): adamw_scalars takes the
// rule's fp32 constants from them as PyTorch does.
struct AdamWParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};
struct SgdParams {
  float lr = 0.01f, momentum = 0.9f, weight_decay = 0.0f;
  bool nesterov = false;
};

struct DeviceMemInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

struct DeviceInfo {
  // "cuda"; "cpu", the native CPU backend (kernels/onednn); "reference", the CPU reference
  // (kernels/cpu), whose times are of emulated numerics.
  std::string kind;
  std::string name;  // GPU name, or the CPU model
  int cc_major = 0, cc_minor = 0;
  size_t total_memory = 0;
  int sm_count = 0;
  int cpu_threads = 0;
  // CPU: the BLAS the reference GEMMs run on and its threads, on which its sums (and so the
  // CPU results, in the last digits) depend. OpenMP: "pthreads" or "openmp", and OMP_NUM_THREADS.
  std::string blas_config, blas_core, blas_threading, omp_num_threads;
  int blas_threads = 0;
  std::string driver_version, runtime_version, cublas_version, cudnn_version;
  // The native CPU backend: oneDNN's version and the most capable ISA it dispatches to (after
  // --cpu-isa), the CPU's vector flags (avx2, avx512, avx512_bf16, amx_bf16, avx512_fp16),
  // whether the kernel let this process use AMX, and how a bf16 GEMM runs: "native" (bf16
  // instructions), "converted" (AVX-512 without them: oneDNN converts in software) or "" when
  // oneDNN has no bf16 kernel for this ISA.
  std::string onednn_version, cpu_isa;
  std::vector<std::string> cpu_flags;
  bool amx_granted = false;
  std::string bf16_gemm;
  // The native CPU's GEMM ceilings, measured (a square oneDNN matmul large enough to saturate
  // the threads, best of up to 10): what "% of peak" and explain's bound use there. 0: unmeasured.
  double gemm_tflops_fp32 = 0, gemm_tflops_bf16 = 0;
};

// A point in the backend's stream: CUDA events on the GPU, a steady clock on the CPU.
class Event {
 public:
  virtual ~Event() = default;
  virtual void record() = 0;
  // Milliseconds from `start` to this event; waits for this event to complete.
  virtual double elapsed_ms(const Event& start) = 0;
};

// What an observer is told of an op before it runs: which op, a detail string of its shapes and
// dtypes (so that two GEMMs of one layer with different shapes stay apart), and what it costs.
struct OpCall {
  const char* op = "";  // the Backend method: "gemm", "conv2d_backward_filter", ...
  std::string detail;   // e.g. "8192x2304x768 bf16 +bias"
  double flops = 0;     // GEMMs and convolutions
  double bytes = 0;     // the least a memory-bound op must move (0 for GEMMs and convolutions)
};

// Called around every op of a Backend it is attached to (the profiler is one). Describing an op
// formats its shapes, so it is only done while observing() is true.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual bool observing() const = 0;
  virtual void op_begin(const OpCall& call) = 0;
  virtual void op_end() = 0;
};

// A non-virtual interface: each public op checks its arguments once, here, for every backend
// (kernels/backend.cpp: shapes, dtypes, devices, aliasing), tells the observer, and calls the
// backend's *_impl, which keeps only what differs (device limits, what can be read on the host).
class Backend {
 public:
  virtual ~Backend() = default;

  // ---- device, memory, transfers ------------------------------------------------------------
  virtual Device device() const = 0;
  virtual DeviceInfo info() const = 0;
  // Raw device memory; throws Error with is_oom() (bytes asked, bytes free) when it does not fit.
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* p) = 0;
  // Device-wide memory use (cudaMemGetInfo); nullopt on the CPU.
  virtual std::optional<DeviceMemInfo> memory_info() = 0;
  // Bytes of GEMM workspace this backend wants, and the buffer (counted as workspace memory).
  virtual size_t workspace_bytes() const = 0;
  virtual void set_workspace(const Tensor& ws) = 0;
  // The convolution workspace's provider (ConvWorkspaceProvider); an empty one detaches it. Either
  // way the buffer the old provider gave is released through it and the algorithm choices are
  // dropped, so the provider's allocator must still be alive here. Does not throw on detach.
  virtual void set_conv_workspace_provider(ConvWorkspaceProvider) {}
  // The convolution algorithms chosen since the choices were last dropped (set_workspace and
  // set_conv_workspace_provider drop them), in first-use order; empty where there is no choice
  // (the CPU backends).
  virtual std::vector<ConvAlgorithm> conv_algorithms() const { return {}; }
  // Bytes of the convolution workspace now held from the provider (0 without one). It only grows
  // while a provider is attached, so at the end of a run it is the run's peak.
  virtual size_t conv_workspace_bytes() const { return 0; }
  // The library implementations the ops ran since the choices were last dropped (as for
  // conv_algorithms), each once, e.g. "brg:avx512_core_amx_bf16" from oneDNN, and "reference
  // loops: OP" for an op the native CPU ran on the reference's loops; empty where the backend has
  // none to name.
  virtual std::vector<std::string> kernel_implementations() const { return {}; }

  void fill(Tensor& t, float value);             // any dtype, value converted
  void copy(const Tensor& src, Tensor& dst);     // same dtype and numel, on device
  void upload(const void* host, Tensor& dst);    // host bytes -> device, dst.bytes()
  void download(const Tensor& src, void* host);  // device -> host, blocks
  virtual void synchronize() = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  // Calls so far, by op ("gemm", "conv2d_backward_filter"), that ran on a fallback path slower
  // than the library's, and what that path is (fallback_path); `explain` flags a mode that ran
  // any. CUDA: GEMMs cuBLASLt had no algorithm for, on the naive kernel; the native CPU: ops
  // oneDNN has no kernel for here, on the reference's loops.
  virtual std::map<std::string, int64_t> fallback_calls() const { return {}; }
  virtual std::string fallback_path() const { return ""; }
  // What the backend has to tell the user of the work since the last call (a slow fallback
  // taken, a refused algorithm and the next one tried), one sentence each, and forgets it: the
  // trainer keeps them in the run's result and the commands print them (only app/ prints).
  virtual std::vector<std::string> take_warnings() { return {}; }

  // Whole-step capture and replay (CUDA graphs). Without it (or with an observer attached, which
  // a captured graph would hide the ops from) the trainer runs steps eagerly.
  bool supports_graphs() const { return observer_ == nullptr && has_graphs(); }
  virtual void begin_capture() {}
  virtual void end_capture() {}
  virtual void replay() {}
  // Ends a capture that an exception interrupted and drops what it recorded; without this the
  // stream would stay capturing and every later call on it would fail.
  virtual void abort_capture() noexcept {}

  // At most one observer; nullptr detaches it. The observer must outlive its attachment.
  void set_observer(OpObserver* observer) { observer_ = observer; }
  OpObserver* observer() const { return observer_; }
  // Runs fn as one op for the observer: work outside the backend's own ops that a profile must
  // still see (the gradients' all-reduce). The backend ops fn calls are part of it, not apart.
  void run_as_op(const OpCall& call, const std::function<void()>& fn);
  // The library implementation the last observed op ran on (its first, where it ran several), for
  // the profiler: on the native CPU, oneDNN's (e.g. "brg:avx512_core_bf16"); "" where there is
  // none to name.
  const std::string& last_kernel() const { return last_kernel_; }

  // ---- ops ----------------------------------------------------------------------------------
  // C (M, N) = op(A) (M, K) * op(B) (K, N), fp32 accumulation. Rank-3 operands (batch, ., .) are
  // a strided batched GEMM over the leading dimension. A and B share a dtype; C is that dtype or
  // fp32. math selects strict fp32 / TF32 / 16-bit tensor-core math.
  void gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c);

  // dx = act's backward of dy at pre_act (GELU: dy * gelu'(pre_act); ReLU: the select of
  // kernels/relu.h, 0 where pre_act <= 0 whatever dy is; a copy for Activation::None); dx may
  // alias dy.
  // dbias (fp32, (N)), when given, = column sums of dx over all rows as stored (rounded to its
  // dtype), accumulated in fp32: under autocast a 16-bit Linear's bias gradient sums the GELU
  // backward's 16-bit output.
  // dy, pre_act, dx: (rows, N), one dtype and shape.
  void bias_act_backward(Activation act, const Tensor& dy, const Tensor& pre_act, Tensor& dx,
                         Tensor* dbias);

  // logits (N, C) fp32, labels (N) int32 in [0, C). Math in fp32.
  // loss_sum[0] += sum_i loss_i / N; correct[0] += number of rows whose argmax is the label.
  // dlogits (N, C, any float dtype), when given, = (softmax - onehot) * scale / R where scale is
  // grad_scale[0] if given else 1 (the loss scale folded into the loss gradient) and R is
  // grad_rows if given (> 0; at least N) else N. Data parallel gives the global batch's rows, so
  // that a rank's gradients are its shard's share of one process's (summed across the ranks).
  void softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                    const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                    int64_t grad_rows = 0);

  // Elementwise conversion between float dtypes (round to nearest even, overflow to inf).
  void cast(const Tensor& src, Tensor& dst);
  // t (fp32) rounded in place to `to` (bf16 or fp16) and kept in fp32: what a GEMM writing `to`
  // and a cast back give, as autocast's weight and bias gradients and logits are made.
  void round_to(Tensor& t, DType to);

  // ---- ops of amp_fp8 (kernels/<cpu|cuda>/fp8) ------------------------------------------------
  // dst (fp8_e4m3 or fp8_e5m2, src's shape) = fp8(src * scale[0]) rounded to nearest even and
  // saturated (kernels/fp8.h); src any float dtype. With amax: amax[0] = max(amax[0], max |src|),
  // NaN passed over (the newest slot of a delayed-scaling history). scale, amax: fp32 scalars.
  // With dst_t (src (R, C) -> dst_t (C, R)), the cast is also written transposed: the layout a
  // backward FP8 GEMM needs (fp8_gemm_fits' "TN").
  void cast_to_fp8(const Tensor& src, const Tensor& scale, Tensor* amax, Tensor& dst,
                   Tensor* dst_t = nullptr);
  // The delayed-scaling update after a step of T tensors of one fp8 dtype: history (len, T), slot
  // major (row 0: every tensor's newest amax, contiguous, what data parallel maxes across the
  // ranks), scale, scale_inv and amax_used (T), all fp32, each column as delayed_scaling_update
  // does it with recipe r (len = r.amax_history_len).
  void fp8_update_scaling(const DelayedScalingRecipe& r, DType format, Tensor& history,
                          Tensor& scale, Tensor& scale_inv, Tensor& amax_used);

  // One fused pass over a flat fp32 gradient buffer: if scale is given, grads *= 1 / scale[0];
  // found_inf[0] = 1 if any element is inf/NaN before the unscale (as PyTorch's GradScaler judges
  // them) else 0; norm[0] = L2 norm of the unscaled gradients (summed in double). All three
  // outputs are overwritten.
  void unscale_check_norm(Tensor& grads, const Tensor* scale, Tensor& found_inf, Tensor& norm);

  // Optimizer steps over flat fp32 buffers (master weights, grads, state). When found_inf is
  // given and found_inf[0] != 0 nothing is written (the step is skipped). weights_lowp, when
  // given (fp16/bf16, same numel), receives the updated master weights cast down.
  // AdamW (decoupled weight decay, PyTorch semantics); bias correction uses t = step_count[0] + 1.
  void adamw_step(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m, Tensor& v,
                  Tensor* weights_lowp, const Tensor& step_count, const Tensor* found_inf);
  // SGD with momentum, PyTorch semantics (g += wd * w; buf = momentum * buf + g; buf starts 0).
  void sgd_step(const SgdParams& p, Tensor& master, const Tensor& grads, Tensor& momentum_buf,
                Tensor* weights_lowp, const Tensor* found_inf);

  // GradScaler's update on device scalars (torch._amp_update_scale_): on found_inf,
  // scale = float(scale * backoff) and tracker = 0; else ++tracker and when it reaches
  // growth_interval, scale = float(scale * growth) (only if that stays finite) and tracker = 0.
  // scale is an fp32 scalar multiplied in double and rounded once; growth_tracker an int32 scalar.
  void update_loss_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                         double growth_factor, double backoff_factor, int32_t growth_interval);
  // step_count[0] += 1 unless found_inf is given and set (a skipped step is not a step).
  void count_step(Tensor& step_count, const Tensor* found_inf);

  // ---- ops of the resnet_bottleneck family (kernels/<cpu|cuda>/conv, batchnorm, pool) --------
  // Shapes and dtypes: see ConvDesc. dx is overwritten. dw has the dtype of x (as PyTorch's
  // autocast computes the gradient of the low-precision weight copy); the caller casts it into
  // the fp32 gradient buffer.
  void conv2d_forward(const ConvDesc& d, const Tensor& x, const Tensor& w, Tensor& y);
  void conv2d_backward_data(const ConvDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx);
  void conv2d_backward_filter(const ConvDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw);

  // x, residual, y: (rows, C), any float dtypes (y's own), one shape; gamma, beta,
  // running_mean, running_var, save_mean, save_rstd: (C) fp32. Statistics in fp32.
  // Training: y = [relu](gamma * (x - mean) * rstd + beta [+ residual]) with the batch mean and
  // biased variance, rstd = 1 / sqrt(var + eps); save_mean / save_rstd receive them for the
  // backward pass, and the running statistics are updated with the unbiased variance (PyTorch).
  // With a residual, the normalised value is rounded to x's dtype before the add (autocast's
  // BatchNorm output), the sum to y's.
  void batchnorm_forward_train(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                               const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                               Tensor& running_var, Tensor& save_mean, Tensor& save_rstd,
                               Tensor& y);
  // Evaluation: the same with the running statistics; nothing is updated.
  void batchnorm_forward_eval(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                              const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                              const Tensor& running_var, Tensor& y);
  // g = dy, or ReLU's backward select on relu_out (the forward's y: 0 where it is <= 0,
  // kernels/relu.h) when relu_out is given. d_pre, when given,
  // receives g (the gradient at the residual add, in its own dtype; it may alias dy in dy's
  // dtype, not x or relu_out). Then the batchnorm backward of training mode: dx (dtype of x) and
  // dgamma, dbeta (fp32, overwritten).
  void batchnorm_backward(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                          const Tensor& gamma, const Tensor& save_mean, const Tensor& save_rstd,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta, Tensor* d_pre);

  // Global average pooling: x (N, HW, C) -> y (N, C), fp32 sums; backward dx = dy / HW broadcast.
  // Any float dtypes.
  void avgpool_forward(const Tensor& x, Tensor& y);
  void avgpool_backward(const Tensor& dy, Tensor& dx);

  // Max pooling (PoolDesc): y = the max of each window, x and y of one float dtype. A window's
  // winner is its first maximum in row-major order, or its last NaN (PyTorch's rule).
  void maxpool2d_forward(const PoolDesc& d, const Tensor& x, Tensor& y);
  // dx (x's shape and dtype, overwritten) = the sum of the dy of every window an input won, in
  // fp32, rounded once; the winners are found again from x. x, dy, dx share a dtype.
  void maxpool2d_backward(const PoolDesc& d, const Tensor& x, const Tensor& dy, Tensor& dx);

  // out = a + b elementwise, any float dtypes, one numel, computed in fp32. out may alias a or b
  // of its own dtype.
  void add(const Tensor& a, const Tensor& b, Tensor& out);

  // ---- ops of the transformer family (kernels/<cpu|cuda>/layernorm, embedding, attention) ----
  // LayerNorm over the last dimension: x (rows, D), y (rows, D) any float dtypes, one shape;
  // gamma, beta (D) fp32; mean, rstd (rows) fp32 saved for the backward pass. Statistics in fp32.
  void layernorm_forward(float eps, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         Tensor& y, Tensor& mean, Tensor& rstd);
  // dy (dtype of y), dx (dtype of x, overwritten); dgamma, dbeta (D) fp32, overwritten.
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                          const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                          Tensor& dbeta);

  // tokens (B, S) int32 in [0, V); tok_emb (V, D), pos_emb (P >= S, D) fp32;
  // y (B*S, D) any float dtype: y[b*S + s] = tok_emb[tokens[b, s]] + pos_emb[s].
  void embedding_forward(const Tensor& tokens, const Tensor& tok_emb, const Tensor& pos_emb,
                         Tensor& y);
  // dy (B*S, D) any float dtype; dtok_emb (V, D) and dpos_emb (P, D) fp32, overwritten (rows
  // no token uses are zero), sums accumulated in fp32. With add_to_tok, the token sums are added
  // to what dtok_emb holds instead: a table tied to the head already holds the head's dW.
  void embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dtok_emb,
                          Tensor& dpos_emb, bool add_to_tok = false);

  // dst = src with its dimensions permuted: dst.shape[i] == src.shape[perm[i]] for i < rank.
  // Same dtype and rank (1 to 5); perm entries past the rank are ignored; dst must not alias src.
  void permute(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm);

  // Attention probabilities: x, y (batch, S, S), any float dtypes. Per row i of each (S, S)
  // matrix, y[i, :] = softmax(scale * x[i, :]) in fp32; with causal, columns j > i are masked
  // (their y is exactly 0).
  void attention_softmax_forward(const Tensor& x, float scale, bool causal, Tensor& y);
  // dx = scale * y * (dy - sum_j dy * y) per row, in fp32; dx may alias dy (of its dtype).
  // Masked entries get 0.
  void attention_softmax_backward(const Tensor& dy, const Tensor& y, float scale, Tensor& dx);

 protected:
  // Set by an op's implementation to what ran it; cleared before each observed op.
  std::string last_kernel_;

  // ---- what each backend implements, called with arguments already checked -----------------
  virtual bool has_graphs() const { return false; }
  virtual void fill_impl(Tensor& t, float value) = 0;
  virtual void copy_impl(const Tensor& src, Tensor& dst) = 0;
  virtual void upload_impl(const void* host, Tensor& dst) = 0;
  virtual void download_impl(const Tensor& src, void* host) = 0;
  // g: the sizes the checks found.
  virtual void gemm_impl(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b,
                         Tensor& c) = 0;
  virtual void bias_act_backward_impl(Activation act, const Tensor& dy, const Tensor& pre_act,
                                      Tensor& dx, Tensor* dbias) = 0;
  // grad_rows: resolved (R above, never 0).
  virtual void softmax_xent_impl(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                                 const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                                 int64_t grad_rows) = 0;
  virtual void cast_impl(const Tensor& src, Tensor& dst) = 0;
  virtual void round_to_impl(Tensor& t, DType to) = 0;
  virtual void cast_to_fp8_impl(const Tensor& src, const Tensor& scale, Tensor* amax, Tensor& dst,
                                Tensor* dst_t) = 0;
  virtual void fp8_update_scaling_impl(const DelayedScalingRecipe& r, DType format, Tensor& history,
                                       Tensor& scale, Tensor& scale_inv, Tensor& amax_used) = 0;
  virtual void unscale_check_norm_impl(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                                       Tensor& norm) = 0;
  virtual void adamw_step_impl(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m,
                               Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                               const Tensor* found_inf) = 0;
  virtual void sgd_step_impl(const SgdParams& p, Tensor& master, const Tensor& grads,
                             Tensor& momentum_buf, Tensor* weights_lowp,
                             const Tensor* found_inf) = 0;
  virtual void update_loss_scale_impl(Tensor& scale, Tensor& growth_tracker,
                                      const Tensor& found_inf, double growth_factor,
                                      double backoff_factor, int32_t growth_interval) = 0;
  virtual void count_step_impl(Tensor& step_count, const Tensor* found_inf) = 0;
  virtual void conv2d_forward_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                   const Tensor& w, Tensor& y) = 0;
  virtual void conv2d_backward_data_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& dy,
                                         const Tensor& w, Tensor& dx) = 0;
  virtual void conv2d_backward_filter_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                           const Tensor& dy, Tensor& dw) = 0;
  virtual void batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x,
                                            const Tensor* residual, const Tensor& gamma,
                                            const Tensor& beta, Tensor& running_mean,
                                            Tensor& running_var, Tensor& save_mean,
                                            Tensor& save_rstd, Tensor& y) = 0;
  virtual void batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x,
                                           const Tensor* residual, const Tensor& gamma,
                                           const Tensor& beta, const Tensor& running_mean,
                                           const Tensor& running_var, Tensor& y) = 0;
  virtual void batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                                       const Tensor& gamma, const Tensor& save_mean,
                                       const Tensor& save_rstd, Tensor& dx, Tensor& dgamma,
                                       Tensor& dbeta, Tensor* d_pre) = 0;
  virtual void avgpool_forward_impl(const Tensor& x, Tensor& y) = 0;
  virtual void avgpool_backward_impl(const Tensor& dy, Tensor& dx) = 0;
  virtual void maxpool2d_forward_impl(const PoolDesc& d, const Tensor& x, Tensor& y) = 0;
  virtual void maxpool2d_backward_impl(const PoolDesc& d, const Tensor& x, const Tensor& dy,
                                       Tensor& dx) = 0;
  virtual void add_impl(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual void layernorm_forward_impl(float eps, const Tensor& x, const Tensor& gamma,
                                      const Tensor& beta, Tensor& y, Tensor& mean,
                                      Tensor& rstd) = 0;
  virtual void layernorm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                       const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                       Tensor& dgamma, Tensor& dbeta) = 0;
  virtual void embedding_forward_impl(const EmbeddingGeom& g, const Tensor& tokens,
                                      const Tensor& tok_emb, const Tensor& pos_emb, Tensor& y) = 0;
  virtual void embedding_backward_impl(const EmbeddingGeom& g, const Tensor& tokens,
                                       const Tensor& dy, Tensor& dtok_emb, Tensor& dpos_emb,
                                       bool add_to_tok) = 0;
  virtual void permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) = 0;
  virtual void attention_softmax_forward_impl(const Tensor& x, float scale, bool causal,
                                              Tensor& y) = 0;
  virtual void attention_softmax_backward_impl(const Tensor& dy, const Tensor& y, float scale,
                                               Tensor& dx) = 0;

 private:
  // Runs impl, bracketed by the observer's calls when it is observing; describe() builds the
  // OpCall only then.
  template <typename Describe, typename Impl>
  void observed(Describe&& describe, Impl&& impl);

  OpObserver* observer_ = nullptr;
};

// The CPU reference (kernels/cpu): every mode's numerics, emulated; `--device reference`.
std::unique_ptr<Backend> make_reference_backend();

// The native CPU backend (kernels/onednn), `--device cpu`. threads 0: one per physical core.
// max_isa: oneDNN's ISA cap ("avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx"; ""
// leaves oneDNN's own choice, ONEDNN_MAX_CPU_ISA included). The thread count and the cap hold
// for the whole process. Throws Error(BadInput) on a bad cap, or in a build without oneDNN.
struct NativeCpuOptions {
  int threads = 0;
  std::string max_isa;
  // Processes on this host that share its cores (data-parallel ranks): threads 0 is then the
  // physical cores over them.
  int host_processes = 1;
};
std::unique_ptr<Backend> make_native_cpu_backend(const NativeCpuOptions& options = {});
// Whether this build has the native CPU backend; the reason in why_not when it has not.
bool native_cpu_available(std::string* why_not);
// The CPUs this process may run on (its affinity mask; the logical count where that is unknown):
// more threads than these wait on each other at every parallel op.
int usable_cpus();
// The names --cpu-isa takes.
const std::vector<std::string>& native_cpu_isa_names();
// Refuses (bad input) a --cpu-isa the native CPU backend does not know, before any device is
// chosen; nothing in a build without it (creating the backend is refused there).
void check_native_cpu_isa(const std::string& name);
// The OPENBLAS_CORETYPE to run with when OpenBLAS fell back to generic kernels on a CPU that has
// AVX2/AVX-512 (a CPU newer than the library); nullptr when its own choice is fine.
const char* blas_coretype_hint();
// What every executable's main does first (mpbench, bench, the tests): where blas_coretype_hint
// names better kernels and OPENBLAS_CORETYPE is unset, sets it, and under an address-space limit
// (ulimit -v) with OPENBLAS_NUM_THREADS unset sets that to 1, and runs this executable again
// with `argv` (OpenBLAS reads both only when it loads); if that exec fails, it goes on.
void rerun_with_better_blas(char** argv);
// Fills the blas_* and omp_num_threads fields of a CPU's DeviceInfo.
void describe_blas(DeviceInfo& info);
// Number of usable CUDA devices; 0 with a one-line reason when there is none (no GPU, no driver,
// or a build without CUDA).
int cuda_device_count(std::string* why_not);
// Throws Error(BadInput) when there is no usable device.
std::unique_ptr<Backend> make_cuda_backend(int device_index = 0);

}  // namespace mpbench
