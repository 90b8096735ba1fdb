#pragma once
// The one object that owns the CUDA state of a backend: device, stream, cuBLASLt and cuDNN
// handles, GEMM workspace, a small reduction scratch buffer and the caches of GEMM and
// convolution plans. It is passed to every op explicitly; nothing in kernels/cuda/ is global.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/backend.h"

// cuDNN's handle and descriptor types (cudnnHandle_t is cudnnContext*, and so on), declared here
// rather than through cudnn.h so that this class has one layout whether or not the build has
// cuDNN (MPBENCH_HAVE_CUDNN).
struct cudnnContext;
struct cudnnTensorStruct;
struct cudnnFilterStruct;
struct cudnnConvolutionStruct;

namespace mpbench::cuda {

// Everything a cuBLASLt algorithm choice depends on. Pointer alignments are part of the key
// because the heuristic filters algorithms by them: a plan found for 256-byte aligned operands
// must not be reused for a view that starts mid-buffer.
struct GemmKey {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches
  // cudaDataType_t of our A, B (they differ only in FP8 GEMMs) and C; bias -1: no bias pointer.
  int32_t a_type = 0, b_type = 0, c_type = 0, bias_type = -1;
  int32_t compute_type = 0;  // cublasComputeType_t
  uint32_t epilogue = 0;     // cublasLtEpilogue_t
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0;
  // Alignment of the epilogue's auxiliary matrix (GELU_AUX*'s pre-activation output, DGELU*'s
  // input; C's dtype, C's shape); 0: the epilogue has none.
  uint32_t align_aux = 0;
  bool trans_a = false, trans_b = false;

  bool operator==(const GemmKey& o) const;
};

// Sets an FP8 matmul's scale pointers (our A's and B's scale_inv) on its descriptor.
void set_fp8_scales(cublasLtMatmulDesc_t desc, const void* a_scale, const void* b_scale);

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const;
};

// A ready-to-run cuBLASLt call, or `ok == false` when cuBLASLt offered no algorithm (the caller
// then falls back).
struct GemmPlan {
  bool ok = false;
  std::string why_not;  // when !ok: what the heuristic query answered, for the fallback's warning
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_size = 0;
};

enum class ConvOp : int32_t { Forward, BackwardData, BackwardFilter };

// Everything a cuDNN convolution algorithm choice depends on (x (N, H, W, C), w (K, R, S, C)).
// Pointers are not part of it: the legacy cuDNN API takes no alignment hints at selection time.
struct ConvKey {
  int32_t op = 0;  // ConvOp
  int64_t n = 0, h = 0, w = 0, c = 0, k = 0, r = 0, s = 0;
  int64_t stride = 1, pad = 0;
  int32_t data_type = 0;  // cudnnDataType_t of x, w and y
  int32_t math_type = 0;  // cudnnMathType_t asked for

  bool operator==(const ConvKey& o) const;
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const;
};

// A ready-to-run cuDNN convolution: descriptors in the op's own roles (x or dx, y or dy, w or
// dw) and the chosen algorithm. conv_desc carries the math type of that algorithm, which cuDNN
// needs at execution as well as the algorithm itself.
struct ConvPlan {
  cudnnTensorStruct* x_desc = nullptr;
  cudnnTensorStruct* y_desc = nullptr;
  cudnnFilterStruct* w_desc = nullptr;
  cudnnConvolutionStruct* conv_desc = nullptr;
  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by op; -1: a pointwise convolution run as a
  // cuBLASLt GEMM (conv.cu), a record only, with no descriptors and no workspace of its own.
  int32_t algo = 0;
  int32_t math_type = 0;  // cudnnMathType_t of the chosen algorithm
  size_t workspace_size = 0;
  // A higher-ranked algorithm was passed over because its workspace could not be had.
  bool workspace_limited = false;
};

// (algorithm, math type) pairs cuDNN refused to run for one key
// (DeviceContext::refuse_conv_algorithm).
using ConvRefusals = std::vector<std::pair<int32_t, int32_t>>;

// Releases the descriptors of a plan the context does not own yet (error paths while building).
void destroy_conv_plan(ConvPlan& p);

// For tests, which cannot include CUDA headers (so declare this themselves): on a fresh context
// of `device`, runs one fp32 convolution per call (op 0 forward, 1 backward data, 2 backward
// filter; x (2, 9, 9, 8), w (8, 3, 3, 8), fresh buffers each time) and returns the context's
// conv plan count after each. Defined in conv.cu.
std::vector<size_t> conv_plan_cache_trace(int device,
                                          const std::vector<std::pair<int, ConvDesc>>& calls);
// For tests, likewise: on a fresh context, runs one strict fp32 weight-gradient convolution
// (x (2, 9, 9, 8), dw (8, 3, 3, 8), pad 1, values whose sums are exact), then refuses its
// algorithm (refuse_conv_algorithm) and runs it again, `refusals` times or until no algorithm is
// left. Returns each run's algorithm and dw.
std::vector<std::pair<int32_t, std::vector<float>>> conv_refusal_trace(int device, int refusals);

class DeviceContext {
 public:
  explicit DeviceContext(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t lt() const { return lt_; }
  const cudaDeviceProp& prop() const { return prop_; }

  // cuBLASLt recommends 32 MiB on Hopper and newer for the best kernels, 4 MiB before.
  size_t workspace_bytes() const;
  // Replacing the workspace drops the cached plans: their algorithms were chosen for the old size.
  void set_workspace(void* ptr, size_t bytes);
  void* workspace() const { return workspace_; }
  size_t workspace_size() const { return workspace_size_; }

  // Device scratch for two-pass reductions (per-block partials), owned here so that no op needs
  // an allocation while a step is being captured.
  float* scratch() const { return scratch_; }
  size_t scratch_floats() const { return scratch_floats_; }

  // Blocks for a grid-stride loop over n items: enough to fill the device, never more than needed.
  int grid_for(int64_t n, int threads) const;

  // The cached plan for a key, created (heuristic query) on first use. bias (or the bias
  // gradient) and aux (when key.align_aux != 0) are the pointers the heuristic should assume
  // (only their alignment matters).
  // Not const: a fused plan that cuBLASLt refuses when it runs is marked !ok (see gemm.cu).
  // FP8 GEMMs: a_scale and b_scale are our A's and B's scale_inv pointers.
  GemmPlan& gemm_plan(const GemmKey& key, const void* bias, const void* aux = nullptr,
                      const void* a_scale = nullptr, const void* b_scale = nullptr);

  // The cuDNN handle, bound to stream(); nullptr when the build has no cuDNN or creating it
  // failed, and then cudnn_error() says why. Only the convolutions need it, so the other ops
  // still run without it.
  cudnnContext* cudnn() const { return cudnn_; }
  const std::string& cudnn_error() const { return cudnn_error_; }

  // Convolution plans, chosen once per key by conv.cu. add_conv_plan takes ownership of the
  // plan's descriptors; plans live until the context, the workspace or the convolution
  // workspace's provider goes (their algorithms were chosen to fit the workspace).
  const ConvPlan* find_conv_plan(const ConvKey& key) const;
  // Diagnostic switches of conv.cu, from environment variables read when the context is made
  // (set and not 0): pointwise convolutions on cuDNN instead of cuBLASLt
  // (MPBENCH_CUDNN_POINTWISE), algorithms chosen by timing them (MPBENCH_CUDNN_FIND).
  bool pointwise_on_cudnn() const { return pointwise_on_cudnn_; }
  bool conv_find() const { return conv_find_; }
  const ConvPlan& add_conv_plan(const ConvKey& key, const ConvPlan& plan);
  size_t conv_plan_count() const { return conv_plans_.size(); }
  // An algorithm the heuristic offered for `key` but cuDNN refused to run: the key's plan is
  // dropped (references to it die) and the next choice for the key passes the algorithm over.
  void refuse_conv_algorithm(const ConvKey& key, int32_t algo, int32_t math_type);
  // The (algorithm, math type) pairs refused for `key` so far.
  const ConvRefusals& conv_refused(const ConvKey& key) const;
  // The plans in the order they were added (first use).
  std::vector<std::pair<ConvKey, const ConvPlan*>> conv_plans_in_order() const;

  // The convolutions' own workspace (conv.cu), held from a provider (kernels/backend.h) and grown
  // through it when a plan's algorithm needs more, up to the provider's limit; without a provider
  // the convolutions use the GEMM workspace. A new provider (or an empty one) first releases the
  // buffer through the old one and drops the convolution plans and the captured graph (which hold
  // the buffer's address). Detaching does not throw.
  void set_conv_workspace_provider(ConvWorkspaceProvider provider);
  bool has_conv_provider() const { return static_cast<bool>(conv_provider_.alloc); }
  size_t conv_workspace_limit() const { return conv_provider_.limit; }
  void* conv_workspace() const { return conv_workspace_.data; }
  size_t conv_workspace_size() const { return conv_workspace_.data ? conv_workspace_.bytes() : 0; }
  // Grows the buffer to at least `bytes` (never while the stream is captured: the caller checks).
  // False when that much cannot be had (out of memory, or over the allocator's limit); the buffer
  // is then its old size again, which the plans made so far need (or, should even that fail, none,
  // and the plans are dropped).
  bool grow_conv_workspace(size_t bytes);

  // Counts a naive-GEMM fallback launch; true for the first since the warnings were last taken
  // (once a run).
  bool count_naive_gemm() {
    ++naive_gemms_;
    return !std::exchange(naive_warned_, true);
  }
  int64_t naive_gemms() const { return naive_gemms_; }
  // Backend::take_warnings: what the kernels had to say since it was last called, in order.
  std::vector<std::string> take_warnings() {
    naive_warned_ = false;
    return std::exchange(warnings_, {});
  }
  void warn(std::string w) { warnings_.push_back(std::move(w)); }

  // Graph state of begin_capture / end_capture / replay.
  cudaGraphExec_t graph_exec = nullptr;
  bool capturing = false;

 private:
  void clear_plans();  // GEMM and convolution plans
  void clear_conv_plans();
  void release_conv_workspace() noexcept;
  void create_cudnn();
  void destroy_cudnn();

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cudnnContext* cudnn_ = nullptr;
  std::string cudnn_error_;
  cudaDeviceProp prop_{};
  void* workspace_ = nullptr;
  size_t workspace_size_ = 0;
  float* scratch_ = nullptr;
  size_t scratch_floats_ = 0;
  std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> plans_;
  std::unordered_map<ConvKey, ConvPlan, ConvKeyHash> conv_plans_;
  std::vector<ConvKey> conv_plan_order_;  // keys of conv_plans_, first use first
  bool pointwise_on_cudnn_ = false;
  bool conv_find_ = false;
  std::unordered_map<ConvKey, ConvRefusals, ConvKeyHash> conv_refused_;
  ConvWorkspaceProvider conv_provider_;
  Tensor conv_workspace_;  // from conv_provider_, or undefined
  int64_t naive_gemms_ = 0;
  bool naive_warned_ = false;
  std::vector<std::string> warnings_;
};

}  // namespace mpbench::cuda
