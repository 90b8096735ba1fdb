#pragma once
// The fixture of the parity tests: the CPU reference and the backend under test ("dut"), with
// their allocators, tensors allocated on both from the same host values, and the comparisons
// (tests/gpu/kernels/*). The backend under test is CUDA; in the executables built with
// MPBENCH_PARITY_NATIVE_CPU (cpu_native_*, label cpu) it is the native CPU backend, which is held
// to the reference by the same tests and tolerances.
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
  Tensor cpu, dut;
};

#ifdef MPBENCH_PARITY_NATIVE_CPU
inline constexpr bool kNativeCpuUnderTest = true;
#else
inline constexpr bool kNativeCpuUnderTest = false;
#endif

// What the native CPU runs on the reference's own code (fp16 and TF32 GEMMs): comparing it would
// hold the reference to itself, so its parity tests pass over it.
inline bool reference_against_itself(DType operands, GemmMath math) {
  return kNativeCpuUnderTest && (operands == DType::F16 || math == GemmMath::TF32);
}

inline std::unique_ptr<Backend> make_device_under_test() {
#ifdef MPBENCH_PARITY_NATIVE_CPU
  return make_native_cpu_backend();
#else
  return make_cuda_backend(0);
#endif
}

// Whether the backend under test can be made here; why not in `why`.
inline bool device_under_test_available(std::string* why) {
#ifdef MPBENCH_PARITY_NATIVE_CPU
  return native_cpu_available(why);
#else
  return cuda_device_count(why) > 0;
#endif
}

// The bias gradient's tolerance for a dx of dtype dx: every backend sums dx as rounded to its
// dtype, as PyTorch sums a 16-bit gradient, and a 16-bit dx may round the other way than the
// reference's (another tanh), which moves the sum by that dtype's rounding.
inline double dbias_tolerance(DType dx) {
  return dx == DType::F32 ? 1e-5 : tolerance_for(dx);
}

// Both backends, an allocator each (destroyed before their backends) and the GEMM workspace.
struct Env {
  std::unique_ptr<Backend> cpu = make_reference_backend();
  std::unique_ptr<Backend> dut = make_device_under_test();
  TrackingAllocator cpu_alloc{*cpu};
  TrackingAllocator dut_alloc{*dut};
  Tensor workspace;  // the device's GEMM workspace (none on a CPU)

  Env() {
    const int64_t ws_floats = static_cast<int64_t>(dut->workspace_bytes() / 4);
    if (ws_floats == 0) return;
    workspace = dut_alloc.alloc(Shape{ws_floats}, DType::F32, MemCategory::Workspace);
    dut->set_workspace(workspace);
  }

  Pair make(Shape s, DType dt, const std::vector<float>& values) {
    Pair p{cpu_alloc.alloc(s, dt, MemCategory::Activations),
           dut_alloc.alloc(s, dt, MemCategory::Activations)};
    from_host_f32(*cpu, values, p.cpu);
    from_host_f32(*dut, values, p.dut);
    return p;
  }
  Pair random(Shape s, DType dt, uint64_t seed, float scale = 1.0f) {
    return make(s, dt, random_nonzero(static_cast<size_t>(s.numel()), seed, scale));
  }
  Pair poisoned(Shape s, DType dt) {
    Pair p{cpu_alloc.alloc(s, dt, MemCategory::Activations),
           dut_alloc.alloc(s, dt, MemCategory::Activations)};
    poison(*cpu, p.cpu);
    poison(*dut, p.dut);
    return p;
  }
  Pair scalar(float v) { return make(Shape{1}, DType::F32, {v}); }
  void release(const Pair& p) {
    if (p.cpu.defined()) cpu_alloc.release(p.cpu);
    if (p.dut.defined()) dut_alloc.release(p.dut);
  }

  std::vector<float> host_cpu(const Pair& p) { return to_host_f32(*cpu, p.cpu); }
  std::vector<float> host_dut(const Pair& p) { return to_host_f32(*dut, p.dut); }

  // GPU result against the CPU reference, relative error within tol (relative to `scale`
  // where given, see test::compare).
  ::testing::AssertionResult close(const Pair& p, double tol,
                                   const std::vector<float>* scale = nullptr) {
    auto r = compare(host_dut(p), host_cpu(p), tol, scale);
    if (r.ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << r.message;
  }
  // Bit-for-bit after decoding (NaN matches NaN, whatever its payload).
  ::testing::AssertionResult same(const Pair& p) {
    return same_bits(host_dut(p), host_cpu(p), "device under test against the reference");
  }
};

// A test of what only CUDA has (graphs, device memory, cuBLASLt and cuDNN plans).
#ifdef MPBENCH_PARITY_NATIVE_CPU
#define SKIP_WITHOUT_CUDA() GTEST_SKIP() << "a CUDA-only test"
#else
#define SKIP_WITHOUT_CUDA() \
  std::string why;          \
  if (mpbench::cuda_device_count(&why) == 0) GTEST_SKIP() << why
#endif
// A parity test, run against whichever backend is under test.
#define SKIP_WITHOUT_DEVICE() \
  std::string why;            \
  if (!mpbench::test::device_under_test_available(&why)) GTEST_SKIP() << why

}  // namespace mpbench::test
