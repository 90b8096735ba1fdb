#include "kernels/host_load.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>

namespace mpbench {

double proc_stat_busy_seconds(const std::string& text, const std::vector<int>& cpus,
                              long ticks_per_second, int* found) {
  *found = 0;
  if (ticks_per_second <= 0) return 0;
  double ticks = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice": guest time is
    // inside user and nice already, and idle and iowait are the CPU's own rest.
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
    if (got < 4) continue;  // not the format this reads
    ++*found;
    ticks += static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
  }
  return ticks / static_cast<double>(ticks_per_second);
}

CpuCounters read_cpu_counters() {
  CpuCounters c;
  c.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return c;
  std::vector<int> cpus;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) cpus.push_back(i);
  std::ifstream f("/proc/stat");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  c.busy_s = proc_stat_busy_seconds(text, cpus, sysconf(_SC_CLK_TCK), &c.cpus);
  rusage u{};
  if (c.cpus == 0 || getrusage(RUSAGE_SELF, &u) != 0) return c;
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; };
  c.own_s = secs(u.ru_utime) + secs(u.ru_stime);
  c.valid = true;
  return c;
}

bool HostLoad::busy() const {
  return others_cpus - std::max(0, cpus - threads * cpus_per_core) >= kBusyCpus;
}

void HostLoadMeter::begin() {
  if (!start_.valid) start_ = read_cpu_counters();
}

void HostLoadMeter::end() {
  end_ = read_cpu_counters();
}

std::optional<HostLoad> HostLoadMeter::result(int threads, int cpus_per_core) const {
  const double wall = end_.wall_s - start_.wall_s;
  if (!start_.valid || !end_.valid || end_.cpus != start_.cpus || !(wall >= kMinLoadSeconds))
    return std::nullopt;
  HostLoad h;
  h.cpus = end_.cpus;
  h.threads = std::max(1, threads);
  h.cpus_per_core = std::max(1, cpus_per_core);
  h.seconds = wall;
  const double own = end_.own_s - start_.own_s;
  // The two clocks differ by a tick here and there: never below none.
  h.others_cpus = std::max(0.0, (end_.busy_s - start_.busy_s - own) / wall);
  h.own_cpus = own / wall;
  return h;
}

}  // namespace mpbench
