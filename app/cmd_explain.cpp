// `mpbench explain`: why a mode helped or didn't. Profiles each mode as `profile` does and sets
// every mode against the baseline (train/explain.h): time per step by op kind, the share of the
// baseline step that tensor cores can speed up and the Amdahl bound it implies, and flags.
#include <algorithm>
#include <iostream>
#include <map>

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

namespace {

std::string ratio_text(double from, double to) {
  return from > 0 && to > 0 ? format_ratio(from / to) + "x" : "-";
}

// The headline: "measured 1.23x; bound 1.9x: 41% of the fp32 step is GEMM/conv". The peaks are
// the datasheet's tensor-core rates on a GPU, the GEMM ceilings measured at start on the native
// CPU; the reference has none (device_kind: DeviceInfo::kind).
std::string headline(const ModeComparison& c, const std::string& device_kind) {
  const bool cpu_ceilings = device_kind == "cpu";
  // A share under half a percent that is there at all reads "<1%", not "0%".
  auto percent = [](double f) {
    return f > 0 && f < 0.005 ? std::string("<1%") : fmt::format("{:.0f}%", 100.0 * f);
  };
  std::string share =
      fmt::format("{} of the {} step is GEMM/conv", percent(c.eligible_fraction), c.from);
  if (c.fp32_matmul_fraction > 0)
    share += fmt::format(" ({} more that {} keeps in fp32)", percent(c.fp32_matmul_fraction), c.to);
  if (c.bound)
    return fmt::format("{} vs {}: measured {:.2f}x; bound {:.2f}x: {} ({} {:.2f}x {}'s)", c.to,
                       c.from, c.measured_speedup, *c.bound, share,
                       cpu_ceilings ? "GEMM ceiling measured on this CPU" : "tensor-core peak",
                       *c.peak_ratio, c.from);
  // Why there is none: the reference's times are of its emulation, which no peak describes.
  const std::string why =
      device_kind == "reference"
          ? "no bound on the reference, whose times are of the emulation, not of a device with "
            "peaks"
      : cpu_ceilings ? "no bound without a GEMM ceiling measured on this CPU for both modes"
                     : "no bound without the card's datasheet peaks";
  return fmt::format("{} vs {}: measured {:.2f}x; {}: {}", c.to, c.from, c.measured_speedup, why,
                     share);
}

TextTable kind_table(const ModeComparison& c) {
  TextTable t;
  t.head = {"kind", c.from + " ms/step", c.to + " ms/step", "speedup"};
  t.right = {false, true, true, true};
  for (const KindTimes& k : c.by_kind) {
    if (k.from_ms == 0 && k.to_ms == 0) continue;
    t.rows.push_back({op_kind_name(k.kind), format_op_ms(k.from_ms), format_op_ms(k.to_ms),
                      ratio_text(k.from_ms, k.to_ms)});
  }
  t.rows.push_back({"step (mean)", fmt::format("{:.3f}", c.from_step_ms),
                    fmt::format("{:.3f}", c.to_step_ms), ratio_text(c.from_step_ms, c.to_step_ms)});
  return t;
}

nlohmann::json comparison_json(const ModeComparison& c) {
  nlohmann::json by_kind = nlohmann::json::array();
  for (const KindTimes& k : c.by_kind)
    by_kind.push_back({{"kind", op_kind_name(k.kind)},
                       {"from_ms_per_step", k.from_ms},
                       {"to_ms_per_step", k.to_ms},
                       {"speedup", k.to_ms > 0 ? nlohmann::json(k.from_ms / k.to_ms) : nullptr}});
  return {{"from", c.from},
          {"to", c.to},
          {"from_step_ms", c.from_step_ms},
          {"to_step_ms", c.to_step_ms},
          {"measured_speedup", c.measured_speedup},
          {"eligible_fraction", c.eligible_fraction},
          {"fp32_matmul_fraction", c.fp32_matmul_fraction},
          {"peak_ratio", c.peak_ratio ? nlohmann::json(*c.peak_ratio) : nullptr},
          {"bound", c.bound ? nlohmann::json(*c.bound) : nullptr},
          {"by_kind", by_kind},
          {"flags", c.flags}};
}

}  // namespace

int cmd_explain(const ExplainArgs& given) {
  // Under mpirun or srun: every rank profiles its shard; rank 0 compares its own and writes.
  Launch launch;
  ExplainArgs args = given;
  if (!launch.speaker()) {
    args.run.quiet = true;
    args.json_path.clear();
    args.md_path.clear();
  }
  Spec spec;
  launch.agree([&] {
    spec = load_spec(args.spec);
    apply_run_overrides(spec, args.run);
    // Named where the modes came from: --precisions, or the spec's list when it was not given.
    if (spec.precisions.size() < 2)
      throw_bad_input(
          fmt::format("{}: explain compares modes, so it needs two or more (got {}){}",
                      args.run.precisions.empty() ? args.spec + ": precisions" : "--precisions",
                      spec.precisions.size() == 1 ? precision_name(spec.precisions[0]) : "none",
                      args.run.precisions.empty() ? "; give them with --precisions" : ""));
    fit_to_steps(spec, args.steps, launch.ranks());
    preflight_training(spec);
    check_outputs({{"--json", args.json_path}, {"--md", args.md_path}}, spec_inputs(spec));
  });
  auto be = launch.open_backend(args.run);
  launch.warn_unused(args.run);
  launch.same_job(args.run, {{"command", "explain"}, {"--steps", std::to_string(args.steps)}},
                  {spec}, be->info(), be->device(),
                  {{"--json", given.json_path}, {"--md", given.md_path}});
  const bool bar_on = !args.run.quiet && Progress::stderr_is_tty();
  const Dataset data = make_dataset_with_progress(spec, bar_on);
  const DeviceInfo dev = be->info();
  const bool emulated = dev.kind == "reference";

  size_t base = 0;
  for (size_t i = 0; i < spec.precisions.size(); ++i)
    if (spec.precisions[i] == Precision::FP32) base = i;
  // rounds[i]: mode i's profiles, round by round; the rounds interleave the modes so that a
  // drift of the machine does not land on one mode. A mode that did not train runs no more.
  const size_t n = spec.precisions.size();
  std::vector<std::vector<ProfiledRun>> rounds(n);
  std::vector<ModeContext> contexts(n);
  for (int64_t round = 0; round < args.repeat; ++round) {
    if (round > 0 && rounds[base].back().run.status != RunStatus::Ok)
      break;  // nothing is compared without the baseline
    for (size_t i = 0; i < n; ++i) {
      if (round > 0 && rounds[i].back().run.status != RunStatus::Ok) continue;
      const Precision p = spec.precisions[i];
      const std::map<std::string, int64_t> fallback_before = be->fallback_calls();
      rounds[i].push_back(profile_mode(
          spec, data, p, args.steps, *be, bar_on, args.run.memory_limit, launch.data_parallel(),
          args.repeat > 1 ? fmt::format("round {}/{}", round + 1, args.repeat) : ""));
      ModeContext& ctx = contexts[i];
      if (round == 0) {
        ctx.precision = p;
        ctx.ranks = launch.ranks();
        if (launch.launched()) ctx.grad_reduce = args.run.grad_reduce;
        ctx.ceilings = ceilings_for(dev, p);
        if (precision_info(p).fp8_linears)
          ctx.non_fp8_gemm_peak_tflops = matmul_peak_tflops(dev, p, MatmulRate::NonFp8);
        // The native CPU has no tensor cores, and oneDNN's bf16 matmuls ran sizes off 8 (N or K
        // 255, 250, 63, 60) at the rate of their multiples of 8 (and fp32's ratio): no flag.
        if (dev.kind != "cpu") {
          const std::vector<LayerInfo> infos = Model(spec, p).layer_infos();
          ctx.misaligned = misaligned_matmuls(infos, p, spec.train.batch_size, nullptr, nullptr,
                                              &ctx.misaligned_matmuls);
        }
        // As `run` captures graphs: where the backend can, in one process.
        ctx.cuda_graphs = be->supports_graphs() && launch.data_parallel() == nullptr;
        ctx.gpu = be->device() == Device::CUDA;
        ctx.fallback_path = be->fallback_path();
      }
      for (const auto& [op, calls] : be->fallback_calls()) {
        const auto before = fallback_before.find(op);
        ctx.fallback_calls[op] += calls - (before == fallback_before.end() ? 0 : before->second);
      }
    }
  }
  std::vector<ProfiledRun> runs;
  nlohmann::json modes = nlohmann::json::array();
  // As in `profile`: oom, diverged and unsupported are rows ("not compared" and why), a mode
  // that failed otherwise is a runtime failure, said in one line after the outputs are written.
  std::vector<std::string> failed;
  for (const auto& mode_rounds : rounds) {
    runs.push_back(pool_rounds(mode_rounds));
    const RunResult& r = runs.back().run;
    modes.push_back(profiled_mode_json(runs.back()));
    if (r.status == RunStatus::Failed)
      failed.push_back(fmt::format("{}: {}", r.precision, r.status_detail));
  }

  nlohmann::json launch_env = launch.env_json(dev.kind);  // every rank gathers
  if (!launch.speaker()) return 0;
  const std::string batch = launch.batch_text(spec.train.batch_size);
  const std::string per_mode =
      fmt::format("{} profiled step{} per mode", args.steps, args.steps == 1 ? "" : "s");
  const std::string steps = args.repeat > 1
                                ? fmt::format("{} interleaved rounds of {}", args.repeat, per_mode)
                                : per_mode;
  const std::string dot = title_dot(!utf8_output());
  std::string text = fmt::format("{} ({}){}{}: {}{}{}{}{}\n", spec.name, spec.family, dot, dev.kind,
                                 dev.name, dot, batch, dot, steps);
  std::string md = fmt::format("# explain {}\n\n_{}: {}, {}, {}_\n\n", markdown_cell(spec.name),
                               markdown_cell(dev.kind), markdown_cell(dev.name), batch, steps);
  nlohmann::json comparisons = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i == base) continue;
    const RunResult& a = runs[base].run;
    const RunResult& b = runs[i].run;
    if (a.status != RunStatus::Ok || b.status != RunStatus::Ok) {
      const RunResult& bad = a.status != RunStatus::Ok ? a : b;
      const std::string why =
          fmt::format("{} vs {}: not compared, {} {}: {}", b.precision, a.precision, bad.precision,
                      run_status_name(bad.status), bad.status_detail);
      text += "\n" + why + "\n";
      md += "## " + markdown_cell(why) + "\n\n";
      // In the JSON too: the pair, no times, and why as its one flag (report shows it).
      comparisons.push_back({{"from", a.precision},
                             {"to", b.precision},
                             {"from_step_ms", nullptr},
                             {"to_step_ms", nullptr},
                             {"measured_speedup", nullptr},
                             {"bound", nullptr},
                             {"flags", {why}}});
      continue;
    }
    std::vector<RoundPair> pairs;
    for (size_t r = 0; r < std::min(rounds[base].size(), rounds[i].size()); ++r)
      pairs.push_back({&rounds[base][r], &rounds[i][r]});
    const ModeComparison c = compare_modes(runs[base], contexts[base], runs[i], contexts[i], pairs);
    const TextTable t = kind_table(c);
    const std::string head = headline(c, dev.kind);
    text += "\n" + head + "\n" + render_text_table(t, !utf8_output());
    md += "## " + markdown_cell(head) + "\n\n" + render_markdown_table(t) + "\n";
    if (c.flags.empty()) {
      text += "flags: none\n";
    } else {
      text += "flags:\n";
      for (const std::string& f : c.flags) {
        text += "  - " + f + "\n";
        md += "- " + markdown_cell(f) + "\n";
      }
      md += "\n";
    }
    comparisons.push_back(comparison_json(c));
  }
  // What the times are, as run and profile say it (device_note): on the reference, of the
  // emulation; on a native CPU whose bf16 is converted in software (or no faster than fp32), true
  // but low, the bound and the speedup too.
  std::vector<RunResult> profiled;
  for (const ProfiledRun& r : runs) profiled.push_back(r.run);
  if (const auto note = device_note(std::move(profiled), dev)) {
    text += "\nnote: " + *note + "\n";
    md += "_note: " + markdown_cell(*note) + "_\n";
  }
  std::cout << text;
  flush_stdout();
  std::string json;
  if (!args.json_path.empty()) {
    nlohmann::json doc = json_header("explain");
    nlohmann::json env = env_json(dev, make_reference_backend()->info());
    if (launch.launched()) env["launch"] = launch_env;
    doc.update({{"env", env},
                {"spec", to_json(spec)},
                {"baseline", precision_name(spec.precisions[base])},
                {"emulated", emulated},
                {"profiled_steps_per_round", args.steps},
                {"rounds", args.repeat},
                {"modes", modes},
                {"comparisons", comparisons}});
    json = json_text(doc);
  }
  write_outputs({{args.json_path, json}, {args.md_path, md}});
  if (!failed.empty())
    throw_runtime(fmt::format(
        "explain {} {}{}", spec.name, failed[0],
        failed.size() > 1 ? fmt::format(" (and {} more modes failed)", failed.size() - 1) : ""));
  return 0;
}

}  // namespace mpbench
