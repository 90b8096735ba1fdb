#pragma once
// The subcommands of the mpbench executable, one file each (app/cmd_<name>.cpp). Each returns the
// process exit code; errors are thrown as mpbench::Error and mapped to exit codes in app/cli.cpp.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "train/results.h"

namespace mpbench {

// --device and what picks the native CPU backend's threads and ISA (kernels/backend.h
// NativeCpuOptions), shared by every command that trains.
struct DeviceChoice {
  std::string name = "auto";  // auto | cpu | reference | cuda
  int threads = 0;            // --threads; 0: one per physical core
  std::string cpu_isa;        // --cpu-isa; "": oneDNN's own choice
};

struct RunArgs {
  std::vector<std::string> specs;
  DeviceChoice device;
  std::vector<std::string> precisions;  // empty: the spec's own list
  int64_t epochs = 0, batch_size = 0;   // 0: the spec's value
  int64_t warmup = -1;                  // --warmup: train.warmup_steps; -1: the spec's value
  std::vector<int64_t> batch_sizes;     // --batch-sizes: a sweep, each spec at each batch
  int64_t seed = -1;                    // -1: the spec's value
  int64_t seeds = 0;                    // --seeds N: each mode trained with seeds 1..N; 0: once
  int64_t repeat = 1;                   // --repeat N: everything trained N times, interleaved
  std::string json_path, csv_path, md_path;
  bool quiet = false;
  bool cuda_graphs = false;
  uint64_t memory_limit = 0;  // --memory-limit in bytes; 0: none
  // Data parallel, under an MPI launcher: the all-reduce's dtype and bucket (MiB of fp32
  // gradients; fractions allowed, as DDP's bucket_cap_mb).
  std::string grad_reduce = "fp32";
  double bucket_mb = 25;
  // "run": rank 0 also trains each run alone first; a path: a 1-rank result file to take that
  // from; "": neither (no scaling efficiency).
  std::string scaling_baseline;
};
int cmd_run(const RunArgs& args);
// "4GiB", "512 MiB", "16GB", "1.5GiB", "1000000": bytes (KiB/MiB/GiB powers of 1024, KB/MB/GB of
// 1000; a plain number is bytes and must be an integer). Anything else, zero included, is
// BadInput naming `option`.
uint64_t parse_memory_size(const std::string& option, const std::string& text);
// "32,64,128": distinct positive integers; anything else is BadInput naming `option`.
std::vector<int64_t> parse_batch_sizes(const std::string& option, const std::string& text);
// The spec as `run` would train it: --precisions, --epochs, --batch-size, --seed and --warmup
// applied and checked (bad input names the option).
struct Spec;
struct Dataset;
struct ProfiledRun;
void apply_run_overrides(Spec& spec, const RunArgs& args);

// `profile`: a few training steps of one spec per mode with every op timed by events; tables of
// where a step's time goes (by layer, by op, the top ops) and optionally a JSON of every op.
struct ProfileArgs {
  std::string spec;
  RunArgs run;         // device, precisions, batch size, seed, quiet; epochs are ignored
  int64_t steps = 10;  // profiled steps per mode, after the warm-up
  int64_t top = 25;    // rows of the top-ops table
  std::string json_path;
};
int cmd_profile(const ProfileArgs& args);
// What profile and explain share: the spec shrunk to `steps` profiled steps (a warm-up of at
// least 2, epochs of at most `steps` global batches of `ranks` shards, one batch of evaluation),
// and one mode profiled with a progress bar (its label ends with `round`, e.g. "round 2/3", when
// given), data parallel over dp's ranks where dp is given.
class DataParallel;
void fit_to_steps(Spec& spec, int64_t steps, int ranks = 1);
ProfiledRun profile_mode(const Spec& spec, const Dataset& data, Precision p, int64_t steps,
                         Backend& be, bool bar_on, uint64_t memory_limit,
                         DataParallel* dp = nullptr, const std::string& round = "");
// A profiled mode's head in profile's and explain's JSON: precision, status, profiled steps, step
// time (median and mean; null, never 0, unless the mode trained) and status_detail.
nlohmann::json profiled_mode_json(const ProfiledRun& pr);

// `explain`: each mode profiled as `profile` does, and every mode compared with the baseline
// (fp32 when it is among the modes, else the first): time by op kind, the tensor-core-eligible
// share of the baseline step and its Amdahl bound, and flags (train/explain.h).
struct ExplainArgs {
  std::string spec;
  RunArgs run;  // device, precisions, batch size, seed, quiet, memory limit
  int64_t steps = 10;
  int64_t repeat = 1;  // rounds of every mode's profile, interleaved
  std::string json_path, md_path;
};
int cmd_explain(const ExplainArgs& args);

int cmd_validate(const std::vector<std::string>& specs, const std::string& json_path);

struct InspectArgs {
  std::string spec;
  std::string precision;           // empty: every precision of the spec
  std::string depth = "sublayer";  // or "block": the layers without their sublayers
  std::string json_path;
  int64_t batch_size = 0;   // --batch-size: the tables at this batch (0: the spec's)
  size_t memory_limit = 0;  // --memory-limit: the largest batch predicted to fit it (0: none)
  int64_t multiple = 1;     // --multiple: of the batches it may give
};
int cmd_inspect(const InspectArgs& args);

int cmd_devices(bool as_json);

struct DataArgs {
  std::string spec;
  std::string out_prefix;  // writes <prefix>.json and <prefix>.{train,eval}_{x.f32,y.i32}
  int64_t seed = -1;       // -1: the spec's value
  bool params = false;     // also <prefix>.params.f32: the initial parameters
  bool quiet = false;
};
int cmd_data(const DataArgs& args);

// `compare`: thresholds as given on the command line ("5%", "5"), parsed by cmd_compare so a
// bad value is one line naming the option.
struct CompareArgs {
  // BASELINE CURRENT, or CURRENT alone with --baseline, or --baseline and --current alone (each
  // repeatable, globs expanded): several files of a side are repetitions of one baseline (one
  // current); with --paired, the i-th of each side ran one after the other.
  std::vector<std::string> files;
  std::vector<std::string> baselines, currents;
  std::string time_threshold = "10%", memory_threshold = "2%", accuracy_threshold = "0.5";
  std::string loss_threshold;  // empty: final loss not compared
  std::string md_path, json_path;
  std::string junit_path;  // JUnit XML, one test case per row
  bool strict = false;
  bool paired = false;
};
int cmd_compare(const CompareArgs& args);

// `report`: result JSON files -> one self-contained HTML page (--html, required) and optionally
// their console tables as Markdown (--md).
struct ReportArgs {
  std::vector<std::string> inputs;
  std::string html_path, md_path;
  // --history: the inputs are results of successive commits; trends over them instead
  // (html_report.h: format_history_html).
  bool history = false;
};
int cmd_report(const ReportArgs& args);

// `maxbatch`: per spec and mode, the largest batch that trains within --memory-limit
// (train/max_batch.h); the table, and JSON / CSV / Markdown files.
struct MaxBatchArgs {
  std::vector<std::string> specs;
  DeviceChoice device;
  std::vector<std::string> precisions;  // empty: each spec's own list
  uint64_t memory_limit = 0;            // 0: on the CPU kDefaultCpuMemoryLimit, on a GPU its own
  int64_t multiple = 1;
  int64_t steps = 2;
  std::string json_path, csv_path, md_path;
  bool quiet = false;
};
// What maxbatch caps training memory at on the CPU without --memory-limit: host memory is shared
// with everything else on the machine, and a search up to all of it would swap.
constexpr uint64_t kDefaultCpuMemoryLimit = uint64_t{4} << 30;
int cmd_maxbatch(const MaxBatchArgs& args);

// Picks the backend for --device: cuda, cpu (native), reference; auto is cuda, else the native
// CPU, else the reference, each step down said in one line on stderr (unless quiet).
// Where a data-parallel rank runs: the GPU a CUDA backend takes (its local index, modulo the GPUs
// there are), and how many ranks share this host's cores (the native CPU's default threads).
struct RankPlacement {
  int local_rank = 0, local_ranks = 1;
};
std::unique_ptr<Backend> select_backend(const DeviceChoice& device, bool quiet,
                                        const RankPlacement& place = {});

// What the native CPU backend runs with (env.native_cpu, and `devices`): threads, oneDNN's
// version and ISA, the CPU's vector flags, AMX permission, how bf16 GEMMs run.
nlohmann::json native_cpu_json(const DeviceInfo& d);
// device_note (the note under run's tables: emulated times, bf16 converted on this CPU) of runs
// trained here on `d`, for the commands that write no run report (profile, explain, maxbatch).
std::optional<std::string> device_note(std::vector<RunResult> runs, const DeviceInfo& d);
// The backend's warnings of a run (RunResult::warnings), one line each on stderr, naming the run:
// printed even under --quiet, as they say its times are not the library's.
void print_warnings(const RunResult& r, const std::vector<std::string>& warnings);
inline void print_warnings(const RunResult& r) {
  print_warnings(r, r.warnings);
}
// tool {name, version, git} and env {device..., cpu...} blocks of the result JSON.
nlohmann::json tool_json();
// The build's `git describe` (e.g. "063e057a1b2c-dirty"; "unknown" without git): written at every
// build by cmake/git_describe.cmake.
const char* build_git_describe();
// Every result file's provenance (train/results.h Report::provenance): the UTC time, the host,
// this process's command line, and the commit of the git checkout it runs in (null outside one).
nlohmann::json provenance_json();
// This host's name as provenance records it ("" when it cannot be read).
std::string host_name();
// The header every JSON file mpbench writes starts with: schema_version 1, kind (the command that
// wrote it: run, profile, explain, inspect, maxbatch, compare, devices, validate), tool and
// provenance. `report` and `compare` tell files apart by the kind.
nlohmann::json json_header(const char* kind);
nlohmann::json env_json(const DeviceInfo& device, const DeviceInfo& host_cpu);
// A GPU's facts: name, capability, memory, SMs, versions, tensor-core modes, datasheet peaks.
nlohmann::json gpu_facts_json(const DeviceInfo& d);

// `s` as one printable line (train/printable.h), its long words clipped and the whole cut at 2000
// bytes, saying so; for error messages that echo what the user gave.
std::string printable_line(const std::string& s);
// "mpbench: " and the message as one printable line on stderr, in one write (the ranks of an MPI
// launch share the terminal): an error as the command ends with it.
void say_error(const std::string& message);

int mpbench_main(int argc, char** argv);

}  // namespace mpbench
