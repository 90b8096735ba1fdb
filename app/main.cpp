#include <unistd.h>

#include <cstdlib>

#include "app/commands.h"

int main(int argc, char** argv) {
  // OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so a better kernel choice (see
  // kernels/cpu/blas_env.cpp) means running again with it set. If exec fails we just go on.
  if (const char* core = mpbench::blas_coretype_hint(); core && !std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  return mpbench::mpbench_main(argc, argv);
}
