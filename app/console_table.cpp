#include "app/console_table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "train/json_check.h"
#include "train/printable.h"

namespace mpbench {

namespace {

bool usable(double v) {
  return std::isfinite(v) && v > 0;
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "nan";
  return fmt::format("{:.2f}%", fraction * 100);
}

// The device name is in env only for the device the report ran on.
std::string device_label(const std::string& device, const Report& report) {
  const std::string name = env_device_name(report.env, device);
  return name.empty() ? device : device + ": " + name;
}

std::string pad(const std::string& s, size_t width, bool right) {
  const size_t w = display_width(s);
  if (w >= width) return s;
  return right ? std::string(width - w, ' ') + s : s + std::string(width - w, ' ');
}

std::string repeat(const std::string& glyph, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += glyph;
  return out;
}

// Splits `text` into lines of at most `width` columns, at spaces where possible.
std::vector<std::string> wrap(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::string line, word;
  auto flush_word = [&] {
    while (display_width(word) > width) {  // a word longer than the cell: hard break
      if (!line.empty()) {
        lines.push_back(line);
        line.clear();
      }
      size_t cut = 0, cols = 0;
      while (cut < word.size() && cols < width) {
        ++cut;
        while (cut < word.size() && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) ++cut;
        ++cols;
      }
      lines.push_back(word.substr(0, cut));
      word = word.substr(cut);
    }
    if (word.empty()) return;
    if (line.empty()) {
      line = word;
    } else if (display_width(line) + 1 + display_width(word) <= width) {
      line += " " + word;
    } else {
      lines.push_back(line);
      line = word;
    }
    word.clear();
  };
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t') {
      flush_word();
    } else {
      word += c;
    }
  }
  flush_word();
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

std::string rtrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string format_ms(double ms) {
  if (ms >= 1000) return fmt::format("{:.0f}", ms);
  if (ms >= 100) return fmt::format("{:.1f}", ms);
  if (ms >= 10) return fmt::format("{:.2f}", ms);
  return fmt::format("{:.3f}", ms);
}

std::string group_thousands(double v) {
  if (!std::isfinite(v)) return "nan";
  // Rounding to an integer is undefined past 2^63 (1e300 samples/s once showed as "-0").
  if (std::fabs(v) >= 9.2e18) return fmt::format("{:.3g}", v);
  const long long n = std::llround(v);
  const unsigned long long mag =
      n < 0 ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
  const std::string digits = std::to_string(mag);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format_rate(double v) {
  if (!std::isfinite(v)) return "nan";
  if (v >= 1000) return group_thousands(v);
  return fmt::format("{:.1f}", v);
}

std::string format_loss(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return std::fabs(v) < 1e6 ? fmt::format("{:.4f}", v) : fmt::format("{:.4g}", v);
}

std::string format_loss_scale(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e12)
    return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}

std::string env_device_name(const nlohmann::json& env, const std::string& device) {
  if (!env.is_object()) return "";
  const auto str = json_check::text;
  // cmd_run's layout: {"device": "cuda", "gpu": {"name": ...}, "cpu": {"name": ...}}.
  const std::string kind = str(env, "device");
  if (!kind.empty() && kind != device) return "";
  if (device == "cuda" && env.contains("gpu")) return str(env["gpu"], "name");
  // The native CPU and the reference both run on the CPU: it is their device.
  if ((device == "cpu" || device == "reference") && env.contains("cpu"))
    return str(env["cpu"], "name");
  return "";
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

// The one style of every console table (run, compare, maxbatch, explain, inspect, profile):
// " a │ b │ c" under a "───┼───" rule, or | - + in plain ASCII.
struct TableStyle {
  std::string vbar, hbar, cross;
};
TableStyle table_style(bool ascii) {
  return ascii ? TableStyle{"|", "-", "+"} : TableStyle{"│", "─", "┼"};
}
std::string table_line(const std::vector<std::string>& cells, const std::vector<size_t>& widths,
                       const std::vector<bool>& right, const TableStyle& st) {
  std::string s;
  for (size_t c = 0; c < cells.size(); ++c)
    s += (c == 0 ? " " : " " + st.vbar + " ") +
         pad(cells[c], c < widths.size() ? widths[c] : 0, c < right.size() && right[c]);
  return rtrim(s) + "\n";
}
std::string table_rule(const std::vector<size_t>& widths, const TableStyle& st) {
  std::string rule;
  for (size_t c = 0; c < widths.size(); ++c)
    rule += (c ? st.cross : "") + repeat(st.hbar, widths[c] + 2);
  return rtrim(rule) + "\n";
}

}  // namespace

std::string render_text_table(const TextTable& t, bool ascii) {
  // Cells may hold a file's text (a compare baseline's status_detail): a line break or an escape
  // sequence in one would break the table or reach the terminal.
  auto printable = [](const std::vector<std::string>& row) {
    std::vector<std::string> out;
    out.reserve(row.size());
    for (const std::string& c : row) out.push_back(printable_text(c));
    return out;
  };
  const std::vector<std::string> head = printable(t.head);
  std::vector<std::vector<std::string>> rows;
  rows.reserve(t.rows.size());
  for (const auto& r : t.rows) rows.push_back(printable(r));
  std::vector<size_t> width(head.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], display_width(row[i]));
  };
  widen(head);
  for (const auto& r : rows) widen(r);
  const TableStyle st = table_style(ascii);
  std::string out = table_line(head, width, {}, st) + table_rule(width, st);
  for (const auto& r : rows) out += table_line(r, width, t.right, st);
  return out;
}

std::string markdown_cell(const std::string& s) {
  auto alnum = [&](size_t i) {
    return i < s.size() && std::isalnum(static_cast<unsigned char>(s[i])) != 0;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '<') {
      out += "&lt;";  // no raw HTML: an <img onerror> or a </details> that ends a fold
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";  // so that "&lt;" from outside stays those four characters
    } else if (c == '_' && i > 0 && alnum(i - 1) && alnum(i + 1)) {
      out += '_';  // inside a word it cannot open or close emphasis: tiny_mlp, amp_bf16 as they are
    } else if (std::strchr("\\`*_|[]~#", c) != nullptr && c != 0) {
      out += '\\';  // code, emphasis, the cell's end, links, strikethrough, a heading's end
      out += static_cast<char>(c);
    } else if (c == '\n' || c == '\r' || c == '\t') {
      // A line break would end the cell, the heading or the list item: shown, as C writes it.
      out += c == '\n' ? "\\\\n" : c == '\r' ? "\\\\r" : "\\\\t";
    } else if (const size_t n = append_control_escape(s, i, "\\\\", out)) {
      i += n - 1;  // C0 and C1 controls (U+0085: a line break), the backslash escaped
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string render_markdown_table(const TextTable& t) {
  auto line = [](const std::vector<std::string>& row) {
    std::string s = "|";
    for (const std::string& c : row) s += " " + markdown_cell(c) + " |";
    return s + "\n";
  };
  std::string out = line(t.head) + "|";
  for (size_t i = 0; i < t.head.size(); ++i)
    out += i < t.right.size() && t.right[i] ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& r : t.rows) out += line(r);
  return out;
}

std::vector<ModelGroup> group_by_model(const Report& report) {
  std::vector<ModelGroup> groups;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const RunResult& r : report.runs) {
    auto key = std::make_pair(r.model, r.device);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, groups.size()).first;
      ModelGroup g;
      g.model = r.model;
      g.family = r.family;
      g.device = r.device;
      groups.push_back(std::move(g));
    }
    ModelGroup& g = groups[it->second];
    g.runs.push_back(&r);
    if (std::find(g.batches.begin(), g.batches.end(), r.batch_size) == g.batches.end())
      g.batches.push_back(r.batch_size);
  }
  for (ModelGroup& g : groups) g.baseline = ratio_baseline(report.runs, g.model, g.device);
  return groups;
}

const RunResult* ModelGroup::fp32_for(const RunResult& run) const {
  for (const RunResult* r : runs)
    if (r->precision == baseline && r->status == RunStatus::Ok && r->batch_size == run.batch_size &&
        r->seed == run.seed && r->repetition == run.repetition)
      return r;
  return nullptr;
}

namespace {

using SeedKey = std::tuple<std::string, int64_t, bool, std::string>;  // device, batch, graphs, mode
SeedKey seed_key(const RunResult& r) {
  return {r.device, r.batch_size, r.cuda_graphs, r.precision};
}

// A group's runs by seed_key (a mode at a batch: its seeds and repetitions), in report order.
std::vector<std::vector<const RunResult*>> runs_by_mode(const ModelGroup& group) {
  std::vector<std::vector<const RunResult*>> out;
  std::map<SeedKey, size_t> at;
  for (const RunResult* r : group.runs) {
    const auto [it, fresh] = at.emplace(seed_key(*r), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(r);
  }
  return out;
}

}  // namespace

std::string format_accuracy_over_seeds(const SeedSummary& s, const std::string& pm) {
  return s.seeds >= 2 ? fmt::format("{} {} {:.2f}", format_percent(s.accuracy_mean), pm,
                                    100 * s.accuracy_std)
                      : fmt::format("{} {} n/a", format_percent(s.accuracy_mean), pm);
}

bool has_time_spread(const RunResult& run, bool collapsed) {
  // A collapsed run's cv is NaN for fewer than two runs (collapse_runs).
  return std::isfinite(run.epoch_time_ms.cv) && (collapsed || run.epochs.size() > 1);
}

std::optional<double> speedup_vs_fp32(const RunResult& run, const RunResult* fp32) {
  if (!fp32 || run.status != RunStatus::Ok) return std::nullopt;
  const double base = fp32->epoch_time_ms.median, t = run.epoch_time_ms.median;
  if (!usable(base) || !usable(t)) return std::nullopt;
  return base / t;
}

std::optional<RatioEstimate> speedup_interval(const ModelGroup& repeated, const RunResult& run,
                                              const RunResult* fp32) {
  if (!fp32 || fp32 == &run || run.status != RunStatus::Ok) return std::nullopt;
  // Only repetitions give one (the JSON's repeat_summary): seeds alone are different trainings,
  // not the same run measured again, and neither the JSON nor a table gives them an interval.
  if (!has_repetitions(repeated)) return std::nullopt;
  // The repetitions (and seeds) of one collapsed run's key.
  auto runs_of = [&](const RunResult& of) {
    std::vector<const RunResult*> out;
    for (const RunResult* r : repeated.runs)
      if (seed_key(*r) == seed_key(of)) out.push_back(r);
    return out;
  };
  return repeated_speedup(runs_of(*fp32), runs_of(run));
}

std::map<const RunResult*, RatioEstimate> speedup_intervals(const ModelGroup& repeated) {
  std::map<const RunResult*, RatioEstimate> out;
  std::map<SeedKey, std::optional<RatioEstimate>> of_mode;  // one bootstrap a mode
  for (const RunResult* r : repeated.runs) {
    const RunResult* base = repeated.fp32_for(*r);
    if (r->status != RunStatus::Ok || !base || base == r) continue;
    const SeedKey k = seed_key(*r);
    if (!of_mode.count(k)) of_mode[k] = speedup_interval(repeated, *r, base);
    if (const auto& i = of_mode[k]) out[r] = *i;
  }
  return out;
}

std::optional<double> memory_vs_fp32(const RunResult& run, const RunResult* fp32) {
  if (!fp32 || run.status != RunStatus::Ok) return std::nullopt;
  if (fp32->memory.training_peak == 0 || run.memory.training_peak == 0) return std::nullopt;
  return static_cast<double>(run.memory.training_peak) /
         static_cast<double>(fp32->memory.training_peak);
}

bool has_seeds(const ModelGroup& group) {
  for (const RunResult* r : group.runs)
    if (r->seed) return true;
  return false;
}

bool has_repetitions(const ModelGroup& group) {
  for (const RunResult* r : group.runs)
    if (r->repetition) return true;
  return false;
}

ModelGroup collapse_runs(const ModelGroup& group, std::vector<RunResult>& storage) {
  const std::vector<std::vector<const RunResult*>> modes = runs_by_mode(group);
  storage.clear();
  storage.reserve(modes.size());
  for (const std::vector<const RunResult*>& runs : modes) {
    std::vector<const RunResult*> ok;
    for (const RunResult* r : runs)
      if (r->status == RunStatus::Ok) ok.push_back(r);
    RunResult m = ok.empty() ? *runs.front() : *ok.front();
    // Stands for all of them; fp32_for pairs collapsed runs with each other.
    m.seed.reset();
    m.repetition.reset();
    if (!ok.empty()) {
      std::vector<double> acc, loss, skipped;
      // Each seed's median epoch times over its repetitions (one value a seed), or without
      // seeds the repetitions': with both, the table's median and spread are the seeds' (a
      // seed's repetitions, identical numerics, counted once), as its title says.
      std::map<int64_t, std::vector<double>> by_seed;
      for (const RunResult* r : ok) {
        by_seed[r->seed.value_or(-1)].push_back(r->epoch_time_ms.median);
        acc.push_back(r->final_accuracy);
        loss.push_back(r->final_loss);
        skipped.push_back(static_cast<double>(r->skipped_steps));
        m.memory.training_peak = std::max(m.memory.training_peak, r->memory.training_peak);
        m.memory.device_peak = std::max(m.memory.device_peak, r->memory.device_peak);
      }
      std::vector<double> medians;
      const bool seeds = ok.front()->seed.has_value();
      for (auto& [seed, times] : by_seed) {
        if (seeds)
          medians.push_back(compute_time_stats(times).median);
        else
          medians.insert(medians.end(), times.begin(), times.end());
      }
      // A run's skipped steps, not their sum: N repetitions skip the same steps N times over.
      m.skipped_steps = static_cast<int64_t>(std::llround(compute_time_stats(skipped).median));
      m.epoch_time_ms = compute_time_stats(medians);
      // One run has no spread between runs: n/a, never a 0%.
      if (medians.size() < 2) m.epoch_time_ms.cv = std::numeric_limits<double>::quiet_NaN();
      // The rates by the same rule as one run's: the epoch's work over the median epoch time
      // (the seeds and repetitions train the same epoch), so that they agree with the time shown.
      const double time_ratio = ok.front()->epoch_time_ms.median / m.epoch_time_ms.median;
      if (std::isfinite(time_ratio) && time_ratio > 0) {
        m.samples_per_second = ok.front()->samples_per_second * time_ratio;
        m.tflops = ok.front()->tflops * time_ratio;
        m.percent_of_peak = ok.front()->percent_of_peak * time_ratio;
      }
      m.final_accuracy = mean_std(acc).mean;
      m.final_loss = mean_std(loss).mean;
    }
    storage.push_back(std::move(m));
  }
  ModelGroup out = group;
  out.runs.clear();
  for (const RunResult& r : storage) out.runs.push_back(&r);
  return out;
}

Table build_table(const ModelGroup& seeded_group, const Report& report, bool ascii) {
  const std::string dash = ascii ? "-" : "—";
  const std::string pm = ascii ? "+/-" : "±";
  const std::string dot = title_dot(ascii);

  const bool seeded = has_seeds(seeded_group);
  const bool repeated = has_repetitions(seeded_group);
  std::vector<RunResult> collapsed;
  const ModelGroup group =
      seeded || repeated ? collapse_runs(seeded_group, collapsed) : seeded_group;
  // The repetitions each mode (at a batch, a seed) ran: fewer for some where the run was
  // interrupted, then said as a range ("1-2 repetitions").
  std::map<std::tuple<std::string, int64_t, uint64_t>, int64_t> reps_of;
  for (const RunResult* r : seeded_group.runs) {
    int64_t& n = reps_of[{r->precision, r->batch_size, r->seed.value_or(0)}];
    n = std::max(n, r->repetition.value_or(1));
  }
  int64_t fewest = INT64_MAX, most = 0;
  for (const auto& [key, n] : reps_of) {
    fewest = std::min(fewest, n);
    most = std::max(most, n);
  }
  const std::string repetitions =
      fewest == most ? std::to_string(most) : fmt::format("{}-{}", fewest, most);
  const std::vector<SeedSummary> summaries =
      seeded ? seed_summaries(report.runs) : std::vector<SeedSummary>{};

  bool any_device = false;
  const RunResult* first_ok = nullptr;
  for (const RunResult* r : group.runs) {
    any_device = any_device || r->memory.has_device;
    if (!first_ok && r->status == RunStatus::Ok) first_ok = r;
  }
  const RunResult& first = *group.runs.front();

  Table t;
  t.title = group.family.empty() ? group.model : fmt::format("{} ({})", group.model, group.family);
  t.title += dot + device_label(group.device, report);
  const bool sweep = group.batches.size() > 1;
  t.title += dot + (sweep ? fmt::format("batches {}", fmt::join(group.batches, ", "))
                          : fmt::format("batch {}", first.batch_size));
  // Data parallel: the batch is each rank's, as profile's and explain's titles say.
  if (first.data_parallel && first.data_parallel->ranks > 1)
    t.title += fmt::format(" per rank, {} ranks", first.data_parallel->ranks);
  if (first_ok) {
    const size_t n = first_ok->epochs.size();
    t.title += dot + fmt::format("{} epoch{}", n, n == 1 ? "" : "s");
  }
  if (seeded && repeated)
    t.title += dot + fmt::format(
                         "over seeds, each the median of its {} repetitions: epoch ms median {} "
                         "cv, accuracy mean {} std; speedup: the median of each round's",
                         repetitions, pm, pm);
  else if (seeded)
    t.title += dot + "over seeds: epoch ms median " + pm + " cv, accuracy mean " + pm + " std";
  else if (repeated)
    t.title += dot + fmt::format(
                         "{} repetitions: epoch ms median {} cv between them; speedup: the median "
                         "of each round's (not the ratio of the medians)",
                         repetitions, pm);

  auto col = [&](const std::string& header, bool right) {
    t.headers.push_back(header);
    t.right_align.push_back(right);
  };
  col("mode", false);
  if (sweep) col("batch", true);
  if (seeded) col("seeds", true);
  col("epoch ms", true);
  col("samples/s", true);
  col("train mem", true);
  if (any_device) col("device mem", true);
  col("accuracy", true);
  const std::string vs = "vs " + seeded_group.baseline;
  if (seeded) col("acc " + vs + " (95% CI)", true);
  col("loss", true);
  // With enough repetitions a speedup carries the interval compare would give it.
  std::map<const RunResult*, RatioEstimate> intervals;
  if (repeated)
    for (const RunResult* r : group.runs)
      if (auto i = speedup_interval(seeded_group, *r, group.fp32_for(*r))) intervals[r] = *i;
  col((seeded_group.baseline == "fp32" ? "speedup" : "speedup " + vs) +
          (intervals.empty() ? "" : " (95% CI)"),
      true);
  col("mem " + vs, true);
  col("skipped", true);
  col("scale", true);

  auto ratio = [&](std::optional<double> v) { return v ? fmt::format("{:.2f}x", *v) : dash; };
  for (const RunResult* r : group.runs) {
    TableRow row;
    std::string mode = r->precision + (r->cuda_graphs ? " +graphs" : "");
    row.cells.push_back(mode);
    if (sweep) row.cells.push_back(group_thousands(static_cast<double>(r->batch_size)));
    const SeedSummary* s = seeded ? seed_summary_for(summaries, *r) : nullptr;
    if (seeded) row.cells.push_back(s ? std::to_string(s->seeds) : "0");
    if (r->status != RunStatus::Ok) {
      row.ok = false;
      row.status = run_status_name(r->status);
      if (!r->status_detail.empty()) row.status += ": " + r->status_detail;
      t.rows.push_back(std::move(row));
      continue;
    }
    const TimeStats& et = r->epoch_time_ms;
    const bool spread = has_time_spread(*r, seeded || repeated);
    row.cells.push_back(spread ? fmt::format("{} {} {:.1f}%", format_ms(et.median), pm, et.cv * 100)
                               : fmt::format("{} {} n/a", format_ms(et.median), pm));
    row.cells.push_back(format_rate(r->samples_per_second));
    row.cells.push_back(format_bytes(r->memory.training_peak));
    if (any_device) {
      row.cells.push_back(r->memory.has_device ? format_bytes(r->memory.device_peak) : dash);
    }
    if (s) {
      row.cells.push_back(format_accuracy_over_seeds(*s, pm));
      const auto& d = s->accuracy_delta_vs_fp32;
      row.cells.push_back(d ? fmt::format("{:+.2f} pt ({:+.2f}, {:+.2f})", 100 * d->mean,
                                          100 * d->ci95_low, 100 * d->ci95_high)
                            : dash);
    } else {
      row.cells.push_back(format_percent(r->final_accuracy));
      if (seeded) row.cells.push_back(dash);
    }
    row.cells.push_back(format_loss(r->final_loss));
    const auto in = intervals.find(r);
    row.cells.push_back(in == intervals.end() ? ratio(speedup_vs_fp32(*r, group.fp32_for(*r)))
                                              : fmt::format("{:.2f}x ({}, {})", in->second.ratio,
                                                            format_ratio(in->second.lo),
                                                            format_ratio(in->second.hi)));
    row.cells.push_back(ratio(memory_vs_fp32(*r, group.fp32_for(*r))));
    row.cells.push_back(std::to_string(r->skipped_steps));
    row.cells.push_back(r->loss_scaling ? format_loss_scale(r->final_loss_scale) : dash);
    t.rows.push_back(std::move(row));
  }
  return t;
}

namespace {

// The run a note is about, told apart as the table's rows tell it: its mode, in a sweep its batch
// (--batch-sizes 32,64 --seeds 2 has a "fp32 seed 2" at each), and its repetition or seed.
std::string note_subject(const RunResult& r, const ModelGroup& group) {
  return r.precision + (r.cuda_graphs ? " +graphs" : "") +
         (group.batches.size() > 1 ? fmt::format(" batch {}", r.batch_size) : "") +
         (r.repetition ? fmt::format(" repetition {}", *r.repetition) : "") +
         (r.seed ? fmt::format(" seed {}", *r.seed) : "");
}

// One line per finished run whose times are not steady (run_flags' noisy and noisy-repetitions),
// after the table: which one, how much, and the two usual causes (a first epoch much slower than
// the rest means the warm-up was too short).
std::vector<std::string> noisy_notes(const ModelGroup& group, const Report& report) {
  std::vector<std::string> out;
  // Repeated or seeded runs: the spread between their median epoch times (the seeds', of their
  // repetitions' medians, as the table's), the noise a comparison with another run meets; the
  // seeds train the same shapes, so theirs is the machine's too. And within each run as for a
  // single run.
  if (has_repetitions(group) || has_seeds(group)) {
    const char* between = has_seeds(group) ? "seeds" : "repetitions";
    std::vector<RunResult> storage;
    for (const RunResult* r : collapse_runs(group, storage).runs) {
      const TimeStats& t = r->epoch_time_ms;
      if (r->status != RunStatus::Ok || !(t.cv > kNoisyCv)) continue;
      out.push_back(fmt::format(
          "{}: median epoch times vary by {:.0f}% between {} ({} to {} ms): the machine was "
          "busy or its clocks moved; time and speedup are unreliable",
          note_subject(*r, group), 100 * t.cv, between, format_ms(t.min), format_ms(t.max)));
    }
  }
  for (const RunResult* r : group.runs) {
    const std::vector<std::string> f = run_flags(*r, report.runs);
    if (std::find(f.begin(), f.end(), "noisy") == f.end()) continue;
    if (const std::optional<TimeStats> q = epoch_quarters(*r)) {
      out.push_back(fmt::format(
          "{}: one epoch, whose quarters' step times vary by {:.0f}% ({} to {} ms a step): the "
          "machine was busy or its clocks moved; time and speedup are unreliable (more epochs or "
          "--repeat measure the spread)",
          note_subject(*r, group), 100 * q->cv, format_ms(q->min), format_ms(q->max)));
      continue;
    }
    const TimeStats& t = r->epoch_time_ms;
    const double first = r->epochs.front().time_ms;
    const bool first_slow = first == t.max && first > 1.5 * t.median;
    // With seeds the table's ± is between the seeds' median epoch times; this spread is within
    // one run, over its own epochs: say which, so that the two numbers do not seem to disagree.
    out.push_back(fmt::format(
        "{}: epoch times vary by {:.0f}% over its own epochs ({} to {} ms){}; {}",
        note_subject(*r, group), 100 * t.cv, format_ms(t.min), format_ms(t.max),
        r->seed ? " (the table's ± is the spread between the seeds' medians)" : "",
        first_slow ? "the first epoch is the slow one: raise train.warmup_steps"
                   : "the machine was busy or its clocks moved: time and speedup are unreliable"));
  }
  return out;
}

// One line for the finished runs whose epochs waited for CPUs that something else held
// (run_flags' busy): their epochs can be as steady as a quiet run's, so that the noisy notes
// miss them. Of several runs, the worst one's figures.
std::vector<std::string> busy_notes(const ModelGroup& group) {
  std::vector<std::string> subjects;  // each mode (and batch) once, in the table's order
  std::map<std::string, int> runs;
  for (const RunResult* r : group.runs) {
    if (!ran_busy(*r)) continue;
    const std::string s = r->precision + (r->cuda_graphs ? " +graphs" : "") +
                          (group.batches.size() > 1 ? fmt::format(" batch {}", r->batch_size) : "");
    if (runs[s]++ == 0) subjects.push_back(s);
  }
  if (subjects.empty()) return {};
  const HostLoad* worst = worst_busy_load(group.runs);
  for (std::string& s : subjects)
    if (runs[s] > 1) s += fmt::format(" ({} runs)", runs[s]);
  const bool one = subjects.size() == 1 && runs.begin()->second == 1;
  return {fmt::format(
      "{}: {}{} while {} epochs ran: the machine was busy; time and speedup are unreliable",
      fmt::join(subjects, ", "), one ? "" : "at worst, ", worst->describe(one ? "its" : "their"),
      one ? "its" : "their")};
}

// Seeds and repetitions that did not finish, one line per mode with some that did: its row is
// of those (the others would otherwise vanish from it, and its interval with them).
std::vector<std::string> unfinished_notes(const ModelGroup& group) {
  std::vector<std::string> out;
  if (!has_seeds(group) && !has_repetitions(group)) return out;
  for (const std::vector<const RunResult*>& all : runs_by_mode(group)) {
    const RunResult* failed = nullptr;
    size_t ok = 0;
    for (const RunResult* r : all) {
      if (r->status == RunStatus::Ok)
        ++ok;
      else if (!failed)
        failed = r;
    }
    if (!failed || ok == 0) continue;  // none failed, or the row says the status
    RunResult subject = *failed;       // the mode, and in a sweep its batch
    subject.seed.reset();
    subject.repetition.reset();
    const std::string of = failed->repetition ? "repetitions" : "seeds";
    out.push_back(
        fmt::format("{}: {} of its {} {} did not finish ({}{}: {}); the row is of the {} that did",
                    note_subject(subject, group), all.size() - ok, all.size(), of,
                    run_status_name(failed->status),
                    failed->repetition ? fmt::format(" at repetition {}", *failed->repetition)
                                       : fmt::format(" at seed {}", failed->seed.value_or(0)),
                    failed->status_detail, ok));
  }
  return out;
}

// amp_fp8's numerical health, one line per finished run: which of its recorded FP8 tensors were
// clipped (an amax past what its delayed scale can hold) and at how many steps, and which never
// ran in FP8 at all (an amax that stayed 0: its GEMMs' sizes, the batch's rows among them, off
// 16, so they ran in bf16).
std::vector<std::string> fp8_notes(const ModelGroup& group) {
  std::vector<std::string> out;
  for (const RunResult* r : group.runs) {
    if (r->status != RunStatus::Ok || r->fp8_scaling.empty()) continue;
    std::string hit;
    size_t idle = 0;
    for (const Fp8TensorSeries& t : r->fp8_scaling) {
      if (t.clipped_steps > 0)
        hit += fmt::format("{}{} at {} of {} steps", hit.empty() ? "" : ", ", t.tensor,
                           t.clipped_steps, r->steps_of(t.amax.size()));
      if (std::all_of(t.amax.begin(), t.amax.end(), [](float a) { return a == 0; })) ++idle;
    }
    const size_t n = r->fp8_scaling.size();
    std::string line =
        hit.empty() ? fmt::format(
                          "none of the {} recorded FP8 tensors was clipped (every amax "
                          "within its delayed scale)",
                          n)
                    : "FP8 clipping (an amax past what its delayed scale can hold, the largest "
                      "values cut to the format's maximum): " +
                          hit;
    const std::string why = fmt::format(
        "an FP8 GEMM takes M, N and K in multiples of 16, and at batch {} these ran "
        "in bf16",
        r->batch_size);
    if (idle == n)
      line = fmt::format(
          "no GEMM ran in FP8: the amax of all {} recorded FP8 tensors stayed 0 "
          "({})",
          n, why);
    else if (idle > 0)
      line += fmt::format("; {} of the {} stayed 0 ({})", idle, n, why);
    out.push_back(fmt::format("{}: {}", note_subject(*r, group), line));
  }
  return out;
}

// Data parallel, one line per finished run: the ranks, what a step all-reduces and how long
// that took beside the step, the bandwidths, and against one process (when measured) the scaling
// efficiency and the mode's speedup over the baseline mode at one rank.
std::vector<std::string> data_parallel_notes(const ModelGroup& group) {
  std::vector<std::string> out;
  for (const RunResult* r : group.runs) {
    if (r->status != RunStatus::Ok || !r->data_parallel || r->epochs.empty()) continue;
    const DataParallelResult& d = *r->data_parallel;
    const double step_ms = r->step_time_ms();
    std::string line = fmt::format(
        "{}: {} rank{}, {} of gradients a step all-reduced in {} ({} bucket{} of {}){}: {} ms "
        "a step exposed ({:.1f}% of the step), algbw {:.3g} GB/s, busbw {:.3g} GB/s",
        note_subject(*r, group), d.ranks, d.ranks == 1 ? "" : "s", format_bytes(d.bytes_per_step),
        d.grad_reduce, d.buckets, d.buckets == 1 ? "" : "s", format_bytes(d.bucket_bytes),
        d.fp8_amax_bytes_per_step > 0 ? fmt::format(" and {} of FP8 amaxes maxed in fp32",
                                                    format_bytes(d.fp8_amax_bytes_per_step))
                                      : "",
        format_ms(d.comm_ms_per_step), step_ms > 0 ? 100 * d.comm_ms_per_step / step_ms : 0.0,
        d.algbw_gbps, d.busbw_gbps);
    if (d.comm_busy_ms_per_step > 0)
      line += fmt::format("; the backward hid {:.0f}% of the all-reduces' {} ms", 100 * d.overlap,
                          format_ms(d.comm_busy_ms_per_step));
    if (d.single_rank_samples_per_second > 0) {
      line +=
          fmt::format("; scaling efficiency {:.0f}% against 1 rank", 100 * d.scaling_efficiency);
      const RunResult* base = group.fp32_for(*r);
      if (base && base != r && base->data_parallel &&
          base->data_parallel->single_rank_samples_per_second > 0 && base->samples_per_second > 0)
        line += fmt::format(
            "; speedup over {} {:.2f}x at {} rank{}, {:.2f}x at 1", group.baseline,
            r->samples_per_second / base->samples_per_second, d.ranks, d.ranks == 1 ? "" : "s",
            d.single_rank_samples_per_second / base->data_parallel->single_rank_samples_per_second);
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace

std::vector<std::string> table_notes(const ModelGroup& group, const Report& report) {
  std::vector<std::string> out = unfinished_notes(group);
  for (std::string& n : noisy_notes(group, report)) out.push_back(std::move(n));
  for (std::string& n : busy_notes(group)) out.push_back(std::move(n));
  for (std::string& n : fp8_notes(group)) out.push_back(std::move(n));
  for (std::string& n : data_parallel_notes(group)) out.push_back(std::move(n));
  return out;
}

std::optional<std::string> device_note(const Report& report) {
  for (const RunResult& r : report.runs) {
    const std::vector<std::string> f = run_flags(r, report.runs);
    if (std::find(f.begin(), f.end(), "emulated") != f.end())
      return std::string(
          "on the CPU reference backend the times are of emulated tf32/16-bit/fp8 numerics "
          "(rounding around fp32 arithmetic), not of low-precision hardware: they and the "
          "speedups from them say nothing about a GPU");
  }
  const nlohmann::json& env = report.env;
  if (!env.is_object() || !env.contains("native_cpu")) return std::nullopt;
  const std::optional<std::string> limit = native_bf16_limit(env["native_cpu"]);
  if (!limit || std::none_of(report.runs.begin(), report.runs.end(), [](const RunResult& r) {
        return r.status == RunStatus::Ok && r.precision == "amp_bf16";
      }))
    return std::nullopt;
  return *limit + ": a true time for this CPU";
}

std::optional<std::string> native_bf16_limit(const nlohmann::json& native_cpu) {
  // Read from a result file as display, never refused: a field of another type is as absent.
  if (!native_cpu.is_object()) return std::nullopt;
  auto member = [&](const char* key, nlohmann::json::value_t type) {
    const auto it = native_cpu.find(key);
    return it != native_cpu.end() && it->type() == type ? *it : nlohmann::json();
  };
  using type = nlohmann::json::value_t;
  const std::string isa = member("isa", type::string).is_string()
                              ? member("isa", type::string).get<std::string>()
                              : "?";
  const nlohmann::json rates = member("gemm_tflops", type::object);
  const nlohmann::json fp32 = rates.is_object() ? rates.value("fp32", nlohmann::json()) : nullptr,
                       bf16 =
                           rates.is_object() ? rates.value("amp_bf16", nlohmann::json()) : nullptr;
  const bool measured = fp32.is_number() && bf16.is_number();
  if (member("bf16_gemm", type::string) == "converted")
    return fmt::format(
        "this CPU runs amp_bf16 without bf16 instructions (oneDNN's ISA {}: AVX-512 without "
        "AVX512-BF16 or AMX, or a cap: --cpu-isa, ONEDNN_MAX_CPU_ISA), converting in "
        "software{}",
        isa,
        measured ? fmt::format(": bf16 GEMMs measured {:.3f} TFLOP/s against {:.3f} in fp32",
                               bf16.get<double>(), fp32.get<double>())
                 : ", far from what bf16 hardware gives");
  if (!measured || bf16.get<double>() > fp32.get<double>()) return std::nullopt;
  const nlohmann::json flags = member("cpu_flags", type::array);
  const bool has_amx =
      flags.is_array() && std::find(flags.begin(), flags.end(), "amx_bf16") != flags.end();
  return fmt::format(
      "this CPU's bf16 GEMMs measured {:.3f} TFLOP/s against {:.3f} in fp32 (oneDNN's ISA {}, {}): "
      "amp_bf16 has no faster matrix unit here",
      bf16.get<double>(), fp32.get<double>(), isa,
      member("amx_granted", type::boolean) == true ? "with AMX"
      : has_amx                                    ? "AMX not granted to this process"
                                                   : "no AMX");
}

std::string title_dot(bool ascii) {
  return ascii ? " | " : " · ";
}

bool utf8_output() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    std::string s(v);
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s.find("utf-8") != std::string::npos || s.find("utf8") != std::string::npos;
  }
  return false;  // the C locale
}

namespace {

// The notes and statuses are the HTML's and Markdown's too: a terminal without UTF-8 gets their
// typography spelled in ASCII, as the table's own.
std::string console_text(std::string s, bool ascii) {
  if (!ascii) return s;
  static const std::pair<const char*, const char*> kAscii[] = {
      {"±", "+/-"}, {"—", "-"}, {"–", "-"}, {"×", "x"}, {"·", "|"}, {"…", "..."}, {"→", "->"}};
  for (const auto& [from, to] : kAscii)
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + strlen(to)))
      s.replace(at, strlen(from), to);
  return s;
}

}  // namespace

std::string format_console(const Report& report, bool ascii) {
  const TableStyle st = table_style(ascii);
  std::string out;
  for (const ModelGroup& group : group_by_model(report)) {
    const Table t = build_table(group, report, ascii);
    const size_t ncol = t.headers.size();
    std::vector<size_t> width(ncol);
    for (size_t c = 0; c < ncol; ++c) width[c] = display_width(t.headers[c]);
    for (const TableRow& row : t.rows) {
      for (size_t c = 0; c < row.cells.size() && c < ncol; ++c) {
        width[c] = std::max(width[c], display_width(row.cells[c]));
      }
    }

    if (!out.empty()) out += "\n";
    out += t.title + "\n";
    out += table_line(t.headers, width, {}, st) + table_rule(width, st);
    for (const TableRow& row : t.rows) {
      if (row.ok) {
        out += table_line(row.cells, width, t.right_align, st);
        continue;
      }
      // A failed row's status runs across the number columns, after the cells that say which
      // run it is (the mode, and the batch and seeds where the table has them).
      const size_t lead = std::clamp<size_t>(row.cells.size(), 1, ncol - 1);
      std::vector<size_t> widths(width.begin(), width.begin() + lead);
      std::vector<bool> right(t.right_align.begin(), t.right_align.begin() + lead);
      size_t span = 0;
      for (size_t c = lead; c < ncol; ++c) span += width[c] + (c > lead ? 3 : 0);
      widths.push_back(span);
      right.push_back(false);
      std::vector<std::string> cells = row.cells;
      cells.resize(lead);
      for (const std::string& part : wrap(console_text(row.status, ascii), span)) {
        cells.push_back(part);
        out += table_line(cells, widths, right, st);
        cells.assign(lead, "");  // the wrapped lines under the status only
      }
    }
    for (const std::string& n : table_notes(group, report))
      out += " note: " + console_text(n, ascii) + "\n";
  }
  if (out.empty()) return "no runs\n";
  // Once, under every table: a newcomer's first run is on the CPU, where amp_fp16 is slower.
  // Wrapped narrower than any table (their rules are 100 columns and more).
  if (const auto note = device_note(report))
    for (const std::string& l : wrap("note: " + console_text(*note, ascii), 90))
      out += (l.rfind("note:", 0) == 0 ? "\n " : "       ") + l + "\n";
  return out;
}

}  // namespace mpbench
