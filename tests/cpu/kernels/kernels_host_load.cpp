// kernels/host_load.h: what other processes took of this process's CPUs while it measured.
#include <gtest/gtest.h>

#include <chrono>

#include "kernels/host_load.h"
#include "test_util.h"

namespace mpbench {
namespace {

// /proc/stat's per-CPU lines: user nice system idle iowait irq softirq steal guest guest_nice.
// Busy is all but idle and iowait (guest time is inside user already, steal is other guests'),
// over the CPUs named: not the all-CPU "cpu" line, not another word starting with "cpu", not a
// line too short to read; a kernel's line of four fields has no irq, softirq or steal.
TEST(HostLoad, ProcStatBusySecondsOfTheNamedCpus) {
  const std::string text =
      "cpu  900 900 900 900 900 900 900 900 900 900\n"
      "cpu0 100 2 30 5000 40 5 6 7 50 1\n"
      "cpu1 1000 0 0 0 0 0 0 0 0 0\n"
      "cpu2 200 0 10 100 900 0 0 300 0 0\n"
      "cpufreq 1 2 3 4 5\n"
      "cpu3 5 5\n"
      "cpu4 10 20 30 40\n"
      "intr 123 4 5\n";
  int found = -1;
  // cpu0: 100 + 2 + 30 + 5 + 6 + 7 = 150 ticks; cpu2: 200 + 10 + 300 = 510; cpu4: 60.
  EXPECT_DOUBLE_EQ(proc_stat_busy_seconds(text, {0, 2, 3, 4, 7}, 100, &found), 7.2);
  EXPECT_EQ(found, 3);
  EXPECT_DOUBLE_EQ(proc_stat_busy_seconds(text, {1}, 1000, &found), 1.0);
  EXPECT_EQ(found, 1);
  EXPECT_EQ(proc_stat_busy_seconds(text, {5}, 100, &found), 0.0);
  EXPECT_EQ(found, 0);
  EXPECT_EQ(proc_stat_busy_seconds(text, {0}, 0, &found), 0.0);
  EXPECT_EQ(found, 0);
}

// Busy: the others took at least a quarter of a CPU more than the CPUs the run's threads left
// free, which are theirs to take (a GPU run's one host thread on 16 CPUs); a thread takes its
// core's SMT siblings with it.
TEST(HostLoad, BusyWhenOthersTakeAQuarterCpuTheThreadsNeed) {
  auto load = [](int cpus, int threads, double others, int cpus_per_core = 1) {
    HostLoad h;
    h.cpus = cpus;
    h.threads = threads;
    h.cpus_per_core = cpus_per_core;
    h.seconds = 5;
    h.others_cpus = others;
    return h;
  };
  EXPECT_FALSE(load(2, 2, 0.24).busy());
  EXPECT_TRUE(load(2, 2, 0.25).busy());
  EXPECT_FALSE(load(16, 1, 15.0).busy());
  EXPECT_TRUE(load(16, 1, 15.25).busy());
  EXPECT_FALSE(load(16, 4, 12.2).busy());
  EXPECT_TRUE(load(2, 4, 0.3).busy());  // more threads than CPUs: none free, none owed either
  EXPECT_FALSE(load(2, 4, 0.1).busy());
  // One thread on a core of two siblings: the other sibling is not free.
  EXPECT_TRUE(load(2, 1, 0.3, 2).busy());
  EXPECT_FALSE(load(2, 1, 0.3).busy());
  EXPECT_FALSE(load(8, 2, 4.2, 2).busy());
  EXPECT_TRUE(load(8, 2, 4.25, 2).busy());
}

// No figure without a whole interval or under kMinLoadSeconds in all.
TEST(HostLoad, MeterGivesNoFigureForLessThanASecond) {
  HostLoadMeter none;
  EXPECT_FALSE(none.result(1));
  HostLoadMeter short_one;
  short_one.begin();
  short_one.end();
  EXPECT_FALSE(short_one.result(1));
  HostLoadMeter unbegun;
  unbegun.end();
  EXPECT_FALSE(unbegun.result(1));
}

void spin_for(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile uint64_t n = 0;
  while (std::chrono::steady_clock::now() < until) n = n + 1;
}

// Over a span of this thread spinning on one CPU (from the first of two begin() calls to the
// last end()), the process's own time is its own, not the others': the two add up to that CPU's
// busy time, at most a second a second, whatever else runs there (a busy machine takes a share
// of the spin, and its time is then the others').
TEST(HostLoad, MeterCountsTheProcesssOwnTimeApartFromTheOthers) {
  std::optional<HostLoad> h;
  {
    const test::PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    HostLoadMeter m;
    for (int i = 0; i < 2; ++i) {
      m.begin();
      spin_for(0.6);
      m.end();
    }
    h = m.result(1);
  }
  ASSERT_TRUE(h);
  EXPECT_EQ(h->cpus, 1);
  EXPECT_EQ(h->threads, 1);
  EXPECT_GE(h->seconds, 1.2);
  EXPECT_LT(h->seconds, 10);
  EXPECT_GT(h->own_cpus, 0.1);  // the spin's share of its CPU
  EXPECT_GE(h->others_cpus, 0);
  // /proc/stat counts in 10 ms ticks: a few over 1.2 s.
  EXPECT_LE(h->others_cpus + h->own_cpus, 1.05) << h->others_cpus << " + " << h->own_cpus;
}

}  // namespace
}  // namespace mpbench
