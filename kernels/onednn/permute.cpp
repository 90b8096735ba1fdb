// permute on all threads. One that keeps the last dimension in place (every permute the models
// make: the heads' rows of Dh) copies whole rows, each thread a range of the destination's rows;
// oneDNN's reorder ran those at about 15 GB/s here (jit:uni, element by element). Any other is
// a oneDNN reorder: the source viewed in the destination's dimension order with the strides
// permuted, copied into the plain destination. A permute moves elements without converting
// them, so any dtype goes as the integer or float type of its size.
#include <cstring>

#include <fmt/format.h>

#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

namespace mpbench::onednn {
namespace {

// dst's rows (its last dimension, src's last too) from src, dst's index advanced as an odometer
// over its leading dimensions and the source offset with it.
void permute_rows(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  const int rank = src.shape.rank, lead = rank - 1;
  int64_t contiguous[Shape::kMaxRank], strides[Shape::kMaxRank];
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    contiguous[k] = s;
    s *= src.shape[k];
  }
  for (int k = 0; k < rank; ++k) strides[k] = contiguous[perm[k]];
  const size_t row_bytes = static_cast<size_t>(dst.shape[lead]) * dtype_size(src.dtype);
  const auto* from = static_cast<const char*>(src.data);
  auto* to = static_cast<char*>(dst.data);
  const int64_t rows = dst.numel() / dst.shape[lead];
  parallel_ranges(rows, row_grain(dst.shape[lead]), [&](int64_t, int64_t begin, int64_t n) {
    int64_t index[Shape::kMaxRank] = {}, offset = 0, rest = begin;
    for (int k = lead - 1; k >= 0; --k) {
      index[k] = rest % dst.shape[k];
      rest /= dst.shape[k];
      offset += index[k] * strides[k];
    }
    const size_t es = dtype_size(src.dtype);
    for (int64_t r = begin; r < begin + n; ++r) {
      std::memcpy(to + static_cast<size_t>(r) * row_bytes, from + static_cast<size_t>(offset) * es,
                  row_bytes);
      for (int k = lead - 1; k >= 0; --k) {
        offset += strides[k];
        if (++index[k] < dst.shape[k]) break;
        offset -= index[k] * strides[k];
        index[k] = 0;
      }
    }
  });
}

}  // namespace

void OnednnBackend::permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  if (src.numel() == 0) return;
  const int rank = src.shape.rank;
  if (perm[rank - 1] == rank - 1) return permute_rows(src, dst, perm);
  using dt = dnnl::memory::data_type;
  const size_t es = dtype_size(src.dtype);
  if (es == 2 && !native_dtype(DType::BF16)) {  // no 16-bit reorder below AVX-512
    ++fallback_calls_["permute"];
    CpuBackend::permute_impl(src, dst, perm);
    return;
  }
  const dt type = es == 4 ? dt::s32 : es == 2 ? dt::bf16 : dt::u8;
  dnnl::memory::dims dims(rank), src_strides(rank), plain(rank), contiguous(rank);
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    contiguous[k] = s;
    s *= src.shape[k];
  }
  s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    dims[k] = dst.shape[k];
    src_strides[k] = contiguous[perm[k]];
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
