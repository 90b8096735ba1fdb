#include "train/results.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/error.h"
#include "models/dataset.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/max_batch.h"
#include "train/statistics.h"
#include "train/trainer.h"

namespace mpbench {
namespace {

using nlohmann::json;

TEST(TimeStats, OddCountKnownSample) {
  // 2, 4, 4, 4, 5, 5, 7, 9 is the textbook set; drop the 9 for an odd count.
  TimeStats t = compute_time_stats({5, 4, 2, 7, 4, 5, 4});
  EXPECT_DOUBLE_EQ(t.median, 4);
  EXPECT_DOUBLE_EQ(t.mean, 31.0 / 7);
  double ss = 0;
  for (double v : {5., 4., 2., 7., 4., 5., 4.}) ss += (v - 31.0 / 7) * (v - 31.0 / 7);
  EXPECT_NEAR(t.stddev, std::sqrt(ss / 6), 1e-12);
  EXPECT_NEAR(t.cv, t.stddev / t.mean, 1e-12);
  EXPECT_DOUBLE_EQ(t.min, 2);
  EXPECT_DOUBLE_EQ(t.max, 7);
}

TEST(TimeStats, EvenCountUsesMeanOfMiddleTwoAndSampleStddev) {
  TimeStats t = compute_time_stats({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(t.median, 4.5);
  EXPECT_DOUBLE_EQ(t.mean, 5);
  // Population stddev of this set is exactly 2; the sample (n-1) one is sqrt(32/7).
  EXPECT_NEAR(t.stddev, std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_NEAR(t.cv, std::sqrt(32.0 / 7.0) / 5, 1e-12);
  EXPECT_DOUBLE_EQ(t.min, 2);
  EXPECT_DOUBLE_EQ(t.max, 9);
}

// The one-sided rank test's exact tail on 3 against 3 values: 20 orderings, each as likely under
// the null, ties too (midranks); past 20 x 20 the normal approximation, which agrees with the
// exact tail.
TEST(RankTest, ExactTailsTiesAndTheNormalApproximation) {
  EXPECT_DOUBLE_EQ(rank_test_greater_p({1, 2, 3}, {4, 5, 6}), 1.0 / 20);  // U = 9: one ordering
  EXPECT_DOUBLE_EQ(rank_test_greater_p({1, 2, 4}, {3, 5, 6}), 2.0 / 20);  // U = 8
  EXPECT_DOUBLE_EQ(rank_test_greater_p({4, 5, 6}, {1, 2, 3}), 1.0);       // U = 0
  EXPECT_DOUBLE_EQ(rank_test_greater_p({2, 2, 2}, {2, 2, 2}), 1.0);       // all tied: no evidence
  EXPECT_DOUBLE_EQ(rank_test_greater_p({}, {1.0}), 1.0);
  // One stalled step among otherwise equal times is not a slower op: the current side's ranks
  // sum to 3 + 3 + 6 in the 10 of 20 deals that give it the 60.
  EXPECT_DOUBLE_EQ(rank_test_greater_p({5, 5, 5}, {5, 5, 60}), 10.0 / 20);
  // Ties at few steps: exact, where the normal approximation said 0.0383 (below 0.05) for a tail
  // of one deal in 20 (a statistics review, against SciPy's permutation test); a new op (zeros
  // in the baseline) the same.
  EXPECT_DOUBLE_EQ(rank_test_greater_p({1, 1, 2}, {3, 4, 5}), 1.0 / 20);
  EXPECT_DOUBLE_EQ(rank_test_greater_p({0, 0, 0}, {3, 4, 5}), 1.0 / 20);
  // The smaller side dealt either way round gives one tail: 1 against 3 and 3 against 1.
  EXPECT_DOUBLE_EQ(rank_test_greater_p({1}, {2, 2, 3}), 1.0 / 4);
  EXPECT_DOUBLE_EQ(rank_test_greater_p({1, 1, 2}, {3}), 1.0 / 4);
  // With ties at 20 x 20 the exact tail agrees with the normal approximation.
  std::vector<double> tb, tc;
  for (int i = 0; i < 20; ++i) {
    tb.push_back(i / 2);
    tc.push_back((i + 3) / 2);
  }
  const double tied_exact = rank_test_greater_p(tb, tc);
  EXPECT_NEAR(tied_exact, 0.070, 0.003);  // 400000 random deals in Python: 0.06996
  EXPECT_NEAR(rank_test_greater_p(tb, tc, 0), tied_exact, 0.1 * tied_exact);
  // 50 against 50, the current side shifted by 6.1: U = 1554 of 2500, z = 2.09. The normal
  // approximation (the default there) is within 10% of the exact tail (asked for).
  std::vector<double> base, cur;
  for (int i = 0; i < 50; ++i) {
    base.push_back(i);
    cur.push_back(i + 6.1);
  }
  const double exact = rank_test_greater_p(base, cur, 2500);
  EXPECT_GT(exact, 0.01);
  EXPECT_LT(exact, 0.03);
  EXPECT_NEAR(rank_test_greater_p(base, cur), exact, 0.1 * exact);
  // At exactly exact_pairs pairs the tail is still the exact one.
  EXPECT_DOUBLE_EQ(rank_test_greater_p({1, 2, 3}, {4, 5, 6}, 9), 1.0 / 20);
  // The normal approximation by hand, sides of 5 and 4 with two ties (exact_pairs 0): midranks
  // 1 2 3.5 3.5 5 6.5 6.5 8 9, the current side's sum 27, U = 27 - 4 * 5 / 2 = 17; the ties'
  // sum of t^3 - t is 12, var = 5 * 4 / 12 * (10 - 12 / (9 * 8)) = 16.3889; z = (17 - 10 - 0.5)
  // / sqrt(var) = 1.60560, and p = erfc(z / sqrt(2)) / 2.
  EXPECT_NEAR(rank_test_greater_p({1, 2, 3, 4, 5}, {3, 5, 6, 7}, 0), 0.0541804081, 1e-9);
}

// Epoch times the statistics use: positive and finite (a zero, a negative, NaN and inf are not
// a time).
TEST(TimeStats, OnlyPositiveFiniteTimesAreUsed) {
  EXPECT_EQ(positive_finite({0.0, 2.5, -1.0, NAN, INFINITY, 1e-300}),
            (std::vector<double>{2.5, 1e-300}));
}

TEST(TimeStats, SingleAndEmpty) {
  TimeStats one = compute_time_stats({12.5});
  EXPECT_DOUBLE_EQ(one.median, 12.5);
  EXPECT_DOUBLE_EQ(one.mean, 12.5);
  EXPECT_DOUBLE_EQ(one.stddev, 0);
  EXPECT_DOUBLE_EQ(one.cv, 0);
  EXPECT_DOUBLE_EQ(one.min, 12.5);
  EXPECT_DOUBLE_EQ(one.max, 12.5);

  TimeStats none = compute_time_stats({});
  EXPECT_EQ(none.median, 0);
  EXPECT_EQ(none.mean, 0);
  EXPECT_EQ(none.stddev, 0);
  EXPECT_EQ(none.cv, 0);
  EXPECT_EQ(none.min, 0);
  EXPECT_EQ(none.max, 0);
}

TEST(RunStatus, Names) {
  EXPECT_STREQ(run_status_name(RunStatus::Ok), "ok");
  EXPECT_STREQ(run_status_name(RunStatus::Oom), "oom");
  EXPECT_STREQ(run_status_name(RunStatus::Diverged), "diverged");
  EXPECT_STREQ(run_status_name(RunStatus::Failed), "failed");
  EXPECT_STREQ(run_status_name(RunStatus::Unsupported), "unsupported");
  EXPECT_EQ(run_status_from_name("diverged"), RunStatus::Diverged);
  EXPECT_EQ(run_status_from_name("unsupported"), RunStatus::Unsupported);
  EXPECT_THROW(run_status_from_name("crashed"), Error);
}

// Clipping: this step's amax times the scale it was cast with (the previous update's, 1 at first)
// past the format's largest value plus half its step (464 for E4M3, 61440 for E5M2: up to there
// a cast rounds to the maximum anyway). With "max" an amax that did not grow is the history's.
TEST(Fp8Series, ClippedStepsFromTheirOwnNumbers) {
  EXPECT_EQ(fp8_clip_threshold(DType::F8E4M3), 464.0f);
  EXPECT_EQ(fp8_clip_threshold(DType::F8E5M2), 61440.0f);
  Fp8TensorSeries t{"fc1.x",
                    "fp8_e4m3",
                    {500, 500, 600, 620, 2000},
                    {0.896f, 0.896f, 0.74666f, 0.72258f, 0.224f}};
  // step 0: 500 * 1 > 464; 1: did not grow; 2: 600 * 0.896 = 537.6; 3: 620 * 0.74666 = 462.9,
  // within (a rounding, not a clip); 4: 2000 * 0.72258.
  EXPECT_EQ(fp8_clipped_steps(t, false), 3);
  // most_recent: each amax is the step's own; step 1's 500 * 0.896 = 448 is within.
  EXPECT_EQ(fp8_clipped_steps(t, true), 3);
  Fp8TensorSeries dy{"fc1.dy", "fp8_e5m2", {0.001f, 0.002f}, {57344000.0f, 28672000.0f}};
  EXPECT_EQ(fp8_clipped_steps(dy, false), 1);  // 0.002 * 5.7344e7 > 61440
  EXPECT_EQ(fp8_clipped_steps(Fp8TensorSeries{}, false), 0);
  // At the threshold itself a cast still rounds to the maximum: not a clip; just past it, one.
  EXPECT_EQ(fp8_clipped_steps(Fp8TensorSeries{"x", "fp8_e4m3", {464}, {1}}, false), 0);
  EXPECT_EQ(fp8_clipped_steps(Fp8TensorSeries{"x", "fp8_e4m3", {464.5f}, {1}}, false), 1);
  // A non-finite amax that stays in the history clipped once, at the step that had it.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fp8_clipped_steps(Fp8TensorSeries{"x", "fp8_e4m3", {inf, inf}, {1, 1}}, false), 1);
}

// Two repetitions have a spread between them (the noisy-repetitions flag's cv); one has none.
TEST(RepetitionCv, FromTwoRepetitionsOn) {
  std::vector<RunResult> all(2);
  for (size_t i = 0; i < all.size(); ++i) {
    all[i].model = "m", all[i].precision = "fp32", all[i].device = "cpu", all[i].batch_size = 8;
    all[i].status = RunStatus::Ok;
    all[i].repetition = static_cast<int64_t>(i + 1);
    all[i].epoch_time_ms = compute_time_stats({10.0 * static_cast<double>(i + 1)});
  }
  EXPECT_NEAR(repetition_cv(all[0], all), compute_time_stats({10.0, 20.0}).cv, 1e-12);
  EXPECT_TRUE(std::isnan(repetition_cv(all[0], {all[0]})));
}

// The repetitions of a run are the runs of its key that trained: another seed's, another CUDA
// graphs setting's or a failed run's median is not one of them; runs without a repetition number
// (no `run --repeat`) have no spread between repetitions.
TEST(RepetitionCv, OnlyTheRunsOfItsKeyThatTrained) {
  std::vector<RunResult> all(2);
  for (size_t i = 0; i < all.size(); ++i) {
    all[i].model = "m", all[i].precision = "fp32", all[i].device = "cpu", all[i].batch_size = 8;
    all[i].status = RunStatus::Ok;
    all[i].seed = 1;
    all[i].repetition = static_cast<int64_t>(i + 1);
    all[i].epoch_time_ms = compute_time_stats({10.0});
  }
  EXPECT_EQ(repetition_cv(all[0], all), 0.0);
  RunResult other = all[1];
  other.repetition = 3;
  other.epoch_time_ms = compute_time_stats({30.0});
  for (int what = 0; what < 3; ++what) {
    RunResult x = other;
    if (what == 0) x.seed = 2;
    if (what == 1) x.cuda_graphs = true;
    if (what == 2) x.status = RunStatus::Failed;
    std::vector<RunResult> with = all;
    with.push_back(x);
    EXPECT_EQ(repetition_cv(all[0], with), 0.0) << what;
  }
  std::vector<RunResult> unnumbered = {all[0], other};
  for (RunResult& u : unnumbered) u.repetition.reset();
  EXPECT_TRUE(std::isnan(repetition_cv(unnumbered[0], unnumbered)));
}

RunResult sample_run() {
  RunResult r;
  r.model = "mnist_mlp";
  r.family = "mlp";
  r.precision = "amp_fp16";
  r.device = "cuda";
  r.batch_size = 128;
  r.train_samples = 60000;
  r.warmup_steps = 10;
  r.cuda_graphs = true;
  for (int e = 0; e < 3; ++e) {
    EpochResult er;
    er.time_ms = 100 + e;
    er.eval_time_ms = 10 + e;
    er.train_loss = 1.0 / (e + 1);
    er.eval_loss = 0.9 / (e + 1);
    er.eval_accuracy = 0.9 + 0.01 * e;
    er.steps = 469;
    r.epochs.push_back(er);
  }
  r.epoch_time_ms = compute_time_stats({100, 101, 102});
  r.samples_per_second = 60000 / 0.101;
  r.flops_per_step = 1.5e9;
  r.tflops = 12.5;
  r.peak_tflops = 989;
  r.percent_of_peak = 1.26;
  r.memory.tracked_peak = 123456789;
  r.memory.training_peak = 123449789;  // less the data category's 7000
  for (int c = 0; c < kMemCategoryCount; ++c) r.memory.by_category[c] = 1000 * (c + 1);
  r.memory.has_device = true;
  r.memory.device_peak = 200000000;
  r.memory.device_baseline = 5000000;
  r.final_accuracy = 0.92;
  r.final_loss = 0.3;
  r.skipped_steps = 2;
  r.final_loss_scale = 32768;
  r.loss_scaling = true;
  r.steps = {{2.5f, 10.0f, 65536.0f, true}, {0.123f, 1.5f, 32768.0f, false}};
  return r;
}

TEST(RunJson, HasEveryContractField) {
  json j = to_json(sample_run());
  for (const char* key :
       {"model",          "family",        "precision",          "device",
        "status",         "status_detail", "cuda_graphs",        "batch_size",
        "epochs",         "epoch_time_ms", "samples_per_second", "flops_per_step",
        "tflops",         "peak_tflops",   "percent_of_peak",    "peak_memory_bytes",
        "final_accuracy", "final_loss",    "skipped_steps",      "final_loss_scale",
        "loss_scaling",   "steps"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["precision"], "amp_fp16");
  EXPECT_EQ(j["cuda_graphs"], true);
  ASSERT_EQ(j["epochs"].size(), 3u);
  for (const char* key :
       {"time_ms", "eval_time_ms", "train_loss", "eval_loss", "eval_accuracy", "steps"}) {
    EXPECT_TRUE(j["epochs"][0].contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(j["epochs"][2]["time_ms"].get<double>(), 102);
  EXPECT_EQ(j["epochs"][1]["steps"], 469);
  for (const char* key : {"median", "mean", "stddev", "cv", "min", "max"}) {
    EXPECT_TRUE(j["epoch_time_ms"][key].is_number()) << key;
  }
  EXPECT_DOUBLE_EQ(j["epoch_time_ms"]["median"].get<double>(), 101);

  const json& mem = j["peak_memory_bytes"];
  EXPECT_EQ(mem["tracked"], 123456789u);
  EXPECT_EQ(mem["training"], 123449789u);
  EXPECT_EQ(mem["data"], 7000u);
  EXPECT_EQ(mem["device"], 200000000u);
  EXPECT_EQ(mem["device_baseline"], 5000000u);
  const char* cats[] = {"weights",     "master_weights", "gradients", "optimizer_state",
                        "activations", "workspace",      "data"};
  for (int c = 0; c < 7; ++c) EXPECT_EQ(mem["by_category"][cats[c]], 1000u * (c + 1)) << cats[c];

  const json& steps = j["steps"];
  for (const char* key : {"loss", "grad_norm", "loss_scale", "skipped"}) {
    ASSERT_TRUE(steps[key].is_array()) << key;
    EXPECT_EQ(steps[key].size(), 2u) << key;
  }
  EXPECT_EQ(steps["skipped"][0], true);
  EXPECT_EQ(steps["loss_scale"][1].get<double>(), 32768);
  // Float series are written as the float's exact double: a reader gets the run's value.
  EXPECT_EQ(steps["loss"][1].get<double>(), static_cast<double>(0.123f));
}

TEST(RunJson, LossScalesAreWrittenExactly) {
  RunResult r = sample_run();
  r.steps[0].loss_scale = std::ldexp(1.0f, 27);
  r.steps[1].loss_scale = static_cast<float>(65536.0 * 1.7);  // not a short decimal
  r.final_loss_scale = r.steps[1].loss_scale;
  const json j = json::parse(to_json(r).dump());
  EXPECT_EQ(j["steps"]["loss_scale"][0].dump(), "134217728.0");
  EXPECT_EQ(j["steps"]["loss_scale"][1].get<double>(), static_cast<double>(r.steps[1].loss_scale));
  EXPECT_EQ(j["final_loss_scale"].get<double>(), static_cast<double>(r.steps[1].loss_scale));
  const RunResult back = run_from_json(j);
  EXPECT_EQ(back.steps[1].loss_scale, r.steps[1].loss_scale);
}

// One epoch has no spread: stddev and cv are null (they were 0, a 0% spread), and read back.
TEST(RunJson, OneEpochHasANullSpread) {
  RunResult r = sample_run();
  r.epochs.resize(1);
  r.epoch_time_ms = compute_time_stats({r.epochs[0].time_ms});
  const json j = json::parse(to_json(r).dump());
  EXPECT_TRUE(j["epoch_time_ms"]["stddev"].is_null()) << j["epoch_time_ms"];
  EXPECT_TRUE(j["epoch_time_ms"]["cv"].is_null()) << j["epoch_time_ms"];
  EXPECT_TRUE(j["epoch_time_ms"]["median"].is_number());
  const RunResult back = run_from_json(j);
  EXPECT_EQ(back.epoch_time_ms.cv, 0.0);
  EXPECT_EQ(back.epoch_time_ms.median, r.epochs[0].time_ms);
}

TEST(RunJson, NoDeviceSamplesWritesNull) {
  RunResult r = sample_run();
  r.memory.has_device = false;
  json j = to_json(r);
  EXPECT_TRUE(j["peak_memory_bytes"]["device"].is_null());
  EXPECT_EQ(j["peak_memory_bytes"]["tracked"], 123456789u);
}

TEST(RunJson, NonFiniteBecomesNullAndDumpParses) {
  RunResult r = sample_run();
  r.status = RunStatus::Diverged;
  r.status_detail = "loss not finite at step 17";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  r.final_loss = nan;
  r.epochs[2].train_loss = inf;
  r.epochs[2].eval_loss = -inf;
  r.steps.push_back({std::numeric_limits<float>::quiet_NaN(),
                     std::numeric_limits<float>::infinity(), 1.0f, true});
  json j = to_json(r);
  EXPECT_EQ(j["status"], "diverged");
  EXPECT_EQ(j["status_detail"], "loss not finite at step 17");
  EXPECT_TRUE(j["final_loss"].is_null());
  EXPECT_TRUE(j["epochs"][2]["train_loss"].is_null());
  EXPECT_TRUE(j["epochs"][2]["eval_loss"].is_null());
  EXPECT_TRUE(j["steps"]["loss"][2].is_null());
  EXPECT_TRUE(j["steps"]["grad_norm"][2].is_null());

  const std::string text = j.dump();
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  EXPECT_EQ(text.find("nan"), std::string::npos);
  EXPECT_EQ(text.find("inf"), std::string::npos);
  json back = json::parse(text);  // throws on invalid JSON
  RunResult rr = run_from_json(back);
  EXPECT_TRUE(std::isnan(rr.final_loss));
  EXPECT_TRUE(std::isnan(rr.steps[2].loss));
  EXPECT_EQ(rr.status, RunStatus::Diverged);
}

// What a run does not have is null, not a made-up value: no peak (the reference, a GPU without a
// datasheet) was a peak_tflops and percent_of_peak of 0, a mode without loss scaling a
// final_loss_scale of 1. Both read back as before.
TEST(RunResultJson, NoPeakAndNoLossScaleAreNull) {
  RunResult r = sample_run();
  r.loss_scaling = false;
  r.final_loss_scale = 1;
  r.peak_tflops = 0;
  r.percent_of_peak = 0;
  const json j = to_json(r);
  EXPECT_TRUE(j["final_loss_scale"].is_null()) << j["final_loss_scale"];
  EXPECT_TRUE(j["peak_tflops"].is_null()) << j["peak_tflops"];
  EXPECT_TRUE(j["percent_of_peak"].is_null()) << j["percent_of_peak"];
  const RunResult back = run_from_json(j);
  EXPECT_EQ(back.final_loss_scale, 1.0);
  EXPECT_EQ(back.peak_tflops, 0.0);
  EXPECT_EQ(back.percent_of_peak, 0.0);

  r.loss_scaling = true;
  r.final_loss_scale = 32768;
  r.peak_tflops = 989.4;
  r.percent_of_peak = 12.5;
  const json k = to_json(r);
  EXPECT_EQ(k["final_loss_scale"], 32768.0);
  EXPECT_EQ(k["peak_tflops"], 989.4);
  EXPECT_EQ(k["percent_of_peak"], 12.5);
}

Report sample_report() {
  Report rep;
  rep.tool = {{"name", "mpbench"}, {"version", "0.1.0"}, {"git", "abc123"}};
  rep.env = {{"device", "cuda"},
             {"gpu", {{"name", "NVIDIA H200"}, {"compute_capability", "9.0"}}},
             {"cpu", {{"name", "Xeon"}, {"threads", 16}}}};
  rep.specs.push_back({{"name", "mnist_mlp"}, {"model", {{"type", "mlp"}}}});
  RunResult fp32 = sample_run();
  fp32.precision = "fp32";
  fp32.loss_scaling = false;
  RunResult oom = sample_run();
  oom.batch_size = 256;  // a sweep's larger batch: a run of its own
  oom.status = RunStatus::Oom;
  oom.status_detail = "out of memory";
  RunResult fp8 = sample_run();
  fp8.precision = "amp_fp8";
  fp8.loss_scaling = false;
  fp8.fp8_scaling = {{"fc1.x", "fp8_e4m3", {2.5f, 3.0f}, {179.2f, 149.33333f}, 1},
                     {"fc1.dy", "fp8_e5m2", {0.001f, std::nanf("")}, {57344000.0f, 5.0e7f}}};
  RunResult unsupported;
  unsupported.model = "mnist_mlp";
  unsupported.family = "mlp";
  unsupported.precision = "amp_fp8";
  unsupported.device = "cuda";
  unsupported.status = RunStatus::Unsupported;
  unsupported.status_detail = "amp_fp8 needs compute capability 8.9 or newer, A100 is 8.0";
  rep.runs = {fp32, sample_run(), oom, fp8, unsupported};
  return rep;
}

// Two runs that nothing tells apart are refused by the reader, for report as for compare (report
// drew both as rows of one mode); repetitions and seeds tell runs apart.
TEST(ReportJson, TwoRunsOfOneIdentityAreRefused) {
  json j = to_json(sample_report());
  j["runs"].push_back(j["runs"][0]);
  try {
    report_from_json(j);
    FAIL() << "a duplicated run was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("runs[0] and runs[5]: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("appears twice"), std::string::npos) << e.what();
  }
  j["runs"][5]["repetition"] = 2;
  j["runs"][0]["repetition"] = 1;
  EXPECT_NO_THROW(report_from_json(j));
}

TEST(ReportJson, TopLevelShape) {
  json j = to_json(sample_report());
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["tool"]["name"], "mpbench");
  EXPECT_EQ(j["env"]["gpu"]["name"], "NVIDIA H200");
  ASSERT_TRUE(j["specs"].is_array());
  EXPECT_EQ(j["specs"].size(), 1u);
  ASSERT_TRUE(j["runs"].is_array());
  EXPECT_EQ(j["runs"].size(), 5u);
  EXPECT_EQ(j["runs"][2]["status"], "oom");
  EXPECT_EQ(j["runs"][4]["status"], "unsupported");
  // Nothing allocated: null (the CSV's empty cells), where an oom keeps the memory it reached.
  EXPECT_TRUE(j["runs"][4]["peak_memory_bytes"].is_null()) << j["runs"][4];
  EXPECT_TRUE(j["runs"][2]["peak_memory_bytes"].is_object()) << j["runs"][2];
  EXPECT_EQ(report_from_json(j).runs[4].memory.tracked_peak, 0u);
  EXPECT_FALSE(j["runs"][0].contains("fp8_scaling"));
  ASSERT_EQ(j["runs"][3]["fp8_scaling"].size(), 2u);
  EXPECT_EQ(j["runs"][3]["fp8_scaling"][1]["format"], "fp8_e5m2");
  EXPECT_TRUE(j["runs"][3]["fp8_scaling"][1]["amax"][1].is_null());  // an inf/NaN amax

  json empty = to_json(Report{});
  EXPECT_TRUE(empty["tool"].is_object());
  EXPECT_TRUE(empty["runs"].is_array());
  EXPECT_TRUE(empty["specs"].is_array());
}

TEST(ReportJson, RoundTrip) {
  Report rep = sample_report();
  json j = to_json(rep);
  Report back = report_from_json(json::parse(j.dump(2)));
  // Writing what was read gives the same document: every field survives.
  EXPECT_EQ(to_json(back), j);
  ASSERT_EQ(back.runs.size(), 5u);
  const RunResult& r = back.runs[1];
  const RunResult& o = rep.runs[1];
  EXPECT_EQ(r.model, o.model);
  EXPECT_EQ(r.precision, o.precision);
  EXPECT_EQ(r.batch_size, o.batch_size);
  EXPECT_EQ(r.epochs.size(), o.epochs.size());
  EXPECT_DOUBLE_EQ(r.epochs[1].eval_accuracy, o.epochs[1].eval_accuracy);
  EXPECT_DOUBLE_EQ(r.epoch_time_ms.stddev, o.epoch_time_ms.stddev);
  EXPECT_EQ(r.memory.tracked_peak, o.memory.tracked_peak);
  EXPECT_EQ(r.memory.training_peak, o.memory.training_peak);
  EXPECT_EQ(r.memory.by_category, o.memory.by_category);
  // A file from before "training" was written: the tracked peak less the dataset copy.
  json old = j;
  old["runs"][1]["peak_memory_bytes"].erase("training");
  EXPECT_EQ(report_from_json(old).runs[1].memory.training_peak, o.memory.training_peak);
  EXPECT_TRUE(r.memory.has_device);
  EXPECT_EQ(r.memory.device_peak, o.memory.device_peak);
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[1].loss, 0.123f);  // exact float round trip through its double
  EXPECT_TRUE(r.steps[0].skipped);
  EXPECT_EQ(r.skipped_steps, 2);
  EXPECT_EQ(r.final_loss_scale, 32768);
  EXPECT_EQ(back.runs[2].status, RunStatus::Oom);
  EXPECT_EQ(back.runs[2].status_detail, "out of memory");
  EXPECT_EQ(back.specs.size(), 1u);
  const RunResult& f8 = back.runs[3];
  ASSERT_EQ(f8.fp8_scaling.size(), 2u);
  EXPECT_EQ(f8.fp8_scaling[0].tensor, "fc1.x");
  EXPECT_EQ(f8.fp8_scaling[0].scale[1], 149.33333f);
  EXPECT_EQ(f8.fp8_scaling[0].clipped_steps, 1);
  EXPECT_TRUE(std::isnan(f8.fp8_scaling[1].amax[1]));
  EXPECT_EQ(back.runs[4].status, RunStatus::Unsupported);
  EXPECT_EQ(back.runs[4].status_detail, rep.runs[4].status_detail);
}

ConvAlgorithm sample_conv(const char* op, int64_t algo, size_t workspace, bool limited) {
  ConvAlgorithm a;
  a.op = op;
  a.n = 256, a.h = 56, a.w = 56, a.c = 64;
  a.k = 64, a.r = 3, a.s = 3;
  a.stride = 1, a.pad = 1;
  a.dtype = "bf16";
  a.algo = algo;
  a.algo_name = std::string(op) == "forward" ? "implicit_precomp_gemm" : "algo_1";
  a.math = "tensor_op";
  a.workspace_bytes = workspace;
  a.workspace_limited = limited;
  return a;
}

// The convolution choices of a GPU run: written only when there are any, read back field by
// field, and a file without them (the CPU, or written before them) still reads.
TEST(RunJson, ConvAlgorithmsRoundTripAndAreOptional) {
  RunResult r = sample_run();
  EXPECT_FALSE(to_json(r).contains("conv_algorithms"));
  EXPECT_FALSE(to_json(r).contains("conv_workspace_bytes"));
  EXPECT_TRUE(run_from_json(to_json(r)).conv_algorithms.empty());

  // A pointwise convolution run as a cuBLASLt GEMM is recorded with algo -1.
  ConvAlgorithm pointwise = sample_conv("forward", -1, 0, false);
  pointwise.r = pointwise.s = 1;
  pointwise.pad = 0;
  pointwise.algo_name = "cublaslt_gemm";
  r.conv_algorithms = {sample_conv("forward", 1, 0, false),
                       sample_conv("backward_data", 1, size_t{48} << 20, false),
                       sample_conv("backward_filter", 1, size_t{5} << 30, true), pointwise};
  r.conv_workspace_bytes = size_t{5} << 30;  // past 32 bits
  const json j = json::parse(to_json(r).dump());
  ASSERT_TRUE(j["conv_algorithms"].is_array());
  ASSERT_EQ(j["conv_algorithms"].size(), 4u);
  EXPECT_EQ(j["conv_algorithms"][3]["algo"], -1);
  const json& bf = j["conv_algorithms"][2];
  EXPECT_EQ(bf["op"], "backward_filter");
  EXPECT_EQ(bf["n"], 256);
  EXPECT_EQ(bf["c"], 64);
  EXPECT_EQ(bf["r"], 3);
  EXPECT_EQ(bf["stride"], 1);
  EXPECT_EQ(bf["pad"], 1);
  EXPECT_EQ(bf["dtype"], "bf16");
  EXPECT_EQ(bf["algo"], 1);
  EXPECT_EQ(bf["algo_name"], "algo_1");
  EXPECT_EQ(bf["math"], "tensor_op");
  EXPECT_EQ(bf["workspace_bytes"].get<size_t>(), size_t{5} << 30);
  EXPECT_EQ(bf["workspace_limited"], true);
  EXPECT_EQ(j["conv_workspace_bytes"].get<size_t>(), size_t{5} << 30);

  const RunResult back = run_from_json(j);
  ASSERT_EQ(back.conv_algorithms.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const ConvAlgorithm &a = back.conv_algorithms[i], &o = r.conv_algorithms[i];
    EXPECT_EQ(a.op, o.op);
    EXPECT_EQ(std::vector<int64_t>({a.n, a.h, a.w, a.c, a.k, a.r, a.s, a.stride, a.pad}),
              std::vector<int64_t>({o.n, o.h, o.w, o.c, o.k, o.r, o.s, o.stride, o.pad}));
    EXPECT_EQ(a.dtype, o.dtype);
    EXPECT_EQ(a.algo, o.algo);
    EXPECT_EQ(a.algo_name, o.algo_name);
    EXPECT_EQ(a.math, o.math);
    EXPECT_EQ(a.workspace_bytes, o.workspace_bytes);
    EXPECT_EQ(a.workspace_limited, o.workspace_limited);
  }
  EXPECT_EQ(back.conv_workspace_bytes, r.conv_workspace_bytes);
  EXPECT_EQ(to_json(back), j);  // every field survives
}

// The backend's warnings of a run (the naive GEMM kernel taken on a GPU) are in its result and
// read back; a run without any writes none. Each was a line on stderr alone, printed by the
// kernel mid-run (over the progress bar), and no result file said the times were not cuBLASLt's.
TEST(RunJson, WarningsRoundTripAndAreOptional) {
  RunResult r = sample_run();
  EXPECT_FALSE(to_json(r).contains("warnings"));
  r.warnings = {"cuBLASLt offers no algorithm for a 3x5x7 bf16->bf16 GEMM"};
  const json j = json::parse(to_json(r).dump());
  EXPECT_EQ(j["warnings"], json(r.warnings));
  EXPECT_EQ(run_from_json(j).warnings, r.warnings);
  json bad = j;
  bad["warnings"][0] = 3;
  EXPECT_THROW(run_from_json(bad), Error);
}

// The trainer lends every run's backend a convolution workspace provider; the CPU reference has
// no algorithm to choose and no such workspace, so a CPU run of a convolution net records none,
// writes none, and its workspace memory is what the prediction says (none). Two runs on one
// backend: the first gives the provider back.
TEST(RunJson, CpuRunRecordsNoConvAlgorithms) {
  auto be = make_reference_backend();
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_resnet.json");
  for (Precision p : {Precision::FP32, Precision::AMP_BF16}) {
    const Spec s = probe_spec(spec, p, 2, 1);
    const RunResult r = train_and_measure(s, make_dataset(s), p, *be);
    ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
    EXPECT_TRUE(r.conv_algorithms.empty());
    EXPECT_EQ(r.conv_workspace_bytes, 0u);
    EXPECT_EQ(r.memory.by_category[static_cast<int>(MemCategory::Workspace)], 0u);
    EXPECT_EQ(r.predicted_memory.training_peak, r.memory.training_peak);
    const json j = to_json(r);
    EXPECT_FALSE(j.contains("conv_algorithms"));
    EXPECT_FALSE(j.contains("conv_workspace_bytes"));
  }
  EXPECT_TRUE(be->conv_algorithms().empty());
  EXPECT_EQ(be->conv_workspace_bytes(), 0u);
}

std::string bad_input_message(const json& j) {
  try {
    report_from_json(j);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

TEST(ReportJson, ReaderErrorsNameThePath) {
  json good = to_json(sample_report());

  json v2 = good;
  v2["schema_version"] = 2;
  EXPECT_NE(bad_input_message(v2).find("schema_version"), std::string::npos);

  json no_runs = good;
  no_runs.erase("runs");
  EXPECT_NE(bad_input_message(no_runs).find("runs"), std::string::npos);

  json bad_type = good;
  bad_type["runs"][1]["epochs"][0]["time_ms"] = "fast";
  EXPECT_NE(bad_input_message(bad_type).find("runs[1].epochs[0].time_ms"), std::string::npos);

  // Statistics that cannot be of one set of times: min above max, a median outside them.
  json upside_down = good;
  upside_down["runs"][0]["epoch_time_ms"]["min"] = 1e6;
  EXPECT_NE(bad_input_message(upside_down).find("runs[0].epoch_time_ms: expected min <= median"),
            std::string::npos)
      << bad_input_message(upside_down);
  json outside = good;
  outside["runs"][0]["epoch_time_ms"]["median"] =
      2 * outside["runs"][0]["epoch_time_ms"]["max"].get<double>();
  EXPECT_NE(bad_input_message(outside).find("runs[0].epoch_time_ms"), std::string::npos);

  json bad_status = good;
  bad_status["runs"][0]["status"] = "exploded";
  EXPECT_NE(bad_input_message(bad_status).find("runs[0].status"), std::string::npos);

  json ragged = good;
  ragged["runs"][0]["steps"]["grad_norm"].push_back(1.0);
  EXPECT_NE(bad_input_message(ragged).find("runs[0].steps.grad_norm"), std::string::npos);

  json f8_format = good;
  f8_format["runs"][3]["fp8_scaling"][0]["format"] = "fp8_e3m4";
  EXPECT_NE(bad_input_message(f8_format).find("runs[3].fp8_scaling[0].format"), std::string::npos);
  json f8_ragged = good;
  f8_ragged["runs"][3]["fp8_scaling"][1]["scale"].push_back(1.0);
  EXPECT_NE(bad_input_message(f8_ragged).find("runs[3].fp8_scaling[1].scale"), std::string::npos);
  json f8_negative = good;
  f8_negative["runs"][3]["fp8_scaling"][0]["scale"][0] = -1.0;
  EXPECT_NE(bad_input_message(f8_negative).find("runs[3].fp8_scaling[0].scale[0]"),
            std::string::npos);

  // A run that trained has its throughput and memory; null is for one that did not (the probe).
  json null_rate = good;
  null_rate["runs"][0]["samples_per_second"] = nullptr;
  EXPECT_NE(bad_input_message(null_rate).find("runs[0].samples_per_second"), std::string::npos);
  json null_memory = good;
  null_memory["runs"][0]["peak_memory_bytes"]["training"] = nullptr;
  EXPECT_NE(bad_input_message(null_memory).find("runs[0].peak_memory_bytes.training"),
            std::string::npos);

  // The fresh probe's cases: what no run writes.
  json null_times = good;
  null_times["runs"][0]["epoch_time_ms"] = nullptr;
  EXPECT_NE(bad_input_message(null_times).find("runs[0].epoch_time_ms"), std::string::npos);
  json fp64 = good;
  fp64["runs"][0]["precision"] = "fp64";
  EXPECT_NE(bad_input_message(fp64).find("runs[0].precision: expected one of fp32"),
            std::string::npos);
  json no_name = good;
  no_name["runs"][0]["model"] = "";
  EXPECT_NE(bad_input_message(no_name).find("runs[0].model"), std::string::npos);
  json spec_text = good;
  spec_text["specs"][0] = "x";
  EXPECT_NE(bad_input_message(spec_text).find("specs[0]"), std::string::npos);

  json f8_empty = good;  // report took .back() of these (issue 25)
  f8_empty["runs"][3]["fp8_scaling"][0]["amax"] = json::array();
  f8_empty["runs"][3]["fp8_scaling"][0]["scale"] = json::array();
  EXPECT_NE(bad_input_message(f8_empty).find("runs[3].fp8_scaling[0].amax"), std::string::npos);

  json no_count = good;
  no_count["runs"][0]["steps"]["stride"] = 3;  // 2 entries of 3 steps: 4 to 6 steps, say which
  EXPECT_NE(bad_input_message(no_count).find("runs[0].steps.count"), std::string::npos);
  json wrong_count = no_count;
  wrong_count["runs"][0]["steps"]["count"] = 7;
  EXPECT_NE(bad_input_message(wrong_count).find("runs[0].steps.count"), std::string::npos);
  json right_count = no_count;
  right_count["runs"][0]["steps"]["count"] = 4;
  EXPECT_EQ(report_from_json(right_count).runs[0].step_count(), 4);

  EXPECT_NE(bad_input_message(json::array()).find("expected"), std::string::npos);
}

// A long run's per-step series are written in buckets of `stride` steps, at most
// kMaxWrittenSteps entries, each bucket what the charts need of it; the file reads back with the
// step count, and writing what was read changes nothing.
TEST(RunJson, LongRunsAreWrittenInBucketsThatReadBack) {
  RunResult r;
  r.model = "m";
  r.precision = "amp_fp16";
  r.loss_scaling = true;
  r.batch_size = 8;
  const int64_t n = 3 * kMaxWrittenSteps + 5;  // a stride of 4, the last bucket one step
  for (int64_t i = 0; i < n; ++i) {
    StepRecord st{float(i), 1.0f, i == 9 ? 8.0f : 16.0f, i == 9, i < 2 ? NAN : 2.0f};
    r.steps.push_back(st);
  }
  r.skipped_steps = 1;
  Fp8TensorSeries t{"fc1.x", "fp8_e4m3", {}, {}};
  for (int64_t i = 0; i < n; ++i) {
    t.amax.push_back(i == 6 ? 100.0f : 1.0f);
    t.scale.push_back(i == 7 ? 0.5f : 2.0f);
  }
  r.fp8_scaling.push_back(t);
  EpochResult epoch;  // a run that trained has an epoch at least (the reader holds it to that)
  epoch.time_ms = 12.5;
  r.epochs.push_back(epoch);
  const json j = to_json(r);
  const json& steps = j["steps"];
  EXPECT_EQ(steps["stride"], 4);
  EXPECT_EQ(steps["count"], n);
  ASSERT_EQ(steps["loss"].size(), size_t((n + 3) / 4));
  EXPECT_EQ(steps["loss"][0], 1.5);        // the mean of steps 0..3
  EXPECT_EQ(steps["time_ms"][0], 2.0);     // warm-up steps (NaN) left out of the mean
  EXPECT_EQ(steps["loss_scale"][2], 8.0);  // the bucket's back-off stays visible
  EXPECT_EQ(steps["skipped"][2], true);    // step 9 is in bucket 2
  EXPECT_EQ(steps["skipped"][1], false);
  EXPECT_EQ(steps["loss"].back(), double(n - 1));
  EXPECT_EQ(j["fp8_scaling"][0]["amax"][1], 100.0);  // the bucket's largest amax
  EXPECT_EQ(j["fp8_scaling"][0]["scale"][1], 0.5);   // and smallest scale
  ASSERT_EQ(j["fp8_scaling"][0]["amax"].size(), steps["loss"].size());

  const RunResult back = run_from_json(json::parse(j.dump()));
  EXPECT_EQ(back.step_stride, 4);
  EXPECT_EQ(back.step_count(), n);
  EXPECT_EQ(to_json(back), j);

  // A short run is written step by step, with neither key.
  r.steps.resize(10);
  r.fp8_scaling[0].amax.resize(10);
  r.fp8_scaling[0].scale.resize(10);
  EXPECT_FALSE(to_json(r)["steps"].contains("stride"));
  EXPECT_EQ(to_json(r)["steps"]["loss"].size(), 10u);
}

// max_run_json_bytes bounds what a run really adds to a file at its longest: every number as long
// as a float's exact decimal gets, every series at its cap, every epoch written.
TEST(RunJson, TheSizeBoundHoldsForTheLongestNumbers) {
  const float longest = -1.17549435e-38f;             // "-1.1754943508222875e-38"
  const double longest_d = -2.2250738585072014e-308;  // 24 characters
  for (const auto& [epochs, steps, fp8] : {std::tuple<int64_t, int64_t, int>{3, 10, 0},
                                           {100, 50000, kFp8RecordedTensors},
                                           {10000, 2 * kMaxWrittenSteps, kFp8RecordedTensors}}) {
    Report rep;
    RunResult r;
    r.model = "a model name of a plausible length";
    r.precision = "amp_fp8";
    for (int64_t e = 0; e < epochs; ++e)
      r.epochs.push_back(
          EpochResult{longest_d, longest_d, longest_d, longest_d, longest_d, 123456789});
    r.steps.assign(size_t(steps), StepRecord{longest, longest, longest, true, longest});
    for (int i = 0; i < fp8; ++i)
      r.fp8_scaling.push_back(Fp8TensorSeries{"layer1024.qkv.dy", "fp8_e5m2",
                                              std::vector<float>(size_t(steps), longest),
                                              std::vector<float>(size_t(steps), longest)});
    rep.runs.push_back(r);
    const size_t one = to_json(rep).dump(2).size();
    rep.runs.push_back(r);
    const size_t two = to_json(rep).dump(2).size();
    EXPECT_LE(two - one, max_run_json_bytes(epochs, steps, fp8)) << epochs << " epochs";
    EXPECT_LE(one, max_run_json_bytes(epochs, steps, fp8)) << epochs << " epochs";
  }
}

TEST(ReportJson, ConvAlgorithmReaderErrorsNameThePath) {
  Report rep = sample_report();
  rep.runs[1].conv_algorithms = {sample_conv("forward", 1, 1024, false)};
  rep.runs[1].conv_workspace_bytes = 1024;
  const json good = to_json(rep);
  EXPECT_EQ(report_from_json(good).runs[1].conv_algorithms.size(), 1u);
  const auto message = [&](const char* key, const json& value) {
    json j = good;
    if (value.is_null())
      j["runs"][1]["conv_algorithms"][0].erase(key);
    else
      j["runs"][1]["conv_algorithms"][0][key] = value;
    return bad_input_message(j);
  };
  const std::string at = "runs[1].conv_algorithms[0].";
  EXPECT_NE(message("op", "sideways").find(at + "op"), std::string::npos);
  EXPECT_NE(message("dtype", "fp64").find(at + "dtype"), std::string::npos);
  EXPECT_NE(message("math", 3).find(at + "math"), std::string::npos);
  EXPECT_NE(message("n", 0).find(at + "n"), std::string::npos);
  EXPECT_NE(message("stride", 1.5).find(at + "stride"), std::string::npos);
  EXPECT_NE(message("pad", -1).find(at + "pad"), std::string::npos);
  EXPECT_NE(message("algo", -2).find(at + "algo"), std::string::npos);
  EXPECT_NE(message("workspace_bytes", -1).find(at + "workspace_bytes"), std::string::npos);
  EXPECT_NE(message("workspace_limited", "no").find(at + "workspace_limited"), std::string::npos);
  EXPECT_NE(message("algo_name", nullptr).find(at + "algo_name"), std::string::npos);  // missing
  EXPECT_NE(message("k", nullptr).find(at + "k"), std::string::npos);
  json not_array = good;
  not_array["runs"][1]["conv_algorithms"] = json::object();
  EXPECT_NE(bad_input_message(not_array).find("runs[1].conv_algorithms"), std::string::npos);
  json not_object = good;
  not_object["runs"][1]["conv_algorithms"][0] = 7;
  EXPECT_NE(bad_input_message(not_object).find("runs[1].conv_algorithms[0]"), std::string::npos);
}

// host_load (kernels/host_load.h) is written where measured and read back, absent otherwise,
// its steal null where unknown; a run whose threads waited 5% of their time is flagged busy.
// A bad value names its path.
TEST(RunJson, HostLoadRoundTripsAndFlagsABusyRun) {
  RunResult r = sample_run();
  EXPECT_FALSE(to_json(r).contains("host_load"));
  EXPECT_FALSE(run_from_json(json::parse(to_json(r).dump())).host_load);
  HostLoad h;
  h.cpus = 16;
  h.threads = 4;
  h.seconds = 12.5;
  h.own_cpus = 3.75;
  h.waited_cpus = 0.125;  // 3% of 4 threads' time
  h.steal_cpus = NAN;
  r.host_load = h;
  const json j = json::parse(to_json(r).dump());
  EXPECT_EQ(j["host_load"], json::parse(R"({"cpus": 16, "threads": 4, "seconds": 12.5,
                                             "own_cpus": 3.75, "waited_cpus": 0.125,
                                             "steal_cpus": null})"));
  const RunResult back = run_from_json(j);
  ASSERT_TRUE(back.host_load);
  EXPECT_EQ(back.host_load->cpus, 16);
  EXPECT_EQ(back.host_load->threads, 4);
  EXPECT_EQ(back.host_load->seconds, 12.5);
  EXPECT_EQ(back.host_load->own_cpus, 3.75);
  EXPECT_EQ(back.host_load->waited_cpus, 0.125);
  EXPECT_TRUE(std::isnan(back.host_load->steal_cpus));
  const auto flags = [](const RunResult& run) { return run_flags(run, {run}); };
  const auto read_back = [](const RunResult& run) {
    return run_from_json(json::parse(to_json(run).dump()));
  };
  EXPECT_EQ(flags(back), std::vector<std::string>{});
  r.host_load->waited_cpus = 0.25;
  EXPECT_EQ(flags(read_back(r)), std::vector<std::string>{"busy"});
  r.host_load->waited_cpus = 0.125;
  r.host_load->steal_cpus = 0.75;  // 4.7% of 16 CPUs
  EXPECT_EQ(flags(read_back(r)), std::vector<std::string>{});
  r.host_load->steal_cpus = 0.8;
  EXPECT_EQ(flags(read_back(r)), std::vector<std::string>{"busy"});
  r.status = RunStatus::Failed;  // a run that did not finish has no time to doubt
  EXPECT_EQ(flags(r), std::vector<std::string>{});

  Report rep = sample_report();
  rep.runs[1].host_load = h;
  const json good = to_json(rep);
  const auto message = [&](const char* key, const json& value) {
    json bad = good;
    if (value.is_null())
      bad["runs"][1]["host_load"].erase(key);
    else
      bad["runs"][1]["host_load"][key] = value;
    return bad_input_message(bad);
  };
  const std::string at = "runs[1].host_load.";
  for (const char* key : {"cpus", "threads", "seconds", "own_cpus", "waited_cpus", "steal_cpus"})
    EXPECT_NE(message(key, nullptr).find(at + key), std::string::npos) << key;  // missing
  EXPECT_NE(message("cpus", -1).find(at + "cpus"), std::string::npos);
  EXPECT_NE(message("threads", 0).find(at + "threads"), std::string::npos);
  EXPECT_NE(message("threads", 1.5).find(at + "threads"), std::string::npos);
  EXPECT_NE(message("cpus", int64_t{1} << 21).find(at + "cpus"), std::string::npos);
  EXPECT_NE(message("seconds", 0).find(at + "seconds"), std::string::npos);
  EXPECT_NE(message("waited_cpus", -0.5).find(at + "waited_cpus"), std::string::npos);
  EXPECT_NE(message("own_cpus", "2").find(at + "own_cpus"), std::string::npos);
  EXPECT_NE(message("steal_cpus", -1).find(at + "steal_cpus"), std::string::npos);
  json not_object = good;
  not_object["runs"][1]["host_load"] = json::array();
  EXPECT_NE(bad_input_message(not_object).find("runs[1].host_load"), std::string::npos);
}

// ran_busy (run_flags' busy) and worst_busy_load: a run that did not finish is never the busy
// one, whatever its host_load; of several busy runs the worst is the one whose threads waited
// longest, wherever it comes.
TEST(RunFlags, TheWorstBusyLoadIsTheLongestWaitOfRunsThatFinished) {
  auto with_wait = [](double waited, RunStatus status = RunStatus::Ok) {
    RunResult r = sample_run();
    r.status = status;
    r.host_load = test::host_load(4, 2, 1, waited, NAN, 5);
    return r;
  };
  const RunResult quiet = with_wait(0.05), busy = with_wait(0.5), busier = with_wait(0.9),
                  failed = with_wait(1.5, RunStatus::Failed), unmeasured = sample_run();
  EXPECT_FALSE(ran_busy(quiet));  // 2.5% of two threads' time
  EXPECT_TRUE(ran_busy(busy));
  EXPECT_FALSE(ran_busy(failed));
  EXPECT_FALSE(ran_busy(unmeasured));
  EXPECT_EQ(worst_busy_load({&quiet, &unmeasured}), nullptr);
  EXPECT_EQ(worst_busy_load({&busy, &busier, &quiet}), &*busier.host_load);
  EXPECT_EQ(worst_busy_load({&busier, &busy}), &*busier.host_load);
  EXPECT_EQ(worst_busy_load({&busy, &failed}), &*busy.host_load);
}

// The worst busy run is the one whose CPUs something else held longest (taken_cpus), not the
// one whose threads waited longest: threads more than the CPUs also wait for each other.
TEST(RunFlags, TheWorstBusyLoadIsTheMostTakenNotTheLongestWait) {
  RunResult crowded = sample_run(), squeezed = sample_run();
  HostLoad h;
  h.cpus = 4;
  h.seconds = 5;
  h.steal_cpus = NAN;
  h.threads = 6;  // waited 2 CPUs' time, of which the 1 CPU it did not use was taken
  h.own_cpus = 3;
  h.waited_cpus = 2;
  crowded.host_load = h;
  h.threads = 2;  // waited 1.5 CPUs' time, all of it taken
  h.own_cpus = 1;
  h.waited_cpus = 1.5;
  squeezed.host_load = h;
  ASSERT_TRUE(ran_busy(crowded));
  ASSERT_TRUE(ran_busy(squeezed));
  EXPECT_EQ(worst_busy_load({&crowded, &squeezed}), &*squeezed.host_load);
}

// The reader's bounds on host_load are inclusive: no CPU listed (0) and the most a count or a
// share may be (2^20) read back; past that, or a null share of the threads' time, is refused.
TEST(RunJson, HostLoadBoundsAreInclusive) {
  Report rep = sample_report();
  HostLoad h;
  h.cpus = 16;
  h.threads = 4;
  h.seconds = 12.5;
  h.own_cpus = 3.75;
  h.waited_cpus = 0.125;
  h.steal_cpus = 0.5;
  rep.runs[1].host_load = h;
  const json good = to_json(rep);
  const auto with = [&](const char* key, const json& value) {
    json j = good;
    j["runs"][1]["host_load"][key] = value;
    return j;
  };
  const int64_t most = int64_t{1} << 20;
  EXPECT_EQ(report_from_json(with("cpus", 0)).runs[1].host_load->cpus, 0);
  EXPECT_EQ(report_from_json(with("cpus", most)).runs[1].host_load->cpus, most);
  EXPECT_EQ(report_from_json(with("threads", most)).runs[1].host_load->threads, most);
  const std::string at = "runs[1].host_load.";
  for (const char* key : {"own_cpus", "waited_cpus", "steal_cpus"}) {
    EXPECT_NO_THROW(report_from_json(with(key, static_cast<double>(most)))) << key;
    EXPECT_NE(bad_input_message(with(key, 2.0 * static_cast<double>(most))).find(at + key),
              std::string::npos)
        << key;
  }
  for (const char* key : {"own_cpus", "waited_cpus"})
    EXPECT_NE(bad_input_message(with(key, nullptr)).find(at + key), std::string::npos) << key;
}

}  // namespace
}  // namespace mpbench
