// The datasheet table and the capability rules: FP8 peaks where the card has FP8 tensor cores,
// which compute capabilities run amp_fp8, and the reason an older card's row gives.
#include <gtest/gtest.h>

#include "train/device_specs.h"

namespace mpbench {
namespace {

TEST(DeviceSpecs, Fp8PeaksOnlyWhereTheCardHasThem) {
  const auto h200 = find_datasheet("NVIDIA H200");
  ASSERT_TRUE(h200.has_value());
  EXPECT_EQ(peak_tflops(*h200, Precision::AMP_FP8), 1979);  // dense, as the datasheet
  EXPECT_EQ(peak_tflops(*h200, Precision::AMP_BF16), 989.4);
  const auto pcie = find_datasheet("NVIDIA H100 PCIe");
  ASSERT_TRUE(pcie.has_value());
  EXPECT_STREQ(pcie->name, "H100 PCIe");  // the longest match, not "H100"
  EXPECT_EQ(peak_tflops(*pcie, Precision::AMP_FP8), 1513);
  const auto a100 = find_datasheet("NVIDIA A100-SXM4-80GB");
  ASSERT_TRUE(a100.has_value());
  EXPECT_EQ(peak_tflops(*a100, Precision::AMP_FP8), 0);  // no FP8 tensor cores: no rate
  EXPECT_EQ(peak_tflops(*find_datasheet("Tesla T4"), Precision::TF32), 8.1);  // fp32 fallback
}

// The names the driver reports: each card gets its own row, not a shorter name's within it.
TEST(DeviceSpecs, DriverNamesFindTheirOwnRows) {
  for (const auto& [device, row] :
       {std::pair{"NVIDIA H200 NVL", "H200 NVL"}, std::pair{"NVIDIA H200", "H200"},
        std::pair{"NVIDIA GH200 480GB", "GH200"},
        std::pair{"NVIDIA A100 80GB PCIe", "A100 80GB PCIe"},
        std::pair{"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"},
        std::pair{"NVIDIA A100-PCIE-40GB", "A100"}, std::pair{"NVIDIA H100 80GB HBM3", "H100"},
        std::pair{"NVIDIA L4", "L4"}, std::pair{"NVIDIA L40S", "L40S"},
        std::pair{"Tesla T4", "T4"}}) {
    const auto d = find_datasheet(device);
    ASSERT_TRUE(d.has_value()) << device;
    EXPECT_STREQ(d->name, row) << device;
  }
  EXPECT_EQ(find_datasheet("NVIDIA H200 NVL")->bf16_tflops, 835);
  // A row names a whole word of the driver's name: an L40 (about 3x an L4's rates) or an A10G
  // has no row, rather than a row of another card (XH100: made up, a row's name ending a word).
  for (const char* device : {"NVIDIA L40", "NVIDIA A10G", "NVIDIA RTX A1000", "NVIDIA XH100"})
    EXPECT_FALSE(find_datasheet(device).has_value()) << device;
}

TEST(DeviceSpecs, Fp8NeedsComputeCapability89) {
  EXPECT_FALSE(has_tensor_cores(8, 0, Precision::AMP_FP8));
  EXPECT_FALSE(has_tensor_cores(8, 6, Precision::AMP_FP8));
  EXPECT_TRUE(has_tensor_cores(8, 9, Precision::AMP_FP8));  // Ada: L4, L40S, RTX 40xx
  EXPECT_TRUE(has_tensor_cores(9, 0, Precision::AMP_FP8));  // Hopper
  EXPECT_TRUE(has_tensor_cores(8, 0, Precision::AMP_BF16));
  DeviceInfo a100;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8;
  const auto why = unsupported_reason(Precision::AMP_FP8, Device::CUDA, a100);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "amp_fp8 needs compute capability 8.9 or newer, NVIDIA A100-SXM4-80GB is 8.0");
  EXPECT_FALSE(unsupported_reason(Precision::AMP_BF16, Device::CUDA, a100).has_value());
  EXPECT_FALSE(unsupported_reason(Precision::AMP_FP8, Device::CPU, a100).has_value());
  DeviceInfo h200;
  h200.cc_major = 9;
  EXPECT_FALSE(unsupported_reason(Precision::AMP_FP8, Device::CUDA, h200).has_value());
}

// Volta and Turing (7.x) have fp16 tensor cores, not TF32 or bf16 ones; fp32 has none anywhere.
TEST(DeviceSpecs, TensorCoresPerModeAndComputeCapability) {
  for (int minor : {0, 5}) {
    EXPECT_TRUE(has_tensor_cores(7, minor, Precision::AMP_FP16)) << "7." << minor;
    EXPECT_FALSE(has_tensor_cores(7, minor, Precision::AMP_BF16)) << "7." << minor;
    EXPECT_FALSE(has_tensor_cores(7, minor, Precision::TF32)) << "7." << minor;
  }
  EXPECT_FALSE(has_tensor_cores(6, 1, Precision::AMP_FP16));
  EXPECT_TRUE(has_tensor_cores(8, 0, Precision::TF32));
  EXPECT_FALSE(has_tensor_cores(9, 0, Precision::FP32));
}

}  // namespace
}  // namespace mpbench
