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
    case DType::F8E4M3:
      return "fp8_e4m3";
    case DType::F8E5M2:
      return "fp8_e5m2";
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

Tensor Tensor::viewed_as(Shape s, DType dt) const {
  Tensor t = *this;
  t.shape = s;
  t.dtype = dt;
  MPB_CHECK(defined() && t.bytes() <= bytes(), "a view of {} {} as {} {} does not fit", shape.str(),
            dtype_name(dtype), s.str(), dtype_name(dt));
  return t;
}

// Columns: mode, name, compute dtype, GEMM math, master weights, loss scaling, tensor-core
// multiple (of the 16-bit GEMMs; FP8 GEMMs want 16), fp8 linears, minimum compute capability.
static const PrecisionInfo kPrecisions[] = {
    {Precision::FP32, "fp32", DType::F32, GemmMath::Strict, false, false, 0, false, 0, 0},
    {Precision::TF32, "tf32", DType::F32, GemmMath::TF32, false, false, 4, false, 0, 0},
    {Precision::AMP_FP16, "amp_fp16", DType::F16, GemmMath::LowPrecision, true, true, 8, false, 0,
     0},
    {Precision::AMP_BF16, "amp_bf16", DType::BF16, GemmMath::LowPrecision, true, false, 8, false, 0,
     0},
    {Precision::AMP_FP8, "amp_fp8", DType::BF16, GemmMath::LowPrecision, true, false, 8, true, 8,
     9},
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
                                             Precision::AMP_BF16, Precision::AMP_FP8};
  return all;
}

const std::vector<Precision>& default_precisions() {
  static const std::vector<Precision> defaults = {Precision::FP32, Precision::TF32,
                                                  Precision::AMP_FP16, Precision::AMP_BF16};
  return defaults;
}

std::vector<std::string> precision_names() {
  std::vector<std::string> names;
  for (Precision p : all_precisions()) names.push_back(precision_name(p));
  return names;
}

bool precision_supported(Precision p, int cc_major, int cc_minor) {
  const PrecisionInfo& i = precision_info(p);
  return cc_major > i.min_cc_major || (cc_major == i.min_cc_major && cc_minor >= i.min_cc_minor);
}

std::vector<std::string> misaligned_dims(Precision p, const std::vector<NamedDim>& dims) {
  std::vector<std::string> out;
  const int multiple = precision_info(p).tensor_core_multiple;
  if (multiple == 0) return out;
  for (const NamedDim& d : dims)
    if (d.value % multiple != 0) out.push_back(d.name + "=" + std::to_string(d.value));
  return out;
}

GemmMath gemm_math_for(Precision p, DType operand) {
  if (operand == DType::F32) return p == Precision::TF32 ? GemmMath::TF32 : GemmMath::Strict;
  return GemmMath::LowPrecision;
}

}  // namespace mpbench
