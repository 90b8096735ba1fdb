// OpenBLAS picks its kernels from the CPU model at load time. On CPUs newer than the OpenBLAS
// build (Debian 12 ships 0.3.21; e.g. Emerald Rapids, model 207) it falls back to the SSE3
// "Prescott" kernels, 2x slower than the AVX-512 ones (measured: 8.1 s vs 3.9 s per fp32 MNIST
// epoch). The choice can only be changed through OPENBLAS_CORETYPE before the library loads,
// so the executable re-runs itself with it set (rerun_with_better_blas).
#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "kernels/backend.h"
#include "kernels/host_memory.h"

namespace mpbench {

const char* blas_coretype_hint() {
  const char* core = openblas_get_corename();
  if (!core || std::strcmp(core, "Prescott") != 0) return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

void rerun_with_better_blas(char** argv) {
  bool again = false;
  if (const char* core = blas_coretype_hint(); core && !std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    again = true;
  }
  // Each OpenBLAS thread it starts as it loads takes a malloc arena and a 128 MiB buffer at once
  // (malloc(134221824) in 0.3.21), and one that cannot retries for ever: under `ulimit -v
  // 1000000` a reference run kept a CPU busy and hung at its exit, joining such a thread. Under
  // an address-space limit OpenBLAS runs on the calling thread alone (the native backend's
  // GEMMs are oneDNN's); OPENBLAS_NUM_THREADS, when set, is the user's word.
  if (address_space_limit() != SIZE_MAX && openblas_get_num_threads() > 1 &&
      !std::getenv("OPENBLAS_NUM_THREADS")) {
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    again = true;
  }
  if (again) execv("/proc/self/exe", argv);
}

void describe_blas(DeviceInfo& info) {
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  info.blas_config = config ? config : "OpenBLAS";
  info.blas_core = core ? core : "";
  info.blas_threads = openblas_get_num_threads();
  switch (openblas_get_parallel()) {
    case 0:
      info.blas_threading = "sequential";
      break;
    case 2:
      info.blas_threading = "openmp";
      break;
    default:
      info.blas_threading = "pthreads";
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  info.omp_num_threads = omp ? omp : "";
}

}  // namespace mpbench
