#pragma once
// Internal to kernels/cpu/: compile-time element access per dtype and the activations, so that the
// hot loops are templates over (dtype, activation) with no per-element switch or indirect call.
#include <cmath>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/dtype.h"
#include "kernels/gelu.h"
#include "kernels/relu.h"

namespace mpbench::cpu::detail {

template <DType D>
struct Elem;
template <>
struct Elem<DType::F32> {
  using T = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};
template <>
struct Elem<DType::F16> {
  using T = uint16_t;
  static float load(uint16_t x) { return f16_to_f32(x); }
  static uint16_t store(float x) { return f32_to_f16(x); }
};
template <>
struct Elem<DType::BF16> {
  using T = uint16_t;
  static float load(uint16_t x) { return bf16_to_f32(x); }
  static uint16_t store(float x) { return f32_to_bf16(x); }
};

// Calls f(Elem<dt>{}) for a float dtype; the caller has already rejected int32 and fp8.
template <class F>
void dispatch_float(DType dt, F&& f) {
  switch (dt) {
    case DType::F32:
      f(Elem<DType::F32>{});
      return;
    case DType::F16:
      f(Elem<DType::F16>{});
      return;
    case DType::BF16:
      f(Elem<DType::BF16>{});
      return;
    case DType::I32:
    case DType::F8E4M3:
    case DType::F8E5M2:
      break;
  }
  throw_runtime(std::string("internal: dispatch_float on ") + dtype_name(dt));
}

// Calls f(ActTag<act>{}); the activation becomes a compile-time constant of the loop.
template <Activation A>
struct ActTag {
  static constexpr Activation value = A;
};
template <class F>
void dispatch_act(Activation act, F&& f) {
  switch (act) {
    case Activation::None:
      f(ActTag<Activation::None>{});
      return;
    case Activation::Relu:
      f(ActTag<Activation::Relu>{});
      return;
    case Activation::Gelu:
      f(ActTag<Activation::Gelu>{});
      return;
  }
  throw_runtime("internal: unknown activation");
}

template <Activation A>
inline float act_forward(float x) {
  if constexpr (A == Activation::Relu) {
    return relu_forward(x);
  } else if constexpr (A == Activation::Gelu) {
    return gelu_from_tanh(x, std::tanh(gelu_arg(x)));
  } else {
    return x;
  }
}

// dx for dy at x. ReLU's is a select (kernels/relu.h); GELU's multiplies by the derivative, as
// PyTorch's gelu_backward does, so an inf dy where GELU' is 0 (x below about -10) is NaN in both.
template <Activation A>
inline float act_backward(float dy, float x) {
  if constexpr (A == Activation::Relu) {
    return relu_backward(dy, x);
  } else if constexpr (A == Activation::Gelu) {
    return dy * gelu_derivative_from_tanh(x, std::tanh(gelu_derivative_arg(x)));
  } else {
    return dy;
  }
}

// dx = act_backward(dy, pre) rounded to the dtype over (rows, n); dx may alias dy, pre is read only
// for an activation. col_sums, when given, gathers dx as stored (rounded), as autocast's bias
// gradient sums the GELU backward's 16-bit output; in double, so that the reference is not itself a
// source of error over many rows.
template <class E, Activation A>
void bias_act_backward_rows(const typename E::T* dy, const typename E::T* pre, typename E::T* dx,
                            int64_t rows, int64_t n, double* col_sums) {
  for (int64_t i = 0; i < rows * n; i += n) {
    for (int64_t j = 0; j < n; ++j) {
      const float d = E::load(dy[i + j]);
      const auto g = E::store(A == Activation::None ? d : act_backward<A>(d, E::load(pre[i + j])));
      if (col_sums) col_sums[j] += E::load(g);
      dx[i + j] = g;
    }
  }
}

}  // namespace mpbench::cpu::detail
