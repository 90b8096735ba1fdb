// `mpbench run`: every spec x every precision, one fresh model per run, then the table and files.
#include <iostream>
#include <map>
#include <optional>
#include <thread>
#include <tuple>

#include "app/commands.h"
#include "app/compare.h"
#include "app/console_table.h"
#include "app/launch.h"
#include "app/output_file.h"
#include "app/progress.h"
#include "app/report_writers.h"
#include "app/result_files.h"
#include "models/dataset.h"
#include "models/input_file.h"
#include "models/model.h"
#include "models/spec.h"
#include "train/data_parallel.h"
#include "train/device_specs.h"
#include "train/trainer.h"

namespace mpbench {

std::unique_ptr<Backend> select_backend(const DeviceChoice& device, bool quiet,
                                        const RankPlacement& place) {
  const NativeCpuOptions cpu{device.threads, device.cpu_isa, place.local_ranks};
  const int cuda_index = place.local_rank;
  // --threads and --cpu-isa are refused where nothing would take them: another device, or auto
  // on a machine with a GPU (below, once that is known).
  auto refuse_cpu_options = [&] {
    if (device.threads || !device.cpu_isa.empty())
      throw_bad_input(
          fmt::format("{}: only --device cpu (or auto on a machine without a GPU) takes it",
                      device.threads ? "--threads" : "--cpu-isa"));
  };
  if (device.name != "cpu" && device.name != "auto") refuse_cpu_options();
  // A bad name is refused before the device is chosen: one line, not after auto's CPU notice.
  if (!device.cpu_isa.empty()) check_native_cpu_isa(device.cpu_isa);
  // More threads than CPUs: every parallel op waits for a thread the scheduler has not run yet
  // (seen: 3 threads on 2 CPUs took tiny_resnet's epoch from 27 ms to 6.2 s). A warning, not a
  // refusal: the run is what was asked for, and its JSON records the threads. Under a launcher
  // each host's first rank says it for all (they are given the same options). Said once the
  // backend is made, as the auto notice is: input it refuses gets its one line alone.
  auto native_cpu = [&](const std::string& notice) {
    std::unique_ptr<Backend> be = make_native_cpu_backend(cpu);
    if (!notice.empty()) std::cerr << notice;
    const int cpus = usable_cpus();
    if (device.threads > cpus && place.local_rank == 0)
      std::cerr << fmt::format(
          "mpbench: warning: --threads {} is more than the {} CPU{} this process may run on: "
          "every parallel op then waits for threads the scheduler has not run, and times grow "
          "many-fold (use at most {})\n",
          device.threads, cpus, cpus == 1 ? "" : "s", cpus);
    return be;
  };
  if (device.name == "reference") return make_reference_backend();
  if (device.name == "cpu") return native_cpu("");
  std::string why;
  int n = cuda_device_count(&why);
  if (device.name == "cuda") {
    if (n == 0) throw_bad_input("--device cuda: " + why);
    return make_cuda_backend(cuda_index % n);
  }
  if (n > 0) {
    refuse_cpu_options();
    return make_cuda_backend(cuda_index % n);
  }
  std::string why_cpu;
  if (native_cpu_available(&why_cpu))
    return native_cpu(quiet ? "" : "mpbench: " + why + "; running on the CPU (--device cpu)\n");
  if (!quiet)
    std::cerr << "mpbench: " << why << ", and " << why_cpu
              << "; running on the CPU reference, whose times are of emulated numerics "
                 "(--device reference)\n";
  return make_reference_backend();
}

nlohmann::json env_json(const DeviceInfo& d, const DeviceInfo& cpu) {
  nlohmann::json env = {{"device", d.kind}};
  if (d.kind == "cuda") {
    env["gpu"] = gpu_facts_json(d);  // the same facts `mpbench devices` lists
  }
  if (d.kind == "cpu") env["native_cpu"] = native_cpu_json(d);
  env["cpu"] = {
      {"name", cpu.name},
      {"threads", cpu.cpu_threads},
      {"blas", cpu.blas_config},
      {"blas_core", cpu.blas_core},
      {"blas_threads", cpu.blas_threads},
      {"blas_threading", cpu.blas_threading},
      // What OpenMP was told; mpbench's own code uses no OpenMP.
      {"omp_num_threads", cpu.omp_num_threads.empty() ? nlohmann::json(nullptr)
                                                      : nlohmann::json(cpu.omp_num_threads)}};
  return env;
}

nlohmann::json native_cpu_json(const DeviceInfo& d) {
  auto rate = [](double t) { return t > 0 ? nlohmann::json(t) : nlohmann::json(nullptr); };
  return {{"threads", d.cpu_threads},
          {"onednn_version", d.onednn_version},
          {"isa", d.cpu_isa},
          {"cpu_flags", d.cpu_flags},
          {"amx_granted", d.amx_granted},
          {"bf16_gemm", d.bf16_gemm.empty() ? "none" : d.bf16_gemm},
          {"gemm_tflops",
           {{"fp32", rate(d.gemm_tflops_fp32)}, {"amp_bf16", rate(d.gemm_tflops_bf16)}}}};
}

void print_warnings(const RunResult& r, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings)
    std::cerr << fmt::format("mpbench: warning: {} {}: {}\n", r.model, r.precision, w);
}

std::optional<std::string> device_note(std::vector<RunResult> runs, const DeviceInfo& d) {
  Report r;
  if (d.kind == "cpu") r.env = {{"native_cpu", native_cpu_json(d)}};
  r.runs = std::move(runs);
  return device_note(r);
}

void apply_run_overrides(Spec& spec, const RunArgs& a) {
  std::vector<SpecOverride> o;
  if (!a.precisions.empty()) {
    std::string list;
    for (const std::string& p : a.precisions) list += (list.empty() ? "" : ",") + p;
    o.push_back({"--precisions " + list, {"precisions"}, a.precisions});
  }
  if (a.epochs > 0)
    o.push_back({fmt::format("--epochs {}", a.epochs), {"train", "epochs"}, a.epochs});
  if (a.seed >= 0) o.push_back({fmt::format("--seed {}", a.seed), {"data", "seed"}, a.seed});
  if (a.warmup >= 0)
    o.push_back({fmt::format("--warmup {}", a.warmup), {"train", "warmup_steps"}, a.warmup});
  if (a.batch_size > 0)
    o.push_back(
        {fmt::format("--batch-size {}", a.batch_size), {"train", "batch_size"}, a.batch_size});
  spec = with_overrides(spec, o);
}

namespace {

// The estimated time above which a run on a CPU gets a note, so that without a GPU such a run
// does not look hung in a log that has no progress bar.
constexpr double kHeavyCpuSeconds = 300;
// The rate that time is estimated at on the CPU reference, whose emulation measures nothing of
// its own (about what a desktop's does, bench/README.md). The native CPU's estimate is at its
// measured GEMM ceilings, which the shipped CPU configs trained at 24-110% of.
constexpr double kReferenceCpuFlops = 1e11;

// The training FLOPs of one run of a spec that takes `steps` steps.
double run_flops(const Spec& spec, int64_t steps) {
  return Model(spec, Precision::FP32).training_flops_per_sample() *
         static_cast<double>(spec.train.batch_size) * static_cast<double>(steps);
}

// Whether the device trains mode p at all: a mode it cannot run is an unsupported row, at once,
// and no share of a command's work.
bool trains(Precision p, const DeviceInfo& info, Device device) {
  return !unsupported_reason(p, device, info);
}

// One run's planned work, from the spec before its data are made: its training FLOPs on one
// rank (the ranks of data parallel share the steps), none for a mode the device cannot run.
double planned_work(const Spec& spec, Precision p, const DeviceInfo& info, Device device,
                    int ranks) {
  if (!trains(p, info, device)) return 0;
  return run_flops(spec, step_plan(spec.train, spec.data.train_samples, ranks).total());
}

// Under data parallel the ranks share the work: each trains its steps at the same time, so the
// time is one rank's.
void warn_if_heavy_for_cpu(const std::vector<Spec>& specs, const DeviceInfo& info, int ranks) {
  const bool native = info.kind == "cpu";
  const std::string each = ranks > 1 ? fmt::format(" on each of {} ranks", ranks) : "";
  for (const Spec& spec : specs) {
    double flops = 0, seconds = 0;
    std::vector<std::string> rates;
    int modes = 0;
    for (Precision p : spec.precisions) {
      const double f = planned_work(spec, p, info, Device::CPU, ranks);
      if (f == 0) continue;
      const auto ceiling = native ? ceilings_for(info, p) : std::nullopt;
      const double rate = ceiling ? ceiling->peak_tflops * 1e12 : kReferenceCpuFlops;
      // Three significant digits: a busy CPU's rates are hundredths of a TFLOP/s, where two
      // decimals were 10% off the rate the minutes were worked out at.
      if (ceiling)
        rates.push_back(fmt::format("{} {:.3g}", precision_name(p), ceiling->peak_tflops));
      flops += f;
      seconds += f / rate;
      ++modes;
    }
    if (seconds <= kHeavyCpuSeconds) continue;
    if (native)
      std::cerr << fmt::format(
          "mpbench: note: {} trains {:.3g} TFLOP{} over the {} mode(s) this CPU runs, {:.0f} min "
          "at its measured GEMM rates ({} TFLOP/s), likely more; configs/cpu/*.json are sized "
          "for a CPU\n",
          spec.name, flops / 1e12, each, modes, seconds / 60, fmt::join(rates, ", "));
    else
      std::cerr << fmt::format(
          "mpbench: note: {} trains {:.3g} TFLOP{} over its {} mode(s), {:.0f} min at 100 "
          "GFLOP/s; the CPU reference is meant for small specs (configs/tiny_*.json)\n",
          spec.name, flops / 1e12, each, modes, seconds / 60);
  }
}

// `compare` and `report` read result files of at most kMaxResultFileBytes: refuse up front a run
// whose --json could be larger (so many repetitions, seeds or epochs that even the bucketed
// per-step series would not fit).
void check_result_size(const std::vector<Spec>& specs, const RunArgs& args) {
  if (args.json_path.empty()) return;
  constexpr uint64_t kPerSpec = 16 << 10, kHeader = 64 << 10;  // resolved spec; tool, env
  uint64_t bytes = kHeader, runs = 0;
  for (const Spec& spec : specs) {
    const int64_t steps = step_plan(spec.train, spec.data.train_samples).total();
    const uint64_t per_mode = static_cast<uint64_t>(args.repeat * std::max<int64_t>(args.seeds, 1));
    bytes += kPerSpec;
    for (Precision p : spec.precisions) {
      const int64_t fp8 = precision_info(p).fp8_linears ? kFp8RecordedTensors : 0;
      bytes += per_mode * max_run_json_bytes(spec.train.epochs, steps, fp8);
      runs += per_mode;
    }
  }
  if (bytes > kMaxResultFileBytes)
    throw_bad_input(fmt::format(
        "--json {}: {} runs could write up to {} MiB, more than the {} MiB `compare` and "
        "`report` read; use fewer specs, modes, --repeat, --seeds or epochs",
        args.json_path, runs, bytes >> 20, kMaxResultFileBytes >> 20));
}

// The specs `run` trains, with everything that can be wrong with the input checked before
// minutes of training.
std::vector<Spec> checked_specs(const RunArgs& args, int ranks) {
  std::vector<Spec> specs;
  for (const auto& path : args.specs) {
    specs.push_back(load_spec(path));
    apply_run_overrides(specs.back(), args);
  }
  refuse_shared_model_names(specs);
  if (!args.batch_sizes.empty()) {
    std::vector<Spec> sweep;
    for (const Spec& spec : specs)
      for (int64_t b : args.batch_sizes)
        sweep.push_back(with_overrides(
            spec, {{fmt::format("--batch-sizes {}", b), {"train", "batch_size"}, b}}));
    specs = std::move(sweep);
  }
  for (const Spec& spec : specs) preflight_training(spec);
  check_result_size(specs, args);
  std::vector<std::string> inputs;
  for (const Spec& spec : specs)
    for (std::string& in : spec_inputs(spec)) inputs.push_back(std::move(in));
  if (!args.scaling_baseline.empty() && args.scaling_baseline != "run")
    inputs.push_back(args.scaling_baseline);
  check_outputs({{"--json", args.json_path}, {"--csv", args.csv_path}, {"--md", args.md_path}},
                inputs);
  // Data parallel: each step takes ranks x batch_size samples.
  for (const Spec& spec : specs) step_plan(spec.train, spec.data.train_samples, ranks);
  return specs;
}

// What a data-parallel run's single-rank baseline is looked up by: model, mode, device, per-rank
// batch and training seed (a native CPU run is no baseline for the reference's).
using SingleKey = std::tuple<std::string, std::string, std::string, int64_t, int64_t>;
SingleKey single_key(const RunResult& r) {
  return {r.model, r.precision, r.device, r.batch_size,
          r.seed ? static_cast<int64_t>(*r.seed) : -1};
}

// `--scaling-baseline FILE`: the median samples per second of its ok plain (one-process) runs of
// ran's key, if they trained from ran's spec in ran's environment (`compare`'s rules: a rank's
// native CPU threads are not a plain run's); else nullopt and why not.
std::optional<double> single_rank_rate(const Report& file, const RunResult& ran,
                                       const nlohmann::json& spec, const nlohmann::json& env,
                                       std::string* why_not) {
  const std::string what =
      fmt::format("{} {} {} batch {}", ran.model, ran.precision, ran.device, ran.batch_size);
  std::vector<double> rates;
  for (const RunResult& r : file.runs) {
    if (r.status != RunStatus::Ok || r.data_parallel || !(r.samples_per_second > 0) ||
        single_key(r) != single_key(ran))
      continue;
    const nlohmann::json* trained = spec_of(file, r);
    const std::string spec_diff = trained ? first_spec_difference(*trained, spec) : "";
    if (!spec_diff.empty()) {
      *why_not = fmt::format("has {} from another spec ({})", what, spec_diff);
      return std::nullopt;
    }
    rates.push_back(r.samples_per_second);
  }
  if (rates.empty()) {
    *why_not = "has no ok one-process run of " + what;
    return std::nullopt;
  }
  const std::vector<std::string> env_diff = env_differences(file.env, env, ran.device);
  if (!env_diff.empty()) {
    *why_not = fmt::format("has {} from another environment ({})", what, fmt::join(env_diff, ", "));
    return std::nullopt;
  }
  return compute_time_stats(rates).median;
}

}  // namespace

int cmd_run(const RunArgs& given) {
  // Under mpirun or srun: data parallel across the launch's ranks; rank 0 alone prints and
  // writes.
  Launch launch;
  RunArgs args = given;
  if (!launch.speaker()) {
    args.quiet = true;
    args.json_path = args.csv_path = args.md_path = "";
  }
  const int nranks = launch.ranks();
  const bool baseline_run = args.scaling_baseline == "run";
  const std::string baseline_file = baseline_run ? "" : args.scaling_baseline;
  std::vector<Spec> specs;
  Report single_rank_file;
  launch.agree([&] {
    specs = checked_specs(args, nranks);
    // Read even by one process, which ignores it (and says so): a file that cannot serve is
    // refused as any input is, not passed over in silence.
    if (launch.speaker() && !baseline_file.empty())
      single_rank_file = read_result_file(baseline_file);
  });
  std::unique_ptr<Backend> be = launch.open_backend(args);
  DataParallel* dp = launch.data_parallel();
  const DeviceInfo info = be->info();
  launch.same_job(
      args,
      {{"command", "run"},
       {"--seeds", std::to_string(args.seeds)},
       {"--repeat", std::to_string(args.repeat)},
       {"--scaling-baseline run", baseline_run ? "yes" : "no"}},
      specs, info, be->device(),
      {{"--json", given.json_path}, {"--csv", given.csv_path}, {"--md", given.md_path}});
  if (be->device() == Device::CPU && !args.quiet) warn_if_heavy_for_cpu(specs, info, nranks);
  const bool show_progress = !args.quiet && Progress::stderr_is_tty();
  // Said even under --quiet (by one rank): an option the user gave is being ignored.
  if (launch.speaker() && args.cuda_graphs && !be->supports_graphs())
    std::cerr << "mpbench: --cuda-graphs has no effect on the CPU; steps run eagerly\n";
  else if (launch.speaker() && args.cuda_graphs && dp)
    std::cerr << "mpbench: --cuda-graphs has no effect under data parallel; steps run eagerly\n";
  launch.warn_unused(args);

  Report report;
  report.tool = tool_json();
  report.provenance = provenance_json();
  report.env = env_json(info, make_reference_backend()->info());
  if (launch.launched()) report.env["launch"] = launch.env_json(report.env["device"]);
  // What a mode out of memory ran under (compare notes a difference).
  report.env["memory_limit_bytes"] =
      args.memory_limit > 0 ? nlohmann::json(args.memory_limit) : nlohmann::json(nullptr);
  // Without --seeds one run per mode (no training seed); with it, seeds 1..N.
  std::vector<std::optional<uint64_t>> seeds = {std::nullopt};
  if (args.seeds > 0) {
    seeds.clear();
    for (int64_t s = 1; s <= args.seeds; ++s) seeds.push_back(static_cast<uint64_t>(s));
  }
  // A run's work for the time left; done() takes the same figure off.
  auto work = [&](const Spec& spec, Precision p) {
    return planned_work(spec, p, info, be->device(), nranks);
  };
  RunPlan plan(args.quiet);
  int64_t planned_runs = 0;
  for (const Spec& spec : specs) {
    const int64_t per_mode = args.repeat * static_cast<int64_t>(seeds.size());
    for (Precision p : spec.precisions)
      for (int64_t i = 0; i < per_mode; ++i, ++planned_runs)
        plan.add(spec.name, spec.train.batch_size, work(spec, p));
  }
  // Ranks of a data-parallel job would stop at different steps and wait for each other.
  if (!launch.launched()) set_interrupt_mode(InterruptMode::AfterStep);

  bool interrupted = false;
  try {
    std::optional<Dataset> data;
    std::string data_key;  // the spec and data the dataset was made for; a sweep's batches share it
    for (size_t spec_index = 0; spec_index < specs.size(); ++spec_index) {
      const Spec& spec = specs[spec_index];
      const std::string key = spec.source_path + "\n" + to_json(spec)["data"].dump();
      if (!data || key != data_key) {
        data.reset();  // before the next is made: never two datasets in memory at once
        data = make_dataset_with_progress(spec, show_progress);
        data_key = key;
      }
      report.specs.push_back(to_json(spec));
      const int64_t total_steps = step_plan(spec.train, data->train_size(), nranks).total();
      // Repetitions outermost, so that each mode's repetitions are spread over the whole run.
      for (int64_t rep = 1; rep <= args.repeat; ++rep)
        for (size_t mode = 0; mode < spec.precisions.size(); ++mode)
          for (const std::optional<uint64_t>& seed : seeds) {
            stop_if_interrupted();
            const Precision p = spec.precisions[mode];
            const std::string batch =
                args.batch_sizes.empty() ? "" : fmt::format(" b{}", spec.train.batch_size);
            const std::string seed_label = seed ? fmt::format(" seed {}", *seed) : "";
            const std::string rep_label =
                args.repeat > 1 ? fmt::format(" rep {}/{}", rep, args.repeat) : "";
            const std::string what = fmt::format("{} {}{}{}{}", spec.name, precision_name(p), batch,
                                                 seed_label, rep_label);
            plan.starting();
            Progress bar(what + " (" +
                             RunPlan::position(int64_t(spec_index) + 1, int64_t(specs.size()),
                                               int64_t(mode) + 1, int64_t(spec.precisions.size())) +
                             ")",
                         total_steps, show_progress);
            TrainOptions opts;
            opts.cuda_graphs = args.cuda_graphs;
            opts.memory_limit = args.memory_limit;
            opts.seed = seed;
            opts.data_parallel = dp;
            opts.on_progress = [&](const TrainProgress& tp) {
              // Not at the last report, after the last epoch: that run is done.
              if (tp.step < total_steps) stop_if_interrupted();
              // The last report comes after the last epoch: not "epoch N+1".
              const int64_t epoch = std::min<int64_t>(tp.epoch + 1, spec.train.epochs);
              std::string suffix =
                  tp.last_eval_accuracy < 0
                      ? fmt::format("epoch {}", epoch)
                      : fmt::format("epoch {} | loss {} acc {:.2f}%", epoch,
                                    format_loss(tp.last_train_loss), 100 * tp.last_eval_accuracy);
              bar.update(tp.step, suffix);
            };
            // The single-rank baseline first: rank 0 alone, the others asleep meanwhile.
            std::optional<double> single;
            if (dp && baseline_run) {
              if (launch.speaker()) {
                TrainOptions alone = opts;
                alone.data_parallel = nullptr;
                alone.on_progress = nullptr;
                const RunResult one = train_and_measure(spec, *data, p, *be, alone);
                print_warnings(one);
                if (one.status == RunStatus::Ok) single = one.samples_per_second;
              }
              launch.collective()->wait_for_all();
            }
            report.runs.push_back(train_and_measure(spec, *data, p, *be, opts));
            bar.finish();  // before any line below: it would land on the bar's
            if (args.repeat > 1) report.runs.back().repetition = rep;
            RunResult& ran = report.runs.back();
            if (launch.speaker()) print_warnings(ran);
            // Said for each run without one, a file of data-parallel runs only (no 1-rank run in
            // it) included.
            if (dp && launch.speaker() && !baseline_file.empty() && ran.status == RunStatus::Ok) {
              std::string why_not;
              single = single_rank_rate(single_rank_file, ran, to_json(spec), report.env, &why_not);
              if (!single)
                std::cerr << fmt::format(
                    "mpbench: --scaling-baseline {} {}: no scaling efficiency for it\n",
                    baseline_file, why_not);
            }
            if (single && ran.data_parallel && *single > 0) {
              ran.data_parallel->single_rank_samples_per_second = *single;
              ran.data_parallel->scaling_efficiency = ran.samples_per_second / (nranks * *single);
            }
            const RunResult& done = report.runs.back();
            plan.done(spec.name, spec.train.batch_size, what,
                      done.status == RunStatus::Ok
                          ? fmt::format("{} ms/epoch", format_ms(done.epoch_time_ms.median))
                          : run_status_name(done.status),
                      work(spec, p), done.status == RunStatus::Ok);
          }
    }
  } catch (const Interrupted&) {
    interrupted = true;  // the run in progress is dropped; those finished are shown below
  }

  if (!launch.speaker()) return 0;
  if (interrupted) {
    if (report.runs.empty()) {
      std::cerr << "mpbench: interrupted before any run finished: nothing to show\n";
      return 130;
    }
    std::cout << format_console(report, /*ascii=*/!utf8_output());
    flush_stdout();
    const bool files = !args.json_path.empty() || !args.csv_path.empty() || !args.md_path.empty();
    std::cerr << fmt::format("mpbench: interrupted after {} of {} runs: the table shows those{}\n",
                             report.runs.size(), planned_runs,
                             files ? "; no file was written (--json, --csv and --md are a "
                                     "whole run's)"
                                   : "");
    return 130;
  }
  // Every run finished (an interrupt after the last step included): the table first (an output
  // on /dev/stdout follows it), then every file, whatever happened to stdout: a failed or closed
  // stdout is reported after them (finish_stdout, exit 3). An interrupt now lets the set of
  // files be finished: one file of three is no run's outputs.
  if (!launch.launched()) set_interrupt_mode(InterruptMode::AfterWriting);
  std::cout << format_console(report, /*ascii=*/!utf8_output());
  flush_stdout();
  write_outputs({{args.json_path, args.json_path.empty() ? "" : json_text(to_json(report))},
                 {args.csv_path, args.csv_path.empty() ? "" : format_csv(report)},
                 {args.md_path, args.md_path.empty() ? "" : format_markdown(report)}});
  set_interrupt_mode(InterruptMode::AtOnce);
  if (interrupt_requested()) {
    std::cerr << "mpbench: interrupted once every run had finished: the table and the files are "
                 "whole\n";
    return 130;
  }
  return 0;
}

}  // namespace mpbench
