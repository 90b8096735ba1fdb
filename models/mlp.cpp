// The mlp family's entry in the family table (models/family.h).
#include "models/mlp.h"

#include <fmt/format.h>

#include "models/family.h"
#include "models/linear.h"

namespace mpbench {

using json = nlohmann::json;
using namespace spec_json;

namespace {

const std::vector<std::string> kActivationNames = {"relu", "gelu", "none"};

Activation parse_activation(const std::string& name) {
  for (Activation a : {Activation::Relu, Activation::Gelu, Activation::None}) {
    if (name == activation_name(a)) return a;
  }
  MPB_CHECK(false, "unreachable: activation {}", name);
  return Activation::None;
}

ModelSpec read(const ObjectReader& r) {
  MlpSpec m;
  m.input_dim = r.integer("input_dim", kDim, std::nullopt);
  const std::string list_text =
      fmt::format("a list of at most {} positive integers (may be empty)", kMaxLayers);
  const json* hidden = r.array("hidden", true, list_text);
  if (hidden->size() > static_cast<size_t>(kMaxLayers)) {
    r.ctx().fail(r.sub("hidden"),
                 fmt::format("expected {}, got {} entries", list_text, hidden->size()));
  }
  for (size_t i = 0; i < hidden->size(); ++i) {
    m.hidden.push_back(r.integer_at((*hidden)[i], fmt::format("{}[{}]", r.sub("hidden"), i), kDim));
  }
  m.num_classes = r.integer("num_classes", kClasses, std::nullopt);
  m.activation = parse_activation(r.choice("activation", kActivationNames, "relu"));
  return m;
}

json write(const ModelSpec& v) {
  const auto& m = std::get<MlpSpec>(v);
  return {{"type", "mlp"},
          {"input_dim", m.input_dim},
          {"hidden", m.hidden},
          {"num_classes", m.num_classes},
          {"activation", activation_name(m.activation)}};
}

// The layer names are known from the spec alone, so fp32_layers is checked when it is read.
void check(const Ctx&, const Spec& s) {
  validate_fp32_layers(s, mlp_layer_names(std::get<MlpSpec>(s.model)));
}

Footprint footprint(const ModelSpec& v) {
  const auto& m = std::get<MlpSpec>(v);
  Footprint f;
  double prev = static_cast<double>(m.input_dim);
  f.activations_per_sample = prev;
  std::vector<int64_t> widths = m.hidden;
  widths.push_back(m.num_classes);
  for (int64_t w : widths) {
    f.params += prev * static_cast<double>(w) + static_cast<double>(w);
    f.activations_per_sample += 2.0 * static_cast<double>(w);  // pre- and post-activation
    prev = static_cast<double>(w);
  }
  f.inputs_per_sample = static_cast<double>(m.input_dim);
  f.inputs_what = "model.input_dim";
  return f;
}

ModelIo io(const ModelSpec& v) {
  const auto& m = std::get<MlpSpec>(v);
  ModelIo io;
  io.input_dim = m.input_dim;
  io.num_classes = m.num_classes;
  return io;
}

void build(const Spec& spec, Precision precision, std::vector<std::unique_ptr<Layer>>& layers) {
  const auto& m = std::get<MlpSpec>(spec.model);
  const std::vector<std::string> names = mlp_layer_names(m);
  int64_t in = m.input_dim;
  for (size_t i = 0; i < m.hidden.size(); ++i) {
    layers.push_back(
        std::make_unique<Linear>(names[i], in, m.hidden[i], m.activation,
                                 layer_precision(precision, spec.fp32_layers, names[i]),
                                 /*fp32_out=*/false));
    in = m.hidden[i];
  }
  layers.push_back(std::make_unique<Linear>("head", in, m.num_classes, Activation::None,
                                            layer_precision(precision, spec.fp32_layers, "head"),
                                            /*fp32_out=*/true));
}

Dataset dataset(const Spec& spec, const DataProgress& progress) {
  const auto& m = std::get<MlpSpec>(spec.model);
  const DataSpec& d = spec.data;
  const int classes = static_cast<int>(m.num_classes);
  if (d.type == "idx") return load_idx(d, m.input_dim, classes);
  return make_synthetic_mlp(m.input_dim, classes, d.train_samples, d.eval_samples, d.seed,
                            SyntheticMlpTask{}, progress);
}

}  // namespace

std::vector<std::string> mlp_layer_names(const MlpSpec& mlp) {
  std::vector<std::string> names;
  for (size_t i = 0; i < mlp.hidden.size(); ++i) names.push_back(fmt::format("fc{}", i + 1));
  names.push_back("head");
  return names;
}

Family mlp_family() {
  return {"mlp",
          {"input_dim", "hidden", "num_classes", "activation"},
          [](const ModelSpec& m) { return std::holds_alternative<MlpSpec>(m); },
          read,
          write,
          check,
          footprint,
          io,
          build,
          dataset};
}

}  // namespace mpbench
