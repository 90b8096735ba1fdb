// Linked instead of kernels/onednn/ when the project is configured without oneDNN.
#include "kernels/backend.h"

namespace mpbench {

const std::vector<std::string>& native_cpu_isa_names() {
  static const std::vector<std::string> none;
  return none;
}

void check_native_cpu_isa(const std::string&) {}

bool native_cpu_available(std::string* why_not) {
  if (why_not)
    *why_not = "this mpbench was built without oneDNN (MPBENCH_ONEDNN=OFF or no libdnnl-dev)";
  return false;
}

std::unique_ptr<Backend> make_native_cpu_backend(const NativeCpuOptions&) {
  std::string why;
  native_cpu_available(&why);
  throw_bad_input("--device cpu: " + why + "; --device reference runs the emulation");
}

}  // namespace mpbench
