#include "train/data_parallel.h"
#include "train/printable.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace mpbench {

namespace {

// The first of the launchers' variables that is set, as a number; fallback if none is.
int first_env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names)
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return fallback;
}

}  // namespace

double median_epoch_mean(const std::vector<double>& per_step,
                         const std::vector<EpochResult>& epochs) {
  std::vector<std::pair<double, double>> by_time;  // (epoch time, mean per step)
  size_t at = 0;
  for (const EpochResult& e : epochs) {
    const size_t n = static_cast<size_t>(std::max<int64_t>(e.steps, 0));
    if (n == 0 || at + n > per_step.size()) return 0;
    double sum = 0;
    for (size_t i = at; i < at + n; ++i) sum += per_step[i];
    by_time.emplace_back(e.time_ms, sum / static_cast<double>(n));
    at += n;
  }
  if (by_time.empty()) return 0;
  std::sort(by_time.begin(), by_time.end());
  const size_t m = by_time.size();
  return m % 2 == 1 ? by_time[m / 2].second
                    : 0.5 * (by_time[m / 2 - 1].second + by_time[m / 2].second);
}

int local_rank() {
  return first_env_int(
      {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, 0);
}

int local_ranks() {
  // Slurm: SLURM_TASKS_PER_NODE is "2" or "2(x3)"; its first number is this kind of host's.
  return std::max(1, first_env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                    "PMI_LOCAL_SIZE", "SLURM_TASKS_PER_NODE"},
                                   1));
}

EnvRank rank_from_env() {
  EnvRank r;
  if (!mpi_launcher()) return r;
  r.rank = first_env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}, 0);
  r.size = first_env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 0);
  r.size_known = r.size > 0;
  if (!r.size_known) r.size = 1;
  r.mpmd = first_env_int({"OMPI_NUM_APP_CTX"}, 1) > 1;
  return r;
}

std::optional<std::string> mpi_launcher() {
  auto set = [](const char* name) { return std::getenv(name) != nullptr; };
  if (set("OMPI_COMM_WORLD_SIZE")) return "mpirun";
  if (set("SLURM_STEP_ID") && (set("PMIX_RANK") || set("PMI_RANK"))) return "srun";
  if (set("PMIX_RANK")) return "pmix";
  if (set("PMI_RANK") || set("PMI_SIZE")) return "pmi";
  return std::nullopt;
}

void DataParallel::begin_run(size_t gradient_elements) {
  stats_ = CommStats{};
  for (StepSpans& s : steps_) s = StepSpans{};
  cur_ = 0;
  started_ = 0;
  reduced_ = false;
  step_amax_bytes_ = 0;
  const size_t bucket = static_cast<size_t>(bucket_elements());
  stats_.buckets = static_cast<int64_t>((gradient_elements + bucket - 1) / bucket);
  stats_.bytes_per_step = gradient_elements * dtype_size(opts_.wire);
}

template <typename F>
void DataParallel::timed(Backend& be, const std::string& detail, double bytes, F&& f) {
  StepSpans& s = steps_[cur_];
  if (s.used == s.spans.size()) s.spans.emplace_back(be.create_event(), be.create_event());
  auto& [t0, t1] = s.spans[s.used++];
  t0->record();
  // One op for a profile: "all_reduce", what it does, and the bytes it sends in.
  be.run_as_op(OpCall{"all_reduce", detail, 0, bytes}, f);
  t1->record();
}

void DataParallel::start_next(Backend& be, Tensor& grads) {
  const int64_t n = grads.numel();
  const int64_t hi = started_ == 0 ? n : bucket_start(n, started_ - 1);
  const int64_t lo = bucket_start(n, started_);
  Tensor b = grads.slice(lo, Shape{hi - lo});
  ++started_;
  timed(be, fmt::format("{} {} x{} ranks", b.numel(), dtype_name(opts_.wire), size()),
        static_cast<double>(b.numel()) * static_cast<double>(dtype_size(opts_.wire)),
        [&] { c_.start_all_reduce_sum(be, b, opts_.wire); });
}

void DataParallel::gradients_ready(Backend& be, Tensor& grads, int64_t from) {
  const int64_t before = started_;
  while (started_ < stats_.buckets && bucket_start(grads.numel(), started_) >= from)
    start_next(be, grads);
  // Started earlier and still in flight: a chance to move (MPI moves only inside its calls).
  if (before > 0) timed(be, "progress", 0, [&] { c_.progress(); });
}

void DataParallel::reduce_gradients(Backend& be, Tensor& grads) {
  while (started_ < stats_.buckets) start_next(be, grads);
  timed(be, "wait", 0, [&] { c_.finish_all_reduces(be); });
  started_ = 0;
  reduced_ = true;
}

void DataParallel::max_across_ranks(Backend& be, Tensor& t) {
  step_amax_bytes_ += t.bytes();
  timed(be, fmt::format("max {} fp32 x{} ranks", t.numel(), size()), static_cast<double>(t.bytes()),
        [&] { c_.all_reduce_max(be, t); });
}

void DataParallel::end_step(bool timed_step) {
  if (!reduced_) return;
  reduced_ = false;
  // Every step maxes the same newest amaxes: the last step's count is the run's.
  stats_.fp8_amax_bytes_per_step = std::exchange(step_amax_bytes_, 0);
  steps_[cur_].pending = true;
  steps_[cur_].timed = timed_step;
  cur_ ^= 1;
  read_step(steps_[cur_], 1);  // the step before this one, the collective's finish before last
}

void DataParallel::end_epoch() {
  read_step(steps_[cur_ ^ 1], 0);
}

void DataParallel::read_step(StepSpans& s, int back) {
  if (!s.pending) return;
  s.pending = false;
  double exposed = 0;
  for (size_t i = 0; i < s.used; ++i) exposed += s.spans[i].second->elapsed_ms(*s.spans[i].first);
  s.used = 0;
  const std::optional<double> busy = c_.busy_ms(back);
  if (!s.timed) return;
  stats_.step_ms.push_back(exposed);
  if (busy) stats_.busy_ms.push_back(*busy);
}

DataParallelResult DataParallel::setup() const {
  DataParallelResult d;
  d.ranks = size();
  d.grad_reduce = dtype_name(opts_.wire);
  d.bucket_bytes = opts_.bucket_bytes;
  return d;
}

DataParallelResult DataParallel::result(const std::vector<EpochResult>& epochs) const {
  DataParallelResult d = setup();
  d.buckets = stats_.buckets;
  d.bytes_per_step = stats_.bytes_per_step;
  d.fp8_amax_bytes_per_step = stats_.fp8_amax_bytes_per_step;
  d.comm_ms_per_step = median_epoch_mean(stats_.step_ms, epochs);
  if (!stats_.busy_ms.empty()) {
    d.comm_busy_ms_per_step = median_epoch_mean(stats_.busy_ms, epochs);
    if (d.comm_busy_ms_per_step > 0)
      d.overlap = std::clamp(1.0 - d.comm_ms_per_step / d.comm_busy_ms_per_step, 0.0, 1.0);
  }
  // The bandwidths of the all-reduces' own time where it is known, else of the exposed time
  // (the CPU's, where they are the same).
  const double t = d.comm_busy_ms_per_step > 0 ? d.comm_busy_ms_per_step : d.comm_ms_per_step;
  if (t > 0) {
    // The bytes of what that time covers: the exposed time holds amp_fp8's amax maxes too, the
    // GPU's own time of the buckets (the side stream's) only the gradients.
    const uint64_t bytes =
        d.bytes_per_step + (d.comm_busy_ms_per_step > 0 ? 0 : d.fp8_amax_bytes_per_step);
    d.algbw_gbps = static_cast<double>(bytes) / (t * 1e6);
    d.busbw_gbps = d.algbw_gbps * 2.0 * (d.ranks - 1) / d.ranks;
  }
  return d;
}

void DataParallel::fail(const std::exception& e, const std::string& what) {
  if (opts_.say)
    opts_.say(fmt::format("mpbench: rank {}: {}: {}", rank(), printable_text(what),
                          printable_text(e.what())));
  c_.abort(3);
  std::_Exit(3);  // abort does not return; said again for the compiler
}

}  // namespace mpbench
