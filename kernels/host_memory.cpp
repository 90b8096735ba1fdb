// Host memory left to the process: /proc/meminfo and the memory cgroup's files.
#include "kernels/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include <fmt/format.h>

namespace mpbench {
namespace {

// A /proc/meminfo field ("MemAvailable") in bytes, or 0 when unknown.
size_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string k;
  unsigned long long kb = 0;
  while (in >> k >> kb) {
    if (k == key + ":") return static_cast<size_t>(kb) * 1024;
    in.ignore(256, '\n');  // the " kB"
  }
  return 0;
}

// What is kept back from a memory of `total` bytes for the system and for what allocates outside
// the tracked buffers: 1/32 of it, at least 256 MiB.
size_t memory_reserve(size_t total) {
  return std::max(size_t{256} << 20, total / 32);
}

// The first number in a file; nullopt without the file or for v2's "max" (no limit).
std::optional<size_t> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p);
  unsigned long long v = 0;
  if (!(in >> v)) return std::nullopt;
  return static_cast<size_t>(v);
}

// The value of a "key value" line of a cgroup's memory.stat.
std::optional<size_t> memory_stat(const std::filesystem::path& p, const char* key) {
  std::ifstream in(p);
  std::string k;
  unsigned long long v = 0;
  while (in >> k >> v)
    if (k == key) return static_cast<size_t>(v);
  return std::nullopt;
}

}  // namespace

// MemAvailable less the reserve, and under a memory cgroup's limit (a container's) what that
// leaves less its reserve, whichever is less.
HostMemory host_memory_left() {
  static const size_t host_reserve = memory_reserve(meminfo_bytes("MemTotal"));  // read once
  HostMemory out;
  if (const size_t avail = meminfo_bytes("MemAvailable"); avail != 0) {
    out.bytes = avail > host_reserve ? avail - host_reserve : 0;
    out.why = fmt::format("{} bytes available ({} MiB of it kept for the system)", avail,
                          host_reserve >> 20);
  }
  if (const CgroupMemory cg = cgroup_memory("/sys/fs/cgroup", "/proc/self/cgroup"); cg.limited()) {
    const size_t reserve = memory_reserve(cg.limit);
    const size_t left = cg.left() > reserve ? cg.left() - reserve : 0;
    if (left < out.bytes) {
      out.bytes = left;
      out.why = fmt::format(
          "{} bytes left under the memory cgroup limit of {} bytes in {} ({} MiB "
          "of it kept for the libraries)",
          cg.left(), cg.limit, cg.dir, reserve >> 20);
    }
  }
  return out;
}

size_t address_space_limit() {
  static const rlim_t limit = [] {
    rlimit r{};
    return getrlimit(RLIMIT_AS, &r) == 0 ? r.rlim_cur : RLIM_INFINITY;
  }();
  return limit == RLIM_INFINITY ? SIZE_MAX : static_cast<size_t>(limit);
}

size_t address_space_left() {
  const size_t limit = address_space_limit();
  if (limit == SIZE_MAX) return SIZE_MAX;
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  if (!(statm >> pages)) return SIZE_MAX;  // unknown: malloc's own failure is the answer
  const size_t used = pages * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  return used + kAddressReserve >= limit ? 0 : limit - used - kAddressReserve;
}

HostMemory address_space_memory() {
  HostMemory out;
  out.bytes = address_space_left();
  if (out.bytes != SIZE_MAX)
    out.why = fmt::format(
        "{} bytes left under the process's address-space limit (ulimit -v; {} MiB of it kept for "
        "the libraries)",
        out.bytes, kAddressReserve >> 20);
  return out;
}

CgroupMemory cgroup_memory(const std::string& root, const std::string& proc_self_cgroup) {
  namespace fs = std::filesystem;
  struct Hierarchy {
    fs::path mount;
    std::string path;                      // the process's cgroup in it
    const char *limit, *usage, *inactive;  // files, and memory.stat's key
  };
  std::vector<Hierarchy> found;
  std::ifstream in(proc_self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {  // v2, mounted at the root or, beside v1, at root/unified
      for (const char* mount : {"", "unified"})
        found.push_back(
            {fs::path(root) / mount, path, "memory.max", "memory.current", "inactive_file"});
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      found.push_back({fs::path(root) / "memory", path, "memory.limit_in_bytes",
                       "memory.usage_in_bytes", "total_inactive_file"});
    }
  }
  // v1 writes "no limit" as the largest page multiple under 2^63.
  constexpr size_t kNoLimit = size_t{1} << 62;
  CgroupMemory tightest;
  for (const Hierarchy& h : found) {
    // The cgroup and each ancestor: inside a container the mount is often the container's own
    // cgroup, so the path's first folders are missing there and the mount's root is the cgroup.
    fs::path rel = fs::path(h.path).relative_path();
    for (;;) {
      const fs::path dir = h.mount / rel;
      const std::optional<size_t> limit = file_bytes(dir / h.limit);
      if (limit && *limit > 0 && *limit < kNoLimit) {
        const size_t usage = file_bytes(dir / h.usage).value_or(0);
        const size_t inactive = memory_stat(dir / "memory.stat", h.inactive).value_or(0);
        const CgroupMemory cg{*limit, usage > inactive ? usage - inactive : 0, dir.string()};
        if (!tightest.limited() || cg.left() < tightest.left()) tightest = cg;
      }
      if (rel.empty()) break;
      rel = rel.parent_path();
    }
  }
  return tightest;
}

}  // namespace mpbench
