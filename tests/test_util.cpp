#include "test_util.h"

#include <sys/wait.h>
#include <cmath>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kernels/relu.h"

namespace mpbench::test {

bool in_training_series(Precision p) {
  std::stringstream modes(kTrainingSeriesModes);
  for (std::string m; std::getline(modes, m, ',');)
    if (m == precision_name(p)) return true;
  return false;
}

bool native_bf16_available() {
  static const bool available = [] {
    std::string why;
    return native_cpu_available(&why) && !make_native_cpu_backend()->info().bf16_gemm.empty();
  }();
  return available;
}

std::vector<bool> found_inf_pattern(size_t n, uint64_t seed, double p_inf) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution inf(p_inf);
  std::vector<bool> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = inf(rng);
  return out;
}

double tolerance_for(DType dt, GemmMath math) {
  switch (dt) {
    case DType::F16:
      return 5e-3;
    case DType::BF16:
      return 1e-2;
    default:
      return math == GemmMath::TF32 ? 1e-3 : 1e-5;
  }
}

CompareResult compare(const std::vector<float>& got, const std::vector<float>& ref, double tol,
                      const std::vector<float>* scale) {
  CompareResult r;
  if (got.size() != ref.size() || (scale && scale->size() != ref.size())) {
    r.message = fmt::format("size {} != {}", got.size(), ref.size());
    return r;
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ref_finite = std::isfinite(ref[i]);
    if (std::isnan(got[i]) || (ref_finite && !std::isfinite(got[i]))) {
      r.message = fmt::format("element {} is {} (reference {})", i, got[i], ref[i]);
      return r;
    }
    if (!ref_finite) {
      if (got[i] != ref[i]) {
        r.message = fmt::format("element {} is {} (reference {})", i, got[i], ref[i]);
        return r;
      }
      continue;
    }
    double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    const double s = scale ? (*scale)[i] : ref[i];
    den += s * s;
  }
  r.rel_error = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  r.ok = r.rel_error <= tol;
  r.message = fmt::format("relative error {:.3g} (tolerance {:.3g})", r.rel_error, tol);
  return r;
}

std::vector<float> column_abs_sums(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> s(static_cast<size_t>(cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) s[c] += std::fabs(v[r * cols + c]);
  return s;
}

std::vector<float> random_nonzero(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mag(scale / 100.0f, scale);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = sign(rng) ? mag(rng) : -mag(rng);
  return v;
}

std::vector<float> to_host_f32(Backend& be, const Tensor& t) {
  std::vector<float> out(t.numel());
  switch (t.dtype) {
    case DType::F32:
      be.download(t, out.data());
      break;
    case DType::I32: {
      std::vector<int32_t> raw(t.numel());
      be.download(t, raw.data());
      for (size_t i = 0; i < raw.size(); ++i) out[i] = static_cast<float>(raw[i]);
      break;
    }
    case DType::F8E4M3:
    case DType::F8E5M2: {
      std::vector<uint8_t> raw(t.numel());
      be.download(t, raw.data());
      for (size_t i = 0; i < raw.size(); ++i) out[i] = fp8_to_f32(raw[i], t.dtype);
      break;
    }
    default: {
      std::vector<uint16_t> raw(t.numel());
      be.download(t, raw.data());
      for (size_t i = 0; i < raw.size(); ++i)
        out[i] = t.dtype == DType::F16 ? f16_to_f32(raw[i]) : bf16_to_f32(raw[i]);
    }
  }
  return out;
}

void from_host_f32(Backend& be, const std::vector<float>& values, Tensor& t) {
  MPB_CHECK(values.size() == static_cast<size_t>(t.numel()), "size mismatch");
  switch (t.dtype) {
    case DType::F32:
      be.upload(values.data(), t);
      break;
    case DType::I32: {
      std::vector<int32_t> raw(values.begin(), values.end());
      be.upload(raw.data(), t);
      break;
    }
    case DType::F8E4M3:
    case DType::F8E5M2: {  // unscaled: the values themselves, rounded and saturated
      std::vector<uint8_t> raw(values.size());
      for (size_t i = 0; i < raw.size(); ++i) raw[i] = f32_to_fp8(values[i], t.dtype);
      be.upload(raw.data(), t);
      break;
    }
    default: {
      std::vector<uint16_t> raw(values.size());
      for (size_t i = 0; i < raw.size(); ++i)
        raw[i] = t.dtype == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
      be.upload(raw.data(), t);
    }
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

HostLoad host_load(int cpus, int threads, double own, double waited, double steal, double seconds) {
  HostLoad h;
  h.cpus = cpus;
  h.threads = threads;
  h.seconds = seconds;
  h.own_cpus = own;
  h.waited_cpus = waited;
  h.steal_cpus = steal;
  return h;
}

PinnedToOneCpu::PinnedToOneCpu(bool whole_process) {
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) return;
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine)) ++cpu;
  if (cpu == CPU_SETSIZE) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  std::vector<pid_t> tids{0};
  if (whole_process) {
    tids.clear();
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
      tids.push_back(static_cast<pid_t>(std::stol(e.path().filename().string())));
  }
  ok_ = true;
  for (pid_t tid : tids) {
    cpu_set_t old;
    if (sched_getaffinity(tid, sizeof(old), &old) != 0) continue;  // a thread gone since
    if (sched_setaffinity(tid, sizeof(one), &one) != 0) {
      ok_ = false;
      continue;
    }
    old_[tid] = old;
  }
}

PinnedToOneCpu::~PinnedToOneCpu() {
  for (const auto& [tid, mask] : old_) sched_setaffinity(tid, sizeof(mask), &mask);
}

ShellResult run_shell(const std::string& cmd, const std::string& dir) {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  const std::string full = cmd + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(full.c_str());
  ShellResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

bool has_python3(const std::string& dir) {
  return run_shell("python3 --version", dir).code == 0;
}

double activation_ref(Activation act, double x) {
  switch (act) {
    case Activation::Relu:
      return x > 0 ? x : 0;
    case Activation::Gelu:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::None:
      break;
  }
  return x;
}

::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want,
                                     const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " elements against " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    if (f32_bits(got[i]) == f32_bits(want[i]) || (std::isnan(got[i]) && std::isnan(want[i])))
      continue;
    return ::testing::AssertionFailure()
           << what << ", element " << i << ": " << got[i] << " against " << want[i];
  }
  return ::testing::AssertionSuccess();
}

namespace {

// Tensors of one test on `be`, released together.
struct Scratch {
  Backend& be;
  TrackingAllocator& alloc;
  std::vector<Tensor> owned;
  ~Scratch() {
    for (const Tensor& t : owned) alloc.release(t);
  }
  // With `values`, or poisoned without.
  Tensor make(Shape s, DType dt, const std::vector<float>& values = {}) {
    owned.push_back(alloc.alloc(s, dt, MemCategory::Activations));
    if (values.empty()) {
      poison(be, owned.back());
    } else {
      from_host_f32(be, values, owned.back());
    }
    return owned.back();
  }
};

}  // namespace

::testing::AssertionResult activation_takes_rounded_gemm_output(Backend& be,
                                                                TrackingAllocator& alloc, DType dt,
                                                                Activation act, uint64_t seed) {
  // n a multiple of 8: the shapes cuBLASLt's aux epilogues take. Sums of 48 products of about
  // +-0.5 spread the pre-activations over GELU's curved region.
  const int64_t m = 64, n = 96, k = 48;
  Scratch t{be, alloc, {}};
  Tensor a = t.make(Shape{m, k}, dt, random_nonzero(m * k, seed, 0.5f));
  Tensor b = t.make(Shape{k, n}, dt, random_nonzero(k * n, seed + 1, 0.5f));
  std::vector<float> bias_v = random_nonzero(n + 1, seed + 2);
  Tensor bias_buf = t.make(Shape{n + 1}, dt, bias_v);
  std::vector<float> identity(static_cast<size_t>(m * m), 0.0f);
  for (int64_t i = 0; i < m; ++i) identity[static_cast<size_t>(i * m + i)] = 1.0f;
  Tensor eye = t.make(Shape{m, m}, dt, identity);
  for (int64_t offset : {0, 1}) {
    Tensor bias = bias_buf.slice(offset, Shape{n});
    Tensor pre = t.make(Shape{m, n}, dt), train = t.make(Shape{m, n}, dt),
           eval = t.make(Shape{m, n}, dt), again = t.make(Shape{m, n}, dt);
    GemmDesc d;
    d.math = GemmMath::LowPrecision;
    d.act = act;
    d.bias = &bias;
    d.pre_act = &pre;
    be.gemm(d, a, b, train);
    d.pre_act = nullptr;
    be.gemm(d, a, b, eval);
    GemmDesc id;
    id.math = GemmMath::LowPrecision;
    id.act = act;
    be.gemm(id, eye, pre, again);
    const auto want = to_host_f32(be, again);
    const std::string what =
        fmt::format("{} {}, bias at element {}", dtype_name(dt), activation_name(act), offset);
    auto r = same_bits(to_host_f32(be, train), want, what + ", with pre_act");
    if (r) r = same_bits(to_host_f32(be, eval), want, what + ", without pre_act");
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult batchnorm_rounds_before_residual(Backend& be, TrackingAllocator& alloc,
                                                            DType dt, uint64_t seed) {
  const int64_t rows = 256;
  for (int64_t c : {64, 63}) {  // CUDA's vectorised kernel and its scalar one
    Scratch t{be, alloc, {}};
    Tensor x = t.make(Shape{rows, c}, dt, random_nonzero(rows * c, seed, 2.0f));
    Tensor res = t.make(Shape{rows, c}, dt, random_nonzero(rows * c, seed + 1));
    Tensor gamma = t.make(Shape{c}, DType::F32, random_nonzero(c, seed + 2));
    Tensor beta = t.make(Shape{c}, DType::F32, random_nonzero(c, seed + 3));
    const std::vector<float> ones(static_cast<size_t>(c), 1.0f);
    for (bool relu : {false, true}) {
      Tensor rm = t.make(Shape{c}, DType::F32, ones), rv = t.make(Shape{c}, DType::F32, ones);
      Tensor sm = t.make(Shape{c}, DType::F32), sr = t.make(Shape{c}, DType::F32);
      Tensor fused = t.make(Shape{rows, c}, dt), plain = t.make(Shape{rows, c}, dt);
      BatchNormDesc d;
      d.relu = relu;
      be.batchnorm_forward_train(d, x, &res, gamma, beta, rm, rv, sm, sr, fused);
      d.relu = false;
      be.batchnorm_forward_train(d, x, nullptr, gamma, beta, rm, rv, sm, sr, plain);
      be.add(plain, res, plain);
      std::vector<float> want = to_host_f32(be, plain);
      if (relu)
        for (float& v : want) v = relu_forward(v);
      auto r =
          same_bits(to_host_f32(be, fused), want,
                    fmt::format("{}, {} channels{}", dtype_name(dt), c, relu ? ", with ReLU" : ""));
      if (!r) return r;
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult backward_epilogue_is_gemm_then_bias_act_backward(
    Backend& be, TrackingAllocator& alloc, DType dt, Activation act, uint64_t seed) {
  const int64_t m = 64, n = 96, k = 48;
  Scratch t{be, alloc, {}};
  Tensor a = t.make(Shape{m, k}, dt, random_nonzero(m * k, seed, 0.5f));
  Tensor b = t.make(Shape{k, n}, dt, random_nonzero(k * n, seed + 1, 0.5f));
  // Pre-activations of both signs and around GELU's curved region.
  Tensor pre = t.make(Shape{m, n}, dt, random_nonzero(m * n, seed + 2, 3.0f));
  for (bool with_dbias : {false, true}) {
    Tensor fused = t.make(Shape{m, n}, dt), plain = t.make(Shape{m, n}, dt);
    Tensor db_fused = t.make(Shape{n}, DType::F32), db_plain = t.make(Shape{n}, DType::F32);
    GemmDesc d;
    d.math = GemmMath::LowPrecision;
    be.gemm(d, a, b, plain);
    be.bias_act_backward(act, plain, pre, plain, with_dbias ? &db_plain : nullptr);
    d.dact = act;
    d.dact_input = &pre;
    d.dbias = with_dbias ? &db_fused : nullptr;
    be.gemm(d, a, b, fused);
    const std::string what = fmt::format("{} {}{}", dtype_name(dt), activation_name(act),
                                         with_dbias ? " with dbias" : "");
    auto r = same_bits(to_host_f32(be, fused), to_host_f32(be, plain), what);
    if (r && with_dbias)
      r = same_bits(to_host_f32(be, db_fused), to_host_f32(be, db_plain), what + ": dbias");
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

// One row of dy and pre repeated: each column's dx rounds the same way in every row, so summing
// the products before their rounding is off by up to 2^-9 (bf16), 2^-12 (fp16) of the sum, where
// summing 300 rows in fp32 errs by at most 300 / 2 x 2^-24 = 9e-6 of it.
::testing::AssertionResult bias_gradient_sums_the_rounded_dx(Backend& be, TrackingAllocator& alloc,
                                                             DType dt, Activation act,
                                                             uint64_t seed) {
  const int64_t rows = 300, n = 40;
  const std::vector<float> dy_row = random_nonzero(n, seed),
                           pre_row = random_nonzero(n, seed + 1, 3.0f);
  std::vector<float> dyv(rows * n), prev(rows * n);
  for (int64_t i = 0; i < rows * n; ++i) {
    dyv[i] = dy_row[i % n];
    prev[i] = pre_row[i % n];
  }
  Scratch t{be, alloc, {}};
  Tensor dy = t.make(Shape{rows, n}, dt, dyv), pre = t.make(Shape{rows, n}, dt, prev);
  Tensor dx = t.make(Shape{rows, n}, dt), db = t.make(Shape{n}, DType::F32);
  be.bias_act_backward(act, dy, pre, dx, &db);
  const std::vector<float> got = to_host_f32(be, dx), dbv = to_host_f32(be, db);
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0, mag = 0;
    for (int64_t i = 0; i < rows; ++i) {
      sum += got[i * n + j];
      mag += std::fabs(got[i * n + j]);
    }
    if (std::fabs(dbv[j] - sum) > 2e-5 * mag)
      return ::testing::AssertionFailure()
             << dtype_name(dt) << " " << activation_name(act) << ": dbias[" << j << "] " << dbv[j]
             << ", the sum of dx as stored " << sum;
  }
  return ::testing::AssertionSuccess();
}

std::string source_dir() {
  const char* env = std::getenv("MPBENCH_SOURCE_DIR");
  return env && *env ? env : MPBENCH_SOURCE_DIR;
}

void poison(Backend& be, Tensor& t) {
  if (t.dtype == DType::I32) {
    std::vector<int32_t> raw(t.numel(), 0x7fffffff);
    be.upload(raw.data(), t);
  } else if (is_fp8(t.dtype)) {
    std::vector<uint8_t> raw(t.numel(), 0x7F);  // NaN in both formats
    be.upload(raw.data(), t);
  } else {
    be.fill(t, std::nanf(""));
  }
}

std::vector<float> central_differences(const std::function<double(const std::vector<double>&)>& f,
                                       std::vector<double> x, double h) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    out[i] = static_cast<float>((up - down) / (2 * h));
  }
  return out;
}

float round_to(DType dt, float v) {
  switch (dt) {
    case DType::F16:
      return f16_to_f32(f32_to_f16(v));
    case DType::BF16:
      return bf16_to_f32(f32_to_bf16(v));
    default:
      return v;
  }
}

std::vector<float> rounded(DType dt, std::vector<float> v) {
  for (float& e : v) e = round_to(dt, e);
  return v;
}

std::vector<float> to_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

}  // namespace mpbench::test
