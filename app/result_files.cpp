#include "app/result_files.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"
#include "models/input_file.h"
#include "train/json_check.h"

namespace mpbench {

using json = nlohmann::json;

namespace {

bool is_profile(const json& j) {
  return j.is_object() && j.contains("profiles");
}

ProfileInput profile_from_json(const json& j) {
  using namespace json_check;
  ProfileInput in;
  in.model = string(object_at(j, "spec", ""), "name", "spec", true);
  const json& profiles = *array_at(j, "profiles", "", true);
  for (size_t i = 0; i < profiles.size(); ++i) {
    const std::string path = fmt::format("profiles[{}]", i);
    const json& p = profiles[i];
    if (!p.is_object()) bad(path, "an object");
    ProfileInput::Mode m;
    m.precision = string(p, "precision", path, true);
    m.status = string(p, "status", path, true);
    m.step_ms = number(p, "step_time_ms", path, kTime, true);
    const json& ops = *array_at(p, "ops", path, true);
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
    }
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

Report read_result_file(const std::string& path) {
  return read_file_as(path, "result file", [&](const json& j) {
    if (is_profile(j))
      throw_bad_input(
          "a profile file (mpbench profile --json), not a result file (mpbench run "
          "--json)");
    return report_from_json(j);
  });
}

std::variant<Report, ProfileInput> read_result_or_profile_file(const std::string& path) {
  return read_file_as(path, "result or profile file",
                      [&](const json& j) -> std::variant<Report, ProfileInput> {
                        if (!is_profile(j)) return report_from_json(j);
                        ProfileInput p = profile_from_json(j);
                        p.path = path;
                        return p;
                      });
}

}  // namespace mpbench
