// `mpbench profile`: where a training step's time goes. Trains the spec's model for a few steps
// per mode under an OpProfiler (train/op_profile.h), which times every op with the backend's
// events, and prints the time per step by layer, by op, and the top ops with their achieved
// TFLOP/s. This is how a slow row of `mpbench run` (against PyTorch, or against the card's
// peak) is taken apart.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <utility>

#include "app/commands.h"
#include "app/console_table.h"
#include "app/launch.h"
#include "app/output_file.h"
#include "app/progress.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "train/explain.h"
#include "train/number_text.h"
#include "train/op_profile.h"
#include "train/trainer.h"

namespace mpbench {

// Steps before profiling starts, at least: the first steps choose cuBLASLt / cuDNN algorithms
// and initialise libraries lazily, which is not what a step costs.
constexpr int64_t kMinWarmup = 2;

// Shrinks the spec to what the profile needs: epochs of at most `steps` batches, from no more
// training data than the spec itself holds (its size was checked when it was loaded), and an
// evaluation set of one batch, since evaluation is not profiled. With file data the epoch is the
// file's. Enough epochs run to reach `steps`; profile_one stops timing after that many.
void fit_to_steps(Spec& spec, int64_t steps, int ranks) {
  const int64_t batch = spec.train.batch_size * ranks;
  spec.train.warmup_steps = std::max(spec.train.warmup_steps, kMinWarmup);
  // Not step_plan's, which refuses a global batch past the data: synthetic data are grown below
  // to what the ranks' global batches take, as many as `steps` needs.
  int64_t per_epoch = std::max<int64_t>(1, spec.data.train_samples / batch);
  if (spec.data.type == "synthetic") {
    per_epoch = std::min(per_epoch, steps);
    spec.data.train_samples = batch * per_epoch;
    spec.data.eval_samples = std::min(spec.data.eval_samples, batch);
  }
  spec.train.epochs = (steps + per_epoch - 1) / per_epoch;
}

ProfiledRun profile_mode(const Spec& spec, const Dataset& data, Precision p, int64_t steps,
                         Backend& be, bool bar_on, uint64_t memory_limit, DataParallel* dp,
                         const std::string& round) {
  const int64_t total = step_plan(spec.train, data.train_size(), dp ? dp->size() : 1).total();
  Progress bar(fmt::format("profile {} {}{}", spec.name, precision_name(p),
                           round.empty() ? "" : " " + round),
               total, bar_on);
  TrainOptions opts;
  opts.on_progress = [&](const TrainProgress& tp) { bar.update(tp.step); };
  opts.memory_limit = memory_limit;
  opts.data_parallel = dp;
  ProfiledRun out = profile_training(spec, data, p, steps, be, opts);
  bar.finish();
  if (!dp || dp->rank() == 0) print_warnings(out.run);
  return out;
}

namespace {

std::string pct(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : "-";
}

// The first `left_cols` columns left-aligned (names), the numbers right-aligned.
void print_table(const std::vector<std::string>& head,
                 const std::vector<std::vector<std::string>>& rows, size_t left_cols = 1) {
  std::vector<bool> right(head.size(), true);
  for (size_t i = 0; i < left_cols && i < right.size(); ++i) right[i] = false;
  std::cout << render_text_table({head, rows, right}, !utf8_output());
}

// batch: Launch::batch_text (under a launch, rank 0's ops, the all_reduce among them).
void print_profile(const Spec& spec, const DeviceInfo& dev, const ProfiledRun& pr, int64_t top,
                   const std::string& batch) {
  const std::string dot = title_dot(!utf8_output());
  std::cout << fmt::format("{} ({}){}{}{}{}: {}{}{}\n", spec.name, spec.family, dot,
                           pr.run.precision, dot, dev.kind, dev.name, dot, batch);
  if (pr.run.status != RunStatus::Ok) {
    std::cout << fmt::format("  {}: {}\n\n", run_status_name(pr.run.status), pr.run.status_detail);
    return;
  }
  const double steps = static_cast<double>(std::max<int64_t>(pr.steps, 1));
  double ops_ms = 0;
  for (const auto& o : pr.ops) ops_ms += o.ms;
  ops_ms /= steps;
  // The ops' per-step means add up to the mean step, not to the median.
  std::cout << fmt::format(
      "{} step{} profiled: step {:.3f} ms median, {:.3f} ms mean (events between steps); the ops "
      "account for {:.3f} ms of the mean ({}), the rest is host time between them\n",
      pr.steps, pr.steps == 1 ? "" : "s", pr.step_ms, pr.step_mean_ms, ops_ms,
      pct(ops_ms, pr.step_mean_ms));
  if (uneven_steps(pr))
    std::cout << fmt::format(
        "note: uneven steps: the mean is {:.1f}x the median (a stalled step: a busy machine?); "
        "the per-step times below are means and hold it: profile again with more --steps, or "
        "on a quieter machine\n",
        pr.step_mean_ms / pr.step_ms);
  if (const auto& h = pr.run.host_load; h && h->busy())
    std::cout << fmt::format(
        "note: a busy machine: {} while the steps ran: the times below are unreliable; profile "
        "again on a quieter machine\n",
        h->describe());
  std::cout << "\n";

  // By layer and by op: sums over the (scope, op, detail) totals, in first-seen order.
  struct Sum {
    double ms = 0, flops = 0, bytes = 0;
  };
  auto grouped = [&](auto key) {
    std::vector<std::pair<std::string, Sum>> g;
    std::map<std::string, size_t> at;
    for (const auto& o : pr.ops) {
      auto [it, fresh] = at.try_emplace(key(o), g.size());
      if (fresh) g.push_back({key(o), Sum{}});
      Sum& sum = g[it->second].second;
      sum.ms += o.ms / steps;
      sum.flops += o.flops / steps;
      sum.bytes += o.bytes / steps;
    }
    return g;
  };
  // Achieved rates: TFLOP/s for GEMMs and convolutions, GB/s (the least bytes the op must move)
  // for the memory-bound rest; blank where the op has none.
  auto rate = [](double amount, double ms, double unit) {
    return amount > 0 && ms > 0 ? format_sig3(amount / (ms * 1e-3) / unit) : std::string("");
  };
  // Shares are of the ops' time ("of ops"), not the step's: the header line gives the ops' share
  // of the step (explain's shares are of the step).
  auto cells = [&](const Sum& v) {
    return std::vector<std::string>{format_op_ms(v.ms), pct(v.ms, ops_ms),
                                    rate(v.flops, v.ms, 1e12), rate(v.bytes, v.ms, 1e9)};
  };
  // A layer's TFLOP/s is its GEMMs' and convolutions' FLOPs over all of its time, as `inspect`
  // counts a layer; a GB/s over a time that is mostly GEMMs would mean nothing.
  std::vector<std::vector<std::string>> rows;
  for (const auto& [scope, v] : grouped([](const OpTotal& o) { return o.scope; })) {
    rows.push_back({scope});
    for (auto& c : cells(v)) rows.back().push_back(std::move(c));
    rows.back().pop_back();
  }
  print_table({"by layer", "ms/step", "of ops", "TFLOP/s"}, rows);
  std::cout << "\n";

  auto by_op = grouped([](const OpTotal& o) { return o.op; });
  std::sort(by_op.begin(), by_op.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  rows.clear();
  for (const auto& [op, v] : by_op) {
    rows.push_back({op});
    for (auto& c : cells(v)) rows.back().push_back(std::move(c));
  }
  print_table({"by op", "ms/step", "of ops", "TFLOP/s", "GB/s"}, rows);
  std::cout << "\n";

  // On a card in the datasheet table, each top op's rate as a share of its ceiling (for FLOPs the
  // peak of the dtype it computes in, matmul_rate: the mode's, fp32's for a layer fp32_layers
  // pins, bf16's for amp_fp8's GEMMs not in FP8; the memory bandwidth for bytes): where the time
  // is lost, at a glance.
  const auto parsed = parse_precision(pr.run.precision);
  const auto ceil = parsed ? ceilings_for(dev, *parsed) : std::nullopt;
  std::set<MatmulRate> other_rates;  // of the rows rated against another dtype's peak
  std::vector<const OpTotal*> order;
  for (const auto& o : pr.ops) order.push_back(&o);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->ms > b->ms; });
  rows.clear();
  int above = 0;  // rows over their ceiling
  // The native CPU names the oneDNN implementation of each op that ran on one.
  const bool kernels =
      std::any_of(pr.ops.begin(), pr.ops.end(), [](const OpTotal& o) { return !o.kernel.empty(); });
  for (size_t i = 0; i < order.size() && static_cast<int64_t>(i) < top; ++i) {
    const OpTotal& o = *order[i];
    rows.push_back({o.scope, o.op, o.detail, fmt::format("{:g}", o.calls / steps)});
    if (kernels) rows.back().insert(rows.back().begin() + 3, o.kernel);
    for (auto& c : cells(Sum{o.ms / steps, o.flops / steps, o.bytes / steps}))
      rows.back().push_back(std::move(c));
    if (ceil) {
      Ceilings c = *ceil;
      if (op_kind(o.op) == OpKind::Matmul) {
        const MatmulRate r = matmul_rate(o, *parsed);
        c.peak_tflops = matmul_peak_tflops(dev, *parsed, r);
        if (r != MatmulRate::Mode) other_rates.insert(r);
      }
      const auto share = percent_of_ceiling(o, c);
      rows.back().push_back(!share                       ? ""
                            : *share > 0 && *share < 0.1 ? format_sig3(*share) + "%"
                                                         : fmt::format("{:.1f}%", *share));
      if (share && *share > 100.0) ++above;
    }
  }
  std::vector<std::string> head = {"scope",   "op",     "shape",   "calls",
                                   "ms/step", "of ops", "TFLOP/s", "GB/s"};
  if (kernels) head.insert(head.begin() + 3, "kernel");
  if (ceil) head.push_back("of peak");
  print_table(head, rows, kernels ? 4 : 3);
  // The other dtypes' peaks that rows were held to, as ", 0.080 TFLOP/s fp32 for ...".
  auto other_peaks = [&](int decimals) {
    std::string out;
    for (MatmulRate r : other_rates)
      out += fmt::format(", {:.{}f} TFLOP/s {}", matmul_peak_tflops(dev, *parsed, r), decimals,
                         r == MatmulRate::StrictFp32
                             ? "fp32 for the GEMMs and convolutions it keeps in fp32 (fp32_layers)"
                             : "bf16 for the GEMMs and convolutions not in FP8");
    return out;
  };
  if (ceil && dev.kind == "cpu") {
    std::cout << fmt::format(
        "(of peak: {:.3f} TFLOP/s {}{}, the GEMM ceiling{} measured on this CPU)\n",
        ceil->peak_tflops, pr.run.precision, other_peaks(3), other_rates.empty() ? "" : "s");
    // A measured ceiling is no hardware limit: say why a row can pass it.
    if (above)
      std::cout << fmt::format(
          "({} above it: the ceiling is the best of a few square oneDNN matmuls, which GEMMs "
          "of other shapes and convolution kernels can beat, and load on the machine lowers)\n",
          above == 1 ? std::string("one op ran") : fmt::format("{} ops ran", above));
  } else if (ceil)
    std::cout << fmt::format(
        "(of peak: {:.0f} TFLOP/s {} dense{}, {:.0f} GB/s memory, datasheet)\n", ceil->peak_tflops,
        pr.run.precision, other_peaks(0), ceil->memory_gbps);
  if (order.size() > static_cast<size_t>(top))
    std::cout << fmt::format("({} more; --top N shows more, --json writes all)\n",
                             order.size() - static_cast<size_t>(top));
  std::cout << "\n";
}

}  // namespace

nlohmann::json profiled_mode_json(const ProfiledRun& pr) {
  nlohmann::json j = {{"precision", pr.run.precision},
                      {"status", run_status_name(pr.run.status)},
                      {"profiled_steps", pr.steps},
                      {"step_time_ms", nullptr},
                      {"step_mean_ms", nullptr}};
  // An oom or unsupported row has no times.
  if (pr.run.status == RunStatus::Ok) {
    j["step_time_ms"] = pr.step_ms;
    j["step_mean_ms"] = pr.step_mean_ms;
  }
  if (!pr.run.status_detail.empty()) j["status_detail"] = pr.run.status_detail;
  return j;
}

namespace {

nlohmann::json profile_json(const ProfiledRun& pr, const DeviceInfo& dev) {
  nlohmann::json j = profiled_mode_json(pr);
  const auto p = parse_precision(pr.run.precision);
  const auto ceil = p ? ceilings_for(dev, *p) : std::nullopt;
  if (ceil)
    // No bandwidth figure (the native CPU measures GEMM rates only): null, not 0.
    j["ceilings"] = {{"peak_tflops", ceil->peak_tflops},
                     {"memory_gbps", ceil->memory_gbps > 0 ? nlohmann::json(ceil->memory_gbps)
                                                           : nlohmann::json(nullptr)}};
  const double steps = static_cast<double>(std::max<int64_t>(pr.steps, 1));
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& o : pr.ops) {
    nlohmann::json op = {
        {"scope", o.scope},
        {"op", o.op},
        {"detail", o.detail},
        {"kernel", o.kernel.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.kernel)},
        {"calls_per_step", o.calls / steps},
        {"ms_per_step", o.ms / steps},
        {"flops_per_step", o.flops / steps},
        {"bytes_per_step", o.bytes / steps}};
    // A GEMM's or convolution's own ceiling (matmul_rate), as the table's "of peak" holds it.
    if (ceil && op_kind(o.op) == OpKind::Matmul)
      if (const double peak = matmul_peak_tflops(dev, *p, matmul_rate(o, *p)); peak > 0)
        op["peak_tflops"] = peak;
    ops.push_back(std::move(op));
  }
  j["ops"] = ops;
  return j;
}

}  // namespace

int cmd_profile(const ProfileArgs& given) {
  // Under mpirun or srun: every rank profiles its shard; rank 0 prints and writes its own.
  Launch launch;
  ProfileArgs args = given;
  if (!launch.speaker()) {
    args.run.quiet = true;
    args.json_path.clear();
  }
  Spec spec;
  launch.agree([&] {
    spec = load_spec(args.spec);
    apply_run_overrides(spec, args.run);
    fit_to_steps(spec, args.steps, launch.ranks());
    preflight_training(spec);
    check_outputs({{"--json", args.json_path}}, spec_inputs(spec));
  });
  auto be = launch.open_backend(args.run);
  launch.warn_unused(args.run);
  launch.same_job(args.run, {{"command", "profile"}, {"--steps", std::to_string(args.steps)}},
                  {spec}, be->info(), be->device(), {{"--json", given.json_path}});
  const bool bar_on = !args.run.quiet && Progress::stderr_is_tty();
  Dataset data = make_dataset_with_progress(spec, bar_on);
  const DeviceInfo dev = be->info();
  nlohmann::json out = json_header("profile");
  out["env"] = env_json(dev, make_reference_backend()->info());
  if (launch.launched()) out["env"]["launch"] = launch.env_json(dev.kind);
  out["spec"] = to_json(spec);
  out["profiles"] = nlohmann::json::array();
  // A mode that runs out of memory, diverges or that the device cannot run is its row (in the
  // table: the status and what did not fit; in the JSON: status, status_detail), as in `run`.
  // One that failed otherwise is a runtime failure, said in one line once the JSON is written.
  std::vector<std::string> failed;
  // The modes' runs, for the note `run` prints under its tables (device_note): on the reference
  // the times are of the emulation, on a native CPU without bf16 hardware bf16's are converted.
  std::vector<RunResult> profiled;
  for (Precision p : spec.precisions) {
    ProfiledRun pr = profile_mode(spec, data, p, args.steps, *be, bar_on, args.run.memory_limit,
                                  launch.data_parallel());
    if (!launch.speaker()) continue;
    print_profile(spec, dev, pr, args.top, launch.batch_text(spec.train.batch_size));
    out["profiles"].push_back(profile_json(pr, dev));
    if (pr.run.status == RunStatus::Failed)
      failed.push_back(fmt::format("{}: {}", pr.run.precision, pr.run.status_detail));
    profiled.push_back(std::move(pr.run));
  }
  if (!launch.speaker()) return 0;
  if (const auto note = device_note(std::move(profiled), dev))
    std::cout << "note: " << *note << "\n";
  flush_stdout();
  if (!args.json_path.empty()) write_output(args.json_path, json_text(out));
  if (!failed.empty())
    throw_runtime(fmt::format(
        "profile {} {}{}", spec.name, failed[0],
        failed.size() > 1 ? fmt::format(" (and {} more modes failed)", failed.size() - 1) : ""));
  return 0;
}

}  // namespace mpbench
