#pragma once
// Where a training step's time goes, op by op (`mpbench profile`). OpProfiler observes a Backend
// (kernels/backend.h: OpObserver) and, while enabled, brackets each op with a pair of the
// backend's events (CUDA events on the GPU, a steady clock on the CPU). The time of an op is
// the stream time between its two events: its kernels, plus any time the device sat idle waiting
// for the host to enqueue them, which is part of what a step costs.
//
// Each op is filed under the scope it ran in — "<layer> fwd", "<layer> bwd" (the model says
// which layer runs through LayerObserver), or "step" for the loss, the gradient check, the
// optimizer and the batch copies — and the detail string Backend gives it. Events are read only in
// collect(), so profiling adds no host synchronisation to the steps (it does add the event
// records).
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "models/model.h"
#include "train/device_specs.h"
#include "train/trainer.h"

namespace mpbench {

struct OpTotal {
  std::string scope;   // "layer1 bwd", "step"
  std::string op;      // the Backend method: "gemm", "conv2d_backward_filter", ...
  std::string detail;  // shape and dtypes, e.g. "8192x2304x768 bf16 +bias"
  int64_t calls = 0;
  double ms = 0;       // summed over the profiled calls
  double flops = 0;    // summed over the calls, for GEMMs and convolutions (else 0)
  double bytes = 0;    // summed over the calls: the least each must move, for the memory-bound
                       // ops (0 for GEMMs and convolutions, which FLOPs judge)
  std::string kernel;  // the library implementation that ran it (Backend::last_kernel), or ""
  // Its time in each profiled step (summed over that step's calls; 0 in a step it did not run
  // in), which add up to ms: what tells a slower op from a slow spell (explain).
  std::vector<double> step_ms;
};

class OpProfiler final : public OpObserver, public LayerObserver {
 public:
  // Attaches itself to be's ops for its lifetime. Steps then run eagerly: a captured graph would
  // hide the ops.
  explicit OpProfiler(Backend& be);
  ~OpProfiler() override;
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // Ops are timed only while enabled (not during warm-up or evaluation).
  void set_enabled(bool enabled) { enabled_ = enabled; }
  // The ops timed from here on belong to the next profiled step (the first without a call).
  void next_step() { ++steps_; }
  void on_layer(const std::string& layer, bool backward) override;
  // Waits for every recorded op and returns the totals so far, in first-seen order, each with
  // one step_ms entry per step begun.
  std::vector<OpTotal> collect();

  bool observing() const override { return enabled_; }
  void op_begin(const OpCall& call) override;
  void op_end() override;

 private:
  // Resolves the pending events into the totals (blocks until they complete).
  void resolve();
  std::unique_ptr<Event> take_event();

  struct Pending {
    size_t total;  // index into totals_
    size_t step;
    std::unique_ptr<Event> start, stop;
  };
  Backend& be_;
  bool enabled_ = false;
  std::string scope_ = "step";
  size_t steps_ = 0;  // begun by next_step(); ops timed before the first go to the first
  std::vector<OpTotal> totals_;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index_;
  std::optional<Pending> running_;  // the op between op_begin and op_end
  std::vector<Pending> pending_;
  std::vector<std::unique_ptr<Event>> spare_;  // events of resolved ops, reused
};

// A profiled training run: `steps` steps after the spec's warm-up are timed op by op (not the
// warm-up, not the evaluations between epochs); the spec must run at least that many.
struct ProfiledRun {
  RunResult run;
  int64_t steps = 0;        // steps profiled
  double step_ms = 0;       // median device time of a profiled step (events between steps)
  double step_mean_ms = 0;  // their mean: what the ops' per-step means add up to, with host gaps
  std::vector<double> step_times_ms;  // each profiled step's device time, in order
  std::vector<OpTotal> ops;
};
// Profiled steps whose mean is this far above their median held a stalled step or a few (a busy
// machine): the ops' per-step means, which add up to the mean, then say little of a typical step.
constexpr double kUnevenStepsRatio = 1.25;
inline bool uneven_steps(const ProfiledRun& r) {
  return r.step_ms > 0 && r.step_mean_ms > kUnevenStepsRatio * r.step_ms;
}
// Trains as train_and_measure does with `opts` (its on_progress and memory_limit are kept; the
// profiler takes the layer observer and the phases), timing every op of the first `steps`
// training steps after the warm-up.
ProfiledRun profile_training(const Spec& spec, const Dataset& data, Precision p, int64_t steps,
                             Backend& be, TrainOptions opts = {});

// An op's time in each of a run's `steps` profiled steps: its step_ms padded with zeros, or,
// for a total recorded without them (made by hand), the total spread evenly.
std::vector<double> per_step_ms(const OpTotal& o, int64_t steps);

// One mode's profiles (rounds, as `explain --repeat` interleaves them with the other modes')
// pooled into one: their steps one after another, each op's calls, time, FLOPs and bytes summed
// and its per-step times joined (a total without them spread evenly), the loss-scale skips
// summed; the step median and mean over all the steps. A round that did not train is the pool
// (its status says why). Needs at least one round.
ProfiledRun pool_rounds(const std::vector<ProfiledRun>& rounds);

// The share of its ceiling an op reached, in percent: TFLOP/s against the peak when it has
// FLOPs, else GB/s against the bandwidth when it has bytes; nullopt when it has neither.
std::optional<double> percent_of_ceiling(const OpTotal& op, const Ceilings& c);

}  // namespace mpbench
