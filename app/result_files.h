#pragma once
// Reading the files mpbench writes, for `compare` and `report`: result files (`run --json`) and
// profile files (`profile --json`), with one set of errors. Every error is Error(BadInput), one
// line naming the file (and, for a bad field, its JSON path).
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "train/results.h"

namespace mpbench {

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

// A result file; a profile file is refused as one.
Report read_result_file(const std::string& path);
// A result file or a profile file (told apart by the profile's "profiles"), each read once.
std::variant<Report, ProfileInput> read_result_or_profile_file(const std::string& path);

}  // namespace mpbench
