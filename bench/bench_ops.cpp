// Microbenchmarks of the ops behind `Backend`, per precision, on the CPU reference and (when a GPU
// is present) on CUDA, at the shapes the model families use: the two MLP configs' GEMMs (forward
// and both backward GEMMs), one BERT-base encoder layer's GEMMs, and the memory-bound kernels of
// a training step. bench/README.md says how to run it and how to read the counters.
//
//   bench_ops [--benchmark_filter=cuda/gemm] [--benchmark_counters_tabular=true]
//
// The CPU runs smaller problems than the GPU (same layer widths, fewer rows or parameters) so
// that the whole CPU suite takes a minute or two on two cores.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"

namespace mpbench {
namespace {

// ---- backends --------------------------------------------------------------------------------

// One backend per device for the whole run, so that no benchmark times context creation, with
// the GEMM workspace the trainer would give it.
struct DeviceEnv {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<TrackingAllocator> workspace_alloc;
};
DeviceEnv g_envs[2];

Backend& backend_for(Device dev) {
  DeviceEnv& env = g_envs[dev == Device::CPU ? 0 : 1];
  if (!env.backend) {
    env.backend = dev == Device::CPU ? make_cpu_backend() : make_cuda_backend(0);
    env.workspace_alloc = std::make_unique<TrackingAllocator>(*env.backend);
    if (size_t ws = env.backend->workspace_bytes()) {
      Tensor w = env.workspace_alloc->alloc(Shape{static_cast<int64_t>(ws / 4)}, DType::F32,
                                            MemCategory::Workspace);
      env.backend->set_workspace(w);
    }
  }
  return *env.backend;
}

// Before static destruction: the CUDA runtime may already be gone by then.
void release_backends() {
  for (DeviceEnv& env : g_envs) {
    if (env.backend && env.backend->workspace_bytes()) env.backend->set_workspace(Tensor{});
    env.workspace_alloc.reset();
    env.backend.reset();
  }
}

const char* device_prefix(Device dev) {
  return dev == Device::CPU ? "cpu" : "cuda";
}

// ---- inputs ----------------------------------------------------------------------------------

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform magnitudes in [scale / 100, scale], random signs unless `positive`: never zero, so no
// kernel gets to skip work on zeros (or run on denormals).
std::vector<float> random_nonzero(size_t n, uint64_t seed, float scale, bool positive) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(s);
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    const float mag = scale * (0.01f + 0.99f * u);
    v[i] = (positive || (r & 1)) ? mag : -mag;
  }
  return v;
}

// The tensors of one benchmark, from a TrackingAllocator on the benchmark's backend; freed when
// the benchmark ends.
class Buffers {
 public:
  explicit Buffers(Backend& be) : be_(be), alloc_(be) {}
  ~Buffers() { be_.synchronize(); }

  Tensor random(Shape s, DType dt, float scale = 1.0f, bool positive = false) {
    Tensor t = alloc_.alloc(s, dt, MemCategory::Activations);
    const std::vector<float> host =
        random_nonzero(static_cast<size_t>(s.numel()), ++seed_, scale, positive);
    if (dt == DType::F32) {
      be_.upload(host.data(), t);
    } else {  // the backend's own rounding, as the trainer's data would get
      Tensor f32 = alloc_.alloc(s, DType::F32, MemCategory::Activations);
      be_.upload(host.data(), f32);
      be_.cast(f32, t);
      be_.synchronize();
      alloc_.release(f32);
    }
    return t;
  }
  Tensor scalar(float value) {
    Tensor t = alloc_.alloc(Shape{1}, DType::F32, MemCategory::Activations);
    be_.upload(&value, t);
    return t;
  }
  Tensor labels(int64_t n, int64_t classes) {
    Tensor t = alloc_.alloc(Shape{n}, DType::I32, MemCategory::Data);
    std::vector<int32_t> host(static_cast<size_t>(n));
    uint64_t s = ++seed_;
    for (auto& l : host) l = static_cast<int32_t>(splitmix64(s) % static_cast<uint64_t>(classes));
    be_.upload(host.data(), t);
    return t;
  }

 private:
  Backend& be_;
  TrackingAllocator alloc_;
  uint64_t seed_ = 0;
};

// ---- timing ----------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

// CUDA: each benchmark batch is `reps` back-to-back calls between two events, enough for about
// this long, so that launches overlap the previous kernel as they do in a training step.
constexpr double kCudaBatchMs = 1.0;
constexpr int kCudaMaxReps = 1000;

// Runs `op` under the benchmark's timing after one warm-up call (cuBLASLt algorithm choice,
// first touch of pages) and returns the mean seconds per call. On the CPU the ops are
// synchronous and the benchmark's wall clock is the time. On CUDA the time is the GPU's, from
// the Backend's events, given to the benchmark with SetIterationTime (UseManualTime).
double run_timed(benchmark::State& state, Backend& be, const std::function<void()>& op) {
  op();
  if (be.device() == Device::CPU) {
    const auto t0 = Clock::now();
    for (auto _ : state) {
      op();
      benchmark::ClobberMemory();
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return s / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  }
  auto start = be.create_event(), stop = be.create_event();
  start->record();
  op();
  stop->record();
  const double once_ms = std::max(stop->elapsed_ms(*start), 1e-4);
  const int reps = std::clamp(static_cast<int>(std::ceil(kCudaBatchMs / once_ms)), 1, kCudaMaxReps);
  double total_s = 0;
  int64_t calls = 0;
  // KeepRunningBatch counts `reps` iterations per batch, so the reported time is per call and
  // --benchmark_min_time bounds the GPU time spent, whatever reps is.
  while (state.KeepRunningBatch(reps)) {
    start->record();
    for (int r = 0; r < reps; ++r) op();
    stop->record();
    const double s = stop->elapsed_ms(*start) * 1e-3;
    state.SetIterationTime(s);
    total_s += s;
    calls += reps;
  }
  state.counters["calls/batch"] = reps;
  return calls ? total_s / static_cast<double>(calls) : 0.0;
}

// Sets up (may throw, e.g. out of memory), then times. A failure skips this benchmark only.
void guarded(benchmark::State& state, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void set_flops(benchmark::State& state, double flops, double seconds) {
  if (seconds > 0) state.counters["TFLOP/s"] = flops / seconds * 1e-12;
}
// Bytes that the op must read plus those it must write, each once.
void set_bytes(benchmark::State& state, double bytes, double seconds) {
  if (seconds > 0) state.counters["GB/s"] = bytes / seconds * 1e-9;
}

std::string count_name(int64_t n) {
  char buf[32];
  if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.0fM", static_cast<double>(n) * 1e-6);
  else if (n >= 1000)
    std::snprintf(buf, sizeof buf, "%.0fk", static_cast<double>(n) * 1e-3);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}

// ---- GEMM ------------------------------------------------------------------------------------

struct GemmPrecision {
  const char* name;
  DType dtype;  // A, B and C
  GemmMath math;
};
const GemmPrecision kGemmPrecisions[] = {
    {"fp32", DType::F32, GemmMath::Strict},
    {"tf32", DType::F32, GemmMath::TF32},
    {"fp16", DType::F16, GemmMath::LowPrecision},
    {"bf16", DType::BF16, GemmMath::LowPrecision},
};

// C (batch, M, N) = op(A) op(B) with A stored (M, K) or (K, M) (trans_a), B stored (K, N) or
// (N, K) (trans_b), as the models lay them out.
struct GemmCase {
  std::string name;
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
};

// A Linear(in -> out) on `rows` rows: Y = X W^T, dX = dY W (not for the first layer, whose input
// needs no gradient), dW = dY^T X.
void add_mlp_cases(std::vector<GemmCase>& out, const std::string& prefix, int64_t rows,
                   const std::vector<int64_t>& widths) {
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const int64_t in = widths[l], o = widths[l + 1];
    const std::string layer = prefix + "_l" + std::to_string(l + 1);
    out.push_back({layer + "_fwd", 1, rows, o, in, false, true});
    if (l > 0) out.push_back({layer + "_dX", 1, rows, in, o, false, false});
    out.push_back({layer + "_dW", 1, o, in, rows, true, false});
  }
}

// One BERT-base encoder layer's forward GEMMs on `seqs` sequences of 512 tokens (d 768, 12 heads
// of 64, FFN 3072). Attention is batched over sequences x heads.
void add_bert_cases(std::vector<GemmCase>& out, int64_t seqs) {
  const int64_t seq = 512, d = 768, heads = seqs * 12, dh = 64, ffn = 3072, tokens = seqs * seq;
  out.push_back({"bert_qkv", 1, tokens, 3 * d, d, false, true});
  out.push_back({"bert_attn_qk", heads, seq, seq, dh, false, true});
  out.push_back({"bert_attn_av", heads, seq, dh, seq, false, false});
  out.push_back({"bert_out_proj", 1, tokens, d, d, false, true});
  out.push_back({"bert_ffn_up", 1, tokens, ffn, d, false, true});
  out.push_back({"bert_ffn_down", 1, tokens, d, ffn, false, true});
}

std::vector<GemmCase> gemm_cases(Device dev) {
  const bool gpu = dev == Device::CUDA;
  std::vector<GemmCase> cases;
  add_mlp_cases(cases, "mnist", 128, {784, 512, 256, 10});  // configs/mnist_mlp.json
  // configs/mlp_wide.json trains on 1024 rows; 128 on the CPU.
  add_mlp_cases(cases, "wide", gpu ? 1024 : 128, {1024, 4096, 4096, 10});
  add_bert_cases(cases, gpu ? 8 : 1);  // 4096 tokens on the GPU, 512 on the CPU
  return cases;
}

Shape batched(int64_t batch, int64_t r, int64_t c) {
  return batch > 1 ? Shape{batch, r, c} : Shape{r, c};
}

void bm_gemm(benchmark::State& state, Device dev, GemmCase g, GemmPrecision p) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    // Inputs of magnitude <= 1: K-term sums stay far from the fp16 range.
    Tensor a =
        buf.random(g.trans_a ? batched(g.batch, g.k, g.m) : batched(g.batch, g.m, g.k), p.dtype);
    Tensor b =
        buf.random(g.trans_b ? batched(g.batch, g.n, g.k) : batched(g.batch, g.k, g.n), p.dtype);
    Tensor c = buf.random(batched(g.batch, g.m, g.n), p.dtype);
    GemmDesc d;
    d.trans_a = g.trans_a;
    d.trans_b = g.trans_b;
    d.math = p.math;
    const double s = run_timed(state, be, [&] { be.gemm(d, a, b, c); });
    set_flops(state, 2.0 * g.batch * g.m * g.n * g.k, s);
    state.SetLabel((g.batch > 1 ? std::to_string(g.batch) + "x" : std::string()) + "M" +
                   std::to_string(g.m) + " N" + std::to_string(g.n) + " K" + std::to_string(g.k));
  });
}

// ---- memory-bound kernels --------------------------------------------------------------------

// mnist_mlp (784-512-256-10), mlp_wide (1024-4096-4096-10), BERT-base.
constexpr int64_t kMnistParams = 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10;
constexpr int64_t kWideParams = 1024 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10;
constexpr int64_t kBertBaseParams = 109482240;

std::vector<int64_t> param_counts(Device dev) {
  if (dev == Device::CPU) return {kMnistParams, kWideParams};
  return {kMnistParams, kWideParams, kBertBaseParams};
}

void bm_cast(benchmark::State& state, Device dev, int64_t n, DType to) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    Tensor src = buf.random(Shape{n}, DType::F32);
    Tensor dst = buf.random(Shape{n}, to);
    const double s = run_timed(state, be, [&] { be.cast(src, dst); });
    set_bytes(state, static_cast<double>(n) * (4 + dtype_size(to)), s);
  });
}

void bm_unscale_check_norm(benchmark::State& state, Device dev, int64_t n) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    Tensor grads = buf.random(Shape{n}, DType::F32, 1e-3f);
    // Scale 1: the full unscale pass runs, and the gradients do not drift toward denormals over
    // thousands of calls as they would with a real loss scale.
    Tensor scale = buf.scalar(1.0f), found_inf = buf.scalar(0.0f), norm = buf.scalar(0.0f);
    const double s =
        run_timed(state, be, [&] { be.unscale_check_norm(grads, &scale, found_inf, norm); });
    set_bytes(state, static_cast<double>(n) * 8, s);  // grads read and written
  });
}

// lowp: none (fp32 training), or the fp16/bf16 weight copy written by an AMP step, which also
// reads found_inf.
void bm_adamw(benchmark::State& state, Device dev, int64_t n, std::optional<DType> lowp) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    Tensor master = buf.random(Shape{n}, DType::F32, 0.05f);
    Tensor grads = buf.random(Shape{n}, DType::F32, 1e-3f);
    Tensor m = buf.random(Shape{n}, DType::F32, 1e-4f);
    Tensor v = buf.random(Shape{n}, DType::F32, 1e-7f, /*positive=*/true);
    Tensor weights_lowp = lowp ? buf.random(Shape{n}, *lowp) : Tensor{};
    Tensor step = buf.scalar(10.0f), found_inf = buf.scalar(0.0f);
    AdamWParams p;
    p.weight_decay = 0.01f;
    const double s = run_timed(state, be, [&] {
      be.adamw_step(p, master, grads, m, v, lowp ? &weights_lowp : nullptr, step,
                    lowp ? &found_inf : nullptr);
    });
    // master, grads, m, v read; master, m, v (and the copy) written.
    set_bytes(state, static_cast<double>(n) * (28 + (lowp ? dtype_size(*lowp) : 0)), s);
  });
}

void bm_sgd(benchmark::State& state, Device dev, int64_t n, std::optional<DType> lowp) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    Tensor master = buf.random(Shape{n}, DType::F32, 0.05f);
    Tensor grads = buf.random(Shape{n}, DType::F32, 1e-3f);
    Tensor momentum = buf.random(Shape{n}, DType::F32, 1e-3f);
    Tensor weights_lowp = lowp ? buf.random(Shape{n}, *lowp) : Tensor{};
    Tensor found_inf = buf.scalar(0.0f);
    SgdParams p;
    p.weight_decay = 1e-4f;
    const double s = run_timed(state, be, [&] {
      be.sgd_step(p, master, grads, momentum, lowp ? &weights_lowp : nullptr,
                  lowp ? &found_inf : nullptr);
    });
    // master, grads, momentum read; master, momentum (and the copy) written.
    set_bytes(state, static_cast<double>(n) * (20 + (lowp ? dtype_size(*lowp) : 0)), s);
  });
}

struct RowsCols {
  const char* name;
  int64_t rows, cols;
};

// Classifier heads: the MLP configs' 10 classes on their batches, and a BERT MLM head (vocab
// 30522) on its tokens. On the CPU both MLPs run 128 rows (one shape) and the MLM head 128 tokens.
std::vector<RowsCols> xent_shapes(Device dev) {
  if (dev == Device::CPU) return {{"mlp", 128, 10}, {"bert_mlm", 128, 30522}};
  return {{"mnist", 128, 10}, {"wide", 1024, 10}, {"bert_mlm", 4096, 30522}};
}

void bm_softmax_xent(benchmark::State& state, Device dev, RowsCols sh, DType dlogits_dtype) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    Tensor logits = buf.random(Shape{sh.rows, sh.cols}, DType::F32, 4.0f);
    Tensor labels = buf.labels(sh.rows, sh.cols);
    Tensor dlogits = buf.random(Shape{sh.rows, sh.cols}, dlogits_dtype);
    // A loss scale as AMP starts with; fp32 training passes none, which costs the same.
    Tensor scale = buf.scalar(65536.0f), loss = buf.scalar(0.0f), correct = buf.scalar(0.0f);
    const double s = run_timed(
        state, be, [&] { be.softmax_xent(logits, labels, &dlogits, &scale, loss, correct); });
    const double nc = static_cast<double>(sh.rows) * sh.cols;
    set_bytes(state, nc * (4 + dtype_size(dlogits_dtype)) + 4.0 * sh.rows, s);
  });
}

struct ActShape {
  const char* name;
  Activation act;
  int64_t rows, cols;
};

// The hidden activations the backward pass differentiates: mnist's first ReLU layer, mlp_wide's
// GELU layer and BERT's FFN GELU (128 rows on the CPU).
std::vector<ActShape> act_shapes(Device dev) {
  const bool gpu = dev == Device::CUDA;
  return {{"mnist_relu", Activation::Relu, 128, 512},
          {"wide_gelu", Activation::Gelu, gpu ? 1024 : 128, 4096},
          {"bert_ffn_gelu", Activation::Gelu, gpu ? 4096 : 128, 3072}};
}

void bm_bias_act_backward(benchmark::State& state, Device dev, ActShape sh, DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    Tensor dy = buf.random(Shape{sh.rows, sh.cols}, dt);
    Tensor pre_act = buf.random(Shape{sh.rows, sh.cols}, dt, 3.0f);
    // dx apart from dy: in place, GELU's derivative would rescale dy on every call.
    Tensor dx = buf.random(Shape{sh.rows, sh.cols}, dt);
    Tensor dbias = buf.random(Shape{sh.cols}, DType::F32);
    const double s =
        run_timed(state, be, [&] { be.bias_act_backward(sh.act, dy, pre_act, dx, &dbias); });
    const double rn = static_cast<double>(sh.rows) * sh.cols;
    set_bytes(state, 3.0 * rn * dtype_size(dt) + 4.0 * sh.cols, s);  // dy, pre_act; dx, dbias
  });
}

// ---- registration ----------------------------------------------------------------------------

template <typename Fn, typename... Args>
void add(Device dev, const std::string& name, Fn fn, Args... args) {
  auto* b = benchmark::RegisterBenchmark((std::string(device_prefix(dev)) + "/" + name).c_str(), fn,
                                         dev, args...);
  b->Unit(benchmark::kMicrosecond);
  if (dev == Device::CUDA)
    b->UseManualTime();
  else
    b->UseRealTime();  // OpenBLAS threads: the main thread's CPU time undercounts
}

void register_device(Device dev) {
  const DType kLowp[] = {DType::F16, DType::BF16};
  const DType kFloat[] = {DType::F32, DType::F16, DType::BF16};
  for (const GemmCase& g : gemm_cases(dev))
    for (const GemmPrecision& p : kGemmPrecisions)
      add(dev, "gemm/" + g.name + "/" + p.name, bm_gemm, g, p);
  for (int64_t n : param_counts(dev)) {
    const std::string count = count_name(n);
    for (DType to : kLowp) add(dev, "cast/" + count + "/" + dtype_name(to), bm_cast, n, to);
    add(dev, "unscale_check_norm/" + count, bm_unscale_check_norm, n);
    add(dev, "adamw/" + count, bm_adamw, n, std::optional<DType>{});
    for (DType to : kLowp)
      add(dev, "adamw/" + count + "/" + dtype_name(to), bm_adamw, n, std::optional<DType>{to});
    add(dev, "sgd/" + count, bm_sgd, n, std::optional<DType>{});
    for (DType to : kLowp)
      add(dev, "sgd/" + count + "/" + dtype_name(to), bm_sgd, n, std::optional<DType>{to});
  }
  for (const RowsCols& sh : xent_shapes(dev))
    for (DType dt : kFloat)
      add(dev,
          std::string("softmax_xent/") + sh.name + "_" + std::to_string(sh.rows) + "x" +
              std::to_string(sh.cols) + "/" + dtype_name(dt),
          bm_softmax_xent, sh, dt);
  for (const ActShape& sh : act_shapes(dev))
    for (DType dt : kFloat)
      add(dev,
          std::string("bias_act_backward/") + sh.name + "_" + std::to_string(sh.rows) + "x" +
              std::to_string(sh.cols) + "/" + dtype_name(dt),
          bm_bias_act_backward, sh, dt);
}

}  // namespace
}  // namespace mpbench

int main(int argc, char** argv) {
  using namespace mpbench;
  // As app/main.cpp: OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so the CPU GEMMs get
  // its AVX2/AVX-512 kernels on a CPU newer than the library only by running again with it set.
  if (const char* core = blas_coretype_hint(); core && !std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  register_device(Device::CPU);
  std::string why_not;
  if (cuda_device_count(&why_not) > 0)
    register_device(Device::CUDA);
  else
    std::printf("CUDA benchmarks skipped: %s\n", why_not.c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  release_backends();
  return 0;
}
