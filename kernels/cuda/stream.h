#pragma once
// The stream a CUDA backend enqueues its ops on, for what runs beside them on it (NCCL's
// all-reduce, kernels/cuda/nccl_collective.cpp).
#include <cuda_runtime_api.h>

namespace mpbench {

class Backend;
cudaStream_t cuda_stream_of(Backend& be);  // Error unless `be` is the CUDA backend

}  // namespace mpbench
