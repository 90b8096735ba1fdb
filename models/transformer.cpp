// PLACEHOLDER (being written this session).
#include "models/transformer.h"

namespace mpbench {

void build_transformer(const Spec& spec, const TransformerSpec&, Precision,
                       std::vector<std::unique_ptr<Layer>>&) {
  throw_bad_input(spec.source_path + ": model.type: family '" + spec.family +
                  "' is not implemented yet");
}

}  // namespace mpbench
