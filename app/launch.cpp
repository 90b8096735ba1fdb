#include "app/launch.h"

#include <iostream>

#include "app/commands.h"
#include "app/output_file.h"
#include "kernels/allocator.h"  // format_bytes
#include "kernels/error.h"
#include "models/spec.h"
#include "train/device_specs.h"

namespace mpbench {

namespace {

DType grad_reduce_dtype(const std::string& name) {
  if (name == "bf16") return DType::BF16;
  if (name == "fp16") return DType::F16;
  return DType::F32;
}

}  // namespace

Launch::Launch() : launcher_(mpi_launcher()) {
  if (!launcher_) return;
  const EnvRank env = rank_from_env();  // before MPI's init, which may set its own variables
  comm_ = make_mpi_collective();
  // A launcher of another MPI (MPICH's mpiexec, srun without this MPI's PMI) starts processes
  // that each see a world of one: each would train alone, print its own table and write the
  // same files. Every one of them says so instead.
  if (env.size_known && env.size != comm_->size())
    throw_bad_input(fmt::format(
        "launched by {} as rank {} of {}, but MPI sees {} rank{}: the launcher is not of the MPI "
        "this mpbench was built with (launch it with that MPI's mpirun, or srun with its PMI)",
        *launcher_, env.rank, env.size, comm_->size(), comm_->size() == 1 ? "" : "s"));
  // An interrupt ends the job through rank 0; the others go without a word, and so does rank 0
  // when the launcher ends the job for a rank that failed (mpbench_main quiets its signals).
  if (!speaker()) quiet_interrupts();
}

void Launch::agree(const std::function<void()>& check) {
  if (!comm_) return check();
  double code = 0, reporter = comm_->size();
  std::string why;
  try {
    check();
  } catch (const Error& e) {
    code = e.exit_code();
    reporter = comm_->rank();
    why = e.what();
  }
  comm_->max_host(&code, 1);
  comm_->min_host(&reporter, 1);
  if (code == 0) return;
  const auto kind = code == 2 ? ErrorKind::BadInput : ErrorKind::Runtime;
  // The reporting rank says it before any rank leaves: the first rank to exit has the launcher
  // end the job, which took the reporter before its line on a busy machine (rank 1's exit 2, and
  // nothing said). Every rank then ends without a word of its own.
  if (comm_->rank() == static_cast<int>(reporter))
    say_error(comm_->size() > 1 ? fmt::format("rank {}: {}", comm_->rank(), why) : why);
  double said = 0;
  comm_->max_host(&said, 1);  // a barrier: the line is out
  throw Error(kind, "");
}

std::unique_ptr<Backend> Launch::open_backend(const RunArgs& args) {
  std::unique_ptr<Backend> be;
  agree([&] {
    be = select_backend(args.device, args.quiet,
                        comm_ ? RankPlacement{local_rank(), local_ranks()} : RankPlacement{});
    std::string why;
    if (comm_ && be->device() == Device::CUDA && !nccl_built(&why))
      throw_bad_input(fmt::format(
          "launched by {}: data parallel on the GPU: {}; --device cpu runs it on the CPU",
          *launcher_, why));
  });
  if (!comm_) return be;
  // Every rank on the same kind of device (auto can pick a GPU on one host and the CPU on
  // another), then NCCL for a GPU's gradients.
  agree([&] {
    const std::vector<std::string> kinds = comm_->gather_strings(be->info().kind);
    for (size_t r = 1; r < kinds.size(); ++r)
      if (kinds[r] != kinds[0])
        throw_bad_input(
            fmt::format("rank 0 runs on {} but rank {} on {}: give every rank the same --device",
                        kinds[0], r, kinds[r]));
  });
  if (be->device() == Device::CUDA)
    comm_ = make_nccl_collective(std::move(comm_), local_rank() % cuda_device_count(nullptr));
  DataParallelOptions o;
  o.wire = grad_reduce_dtype(args.grad_reduce);
  o.bucket_bytes = static_cast<size_t>(args.bucket_mb * (1 << 20));
  // One write: the ranks' lines share the terminal, and pieces of two would interleave.
  o.say = [](const std::string& line) { std::cerr << line + "\n" << std::flush; };
  dp_.emplace(*comm_, std::move(o));
  return be;
}

void Launch::same_job(const RunArgs& run, std::vector<std::pair<std::string, std::string>> facts,
                      const std::vector<Spec>& specs, const DeviceInfo& info, Device device,
                      const std::vector<std::pair<std::string, std::string>>& outputs) {
  if (!comm_) return;
  // The native CPU's --threads and --cpu-isa too: the record holds rank 0's alone.
  // Each as a message shows it: not given is "none", a size in bytes' units.
  // The memory limit exactly (format_bytes rounds: 1000000 and 1000001 bytes read alike).
  auto given = [](bool set, const std::string& value) { return set ? value : "none"; };
  facts.insert(
      facts.end(),
      {{"--grad-reduce", run.grad_reduce},
       {"--bucket-mb", fmt::format("{}", run.bucket_mb)},
       {"--memory-limit",
        given(run.memory_limit > 0,
              fmt::format("{} ({} bytes)", format_bytes(run.memory_limit), run.memory_limit))},
       {"--threads", given(run.device.threads > 0, std::to_string(run.device.threads))},
       {"--cpu-isa", given(!run.device.cpu_isa.empty(), run.device.cpu_isa)}});
  // The reference's OpenBLAS, set by the environment (OPENBLAS_NUM_THREADS, OPENBLAS_CORETYPE):
  // its threads and kernels are what compare names as the environment, rank 0's alone recorded.
  if (info.kind == "reference")
    facts.insert(facts.end(), {{"OpenBLAS threads", std::to_string(info.blas_threads)},
                               {"OpenBLAS kernels", info.blas_core}});
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string at = specs.size() > 1 ? fmt::format("spec {} ", i + 1) : "spec ";
    const nlohmann::json flat = to_json(specs[i]).flatten();
    for (const auto& [ptr, value] : flat.items()) facts.emplace_back(at + ptr, value.dump());
    for (Precision p : specs[i].precisions) {
      const auto why = unsupported_reason(p, device, info);
      facts.emplace_back(at + precision_name(p), why ? "unsupported here: " + *why : "trains");
    }
  }
  for (const auto& [option, path] : outputs) facts.emplace_back(option, given(!path.empty(), path));
  // Unit and record separators: neither is in a spec's values (JSON escapes control characters).
  std::string mine;
  for (const auto& [name, value] : facts) mine += name + '\x1f' + value + '\x1e';
  agree([&] {
    const std::vector<std::string> all = comm_->gather_strings(mine);
    if (!speaker()) return;
    auto split = [](const std::string& s) {
      std::vector<std::pair<std::string, std::string>> out;
      for (size_t at = 0; at < s.size();) {
        const size_t unit = s.find('\x1f', at), end = s.find('\x1e', at);
        out.emplace_back(s.substr(at, unit - at), s.substr(unit + 1, end - unit - 1));
        at = end + 1;
      }
      return out;
    };
    auto shown = [](const std::string& v) { return v.size() > 240 ? v.substr(0, 237) + "..." : v; };
    for (size_t r = 1; r < all.size(); ++r) {
      if (all[r] == all[0]) continue;
      const auto theirs = split(all[r]);
      size_t i = 0;
      while (i < facts.size() && i < theirs.size() && facts[i] == theirs[i]) ++i;
      std::string what;
      if (i < facts.size() && i < theirs.size() && facts[i].first == theirs[i].first)
        what = fmt::format("rank {}'s {} is {}, rank 0's {}", r, facts[i].first,
                           shown(theirs[i].second), shown(facts[i].second));
      else if (i < theirs.size())
        what = fmt::format("rank {} has {} ({}), rank 0 {}", r, theirs[i].first,
                           shown(theirs[i].second),
                           i < facts.size() ? facts[i].first + " in its place" : "nothing more");
      else
        what = fmt::format("rank 0 has {} ({}), rank {} nothing more", facts[i].first,
                           shown(facts[i].second), r);
      throw_bad_input(fmt::format(
          "the ranks were given different jobs: {}; give every rank the same command, spec "
          "files, options and environment",
          what));
    }
  });
}

std::string Launch::batch_text(int64_t batch) const {
  return ranks() > 1 ? fmt::format("batch {} per rank, {} ranks (rank 0's ops)", batch, ranks())
                     : fmt::format("batch {}", batch);
}

void Launch::warn_unused(const RunArgs& args) const {
  const RunArgs defaults;
  if (!comm_ && (args.grad_reduce != defaults.grad_reduce || args.bucket_mb != defaults.bucket_mb ||
                 args.scaling_baseline != defaults.scaling_baseline))
    std::cerr << "mpbench: --grad-reduce, --bucket-mb and --scaling-baseline have no effect "
                 "without an MPI launch (mpirun -np N mpbench ...)\n";
}

nlohmann::json Launch::env_json(const std::string& device_kind) {
  if (!comm_) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  const std::vector<std::string> hosts = comm_->gather_strings(host_name());
  for (size_t r = 0; r < hosts.size(); ++r)
    ranks.push_back({{"rank", r}, {"host", hosts[r]}, {"device", device_kind}});
  return {{"launcher", *launcher_}, {"ranks", comm_->size()}, {"per_rank", ranks}};
}

}  // namespace mpbench
