#pragma once
// Data parallel across the ranks of an MPI launch (DESIGN.md "More than one device"): which
// launcher started this process, and the gradients' average across ranks in buckets, timed.
// Every rank builds the same model from the same seed and trains on its own shard of each global
// batch (the trainer's part: step_plan and the batch slices); after backward the gradients are
// averaged here, so every rank takes the same optimizer step.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/collective.h"
#include "train/results.h"

namespace mpbench {

// The launcher this process was started by, read from its environment (no MPI call): "mpirun"
// (OpenMPI's), "srun" (Slurm), "pmix" or "pmi" (another launcher of those interfaces); none when
// it was started alone.
std::optional<std::string> mpi_launcher();

// This rank's index among the ranks on its host (the launcher's environment; 0 if none says):
// which GPU it takes.
int local_rank();
// How many ranks run on this host (1 if no launcher says).
int local_ranks();

// DDP's default bucket: 25 MiB of gradients.
constexpr size_t kDefaultBucketBytes = size_t{25} << 20;

struct DataParallelOptions {
  DType wire = DType::F32;  // --grad-reduce: F32, BF16 or F16
  size_t bucket_bytes = kDefaultBucketBytes;
};

// What the all-reduces of one run took: per timed step, the time spent in them (all of it
// exposed on the CPU, where the all-reduce blocks), and the bytes each rank sent into them.
struct CommStats {
  int64_t buckets = 0;          // all-reduces per step
  uint64_t bytes_per_step = 0;  // the gradients in the wire's dtype
  std::vector<double> step_ms;  // exposed communication per timed step
};

class DataParallel {
 public:
  DataParallel(Collective& c, DataParallelOptions o) : c_(c), opts_(o) {}
  int rank() const { return c_.rank(); }
  int size() const { return c_.size(); }
  const DataParallelOptions& options() const { return opts_; }
  Collective& collective() { return c_; }

  // grads (the flat fp32 gradients) becomes the mean over the ranks, bucket by bucket, enqueued
  // on be's stream between two events (the time they take is the step's communication).
  void average_gradients(Backend& be, Tensor& grads);
  // After a step: its communication time read from the events (which waits for them), kept
  // for timed steps only (warm-up steps are dropped).
  void end_step(bool timed);
  // Called once per run, before its first step: resets the counts, makes the events on be.
  void begin_run(Backend& be, size_t gradient_elements);
  const CommStats& stats() const { return stats_; }
  // The run's communication as the results give it: the options, the counts, the median timed
  // step's communication and the bandwidths from it.
  DataParallelResult result() const;
  // A run failed on this rank (out of memory, a runtime error): one line naming the rank and
  // the cause, and every rank of the job ends with exit 3.
  [[noreturn]] void fail(const std::exception& e);

 private:
  // The fp32 gradients one all-reduce takes.
  int64_t bucket_elements() const {
    return std::max<int64_t>(static_cast<int64_t>(opts_.bucket_bytes / 4), 1);
  }

  Collective& c_;
  DataParallelOptions opts_;
  CommStats stats_;
  std::unique_ptr<Event> start_, stop_;
  bool reduced_ = false;  // the current step has recorded the events
};

}  // namespace mpbench
