// permute as a oneDNN reorder: the source viewed in the destination's dimension order with the
// strides permuted, copied into the plain destination on all threads. A permute moves elements
// without converting them, so any dtype goes as the integer or float type of its size.
#include <fmt/format.h>

#include "kernels/onednn/onednn_backend.h"

namespace mpbench::onednn {

void OnednnBackend::permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  if (src.numel() == 0) return;
  const int rank = src.shape.rank;
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
