// scripts/device_check.sh's contract with the device tool, tried on the CPU so that it costs no
// device time: MPBENCH_CHECK_DEVICE=cpu with this build's mpbench (MPBENCH_CHECK_BIN), tiny_mlp
// for one epoch, and a fake slow step (MPBENCH_CHECK_FAKE_STEP_S) standing in for a config that
// takes long. The budget holds (steps that no longer fit are skipped and named), a SIGKILL at
// any moment leaves at most 8 files in OUTDIR whose merged JSONs parse and hold the steps done,
// SIGTERM still prints the summary, and a carried build from other sources is not used.
// Needs bash and python3; skipped where there is no python3.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shipped_configs.h"
#include "test_util.h"

namespace fs = std::filesystem;
using mpbench::test::read_file;
using nlohmann::json;
using Result = mpbench::test::ShellResult;
using Env = std::vector<std::pair<std::string, std::string>>;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kRoot = MPBENCH_SOURCE_DIR;
const std::string kScript = kRoot + "/scripts/device_check.sh";

class DeviceCheck : public mpbench::test::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (!mpbench::test::has_python3(dir_.string())) GTEST_SKIP() << "no python3";
    fs::create_directories(dir_ / "tmp");
  }
  void TearDown() override {
    // A step outlives a SIGKILLed script (timeout runs it in a group of its own) until its
    // limit: end what is left of the session the test started, by its id.
    if (sid_ > 0) {
      if (!reaped_) {
        ::kill(-sid_, SIGKILL);
        ::waitpid(sid_, nullptr, 0);
      }
      mpbench::test::run_shell("pkill -KILL -s " + std::to_string(sid_), dir_.string());
    }
    CliTest::TearDown();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // What every run here shares: the CPU, this build instead of building, no carried build (the
  // checkout's .devcarry/ may hold one), scratch files in the test's folder, tiny_mlp for one
  // epoch, no GPU test binaries (they only skip here) and no PyTorch.
  Env env(Env more) const {
    Env e = {{"MPBENCH_CHECK_DEVICE", "cpu"},
             {"MPBENCH_CHECK_BIN", fs::path(MPBENCH_EXE).parent_path().string()},
             {"MPBENCH_CHECK_CARRY", path("no_carry")},
             {"TMPDIR", path("tmp")},
             {"MPBENCH_CHECK_CONFIGS", kRoot + "/configs/tiny_mlp.json"},
             {"MPBENCH_CHECK_EPOCHS", "1"},
             {"MPBENCH_CHECK_TESTS", "0"},
             {"MPBENCH_CHECK_PYTORCH", "0"}};
    for (auto& kv : more) {
      bool replaced = false;
      for (auto& old : e)
        if (old.first == kv.first) old.second = kv.second, replaced = true;
      if (!replaced) e.push_back(kv);
    }
    return e;
  }
  Result check(const Env& e, const std::string& out = "out") {
    std::string cmd = "env";
    for (const auto& [k, v] : e) cmd += " " + k + "='" + v + "'";
    return mpbench::test::run_shell(cmd + " bash " + kScript + " " + path(out), dir_.string());
  }
  // The script in a session of its own (its id is the process group's), in the background.
  void start(const Env& e, const std::string& out = "out") {
    const std::string log = path("bg.txt");
    sid_ = ::fork();
    ASSERT_GE(sid_, 0);
    if (sid_ == 0) {
      ::setsid();
      // As a device call's command gets them, whatever this process was started with (a
      // background job ignores SIGINT, and bash cannot trap a signal ignored on entry).
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, 0);
      for (const auto& [k, v] : e) ::setenv(k.c_str(), v.c_str(), 1);
      const std::string o = path(out);
      ::execl("/bin/bash", "bash", kScript.c_str(), o.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  // Waits (up to 90 s) until summary.txt says the step is running (by default the fake one).
  bool wait_until_running(const std::string& out = "out", const std::string& step = "fake step") {
    const auto until = Clock::now() + std::chrono::seconds(90);
    while (Clock::now() < until) {
      for (const std::string& line : lines(read_file(dir_ / out / "summary.txt")))
        if (line.find(step) != std::string::npos && line.find("running") != std::string::npos)
          return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }
  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> v;
    size_t at = 0;
    while (at < text.size()) {
      const size_t nl = text.find('\n', at);
      v.push_back(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
    return v;
  }
  // The summary's line for a step (its label at the end of the line), empty when none.
  static std::string step_line(const std::string& summary, const std::string& label) {
    for (const std::string& line : lines(summary))
      if (line.size() >= label.size() + 2 &&
          line.compare(line.size() - label.size() - 2, std::string::npos, "  " + label) == 0)
        return line;
    return "";
  }
  // OUTDIR holds only the eight names the device tool returns, whatever ran.
  void expect_only_returned_names(const std::string& out) const {
    const std::set<std::string> returned = {
        "device_check.log",     "summary.txt",  "gpu_tests.log", "runs.txt",
        "mpbench_results.json", "pytorch.json", "profiles.json", "side_by_side.md"};
    for (const auto& entry : fs::directory_iterator(dir_ / out))
      EXPECT_TRUE(returned.count(entry.path().filename().string())) << entry.path();
  }
  size_t files_in(const std::string& out) const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_ / out)) ++n;
    return n;
  }

  pid_t sid_ = -1;
  bool reaped_ = false;
};

// Makes a carried build in dir/carry: an mpbench that notes each call in dir/carried_calls and
// runs this build's (or, with runs false, fails as a binary missing a library does), and
// source.txt with the given hash (none: no source.txt, an old carry).
// With a body, the carried mpbench runs that shell code after noting its call instead.
void make_carry(const fs::path& dir, const std::string& hash, bool runs = true,
                const std::string& body = "") {
  fs::create_directories(dir / "stage");
  fs::create_directories(dir / "carry");
  {
    std::ofstream f(dir / "stage" / "mpbench");
    f << "#!/bin/sh\necho \"$*\" >>" << (dir / "carried_calls").string() << "\n"
      << (!body.empty() ? body + "\n"
          : runs        ? "exec " + std::string(MPBENCH_EXE) + " \"$@\"\n"
                        : "exit 127\n");
  }
  fs::permissions(dir / "stage" / "mpbench", fs::perms::owner_all);
  ASSERT_EQ(mpbench::test::run_shell("tar -cJf " + (dir / "carry" / "bins.tar.xz").string() +
                                         " -C " + (dir / "stage").string() + " .",
                                     dir.string())
                .code,
            0);
  if (!hash.empty())
    std::ofstream(dir / "carry" / "source.txt") << "sha256 " << hash << "\ncommit abc123\n";
}

}  // namespace

// The GPU tests a build holds run first, each into gpu_tests.log and a "GPU tests:" line; the
// ones it lacks (a carry or MPBENCH_CHECK_BIN made before they existed) are said, not left out in
// silence. Whatever runs, OUTDIR holds only the eight files the device tool returns.
TEST_F(DeviceCheck, TheGpuTestsRunAndAMissingOneIsSaid) {
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  fs::create_symlink(MPBENCH_EXE, bin / "mpbench");
  {
    std::ofstream f(bin / "gpu_test_cuda_parity");
    // gtest's lines, its closing list of the skipped and failed ones included, which the
    // counts must not take for more tests.
    f << "#!/bin/sh\necho \"exe=$MPBENCH_TEST_EXE\"\necho '[       OK ] CudaParity.Fake (1 ms)'\n"
      << "echo '[  SKIPPED ] CudaParity/Fp8.Gemm/0, where GetParam() = 4-byte object <00> (0 ms)'\n"
      << "echo '[  FAILED  ] CudaParity/Fp8.Cast/1, where GetParam() = 4-byte object <01> (2 ms)'\n"
      << "echo '[  PASSED  ] 1 test.'\necho '[  SKIPPED ] 1 test, listed below:'\n"
      << "echo '[  SKIPPED ] CudaParity/Fp8.Gemm/0, where GetParam() = 4-byte object <00>'\n"
      << "echo '[  FAILED  ] 1 test, listed below:'\n"
      << "echo '[  FAILED  ] CudaParity/Fp8.Cast/1, where GetParam() = 4-byte object <01>'\n";
  }
  fs::permissions(bin / "gpu_test_cuda_parity", fs::perms::owner_all);
  const Result r = check(env({{"MPBENCH_CHECK_BIN", bin.string()},
                              {"MPBENCH_CHECK_TESTS", "1"},
                              {"MPBENCH_CHECK_GRAPHS", "0"},
                              {"MPBENCH_CHECK_PROFILE", "0"}}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string summary = read_file(dir_ / "out" / "summary.txt");
  EXPECT_NE(step_line(summary, "test gpu_test_cuda_parity").find("ok"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("GPU tests:\ngpu_test_cuda_parity"), std::string::npos) << summary;
  EXPECT_NE(summary.find("passed=1    failed=1    skipped=1\n"), std::string::npos) << summary;
  EXPECT_NE(read_file(dir_ / "out" / "gpu_tests.log").find("CudaParity.Fake"), std::string::npos);
  // A test that runs the CLI runs the mpbench under test (CliTest::run reads MPBENCH_TEST_EXE),
  // not the path of the build it came from, which a carried binary's machine lacks.
  EXPECT_NE(read_file(dir_ / "out" / "gpu_tests.log").find("exe=" + (bin / "mpbench").string()),
            std::string::npos);
  ::setenv("MPBENCH_TEST_EXE", "/bin/echo", 1);
  const Result echoed = run("through the variable");
  ::unsetenv("MPBENCH_TEST_EXE");
  EXPECT_EQ(echoed.out, "through the variable\n");
  const size_t missing = summary.find("GPU tests not in " + bin.string() + ":");
  ASSERT_NE(missing, std::string::npos) << summary;
  const std::string named = summary.substr(missing, summary.find(';', missing) - missing);
  EXPECT_NE(named.find(" gpu_test_training_parity"), std::string::npos) << named;
  EXPECT_EQ(named.find("gpu_test_cuda_parity"), std::string::npos) << named;
  expect_only_returned_names("out");
  // Every step done: no config is left for another call.
  EXPECT_EQ(summary.find("Configs with steps left"), std::string::npos) << summary;
}

// The plan over the shipped configs, in order of value (no step fits 12 s: nothing runs): one
// config per family first, each run once, maxbatch and explain after them, then the rest, and a
// --cuda-graphs rerun of every config; what the knobs leave out is said.
TEST_F(DeviceCheck, ThePlanPutsOneConfigPerFamilyFirstAndEachStepOnce) {
  const Result r = check(env({{"MPBENCH_CHECK_CONFIGS", ""}, {"MPBENCH_CHECK_BUDGET", "12"}}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string log = read_file(dir_ / "out" / "device_check.log");
  EXPECT_NE(log.find("the first configs/mnist_mlp.json configs/resnet50_conv2.json "
                     "configs/gpt2_small_layer.json\n"),
            std::string::npos)
      << log;
  const size_t at = log.find("the steps: ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string steps = log.substr(at, log.find('\n', at) - at);
  const auto pos = [&](const std::string& label) { return steps.find(" " + label + ","); };
  for (const std::string& spec : mpbench::test::shipped_configs()) {
    const std::string run = "run " + spec + " eager";
    EXPECT_NE(pos(run), std::string::npos) << run << " in " << steps;
    EXPECT_EQ(pos(run), steps.rfind(" " + run + ",")) << run << " twice in " << steps;
    EXPECT_NE(pos("run " + spec + " graphs"), std::string::npos) << spec << " in " << steps;
  }
  // A first config's profile right after its run, before the next first config's run.
  EXPECT_LT(pos("run mnist_mlp eager"), pos("profile mnist_mlp"));
  EXPECT_LT(pos("profile mnist_mlp"), pos("run resnet50_conv2 eager"));
  for (const char* step : {"maxbatch resnet50_conv2", "maxbatch bert_base_layer",
                           "explain resnet50_conv2", "explain gpt2_small_layer"})
    EXPECT_NE(pos(step), std::string::npos) << step << " in " << steps;
  EXPECT_LT(pos("run gpt2_small_layer eager"), pos("maxbatch resnet50_conv2"));
  EXPECT_LT(pos("explain gpt2_small_layer"), pos("run tiny_mlp eager"));
  const std::string summary = read_file(dir_ / "out" / "summary.txt");
  EXPECT_NE(summary.find("Left out: PyTorch reference"), std::string::npos) << summary;
  EXPECT_EQ(steps.find("pytorch"), std::string::npos) << steps;
  EXPECT_NE(summary.find("Configs with steps left: "), std::string::npos) << summary;
}

// The configs as given are each planned once, by their path from the tree's root: an
// MPBENCH_CHECK_FIRST spelled otherwise (an absolute path) is the same config, not a second one
// without amp_fp8; one outside the configs, or a second of the same name (whose results would
// take the first one's file names), is left out and said; one that cannot be read costs its own
// steps, not the families and modes of those after it.
TEST_F(DeviceCheck, EachConfigIsPlannedOnceAndABadOneCostsItsOwnSteps) {
  write("bad.json", "{ not json");
  fs::create_directories(dir_ / "other");
  fs::copy_file(kRoot + "/configs/tiny_resnet.json", dir_ / "other" / "tiny_resnet.json");
  const Result r = check(env(
      {{"MPBENCH_CHECK_CONFIGS", path("bad.json") + " configs/tiny_mlp.json " + kRoot +
                                     "/configs/tiny_transformer.json configs/tiny_resnet.json " +
                                     path("other/tiny_resnet.json")},
       {"MPBENCH_CHECK_FIRST", kRoot + "/configs/tiny_mlp.json configs/tiny_gpt.json"},
       {"MPBENCH_CHECK_PROFILE", "0"},
       {"MPBENCH_CHECK_GRAPHS", "0"},
       {"MPBENCH_CHECK_BUDGET", "90"}}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string log = read_file(dir_ / "out" / "device_check.log");
  const size_t at = log.find("the steps: ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string steps = log.substr(at, log.find('\n', at) - at);
  for (const char* once : {"run tiny_mlp eager", "run tiny_resnet eager", "run bad eager"}) {
    EXPECT_NE(steps.find(once), std::string::npos) << once << " in " << steps;
    EXPECT_EQ(steps.find(once), steps.rfind(once)) << once << " twice in " << steps;
  }
  EXPECT_EQ(steps.find("tiny_gpt"), std::string::npos) << steps;
  const std::string summary = read_file(dir_ / "out" / "summary.txt");
  EXPECT_NE(summary.find("configs/tiny_gpt.json (MPBENCH_CHECK_FIRST: not among the configs)"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("other/tiny_resnet.json (configs/tiny_resnet.json has its name)"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("bad.json unreadable (device_check.log)"), std::string::npos) << summary;
  EXPECT_NE(log.find("bad.json: cannot read: JSONDecodeError"), std::string::npos) << log;
  EXPECT_NE(step_line(summary, "run bad eager").find("FAILED"), std::string::npos) << summary;
  // The configs after the bad one keep their family's modes: tiny_transformer's run has amp_fp8.
  const json runs = json::parse(read_file(dir_ / "out" / "mpbench_results.json"));
  ASSERT_TRUE(runs.contains("tiny_transformer_eager.json")) << runs.dump().substr(0, 300);
  bool fp8 = false;
  for (const json& run : runs["tiny_transformer_eager.json"]["runs"])
    fp8 = fp8 || run["precision"] == "amp_fp8";
  EXPECT_TRUE(fp8);
}

TEST_F(DeviceCheck, StepsThatNoLongerFitAreSkippedAndNamed) {
  // A 45 s budget (10 s of it kept for the end) and a step that would sleep 120 s: the step is
  // cut at what was left, those after it are skipped, and the whole stays within the budget.
  const auto t0 = Clock::now();
  Result r = check(env({{"MPBENCH_CHECK_BUDGET", "45"}, {"MPBENCH_CHECK_FAKE_STEP_S", "120"}}));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_LE(secs, 55.0) << r.out;
  const std::string summary = read_file(dir_ / "out" / "summary.txt");
  EXPECT_NE(summary.find("summary: finished"), std::string::npos) << summary;
  EXPECT_EQ(step_line(summary, "run tiny_mlp eager").rfind("  ok", 0), 0u) << summary;
  EXPECT_NE(step_line(summary, "fake step (sleep 120 s)").find("CUT at"), std::string::npos)
      << summary;
  // Its limit was what was left of the budget less the reserve and the kill's grace: at most
  // 45 - 10 - 5 s.
  int limit = 0;
  const std::string cut = step_line(summary, "fake step (sleep 120 s)");
  ASSERT_EQ(std::sscanf(cut.c_str() + cut.find("CUT at its "), "CUT at its %d s limit", &limit), 1)
      << cut;
  EXPECT_LE(limit, 30) << cut;
  // A first config's profile runs right after its run (and PyTorch's), before the rest.
  EXPECT_EQ(step_line(summary, "profile tiny_mlp").rfind("  ok", 0), 0u) << summary;
  EXPECT_LT(summary.find("profile tiny_mlp"), summary.find("fake step")) << summary;
  for (const char* skipped : {"run tiny_mlp graphs"}) {
    EXPECT_NE(step_line(summary, skipped).find("SKIPPED"), std::string::npos) << skipped << " in:\n"
                                                                              << summary;
    EXPECT_NE(read_file(dir_ / "out" / "device_check.log").find(std::string("skipped ") + skipped),
              std::string::npos)
        << skipped;
  }
  EXPECT_NE(summary.find("Steps: 2 ok, 1 failed, cut or interrupted, 0 running, 1 skipped for "
                         "want of time, 0 not reached."),
            std::string::npos)
      << summary;
  // The summary is printed last, and says what a next call has left to do.
  EXPECT_NE(r.out.find("Steps, in the order planned"), std::string::npos) << r.out;
  // From the tree's root, where the next call runs.
  EXPECT_NE(summary.find("MPBENCH_CHECK_CONFIGS=\"configs/tiny_mlp.json\""), std::string::npos)
      << summary;
  EXPECT_LE(files_in("out"), 8u);
  const json runs = json::parse(read_file(dir_ / "out" / "mpbench_results.json"));
  EXPECT_TRUE(runs.contains("tiny_mlp_eager.json")) << runs.dump().substr(0, 200);
}

TEST_F(DeviceCheck, KillDuringAStepLeavesMergedResults) {
  // Two families first (tiny_mlp, tiny_resnet), then the fake step, SIGKILLed while it
  // runs: what finished before is in OUTDIR, merged, in files that parse.
  start(env({{"MPBENCH_CHECK_BUDGET", "300"},
             {"MPBENCH_CHECK_FAKE_STEP_S", "100"},
             {"MPBENCH_CHECK_CONFIGS",
              kRoot + "/configs/tiny_mlp.json " + kRoot + "/configs/tiny_resnet.json"}}));
  ASSERT_TRUE(wait_until_running()) << read_file(path("bg.txt"));
  ASSERT_EQ(::kill(-sid_, SIGKILL), 0);
  ::waitpid(sid_, nullptr, 0);
  reaped_ = true;

  EXPECT_LE(files_in("out"), 8u);
  for (const auto& entry : fs::directory_iterator(dir_ / "out"))
    if (entry.path().extension() == ".json")
      EXPECT_TRUE(json::accept(read_file(entry.path()))) << entry.path();
  const json runs = json::parse(read_file(dir_ / "out" / "mpbench_results.json"));
  // tiny_resnet, the first ResNet config, also ran with MPBENCH_CUDNN_POINTWISE=1 (the A/B).
  for (const char* f :
       {"tiny_mlp_eager.json", "tiny_resnet_eager.json", "tiny_resnet_cudnn_pointwise.json"}) {
    ASSERT_TRUE(runs.contains(f)) << f;
    EXPECT_FALSE(runs[f]["runs"].empty()) << f;
  }
  const std::string summary = read_file(dir_ / "out" / "summary.txt");
  EXPECT_NE(summary.find("summary: in progress"), std::string::npos) << summary;
  EXPECT_NE(step_line(summary, "fake step (sleep 100 s)").find("running"), std::string::npos)
      << summary;
  EXPECT_EQ(step_line(summary, "run tiny_mlp graphs").rfind("  not reached", 0), 0u) << summary;
  EXPECT_NE(read_file(dir_ / "out" / "runs.txt").find("== mpbench run tiny_resnet (eager)"),
            std::string::npos);
}

TEST_F(DeviceCheck, SigtermStopsTheStepAndPrintsTheSummary) {
  // SIGTERM (the device tool's limit) exits 143, SIGINT (a hand) 130; each stops the step,
  // merges what it wrote and prints the summary.
  for (const auto& [sig, name, code] :
       {std::tuple{SIGTERM, "SIGTERM", 143}, std::tuple{SIGINT, "SIGINT", 130}}) {
    SCOPED_TRACE(name);
    const std::string out = std::string("out_") + name;
    start(env({{"MPBENCH_CHECK_BUDGET", "300"}, {"MPBENCH_CHECK_FAKE_STEP_S", "100"}}), out);
    ASSERT_TRUE(wait_until_running(out)) << read_file(path("bg.txt"));
    const auto t0 = Clock::now();
    ASSERT_EQ(::kill(sid_, sig), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(sid_, &status, 0), sid_);
    EXPECT_LE(std::chrono::duration<double>(Clock::now() - t0).count(), 15.0);
    sid_ = -1;
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), code);
    const std::string printed = read_file(path("bg.txt"));
    EXPECT_NE(printed.find(std::string("summary: interrupted by ") + name), std::string::npos)
        << printed;
    EXPECT_NE(step_line(printed, "fake step (sleep 100 s)").find("INTERRUPTED"), std::string::npos)
        << printed;
    EXPECT_NE(
        read_file(dir_ / out / "summary.txt").find(std::string("summary: interrupted by ") + name),
        std::string::npos);
    EXPECT_LE(files_in(out), 8u);
  }
}

// SIGTERM during an mpbench run: the run ends (143) and what it printed is merged and said, as a
// step that ended by itself is.
TEST_F(DeviceCheck, SigtermDuringARunMergesWhatItPrinted) {
  start(env({{"MPBENCH_CHECK_BUDGET", "300"},
             {"MPBENCH_CHECK_CONFIGS", kRoot + "/configs/tiny_resnet.json"},
             {"MPBENCH_CHECK_EPOCHS", "500"}}));
  ASSERT_TRUE(wait_until_running("out", "run tiny_resnet eager")) << read_file(path("bg.txt"));
  ASSERT_EQ(::kill(sid_, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(sid_, &status, 0), sid_);
  sid_ = -1;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_NE(read_file(dir_ / "out" / "runs.txt").find("== mpbench run tiny_resnet (eager): rc=143"),
            std::string::npos)
      << read_file(dir_ / "out" / "runs.txt");
  EXPECT_NE(step_line(read_file(dir_ / "out" / "summary.txt"), "run tiny_resnet eager")
                .find("INTERRUPTED by SIGTERM"),
            std::string::npos);
}

// Where PyTorch is installed, its reference runs right after mpbench's run of the config, under
// a limit of at least its own 120 s (3x mpbench's seconds where that is more), into pytorch.json,
// and side_by_side.md sets the two beside each other.
TEST_F(DeviceCheck, PytorchRunsBesideAndIsMerged) {
  if (mpbench::test::run_shell("python3 -c 'import torch'", dir_.string()).code != 0)
    GTEST_SKIP() << "no torch for python3 here";
  const Result r = check(env({{"MPBENCH_CHECK_PYTORCH", "1"},
                              {"MPBENCH_CHECK_GRAPHS", "0"},
                              {"MPBENCH_CHECK_PROFILE", "0"}}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string summary = read_file(dir_ / "out" / "summary.txt");
  EXPECT_EQ(step_line(summary, "pytorch tiny_mlp").rfind("  ok", 0), 0u) << summary;
  EXPECT_TRUE(
      json::parse(read_file(dir_ / "out" / "pytorch.json")).contains("pytorch_tiny_mlp.json"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "side_by_side.md"));
  EXPECT_LE(files_in("out"), 8u);
  const std::string log = read_file(dir_ / "out" / "device_check.log");
  int limit = 0;
  const size_t at = log.find("started pytorch tiny_mlp, limit ");
  ASSERT_NE(at, std::string::npos) << log;
  ASSERT_EQ(std::sscanf(log.c_str() + at, "started pytorch tiny_mlp, limit %d s", &limit), 1);
  EXPECT_GE(limit, 120);
}

TEST_F(DeviceCheck, CarriedBuildOfOtherSourcesIsNotUsed) {
  const Env fast = {{"MPBENCH_CHECK_BUDGET", "120"},
                    {"MPBENCH_CHECK_GRAPHS", "0"},
                    {"MPBENCH_CHECK_PROFILE", "0"}};
  auto with_carry = [&](const std::string& sub, Env more) {
    Env e = fast;
    e.emplace_back("MPBENCH_CHECK_CARRY", path(sub + "/carry"));
    for (auto& kv : more) e.push_back(kv);
    return env(e);
  };
  // Recorded hash differs: refused, never run, MPBENCH_CHECK_BIN used instead of a build.
  make_carry(dir_ / "stale", std::string(64, '0'));
  Result stale = check(with_carry("stale", {}), "out_stale");
  ASSERT_EQ(stale.code, 0) << stale.out << stale.err;
  EXPECT_NE(stale.out.find("carried build is STALE"), std::string::npos) << stale.out;
  EXPECT_FALSE(fs::exists(dir_ / "stale" / "carried_calls"));
  EXPECT_NE(read_file(dir_ / "out_stale" / "summary.txt").find("build: MPBENCH_CHECK_BIN="),
            std::string::npos);
  // No source recorded (a carry from before the check): refused too. Without MPBENCH_CHECK_BIN
  // and with building off, nothing is left to test: exit 3.
  make_carry(dir_ / "old", "");
  Result old = check(with_carry("old", {{"MPBENCH_CHECK_BIN", ""}, {"MPBENCH_CHECK_BUILD", "0"}}),
                     "out_old");
  EXPECT_EQ(old.code, 3) << old.out << old.err;
  EXPECT_NE(old.out.find("records no source"), std::string::npos) << old.out;
  EXPECT_FALSE(fs::exists(dir_ / "old" / "carried_calls"));
  // The tree's own hash: the carry is used. (Source files edited in the moment between the two
  // hashes would fail this.)
  Result hash = mpbench::test::run_shell("bash " + kScript + " --source-hash", dir_.string());
  ASSERT_EQ(hash.code, 0) << hash.err;
  ASSERT_EQ(hash.out.size(), 65u) << hash.out;
  // Where git will not run on the tree (one owned by another user: "dubious ownership", exit
  // 128), the files on disk give the same hash, not that of no files.
  fs::create_directories(dir_ / "nogit");
  write("nogit/git", "#!/bin/sh\nexit 128\n");
  fs::permissions(dir_ / "nogit" / "git", fs::perms::owner_all);
  Result no_git = mpbench::test::run_shell(
      "PATH=" + path("nogit") + ":$PATH bash " + kScript + " --source-hash", dir_.string());
  EXPECT_EQ(no_git.out, hash.out) << no_git.err;
  make_carry(dir_ / "fresh", hash.out.substr(0, 64));
  Result fresh = check(with_carry("fresh", {}), "out_fresh");
  ASSERT_EQ(fresh.code, 0) << fresh.out << fresh.err;
  EXPECT_NE(fresh.out.find("testing the carried build of abc123"), std::string::npos) << fresh.out;
  EXPECT_NE(read_file(dir_ / "fresh" / "carried_calls").find("run "), std::string::npos);
  // Of this tree but not running here (a library the machine lacks): MPBENCH_CHECK_BIN instead.
  make_carry(dir_ / "broken", hash.out.substr(0, 64), false);
  Result broken = check(with_carry("broken", {}), "out_broken");
  ASSERT_EQ(broken.code, 0) << broken.out << broken.err;
  EXPECT_NE(broken.out.find("carried build does not run here"), std::string::npos) << broken.out;
  EXPECT_NE(read_file(dir_ / "out_broken" / "summary.txt").find("build: MPBENCH_CHECK_BIN="),
            std::string::npos);
}

// SIGTERM before the steps begin (here while the carried build's check hangs; on a GPU machine
// mostly a build from source): what runs is stopped with the script, not left running, and the
// summary is printed all the same. bash runs a trap only after a foreground command ends, so
// without the setup's commands in the background the script would wait out the check's 30 s.
TEST_F(DeviceCheck, SigtermBeforeTheStepsStopsTheSetupAndPrintsTheSummary) {
  Result hash = mpbench::test::run_shell("bash " + kScript + " --source-hash", dir_.string());
  ASSERT_EQ(hash.code, 0) << hash.err;
  make_carry(dir_ / "hung", hash.out.substr(0, 64), true, "exec sleep 100");
  start(env({{"MPBENCH_CHECK_CARRY", path("hung/carry")}, {"MPBENCH_CHECK_BUDGET", "300"}}));
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until && !fs::exists(dir_ / "hung" / "carried_calls"))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(dir_ / "hung" / "carried_calls")) << read_file(path("bg.txt"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into its sleep
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(sid_, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(sid_, &status, 0), sid_);
  reaped_ = true;
  EXPECT_LE(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  const std::string printed = read_file(path("bg.txt"));
  EXPECT_NE(printed.find("summary: interrupted by SIGTERM before the steps began"),
            std::string::npos)
      << printed;
  EXPECT_NE(read_file(dir_ / "out" / "summary.txt").find("interrupted by SIGTERM"),
            std::string::npos);
  // Nothing of the script's session is left running (the hung check included).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_NE(mpbench::test::run_shell("pgrep -s " + std::to_string(sid_), dir_.string()).code, 0)
      << mpbench::test::run_shell("ps -o pid,args -s " + std::to_string(sid_), dir_.string()).out;
  EXPECT_LE(files_in("out"), 8u);
}

// A second call given the first's summary (MPBENCH_CHECK_DONE) does not run again what the first
// finished, and says so; a third given the second's finds nothing left.
TEST_F(DeviceCheck, AnEarlierCallsFinishedStepsAreNotRunAgain) {
  const Result first =
      check(env({{"MPBENCH_CHECK_GRAPHS", "0"}, {"MPBENCH_CHECK_PROFILE", "0"}}), "out1");
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  const std::string s1 = read_file(dir_ / "out1" / "summary.txt");
  ASSERT_EQ(step_line(s1, "run tiny_mlp eager").rfind("  ok", 0), 0u) << s1;

  const Result second = check(env({{"MPBENCH_CHECK_DONE", path("out1/summary.txt")}}), "out2");
  ASSERT_EQ(second.code, 0) << second.out << second.err;
  const std::string s2 = read_file(dir_ / "out2" / "summary.txt");
  EXPECT_EQ(step_line(s2, "run tiny_mlp eager").rfind("  done earlier (ok)", 0), 0u) << s2;
  EXPECT_EQ(step_line(s2, "run tiny_mlp graphs").rfind("  ok", 0), 0u) << s2;
  EXPECT_EQ(step_line(s2, "profile tiny_mlp").rfind("  ok", 0), 0u) << s2;
  EXPECT_NE(s2.find("Steps: 2 ok, 0 failed"), std::string::npos) << s2;
  EXPECT_NE(s2.find("Steps done in an earlier call (MPBENCH_CHECK_DONE), not run again: 1."),
            std::string::npos)
      << s2;
  EXPECT_EQ(s2.find("Configs with steps left"), std::string::npos) << s2;
  const json runs = json::parse(read_file(dir_ / "out2" / "mpbench_results.json"));
  EXPECT_FALSE(runs.contains("tiny_mlp_eager.json")) << runs.dump().substr(0, 200);
  EXPECT_TRUE(runs.contains("tiny_mlp_graphs.json"));
  // With the profile on, its merged file too is one of the eight.
  EXPECT_TRUE(
      json::parse(read_file(dir_ / "out2" / "profiles.json")).contains("profile_tiny_mlp.json"));
  expect_only_returned_names("out2");

  const Result third = check(env({{"MPBENCH_CHECK_DONE", path("out2/summary.txt")}}), "out3");
  ASSERT_EQ(third.code, 0) << third.out << third.err;
  const std::string s3 = read_file(dir_ / "out3" / "summary.txt");
  EXPECT_NE(s3.find("Steps: 0 ok, 0 failed"), std::string::npos) << s3;
  EXPECT_NE(s3.find("Steps done in an earlier call (MPBENCH_CHECK_DONE), not run again: 3."),
            std::string::npos)
      << s3;
  EXPECT_FALSE(fs::exists(dir_ / "out3" / "mpbench_results.json"));
}

// A step that FAILED is not run again by the same build (it would fail again) but is by another
// (a fix between the calls); a file that is no summary is said and costs nothing.
TEST_F(DeviceCheck, AFailedStepRunsAgainOnlyUnderAnotherBuild) {
  const std::string steps =
      "Steps, in the order planned (status, seconds, step):\n"
      "  FAILED rc=3                                  7  run tiny_mlp eager\n";
  write("same.txt", "build: MPBENCH_CHECK_BIN=x instead of building: mpbench 1\n" + steps);
  write(
      "other.txt",
      "build: carried build of abc (source 0123456789ab, matches this tree): mpbench 1\n" + steps);
  write("junk.txt", "not a summary\n");
  const Env quick = {{"MPBENCH_CHECK_GRAPHS", "0"}, {"MPBENCH_CHECK_PROFILE", "0"}};
  Env same = quick, other = quick;
  same.emplace_back("MPBENCH_CHECK_DONE", path("same.txt") + " " + path("junk.txt"));
  other.emplace_back("MPBENCH_CHECK_DONE", path("other.txt"));

  ASSERT_EQ(check(env(same), "out_same").code, 0);
  const std::string s = read_file(dir_ / "out_same" / "summary.txt");
  EXPECT_EQ(step_line(s, "run tiny_mlp eager").rfind("  done earlier (FAILED rc=3)", 0), 0u) << s;
  EXPECT_NE(s.find("MPBENCH_CHECK_DONE " + path("junk.txt") + " (no device_check summary);"),
            std::string::npos)
      << s;

  const Result r = check(env(other), "out_other");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("another build (source 0123456789ab"), std::string::npos) << r.out;
  const std::string o = read_file(dir_ / "out_other" / "summary.txt");
  EXPECT_EQ(step_line(o, "run tiny_mlp eager").rfind("  ok", 0), 0u) << o;
}

// Scratch on another filesystem than OUTDIR (here TMPDIR in /dev/shm): the merged files'
// temporaries go into a folder beside OUTDIR, which is gone at the end, as is the scratch.
TEST_F(DeviceCheck, TemporariesOnAnotherFilesystemLeaveNothingBehind) {
  const fs::path shm = "/dev/shm";
  struct stat a {
  }, b{};
  if (::stat(shm.c_str(), &a) != 0 || ::stat(dir_.c_str(), &b) != 0 || a.st_dev == b.st_dev)
    GTEST_SKIP() << "no /dev/shm on another filesystem than " << dir_;
  const fs::path tmp = shm / ("mpbench_dc_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const Result r = check(env(
      {{"TMPDIR", tmp.string()}, {"MPBENCH_CHECK_GRAPHS", "0"}, {"MPBENCH_CHECK_PROFILE", "0"}}));
  const bool scratch_left = !fs::is_empty(tmp);
  fs::remove_all(tmp);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_FALSE(scratch_left);
  EXPECT_TRUE(json::parse(read_file(dir_ / "out" / "mpbench_results.json"))
                  .contains("tiny_mlp_eager.json"));
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename().string().rfind(".device_check_tmp", 0), std::string::npos)
        << entry.path();
  for (const auto& entry : fs::directory_iterator(dir_ / "out"))
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
}

// PyTorch's limit is three times the seconds mpbench's run of the config took where that is more
// than its own 120 s, also when the run was done by an earlier call (its seconds from that
// call's summary). A stub torch package stands in for PyTorch: its step fails at once, after
// its start was logged with the limit.
TEST_F(DeviceCheck, PytorchsLimitFollowsTheRunsSecondsFromAnEarlierCallToo) {
  fs::create_directories(dir_ / "stub" / "torch");
  write("stub/torch/__init__.py", "");
  write("done.txt",
        "Steps, in the order planned (status, seconds, step):\n"
        "  ok                                          50  run tiny_mlp eager\n");
  const Result r = check(env({{"MPBENCH_CHECK_PYTORCH", "1"},
                              {"PYTHONPATH", path("stub")},
                              {"MPBENCH_CHECK_DONE", path("done.txt")},
                              {"MPBENCH_CHECK_GRAPHS", "0"},
                              {"MPBENCH_CHECK_PROFILE", "0"}}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string log = read_file(dir_ / "out" / "device_check.log");
  EXPECT_NE(log.find("started pytorch tiny_mlp, limit 150 s"), std::string::npos) << log;
  const std::string summary = read_file(dir_ / "out" / "summary.txt");
  EXPECT_EQ(step_line(summary, "run tiny_mlp eager").rfind("  done earlier (ok)", 0), 0u)
      << summary;
}
