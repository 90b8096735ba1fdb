// Global average pooling on oneDNN's pooling primitive (forward and backward, f32 or bf16 with
// f32 sums): x (N, HW, C) is channels-last (N, C, HW, 1) pooled by one HW x 1 window. The
// primitive takes one dtype for x and y; mixed dtypes run the reference's loop.
#include <fmt/format.h>

#include "kernels/onednn/onednn_backend.h"

namespace mpbench::onednn {

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
    ++fallback_calls_["avgpool_forward"];
    CpuBackend::avgpool_forward_impl(x, y);
    return;
  }
  avg_pool(false, x, y);
}

void OnednnBackend::avgpool_backward_impl(const Tensor& dy, Tensor& dx) {
  if (!native_dtype(dx.dtype) || dx.dtype != dy.dtype) {
    ++fallback_calls_["avgpool_backward"];
    CpuBackend::avgpool_backward_impl(dy, dx);
    return;
  }
  avg_pool(true, dx, dy);
}

}  // namespace mpbench::onednn
