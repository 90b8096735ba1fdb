// 2-D convolution through cuDNN's legacy (v7-style) API, pointwise ones through cuBLASLt (see
// pointwise_as_gemm), same semantics as kernels/cpu/conv.cpp:
//   x (N, H, W, C), w (K, R, S, C), y (N, P, Q, K); cross-correlation (as PyTorch), symmetric
//   pad, no dilation, one dtype for all three, fp32 accumulation (CUDNN_DATA_FLOAT compute).
// cuDNN's NHWC tensor format is our NHWC, and its NHWC filter format is our KRSC.
//
// The algorithm is chosen once per key (op, shape, dtype, math, stride, pad) and cached in the
// DeviceContext with its descriptors. Selection uses cuDNN's heuristics (cudnnGet*_v7), as PyTorch
// does without cudnn.benchmark: heuristics launch no work, so a first call made while a step is
// being captured into a CUDA graph still works. MPBENCH_CUDNN_FIND=1 (a diagnostic: is the
// heuristic's choice what makes a convolution slow?) ranks them by timing them instead
// (cudnnFind*, PyTorch's cudnn.benchmark), outside a capture; cuDNN allocates what it times them
// with itself, past the run's allocator and --memory-limit, for the moment it takes.
//
// The workspace is PyTorch's rule (its cuDNN v7 path without benchmarking): the best-ranked
// algorithm of the right math type gets the workspace it asks for, up to the limit; when that
// cannot be had (out of memory, or over --memory-limit, which the run's allocator enforces) the
// next one that fits what can be had runs instead, so a run never fails for lack of workspace
// while a cheaper algorithm exists. With a provider (the trainer's, allocating through the run's
// TrackingAllocator) the convolutions have their own buffer, grown on first use of a plan that
// needs more (the warm-up); a plan made for a smaller buffer stays valid as it only grows. While
// the stream is captured or a captured graph exists the buffer cannot move, so plans made then
// take what it holds. Without a provider they share the GEMM workspace as it is; ops are
// serialised on one stream, so sharing it with cuBLASLt is safe.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mpbench::cuda {

namespace {

// cuDNN's 4-d descriptors take int dimensions and its legacy kernels index with 32 bits.
void check_cudnn_limits(const char* op, const ConvGeom& g, const Tensor& x, const Tensor& w,
                        const Tensor& y) {
  for (const Tensor* t : {&x, &w, &y})
    MPB_CHECK(t->numel() <= INT_MAX, "{}: {} has {} elements, more than cuDNN's 32-bit limit", op,
              t->shape.str(), t->numel());
  MPB_CHECK(g.stride <= INT_MAX && g.pad <= INT_MAX, "{}: stride {} / pad {} too large", op,
            g.stride, g.pad);
}

#if defined(MPBENCH_HAVE_CUDNN)

cudnnDataType_t cudnn_type(DType dt) {
  switch (dt) {
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    default:
      break;
  }
  throw_runtime(fmt::format("conv2d: no cuDNN type for {}", dtype_name(dt)));
}

// The one table from GemmMath to the cuDNN math type, as gemm.cu's compute_type_for for
// cuBLASLt. Strict fp32 must never touch tensor cores (CUDNN_DEFAULT_MATH would allow TF32 on
// Ampere and newer). TF32 asks for tensor-op math, which for fp32 data means TF32;
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION is never used, because for fp32 data it permits
// down-conversion to fp16, which is not TF32 numerics. 16-bit data has no TF32 question: it
// always runs on tensor cores with fp32 accumulation, like cuBLASLt's CUBLAS_COMPUTE_32F.
// (TF32 with 16-bit data and LowPrecision with fp32 data are rejected by check_conv.)
cudnnMathType_t math_type_for(GemmMath math, DType data) {
  static const cudnnMathType_t table[3][2] = {
      // fp32 data            16-bit data
      {CUDNN_FMA_MATH, CUDNN_TENSOR_OP_MATH},        // Strict
      {CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH},  // TF32
      {CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH},  // LowPrecision
  };
  return table[static_cast<int>(math)][data == DType::F32 ? 0 : 1];
}

const char* op_name(ConvOp op) {
  switch (op) {
    case ConvOp::Forward:
      return "conv2d_forward";
    case ConvOp::BackwardData:
      return "conv2d_backward_data";
    case ConvOp::BackwardFilter:
      return "conv2d_backward_filter";
  }
  return "conv2d";
}

// Names for the record (ConvAlgorithm), after cuDNN's enumerators.
const char* record_op_name(int32_t op) {
  switch (static_cast<ConvOp>(op)) {
    case ConvOp::Forward:
      return "forward";
    case ConvOp::BackwardData:
      return "backward_data";
    case ConvOp::BackwardFilter:
      return "backward_filter";
  }
  return "unknown";
}

std::string algo_name(int32_t op, int32_t algo) {
  // cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t.
  static const std::vector<const char*> names[3] = {
      {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling", "winograd",
       "winograd_nonfused"},
      {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"},
      {"algo_0", "algo_1", "fft", "algo_3", "winograd", "winograd_nonfused", "fft_tiling"},
  };
  if (op >= 0 && op < 3 && algo >= 0 && static_cast<size_t>(algo) < names[op].size())
    return names[op][static_cast<size_t>(algo)];
  return fmt::format("algo_{}", algo);
}

const char* math_name(int32_t math) {
  switch (static_cast<cudnnMathType_t>(math)) {
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH:
      return "fma";
  }
  return "unknown";
}

const char* data_type_name(int32_t type) {
  switch (static_cast<cudnnDataType_t>(type)) {
    case CUDNN_DATA_FLOAT:
      return "fp32";
    case CUDNN_DATA_HALF:
      return "fp16";
    case CUDNN_DATA_BFLOAT16:
      return "bf16";
    default:
      return "unknown";
  }
}

// Whether work enqueued now would be recorded into a graph rather than run: the trainer's capture
// (ctx.capturing) or any other capture of the stream.
bool stream_capturing(const DeviceContext& ctx) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(ctx.stream(), &status));
  return ctx.capturing || status != cudaStreamCaptureStatusNone;
}

// Where a plan's workspace comes from (see the top of this file): the context's own buffer,
// grown through its provider up to the provider's limit while the buffer may move; else what is
// there (that buffer as it is, or the GEMM workspace without a provider).
class WorkspaceSource {
 public:
  explicit WorkspaceSource(DeviceContext& ctx) : ctx_(ctx), own_(ctx.has_conv_provider()) {
    if (own_) can_grow_ = !stream_capturing(ctx) && !ctx.graph_exec;
  }

  // Bytes there now.
  size_t held() const {
    if (own_) return ctx_.conv_workspace_size();
    return ctx_.workspace() ? ctx_.workspace_size() : 0;
  }

  // Whether `bytes` of workspace are there for the plan: held already, or grown to. A size that
  // failed to allocate is not tried again, nor anything larger.
  bool reserve(size_t bytes) {
    if (bytes <= held()) return true;
    if (!own_ || !can_grow_ || bytes > ctx_.conv_workspace_limit() || bytes >= failed_)
      return false;
    if (ctx_.grow_conv_workspace(bytes)) return true;
    failed_ = bytes;
    return false;
  }

  // For the error message when no algorithm fits.
  std::string describe() const {
    if (!own_) return fmt::format("the {}-byte GEMM workspace", held());
    std::string s = fmt::format("the {}-byte convolution workspace", held());
    if (!can_grow_) return s + " (it cannot grow while a CUDA graph holds it)";
    s += fmt::format(", which may grow to the {}-byte limit", ctx_.conv_workspace_limit());
    if (failed_ != SIZE_MAX) s += fmt::format(" (allocating {} bytes failed)", failed_);
    return s;
  }

 private:
  DeviceContext& ctx_;
  bool own_ = false;
  bool can_grow_ = false;
  size_t failed_ = SIZE_MAX;
};

// What the heuristic offered, for the error message when nothing fits.
struct Offer {
  int algo;
  cudnnMathType_t math;
  cudnnStatus_t status;
  size_t workspace;
  bool refused;  // it failed when run before (DeviceContext::refuse_conv_algorithm)
};

// Picks from the heuristic's ranked list (best first): an algorithm that cuDNN says works, whose
// workspace can be had (source.reserve, which may grow the buffer), and whose math type is the
// one asked for. Strict takes nothing else (so never a tensor-op algorithm); the tensor-op modes
// fall back to a non-tensor-op algorithm when no tensor-op one exists for the shape (e.g. odd
// channel counts), which is more precise, never less, and better than failing the run.
// workspace_of(algo, math) asks cuDNN for the exact workspace with that math type set on the
// descriptor, as the run will have it. Algorithms that failed when run are passed over.
template <typename Perf, typename WorkspaceOf>
void choose_algorithm(ConvOp op, const ConvGeom& g, DType dt, cudnnMathType_t want,
                      const std::vector<Perf>& perf, int returned, const ConvRefusals& refused,
                      WorkspaceSource& source, cudnnConvolutionDescriptor_t conv,
                      WorkspaceOf&& workspace_of, ConvPlan& plan) {
  std::vector<Offer> offers;
  bool passed_over = false;  // an algorithm ranked above the one taken lacked its workspace
  const bool strict = want == CUDNN_FMA_MATH;
  for (int pass = 0; pass < (strict ? 1 : 2); ++pass) {
    for (int i = 0; i < returned; ++i) {
      const Perf& pf = perf[static_cast<size_t>(i)];
      const bool math_ok =
          pass == 0 ? pf.mathType == want
                    : pf.mathType != want && pf.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      const bool was_refused =
          std::find(refused.begin(), refused.end(),
                    std::pair{static_cast<int32_t>(pf.algo), static_cast<int32_t>(pf.mathType)}) !=
          refused.end();
      if (pass == 0)
        offers.push_back({static_cast<int>(pf.algo), pf.mathType, pf.status, 0, was_refused});
      if (pf.status != CUDNN_STATUS_SUCCESS || !math_ok || was_refused) continue;
      CUDNN_CHECK(cudnnSetConvolutionMathType(conv, pf.mathType));
      size_t ws = 0;
      if (!workspace_of(pf.algo, &ws)) continue;  // cuDNN rejects it after all
      ws = std::max(ws, pf.memory);
      if (pass == 0) offers.back().workspace = ws;
      if (!source.reserve(ws)) {
        passed_over = true;
        continue;
      }
      plan.algo = static_cast<int32_t>(pf.algo);
      plan.math_type = static_cast<int32_t>(pf.mathType);
      plan.workspace_size = ws;
      plan.workspace_limited = passed_over;
      return;  // the descriptor keeps this algorithm's math type
    }
  }
  std::string offered;
  for (const Offer& o : offers)
    offered +=
        fmt::format("{}algo {} math {} status {} workspace {}", offered.empty() ? "" : "; ", o.algo,
                    static_cast<int>(o.math),
                    o.refused ? "failed when run" : cudnnGetErrorString(o.status), o.workspace);
  throw_runtime(fmt::format(
      "{}: cuDNN offers no algorithm with math type {} that fits {} for {} x ({}, {}, {}, {}), "
      "w ({}, {}, {}, {}), stride {}, pad {} (offered: {})",
      op_name(op), static_cast<int>(want), source.describe(), dtype_name(dt), g.n, g.h, g.w, g.c,
      g.k, g.r, g.s, g.c, g.stride, g.pad, offered.empty() ? "none" : offered));
}

void build_plan(DeviceContext& ctx, ConvOp op, const ConvGeom& g, DType dt, cudnnMathType_t want,
                const ConvRefusals& refused, ConvPlan& plan) {
  cudnnHandle_t h = ctx.cudnn();
  const cudnnDataType_t type = cudnn_type(dt);
  auto i32 = [](int64_t v) { return static_cast<int>(v); };  // bounds checked in check_conv

  CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.x_desc));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.y_desc));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan.w_desc));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan.conv_desc));
  // cuDNN takes dimensions in NCHW order whatever the memory format.
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x_desc, CUDNN_TENSOR_NHWC, type, i32(g.n), i32(g.c),
                                         i32(g.h), i32(g.w)));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y_desc, CUDNN_TENSOR_NHWC, type, i32(g.n), i32(g.k),
                                         i32(g.p), i32(g.q)));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w_desc, type, CUDNN_TENSOR_NHWC, i32(g.k), i32(g.c),
                                         i32(g.r), i32(g.s)));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.conv_desc, i32(g.pad), i32(g.pad), i32(g.stride),
                                              i32(g.stride), 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv_desc, want));

  // Our output-size formula and cuDNN's must agree, or the descriptors describe other tensors.
  int on = 0, oc = 0, oh = 0, ow = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan.conv_desc, plan.x_desc, plan.w_desc, &on,
                                                    &oc, &oh, &ow));
  MPB_CHECK(on == g.n && oc == g.k && oh == g.p && ow == g.q,
            "{}: cuDNN's output dims ({}, {}, {}, {}) (NCHW order) differ from ({}, {}, {}, {})",
            op_name(op), on, oc, oh, ow, g.n, g.k, g.p, g.q);

  WorkspaceSource source(ctx);
  int max_count = 0, returned = 0;
  // Timed ranking (MPBENCH_CUDNN_FIND) where work may run; the heuristic's where it fails (e.g.
  // out of memory for its buffers) or a capture is on.
  const bool find = ctx.conv_find() && !stream_capturing(ctx);
  // Whether a timed ranking worked. It may leave a non-sticky error behind (a failed allocation of
  // its own buffers, also when it succeeds with that algorithm marked ALLOC_FAILED), which the next
  // launch check would blame on its own kernel: cleared either way (a sticky one stays and is
  // reported by the next check).
  auto found = [](cudnnStatus_t st) {
    cudaGetLastError();
    return st == CUDNN_STATUS_SUCCESS;
  };
  switch (op) {
    case ConvOp::Forward: {
      CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(max_count, 1)));
      if (!find || !found(cudnnFindConvolutionForwardAlgorithm(h, plan.x_desc, plan.w_desc,
                                                               plan.conv_desc, plan.y_desc,
                                                               max_count, &returned, perf.data())))
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, plan.x_desc, plan.w_desc,
                                                           plan.conv_desc, plan.y_desc, max_count,
                                                           &returned, perf.data()));
      returned = std::min(returned, static_cast<int>(perf.size()));
      choose_algorithm(
          op, g, dt, want, perf, returned, refused, source, plan.conv_desc,
          [&](cudnnConvolutionFwdAlgo_t algo, size_t* ws) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, plan.x_desc, plan.w_desc,
                                                           plan.conv_desc, plan.y_desc, algo,
                                                           ws) == CUDNN_STATUS_SUCCESS;
          },
          plan);
      break;
    }
    case ConvOp::BackwardData: {
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(
          static_cast<size_t>(std::max(max_count, 1)));
      if (!find || !found(cudnnFindConvolutionBackwardDataAlgorithm(
                       h, plan.w_desc, plan.y_desc, plan.conv_desc, plan.x_desc, max_count,
                       &returned, perf.data())))
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan.w_desc, plan.y_desc,
                                                                plan.conv_desc, plan.x_desc,
                                                                max_count, &returned, perf.data()));
      returned = std::min(returned, static_cast<int>(perf.size()));
      choose_algorithm(
          op, g, dt, want, perf, returned, refused, source, plan.conv_desc,
          [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* ws) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, plan.w_desc, plan.y_desc,
                                                                plan.conv_desc, plan.x_desc, algo,
                                                                ws) == CUDNN_STATUS_SUCCESS;
          },
          plan);
      break;
    }
    case ConvOp::BackwardFilter: {
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(
          static_cast<size_t>(std::max(max_count, 1)));
      if (!find || !found(cudnnFindConvolutionBackwardFilterAlgorithm(
                       h, plan.x_desc, plan.y_desc, plan.conv_desc, plan.w_desc, max_count,
                       &returned, perf.data())))
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, plan.x_desc, plan.y_desc, plan.conv_desc, plan.w_desc, max_count, &returned,
            perf.data()));
      returned = std::min(returned, static_cast<int>(perf.size()));
      choose_algorithm(
          op, g, dt, want, perf, returned, refused, source, plan.conv_desc,
          [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* ws) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, plan.x_desc, plan.y_desc,
                                                                  plan.conv_desc, plan.w_desc, algo,
                                                                  ws) == CUDNN_STATUS_SUCCESS;
          },
          plan);
      break;
    }
  }
}

ConvKey conv_key(ConvOp op, const ConvGeom& g, DType dt, cudnnMathType_t want) {
  ConvKey key;
  key.op = static_cast<int32_t>(op);
  key.n = g.n, key.h = g.h, key.w = g.w, key.c = g.c;
  key.k = g.k, key.r = g.r, key.s = g.s;
  key.stride = g.stride, key.pad = g.pad;
  key.data_type = static_cast<int32_t>(cudnn_type(dt));
  key.math_type = static_cast<int32_t>(want);
  return key;
}

// The cached plan for this convolution, chosen on first use.
const ConvPlan& conv_plan(DeviceContext& ctx, const ConvKey& key, ConvOp op, const ConvGeom& g,
                          DType dt, cudnnMathType_t want) {
  if (const ConvPlan* cached = ctx.find_conv_plan(key)) return *cached;
  ConvPlan plan;
  try {
    build_plan(ctx, op, g, dt, want, ctx.conv_refused(key), plan);
  } catch (...) {
    destroy_conv_plan(plan);
    throw;
  }
  return ctx.add_conv_plan(key, plan);
}

// The workspace pointer and size to pass: none when the algorithm needs none (the context may
// have no workspace at all), else the buffer the plan was made for (see WorkspaceSource).
void* workspace_for(const DeviceContext& ctx, const ConvPlan& plan, size_t* bytes) {
  if (plan.workspace_size == 0) {
    *bytes = 0;
    return nullptr;
  }
  const bool own = ctx.has_conv_provider();
  *bytes = own ? ctx.conv_workspace_size() : ctx.workspace_size();
  void* ws = own ? ctx.conv_workspace() : ctx.workspace();
  // The buffers only grow while plans exist (grow_conv_workspace, set_workspace drop them).
  MPB_CHECK(ws && *bytes >= plan.workspace_size,
            "convolution: the plan needs {} bytes of workspace, {} are there", plan.workspace_size,
            ws ? *bytes : 0);
  return ws;
}

// Runs one convolution, call(plan, workspace, bytes) returning cuDNN's status, with the cached
// plan. The v7 heuristic can rank an algorithm as working that then refuses to run (TensorFlow
// and cudnn-frontend issues report NOT_SUPPORTED and EXECUTION_FAILED; PyTorch's v7 path tries
// the next one likewise): outside a graph capture, the algorithm is refused for this key and the
// plan chosen again without it, until one runs or none is left (choose_algorithm then throws).
template <typename Call>
void run_conv(DeviceContext& ctx, ConvOp op, const ConvGeom& g, DType dt, GemmMath math,
              Call&& call) {
  if (!ctx.cudnn())
    throw_runtime(fmt::format("{}: cuDNN is not available: {}", op_name(op), ctx.cudnn_error()));
  const cudnnMathType_t want = math_type_for(math, dt);
  const ConvKey key = conv_key(op, g, dt, want);
  for (;;) {
    const ConvPlan& plan = conv_plan(ctx, key, op, g, dt, want);
    size_t ws_bytes = 0;
    void* ws = workspace_for(ctx, plan, &ws_bytes);
    const cudnnStatus_t st = call(plan, ws, ws_bytes);
    if (st == CUDNN_STATUS_SUCCESS) return;
    const bool retry = !stream_capturing(ctx) &&
                       (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM ||
                        st == CUDNN_STATUS_EXECUTION_FAILED);
    const std::string what = fmt::format(
        "{}: cuDNN's {} ({} math, {} bytes of workspace) for {} x ({}, {}, {}, {}), "
        "w ({}, {}, {}, {}), stride {}, pad {} failed: {}",
        op_name(op), algo_name(key.op, plan.algo), math_name(plan.math_type), plan.workspace_size,
        dtype_name(dt), g.n, g.h, g.w, g.c, g.k, g.r, g.s, g.c, g.stride, g.pad,
        cudnnGetErrorString(st));
    if (!retry) throw_runtime(what);
    if (st == CUDNN_STATUS_EXECUTION_FAILED) {
      // A kernel that failed to launch leaves its error pending, which the next launch check
      // would blame on its own kernel: cleared. A sticky one (the context is lost) stays, and
      // then no algorithm can run.
      const cudaError_t launch = cudaGetLastError();
      if (cudaPeekAtLastError() != cudaSuccess)
        throw_runtime(fmt::format("{} ({})", what, cudaGetErrorString(launch)));
    }
    ctx.warn(what + "; trying the next algorithm");
    ctx.refuse_conv_algorithm(key, plan.algo, plan.math_type);  // plan is gone from here on
  }
}

#endif  // MPBENCH_HAVE_CUDNN

[[noreturn]] [[maybe_unused]] void no_cudnn(const char* op) {
  throw_runtime(fmt::format("{}: this build has no cuDNN, which the CUDA convolutions need", op));
}

// A pointwise convolution (1x1, stride 1, no pad) of NHWC data is a GEMM over the N*H*W pixels,
// as the CPU reference computes it, with the weights (K, 1, 1, C) read as (K, C): y = x w^T,
// dx = dy w, dw = dy^T x. It runs on cuBLASLt (gemm.cu: its plans, heuristics and workspace),
// not on cuDNN's legacy API. Why: on the H200 PyTorch's cuDNN path (the graph API) ran most of
// ResNet-50's pointwise convolutions as cuBLAS nvjet GEMMs (results/h200/pytorch_resnet50_conv2
// .json), where the legacy API runs implicit-GEMM kernels, in fp32 with up to 1 GB of workspace
// each. Channel counts that are multiples of 8 only (16-byte rows in 16-bit: the tensor-core
// GEMMs' alignment, every ResNet-50 shape): the others (tiny_resnet's 4) stay on cuDNN, which
// the H200 run verified for them. MPBENCH_CUDNN_POINTWISE=1 keeps them all on cuDNN, to time one
// path against the other.
bool pointwise_as_gemm(const DeviceContext& ctx, const ConvGeom& g) {
  return g.is_pointwise() && g.c % 8 == 0 && g.k % 8 == 0 && !ctx.pointwise_on_cudnn();
}

// The run's record of the convolutions (conv_algorithms) names the GEMM path, once per key.
void record_gemm_conv(DeviceContext& ctx, ConvOp op, const ConvGeom& g, DType dt, GemmMath math) {
#if defined(MPBENCH_HAVE_CUDNN)
  const ConvKey key = conv_key(op, g, dt, math_type_for(math, dt));
  if (ctx.find_conv_plan(key)) return;
  ConvPlan plan;
  plan.algo = -1;
  plan.math_type = key.math_type;
  ctx.add_conv_plan(key, plan);
#else
  (void)ctx, (void)op, (void)g, (void)dt, (void)math;
#endif
}

// Convolution `op` as the GEMM c (M, N) = op(a) op(b) of sizes gg (operands in the shapes
// GemmDesc documents), recorded under the convolution's key.
void pointwise_gemm(DeviceContext& ctx, ConvOp op, const ConvDesc& d, const ConvGeom& g,
                    const GemmGeom& gg, bool trans_a, bool trans_b, const Tensor& a,
                    const Tensor& b, Tensor& c) {
  record_gemm_conv(ctx, op, g, a.dtype, d.math);
  GemmDesc gd;
  gd.trans_a = trans_a;
  gd.trans_b = trans_b;
  gd.math = d.math;
  Tensor c2 = c.reshaped(Shape{gg.m, gg.n});
  gemm(ctx, gd, gg, a.reshaped(trans_a ? Shape{gg.k, gg.m} : Shape{gg.m, gg.k}),
       b.reshaped(trans_b ? Shape{gg.n, gg.k} : Shape{gg.k, gg.n}), c2);
}

}  // namespace

// y (N, P, Q, K) = x (N, H, W, C) conv w (K, R, S, C)
void conv2d_forward(DeviceContext& ctx, const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                    const Tensor& w, Tensor& y) {
  // y (NPQ, K) = x (NPQ, C) w (K, C)^T
  if (pointwise_as_gemm(ctx, g))
    return pointwise_gemm(ctx, ConvOp::Forward, d, g, GemmGeom{1, g.npq(), g.k, g.c}, false, true,
                          x, w, y);
  check_cudnn_limits("conv2d_forward", g, x, w, y);
#if defined(MPBENCH_HAVE_CUDNN)
  const float alpha = 1.0f, beta = 0.0f;  // float scalars for every non-double data type
  run_conv(ctx, ConvOp::Forward, g, x.dtype, d.math,
           [&](const ConvPlan& plan, void* ws, size_t ws_bytes) {
             return cudnnConvolutionForward(ctx.cudnn(), &alpha, plan.x_desc, x.data, plan.w_desc,
                                            w.data, plan.conv_desc,
                                            static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), ws,
                                            ws_bytes, &beta, plan.y_desc, y.data);
           });
#else
  (void)ctx, (void)g;
  no_cudnn("conv2d_forward");
#endif
}

// dx (N, H, W, C) = dy (N, P, Q, K) conv^T w (K, R, S, C); overwritten (beta = 0), so pixels no
// output depends on (stride > 1 leftovers) become 0.
void conv2d_backward_data(DeviceContext& ctx, const ConvDesc& d, const ConvGeom& g,
                          const Tensor& dy, const Tensor& w, Tensor& dx) {
  // dx (NPQ, C) = dy (NPQ, K) w (K, C)
  if (pointwise_as_gemm(ctx, g))
    return pointwise_gemm(ctx, ConvOp::BackwardData, d, g, GemmGeom{1, g.npq(), g.c, g.k}, false,
                          false, dy, w, dx);
  check_cudnn_limits("conv2d_backward_data", g, dx, w, dy);
#if defined(MPBENCH_HAVE_CUDNN)
  const float alpha = 1.0f, beta = 0.0f;
  run_conv(ctx, ConvOp::BackwardData, g, dx.dtype, d.math,
           [&](const ConvPlan& plan, void* ws, size_t ws_bytes) {
             return cudnnConvolutionBackwardData(
                 ctx.cudnn(), &alpha, plan.w_desc, w.data, plan.y_desc, dy.data, plan.conv_desc,
                 static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws, ws_bytes, &beta,
                 plan.x_desc, dx.data);
           });
#else
  (void)ctx, (void)g;
  no_cudnn("conv2d_backward_data");
#endif
}

// dw (K, R, S, C) = sum over n, p, q of dy (N, P, Q, K) x patches of x (N, H, W, C), in x's dtype;
// overwritten (beta = 0).
void conv2d_backward_filter(DeviceContext& ctx, const ConvDesc& d, const ConvGeom& g,
                            const Tensor& x, const Tensor& dy, Tensor& dw) {
  // dw (K, C) = dy (NPQ, K)^T x (NPQ, C)
  if (pointwise_as_gemm(ctx, g))
    return pointwise_gemm(ctx, ConvOp::BackwardFilter, d, g, GemmGeom{1, g.k, g.c, g.npq()}, true,
                          false, dy, x, dw);
  check_cudnn_limits("conv2d_backward_filter", g, x, dw, dy);
#if defined(MPBENCH_HAVE_CUDNN)
  const float alpha = 1.0f, beta = 0.0f;
  run_conv(ctx, ConvOp::BackwardFilter, g, x.dtype, d.math,
           [&](const ConvPlan& plan, void* ws, size_t ws_bytes) {
             return cudnnConvolutionBackwardFilter(
                 ctx.cudnn(), &alpha, plan.x_desc, x.data, plan.y_desc, dy.data, plan.conv_desc,
                 static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws, ws_bytes, &beta,
                 plan.w_desc, dw.data);
           });
#else
  (void)ctx, (void)g;
  no_cudnn("conv2d_backward_filter");
#endif
}

std::vector<ConvAlgorithm> conv_algorithms(const DeviceContext& ctx) {
  std::vector<ConvAlgorithm> out;
#if defined(MPBENCH_HAVE_CUDNN)
  for (const auto& [key, plan] : ctx.conv_plans_in_order()) {
    ConvAlgorithm a;
    a.op = record_op_name(key.op);
    a.n = key.n, a.h = key.h, a.w = key.w, a.c = key.c;
    a.k = key.k, a.r = key.r, a.s = key.s;
    a.stride = key.stride, a.pad = key.pad;
    a.dtype = data_type_name(key.data_type);
    a.algo = plan->algo;
    a.algo_name = plan->algo < 0 ? "cublaslt_gemm" : algo_name(key.op, plan->algo);
    a.math = math_name(plan->math_type);
    a.workspace_bytes = plan->workspace_size;
    a.workspace_limited = plan->workspace_limited;
    out.push_back(std::move(a));
  }
#else
  (void)ctx;
#endif
  return out;
}

namespace {

// The device buffers of the test traces below, freed on every path; the context outlives them.
class TraceBuffers {
 public:
  explicit TraceBuffers(DeviceContext& ctx) : ctx_(ctx) {
    const size_t ws_bytes = ctx.workspace_bytes();
    ctx.set_workspace(alloc(ws_bytes), ws_bytes);
  }
  ~TraceBuffers() {
    // cudaFree waits for the work queued on them; teardown: an error has nowhere to go.
    for (void* p : ptrs_) cudaFree(p);
  }
  TraceBuffers(const TraceBuffers&) = delete;
  TraceBuffers& operator=(const TraceBuffers&) = delete;

  // A fresh fp32 tensor of `shape`: `host`'s values, or zeros; on the context's (non-blocking)
  // stream, so that the convolutions are ordered after the copy.
  Tensor tensor(Shape shape, const std::vector<float>* host = nullptr) {
    Tensor t;
    t.shape = shape;
    t.dtype = DType::F32;
    t.device = Device::CUDA;
    t.data = alloc(t.bytes());
    if (host) {
      MPB_CHECK(static_cast<int64_t>(host->size()) == t.numel(), "TraceBuffers: host size");
      CUDA_CHECK(
          cudaMemcpyAsync(t.data, host->data(), t.bytes(), cudaMemcpyHostToDevice, ctx_.stream()));
    } else {
      CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), ctx_.stream()));
    }
    return t;
  }

 private:
  void* alloc(size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    ptrs_.push_back(p);
    return p;
  }

  DeviceContext& ctx_;
  std::vector<void*> ptrs_;
};

}  // namespace

std::vector<size_t> conv_plan_cache_trace(int device,
                                          const std::vector<std::pair<int, ConvDesc>>& calls) {
  DeviceContext ctx(device);
  TraceBuffers keep(ctx);
  std::vector<size_t> counts;
  for (const auto& [op, d] : calls) {
    MPB_CHECK(op >= 0 && op <= 2, "conv_plan_cache_trace: op {} is not 0, 1 or 2", op);
    const int64_t n = 2, h = 9, w = 9, c = 8, k = 8, r = 3, s = 3;
    MPB_CHECK(d.stride >= 1 && d.pad >= 0 && d.pad <= 4, "conv_plan_cache_trace: bad desc");
    const int64_t p = (h + 2 * d.pad - r) / d.stride + 1, q = (w + 2 * d.pad - s) / d.stride + 1;
    // Fresh buffers for every call: the cache must not depend on the pointers.
    Tensor x = keep.tensor(Shape{n, h, w, c}), wt = keep.tensor(Shape{k, r, s, c});
    Tensor y = keep.tensor(Shape{n, p, q, k});
    ConvGeom g;
    g.n = n, g.h = h, g.w = w, g.c = c, g.k = k, g.r = r, g.s = s, g.p = p, g.q = q;
    g.stride = d.stride, g.pad = d.pad;
    if (op == 0) conv2d_forward(ctx, d, g, x, wt, y);
    if (op == 1) conv2d_backward_data(ctx, d, g, y, wt, x);
    if (op == 2) conv2d_backward_filter(ctx, d, g, x, y, wt);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    counts.push_back(ctx.conv_plan_count());
  }
  return counts;
}

std::vector<std::pair<int32_t, std::vector<float>>> conv_refusal_trace(int device, int refusals) {
  std::vector<std::pair<int32_t, std::vector<float>>> runs;
#if defined(MPBENCH_HAVE_CUDNN)
  DeviceContext ctx(device);
  TraceBuffers keep(ctx);
  const int64_t n = 2, h = 9, w = 9, c = 8, k = 8, r = 3, s = 3;
  ConvGeom g;
  g.n = n, g.h = h, g.w = w, g.c = c, g.k = k, g.r = r, g.s = s, g.p = h, g.q = w;
  g.stride = 1, g.pad = 1;
  // Multiples of 1/4 and 1/8 in a small range: every sum is exact in fp32, whatever its order.
  std::vector<float> hx(static_cast<size_t>(n * h * w * c)),
      hdy(static_cast<size_t>(n * h * w * k));
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
  for (size_t i = 0; i < hdy.size(); ++i) hdy[i] = static_cast<float>(i % 7) * 0.125f - 0.375f;
  Tensor x = keep.tensor(Shape{n, h, w, c}, &hx), dy = keep.tensor(Shape{n, h, w, k}, &hdy);
  Tensor dw = keep.tensor(Shape{k, r, s, c});
  std::vector<float> hdw(static_cast<size_t>(dw.numel()));
  const ConvKey key =
      conv_key(ConvOp::BackwardFilter, g, DType::F32, math_type_for(GemmMath::Strict, DType::F32));
  for (int i = 0; i <= refusals; ++i) {
    try {
      conv2d_backward_filter(ctx, ConvDesc{1, 1, GemmMath::Strict}, g, x, dy, dw);
    } catch (const Error&) {
      break;  // every algorithm refused
    }
    CUDA_CHECK(
        cudaMemcpyAsync(hdw.data(), dw.data, dw.bytes(), cudaMemcpyDeviceToHost, ctx.stream()));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    const ConvPlan* plan = ctx.find_conv_plan(key);
    MPB_CHECK(plan, "conv_refusal_trace: no plan after a run");
    runs.emplace_back(plan->algo, hdw);
    ctx.refuse_conv_algorithm(key, plan->algo, plan->math_type);
  }
#else
  (void)device, (void)refusals;
#endif
  return runs;
}

}  // namespace mpbench::cuda
