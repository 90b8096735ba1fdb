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
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "app/output_file.h"
#include "kernels/error.h"
#include "models/spec.h"

namespace mpbench {

nlohmann::json tool_json() {
  return {{"name", "mpbench"}, {"version", MPBENCH_VERSION}, {"git", MPBENCH_GIT}};
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

nlohmann::json provenance_json() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"time_utc", when},
          {"host", printable_line(host)},
          {"command", command_line()},
          {"commit", checkout_commit()}};
}

namespace {

const char* kExamples = R"(
Examples:
  mpbench run configs/mnist_mlp.json                  compare all four modes on the default device
  mpbench run configs/gpt2_small_layer.json --precisions amp_bf16,amp_fp8   FP8 (sm_89+) vs bf16
  mpbench run configs/mnist_mlp.json --precisions fp32,amp_bf16 --epochs 2 --json out.json
  mpbench run configs/tiny_*.json --device cpu --csv results.csv --md results.md --quiet
  mpbench run configs/resnet50_conv2.json configs/bert_base_layer.json --cuda-graphs
  mpbench profile configs/bert_base_layer.json --precision amp_bf16   where a step's time goes
  mpbench explain configs/gpt2_small_layer.json --precisions fp32,amp_bf16   why bf16 helped, or not
  mpbench validate configs/*.json                     check spec files without running them
  mpbench inspect configs/gpt2_small_layer.json --precision amp_bf16   per-layer FLOPs, memory
  mpbench devices --json                              the GPU(s), versions and datasheet peaks
  mpbench report results/h200/*.json --html report.html   charts of result files as one page

Exit codes: 0 ok, 1 regression found (compare), 2 bad input, 3 runtime failure, 4 compare
could not judge (nothing matched, a spec changed; with --strict also inconclusive rows),
130 / 143 interrupted by SIGINT / SIGTERM.
)";

// An empty path or list given on purpose (`--json ''`, `--precisions ''`) is an error, not the
// option left out: an unset option is simply not parsed.
const CLI::Validator kNonEmpty(
    [](std::string& s) { return s.empty() ? std::string("expected a value, got ''") : ""; }, "",
    "non-empty");

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

const char* kCompareRule = R"(
Runs are matched by model, precision, device, cuda_graphs, batch size and seed (`run --seeds`).
The runs of one key are its repetitions: `run --repeat N` in one file, plus one per --baseline
file. Time: the ratio (current / baseline) of the medians over repetitions of each repetition's
median epoch time, with a 95% hierarchical percentile bootstrap interval (resample the
repetitions, then the epochs within each; 2000 resamples, fixed seed: the output is
deterministic), so that it holds the noise between runs, not only between one run's epochs.
With threshold t:
  slower        CI lower bound > 1 and ratio > 1+t (significant and beyond the threshold)
  faster        CI upper bound < 1 and ratio < 1/(1+t)
  same          the whole CI within [1/(1+t), 1+t]
  inconclusive  anything else (noise), or fewer than 3 repetitions on a side (the row says how
                many it needs: run --repeat 5 is the CI recommendation)
  spec-changed  the resolved specs differ (the first differing JSON path is named): not compared
Memory (training peak: every category but the dataset copy), accuracy and final loss are
compared without an interval. A run that was ok and is now oom, diverged or failed is a
regression; runs on one side only are listed as missing / new. An environment difference (GPU,
driver, CUDA, cuDNN, CPU, BLAS threads) is named in its rows and switches nothing off: every
number is still compared, and under --strict the difference alone fails (exit 4).

Exit codes: 0 no regression, 1 a regression (time, memory, accuracy, loss or status), 2 bad
input, 3 runtime failure, 4 nothing matched or a spec changed (always), or (--strict) no
regression but inconclusive, missing or environment-changed rows.
)";

}  // namespace

std::string printable_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto escape = [&](unsigned char c) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += fmt::format("\\x{:02x}", c);
    }
  };
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        escape(c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong forms, surrogates or code points past
    // U+10FFFF) is kept, unless it encodes a C1 control; every other byte is escaped.
    const int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    uint32_t cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0fu : c & 0x1fu;
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xc0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3fu);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) &&
         !(cp >= 0x80 && cp <= 0x9f);
    if (!ok) {
      escape(c);
      ++i;
      continue;
    }
    out.append(s, i, static_cast<size_t>(len));
    i += static_cast<size_t>(len);
  }
  return out;
}

std::vector<int64_t> parse_batch_sizes(const std::string& option, const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(text)) {
    const bool digits =
        !item.empty() && item.size() <= 7 &&
        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int64_t v = digits ? std::stoll(item) : 0;
    if (v < 1 || v > kMaxBatchSize)
      throw_bad_input(
          fmt::format("{}: expected batch sizes from 1 to {} separated by commas, got "
                      "'{}'",
                      option, kMaxBatchSize, printable_line(item)));
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw_bad_input(fmt::format("{}: batch size {} is given twice", option, v));
    out.push_back(v);
  }
  return out;
}

uint64_t parse_memory_size(const std::string& option, const std::string& text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"KB", 1e3}, {"MB", 1e6},
      {"GB", 1e9},     {"B", 1.0}};
  const auto bad = [&] {
    throw_bad_input(
        fmt::format("{}: expected a size such as 16GiB, 512MiB, 4GB or a number of bytes, got '{}'",
                    option, text));
  };
  size_t end = text.size();
  double unit = 1;
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
  // Digits, and a decimal point only before a unit: "1.5GiB" is a size, "1.5" bytes is not.
  const size_t dots = static_cast<size_t>(std::count(number.begin(), number.end(), '.'));
  const bool digits = !number.empty() && std::all_of(number.begin(), number.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
  if (!digits || dots > (suffix ? 1u : 0u) || number == ".") bad();
  const double bytes = std::floor(std::strtod(number.c_str(), nullptr) * unit);
  if (!(bytes >= 1) || bytes >= 18446744073709551616.0) bad();
  return static_cast<uint64_t>(bytes);
}

int mpbench_main(int argc, char** argv) {
  install_interrupt_handlers();
  command_line().assign(argv, argv + argc);
  CLI::App app{
      "mpbench: what mixed precision (TF32, FP16, BF16) buys over FP32 for your model's "
      "shapes on your GPU: time per epoch, peak memory, final accuracy."};
  app.footer(kExamples);
  app.set_version_flag("--version",
                       std::string("mpbench ") + MPBENCH_VERSION + " (" + MPBENCH_GIT + ")");
  app.require_subcommand(1);

  // The one --device of every command that trains.
  auto add_device_option = [](CLI::App* cmd, std::string& device) {
    cmd->add_option("--device", device, "auto (GPU if present, else CPU), cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->default_val("auto");
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
  run_cmd->add_option("--batch-size", run.batch_size, "Override the spec's batch size")
      ->excludes(batch_sizes_opt)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
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
                   "gives the median over the repetitions and the spread between them; the JSON "
                   "keeps every repetition; `compare` judges time by the variation between "
                   "repetitions and needs at least 3 a side (5 recommended in CI)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  run_cmd->add_option("--seed", run.seed, "Override the spec's data seed")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  run_cmd->add_option("--json", run.json_path, "Write the results JSON (schema_version 1) here");
  run_cmd->add_option("--csv", run.csv_path, "Write one CSV row per model x precision here");
  run_cmd->add_option("--md", run.md_path, "Write the comparison table as Markdown here");
  run_cmd->add_flag("--quiet,-q", run.quiet, "No progress bar and no informational lines");
  std::string run_memory_limit, profile_memory_limit;
  const char* kMemoryLimitHelp =
      "Cap training memory (every category but the dataset copy, library workspaces included) "
      "at SIZE, e.g. 16GiB: would it fit that card? A mode that needs more is an oom row";
  run_cmd->add_option("--memory-limit", run_memory_limit, kMemoryLimitHelp);
  run_cmd->add_flag("--cuda-graphs", run.cuda_graphs,
                    "Capture the training step once as a CUDA graph and replay it (GPU only)");

  std::vector<std::string> validate_specs;
  auto* validate_cmd =
      app.add_subcommand("validate", "Check spec files; exit 2 on the first error");
  validate_cmd->add_option("spec", validate_specs, "Model spec JSON file(s)")->required();

  InspectArgs inspect;
  auto* inspect_cmd = app.add_subcommand(
      "inspect",
      "Per-layer and sublayer table: output shape, parameters, FLOPs, dtypes, activation bytes, "
      "tensor-core alignment, predicted training memory");
  inspect_cmd->add_option("spec", inspect.spec, "Model spec JSON file")->required();
  inspect_cmd->add_option("--precision", inspect.precision,
                          "One mode (default: each of the spec's modes)");
  inspect_cmd->add_option("--depth", inspect.depth,
                          "sublayer (default): each layer and under it its GEMMs, convolutions, "
                          "norms and softmax; block: the layers alone");
  inspect_cmd->add_option("--json", inspect.json_path,
                          "Write the tables as JSON: {\"entries\": [one per mode: model, "
                          "precision, batch_size, params, forward_flops (per batch), "
                          "predicted_memory_bytes, misaligned, layers[]]}; each layer has name, "
                          "kind, output_shape, params, forward_flops and activation_bytes (per "
                          "batch), compute_dtype, storage_dtype, matmul and misaligned where it "
                          "is a GEMM or convolution, and children[]");

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
          "Training steps to profile per mode, after the spec's warm-up (at least 2 steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(10);
  profile_cmd->add_option("--batch-size", profile.run.batch_size, "Override the spec's batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  profile_cmd->add_option("--top", profile.top, "Rows of the top-ops table")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(25);
  profile_cmd->add_option("--json", profile.json_path,
                          "Write every op's time per step (and the run's env) as JSON here");
  profile_cmd->add_option("--memory-limit", profile_memory_limit, kMemoryLimitHelp);
  profile_cmd->add_flag("--quiet,-q", profile.run.quiet,
                        "No progress bar and no informational lines");

  ExplainArgs explain;
  std::string explain_precisions, explain_memory_limit;
  auto* explain_cmd = app.add_subcommand(
      "explain",
      "Why a mode helped or didn't: each mode profiled, and every mode against fp32 (or the first "
      "listed) by op kind, with the tensor-core-eligible share of the step, its Amdahl bound and "
      "flags (misaligned sizes, fallback kernels, launch-bound steps, loss-scale skips, ops that "
      "got slower)");
  explain_cmd->add_option("spec", explain.spec, "Model spec JSON file")->required();
  add_device_option(explain_cmd, explain.run.device);
  explain_cmd->add_option("--precisions,--precision", explain_precisions,
                          "Comma-separated modes, two or more (default: the spec's); the "
                          "baseline is fp32 when listed, else the first");
  explain_cmd
      ->add_option("--steps", explain.steps,
                   "Training steps to profile per mode, after the spec's warm-up")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(10);
  explain_cmd->add_option("--batch-size", explain.run.batch_size, "Override the spec's batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  explain_cmd->add_option("--json", explain.json_path,
                          "Write the comparisons as JSON: comparisons[] with from, to, "
                          "measured_speedup, eligible_fraction, bound (null without datasheet "
                          "peaks), by_kind[] and flags[]");
  explain_cmd->add_option("--md", explain.md_path, "Write the comparisons as Markdown");
  explain_cmd->add_option("--memory-limit", explain_memory_limit, kMemoryLimitHelp);
  explain_cmd->add_flag("--quiet,-q", explain.run.quiet,
                        "No progress bar and no informational lines");

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
  maxbatch_cmd
      ->add_option("--multiple", maxbatch.multiple,
                   "Only try batch sizes that are multiples of K (e.g. 8 for tensor cores)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->default_val(1);
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
      "steps on synthetic data (steps x batch samples) under the budget. The search doubles from "
      "K until a probe does not fit, then bisects between the last batch that trained and the "
      "first that did not: about 2 log2(max batch / K) probes. Exit 0 whatever the batches; 2 "
      "for bad input.");

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
          "Result JSON file(s) (mpbench run --json), and optionally mpbench profile --json files")
      ->required();
  report_cmd->add_option("--html", report_args.html_path, "Write the HTML report here")->required();
  report_cmd->add_option("--md", report_args.md_path, "Also write the tables as Markdown here");

  DataArgs data_args;
  auto* data_cmd = app.add_subcommand(
      "data", "Write the spec's dataset as raw arrays (for training it with another framework)");
  data_cmd->add_option("spec", data_args.spec, "Model spec JSON file")->required();
  data_cmd
      ->add_option("--out", data_args.out_prefix,
                   "File prefix: writes PREFIX.json, PREFIX.train_x.f32, PREFIX.train_y.i32, "
                   "PREFIX.eval_x.f32, PREFIX.eval_y.i32")
      ->required();
  data_cmd->add_option("--seed", data_args.seed, "Override the spec's data seed")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  data_cmd->add_flag("--quiet,-q", data_args.quiet, "No informational line");

  CompareArgs compare;
  auto* compare_cmd = app.add_subcommand(
      "compare",
      "CI regression gate: compare a current result JSON against a baseline, run by run");
  compare_cmd
      ->add_option("files", compare.files,
                   "BASELINE CURRENT result JSONs (mpbench run --json), or CURRENT alone with "
                   "--baseline")
      ->required()
      ->expected(1, 2);
  compare_cmd
      ->add_option("--baseline", compare.baselines,
                   "A baseline result JSON; repeat it (or give a quoted glob such as "
                   "'base-*.json') to treat several files as repetitions of one baseline")
      ->allow_extra_args(false);  // one file per --baseline: the next word may be CURRENT
  compare_cmd
      ->add_option("--time-threshold", compare.time_threshold,
                   "Slowdown of the median epoch time that fails, in percent")
      ->default_str("5%");
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
                          "Write the comparison as Markdown (for a CI job summary) here");
  compare_cmd->add_option("--json", compare.json_path, "Write the comparison as JSON here");
  compare_cmd->add_flag("--strict", compare.strict,
                        "Exit 4 when inconclusive, missing or environment-changed rows remain");
  compare_cmd->footer(kCompareRule);

  // Every option and argument that takes a value refuses an empty one (kNonEmpty).
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt :
         sub->get_options([](CLI::Option* o) { return o->get_expected_min() > 0; }))
      opt->check(kNonEmpty);

  try {
    // CLI11 would read an unknown first word as a stray argument; name it instead.
    const auto known = app.get_subcommands(
        [&](const CLI::App* sub) { return argc > 1 && sub->get_name() == argv[1]; });
    if (argc > 1 && argv[1][0] != '-' && known.empty()) {
      std::cerr << "mpbench: unknown subcommand '" << printable_line(argv[1])
                << "' (expected run, profile, explain, maxbatch, validate, inspect, devices, data, "
                   "compare or "
                   "report; "
                   "see mpbench --help)\n";
      return 2;
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      std::string msg = e.what();
      if (msg.empty()) msg = "bad arguments";
      std::cerr << "mpbench: " << printable_line(msg) << " (see mpbench --help)\n";
      return 2;
    }
    if (*run_cmd) {
      if (!precisions.empty()) run.precisions = split_list(precisions);
      if (!run_batch_sizes.empty())
        run.batch_sizes = parse_batch_sizes("--batch-sizes", run_batch_sizes);
      if (!run_memory_limit.empty())
        run.memory_limit = parse_memory_size("--memory-limit", run_memory_limit);
      return cmd_run(run);
    }
    // profile and explain read --precisions and --memory-limit alike.
    auto finish = [](RunArgs& r, const std::string& list, const std::string& limit) {
      if (!list.empty()) r.precisions = split_list(list);
      if (!limit.empty()) r.memory_limit = parse_memory_size("--memory-limit", limit);
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
      if (!maxbatch_precisions.empty()) maxbatch.precisions = split_list(maxbatch_precisions);
      if (!maxbatch_memory_limit.empty())
        maxbatch.memory_limit = parse_memory_size("--memory-limit", maxbatch_memory_limit);
      return cmd_maxbatch(maxbatch);
    }
    if (*validate_cmd) return cmd_validate(validate_specs);
    if (*inspect_cmd) return cmd_inspect(inspect);
    if (*devices_cmd) return cmd_devices(devices_json);
    if (*report_cmd) return cmd_report(report_args);
    if (*data_cmd) return cmd_data(data_args);
    if (*compare_cmd) return cmd_compare(compare);
    return 2;
  } catch (const Error& e) {
    std::cerr << "mpbench: " << printable_line(e.what()) << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::cerr << "mpbench: out of host memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "mpbench: internal error: " << printable_line(e.what()) << "\n";
    return 3;
  }
}

}  // namespace mpbench
