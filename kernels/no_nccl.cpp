// Linked instead of kernels/cuda/nccl_collective.cpp when the project is configured without NCCL
// (or without CUDA or MPI, which it needs beside it).
#include "kernels/collective.h"
#include "kernels/error.h"

namespace mpbench {

bool nccl_built(std::string* why_not) {
  if (why_not)
    *why_not = "this mpbench was built without NCCL (it needs CUDA, MPI and nccl.h / libnccl)";
  return false;
}

std::unique_ptr<Collective> make_nccl_collective(std::unique_ptr<Collective>, int) {
  std::string why;
  nccl_built(&why);
  throw_bad_input("data parallel on the GPU: " + why + "; --device cpu runs it on the CPU");
}

}  // namespace mpbench
