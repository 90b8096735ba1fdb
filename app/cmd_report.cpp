// `mpbench report`: result files in, one self-contained HTML page (and optionally the console
// tables as Markdown) out. Every input is read and checked, and every output path checked, before
// anything is written, so a bad file never leaves half a report behind. With --history the files
// are successive commits' results, drawn as trends (html_report.h: format_history_html).
#include <string>
#include <variant>
#include <vector>

#include "app/commands.h"
#include "app/console_table.h"
#include "app/html_report.h"
#include "app/output_file.h"
#include "app/report_writers.h"
#include "app/result_files.h"
#include "kernels/error.h"

namespace mpbench {

int cmd_report(const ReportArgs& args) {
  if (args.inputs.empty()) throw_bad_input("report: give at least one result JSON file");
  if (args.html_path.empty()) throw_bad_input("report: --html FILE is required");
  check_outputs({{"--html", args.html_path}, {"--md", args.md_path}}, args.inputs);
  refuse_repeated_files("report", args.inputs);

  if (args.history) {
    // Result files only: a profile has no place on a trend, and is refused as read_result_file
    // refuses it.
    std::vector<ReportInput> inputs;
    for (const std::string& path : args.inputs) inputs.push_back({path, read_result_file(path)});
    const std::vector<HistoryEntry> entries = order_history(std::move(inputs));
    const std::string html = format_history_html(entries);
    const std::string md = args.md_path.empty() ? "" : format_history_markdown(entries);
    write_outputs({{args.html_path, html}, {args.md_path, md}});
    return 0;
  }

  std::vector<ReportInput> inputs;
  std::vector<ProfileInput> profiles;
  std::vector<ExplainInput> explains;
  std::vector<MaxBatchInput> maxbatches;
  for (const std::string& path : args.inputs) {
    ReportFile file = read_report_file(path);
    if (auto* report = std::get_if<Report>(&file))
      inputs.push_back({path, std::move(*report)});
    else if (auto* profile = std::get_if<ProfileInput>(&file))
      profiles.push_back(std::move(*profile));
    else if (auto* explain = std::get_if<ExplainInput>(&file))
      explains.push_back(std::move(*explain));
    else
      maxbatches.push_back(std::move(std::get<MaxBatchInput>(file)));
  }
  if (inputs.empty() && explains.empty() && maxbatches.empty())
    throw_bad_input(
        "report: give at least one result, explain or maxbatch JSON file (profiles go beside "
        "their model's runs)");

  const std::string html = format_html(inputs, profiles, explains, maxbatches);
  std::string md;
  if (!args.md_path.empty()) {
    if (inputs.size() == 1) {
      md = format_markdown(inputs.front().report);
    } else {
      // One section per file: the tables of different tools or devices are not merged.
      for (const ReportInput& in : inputs) {
        if (!md.empty()) md += "\n";
        md += "## " + markdown_cell(in.path) + "\n\n" + format_markdown(in.report);
      }
    }
    for (const ExplainInput& e : explains)
      md += (md.empty() ? "" : "\n") +
            fmt::format("## Why a mode helped: {} ({})\n\n", markdown_cell(e.model),
                        markdown_cell(e.path)) +
            render_markdown_table(explain_table(e));
    for (const MaxBatchInput& m : maxbatches)
      md += (md.empty() ? "" : "\n") +
            fmt::format("## Largest batch that fits ({})\n\n", markdown_cell(m.path)) +
            render_markdown_table(maxbatch_table(m));
  }
  write_outputs({{args.html_path, html}, {args.md_path, md}});
  return 0;
}

}  // namespace mpbench
