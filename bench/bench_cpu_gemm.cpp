// The CPU backends' strict fp32 GEMMs against calling the libraries' sgemm directly:
//  - Reference/<shape>: the reference backend (OpenBLAS) against cblas_sgemm on the MLP shapes of
//    batch 128 (784-512-256-10), for its overhead;
//  - Native/<shape> (builds with oneDNN): the native backend (oneDNN's matmul, as `mpbench run
//    --device cpu` calls it) against oneDNN's own sgemm (dnnl_sgemm, its gemm:jit kernels) on the
//    BERT-base layer's Linears at 1024 tokens (configs/cpu/bert_base_layer.json), and
//    OpenBLAS/<shape>: cblas_sgemm alone on the same shapes: which fp32 GEMM is fastest on this
//    CPU. OpenBLAS does not take turns with the other two: its threads spin on after each call
//    and slowed the OpenMP calls that followed (a 34 ms GEMM took 45 on a 2-core Zen 4).
// Each shape is a Linear(in -> out) on `rows` rows: forward Y = X W^T, backward dX = dY W and
// dW = dY^T X. Within a group the calls take turns in every iteration, each timed on its own, so
// that a busy machine slows them alike; the medians per call are summarised after the usual table.
//
//   bench_cpu_gemm [--benchmark_filter=Native] [--benchmark_min_time=0.5]
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#ifdef MPBENCH_HAVE_ONEDNN
#include <dnnl.h>
#endif

#include "kernels/allocator.h"
#include "kernels/backend.h"

namespace mpbench {
namespace {

enum class Pass { Forward, BackwardData, BackwardWeights };

struct GemmShape {
  std::string name;
  int64_t rows, in, out;
  Pass pass;
};

std::vector<GemmShape> linears(const std::string& prefix, int64_t rows,
                               const std::vector<std::pair<int64_t, int64_t>>& in_out) {
  std::vector<GemmShape> shapes;
  for (const auto& [in, out] : in_out) {
    const std::string size = fmt::format("{}x{}x{}", rows, in, out);
    shapes.push_back({prefix + "fwd_" + size, rows, in, out, Pass::Forward});
    shapes.push_back({prefix + "dX_" + size, rows, in, out, Pass::BackwardData});
    shapes.push_back({prefix + "dW_" + size, rows, in, out, Pass::BackwardWeights});
  }
  return shapes;
}

// Operands of one shape, allocated through the backend, filled with small values.
struct Operands {
  Tensor a, b, c;
  GemmDesc desc;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda() const { return desc.trans_a ? m : k; }
  int64_t ldb() const { return desc.trans_b ? k : n; }
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
      o.a = mat(s.rows, s.in), o.b = mat(s.out, s.in), o.c = mat(s.rows, s.out);
      o.desc.trans_b = true;
      o.m = s.rows, o.n = s.out, o.k = s.in;
      break;
    case Pass::BackwardData:
      o.a = mat(s.rows, s.out), o.b = mat(s.out, s.in), o.c = mat(s.rows, s.in);
      o.m = s.rows, o.n = s.in, o.k = s.out;
      break;
    case Pass::BackwardWeights:
      o.a = mat(s.rows, s.out), o.b = mat(s.rows, s.in), o.c = mat(s.out, s.in);
      o.desc.trans_a = true;
      o.m = s.out, o.n = s.in, o.k = s.rows;
      break;
  }
  return o;
}

// One way to compute an Operands' C = op(A) op(B).
struct Impl {
  const char* name;
  std::function<void(Backend&, Operands&)> run;
};

void cblas(Backend&, Operands& o) {
  cblas_sgemm(CblasRowMajor, o.desc.trans_a ? CblasTrans : CblasNoTrans,
              o.desc.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(o.m),
              static_cast<int>(o.n), static_cast<int>(o.k), 1.0f, o.a.ptr<float>(),
              static_cast<int>(o.lda()), o.b.ptr<float>(), static_cast<int>(o.ldb()), 0.0f,
              o.c.ptr<float>(), static_cast<int>(o.n));
}

const Impl kBackend{"backend", [](Backend& be, Operands& o) { be.gemm(o.desc, o.a, o.b, o.c); }};
const Impl kCblas{"openblas", cblas};
#ifdef MPBENCH_HAVE_ONEDNN
const Impl kDnnlSgemm{"dnnl_sgemm", [](Backend&, Operands& o) {
                        dnnl_sgemm(o.desc.trans_a ? 'T' : 'N', o.desc.trans_b ? 'T' : 'N', o.m, o.n,
                                   o.k, 1.0f, o.a.ptr<float>(), o.lda(), o.b.ptr<float>(), o.ldb(),
                                   0.0f, o.c.ptr<float>(), o.n);
                      }};
#endif

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The implementations in turn in every iteration, each timed on its own; their median
// microseconds per call as counters named after them.
void bm_paired(benchmark::State& state, const GemmShape& s, bool native,
               const std::vector<Impl>& impls) {
  auto be = native ? make_native_cpu_backend() : make_reference_backend();
  TrackingAllocator alloc(*be);
  Operands o = make_operands(alloc, s);
  for (const Impl& impl : impls) impl.run(*be, o);  // warm-up: primitives, packing, pages
  std::vector<std::vector<double>> times(impls.size());
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    for (size_t i = 0; i < impls.size(); ++i) {
      const auto t0 = Clock::now();
      impls[i].run(*be, o);
      benchmark::ClobberMemory();
      times[i].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
  }
  for (size_t i = 0; i < impls.size(); ++i)
    state.counters[std::string(impls[i].name) + "_us"] = median(times[i]);
  state.counters["GFLOP"] = 2e-9 * static_cast<double>(o.m * o.n * o.k);
}

// After the usual table, each group's paired medians per shape, their totals, and each
// implementation against the first (the backend).
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type == Run::RT_Aggregate) continue;
      const std::string name = r.benchmark_name();
      const size_t slash = name.find('/');
      if (slash == std::string::npos) continue;
      const std::string group = name.substr(0, slash);
      std::string shape = name.substr(slash + 1);
      shape = shape.substr(0, shape.find('/'));  // drop "/real_time"
      Group& g = groups_[group];
      std::vector<double> us;
      for (const std::string& impl : g.impls) us.push_back(r.counters.at(impl + "_us").value);
      g.rows[shape] = us;  // repetitions: the last one wins
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    for (const auto& [group, g] : groups_) {
      if (g.rows.empty()) continue;
      std::printf("\n%s: median us per call, strict fp32\n", group.c_str());
      std::printf("%-26s", "shape");
      for (const std::string& impl : g.impls) std::printf(" %12s", impl.c_str());
      std::printf("\n");
      std::vector<double> total(g.impls.size(), 0.0);
      for (const auto& [shape, us] : g.rows) {
        std::printf("%-26s", shape.c_str());
        for (size_t i = 0; i < us.size(); ++i) {
          total[i] += us[i];
          std::printf(" %12.1f", us[i]);
        }
        std::printf("\n");
      }
      std::printf("%-26s", "total");
      for (double t : total) std::printf(" %12.1f", t);
      std::printf("\n");
      if (total.size() < 2) continue;
      std::printf("%-26s", std::string("against " + g.impls[0]).c_str());
      for (double t : total) std::printf(" %12.3f", total[0] > 0 ? t / total[0] : 0.0);
      std::printf("\n");
    }
  }
  void add_group(const std::string& group, const std::vector<Impl>& impls) {
    for (const Impl& i : impls) groups_[group].impls.push_back(i.name);
  }

 private:
  struct Group {
    std::vector<std::string> impls;
    std::map<std::string, std::vector<double>> rows;
  };
  std::map<std::string, Group> groups_;
};

void add_group(SummaryReporter& reporter, const std::string& group,
               const std::vector<GemmShape>& shapes, bool native, const std::vector<Impl>& impls) {
  reporter.add_group(group, impls);
  for (const GemmShape& s : shapes)
    benchmark::RegisterBenchmark((group + "/" + s.name).c_str(), bm_paired, s, native, impls)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
}

}  // namespace
}  // namespace mpbench

int main(int argc, char** argv) {
  using namespace mpbench;
  SummaryReporter reporter;
  add_group(reporter, "Reference", linears("", 128, {{784, 512}, {512, 256}, {256, 10}}), false,
            {kBackend, kCblas});
#ifdef MPBENCH_HAVE_ONEDNN
  std::string why_not;
  const auto bert = linears("", 1024, {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}});
  if (native_cpu_available(&why_not)) {
    add_group(reporter, "Native", bert, true, {kBackend, kDnnlSgemm});
    add_group(reporter, "OpenBLAS", bert, false, {kCblas});
  } else
    std::printf("Native rows skipped: %s\n", why_not.c_str());
#else
  std::printf("Native rows skipped: a build without oneDNN\n");
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
