#include "train/data_parallel.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "train/statistics.h"

namespace mpbench {

int local_rank() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

int local_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  // Slurm: SLURM_TASKS_PER_NODE is "2" or "2(x3)"; its first number is this kind of host's.
  if (const char* v = std::getenv("SLURM_TASKS_PER_NODE")) return std::max(1, std::atoi(v));
  return 1;
}

std::optional<std::string> mpi_launcher() {
  auto set = [](const char* name) { return std::getenv(name) != nullptr; };
  if (set("OMPI_COMM_WORLD_SIZE")) return "mpirun";
  if (set("SLURM_STEP_ID") && (set("PMIX_RANK") || set("PMI_RANK"))) return "srun";
  if (set("PMIX_RANK")) return "pmix";
  if (set("PMI_RANK") || set("PMI_SIZE")) return "pmi";
  return std::nullopt;
}

void DataParallel::begin_run(Backend& be, size_t gradient_elements) {
  stats_ = CommStats{};
  start_ = be.create_event();
  stop_ = be.create_event();
  reduced_ = false;
  const size_t bucket = static_cast<size_t>(bucket_elements());
  stats_.buckets = static_cast<int64_t>((gradient_elements + bucket - 1) / bucket);
  stats_.bytes_per_step = gradient_elements * dtype_size(opts_.wire);
}

void DataParallel::average_gradients(Backend& be, Tensor& grads) {
  const int64_t n = grads.numel(), bucket = bucket_elements();
  start_->record();
  for (int64_t at = 0; at < n; at += bucket) {
    Tensor b = grads.slice(at, Shape{std::min(bucket, n - at)});
    // One op for a profile: "all_reduce", its elements, dtype and ranks, the bytes it sends in.
    OpCall call{"all_reduce",
                fmt::format("{} {} x{} ranks", b.numel(), dtype_name(opts_.wire), size()), 0,
                static_cast<double>(b.numel()) * static_cast<double>(dtype_size(opts_.wire))};
    be.run_as_op(call, [&] { c_.all_reduce_mean(be, b, opts_.wire); });
  }
  stop_->record();
  reduced_ = true;
}

void DataParallel::end_step(bool timed) {
  if (!reduced_) return;
  reduced_ = false;
  const double ms = stop_->elapsed_ms(*start_);
  if (timed) stats_.step_ms.push_back(ms);
}

DataParallelResult DataParallel::result() const {
  DataParallelResult d;
  d.ranks = size();
  d.grad_reduce = dtype_name(opts_.wire);
  d.bucket_bytes = opts_.bucket_bytes;
  d.buckets = stats_.buckets;
  d.bytes_per_step = stats_.bytes_per_step;
  d.comm_ms_per_step = compute_time_stats(stats_.step_ms).median;
  if (d.comm_ms_per_step > 0) {
    d.algbw_gbps = static_cast<double>(d.bytes_per_step) / (d.comm_ms_per_step * 1e6);
    d.busbw_gbps = d.algbw_gbps * 2.0 * (d.ranks - 1) / d.ranks;
  }
  return d;
}

void DataParallel::fail(const std::exception& e) {
  std::cerr << "mpbench: rank " << rank() << ": " << e.what() << std::endl;
  c_.abort(3);
  std::_Exit(3);  // abort does not return; said again for the compiler
}

}  // namespace mpbench
