// libFuzzer target: the result and profile file readers and every formatter of `compare` and
// `report` (console, CSV, Markdown, JSON, the comparison, the HTML page). Bad input must be an
// Error(BadInput); any other exception escapes, so libFuzzer reports it as a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/compare.h"
#include "app/console_table.h"
#include "app/html_report.h"
#include "app/report_writers.h"
#include "app/result_files.h"
#include "kernels/error.h"
#include "models/input_file.h"
#include "train/results.h"

namespace {

using namespace mpbench;

template <typename F>
void expect_bad_input(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
  }
}

void format_everything(const Report& r) {
  (void)format_console(r);
  (void)format_console(r, /*ascii=*/true);
  (void)format_csv(r);
  (void)format_markdown(r);
  (void)format_json(r);
  // Against itself (every row matched), and against nothing (every row missing, then new).
  const Report none;
  const std::pair<const Report*, const Report*> pairs[] = {{&r, &r}, {&r, &none}, {&none, &r}};
  for (const auto& [base, current] : pairs) {
    const Comparison c = compare_reports(*base, *current, CompareOptions{});
    (void)format_compare_console(c);
    (void)format_compare_markdown(c, "baseline.json", "current.json");
    (void)format_compare_junit(c, "baseline.json", "current.json");
    (void)compare_to_json(c).dump(2);
  }
}

// A profile is drawn only beside runs of its model, so give it one ok run per profiled mode.
ReportInput runs_for(const ProfileInput& profile) {
  ReportInput in;
  in.path = "runs.json";
  for (const ProfileInput::Mode& m : profile.modes) {
    RunResult run;
    run.model = profile.model;
    run.family = "mlp";
    run.precision = m.precision;
    run.device = "cpu";
    run.batch_size = 32;
    run.epochs = {EpochResult{10, 1, 0.5, 0.5, 0.9, 8}, EpochResult{11, 1, 0.4, 0.4, 0.95, 8}};
    run.epoch_time_ms = compute_time_stats({10, 11});
    in.report.runs.push_back(run);
  }
  return in;
}

// The file readers take a path: each input goes through one temporary file of this process.
struct TempFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("mpbench_fuzz_results." + std::to_string(getpid()) + ".json"))
                         .string();
  ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // In memory: the parser (with its nesting cap), the reader and the formatters.
  expect_bad_input([&] { format_everything(report_from_json(parse_json_text(text, "fuzz"))); });

  // Through the files `compare` and `report` read; `report` tells a profile from a result file.
  static const TempFile file;
  {
    std::ofstream out(file.path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  expect_bad_input([&] { (void)read_result_file(file.path); });
  expect_bad_input([&] {
    std::vector<ReportInput> reports;
    std::vector<ProfileInput> profiles;
    std::vector<ExplainInput> explains;
    std::vector<MaxBatchInput> maxbatches;
    ReportFile read = read_report_file(file.path);
    if (auto* report = std::get_if<Report>(&read)) {
      reports.push_back({file.path, std::move(*report)});
    } else if (auto* profile = std::get_if<ProfileInput>(&read)) {
      profiles.push_back(std::move(*profile));
      reports.push_back(runs_for(profiles.back()));
    } else if (auto* explain = std::get_if<ExplainInput>(&read)) {
      explains.push_back(std::move(*explain));
      (void)render_markdown_table(explain_table(explains.back()));
    } else {
      maxbatches.push_back(std::move(std::get<MaxBatchInput>(read)));
      (void)render_markdown_table(maxbatch_table(maxbatches.back()));
    }
    (void)format_html(reports, profiles, explains, maxbatches);
  });
  return 0;
}
