// Overhead of the CPU backend's strict fp32 GEMM over calling OpenBLAS sgemm directly, on the
// MLP shapes of batch 128 (784-512-256-10): forward Y = X W^T, and backward dX = dY W,
// dW = dY^T X. Each shape runs as Backend/<shape>, Cblas/<shape> and Paired/<shape> (both calls
// alternated, robust to a busy machine); a summary of the paired overheads is printed at the end.
//
//   bench_cpu_gemm [--benchmark_min_time=0.5] [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"

namespace mpbench {
namespace {

enum class Pass { Forward, BackwardData, BackwardWeights };

struct GemmShape {
  const char* name;
  int64_t batch, in, out;  // a Linear(in -> out) on `batch` rows
  Pass pass;
};

// Forward: X (B, in) . W (out, in)^T -> (B, out). dX: dY (B, out) . W (out, in) -> (B, in).
// dW: dY (B, out)^T . X (B, in) -> (out, in).
const GemmShape kShapes[] = {
    {"fwd_128x784x512", 128, 784, 512, Pass::Forward},
    {"fwd_128x512x256", 128, 512, 256, Pass::Forward},
    {"fwd_128x256x10", 128, 256, 10, Pass::Forward},
    {"dX_128x512x256", 128, 512, 256, Pass::BackwardData},
    {"dX_128x256x10", 128, 256, 10, Pass::BackwardData},
    {"dW_128x784x512", 128, 784, 512, Pass::BackwardWeights},
    {"dW_128x512x256", 128, 512, 256, Pass::BackwardWeights},
    {"dW_128x256x10", 128, 256, 10, Pass::BackwardWeights},
};

// Operands of one shape, allocated through the backend, filled with small values.
struct Operands {
  Tensor a, b, c;
  GemmDesc desc;
  int m = 0, n = 0, k = 0;
};

Operands make_operands(TrackingAllocator& alloc, const GemmShape& s) {
  Backend& be = alloc.backend();
  Operands o;
  auto mat = [&](int64_t r, int64_t c) {
    Tensor t = alloc.alloc(Shape{r, c}, DType::F32, MemCategory::Activations);
    std::vector<float> v(static_cast<size_t>(r * c));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 17) * 0.01f - 0.08f;
    be.upload(v.data(), t);
    return t;
  };
  switch (s.pass) {
    case Pass::Forward:
      o.a = mat(s.batch, s.in), o.b = mat(s.out, s.in), o.c = mat(s.batch, s.out);
      o.desc.trans_b = true;
      o.m = s.batch, o.n = s.out, o.k = s.in;
      break;
    case Pass::BackwardData:
      o.a = mat(s.batch, s.out), o.b = mat(s.out, s.in), o.c = mat(s.batch, s.in);
      o.m = s.batch, o.n = s.in, o.k = s.out;
      break;
    case Pass::BackwardWeights:
      o.a = mat(s.batch, s.out), o.b = mat(s.batch, s.in), o.c = mat(s.out, s.in);
      o.desc.trans_a = true;
      o.m = s.out, o.n = s.in, o.k = s.batch;
      break;
  }
  return o;
}

void set_counters(benchmark::State& state, const Operands& o) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2e-9 * o.m * o.n * o.k, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_backend(benchmark::State& state, const GemmShape& s) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  Operands o = make_operands(alloc, s);
  for (auto _ : state) {
    be->gemm(o.desc, o.a, o.b, o.c);
    benchmark::DoNotOptimize(o.c.data);
    benchmark::ClobberMemory();
  }
  set_counters(state, o);
}

void bm_cblas(benchmark::State& state, const GemmShape& s) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  Operands o = make_operands(alloc, s);
  const int lda = o.desc.trans_a ? o.m : o.k, ldb = o.desc.trans_b ? o.k : o.n;
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, o.desc.trans_a ? CblasTrans : CblasNoTrans,
                o.desc.trans_b ? CblasTrans : CblasNoTrans, o.m, o.n, o.k, 1.0f, o.a.ptr<float>(),
                lda, o.b.ptr<float>(), ldb, 0.0f, o.c.ptr<float>(), o.n);
    benchmark::DoNotOptimize(o.c.data);
    benchmark::ClobberMemory();
  }
  set_counters(state, o);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Both calls back to back in every iteration, each timed on its own, so that a busy machine slows
// both sides alike; the medians of the per-call times give the overhead.
void bm_paired(benchmark::State& state, const GemmShape& s) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  Operands o = make_operands(alloc, s);
  const int lda = o.desc.trans_a ? o.m : o.k, ldb = o.desc.trans_b ? o.k : o.n;
  std::vector<double> t_backend, t_cblas;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    be->gemm(o.desc, o.a, o.b, o.c);
    benchmark::ClobberMemory();
    const auto t1 = Clock::now();
    cblas_sgemm(CblasRowMajor, o.desc.trans_a ? CblasTrans : CblasNoTrans,
                o.desc.trans_b ? CblasTrans : CblasNoTrans, o.m, o.n, o.k, 1.0f, o.a.ptr<float>(),
                lda, o.b.ptr<float>(), ldb, 0.0f, o.c.ptr<float>(), o.n);
    benchmark::ClobberMemory();
    const auto t2 = Clock::now();
    t_backend.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    t_cblas.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  const double b = median(t_backend), c = median(t_cblas);
  state.counters["backend_us"] = b;
  state.counters["cblas_us"] = c;
  state.counters["overhead_pct"] = c > 0 ? 100.0 * (b / c - 1.0) : 0.0;
}

// Prints the paired medians per shape and for one MLP step's GEMMs after the usual table.
class OverheadReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const std::string name = r.benchmark_name();
      if (r.error_occurred || name.rfind("Paired/", 0) != 0) continue;
      if (r.run_type == Run::RT_Aggregate) continue;  // repetitions: the last one wins
      std::string shape = name.substr(7);
      shape = shape.substr(0, shape.find('/'));  // drop "/real_time"
      rows_[shape] = {r.counters.at("backend_us").value, r.counters.at("cblas_us").value};
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    if (rows_.empty()) return;
    double sum_b = 0, sum_c = 0;
    std::printf("\nmedian per call, Backend::gemm vs cblas_sgemm (strict fp32)\n");
    std::printf("%-18s %12s %12s %9s\n", "shape", "backend_us", "cblas_us", "overhead");
    for (const auto& [shape, t] : rows_) {
      sum_b += t.first;
      sum_c += t.second;
      std::printf("%-18s %12.1f %12.1f %8.2f%%\n", shape.c_str(), t.first, t.second,
                  100.0 * (t.first / t.second - 1.0));
    }
    std::printf("%-18s %12.1f %12.1f %8.2f%%  (the GEMMs of one MLP training step)\n", "total",
                sum_b, sum_c, 100.0 * (sum_b / sum_c - 1.0));
  }

 private:
  std::map<std::string, std::pair<double, double>> rows_;
};

}  // namespace
}  // namespace mpbench

int main(int argc, char** argv) {
  using namespace mpbench;
  // Backend/ and Cblas/ time each side alone; Paired/ alternates them for the overhead summary.
  for (const GemmShape& s : kShapes) {
    benchmark::RegisterBenchmark((std::string("Backend/") + s.name).c_str(), bm_backend, s)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string("Cblas/") + s.name).c_str(), bm_cblas, s)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string("Paired/") + s.name).c_str(), bm_paired, s)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  OverheadReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
