#pragma once
// `mpbench report`: one self-contained HTML page (inline CSS and SVG, no scripts, no network) that
// shows one or more result files side by side: per model, bars of epoch time, throughput and peak
// memory per run, the memory breakdown by category, loss curves and loss-scale trajectories, the
// console tables, and each file's environment.
#include <string>
#include <utility>
#include <vector>

#include "train/results.h"

namespace mpbench {

struct ReportInput {
  std::string path;  // shown in the page and used to tell apart runs that would share a label
  Report report;
};

// What `mpbench profile --json` wrote: per mode, the time per training step summed per op.
struct ProfileInput {
  std::string path;
  std::string model;  // the spec's name
  struct Mode {
    std::string precision, status;
    double step_ms = 0;                                    // median step time of the profiled run
    std::vector<std::pair<std::string, double>> ms_by_op;  // op -> ms per step, first-seen order
  };
  std::vector<Mode> modes;
};

// The whole page. Every text taken from the inputs is HTML-escaped; no coordinate is ever NaN.
// Each profile adds a chart of where a step's time goes to its model's section; a profile of a
// model with no runs among `inputs` is bad input.
std::string format_html(const std::vector<ReportInput>& inputs,
                        const std::vector<ProfileInput>& profiles = {});

// At most `max_points` (x, y) points for a per-step series: steps are averaged in equal buckets
// (`use_min`: the bucket's minimum, which keeps loss-scale back-offs visible). Non-finite values
// are left out of a bucket; a bucket with none becomes a NaN y, which the charts draw as a gap.
std::vector<std::pair<double, double>> downsample(const std::vector<double>& ys, size_t max_points,
                                                  bool use_min = false);

// Reads one input of `mpbench report`, once: a file written by `mpbench profile --json` (it has
// "profiles") into `profiles`, anything else as a result file (schema_version 1) into `reports`.
// Throws Error(BadInput) naming the file when it is neither.
void load_report_input(const std::string& path, std::vector<ReportInput>& reports,
                       std::vector<ProfileInput>& profiles);

}  // namespace mpbench
