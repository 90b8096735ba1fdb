#pragma once
// `mpbench report`: one self-contained HTML page (inline CSS and SVG, no scripts, no network) that
// shows one or more result files side by side: per model, bars of epoch time, throughput and peak
// memory per run, the memory breakdown by category, loss curves and loss-scale trajectories, the
// console tables, and each file's environment.
#include <string>
#include <utility>
#include <vector>

#include "app/result_files.h"
#include "train/results.h"

namespace mpbench {

struct ReportInput {
  std::string path;  // shown in the page and used to tell apart runs that would share a label
  Report report;
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

}  // namespace mpbench
