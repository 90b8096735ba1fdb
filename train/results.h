#pragma once
// The results model: what one run (one model x one precision on one device) produced. Writers in
// app/ turn these into the console table, JSON (schema_version 1), CSV, Markdown.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/host_load.h"
#include "train/statistics.h"

namespace mpbench {

// Unsupported: the device cannot run the mode at all (amp_fp8 below compute capability 8.9).
enum class RunStatus { Ok, Oom, Diverged, Failed, Unsupported };
// "ok", "oom", "diverged", "failed", "unsupported"
const char* run_status_name(RunStatus s);

struct EpochResult {
  double time_ms = 0;  // training steps of this epoch (warm-up excluded), evaluation apart
  double eval_time_ms = 0;
  // Mean over the epoch's steps, skipped ones included, but for a step the loss scaler skipped
  // whose loss was not finite (an fp16 overflow forward): it changed no weight, as in PyTorch.
  double train_loss = 0;
  double eval_loss = 0;
  double eval_accuracy = 0;  // fraction in [0, 1]
  int64_t steps = 0;
};

struct StepRecord {
  float loss = 0;
  float grad_norm = 0;
  float loss_scale = 1;
  bool skipped = false;
  float time_ms = 0;  // device time of the step (events around it); NaN for warm-up steps
};

struct MemoryReport {
  size_t tracked_peak = 0;   // TrackingAllocator peak total
  size_t training_peak = 0;  // peak of every category but data: the headline (DESIGN.md)
  std::array<size_t, kMemCategoryCount> by_category{};  // peak per category
  bool has_device = false;                              // cudaMemGetInfo samples taken
  size_t device_peak = 0;                               // max over samples of (used - baseline)
  size_t device_baseline = 0;  // device used bytes before the model was built
};

// amp_fp8's numerical health: one FP8 tensor's delayed scaling over the steps (warm-up included),
// after each step's update: the amax it scaled by and the scale the next step casts with.
struct Fp8TensorSeries {
  std::string tensor;  // "fc1.x", "layer1.qkv.dy"
  std::string format;  // "fp8_e4m3", "fp8_e5m2"
  std::vector<float> amax, scale;
  // Steps at which the tensor was clipped: its amax, times the scale the step cast with (the
  // previous update's; 1 at the first step), went past fp8_clip_threshold, so its largest
  // elements lost their magnitude (fp8_clipped_steps).
  int64_t clipped_steps = 0;
};
// The clipped steps of a series, from its own numbers: with "max" the amax only names this
// step's when it grew past the previous one (the rest of the window was within its scale);
// with "most_recent" it always is.
int64_t fp8_clipped_steps(const Fp8TensorSeries& t, bool most_recent);

// A data-parallel run's communication (an MPI launch; train/data_parallel.h).
struct DataParallelResult {
  int ranks = 1;
  std::string grad_reduce = "fp32";  // the all-reduce's dtype: fp32, bf16 or fp16
  uint64_t bucket_bytes = 0;         // fp32 gradient bytes per all-reduce (--bucket-mb)
  int64_t buckets = 0;               // all-reduces per step
  uint64_t bytes_per_step = 0;       // the gradients each rank all-reduces a step, in grad_reduce's
  uint64_t fp8_amax_bytes_per_step = 0;  // amp_fp8: the newest amaxes maxed a step, in fp32
  // Communication compute did not hide, per step of the median epoch (the one step_time_ms()
  // is from): all of it on the CPU, where
  // MPI moves the data inside its calls on the training thread.
  double comm_ms_per_step = 0;
  // On the GPU, where the buckets run on a side stream during the backward: their own time per
  // step of the median epoch, and the share of it the backward hid (1 - exposed / own). 0: not
  // known (the CPU).
  double comm_busy_ms_per_step = 0;
  double overlap = 0;
  // nccl-tests' convention: algbw = bytes / time (the gradient all-reduces' own where known,
  // else the exposed, which holds amp_fp8's amax maxes and counts their bytes too), busbw =
  // algbw * 2 (ranks - 1) / ranks.
  double algbw_gbps = 0, busbw_gbps = 0;
  // Against one process at the same per-rank batch (`run --scaling-baseline`): its samples per
  // second (0: not measured) and this run's over ranks times that.
  double single_rank_samples_per_second = 0;
  double scaling_efficiency = 0;
};

struct RunResult {
  std::string model;      // spec name
  std::string family;     // mlp, resnet_bottleneck, transformer
  std::string precision;  // fp32, tf32, amp_fp16, amp_bf16, amp_fp8
  std::string device;     // "cuda", "cpu" (the native backend) or "reference" (the emulation)
  RunStatus status = RunStatus::Ok;
  std::string status_detail;  // why, for oom / diverged / failed
  bool cuda_graphs = false;
  std::optional<uint64_t> seed;  // the training seed of a `run --seeds` run
  // 1..N for the N repetitions of `run --repeat N`: the same spec, mode, batch and seed trained
  // again, each a fresh model (so the numerics are identical), interleaved across modes.
  std::optional<int64_t> repetition;

  int64_t batch_size = 0;
  int64_t train_samples = 0;
  int64_t warmup_steps = 0;
  std::vector<EpochResult> epochs;
  TimeStats epoch_time_ms;
  double samples_per_second = 0;  // train samples / median epoch time
  double flops_per_step = 0;      // counted training FLOPs per step (forward + backward)
  double tflops = 0;              // achieved, from the median epoch time
  double peak_tflops = 0;         // the device's peak for this mode, 0 if unknown
  double percent_of_peak = 0;

  MemoryReport memory;
  // The training memory predicted before the run (predict_training_memory): training_peak and
  // by_category (data 0); absent from files written before it was.
  bool has_predicted_memory = false;
  MemoryReport predicted_memory;
  // An oom at the memory limit: the training memory the run needed at least (Error::needed_bytes;
  // 0 when unknown). For maxbatch's search; not written to files.
  size_t oom_needed_bytes = 0;
  double final_accuracy = 0;  // eval accuracy after the last epoch, in [0, 1]
  double final_loss = 0;      // eval loss after the last epoch
  int64_t skipped_steps = 0;
  double final_loss_scale = 1;
  bool loss_scaling = false;
  std::vector<StepRecord> steps;  // every training step, warm-up included, in order
  // Steps per entry of `steps` and of the fp8 series: 1 in a run, more in a long run read back
  // from its file (kMaxWrittenSteps), whose entries then cover `bucketed_steps` steps.
  int64_t step_stride = 1;
  int64_t bucketed_steps = 0;
  // The training steps a per-step series of `entries` entries covers (steps, fp8_scaling).
  int64_t steps_of(size_t entries) const {
    return step_stride == 1 ? static_cast<int64_t>(entries) : bucketed_steps;
  }
  int64_t step_count() const { return steps_of(steps.size()); }
  // A training step's time: the median epoch's over its steps (0 without an epoch).
  double step_time_ms() const {
    return epochs.empty() || epochs[0].steps <= 0
               ? 0
               : epoch_time_ms.median / static_cast<double>(epochs[0].steps);
  }
  // amp_fp8: a few representative tensors (the first and the last FP8 layer's x, w and dy).
  std::vector<Fp8TensorSeries> fp8_scaling;
  // The GPU's convolutions: the algorithm, math type and workspace cuDNN's ranking gave each
  // (op, shape, dtype), in first-use order, and the convolution workspace held at the end (it
  // only grows: the run's peak of it, inside by_category's workspace). Empty and 0 on the CPU and
  // for models without convolutions; absent from the JSON then.
  std::vector<ConvAlgorithm> conv_algorithms;
  size_t conv_workspace_bytes = 0;
  // The native CPU backend: the oneDNN implementations the run's primitives ran (e.g.
  // "brg:avx512_core_amx_bf16", which names the ISA), sorted; conv_workspace_bytes is then the
  // workspace its scratchpads and reordered filters took. Empty elsewhere, and absent then.
  std::vector<std::string> kernels;
  // What the backend had to say of the run (Backend::take_warnings: the naive GEMM kernel taken,
  // a refused convolution algorithm), which the commands also print. Absent from the JSON when
  // empty.
  std::vector<std::string> warnings;
  std::optional<DataParallelResult> data_parallel;  // absent from a one-process run
  // What other processes took of the CPUs from the first epoch's timed steps to the end of the
  // last's, evaluations between included (kernels/host_load.h); absent where unknown: no
  // /proc/stat, a span under kMinLoadSeconds, files from before it.
  std::optional<HostLoad> host_load;
};

// Epoch times (or the median epoch times of a run's repetitions) that vary by more than this
// (coefficient of variation) make a run's time and speedup unreliable; on a quiet GPU they vary
// by well under 2%.
inline constexpr double kNoisyCv = 0.10;

// What a reader must know before trusting a run's numbers, as short names that travel with them
// (the JSON's `flags`, the CSV's flags column, the notes under the console and Markdown tables):
//   emulated           a tf32/16-bit/fp8 run on the CPU reference (--device reference): times of
//                      emulated numerics, not of low-precision hardware
//   noisy              its epoch times (2 or more: the table shows their ± from 2) vary by more
//                      than kNoisyCv; for a run of one epoch, its quarters' (epoch_quarters)
//   noisy-repetitions  the median epoch times of its repetitions (`run --repeat`) vary by more
//                      than kNoisyCv
//   busy               other processes kept CPUs busy that its threads needed while its epochs
//                      ran (HostLoad::busy): slower, and as steady as a quiet run
//   fp8-clipped        at some step an FP8 tensor's amax outgrew its delayed scale
// `all` holds the run's repetitions (the report's runs).
std::vector<std::string> run_flags(const RunResult& r, const std::vector<RunResult>& all);
// run_flags' busy: a run that finished, measured while its threads waited for CPUs that
// something else held (HostLoad::busy).
bool ran_busy(const RunResult& r);
// Of `runs`, the busy ones' host_load whose CPUs something else held longest (taken_cpus); nullptr
// when none was busy.
const HostLoad* worst_busy_load(const std::vector<const RunResult*>& runs);
// A run of one epoch has no spread between epochs to judge its time by: the mean step time of
// each quarter of its timed training steps stands in (ms a step; a quarter sums many steps as an
// epoch does, where single steps vary far more). Nullopt for more than one epoch or fewer than
// 32 timed steps (quarters of 2 steps flagged quiet runs: one step 50% slow is enough).
std::optional<TimeStats> epoch_quarters(const RunResult& r);
// The spread (cv) of the median epoch times of r's repetitions that trained ok, r included; NaN
// when it has fewer than two.
double repetition_cv(const RunResult& r, const std::vector<RunResult>& all);

// The most entries a per-step series has in a file: a run of more steps is written in buckets of
// `stride` consecutive steps (loss, grad norm and time the mean of the bucket's finite values,
// loss scale the minimum, skipped whether any was, an fp8 amax the maximum and its scale the
// minimum), so that a 2.5M-step run's file stays a few MB. The charts draw 500 points.
inline constexpr int64_t kMaxWrittenSteps = 4096;
// amp_fp8 records the x, w and dy of its first and its last FP8 layer (fp8_scaling).
inline constexpr int kFp8RecordedTensors = 6;

// An upper bound on the bytes one run adds to a result file (to_json(Report).dump(2)): `compare`
// and `report` read files of at most kMaxResultFileBytes, so `run` refuses up front what would
// write more. fp8_tensors: the tensors amp_fp8 records (0 in other modes).
uint64_t max_run_json_bytes(int64_t epochs, int64_t steps, int64_t fp8_tensors);

// peak_memory_bytes of a run: training, data, tracked, device, device_baseline, by_category.
nlohmann::json to_json(const MemoryReport& m);
// A prediction of training memory (predict_training_memory) as run's and inspect's JSON write it:
// {training, by_category}, the dataset copy apart.
nlohmann::json prediction_json(const MemoryReport& m);
nlohmann::json to_json(const RunResult& r);

// Everything one `mpbench run` produced, for the writers.
struct Report {
  nlohmann::json tool;  // name, version, git
  // Where and when it was made: time_utc (ISO 8601), host, command (argv), commit (of the git
  // checkout the command ran in, null outside one). Null in files written before it was.
  nlohmann::json provenance;
  nlohmann::json env;                 // device facts, versions, CPU
  std::vector<nlohmann::json> specs;  // resolved specs, one per spec file
  std::vector<RunResult> runs;
};
// With seed_summary[] when runs have seeds, repeat_summary[] when they have repetitions.
nlohmann::json to_json(const Report& r);
// The resolved spec r was trained from: report's spec of r's model at r's batch (a sweep has
// one per batch), else its first of that model; null in a file without specs.
const nlohmann::json* spec_of(const Report& report, const RunResult& r);

// Accuracy over the seeds of a `run --seeds` sweep, per model, device, batch, mode (and graphs):
// the mean and standard deviation of the final accuracy over its Ok runs, and the difference
// from fp32 (or ratio_baseline's mode) with its 95% interval, paired by seed (statistics.h:
// paired_delta), when that mode ran the same two or more seeds.
struct SeedSummary {
  std::string model, device, precision;
  int64_t batch_size = 0;
  bool cuda_graphs = false;
  int seeds = 0;  // Ok runs
  double accuracy_mean = 0, accuracy_std = 0;
  // Against ratio_baseline's mode (fp32 when the model has it), whatever the name says.
  std::string baseline = "fp32";
  std::optional<PairedDelta> accuracy_delta_vs_fp32;
};
// The rule of which mode ratios are against: fp32 when a model's modes (in the order given)
// include it, else the first of them ("fp32" when there are none).
std::string baseline_among(const std::vector<std::string>& modes);
// The mode a model's ratios on a device are against (speedups, memory, accuracy deltas, in the
// tables and the summaries): baseline_among the modes of its runs there.
std::string ratio_baseline(const std::vector<RunResult>& runs, const std::string& model,
                           const std::string& device);
std::vector<SeedSummary> seed_summaries(const std::vector<RunResult>& runs);
// The summary among `summaries` of r's model, device, batch, graphs and mode; null if none.
const SeedSummary* seed_summary_for(const std::vector<SeedSummary>& summaries, const RunResult& r);
nlohmann::json to_json(const SeedSummary& s);

// A run's epoch times that can be times (statistics.h: positive_finite), in epoch order.
std::vector<double> epoch_times(const RunResult& r);

// The speedup of one mode's repetitions (`run --repeat`) over another's, paired by round (the
// same repetition, and seed): the median over rounds of each round's speedup (baseline's median
// epoch time over current's), with its 95% interval (statistics.h: paired_median_ratio). Only
// rounds both sides trained count; nullopt with fewer than kMinRepetitions of them.
std::optional<RatioEstimate> repeated_speedup(const std::vector<const RunResult*>& baseline,
                                              const std::vector<const RunResult*>& current);

// Per model, device, batch, mode (and graphs) of a `run --repeat`: how many repetitions trained
// and the speedup over the baseline mode's repetitions (fp32's, or ratio_baseline's) with its
// interval (repeated_speedup), when there is one.
struct RepeatSummary {
  std::string model, device, precision;
  int64_t batch_size = 0;
  bool cuda_graphs = false;
  int repetitions = 0;  // Ok runs
  std::string baseline = "fp32";
  std::optional<RatioEstimate> speedup_vs_fp32;
};
std::vector<RepeatSummary> repeat_summaries(const std::vector<RunResult>& runs);
nlohmann::json to_json(const RepeatSummary& s);

// What tells a run apart in one file: its model, precision, device, CUDA graphs, batch size,
// seed (`run --seeds`, -1 without), rank count (data parallel) and repetition (`run --repeat`,
// 0 without); compare matches runs on all of it but the repetition. run_identity says it as
// "tiny_mlp amp_bf16 cpu batch 64 seed 2 x2 ranks repetition 3". check_unique_runs throws
// BadInput naming both runs[] indices when two runs share it, which no reader could tell apart
// (compare would not know which to match, report would draw both).
using RunKey =
    std::tuple<std::string, std::string, std::string, bool, int64_t, int64_t, int, int64_t>;
RunKey run_key(const RunResult& r, bool with_repetition = true);
// The ranks a run trained on: a data-parallel run's, 1 for one process.
inline int run_ranks(const RunResult& r) {
  return r.data_parallel ? r.data_parallel->ranks : 1;
}
std::string run_identity(const RunResult& r, bool with_repetition = true);
void check_unique_runs(const std::vector<RunResult>& runs);

// Readers for result files (the `compare` command). Non-finite numbers were written as null and
// come back as NaN. Throw Error(BadInput) naming the JSON path of a missing or mistyped field,
// or a schema_version other than 1.
RunResult run_from_json(const nlohmann::json& j);
Report report_from_json(const nlohmann::json& j);
RunStatus run_status_from_name(const std::string& name);  // throws BadInput for unknown names

}  // namespace mpbench
