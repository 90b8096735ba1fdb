// OnednnBackend: the engine, what it tells of the CPU (ISA, flags, AMX, how bf16 runs), the
// primitive cache, and the workspace every primitive's scratchpad (user-managed, so that the
// run's allocator counts it) and every reordered filter lives in.
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <fmt/format.h>

#include "kernels/host_memory.h"

namespace mpbench::onednn {
namespace {

// Physical cores: distinct (physical id, core id) pairs of /proc/cpuinfo, no more than the CPUs
// this process may run on; the logical count where /proc/cpuinfo does not say.
int physical_cores() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  auto value = [](const std::string& l) {
    const size_t c = l.find(':');
    return c == std::string::npos ? std::string() : l.substr(l.find_first_not_of(" \t", c + 1));
  };
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = value(line);
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value(line)});
  }
  const int logical = usable_cpus();
  const int physical = cores.empty() ? logical : static_cast<int>(cores.size());
  return std::max(1, std::min(physical, logical));
}

std::vector<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> have;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) have.insert(w);
    break;
  }
  std::vector<std::string> out;
  for (const auto& [flag, name] :
       std::vector<std::pair<std::string, std::string>>{{"avx2", "avx2"},
                                                        {"avx512f", "avx512"},
                                                        {"avx512_bf16", "avx512_bf16"},
                                                        {"amx_bf16", "amx_bf16"},
                                                        {"avx512_fp16", "avx512_fp16"}})
    if (have.count(flag)) out.push_back(name);
  return out;
}

// Whether the kernel has granted this process AMX's tile data (Linux asks a process to request
// it; oneDNN does when it first uses AMX). arch_prctl(ARCH_GET_XCOMP_PERM), bit 18 XTILEDATA.
bool amx_granted() {
  unsigned long features = 0;
  if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &features) != 0) return false;
  return (features >> 18) & 1u;
}

struct IsaName {
  const char* name;
  dnnl::cpu_isa isa;
};
const std::vector<IsaName>& isa_names() {
  static const std::vector<IsaName> names = {
      {"sse41", dnnl::cpu_isa::sse41},
      {"avx", dnnl::cpu_isa::avx},
      {"avx2", dnnl::cpu_isa::avx2},
      {"avx512_core", dnnl::cpu_isa::avx512_core},
      {"avx512_core_vnni", dnnl::cpu_isa::avx512_core_vnni},
      {"avx512_core_bf16", dnnl::cpu_isa::avx512_core_bf16},
      {"avx512_core_amx", dnnl::cpu_isa::avx512_core_amx},
      {"all", dnnl::cpu_isa::all},
  };
  return names;
}

std::string isa_name(dnnl::cpu_isa isa) {
  for (const IsaName& n : isa_names())
    if (n.isa == isa) return n.name;
  return fmt::format("isa 0x{:x}", static_cast<unsigned>(isa));
}

// Each ISA of oneDNN's list is a bit set that contains the ones below it.
bool isa_has(dnnl::cpu_isa have, dnnl::cpu_isa want) {
  const auto h = static_cast<unsigned>(have), w = static_cast<unsigned>(want);
  return (h & w) == w;
}

// How a bf16 GEMM runs here: whether oneDNN makes a bf16 matmul at all (oneDNN 2.6 has none
// below AVX-512), and whether the ISA it may use has bf16 instructions.
std::string probe_bf16(const dnnl::engine& engine, dnnl::cpu_isa isa) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::dims dims = {64, 64};
  try {
    dnnl::matmul::desc desc({dims, dt::bf16, tag::ab}, {dims, dt::bf16, tag::ab},
                            {dims, dt::f32, tag::ab});
    dnnl::matmul::primitive_desc pd(desc, engine);
    (void)pd;
  } catch (const dnnl::error&) {
    return "";
  }
  return isa_has(isa, dnnl::cpu_isa::avx512_core_bf16) ? "native" : "converted";
}

// OMP_STACKSIZE's bytes ("size[B|K|M|G]", KiB without a unit), or 0 when unset or unread.
size_t omp_stacksize() {
  const char* env = std::getenv("OMP_STACKSIZE");
  if (!env) return 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(env, &end, 10);
  while (*end == ' ') ++end;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'B':
      return n;
    case '\0':
    case 'K':
      return n << 10;
    case 'M':
      return n << 20;
    case 'G':
      return n << 30;
    default:
      return 0;
  }
}

// Each OpenMP thread but the first maps a stack of its own, outside the tracked allocations:
// under an address-space limit too many of them made libgomp end the process ("Thread creation
// failed", exit 1) at the first parallel op. `asked`: the count is --threads's.
void check_thread_stacks(int threads, bool asked) {
  if (threads <= 1 || address_space_limit() == SIZE_MAX) return;
  size_t stack = omp_stacksize();
  pthread_attr_t attr;
  if (stack == 0 && pthread_getattr_default_np(&attr) == 0) {
    (void)pthread_attr_getstacksize(&attr, &stack);
    pthread_attr_destroy(&attr);
  }
  const size_t stacks = static_cast<size_t>(threads - 1) * stack;
  const size_t left = address_space_left();
  if (stacks > left)
    throw_bad_input(fmt::format(
        "{} {}: {} more threads' stacks of {} MiB each do not fit in the {} MiB left under the "
        "address-space limit (ulimit -v; {} MiB of it kept for the libraries); give fewer "
        "threads",
        asked ? "--threads" : "threads", threads, threads - 1, stack >> 20, left >> 20,
        kAddressReserve >> 20));
}

}  // namespace

OnednnBackend::OnednnBackend(int threads) : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
  info_.kind = "cpu";
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  info_.cpu_threads = threads;
  const dnnl_version_t* v = dnnl_version();
  info_.onednn_version = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  info_.cpu_isa = isa_name(isa);
  info_.cpu_flags = cpu_flags();
  info_.bf16_gemm = probe_bf16(engine_, isa);
  hw_bf16_ = bf16_conversion_in_hardware(isa_has(isa, dnnl::cpu_isa::avx512_core_bf16));
}

DeviceInfo OnednnBackend::info() const {
  if (!ceilings_measured_) {
    // Measuring runs GEMMs, which a const accessor cannot; the result is a fact of the machine.
    auto* self = const_cast<OnednnBackend*>(this);
    self->ceilings_measured_ = true;
    // Large enough to keep every thread busy: 2 GFLOP per GEMM up to 8 threads, 17 beyond.
    const int64_t n = info_.cpu_threads > 8 ? 2048 : 1024;
    std::vector<DType> types = {DType::F32};
    if (!info_.bf16_gemm.empty()) types.push_back(DType::BF16);
    const std::vector<double> rates = self->measure_gemms(types, n);
    self->info_.gemm_tflops_fp32 = rates[0];
    if (rates.size() > 1) self->info_.gemm_tflops_bf16 = rates[1];
    // oneDNN asks the kernel for AMX when it first runs an AMX kernel.
    self->info_.amx_granted = amx_granted();
  }
  return info_;
}

// The dtypes take turns (fp32, bf16, fp32, ...), so that load on a shared machine lowers their
// rates alike: explain's bound is their ratio, and a dtype measured alone in a busy moment read
// half its usual rate here (fp32 0.110 against 0.196-0.220 TFLOP/s on 2 cores).
// The best of 10 turns, or of as many as half a second allows (3 at the least): on a shared
// machine the best of 3 2-ms GEMMs ranged from 0.51 to 0.88 TFLOP/s between runs.
std::vector<double> OnednnBackend::measure_gemms(const std::vector<DType>& types, int64_t n) {
  struct Operands {
    DType t;
    std::vector<Tensor> m;
    GemmDesc d;
    bool runs = true;
  };
  std::vector<Operands> ops;
  for (DType t : types) {
    Operands o{t, std::vector<Tensor>(3), GemmDesc{}};
    o.d.math = t == DType::F32 ? GemmMath::Strict : GemmMath::LowPrecision;
    ops.push_back(std::move(o));
  }
  const GemmGeom g{1, n, n, n};
  std::vector<double> best(ops.size(), 0.0);
  for (Operands& o : ops) {
    try {
      for (Tensor& x : o.m) {
        x = Tensor{raw_alloc(static_cast<size_t>(n * n) * dtype_size(o.t)), Shape{n, n}, o.t,
                   Device::CPU};
        fill_impl(x, 0.5f);
      }
      gemm_impl(o.d, g, o.m[0], o.m[1], o.m[2]);  // creates the primitive, warms the caches
    } catch (const Error&) {
      // No rate: the mode's runs say why, and memory too short for the operands (ulimit -v) is
      // an oom of the runs, not a failure to start.
      o.runs = false;
    }
  }
  const auto begin = std::chrono::steady_clock::now();
  for (int rep = 0; rep < 10; ++rep) {
    auto t1 = begin;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i].runs) continue;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        gemm_impl(ops[i].d, g, ops[i].m[0], ops[i].m[1], ops[i].m[2]);
      } catch (const Error&) {
        ops[i].runs = false;  // no rate, as when the first call fails
        best[i] = 0;
        continue;
      }
      t1 = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(t1 - t0).count();
      if (secs > 0) best[i] = std::max(best[i], 2.0 * n * n * n / secs / 1e12);
    }
    if (rep >= 2 && std::chrono::duration<double>(t1 - begin).count() > 0.5) break;
  }
  for (Operands& o : ops)
    for (Tensor& x : o.m)
      if (x.data) raw_free(x.data);
  return best;
}

OnednnBackend::~OnednnBackend() {
  release_workspace();
}

OnednnBackend::Cached& OnednnBackend::primitive(
    const std::string& key, const std::function<dnnl::primitive_desc_base()>& make) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Cached c;
  try {
    c.pd = make();
    c.prim = dnnl::primitive(c.pd.get());
    c.scratchpad_bytes = c.pd.scratchpad_desc().get_size();
    c.impl = c.pd.impl_info_str();
  } catch (const dnnl::error& e) {
    throw_runtime(fmt::format("oneDNN has no primitive for {}: {}", key, e.what()));
  }
  return cache_.emplace(key, std::move(c)).first->second;
}

char* OnednnBackend::workspace(size_t bytes) {
  if (bytes <= work_bytes_) return static_cast<char*>(provider_.alloc ? work_.data : own_);
  // Exactly what is asked: the run's peak is then what its primitives need, and a memory limit
  // at that peak fits (half as much again, to reallocate less, put up to half the workspace
  // into the peak). The asks settle within the first step.
  const size_t exact = align64(bytes);
  release_workspace();
  if (provider_.alloc)
    work_ = provider_.alloc(exact);
  else
    own_ = raw_alloc(exact);
  work_bytes_ = work_.data ? work_.bytes() : exact;
  return static_cast<char*>(provider_.alloc ? work_.data : own_);
}

void OnednnBackend::release_workspace() {
  if (work_.data && provider_.alloc) provider_.release(work_);
  if (own_) raw_free(own_);
  work_ = Tensor{};
  own_ = nullptr;
  work_bytes_ = 0;
}

void OnednnBackend::set_conv_workspace_provider(ConvWorkspaceProvider provider) {
  release_workspace();
  provider_ = std::move(provider);
  for (auto& [key, c] : cache_) c.used = false;
  fell_back_.clear();
}

std::vector<std::string> OnednnBackend::kernel_implementations() const {
  std::set<std::string> impls;
  for (const auto& [key, c] : cache_)
    if (c.used) impls.insert(c.impl);
  // What ran on the reference's loops is named too: part of the run's time is not oneDNN's.
  for (const std::string& op : fell_back_) impls.insert("reference loops: " + op);
  return {impls.begin(), impls.end()};
}

OnednnBackend::ChosenWeights OnednnBackend::chosen_weights(Cached& c, int arg,
                                                           const dnnl::memory::desc& plain,
                                                           void* data, bool out) {
  if (c.weights_md.get_size() == 0) {
    c.weights_md = c.pd.query_md(dnnl::query::exec_arg_md, arg);
    if (c.weights_md != plain) {
      const dnnl::primitive_attr attr = user_scratchpad();
      const auto rpd =
          out ? dnnl::reorder::primitive_desc(engine_, c.weights_md, engine_, plain, attr)
              : dnnl::reorder::primitive_desc(engine_, plain, engine_, c.weights_md, attr);
      c.reorder = dnnl::reorder(rpd);
      c.reorder_scratchpad_bytes = rpd.scratchpad_desc().get_size();
      c.reorder_out = out;
    }
  }
  ChosenWeights w;
  w.plain = dnnl::memory(plain, engine_, data);
  w.reordered = c.weights_md != plain;
  if (!w.reordered) {
    w.chosen = w.plain;
    return w;
  }
  // Workspace: [the scratchpad of the primitive or the reorder | the weights in oneDNN's layout].
  const size_t scratch = align64(std::max(c.scratchpad_bytes, c.reorder_scratchpad_bytes));
  w.chosen =
      dnnl::memory(c.weights_md, engine_, workspace(scratch + c.weights_md.get_size()) + scratch);
  return w;
}

void OnednnBackend::reorder_weights(Cached& c, const ChosenWeights& w, const std::string& key) {
  const bool out = c.reorder_out;
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_FROM, out ? w.chosen : w.plain},
                                                {DNNL_ARG_TO, out ? w.plain : w.chosen}};
  if (c.reorder_scratchpad_bytes)
    args[DNNL_ARG_SCRATCHPAD] =
        dnnl::memory({{static_cast<dnnl::memory::dim>(c.reorder_scratchpad_bytes)},
                      dnnl::memory::data_type::u8,
                      dnnl::memory::format_tag::a},
                     engine_, workspace(c.reorder_scratchpad_bytes));
  try {
    c.reorder.execute(stream_, args);
  } catch (const dnnl::error& e) {
    throw_runtime(fmt::format("oneDNN weights reorder for {} failed: {}", key, e.what()));
  }
}

void OnednnBackend::execute(Cached& c, std::unordered_map<int, dnnl::memory>& args, size_t offset) {
  c.used = true;
  if (last_kernel_.empty()) last_kernel_ = c.impl;  // an op's first primitive is its main one
  if (c.scratchpad_bytes) {
    args[DNNL_ARG_SCRATCHPAD] =
        dnnl::memory({{static_cast<dnnl::memory::dim>(c.scratchpad_bytes)},
                      dnnl::memory::data_type::u8,
                      dnnl::memory::format_tag::a},
                     engine_, workspace(offset + c.scratchpad_bytes) + offset);
  }
  try {
    c.prim.execute(stream_, args);
    stream_.wait();
  } catch (const dnnl::error& e) {
    throw_runtime(fmt::format("oneDNN {} failed: {}", c.impl, e.what()));
  }
}

}  // namespace mpbench::onednn

namespace mpbench {

const std::vector<std::string>& native_cpu_isa_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& i : onednn::isa_names()) n.push_back(i.name);
    return n;
  }();
  return names;
}

namespace {

const onednn::IsaName& known_isa(const std::string& name) {
  const auto& names = onednn::isa_names();
  auto it = std::find_if(names.begin(), names.end(),
                         [&](const onednn::IsaName& n) { return name == n.name; });
  if (it == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + std::string(n.name);
    throw_bad_input(fmt::format("--cpu-isa {}: unknown ISA (expected one of {})", name, list));
  }
  return *it;
}

}  // namespace

void check_native_cpu_isa(const std::string& name) {
  known_isa(name);
}

bool native_cpu_available(std::string*) {
  return true;
}

std::unique_ptr<Backend> make_native_cpu_backend(const NativeCpuOptions& options) {
  if (options.threads < 0)
    throw_bad_input(fmt::format("--threads {}: must be 1 or more", options.threads));
  if (!options.max_isa.empty()) {
    const onednn::IsaName* it = &known_isa(options.max_isa);
    // oneDNN takes the cap once, before its first primitive: a second backend in one process
    // can only ask for what is already in force.
    if (dnnl::set_max_cpu_isa(it->isa) != dnnl::status::success &&
        dnnl::get_effective_cpu_isa() != it->isa && it->isa != dnnl::cpu_isa::all)
      throw_bad_input(
          fmt::format("--cpu-isa {}: oneDNN's ISA is already fixed at {} in this process",
                      options.max_isa, onednn::isa_name(dnnl::get_effective_cpu_isa())));
  }
  const int threads =
      options.threads > 0
          ? options.threads
          : std::max(1, onednn::physical_cores() / std::max(1, options.host_processes));
  onednn::check_thread_stacks(threads, options.threads > 0);
  return std::make_unique<onednn::OnednnBackend>(threads);
}

}  // namespace mpbench
