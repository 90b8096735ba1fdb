// Token + learned position embedding, CPU reference. The tables are fp32 master parameters; only
// the output (the first activation) takes the mode's dtype.
//
// tokens (B, S) int32 in [0, V); tok_emb (V, D), pos_emb (P >= S, D) fp32; y, dy (B*S, D).
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"

namespace mpbench::cpu {

// Every token checked before anything is written, so that a bad one leaves the outputs
// untouched: here, not in Backend, as a GPU cannot read the tokens without a synchronisation.
void check_tokens(const char* op, const EmbeddingGeom& e, const Tensor& tokens) {
  const int32_t* t = tokens.ptr<int32_t>();
  for (int64_t i = 0; i < e.batch * e.seq; ++i)
    MPB_CHECK(t[i] >= 0 && t[i] < e.vocab,
              "{}: token {} at (batch {}, position {}) is outside the vocabulary [0, {})", op, t[i],
              i / e.seq, i % e.seq, e.vocab);
}

void CpuBackend::embedding_forward_impl(const EmbeddingGeom& e, const Tensor& tokens,
                                        const Tensor& tok_emb, const Tensor& pos_emb, Tensor& y) {
  check_tokens("embedding_forward", e, tokens);
  const int32_t* t = tokens.ptr<int32_t>();
  std::vector<float> row(static_cast<size_t>(e.dim));
  for (int64_t i = 0; i < e.batch * e.seq; ++i) {
    const float* te = tok_emb.ptr<float>() + t[i] * e.dim;
    const float* pe = pos_emb.ptr<float>() + (i % e.seq) * e.dim;
    for (int64_t j = 0; j < e.dim; ++j) row[j] = te[j] + pe[j];
    Tensor out = y.slice(i * e.dim, Shape{e.dim});
    encode_f32(row.data(), out, e.dim);
  }
}

// Scatter-add of dy into the rows the tokens and positions picked, in double so the sum over a
// frequent token does not depend on the order of its occurrences.
void CpuBackend::embedding_backward_impl(const EmbeddingGeom& e, const Tensor& tokens,
                                         const Tensor& dy, Tensor& dtok_emb, Tensor& dpos_emb,
                                         bool add_to_tok) {
  check_tokens("embedding_backward", e, tokens);
  const int32_t* t = tokens.ptr<int32_t>();
  const int64_t d = e.dim;
  std::vector<double> dtok(static_cast<size_t>(e.vocab * d), 0.0);
  std::vector<double> dpos(static_cast<size_t>(e.positions * d), 0.0);
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t i = 0; i < e.batch * e.seq; ++i) {
    decode_f32(dy.slice(i * d, Shape{d}), row.data(), d);
    double* te = dtok.data() + t[i] * d;
    double* pe = dpos.data() + (i % e.seq) * d;
    for (int64_t j = 0; j < d; ++j) {
      te[j] += row[j];
      pe[j] += row[j];
    }
  }
  auto write = [&](const std::vector<double>& sums, int64_t rows, float* out, bool add) {
    for (int64_t k = 0; k < rows * d; ++k) {
      const auto v = static_cast<float>(sums[static_cast<size_t>(k)]);
      out[k] = add ? out[k] + v : v;
    }
  };
  write(dtok, e.vocab, dtok_emb.ptr<float>(), add_to_tok);
  write(dpos, e.positions, dpos_emb.ptr<float>(), false);
}

}  // namespace mpbench::cpu
