// `mpbench validate`: parse each spec, build its model description and check its data files,
// without allocating or training anything. It refuses what `run` of the same files would refuse
// before training: every rule of the spec (parse_spec, including the synthetic data's limits), the
// model each mode builds, idx files, and two specs of one model name.
#include <iostream>

#include "app/commands.h"
#include "app/output_file.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "train/trainer.h"

namespace mpbench {

int cmd_validate(const std::vector<std::string>& specs, const std::string& json_path) {
  if (!json_path.empty()) check_outputs({{"--json", json_path}}, specs);
  nlohmann::json checked = nlohmann::json::array();
  std::vector<std::string> inputs;  // the specs and their data files, which --json must not be
  std::vector<Spec> loaded;         // the specs that passed
  // Every file is checked, so that `validate configs/*.json` names every bad file at once; the
  // refusal is still one line (exit 2's contract, DESIGN.md): the first file's reason, and the
  // names of the others refused. The ok lines are said once every spec passed, as run's tables.
  std::string lines, first_refusal;
  // The later files refused: for a reason of their own, or for a model name an earlier file has
  // (alone, such a file passes).
  std::vector<std::string> also_refused, also_named;
  for (const auto& path : specs) {
    bool clash = false;
    try {
      loaded.push_back(load_spec(path));
      try {
        clash = true;
        refuse_shared_model_names(loaded);  // as `run`: results are matched by name
        clash = false;
        preflight_training(loaded.back());  // each mode's model, fp32_layers, idx files, series
      } catch (const Error&) {
        loaded.pop_back();
        throw;
      }
      const Spec& spec = loaded.back();
      for (std::string& in : spec_inputs(spec)) inputs.push_back(std::move(in));
      int64_t params = 0;
      for (const auto& li : Model(spec, spec.precisions.front()).layer_infos()) params += li.params;
      std::vector<std::string> modes;
      for (Precision p : spec.precisions) modes.push_back(precision_name(p));
      lines += fmt::format("ok: {} ({}: {}, {} parameters, modes {})\n", printable_line(path),
                           spec.name, spec.family, params, fmt::join(modes, ", "));
      checked.push_back({{"path", path},
                         {"name", spec.name},
                         {"family", spec.family},
                         {"parameters", params},
                         {"precisions", modes},
                         {"spec", to_json(spec)}});
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      if (first_refusal.empty())
        first_refusal = e.what();
      else
        (clash ? also_named : also_refused).push_back(path);
    }
  }
  if (!first_refusal.empty()) {
    constexpr size_t kNamed = 8;  // the line stays short; the rest counted
    auto listed = [&](const std::vector<std::string>& paths) {
      std::string out;
      for (size_t i = 0; i < std::min(paths.size(), kNamed); ++i) out += (i ? ", " : "") + paths[i];
      if (paths.size() > kNamed) out += fmt::format(" and {} more", paths.size() - kNamed);
      return out;
    };
    std::string msg = first_refusal;
    if (!also_refused.empty())
      msg +=
          fmt::format(" (also refused, each validated alone says why: {})", listed(also_refused));
    if (!also_named.empty())
      msg += fmt::format(" (also refused, for a model name an earlier file has: {})",
                         listed(also_named));
    throw_bad_input(msg);
  }
  if (!json_path.empty()) check_outputs({{"--json", json_path}}, inputs);
  std::cout << lines;
  if (!json_path.empty()) {
    nlohmann::json doc = json_header("validate");
    doc["specs"] = std::move(checked);
    write_output(json_path, json_text(doc));
  }
  return 0;
}

}  // namespace mpbench
