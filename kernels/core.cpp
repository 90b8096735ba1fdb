// Small shared pieces of the kernels layer: names, tensor views, the precision table.
#include <fmt/format.h>

#include "kernels/backend.h"
#include "kernels/precision.h"
#include "kernels/tensor.h"

namespace mpbench {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "fp32";
    case DType::F16:
      return "fp16";
    case DType::BF16:
      return "bf16";
    case DType::I32:
      return "int32";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None:
      return "none";
    case Activation::Relu:
      return "relu";
    case Activation::Gelu:
      return "gelu";
  }
  return "?";
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank; ++i) s += fmt::format("{}{}", i ? ", " : "", dims[i]);
  return s + ")";
}

Tensor Tensor::reshaped(Shape s) const {
  MPB_CHECK(s.numel() == numel(), "reshape {} -> {}", shape.str(), s.str());
  Tensor t = *this;
  t.shape = s;
  return t;
}

Tensor Tensor::slice(int64_t offset, Shape s) const {
  MPB_CHECK(offset >= 0 && offset + s.numel() <= numel(), "slice [{}, +{}) of {}", offset,
            s.numel(), shape.str());
  Tensor t = *this;
  t.data = static_cast<char*>(data) + offset * static_cast<int64_t>(dtype_size(dtype));
  t.shape = s;
  return t;
}

static const PrecisionInfo kPrecisions[] = {
    // mode               name        compute     gemm math              master loss scaling
    {Precision::FP32, "fp32", DType::F32, GemmMath::Strict, false, false},
    {Precision::TF32, "tf32", DType::F32, GemmMath::TF32, false, false},
    {Precision::AMP_FP16, "amp_fp16", DType::F16, GemmMath::LowPrecision, true, true},
    {Precision::AMP_BF16, "amp_bf16", DType::BF16, GemmMath::LowPrecision, true, false},
};

const PrecisionInfo& precision_info(Precision p) {
  return kPrecisions[static_cast<int>(p)];
}

std::optional<Precision> parse_precision(const std::string& name) {
  for (const auto& info : kPrecisions)
    if (name == info.name) return info.mode;
  return std::nullopt;
}

const std::vector<Precision>& all_precisions() {
  static const std::vector<Precision> all = {Precision::FP32, Precision::TF32, Precision::AMP_FP16,
                                             Precision::AMP_BF16};
  return all;
}

GemmMath gemm_math_for(Precision p, DType operand) {
  if (operand == DType::F32) return p == Precision::TF32 ? GemmMath::TF32 : GemmMath::Strict;
  return GemmMath::LowPrecision;
}

ConvGeom conv_geometry(const char* op, const ConvDesc& d, const Tensor& x, const char* xn,
                       const Tensor& w, const char* wn, const Tensor& y, const char* yn) {
  MPB_CHECK(x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16,
            "{}: {} must be a float tensor, got {}", op, xn, dtype_name(x.dtype));
  MPB_CHECK(w.dtype == x.dtype && y.dtype == x.dtype, "{}: {} {}, {} {}, {} {} must share a dtype",
            op, xn, dtype_name(x.dtype), wn, dtype_name(w.dtype), yn, dtype_name(y.dtype));
  MPB_CHECK(x.shape.rank == 4 && w.shape.rank == 4 && y.shape.rank == 4,
            "{}: {} {}, {} {}, {} {} must be rank 4 (NHWC, KRSC, NPQK)", op, xn, x.shape.str(), wn,
            w.shape.str(), yn, y.shape.str());
  MPB_CHECK(d.stride >= 1 && d.pad >= 0, "{}: stride {} must be >= 1 and pad {} >= 0", op, d.stride,
            d.pad);
  ConvGeom g{};
  g.n = x.shape[0], g.h = x.shape[1], g.w = x.shape[2], g.c = x.shape[3];
  g.k = w.shape[0], g.r = w.shape[1], g.s = w.shape[2];
  g.stride = d.stride, g.pad = d.pad;
  MPB_CHECK(g.n > 0 && g.h > 0 && g.w > 0 && g.c > 0 && g.k > 0 && g.r > 0 && g.s > 0,
            "{}: empty operand {} {}, {} {}", op, xn, x.shape.str(), wn, w.shape.str());
  MPB_CHECK(w.shape[3] == g.c, "{}: {} {} has {} input channels, {} {} has {}", op, wn,
            w.shape.str(), w.shape[3], xn, x.shape.str(), g.c);
  MPB_CHECK(g.h + 2 * g.pad >= g.r && g.w + 2 * g.pad >= g.s,
            "{}: filter {}x{} is larger than the padded input {}x{}", op, g.r, g.s, g.h + 2 * g.pad,
            g.w + 2 * g.pad);
  g.p = (g.h + 2 * g.pad - g.r) / g.stride + 1;
  g.q = (g.w + 2 * g.pad - g.s) / g.stride + 1;
  MPB_CHECK(y.shape[0] == g.n && y.shape[1] == g.p && y.shape[2] == g.q && y.shape[3] == g.k,
            "{}: {} is {}, expected ({}, {}, {}, {}) for {} {}, {} {}, stride {}, pad {}", op, yn,
            y.shape.str(), g.n, g.p, g.q, g.k, xn, x.shape.str(), wn, w.shape.str(), g.stride,
            g.pad);
  MPB_CHECK(d.math != GemmMath::LowPrecision || x.dtype != DType::F32,
            "{}: low-precision math needs fp16/bf16 operands, got fp32", op);
  MPB_CHECK(d.math != GemmMath::TF32 || x.dtype == DType::F32,
            "{}: TF32 math needs fp32 operands, got {}", op, dtype_name(x.dtype));
  return g;
}

}  // namespace mpbench
