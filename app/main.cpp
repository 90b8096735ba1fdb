#include "app/commands.h"
#include "app/output_file.h"

int main(int argc, char** argv) {
  mpbench::rerun_with_better_blas(argv);  // OpenBLAS's AVX2/AVX-512 kernels on CPUs newer than it
  // SIGPIPE ignored, closed standard fds held by /dev/null; stdout's errors are reported at the
  // end, after the files named by options are written (app/output_file.h).
  mpbench::prepare_standard_streams();
  return mpbench::finish_stdout(mpbench::mpbench_main(argc, argv));
}
