#pragma once
// The one table that maps a precision mode to dtypes, GEMM math and loss-scaling defaults.
// Backends map GemmMath to cuBLASLt compute types / cuDNN math types in their own single table.
#include <optional>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace mpbench {

enum class Precision { FP32, TF32, AMP_FP16, AMP_BF16 };

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
};

const PrecisionInfo& precision_info(Precision p);
std::optional<Precision> parse_precision(const std::string& name);
const std::vector<Precision>& all_precisions();
inline const char* precision_name(Precision p) {
  return precision_info(p).name;
}

// The math a GEMM uses for a given operand dtype under a mode (fp32 operands in an AMP mode,
// e.g. a layer pinned to fp32, run strict).
GemmMath gemm_math_for(Precision p, DType operand);

}  // namespace mpbench
