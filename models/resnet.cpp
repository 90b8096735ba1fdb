// PLACEHOLDER (being written this session).
#include "models/resnet.h"

namespace mpbench {

void build_resnet(const Spec& spec, const ResnetSpec&, Precision,
                  std::vector<std::unique_ptr<Layer>>&) {
  throw_bad_input(spec.source_path + ": model.type: family '" + spec.family +
                  "' is not implemented yet");
}

}  // namespace mpbench
