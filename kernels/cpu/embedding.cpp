// Token + learned position embedding, CPU reference. The tables are fp32 master parameters; only
// the output (the first activation) takes the mode's dtype.
//
// tokens (B, S) int32 in [0, V); tok_emb (V, D), pos_emb (P >= S, D) fp32; y, dy (B*S, D).
#include <vector>

#include "kernels/cpu/ops.h"

namespace mpbench::cpu {
namespace {

struct EmbedDims {
  int64_t batch = 0, seq = 0, vocab = 0, positions = 0, dim = 0;
};

// Checks the tables and the tokens (every token, before anything is written, so that a bad one
// leaves the outputs untouched).
EmbedDims check_embedding(const char* op, const Tensor& tokens, const Tensor& tok_emb,
                          const Tensor& pos_emb, const Tensor& y, const char* y_name) {
  check_tensor(tokens, DType::I32, fmt::format("{}: tokens", op).c_str());
  check_tensor(tok_emb, DType::F32, fmt::format("{}: token table", op).c_str());
  check_tensor(pos_emb, DType::F32, fmt::format("{}: position table", op).c_str());
  MPB_CHECK(y.defined() && is_float_dtype(y.dtype), "{}: {} must be an allocated float tensor", op,
            y_name);
  check_tensor(y, y.dtype, fmt::format("{}: {}", op, y_name).c_str());
  MPB_CHECK(tokens.shape.rank == 2, "{}: tokens must be (B, S), got {}", op, tokens.shape.str());
  MPB_CHECK(tok_emb.shape.rank == 2 && pos_emb.shape.rank == 2,
            "{}: token table {} and position table {} must be (rows, D)", op, tok_emb.shape.str(),
            pos_emb.shape.str());
  EmbedDims e;
  e.batch = tokens.shape[0];
  e.seq = tokens.shape[1];
  e.vocab = tok_emb.shape[0];
  e.positions = pos_emb.shape[0];
  e.dim = tok_emb.shape[1];
  MPB_CHECK(pos_emb.shape[1] == e.dim, "{}: position table {} and token table {} differ in D", op,
            pos_emb.shape.str(), tok_emb.shape.str());
  MPB_CHECK(e.positions >= e.seq,
            "{}: position table {} has fewer rows than the sequence length {}", op,
            pos_emb.shape.str(), e.seq);
  MPB_CHECK(y.shape.rank >= 2 && y.cols() == e.dim && y.rows() == e.batch * e.seq,
            "{}: {} {} must be (B*S, D) = ({}, {})", op, y_name, y.shape.str(), e.batch * e.seq,
            e.dim);
  const int32_t* t = tokens.ptr<int32_t>();
  for (int64_t i = 0; i < e.batch * e.seq; ++i)
    MPB_CHECK(t[i] >= 0 && t[i] < e.vocab,
              "{}: token {} at (batch {}, position {}) is outside the vocabulary [0, {})", op, t[i],
              i / e.seq, i % e.seq, e.vocab);
  return e;
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& tok_emb, const Tensor& pos_emb,
                       Tensor& y) {
  const EmbedDims e = check_embedding("embedding_forward", tokens, tok_emb, pos_emb, y, "y");
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
void embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dtok_emb,
                        Tensor& dpos_emb) {
  const EmbedDims e = check_embedding("embedding_backward", tokens, dtok_emb, dpos_emb, dy, "dy");
  const int32_t* t = tokens.ptr<int32_t>();
  std::vector<double> dtok(static_cast<size_t>(e.vocab * e.dim), 0.0);
  std::vector<double> dpos(static_cast<size_t>(e.positions * e.dim), 0.0);
  std::vector<float> row(static_cast<size_t>(e.dim));
  for (int64_t i = 0; i < e.batch * e.seq; ++i) {
    decode_f32(dy.slice(i * e.dim, Shape{e.dim}), row.data(), e.dim);
    double* te = dtok.data() + t[i] * e.dim;
    double* pe = dpos.data() + (i % e.seq) * e.dim;
    for (int64_t j = 0; j < e.dim; ++j) {
      te[j] += row[j];
      pe[j] += row[j];
    }
  }
  float* out_tok = dtok_emb.ptr<float>();
  float* out_pos = dpos_emb.ptr<float>();
  for (size_t k = 0; k < dtok.size(); ++k) out_tok[k] = static_cast<float>(dtok[k]);
  for (size_t k = 0; k < dpos.size(); ++k) out_pos[k] = static_cast<float>(dpos[k]);
}

}  // namespace mpbench::cpu
