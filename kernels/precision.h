#pragma once
// The one table that maps a precision mode to dtypes, GEMM math and loss-scaling defaults.
// Backends map GemmMath to cuBLASLt compute types / cuDNN math types in their own single table.
#include <optional>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace mpbench {

enum class Precision { FP32, TF32, AMP_FP16, AMP_BF16, AMP_FP8 };

// How a GEMM / convolution computes: fp32 with no TF32 anywhere, fp32 data on TF32 tensor
// cores, or 16-bit inputs with fp32 accumulation.
enum class GemmMath { Strict, TF32, LowPrecision };

struct PrecisionInfo {
  Precision mode;
  const char* name;     // spec / CLI name
  DType compute_dtype;  // activations and the weight copies used in math
  GemmMath gemm_math;
  bool master_weights;        // fp32 master + low-precision copy
  bool loss_scaling_default;  // dynamic loss scaling unless the spec says otherwise
  // The multiple of which every GEMM size (M, N, K) and convolution channel count should be for
  // the tensor cores to run at their full rate (NVIDIA's "Matrix Multiplication Background" and
  // cuDNN's guides): 8 elements of 16 bits, 4 of tf32; 0: the mode uses no tensor cores.
  int tensor_core_multiple;
  // amp_fp8: the Linear layers' GEMMs take E4M3 inputs forward and E5M2 gradients backward, with
  // per-tensor delayed scaling (Transformer Engine's HYBRID recipe); the rest is amp_bf16.
  bool fp8_linears;
  // The compute capability the mode needs on a GPU (FP8 tensor cores: 8.9, Ada and Hopper); a
  // card below it gives the mode an `unsupported` row. 0: any.
  int min_cc_major, min_cc_minor;
};

const PrecisionInfo& precision_info(Precision p);
std::optional<Precision> parse_precision(const std::string& name);
// Every mode, and the modes a spec runs when it lists none (every mode but amp_fp8, which only
// runs when asked for).
const std::vector<Precision>& all_precisions();
const std::vector<Precision>& default_precisions();
// The names of all_precisions(), in order, for messages that list them.
std::vector<std::string> precision_names();
// Whether a GPU of that compute capability can run mode p (PrecisionInfo::min_cc_*).
bool precision_supported(Precision p, int cc_major, int cc_minor);
inline const char* precision_name(Precision p) {
  return precision_info(p).name;
}

// A size of a GEMM or convolution, named for messages: {"N", 50257}, {"C_in", 3}.
struct NamedDim {
  std::string name;
  int64_t value = 0;
};
// The multiple FP8 GEMMs need (16 one-byte elements: cuBLASLt's 16-byte leading dimensions).
constexpr int kFp8TensorCoreMultiple = 16;
// The tensor-core alignment check, the one place of the rule: the sizes among `dims` that are
// not multiples of precision_info(p).tensor_core_multiple, as "N=50257"; none for a mode without
// tensor cores. (A GEMM runs in FP8 only where every size is a multiple of
// kFp8TensorCoreMultiple, else in bf16: bf16's multiple is the one an amp_fp8 GEMM can miss.)
std::vector<std::string> misaligned_dims(Precision p, const std::vector<NamedDim>& dims);

// The math a GEMM uses for a given operand dtype under a mode (fp32 operands in an AMP mode,
// e.g. a layer pinned to fp32, run strict).
GemmMath gemm_math_for(Precision p, DType operand);

}  // namespace mpbench
