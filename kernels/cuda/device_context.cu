#include "kernels/cuda/device_context.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>

#include "kernels/cuda/check.h"

namespace mpbench::cuda {

void destroy_conv_plan(ConvPlan& p) {
  // Called from destructors and error paths: report nothing, release everything.
#if defined(MPBENCH_HAVE_CUDNN)
  if (p.conv_desc) cudnnDestroyConvolutionDescriptor(p.conv_desc);
  if (p.w_desc) cudnnDestroyFilterDescriptor(p.w_desc);
  if (p.y_desc) cudnnDestroyTensorDescriptor(p.y_desc);
  if (p.x_desc) cudnnDestroyTensorDescriptor(p.x_desc);
#endif
  p = ConvPlan{};
}

namespace {

constexpr size_t kScratchBytes = size_t{1} << 20;

uint32_t set_pref_u32(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                      uint32_t value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
  return value;
}

void destroy_plan(GemmPlan& p) {
  // Called from destructors and error paths: report nothing, release everything.
  if (p.layout_a) cublasLtMatrixLayoutDestroy(p.layout_a);
  if (p.layout_b) cublasLtMatrixLayoutDestroy(p.layout_b);
  if (p.layout_c) cublasLtMatrixLayoutDestroy(p.layout_c);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = GemmPlan{};
}

cublasLtMatrixLayout_t make_layout(int32_t type, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, static_cast<cudaDataType_t>(type),
                                          static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                          ld));
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    cublasStatus_t st = cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                         &count, sizeof(count));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof(stride));
    if (st != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatrixLayoutDestroy(layout);
      throw_cublas("cublasLtMatrixLayoutSetAttribute(batch)", st, __FILE__, __LINE__);
    }
  }
  return layout;
}

}  // namespace

void set_fp8_scales(cublasLtMatmulDesc_t desc, const void* a_scale, const void* b_scale) {
  // cuBLASLt's A is our B (the column-major transpose, see gemm.cu).
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale,
                                              sizeof(b_scale)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale,
                                              sizeof(a_scale)));
}

namespace {

// Row-major C (M, N) = op(A) op(B) is column-major C^T (N, M) = op(B)^T op(A)^T, so cuBLASLt's
// "A" is our B and its "B" is our A; a row-major matrix is its column-major transpose in place.
void build_plan(cublasLtHandle_t lt, const GemmKey& key, const void* bias, const void* aux,
                const void* a_scale, const void* b_scale, size_t ws_bytes, GemmPlan& plan) {
  CUBLAS_CHECK(cublasLtMatmulDescCreate(
      &plan.desc, static_cast<cublasComputeType_t>(key.compute_type), CUDA_R_32F));
  int32_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  uint32_t epi = key.epilogue;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (key.bias_type >= 0) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)));
    if (key.bias_type != key.c_type) {
      int32_t bt = key.bias_type;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                  &bt, sizeof(bt)));
    }
  }
  if (a_scale || b_scale) set_fp8_scales(plan.desc, a_scale, b_scale);
  if (key.align_aux != 0) {
    // The aux matrix is laid out like C^T in cuBLASLt's terms: column-major (N, M), ld N.
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    int64_t ld = key.n;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                &ld, sizeof(ld)));
    if (key.batch > 1) {
      int64_t stride = key.stride_c;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride, sizeof(stride)));
    }
  }

  // Our B (K, N) row-major is column-major (N, K) with ld N; transposed storage (N, K) is
  // column-major (K, N) with ld K.
  plan.layout_a = key.trans_b
                      ? make_layout(key.b_type, key.k, key.n, key.k, key.batch, key.stride_b)
                      : make_layout(key.b_type, key.n, key.k, key.n, key.batch, key.stride_b);
  plan.layout_b = key.trans_a
                      ? make_layout(key.a_type, key.m, key.k, key.m, key.batch, key.stride_a)
                      : make_layout(key.a_type, key.k, key.m, key.k, key.batch, key.stride_a);
  plan.layout_c = make_layout(key.c_type, key.n, key.m, key.n, key.batch, key.stride_c);

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  try {
    uint64_t ws = ws_bytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // cuBLASLt's "A" is our B, see above.
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
    // DESIGN's fp32 accumulation, rounded once: a split-K GEMM with a 16-bit output may add its
    // partial sums only in the compute type. The in-place and output-type schemes add them in
    // fp16/bf16 (cublasLt.h), where a partial can also overflow fp16 when the sum would not.
    // PyTorch allows them by default; scripts/pytorch_reference.py turns that off to match.
    if (key.c_type == CUDA_R_16F || key.c_type == CUDA_R_16BF)
      set_pref_u32(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                   CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
    st = cublasLtMatmulAlgoGetHeuristic(lt, plan.desc, plan.layout_a, plan.layout_b, plan.layout_c,
                                        plan.layout_c, pref, 1, &result, &returned);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED / no result means "no algorithm for this combination" (e.g. an epilogue with
  // pedantic math or a misaligned bias); the caller falls back rather than failing the run.
  if (st != CUBLAS_STATUS_SUCCESS || returned < 1 || result.state != CUBLAS_STATUS_SUCCESS ||
      result.workspaceSize > ws_bytes) {
    destroy_plan(plan);
    plan.ok = false;
    if (st != CUBLAS_STATUS_SUCCESS)
      plan.why_not = fmt::format("heuristic query returned {}", cublasLtGetStatusName(st));
    else if (returned < 1)
      plan.why_not = "the heuristic query returned no algorithm";
    else if (result.state != CUBLAS_STATUS_SUCCESS)
      plan.why_not =
          fmt::format("the algorithm's state is {}", cublasLtGetStatusName(result.state));
    else
      plan.why_not = fmt::format("the algorithm needs {} bytes of workspace, {} available",
                                 result.workspaceSize, ws_bytes);
    return;
  }
  plan.algo = result.algo;
  plan.workspace_size = result.workspaceSize;
  plan.ok = true;
}

template <typename T>
void hash_combine(size_t& seed, const T& v) {
  seed ^= std::hash<T>{}(v) + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

}  // namespace

bool GemmKey::operator==(const GemmKey& o) const {
  return m == o.m && n == o.n && k == o.k && batch == o.batch && stride_a == o.stride_a &&
         stride_b == o.stride_b && stride_c == o.stride_c && a_type == o.a_type &&
         b_type == o.b_type && c_type == o.c_type && bias_type == o.bias_type &&
         compute_type == o.compute_type && epilogue == o.epilogue && align_a == o.align_a &&
         align_b == o.align_b && align_c == o.align_c && align_bias == o.align_bias &&
         align_aux == o.align_aux && trans_a == o.trans_a && trans_b == o.trans_b;
}

size_t GemmKeyHash::operator()(const GemmKey& k) const {
  size_t h = 0;
  for (int64_t v : {k.m, k.n, k.k, k.batch, k.stride_a, k.stride_b, k.stride_c}) hash_combine(h, v);
  for (int64_t v : {int64_t{k.a_type}, int64_t{k.b_type}, int64_t{k.c_type}, int64_t{k.bias_type},
                    int64_t{k.compute_type}, int64_t{k.epilogue}, int64_t{k.align_a},
                    int64_t{k.align_b}, int64_t{k.align_c}, int64_t{k.align_bias},
                    int64_t{k.align_aux}, int64_t{k.trans_a}, int64_t{k.trans_b}})
    hash_combine(h, v);
  return h;
}

bool ConvKey::operator==(const ConvKey& o) const {
  return op == o.op && n == o.n && h == o.h && w == o.w && c == o.c && k == o.k && r == o.r &&
         s == o.s && stride == o.stride && pad == o.pad && data_type == o.data_type &&
         math_type == o.math_type;
}

size_t ConvKeyHash::operator()(const ConvKey& k) const {
  size_t h = 0;
  for (int64_t v : {int64_t{k.op}, k.n, k.h, k.w, k.c, k.k, k.r, k.s, k.stride, k.pad,
                    int64_t{k.data_type}, int64_t{k.math_type}})
    hash_combine(h, v);
  return h;
}

DeviceContext::DeviceContext(int device) : device_(device) {
  try {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaGetDeviceProperties(&prop_, device_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUDA_CHECK(cudaMalloc(&scratch_, kScratchBytes));
    scratch_floats_ = kScratchBytes / sizeof(float);
    create_cudnn();
    auto flag = [](const char* name) {
      const char* v = std::getenv(name);
      return v && *v && std::string(v) != "0";
    };
    pointwise_on_cudnn_ = flag("MPBENCH_CUDNN_POINTWISE");
    conv_find_ = flag("MPBENCH_CUDNN_FIND");
  } catch (...) {
    destroy_cudnn();
    if (scratch_) cudaFree(scratch_);
    if (lt_) cublasLtDestroy(lt_);
    if (stream_) cudaStreamDestroy(stream_);
    throw;
  }
}

DeviceContext::~DeviceContext() {
  // Destructors must not throw: errors here are ignored (the process is usually exiting, or the
  // device is already in an error state that was reported where it happened).
  if (stream_) cudaStreamSynchronize(stream_);
  if (graph_exec) cudaGraphExecDestroy(graph_exec);
  clear_plans();
  destroy_cudnn();
  if (scratch_) cudaFree(scratch_);
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) cudaStreamDestroy(stream_);
  cudaGetLastError();
}

void DeviceContext::create_cudnn() {
#if defined(MPBENCH_HAVE_CUDNN)
  // A cuDNN that fails to load or initialise costs the convolutions, not the whole backend: the
  // MLP and transformer models never need it. The reason is kept for the first conv to report.
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = cudnnCreate(&h);
  if (st == CUDNN_STATUS_SUCCESS) {
    st = cudnnSetStream(h, stream_);
    if (st == CUDNN_STATUS_SUCCESS) {
      cudnn_ = h;
      return;
    }
    cudnnDestroy(h);
    cudnn_error_ = fmt::format("cudnnSetStream failed: {}", cudnnGetErrorString(st));
  } else {
    cudnn_error_ = fmt::format("cudnnCreate failed: {}", cudnnGetErrorString(st));
  }
  cudaGetLastError();  // whatever CUDA error cuDNN met is reported through cudnn_error_
#else
  cudnn_error_ = "this build has no cuDNN (it was not found when mpbench was configured)";
#endif
}

void DeviceContext::destroy_cudnn() {
#if defined(MPBENCH_HAVE_CUDNN)
  if (cudnn_) cudnnDestroy(cudnn_);
#endif
  cudnn_ = nullptr;
}

size_t DeviceContext::workspace_bytes() const {
  return prop_.major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

void DeviceContext::set_workspace(void* ptr, size_t bytes) {
  clear_plans();
  // cuBLASLt wants an aligned workspace; a view that starts mid-buffer loses its head.
  constexpr uintptr_t kAlign = 256;
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  uintptr_t aligned = (p + kAlign - 1) & ~(kAlign - 1);
  if (!ptr || bytes < aligned - p) {
    workspace_ = nullptr;
    workspace_size_ = 0;
    return;
  }
  workspace_ = reinterpret_cast<void*>(aligned);
  workspace_size_ = bytes - (aligned - p);
}

int DeviceContext::grid_for(int64_t n, int threads) const {
  int64_t blocks = (n + threads - 1) / threads;
  int64_t cap = static_cast<int64_t>(std::max(prop_.multiProcessorCount, 1)) * 16;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, cap)));
}

GemmPlan& DeviceContext::gemm_plan(const GemmKey& key, const void* bias, const void* aux,
                                   const void* a_scale, const void* b_scale) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  GemmPlan plan;
  try {
    build_plan(lt_, key, bias, aux, a_scale, b_scale, workspace_size_, plan);
  } catch (...) {
    destroy_plan(plan);
    throw;
  }
  return plans_.emplace(key, plan).first->second;
}

const ConvPlan* DeviceContext::find_conv_plan(const ConvKey& key) const {
  auto it = conv_plans_.find(key);
  return it == conv_plans_.end() ? nullptr : &it->second;
}

const ConvPlan& DeviceContext::add_conv_plan(const ConvKey& key, const ConvPlan& plan) {
  auto [it, inserted] = conv_plans_.emplace(key, plan);
  if (inserted) {
    conv_plan_order_.push_back(key);
  } else {
    // Already cached (cannot happen with one stream and one thread): keep the old plan and
    // release the new one, which the caller handed over.
    ConvPlan dup = plan;
    destroy_conv_plan(dup);
  }
  return it->second;
}

void DeviceContext::refuse_conv_algorithm(const ConvKey& key, int32_t algo, int32_t math_type) {
  conv_refused_[key].emplace_back(algo, math_type);
  auto it = conv_plans_.find(key);
  if (it == conv_plans_.end()) return;
  destroy_conv_plan(it->second);
  conv_plans_.erase(it);
  conv_plan_order_.erase(std::remove(conv_plan_order_.begin(), conv_plan_order_.end(), key),
                         conv_plan_order_.end());
}

const ConvRefusals& DeviceContext::conv_refused(const ConvKey& key) const {
  static const ConvRefusals none;
  auto it = conv_refused_.find(key);
  return it == conv_refused_.end() ? none : it->second;
}

std::vector<std::pair<ConvKey, const ConvPlan*>> DeviceContext::conv_plans_in_order() const {
  std::vector<std::pair<ConvKey, const ConvPlan*>> out;
  out.reserve(conv_plan_order_.size());
  for (const ConvKey& key : conv_plan_order_) {
    auto it = conv_plans_.find(key);
    if (it != conv_plans_.end()) out.emplace_back(key, &it->second);
  }
  return out;
}

void DeviceContext::set_conv_workspace_provider(ConvWorkspaceProvider provider) {
  if (provider.alloc)
    MPB_CHECK(static_cast<bool>(provider.release),
              "set_conv_workspace_provider: a provider that allocates must also release");
  // The work queued so far may still read the old buffer, and a captured graph holds its
  // address: both go before the buffer does. Errors are not reported here (detaching runs while a
  // failed run unwinds): one that is not sticky is cleared, a lost context (sticky) is reported
  // by the next call.
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
  if (graph_exec && !capturing) {
    if (cudaGraphExecDestroy(graph_exec) != cudaSuccess) cudaGetLastError();
    graph_exec = nullptr;
  }
  clear_conv_plans();
  release_conv_workspace();
  conv_provider_ = std::move(provider);
}

void DeviceContext::release_conv_workspace() noexcept {
  if (!conv_workspace_.data) return;
  const Tensor ws = conv_workspace_;
  conv_workspace_ = Tensor{};
  try {
    if (conv_provider_.release) conv_provider_.release(ws);
  } catch (...) {
    // The provider's allocator refused (it does not own the buffer): nothing left to free here.
  }
}

bool DeviceContext::grow_conv_workspace(size_t bytes) {
  const size_t held = conv_workspace_size();
  if (bytes <= held) return true;
  MPB_CHECK(has_conv_provider(), "grow_conv_workspace without a provider");
  // Release before allocating, as a caching allocator reuses a freed block: holding both would
  // count the old buffer twice at the peak (and could refuse what fits). The plans made so far
  // may still be running in the old buffer.
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  release_conv_workspace();
  // cuDNN wants an aligned workspace; whole 256-byte blocks, as cudaMalloc gives them.
  auto take = [&](size_t want) {
    Tensor t = conv_provider_.alloc((want + 255) / 256 * 256);
    if (!t.data || t.bytes() < want || reinterpret_cast<uintptr_t>(t.data) % 256 != 0) {
      if (t.data) conv_provider_.release(t);
      throw_runtime(fmt::format(
          "convolution workspace: the provider gave {} bytes at {} for {} (256-byte aligned)",
          t.data ? t.bytes() : 0, t.data, want));
    }
    conv_workspace_ = t;
  };
  try {
    take(bytes);
    return true;
  } catch (const Error& e) {
    if (!e.is_oom()) throw;
  }
  if (held > 0) {
    try {
      take(held);  // just freed, so normally it fits again
    } catch (const Error& e) {
      if (!e.is_oom()) throw;
      clear_conv_plans();  // their algorithms need a workspace there no longer is
    }
  }
  return false;
}

void DeviceContext::clear_conv_plans() {
  for (auto& [key, plan] : conv_plans_) destroy_conv_plan(plan);
  conv_plans_.clear();
  conv_plan_order_.clear();
}

void DeviceContext::clear_plans() {
  for (auto& [key, plan] : plans_) destroy_plan(plan);
  plans_.clear();
  clear_conv_plans();
}

}  // namespace mpbench::cuda
