// The precision table's tensor-core rule: misaligned_dims, the one check inspect (and explain)
// use, by mode.
#include <gtest/gtest.h>

#include "kernels/precision.h"

namespace mpbench {
namespace {

TEST(Precision, TensorCoreMultiplesByMode) {
  EXPECT_EQ(precision_info(Precision::FP32).tensor_core_multiple, 0);
  EXPECT_EQ(precision_info(Precision::TF32).tensor_core_multiple, 4);
  EXPECT_EQ(precision_info(Precision::AMP_FP16).tensor_core_multiple, 8);
  EXPECT_EQ(precision_info(Precision::AMP_BF16).tensor_core_multiple, 8);
}

TEST(Precision, MisalignedDimsNamesEachSizeOffTheMultiple) {
  const std::vector<NamedDim> dims = {{"M", 16384}, {"N", 50257}, {"K", 12}};
  EXPECT_TRUE(misaligned_dims(Precision::FP32, dims).empty());  // no tensor cores at all
  EXPECT_EQ(misaligned_dims(Precision::TF32, dims), std::vector<std::string>{"N=50257"});
  EXPECT_EQ(misaligned_dims(Precision::AMP_BF16, dims),
            (std::vector<std::string>{"N=50257", "K=12"}));
  EXPECT_EQ(misaligned_dims(Precision::AMP_FP16, {{"C_in", 3}, {"C_out", 64}}),
            std::vector<std::string>{"C_in=3"});
  EXPECT_TRUE(misaligned_dims(Precision::AMP_FP16, {{"N", 1000}, {"K", 2048}}).empty());
}

}  // namespace
}  // namespace mpbench
