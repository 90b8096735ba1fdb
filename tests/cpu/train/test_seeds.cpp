// `run --seeds`: the statistics (mean and std, Student's t quantile, the paired interval), the
// training seed (the same seed trains the same run; another changes the initialisation and the
// batch order, not the data), and the seed summary of a report.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/results.h"
#include "train/statistics.h"
#include "train/trainer.h"

namespace mpbench {
namespace {

using nlohmann::json;

TEST(SeedStatistics, MeanStdAndTQuantiles) {
  const MeanStd m = mean_std({1.0, 2.0, 3.0, 4.0});
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  EXPECT_NEAR(m.std, std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_EQ(m.n, 4);
  EXPECT_EQ(mean_std({7.0}).std, 0.0);
  EXPECT_NEAR(student_t_975(1), 12.706, 1e-3);
  EXPECT_NEAR(student_t_975(4), 2.776, 1e-3);
  EXPECT_NEAR(student_t_975(9), 2.262, 1e-3);
  EXPECT_NEAR(student_t_975(31), 2.039513, 1e-4);  // past the table: as the comment promises
  EXPECT_NEAR(student_t_975(100), 1.9840, 2e-4);
  EXPECT_NEAR(student_t_975(100000), 1.95998, 1e-4);
  EXPECT_THROW(student_t_975(0), Error);
}

// sd 0.1, half-width 0.1: t(n-1) 0.1 / sqrt(n) is 0.105 at 6 rounds (t(5) 2.5706), 0.0925 at 7.
TEST(SeedStatistics, RoundsForAHalfWidth) {
  EXPECT_EQ(rounds_for_half_width(0.1, 0.1, 2, 200), 7);
  EXPECT_EQ(rounds_for_half_width(0.1, 0.1, 9, 200), 9);  // already narrow enough at `from`
  EXPECT_EQ(rounds_for_half_width(0.1, 0.1, 2, 6), 0);    // not within `most`
  EXPECT_EQ(rounds_for_half_width(0.0, 0.1, 2, 200), 0);
  EXPECT_EQ(rounds_for_half_width(0.1, 0.0, 2, 200), 0);
  // Trimmed from 10 rounds: 2 a side of 10, t(5) 2.5706 sqrt(9 / 30) = 1.408 sd, against
  // untrimmed 9's t(8) 2.3060 / 3 = 0.769 sd (the Winsorized sd of the same rounds is the
  // smaller: about 0.62 of the sd on normal noise).
  EXPECT_EQ(trimmed_rounds(9), 0);
  EXPECT_EQ(trimmed_rounds(10), 2);
  EXPECT_EQ(trimmed_rounds(24), 4);
  EXPECT_NEAR(t_half_width(1.0, 9), 0.7687, 1e-4);
  EXPECT_NEAR(t_half_width(1.0, 10), 1.4080, 1e-4);
  EXPECT_EQ(rounds_for_half_width(1.0, 0.8, 2, 200), 9);
  EXPECT_EQ(rounds_for_half_width(1.0, 0.75, 2, 200), 19);  // 18: 0.790
  // Untrimmed: t(9) 2.2622 / sqrt(10) = 0.7154 at 10.
  EXPECT_NEAR(t_half_width(1.0, 10, false), 0.7154, 1e-4);
  EXPECT_EQ(rounds_for_half_width(1.0, 0.75, 2, 200, false), 10);
  // Past the t table (h - 1 > 30), by the expansion: the first n within it.
  const int n = rounds_for_half_width(0.2, 0.07, 2, 200);
  EXPECT_GT(n, 52);
  EXPECT_LE(t_half_width(0.2, n), 0.07);
  EXPECT_GT(t_half_width(0.2, n - 1), 0.07);
}

// One stray round in twelve (pair ratios 1.0 but one 2.5x): trimmed, the interval keeps to the
// others' spread; the plain t interval of the logs spans 0.912-1.277.
TEST(SeedStatistics, PairedIntervalTrimsAStrayRoundFromTenRounds) {
  std::vector<PairedRound> rounds;
  const std::vector<double> spread = {1.0,  1.02, 0.98, 1.01, 0.99, 1.0,
                                      1.03, 0.97, 1.0,  1.01, 0.99};
  for (double f : spread) rounds.push_back({{10.0}, {10.0 * f}});
  rounds.push_back({{10.0}, {25.0}});
  const RatioEstimate est = paired_median_ratio(rounds, 2000, kBootstrapSeed);
  EXPECT_NEAR(est.ratio, 1.0, 1e-12);
  EXPECT_GT(est.lo, 0.97);
  EXPECT_LT(est.hi, 1.04);
  EXPECT_LT(est.log_mean, 0.01);
  // Nine rounds, not trimmed: the stray one is in the mean and the spread.
  rounds.erase(rounds.begin(), rounds.begin() + 3);
  const RatioEstimate nine = paired_median_ratio(rounds, 2000, kBootstrapSeed);
  EXPECT_GT(nine.hi, 1.2);
  EXPECT_NEAR(nine.log_mean,
              (std::log(25.0 / 10.0) + std::log(1.01 * 0.99 * 1.03 * 0.97 * 1.01 * 0.99)) / 9,
              1e-9);
}

// Differences 0.01, 0.03, 0.02, 0.02, 0.02: mean 0.02, sd sqrt(0.0002 / 4), t(4) 2.7764.
TEST(SeedStatistics, PairedDeltaIsATIntervalOnTheDifferences) {
  const std::vector<double> fp32 = {0.90, 0.91, 0.92, 0.93, 0.94};
  const std::vector<double> bf16 = {0.91, 0.94, 0.94, 0.95, 0.96};
  const PairedDelta d = paired_delta(fp32, bf16);
  const double sd = std::sqrt(0.0002 / 4), half = 2.7764 * sd / std::sqrt(5.0);
  EXPECT_NEAR(d.mean, 0.02, 1e-12);
  EXPECT_NEAR(d.ci95_low, 0.02 - half, 1e-4 * half);
  EXPECT_NEAR(d.ci95_high, 0.02 + half, 1e-4 * half);
  EXPECT_EQ(d.n, 5);
  EXPECT_THROW(paired_delta({0.5}, {0.6}), Error);
  EXPECT_THROW(paired_delta({0.5, 0.6}, {0.6}), Error);
}

TEST(TrainingSeed, SameSeedSameRunOtherSeedOtherInitAndOrder) {
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  spec.train.epochs = 2;
  const Dataset data = make_dataset(spec);
  auto be = make_reference_backend();
  auto run = [&](std::optional<uint64_t> seed) {
    TrainOptions o;
    o.seed = seed;
    return train_and_measure(spec, data, Precision::FP32, *be, o);
  };
  const RunResult a = run(3), b = run(3), c = run(4), plain = run(std::nullopt);
  ASSERT_EQ(a.status, RunStatus::Ok);
  ASSERT_EQ(a.steps.size(), c.steps.size());
  EXPECT_EQ(a.seed, std::optional<uint64_t>(3));
  EXPECT_FALSE(plain.seed.has_value());
  for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << i;
  EXPECT_NE(a.steps[0].loss, c.steps[0].loss);      // another initialisation
  EXPECT_NE(a.steps[0].loss, plain.steps[0].loss);  // and not data.seed's
  EXPECT_GT(c.final_accuracy, 0.8);
  const json ja = to_json(a);
  EXPECT_EQ(ja["seed"], 3);
  EXPECT_EQ(run_from_json(ja).seed, std::optional<uint64_t>(3));
  EXPECT_FALSE(to_json(plain).contains("seed"));
}

// With lr 0 the parameters never move, so a step's loss is its batch's: each epoch's losses are
// the same batches' in the order the epoch took them. With a seed the two epochs' orders
// differ (and are permutations of one another); without one, they are the same.
TEST(TrainingSeed, EachEpochTakesTheSameBatchesInItsOwnOrder) {
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  spec.train.epochs = 2;
  spec.train.warmup_steps = 0;
  spec.train.optimizer.lr = 0;
  const Dataset data = make_dataset(spec);
  auto be = make_reference_backend();
  for (const std::optional<uint64_t> seed :
       {std::optional<uint64_t>(7), std::optional<uint64_t>()}) {
    TrainOptions o;
    o.seed = seed;
    const RunResult r = train_and_measure(spec, data, Precision::FP32, *be, o);
    ASSERT_EQ(r.status, RunStatus::Ok);
    const size_t n = r.steps.size() / 2;
    std::vector<double> e1, e2;
    for (size_t i = 0; i < n; ++i) {
      e1.push_back(r.steps[i].loss);
      e2.push_back(r.steps[n + i].loss);
    }
    EXPECT_EQ(e1 != e2, seed.has_value());
    std::sort(e1.begin(), e1.end());
    std::sort(e2.begin(), e2.end());
    EXPECT_EQ(e1, e2);
  }
}

RunResult seeded(const char* precision, uint64_t seed, double accuracy,
                 RunStatus status = RunStatus::Ok) {
  RunResult r;
  r.model = "m";
  r.device = "cpu";
  r.precision = precision;
  r.batch_size = 32;
  r.seed = seed;
  r.final_accuracy = accuracy;
  r.status = status;
  return r;
}

TEST(SeedSummary, PerModeMeanStdAndTheDeltaPairedBySeed) {
  const std::vector<RunResult> runs = {
      seeded("fp32", 1, 0.90),
      seeded("fp32", 2, 0.92),
      seeded("fp32", 3, 0.94),
      seeded("amp_bf16", 3, 0.93),
      seeded("amp_bf16", 1, 0.90),
      seeded("amp_bf16", 2, 0.91),
      seeded("tf32", 1, 0.5, RunStatus::Diverged),
      seeded("tf32", 2, 0.90),
  };
  const auto s = seed_summaries(runs);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].precision, "fp32");
  EXPECT_NEAR(s[0].accuracy_mean, 0.92, 1e-12);
  EXPECT_NEAR(s[0].accuracy_std, 0.02, 1e-12);
  EXPECT_FALSE(s[0].accuracy_delta_vs_fp32.has_value());
  EXPECT_EQ(s[1].precision, "amp_bf16");
  ASSERT_TRUE(s[1].accuracy_delta_vs_fp32.has_value());
  // Paired by seed: 0.00, -0.01, -0.01, whatever the order the runs came in.
  EXPECT_NEAR(s[1].accuracy_delta_vs_fp32->mean, -0.02 / 3, 1e-12);
  EXPECT_EQ(s[1].accuracy_delta_vs_fp32->n, 3);
  // tf32: one seed diverged, so one pair is left, too few for an interval.
  EXPECT_EQ(s[2].seeds, 1);
  EXPECT_FALSE(s[2].accuracy_delta_vs_fp32.has_value());
  Report rep;
  rep.runs = runs;
  const json j = to_json(rep);
  ASSERT_TRUE(j.contains("seed_summary"));
  EXPECT_EQ(j["seed_summary"].size(), 3u);
  EXPECT_TRUE(j["seed_summary"][0]["accuracy_delta_vs_fp32"].is_null());
  EXPECT_NEAR(j["seed_summary"][1]["accuracy_delta_vs_fp32"]["mean"].get<double>(), -0.02 / 3,
              1e-12);
  for (const char* k : {"ci95_low", "ci95_high"})
    EXPECT_TRUE(j["seed_summary"][1]["accuracy_delta_vs_fp32"].contains(k));
  // One seed has no spread: null, and the table's "± n/a", not a standard deviation of 0.
  EXPECT_NEAR(j["seed_summary"][0]["accuracy_std"].get<double>(), 0.02, 1e-12);
  EXPECT_TRUE(j["seed_summary"][2]["accuracy_std"].is_null());
  // A mode none of whose seeds trained keeps its entry: seeds 0, no accuracy (it was left out,
  // where repeat_summary keeps such a mode).
  Report none;
  none.runs = {seeded("fp32", 1, 0.9), seeded("fp32", 2, 0.91),
               seeded("amp_fp16", 1, 0, RunStatus::Oom), seeded("amp_fp16", 2, 0, RunStatus::Oom)};
  const json nj = to_json(none);
  ASSERT_EQ(nj["seed_summary"].size(), 2u);
  EXPECT_EQ(nj["seed_summary"][1]["precision"], "amp_fp16");
  EXPECT_EQ(nj["seed_summary"][1]["seeds"], 0);
  EXPECT_TRUE(nj["seed_summary"][1]["accuracy_mean"].is_null());
  EXPECT_TRUE(nj["seed_summary"][1]["accuracy_std"].is_null());
  EXPECT_TRUE(nj["seed_summary"][1]["accuracy_delta_vs_fp32"].is_null());
  Report unseeded;
  unseeded.runs = {RunResult{}};
  EXPECT_FALSE(to_json(unseeded).contains("seed_summary"));
}

// Without fp32 the summaries are against the first mode, as the tables' columns ("acc vs
// amp_bf16", "speedup vs amp_bf16 (95% CI)"): before, the JSON's were null and the table's
// seed column "—" however many seeds ran.
TEST(SeedSummary, WithoutFp32TheSummariesAreAgainstTheFirstMode) {
  std::vector<RunResult> runs = {seeded("amp_bf16", 1, 0.90), seeded("amp_bf16", 2, 0.92),
                                 seeded("amp_fp16", 1, 0.91), seeded("amp_fp16", 2, 0.94)};
  EXPECT_EQ(ratio_baseline(runs, "m", "cpu"), "amp_bf16");
  const auto s = seed_summaries(runs);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].baseline, "amp_bf16");
  ASSERT_TRUE(s[1].accuracy_delta_vs_fp32.has_value());
  EXPECT_NEAR(s[1].accuracy_delta_vs_fp32->mean, 0.015, 1e-12);
  EXPECT_FALSE(s[0].accuracy_delta_vs_fp32.has_value());  // the baseline itself

  // Three repetitions a mode: a speedup with its interval against amp_bf16.
  std::vector<RunResult> repeated;
  for (int rep = 1; rep <= 3; ++rep)
    for (const auto& [mode, ms] : {std::pair{"amp_bf16", 10.0}, std::pair{"amp_fp16", 20.0}}) {
      RunResult r = seeded(mode, 1, 0.9);
      r.seed.reset();
      r.repetition = rep;
      r.epochs = {EpochResult{}, EpochResult{}};
      r.epochs[0].time_ms = ms + rep;
      r.epochs[1].time_ms = ms + rep + 0.5;
      repeated.push_back(r);
    }
  Report rep;
  rep.runs = repeated;
  const json j = to_json(rep);
  ASSERT_EQ(j["repeat_summary"].size(), 2u);
  EXPECT_EQ(j["repeat_summary"][1]["ratio_baseline"], "amp_bf16");
  ASSERT_FALSE(j["repeat_summary"][1]["speedup_vs_fp32"].is_null()) << j["repeat_summary"];
  EXPECT_LT(j["repeat_summary"][1]["speedup_vs_fp32"]["estimate"].get<double>(), 1.0);
}

}  // namespace
}  // namespace mpbench
