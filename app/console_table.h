#pragma once
// The comparison table, one per model, as the published AMP tables print it: time per epoch,
// throughput, peak memory, accuracy, and the ratios against the fp32 row of the same model.
// The console and Markdown writers share the cells built here so they never disagree.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/allocator.h"  // format_bytes
#include "train/number_text.h"  // format_ratio, format_sig3
#include "train/results.h"

namespace mpbench {

// The runs of one model on one device, in report order.
struct ModelGroup {
  std::string model, family, device;
  std::vector<const RunResult*> runs;
  std::vector<int64_t> batches;  // the distinct batch sizes, in report order (a sweep: several)
  // The mode ratios are against: fp32 when the group has it, else its first mode (as explain
  // does; the table's headers then name it).
  std::string baseline = "fp32";
  // The baseline of a run's ratios: the first run of the baseline mode with status ok at the
  // run's batch size (and seed, for `run --seeds`).
  const RunResult* fp32_for(const RunResult& run) const;
};
std::vector<ModelGroup> group_by_model(const Report& report);

// Whether the group holds `run --seeds` runs; `run --repeat` runs.
bool has_seeds(const ModelGroup& group);
bool has_repetitions(const ModelGroup& group);
// Such a group as one run per mode (and batch, graphs), made into `storage` (which must outlive
// the result and not grow): the median over the seeds (each seed's repetitions first taken to
// their median) or, without seeds, over the repetitions of their median epoch times (cv: the
// spread of those medians, NaN for fewer than two), the mean of accuracy and loss, a run's
// skipped steps (their median, not their sum), the largest memory. Only the runs that trained ok
// count; a mode none of whose runs did keeps its first run (its status). Tables and the report's
// charts show seeded and repeated runs so.
ModelGroup collapse_runs(const ModelGroup& group, std::vector<RunResult>& storage);

// Whether a run's epoch time has a spread to show: two samples or more (its epochs, or the runs
// a collapsed run stands for). One epoch or one run shows n/a, never a cv of 0%.
bool has_time_spread(const RunResult& run, bool collapsed);

// fp32 median epoch time / this run's; nullopt when there is no usable baseline or this run did
// not finish ok.
std::optional<double> speedup_vs_fp32(const RunResult& run, const RunResult* fp32);
// For `run --repeat`: a collapsed mode's speedup over its collapsed baseline (the runs of
// collapse_runs), with its interval (repeated_speedup, train/results.h). Nullopt for the
// baseline itself, a run that is not ok, a group without repetitions (`run --seeds` alone), or
// fewer than kMinRepetitions repetitions a side.
std::optional<RatioEstimate> speedup_interval(const ModelGroup& repeated, const RunResult& run,
                                              const RunResult* fp32);
// The same for every ok run of a group that is not its baseline, keyed by the group's own runs
// (a CSV row per repetition): each mode's interval computed once, for all its repetitions.
std::map<const RunResult*, RatioEstimate> speedup_intervals(const ModelGroup& repeated);
// This run's training memory (the peak of every category but data) / fp32's (below 1: less).
std::optional<double> memory_vs_fp32(const RunResult& run, const RunResult* fp32);

// Accuracy over the seeds that trained: "89.00% ± 0.57" (the standard deviation, in points), or
// "89.00% ± n/a" for one seed, which has no spread.
std::string format_accuracy_over_seeds(const SeedSummary& s, const std::string& pm);
// Milliseconds to 3-4 significant digits, no unit: "1234", "123.4", "12.35", "1.235".
std::string format_ms(double ms);
// 1234567 -> "1,234,567" (rounded); past 2^63 in exponent form ("1e+300"); NaN -> "nan".
std::string group_thousands(double v);
// Samples/s: grouped from 1000 on, one decimal below.
std::string format_rate(double v);
// A loss: 4 decimals ("0.1234"), and from 1e6 on 4 significant digits in exponent form
// ("3.927e+33", a diverging run's), so that it cannot stretch a table; "nan", "inf".
std::string format_loss(double v);
// A loss scale: whole numbers under 1e12 in full ("16777216", where {:g} wrote "1.67772e+07"),
// the rest to 6 significant digits ("0.000244141", "1.15292e+18").
std::string format_loss_scale(double v);

struct TableRow {
  bool ok = true;
  // One per column when ok; when not, those that say which run it is (mode, and batch and seeds
  // where the table has them), the status across the columns after them.
  std::vector<std::string> cells;
  std::string status;  // when not ok: "oom: <detail>", shown across the numbers
};
struct Table {
  std::string title;  // model, family, device, batch, epochs
  std::vector<std::string> headers;
  std::vector<bool> right_align;
  std::vector<TableRow> rows;
};
// Whether the terminal takes UTF-8: the locale's character set (LC_ALL, else LC_CTYPE, else
// LANG) names UTF-8. Under LC_ALL=C, or with none of them set, `run` draws its tables in ASCII.
bool utf8_output();
// What separates a title line's parts: " · ", or " | " where `ascii`.
std::string title_dot(bool ascii);

// `ascii` replaces ±, — and × with plain-ASCII spellings.
Table build_table(const ModelGroup& group, const Report& report, bool ascii = false);

// One box-drawn table per model, separated by blank lines. `ascii` draws with | - + instead.
std::string format_console(const Report& report, bool ascii = false);
// The notes under a model's table (noisy runs, FP8 clipping; run_flags' predicates), one line
// each without the "note: " prefix, for the console and the Markdown alike.
std::vector<std::string> table_notes(const ModelGroup& group, const Report& report);
// The note under all tables that says what the device's times are: those of the CPU reference's
// emulation (any run flagged "emulated"), or, on the native CPU, why amp_bf16 cannot beat fp32
// there (native_bf16_limit), when an amp_bf16 run finished.
std::optional<std::string> device_note(const Report& report);
// Why bf16 GEMMs are no faster than fp32's on the native CPU whose env.native_cpu block (as the
// result JSON and `devices --json` write it) is `native_cpu`: bf16 converted in software
// (bf16_gemm "converted"), or bf16 GEMMs measured no faster than fp32's (gemm_tflops), as on an
// Intel Xeon with AVX512-BF16 whose AMX the process does not get. nullopt otherwise.
std::optional<std::string> native_bf16_limit(const nlohmann::json& native_cpu);

// The name of `device` ("cuda": the GPU, "cpu": the CPU model) from a report's env, or "" when
// env does not describe that device.
std::string env_device_name(const nlohmann::json& env, const std::string& device);

// Display columns of a UTF-8 string (every code point counted as one column).
size_t display_width(const std::string& s);

// A plain text table (profile, compare, inspect): columns two spaces apart, each as wide as its
// widest cell in display width, right-aligned where `right` says (left where it says nothing),
// optionally a rule of dashes under the header; no trailing spaces. The comparison table of
// `run` (format_console) has its own: boxed, with wrapped status rows.
struct TextTable {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;
};
// In the style of run's table (a rule under the head, │ between columns); | - + when `ascii`
// (commands pass !utf8_output()).
std::string render_text_table(const TextTable& t, bool ascii = false);
// The same as a GitHub Markdown table (cells escaped; `rule` is implied).
std::string render_markdown_table(const TextTable& t);
// `s` as literal Markdown text, in a table cell, heading, list item or emphasis alike: the one
// rule for every Markdown writer (run, report, compare, explain, maxbatch --md), whose text comes
// from file names and hand-editable JSON and lands in GitHub step summaries and merge-request
// comments. <, > and & as entities (no raw HTML); \ ` * _ | [ ] ~ # backslash-escaped (an _
// inside a word, as in amp_bf16, left as it is: it cannot make emphasis); line breaks and other
// control characters shown as C writes them (\n, \x1b, \u0085). Emphasis goes around the
// escaped text, never through this.
std::string markdown_cell(const std::string& s);

}  // namespace mpbench
