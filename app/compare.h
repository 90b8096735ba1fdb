#pragma once
// `mpbench compare`: a CI performance-regression gate over result files (one or more baselines,
// one or more currents). The statistics and the verdicts live here, apart from the CLI, so tests
// can drive them directly.
//
// Runs are matched by (model, precision, device, cuda_graphs, batch, seed); the runs of one key
// are its repetitions: those of `run --repeat N` in one file, and one more per file of a side (a
// baseline remade a few times on the runner, or a side's runs interleaved with the other's).
//
// Time. Each repetition's sample is its epoch times. The estimate is the ratio (current /
// baseline) of the medians over repetitions of each repetition's median epoch time; its 95%
// interval is a hierarchical percentile bootstrap (resample the repetitions, then the epochs
// within each; 2000 resamples, fixed seed, so the output is deterministic). The interval thus
// holds the variation between runs, which is most of the noise on a shared machine, and not only
// that between the epochs of one run. A repetition measured while something else held its CPUs
// (run_flags' busy: its threads waited for them, kernels/host_load.h) is left out on either side
// and counted: it is slower, as a regression is, and as steady as a quiet run, so no interval
// tells the two apart. With threshold t:
//   fewer than min_repetitions on a side                 -> inconclusive (says how many needed)
//   CI lower bound > 1 (significant) and ratio > 1+t     -> slower (a regression)
//   CI upper bound < 1 (significant) and ratio < 1/(1+t) -> faster
//   CI entirely within [1/(1+t), 1+t]                    -> same
//   anything else (wide CI, noise)                       -> inconclusive
// "Significant and beyond the threshold" rather than "CI entirely beyond the threshold": with the
// few repetitions a run has, the latter would wave through most real slowdowns a little beyond
// t, whose interval straddles 1+t.
//
// Paired (options.paired): the i-th baseline file and the i-th current file were run one after
// the other (a job that builds both commits and runs them in turn). Time is then the median over
// pairs of each pair's ratio of its files' medians, with paired_median_ratio's interval over the
// pairs, and needs min_repetitions pairs: what the machine's state does to both runs of a pair
// (a shared runner's speed moved 1.6x from one run to the next, for seconds to minutes: README)
// cancels in the pair's ratio, where unpaired files put it in the interval or, from baselines
// made at another moment, in the estimate.
//
// Memory (training peak), accuracy and final loss are deterministic-ish, so they are compared
// without an interval, over every repetition of a side that trained ok: the largest training
// peak (memory that grows from one repetition to the next shows), the median accuracy and final
// loss. Memory regresses when current > baseline * (1 + memory threshold), accuracy when it
// drops by more than the accuracy threshold (in percentage points), loss (only when a loss
// threshold is given) when |current - baseline| > threshold * |baseline|, in either direction;
// a final loss that became non-finite (null in the file) regresses whatever the thresholds.
//
// Status. A side's status is that of its first repetition that did not train ok, if any: one
// repetition of five that ran out of memory where the baseline's all trained is a regression.
//
// Nothing is switched off silently. An environment difference (GPU, driver, libraries, CPU,
// BLAS threads) is named in the row and everything is still compared; it blocks --strict. A
// resolved spec that differs between the files makes the row `spec-changed` (the first
// differing JSON path named), which is not compared and fails the gate (exit 4), as does a
// comparison in which no run matched at all. The spec is checked against every baseline file.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/results.h"

namespace mpbench {

struct CompareOptions {
  // Relative: 0.10 = 10%, asv's default factor (1.1). Identical runs on a shared 2-core machine
  // differ by 5-8% with the recommended recipe (bench/gate_noise.py, README); 5% alarmed on 3
  // of 20 such pairs, 10% on none, and both caught every 1.33x slowdown.
  double time_threshold = 0.10;
  double memory_threshold = 0.02;        // relative
  double accuracy_threshold = 0.5;       // percentage points
  std::optional<double> loss_threshold;  // relative; nullopt: final loss is not compared
  bool strict = false;                   // inconclusive / env differences / missing rows -> exit 4
  int bootstrap_resamples = kBootstrapResamples;
  uint64_t seed = kBootstrapSeed;
  int min_repetitions = kMinRepetitions;  // per side (paired: pairs), for a time verdict
  bool paired = false;  // baseline file i and current file i ran one after the other (above)
};

// The time verdict from an estimate and the repetition counts, by the rule at the top of this
// file: "faster", "slower", "same" or "inconclusive".
std::string time_verdict(const RatioEstimate& est, size_t n_baseline, size_t n_current,
                         double threshold, int min_repetitions = kMinRepetitions);
// Why a time with enough repetitions is inconclusive: which edge of the threshold band its
// interval crosses (or both).
std::string inconclusive_time(const RatioEstimate& est, double threshold);
// Paired and inconclusive with `pairs` pairs: how many pairs would settle the time if further
// pairs spread as these did and their mean held (the t interval narrowing as t_half_width,
// statistics.h, trimmed where these pairs already are): to within the band where the mean lies
// inside it, clear of 1 where it lies past an edge. kMostPairs + 1 where more than kMostPairs
// would; 0 where no more than these would (the width is then a stray pair's, in the bootstrap's
// interval) or the pairs did not spread.
inline constexpr int kMostPairs = 200;
int pairs_to_settle(const RatioEstimate& est, size_t pairs, double threshold);

// Differences between the two environments that bear on the numbers of `device` ("cuda":
// env.gpu.{name, driver_version, cuda_runtime_version, cudnn_version}; "cpu" and "reference":
// env.cpu.name, and the native CPU's native_cpu.{threads, isa} or the reference's OpenBLAS
// cpu.{blas_threads, blas_core}; all: env.device), as "gpu.name: A100 -> H200". Empty when they
// match.
std::vector<std::string> env_differences(const nlohmann::json& baseline_env,
                                         const nlohmann::json& current_env,
                                         const std::string& device);

// The first JSON path at which two resolved specs differ ("train.optimizer.lr: 0.001 ->
// 0.002"), ignoring `precisions` (running fewer modes changes no run) and keys on one side
// only (written by another version of mpbench); empty when they agree.
std::string first_spec_difference(const nlohmann::json& baseline, const nlohmann::json& current);
// The data-parallel setting two runs of the same rank count differ in, as "--grad-reduce: fp32
// -> fp16" (or --bucket-mb): it changes their numerics and their time as a spec's change does.
// Empty when they agree or either is not data parallel.
std::string data_parallel_difference(const RunResult& baseline, const RunResult& current);

struct CompareRow {
  std::string model, precision, device;
  bool cuda_graphs = false;
  int64_t batch_size = 0;
  int ranks = 1;                 // data parallel's (the batch is per rank)
  std::optional<uint64_t> seed;  // of a `run --seeds` run
  // Every repetition of the key on each side (empty: `new` / `missing`), and the one whose
  // status is the side's: the first that did not train ok, else the first.
  std::vector<const RunResult*> baseline_runs, current_runs;
  const RunResult* baseline = nullptr;
  const RunResult* current = nullptr;
  // What memory, accuracy and loss compare, over a side's repetitions that trained ok (above).
  struct Values {
    uint64_t training_peak = 0;  // the largest
    double accuracy = 0;         // the median, a fraction
    double loss = 0;             // the median; NaN if any repetition's was not finite
  };
  Values baseline_values, current_values;

  // faster | slower | same | inconclusive | spec-changed | missing | new |
  // oom | diverged | failed (the current run's status, when not ok) | recovered (baseline not ok,
  // current ok)
  std::string verdict;
  std::string detail;  // why: status details, repetitions needed, the spec difference
  std::vector<std::string> env_differences;  // named in the row; everything is still compared

  RatioEstimate time;
  size_t n_baseline = 0, n_current = 0;  // repetitions with usable epoch times
  size_t pairs = 0;  // paired: the pairs of files with usable times on both sides
  // Repetitions left out of time (and of n_*): measured while something else held their CPUs
  // (run_flags' busy).
  size_t busy_baseline = 0, busy_current = 0;
  std::optional<double> memory_change;   // relative: current / baseline - 1
  std::optional<double> accuracy_delta;  // percentage points: current - baseline
  std::optional<double> loss_change;     // relative: current / baseline - 1

  // What regressed: any of "time", "memory", "accuracy", "loss", "status". Empty: no regression.
  std::vector<std::string> regressions;
  // Rows that keep --strict from passing: inconclusive, an environment difference, missing.
  bool blocking = false;
};

struct Comparison {
  CompareOptions options;
  std::vector<CompareRow> rows;              // baseline order, then `new` rows in current order
  std::vector<std::string> env_differences;  // every difference found, for the summary
  int regressions = 0, blocking = 0, matched = 0, spec_changed = 0;
  size_t baseline_files = 0, current_files = 0;
  // Lines under the tables: one baseline file (its time interval holds no noise between
  // processes), a --memory-limit that differs between the files.
  std::vector<std::string> notes;
  // 0 pass; 1 a regression; 4 nothing matched, a spec changed, or (--strict) blocking rows.
  int exit_code = 0;
};

// Matches runs by key (above) and judges each. The files of a side are treated as repetitions of
// one baseline (one current); paired, as pairs, which takes as many files a side. The reports
// must outlive the result (rows point into them). A run that appears twice in one file (same key,
// same repetition) is BadInput, naming the file by `names` (the baselines' then the currents';
// "baseline N" and "current N" where not given).
Comparison compare_reports(const std::vector<const Report*>& baselines,
                           const std::vector<const Report*>& currents,
                           const CompareOptions& options,
                           const std::vector<std::string>& names = {});
inline Comparison compare_reports(const std::vector<const Report*>& baselines,
                                  const Report& current, const CompareOptions& options,
                                  const std::vector<std::string>& names = {}) {
  return compare_reports(baselines, std::vector<const Report*>{&current}, options, names);
}
inline Comparison compare_reports(const Report& baseline, const Report& current,
                                  const CompareOptions& options) {
  return compare_reports(std::vector<const Report*>{&baseline}, current, options);
}

std::string format_compare_console(const Comparison& c, bool ascii = false);
// A summary for $GITHUB_STEP_SUMMARY or a merge-request comment: the verdict line, a short
// table of only the rows that regressed or are inconclusive, missing or spec-changed, the full
// table folded in <details>, the rule.
std::string format_compare_markdown(const Comparison& c, const std::string& baseline_name,
                                    const std::string& current_name);
// JUnit XML (one <testsuites>, one <testsuite>), one <testcase> per row, classname
// "mpbench.<model>", name "<precision> <device> batch <b>[ seed s][ +graphs]": a row that
// regressed is a <failure> saying what and by how much; an inconclusive, missing or
// spec-changed row is <skipped> with its reason; every other row passes (a `new` row with a
// note in its <system-out>). Every name and text is escaped, and characters XML 1.0 cannot hold
// are replaced by U+FFFD.
std::string format_compare_junit(const Comparison& c, const std::string& baseline_name,
                                 const std::string& current_name);
nlohmann::json compare_to_json(const Comparison& c);

}  // namespace mpbench
