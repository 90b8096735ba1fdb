#pragma once
// Reading the files mpbench writes, for `compare` and `report`: result files (`run --json`) and
// profile files (`profile --json`), with one set of errors. Every error is Error(BadInput), one
// line naming the file (and, for a bad field, its JSON path).
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/results.h"

namespace mpbench {

// What `mpbench profile --json` wrote: per mode, the time per training step summed per op.
struct ProfileInput {
  std::string path;
  std::string model;  // the spec's name
  struct Mode {
    std::string precision, status;
    // The profiled steps' median and mean times (NaN for a mode that did not train; the mean
    // NaN in files written before it was recorded): the ops' per-step times add up to the mean.
    double step_ms = 0, step_mean_ms = 0;
    std::vector<std::pair<std::string, double>> ms_by_op;  // op -> ms per step, first-seen order
  };
  std::vector<Mode> modes;
};

// What `mpbench explain --json` wrote: per pair of modes, the measured speedup, the bound and
// the time by kind of op.
struct ExplainInput {
  std::string path;
  std::string model, baseline, device;  // device: env.device ("cpu", "cuda")
  bool emulated = false;
  struct Kind {
    std::string kind;
    double from_ms = 0, to_ms = 0;
  };
  struct Pair {
    std::string from, to;
    double from_step_ms = 0, to_step_ms = 0, measured_speedup = 0;
    double bound = 0;  // NaN where there is none (an oom mode)
    std::vector<Kind> by_kind;
    std::vector<std::string> flags;
  };
  std::vector<Pair> comparisons;
};

// What `mpbench maxbatch --json` wrote: the largest batch per model and mode.
struct MaxBatchInput {
  std::string path, device;
  double memory_limit_bytes = 0;  // NaN when none was set (the device's free memory)
  struct Entry {
    std::string model, precision;
    std::string status = "ok";  // "unsupported": the mode has no path there, and no max_batch
    int64_t max_batch = 0;      // 0: none fits (at_spec_limit: none was tried)
    bool at_spec_limit = false;
    double vs_fp32 = 0;                   // against ratio_baseline; NaN where there is none
    std::string ratio_baseline = "fp32";  // fp32, or the model's first mode without it
    double training_bytes = 0;            // NaN when nothing fits
  };
  std::vector<Entry> entries;
};

// The kind of a JSON file mpbench wrote: its header's "kind" ("run", "profile", "explain",
// "inspect", "maxbatch", "compare", "devices", "validate"); files from before the header are
// "profile" when they have "profiles", "spec" for a model spec, else "run".
std::string file_kind(const nlohmann::json& j);

// A result file; a file of another kind is refused naming its kind.
Report read_result_file(const std::string& path);
// Any file `report` draws: a result, profile, explain or maxbatch file, each read once. Another
// kind (inspect, compare, ...) is refused in one line naming it.
using ReportFile = std::variant<Report, ProfileInput, ExplainInput, MaxBatchInput>;
ReportFile read_report_file(const std::string& path);

}  // namespace mpbench
