#pragma once
// Checking macros for the CUDA backend: CUDA runtime, cuBLASLt and cuDNN return codes go through
// one of these, so a failure surfaces as mpbench::Error(Runtime) naming the call, the library's
// own message and file:line instead of a silent wrong result later. The exceptions read a status
// by hand where it is acted on (an algorithm refused, then the next tried) and in teardown, where
// an error has nowhere to go; each says so.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "kernels/error.h"

#if defined(MPBENCH_HAVE_CUDNN)
#include <cudnn.h>
#endif

namespace mpbench::cuda {

[[noreturn]] inline void throw_cuda(const char* expr, cudaError_t err, const char* file, int line) {
  throw_runtime(fmt::format("{}:{}: {} failed: {} ({})", file, line, expr, cudaGetErrorString(err),
                            cudaGetErrorName(err)));
}

[[noreturn]] inline void throw_cublas(const char* expr, cublasStatus_t st, const char* file,
                                      int line) {
  throw_runtime(fmt::format("{}:{}: {} failed: {} ({})", file, line, expr,
                            cublasLtGetStatusString(st), cublasLtGetStatusName(st)));
}

#if defined(MPBENCH_HAVE_CUDNN)
[[noreturn]] inline void throw_cudnn(const char* expr, cudnnStatus_t st, const char* file,
                                     int line) {
  throw_runtime(fmt::format("{}:{}: {} failed: {}", file, line, expr, cudnnGetErrorString(st)));
}
#endif

}  // namespace mpbench::cuda

#define CUDA_CHECK(expr)                                                            \
  do {                                                                              \
    cudaError_t mpb_err_ = (expr);                                                  \
    if (mpb_err_ != cudaSuccess) {                                                  \
      cudaGetLastError(); /* clear a sticky-free error so the next call is clean */ \
      ::mpbench::cuda::throw_cuda(#expr, mpb_err_, __FILE__, __LINE__);             \
    }                                                                               \
  } while (0)

#define CUBLAS_CHECK(expr)                                               \
  do {                                                                   \
    cublasStatus_t mpb_st_ = (expr);                                     \
    if (mpb_st_ != CUBLAS_STATUS_SUCCESS) {                              \
      ::mpbench::cuda::throw_cublas(#expr, mpb_st_, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

#if defined(MPBENCH_HAVE_CUDNN)
#define CUDNN_CHECK(expr)                                               \
  do {                                                                  \
    cudnnStatus_t mpb_st_ = (expr);                                     \
    if (mpb_st_ != CUDNN_STATUS_SUCCESS) {                              \
      ::mpbench::cuda::throw_cudnn(#expr, mpb_st_, __FILE__, __LINE__); \
    }                                                                   \
  } while (0)
#endif

// After every kernel launch: launch-configuration errors are only reported by cudaGetLastError.
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())
