// Command-line front end: CLI11 definitions of every subcommand, and the one place where errors
// become a single line on stderr and an exit code (0 ok, 1 regression, 2 bad input, 3 runtime).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "app/launch.h"
#include "app/output_file.h"
#include "kernels/error.h"
#include "models/spec.h"
#include "models/spec_reader.h"
#include "train/printable.h"

namespace mpbench {

nlohmann::json tool_json() {
  return {{"name", "mpbench"}, {"version", MPBENCH_VERSION}, {"git", build_git_describe()}};
}

namespace {

// argv, kept by mpbench_main for provenance_json: the process's own, set once.
std::vector<std::string>& command_line() {
  static std::vector<std::string> argv;
  return argv;
}

// The commit of the git checkout the working directory is in, as CI tools record it; git's own
// answer (worktrees, packed refs), null where there is no git or no checkout.
nlohmann::json checkout_commit() {
  FILE* p = ::popen("git rev-parse --verify -q HEAD 2>/dev/null", "r");
  if (!p) return nullptr;
  char buf[128] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  const int rc = ::pclose(p);
  std::string s = got ? buf : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (rc != 0 || s.size() < 7 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
    return nullptr;
  return s;
}

}  // namespace

nlohmann::json json_header(const char* kind) {
  return {{"schema_version", 1},
          {"kind", kind},
          {"tool", tool_json()},
          {"provenance", provenance_json()}};
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return printable_line(host);
}

nlohmann::json provenance_json() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"time_utc", when},
          {"host", host_name()},
          {"command", command_line()},
          {"commit", checkout_commit()}};
}

namespace {

// Each subcommand's --help shows its own examples; the top-level help shows them all.
const std::vector<std::pair<const char*, const char*>> kExamples = {
    {"run",
     "mpbench run configs/mnist_mlp.json                  compare all four modes on the default "
     "device"},
    {"run",
     "mpbench run configs/gpt2_small_layer.json --precisions amp_bf16,amp_fp8   FP8 (sm_89+) vs "
     "bf16"},
    {"run",
     "mpbench run configs/mnist_mlp.json --precisions fp32,amp_bf16 --epochs 2 --json out.json"},
    {"run",
     "mpbench run configs/tiny_*.json --device reference --csv results.csv --md results.md "
     "--quiet"},
    {"run", "mpbench run configs/resnet50_conv2.json configs/bert_base_layer.json --cuda-graphs"},
    {"run", "mpbench run configs/tiny_mlp.json --repeat 5 --json current.json   for compare"},
    {"profile",
     "mpbench profile configs/bert_base_layer.json --precision amp_bf16   where a step's time "
     "goes"},
    {"explain",
     "mpbench explain configs/gpt2_small_layer.json --precisions fp32,amp_bf16   why bf16 helped, "
     "or not"},
    {"maxbatch",
     "mpbench maxbatch configs/resnet50_conv2.json --memory-limit 16GiB --multiple 8   what fits a "
     "card"},
    {"validate",
     "mpbench validate configs/*.json                     check spec files without running them"},
    {"inspect",
     "mpbench inspect configs/gpt2_small_layer.json --precision amp_bf16   per-layer FLOPs, "
     "memory"},
    {"inspect",
     "mpbench inspect configs/gpt2_small.json --memory-limit 80GiB --multiple 8   the largest "
     "batch predicted to fit, no card needed"},
    {"devices",
     "mpbench devices --json                              the GPU(s), versions and datasheet "
     "peaks"},
    {"compare", "mpbench compare baseline.json current.json --md summary.md   the CI gate"},
    {"compare",
     "mpbench compare --paired --baseline 'base-*.json' --current 'cur-*.json'   the two builds "
     "run in turns"},
    {"report",
     "mpbench report results/h200/*.json --html report.html   charts of result files as one page"},
    {"data",
     "mpbench data configs/mnist_mlp.json --out /tmp/mnist   the exact dataset, for PyTorch"},
};

const char* kExitCodes =
    R"(Exit codes: 0 ok, 1 regression found (compare), 2 bad input, 3 runtime failure, 4 compare
could not judge (nothing matched, a spec changed; with --strict also inconclusive, missing or
environment-changed rows),
129 / 130 / 143 interrupted by SIGHUP / SIGINT / SIGTERM (a first Ctrl-C in `run` stops after
the step in progress and prints the finished runs' table; a second quits at once).
)";

// The examples of `command` ("" for all of them), and the exit codes unless its own text has
// them (compare's, more of them than the list's).
std::string help_footer(const std::string& command, const std::string& own_text) {
  std::string out = "\nExamples:\n";
  for (const auto& [name, line] : kExamples)
    if (command.empty() || command == name) out += std::string("  ") + line + "\n";
  if (own_text.find("Exit codes:") != std::string::npos) return out;
  return out + "\n" + kExitCodes;
}

// An empty path or list given on purpose (`--json ''`, `--precisions ''`) is an error, not the
// option left out: an unset option is simply not parsed.
const CLI::Validator kNonEmpty(
    [](std::string& s) { return s.empty() ? std::string("expected a value, got ''") : ""; }, "",
    "non-empty");

using spec_json::clip;

// A word after an option that reads as another option is one the user meant: CLI11 takes the word
// after `--json` as its value whatever it is, so `--json --quiet` wrote a file named "--quiet" and
// `compare ... --json --strict` lost --strict. A file's name may not start with '-' at all
// (./-q names such a file; '-' alone the outputs refuse by name); any other text value may not
// start with "--" (a negative number or "-fp32" gets its own option's message).
bool names_a_file(const CLI::Option& opt) {
  static const std::set<std::string> kFileOptions = {
      "--json", "--csv", "--md", "--html", "--junit", "--out", "--baseline", "--scaling-baseline"};
  return kFileOptions.count(opt.get_name()) > 0;
}
CLI::Validator not_an_option(bool file) {
  return CLI::Validator(
      [file](std::string& s) {
        if (s.size() < 2 || s[0] != '-' || (!file && s[1] != '-')) return std::string();
        return "expected a value, got the option '" + clip(s) + "'" +
               (file ? " (a file of that name: ./" + clip(s) + ")" : "");
      },
      "", "not-an-option");
}

// Numbers on the command line are plain decimal in every option: CLI11 reads integers with
// strtoll(s, 0), which takes "0x10" as 16 and "010" as 8. A sign, digits without a leading zero
// and, with `fraction`, a decimal part.
bool plain_decimal(const std::string& s, bool fraction) {
  size_t i = s.size() > 1 && s[0] == '-' ? 1 : 0;
  const size_t int_begin = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  const size_t int_digits = i - int_begin;
  if (int_digits == 0 || (int_digits > 1 && s[int_begin] == '0')) return false;
  if (fraction && i < s.size() && s[i] == '.') {
    const size_t frac_begin = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == frac_begin) return false;
  }
  return i == s.size();
}

// Applied to every numeric option of every subcommand, after its own checks.
const CLI::Validator kDecimalInteger(
    [](std::string& s) {
      return plain_decimal(s, false) ? std::string()
                                     : "expected a decimal integer, got '" + clip(s) + "'";
    },
    "", "decimal");
const CLI::Validator kDecimalNumber(
    [](std::string& s) {
      return plain_decimal(s, true) ? std::string()
                                    : "expected a decimal number, got '" + clip(s) + "'";
    },
    "", "decimal");

// "a, b" -> {"a", "b"}: blanks around an item are dropped; an item with a blank inside
// ("f p 3 2") is bad input, never read as "fp32".
std::vector<std::string> split_list(const std::string& option, const std::string& s) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.find_first_of(" \t\n\r\v\f") != std::string::npos)
      throw_bad_input(fmt::format(
          "{}: '{}' has a blank inside (expected items separated by commas)", option, clip(item)));
    if (item.empty())
      throw_bad_input(fmt::format("{}: '{}' has an empty item (expected items separated by commas)",
                                  option, clip(s)));
    out.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

const char* kCompareRule = R"(
Runs are matched by model, precision, device, cuda_graphs, batch size and seed (`run --seeds`).
The runs of one key are its repetitions: `run --repeat N` in one file, and those of every
file of a side pooled. Time: the ratio (current / baseline) of the medians over repetitions of
each repetition's median epoch time, with a 95% hierarchical percentile bootstrap interval
(resample the files, then the repetitions within each, then the epochs within each repetition;
2000 resamples, fixed seed: the output is deterministic), so that it holds the noise between
runs, not only between one run's epochs; from three files in all, widened to at least the Student
t interval of the files' log medians about the ratio (a current side of one file, a CI job's,
puts the spread between processes into the interval only so).
--paired (--baseline file i and --current file i ran one after the other: a job that runs the
two builds in turn): the median over pairs of each pair's ratio of its files' medians, with the
hull of a bootstrap of the pairs (and their repetitions) and the Student t interval of the
pairs' log ratios (from 10 pairs a fifth trimmed a side, Yuen's); 3 pairs at least. What the
machine did to both runs of a pair cancels in its ratio, which baseline files made at other
moments cannot do (bench/README.md: the regression gate, measured).
With threshold t:
  slower        CI lower bound > 1 and ratio > 1+t (significant and beyond the threshold)
  faster        CI upper bound < 1 and ratio < 1/(1+t)
  same          the whole CI within [1/(1+t), 1+t]
  inconclusive  anything else (noise), or fewer than 3 repetitions on a side (paired: pairs;
                the row says how many it needs: run --repeat 5 is the CI recommendation;
                paired and too wide, how many pairs spread as these would settle it)
  spec-changed  the resolved specs differ (the first differing JSON path is named): not compared
  recovered     no baseline repetition trained, every current one did: nothing to compare
Time counts the repetitions that trained on each side, less those flagged busy (their threads
waited for CPUs that something else held, 5% of their time: host_load), which are slower as a
regression is and as steady, and are left out on either side and counted in the row. Memory (training peak: every category
but the dataset copy), accuracy and final loss are compared without an interval, over every
repetition that trained: the largest peak, the median accuracy and loss (a loss gone non-finite
always regresses); a change exactly at a threshold is within it. A run that fails in some way
(oom, diverged, failed) in a larger share of its repetitions than it did so in the baseline (any,
where every baseline repetition trained) is a regression; runs on one side only are listed as missing /
new. The spec is checked between every baseline file and every current file. An environment
difference (GPU, driver, CUDA, cuDNN, CPU, the native CPU's threads and ISA, the reference's
BLAS threads and kernels) is named in its rows and
switches nothing off: every number is still compared, and under --strict the difference alone
fails (exit 4).

Exit codes: 0 no regression, 1 a regression (time, memory, accuracy, loss or status), 2 bad
input, 3 runtime failure, 4 nothing matched or a spec changed (unless a regression makes it 1),
or (--strict) no regression but inconclusive, missing or environment-changed rows, 129 / 130 /
143 interrupted by SIGHUP / SIGINT / SIGTERM.
)";

// A message longer than this (a list of every layer) is cut, saying so, the note included.
constexpr size_t kMaxLineBytes = 2000;
constexpr size_t kCutNoteRoom = 64;  // " ... (cut: N of M bytes shown)" and one last escape

// Every word (a run without spaces: an argument, a path, a value) of more than kMaxQuoted bytes
// cut to its start and "...": a 100 KB argument is not echoed whole. A word the spec reader cut
// already ("kkk...:") stays as it is.
std::string clip_words(const std::string& s) {
  constexpr size_t kSlack = 16;  // room for what follows a cut word: "...", a colon, quotes
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t end = std::min(s.find(' ', i), s.size());
    out += end - i > spec_json::kMaxQuoted + kSlack ? clip(s.substr(i, end - i))
                                                    : s.substr(i, end - i);
    if (end < s.size()) out += ' ';
    i = end + 1;
  }
  return out;
}

}  // namespace

std::string printable_line(const std::string& message) {
  const std::string s = clip_words(message);
  std::string out;
  const size_t shown = append_printable(s, kMaxLineBytes - kCutNoteRoom, out);
  if (shown < s.size()) out += fmt::format(" ... (cut: {} of {} bytes shown)", shown, s.size());
  return out;
}

namespace {

// An error line on stderr in one write: the ranks of an MPI launch share the terminal, and pieces
// of two lines would interleave.
void say(const std::string& line) {
  std::cerr << line + "\n" << std::flush;
}

}  // namespace

void say_error(const std::string& message) {
  say("mpbench: " + printable_line(message));
}

std::vector<int64_t> parse_batch_sizes(const std::string& option, const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(option, text)) {
    const bool digits = item.size() <= 7 && plain_decimal(item, false) && item[0] != '-';
    const int64_t v = digits ? std::stoll(item) : 0;
    if (v < 1 || v > kMaxBatchSize)
      throw_bad_input(
          fmt::format("{}: expected batch sizes from 1 to {} separated by commas, got "
                      "'{}'",
                      option, kMaxBatchSize, clip(item)));
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw_bad_input(fmt::format("{}: batch size {} is given twice", option, v));
    out.push_back(v);
  }
  return out;
}

uint64_t parse_memory_size(const std::string& option, const std::string& given) {
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"KiB", 1024},       {"MiB", 1048576},      {"GiB", 1073741824},
      {"TiB", 1ull << 40}, {"KB", 1000},          {"MB", 1000000},
      {"GB", 1000000000},  {"TB", 1000000000000}, {"B", 1}};
  const auto bad = [&](const char* why) {
    throw_bad_input(fmt::format(
        "{}: expected a size such as 16GiB, 512MiB, 4GB or a number of bytes{}, got '{}' (units: "
        "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
        option, why, clip(given)));
  };
  // Spaces around the size are the shell's quoting, not part of it; between number and unit
  // they are allowed ("16 GiB").
  const size_t first = given.find_first_not_of(' '), last = given.find_last_not_of(' ');
  const std::string text = first == std::string::npos ? "" : given.substr(first, last - first + 1);
  size_t end = text.size();
  uint64_t unit = 1;
  bool suffix = false;
  for (const auto& [name, factor] : kUnits) {
    const size_t n = std::strlen(name);
    if (text.size() > n && text.compare(text.size() - n, n, name) == 0) {
      end = text.size() - n;
      unit = factor;
      suffix = true;
      break;
    }
  }
  std::string number = text.substr(0, end);
  while (!number.empty() && number.back() == ' ') number.pop_back();
  // Plain decimal, and a decimal point only before a unit: "1.5GiB" is a size, "1.5" bytes is not.
  if (!plain_decimal(number, suffix) || number[0] == '-') bad("");
  const size_t dot = number.find('.');
  const std::string whole = number.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : number.substr(dot + 1);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  // Exactly, in integers: whole x unit + (frac / 10^d) x unit, which must be whole bytes ("1.5B"
  // is not 1 byte). 20 digits are beyond 2^64 bytes already; a fraction of more than 40 digits
  // is finer than a byte of any unit (2^-40, a byte of a TiB, has 40). 10^40 is past 128 bits,
  // so the fraction is reduced first: with unit = 2^u2 5^u5 x rest, frac / 10^d x unit is
  // frac / (2^e2 5^e5) x unit_left, e2 = d - min(d, u2), e5 = d - min(d, u5). Whole bytes need
  // frac divisible by that divisor, which has no factor 10 (the fraction's last digit is not 0):
  // one of e2, e5 is 0, and the divisor at most 5^40 < 2^94.
  using U128 = unsigned __int128;
  if (whole.size() > 20) bad("");
  if (frac.size() > 40) bad(" (whole bytes)");
  U128 w = 0;
  for (char c : whole) w = w * 10 + static_cast<unsigned>(c - '0');
  const int d = static_cast<int>(frac.size());
  int u2 = 0, u5 = 0;
  uint64_t unit_left = unit;
  while (u2 < d && unit_left % 2 == 0) unit_left /= 2, ++u2;
  while (u5 < d && unit_left % 5 == 0) unit_left /= 5, ++u5;
  const int e2 = d - u2, e5 = d - u5;
  if (e2 > 0 && e5 > 0) bad(" (whole bytes)");
  U128 divisor = 1;
  for (int i = 0; i < e2; ++i) divisor *= 2;
  for (int i = 0; i < e5; ++i) divisor *= 5;
  U128 q = 0, r = 0;  // frac / divisor, digit by digit: r < divisor, so r x 10 + 9 fits
  for (char c : frac) {
    r = r * 10 + static_cast<unsigned>(c - '0');
    q = q * 10 + r / divisor;
    r %= divisor;
  }
  if (r != 0) bad(" (whole bytes)");
  // q x unit_left < unit: the fraction is under one unit.
  const U128 bytes = w * unit + q * unit_left;
  if (bytes < 1)  // a number of bytes, but no size: nothing fits in it
    throw_bad_input(
        fmt::format("{}: expected a size above 0 bytes, got '{}'", option, clip(given)));
  if (bytes > std::numeric_limits<uint64_t>::max()) bad("");
  return static_cast<uint64_t>(bytes);
}

int mpbench_main(int argc, char** argv) {
  install_interrupt_handlers();
  // Under a launcher from the start: it may end this rank for another that failed (and said
  // why) at any moment, before this one has parsed its arguments or joined the job.
  if (mpi_launcher()) quiet_launcher_signals();
  command_line().assign(argv, argv + argc);
  CLI::App app{
      "mpbench: what mixed precision (TF32, FP16, BF16, FP8) buys over FP32 for your model's "
      "shapes on your GPU (or CPU): time per epoch, peak memory, final accuracy, and why."};
  app.set_version_flag(
      "--version", std::string("mpbench ") + MPBENCH_VERSION + " (" + build_git_describe() + ")");
  app.require_subcommand(1);

  // The one --device of every command that trains.
  auto add_device_option = [](CLI::App* cmd, DeviceChoice& device) {
    cmd->add_option("--device", device.name,
                    "auto (the GPU if there is one, else the CPU), cuda, cpu (native: oneDNN, "
                    "fp32 and amp_bf16 on the CPU's own bf16 hardware), or reference (every "
                    "mode's numerics emulated exactly on the CPU; its times mean nothing)")
        ->check(CLI::IsMember({"auto", "cpu", "reference", "cuda"}))
        ->default_val("auto");
    cmd->add_option("--threads", device.threads,
                    "Threads of the native CPU backend (default: one per physical core; more than "
                    "the CPUs this process may run on make every op wait, and are warned of)")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--cpu-isa", device.cpu_isa,
                    "Cap the native CPU backend's instruction set (oneDNN's "
                    "ONEDNN_MAX_CPU_ISA, which it overrides): sse41, avx, avx2 (no bf16 "
                    "kernel), avx512_core, avx512_core_vnni (bf16 converted in software), "
                    "avx512_core_bf16 (AVX512-BF16, no AMX), avx512_core_amx, all");
  };

  // Data parallel's options, for the commands that train under mpirun or srun.
  auto add_data_parallel_options = [](CLI::App* cmd, RunArgs& args) {
    cmd->add_option("--grad-reduce", args.grad_reduce,
                    "Data parallel (under mpirun or srun): the dtype the gradients are averaged "
                    "in across ranks. fp32 (default, as PyTorch's DDP), or bf16 / fp16: cast, "
                    "summed in 16 bits, cast back, as DDP's bf16_compress_hook (half the bytes)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
    cmd->add_option("--bucket-mb", args.bucket_mb,
                    "Data parallel: the gradients are all-reduced in buckets of this many MiB of "
                    "fp32 gradients (default 25, as DDP; fractions allowed, down to 1 KiB), each "
                    "started as soon as the backward has made it")
        // CLI::Range prints a double bound as "0.000977 to 65536.000000".
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
              char* end = nullptr;
              const double x = std::strtod(v.c_str(), &end);
              const bool in = end != v.c_str() && *end == '\0' && x >= 1.0 / 1024 && x <= 65536;
              return in ? "" : "Value " + v + " not in range 1/1024 (1 KiB) to 65536";
            },
            "MiB"));
  };

  RunArgs run;
  std::string precisions;
  auto* run_cmd = app.add_subcommand(
      "run", "Train each spec's model in each precision mode and print the comparison table");
  run_cmd->add_option("spec", run.specs, "Model spec JSON file(s)")->required();
  add_device_option(run_cmd, run.device);
  // --precision too, since inspect takes one mode under that name and people type either.
  run_cmd->add_option("--precisions,--precision", precisions,
                      "Comma-separated modes: fp32,tf32,amp_fp16,amp_bf16,amp_fp8 (default: the "
                      "spec's; amp_fp8, FP8 GEMMs as Transformer Engine's recipe, only when "
                      "listed)");
  run_cmd->add_option("--epochs", run.epochs, "Override the spec's epochs")
      ->check(CLI::Range(int64_t{1}, int64_t{10000}));
  std::string run_batch_sizes;
  auto* batch_sizes_opt = run_cmd->add_option(
      "--batch-sizes", run_batch_sizes,
      "A sweep: train each spec at each of these batch sizes (e.g. 32,64,128,256); the table and "
      "the report give the speedup over fp32 at each");
  // --warmup on run, profile and explain: one override path with --epochs (apply_run_overrides).
  const auto add_warmup = [](CLI::App* cmd, RunArgs& args,
                             const char* help =
                                 "Override the spec's warm-up steps (train.warmup_steps): steps "
                                 "trained before the timing starts") {
    cmd->add_option("--warmup", args.warmup, help)->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  };
  // profile and explain raise it to kMinWarmup (app/cmd_profile.cpp).
  const char* const profiled_warmup =
      "Override the spec's warm-up steps (train.warmup_steps): steps trained before the profiled "
      "ones, at least 2 here (the first steps choose the libraries' algorithms)";
  add_warmup(run_cmd, run);
  // --batch-size of run, profile, explain and inspect; --quiet of the first three.
  const auto add_batch_size = [](CLI::App* cmd, int64_t& batch,
                                 const char* help = "Override the spec's batch size") {
    return cmd->add_option("--batch-size", batch, help)
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  };
  const auto add_quiet = [](CLI::App* cmd, RunArgs& args) {
    cmd->add_flag("--quiet,-q", args.quiet, "No progress bar and no informational lines");
  };
  add_batch_size(run_cmd, run.batch_size)->excludes(batch_sizes_opt);
  run_cmd
      ->add_option("--seeds", run.seeds,
                   "Train each mode N times, with training seeds 1..N (they change the "
                   "initialisation and the batch order; the data stay fixed). The table then "
                   "gives accuracy as mean +- std over the seeds and its difference from fp32 "
                   "with a 95% interval: a paired t interval over the seeds (the difference of "
                   "each seed's two runs, mean +- t(0.975, N-1) sd / sqrt(N)); the JSON gets "
                   "every run with its seed and a seed_summary[]")
      ->check(CLI::Range(int64_t{2}, int64_t{1000}));
  run_cmd
      ->add_option("--repeat", run.repeat,
                   "Train every spec x mode x batch N times, each a fresh model with the same "
                   "seed (identical numerics), interleaved across modes (fp32, bf16, fp32, bf16, "
                   "...) so that a drift of the machine does not land on one mode. The table "
                   "gives the median over the repetitions and the spread between them, and from 3 "
                   "repetitions each speedup's 95% interval (paired by round: a bootstrap of the "
                   "rounds and their epochs, widened to the Student t interval of the rounds' log "
                   "speedups where that is wider, as it is at few rounds); the JSON keeps every "
                   "repetition and a repeat_summary[] with those intervals; `compare` "
                   "judges time by the variation between "
                   "repetitions and needs at least 3 a side (5 recommended in CI)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  run_cmd->add_option("--seed", run.seed, "Override the spec's data seed")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  run_cmd->add_option("--json", run.json_path, "Write the results JSON (schema_version 1) here");
  run_cmd->add_option(
      "--csv", run.csv_path,
      "Write one CSV row per run here (model x precision, and x batch, seed and repetition "
      "where swept)");
  run_cmd->add_option("--md", run.md_path, "Write the comparison table as Markdown here");
  add_quiet(run_cmd, run);
  std::string run_memory_limit, profile_memory_limit;
  const char* kMemoryLimitHelp =
      "Cap training memory (every category but the dataset copy, library workspaces included) "
      "at SIZE, e.g. 16GiB: would it fit that card? A mode that needs more is an oom row";
  run_cmd->add_option("--memory-limit", run_memory_limit, kMemoryLimitHelp);
  run_cmd->add_flag("--cuda-graphs", run.cuda_graphs,
                    "Capture the training step once as a CUDA graph and replay it (GPU only)");
  add_data_parallel_options(run_cmd, run);
  run_cmd->add_option(
      "--scaling-baseline", run.scaling_baseline,
      "Data parallel: the 1-rank run each run's scaling efficiency (samples/s over ranks x the "
      "1-rank samples/s) and the speedup at 1 rank are against. `run`: rank 0 trains each spec "
      "and mode alone first, at the same per-rank batch, while the other ranks wait asleep; or a "
      "result file of a plain `mpbench run` at that batch");

  std::vector<std::string> validate_specs;
  auto* validate_cmd =
      app.add_subcommand("validate",
                         "Check spec files: an ok line for each, or exit 2 with one line: the "
                         "first refused file's reason and the names of the others refused");
  validate_cmd->add_option("spec", validate_specs, "Model spec JSON file(s)")->required();
  std::string validate_json;
  validate_cmd->add_option("--json", validate_json,
                           "Also write what was checked (each spec's name, family, parameters "
                           "and modes) as JSON here; nothing is written when a spec is refused");

  InspectArgs inspect;
  auto* inspect_cmd = app.add_subcommand(
      "inspect",
      "Per-layer and sublayer table: output shape, parameters, FLOPs, dtypes, activation bytes, "
      "tensor-core alignment, predicted training memory (and with --memory-limit the largest "
      "batch predicted to fit)");
  inspect_cmd->add_option("spec", inspect.spec, "Model spec JSON file")->required();
  inspect_cmd->add_option("--precision", inspect.precision,
                          "One mode (default: each of the spec's modes)");
  inspect_cmd->add_option("--depth", inspect.depth,
                          "sublayer (default): each layer and under it its GEMMs, convolutions, "
                          "norms and softmax; block: the layers alone");
  inspect_cmd->add_option("--json", inspect.json_path,
                          "Write the tables as JSON: {\"entries\": [one per mode: model, "
                          "family, precision, batch_size, params, forward_flops (per batch), "
                          "training_flops, predicted_memory_bytes {training, by_category}, "
                          "tensor_core_multiple, misaligned, layers[]]}; each layer has name, "
                          "kind, output_shape, params, forward_flops and activation_bytes (per "
                          "batch), compute_dtype, storage_dtype, matmul and misaligned where it "
                          "is a GEMM or convolution, and children[]; with --memory-limit, "
                          "memory_limit_bytes and each entry's predicted_max_batch {batch, "
                          "multiple, at_spec_limit}");
  add_batch_size(inspect_cmd, inspect.batch_size,
                 "The tables and the predicted memory at this batch instead of the spec's "
                 "(nothing trains: the spec's data need not hold it)");
  std::string inspect_memory_limit;
  auto* inspect_limit = inspect_cmd->add_option(
      "--memory-limit", inspect_memory_limit,
      "Also give the largest batch predicted to fit SIZE (e.g. 80GiB), per mode, from the "
      "prediction alone: what fits a card one does not have. Library workspaces are not in it "
      "(`mpbench maxbatch` on the card trains and measures them)");
  // --multiple of inspect and maxbatch: the batches they may answer with.
  const auto add_multiple = [](CLI::App* cmd, int64_t& k, const char* help) {
    return cmd->add_option("--multiple", k, help)
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
        ->default_val(1);
  };
  add_multiple(inspect_cmd, inspect.multiple,
               "With --memory-limit: only batch sizes that are multiples of K (e.g. 8)")
      ->needs(inspect_limit);

  ProfileArgs profile;
  std::string profile_precisions;
  auto* profile_cmd = app.add_subcommand(
      "profile",
      "Where a training step's time goes: every op timed with events, by layer, by op, top ops");
  profile_cmd->add_option("spec", profile.spec, "Model spec JSON file")->required();
  add_device_option(profile_cmd, profile.run.device);
  profile_cmd->add_option("--precisions,--precision", profile_precisions,
                          "Comma-separated modes (default: the spec's)");
  profile_cmd
      ->add_option(
          "--steps", profile.steps,
          "Training steps to profile per mode, after the warm-up (more steps: a median that one "
          "stalled step does not move)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(10);
  add_warmup(profile_cmd, profile.run, profiled_warmup);
  add_batch_size(profile_cmd, profile.run.batch_size);
  profile_cmd->add_option("--top", profile.top, "Rows of the top-ops table")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(25);
  profile_cmd->add_option("--json", profile.json_path,
                          "Write every op's time per step (and the run's env) as JSON here");
  profile_cmd->add_option("--memory-limit", profile_memory_limit, kMemoryLimitHelp);
  add_quiet(profile_cmd, profile.run);
  add_data_parallel_options(profile_cmd, profile.run);

  ExplainArgs explain;
  std::string explain_precisions, explain_memory_limit;
  auto* explain_cmd = app.add_subcommand(
      "explain",
      "Why a mode helped or didn't: each mode profiled, and every mode against fp32 (or the first "
      "listed) by op kind, with the share of the step a faster matrix unit speeds up (GEMMs and "
      "convolutions: the GPU's tensor cores, the CPU's bf16 units), its Amdahl bound and "
      "flags (misaligned sizes, fallback kernels, launch- or host-overhead-bound steps, loss-scale "
      "skips, ops that "
      "got slower)");
  explain_cmd->add_option("spec", explain.spec, "Model spec JSON file")->required();
  add_device_option(explain_cmd, explain.run.device);
  explain_cmd->add_option("--precisions,--precision", explain_precisions,
                          "Comma-separated modes, two or more (default: the spec's); the "
                          "baseline is fp32 when listed, else the first");
  explain_cmd
      ->add_option("--steps", explain.steps,
                   "Training steps to profile per mode, after the warm-up (an op is named slower "
                   "only when it is slower across them: 10 can show it, 3 cannot)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(10);
  explain_cmd
      ->add_option("--repeat", explain.repeat,
                   "Profile every mode N times, interleaved (fp32, bf16, fp32, bf16, ...): the "
                   "tables and the rank test pool the rounds' steps, and an op is named slower "
                   "only when its median is also slower in every round, so that one slow run "
                   "names nothing")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->default_val(1);
  add_warmup(explain_cmd, explain.run, profiled_warmup);
  add_batch_size(explain_cmd, explain.run.batch_size);
  explain_cmd->add_option("--json", explain.json_path,
                          "Write the comparisons as JSON: comparisons[] with from, to, "
                          "measured_speedup, eligible_fraction, fp32_matmul_fraction (the GEMM "
                          "and convolution share kept in fp32), bound (from the card's datasheet "
                          "peaks or the native CPU's measured GEMM ceilings; null on the "
                          "reference), by_kind[] and flags[]; rounds, profiled_steps_per_round");
  explain_cmd->add_option("--md", explain.md_path, "Write the comparisons as Markdown");
  explain_cmd->add_option("--memory-limit", explain_memory_limit, kMemoryLimitHelp);
  add_quiet(explain_cmd, explain.run);
  add_data_parallel_options(explain_cmd, explain.run);

  MaxBatchArgs maxbatch;
  std::string maxbatch_precisions, maxbatch_memory_limit;
  auto* maxbatch_cmd = app.add_subcommand(
      "maxbatch",
      "The largest batch per mode that really trains within a memory budget, and its ratio to "
      "fp32's");
  maxbatch_cmd->add_option("specs", maxbatch.specs, "Model spec JSON file(s)")->required();
  add_device_option(maxbatch_cmd, maxbatch.device);
  maxbatch_cmd->add_option("--precisions,--precision", maxbatch_precisions,
                           "Comma-separated modes (default: the spec's)");
  maxbatch_cmd->add_option(
      "--memory-limit", maxbatch_memory_limit,
      "Training memory to fit in (every category but the dataset copy, library workspaces "
      "included), e.g. 16GiB for a 16 GB card. Default: on a GPU its memory, on the CPU 4GiB");
  add_multiple(maxbatch_cmd, maxbatch.multiple,
               "Only try batch sizes that are multiples of K (e.g. 8 for tensor cores)");
  maxbatch_cmd
      ->add_option("--steps", maxbatch.steps,
                   "Timed training steps per probe, after one warm-up step (samples/s comes "
                   "from them)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->default_val(2);
  maxbatch_cmd->add_option("--json", maxbatch.json_path, "Write the results as JSON here");
  maxbatch_cmd->add_option("--csv", maxbatch.csv_path, "Write the results as CSV here");
  maxbatch_cmd->add_option("--md", maxbatch.md_path, "Write the table as Markdown here");
  maxbatch_cmd->add_flag("--quiet,-q", maxbatch.quiet, "No line per probe");
  maxbatch_cmd->footer(
      "Each probe builds the model at one batch size and trains it for a warm-up step and --steps "
      "steps on synthetic data (steps x batch samples) under the budget. The search starts from "
      "the largest multiple of K predicted to fit (inspect's prediction) and probes it and the "
      "next multiple: 2 probes when the prediction is exact. Where a probe disagrees, up to 8 "
      "guesses follow, each the largest batch whose prediction plus what the last probe took "
      "beyond it fits (usually the answer in a probe or two). Failing that, "
      "it doubles from the largest batch that trained until a probe does not fit, then bisects: "
      "about 2 log2(max batch / K) probes. Exit 0 whatever the batches; 2 for bad input, 3 for a "
      "runtime failure.");

  bool devices_json = false;
  auto* devices_cmd = app.add_subcommand(
      "devices", "GPUs and CPU of this machine: memory, SMs, tensor-core modes, datasheet peaks");
  devices_cmd->add_flag("--json", devices_json, "Print as JSON");

  ReportArgs report_args;
  auto* report_cmd = app.add_subcommand(
      "report", "Render result JSON files as one self-contained HTML page with charts");
  report_cmd
      ->add_option(
          "results", report_args.inputs,
          "Result JSON file(s) (mpbench run --json), and mpbench profile, explain and maxbatch "
          "--json files; a profile goes beside its model's runs (a chart in the HTML only), "
          "not alone")
      ->required();
  report_cmd->add_option("--html", report_args.html_path, "Write the HTML report here")->required();
  report_cmd->add_option("--md", report_args.md_path,
                         "Also write the tables as Markdown here (the runs', explain's and "
                         "maxbatch's; profiles are charts, in the HTML only)");
  report_cmd->add_flag(
      "--history", report_args.history,
      "The result files are successive commits' (one per commit): draw trends over them instead");
  report_cmd->footer(R"(
--history: one point per file, the files in the order of their provenance.time_utc (oldest
first; the same time keeps the order given), each labelled on the x axis by its commit's first 7
characters (the file's name when it was written outside a git checkout) and its date. Per model
and mode (and device, batch, CUDA graphs) two charts: the median epoch time, whiskers and a band
min-max (between the repetitions or seeds of a file with several runs, i.e. the median of their
medians; a single run: over its epochs), and the training memory. A commit whose runs did not
finish is a gap with a cross and a note; a commit that did not run the mode is a gap. Every
point carries data-x, data-commit and data-value. A file without provenance (an mpbench older
than it) is bad input, exit 2: without a time there is no order. Two files of one commit are
both kept, each its own point. Profile files are refused. --md writes the points as tables.)");

  DataArgs data_args;
  auto* data_cmd = app.add_subcommand(
      "data", "Write the spec's dataset as raw arrays (for training it with another framework)");
  data_cmd->add_option("spec", data_args.spec, "Model spec JSON file")->required();
  data_cmd
      ->add_option("--out", data_args.out_prefix,
                   "File prefix: writes PREFIX.json, PREFIX.train_x.f32, PREFIX.train_y.i32, "
                   "PREFIX.eval_x.f32, PREFIX.eval_y.i32 (a transformer's token inputs: "
                   "PREFIX.train_x.i32, PREFIX.eval_x.i32)")
      ->required();
  data_cmd->add_option("--seed", data_args.seed, "Override the spec's data seed")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  data_cmd->add_flag("--params", data_args.params,
                     "Also write PREFIX.params.f32: the fp32 parameters `mpbench run` starts "
                     "from (with the same --seed, without --seeds), every mode alike, in "
                     "mpbench's layouts (linear "
                     "(out, in), convolution (K, R, S, C)); PREFIX.json names, shapes and "
                     "places each");
  data_cmd->add_flag("--quiet,-q", data_args.quiet, "No informational line");

  CompareArgs compare;
  auto* compare_cmd = app.add_subcommand(
      "compare",
      "CI regression gate: compare a current result JSON against a baseline, run by run");
  compare_cmd->add_option(
      "files", compare.files,
      "BASELINE CURRENT result JSONs (mpbench run --json), or CURRENT alone with "
      "--baseline");  // how many: checked by cmd_compare, in words
  compare_cmd
      ->add_option("--baseline", compare.baselines,
                   "A baseline result JSON; repeat it (or give a quoted glob such as "
                   "'base-*.json') to treat several files as repetitions of one baseline")
      ->allow_extra_args(false);  // one file per --baseline: the next word may be CURRENT
  compare_cmd
      ->add_option("--current", compare.currents,
                   "A current result JSON, in place of CURRENT; repeat it (or give a quoted "
                   "glob) to treat several files as repetitions of one current, or with "
                   "--paired as the pairs of the --baseline files in their order")
      ->allow_extra_args(false);
  compare_cmd
      ->add_option("--time-threshold", compare.time_threshold,
                   "Slowdown of the median epoch time that fails, in percent")
      ->default_str("10%");
  compare_cmd
      ->add_option(
          "--memory-threshold", compare.memory_threshold,
          "Growth of the training memory (peak without the dataset) that fails, in percent")
      ->default_str("2%");
  compare_cmd
      ->add_option("--accuracy-threshold", compare.accuracy_threshold,
                   "Drop of the final accuracy that fails, in percentage points")
      ->default_str("0.5");
  compare_cmd->add_option("--loss-threshold", compare.loss_threshold,
                          "Relative change of the final loss (either way) that fails, in "
                          "percent; 0 requires an exact match (default: not compared)");
  compare_cmd->add_option("--md", compare.md_path,
                          "Write a Markdown summary (verdict, the rows to look at, the full "
                          "table folded) for $GITHUB_STEP_SUMMARY or a merge-request comment");
  compare_cmd->add_option("--json", compare.json_path, "Write the comparison as JSON here");
  compare_cmd->add_option("--junit", compare.junit_path,
                          "Write the comparison as JUnit XML here, one test case per row "
                          "(regressed: failure; inconclusive, missing, spec-changed: skipped)");
  compare_cmd->add_flag(
      "--paired", compare.paired,
      "The i-th --baseline file and the i-th --current file ran one after the other (a job "
      "that runs both builds in turn): time is judged from each pair's ratio, in which a drift "
      "of the machine cancels; as many files a side, 3 pairs at least for a time verdict");
  compare_cmd->add_flag("--strict", compare.strict,
                        "Exit 4 when inconclusive, missing or environment-changed rows remain");
  compare_cmd->footer(kCompareRule);

  // Footers last: a subcommand made after app.footer() would inherit the whole list.
  app.footer(help_footer("", ""));
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string own = sub->get_footer();
    sub->footer((own.empty() ? "" : own + "\n") + help_footer(sub->get_name(), own));
  }

  // Every option and argument that takes a value refuses an empty one (kNonEmpty), every
  // numeric one takes plain decimal only (kDecimalInteger, kDecimalNumber), and every other one
  // no word that reads as an option (not_an_option).
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt :
         sub->get_options([](CLI::Option* o) { return o->get_expected_min() > 0; })) {
      // transform() puts each before the option's own checks (a range's "Value abc not in
      // range 1 to 10000" said nothing of what was wrong), the last one first.
      // "INT", or "INT:<a validator's description>".
      const std::string full = opt->get_type_name(), type = full.substr(0, full.find(':'));
      if (type == "INT" || type == "UINT") opt->transform(kDecimalInteger);
      if (type == "FLOAT") opt->transform(kDecimalNumber);
      if (type == "TEXT") opt->transform(not_an_option(names_a_file(*opt)));
      opt->transform(kNonEmpty);
    }

  // Under a launch of several ranks with one command line, rank 0 alone says a bad argument
  // (every rank has the same); in mpirun's MPMD form each rank says its own, naming itself.
  const EnvRank env_rank = rank_from_env();
  const bool others_say_it = env_rank.size > 1 && env_rank.rank != 0 && !env_rank.mpmd;
  const std::string who =
      env_rank.size > 1 && env_rank.rank != 0 ? fmt::format("rank {}: ", env_rank.rank) : "";
  try {
    // CLI11 would read an unknown first word as a stray argument; name it instead.
    const auto known = app.get_subcommands(
        [&](const CLI::App* sub) { return argc > 1 && sub->get_name() == argv[1]; });
    if (argc > 1 && argv[1][0] != '-' && known.empty()) {
      if (others_say_it) return 2;
      say("mpbench: " + who + "unknown subcommand '" + printable_line(clip(argv[1])) +
          "' (expected run, profile, explain, maxbatch, validate, inspect, devices, data, compare "
          "or report; see mpbench --help)");
      return 2;
    }
    // Before a subcommand only --help and --version are known; CLI11 would only say that a
    // subcommand is required.
    if (argc > 1 && argv[1][0] == '-' && std::strcmp(argv[1], "-") != 0 &&
        std::strcmp(argv[1], "--") != 0) {
      const std::string word = argv[1];
      if (!app.get_option_no_throw(word.substr(0, word.find('=')))) {
        if (others_say_it) return 2;
        say("mpbench: " + who + "unknown option '" + printable_line(clip(word)) +
            "' (expected a subcommand, --help or --version; see mpbench --help)");
        return 2;
      }
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {  // rank 0 alone prints the help or the version
      return others_say_it ? 0 : app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return others_say_it ? 0 : app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return others_say_it ? 0 : app.exit(e);
    } catch (const CLI::ExtrasError&) {
      // CLI11 lists the extras last first ("cpu --device 1 --epochs"): in the order given, with
      // the options the subcommand does not have named.
      if (others_say_it) return 2;
      const auto given = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
      const CLI::App* sub = given.empty() ? &app : given.front();
      std::vector<std::string> extras = sub->remaining(true);
      if (extras.empty()) extras = app.remaining(true);
      std::vector<std::string> options;
      for (const std::string& x : extras)
        if (x.size() > 1 && x[0] == '-' && !std::isdigit(static_cast<unsigned char>(x[1])) &&
            x[1] != '.')
          options.push_back(clip(x.substr(0, x.find('='))));
      const std::string name = given.empty() ? "mpbench" : given.front()->get_name();
      std::string msg = "unexpected argument" + std::string(extras.size() == 1 ? "" : "s") + ": " +
                        clip(fmt::format("{}", fmt::join(extras, " ")));
      if (!options.empty()) msg += fmt::format(" ({} has no {})", name, fmt::join(options, ", "));
      say("mpbench: " + who + printable_line(msg) + " (see mpbench " +
          (given.empty() ? "" : name + " ") + "--help)");
      return 2;
    } catch (const CLI::ParseError& e) {
      std::string msg = e.what();
      if (msg.empty()) msg = "bad arguments";
      // CLI11 says a repeated option as "--threads: At Most 1 required but received 2", which
      // reads like a value.
      const std::string repeated = ": At Most 1 required but received ";
      if (const size_t at = msg.find(repeated); at != std::string::npos)
        msg = msg.substr(0, at) + ": given more than once; give it once";
      if (others_say_it) return 2;
      // Point at the help of the subcommand the error is in.
      const auto given = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
      say("mpbench: " + who + printable_line(msg) + " (see mpbench " +
          (given.empty() ? "" : given.front()->get_name() + " ") + "--help)");
      return 2;
    }
    // Only the commands that train take a launch of several ranks: the others would run as many
    // times over the same outputs.
    if (env_rank.size > 1 && !*run_cmd && !*profile_cmd && !*explain_cmd) {
      if (others_say_it) return 2;
      const auto given = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
      throw_bad_input(fmt::format(
          "{}{} runs in one process, not under a launch of {} ranks (mpirun or srun): only run, "
          "profile and explain train data parallel",
          who, given.empty() ? "this command" : given.front()->get_name(), env_rank.size));
    }
    // The values CLI11 took as text, read here: a bad one is the same on every rank, so rank 0
    // alone says it, as for CLI11's own errors above.
    auto read_values = [&](auto&& read) {
      try {
        read();
      } catch (const Error& e) {
        if (others_say_it && e.kind() == ErrorKind::BadInput) throw Error(e.kind(), "");
        throw;
      }
    };
    if (*run_cmd) {
      read_values([&] {
        if (!precisions.empty()) run.precisions = split_list("--precisions", precisions);
        if (!run_batch_sizes.empty())
          run.batch_sizes = parse_batch_sizes("--batch-sizes", run_batch_sizes);
        if (!run_memory_limit.empty())
          run.memory_limit = parse_memory_size("--memory-limit", run_memory_limit);
      });
      return cmd_run(run);
    }
    // profile and explain read --precisions and --memory-limit alike.
    auto finish = [&](RunArgs& r, const std::string& list, const std::string& limit) {
      read_values([&] {
        if (!list.empty()) r.precisions = split_list("--precisions", list);
        if (!limit.empty()) r.memory_limit = parse_memory_size("--memory-limit", limit);
      });
    };
    if (*profile_cmd) {
      finish(profile.run, profile_precisions, profile_memory_limit);
      return cmd_profile(profile);
    }
    if (*explain_cmd) {
      finish(explain.run, explain_precisions, explain_memory_limit);
      return cmd_explain(explain);
    }
    if (*maxbatch_cmd) {
      if (!maxbatch_precisions.empty())
        maxbatch.precisions = split_list("--precisions", maxbatch_precisions);
      if (!maxbatch_memory_limit.empty())
        maxbatch.memory_limit = parse_memory_size("--memory-limit", maxbatch_memory_limit);
      return cmd_maxbatch(maxbatch);
    }
    if (*validate_cmd) return cmd_validate(validate_specs, validate_json);
    if (*inspect_cmd) {
      if (!inspect_memory_limit.empty())
        inspect.memory_limit = parse_memory_size("--memory-limit", inspect_memory_limit);
      return cmd_inspect(inspect);
    }
    if (*devices_cmd) return cmd_devices(devices_json);
    if (*report_cmd) return cmd_report(report_args);
    if (*data_cmd) return cmd_data(data_args);
    if (*compare_cmd) return cmd_compare(compare);
    return 2;
  } catch (const Error& e) {
    // No message: another rank of an MPI launch has said it (app/launch.cpp).
    if (*e.what()) say_error(e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    say("mpbench: out of host memory");
    return 3;
  } catch (const std::exception& e) {
    say("mpbench: internal error: " + printable_line(e.what()));
    return 3;
  }
}

}  // namespace mpbench
