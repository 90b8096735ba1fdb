#pragma once
// What host memory this process can still take before the kernel's OOM killer ends it without a
// word: overcommit hands out untouched pages freely, so a failed malloc never says so. The host's
// MemAvailable, and a container's memory cgroup limit, each less a reserve. The CPU backends'
// allocations and the dataset are held to it. And the address-space limit, which malloc does
// enforce but the libraries' own mappings (oneDNN, thread stacks) meet without a word.
#include <cstddef>
#include <cstdint>
#include <string>

namespace mpbench {

struct HostMemory {
  size_t bytes = SIZE_MAX;  // SIZE_MAX: no limit known
  std::string why;          // how `bytes` was found, for an out-of-memory message
};
HostMemory host_memory_left();

// Under an address-space limit (`ulimit -v`, RLIMIT_AS), what the tracked allocations may still
// take: the limit less the process's mapped size and kAddressReserve for what maps memory outside
// them (oneDNN's JIT code and scratch, thread stacks, malloc's per-thread arenas). oneDNN 2.6
// crashed creating a primitive after a maxbatch probe's allocation had filled the limit.
// SIZE_MAX without a limit.
constexpr size_t kAddressReserve = size_t{512} << 20;
size_t address_space_left();
// The same with its wording for an out-of-memory message ("N bytes left under the process's
// address-space limit ..."); SIZE_MAX and no wording without a limit.
HostMemory address_space_memory();
// The limit itself; SIZE_MAX without one.
size_t address_space_limit();

// The memory cgroup limit this process is under (cgroup v2's memory.max, v1's
// memory.limit_in_bytes): the tightest of the process's cgroup and its ancestors, by what is left.
struct CgroupMemory {
  size_t limit = 0;  // 0: none found
  size_t usage = 0;  // charged to it, less the inactive file pages that reclaim frees first
  std::string dir;   // the cgroup folder the limit is read from
  bool limited() const { return limit != 0; }
  size_t left() const { return limit > usage ? limit - usage : 0; }
};
// root: where the cgroup file systems are mounted (/sys/fs/cgroup); proc_self_cgroup: the file
// naming the process's cgroups (/proc/self/cgroup), one "ID:CONTROLLERS:PATH" line per hierarchy.
CgroupMemory cgroup_memory(const std::string& root, const std::string& proc_self_cgroup);

}  // namespace mpbench
