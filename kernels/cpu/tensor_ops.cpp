// Shape-level ops, CPU reference: global average and max pooling (forward and backward),
// elementwise add, and permute (the QKV split and head transposes of attention).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops.h"
#include "kernels/pool_window.h"

namespace mpbench::cpu {

// x (N, HW, C) -> y (N, C) = mean over HW.
void CpuBackend::avgpool_forward_impl(const Tensor& x, Tensor& y) {
  const int64_t n = x.shape[0], hw = x.shape[1], c = x.shape[2];
  std::vector<float> row(c), out(c);
  std::vector<double> sum(c);
  for (int64_t b = 0; b < n; ++b) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t i = 0; i < hw; ++i) {
      decode_f32(x.slice((b * hw + i) * c, Shape{c}), row.data(), c);
      for (int64_t j = 0; j < c; ++j) sum[j] += row[j];
    }
    for (int64_t j = 0; j < c; ++j) out[j] = static_cast<float>(sum[j] / static_cast<double>(hw));
    Tensor y_row = y.slice(b * c, Shape{c});
    encode_f32(out.data(), y_row, c);
  }
}

// dy (N, C) -> dx (N, HW, C) = dy / HW at every position.
void CpuBackend::avgpool_backward_impl(const Tensor& dy, Tensor& dx) {
  const int64_t n = dx.shape[0], hw = dx.shape[1], c = dx.shape[2];
  std::vector<float> g(c);
  for (int64_t b = 0; b < n; ++b) {
    decode_f32(dy.slice(b * c, Shape{c}), g.data(), c);
    for (int64_t j = 0; j < c; ++j) g[j] = g[j] / static_cast<float>(hw);
    for (int64_t i = 0; i < hw; ++i) {
      Tensor dx_row = dx.slice((b * hw + i) * c, Shape{c});
      encode_f32(g.data(), dx_row, c);
    }
  }
}

PoolGeom pool_geom(const PoolDesc& d, const Tensor& x, const Tensor& y) {
  return {x.shape[1], x.shape[2], y.shape[1], y.shape[2], d.kernel, d.stride, d.pad};
}

PermuteRows::PermuteRows(const Shape& src, const Shape& dst, const std::array<int, 5>& perm,
                         int64_t first_row)
    : rank(src.rank) {
  int64_t contiguous[Shape::kMaxRank];
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    contiguous[k] = s;
    s *= src[k];
  }
  for (int k = 0; k < rank; ++k) {
    stride[k] = contiguous[perm[k]];
    dims_[k] = dst[k];
  }
  for (int k = rank - 2; k >= 0; --k) {
    index_[k] = first_row % dims_[k];
    first_row /= dims_[k];
    offset += index_[k] * stride[k];
  }
}

void PermuteRows::next() {
  for (int k = rank - 2; k >= 0; --k) {
    offset += stride[k];
    if (++index_[k] < dims_[k]) return;
    offset -= stride[k] * dims_[k];
    index_[k] = 0;
  }
}

namespace {

std::vector<float> decoded(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  decode_f32(t, v.data(), t.numel());
  return v;
}

// Calls f(output, input) for every output element of the pool and the input element that wins
// its window (flat indices into y and x), windows in row-major order, channels innermost (as NHWC
// stores them). xs: x decoded.
template <typename F>
void for_each_winner(const PoolGeom& g, int64_t n, int64_t c, const std::vector<float>& xs, F&& f) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t op = 0; op < g.p; ++op)
      for (int64_t oq = 0; oq < g.q; ++oq)
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* plane = xs.data() + b * g.h * g.w * c + ch;
          auto value = [&](int64_t h, int64_t w) { return plane[(h * g.w + w) * c]; };
          const int64_t win = pool_winner(g, op, oq, value);
          if (win < 0) continue;  // a window of padding only (pad <= kernel / 2 rules it out)
          f(((b * g.p + op) * g.q + oq) * c + ch, (b * g.h * g.w + win) * c + ch);
        }
}

}  // namespace

// y[n, p, q, c] = x at the winner of window (p, q) in channel c: an exact copy of the element.
void CpuBackend::maxpool2d_forward_impl(const PoolDesc& d, const Tensor& x, Tensor& y) {
  const size_t es = dtype_size(x.dtype);
  const char* in = static_cast<const char*>(x.data);
  char* out = static_cast<char*>(y.data);
  for_each_winner(pool_geom(d, x, y), x.shape[0], x.shape[3], decoded(x),
                  [&](int64_t o, int64_t i) { std::memcpy(out + o * es, in + i * es, es); });
}

// Each window's dy added to its winner, windows in row-major order: every input sums the
// windows it won in row-major order from 0, the order the CUDA kernel gathers them in (per input,
// its windows in row-major order), so the sums agree bit for bit. One winner search per window,
// where a gather per input searches every window that holds the input (up to 4 for a 3x3/2 pool).
void CpuBackend::maxpool2d_backward_impl(const PoolDesc& d, const Tensor& x, const Tensor& dy,
                                         Tensor& dx) {
  const std::vector<float> gs = decoded(dy);
  std::vector<float> out(static_cast<size_t>(dx.numel()), 0.0f);
  for_each_winner(
      pool_geom(d, x, dy), x.shape[0], x.shape[3], decoded(x),
      [&](int64_t o, int64_t i) { out[static_cast<size_t>(i)] += gs[static_cast<size_t>(o)]; });
  encode_f32(out.data(), dx, dx.numel());
}

// out = a + b over one numel; blocks are read completely before they are written, so out may
// alias a or b.
void CpuBackend::add_impl(const Tensor& a, const Tensor& b, Tensor& out) {
  constexpr int64_t kBlock = 4096;
  std::vector<float> va(kBlock), vb(kBlock);
  const int64_t n = a.numel();
  for (int64_t off = 0; off < n; off += kBlock) {
    const int64_t len = std::min(kBlock, n - off);
    decode_f32(a.slice(off, Shape{len}), va.data(), len);
    decode_f32(b.slice(off, Shape{len}), vb.data(), len);
    for (int64_t i = 0; i < len; ++i) va[i] += vb[i];
    Tensor o = out.slice(off, Shape{len});
    encode_f32(va.data(), o, len);
  }
}

// dst[i0, .., i_{r-1}] = src[j] with j[perm[k]] = i_k: dst's dimension k is src's perm[k].
void CpuBackend::permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  const int64_t n = src.numel();
  if (n == 0) return;
  const size_t es = dtype_size(src.dtype);
  const char* in = static_cast<const char*>(src.data);
  char* out = static_cast<char*>(dst.data);
  PermuteRows rows(src.shape, dst.shape, perm, 0);
  const int64_t inner = dst.shape[src.shape.rank - 1], inner_stride = rows.stride[rows.rank - 1];
  for (int64_t o = 0; o < n; o += inner, rows.next())
    for (int64_t i = 0; i < inner; ++i)
      std::memcpy(out + (o + i) * es, in + (rows.offset + i * inner_stride) * es, es);
}

}  // namespace mpbench::cpu
