// `mpbench inspect`'s lines under the table, where they count what they name.
#include <string>

#include <gtest/gtest.h>

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
