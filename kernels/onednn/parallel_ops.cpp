// The ops that run the reference's own loops, each thread on a contiguous range of rows,
// elements or matrices: casts, the optimizers, the gradient check and the embedding (oneDNN has
// no primitive for them), and max pooling (oneDNN's backward needs the forward's workspace, the
// winners, which the interface does not keep). An element or a row is computed exactly as the
// reference computes it; only the sums across ranges (a norm) add the ranges' partial sums.
// (The attention softmax, the loss and LayerNorm have vectorised loops of their own:
// softmax.cpp, layernorm.cpp.)
#include <cmath>
#include <vector>

#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

namespace mpbench::onednn {
namespace {

Tensor flat(const Tensor& t, int64_t begin, int64_t n) {
  return t.slice(begin, Shape{n});
}

Tensor host_f32(std::vector<float>& v, int64_t begin, int64_t n) {
  return Tensor{v.data() + begin, Shape{n}, DType::F32, Device::CPU};
}

}  // namespace

void OnednnBackend::fill_impl(Tensor& t, float value) {
  parallel_ranges(t.numel(), kGrain, [&](int64_t, int64_t b, int64_t n) {
    Tensor part = flat(t, b, n);
    CpuBackend::fill_impl(part, value);
  });
}

void OnednnBackend::cast_impl(const Tensor& src, Tensor& dst) {
  parallel_ranges(src.numel(), kGrain, [&](int64_t, int64_t b, int64_t n) {
    Tensor out = flat(dst, b, n);
    CpuBackend::cast_impl(flat(src, b, n), out);
  });
}

void OnednnBackend::unscale_check_norm_impl(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                                            Tensor& norm) {
  const int64_t parts = range_count(grads.numel(), kGrain);
  std::vector<float> inf(parts, 0.0f), norms(parts, 0.0f);
  parallel_ranges(grads.numel(), kGrain, [&](int64_t part, int64_t b, int64_t n) {
    Tensor g = flat(grads, b, n), fi = host_f32(inf, part, 1), nm = host_f32(norms, part, 1);
    CpuBackend::unscale_check_norm_impl(g, scale, fi, nm);
  });
  double sum_sq = 0;
  bool any_inf = false;
  for (int64_t p = 0; p < parts; ++p) {
    any_inf |= inf[p] != 0.0f;
    sum_sq += static_cast<double>(norms[p]) * norms[p];
  }
  found_inf.ptr<float>()[0] = any_inf ? 1.0f : 0.0f;
  norm.ptr<float>()[0] = any_inf ? INFINITY : static_cast<float>(std::sqrt(sum_sq));
}

void OnednnBackend::adamw_step_impl(const AdamWParams& p, Tensor& master, const Tensor& grads,
                                    Tensor& m, Tensor& v, Tensor* weights_lowp,
                                    const Tensor& step_count, const Tensor* found_inf) {
  parallel_ranges(master.numel(), kGrain, [&](int64_t, int64_t b, int64_t n) {
    Tensor mw = flat(master, b, n), mm = flat(m, b, n), vv = flat(v, b, n);
    Tensor low = weights_lowp ? flat(*weights_lowp, b, n) : Tensor{};
    CpuBackend::adamw_step_impl(p, mw, flat(grads, b, n), mm, vv, weights_lowp ? &low : nullptr,
                                step_count, found_inf);
  });
}

void OnednnBackend::sgd_step_impl(const SgdParams& p, Tensor& master, const Tensor& grads,
                                  Tensor& momentum_buf, Tensor* weights_lowp,
                                  const Tensor* found_inf) {
  parallel_ranges(master.numel(), kGrain, [&](int64_t, int64_t b, int64_t n) {
    // Without momentum there is no buffer (PyTorch keeps none) to slice.
    Tensor mw = flat(master, b, n),
           buf = p.momentum != 0.0f ? flat(momentum_buf, b, n) : momentum_buf;
    Tensor low = weights_lowp ? flat(*weights_lowp, b, n) : Tensor{};
    CpuBackend::sgd_step_impl(p, mw, flat(grads, b, n), buf, weights_lowp ? &low : nullptr,
                              found_inf);
  });
}

// Each range of rows as a batch of its own, with the loss scale times its share of the rows, so
// that its gradient's scale / rows is the whole batch's; its mean loss weighted back alike.
void OnednnBackend::embedding_forward_impl(const EmbeddingGeom& g, const Tensor& tokens,
                                           const Tensor& tok_emb, const Tensor& pos_emb,
                                           Tensor& y) {
  parallel_ranges(g.batch, row_grain(g.seq * g.dim), [&](int64_t, int64_t b, int64_t n) {
    EmbeddingGeom part = g;
    part.batch = n;
    Tensor out = y.slice(b * g.seq * g.dim, Shape{n * g.seq, g.dim});
    CpuBackend::embedding_forward_impl(part, tokens.slice(b * g.seq, Shape{n, g.seq}), tok_emb,
                                       pos_emb, out);
  });
}

// Pooling: each image of the batch on its own (the leading dimension of every operand).
namespace {
Tensor images(const Tensor& t, int64_t begin, int64_t n) {
  Shape s = t.shape;
  const int64_t per_image = t.numel() / s[0];
  s.dims[0] = n;
  return t.slice(begin * per_image, s);
}
int64_t image_grain(const Tensor& t) {
  return row_grain(t.numel() / std::max<int64_t>(1, t.shape[0]));
}
}  // namespace

void OnednnBackend::maxpool2d_forward_impl(const PoolDesc& d, const Tensor& x, Tensor& y) {
  parallel_ranges(x.shape[0], image_grain(x), [&](int64_t, int64_t b, int64_t n) {
    Tensor out = images(y, b, n);
    CpuBackend::maxpool2d_forward_impl(d, images(x, b, n), out);
  });
}

void OnednnBackend::maxpool2d_backward_impl(const PoolDesc& d, const Tensor& x, const Tensor& dy,
                                            Tensor& dx) {
  parallel_ranges(x.shape[0], image_grain(x), [&](int64_t, int64_t b, int64_t n) {
    Tensor out = images(dx, b, n);
    CpuBackend::maxpool2d_backward_impl(d, images(x, b, n), images(dy, b, n), out);
  });
}

}  // namespace mpbench::onednn
