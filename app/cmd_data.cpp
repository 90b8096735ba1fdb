// `mpbench data`: writes the exact dataset `mpbench run` trains on (make_dataset), so that another
// framework (scripts/pytorch_reference.py) can train on bit-identical inputs without
// reimplementing our generator. Raw little-endian arrays plus a JSON index that names them.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "app/commands.h"
#include "app/output_file.h"
#include "app/progress.h"
#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "train/trainer.h"

namespace mpbench {

namespace {

bool host_is_little_endian() {
  const uint32_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

template <typename T>
std::string_view raw_bytes(const std::vector<T>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// The fp32 parameters `mpbench run` starts from (without --seeds), concatenated in declaration
// order, and their names, shapes and offsets (in floats) for the index.
struct InitialParams {
  std::vector<float> values;
  nlohmann::json tensors = nlohmann::json::array();
  uint64_t seed = 0;
};

InitialParams initial_params(const Spec& spec) {
  InitialParams out;
  out.seed = init_seed_for(spec, std::nullopt);
  std::unique_ptr<Backend> be = make_reference_backend();
  TrackingAllocator alloc(*be);
  Model model(spec, Precision::FP32);  // the initial values are every mode's
  model.allocate_params(alloc, *be, out.seed);
  const ParamStore& ps = model.params();
  for (int i = 0; i < static_cast<int>(ps.params().size()); ++i) {
    const ParamStore::Param& p = ps.params()[i];
    const auto offset = static_cast<int64_t>(out.values.size());
    out.values.resize(out.values.size() + static_cast<size_t>(p.shape.numel()));
    be->download(ps.master(i), out.values.data() + offset);
    std::vector<int64_t> shape(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
    out.tensors.push_back({{"name", p.name}, {"shape", shape}, {"offset", offset}});
  }
  return out;
}

}  // namespace

int cmd_data(const DataArgs& args) {
  Spec spec = load_spec(args.spec);
  if (args.seed >= 0) spec.data.seed = static_cast<uint64_t>(args.seed);
  preflight(spec);  // idx files refused as run refuses them, naming the spec
  if (args.out_prefix.empty()) throw_bad_input("--out: expected a file prefix, got \"\"");
  // As every other output refuses it: not a prefix of files named "-.json", "-.train_x.f32", ...
  if (args.out_prefix == "-")
    throw_bad_input(
        fmt::format("--out -: '-' is not taken for stdout (data writes several files "
                    "from a prefix); give a file prefix such as {}",
                    spec.name));
  if (std::filesystem::is_directory(args.out_prefix)) {
    std::string dir = args.out_prefix;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();  // "out/" suggests out/name
    throw_bad_input(fmt::format("--out {}: is a directory (expected a file prefix such as {}{}{})",
                                args.out_prefix, dir, dir == "/" ? "" : "/", spec.name));
  }
  // The consumers read the files with the host's byte order; say so rather than write
  // big-endian bytes that a reader would silently misinterpret.
  if (!host_is_little_endian())
    throw_runtime("mpbench data writes little-endian files; this host is big-endian");

  const std::string& prefix = args.out_prefix;
  const std::string index = prefix + ".json";
  struct Part {
    const char* key;
    std::string suffix;
  };
  // Which kind of inputs the model family takes decides the x files' suffix (token ids or floats).
  const bool tokens = model_io(spec).input_dtype == DType::I32;
  const char* x_suffix = tokens ? ".i32" : ".f32";
  const std::vector<Part> parts = {{"train_x", std::string(".train_x") + x_suffix},
                                   {"train_y", ".train_y.i32"},
                                   {"eval_x", std::string(".eval_x") + x_suffix},
                                   {"eval_y", ".eval_y.i32"}};
  const std::string params_suffix = ".params.f32";
  std::vector<OutputArg> outputs = {{"--out", index}};
  for (const Part& p : parts) outputs.push_back({"--out", prefix + p.suffix});
  if (args.params) outputs.push_back({"--out", prefix + params_suffix});
  check_outputs(outputs, spec_inputs(spec));

  const auto start = std::chrono::steady_clock::now();
  Dataset data = make_dataset_with_progress(spec, !args.quiet && Progress::stderr_is_tty());
  const double generated_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string base = std::filesystem::path(prefix).filename().string();
  nlohmann::json files = nlohmann::json::object();
  for (const Part& p : parts) files[p.key] = base + p.suffix;  // relative to the index file

  std::vector<FileBytes> arrays = {
      {prefix + parts[0].suffix, tokens ? raw_bytes(data.train_tokens) : raw_bytes(data.train_x)},
      {prefix + parts[1].suffix, raw_bytes(data.train_y)},
      {prefix + parts[2].suffix, tokens ? raw_bytes(data.eval_tokens) : raw_bytes(data.eval_x)},
      {prefix + parts[3].suffix, raw_bytes(data.eval_y)}};
  InitialParams params;
  if (args.params) {
    params = initial_params(spec);
    arrays.push_back({prefix + params_suffix, raw_bytes(params.values)});
  }

  nlohmann::json j = json_header("data");
  j.update({{"spec", spec.name},
            {"spec_file", args.spec},
            // Every default filled in, so that a reader needs no copy of spec.cpp's.
            {"resolved_spec", to_json(spec)},
            {"sample_dim", data.sample_dim},
            {"num_classes", data.num_classes},
            {"train_size", data.train_size()},
            {"eval_size", data.eval_size()},
            {"description", data.description},
            {"x_dtype", tokens ? "int32" : "float32"},
            {"y_dtype", "int32"},
            {"labels_per_sample", data.labels_per_sample},
            {"byte_order", "little"},
            {"layout", "row-major (n, sample_dim) inputs, (n, labels_per_sample) labels"},
            {"files", files}});
  if (args.params)
    j["params"] = {{"file", base + params_suffix},
                   {"dtype", "float32"},
                   {"init_seed", params.seed},
                   {"layout",
                    "each tensor row-major in mpbench's layout: linear weight (out, in), "
                    "convolution weight (K, R, S, C), embedding (rows, d_model)"},
                   {"tensors", params.tensors}};
  // All or nothing for a reader, who goes by the index: the arrays are written whole under
  // temporary names, then the old index is removed, the arrays renamed into place and the new
  // index written last. An interrupted re-export leaves the old dataset, or no index; never the
  // old index beside new arrays.
  const std::string index_text = json_text(j);
  write_output_set(arrays, {index, index_text});
  if (!args.quiet)
    std::cerr << fmt::format(
        "mpbench: wrote {} ({} train + {} eval samples of {} {}, made in {:.2f} s)\n", index,
        data.train_size(), data.eval_size(), data.sample_dim, tokens ? "tokens" : "floats",
        generated_s);
  return 0;
}

}  // namespace mpbench
