// One output contract (issue 29): every JSON file mpbench writes starts with the same header
// (schema_version, kind, tool, provenance); `report` draws the kinds it can (run, profile,
// explain, maxbatch) and refuses the others in one line naming the kind.
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/progress.h"
#include "test_util.h"

using mpbench::test::count_lines;
using mpbench::test::has_text;
using mpbench::test::read_file;
using mpbench::test::run_shell;
using nlohmann::json;

namespace {

class OutputContract : public mpbench::test::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    spec_ = write("small.json", mpbench::test::kSmallSpec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Runs `args` (exit 0 expected) and returns the JSON it wrote to `file` (or stdout when empty).
  json written(const std::string& args, const std::string& file) {
    const auto r = run(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return json::parse(file.empty() ? r.out : read_file(path(file)));
  }
  std::string spec_;
};

TEST_F(OutputContract, EveryJsonFileHasTheCommonHeader) {
  const std::string cpu = " --device reference --quiet";
  const std::vector<std::pair<std::string, json>> files = {
      {"run", written("run " + spec_ + cpu + " --json " + path("run.json"), "run.json")},
      {"profile",
       written("profile " + spec_ + cpu + " --steps 2 --json " + path("p.json"), "p.json")},
      {"explain",
       written("explain " + spec_ + cpu + " --steps 2 --json " + path("e.json"), "e.json")},
      {"inspect", written("inspect " + spec_ + " --json " + path("i.json"), "i.json")},
      {"maxbatch", written("maxbatch " + spec_ + cpu +
                               " --precisions fp32 --memory-limit 256KiB --json " + path("m.json"),
                           "m.json")},
      {"compare",
       written("compare " + path("run.json") + " " + path("run.json") + " --json " + path("c.json"),
               "c.json")},
      {"devices", written("devices --json", "")},
      {"validate", written("validate " + spec_ + " --json " + path("v.json"), "v.json")}};
  for (const auto& [kind, j] : files) {
    SCOPED_TRACE(kind);
    EXPECT_EQ(j.value("schema_version", 0), 1);
    EXPECT_EQ(j.value("kind", ""), kind);
    ASSERT_TRUE(j.contains("tool"));
    EXPECT_EQ(j["tool"].value("name", ""), "mpbench");
    EXPECT_FALSE(j["tool"].value("version", "").empty());
    EXPECT_TRUE(j["tool"].contains("git"));
    ASSERT_TRUE(j.contains("provenance"));
    EXPECT_FALSE(j["provenance"].value("time_utc", "").empty());
    EXPECT_TRUE(j["provenance"].contains("host"));
    EXPECT_TRUE(j["provenance"]["command"].is_array());
  }
  EXPECT_EQ(files[7].second["specs"][0]["name"], "small");  // validate says what it checked
}

// `report` draws an explain and a maxbatch file as sections of their own (with or without
// result files), in the page and the Markdown; other kinds are one line naming the kind.
TEST_F(OutputContract, ReportDrawsExplainAndMaxbatchAndRefusesOtherKinds) {
  const std::string cpu = " --device reference --quiet";
  ASSERT_EQ(run("run " + spec_ + cpu + " --json " + path("run.json")).code, 0);
  ASSERT_EQ(run("explain " + spec_ + cpu + " --steps 2 --json " + path("e.json")).code, 0);
  ASSERT_EQ(run("maxbatch " + spec_ + cpu + " --precisions fp32 --memory-limit 256KiB --json " +
                path("m.json"))
                .code,
            0);
  for (const std::string& inputs :
       {path("e.json") + " " + path("m.json"),
        path("run.json") + " " + path("e.json") + " " + path("m.json")}) {
    SCOPED_TRACE(inputs);
    const auto r = run("report " + inputs + " --html " + path("r.html") + " --md " + path("r.md"));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string html = read_file(path("r.html")), md = read_file(path("r.md"));
    EXPECT_TRUE(has_text(html, "Why a mode helped: small")) << html.substr(0, 400);
    EXPECT_TRUE(has_text(html, "amp_bf16 vs fp32"));
    EXPECT_TRUE(has_text(html, "Largest batch that fits"));
    EXPECT_TRUE(has_text(html, "chart-maxbatch"));
    EXPECT_TRUE(has_text(md, "## Why a mode helped: small"));
    EXPECT_TRUE(has_text(md, "| small | fp32 |"));
  }
  ASSERT_EQ(run("inspect " + spec_ + " --json " + path("i.json")).code, 0);
  ASSERT_EQ(
      run("compare " + path("run.json") + " " + path("run.json") + " --json " + path("c.json"))
          .code,
      0);
  ASSERT_EQ(run("validate " + spec_ + " --json " + path("v.json")).code, 0);
  for (const auto& [file, kind] :
       std::vector<std::pair<std::string, std::string>>{{"i.json", "an inspect file"},
                                                        {"c.json", "a compare file"},
                                                        {"v.json", "a validate file"}}) {
    const auto r = run("report " + path(file) + " --html " + path("x.html"));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_TRUE(has_text(r.err, kind)) << r.err;
    // compare takes result files only: an explain file is named as one.
    const auto c = run("compare " + path("e.json") + " " + path("run.json"));
    EXPECT_EQ(c.code, 2);
    EXPECT_TRUE(has_text(c.err, "an explain file (mpbench explain --json)")) << c.err;
  }
  // A model spec, the likeliest mistake, is named as one by both (it read "schema_version:
  // missing").
  for (const std::string& cmd : {"report " + spec_ + " --html " + path("x.html"),
                                 "compare " + spec_ + " " + path("run.json")}) {
    const auto r = run(cmd);
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_TRUE(has_text(r.err, spec_ + ": a model spec (what mpbench run trains")) << r.err;
  }
}

// report reads what older mpbench wrote (a maxbatch file without statuses, an explain file
// without bounds) and refuses what none could have: an unsupported mode with a batch, an ok
// profile without a step time or with one past any run's.
TEST_F(OutputContract, ReportReadsOlderFilesAndRefusesImpossibleOnes) {
  const std::string cpu = " --device reference --quiet";
  const json maxbatch =
      written("maxbatch " + spec_ + cpu + " --precisions fp32 --memory-limit 256KiB --json " +
                  path("m.json"),
              "m.json");
  const json explain =
      written("explain " + spec_ + cpu + " --steps 2 --json " + path("e.json"), "e.json");
  const json profile =
      written("profile " + spec_ + cpu + " --steps 2 --json " + path("p.json"), "p.json");
  // A profile is drawn beside its model's runs, so those go with it.
  ASSERT_EQ(run("run " + spec_ + cpu + " --json " + path("run.json")).code, 0);
  auto report = [&](const std::string& name, json j, const std::function<void(json&)>& change) {
    change(j);
    write(name, j.dump());
    const std::string runs = j.contains("profiles") ? path("run.json") + " " : "";
    return run("report " + runs + path(name) + " --html " + path("r.html"));
  };
  auto read = [&](const std::string& name, const json& j,
                  const std::function<void(json&)>& change) {
    const auto r = report(name, j, change);
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
  };
  read("old_m.json", maxbatch, [](json& j) {
    for (json& e : j["max_batch"]) e.erase("status");
  });
  read("old_e.json", explain, [](json& j) { j["comparisons"][0].erase("bound"); });

  auto refused = [&](const std::string& name, const json& j,
                     const std::function<void(json&)>& change, const std::string& needle) {
    const auto r = report(name, j, change);
    EXPECT_EQ(r.code, 2) << name << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_TRUE(has_text(r.err, needle)) << name << ": " << r.err;
  };
  refused(
      "unsup.json", maxbatch, [](json& j) { j["max_batch"][0]["status"] = "unsupported"; },
      "unsup.json: max_batch[0].max_batch: expected null for an unsupported mode");
  ASSERT_EQ(profile["profiles"][0]["status"], "ok");
  read("p.json", profile, [](json&) {});
  refused(
      "null.json", profile, [](json& j) { j["profiles"][0]["step_time_ms"] = nullptr; },
      "null.json: profiles[0].step_time_ms: ");
  refused(
      "huge.json", profile, [](json& j) { j["profiles"][0]["step_time_ms"] = 1e300; },
      "huge.json: profiles[0].step_time_ms: ");
}

// report --md is pasted into step summaries and merge-request comments: a file name, a
// status_detail, a device's name, an explain file's `to` and a provenance.commit are text from
// outside, literal there (no raw HTML, no table cell or heading split by a | or a line break).
TEST_F(OutputContract, ReportMarkdownKeepsTextFromTheFilesLiteral) {
  const std::string cpu = " --device reference --quiet";
  ASSERT_EQ(run("run " + spec_ + cpu + " --json " + path("run.json")).code, 0);
  ASSERT_EQ(run("explain " + spec_ + cpu + " --steps 2 --json " + path("e.json")).code, 0);
  const std::string evil = "<img src=x onerror=alert(1)>";
  json j = json::parse(read_file(path("run.json")));
  j["runs"][1]["status"] = "failed";
  j["runs"][1]["status_detail"] = evil + " | *x*\nnext";
  j["env"]["cpu"]["name"] = "CPU " + evil;  // the device's name (a run's device is one of three)
  j["provenance"]["commit"] = evil;
  write(evil + ".json", j.dump());
  write("a\nb.json", read_file(path("run.json")));
  json e = json::parse(read_file(path("e.json")));
  e["comparisons"][0]["to"] = evil + "|x";
  write("e2.json", e.dump());

  const std::string evil_file = "'" + path(evil + ".json") + "'";
  auto r = run("report " + evil_file + " '" + path("a\nb.json") + "' " + path("e2.json") +
               " --html " + path("r.html") + " --md " + path("r.md"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::string md = read_file(path("r.md"));
  EXPECT_EQ(md.find("<img"), std::string::npos) << md;
  // One heading a file, its name on one line (the line break shown, not taken).
  EXPECT_TRUE(has_text(md, "/&lt;img src=x onerror=alert(1)&gt;.json\n\n")) << md;
  EXPECT_TRUE(has_text(md, "/a\\\\nb.json\n\n")) << md;
  size_t headings = 0;
  for (size_t at = md.find("## "); at != std::string::npos; at = md.find("## ", at + 1))
    headings += at == 0 || md[at - 1] == '\n';
  EXPECT_EQ(headings, 3u) << md;
  EXPECT_TRUE(has_text(md,
                       "| amp_bf16 | **failed**: &lt;img src=x onerror=alert(1)&gt; \\| "
                       "\\*x\\*\\\\nnext |"))
      << md;
  EXPECT_TRUE(
      has_text(md, "small (mlp) · reference: CPU &lt;img src=x onerror=alert(1)&gt; · batch 32"))
      << md;
  EXPECT_TRUE(has_text(md, "| &lt;img src=x onerror=alert(1)&gt;\\|x vs fp32 |")) << md;

  r = run("report --history " + evil_file + " --html " + path("h.html") + " --md " + path("h.md"));
  ASSERT_EQ(r.code, 0) << r.err;
  md = read_file(path("h.md"));
  EXPECT_EQ(md.find("<img"), std::string::npos) << md;
  EXPECT_TRUE(has_text(md, "| 1 | &lt;img src=x onerror=alert(1)&gt; |")) << md;
}

// A mode that ran out of memory has no results: null in the JSON, empty in the CSV, never 0; and
// the CSV says which mpbench made it.
TEST_F(OutputContract, AnOomRowHasNoNumbersAndTheCsvItsVersion) {
  const auto r =
      run("run " + spec_ + " --device reference --quiet --precisions fp32 --memory-limit 4KiB" +
          " --json " + path("oom.json") + " --csv " + path("oom.csv"));
  ASSERT_EQ(r.code, 0) << r.err;
  const json oom = json::parse(read_file(path("oom.json")))["runs"][0];
  EXPECT_EQ(oom["status"], "oom");
  for (const char* key : {"epoch_time_ms", "samples_per_second", "tflops", "final_accuracy",
                          "final_loss", "percent_of_peak"})
    EXPECT_TRUE(oom[key].is_null()) << key << ": " << oom[key];
  EXPECT_TRUE(oom["steps"]["loss"].empty()) << oom["steps"];  // no step was taken
  const std::string csv = read_file(path("oom.csv"));
  const std::string head = csv.substr(0, csv.find('\n'));
  const std::string row = csv.substr(head.size() + 1);
  EXPECT_TRUE(has_text(head, ",mpbench_version")) << head;
  // The oom row's detail has no comma: split both lines on commas and look up by column name.
  auto split = [](const std::string& line) {
    std::vector<std::string> out(1);
    for (char c : line) {
      if (c == ',')
        out.emplace_back();
      else if (c != '\n')
        out.back() += c;
    }
    return out;
  };
  const std::vector<std::string> names = split(head), cells = split(row);
  ASSERT_EQ(names.size(), cells.size()) << row;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "status") EXPECT_EQ(cells[i], "oom");
    if (names[i] == "mpbench_version") EXPECT_FALSE(cells[i].empty());
    for (const char* empty : {"epoch_time_median_ms", "samples_per_second", "tflops",
                              "final_accuracy", "speedup_vs_fp32"})
      if (names[i] == empty) EXPECT_EQ(cells[i], "") << empty;
    // The memory it had reached when it ran out: under the limit, and not 0.
    if (names[i] == "peak_memory_training_bytes") {
      ASSERT_FALSE(cells[i].empty());
      EXPECT_GT(std::stoll(cells[i]), 0);
      EXPECT_LE(std::stoll(cells[i]), 4096);
    }
  }
  EXPECT_EQ(run("report " + path("oom.json") + " --html " + path("o.html")).code, 0);
  EXPECT_EQ(run("compare " + path("oom.json") + " " + path("oom.json")).code, 0);
}

// Without an fp32 run the ratios are against the first listed mode, and the headers say so.
TEST_F(OutputContract, RatiosWithoutFp32AreAgainstTheFirstMode) {
  const auto r =
      run("run " + spec_ + " --device reference --quiet --precisions amp_bf16,fp32 --csv " +
          path("a.csv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "│ speedup │ mem vs fp32 │")) << r.out;  // fp32 anywhere: fp32
  const auto b =
      run("run " + spec_ + " --device reference --quiet --precisions amp_bf16,tf32 --csv " +
          path("b.csv"));
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_TRUE(has_text(b.out, "speedup vs amp_bf16 │ mem vs amp_bf16")) << b.out;
  auto row = [&](const std::string& mode) {
    const std::string rest = b.out.substr(b.out.find("\n " + mode + " ") + 1);
    return rest.substr(0, rest.find('\n'));
  };
  EXPECT_TRUE(has_text(row("amp_bf16"), "1.00x │           1.00x")) << b.out;
  // Both ratios of tf32 are numbers; the only dash is the scale column (no loss scaling).
  const std::string tf32 = row("tf32");
  EXPECT_EQ(tf32.find("—"), tf32.rfind("—")) << b.out;
  EXPECT_TRUE(has_text(read_file(path("b.csv")), ",amp_bf16,0.1.0")) << read_file(path("b.csv"));
}

// Off a terminal (a CI log) a run prints one plain line per finished run, with its position and
// what is left; --quiet prints none.
TEST_F(OutputContract, OffATerminalEachFinishedRunIsOneLine) {
  const auto r = run("run " + spec_ + " --device reference --epochs 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.err, "mpbench: [1/2] small fp32: ")) << r.err;
  EXPECT_TRUE(has_text(r.err, " ms/epoch in ")) << r.err;
  EXPECT_TRUE(has_text(r.err, "left\nmpbench: [2/2] small amp_bf16: ")) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "no bar off a terminal";
  EXPECT_EQ(run("run " + spec_ + " --device reference --quiet").err, "");
  using Left = mpbench::RunPlan::Left;
  EXPECT_EQ(mpbench::RunPlan::format_done(1, 3, "m fp32", "oom", 2.04, Left{61, 0}),
            "mpbench: [1/3] m fp32: oom in 2.0 s; about 1:01 left");
  EXPECT_EQ(mpbench::RunPlan::format_done(1, 3, "m fp32", "ok", 2.04, Left{61, 2}),
            "mpbench: [1/3] m fp32: ok in 2.0 s; about 1:01 left, besides 2 specs not timed yet");
  EXPECT_EQ(mpbench::RunPlan::format_done(1, 3, "m tf32", "unsupported", 0, Left{NAN, 1}),
            "mpbench: [1/3] m tf32: unsupported in 0.0 s; 1 spec not timed yet");
  // A sweep (--batch-sizes) counts its untimed runs by batch size: its rates are per batch size.
  EXPECT_EQ(mpbench::RunPlan::format_done(1, 6, "m fp32 b16", "ok", 2.04, Left{61, 1, 2}),
            "mpbench: [1/6] m fp32 b16: ok in 2.0 s; about 1:01 left, besides 2 batch sizes not "
            "timed yet");
  EXPECT_EQ(mpbench::RunPlan::format_done(1, 6, "m fp32 b16", "ok", 2.04, Left{NAN, 2, 3}),
            "mpbench: [1/6] m fp32 b16: ok in 2.0 s; 3 batch sizes of 2 specs not timed yet");
  EXPECT_EQ(mpbench::RunPlan::format_done(5, 6, "m fp32 b32", "ok", 2.04, Left{NAN, 1, 1}),
            "mpbench: [5/6] m fp32 b32: ok in 2.0 s; 1 batch size not timed yet");
  EXPECT_EQ(mpbench::RunPlan::format_done(3, 3, "m fp32", "ok", 2.04, Left{0, 0}),
            "mpbench: [3/3] m fp32: ok in 2.0 s");
  EXPECT_EQ(mpbench::RunPlan::position(1, 3, 2, 4), "spec 1/3, mode 2/4");
}

// What is left goes by each spec's own rate at its batch size: a tiny spec's (mostly per-step
// overhead) promised the next, 300 times its FLOPs, hours for seconds, and a sweep's small batch
// its big batch's. A spec with no timed run is counted, not timed; a run of no work (an
// unsupported mode) changes nothing, and one that did not finish (oom) times nothing.
TEST(RunPlan, WhatIsLeftGoesBySpec) {
  mpbench::RunPlan plan(/*quiet=*/true);
  plan.add("tiny", 64, 1);
  plan.add("tiny", 64, 0);
  plan.add("tiny", 64, 1);
  plan.add("big", 128, 300);
  plan.add("big", 128, 300);
  plan.add("big", 4096, 300);
  auto left = [&] { return plan.left(); };
  // big at two batch sizes makes a sweep: its untimed runs are counted by batch size too.
  auto untimed = [&] { return std::make_pair(left().untimed_specs, left().untimed_batches); };
  EXPECT_TRUE(std::isnan(left().seconds));
  EXPECT_EQ(untimed(), std::make_pair(2, 3));
  plan.done("tiny", 64, "tiny fp32", "ok", 1, true);
  EXPECT_GE(left().seconds, 0);  // the second tiny run at the first one's rate
  EXPECT_EQ(untimed(), std::make_pair(1, 2));
  plan.done("tiny", 64, "tiny tf32", "unsupported", 0, true);
  plan.done("tiny", 64, "tiny amp_bf16", "ok", 1, true);
  EXPECT_TRUE(std::isnan(left().seconds));  // nothing left of a timed spec
  EXPECT_EQ(untimed(), std::make_pair(1, 2));
  plan.done("big", 128, "big fp32", "oom", 300, false);  // no rate from it
  EXPECT_EQ(untimed(), std::make_pair(1, 2));
  plan.done("big", 128, "big amp_bf16", "ok", 300, true);
  EXPECT_EQ(untimed(), std::make_pair(1, 1));  // batch 4096: not timed by batch 128's rate
  EXPECT_TRUE(std::isnan(left().seconds));
  plan.done("big", 4096, "big fp32 b4096", "ok", 300, true);
  EXPECT_EQ(left().seconds, 0);
  EXPECT_EQ(untimed(), std::make_pair(0, 0));
}

// A run's time starts when it does: a spec's first run took in the time its data were made (for
// a ResNet's images seconds more than the run), and every other run of the spec was counted at
// that rate.
TEST(RunPlan, ARunsTimeLeavesOutItsData) {
  using Clock = mpbench::RunPlan::Clock;
  Clock::time_point t{};
  mpbench::RunPlan plan(/*quiet=*/true, [&] { return t; });
  plan.add("m", 64, 1);
  plan.add("m", 64, 1);
  t += std::chrono::seconds(6);  // the data being made
  plan.starting();
  t += std::chrono::seconds(2);  // the run
  plan.done("m", 64, "m fp32", "ok", 1, true);
  EXPECT_DOUBLE_EQ(plan.left().seconds, 2.0);  // the next run at the first one's rate
}

// A run of no work (an unsupported mode) times nothing, however long it took; a run that did
// more work than was added leaves none, not less than none; a spec whose runs left are of no
// work is done at once.
TEST(RunPlan, RunsOfNoWorkAndTooMuchWork) {
  using Clock = mpbench::RunPlan::Clock;
  Clock::time_point t{};
  mpbench::RunPlan plan(/*quiet=*/true, [&] { return t; });
  plan.add("m", 64, 1);
  plan.add("m", 64, 0);
  plan.add("m", 64, 1);
  plan.starting();
  t += std::chrono::seconds(2);
  plan.done("m", 64, "m fp32", "ok", 1, true);
  plan.starting();
  t += std::chrono::seconds(10);  // an unsupported mode that took long to say so
  plan.done("m", 64, "m fp8", "unsupported", 0, true);
  EXPECT_DOUBLE_EQ(plan.left().seconds, 2.0);

  mpbench::RunPlan more(/*quiet=*/true, [&] { return t; });
  more.add("m", 64, 1);
  more.add("m", 64, 1);
  more.starting();
  t += std::chrono::seconds(2);
  more.done("m", 64, "m fp32", "ok", 3, true);
  EXPECT_EQ(more.left().seconds, 0.0);

  mpbench::RunPlan none(/*quiet=*/true, [&] { return t; });
  none.add("m", 64, 0);
  none.add("m", 64, 0);
  EXPECT_EQ(none.left().seconds, 0.0);
  EXPECT_EQ(none.left().untimed_specs, 0);
}

// --warmup overrides train.warmup_steps through the path --epochs takes, in run, profile and
// explain; the resolved spec in the file says so.
TEST_F(OutputContract, WarmupOverridesTheSpec) {
  const json j =
      written("run " + spec_ + " --device reference --quiet --precisions fp32 --warmup 5" +
                  " --json " + path("w.json"),
              "w.json");
  EXPECT_EQ(j["runs"][0]["warmup_steps"], 5);
  EXPECT_EQ(j["specs"][0]["train"]["warmup_steps"], 5);
  for (const char* cmd : {"profile", "explain"})
    EXPECT_EQ(
        run(std::string(cmd) + " " + spec_ + " --device reference --quiet --steps 2 --warmup 4")
            .code,
        0)
        << cmd;
  const auto bad = run("run " + spec_ + " --warmup -1");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(has_text(bad.err, "--warmup")) << bad.err;
}

// Each subcommand's help shows its own examples and every exit code; an error in a subcommand
// points at that subcommand's help.
TEST_F(OutputContract, HelpIsPerSubcommand) {
  const auto top = run("--help");
  EXPECT_TRUE(has_text(top.out, "FP8")) << top.out;
  EXPECT_TRUE(has_text(top.out, "mpbench run configs/")) << top.out;
  EXPECT_TRUE(has_text(top.out, "mpbench profile configs/")) << top.out;
  const auto profile = run("profile --help");
  EXPECT_TRUE(has_text(profile.out, "mpbench profile configs/")) << profile.out;
  EXPECT_FALSE(has_text(profile.out, "mpbench run configs/")) << profile.out;
  for (const char* code :
       {"0 ok", "1 regression", "2 bad input", "3 runtime", "4 compare", "130", "143"})
    EXPECT_TRUE(has_text(profile.out, code)) << code;
  const auto bad = run("run " + spec_ + " --epochs abc");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(has_text(bad.err, "(see mpbench run --help)")) << bad.err;
}

// The run table is drawn in UTF-8 box characters only where the locale says UTF-8; under
// LC_ALL=C (or no locale at all) in plain ASCII.
TEST_F(OutputContract, TablesArePlainAsciiUnderTheCLocale) {
  const std::string args = "run " + spec_ + " --device reference --quiet --precisions fp32";
  const auto c =
      run_shell("cd " + dir_.string() + " && LC_ALL=C " + MPBENCH_EXE + " " + args, dir_.string());
  ASSERT_EQ(c.code, 0) << c.err;
  for (unsigned char ch : c.out) EXPECT_LT(ch, 0x80) << c.out;
  EXPECT_TRUE(has_text(c.out, " | ")) << c.out;
  const auto u = run_shell(
      "cd " + dir_.string() + " && LC_ALL= LC_CTYPE= LANG=en_US.UTF-8 " + MPBENCH_EXE + " " + args,
      dir_.string());
  ASSERT_EQ(u.code, 0) << u.err;
  EXPECT_TRUE(has_text(u.out, " │ ")) << u.out;
  // The other commands' titles and tables too (their titles' " · " and devices' "—" were not).
  for (const std::string& other :
       {"profile " + spec_ + " --device reference --steps 2 --precisions fp32",
        "explain " + spec_ + " --device reference --steps 2 --precisions fp32,amp_bf16",
        "maxbatch " + spec_ + " --device reference --precisions fp32 --memory-limit 1MiB",
        std::string("devices")}) {
    const auto o = run_shell("cd " + dir_.string() + " && LC_ALL=C " + MPBENCH_EXE + " " + other,
                             dir_.string());
    ASSERT_EQ(o.code, 0) << other << "\n" << o.err;
    for (unsigned char ch : o.out) ASSERT_LT(ch, 0x80) << other << "\n" << o.out;
  }
}

}  // namespace
