#pragma once
// The one object that owns the CUDA state of a backend: device, stream, cuBLASLt handle, GEMM
// workspace, a small reduction scratch buffer and the cache of GEMM plans. It is passed to every
// op explicitly; nothing in kernels/cuda/ is global.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace mpbench::cuda {

// Everything a cuBLASLt algorithm choice depends on. Pointer alignments are part of the key
// because the heuristic filters algorithms by them: a plan found for 256-byte aligned operands
// must not be reused for a view that starts mid-buffer.
struct GemmKey {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches
  int32_t ab_type = 0, c_type = 0, bias_type = -1;   // cudaDataType_t; -1: no bias pointer
  int32_t compute_type = 0;                          // cublasComputeType_t
  uint32_t epilogue = 0;                             // cublasLtEpilogue_t
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0;
  bool trans_a = false, trans_b = false;

  bool operator==(const GemmKey& o) const;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const;
};

// A ready-to-run cuBLASLt call, or `ok == false` when cuBLASLt offered no algorithm (the caller
// then falls back).
struct GemmPlan {
  bool ok = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_size = 0;
};

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

  // The cached plan for a key, created (heuristic query) on first use. bias is the bias pointer
  // the heuristic should assume (only its alignment matters).
  const GemmPlan& gemm_plan(const GemmKey& key, const void* bias);

  // Graph state of begin_capture / end_capture / replay.
  cudaGraphExec_t graph_exec = nullptr;
  bool capturing = false;

 private:
  void clear_plans();

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cudaDeviceProp prop_{};
  void* workspace_ = nullptr;
  size_t workspace_size_ = 0;
  float* scratch_ = nullptr;
  size_t scratch_floats_ = 0;
  std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> plans_;
};

}  // namespace mpbench::cuda
