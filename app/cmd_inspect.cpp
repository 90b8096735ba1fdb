// `mpbench inspect`: the per-layer table of a spec's model for one or every precision mode, down
// to the sublayer (each GEMM, convolution, norm and softmax) unless --depth block, with the
// tensor-core alignment check; --json writes the same as one entry per mode.
#include <algorithm>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/console_table.h"
#include "app/output_file.h"
#include "models/model.h"
#include "models/spec.h"
#include "train/max_batch.h"
#include "train/trainer.h"

namespace mpbench {

namespace {

std::string human_count(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, units[u]);
}

// The output shape with the batch in front: (batch, ...).
std::vector<int64_t> batched_shape(const Shape& s, int64_t batch) {
  std::vector<int64_t> v{batch};
  for (int i = 0; i < s.rank; ++i) v.push_back(s[i]);
  return v;
}

std::string shape_text(const std::vector<int64_t>& v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + ")";
}

// The table's last column: what is misaligned in this row (or, for a layer shown without its
// sublayers, how many of them are).
std::string alignment_cell(const LayerInfo& li, Precision p, int64_t batch, bool with_children) {
  if (li.matmul) {
    std::string cell;
    for (const std::string& d : misaligned_sizes(li, p, batch))
      cell += (cell.empty() ? "" : " ") + d;
    return cell;
  }
  if (with_children) return "";
  int n = 0;
  misaligned_matmuls({li}, p, batch, nullptr, nullptr, &n);
  return n == 0 ? "" : fmt::format("{} misaligned", n);
}

// The compute column: the GEMM's operand dtype, or its FP8 dtypes forward/backward (amp_fp8, at
// a batch that lets it run in FP8).
std::string compute_cell(const LayerInfo& li, int64_t batch) {
  if (runs_fp8(li, batch))
    return fmt::format("{}/{}", dtype_name((*li.fp8_dtypes)[0]), dtype_name((*li.fp8_dtypes)[1]));
  return dtype_name(li.compute_dtype);
}

nlohmann::json layer_json(const LayerInfo& li, Precision p, int64_t batch) {
  nlohmann::json j = {{"name", li.name},
                      {"kind", li.kind},
                      {"output_shape", batched_shape(li.output_shape, batch)},
                      {"params", li.params},
                      {"forward_flops", li.forward_flops * static_cast<double>(batch)},
                      {"compute_dtype", dtype_name(li.compute_dtype)},
                      {"storage_dtype", dtype_name(li.storage_dtype)},
                      {"activation_bytes", activation_bytes_at(li, batch)}};
  if (runs_fp8(li, batch)) {
    j["fp8_dtypes"] = {{"forward", dtype_name((*li.fp8_dtypes)[0])},
                       {"backward", dtype_name((*li.fp8_dtypes)[1])}};
  }
  if (li.matmul) {
    const MatmulDims& m = *li.matmul;
    j["matmul"] =
        m.conv ? nlohmann::json{{"conv", true}, {"c_in", m.k}, {"c_out", m.n}}
               : nlohmann::json{{"conv", false}, {"m", m.rows(batch)}, {"n", m.n}, {"k", m.k}};
    j["misaligned"] = misaligned_sizes(li, p, batch);
  }
  nlohmann::json children = nlohmann::json::array();
  for (const LayerInfo& c : li.children) children.push_back(layer_json(c, p, batch));
  j["children"] = std::move(children);
  return j;
}

struct Inspection {
  std::string text;
  nlohmann::json json;
};

// --memory-limit's line: the largest batch whose predicted training memory fits the limit.
std::string fits_line(const Spec& spec, Precision p, const PredictedMaxBatch& f, size_t limit,
                      int64_t asked_multiple) {
  const std::string multiples =
      f.multiple == 1 ? ""
      : f.multiple != asked_multiple
          ? fmt::format(" (multiples of {}: at those every FP8 GEMM takes FP8)", f.multiple)
          : fmt::format(" (multiples of {})", f.multiple);
  std::string answer;
  if (f.batch == 0 && f.at_limit) {
    answer = fmt::format("no multiple of {} is a batch a spec takes (at most {})", f.multiple,
                         group_thousands(static_cast<double>(kMaxBatchSize)));
  } else if (f.batch == 0) {
    answer =
        fmt::format("no batch: the smallest a spec takes{} is predicted to need more", multiples);
  } else {
    answer = fmt::format(
        "{} {}{}, predicted without the libraries' workspace (`mpbench "
        "maxbatch` on the card measures it)",
        f.at_limit ? "every batch a spec takes, up to" : "up to batch",
        group_thousands(static_cast<double>(f.batch)), multiples);
    if (f.batch > spec.data.train_samples)
      answer += fmt::format(
          "; more than the spec's data.train_samples ({}): run takes it with at least that many",
          group_thousands(static_cast<double>(spec.data.train_samples)));
  }
  return fmt::format("fits {} in {} (--memory-limit): {}\n", format_bytes(limit), precision_name(p),
                     answer);
}

Inspection inspect(const Spec& spec, Precision p, bool sublayers, Backend& cpu) {
  Model model(spec, p);
  const int64_t batch = spec.train.batch_size;
  const std::vector<LayerInfo> infos = model.layer_infos();
  TextTable table;
  table.head = {"layer",   "kind",    "output",    "params",      "fwd FLOPs",
                "compute", "storage", "act bytes", "tensor cores"};
  table.right = {false, false, true, true, true, true, true, true, false};
  auto add_row = [&](const LayerInfo& li, const std::string& name, bool with_children) {
    table.rows.push_back({name, li.kind, shape_text(batched_shape(li.output_shape, batch)),
                          human_count(static_cast<double>(li.params)),
                          human_count(li.forward_flops * static_cast<double>(batch)),
                          compute_cell(li, batch), dtype_name(li.storage_dtype),
                          format_bytes(static_cast<size_t>(activation_bytes_at(li, batch))),
                          alignment_cell(li, p, batch, with_children)});
  };
  int64_t params = 0, act = 0;
  double flops = 0;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerInfo& li : infos) {
    const bool open = sublayers && !li.children.empty();
    add_row(li, li.name, open);
    if (open)
      for (const LayerInfo& c : li.children) add_row(c, "  " + c.name, false);
    params += li.params;
    flops += li.forward_flops * static_cast<double>(batch);
    act += activation_bytes_at(li, batch);
    layers.push_back(layer_json(li, p, batch));
  }
  const double training_flops = model.training_flops_per_sample() * static_cast<double>(batch);
  table.rows.push_back({"total", "", "", human_count(static_cast<double>(params)),
                        human_count(flops), "", "", format_bytes(static_cast<size_t>(act)), ""});

  std::string text =
      fmt::format("{} ({}), precision {}, batch {}\n", spec.name, spec.family, precision_name(p),
                  batch) +
      render_text_table(table, !utf8_output()) +
      fmt::format(
          "training step ~ {} FLOPs (3 x forward, less the input gradient the first layer "
          "does not compute)\n",
          human_count(training_flops));
  int matmuls = 0, pinned = 0, off = 0;
  const std::vector<std::string> misaligned =
      misaligned_matmuls(infos, p, batch, &matmuls, &pinned, &off);
  const int multiple = precision_info(p).tensor_core_multiple;
  // Layers fp32_layers keeps in fp32 run without tensor cores' multiples: named apart.
  const std::string pinned_note =
      pinned == 0 ? ""
                  : fmt::format("; {} more run{} in fp32 (fp32_layers), held to no multiple",
                                pinned, pinned == 1 ? "s" : "");
  if (multiple == 0) {
    text += fmt::format("tensor cores: {} uses none (strict fp32 GEMMs and convolutions)\n",
                        precision_name(p));
  } else if (matmuls == 0) {
    text += fmt::format("tensor cores: no GEMM or convolution runs in {}{}\n", precision_name(p),
                        pinned_note);
  } else if (misaligned.empty()) {
    text += fmt::format("tensor cores: {} sizes that are multiples of {}{}{}\n",
                        matmuls == 1 ? "the one GEMM or convolution has"
                                     : fmt::format("all {} GEMMs and convolutions have", matmuls),
                        multiple, precision_info(p).fp8_linears ? " (16 for the FP8 ones)" : "",
                        pinned_note);
  } else {
    text += fmt::format(
        "tensor cores: {} of {} GEMMs and convolutions have sizes that are not multiples of {}, "
        "which {} runs slower (pad them to a multiple): ",
        off, matmuls, multiple, precision_name(p));
    const size_t shown = std::min<size_t>(misaligned.size(), 6);
    for (size_t i = 0; i < shown; ++i) text += (i ? ", " : "") + misaligned[i];
    if (shown < misaligned.size()) text += fmt::format(", and {} more", misaligned.size() - shown);
    text += pinned_note + "\n";
  }
  if (precision_info(p).fp8_linears) {
    // FP8 at this batch; FP8 Linears that this batch keeps in bf16. Only GEMMs can take FP8
    // inputs: convolutions are counted apart. A layer in fp32 in this mode is one fp32_layers
    // pins.
    int fp8 = 0, off_batch = 0, gemms = 0, pinned_gemms = 0, convs = 0, pinned_convs = 0;
    std::function<void(const LayerInfo&)> count = [&](const LayerInfo& li) {
      if (li.matmul) {
        const bool fp32 = li.compute_dtype == DType::F32;
        ++(li.matmul->conv ? (fp32 ? pinned_convs : convs) : (fp32 ? pinned_gemms : gemms));
      }
      if (runs_fp8(li, batch))
        ++fp8;
      else if (li.fp8_dtypes)
        ++off_batch;
      for (const LayerInfo& c : li.children) count(c);
    };
    for (const LayerInfo& li : infos) count(li);
    const int all_gemms = gemms + pinned_gemms;
    text += fmt::format(
        "fp8: {} of {} {} in FP8 (fp8_e4m3 inputs forward, fp8_e5m2 gradients backward, delayed "
        "scaling); {}the rest in bf16{}{}\n",
        fp8, all_gemms, all_gemms == 1 ? "GEMM runs" : "GEMMs run",
        pinned_gemms ? fmt::format("{} in fp32 (fp32_layers), ", pinned_gemms) : "",
        off_batch ? fmt::format(", {} of them for the batch: at batch {} their rows are not a "
                                "multiple of 16",
                                off_batch, batch)
                  : "",
        convs + pinned_convs == 0
            ? ""
            : fmt::format(
                  "; {} convolution{} in bf16{} (amp_fp8 takes only Linear layers' "
                  "GEMMs to FP8)",
                  convs, convs == 1 ? "" : "s",
                  pinned_convs ? fmt::format(" and {} in fp32 (fp32_layers)", pinned_convs) : ""));
  }
  // Counted from the trainer's own allocations (train/trainer.h), on the CPU reference.
  const MemoryReport m = predict_training_memory(spec, p, cpu);
  std::string parts;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    if (cat == MemCategory::Data || m.by_category[c] == 0) continue;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", mem_category_name(cat),
                         format_bytes(m.by_category[c]));
  }
  // The table's act bytes are what each layer keeps for its backward; the activations category
  // holds more, which the table cannot show layer by layer: said so the two are not misread.
  const size_t kept = static_cast<size_t>(act);
  const size_t activations = m.by_category[static_cast<int>(MemCategory::Activations)];
  text += fmt::format(
      "predicted training memory {} ({}); the native CPU and a GPU add their libraries' "
      "workspace{}\n",
      format_bytes(m.training_peak), parts,
      activations > kept
          ? fmt::format(
                "; activations hold the act bytes above ({}) and {} the layers share: "
                "temporaries, the gradients passed between layers, and the input batch "
                "unless the first layer keeps it as it is and counts it (an fp32 MLP's fc1, a "
                "ResNet's first block or stem in fp32)",
                format_bytes(kept), format_bytes(activations - kept))
          : "");

  nlohmann::json entry = {{"model", spec.name},
                          {"family", spec.family},
                          {"precision", precision_name(p)},
                          {"batch_size", batch},
                          {"params", params},
                          {"forward_flops", flops},
                          {"training_flops", training_flops},
                          {"predicted_memory_bytes", prediction_json(m)},
                          {"tensor_core_multiple", multiple},
                          {"misaligned", misaligned},
                          {"layers", std::move(layers)}};
  return {std::move(text), std::move(entry)};
}

}  // namespace

int cmd_inspect(const InspectArgs& args) {
  Spec spec = load_spec(args.spec);
  if (args.depth != "block" && args.depth != "sublayer")
    throw_bad_input(fmt::format("--depth: expected block or sublayer, got \"{}\"", args.depth));
  std::vector<Precision> modes = spec.precisions;
  if (!args.precision.empty()) {
    auto p = parse_precision(args.precision);
    if (!p)
      throw_bad_input(fmt::format("--precision: unknown mode '{}' (expected {})", args.precision,
                                  fmt::join(precision_names(), ", ")));
    modes = {*p};
  }
  check_outputs({{"--json", args.json_path}}, spec_inputs(spec));
  preflight_training(spec);  // the data files too, as every command checks them
  auto cpu = make_reference_backend();
  nlohmann::json entries = nlohmann::json::array();
  for (Precision p : modes) {
    // Another batch: the spec as a maxbatch probe has it, on synthetic data as large as the
    // batch (nothing trains, and what the data hold is not in the prediction).
    const Spec at = args.batch_size > 0
                        ? probe_spec(spec, p, args.batch_size, 1,
                                     fmt::format("--batch-size {}", args.batch_size))
                        : spec;
    Inspection in = inspect(at, p, args.depth == "sublayer", *cpu);
    if (args.memory_limit > 0) {
      const PredictedMaxBatch f =
          predict_max_batch(spec, p, *cpu, args.memory_limit, args.multiple);
      in.text += fits_line(spec, p, f, args.memory_limit, args.multiple);
      in.json["predicted_max_batch"] = {
          {"batch", f.batch > 0 ? nlohmann::json(f.batch) : nlohmann::json(nullptr)},
          {"multiple", f.multiple},
          {"at_spec_limit", f.at_limit}};
    }
    std::cout << in.text << "\n";
    entries.push_back(std::move(in.json));
  }
  if (!args.json_path.empty()) {
    nlohmann::json doc = json_header("inspect");
    doc.update({{"spec", to_json(spec)}, {"entries", entries}});
    if (args.memory_limit > 0) doc["memory_limit_bytes"] = args.memory_limit;
    write_output(args.json_path, json_text(doc));
  }
  return 0;
}

}  // namespace mpbench
