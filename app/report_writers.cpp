#include "app/report_writers.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "app/console_table.h"
#include "app/output_file.h"
#include "train/json_check.h"

namespace mpbench {

namespace {

using nlohmann::json;

// Shortest text that reads back as the same double; empty for values that do not exist.
std::string csv_num(double v) {
  return std::isfinite(v) ? fmt::format("{}", v) : "";
}
std::string csv_num(std::optional<double> v) {
  return v ? csv_num(*v) : "";
}

}  // namespace

std::string format_json(const Report& report) {
  return json_text(to_json(report));
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string format_csv(const Report& report) {
  static const char* kHeader[] = {"model",
                                  "family",
                                  "precision",
                                  "device",
                                  "cuda_graphs",
                                  "status",
                                  "status_detail",
                                  "batch_size",
                                  "ranks",
                                  "epochs",
                                  "epoch_time_median_ms",
                                  "epoch_time_mean_ms",
                                  "epoch_time_stddev_ms",
                                  "epoch_time_cv",
                                  "epoch_time_min_ms",
                                  "epoch_time_max_ms",
                                  "samples_per_second",
                                  "tflops",
                                  "percent_of_peak",
                                  "peak_memory_training_bytes",
                                  "peak_memory_data_bytes",
                                  "peak_memory_tracked_bytes",
                                  "peak_memory_device_bytes",
                                  "final_accuracy",
                                  "final_loss",
                                  "speedup_vs_fp32",
                                  "speedup_vs_fp32_ci95_low",
                                  "speedup_vs_fp32_ci95_high",
                                  "memory_vs_fp32",
                                  "skipped_steps",
                                  "final_loss_scale",
                                  "seed",
                                  "repetition",
                                  "flags",
                                  "ratio_baseline",
                                  "mpbench_version"};
  std::string out;
  for (size_t i = 0; i < std::size(kHeader); ++i) out += (i ? "," : "") + std::string(kHeader[i]);
  out += "\n";

  for (const ModelGroup& group : group_by_model(report)) {
    // run --repeat: each mode's interval over all its repetitions, on each repetition's row.
    const std::map<const RunResult*, RatioEstimate> intervals = speedup_intervals(group);
    for (const RunResult* r : group.runs) {
      // A run that did not finish has no meaningful timing or accuracy; its memory peak (how far
      // it got before running out) and loss-scale state are still worth keeping.
      const bool ok = r->status == RunStatus::Ok;
      auto when_ok = [&](double v) { return ok ? csv_num(v) : ""; };
      // A peak of a run that stopped before its first allocation was never measured: empty.
      auto measured = [&](size_t bytes) {
        return ok || r->memory.tracked_peak > 0 ? std::to_string(bytes) : "";
      };
      const TimeStats& t = r->epoch_time_ms;
      const auto ci = intervals.find(r);
      const bool has_ci = ci != intervals.end();
      std::vector<std::string> f = {
          r->model,
          r->family,
          r->precision,
          r->device,
          r->cuda_graphs ? "true" : "false",
          run_status_name(r->status),
          r->status_detail,
          std::to_string(r->batch_size),
          // Data parallel: batch_size is each rank's.
          std::to_string(run_ranks(*r)),
          std::to_string(r->epochs.size()),
          when_ok(t.median),
          when_ok(t.mean),
          // One epoch has no spread: empty (n/a), never 0.
          r->epochs.size() > 1 ? when_ok(t.stddev) : "",
          r->epochs.size() > 1 ? when_ok(t.cv) : "",
          when_ok(t.min),
          when_ok(t.max),
          when_ok(r->samples_per_second),
          when_ok(r->tflops),
          ok && r->peak_tflops > 0 ? csv_num(r->percent_of_peak) : "",
          measured(r->memory.training_peak),
          measured(r->memory.by_category[static_cast<int>(MemCategory::Data)]),
          measured(r->memory.tracked_peak),
          r->memory.has_device ? std::to_string(r->memory.device_peak) : "",
          when_ok(r->final_accuracy),
          when_ok(r->final_loss),
          csv_num(speedup_vs_fp32(*r, group.fp32_for(*r))),
          has_ci ? csv_num(ci->second.lo) : "",
          has_ci ? csv_num(ci->second.hi) : "",
          csv_num(memory_vs_fp32(*r, group.fp32_for(*r))),
          std::to_string(r->skipped_steps),
          r->loss_scaling ? csv_num(r->final_loss_scale) : "",
          r->seed ? std::to_string(*r->seed) : "",
          r->repetition ? std::to_string(*r->repetition) : "",
          fmt::format("{}", fmt::join(run_flags(*r, report.runs), ";")),
          group.baseline,  // the mode speedup_vs_fp32 and memory_vs_fp32 are against
          // The version that made the numbers (the file's tool), so that a CSV stands alone.
          json_check::text(report.tool, "version"),
      };
      for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + csv_field(f[i]);
      out += "\n";
    }
  }
  return out;
}

std::string env_summary(const Report& report) {
  std::vector<std::string> parts;
  const std::string name = json_check::text(report.tool, "name");
  const std::string version = json_check::text(report.tool, "version");
  const std::string git = json_check::text(report.tool, "git");
  if (!name.empty() || !version.empty()) {
    std::string tool = name.empty() ? "mpbench" : name;
    if (!version.empty()) tool += " " + version;
    if (!git.empty()) tool += " (" + git + ")";
    parts.push_back(tool);
  }

  // cmd_run's layout: {"device": kind, "gpu": {name, compute_capability, memory_bytes,
  // driver_version, cuda_runtime_version, cublas_version, cudnn_version}, "cpu": {name, threads}}.
  const json& env = report.env;
  const std::string kind = json_check::text(env, "device");
  const json gpu = env.is_object() && env.contains("gpu") ? env["gpu"] : json();
  if (kind == "cuda" || gpu.is_object()) {
    std::string dev = "cuda";
    if (std::string n = json_check::text(gpu, "name"); !n.empty()) dev += ": " + n;
    if (std::string cc = json_check::text(gpu, "compute_capability"); !cc.empty())
      dev += ", sm " + cc;
    if (gpu.is_object() && gpu.contains("memory_bytes") &&
        gpu["memory_bytes"].is_number_unsigned()) {
      dev += ", " + format_bytes(gpu["memory_bytes"].get<size_t>());
    }
    parts.push_back(dev);
    const std::pair<const char*, const char*> versions[] = {{"driver_version", "driver"},
                                                            {"cuda_runtime_version", "CUDA"},
                                                            {"cublas_version", "cuBLAS"},
                                                            {"cudnn_version", "cuDNN"}};
    for (const auto& [key, label] : versions) {
      if (std::string v = json_check::text(gpu, key); !v.empty())
        parts.push_back(std::string(label) + " " + v);
    }
  }
  const json cpu = env.is_object() && env.contains("cpu") ? env["cpu"] : json();
  const std::string cpu_name =
      cpu.is_string() ? cpu.get<std::string>() : json_check::text(cpu, "name");
  const std::string threads = json_check::text(cpu, "threads");
  const std::string cpu_text =
      cpu_name.empty() ? "" : cpu_name + (threads.empty() ? "" : " (" + threads + " threads)");
  if (kind == "cpu" || kind == "reference" || (kind.empty() && !gpu.is_object())) {
    // The run was on the CPU (natively or on the reference): the CPU is the device.
    if (!cpu_text.empty()) {
      parts.push_back((kind.empty() ? "cpu" : kind) + ": " + cpu_text);
    } else if (!kind.empty()) {
      parts.push_back(kind);
    }
  } else if (!cpu_text.empty()) {
    parts.push_back("CPU: " + cpu_text);
  }

  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " · " : "") + parts[i];
  return out;
}

std::string format_markdown(const Report& report) {
  std::string out;
  const std::string env = env_summary(report);
  if (!env.empty()) out += "_" + markdown_cell(env) + "_\n";
  for (const ModelGroup& group : group_by_model(report)) {
    const Table t = build_table(group, report);
    out += "\n### " + markdown_cell(t.title) + "\n\n";
    const size_t ncol = t.headers.size();
    out += "|";
    for (const std::string& h : t.headers) out += " " + markdown_cell(h) + " |";
    out += "\n|";
    for (size_t c = 0; c < ncol; ++c) out += t.right_align[c] ? " ---: |" : " --- |";
    out += "\n";
    for (const TableRow& row : t.rows) {
      std::vector<std::string> cells;
      for (const std::string& c : row.cells) cells.push_back(markdown_cell(c));
      if (!row.ok) {
        // GitHub tables cannot span columns: the status goes in the first number column, its
        // kind in bold around the escaped text (a status_detail is the file's to say).
        const size_t colon = std::min(row.status.find(':'), row.status.size());
        cells.push_back("**" + markdown_cell(row.status.substr(0, colon)) + "**" +
                        markdown_cell(row.status.substr(colon)));
      }
      cells.resize(ncol);
      out += "|";
      for (const std::string& c : cells) out += " " + c + " |";
      out += "\n";
    }
    const std::vector<std::string> notes = table_notes(group, report);
    if (!notes.empty()) out += "\n";
    for (const std::string& n : notes) out += "- note: " + markdown_cell(n) + "\n";
  }
  if (report.runs.empty()) out += "\nno runs\n";
  if (const auto note = device_note(report)) out += "\n_note: " + markdown_cell(*note) + "_\n";
  return out;
}

}  // namespace mpbench
