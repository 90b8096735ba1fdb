// libFuzzer target: the spec parser, model construction in every mode, and the to_json -> parse
// round trip. Bad input must be an Error(BadInput); any other exception escapes, and a broken
// round trip traps, so libFuzzer reports both as crashes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/error.h"
#include "models/model.h"
#include "models/spec.h"

namespace {

bool is_bad_input(const mpbench::Error& e) {
  return e.kind() == mpbench::ErrorKind::BadInput;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mpbench;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Spec spec;
  try {
    spec = parse_spec(text, "fuzz.json");
  } catch (const Error& e) {
    if (!is_bad_input(e)) throw;
    return 0;
  }

  // Constructing a Model only declares its layers (at most parse_spec's 1024 layers or blocks);
  // parameters and activations are allocated by Model::allocate, not called here. So every spec
  // that parses is cheap to construct, whatever sizes it asks for, and no size limit is needed.
  for (Precision p : all_precisions()) {
    try {
      Model model(spec, p);
      // What `mpbench inspect` prints: sizes and FLOPs computed from the spec's numbers.
      (void)model.layer_infos();
      (void)model.forward_flops_per_sample();
    } catch (const Error& e) {
      // fp32_layers naming a layer the family does not have is only found here.
      if (!is_bad_input(e)) throw;
    }
  }

  // parse_spec(to_json(s).dump()) == s: the resolved spec echoed into results reads back the same.
  const nlohmann::json first = to_json(spec);
  Spec again;
  try {
    again = parse_spec(first.dump(), "fuzz.json");
  } catch (const Error&) {
    __builtin_trap();  // the spec it wrote itself must parse
  }
  if (to_json(again) != first || again != spec) __builtin_trap();
  return 0;
}
