// On the CPU reference the times are of the emulation, and every table that shows them says so
// (DESIGN.md, Devices): `profile` and `maxbatch` print the note `run` prints under its tables
// (device_note), in the console and in maxbatch's Markdown; on the native CPU, whose times are
// true ones, they do not.
#include <string>

#include <gtest/gtest.h>

#include "app/console_table.h"
#include "kernels/backend.h"
#include "test_util.h"

using mpbench::test::read_file;

namespace {

// kSmallSpec has amp_bf16 beside fp32: run_flags calls a reference mode other than fp32
// emulated.

class ReferenceNotes : public mpbench::test::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    spec_ = write("small.json", mpbench::test::kSmallSpec);
  }
  // The note as `run` words it, taken from the one function that does, not copied here.
  static std::string run_note() {
    mpbench::Report report;
    report.runs.emplace_back();
    report.runs.back().device = "reference";
    report.runs.back().precision = "amp_bf16";
    const auto note = mpbench::device_note(report);
    EXPECT_TRUE(note.has_value());
    return "note: " + note.value_or("");
  }
  std::string profile(const std::string& device) {
    const auto r = run("profile " + spec_ + " --device " + device + " --quiet --steps 2");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("by op"), std::string::npos) << r.out;  // the times are there
    return r.out;
  }
  // The console output; the Markdown into *md.
  std::string maxbatch(const std::string& device, std::string* md) {
    const std::string path = (dir_ / ("m_" + device + ".md")).string();
    const auto r = run("maxbatch " + spec_ + " --device " + device +
                       " --quiet --memory-limit 256KiB --md " + path);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("samples/s"), std::string::npos) << r.out;
    *md = read_file(path);
    return r.out;
  }
  static bool native_cpu() {
    std::string why;
    return mpbench::native_cpu_available(&why);
  }
  std::string spec_;
};

TEST_F(ReferenceNotes, ProfileSaysItsTimesAreOfTheEmulation) {
  const std::string out = profile("reference");
  const std::string note = run_note();
  EXPECT_NE(out.find(note), std::string::npos) << out;
  EXPECT_EQ(out.find(note), out.rfind(note)) << "once, not per mode:\n" << out;
  if (!native_cpu()) GTEST_SKIP() << "no native CPU backend in this build";
  EXPECT_EQ(profile("cpu").find(note), std::string::npos);
}

TEST_F(ReferenceNotes, MaxbatchSaysItsTimesAreOfTheEmulation) {
  std::string md;
  const std::string out = maxbatch("reference", &md);
  const std::string note = run_note();
  EXPECT_NE(out.find(note), std::string::npos) << out;
  EXPECT_NE(md.find(mpbench::markdown_cell(note)), std::string::npos) << md;
  if (!native_cpu()) GTEST_SKIP() << "no native CPU backend in this build";
  EXPECT_EQ(maxbatch("cpu", &md).find(note), std::string::npos);
  EXPECT_EQ(md.find(mpbench::markdown_cell(note)), std::string::npos) << md;
}

}  // namespace
