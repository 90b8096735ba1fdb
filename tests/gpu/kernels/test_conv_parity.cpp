// CUDA (cuDNN) convolutions against the CPU reference: forward, backward data and backward
// filter on ResNet-like shapes in every math mode, the plan cache, a first call inside a CUDA
// graph capture, shape errors, and the convolution workspace: its own buffer from a provider,
// the choices recorded, and the fallback when the workspace cannot be had.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/allocator.h"

#include "kernels/backend.h"
#include "kernels/error.h"
#include "parity_env.h"
#include "test_util.h"

#if defined(MPBENCH_HAVE_CUDA)
namespace mpbench::cuda {
// Defined in kernels/cuda/conv.cu, declared in kernels/cuda/device_context.h (a CUDA header,
// which tests cannot include).
std::vector<size_t> conv_plan_cache_trace(int device,
                                          const std::vector<std::pair<int, ConvDesc>>& calls);
std::vector<std::pair<int32_t, std::vector<float>>> conv_refusal_trace(int device, int refusals);
}  // namespace mpbench::cuda
#endif

namespace mpbench {
namespace {

using test::Env;
using test::Pair;
using test::tolerance_for;

struct ConvShape {
  const char* name;
  int64_t n, h, w, c, k, r, s, stride, pad;
  int64_t p() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t q() const { return (w + 2 * pad - s) / stride + 1; }
};

// Small versions of what a ResNet bottleneck does, plus the awkward cases: odd spatial sizes
// whose last rows a stride-2 filter never reaches, odd channel counts, a 7x7 stem, N = 1.
const ConvShape kShapes[] = {
    {"1x1", 2, 8, 8, 16, 32, 1, 1, 1, 0},
    {"3x3_pad1", 2, 9, 9, 8, 16, 3, 3, 1, 1},
    {"3x3_pad0", 2, 9, 9, 8, 16, 3, 3, 1, 0},  // the same but the padding: another plan
    {"3x3_stride2_pad1", 3, 11, 11, 16, 8, 3, 3, 2, 1},
    {"1x1_stride2_odd", 2, 7, 7, 8, 16, 1, 1, 2, 0},
    {"3x3_odd_channels", 1, 5, 7, 3, 5, 3, 3, 1, 1},
    {"7x7_stem_stride2", 1, 15, 13, 3, 8, 7, 7, 2, 3},
    {"3x3_stride2_nopad_even", 2, 8, 8, 8, 8, 3, 3, 2, 0},
    // Bottleneck channel counts (64 and up), where cuDNN picks its tensor-core NHWC kernels;
    // the tiny_resnet config's 4 input channels, which they cannot take.
    {"bottleneck_3x3_64", 2, 14, 14, 64, 64, 3, 3, 1, 1},
    {"projection_1x1_s2_64_128", 2, 14, 14, 64, 128, 1, 1, 2, 0},
    {"tiny_resnet_1x1_c4", 4, 8, 8, 4, 8, 1, 1, 1, 0},
    // tiny_resnet's projection: a strided 1x1 of fewer input channels than a vector holds, whose
    // backward-weights oneDNN 2.6's 1x1 kernels get wrong (oneDNN issue #6035).
    {"tiny_resnet_projection_1x1_s2_c4", 32, 8, 8, 4, 16, 1, 1, 2, 0},
};

struct ConvConfig {
  DType dt;
  GemmMath math;
};

const ConvConfig kConfigs[] = {
    {DType::F32, GemmMath::Strict},
    {DType::F32, GemmMath::TF32},
    {DType::F16, GemmMath::LowPrecision},
    {DType::BF16, GemmMath::LowPrecision},
};

// Error scales of y, dx and dw: each output's sum of |a||b| over the products that make it, in
// double (what the GEMM parity tests use: a relative error against the sum itself would blow up
// where terms cancel).
struct ConvScales {
  std::vector<float> y, dx, dw;
};

ConvScales conv_scales(const ConvShape& g, const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& dy) {
  const int64_t p_n = g.p(), q_n = g.q();
  std::vector<double> sy(static_cast<size_t>(g.n * p_n * q_n * g.k), 0.0);
  std::vector<double> sdx(static_cast<size_t>(g.n * g.h * g.w * g.c), 0.0);
  std::vector<double> sdw(static_cast<size_t>(g.k * g.r * g.s * g.c), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t p = 0; p < p_n; ++p)
      for (int64_t q = 0; q < q_n; ++q)
        for (int64_t r = 0; r < g.r; ++r)
          for (int64_t s = 0; s < g.s; ++s) {
            const int64_t h = p * g.stride - g.pad + r, wi = q * g.stride - g.pad + s;
            if (h < 0 || h >= g.h || wi < 0 || wi >= g.w) continue;
            const size_t xo = static_cast<size_t>(((n * g.h + h) * g.w + wi) * g.c);
            const size_t yo = static_cast<size_t>(((n * p_n + p) * q_n + q) * g.k);
            for (int64_t k = 0; k < g.k; ++k) {
              const size_t wo = static_cast<size_t>(((k * g.r + r) * g.s + s) * g.c);
              double acc_y = 0;
              const double ady = std::fabs(static_cast<double>(dy[yo + k]));
              for (int64_t c = 0; c < g.c; ++c) {
                const double ax = std::fabs(static_cast<double>(x[xo + c]));
                const double aw = std::fabs(static_cast<double>(w[wo + c]));
                acc_y += ax * aw;
                sdx[xo + c] += ady * aw;
                sdw[wo + c] += ady * ax;
              }
              sy[yo + k] += acc_y;
            }
          }
  auto to_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  return {to_f(sy), to_f(sdx), to_f(sdw)};
}

// before_dut, when given, runs after every buffer is allocated, before the GPU's convolutions.
void run_conv_case(Env& env, const ConvConfig& cfg, const ConvShape& g, uint64_t seed,
                   const std::function<void()>& before_dut = {}) {
  const Shape xs{g.n, g.h, g.w, g.c}, ws{g.k, g.r, g.s, g.c}, ys{g.n, g.p(), g.q(), g.k};
  Pair x = env.random(xs, cfg.dt, seed);
  Pair w = env.random(ws, cfg.dt, seed + 1);
  Pair dy = env.random(ys, cfg.dt, seed + 2);
  Pair y = env.poisoned(ys, cfg.dt);
  Pair dx = env.poisoned(xs, cfg.dt);
  Pair dw = env.poisoned(ws, cfg.dt);
  // Scales from the values as stored (after rounding to the dtype), as both backends see them.
  const ConvScales sc = conv_scales(g, env.host_cpu(x), env.host_cpu(w), env.host_cpu(dy));

  ConvDesc d;
  d.stride = g.stride;
  d.pad = g.pad;
  d.math = cfg.math;
  env.cpu->conv2d_forward(d, x.cpu, w.cpu, y.cpu);
  env.cpu->conv2d_backward_data(d, dy.cpu, w.cpu, dx.cpu);
  env.cpu->conv2d_backward_filter(d, x.cpu, dy.cpu, dw.cpu);
  if (before_dut) before_dut();
  env.dut->conv2d_forward(d, x.dut, w.dut, y.dut);
  env.dut->conv2d_backward_data(d, dy.dut, w.dut, dx.dut);
  env.dut->conv2d_backward_filter(d, x.dut, dy.dut, dw.dut);

  const double tol = tolerance_for(cfg.dt, cfg.math);
  const std::string what =
      fmt::format("{} math {}, {} x {} w {} stride {} pad {}", dtype_name(cfg.dt),
                  static_cast<int>(cfg.math), g.name, xs.str(), ws.str(), g.stride, g.pad);
  EXPECT_TRUE(env.close(y, tol, &sc.y)) << "y: " << what;
  EXPECT_TRUE(env.close(dx, tol, &sc.dx)) << "dx: " << what;
  EXPECT_TRUE(env.close(dw, tol, &sc.dw)) << "dw: " << what;
  for (Pair* p : {&x, &w, &dy, &y, &dx, &dw}) env.release(*p);
}

TEST(CudaConvParity, MatchesCpuReference) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  uint64_t seed = 100;
  for (const ConvConfig& cfg : kConfigs)
    for (const ConvShape& g : kShapes) run_conv_case(env, cfg, g, seed += 7);
}

// Convolutions that differ only in the batch, then only in the filter's width, one after the
// other on one backend: each is its own cached plan (the native CPU's keyed without N, or with R in
// S's place, gave the second the first's).
TEST(CudaConvParity, AnotherBatchOrFilterWidthIsAnotherPlan) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  const ConvShape shapes[] = {
      {"3x3_n2", 2, 6, 7, 8, 8, 3, 3, 1, 1},
      {"3x3_n3", 3, 6, 7, 8, 8, 3, 3, 1, 1},
      {"3x1_n3", 3, 6, 7, 8, 8, 3, 1, 1, 1},
  };
  uint64_t seed = 900;
  for (const ConvConfig& cfg : kConfigs)
    for (const ConvShape& g : shapes) run_conv_case(env, cfg, g, seed += 7);
}

// A second call with the same key must reuse the plan (the cache does not grow), whatever the
// buffers; another stride, pad, math or op is another plan.
TEST(CudaConvParity, PlanIsCachedPerKey) {
  SKIP_WITHOUT_CUDA();
#if defined(MPBENCH_HAVE_CUDA)
  ConvDesc a;
  a.stride = 1;
  a.pad = 1;
  ConvDesc b = a;
  b.stride = 2;
  ConvDesc a_tf32 = a;
  a_tf32.math = GemmMath::TF32;
  const std::vector<std::pair<int, ConvDesc>> calls = {{0, a}, {0, a}, {0, b}, {0, a}, {0, a_tf32},
                                                       {1, a}, {1, a}, {2, a}, {2, b}, {2, a}};
  const std::vector<size_t> expected = {1, 1, 2, 2, 3, 4, 4, 5, 6, 6};
  EXPECT_EQ(cuda::conv_plan_cache_trace(0, calls), expected);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// An algorithm that fails when run is passed over and the plan chosen again (run_conv): refusing
// each chosen algorithm in turn gives other algorithms, all computing the same convolution. The
// weight gradient, as cuDNN documents two FMA algorithms for it with NHWC filters (ALGO_0 and
// ALGO_1; the forward and data gradient have one); its sums are exact, so equal bit for bit.
TEST(CudaConvParity, RefusedAlgorithmIsPassedOver) {
  SKIP_WITHOUT_CUDA();
#if defined(MPBENCH_HAVE_CUDA)
  const auto runs = cuda::conv_refusal_trace(0, 2);
  ASSERT_GE(runs.size(), 1u) << "the first weight-gradient convolution did not run";
  if (runs.size() < 2)
    GTEST_SKIP() << "cuDNN offered one FMA-math algorithm (" << runs[0].first
                 << "): nothing to fall back to";
  for (size_t i = 1; i < runs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) EXPECT_NE(runs[i].first, runs[j].first);
    EXPECT_EQ(runs[i].second, runs[0].second)
        << "algorithm " << runs[i].first << " against " << runs[0].first;
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// Algorithm selection uses heuristics only, so a convolution whose key is new can be captured
// into a CUDA graph; the replay must give the eager result.
TEST(CudaConvParity, FirstCallInsideGraphCapture) {
  SKIP_WITHOUT_CUDA();
  Env env;
  ASSERT_TRUE(env.dut->supports_graphs());
  // A shape no other test uses, so that its plans are chosen during the capture.
  const ConvShape g{"capture", 2, 6, 10, 8, 12, 3, 3, 2, 1};
  for (const ConvConfig& cfg : kConfigs) {
    const Shape xs{g.n, g.h, g.w, g.c}, ws{g.k, g.r, g.s, g.c}, ys{g.n, g.p(), g.q(), g.k};
    Pair x = env.random(xs, cfg.dt, 11), w = env.random(ws, cfg.dt, 12);
    Pair dy = env.random(ys, cfg.dt, 13);
    Pair y = env.poisoned(ys, cfg.dt), dx = env.poisoned(xs, cfg.dt), dw = env.poisoned(ws, cfg.dt);
    ConvDesc d;
    d.stride = g.stride;
    d.pad = g.pad;
    d.math = cfg.math;
    const std::string what =
        fmt::format("{} math {}", dtype_name(cfg.dt), static_cast<int>(cfg.math));
    env.dut->begin_capture();
    env.dut->conv2d_forward(d, x.dut, w.dut, y.dut);
    env.dut->conv2d_backward_data(d, dy.dut, w.dut, dx.dut);
    env.dut->conv2d_backward_filter(d, x.dut, dy.dut, dw.dut);
    env.dut->end_capture();
    env.dut->replay();
    const auto gy = env.host_dut(y), gdx = env.host_dut(dx), gdw = env.host_dut(dw);
    test::poison(*env.dut, y.dut);
    test::poison(*env.dut, dx.dut);
    test::poison(*env.dut, dw.dut);
    env.dut->conv2d_forward(d, x.dut, w.dut, y.dut);
    env.dut->conv2d_backward_data(d, dy.dut, w.dut, dx.dut);
    env.dut->conv2d_backward_filter(d, x.dut, dy.dut, dw.dut);
    // Same algorithm, same inputs: bitwise equal unless an algorithm is nondeterministic
    // (atomics in backward filter), so compare with the dtype's tolerance.
    const double tol = tolerance_for(cfg.dt, cfg.math);
    EXPECT_TRUE(test::compare(gy, env.host_dut(y), tol).ok) << "y " << what;
    EXPECT_TRUE(test::compare(gdx, env.host_dut(dx), tol).ok) << "dx " << what;
    EXPECT_TRUE(test::compare(gdw, env.host_dut(dw), tol).ok) << "dw " << what;
    for (Pair* p : {&x, &w, &dy, &y, &dx, &dw}) env.release(*p);
  }
}

TEST(CudaConvParity, BadShapesThrow) {
  SKIP_WITHOUT_DEVICE();
  Env env;
  auto& be = *env.dut;
  Pair x = env.random(Shape{2, 8, 8, 4}, DType::F32, 1);
  Pair w = env.random(Shape{6, 3, 3, 4}, DType::F32, 2);
  Pair y = env.poisoned(Shape{2, 8, 8, 6}, DType::F32);  // stride 1, pad 1
  ConvDesc d;
  d.pad = 1;
  // The valid call works, so the failures below are about the shapes.
  EXPECT_NO_THROW(be.conv2d_forward(d, x.dut, w.dut, y.dut));
  Pair w_bad_c = env.random(Shape{6, 3, 3, 5}, DType::F32, 3);
  EXPECT_THROW(be.conv2d_forward(d, x.dut, w_bad_c.dut, y.dut), Error);
  ConvDesc d_stride2 = d;
  d_stride2.stride = 2;  // y should be (2, 4, 4, 6)
  EXPECT_THROW(be.conv2d_forward(d_stride2, x.dut, w.dut, y.dut), Error);
  EXPECT_THROW(be.conv2d_backward_data(d_stride2, y.dut, w.dut, x.dut), Error);
  EXPECT_THROW(be.conv2d_backward_filter(d_stride2, x.dut, y.dut, w.dut), Error);
  Pair x3 = env.random(Shape{2, 64, 4}, DType::F32, 4);  // rank 3
  EXPECT_THROW(be.conv2d_forward(d, x3.dut, w.dut, y.dut), Error);
  Pair y16 = env.poisoned(Shape{2, 8, 8, 6}, DType::F16);  // mixed dtypes
  EXPECT_THROW(be.conv2d_forward(d, x.dut, w.dut, y16.dut), Error);
  ConvDesc d_low = d;
  d_low.math = GemmMath::LowPrecision;  // fp32 data
  EXPECT_THROW(be.conv2d_forward(d_low, x.dut, w.dut, y.dut), Error);
  ConvDesc d_neg = d;
  d_neg.pad = -1;
  EXPECT_THROW(be.conv2d_forward(d_neg, x.dut, w.dut, y.dut), Error);
  Pair w_big = env.random(Shape{6, 11, 11, 4}, DType::F32, 5);  // larger than the padded input
  EXPECT_THROW(be.conv2d_forward(d, x.dut, w_big.dut, y.dut), Error);
  for (Pair* p : {&x, &w, &y, &w_bad_c, &x3, &y16, &w_big}) env.release(*p);
}

// ---- the convolution workspace ---------------------------------------------------------------

// What TrackingAllocator::set_limit caps: every category but Data.
size_t training_bytes(const TrackingAllocator& a) {
  size_t total = 0;
  for (int c = 0; c < kMemCategoryCount; ++c)
    if (static_cast<MemCategory>(c) != MemCategory::Data)
      total += a.current(static_cast<MemCategory>(c));
  return total;
}

void print_choices(const char* what, const std::vector<ConvAlgorithm>& choices) {
  for (const ConvAlgorithm& a : choices)
    std::cout << fmt::format(
        "[{}] {} x ({}, {}, {}, {}) w ({}, {}, {}, {}) stride {} pad {} {}: algo {} ({}), math {}, "
        "workspace {} bytes{}\n",
        what, a.op, a.n, a.h, a.w, a.c, a.k, a.r, a.s, a.c, a.stride, a.pad, a.dtype, a.algo,
        a.algo_name, a.math, a.workspace_bytes, a.workspace_limited ? " (limited)" : "");
}

// A ResNet-50 conv2_x 3x3 at a small batch (so that the CPU reference stays quick), and the
// modes whose algorithms differ most.
const ConvShape kWorkspaceShape{"resnet_conv2_3x3", 4, 56, 56, 64, 64, 3, 3, 1, 1};
const ConvConfig kWorkspaceConfigs[] = {
    {DType::F32, GemmMath::Strict},
    {DType::BF16, GemmMath::LowPrecision},
};

// With a provider the convolutions have their own workspace, apart from the GEMM one: the
// top-ranked algorithm gets what it asks for, the buffer is the largest of them and is counted
// by the allocator, and every choice is recorded in first-use order.
TEST(CudaConvWorkspace, OwnWorkspaceForTheTopAlgorithmAndChoicesRecorded) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 500;
  for (const ConvConfig& cfg : kWorkspaceConfigs) {
    Env env;
    env.dut->set_conv_workspace_provider(env.dut_alloc.workspace_provider());
    EXPECT_TRUE(env.dut->conv_algorithms().empty());
    run_conv_case(env, cfg, kWorkspaceShape, seed += 7);
    const std::vector<ConvAlgorithm> choices = env.dut->conv_algorithms();
    print_choices(dtype_name(cfg.dt), choices);
    ASSERT_EQ(choices.size(), 3u);
    const char* ops[] = {"forward", "backward_data", "backward_filter"};
    size_t most = 0;
    for (size_t i = 0; i < 3; ++i) {
      const ConvAlgorithm& a = choices[i];
      EXPECT_EQ(a.op, ops[i]);
      const ConvShape& g = kWorkspaceShape;
      EXPECT_EQ(std::vector<int64_t>({a.n, a.h, a.w, a.c, a.k, a.r, a.s, a.stride, a.pad}),
                std::vector<int64_t>({g.n, g.h, g.w, g.c, g.k, g.r, g.s, g.stride, g.pad}));
      EXPECT_EQ(a.dtype, dtype_name(cfg.dt));
      EXPECT_GE(a.algo, 0);
      EXPECT_FALSE(a.algo_name.empty());
      if (cfg.math == GemmMath::Strict) EXPECT_EQ(a.math, "fma") << a.op;  // never tensor cores
      EXPECT_FALSE(a.workspace_limited) << a.op << ": nothing limits it here";
      most = std::max(most, a.workspace_bytes);
    }
    // The buffer only grew to the largest request, and the allocator counts it beside the GEMM
    // workspace.
    EXPECT_GE(env.dut->conv_workspace_bytes(), most);
    EXPECT_LT(env.dut->conv_workspace_bytes(), most + 256);
    EXPECT_EQ(env.dut_alloc.current(MemCategory::Workspace),
              env.dut->workspace_bytes() + env.dut->conv_workspace_bytes());
    // Detaching releases it through the allocator and drops the choices.
    env.dut->set_conv_workspace_provider({});
    EXPECT_EQ(env.dut->conv_workspace_bytes(), 0u);
    EXPECT_EQ(env.dut_alloc.current(MemCategory::Workspace), env.dut->workspace_bytes());
    EXPECT_TRUE(env.dut->conv_algorithms().empty());
  }
}

// At ResNet-50's real batch the top algorithms may want more than the 32 MiB GEMM workspace they
// were once capped at; whatever cuDNN ranks first is what runs (printed for the device log).
TEST(CudaConvWorkspace, ResnetBatchTakesWhatTheTopAlgorithmWants) {
  SKIP_WITHOUT_CUDA();
  Env env;
  env.dut->set_conv_workspace_provider(env.dut_alloc.workspace_provider());
  const ConvShape g{"resnet_conv2_3x3_b64", 64, 56, 56, 64, 64, 3, 3, 1, 1};
  const Shape xs{g.n, g.h, g.w, g.c}, ws{g.k, g.r, g.s, g.c}, ys{g.n, g.p(), g.q(), g.k};
  auto make = [&](Shape s) {
    return env.dut_alloc.alloc(s, DType::BF16, MemCategory::Activations);
  };
  Tensor x = make(xs), w = make(ws), y = make(ys), dx = make(xs), dw = make(ws), dy = make(ys);
  for (Tensor* t : {&x, &w, &dy}) env.dut->fill(*t, 0.5f);
  ConvDesc d;
  d.pad = g.pad;
  d.math = GemmMath::LowPrecision;
  env.dut->conv2d_forward(d, x, w, y);
  env.dut->conv2d_backward_data(d, dy, w, dx);
  env.dut->conv2d_backward_filter(d, x, dy, dw);
  env.dut->synchronize();
  const std::vector<ConvAlgorithm> choices = env.dut->conv_algorithms();
  print_choices("bf16 batch 64", choices);
  ASSERT_EQ(choices.size(), 3u);
  size_t most = 0;
  for (const ConvAlgorithm& a : choices) {
    EXPECT_FALSE(a.workspace_limited) << a.op;
    most = std::max(most, a.workspace_bytes);
  }
  EXPECT_GE(env.dut->conv_workspace_bytes(), most);
  std::cout << fmt::format("largest convolution workspace {} bytes ({} the 32 MiB GEMM one)\n",
                           most, most > (size_t{32} << 20) ? "more than" : "within");
  env.dut->set_conv_workspace_provider({});
}

// When the top algorithm's workspace cannot be had, the next one that fits runs instead, with the
// same results: under an allocator limit (as --memory-limit sets it) and under the convolution
// workspace limit. The room left is one byte short of the largest unconstrained request, so the
// op that made it must fall back and say so.
TEST(CudaConvWorkspace, FallsBackWhenTheWorkspaceCannotBeHad) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 700;
  for (const ConvConfig& cfg : kWorkspaceConfigs) {
    std::vector<ConvAlgorithm> free_choices;
    {
      Env env;
      env.dut->set_conv_workspace_provider(env.dut_alloc.workspace_provider());
      run_conv_case(env, cfg, kWorkspaceShape, seed);
      free_choices = env.dut->conv_algorithms();
      env.dut->set_conv_workspace_provider({});
    }
    ASSERT_EQ(free_choices.size(), 3u);
    size_t most = 0;
    for (const ConvAlgorithm& a : free_choices) most = std::max(most, a.workspace_bytes);
    if (most == 0) {
      std::cout << dtype_name(cfg.dt) << ": no algorithm wanted workspace; nothing to limit\n";
      continue;
    }
    const size_t room = most - 1;
    for (const bool by_memory : {true, false}) {
      SCOPED_TRACE(fmt::format("{}, limited by {}", dtype_name(cfg.dt),
                               by_memory ? "the allocator" : "the conv workspace limit"));
      Env env;
      env.dut->set_conv_workspace_provider(
          env.dut_alloc.workspace_provider(by_memory ? kDefaultConvWorkspaceLimit : room));
      try {
        run_conv_case(env, cfg, kWorkspaceShape, seed, [&] {
          if (by_memory) env.dut_alloc.set_limit(training_bytes(env.dut_alloc) + room);
        });
      } catch (const Error& e) {
        env.dut_alloc.set_limit(0);
        env.dut->set_conv_workspace_provider({});
        // Strict takes FMA-math algorithms only, and cuDNN documents one for the forward and the
        // data gradient with NHWC filters: when that one needs the room, none is left, and the
        // op says so instead of running something else.
        const bool none_left =
            std::string(e.what()).find("offers no algorithm") != std::string::npos;
        if (cfg.math == GemmMath::Strict && none_left) {
          std::cout << "strict fp32: no other algorithm fits: " << e.what() << "\n";
          continue;
        }
        throw;
      }
      const std::vector<ConvAlgorithm> choices = env.dut->conv_algorithms();
      print_choices(by_memory ? "memory-limited" : "conv-limit", choices);
      ASSERT_EQ(choices.size(), 3u);
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_LE(choices[i].workspace_bytes, room) << choices[i].op;
        if (free_choices[i].workspace_bytes == most)
          EXPECT_TRUE(choices[i].workspace_limited) << choices[i].op;
      }
      EXPECT_LT(env.dut->conv_workspace_bytes(), room + 256);  // whole 256-byte blocks
      env.dut_alloc.set_limit(0);
      env.dut->set_conv_workspace_provider({});
    }
  }
}

// Sets an environment variable for a scope (a context reads conv.cu's switches when made).
class ScopedEnvVar {
 public:
  ScopedEnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnvVar() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnvVar(const ScopedEnvVar&) = delete;
  ScopedEnvVar& operator=(const ScopedEnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool is_pointwise(const ConvShape& g) {
  return g.r == 1 && g.s == 1 && g.stride == 1 && g.pad == 0;
}
// What conv.cu runs on cuBLASLt: pointwise, channel counts multiples of 8.
bool runs_as_gemm(const ConvShape& g) {
  return is_pointwise(g) && g.c % 8 == 0 && g.k % 8 == 0;
}

// Pointwise convolutions of channel counts multiples of 8 run as cuBLASLt GEMMs (conv.cu),
// recorded as such, with no convolution workspace; the others (tiny_resnet's 4 channels) and all
// of them under MPBENCH_CUDNN_POINTWISE=1 on cuDNN. Both paths match the reference
// (MatchesCpuReference runs the default one on every config).
TEST(CudaConvParity, PointwiseRunsAsGemmUnlessAskedForCudnn) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 300;
  for (const bool on_cudnn : {false, true}) {
    std::optional<ScopedEnvVar> knob;
    if (on_cudnn) knob.emplace("MPBENCH_CUDNN_POINTWISE", "1");
    for (const ConvConfig& cfg : kConfigs) {
      Env env;
      env.dut->set_conv_workspace_provider(env.dut_alloc.workspace_provider());
      int pointwise = 0;
      for (const ConvShape& g : kShapes) {
        if (!is_pointwise(g)) continue;
        ++pointwise;
        run_conv_case(env, cfg, g, seed += 7);
      }
      ASSERT_GT(pointwise, 0);
      const std::vector<ConvAlgorithm> choices = env.dut->conv_algorithms();
      print_choices(on_cudnn ? "pointwise on cuDNN" : "pointwise", choices);
      ASSERT_EQ(choices.size(), 3u * static_cast<size_t>(pointwise));
      int gemms = 0;
      for (const ConvAlgorithm& a : choices) {
        EXPECT_EQ(a.r * a.s, 1);
        const bool gemm = !on_cudnn && a.c % 8 == 0 && a.k % 8 == 0;
        gemms += gemm;
        if (!gemm) {
          EXPECT_NE(a.algo_name, "cublaslt_gemm") << a.op;
          EXPECT_GE(a.algo, 0) << a.op;
        } else {
          EXPECT_EQ(a.algo_name, "cublaslt_gemm") << a.op;
          EXPECT_EQ(a.algo, -1) << a.op;
          EXPECT_EQ(a.workspace_bytes, 0u) << a.op;
        }
        if (cfg.math == GemmMath::Strict) EXPECT_EQ(a.math, "fma") << a.op;
      }
      int expected = 0;
      for (const ConvShape& g : kShapes) expected += !on_cudnn && runs_as_gemm(g) ? 3 : 0;
      EXPECT_EQ(gemms, expected);
      if (!on_cudnn) EXPECT_GT(gemms, 0);
      // On cuBLASLt itself: a strict fp32 weight gradient (K = N*H*W) on the naive kernel would
      // pass the comparisons while running far slower.
      EXPECT_TRUE(env.dut->fallback_calls().empty()) << env.dut->fallback_path();
      env.dut->set_conv_workspace_provider({});
    }
  }
}

// MPBENCH_CUDNN_FIND=1 ranks the algorithms by timing them (cudnnFind*, outside a capture): what
// runs then still matches the reference and is recorded, one choice per op and shape.
TEST(CudaConvParity, TimedRankingMatchesTheReference) {
  SKIP_WITHOUT_CUDA();
  ScopedEnvVar find("MPBENCH_CUDNN_FIND", "1");
  uint64_t seed = 900;
  for (const ConvConfig& cfg : kConfigs) {
    Env env;
    env.dut->set_conv_workspace_provider(env.dut_alloc.workspace_provider());
    int shapes = 0;
    for (const ConvShape& g : kShapes) {
      if (runs_as_gemm(g)) continue;  // cuBLASLt's
      ++shapes;
      run_conv_case(env, cfg, g, seed += 7);
    }
    const std::vector<ConvAlgorithm> choices = env.dut->conv_algorithms();
    print_choices("timed", choices);
    EXPECT_EQ(choices.size(), 3u * static_cast<size_t>(shapes));
    for (const ConvAlgorithm& a : choices) {
      EXPECT_GE(a.algo, 0) << a.op;
      if (cfg.math == GemmMath::Strict) EXPECT_EQ(a.math, "fma") << a.op;
    }
    env.dut->set_conv_workspace_provider({});
  }
}

}  // namespace
}  // namespace mpbench
