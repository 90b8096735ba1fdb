// `mpbench explain` as a command, where its wording depends on the device: no tensor cores on
// the native CPU, no peaks on the reference.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "test_util.h"

using mpbench::test::has_text;
using mpbench::test::read_file;

namespace {

class ExplainCli : public mpbench::test::CliTest {
 protected:
  std::string config(const char* name) {
    return mpbench::test::source_dir() + "/configs/" + name + ".json";
  }
};

// On the reference there is no bound, and the headline says why: its times are of the emulation
// (it said "without the card's datasheet peaks", on no card). tiny_resnet's sizes off 8 are
// flagged there, as on a GPU.
TEST_F(ExplainCli, TheReferenceSaysWhyThereIsNoBound) {
  const auto r = run("explain " + config("tiny_resnet") +
                     " --device reference --precisions fp32,amp_bf16 --steps 2 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  // One process: the spec's batch, no ranks (those are an MPI launch's).
  EXPECT_TRUE(has_text(r.out, " · batch 32 · 2 profiled steps per mode\n")) << r.out;
  EXPECT_FALSE(has_text(r.out, "per rank")) << r.out;
  EXPECT_TRUE(has_text(r.out, "amp_bf16 vs fp32: measured ")) << r.out;
  EXPECT_TRUE(has_text(r.out,
                       "no bound on the reference, whose times are of the emulation, not "
                       "of a device with peaks: "))
      << r.out;
  EXPECT_FALSE(has_text(r.out, "datasheet")) << r.out;
  EXPECT_TRUE(has_text(r.out, "sizes off amp_bf16's tensor-core multiple of 8")) << r.out;
}

// The native CPU has no tensor cores, and its oneDNN bf16 matmuls run sizes off 8 at their
// multiples' rate: tiny_resnet's C_in=4 and head N=4 are not flagged there.
TEST_F(ExplainCli, TheNativeCpuFlagsNoTensorCoreMultiple) {
  std::string why;
  if (!mpbench::native_cpu_available(&why)) GTEST_SKIP() << why;
  if (!mpbench::test::native_bf16_available()) GTEST_SKIP() << "no bf16 kernel on this CPU";
  const auto r = run("explain " + config("tiny_resnet") +
                     " --device cpu --precisions fp32,amp_bf16 --steps 2 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "amp_bf16 vs fp32: measured ")) << r.out;
  EXPECT_FALSE(has_text(r.out, "tensor-core")) << r.out;
}

// One mode has nothing to explain: the refusal names where the modes came from, the spec's list
// when --precisions was not given (it named --precisions, which the user never typed).
TEST_F(ExplainCli, OneModeIsRefusedWhereItCameFrom) {
  const std::string spec = write("one.json", R"({"name": "one", "model": {"type": "mlp",
      "input_dim": 8, "hidden": [8], "num_classes": 2}, "data": {"train_samples": 16,
      "eval_samples": 8}, "train": {"batch_size": 8}, "precisions": ["fp32"]})");
  const auto from_spec = run("explain " + spec + " --device reference --quiet");
  EXPECT_EQ(from_spec.code, 2);
  EXPECT_EQ(from_spec.err, "mpbench: " + spec +
                               ": precisions: explain compares modes, so it needs two or more "
                               "(got fp32); give them with --precisions\n");
  const auto given = run("explain " + spec + " --device reference --precisions amp_bf16 --quiet");
  EXPECT_EQ(given.code, 2);
  EXPECT_EQ(given.err,
            "mpbench: --precisions: explain compares modes, so it needs two or more (got "
            "amp_bf16)\n");
  EXPECT_EQ(from_spec.out + given.out, "");
}

// A kind's speedup is as the step's: the first mode's time over the second's (above 1 when the
// second is faster), not its inverse.
TEST_F(ExplainCli, EachKindsSpeedupIsFromOverTo) {
  const std::string spec = write("small.json", mpbench::test::kSmallSpec);
  const std::string json = (dir_ / "e.json").string();
  const auto r =
      run("explain " + spec +
          " --device reference --precisions fp32,amp_bf16 --steps 2 --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(doc.at("comparisons").size(), 1u);
  int checked = 0;
  for (const auto& k : doc["comparisons"][0].at("by_kind")) {
    const double from = k.at("from_ms_per_step"), to = k.at("to_ms_per_step");
    if (!(to > 0)) continue;
    EXPECT_DOUBLE_EQ(k.at("speedup").get<double>(), from / to) << k.dump();
    ++checked;
  }
  EXPECT_GT(checked, 0) << doc.dump();
  // One step is one step in the header.
  const auto one =
      run("explain " + spec +
          " --device reference --precisions fp32,amp_bf16 --steps 1 --repeat 2 --quiet");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_TRUE(has_text(one.out, "· 2 interleaved rounds of 1 profiled step per mode\n")) << one.out;
}

// --md onto the spec is refused before anything is written, as --json onto it is.
TEST_F(ExplainCli, TheMarkdownOutputMayNotBeTheSpec) {
  const std::string spec = write("small.json", mpbench::test::kSmallSpec);
  const auto r = run("explain " + spec + " --device reference --steps 2 --quiet --md " + spec);
  expect_refused(r, "is the input");
  EXPECT_EQ(read_file(spec), mpbench::test::kSmallSpec);
}

}  // namespace
