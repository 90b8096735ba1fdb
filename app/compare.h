#pragma once
// `mpbench compare`: a CI performance-regression gate over two result files (baseline, current).
// The statistics and the verdicts live here, apart from the CLI, so tests can drive them directly.
//
// Time. Per matched run, the samples are the per-epoch training times. The estimate is the ratio of
// medians (current / baseline); its 95% confidence interval is a percentile bootstrap (each side
// resampled with replacement, independently, 2000 times, fixed seed, so the output is
// deterministic). With threshold t:
//   fewer than 3 samples on a side                       -> inconclusive
//   CI lower bound > 1 (significant) and ratio > 1+t     -> slower (a regression)
//   CI upper bound < 1 (significant) and ratio < 1/(1+t) -> faster
//   CI entirely within [1/(1+t), 1+t]                    -> same
//   anything else (wide CI, noise)                       -> inconclusive
// "Significant and beyond the threshold" rather than "CI entirely beyond the threshold": with the
// few epochs a run has, the latter would wave through most real slowdowns a little beyond t,
// whose interval straddles 1+t.
//
// Memory (training peak), accuracy and final loss are deterministic-ish, so they are compared
// without an interval: memory regresses when current > baseline * (1 + memory threshold), accuracy
// when it drops by more than the accuracy threshold (in percentage points), loss (only when a loss
// threshold is given) when |current - baseline| > threshold * |baseline|, in either direction.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/results.h"

namespace mpbench {

struct CompareOptions {
  double time_threshold = 0.05;          // relative: 0.05 = 5%
  double memory_threshold = 0.02;        // relative
  double accuracy_threshold = 0.5;       // percentage points
  std::optional<double> loss_threshold;  // relative; nullopt: final loss is not compared
  bool strict = false;                   // inconclusive / env-mismatch / missing rows -> exit 4
  int bootstrap_resamples = 2000;
  uint64_t seed = 0x6d7062656e6368;  // "mpbench"
  int min_samples = 3;
};

// The time verdict from an estimate and the sample counts, by the rule at the top of this file:
// "faster", "slower", "same" or "inconclusive".
std::string time_verdict(const RatioEstimate& est, size_t n_baseline, size_t n_current,
                         double threshold, int min_samples = 3);

// Differences between the two environments that make timings incomparable for `device`
// ("cuda": env.gpu.{name, driver_version, cuda_runtime_version, cudnn_version}; "cpu":
// env.cpu.name; both: env.device), as "gpu.name: A100 -> H200". Empty when they match.
std::vector<std::string> env_differences(const nlohmann::json& baseline_env,
                                         const nlohmann::json& current_env,
                                         const std::string& device);

struct CompareRow {
  std::string model, precision, device;
  bool cuda_graphs = false;
  int64_t batch_size = 0;
  std::optional<uint64_t> seed;         // of a `run --seeds` run
  const RunResult* baseline = nullptr;  // null: `new`
  const RunResult* current = nullptr;   // null: `missing`

  // faster | slower | same | inconclusive | env-mismatch | missing | new |
  // oom | diverged | failed (the current run's status, when not ok) | recovered (baseline not ok,
  // current ok)
  std::string verdict;
  std::string detail;  // why: env differences, status details, sample counts

  RatioEstimate time;
  size_t n_baseline = 0, n_current = 0;
  std::optional<double> memory_change;   // relative: current / baseline - 1
  std::optional<double> accuracy_delta;  // percentage points: current - baseline
  std::optional<double> loss_change;     // relative: current / baseline - 1

  // What regressed: any of "time", "memory", "accuracy", "loss", "status". Empty: no regression.
  std::vector<std::string> regressions;
  // Rows that keep --strict from passing: inconclusive, env-mismatch, missing.
  bool blocking = false;
};

struct Comparison {
  CompareOptions options;
  std::vector<CompareRow> rows;              // baseline order, then `new` rows in current order
  std::vector<std::string> env_differences;  // for the summary line (first device found)
  int regressions = 0, blocking = 0;
  int exit_code = 0;  // 0 pass, 1 regression, 4 (--strict) only blocking rows stand in the way
};

// Matches runs by (model, precision, device, cuda_graphs) and judges each pair. The reports must
// outlive the result (rows point into them). A key that appears twice on one side is BadInput.
Comparison compare_reports(const Report& baseline, const Report& current,
                           const CompareOptions& options);

std::string format_compare_console(const Comparison& c);
std::string format_compare_markdown(const Comparison& c, const std::string& baseline_name,
                                    const std::string& current_name);
nlohmann::json compare_to_json(const Comparison& c);

}  // namespace mpbench
