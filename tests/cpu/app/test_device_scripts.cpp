// The scripts a GPU session relies on to turn device_check.sh's output into results/<gpu>/, tried
// here on CPU results so that their plumbing does not cost device time: side_by_side.py (the
// table, and the where-the-time-goes section from `mpbench profile` and PyTorch's profile
// blocks, rows without a time such as an unsupported amp_fp8) and unpack_device_results.py (the
// merged files split back). Needs python3, standard library only; skipped where there is none.
#include <algorithm>
#include <filesystem>
#include <string>

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
    if (mpbench::test::run_shell("python3 --version", dir_.string()).code != 0)
      GTEST_SKIP() << "no python3";
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
};

}  // namespace

TEST_F(DeviceScripts, SideBySideTakesSlowerRowsApart) {
  // As on a card in the datasheet table: ceilings in the fp32 profile (tiny ones, so that this
  // CPU's rates are large shares of them).
  json prof = json::parse(read_file(path("profile_tiny_mlp.json")));
  prof["profiles"][0]["ceilings"] = {{"peak_tflops", 1e-3}, {"memory_gbps", 1.0}};
  // A GEMM held to its own ceiling (profile's peak_tflops: a layer pinned to fp32, amp_fp8's
  // GEMMs not in FP8) is rated against that one.
  std::string fc1_share;
  for (json& o : prof["profiles"][0]["ops"]) {
    if (o["scope"] != "fc1 fwd" || o["op"] != "gemm") continue;
    o["peak_tflops"] = 4e-3;
    fc1_share = fmt::format("{:.1f}%", 100 * o["flops_per_step"].get<double>() /
                                           (o["ms_per_step"].get<double>() * 1e9) / 4e-3);
  }
  ASSERT_FALSE(fc1_share.empty());
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
  // merged file naming a path outside --to (nothing is written there).
  fs::create_directories(dir_ / "empty");
  fs::create_directories(dir_ / "evil");
  write("evil/mpbench_results.json", json{{"../escaped.json", json::object()}}.dump());
  for (const char* src : {"nope", "empty", "evil"}) {
    Result bad = mpbench::test::run_shell(
        script("unpack_device_results.py") + " " + path(src) + " --to " + path("results"),
        dir_.string());
    EXPECT_EQ(bad.code, 2) << src;
    EXPECT_NE(bad.err.find(src), std::string::npos) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "escaped.json"));
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
}
