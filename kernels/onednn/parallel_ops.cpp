// The ops oneDNN has no primitive for, each thread on a contiguous range of rows, elements or
// matrices. The hot ones of a step have vectorised loops of their own (vector clones, below): the
// fp32 <-> bf16 casts (bit for bit the reference's rounding), AdamW and SGD (the reference's
// formulas, kernels/optimizer_rules.h, which the compiler may contract into FMAs), the gradient
// unscale and check (one pass, the squares summed in double in vector lanes) and the embedding
// (forward and backward). The rest run the reference's own loops per range: the other casts.
// (The attention softmax, the loss, LayerNorm and max pooling have vectorised loops in
// softmax.cpp, layernorm.cpp and pool.cpp.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/dtype.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"
#include "kernels/optimizer_rules.h"

namespace mpbench::onednn {
namespace {

Tensor flat(const Tensor& t, int64_t begin, int64_t n) {
  return t.slice(begin, Shape{n});
}

// The optimizers' updates run over blocks that stay in L1, each then cast down while still in
// cache.
constexpr int64_t kOptimizerBlock = 2048;

MPBENCH_VECTOR_CLONES void adamw_block(int64_t n, float* __restrict p, const float* __restrict g,
                                       float* __restrict m, float* __restrict v,
                                       const AdamWScalars& s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) adamw_element(p[i], g[i], m[i], v[i], s);
}

// SGD's block, with momentum (buf) or without (buf null).
template <bool kNesterov>
MPBENCH_VECTOR_CLONES void sgd_block(int64_t n, float* __restrict p, const float* __restrict g,
                                     float* __restrict buf, const SgdParams& s) {
  if (!buf) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) sgd_element(p[i], g[i], s.lr, s.weight_decay);
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    sgd_element<kNesterov>(p[i], g[i], buf[i], s.lr, s.momentum, s.weight_decay);
}

// g[i] *= inv (when kUnscale), and its square in double; bad set when g[i] was inf or NaN before
// the unscale, the value the check judges (kernels/cpu/grad_stats.cpp).
template <bool kUnscale>
inline double unscaled_square(float* g, int64_t i, float inv, int& bad) {
  bad |= !std::isfinite(g[i]);
  const float x = kUnscale ? g[i] * inv : g[i];
  if (kUnscale) g[i] = x;
  return static_cast<double>(x) * x;
}

// The gradients unscaled (when kUnscale), whether any was inf or NaN as scaled, and the sum of
// their unscaled squares in double. Four quarters summed side by side: one chain of dependent
// vector adds would wait on the adder's latency.
template <bool kUnscale>
MPBENCH_VECTOR_CLONES double unscale_sum_squares(float* g, int64_t n, float inv, bool& finite) {
  const int64_t q = n / 4;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int bad = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3) reduction(| : bad)
  for (int64_t i = 0; i < q; ++i) {
    s0 += unscaled_square<kUnscale>(g, i, inv, bad);
    s1 += unscaled_square<kUnscale>(g, i + q, inv, bad);
    s2 += unscaled_square<kUnscale>(g, i + 2 * q, inv, bad);
    s3 += unscaled_square<kUnscale>(g, i + 3 * q, inv, bad);
  }
  for (int64_t i = 4 * q; i < n; ++i) s0 += unscaled_square<kUnscale>(g, i, inv, bad);
  finite = !bad;
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

MPBENCH_VECTOR_CLONES void add_block_sums(int64_t n, float* a, float* b, double* da, double* db) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    da[j] += a[j];
    db[j] += b[j];
    a[j] = 0.0f;
    b[j] = 0.0f;
  }
}

// out = a + b over n elements (an embedding's token and position rows).
MPBENCH_VECTOR_CLONES void add_rows(int64_t n, const float* __restrict a, const float* __restrict b,
                                    float* __restrict out) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = a[j] + b[j];
}

// One token's row of dy into its token's and its position's rows of the table gradients.
MPBENCH_VECTOR_CLONES void add_to_two(int64_t n, const float* __restrict x, float* __restrict a,
                                      float* __restrict b) {
  for (int64_t j = 0; j < n; ++j) {
    a[j] += x[j];
    b[j] += x[j];
  }
}

MPBENCH_VECTOR_CLONES void f32_to_bf16_block(const float* s, uint16_t* d, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
}

MPBENCH_VECTOR_CLONES void bf16_to_f32_block(const uint16_t* s, float* d, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
}

bool bf16_conversion_in_hardware(bool isa_allows) {
#ifdef MPBENCH_BF16_HW_BUILT
  static const bool cpu_has = __builtin_cpu_supports("avx512bf16");
  return isa_allows && cpu_has;
#else
  (void)isa_allows;
  return false;
#endif
}

void load_row(const Tensor& t, int64_t r, int64_t n, float* out) {
  if (t.dtype == DType::F32) {
    std::memcpy(out, t.ptr<float>() + r * n, static_cast<size_t>(n) * sizeof(float));
  } else if (t.dtype == DType::BF16) {
    bf16_to_f32_block(t.ptr<uint16_t>() + r * n, out, n);
  } else {
    cpu::load_row(t, r, n, out);
  }
}

void store_row(const float* in, Tensor& t, int64_t r, int64_t n) {
  if (t.dtype == DType::F32) {
    std::memcpy(t.ptr<float>() + r * n, in, static_cast<size_t>(n) * sizeof(float));
  } else if (t.dtype == DType::BF16) {
    f32_to_bf16_block(in, t.ptr<uint16_t>() + r * n, n);
  } else {
    cpu::store_row(in, t, r, n);
  }
}

void OnednnBackend::fill_impl(Tensor& t, float value) {
  parallel_ranges(t.numel(), kGrain, [&](int64_t, int64_t b, int64_t n) {
    Tensor part = flat(t, b, n);
    CpuBackend::fill_impl(part, value);
  });
}

void OnednnBackend::cast_impl(const Tensor& src, Tensor& dst) {
  const bool to_bf16 = src.dtype == DType::F32 && dst.dtype == DType::BF16;
  const bool from_bf16 = src.dtype == DType::BF16 && dst.dtype == DType::F32;
  parallel_ranges(src.numel(), kGrain, [&](int64_t, int64_t b, int64_t n) {
    if (to_bf16) return f32_to_bf16_block(src.ptr<float>() + b, dst.ptr<uint16_t>() + b, n);
    if (from_bf16) return bf16_to_f32_block(src.ptr<uint16_t>() + b, dst.ptr<float>() + b, n);
    Tensor out = flat(dst, b, n);
    CpuBackend::cast_impl(flat(src, b, n), out);
  });
}

namespace {

MPBENCH_VECTOR_CLONES void round_to_bf16_block(float* t, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) t[i] = bf16_to_f32(f32_to_bf16(t[i]));
}

}  // namespace

void OnednnBackend::round_to_impl(Tensor& t, DType to) {
  parallel_ranges(t.numel(), kGrain, [&](int64_t, int64_t b, int64_t n) {
    if (to == DType::BF16) return round_to_bf16_block(t.ptr<float>() + b, n);
    Tensor part = flat(t, b, n);
    CpuBackend::round_to_impl(part, to);
  });
}

void OnednnBackend::unscale_check_norm_impl(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                                            Tensor& norm) {
  // GradScaler multiplies by the fp32 reciprocal (computed in double), as the reference does.
  const float inv =
      scale ? static_cast<float>(1.0 / static_cast<double>(scale->ptr<float>()[0])) : 1.0f;
  const int64_t parts = range_count(grads.numel(), kGrain);
  std::vector<double> sums(parts, 0.0);
  std::vector<char> finite(parts, 1);
  parallel_ranges(grads.numel(), kGrain, [&](int64_t part, int64_t b, int64_t n) {
    float* g = grads.ptr<float>() + b;
    bool ok = true;
    sums[part] = scale ? unscale_sum_squares<true>(g, n, inv, ok)
                       : unscale_sum_squares<false>(g, n, inv, ok);
    finite[part] = ok;
  });
  double sum_sq = 0;
  for (double x : sums) sum_sq += x;
  const bool all_finite = std::all_of(finite.begin(), finite.end(), [](char f) { return f; });
  found_inf.ptr<float>()[0] = all_finite ? 0.0f : 1.0f;
  norm.ptr<float>()[0] = static_cast<float>(std::sqrt(sum_sq));  // NaN or inf, as the reference
}

namespace {

// An optimizer step on all threads: update(begin, n) over blocks of each thread's range, each
// block's masters then cast down to the low-precision weights (when kept) while in cache.
template <class Update>
void optimizer_blocks(Tensor& master, Tensor* weights_lowp, Update&& update) {
  parallel_ranges(master.numel(), kGrain, [&](int64_t, int64_t begin, int64_t count) {
    for (int64_t b = begin; b < begin + count; b += kOptimizerBlock) {
      const int64_t n = std::min(kOptimizerBlock, begin + count - b);
      update(b, n);
      if (!weights_lowp) continue;
      if (weights_lowp->dtype == DType::BF16) {
        f32_to_bf16_block(master.ptr<float>() + b, weights_lowp->ptr<uint16_t>() + b, n);
      } else {
        Tensor low = flat(*weights_lowp, b, n);
        cpu::encode_f32(master.ptr<float>() + b, low, n);
      }
    }
  });
}

}  // namespace

void OnednnBackend::adamw_step_impl(const AdamWParams& p, Tensor& master, const Tensor& grads,
                                    Tensor& m, Tensor& v, Tensor* weights_lowp,
                                    const Tensor& step_count, const Tensor* found_inf) {
  if (found_inf && found_inf->ptr<float>()[0] != 0.0f) return;  // a skipped step
  const AdamWScalars s = adamw_scalars(p, step_count.ptr<float>()[0]);
  optimizer_blocks(master, weights_lowp, [&](int64_t b, int64_t n) {
    adamw_block(n, master.ptr<float>() + b, grads.ptr<float>() + b, m.ptr<float>() + b,
                v.ptr<float>() + b, s);
  });
}

void OnednnBackend::sgd_step_impl(const SgdParams& p, Tensor& master, const Tensor& grads,
                                  Tensor& momentum_buf, Tensor* weights_lowp,
                                  const Tensor* found_inf) {
  if (found_inf && found_inf->ptr<float>()[0] != 0.0f) return;  // a skipped step
  // Without momentum PyTorch keeps no buffer.
  float* buf = p.momentum != 0.0f ? momentum_buf.ptr<float>() : nullptr;
  optimizer_blocks(master, weights_lowp, [&](int64_t b, int64_t n) {
    float* pw = master.ptr<float>() + b;
    const float* g = grads.ptr<float>() + b;
    if (p.nesterov)
      sgd_block<true>(n, pw, g, buf ? buf + b : nullptr, p);
    else
      sgd_block<false>(n, pw, g, buf ? buf + b : nullptr, p);
  });
}

// Each token's row as the reference sums it (fp32 tables), stored in y's dtype with the
// reference's rounding, a range of tokens per thread.
void OnednnBackend::embedding_forward_impl(const EmbeddingGeom& g, const Tensor& tokens,
                                           const Tensor& tok_emb, const Tensor& pos_emb,
                                           Tensor& y) {
  // Every token first, as the reference does, so that a bad one leaves y untouched.
  cpu::check_tokens("embedding_forward", g, tokens);
  const int32_t* t = tokens.ptr<int32_t>();
  Tensor rows = y.reshaped(Shape{g.batch * g.seq, g.dim});
  parallel_ranges(g.batch * g.seq, row_grain(g.dim), [&](int64_t, int64_t b, int64_t n) {
    std::vector<float> row(static_cast<size_t>(g.dim));
    for (int64_t i = b; i < b + n; ++i) {
      add_rows(g.dim, tok_emb.ptr<float>() + t[i] * g.dim,
               pos_emb.ptr<float>() + (i % g.seq) * g.dim, row.data());
      store_row(row.data(), rows, i, g.dim);
    }
  });
}

// Each thread its own columns of the tables over every token: no element has two writers, and each
// sums its terms in token order, in fp32 straight into the tables (the reference's double sums
// took a table-sized buffer per call); tied to the head, onto the head's gradient already there.
void OnednnBackend::embedding_backward_impl(const EmbeddingGeom& g, const Tensor& tokens,
                                            const Tensor& dy, Tensor& dtok_emb, Tensor& dpos_emb,
                                            bool add_to_tok) {
  cpu::check_tokens("embedding_backward", g, tokens);
  const int32_t* t = tokens.ptr<int32_t>();
  float* dtok = dtok_emb.ptr<float>();
  float* dpos = dpos_emb.ptr<float>();
  // The tables zeroed whole, a contiguous range per thread: each thread zeroing its columns of
  // every row took 3x the time of all the rest on a cold table (1.4 against 0.45 ms, BERT's).
  if (!add_to_tok) fill_impl(dtok_emb, 0.0f);
  fill_impl(dpos_emb, 0.0f);
  parallel_ranges(g.dim, row_grain(g.batch * g.seq), [&](int64_t, int64_t j0, int64_t n) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < g.batch * g.seq; ++i) {
      load_row(dy.slice(i * g.dim + j0, Shape{n}), 0, n, row.data());
      add_to_two(n, row.data(), dtok + t[i] * g.dim + j0, dpos + (i % g.seq) * g.dim + j0);
    }
  });
}

}  // namespace mpbench::onednn
