#include "app/html_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "app/commands.h"
#include "app/compare.h"  // first_spec_difference
#include "app/console_table.h"
#include "app/report_writers.h"
#include "app/svg.h"
#include "kernels/error.h"
#include "models/input_file.h"
#include "train/explain.h"
#include "train/json_check.h"

namespace mpbench {

namespace {

using nlohmann::json;
using namespace svg;

// ---------------------------------------------------------------------------------------------
// Text and numbers

std::string esc(const std::string& s) {
  return html_escape(s);
}

std::string format_ms_unit(double ms) {
  return format_ms(ms) + " ms";
}

// 1.23M, 456k, 12.3 — for axis ticks and bar labels of rates.
std::string format_si(double v) {
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e3) return fmt::format("{:.3g}k", v / 1e3);
  return fmt::format("{:.3g}", v);
}

struct ByteUnit {
  double scale;
  const char* name;
};
ByteUnit byte_unit(double max_bytes) {
  if (max_bytes >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (max_bytes >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  if (max_bytes >= 1024.0) return {1024.0, "KiB"};
  return {1.0, "B"};
}

// Identifier-safe form of a model name for ids: [A-Za-z0-9_-] kept, anything else '-'.
std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
    out += keep ? c : '-';
  }
  return out.empty() ? "unnamed" : out;
}

// ---------------------------------------------------------------------------------------------
// Colours: one per precision, the same in every chart; runs from further files (another tool,
// CUDA graphs, another device) get lighter shades of it and dashed lines.

const char* precision_color(const std::string& p) {
  if (p == "fp32") return "#3b6fb6";
  if (p == "tf32") return "#2e9d6b";
  if (p == "amp_fp16") return "#e07b24";
  if (p == "amp_bf16") return "#8e5cb8";
  if (p == "amp_fp8") return "#c2185b";
  return "#6e7781";
}

std::string shade(const std::string& hex, int variant) {
  if (variant == 0 || hex.size() != 7) return hex;
  const double t = std::min(0.6, 0.3 * variant);
  auto ch = [&](int i) {
    const int v = std::stoi(hex.substr(1 + 2 * i, 2), nullptr, 16);
    return static_cast<int>(std::lround(v + (255 - v) * t));
  };
  return fmt::format("#{:02x}{:02x}{:02x}", ch(0), ch(1), ch(2));
}

const char* dash_for(int variant) {
  static const char* kDash[] = {"", "7 4", "2 3", "10 3 2 3", "4 4 1 4"};
  return kDash[variant % 5];
}

const char* kCategoryColor[kMemCategoryCount] = {"#3b6fb6", "#9dbbe3", "#e07b24", "#f3c08e",
                                                 "#2e9d6b", "#8e5cb8", "#a8a29e"};

// ---------------------------------------------------------------------------------------------
// The runs of the page

struct Series {
  const RunResult* run = nullptr;
  size_t input = 0;
  const RunResult* fp32 = nullptr;  // baseline in the same file, for the speedup labels
  std::string label;
  std::string mode_label;  // the label without the batch size, for the lines across a sweep
  std::string color;       // precision colour, shaded by variant
  std::string base_color;
  int variant = 0;        // (file, graphs, batch): the shade and dash of its bars and curves
  int sweep_variant = 0;  // (file, graphs): its line across the batch sizes of a sweep
  std::optional<SeedSummary> seeds;  // accuracy over the seeds of a `run --seeds` mode
  // "seeds" or "repetitions" when run stands for several (collapse_runs): its time statistics
  // are then over their median epoch times, not over epochs.
  std::string collapsed_over;
  std::optional<RatioEstimate> speedup_ci;  // with 3 repetitions or more (speedup_interval)
};

struct ModelSection {
  std::string model, id;
  std::vector<Series> series;
  std::vector<std::pair<size_t, ModelGroup>> groups;  // (input, group) for the tables
  // A seeded group's runs collapsed, one per mode (the series point into these).
  std::vector<std::vector<RunResult>> collapsed;

  // What the section's ratios are against, for the captions: its groups' baseline mode (fp32, or
  // a file's first mode without fp32).
  std::string baseline() const {
    std::set<std::string> names;
    for (const auto& [input, g] : groups) names.insert(g.baseline);
    return names.size() == 1 ? *names.begin() : "each file's baseline mode";
  }
};

// The mode a series' ratios are against (its file's fp32, else its first mode).
std::string baseline_of(const Series& s) {
  return s.fp32 ? s.fp32->precision : "fp32";
}

// The speedup a series' bars name: with repetitions the estimate its interval is of, as the
// tables give it (a ratio of median times can fall outside that interval).
std::optional<double> shown_speedup(const Series& s) {
  if (s.speedup_ci) return s.speedup_ci->ratio;
  return speedup_vs_fp32(*s.run, s.fp32);
}

std::string tool_name(const Report& r) {
  std::string n = json_check::text(r.tool, "name");
  return n.empty() ? "mpbench" : n;
}

std::vector<std::string> paths_of(const std::vector<ReportInput>& inputs) {
  std::vector<std::string> out;
  for (const ReportInput& in : inputs) out.push_back(in.path);
  return out;
}

// `names`: short_file_names of the inputs' paths.
std::vector<ModelSection> build_sections(const std::vector<ReportInput>& inputs,
                                         const std::vector<std::string>& names) {
  std::vector<ModelSection> sections;
  std::map<std::string, size_t> index;
  // Labels name the tool only where the page has more than one (mpbench beside PyTorch): the
  // room of a bar's label goes to what tells its bars apart.
  std::set<std::string> tools;
  for (const ReportInput& in : inputs) tools.insert(tool_name(in.report));
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (ModelGroup& g : group_by_model(inputs[i].report)) {
      auto it = index.find(g.model);
      if (it == index.end()) {
        it = index.emplace(g.model, sections.size()).first;
        sections.push_back({g.model, "", {}, {}, {}});
      }
      ModelSection& sec = sections[it->second];
      const bool seeded = has_seeds(g);
      std::vector<SeedSummary> summaries;
      if (seeded) summaries = seed_summaries(inputs[i].report.runs);
      // Series point into the collapsed runs (an inner vector keeps its buffer when moved).
      sec.collapsed.emplace_back();
      const ModelGroup shown =
          seeded || has_repetitions(g) ? collapse_runs(g, sec.collapsed.back()) : g;
      for (const RunResult* r : shown.runs) {
        Series s;
        s.run = r;
        s.input = i;
        s.fp32 = shown.fp32_for(*r);
        s.mode_label = (tools.size() > 1 ? tool_name(inputs[i].report) + " " : "") + r->precision +
                       (r->cuda_graphs ? " +graphs" : "");
        s.label = s.mode_label;
        if (g.batches.size() > 1) s.label += fmt::format(" b{}", r->batch_size);
        if (const SeedSummary* x = seed_summary_for(summaries, *r)) s.seeds = *x;
        if (seeded || has_repetitions(g)) s.collapsed_over = seeded ? "seeds" : "repetitions";
        if (has_repetitions(g)) s.speedup_ci = speedup_interval(g, *r, s.fp32);
        sec.series.push_back(std::move(s));
      }
      sec.groups.emplace_back(i, std::move(g));
    }
  }

  std::set<std::string> used_ids;
  for (ModelSection& sec : sections) {
    std::string id = "model-" + slug(sec.model);
    for (int k = 2; used_ids.count(id); ++k)
      id = "model-" + slug(sec.model) + "-" + std::to_string(k);
    used_ids.insert(id);
    sec.id = id;

    // Labels that collide (the same tool and mode from two files) get the device, then the file.
    auto disambiguate = [&](auto suffix) {
      std::map<std::string, int> count;
      for (const Series& s : sec.series) ++count[s.label];
      for (Series& s : sec.series) {
        if (count[s.label] > 1) {
          s.label += suffix(s);
          s.mode_label += suffix(s);
        }
      }
    };
    std::set<std::string> devices;
    for (const Series& s : sec.series) devices.insert(s.run->device);
    if (devices.size() > 1) disambiguate([](const Series& s) { return " · " + s.run->device; });
    disambiguate([&](const Series& s) { return " · " + names[s.input]; });
    // The sweep chart's lines go by mode_label, one per file: a sweep's "amp_bf16 b32" and
    // another file's "amp_bf16" did not collide above, but their lines would share a name.
    std::map<std::string, std::set<size_t>> files_of;
    for (const Series& s : sec.series) files_of[s.mode_label].insert(s.input);
    for (Series& s : sec.series)
      if (files_of[s.mode_label].size() > 1) s.mode_label += " · " + names[s.input];

    // Variant: the position of the series' (file, graphs, batch) among the section's, so that
    // the first file's runs get the full colours and each batch of a sweep its own dash; the
    // sweep chart draws one line per (file, graphs) across the batches.
    std::vector<std::tuple<size_t, bool, int64_t>> variants;
    std::vector<std::pair<size_t, bool>> sweeps;
    for (Series& s : sec.series) {
      const auto key = std::make_tuple(s.input, s.run->cuda_graphs, s.run->batch_size);
      auto it = std::find(variants.begin(), variants.end(), key);
      if (it == variants.end()) it = variants.insert(variants.end(), key);
      s.variant = static_cast<int>(it - variants.begin());
      const auto sweep = std::make_pair(s.input, s.run->cuda_graphs);
      auto sw = std::find(sweeps.begin(), sweeps.end(), sweep);
      if (sw == sweeps.end()) sw = sweeps.insert(sweeps.end(), sweep);
      s.sweep_variant = static_cast<int>(sw - sweeps.begin());
      s.base_color = precision_color(s.run->precision);
      s.color = shade(s.base_color, s.variant);
    }
  }
  return sections;
}

std::string status_text(const RunResult& r) {
  std::string s = run_status_name(r.status);
  if (!r.status_detail.empty()) s += ": " + r.status_detail;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Page sections

std::string figure(const std::string& caption, const std::string& body, bool wide = false) {
  return fmt::format("<figure class=\"card{}\"><figcaption>{}</figcaption>\n{}</figure>\n",
                     wide ? " wide" : "", caption, body);
}

std::string bars_legend(const std::vector<Series>& series) {
  std::vector<std::pair<std::string, std::string>> items;
  std::set<std::string> seen;
  for (const Series& s : series) {
    if (seen.insert(s.run->precision).second) items.emplace_back(s.run->precision, s.base_color);
  }
  return legend_html(items);
}

// A bar labelled and coloured as its series.
Bar bar_of(const Series& s) {
  Bar b;
  b.label = s.label;
  b.color = s.color;
  return b;
}

// A run that did not finish gets its status in place of a bar.
void show_status_instead(Bar& b, const Series& s) {
  b.note = status_text(*s.run);
  b.note_is_status = true;
  b.tooltip = s.label + ": " + b.note;
}

std::string time_chart(const std::vector<Series>& series) {
  std::vector<Bar> bars;
  for (const Series& s : series) {
    const RunResult& r = *s.run;
    Bar b = bar_of(s);
    const TimeStats& t = r.epoch_time_ms;
    b.drawn = r.status == RunStatus::Ok && std::isfinite(t.median) && t.median > 0;
    if (b.drawn) {
      b.value = t.median;
      b.value_text = format_ms_unit(t.median);
      if (t.max > t.min && std::isfinite(t.min) && std::isfinite(t.max))
        b.whisker = std::make_pair(t.min, t.max);
      if (auto sp = shown_speedup(s)) b.note = fmt::format("{:.2f}×", *sp);
      const std::string ci = s.speedup_ci
                                 ? fmt::format(" (95% CI {}–{})", format_ratio(s.speedup_ci->lo),
                                               format_ratio(s.speedup_ci->hi))
                                 : "";
      const std::string over =
          s.collapsed_over.empty()
              ? fmt::format("over its {} epoch{}", r.epochs.size(), r.epochs.size() == 1 ? "" : "s")
              : "over the " + s.collapsed_over + "' median epochs";
      const std::string cv = has_time_spread(r, !s.collapsed_over.empty())
                                 ? fmt::format("{:.1f}%", t.cv * 100)
                                 : std::string("n/a");
      b.tooltip = fmt::format(
          "{}: median epoch {} (min {}, max {}, cv {}, {}){}", s.label, format_ms_unit(t.median),
          format_ms_unit(t.min), format_ms_unit(t.max), cv, over,
          b.note.empty() ? "" : ", speedup vs " + baseline_of(s) + " " + b.note + ci);
    } else {
      show_status_instead(b, s);
    }
    bars.push_back(std::move(b));
  }
  return bar_chart(
      "chart-time", bars,
      {"median epoch time (ms), whiskers min–max", [](double v) { return format_general(v); }, 1});
}

// Final accuracy over the seeds of `run --seeds`: the mean, whiskers one standard deviation each
// way; the label gives the difference from the baseline mode and its 95% interval.
std::string accuracy_chart(const std::vector<Series>& series) {
  std::vector<Bar> bars;
  for (const Series& s : series) {
    Bar b = bar_of(s);
    b.drawn = s.seeds.has_value() && s.run->status == RunStatus::Ok;
    if (!b.drawn) {
      show_status_instead(b, s);
      if (s.run->status == RunStatus::Ok) {  // not a failure: this run has no seeds to average
        b.note = "trained once, no seeds (run --seeds N)";
        b.note_is_status = false;
        b.tooltip = s.label + ": " + b.note;
      }
      bars.push_back(std::move(b));
      continue;
    }
    const SeedSummary& x = *s.seeds;
    b.value = 100 * x.accuracy_mean;
    if (x.seeds >= 2)  // one seed has no spread
      b.whisker = std::make_pair(100 * (x.accuracy_mean - x.accuracy_std),
                                 100 * (x.accuracy_mean + x.accuracy_std));
    b.value_text = format_accuracy_over_seeds(x, "±");
    if (const auto& d = x.accuracy_delta_vs_fp32)
      b.note = fmt::format("{:+.2f} [{:+.2f}, {:+.2f}]", 100 * d->mean, 100 * d->ci95_low,
                           100 * d->ci95_high);
    b.tooltip = fmt::format(
        "{}: accuracy over {} seed{} {} (std){}", s.label, x.seeds, x.seeds == 1 ? "" : "s",
        format_accuracy_over_seeds(x, "±"),
        b.note.empty() ? "" : "; vs " + baseline_of(s) + " " + b.note + " (95% paired t)");
    bars.push_back(std::move(b));
  }
  return bar_chart("chart-accuracy", bars,
                   {"final accuracy (%), mean over the seeds, whiskers ± 1 std",
                    [](double v) { return format_general(v); }, 1});
}

std::string throughput_chart(const std::vector<Series>& series) {
  std::vector<Bar> bars;
  for (const Series& s : series) {
    const RunResult& r = *s.run;
    Bar b = bar_of(s);
    b.drawn = r.status == RunStatus::Ok && std::isfinite(r.samples_per_second) &&
              r.samples_per_second > 0;
    if (b.drawn) {
      b.value = r.samples_per_second;
      b.value_text = format_si(r.samples_per_second) + "/s";
      if (auto sp = shown_speedup(s)) b.note = fmt::format("{:.2f}×", *sp);
      b.tooltip = fmt::format("{}: {} samples/s", s.label, group_thousands(r.samples_per_second));
      if (r.tflops > 0 && std::isfinite(r.tflops)) {
        // Three significant digits: a CPU's rates are fractions of a TFLOP/s.
        b.tooltip += fmt::format(", {:.3g} TFLOP/s", r.tflops);
        if (r.peak_tflops > 0 && std::isfinite(r.percent_of_peak))
          b.tooltip += fmt::format(" ({:.0f}% of {:.3g} peak)", r.percent_of_peak, r.peak_tflops);
      }
    } else {
      show_status_instead(b, s);
    }
    bars.push_back(std::move(b));
  }
  return bar_chart("chart-throughput", bars,
                   {"training samples per second", [](double v) { return format_si(v); }, 1});
}

std::string memory_chart(const std::vector<Series>& series) {
  double max_b = 0;
  bool any_device = false;
  for (const Series& s : series) {
    max_b = std::max(max_b, double(s.run->memory.training_peak));
    if (s.run->memory.has_device) {
      any_device = true;
      max_b = std::max(max_b, double(s.run->memory.device_peak));
    }
  }
  const ByteUnit u = byte_unit(max_b);
  std::vector<Bar> bars;
  for (const Series& s : series) {
    const RunResult& r = *s.run;
    Bar b = bar_of(s);
    if (r.status == RunStatus::Unsupported) {  // never built: no memory (null in the JSON)
      b.drawn = false;
      show_status_instead(b, s);
      bars.push_back(std::move(b));
      continue;
    }
    b.value = double(r.memory.training_peak);
    b.value_text = format_bytes(r.memory.training_peak);
    b.tooltip = s.label + ": training peak " + format_bytes(r.memory.training_peak) +
                " (+ the dataset copy and step records " +
                format_bytes(r.memory.by_category[static_cast<int>(MemCategory::Data)]) + ")";
    if (r.memory.has_device) {
      b.marker = double(r.memory.device_peak);
      b.tooltip += ", device peak " + format_bytes(r.memory.device_peak);
    }
    if (r.status != RunStatus::Ok) {
      // The peak it reached before it stopped is still worth seeing.
      b.faded = true;
      b.note = run_status_name(r.status);
      b.note_is_status = true;
      b.tooltip += " (" + status_text(r) + ")";
    } else if (auto m = memory_vs_fp32(r, s.fp32)) {
      b.note = fmt::format("{:.2f}×", *m);
      b.tooltip += ", " + b.note + " of " + baseline_of(s);
    }
    bars.push_back(std::move(b));
  }
  std::string label = std::string("training memory (") + u.name + ")";
  if (any_device) label += ", bar: training, tick: device-wide (dataset included)";
  return bar_chart("chart-memory", bars,
                   {label, [](double v) { return format_general(v); }, u.scale});
}

std::string memory_breakdown_chart(const std::vector<Series>& series) {
  // The training categories stacked; the dataset copy (the harness's, not training's) is named
  // after the bar instead of drawn in it.
  const int data = static_cast<int>(MemCategory::Data);
  std::vector<std::pair<std::string, std::string>> keys;
  for (int c = 0; c < kMemCategoryCount; ++c)
    if (c != data)
      keys.emplace_back(mem_category_name(static_cast<MemCategory>(c)), kCategoryColor[c]);
  std::vector<Stack> stacks;
  double max_b = 0;
  for (const Series& se : series) {
    Stack st{se.label, {}, "", se.run->status != RunStatus::Ok};
    double sum = 0;
    for (int c = 0; c < kMemCategoryCount; ++c) {
      if (c == data) continue;
      st.parts.push_back(double(se.run->memory.by_category[c]));
      sum += st.parts.back();
    }
    st.total = format_bytes(static_cast<size_t>(sum)) + " + " +
               format_bytes(se.run->memory.by_category[data]) + " data";
    if (se.run->status == RunStatus::Unsupported)  // never built: no memory to break down
      st.total = run_status_name(se.run->status);
    else if (st.bad)
      st.total += " · " + std::string(run_status_name(se.run->status));
    max_b = std::max(max_b, sum);
    stacks.push_back(std::move(st));
  }
  const ByteUnit u = byte_unit(max_b);
  return stacked_chart(
      "chart-memory-breakdown", "training memory by category, the dataset copy apart", stacks, keys,
      std::string("peak per category (") + u.name + ")", u.scale,
      [&](size_t i, size_t k, double v) {
        return series[i].label + ": " + keys[k].first + " " + format_bytes(static_cast<size_t>(v));
      });
}

// Op groups of the profile chart: few enough for a legend, each a kind of work.
const std::array<std::pair<const char*, const char*>, 8> kOpGroups = {{
    {"GEMM", "#3b6fb6"},
    {"convolution", "#9dbbe3"},
    {"normalisation", "#2e9d6b"},
    {"attention softmax", "#8e5cb8"},
    {"loss", "#e07b24"},
    {"optimizer, unscale, loss scale", "#f3c08e"},
    {"elementwise, casts, copies", "#a8a29e"},
    {"gradient all-reduce", "#c2410c"},
}};

// The group of an op: explain's kind of it (train/explain.h, the one place ops are classified),
// with GEMMs and convolutions apart, and copies among the elementwise work.
size_t op_group(const std::string& op) {
  switch (op_kind(op)) {
    case OpKind::Matmul:
      return op == "gemm" ? 0 : 1;
    case OpKind::Normalisation:
      return 2;
    case OpKind::Softmax:
      return 3;
    case OpKind::Loss:
      return 4;
    case OpKind::Optimizer:
      return 5;
    case OpKind::Communication:
      return 7;
    case OpKind::Elementwise:
    case OpKind::Copies:
    case OpKind::HostGaps:
      break;
  }
  return 6;
}

// Data parallel: per run of `mpirun -np N mpbench run`, its training step split into compute
// and the all-reduce time compute did not hide. Empty when no run of the section is one.
std::string data_parallel_chart(const std::vector<Series>& series) {
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"compute", "#3b6fb6"}, {"exposed communication", "#c2410c"}};
  std::vector<Stack> stacks;
  std::vector<const Series*> shown;
  for (const Series& se : series) {
    if (!se.run->data_parallel) continue;
    const DataParallelResult& d = *se.run->data_parallel;
    Stack st{fmt::format("{} · {} ranks", se.label, d.ranks),
             {0, 0},
             "",
             se.run->status != RunStatus::Ok};
    const double step = se.run->step_time_ms();
    if (st.bad) {
      st.total = run_status_name(se.run->status);
    } else {
      st.parts = {std::max(0.0, step - d.comm_ms_per_step), d.comm_ms_per_step};
      st.total = fmt::format("{:.3g} ms · {:.0f}% comm", step,
                             step > 0 ? 100 * d.comm_ms_per_step / step : 0.0);
    }
    stacks.push_back(std::move(st));
    shown.push_back(&se);
  }
  if (stacks.empty()) return "";
  return figure(
      "Data parallel <span class=\"sub\">a training step: compute, and the gradients' "
      "all-reduce compute did not hide</span>",
      stacked_chart("chart-data-parallel", "training step by compute and exposed communication",
                    stacks, keys, "time per step (ms)", 1.0, [&](size_t i, size_t k, double v) {
                      const DataParallelResult& d = *shown[i]->run->data_parallel;
                      return stacks[i].label + ": " + keys[k].first + " " + format_ms_unit(v) +
                             (k == 1 ? fmt::format(" ({} in {}, busbw {:.3g} GB/s)",
                                                   format_bytes(d.bytes_per_step), d.grad_reduce,
                                                   d.busbw_gbps)
                                     : "");
                    }));
}

// The profiles of one model: a bar per (file, mode) of the time per step by op group.
std::string profile_chart(const std::vector<const ProfileInput*>& profiles) {
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& [name, color] : kOpGroups) keys.emplace_back(name, color);
  std::vector<std::string> paths;
  for (const ProfileInput* pr : profiles) paths.push_back(pr->path);
  const std::vector<std::string> names = short_file_names(paths);
  std::vector<Stack> stacks;
  for (size_t i = 0; i < profiles.size(); ++i) {
    for (const ProfileInput::Mode& m : profiles[i]->modes) {
      Stack st;
      st.label = m.precision + (profiles.size() > 1 ? " · " + names[i] : "");
      st.parts.assign(keys.size(), 0.0);
      double sum = 0;
      for (const auto& [op, ms] : m.ms_by_op) {
        st.parts[op_group(op)] += ms;
        sum += ms;
      }
      st.bad = m.status != "ok";
      // Short, to fit right of the longest bar: the ops' sum of the mean step they add up to
      // (the median in files that lack the mean).
      const double step = std::isfinite(m.step_mean_ms) ? m.step_mean_ms : m.step_ms;
      st.total = st.bad ? m.status : fmt::format("{:.3g} of {:.3g} ms", sum, step);
      stacks.push_back(std::move(st));
    }
  }
  return stacked_chart("chart-profile", "time per training step by op", stacks, keys,
                       "device time per step (ms)", 1.0, [&](size_t i, size_t k, double v) {
                         return stacks[i].label + ": " + keys[k].first + " " + format_ms_unit(v);
                       });
}

// The epoch boundaries (warm-up's end first) of every run a chart draws, each step once: runs of
// other batch sizes end their epochs at other steps, and each curve's must be marked.
struct EpochMarkers {
  std::set<double> steps;
  // Some run's boundaries differ from another's, beyond one being the start of the other (a run
  // that stopped early): each curve's are then not all the lines drawn.
  bool differ = false;

  void add(const RunResult& r) {
    std::vector<double> own;
    double step = double(r.warmup_steps);
    if (step > 0) own.push_back(step);
    for (const EpochResult& e : r.epochs) {
      step += double(e.steps);
      own.push_back(step);
    }
    for (const std::vector<double>& other : runs_) {
      const size_t n = std::min(own.size(), other.size());
      if (!std::equal(own.begin(), own.begin() + n, other.begin())) differ = true;
    }
    steps.insert(own.begin(), own.end());
    runs_.push_back(std::move(own));
  }
  std::vector<double> list() const { return {steps.begin(), steps.end()}; }

 private:
  std::vector<std::vector<double>> runs_;
};

std::string loss_charts(const std::vector<Series>& series) {
  std::vector<Line> loss, scale;
  std::vector<std::pair<std::string, std::string>> loss_keys, scale_keys;
  std::vector<std::string> loss_dash, scale_dash;
  double lo = INFINITY, hi = -INFINITY;
  EpochMarkers markers, scale_markers;
  for (const Series& s : series) {
    const RunResult& r = *s.run;
    if (r.steps.empty()) continue;
    markers.add(r);
    std::vector<double> ys, scales;
    for (const StepRecord& st : r.steps) {
      ys.push_back(st.loss);
      scales.push_back(st.loss_scale);
    }
    const int64_t skipped = r.skipped_steps;  // the series may hold buckets (steps.stride)
    const double stride = double(r.step_stride);
    const std::string dash = dash_for(s.variant);
    Line l{s.label, s.color, dash, downsample(ys, 500, false, stride), ""};
    for (auto& p : l.pts) {
      if (std::isfinite(p.second) && p.second > 0) {
        lo = std::min(lo, p.second);
        hi = std::max(hi, p.second);
      }
    }
    const double last = ys.back();
    l.tooltip = fmt::format("{}: {} steps, last loss {}{}", s.label, r.step_count(),
                            std::isfinite(last) ? fmt::format("{:.4g}", last) : "non-finite",
                            r.status != RunStatus::Ok ? " (" + status_text(r) + ")" : "");
    loss_keys.emplace_back(
        s.label +
            (r.status != RunStatus::Ok ? " (" + std::string(run_status_name(r.status)) + ")" : ""),
        s.color);
    loss_dash.push_back(dash.empty() ? "none" : dash);
    loss.push_back(std::move(l));
    if (r.loss_scaling) {
      scale_markers.add(r);
      Line sl{s.label, s.color, dash, downsample(scales, 500, true, stride), ""};
      sl.tooltip = fmt::format("{}: final loss scale {}, {} skipped steps", s.label,
                               format_loss_scale(r.final_loss_scale), skipped);
      scale_keys.emplace_back(s.label + fmt::format(" ({} skipped)", skipped), s.color);
      scale_dash.push_back(dash.empty() ? "none" : dash);
      scale.push_back(std::move(sl));
    }
  }
  std::string out;
  if (loss.empty()) {
    return figure("Training loss", "<p class=\"note\">No per-step series in these results.</p>",
                  true);
  }
  const bool log_loss = lo > 0 && hi / lo >= 20;
  out += figure(
      std::string("Training loss per step") + (log_loss ? " (log scale)" : "") +
          " <span class=\"sub\">mean over buckets of steps, at most 500 points per curve; dotted "
          "lines: " +
          (markers.differ ? "every curve's epoch boundaries (not the same for all)"
                          : "epoch boundaries") +
          "</span>",
      legend_html(loss_keys, loss_dash) + line_chart("chart-loss", loss, "step", "training loss",
                                                     log_loss ? 10 : 0, markers.list(), 330),
      true);
  if (scale.empty()) {
    out += figure("Loss scale",
                  "<p class=\"note\">No run of this model used dynamic loss scaling "
                  "(only amp_fp16 does).</p>",
                  true);
  } else {
    out += figure(
        "Loss scale per step (log scale) <span class=\"sub\">minimum over buckets of steps, so "
        "back-offs stay visible</span>",
        legend_html(scale_keys, scale_dash) + line_chart("chart-loss-scale", scale, "step",
                                                         "loss scale", 2, scale_markers.list(),
                                                         240),
        true);
  }
  return out;
}

// amp_fp8's numerical health: per run, the amax each representative tensor was scaled by and
// the scale that followed, per step, on log axes. Colour by role (x, w, dy), dash by layer (the
// first FP8 layer solid, the last dashed), lighter for further files. Empty without FP8 runs.
std::string fp8_scaling_charts(const std::vector<Series>& series) {
  std::vector<Line> amax, scale;
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<std::string> dashes;
  EpochMarkers markers;
  auto role_color = [](const std::string& tensor) {
    const std::string role = tensor.substr(tensor.rfind('.') + 1);
    return std::string(role == "x" ? "#3b6fb6" : role == "w" ? "#2e9d6b" : "#e07b24");
  };
  for (const Series& s : series) {
    const RunResult& r = *s.run;
    if (r.fp8_scaling.empty()) continue;
    markers.add(r);
    const std::string first_layer =
        r.fp8_scaling.front().tensor.substr(0, r.fp8_scaling.front().tensor.rfind('.'));
    for (const Fp8TensorSeries& t : r.fp8_scaling) {
      const bool first = t.tensor.substr(0, t.tensor.rfind('.')) == first_layer;
      const std::string color = shade(role_color(t.tensor), s.variant);
      const std::string dash = first ? dash_for(s.variant) : "7 4";
      const std::string label = series.size() > 1 ? s.label + " · " + t.tensor : t.tensor;
      std::vector<double> a(t.amax.begin(), t.amax.end()), sc(t.scale.begin(), t.scale.end());
      const double stride = double(r.step_stride);
      Line la{label, color, dash, downsample(a, 500, false, stride), ""};
      la.tooltip = fmt::format("{} ({}): last amax {:.4g}", label, t.format, a.back());
      Line ls{label, color, dash, downsample(sc, 500, false, stride), ""};
      ls.tooltip = fmt::format("{} ({}): last scale {:.4g}", label, t.format, sc.back());
      amax.push_back(std::move(la));
      scale.push_back(std::move(ls));
      keys.emplace_back(
          label + " (" + t.format +
              (t.clipped_steps > 0 ? fmt::format(", clipped at {} of {} steps", t.clipped_steps,
                                                 r.steps_of(t.amax.size()))
                                   : std::string()) +
              ")",
          color);
      dashes.push_back(dash.empty() ? "none" : dash);
    }
  }
  if (amax.empty()) return "";
  return figure(
             "FP8 amax per step (log scale) <span class=\"sub\">amp_fp8: the amax each tensor's "
             "delayed scaling used after the step; solid: the first FP8 layer, dashed: the "
             "last</span>",
             legend_html(keys, dashes) +
                 line_chart("chart-fp8-amax", amax, "step", "amax", 10, markers.list(), 260),
             true) +
         figure(
             "FP8 scale per step (log scale) <span class=\"sub\">fp8_max / amax (2^-margin): a "
             "scale that keeps falling is an amax that keeps growing</span>",
             legend_html(keys, dashes) +
                 line_chart("chart-fp8-scale", scale, "step", "scale", 10, markers.list(), 260),
             true);
}

// A sweep (run --batch-sizes): per mode (and file), its speedup over the baseline mode at each
// batch size, on a log2 batch axis. Empty when the section's runs share one batch size.
std::string speedup_by_batch_chart(const std::vector<Series>& series, const std::string& base) {
  std::set<int64_t> batches;
  for (const Series& s : series) batches.insert(s.run->batch_size);
  if (batches.size() < 2) return "";
  struct Key {
    size_t input;
    std::string precision;
    bool graphs;
    bool operator<(const Key& o) const {
      return std::tie(input, precision, graphs) < std::tie(o.input, o.precision, o.graphs);
    }
  };
  std::map<Key, size_t> index;
  std::vector<Line> lines;
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<std::string> dashes;
  for (const Series& s : series) {
    const Key k{s.input, s.run->precision, s.run->cuda_graphs};
    auto it = index.find(k);
    if (it == index.end()) {
      it = index.emplace(k, lines.size()).first;
      const std::string color = shade(s.base_color, s.sweep_variant);
      lines.push_back({s.mode_label, color, dash_for(s.sweep_variant), {}, s.mode_label + ":"});
      keys.emplace_back(s.mode_label, color);
      const std::string dash = dash_for(s.sweep_variant);
      dashes.push_back(dash.empty() ? "none" : dash);
    }
    Line& l = lines[it->second];
    const auto sp = shown_speedup(s);
    l.pts.emplace_back(std::log2(static_cast<double>(s.run->batch_size)), sp ? *sp : NAN);
    l.tooltip += fmt::format(" {} at {}", sp ? fmt::format("{:.2f}×", *sp) : status_text(*s.run),
                             s.run->batch_size);
  }
  for (Line& l : lines) std::sort(l.pts.begin(), l.pts.end());
  std::vector<std::pair<double, std::string>> ticks;
  for (int64_t b : batches)
    ticks.emplace_back(std::log2(static_cast<double>(b)), group_thousands(static_cast<double>(b)));
  return figure(fmt::format("Speedup over {0} against batch size <span class=\"sub\">each mode "
                            "against {0} at the same batch; log2 batch axis</span>",
                            esc(base)),
                legend_html(keys, dashes) + line_chart("chart-speedup-batch", lines, "batch size",
                                                       "speedup over " + base, 0, {}, 300, ticks),
                true);
}

std::string table_html(const Table& t, const std::string& caption) {
  std::string s =
      "<div class=\"table-wrap\"><table>\n<caption>" + esc(caption) + "</caption>\n<tr>";
  for (size_t c = 0; c < t.headers.size(); ++c)
    s += fmt::format("<th{}>{}</th>", t.right_align[c] ? " class=\"num\"" : "", esc(t.headers[c]));
  s += "</tr>\n";
  for (const TableRow& row : t.rows) {
    s += "<tr>";
    if (row.ok) {
      for (size_t c = 0; c < row.cells.size(); ++c) {
        s += fmt::format("<td{}>{}</td>",
                         c < t.right_align.size() && t.right_align[c] ? " class=\"num\"" : "",
                         esc(row.cells[c]));
      }
    } else {
      // The cells that say which run it is (a sweep's batch among them), then the status.
      const size_t lead = std::clamp<size_t>(row.cells.size(), 1, t.headers.size() - 1);
      for (size_t c = 0; c < lead; ++c)
        s += fmt::format("<td{}>{}</td>", t.right_align[c] ? " class=\"num\"" : "",
                         esc(c < row.cells.size() ? row.cells[c] : ""));
      const std::string kind = row.status.substr(0, row.status.find(':'));
      s += fmt::format("<td class=\"status-cell status-{}\" colspan=\"{}\">{}</td>", slug(kind),
                       t.headers.size() - lead, esc(row.status));
    }
    s += "</tr>\n";
  }
  return s + "</table></div>\n";
}

std::string env_html(const ReportInput& in) {
  const Report& r = in.report;
  std::vector<std::pair<std::string, std::string>> rows;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!v.empty()) rows.emplace_back(k, v);
  };
  {
    std::string tool = tool_name(r);
    if (auto v = json_check::text(r.tool, "version"); !v.empty()) tool += " " + v;
    if (auto g = json_check::text(r.tool, "git"); !g.empty()) tool += " (git " + g + ")";
    add("tool", tool);
    if (r.tool.is_object()) {
      for (const auto& [k, v] : r.tool.items()) {
        if (k != "name" && k != "version" && k != "git" && (v.is_string() || v.is_number()))
          add("tool " + k, v.is_string() ? v.get<std::string>() : v.dump());
      }
    }
  }
  const json& env = r.env;
  add("device", json_check::text(env, "device"));
  static const std::pair<const char*, const char*> kGpu[] = {
      {"name", "GPU"},
      {"compute_capability", "compute capability"},
      {"memory_bytes", "GPU memory"},
      {"sm_count", "SMs"},
      {"driver_version", "driver"},
      {"cuda_runtime_version", "CUDA runtime"},
      {"cublas_version", "cuBLAS"},
      {"cudnn_version", "cuDNN"}};
  if (env.is_object() && env.contains("gpu") && env["gpu"].is_object()) {
    const json& gpu = env["gpu"];
    std::set<std::string> known;
    for (const auto& [k, label] : kGpu) {
      known.insert(k);
      if (std::string(k) == "memory_bytes" && gpu.contains(k) && gpu[k].is_number_unsigned()) {
        add(label, format_bytes(gpu[k].get<size_t>()));
      } else {
        add(label, json_check::text(gpu, k));
      }
    }
    for (const auto& [k, v] : gpu.items()) {
      if (!known.count(k) && (v.is_string() || v.is_number() || v.is_boolean()))
        add("gpu " + k, v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  if (env.is_object() && env.contains("cpu")) {
    const json& cpu = env["cpu"];
    std::string c = cpu.is_string() ? cpu.get<std::string>() : json_check::text(cpu, "name");
    if (auto t = json_check::text(cpu, "threads"); !t.empty()) c += " (" + t + " threads)";
    add("CPU", c);
  }
  if (env.is_object()) {
    for (const auto& [k, v] : env.items()) {
      if (k != "device" && k != "gpu" && k != "cpu" && (v.is_string() || v.is_number()))
        add(k, v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  std::string s = "<div class=\"card env\"><h3>" + esc(in.path) + "</h3>\n<dl>";
  for (const auto& [k, v] : rows) s += "<dt>" + esc(k) + "</dt><dd>" + esc(v) + "</dd>";
  return s + "</dl></div>\n";
}

const char* kCss = R"CSS(
:root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --bg: #f6f8fa; --card: #fff;
        --bad: #b42318; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 24px 64px; }
header h1 { font-size: 26px; margin: 0 0 4px; }
header p { margin: 2px 0; color: var(--muted); }
nav { margin: 14px 0 6px; }
nav a { display: inline-block; margin: 0 8px 6px 0; padding: 3px 10px; border: 1px solid var(--line);
        border-radius: 999px; background: var(--card); color: var(--fg); text-decoration: none; }
nav a:hover { border-color: #3b6fb6; }
h2 { font-size: 21px; margin: 36px 0 4px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
h2 .family { color: var(--muted); font-weight: normal; font-size: 15px; }
h3 { font-size: 15px; margin: 0 0 8px; }
.meta { color: var(--muted); margin: 0 0 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(540px, 1fr)); gap: 14px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px;
        margin: 0 0 14px; box-shadow: 0 1px 2px rgba(31,35,40,.04); }
figure.card { margin: 0 0 14px; }
.charts { margin: 0 0 14px; }
.charts figure.card { margin: 0; }
figcaption { font-weight: 600; margin-bottom: 6px; }
figcaption .sub { font-weight: normal; color: var(--muted); font-size: 12.5px; margin-left: 6px; }
svg.chart { display: block; width: 100%; height: auto; max-width: 100%; }
svg.chart text { font-family: inherit; font-size: 12px; fill: var(--fg); }
svg.chart .tick { fill: var(--muted); font-size: 11px; font-variant-numeric: tabular-nums; }
svg.chart .axis-label { fill: var(--muted); font-size: 12px; }
svg.chart .bar-label { font-size: 12px; }
svg.chart .value { font-variant-numeric: tabular-nums; }
svg.chart .speedup { font-weight: 700; }
svg.chart .status { fill: var(--bad); font-weight: 600; }
svg.chart .absent { fill: #6b7280; font-style: italic; }
svg.chart .grid { stroke: #eaeef2; stroke-width: 1; }
svg.chart .axis { stroke: #8c959f; stroke-width: 1; fill: none; }
svg.chart .epoch { stroke: #afb8c1; stroke-width: 1; stroke-dasharray: 2 3; }
svg.chart .whisker { stroke: #24292f; stroke-width: 1.2; fill: none; }
svg.chart .marker { stroke: #24292f; stroke-width: 2.5; }
svg.chart .series { fill: none; stroke-width: 1.8; stroke-linejoin: round; stroke-linecap: round; }
svg.chart .bar:hover rect { filter: brightness(0.92); }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 12.5px; margin: 0 0 6px; }
.legend .key { display: inline-flex; align-items: center; gap: 6px; }
.legend .swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; }
.table-wrap { overflow-x: auto; }
.table-wrap + .table-wrap { margin-top: 16px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 0 0 6px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eaeef2; white-space: nowrap; text-align: left; }
th { white-space: normal; }  /* long headers wrap, so a wide table fits 1400 px without scrolling */
th { color: var(--muted); font-weight: 600; border-bottom-color: var(--line); }
.num { text-align: right; }
tr:nth-child(even) td { background: #fafbfc; }
.status-cell { color: var(--bad); font-weight: 600; white-space: normal; }
.note { color: var(--muted); margin: 4px 0; }
.env dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
.env dt { color: var(--muted); }
.env dd { margin: 0; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
svg.chart .band { fill-opacity: 0.14; stroke: none; }
svg.chart .trend-point { stroke: #fff; stroke-width: 1; }
svg.chart .cross { stroke: var(--bad); stroke-width: 2; fill: none; }
svg.chart .tick.date { font-size: 10px; }
ul.notes { color: var(--muted); margin: 4px 0 14px; padding-left: 20px; }
)CSS";

// One line per environment: files from one machine and build share a line (named as given).
std::string env_lines(const std::vector<std::pair<const Report*, std::string>>& files) {
  std::vector<std::pair<std::string, std::vector<std::string>>> envs;
  for (const auto& [report, name] : files) {
    const std::string e = env_summary(*report);
    if (e.empty()) continue;
    auto it = std::find_if(envs.begin(), envs.end(), [&](const auto& p) { return p.first == e; });
    if (it == envs.end()) it = envs.insert(envs.end(), {e, {}});
    it->second.push_back(name);
  }
  std::string h;
  for (const auto& [e, names] : envs) {
    h += "<p class=\"env-line\"><b>" + esc(fmt::format("{}", fmt::join(names, ", "))) +
         "</b>: " + esc(e) + "</p>\n";
  }
  return h;
}

// The page around the sections: head with the styles, and the footer.
std::string page_open(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         esc(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<main>\n";
}

std::string page_close(const char* hint) {
  return fmt::format("<footer>Written by mpbench {} ({}). {}</footer>\n</main>\n</body>\n</html>\n",
                     esc(MPBENCH_VERSION), esc(build_git_describe()), hint);
}

}  // namespace

std::vector<std::pair<double, double>> downsample(const std::vector<double>& ys, size_t max_points,
                                                  bool use_min, double x_per_entry) {
  Points out;
  const size_t n = ys.size();
  if (n == 0 || max_points == 0) return out;
  const size_t bucket = (n + max_points - 1) / max_points;
  for (size_t start = 0; start < n; start += bucket) {
    const size_t end = std::min(n, start + bucket);
    double acc = use_min ? INFINITY : 0;
    size_t finite = 0;
    for (size_t i = start; i < end; ++i) {
      if (!std::isfinite(ys[i])) continue;
      acc = use_min ? std::min(acc, ys[i]) : acc + ys[i];
      ++finite;
    }
    const double x =
        x_per_entry * (bucket == 1 ? double(start) : (double(start) + double(end - 1)) / 2);
    const double y = finite == 0 ? NAN : use_min ? acc : acc / double(finite);
    out.emplace_back(x, y);
  }
  return out;
}

namespace {

std::string ratio_text(double v) {
  return std::isfinite(v) ? fmt::format("{:.2f}x", v) : "—";
}

std::string text_table_html(const TextTable& t, const std::string& caption) {
  std::string s =
      "<div class=\"table-wrap\"><table>\n<caption>" + esc(caption) + "</caption>\n<tr>";
  for (size_t c = 0; c < t.head.size(); ++c)
    s += fmt::format("<th{}>{}</th>", c < t.right.size() && t.right[c] ? " class=\"num\"" : "",
                     esc(t.head[c]));
  s += "</tr>\n";
  for (const auto& row : t.rows) {
    s += "<tr>";
    for (size_t c = 0; c < row.size(); ++c)
      s += fmt::format("<td{}>{}</td>", c < t.right.size() && t.right[c] ? " class=\"num\"" : "",
                       esc(row[c]));
    s += "</tr>\n";
  }
  return s + "</table></div>\n";
}

// A mode's answer: its largest batch, "none fits", or "unsupported" (no search there).
std::string maxbatch_text(const MaxBatchInput::Entry& e) {
  if (e.status == "unsupported") return "unsupported";
  if (e.max_batch == 0 && e.at_spec_limit) return "none tried";  // as maxbatch's table says
  return e.max_batch > 0 ? group_thousands(double(e.max_batch)) : "none fits";
}

// The mode the ratios of every model in m are against, for a header; "baseline" where they
// differ.
std::string maxbatch_baseline(const MaxBatchInput& m) {
  for (const MaxBatchInput::Entry& e : m.entries)
    if (e.ratio_baseline != m.entries.front().ratio_baseline) return "baseline";
  return m.entries.empty() ? "fp32" : m.entries.front().ratio_baseline;
}

// A bar per mode of each model's largest batch, labelled with its ratio to the baseline mode.
std::string maxbatch_chart(const MaxBatchInput& m) {
  std::vector<Bar> bars;
  for (const MaxBatchInput::Entry& e : m.entries) {
    Bar b;
    b.label = e.model + " · " + e.precision;
    b.color = "#3b6fb6";
    b.value = double(e.max_batch);
    b.value_text = maxbatch_text(e);
    if (std::isfinite(e.vs_fp32) && e.precision != e.ratio_baseline) b.note = ratio_text(e.vs_fp32);
    // No search ran there: its status where the bar would be, as for a run without a value.
    b.drawn = e.status != "unsupported";
    if (!b.drawn) {
      b.note = b.value_text;
      b.note_is_status = true;
    }
    b.tooltip = e.status == "unsupported"
                    ? fmt::format("{} {}: unsupported on this device", e.model, e.precision)
                    : fmt::format("{} {}: largest batch {}{}", e.model, e.precision, e.max_batch,
                                  e.at_spec_limit ? " (the search's upper limit)" : "");
    // amp_fp8's multiple past the largest batch a spec takes: nothing was probed.
    if (e.max_batch == 0 && e.at_spec_limit)
      b.tooltip =
          fmt::format("{} {}: no batch it searches is one a spec takes", e.model, e.precision);
    bars.push_back(std::move(b));
  }
  return bar_chart("chart-maxbatch", bars,
                   Axis{"largest batch", [](double v) { return group_thousands(v); }, 1});
}

}  // namespace

TextTable explain_table(const ExplainInput& e) {
  TextTable t;
  t.head = {"modes", "step ms", "measured", "bound", "largest share", "flags"};
  t.right = {false, true, true, true, false, false};
  for (const ExplainInput::Pair& p : e.comparisons) {
    // The kind of op that took the most of the baseline's step: where the time went.
    const ExplainInput::Kind* top = nullptr;
    for (const ExplainInput::Kind& k : p.by_kind)
      if (!top || k.from_ms > top->from_ms) top = &k;
    t.rows.push_back(
        {p.to + " vs " + p.from,
         std::isfinite(p.from_step_ms) && std::isfinite(p.to_step_ms)
             ? fmt::format("{} → {}", format_ms(p.from_step_ms), format_ms(p.to_step_ms))
             : "—",
         ratio_text(p.measured_speedup), ratio_text(p.bound),
         top && p.from_step_ms > 0
             ? fmt::format("{} {:.0f}% ({})", top->kind, 100 * top->from_ms / p.from_step_ms,
                           top->to_ms > 0 ? ratio_text(top->from_ms / top->to_ms) : "—")
             : "—",
         fmt::format("{}", fmt::join(p.flags, ", "))});
  }
  return t;
}

TextTable maxbatch_table(const MaxBatchInput& m) {
  TextTable t;
  t.head = {"model", "mode", "largest batch", "vs " + maxbatch_baseline(m), "training memory"};
  t.right = {false, false, true, true, true};
  for (const MaxBatchInput::Entry& e : m.entries)
    t.rows.push_back(
        {e.model, e.precision, maxbatch_text(e) + (e.max_batch > 0 && e.at_spec_limit ? "+" : ""),
         ratio_text(e.vs_fp32),
         std::isfinite(e.training_bytes) ? format_bytes(size_t(e.training_bytes)) : "—"});
  return t;
}

std::vector<std::string> short_file_names(const std::vector<std::string>& paths) {
  // Each path's components, the file first, then its folders outwards.
  std::vector<std::vector<std::string>> parts;
  size_t deepest = 0;
  for (const std::string& p : paths) {
    std::vector<std::string> c;
    for (const std::filesystem::path& e : std::filesystem::path(p))
      if (!e.empty() && e != "." && e != e.root_directory()) c.push_back(e.string());
    std::reverse(c.begin(), c.end());
    if (!c.empty()) c[0] = std::filesystem::path(c[0]).stem().string();
    deepest = std::max(deepest, c.size());
    parts.push_back(std::move(c));
  }
  // The last k components ("h100/run"), all of them for a path with fewer.
  auto suffix = [&](size_t i, size_t k) {
    std::string s;
    for (size_t n = std::min(k, parts[i].size()); n-- > 0;) s += parts[i][n] + (n ? "/" : "");
    return s;
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string name = paths[i];  // when no suffix tells it apart (x.json beside x.csv)
    for (size_t k = 1; k <= deepest; ++k) {
      const std::string s = suffix(i, k);
      bool unique = true;
      for (size_t j = 0; j < paths.size() && unique; ++j) unique = j == i || suffix(j, k) != s;
      if (unique) {
        name = s;
        break;
      }
    }
    out.push_back(std::move(name));
  }
  return out;
}

std::string format_html(const std::vector<ReportInput>& inputs,
                        const std::vector<ProfileInput>& profiles,
                        const std::vector<ExplainInput>& explains,
                        const std::vector<MaxBatchInput>& maxbatches) {
  const std::vector<std::string> names = short_file_names(paths_of(inputs));
  const std::vector<ModelSection> sections = build_sections(inputs, names);
  for (const ProfileInput& pr : profiles) {
    if (std::none_of(sections.begin(), sections.end(),
                     [&](const ModelSection& sec) { return sec.model == pr.model; }))
      throw_bad_input(fmt::format("{}: profiles model '{}', which has no runs in the result files",
                                  pr.path, pr.model));
  }
  std::string title = "mpbench report";
  if (!sections.empty()) {
    title += ":";
    for (size_t i = 0; i < sections.size(); ++i) title += (i ? ", " : " ") + sections[i].model;
  }
  std::string h = page_open(title);
  h += "<header><h1>mpbench report</h1>\n";
  h += fmt::format("<p>{} result file{}:", inputs.size(), inputs.size() == 1 ? "" : "s");
  for (size_t i = 0; i < inputs.size(); ++i) h += (i ? ", " : " ") + esc(inputs[i].path);
  auto list = [&](const char* kind, const auto& files) {
    if (files.empty()) return;
    h += fmt::format("; {} {} file{}:", files.size(), kind, files.size() == 1 ? "" : "s");
    for (size_t i = 0; i < files.size(); ++i) h += (i ? ", " : " ") + esc(files[i].path);
  };
  list("profile", profiles);
  list("explain", explains);
  list("maxbatch", maxbatches);
  h += "</p>\n";
  {
    std::vector<std::pair<const Report*, std::string>> named;
    for (size_t i = 0; i < inputs.size(); ++i) named.emplace_back(&inputs[i].report, names[i]);
    h += env_lines(named);
  }
  h += "<nav>";
  for (const ModelSection& sec : sections)
    h += "<a href=\"#" + sec.id + "\">" + esc(sec.model) + "</a>";
  h += "<a href=\"#environment\">environment</a></nav></header>\n";
  if (sections.empty() && explains.empty() && maxbatches.empty())
    h += "<p class=\"note\">These files hold no runs.</p>\n";
  for (const ReportInput& in : inputs)
    if (const auto note = device_note(in.report)) {
      h += "<p class=\"note\">note: " + esc(*note) + "</p>\n";
      break;
    }
  // scripts/pytorch_reference.py on the CPU has no allocator to ask: its memory is the sum of
  // the parameter-sized categories, without activations.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (json_check::text(inputs[i].report.tool, "name") == "pytorch" &&
        std::any_of(inputs[i].report.runs.begin(), inputs[i].report.runs.end(),
                    [](const RunResult& r) { return r.device == "cpu"; }))
      h += "<p class=\"note\">note: " + esc(names[i]) +
           " (PyTorch on the CPU): its memory is weights, gradients and optimizer state only; "
           "PyTorch keeps no allocator statistics on the CPU, so its activations are not "
           "counted and its memory bars are lower than mpbench's for that reason</p>\n";

  for (const ModelSection& sec : sections) {
    const RunResult& first = *sec.series.front().run;
    h += "<section class=\"model\">\n";
    h += fmt::format(
        "<h2 id=\"{}\">{}{}</h2>\n", sec.id, esc(sec.model),
        first.family.empty() ? "" : " <span class=\"family\">" + esc(first.family) + "</span>");
    std::set<std::string> devices;
    std::set<int64_t> batches;
    for (const Series& s : sec.series) {
      devices.insert(s.run->device);
      batches.insert(s.run->batch_size);
    }
    std::vector<std::string> dev(devices.begin(), devices.end());
    std::vector<std::string> bat;
    for (int64_t b : batches) bat.push_back(std::to_string(b));
    // Every run, each seed and repetition of a mode counted (a series may stand for several).
    size_t runs = 0;
    for (const auto& [input, group] : sec.groups) runs += group.runs.size();
    h += fmt::format("<p class=\"meta\">{} run{} · device {} · batch {}</p>\n", runs,
                     runs == 1 ? "" : "s", esc(fmt::format("{}", fmt::join(dev, ", "))),
                     fmt::join(bat, ", "));

    h += "<div class=\"charts\">\n";
    const std::string base = esc(sec.baseline());
    // Of repetitions, the bold speedup is the tables' (shown_speedup), which two bars' medians
    // need not give: the caption says so, or a bar 10% higher labelled 0.97x looks wrong.
    const bool by_rounds = std::any_of(sec.series.begin(), sec.series.end(),
                                       [](const Series& s) { return s.speedup_ci.has_value(); });
    const std::string speedup = fmt::format(
        "bold: speedup over {}{}", base,
        by_rounds ? " (of repetitions: the median of the rounds' own ratios, not the bars')" : "");
    h += figure("Epoch time <span class=\"sub\">lower is better; " + speedup + "</span>",
                bars_legend(sec.series) + time_chart(sec.series));
    h += figure("Throughput <span class=\"sub\">higher is better; " + speedup + "</span>",
                bars_legend(sec.series) + throughput_chart(sec.series));
    h += figure(fmt::format("Peak memory <span class=\"sub\">bold: ratio to {}</span>", base),
                bars_legend(sec.series) + memory_chart(sec.series));
    h += figure("Memory by category <span class=\"sub\">each category's own peak</span>",
                memory_breakdown_chart(sec.series));
    if (std::any_of(sec.series.begin(), sec.series.end(),
                    [](const Series& s) { return s.seeds.has_value(); }))
      h += figure(fmt::format("Accuracy over seeds <span class=\"sub\">bold: difference from {} in "
                              "points, 95% interval</span>",
                              base),
                  bars_legend(sec.series) + accuracy_chart(sec.series));
    h += data_parallel_chart(sec.series);
    std::vector<const ProfileInput*> mine;
    for (const ProfileInput& pr : profiles)
      if (pr.model == sec.model) mine.push_back(&pr);
    if (!mine.empty())
      h += figure(
          "Where a step's time goes <span class=\"sub\">mpbench profile: each op's device time "
          "per step, by kind</span>",
          profile_chart(mine));
    h += "</div>\n";
    h += speedup_by_batch_chart(sec.series, sec.baseline());
    h += loss_charts(sec.series);
    h += fp8_scaling_charts(sec.series);
    h += "<div class=\"card\">\n";
    for (const auto& [i, group] : sec.groups) {
      const Table t = build_table(group, inputs[i].report);
      h += table_html(t, names[i] + " · " + tool_name(inputs[i].report) + " · " + t.title);
      // The console's notes travel with the table: noisy runs, FP8 clipping (run_flags).
      const std::vector<std::string> notes = table_notes(group, inputs[i].report);
      if (!notes.empty()) {
        h += "<ul class=\"notes\">";
        for (const std::string& n : notes) h += "<li>note: " + esc(n) + "</li>";
        h += "</ul>\n";
      }
    }
    h += "</div>\n</section>\n";
  }

  for (const ExplainInput& e : explains) {
    h += "<section class=\"model\">\n<h2>Why a mode helped: " + esc(e.model) +
         " <span class=\"family\">mpbench explain</span></h2>\n";
    h += fmt::format("<p class=\"meta\">{} · device {} · against {}{}</p>\n", esc(e.path),
                     esc(e.device), esc(e.baseline),
                     e.emulated ? " · times of the CPU emulation, not of a GPU" : "");
    h += "<div class=\"card\">\n" +
         text_table_html(explain_table(e),
                         "measured speedup per step, the bound the op mix allows, and the kind of "
                         "op that took the largest share of the baseline's step (its own "
                         "speedup)") +
         "</div>\n</section>\n";
  }
  for (const MaxBatchInput& m : maxbatches) {
    h += "<section class=\"model\">\n<h2>Largest batch that fits <span "
         "class=\"family\">mpbench maxbatch</span></h2>\n";
    h += fmt::format(
        "<p class=\"meta\">{} · device {} · memory {}</p>\n", esc(m.path), esc(m.device),
        std::isfinite(m.memory_limit_bytes) ? format_bytes(size_t(m.memory_limit_bytes))
                                            : "the device's free memory");
    h += "<div class=\"charts\">\n" +
         figure("Largest batch <span class=\"sub\">bold: ratio to " + esc(maxbatch_baseline(m)) +
                    "</span>",
                maxbatch_chart(m)) +
         "</div>\n<div class=\"card\">\n" +
         text_table_html(maxbatch_table(m), "the largest batch each mode trains in the memory") +
         "</div>\n</section>\n";
  }

  h += "<section>\n<h2 id=\"environment\">Environment</h2>\n<div class=\"charts\">\n";
  for (const ReportInput& in : inputs) h += env_html(in);
  h += "</div>\n</section>\n";
  h += page_close("Hover over bars and curves for details.");
  return h;
}

// ---------------------------------------------------------------------------------------------
// report --history: one point per result file, in the order of their times

namespace {

// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM) as seconds since 1970 (UTC). A time without
// a zone is refused: it has no one instant.
std::optional<double> parse_time_utc(const std::string& s) {
  size_t p = 0;
  auto num = [&](size_t n, int& out) {
    if (p + n > s.size()) return false;
    out = 0;
    for (size_t k = 0; k < n; ++k, ++p) {
      if (s[p] < '0' || s[p] > '9') return false;
      out = out * 10 + (s[p] - '0');
    }
    return true;
  };
  auto lit = [&](char c) { return p < s.size() && s[p++] == c; };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!(num(4, y) && lit('-') && num(2, mo) && lit('-') && num(2, d) && lit('T') && num(2, h) &&
        lit(':') && num(2, mi) && lit(':') && num(2, sec)))
    return std::nullopt;
  double frac = 0;
  if (p < s.size() && s[p] == '.') {
    const size_t start = ++p;
    for (double unit = 0.1; p < s.size() && s[p] >= '0' && s[p] <= '9'; ++p, unit /= 10)
      frac += (s[p] - '0') * unit;
    if (p == start) return std::nullopt;
  }
  int offset_s = 0;
  if (p + 1 == s.size() && s[p] == 'Z') {
    // UTC, as mpbench writes it
  } else if (p + 6 == s.size() && (s[p] == '+' || s[p] == '-')) {
    const int sign = s[p++] == '+' ? 1 : -1;
    int oh = 0, om = 0;
    if (!(num(2, oh) && lit(':') && num(2, om)) || oh > 23 || om > 59) return std::nullopt;
    offset_s = sign * (oh * 60 + om) * 60;
  } else {
    return std::nullopt;
  }
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] + (mo == 2 && leap ? 1 : 0) || h > 23 ||
      mi > 59 || sec > 60)
    return std::nullopt;
  return double(days_from_civil(y, mo, d)) * 86400 + h * 3600 + mi * 60 + sec + frac - offset_s;
}

// `t` (seconds since 1970) as UTC in strftime's `format`.
std::string format_utc(double t, const char* format) {
  const std::time_t whole = static_cast<std::time_t>(std::floor(t));
  std::tm utc{};
  if (!::gmtime_r(&whole, &utc)) return "";
  char buf[64] = {};
  std::strftime(buf, sizeof buf, format, &utc);
  return buf;
}

bool is_hex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// One series of the trend: a model and mode (with its tool, device, batch and graphs) per commit.
struct TrendKey {
  std::string model, tool, precision, device;
  int64_t batch = 0;  // per rank
  bool graphs = false;
  int ranks = 1;  // a data-parallel run's: another rank count is another series, as compare keys it
  bool operator==(const TrendKey& o) const {
    return std::tie(model, tool, precision, device, batch, graphs, ranks) ==
           std::tie(o.model, o.tool, o.precision, o.device, o.batch, o.graphs, o.ranks);
  }
};

// One commit of one series.
struct TrendValue {
  std::vector<const RunResult*> runs;  // empty: that commit's file did not run it
  size_t ok_runs = 0;
  double median = NAN, lo = NAN, hi = NAN;  // epoch time (ms); NaN when no run finished
  bool between_runs = false;                // lo..hi: between the runs, else over one's epochs
  double memory = NAN;                      // training peak (bytes), the largest of the runs
  std::string status;                       // the first run that did not finish: "oom: why"
  std::string status_name;                  // "oom"
  // Finished runs whose threads waited for CPUs that something else held (HostLoad::busy), and
  // the worst of them.
  size_t busy_runs = 0;
  const HostLoad* worst = nullptr;
  // "measured on a busy machine (...)" when some were; empty otherwise.
  std::string busy_text() const {
    if (busy_runs == 0) return "";
    return fmt::format("measured on a busy machine ({}{}{})", ok_runs > 1 ? "at worst, " : "",
                       worst->describe(),
                       ok_runs > 1 ? fmt::format("; {} of {} runs", busy_runs, ok_runs) : "");
  }
};

struct TrendSeries {
  TrendKey key;
  std::string label, sub, id, color;
  std::vector<TrendValue> at;  // one per entry
};

struct TrendModel {
  std::string model, family, id;
  std::vector<TrendSeries> series;
  // "The spec changed at 2222222 (2026-01-02 10:00 UTC): model.hidden[0]: 32 -> 512: ...": a
  // commit whose file trained the model from another spec than the file before it that has the
  // model did.
  std::vector<std::string> spec_changes;
};

// A file's runs of one series as one point: several runs (`run --repeat`, `run --seeds`) give the
// median of their median epoch times and the range of those medians; one run gives its median
// and the range of its epochs. Only runs that finished with an epoch time count.
void summarise(TrendValue& v) {
  if (v.runs.empty()) return;
  std::vector<const RunResult*> ok;
  const RunResult* failed = nullptr;
  for (const RunResult* r : v.runs) {
    const double m = r->epoch_time_ms.median;
    if (r->status == RunStatus::Ok && std::isfinite(m) && m > 0) {
      ok.push_back(r);
    } else if (!failed) {
      failed = r;
    }
  }
  v.ok_runs = ok.size();
  if (failed) {
    const bool ran = failed->status == RunStatus::Ok;
    v.status_name = ran ? "no time" : run_status_name(failed->status);
    v.status = ran ? "finished without an epoch time" : status_text(*failed);
  }
  if (ok.empty()) return;
  double memory = 0;
  for (const RunResult* r : ok) memory = std::max(memory, double(r->memory.training_peak));
  v.busy_runs = static_cast<size_t>(
      std::count_if(ok.begin(), ok.end(), [](const RunResult* r) { return ran_busy(*r); }));
  v.worst = worst_busy_load(ok);
  v.memory = memory;
  if (ok.size() >= 2) {
    std::vector<double> medians;
    for (const RunResult* r : ok) medians.push_back(r->epoch_time_ms.median);
    const TimeStats st = compute_time_stats(medians);
    v.median = st.median;
    v.lo = st.min;
    v.hi = st.max;
    v.between_runs = true;
  } else {
    const TimeStats& t = ok.front()->epoch_time_ms;
    v.median = t.median;
    // One epoch has no spread to show ("0.729–0.729" was drawn as one).
    if (ok.front()->epochs.size() >= 2 && std::isfinite(t.min) && std::isfinite(t.max) &&
        t.min <= t.max) {
      v.lo = t.min;
      v.hi = t.max;
    }
  }
}

std::string at_commit(const HistoryEntry& e) {
  return e.label + " (" + format_utc(e.unix_time, "%Y-%m-%d %H:%M UTC") + ")";
}

std::vector<TrendModel> build_trends(const std::vector<HistoryEntry>& entries) {
  std::vector<TrendModel> models;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Report& report = entries[i].input.report;
    for (const RunResult& r : report.runs) {
      const TrendKey k{r.model,      tool_name(report), r.precision, r.device,
                       r.batch_size, r.cuda_graphs,     run_ranks(r)};
      auto m = std::find_if(models.begin(), models.end(),
                            [&](const TrendModel& x) { return x.model == r.model; });
      if (m == models.end()) m = models.insert(models.end(), TrendModel{r.model, "", "", {}, {}});
      if (m->family.empty()) m->family = r.family;
      auto s = std::find_if(m->series.begin(), m->series.end(),
                            [&](const TrendSeries& x) { return x.key == k; });
      if (s == m->series.end()) {
        s = m->series.insert(m->series.end(), TrendSeries{k, "", "", "", "", {}});
        s->at.resize(entries.size());
      }
      s->at[i].runs.push_back(&r);
    }
  }
  for (TrendModel& m : models) {
    const nlohmann::json* before = nullptr;
    for (size_t i = 0; i < entries.size(); ++i) {
      const Report& report = entries[i].input.report;
      const auto r = std::find_if(report.runs.begin(), report.runs.end(),
                                  [&](const RunResult& x) { return x.model == m.model; });
      const nlohmann::json* spec = r == report.runs.end() ? nullptr : spec_of(report, *r);
      if (!spec) continue;
      if (before)
        if (const std::string d = first_spec_difference(*before, *spec); !d.empty())
          m.spec_changes.push_back(fmt::format(
              "The spec changed at {}: {}: the points before and after it are of different "
              "models.",
              at_commit(entries[i]), d));
      before = spec;
    }
  }
  std::set<std::string> used;
  auto unique_id = [&](std::string id) {
    const std::string base = id;
    for (int k = 2; used.count(id); ++k) id = base + "-" + std::to_string(k);
    used.insert(id);
    return id;
  };
  for (TrendModel& m : models) {
    m.id = unique_id("model-" + slug(m.model));
    for (TrendSeries& s : m.series) {
      const TrendKey& k = s.key;
      const bool other_tool = k.tool != "mpbench";
      s.label = (other_tool ? k.tool + " " : "") + k.precision + (k.graphs ? " +graphs" : "");
      s.sub = fmt::format("{} · batch {}{}", k.device, k.batch,
                          k.ranks > 1 ? fmt::format(" per rank, {} ranks", k.ranks) : "");
      s.id = unique_id(fmt::format("trend-{}-{}{}-{}-b{}{}{}", slug(m.model),
                                   other_tool ? slug(k.tool) + "-" : "", slug(k.precision),
                                   slug(k.device), k.batch, k.graphs ? "-graphs" : "",
                                   k.ranks > 1 ? fmt::format("-r{}", k.ranks) : ""));
      s.color = shade(precision_color(k.precision), other_tool || k.graphs ? 1 : 0);
      for (TrendValue& v : s.at) summarise(v);
    }
  }
  return models;
}

std::string time_tooltip(const TrendSeries& s, const TrendValue& v, const HistoryEntry& e) {
  std::string t = fmt::format("{} · {} at {}: ", s.label, s.sub, at_commit(e));
  if (!std::isfinite(v.median)) return t + v.status;
  t += "median epoch " + format_ms_unit(v.median);
  if (std::isfinite(v.lo) && std::isfinite(v.hi)) {
    t += v.between_runs ? fmt::format(", min–max of the medians of {} runs ", v.ok_runs)
                        : fmt::format(", min–max over its {} epochs ",
                                      v.ok_runs ? v.runs.front()->epochs.size() : 0);
    t += format_ms(v.lo) + "–" + format_ms_unit(v.hi);
  }
  if (v.ok_runs < v.runs.size())
    t += fmt::format("; {} of {} runs finished ({})", v.ok_runs, v.runs.size(), v.status);
  if (v.busy_runs) t += "; " + v.busy_text() + ": unreliable";
  return t;
}

std::string memory_tooltip(const TrendSeries& s, const TrendValue& v, const HistoryEntry& e) {
  std::string t = fmt::format("{} · {} at {}: ", s.label, s.sub, at_commit(e));
  if (!std::isfinite(v.memory)) return t + v.status;
  t += "training memory " + format_bytes(static_cast<size_t>(v.memory));
  if (v.ok_runs > 1) t += fmt::format(" (the largest of {} runs)", v.ok_runs);
  return t;
}

std::string trend_figure(const std::string& id, const std::string& caption,
                         const std::string& body) {
  return fmt::format("<figure class=\"card\" id=\"{}\"><figcaption>{}</figcaption>\n{}</figure>\n",
                     id, caption, body);
}

// What the charts cannot say in a point: runs that did not finish, commits that did not run it.
std::vector<std::string> trend_notes(const TrendSeries& s,
                                     const std::vector<HistoryEntry>& entries) {
  std::vector<std::string> notes, absent;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TrendValue& v = s.at[i];
    if (v.runs.empty()) {
      absent.push_back(entries[i].label);
    } else if (v.ok_runs == 0) {
      notes.push_back(fmt::format("{} · {} at {}: {} (a gap)", s.label, s.sub,
                                  at_commit(entries[i]), v.status));
    } else if (v.ok_runs < v.runs.size()) {
      notes.push_back(fmt::format("{} · {} at {}: {} of {} runs finished, the point is theirs; {}",
                                  s.label, s.sub, at_commit(entries[i]), v.ok_runs, v.runs.size(),
                                  v.status));
    }
    if (v.busy_runs)
      notes.push_back(fmt::format("{} · {} at {}: {}: its time, a hollow point, is unreliable",
                                  s.label, s.sub, at_commit(entries[i]), v.busy_text()));
  }
  if (!absent.empty())
    notes.push_back(fmt::format("{} · {}: not in the results of {} (a gap)", s.label, s.sub,
                                fmt::join(absent, ", ")));
  return notes;
}

}  // namespace

std::vector<HistoryEntry> order_history(std::vector<ReportInput> inputs) {
  const std::vector<std::string> names = short_file_names(paths_of(inputs));
  std::vector<HistoryEntry> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ReportInput& in = inputs[i];
    const json& prov = in.report.provenance;
    if (!prov.is_object())
      throw_bad_input(fmt::format(
          "report --history: {} has no provenance (written by an mpbench before it recorded "
          "one), so its commit and time are unknown; --history orders files by "
          "provenance.time_utc",
          in.path));
    HistoryEntry e;
    e.time_utc = json_check::text(prov, "time_utc");
    const std::optional<double> when = parse_time_utc(e.time_utc);
    if (!when)
      throw_bad_input(fmt::format(
          "report --history: {}: provenance.time_utc: expected an ISO 8601 time with a zone "
          "(2025-01-31T12:00:00Z), got '{}'",
          in.path, e.time_utc));
    e.unix_time = *when;
    e.date = format_utc(*when, "%Y-%m-%d");
    if (prov.contains("commit") && prov["commit"].is_string())
      e.commit = prov["commit"].get<std::string>();
    e.label = e.commit.empty()   ? names[i]
              : is_hex(e.commit) ? e.commit.substr(0, 7)
                                 : shorten(e.commit, 12);
    e.input = std::move(in);
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(), [](const HistoryEntry& a, const HistoryEntry& b) {
    return a.unix_time < b.unix_time;
  });
  return out;
}

std::string format_history_html(const std::vector<HistoryEntry>& entries) {
  if (entries.empty()) throw_bad_input("report --history: give at least one result JSON file");
  const std::vector<TrendModel> models = build_trends(entries);
  std::string title = "mpbench history";
  for (size_t i = 0; i < models.size(); ++i) title += (i ? ", " : ": ") + models[i].model;
  std::string h = page_open(title);
  h += "<header><h1>mpbench history</h1>\n";
  // The files are listed in the commits table at the end; the header says the span.
  const HistoryEntry &oldest = entries.front(), &newest = entries.back();
  h += fmt::format("<p>{} result file{} in the order of their provenance.time_utc, from {} to {}",
                   entries.size(), entries.size() == 1 ? "" : "s", esc(at_commit(oldest)),
                   esc(at_commit(newest)));
  h += ".</p>\n";
  {
    std::vector<std::pair<const Report*, std::string>> named;
    for (const HistoryEntry& e : entries) named.emplace_back(&e.input.report, e.label);
    const bool one_env = std::all_of(named.begin(), named.end(), [&](const auto& n) {
      return env_summary(*n.first) == env_summary(*named.front().first);
    });
    if (one_env && named.size() > 1) named = {{named.front().first, "all files"}};
    h += env_lines(named);
  }
  h += "<nav>";
  for (const TrendModel& m : models) h += "<a href=\"#" + m.id + "\">" + esc(m.model) + "</a>";
  h += "<a href=\"#commits\">commits</a></nav></header>\n";
  {
    // A commit measured twice is two points: the rerun shows the noise between runs.
    std::map<std::string, std::vector<const HistoryEntry*>> by_commit;
    for (const HistoryEntry& e : entries)
      if (!e.commit.empty()) by_commit[e.commit].push_back(&e);
    for (const auto& [commit, of] : by_commit) {
      if (of.size() < 2) continue;
      std::vector<std::string> paths;
      for (const HistoryEntry* e : of) paths.push_back(e->input.path);
      h += "<p class=\"note\">" +
           esc(fmt::format("Commit {} has {} result files ({}): each is its own point.",
                           of.front()->label, paths.size(), fmt::join(paths, ", "))) +
           "</p>\n";
    }
  }
  if (models.empty()) h += "<p class=\"note\">These files hold no runs.</p>\n";

  std::vector<std::pair<std::string, std::string>> x_labels;
  for (const HistoryEntry& e : entries) x_labels.emplace_back(e.label, e.date);
  for (const TrendModel& m : models) {
    h += "<section class=\"model\">\n";
    h +=
        fmt::format("<h2 id=\"{}\">{}{}</h2>\n", m.id, esc(m.model),
                    m.family.empty() ? "" : " <span class=\"family\">" + esc(m.family) + "</span>");
    h += fmt::format(
        "<p class=\"meta\">{} series · {} commits · epoch time: the median, whiskers and band "
        "min–max between the runs of a file with repetitions or seeds, else over the run's "
        "epochs · memory: the training peak (every category but the dataset copy)</p>\n",
        m.series.size(), entries.size());
    double max_memory = 0;
    for (const TrendSeries& s : m.series)
      for (const TrendValue& v : s.at)
        if (std::isfinite(v.memory)) max_memory = std::max(max_memory, v.memory);
    const ByteUnit u = byte_unit(max_memory);
    const Axis time_axis{"median epoch time (ms)", [](double v) { return format_general(v); }, 1};
    const Axis memory_axis{std::string("training memory (") + u.name + ")",
                           [](double v) { return format_general(v); }, u.scale};
    for (const std::string& c : m.spec_changes) h += "<p class=\"note\">" + esc(c) + "</p>\n";
    h += "<div class=\"charts\">\n";
    std::vector<std::string> notes;
    for (const TrendSeries& s : m.series) {
      std::vector<TrendPoint> time_pts, memory_pts;
      for (size_t i = 0; i < entries.size(); ++i) {
        const TrendValue& v = s.at[i];
        TrendPoint t, mem;
        if (!v.runs.empty()) {
          t.value = v.median;
          t.lo = v.lo;
          t.hi = v.hi;
          t.busy = v.busy_runs > 0;
          mem.value = v.memory;
          if (!std::isfinite(v.median)) t.status = mem.status = v.status_name;
          t.tooltip = time_tooltip(s, v, entries[i]);
          mem.tooltip = memory_tooltip(s, v, entries[i]);
        }
        time_pts.push_back(std::move(t));
        memory_pts.push_back(std::move(mem));
      }
      const std::string name = esc(s.label) + " <span class=\"sub\">" + esc(s.sub) + "</span>";
      h += trend_figure(s.id + "-time", name + " <span class=\"sub\">epoch time</span>",
                        trend_chart("chart-history-time", s.label + " epoch time over commits",
                                    time_pts, x_labels, s.color, time_axis));
      h += trend_figure(
          s.id + "-memory", name + " <span class=\"sub\">training memory</span>",
          trend_chart("chart-history-memory", s.label + " training memory over commits", memory_pts,
                      x_labels, s.color, memory_axis));
      for (std::string& n : trend_notes(s, entries)) notes.push_back(std::move(n));
    }
    h += "</div>\n";
    if (!notes.empty()) {
      h += "<ul class=\"notes\">";
      for (const std::string& n : notes) h += "<li>" + esc(n) + "</li>";
      h += "</ul>\n";
    }
    h += "</section>\n";
  }

  h += "<section>\n<h2 id=\"commits\">Commits</h2>\n<div class=\"card\"><div "
       "class=\"table-wrap\"><table>\n<tr><th class=\"num\">#</th><th>commit</th><th>time "
       "(UTC)</th><th>host</th><th>tool</th><th>file</th></tr>\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const HistoryEntry& e = entries[i];
    const Report& r = e.input.report;
    std::string tool = tool_name(r);
    if (auto v = json_check::text(r.tool, "version"); !v.empty()) tool += " " + v;
    h += fmt::format(
        "<tr><td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        i + 1, esc(e.commit.empty() ? "(none)" : e.commit), esc(e.time_utc),
        esc(json_check::text(r.provenance, "host")), esc(tool), esc(e.input.path));
  }
  h += "</table></div></div>\n</section>\n";
  h += page_close("Hover over a point for its numbers.");
  return h;
}

std::string format_history_markdown(const std::vector<HistoryEntry>& entries) {
  std::string md = fmt::format("# mpbench history\n\n{} result file{}, oldest first.\n\n",
                               entries.size(), entries.size() == 1 ? "" : "s");
  TextTable files;
  files.head = {"#", "commit", "time (UTC)", "host", "file"};
  files.right = {true, false, false, false, false};
  for (size_t i = 0; i < entries.size(); ++i) {
    const HistoryEntry& e = entries[i];
    files.rows.push_back({std::to_string(i + 1), e.commit.empty() ? "(none)" : e.commit, e.time_utc,
                          json_check::text(e.input.report.provenance, "host"), e.input.path});
  }
  md += render_markdown_table(files);
  for (const TrendModel& m : build_trends(entries)) {
    md += "\n## " + markdown_cell(m.model) + "\n";
    for (const std::string& c : m.spec_changes) md += "\n" + markdown_cell(c) + "\n";
    for (const TrendSeries& s : m.series) {
      md += "\n### " + markdown_cell(s.label + " · " + s.sub) + "\n\n";
      TextTable t;
      t.head = {"commit", "date", "epoch ms", "min–max", "over", "train mem", "status"};
      t.right = {false, false, true, true, false, true, false};
      for (size_t i = 0; i < entries.size(); ++i) {
        const TrendValue& v = s.at[i];
        std::vector<std::string> row = {entries[i].label, entries[i].date};
        if (v.runs.empty()) {
          row.insert(row.end(), {"—", "—", "", "—", "not run"});
        } else if (!std::isfinite(v.median)) {
          row.insert(row.end(), {"—", "—", "", "—", v.status});
        } else {
          row.push_back(format_ms(v.median));
          const bool spread = std::isfinite(v.lo) && std::isfinite(v.hi);
          row.push_back(spread ? format_ms(v.lo) + "–" + format_ms(v.hi) : "—");
          row.push_back(v.between_runs ? fmt::format("{} runs", v.ok_runs) : "epochs");
          row.push_back(format_bytes(static_cast<size_t>(v.memory)));
          std::string status = v.ok_runs < v.runs.size() ? fmt::format("{} of {} ok; {}", v.ok_runs,
                                                                       v.runs.size(), v.status)
                                                         : "ok";
          if (v.busy_runs) status += "; " + v.busy_text();
          row.push_back(status);
        }
        t.rows.push_back(std::move(row));
      }
      md += render_markdown_table(t);
    }
  }
  return md;
}

}  // namespace mpbench
