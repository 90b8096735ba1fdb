#include "train/number_text.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace mpbench {

std::string format_sig3(double v) {
  if (!std::isfinite(v) || v == 0) return fmt::format("{:g}", v);
  // No figure of ours is that small or large; stod below would overflow near DBL_MAX.
  if (std::fabs(v) < 1e-9 || std::fabs(v) >= 1e15) return fmt::format("{:.3g}", v);
  // The magnitude of v rounded to three digits: 0.0009999 is 0.00100, not 0.0009999's 0.001000.
  const double rounded = std::stod(fmt::format("{:.2e}", v));
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(rounded))));
  if (magnitude >= 2) return fmt::format("{:.0f}", v);
  return fmt::format("{:.{}f}", v, 2 - magnitude);
}

std::string format_ratio(double v) {
  if (v >= 999.995) return fmt::format("{:.0f}", v);  // what {:.2f} would print as 1000.00
  return v >= 0.01 || !(v > 0) ? fmt::format("{:.2f}", v) : format_sig3(v);
}

std::string format_op_ms(double ms) {
  return ms > 0 && ms < 0.01 ? format_sig3(ms) : fmt::format("{:.3f}", ms);
}

}  // namespace mpbench
