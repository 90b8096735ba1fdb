// `mpbench maxbatch`: per spec and mode, the largest batch that really trains within a memory
// budget (train/max_batch.h), and how it compares with fp32's: the "batch 16 -> 48 at 6.8 GB"
// question of the mixed-precision guides, answered for one's own model on any machine.
#include <iostream>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "app/commands.h"
#include "app/console_table.h"
#include "app/output_file.h"
#include "app/report_writers.h"
#include "models/model.h"
#include "models/spec.h"
#include "train/max_batch.h"
#include "train/results.h"

namespace mpbench {

namespace {

using json = nlohmann::json;

struct Budget {
  uint64_t bytes = 0;  // 0: the device's own memory
  std::string source;  // what set it, for the table's title and the JSON
};

Budget budget_for(const MaxBatchArgs& args, const Backend& be) {
  if (args.memory_limit > 0) return {args.memory_limit, "--memory-limit"};
  if (be.device() == Device::CPU) return {kDefaultCpuMemoryLimit, "the CPU default"};
  return {0, "the device's memory"};
}

std::string budget_text(const Budget& b, const DeviceInfo& d) {
  if (b.bytes > 0) return fmt::format("{} ({})", format_bytes(b.bytes), b.source);
  return fmt::format("{} ({})", format_bytes(d.total_memory), b.source);
}

// What stopped the search: the spec's largest batch, or the first batch that did not train.
std::string bound_text(const MaxBatchResult& r) {
  if (!r.unsupported.empty()) return r.unsupported;
  const std::string k = group_thousands(static_cast<double>(r.multiple));
  const std::string most = group_thousands(static_cast<double>(kMaxBatchSize));
  // Nothing probed: no batch the search may try (a multiple of K) is one a spec takes.
  if (r.at_limit && r.max_batch == 0)
    return fmt::format("no multiple of {} within the largest batch a spec takes ({})", k, most);
  if (r.at_limit) return fmt::format("the largest batch a spec takes ({})", most);
  if (r.probes.empty())
    return fmt::format("the spec's rules take no multiple of {} up to {}", k, most);
  const BatchProbe* first_bad = r.bound();
  if (!first_bad) return "";
  // The host's memory, not the budget, stopped it: its own figures or the probe's data.
  const bool host = first_bad->detail.find("host memory") != std::string::npos;
  return fmt::format("{} at {}{}", host ? "host memory" : run_status_name(first_bad->status),
                     group_thousands(static_cast<double>(first_bad->batch)),
                     r.stopped ? " (search stopped: not for want of memory)" : "");
}

// The mode a model's ratios are against, as in run's tables (ratio_baseline): fp32 when among
// its modes, else the first listed.
std::string baseline_mode(const std::vector<MaxBatchResult>& all, const std::string& model) {
  std::vector<std::string> modes;
  for (const MaxBatchResult& o : all)
    if (o.model == model) modes.push_back(precision_name(o.precision));
  return baseline_among(modes);
}

// r's max batch over its model's baseline mode's (the table's, JSON's and CSV's ratio); none
// when either found no batch.
std::optional<double> ratio_to_baseline(const std::vector<MaxBatchResult>& all,
                                        const MaxBatchResult& r) {
  if (r.max_batch <= 0) return std::nullopt;
  const std::string mode = baseline_mode(all, r.model);
  for (const MaxBatchResult& o : all)
    if (o.model == r.model && precision_name(o.precision) == mode && o.max_batch > 0)
      return static_cast<double>(r.max_batch) / static_cast<double>(o.max_batch);
  return std::nullopt;
}

// The one baseline of every model, named in the ratio column's header; "" when they differ
// (then a note names each that is not fp32).
std::string common_baseline(const std::vector<MaxBatchResult>& all) {
  std::string common;
  for (const MaxBatchResult& r : all) {
    const std::string mode = baseline_mode(all, r.model);
    if (!common.empty() && mode != common) return "";
    common = mode;
  }
  return common;
}

TextTable build(const std::vector<MaxBatchResult>& results) {
  TextTable t;
  const std::string base_name = common_baseline(results);
  const std::string vs = "vs " + (base_name.empty() ? "baseline" : base_name);
  t.head = {"model", "mode", "max batch", vs, "train mem", "samples/s", "probes", "bound by"};
  t.right = {false, false, true, true, true, true, true, false};
  for (const MaxBatchResult& r : results) {
    const BatchProbe* best = r.best();
    const std::optional<double> ratio = ratio_to_baseline(results, r);
    t.rows.push_back({r.model, precision_name(r.precision),
                      !r.unsupported.empty() ? "unsupported"
                      : r.max_batch > 0      ? group_thousands(static_cast<double>(r.max_batch))
                      : r.probes.empty()
                          ? "none tried"  // no batch it may search is one a spec takes
                          : "none fits",
                      ratio ? fmt::format("{:.2f}x", *ratio) : "-",
                      best ? format_bytes(best->run.memory.training_peak) : "-",
                      best ? format_rate(best->run.samples_per_second) : "-",
                      std::to_string(r.probes.size()), bound_text(r)});
  }
  return t;
}

// The probes train on synthetic data of their own, as many samples as the batch needs, so a
// batch can fit in memory and still be more than a spec's dataset holds, which `run` refuses
// (train.batch_size at most data.train_samples): said under the table.
std::vector<std::string> notes(const std::vector<MaxBatchResult>& results,
                               const std::vector<Spec>& specs, int64_t multiple,
                               const DeviceInfo& device) {
  std::vector<std::string> out;
  std::set<std::string> named;  // models whose baseline a note named
  if (common_baseline(results).empty())
    for (const MaxBatchResult& r : results) {
      const std::string mode = baseline_mode(results, r.model);
      if (mode != "fp32" && named.insert(r.model).second)
        out.push_back(fmt::format("note: {}: ratios against {}, the first of its modes (no fp32)",
                                  r.model, mode));
    }
  for (const MaxBatchResult& r : results) {
    if (r.multiple != multiple && r.unsupported.empty())
      out.push_back(fmt::format(
          "note: {} {}: batches multiple of {}, at which its GEMMs run in FP8 (at others they "
          "run in bf16, with bf16's memory)",
          r.model, precision_name(r.precision), r.multiple));
    for (const Spec& s : specs) {
      if (s.name != r.model || r.max_batch <= s.data.train_samples) continue;
      out.push_back(fmt::format(
          "note: {} {}: batch {} is more than the spec's data.train_samples ({}); run takes it "
          "with at least that many training samples",
          r.model, precision_name(r.precision), group_thousands(static_cast<double>(r.max_batch)),
          group_thousands(static_cast<double>(s.data.train_samples))));
    }
  }
  // The note `run` prints under its tables (device_note), for the samples/s column: on the
  // reference those are times of the emulation, on a native CPU without bf16 hardware bf16's
  // are converted.
  std::vector<RunResult> timed;
  for (const MaxBatchResult& r : results)
    if (const BatchProbe* best = r.best()) timed.push_back(best->run);
  if (const auto n = device_note(std::move(timed), device)) out.push_back("note: " + *n);
  return out;
}

// ascii: the console's, under a locale without UTF-8 (the Markdown's is always UTF-8).
std::string title(const DeviceInfo& d, const Budget& b, const MaxBatchArgs& a, bool ascii) {
  const std::string dot = title_dot(ascii);
  return fmt::format("maxbatch{}{}: {}{}memory {}{}batches multiple of {}{}{} step{} a probe", dot,
                     d.kind, d.name, dot, budget_text(b, d), dot, a.multiple, dot, a.steps,
                     a.steps == 1 ? "" : "s");
}

json to_json(const std::vector<MaxBatchResult>& results, const std::vector<Spec>& specs,
             const DeviceInfo& d, const Budget& b, const MaxBatchArgs& a) {
  json out = json_header("maxbatch");
  out["env"] = env_json(d, make_reference_backend()->info());
  out["memory_limit_bytes"] = b.bytes > 0 ? json(b.bytes) : json(nullptr);
  out["memory_limit_source"] = b.source;
  out["multiple"] = a.multiple;
  out["steps_per_probe"] = a.steps;
  out["specs"] = json::array();
  for (const Spec& s : specs) out["specs"].push_back(mpbench::to_json(s));
  out["max_batch"] = json::array();
  for (const MaxBatchResult& r : results) {
    const BatchProbe* best = r.best();
    json probes = json::array();
    for (const BatchProbe& p : r.probes)
      probes.push_back(
          {{"batch", p.batch},
           {"status", run_status_name(p.status)},
           {"detail", p.detail},
           {"training_bytes",
            p.status == RunStatus::Ok ? json(p.run.memory.training_peak) : json(nullptr)},
           // What inspect predicts at that batch; the difference is what guided the next probe.
           {"predicted_training_bytes", p.run.has_predicted_memory
                                            ? json(p.run.predicted_memory.training_peak)
                                            : json(nullptr)},
           // Refused at the limit: what it held plus what it asked for, a lower bound.
           {"needed_bytes_at_least", p.status == RunStatus::Oom && p.run.oom_needed_bytes > 0
                                         ? json(p.run.oom_needed_bytes)
                                         : json(nullptr)}});
    const std::optional<double> ratio = ratio_to_baseline(results, r);
    // An unsupported mode has no search and no answer: status says why, max_batch is null.
    const bool searched = r.unsupported.empty();
    out["max_batch"].push_back(
        {{"model", r.model},
         {"precision", precision_name(r.precision)},
         {"status", searched ? "ok" : "unsupported"},
         {"status_detail", r.unsupported},
         {"max_batch", searched ? json(r.max_batch) : json(nullptr)},
         // The top-level multiple, or amp_fp8's with the batch its GEMMs need to run in FP8.
         {"multiple", r.multiple},
         {"at_spec_limit", r.at_limit},
         // A probe failed for another reason than memory: max_batch is a lower bound only.
         {"search_stopped", r.stopped},
         // Where the search started: the largest batch predict_training_memory said fits.
         {"predicted_max_batch", r.predicted > 0 ? json(r.predicted) : json(nullptr)},
         // Against ratio_baseline's mode, whatever the name says (as run's speedup_vs_fp32).
         {"vs_fp32", ratio ? json(*ratio) : json(nullptr)},
         {"ratio_baseline", baseline_mode(results, r.model)},
         {"peak_memory_bytes", best ? mpbench::to_json(best->run.memory) : json(nullptr)},
         {"samples_per_second", best ? json(best->run.samples_per_second) : json(nullptr)},
         {"probes", std::move(probes)}});
  }
  return out;
}

std::string to_csv(const std::vector<MaxBatchResult>& results) {
  std::string out =
      "model,precision,max_batch,at_spec_limit,vs_fp32,peak_memory_training_bytes,"
      "samples_per_second,probes,status,ratio_baseline,mpbench_version\n";
  for (const MaxBatchResult& r : results) {
    const BatchProbe* best = r.best();
    const std::optional<double> ratio = ratio_to_baseline(results, r);
    const bool searched = r.unsupported.empty();
    // Ends with the version that made the numbers, as run's CSV does, so that a row stands alone.
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.model),
                       precision_name(r.precision), searched ? std::to_string(r.max_batch) : "",
                       r.at_limit ? "true" : "false", ratio ? fmt::format("{}", *ratio) : "",
                       best ? std::to_string(best->run.memory.training_peak) : "",
                       best ? fmt::format("{}", best->run.samples_per_second) : "", r.probes.size(),
                       searched ? "ok" : "unsupported", baseline_mode(results, r.model),
                       csv_field(MPBENCH_VERSION));
  }
  return out;
}

}  // namespace

int cmd_maxbatch(const MaxBatchArgs& args) {
  if (args.specs.empty()) throw_bad_input("maxbatch: give at least one spec file");
  check_outputs({{"--json", args.json_path}, {"--csv", args.csv_path}, {"--md", args.md_path}},
                args.specs);
  std::vector<Spec> specs;
  std::vector<std::string> inputs;  // the specs and their data files, which no output may be
  for (const std::string& path : args.specs) {
    RunArgs overrides;
    overrides.precisions = args.precisions;
    specs.push_back(load_spec(path));
    apply_run_overrides(specs.back(), overrides);
    preflight(specs.back());  // probes train a few steps: the spec's own count does not matter
    for (std::string& in : spec_inputs(specs.back())) inputs.push_back(std::move(in));
  }
  refuse_shared_model_names(specs);  // its rows are by model name, as run's
  check_outputs({{"--json", args.json_path}, {"--csv", args.csv_path}, {"--md", args.md_path}},
                inputs);
  auto be = select_backend(args.device, args.quiet);
  const DeviceInfo device = be->info();
  const Budget budget = budget_for(args, *be);
  if (!args.quiet) std::cerr << "mpbench: maxbatch: memory " << budget_text(budget, device) << "\n";

  std::vector<MaxBatchResult> results;
  for (const Spec& spec : specs) {
    for (Precision p : spec.precisions) {
      MaxBatchOptions opts;
      opts.memory_limit = budget.bytes;
      opts.multiple = args.multiple;
      opts.steps = args.steps;
      // Each warning once a search, not once a probe (a GEMM on the naive kernel at every batch).
      std::set<std::string> warned;
      opts.on_probe = [&](const BatchProbe& probe) {
        std::vector<std::string> news;
        for (const std::string& w : probe.run.warnings)
          if (warned.insert(w).second) news.push_back(w);
        print_warnings(probe.run, news);
        if (args.quiet) return;
        // Beside the prediction the search starts from: how much more training took is what
        // the next guess adds (README, maxbatch).
        const size_t took = probe.run.memory.training_peak,
                     predicted = probe.run.predicted_memory.training_peak;
        const std::string against =
            !probe.run.has_predicted_memory ? ""
            : took > predicted ? fmt::format(" ({} predicted, {} more)", format_bytes(predicted),
                                             format_bytes(took - predicted))
            : took < predicted ? fmt::format(" ({} predicted, {} less)", format_bytes(predicted),
                                             format_bytes(predicted - took))
                               : std::string(" (as predicted)");
        const std::string what =
            probe.status == RunStatus::Ok
                ? fmt::format("trains, {} of training memory{}", format_bytes(took), against)
                : fmt::format("{}: {}", run_status_name(probe.status), probe.detail);
        std::cerr << fmt::format("mpbench: maxbatch: {} {} batch {}: {}\n", spec.name,
                                 precision_name(p), probe.batch, printable_line(what));
      };
      results.push_back(find_max_batch(spec, p, *be, opts));
    }
  }

  const TextTable table = build(results);
  // The table, then every file whatever happened to stdout (see cmd_run).
  std::string note, note_md;
  for (const std::string& n : notes(results, specs, args.multiple, device)) {
    note += n + "\n";
    note_md += "\n" + markdown_cell(n) + "\n";
  }
  std::cout << title(device, budget, args, !utf8_output()) << "\n"
            << render_text_table(table, !utf8_output()) << (note.empty() ? "" : "\n" + note);
  flush_stdout();
  write_outputs(
      {{args.json_path,
        args.json_path.empty() ? "" : json_text(to_json(results, specs, device, budget, args))},
       {args.csv_path, args.csv_path.empty() ? "" : to_csv(results)},
       {args.md_path, args.md_path.empty()
                          ? ""
                          : "_" + markdown_cell(title(device, budget, args, false)) + "_\n\n" +
                                render_markdown_table(table) + note_md}});
  return 0;
}

}  // namespace mpbench
