// The test executables' main: gtest's, after the OpenBLAS kernel choice every mpbench executable
// makes (rerun_with_better_blas), so that the reference backend's GEMMs run in the tests as fast
// as in mpbench. On an Emerald Rapids Xeon, where Debian's OpenBLAS falls back to its generic
// kernels, the slowest test (a max-batch search on GPT-2 small) took 93 s without it.
#include <gtest/gtest.h>

#include "kernels/backend.h"

int main(int argc, char** argv) {
  mpbench::rerun_with_better_blas(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
