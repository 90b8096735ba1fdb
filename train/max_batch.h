#pragma once
// The largest batch that really trains within a memory budget (`mpbench maxbatch`). A probe
// builds the model at one batch size and trains it for a few steps on synthetic data under the
// cap (TrainOptions::memory_limit: every category but the dataset copy, workspaces included).
// With a limit, the search starts from the prediction (predict_training_memory, what `inspect`
// prints): the largest multiple of K predicted to fit is probed, then the next multiple; when the
// prediction is exact that is the answer, in two probes. Where a library's workspace makes it
// inexact, each probe's excess over the prediction guides the next guess. Failing that (or without
// a limit) the search doubles from the largest batch that trained until a probe fails, then
// bisects between the last batch that trained and the first that did not, on multiples of K:
// about 2 log2(max / K) probes.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/spec.h"
#include "train/results.h"

namespace mpbench {

struct BatchProbe {
  int64_t batch = 0;
  RunStatus status = RunStatus::Ok;  // oom when it did not fit
  std::string detail;                // why it did not train
  bool refused = false;              // the spec's own rules refuse the batch (nothing trained)
  RunResult run;                     // the probe's training run (memory, samples/s)
};

struct MaxBatchOptions {
  size_t memory_limit = 0;  // 0: none (on a GPU, its memory)
  int64_t multiple = 1;     // K: every batch tried is a multiple of it
  int64_t steps = 2;        // timed training steps per probe, after one warm-up step
  std::function<void(const BatchProbe&)> on_probe;  // after each probe, e.g. a progress line
  bool from_prediction = true;  // false: the plain doubling search (the tests' reference)
};

struct MaxBatchResult {
  std::string model;
  Precision precision = Precision::FP32;
  int64_t max_batch = 0;  // 0: not even the smallest batch tried trains (K, or the smallest
                          // multiple of it that the spec's rules take)
  // The largest batch a spec takes (kMaxBatchSize), not memory, bounded the search: max_batch
  // is the largest multiple of K within it, or 0 when there is none (nothing was probed).
  bool at_limit = false;
  // The search ended at a probe that failed for another reason than memory (its detail says
  // which): max_batch is the largest batch that trained before it, a lower bound only.
  bool stopped = false;
  std::vector<BatchProbe> probes;  // in the order they ran
  int64_t predicted = 0;           // the largest multiple of K predicted to fit; 0: none made
  // K as searched: the one asked for or, for amp_fp8, its least common multiple with the batch
  // at which every FP8 Linear's GEMMs take FP8 (their M a multiple of 16); at other batches
  // they run in bf16, with bf16's memory, so that memory is not monotone in the batch.
  int64_t multiple = 0;
  // Why the mode has no path on this backend (amp_fp16 on the native CPU, amp_fp8 below sm_89):
  // then nothing was probed and there is no max_batch. Empty: the mode runs here.
  std::string unsupported;
  // The probe at max_batch; nullptr when there is none.
  const BatchProbe* best() const;
  // The smallest batch that did not train (what bounded the search, unless at_limit): past
  // max_batch by K once the search is done, whichever order the probes ran in. nullptr: none.
  const BatchProbe* bound() const;
};

// What the search asks of the world, as functions: find_max_batch's train and predict with a
// backend; the tests give it models of memory no backend has (a prediction that overstates).
struct BatchOracle {
  std::function<BatchProbe(int64_t batch)> probe;  // trains at `batch`, or says why not
  // predict_training_memory's training peak at `batch`; nullopt where the spec refuses the batch.
  std::function<std::optional<size_t>(int64_t batch)> predicted_peak;
};

// The spec a probe trains: `batch`, one epoch of `steps` steps after one warm-up step, on
// synthetic data of steps x batch training samples and one evaluation sample, in mode p only.
// Error(BadInput) when the spec's own rules refuse that batch, naming `what` (default "batch N").
Spec probe_spec(const Spec& spec, Precision p, int64_t batch, int64_t steps,
                const std::string& what = "");

// The largest multiple of K whose predicted training peak (predict_training_memory on `be`) is
// within `limit`, nothing trained: where maxbatch's search starts, and inspect --memory-limit's
// answer for a card one does not have.
struct PredictedMaxBatch {
  int64_t batch = 0;      // 0: not even the smallest multiple of K the spec takes is
  int64_t multiple = 0;   // K as searched (amp_fp8's, as MaxBatchResult::multiple)
  bool at_limit = false;  // the largest multiple of K a spec takes fits: no memory bound found
};
PredictedMaxBatch predict_max_batch(const Spec& spec, Precision p, Backend& be, size_t limit,
                                    int64_t multiple);

MaxBatchResult find_max_batch(const Spec& spec, Precision p, Backend& be,
                              const MaxBatchOptions& opts);

// The search itself, on the oracle's answers (find_max_batch without the model, the mode and
// the backend: the result's model, precision and unsupported are left empty).
MaxBatchResult search_max_batch(const BatchOracle& oracle, const MaxBatchOptions& opts);

}  // namespace mpbench
