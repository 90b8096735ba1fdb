#pragma once
// Data parallel's one collective: the gradients' all-reduce across the ranks of an MPI launch
// (DESIGN.md "More than one device"). MPI_Allreduce on the CPU backends (kernels/cpu/
// mpi_collective.cpp), NCCL on the GPU (kernels/cuda/nccl_collective.cpp), each optional at
// build time (kernels/no_mpi.cpp, no_nccl.cpp without). We use the engines; we do not write a
// transport.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace mpbench {

class Backend;

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts making buf (fp32, on be's device) the sum over the ranks. The gradients come divided
  // already: each rank's loss gradient by the global batch's rows (Run's softmax_xent), where DDP
  // divides each rank's gradients by the rank count before its all-reduce; the sum is the same
  // mean, and each rank's tensors are its rows of one process's, casts included. wire (F32,
  // BF16 or F16) is the dtype the values travel and are summed in: a 16-bit form casts (round to
  // nearest even), sums the 16-bit values (each pairwise sum in fp32, rounded back: MPI has no
  // bf16 type, so that sum is a user-defined MPI_Op) and casts back, as PyTorch's
  // bf16_compress_hook. It does not wait: buf must not be touched until finish_all_reduces
  // returns. On the GPU it runs on a side stream once be's stream has done what it was given so
  // far, so that it overlaps what be does next (the rest of the backward).
  virtual void start_all_reduce_sum(Backend& be, Tensor& buf, DType wire) = 0;
  // Lets the started all-reduces move: MPI's progress only inside MPI calls, so the CPU calls it
  // between layers; NCCL's need nothing.
  virtual void progress() {}
  // Every started all-reduce complete, its 16-bit form cast back: the CPU waits; on the GPU be's
  // stream waits for the side stream.
  virtual void finish_all_reduces(Backend& be) = 0;
  // What one step's all-reduces took on their own (their side stream's time, summed; waits for
  // them), the measure of how much the backward hid: `back` 0, those up to the last
  // finish_all_reduces; 1, those of the finish before it (kept so that a step's times can be
  // read a step late, when the device is done with them). nullopt where they have no time of
  // their own (MPI on the CPU moves data inside its calls on the training thread: all of it is
  // exposed, and timed as such by the caller).
  virtual std::optional<double> busy_ms(int back) {
    (void)back;
    return std::nullopt;
  }
  // buf (fp32, on be's device) becomes the elementwise max over the ranks, in be's stream order
  // (amp_fp8's amax histories, so that every rank scales by the global batch's amax, as
  // Transformer Engine reduces amaxes across its data-parallel group).
  virtual void all_reduce_max(Backend& be, Tensor& buf) = 0;
  // Small host values every rank needs the same of (agreement on errors, the series).
  virtual void sum_host(double* v, size_t n) = 0;
  virtual void max_host(double* v, size_t n) = 0;
  virtual void min_host(double* v, size_t n) = 0;
  // Returns when every rank has called it; a rank that waits sleeps between polls instead of
  // spinning, so that it does not take a core from a rank still working (run's single-rank
  // baseline).
  virtual void wait_for_all() = 0;
  // Every rank's `mine`, in rank order.
  virtual std::vector<std::string> gather_strings(const std::string& mine) = 0;
  // Ends every rank of the job with `code`, now (MPI_Abort): for a failure the other ranks cannot
  // know of, which would otherwise leave them waiting in a collective.
  [[noreturn]] virtual void abort(int code) = 0;
};

// Whether this mpbench was built with MPI; why_not says why not.
bool mpi_built(std::string* why_not = nullptr);
// Joins the job this process was launched into (MPI_Init). Error where MPI was not built in.
// MPI_Finalize runs when the collective goes.
std::unique_ptr<Collective> make_mpi_collective();
// Whether this mpbench was built with NCCL (beside CUDA and MPI); why_not says why not.
bool nccl_built(std::string* why_not = nullptr);
// The GPU's collective: NCCL on device `device`, bootstrapped over `host` (the MPI collective),
// which it keeps for the host values. Error where NCCL was not built in.
std::unique_ptr<Collective> make_nccl_collective(std::unique_ptr<Collective> host, int device);

}  // namespace mpbench
