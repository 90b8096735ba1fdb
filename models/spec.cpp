// What a spec holds and the rules its values meet; how its JSON is read is models/spec_reader.h.
// Objects with a "type" ("model", "data", "train.optimizer") go through a table of types: the
// keys each type accepts, how to read it, and how to write it back.
#include "models/spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "kernels/error.h"
#include "models/family.h"
#include "models/input_file.h"
#include "models/spec_reader.h"

namespace mpbench {

using json = nlohmann::json;
using namespace spec_json;

namespace {

// Sane upper bounds: large enough for any model an H200 could hold, small enough that sizes
// computed from them cannot overflow int64 and that a typo cannot ask for petabytes.
constexpr int64_t kMaxSamples = int64_t{1} << 26;  // per split
constexpr int64_t kMaxEpochs = 10000;
constexpr int64_t kMaxSteps = int64_t{1} << 30;        // warmup steps, loss-scale growth interval
constexpr double kMaxParams = 68719476736.0;           // 2^36 parameters: 256 GiB in fp32
constexpr double kMaxActivations = 274877906944.0;     // 2^38 activation elements per step
constexpr double kMaxDataFloats = 4294967296.0;        // 2^32 floats (16 GiB) of host data
constexpr int64_t kMaxAmaxHistory = int64_t{1} << 16;  // fp8 amax history slots per tensor
constexpr int64_t kMaxFp8Margin = 32;                  // fp8 scale margin: 2^-32 at the most

// Floats are written as their shortest decimal form (0.001, not 0.0010000000474974513): the
// echoed spec is read by people, and the decimal reads back to the same float.
json shortest_float(float f) {
  return std::stod(fmt::format("{}", f));
}

// Finds the type table entry for an object's "type" key, read before the object's other keys.
template <typename T>
const T& lookup_type(const Ctx& ctx, const json& obj, const std::string& path,
                     const std::vector<T>& types, std::optional<std::string> def) {
  std::vector<std::string> names;
  for (const auto& t : types) names.push_back(t.type);
  // A first reader accepting any key only reads "type"; the typed reader then checks the rest.
  if (!obj.is_object()) ctx.fail(path, "expected a JSON object, got " + render(obj));
  std::vector<std::string> keys = {"type"};
  for (const auto& [k, v] : obj.items()) {
    if (k != "type") keys.push_back(k);
  }
  const std::string type = ObjectReader(ctx, obj, path, keys).choice("type", names, def);
  for (const auto& t : types) {
    if (t.type == type) return t;
  }
  MPB_CHECK(false, "unreachable: type {}", type);
  return types.front();
}

template <typename T>
std::vector<std::string> with_type(const T& t) {
  std::vector<std::string> keys = {"type"};
  keys.insert(keys.end(), t.keys.begin(), t.keys.end());
  return keys;
}

// ---- optimizers ---------------------------------------------------------------------------

struct OptimizerType {
  std::string type;
  std::vector<std::string> keys;
  OptimizerSpec defaults;
};

OptimizerSpec optimizer_defaults(const std::string& type, double lr, double weight_decay) {
  OptimizerSpec o;
  o.type = type;
  o.lr = lr;
  o.weight_decay = weight_decay;
  return o;
}

const std::vector<OptimizerType>& optimizer_types() {
  // Defaults per type follow PyTorch's, except lr for adam/adamw, which is the spec default.
  static const std::vector<OptimizerType> types = {
      {"adam",
       {"lr", "weight_decay", "beta1", "beta2", "eps"},
       optimizer_defaults("adam", 1e-3, 0)},
      {"adamw",
       {"lr", "weight_decay", "beta1", "beta2", "eps"},
       optimizer_defaults("adamw", 1e-3, 0.01)},
      {"sgd", {"lr", "weight_decay", "momentum", "nesterov"}, optimizer_defaults("sgd", 0.01, 0)},
  };
  return types;
}

bool uses(const OptimizerType& t, const std::string& key) {
  return std::find(t.keys.begin(), t.keys.end(), key) != t.keys.end();
}

OptimizerSpec read_optimizer(const Ctx& ctx, const json& obj, const std::string& path) {
  const OptimizerType& t = lookup_type(ctx, obj, path, optimizer_types(), std::string("adam"));
  ObjectReader r(ctx, obj, path, with_type(t));
  OptimizerSpec o = t.defaults;
  o.lr = r.real("lr", {0, kInf, true, false}, o.lr);
  o.weight_decay = r.real("weight_decay", {0, kInf, false, false}, o.weight_decay);
  // torch.optim.Adam's decay is an L2 term in the gradient, which mpbench's Adam does not have;
  // running it as AdamW's decoupled decay would train another model without a word.
  if (t.type == "adam" && o.weight_decay != 0)
    ctx.fail(r.sub("weight_decay"),
             fmt::format("\"adam\" takes no weight decay here (got {}): its L2 form is not "
                         "implemented; for decoupled decay (torch.optim.AdamW) use \"type\": "
                         "\"adamw\"",
                         o.weight_decay));
  if (uses(t, "beta1")) {
    o.beta1 = r.real("beta1", {0, 1, false, true}, o.beta1);
    o.beta2 = r.real("beta2", {0, 1, false, true}, o.beta2);
    o.eps = r.real("eps", {0, kInf, true, false}, o.eps);
  }
  if (uses(t, "momentum")) {
    o.momentum = r.real("momentum", {0, 1, false, true}, o.momentum);
    o.nesterov = r.boolean("nesterov", o.nesterov);
    if (o.nesterov && o.momentum == 0) {
      ctx.fail(r.sub("nesterov"), "nesterov needs a momentum > 0, got momentum 0");
    }
  }
  return o;
}

json write_optimizer(const OptimizerSpec& o) {
  json j = {{"type", o.type}, {"lr", o.lr}, {"weight_decay", o.weight_decay}};
  for (const auto& t : optimizer_types()) {
    if (t.type != o.type) continue;
    if (uses(t, "beta1")) {
      j["beta1"] = o.beta1;
      j["beta2"] = o.beta2;
      j["eps"] = o.eps;
    }
    if (uses(t, "momentum")) {
      j["momentum"] = o.momentum;
      j["nesterov"] = o.nesterov;
    }
  }
  return j;
}

// ---- data ---------------------------------------------------------------------------------

struct DataType {
  std::string type;
  std::vector<std::string> keys;
};

const std::vector<DataType>& data_types() {
  static const std::vector<DataType> types = {
      {"synthetic", {"train_samples", "eval_samples", "seed"}},
      {"idx",
       {"train_samples", "eval_samples", "seed", "train_images", "train_labels", "eval_images",
        "eval_labels"}},
  };
  return types;
}

const char* const kIdxFiles[] = {"train_images", "train_labels", "eval_images", "eval_labels"};

std::string* idx_field(DataSpec& d, int i) {
  std::string* fields[] = {&d.train_images, &d.train_labels, &d.eval_images, &d.eval_labels};
  return fields[i];
}

DataSpec read_data(const Ctx& ctx, const json& obj, const std::string& path) {
  const DataType& t = lookup_type(ctx, obj, path, data_types(), DataSpec{}.type);
  ObjectReader r(ctx, obj, path, with_type(t));
  DataSpec d;
  d.type = t.type;
  d.train_samples = r.integer("train_samples", {1, kMaxSamples}, d.train_samples);
  d.eval_samples = r.integer("eval_samples", {1, kMaxSamples}, d.eval_samples);
  if (const json* seed = r.find("seed", false, "a non-negative integer")) {
    if (!seed->is_number_integer() || (!seed->is_number_unsigned() && seed->get<int64_t>() < 0)) {
      ctx.fail(r.sub("seed"), "expected a non-negative integer < 2^64, got " + render(*seed));
    }
    d.seed = seed->get<uint64_t>();
  }
  if (d.type == "idx") {
    namespace fs = std::filesystem;
    const fs::path base = fs::path(ctx.file).parent_path();
    for (int i = 0; i < 4; ++i) {
      const std::string p = r.file_path(kIdxFiles[i]);
      fs::path resolved = fs::path(p).is_absolute() ? fs::path(p) : base / p;
      *idx_field(d, i) = fs::absolute(resolved).lexically_normal().string();
    }
  }
  return d;
}

json write_data(const DataSpec& d) {
  json j = {{"type", d.type},
            {"train_samples", d.train_samples},
            {"eval_samples", d.eval_samples},
            {"seed", d.seed}};
  if (d.type == "idx") {
    DataSpec copy = d;
    for (int i = 0; i < 4; ++i) j[kIdxFiles[i]] = *idx_field(copy, i);
  }
  return j;
}

// ---- top level ----------------------------------------------------------------------------

const std::vector<std::string> kTopKeys = {"name",       "model",      "data", "train",
                                           "precisions", "loss_scale", "fp8",  "fp32_layers"};

// Distinct strings, for precisions and fp32_layers: "duplicate" names the first occurrence.
// With `allowed`, each entry must be one of those names.
std::vector<std::string> read_string_list(const ObjectReader& r, const std::string& key,
                                          bool non_empty, const std::string& expected,
                                          const std::vector<std::string>* allowed = nullptr) {
  std::vector<std::string> out;
  std::unordered_map<std::string, size_t> first_at;
  const json* arr = r.array(key, false, expected);
  if (!arr) return out;
  if (non_empty && arr->empty()) r.ctx().fail(r.sub(key), "expected " + expected + ", got []");
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string p = fmt::format("{}[{}]", r.sub(key), i);
    const json& v = (*arr)[i];
    if (!v.is_string()) r.ctx().fail(p, "expected a string, got " + render(v));
    const std::string s = v.get<std::string>();
    if (allowed && std::find(allowed->begin(), allowed->end(), s) == allowed->end()) {
      r.ctx().fail(p, "expected one of " + join_quoted(*allowed, true) + ", got " + render(v));
    }
    // A map, not a scan of `out`: a list of 100k names would take quadratic time.
    const auto [it, fresh] = first_at.emplace(s, out.size());
    if (!fresh) {
      r.ctx().fail(
          p, fmt::format("duplicate \"{}\" (already at {}[{}])", clip(s), r.sub(key), it->second));
    }
    out.push_back(s);
  }
  return out;
}

void check_sizes(const Ctx& ctx, const Spec& s) {
  // A count as a whole number where it is one exactly (4295032832 read as "4.3e+09" beside a
  // limit of 4294967296, as if within it); beyond that, far past every limit, in exponent form.
  auto count = [](double v) {
    return v < 1e15 ? fmt::format("{:.0f}", v) : fmt::format("{:.4g}", v);
  };
  const Footprint f = family_of(s.model).footprint(s.model);
  if (f.params > kMaxParams) {
    ctx.fail("model", fmt::format("expected at most {:.0f} parameters, got {}", kMaxParams,
                                  count(f.params)));
  }
  const double acts = f.activations_per_sample * static_cast<double>(s.train.batch_size);
  if (acts > kMaxActivations) {
    // At batch 1 the model alone is too large: no batch size helps.
    ctx.fail(s.train.batch_size == 1 ? "model" : "train.batch_size",
             fmt::format("expected at most {:.0f} activation elements per step, got {} "
                         "(batch_size {} x {} per sample)",
                         kMaxActivations, count(acts), s.train.batch_size,
                         count(f.activations_per_sample)));
  }
  // The dataset is held in host memory (and on the device) whole: inputs per sample are features,
  // pixels or tokens (a token is 4 bytes, like a float).
  const double floats =
      static_cast<double>(s.data.train_samples + s.data.eval_samples) * f.inputs_per_sample;
  if (floats > kMaxDataFloats) {
    ctx.fail("data", fmt::format("expected at most {:.0f} input values in memory, got {} "
                                 "((train_samples + eval_samples) x {})",
                                 kMaxDataFloats, count(floats), f.inputs_what));
  }
}

}  // namespace

Spec parse_spec(const std::string& text, const std::string& path) {
  const Ctx ctx{path};
  const json root = parse_json_text(text, path);
  DuplicateKeyCheck::run(ctx, text);
  // mpbench's own output given where a spec belongs: say so, not that "schema_version" is unknown.
  if (root.is_object() && root.contains("schema_version") && root.contains("kind") &&
      root["kind"].is_string())
    ctx.fail("", fmt::format("a result file of `mpbench {}` (its \"kind\"), not a model spec",
                             clip(root["kind"].get<std::string>())));

  ObjectReader top(ctx, root, "", kTopKeys);
  Spec s;
  s.source_path = path;

  s.name = top.string("name", std::nullopt);
  if (!valid_model_name(s.name))
    ctx.fail("name", fmt::format("expected {}, got {}", kModelNameRule, render(root.at("name"))));

  const json* model = top.find("model", true, "a model object with a \"type\"");
  const Family& family = lookup_type(ctx, *model, "model", families(), std::nullopt);
  s.family = family.type;
  s.model = family.read(ObjectReader(ctx, *model, "model", with_type(family)));

  if (const json* data = top.find("data", false, "")) s.data = read_data(ctx, *data, "data");

  if (const json* train = top.find("train", false, "")) {
    ObjectReader r(ctx, *train, "train", {"batch_size", "epochs", "warmup_steps", "optimizer"});
    s.train.batch_size = r.integer("batch_size", {1, kMaxBatchSize}, s.train.batch_size);
    s.train.epochs = r.integer("epochs", {1, kMaxEpochs}, s.train.epochs);
    s.train.warmup_steps = r.integer("warmup_steps", {0, kMaxSteps}, s.train.warmup_steps);
    if (const json* opt = r.find("optimizer", false, "")) {
      s.train.optimizer = read_optimizer(ctx, *opt, "train.optimizer");
    }
  }
  if (s.train.batch_size > s.data.train_samples) {
    ctx.fail("train.batch_size", fmt::format("expected at most data.train_samples ({}), got {}",
                                             s.data.train_samples, s.train.batch_size));
  }

  const std::vector<std::string> pnames = precision_names();
  const std::string plist = "a non-empty list of distinct names from " + join_quoted(pnames, true);
  if (top.has("precisions")) {
    s.precisions.clear();
    for (const std::string& name : read_string_list(top, "precisions", true, plist, &pnames)) {
      s.precisions.push_back(*parse_precision(name));
    }
  }

  if (const json* ls = top.find("loss_scale", false, "")) {
    ObjectReader r(
        ctx, *ls, "loss_scale",
        {"init", "growth_factor", "backoff_factor", "growth_interval", "amp_fp16", "amp_bf16"});
    LossScaleSpec& l = s.loss_scale;
    // GradScaler keeps its scale in fp32.
    l.init = static_cast<float>(r.real("init", {0, kInf, true, false}, l.init));
    // The gradients are unscaled by the scale's fp32 reciprocal: below 2^-128 it is inf.
    if (!std::isfinite(1.0f / static_cast<float>(l.init)))
      ctx.fail(r.sub("init"), fmt::format("expected more than 2^-128 (2.94e-39), got {}, whose "
                                          "reciprocal the gradients are unscaled by is inf in fp32",
                                          static_cast<float>(l.init)));
    l.growth_factor = r.real64("growth_factor", {1, kInf, true, false}, l.growth_factor);
    l.backoff_factor = r.real64("backoff_factor", {0, 1, true, true}, l.backoff_factor);
    // scale * factor is rounded to fp32 once: within 2^-24 of 1 a factor leaves a scale whose
    // significand is just above 1 as it was (half its spacing is 2^-24 of it), and the scale
    // stops there, a step that should back off or grow doing neither. (Backing off from a power
    // of two moves until 2^-25; the scale soon reaches such a significand.)
    for (const auto& [key, f] : {std::pair{"growth_factor", l.growth_factor},
                                 std::pair{"backoff_factor", l.backoff_factor}})
      if (std::fabs(f - 1.0) <= 0x1p-24)
        ctx.fail(r.sub(key), fmt::format("expected a factor more than 2^-24 from 1, got {}: an "
                                         "fp32 scale times it can round back to itself",
                                         f));
    l.growth_interval = r.integer("growth_interval", {1, kMaxSteps}, l.growth_interval);
    l.enabled_fp16 = r.boolean("amp_fp16", l.enabled_fp16);
    l.enabled_bf16 = r.boolean("amp_bf16", l.enabled_bf16);
  }

  if (const json* f8 = top.find("fp8", false, "")) {
    ObjectReader r(ctx, *f8, "fp8", {"amax_history_len", "amax_compute", "margin"});
    DelayedScalingRecipe& f = s.fp8;
    f.amax_history_len = r.integer("amax_history_len", {1, kMaxAmaxHistory}, f.amax_history_len);
    f.amax_compute = r.choice("amax_compute", {"max", "most_recent"}, "max") == "max"
                         ? AmaxCompute::Max
                         : AmaxCompute::MostRecent;
    f.margin = static_cast<int>(r.integer("margin", {0, kMaxFp8Margin}, f.margin));
  }

  s.fp32_layers = read_string_list(top, "fp32_layers", false, "a list of distinct layer names");
  if (family.check) family.check(ctx, s);
  check_sizes(ctx, s);
  check_synthetic_data(s);
  return s;
}

Spec load_spec(const std::string& path) {
  return parse_spec(read_input_file(path, "spec", kMaxSpecFileBytes), path);
}

std::vector<std::string> spec_inputs(const Spec& s) {
  std::vector<std::string> files;
  if (!s.source_path.empty()) files.push_back(s.source_path);
  if (s.data.type == "idx") {
    for (const std::string* f :
         {&s.data.train_images, &s.data.train_labels, &s.data.eval_images, &s.data.eval_labels})
      files.push_back(*f);
  }
  return files;
}

bool valid_model_name(const std::string& name) {
  // Not a leading '-': a spreadsheet opening the CSV takes "-A1" for a formula.
  return !name.empty() && name.size() <= 128 && name[0] != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

void refuse_shared_model_names(const std::vector<Spec>& specs) {
  for (size_t i = 0; i < specs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (specs[i].name == specs[j].name)
        throw_bad_input(fmt::format(
            "{} and {} both name their model \"{}\"{}; results are matched by name, so each "
            "spec must have its own",
            specs[j].source_path, specs[i].source_path, specs[i].name,
            specs[j].source_path == specs[i].source_path ? " (the same file twice)" : ""));
}

json to_json(const Spec& s) {
  json j;
  j["name"] = s.name;
  j["model"] = family_of(s.model).write(s.model);
  j["data"] = write_data(s.data);
  j["train"] = {{"batch_size", s.train.batch_size},
                {"epochs", s.train.epochs},
                {"warmup_steps", s.train.warmup_steps},
                {"optimizer", write_optimizer(s.train.optimizer)}};
  j["precisions"] = json::array();
  for (Precision p : s.precisions) j["precisions"].push_back(precision_name(p));
  j["loss_scale"] = {{"init", shortest_float(static_cast<float>(s.loss_scale.init))},
                     {"growth_factor", s.loss_scale.growth_factor},
                     {"backoff_factor", s.loss_scale.backoff_factor},
                     {"growth_interval", s.loss_scale.growth_interval},
                     {"amp_fp16", s.loss_scale.enabled_fp16},
                     {"amp_bf16", s.loss_scale.enabled_bf16}};
  j["fp8"] = {{"amax_history_len", s.fp8.amax_history_len},
              {"amax_compute", s.fp8.amax_compute == AmaxCompute::Max ? "max" : "most_recent"},
              {"margin", s.fp8.margin}};
  j["fp32_layers"] = s.fp32_layers;
  return j;
}

void validate_fp32_layers(const Spec& spec, const std::vector<std::string>& layer_names) {
  const std::unordered_set<std::string> known(layer_names.begin(), layer_names.end());
  for (size_t i = 0; i < spec.fp32_layers.size(); ++i) {
    const std::string& name = spec.fp32_layers[i];
    if (known.count(name) == 0) {
      throw_bad_input(fmt::format("{}: fp32_layers[{}]: unknown layer \"{}\" (expected one of: {})",
                                  spec.source_path, i, clip(name),
                                  join_quoted(layer_names, false)));
    }
  }
}

Spec with_overrides(const Spec& spec, const std::vector<SpecOverride>& overrides) {
  Spec out = spec;
  for (const SpecOverride& o : overrides) {
    json j = to_json(out);
    json* at = &j;
    for (const std::string& key : o.path) at = &(*at)[key];
    *at = o.value;
    try {
      out = parse_spec(j.dump(), out.source_path);
    } catch (const Error& e) {
      throw_bad_input(fmt::format("{}: {}", o.what, e.what()));
    }
  }
  return out;
}

bool loss_scaling_enabled(const LossScaleSpec& ls, Precision p) {
  switch (p) {
    case Precision::AMP_FP16:
      return ls.enabled_fp16;
    case Precision::AMP_BF16:
      return ls.enabled_bf16;
    default:
      return false;
  }
}

bool operator==(const MlpSpec& a, const MlpSpec& b) {
  return a.input_dim == b.input_dim && a.hidden == b.hidden && a.num_classes == b.num_classes &&
         a.activation == b.activation;
}
bool operator==(const ResnetSpec& a, const ResnetSpec& b) {
  auto same_stages = [&] {
    if (a.stages.size() != b.stages.size()) return false;
    for (size_t i = 0; i < a.stages.size(); ++i) {
      const ResnetStage &x = a.stages[i], &y = b.stages[i];
      if (x.blocks != y.blocks || x.width != y.width || x.out_channels != y.out_channels ||
          x.stride != y.stride)
        return false;
    }
    return true;
  };
  return a.image_size == b.image_size && a.in_channels == b.in_channels && a.width == b.width &&
         a.out_channels == b.out_channels && a.blocks == b.blocks && a.stride == b.stride &&
         same_stages() && a.stem == b.stem && a.stem_channels == b.stem_channels &&
         a.num_classes == b.num_classes;
}
bool operator==(const TransformerSpec& a, const TransformerSpec& b) {
  return a.d_model == b.d_model && a.heads == b.heads && a.ffn_dim == b.ffn_dim &&
         a.seq_len == b.seq_len && a.layers == b.layers && a.vocab_size == b.vocab_size &&
         a.causal == b.causal && a.tie_embeddings == b.tie_embeddings;
}
bool operator==(const DataSpec& a, const DataSpec& b) {
  return a.type == b.type && a.train_samples == b.train_samples &&
         a.eval_samples == b.eval_samples && a.seed == b.seed && a.train_images == b.train_images &&
         a.train_labels == b.train_labels && a.eval_images == b.eval_images &&
         a.eval_labels == b.eval_labels;
}
bool operator==(const OptimizerSpec& a, const OptimizerSpec& b) {
  return a.type == b.type && a.lr == b.lr && a.weight_decay == b.weight_decay &&
         a.beta1 == b.beta1 && a.beta2 == b.beta2 && a.eps == b.eps && a.momentum == b.momentum &&
         a.nesterov == b.nesterov;
}
bool operator==(const TrainSpec& a, const TrainSpec& b) {
  return a.batch_size == b.batch_size && a.epochs == b.epochs && a.warmup_steps == b.warmup_steps &&
         a.optimizer == b.optimizer;
}
bool operator==(const LossScaleSpec& a, const LossScaleSpec& b) {
  return a.enabled_fp16 == b.enabled_fp16 && a.enabled_bf16 == b.enabled_bf16 && a.init == b.init &&
         a.growth_factor == b.growth_factor && a.backoff_factor == b.backoff_factor &&
         a.growth_interval == b.growth_interval;
}
bool operator==(const DelayedScalingRecipe& a, const DelayedScalingRecipe& b) {
  return a.amax_history_len == b.amax_history_len && a.amax_compute == b.amax_compute &&
         a.margin == b.margin;
}
bool operator==(const Spec& a, const Spec& b) {
  return a.name == b.name && a.family == b.family && a.model == b.model && a.data == b.data &&
         a.train == b.train && a.precisions == b.precisions && a.loss_scale == b.loss_scale &&
         a.fp8 == b.fp8 && a.fp32_layers == b.fp32_layers;
}

}  // namespace mpbench
