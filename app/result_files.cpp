#include "app/result_files.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "app/commands.h"
#include "kernels/error.h"
#include "models/input_file.h"
#include "models/spec.h"
#include "train/json_check.h"

namespace mpbench {

using json = nlohmann::json;

namespace {

// "a maxbatch file (mpbench maxbatch --json), not <wanted>"
[[noreturn]] void wrong_kind(const std::string& kind, const std::string& wanted) {
  const bool ours = kind == "profile" || kind == "explain" || kind == "inspect" ||
                    kind == "maxbatch" || kind == "compare" || kind == "devices" ||
                    kind == "validate" || kind == "data";
  if (kind == "data")
    throw_bad_input(fmt::format("a dataset index (mpbench data --out), not {}", wanted));
  if (kind == "spec")
    throw_bad_input(fmt::format(
        "a model spec (what mpbench run trains; give its --json output), not {}", wanted));
  throw_bad_input(ours ? fmt::format("a{} {} file (mpbench {} --json), not {}",
                                     kind == "inspect" || kind == "explain" ? "n" : "", kind, kind,
                                     wanted)
                       : fmt::format("kind: \"{}\" is no kind of file mpbench writes; expected {}",
                                     printable_line(kind), wanted));
}

ExplainInput explain_from_json(const json& j) {
  using namespace json_check;
  ExplainInput in;
  in.model = model_name(object_at(j, "spec", ""), "name", "spec");
  in.baseline = string(j, "baseline", "", true);
  in.device = text(j.contains("env") ? j["env"] : json(), "device");
  in.emulated = boolean(j, "emulated", "");
  const json& comps = *array_at(j, "comparisons", "", true);
  const Range nullable{0, kAny.hi, true};
  for (size_t i = 0; i < comps.size(); ++i) {
    const std::string path = fmt::format("comparisons[{}]", i);
    const json& c = comps[i];
    if (!c.is_object()) bad(path, "an object");
    ExplainInput::Pair p;
    p.from = string(c, "from", path, true);
    p.to = string(c, "to", path, true);
    p.from_step_ms = number(c, "from_step_ms", path, nullable, true);
    p.to_step_ms = number(c, "to_step_ms", path, nullable, true);
    p.measured_speedup = number(c, "measured_speedup", path, nullable, true);
    p.bound = number(c, "bound", path, nullable, false, NAN);
    if (const json* kinds = array_at(c, "by_kind", path, false)) {
      for (size_t k = 0; k < kinds->size(); ++k) {
        const std::string kp = fmt::format("{}.by_kind[{}]", path, k);
        const json& e = (*kinds)[k];
        if (!e.is_object()) bad(kp, "an object");
        p.by_kind.push_back({string(e, "kind", kp, true),
                             number(e, "from_ms_per_step", kp, kTime, true),
                             number(e, "to_ms_per_step", kp, kTime, true)});
      }
    }
    if (const json* flags = array_at(c, "flags", path, false))
      for (size_t k = 0; k < flags->size(); ++k) {
        if (!(*flags)[k].is_string()) bad(fmt::format("{}.flags[{}]", path, k), "a string");
        p.flags.push_back((*flags)[k].get<std::string>());
      }
    in.comparisons.push_back(std::move(p));
  }
  return in;
}

MaxBatchInput maxbatch_from_json(const json& j) {
  using namespace json_check;
  MaxBatchInput in;
  in.device = text(j.contains("env") ? j["env"] : json(), "device");
  in.memory_limit_bytes = number(j, "memory_limit_bytes", "", {0, kAny.hi, true}, false, NAN);
  const json& entries = *array_at(j, "max_batch", "", true);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string path = fmt::format("max_batch[{}]", i);
    const json& e = entries[i];
    if (!e.is_object()) bad(path, "an object");
    MaxBatchInput::Entry m;
    m.model = model_name(e, "model", path);
    m.precision = string(e, "precision", path, true);
    // Files from before the status was recorded have none: their modes were all searched.
    m.status = string(e, "status", path);
    if (m.status.empty()) m.status = "ok";
    if (m.status != "ok" && m.status != "unsupported")
      bad(sub(path, "status"), "\"ok\" or \"unsupported\"");
    const json& max_batch = *find(e, "max_batch", path, true);
    if (m.status == "unsupported" && !max_batch.is_null())
      bad(sub(path, "max_batch"), "null for an unsupported mode");
    if (m.status == "ok") m.max_batch = integer(e, "max_batch", path, 0);
    if (m.max_batch > kMaxBatchSize)
      bad(sub(path, "max_batch"), fmt::format("at most {}, the largest batch a spec takes, got {}",
                                              kMaxBatchSize, m.max_batch));
    m.at_spec_limit = boolean(e, "at_spec_limit", path);
    m.vs_fp32 = number(e, "vs_fp32", path, {0, kAny.hi, true}, false, NAN);
    // Files from before it was recorded had ratios against fp32 only.
    if (const std::string b = string(e, "ratio_baseline", path); !b.empty()) m.ratio_baseline = b;
    m.training_bytes = NAN;
    const json* mem = find(e, "peak_memory_bytes", path, false);
    if (mem && !mem->is_null())
      m.training_bytes = double(byte_count(object_at(e, "peak_memory_bytes", path), "training",
                                           sub(path, "peak_memory_bytes")));
    in.entries.push_back(std::move(m));
  }
  return in;
}

ProfileInput profile_from_json(const json& j) {
  using namespace json_check;
  ProfileInput in;
  in.model = model_name(object_at(j, "spec", ""), "name", "spec");
  const json& profiles = *array_at(j, "profiles", "", true);
  for (size_t i = 0; i < profiles.size(); ++i) {
    const std::string path = fmt::format("profiles[{}]", i);
    const json& p = profiles[i];
    if (!p.is_object()) bad(path, "an object");
    ProfileInput::Mode m;
    m.precision = string(p, "precision", path, true);
    m.status = string(p, "status", path, true);
    // A mode that did not train (oom, unsupported) has no step time: null.
    const Range time = m.status == "ok" ? kTime : kNonNegative;
    m.step_ms = number(p, "step_time_ms", path, time, true);
    m.step_mean_ms =
        number(p, "step_mean_ms", path, time, false, std::numeric_limits<double>::quiet_NaN());
    const json& ops = *array_at(p, "ops", path, true);
    double op_sum = 0;
    for (size_t k = 0; k < ops.size(); ++k) {
      const std::string op_path = fmt::format("{}.ops[{}]", path, k);
      const json& o = ops[k];
      if (!o.is_object()) bad(op_path, "an object");
      const std::string op = string(o, "op", op_path, true);
      const double ms = number(o, "ms_per_step", op_path, kTime, true);
      auto it = std::find_if(m.ms_by_op.begin(), m.ms_by_op.end(),
                             [&](const auto& e) { return e.first == op; });
      if (it == m.ms_by_op.end()) it = m.ms_by_op.insert(m.ms_by_op.end(), {op, 0.0});
      it->second += ms;
      op_sum += ms;
    }
    // Each time is finite, and so must be the step they add up to (the chart's axis).
    if (!std::isfinite(op_sum)) bad(path + ".ops", "ms_per_step values whose sum is finite");
    in.modes.push_back(std::move(m));
  }
  return in;
}

// Reads and parses the file, then runs `read` on it, putting the path in front of every error
// (json_check's name the JSON path in the file).
template <typename Read>
auto read_file_as(const std::string& path, const char* what, Read&& read) {
  const json j = read_json_file(path, "result file");
  try {
    return read(j);
  } catch (const Error& e) {
    throw_bad_input(fmt::format("{}: {}", path, e.what()));
  } catch (const json::exception& e) {
    throw_bad_input(fmt::format("{}: not an mpbench {}: {}", path, what, e.what()));
  }
}

}  // namespace

std::string file_kind(const json& j) {
  if (j.is_object() && j.contains("kind") && j["kind"].is_string())
    return j["kind"].get<std::string>();
  // A model spec, the likeliest wrong file: a "model" object, and none of a result's keys.
  if (j.is_object() && j.contains("model") && j["model"].is_object() &&
      !j.contains("schema_version") && !j.contains("runs"))
    return "spec";
  return j.is_object() && j.contains("profiles") ? "profile" : "run";
}

Report read_result_file(const std::string& path) {
  return read_file_as(path, "result file", [&](const json& j) {
    const std::string kind = file_kind(j);
    if (kind != "run") wrong_kind(kind, "a result file (mpbench run --json)");
    return report_from_json(j);
  });
}

ReportFile read_report_file(const std::string& path) {
  return read_file_as(path, "result file", [&](const json& j) -> ReportFile {
    const std::string kind = file_kind(j);
    if (kind == "run") return report_from_json(j);
    if (kind == "profile") {
      ProfileInput p = profile_from_json(j);
      p.path = path;
      return p;
    }
    if (kind == "explain") {
      ExplainInput e = explain_from_json(j);
      e.path = path;
      return e;
    }
    if (kind == "maxbatch") {
      MaxBatchInput m = maxbatch_from_json(j);
      m.path = path;
      return m;
    }
    wrong_kind(kind, "a file report draws (run, profile, explain or maxbatch --json)");
  });
}

}  // namespace mpbench
