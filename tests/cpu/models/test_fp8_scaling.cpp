// The delayed-scaling state's layout (models/fp8_scaling.h): every tensor's scale and scale_inv
// 16 bytes from its neighbour's, which cuBLASLt's FP8 GEMMs are given as pointers, and each
// tensor scaled by its own history through the padding.
#include <cstdint>

#include <gtest/gtest.h>

#include "kernels/fp8.h"
#include "models/fp8_scaling.h"
#include "test_util.h"

namespace mpbench {
namespace {

class Fp8ScalingLayout : public test::CpuOpsTest {
 protected:
  float read(const Tensor& t) { return test::to_host_f32(*be, t)[0]; }
};

TEST_F(Fp8ScalingLayout, ScalesSitSixteenBytesApartAndFollowTheirOwnHistory) {
  Fp8Scaling f8;
  const int x = f8.declare("fc1.x", DType::F8E4M3), w = f8.declare("fc1.w", DType::F8E4M3);
  const int dy = f8.declare("fc1.dy", DType::F8E5M2), x2 = f8.declare("fc2.x", DType::F8E4M3);
  DelayedScalingRecipe r;
  r.amax_history_len = 2;
  f8.allocate(alloc, *be, r);
  auto addr = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data); };
  for (int i : {x, w, dy, x2}) {
    const Fp8Scaling::Scales s = f8.scales(i);
    const Fp8Scaling::Group& g = f8.groups()[f8.group_of(i)];
    SCOPED_TRACE(f8.name(i));
    EXPECT_EQ(f8.row_of(i) % Fp8Scaling::kSlot, 0);
    EXPECT_EQ((addr(s.scale) - addr(g.scale)) % 16, 0u);
    EXPECT_EQ((addr(s.scale_inv) - addr(g.scale_inv)) % 16, 0u);
    EXPECT_EQ(read(s.scale_inv), 1.0f);
  }
  // Distinct amaxes recorded into each tensor's newest slot: each scale follows its own.
  const float amax[] = {2.0f, 8.0f, 4.0f, 0.5f};
  const int tensors[] = {x, w, dy, x2};
  for (int j = 0; j < 4; ++j) {
    Tensor slot = f8.scales(tensors[j]).amax;
    be->fill(slot, amax[j]);
  }
  // The newest slots, one row per group (what data parallel maxes): each tensor's at its row.
  for (int j = 0; j < 4; ++j) {
    const int i = tensors[j];
    EXPECT_EQ(test::to_host_f32(*be, f8.groups()[f8.group_of(i)].newest())[f8.row_of(i)], amax[j])
        << f8.name(i);
  }
  f8.update(*be);
  for (int j = 0; j < 4; ++j) {
    const int i = tensors[j];
    SCOPED_TRACE(f8.name(i));
    const float want = fp8_scaled_max(f8.format(i), r.margin) / amax[j];
    EXPECT_EQ(read(f8.scales(i).scale), want);
    EXPECT_EQ(read(f8.scales(i).scale_inv), 1.0f / want);
  }
}

}  // namespace
}  // namespace mpbench
