// The table of model families (models/family.h).
#include "models/family.h"

namespace mpbench {

const std::vector<Family>& families() {
  static const std::vector<Family> all = {mlp_family(), resnet_family(), transformer_family()};
  return all;
}

const Family& family_of(const ModelSpec& m) {
  for (const Family& f : families())
    if (f.holds(m)) return f;
  MPB_CHECK(false, "no family holds model variant {}", m.index());
  return families().front();
}

}  // namespace mpbench
