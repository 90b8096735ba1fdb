#pragma once
// The shipped configs (configs/*.json) for tests that cover every one of them, and each at the
// sizes such a test trains: the whole network (every layer, block, stage, width, vocabulary), with
// only its sequence length and image size capped, so that the reference's GEMMs take seconds
// rather than minutes. Memory planning does not depend on those sizes.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "models/spec.h"
#include "test_util.h"

namespace mpbench::test {

inline constexpr int64_t kMaxSeq = 64;
// resnet50 ends at 2x2: 8 values per batchnorm channel at batch 2.
inline constexpr int64_t kMaxImage = 64;

inline std::vector<std::string> shipped_configs() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/configs"))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The config at the capped sizes, through the spec's own rules (with_overrides reads it again).
inline Spec capped_config(const std::string& name) {
  const Spec spec = load_spec(source_dir() + "/configs/" + name + ".json");
  const nlohmann::json model = to_json(spec)["model"];
  std::vector<SpecOverride> o;
  if (model.contains("seq_len") && model["seq_len"].get<int64_t>() > kMaxSeq)
    o.push_back({"seq_len cap", {"model", "seq_len"}, kMaxSeq});
  if (model.contains("image_size") && model["image_size"].get<int64_t>() > kMaxImage)
    o.push_back({"image_size cap", {"model", "image_size"}, kMaxImage});
  return o.empty() ? spec : with_overrides(spec, o);
}

}  // namespace mpbench::test
