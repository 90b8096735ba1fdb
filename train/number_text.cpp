#include "train/number_text.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace mpbench {

std::string format_sig3(double v) {
  if (!std::isfinite(v) || v == 0) return fmt::format("{:g}", v);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  if (magnitude >= 2) return fmt::format("{:.0f}", v);
  return fmt::format("{:.{}f}", v, std::min(2 - magnitude, 12));
}

std::string format_ratio(double v) {
  if (v >= 1000) return fmt::format("{:.0f}", v);
  return v >= 0.01 || !(v > 0) ? fmt::format("{:.2f}", v) : format_sig3(v);
}

std::string format_op_ms(double ms) {
  return ms > 0 && ms < 0.01 ? format_sig3(ms) : fmt::format("{:.3f}", ms);
}

}  // namespace mpbench
