// `mpbench validate`: parse each spec, build its model description and check its data files,
// without allocating or training anything.
#include <iostream>

#include "app/commands.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"

namespace mpbench {

int cmd_validate(const std::vector<std::string>& specs) {
  for (const auto& path : specs) {
    Spec spec = load_spec(path);
    int64_t params = 0;
    for (Precision p : spec.precisions) {
      Model model(spec, p);  // checks the family is buildable and fp32_layers names
      params = 0;
      for (const auto& li : model.layer_infos()) params += li.params;
    }
    if (spec.data.type == "idx") make_dataset(spec);  // reads and validates the files
    std::vector<std::string> modes;
    for (Precision p : spec.precisions) modes.push_back(precision_name(p));
    std::cout << fmt::format("ok: {} ({}: {}, {} parameters, modes {})\n", path, spec.name,
                             spec.family, params, fmt::join(modes, ", "));
  }
  return 0;
}

}  // namespace mpbench
