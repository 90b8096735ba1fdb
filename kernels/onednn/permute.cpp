// permute on all threads. One that keeps the last dimension in place (every permute the models
// make: the heads' rows of Dh) copies whole rows, each thread a range of the destination's rows;
// oneDNN's reorder ran those at about 15 GB/s here (jit:uni, element by element). Any other is
// a oneDNN reorder: the source viewed in the destination's dimension order with the strides
// permuted, copied into the plain destination. A permute moves elements without converting
// them, so any dtype goes as the integer or float type of its size.
#include <cstring>

#include <fmt/format.h>

#include "kernels/cpu/ops.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

namespace mpbench::onednn {
namespace {

// dst's rows (its last dimension, src's last too) from src, a range of rows per thread.
void permute_rows(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  const int64_t row = dst.shape[dst.shape.rank - 1];
  const size_t es = dtype_size(src.dtype), row_bytes = static_cast<size_t>(row) * es;
  const auto* from = static_cast<const char*>(src.data);
  auto* to = static_cast<char*>(dst.data);
  parallel_ranges(dst.numel() / row, row_grain(row), [&](int64_t, int64_t begin, int64_t n) {
    cpu::PermuteRows rows(src.shape, dst.shape, perm, begin);
    for (int64_t r = begin; r < begin + n; ++r, rows.next())
      std::memcpy(to + static_cast<size_t>(r) * row_bytes,
                  from + static_cast<size_t>(rows.offset) * es, row_bytes);
  });
}

}  // namespace

void OnednnBackend::permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  if (src.numel() == 0) return;
  const int rank = src.shape.rank;
  if (perm[rank - 1] == rank - 1) return permute_rows(src, dst, perm);
  using dt = dnnl::memory::data_type;
  const size_t es = dtype_size(src.dtype);
  // 16-bit where bf16 has no native path: the reference's loops, as any op of such a dtype
  // (oneDNN 2.6's plain bf16 reorder did run under an AVX2 cap, but no model's permute gets here).
  if (es == 2 && !native_dtype(DType::BF16)) {
    fall_back("permute");
    CpuBackend::permute_impl(src, dst, perm);
    return;
  }
  const dt type = es == 4 ? dt::s32 : es == 2 ? dt::bf16 : dt::u8;
  const cpu::PermuteRows walk(src.shape, dst.shape, perm, 0);
  dnnl::memory::dims dims(rank), src_strides(walk.stride, walk.stride + rank), plain(rank);
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    dims[k] = dst.shape[k];
    plain[k] = s;
    s *= dst.shape[k];
  }
  const dnnl::memory::desc from(dims, type, src_strides), to(dims, type, plain);
  std::string key = fmt::format("permute {} {}", es, src.shape.str());
  for (int k = 0; k < rank; ++k) key += std::to_string(perm[k]);
  Cached& p = primitive(key, [&] {
    return dnnl::reorder::primitive_desc(engine_, from, engine_, to, user_scratchpad());
  });
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_FROM, dnnl::memory(from, engine_, src.data)},
      {DNNL_ARG_TO, dnnl::memory(to, engine_, dst.data)}};
  execute(p, args);
}

}  // namespace mpbench::onednn
