#pragma once
// The fixture of the GPU-vs-CPU parity tests: both backends with their allocators, tensors
// allocated on both from the same host values, and the comparisons (tests/gpu/kernels/*).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench::test {

// A tensor allocated on both backends.
struct Pair {
  Tensor cpu, gpu;
};

// Both backends, an allocator each (destroyed before their backends) and the GEMM workspace.
struct Env {
  std::unique_ptr<Backend> cpu = make_reference_backend();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  TrackingAllocator cpu_alloc{*cpu};
  TrackingAllocator gpu_alloc{*gpu};

  Env() {
    const int64_t ws_floats = static_cast<int64_t>(gpu->workspace_bytes() / 4);
    Tensor ws = gpu_alloc.alloc(Shape{ws_floats}, DType::F32, MemCategory::Workspace);
    gpu->set_workspace(ws);
  }

  Pair make(Shape s, DType dt, const std::vector<float>& values) {
    Pair p{cpu_alloc.alloc(s, dt, MemCategory::Activations),
           gpu_alloc.alloc(s, dt, MemCategory::Activations)};
    from_host_f32(*cpu, values, p.cpu);
    from_host_f32(*gpu, values, p.gpu);
    return p;
  }
  Pair random(Shape s, DType dt, uint64_t seed, float scale = 1.0f) {
    return make(s, dt, random_nonzero(static_cast<size_t>(s.numel()), seed, scale));
  }
  Pair poisoned(Shape s, DType dt) {
    Pair p{cpu_alloc.alloc(s, dt, MemCategory::Activations),
           gpu_alloc.alloc(s, dt, MemCategory::Activations)};
    poison(*cpu, p.cpu);
    poison(*gpu, p.gpu);
    return p;
  }
  Pair scalar(float v) { return make(Shape{1}, DType::F32, {v}); }
  void release(const Pair& p) {
    if (p.cpu.defined()) cpu_alloc.release(p.cpu);
    if (p.gpu.defined()) gpu_alloc.release(p.gpu);
  }

  std::vector<float> host_cpu(const Pair& p) { return to_host_f32(*cpu, p.cpu); }
  std::vector<float> host_gpu(const Pair& p) { return to_host_f32(*gpu, p.gpu); }

  // GPU result against the CPU reference, relative error within tol (relative to `scale`
  // where given, see test::compare).
  ::testing::AssertionResult close(const Pair& p, double tol,
                                   const std::vector<float>* scale = nullptr) {
    auto r = compare(host_gpu(p), host_cpu(p), tol, scale);
    if (r.ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << r.message;
  }
  // Bit-for-bit after decoding (NaN matches NaN, whatever its payload).
  ::testing::AssertionResult same(const Pair& p) {
    auto g = host_gpu(p), c = host_cpu(p);
    for (size_t i = 0; i < g.size(); ++i) {
      bool both_nan = std::isnan(g[i]) && std::isnan(c[i]);
      if (!both_nan && (f32_bits(g[i]) != f32_bits(c[i])))
        return ::testing::AssertionFailure()
               << "element " << i << ": cuda " << g[i] << " cpu " << c[i];
    }
    return ::testing::AssertionSuccess();
  }
};

#define SKIP_WITHOUT_CUDA() \
  std::string why;          \
  if (mpbench::cuda_device_count(&why) == 0) GTEST_SKIP() << why

}  // namespace mpbench::test
