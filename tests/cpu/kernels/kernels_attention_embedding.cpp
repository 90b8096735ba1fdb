// attention_softmax_* and embedding_* against double-precision references written here: values,
// gradients by central differences (with and without the causal mask, non-unit scale), 16-bit
// dtypes rounding the fp32 result once, aliasing, bad tokens and shapes; and one composed check,
// a single-head attention built from the GEMM and softmax ops whose gradient w.r.t. its input
// matches central differences of the whole attention in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "test_util.h"

namespace mpbench {
namespace {

using test::to_double;
using test::to_float;

using test::compare;
using test::random_nonzero;
using test::to_host_f32;

using test::rounded;

// softmax(scale * x) over each row of each (s, s) matrix; under the causal mask row i keeps
// columns 0..i and the rest are 0.
std::vector<double> softmax_ref(const std::vector<double>& x, int64_t batch, int64_t s,
                                double scale, bool causal) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t r = 0; r < batch * s; ++r) {
    const int64_t n = causal ? r % s + 1 : s;
    const double* xr = x.data() + r * s;
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, scale * xr[j]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(scale * xr[j] - mx);
    for (int64_t j = 0; j < n; ++j) y[r * s + j] = std::exp(scale * xr[j] - mx) / sum;
  }
  return y;
}

class CpuAttention : public test::CpuOpsTest {};
using CpuEmbedding = CpuAttention;

TEST_F(CpuAttention, ForwardMatchesDoubleReferenceAndMasksExactly) {
  const int64_t batch = 3, s = 6;
  const float scale = 0.37f;
  auto xv = random_nonzero(batch * s * s, 201, 5.0f);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Tensor x = make(Shape{batch, s, s}, DType::F32, xv);
    Tensor y = poisoned(Shape{batch, s, s}, DType::F32);
    be->attention_softmax_forward(x, scale, causal, y);
    auto got = to_host_f32(*be, y);
    auto ref = softmax_ref(to_double(xv), batch, s, scale, causal);
    auto r = compare(got, to_float(ref), 1e-6);
    EXPECT_TRUE(r.ok) << r.message;
    for (int64_t row = 0; row < batch * s; ++row) {
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        const float v = got[row * s + j];
        sum += v;
        if (causal && j > row % s) {
          EXPECT_EQ(v, 0.0f) << "masked (" << row << ", " << j << ")";
        } else {
          EXPECT_GT(v, 0.0f) << "(" << row << ", " << j << ")";
        }
      }
      EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << row;
    }
  }
}

// Masked scores are never read: even inf or NaN there leaves the visible part of the row intact.
TEST_F(CpuAttention, MaskedScoresDoNotLeakAndLargeScoresStayFinite) {
  const int64_t s = 4;
  std::vector<float> xv = {1e4f, 0, 0, 0, 2e4f, 1e4f, 0, 0, -3e4f, 3e4f, 3e4f, 0, 1, 2, 3, 4};
  std::vector<float> poisoned_v = xv;
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = i + 1; j < s; ++j) poisoned_v[i * s + j] = j % 2 ? INFINITY : NAN;
  Tensor x = make(Shape{1, s, s}, DType::F32, xv);
  Tensor xp = make(Shape{1, s, s}, DType::F32, poisoned_v);
  Tensor y = poisoned(Shape{1, s, s}, DType::F32), yp = poisoned(Shape{1, s, s}, DType::F32);
  be->attention_softmax_forward(x, 1.0f, true, y);
  be->attention_softmax_forward(xp, 1.0f, true, yp);
  auto got = to_host_f32(*be, y);
  EXPECT_EQ(to_host_f32(*be, yp), got);
  auto ref = softmax_ref(to_double(xv), 1, s, 1.0, true);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(std::isfinite(got[i])) << i;
    EXPECT_NEAR(got[i], ref[i], 1e-6) << i;
  }
  EXPECT_EQ(got[1 * s + 1], 0.0f);  // exp(-1e4) underflows to exactly 0 (not masked)
  EXPECT_EQ(got[2 * s + 1], 0.5f);
}

// L = sum(W o softmax(scale * x)); with dy = W the backward must give dL/dx.
TEST_F(CpuAttention, BackwardMatchesFiniteDifferences) {
  const int64_t batch = 2, s = 5;
  for (bool causal : {false, true}) {
    for (float scale : {1.0f, 0.6f, -1.7f}) {
      SCOPED_TRACE(::testing::Message() << (causal ? "causal" : "full") << " scale " << scale);
      auto xv = random_nonzero(batch * s * s, 211, 2.0f);
      auto wv = random_nonzero(batch * s * s, 212);
      Tensor x = make(Shape{batch, s, s}, DType::F32, xv);
      Tensor y = poisoned(Shape{batch, s, s}, DType::F32);
      be->attention_softmax_forward(x, scale, causal, y);
      Tensor dy = make(Shape{batch, s, s}, DType::F32, wv);
      Tensor dx = poisoned(Shape{batch, s, s}, DType::F32);
      be->attention_softmax_backward(dy, y, scale, dx);

      auto loss = [&](const std::vector<double>& p) {
        auto yr = softmax_ref(p, batch, s, scale, causal);
        double l = 0;
        for (size_t i = 0; i < yr.size(); ++i) l += wv[i] * yr[i];
        return l;
      };
      auto fd = test::central_differences(loss, to_double(xv));
      auto got = to_host_f32(*be, dx);
      auto r = compare(got, fd, 1e-5);
      EXPECT_TRUE(r.ok) << r.message;
      if (causal) {
        for (int64_t row = 0; row < batch * s; ++row)
          for (int64_t j = row % s + 1; j < s; ++j) {
            // +0 as on every backend, whatever the scale's sign (not scale * 0 * (dy - dot)).
            EXPECT_EQ(got[row * s + j], 0.0f) << "masked (" << row << ", " << j << ")";
            EXPECT_FALSE(std::signbit(got[row * s + j])) << "masked (" << row << ", " << j << ")";
          }
      }
    }
  }
}

// 16-bit scores, probabilities and gradients: the fp32 computation on the same decoded values,
// rounded once; dx may alias dy.
TEST_F(CpuAttention, SixteenBitTensorsRoundTheFp32ResultOnceAndDxMayAliasDy) {
  const int64_t batch = 4, s = 9;
  const float scale = 0.125f;
  for (DType xt : {DType::F32, DType::F16, DType::BF16}) {
    for (DType yt : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(::testing::Message() << "x " << dtype_name(xt) << ", y " << dtype_name(yt));
      Tensor x = make(Shape{batch, s, s}, xt, random_nonzero(batch * s * s, 221, 20.0f));
      Tensor x32 = make(Shape{batch, s, s}, DType::F32, to_host_f32(*be, x));
      Tensor y = poisoned(Shape{batch, s, s}, yt), y32 = poisoned(Shape{batch, s, s}, DType::F32);
      be->attention_softmax_forward(x, scale, true, y);
      be->attention_softmax_forward(x32, scale, true, y32);
      auto got = to_host_f32(*be, y), full = to_host_f32(*be, y32);
      EXPECT_EQ(got, rounded(yt, full));
      auto r = compare(got, full, test::tolerance_for(yt));
      EXPECT_TRUE(r.ok) << r.message;

      // dy and dx in x's dtype (the score gradient), y in its own: against fp32 on the same values.
      Tensor dy = make(Shape{batch, s, s}, xt, random_nonzero(batch * s * s, 222));
      Tensor dy32 = make(Shape{batch, s, s}, DType::F32, to_host_f32(*be, dy));
      Tensor yv32 = make(Shape{batch, s, s}, DType::F32, got);
      Tensor dx32 = poisoned(Shape{batch, s, s}, DType::F32);
      be->attention_softmax_backward(dy32, yv32, scale, dx32);
      be->attention_softmax_backward(dy, y, scale, dy);  // in place
      auto gdx = to_host_f32(*be, dy), fdx = to_host_f32(*be, dx32);
      EXPECT_EQ(gdx, rounded(xt, fdx));
      auto rx = compare(gdx, fdx, test::tolerance_for(xt));
      EXPECT_TRUE(rx.ok) << rx.message;
    }
  }
}

TEST_F(CpuAttention, RejectsBadShapes) {
  Tensor x = make(Shape{2, 3, 3}, DType::F32, random_nonzero(18, 231));
  Tensor y = poisoned(Shape{2, 3, 3}, DType::F32);
  be->attention_softmax_forward(x, 1.0f, false, y);  // the valid call works
  Tensor not_square = poisoned(Shape{2, 3, 4}, DType::F32);
  Tensor rank2 = poisoned(Shape{3, 3}, DType::F32);
  Tensor other_batch = poisoned(Shape{1, 3, 3}, DType::F32);
  Tensor ints = poisoned(Shape{2, 3, 3}, DType::I32);
  EXPECT_THROW(be->attention_softmax_forward(not_square, 1.0f, false, not_square), Error);
  EXPECT_THROW(be->attention_softmax_forward(rank2, 1.0f, false, rank2), Error);
  EXPECT_THROW(be->attention_softmax_forward(x, 1.0f, false, other_batch), Error);
  EXPECT_THROW(be->attention_softmax_forward(ints, 1.0f, false, y), Error);
  Tensor x_as16 = x;
  x_as16.dtype = DType::F16;
  EXPECT_THROW(be->attention_softmax_forward(x, 1.0f, false, x_as16), Error);  // y over x
  Tensor dx = poisoned(Shape{2, 3, 3}, DType::F32);
  be->attention_softmax_backward(x, y, 1.0f, dx);
  EXPECT_THROW(be->attention_softmax_backward(x, other_batch, 1.0f, dx), Error);
  EXPECT_THROW(be->attention_softmax_backward(x, y, 1.0f, other_batch), Error);
  EXPECT_THROW(be->attention_softmax_backward(not_square, not_square, 1.0f, not_square), Error);
}

// O = softmax(mask(X X^T / sqrt(D))) X: Q = K = V = X, scores and AV through the GEMM op, the
// probabilities through attention_softmax. The backward is the ops' own: dP = dO V^T,
// dS = softmax backward, dX = dS K / sqrt(D) + dS^T Q / sqrt(D) + P^T dO. Checked against central
// differences of L = sum(W o O) computed wholly in double.
TEST_F(CpuAttention, SingleHeadAttentionGradientMatchesFiniteDifferences) {
  const int64_t s = 6, d = 4;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  auto xv = random_nonzero(s * d, 241, 1.5f), wv = random_nonzero(s * d, 242);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Tensor x = make(Shape{1, s, d}, DType::F32, xv);
    Tensor scores = poisoned(Shape{1, s, s}, DType::F32);
    GemmDesc qk;
    qk.trans_b = true;
    qk.alpha = alpha;
    be->gemm(qk, x, x, scores);
    Tensor p = poisoned(Shape{1, s, s}, DType::F32);
    be->attention_softmax_forward(scores, 1.0f, causal, p);
    Tensor o = poisoned(Shape{1, s, d}, DType::F32);
    be->gemm(GemmDesc{}, p, x, o);

    Tensor d_o = make(Shape{1, s, d}, DType::F32, wv);
    Tensor dp = poisoned(Shape{1, s, s}, DType::F32);
    GemmDesc dp_desc;
    dp_desc.trans_b = true;
    be->gemm(dp_desc, d_o, x, dp);
    be->attention_softmax_backward(dp, p, 1.0f, dp);  // dS in place of dP
    Tensor dx = poisoned(Shape{1, s, d}, DType::F32);
    GemmDesc dq;  // through Q: alpha dS K
    dq.alpha = alpha;
    be->gemm(dq, dp, x, dx);
    GemmDesc dk;  // through K: alpha dS^T Q
    dk.trans_a = true;
    dk.alpha = alpha;
    dk.beta = 1.0f;
    be->gemm(dk, dp, x, dx);
    GemmDesc dv;  // through V: P^T dO
    dv.trans_a = true;
    dv.beta = 1.0f;
    be->gemm(dv, p, d_o, dx);

    auto attention = [&](const std::vector<double>& xd) {
      std::vector<double> sc(s * s);
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j) {
          double v = 0;
          for (int64_t k = 0; k < d; ++k) v += xd[i * d + k] * xd[j * d + k];
          sc[i * s + j] = v / std::sqrt(static_cast<double>(d));
        }
      auto pr = softmax_ref(sc, 1, s, 1.0, causal);
      std::vector<double> out(s * d, 0.0);
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j)
          for (int64_t k = 0; k < d; ++k) out[i * d + k] += pr[i * s + j] * xd[j * d + k];
      return out;
    };
    auto ref_o = attention(to_double(xv));
    auto ro = compare(to_host_f32(*be, o), to_float(ref_o), 1e-5);
    EXPECT_TRUE(ro.ok) << "forward: " << ro.message;
    auto loss = [&](const std::vector<double>& xd) {
      auto out = attention(xd);
      double l = 0;
      for (size_t i = 0; i < out.size(); ++i) l += wv[i] * out[i];
      return l;
    };
    auto fd = test::central_differences(loss, to_double(xv));
    auto r = compare(to_host_f32(*be, dx), fd, 1e-5);
    EXPECT_TRUE(r.ok) << "dX: " << r.message;
  }
}

// ---- embedding ----------------------------------------------------------------------------------

constexpr int64_t kB = 2, kS = 3, kV = 6, kP = 5, kD = 4;
// Token 4 three times, 1 twice; tokens 2, 3, 5 and positions 3, 4 unused.
const std::vector<float> kTokens = {1, 4, 1, 4, 4, 0};

TEST_F(CpuEmbedding, ForwardAddsTokenAndPositionRows) {
  auto tv = random_nonzero(kV * kD, 301), pv = random_nonzero(kP * kD, 302);
  Tensor tokens = make(Shape{kB, kS}, DType::I32, kTokens);
  Tensor tok = make(Shape{kV, kD}, DType::F32, tv), pos = make(Shape{kP, kD}, DType::F32, pv);
  std::vector<float> want(kB * kS * kD);
  for (int64_t i = 0; i < kB * kS; ++i)
    for (int64_t j = 0; j < kD; ++j)
      want[i * kD + j] = tv[static_cast<int64_t>(kTokens[i]) * kD + j] + pv[(i % kS) * kD + j];
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor y = poisoned(Shape{kB * kS, kD}, dt);
    be->embedding_forward(tokens, tok, pos, y);
    auto got = to_host_f32(*be, y);
    EXPECT_EQ(got, rounded(dt, want));  // one fp32 add, one rounding
    auto r = compare(got, want, test::tolerance_for(dt));
    EXPECT_TRUE(r.ok) << r.message;
  }
  Tensor y3 = poisoned(Shape{kB, kS, kD}, DType::F32);  // (B, S, D) is the same memory
  be->embedding_forward(tokens, tok, pos, y3);
  EXPECT_EQ(to_host_f32(*be, y3), want);
}

// L = sum(W o embed(tok_emb, pos_emb)); with dy = W the backward gives dL/dtok_emb, dL/dpos_emb.
TEST_F(CpuEmbedding, BackwardMatchesFiniteDifferencesWithRepeatedTokens) {
  auto tv = random_nonzero(kV * kD, 311), pv = random_nonzero(kP * kD, 312);
  auto wv = random_nonzero(kB * kS * kD, 313);
  Tensor tokens = make(Shape{kB, kS}, DType::I32, kTokens);
  Tensor dy = make(Shape{kB * kS, kD}, DType::F32, wv);
  Tensor dtok = poisoned(Shape{kV, kD}, DType::F32), dpos = poisoned(Shape{kP, kD}, DType::F32);
  be->embedding_backward(tokens, dy, dtok, dpos);

  std::vector<double> params = to_double(tv);
  params.insert(params.end(), pv.begin(), pv.end());
  auto loss = [&](const std::vector<double>& p) {
    double l = 0;
    for (int64_t i = 0; i < kB * kS; ++i)
      for (int64_t j = 0; j < kD; ++j) {
        const double y =
            p[static_cast<int64_t>(kTokens[i]) * kD + j] + p[kV * kD + (i % kS) * kD + j];
        l += wv[i * kD + j] * y;
      }
    return l;
  };
  auto fd = test::central_differences(loss, params);
  auto got = to_host_f32(*be, dtok);
  auto gp = to_host_f32(*be, dpos);
  got.insert(got.end(), gp.begin(), gp.end());
  auto r = compare(got, fd, 1e-5);
  EXPECT_TRUE(r.ok) << r.message;
  for (int64_t row : {2, 3, 5})
    for (int64_t j = 0; j < kD; ++j) EXPECT_EQ(got[row * kD + j], 0.0f) << "token row " << row;
  for (int64_t row : {3, 4})
    for (int64_t j = 0; j < kD; ++j) EXPECT_EQ(gp[row * kD + j], 0.0f) << "position row " << row;
}

// A table tied to the head: the token sums are added to the head's dW already in dtok_emb; the
// position table is still overwritten.
TEST_F(CpuEmbedding, AddToTokAddsTheTokenSumsAndOverwritesPositions) {
  auto wv = random_nonzero(kB * kS * kD, 321), held = random_nonzero(kV * kD, 322);
  Tensor tokens = make(Shape{kB, kS}, DType::I32, kTokens);
  Tensor dy = make(Shape{kB * kS, kD}, DType::F32, wv);
  Tensor fresh = poisoned(Shape{kV, kD}, DType::F32), dpos = poisoned(Shape{kP, kD}, DType::F32);
  be->embedding_backward(tokens, dy, fresh, dpos);
  const auto sums = to_host_f32(*be, fresh), pos = to_host_f32(*be, dpos);
  Tensor dtok = make(Shape{kV, kD}, DType::F32, held);
  Tensor dpos2 = poisoned(Shape{kP, kD}, DType::F32);
  be->embedding_backward(tokens, dy, dtok, dpos2, /*add_to_tok=*/true);
  std::vector<float> want(held.size());
  for (size_t i = 0; i < held.size(); ++i) want[i] = held[i] + sums[i];
  EXPECT_EQ(to_host_f32(*be, dtok), want);
  EXPECT_EQ(to_host_f32(*be, dpos2), pos);
}

TEST_F(CpuEmbedding, SixteenBitDySumsInFp32) {
  // Token 7 appears 200 times: a 16-bit running sum would drift; the fp32 sums must not.
  const int64_t b = 4, s = 50, v = 9, d = 3;
  std::vector<float> tv(b * s);
  for (int64_t i = 0; i < b * s; ++i) tv[i] = i % 5 == 0 ? 2.0f : 7.0f;
  Tensor tokens = make(Shape{b, s}, DType::I32, tv);
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor dy = make(Shape{b * s, d}, dt, random_nonzero(b * s * d, 321));
    auto dyv = to_host_f32(*be, dy);
    Tensor dtok = poisoned(Shape{v, d}, DType::F32), dpos = poisoned(Shape{s, d}, DType::F32);
    be->embedding_backward(tokens, dy, dtok, dpos);
    std::vector<double> want_tok(v * d, 0.0), want_pos(s * d, 0.0);
    for (int64_t i = 0; i < b * s; ++i)
      for (int64_t j = 0; j < d; ++j) {
        want_tok[static_cast<int64_t>(tv[i]) * d + j] += dyv[i * d + j];
        want_pos[(i % s) * d + j] += dyv[i * d + j];
      }
    auto rt = compare(to_host_f32(*be, dtok), to_float(want_tok), 1e-6);
    auto rp = compare(to_host_f32(*be, dpos), to_float(want_pos), 1e-6);
    EXPECT_TRUE(rt.ok) << "dtok: " << rt.message;
    EXPECT_TRUE(rp.ok) << "dpos: " << rp.message;
  }
}

TEST_F(CpuEmbedding, BadTokenThrowsNamingItAndWritesNothing) {
  Tensor tok = make(Shape{kV, kD}, DType::F32, random_nonzero(kV * kD, 331));
  Tensor pos = make(Shape{kP, kD}, DType::F32, random_nonzero(kP * kD, 332));
  for (float bad : {static_cast<float>(kV), -1.0f, 1000.0f}) {
    SCOPED_TRACE(bad);
    std::vector<float> tv = kTokens;
    tv[4] = bad;
    Tensor tokens = make(Shape{kB, kS}, DType::I32, tv);
    Tensor y = poisoned(Shape{kB * kS, kD}, DType::F32);
    try {
      be->embedding_forward(tokens, tok, pos, y);
      ADD_FAILURE() << "no error for token " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Runtime);
      EXPECT_NE(std::string(e.what()).find("token " + std::to_string(static_cast<int>(bad))),
                std::string::npos)
          << e.what();
    }
    for (float v : to_host_f32(*be, y)) EXPECT_TRUE(std::isnan(v));  // still the poison
    Tensor dy = make(Shape{kB * kS, kD}, DType::F32, random_nonzero(kB * kS * kD, 333));
    Tensor dtok = poisoned(Shape{kV, kD}, DType::F32), dpos = poisoned(Shape{kP, kD}, DType::F32);
    EXPECT_THROW(be->embedding_backward(tokens, dy, dtok, dpos), Error);
  }
}

TEST_F(CpuEmbedding, RejectsMismatchedShapesAndDtypes) {
  Tensor tokens = make(Shape{kB, kS}, DType::I32, kTokens);
  Tensor tok = make(Shape{kV, kD}, DType::F32, random_nonzero(kV * kD, 341));
  Tensor pos = make(Shape{kP, kD}, DType::F32, random_nonzero(kP * kD, 342));
  Tensor y = poisoned(Shape{kB * kS, kD}, DType::F32);
  be->embedding_forward(tokens, tok, pos, y);                  // the valid call works
  Tensor pos_short = poisoned(Shape{kS - 1, kD}, DType::F32);  // P < S
  Tensor pos_wide = poisoned(Shape{kP, kD + 1}, DType::F32);
  Tensor tok16 = poisoned(Shape{kV, kD}, DType::F16);
  Tensor tokens_f = make(Shape{kB, kS}, DType::F32, kTokens);
  Tensor tokens_flat = make(Shape{kB * kS}, DType::I32, kTokens);
  Tensor y_rows = poisoned(Shape{kB * kS + 1, kD}, DType::F32);
  Tensor y_cols = poisoned(Shape{kB * kS, kD - 1}, DType::F32);
  EXPECT_THROW(be->embedding_forward(tokens, tok, pos_short, y), Error);
  EXPECT_THROW(be->embedding_forward(tokens, tok, pos_wide, y), Error);
  EXPECT_THROW(be->embedding_forward(tokens, tok16, pos, y), Error);
  EXPECT_THROW(be->embedding_forward(tokens_f, tok, pos, y), Error);
  EXPECT_THROW(be->embedding_forward(tokens_flat, tok, pos, y), Error);
  EXPECT_THROW(be->embedding_forward(tokens, tok, pos, y_rows), Error);
  EXPECT_THROW(be->embedding_forward(tokens, tok, pos, y_cols), Error);
  Tensor dtok = poisoned(Shape{kV, kD}, DType::F32), dpos = poisoned(Shape{kP, kD}, DType::F32);
  be->embedding_backward(tokens, y, dtok, dpos);
  EXPECT_THROW(be->embedding_backward(tokens, y, tok16, dpos), Error);
  EXPECT_THROW(be->embedding_backward(tokens, y, dtok, pos_short), Error);
  EXPECT_THROW(be->embedding_backward(tokens, y_cols, dtok, dpos), Error);
}

}  // namespace
}  // namespace mpbench
