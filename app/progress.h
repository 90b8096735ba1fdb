#pragma once
// A one-line progress bar on stderr for long work (training epochs). Drawn only on a terminal and
// never for work that finishes within a second, so that logs, CI output and piped stderr stay
// clean.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "models/dataset.h"

namespace mpbench {

class Progress {
 public:
  // `enabled` is the caller's decision: typically stderr_is_tty() && !quiet.
  Progress(std::string label, int64_t total, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Records `done` of `total` units; redraws at most ~10 times a second and only once the work
  // has run for a second. `suffix` is shown after the ETA, e.g. "loss 0.123". Between updates a
  // timer redraws the last state every second, so that a long first step (or a long one later)
  // still shows the bar and an ETA that grows while nothing finishes.
  void update(int64_t done, const std::string& suffix = "");
  // Clears the line (if anything was drawn) and stops the timer. Idempotent; the destructor
  // calls it.
  void finish();

  static bool stderr_is_tty();

  // The line drawn for `done` of `total` after `elapsed_s`, at most `width - 1` columns so the
  // terminal never wraps it (a wrapped line breaks the \r redraw).
  static std::string format_line(const std::string& label, int64_t done, int64_t total,
                                 double elapsed_s, const std::string& suffix, int width);

 private:
  using Clock = std::chrono::steady_clock;
  void draw(Clock::time_point now);  // with mu_ held
  void tick();                       // the timer thread

  std::string label_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  int64_t done_ = 0;
  std::string suffix_;
  std::mutex mu_;  // the state above, between update() and the timer
  std::condition_variable wake_;
  std::thread timer_;
};

// Where a command of many runs (specs x modes x repetitions) stands. On a terminal the bar of
// each run carries its position (position()); off one (CI logs), where no bar is drawn, each
// finished run is one plain line on stderr with the time the whole command still needs. A run's
// work is its training FLOPs (none for a mode the device cannot run); what is left of a spec at
// a batch size goes at the rate its own finished runs took: a small spec's rate is mostly its
// per-step overhead and promised a big one's hours for seconds. A spec none of whose runs has
// been timed is counted, not timed; a run that did not finish (oom, failed) times nothing.
// `quiet` silences both.
class RunPlan {
 public:
  using Clock = std::chrono::steady_clock;
  // `now`: the clock runs are timed by (tests give their own; default the steady clock).
  explicit RunPlan(bool quiet, std::function<Clock::time_point()> now = Clock::now);
  // A run to come, of the spec named `spec` at `batch`.
  void add(const std::string& spec, int64_t batch, double work);
  // "spec 1/3 · mode 2/4": for the bar's label (whose run name already says the repetition).
  static std::string position(int64_t spec, int64_t specs, int64_t mode, int64_t modes);
  // A run starts now: the time since the last done() (its spec's data being made) is not its.
  void starting();
  // A run added before finished (`timed`: it trained to the end, so its time is its work's):
  // off a terminal, "mpbench: [3/8] tiny_mlp amp_bf16: ok in 1.2 s; about 0:04 left".
  void done(const std::string& spec, int64_t batch, const std::string& what,
            const std::string& status, double work, bool timed);
  // The seconds the runs not done yet take (NaN when none of them is of a spec timed so far),
  // and how many specs with work left have no timed run at a batch to go by; in a sweep (a spec
  // added at several batch sizes), also how many such batch sizes of theirs (0 otherwise).
  struct Left {
    double seconds;
    int untimed_specs;
    int untimed_batches = 0;
  };
  Left left() const;
  // The line done() prints, from its numbers (tests).
  static std::string format_done(int64_t index, int64_t runs, const std::string& what,
                                 const std::string& status, double run_s, Left left);

 private:
  struct Spec {
    double work_left = 0, timed_work = 0, timed_s = 0;
    int64_t runs = 0, done_runs = 0;
  };
  std::map<std::pair<std::string, int64_t>, Spec> specs_;
  int64_t runs_ = 0, done_runs_ = 0;
  bool lines_;
  std::function<Clock::time_point()> now_;
  Clock::time_point last_;
};

// make_dataset with a bar ("<spec name> data") while generation runs past a second.
Dataset make_dataset_with_progress(const Spec& spec, bool enabled);

}  // namespace mpbench
