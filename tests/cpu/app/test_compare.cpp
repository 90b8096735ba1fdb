// `mpbench compare`: the statistics and verdicts (app/compare.h) on crafted reports, and a few
// cases through the real executable (exit codes, one-line errors, the --md / --json files).
#include "app/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mpbench {
namespace {

nlohmann::json cpu_env(const std::string& name = "Test CPU") {
  return {{"device", "cpu"}, {"cpu", {{"name", name}, {"threads", 2}}}};
}
nlohmann::json gpu_env(const std::string& driver = "13.0") {
  return {{"device", "cuda"},
          {"gpu",
           {{"name", "NVIDIA H200"},
            {"driver_version", driver},
            {"cuda_runtime_version", "13.0"},
            {"cudnn_version", "9.19.0"}}},
          {"cpu", {{"name", "Xeon"}, {"threads", 16}}}};
}

RunResult make_run(const std::vector<double>& times, const std::string& precision = "fp32",
                   const std::string& model = "m", const std::string& device = "cpu") {
  RunResult r;
  r.model = model;
  r.family = "mlp";
  r.precision = precision;
  r.device = device;
  r.batch_size = 32;
  for (double t : times) {
    EpochResult e;
    e.time_ms = t;
    r.epochs.push_back(e);
  }
  r.epoch_time_ms = compute_time_stats(times);
  r.memory.training_peak = 1000000;
  r.memory.tracked_peak = 1500000;  // with the dataset copy, which the gate leaves out
  r.final_accuracy = 0.90;
  r.final_loss = 0.25;
  return r;
}

Report make_report(std::vector<RunResult> runs, json env = cpu_env()) {
  Report r;
  r.tool = {{"name", "mpbench"}, {"version", "test"}, {"git", "x"}};
  r.env = std::move(env);
  r.runs = std::move(runs);
  return r;
}

const std::vector<double> kBase = {100, 101, 99, 100.5, 99.5, 100.2};
std::vector<double> scaled(double f, const std::vector<double>& v = kBase) {
  std::vector<double> out;
  for (double x : v) out.push_back(x * f);
  return out;
}

Comparison cmp(const Report& b, const Report& c, CompareOptions o = {}) {
  return compare_reports(b, c, o);
}

// Five repetitions of a run (`run --repeat 5`): the epochs scaled by f, each repetition by a
// little more or less (the run-to-run noise of a quiet machine).
const std::vector<double> kRepNoise = {1.0, 1.004, 0.996, 1.002, 0.998};
std::vector<RunResult> reps(double f = 1.0, const std::string& precision = "fp32",
                            const std::string& device = "cpu",
                            const std::vector<double>& noise = kRepNoise) {
  std::vector<RunResult> out;
  for (size_t i = 0; i < noise.size(); ++i) {
    out.push_back(make_run(scaled(f * noise[i]), precision, "m", device));
    out.back().repetition = static_cast<int64_t>(i + 1);
  }
  return out;
}
// A baseline and a current file of the same runs whose specs differ in train.epochs.
std::pair<Report, Report> changed_spec_reports() {
  const json spec = {{"name", "m"}, {"train", {{"batch_size", 32}, {"epochs", 1}}}};
  Report b = make_report(reps()), c = make_report(reps());
  b.specs = {spec};
  c.specs = {spec};
  c.specs[0]["train"]["epochs"] = 2;
  return {b, c};
}
std::vector<RunResult> join(std::vector<RunResult> a, const std::vector<RunResult>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The hierarchical bootstrap of one file of one repetition a side: the epochs' alone.
RatioEstimate bootstrap_median_ratio(const std::vector<double>& baseline,
                                     const std::vector<double>& current, int resamples,
                                     uint64_t seed) {
  return hierarchical_median_ratio({{baseline}}, {{current}}, resamples, seed);
}

TEST(Bootstrap, RatioOfMediansAndDeterministicInterval) {
  const auto a = bootstrap_median_ratio(kBase, scaled(1.3), 2000, 42);
  ASSERT_TRUE(a.valid);
  EXPECT_NEAR(a.ratio, 1.3, 1e-12);  // every sample scaled: the medians scale too
  EXPECT_LE(a.lo, a.ratio);
  EXPECT_GE(a.hi, a.ratio);
  EXPECT_GT(a.lo, 1.2);
  EXPECT_LT(a.hi, 1.4);
  const auto b = bootstrap_median_ratio(kBase, scaled(1.3), 2000, 42);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);

  const auto same = bootstrap_median_ratio({5, 5, 5}, {5, 5, 5}, 2000, 1);
  EXPECT_EQ(same.ratio, 1.0);
  EXPECT_EQ(same.lo, 1.0);
  EXPECT_EQ(same.hi, 1.0);

  // Noisy samples give a wide interval.
  const auto noisy =
      bootstrap_median_ratio({50, 150, 100, 60, 140}, {55, 145, 100, 70, 160}, 2000, 1);
  EXPECT_LT(noisy.lo, 0.9);
  EXPECT_GT(noisy.hi, 1.1);

  EXPECT_FALSE(bootstrap_median_ratio({}, {1, 2, 3}, 100, 1).valid);
  EXPECT_FALSE(bootstrap_median_ratio({NAN, -1}, {1, 2, 3}, 100, 1).valid);
}

// Past 10000 epochs the resample's median is drawn from its exact distribution instead of by
// resampling (a million epochs took a minute): the interval must be the one resampling gives.
TEST(Bootstrap, LargeSamplesGiveTheResamplingInterval) {
  auto samples = [](size_t n, uint64_t seed, double scale) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(100.0, 3.0);
    std::vector<double> v(n);
    for (double& x : v) x = scale * noise(rng);
    return v;
  };
  for (size_t n : {size_t{10000}, size_t{10001}, size_t{10002}}) {  // resampled, odd, even
    const std::vector<double> base = samples(n, 1, 1.0), cur = samples(n, 2, 1.02);
    const RatioEstimate e = bootstrap_median_ratio(base, cur, 2000, 42);
    ASSERT_TRUE(e.valid);
    EXPECT_LT(e.lo, e.ratio);
    EXPECT_GT(e.hi, e.ratio);
    // The median of N(100, 3) over n samples has a standard error of 3 sqrt(pi / 2n); the
    // ratio's 95% interval is about 2 x 1.96 x sqrt(2) of it, relative.
    const double expected = 2 * 1.96 * std::sqrt(2.0) * 3 * std::sqrt(M_PI / (2.0 * n)) / 100;
    EXPECT_NEAR((e.hi - e.lo) / e.ratio, expected, 0.15 * expected) << "n " << n;
    EXPECT_NEAR(e.ratio, 1.02, 0.003) << "n " << n;
  }
  // Deterministic for a seed on the direct path too.
  const std::vector<double> big = samples(20001, 3, 1.0);
  EXPECT_EQ(bootstrap_median_ratio(big, big, 500, 7).lo,
            bootstrap_median_ratio(big, big, 500, 7).lo);
}

TEST(TimeVerdict, Rule) {
  auto est = [](double r, double lo, double hi) {
    RatioEstimate e;
    e.ratio = r;
    e.lo = lo;
    e.hi = hi;
    e.valid = true;
    return e;
  };
  EXPECT_EQ(time_verdict(est(1.10, 1.02, 1.20), 5, 5, 0.05), "slower");
  EXPECT_EQ(time_verdict(est(1.10, 0.98, 1.20), 5, 5, 0.05), "inconclusive");  // not significant
  EXPECT_EQ(time_verdict(est(1.04, 1.01, 1.07), 5, 5, 0.05), "inconclusive");  // maybe beyond
  EXPECT_EQ(time_verdict(est(1.03, 1.01, 1.04), 5, 5, 0.05), "same");  // significant but small
  EXPECT_EQ(time_verdict(est(0.80, 0.75, 0.85), 5, 5, 0.05), "faster");
  EXPECT_EQ(time_verdict(est(0.80, 0.70, 1.05), 5, 5, 0.05), "inconclusive");  // not clear of 1
  // The faster edge is 1/(1 + t), 0.909 at 10%, as far below 1 as 1.1 is above it (not 0.9).
  EXPECT_EQ(time_verdict(est(0.905, 0.900, 0.907), 5, 5, 0.10), "faster");
  EXPECT_EQ(time_verdict(est(1.00, 0.97, 1.03), 5, 5, 0.05), "same");
  EXPECT_EQ(time_verdict(est(1.00, 0.97, 1.03), 2, 5, 0.05), "inconclusive");  // too few
  EXPECT_EQ(time_verdict(est(1.50, 1.40, 1.60), 5, 2, 0.05), "inconclusive");
  RatioEstimate invalid;
  EXPECT_EQ(time_verdict(invalid, 5, 5, 0.05), "inconclusive");
  // Why: "wider than the band" was said of an interval narrower than it that crossed one edge.
  EXPECT_EQ(inconclusive_time(est(0.983, 0.905, 1.049), 0.10),
            "the interval [0.905, 1.049] reaches past the band's faster edge 0.909: neither "
            "within the band nor faster (an interval clear of 1 and an estimate past the edge)");
  EXPECT_EQ(inconclusive_time(est(1.04, 1.01, 1.07), 0.05),
            "the interval [1.010, 1.070] reaches past the band's slower edge 1.050: neither "
            "within the band nor slower (an interval clear of 1 and an estimate past the edge)");
  EXPECT_EQ(inconclusive_time(est(1.0, 0.8, 1.2), 0.10),
            "the interval [0.800, 1.200] is wider than the band [0.909, 1.100]");
}

// The interval holds the spread between repetitions: epochs as steady as kBase's, but
// repetition medians 20% apart, make a 10% shift indistinguishable from noise.
TEST(Bootstrap, HierarchicalIntervalHoldsTheSpreadBetweenRepetitions) {
  const std::vector<std::vector<double>> steady = {kBase, scaled(1.2), scaled(0.8), scaled(1.1),
                                                   scaled(0.9)};
  std::vector<std::vector<double>> shifted;
  for (const auto& r : steady) shifted.push_back(scaled(1.1, r));
  const RatioEstimate e = hierarchical_median_ratio({steady}, {shifted}, 2000, 42);
  ASSERT_TRUE(e.valid);
  EXPECT_NEAR(e.ratio, 1.1, 1e-9);
  EXPECT_LT(e.lo, 1.0);
  EXPECT_GT(e.hi, 1.2);
  // The same epochs in one repetition a side: the within-run interval is narrow.
  const RatioEstimate one = hierarchical_median_ratio({{kBase}}, {{scaled(1.1)}}, 2000, 42);
  EXPECT_GT(one.lo, 1.05);
  EXPECT_EQ(hierarchical_median_ratio({steady}, {shifted}, 2000, 42).lo, e.lo);  // deterministic
  EXPECT_FALSE(hierarchical_median_ratio({}, {steady}, 100, 1).valid);
  EXPECT_FALSE(hierarchical_median_ratio({{{NAN, -1}}}, {steady}, 100, 1).valid);
}

// `run --repeat`'s speedups pair the modes round by round: a drift of the machine that slows
// both sides of a round alike (the rounds 20% apart here) cancels in each round's ratio, where
// the unpaired medians (compare's, across files made at different times) let it into the
// interval. A shift that is the mode's own still shows, and a round missing a side is left out.
TEST(Bootstrap, PairedRoundsCancelADriftBothSidesShare) {
  const std::vector<double> drift = {1.0, 1.2, 0.8, 1.1, 0.9};
  std::vector<PairedRound> rounds;
  std::vector<std::vector<double>> base, cur;
  for (double d : drift) {
    rounds.push_back({scaled(d), scaled(1.1 * d)});
    base.push_back(scaled(d));
    cur.push_back(scaled(1.1 * d));
  }
  const RatioEstimate paired = paired_median_ratio(rounds, 2000, 42);
  ASSERT_TRUE(paired.valid);
  EXPECT_NEAR(paired.ratio, 1.1, 1e-9);
  EXPECT_GT(paired.lo, 1.05);  // the drift is gone: the epochs' own spread is left
  EXPECT_LT(paired.hi, 1.15);
  const RatioEstimate unpaired = hierarchical_median_ratio({base}, {cur}, 2000, 42);
  EXPECT_LT(unpaired.lo, 1.0);  // the same times unpaired: the drift is in the interval
  EXPECT_EQ(paired_median_ratio(rounds, 2000, 42).lo, paired.lo);  // deterministic
  rounds.push_back({{NAN}, scaled(5.0)});                          // a side with nothing usable
  EXPECT_NEAR(paired_median_ratio(rounds, 2000, 42).ratio, 1.1, 1e-9);
  EXPECT_FALSE(paired_median_ratio({}, 100, 1).valid);
}

// The t widening holds from one degree of freedom: two rounds (paired), three files in all
// (hierarchical: one baseline file against two current ones). It started at two, and an
// interval of two disagreeing rounds was the bootstrap's alone, about their range.
TEST(Bootstrap, TheTIntervalWidensFromOneDegreeOfFreedom) {
  const RatioEstimate two = paired_median_ratio({{{100.0}, {110.0}}, {{100.0}, {130.0}}}, 2000, 42);
  const double mean = (std::log(1.1) + std::log(1.3)) / 2;
  const double half = 12.7062 * (std::log(1.3) - std::log(1.1)) / std::sqrt(2.0) / std::sqrt(2.0);
  EXPECT_NEAR(two.lo, std::exp(mean - half), 1e-9);
  EXPECT_NEAR(two.hi, std::exp(mean + half), 1e-9);
  const RatioEstimate files =
      hierarchical_median_ratio({{kBase}}, {{scaled(1.1)}, {scaled(1.21)}}, 2000, 42);
  // The pooled deviation is the current side's: log(1.1) / sqrt(2); sqrt(1/1 + 1/2) of it.
  const double fh = 12.7062 * std::log(1.1) / std::sqrt(2.0) * std::sqrt(1.5);
  EXPECT_NEAR(files.lo, files.ratio * std::exp(-fh), 1e-9);
  EXPECT_NEAR(files.hi, files.ratio * std::exp(fh), 1e-9);
  // Only widened: files whose medians agree (a t interval of nothing) keep the bootstrap's
  // interval of their spread-out epochs on both sides of the ratio.
  std::vector<double> spread;
  for (int i = 1; i <= 100; ++i) spread.push_back(i);
  const Runs same = {{spread}, {spread}, {spread}};
  const RatioEstimate agree = hierarchical_median_ratio(same, same, 2000, 42);
  EXPECT_LT(agree.lo, 0.95 * agree.ratio) << agree.lo << " " << agree.ratio;  // 0.84 here
  EXPECT_GT(agree.hi, 1.05 * agree.ratio) << agree.hi << " " << agree.ratio;  // 1.2 here
}

// An even number of repetitions has the mean of its two middle medians as its median, whatever
// order they came in: ten repetitions of 1..10 ms, shuffled, are 5.5 ms against 11.
TEST(Bootstrap, AnEvenNumberOfRepetitionsHasTheMiddlePairsMean) {
  std::vector<std::vector<double>> reps;
  for (double ms : {7.0, 2.0, 9.0, 4.0, 10.0, 1.0, 8.0, 3.0, 6.0, 5.0})
    reps.push_back(std::vector<double>(3, ms));
  const RatioEstimate e =
      hierarchical_median_ratio({reps}, {{std::vector<double>(3, 11.0)}}, 200, 7);
  ASSERT_TRUE(e.valid);
  EXPECT_DOUBLE_EQ(e.ratio, 2.0);
}

// At 3 rounds a bootstrap of their median is about the rounds' range, which holds the true
// median only 75% of the time; the interval is widened to the Student t interval of the rounds'
// log ratios, so it reaches past the range (it did not: 27% of "95%" intervals missed in a
// simulation). One epoch a round: the bootstrap's is within the range, the t interval is all.
TEST(Bootstrap, PairedIntervalOfThreeRoundsReachesPastTheirRange) {
  const std::vector<double> ratio = {1.0, 1.05, 1.1};
  std::vector<PairedRound> rounds;
  for (double r : ratio) rounds.push_back({{100.0}, {100.0 * r}});
  const RatioEstimate s = paired_median_ratio(rounds, 2000, 42);
  ASSERT_TRUE(s.valid);
  EXPECT_NEAR(s.ratio, 1.05, 1e-12);  // the median of the rounds' ratios, as before
  EXPECT_LT(s.lo, 1.0);
  EXPECT_GT(s.hi, 1.1);
  double mean = 0, ss = 0;
  for (double r : ratio) mean += std::log(r) / 3;
  for (double r : ratio) ss += (std::log(r) - mean) * (std::log(r) - mean);
  const double half = 4.3027 * std::sqrt(ss / 2) / std::sqrt(3.0);  // t(0.975, 2)
  EXPECT_NEAR(s.lo, std::exp(mean - half), 1e-12);
  EXPECT_NEAR(s.hi, std::exp(mean + half), 1e-12);
  // Rounds that agree leave the bootstrap's interval of their epochs: no t interval to widen it.
  std::vector<PairedRound> same(3, PairedRound{kBase, scaled(1.1)});
  const RatioEstimate agree = paired_median_ratio(same, 2000, 42);
  EXPECT_NEAR(agree.ratio, 1.1, 1e-9);
  EXPECT_LT(agree.lo, agree.ratio);
  EXPECT_GT(agree.lo, 1.05);
  EXPECT_LT(agree.hi, 1.15);
  // One round: the bootstrap of its epochs alone.
  const RatioEstimate one = paired_median_ratio({rounds[1]}, 2000, 42);
  EXPECT_NEAR(one.ratio, 1.05, 1e-12);
  EXPECT_NEAR(one.lo, 1.05, 1e-12);
  EXPECT_NEAR(one.hi, 1.05, 1e-12);
}

// Files (separate processes) are the top level: repetitions that agree within each file but
// files 15% apart, as runs made at different times on a shared machine are, widen the interval
// where the same repetitions pooled in one file would not.
TEST(Bootstrap, HierarchicalIntervalHoldsTheSpreadBetweenFiles) {
  const Runs files = {{kBase, scaled(1.01)}, {scaled(1.15), scaled(1.16)}, {scaled(0.87), kBase}};
  const Runs pooled = {{kBase, scaled(1.01), scaled(1.15), scaled(1.16), scaled(0.87), kBase}};
  const Runs current = {{scaled(1.12), scaled(1.11), scaled(1.13)}};
  const RatioEstimate by_file = hierarchical_median_ratio(files, current, 2000, 42);
  const RatioEstimate one_file = hierarchical_median_ratio(pooled, current, 2000, 42);
  EXPECT_NEAR(by_file.ratio, one_file.ratio, 1e-12);
  EXPECT_LT(by_file.lo, one_file.lo);
  EXPECT_LT(by_file.lo, 1.0);
}

// A CI job's current side is one file: the bootstrap draws it alone, so the spread between
// processes (the baseline files') never reached that side, and identical runs' intervals excluded
// 1 in 30-35% of cases (an empirical QA). The interval reaches the Student t interval of the
// files' log medians: +-t(0.975, 3 + 1 - 2) x their pooled spread x sqrt(1/3 + 1/1).
TEST(Bootstrap, HierarchicalIntervalHoldsTheSpreadBetweenProcessesForOneCurrentFile) {
  const Runs files = {{kBase, kBase, kBase},
                      {scaled(1.05), scaled(1.05), scaled(1.05)},
                      {scaled(0.95), scaled(0.95), scaled(0.95)}};
  const Runs current = {{scaled(1.02), scaled(1.02), scaled(1.02)}};
  const RatioEstimate e = hierarchical_median_ratio(files, current, 2000, 42);
  ASSERT_TRUE(e.valid);
  EXPECT_NEAR(e.ratio, 1.02, 1e-12);
  double mean = 0, ss = 0;
  for (double f : {1.0, 1.05, 0.95}) mean += std::log(f) / 3;
  for (double f : {1.0, 1.05, 0.95}) ss += (std::log(f) - mean) * (std::log(f) - mean);
  const double half = 4.3027 * std::sqrt(ss / 2) * std::sqrt(1.0 / 3 + 1.0);
  EXPECT_NEAR(e.lo, 1.02 * std::exp(-half), 1e-12);
  EXPECT_NEAR(e.hi, 1.02 * std::exp(half), 1e-12);
  EXPECT_LT(e.lo, 0.85);  // the bootstrap's alone was about [0.97, 1.08]
  // Files that agree have no spread to add: the bootstrap's interval of their epochs stays.
  const Runs agree = {{kBase, kBase}, {kBase, kBase}, {kBase, kBase}};
  const RatioEstimate same =
      hierarchical_median_ratio(agree, {{scaled(1.1), scaled(1.1)}}, 2000, 42);
  EXPECT_GT(same.lo, 1.05);
  EXPECT_LT(same.hi, 1.15);
}

TEST(Compare, ClearRegressionIsSlowerAndExitOne) {
  const Report b = make_report(reps());
  const Report c = make_report(reps(1.30));
  const Comparison r = cmp(b, c);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, "slower");
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"time"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NEAR(r.rows[0].time.ratio, 1.30, 1e-9);
}

// A time regression whose current epochs vary past the noisy bound is noted: a busy runner
// slows a run as a regression does, and the file says so (compare said nothing of it).
// A comparison's notes that hold `text`.
std::vector<std::string> notes_with(const Comparison& c, const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& n : c.notes)
    if (n.find(text) != std::string::npos) out.push_back(n);
  return out;
}

TEST(Compare, ASlowerRowWithNoisyEpochsIsNoted) {
  const Report b = make_report(reps());
  auto noisy_notes = [](const Comparison& c) { return notes_with(c, "noisy epochs"); };
  EXPECT_TRUE(noisy_notes(cmp(b, make_report(reps(1.30)))).empty());
  const std::vector<double> busy = {130, 160, 125, 131, 190, 129};  // cv well over 10%
  std::vector<RunResult> noisy;
  for (int i = 1; i <= 5; ++i) {
    noisy.push_back(make_run(busy));
    noisy.back().repetition = i;
  }
  const Comparison n = cmp(b, make_report(noisy));
  ASSERT_EQ(n.rows[0].verdict, "slower");
  ASSERT_EQ(noisy_notes(n).size(), 1u);
  EXPECT_EQ(noisy_notes(n)[0],
            "note: m fp32 slower in time with noisy epochs in the current file (their spread over "
            "10%): a busy runner slows a run as a regression does; run the job again before "
            "trusting it");
}

// A repetition measured while its threads waited for CPUs that something else held (host_load,
// run_flags' busy) is left out of time on either side, counted, in the row's detail and a note:
// a steadily busy runner slows a run as a regression does, its epochs as steady as a quiet
// run's. The quiet repetitions are judged as ever: a real regression among them still fails.
TEST(Compare, RepetitionsMeasuredOnABusyMachineAreLeftOutOfTime) {
  // Repetitions `from` on (0-based) waited for their 2 CPUs most of the time, and took `slow`
  // times as long.
  auto loaded = [](std::vector<RunResult> runs, size_t from, double slow = 1.30) {
    for (size_t i = from; i < runs.size(); ++i) {
      RunResult& r = runs[i];
      r.host_load = test::host_load(2, 2, 1.1, 0.9);
      for (EpochResult& e : r.epochs) e.time_ms *= slow;
      r.epoch_time_ms = compute_time_stats(epoch_times(r));
    }
    return runs;
  };
  auto busy_notes = [](const Comparison& c) { return notes_with(c, "left out of time"); };
  CompareOptions two;
  two.min_repetitions = 2;
  // Three of five current repetitions busy: their median would be a regression; the two quiet
  // ones are the same as the baseline.
  const Report quiet = make_report(reps()), three_busy = make_report(loaded(reps(), 2));
  const Comparison c = cmp(quiet, three_busy, two);  // compare_to_json reads the files' runs
  EXPECT_EQ(c.rows[0].verdict, "same");
  EXPECT_EQ(c.exit_code, 0);
  EXPECT_EQ(c.rows[0].n_current, 2u);
  EXPECT_EQ(c.rows[0].busy_current, 3u);
  EXPECT_EQ(c.rows[0].busy_baseline, 0u);
  EXPECT_EQ(c.rows[0].detail,
            "left out of time, measured on a busy machine: 3 of 5 current repetitions");
  ASSERT_EQ(busy_notes(c).size(), 1u);
  EXPECT_EQ(busy_notes(c)[0],
            "note: 3 of 10 repetitions of 1 row(s) left out of time: measured while their threads "
            "waited for CPUs that something else held (flagged busy: their host_load), they are "
            "slower as a regression is, and as steady; the rows' details say which");
  EXPECT_EQ(compare_to_json(c)["rows"][0]["busy_repetitions"],
            (nlohmann::json{{"baseline", 0}, {"current", 3}}));
  // Too few quiet repetitions left: inconclusive, saying why and what to do.
  const Comparison few = cmp(make_report(reps()), make_report(loaded(reps(), 2)));
  EXPECT_EQ(few.rows[0].verdict, "inconclusive");
  EXPECT_TRUE(few.rows[0].regressions.empty());
  EXPECT_EQ(few.exit_code, 0);
  EXPECT_EQ(few.rows[0].detail,
            "5 vs 2 repetitions; time needs 3 a side (run again where nothing else holds the "
            "CPUs); left out of time, measured on a busy machine: 3 of 5 current repetitions");
  // A busy baseline's slow repetitions do not make the current look faster.
  const Comparison f = cmp(make_report(loaded(reps(), 2)), make_report(reps()), two);
  EXPECT_EQ(f.rows[0].verdict, "same");
  EXPECT_EQ(f.rows[0].detail,
            "left out of time, measured on a busy machine: 3 of 5 baseline repetitions");
  // A regression in the quiet repetitions is one, whatever the busy ones did.
  const Comparison r = cmp(make_report(loaded(reps(), 4)), make_report(loaded(reps(1.30), 4, 1)));
  EXPECT_EQ(r.rows[0].verdict, "slower");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.rows[0].n_baseline, 4u);
  EXPECT_EQ(r.rows[0].detail,
            "left out of time, measured on a busy machine: 1 of 5 baseline repetitions, 1 of 5 "
            "current repetitions");
  // Memory, accuracy and loss are not times: every repetition counts.
  EXPECT_EQ(c.rows[0].current_values.training_peak, 1000000u);
  // Quiet files: no note, nothing counted.
  const Comparison q = cmp(make_report(reps()), make_report(reps(1.30)));
  EXPECT_TRUE(busy_notes(q).empty());
  EXPECT_EQ(q.rows[0].detail, "");
}

TEST(Compare, ClearImprovementIsFasterAndExitZero) {
  const Comparison r = cmp(make_report(reps()), make_report(reps(0.6)));
  EXPECT_EQ(r.rows[0].verdict, "faster");
  EXPECT_TRUE(r.rows[0].regressions.empty());
  EXPECT_EQ(r.exit_code, 0);
}

TEST(Compare, SmallNoiseIsSame) {
  const Comparison r =
      cmp(make_report(reps()),
          make_report(reps(1.0, "fp32", "cpu", {1.003, 0.992, 1.009, 1.001, 0.997})));
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_EQ(r.exit_code, 0);
}

TEST(Compare, LargeNoiseIsInconclusiveAndBlocksStrict) {
  // The medians differ by 10%, but the spread makes that indistinguishable from noise.
  const std::vector<double> noise = {0.6, 1.4, 1.0, 0.7, 1.3};
  const Report b = make_report(reps(1.0, "fp32", "cpu", noise));
  const Report c = make_report(reps(1.1, "fp32", "cpu", noise));
  Comparison r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "inconclusive");
  EXPECT_TRUE(r.rows[0].blocking);
  EXPECT_EQ(r.exit_code, 0);
  CompareOptions strict;
  strict.strict = true;
  r = cmp(b, c, strict);
  EXPECT_EQ(r.exit_code, 4);
}

// One run a side, however many epochs, knows nothing of the noise between runs: no time verdict,
// and the row says how many repetitions it needs.
TEST(Compare, TooFewRepetitionsIsInconclusive) {
  const Comparison r = cmp(make_report({make_run(kBase)}), make_report({make_run(scaled(3))}));
  EXPECT_EQ(r.rows[0].verdict, "inconclusive");
  EXPECT_EQ(r.rows[0].detail,
            "1 vs 1 repetitions; time needs 3 a side (run both with --repeat 5; the baseline may "
            "also be several files)");
  EXPECT_EQ(r.exit_code, 0);
  // The short side is named, and what serves it: more baseline files do not serve the current
  // side (the hint offered them for either).
  const std::vector<RunResult> two = {reps()[0], reps()[1]};
  const Comparison short_base = cmp(make_report(two), make_report(reps(3)));
  EXPECT_EQ(short_base.rows[0].verdict, "inconclusive");
  EXPECT_EQ(short_base.rows[0].detail,
            "2 vs 5 repetitions; time needs 3 a side (run the baseline with --repeat 5, or give "
            "several --baseline files)");
  EXPECT_EQ(cmp(make_report(reps()), make_report(two)).rows[0].detail,
            "5 vs 2 repetitions; time needs 3 a side (run the current with --repeat 5)");
}

// Several baseline files are repetitions of one baseline, the usual CI case (a baseline remade a
// few times on the runner); one run each is enough then.
TEST(Compare, SeveralBaselineFilesAreRepetitions) {
  std::vector<Report> files;
  for (const RunResult& r : reps()) {
    RunResult one = r;
    one.repetition.reset();
    files.push_back(make_report({one}));
  }
  std::vector<const Report*> ptrs;
  for (const Report& f : files) ptrs.push_back(&f);
  Comparison r = compare_reports(ptrs, make_report(reps(1.3)), {});
  EXPECT_EQ(r.rows[0].n_baseline, 5u);
  EXPECT_EQ(r.rows[0].verdict, "slower");
  EXPECT_EQ(r.exit_code, 1);
  r = compare_reports(ptrs, make_report(reps()), {});
  EXPECT_EQ(r.rows[0].verdict, "same");
}

// Files of a side, each one process's runs: `--repeat 3` in each, the machine's state (a factor
// on every time) that process saw.
std::vector<Report> side_files(const std::vector<double>& states, double f = 1.0) {
  std::vector<Report> out;
  for (double s : states) {
    std::vector<RunResult> runs = reps(f * s, "fp32", "cpu", {1.0, 1.004, 0.996});
    out.push_back(make_report(runs));
  }
  return out;
}
std::vector<const Report*> pointers(const std::vector<Report>& files) {
  std::vector<const Report*> out;
  for (const Report& f : files) out.push_back(&f);
  return out;
}

TEST(Compare, SeveralCurrentFilesAreRepetitions) {
  const Report base = make_report(reps());
  const std::vector<Report> same = side_files({1.0, 1.01, 0.99}),
                            slow = side_files({1.0, 1.01, 0.99}, 1.3);
  Comparison c = compare_reports({&base}, pointers(same), {});
  EXPECT_EQ(c.rows[0].n_current, 9u);
  EXPECT_EQ(c.rows[0].verdict, "same");
  EXPECT_EQ(c.current_files, 3u);
  EXPECT_EQ(compare_to_json(c)["current_files"], 3);
  EXPECT_EQ(compare_to_json(c)["rows"][0]["pairs"], nullptr);
  EXPECT_EQ(compare_to_json(c)["options"]["paired"], false);
  c = compare_reports({&base}, pointers(slow), {});
  EXPECT_EQ(c.rows[0].verdict, "slower");
  EXPECT_EQ(c.exit_code, 1);
  // The current files' spread between processes is in the interval: three files far apart
  // around the baseline are not `same`.
  const std::vector<Report> spread = side_files({0.8, 1.0, 1.25});
  c = compare_reports({&base}, pointers(spread), {});
  EXPECT_EQ(c.rows[0].verdict, "inconclusive");
  EXPECT_LT(c.rows[0].time.lo, 0.9);
  // Every current file's spec and environment are checked against every baseline's.
  std::vector<Report> changed = side_files({1.0, 1.0, 1.0});
  const json spec = {{"name", "m"}, {"train", {{"batch_size", 32}, {"epochs", 1}}}};
  Report spec_base = make_report(reps());
  spec_base.specs = {spec};
  for (Report& r : changed) r.specs = {spec};
  changed[2].specs[0]["train"]["epochs"] = 2;
  c = compare_reports({&spec_base}, pointers(changed), {});
  EXPECT_EQ(c.rows[0].verdict, "spec-changed");
  EXPECT_EQ(c.rows[0].detail, "spec differs at train.epochs: 1 -> 2");
  changed[2].specs.clear();
  c = compare_reports({&spec_base}, pointers(changed), {});
  EXPECT_EQ(c.rows[0].detail, "spec differs at specs: a current file has no spec of m");
  std::vector<Report> other_cpu = side_files({1.0, 1.0, 1.0});
  other_cpu[1].env["cpu"]["name"] = "Other CPU";
  c = compare_reports({&base}, pointers(other_cpu), {});
  EXPECT_EQ(c.rows[0].env_differences,
            (std::vector<std::string>{"cpu.name: Test CPU -> Other CPU"}));
  // A --memory-limit of any current file.
  other_cpu[1].env["memory_limit_bytes"] = uint64_t{1} << 20;
  Report limited = make_report(reps());
  limited.env["memory_limit_bytes"] = uint64_t{1} << 20;
  c = compare_reports({&limited}, pointers(other_cpu), {});
  EXPECT_EQ(notes_with(c, "--memory-limit").size(), 0u);  // the others have none recorded
  // Two limits on each side, the same two: files of one side differ, and so may their runs.
  std::vector<Report> two_limits = side_files({1.0, 1.0});
  two_limits[0].env["memory_limit_bytes"] = uint64_t{1} << 20;
  two_limits[1].env["memory_limit_bytes"] = uint64_t{2} << 20;
  c = compare_reports(pointers(two_limits), pointers(two_limits), {});
  EXPECT_EQ(notes_with(c, "--memory-limit").size(), 1u);
  other_cpu[0].env["memory_limit_bytes"] = uint64_t{2} << 20;
  c = compare_reports({&limited}, pointers(other_cpu), {});
  ASSERT_EQ(notes_with(c, "--memory-limit").size(), 1u);
  EXPECT_NE(
      notes_with(c, "--memory-limit")[0].find("baseline 1.0 MiB, current 2.0 MiB and 1.0 MiB"),
      std::string::npos)
      << notes_with(c, "--memory-limit")[0];
}

// A runner that turns 1.6x slower for minutes (measured on this project's shared 2-core machine):
// each pair's two runs saw the same state.
const std::vector<double> kStates = {1.0, 1.0, 1.6, 1.6, 1.6, 1.0};

TEST(Compare, PairedFilesCancelADriftOfTheMachine) {
  CompareOptions paired;
  paired.paired = true;
  // Each current run a little off its baseline's state, as a pair's two processes are.
  const std::vector<double> jitter = {1.0, 1.01, 0.99, 1.005, 0.995, 1.0};
  std::vector<double> current_states;
  for (size_t i = 0; i < kStates.size(); ++i) current_states.push_back(kStates[i] * jitter[i]);
  for (const double f : {1.0, 1.15, 0.85}) {
    const std::vector<Report> b = side_files(kStates), c = side_files(current_states, f);
    const Comparison p = compare_reports(pointers(b), pointers(c), paired);
    EXPECT_NEAR(p.rows[0].time.ratio, f, 0.01 * f) << f;
    EXPECT_EQ(p.rows[0].pairs, 6u);
    EXPECT_EQ(p.rows[0].n_baseline, 18u);
    EXPECT_EQ(p.rows[0].verdict, f == 1.0 ? "same" : f > 1 ? "slower" : "faster") << f;
    EXPECT_EQ(p.exit_code, f > 1 ? 1 : 0);
    // Unpaired, the same files' states are noise that hides the 15% either way.
    const Comparison u = compare_reports(pointers(b), pointers(c), {});
    EXPECT_EQ(u.rows[0].verdict, "inconclusive") << f;
  }
  // Baselines made in the fast state, the job's runs in the slow one: unpaired, a false alarm;
  // pairs cannot be made so.
  const std::vector<Report> fast = side_files({1.0, 1.0, 1.0}), slow = side_files({1.6, 1.6, 1.6});
  EXPECT_EQ(compare_reports(pointers(fast), pointers(slow), {}).rows[0].verdict, "slower");
  // A pair whose state changed between its two runs is one pair of six: the median holds.
  std::vector<Report> b = side_files(kStates), c = side_files(kStates);
  c[3] = side_files({1.0})[0];  // its baseline ran slow, it fast
  const Comparison one_off = compare_reports(pointers(b), pointers(c), paired);
  EXPECT_NEAR(one_off.rows[0].time.ratio, 1.0, 0.01);
  EXPECT_NE(one_off.rows[0].verdict, "faster");
  EXPECT_EQ(one_off.exit_code, 0);
  // The rule and the JSON say how time was judged.
  const Comparison p = compare_reports(pointers(b), pointers(c), paired);
  const json j = compare_to_json(p);
  EXPECT_EQ(j["options"]["paired"], true);
  EXPECT_EQ(j["rows"][0]["pairs"], 6);
  EXPECT_EQ(j["options"]["method"].get<std::string>().rfind("paired: ", 0), 0u);
  EXPECT_NE(format_compare_console(p).find("time: paired: the median over pairs"),
            std::string::npos);
  EXPECT_NE(format_compare_console(p).find("18/18, 6 pairs"), std::string::npos)
      << format_compare_console(p);
  EXPECT_NE(format_compare_markdown(p, "b", "c").find("| 18/18, 6 pairs |"), std::string::npos);
  // One pair: no note of one baseline file (its advice, more baseline files, is not a pair's).
  const Report b1 = make_report(reps()), c1 = make_report(reps());
  EXPECT_TRUE(notes_with(compare_reports({&b1}, {&c1}, paired), "one baseline file").empty());
  EXPECT_FALSE(notes_with(compare_reports({&b1}, {&c1}, {}), "one baseline file").empty());
  // A regression's text counts the pairs.
  const std::vector<Report> slower = side_files(current_states, 1.3);
  const Comparison r = compare_reports(pointers(b), pointers(slower), paired);
  EXPECT_NE(format_compare_junit(r, "b", "c").find("(18/18 repetitions in 6 pairs)"),
            std::string::npos)
      << format_compare_junit(r, "b", "c");
}

TEST(Compare, PairedNeedsAsManyFilesASideAndEnoughPairs) {
  CompareOptions paired;
  paired.paired = true;
  const std::vector<Report> three = side_files({1, 1, 1}), two = side_files({1, 1});
  try {
    compare_reports(pointers(three), pointers(two), paired);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_EQ(std::string(e.what()),
              "compare --paired: 3 baseline files and 2 current files; each pair is a baseline "
              "file and the current file run beside it");
  }
  // Two pairs: no time verdict, and the row says what to do.
  Comparison c = compare_reports(pointers(two), pointers(side_files({1, 1}, 1.5)), paired);
  EXPECT_EQ(c.rows[0].verdict, "inconclusive");
  EXPECT_EQ(c.rows[0].detail, "2 pairs with times on both sides; time needs 3 (run more pairs)");
  EXPECT_TRUE(c.rows[0].regressions.empty());
  // A pair whose current runs were all measured on a busy machine is no pair.
  std::vector<Report> cur = side_files({1, 1, 1});
  for (RunResult& r : cur[1].runs) r.host_load = test::host_load(2, 2, 1.1, 0.9);
  c = compare_reports(pointers(three), pointers(cur), paired);
  EXPECT_EQ(c.rows[0].pairs, 2u);
  EXPECT_EQ(c.rows[0].busy_current, 3u);
  EXPECT_EQ(c.rows[0].detail,
            "2 pairs with times on both sides; time needs 3 (run again where nothing else holds "
            "the CPUs); left out of time, measured on a busy machine: 3 of 9 current "
            "repetitions");
  // One busy repetition of three leaves its pair.
  cur = side_files({1, 1, 1});
  cur[1].runs[0].host_load = test::host_load(2, 2, 1.1, 0.9);
  c = compare_reports(pointers(three), pointers(cur), paired);
  EXPECT_EQ(c.rows[0].pairs, 3u);
  EXPECT_EQ(c.rows[0].verdict, "same");
  // A pair whose run failed on one side: the status decides, the time counts the others.
  cur = side_files({1, 1, 1, 1}, 1.3);
  const std::vector<Report> four = side_files({1, 1, 1, 1});
  cur[0].runs[1].status = RunStatus::Oom;
  c = compare_reports(pointers(four), pointers(cur), paired);
  EXPECT_EQ(c.rows[0].pairs, 4u);
  EXPECT_EQ(c.rows[0].verdict, "oom");
  EXPECT_NE(std::find(c.rows[0].regressions.begin(), c.rows[0].regressions.end(), "time"),
            c.rows[0].regressions.end());
}

// Pairs too spread for a verdict: the row says how many pairs spread as these would give one
// (statistics.h: t_half_width, trimmed from 10 pairs).
TEST(Compare, PairedSaysHowManyPairsWouldSettleAWideInterval) {
  CompareOptions paired;
  paired.paired = true;
  const std::vector<Report> b = side_files({1, 1, 1, 1, 1, 1});
  // Mean past the band's edge (1.5x and 1.0x by turns: log mean 0.2027, sd 0.2221): clear of 1
  // at t(n-1) 0.2221 / sqrt(n) <= 0.2027: 7 pairs 0.2054, 8 pairs 0.1857.
  const std::vector<Report> past = side_files({1.5, 1.0, 1.5, 1.0, 1.5, 1.0});
  Comparison c = compare_reports(pointers(b), pointers(past), paired);
  EXPECT_EQ(c.rows[0].verdict, "inconclusive");
  EXPECT_NEAR(c.rows[0].time.log_sd, 0.2221, 1e-4);
  EXPECT_EQ(c.rows[0].detail.substr(c.rows[0].detail.find("; ")),
            "; pairs spread as these (sd of their log ratios 0.222) would settle it at about 8")
      << c.rows[0].detail;
  // Mean 0 (0.8x and 1.25x by turns: log ratios +-0.2231, sd 0.2444): within the 10% band
  // (+-0.0953) at t(n-1) 0.2444 / sqrt(n), untrimmed from six pairs: 27 pairs 0.0967, 28 pairs
  // 0.0948.
  const std::vector<Report> wide = side_files({0.8, 1.25, 0.8, 1.25, 0.8, 1.25});
  c = compare_reports(pointers(b), pointers(wide), paired);
  EXPECT_EQ(c.rows[0].verdict, "inconclusive");
  EXPECT_NE(c.rows[0].detail.find("sd of their log ratios 0.244) would settle it at about 28"),
            std::string::npos)
      << c.rows[0].detail;
  // Twelve pairs, trimmed, and so the count (0.85x and 1.18x by turns: trimmed mean 0.0015,
  // Winsorized sd 0.1713): 37 pairs 0.0948, 38 pairs 0.0917, within the 0.0938 the band leaves.
  const std::vector<Report> twelve = side_files(std::vector<double>(12, 1.0));
  std::vector<double> turns;
  for (int i = 0; i < 6; ++i) turns.insert(turns.end(), {0.85, 1.18});
  c = compare_reports(pointers(twelve), pointers(side_files(turns)), paired);
  EXPECT_EQ(c.rows[0].verdict, "inconclusive");
  EXPECT_NE(c.rows[0].detail.find(
                "pairs spread as these (Winsorized sd of their log ratios 0.171) would settle it "
                "at about 38"),
            std::string::npos)
      << c.rows[0].detail;
  // Unpaired, the same files' spread is not pairs': no such count.
  c = compare_reports(pointers(b), pointers(wide), {});
  EXPECT_EQ(c.rows[0].verdict, "inconclusive");
  EXPECT_EQ(c.rows[0].detail.find("pairs spread"), std::string::npos) << c.rows[0].detail;

  // A mean at the band's edge: no count of pairs settles it.
  RatioEstimate at_edge;
  at_edge.valid = true;
  at_edge.log_mean = std::log1p(0.10);
  at_edge.log_sd = 0.05;
  EXPECT_EQ(pairs_to_settle(at_edge, 6, 0.10), kMostPairs + 1);
  // Narrow enough pairs, an interval widened by one stray pair's epochs: no count.
  RatioEstimate narrow = at_edge;
  narrow.log_mean = 0.0;
  narrow.log_sd = 0.01;
  EXPECT_EQ(pairs_to_settle(narrow, 6, 0.10), 0);
  narrow.log_sd = 0.0;
  EXPECT_EQ(pairs_to_settle(narrow, 6, 0.10), 0);
  // The band is symmetric in log space: a mean as far on the faster side needs as many.
  RatioEstimate slow = at_edge, fast = at_edge;
  slow.log_mean = 0.05;
  fast.log_mean = -0.05;
  slow.log_sd = fast.log_sd = 0.08;
  EXPECT_EQ(pairs_to_settle(slow, 6, 0.10), pairs_to_settle(fast, 6, 0.10));
  EXPECT_GT(pairs_to_settle(slow, 6, 0.10), 6);
}

// An environment difference switches nothing off: it is named in the row, everything is still
// judged, and --strict fails on the difference alone.
TEST(Compare, EnvDifferenceIsNamedAndChecksEverything) {
  std::vector<RunResult> bigger = reps(21.0);
  for (RunResult& r : bigger) r.memory.training_peak = 6160000;  // +516%
  nlohmann::json one = cpu_env("CPU A"), two = cpu_env("CPU A");
  one["native_cpu"]["threads"] = 2;
  two["native_cpu"]["threads"] = 1;
  // The reports outlive the comparison: its rows point into them.
  const Report base_one = make_report(reps(), one), cur_two = make_report(bigger, two);
  Comparison r = cmp(base_one, cur_two);
  EXPECT_EQ(r.rows[0].verdict, "slower");
  EXPECT_EQ(r.rows[0].regressions, (std::vector<std::string>{"time", "memory"}));
  ASSERT_EQ(r.rows[0].env_differences.size(), 1u);
  EXPECT_EQ(r.rows[0].env_differences[0], "native_cpu.threads: 2 -> 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(format_compare_console(r).find("env native_cpu.threads: 2 -> 1"), std::string::npos);

  // The same numbers on another CPU: a pass that --strict refuses.
  const Report b = make_report(reps(), cpu_env("CPU A"));
  const Report c = make_report(reps(), cpu_env("CPU B"));
  r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_TRUE(r.rows[0].blocking);
  EXPECT_EQ(r.exit_code, 0);
  CompareOptions strict;
  strict.strict = true;
  EXPECT_EQ(cmp(b, c, strict).exit_code, 4);
}

TEST(Compare, GpuDriverChangeIsNamed) {
  const Report b = make_report(reps(1.0, "fp32", "cuda"), gpu_env("13.0"));
  const Report c = make_report(reps(1.0, "fp32", "cuda"), gpu_env("13.1"));
  const Comparison r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_TRUE(r.rows[0].blocking);
  ASSERT_EQ(r.env_differences.size(), 1u);
  EXPECT_EQ(r.env_differences[0], "gpu.driver_version: 13.0 -> 13.1");
  // The CPU does not matter for GPU runs.
  json other_cpu = gpu_env("13.0");
  other_cpu["cpu"]["name"] = "Epyc";
  const Comparison o = cmp(b, make_report(reps(1.0, "fp32", "cuda"), other_cpu));
  EXPECT_EQ(o.rows[0].verdict, "same");
  EXPECT_TRUE(o.rows[0].env_differences.empty());
}

TEST(EnvDifferences, CpuRunsLookAtTheCpuName) {
  EXPECT_TRUE(env_differences(cpu_env("A"), cpu_env("A"), "cpu").empty());
  EXPECT_EQ(env_differences(cpu_env("A"), cpu_env("B"), "cpu").size(), 1u);
  EXPECT_EQ(env_differences(cpu_env("A"), gpu_env(), "cpu").size(), 2u);  // device and name
}

// The CPU reference's sums depend on the BLAS threads (mnist_mlp fp32: 98.73% at 1, 98.65% at
// 2); files that predate the field are not held against it. The native backend has no BLAS: its
// threads are native_cpu's (under mpirun OpenBLAS saw 1 thread a rank, 2 in a plain run).
TEST(EnvDifferences, ReferenceRunsLookAtTheBlasThreads) {
  nlohmann::json one = cpu_env("A"), two = cpu_env("A");
  one["cpu"]["blas_threads"] = 1;
  two["cpu"]["blas_threads"] = 2;
  const auto d = env_differences(one, two, "reference");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "cpu.blas_threads: 1 -> 2");
  EXPECT_TRUE(env_differences(cpu_env("A"), two, "reference").empty());
  EXPECT_TRUE(env_differences(one, two, "cpu").empty());
}

// The reference's GEMMs are OpenBLAS's: the kernels it picked for the CPU are named (one CPU
// name covers Zen 4's Cooperlake kernels and Zen 5's Haswell ones); the native backend has none.
TEST(EnvDifferences, ReferenceRunsLookAtTheBlasKernels) {
  nlohmann::json one = cpu_env("A"), two = cpu_env("A");
  one["cpu"]["blas_core"] = "Haswell";
  two["cpu"]["blas_core"] = "Cooperlake";
  const auto d = env_differences(one, two, "reference");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "cpu.blas_core: Haswell -> Cooperlake");
  EXPECT_TRUE(env_differences(one, two, "cpu").empty());
  EXPECT_TRUE(env_differences(cpu_env("A"), two, "reference").empty());
}

TEST(Compare, MissingAndNewRunsAreListed) {
  const Report b = make_report(join(reps(), reps(1.0, "tf32")));
  const Report c = make_report(join(reps(), reps(1.0, "amp_bf16")));
  Comparison r = cmp(b, c);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_EQ(r.rows[1].precision, "tf32");
  EXPECT_EQ(r.rows[1].verdict, "missing");
  EXPECT_EQ(r.rows[2].precision, "amp_bf16");
  EXPECT_EQ(r.rows[2].verdict, "new");
  EXPECT_EQ(r.exit_code, 0);
  CompareOptions strict;
  strict.strict = true;
  EXPECT_EQ(cmp(b, c, strict).exit_code, 4);  // a run that vanished blocks a strict gate
}

// Nothing matched is no pass: a baseline at batch 64 against a run at batch 32.
TEST(Compare, NothingMatchedFails) {
  std::vector<RunResult> b = reps(), c = reps();
  for (RunResult& r : b) r.batch_size = 64;
  for (RunResult& r : c) r.batch_size = 32;
  const Comparison r = cmp(make_report(b), make_report(c));
  EXPECT_EQ(r.matched, 0);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(format_compare_console(r).find("FAIL: nothing matched"), std::string::npos);
}

// Data-parallel runs of one rank count that reduced their gradients in another dtype or bucket
// size changed their numerics and their time as a spec's change does: not judged as the same.
TEST(Compare, AnotherGradReduceOrBucketSizeIsASpecChange) {
  auto ranked = [](const std::string& reduce, uint64_t bucket) {
    std::vector<RunResult> runs = reps();
    for (RunResult& r : runs) {
      r.data_parallel.emplace();
      r.data_parallel->ranks = 2;
      r.data_parallel->grad_reduce = reduce;
      r.data_parallel->bucket_bytes = bucket;
    }
    return make_report(runs);
  };
  const uint64_t mb25 = uint64_t{25} << 20;
  Comparison r = cmp(ranked("fp32", mb25), ranked("fp16", mb25));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, "spec-changed");
  EXPECT_EQ(r.rows[0].detail, "spec differs at --grad-reduce: fp32 -> fp16");
  EXPECT_EQ(r.exit_code, 4);
  r = cmp(ranked("fp32", mb25), ranked("fp32", uint64_t{1} << 20));
  EXPECT_EQ(r.rows[0].detail, "spec differs at --bucket-mb: 25 -> 1");
  r = cmp(ranked("bf16", mb25), ranked("bf16", mb25));
  EXPECT_EQ(r.rows[0].verdict, "same");
}

// A spec changed under the same name is not compared as if it were the same: the row names the
// first differing JSON path, and the gate fails.
TEST(Compare, ChangedSpecIsNotComparedAndFails) {
  const json spec = {{"name", "m"},
                     {"train", {{"batch_size", 32}, {"optimizer", {{"lr", 0.001}}}}},
                     {"precisions", {"fp32"}}};
  Report b = make_report(reps()), c = make_report(reps());
  b.specs = {spec};
  json changed = spec;
  changed["train"]["optimizer"]["lr"] = 0.002;
  changed["precisions"] = {"fp32", "amp_bf16"};  // more modes changes no run
  c.specs = {changed};
  Comparison r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "spec-changed");
  EXPECT_NE(r.rows[0].detail.find("train.optimizer.lr: 0.001 -> 0.002"), std::string::npos)
      << r.rows[0].detail;
  EXPECT_EQ(r.exit_code, 4);
  c.specs = {spec};
  c.specs[0]["precisions"] = {"fp32", "amp_bf16"};
  // A block a newer mpbench writes with its defaults, absent from an older file: no change.
  c.specs[0]["fp8"] = {{"margin", 0}};
  r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_EQ(r.exit_code, 0);
  // A file without the spec (its "specs" lost) cannot show it is the same: either side.
  c.specs.clear();
  r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "spec-changed");
  EXPECT_NE(r.rows[0].detail.find("the current file has no spec of m"), std::string::npos)
      << r.rows[0].detail;
  EXPECT_EQ(r.exit_code, 4);
  r = cmp(c, b);
  EXPECT_EQ(r.rows[0].verdict, "spec-changed");
  EXPECT_NE(r.rows[0].detail.find("a baseline file has no spec of m"), std::string::npos);
}

// One model in two spellings (a ResNet's single-stage keys against its stages list) passed as
// the same spec whatever the blocks: keys each side lacks on the other are a change.
TEST(Compare, AModelRespelledIsASpecChange) {
  const json flat = {{"name", "m"},
                     {"model",
                      {{"type", "resnet_bottleneck"},
                       {"width", 8},
                       {"out_channels", 16},
                       {"blocks", 2},
                       {"stride", 2}}}};
  json staged = flat;
  for (const char* k : {"width", "out_channels", "blocks", "stride"}) staged["model"].erase(k);
  staged["model"]["stages"] = {{{"width", 8}, {"out_channels", 16}, {"blocks", 1}, {"stride", 2}}};
  Report b = make_report(reps()), c = make_report(reps());
  b.specs = {flat};
  c.specs = {staged};
  Comparison r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "spec-changed");
  EXPECT_EQ(r.rows[0].detail,
            "spec differs at model: blocks, out_channels, stride, width -> stages");
  EXPECT_EQ(cmp(c, b).rows[0].verdict, "spec-changed");
}

TEST(Compare, RunsMatchOnCudaGraphsToo) {
  RunResult g = make_run(kBase, "fp32", "m", "cuda");
  g.cuda_graphs = true;
  const Report b = make_report({make_run(kBase, "fp32", "m", "cuda"), g}, gpu_env());
  const Report c = make_report({g}, gpu_env());
  const Comparison r = cmp(b, c);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].verdict, "missing");
  EXPECT_FALSE(r.rows[0].cuda_graphs);
  EXPECT_TRUE(r.rows[1].cuda_graphs);
}

// Runs at another batch size are other runs: a sweep's rows match batch by batch.
TEST(Compare, RunsMatchOnBatchSize) {
  RunResult small = make_run(kBase), big = make_run(kBase);
  small.batch_size = 64;
  big.batch_size = 128;
  const Comparison r = cmp(make_report({small, big}), make_report({big}));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].verdict, "missing");
  EXPECT_EQ(r.rows[1].batch_size, big.batch_size);
  EXPECT_NE(r.rows[1].verdict, "new");
}

// A mode with no path on the machine (amp_bf16 on an AVX2-only CPU, amp_fp8 below sm_89) is an
// unsupported row on both sides: no regression, nothing to block --strict, paired or not; a
// mode that loses its path is a status regression.
TEST(Compare, UnsupportedOnBothSidesIsNoRegressionPairedOrNot) {
  auto unsupported = [](std::vector<Report> files) {
    for (Report& f : files)
      for (RunResult& r : f.runs) {
        r.status = RunStatus::Unsupported;
        r.status_detail = "no bf16 kernel on this CPU";
        r.epochs.clear();
      }
    return files;
  };
  const std::vector<Report> b = unsupported(side_files({1, 1, 1})),
                            c = unsupported(side_files({1, 1, 1}));
  CompareOptions strict_paired;
  strict_paired.paired = true;
  strict_paired.strict = true;
  for (const CompareOptions& o : {CompareOptions{}, strict_paired}) {
    const Comparison r = compare_reports(pointers(b), pointers(c), o);
    EXPECT_EQ(r.rows[0].verdict, "unsupported") << o.paired;
    EXPECT_TRUE(r.rows[0].regressions.empty());
    EXPECT_FALSE(r.rows[0].blocking);
    EXPECT_EQ(r.rows[0].pairs, 0u);
    EXPECT_EQ(r.rows[0].detail,
              "baseline: 9 of 9 repetitions unsupported; 9 of 9 repetitions: no bf16 kernel on "
              "this CPU");
    EXPECT_EQ(r.exit_code, 0) << o.paired;
  }
  const std::vector<Report> ok = side_files({1, 1, 1});
  const Comparison lost = compare_reports(pointers(ok), pointers(c), strict_paired);
  EXPECT_EQ(lost.rows[0].verdict, "unsupported");
  EXPECT_EQ(lost.rows[0].regressions, std::vector<std::string>{"status"});
  EXPECT_EQ(lost.exit_code, 1);
}

TEST(Compare, OomOnOneSide) {
  RunResult oom = make_run({});
  oom.status = RunStatus::Oom;
  oom.status_detail = "needs 3 GiB";
  Comparison r = cmp(make_report({make_run(kBase)}), make_report({oom}));
  EXPECT_EQ(r.rows[0].verdict, "oom");
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"status"});
  EXPECT_EQ(r.rows[0].detail, "needs 3 GiB");
  EXPECT_EQ(r.exit_code, 1);

  r = cmp(make_report({oom}), make_report({make_run(kBase)}));
  EXPECT_EQ(r.rows[0].verdict, "recovered");
  EXPECT_EQ(r.exit_code, 0);

  r = cmp(make_report({oom}), make_report({oom}));
  EXPECT_EQ(r.rows[0].verdict, "oom");
  EXPECT_TRUE(r.rows[0].regressions.empty());
  EXPECT_EQ(r.exit_code, 0);

  RunResult div = make_run(kBase);
  div.status = RunStatus::Diverged;
  r = cmp(make_report({make_run(kBase)}), make_report({div}));
  EXPECT_EQ(r.rows[0].verdict, "diverged");
  EXPECT_EQ(r.exit_code, 1);
}

// A file's text in a cell (an oom's status_detail) reaches the terminal printable: a line break
// would split the row, an escape sequence would colour the terminal, U+202E reverse the line.
TEST(Compare, ConsoleTableShowsAFilesTextPrintable) {
  RunResult oom = make_run({});
  oom.status = RunStatus::Oom;
  oom.status_detail = "line1\nline2 \x1b[31mred\u202e";
  const Comparison r = cmp(make_report({make_run(kBase)}), make_report({oom}));
  const std::string out = mpbench::format_compare_console(r, false);
  EXPECT_NE(out.find("line1\\nline2 \\x1b[31mred\\u{202E}"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_EQ(out.find("\u202e"), std::string::npos);
  // Header, rule, the row, a blank line, the rule text and the summary: no line of its own.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 6) << out;
}

// A repetition that failed is the side's status: one oom in five repetitions where the baseline's
// all trained fails the gate (it was dropped, and the other four passed as "same").
TEST(Compare, OneFailedRepetitionIsTheSidesStatus) {
  std::vector<RunResult> cur = reps();
  cur[3].status = RunStatus::Oom;
  cur[3].status_detail = "needs 3 GiB";
  cur[3].epochs.clear();
  Comparison r = cmp(make_report(reps()), make_report(cur));
  EXPECT_EQ(r.rows[0].verdict, "oom");
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"status"});
  EXPECT_EQ(r.rows[0].detail, "1 of 5 repetitions: needs 3 GiB");
  EXPECT_EQ(r.exit_code, 1);
  // Both sides failing as often: not a regression of the status; the rest is judged.
  r = cmp(make_report(cur), make_report(cur));
  EXPECT_EQ(r.rows[0].verdict, "oom");
  EXPECT_TRUE(r.rows[0].regressions.empty());
  EXPECT_EQ(r.exit_code, 0);
}

// A repetition that did not train ok is counted in its side's status, and its figures in none
// of the checks: a diverged repetition's epochs ran 10x long, its peak was 50x and its loss
// and accuracy are what it diverged to; the row judges the four that trained.
TEST(Compare, AFailedRepetitionsFiguresAreLeftOut) {
  std::vector<RunResult> base = reps(), cur = reps();
  cur[2] = make_run(scaled(10.0));
  cur[2].repetition = 3;
  cur[2].memory.training_peak = 50000000;
  cur[2].final_accuracy = 0.0;
  cur[2].final_loss = 40.0;
  for (RunResult* r : {&base[2], &cur[2]}) {
    r->status = RunStatus::Diverged;
    r->status_detail = "loss became non-finite in epoch 6";
  }
  CompareOptions o;
  o.loss_threshold = 0.1;
  const Comparison r = cmp(make_report(base), make_report(cur), o);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, "diverged");
  EXPECT_TRUE(r.rows[0].regressions.empty())
      << fmt::format("{}", fmt::join(r.rows[0].regressions, ", "));
  EXPECT_EQ(r.rows[0].n_baseline, 4u);
  EXPECT_EQ(r.rows[0].n_current, 4u);
  ASSERT_TRUE(r.rows[0].memory_change.has_value());
  EXPECT_EQ(*r.rows[0].memory_change, 0.0);
  ASSERT_TRUE(r.rows[0].time.valid);
  EXPECT_NEAR(r.rows[0].time.ratio, 1.0, 1e-12);
  EXPECT_EQ(r.exit_code, 0);
}

// A list that gains an element (a hidden layer more) is a changed spec, named by its length.
TEST(Compare, AListThatGrowsIsASpecChange) {
  const json spec = {{"name", "m"}, {"model", {{"type", "mlp"}, {"hidden", {32}}}}};
  json deeper = spec;
  deeper["model"]["hidden"] = {32, 16};
  Report b = make_report(reps()), c = make_report(reps());
  b.specs = {spec};
  c.specs = {deeper};
  const Comparison r = cmp(b, c);
  EXPECT_EQ(r.rows[0].verdict, "spec-changed");
  EXPECT_EQ(r.rows[0].detail, "spec differs at model.hidden: 1 -> 2 elements");
  EXPECT_EQ(r.exit_code, 4);
}

// One failed repetition in the baseline switched every check off ("recovered"): a mode 2x slower,
// 3x larger and 65 points less accurate passed, and so did one that now always diverges. The
// repetitions that trained are judged; a larger share failing than in the baseline regresses.
TEST(Compare, AFailedBaselineRepetitionLeavesTheOthersJudged) {
  std::vector<RunResult> base = join(reps(), reps());  // two baseline files' worth: 10
  base[3].status = RunStatus::Oom;
  base[3].status_detail = "needs 3 GiB";
  base[3].epochs.clear();
  std::vector<RunResult> worse = reps(2.0);
  for (RunResult& w : worse) {
    w.memory.training_peak = 3000000;
    w.final_accuracy = 0.25;
  }
  for (size_t i = 5; i < base.size(); ++i) base[i].repetition = static_cast<int64_t>(i + 1);
  Comparison r = cmp(make_report(base), make_report(worse));
  EXPECT_EQ(r.rows[0].verdict, "slower");
  EXPECT_EQ(r.rows[0].regressions, (std::vector<std::string>{"time", "memory", "accuracy"}));
  EXPECT_EQ(r.rows[0].detail, "baseline: 1 of 10 repetitions oom");
  EXPECT_EQ(r.exit_code, 1);
  // The same numbers: judged same, nothing regressed.
  r = cmp(make_report(base), make_report(reps()));
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_EQ(r.exit_code, 0);
  // Every current repetition diverging where 9 of 10 trained: the status regressed.
  std::vector<RunResult> div = reps();
  for (RunResult& d : div) {
    d.status = RunStatus::Diverged;
    d.epochs.clear();
  }
  r = cmp(make_report(base), make_report(div));
  EXPECT_EQ(r.rows[0].verdict, "diverged");
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"status"});
  EXPECT_EQ(r.exit_code, 1);
  // As often failing, but otherwise: 1 of 10 oom, now 1 of 5 diverged.
  std::vector<RunResult> one_div = reps();
  one_div[2].status = RunStatus::Diverged;
  one_div[2].epochs.clear();
  r = cmp(make_report(base), make_report(one_div));
  EXPECT_EQ(r.rows[0].verdict, "diverged");
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"status"});
  // No baseline repetition trained: nothing to judge, the current's recovery says so.
  std::vector<RunResult> all_oom = reps();
  for (RunResult& o : all_oom) o.status = RunStatus::Oom;
  r = cmp(make_report(all_oom), make_report(reps()));
  EXPECT_EQ(r.rows[0].verdict, "recovered");
  EXPECT_EQ(r.rows[0].detail, "baseline: 5 of 5 repetitions oom");
  EXPECT_EQ(r.exit_code, 0);
}

// A current failure must not hide an inconclusive time from --strict (the verdict shows the
// status; the row stopped blocking).
TEST(Compare, AnInconclusiveTimeBlocksStrictBesideAFailedRepetition) {
  std::vector<RunResult> three = reps();
  three.resize(3);
  three[2].status = RunStatus::Oom;
  three[2].epochs.clear();
  CompareOptions strict;
  strict.strict = true;
  const Comparison r = cmp(make_report(three), make_report(three), strict);
  EXPECT_EQ(r.rows[0].verdict, "oom");
  EXPECT_TRUE(r.rows[0].blocking);  // 2 repetitions a side trained: too few to judge time
  EXPECT_EQ(r.exit_code, 4);
}

// A change exactly at a threshold is within it (the division's rounding put 2% of memory at
// 2.0000000000000018%, half a point of accuracy at 0.5000000000000004, 3.45 / 3.0 at
// 1.1500000000000001).
TEST(Compare, AChangeExactlyAtAThresholdIsWithinIt) {
  std::vector<RunResult> three_ms, more;
  for (int i = 1; i <= 5; ++i) {
    three_ms.push_back(make_run({3.0, 3.0, 3.0}));
    more.push_back(make_run({3.45, 3.45, 3.45}));
    three_ms.back().repetition = more.back().repetition = i;
  }
  CompareOptions t15;
  t15.time_threshold = 0.15;
  const Comparison t = cmp(make_report(three_ms), make_report(more), t15);
  EXPECT_EQ(t.rows[0].verdict, "same");
  EXPECT_EQ(t.exit_code, 0);

  std::vector<RunResult> base = reps(), cur = reps();
  for (RunResult& b : base) {
    b.memory.training_peak = 100000;
    b.final_accuracy = 0.985;
  }
  for (RunResult& c : cur) {
    c.memory.training_peak = 102000;
    c.final_accuracy = 0.98;
  }
  Comparison r = cmp(make_report(base), make_report(cur));
  EXPECT_TRUE(r.rows[0].regressions.empty()) << r.rows[0].regressions.size();
  for (RunResult& c : cur) {
    c.memory.training_peak = 102001;
    c.final_accuracy = 0.9799;
  }
  r = cmp(make_report(base), make_report(cur));
  EXPECT_EQ(r.rows[0].regressions, (std::vector<std::string>{"memory", "accuracy"}));
}

// Memory, accuracy and loss over every repetition: the largest peak, the median accuracy and
// loss. Only the first repetition's were read, so four of five that grew passed.
TEST(Compare, MemoryAccuracyAndLossCountEveryRepetition) {
  std::vector<RunResult> grew = reps(), worse = reps(), lossy = reps();
  for (size_t i = 1; i < grew.size(); ++i) grew[i].memory.training_peak = 2000000;
  for (size_t i = 1; i < worse.size(); ++i) worse[i].final_accuracy = 0.5;
  for (size_t i = 1; i < lossy.size(); ++i) lossy[i].final_loss = 0.5;
  Comparison r = cmp(make_report(reps()), make_report(grew));
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"memory"});
  EXPECT_NEAR(*r.rows[0].memory_change, 1.0, 1e-12);
  r = cmp(make_report(reps()), make_report(worse));
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"accuracy"});
  EXPECT_NEAR(*r.rows[0].accuracy_delta, -40.0, 1e-9);
  CompareOptions o;
  o.loss_threshold = 0.1;
  r = cmp(make_report(reps()), make_report(lossy), o);
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"loss"});
  EXPECT_NEAR(*r.rows[0].loss_change, 1.0, 1e-12);
  // One repetition of five off is the median's to absorb for accuracy, not for memory.
  std::vector<RunResult> one = reps();
  one[4].final_accuracy = 0.5;
  EXPECT_EQ(cmp(make_report(reps()), make_report(one)).exit_code, 0);
  one[4].memory.training_peak = 1100000;
  EXPECT_EQ(cmp(make_report(reps()), make_report(one)).rows[0].regressions,
            std::vector<std::string>{"memory"});
}

// Several baseline files: each one's spec is checked, and memory pools over all of them, so the
// verdict does not depend on which file came first.
// The environment is checked against every baseline file, not the first alone: a second file
// made with another thread count is named, and --strict holds it. In the Markdown summary a pass
// with such a row reads as a warning, not a check mark.
TEST(Compare, EveryBaselineFilesEnvironmentIsChecked) {
  nlohmann::json two = cpu_env("CPU A"), other = cpu_env("CPU A");
  two["native_cpu"]["threads"] = 2;
  other["native_cpu"]["threads"] = 1;
  const Report first = make_report(reps(), two);
  const Report second = make_report(reps(), other);
  const Report cur = make_report(reps(), two);
  CompareOptions strict;
  strict.strict = true;
  const Comparison r = compare_reports({&first, &second}, cur, strict);
  ASSERT_EQ(r.rows[0].env_differences.size(), 1u);
  EXPECT_EQ(r.rows[0].env_differences[0], "native_cpu.threads: 1 -> 2");
  EXPECT_EQ(r.exit_code, 4);
  const Comparison loose = compare_reports({&first, &second}, cur, {});
  EXPECT_EQ(loose.exit_code, 0);
  EXPECT_EQ(format_compare_markdown(loose, "b", "c").rfind(":warning: **mpbench compare", 0), 0u)
      << format_compare_markdown(loose, "b", "c");
  const Comparison clean = compare_reports({&first}, cur, {});
  EXPECT_EQ(format_compare_markdown(clean, "b", "c").rfind(":white_check_mark: **mpbench", 0), 0u)
      << format_compare_markdown(clean, "b", "c");
}

TEST(Compare, EveryBaselineFileCountsWhateverItsPlace) {
  const json spec = {{"name", "m"},
                     {"train", {{"batch_size", 32}, {"optimizer", {{"lr", 0.001}}}}}};
  json changed = spec;
  changed["train"]["optimizer"]["lr"] = 0.01;
  std::vector<Report> files;
  for (int i = 0; i < 3; ++i) {
    files.push_back(make_report(reps()));
    files.back().specs = {spec};
  }
  Report cur = make_report(reps());
  cur.specs = {spec};
  files[1].specs = {changed};
  auto run = [&](std::vector<int> order) {
    std::vector<const Report*> ptrs;
    for (int i : order) ptrs.push_back(&files[i]);
    return compare_reports(ptrs, cur, {});
  };
  for (const auto& order : {std::vector<int>{0, 1, 2}, std::vector<int>{1, 0, 2}}) {
    const Comparison r = run(order);
    EXPECT_EQ(r.rows[0].verdict, "spec-changed") << order[0];
    EXPECT_EQ(r.exit_code, 4) << order[0];
  }
  files[1].specs = {spec};
  for (RunResult& x : files[1].runs) x.memory.training_peak = 800000;  // a smaller baseline
  std::vector<RunResult> more = reps();
  for (RunResult& x : more) x.memory.training_peak = 1010000;  // +1% of the largest
  cur = make_report(more);
  cur.specs = {spec};
  for (const auto& order : {std::vector<int>{0, 1, 2}, std::vector<int>{1, 0, 2}}) {
    const Comparison r = run(order);
    EXPECT_EQ(r.exit_code, 0) << order[0];
    EXPECT_NEAR(*r.rows[0].memory_change, 0.01, 1e-12) << order[0];
  }
}

TEST(Compare, MemoryRegression) {
  std::vector<RunResult> more_reps = reps();
  for (RunResult& x : more_reps) x.memory.training_peak = 1030000;  // +3% > 2%
  RunResult more = make_run(kBase);
  Comparison r = cmp(make_report(reps()), make_report(more_reps));
  EXPECT_EQ(r.rows[0].verdict, "same");  // time is fine; memory is not
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"memory"});
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_TRUE(r.rows[0].memory_change);
  EXPECT_NEAR(*r.rows[0].memory_change, 0.03, 1e-12);

  more.memory.training_peak = 1010000;  // +1%: within
  ASSERT_EQ(r.rows[0].regressions.size(), 1u);
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({more})).exit_code, 0);
  CompareOptions zero;
  zero.memory_threshold = 0;
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({more}), zero).exit_code, 1);
}

TEST(Compare, AccuracyRegression) {
  RunResult worse = make_run(kBase);
  worse.final_accuracy = 0.894;  // -0.6 points
  Comparison r = cmp(make_report({make_run(kBase)}), make_report({worse}));
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"accuracy"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NEAR(*r.rows[0].accuracy_delta, -0.6, 1e-9);

  worse.final_accuracy = 0.896;  // -0.4 points: within 0.5
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({worse})).exit_code, 0);
  RunResult better = make_run(kBase);
  better.final_accuracy = 0.99;
  CompareOptions zero;
  zero.accuracy_threshold = 0;
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({better}), zero).exit_code, 0);
}

TEST(Compare, LossThresholdIsOffByDefaultAndTwoSided) {
  RunResult other = make_run(kBase);
  other.final_loss = 0.2500001;
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({other})).exit_code, 0);
  CompareOptions exact;
  exact.loss_threshold = 0.0;
  Comparison r = cmp(make_report({make_run(kBase)}), make_report({other}), exact);
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"loss"});
  EXPECT_EQ(r.exit_code, 1);
  other.final_loss = 0.24;  // lower is a change too: the gate asks for the same numerics
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({other}), exact).exit_code, 1);
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({make_run(kBase)}), exact).exit_code,
            0);
  other.final_loss = NAN;
  CompareOptions loose;
  loose.loss_threshold = 0.5;
  EXPECT_EQ(cmp(make_report({make_run(kBase)}), make_report({other}), loose).exit_code, 1);
  // A loss gone non-finite (null in the file) fails without a threshold too, and says so.
  r = cmp(make_report({make_run(kBase)}), make_report({other}));
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"loss"});
  const std::string text = format_compare_console(r);
  EXPECT_NE(text.find("not finite (0.25 -> nan)"), std::string::npos) << text;
  EXPECT_EQ(text.find("+nan%"), std::string::npos) << text;
  // The threshold is relative to the baseline's loss: 1.0 -> 1.5 is 50%, past 40% (of the
  // current loss, 1.5, it would be within).
  RunResult unit = make_run(kBase), half_more = make_run(kBase);
  unit.final_loss = 1.0;
  half_more.final_loss = 1.5;
  CompareOptions forty;
  forty.loss_threshold = 0.4;
  EXPECT_EQ(cmp(make_report({unit}), make_report({half_more}), forty).rows[0].regressions,
            std::vector<std::string>{"loss"});
  // A baseline whose loss was not finite already is not one that went so.
  RunResult nan_base = make_run(kBase);
  nan_base.final_loss = NAN;
  EXPECT_TRUE(cmp(make_report({nan_base}), make_report({other})).rows[0].regressions.empty());
  // A huge loss's change in exponent form, not three hundred digits across the table.
  other.final_loss = 1e300;
  const std::string console =
      format_compare_console(cmp(make_report({make_run(kBase)}), make_report({other}), loose));
  EXPECT_NE(console.find("+4e+302%"), std::string::npos) << console;
  EXPECT_EQ(console.find("00000000"), std::string::npos) << console;
}

TEST(Compare, DuplicateRunsAreBadInput) {
  const Report b = make_report({make_run(kBase), make_run(kBase)});
  try {
    cmp(b, make_report({make_run(kBase)}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("baseline: runs[0] and runs[1]"), std::string::npos)
        << e.what();
  }
  // Repetitions share the key and are not duplicates; the same repetition twice is.
  EXPECT_NO_THROW(cmp(make_report(reps()), make_report(reps())));
  std::vector<RunResult> twice = reps();
  twice[1].repetition = 1;
  EXPECT_THROW(cmp(make_report(twice), make_report(reps())), Error);
  // With the files' names, the message names the file.
  const Report a = make_report(reps()), d = make_report(twice);
  try {
    compare_reports({&a, &d}, make_report(reps()), {}, {"a.json", "b.json", "c.json"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("b.json: runs[0] and runs[1]"), std::string::npos)
        << e.what();
  }
}

TEST(Compare, WritersAgreeWithTheVerdicts) {
  RunResult oom = make_run({}, "tf32");
  oom.status = RunStatus::Oom;
  const Report b = make_report(join(reps(), {make_run(kBase, "tf32")}));
  const Report c = make_report(join(reps(1.3), {oom}));
  const Comparison r = cmp(b, c);
  const std::string console = format_compare_console(r);
  EXPECT_NE(console.find("slower"), std::string::npos) << console;
  EXPECT_NE(console.find("oom"), std::string::npos) << console;
  EXPECT_NE(console.find("FAIL: 2 regression(s)"), std::string::npos) << console;
  const std::string md = format_compare_markdown(r, "base.json", "cur.json");
  EXPECT_NE(md.find("| m | fp32 | cpu |"), std::string::npos) << md;
  EXPECT_NE(md.find("| slower | **time** |"), std::string::npos) << md;
  EXPECT_NE(md.find("<code>base.json</code>"), std::string::npos) << md;
  const json j = compare_to_json(r);
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["rows"][0]["verdict"], "slower");
  EXPECT_NEAR(j["rows"][0]["time_ratio"]["ratio"].get<double>(), 1.3, 1e-9);
  // The method as the code runs it: the file level too.
  EXPECT_NE(j["options"]["method"].get<std::string>().find("files, then their repetitions"),
            std::string::npos);
  EXPECT_EQ(j["rows"][1]["current_status"], "oom");
  EXPECT_TRUE(j["rows"][1]["time_ratio"].is_null());
}

// ---- JUnit XML and the Markdown summary --------------------------------------------------------

// The attribute `name` of the first element `<tag ...>` at or after `from` (raw, unescaped).
std::string xml_attr(const std::string& xml, const std::string& tag, const std::string& name,
                     size_t from = 0) {
  const size_t open = xml.find("<" + tag + " ", from);
  if (open == std::string::npos) return "";
  const size_t close = xml.find('>', open);
  const size_t at = xml.find(" " + name + "=\"", open);
  if (at == std::string::npos || at > close) return "";
  const size_t start = at + name.size() + 3;
  return xml.substr(start, xml.find('"', start) - start);
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// One epoch a side: nothing varied to resample, so no interval ("1.300 [1.300, 1.300]" read as
// a sure ratio beside its inconclusive verdict).
TEST(Compare, NoSpreadNoInterval) {
  const Comparison r = cmp(make_report({make_run({1.0})}), make_report({make_run({1.3})}));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, "inconclusive");
  const std::string console = format_compare_console(r);
  EXPECT_NE(console.find("1.300 [n/a]"), std::string::npos) << console;
}

// The Markdown bolds what regressed, not the verdict: a memory regression's verdict is its
// time's, and "**same**" would read as the failure.
TEST(CompareMarkdown, BoldsWhatRegressedNotTheTimeVerdict) {
  std::vector<RunResult> bigger = reps();
  for (RunResult& r : bigger) r.memory.training_peak = 1100000;  // +10%
  const Comparison r = cmp(make_report(reps()), make_report(bigger));
  ASSERT_EQ(r.rows.size(), 1u);
  ASSERT_EQ(r.rows[0].verdict, "same");
  const std::string md = format_compare_markdown(r, "b.json", "c.json");
  EXPECT_EQ(md.find("**same**"), std::string::npos) << md;
  EXPECT_NE(md.find("| same | **memory +10.00%"), std::string::npos) << md;
  EXPECT_NE(md.find("| same | **memory** |"), std::string::npos) << md;
  // The counts say a regressed row is counted as regressed whatever its time's verdict.
  EXPECT_NE(
      md.find("1 row(s), 1 regressed (in time, memory, accuracy, loss or status), 0 other(s)"),
      std::string::npos)
      << md;
}

// A comparison with one row of each kind: slower, oom (was ok), inconclusive (one run a side),
// new, and a model whose name holds every XML special and a control character.
Comparison mixed_comparison(Report& b, Report& c) {
  RunResult oom = make_run({}, "tf32");
  oom.status = RunStatus::Oom;
  oom.status_detail = "needs 3 GiB";
  RunResult odd_b = make_run(kBase, "fp32", "a<b&c\"d'e>\x01\xff");
  RunResult odd_c = make_run(scaled(1.01), "fp32", "a<b&c\"d'e>\x01\xff");
  b = make_report(join(reps(), {make_run(kBase, "tf32"), make_run(kBase, "amp_fp16"), odd_b}));
  c = make_report(
      join(reps(1.3), {oom, make_run(kBase, "amp_fp16"), odd_c, make_run(kBase, "amp_bf16")}));
  // amp_fp16 and the odd model: one run a side, no time verdict.
  return cmp(b, c);
}

TEST(CompareJunit, OneTestCasePerRowWithFailuresAndSkips) {
  Report b, c;
  const Comparison r = mixed_comparison(b, c);
  ASSERT_EQ(r.rows.size(), 5u);
  EXPECT_EQ(r.rows[0].verdict, "slower");
  EXPECT_EQ(r.rows[1].verdict, "oom");
  EXPECT_EQ(r.rows[2].verdict, "inconclusive");
  EXPECT_EQ(r.rows[3].verdict, "inconclusive");
  EXPECT_EQ(r.rows[4].verdict, "new");
  const std::string xml = format_compare_junit(r, "base.json", "cur<&>.json");

  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u) << xml;
  EXPECT_EQ(count_of(xml, "<testsuites "), 1u) << xml;
  EXPECT_EQ(count_of(xml, "</testsuites>"), 1u) << xml;
  EXPECT_EQ(count_of(xml, "<testsuite "), 1u) << xml;
  EXPECT_EQ(xml_attr(xml, "testsuite", "name"), "mpbench compare");
  EXPECT_EQ(xml_attr(xml, "testsuite", "tests"), "5");
  EXPECT_EQ(xml_attr(xml, "testsuite", "failures"), "2");
  EXPECT_EQ(xml_attr(xml, "testsuite", "skipped"), "2");
  EXPECT_EQ(xml_attr(xml, "testsuite", "errors"), "0");
  EXPECT_EQ(count_of(xml, "<testcase "), 5u);
  EXPECT_EQ(count_of(xml, "<failure "), 2u);
  EXPECT_EQ(count_of(xml, "<skipped "), 2u);

  // Case by case, in row order.
  std::vector<size_t> at;
  for (size_t p = xml.find("<testcase "); p != std::string::npos; p = xml.find("<testcase ", p + 1))
    at.push_back(p);
  ASSERT_EQ(at.size(), 5u);
  auto body = [&](size_t i) { return xml.substr(at[i], xml.find("</testcase>", at[i]) - at[i]); };
  EXPECT_EQ(xml_attr(xml, "testcase", "classname", at[0]), "mpbench.m");
  EXPECT_EQ(xml_attr(xml, "testcase", "name", at[0]), "fp32 cpu batch 32");
  const std::string slower = xml_attr(xml, "failure", "message", at[0]);
  EXPECT_NE(slower.find("time ratio 1.300 [95% CI "), std::string::npos) << slower;
  EXPECT_NE(slower.find("beyond +10% (5/5 repetitions)"), std::string::npos) << slower;
  const std::string oom = xml_attr(xml, "failure", "message", at[1]);
  EXPECT_NE(oom.find("status ok -&gt; oom: needs 3 GiB"), std::string::npos) << oom;
  EXPECT_NE(body(2).find("<skipped message=\"inconclusive: 1 vs 1 repetitions"), std::string::npos)
      << body(2);
  // The odd name, escaped; the control character and the stray byte replaced by U+FFFD.
  EXPECT_EQ(xml_attr(xml, "testcase", "classname", at[3]),
            "mpbench.a&lt;b&amp;c&quot;d&#39;e&gt;\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(body(4).find("<failure"), std::string::npos);
  EXPECT_EQ(body(4).find("<skipped"), std::string::npos);
  EXPECT_NE(body(4).find("<system-out>new: "), std::string::npos) << body(4);
  EXPECT_EQ(xml_attr(xml, "testcase", "name", at[4]), "amp_bf16 cpu batch 32");
  EXPECT_NE(xml.find("value=\"cur&lt;&amp;&gt;.json\""), std::string::npos) << xml;
  // Nothing raw: no control character, no '<' that opens no element.
  for (char ch : xml) EXPECT_FALSE(ch > 0 && ch < 0x20 && ch != '\n') << int(ch);

  // A real parser agrees, where there is one.
  const fs::path dir = fs::temp_directory_path() / ("mpbench_junit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  if (test::run_shell("command -v python3", dir.string()).code != 0) {
    fs::remove_all(dir);
    return;
  }
  std::ofstream(dir / "j.xml") << xml;
  const std::string py = R"(
import xml.etree.ElementTree as ET
root = ET.parse('j.xml').getroot()
assert root.tag == 'testsuites', root.tag
suites = root.findall('testsuite')
assert len(suites) == 1
s = suites[0]
cases = s.findall('testcase')
assert int(s.get('tests')) == len(cases) == 5
assert int(s.get('failures')) == sum(1 for c in cases if c.find('failure') is not None) == 2
assert int(s.get('skipped')) == sum(1 for c in cases if c.find('skipped') is not None) == 2
assert cases[3].get('classname') == 'mpbench.a<b&c"d\'e>\ufffd\ufffd', cases[3].get('classname')
assert 'needs 3 GiB' in cases[1].find('failure').get('message')
assert cases[4].find('system-out').text.startswith('new: ')
print('ok')
)";
  std::ofstream(dir / "check.py") << py;
  const test::ShellResult res =
      test::run_shell("cd " + dir.string() + " && python3 check.py", dir.string());
  fs::remove_all(dir);
  EXPECT_EQ(res.code, 0) << res.out << res.err;
  EXPECT_NE(res.out.find("ok"), std::string::npos) << res.out << res.err;
}

TEST(CompareJunit, PassingAndSpecChangedRows) {
  // The reports outlive each comparison: its rows point into them.
  const Report same_b = make_report(reps()), same_c = make_report(reps());
  Comparison r = cmp(same_b, same_c);
  std::string xml = format_compare_junit(r, "b", "c");
  EXPECT_EQ(xml_attr(xml, "testsuite", "failures"), "0");
  EXPECT_EQ(xml_attr(xml, "testsuite", "skipped"), "0");
  EXPECT_EQ(count_of(xml, "<testcase "), 1u);

  // An environment difference is in the row's <system-out> and the suite's; the row passes.
  const Report on_a = make_report(reps(), cpu_env("A")), on_b = make_report(reps(), cpu_env("B"));
  r = cmp(on_a, on_b);
  xml = format_compare_junit(r, "b", "c");
  EXPECT_EQ(xml_attr(xml, "testsuite", "failures"), "0");
  EXPECT_EQ(count_of(xml, "environment differs: cpu.name: A -&gt; B\n"), 2u) << xml;
  EXPECT_LT(xml.find("</testcase>"), xml.rfind("environment differs")) << xml;
  // Under --strict the difference fails the job (exit 4): the row is skipped, saying why, and the
  // Markdown lists it (both showed a failed job all green).
  CompareOptions strict;
  strict.strict = true;
  r = cmp(on_a, on_b, strict);
  ASSERT_EQ(r.exit_code, 4);
  xml = format_compare_junit(r, "b", "c");
  EXPECT_EQ(xml_attr(xml, "testsuite", "skipped"), "1") << xml;
  EXPECT_NE(xml.find("<skipped message=\"same: env cpu.name: A -&gt; B\""), std::string::npos)
      << xml;
  const std::string md = format_compare_markdown(r, "b", "c");
  EXPECT_NE(md.find("| same | env cpu.name: A -&gt; B |"), std::string::npos) << md;

  const auto [b, c] = changed_spec_reports();
  r = cmp(b, c);
  ASSERT_EQ(r.rows[0].verdict, "spec-changed");
  xml = format_compare_junit(r, "b", "c");
  EXPECT_EQ(xml_attr(xml, "testsuite", "skipped"), "1");
  EXPECT_NE(xml.find("<skipped message=\"spec-changed: spec differs at train.epochs: 1 -&gt; 2"),
            std::string::npos)
      << xml;
}

// The summary reads top-down: the verdict, the rows to look at, the full table folded away.
TEST(CompareMarkdown, VerdictThenRowsToLookAtThenTheFoldedTable) {
  Report b, c;
  const Comparison r = mixed_comparison(b, c);
  const std::string md = format_compare_markdown(r, "base.json", "cur.json");
  const size_t verdict = md.find(":x: **mpbench compare: FAIL: 2 regression(s)");
  const size_t short_table = md.find("| model | precision | device | batch | verdict |");
  const size_t details = md.find("<details><summary>All 5 rows</summary>");
  const size_t full_table = md.find("| model | precision | device | batch | time ratio");
  const size_t end = md.find("</details>");
  const size_t rule = md.find("hierarchical");
  EXPECT_EQ(verdict, 0u) << md;
  ASSERT_NE(short_table, std::string::npos) << md;
  ASSERT_NE(details, std::string::npos) << md;
  EXPECT_LT(short_table, details);
  EXPECT_LT(details, full_table);
  EXPECT_LT(full_table, end);
  EXPECT_LT(end, rule);
  ASSERT_NE(rule, std::string::npos);
  // Only the slower, oom and two inconclusive rows above the fold; the new row below it only.
  const std::string above = md.substr(0, details);
  EXPECT_EQ(count_of(above, "\n| m | "), 3u) << above;
  EXPECT_NE(above.find("| slower | **time ratio 1.300"), std::string::npos) << above;
  EXPECT_NE(above.find("status ok -&gt; oom: needs 3 GiB"), std::string::npos) << above;
  EXPECT_EQ(above.find("amp_bf16"), std::string::npos) << above;
  EXPECT_NE(md.find("| m | amp_bf16 | cpu |", details), std::string::npos) << md;
  // A model name cannot open HTML that would break the fold.
  EXPECT_NE(md.find("a&lt;b&amp;c"), std::string::npos) << md;
  EXPECT_EQ(md.find("a<b"), std::string::npos) << md;
  // Nor can a file name, with a backtick that would end a code span or a line break.
  const std::string odd = format_compare_markdown(r, "<img src=x>`.json", "a\nb.json");
  EXPECT_NE(odd.find("Baseline <code>&lt;img src=x&gt;\\`.json</code>, current <code>a\\\\nb.json"
                     "</code>: 5 row(s)"),
            std::string::npos)
      << odd;
  EXPECT_EQ(odd.find("<img"), std::string::npos) << odd;

  // A clean pass has no short table, only the fold.
  const std::string pass =
      format_compare_markdown(cmp(make_report(reps()), make_report(reps())), "b", "c");
  EXPECT_EQ(pass.rfind(":white_check_mark: **mpbench compare: PASS", 0), 0u) << pass;
  EXPECT_EQ(count_of(pass, "| model |"), 1u) << pass;
  EXPECT_NE(pass.find("<details><summary>All 1 rows</summary>"), std::string::npos) << pass;
}

// The regressions of a comparison's first row, for a failure's message.
std::string regress_names(const Comparison& c) {
  return fmt::format("{}", fmt::join(c.rows[0].regressions, ", "));
}

// The largest training peak of a side's repetitions, wherever it is among them: the last one's
// stood for the side, so a baseline whose first repetition peaked highest made a current at that
// same peak a memory regression, and a current whose middle repetition grew passed.
TEST(Compare, TheLargestPeakOfASideIsItsPeakWhereverItIs) {
  std::vector<RunResult> base = reps(), cur = reps();
  base[0].memory.training_peak = 1030000;  // the first repetition's the largest
  for (RunResult& c : cur) c.memory.training_peak = 1030000;
  Comparison r = cmp(make_report(base), make_report(cur));
  EXPECT_TRUE(r.rows[0].regressions.empty()) << regress_names(r);
  ASSERT_TRUE(r.rows[0].memory_change);
  EXPECT_NEAR(*r.rows[0].memory_change, 0.0, 1e-12);
  std::vector<RunResult> grew = reps();
  grew[2].memory.training_peak = 1500000;  // a middle repetition
  r = cmp(make_report(reps()), make_report(grew));
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"memory"});
  EXPECT_NEAR(*r.rows[0].memory_change, 0.5, 1e-12);
}

// A final loss that went non-finite in any repetition, not only the last, is the side's loss
// gone non-finite: it fails without a loss threshold.
TEST(Compare, ALossGoneNonFiniteInAnyRepetitionRegresses) {
  std::vector<RunResult> cur = reps();
  cur[1].final_loss = NAN;
  const Comparison r = cmp(make_report(reps()), make_report(cur));
  EXPECT_EQ(r.rows[0].regressions, std::vector<std::string>{"loss"});
  EXPECT_TRUE(std::isnan(r.rows[0].current_values.loss));
  EXPECT_EQ(r.exit_code, 1);
}

// Times whose ratio is not a finite positive number (a hand-edited file: epochs of 5e-324 ms
// against 100 ms underflow it to 0, 1e300 ms against 1e-300 overflow it) are bad input naming
// the files, not a verdict resting on them.
TEST(Compare, ATimeRatioThatIsNotFinitePositiveIsBadInput) {
  auto at = [](double ms) {
    std::vector<RunResult> out = reps();
    for (RunResult& r : out) {
      for (EpochResult& e : r.epochs) e.time_ms = ms;
      r.epoch_time_ms = compute_time_stats(std::vector<double>(r.epochs.size(), ms));
    }
    return make_report(out);
  };
  const Report base = make_report(reps()), tiny = at(std::numeric_limits<double>::denorm_min()),
               small = at(1e-300), huge = at(1e300);
  for (const auto& [b, c] : {std::pair{&base, &tiny}, std::pair{&small, &huge}}) {
    try {
      cmp(*b, *c);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find("baseline, current: runs[] of m fp32: the baseline's "
                                           "and the current epoch times have no finite ratio"),
                std::string::npos)
          << e.what();
    }
  }
}

// A baseline without a training peak (0: none measured) gives no memory change to judge; the
// current's peak is no regression against it.
TEST(Compare, NoBaselinePeakNoMemoryVerdict) {
  std::vector<RunResult> base = reps();
  for (RunResult& b : base) b.memory.training_peak = 0;
  const Report b = make_report(base), c = make_report(reps());  // outlive r: its rows point in
  const Comparison r = cmp(b, c);
  EXPECT_FALSE(r.rows[0].memory_change.has_value());
  EXPECT_TRUE(r.rows[0].regressions.empty()) << regress_names(r);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(compare_to_json(r)["rows"][0]["memory_change"].is_null());
}

// A final loss of 0 in the baseline against one that is not is an infinite relative change
// (null in the JSON), not none; both 0 is no change.
TEST(Compare, ALossFromZeroIsAnInfiniteChange) {
  std::vector<RunResult> zero = reps();
  for (RunResult& z : zero) z.final_loss = 0;
  const Report b = make_report(zero), c = make_report(reps());  // outlive r: its rows point in
  Comparison r = cmp(b, c);
  ASSERT_TRUE(r.rows[0].loss_change);
  EXPECT_TRUE(std::isinf(*r.rows[0].loss_change));
  EXPECT_TRUE(compare_to_json(r)["rows"][0]["loss_change"].is_null());
  r = cmp(make_report(zero), make_report(zero));
  ASSERT_TRUE(r.rows[0].loss_change);
  EXPECT_EQ(*r.rows[0].loss_change, 0.0);
}

// Both sides failing in some repetitions: the row's detail names the baseline's failures before
// the current's, and a status without detail adds no dangling colon.
TEST(Compare, TheDetailNamesBothSidesFailures) {
  std::vector<RunResult> base = reps(), cur = reps();
  for (RunResult* r : {&base[2], &cur[2]}) {
    r->status = RunStatus::Diverged;
    r->status_detail = "loss became non-finite in epoch 6";
    r->epochs.clear();
  }
  Comparison r = cmp(make_report(base), make_report(cur));
  EXPECT_EQ(r.rows[0].verdict, "diverged");
  EXPECT_EQ(r.rows[0].detail,
            "baseline: 1 of 5 repetitions diverged; 1 of 5 repetitions: loss became non-finite "
            "in epoch 6");
  cur[2].status_detail.clear();
  r = cmp(make_report(reps()), make_report(cur));
  EXPECT_EQ(r.rows[0].detail, "1 of 5 repetitions");
}

// One baseline run that failed and a current that trained: "recovered", saying how the baseline
// ended, with no count of one.
TEST(Compare, ARecoveredSingleRunNamesTheBaselinesStatus) {
  RunResult oom = make_run({});
  oom.status = RunStatus::Oom;
  const Comparison r = cmp(make_report({oom}), make_report({make_run(kBase)}));
  EXPECT_EQ(r.rows[0].verdict, "recovered");
  EXPECT_EQ(r.rows[0].detail, "baseline: oom");
}

// The repetitions asked for follow --min-repetitions where it is past the README's 5; a side
// with exactly the minimum is not short.
TEST(Compare, TheRepetitionsAskedForFollowTheMinimum) {
  CompareOptions eight;
  eight.min_repetitions = 8;
  const Comparison r = cmp(make_report(reps()), make_report(reps()), eight);
  EXPECT_EQ(r.rows[0].verdict, "inconclusive");
  EXPECT_EQ(r.rows[0].detail,
            "5 vs 5 repetitions; time needs 8 a side (run both with --repeat 8; the baseline may "
            "also be several files)");
  // Three current repetitions of wide noise: enough to judge, too noisy to say.
  const std::vector<double> noise = {0.6, 1.4, 1.0, 0.7, 1.3};
  std::vector<RunResult> three = reps(1.1, "fp32", "cpu", noise);
  three.resize(3);
  const Comparison n = cmp(make_report(reps(1.0, "fp32", "cpu", noise)), make_report(three));
  EXPECT_EQ(n.rows[0].verdict, "inconclusive");
  EXPECT_EQ(n.rows[0].detail.rfind("the interval [", 0), 0u) << n.rows[0].detail;
}

// An interval whose edge is exactly 1 is not clear of it: neither slower nor faster.
TEST(TimeVerdict, AnIntervalEndingAtOneIsNotSignificant) {
  RatioEstimate e;
  e.valid = true;
  e.ratio = 1.3, e.lo = 1.0, e.hi = 1.6;
  EXPECT_EQ(time_verdict(e, 5, 5, 0.10), "inconclusive");
  e.ratio = 0.7, e.lo = 0.5, e.hi = 1.0;
  EXPECT_EQ(time_verdict(e, 5, 5, 0.10), "inconclusive");
}

// A row whose spec changed is not judged: its repetitions column says so ("-"), not "0/0".
TEST(CompareMarkdown, ASpecChangedRowHasNoRepetitionCounts) {
  const auto [b, c] = changed_spec_reports();
  const Comparison r = cmp(b, c);
  ASSERT_EQ(r.rows[0].verdict, "spec-changed");
  const std::string md = format_compare_markdown(r, "b", "c");
  EXPECT_NE(md.find("| m | fp32 | cpu | 32 | - | - | - | - | - | spec-changed |"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("0/0"), std::string::npos) << md;
}

// The summary line says why the gate failed or what --strict would do: a changed spec, rows that
// block only --strict.
TEST(Compare, TheSummaryLineSaysWhy) {
  const auto [b, c] = changed_spec_reports();
  EXPECT_NE(format_compare_console(cmp(b, c)).find(
                "FAIL: 1 row(s) trained from a changed spec, not compared; remake the baseline if "
                "the change is meant"),
            std::string::npos)
      << format_compare_console(cmp(b, c));
  const Report on_a = make_report(reps(), cpu_env("A")), on_b = make_report(reps(), cpu_env("B"));
  const std::string pass = format_compare_console(cmp(on_a, on_b));
  EXPECT_NE(pass.find("PASS: no regression (1 inconclusive, missing or environment-changed "
                      "row(s); --strict would fail)"),
            std::string::npos)
      << pass;
  CompareOptions strict;
  strict.strict = true;
  const std::string fail = format_compare_console(cmp(on_a, on_b, strict));
  EXPECT_NE(fail.find("FAIL (--strict): 1 inconclusive, missing or environment-changed row(s)"),
            std::string::npos)
      << fail;
}

// The rule printed under the table names a loss threshold where one is given, and the JUnit
// report's properties hold it.
TEST(Compare, ALossThresholdIsInTheRuleAndTheProperties) {
  CompareOptions o;
  o.loss_threshold = 0.1;
  const Report b = make_report(reps()), c = make_report(reps());  // outlive r: its rows point in
  const Comparison r = cmp(b, c, o);
  EXPECT_NE(format_compare_console(r).find("; final loss threshold 10%"), std::string::npos)
      << format_compare_console(r);
  const std::string xml = format_compare_junit(r, "b", "c");
  EXPECT_NE(xml.find("<property name=\"loss_threshold\" value=\"10%\"/>"), std::string::npos)
      << xml;
  const Comparison none = cmp(b, c);
  EXPECT_EQ(format_compare_console(none).find("final loss threshold"), std::string::npos);
  EXPECT_EQ(format_compare_junit(none, "b", "c").find("loss_threshold"), std::string::npos);
}

// The native backend's ISA (--cpu-isa) is an environment difference of a cpu run, and a field one
// side lacks reads "(none)".
TEST(EnvDifferences, NativeCpuRunsLookAtTheIsaAndNameAMissingField) {
  nlohmann::json one = cpu_env("A"), two = cpu_env("A");
  one["native_cpu"] = {{"threads", 2}, {"isa", "avx2"}};
  two["native_cpu"] = {{"threads", 2}, {"isa", "avx512_core"}};
  EXPECT_EQ(env_differences(one, two, "cpu"),
            std::vector<std::string>{"native_cpu.isa: avx2 -> avx512_core"});
  EXPECT_TRUE(env_differences(one, two, "reference").empty());
  one["native_cpu"].erase("threads");
  two["native_cpu"]["isa"] = "avx2";
  EXPECT_EQ(env_differences(one, two, "cpu"),
            std::vector<std::string>{"native_cpu.threads: (none) -> 2"});
}

// Only the top level's `precisions` (the modes a file ran) is ignored: a key of that name inside
// a block is part of the spec.
TEST(Compare, OnlyTheTopLevelPrecisionsAreIgnored) {
  const json spec = {{"name", "m"}, {"model", {{"type", "mlp"}, {"precisions", {"fp32"}}}}};
  json other = spec;
  other["model"]["precisions"] = {"fp32", "amp_bf16"};
  EXPECT_EQ(first_spec_difference(spec, other), "model.precisions: 1 -> 2 elements");
  other = spec;
  other["precisions"] = {"fp32"};
  json base = spec;
  base["precisions"] = {"tf32"};
  EXPECT_EQ(first_spec_difference(base, other), "");
}

// The one-baseline-file note is about time intervals: a comparison with no row whose time was
// judged or could have been (every run out of memory) draws none.
TEST(Compare, NoTimedRowNoOneBaselineNote) {
  RunResult oom = make_run({});
  oom.status = RunStatus::Oom;
  const Comparison none = cmp(make_report({oom}), make_report({oom}));
  EXPECT_TRUE(notes_with(none, "one baseline file").empty());
  EXPECT_EQ(notes_with(cmp(make_report(reps()), make_report(reps())), "one baseline file").size(),
            1u);
}

// A --memory-limit that differs from any baseline file's is noted, wherever that file comes,
// each baseline limit named once.
TEST(Compare, AMemoryLimitDifferingInAnyBaselineFileIsNoted) {
  auto with_limit = [](const json& limit) {
    json env = cpu_env();
    env["memory_limit_bytes"] = limit;
    return make_report(reps(), env);
  };
  const Report none = with_limit(nullptr), none2 = with_limit(nullptr),
               gib = with_limit(uint64_t{1} << 30), gib2 = with_limit(uint64_t{1} << 30);
  const Comparison c = compare_reports(std::vector<const Report*>{&none, &gib2}, gib, {});
  ASSERT_EQ(notes_with(c, "memory-limit").size(), 1u);
  EXPECT_EQ(notes_with(c, "memory-limit")[0].rfind(
                "note: --memory-limit differs: baseline none and 1.00 GiB, current 1.00 GiB;", 0),
            0u)
      << notes_with(c, "memory-limit")[0];
  const Comparison twice = compare_reports(std::vector<const Report*>{&none, &none2}, gib, {});
  ASSERT_EQ(notes_with(twice, "memory-limit").size(), 1u);
  EXPECT_EQ(notes_with(twice, "memory-limit")[0].rfind(
                "note: --memory-limit differs: baseline none, current 1.00 GiB;", 0),
            0u)
      << notes_with(twice, "memory-limit")[0];
}

// A `new` row that did not train says how it ended.
TEST(Compare, ANewRowThatFailedSaysHow) {
  RunResult oom = make_run({}, "tf32");
  oom.status = RunStatus::Oom;
  const Comparison r = cmp(make_report(reps()), make_report(join(reps(), {oom})));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].verdict, "new");
  EXPECT_EQ(r.rows[1].detail, "in the current file only; oom");
}

// A missing row is a skipped test case in the JUnit report without --strict too: nothing was
// judged for it.
TEST(CompareJunit, AMissingRowIsSkipped) {
  const Report b = make_report(join(reps(), reps(1.0, "tf32"))), c = make_report(reps());
  const Comparison r = cmp(b, c);
  ASSERT_EQ(r.rows[1].verdict, "missing");
  const std::string xml = format_compare_junit(r, "b", "c");
  EXPECT_EQ(xml_attr(xml, "testsuite", "skipped"), "1") << xml;
  EXPECT_NE(xml.find("<skipped message=\"missing: in the baseline only\"/>"), std::string::npos)
      << xml;
}

// A line break in an attribute is a character reference (a parser would read a space), in text
// it stays; a seeded CUDA-graphs run's test case names its seed and graphs.
TEST(CompareJunit, LineBreaksInAttributesAndSeededGraphsNames) {
  RunResult oom = make_run({});
  oom.status = RunStatus::Oom;
  oom.status_detail = "line1\nline2";
  const Report b = make_report({make_run(kBase)}), c = make_report({oom});  // outlive r
  const Comparison r = cmp(b, c);
  const std::string xml = format_compare_junit(r, "b", "c");
  EXPECT_NE(xml.find("message=\"status ok -&gt; oom: line1&#10;line2\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("detail: line1\nline2\n"), std::string::npos) << xml;

  std::vector<RunResult> seeded = reps(1.0, "fp32", "cuda");
  for (RunResult& s : seeded) {
    s.seed = 7;
    s.cuda_graphs = true;
  }
  const Report gb = make_report(seeded, gpu_env()), gc = make_report(seeded, gpu_env());
  const std::string g = format_compare_junit(cmp(gb, gc), "b", "c");
  EXPECT_EQ(xml_attr(g, "testcase", "name"), "fp32 cuda batch 32 seed 7 +graphs") << g;
}

// What regressed, in words, with the threshold it crossed: accuracy in points, a final loss
// against its threshold.
TEST(CompareMarkdown, AccuracyAndLossRegressionsSayByHowMuch) {
  std::vector<RunResult> cur = reps();
  for (RunResult& c : cur) {
    c.final_accuracy = 0.894;
    c.final_loss = 0.3;
  }
  CompareOptions o;
  o.loss_threshold = 0.1;
  const Comparison r = cmp(make_report(reps()), make_report(cur), o);
  ASSERT_EQ(r.rows[0].regressions, (std::vector<std::string>{"accuracy", "loss"}));
  const std::string md = format_compare_markdown(r, "b", "c");
  EXPECT_NE(md.find("**accuracy -0.60 pt (90.00% -&gt; 89.40%) beyond -0.5 pt; final loss "
                    "+20.000% (0.25 -&gt; 0.3) beyond +-10%**"),
            std::string::npos)
      << md;
}

// A side's repetitions are grouped by the file they came from (runs of one process): one
// baseline file of five repetitions against one current file is the bootstrap of one file a
// side, not of five files a side with the t interval of their medians.
TEST(Compare, RepetitionsAreGroupedByTheirFile) {
  const std::vector<RunResult> b = reps(),
                               c = reps(1.05, "fp32", "cpu", {1.0, 1.03, 0.97, 1.02, 0.98});
  const Comparison r = cmp(make_report(b), make_report(c));
  Runs rb(1), rc(1);
  for (const RunResult& x : b) rb[0].push_back(epoch_times(x));
  for (const RunResult& x : c) rc[0].push_back(epoch_times(x));
  const RatioEstimate e = hierarchical_median_ratio(rb, rc, kBootstrapResamples, kBootstrapSeed);
  ASSERT_TRUE(r.rows[0].time.valid);
  EXPECT_EQ(r.rows[0].time.ratio, e.ratio);
  EXPECT_EQ(r.rows[0].time.lo, e.lo);
  EXPECT_EQ(r.rows[0].time.hi, e.hi);
}

// Nothing matched: the summary counts the missing rows and the new ones, each its own.
TEST(Compare, NothingMatchedCountsMissingAndNewRows) {
  std::vector<RunResult> b = join(reps(), reps(1.0, "tf32")), c = reps();
  for (RunResult& r : b) r.batch_size = 64;
  const Comparison r = cmp(make_report(b), make_report(c));
  ASSERT_EQ(r.matched, 0);
  EXPECT_NE(format_compare_console(r).find("FAIL: nothing matched: no run of the current file has "
                                           "a counterpart in the baseline (2 row(s) missing, 1 "
                                           "new)"),
            std::string::npos)
      << format_compare_console(r);
}

// A spec's value too long for a line is cut to 60 characters in the row's detail.
TEST(Compare, ALongSpecValueIsCutInTheDifference) {
  const json a = {{"name", "m"}, {"note", std::string(100, 'a')}};
  json b = a;
  b["note"] = std::string(100, 'b');
  EXPECT_EQ(first_spec_difference(a, b),
            "note: \"" + std::string(56, 'a') + "... -> \"" + std::string(56, 'b') + "...");
  // `precisions` on one side only, beside a block on the other only: no difference either.
  const json with_precisions = {{"name", "m"}, {"precisions", {"fp32"}}};
  const json with_block = {{"name", "m"}, {"fp8", {{"margin", 0}}}};
  EXPECT_EQ(first_spec_difference(with_precisions, with_block), "");
}

// Without names, several baseline files are "baseline N" from 1 in a message; with names, the
// current file is the name after the baselines'.
TEST(Compare, MessagesNameTheFilesInOrder) {
  std::vector<RunResult> twice = reps();
  twice[1].repetition = 1;
  const Report good = make_report(reps()), bad = make_report(twice);
  try {
    compare_reports({&good, &bad}, make_report(reps()), {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("baseline 2: runs[0] and runs[1]"), std::string::npos)
        << e.what();
  }
  try {
    compare_reports({&good, &good}, bad, {}, {"a.json", "b.json", "c.json"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: runs[0] and runs[1]"), std::string::npos)
        << e.what();
  }
}

// The Markdown names the environment difference above the tables, counts such rows apart (they
// block --strict) and, under --strict, with the skipped ones; the JSON marks the row blocking.
TEST(CompareMarkdown, EnvironmentDifferencesAreNamedAndStrictSaysSo) {
  const Report on_a = make_report(reps(), cpu_env("A")), on_b = make_report(reps(), cpu_env("B"));
  const Comparison loose = cmp(on_a, on_b);
  const std::string md = format_compare_markdown(loose, "b", "c");
  EXPECT_NE(md.find("\n\nEnvironment differs: cpu.name: A -&gt; B\n\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("under --strict"), std::string::npos) << md;
  // The counts add up to the verdict line's: the row judged on B blocks --strict.
  EXPECT_NE(md.find("(1 inconclusive, missing or environment-changed row(s); --strict would "
                    "fail)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("0 other(s) inconclusive, missing or spec-changed, 1 judged in a different "
                    "environment (--strict fails it)."),
            std::string::npos)
      << md;
  EXPECT_EQ(compare_to_json(loose)["rows"][0]["blocking"], true);
  EXPECT_EQ(compare_to_json(cmp(on_a, on_a))["rows"][0]["blocking"], false);
  CompareOptions strict;
  strict.strict = true;
  const std::string s = format_compare_markdown(cmp(on_a, on_b, strict), "b", "c");
  EXPECT_NE(s.find("1 other(s) inconclusive, missing or spec-changed (or, under --strict, "
                   "environment-changed)."),
            std::string::npos)
      << s;
}

// The console and Markdown tables show a seeded run's seed in its mode, the accuracy and final
// loss cells the current's values, and the JSON the seed; the JUnit <system-out> holds the
// memory's change.
TEST(Compare, CellsShowTheCurrentsValuesAndTheSeed) {
  std::vector<RunResult> cur = reps();
  for (RunResult& c : cur) {
    c.final_accuracy = 0.95;
    c.final_loss = 0.2;
    c.seed = 7;
  }
  std::vector<RunResult> base = reps();
  for (RunResult& b : base) b.seed = 7;
  const Report b = make_report(base), c = make_report(cur);  // outlive r: its rows point in
  const Comparison r = cmp(b, c);
  const std::string md = format_compare_markdown(r, "b", "c");
  EXPECT_NE(md.find("| m | fp32 | cpu seed 7 | 32 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| +5.00 pt (95.00%) | -20.000% (0.2) |"), std::string::npos) << md;
  EXPECT_EQ(compare_to_json(r)["rows"][0]["seed"], 7);
  const std::string xml = format_compare_junit(r, "b", "c");
  EXPECT_NE(xml.find("training memory: +0.00% (976.6 KiB)\n"), std::string::npos) << xml;
}

// XML 1.0 cannot carry U+FFFE: it is replaced, as a control character is. A tab and a carriage
// return in an attribute are character references; a status that changed with no detail says
// no more than the statuses.
TEST(CompareJunit, TabsReturnsAndNonCharactersAreEscaped) {
  RunResult b = make_run(kBase, "fp32", "m\xEF\xBF\xBEx");
  RunResult c = b;
  c.status = RunStatus::Oom;
  c.status_detail = "a\tb\rc";
  std::string xml = format_compare_junit(cmp(make_report({b}), make_report({c})), "b", "c");
  // The noncharacter is one character: one replacement.
  EXPECT_EQ(xml_attr(xml, "testcase", "classname"), "mpbench.m\xEF\xBF\xBDx") << xml;
  EXPECT_EQ(xml.find("\xEF\xBF\xBE"), std::string::npos) << xml;
  EXPECT_NE(xml.find("message=\"status ok -&gt; oom: a&#9;b&#13;c\""), std::string::npos) << xml;
  EXPECT_EQ(xml.find('\r'), std::string::npos) << xml;
  c.status_detail.clear();
  xml = format_compare_junit(cmp(make_report({b}), make_report({c})), "b", "c");
  EXPECT_NE(xml.find("message=\"status ok -&gt; oom\""), std::string::npos) << xml;
}

// Of several failed repetitions the first is the side's status and detail; three repetitions a
// side, the fewest asked for, are judged; a change of a million percent is in exponent form.
TEST(Compare, TheFirstFailureTheMinimumRepetitionsAndAMillionPercent) {
  std::vector<RunResult> cur = reps();
  cur[1].status = RunStatus::Oom;
  cur[1].status_detail = "needs 3 GiB";
  cur[3].status = RunStatus::Diverged;
  cur[3].status_detail = "loss became non-finite in epoch 2";
  for (RunResult* r : {&cur[1], &cur[3]}) r->epochs.clear();
  Comparison r = cmp(make_report(reps()), make_report(cur));
  EXPECT_EQ(r.rows[0].verdict, "oom");
  EXPECT_EQ(r.rows[0].detail, "2 of 5 repetitions: needs 3 GiB");

  std::vector<RunResult> three = reps();
  three.resize(3);
  r = cmp(make_report(three), make_report(reps(1.3)));
  EXPECT_EQ(r.rows[0].n_baseline, 3u);
  EXPECT_EQ(r.rows[0].verdict, "slower");

  std::vector<RunResult> base = reps(), huge = reps();
  for (RunResult& b : base) b.final_loss = 1.0;
  for (RunResult& h : huge) h.final_loss = 10001.0;  // +1,000,000%
  const std::string console = format_compare_console(cmp(make_report(base), make_report(huge)));
  EXPECT_NE(console.find("+1e+06% (1e+04)"), std::string::npos) << console;
}

// Busy repetitions left out of time, at the edges of what the row and the note say: a busy
// baseline's alone are counted in the note; a single busy repetition is named in the singular;
// a side short only of repetitions (not of quiet ones) is told to repeat, not to find a quiet
// runner, whatever the other side's busy repetitions.
TEST(Compare, BusyRepetitionsLeftOutAtTheEdges) {
  auto loaded = [](std::vector<RunResult> runs, size_t from) {
    for (size_t i = from; i < runs.size(); ++i) {
      RunResult& r = runs[i];
      r.host_load = test::host_load(2, 2, 1.1, 0.9);
    }
    return runs;
  };
  const Comparison base = cmp(make_report(loaded(reps(), 4)), make_report(reps()));
  ASSERT_EQ(base.rows[0].busy_baseline, 1u);
  const std::vector<std::string> note = notes_with(base, "left out of time");
  ASSERT_EQ(note.size(), 1u);
  EXPECT_EQ(note[0].rfind("note: 1 of 10 repetitions of 1 row(s) left out of time", 0), 0u)
      << note[0];

  const Comparison one =
      cmp(make_report({make_run(kBase)}), make_report(loaded({make_run(kBase)}, 0)));
  EXPECT_EQ(one.rows[0].detail,
            "1 vs 0 repetitions; time needs 3 a side (run again where nothing else holds the "
            "CPUs); left out of time, measured on a busy machine: 1 of 1 current repetition");

  const std::vector<RunResult> two = {reps()[0], reps()[1]};
  const Comparison short_base = cmp(make_report(two), make_report(loaded(reps(), 4)));
  EXPECT_EQ(short_base.rows[0].detail,
            "2 vs 4 repetitions; time needs 3 a side (run the baseline with --repeat 5, or give "
            "several --baseline files); left out of time, measured on a busy machine: 1 of 5 "
            "current repetitions");
}

// ---- through the executable -------------------------------------------------------------------

using Result = test::ShellResult;

class CompareCli : public test::CliTest {
 protected:
  using CliTest::write;
  std::string write(const std::string& name, const Report& r) {
    return write(name, to_json(r).dump(2));
  }
};

TEST_F(CompareCli, RegressionExitsOneAndWritesMarkdownAndJson) {
  const std::string b = write("b.json", make_report(reps()));
  const std::string c = write("c.json", make_report(reps(1.3)));
  const std::string md = (dir_ / "cmp.md").string(), js = (dir_ / "cmp.json").string();
  const Result r = run("compare " + b + " " + c + " --md " + md + " --json " + js);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("slower"), std::string::npos) << r.out;
  EXPECT_NE(test::read_file(md).find("| slower | **time** |"), std::string::npos);
  const json j = json::parse(test::read_file(js));
  EXPECT_EQ(j["rows"][0]["verdict"], "slower");
  EXPECT_EQ(j["exit_code"], 1);

  // A generous threshold lets the same files pass.
  EXPECT_EQ(run("compare " + b + " " + c + " --time-threshold 50%").code, 0);
  EXPECT_EQ(run("compare " + b + " " + c + " --time-threshold 50").code, 0);
}

// An output that cannot be written (a full disk) does not cost the others: the JUnit report
// after it is still written for CI to read, and the command fails (exit 3).
TEST_F(CompareCli, AFailedOutputDoesNotCostTheOthers) {
  const std::string b = write("b.json", make_report(reps()));
  const std::string c = write("c.json", make_report(reps(1.3)));
  const std::string md = (dir_ / "cmp.md").string(), xml = (dir_ / "cmp.xml").string();
  const Result r =
      run("compare " + b + " " + c + " --md " + md + " --json /dev/full --junit " + xml);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("/dev/full"), std::string::npos) << r.err;
  EXPECT_NE(test::read_file(md).find("slower"), std::string::npos);
  EXPECT_NE(test::read_file(xml).find("<failure"), std::string::npos);
}

TEST_F(CompareCli, ImprovementAndStrictEnvDifference) {
  const std::string b = write("b.json", make_report(reps(), cpu_env("A")));
  const std::string faster = write("f.json", make_report(reps(0.5), cpu_env("A")));
  Result r = run("compare " + b + " " + faster);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("faster"), std::string::npos) << r.out;

  const std::string other = write("o.json", make_report(reps(), cpu_env("B")));
  r = run("compare " + b + " " + other);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cpu.name: A -> B"), std::string::npos) << r.out;
  EXPECT_EQ(run("compare " + b + " " + other + " --strict").code, 4);
}

// --baseline, repeated or as a quoted glob: the files are repetitions of one baseline.
// One baseline file holds no noise between processes: the console and Markdown say so, the
// JSON counts the files; several files (the README's recipe) need no note.
TEST_F(CompareCli, OneBaselineFileIsNoted) {
  const std::string b1 = write("b1.json", make_report(reps()));
  const std::string b2 = write("b2.json", make_report(reps(1.01)));
  const std::string c = write("c.json", make_report(reps()));
  const std::string md = (dir_ / "c.md").string(), js = (dir_ / "c.json.out").string();
  Result r = run("compare " + b1 + " " + c + " --md " + md + " --json " + js);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: one baseline file: the time interval holds the noise between its "
                       "repetitions, not between processes"),
            std::string::npos)
      << r.out;
  EXPECT_NE(test::read_file(md).find("note: one baseline file"), std::string::npos);
  EXPECT_EQ(json::parse(test::read_file(js))["baseline_files"], 1);
  r = run("compare --baseline " + b1 + " --baseline " + b2 + " " + c + " --json " + js);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("note: one baseline file"), std::string::npos) << r.out;
  EXPECT_EQ(json::parse(test::read_file(js))["baseline_files"], 2);
}

// A mode out of memory under one --memory-limit may fit under another: compare was silent on a
// limit that differed (the run's JSON did not record it). A file from before it was recorded is
// left out; equal limits need no note.
TEST(Compare, ADifferentMemoryLimitIsNoted) {
  auto with_limit = [](const json& limit) {
    json env = cpu_env();
    if (!limit.is_string()) env["memory_limit_bytes"] = limit;  // a string: not recorded
    return make_report(reps(), env);
  };
  const Report none = with_limit(nullptr), gib = with_limit(uint64_t{1} << 30),
               old = with_limit("old file"), gib2 = with_limit(uint64_t{1} << 30);
  auto notes = [](const Comparison& c) {
    std::string all;
    for (const std::string& n : c.notes) all += n + "\n";
    return all;
  };
  const Comparison c = compare_reports(std::vector<const Report*>{&none, &old}, gib, {});
  EXPECT_NE(notes(c).find("note: --memory-limit differs: baseline none, current 1.00 GiB; a mode "
                          "out of memory under one limit may fit under the other"),
            std::string::npos)
      << notes(c);
  EXPECT_NE(format_compare_console(c).find("note: --memory-limit differs"), std::string::npos);
  EXPECT_NE(format_compare_markdown(c, "b", "c").find("note: --memory-limit differs"),
            std::string::npos);
  for (const Report* b : {&gib2, &old})
    EXPECT_EQ(notes(compare_reports(*b, gib, {})).find("memory-limit"), std::string::npos)
        << notes(compare_reports(*b, gib, {}));
}

// The run's JSON records the limit it ran under, and compare reads it.
TEST_F(CompareCli, RunRecordsItsMemoryLimit) {
  const std::string spec = write("small.json", test::kSmallSpec);
  const std::string a = (dir_ / "a.json").string(), b = (dir_ / "b.json").string();
  const std::string run_cmd = "run " + spec + " --device reference --precisions fp32 --quiet ";
  ASSERT_EQ(run(run_cmd + "--json " + a).code, 0);
  ASSERT_EQ(run(run_cmd + "--memory-limit 512MiB --json " + b).code, 0);
  EXPECT_TRUE(json::parse(test::read_file(a))["env"]["memory_limit_bytes"].is_null());
  EXPECT_EQ(json::parse(test::read_file(b))["env"]["memory_limit_bytes"], 512u << 20);
  const Result r = run("compare " + a + " " + b);
  EXPECT_NE(r.out.find("note: --memory-limit differs: baseline none, current 512.0 MiB"),
            std::string::npos)
      << r.out;
}

// A fraction where a percentage is asked for (the JSON holds 0.1 for 10%) is warned of: a gate
// 100 times as tight as meant.
TEST_F(CompareCli, AFractionForAPercentageIsWarnedOf) {
  const std::string b = write("b.json", make_report(reps())),
                    c = write("c.json", make_report(reps()));
  Result r = run("compare " + b + " " + c + " --time-threshold 0.1");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --time-threshold 0.1 is 0.1%, a percentage; for 10% give 10 or "
                       "10%"),
            std::string::npos)
      << r.err;
  r = run("compare " + b + " " + c + " --time-threshold 0.1% --memory-threshold 5");
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  r = run("compare " + b + " " + c + " --time-threshold 1");  // 1%: no fraction
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  // Plain decimals: a leading zero is refused as in every numeric option.
  expect_refused(run("compare " + b + " " + c + " --time-threshold 05"),
                 "--time-threshold: expected a non-negative decimal percentage");
  // Bad input is one line alone: the warning came before it.
  expect_refused(run("compare " + b + " missing.json --loss-threshold 0.1"),
                 "missing.json: cannot read result file");
}

// --loss-threshold is a percentage like the time and memory ones: a final loss 10% higher fails
// at 5 and passes at 20.
TEST_F(CompareCli, TheLossThresholdIsAPercentage) {
  std::vector<RunResult> higher = reps();
  for (RunResult& r : higher) r.final_loss *= 1.1;
  const std::string b = write("b.json", make_report(reps())),
                    c = write("c.json", make_report(higher));
  const std::string js = (dir_ / "l.json").string();
  EXPECT_EQ(run("compare " + b + " " + c + " --loss-threshold 5 --json " + js).code, 1);
  EXPECT_EQ(json::parse(test::read_file(js))["rows"][0]["regressions"], json::array({"loss"}));
  EXPECT_EQ(run("compare " + b + " " + c + " --loss-threshold 20").code, 0);
}

TEST_F(CompareCli, SeveralBaselineFiles) {
  std::vector<std::string> names;
  int i = 0;
  for (const RunResult& r : reps()) {
    RunResult one = r;
    one.repetition.reset();
    names.push_back(write(fmt::format("base-{}.json", ++i), make_report({one})));
  }
  const std::string cur = write("cur.json", make_report(reps(1.3)));
  std::string args;
  for (const std::string& n : names) args += " --baseline " + n;
  Result r = run("compare" + args + " " + cur);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("slower"), std::string::npos) << r.out;
  r = run("compare --baseline '" + (dir_ / "base-*.json").string() + "' " + cur + " --json " +
          (dir_ / "g.json").string());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(json::parse(
                test::read_file((dir_ / "g.json").string()))["rows"][0]["repetitions"]["baseline"],
            5);
  for (const std::string& bad :
       {" --baseline '" + (dir_ / "none-*.json").string() + "' " + cur,
        " --baseline " + names[0] + " " + names[1] + " " + cur,
        " --baseline " + names[0] + " --baseline " + names[0] + " " + cur,
        // The current file among the baselines (a glob that takes it too): pooled into its own
        // baseline, it would draw the ratios towards 1.
        " --baseline '" + (dir_ / "*.json").string() + "' " + cur}) {
    r = run("compare" + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_NE(r.err.find("current file among the --baseline files"), std::string::npos) << r.err;
  // Against itself alone it is the method's noise floor, and allowed, but said: a CI job whose
  // two sides name one file can never fail on time. Through a link too.
  for (const std::string& base : {cur, (dir_ / "cur-link.json").string()}) {
    if (base != cur) fs::create_symlink(cur, base);
    r = run("compare --baseline " + base + " " + cur);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "mpbench: warning: the baseline and the current are one file (" + cur +
                         "): every time row is judged against itself\n");
  }
  EXPECT_EQ(run("compare --baseline " + names[0] + " " + cur).err, "");
  // A file whose name has glob characters is that file, not a pattern.
  const std::string bracket = (dir_ / "run[1].json").string();
  fs::copy_file(names[0], bracket);
  r = run("compare --baseline '" + bracket + "' " + cur);
  EXPECT_EQ(r.code, run("compare --baseline " + names[0] + " " + cur).code) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(CompareCli, PairedFilesAfterBaselineAndCurrent) {
  // A job that ran the two builds in turn: b-1, c-1, b-2, c-2, ...; its runner slowed between.
  const std::vector<Report> b = side_files(kStates), same = side_files(kStates),
                            slow = side_files(kStates, 1.15);
  for (size_t i = 0; i < b.size(); ++i) {
    write(fmt::format("b-{}.json", i + 1), b[i]);
    write(fmt::format("c-{}.json", i + 1), same[i]);
    write(fmt::format("s-{}.json", i + 1), slow[i]);
  }
  const std::string d = dir_.string() + "/", js = d + "cmp.json";
  Result r = run("compare --paired --baseline '" + d + "b-*.json' --current '" + d +
                 "c-*.json' --json " + js);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const json j = json::parse(test::read_file(js));
  EXPECT_EQ(j["rows"][0]["verdict"], "same");
  EXPECT_EQ(j["rows"][0]["pairs"], 6);
  EXPECT_EQ(j["current_files"], 6);
  r = run("compare --paired --baseline '" + d + "b-*.json' --current '" + d + "s-*.json'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  // Unpaired, the runner's two states hide the regression.
  r = run("compare --baseline '" + d + "b-*.json' --current '" + d + "s-*.json'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("inconclusive"), std::string::npos) << r.out;
  // Repeated --current files, each its own.
  r = run("compare --baseline " + d + "b-1.json --current " + d + "c-1.json --current " + d +
          "c-2.json");
  EXPECT_EQ(r.code, 0) << r.err;
  struct Case {
    std::string args, err;
  };
  for (const Case& c : std::vector<Case>{
           {"--paired --baseline '" + d + "b-*.json' --current " + d + "c-1.json",
            "mpbench: compare --paired: 6 baseline files and 1 current file; each pair is a "
            "baseline file and the current file run beside it\n"},
           {"--current " + d + "c-1.json",
            "mpbench: compare: --current needs --baseline beside it (the files of each side)\n"},
           {"--baseline " + d + "b-1.json --current " + d + "c-1.json " + d + "c-2.json",
            "mpbench: compare: with --current, give every current file after --current (got 1 "
            "more)\n"},
           {"--baseline " + d + "b-1.json " + d + "c-1.json " + d + "c-2.json",
            "mpbench: compare: with --baseline, give the current file alone (got 2 files); "
            "several go each after --current\n"},
           {"--baseline " + d + "b-1.json --current " + d + "c-1.json --current " + d + "c-1.json",
            "mpbench: --current: " + d + "c-1.json is given twice\n"},
           {"--baseline " + d + "b-1.json --current " + d + "b-1.json --current " + d + "c-1.json",
            "mpbench: compare: a current file among the --baseline files: " + d +
                "b-1.json is given twice\n"},
           {"--baseline " + d + "b-1.json --current '" + d + "none-*.json'",
            "mpbench: --current: no file matches '" + d + "none-*.json'\n"},
       }) {
    r = run("compare " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.out;
    EXPECT_EQ(r.err, c.err) << c.args;
  }
}

TEST_F(CompareCli, MalformedInputIsOneLineExitTwo) {
  const std::string good = write("good.json", make_report({make_run(kBase)}));
  json wrong_schema = to_json(make_report({make_run(kBase)}));
  wrong_schema["schema_version"] = 2;
  json no_model = to_json(make_report({make_run(kBase)}));
  no_model["runs"][0].erase("model");
  std::string overflow = to_json(make_report({make_run(kBase)})).dump();
  overflow.replace(overflow.find("\"batch_size\":"), 13, "\"batch_size\":5.3e308,\"x\":");
  json negative = to_json(make_report({make_run(kBase)}));
  negative["runs"][0]["epochs"][1]["time_ms"] = -3.0;
  // A run that trained: no epoch of zero time, and one epoch at least.
  json zero = to_json(make_report({make_run(kBase)}));
  zero["runs"][0]["epochs"][0]["time_ms"] = 0.0;
  json no_epochs = to_json(make_report({make_run(kBase)}));
  no_epochs["runs"][0]["epochs"] = json::array();
  // ... and its batch size (compare keys runs by it).
  json batch0 = to_json(make_report({make_run(kBase)}));
  batch0["runs"][0]["batch_size"] = 0;
  json no_batch = to_json(make_report({make_run(kBase)}));
  no_batch["runs"][0].erase("batch_size");
  // Past int64: an integer mpbench cannot hold, not the negative number it would wrap to.
  json huge_batch = to_json(make_report({make_run(kBase)}));
  huge_batch["runs"][0]["batch_size"] = uint64_t{18446744073709551615u};
  json gpu = to_json(make_report({make_run(kBase)}));
  gpu["runs"][0]["device"] = "gpu";
  // Two specs of one model and batch: which one its runs trained from is not known.
  Report two_specs_report = make_report({make_run(kBase)});
  two_specs_report.specs = {{{"name", "m"}, {"train", {{"batch_size", 32}}}},
                            {{"name", "m"}, {"train", {{"batch_size", 32}, {"epochs", 9}}}}};
  const json two_specs = to_json(two_specs_report);
  struct Case {
    std::string what, args, fragment;
  };
  const std::vector<Case> cases = {
      {"not json", good + " " + write("bad.json", "{\"runs\": [1,"), "bad.json"},
      {"wrong schema", good + " " + write("v2.json", wrong_schema.dump()), "schema_version"},
      {"missing field", write("nm.json", no_model.dump()) + " " + good, "runs[0].model"},
      {"missing file", good + " " + (dir_ / "nope.json").string(), "nope.json"},
      {"one file only", good, "current"},
      {"three files", good + " " + good + " " + good,
       "compare takes BASELINE CURRENT (or CURRENT alone with --baseline), got 3 files"},
      {"bad threshold", good + " " + good + " --time-threshold fast", "--time-threshold"},
      {"negative threshold", good + " " + good + " --accuracy-threshold -1",
       "--accuracy-threshold"},
      {"md into missing dir", good + " " + good + " --md " + (dir_ / "x" / "y.md").string(),
       "--md"},
      // Used to be "internal error", exit 3.
      {"number beyond double", good + " " + write("big.json", overflow),
       "big.json:1:116: JSON error: number overflow parsing '5.3e308'"},
      {"negative time", good + " " + write("neg.json", negative.dump()),
       "neg.json: runs[0].epochs[1].time_ms: expected a number > 0 and <= 1e+12"},
      {"zero time", good + " " + write("zero.json", zero.dump()),
       "zero.json: runs[0].epochs[0].time_ms: expected a number > 0"},
      {"no epochs", good + " " + write("ne.json", no_epochs.dump()),
       "ne.json: runs[0].epochs: expected the epochs of a run that trained"},
      {"batch 0", good + " " + write("b0.json", batch0.dump()),
       "b0.json: runs[0].batch_size: expected the batch size of a run that trained (1 or more)"},
      {"no batch", good + " " + write("nb.json", no_batch.dump()),
       "nb.json: runs[0].batch_size: expected the batch size"},
      {"batch past int64", good + " " + write("hb.json", huge_batch.dump()),
       "hb.json: runs[0].batch_size: expected an integer\n"},
      {"a device no run trains on", good + " " + write("gpu.json", gpu.dump()),
       "gpu.json: runs[0].device: expected \"cuda\", \"cpu\" or \"reference\""},
      {"two specs of one model and batch", good + " " + write("ts.json", two_specs.dump()),
       "ts.json: specs[1]: expected one spec per model and batch size (specs[0] has the same)"},
      {"output onto an input", good + " " + good + " --json " + good, "is the input"},
      {"empty output path", good + " " + good + " --md ''", "--md"},
      {"a profile file",
       good + " " + write("prof.json", R"({"spec": {"name": "m"}, "profiles": []})"),
       "prof.json: a profile file (mpbench profile --json), not a result file"},
  };
  for (const Case& c : cases) {
    const Result r = run("compare " + c.args);
    EXPECT_EQ(r.code, 2) << c.what << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.what << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.what << ": " << r.err;
  }
}

TEST_F(CompareCli, JunitFile) {
  const std::string b = write("b.json", make_report(reps()));
  const std::string c = write("c.json", make_report(reps(1.3)));
  const std::string junit = (dir_ / "gate.xml").string();
  Result r = run("compare " + b + " " + c + " --junit " + junit);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const std::string xml = test::read_file(junit);
  EXPECT_EQ(count_of(xml, "<testcase "), 1u) << xml;
  EXPECT_EQ(count_of(xml, "<failure "), 1u) << xml;
  EXPECT_EQ(xml_attr(xml, "property", "value"), b);  // the baseline, first property
  // No temporary file left beside it.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();

  for (const std::string& bad :
       {" --junit " + (dir_ / "none" / "g.xml").string(), " --junit " + c,
        std::string(" --junit ''"), " --junit " + junit + " --md " + junit}) {
    r = run("compare " + b + " " + c + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--junit"), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << ": " << r.err;
  }
  // Refused before anything was written: the input is intact.
  EXPECT_TRUE(json::accept(test::read_file(c)));
}

TEST_F(CompareCli, HelpStatesTheMethod) {
  const Result r = run("compare --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("hierarchical"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("repetitions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--strict"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mpbench
