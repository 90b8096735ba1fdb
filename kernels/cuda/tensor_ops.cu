// Small tensor ops of the model families: global average and max pooling, elementwise add with
// mixed float dtypes, and permute (a generic rank <= 5 index mapping, bit-exact: it only moves
// bits).
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/pool_window.h"

namespace mpbench::cuda {

namespace {

constexpr int kVec = 4;

// One thread per (n, c), summing its HW column in fp32: consecutive threads read consecutive
// channels, so every load of the loop is coalesced.
template <typename TX, typename TY>
__global__ void avgpool_forward_kernel(const TX* x, TY* y, int64_t n, int64_t hw, int64_t c) {
  const int64_t total = n * c;
  const float inv = 1.0f / static_cast<float>(hw);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / c, ch = i - b * c;
    const TX* p = x + b * hw * c + ch;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int64_t k = 0;
    for (; k + 3 < hw; k += 4) {
      s0 += to_f32(p[k * c]);
      s1 += to_f32(p[(k + 1) * c]);
      s2 += to_f32(p[(k + 2) * c]);
      s3 += to_f32(p[(k + 3) * c]);
    }
    for (; k < hw; ++k) s0 += to_f32(p[k * c]);
    y[i] = from_f32<TY>(((s0 + s1) + (s2 + s3)) * inv);
  }
}

template <typename TD, typename TX>
__global__ void avgpool_backward_kernel(const TD* dy, TX* dx, int64_t n, int64_t hw, int64_t c) {
  const int64_t total = n * hw * c, plane = hw * c;
  const float inv = 1.0f / static_cast<float>(hw);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / plane;
    const int64_t ch = i % c;
    dx[i] = from_f32<TX>(to_f32(dy[b * c + ch]) * inv);
  }
}

// One thread per output element (n, p, q, c), channels fastest: consecutive threads read
// consecutive channels. Writes the winner's element to y (a copy, exact in any dtype) and/or its
// offset in the window to winners (a byte: the first pass of the backward below). I: the index
// type, 32-bit where the tensors allow (a 64-bit division costs tens of instructions).
template <typename T, typename I>
__global__ void maxpool_window_kernel(const T* x, T* y, uint8_t* winners, I total, I c,
                                      PoolGeom g) {
  const I gp = static_cast<I>(g.p), gq = static_cast<I>(g.q), plane_len = static_cast<I>(g.h * g.w);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < total;
       i += I(gridDim.x) * I(blockDim.x)) {
    const I ch = i % c, oq = (i / c) % gq, op = (i / (c * gq)) % gp, b = i / (c * gq * gp);
    const T* plane = x + b * plane_len * c + ch;
    auto value = [&](int64_t h, int64_t w) { return to_f32(plane[(h * g.w + w) * c]); };
    const int off = pool_winner_offset(g, op, oq, value);
    if (y) y[i] = plane[pool_offset_position(g, op, oq, off) * c];
    if (winners) winners[i] = static_cast<uint8_t>(off);
  }
}

// The max pool's backward, second pass: one thread per input element gathering the dy of the
// windows it won (pool_gather: no atomics, the sums deterministic and the CPU reference's), from
// the winners the first pass stored (one search per window), or, with winners null, searching
// each window here (up to 4 searches of 9 values per input for ResNet's 3x3/2 pool).
template <typename T, typename I>
__global__ void maxpool_gather_kernel(const T* x, const uint8_t* winners, const T* dy, T* dx,
                                      I total, I c, PoolGeom g) {
  const I gh = static_cast<I>(g.h), gw = static_cast<I>(g.w), gp = static_cast<I>(g.p),
          gq = static_cast<I>(g.q);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < total;
       i += I(gridDim.x) * I(blockDim.x)) {
    const I ch = i % c, w = (i / c) % gw, h = (i / (c * gw)) % gh, b = i / (c * gw * gh);
    const I out0 = b * gp * gq;  // the image's first window
    auto dy_of = [&](I op, I oq) { return to_f32(dy[((out0 + op * gq + oq) * c) + ch]); };
    float acc;
    if (winners) {
      acc = pool_gather<I>(
          g, h, w, [&](I op, I oq) { return int{winners[(out0 + op * gq + oq) * c + ch]}; }, dy_of);
    } else {
      const T* plane = x + b * gh * gw * c + ch;
      auto value = [&](int64_t hh, int64_t ww) { return to_f32(plane[(hh * g.w + ww) * c]); };
      acc = pool_gather<I>(
          g, h, w, [&](I op, I oq) { return pool_winner_offset(g, op, oq, value); }, dy_of);
    }
    dx[i] = from_f32<T>(acc);
  }
}

// No __restrict__: out may alias a or b (each element is read before it is written).
template <typename TA, typename TB, typename TO>
__global__ void add_kernel(const TA* a, const TB* b, TO* out, int64_t n, bool vectorized) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t done = 0;
  if (vectorized) {
    const int64_t nvec = n / kVec;
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nvec; i += stride) {
      const Vec<TA, kVec> va = reinterpret_cast<const Vec<TA, kVec>*>(a)[i];
      const Vec<TB, kVec> vb = reinterpret_cast<const Vec<TB, kVec>*>(b)[i];
      Vec<TO, kVec> vo;
#pragma unroll
      for (int k = 0; k < kVec; ++k) vo.v[k] = from_f32<TO>(to_f32(va.v[k]) + to_f32(vb.v[k]));
      reinterpret_cast<Vec<TO, kVec>*>(out)[i] = vo;
    }
    done = nvec * kVec;
  }
  for (int64_t i = done + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = from_f32<TO>(to_f32(a[i]) + to_f32(b[i]));
}

struct PermuteParams {
  int rank = 0;
  int64_t dst_dims[Shape::kMaxRank] = {};
  int64_t src_strides[Shape::kMaxRank] = {};  // element stride in src of dst dimension i
};

// One thread per destination element (coalesced writes); the source offset is the dot product of
// the destination coordinates with the permuted source strides. 32-bit index math when it fits
// (fits_int32).
template <typename U, typename I>
__global__ void permute_kernel(const U* src, U* dst, I n, PermuteParams p) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    I rem = i, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const I dim = static_cast<I>(p.dst_dims[d]);
      const I q = rem / dim;
      off += (rem - q * dim) * static_cast<I>(p.src_strides[d]);
      rem = q;
    }
    dst[i] = src[off];
  }
}

// Whether a kernel may index n elements with 32 bits: up to 2^30, so that a grid-stride step (at
// most 16 blocks of kThreads per SM, grid_for) past the last one cannot overflow.
constexpr int64_t kInt32Elements = int64_t{1} << 30;
bool fits_int32(int64_t n) {
  return n <= kInt32Elements;
}

bool vec_aligned(const Tensor& t) {
  return aligned_to(t.data, dtype_size(t.dtype) * kVec);
}

}  // namespace

void avgpool_forward(DeviceContext& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.shape[0], hw = x.shape[1], c = x.shape[2];
  const int grid = ctx.grid_for(n * c, kThreads);
  dispatch_floats(std::array{x.dtype, y.dtype}, [&](auto xt, auto yt) {
    using TX = typename decltype(xt)::type;
    using TY = typename decltype(yt)::type;
    avgpool_forward_kernel<TX, TY>
        <<<grid, kThreads, 0, ctx.stream()>>>(x.ptr<const TX>(), y.ptr<TY>(), n, hw, c);
    CUDA_LAUNCH_CHECK();
  });
}

void avgpool_backward(DeviceContext& ctx, const Tensor& dy, Tensor& dx) {
  const int64_t n = dx.shape[0], hw = dx.shape[1], c = dx.shape[2];
  const int grid = ctx.grid_for(dx.numel(), kThreads);
  dispatch_floats(std::array{dy.dtype, dx.dtype}, [&](auto dt, auto xt) {
    using TD = typename decltype(dt)::type;
    using TX = typename decltype(xt)::type;
    avgpool_backward_kernel<TD, TX>
        <<<grid, kThreads, 0, ctx.stream()>>>(dy.ptr<const TD>(), dx.ptr<TX>(), n, hw, c);
    CUDA_LAUNCH_CHECK();
  });
}

namespace {

PoolGeom pool_geom(const PoolDesc& d, const Tensor& x, const Tensor& y) {
  return {x.shape[1], x.shape[2], y.shape[1], y.shape[2], d.kernel, d.stride, d.pad};
}

}  // namespace

void maxpool2d_forward(DeviceContext& ctx, const PoolDesc& d, const Tensor& x, Tensor& y) {
  const PoolGeom g = pool_geom(d, x, y);
  const int64_t c = x.shape[3];
  dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int grid = ctx.grid_for(y.numel(), kThreads);
    if (fits_int32(x.numel()) && fits_int32(y.numel()))
      maxpool_window_kernel<T, int><<<grid, kThreads, 0, ctx.stream()>>>(
          x.ptr<const T>(), y.ptr<T>(), nullptr, static_cast<int>(y.numel()), static_cast<int>(c),
          g);
    else
      maxpool_window_kernel<T, int64_t><<<grid, kThreads, 0, ctx.stream()>>>(
          x.ptr<const T>(), y.ptr<T>(), nullptr, y.numel(), c, g);
    CUDA_LAUNCH_CHECK();
  });
}

// Two passes per run of images whose winners (a byte per output element) fit the GEMM workspace,
// which nothing else uses between two kernels of this stream; one pass (each window searched per
// input) where there is no workspace, an image's winners do not fit it, or a window has more than
// 255 positions.
void maxpool2d_backward(DeviceContext& ctx, const PoolDesc& d, const Tensor& x, const Tensor& dy,
                        Tensor& dx) {
  const PoolGeom g = pool_geom(d, x, dy);
  const int64_t n = x.shape[0], c = x.shape[3];
  const int64_t in_per_image = g.h * g.w * c, out_per_image = g.p * g.q * c;
  int64_t images = ctx.workspace() ? static_cast<int64_t>(ctx.workspace_size()) / out_per_image : 0;
  images = std::min({images, n, kInt32Elements / in_per_image, kInt32Elements / out_per_image});
  const bool two_pass = images >= 1 && g.kernel * g.kernel <= 255;
  dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!two_pass) {
      const int grid = ctx.grid_for(dx.numel(), kThreads);
      if (fits_int32(x.numel()) && fits_int32(dy.numel()))
        maxpool_gather_kernel<T, int><<<grid, kThreads, 0, ctx.stream()>>>(
            x.ptr<const T>(), nullptr, dy.ptr<const T>(), dx.ptr<T>(), static_cast<int>(dx.numel()),
            static_cast<int>(c), g);
      else
        maxpool_gather_kernel<T, int64_t><<<grid, kThreads, 0, ctx.stream()>>>(
            x.ptr<const T>(), nullptr, dy.ptr<const T>(), dx.ptr<T>(), dx.numel(), c, g);
      CUDA_LAUNCH_CHECK();
      return;
    }
    auto* winners = static_cast<uint8_t*>(ctx.workspace());
    for (int64_t b0 = 0; b0 < n; b0 += images) {
      const int64_t nb = std::min(images, n - b0);
      const int outs = static_cast<int>(nb * out_per_image),
                ins = static_cast<int>(nb * in_per_image);
      const T* xb = x.ptr<const T>() + b0 * in_per_image;
      maxpool_window_kernel<T, int><<<ctx.grid_for(outs, kThreads), kThreads, 0, ctx.stream()>>>(
          xb, nullptr, winners, outs, static_cast<int>(c), g);
      CUDA_LAUNCH_CHECK();
      maxpool_gather_kernel<T, int><<<ctx.grid_for(ins, kThreads), kThreads, 0, ctx.stream()>>>(
          xb, winners, dy.ptr<const T>() + b0 * out_per_image, dx.ptr<T>() + b0 * in_per_image, ins,
          static_cast<int>(c), g);
      CUDA_LAUNCH_CHECK();
    }
  });
}

void add(DeviceContext& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool vec = vec_aligned(a) && vec_aligned(b) && vec_aligned(out);
  const int grid = ctx.grid_for(vec ? (n + kVec - 1) / kVec : n, kThreads);
  dispatch_floats(std::array{a.dtype, b.dtype, out.dtype}, [&](auto at, auto bt, auto ot) {
    using TA = typename decltype(at)::type;
    using TB = typename decltype(bt)::type;
    using TO = typename decltype(ot)::type;
    add_kernel<TA, TB, TO><<<grid, kThreads, 0, ctx.stream()>>>(
        a.ptr<const TA>(), b.ptr<const TB>(), out.ptr<TO>(), n, vec);
    CUDA_LAUNCH_CHECK();
  });
}

void permute(DeviceContext& ctx, const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  const int rank = src.shape.rank;
  const int64_t n = src.numel();
  if (n == 0) return;
  PermuteParams p;
  p.rank = std::max(rank, 1);
  int64_t src_strides[Shape::kMaxRank] = {};
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    src_strides[d] = s;
    s *= src.shape[d];
  }
  if (rank == 0) {
    p.dst_dims[0] = 1;
    p.src_strides[0] = 1;
  }
  for (int i = 0; i < rank; ++i) {
    p.dst_dims[i] = dst.shape[i];
    p.src_strides[i] = src_strides[perm[i]];
  }
  const int grid = ctx.grid_for(n, kThreads);
  const bool small = fits_int32(n);
  auto launch = [&](auto word) {
    using U = decltype(word);
    if (small) {
      permute_kernel<U, uint32_t><<<grid, kThreads, 0, ctx.stream()>>>(
          src.ptr<const U>(), dst.ptr<U>(), static_cast<uint32_t>(n), p);
    } else {
      permute_kernel<U, int64_t>
          <<<grid, kThreads, 0, ctx.stream()>>>(src.ptr<const U>(), dst.ptr<U>(), n, p);
    }
    CUDA_LAUNCH_CHECK();
  };
  if (dtype_size(src.dtype) == 4)
    launch(uint32_t{});
  else if (dtype_size(src.dtype) == 2)
    launch(uint16_t{});
  else
    launch(uint8_t{});
}

}  // namespace mpbench::cuda
