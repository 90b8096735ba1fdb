#pragma once
// Whether something else took this process's CPUs while it measured. A run beside another busy
// process is slower, as a regression is, and as steady as a quiet run: its epochs' spread does
// not show it. So a run records how long its threads waited for a CPU: each thread's run delay
// (/proc/self/task/*/schedstat: the scheduler's time runnable but not running, in ns), over the
// span of its epochs; and a hypervisor's steal of its CPUs (/proc/stat), which the guest's
// scheduler does not see as waiting. results' "busy" flag is read from them.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mpbench {

// One thread's cumulative times on a CPU and waiting for one, from its schedstat text ("run_ns
// wait_ns timeslices"); nullopt for another text.
struct ThreadTimes {
  double run_s = 0, wait_s = 0;
};
std::optional<ThreadTimes> parse_schedstat(const std::string& text);

// The steal seconds of the CPUs numbered in `cpus` in /proc/stat's text (its "cpuN" lines' 8th
// field; ticks of ticks_per_second), and in *found how many of them it lists.
double proc_stat_steal_seconds(const std::string& text, const std::vector<int>& cpus,
                               long ticks_per_second, int* found);

// Cumulative counters at one moment.
struct CpuCounters {
  bool valid = false;                   // some thread's schedstat was read
  std::map<long, ThreadTimes> threads;  // by thread id
  int cpus = 0;        // the CPUs its threads may use (their affinity masks) that /proc/stat lists
  double steal_s = 0;  // theirs
  double wall_s = 0;   // a steady clock, after the reads
};
CpuCounters read_cpu_counters();

// What took the CPUs over a run's epochs (HostLoadMeter).
struct HostLoad {
  int cpus = 0;     // the CPUs its threads may use (their affinity masks); 0 where unknown
  int threads = 0;  // the threads it ran its work on
  double seconds = 0;
  double own_cpus = 0;     // its threads' time on a CPU over the wall time
  double waited_cpus = 0;  // their time waiting for one over the wall time
  // A hypervisor's steal of the process's CPUs over the wall time; NaN where unknown (no
  // /proc/stat, or a span under kMinStealSeconds: it counts in 10 ms ticks).
  double steal_cpus = 0;
  // Of the time the threads waited, what something else held the CPUs for: all of it where the
  // threads fit the CPUs. Threads more than the CPUs wait for each other too, and there at most
  // the CPUs' time they did not use themselves was someone else's (min(waited, cpus - own)).
  // The whole wait where the CPUs are unknown.
  double taken_cpus() const;
  // Whether something else held the CPUs for kBusyShare of the time the threads could have run
  // (a thread each, up to the CPUs), or the hypervisor took that share of the CPUs'.
  bool busy() const;
  // "its 2 threads waited for a CPU 50% of the time", "the hypervisor took 0.30 of its 2 CPUs",
  // or both, for the notes (`its`: the possessive the sentence takes, "its" or "their"); with
  // more threads than CPUs, "its 3 threads waited for a CPU 40% of the time on 2 CPUs, and
  // something else held 10% of the CPUs' time".
  std::string describe(const std::string& its = "its") const;
};
// 5%: on a quiet 2-core machine the native backend's threads waited 0.15-0.5% of their time
// (ResNet stage, MLP); beside a busy loop at nice 5 on its core, which slowed it 1.24-1.42x, the
// reference's one thread waited 26-40% (tiny_resnet), beside one at nice 0 half. A regression
// gate judges 10%.
inline constexpr double kBusyShare = 0.05;
// Shorter spans give no figure at all; steal's ticks need a second.
inline constexpr double kMinLoadSeconds = 0.1;
inline constexpr double kMinStealSeconds = 1.0;

// Over the span from begin() to end().
class HostLoadMeter {
 public:
  void begin();
  void end();
  // Nullopt where the counters could not be read or the span is under kMinLoadSeconds.
  std::optional<HostLoad> result(int threads) const;

 private:
  CpuCounters start_, end_;
};

}  // namespace mpbench
