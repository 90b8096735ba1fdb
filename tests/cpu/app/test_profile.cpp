// `mpbench profile`'s "of peak": each GEMM and convolution against the ceiling of the dtype it
// computes in.
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "test_util.h"

using mpbench::test::has_text;
using nlohmann::json;

namespace {

class Profile : public mpbench::test::CliTest {};

// amp_bf16 with fc1 pinned to fp32 on the native CPU: fc1's fp32 GEMMs are rated against the
// fp32 GEMM ceiling, the head's bf16 ones against bf16's, and the line under the table gives
// both. They were all divided by the bf16 ceiling (about twice the fp32 one).
TEST_F(Profile, APinnedGemmIsRatedAgainstTheFp32Ceiling) {
  std::string why;
  if (!mpbench::native_cpu_available(&why)) GTEST_SKIP() << why;
  if (!mpbench::test::native_bf16_available()) GTEST_SKIP() << "no bf16 kernel on this CPU";
  const std::string spec = write("pinned.json", R"({"name": "p", "model": {"type": "mlp",
      "input_dim": 256, "hidden": [256], "num_classes": 64}, "data": {"train_samples": 1024,
      "eval_samples": 256}, "train": {"batch_size": 256, "epochs": 1},
      "fp32_layers": ["fc1"]})");
  const std::string out = (dir_ / "p.json").string();
  const auto r =
      run("profile " + spec +
          " --device cpu --precisions amp_bf16 --steps 3 --top 100 --quiet --json " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  // The tables' shares are of the ops' time, named so (explain's are of the step).
  EXPECT_TRUE(has_text(r.out, "│ ms/step │ of ops │")) << r.out;
  EXPECT_TRUE(has_text(r.out,
                       "fp32 for the GEMMs and convolutions it keeps in fp32 "
                       "(fp32_layers), the GEMM ceilings measured on this CPU"))
      << r.out;
  const json doc = json::parse(mpbench::test::read_file(out));
  const json& ceilings = doc["env"]["native_cpu"]["gemm_tflops"];
  int rated = 0;
  for (const json& o : doc["profiles"][0]["ops"]) {
    if (o["op"] != "gemm" || !(o["ms_per_step"].get<double>() > 0)) continue;
    const std::string detail = o["detail"], scope = o["scope"];
    const bool fp32 = has_text(scope, "fc1");
    ASSERT_EQ(has_text(detail, " fp32"), fp32) << detail;
    const double tflops =
        o["flops_per_step"].get<double>() / (o["ms_per_step"].get<double>() * 1e9);
    const double peak = ceilings[fp32 ? "fp32" : "amp_bf16"].get<double>();
    // The JSON names the ceiling each is held to (scripts/side_by_side.py reads it).
    EXPECT_EQ(o["peak_tflops"].get<double>(), peak) << o;
    const double expected = 100.0 * tflops / peak;
    // The row: its last cell, the share in 0.1%.
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (!has_text(line, scope + " ") || !has_text(line, detail + " ")) continue;
      const std::string cell = line.substr(line.rfind("│") + std::string("│").size());
      EXPECT_NEAR(std::stod(cell), expected, 0.051) << line;
      ++rated;
    }
  }
  EXPECT_GE(rated, 4) << r.out;  // fc1's and the head's forward and backward GEMMs
}

// Per step, in the tables and the JSON alike: over 4 profiled steps each of tiny_mlp's ops runs
// once a step, and the "by op" row of the GEMMs is the sum of their ops' ms per step. The first
// two steps, cold, are never profiled: a warm-up of 0 is raised to 2 (the spec it writes says so).
TEST_F(Profile, EveryFigureIsPerStep) {
  const std::string out = (dir_ / "p.json").string();
  const auto r = run("profile " + mpbench::test::source_dir() +
                     "/configs/tiny_mlp.json --device reference --precisions fp32 --steps 4 "
                     "--warmup 0 --quiet --json " +
                     out);
  ASSERT_EQ(r.code, 0) << r.err;
  // One process: the spec's batch, no ranks (those are an MPI launch's).
  EXPECT_TRUE(has_text(r.out, " · batch 64\n")) << r.out;
  EXPECT_FALSE(has_text(r.out, "per rank")) << r.out;
  const json doc = json::parse(mpbench::test::read_file(out));
  EXPECT_EQ(doc["spec"]["train"]["warmup_steps"], 2);
  double gemm_ms = 0;
  int gemms = 0;
  for (const json& o : doc["profiles"][0]["ops"]) {
    if (o["op"] == "gemm" || o["op"] == "adamw_step")
      EXPECT_EQ(o["calls_per_step"].get<double>(), 1.0) << o;
    if (o["op"] != "gemm") continue;
    gemm_ms += o["ms_per_step"].get<double>();
    ++gemms;
  }
  EXPECT_EQ(gemms, 5);  // forward, and weight gradient of both; the head's input gradient
  std::istringstream lines(r.out);
  bool found = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(" gemm ", 0) != 0) continue;  // the "by op" table's row
    const std::string cell = line.substr(line.find("│") + std::string("│").size());
    EXPECT_NEAR(std::stod(cell), gemm_ms, 0.0005 + 0.01 * gemm_ms) << line;  // 3 decimals
    found = true;
    break;
  }
  EXPECT_TRUE(found) << r.out;
}

}  // namespace
