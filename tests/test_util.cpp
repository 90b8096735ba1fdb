#include "test_util.h"

#include <sys/wait.h>
#include <cmath>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

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

::testing::AssertionResult activation_takes_rounded_gemm_output(Backend& be,
                                                                TrackingAllocator& alloc, DType dt,
                                                                Activation act, uint64_t seed) {
  // n a multiple of 8: the shapes cuBLASLt's aux epilogues take. Sums of 48 products of about
  // +-0.5 spread the pre-activations over GELU's curved region.
  const int64_t m = 64, n = 96, k = 48;
  std::vector<Tensor> owned;
  auto tensor = [&](Shape s, const std::vector<float>& values) {
    owned.push_back(alloc.alloc(s, dt, MemCategory::Activations));
    if (!values.empty()) from_host_f32(be, values, owned.back());
    return owned.back();
  };
  Tensor a = tensor(Shape{m, k}, random_nonzero(m * k, seed, 0.5f));
  Tensor b = tensor(Shape{k, n}, random_nonzero(k * n, seed + 1, 0.5f));
  Tensor bias = tensor(Shape{n}, random_nonzero(n, seed + 2));
  Tensor pre = tensor(Shape{m, n}, {}), train = tensor(Shape{m, n}, {}),
         eval = tensor(Shape{m, n}, {}), again = tensor(Shape{m, n}, {});
  std::vector<float> identity(static_cast<size_t>(m * m), 0.0f);
  for (int64_t i = 0; i < m; ++i) identity[static_cast<size_t>(i * m + i)] = 1.0f;
  Tensor eye = tensor(Shape{m, m}, identity);
  for (Tensor* t : {&pre, &train, &eval, &again}) poison(be, *t);

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

  const auto want = to_host_f32(be, again), got_train = to_host_f32(be, train),
             got_eval = to_host_f32(be, eval);
  for (const Tensor& t : owned) alloc.release(t);
  for (size_t i = 0; i < want.size(); ++i) {
    for (const auto* got : {&got_train, &got_eval}) {
      if (f32_bits((*got)[i]) == f32_bits(want[i])) continue;
      return ::testing::AssertionFailure()
             << dtype_name(dt) << " " << activation_name(act) << ", element " << i << ": "
             << (got == &got_train ? "with" : "without") << " pre_act " << (*got)[i]
             << ", the activation of the rounded pre-activation " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult batchnorm_rounds_before_residual(Backend& be, TrackingAllocator& alloc,
                                                            DType dt, uint64_t seed) {
  const int64_t rows = 256, c = 64;  // c a multiple of the CUDA kernel's vector width
  std::vector<Tensor> owned;
  auto tensor = [&](Shape s, DType t, const std::vector<float>& values) {
    owned.push_back(alloc.alloc(s, t, MemCategory::Activations));
    if (values.empty()) {
      poison(be, owned.back());
    } else {
      from_host_f32(be, values, owned.back());
    }
    return owned.back();
  };
  Tensor x = tensor(Shape{rows, c}, dt, random_nonzero(rows * c, seed, 2.0f));
  Tensor res = tensor(Shape{rows, c}, dt, random_nonzero(rows * c, seed + 1));
  Tensor gamma = tensor(Shape{c}, DType::F32, random_nonzero(c, seed + 2));
  Tensor beta = tensor(Shape{c}, DType::F32, random_nonzero(c, seed + 3));
  const std::vector<float> ones(static_cast<size_t>(c), 1.0f);
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  for (bool relu : {false, true}) {
    Tensor rm = tensor(Shape{c}, DType::F32, ones), rv = tensor(Shape{c}, DType::F32, ones);
    Tensor sm = tensor(Shape{c}, DType::F32, {}), sr = tensor(Shape{c}, DType::F32, {});
    Tensor fused = tensor(Shape{rows, c}, dt, {}), plain = tensor(Shape{rows, c}, dt, {});
    BatchNormDesc d;
    d.relu = relu;
    be.batchnorm_forward_train(d, x, &res, gamma, beta, rm, rv, sm, sr, fused);
    d.relu = false;
    be.batchnorm_forward_train(d, x, nullptr, gamma, beta, rm, rv, sm, sr, plain);
    be.add(plain, res, plain);
    const auto got = to_host_f32(be, fused), sum = to_host_f32(be, plain);
    for (size_t i = 0; i < got.size() && result; ++i) {
      const float want = relu && !(sum[i] > 0.0f) ? 0.0f : sum[i];
      if (f32_bits(got[i]) != f32_bits(want))
        result = ::testing::AssertionFailure()
                 << dtype_name(dt) << (relu ? " with ReLU" : "") << ", element " << i << ": "
                 << got[i] << ", the rounded BatchNorm output plus the residual " << want;
    }
  }
  for (const Tensor& t : owned) alloc.release(t);
  return result;
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

std::vector<float> to_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

}  // namespace mpbench::test
