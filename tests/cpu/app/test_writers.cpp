// The writers of the result model: console table, CSV, Markdown, ratios, units, progress line.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "app/console_table.h"
#include "app/output_file.h"
#include "app/progress.h"
#include "app/report_writers.h"
#include "kernels/error.h"
#include "models/spec.h"
#include "test_util.h"

namespace mpbench {
namespace {

RunResult make_run(const std::string& precision, double median_ms, size_t tracked,
                   RunStatus status = RunStatus::Ok) {
  RunResult r;
  r.model = "mnist_mlp";
  r.family = "mlp";
  r.precision = precision;
  r.device = "reference";
  r.status = status;
  r.batch_size = 128;
  r.train_samples = 60000;
  for (int e = 0; e < 3; ++e) {
    EpochResult er;
    er.time_ms = median_ms;
    er.eval_accuracy = 0.97;
    r.epochs.push_back(er);
  }
  r.epoch_time_ms = compute_time_stats({median_ms * 0.98, median_ms, median_ms * 1.02});
  r.samples_per_second = 60000 / (median_ms / 1000);
  // `tracked` is what training needs; the dataset copy comes on top and is not the headline.
  r.memory.training_peak = tracked;
  r.memory.by_category[static_cast<int>(MemCategory::Data)] = size_t(64) << 20;
  r.memory.tracked_peak = tracked + (size_t(64) << 20);
  r.final_accuracy = 0.9783;
  r.final_loss = 0.07123;
  if (precision == "amp_fp16") {
    r.loss_scaling = true;
    r.final_loss_scale = 32768;
    r.skipped_steps = 3;
  }
  return r;
}

Report make_report() {
  Report rep;
  rep.tool = {{"name", "mpbench"}, {"version", "0.1.0"}, {"git", "abc123"}};
  rep.env = {{"device", "reference"}, {"cpu", {{"name", "Test CPU"}, {"threads", 2}}}};
  rep.runs.push_back(make_run("fp32", 100, size_t(200) << 20));
  rep.runs.push_back(make_run("tf32", 80, size_t(200) << 20));
  rep.runs.push_back(make_run("amp_fp16", 40, size_t(110) << 20));
  RunResult oom = make_run("amp_bf16", 0, size_t(3) << 30, RunStatus::Oom);
  oom.status_detail = "out of memory allocating 2.00 GiB for activations";
  rep.runs.push_back(oom);
  return rep;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  std::string f;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        f += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        f += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(f);
      f.clear();
    } else {
      f += c;
    }
  }
  fields.push_back(f);
  return fields;
}

// The first line holding `needle`; a needle starting with a space matches at the line start only
// (" fp32 " is the fp32 row, not the "mem vs fp32" header).
std::string line_with(const std::string& text, const std::string& needle) {
  for (const std::string& l : lines_of(text)) {
    const size_t at = l.find(needle);
    if (at != std::string::npos && (needle[0] != ' ' || at == 0)) return l;
  }
  return "";
}

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// ---- ratios and units ----------------------------------------------------------------------

TEST(Ratios, SpeedupAndMemoryAgainstFp32) {
  Report rep = make_report();
  auto groups = group_by_model(rep);
  ASSERT_EQ(groups.size(), 1u);
  const RunResult* fp32 = groups[0].fp32_for(rep.runs[2]);
  ASSERT_EQ(fp32, &rep.runs[0]);
  EXPECT_DOUBLE_EQ(*speedup_vs_fp32(rep.runs[2], fp32), 2.5);
  EXPECT_DOUBLE_EQ(*speedup_vs_fp32(rep.runs[0], fp32), 1.0);
  EXPECT_DOUBLE_EQ(*memory_vs_fp32(rep.runs[2], fp32), 0.55);
  EXPECT_FALSE(speedup_vs_fp32(rep.runs[3], fp32));  // the oom row
  EXPECT_FALSE(speedup_vs_fp32(rep.runs[2], nullptr));
}

// A sweep: each run's ratios are against fp32 at its own batch size, and the table says which
// batch each row ran at.
TEST(Ratios, SweepComparesEachBatchWithFp32AtThatBatch) {
  Report rep = make_report();
  const size_t n = rep.runs.size();
  for (size_t i = 0; i < n; ++i) {
    RunResult r = rep.runs[i];
    r.batch_size *= 4;
    for (EpochResult& e : r.epochs) e.time_ms *= (r.precision == "fp32" ? 2.0 : 1.0);
    r.epoch_time_ms.median *= (r.precision == "fp32" ? 2.0 : 1.0);
    rep.runs.push_back(r);
  }
  auto groups = group_by_model(rep);
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(groups[0].batches.size(), 2u);
  EXPECT_EQ(groups[0].fp32_for(rep.runs[n + 2]), &rep.runs[n]);
  EXPECT_DOUBLE_EQ(*speedup_vs_fp32(rep.runs[n + 2], groups[0].fp32_for(rep.runs[n + 2])), 5.0);
  const std::string table = format_console(rep);
  EXPECT_TRUE(contains(table, "batches " + std::to_string(rep.runs[0].batch_size) + ", " +
                                  std::to_string(rep.runs[n].batch_size)))
      << table;
  EXPECT_TRUE(contains(table, " batch ")) << table;
  EXPECT_TRUE(contains(table, "5.00x")) << table;
  EXPECT_TRUE(contains(table, "2.50x")) << table;
}

TEST(Ratios, NoBaselineWhenFp32DidNotFinish) {
  Report rep = make_report();
  rep.runs[0].status = RunStatus::Oom;
  auto groups = group_by_model(rep);
  EXPECT_EQ(groups[0].fp32_for(rep.runs[2]), nullptr);
  const std::string table = format_console(rep);
  EXPECT_FALSE(contains(table, "2.50x"));
  EXPECT_TRUE(contains(line_with(table, "amp_fp16"), "—"));
}

// amp_fp8 runs get a line on their FP8 tensors' clipping, and an unsupported row its reason.
TEST(Console, Fp8ClippingNoteAndUnsupportedRow) {
  Report rep = make_report();
  RunResult f8 = make_run("amp_fp8", 30, size_t(100) << 20);
  f8.fp8_scaling = {{"fc1.x", "fp8_e4m3", {1, 2, 3}, {448, 224, 149}, 0},
                    {"fc1.dy", "fp8_e5m2", {1, 2, 3}, {1, 1, 1}, 2}};
  rep.runs.push_back(f8);
  RunResult old = make_run("amp_fp8", 0, 0, RunStatus::Unsupported);
  old.cuda_graphs = true;
  old.status_detail = "amp_fp8 needs compute capability 8.9 or newer, A100 is 8.0";
  rep.runs.push_back(old);
  std::string table = format_console(rep);
  EXPECT_TRUE(contains(table,
                       "note: amp_fp8: FP8 clipping (an amax past what its delayed scale "
                       "can hold, the largest values cut to the format's maximum): fc1.dy "
                       "at 2 of 3 steps"))
      << table;
  EXPECT_TRUE(contains(table, "unsupported: amp_fp8 needs compute capability 8.9")) << table;
  rep.runs[rep.runs.size() - 2].fp8_scaling[1].clipped_steps = 0;
  table = format_console(rep);
  EXPECT_TRUE(contains(table, "none of the 2 recorded FP8 tensors was clipped")) << table;
  // An amax that stayed 0: that tensor's GEMMs never ran in FP8 (sizes off 16 at this batch).
  auto& series = rep.runs[rep.runs.size() - 2].fp8_scaling;
  series[1].amax = {0, 0, 0};
  table = format_console(rep);
  EXPECT_TRUE(contains(table,
                       "; 1 of the 2 stayed 0 (an FP8 GEMM takes M, N and K in multiples "
                       "of 16, and at batch 128 these ran in bf16)"))
      << table;
  series[0].amax = {0, 0, 0};
  table = format_console(rep);
  EXPECT_TRUE(contains(table,
                       "amp_fp8: no GEMM ran in FP8: the amax of all 2 recorded FP8 "
                       "tensors stayed 0"))
      << table;
}

TEST(Units, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  // Each unit from exactly its first byte count on.
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(size_t(1) << 20), "1.0 MiB");
  EXPECT_EQ(format_bytes(size_t(1) << 30), "1.00 GiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(size_t(110) << 20), "110.0 MiB");
  EXPECT_EQ(format_bytes(size_t(3) << 30), "3.00 GiB");
  EXPECT_EQ(format_bytes(size_t(3) << 40), "3.00 TiB");
  EXPECT_EQ(format_bytes(SIZE_MAX), "16384.00 PiB");  // a --memory-limit of 2^64 - 1
}

// Console and HTML share these; past 2^63 llround is undefined (UBSan: 1e300 samples/s once
// showed as "-0 samples/s" in the report).
TEST(Units, GroupThousandsAndRates) {
  EXPECT_EQ(group_thousands(1234567.4), "1,234,567");
  EXPECT_EQ(group_thousands(-1234567.6), "-1,234,568");
  EXPECT_EQ(group_thousands(999), "999");
  EXPECT_EQ(group_thousands(1e300), "1e+300");
  EXPECT_EQ(group_thousands(-1e19), "-1e+19");
  EXPECT_EQ(group_thousands(std::nan("")), "nan");
  EXPECT_EQ(format_rate(1e300), "1e+300");
  EXPECT_EQ(format_rate(12345.6), "12,346");
  EXPECT_EQ(format_rate(12.34), "12.3");
  EXPECT_EQ(format_ms(12.3456), "12.35");
}

TEST(Grouping, OneGroupPerModelInReportOrder) {
  Report rep = make_report();
  RunResult other = make_run("fp32", 10, 1000);
  other.model = "tiny";
  rep.runs.insert(rep.runs.begin() + 1, other);
  auto groups = group_by_model(rep);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].model, "mnist_mlp");
  EXPECT_EQ(groups[0].runs.size(), 4u);
  EXPECT_EQ(groups[1].model, "tiny");
  EXPECT_EQ(groups[1].runs.size(), 1u);
}

// ---- console -------------------------------------------------------------------------------

TEST(Console, SpeedupsStatusAndAlignment) {
  const std::string table = format_console(make_report());
  const std::string amp = line_with(table, "amp_fp16");
  EXPECT_TRUE(contains(amp, "2.50x")) << table;  // 100 ms / 40 ms
  EXPECT_TRUE(contains(amp, "0.55x")) << table;  // 110 MiB / 200 MiB
  EXPECT_TRUE(contains(amp, "32768")) << table;  // final loss scale
  EXPECT_TRUE(contains(amp, "40.00 ± 2.0%")) << table;
  EXPECT_TRUE(contains(amp, "1,500,000")) << table;  // samples/s
  EXPECT_TRUE(contains(amp, "97.83%")) << table;
  EXPECT_TRUE(contains(amp, "0.0712")) << table;
  EXPECT_TRUE(contains(line_with(table, "tf32"), "1.25x")) << table;
  EXPECT_TRUE(contains(line_with(table, " fp32 "), "1.00x")) << table;
  // No loss scaling in tf32: the scale column is a dash.
  EXPECT_TRUE(contains(line_with(table, "tf32"), "—")) << table;

  const std::string oom = line_with(table, "amp_bf16");
  EXPECT_TRUE(contains(oom, "oom: out of memory")) << table;
  EXPECT_FALSE(contains(oom, "x ")) << table;

  // Header line names the model, the device and the batch.
  const std::vector<std::string> ls = lines_of(table);
  ASSERT_GE(ls.size(), 7u);
  EXPECT_TRUE(contains(ls[0], "mnist_mlp")) << ls[0];
  EXPECT_TRUE(contains(ls[0], "reference: Test CPU")) << ls[0];
  EXPECT_TRUE(contains(ls[0], "batch 128")) << ls[0];
  EXPECT_TRUE(contains(ls[1], "speedup")) << ls[1];

  // Every column separator of the header, rule and ok rows lines up.
  auto seps = [](const std::string& l, const std::string& glyph) {
    std::vector<size_t> cols;
    size_t col = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      if ((static_cast<unsigned char>(l[i]) & 0xC0) == 0x80) continue;
      if (l.compare(i, glyph.size(), glyph) == 0) cols.push_back(col);
      ++col;
    }
    return cols;
  };
  const std::vector<size_t> header_cols = seps(ls[1], "│");
  EXPECT_EQ(header_cols.size(), 9u);  // 10 columns
  EXPECT_EQ(seps(ls[2], "┼"), header_cols);
  for (const char* mode : {" fp32 ", " tf32 ", " amp_fp16 "}) {
    EXPECT_EQ(seps(line_with(table, mode), "│"), header_cols) << mode;
  }
}

// A repetition or seed that did not finish is said under the table: the row is of those that
// did, and without a note the failures vanished from it (a 5-repetition run with 3 oom read as
// a normal row).
TEST(Console, UnfinishedRepetitionsAndSeedsAreNoted) {
  Report rep = make_report();
  rep.runs.clear();
  for (int i = 1; i <= 5; ++i)
    for (const char* mode : {"fp32", "amp_fp16"}) {
      RunResult r = make_run(mode, 100, size_t(200) << 20);
      r.repetition = i;
      if (std::string(mode) == "amp_fp16" && i >= 3) {
        r.status = RunStatus::Oom;
        r.status_detail = "over the memory limit";
      }
      rep.runs.push_back(r);
    }
  const std::string text = format_console(rep);
  EXPECT_TRUE(contains(text,
                       "amp_fp16: 3 of its 5 repetitions did not finish (oom at repetition "
                       "3: over the memory limit); the row is of the 2 that did"))
      << text;
  EXPECT_FALSE(contains(text, "fp32: ")) << text;  // all of fp32's finished

  for (RunResult& r : rep.runs) {
    r.seed = static_cast<uint64_t>(*r.repetition);
    r.repetition.reset();
  }
  EXPECT_TRUE(contains(format_console(rep), "3 of its 5 seeds did not finish (oom at seed 3"))
      << format_console(rep);
}

// A run interrupted during amp_fp16's second repetition: fp32 ran 2, amp_fp16 1. The title said
// "2 repetitions" for both.
TEST(Console, AnInterruptedRepeatSaysTheRangeOfRepetitions) {
  Report rep = make_report();
  rep.runs.clear();
  for (int i = 1; i <= 2; ++i)
    for (const char* mode : {"fp32", "amp_fp16"}) {
      if (i == 2 && std::string(mode) == "amp_fp16") continue;
      RunResult r = make_run(mode, 100, size_t(200) << 20);
      r.repetition = i;
      rep.runs.push_back(r);
    }
  const std::string text = format_console(rep);
  EXPECT_TRUE(contains(text, " · 1-2 repetitions: epoch ms median")) << text;
  rep.runs.push_back(rep.runs[1]);
  rep.runs.back().repetition = 2;
  EXPECT_TRUE(contains(format_console(rep), " · 2 repetitions: epoch ms median"))
      << format_console(rep);
}

// Seeds x repetitions: the table's time is over the seeds, each seed's repetitions taken to their
// median first (it pooled all six runs under "over seeds"), and the skipped steps are a run's,
// not their sum (three identical repetitions showed three times theirs).
TEST(Console, SeedsAndRepetitionsCollapseBySeed) {
  Report rep = make_report();
  rep.runs.clear();
  const double ms[2][3] = {{1.0, 1.0, 1.6}, {2.0, 2.0, 2.0}};
  for (int seed = 1; seed <= 2; ++seed)
    for (int i = 1; i <= 3; ++i) {
      RunResult r = make_run("fp32", ms[seed - 1][i - 1], size_t(200) << 20);
      r.epoch_time_ms = compute_time_stats({ms[seed - 1][i - 1]});
      r.seed = static_cast<uint64_t>(seed);
      r.repetition = i;
      r.skipped_steps = 4;
      rep.runs.push_back(r);
    }
  const std::vector<ModelGroup> groups = group_by_model(rep);
  ASSERT_EQ(groups.size(), 1u);
  std::vector<RunResult> storage;
  const ModelGroup c = collapse_runs(groups[0], storage);
  ASSERT_EQ(c.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(c.runs[0]->epoch_time_ms.median, 1.5);  // seeds' 1.0 and 2.0; pooled: 1.8
  EXPECT_EQ(c.runs[0]->skipped_steps, 4);
  EXPECT_TRUE(contains(format_console(rep), "over seeds, each the median of its 3 repetitions"))
      << format_console(rep);
}

// A collapsed mode's rates follow its median time: repetitions of 100, 125 and 110 ms are 110 ms,
// so the first run's throughput (at 100 ms) is scaled by 100 / 110, not 110 / 100. One run that
// trained of two has no spread between runs: its cv is n/a, not 0.
TEST(Console, CollapsedRatesFollowTheMedianAndOneRunHasNoSpread) {
  Report rep = make_report();
  rep.runs.clear();
  for (double ms : {100.0, 125.0, 110.0}) {
    RunResult r = make_run("fp32", ms, size_t(200) << 20);
    r.epoch_time_ms = compute_time_stats({ms});
    r.tflops = 2.0 * 100 / ms;
    r.peak_tflops = 10;
    r.percent_of_peak = 100 * r.tflops / r.peak_tflops;
    r.repetition = static_cast<int64_t>(rep.runs.size() + 1);
    rep.runs.push_back(r);
  }
  std::vector<RunResult> storage;
  ModelGroup c = collapse_runs(group_by_model(rep)[0], storage);
  ASSERT_EQ(c.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(c.runs[0]->epoch_time_ms.median, 110);
  EXPECT_NEAR(c.runs[0]->samples_per_second, 60000 / 0.110, 1e-6);
  EXPECT_NEAR(c.runs[0]->tflops, 200.0 / 110, 1e-12);
  EXPECT_NEAR(c.runs[0]->percent_of_peak, 10 * 200.0 / 110, 1e-9);
  EXPECT_TRUE(has_time_spread(*c.runs[0], true));
  rep.runs[1].status = RunStatus::Oom;
  rep.runs[2].status = RunStatus::Oom;
  c = collapse_runs(group_by_model(rep)[0], storage);
  EXPECT_TRUE(std::isnan(c.runs[0]->epoch_time_ms.cv));
  EXPECT_FALSE(has_time_spread(*c.runs[0], true));
}

// Accuracy over one seed has no spread: "± n/a", not a standard deviation of 0.
TEST(Console, AccuracyOverOneSeedHasNoSpread) {
  SeedSummary s;
  s.seeds = 1;
  s.accuracy_mean = 0.9;
  EXPECT_EQ(format_accuracy_over_seeds(s, "+/-"), "90.00% +/- n/a");
  s.seeds = 3;
  s.accuracy_mean = 0.92;
  s.accuracy_std = 0.02;
  EXPECT_EQ(format_accuracy_over_seeds(s, "+/-"), "92.00% +/- 2.00");
}

// An interval stretched by a round far off the others keeps its digits: not "(0.00, 8011.91)".
TEST(Console, RatioBoundsKeepTheirDigits) {
  EXPECT_EQ(format_ratio(0.0014827330735798178), "0.00148");
  EXPECT_EQ(format_ratio(0.2), "0.20");
  EXPECT_EQ(format_ratio(1.2345), "1.23");
  EXPECT_EQ(format_ratio(8011.909634929129), "8012");
}

// run --repeat: with three repetitions a side the speedup carries its 95% interval (paired by
// round: statistics.h's paired_median_ratio); it holds the point and widens with the noise
// between the repetitions. With two it is a plain ratio: too few to say how sure.
TEST(Console, RepeatedSpeedupsCarryTheirInterval) {
  // fp32 at 100 ms an epoch and amp_fp16 at 50, epochs 1% apart; fp32's repetitions
  // `fp32_spread` apart (the machine moved).
  auto repeated = [](int reps, double fp32_spread) {
    Report rep = make_report();
    rep.runs.clear();
    for (int i = 0; i < reps; ++i)
      for (const auto& [mode, ms] : {std::pair{"fp32", 100.0}, std::pair{"amp_fp16", 50.0}}) {
        const double f = std::string(mode) == "fp32" ? 1 + fp32_spread * (i - 1) : 1;
        RunResult r = make_run(mode, ms * f, size_t(200) << 20);
        r.epochs[0].time_ms *= 0.99;
        r.epochs[2].time_ms *= 1.01;
        r.epoch_time_ms =
            compute_time_stats({r.epochs[0].time_ms, r.epochs[1].time_ms, r.epochs[2].time_ms});
        r.repetition = i + 1;
        rep.runs.push_back(r);
      }
    return rep;
  };
  // The interval of a row's "R.RRx (lo, hi)" cell.
  auto interval = [](const std::string& row) {
    std::pair<double, double> lh{0, 0};
    const size_t at = row.find("x (");
    if (at == std::string::npos ||
        std::sscanf(row.c_str() + at, "x (%lf, %lf)", &lh.first, &lh.second) != 2)
      ADD_FAILURE() << "no interval in: " << row;
    return lh;
  };
  const std::string steady = format_console(repeated(3, 0.0));
  EXPECT_TRUE(contains(lines_of(steady)[1], "speedup (95% CI)")) << steady;
  // The title says the speedup is not the ratio of the medians beside it.
  EXPECT_TRUE(contains(steady, "speedup: the median of each round's")) << steady;
  const std::string amp = line_with(steady, "amp_fp16");
  EXPECT_TRUE(contains(amp, "2.00x (")) << steady;
  const auto [lo, hi] = interval(amp);
  EXPECT_LE(lo, 2.0);
  EXPECT_GE(hi, 2.0);
  EXPECT_GT(lo, 1.9);
  EXPECT_LT(hi, 2.1);
  EXPECT_FALSE(contains(line_with(steady, " fp32 "), "(")) << steady;  // the baseline: 1.00x
  // The JSON's repeat_summary carries the same interval, per mode.
  const nlohmann::json js = to_json(repeated(3, 0.0))["repeat_summary"];
  ASSERT_EQ(js.size(), 2u) << js;
  EXPECT_EQ(js[0]["precision"], "fp32");
  EXPECT_EQ(js[0]["repetitions"], 3);
  EXPECT_TRUE(js[0]["speedup_vs_fp32"].is_null()) << js;
  const nlohmann::json& sp = js[1]["speedup_vs_fp32"];
  EXPECT_DOUBLE_EQ(sp["estimate"].get<double>(), 2.0) << js;
  EXPECT_NEAR(sp["ci95_low"].get<double>(), lo, 0.005) << js;  // the table's, to its 2 digits
  EXPECT_NEAR(sp["ci95_high"].get<double>(), hi, 0.005) << js;

  // Repetitions 10% apart in fp32 but not in amp_fp16: a wider interval.
  const auto [wlo, whi] = interval(line_with(format_console(repeated(3, 0.1)), "amp_fp16"));
  EXPECT_GT(whi - wlo, 2 * (hi - lo)) << wlo << " " << whi;

  // The CSV keeps a row per repetition; each amp_fp16 row carries the mode's interval.
  const auto rows = lines_of(format_csv(repeated(3, 0.0)));
  ASSERT_EQ(rows.size(), 7u);
  const auto head = split_csv_line(rows[0]);
  auto at = [&](const std::vector<std::string>& row, const char* name) {
    const auto i = std::find(head.begin(), head.end(), name);
    return i == head.end() ? std::string("missing") : row[static_cast<size_t>(i - head.begin())];
  };
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto row = split_csv_line(rows[i]);
    if (at(row, "precision") == "fp32") {
      EXPECT_EQ(at(row, "speedup_vs_fp32_ci95_low"), "") << rows[i];
      EXPECT_EQ(at(row, "speedup_vs_fp32_ci95_high"), "") << rows[i];
      continue;
    }
    EXPECT_DOUBLE_EQ(std::stod(at(row, "speedup_vs_fp32_ci95_low")), sp["ci95_low"].get<double>());
    EXPECT_DOUBLE_EQ(std::stod(at(row, "speedup_vs_fp32_ci95_high")),
                     sp["ci95_high"].get<double>());
  }

  const std::string two = format_console(repeated(2, 0.0));
  EXPECT_FALSE(contains(two, "95% CI")) << two;
  EXPECT_TRUE(to_json(repeated(2, 0.0))["repeat_summary"][1]["speedup_vs_fp32"].is_null());
  EXPECT_TRUE(contains(line_with(two, "amp_fp16"), "2.00x")) << two;
  const auto two_rows = lines_of(format_csv(repeated(2, 0.0)));
  ASSERT_EQ(two_rows.size(), 5u);
  EXPECT_EQ(at(split_csv_line(two_rows[2]), "speedup_vs_fp32_ci95_low"), "") << two_rows[2];

  // The same runs as three seeds (run --seeds 3, no --repeat): no interval anywhere, the CSV's
  // columns empty as the JSON (no repeat_summary) and the table have none.
  Report seeds = repeated(3, 0.0);
  for (RunResult& r : seeds.runs) {
    r.seed = static_cast<uint64_t>(*r.repetition);
    r.repetition.reset();
  }
  EXPECT_FALSE(to_json(seeds).contains("repeat_summary"));
  EXPECT_FALSE(contains(line_with(format_console(seeds), "amp_fp16"), "x ("))
      << format_console(seeds);
  const auto seed_rows = lines_of(format_csv(seeds));
  ASSERT_EQ(seed_rows.size(), 7u);
  for (size_t i = 1; i < seed_rows.size(); ++i) {
    const auto row = split_csv_line(seed_rows[i]);
    EXPECT_NE(at(row, "seed"), "") << seed_rows[i];
    EXPECT_EQ(at(row, "speedup_vs_fp32_ci95_low"), "") << seed_rows[i];
    EXPECT_EQ(at(row, "speedup_vs_fp32_ci95_high"), "") << seed_rows[i];
  }
}

// A speedup over repetitions is the median of the rounds' speedups, also for an even count,
// where the inverse of the median time ratio (the two middle ratios averaged) is another number:
// 0.97x for these four rounds (a helper's --repeat 4), whose middle speedups are 0.725 and 1.446.
TEST(Console, RepeatedSpeedupIsTheMedianOfTheRoundsSpeedups) {
  const double fp32_ms[] = {8.332, 11.394, 7.409, 12.010},
               bf16_ms[] = {12.015, 7.880, 10.219, 7.827};
  std::vector<RunResult> runs;
  for (int i = 0; i < 4; ++i) {
    for (const auto& [mode, ms] :
         {std::pair{"fp32", fp32_ms[i]}, std::pair{"amp_bf16", bf16_ms[i]}}) {
      RunResult r = make_run(mode, ms, size_t(1) << 20);
      for (EpochResult& e : r.epochs) e.time_ms = ms;
      r.epoch_time_ms = compute_time_stats({ms, ms, ms});
      r.repetition = i + 1;
      runs.push_back(r);
    }
  }
  std::vector<const RunResult*> fp32, bf16;
  for (const RunResult& r : runs) (r.precision == "fp32" ? fp32 : bf16).push_back(&r);
  const auto s = mpbench::repeated_speedup(fp32, bf16);
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->ratio, (7.409 / 10.219 + 11.394 / 7.880) / 2, 1e-12);
  EXPECT_LE(s->lo, s->ratio);
  EXPECT_GE(s->hi, s->ratio);
}

TEST(Console, DeviceMemoryColumnOnlyWithDeviceSamples) {
  Report rep = make_report();
  EXPECT_FALSE(contains(format_console(rep), "device)"));
  for (RunResult& r : rep.runs) {
    r.device = "cuda";
    r.memory.has_device = true;
    r.memory.device_peak = size_t(300) << 20;
  }
  rep.env = {{"device", "cuda"},
             {"gpu",
              {{"name", "NVIDIA H200"},
               {"compute_capability", "9.0"},
               {"memory_bytes", size_t(140) << 30},
               {"cuda_runtime_version", "13.0"}}},
             {"cpu", {{"name", "Xeon"}, {"threads", 16}}}};
  EXPECT_EQ(
      env_summary(rep),
      "mpbench 0.1.0 (abc123) · cuda: NVIDIA H200, sm 9.0, 140.00 GiB · CUDA 13.0 · CPU: Xeon "
      "(16 threads)");
  const std::string table = format_console(rep);
  EXPECT_TRUE(contains(table, "device mem")) << table;
  EXPECT_TRUE(contains(line_with(table, "amp_fp16"), "300.0 MiB")) << table;
  EXPECT_TRUE(contains(table, "cuda: NVIDIA H200")) << table;
}

TEST(Console, LongStatusWrapsInsideTheTable) {
  Report rep = make_report();
  rep.runs[3].status = RunStatus::Diverged;
  rep.runs[3].status_detail = std::string(40, 'a') + " " + std::string(200, 'b');
  const std::string table = format_console(rep);
  EXPECT_TRUE(contains(table, "diverged: aaaa")) << table;
  size_t widest = 0;
  for (const std::string& l : lines_of(table)) {
    if (!contains(l, "mnist_mlp")) widest = std::max(widest, display_width(l));
  }
  EXPECT_LE(widest, display_width(lines_of(table)[2])) << table;  // no line beyond the rule
  auto count_b = [](const std::string& s) {
    size_t n = 0;
    for (char c : s) n += c == 'b';
    return n;
  };
  rep.runs[3].status_detail.clear();
  EXPECT_EQ(count_b(table) - count_b(format_console(rep)), 200u);  // nothing lost to wrapping
}

TEST(Console, NonFiniteLossAndAsciiStyle) {
  Report rep = make_report();
  rep.runs[2].final_loss = std::numeric_limits<double>::quiet_NaN();
  const std::string ascii = format_console(rep, true);
  EXPECT_TRUE(contains(line_with(ascii, "amp_fp16"), "nan")) << ascii;
  for (unsigned char c : ascii) EXPECT_LT(c, 0x80) << ascii;
  EXPECT_TRUE(contains(ascii, "+/-")) << ascii;
}

// A loss scale is a whole number, often a power of two past 6 digits (2^22 after growth): in
// full, where {:g} wrote 2^22 as "4.1943e+06"; fractions and the huge keep 6 digits.
TEST(Console, LossScaleIsExactWhileWhole) {
  EXPECT_EQ(format_loss_scale(65536), "65536");
  EXPECT_EQ(format_loss_scale(4194304), "4194304");
  EXPECT_EQ(format_loss_scale(7126345.5), "7.12635e+06");
  EXPECT_EQ(format_loss_scale(std::ldexp(1.0, -12)), "0.000244141");
  EXPECT_EQ(format_loss_scale(std::ldexp(1.0, 60)), "1.15292e+18");
  Report rep = make_report();
  rep.runs[2].final_loss_scale = 16777216;
  EXPECT_TRUE(contains(line_with(format_console(rep), "amp_fp16"), "16777216"));
}

// A diverging run's huge finite loss (SGD at lr 100: 3.9e33) in exponent form, in the console and
// Markdown tables alike (one cell), never 34 digits that stretch them.
TEST(Console, HugeFiniteLossIsCompact) {
  EXPECT_EQ(format_loss(0.07123), "0.0712");
  EXPECT_EQ(format_loss(123456.78), "123456.7800");
  EXPECT_EQ(format_loss(3926919116218726185218507915919360.0), "3.927e+33");
  EXPECT_EQ(format_loss(-2e6), "-2e+06");
  EXPECT_EQ(format_loss(std::numeric_limits<double>::infinity()), "inf");
  Report rep = make_report();
  rep.runs[2].final_loss = 3926919116218726185218507915919360.0;
  for (const std::string& out : {format_console(rep), format_markdown(rep)}) {
    EXPECT_TRUE(contains(line_with(out, "amp_fp16"), "3.927e+33")) << out;
    EXPECT_FALSE(contains(out, "39269191")) << out;
  }
}

// Unsteady epoch times get a note under the table naming the run and the likely cause; steady
// ones (the other rows, 2% apart) and unfinished ones none.
TEST(Console, NotesUnsteadyEpochTimes) {
  Report rep = make_report();
  auto set_times = [](RunResult& r, std::vector<double> ms) {
    for (size_t e = 0; e < ms.size(); ++e) r.epochs[e].time_ms = ms[e];
    r.epoch_time_ms = compute_time_stats(ms);
  };
  set_times(rep.runs[1], {80, 120, 80});  // tf32: a busy machine in the middle
  set_times(rep.runs[2], {130, 40, 41});  // amp_fp16: a slow first epoch
  const std::string table = format_console(rep);
  EXPECT_TRUE(
      contains(table,
               " note: tf32: epoch times vary by 25% over its own epochs (80.00 to 120.0 ms); the "
               "machine was busy"))
      << table;
  EXPECT_TRUE(contains(table, " note: amp_fp16: epoch times vary by"));
  EXPECT_TRUE(contains(table, "raise train.warmup_steps"));
  EXPECT_FALSE(contains(table, "note: fp32"));
  EXPECT_FALSE(contains(table, "note: amp_bf16"));  // oom
  EXPECT_FALSE(contains(format_console(make_report()), "epoch times vary"));
  // Two epochs are enough: the table shows their ± already.
  Report two = make_report();
  two.runs[1].epochs.resize(2);
  set_times(two.runs[1], {80, 120});
  EXPECT_TRUE(contains(format_console(two), " note: tf32: epoch times vary by 28% over its own"))
      << format_console(two);
}

// One epoch has no spread between epochs: its quarters' mean step times stand in, so that a
// step that took a scheduler's slice does not pass as a 100x speedup unremarked (flag and note).
TEST(Console, OneEpochIsJudgedByItsQuarters) {
  Report rep = make_report();
  auto one_epoch = [](RunResult& r, std::vector<float> step_ms) {
    r.epochs.resize(1);
    r.steps.clear();
    r.steps.push_back(StepRecord{});
    r.steps.back().time_ms = std::nanf("");  // a warm-up step: not timed
    double sum = 0;
    for (float ms : step_ms) {
      r.steps.push_back(StepRecord{});
      r.steps.back().time_ms = ms;
      sum += ms;
    }
    r.epochs[0].time_ms = sum;
    r.epoch_time_ms = compute_time_stats({sum});
  };
  one_epoch(rep.runs[0], std::vector<float>(32, 1.0f));  // fp32: steady
  std::vector<float> spike(32, 1.0f);
  spike[17] = 281.0f;  // tf32: one step descheduled
  one_epoch(rep.runs[1], spike);
  const std::string table = format_console(rep);
  EXPECT_TRUE(contains(table, " note: tf32: one epoch, whose quarters' step times vary by"))
      << table;
  EXPECT_TRUE(contains(table, "(1.000 to 36.00 ms a step)")) << table;
  EXPECT_FALSE(contains(table, "note: fp32")) << table;
  const std::vector<std::string> f = mpbench::run_flags(rep.runs[1], rep.runs);
  EXPECT_NE(std::find(f.begin(), f.end(), "noisy"), f.end());
  EXPECT_TRUE(mpbench::run_flags(rep.runs[0], rep.runs).empty());
  // Too few steps for quarters that hold more than one or two: no judgement either way.
  spike.resize(31);
  one_epoch(rep.runs[1], spike);
  EXPECT_FALSE(mpbench::epoch_quarters(rep.runs[1]).has_value());
}

// Runs whose threads waited for CPUs that something else held (host_load: run_flags' busy) get
// one note per model, over the modes and runs flagged, though their epochs are steady: of
// several, the worst one's figures. A quiet run gets none.
TEST(Console, BusyRunsAreNotedThoughTheirEpochsAreSteady) {
  Report rep = make_report();
  const auto load = [](double waited, double steal = NAN) {
    return test::host_load(2, 2, 1.1, waited, steal);
  };
  rep.runs[0].host_load = load(0.02);  // fp32: quiet
  rep.runs[1].host_load = load(0.8);   // tf32
  rep.runs[2].host_load = load(1.0);   // amp_fp16
  EXPECT_TRUE(contains(format_markdown(rep),
                       "- note: tf32, amp_fp16: at worst, their 2 threads waited for a CPU 50% of "
                       "the time while their epochs ran: the machine was busy; time and speedup "
                       "are unreliable"))
      << format_markdown(rep);
  EXPECT_TRUE(contains(format_console(rep), "note: tf32, amp_fp16: at worst, their 2 threads"))
      << format_console(rep);
  // One run, and one whose hypervisor took its CPUs.
  rep.runs[2].host_load = load(0.02);
  EXPECT_TRUE(contains(format_markdown(rep),
                       "- note: tf32: its 2 threads waited for a CPU 40% of the time while its "
                       "epochs ran:"))
      << format_markdown(rep);
  rep.runs[1].host_load = load(0.02, 0.6);
  EXPECT_TRUE(contains(format_markdown(rep),
                       "- note: tf32: the hypervisor took 0.60 of its 2 "
                       "CPUs while its epochs ran:"))
      << format_markdown(rep);
  // Repetitions of a mode are counted, not named one by one.
  rep.runs[1].host_load = load(0.8);
  rep.runs[2].host_load = load(1.0);
  RunResult again = rep.runs[1];
  rep.runs[1].repetition = 1;
  again.repetition = 2;
  rep.runs.push_back(again);
  for (RunResult& r : rep.runs)
    if (r.precision != "tf32") r.repetition = 1;
  EXPECT_TRUE(contains(format_markdown(rep), "- note: tf32 (2 runs), amp_fp16: at worst, their"))
      << format_markdown(rep);
}

// In a sweep each note names its batch (a seed's run is at every batch), in the console and the
// Markdown alike; a failed row keeps its batch cell, its status across the numbers after it.
TEST(Console, SweepNotesAndFailedRowsNameTheBatch) {
  Report rep;
  rep.env = {{"device", "reference"}};
  for (int64_t batch : {32, 64}) {
    for (uint64_t seed : {1, 2}) {
      RunResult r = make_run("fp32", 100, size_t(200) << 20);
      r.batch_size = batch;
      r.seed = seed;
      if (seed == 2) {  // noisy at both batches, by different amounts
        const double slow = batch == 32 ? 150 : 200;
        for (size_t e = 0; e < 3; ++e) r.epochs[e].time_ms = e == 1 ? slow : 100;
        r.epoch_time_ms = compute_time_stats({100, slow, 100});
      }
      rep.runs.push_back(r);
    }
  }
  RunResult oom = make_run("amp_bf16", 0, size_t(3) << 30, RunStatus::Oom);
  oom.batch_size = 1024;
  oom.status_detail = "over the memory limit of 100.0 KiB";
  rep.runs.push_back(oom);
  const std::string table = format_console(rep);
  EXPECT_TRUE(contains(table, " note: fp32 batch 32 seed 2: epoch times vary by 25% over"))
      << table;
  EXPECT_TRUE(contains(table, " note: fp32 batch 64 seed 2: epoch times vary by 43% over"))
      << table;
  EXPECT_FALSE(contains(table, "note: fp32 seed 2")) << table;
  // mode │ batch │ seeds │ status: the batch where the table has it.
  EXPECT_TRUE(contains(line_with(table, " amp_bf16"),
                       " amp_bf16 │ 1,024 │     0 │ oom: over the memory limit of 100.0 KiB"))
      << table;
  const std::string md = format_markdown(rep);
  EXPECT_TRUE(contains(md, "- note: fp32 batch 32 seed 2: epoch times vary by 25%")) << md;
  EXPECT_TRUE(contains(md, "| amp_bf16 | 1,024 | 0 | **oom**: over the memory limit")) << md;

  // One batch: no batch in the notes, as before.
  Report one = make_report();
  one.runs[1].epochs[1].time_ms = 120;
  one.runs[1].epoch_time_ms = compute_time_stats({80, 120, 80});
  EXPECT_TRUE(contains(format_console(one), " note: tf32: epoch times vary"))
      << format_console(one);
}

// Runs of one mode that differ between themselves, each steady over its own epochs: the note
// says the spread between the seeds' (or the repetitions') median epoch times, what the row's
// time is the median of. The seeds train the same shapes, so it is the machine's noise too.
TEST(Console, SpreadBetweenSeedsOrRepetitionsGetsANote) {
  for (const bool seeds : {true, false}) {
    Report rep;
    rep.env = {{"device", "reference"}};
    const double medians[] = {100, 130, 104};
    for (int64_t i = 0; i < 3; ++i) {
      RunResult r = make_run("fp32", medians[i], size_t(200) << 20);
      if (seeds)
        r.seed = static_cast<uint64_t>(i + 1);
      else
        r.repetition = i + 1;
      rep.runs.push_back(r);
    }
    const std::string between = seeds ? "seeds" : "repetitions";
    const std::string table = format_console(rep);
    EXPECT_TRUE(contains(table, " note: fp32: median epoch times vary by ")) << table;
    EXPECT_TRUE(
        contains(table, "% between " + between + " (100.0 to 130.0 ms): the machine was busy"))
        << table;
    EXPECT_FALSE(contains(table, "over its own epochs")) << table;  // each run was steady
    EXPECT_TRUE(contains(format_markdown(rep), "% between " + between + " (100.0 to 130.0 ms)"))
        << format_markdown(rep);
    rep.runs[1] = make_run("fp32", 108, size_t(200) << 20);  // within 10%: no note
    if (seeds)
      rep.runs[1].seed = 2;
    else
      rep.runs[1].repetition = 2;
    EXPECT_FALSE(contains(format_console(rep), "median epoch times vary")) << format_console(rep);
  }
}

// Without UTF-8 the notes under a table are ASCII too: a seeded run's noise note spelled the
// table's "±" in UTF-8 where the table itself said "+/-".
TEST(Console, AsciiNotesUnderTheCLocale) {
  Report rep;
  rep.env = {{"device", "reference"}};
  for (uint64_t seed : {1, 2}) {
    RunResult r = make_run("fp32", 100, size_t(200) << 20);
    r.seed = seed;
    for (size_t e = 0; e < 3; ++e) r.epochs[e].time_ms = e == 1 ? 200 : 100;
    r.epoch_time_ms = compute_time_stats({100, 200, 100});
    rep.runs.push_back(r);
  }
  const std::string table = format_console(rep, /*ascii=*/true);
  EXPECT_TRUE(contains(table, "(the table's +/- is the spread between the seeds' medians)"))
      << table;
  for (unsigned char c : table) ASSERT_LT(c, 0x80) << table;
  EXPECT_TRUE(contains(format_console(rep), "(the table's ± is the spread")) << "UTF-8 keeps it";
}

// Once under the tables of a CPU report with a mode other than fp32: the times are of the
// emulation. Not for a GPU report, nor for fp32 alone.
TEST(Console, CpuRunsSayTheirTimesAreOfTheEmulation) {
  Report rep = make_report();
  const std::string cpu = format_console(rep);
  EXPECT_EQ(cpu.find("emulated tf32/16-bit"), cpu.rfind("emulated tf32/16-bit")) << cpu;
  EXPECT_TRUE(contains(cpu, "not of low-precision hardware")) << cpu;
  for (RunResult& r : rep.runs) r.device = "cuda";
  EXPECT_FALSE(contains(format_console(rep), "emulated"));
  Report fp32 = make_report();
  fp32.runs.resize(1);
  EXPECT_FALSE(contains(format_console(fp32), "emulated"));
}

// On the native CPU a note says why amp_bf16 cannot beat fp32 there: bf16 converted in software,
// or bf16 GEMMs measured no faster than fp32's (an Intel Xeon with AVX512-BF16 and no AMX for the
// process measured 0.147 against 0.223 TFLOP/s). None where bf16 is faster, nor without an
// amp_bf16 row that trained.
TEST(Console, NativeCpuSaysWhenBf16GemmsAreNoFaster) {
  Report rep = make_report();
  rep.runs = {make_run("fp32", 100, size_t(200) << 20),
              make_run("amp_bf16", 140, size_t(150) << 20)};
  for (RunResult& r : rep.runs) r.device = "cpu";
  rep.env["device"] = "cpu";
  rep.env["native_cpu"] = {{"isa", "avx512_core_bf16"},
                           {"bf16_gemm", "native"},
                           {"amx_granted", false},
                           {"cpu_flags", {"avx2", "avx512", "avx512_bf16"}},
                           {"gemm_tflops", {{"fp32", 0.223}, {"amp_bf16", 0.147}}}};
  const std::string slow = format_console(rep);
  EXPECT_TRUE(contains(slow, "bf16 GEMMs measured 0.147 TFLOP/s against 0.223 in fp32")) << slow;
  EXPECT_TRUE(contains(slow, "avx512_core_bf16, no AMX")) << slow;
  EXPECT_FALSE(contains(slow, "emulated")) << slow;
  rep.env["native_cpu"]["cpu_flags"].push_back("amx_bf16");  // the CPU has it, the process not
  EXPECT_TRUE(contains(format_console(rep), "AMX not granted to this process"));
  EXPECT_TRUE(contains(format_markdown(rep), "bf16 GEMMs measured"));

  rep.env["native_cpu"]["gemm_tflops"]["amp_bf16"] = 0.41;  // Zen 4: bf16 twice fp32
  EXPECT_FALSE(contains(format_console(rep), "note: this CPU")) << format_console(rep);
  rep.env["native_cpu"]["bf16_gemm"] = "converted";
  rep.env["native_cpu"]["gemm_tflops"]["amp_bf16"] = 0.076;
  const std::string converted = format_console(rep);
  EXPECT_TRUE(contains(converted, "without bf16 instructions")) << converted;
  EXPECT_TRUE(contains(format_markdown(rep), "measured 0.076 TFLOP/s against 0.223 in fp32"))
      << format_markdown(rep);
  rep.runs[1].status = RunStatus::Unsupported;
  EXPECT_FALSE(contains(format_console(rep), "without bf16 instructions"));
  EXPECT_FALSE(native_bf16_limit(nlohmann::json()).has_value());
}

TEST(Console, EmptyReport) {
  EXPECT_EQ(format_console(Report{}), "no runs\n");
}

// ---- CSV -----------------------------------------------------------------------------------

TEST(Csv, HeaderRowsAndValues) {
  const std::string csv = format_csv(make_report());
  const auto ls = lines_of(csv);
  ASSERT_EQ(ls.size(), 5u);  // header + 4 runs
  const auto header = split_csv_line(ls[0]);
  for (const char* col : {"model",
                          "family",
                          "precision",
                          "device",
                          "status",
                          "batch_size",
                          "epochs",
                          "epoch_time_median_ms",
                          "epoch_time_cv",
                          "samples_per_second",
                          "tflops",
                          "peak_memory_training_bytes",
                          "peak_memory_data_bytes",
                          "peak_memory_tracked_bytes",
                          "peak_memory_device_bytes",
                          "final_accuracy",
                          "final_loss",
                          "speedup_vs_fp32",
                          "memory_vs_fp32",
                          "skipped_steps",
                          "final_loss_scale"}) {
    EXPECT_NE(std::find(header.begin(), header.end(), col), header.end()) << col;
  }
  auto col = [&](const char* name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  for (size_t i = 1; i < ls.size(); ++i) {
    EXPECT_EQ(split_csv_line(ls[i]).size(), header.size()) << ls[i];
  }
  const auto amp = split_csv_line(ls[3]);
  EXPECT_EQ(amp[col("precision")], "amp_fp16");
  EXPECT_DOUBLE_EQ(std::stod(amp[col("speedup_vs_fp32")]), 2.5);
  EXPECT_DOUBLE_EQ(std::stod(amp[col("memory_vs_fp32")]), 0.55);
  EXPECT_EQ(amp[col("final_loss_scale")], "32768");
  EXPECT_EQ(amp[col("skipped_steps")], "3");
  EXPECT_EQ(amp[col("peak_memory_device_bytes")], "");
  EXPECT_EQ(std::stoull(amp[col("peak_memory_training_bytes")]), size_t(110) << 20);
  EXPECT_EQ(std::stoull(amp[col("peak_memory_data_bytes")]), size_t(64) << 20);
  EXPECT_EQ(std::stoull(amp[col("peak_memory_tracked_bytes")]), size_t(174) << 20);
  EXPECT_DOUBLE_EQ(std::stod(amp[col("epoch_time_median_ms")]), 40);

  EXPECT_EQ(amp[col("ranks")], "1");
  Report dp = make_report();
  dp.runs[0].data_parallel = DataParallelResult{};
  dp.runs[0].data_parallel->ranks = 2;
  EXPECT_EQ(split_csv_line(lines_of(format_csv(dp))[1])[col("ranks")], "2");

  // Three epochs have a spread; one has none: its stddev and cv cells are empty, never 0.
  const auto fp32 = split_csv_line(ls[1]);
  EXPECT_EQ(fp32[col("final_loss_scale")], "");  // no loss scaling: no scale, not 1
  EXPECT_NE(fp32[col("epoch_time_stddev_ms")], "");
  EXPECT_NE(fp32[col("epoch_time_cv")], "");
  Report one = make_report();
  one.runs[0].epochs.resize(1);
  one.runs[0].epoch_time_ms = compute_time_stats({100});
  const auto single = split_csv_line(lines_of(format_csv(one))[1]);
  EXPECT_EQ(single[col("epoch_time_stddev_ms")], "");
  EXPECT_EQ(single[col("epoch_time_cv")], "");
  EXPECT_DOUBLE_EQ(std::stod(single[col("epoch_time_median_ms")]), 100);

  const auto oom = split_csv_line(ls[4]);
  EXPECT_EQ(oom[col("status")], "oom");
  EXPECT_EQ(oom[col("speedup_vs_fp32")], "");
  EXPECT_EQ(oom[col("epoch_time_median_ms")], "");
}

TEST(Csv, QuotesCommasQuotesAndNewlines) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("a\rb"), "\"a\rb\"");  // a lone CR ends a record for some readers too

  Report rep = make_report();
  rep.runs[3].status_detail = "cudaMalloc failed: \"out of memory\", 2 GiB";
  rep.runs[0].model = "mlp, wide";
  rep.runs[1].model = "mlp, wide";
  const std::string csv = format_csv(rep);
  const auto ls = lines_of(csv);
  ASSERT_EQ(ls.size(), 5u);
  const auto header = split_csv_line(ls[0]);
  bool found_detail = false, found_model = false;
  for (size_t i = 1; i < ls.size(); ++i) {
    const auto f = split_csv_line(ls[i]);
    EXPECT_EQ(f.size(), header.size()) << ls[i];
    for (const auto& v : f) {
      found_detail = found_detail || v == "cudaMalloc failed: \"out of memory\", 2 GiB";
      found_model = found_model || v == "mlp, wide";
    }
  }
  EXPECT_TRUE(found_detail) << csv;
  EXPECT_TRUE(found_model) << csv;
}

// ---- Markdown ------------------------------------------------------------------------------

TEST(Markdown, OneTablePerModelWithTheRightRows) {
  Report rep = make_report();
  RunResult other = make_run("fp32", 10, 1000);
  other.model = "tiny";
  rep.runs.push_back(other);
  rep.runs[3].status_detail = "a | b";
  const std::string md = format_markdown(rep);
  EXPECT_TRUE(contains(lines_of(md)[0], "mpbench 0.1.0 (abc123)")) << md;
  EXPECT_TRUE(contains(lines_of(md)[0], "reference: Test CPU (2 threads)")) << md;

  size_t tables = 0, table_lines = 0, rules = 0;
  for (const std::string& l : lines_of(md)) {
    if (l.rfind("### ", 0) == 0) ++tables;
    if (l.rfind("|", 0) == 0) {
      ++table_lines;
      if (contains(l, "---")) ++rules;
      // Every table line has the same number of unescaped pipes as the header.
      size_t pipes = 0;
      for (size_t i = 0; i < l.size(); ++i) pipes += l[i] == '|' && (i == 0 || l[i - 1] != '\\');
      EXPECT_EQ(pipes, 11u) << l;  // 10 columns
    }
  }
  EXPECT_EQ(tables, 2u) << md;
  EXPECT_EQ(rules, 2u) << md;
  EXPECT_EQ(table_lines, 2u * 2 + 5) << md;  // header + rule per table, 4 + 1 runs
  EXPECT_TRUE(contains(md, "2.50x")) << md;
  EXPECT_TRUE(contains(md, "**oom**: a \\| b")) << md;
  // The rule row aligns the number columns right, the names left.
  EXPECT_TRUE(contains(md, "\n| --- | ---: | ---: |")) << md;
  EXPECT_FALSE(contains(md, "| --- | --- |")) << md;
}

// A file from before the device was recorded names its CPU alone: that CPU was the device, said
// as "cpu".
TEST(Markdown, AnEnvWithoutADeviceSaysItsCpuIsTheDevice) {
  Report rep = make_report();
  rep.env.erase("device");
  EXPECT_EQ(env_summary(rep), "mpbench 0.1.0 (abc123) · cpu: Test CPU (2 threads)");
  EXPECT_TRUE(contains(lines_of(format_markdown(rep))[0], "· cpu: Test CPU (2 threads)"));
}

// One rule for text from outside in every Markdown writer: literal, whatever it holds.
TEST(Markdown, TextFromOutsideIsLiteral) {
  EXPECT_EQ(markdown_cell("tiny_mlp amp_bf16 1.45x (1.41, 1.49) ± 2.0%"),
            "tiny_mlp amp_bf16 1.45x (1.41, 1.49) ± 2.0%");
  EXPECT_EQ(markdown_cell("<img src=x onerror=alert(1)> & &lt;"),
            "&lt;img src=x onerror=alert(1)&gt; &amp; &amp;lt;");
  EXPECT_EQ(markdown_cell("a | b"), "a \\| b");
  EXPECT_EQ(markdown_cell("`c` *e* _f_ __init__ [l](u) ~~s~~ x # \\"),
            "\\`c\\` \\*e\\* \\_f\\_ \\_\\_init\\_\\_ \\[l\\](u) \\~\\~s\\~\\~ x \\# \\\\");
  EXPECT_EQ(markdown_cell("a\nb\r\tc\x1b[1m\x7f\xc2\x85"),
            "a\\\\nb\\\\r\\\\tc\\\\x1b\\[1m\\\\x7f\\\\u{0085}");
  // Bytes that are not UTF-8 (a Latin-1 file name) as C writes them: a step summary is UTF-8.
  EXPECT_EQ(markdown_cell("r\xe9s\xff caf\u00e9"), "r\\\\xe9s\\\\xff caf\u00e9");
  EXPECT_EQ(markdown_cell("a\u202Eb"), "a\\\\u{202E}b");  // a bidi override

  // Through run --md's writer: a hand-edited status_detail and device name stay in their cell.
  Report rep = make_report();
  rep.env["cpu"]["name"] = "<b>CPU</b>";
  rep.runs[3].status_detail = "<img src=x onerror=alert(1)> | **x**\nnext";
  const std::string md = format_markdown(rep);
  EXPECT_EQ(md.find('<'), std::string::npos) << md;
  EXPECT_TRUE(contains(md, "reference: &lt;b&gt;CPU&lt;/b&gt; (2 threads)")) << md;
  EXPECT_TRUE(contains(md,
                       "| amp_bf16 | **oom**: &lt;img src=x onerror=alert(1)&gt; \\| "
                       "\\*\\*x\\*\\*\\\\nnext |"))
      << md;
  EXPECT_FALSE(contains(md, "\nnext")) << md;
  // A note names its run by the file's mode text: escaped as any cell.
  Report noisy = make_report();
  noisy.runs[1].precision = "<b>x|y";
  for (size_t e = 0; e < 3; ++e) noisy.runs[1].epochs[e].time_ms = e == 1 ? 120 : 80;
  noisy.runs[1].epoch_time_ms = compute_time_stats({80, 120, 80});
  const std::string noted = format_markdown(noisy);
  EXPECT_TRUE(contains(noted, "- note: &lt;b&gt;x\\|y: epoch times vary")) << noted;
  EXPECT_EQ(noted.find('<'), std::string::npos) << noted;
}

TEST(Progress, LineShowsPercentCountsEtaAndSuffix) {
  const std::string l = Progress::format_line("mnist fp32", 50, 200, 10.0, "loss 0.123", 100);
  EXPECT_TRUE(contains(l, "mnist fp32")) << l;
  EXPECT_TRUE(contains(l, " 25%")) << l;
  EXPECT_TRUE(contains(l, "50/200")) << l;
  EXPECT_TRUE(contains(l, "ETA 0:30")) << l;  // 10 s for a quarter: 30 s left
  EXPECT_TRUE(contains(l, "loss 0.123")) << l;
  EXPECT_TRUE(contains(l, "[#######")) << l;
  EXPECT_LT(display_width(l), 100u);

  const std::string narrow = Progress::format_line("x", 1, 3, 1.0, "a long suffix here", 30);
  EXPECT_LE(display_width(narrow), 29u) << narrow;
  // Narrow terminals drop whole fields, never half a number, and keep the percentage and counts
  // ("... epoch 2 | loss 1" for 1.471 at 80 columns; no percentage at 40).
  const std::string label = "tiny_gpt amp_fp16 (spec 1/1, mode 1/1)";
  for (int width : {40, 50, 60, 80}) {
    const std::string l =
        Progress::format_line(label, 140, 258, 1.0, "epoch 2 | loss 1.471 | acc 12.5%", width);
    EXPECT_LE(display_width(l), static_cast<size_t>(width - 1)) << l;
    EXPECT_TRUE(contains(l, "54% ")) << width << ": " << l;
    EXPECT_TRUE(contains(l, "140/258")) << width << ": " << l;
    EXPECT_TRUE(!contains(l, "loss") || contains(l, "loss 1.471 | acc 12.5%")) << l;
    EXPECT_TRUE(!contains(l, "ETA") || contains(l, "ETA 0:01")) << l;
  }
  const std::string start = Progress::format_line("x", 0, 3, 1.0, "", 80);
  EXPECT_TRUE(contains(start, "ETA --:--")) << start;
  const std::string hours = Progress::format_line("x", 1, 3, 3600.0, "", 80);
  EXPECT_TRUE(contains(hours, "ETA 2:00:00")) << hours;
  // An hour exactly is already shown with hours.
  const std::string hour = Progress::format_line("x", 1, 2, 3600.0, "", 80);
  EXPECT_TRUE(contains(hour, "ETA 1:00:00")) << hour;
}

TEST(Progress, TheSuffixGoesFirstAndTheBarNeedsRoom) {
  // Too narrow for the suffix: it goes, and the ETA stays.
  const std::string l =
      Progress::format_line("L", 5, 10, 1.0, "epoch 1 | loss 1.23 acc 50.00%", 40);
  EXPECT_TRUE(contains(l, "ETA 0:01")) << l;
  EXPECT_FALSE(contains(l, "epoch")) << l;
  // Six columns left over: too few for a bar that says anything, so none is drawn.
  const std::string cramped = Progress::format_line("L", 5, 10, 1.0, "", 30);
  EXPECT_FALSE(contains(cramped, "[")) << cramped;
  EXPECT_TRUE(contains(cramped, "5/10 ETA 0:01")) << cramped;
}

// The line's fields at their exact edges: a done count past the total is the total; under 11
// columns the line still takes 10 (the percentage and the counts), the label going first; a
// suffix that fits exactly stays; a bar of exactly 10 columns is drawn, and no bar is wider than
// 30; counts without the ETA where the ETA does not fit, never half of it.
TEST(Progress, TheLinesFieldsAtTheirEdges) {
  EXPECT_EQ(Progress::format_line("L", 5, 3, 1.0, "", 80).find("5/3"), std::string::npos);
  const std::string over = Progress::format_line("L", 5, 3, 1.0, "", 80);
  EXPECT_TRUE(contains(over, "100% [##############################] 3/3")) << over;
  EXPECT_EQ(Progress::format_line("x", 1, 3, 1.0, "", 5), "  33%  1/3");
  const std::string long_counts = Progress::format_line("x", 100, 1000, 1.0, "", 5);
  EXPECT_EQ(long_counts.rfind("  10%", 0), 0u) << long_counts;  // the label went first
  EXPECT_EQ(Progress::format_line("L", 5, 10, 1.0, "s", 25), "L  50%  5/10 ETA 0:01  s");
  EXPECT_EQ(Progress::format_line("L", 5, 10, 1.0, "", 34), "L  50% [#####.....] 5/10 ETA 0:01");
  EXPECT_TRUE(
      contains(Progress::format_line("x", 0, 3, 1.0, "", 200), "[" + std::string(30, '.') + "]"));
  EXPECT_EQ(Progress::format_line("L", 5, 10, 1.0, "", 21), "L  50%  5/10");
}

// A label cut to fit is cut between characters, not inside one's UTF-8 bytes.
TEST(Progress, ALabelIsCutBetweenCharacters) {
  std::string label;
  for (int i = 0; i < 40; ++i) label += "\xC3\xA9";  // é
  const std::string l = Progress::format_line(label, 1, 3, 1.0, "", 30);
  EXPECT_LE(display_width(l), 29u) << l;
  EXPECT_EQ(std::count(l.begin(), l.end(), '\xC3'), std::count(l.begin(), l.end(), '\xA9')) << l;
  EXPECT_GT(std::count(l.begin(), l.end(), '\xC3'), 0) << l;
}

TEST(Progress, DisabledOrShortWorkDrawsNothing) {
  // stderr is captured by the test runner, so drawing would show up there.
  ::testing::internal::CaptureStderr();
  {
    Progress off("off", 10, false);
    for (int i = 0; i <= 10; ++i) off.update(i, "loss 1");
    off.finish();
    Progress fast("fast", 10, true);  // runs well under a second
    for (int i = 0; i <= 10; ++i) fast.update(i, "loss 1");
    fast.finish();
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Progress, DrawsAfterOneSecondAndClearsOnFinish) {
  ::testing::internal::CaptureStderr();
  {
    Progress bar("slow", 4, true);
    bar.update(1, "loss 0.5");
    usleep(1100 * 1000);
    bar.update(2, "loss 0.25");
    bar.update(3, "loss 0.1");  // within 100 ms of the last draw: skipped
    bar.finish();
    bar.update(4, "late");  // after finish: nothing
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "\rslow  50%")) << err;
  EXPECT_TRUE(contains(err, "loss 0.25")) << err;
  EXPECT_FALSE(contains(err, "loss 0.5")) << err;
  EXPECT_FALSE(contains(err, "loss 0.1")) << err;
  EXPECT_FALSE(contains(err, "late")) << err;
  EXPECT_EQ(err.substr(err.size() - 4), "\r\x1b[K") << err;
}

// A first step longer than the wait before the bar shows (a big model on the reference) showed
// nothing until it ended: the timer draws the bar meanwhile, its ETA unknown, and stops at
// finish().
TEST(Progress, ATimerDrawsTheBarWhileAStepRuns) {
  char path[] = "/tmp/mpbench_progress_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  auto written = [&] { return lseek(fd, 0, SEEK_END); };
  {
    Progress bar("long step", 3, true);
    bar.update(0, "epoch 1");
    // No update follows; the timer must draw (within 20 s, however busy the machine).
    for (int i = 0; i < 200 && written() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    bar.finish();
  }
  std::fflush(stderr);
  const off_t after_finish = written();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const off_t later = written();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string err(static_cast<size_t>(later), '\0');
  ASSERT_EQ(pread(fd, err.data(), err.size(), 0), later);
  close(fd);
  std::remove(path);
  EXPECT_TRUE(contains(err, "\rlong step   0%")) << err;
  EXPECT_TRUE(contains(err, "ETA --:--  epoch 1")) << err;
  EXPECT_EQ(err.substr(err.size() - 4), "\r\x1b[K") << err;
  EXPECT_EQ(later, after_finish) << "drawn after finish: " << err;
}

// A first Ctrl-C while images were generated (a resnet spec's split of 2^20 floats or more,
// made on several threads) threw from the progress callback with the threads still joinable:
// std::terminate, exit 134, the finished runs' tables lost. The data are made whole; the run
// stops after them. In a child process: the handlers and the pending stop are process-wide.
TEST(Progress, AStopAskedForWhileImagesAreMadeWaitsForThem) {
  const Spec spec = parse_spec(
      R"({"name": "img", "model": {"type": "resnet_bottleneck", "image_size": 32,
          "in_channels": 16, "width": 4, "out_channels": 16, "blocks": 1, "num_classes": 4},
          "data": {"type": "synthetic", "train_samples": 256, "eval_samples": 16}})",
      "img.json");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    // Started with SIGINT ignored (a background job of a script, as CTest may be), the handlers
    // would rightly keep it so: this is about what they do once installed.
    signal(SIGINT, SIG_DFL);
    install_interrupt_handlers();
    set_interrupt_mode(InterruptMode::AfterStep);
    raise(SIGINT);
    if (!interrupt_requested()) _exit(3);
    const Dataset d = make_dataset_with_progress(spec, true);
    _exit(d.train_size() == 256 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace mpbench
