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

// A seeded run (`run --seeds`) matches the run of the same seed.
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

std::map<Key, const RunResult*> index_runs(const Report& r, const char* side) {
  std::map<Key, const RunResult*> m;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const Key k = key_of(r.runs[i]);
    if (!m.emplace(k, &r.runs[i]).second) {
      throw_bad_input(
          fmt::format("{}: runs[{}]: {} appears twice; cannot match it", side, i, key_name(k)));
    }
  }
  return m;
}

void judge_pair(CompareRow& row, const CompareOptions& o,
                const std::vector<std::string>& env_diff) {
  const RunResult& b = *row.baseline;
  const RunResult& c = *row.current;
  const bool both_ok = b.status == RunStatus::Ok && c.status == RunStatus::Ok;

  const std::vector<double> tb = epoch_times(b), tc = epoch_times(c);
  row.n_baseline = tb.size();
  row.n_current = tc.size();
  if (both_ok) {
    row.time = bootstrap_median_ratio(tb, tc, o.bootstrap_resamples, o.seed);
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

  // Another GPU, driver or library makes every number incomparable, statuses included (a smaller
  // GPU may OOM): say so rather than gate on it.
  if (!env_diff.empty()) {
    row.verdict = "env-mismatch";
    row.detail = env_diff.front();
    for (size_t i = 1; i < env_diff.size(); ++i) row.detail += "; " + env_diff[i];
    if (c.status != RunStatus::Ok)
      row.detail += fmt::format("; current: {}", run_status_name(c.status));
    row.blocking = true;
    return;
  }
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
      time_verdict(row.time, row.n_baseline, row.n_current, o.time_threshold, o.min_samples);
  if (row.verdict == "slower") row.regressions.push_back("time");
  if (row.verdict == "inconclusive") {
    row.blocking = true;
    row.detail = std::min(row.n_baseline, row.n_current) < static_cast<size_t>(o.min_samples)
                     ? fmt::format("{} vs {} epoch samples (need {})", row.n_baseline,
                                   row.n_current, o.min_samples)
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

std::vector<std::string> headers() {
  return {"model",  "precision", "device",     "batch",   "time ratio [95% CI]", "epochs",
          "memory", "accuracy",  "final loss", "verdict", "regressed",           "detail"};
}
std::vector<std::string> cells(const CompareRow& r) {
  const std::string n =
      r.baseline && r.current ? fmt::format("{}/{}", r.n_baseline, r.n_current) : "-";
  return {r.model,      r.precision, mode_cell(r),    std::to_string(r.batch_size),
          time_cell(r), n,           memory_cell(r),  accuracy_cell(r),
          loss_cell(r), r.verdict,   regress_cell(r), r.detail.empty() ? "-" : r.detail};
}

std::string summary_line(const Comparison& c) {
  if (c.exit_code == 1)
    return fmt::format("FAIL: {} regression(s) beyond the thresholds", c.regressions);
  if (c.exit_code == 4)
    return fmt::format("FAIL (--strict): {} inconclusive, env-mismatch or missing row(s)",
                       c.blocking);
  if (c.blocking > 0)
    return fmt::format(
        "PASS: no regression ({} inconclusive, env-mismatch or missing row(s); "
        "--strict would fail)",
        c.blocking);
  return "PASS: no regression";
}

std::string rule_text(const CompareOptions& o) {
  std::string s = fmt::format(
      "time: median epoch-time ratio, 95% bootstrap CI ({} resamples); threshold {:.4g}%; memory "
      "(training peak) threshold {:.4g}%; accuracy threshold {:.4g} pt",
      o.bootstrap_resamples, 100 * o.time_threshold, 100 * o.memory_threshold,
      o.accuracy_threshold);
  if (o.loss_threshold) s += fmt::format("; final loss threshold {:.4g}%", 100 * *o.loss_threshold);
  return s;
}

}  // namespace

std::string time_verdict(const RatioEstimate& est, size_t n_baseline, size_t n_current,
                         double threshold, int min_samples) {
  const size_t need = static_cast<size_t>(std::max(min_samples, 1));
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

Comparison compare_reports(const Report& baseline, const Report& current,
                           const CompareOptions& options) {
  Comparison out;
  out.options = options;
  const auto base_idx = index_runs(baseline, "baseline");
  const auto cur_idx = index_runs(current, "current");
  std::map<std::string, std::vector<std::string>> env_by_device;
  auto env_for = [&](const std::string& device) -> const std::vector<std::string>& {
    auto it = env_by_device.find(device);
    if (it == env_by_device.end())
      it = env_by_device.emplace(device, env_differences(baseline.env, current.env, device)).first;
    return it->second;
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
  for (const RunResult& b : baseline.runs) {
    CompareRow row = start_row(b);
    row.baseline = &b;
    auto it = cur_idx.find(key_of(b));
    if (it == cur_idx.end()) {
      row.verdict = "missing";
      row.detail = "in the baseline only";
      row.blocking = true;
    } else {
      row.current = it->second;
      judge_pair(row, options, env_for(b.device));
      if (out.env_differences.empty()) out.env_differences = env_for(b.device);
    }
    out.rows.push_back(std::move(row));
  }
  for (const RunResult& c : current.runs) {
    if (base_idx.count(key_of(c))) continue;
    CompareRow row = start_row(c);
    row.current = &c;
    row.verdict = "new";
    row.detail = c.status == RunStatus::Ok
                     ? "in the current file only"
                     : fmt::format("in the current file only; {}", run_status_name(c.status));
    out.rows.push_back(std::move(row));
  }
  for (const CompareRow& r : out.rows) {
    if (!r.regressions.empty()) ++out.regressions;
    if (r.blocking) ++out.blocking;
  }
  out.exit_code = out.regressions > 0 ? 1 : (options.strict && out.blocking > 0 ? 4 : 0);
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
        {"regressions", r.regressions},
        {"blocking", r.blocking},
        {"baseline_status", r.baseline ? json(run_status_name(r.baseline->status)) : json(nullptr)},
        {"current_status", r.current ? json(run_status_name(r.current->status)) : json(nullptr)},
        {"samples", {{"baseline", r.n_baseline}, {"current", r.n_current}}},
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
            {"method", "ratio of median epoch times, 95% percentile bootstrap CI"},
            {"bootstrap_resamples", o.bootstrap_resamples},
            {"seed", o.seed}}},
          {"env_differences", c.env_differences},
          {"regressions", c.regressions},
          {"blocking", c.blocking},
          {"exit_code", c.exit_code},
          {"rows", std::move(rows)}};
}

}  // namespace mpbench
