#pragma once
// The model spec: a JSON file that says which model to build, on which data, how to train it and
// in which precision modes. README.md "Spec" lists every key; this header is the one
// place that holds every default (the member initializers below, plus the per-type tables in
// spec.cpp for fields whose default depends on the "type", such as the optimizer's lr).
//
// Every problem with a spec is an mpbench::Error(BadInput) with a one-line message
//   <file>: <json.path>: <what was expected>[, got <value>]
// e.g. `configs/x.json: model.hidden[1]: expected a positive integer <= 1048576, got -3`.
// JSON syntax errors read `<file>:<line>:<col>: JSON syntax error: ...`.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "kernels/fp8.h"
#include "kernels/precision.h"

namespace mpbench {

// "type": "mlp". Layers are named "fc1", "fc2", ... for the hidden layers and "head" for the
// output layer (models/mlp.h). `hidden` may be empty: that is a valid linear model
// (softmax regression), useful as a baseline.
struct MlpSpec {
  int64_t input_dim = 0;
  std::vector<int64_t> hidden;
  int64_t num_classes = 0;
  Activation activation = Activation::Relu;
};

// "type": "resnet_bottleneck": `blocks` ResNet bottleneck blocks (1x1 -> 3x3 -> 1x1 convolutions,
// `width` inner channels, `out_channels` out) on image_size x image_size x in_channels inputs,
// the first block with `stride`; the model builder owns the remaining details.
// One stage: `blocks` bottleneck blocks of `width` inner and `out_channels` output channels, the
// first with `stride`.
struct ResnetStage {
  int64_t blocks = 0, width = 0, out_channels = 0, stride = 1;
};
struct ResnetSpec {
  int64_t image_size = 0, in_channels = 0;
  // The single-stage form (the default) ...
  int64_t width = 0, out_channels = 0, blocks = 0;
  int64_t stride = 1;
  // ... or "stages": a list of stages, one after the other (the whole network).
  std::vector<ResnetStage> stages;
  // "none", or "imagenet": 7x7 stride-2 conv (stem_channels) -> BN -> ReLU -> 3x3 stride-2 max
  // pool, before the first stage.
  std::string stem = "none";
  int64_t stem_channels = 64;
  int64_t num_classes = 0;

  // The stages either form describes.
  std::vector<ResnetStage> stage_list() const {
    if (!stages.empty()) return stages;
    return {ResnetStage{blocks, width, out_channels, stride}};
  }
};

// "type": "transformer": `layers` encoder (or, with causal, decoder-only) blocks over token
// sequences of seq_len from a vocabulary of vocab_size.
struct TransformerSpec {
  int64_t d_model = 0, heads = 0, ffn_dim = 0, seq_len = 0;
  int64_t layers = 1;
  int64_t vocab_size = 0;
  bool causal = false;
  bool tie_embeddings = false;  // the head is the token embedding's table, without bias (GPT-2)
};

using ModelSpec = std::variant<MlpSpec, ResnetSpec, TransformerSpec>;

struct DataSpec {
  std::string type = "synthetic";  // "synthetic" | "idx"
  int64_t train_samples = 60000, eval_samples = 10000;
  uint64_t seed = 1;
  // idx only: MNIST-format files. Relative paths in the file are resolved against the spec
  // file's directory; here they are absolute, so that to_json -> parse_spec is the identity.
  std::string train_images, train_labels, eval_images, eval_labels;
};

// Per-type defaults (lr, weight_decay, ...) live in spec.cpp's optimizer table; the values here
// are those of the default type, adam. Fields that a type does not use keep their defaults and
// are not written by to_json. Doubles, as PyTorch's hyperparameters (Python floats) are: an
// optimizer takes its fp32 constants from them as PyTorch does (1 - beta2 in double, then fp32).
struct OptimizerSpec {
  std::string type = "adam";  // adam | adamw | sgd
  double lr = 1e-3, weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double momentum = 0.9;                          // sgd
  bool nesterov = false;                          // sgd
};

// The largest train.batch_size a spec takes.
constexpr int64_t kMaxBatchSize = int64_t{1} << 20;

struct TrainSpec {
  int64_t batch_size = 128, epochs = 5;
  int64_t warmup_steps = 10;  // steps run before timing starts, excluded from the epoch times
  OptimizerSpec optimizer;
};

// JSON key "loss_scale": {"init", "growth_factor", "backoff_factor", "growth_interval",
// "amp_fp16": bool, "amp_bf16": bool}. The two booleans switch dynamic loss scaling on or off
// for that mode (fp32 and tf32 never scale); their defaults come from the precision table
// (kernels/precision.h): on for amp_fp16, off for amp_bf16, whose fp32-sized exponent range
// makes scaling unnecessary.
struct LossScaleSpec {
  bool enabled_fp16 = precision_info(Precision::AMP_FP16).loss_scaling_default;
  bool enabled_bf16 = precision_info(Precision::AMP_BF16).loss_scaling_default;
  // Doubles, as GradScaler's Python floats: the scale is a float32 multiplied by these in double
  // and rounded once (kernels' update_loss_scale).
  double init = 65536.0, growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// JSON key "fp8": {"amax_history_len", "amax_compute": "max" | "most_recent", "margin"}, the
// delayed-scaling recipe of amp_fp8 (kernels/fp8.h; Transformer Engine's defaults: 1024, max, 0).

struct Spec {
  std::string name;         // required; letters, digits, '_', '-', '.'
  std::string source_path;  // the file it came from (for messages), not a JSON key
  std::string family;       // model.type: "mlp" | "resnet_bottleneck" | "transformer"
  ModelSpec model;
  DataSpec data;
  TrainSpec train;
  std::vector<Precision> precisions = default_precisions();  // in the order given, no duplicates
  LossScaleSpec loss_scale;
  DelayedScalingRecipe fp8;
  std::vector<std::string> fp32_layers;  // layers pinned to fp32 in every mode
};

bool operator==(const MlpSpec& a, const MlpSpec& b);
bool operator==(const ResnetSpec& a, const ResnetSpec& b);
bool operator==(const TransformerSpec& a, const TransformerSpec& b);
bool operator==(const DataSpec& a, const DataSpec& b);
bool operator==(const OptimizerSpec& a, const OptimizerSpec& b);
bool operator==(const TrainSpec& a, const TrainSpec& b);
bool operator==(const LossScaleSpec& a, const LossScaleSpec& b);
bool operator==(const DelayedScalingRecipe& a, const DelayedScalingRecipe& b);
bool operator==(const Spec& a, const Spec& b);  // ignores source_path
inline bool operator!=(const Spec& a, const Spec& b) {
  return !(a == b);
}

// Reads and parses a spec file; an unreadable file is `<file>: cannot read spec: <strerror>`.
Spec load_spec(const std::string& path);
// The files a spec was read from and reads: its own file and, for idx data, the four idx files
// (outputs must not be any of them).
std::vector<std::string> spec_inputs(const Spec& spec);
// A spec's name: 1 to 128 letters, digits, '_', '-' or '.' (it names files and table rows).
bool valid_model_name(const std::string& name);
inline constexpr const char* kModelNameRule =
    "1 to 128 letters, digits, '_', '-' or '.', not starting with '-'";

// Refuses (BadInput) two specs of one model name, as their files name them: results are matched
// by name in the tables and in `compare` (run, validate and maxbatch take specs so).
void refuse_shared_model_names(const std::vector<Spec>& specs);
// Parses spec text. `path` names the file in messages and anchors relative idx paths.
Spec parse_spec(const std::string& text, const std::string& path);
// The resolved spec with every default written out; parse_spec(to_json(s).dump(), p) == s.
nlohmann::json to_json(const Spec& spec);

// For model builders: every fp32_layers entry must be one of `layer_names`, else BadInput
// `<file>: fp32_layers[i]: unknown layer "x" (expected one of: ...)`. parse_spec already does
// this for MLPs.
void validate_fp32_layers(const Spec& spec, const std::vector<std::string>& layer_names);

// The limits of the synthetic data a spec asks for, checked before anything is made (defined in
// models/dataset.cpp, which makes the data): BadInput "<file>: model: expected ...". parse_spec
// applies it, so that `validate` refuses what `run` would.
void check_synthetic_data(const Spec& spec);

// A value put into the spec's JSON at `path` (e.g. {"train", "batch_size"}); `what` names it in an
// error, e.g. "--batch-size 64".
struct SpecOverride {
  std::string what;
  std::vector<std::string> path;
  nlohmann::json value;
};
// The spec with each override applied in turn and the spec read again after each, so that an
// override meets exactly the rules the spec's own value met. BadInput "<what>: <the rule>".
Spec with_overrides(const Spec& spec, const std::vector<SpecOverride>& overrides);

// Whether loss scaling is on for a mode under this spec (always false for fp32 and tf32).
bool loss_scaling_enabled(const LossScaleSpec& ls, Precision p);

}  // namespace mpbench
