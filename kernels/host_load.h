#pragma once
// What else ran on the CPUs this process may use while it measured. A run beside another busy
// process is slower, as a regression is, and as steady as a quiet run: its epochs' spread does
// not show it, so the run records how many CPUs the others kept busy (results' "busy" flag).
// Read from /proc/stat's per-CPU lines (time not idle, a hypervisor's steal included) less this
// process's own CPU time (getrusage), over the wall time between two reads.
#include <optional>
#include <string>
#include <vector>

namespace mpbench {

// Cumulative counters at one moment.
struct CpuCounters {
  bool valid = false;  // /proc/stat listed some of the CPUs this process may use
  int cpus = 0;        // those CPUs
  double busy_s = 0;   // their time not idle: user, nice, system, irq, softirq, steal
  double own_s = 0;    // this process's CPU time, all threads, user and system
  double wall_s = 0;   // a steady clock
};
CpuCounters read_cpu_counters();

// The busy seconds of the CPUs numbered in `cpus` in /proc/stat's text (its "cpuN" lines; ticks
// of ticks_per_second), and in *found how many of them it lists.
double proc_stat_busy_seconds(const std::string& text, const std::vector<int>& cpus,
                              long ticks_per_second, int* found);

// What the others did over a run's epochs (HostLoadMeter). cpus and threads: the CPUs the
// process may use and the threads it ran on them, so that the others may take the CPUs its
// threads leave free (a rank beside it, another job on a big host) without making it busy; a
// thread takes its core's SMT siblings too, whose units it shares (cpus_per_core).
struct HostLoad {
  int cpus = 0;
  int threads = 0;
  int cpus_per_core = 1;
  double seconds = 0;      // wall time measured over
  double others_cpus = 0;  // the mean number of CPUs the other processes kept busy
  double own_cpus = 0;     // and this process: its threads' CPU time over the wall time
  // Whether they took at least kBusyCpus more than the CPUs its threads' cores left free.
  bool busy() const;
};
// A quarter of a CPU taken from the run's threads on average: a run on a quiet machine leaves
// the others a few hundredths; one beside a busy loop on one of its CPUs, close to 1.
inline constexpr double kBusyCpus = 0.25;
// /proc/stat counts in ticks (10 ms): shorter intervals in all give no figure.
inline constexpr double kMinLoadSeconds = 1.0;

// Over the span from the first begin() to the last end(): one span, not a sum of intervals,
// since /proc/stat's counters move at the scheduler's ticks, where the process is also switched
// out, and short intervals between switches missed most of the ticks they held (epochs of 0.5
// ms beside a busy loop on their CPU summed to none of it for the others, where 1 s said 0.5).
class HostLoadMeter {
 public:
  void begin();  // the start of the first call only
  void end();
  // Nullopt where the counters could not be read, the CPUs changed between the reads, or the
  // span is under kMinLoadSeconds.
  std::optional<HostLoad> result(int threads, int cpus_per_core = 1) const;

 private:
  CpuCounters start_, end_;
};

}  // namespace mpbench
