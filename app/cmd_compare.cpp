// `mpbench compare BASELINE CURRENT`: the CI regression gate. Statistics and verdicts live in
// app/compare.{h,cpp}; this file parses the thresholds, writes the outputs and picks the exit code.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "app/commands.h"
#include "app/compare.h"
#include "app/output_file.h"
#include "app/result_files.h"
#include "kernels/error.h"

namespace mpbench {

namespace {

// "5%", "5" and "0" are all percentages (CLI11's own number check cannot take the '%').
double parse_threshold(const std::string& option, const std::string& text, bool percent) {
  std::string s = text;
  if (percent && !s.empty() && s.back() == '%') s.pop_back();
  char* end = nullptr;
  errno = 0;
  const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) {
    throw_bad_input(fmt::format("{}: expected a non-negative {}, got '{}'", option,
                                percent ? "percentage (e.g. 5 or 5%)" : "number of points", text));
  }
  return percent ? v / 100.0 : v;
}

}  // namespace

int cmd_compare(const CompareArgs& args) {
  CompareOptions o;
  o.time_threshold = parse_threshold("--time-threshold", args.time_threshold, true);
  o.memory_threshold = parse_threshold("--memory-threshold", args.memory_threshold, true);
  o.accuracy_threshold = parse_threshold("--accuracy-threshold", args.accuracy_threshold, false);
  if (!args.loss_threshold.empty())
    o.loss_threshold = parse_threshold("--loss-threshold", args.loss_threshold, true);
  o.strict = args.strict;
  check_outputs({{"--md", args.md_path}, {"--json", args.json_path}},
                {args.baseline, args.current});

  const Report baseline = read_result_file(args.baseline);
  const Report current = read_result_file(args.current);
  const Comparison c = compare_reports(baseline, current, o);

  std::cout << format_compare_console(c) << std::flush;
  if (!args.md_path.empty())
    write_output(args.md_path, format_compare_markdown(c, args.baseline, args.current));
  if (!args.json_path.empty()) write_output(args.json_path, compare_to_json(c).dump(2) + "\n");
  return c.exit_code;
}

}  // namespace mpbench
