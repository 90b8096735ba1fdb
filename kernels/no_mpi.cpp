// Linked instead of kernels/cpu/mpi_collective.cpp when the project is configured without MPI.
#include "kernels/collective.h"
#include "kernels/error.h"

namespace mpbench {

bool mpi_built(std::string* why_not) {
  if (why_not)
    *why_not = "this mpbench was built without MPI (MPBENCH_MPI=OFF or no libopenmpi-dev)";
  return false;
}

std::unique_ptr<Collective> make_mpi_collective() {
  std::string why;
  mpi_built(&why);
  throw_bad_input("launched by an MPI launcher, but " + why);
}

}  // namespace mpbench
