// `--device cpu`, the native backend on oneDNN (issue 27): fp32 and amp_bf16 measured natively,
// every other mode an `unsupported` row naming --device reference; the ISA cases reached on any
// AVX-512 machine through --cpu-isa (and ONEDNN_MAX_CPU_ISA); bad --threads / --cpu-isa refused in
// one line. In a build without oneDNN (the sanitizer build), --device cpu is refused instead and
// auto falls back to the reference, saying so. No test here asserts a speed.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "test_util.h"

using mpbench::test::count_lines;
using mpbench::test::has_text;
using nlohmann::json;

namespace {

// The CPU's flags as /proc/cpuinfo lists them.
std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> out;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) out.insert(w);
    break;
  }
  return out;
}

const json* run_of(const json& doc, const std::string& precision) {
  for (const json& r : doc["runs"])
    if (r["precision"] == precision) return &r;
  return nullptr;
}

class NativeCpu : public mpbench::test::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    std::string why;
    if (!mpbench::native_cpu_available(&why)) GTEST_SKIP() << why;
  }
  std::string tiny(const char* config = "tiny_mlp") {
    return mpbench::test::source_dir() + "/configs/" + config + ".json";
  }
  // `run` of the tiny MLP in all four default modes on the native CPU, with `extra` arguments
  // (and environment, before the command), read back from its JSON.
  json run_json(const std::string& extra, const std::string& env = "") {
    const std::string out = (dir_ / "out.json").string();
    const auto r =
        mpbench::test::run_shell("LC_ALL=C.UTF-8 " + env + " " + MPBENCH_EXE + " run " + tiny() +
                                     " --device cpu --epochs 1 --quiet --json " + out + " " + extra,
                                 dir_.string());
    EXPECT_EQ(r.code, 0) << r.err;
    last_out_ = r.out;
    last_err_ = r.err;
    return json::parse(mpbench::test::read_file(out));
  }
  std::string last_out_, last_err_;
};

TEST_F(NativeCpu, Fp32AndBf16RunNativelyTheOtherModesSayWhyNot) {
  const json doc = run_json("");
  EXPECT_EQ(doc["env"]["device"], "cpu");
  const json& nc = doc["env"]["native_cpu"];
  EXPECT_GE(nc["threads"].get<int>(), 1);
  EXPECT_FALSE(nc["isa"].get<std::string>().empty());
  EXPECT_TRUE(nc["gemm_tflops"]["fp32"].get<double>() > 0);
  const json* fp32 = run_of(doc, "fp32");
  ASSERT_NE(fp32, nullptr);
  EXPECT_EQ((*fp32)["status"], "ok");
  EXPECT_EQ((*fp32)["device"], "cpu");
  EXPECT_FALSE((*fp32)["kernels"].empty());  // the oneDNN implementations that ran
  // Its own: not the bf16 GEMMs that measured the ceilings before it (nor a later mode's).
  for (const json& k : (*fp32)["kernels"]) {
    EXPECT_FALSE(has_text(k.get<std::string>(), "bf16")) << (*fp32)["kernels"];
    EXPECT_FALSE(has_text(k.get<std::string>(), "amx")) << (*fp32)["kernels"];
    EXPECT_FALSE(has_text(k.get<std::string>(), "reference loops")) << (*fp32)["kernels"];
  }
  // Not "emulated" (a busy machine may add "noisy").
  EXPECT_EQ((*fp32)["flags"].dump().find("emulated"), std::string::npos) << (*fp32)["flags"];
  EXPECT_GT((*fp32)["percent_of_peak"].get<double>(), 0.0);  // against the measured ceiling
  for (const char* mode : {"tf32", "amp_fp16"}) {
    const json* r = run_of(doc, mode);
    ASSERT_NE(r, nullptr) << mode;
    EXPECT_EQ((*r)["status"], "unsupported") << mode;
    EXPECT_TRUE(has_text((*r)["status_detail"].get<std::string>(), "--device reference"))
        << (*r)["status_detail"];
    EXPECT_EQ((*r)["warmup_steps"], 0) << mode;  // trained none (fp32 the spec's)
  }
  EXPECT_EQ((*fp32)["warmup_steps"], doc["specs"][0]["train"]["warmup_steps"]);
  const json* bf16 = run_of(doc, "amp_bf16");
  ASSERT_NE(bf16, nullptr);
  if (mpbench::test::native_bf16_available()) {
    // A ceiling of its own, measured apart from fp32's.
    const double bf16_rate = nc["gemm_tflops"]["amp_bf16"].get<double>();
    EXPECT_GT(bf16_rate, 0.0);
    EXPECT_NE(bf16_rate, nc["gemm_tflops"]["fp32"].get<double>());
    EXPECT_EQ((*bf16)["status"], "ok") << (*bf16).value("status_detail", "");
    EXPECT_FALSE((*bf16)["kernels"].empty());
    EXPECT_GT((*bf16)["final_accuracy"].get<double>(), 0.5);
  } else {  // oneDNN 2.6 has no bf16 kernel below AVX-512
    EXPECT_EQ((*bf16)["status"], "unsupported");
    EXPECT_TRUE(has_text((*bf16)["status_detail"].get<std::string>(), "bf16 needs AVX-512"))
        << (*bf16)["status_detail"];
  }
  // Nothing on the console calls these times emulated.
  EXPECT_FALSE(has_text(last_out_, "emulated")) << last_out_;
}

// The three cases of issue 27, on whatever AVX-512 machine runs the tests: no bf16 kernel at all
// (AVX2), bf16 converted in software (AVX-512 without bf16 instructions), and bf16 instructions.
TEST_F(NativeCpu, IsaCapsReachEveryCase) {
  const auto flags = cpu_flags();
  json avx2 = run_json("--precisions fp32,amp_bf16 --cpu-isa avx2");
  EXPECT_EQ(avx2["env"]["native_cpu"]["bf16_gemm"], "none");
  EXPECT_EQ(run_of(avx2, "fp32")->at("status"), "ok");
  EXPECT_EQ(run_of(avx2, "amp_bf16")->at("status"), "unsupported");
  EXPECT_TRUE(has_text(run_of(avx2, "amp_bf16")->at("status_detail").get<std::string>(),
                       "bf16 needs AVX-512"));
  // oneDNN's own variable reaches the same case.
  json env_avx2 = run_json("--precisions fp32,amp_bf16", "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(run_of(env_avx2, "amp_bf16")->at("status"), "unsupported");
  if (!flags.count("avx512f") || !flags.count("avx512bw")) GTEST_SKIP() << "no AVX-512 here";
  // On a CPU with AVX-512 the cap, not the CPU, leaves bf16 out, and the row says so.
  for (const json* capped : {&avx2, &env_avx2})
    EXPECT_TRUE(has_text(run_of(*capped, "amp_bf16")->at("status_detail").get<std::string>(),
                         "which this CPU has: --cpu-isa or ONEDNN_MAX_CPU_ISA capped it"))
        << run_of(*capped, "amp_bf16")->at("status_detail");
  // devices' console says it too, and how bf16 GEMMs run (its JSON did; the console said only
  // "unsupported natively").
  const auto dev = mpbench::test::run_shell(
      "ONEDNN_MAX_CPU_ISA=AVX2 " + std::string(MPBENCH_EXE) + " devices", dir_.string());
  EXPECT_EQ(dev.code, 0) << dev.err;
  EXPECT_TRUE(has_text(dev.out, "bf16 GEMMs none")) << dev.out;
  EXPECT_TRUE(has_text(dev.out, "which this CPU has: --cpu-isa or ONEDNN_MAX_CPU_ISA capped it"))
      << dev.out;

  json conv = run_json("--precisions fp32,amp_bf16 --cpu-isa avx512_core");
  EXPECT_EQ(conv["env"]["native_cpu"]["bf16_gemm"], "converted");
  EXPECT_EQ(run_of(conv, "amp_bf16")->at("status"), "ok");
  EXPECT_TRUE(has_text(last_out_, "without bf16 instructions")) << last_out_;
  // One note, the last thing printed (a noisy run's notes come before it).
  const std::string tail = last_out_.substr(last_out_.find("note: this CPU runs amp_bf16"));
  EXPECT_EQ(tail.find("note:", 1), std::string::npos) << last_out_;
  std::string words;  // the note unwrapped
  for (char c : tail)
    if (!std::isspace(static_cast<unsigned char>(c)) || (!words.empty() && words.back() != ' '))
      words += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
  EXPECT_EQ(words.substr(words.size() - 25), "a true time for this CPU ") << last_out_;
  // devices says so too, with both measured rates.
  const auto conv_dev = mpbench::test::run_shell(
      "ONEDNN_MAX_CPU_ISA=AVX512_CORE " + std::string(MPBENCH_EXE) + " devices", dir_.string());
  EXPECT_EQ(conv_dev.code, 0) << conv_dev.err;
  EXPECT_TRUE(has_text(conv_dev.out, "  this CPU runs amp_bf16 without bf16 instructions"))
      << conv_dev.out;
  if (!flags.count("avx512_bf16")) GTEST_SKIP() << "no AVX512-BF16 here";

  json native = run_json("--precisions fp32,amp_bf16 --cpu-isa avx512_core_bf16");
  EXPECT_EQ(native["env"]["native_cpu"]["bf16_gemm"], "native");
  bool bf16_kernel = false;
  for (const json& k : run_of(native, "amp_bf16")->at("kernels"))
    bf16_kernel |= has_text(k.get<std::string>(), "bf16");
  EXPECT_TRUE(bf16_kernel) << run_of(native, "amp_bf16")->at("kernels");
  EXPECT_FALSE(has_text(last_out_, "without bf16 instructions")) << last_out_;
}

// profile, explain and maxbatch say it as run does: maxbatch's samples/s column said nothing of
// bf16 converted in software.
TEST_F(NativeCpu, MaxbatchSaysBf16IsConverted) {
  if (!cpu_flags().count("avx512f") || !cpu_flags().count("avx512bw"))
    GTEST_SKIP() << "no AVX-512 here";
  const auto r = run("maxbatch " + tiny() +
                     " --device cpu --cpu-isa avx512_core --precisions fp32,amp_bf16 "
                     "--memory-limit 1MiB --quiet");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "note: this CPU runs amp_bf16 without bf16 instructions")) << r.out;
}

// The measured peak is what the run needs: a memory limit at it fits and one below it does not.
// oneDNN's workspace grew to half as much again as asked, so a run trained at 0.8 MB under its
// "peak" (a memory QA).
TEST_F(NativeCpu, AMemoryLimitAtThePeakFits) {
  const std::string spec = tiny("tiny_transformer");
  const std::string out = (dir_ / "peak.json").string();
  const auto first =
      run("run " + spec + " --device cpu --precisions fp32 --epochs 1 --quiet --json " + out);
  ASSERT_EQ(first.code, 0) << first.err;
  const json doc = json::parse(mpbench::test::read_file(out));
  const uint64_t peak = doc["runs"][0]["peak_memory_bytes"]["training"].get<uint64_t>();
  EXPECT_GT(doc["runs"][0]["peak_memory_bytes"]["by_category"]["workspace"].get<uint64_t>(), 0u);
  for (const uint64_t limit : {peak, peak - 64}) {
    const auto r =
        run(fmt::format("run {} --device cpu --precisions fp32 --epochs 1 --quiet "
                        "--memory-limit {} --json {}",
                        spec, limit, out));
    ASSERT_EQ(r.code, 0) << r.err;
    const json ran = json::parse(mpbench::test::read_file(out));
    EXPECT_EQ(ran["runs"][0]["status"], limit == peak ? "ok" : "oom") << limit << " " << peak;
  }
}

TEST_F(NativeCpu, ThreadsAreRecorded) {
  const json doc = run_json("--precisions fp32 --threads 1");
  EXPECT_EQ(doc["env"]["native_cpu"]["threads"], 1);
  EXPECT_FALSE(has_text(last_err_, "warning")) << last_err_;
}

// Without --threads the threads are the physical cores shared among the host's processes (the
// data-parallel ranks on one machine), one each at the least: two ranks take half each, not all
// of them each.
TEST_F(NativeCpu, AutomaticThreadsShareTheCoresAmongTheHostsProcesses) {
  mpbench::NativeCpuOptions alone, two_ranks, many_ranks;
  two_ranks.host_processes = 2;
  many_ranks.host_processes = 4096;
  const int all = mpbench::make_native_cpu_backend(alone)->info().cpu_threads;
  ASSERT_GE(all, 1);
  EXPECT_EQ(mpbench::make_native_cpu_backend(two_ranks)->info().cpu_threads, std::max(1, all / 2));
  EXPECT_EQ(mpbench::make_native_cpu_backend(many_ranks)->info().cpu_threads, 1);
}

// More threads than the CPUs the process may run on: a warning naming both counts (the run
// still goes ahead, with the threads asked for).
TEST_F(NativeCpu, MoreThreadsThanCpusAreWarnedOf) {
  const int cpus = mpbench::usable_cpus();
  const json doc = run_json(fmt::format("--precisions fp32 --threads {}", cpus + 1));
  EXPECT_EQ(doc["env"]["native_cpu"]["threads"], cpus + 1);
  EXPECT_TRUE(
      has_text(last_err_, fmt::format("--threads {} is more than the {} CPU", cpus + 1, cpus)))
      << last_err_;
  run_json(fmt::format("--precisions fp32 --threads {}", cpus));
  EXPECT_FALSE(has_text(last_err_, "warning")) << last_err_;
}

TEST_F(NativeCpu, EveryCommandRunsOnIt) {
  const std::string spec = tiny("tiny_transformer");
  for (const std::string& cmd :
       {"profile " + spec + " --steps 2 --precisions fp32,amp_bf16 --quiet",
        "explain " + tiny("tiny_resnet") + " --steps 2 --precisions fp32,amp_bf16 --quiet",
        "maxbatch " + tiny() + " --precisions fp32 --memory-limit 1MiB --quiet",
        "run " + tiny("tiny_resnet") + " --epochs 1 --precisions fp32,amp_bf16 --quiet"}) {
    const auto r = run(cmd + " --device cpu");
    EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err;
    EXPECT_TRUE(r.err.empty()) << cmd << "\n" << r.err;
    // Without a bf16 kernel there is nothing to compare, and explain says why.
    if (cmd.rfind("explain", 0) == 0 && !mpbench::test::native_bf16_available()) {
      EXPECT_TRUE(has_text(r.out, "not compared, amp_bf16 unsupported")) << r.out;
      continue;
    }
    // tiny_resnet's 1x1 stride-2 shortcut of 8 channels takes the reference's backward-weights
    // loop (oneDNN issue #6035): explain names that op, not GEMMs.
    if (cmd.rfind("explain", 0) == 0) {
      EXPECT_TRUE(has_text(r.out, "fallback path, the reference's loops")) << r.out;
      EXPECT_TRUE(has_text(r.out, "conv2d_backward_filter (")) << r.out;
      EXPECT_FALSE(has_text(r.out, "GEMM calls")) << r.out;
    }
  }
  // The profile names the oneDNN implementation of each GEMM (its matmul, not the activation
  // pass that may follow it), in the table and the JSON.
  const std::string pj = (dir_ / "p.json").string();
  const auto p =
      run("profile " + spec + " --steps 2 --precisions fp32 --quiet --device cpu --json " + pj);
  EXPECT_TRUE(has_text(p.out, "kernel")) << p.out;
  // At batch 1 the small ops' rates and times keep their digits: no "6.34e-05" TFLOP/s.
  const auto one = run("profile " + tiny() + " --steps 2 --precisions fp32 --batch-size 1 " +
                       "--quiet --device cpu");
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_FALSE(has_text(one.out, "e-0")) << one.out;
  const json doc = json::parse(mpbench::test::read_file(pj));
  // The measured GEMM rate is the ceiling; there is no bandwidth figure: null, not 0.
  const json& ceil = doc["profiles"][0]["ceilings"];
  EXPECT_GT(ceil["peak_tflops"].get<double>(), 0) << ceil;
  EXPECT_TRUE(ceil["memory_gbps"].is_null()) << ceil;
  int gemms = 0;
  for (const json& o : doc["profiles"][0]["ops"]) {
    if (o["op"] != "gemm") continue;
    ++gemms;
    ASSERT_TRUE(o["kernel"].is_string()) << o;
    EXPECT_TRUE(has_text(o["kernel"].get<std::string>(), "brg") ||
                has_text(o["kernel"].get<std::string>(), "gemm"))
        << o;  // a matmul implementation: brgemm, or oneDNN's gemm-based one
  }
  EXPECT_GT(gemms, 0);
  // An op on the reference's loops (tiny_resnet's #6035 shortcut) is named so, not left blank
  // as if it were one of the backend's own loops.
  const std::string rj = (dir_ / "r.json").string();
  ASSERT_EQ(run("profile " + tiny("tiny_resnet") +
                " --steps 2 --precisions fp32 --quiet --device cpu --top 200 --json " + rj)
                .code,
            0);
  int fallbacks = 0;
  const json resnet = json::parse(mpbench::test::read_file(rj));
  for (const json& o : resnet["profiles"][0]["ops"])
    if (o["op"] == "conv2d_backward_filter" && o["kernel"] == "reference loops") ++fallbacks;
  EXPECT_GT(fallbacks, 0);
  // A run's kernels name it too: part of its time is not oneDNN's.
  const std::string runj = (dir_ / "run.json").string();
  ASSERT_EQ(run("run " + tiny("tiny_resnet") + " --epochs 1 --precisions fp32 --quiet --device " +
                "cpu --json " + runj)
                .code,
            0);
  const json kernels = json::parse(mpbench::test::read_file(runj))["runs"][0]["kernels"];
  EXPECT_NE(std::find(kernels.begin(), kernels.end(), "reference loops: conv2d_backward_filter"),
            kernels.end())
      << kernels;
}

// maxbatch does not search a mode that has no path here: an `unsupported` row naming why, no
// probes, no batch (null, never 0), in every output and in the report.
TEST_F(NativeCpu, MaxbatchSaysWhichModesHaveNoPath) {
  const std::string mb = (dir_ / "mb.json").string(), csv = (dir_ / "mb.csv").string();
  const auto r = run("maxbatch " + tiny() + " --device cpu --precisions fp32,amp_fp16,amp_fp8 " +
                     "--memory-limit 1MiB --quiet --json " + mb + " --csv " + csv);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "unsupported")) << r.out;
  EXPECT_FALSE(has_text(r.out, "none fits")) << r.out;
  // amp_fp8's note on the multiples its FP8 GEMMs need is for a mode that ran.
  EXPECT_FALSE(has_text(r.out, "batches multiple of 16")) << r.out;
  const json doc = json::parse(mpbench::test::read_file(mb));
  ASSERT_EQ(doc["max_batch"].size(), 3u);
  EXPECT_EQ(doc["max_batch"][2]["status"], "unsupported");
  const json& fp32 = doc["max_batch"][0];
  const json& fp16 = doc["max_batch"][1];
  EXPECT_EQ(fp32["status"], "ok");
  EXPECT_GT(fp32["max_batch"].get<int64_t>(), 0);
  EXPECT_EQ(fp16["status"], "unsupported");
  EXPECT_TRUE(fp16["max_batch"].is_null()) << fp16;
  EXPECT_TRUE(fp16["probes"].empty()) << fp16;
  EXPECT_TRUE(has_text(fp16["status_detail"].get<std::string>(), "--device reference")) << fp16;
  EXPECT_TRUE(has_text(mpbench::test::read_file(csv), "amp_fp16,,false,,,,0,unsupported"))
      << mpbench::test::read_file(csv);
  const std::string html = (dir_ / "mb.html").string();
  ASSERT_EQ(run("report " + mb + " --html " + html).code, 0);
  EXPECT_TRUE(has_text(mpbench::test::read_file(html), "unsupported"));
}

// Under an address-space limit (`ulimit -v`) below the memory limit, maxbatch's probes end in oom
// rows that say so, and the run ends normally: oneDNN 2.6 crashed (SIGSEGV) creating a primitive
// once a probe's allocation had filled the address space, so the allocator keeps a reserve.
TEST_F(NativeCpu, AnAddressSpaceLimitGivesOomProbesNotACrash) {
#ifdef MPBENCH_TEST_ASAN
  GTEST_SKIP() << "ASan's shadow memory does not fit under an address-space limit";
#endif
  const std::string mb = (dir_ / "mb.json").string();
  const auto r = mpbench::test::run_shell(
      // Batches of 1024s: fewer probes (28.8 s -> 15.2 s), the host still binding.
      "ulimit -v 3000000 && " + std::string(MPBENCH_EXE) + " maxbatch " + tiny("tiny_transformer") +
          " --device cpu --precisions fp32 --memory-limit 4GiB --multiple 1024 --quiet --json " +
          mb,
      dir_.string());
  ASSERT_EQ(r.code, 0) << r.err;
  // The host, not the 4 GiB budget, bounds it, and the table says so.
  EXPECT_TRUE(has_text(r.out, "host memory at ")) << r.out;
  const json m = json::parse(mpbench::test::read_file(mb))["max_batch"][0];
  EXPECT_EQ(m["status"], "ok") << m;
  EXPECT_GT(m["max_batch"].get<int64_t>(), 0) << m;
  bool said = false;
  for (const json& p : m["probes"])
    said = said || (p["status"] == "oom" &&
                    has_text(p["detail"].get<std::string>(), "address-space limit (ulimit -v"));
  EXPECT_TRUE(said) << m["probes"];
}

// Under an address-space limit, threads whose stacks cannot fit are refused up front: libgomp
// ended the process at the first parallel op ("Thread creation failed", exit 1).
TEST_F(NativeCpu, ThreadStacksOverTheAddressSpaceLimitAreRefused) {
#ifdef MPBENCH_TEST_ASAN
  GTEST_SKIP() << "ASan's shadow memory does not fit under an address-space limit";
#endif
  const auto r =
      mpbench::test::run_shell("ulimit -v 3000000 && " + std::string(MPBENCH_EXE) + " run " +
                                   tiny() + " --device cpu --threads 400 --epochs 1 --quiet",
                               dir_.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has_text(r.err, "--threads 400: 399 more threads' stacks")) << r.err;
  EXPECT_TRUE(has_text(r.err, "address-space limit (ulimit -v")) << r.err;
  // One line: the warning that 400 threads are more than the CPUs comes only with a backend.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  // OMP_STACKSIZE sets the stacks libgomp maps: KiB without a unit, as its manual says, B bytes
  // and G GiB. 199 of 16 MiB (3.1 GiB) do not fit under 2.9 GiB; of 16 KiB (or 1 MiB) they would.
  for (const auto& [size, mib] : {std::pair<const char*, int>{"16384", 16},
                                  {"16M", 16},
                                  {"16384K", 16},
                                  {"16777216B", 16},
                                  {"1G", 1024}}) {
    const auto s = mpbench::test::run_shell(
        "ulimit -v 3000000 && OMP_STACKSIZE=" + std::string(size) + " " + std::string(MPBENCH_EXE) +
            " run " + tiny() + " --device cpu --threads 200 --epochs 1 --quiet",
        dir_.string());
    EXPECT_EQ(s.code, 2) << size << ": " << s.err;
    EXPECT_TRUE(has_text(s.err, fmt::format("199 more threads' stacks of {} MiB each", mib)))
        << size << ": " << s.err;
  }
}

// A seeds x batch sweep trains every cell natively; under a memory cap between the two modes'
// needs (measured here first: oneDNN's scratchpads and reordered filters count, as workspace),
// fp32 is an oom row and amp_bf16 trains within it.
TEST_F(NativeCpu, SeedsSweepsAndTheMemoryLimitWorkOnIt) {
  const json sweep = run_json("--precisions fp32,amp_bf16 --seeds 2 --batch-sizes 16,32");
  ASSERT_EQ(sweep["runs"].size(), 8u);
  const bool has_bf16 = mpbench::test::native_bf16_available();
  for (const json& r : sweep["runs"]) {
    if (r["precision"] == "amp_bf16" && !has_bf16) {
      EXPECT_EQ(r["status"], "unsupported") << "batch " << r["batch_size"];
      continue;
    }
    EXPECT_EQ(r["status"], "ok") << r["precision"] << " batch " << r["batch_size"];
    EXPECT_FALSE(r["kernels"].empty()) << r["precision"];
  }
  // A mode and batch per entry, an unsupported one too (seeds 0).
  ASSERT_EQ(sweep["seed_summary"].size(), 4u);
  for (const json& e : sweep["seed_summary"])
    EXPECT_EQ(e["seeds"], e["precision"] == "amp_bf16" && !has_bf16 ? 0 : 2) << e;
  if (!has_bf16) GTEST_SKIP() << "no bf16 kernel here: the memory cap between the modes needs one";

  const std::string out = (dir_ / "m.json").string();
  const std::string resnet = " run " + tiny("tiny_resnet") +
                             " --device cpu --epochs 1 --precisions fp32,amp_bf16 --quiet --json " +
                             out;
  ASSERT_EQ(run(resnet).code, 0);
  const json free_run = json::parse(mpbench::test::read_file(out));
  const uint64_t fp32 = free_run["runs"][0]["peak_memory_bytes"]["training"];
  const uint64_t bf16 = free_run["runs"][1]["peak_memory_bytes"]["training"];
  EXPECT_GT(free_run["runs"][0]["peak_memory_bytes"]["by_category"]["workspace"].get<uint64_t>(),
            0u);
  ASSERT_GT(fp32, bf16);
  const uint64_t cap = (fp32 + bf16) / 2;
  const auto r = run(resnet + " --memory-limit " + std::to_string(cap) + "B");
  ASSERT_EQ(r.code, 0) << r.err;
  const json capped = json::parse(mpbench::test::read_file(out));
  EXPECT_EQ(capped["runs"][0]["status"], "oom");
  EXPECT_EQ(capped["runs"][1]["status"], "ok");
  EXPECT_LE(capped["runs"][1]["peak_memory_bytes"]["training"].get<uint64_t>(), cap);
}

TEST_F(NativeCpu, BadThreadsAndIsaAreRefusedInOneLine) {
  // Under auto too: refused before the CPU-fallback notice, which made it two lines.
  for (const std::string& args :
       {std::string("run --device cpu --threads 0"),
        std::string("run --device cpu --cpu-isa nonsense"),
        std::string("run --device reference --threads 2"),
        std::string("run --device reference --cpu-isa avx2"), std::string("run --cpu-isa nonsense"),
        std::string("profile --cpu-isa nonsense"), std::string("maxbatch --cpu-isa nonsense")}) {
    const auto r = run(args.substr(0, args.find(' ')) + " " + tiny() + args.substr(args.find(' ')));
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
  }
  EXPECT_TRUE(has_text(run("run " + tiny() + " --device cpu --cpu-isa nonsense").err, "nonsense"));
}

// What a build without oneDNN does (the sanitizer build is one): --device cpu is refused in one
// line pointing at the reference; auto falls back to the reference and says so.
TEST(NativeCpuMissing, DeviceCpuIsRefusedAndAutoFallsBack) {
  std::string why;
  if (mpbench::native_cpu_available(&why)) GTEST_SKIP() << "this build has the native backend";
  const std::string tiny = mpbench::test::source_dir() + "/configs/tiny_mlp.json";
  const auto dir = std::filesystem::temp_directory_path().string();
  const auto r = mpbench::test::run_shell(
      std::string(MPBENCH_EXE) + " run " + tiny + " --device cpu --epochs 1", dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(has_text(r.err, "--device reference")) << r.err;
  const auto a = mpbench::test::run_shell(
      std::string(MPBENCH_EXE) + " run " + tiny + " --epochs 1 --precisions fp32", dir);
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_TRUE(has_text(a.err, "CPU reference")) << a.err;
}

}  // namespace
