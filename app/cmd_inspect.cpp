// `mpbench inspect`: the per-layer table of a spec's model for one or every precision mode.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/console_table.h"
#include "models/model.h"
#include "models/spec.h"
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

void print_table(const Spec& spec, Precision p, Backend& cpu) {
  Model model(spec, p);
  const int64_t batch = spec.train.batch_size;
  TextTable table;
  table.head = {"layer",     "kind",    "output",  "params",
                "fwd FLOPs", "compute", "storage", "act bytes"};
  table.right = {false, false, true, true, true, true, true, true};
  int64_t params = 0, act = 0;
  double flops = 0;
  for (const auto& li : model.layer_infos()) {
    std::string out = li.output_shape.str();
    out.replace(0, 1, fmt::format("({}, ", batch));
    table.rows.push_back({li.name, li.kind, out, human_count(li.params),
                          human_count(li.forward_flops * batch), dtype_name(li.compute_dtype),
                          dtype_name(li.storage_dtype),
                          format_bytes(static_cast<size_t>(li.activation_bytes * batch))});
    params += li.params;
    flops += li.forward_flops * batch;
    act += li.activation_bytes * batch;
  }
  table.rows.push_back({"total", "", "", human_count(params), human_count(flops), "", "",
                        format_bytes(static_cast<size_t>(act))});
  std::cout << fmt::format("{} ({}), precision {}, batch {}\n", spec.name, spec.family,
                           precision_name(p), batch)
            << render_text_table(table)
            << fmt::format("training step ~ {} FLOPs (3 x forward)\n", human_count(3 * flops));
  // Counted from the trainer's own allocations (train/trainer.h), on the CPU reference.
  const MemoryReport m = predict_training_memory(spec, p, cpu);
  std::string parts;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    if (cat == MemCategory::Data || m.by_category[c] == 0) continue;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", mem_category_name(cat),
                         format_bytes(m.by_category[c]));
  }
  std::cout << fmt::format(
      "predicted training memory {} ({}); a GPU adds its libraries' workspace\n\n",
      format_bytes(m.training_peak), parts);
}

}  // namespace

int cmd_inspect(const InspectArgs& args) {
  Spec spec = load_spec(args.spec);
  auto cpu = make_cpu_backend();
  if (!args.precision.empty()) {
    auto p = parse_precision(args.precision);
    if (!p)
      throw_bad_input(
          fmt::format("--precision: unknown mode '{}' (expected fp32, tf32, amp_fp16, amp_bf16)",
                      args.precision));
    print_table(spec, *p, *cpu);
    return 0;
  }
  for (Precision p : spec.precisions) print_table(spec, p, *cpu);
  return 0;
}

}  // namespace mpbench
