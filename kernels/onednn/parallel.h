#pragma once
// Internal to kernels/onednn/: one contiguous range per thread (OpenMP), for the ops that run
// the reference's loops on all cores. Without OpenMP (a clang build: libdnnl's runtime is GCC's
// libgomp, and clang's libomp must not join it in one process) the ranges run one after another.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <initializer_list>

#include "kernels/cpu/elementwise.h"
#include "kernels/tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

// A loop function compiled for AVX-512, AVX2 and baseline x86-64, the best picked when the program
// loads (GCC's function multi-versioning): the vectorised loops of the native backend. AVX-512 is
// x86-64-v4 (F, BW, DQ, VL), not AVX512F alone, which has no 512-bit ops on 16-bit lanes: the
// bf16 conversions fell back to 256-bit shuffles, 1.7x the time per element.
// MPBENCH_VECTOR_ONLY (e.g. -DMPBENCH_VECTOR_ONLY='"avx2"') builds one of them only, so that an
// AVX-512 machine can test the loops an AVX2-only CPU runs.
// MPBENCH_BF16_HW: a function on AVX512-BF16 intrinsics (bf16_x16 below), called only where
// bf16_conversion_in_hardware(); not in MPBENCH_VECTOR_ONLY builds, which test the loops of CPUs
// without it.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(MPBENCH_VECTOR_ONLY)
#define MPBENCH_BF16_HW_BUILT 1
#define MPBENCH_BF16_HW __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#include <immintrin.h>

#include <cstring>
#endif

#if defined(MPBENCH_VECTOR_ONLY)
#define MPBENCH_VECTOR_CLONES __attribute__((target(MPBENCH_VECTOR_ONLY)))
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MPBENCH_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define MPBENCH_VECTOR_CLONES
#endif

namespace mpbench::onednn {

// Elements per range at the least (a row op: rows times their length): below this, starting a
// thread costs more than it saves.
constexpr int64_t kGrain = 1 << 15;

// Rows of row_length elements per range at the least.
inline int64_t row_grain(int64_t row_length) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, row_length));
}

// The number of ranges parallel_ranges makes of n: what per-range partial sums are sized by.
inline int64_t range_count(int64_t n, int64_t grain) {
#ifdef _OPENMP
  const int64_t threads = omp_get_max_threads();
#else
  const int64_t threads = 1;
#endif
  return std::min(threads, std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
}

// Calls f(part, begin, count) over [0, n) in range_count(n, grain) ranges, up to one per thread,
// each at least `grain` long (a small op stays on one thread, where starting the others would cost
// more than it saves). The first exception a range throws is rethrown here, after all ranges ended.
template <class F>
void parallel_ranges(int64_t n, int64_t grain, F&& f) {
  const int64_t parts = range_count(n, grain);
  if (parts <= 1) {
    if (n > 0) f(int64_t{0}, int64_t{0}, n);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = n * p / parts, end = n * (p + 1) / parts;
    try {
      f(p, begin, end - begin);
    } catch (...) {
#pragma omp critical(mpbench_parallel_ranges)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Calls f(cpu::detail::Elem<t>{}) when every tensor given is fp32, or every one bf16 (null ones
// aside): the loops written for the native dtypes; false, calling nothing, otherwise.
template <class F>
bool one_native_dtype(std::initializer_list<const Tensor*> ts, F&& f) {
  const DType t = (*ts.begin())->dtype;
  for (const Tensor* x : ts)
    if (x && x->dtype != t) return false;
  if (t == DType::F32) {
    f(cpu::detail::Elem<DType::F32>{});
    return true;
  }
  if (t == DType::BF16) {
    f(cpu::detail::Elem<DType::BF16>{});
    return true;
  }
  return false;
}

// da += a, db += b over n elements (per-channel sums of a block of rows, fp32, into the double
// sums of a range), and a, b zeroed for the next block (parallel_ops.cpp).
void add_block_sums(int64_t n, float* a, float* b, double* da, double* db);

// fp32 <-> bf16 with the reference's rounding, bit for bit, in vector clones (parallel_ops.cpp).
void f32_to_bf16_block(const float* s, uint16_t* d, int64_t n);
void bf16_to_f32_block(const uint16_t* s, float* d, int64_t n);
// Whether the vector loops may convert fp32 to bf16 by the CPU's own VCVTNEPS2BF16 (AVX512-BF16):
// built for x86-64, the CPU has it, and so does the ISA oneDNN may use (isa_allows: --cpu-isa may
// cap it below). It rounds to nearest even and quiets NaN as the reference does, but flushes
// denormals to zero, as oneDNN's own bf16 kernels do; one instruction for 16 elements where the
// reference's rounding takes about ten.
bool bf16_conversion_in_hardware(bool isa_allows);

// The r-th row of n elements of t (fp32, bf16 or fp16) as fp32, and back: the reference's
// cpu::load_row / store_row, with the fp32 and bf16 rows in vector loops.
void load_row(const Tensor& t, int64_t r, int64_t n, float* out);
void store_row(const float* in, Tensor& t, int64_t r, int64_t n);

#ifdef MPBENCH_BF16_HW_BUILT
// 16 bf16 lanes (those of mask m; the rest read as 0 and are not written).
namespace bf16_x16 {
MPBENCH_BF16_HW inline __mmask16 mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}
// 16 bf16 bit patterns as fp32 (lanes outside m 0). The maskz forms: GCC 12's plain ones read an
// "undefined" vector it then warns about.
MPBENCH_BF16_HW inline __m512 widen(__m256i bits, __mmask16 m) {
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(m, bits);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(m, wide, 16));
}
MPBENCH_BF16_HW inline __m512 load(const uint16_t* p, __mmask16 m) {
  return widen(_mm256_maskz_loadu_epi16(m, p), m);
}
MPBENCH_BF16_HW inline __m256i to_bf16(__m512 v) {
  const __m256bh h = _mm512_cvtneps_pbh(v);
  __m256i bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}
// A masked store only for a row's last lanes: on Zen 4 one took 40% of a BatchNorm row's time.
MPBENCH_BF16_HW inline void store(uint16_t* p, __mmask16 m, __m512 v) {
  if (m == 0xffff)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16(v));
  else
    _mm256_mask_storeu_epi16(p, m, to_bf16(v));
}
// v rounded to bf16, kept in fp32.
MPBENCH_BF16_HW inline __m512 round(__m512 v) {
  return widen(to_bf16(v), 0xffff);
}
// kernels/relu.h's select: v <= 0 (false for NaN) gives 0.
MPBENCH_BF16_HW inline __m512 relu(__m512 v) {
  const __m512 zero = _mm512_setzero_ps();
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LE_OQ), zero);
}
}  // namespace bf16_x16
#endif

}  // namespace mpbench::onednn
