// Linked instead of kernels/cuda/ when the project is configured without CUDA.
#include "kernels/backend.h"

namespace mpbench {

int cuda_device_count(std::string* why_not) {
  if (why_not) *why_not = "this mpbench was built without CUDA (MPBENCH_CUDA=OFF or no nvcc)";
  return 0;
}

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw_bad_input("--device cuda: this mpbench was built without CUDA support");
}

}  // namespace mpbench
