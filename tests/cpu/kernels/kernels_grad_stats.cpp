// unscale_check_norm: unscaling, the inf/NaN flag, and the L2 norm against double.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

class CpuGradStats : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_reference_backend();
  TrackingAllocator alloc{*be};

  Tensor make(const std::vector<float>& v) {
    Tensor t =
        alloc.alloc(Shape{static_cast<int64_t>(v.size())}, DType::F32, MemCategory::Gradients);
    be->upload(v.data(), t);
    return t;
  }
  float value(const Tensor& t) { return test::to_host_f32(*be, t)[0]; }
  Tensor found = make({NAN}), norm = make({NAN});
};

TEST_F(CpuGradStats, UnscalesAndTakesTheNormOfTheUnscaledValues) {
  // Odd length, so the tail after the unrolled part is covered too.
  auto v = test::random_nonzero(1001, 81);
  std::vector<float> scaled(v.size());
  for (size_t i = 0; i < v.size(); ++i) scaled[i] = v[i] * 1024.0f;  // exact: a power of two
  Tensor g = make(scaled);
  Tensor scale = make({1024.0f});
  be->unscale_check_norm(g, &scale, found, norm);
  EXPECT_EQ(test::to_host_f32(*be, g), v);
  double ss = 0;
  for (float x : v) ss += static_cast<double>(x) * x;
  EXPECT_EQ(value(found), 0.0f);
  EXPECT_NEAR(value(norm), std::sqrt(ss), 1e-6 * std::sqrt(ss));
}

TEST_F(CpuGradStats, WithoutScaleLeavesGradientsAlone) {
  Tensor g = make({3.0f, -4.0f, 12.0f});
  be->unscale_check_norm(g, nullptr, found, norm);
  EXPECT_EQ(test::to_host_f32(*be, g), (std::vector<float>{3.0f, -4.0f, 12.0f}));
  EXPECT_EQ(value(norm), 13.0f);
  EXPECT_EQ(value(found), 0.0f);
}

TEST_F(CpuGradStats, FlagsInfAndNaNAnywhere) {
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    for (size_t pos : {0, 5, 6}) {  // first, inside the unrolled body, in the tail
      SCOPED_TRACE(::testing::Message() << bad << " at " << pos);
      std::vector<float> v(7, 0.5f);
      v[pos] = bad;
      Tensor g = make(v);
      Tensor scale = make({2.0f});
      be->unscale_check_norm(g, &scale, found, norm);
      EXPECT_EQ(value(found), 1.0f);
      EXPECT_FALSE(std::isfinite(value(norm)));
    }
  }
}

TEST_F(CpuGradStats, FiniteButHugeGradientsAreNotInf) {
  // Squares of 1e30 overflow fp32, but the gradients are finite: no false positive.
  Tensor g = make({1e30f, -1e30f, 1e30f, 1e30f});
  be->unscale_check_norm(g, nullptr, found, norm);
  EXPECT_EQ(value(found), 0.0f);
  EXPECT_NEAR(value(norm), 2e30f, 1e24f);
}

// The check reads the gradients as scaled, before the unscale, as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ does: an unscale that overflows a finite gradient
// (scale < 1), or a scale of 0, is no inf of the backward. The step goes on with what the unscale
// gave, and the norm says so.
TEST_F(CpuGradStats, TheCheckIsOnTheScaledGradients) {
  Tensor g = make({FLT_MAX, 1.0f, -2.0f});
  Tensor half = make({0.5f});
  be->unscale_check_norm(g, &half, found, norm);
  EXPECT_EQ(value(found), 0.0f);
  EXPECT_EQ(test::to_host_f32(*be, g), (std::vector<float>{INFINITY, 2.0f, -4.0f}));
  EXPECT_EQ(value(norm), INFINITY);

  Tensor g0 = make({0.0f, 3.0f, -1.0f});
  Tensor zero = make({0.0f});
  be->unscale_check_norm(g0, &zero, found, norm);
  EXPECT_EQ(value(found), 0.0f);
  const std::vector<float> u = test::to_host_f32(*be, g0);
  EXPECT_TRUE(std::isnan(u[0])) << u[0];  // 0 * inf
  EXPECT_EQ(u[1], INFINITY);
  EXPECT_EQ(u[2], -INFINITY);

  // An inf that the unscale would leave inf, or a NaN, is still found at any scale.
  for (float bad : {INFINITY, NAN}) {
    Tensor gb = make({1.0f, bad});
    be->unscale_check_norm(gb, &zero, found, norm);
    EXPECT_EQ(value(found), 1.0f) << bad;
  }
}

TEST_F(CpuGradStats, OverwritesAStaleFlag) {
  Tensor g = make({1.0f, 2.0f});
  be->fill(found, 1.0f);
  be->unscale_check_norm(g, nullptr, found, norm);
  EXPECT_EQ(value(found), 0.0f);
  Tensor g16 = alloc.alloc(Shape{2}, DType::F16, MemCategory::Gradients);
  EXPECT_THROW(be->unscale_check_norm(g16, nullptr, found, norm), Error);
}

}  // namespace
}  // namespace mpbench
