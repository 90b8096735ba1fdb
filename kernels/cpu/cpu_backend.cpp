// CpuBackend: memory, transfers and events on the host; the ops are in kernels/cpu/<op>.cpp.
#include "kernels/cpu/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "kernels/cpu/ops.h"
#include "kernels/host_memory.h"

namespace mpbench::cpu {
namespace {

// 64 bytes: a cache line, and the widest vector load (AVX-512).
constexpr size_t kAlignment = 64;

// The value of a "key : value" line of a /proc file, or "" when absent.
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// The host's own limit, which the kernel enforces with its OOM killer, not with a failed malloc
// (overcommit hands out untouched pages freely): an allocation of kCheckedBytes or more must fit
// in what is left (host_memory_left), and every allocation is touched as it is made
// (touch_pages), so that the next check counts it. Before, each of a run's buffers passed alone
// and the first step's touch of them all met the OOM killer (resnet50 on the reference: 23 GiB on
// a 24 GiB machine, killed without a word).
constexpr size_t kCheckedBytes = size_t{1} << 20;

void touch_pages(void* p, size_t bytes) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  auto* c = static_cast<volatile char*>(p);
  for (size_t i = 0; i < bytes; i += page) c[i] = 0;
}

class CpuEvent final : public Event {
 public:
  void record() override {
    time_ = std::chrono::steady_clock::now();
    recorded_ = true;
  }
  double elapsed_ms(const Event& start) override {
    const auto* s = dynamic_cast<const CpuEvent*>(&start);
    MPB_CHECK(s != nullptr, "elapsed_ms: the start event is not a CPU event");
    MPB_CHECK(recorded_ && s->recorded_, "elapsed_ms: an event was never recorded");
    return std::chrono::duration<double, std::milli>(time_ - s->time_).count();
  }

 private:
  std::chrono::steady_clock::time_point time_;
  bool recorded_ = false;
};

}  // namespace

CpuBackend::CpuBackend() {
  info_.kind = "reference";
  info_.name = proc_field("/proc/cpuinfo", "model name");
  if (info_.name.empty()) info_.name = "unknown CPU";
  info_.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  describe_blas(info_);
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0)
    info_.total_memory = static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

void* CpuBackend::raw_alloc(size_t bytes) {
  auto out_of_host_memory = [&](const std::string& why) {
    return Error(ErrorKind::OutOfMemory,
                 fmt::format("out of host memory: asked for {} bytes, {}", bytes, why),
                 /*oom=*/true);
  };
  if (const HostMemory as = address_space_memory(); bytes > as.bytes)
    throw out_of_host_memory(as.why);
  if (bytes >= kCheckedBytes) {
    const HostMemory host = host_memory_left();
    if (bytes > host.bytes) throw out_of_host_memory(host.why);
  }
  // aligned_alloc wants a multiple of the alignment; overflow of the round-up is a failure too.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p =
      rounded >= bytes ? std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment) : nullptr;
  if (!p) throw out_of_host_memory("malloc failed");
  touch_pages(p, rounded);
  return p;
}

void CpuBackend::raw_free(void* p) {
  std::free(p);
}

void CpuBackend::copy_impl(const Tensor& src, Tensor& dst) {
  if (src.bytes() && src.data != dst.data) std::memmove(dst.data, src.data, src.bytes());
}

void CpuBackend::upload_impl(const void* host, Tensor& dst) {
  std::memcpy(dst.data, host, dst.bytes());
}

void CpuBackend::download_impl(const Tensor& src, void* host) {
  std::memcpy(host, src.data, src.bytes());
}

std::unique_ptr<Event> CpuBackend::create_event() {
  return std::make_unique<CpuEvent>();
}

}  // namespace mpbench::cpu

namespace mpbench {

std::unique_ptr<Backend> make_reference_backend() {
  return std::make_unique<cpu::CpuBackend>();
}

}  // namespace mpbench
