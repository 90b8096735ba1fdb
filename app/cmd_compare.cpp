// `mpbench compare BASELINE CURRENT`: the CI regression gate. Statistics and verdicts live in
// app/compare.{h,cpp}; this file parses the thresholds, writes the outputs and picks the exit code.
#include <glob.h>
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "app/commands.h"
#include "app/compare.h"
#include "app/console_table.h"
#include "app/output_file.h"
#include "app/result_files.h"
#include "kernels/error.h"

namespace mpbench {

namespace {

// "5%", "5" and "0" are all percentages (CLI11's own number check cannot take the '%'). Plain
// decimal only, as every numeric option: strtod alone would take "0x10" (16), "inf" or " 5".
double parse_threshold(const std::string& option, const std::string& text, bool percent,
                       std::vector<std::string>& warnings) {
  std::string s = text;
  if (percent && !s.empty() && s.back() == '%') s.pop_back();
  const size_t dot = s.find('.');
  const std::string whole = s.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "0" : s.substr(dot + 1);
  const auto digits = [](const std::string& d) {
    return !d.empty() && d.find_first_not_of("0123456789") == std::string::npos;
  };
  const bool plain = digits(whole) && digits(frac) && (whole.size() == 1 || whole[0] != '0');
  char* end = nullptr;
  errno = 0;
  const double v = plain ? std::strtod(s.c_str(), &end) : NAN;
  if (!plain || errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) {
    throw_bad_input(fmt::format("{}: expected a non-negative decimal {}, got '{}'", option,
                                percent ? "percentage (e.g. 5 or 5%)" : "number of points",
                                text.size() > 200 ? text.substr(0, 200) + "..." : text));
  }
  // A fraction given for a percentage (the JSON's options hold fractions: 0.1 for 10%) makes a
  // gate 100 times as tight: said (once the inputs are read: bad input is its one line alone),
  // as it is what was asked for.
  if (percent && text.back() != '%' && v > 0 && v < 1)
    warnings.push_back(fmt::format(
        "mpbench: warning: {} {} is {}%, a percentage; for {:.4g}% give {:.4g} or {:.4g}%\n",
        option, text, text, v * 100, v * 100, v * 100));
  return percent ? v / 100.0 : v;
}

// A --baseline value with glob characters is expanded (sorted) when it names no file itself, so
// that a quoted 'base-*.json' works without the shell; a pattern matching nothing is bad input.
std::vector<std::string> expand_glob(const std::string& option, const std::string& pattern) {
  struct stat st {};
  if (pattern.find_first_of("*?[") == std::string::npos || ::stat(pattern.c_str(), &st) == 0)
    return {pattern};
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (out.empty()) throw_bad_input(fmt::format("{}: no file matches '{}'", option, pattern));
  return out;
}

}  // namespace

int cmd_compare(const CompareArgs& args) {
  CompareOptions o;
  std::vector<std::string> warnings;
  o.time_threshold = parse_threshold("--time-threshold", args.time_threshold, true, warnings);
  o.memory_threshold = parse_threshold("--memory-threshold", args.memory_threshold, true, warnings);
  o.accuracy_threshold =
      parse_threshold("--accuracy-threshold", args.accuracy_threshold, false, warnings);
  if (!args.loss_threshold.empty())
    o.loss_threshold = parse_threshold("--loss-threshold", args.loss_threshold, true, warnings);
  o.strict = args.strict;
  o.paired = args.paired;
  std::vector<std::string> baseline_paths, current_paths;
  for (const std::string& b : args.baselines)
    for (std::string& p : expand_glob("--baseline", b)) baseline_paths.push_back(std::move(p));
  for (const std::string& c : args.currents)
    for (std::string& p : expand_glob("--current", c)) current_paths.push_back(std::move(p));
  // Several current files are named by --current, so that `--baseline a.json b.json c.json`
  // (meant: two baselines) stays the mistake it was.
  if (!args.currents.empty()) {
    if (args.baselines.empty())
      throw_bad_input("compare: --current needs --baseline beside it (the files of each side)");
    if (!args.files.empty())
      throw_bad_input(fmt::format(
          "compare: with --current, give every current file after --current (got {} more)",
          args.files.size()));
  } else if (!args.baselines.empty()) {
    if (args.files.size() != 1)
      throw_bad_input(fmt::format(
          "compare: with --baseline, give the current file alone (got {} files); several go "
          "each after --current",
          args.files.size()));
    current_paths.push_back(args.files.front());
  } else {
    if (args.files.size() > 2)
      throw_bad_input(fmt::format(
          "compare takes BASELINE CURRENT (or CURRENT alone with --baseline), got {} files; "
          "several baseline files go each after --baseline, or as a quoted glob",
          args.files.size()));
    if (args.files.size() != 2)
      throw_bad_input(
          "compare: expected a baseline and a current file, or the current file with --baseline");
    baseline_paths.push_back(args.files.front());
    current_paths.push_back(args.files.back());
  }
  // A file given twice would count its runs as two repetitions, and a file on both sides (a
  // glob such as 'results/*.json' catches the current) is pooled into its own baseline, drawing
  // every ratio towards 1. One file against itself alone is the method's noise floor, run on
  // purpose, or a CI job whose two sides name one file and so can never fail on time: said.
  refuse_repeated_files("--baseline", baseline_paths);
  refuse_repeated_files("--current", current_paths);
  std::vector<std::string> inputs = baseline_paths;
  inputs.insert(inputs.end(), current_paths.begin(), current_paths.end());
  if (inputs.size() == 2 && same_file(baseline_paths.front(), current_paths.front()))
    warnings.push_back(fmt::format(
        "mpbench: warning: the baseline and the current are one file ({}): every time row is "
        "judged against itself\n",
        printable_line(current_paths.front())));
  else
    refuse_repeated_files("compare: a current file among the --baseline files", inputs);
  check_outputs({{"--md", args.md_path}, {"--json", args.json_path}, {"--junit", args.junit_path}},
                inputs);

  std::vector<Report> baselines, currents;
  for (const std::string& p : baseline_paths) baselines.push_back(read_result_file(p));
  for (const std::string& p : current_paths) currents.push_back(read_result_file(p));
  std::vector<const Report*> base_ptrs, cur_ptrs;
  for (const Report& b : baselines) base_ptrs.push_back(&b);
  for (const Report& c : currents) cur_ptrs.push_back(&c);
  const Comparison c = compare_reports(base_ptrs, cur_ptrs, o, inputs);
  for (const std::string& w : warnings) std::cerr << w;

  auto side_name = [](const std::vector<std::string>& paths) {
    return paths.size() > 1 ? fmt::format("{} (+{} more)", paths.front(), paths.size() - 1)
                            : paths.front();
  };
  const std::string baseline_name = side_name(baseline_paths),
                    current_name = side_name(current_paths);
  std::cout << format_compare_console(c, !utf8_output()) << std::flush;
  nlohmann::json j;
  if (!args.json_path.empty()) {
    j = compare_to_json(c);
    j.update(json_header("compare"));
  }
  write_outputs(
      {{args.md_path,
        args.md_path.empty() ? "" : format_compare_markdown(c, baseline_name, current_name)},
       {args.json_path, args.json_path.empty() ? "" : json_text(j)},
       {args.junit_path,
        args.junit_path.empty() ? "" : format_compare_junit(c, baseline_name, current_name)}});
  return c.exit_code;
}

}  // namespace mpbench
