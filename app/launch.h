#pragma once
// What an MPI launch (`mpirun -np N mpbench run|profile|explain ...`, or srun) gives a command
// that trains: the job's collective, this rank's backend and the data parallel over them
// (DESIGN.md "More than one device"). Without a launcher it is one process, as always: no MPI
// call is made. Here, and only here, is decided which rank speaks: rank 0 prints and writes,
// the others train quietly.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "kernels/collective.h"
#include "train/data_parallel.h"

namespace mpbench {

struct DeviceInfo;

class Launch {
 public:
  // Joins the job when launched by one (MPI_Init); otherwise nothing.
  Launch();
  bool launched() const { return comm_ != nullptr; }
  const std::optional<std::string>& launcher() const { return launcher_; }
  int ranks() const { return comm_ ? comm_->size() : 1; }
  // Rank 0, or the only process: the one that prints and writes.
  bool speaker() const { return !comm_ || comm_->rank() == 0; }

  // Runs check on every rank, and every rank agrees on the outcome before any collective of
  // training, so that a rank that alone sees bad input (a file only its host lacks) cannot leave
  // the others waiting: the lowest failing rank says why, naming itself, and every rank then
  // throws its code (the others an Error with no message: already said).
  void agree(const std::function<void()>& check);
  // This rank's backend for args.device (select_backend, on its local GPU), agreed as above;
  // under a launch every rank must run on the same kind of device, a GPU's gradients then go
  // over NCCL, and the data parallel takes args.grad_reduce and args.bucket_mb.
  std::unique_ptr<Backend> open_backend(const RunArgs& args);
  // Under a launch every rank must be given the same job, or the collectives pair up wrong: a
  // rank waits forever, frees buffers in flight, or trains other modes that rank 0 labels as
  // its own. Each rank gives its facts (name, value; the command's options), to which the specs'
  // are added: every value of each resolved spec, and which of its modes this rank's device
  // trains. Rank 0 names the first fact another rank differs in, as bad input on every rank.
  // The options every training command shares (--grad-reduce, --bucket-mb, --memory-limit) are
  // taken from `run`; `facts` holds the command's own.
  // `outputs` (an output option and its path) are compared last: rank 0 alone writes the files,
  // so a rank given other paths would lose them unsaid.
  void same_job(const RunArgs& run, std::vector<std::pair<std::string, std::string>> facts,
                const std::vector<Spec>& specs, const DeviceInfo& info, Device device,
                const std::vector<std::pair<std::string, std::string>>& outputs = {});
  // The data parallel of the launch (nullptr without one), once open_backend has run.
  DataParallel* data_parallel() { return dp_ ? &*dp_ : nullptr; }
  Collective* collective() { return comm_.get(); }
  // --grad-reduce, --bucket-mb or --scaling-baseline given to one process, which ignores them:
  // said on stderr.
  void warn_unused(const RunArgs& args) const;
  // env.launch for the result files: the launcher, the rank count, and each rank's host and
  // device kind; null without a launch. Every rank must call it (it gathers).
  nlohmann::json env_json(const std::string& device_kind);
  // How profile and explain name their batch: "batch 32", or under a launch of several ranks
  // "batch 32 per rank, 2 ranks (rank 0's ops)" (rank 0 shows its own ops).
  std::string batch_text(int64_t batch) const;

 private:
  std::optional<std::string> launcher_;
  std::unique_ptr<Collective> comm_;
  std::optional<DataParallel> dp_;
};

}  // namespace mpbench
