#include "kernels/host_load.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace mpbench {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

std::optional<ThreadTimes> parse_schedstat(const std::string& text) {
  std::istringstream in(text);
  unsigned long long run = 0, wait = 0, slices = 0;
  if (!(in >> run >> wait >> slices)) return std::nullopt;
  return ThreadTimes{1e-9 * static_cast<double>(run), 1e-9 * static_cast<double>(wait)};
}

double proc_stat_steal_seconds(const std::string& text, const std::vector<int>& cpus,
                               long ticks_per_second, int* found) {
  *found = 0;
  if (ticks_per_second <= 0) return 0;
  double ticks = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice"
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 ||
        !std::isdigit(static_cast<unsigned char>(line[3])))
      continue;
    std::istringstream words(line.substr(3));
    int n = -1;
    words >> n;
    if (!words || std::find(cpus.begin(), cpus.end(), n) == cpus.end()) continue;
    unsigned long long v[8] = {};
    int got = 0;
    while (got < 8 && words >> v[got]) ++got;
    if (got < 8) continue;  // a kernel without steal time
    ++*found;
    ticks += static_cast<double>(v[7]);
  }
  return ticks / static_cast<double>(ticks_per_second);
}

CpuCounters read_cpu_counters() {
  CpuCounters c;
  if (DIR* d = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      const std::string name = e->d_name;
      if (auto t = parse_schedstat(read_text("/proc/self/task/" + name + "/schedstat")))
        c.threads[std::stol(name)] = *t;
    }
    closedir(d);
  }
  c.valid = !c.threads.empty();
  // The CPUs any of its threads may run on: OMP_PROC_BIND binds each thread, the calling one
  // too, to a CPU of the process's mask.
  cpu_set_t all;
  CPU_ZERO(&all);
  bool any = false;
  for (const auto& [tid, times] : c.threads) {
    cpu_set_t set;
    if (sched_getaffinity(static_cast<pid_t>(tid), sizeof(set), &set) != 0) continue;
    CPU_OR(&all, &all, &set);
    any = true;
  }
  if (any || sched_getaffinity(0, sizeof(all), &all) == 0) {
    std::vector<int> cpus;
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &all)) cpus.push_back(i);
    c.steal_s =
        proc_stat_steal_seconds(read_text("/proc/stat"), cpus, sysconf(_SC_CLK_TCK), &c.cpus);
  }
  c.wall_s = steady_seconds();
  return c;
}

namespace {

// The threads' share of CPUs the run could have had: no more than its CPUs.
int usable_threads(const HostLoad& h) {
  return std::max(1, h.cpus > 0 ? std::min(h.threads, h.cpus) : h.threads);
}

bool waited_long(const HostLoad& h) {
  return h.taken_cpus() >= kBusyShare * usable_threads(h);
}

bool stolen(const HostLoad& h) {
  return h.cpus > 0 && std::isfinite(h.steal_cpus) && h.steal_cpus >= kBusyShare * h.cpus;
}

}  // namespace

double HostLoad::taken_cpus() const {
  if (cpus <= 0) return waited_cpus;
  return std::min(waited_cpus, std::max(0.0, cpus - own_cpus));
}

bool HostLoad::busy() const {
  return waited_long(*this) || stolen(*this);
}

std::string HostLoad::describe(const std::string& its) const {
  std::vector<std::string> parts;
  const std::string waited =
      fmt::format("{} {} thread{} waited for a CPU {:.0f}% of the time", its, threads,
                  threads == 1 ? "" : "s", 100 * waited_cpus / std::max(1, threads));
  if (cpus > 0 && threads > cpus)
    // Some of the wait is the run's own: its threads took turns on its CPUs.
    parts.push_back(fmt::format("{} on {} CPU{}, and something else held {:.0f}% of the CPUs' time",
                                waited, cpus, cpus == 1 ? "" : "s", 100 * taken_cpus() / cpus));
  else if (waited_long(*this) || !stolen(*this))
    parts.push_back(waited);
  if (stolen(*this))
    parts.push_back(fmt::format("the hypervisor took {:.2f} of {} {} CPU{}", steal_cpus, its, cpus,
                                cpus == 1 ? "" : "s"));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// The span's clock starts before the counters are read and stops after: a thread switched out
// between the two reads (a busy CPU) then lengthens the span, never the times in it.
void HostLoadMeter::begin() {
  const double wall = steady_seconds();
  start_ = read_cpu_counters();
  start_.wall_s = wall;
}

void HostLoadMeter::end() {
  end_ = read_cpu_counters();
}

std::optional<HostLoad> HostLoadMeter::result(int threads) const {
  const double wall = end_.wall_s - start_.wall_s;
  if (!start_.valid || !end_.valid || !(wall >= kMinLoadSeconds)) return std::nullopt;
  HostLoad h;
  h.cpus = end_.cpus;
  h.threads = std::max(1, threads);
  h.seconds = wall;
  // A thread started after begin() counts from its start; one gone by end() is not counted.
  double run = 0, wait = 0;
  for (const auto& [tid, t] : end_.threads) {
    const auto before = start_.threads.find(tid);
    const ThreadTimes from = before == start_.threads.end() ? ThreadTimes{} : before->second;
    run += std::max(0.0, t.run_s - from.run_s);
    wait += std::max(0.0, t.wait_s - from.wait_s);
  }
  h.own_cpus = run / wall;
  h.waited_cpus = wait / wall;
  h.steal_cpus = end_.cpus > 0 && end_.cpus == start_.cpus && wall >= kMinStealSeconds
                     ? (end_.steal_s - start_.steal_s) / wall
                     : NAN;
  return h;
}

}  // namespace mpbench
