// bench/gate_noise.py, the measurement behind the README's CI-gate tables, run on its smallest
// interleaved trial (three pairs of tiny_mlp fp32 on the native CPU or the reference) and judged
// again from its kept files with the current's epochs scaled: its plumbing to `mpbench run` and
// `compare` kept working, and the rejudged ratio is the scale times the first (the scaling is
// exact; no speed is asserted). Needs python3, standard library only; skipped where there is none.
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace fs = std::filesystem;
using Result = mpbench::test::ShellResult;

namespace {

class GateNoise : public mpbench::test::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (!mpbench::test::has_python3(dir_.string())) GTEST_SKIP() << "no python3";
  }
  Result gate_noise(const std::string& args) {
    const std::string root = MPBENCH_SOURCE_DIR;
    return mpbench::test::run_shell(
        "python3 " + root + "/bench/gate_noise.py --mpbench " + MPBENCH_EXE +
            " --interleave 3 --device auto --precisions fp32 --repeat 3 --configs " + root +
            "/configs/tiny_mlp.json " + args,
        dir_.string());
  }
};

// "trial  1: paired exit E R; unpaired exit E R": the paired ratio, or a negative number.
double paired_ratio(const std::string& out) {
  const size_t at = out.find("trial  1: paired exit ");
  int exit_code = -1;
  double ratio = -1;
  if (at == std::string::npos ||
      std::sscanf(out.c_str() + at, "trial  1: paired exit %d %lf", &exit_code, &ratio) != 2)
    return -1;
  return ratio;
}

TEST_F(GateNoise, AnInterleavedTrialRunsAndRejudgesScaled) {
  const Result run = gate_noise("--pairs 1 --keep " + (dir_ / "kept").string());
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  // Three pairs kept, in files named by trial, side and pair.
  const auto kept = [&] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "kept"))
      n += e.path().extension() == ".json";
    return n;
  };
  EXPECT_EQ(kept(), 6u);
  EXPECT_TRUE(fs::exists(dir_ / "kept" / "identical-1-cur-3.json"));
  EXPECT_NE(run.out.find("paired: false alarms "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("unpaired: false alarms "), std::string::npos) << run.out;
  const double identical = paired_ratio(run.out);
  ASSERT_GT(identical, 0) << run.out;

  const Result scaled = gate_noise("--rejudge " + (dir_ / "kept").string() + " --scale-current 3");
  ASSERT_EQ(scaled.code, 0) << scaled.out << scaled.err;
  EXPECT_NE(scaled.out.find("paired: current x3: detections "), std::string::npos) << scaled.out;
  // Every current epoch 3x: each pair's ratio, and so their median, 3x (printed to 3 decimals).
  EXPECT_NEAR(paired_ratio(scaled.out), 3 * identical, 0.0025) << run.out << scaled.out;
  // The kept files are judged, not changed: the scaled copies live elsewhere.
  EXPECT_EQ(kept(), 6u);
}

}  // namespace
