#pragma once
// `mpbench report`: one self-contained HTML page (inline CSS and SVG, no scripts, no network) that
// shows one or more result files side by side: per model, bars of epoch time, throughput and peak
// memory per run, the memory breakdown by category, loss curves and loss-scale trajectories, the
// console tables, and each file's environment.
#include <string>
#include <utility>
#include <vector>

#include "app/console_table.h"
#include "app/result_files.h"
#include "train/results.h"

namespace mpbench {

struct ReportInput {
  std::string path;  // shown in the page and used to tell apart runs that would share a label
  Report report;
};

// What the page calls each of these files: its name without the extension, with as many of its
// folders as tell it from the others (h100/run.json, h200/run.json: "h100/run", "h200/run"); the
// path as given where nothing shorter does. Labels, captions and the environment use it, so that
// the runs of two machines' run.json stay apart.
std::vector<std::string> short_file_names(const std::vector<std::string>& paths);

// The whole page. Every text taken from the inputs is HTML-escaped; no coordinate is ever NaN.
// Each profile adds a chart of where a step's time goes to its model's section; a profile of a
// model with no runs among `inputs` is bad input.
// Explain and maxbatch files are sections of their own after the models (they need no runs).
std::string format_html(const std::vector<ReportInput>& inputs,
                        const std::vector<ProfileInput>& profiles = {},
                        const std::vector<ExplainInput>& explains = {},
                        const std::vector<MaxBatchInput>& maxbatches = {});

// The tables of an explain file (one row per pair of modes) and a maxbatch file (one row per
// model and mode), for the page and for `report --md`.
TextTable explain_table(const ExplainInput& e);
TextTable maxbatch_table(const MaxBatchInput& m);

// `report --history`: result files of successive commits, one point each on the trend charts.
struct HistoryEntry {
  ReportInput input;
  std::string time_utc;  // provenance.time_utc as written
  double unix_time = 0;  // that instant in seconds since 1970 (UTC): the order of the points
  std::string commit;    // provenance.commit; empty for a file written outside a git checkout
  std::string label;     // on the axis: the commit's first 7 characters, else short_file_names
  std::string date;      // YYYY-MM-DD (UTC), under the label
};

// The files in time order, oldest first (provenance.time_utc: ISO 8601 with Z or an offset;
// equal times keep the order given). A file without provenance, or whose time does not parse, is
// bad input naming it: without a time there is no order. Two files of one commit are both kept,
// each its own point (a rerun shows the noise between runs).
std::vector<HistoryEntry> order_history(std::vector<ReportInput> inputs);

// The trend page: per model and mode (and tool, device, batch, CUDA graphs) a chart of the median
// epoch time per commit, whiskers and band min-max (between the repetitions or seeds of a file
// with several runs, else over the run's epochs), and one of the training memory (the largest of a
// file's runs). A commit whose runs did not finish is a gap with a marker and a note; a commit
// that did not run the mode is a gap. Self-contained as format_html's page.
std::string format_history_html(const std::vector<HistoryEntry>& entries);
// The same points as Markdown tables, one per model and mode.
std::string format_history_markdown(const std::vector<HistoryEntry>& entries);

// At most `max_points` (x, y) points for a per-step series: steps are averaged in equal buckets
// (`use_min`: the bucket's minimum, which keeps loss-scale back-offs visible). Non-finite values
// are left out of a bucket; a bucket with none becomes a NaN y, which the charts draw as a gap.
// x is in steps: entry i covers steps i * x_per_entry onwards (a file's steps.stride).
std::vector<std::pair<double, double>> downsample(const std::vector<double>& ys, size_t max_points,
                                                  bool use_min = false, double x_per_entry = 1);

}  // namespace mpbench
