#include <unistd.h>

#include <cstdlib>

#include "app/commands.h"
#include "app/output_file.h"

int main(int argc, char** argv) {
  // OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so a better kernel choice (see
  // kernels/cpu/blas_env.cpp) means running again with it set. If exec fails we just go on.
  if (const char* core = mpbench::blas_coretype_hint(); core && !std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  // SIGPIPE ignored, closed standard fds held by /dev/null; stdout's errors are reported at the
  // end, after the files named by options are written (app/output_file.h).
  mpbench::prepare_standard_streams();
  return mpbench::finish_stdout(mpbench::mpbench_main(argc, argv));
}
