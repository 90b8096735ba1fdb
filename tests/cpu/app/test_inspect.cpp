// `mpbench inspect`'s lines under the table, where they count what they name, and its
// --batch-size and --memory-limit.
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

using mpbench::test::has_text;

namespace {

class Inspect : public mpbench::test::CliTest {};

// amp_fp8 takes only Linear layers' GEMMs to FP8: the count is of GEMMs, the convolutions are
// counted apart. tiny_resnet read "0 of 8 GEMMs" for its 7 convolutions and 1 Linear head.
TEST_F(Inspect, Fp8CountsGemmsAndConvolutionsApart) {
  const std::string spec = mpbench::test::source_dir() + "/configs/tiny_resnet.json";
  const auto r = run("inspect " + spec + " --precision amp_fp8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out,
                       "fp8: 0 of 1 GEMM runs in FP8 (fp8_e4m3 inputs forward, fp8_e5m2 gradients "
                       "backward, delayed scaling); the rest in bf16; 7 convolutions in bf16 "
                       "(amp_fp8 takes only Linear layers' GEMMs to FP8)"))
      << r.out;
  // Pinned by fp32_layers: block1's 4 convolutions and the head, each counted where it belongs.
  const std::string pinned = write(
      "pinned.json",
      R"({"name": "p", "model": {"type": "resnet_bottleneck", "image_size": 8, "in_channels": 4,
      "width": 8, "out_channels": 16, "blocks": 2, "stride": 2, "num_classes": 4},
      "data": {"train_samples": 64, "eval_samples": 32}, "train": {"batch_size": 32, "epochs": 1},
      "fp32_layers": ["block1", "head"]})");
  const auto p = run("inspect " + pinned + " --precision amp_fp8");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_TRUE(has_text(p.out, "fp8: 0 of 1 GEMM runs in FP8")) << p.out;
  EXPECT_TRUE(has_text(p.out,
                       "1 in fp32 (fp32_layers), the rest in bf16; 3 convolutions in bf16 "
                       "and 4 in fp32 (fp32_layers)"))
      << p.out;
}

}  // namespace

namespace {

// --batch-size: the tables and the prediction at that batch (past the spec's data: nothing
// trains); --memory-limit: the largest batch predicted to fit, the line and the JSON agreeing,
// and the prediction at that batch within the limit, at the next multiple past it.
TEST_F(Inspect, AnotherBatchAndTheLargestPredictedToFit) {
  const std::string spec = mpbench::test::source_dir() + "/configs/tiny_mlp.json";
  auto predicted_at = [&](int64_t batch) {
    const std::string out = (dir_ / ("at" + std::to_string(batch) + ".json")).string();
    const auto r = run("inspect " + spec + " --precision amp_bf16 --batch-size " +
                       std::to_string(batch) + " --json " + out);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has_text(r.out, "precision amp_bf16, batch " + std::to_string(batch))) << r.out;
    const auto entry = nlohmann::json::parse(mpbench::test::read_file(out))["entries"][0];
    EXPECT_EQ(entry["batch_size"], batch);
    return entry["predicted_memory_bytes"]["training"].get<int64_t>();
  };
  const std::string out = (dir_ / "fits.json").string();
  const auto r = run("inspect " + spec +
                     " --precision amp_bf16 --memory-limit 3MiB --multiple 8 --json " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(mpbench::test::read_file(out));
  EXPECT_EQ(doc["memory_limit_bytes"], 3 << 20);
  const auto& fit = doc["entries"][0]["predicted_max_batch"];
  EXPECT_EQ(fit["multiple"], 8);
  EXPECT_EQ(fit["at_spec_limit"], false);
  const int64_t batch = fit["batch"].get<int64_t>();
  EXPECT_EQ(batch % 8, 0);
  EXPECT_GT(batch, 2048);  // past the spec's data, which the prediction does not need
  EXPECT_TRUE(has_text(r.out, fmt::format("fits 3.0 MiB in amp_bf16 (--memory-limit): up to batch "
                                          "{},{:03} (multiples of 8)",
                                          batch / 1000, batch % 1000)))
      << r.out;
  EXPECT_TRUE(has_text(r.out, "more than the spec's data.train_samples (2,048)")) << r.out;
  EXPECT_LE(predicted_at(batch), 3 << 20);
  EXPECT_GT(predicted_at(batch + 8), 3 << 20);
  // The spec's own batch gives the spec's table.
  EXPECT_EQ(predicted_at(64), nlohmann::json::parse(mpbench::test::read_file(
                                  out))["entries"][0]["predicted_memory_bytes"]["training"]
                                  .get<int64_t>());
}

// The edges of what inspect says: a thousand parameters are "1.00K"; the misaligned sizes are
// named up to six, then counted; a batch exactly the spec's data is not "more than" it; and no
// batch that fits is null in the JSON, not 0.
TEST_F(Inspect, CountsListsAndLimitsAtTheirEdges) {
  const std::string spec = write("m7.json", R"({"name": "m7", "model": {"type": "mlp",
      "input_dim": 99, "hidden": [10, 9, 9, 9, 9, 9, 9], "num_classes": 3},
      "data": {"train_samples": 1048576, "eval_samples": 1},
      "train": {"batch_size": 32, "epochs": 1}, "fp32_layers": []})");
  const auto r = run("inspect " + spec + " --precision amp_bf16 --memory-limit 1TiB");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "│  1.00K │")) << r.out;  // fc1: 99 x 10 + 10
  EXPECT_TRUE(has_text(r.out,
                       "(pad them to a multiple): fc1 N=10, fc1 K=99, fc2 N=9, fc2 K=10, "
                       "fc3 N=9, fc3 K=9, and 10 more"))
      << r.out;
  EXPECT_TRUE(has_text(r.out, "every batch a spec takes, up to 1,048,576, predicted")) << r.out;
  EXPECT_FALSE(has_text(r.out, "more than the spec's data.train_samples")) << r.out;
  const std::string out = (dir_ / "none.json").string();
  ASSERT_EQ(run("inspect " + spec + " --precision amp_bf16 --memory-limit 1KiB --json " + out).code,
            0);
  EXPECT_TRUE(nlohmann::json::parse(
                  mpbench::test::read_file(out))["entries"][0]["predicted_max_batch"]["batch"]
                  .is_null());
}

TEST_F(Inspect, ABatchTheSpecRefusesAndAMultipleAloneAreBadInput) {
  // The last feature map is 1x1: batch statistics need two samples.
  const std::string spec = write(
      "r1.json",
      R"({"name": "r1", "model": {"type": "resnet_bottleneck", "image_size": 2, "in_channels": 4,
      "width": 4, "out_channels": 8, "blocks": 1, "stride": 2, "num_classes": 2},
      "data": {"train_samples": 64, "eval_samples": 32}, "train": {"batch_size": 8, "epochs": 1}})");
  expect_refused(run("inspect " + spec + " --batch-size 1"), "--batch-size 1: ");
  expect_refused(run("inspect " + spec + " --multiple 8"), "--multiple requires --memory-limit");
  expect_refused(run("inspect " + spec + " --memory-limit 0"),
                 "--memory-limit: expected a size above 0");
}

}  // namespace
