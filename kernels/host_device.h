#pragma once
// MPB_HOST_DEVICE: a rule compiled into both the CPU reference and the CUDA kernels (the max
// pool's window, FP8 delayed scaling), so that the two backends cannot disagree on it.
#if defined(__CUDACC__)
#define MPB_HOST_DEVICE __host__ __device__
#else
#define MPB_HOST_DEVICE
#endif
