// The command line on a machine with a GPU: what only the CPU takes is refused where auto picks
// the GPU (it was ignored in silence: --threads 2 timed the GPU run as if it were the CPU's).
#include <string>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "test_util.h"

namespace {

class CliGpu : public mpbench::test::CliTest {};

TEST_F(CliGpu, AutoOnAGpuRefusesTheCpuOptions) {
  std::string why;
  if (mpbench::cuda_device_count(&why) == 0) GTEST_SKIP() << why;
  const std::string spec = mpbench::test::source_dir() + "/configs/tiny_mlp.json";
  expect_refused(run("run " + spec + " --epochs 1 --threads 2"),
                 "--threads: only --device cpu (or auto on a machine without a GPU) takes it");
  expect_refused(run("run " + spec + " --epochs 1 --cpu-isa avx2"),
                 "--cpu-isa: only --device cpu (or auto on a machine without a GPU) takes it");
  EXPECT_EQ(run("run " + spec + " --epochs 1 --device cpu --threads 2 --quiet").code, 0);
}

}  // namespace
