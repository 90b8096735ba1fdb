#include "app/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "app/console_table.h"
#include "app/svg.h"
#include "kernels/error.h"
#include "models/input_file.h"
#include "train/json_check.h"
#include "train/printable.h"

namespace mpbench {

namespace {

// A run's identity less its repetition (run_key): a seeded run (`run --seeds`) matches the run
// of the same seed, a data-parallel run runs of its rank count (the batch is per rank), and
// repetitions share a key.
using Key = RunKey;

Key key_of(const RunResult& r) {
  return run_key(r, /*with_repetition=*/false);
}

struct Side {
  std::map<Key, std::vector<const RunResult*>> runs;
  std::vector<Key> order;                          // first appearance
  std::map<const RunResult*, const Report*> file;  // the file each run came from
};

// One file's runs added to a side; within a file a key appears once per repetition (the readers
// check it; a report made in memory is checked here).
void add_runs(Side& side, const Report& r, const std::string& what) {
  try {
    check_unique_runs(r.runs);
  } catch (const Error& e) {
    throw_bad_input(fmt::format("{}: {}", what, e.what()));
  }
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const Key k = key_of(r.runs[i]);
    auto& list = side.runs[k];
    if (list.empty()) side.order.push_back(k);
    list.push_back(&r.runs[i]);
    side.file[&r.runs[i]] = &r;
  }
}

// The repetition whose status is the side's: a failure in any of them is not averaged away.
const RunResult* representative(const std::vector<const RunResult*>& runs) {
  for (const RunResult* r : runs)
    if (r->status != RunStatus::Ok) return r;
  return runs.front();
}

CompareRow::Values values_of(const std::vector<const RunResult*>& runs) {
  CompareRow::Values v;
  std::vector<double> acc, loss;
  bool finite = true;
  for (const RunResult* r : runs) {
    if (r->status != RunStatus::Ok) continue;
    v.training_peak = std::max(v.training_peak, static_cast<uint64_t>(r->memory.training_peak));
    acc.push_back(r->final_accuracy);
    finite = finite && std::isfinite(r->final_loss);
    loss.push_back(r->final_loss);
  }
  v.accuracy = compute_time_stats(acc).median;
  v.loss = finite ? compute_time_stats(loss).median : std::numeric_limits<double>::quiet_NaN();
  return v;
}

// A change exactly at a threshold is within it: 102000 / 100000 - 1 is 0.020000000000000018 in
// double, 100 (0.985 - 0.98) is 0.5000000000000004.
constexpr double kThresholdSlack = 1e-9;

// The repetitions that did not train ok; with `status`, those that ended so.
size_t failed_count(const std::vector<const RunResult*>& runs,
                    std::optional<RunStatus> status = std::nullopt) {
  return static_cast<size_t>(std::count_if(runs.begin(), runs.end(), [&](const RunResult* r) {
    return status ? r->status == *status : r->status != RunStatus::Ok;
  }));
}

// "left out of time, measured on a busy machine: 2 of 5 current repetitions".
std::string busy_left_out(const CompareRow& r) {
  std::vector<std::string> sides;
  auto side = [&](size_t busy, const std::vector<const RunResult*>& runs, const char* name) {
    if (busy > 0)
      sides.push_back(fmt::format("{} of {} {} repetition{}", busy, runs.size(), name,
                                  runs.size() == 1 ? "" : "s"));
  };
  side(r.busy_baseline, r.baseline_runs, "baseline");
  side(r.busy_current, r.current_runs, "current");
  return fmt::format("left out of time, measured on a busy machine: {}", fmt::join(sides, ", "));
}

// A side's epoch times that time counts (below), by the file they came from, in the order the
// files first appear: times[i] are the repetitions of files[i].
struct FileTimes {
  Runs times;
  std::vector<const Report*> files;
};

// Paired: the time of each pair of files (a baseline's and the current's run one after the
// other) from the medians of their repetitions, a pair lacking either side left out.
RatioEstimate paired_time(const FileTimes& base, const FileTimes& cur,
                          const std::map<const Report*, size_t>& pair_of, const CompareOptions& o,
                          size_t& pairs) {
  std::map<size_t, PairedRound> rounds;
  for (const FileTimes* side : {&base, &cur})
    for (size_t f = 0; f < side->files.size(); ++f) {
      PairedRound& round = rounds[pair_of.at(side->files[f])];
      for (const std::vector<double>& epochs : side->times[f])
        (side == &base ? round.baseline : round.current)
            .push_back(compute_time_stats(epochs).median);
    }
  std::vector<PairedRound> both;
  for (auto& [pair, round] : rounds)
    if (!round.baseline.empty() && !round.current.empty()) both.push_back(std::move(round));
  pairs = both.size();
  return paired_median_ratio(both, o.bootstrap_resamples, o.seed);
}

void judge_pair(CompareRow& row, const CompareOptions& o,
                const std::map<const RunResult*, const Report*>& file_of,
                const std::map<const Report*, std::string>& file_name,
                const std::map<const Report*, size_t>& pair_of) {
  const RunResult& b = *row.baseline;
  const RunResult& c = *row.current;
  const size_t nb = row.baseline_runs.size(), nc = row.current_runs.size();
  const size_t fb = failed_count(row.baseline_runs), fc = failed_count(row.current_runs);
  // Numbers are judged over the repetitions that trained, wherever both sides have some: one
  // failed repetition must not switch every check off (a 2x slower mode passed beside it).
  const bool comparable = fb < nb && fc < nc;

  // Each side's runs by the file they came from (runs of one file share a process). A run
  // measured while something else held its CPUs is left out, counted in `busy`: such a run is
  // slower, as a regression is, and steady, so no interval tells it from one.
  auto by_file = [&](const std::vector<const RunResult*>& runs, size_t& n, size_t& busy) {
    std::map<const Report*, size_t> index;
    FileTimes out;
    for (const RunResult* r : runs) {
      if (r->status != RunStatus::Ok || epoch_times(*r).empty()) continue;
      if (ran_busy(*r)) {
        ++busy;
        continue;
      }
      const auto [it, fresh] = index.emplace(file_of.at(r), out.times.size());
      if (fresh) {
        out.times.emplace_back();
        out.files.push_back(file_of.at(r));
      }
      out.times[it->second].push_back(epoch_times(*r));
      ++n;
    }
    return out;
  };
  const FileTimes tb = by_file(row.baseline_runs, row.n_baseline, row.busy_baseline);
  const FileTimes tc = by_file(row.current_runs, row.n_current, row.busy_current);
  row.baseline_values = values_of(row.baseline_runs);
  row.current_values = values_of(row.current_runs);
  const CompareRow::Values &bv = row.baseline_values, &cv = row.current_values;
  if (comparable) {
    row.time = o.paired
                   ? paired_time(tb, tc, pair_of, o, row.pairs)
                   : hierarchical_median_ratio(tb.times, tc.times, o.bootstrap_resamples, o.seed);
    // Times near 0 against large ones (a hand-edited file) overflow the ratio: no verdict can
    // rest on it.
    if (row.time.valid && !(std::isfinite(row.time.ratio) && std::isfinite(row.time.lo) &&
                            std::isfinite(row.time.hi) && row.time.lo > 0)) {
      std::vector<std::string> files;  // the runs' files, baseline first
      for (const auto* side : {&row.baseline_runs, &row.current_runs})
        for (const RunResult* r : *side) {
          const std::string& f = file_name.at(file_of.at(r));
          if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
        }
      throw_bad_input(fmt::format(
          "{}: runs[] of {} {}: the baseline's and the current epoch times have no finite ratio "
          "(a time near 0 against a large one)",
          fmt::join(files, ", "), c.model, c.precision));
    }
    if (bv.training_peak > 0) {
      row.memory_change =
          static_cast<double>(cv.training_peak) / static_cast<double>(bv.training_peak) - 1.0;
    }
    row.accuracy_delta = 100.0 * (cv.accuracy - bv.accuracy);
    if (bv.loss != 0 || cv.loss != 0) {
      row.loss_change =
          bv.loss != 0 ? cv.loss / bv.loss - 1.0 : std::numeric_limits<double>::infinity();
    } else {
      row.loss_change = 0.0;
    }
  }
  // An environment difference is named and blocks --strict; it never switches a check off.
  if (!row.env_differences.empty()) row.blocking = true;

  // "1 of 15 repetitions oom": how many of a side's repetitions failed, and how.
  auto failures = [](size_t failed, size_t n, const RunResult& r) {
    const std::string what = run_status_name(r.status);
    return n > 1 ? fmt::format("{} of {} repetitions {}", failed, n, what) : what;
  };
  if (fc > 0) {
    row.verdict = run_status_name(c.status);
    row.detail = nc > 1 ? fmt::format("{} of {} repetitions{}", fc, nc,
                                      c.status_detail.empty() ? "" : ": " + c.status_detail)
                        : c.status_detail;
    // A larger share of the repetitions fails, in some way, than did so in the baseline (any,
    // where every baseline repetition completed; a diverging run where one ran out of memory):
    // the run no longer completes as it did.
    for (RunStatus s :
         {RunStatus::Oom, RunStatus::Diverged, RunStatus::Failed, RunStatus::Unsupported})
      if (failed_count(row.current_runs, s) * nb > failed_count(row.baseline_runs, s) * nc) {
        row.regressions.push_back("status");
        break;
      }
    if (fb > 0) row.detail = fmt::format("baseline: {}; {}", failures(fb, nb, b), row.detail);
  } else if (fb == nb) {
    row.verdict = "recovered";
    row.detail = fmt::format("baseline: {}", failures(fb, nb, b));
    return;
  }
  if (!comparable) return;

  // Paired, the unit is the pair: its two runs saw the machine alike.
  const std::string time =
      o.paired ? time_verdict(row.time, row.pairs, row.pairs, o.time_threshold, o.min_repetitions)
               : time_verdict(row.time, row.n_baseline, row.n_current, o.time_threshold,
                              o.min_repetitions);
  if (time == "slower") row.regressions.push_back("time");
  if (time == "inconclusive") row.blocking = true;  // whatever the verdict shows: --strict fails
  if (fc == 0) {
    row.verdict = time;
    if (time == "inconclusive") {
      const size_t need = static_cast<size_t>(std::max(o.min_repetitions, 1));
      // What the short side needs: more baseline files serve the baseline only. --repeat as the
      // README's recipe has it, or the minimum where that is more.
      const size_t repeat = std::max<size_t>(need, 5);
      const bool pairs_short = o.paired && row.pairs < need;
      const bool base_short = row.n_baseline < need && !o.paired,
                 cur_short = row.n_current < need && !o.paired;
      const bool lost_to_busy = (base_short && row.busy_baseline > 0) ||
                                (cur_short && row.busy_current > 0) ||
                                (pairs_short && row.busy_baseline + row.busy_current > 0);
      const std::string how =
          lost_to_busy  ? "run again where nothing else holds the CPUs"
          : pairs_short ? "run more pairs"
          : base_short && cur_short
              ? fmt::format("run both with --repeat {}; the baseline may also be several files",
                            repeat)
          : cur_short ? fmt::format("run the current with --repeat {}", repeat)
                      : fmt::format(
                            "run the baseline with --repeat {}, or give several "
                            "--baseline files",
                            repeat);
      row.detail = pairs_short ? fmt::format(
                                     "{} pair{} with times on both sides; time needs {} "
                                     "({})",
                                     row.pairs, row.pairs == 1 ? "" : "s", need, how)
                   : base_short || cur_short
                       ? fmt::format("{} vs {} repetitions; time needs {} a side ({})",
                                     row.n_baseline, row.n_current, need, how)
                       : inconclusive_time(row.time, o.time_threshold);
      if (o.paired && !pairs_short)
        if (const int n = pairs_to_settle(row.time, row.pairs, o.time_threshold))
          row.detail += fmt::format(
              "; pairs spread as these ({}sd of their log ratios {:.3f}) would settle it at {}",
              trimmed_rounds(static_cast<int>(row.pairs)) > 0 ? "Winsorized " : "", row.time.log_sd,
              n > kMostPairs ? fmt::format("more than {}", kMostPairs)
                             : fmt::format("about {}", n));
    }
    if (row.busy_baseline + row.busy_current > 0) {
      const std::string left_out = busy_left_out(row);
      row.detail = row.detail.empty() ? left_out : row.detail + "; " + left_out;
    }
    if (fb > 0)
      row.detail = fmt::format("baseline: {}{}", failures(fb, nb, b),
                               row.detail.empty() ? "" : "; " + row.detail);
  }
  // A NaN difference must fail the gate, hence the negated comparisons.
  if (row.memory_change && !(*row.memory_change <= o.memory_threshold + kThresholdSlack))
    row.regressions.push_back("memory");
  if (row.accuracy_delta && !(-*row.accuracy_delta <= o.accuracy_threshold + kThresholdSlack))
    row.regressions.push_back("accuracy");
  if (o.loss_threshold) {
    const double diff = std::fabs(cv.loss - bv.loss);
    if (!(diff <= (*o.loss_threshold + kThresholdSlack) * std::fabs(bv.loss)))
      row.regressions.push_back("loss");
  } else if (std::isfinite(bv.loss) && !std::isfinite(cv.loss)) {
    row.regressions.push_back("loss");  // a loss gone to NaN or inf is no threshold's question
  }
}

std::string pct(double x, int digits = 1) {
  // A change of a million percent and up (a loss of 1e300 in a hand-edited file) in exponent
  // form: fixed notation would print every one of its digits.
  if (std::fabs(x) >= 1e4) return fmt::format("{:+.3g}%", 100.0 * x);
  return fmt::format("{:+.{}f}%", 100.0 * x, digits);
}

std::string time_cell(const CompareRow& r) {
  if (!r.time.valid) return "-";
  // Nothing varied to resample (one epoch a side): no interval, not a point that reads as sure.
  if (r.time.lo == r.time.hi) return fmt::format("{:.3f} [n/a]", r.time.ratio);
  return fmt::format("{:.3f} [{:.3f}, {:.3f}]", r.time.ratio, r.time.lo, r.time.hi);
}
std::string memory_cell(const CompareRow& r) {
  if (!r.memory_change) return "-";
  return fmt::format("{} ({})", pct(*r.memory_change, 2),
                     format_bytes(r.current_values.training_peak));
}
std::string accuracy_cell(const CompareRow& r) {
  if (!r.accuracy_delta) return "-";
  return fmt::format("{:+.2f} pt ({:.2f}%)", *r.accuracy_delta, 100.0 * r.current_values.accuracy);
}
std::string loss_cell(const CompareRow& r) {
  if (!r.loss_change) return "-";
  if (!std::isfinite(r.current_values.loss) || !std::isfinite(r.baseline_values.loss))
    return fmt::format("not finite ({:.4g} -> {:.4g})", r.baseline_values.loss,
                       r.current_values.loss);
  return fmt::format("{} ({:.4g})", pct(*r.loss_change, 3), r.current_values.loss);
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

// "64", or "64 x2 ranks" for a data-parallel run.
std::string batch_cell(const CompareRow& r) {
  return r.ranks > 1 ? fmt::format("{} x{} ranks", r.batch_size, r.ranks)
                     : std::to_string(r.batch_size);
}

std::vector<std::string> headers() {
  return {"model",  "precision", "device",     "batch",   "time ratio [95% CI]", "reps",
          "memory", "accuracy",  "final loss", "verdict", "regressed",           "detail"};
}
std::vector<std::string> cells(const CompareRow& r, const CompareOptions& o) {
  const std::string n =
      r.baseline && r.current && r.verdict != "spec-changed"  // not judged: no counts
          ? fmt::format("{}/{}", r.n_baseline, r.n_current) +
                (o.paired ? fmt::format(", {} pair{}", r.pairs, r.pairs == 1 ? "" : "s") : "")
          : "-";
  return {r.model,      r.precision, mode_cell(r),    batch_cell(r),
          time_cell(r), n,           memory_cell(r),  accuracy_cell(r),
          loss_cell(r), r.verdict,   regress_cell(r), detail_cell(r)};
}

std::string summary_line(const Comparison& c) {
  if (c.exit_code == 1)
    return fmt::format("FAIL: {} regression(s) beyond the thresholds", c.regressions);
  if (c.matched == 0)
    return fmt::format(
        "FAIL: nothing matched: no run of the current file has a counterpart in the baseline "
        "({} row(s) missing, {} new); check the model names, batch sizes, devices, "
        "--cuda-graphs, seeds and rank counts",
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

// How time was judged, for the rule line and the JSON's options.method.
std::string time_method(const CompareOptions& o) {
  if (o.paired)
    return fmt::format(
        "paired: the median over pairs (a baseline file and a current file run one after the "
        "other) of "
        "each pair's ratio of the medians over its files' repetitions of median epoch times, 95% "
        "CI the hull of a bootstrap of the pairs and their repetitions and the t interval of the "
        "pairs' log ratios (from 10 pairs a fifth trimmed a side; {} resamples, at least {} "
        "pairs)",
        o.bootstrap_resamples, o.min_repetitions);
  return fmt::format(
      "ratio of the median over repetitions of median epoch times, 95% hierarchical percentile "
      "bootstrap CI (files, then their repetitions, then epochs within each; {} resamples, at "
      "least {} repetitions a side), from 3 files in all at least the Student t interval of the "
      "files' log medians",
      o.bootstrap_resamples, o.min_repetitions);
}

std::string rule_text(const CompareOptions& o) {
  std::string s = fmt::format(
      "time: {}; threshold {:.4g}%; memory (training peak) threshold {:.4g}%; accuracy threshold "
      "{:.4g} pt",
      time_method(o), 100 * o.time_threshold, 100 * o.memory_threshold, o.accuracy_threshold);
  if (o.loss_threshold) s += fmt::format("; final loss threshold {:.4g}%", 100 * *o.loss_threshold);
  return s;
}

}  // namespace

std::string inconclusive_time(const RatioEstimate& est, double threshold) {
  const double slow = 1.0 + threshold, fast = 1.0 / (1.0 + threshold);
  const bool past_slow = est.hi > slow + kThresholdSlack,
             past_fast = est.lo < fast - kThresholdSlack;
  const std::string interval = fmt::format("the interval [{:.3f}, {:.3f}]", est.lo, est.hi);
  if (past_slow && past_fast)
    return fmt::format("{} is wider than the band [{:.3f}, {:.3f}]", interval, fast, slow);
  // One edge crossed: the band may hold the ratio, or it may lie past that edge. Past it is the
  // rule's "slower" (faster): the interval clear of 1 and the estimate past the edge.
  return fmt::format(
      "{} reaches past the band's {} edge {:.3f}: neither within the band nor {} (an interval "
      "clear of 1 and an estimate past the edge)",
      interval, past_slow ? "slower" : "faster", past_slow ? slow : fast,
      past_slow ? "slower" : "faster");
}

int pairs_to_settle(const RatioEstimate& est, size_t pairs, double threshold) {
  const double edge = std::log1p(threshold), m = std::fabs(est.log_mean);
  const double room = m <= edge ? edge - m : m;
  if (!(est.log_sd > 0)) return 0;
  // From fewer pairs than are trimmed, the untrimmed interval's count: how the trimmed spread of
  // more pairs would compare is not known from these (stray pairs would leave it; on normal
  // noise its interval is 8-11% wider at a count, simulated, so it needs about a fifth more
  // pairs than this; on two-valued ratios 2.6 times as many).
  const int n = rounds_for_half_width(est.log_sd, room, static_cast<int>(pairs), kMostPairs,
                                      trimmed_rounds(static_cast<int>(pairs)) > 0);
  return n == 0 ? kMostPairs + 1 : n > static_cast<int>(pairs) ? n : 0;
}

std::string time_verdict(const RatioEstimate& est, size_t n_baseline, size_t n_current,
                         double threshold, int min_repetitions) {
  const size_t need = static_cast<size_t>(std::max(min_repetitions, 1));
  if (!est.valid || n_baseline < need || n_current < need) return "inconclusive";
  // A ratio exactly at a bound is within the band (kThresholdSlack: 3.45 / 3.0 is
  // 1.1500000000000001).
  const double slow = 1.0 + threshold + kThresholdSlack;
  if (est.lo > 1.0 && est.ratio > slow) return "slower";
  // The band is symmetric in log space: 1/(1+t) is as much faster as 1+t is slower, and stays
  // positive for thresholds of 100% and more.
  const double fast = 1.0 / (1.0 + threshold) - kThresholdSlack;
  if (est.hi < 1.0 && est.ratio < fast) return "faster";
  if (est.lo >= fast && est.hi <= slow) return "same";
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
    // The CPU reference's sums depend on the BLAS thread count; files from before a field was
    // recorded are not held against it.
    const auto has = [&](const char* key) {
      for (const nlohmann::json* env : {&baseline_env, &current_env})
        if (!env->is_object() || !env->contains("cpu") || !(*env)["cpu"].is_object() ||
            !(*env)["cpu"].contains(key))
          return false;
      return true;
    };
    // The native backend has no BLAS (mpirun binds each rank to a core, so OpenBLAS reported 1
    // thread there against 2 in a plain run, and refused a --scaling-baseline for it).
    if (device == "reference" && has("blas_threads"))
      check(baseline_env, current_env, "cpu", "blas_threads");
    // And on the kernels OpenBLAS picked for the CPU: one name, "AMD EPYC", covers Zen 4 (its
    // Cooperlake kernels) and Zen 5 (Haswell ones), which round and run differently.
    if (device == "reference" && has("blas_core"))
      check(baseline_env, current_env, "cpu", "blas_core");
    // The native backend's speed is its threads' and its ISA's (--threads, --cpu-isa).
    if (device == "cpu")
      for (const char* k : {"threads", "isa"}) check(baseline_env, current_env, "native_cpu", k);
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
// other file's mpbench did not have yet (the fp8 block, say), not one its user set. Keys on
// both sides that the other lacks are: one model in two spellings (a ResNet's width, blocks, ...
// against its stages), which passed as the same spec whatever the blocks.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b,
                             const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if ((path.empty() && it.key() == "precisions") || !b.contains(it.key())) continue;
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      std::string d = first_difference(*it, b[it.key()], p);
      if (!d.empty()) return d;
    }
    auto only = [&](const nlohmann::json& x, const nlohmann::json& y) {
      std::vector<std::string> keys;
      for (auto it = x.begin(); it != x.end(); ++it)
        if (!y.contains(it.key()) && !(path.empty() && it.key() == "precisions"))
          keys.push_back(it.key());
      return keys;
    };
    const std::vector<std::string> a_only = only(a, b), b_only = only(b, a);
    if (!a_only.empty() && !b_only.empty())
      return fmt::format("{}{}{} -> {}", path, path.empty() ? "" : ": ", fmt::join(a_only, ", "),
                         fmt::join(b_only, ", "));
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

std::string data_parallel_difference(const RunResult& baseline, const RunResult& current) {
  const auto& b = baseline.data_parallel;
  const auto& c = current.data_parallel;
  if (!b || !c) return "";
  if (b->grad_reduce != c->grad_reduce)
    return fmt::format("--grad-reduce: {} -> {}", b->grad_reduce, c->grad_reduce);
  if (b->bucket_bytes != c->bucket_bytes)
    return fmt::format("--bucket-mb: {:g} -> {:g}", b->bucket_bytes / 1048576.0,
                       c->bucket_bytes / 1048576.0);
  return "";
}

namespace {

// Where the baseline is one file: its time interval holds the noise between repetitions inside
// one process, not between processes; empty otherwise.
std::string one_baseline_note(const Comparison& c) {
  if (c.baseline_files != 1 || c.options.paired) return "";
  bool timed = false;  // a row whose time was judged or could have been
  for (const CompareRow& r : c.rows) timed = timed || r.time.valid;
  if (!timed) return "";
  return "note: one baseline file: the time interval holds the noise between its repetitions, "
         "not between processes, which runs made minutes apart show most of (README, 'mpbench "
         "as a CI performance gate': three baseline files)";
}

// Rows judged slower whose current runs' own epochs varied past kNoisyCv (run_flags' "noisy"),
// a sign of a busy runner, which slows a run as a regression does (an empirical QA: a busy
// core's runs were flagged, and compare said nothing); and the rows whose time was judged
// without the runs flagged busy, which were left out.
std::vector<std::string> busy_runner_notes(
    const Comparison& c, const std::map<const RunResult*, const Report*>& file_of) {
  std::vector<std::string> out;
  std::vector<std::string> noisy;
  for (const CompareRow& r : c.rows) {
    if (std::find(r.regressions.begin(), r.regressions.end(), "time") == r.regressions.end())
      continue;
    if (std::any_of(r.current_runs.begin(), r.current_runs.end(), [&](auto* run) {
          const std::vector<std::string> f = run_flags(*run, file_of.at(run)->runs);
          return std::find(f.begin(), f.end(), "noisy") != f.end();
        }))
      noisy.push_back(r.model + " " + r.precision);
  }
  if (!noisy.empty())
    out.push_back(fmt::format(
        "note: {} slower in time with noisy epochs in the current file (their spread over "
        "{:.0f}%): a busy runner slows a run as a regression does; run the job again before "
        "trusting it",
        fmt::join(noisy, ", "), 100 * kNoisyCv));
  size_t rows = 0, busy = 0, runs = 0;
  for (const CompareRow& r : c.rows) {
    if (r.busy_baseline + r.busy_current == 0) continue;
    ++rows;
    busy += r.busy_baseline + r.busy_current;
    runs += r.baseline_runs.size() + r.current_runs.size();
  }
  if (rows > 0)
    out.push_back(fmt::format(
        "note: {} of {} repetitions of {} row(s) left out of time: measured while their threads "
        "waited for CPUs that something else held (flagged busy: their host_load), they are "
        "slower as a regression is, and as steady; the rows' details say which",
        busy, runs, rows));
  return out;
}

// A --memory-limit that differs between the files (env.memory_limit_bytes; a file from before it
// was recorded is left out): a mode out of memory under one may fit under the other. Nothing else
// a run measures depends on it.
std::string memory_limit_note(const std::vector<const Report*>& baselines,
                              const std::vector<const Report*>& currents) {
  // Each side's distinct limits, in file order.
  auto limits = [](const std::vector<const Report*>& side) {
    std::vector<std::string> out;
    for (const Report* r : side) {
      if (!r->env.is_object() || !r->env.contains("memory_limit_bytes")) continue;
      const nlohmann::json& v = r->env["memory_limit_bytes"];
      const std::string l = v.is_number_unsigned() ? format_bytes(v.get<uint64_t>()) : "none";
      if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
    }
    return out;
  };
  const std::vector<std::string> base = limits(baselines), cur = limits(currents);
  if (base.empty() || cur.empty() || (base.size() == 1 && base == cur)) return "";
  return fmt::format(
      "note: --memory-limit differs: baseline {}, current {}; a mode out of memory under one "
      "limit may fit under the other",
      fmt::join(base, " and "), fmt::join(cur, " and "));
}

}  // namespace

Comparison compare_reports(const std::vector<const Report*>& baselines,
                           const std::vector<const Report*>& currents,
                           const CompareOptions& options, const std::vector<std::string>& names) {
  Comparison out;
  out.options = options;
  out.baseline_files = baselines.size();
  out.current_files = currents.size();
  MPB_CHECK(!baselines.empty() && !currents.empty(), "compare: no baseline or no current");
  if (options.paired && baselines.size() != currents.size())
    throw_bad_input(fmt::format(
        "compare --paired: {} baseline file{} and {} current file{}; each pair is a baseline "
        "file and the current file run beside it",
        baselines.size(), baselines.size() == 1 ? "" : "s", currents.size(),
        currents.size() == 1 ? "" : "s"));
  Side base, cur;
  auto name = [&](size_t i, const std::string& otherwise) {
    return i < names.size() ? names[i] : otherwise;
  };
  std::map<const Report*, std::string> file_name;  // what a message calls each file
  std::map<const Report*, size_t> pair_of;         // paired: the pair a file belongs to
  auto add_side = [&](Side& side, const std::vector<const Report*>& files, size_t first,
                      const char* what) {
    for (size_t i = 0; i < files.size(); ++i) {
      file_name[files[i]] =
          name(first + i, files.size() > 1 ? fmt::format("{} {}", what, i + 1) : what);
      pair_of[files[i]] = i;
      add_runs(side, *files[i], file_name[files[i]]);
    }
  };
  add_side(base, baselines, 0, "baseline");
  add_side(cur, currents, baselines.size(), "current");
  std::map<const RunResult*, const Report*> file_of = base.file;
  file_of.insert(cur.file.begin(), cur.file.end());
  // Which file a run came from, for its environment and spec.
  auto report_of = [&](const RunResult* r) -> const Report& { return *file_of.at(r); };
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
    row.ranks = run_ranks(r);
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
    // Every baseline file's against every current file's (the first run of each file is its
    // file's): repetitions pooled from another spec or machine would be judged as the side's,
    // and which file came first (a glob's order) would decide.
    auto first_of_each_file = [&](const std::vector<const RunResult*>& side) {
      std::vector<const RunResult*> out;
      for (const RunResult* r : side)
        if (std::none_of(out.begin(), out.end(),
                         [&](const RunResult* x) { return file_of.at(x) == file_of.at(r); }))
          out.push_back(r);
      return out;
    };
    const std::vector<const RunResult*> firsts_b = first_of_each_file(runs),
                                        firsts_c = first_of_each_file(it->second);
    std::string spec_diff;
    for (const RunResult* c : firsts_c)
      for (const RunResult* b : firsts_b) {
        add_env(row.env_differences,
                env_differences(report_of(b).env, report_of(c).env, row.device));
        const nlohmann::json* sb = spec_of(report_of(b), *b);
        const nlohmann::json* sc = spec_of(report_of(c), *c);
        if (sb && sc && spec_diff.empty()) spec_diff = first_spec_difference(*sb, *sc);
        // One side's file without the spec its runs trained from: nothing says it is the same.
        if (!sb != !sc && spec_diff.empty())
          spec_diff =
              fmt::format("specs: {} file has no spec of {}",
                          sb ? (currents.size() > 1 ? "a current" : "the current") : "a baseline",
                          row.current->model);
        if (spec_diff.empty()) spec_diff = data_parallel_difference(*b, *c);
      }
    add_env(out.env_differences, row.env_differences);
    if (!spec_diff.empty()) {
      // Trained from another spec: its numbers are not the baseline's to judge.
      row.verdict = "spec-changed";
      row.detail = "spec differs at " + spec_diff;
      ++out.spec_changed;
    } else {
      judge_pair(row, options, file_of, file_name, pair_of);
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
  if (const std::string n = one_baseline_note(out); !n.empty()) out.notes.push_back(n);
  if (const std::string n = memory_limit_note(baselines, currents); !n.empty())
    out.notes.push_back(n);
  for (std::string& n : busy_runner_notes(out, file_of)) out.notes.push_back(std::move(n));
  if (out.regressions > 0)
    out.exit_code = 1;
  else if (out.matched == 0 || out.spec_changed > 0 || (options.strict && out.blocking > 0))
    out.exit_code = 4;
  return out;
}

std::string format_compare_console(const Comparison& c, bool ascii) {
  TextTable table;
  table.head = headers();
  for (const CompareRow& r : c.rows) table.rows.push_back(cells(r, c.options));
  std::string out = render_text_table(table, ascii);
  out += "\n" + rule_text(c.options) + "\n";
  for (const std::string& note : c.notes) out += printable_text(note) + "\n";
  if (!c.env_differences.empty()) {
    std::string d;
    for (const auto& x : c.env_differences) d += (d.empty() ? "" : "; ") + x;
    out += "environment differs: " + printable_text(d) + "\n";
  }
  out += summary_line(c) + "\n";
  return out;
}

namespace {

// Rows a reader has to look at besides the regressions: nothing was judged for them. JUnit
// reports them as skipped; a `new` row has nothing to fail against and is a passing test case
// with a note.
// Not regressed, but not passed either: inconclusive, missing and spec-changed rows, and under
// --strict an environment-changed one, which fails it (a JUnit report all green on a failed job).
bool unjudged(const CompareRow& r, const CompareOptions& o) {
  return r.regressions.empty() && (r.verdict == "inconclusive" || r.verdict == "missing" ||
                                   r.verdict == "spec-changed" || (o.strict && r.blocking));
}

std::string threshold_pct(double x) {
  return fmt::format("{:.4g}%", 100.0 * x);
}

// What regressed and by how much, with the threshold it crossed: "time ratio 1.300 [95% CI
// 1.291, 1.309] beyond +5% (5/5 repetitions); memory +3.00% (976.6 KiB -> 1005.9 KiB) beyond +2%".
std::string regression_text(const CompareRow& r, const CompareOptions& o) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  for (const std::string& what : r.regressions) {
    if (what == "time" && r.time.valid) {
      add(fmt::format("time ratio {:.3f} [95% CI {:.3f}, {:.3f}] beyond +{} ({}/{} repetitions{})",
                      r.time.ratio, r.time.lo, r.time.hi, threshold_pct(o.time_threshold),
                      r.n_baseline, r.n_current,
                      o.paired ? fmt::format(" in {} pairs", r.pairs) : std::string()));
    } else if (what == "memory" && r.memory_change && r.baseline && r.current) {
      add(fmt::format("memory {} ({} -> {}) beyond +{}", pct(*r.memory_change, 2),
                      format_bytes(r.baseline_values.training_peak),
                      format_bytes(r.current_values.training_peak),
                      threshold_pct(o.memory_threshold)));
    } else if (what == "accuracy" && r.accuracy_delta && r.baseline && r.current) {
      add(fmt::format("accuracy {:+.2f} pt ({:.2f}% -> {:.2f}%) beyond -{:.4g} pt",
                      *r.accuracy_delta, 100.0 * r.baseline_values.accuracy,
                      100.0 * r.current_values.accuracy, o.accuracy_threshold));
    } else if (what == "loss" && r.baseline && r.current) {
      add(fmt::format("final loss {} ({:.6g} -> {:.6g}){}",
                      r.loss_change && std::isfinite(*r.loss_change) ? pct(*r.loss_change, 3)
                                                                     : std::string("changed"),
                      r.baseline_values.loss, r.current_values.loss,
                      o.loss_threshold ? " beyond +-" + threshold_pct(*o.loss_threshold)
                                       : std::string(", no longer finite")));
    } else if (what == "status" && r.baseline && r.current) {
      add(fmt::format("status {} -> {}{}", run_status_name(r.baseline->status),
                      run_status_name(r.current->status), r.detail.empty() ? "" : ": " + r.detail));
    } else {
      add(what);
    }
  }
  return out;
}

// Why a row needs a look, in one line: what regressed, or why it was not judged.
std::string attention_text(const CompareRow& r, const CompareOptions& o) {
  if (!r.regressions.empty()) return regression_text(r, o);
  const std::string d = detail_cell(r);  // with the environment differences
  return d == "-" ? r.verdict : r.verdict + ": " + d;
}

// Every number of a row, one per line, for JUnit's <failure> body and <system-out>.
std::string row_report(const CompareRow& r) {
  std::string out = "verdict: " + r.verdict + "\n";
  if (!r.detail.empty()) out += "detail: " + r.detail + "\n";
  if (r.time.valid)
    out += fmt::format("time ratio (current / baseline) [95% CI]: {} ({}/{} repetitions)\n",
                       time_cell(r), r.n_baseline, r.n_current);
  if (r.memory_change) out += "training memory: " + memory_cell(r) + "\n";
  if (r.accuracy_delta) out += "accuracy: " + accuracy_cell(r) + "\n";
  if (r.loss_change) out += "final loss: " + loss_cell(r) + "\n";
  if (r.baseline) out += fmt::format("baseline status: {}\n", run_status_name(r.baseline->status));
  if (r.current) out += fmt::format("current status: {}\n", run_status_name(r.current->status));
  for (const std::string& e : r.env_differences) out += "environment differs: " + e + "\n";
  return out;
}

// `rows` as Markdown: each cell through markdown_cell (no raw HTML, so that a model named
// "</details>" cannot close the fold), the cell `bold` of a row in `bold_rows` in bold around it
// (what regressed, not the verdict: that is the time's, "same" beside a memory regression).
std::string md_table(const std::vector<std::string>& head, const std::vector<bool>& right,
                     const std::vector<std::vector<std::string>>& rows, size_t bold,
                     const std::vector<bool>& bold_rows) {
  std::string out = "|";
  for (const auto& h : head) out += " " + markdown_cell(h) + " |";
  out += "\n|";
  for (size_t i = 0; i < head.size(); ++i) out += right[i] ? " ---: |" : " --- |";
  out += "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    out += "|";
    for (size_t i = 0; i < rows[r].size(); ++i) {
      const std::string x = markdown_cell(rows[r][i]);
      out += " " + (i == bold && bold_rows[r] ? "**" + x + "**" : x) + " |";
    }
    out += "\n";
  }
  return out;
}

// XML 1.0 text or attribute value: the five specials as entities; in an attribute, tab and
// newline as character references (a parser would normalise them to spaces), and a carriage
// return as one everywhere (it would become a newline); other
// control characters, invalid UTF-8, surrogates, U+FFFE and U+FFFF, which XML 1.0 cannot
// carry at all, as U+FFFD.
std::string xml_escape(const std::string& s, bool attribute) {
  static const char* const kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
        case '<':
        case '>':
        case '"':
        case '\'':
          out += html_escape(std::string(1, static_cast<char>(c)));  // the page's entities
          break;
        case '\t':
          out += attribute ? "&#9;" : "\t";
          break;
        case '\n':
          out += attribute ? "&#10;" : "\n";
          break;
        case '\r':
          out += "&#13;";
          break;
        default:
          out += c < 0x20 ? kReplacement : std::string(1, static_cast<char>(c));
      }
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = static_cast<size_t>(
        utf8_sequence(reinterpret_cast<const unsigned char*>(s.data()), i, s.size(), cp));
    // Well-formed, and a character XML 1.0 allows (not U+FFFE, U+FFFF).
    if (len > 0 && cp != 0xFFFE && cp != 0xFFFF) {
      out.append(s, i, len);
      i += len;
    } else {
      out += kReplacement;  // one for a noncharacter's whole sequence, one per malformed byte
      i += len > 0 ? len : 1;
    }
  }
  return out;
}

}  // namespace

// A summary for $GITHUB_STEP_SUMMARY or a merge-request comment: the verdict first, then only
// the rows to look at, the full table folded away, and the rule last.
std::string format_compare_markdown(const Comparison& c, const std::string& baseline_name,
                                    const std::string& current_name) {
  const char* icon = c.exit_code == 0 ? (c.blocking ? ":warning:" : ":white_check_mark:") : ":x:";
  std::string out =
      fmt::format("{} **mpbench compare: {}**\n\n", icon, markdown_cell(summary_line(c)));
  // Judged rows whose only fault is an environment difference block --strict too: counted apart,
  // so that the counts add up to the verdict line's.
  size_t failed = 0, skipped = 0, env_only = 0;
  for (const CompareRow& r : c.rows) {
    if (!r.regressions.empty()) ++failed;
    if (unjudged(r, c.options))
      ++skipped;
    else if (r.regressions.empty() && r.blocking)
      ++env_only;
  }
  // <code>, not backticks: escapes do not work inside a code span, and a file name is the user's.
  out += fmt::format(
      "Baseline <code>{}</code>, current <code>{}</code>: {} row(s), {} regressed (in time, "
      "memory, accuracy, loss or status), {} other(s) inconclusive, missing or spec-changed{}{}."
      "\n\n",
      markdown_cell(baseline_name), markdown_cell(current_name), c.rows.size(), failed, skipped,
      c.options.strict ? " (or, under --strict, environment-changed)" : "",
      env_only ? fmt::format(", {} judged in a different environment (--strict fails it)", env_only)
               : "");
  if (!c.env_differences.empty()) {
    std::string d;
    for (const auto& x : c.env_differences) d += (d.empty() ? "" : "; ") + x;
    out += "Environment differs: " + markdown_cell(d) + "\n\n";
  }
  std::vector<std::vector<std::string>> attention;
  std::vector<bool> regressed;
  for (const CompareRow& r : c.rows) {
    if (r.regressions.empty() && !unjudged(r, c.options)) continue;
    const std::string why = !r.regressions.empty() ? regression_text(r, c.options) : detail_cell(r);
    attention.push_back({r.model, r.precision, mode_cell(r), batch_cell(r), r.verdict, why});
    regressed.push_back(!r.regressions.empty());
  }
  if (!attention.empty()) {
    out += md_table({"model", "precision", "device", "batch", "verdict", "why"},
                    {false, false, false, true, false, false}, attention, 5, regressed);
    out += "\n";
  }
  std::vector<std::vector<std::string>> all;
  regressed.clear();
  for (const CompareRow& r : c.rows) {
    all.push_back(cells(r, c.options));
    regressed.push_back(!r.regressions.empty());
  }
  const auto hs = headers();
  std::vector<bool> right(hs.size());
  for (size_t i = 0; i < hs.size(); ++i) right[i] = i >= 3 && i <= 8;
  // The blank lines around the table let GitHub render Markdown inside the HTML block.
  out += fmt::format("<details><summary>All {} rows</summary>\n\n", c.rows.size());
  out += md_table(hs, right, all, 10, regressed);
  out += "\n</details>\n\n" + markdown_cell(rule_text(c.options)) + "\n";
  for (const std::string& note : c.notes) out += "\n" + markdown_cell(note) + "\n";
  return out;
}

// JUnit XML, as CI test reporters read it: one test case per row. A row that regressed is a
// <failure>; an inconclusive, missing or spec-changed row (under --strict an environment-changed
// one too) is <skipped> with its reason; any other
// row passes (a `new` one with a note). Every row's numbers are in its <system-out>, the verdict,
// the rule and the environment differences in the suite's.
std::string format_compare_junit(const Comparison& c, const std::string& baseline_name,
                                 const std::string& current_name) {
  const auto x = [](const std::string& s) { return xml_escape(s, true); };
  const auto text = [](const std::string& s) { return xml_escape(s, false); };
  size_t failures = 0, skipped = 0;
  for (const CompareRow& r : c.rows) {
    if (!r.regressions.empty()) ++failures;
    if (unjudged(r, c.options)) ++skipped;
  }
  const std::string counts =
      fmt::format("tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\" time=\"0\"",
                  c.rows.size(), failures, skipped);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"mpbench compare\" " + counts + ">\n";
  out += "  <testsuite name=\"mpbench compare\" " + counts + ">\n";
  out += "    <properties>\n";
  auto property = [&](const std::string& name, const std::string& value) {
    out += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", x(name), x(value));
  };
  property("baseline", baseline_name);
  property("current", current_name);
  property("verdict", summary_line(c));
  property("exit_code", std::to_string(c.exit_code));
  property("time_threshold", threshold_pct(c.options.time_threshold));
  property("memory_threshold", threshold_pct(c.options.memory_threshold));
  property("accuracy_threshold", fmt::format("{:.4g} pt", c.options.accuracy_threshold));
  if (c.options.loss_threshold)
    property("loss_threshold", threshold_pct(*c.options.loss_threshold));
  out += "    </properties>\n";
  for (const CompareRow& r : c.rows) {
    std::string name = fmt::format("{} {} batch {}", r.precision, r.device, r.batch_size);
    if (r.seed) name += fmt::format(" seed {}", *r.seed);
    if (r.cuda_graphs) name += " +graphs";
    out += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"0\">\n",
                       x("mpbench." + r.model), x(name));
    // A failure's body holds the row's numbers; other rows keep them in <system-out>.
    if (!r.regressions.empty()) {
      out += fmt::format("      <failure type=\"regression\" message=\"{}\">{}</failure>\n",
                         x(regression_text(r, c.options)), text(row_report(r)));
    } else {
      if (unjudged(r, c.options))
        out += fmt::format("      <skipped message=\"{}\"/>\n", x(attention_text(r, c.options)));
      const std::string note =
          r.verdict == "new"
              ? "new: no baseline to compare against; add it to the baseline to gate it\n"
              : "";
      out += fmt::format("      <system-out>{}</system-out>\n", text(note + row_report(r)));
    }
    out += "    </testcase>\n";
  }
  std::string suite_out = summary_line(c) + "\n" + rule_text(c.options) + "\n";
  for (const std::string& e : c.env_differences) suite_out += "environment differs: " + e + "\n";
  out += fmt::format("    <system-out>{}</system-out>\n", text(suite_out));
  out += "  </testsuite>\n</testsuites>\n";
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
        {"ranks", r.ranks},
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
        {"busy_repetitions", {{"baseline", r.busy_baseline}, {"current", r.busy_current}}},
        {"pairs", c.options.paired ? json(r.pairs) : json(nullptr)},
        {"memory_change", opt(r.memory_change)},
        {"accuracy_delta_points", opt(r.accuracy_delta)},
        {"loss_change", opt(r.loss_change)}};
    row["time_ratio"] = r.time.valid ? json{{"ratio", num(r.time.ratio)},
                                            {"ci_low", num(r.time.lo)},
                                            {"ci_high", num(r.time.hi)}}
                                     : json(nullptr);
    rows.push_back(std::move(row));
  }
  return {{"kind", "compare"},
          {"schema_version", 1},
          {"options",
           {{"time_threshold", o.time_threshold},
            {"memory_threshold", o.memory_threshold},
            {"accuracy_threshold_points", o.accuracy_threshold},
            {"loss_threshold", o.loss_threshold ? json(*o.loss_threshold) : json(nullptr)},
            {"strict", o.strict},
            {"method", time_method(o)},
            {"paired", o.paired},
            {"min_repetitions", o.min_repetitions},
            {"bootstrap_resamples", o.bootstrap_resamples},
            {"seed", o.seed}}},
          {"env_differences", c.env_differences},
          {"baseline_files", c.baseline_files},
          {"current_files", c.current_files},
          {"notes", c.notes},
          {"regressions", c.regressions},
          {"blocking", c.blocking},
          {"matched", c.matched},
          {"spec_changed", c.spec_changed},
          {"exit_code", c.exit_code},
          {"rows", std::move(rows)}};
}

}  // namespace mpbench
