// The README's CPU runner jobs (the YAML after "<!-- ci-recipe-cpu -->" and after
// "<!-- ci-recipe-cpu-paired -->"), run as written: every `run:` step that calls build/mpbench
// (base/build/mpbench: the base commit's build) or writes the step summary, in order, with both
// standing for this build's executable, in a scratch folder that has the repository's configs, in
// the environment the runner gives (BLAS threads as the machine has them, for both sides). Time
// is not asserted (a run may pass or alarm by the machine's load); the files the jobs publish and
// the summary's verdict line are.
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

// The `run:` commands of the block after `mark`, in order, that the test can run here: the ones
// that call build/mpbench or append to the step summary (checkout, cache, setup and build are the
// runner's).
std::vector<std::string> recipe_commands(const std::string& readme, const std::string& mark) {
  const size_t at = readme.find("<!-- " + mark + " -->");
  if (at == std::string::npos) return {};
  const size_t open = readme.find("```yaml\n", at);
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
    // One pass, left to right, the longer name first: the executable's own path ends in
    // build/mpbench when the build folder is named build (the README's), and a second search
    // found it inside what the first had put in (/x/build/mpbench -> /x//x/build/mpbench). The
    // base commit's build is this one too.
    const std::string exe = MPBENCH_EXE;
    std::string with_exe;
    for (size_t i = 0; i < cmd.size();) {
      size_t matched = 0;
      for (const std::string from : {"base/build/mpbench", "build/mpbench"})
        if (cmd.compare(i, from.size(), from) == 0) {
          matched = from.size();
          break;
        }
      if (matched > 0) {
        with_exe += exe;
        i += matched;
      } else {
        with_exe += cmd[i++];
      }
    }
    out.push_back(with_exe);
  }
  return out;
}

// A directory of this process's own, with the repository's configs, removed at the end: the
// suite runs these tests twice (native_AVX2.ci_recipe too), at the same time under ctest -j, and
// one run's remove_all left the other's job in a removed directory (exit 2).
struct JobDir {
  fs::path path;
  explicit JobDir(const std::string& name)
      : path(fs::path(::testing::TempDir()) /
             ("mpbench_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
    fs::create_directory_symlink(std::string(MPBENCH_SOURCE_DIR) + "/configs", path / "configs");
  }
  ~JobDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// A job's commands run in `dir`, with the step summary `summary`; the one at `compare_step` may
// exit 0 or 1 (a time alarm by the machine's load), never refuse; every other must pass.
void run_job(const std::vector<std::string>& cmds, const fs::path& dir, const std::string& summary,
             size_t compare_step) {
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
    if (i == compare_step) {
      EXPECT_TRUE(r.code == 0 || r.code == 1) << r.code << "\n" << r.out << r.err;
    } else {
      ASSERT_EQ(r.code, 0) << r.out << r.err;
    }
  }
}

// What both jobs publish: the comparison's four rows (two configs x fp32, amp_bf16, all matched),
// each with `repetitions` a side, judged or left out as measured on a busy machine; the JUnit
// file; the step summary appended to.
void check_published(const fs::path& dir, const std::string& summary, int baseline_reps,
                     int current_reps) {
  const nlohmann::json cmp = nlohmann::json::parse(read_file((dir / "compare.json").string()));
  ASSERT_EQ(cmp["rows"].size(), 4u);
  for (const auto& row : cmp["rows"]) {
    // A CPU without a bf16 kernel (AVX2 only): amp_bf16 is unsupported on both sides, no gate.
    if (row["precision"] == "amp_bf16" && !mpbench::test::native_bf16_available()) {
      EXPECT_EQ(row["verdict"], "unsupported") << row.dump();
      EXPECT_EQ(row["blocking"], false) << row.dump();
      continue;
    }
    for (const auto& [side, n] :
         {std::pair<const char*, int>{"baseline", baseline_reps}, {"current", current_reps}})
      EXPECT_EQ(row["repetitions"][side].get<int>() + row["busy_repetitions"][side].get<int>(), n)
          << row.dump();
    EXPECT_TRUE(row["regressions"].empty() || row["regressions"] == nlohmann::json::array({"time"}))
        << row.dump();
  }
  EXPECT_NE(read_file((dir / "compare.xml").string()).find("<testsuites"), std::string::npos);
  const std::string s = read_file(summary);
  EXPECT_EQ(s.rfind("previous step\n", 0), 0u) << s;  // appended to, not replaced
  EXPECT_TRUE(s.find("PASS") != std::string::npos || s.find("FAIL") != std::string::npos) << s;
}

}  // namespace

TEST(CiRecipe, TheReadmesCpuJobRunsAsWritten) {
#if defined(MPBENCH_TEST_ASAN)
  // Four runs of the job's specs with 5 repetitions took 277 s under ASan on a 2-core machine,
  // past the 3 minutes a test may take; the Release build runs the same commands in ~20 s.
  GTEST_SKIP() << "the sanitizer build leaves the recipe to the Release build";
#endif
  const std::vector<std::string> cmds =
      recipe_commands(read_file(std::string(MPBENCH_SOURCE_DIR) + "/README.md"), "ci-recipe-cpu");
  // The baseline job's loop, the gate's run and compare, and the summary.
  ASSERT_EQ(cmds.size(), 4u);
  EXPECT_NE(cmds[0].find("baseline-cpu-ci-$i.json"), std::string::npos) << cmds[0];
  EXPECT_NE(cmds[2].find("compare --baseline"), std::string::npos) << cmds[2];
  const JobDir dir("ci_recipe");
  const std::string summary = (dir.path / "step_summary.md").string();
  std::ofstream(summary) << "previous step\n";
  run_job(cmds, dir.path, summary, 2);
  for (int i = 1; i <= 3; ++i)
    EXPECT_TRUE(
        fs::exists(dir.path / "results" / ("baseline-cpu-ci-" + std::to_string(i) + ".json")));
  check_published(dir.path, summary, 9, 3);
}

TEST(CiRecipe, TheReadmesPairedCpuJobRunsAsWritten) {
#if defined(MPBENCH_TEST_ASAN)
  GTEST_SKIP() << "the sanitizer build leaves the recipe to the Release build";
#endif
  const std::vector<std::string> cmds = recipe_commands(
      read_file(std::string(MPBENCH_SOURCE_DIR) + "/README.md"), "ci-recipe-cpu-paired");
  // The pairs' loop, compare, and the summary.
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_NE(cmds[1].find("compare --paired"), std::string::npos) << cmds[1];
  const JobDir dir("ci_recipe_paired");
  const std::string summary = (dir.path / "step_summary.md").string();
  std::ofstream(summary) << "previous step\n";
  // Three pairs, the fewest that give a time verdict, where the job runs twelve: six pairs' runs
  // took 86 s under a fresh clone's test suite on a busy 2-core machine.
  std::vector<std::string> job = cmds;
  const std::string twelve = "for i in $(seq 12);";
  ASSERT_NE(job[0].find(twelve), std::string::npos) << job[0];
  job[0].replace(job[0].find(twelve), twelve.size(), "for i in 1 2 3;");
  run_job(job, dir.path, summary, 1);
  // The pairs run in turn: each base file older than its current one in odd pairs, younger in
  // even ones (the file times say in which order the loop ran them).
  for (int i = 1; i <= 3; ++i) {
    const fs::path b = dir.path / ("base-" + std::to_string(i) + ".json"),
                   c = dir.path / ("cur-" + std::to_string(i) + ".json");
    ASSERT_TRUE(fs::exists(b) && fs::exists(c)) << i;
    EXPECT_EQ(fs::last_write_time(b) < fs::last_write_time(c), i % 2 == 1) << i;
  }
  const nlohmann::json cmp = nlohmann::json::parse(read_file((dir.path / "compare.json").string()));
  EXPECT_EQ(cmp["options"]["paired"], true);
  for (const auto& row : cmp["rows"])
    if (row["verdict"] != "unsupported") EXPECT_LE(row["pairs"].get<int>(), 3) << row.dump();
  check_published(dir.path, summary, 9, 9);
}
