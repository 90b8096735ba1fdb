// Input that used to crash mpbench, cost minutes before a refusal, or that mpbench wrote and then
// refused to read (issue 25, classes 2-4): every spec and data file is checked before the first
// step of the first spec; the result readers refuse deep nesting and an FP8 series without steps
// in one line; what `run` writes with extreme but valid settings, `compare` and `report` read.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using Result = mpbench::test::ShellResult;
using mpbench::test::count_lines;
using mpbench::test::has_text;

namespace {

void put_be32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}
std::string idx_images(uint32_t n, uint32_t side) {
  std::string s;
  put_be32(s, 0x803);
  put_be32(s, n);
  put_be32(s, side);
  put_be32(s, side);
  s.append(size_t(n) * side * side, '\x10');
  return s;
}
std::string idx_labels(uint32_t n, int label) {
  std::string s;
  put_be32(s, 0x801);
  put_be32(s, n);
  s.append(n, static_cast<char>(label));
  return s;
}

class InputRefusals : public mpbench::test::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    good_ = write("good.json", mpbench::test::kSmallSpec);
  }
  // Refused before any work: exit 2, one line naming `needle`, no table, no file.
  void expect_refused_before_work(const Result& r, const std::string& needle) {
    expect_refused(r, needle);
    EXPECT_FALSE(fs::exists(dir_ / "out.json"));
  }
  // A result file of configs/tiny_mlp.json (whose fc1 runs in FP8) in `modes`.
  std::string result_file(const std::string& name, const std::string& modes) {
    const Result r =
        run("run " + mpbench::test::source_dir() +
            "/configs/tiny_mlp.json --device reference --quiet --epochs 1 --precisions " + modes +
            " --json " + (dir_ / name).string());
    EXPECT_EQ(r.code, 0) << r.err;
    return (dir_ / name).string();
  }
  std::string good_;
};

// A mistake in the second spec, or in its data files, is found before the first spec trains,
// with or without --quiet, in `run` and in `maxbatch`.
TEST_F(InputRefusals, EverySpecAndDataFileIsCheckedBeforeTheFirstStep) {
  write("ti", idx_images(64, 4));
  write("tl", idx_labels(64, 1));
  write("short", idx_images(64, 4).substr(0, 100));
  write("big_label", idx_labels(64, 9));
  auto idx_spec = [&](const std::string& name, const std::string& images,
                      const std::string& labels) {
    return write(name + ".json",
                 R"({"name": ")" + name + R"(", "model": {"type": "mlp", "input_dim": 16,
      "hidden": [8], "num_classes": 4}, "data": {"type": "idx", "train_samples": 64,
      "eval_samples": 64, "train_images": ")" +
                     images + R"(", "train_labels": ")" + labels + R"(", "eval_images": "ti",
      "eval_labels": "tl"}, "train": {"batch_size": 32, "epochs": 1}})");
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {write("tt.json", R"({"name": "tt", "model": {"type": "transformer", "d_model": 16,
        "heads": 2, "ffn_dim": 32, "seq_len": 8, "layers": 1, "vocab_size": 16},
        "data": {"train_samples": 64, "eval_samples": 16}, "train": {"batch_size": 8},
        "fp32_layers": ["layer7"]})"),
       "fp32_layers[0]: unknown layer \"layer7\""},
      {idx_spec("truncated", "short", "tl"), "short: truncated"},
      {idx_spec("labels", "ti", "big_label"), "big_label: label 9 at index 0"},
      {idx_spec("missing", "nowhere", "tl"), "nowhere"}};
  for (const auto& [bad, needle] : cases) {
    SCOPED_TRACE(bad);
    for (const char* quiet : {" --quiet", ""})
      expect_refused_before_work(run("run " + good_ + " " + bad + " --device reference" + quiet +
                                     " --json " + (dir_ / "out.json").string()),
                                 needle);
    // maxbatch tells each probe on stderr: a refusal after work would show them.
    expect_refused_before_work(run("maxbatch " + good_ + " " + bad +
                                   " --device reference --memory-limit 64MiB --precisions "
                                   "fp32 --json " +
                                   (dir_ / "out.json").string()),
                               needle);
  }
}

// An output that is one of a spec's idx data files is refused before any work, by every command
// that takes specs, and the file is left as it was.
TEST_F(InputRefusals, NoCommandWritesOverASpecsDataFile) {
  const std::string labels = idx_labels(64, 1);
  const std::string tl = write("tl", labels);
  write("ti", idx_images(64, 4));
  const std::string spec = write("idx.json", R"({"name": "idx", "model": {"type": "mlp",
      "input_dim": 16, "hidden": [8], "num_classes": 4}, "data": {"type": "idx",
      "train_samples": 64, "eval_samples": 64, "train_images": "ti", "train_labels": "tl",
      "eval_images": "ti", "eval_labels": "tl"}, "train": {"batch_size": 32, "epochs": 1}})");
  for (const std::string& cmd :
       {"validate " + spec + " --json " + tl, "inspect " + spec + " --json " + tl,
        "run " + spec + " --device reference --quiet --csv " + tl,
        "maxbatch " + spec + " --device reference --quiet --memory-limit 1MiB --json " + tl,
        "maxbatch " + spec + " --device reference --quiet --memory-limit 1MiB --md " + tl}) {
    SCOPED_TRACE(cmd);
    const Result r = run(cmd);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(has_text(r.err, "is the input")) << r.err;
    EXPECT_EQ(r.out, "") << "work was done before the refusal";
    EXPECT_EQ(mpbench::test::read_file(tl), labels);
  }
}

// A result file nested deeper than any mpbench writes is one line, not a stack overflow, in every
// object the readers keep whole (tool, env, specs) and where a number is expected.
TEST_F(InputRefusals, DeeplyNestedResultFilesAreRefusedInOneLine) {
  const std::string good = result_file("r.json", "fp32");
  const json j = json::parse(mpbench::test::read_file(good));
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const char* key : {"tool", "env", "specs", "schema_version"}) {
    SCOPED_TRACE(key);
    json d = j;
    d[key] = "PLACEHOLDER";
    std::string text = d.dump();
    text.replace(text.find("\"PLACEHOLDER\""), 13, deep);
    const std::string path = write(std::string("deep_") + key + ".json", text);
    for (const std::string& cmd : {"compare " + good + " " + path, "compare " + path + " " + good,
                                   "report " + path + " --html " + (dir_ / "r.html").string()}) {
      const Result r = run(cmd);
      EXPECT_EQ(r.code, 2) << cmd << "\n" << r.err;
      EXPECT_EQ(count_lines(r.err), 1u) << r.err;
      EXPECT_TRUE(has_text(r.err, "levels of nesting")) << r.err;
    }
  }
}

// An fp8_scaling entry with no steps cannot come from a run: `report` says where it is instead
// of reading past an empty series.
TEST_F(InputRefusals, AnFp8SeriesWithoutStepsIsRefused) {
  const std::string good = result_file("f8.json", "amp_fp8");
  json j = json::parse(mpbench::test::read_file(good));
  ASSERT_TRUE(j["runs"][0].contains("fp8_scaling"));
  j["runs"][0]["fp8_scaling"][0]["amax"] = json::array();
  j["runs"][0]["fp8_scaling"][0]["scale"] = json::array();
  const std::string path = write("empty.json", j.dump());
  const Result r = run("report " + path + " --html " + (dir_ / "r.html").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has_text(r.err, "runs[0].fp8_scaling[0].amax")) << r.err;
  EXPECT_EQ(run("report " + good + " --html " + (dir_ / "r.html").string()).code, 0);
}

// A run whose file would be too large for `compare` and `report` to read is refused before it
// trains, naming --json; the same run without --json writes nothing that must be read back.
TEST_F(InputRefusals, AResultFileTooLargeToReadBackIsRefusedUpFront) {
  const std::string many = write("many.json", R"({"name": "many", "model": {"type": "mlp",
      "input_dim": 16, "hidden": [8], "num_classes": 4}, "data": {"train_samples": 32,
      "eval_samples": 32}, "train": {"batch_size": 32, "epochs": 10000}})");
  expect_refused_before_work(run("run " + many + " --device reference --quiet --repeat 20 --json " +
                                 (dir_ / "out.json").string()),
                             "--json");
}

// Specs generated at the edges of what is valid (a backoff that drives the loss scale to 0, a
// scale that overflows at once, growth every step, a learning rate that diverges, every mode, more
// steps than a file holds one by one, pinned layers): whatever `run` and `profile` write,
// `compare` and `report` read (issue 25: "what mpbench writes, mpbench reads").
TEST_F(InputRefusals, WhatRunAndProfileWriteCompareAndReportRead) {
  std::mt19937_64 rng(2025);
  auto pick = [&](auto... v) {
    const std::vector<std::common_type_t<decltype(v)...>> all{v...};
    return all[rng() % all.size()];
  };
#ifdef MPBENCH_TEST_ASAN
  const int kSpecs = 4;
#else
  const int kSpecs = 10;
#endif
  for (int i = 0; i < kSpecs; ++i) {
    const std::string family = i == 0 ? "mlp" : pick("mlp", "transformer", "resnet");
    json spec = {{"name", "gen" + std::to_string(i)}};
    json fp32_layers = json::array();
    if (family == "mlp") {
      spec["model"] = {{"type", "mlp"}, {"input_dim", 8}, {"hidden", {8, 8}}, {"num_classes", 3}};
      fp32_layers = pick(json::array(), json::array({"head"}), json::array({"fc1", "fc2"}));
    } else if (family == "transformer") {
      spec["model"] = {{"type", "transformer"},
                       {"d_model", 16},
                       {"heads", 2},
                       {"ffn_dim", 32},
                       {"seq_len", 8},
                       {"layers", 2},
                       {"vocab_size", 16},
                       {"causal", pick(true, false)}};
      fp32_layers = pick(json::array(), json::array({"layer1", "head"}));
    } else {
      spec["model"] = {
          {"type", "resnet_bottleneck"}, {"image_size", 8}, {"in_channels", 3}, {"width", 4},
          {"out_channels", 16},          {"blocks", 1},     {"num_classes", 4}};
      fp32_layers = pick(json::array(), json::array({"block1"}));
    }
    // Spec 0: a batch of 1 over 4200 samples, more steps than a file writes one by one.
    const bool long_run = i == 0;
    spec["data"] = {{"train_samples", long_run ? 4200 : pick(16, 40, 64)},
                    {"eval_samples", 16},
                    {"seed", int(rng() % 1000)}};
    spec["train"] = {
        {"batch_size", long_run ? 1 : pick(4, 8)},
        {"epochs", long_run ? 1 : pick(1, 2, 3)},
        {"warmup_steps", pick(0, 1, 3)},
        {"optimizer", {{"type", pick("adam", "adamw", "sgd")}, {"lr", pick(1e-3, 0.1, 1e3)}}}};
    spec["precisions"] = pick(json::array({"fp32", "amp_fp16"}), json::array({"amp_bf16"}),
                              json::array({"fp32", "tf32", "amp_fp16", "amp_bf16", "amp_fp8"}),
                              json::array({"amp_fp8", "amp_fp16"}));
    spec["loss_scale"] = {{"init", pick(1.0, 65536.0, 3e38)},
                          {"growth_factor", pick(1.0001, 2.0, 1e30)},
                          {"backoff_factor", pick(1e-300, 0.5, 0.999999)},
                          {"growth_interval", pick(1, 2, 2000)}};
    if (i == 1) {  // fp16 overflows at a scale of 3e38 and the back-off makes it 0
      spec["precisions"] = {"amp_fp16"};
      spec["loss_scale"]["init"] = 3e38;
      spec["loss_scale"]["backoff_factor"] = 1e-300;
    }
    spec["fp8"] = {{"amax_history_len", pick(1, 16)},
                   {"amax_compute", pick("max", "most_recent")},
                   {"margin", pick(0, 32)}};
    spec["fp32_layers"] = fp32_layers;
    SCOPED_TRACE(spec.dump());
    const std::string path = write("gen.json", spec.dump());
    const std::string out = (dir_ / "gen_run.json").string(),
                      prof = (dir_ / "gen_prof.json").string();
    const Result r = run("run " + path + " --device reference --quiet --json " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    const Result p =
        run("profile " + path + " --device reference --quiet --steps 3 --json " + prof);
    ASSERT_EQ(p.code, 0) << p.err;
    const Result c = run("compare " + out + " " + out);
    EXPECT_TRUE(c.code == 0 || c.code == 1) << c.err;  // 1: a diverged mode fails the gate
    const Result h = run("report " + out + " " + prof + " --html " + (dir_ / "r.html").string() +
                         " --md " + (dir_ / "r.md").string());
    EXPECT_EQ(h.code, 0) << h.err;
    const json j = json::parse(mpbench::test::read_file(out));
    if (long_run) EXPECT_GT(j["runs"][0]["steps"]["stride"].get<int>(), 1);
    if (i == 1) EXPECT_EQ(j["runs"][0]["final_loss_scale"], 0.0);
  }
}

// An argument is echoed in at most 200 bytes, and a line is at most 2000 bytes, its cut note
// included (the fresh probe's cases: a long mode list, a long number, a long output name).
TEST_F(InputRefusals, LongArgumentsAreClippedInMessages) {
  for (const std::string& args :
       {"--precisions " + std::string(300, 'x'), "--precisions " + std::string(100000, 'x'),
        "--epochs " + std::string(5000, '9'), "--json " + std::string(5000, 'n'),
        "--json " + std::string(256, 'n')}) {
    SCOPED_TRACE(args.substr(0, 20));
    const Result r = run("run " + good_ + " --device reference " + args);
    EXPECT_EQ(r.code, 2) << r.err.substr(0, 300);
    EXPECT_EQ(count_lines(r.err), 1u);
    EXPECT_LE(r.err.size(), 2001u);
    EXPECT_FALSE(has_text(r.err, std::string(201, args.back()))) << r.err.substr(0, 300);
  }
}

// validate says "ok" only once every spec passed: a refusal leaves stdout empty, as in run.
TEST_F(InputRefusals, ValidatePrintsNothingWhenALaterSpecIsRefused) {
  const std::string bad = write("bad.json", R"({"name": "bad", "model": {"type": "mlp",
      "input_dim": 16, "hidden": [8], "num_classes": 4}, "fp32_layers": ["fc9"]})");
  const Result r = run("validate " + good_ + " " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(has_text(r.err, "fc9")) << r.err;
  EXPECT_TRUE(has_text(run("validate " + good_).out, "ok: "));
}

// A valid but absurd step count (warmup_steps 10^9) would hold gigabytes of per-step series:
// refused before any work by run and validate, naming the steps, not an allocation that grows
// until the machine gives out.
TEST_F(InputRefusals, StepsWhoseSeriesCannotBeHeldAreRefusedUpFront) {
  const std::string many = write("many.json", R"({"name": "many", "model": {"type": "mlp",
      "input_dim": 16, "hidden": [8], "num_classes": 4}, "data": {"train_samples": 64,
      "eval_samples": 16}, "train": {"batch_size": 32, "warmup_steps": 1000000000}})");
  for (const std::string& cmd :
       {"run " + many + " --device reference --json " + (dir_ / "out.json").string(),
        "validate " + many}) {
    const Result r = run(cmd);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(has_text(r.err, "1000000000 warm-up")) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out.json"));
  }
}

// --scaling-baseline FILE given to one process has no effect (said in a warning), but a file that
// cannot serve is still refused: a missing one ran, said nothing of it, and exited 0.
TEST_F(InputRefusals, AScalingBaselineIsReadWithoutALaunchToo) {
  expect_refused_before_work(
      run("run " + good_ + " --device reference --quiet --scaling-baseline " +
          (dir_ / "missing.json").string() + " --json " + (dir_ / "out.json").string()),
      "missing.json");
  const std::string spec = write("spec_as_result.json", mpbench::test::kSmallSpec);
  expect_refused_before_work(
      run("run " + good_ + " --device reference --quiet --scaling-baseline " + spec + " --json " +
          (dir_ / "out.json").string()),
      "spec_as_result.json");
  // The baseline is an input: the run's output may not write over it.
  const std::string base = result_file("base.json", "fp32");
  const std::string before = mpbench::test::read_file(base);
  const Result r = run("run " + good_ +
                       " --device reference --quiet --epochs 1 --precisions fp32 "
                       "--scaling-baseline " +
                       base + " --json " + base);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has_text(r.err, "is the input")) << r.err;
  EXPECT_EQ(mpbench::test::read_file(base), before);
}

// The data-parallel options without a launch change nothing, and each alone says so.
TEST_F(InputRefusals, DataParallelOptionsWithoutALaunchAreSaidToDoNothing) {
  for (const char* option : {"--grad-reduce bf16", "--bucket-mb 10"}) {
    const Result r =
        run("run " + good_ + " --device reference --quiet --epochs 1 --precisions fp32 " + option);
    EXPECT_EQ(r.code, 0) << option << ": " << r.err;
    EXPECT_TRUE(has_text(r.err,
                         "--grad-reduce, --bucket-mb and --scaling-baseline have no effect "
                         "without an MPI launch"))
        << option << ": " << r.err;
  }
  const Result plain =
      run("run " + good_ + " --device reference --quiet --epochs 1 --precisions fp32");
  EXPECT_FALSE(has_text(plain.err, "no effect")) << plain.err;
}

}  // namespace
