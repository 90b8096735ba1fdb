// `mpbench inspect`: the per-layer table of a spec's model for one or every precision mode.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/console_table.h"
#include "models/model.h"
#include "models/spec.h"

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

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

void print_table(const Spec& spec, Precision p) {
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
                          dtype_name(li.storage_dtype), human_bytes(li.activation_bytes * batch)});
    params += li.params;
    flops += li.forward_flops * batch;
    act += li.activation_bytes * batch;
  }
  table.rows.push_back(
      {"total", "", "", human_count(params), human_count(flops), "", "", human_bytes(act)});
  std::cout << fmt::format("{} ({}), precision {}, batch {}\n", spec.name, spec.family,
                           precision_name(p), batch)
            << render_text_table(table)
            << fmt::format("training step ~ {} FLOPs (3 x forward)\n\n", human_count(3 * flops));
}

}  // namespace

int cmd_inspect(const InspectArgs& args) {
  Spec spec = load_spec(args.spec);
  if (!args.precision.empty()) {
    auto p = parse_precision(args.precision);
    if (!p)
      throw_bad_input(
          fmt::format("--precision: unknown mode '{}' (expected fp32, tf32, amp_fp16, amp_bf16)",
                      args.precision));
    print_table(spec, *p);
    return 0;
  }
  for (Precision p : spec.precisions) print_table(spec, p);
  return 0;
}

}  // namespace mpbench
