#include "train/results.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "kernels/error.h"

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
  }
  return "failed";
}

RunStatus run_status_from_name(const std::string& name) {
  for (RunStatus s : {RunStatus::Ok, RunStatus::Oom, RunStatus::Diverged, RunStatus::Failed}) {
    if (name == run_status_name(s)) return s;
  }
  throw_bad_input(
      fmt::format("unknown run status \"{}\" (expected ok, oom, diverged or failed)", name));
}

TimeStats compute_time_stats(const std::vector<double>& samples) {
  TimeStats st;
  const size_t n = samples.size();
  if (n == 0) return st;
  std::vector<double> s = samples;
  std::sort(s.begin(), s.end());
  st.min = s.front();
  st.max = s.back();
  st.median = (n % 2 == 1) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  double sum = 0;
  for (double v : s) sum += v;
  st.mean = sum / static_cast<double>(n);
  if (n >= 2) {
    double ss = 0;
    for (double v : s) ss += (v - st.mean) * (v - st.mean);
    st.stddev = std::sqrt(ss / static_cast<double>(n - 1));
  }
  st.cv = st.mean != 0 ? st.stddev / st.mean : 0;
  return st;
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

json time_stats_json(const TimeStats& t) {
  return {{"median", num(t.median)}, {"mean", num(t.mean)}, {"stddev", num(t.stddev)},
          {"cv", num(t.cv)},         {"min", num(t.min)},   {"max", num(t.max)}};
}

// ---- reading ----------------------------------------------------------------------------------

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string sub(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

[[noreturn]] void bad(const std::string& path, const std::string& expected) {
  throw_bad_input(fmt::format("{}: expected {}", path, expected));
}

const json* find(const json& obj, const char* key, const std::string& path, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) throw_bad_input(fmt::format("{}: missing", sub(path, key)));
    return nullptr;
  }
  return &*it;
}

const json& object_at(const json& obj, const char* key, const std::string& path) {
  const json* v = find(obj, key, path, true);
  if (!v->is_object()) bad(sub(path, key), "an object");
  return *v;
}

double get_num(const json& obj, const char* key, const std::string& path, bool required = false,
               double def = 0) {
  const json* v = find(obj, key, path, required);
  if (!v) return def;
  if (v->is_null()) return kNaN;
  if (!v->is_number()) bad(sub(path, key), "a number or null");
  return v->get<double>();
}

int64_t get_int(const json& obj, const char* key, const std::string& path, int64_t def = 0) {
  const json* v = find(obj, key, path, false);
  if (!v) return def;
  if (!v->is_number_integer()) bad(sub(path, key), "an integer");
  return v->get<int64_t>();
}

size_t get_size(const json& obj, const char* key, const std::string& path) {
  const json* v = find(obj, key, path, false);
  if (!v || v->is_null()) return 0;
  if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0)) {
    bad(sub(path, key), "a byte count");
  }
  return v->get<size_t>();
}

bool get_bool(const json& obj, const char* key, const std::string& path, bool def = false) {
  const json* v = find(obj, key, path, false);
  if (!v) return def;
  if (!v->is_boolean()) bad(sub(path, key), "true or false");
  return v->get<bool>();
}

std::string get_str(const json& obj, const char* key, const std::string& path,
                    bool required = false) {
  const json* v = find(obj, key, path, required);
  if (!v) return "";
  if (!v->is_string()) bad(sub(path, key), "a string");
  return v->get<std::string>();
}

const json* get_array(const json& obj, const char* key, const std::string& path) {
  const json* v = find(obj, key, path, false);
  if (!v) return nullptr;
  if (!v->is_array()) bad(sub(path, key), "an array");
  return v;
}

TimeStats time_stats_from_json(const json& j, const std::string& path) {
  TimeStats t;
  t.median = get_num(j, "median", path);
  t.mean = get_num(j, "mean", path);
  t.stddev = get_num(j, "stddev", path);
  t.cv = get_num(j, "cv", path);
  t.min = get_num(j, "min", path);
  t.max = get_num(j, "max", path);
  return t;
}

}  // namespace

json to_json(const RunResult& r) {
  json j;
  j["model"] = r.model;
  j["family"] = r.family;
  j["precision"] = r.precision;
  j["device"] = r.device;
  j["status"] = run_status_name(r.status);
  j["status_detail"] = r.status_detail;
  j["cuda_graphs"] = r.cuda_graphs;
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
  j["epoch_time_ms"] = time_stats_json(r.epoch_time_ms);
  j["samples_per_second"] = num(r.samples_per_second);
  j["flops_per_step"] = num(r.flops_per_step);
  j["tflops"] = num(r.tflops);
  j["peak_tflops"] = num(r.peak_tflops);
  j["percent_of_peak"] = num(r.percent_of_peak);

  json by_cat = json::object();
  for (int c = 0; c < kMemCategoryCount; ++c) {
    by_cat[mem_category_name(static_cast<MemCategory>(c))] = r.memory.by_category[c];
  }
  j["peak_memory_bytes"] = {
      {"tracked", r.memory.tracked_peak},
      {"device", r.memory.has_device ? json(r.memory.device_peak) : json(nullptr)},
      {"device_baseline", r.memory.has_device ? json(r.memory.device_baseline) : json(nullptr)},
      {"by_category", std::move(by_cat)}};

  j["final_accuracy"] = num(r.final_accuracy);
  j["final_loss"] = num(r.final_loss);
  j["skipped_steps"] = r.skipped_steps;
  j["final_loss_scale"] = num(r.final_loss_scale);
  j["loss_scaling"] = r.loss_scaling;

  // Parallel arrays rather than an array of objects: a third the size, and each series loads
  // straight into a plotting column.
  json loss = json::array(), grad_norm = json::array(), scale = json::array(),
       skipped = json::array(), time_ms = json::array();
  for (const StepRecord& s : r.steps) {
    time_ms.push_back(num_f(s.time_ms));
    loss.push_back(num_f(s.loss));
    grad_norm.push_back(num_f(s.grad_norm));
    scale.push_back(num_f(s.loss_scale));
    skipped.push_back(s.skipped);
  }
  j["steps"] = {{"loss", std::move(loss)},
                {"grad_norm", std::move(grad_norm)},
                {"loss_scale", std::move(scale)},
                {"skipped", std::move(skipped)},
                {"time_ms", std::move(time_ms)}};
  return j;
}

json to_json(const Report& r) {
  json runs = json::array();
  for (const RunResult& run : r.runs) runs.push_back(to_json(run));
  json specs = json::array();
  for (const json& s : r.specs) specs.push_back(s);
  return {{"schema_version", 1},
          {"tool", r.tool.is_null() ? json::object() : r.tool},
          {"env", r.env.is_null() ? json::object() : r.env},
          {"specs", std::move(specs)},
          {"runs", std::move(runs)}};
}

static RunResult run_from_json_at(const json& j, const std::string& path) {
  if (!j.is_object()) bad(path.empty() ? "run" : path, "an object");
  RunResult r;
  r.model = get_str(j, "model", path, true);
  r.family = get_str(j, "family", path);
  r.precision = get_str(j, "precision", path, true);
  r.device = get_str(j, "device", path);
  try {
    r.status = run_status_from_name(get_str(j, "status", path, true));
  } catch (const Error& e) {
    throw_bad_input(fmt::format("{}: {}", sub(path, "status"), e.what()));
  }
  r.status_detail = get_str(j, "status_detail", path);
  r.cuda_graphs = get_bool(j, "cuda_graphs", path);
  r.batch_size = get_int(j, "batch_size", path);
  r.train_samples = get_int(j, "train_samples", path);
  r.warmup_steps = get_int(j, "warmup_steps", path);

  if (const json* epochs = get_array(j, "epochs", path)) {
    for (size_t i = 0; i < epochs->size(); ++i) {
      const std::string p = fmt::format("{}[{}]", sub(path, "epochs"), i);
      const json& e = (*epochs)[i];
      if (!e.is_object()) bad(p, "an object");
      EpochResult er;
      er.time_ms = get_num(e, "time_ms", p, true);
      er.eval_time_ms = get_num(e, "eval_time_ms", p);
      er.train_loss = get_num(e, "train_loss", p);
      er.eval_loss = get_num(e, "eval_loss", p);
      er.eval_accuracy = get_num(e, "eval_accuracy", p);
      er.steps = get_int(e, "steps", p);
      r.epochs.push_back(er);
    }
  }
  if (j.contains("epoch_time_ms")) {
    r.epoch_time_ms =
        time_stats_from_json(object_at(j, "epoch_time_ms", path), sub(path, "epoch_time_ms"));
  } else {
    std::vector<double> times;
    for (const EpochResult& e : r.epochs) times.push_back(e.time_ms);
    r.epoch_time_ms = compute_time_stats(times);
  }
  r.samples_per_second = get_num(j, "samples_per_second", path);
  r.flops_per_step = get_num(j, "flops_per_step", path);
  r.tflops = get_num(j, "tflops", path);
  r.peak_tflops = get_num(j, "peak_tflops", path);
  r.percent_of_peak = get_num(j, "percent_of_peak", path);

  if (j.contains("peak_memory_bytes")) {
    const std::string p = sub(path, "peak_memory_bytes");
    const json& m = object_at(j, "peak_memory_bytes", path);
    r.memory.tracked_peak = get_size(m, "tracked", p);
    const json* dev = find(m, "device", p, false);
    r.memory.has_device = dev && !dev->is_null();
    r.memory.device_peak = get_size(m, "device", p);
    r.memory.device_baseline = get_size(m, "device_baseline", p);
    if (m.contains("by_category")) {
      const json& bc = object_at(m, "by_category", p);
      for (int c = 0; c < kMemCategoryCount; ++c) {
        r.memory.by_category[c] =
            get_size(bc, mem_category_name(static_cast<MemCategory>(c)), sub(p, "by_category"));
      }
    }
  }

  r.final_accuracy = get_num(j, "final_accuracy", path);
  r.final_loss = get_num(j, "final_loss", path);
  r.skipped_steps = get_int(j, "skipped_steps", path);
  r.final_loss_scale = get_num(j, "final_loss_scale", path, false, 1.0);
  r.loss_scaling = get_bool(j, "loss_scaling", path);

  if (j.contains("steps")) {
    const std::string p = sub(path, "steps");
    const json& s = object_at(j, "steps", path);
    const json* loss = get_array(s, "loss", p);
    const json* gn = get_array(s, "grad_norm", p);
    const json* sc = get_array(s, "loss_scale", p);
    const json* sk = get_array(s, "skipped", p);
    const json* tm = get_array(s, "time_ms", p);
    const size_t n = loss ? loss->size() : 0;
    for (const auto& [arr, key] : {std::pair{gn, "grad_norm"},
                                   {sc, "loss_scale"},
                                   {sk, "skipped"},
                                   std::pair{tm, "time_ms"}}) {
      if (arr && arr->size() != n) {
        throw_bad_input(
            fmt::format("{}: {} entries, but loss has {}", sub(p, key), arr->size(), n));
      }
    }
    auto as_float = [&](const json* arr, size_t i, const char* key, float def) -> float {
      if (!arr) return def;
      const json& v = (*arr)[i];
      if (v.is_null()) return std::numeric_limits<float>::quiet_NaN();
      if (!v.is_number()) bad(fmt::format("{}[{}]", sub(p, key), i), "a number or null");
      return v.get<float>();
    };
    r.steps.resize(n);
    for (size_t i = 0; i < n; ++i) {
      StepRecord& st = r.steps[i];
      st.loss = as_float(loss, i, "loss", 0.0f);
      st.grad_norm = as_float(gn, i, "grad_norm", 0.0f);
      st.loss_scale = as_float(sc, i, "loss_scale", 1.0f);
      st.time_ms = as_float(tm, i, "time_ms", 0.0f);
      if (sk) {
        const json& v = (*sk)[i];
        if (!v.is_boolean()) bad(fmt::format("{}[{}]", sub(p, "skipped"), i), "true or false");
        st.skipped = v.get<bool>();
      }
    }
  }
  return r;
}

RunResult run_from_json(const json& j) {
  return run_from_json_at(j, "");
}

Report report_from_json(const json& j) {
  if (!j.is_object()) bad("(top level)", "an object with schema_version, runs");
  const json* version = find(j, "schema_version", "", true);
  if (!version->is_number_integer() || version->get<int64_t>() != 1) {
    throw_bad_input(
        fmt::format("schema_version: expected 1, got {} (written by a different mpbench version?)",
                    version->dump()));
  }
  Report r;
  if (j.contains("tool")) r.tool = object_at(j, "tool", "");
  if (j.contains("env")) r.env = object_at(j, "env", "");
  if (const json* specs = get_array(j, "specs", "")) {
    for (const json& s : *specs) r.specs.push_back(s);
  }
  const json* runs = find(j, "runs", "", true);
  if (!runs->is_array()) bad("runs", "an array");
  for (size_t i = 0; i < runs->size(); ++i) {
    r.runs.push_back(run_from_json_at((*runs)[i], fmt::format("runs[{}]", i)));
  }
  return r;
}

}  // namespace mpbench
