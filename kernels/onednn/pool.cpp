// Pooling. Global average pooling on oneDNN's pooling primitive (forward and backward, f32 or
// bf16 with f32 sums): x (N, HW, C) is channels-last (N, C, HW, 1) pooled by one HW x 1 window.
// The primitive takes one dtype for x and y; mixed dtypes run the reference's loop.
//
// Max pooling as vectorised loops over the channels of NHWC rows (oneDNN's backward needs the
// forward's workspace of winners, which the interface does not keep): each window's winners by
// pool_window.h's rule, the forward copying the winner's element, the backward gathering per
// input row the dy of the windows its inputs won, in row-major window order from 0 in fp32, so
// that both are the reference's bit for bit. fp32 or bf16 (one dtype, as the interface asks);
// fp16 runs the reference's loops.
#include <algorithm>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/ops.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"
#include "kernels/pool_window.h"

namespace mpbench::onednn {
namespace {

using cpu::detail::Elem;

// Window (op, oq)'s top-left input (h0, w0), and its offsets [i0, i1) x [j0, j1) inside the input.
struct Window {
  int64_t h0, w0;
  int i0, i1, j0, j1;
};

Window window_at(const PoolGeom& g, int64_t op, int64_t oq) {
  Window w;
  w.h0 = op * g.stride - g.pad;
  w.w0 = oq * g.stride - g.pad;
  const auto k = static_cast<int>(g.kernel);
  w.i0 = static_cast<int>(std::max<int64_t>(0, -w.h0));
  w.i1 = static_cast<int>(std::min<int64_t>(k, g.h - w.h0));
  w.j0 = static_cast<int>(std::max<int64_t>(0, -w.w0));
  w.j1 = static_cast<int>(std::min<int64_t>(k, g.w - w.w0));
  return w;
}

// Each channel's winner of window `win` in image x (H, W, C): its offset i * kernel + j in off,
// its element in raw. pool_winner_offset's rule in lanes: from -inf at the first position inside
// the input, a value wins when greater than the best so far or NaN.
template <class E>
MPBENCH_VECTOR_CLONES void window_winners(const typename E::T* x, const PoolGeom& g, int64_t c,
                                          const Window& win, float* __restrict best,
                                          int32_t* __restrict off, typename E::T* __restrict raw) {
  const auto k = static_cast<int>(g.kernel);
  const typename E::T* first = x + ((win.h0 + win.i0) * g.w + win.w0 + win.j0) * c;
  for (int64_t ch = 0; ch < c; ++ch) {
    best[ch] = -std::numeric_limits<float>::infinity();
    off[ch] = win.i0 * k + win.j0;
    raw[ch] = first[ch];
  }
  for (int i = win.i0; i < win.i1; ++i)
    for (int j = win.j0; j < win.j1; ++j) {
      const typename E::T* r = x + ((win.h0 + i) * g.w + win.w0 + j) * c;
      const int32_t o = i * k + j;
#pragma omp simd
      for (int64_t ch = 0; ch < c; ++ch) {
        const float v = E::load(r[ch]);
        const bool take = v > best[ch] || v != v;
        best[ch] = take ? v : best[ch];
        off[ch] = take ? o : off[ch];
        raw[ch] = take ? r[ch] : raw[ch];
      }
    }
}

// acc[ch] += dy[ch] where the channel's winner is offset o (adding +0 elsewhere changes nothing:
// the sums start from +0 and never become -0).
template <class E>
MPBENCH_VECTOR_CLONES void add_won(float* acc, const typename E::T* dy, const int32_t* off,
                                   int32_t o, int64_t c) {
#pragma omp simd
  for (int64_t ch = 0; ch < c; ++ch) acc[ch] += off[ch] == o ? E::load(dy[ch]) : 0.0f;
}

// y[b, op, oq] = the winners' elements; a range of output rows (b, op) per thread.
template <class E>
void max_pool_forward(const PoolGeom& g, const Tensor& x, Tensor& y) {
  using T = typename E::T;
  const int64_t c = x.shape[3];
  parallel_ranges(x.shape[0] * g.p, row_grain(g.q * c), [&](int64_t, int64_t begin, int64_t n) {
    std::vector<float> best(static_cast<size_t>(c));
    std::vector<int32_t> off(static_cast<size_t>(c));
    for (int64_t row = begin; row < begin + n; ++row) {
      const int64_t b = row / g.p, op = row % g.p;
      const T* image = x.ptr<T>() + b * g.h * g.w * c;
      for (int64_t oq = 0; oq < g.q; ++oq)
        window_winners<E>(image, g, c, window_at(g, op, oq), best.data(), off.data(),
                          y.ptr<T>() + (row * g.q + oq) * c);
    }
  });
}

// dx[b, h] gathered per input row: for each window row op holding h (ascending) and each window
// of it (ascending), the window's dy added to the inputs of row h it was won by. A range of input
// rows per thread, each keeping the winners of the last `kernel` window rows it found (as many
// as hold one input row), which the next input rows mostly need again.
template <class E>
void max_pool_backward(const PoolGeom& g, const Tensor& x, const Tensor& dy, Tensor& dx) {
  using T = typename E::T;
  const int64_t c = x.shape[3], row_offs = g.q * c;
  const auto k = static_cast<int>(g.kernel);
  parallel_ranges(x.shape[0] * g.h, row_grain(g.w * c), [&](int64_t, int64_t begin, int64_t n) {
    std::vector<float> acc(static_cast<size_t>(g.w * c)), best(static_cast<size_t>(c));
    std::vector<T> raw(static_cast<size_t>(c));
    std::vector<int32_t> offs(static_cast<size_t>(k * row_offs));
    std::vector<int64_t> cached(static_cast<size_t>(k), -1);  // (b, op) of each slot
    int64_t next = 0;
    // The winner offsets of window row op of image b, (q, C).
    auto winners = [&](const T* image, int64_t b, int64_t op) -> const int32_t* {
      for (int64_t slot = 0; slot < k; ++slot)
        if (cached[slot] == b * g.p + op) return offs.data() + slot * row_offs;
      const int64_t slot = next;
      next = (next + 1) % k;
      cached[slot] = b * g.p + op;
      int32_t* o = offs.data() + slot * row_offs;
      for (int64_t oq = 0; oq < g.q; ++oq)
        window_winners<E>(image, g, c, window_at(g, op, oq), best.data(), o + oq * c, raw.data());
      return o;
    };
    for (int64_t row = begin; row < begin + n; ++row) {
      const int64_t b = row / g.h, h = row % g.h;
      const T* image = x.ptr<T>() + b * g.h * g.w * c;
      std::fill(acc.begin(), acc.end(), 0.0f);
      int64_t p0, p1;
      pool_windows_of<int64_t>(h, g.p, g.kernel, g.stride, g.pad, &p0, &p1);
      for (int64_t op = p0; op <= p1; ++op) {
        const int32_t* o = winners(image, b, op);
        for (int64_t oq = 0; oq < g.q; ++oq) {
          const Window win = window_at(g, op, oq);
          const T* d = dy.ptr<T>() + ((b * g.p + op) * g.q + oq) * c;
          const auto i = static_cast<int>(h - win.h0);
          for (int j = win.j0; j < win.j1; ++j)
            add_won<E>(acc.data() + (win.w0 + j) * c, d, o + oq * c, i * k + j, c);
        }
      }
      store_row(acc.data(), dx, row, g.w * c);
    }
  });
}

}  // namespace

void OnednnBackend::avg_pool(bool backward, const Tensor& big, const Tensor& small) {
  using tag = dnnl::memory::format_tag;
  const DType t = big.dtype;
  const int64_t n = big.shape[0], hw = big.shape[1], c = big.shape[2];
  const dnnl::memory::desc src({n, c, hw, 1}, data_type(t), tag::nhwc),
      dst({n, c, 1, 1}, data_type(t), tag::nhwc);
  const dnnl::memory::dims kernel = {hw, 1}, ones = {1, 1}, zeros = {0, 0};
  const auto alg = dnnl::algorithm::pooling_avg_exclude_padding;
  Cached& p = primitive(
      fmt::format("avgpool_{} {} n{} hw{} c{}", backward ? "bwd" : "fwd", dtype_name(t), n, hw, c),
      [&]() -> dnnl::primitive_desc_base {
        const dnnl::pooling_v2_forward::primitive_desc fwd(
            {dnnl::prop_kind::forward_training, alg, src, dst, ones, kernel, zeros, zeros, zeros},
            user_scratchpad(), engine_);
        if (!backward) return fwd;
        return dnnl::pooling_v2_backward::primitive_desc(
            {alg, src, dst, ones, kernel, zeros, zeros, zeros}, user_scratchpad(), engine_, fwd);
      });
  std::unordered_map<int, dnnl::memory> args = {
      {backward ? DNNL_ARG_DIFF_SRC : DNNL_ARG_SRC, dnnl::memory(src, engine_, big.data)},
      {backward ? DNNL_ARG_DIFF_DST : DNNL_ARG_DST, dnnl::memory(dst, engine_, small.data)}};
  execute(p, args);
}

void OnednnBackend::avgpool_forward_impl(const Tensor& x, Tensor& y) {
  if (!native_dtype(x.dtype) || x.dtype != y.dtype) {
    fall_back("avgpool_forward");
    CpuBackend::avgpool_forward_impl(x, y);
    return;
  }
  avg_pool(false, x, y);
}

void OnednnBackend::avgpool_backward_impl(const Tensor& dy, Tensor& dx) {
  if (!native_dtype(dx.dtype) || dx.dtype != dy.dtype) {
    fall_back("avgpool_backward");
    CpuBackend::avgpool_backward_impl(dy, dx);
    return;
  }
  avg_pool(true, dx, dy);
}

void OnednnBackend::maxpool2d_forward_impl(const PoolDesc& d, const Tensor& x, Tensor& y) {
  if (one_native_dtype(
          {&x, &y}, [&](auto e) { max_pool_forward<decltype(e)>(cpu::pool_geom(d, x, y), x, y); }))
    return;
  fall_back("maxpool2d_forward");
  CpuBackend::maxpool2d_forward_impl(d, x, y);
}

void OnednnBackend::maxpool2d_backward_impl(const PoolDesc& d, const Tensor& x, const Tensor& dy,
                                            Tensor& dx) {
  if (one_native_dtype({&x, &dy, &dx}, [&](auto e) {
        max_pool_backward<decltype(e)>(cpu::pool_geom(d, x, dy), x, dy, dx);
      }))
    return;
  fall_back("maxpool2d_backward");
  CpuBackend::maxpool2d_backward_impl(d, x, dy, dx);
}

}  // namespace mpbench::onednn
