// The native backend's inlined float functions (kernels/onednn/vector_math.h) against libm's, at
// the accuracy their comments promise: the softmax and GELU parity tests compare whole rows at a
// tolerance that a wrong polynomial coefficient or clamp still passes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/onednn/vector_math.h"

namespace mpbench::onednn {
namespace {

// Units in the last place between a and b, both finite floats of one sign.
double ulps(float a, float b) {
  const float spacing =
      std::nextafter(std::fabs(b), std::numeric_limits<float>::infinity()) - std::fabs(b);
  return std::fabs(static_cast<double>(a) - b) / spacing;
}

TEST(VectorMath, ExpIsWithinTwoUlpOfLibmDownToItsClamp) {
  double worst = 0;
  float worst_x = 0;
  // Every 1/4096 from -87 to 0: each reduction interval (ln 2 wide) many times over.
  for (int i = 0; i <= 87 * 4096; ++i) {
    const float x = -static_cast<float>(i) / 4096.0f;
    const double e = ulps(exp_nonpositive(x), std::exp(x));
    if (e > worst) worst = e, worst_x = x;
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
  // Near the clamp the result is still exp(x) itself, not exp(-87) or 0.
  for (float x : {-86.0f, -86.9f, -87.0f})
    EXPECT_LE(ulps(exp_nonpositive(x), std::exp(x)), 2.0) << "at x = " << x;
}

TEST(VectorMath, ExpBelowItsRangeIsZeroAndNanStaysNan) {
  EXPECT_EQ(exp_nonpositive(-87.5f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1e30f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VectorMath, TanhIsWithinItsAbsoluteBoundOfLibm) {
  double worst = 0;
  for (int i = -20 * 1024; i <= 20 * 1024; ++i) {
    const float x = static_cast<float>(i) / 1024.0f;
    worst = std::max(worst, std::fabs(static_cast<double>(tanh_approx(x)) - std::tanh(x)));
    EXPECT_EQ(std::signbit(tanh_approx(x)), std::signbit(x)) << "at x = " << x;
  }
  EXPECT_LE(worst, 2e-7);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tanh_approx(inf), 1.0f);
  EXPECT_EQ(tanh_approx(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(tanh_approx(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace mpbench::onednn
