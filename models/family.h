#pragma once
// The model families, one entry each, defined in the family's own file (models/mlp.cpp,
// resnet.cpp, transformer.cpp): how its spec is read and written, the rules a whole spec meets
// because of it, its size before anything is built, its input and output, its layers and its
// dataset. Everything else goes through this table: nothing outside a family's file looks at
// which ModelSpec a spec holds. A new family is a new file and a line in families().
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "models/spec_reader.h"

namespace mpbench {

// A spec's sizes before it is built, in doubles so that absurd specs cannot overflow before they
// are rejected (models/spec.cpp holds them against its limits).
struct Footprint {
  double params = 0;                  // exactly what the built model declares
  double activations_per_sample = 0;  // an estimate: the largest tensors a step keeps
  double inputs_per_sample = 0;  // what the dataset holds per sample (features, pixels, tokens)
  std::string inputs_what;       // how that is counted, for the error message
};

struct Family {
  std::string type;               // the spec's model.type
  std::vector<std::string> keys;  // what "model" accepts besides "type"
  bool (*holds)(const ModelSpec&);
  ModelSpec (*read)(const spec_json::ObjectReader&);
  nlohmann::json (*write)(const ModelSpec&);
  // The rules of a whole spec that involve the family, beyond its own fields' ranges.
  void (*check)(const spec_json::Ctx&, const Spec&);
  Footprint (*footprint)(const ModelSpec&);
  ModelIo (*io)(const ModelSpec&);
  // Appends the family's layers for one precision mode.
  void (*build)(const Spec&, Precision, std::vector<std::unique_ptr<Layer>>&);
  Dataset (*dataset)(const Spec&, const DataProgress&);
};

const std::vector<Family>& families();
// The family of the model a spec holds.
const Family& family_of(const ModelSpec& m);

// Each family's entry, from its file.
Family mlp_family();
Family resnet_family();
Family transformer_family();

// Limits every family's reader shares: large enough for any model an H200 could hold, small
// enough that sizes computed from them cannot overflow int64.
constexpr int64_t kMaxDim = int64_t{1} << 20;  // any width, class or vocabulary count
constexpr int64_t kMaxLayers = 1024;           // hidden layers, blocks, transformer layers
constexpr spec_json::IntRange kDim{1, kMaxDim};
constexpr spec_json::IntRange kClasses{2, kMaxDim};
constexpr spec_json::IntRange kLayers{1, kMaxLayers};

}  // namespace mpbench
