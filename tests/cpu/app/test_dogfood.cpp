// Dogfooding the CI gate: the real executable trains configs/tiny_mlp.json on the CPU and
// `mpbench compare` holds it against results/baseline-cpu.json (made by the same command). Final
// loss, accuracy and tracked memory must match exactly; time is not judged (see below). BLAS
// runs single-threaded, here and when the baseline was made, so that the numerics are the same.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using mpbench::test::read_file;

class Dogfood : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mpbench_dogfood_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int run(const std::string& args, std::string* out = nullptr) {
    const auto r = mpbench::test::run_shell(
        "OPENBLAS_NUM_THREADS=1 " + std::string(MPBENCH_EXE) + " " + args, dir_.string());
    if (out) *out = r.out + r.err;
    return r.code;
  }
  fs::path dir_;
};

TEST_F(Dogfood, TinyCpuRunMatchesTheCommittedBaseline) {
  const std::string src = MPBENCH_SOURCE_DIR;
  const std::string baseline = src + "/results/baseline-cpu.json";
  ASSERT_TRUE(fs::exists(baseline)) << baseline;
  const json base = json::parse(read_file(baseline));
  const std::string current = (dir_ / "current.json").string();
  const std::string cmp_json = (dir_ / "compare.json").string();

  // The numerics are checked exactly; time is not: one run a side gets no time verdict (the gate
  // needs repetitions), and this build may be the sanitizer one on a loaded runner, 9-18x slower
  // than the Release build that recorded the baseline. The gate's time verdict is measured by
  // bench/, not asserted here.
  std::string log;
  ASSERT_EQ(
      run("run " + src + "/configs/tiny_mlp.json --device reference --quiet --json " + current,
          &log),
      0)
      << log;
  const int code =
      run("compare " + baseline + " " + current +
              " --memory-threshold 0 --accuracy-threshold 0 --loss-threshold 0 --json " + cmp_json,
          &log);
  ASSERT_TRUE(code == 0 || code == 1) << log;
  const json c = json::parse(read_file(cmp_json));
  const json cur = json::parse(read_file(current));
  ASSERT_EQ(c["rows"].size(), base["runs"].size()) << log;  // no missing / new rows
  // On any CPU: the tracked memory is the allocator's, and every run still trains.
  for (const json& row : c["rows"]) {
    EXPECT_EQ(row["verdict"], "inconclusive") << row.dump();
    EXPECT_EQ(row["current_status"], "ok") << row.dump();
    EXPECT_EQ(row["memory_change"], 0.0) << row.dump();
    for (const json& what : row["regressions"]) EXPECT_NE(what, "time") << row.dump();
  }
  // On another CPU, or where OpenBLAS picked other kernels for it (Zen 4 and Zen 5 are both
  // "AMD EPYC"), the kernels round differently: the gate names the difference and flags the
  // loss; on the baseline's CPU and kernels every number must match.
  const json &bc = base["env"]["cpu"], &cc = cur["env"]["cpu"];
  if (bc["name"] != cc["name"] || bc.value("blas_core", "") != cc.value("blas_core", "")) {
    if (bc["name"] == cc["name"]) {
      for (const json& row : c["rows"])
        EXPECT_NE(row["env_differences"].dump().find("cpu.blas_core"), std::string::npos)
            << row.dump();
    }
    GTEST_SKIP() << "baseline recorded on " << bc["name"] << " (" << bc.value("blas_core", "")
                 << " kernels), this CPU is " << cc["name"] << " (" << cc.value("blas_core", "")
                 << "): numerics not compared\n"
                 << log;
  }
  EXPECT_EQ(code, 0) << log;
  for (const json& row : c["rows"]) {
    EXPECT_TRUE(row["regressions"].empty()) << row.dump();
    EXPECT_TRUE(row["env_differences"].empty()) << row.dump();
    EXPECT_EQ(row["loss_change"], 0.0) << row.dump();
    EXPECT_EQ(row["accuracy_delta_points"], 0.0) << row.dump();
  }
}

// The gate itself must catch a change in the numerics: the same run with a final loss one part
// in 10^6 off is exit 1 under --loss-threshold 0; and a run from another data seed is another
// spec, which the gate refuses to judge (exit 4, naming data.seed).
TEST_F(Dogfood, ChangedNumericsFailTheGate) {
  const std::string src = MPBENCH_SOURCE_DIR;
  const std::string first = (dir_ / "first.json").string();
  std::string log;
  ASSERT_EQ(
      run("run " + src + "/configs/tiny_mlp.json --device reference --quiet --precisions fp32 " +
              "--json " + first,
          &log),
      0)
      << log;
  json changed = json::parse(read_file(first));
  changed["runs"][0]["final_loss"] = changed["runs"][0]["final_loss"].get<double>() * (1 + 1e-6);
  const std::string current = (dir_ / "changed.json").string();
  std::ofstream(current) << changed.dump();
  EXPECT_EQ(run("compare " + first + " " + current + " --loss-threshold 0", &log), 1) << log;
  EXPECT_NE(log.find("loss"), std::string::npos) << log;

  const std::string seed = (dir_ / "seed.json").string();
  ASSERT_EQ(
      run("run " + src + "/configs/tiny_mlp.json --device reference --quiet --precisions fp32 " +
              "--seed 8 --json " + seed,
          &log),
      0)
      << log;
  EXPECT_EQ(run("compare " + first + " " + seed + " --loss-threshold 0", &log), 4) << log;
  EXPECT_NE(log.find("spec differs at data.seed"), std::string::npos) << log;
}

// What inspect and explain tell a user about tensor-core alignment counts GEMMs, not their
// sizes: a 7-13-3 MLP at batch 5 has 6 sizes off bf16's 8s in 2 GEMMs ("6 of 2 GEMMs" before).
TEST_F(Dogfood, InspectAndExplainCountMisalignedGemmsNotSizes) {
  const std::string spec = (dir_ / "cnt.json").string();
  std::ofstream(spec) << R"({"name": "cnt", "model": {"type": "mlp", "input_dim": 7,
      "hidden": [13], "num_classes": 3}, "data": {"type": "synthetic", "train_samples": 64,
      "eval_samples": 8, "seed": 1}, "train": {"batch_size": 5, "epochs": 1}})";
  std::string log;
  ASSERT_EQ(run("inspect " + spec + " --precision amp_bf16", &log), 0) << log;
  EXPECT_NE(log.find("tensor cores: 2 of 2 GEMMs and convolutions have sizes that are not "
                     "multiples of 8"),
            std::string::npos)
      << log;
  ASSERT_EQ(
      run("explain " + spec + " --precisions fp32,amp_bf16 --device reference --steps 3", &log), 0)
      << log;
  EXPECT_NE(log.find("2 GEMMs/convolutions have sizes off amp_bf16's tensor-core multiple of 8"),
            std::string::npos)
      << log;
}

}  // namespace
