#pragma once
// Numbers as the tables and messages print them, where a fixed format would lose a small value
// (a tiny op's rate as 6.34e-05, its time as 0.000).
#include <string>

namespace mpbench {

// Three significant digits without an exponent: "0.0000634", "0.412", "12.3", "1234".
std::string format_sig3(double v);
// A ratio (a speedup or its interval's bound), without the "x": two decimals, three significant
// digits below 0.01, whole from 1000 (a few rounds' interval stretched to 0.0015-8012, or a
// speedup of a stalled step, read "0.00").
std::string format_ratio(double v);
// An op's milliseconds: to the microsecond, and below 0.01 ms in three significant digits, so that
// an op with a share of the step never reads "0.000".
std::string format_op_ms(double ms);

}  // namespace mpbench
