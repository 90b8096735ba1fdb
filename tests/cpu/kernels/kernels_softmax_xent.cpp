// softmax_xent: loss and accuracy against a double reference, the gradient against central
// differences, loss-scale folding, 16-bit gradients, ties, accumulation, stability, bad labels.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::compare;
using test::from_host_f32;
using test::random_nonzero;
using test::to_host_f32;

// Mean cross-entropy over rows, in double.
double mean_loss(const std::vector<double>& x, const std::vector<int>& y, int64_t cols) {
  const int64_t rows = static_cast<int64_t>(y.size());
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double mx = x[i * cols];
    for (int64_t j = 1; j < cols; ++j) mx = std::max(mx, x[i * cols + j]);
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(x[i * cols + j] - mx);
    total += std::log(s) + mx - x[i * cols + y[i]];
  }
  return total / rows;
}

class CpuSoftmaxXent : public test::CpuOpsTest {
 protected:
  float value(const Tensor& t) { return to_host_f32(*be, t)[0]; }
};

TEST_F(CpuSoftmaxXent, LossAndGradientMatchDoubleReference) {
  const int64_t rows = 6, cols = 10;
  auto xv = random_nonzero(rows * cols, 71, 4.0f);
  std::vector<int> y = {3, 0, 9, 5, 5, 1};
  Tensor logits = make(Shape{rows, cols}, DType::F32, xv);
  Tensor labels = make(Shape{rows}, DType::I32, {y.begin(), y.end()});
  Tensor dlogits = alloc.alloc(logits.shape, DType::F32, MemCategory::Activations);
  test::poison(*be, dlogits);
  Tensor loss = scalar(0), correct = scalar(0);
  be->softmax_xent(logits, labels, &dlogits, nullptr, loss, correct);

  std::vector<double> x(xv.begin(), xv.end());
  EXPECT_NEAR(value(loss), mean_loss(x, y, cols), 1e-6 * mean_loss(x, y, cols));
  int expected_hits = 0;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t arg = 0;
    for (int64_t j = 1; j < cols; ++j)
      if (xv[i * cols + j] > xv[i * cols + arg]) arg = j;
    expected_hits += arg == y[i];
  }
  EXPECT_EQ(value(correct), static_cast<float>(expected_hits));

  const double h = 1e-5;
  std::vector<float> fd(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    auto up = x, down = x;
    up[i] += h;
    down[i] -= h;
    fd[i] = static_cast<float>((mean_loss(up, y, cols) - mean_loss(down, y, cols)) / (2 * h));
  }
  auto r = compare(to_host_f32(*be, dlogits), fd, 1e-5);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(CpuSoftmaxXent, GradScaleFoldsIntoTheGradientAnd16BitRoundsOnce) {
  const int64_t rows = 5, cols = 7;
  auto xv = random_nonzero(rows * cols, 72, 3.0f);
  Tensor logits = make(Shape{rows, cols}, DType::F32, xv);
  Tensor labels = make(Shape{rows}, DType::I32, {0, 6, 2, 2, 4});
  Tensor g1 = make(Shape{rows, cols}, DType::F32, std::vector<float>(rows * cols, 0));
  Tensor loss = scalar(0), correct = scalar(0);
  be->softmax_xent(logits, labels, &g1, nullptr, loss, correct);
  const auto base = to_host_f32(*be, g1);

  Tensor scale = scalar(65536.0f);
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor gs = alloc.alloc(logits.shape, dt, MemCategory::Activations);
    test::poison(*be, gs);
    be->softmax_xent(logits, labels, &gs, &scale, loss, correct);
    auto got = to_host_f32(*be, gs);
    for (size_t i = 0; i < got.size(); ++i) {
      const float want = base[i] * 65536.0f;  // exact: a power of two
      const float rounded = dt == DType::F16    ? f16_to_f32(f32_to_f16(want))
                            : dt == DType::BF16 ? bf16_to_f32(f32_to_bf16(want))
                                                : want;
      EXPECT_EQ(got[i], rounded) << "element " << i;
    }
  }
}

// Data parallel's global batch: grad_rows divides the gradient (a rank's share of one process's)
// and leaves the loss the mean over this call's rows.
TEST_F(CpuSoftmaxXent, GradRowsDivideTheGradientAndNotTheLoss) {
  const int64_t rows = 4, cols = 5;
  auto xv = random_nonzero(rows * cols, 73, 3.0f);
  Tensor logits = make(Shape{rows, cols}, DType::F32, xv);
  Tensor labels = make(Shape{rows}, DType::I32, {1, 4, 0, 2});
  Tensor g1 = alloc.alloc(logits.shape, DType::F32, MemCategory::Activations);
  Tensor loss1 = scalar(0), correct = scalar(0);
  be->softmax_xent(logits, labels, &g1, nullptr, loss1, correct);
  Tensor scale = scalar(256.0f), loss2 = scalar(0);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor g2 = alloc.alloc(logits.shape, dt, MemCategory::Activations);
    test::poison(*be, g2);
    be->fill(loss2, 0.0f);
    be->softmax_xent(logits, labels, &g2, &scale, loss2, correct, 2 * rows);
    EXPECT_EQ(value(loss2), value(loss1));
    const auto base = to_host_f32(*be, g1), got = to_host_f32(*be, g2);
    for (size_t i = 0; i < got.size(); ++i) {
      const float want = base[i] * 128.0f;  // exact: powers of two
      EXPECT_EQ(got[i], dt == DType::BF16 ? bf16_to_f32(f32_to_bf16(want)) : want) << i;
    }
  }
  EXPECT_THROW(be->softmax_xent(logits, labels, &g1, nullptr, loss1, correct, rows - 1), Error);
}

TEST_F(CpuSoftmaxXent, AccumulatesAndBreaksArgmaxTiesToTheLowestIndex) {
  // Row 0: all equal -> argmax 0 (label 0). Row 1: tie between 1 and 3 -> 1 (label 1). Row 2:
  // clear max at 2 (label 2). All hits; taking the last of a tie would miss rows 0 and 1.
  Tensor logits = make(Shape{3, 4}, DType::F32, {1, 1, 1, 1, 0, 5, 2, 5, -1, 0, 3, 2});
  Tensor labels = make(Shape{3}, DType::I32, {0, 1, 2});
  Tensor loss = scalar(0.5f), correct = scalar(10.0f);
  be->softmax_xent(logits, labels, nullptr, nullptr, loss, correct);
  EXPECT_EQ(value(correct), 13.0f);
  const std::vector<double> x = {1, 1, 1, 1, 0, 5, 2, 5, -1, 0, 3, 2};
  const double l = mean_loss(x, {0, 1, 2}, 4);
  EXPECT_NEAR(value(loss), 0.5 + l, 1e-6);
  be->softmax_xent(logits, labels, nullptr, nullptr, loss, correct);  // += again
  EXPECT_NEAR(value(loss), 0.5 + 2 * l, 2e-6);
  EXPECT_EQ(value(correct), 16.0f);
  EXPECT_NEAR(l,
              (std::log(4.0) + (std::log(2 + std::exp(-5.0) + std::exp(-3.0))) +
               (std::log(1 + std::exp(-4.0) + std::exp(-3.0) + std::exp(-1.0)))) /
                  3,
              1e-12);  // the reference itself, by hand
}

TEST_F(CpuSoftmaxXent, LargeLogitsStayFinite) {
  // Without max-subtraction exp(1e4) overflows fp32.
  Tensor logits = make(Shape{2, 3}, DType::F32, {1e4f, 0.0f, -1e4f, 300.0f, 301.0f, 299.0f});
  Tensor labels = make(Shape{2}, DType::I32, {1, 1});
  Tensor d = alloc.alloc(logits.shape, DType::F32, MemCategory::Activations);
  Tensor loss = scalar(0), correct = scalar(0);
  be->softmax_xent(logits, labels, &d, nullptr, loss, correct);
  const std::vector<double> x = {1e4, 0, -1e4, 300, 301, 299};
  EXPECT_NEAR(value(loss), mean_loss(x, {1, 1}, 3), 1e-3);
  for (float g : to_host_f32(*be, d)) EXPECT_TRUE(std::isfinite(g));
  EXPECT_EQ(value(correct), 1.0f);
}

TEST_F(CpuSoftmaxXent, RejectsBadLabelsAndShapes) {
  Tensor logits = make(Shape{2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
  Tensor loss = scalar(0), correct = scalar(0);
  Tensor bad = make(Shape{2}, DType::I32, {0, 3});
  EXPECT_THROW(be->softmax_xent(logits, bad, nullptr, nullptr, loss, correct), Error);
  Tensor neg = make(Shape{2}, DType::I32, {-1, 0});
  EXPECT_THROW(be->softmax_xent(logits, neg, nullptr, nullptr, loss, correct), Error);
  Tensor short_labels = make(Shape{1}, DType::I32, {0});
  EXPECT_THROW(be->softmax_xent(logits, short_labels, nullptr, nullptr, loss, correct), Error);
  Tensor labels = make(Shape{2}, DType::I32, {0, 1});
  Tensor d_wrong = make(Shape{3, 2}, DType::F32, std::vector<float>(6, 0));
  EXPECT_THROW(be->softmax_xent(logits, labels, &d_wrong, nullptr, loss, correct), Error);
  Tensor logits16 = make(Shape{2, 3}, DType::F16, {1, 2, 3, 4, 5, 6});
  EXPECT_THROW(be->softmax_xent(logits16, labels, nullptr, nullptr, loss, correct), Error);
  // A 16-bit gradient in the logits' own bytes: rows written over rows not yet read.
  Tensor d_over = logits.viewed_as(Shape{2, 3}, DType::BF16);
  EXPECT_THROW(be->softmax_xent(logits, labels, &d_over, nullptr, loss, correct), Error);
  EXPECT_EQ(value(loss), 0.0f);  // nothing accumulated by the rejected calls
}

}  // namespace
}  // namespace mpbench
