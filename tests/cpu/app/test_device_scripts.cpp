// The scripts a GPU session relies on to turn device_check.sh's output into results/<gpu>/, tried
// here on CPU results so that their plumbing does not cost device time: side_by_side.py (the
// table, and the where-the-time-goes section from `mpbench profile` and PyTorch's profile
// blocks, rows without a time such as an unsupported amp_fp8) and unpack_device_results.py (the
// merged files split back). Needs python3, standard library only; skipped where there is none.
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fs = std::filesystem;
using mpbench::test::read_file;
using nlohmann::json;
using Result = mpbench::test::ShellResult;

namespace {

class DeviceScripts : public mpbench::test::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (!mpbench::test::has_python3(dir_.string())) GTEST_SKIP() << "no python3";
    const std::string cfg = std::string(MPBENCH_SOURCE_DIR) + "/configs/tiny_mlp.json";
    Result r =
        run("run " + cfg + " --device reference --epochs 1 --precisions fp32,amp_bf16 --quiet " +
            "--json " + path("tiny_mlp_eager.json"));
    ASSERT_EQ(r.code, 0) << r.err;
    Result p = run("profile " + cfg + " --device reference --steps 2 --precisions fp32,amp_bf16 " +
                   "--quiet --json " + path("profile_tiny_mlp.json"));
    ASSERT_EQ(p.code, 0) << p.err;
    // A stand-in for pytorch_reference.py's output: mpbench's runs, 4x faster, with a profile
    // block as --profile-steps writes it, so that every row is "mpbench slower".
    json pt = json::parse(read_file(path("tiny_mlp_eager.json")));
    pt["tool"]["name"] = "pytorch";
    for (auto& run : pt["runs"]) {
      run["epoch_time_ms"]["median"] = run["epoch_time_ms"]["median"].get<double>() / 4;
      run["profile"] = {
          {"steps", 2},
          {"basis", "self CPU time"},
          {"total_ms_per_step", 0.5},
          {"entries", {{{"name", "aten::addmm"}, {"calls_per_step", 2}, {"ms_per_step", 0.3}}}}};
    }
    write("pytorch.json", pt.dump());
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string script(const std::string& name) const {
    return std::string("python3 ") + MPBENCH_SOURCE_DIR + "/scripts/" + name;
  }
  Result unpack(const std::string& args) {
    return mpbench::test::run_shell(script("unpack_device_results.py") + " " + args, dir_.string());
  }
  // The eager result as device_check.sh's graphs step writes it: every run with cuda_graphs,
  // its median epoch time times `factor`.
  json graphs_of(json doc, double factor) const {
    for (auto& run : doc["runs"]) {
      run["cuda_graphs"] = true;
      run["epoch_time_ms"]["median"] = run["epoch_time_ms"]["median"].get<double>() * factor;
    }
    return doc;
  }
  // The table's row of `precision` (without its newline), empty when there is none.
  static std::string table_row(const std::string& md, const std::string& precision) {
    const size_t at = md.find("| tiny_mlp | " + precision + " |");
    return at == std::string::npos ? std::string() : md.substr(at, md.find('\n', at) - at);
  }
};

}  // namespace

TEST_F(DeviceScripts, SideBySideTakesSlowerRowsApart) {
  // As on a card in the datasheet table: ceilings in the fp32 profile (tiny ones, so that this
  // CPU's rates are large shares of them).
  json prof = json::parse(read_file(path("profile_tiny_mlp.json")));
  prof["profiles"][0]["ceilings"] = {{"peak_tflops", 1e-3}, {"memory_gbps", 1.0}};
  // A GEMM held to its own ceiling (profile's peak_tflops: a layer pinned to fp32, amp_fp8's
  // GEMMs not in FP8) is rated against that one.
  std::string fc1_share, adamw_share;
  for (json& o : prof["profiles"][0]["ops"]) {
    if (o["scope"] == "step" && o["op"] == "adamw_step") {
      // An op without FLOPs is rated against the memory bandwidth (bytes over ms * 1e6: GB/s);
      // 1 ms, to be among the top ops whatever this CPU's times.
      o["ms_per_step"] = 1.0;
      adamw_share =
          fmt::format("{:.1f}%", 100 * o["bytes_per_step"].get<double>() / (1.0 * 1e6) / 1.0);
    }
    if (o["scope"] != "fc1 fwd" || o["op"] != "gemm") continue;
    o["peak_tflops"] = 4e-3;
    fc1_share = fmt::format("{:.1f}%", 100 * o["flops_per_step"].get<double>() /
                                           (o["ms_per_step"].get<double>() * 1e9) / 4e-3);
  }
  ASSERT_FALSE(fc1_share.empty());
  ASSERT_FALSE(adamw_share.empty());
  write("profile_ceil.json", prof.dump());
  Result r = mpbench::test::run_shell(script("side_by_side.py") + " --mpbench " +
                                          path("tiny_mlp_eager.json") + " --pytorch " +
                                          path("pytorch.json") + " --profiles " +
                                          path("profile_ceil.json") + " --md " + path("side.md"),
                                      dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string md = read_file(path("side.md"));
  EXPECT_EQ(md, r.out);
  for (const char* part : {"| tiny_mlp | fp32 |", "| tiny_mlp | amp_bf16 |",
                           "## Where the time goes", "### tiny_mlp fp32", "### tiny_mlp amp_bf16",
                           "| mpbench op |", "| gemm |", "fc1 fwd", "`aten::addmm`"})
    EXPECT_NE(md.find(part), std::string::npos) << part << " in:\n" << md;
  // The ratio column says 4.00 (mpbench over PyTorch) for every row.
  EXPECT_NE(md.find("| 4.00 |"), std::string::npos) << md;
  // fp32's top ops end in an "of peak" share; amp_bf16's profile has no ceilings, so its end
  // empty. The first GEMM row of each section shows it.
  auto first_gemm_row = [&](const std::string& section) {
    const size_t at = md.find("| fc1 fwd | gemm |", md.find(section));
    return at == std::string::npos ? std::string() : md.substr(at, md.find('\n', at) - at);
  };
  const std::string fp32 = first_gemm_row("### tiny_mlp fp32"),
                    bf16 = first_gemm_row("### tiny_mlp amp_bf16");
  ASSERT_GE(fp32.size(), 4u) << md;
  ASSERT_GE(bf16.size(), 4u) << md;
  EXPECT_EQ(fp32.substr(fp32.size() - 3), "% |") << fp32;
  EXPECT_NE(fp32.find("| " + fc1_share + " |"), std::string::npos) << fc1_share << " in " << fp32;
  EXPECT_EQ(bf16.substr(bf16.size() - 4), "|  |") << bf16;
  const size_t adamw = md.find("| step | adamw_step |", md.find("### tiny_mlp fp32"));
  ASSERT_NE(adamw, std::string::npos) << md;
  const std::string adamw_row = md.substr(adamw, md.find('\n', adamw) - adamw);
  ASSERT_GT(adamw_row.size(), adamw_share.size() + 4) << adamw_row;
  EXPECT_EQ(adamw_row.substr(adamw_row.size() - adamw_share.size() - 4), "| " + adamw_share + " |")
      << adamw_row;
}

// Rounds of one measurement (each tool run in turn, several times): each row takes the run of
// median step time of each tool, and a line under the table says over how many rounds.
TEST_F(DeviceScripts, SideBySideTakesTheMedianRound) {
  std::string rounds;
  for (double factor : {8.0, 2.0, 4.0}) {  // PyTorch 8x, 2x, 4x faster: the median is 4x
    json pt = json::parse(read_file(path("tiny_mlp_eager.json")));
    for (auto& run : pt["runs"])
      run["epoch_time_ms"]["median"] = run["epoch_time_ms"]["median"].get<double>() / factor;
    const std::string name = "pytorch_" + std::to_string(static_cast<int>(factor)) + ".json";
    write(name, pt.dump());
    rounds += " " + path(name);
  }
  Result r = mpbench::test::run_shell(script("side_by_side.py") + " --mpbench " +
                                          path("tiny_mlp_eager.json") + " --pytorch" + rounds,
                                      dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| tiny_mlp | fp32 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("| 2.00 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("| 8.00 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 4.00 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the median over 1 mpbench and 3 PyTorch rounds"), std::string::npos)
      << r.out;
  // Every row is slower, but without --profiles there is nothing to take them apart with.
  EXPECT_EQ(r.out.find("Where the time goes"), std::string::npos) << r.out;
  // Two rounds: the lower median, the faster of the two (8x).
  r = mpbench::test::run_shell(script("side_by_side.py") + " --mpbench " +
                                   path("tiny_mlp_eager.json") + " --pytorch " +
                                   path("pytorch_8.json") + " " + path("pytorch_2.json"),
                               dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(table_row(r.out, "fp32").find("| 8.00 |"), std::string::npos) << r.out;
}

// Each column is its own tool's: the speedups over each tool's own fp32, peak memory in MiB
// (2^20 bytes) and accuracy in %, with PyTorch's fp32 and amp_bf16 sped up by different factors
// and its memory and accuracy unlike mpbench's.
TEST_F(DeviceScripts, SideBySideColumnsAreEachToolsOwn) {
  const json mp = json::parse(read_file(path("tiny_mlp_eager.json")));
  json pt = mp;
  pt["tool"]["name"] = "pytorch";
  for (auto& run : pt["runs"]) {
    const bool fp32 = run["precision"] == "fp32";
    run["epoch_time_ms"]["median"] = run["epoch_time_ms"]["median"].get<double>() / (fp32 ? 4 : 2);
    run["peak_memory_bytes"]["tracked"] = fp32 ? 3 << 20 : 5 << 20;
    run["final_accuracy"] = fp32 ? 0.25 : 0.5;
  }
  write("pt_cols.json", pt.dump());
  Result r = mpbench::test::run_shell(script("side_by_side.py") + " --mpbench " +
                                          path("tiny_mlp_eager.json") + " --pytorch " +
                                          path("pt_cols.json"),
                                      dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  // | model | precision | step | step | ratio | speedup | speedup | MiB | MiB | acc | acc |
  auto cells = [&](const std::string& precision) {
    std::vector<std::string> out;
    std::string row = table_row(r.out, precision);
    for (size_t at = row.find('|'); at != std::string::npos && at + 1 < row.size();) {
      const size_t next = row.find('|', at + 1);
      if (next == std::string::npos) break;
      out.push_back(row.substr(at + 2, next - at - 3));
      at = next;
    }
    return out;
  };
  const json &m32 = mp["runs"][0], &mbf = mp["runs"][1];
  ASSERT_EQ(m32["precision"], "fp32");
  ASSERT_EQ(mbf["precision"], "amp_bf16");
  const double msp =
      m32["epoch_time_ms"]["median"].get<double>() / mbf["epoch_time_ms"]["median"].get<double>();
  const auto bf16 = cells("amp_bf16"), fp32 = cells("fp32");
  ASSERT_EQ(bf16.size(), 11u) << r.out;
  ASSERT_EQ(fp32.size(), 11u) << r.out;
  EXPECT_EQ(bf16[5], fmt::format("{:.2f}x", msp));
  EXPECT_EQ(bf16[6], fmt::format("{:.2f}x", msp / 2));  // PyTorch: (m32 / 4) / (mbf / 2)
  EXPECT_EQ(fp32[7],
            fmt::format("{:.1f}", m32["peak_memory_bytes"]["tracked"].get<double>() / (1 << 20)));
  EXPECT_EQ(fp32[8], "3.0");
  EXPECT_EQ(bf16[8], "5.0");
  EXPECT_EQ(bf16[9], fmt::format("{:.2f}", 100 * mbf["final_accuracy"].get<double>()));
  EXPECT_EQ(bf16[10], "50.00");
  EXPECT_EQ(fp32[10], "25.00");
}

// A time measured on a busy machine (a run flagged busy, as mpbench and pytorch_reference.py
// write it) reads "(busy)" in its tool's step column, with a line under the table; the other
// rows and a table without such a run say nothing of it.
TEST_F(DeviceScripts, SideBySideMarksATimeMeasuredOnABusyMachine) {
  const std::string base = script("side_by_side.py") + " --mpbench " + path("tiny_mlp_eager.json");
  Result r = mpbench::test::run_shell(base + " --pytorch " + path("pytorch.json"), dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("busy"), std::string::npos) << r.out;
  json pt = json::parse(read_file(path("pytorch.json")));
  ASSERT_EQ(pt["runs"][1]["precision"], "amp_bf16");
  pt["runs"][1]["flags"] = {"busy"};
  write("pt_busy.json", pt.dump());
  r = mpbench::test::run_shell(base + " --pytorch " + path("pt_busy.json"), dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(table_row(r.out, "amp_bf16").find(" (busy) |"), std::string::npos) << r.out;
  EXPECT_EQ(table_row(r.out, "fp32").find("busy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n(busy): measured while the run's threads waited for CPUs that "
                       "something else held (its host_load)"),
            std::string::npos)
      << r.out;
  pt["runs"][1]["flags"] = "busy";  // not a list
  write("pt_bad.json", pt.dump());
  r = mpbench::test::run_shell(base + " --pytorch " + path("pt_bad.json"), dir_.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("runs[1].flags: expected list"), std::string::npos) << r.err;
}

TEST_F(DeviceScripts, SideBySideShowsUnsupportedRowsWithoutARatio) {
  // amp_fp8 below compute capability 8.9 (mpbench) or without Transformer Engine (PyTorch): a
  // row with status "unsupported" and no numbers, on both sides or on one.
  auto unsupported = [](json run, const std::string& precision) {
    run["precision"] = precision;
    run["status"] = "unsupported";
    run["status_detail"] = "FP8 needs compute capability 8.9+, this device is 8.0";
    run["epochs"] = json::array();
    for (auto& v : run["epoch_time_ms"]) v = 0.0;
    run["peak_memory_bytes"]["tracked"] = 0;
    run.erase("profile");
    return run;
  };
  json mp = json::parse(read_file(path("tiny_mlp_eager.json")));
  json pt = json::parse(read_file(path("pytorch.json")));
  mp["runs"].push_back(unsupported(mp["runs"][0], "amp_fp8"));
  pt["runs"].push_back(unsupported(pt["runs"][0], "amp_fp8"));
  for (auto& run : pt["runs"])
    if (run["precision"] == "amp_bf16") run = unsupported(run, "amp_bf16");
  write("mp_fp8.json", mp.dump());
  write("pt_fp8.json", pt.dump());
  Result r = mpbench::test::run_shell(
      script("side_by_side.py") + " --mpbench " + path("mp_fp8.json") + " --pytorch " +
          path("pt_fp8.json") + " --profiles " + path("profile_tiny_mlp.json"),
      dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto row = [&](const std::string& precision) {
    const size_t at = r.out.find("| tiny_mlp | " + precision + " |");
    return at == std::string::npos ? std::string() : r.out.substr(at, r.out.find('\n', at) - at);
  };
  EXPECT_EQ(row("amp_fp8"),
            "| tiny_mlp | amp_fp8 | unsupported | unsupported | — | — | — | — | — | — | — |")
      << r.out;
  // mpbench's amp_bf16 keeps its numbers; PyTorch's side says why it has none, and no ratio.
  const std::string bf16 = row("amp_bf16");
  EXPECT_NE(bf16.find(" | unsupported | — | "), std::string::npos) << bf16;
  // Only fp32 (4x) is a slower row to take apart.
  EXPECT_NE(r.out.find("### tiny_mlp fp32"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("### tiny_mlp amp_bf16"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("### tiny_mlp amp_fp8"), std::string::npos) << r.out;
}

// PyTorch's amp_fp8 without Transformer Engine (pytorch_reference.py's Fp8Linear) is eager
// PyTorch: a line under the table says so wherever such a row has a time, and only there.
TEST_F(DeviceScripts, SideBySideNamesPytorchsFp8Implementation) {
  json mp = json::parse(read_file(path("tiny_mlp_eager.json")));
  json pt = json::parse(read_file(path("pytorch.json")));
  for (json* doc : {&mp, &pt}) {
    json fp8 = (*doc)["runs"][1];
    fp8["precision"] = "amp_fp8";
    (*doc)["runs"].push_back(fp8);
  }
  const std::string note = "PyTorch's amp_fp8: torch._scaled_mm in eager PyTorch";
  auto side = [&](const std::string& impl, const std::string& status) {
    pt["runs"][2]["pytorch"]["fp8"] = {{"impl", impl}};
    pt["runs"][2]["status"] = status;
    write("mp_fp8.json", mp.dump());
    write("pt_fp8.json", pt.dump());
    Result r =
        mpbench::test::run_shell(script("side_by_side.py") + " --mpbench " + path("mp_fp8.json") +
                                     " --pytorch " + path("pt_fp8.json"),
                                 dir_.string());
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(table_row(r.out, "amp_fp8").empty()) << r.out;
    return r.out;
  };
  EXPECT_NE(side("torch._scaled_mm", "ok").find(note), std::string::npos);
  EXPECT_EQ(side("transformer_engine", "ok").find(note), std::string::npos);
  EXPECT_EQ(side("torch._scaled_mm", "failed").find(note), std::string::npos);
}

TEST_F(DeviceScripts, UnpackSplitsTheMergedFiles) {
  // What device_check.sh leaves in OUTDIR: the result, PyTorch and profile JSONs, each kind
  // merged by file name.
  fs::create_directories(dir_ / "out");
  json runs = {{"tiny_mlp_eager.json", json::parse(read_file(path("tiny_mlp_eager.json")))}};
  json profs = {{"profile_tiny_mlp.json", json::parse(read_file(path("profile_tiny_mlp.json")))}};
  write("out/mpbench_results.json", runs.dump());
  write("out/profiles.json", profs.dump());
  json torch = {{"pytorch_tiny_mlp.json", json::parse(read_file(path("pytorch.json")))}};
  write("out/pytorch.json", torch.dump());
  write("out/device_check.log", "log\n");
  Result r = mpbench::test::run_shell(
      script("unpack_device_results.py") + " " + path("out") + " --to " + path("results"),
      dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* f : {"tiny_mlp_eager.json", "profile_tiny_mlp.json", "pytorch_tiny_mlp.json",
                        "device_check.log", "side_by_side.md"})
    EXPECT_TRUE(fs::exists(dir_ / "results" / f)) << f << "\n" << r.out;
  const json back = json::parse(read_file(path("results/tiny_mlp_eager.json")));
  EXPECT_EQ(back, runs["tiny_mlp_eager.json"]);
  EXPECT_NE(read_file(path("results/side_by_side.md")).find("## Where the time goes"),
            std::string::npos);
  // Bad input is one line and exit 2: a missing source folder, one with nothing to unpack, a
  // merged file naming a path outside --to (nothing is written there): through "..", one that
  // only climbs out after a folder (no leading "."), an absolute one; or a name not .json, a
  // hidden one, or an entry that is no result file (an array).
  const std::pair<const char*, std::string> bad_names[] = {{"evil", "../escaped.json"},
                                                           {"climbs", "a/../../escaped.json"},
                                                           {"absolute", path("absolute.json")},
                                                           {"text", "x.txt"},
                                                           {"hidden", ".x.json"},
                                                           {"array", "array.json"}};
  fs::create_directories(dir_ / "empty");
  for (const auto& [src, name] : bad_names) {
    fs::create_directories(dir_ / src);
    const json entry = std::string(src) == "array" ? json::array({1}) : json::object();
    write(std::string(src) + "/mpbench_results.json", json{{name, entry}}.dump());
  }
  for (const char* src :
       {"nope", "empty", "evil", "climbs", "absolute", "text", "hidden", "array"}) {
    Result bad = mpbench::test::run_shell(
        script("unpack_device_results.py") + " " + path(src) + " --to " + path("results"),
        dir_.string());
    EXPECT_EQ(bad.code, 2) << src;
    EXPECT_NE(bad.err.find(src), std::string::npos) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "escaped.json"));
  EXPECT_FALSE(fs::exists(dir_ / "absolute.json"));
  EXPECT_FALSE(fs::exists(dir_ / "results" / "x.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "results" / ".x.json"));
  EXPECT_FALSE(fs::exists(dir_ / "results" / "array.json"));
}

// side_by_side.py's --md never replaces an input, is written through a link (the link stays),
// and a file that is not a result file is one line, exit 2, not a traceback.
TEST_F(DeviceScripts, SideBySideKeepsInputsAndLinks) {
  const std::string mp = path("tiny_mlp_eager.json"), pt = path("pytorch.json");
  const std::string before = read_file(mp);
  const std::string base = script("side_by_side.py") + " --mpbench " + mp + " --pytorch " + pt;
  Result same = mpbench::test::run_shell(base + " --md " + mp, dir_.string());
  EXPECT_EQ(same.code, 2) << same.err;
  EXPECT_EQ(read_file(mp), before);
  fs::create_symlink("table.md", dir_ / "link.md");
  Result link = mpbench::test::run_shell(base + " --md " + path("link.md"), dir_.string());
  ASSERT_EQ(link.code, 0) << link.err;
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.md"));
  EXPECT_NE(read_file(path("table.md")).find("| tiny_mlp |"), std::string::npos);
  write("list.json", "[1]");
  Result list = mpbench::test::run_shell(
      script("side_by_side.py") + " --mpbench " + path("list.json") + " --pytorch " + pt,
      dir_.string());
  EXPECT_EQ(list.code, 2);
  EXPECT_EQ(list.err.find("Traceback"), std::string::npos) << list.err;
  // A missing input is bad input too (exit 2), not a failure to write (3).
  Result missing = mpbench::test::run_shell(
      script("side_by_side.py") + " --mpbench " + path("nope.json") + " --pytorch " + pt,
      dir_.string());
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos) << missing.err;
}

// A graphs call (device_check.sh's <config>_graphs.json, cuda_graphs true) beside the eager one:
// rows of their own, "+graphs", each beside PyTorch's row of its precision (PyTorch has no
// graphs runs) with its speedup over graphs fp32; not rounds of the eager rows, and not taken
// apart (the second section is of eager rows).
TEST_F(DeviceScripts, SideBySidePairsGraphsRowsWithPytorchsEager) {
  json mp = json::parse(read_file(path("tiny_mlp_eager.json")));
  const json pt = json::parse(read_file(path("pytorch.json")));
  auto step = [](const json& doc, const std::string& precision) {
    for (const auto& run : doc["runs"])
      if (run["precision"] == precision)
        return run["epoch_time_ms"]["median"].get<double>() /
               run["epochs"][0]["steps"].get<double>();
    return 0.0;
  };
  ASSERT_EQ(mp["runs"][0]["precision"], "fp32");
  // amp_bf16 at 0.625 of fp32's epoch time: its speedup (1.60x) reads otherwise inverted.
  for (auto& run : mp["runs"])
    if (run["precision"] == "amp_bf16")
      run["epoch_time_ms"]["median"] =
          mp["runs"][0]["epoch_time_ms"]["median"].get<double>() * 0.625;
  write("mp.json", mp.dump());
  const json graphs = graphs_of(mp, 0.5);  // twice as fast: 2.00 over PyTorch, not 4.00
  write("tiny_mlp_graphs.json", graphs.dump());
  Result r = mpbench::test::run_shell(script("side_by_side.py") + " --mpbench " + path("mp.json") +
                                          " " + path("tiny_mlp_graphs.json") + " --pytorch " +
                                          path("pytorch.json") + " --profiles " +
                                          path("profile_tiny_mlp.json"),
                                      dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string speedup = fmt::format("{:.2f}x", step(mp, "fp32") / step(mp, "amp_bf16"));
  ASSERT_EQ(speedup, "1.60x");
  // The step column is the median epoch time over the steps of an epoch.
  const std::string fp32 = fmt::format("| tiny_mlp | fp32 | {:.3f} | {:.3f} | 4.00 | 1.00x |",
                                       step(mp, "fp32"), step(pt, "fp32"));
  const std::string fp32_graphs =
      fmt::format("| tiny_mlp | fp32+graphs | {:.3f} | {:.3f} | 2.00 | 1.00x |",
                  step(graphs, "fp32"), step(pt, "fp32"));
  EXPECT_EQ(table_row(r.out, "fp32").rfind(fp32, 0), 0u) << fp32 << " in:\n" << r.out;
  EXPECT_EQ(table_row(r.out, "fp32+graphs").rfind(fp32_graphs, 0), 0u) << fp32_graphs << " in:\n"
                                                                       << r.out;
  for (const char* precision : {"amp_bf16", "amp_bf16+graphs"}) {
    EXPECT_NE(table_row(r.out, precision).find(" | " + speedup + " | "), std::string::npos)
        << precision << " in:\n"
        << r.out;
  }
  EXPECT_NE(r.out.find("### tiny_mlp fp32\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("+graphs\n"), std::string::npos) << r.out;  // no "### ... +graphs"
  EXPECT_EQ(r.out.find("median over"), std::string::npos) << r.out;
}

// What a call may bring back short of everything each unpacks, exit 0: a BUILD FAILED call only
// its logs; one without PyTorch (no torch on the machine) no pytorch.json, and no table then;
// one without `mpbench profile` no profiles.json, and a table without its second section.
TEST_F(DeviceScripts, UnpackTakesWhatAPartialCallBrought) {
  const json runs = {{"tiny_mlp_eager.json", json::parse(read_file(path("tiny_mlp_eager.json")))}};
  const json torch = {{"pytorch_tiny_mlp.json", json::parse(read_file(path("pytorch.json")))}};
  for (const char* src : {"build", "no_torch", "no_profile"}) {
    fs::create_directories(dir_ / src);
    write(std::string(src) + "/device_check.log", std::string(src) + " log\n");
  }
  write("build/summary.txt", "summary: BUILD FAILED\n");
  write("no_torch/mpbench_results.json", runs.dump());
  write("no_profile/mpbench_results.json", runs.dump());
  write("no_profile/pytorch.json", torch.dump());

  Result build = unpack(path("build") + " --to " + path("r_build"));
  ASSERT_EQ(build.code, 0) << build.err;
  EXPECT_EQ(read_file(path("r_build/device_check.log")), "build log\n");
  EXPECT_EQ(read_file(path("r_build/summary.txt")), "summary: BUILD FAILED\n");

  Result no_torch = unpack(path("no_torch") + " --to " + path("r_no_torch"));
  ASSERT_EQ(no_torch.code, 0) << no_torch.err;
  EXPECT_TRUE(fs::exists(dir_ / "r_no_torch" / "tiny_mlp_eager.json"));
  EXPECT_FALSE(fs::exists(dir_ / "r_no_torch" / "side_by_side.md"));

  Result no_profile = unpack(path("no_profile") + " --to " + path("r_no_profile"));
  ASSERT_EQ(no_profile.code, 0) << no_profile.err;
  const std::string md = read_file(path("r_no_profile/side_by_side.md"));
  EXPECT_NE(md.find("| tiny_mlp | fp32 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("Where the time goes"), std::string::npos) << md;
}

// A PyTorch file that side_by_side.py refuses (here one of another schema) fails the unpack with
// side_by_side's own line and code, after the split files are written (nothing is lost), and no
// table is made.
TEST_F(DeviceScripts, UnpackSaysWhyTheTableCouldNotBeMade) {
  fs::create_directories(dir_ / "out");
  fs::create_directories(dir_ / "results");
  write("out/mpbench_results.json",
        json{{"tiny_mlp_eager.json", json::parse(read_file(path("tiny_mlp_eager.json")))}}.dump());
  json torch = json::parse(read_file(path("pytorch.json")));
  torch["schema_version"] = 99;
  write("out/pytorch.json", json{{"pytorch_tiny_mlp.json", torch}}.dump());
  Result r = unpack(path("out") + " --to " + path("results"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("side_by_side"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pytorch_tiny_mlp.json"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "results" / "tiny_mlp_eager.json"));
  EXPECT_TRUE(fs::exists(dir_ / "results" / "pytorch_tiny_mlp.json"));
  EXPECT_FALSE(fs::exists(dir_ / "results" / "side_by_side.md"));
}

// Two calls unpacked together (the second, say, for what the first's budget skipped): each
// call's results, and each call's log, the second's as device_check_2.log.
TEST_F(DeviceScripts, UnpackKeepsEachCallsFilesApart) {
  fs::create_directories(dir_ / "call1");
  fs::create_directories(dir_ / "call2");
  write("call1/mpbench_results.json",
        json{{"tiny_mlp_eager.json", json::parse(read_file(path("tiny_mlp_eager.json")))}}.dump());
  write("call2/pytorch.json",
        json{{"pytorch_tiny_mlp.json", json::parse(read_file(path("pytorch.json")))}}.dump());
  write("call1/device_check.log", "first call\n");
  write("call2/device_check.log", "second call\n");
  Result r = unpack(path("call1") + " " + path("call2") + " --to " + path("results"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "results" / "tiny_mlp_eager.json")) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "results" / "pytorch_tiny_mlp.json")) << r.out;
  EXPECT_EQ(read_file(path("results/device_check.log")), "first call\n");
  EXPECT_EQ(read_file(path("results/device_check_2.log")), "second call\n");
  // The table pairs one call's mpbench runs with the other's PyTorch runs.
  EXPECT_NE(read_file(path("results/side_by_side.md")).find("| tiny_mlp | fp32 |"),
            std::string::npos);
  // Unpacked one call at a time into one folder: the second call's log beside the first's, not
  // over it; an unpack again adds nothing; a call unpacked into its own folder is left as it is.
  for (const char* call : {"call1", "call2", "call2"}) {
    r = unpack(path(call) + " --to " + path("apart"));
    ASSERT_EQ(r.code, 0) << r.err;
  }
  EXPECT_EQ(read_file(path("apart/device_check.log")), "first call\n");
  EXPECT_EQ(read_file(path("apart/device_check_2.log")), "second call\n");
  EXPECT_FALSE(fs::exists(dir_ / "apart" / "device_check_3.log"));
  r = unpack(path("call1") + " --to " + path("call1"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(path("call1/device_check.log")), "first call\n");
  EXPECT_FALSE(fs::exists(dir_ / "call1" / "device_check_2.log"));
}

// The graphs runs unpacked (<config>_graphs.json) are in the table too.
TEST_F(DeviceScripts, UnpackTablesTheGraphsRuns) {
  const json eager = json::parse(read_file(path("tiny_mlp_eager.json")));
  fs::create_directories(dir_ / "out");
  write(
      "out/mpbench_results.json",
      json{{"tiny_mlp_eager.json", eager}, {"tiny_mlp_graphs.json", graphs_of(eager, 0.5)}}.dump());
  write("out/pytorch.json",
        json{{"pytorch_tiny_mlp.json", json::parse(read_file(path("pytorch.json")))}}.dump());
  Result r = unpack(path("out") + " --to " + path("results"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string md = read_file(path("results/side_by_side.md"));
  EXPECT_NE(md.find("| tiny_mlp | fp32 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| tiny_mlp | fp32+graphs |"), std::string::npos) << md;
}
