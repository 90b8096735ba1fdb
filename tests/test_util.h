#pragma once
// Shared test helpers: random non-zero inputs, poisoning, and the one comparator with per-dtype
// tolerances that every CPU-vs-CUDA and reference check uses.
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/host_load.h"

// clang's and gcc's ways of saying ASan is on: tests that run long under it trim their cases.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MPBENCH_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(MPBENCH_TEST_ASAN)
#define MPBENCH_TEST_ASAN 1
#endif

namespace mpbench::test {

// Relative error ||got - ref|| / ||ref|| allowed per dtype of the computation under test.
double tolerance_for(DType dt, GemmMath math = GemmMath::Strict);

struct CompareResult {
  bool ok = false;
  double rel_error = 0;
  std::string message;  // first offending element or NaN position, for the failure message
};
// NaN or inf in `got` where `ref` is finite never passes. With `scale` (same size), the error is
// ||got - ref|| / ||scale|| instead of / ||ref||: for sums such as GEMM outputs, scale holds the
// sums of absolute values, so that a result that cancels to near zero is not held to a relative
// accuracy no floating-point sum has.
CompareResult compare(const std::vector<float>& got, const std::vector<float>& ref, double tol,
                      const std::vector<float>* scale = nullptr);
// The sums of |v| down each column of a row-major (rows, cols) matrix: compare's scale for sums
// over rows (a bias or normalisation gradient), which can cancel.
std::vector<float> column_abs_sums(const std::vector<float>& v, int64_t rows, int64_t cols);

// Uniform in [-scale, scale] with |x| >= scale / 100 (never zero), deterministic from seed.
std::vector<float> random_nonzero(size_t n, uint64_t seed, float scale = 1.0f);

// Host <-> device helpers that convert through the tensor's dtype.
std::vector<float> to_host_f32(Backend& be, const Tensor& t);
void from_host_f32(Backend& be, const std::vector<float>& values, Tensor& t);

// A run's host_load (kernels/host_load.h): `threads` on `cpus`, their time on a CPU and waiting
// for one, a hypervisor's steal (NaN: unknown), in CPUs over `seconds`.
HostLoad host_load(int cpus, int threads, double own, double waited, double steal = NAN,
                   double seconds = 3);

// Pins the calling thread (and what it starts: threads, children), or with `whole_process` every
// thread of the process as taskset does, to the first CPU of the calling thread's affinity mask
// while it lives, and restores the masks after: for tests of what else runs on a run's CPUs
// (kernels/host_load.h).
class PinnedToOneCpu {
 public:
  explicit PinnedToOneCpu(bool whole_process = false);
  ~PinnedToOneCpu();
  PinnedToOneCpu(const PinnedToOneCpu&) = delete;
  PinnedToOneCpu& operator=(const PinnedToOneCpu&) = delete;
  bool ok() const { return ok_; }

 private:
  std::map<pid_t, cpu_set_t> old_;  // by thread id; 0 for the calling thread alone
  bool ok_ = false;
};

// The source tree (configs/ etc.): $MPBENCH_SOURCE_DIR when set (a build carried to another
// machine), else the directory the tests were built from.
std::string source_dir();

// Fills a tensor with NaN (floats) or 0x7fffffff (int32) so unwritten outputs are caught.
void poison(Backend& be, Tensor& t);

// v rounded to dt and decoded again (fp32: unchanged), the reference of a 16-bit output.
float round_to(DType dt, float v);
// Every element of v so rounded: a 16-bit output's reference, the fp32 result rounded once.
std::vector<float> rounded(DType dt, std::vector<float> v);
// Element-wise conversions between the double references and the fp32 results.
std::vector<float> to_float(const std::vector<double>& v);
std::vector<double> to_double(const std::vector<float>& v);

// Central differences (f(x + h e_i) - f(x - h e_i)) / 2h of a scalar function written in double,
// for every coordinate of x: the reference the CPU ops' backward passes are checked against.
std::vector<float> central_differences(const std::function<double(const std::vector<double>&)>& f,
                                       std::vector<double> x, double h = 1e-6);

// PyTorch's GradScaler update, torch._amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu),
// written from its rule on host values: a float32 scale multiplied by the double factors and
// rounded to float once, an int tracker, and a growth that would reach inf not taken. The
// reference both backends' update_loss_scale are held to, bit for bit.
struct GradScalerRef {
  float scale;
  int32_t tracker = 0;
  void update(bool found_inf, double growth, double backoff, int32_t interval) {
    if (found_inf) {
      scale = static_cast<float>(static_cast<double>(scale) * backoff);
      tracker = 0;
      return;
    }
    const int32_t successful = tracker + 1;
    if (successful == interval) {
      const float grown = static_cast<float>(static_cast<double>(scale) * growth);
      if (std::isfinite(grown)) scale = grown;
      tracker = 0;
    } else {
      tracker = successful;
    }
  }
};
// A fixed pattern of finite (false) and non-finite (true) steps, deterministic from the seed.
std::vector<bool> found_inf_pattern(size_t n, uint64_t seed, double p_inf = 0.2);

// The first element whose bits differ (NaN matches NaN, whatever its payload), or a size
// mismatch, as a failure naming `what`.
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want,
                                     const std::string& what);

// ReLU / GELU (tanh form) in double, written independently of the kernels.
double activation_ref(Activation act, double x);

// GemmDesc's forward-epilogue rounding on `be`: with 16-bit operands and C of dtype `dt`, C of a
// GEMM with bias, `act` and pre_act, and C of the same GEMM without pre_act (the evaluation
// path), both equal `act` applied to the stored pre-activation by a GEMM of the identity with it
// (one exact product per element), bit for bit: the activation takes the rounded value. With a
// bias aligned and one off 16 bytes (CUDA adds that one after the matmul). ReLU, which commutes
// with the rounding, is a control.
::testing::AssertionResult activation_takes_rounded_gemm_output(Backend& be,
                                                                TrackingAllocator& alloc, DType dt,
                                                                Activation act, uint64_t seed);

// The residual add of batch normalisation on `be`, all activations of dtype `dt`, C channels (a
// multiple of CUDA's vector width and not): BatchNorm's output is rounded to its input's dtype
// before the add, as autocast's BatchNorm writes it, so batchnorm_forward_train with a residual
// equals it without one followed by add(), bit for bit (with ReLU, ReLU of that sum).
::testing::AssertionResult batchnorm_rounds_before_residual(Backend& be, TrackingAllocator& alloc,
                                                            DType dt, uint64_t seed);

// GemmDesc's backward epilogue on `be` with 16-bit operands and C of dtype `dt`: a GEMM with
// dact (and dbias) equals the plain GEMM followed by bias_act_backward, bit for bit (cuBLASLt's
// DGELU epilogues round once, so they must not serve a 16-bit C).
::testing::AssertionResult backward_epilogue_is_gemm_then_bias_act_backward(
    Backend& be, TrackingAllocator& alloc, DType dt, Activation act, uint64_t seed);

// bias_act_backward on `be`, dtype `dt`: dbias is the column sums of dx as the op stored it
// (rounded to dt), as autocast's bias gradient sums the GELU backward's 16-bit output.
::testing::AssertionResult bias_gradient_sums_the_rounded_dx(Backend& be, TrackingAllocator& alloc,
                                                             DType dt, Activation act,
                                                             uint64_t seed);

// Newlines in s: a message of one line has one.
inline size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}
inline bool has_text(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// The whole file (binary); empty when it cannot be read.
std::string read_file(const std::filesystem::path& path);

struct ShellResult {
  int code = -1;  // exit code, -1 when killed by a signal
  std::string out, err;
};
// Runs `cmd` with sh, stdin from /dev/null, stdout and stderr captured through files in `dir`.
ShellResult run_shell(const std::string& cmd, const std::string& dir);
// Whether python3 runs here (the script tests skip where it does not); `dir` as run_shell's.
bool has_python3(const std::string& dir);

#ifdef MPBENCH_EXE
// Fixture for tests of the mpbench executable: a fresh temporary directory per test.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // A parameterised test's names hold '/': one directory, not a tree TearDown leaves behind.
    std::string name = std::string("mpbench_") + info->test_suite_name() + "_" + info->name() +
                       "_" + std::to_string(::getpid());
    for (char& ch : name)
      if (ch == '/') ch = '_';
    dir_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Under a UTF-8 locale whatever the machine's, so that tables are drawn the same everywhere.
  // MPBENCH_TEST_EXE, where set, names the mpbench to run instead of this build's: a GPU test
  // binary carried to another machine (scripts/device_check.sh sets it to the mpbench it tests).
  ShellResult run(const std::string& args) {
    const char* exe = std::getenv("MPBENCH_TEST_EXE");
    return run_shell("LC_ALL=C.UTF-8 " + std::string(exe && *exe ? exe : MPBENCH_EXE) + " " + args,
                     dir_.string());
  }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // Bad input refused before any work: exit 2, one line naming `needle`, nothing on stdout.
  void expect_refused(const ShellResult& r, const std::string& needle) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_TRUE(has_text(r.err, needle)) << r.err;
    EXPECT_EQ(r.out, "") << "work was done before the refusal";
  }

  std::filesystem::path dir_;
};
#endif

// Fixture for op tests on the CPU reference: a backend and an allocator for its tensors.
class CpuOpsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_reference_backend();
  TrackingAllocator alloc{*be};

  Tensor make(Shape s, DType dt, const std::vector<float>& values) {
    Tensor t = alloc.alloc(s, dt, MemCategory::Activations);
    from_host_f32(*be, values, t);
    return t;
  }
  Tensor scalar(float v) { return make(Shape{1}, DType::F32, {v}); }
  // An output tensor filled with NaN (see poison), so that elements an op fails to write show.
  Tensor poisoned(Shape s, DType dt) {
    Tensor t = alloc.alloc(s, dt, MemCategory::Activations);
    poison(*be, t);
    return t;
  }
};

// The modes test_training_series trains every tiny config in, step by step, bit for bit.
inline constexpr const char* kTrainingSeriesModes = "fp32,tf32,amp_fp16,amp_bf16";

// A small MLP spec in fp32 and amp_bf16 that trains in a blink: the CLI tests' subject.
inline constexpr const char* kSmallSpec = R"({"name": "small", "model": {"type": "mlp",
  "input_dim": 16, "hidden": [16], "num_classes": 4}, "data": {"train_samples": 256,
  "eval_samples": 64}, "train": {"batch_size": 32, "epochs": 1},
  "precisions": ["fp32", "amp_bf16"]})";
// Whether p is one of them: under ASan, where a tiny config's learning test takes up to 26 s a
// mode, those tests skip such modes, which the series already trains there.
bool in_training_series(Precision p);

// Whether amp_bf16 trains on the native CPU in this process: oneDNN has a bf16 kernel for the ISA
// it may use (none on an AVX2-only CPU, nor under ONEDNN_MAX_CPU_ISA=AVX2, where amp_bf16 is an
// `unsupported` row). Asked of the backend, as a run does, not of /proc/cpuinfo. False in a build
// without the native backend.
bool native_bf16_available();

// A suite over (config, precision mode): named "<config>_<mode>".
using ConfigMode = std::tuple<const char*, Precision>;
inline std::string config_mode_name(const ::testing::TestParamInfo<ConfigMode>& info) {
  return std::string(std::get<0>(info.param)) + "_" + precision_name(std::get<1>(info.param));
}

}  // namespace mpbench::test
