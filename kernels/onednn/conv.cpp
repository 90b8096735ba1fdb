// Convolutions on oneDNN: forward, backward-data and backward-weights, in f32 or bf16 (fp32
// accumulation), on the NHWC activations the models keep. The filter is the exception: oneDNN
// picks its own layout for it (format "any", a blocked one on AVX-512), and the KRSC filter is
// reordered into it before the forward and backward-data passes, and the filter gradient out of
// it after the backward-weights pass; those reorders are part of the op and timed with it.
#include <fmt/format.h>

#include "kernels/onednn/onednn_backend.h"

namespace mpbench::onednn {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct ConvMds {
  dnnl::memory::desc src, wei_any, wei_krsc, dst;
  dnnl::memory::dims strides, pad;
};

ConvMds conv_mds(const ConvGeom& g, DType t) {
  const dt d = data_type(t);
  return {{{g.n, g.c, g.h, g.w}, d, tag::nhwc},
          {{g.k, g.c, g.r, g.s}, d, tag::any},
          {{g.k, g.c, g.r, g.s}, d, tag::ohwi},
          {{g.n, g.k, g.p, g.q}, d, tag::nhwc},
          {g.stride, g.stride},
          {g.pad, g.pad}};
}

dnnl::convolution_forward::desc forward_desc(const ConvMds& m) {
  return {dnnl::prop_kind::forward_training,
          dnnl::algorithm::convolution_direct,
          m.src,
          m.wei_any,
          m.dst,
          m.strides,
          m.pad,
          m.pad};
}

}  // namespace

void OnednnBackend::conv(ConvOp op, const ConvGeom& g, const Tensor& src, const Tensor& w,
                         const Tensor& dst, Tensor* dw) {
  const DType t = src.dtype;
  const ConvMds m = conv_mds(g, t);
  static const char* names[] = {"conv_fwd", "conv_bwd_data", "conv_bwd_weights"};
  const std::string key =
      fmt::format("{} {} n{} h{} w{} c{} k{} r{} s{} stride {} pad {}", names[static_cast<int>(op)],
                  dtype_name(t), g.n, g.h, g.w, g.c, g.k, g.r, g.s, g.stride, g.pad);
  Cached& p = primitive(key, [&]() -> dnnl::primitive_desc_base {
    const dnnl::primitive_attr attr = user_scratchpad();
    dnnl::convolution_forward::primitive_desc fwd(forward_desc(m), attr, engine_);
    if (op == ConvOp::Forward) return fwd;
    if (op == ConvOp::BackwardData) {
      return dnnl::convolution_backward_data::primitive_desc(
          {dnnl::algorithm::convolution_direct, m.src, m.wei_any, m.dst, m.strides, m.pad, m.pad},
          attr, engine_, fwd);
    }
    return dnnl::convolution_backward_weights::primitive_desc(
        {dnnl::algorithm::convolution_direct, m.src, m.wei_any, m.dst, m.strides, m.pad, m.pad},
        attr, engine_, fwd);
  });
  const bool filter_out = op == ConvOp::BackwardFilter;
  const ChosenWeights filter =
      chosen_weights(p, filter_out ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS, m.wei_krsc,
                     filter_out ? dw->data : w.data, filter_out);
  if (filter.reordered && !filter_out) reorder_weights(p, filter, key);
  std::unordered_map<int, dnnl::memory> args;
  const dnnl::memory src_m(m.src, engine_, src.data), dst_m(m.dst, engine_, dst.data);
  switch (op) {
    case ConvOp::Forward:
      args = {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, filter.chosen}, {DNNL_ARG_DST, dst_m}};
      break;
    case ConvOp::BackwardData:
      args = {{DNNL_ARG_DIFF_SRC, src_m},
              {DNNL_ARG_WEIGHTS, filter.chosen},
              {DNNL_ARG_DIFF_DST, dst_m}};
      break;
    case ConvOp::BackwardFilter:
      args = {{DNNL_ARG_SRC, src_m},
              {DNNL_ARG_DIFF_WEIGHTS, filter.chosen},
              {DNNL_ARG_DIFF_DST, dst_m}};
      break;
  }
  execute(p, args);
  if (filter.reordered && filter_out) reorder_weights(p, filter, key);
  stream_.wait();
}

// fp16 convolutions (and bf16 ones below AVX-512) have no oneDNN CPU path: the reference's.
void OnednnBackend::conv2d_forward_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                        const Tensor& w, Tensor& y) {
  if (!native_dtype(x.dtype)) {
    fall_back("conv2d_forward");
    return CpuBackend::conv2d_forward_impl(d, g, x, w, y);
  }
  conv(ConvOp::Forward, g, x, w, y, nullptr);
}

void OnednnBackend::conv2d_backward_data_impl(const ConvDesc& d, const ConvGeom& g,
                                              const Tensor& dy, const Tensor& w, Tensor& dx) {
  if (!native_dtype(dy.dtype)) {
    fall_back("conv2d_backward_data");
    return CpuBackend::conv2d_backward_data_impl(d, g, dy, w, dx);
  }
  conv(ConvOp::BackwardData, g, dx, w, dy, nullptr);
}

// oneDNN 2.6's 1x1 backward-weights kernels write past their strided-input buffer for a
// channels-last input of fewer channels than their block (8 or 16): wrong filter gradients, or a
// crash (oneDNN issue #6035; seen here at AVX2). Such a convolution (a tiny config's projection
// shortcut: ResNet-50's have 64 channels and more) runs the reference's instead.
void OnednnBackend::conv2d_backward_filter_impl(const ConvDesc& d, const ConvGeom& g,
                                                const Tensor& x, const Tensor& dy, Tensor& dw) {
  const bool onednn_bug_6035 = g.r == 1 && g.s == 1 && g.stride > 1 && g.c < 16;
  if (!native_dtype(x.dtype) || onednn_bug_6035) {
    fall_back("conv2d_backward_filter");
    return CpuBackend::conv2d_backward_filter_impl(d, g, x, dy, dw);
  }
  conv(ConvOp::BackwardFilter, g, x, dw, dy, &dw);
}

}  // namespace mpbench::onednn
