#include "train/results.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "kernels/error.h"
#include "train/json_check.h"

namespace mpbench {

using nlohmann::json;

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::Ok:
      return "ok";
    case RunStatus::Oom:
      return "oom";
    case RunStatus::Diverged:
      return "diverged";
    case RunStatus::Failed:
      return "failed";
    case RunStatus::Unsupported:
      return "unsupported";
  }
  return "failed";
}

RunStatus run_status_from_name(const std::string& name) {
  for (RunStatus s : {RunStatus::Ok, RunStatus::Oom, RunStatus::Diverged, RunStatus::Failed,
                      RunStatus::Unsupported}) {
    if (name == run_status_name(s)) return s;
  }
  throw_bad_input(fmt::format(
      "unknown run status \"{}\" (expected ok, oom, diverged, failed or unsupported)", name));
}

namespace {

// JSON has no NaN or infinity: a diverged run's losses are written as null rather than produce a
// file that strict parsers (Python's json with allow_nan=False, jq) reject.
json num(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

// Per-step series are stored as float and written as that float's exact double, so that any
// reader gets the value the run had: a loss scale of 2^27 is 134217728, not the 134217730 of
// the float's shortest decimal read as a double.
json num_f(float v) {
  return num(static_cast<double>(v));
}

// A bucket's mean over its finite values; NaN (null) when it has none.
float bucket_mean(const std::vector<float>& v) {
  double sum = 0;
  size_t n = 0;
  for (float x : v)
    if (std::isfinite(x)) {
      sum += x;
      ++n;
    }
  return n == 0 ? NAN : static_cast<float>(sum / static_cast<double>(n));
}

// Entries of a series per written entry, so that at most kMaxWrittenSteps remain.
int64_t bucket_size(int64_t entries) {
  return std::max<int64_t>(1, (entries + kMaxWrittenSteps - 1) / kMaxWrittenSteps);
}

// One epoch has no spread: its stddev and cv are null, not 0 (the tables' n/a, never 0%).
json time_stats_json(const TimeStats& t, size_t samples) {
  const bool spread = samples > 1;
  return {{"median", num(t.median)},
          {"mean", num(t.mean)},
          {"stddev", spread ? num(t.stddev) : json(nullptr)},
          {"cv", spread ? num(t.cv) : json(nullptr)},
          {"min", num(t.min)},
          {"max", num(t.max)}};
}

TimeStats time_stats_from_json(const json& j, const std::string& path) {
  using namespace json_check;
  TimeStats t;
  t.median = number(j, "median", path, kTime);
  t.mean = number(j, "mean", path, kTime);
  // Null for one epoch (time_stats_json): no spread, held as 0 as compute_time_stats does.
  constexpr Range kSpread{kTime.lo, kTime.hi, true};
  t.stddev = number(j, "stddev", path, kSpread);
  t.cv = number(j, "cv", path, kSpread);
  if (std::isnan(t.stddev)) t.stddev = 0;
  if (std::isnan(t.cv)) t.cv = 0;
  t.min = number(j, "min", path, kTime);
  t.max = number(j, "max", path, kTime);
  // The writer's mean of equal times may round an ulp past them: a relative 1e-9 is let through.
  const double slack = 1e-9 * t.max;
  if (t.min > t.max || t.median < t.min - slack || t.median > t.max + slack ||
      t.mean < t.min - slack || t.mean > t.max + slack)
    bad(path, fmt::format("min <= median, mean <= max, got min {} median {} mean {} max {}", t.min,
                          t.median, t.mean, t.max));
  return t;
}

}  // namespace

int64_t fp8_clipped_steps(const Fp8TensorSeries& t, bool most_recent) {
  const float clip = fp8_clip_threshold(t.format == "fp8_e5m2" ? DType::F8E5M2 : DType::F8E4M3);
  int64_t n = 0;
  for (size_t i = 0; i < t.amax.size() && i < t.scale.size(); ++i) {
    const float used = i == 0 ? 1.0f : t.scale[i - 1];
    const bool own = most_recent || i == 0 || t.amax[i] > t.amax[i - 1];
    if (own && t.amax[i] * used > clip) ++n;
  }
  return n;
}

json prediction_json(const MemoryReport& m) {
  json by_cat = json::object();
  for (int c = 0; c < kMemCategoryCount; ++c) {
    if (static_cast<MemCategory>(c) == MemCategory::Data) continue;
    by_cat[mem_category_name(static_cast<MemCategory>(c))] = m.by_category[c];
  }
  return {{"training", m.training_peak}, {"by_category", std::move(by_cat)}};
}

json to_json(const MemoryReport& m) {
  json by_cat = json::object();
  for (int c = 0; c < kMemCategoryCount; ++c) {
    by_cat[mem_category_name(static_cast<MemCategory>(c))] = m.by_category[c];
  }
  return {{"training", m.training_peak},
          {"data", m.by_category[static_cast<int>(MemCategory::Data)]},
          {"tracked", m.tracked_peak},
          {"device", m.has_device ? json(m.device_peak) : json(nullptr)},
          {"device_baseline", m.has_device ? json(m.device_baseline) : json(nullptr)},
          {"by_category", std::move(by_cat)}};
}

uint64_t max_run_json_bytes(int64_t epochs, int64_t steps, int64_t fp8_tensors) {
  // What dump(2) spends at most: an entry of a per-step array is one line of up to 12 spaces of
  // indent, a 23-character float ("-1.1754942106924411e-38") and ",\n"; an epoch is an object of
  // six such lines; 64 KiB covers the rest of a run (memory, conv algorithms, flags).
  const uint64_t entries = static_cast<uint64_t>(std::min<int64_t>(steps, kMaxWrittenSteps));
  constexpr uint64_t kLine = 40, kEpoch = 6 * (kLine + 20) + 40, kRest = 64 << 10;
  return kRest + kEpoch * static_cast<uint64_t>(epochs) + 5 * kLine * entries +
         2 * kLine * entries * static_cast<uint64_t>(fp8_tensors);
}

json to_json(const RunResult& r) {
  json j;
  j["model"] = r.model;
  j["family"] = r.family;
  j["precision"] = r.precision;
  j["device"] = r.device;
  j["status"] = run_status_name(r.status);
  j["status_detail"] = r.status_detail;
  j["cuda_graphs"] = r.cuda_graphs;
  if (r.seed) j["seed"] = *r.seed;
  if (r.repetition) j["repetition"] = *r.repetition;
  j["batch_size"] = r.batch_size;
  j["train_samples"] = r.train_samples;
  j["warmup_steps"] = r.warmup_steps;

  json epochs = json::array();
  for (const EpochResult& e : r.epochs) {
    epochs.push_back({{"time_ms", num(e.time_ms)},
                      {"eval_time_ms", num(e.eval_time_ms)},
                      {"train_loss", num(e.train_loss)},
                      {"eval_loss", num(e.eval_loss)},
                      {"eval_accuracy", num(e.eval_accuracy)},
                      {"steps", e.steps}});
  }
  j["epochs"] = std::move(epochs);
  // A run that did not finish (oom, diverged, failed, unsupported) has no results: its numbers
  // are null, not 0 (its epochs, memory and per-step series say how far it got).
  const bool ok = r.status == RunStatus::Ok;
  auto result = [&](double v) { return ok ? num(v) : json(nullptr); };
  j["epoch_time_ms"] = ok ? time_stats_json(r.epoch_time_ms, r.epochs.size()) : json(nullptr);
  j["samples_per_second"] = result(r.samples_per_second);
  j["flops_per_step"] = result(r.flops_per_step);
  j["tflops"] = result(r.tflops);
  // No peak (the reference, a GPU without a datasheet): null, not a peak of 0.
  const bool peak = r.peak_tflops > 0;
  j["peak_tflops"] = peak ? result(r.peak_tflops) : json(nullptr);
  j["percent_of_peak"] = peak ? result(r.percent_of_peak) : json(nullptr);

  // An unsupported mode allocated nothing: null, as the CSV's empty cells, not a peak of 0 B.
  j["peak_memory_bytes"] = r.status == RunStatus::Unsupported ? json(nullptr) : to_json(r.memory);
  if (r.has_predicted_memory) j["predicted_memory_bytes"] = prediction_json(r.predicted_memory);

  j["final_accuracy"] = result(r.final_accuracy);
  j["final_loss"] = result(r.final_loss);
  j["skipped_steps"] = r.skipped_steps;
  // A mode without loss scaling has no scale: null, not the 1 it multiplies by.
  j["final_loss_scale"] = r.loss_scaling ? num(r.final_loss_scale) : json(nullptr);
  j["loss_scaling"] = r.loss_scaling;

  // Parallel arrays rather than an array of objects: a third the size, and each series loads
  // straight into a plotting column.
  const int64_t n_steps = static_cast<int64_t>(r.steps.size());
  const int64_t stride = bucket_size(n_steps);
  json loss = json::array(), grad_norm = json::array(), scale = json::array(),
       skipped = json::array(), time_ms = json::array();
  for (int64_t b = 0; b < n_steps; b += stride) {
    const auto first = r.steps.begin() + b;
    const auto last = r.steps.begin() + std::min(n_steps, b + stride);
    auto series = [&](float StepRecord::*field) {
      std::vector<float> v;
      for (auto it = first; it != last; ++it) v.push_back((*it).*field);
      return v;
    };
    time_ms.push_back(num_f(bucket_mean(series(&StepRecord::time_ms))));
    loss.push_back(num_f(bucket_mean(series(&StepRecord::loss))));
    grad_norm.push_back(num_f(bucket_mean(series(&StepRecord::grad_norm))));
    const std::vector<float> sc = series(&StepRecord::loss_scale);
    scale.push_back(num_f(*std::min_element(sc.begin(), sc.end())));
    skipped.push_back(std::any_of(first, last, [](const StepRecord& s) { return s.skipped; }));
  }
  j["steps"] = {{"loss", std::move(loss)},
                {"grad_norm", std::move(grad_norm)},
                {"loss_scale", std::move(scale)},
                {"skipped", std::move(skipped)},
                {"time_ms", std::move(time_ms)}};
  // In steps: a file read back may hold buckets already.
  if (stride * r.step_stride > 1) {
    j["steps"]["stride"] = stride * r.step_stride;
    j["steps"]["count"] = r.step_count();
  }
  if (!r.fp8_scaling.empty()) {
    json f8 = json::array();
    for (const Fp8TensorSeries& t : r.fp8_scaling) {
      json amax = json::array(), sc = json::array();
      const size_t n = t.amax.size(), k = static_cast<size_t>(stride);
      for (size_t b = 0; b < n; b += k) {
        const size_t e = std::min(n, b + k);
        amax.push_back(num_f(*std::max_element(t.amax.begin() + b, t.amax.begin() + e)));
        sc.push_back(num_f(*std::min_element(t.scale.begin() + b, t.scale.begin() + e)));
      }
      f8.push_back({{"tensor", t.tensor},
                    {"format", t.format},
                    {"clipped_steps", t.clipped_steps},
                    {"amax", std::move(amax)},
                    {"scale", std::move(sc)}});
    }
    j["fp8_scaling"] = std::move(f8);
  }
  if (!r.conv_algorithms.empty()) {
    json conv = json::array();
    for (const ConvAlgorithm& a : r.conv_algorithms)
      conv.push_back({{"op", a.op},
                      {"n", a.n},
                      {"h", a.h},
                      {"w", a.w},
                      {"c", a.c},
                      {"k", a.k},
                      {"r", a.r},
                      {"s", a.s},
                      {"stride", a.stride},
                      {"pad", a.pad},
                      {"dtype", a.dtype},
                      {"algo", a.algo},
                      {"algo_name", a.algo_name},
                      {"math", a.math},
                      {"workspace_bytes", a.workspace_bytes},
                      {"workspace_limited", a.workspace_limited}});
    j["conv_algorithms"] = std::move(conv);
  }
  if (!r.conv_algorithms.empty() || r.conv_workspace_bytes)
    j["conv_workspace_bytes"] = r.conv_workspace_bytes;
  if (!r.kernels.empty()) j["kernels"] = r.kernels;
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  // A mode that did not train has the job's options and nothing measured.
  if (const auto& dp = r.data_parallel) {
    j["data_parallel"] = {
        {"ranks", dp->ranks}, {"grad_reduce", dp->grad_reduce}, {"bucket_bytes", dp->bucket_bytes}};
    if (ok) {
      j["data_parallel"]["buckets"] = dp->buckets;
      j["data_parallel"]["bytes_per_step"] = dp->bytes_per_step;
      if (dp->fp8_amax_bytes_per_step > 0)
        j["data_parallel"]["fp8_amax_bytes_per_step"] = dp->fp8_amax_bytes_per_step;
      j["data_parallel"]["comm_ms_per_step"] = dp->comm_ms_per_step;
      j["data_parallel"]["algbw_gbps"] = dp->algbw_gbps;
      j["data_parallel"]["busbw_gbps"] = dp->busbw_gbps;
    }
  }
  if (r.data_parallel && r.data_parallel->comm_busy_ms_per_step > 0) {
    j["data_parallel"]["comm_busy_ms_per_step"] = r.data_parallel->comm_busy_ms_per_step;
    j["data_parallel"]["overlap"] = r.data_parallel->overlap;
  }
  if (r.data_parallel && r.data_parallel->single_rank_samples_per_second > 0) {
    j["data_parallel"]["single_rank_samples_per_second"] =
        r.data_parallel->single_rank_samples_per_second;
    j["data_parallel"]["scaling_efficiency"] = r.data_parallel->scaling_efficiency;
  }
  if (const auto& h = r.host_load)
    j["host_load"] = {{"cpus", h->cpus},
                      {"threads", h->threads},
                      {"seconds", h->seconds},
                      {"own_cpus", h->own_cpus},
                      {"waited_cpus", h->waited_cpus},
                      {"steal_cpus", num(h->steal_cpus)}};
  return j;
}

double repetition_cv(const RunResult& r, const std::vector<RunResult>& all) {
  std::vector<double> medians;
  for (const RunResult& x : all)
    if (x.status == RunStatus::Ok && x.model == r.model && x.precision == r.precision &&
        x.device == r.device && x.cuda_graphs == r.cuda_graphs && x.batch_size == r.batch_size &&
        x.seed == r.seed && x.repetition.has_value() == r.repetition.has_value())
      medians.push_back(x.epoch_time_ms.median);
  if (!r.repetition || medians.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  return compute_time_stats(medians).cv;
}

std::optional<TimeStats> epoch_quarters(const RunResult& r) {
  if (r.epochs.size() != 1) return std::nullopt;
  std::vector<double> times;  // warm-up steps' are NaN
  for (const StepRecord& s : r.steps)
    if (std::isfinite(s.time_ms)) times.push_back(s.time_ms);
  if (times.size() < 32) return std::nullopt;  // quarters of 8 steps at least
  std::vector<double> means;
  for (size_t q = 0; q < 4; ++q) {
    const size_t begin = times.size() * q / 4, end = times.size() * (q + 1) / 4;
    double sum = 0;
    for (size_t i = begin; i < end; ++i) sum += times[i];
    means.push_back(sum / static_cast<double>(end - begin));
  }
  return compute_time_stats(means);
}

std::vector<std::string> run_flags(const RunResult& r, const std::vector<RunResult>& all) {
  std::vector<std::string> f;
  if (r.device == "reference" && r.precision != "fp32") f.push_back("emulated");
  if (r.status != RunStatus::Ok) return f;
  const std::optional<TimeStats> quarters = epoch_quarters(r);
  if (r.epochs.size() >= 2 ? r.epoch_time_ms.cv > kNoisyCv : quarters && quarters->cv > kNoisyCv)
    f.push_back("noisy");
  if (repetition_cv(r, all) > kNoisyCv) f.push_back("noisy-repetitions");
  if (ran_busy(r)) f.push_back("busy");
  for (const Fp8TensorSeries& t : r.fp8_scaling)
    if (t.clipped_steps > 0) {
      f.push_back("fp8-clipped");
      break;
    }
  return f;
}

bool ran_busy(const RunResult& r) {
  return r.status == RunStatus::Ok && r.host_load && r.host_load->busy();
}

const HostLoad* worst_busy_load(const std::vector<const RunResult*>& runs) {
  const HostLoad* worst = nullptr;
  for (const RunResult* r : runs)
    if (ran_busy(*r) && (!worst || r->host_load->taken_cpus() > worst->taken_cpus()))
      worst = &*r->host_load;
  return worst;
}

json to_json(const Report& r) {
  json runs = json::array();
  for (const RunResult& run : r.runs) {
    runs.push_back(to_json(run));
    runs.back()["flags"] = run_flags(run, r.runs);  // recomputed, not read back
  }
  json specs = json::array();
  for (const json& s : r.specs) specs.push_back(s);
  json out = {{"schema_version", 1},
              {"kind", "run"},
              {"tool", r.tool.is_null() ? json::object() : r.tool},
              {"provenance", r.provenance},
              {"env", r.env.is_null() ? json::object() : r.env},
              {"specs", std::move(specs)},
              {"runs", std::move(runs)}};
  const std::vector<SeedSummary> seeded = seed_summaries(r.runs);
  if (!seeded.empty()) {
    json s = json::array();
    for (const SeedSummary& x : seeded) s.push_back(to_json(x));
    out["seed_summary"] = std::move(s);
  }
  const std::vector<RepeatSummary> repeated = repeat_summaries(r.runs);
  if (!repeated.empty()) {
    json s = json::array();
    for (const RepeatSummary& x : repeated) s.push_back(to_json(x));
    out["repeat_summary"] = std::move(s);
  }
  return out;
}

std::vector<double> epoch_times(const RunResult& r) {
  std::vector<double> t;
  for (const EpochResult& e : r.epochs) t.push_back(e.time_ms);
  return positive_finite(t);
}

std::optional<RatioEstimate> repeated_speedup(const std::vector<const RunResult*>& baseline,
                                              const std::vector<const RunResult*>& current) {
  // Paired by round, a round being a repetition (of a seed): each side's run of it that trained.
  using Round = std::pair<int64_t, int64_t>;
  auto round_of = [](const RunResult& r) {
    return Round{r.seed ? static_cast<int64_t>(*r.seed) : -1, r.repetition.value_or(0)};
  };
  std::map<Round, const RunResult*> base;
  for (const RunResult* r : baseline)
    if (r->status == RunStatus::Ok) base[round_of(*r)] = r;
  std::vector<PairedRound> rounds;
  for (const RunResult* r : current) {
    if (r->status != RunStatus::Ok) continue;
    const auto it = base.find(round_of(*r));
    // The sides turned over, so that each round's ratio is its speedup, baseline / current:
    // the median of the speedups, not the inverse of the median time ratio, which differ when
    // an even count averages the middle two (0.97x against 1.09x seen at --repeat 4).
    if (it != base.end()) rounds.push_back({epoch_times(*r), epoch_times(*it->second)});
  }
  if (rounds.size() < static_cast<size_t>(kMinRepetitions)) return std::nullopt;
  const RatioEstimate s = paired_median_ratio(rounds, kBootstrapResamples, kBootstrapSeed);
  if (!s.valid || !(s.ratio > 0 && s.lo > 0 && s.hi > 0)) return std::nullopt;
  return s;
}

std::vector<RepeatSummary> repeat_summaries(const std::vector<RunResult>& runs) {
  using Key = std::tuple<std::string, std::string, int64_t, bool, std::string>;
  std::vector<Key> order;
  std::map<Key, std::vector<const RunResult*>> of;
  for (const RunResult& r : runs) {
    if (!r.repetition) continue;
    const Key k{r.model, r.device, r.batch_size, r.cuda_graphs, r.precision};
    if (!of.count(k)) order.push_back(k);
    of[k].push_back(&r);
  }
  std::vector<RepeatSummary> out;
  for (const Key& k : order) {
    RepeatSummary s;
    std::tie(s.model, s.device, s.batch_size, s.cuda_graphs, s.precision) = k;
    for (const RunResult* r : of[k]) s.repetitions += r->status == RunStatus::Ok ? 1 : 0;
    // Against the baseline mode without graphs, as the tables' speedups.
    s.baseline = ratio_baseline(runs, s.model, s.device);
    const Key base{s.model, s.device, s.batch_size, false, s.baseline};
    if (k != base && of.count(base)) s.speedup_vs_fp32 = repeated_speedup(of[base], of[k]);
    out.push_back(std::move(s));
  }
  return out;
}

json to_json(const RepeatSummary& s) {
  json j = {{"model", s.model},
            {"device", s.device},
            {"precision", s.precision},
            {"batch_size", s.batch_size},
            {"cuda_graphs", s.cuda_graphs},
            {"repetitions", s.repetitions},
            {"ratio_baseline", s.baseline},
            {"speedup_vs_fp32", nullptr}};
  if (const auto& v = s.speedup_vs_fp32)
    j["speedup_vs_fp32"] = {{"estimate", v->ratio}, {"ci95_low", v->lo}, {"ci95_high", v->hi}};
  return j;
}

std::string ratio_baseline(const std::vector<RunResult>& runs, const std::string& model,
                           const std::string& device) {
  std::vector<std::string> modes;
  for (const RunResult& r : runs)
    if (r.model == model && r.device == device) modes.push_back(r.precision);
  return baseline_among(modes);
}

std::string baseline_among(const std::vector<std::string>& modes) {
  if (modes.empty() || std::find(modes.begin(), modes.end(), "fp32") != modes.end()) return "fp32";
  return modes.front();
}

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

std::vector<SeedSummary> seed_summaries(const std::vector<RunResult>& runs) {
  // Each group's accuracies by seed, in report order.
  using Key = std::tuple<std::string, std::string, int64_t, bool, std::string>;
  std::vector<Key> order;
  std::map<Key, std::map<uint64_t, double>> acc;
  for (const RunResult& r : runs) {
    if (!r.seed) continue;
    // A mode none of whose seeds trained keeps its entry, seeds 0, as repeat_summary does.
    const Key k{r.model, r.device, r.batch_size, r.cuda_graphs, r.precision};
    if (!acc.count(k)) order.push_back(k);
    auto& by_seed = acc[k];
    if (r.status == RunStatus::Ok) by_seed[*r.seed] = r.final_accuracy;
  }
  std::vector<SeedSummary> out;
  for (const Key& k : order) {
    SeedSummary s;
    std::tie(s.model, s.device, s.batch_size, s.cuda_graphs, s.precision) = k;
    const auto& by_seed = acc[k];
    std::vector<double> values;
    for (const auto& [seed, a] : by_seed) values.push_back(a);
    const MeanStd m = mean_std(values);
    s.seeds = m.n;
    s.accuracy_mean = m.mean;
    s.accuracy_std = m.std;
    s.baseline = ratio_baseline(runs, s.model, s.device);
    const Key base{s.model, s.device, s.batch_size, s.cuda_graphs, s.baseline};
    if (s.precision != s.baseline && acc.count(base)) {
      std::vector<double> b, c;
      for (const auto& [seed, a] : by_seed) {
        const auto it = acc[base].find(seed);
        if (it == acc[base].end()) continue;
        b.push_back(it->second);
        c.push_back(a);
      }
      if (b.size() >= 2) s.accuracy_delta_vs_fp32 = paired_delta(b, c);
    }
    out.push_back(std::move(s));
  }
  return out;
}

const SeedSummary* seed_summary_for(const std::vector<SeedSummary>& summaries, const RunResult& r) {
  for (const SeedSummary& s : summaries)
    if (s.model == r.model && s.device == r.device && s.batch_size == r.batch_size &&
        s.cuda_graphs == r.cuda_graphs && s.precision == r.precision)
      return &s;
  return nullptr;
}

json to_json(const SeedSummary& s) {
  json j = {{"model", s.model},
            {"device", s.device},
            {"precision", s.precision},
            {"batch_size", s.batch_size},
            {"cuda_graphs", s.cuda_graphs},
            {"seeds", s.seeds},
            {"accuracy_mean", s.seeds > 0 ? json(s.accuracy_mean) : json(nullptr)},
            {"accuracy_std", s.seeds >= 2 ? json(s.accuracy_std) : json(nullptr)},  // no spread
            {"ratio_baseline", s.baseline},
            {"accuracy_delta_vs_fp32", nullptr}};
  if (const auto& d = s.accuracy_delta_vs_fp32)
    j["accuracy_delta_vs_fp32"] = {
        {"mean", d->mean}, {"ci95_low", d->ci95_low}, {"ci95_high", d->ci95_high}, {"pairs", d->n}};
  return j;
}

// The most CPUs a host_load may count (Linux's own limit is 8192).
constexpr int64_t kMaxCpus = int64_t{1} << 20;

static RunResult run_from_json_at(const json& j, const std::string& path) {
  using namespace json_check;
  if (!j.is_object()) bad(path.empty() ? "run" : path, "an object");
  RunResult r;
  r.model = model_name(j, "model", path);
  r.family = string(j, "family", path);
  r.precision = string(j, "precision", path, true);
  if (!parse_precision(r.precision)) {
    std::string names;
    for (const std::string& n : precision_names()) names += (names.empty() ? "" : ", ") + n;
    bad(sub(path, "precision"), "one of " + names);
  }
  r.device = string(j, "device", path);
  // The devices a run trains on (`run --device`'s, auto resolved): compare and report match and
  // label runs by it.
  if (!r.device.empty() && r.device != "cuda" && r.device != "cpu" && r.device != "reference")
    bad(sub(path, "device"), "\"cuda\", \"cpu\" or \"reference\"");
  const std::string status = string(j, "status", path, true);
  try {
    r.status = run_status_from_name(status);
  } catch (const Error& e) {
    throw_bad_input(fmt::format("{}: {}", sub(path, "status"), e.what()));
  }
  r.status_detail = string(j, "status_detail", path);
  r.cuda_graphs = boolean(j, "cuda_graphs", path);
  if (j.contains("seed") && !j["seed"].is_null())
    r.seed = static_cast<uint64_t>(integer(j, "seed", path, 0));
  if (j.contains("repetition") && !j["repetition"].is_null())
    r.repetition = integer(j, "repetition", path, 1);
  r.batch_size = integer(j, "batch_size", path, 0);
  r.train_samples = integer(j, "train_samples", path, 0);
  r.warmup_steps = integer(j, "warmup_steps", path, 0);
  // A run that trained did so on batches of some size; compare keys runs by it.
  const bool trained = r.status == RunStatus::Ok;
  if (trained && r.batch_size < 1)
    bad(sub(path, "batch_size"), "the batch size of a run that trained (1 or more)");

  // Losses are null when they were not finite (a diverged run, an fp16 overflow).
  const Range loss{0, kAny.hi, true};
  // A run that trained took time in every epoch, and has one at least.
  const Range epoch_time =
      trained ? Range{std::numeric_limits<double>::denorm_min(), kTime.hi, false} : kTime;
  const json* epochs = array_at(j, "epochs", path, false);
  if (trained && (!epochs || epochs->empty()))
    bad(sub(path, "epochs"), "the epochs of a run that trained (one at least)");
  if (epochs) {
    for (size_t i = 0; i < epochs->size(); ++i) {
      const std::string p = fmt::format("{}[{}]", sub(path, "epochs"), i);
      const json& e = (*epochs)[i];
      if (!e.is_object()) bad(p, "an object");
      EpochResult er;
      er.time_ms = number(e, "time_ms", p, epoch_time, true);
      er.eval_time_ms = number(e, "eval_time_ms", p, kTime);
      er.train_loss = number(e, "train_loss", p, loss);
      er.eval_loss = number(e, "eval_loss", p, loss);
      er.eval_accuracy = number(e, "eval_accuracy", p, kFraction);
      er.steps = integer(e, "steps", p, 0);
      r.epochs.push_back(er);
    }
  }
  // Null only in a run that did not finish (what the writer does).
  if (r.status == RunStatus::Ok && j.contains("epoch_time_ms") && j["epoch_time_ms"].is_null())
    bad(sub(path, "epoch_time_ms"), "the epoch time statistics of a run that trained");
  if (j.contains("epoch_time_ms") && !j["epoch_time_ms"].is_null()) {
    r.epoch_time_ms =
        time_stats_from_json(object_at(j, "epoch_time_ms", path), sub(path, "epoch_time_ms"));
  } else {
    std::vector<double> times;
    for (const EpochResult& e : r.epochs) times.push_back(e.time_ms);
    r.epoch_time_ms = compute_time_stats(times);
  }
  // A run that trained has its throughput and memory; only one that did not may leave them null.
  const bool ok = r.status == RunStatus::Ok;
  r.samples_per_second = number(j, "samples_per_second", path, {0, kAny.hi, !ok}, ok);
  r.flops_per_step = number(j, "flops_per_step", path, kNonNegative);
  r.tflops = number(j, "tflops", path, kNonNegative);
  // Null: no peak, held as 0 (the writer's "none").
  r.peak_tflops = number(j, "peak_tflops", path, kNonNegative);
  r.percent_of_peak = number(j, "percent_of_peak", path, kNonNegative);
  if (!(r.peak_tflops > 0)) r.peak_tflops = r.percent_of_peak = 0;

  // Required in a run that trained: read as 0, a missing one made compare's verdicts (memory 0 B
  // against the baseline's, accuracy 0%) without a word.
  if (ok) find(j, "peak_memory_bytes", path, true);
  if (j.contains("peak_memory_bytes") && (ok || !j["peak_memory_bytes"].is_null())) {
    const std::string p = sub(path, "peak_memory_bytes");
    const json& m = object_at(j, "peak_memory_bytes", path);
    if (ok) find(m, "tracked", p, true);
    for (const char* key : {"tracked", "training"})
      if (ok && m.contains(key) && m[key].is_null()) bad(sub(p, key), "a byte count");
    r.memory.tracked_peak = byte_count(m, "tracked", p);
    r.memory.training_peak = byte_count(m, "training", p);
    const json* dev = find(m, "device", p, false);
    r.memory.has_device = dev && !dev->is_null();
    r.memory.device_peak = byte_count(m, "device", p);
    r.memory.device_baseline = byte_count(m, "device_baseline", p);
    if (m.contains("by_category")) {
      const json& bc = object_at(m, "by_category", p);
      for (int c = 0; c < kMemCategoryCount; ++c) {
        r.memory.by_category[c] =
            byte_count(bc, mem_category_name(static_cast<MemCategory>(c)), sub(p, "by_category"));
      }
    }
    // Files from before "training" was written: the dataset is uploaded before training starts
    // and stays, so the training peak is the tracked peak less the data.
    if (!m.contains("training")) {
      const size_t data = r.memory.by_category[static_cast<int>(MemCategory::Data)];
      r.memory.training_peak = r.memory.tracked_peak > data ? r.memory.tracked_peak - data : 0;
    }
  }

  if (j.contains("predicted_memory_bytes")) {
    const std::string p = sub(path, "predicted_memory_bytes");
    const json& m = object_at(j, "predicted_memory_bytes", path);
    r.has_predicted_memory = true;
    r.predicted_memory.training_peak = byte_count(m, "training", p);
    const json& bc = object_at(m, "by_category", p);
    for (int c = 0; c < kMemCategoryCount; ++c) {
      if (static_cast<MemCategory>(c) == MemCategory::Data) continue;
      r.predicted_memory.by_category[c] =
          byte_count(bc, mem_category_name(static_cast<MemCategory>(c)), sub(p, "by_category"));
    }
  }

  // Null in a run that did not finish; in one that did, the accuracy is a number and the loss is
  // there (null where it was not finite).
  r.final_accuracy = number(j, "final_accuracy", path, {0, 1, !ok}, ok);
  if (ok) find(j, "final_loss", path, true);
  r.final_loss = number(j, "final_loss", path, loss);
  r.skipped_steps = integer(j, "skipped_steps", path, 0);
  // GradScaler's scale can underflow to 0 (a backoff_factor of 1e-300 does it in one step), as
  // torch's does: a run mpbench wrote says so, and reads back.
  r.final_loss_scale = number(j, "final_loss_scale", path, kNonNegative, false, 1.0);
  r.loss_scaling = boolean(j, "loss_scaling", path);
  if (!r.loss_scaling) r.final_loss_scale = 1.0;  // null: no scaling, which multiplies by 1

  if (j.contains("steps")) {
    const std::string p = sub(path, "steps");
    const json& s = object_at(j, "steps", path);
    const json* losses = array_at(s, "loss", p, false);
    const json* gn = array_at(s, "grad_norm", p, false);
    const json* sc = array_at(s, "loss_scale", p, false);
    const json* sk = array_at(s, "skipped", p, false);
    const json* tm = array_at(s, "time_ms", p, false);
    r.step_stride = integer(s, "stride", p, 1, 1);
    if (r.step_stride > 1) {
      // Each entry covers `stride` steps, the last one at least one of them.
      find(s, "count", p, true);
      r.bucketed_steps = integer(s, "count", p, 1);
      const int64_t entries = losses ? static_cast<int64_t>(losses->size()) : 0;
      if ((r.bucketed_steps - 1) / r.step_stride + 1 != entries)
        throw_bad_input(fmt::format("{}: {} steps in {} entries of {}", sub(p, "count"),
                                    r.bucketed_steps, entries, r.step_stride));
    }
    const size_t n = losses ? losses->size() : 0;
    for (const auto& [arr, key] : {std::pair{gn, "grad_norm"},
                                   {sc, "loss_scale"},
                                   {sk, "skipped"},
                                   std::pair{tm, "time_ms"}}) {
      if (arr && arr->size() != n) {
        throw_bad_input(
            fmt::format("{}: {} entries, but loss has {}", sub(p, key), arr->size(), n));
      }
    }
    auto as_float = [&](const json* arr, size_t i, const char* key, Range range,
                        float def) -> float {
      if (!arr) return def;
      range.hi = std::min(range.hi, static_cast<double>(std::numeric_limits<float>::max()));
      return static_cast<float>(
          number_value((*arr)[i], fmt::format("{}[{}]", sub(p, key), i), range));
    };
    // Warm-up steps have no time (null); a skipped step's norm may be inf (null).
    const Range step_time{0, kAny.hi, true};
    r.steps.resize(n);
    for (size_t i = 0; i < n; ++i) {
      StepRecord& st = r.steps[i];
      st.loss = as_float(losses, i, "loss", loss, 0.0f);
      st.grad_norm = as_float(gn, i, "grad_norm", kNonNegative, 0.0f);
      st.loss_scale = as_float(sc, i, "loss_scale", kNonNegative, 1.0f);
      st.time_ms = as_float(tm, i, "time_ms", step_time, 0.0f);
      if (sk) {
        const json& v = (*sk)[i];
        if (!v.is_boolean()) bad(fmt::format("{}[{}]", sub(p, "skipped"), i), "true or false");
        st.skipped = v.get<bool>();
      }
    }
  }
  if (const json* f8 = array_at(j, "fp8_scaling", path, false)) {
    const std::string p = sub(path, "fp8_scaling");
    for (size_t i = 0; i < f8->size(); ++i) {
      const std::string pi = fmt::format("{}[{}]", p, i);
      const json& e = (*f8)[i];
      if (!e.is_object()) bad(pi, "an object");
      Fp8TensorSeries t;
      t.tensor = string(e, "tensor", pi, true);
      t.format = string(e, "format", pi, true);
      if (t.format != "fp8_e4m3" && t.format != "fp8_e5m2")
        bad(sub(pi, "format"), "\"fp8_e4m3\" or \"fp8_e5m2\"");
      for (auto [key, out] : {std::pair{"amax", &t.amax}, std::pair{"scale", &t.scale}}) {
        const json& arr = *array_at(e, key, pi, true);
        // A scale can round to 0: fp8_max * 2^-margin over an amax near FLT_MAX.
        const Range range = kNonNegative;
        for (size_t k = 0; k < arr.size(); ++k)
          out->push_back(static_cast<float>(
              number_value(arr[k], fmt::format("{}[{}]", sub(pi, key), k), range)));
      }
      t.clipped_steps = integer(e, "clipped_steps", pi, 0);
      if (t.amax.size() != t.scale.size())
        throw_bad_input(fmt::format("{}: {} scales, but {} amaxes", sub(pi, "scale"),
                                    t.scale.size(), t.amax.size()));
      // A tensor is recorded only after a step (Run::read_back_fp8_series).
      if (t.amax.empty()) bad(sub(pi, "amax"), "at least one step's amax");
      // Counted over the series' steps; more would be drawn as "clipped at N of fewer steps".
      const int64_t steps = r.steps_of(t.amax.size());
      if (t.clipped_steps > steps)
        bad(sub(pi, "clipped_steps"),
            fmt::format("at most the series' {} steps, got {}", steps, t.clipped_steps));
      r.fp8_scaling.push_back(std::move(t));
    }
  }
  if (const json* conv = array_at(j, "conv_algorithms", path, false)) {
    const std::string p = sub(path, "conv_algorithms");
    for (size_t i = 0; i < conv->size(); ++i) {
      const std::string pi = fmt::format("{}[{}]", p, i);
      const json& e = (*conv)[i];
      if (!e.is_object()) bad(pi, "an object");
      // Every field is written, so every field is required.
      auto required_int = [&](const char* key, int64_t lo) {
        find(e, key, pi, true);
        return integer(e, key, pi, lo);
      };
      auto one_of = [&](const char* key, std::initializer_list<const char*> names) {
        const std::string v = string(e, key, pi, true);
        std::string list;
        for (const char* n : names) {
          if (v == n) return v;
          list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", n);
        }
        bad(sub(pi, key), "one of " + list);
      };
      ConvAlgorithm a;
      a.op = one_of("op", {"forward", "backward_data", "backward_filter"});
      a.n = required_int("n", 1);
      a.h = required_int("h", 1);
      a.w = required_int("w", 1);
      a.c = required_int("c", 1);
      a.k = required_int("k", 1);
      a.r = required_int("r", 1);
      a.s = required_int("s", 1);
      a.stride = required_int("stride", 1);
      a.pad = required_int("pad", 0);
      a.dtype = one_of("dtype", {"fp32", "fp16", "bf16"});
      a.algo = required_int("algo", -1);  // -1: a pointwise convolution run as a GEMM
      a.algo_name = string(e, "algo_name", pi, true);
      a.math = one_of("math", {"default", "tensor_op", "tensor_op_allow_conversion", "fma"});
      find(e, "workspace_bytes", pi, true);
      a.workspace_bytes = byte_count(e, "workspace_bytes", pi);
      find(e, "workspace_limited", pi, true);
      a.workspace_limited = boolean(e, "workspace_limited", pi);
      r.conv_algorithms.push_back(std::move(a));
    }
  }
  r.conv_workspace_bytes = byte_count(j, "conv_workspace_bytes", path);
  for (const auto& [key, into] :
       {std::pair{"kernels", &r.kernels}, std::pair{"warnings", &r.warnings}}) {
    const json* k = array_at(j, key, path, false);
    for (size_t i = 0; k && i < k->size(); ++i) {
      if (!(*k)[i].is_string()) bad(fmt::format("{}[{}]", sub(path, key), i), "a string");
      into->push_back((*k)[i].get<std::string>());
    }
  }
  if (j.contains("data_parallel")) {
    const std::string p = sub(path, "data_parallel");
    const json& e = object_at(j, "data_parallel", path);
    DataParallelResult dp;
    dp.ranks = static_cast<int>(integer(e, "ranks", p, 1, 1));
    dp.grad_reduce = string(e, "grad_reduce", p, true);
    if (dp.grad_reduce != "fp32" && dp.grad_reduce != "bf16" && dp.grad_reduce != "fp16")
      bad(sub(p, "grad_reduce"), "\"fp32\", \"bf16\" or \"fp16\"");
    dp.bucket_bytes = byte_count(e, "bucket_bytes", p);
    dp.buckets = integer(e, "buckets", p, 0);
    dp.bytes_per_step = byte_count(e, "bytes_per_step", p);
    dp.fp8_amax_bytes_per_step = byte_count(e, "fp8_amax_bytes_per_step", p);
    dp.comm_ms_per_step = number(e, "comm_ms_per_step", p, kNonNegative);
    dp.comm_busy_ms_per_step = number(e, "comm_busy_ms_per_step", p, kNonNegative);
    dp.overlap = number(e, "overlap", p, kFraction);
    dp.algbw_gbps = number(e, "algbw_gbps", p, kNonNegative);
    dp.busbw_gbps = number(e, "busbw_gbps", p, kNonNegative);
    dp.single_rank_samples_per_second =
        number(e, "single_rank_samples_per_second", p, kNonNegative);
    dp.scaling_efficiency = number(e, "scaling_efficiency", p, kNonNegative);
    r.data_parallel = dp;
  }
  if (j.contains("host_load")) {
    const std::string p = sub(path, "host_load");
    const json& e = object_at(j, "host_load", path);
    HostLoad h;
    for (const auto& [key, into] : {std::pair{"cpus", &h.cpus}, std::pair{"threads", &h.threads}}) {
      find(e, key, p, true);
      const int64_t n = integer(e, key, p, key == std::string("cpus") ? 0 : 1);
      if (n > kMaxCpus) bad(sub(p, key), fmt::format("a count of CPUs up to {}", kMaxCpus));
      *into = static_cast<int>(n);
    }
    h.seconds = number(e, "seconds", p, kPositive, true);
    for (const auto& [key, into] :
         {std::pair{"own_cpus", &h.own_cpus}, std::pair{"waited_cpus", &h.waited_cpus}})
      *into = number(e, key, p, Range{0, double(kMaxCpus), false}, true);
    find(e, "steal_cpus", p, true);
    h.steal_cpus = number(e, "steal_cpus", p, Range{0, double(kMaxCpus), true});
    r.host_load = h;
  }
  return r;
}

RunResult run_from_json(const json& j) {
  return run_from_json_at(j, "");
}

Report report_from_json(const json& j) {
  using namespace json_check;
  if (!j.is_object()) bad("(top level)", "an object with schema_version, runs");
  const json* version = find(j, "schema_version", "", true);
  if (!version->is_number_integer() || version->get<int64_t>() != 1) {
    throw_bad_input(
        fmt::format("schema_version: expected 1, got {} (written by a different mpbench version?)",
                    version->dump()));
  }
  // Files from before the header have no kind; a profile's or an explain's is not a run.
  if (j.contains("kind") && j["kind"] != "run") bad("kind", "\"run\" (a result file)");
  Report r;
  if (j.contains("tool")) r.tool = object_at(j, "tool", "");
  if (j.contains("provenance") && !j["provenance"].is_null()) {
    r.provenance = object_at(j, "provenance", "");
    for (const char* k : {"time_utc", "host"}) json_check::string(r.provenance, k, "provenance");
    const json* cmd = array_at(r.provenance, "command", "provenance", false);
    for (size_t i = 0; cmd && i < cmd->size(); ++i)
      if (!(*cmd)[i].is_string()) bad(fmt::format("provenance.command[{}]", i), "a string");
    if (r.provenance.contains("commit") && !r.provenance["commit"].is_null())
      json_check::string(r.provenance, "commit", "provenance");
  }
  if (j.contains("env")) r.env = object_at(j, "env", "");
  if (const json* specs = array_at(j, "specs", "", false)) {
    // A run finds its spec by model name and batch size (spec_of): a second spec of both would
    // leave compare's spec check to whichever came first.
    std::map<std::pair<json, json>, size_t> seen;
    for (size_t i = 0; i < specs->size(); ++i) {
      const json& s = (*specs)[i];
      if (!s.is_object()) bad(fmt::format("specs[{}]", i), "a resolved spec (an object)");
      r.specs.push_back(s);
      if (!s.contains("name") || !s["name"].is_string()) continue;  // spec_of matches none
      const json batch = s.contains("train") && s["train"].is_object()
                             ? s["train"].value("batch_size", json())
                             : json();
      const auto [it, fresh] = seen.emplace(std::make_pair(s["name"], batch), i);
      if (!fresh)
        bad(fmt::format("specs[{}]", i),
            fmt::format("one spec per model and batch size (specs[{}] has the same)", it->second));
    }
  }
  const json* runs = find(j, "runs", "", true);
  if (!runs->is_array()) bad("runs", "an array");
  for (size_t i = 0; i < runs->size(); ++i) {
    r.runs.push_back(run_from_json_at((*runs)[i], fmt::format("runs[{}]", i)));
  }
  check_unique_runs(r.runs);
  return r;
}

RunKey run_key(const RunResult& r, bool with_repetition) {
  return {r.model,      r.precision,
          r.device,     r.cuda_graphs,
          r.batch_size, r.seed ? static_cast<int64_t>(*r.seed) : -1,
          run_ranks(r), with_repetition && r.repetition ? *r.repetition : 0};
}

std::string run_identity(const RunResult& r, bool with_repetition) {
  return fmt::format(
      "{} {} {} batch {}{}{}{}{}", r.model, r.precision, r.device, r.batch_size,
      r.cuda_graphs ? " (cuda graphs)" : "", r.seed ? fmt::format(" seed {}", *r.seed) : "",
      run_ranks(r) > 1 ? fmt::format(" x{} ranks", run_ranks(r)) : "",
      with_repetition && r.repetition ? fmt::format(" repetition {}", *r.repetition) : "");
}

void check_unique_runs(const std::vector<RunResult>& runs) {
  std::map<RunKey, size_t> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (const auto [it, fresh] = seen.emplace(run_key(runs[i]), i); !fresh)
      throw_bad_input(fmt::format("runs[{}] and runs[{}]: {} appears twice", it->second, i,
                                  run_identity(runs[i])));
  }
}

}  // namespace mpbench
