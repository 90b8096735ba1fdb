#pragma once
// Data parallel across the ranks of an MPI launch (DESIGN.md "More than one device"): which
// launcher started this process, and the gradients' average across ranks in buckets, timed.
// Every rank builds the same model from the same seed and trains on its own shard of each global
// batch (the trainer's part: step_plan and the batch slices); after backward the gradients are
// averaged here, so every rank takes the same optimizer step.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/collective.h"
#include "train/results.h"

namespace mpbench {

// Per step, the mean of `per_step` (one entry per timed step, epoch after epoch) over the
// median epoch by time: the middle one, or the two middle ones' average, as TimeStats' median.
// 0 when the entries do not cover the epochs.
double median_epoch_mean(const std::vector<double>& per_step,
                         const std::vector<EpochResult>& epochs);

// The launcher this process was started by, read from its environment (no MPI call): "mpirun"
// (OpenMPI's), "srun" (Slurm), "pmix" or "pmi" (another launcher of those interfaces); none when
// it was started alone.
std::optional<std::string> mpi_launcher();

// This rank's index among the ranks on its host (the launcher's environment; 0 if none says):
// which GPU it takes.
int local_rank();
// How many ranks run on this host (1 if no launcher says).
int local_ranks();
// This process's rank and the job's size as the launcher's environment gives them, with no MPI
// call ({0, 1} when started alone): for the commands that do not train data parallel, which
// refuse a launch of more than one rank and leave the saying of it to rank 0.
struct EnvRank {
  int rank = 0, size = 1;
  bool size_known = false;  // the launcher said the size (some PMIx launchers give the rank only)
  // The ranks run different command lines (mpirun's MPMD form, A : B): each must say its own
  // bad arguments. Otherwise every rank has rank 0's, and rank 0 alone says them.
  bool mpmd = false;
};
EnvRank rank_from_env();

// DDP's default bucket: 25 MiB of gradients.
constexpr size_t kDefaultBucketBytes = size_t{25} << 20;

struct DataParallelOptions {
  DType wire = DType::F32;  // --grad-reduce: F32, BF16 or F16
  size_t bucket_bytes = kDefaultBucketBytes;
  // How a rank's failure is said before the job ends (fail): app/ prints, train/ does not.
  std::function<void(const std::string& line)> say;
};

// What the all-reduces of one run took: per timed step, the time the training waited for them
// (exposed), and where it is known (the GPU's side stream) the time they took on their own; the
// bytes each rank sent into them.
struct CommStats {
  int64_t buckets = 0;                   // all-reduces per step
  uint64_t bytes_per_step = 0;           // the gradients in the wire's dtype
  uint64_t fp8_amax_bytes_per_step = 0;  // amp_fp8: the newest amaxes maxed, in fp32
  std::vector<double> step_ms;           // exposed communication per timed step
  std::vector<double> busy_ms;  // the all-reduces' own time per timed step; empty: not known
};

class DataParallel {
 public:
  DataParallel(Collective& c, DataParallelOptions o) : c_(c), opts_(o) {}
  int rank() const { return c_.rank(); }
  int size() const { return c_.size(); }
  Collective& collective() { return c_; }

  // During the backward (Model::backward's gradients_ready): the gradients from `from` on are
  // final, so every bucket wholly inside them that has not started starts, as DDP's buckets do:
  // the last gradients first, each bucket the bucket_elements() below the previous. Then the
  // started ones are given a chance to progress.
  void gradients_ready(Backend& be, Tensor& grads, int64_t from);
  // After the backward: the buckets not started yet start, and all are waited for; grads (the
  // flat fp32 gradients, each rank's its shard's share: see Run's softmax_xent) is then their
  // sum over the ranks, the global batch's gradient. Each call into the collective is
  // bracketed by a pair of be's events: their sum is the step's exposed communication.
  void reduce_gradients(Backend& be, Tensor& grads);
  // amp_fp8: t (the newest amaxes) becomes the max over the ranks, timed as communication.
  void max_across_ranks(Backend& be, Tensor& t);
  // After a step: the step before it has its communication time read from its events (which
  // waits for them: a step late, the device is done with them, so the host is never made to
  // wait for the step it has just enqueued), kept for timed steps only (warm-up steps are
  // dropped).
  void end_step(bool timed);
  // After an epoch's last step: its time read now, so that the epoch's steps are all counted.
  void end_epoch();
  // Called once per run, before its first step: resets the counts.
  void begin_run(size_t gradient_elements);
  // The run's communication as the results give it: the options, the counts, the communication
  // per step of the median epoch (the epoch step_time_ms() is taken from, so that it is a part
  // of that step) and the bandwidths from it.
  DataParallelResult result(const std::vector<EpochResult>& epochs) const;
  // The options alone (ranks, the wire's dtype, the bucket size): a mode that did not train
  // (unsupported here) is still a row of this many ranks.
  DataParallelResult setup() const;
  // A run failed on this rank (out of memory, a runtime error): one line naming the rank, the
  // run (`what`: model, mode and how it failed) and the cause, through options' `say`, and every
  // rank of the job ends with exit 3.
  [[noreturn]] void fail(const std::exception& e, const std::string& what);

 private:
  // The fp32 gradients one all-reduce takes.
  int64_t bucket_elements() const {
    return std::max<int64_t>(static_cast<int64_t>(opts_.bucket_bytes / 4), 1);
  }
  // Where bucket k (counted from the end of n gradients) starts; it ends where bucket k - 1
  // starts (bucket 0: at n).
  int64_t bucket_start(int64_t n, int64_t k) const {
    return std::max<int64_t>(0, n - (k + 1) * bucket_elements());
  }
  // Starts the next bucket.
  void start_next(Backend& be, Tensor& grads);
  // Runs f, a call into the collective, as the profile's op `detail` between two of be's events.
  template <typename F>
  void timed(Backend& be, const std::string& detail, double bytes, F&& f);

  Collective& c_;
  DataParallelOptions opts_;
  CommStats stats_;
  int64_t started_ = 0;  // buckets of this step's backward started so far
  // Event pairs around a step's calls into the collective (the first `used` of them; the rest
  // are kept for later steps), for two steps: this one's (steps_[cur_]) and the one before it,
  // whose time is read a step late.
  struct StepSpans {
    std::vector<std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>>> spans;
    size_t used = 0;
    bool pending = false;  // ended, not read yet
    bool timed = false;
  };
  // Reads s's time, if pending; `back`: which of the collective's steps it is (busy_ms).
  void read_step(StepSpans& s, int back);

  std::array<StepSpans, 2> steps_;
  int cur_ = 0;
  bool reduced_ = false;          // the current step has finished its all-reduces
  uint64_t step_amax_bytes_ = 0;  // what max_across_ranks took in the current step
};

}  // namespace mpbench
