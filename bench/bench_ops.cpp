// Microbenchmarks of the ops behind `Backend`, per precision, on the CPU reference, the native CPU
// backend (oneDNN, in builds that have it) and (when a GPU is present) on CUDA, at the shapes the
// model families use: the two MLP configs' GEMMs (forward and both backward GEMMs), one BERT-base
// encoder layer's GEMMs, and the memory-bound kernels of a training step. bench/README.md says how
// to run it and how to read the counters.
//
//   bench_ops [--benchmark_filter=cuda/gemm] [--benchmark_counters_tabular=true]
//
// The resnet_bottleneck and transformer families add ResNet-50's convolutions (forward, dX, dW),
// batchnorm and average pool, BERT's backward GEMMs, and the LayerNorm, attention softmax,
// embedding, permute and add kernels of BERT-base / GPT-2 small.
//
// The CPU runs smaller problems than the GPU (same layer widths, fewer rows, images, sequences
// or parameters) and, for the newer ops, fewer shapes, so that the whole CPU suite stays within
// a few minutes on two cores.
#include <benchmark/benchmark.h>

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
#include "models/rng.h"

namespace mpbench {
namespace {

// ---- backends --------------------------------------------------------------------------------

// Where a benchmark runs: the CPU reference, the native CPU backend or CUDA. It converts to its
// Device, whose problem sizes it takes (the native backend runs the CPU's).
struct Target {
  Device device;
  bool native = false;
  operator Device() const { return device; }
  int index() const { return device == Device::CUDA ? 2 : native ? 1 : 0; }
};
constexpr Target kReference{Device::CPU}, kNative{Device::CPU, true}, kCuda{Device::CUDA};

// One backend per target for the whole run, so that no benchmark times context creation, with
// the GEMM workspace the trainer would give it.
struct DeviceEnv {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<TrackingAllocator> workspace_alloc;
};
DeviceEnv g_envs[3];

Backend& backend_for(Target dev) {
  DeviceEnv& env = g_envs[dev.index()];
  if (!env.backend) {
    env.backend = dev == Device::CUDA ? make_cuda_backend(0)
                  : dev.native        ? make_native_cpu_backend()
                                      : make_reference_backend();
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

const char* device_prefix(Target dev) {
  return dev == Device::CUDA ? "cuda" : dev.native ? "native" : "cpu";
}

// ---- inputs ----------------------------------------------------------------------------------

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
  // An fp8 tensor of values within +-scale: cast from fp32 by the backend at scale 1.
  Tensor random_fp8(Shape s, DType dt, float scale = 1.0f) {
    Tensor f32 = random(s, DType::F32, scale);
    Tensor t = alloc_.alloc(s, dt, MemCategory::Activations);
    Tensor one = this->scalar(1.0f);
    be_.cast_to_fp8(f32, one, nullptr, t);
    be_.synchronize();
    alloc_.release(f32);
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
// oneDNN primitive creation, first touch of pages) and returns the mean seconds per call. On the
// CPU the ops are synchronous and the benchmark's wall clock is the time. On CUDA the time is the
// GPU's, from the Backend's events, given to the benchmark with SetIterationTime (UseManualTime).
double run_timed(benchmark::State& state, Backend& be, const std::function<void()>& op) {
  const auto fallbacks = be.fallback_calls();
  op();
  if (be.fallback_calls() != fallbacks)  // the native backend without a kernel for this dtype
    throw std::runtime_error("no native kernel here: it ran the reference's loops");
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

// The same layer's backward GEMMs. Each Linear(in -> out): dX = dY W, (tokens x out) . (out x in),
// and dW = dY^T X, (tokens x out)^T . (tokens x in). Attention, per head, with S = Q K^T and
// O = P V: dP = dO V^T (the shape of Q K^T), dV = P^T dO and dK = dS^T Q (one shape: dKV), and
// dQ = dS K (the shape of P V).
void add_bert_backward_cases(std::vector<GemmCase>& out, int64_t seqs) {
  const int64_t seq = 512, d = 768, heads = seqs * 12, dh = 64, ffn = 3072, tokens = seqs * seq;
  const struct {
    const char* name;
    int64_t in, out;
  } linears[] = {{"bert_qkv", d, 3 * d},
                 {"bert_out_proj", d, d},
                 {"bert_ffn_up", d, ffn},
                 {"bert_ffn_down", ffn, d}};
  for (const auto& l : linears) {
    out.push_back({std::string(l.name) + "_dX", 1, tokens, l.in, l.out, false, false});
    out.push_back({std::string(l.name) + "_dW", 1, l.out, l.in, tokens, true, false});
  }
  out.push_back({"bert_attn_dP", heads, seq, seq, dh, false, true});
  out.push_back({"bert_attn_dKV", heads, seq, dh, seq, true, false});
  out.push_back({"bert_attn_dQ", heads, seq, dh, seq, false, false});
}

std::vector<GemmCase> gemm_cases(Target dev) {
  const bool gpu = dev == Device::CUDA;
  std::vector<GemmCase> cases;
  add_mlp_cases(cases, "mnist", 128, {784, 512, 256, 10});  // configs/mnist_mlp.json
  // configs/mlp_wide.json trains on 1024 rows; 128 on the CPU.
  add_mlp_cases(cases, "wide", gpu ? 1024 : 128, {1024, 4096, 4096, 10});
  add_bert_cases(cases, gpu ? 8 : 1);  // 4096 tokens on the GPU, 512 on the CPU
  return cases;
}

std::vector<GemmCase> backward_gemm_cases(Target dev) {
  std::vector<GemmCase> cases;
  add_bert_backward_cases(cases, dev == Device::CUDA ? 8 : 1);
  return cases;
}

// The precisions of the conv and BERT backward rows. On the CPU, tf32 and fp16 are the fp32
// sgemm after another rounding pass of the operands, which the forward GEMM rows measure
// already; running fp32 and bf16 only there keeps the CPU suite short.
std::vector<GemmPrecision> gemm_precisions(Target dev) {
  if (dev == Device::CUDA) return {std::begin(kGemmPrecisions), std::end(kGemmPrecisions)};
  return {kGemmPrecisions[0], kGemmPrecisions[3]};
}

Shape batched(int64_t batch, int64_t r, int64_t c) {
  return batch > 1 ? Shape{batch, r, c} : Shape{r, c};
}

void bm_gemm(benchmark::State& state, Target dev, GemmCase g, GemmPrecision p) {
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

// amp_fp8's question: a Linear's forward GEMM Y = X W^T (tokens x width x width) with E4M3
// inputs against bf16, bf16 out, at widths from where FP8 is said to lose (1024) to where it wins
// (5120). Both in cuBLASLt's TN layout; FP8 needs sm_89+ (else the row is skipped with why).
void bm_linear_fp8(benchmark::State& state, Target dev, int64_t width, bool fp8) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    if (fp8 && dev == Device::CUDA) {
      const DeviceInfo info = be.info();
      if (!precision_supported(Precision::AMP_FP8, info.cc_major, info.cc_minor))
        throw std::runtime_error("FP8 GEMMs need compute capability 8.9");
    }
    Buffers buf(be);
    const int64_t tokens = dev == Device::CUDA ? 8192 : 256;
    const DType in = fp8 ? DType::F8E4M3 : DType::BF16;
    Tensor x =
        fp8 ? buf.random_fp8(Shape{tokens, width}, in) : buf.random(Shape{tokens, width}, in);
    Tensor w = fp8 ? buf.random_fp8(Shape{width, width}, in) : buf.random(Shape{width, width}, in);
    Tensor y = buf.random(Shape{tokens, width}, DType::BF16);
    Tensor sx = buf.scalar(1.0f), sw = buf.scalar(1.0f / 64);
    GemmDesc d;
    d.trans_b = true;
    d.math = GemmMath::LowPrecision;
    if (fp8) {
      d.a_scale_inv = &sx;
      d.b_scale_inv = &sw;
    }
    const double s = run_timed(state, be, [&] { be.gemm(d, x, w, y); });
    set_flops(state, 2.0 * tokens * width * width, s);
    state.SetLabel("M" + std::to_string(tokens) + " N" + std::to_string(width) + " K" +
                   std::to_string(width));
  });
}

// ---- memory-bound kernels --------------------------------------------------------------------

// mnist_mlp (784-512-256-10), mlp_wide (1024-4096-4096-10), BERT-base.
constexpr int64_t kMnistParams = 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10;
constexpr int64_t kWideParams = 1024 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10;
constexpr int64_t kBertBaseParams = 109482240;

std::vector<int64_t> param_counts(Target dev) {
  if (dev == Device::CPU) return {kMnistParams, kWideParams};
  return {kMnistParams, kWideParams, kBertBaseParams};
}

void bm_cast(benchmark::State& state, Target dev, int64_t n, DType to) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    Tensor src = buf.random(Shape{n}, DType::F32);
    Tensor dst = buf.random(Shape{n}, to);
    const double s = run_timed(state, be, [&] { be.cast(src, dst); });
    set_bytes(state, static_cast<double>(n) * (4 + dtype_size(to)), s);
  });
}

void bm_unscale_check_norm(benchmark::State& state, Target dev, int64_t n) {
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
void bm_adamw(benchmark::State& state, Target dev, int64_t n, std::optional<DType> lowp) {
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

void bm_sgd(benchmark::State& state, Target dev, int64_t n, std::optional<DType> lowp) {
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
std::vector<RowsCols> xent_shapes(Target dev) {
  if (dev == Device::CPU) return {{"mlp", 128, 10}, {"bert_mlm", 128, 30522}};
  return {{"mnist", 128, 10}, {"wide", 1024, 10}, {"bert_mlm", 4096, 30522}};
}

void bm_softmax_xent(benchmark::State& state, Target dev, RowsCols sh, DType dlogits_dtype) {
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
std::vector<ActShape> act_shapes(Target dev) {
  const bool gpu = dev == Device::CUDA;
  return {{"mnist_relu", Activation::Relu, 128, 512},
          {"wide_gelu", Activation::Gelu, gpu ? 1024 : 128, 4096},
          {"bert_ffn_gelu", Activation::Gelu, gpu ? 4096 : 128, 3072}};
}

void bm_bias_act_backward(benchmark::State& state, Target dev, ActShape sh, DType dt) {
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

// ---- convolution (ResNet-50) -----------------------------------------------------------------

// ResNet-50's training batch on the GPU; the CPU runs the same layers on 2 images.
int64_t resnet_batch(Target dev) {
  return dev == Device::CUDA ? 256 : 2;
}

// One convolution of a ResNet-50 bottleneck stage (v1.5: a stage's downsampling stride is on
// the first block's 3x3 and projection): NHWC input hw x hw x c, k filters of r x r.
struct ConvCase {
  std::string name;
  int64_t hw, c, k, r, stride;
  bool on_cpu;  // the CPU runs a few representative shapes only (see conv_cases)
  int64_t pad() const { return r / 2; }
  int64_t out() const { return (hw + 2 * pad() - r) / stride + 1; }
};

// The distinct convolutions of stage `stage` (2..5, Caffe's res2..res5): output size hw, bottleneck
// width `width`, output 4 width channels; the first block takes in_c channels at in_hw.
//   first block: first_reduce 1x1 in_c -> width at in_hw; first_3x3_s2 (3x3, stride in_hw / hw);
//                expand 1x1 width -> 4 width; first_proj_s2 1x1 in_c -> 4 width, stride as the 3x3
//   later blocks: reduce 1x1 4 width -> width; 3x3 stride 1; expand
// Stage 2 has no downsampling: its first 3x3 and projection are the later 3x3 and expand shapes.
void add_conv_stage(std::vector<ConvCase>& out, int stage, int64_t hw, int64_t width, int64_t in_c,
                    int64_t in_hw) {
  const std::string p = "res" + std::to_string(stage) + "_";
  const int64_t stride = in_hw / hw, wide = 4 * width;
  out.push_back({p + "first_reduce", in_hw, in_c, width, 1, 1, false});
  if (stride > 1) {
    out.push_back({p + "first_3x3_s2", in_hw, width, width, 3, stride, false});
    out.push_back({p + "first_proj_s2", in_hw, in_c, wide, 1, stride, false});
  }
  out.push_back({p + "reduce", hw, wide, width, 1, 1, false});
  out.push_back({p + "3x3", hw, width, width, 3, 1, false});
  out.push_back({p + "expand", hw, width, wide, 1, 1, false});
}

std::vector<ConvCase> conv_cases(Target dev) {
  std::vector<ConvCase> all;
  add_conv_stage(all, 2, 56, 64, 64, 56);  // after the stem's max pool: 56 x 56 x 64
  add_conv_stage(all, 3, 28, 128, 256, 56);
  add_conv_stage(all, 4, 14, 256, 512, 28);
  add_conv_stage(all, 5, 7, 512, 1024, 14);
  if (dev == Device::CUDA) return all;
  // CPU: a 3x3, the strided 3x3 and projection (other im2col paths), and a wide 1x1.
  std::vector<ConvCase> cpu;
  for (const ConvCase& c : all)
    if (c.name == "res2_3x3" || c.name == "res3_first_3x3_s2" || c.name == "res3_first_proj_s2" ||
        c.name == "res5_expand")
      cpu.push_back(c);
  return cpu;
}

enum class ConvPass { Forward, BackwardData, BackwardFilter };
const char* conv_pass_name(ConvPass p) {
  switch (p) {
    case ConvPass::Forward:
      return "fwd";
    case ConvPass::BackwardData:
      return "dX";
    default:
      return "dW";
  }
}

void bm_conv(benchmark::State& state, Target dev, ConvCase cc, ConvPass pass, GemmPrecision p) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const int64_t n = resnet_batch(dev), pq = cc.out();
    // Small weights and gradients: the R S C- and N P Q-term sums stay far from the fp16 range.
    Tensor x = buf.random(Shape{n, cc.hw, cc.hw, cc.c}, p.dtype);
    Tensor w = buf.random(Shape{cc.k, cc.r, cc.r, cc.c}, p.dtype, 0.05f);
    Tensor y = buf.random(Shape{n, pq, pq, cc.k}, p.dtype, 0.01f);
    ConvDesc d;
    d.stride = cc.stride;
    d.pad = cc.pad();
    d.math = p.math;
    const double s = run_timed(state, be, [&] {
      switch (pass) {
        case ConvPass::Forward:
          be.conv2d_forward(d, x, w, y);
          break;
        case ConvPass::BackwardData:
          be.conv2d_backward_data(d, y, w, x);
          break;
        case ConvPass::BackwardFilter:
          be.conv2d_backward_filter(d, x, y, w);
          break;
      }
    });
    set_flops(state, 2.0 * n * pq * pq * cc.k * cc.r * cc.r * cc.c, s);
    const std::string hw = std::to_string(cc.hw), o = std::to_string(pq);
    state.SetLabel("N" + std::to_string(n) + " " + hw + "x" + hw + "x" + std::to_string(cc.c) +
                   " -> " + o + "x" + o + "x" + std::to_string(cc.k) + " " + std::to_string(cc.r) +
                   "x" + std::to_string(cc.r) + "/" + std::to_string(cc.stride));
  });
}

// ---- batchnorm, avgpool --------------------------------------------------------------------

// A batchnorm's input: (N hw hw, c). Each stage has its width-channel BNs (after the 1x1 reduce
// and the 3x3, ReLU fused) and its 4 width-channel ones (after the expand: residual add + ReLU
// fused; after the projection: neither). Stage 3's first reduce runs at 56 x 56 before the
// stride: res3_first (56 x 56, 128).
struct BnCase {
  std::string name;
  int64_t hw, c;
};

std::vector<BnCase> bn_cases(Target dev) {
  if (dev == Device::CPU) return {{"res2_wide", 56, 256}};
  return {{"res2", 56, 64},        {"res2_wide", 56, 256}, {"res3_first", 56, 128},
          {"res3", 28, 128},       {"res3_wide", 28, 512}, {"res4", 14, 256},
          {"res4_wide", 14, 1024}, {"res5", 7, 512},       {"res5_wide", 7, 2048}};
}

enum class BnPass { Forward, ForwardResidualRelu, Backward, BackwardRelu };
const char* bn_pass_name(BnPass p) {
  switch (p) {
    case BnPass::Forward:
      return "fwd";
    case BnPass::ForwardResidualRelu:
      return "fwd_res_relu";
    case BnPass::Backward:
      return "bwd";
    default:
      return "bwd_relu";
  }
}

void bm_batchnorm(benchmark::State& state, Target dev, BnCase bc, BnPass pass, DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const int64_t rows = resnet_batch(dev) * bc.hw * bc.hw, c = bc.c;
    const Shape act{rows, c}, ch{c};
    Tensor x = buf.random(act, dt);
    Tensor y = buf.random(act, dt);  // the forward's output, or dx
    Tensor gamma = buf.random(ch, DType::F32, 1.0f, true), beta = buf.random(ch, DType::F32);
    Tensor mean = buf.random(ch, DType::F32, 0.1f), rstd = buf.random(ch, DType::F32, 2.0f, true);
    const double ta = static_cast<double>(rows) * c * dtype_size(dt);  // one activation tensor
    double s = 0, bytes = 0;
    if (pass == BnPass::Forward || pass == BnPass::ForwardResidualRelu) {
      const bool fused = pass == BnPass::ForwardResidualRelu;
      Tensor residual = fused ? buf.random(act, dt) : Tensor{};
      Tensor run_mean = buf.random(ch, DType::F32, 0.1f);
      Tensor run_var = buf.random(ch, DType::F32, 1.0f, true);
      BatchNormDesc d;
      d.relu = fused;
      s = run_timed(state, be, [&] {
        be.batchnorm_forward_train(d, x, fused ? &residual : nullptr, gamma, beta, run_mean,
                                   run_var, mean, rstd, y);
      });
      // x (and residual) read, y written; gamma, beta read, running stats read and written,
      // save_mean and save_rstd written.
      bytes = ta * (fused ? 3 : 2) + 32.0 * c;
    } else {
      const bool relu = pass == BnPass::BackwardRelu;
      Tensor dy = buf.random(act, dt, 0.1f);
      Tensor relu_out = relu ? buf.random(act, dt) : Tensor{};  // half the entries masked
      Tensor d_pre = relu ? buf.random(act, dt) : Tensor{};
      Tensor dgamma = buf.random(ch, DType::F32), dbeta = buf.random(ch, DType::F32);
      s = run_timed(state, be, [&] {
        be.batchnorm_backward(dy, relu ? &relu_out : nullptr, x, gamma, mean, rstd, y, dgamma,
                              dbeta, relu ? &d_pre : nullptr);
      });
      // dy, x (and relu_out) read, dx (and d_pre) written; gamma, save_mean, save_rstd read,
      // dgamma, dbeta written.
      bytes = ta * (relu ? 5 : 3) + 20.0 * c;
    }
    set_bytes(state, bytes, s);
    state.SetLabel(std::to_string(rows) + "x" + std::to_string(c));
  });
}

// ResNet-50's global average pool: (N, 7 x 7, 2048) -> (N, 2048).
void bm_avgpool(benchmark::State& state, Target dev, bool backward, DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const int64_t n = resnet_batch(dev), hw = 49, c = 2048;
    Tensor big = buf.random(Shape{n, hw, c}, dt), small = buf.random(Shape{n, c}, dt);
    const double s = run_timed(state, be, [&] {
      if (backward)
        be.avgpool_backward(small, big);
      else
        be.avgpool_forward(big, small);
    });
    set_bytes(state, static_cast<double>(n) * c * (hw + 1) * dtype_size(dt), s);
    state.SetLabel("N" + std::to_string(n) + " 7x7x2048");
  });
}

// ---- transformer kernels ---------------------------------------------------------------------

// Sequences of BERT-base (512 tokens) and GPT-2 small (1024 tokens), both d 768 and 12 heads of
// 64. The GPU runs 8 sequences of each, the CPU one.
struct SeqShape {
  const char* name;
  int64_t seqs, seq;
  bool causal;
};
std::vector<SeqShape> seq_shapes(Target dev) {
  const int64_t seqs = dev == Device::CUDA ? 8 : 1;
  return {{"bert", seqs, 512, false}, {"gpt2", seqs, 1024, true}};
}
constexpr int64_t kModelDim = 768, kHeads = 12, kHeadDim = 64;

std::string tokens_label(const SeqShape& sh) {
  return std::to_string(sh.seqs) + "x" + std::to_string(sh.seq) + " tokens";
}

void bm_layernorm(benchmark::State& state, Target dev, SeqShape sh, bool backward, DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const int64_t rows = sh.seqs * sh.seq, d = kModelDim;
    Tensor x = buf.random(Shape{rows, d}, dt), y = buf.random(Shape{rows, d}, dt);
    Tensor gamma = buf.random(Shape{d}, DType::F32, 1.0f, true);
    Tensor beta = buf.random(Shape{d}, DType::F32);
    Tensor mean = buf.random(Shape{rows}, DType::F32, 0.1f);
    Tensor rstd = buf.random(Shape{rows}, DType::F32, 2.0f, true);
    const double rd = static_cast<double>(rows) * d * dtype_size(dt);
    double s = 0, bytes = 0;
    if (!backward) {
      s = run_timed(state, be, [&] { be.layernorm_forward(1e-5f, x, gamma, beta, y, mean, rstd); });
      bytes = 2 * rd + 8.0 * d + 8.0 * rows;  // x; gamma, beta; y, mean, rstd
    } else {
      Tensor dy = buf.random(Shape{rows, d}, dt, 0.1f);
      Tensor dgamma = buf.random(Shape{d}, DType::F32), dbeta = buf.random(Shape{d}, DType::F32);
      s = run_timed(state, be,
                    [&] { be.layernorm_backward(dy, x, gamma, mean, rstd, y, dgamma, dbeta); });
      // dy, x, gamma, mean, rstd read; dx, dgamma, dbeta written.
      bytes = 3 * rd + 12.0 * d + 8.0 * rows;
    }
    set_bytes(state, bytes, s);
    state.SetLabel(tokens_label(sh) + " x " + std::to_string(d));
  });
}

// The attention probabilities of every head of every sequence: (seqs x 12, S, S), scale
// 1 / sqrt(64). BERT's are full, GPT-2's causal.
void bm_attention_softmax(benchmark::State& state, Target dev, SeqShape sh, bool backward,
                          DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const int64_t b = sh.seqs * kHeads, sq = sh.seq;
    const Shape shape{b, sq, sq};
    const float scale = 0.125f;
    Tensor x = buf.random(shape, dt, 4.0f), y = buf.random(shape, dt);
    // A causal softmax must read only the unmasked scores (and y, dy there), but writes every
    // entry.
    const double full = static_cast<double>(b) * sq * sq;
    const double live = sh.causal ? static_cast<double>(b) * sq * (sq + 1) / 2 : full;
    double s = 0, bytes = 0;
    if (!backward) {
      s = run_timed(state, be, [&] { be.attention_softmax_forward(x, scale, sh.causal, y); });
      bytes = (live + full) * dtype_size(dt);
    } else {
      be.attention_softmax_forward(x, scale, sh.causal, y);  // real probabilities (and zeros)
      Tensor dy = buf.random(shape, dt);
      // dx apart from dy: in place, every call would rescale the previous gradient.
      s = run_timed(state, be, [&] { be.attention_softmax_backward(dy, y, scale, x); });
      bytes = (2 * live + full) * dtype_size(dt);
    }
    set_bytes(state, bytes, s);
    state.SetLabel(std::to_string(b) + "x" + std::to_string(sq) + "x" + std::to_string(sq) +
                   (sh.causal ? " causal" : ""));
  });
}

// Token + position embedding with a 1024-token vocabulary and a position table of one sequence.
constexpr int64_t kVocab = 1024;

void bm_embedding(benchmark::State& state, Target dev, SeqShape sh, bool backward, DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const int64_t bs = sh.seqs * sh.seq, d = kModelDim;
    Tensor tokens = buf.labels(bs, kVocab).reshaped(Shape{sh.seqs, sh.seq});
    Tensor tok_emb = buf.random(Shape{kVocab, d}, DType::F32, 0.05f);
    Tensor pos_emb = buf.random(Shape{sh.seq, d}, DType::F32, 0.05f);
    Tensor y = buf.random(Shape{bs, d}, dt);
    const double act = static_cast<double>(bs) * d;
    double s = 0, bytes = 0;
    if (!backward) {
      s = run_timed(state, be, [&] { be.embedding_forward(tokens, tok_emb, pos_emb, y); });
      // tokens; one gathered token row per token; the position table; y.
      bytes = 4.0 * bs + 4 * act + 4.0 * sh.seq * d + act * dtype_size(dt);
    } else {
      s = run_timed(state, be, [&] { be.embedding_backward(tokens, y, tok_emb, pos_emb); });
      // tokens, dy read; both fp32 tables written whole.
      bytes = 4.0 * bs + act * dtype_size(dt) + 4.0 * (kVocab + sh.seq) * d;
    }
    set_bytes(state, bytes, s);
    state.SetLabel(tokens_label(sh) + ", V" + std::to_string(kVocab) + " D" + std::to_string(d));
  });
}

// The head transposes around attention, on BERT's sequences: the QKV GEMM's (B, S, 3, 12, 64)
// output split into Q, K, V of (B, 12, S, 64) each, and the heads merged back from
// (B, 12, S, 64) to (B, S, 12, 64) before the output projection.
void bm_permute(benchmark::State& state, Target dev, bool split, DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const SeqShape sh = seq_shapes(dev)[0];
    const int64_t b = sh.seqs, sq = sh.seq, h = kHeads, dh = kHeadDim;
    Tensor src =
        split ? buf.random(Shape{b, sq, 3, h, dh}, dt) : buf.random(Shape{b, h, sq, dh}, dt);
    Tensor dst =
        split ? buf.random(Shape{3, b, h, sq, dh}, dt) : buf.random(Shape{b, sq, h, dh}, dt);
    const std::array<int, 5> perm =
        split ? std::array<int, 5>{2, 0, 3, 1, 4} : std::array<int, 5>{0, 2, 1, 3, 0};
    const double s = run_timed(state, be, [&] { be.permute(src, dst, perm); });
    set_bytes(state, 2.0 * src.numel() * dtype_size(dt), s);
    state.SetLabel(src.shape.str() + " -> " + dst.shape.str());
  });
}

// A transformer residual add on BERT's tokens: out = a + b, out apart from both.
void bm_add(benchmark::State& state, Target dev, DType dt) {
  guarded(state, [&] {
    Backend& be = backend_for(dev);
    Buffers buf(be);
    const SeqShape sh = seq_shapes(dev)[0];
    const Shape shape{sh.seqs * sh.seq, kModelDim};
    Tensor a = buf.random(shape, dt), b = buf.random(shape, dt), out = buf.random(shape, dt);
    const double s = run_timed(state, be, [&] { be.add(a, b, out); });
    set_bytes(state, 3.0 * shape.numel() * dtype_size(dt), s);
    state.SetLabel(tokens_label(sh) + " x " + std::to_string(kModelDim));
  });
}

// ---- registration ----------------------------------------------------------------------------

template <typename Fn, typename... Args>
void add(Target dev, const std::string& name, Fn fn, Args... args) {
  auto* b = benchmark::RegisterBenchmark((std::string(device_prefix(dev)) + "/" + name).c_str(), fn,
                                         dev, args...);
  b->Unit(benchmark::kMicrosecond);
  if (dev == Device::CUDA)
    b->UseManualTime();
  else
    b->UseRealTime();  // OpenBLAS threads: the main thread's CPU time undercounts
}

void register_device(Target dev) {
  // The native backend runs fp32 and bf16 only (fp16, TF32 and FP8 have no oneDNN CPU path).
  const std::vector<DType> lowp =
      dev.native ? std::vector<DType>{DType::BF16} : std::vector<DType>{DType::F16, DType::BF16};
  std::vector<DType> floats = lowp;
  floats.insert(floats.begin(), DType::F32);
  for (const GemmCase& g : gemm_cases(dev))
    for (const GemmPrecision& p : kGemmPrecisions)
      if (!dev.native || p.math != GemmMath::TF32 && p.dtype != DType::F16)
        add(dev, "gemm/" + g.name + "/" + p.name, bm_gemm, g, p);
  for (int64_t width : dev == Device::CUDA ? std::vector<int64_t>{1024, 2048, 4096, 5120}
                                           : std::vector<int64_t>{1024})
    for (bool fp8 : {false, true})
      if (!dev.native || !fp8)
        add(dev, "gemm_linear/" + std::to_string(width) + (fp8 ? "/fp8" : "/bf16"), bm_linear_fp8,
            width, fp8);
  for (int64_t n : param_counts(dev)) {
    const std::string count = count_name(n);
    for (DType to : lowp) add(dev, "cast/" + count + "/" + dtype_name(to), bm_cast, n, to);
    add(dev, "unscale_check_norm/" + count, bm_unscale_check_norm, n);
    add(dev, "adamw/" + count, bm_adamw, n, std::optional<DType>{});
    for (DType to : lowp)
      add(dev, "adamw/" + count + "/" + dtype_name(to), bm_adamw, n, std::optional<DType>{to});
    add(dev, "sgd/" + count, bm_sgd, n, std::optional<DType>{});
    for (DType to : lowp)
      add(dev, "sgd/" + count + "/" + dtype_name(to), bm_sgd, n, std::optional<DType>{to});
  }
  for (const RowsCols& sh : xent_shapes(dev))
    for (DType dt : floats)
      add(dev,
          std::string("softmax_xent/") + sh.name + "_" + std::to_string(sh.rows) + "x" +
              std::to_string(sh.cols) + "/" + dtype_name(dt),
          bm_softmax_xent, sh, dt);
  for (const ActShape& sh : act_shapes(dev))
    for (DType dt : floats)
      add(dev,
          std::string("bias_act_backward/") + sh.name + "_" + std::to_string(sh.rows) + "x" +
              std::to_string(sh.cols) + "/" + dtype_name(dt),
          bm_bias_act_backward, sh, dt);

  // The resnet_bottleneck and transformer families.
  const std::vector<GemmPrecision> precisions = gemm_precisions(dev);
  for (const GemmCase& g : backward_gemm_cases(dev))
    for (const GemmPrecision& p : precisions)
      add(dev, "gemm/" + g.name + "/" + p.name, bm_gemm, g, p);
  for (const ConvCase& c : conv_cases(dev))
    for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter})
      for (const GemmPrecision& p : precisions)
        add(dev, "conv/" + c.name + "_" + conv_pass_name(pass) + "/" + p.name, bm_conv, c, pass, p);
  for (const BnCase& bc : bn_cases(dev))
    for (BnPass pass :
         {BnPass::Forward, BnPass::ForwardResidualRelu, BnPass::Backward, BnPass::BackwardRelu})
      for (DType dt : floats)
        add(dev, "batchnorm/" + bc.name + "_" + bn_pass_name(pass) + "/" + dtype_name(dt),
            bm_batchnorm, bc, pass, dt);
  for (bool backward : {false, true})
    for (DType dt : floats)
      add(dev, std::string("avgpool/res5_") + (backward ? "bwd/" : "fwd/") + dtype_name(dt),
          bm_avgpool, backward, dt);
  auto seq_name = [](const SeqShape& sh) {
    return std::string(sh.name) + "_" + std::to_string(sh.seqs) + "x" + std::to_string(sh.seq);
  };
  for (const SeqShape& sh : seq_shapes(dev)) {
    // The CPU's LayerNorm costs the same per token at either sequence length.
    if (dev == Device::CPU && sh.causal) continue;
    for (bool backward : {false, true})
      for (DType dt : floats)
        add(dev, "layernorm/" + seq_name(sh) + (backward ? "_bwd/" : "_fwd/") + dtype_name(dt),
            bm_layernorm, sh, backward, dt);
  }
  for (const SeqShape& sh : seq_shapes(dev))
    for (bool backward : {false, true})
      for (DType dt : floats)
        add(dev,
            "attention_softmax/" + seq_name(sh) + (sh.causal ? "_causal" : "") +
                (backward ? "_bwd/" : "_fwd/") + dtype_name(dt),
            bm_attention_softmax, sh, backward, dt);
  for (const SeqShape& sh : seq_shapes(dev)) {
    if (dev == Device::CPU && sh.causal) continue;  // as LayerNorm
    for (bool backward : {false, true})
      for (DType dt : floats)
        add(dev, "embedding/" + seq_name(sh) + (backward ? "_bwd/" : "_fwd/") + dtype_name(dt),
            bm_embedding, sh, backward, dt);
  }
  for (bool split : {true, false})
    for (DType dt : floats)
      add(dev,
          std::string("permute/") + (split ? "bert_qkv_split/" : "bert_heads_merge/") +
              dtype_name(dt),
          bm_permute, split, dt);
  for (DType dt : floats) add(dev, std::string("add/bert_residual/") + dtype_name(dt), bm_add, dt);
}

}  // namespace
}  // namespace mpbench

int main(int argc, char** argv) {
  using namespace mpbench;
  rerun_with_better_blas(argv);  // as app/main.cpp
  register_device(kReference);
  std::string why_not;
  if (native_cpu_available(&why_not))
    register_device(kNative);
  else
    std::printf("native CPU benchmarks skipped: %s\n", why_not.c_str());
  if (cuda_device_count(&why_not) > 0)
    register_device(kCuda);
  else
    std::printf("CUDA benchmarks skipped: %s\n", why_not.c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  release_backends();
  return 0;
}
