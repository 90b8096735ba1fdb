// kernels/host_load.h: whether something else took this process's CPUs while it measured.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "kernels/host_load.h"
#include "test_util.h"

namespace mpbench {
namespace {

// A thread's schedstat: ns on a CPU, ns waiting for one, timeslices.
TEST(HostLoad, SchedstatIsRunAndWaitInNanoseconds) {
  const std::optional<ThreadTimes> t = parse_schedstat("785648991 1185937195 2681\n");
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->run_s, 0.785648991);
  EXPECT_DOUBLE_EQ(t->wait_s, 1.185937195);
  EXPECT_FALSE(parse_schedstat(""));
  EXPECT_FALSE(parse_schedstat("12 34"));
  EXPECT_FALSE(parse_schedstat("a b c"));
}

// /proc/stat's per-CPU lines: user nice system idle iowait irq softirq steal guest guest_nice.
// Steal is the 8th, over the CPUs named: not the all-CPU "cpu" line, not another word starting
// with "cpu", not a line of a kernel without steal time.
TEST(HostLoad, ProcStatStealOfTheNamedCpus) {
  const std::string text =
      "cpu  900 900 900 900 900 900 900 900 900 900\n"
      "cpu0 100 2 30 5000 40 5 6 7 50 1\n"
      "cpu1 1000 0 0 0 0 0 0 300 0 0\n"
      "cpu2 200 0 10 100 900 0 0 30 0 0\n"
      "cpufreq 1 2 3 4 5 6 7 8 9\n"
      "cpu3 5 5\n"
      "cpu4 10 20 30 40\n"
      "intr 123 4 5\n";
  int found = -1;
  EXPECT_DOUBLE_EQ(proc_stat_steal_seconds(text, {0, 2, 3, 4, 7}, 100, &found), 0.37);
  EXPECT_EQ(found, 2);
  EXPECT_DOUBLE_EQ(proc_stat_steal_seconds(text, {1}, 1000, &found), 0.3);
  EXPECT_EQ(found, 1);
  EXPECT_EQ(proc_stat_steal_seconds(text, {5}, 100, &found), 0.0);
  EXPECT_EQ(found, 0);
  EXPECT_EQ(proc_stat_steal_seconds(text, {0}, 0, &found), 0.0);
  EXPECT_EQ(found, 0);
}

HostLoad load(int threads, double waited, double steal = 0) {
  HostLoad h;
  h.cpus = 4;
  h.threads = threads;
  h.seconds = 5;
  h.own_cpus = 1;
  h.waited_cpus = waited;
  h.steal_cpus = steal;
  return h;
}

// Busy: the threads waited for a CPU 5% of their time, or a hypervisor took 5% of the CPUs'
// (where known); and what the notes say of it.
TEST(HostLoad, BusyFromAShareWaitedOrStolen) {
  EXPECT_FALSE(load(2, 0.099).busy());
  EXPECT_TRUE(load(2, 0.1).busy());
  EXPECT_FALSE(load(1, 0.049).busy());
  EXPECT_TRUE(load(1, 0.05).busy());
  EXPECT_FALSE(load(1, 0.01, 0.199).busy());
  EXPECT_TRUE(load(1, 0.01, 0.2).busy());
  EXPECT_FALSE(load(1, 0.01, NAN).busy());
  EXPECT_EQ(load(2, 1.0).describe(), "its 2 threads waited for a CPU 50% of the time");
  EXPECT_EQ(load(1, 0.3).describe("their"), "their 1 thread waited for a CPU 30% of the time");
  EXPECT_EQ(load(1, 0.01, 0.5).describe(), "the hypervisor took 0.50 of its 4 CPUs");
  EXPECT_EQ(
      load(1, 0.3, 0.5).describe(),
      "its 1 thread waited for a CPU 30% of the time; the hypervisor took 0.50 of its 4 CPUs");
}

// More threads than CPUs wait for each other: only the CPUs' time the run did not use itself
// can have been something else's (taken_cpus), judged against the CPUs.
TEST(HostLoad, ThreadsMoreThanTheCpusWaitForEachOtherWithoutBeingBusy) {
  HostLoad own = load(6, 2.0);  // 6 threads on 4 CPUs, all of them theirs
  own.own_cpus = 4;
  EXPECT_EQ(own.taken_cpus(), 0);
  EXPECT_FALSE(own.busy());
  EXPECT_EQ(own.describe(),
            "its 6 threads waited for a CPU 33% of the time on 4 CPUs, and something else held "
            "0% of the CPUs' time");
  HostLoad shared = own;  // a CPU's fifth went elsewhere: 5% of the 4 CPUs
  shared.own_cpus = 3.8;
  EXPECT_NEAR(shared.taken_cpus(), 0.2, 1e-12);
  EXPECT_TRUE(shared.busy());
  shared.own_cpus = 3.81;
  EXPECT_FALSE(shared.busy());
  // The threads fitting their CPUs, all of the wait counts, whatever they ran.
  HostLoad fits = load(2, 0.5);
  fits.own_cpus = 3.9;
  EXPECT_NEAR(fits.taken_cpus(), 0.1, 1e-12);
  fits.own_cpus = 1.5;
  EXPECT_DOUBLE_EQ(fits.taken_cpus(), 0.5);
  fits.cpus = 0;  // unknown CPUs: the whole wait
  fits.own_cpus = 9;
  EXPECT_DOUBLE_EQ(fits.taken_cpus(), 0.5);
  EXPECT_TRUE(fits.busy());
}

// No figure without a whole span or under kMinLoadSeconds.
TEST(HostLoad, MeterGivesNoFigureForTooShortASpan) {
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

// Spins on the calling thread for `ms` milliseconds.
void spin_for(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  volatile uint64_t n = 0;
  while (std::chrono::steady_clock::now() < until) n = n + 1;
}

// Two threads of this process spinning on its one CPU (taskset's pinning) wait for it about half
// of the time each: the meter counts the time each waited, the one started after begin() from
// its start. That wait is the run's own, not a busy machine's. Steal has no figure under a
// second.
TEST(HostLoad, ThreadsSharingTheProcesssOneCpuWaitForEachOther) {
  std::optional<HostLoad> h;
  {
    const test::PinnedToOneCpu pinned(/*whole_process=*/true);
    ASSERT_TRUE(pinned.ok());
    HostLoadMeter m;
    m.begin();
    std::atomic<bool> stop{false};
    std::thread other([&] {
      volatile uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
    spin_for(600);
    m.end();
    stop = true;
    other.join();
    h = m.result(2);
  }
  ASSERT_TRUE(h);
  EXPECT_EQ(h->threads, 2);
  EXPECT_EQ(h->cpus, 1);
  EXPECT_GE(h->seconds, 0.6);
  EXPECT_LT(h->seconds, 10);
  EXPECT_GE(h->waited_cpus, 0.7) << h->waited_cpus;  // about 1: each thread about half
  // Whenever one ran, the other waited for it: about own_cpus of the wait is the run's own, and
  // only what something else ran on the CPU (this machine may be busy) can make it busy.
  EXPECT_GE(h->waited_cpus - h->taken_cpus(), 0.5) << h->describe();
  EXPECT_EQ(h->busy(), h->taken_cpus() >= 0.05) << h->describe();
  EXPECT_NE(h->describe().find("on 1 CPU, and something else held"), std::string::npos);
  EXPECT_TRUE(std::isnan(h->steal_cpus));
}

// The same CPU shared with another process: this one thread's wait is the other's time there.
TEST(HostLoad, AThreadSharingItsCpuWithAnotherProcessIsBusy) {
  std::optional<HostLoad> h;
  {
    const test::PinnedToOneCpu pinned(/*whole_process=*/true);
    ASSERT_TRUE(pinned.ok());
    const pid_t child = fork();  // inherits the pinning; spins until killed
    ASSERT_GE(child, 0);
    if (child == 0)
      for (volatile uint64_t n = 0;; n = n + 1) {
      }
    HostLoadMeter m;
    m.begin();
    spin_for(600);
    m.end();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    h = m.result(1);
  }
  ASSERT_TRUE(h);
  EXPECT_EQ(h->cpus, 1);
  EXPECT_GE(h->waited_cpus, 0.3) << h->waited_cpus;  // about a half
  EXPECT_LE(h->own_cpus, 0.7) << h->own_cpus;
  EXPECT_TRUE(h->busy());
  EXPECT_NEAR(h->taken_cpus(), h->waited_cpus, 1e-12);
}

// Only whole "cpuN" lines count: the all-CPU line's first value is no CPU number (here 1, with a
// guest time where a CPU line's steal would be), a line of seven values is a kernel without steal
// time, and another word ending in a digit is no CPU.
TEST(HostLoad, ProcStatStealOnlyFromWholeCpuNLines) {
  const std::string text =
      "cpu  1 0 0 0 0 0 0 0 500 0\n"
      "cpu1 10 0 0 0 0 0 0 20 0 0\n"
      "cpu2 1 2 3 4 5 6 7\n"
      "gpu3 0 0 0 0 0 0 0 900 0 0\n";
  int found = -1;
  EXPECT_DOUBLE_EQ(proc_stat_steal_seconds(text, {1, 2, 3}, 100, &found), 0.2);
  EXPECT_EQ(found, 1);
}

// No thread counted is one thread (a hand-made or read-back figure): 1% of the time waited is not
// busy. No CPU counted has no steal share: a steal of 0 over 0 CPUs is not busy either. One CPU
// is named in the singular.
TEST(HostLoad, NoThreadsOrNoCpusAreNotBusyAndOneCpuIsSingular) {
  HostLoad none = load(0, 0.01);
  EXPECT_FALSE(none.busy());
  HostLoad no_cpus = load(1, 0.0, 0.0);
  no_cpus.cpus = 0;
  EXPECT_FALSE(no_cpus.busy());
  HostLoad one_cpu = load(1, 0.01, 0.5);
  one_cpu.cpus = 1;
  EXPECT_TRUE(one_cpu.busy());
  EXPECT_EQ(one_cpu.describe(), "the hypervisor took 0.50 of its 1 CPU");
}

// The meter counts at least one thread whatever it is told (a caller with no threads of its own).
TEST(HostLoad, MeterCountsAtLeastOneThread) {
  HostLoadMeter m;
  m.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  m.end();
  const std::optional<HostLoad> h = m.result(0);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->threads, 1);
  EXPECT_GE(h->seconds, kMinLoadSeconds);
}

// Where the CPUs are unknown (0) each thread counts: the wait is judged against all of them. The
// run's own time past its CPUs (a measurement's rounding) leaves nothing taken, not less. With
// more threads than CPUs, the share held by something else is of the CPUs' time.
TEST(HostLoad, UnknownCpusOwnTimePastTheCpusAndTheSharesDenominator) {
  HostLoad unknown = load(4, 0.15);
  unknown.cpus = 0;
  EXPECT_FALSE(unknown.busy());  // 0.15 of 4 threads' time is under 5%
  unknown.waited_cpus = 0.2;
  EXPECT_TRUE(unknown.busy());
  HostLoad over = load(2, 0.3);
  over.cpus = 2;
  over.own_cpus = 2.5;
  EXPECT_EQ(over.taken_cpus(), 0.0);
  EXPECT_FALSE(over.busy());
  HostLoad six = load(6, 2.0);  // 6 threads on 4 CPUs
  six.own_cpus = 3.8;
  EXPECT_EQ(six.describe(),
            "its 6 threads waited for a CPU 33% of the time on 4 CPUs, and something else held "
            "5% of the CPUs' time");
}

}  // namespace
}  // namespace mpbench
