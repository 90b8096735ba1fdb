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
  std::string lines;
  std::vector<std::string> inputs;  // the specs and their data files, which --json must not be
  std::vector<Spec> loaded;
  for (const auto& path : specs) {
    loaded.push_back(load_spec(path));
    const Spec& spec = loaded.back();
    for (std::string& in : spec_inputs(spec)) inputs.push_back(std::move(in));
    refuse_shared_model_names(loaded);  // as `run`: results are matched by name
    preflight_training(spec);  // each mode's model, fp32_layers, idx files, series: as `run`
    int64_t params = 0;
    for (const auto& li : Model(spec, spec.precisions.front()).layer_infos()) params += li.params;
    std::vector<std::string> modes;
    for (Precision p : spec.precisions) modes.push_back(precision_name(p));
    // Said once every spec passed: a refusal leaves stdout empty, as run's does.
    lines += fmt::format("ok: {} ({}: {}, {} parameters, modes {})\n", path, spec.name, spec.family,
                         params, fmt::join(modes, ", "));
    checked.push_back({{"path", path},
                       {"name", spec.name},
                       {"family", spec.family},
                       {"parameters", params},
                       {"precisions", modes},
                       {"spec", to_json(spec)}});
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
