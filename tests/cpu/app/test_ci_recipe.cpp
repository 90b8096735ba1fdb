// The README's CPU runner job (the YAML after "<!-- ci-recipe-cpu -->"), run as written: every
// `run:` step that calls build/mpbench or writes the step summary, the baseline job's first, with
// build/mpbench standing for this build's executable, in a scratch folder that has the repository's
// configs, in the environment the runner gives (BLAS threads as the machine has them, for both
// sides). Time is not asserted (one current run against three baselines may pass or alarm by the
// machine's load); the files the job publishes and the summary's verdict line are.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fs = std::filesystem;
using mpbench::test::read_file;

namespace {

// The `run:` commands of the block, in order, that the test can run here: the ones that call
// build/mpbench or append to the step summary (checkout, cache, setup and build are the runner's).
std::vector<std::string> recipe_commands(const std::string& readme) {
  const size_t mark = readme.find("<!-- ci-recipe-cpu -->");
  if (mark == std::string::npos) return {};
  const size_t open = readme.find("```yaml\n", mark);
  const size_t close = readme.find("\n```", open + 8);
  if (open == std::string::npos || close == std::string::npos) return {};
  std::vector<std::string> out;
  std::istringstream lines(readme.substr(open + 8, close - open - 8));
  for (std::string line; std::getline(lines, line);) {
    const size_t run = line.find("run: ");
    if (run == std::string::npos) continue;
    std::string cmd = line.substr(run + 5);
    if (cmd.find("build/mpbench") == std::string::npos &&
        cmd.find("GITHUB_STEP_SUMMARY") == std::string::npos)
      continue;
    // Past each replacement: the executable's own path ends in build/mpbench when the build
    // folder is named build (the README's), and searching from the start never ended.
    const std::string exe = MPBENCH_EXE;
    for (size_t at = 0; (at = cmd.find("build/mpbench", at)) != std::string::npos; at += exe.size())
      cmd.replace(at, 13, exe);
    out.push_back(cmd);
  }
  return out;
}

}  // namespace

TEST(CiRecipe, TheReadmesCpuJobRunsAsWritten) {
#if defined(MPBENCH_TEST_ASAN)
  // Four runs of the job's specs with 5 repetitions took 277 s under ASan on a 2-core machine,
  // past the 3 minutes a test may take; the Release build runs the same commands in ~20 s.
  GTEST_SKIP() << "the sanitizer build leaves the recipe to the Release build";
#endif
  const std::string src = MPBENCH_SOURCE_DIR;
  const std::vector<std::string> cmds = recipe_commands(read_file(src + "/README.md"));
  // The baseline job's loop, the gate's run and compare, and the summary.
  ASSERT_EQ(cmds.size(), 4u);
  EXPECT_NE(cmds[0].find("baseline-cpu-ci-$i.json"), std::string::npos) << cmds[0];
  EXPECT_NE(cmds[2].find("compare --baseline"), std::string::npos) << cmds[2];

  // A directory of this process's own: the suite runs this test twice (native_AVX2.ci_recipe too),
  // at the same time under ctest -j, and one run's remove_all left the other's job in a removed
  // directory (exit 2).
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("mpbench_ci_recipe_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const struct RemoveAtEnd {
    fs::path path;
    ~RemoveAtEnd() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{dir};
  fs::create_directory_symlink(src + "/configs", dir / "configs");
  const std::string summary = (dir / "step_summary.md").string();
  std::ofstream(summary) << "previous step\n";
  for (size_t i = 0; i < cmds.size(); ++i) {
    // The loop's pause between baselines is for a runner; here it only costs time.
    std::string cmd = cmds[i];
    if (const size_t at = cmd.find(" sleep 5;"); at != std::string::npos) cmd.erase(at, 9);
    // Three repetitions, the fewest that still give compare a time verdict, where the job takes
    // five: with five, the four runs took up to 187 s on a busy 2-core machine, past the 3
    // minutes a test may take.
    if (const size_t at = cmd.find(" --repeat 5 "); at != std::string::npos)
      cmd.replace(at, 12, " --repeat 3 ");
    // run_shell leaves the working directory as it is (the job's relative paths need the cd) and
    // redirects the line's stdout (the step's own redirections need the subshell).
    const auto r = mpbench::test::run_shell(
        "cd '" + dir.string() + "' && export GITHUB_STEP_SUMMARY=" + summary + " && (" + cmd + ")",
        dir.string());
    SCOPED_TRACE(cmd);
    if (i == 2) {
      // compare: 0 pass or 1 a time alarm by the machine's load; never a refusal.
      EXPECT_TRUE(r.code == 0 || r.code == 1) << r.code << "\n" << r.out << r.err;
    } else {
      ASSERT_EQ(r.code, 0) << r.out << r.err;
    }
  }
  for (int i = 1; i <= 3; ++i)
    EXPECT_TRUE(fs::exists(dir / "results" / ("baseline-cpu-ci-" + std::to_string(i) + ".json")));
  const nlohmann::json cmp = nlohmann::json::parse(read_file((dir / "compare.json").string()));
  ASSERT_EQ(cmp["rows"].size(), 4u);  // two configs x fp32, amp_bf16, all matched
  for (const auto& row : cmp["rows"]) {
    // A CPU without a bf16 kernel (AVX2 only): amp_bf16 is unsupported on both sides, no gate.
    if (row["precision"] == "amp_bf16" && !mpbench::test::native_bf16_available()) {
      EXPECT_EQ(row["verdict"], "unsupported") << row.dump();
      EXPECT_EQ(row["blocking"], false) << row.dump();
      continue;
    }
    // Judged or left out (measured on a busy machine, as this one may be).
    for (const auto& [side, n] : {std::pair<const char*, int>{"baseline", 9}, {"current", 3}})
      EXPECT_EQ(row["repetitions"][side].get<int>() + row["busy_repetitions"][side].get<int>(), n)
          << row.dump();
    EXPECT_TRUE(row["regressions"].empty() || row["regressions"] == nlohmann::json::array({"time"}))
        << row.dump();
  }
  EXPECT_NE(read_file((dir / "compare.xml").string()).find("<testsuites"), std::string::npos);
  const std::string s = read_file(summary);
  EXPECT_EQ(s.rfind("previous step\n", 0), 0u) << s;  // appended to, not replaced
  EXPECT_TRUE(s.find("PASS") != std::string::npos || s.find("FAIL") != std::string::npos) << s;
  fs::remove_all(dir);
}
