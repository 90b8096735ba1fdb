#include "app/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "app/console_table.h"
#include "kernels/error.h"
#include "models/input_file.h"
#include "train/json_check.h"

namespace mpbench {

namespace {

std::vector<double> epoch_times(const RunResult& r) {
  std::vector<double> t;
  for (const EpochResult& e : r.epochs) t.push_back(e.time_ms);
  return positive_finite(t);
}

// A seeded run (`run --seeds`) matches the run of the same seed; repetitions share a key.
using Key = std::tuple<std::string, std::string, std::string, bool, int64_t, int64_t>;

Key key_of(const RunResult& r) {
  return {r.model,       r.precision,  r.device,
          r.cuda_graphs, r.batch_size, r.seed ? static_cast<int64_t>(*r.seed) : -1};
}

std::string key_name(const Key& k) {
  return fmt::format("{} {} {} batch {}{}{}", std::get<0>(k), std::get<1>(k), std::get<2>(k),
                     std::get<4>(k), std::get<3>(k) ? " (cuda graphs)" : "",
                     std::get<5>(k) >= 0 ? fmt::format(" seed {}", std::get<5>(k)) : "");
}

struct Side {
  std::map<Key, std::vector<const RunResult*>> runs;
  std::vector<Key> order;                          // first appearance
  std::map<const RunResult*, const Report*> file;  // the file each run came from
};

// One file's runs added to a side; within a file a key appears once per repetition.
void add_runs(Side& side, const Report& r, const std::string& what) {
  std::map<std::pair<Key, int64_t>, size_t> seen;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const Key k = key_of(r.runs[i]);
    const int64_t rep = r.runs[i].repetition.value_or(0);
    if (const auto [it, fresh] = seen.emplace(std::make_pair(k, rep), i); !fresh) {
      throw_bad_input(fmt::format("{}: runs[{}] and runs[{}]: {}{} appears twice; cannot match it",
                                  what, it->second, i, key_name(k),
                                  rep ? fmt::format(" repetition {}", rep) : ""));
    }
    auto& list = side.runs[k];
    if (list.empty()) side.order.push_back(k);
    list.push_back(&r.runs[i]);
    side.file[&r.runs[i]] = &r;
  }
}

const RunResult* representative(const std::vector<const RunResult*>& runs) {
  for (const RunResult* r : runs)
    if (r->status == RunStatus::Ok) return r;
  return runs.front();
}

// The resolved spec a run was trained from: by name and, for a sweep, batch size.
const nlohmann::json* spec_of(const Report& report, const RunResult& r) {
  const nlohmann::json* by_name = nullptr;
  for (const nlohmann::json& s : report.specs) {
    if (!s.is_object() || !s.contains("name") || s["name"] != r.model) continue;
    if (!by_name) by_name = &s;
    const nlohmann::json* train = s.contains("train") ? &s["train"] : nullptr;
    if (train && train->is_object() && train->contains("batch_size") &&
        (*train)["batch_size"] == r.batch_size)
      return &s;
  }
  return by_name;
}

void judge_pair(CompareRow& row, const CompareOptions& o) {
  const RunResult& b = *row.baseline;
  const RunResult& c = *row.current;
  const bool both_ok = b.status == RunStatus::Ok && c.status == RunStatus::Ok;

  std::vector<std::vector<double>> tb, tc;
  for (const RunResult* r : row.baseline_runs)
    if (r->status == RunStatus::Ok && !epoch_times(*r).empty()) tb.push_back(epoch_times(*r));
  for (const RunResult* r : row.current_runs)
    if (r->status == RunStatus::Ok && !epoch_times(*r).empty()) tc.push_back(epoch_times(*r));
  row.n_baseline = tb.size();
  row.n_current = tc.size();
  if (both_ok) {
    row.time = hierarchical_median_ratio(tb, tc, o.bootstrap_resamples, o.seed);
    if (b.memory.training_peak > 0) {
      row.memory_change = static_cast<double>(c.memory.training_peak) /
                              static_cast<double>(b.memory.training_peak) -
                          1.0;
    }
    row.accuracy_delta = 100.0 * (c.final_accuracy - b.final_accuracy);
    if (b.final_loss != 0 || c.final_loss != 0) {
      row.loss_change = b.final_loss != 0 ? c.final_loss / b.final_loss - 1.0
                                          : std::numeric_limits<double>::infinity();
    } else {
      row.loss_change = 0.0;
    }
  }
  // An environment difference is named and blocks --strict; it never switches a check off.
  if (!row.env_differences.empty()) row.blocking = true;

  if (c.status != RunStatus::Ok) {
    row.verdict = run_status_name(c.status);
    row.detail = c.status_detail;
    if (b.status == RunStatus::Ok) {
      row.regressions.push_back("status");
    } else {
      row.detail = fmt::format("baseline: {}{}", run_status_name(b.status),
                               c.status_detail.empty() ? "" : "; " + c.status_detail);
    }
    return;
  }
  if (b.status != RunStatus::Ok) {
    row.verdict = "recovered";
    row.detail = fmt::format("baseline: {}", run_status_name(b.status));
    return;
  }

  row.verdict =
      time_verdict(row.time, row.n_baseline, row.n_current, o.time_threshold, o.min_repetitions);
  if (row.verdict == "slower") row.regressions.push_back("time");
  if (row.verdict == "inconclusive") {
    row.blocking = true;
    const size_t need = static_cast<size_t>(std::max(o.min_repetitions, 1));
    row.detail = std::min(row.n_baseline, row.n_current) < need
                     ? fmt::format(
                           "{} vs {} repetitions; time needs {} a side (run --repeat {}, "
                           "or several --baseline files)",
                           row.n_baseline, row.n_current, need, need)
                     : "confidence interval wider than the threshold band";
  }
  // A NaN difference must fail the gate, hence the negated comparisons.
  if (row.memory_change && !(*row.memory_change <= o.memory_threshold))
    row.regressions.push_back("memory");
  if (row.accuracy_delta && !(-*row.accuracy_delta <= o.accuracy_threshold))
    row.regressions.push_back("accuracy");
  if (o.loss_threshold) {
    const double diff = std::fabs(c.final_loss - b.final_loss);
    if (!(diff <= *o.loss_threshold * std::fabs(b.final_loss))) row.regressions.push_back("loss");
  }
}

std::string pct(double x, int digits = 1) {
  return fmt::format("{:+.{}f}%", 100.0 * x, digits);
}

std::string time_cell(const CompareRow& r) {
  if (!r.time.valid) return "-";
  return fmt::format("{:.3f} [{:.3f}, {:.3f}]", r.time.ratio, r.time.lo, r.time.hi);
}
std::string memory_cell(const CompareRow& r) {
  if (!r.memory_change) return "-";
  return fmt::format("{} ({})", pct(*r.memory_change, 2),
                     format_bytes(r.current->memory.training_peak));
}
std::string accuracy_cell(const CompareRow& r) {
  if (!r.accuracy_delta) return "-";
  return fmt::format("{:+.2f} pt ({:.2f}%)", *r.accuracy_delta, 100.0 * r.current->final_accuracy);
}
std::string loss_cell(const CompareRow& r) {
  if (!r.loss_change) return "-";
  return fmt::format("{} ({:.4g})", pct(*r.loss_change, 3), r.current->final_loss);
}
std::string regress_cell(const CompareRow& r) {
  std::string s;
  for (const auto& x : r.regressions) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "-" : s;
}
std::string mode_cell(const CompareRow& r) {
  return r.device + (r.cuda_graphs ? "+graphs" : "") +
         (r.seed ? fmt::format(" seed {}", *r.seed) : "");
}

std::string detail_cell(const CompareRow& r) {
  std::string d = r.detail;
  for (const std::string& e : r.env_differences) d += (d.empty() ? "env " : "; env ") + e;
  return d.empty() ? "-" : d;
}

std::vector<std::string> headers() {
  return {"model",  "precision", "device",     "batch",   "time ratio [95% CI]", "reps",
          "memory", "accuracy",  "final loss", "verdict", "regressed",           "detail"};
}
std::vector<std::string> cells(const CompareRow& r) {
  const std::string n =
      r.baseline && r.current ? fmt::format("{}/{}", r.n_baseline, r.n_current) : "-";
  return {r.model,      r.precision, mode_cell(r),    std::to_string(r.batch_size),
          time_cell(r), n,           memory_cell(r),  accuracy_cell(r),
          loss_cell(r), r.verdict,   regress_cell(r), detail_cell(r)};
}

std::string summary_line(const Comparison& c) {
  if (c.exit_code == 1)
    return fmt::format("FAIL: {} regression(s) beyond the thresholds", c.regressions);
  if (c.matched == 0)
    return fmt::format(
        "FAIL: nothing matched: no run of the current file has a counterpart in the baseline "
        "({} row(s) missing, {} new); check the model names, batch sizes, devices and "
        "--cuda-graphs",
        std::count_if(c.rows.begin(), c.rows.end(),
                      [](const CompareRow& r) { return r.verdict == "missing"; }),
        std::count_if(c.rows.begin(), c.rows.end(),
                      [](const CompareRow& r) { return r.verdict == "new"; }));
  if (c.spec_changed > 0)
    return fmt::format(
        "FAIL: {} row(s) trained from a changed spec, not compared; remake the baseline if the "
        "change is meant",
        c.spec_changed);
  if (c.exit_code == 4)
    return fmt::format("FAIL (--strict): {} inconclusive, missing or environment-changed row(s)",
                       c.blocking);
  if (c.blocking > 0)
    return fmt::format(
        "PASS: no regression ({} inconclusive, missing or environment-changed row(s); "
        "--strict would fail)",
        c.blocking);
  return "PASS: no regression";
}

std::string rule_text(const CompareOptions& o) {
  std::string s = fmt::format(
      "time: ratio of the median over repetitions of median epoch times, 95% hierarchical "
      "bootstrap CI over repetitions and their epochs ({} resamples, at least {} repetitions a "
      "side); threshold {:.4g}%; memory (training peak) threshold {:.4g}%; accuracy threshold "
      "{:.4g} pt",
      o.bootstrap_resamples, o.min_repetitions, 100 * o.time_threshold, 100 * o.memory_threshold,
      o.accuracy_threshold);
  if (o.loss_threshold) s += fmt::format("; final loss threshold {:.4g}%", 100 * *o.loss_threshold);
  return s;
}

}  // namespace

std::string time_verdict(const RatioEstimate& est, size_t n_baseline, size_t n_current,
                         double threshold, int min_repetitions) {
  const size_t need = static_cast<size_t>(std::max(min_repetitions, 1));
  if (!est.valid || n_baseline < need || n_current < need) return "inconclusive";
  if (est.lo > 1.0 && est.ratio > 1.0 + threshold) return "slower";
  // The band is symmetric in log space: 1/(1+t) is as much faster as 1+t is slower, and stays
  // positive for thresholds of 100% and more.
  const double fast = 1.0 / (1.0 + threshold);
  if (est.hi < 1.0 && est.ratio < fast) return "faster";
  if (est.lo >= fast && est.hi <= 1.0 + threshold) return "same";
  return "inconclusive";
}

std::vector<std::string> env_differences(const nlohmann::json& baseline_env,
                                         const nlohmann::json& current_env,
                                         const std::string& device) {
  std::vector<std::string> out;
  auto check = [&](const nlohmann::json& a, const nlohmann::json& b, const std::string& block,
                   const std::string& key) {
    const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json& x =
        block.empty() ? a : (a.is_object() && a.contains(block) ? a[block] : empty);
    const nlohmann::json& y =
        block.empty() ? b : (b.is_object() && b.contains(block) ? b[block] : empty);
    const std::string vx = json_check::text(x, key.c_str()), vy = json_check::text(y, key.c_str());
    if (vx != vy) {
      out.push_back(fmt::format("{}{}: {} -> {}", block.empty() ? "" : block + ".", key,
                                vx.empty() ? "(none)" : vx, vy.empty() ? "(none)" : vy));
    }
  };
  check(baseline_env, current_env, "", "device");
  if (device == "cuda") {
    for (const char* k : {"name", "driver_version", "cuda_runtime_version", "cudnn_version"})
      check(baseline_env, current_env, "gpu", k);
  } else {
    check(baseline_env, current_env, "cpu", "name");
    // The CPU reference's sums depend on the BLAS thread count; files from before it was
    // recorded are not held against it.
    const auto has = [](const nlohmann::json& env) {
      return env.is_object() && env.contains("cpu") && env["cpu"].is_object() &&
             env["cpu"].contains("blas_threads");
    };
    if (has(baseline_env) && has(current_env))
      check(baseline_env, current_env, "cpu", "blas_threads");
  }
  return out;
}

namespace {

std::string short_json(const nlohmann::json& j) {
  std::string t = j.dump();
  return t.size() > 60 ? t.substr(0, 57) + "..." : t;
}

// Depth-first, in the baseline's key order; the path as the spec reader names it. A key on one
// side only is not a difference: resolved specs write every default, so such a key is one the
// other file's mpbench did not have yet (the fp8 block, say), not one its user set.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b,
                             const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if ((path.empty() && it.key() == "precisions") || !b.contains(it.key())) continue;
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      std::string d = first_difference(*it, b[it.key()], p);
      if (!d.empty()) return d;
    }
    return "";
  }
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      std::string d = first_difference(a[i], b[i], fmt::format("{}[{}]", path, i));
      if (!d.empty()) return d;
    }
    if (a.size() != b.size()) return fmt::format("{}: {} -> {} elements", path, a.size(), b.size());
    return "";
  }
  if (a != b) return fmt::format("{}: {} -> {}", path, short_json(a), short_json(b));
  return "";
}

}  // namespace

std::string first_spec_difference(const nlohmann::json& baseline, const nlohmann::json& current) {
  return first_difference(baseline, current, "");
}

Comparison compare_reports(const std::vector<const Report*>& baselines, const Report& current,
                           const CompareOptions& options) {
  Comparison out;
  out.options = options;
  MPB_CHECK(!baselines.empty(), "compare: no baseline");
  Side base, cur;
  for (size_t i = 0; i < baselines.size(); ++i)
    add_runs(base, *baselines[i],
             baselines.size() > 1 ? fmt::format("baseline {}", i + 1) : "baseline");
  add_runs(cur, current, "current");
  // Which baseline file a run came from, for its environment and spec.
  auto report_of = [&](const RunResult* r) -> const Report& { return *base.file.at(r); };
  auto add_env = [&](std::vector<std::string>& to, const std::vector<std::string>& from) {
    for (const std::string& d : from)
      if (std::find(to.begin(), to.end(), d) == to.end()) to.push_back(d);
  };

  auto start_row = [](const RunResult& r) {
    CompareRow row;
    row.model = r.model;
    row.precision = r.precision;
    row.device = r.device;
    row.cuda_graphs = r.cuda_graphs;
    row.batch_size = r.batch_size;
    row.seed = r.seed;
    return row;
  };
  for (const Key& k : base.order) {
    const auto& runs = base.runs.at(k);
    CompareRow row = start_row(*runs.front());
    row.baseline_runs = runs;
    row.baseline = representative(runs);
    auto it = cur.runs.find(k);
    if (it == cur.runs.end()) {
      row.verdict = "missing";
      row.detail = "in the baseline only";
      row.blocking = true;
      out.rows.push_back(std::move(row));
      continue;
    }
    ++out.matched;
    row.current_runs = it->second;
    row.current = representative(it->second);
    for (const RunResult* b : runs)
      add_env(row.env_differences, env_differences(report_of(b).env, current.env, row.device));
    add_env(out.env_differences, row.env_differences);
    const nlohmann::json* sb = spec_of(report_of(row.baseline), *row.baseline);
    const nlohmann::json* sc = spec_of(current, *row.current);
    const std::string spec_diff = sb && sc ? first_spec_difference(*sb, *sc) : "";
    if (!spec_diff.empty()) {
      // Trained from another spec: its numbers are not the baseline's to judge.
      row.verdict = "spec-changed";
      row.detail = "spec differs at " + spec_diff;
      ++out.spec_changed;
    } else {
      judge_pair(row, options);
    }
    out.rows.push_back(std::move(row));
  }
  for (const Key& k : cur.order) {
    if (base.runs.count(k)) continue;
    const auto& runs = cur.runs.at(k);
    CompareRow row = start_row(*runs.front());
    row.current_runs = runs;
    row.current = representative(runs);
    row.verdict = "new";
    row.detail =
        row.current->status == RunStatus::Ok
            ? "in the current file only"
            : fmt::format("in the current file only; {}", run_status_name(row.current->status));
    out.rows.push_back(std::move(row));
  }
  for (const CompareRow& r : out.rows) {
    if (!r.regressions.empty()) ++out.regressions;
    if (r.blocking) ++out.blocking;
  }
  if (out.regressions > 0)
    out.exit_code = 1;
  else if (out.matched == 0 || out.spec_changed > 0 || (options.strict && out.blocking > 0))
    out.exit_code = 4;
  return out;
}

std::string format_compare_console(const Comparison& c) {
  TextTable table;
  table.head = headers();
  table.rule = true;
  for (const CompareRow& r : c.rows) table.rows.push_back(cells(r));
  std::string out = render_text_table(table);
  out += "\n" + rule_text(c.options) + "\n";
  if (!c.env_differences.empty()) {
    std::string d;
    for (const auto& x : c.env_differences) d += (d.empty() ? "" : "; ") + x;
    out += "environment differs: " + d + "\n";
  }
  out += summary_line(c) + "\n";
  return out;
}

std::string format_compare_markdown(const Comparison& c, const std::string& baseline_name,
                                    const std::string& current_name) {
  const auto esc = markdown_cell;
  std::string out = "### mpbench compare\n\n";
  const char* icon = c.exit_code == 0 ? (c.blocking ? ":warning:" : ":white_check_mark:") : ":x:";
  out += fmt::format("{} **{}**\n\n", icon, esc(summary_line(c)));
  out += fmt::format("Baseline `{}`, current `{}`.\n\n", esc(baseline_name), esc(current_name));
  if (!c.env_differences.empty()) {
    std::string d;
    for (const auto& x : c.env_differences) d += (d.empty() ? "" : "; ") + x;
    out += "Environment differs: " + esc(d) + "\n\n";
  }
  const auto hs = headers();
  out += "|";
  for (const auto& h : hs) out += " " + h + " |";
  out += "\n|";
  for (size_t i = 0; i < hs.size(); ++i) out += (i >= 3 && i <= 8) ? " ---: |" : " --- |";
  out += "\n";
  for (const CompareRow& r : c.rows) {
    auto cs = cells(r);
    if (!r.regressions.empty()) cs[9] = "**" + cs[9] + "**";
    out += "|";
    for (const auto& x : cs) out += " " + esc(x) + " |";
    out += "\n";
  }
  out += "\n" + esc(rule_text(c.options)) + "\n";
  return out;
}

nlohmann::json compare_to_json(const Comparison& c) {
  using nlohmann::json;
  auto num = [](double x) -> json { return std::isfinite(x) ? json(x) : json(nullptr); };
  auto opt = [&](const std::optional<double>& x) -> json { return x ? num(*x) : json(nullptr); };
  const CompareOptions& o = c.options;
  json rows = json::array();
  for (const CompareRow& r : c.rows) {
    json row = {
        {"model", r.model},
        {"precision", r.precision},
        {"device", r.device},
        {"batch_size", r.batch_size},
        {"cuda_graphs", r.cuda_graphs},
        {"seed", r.seed ? json(*r.seed) : json(nullptr)},
        {"verdict", r.verdict},
        {"detail", r.detail},
        {"env_differences", r.env_differences},
        {"regressions", r.regressions},
        {"blocking", r.blocking},
        {"baseline_status", r.baseline ? json(run_status_name(r.baseline->status)) : json(nullptr)},
        {"current_status", r.current ? json(run_status_name(r.current->status)) : json(nullptr)},
        {"repetitions", {{"baseline", r.n_baseline}, {"current", r.n_current}}},
        {"memory_change", opt(r.memory_change)},
        {"accuracy_delta_points", opt(r.accuracy_delta)},
        {"loss_change", opt(r.loss_change)}};
    row["time_ratio"] = r.time.valid ? json{{"ratio", num(r.time.ratio)},
                                            {"ci_low", num(r.time.lo)},
                                            {"ci_high", num(r.time.hi)}}
                                     : json(nullptr);
    rows.push_back(std::move(row));
  }
  return {{"kind", "mpbench-compare"},
          {"schema_version", 1},
          {"options",
           {{"time_threshold", o.time_threshold},
            {"memory_threshold", o.memory_threshold},
            {"accuracy_threshold_points", o.accuracy_threshold},
            {"loss_threshold", o.loss_threshold ? json(*o.loss_threshold) : json(nullptr)},
            {"strict", o.strict},
            {"method",
             "ratio of the medians over repetitions of median epoch times, 95% hierarchical "
             "percentile bootstrap CI (repetitions, then epochs within each)"},
            {"min_repetitions", o.min_repetitions},
            {"bootstrap_resamples", o.bootstrap_resamples},
            {"seed", o.seed}}},
          {"env_differences", c.env_differences},
          {"regressions", c.regressions},
          {"blocking", c.blocking},
          {"matched", c.matched},
          {"spec_changed", c.spec_changed},
          {"exit_code", c.exit_code},
          {"rows", std::move(rows)}};
}

}  // namespace mpbench
