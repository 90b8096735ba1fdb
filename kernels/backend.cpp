// Backend's public ops: every argument check of every op, made once for all backends, then the
// observer's view of the op (its detail, FLOPs and bytes), then the backend's *_impl. What only
// one backend can or must check (CUDA's 32-bit library limits; on the CPU, token and label
// values, which a GPU cannot read without a synchronisation) stays in its implementation.
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <thread>

#include <fmt/format.h>

#include "kernels/backend.h"

namespace mpbench {
namespace {

bool is_float(DType dt) {
  return dt == DType::F32 || dt == DType::F16 || dt == DType::BF16;
}

const char* device_name(Device d) {
  return d == Device::CPU ? "CPU" : "CUDA device";
}

const char* math_name(GemmMath m) {
  switch (m) {
    case GemmMath::Strict:
      return "strict";
    case GemmMath::TF32:
      return "tf32";
    case GemmMath::LowPrecision:
      return "lowp";
  }
  return "?";
}

// The checks of one op's operands; each names the op and the operand.
class Checks {
 public:
  Checks(const char* op, Device device) : op_(op), device_(device) {}

  // Allocated (or empty) and on the backend's device.
  void operand(const Tensor& t, const char* name) const {
    MPB_CHECK(t.defined() || t.numel() == 0, "{}: {} is not allocated", op_, name);
    MPB_CHECK(t.device == device_, "{}: {} is on the {}, the backend runs on the {}", op_, name,
              device_name(t.device), device_name(device_));
  }
  void float_operand(const Tensor& t, const char* name) const {
    operand(t, name);
    MPB_CHECK(is_float(t.dtype), "{}: {} must be a float tensor, got {}", op_, name,
              dtype_name(t.dtype));
  }
  void typed(const Tensor& t, DType dt, const char* name) const {
    operand(t, name);
    MPB_CHECK(t.dtype == dt, "{}: {} is {}, expected {}", op_, name, dtype_name(t.dtype),
              dtype_name(dt));
  }
  // A one-element device scalar (fp32 unless said).
  void scalar(const Tensor& t, const char* name, DType dt = DType::F32) const {
    typed(t, dt, name);
    MPB_CHECK(t.numel() == 1, "{}: {} must be a one-element scalar, got {}", op_, name,
              t.shape.str());
  }
  // An fp32 vector of n elements: norm parameters and statistics (`of`: what n counts).
  void vector(const Tensor& t, int64_t n, const char* name, const char* of) const {
    typed(t, DType::F32, name);
    MPB_CHECK(t.numel() == n, "{}: {} has {} elements {}, expected {} ({})", op_, name, t.numel(),
              t.shape.str(), n, of);
  }
  // A float tensor of x's shape (its own dtype).
  void like(const Tensor& t, const char* name, const Tensor& x, const char* xname) const {
    float_operand(t, name);
    MPB_CHECK(t.shape == x.shape, "{}: {} {} must have the shape of {} {}", op_, name,
              t.shape.str(), xname, x.shape.str());
  }
  // A flat fp32 buffer with master's element count (gradients, optimizer state).
  void flat(const Tensor& t, const Tensor& master, const char* name) const {
    typed(t, DType::F32, name);
    MPB_CHECK(t.numel() == master.numel(), "{}: {} has {} elements, the master weights {}", op_,
              name, t.numel(), master.numel());
  }
  // The optional fp16/bf16 copy of the master weights.
  void lowp_copy(const Tensor* t, const Tensor& master) const {
    if (!t) return;
    operand(*t, "weights_lowp");
    MPB_CHECK((t->dtype == DType::F16 || t->dtype == DType::BF16) && t->numel() == master.numel(),
              "{}: weights_lowp must be fp16 or bf16 with {} elements, got {} {}", op_,
              master.numel(), dtype_name(t->dtype), t->shape.str());
  }
  void optional_scalar(const Tensor* t, const char* name) const {
    if (t) scalar(*t, name);
  }
  // Elementwise ops may write out over in only in in's dtype: with another element size the
  // writes would overrun elements of in not read yet.
  void in_place(const Tensor& out, const char* name, const Tensor& in, const char* in_name) const {
    MPB_CHECK(out.data != in.data || out.dtype == in.dtype, "{}: {} aliases {} with another dtype",
              op_, name, in_name);
  }

 private:
  const char* op_;
  Device device_;
};

std::string shape_dtype(const Tensor& t) {
  return fmt::format("{} {}", t.shape.str(), dtype_name(t.dtype));
}

// The bytes an op must move at the least: each tensor it reads or writes once per read and per
// write (a tensor read and written back is listed twice), nullptr for one it does not touch.
// Against the time, the bandwidth it achieved: what judges a memory-bound op.
double nbytes(std::initializer_list<const Tensor*> tensors) {
  double b = 0;
  for (const Tensor* t : tensors)
    if (t) b += static_cast<double>(t->bytes());
  return b;
}

// ---- gemm ------------------------------------------------------------------------------------

// The FP8 rules of GemmDesc: dtypes, scales, the "TN" layout and the sizes cuBLASLt takes.
void check_fp8_gemm(const Checks& ck, const GemmDesc& d, const GemmGeom& g, const Tensor& a,
                    const Tensor& b, const Tensor& c) {
  MPB_CHECK(
      is_fp8(a.dtype) && is_fp8(b.dtype) && !(a.dtype == DType::F8E5M2 && b.dtype == DType::F8E5M2),
      "gemm: FP8 operands must be fp8_e4m3 or fp8_e5m2, not both e5m2, got {} and {}",
      dtype_name(a.dtype), dtype_name(b.dtype));
  MPB_CHECK(d.a_scale_inv && d.b_scale_inv, "gemm: FP8 operands need a_scale_inv and b_scale_inv");
  ck.scalar(*d.a_scale_inv, "a_scale_inv");
  ck.scalar(*d.b_scale_inv, "b_scale_inv");
  MPB_CHECK(c.dtype == DType::BF16 || c.dtype == DType::F32,
            "gemm: an FP8 GEMM writes bf16 or fp32, got {}", dtype_name(c.dtype));
  MPB_CHECK(!d.trans_a && d.trans_b,
            "gemm: an FP8 GEMM takes A (M, K) and B stored (N, K) (trans_a false, trans_b true)");
  MPB_CHECK(g.batch == 1 && d.beta == 0.0f, "gemm: an FP8 GEMM takes no batch and beta 0");
  MPB_CHECK(d.math == GemmMath::LowPrecision, "gemm: an FP8 GEMM needs math lowp, got {}",
            math_name(d.math));
  MPB_CHECK(fp8_gemm_fits(g.m, g.n, g.k),
            "gemm: an FP8 GEMM needs M, N, K multiples of 16, got {}x{}x{}", g.m, g.n, g.k);
}

GemmGeom check_gemm(const Checks& ck, const GemmDesc& d, const Tensor& a, const Tensor& b,
                    const Tensor& c) {
  ck.operand(a, "A");
  ck.operand(b, "B");
  ck.operand(c, "C");
  const int rank = c.shape.rank;
  MPB_CHECK((rank == 2 || rank == 3) && a.shape.rank == rank && b.shape.rank == rank,
            "gemm: A {}, B {}, C {} must all be rank 2, or all rank 3 (batched)", a.shape.str(),
            b.shape.str(), c.shape.str());
  GemmGeom g;
  if (rank == 3) {
    g.batch = c.shape[0];
    MPB_CHECK(a.shape[0] == g.batch && b.shape[0] == g.batch,
              "gemm: batch sizes differ: A {}, B {}, C {}", a.shape.str(), b.shape.str(),
              c.shape.str());
  }
  const int64_t a_rows = a.shape[-2], a_cols = a.shape[-1];
  const int64_t b_rows = b.shape[-2], b_cols = b.shape[-1];
  g.m = d.trans_a ? a_cols : a_rows;
  const int64_t k_a = d.trans_a ? a_rows : a_cols;
  g.k = d.trans_b ? b_cols : b_rows;
  g.n = d.trans_b ? b_rows : b_cols;
  MPB_CHECK(k_a == g.k,
            "gemm: inner dimensions differ: op(A) is {}x{}, op(B) is {}x{} (A {}{}, B {}{})", g.m,
            k_a, g.k, g.n, a.shape.str(), d.trans_a ? "^T" : "", b.shape.str(),
            d.trans_b ? "^T" : "");
  MPB_CHECK(c.shape[-2] == g.m && c.shape[-1] == g.n, "gemm: C is {}, op(A) op(B) is ({}, {})",
            c.shape.str(), g.m, g.n);
  MPB_CHECK(g.batch > 0 && g.m > 0 && g.n > 0 && g.k > 0, "gemm: empty operand A {}, B {}, C {}",
            a.shape.str(), b.shape.str(), c.shape.str());

  const bool fp8 = is_fp8(a.dtype) || is_fp8(b.dtype) || d.a_scale_inv || d.b_scale_inv;
  if (fp8) {
    check_fp8_gemm(ck, d, g, a, b, c);
  } else {
    MPB_CHECK(is_float(a.dtype) && a.dtype == b.dtype,
              "gemm: A and B must share a float dtype, got {} and {}", dtype_name(a.dtype),
              dtype_name(b.dtype));
    MPB_CHECK(c.dtype == a.dtype || c.dtype == DType::F32, "gemm: C must be {} or fp32, got {}",
              dtype_name(a.dtype), dtype_name(c.dtype));
  }
  MPB_CHECK(d.math != GemmMath::LowPrecision || a.dtype != DType::F32,
            "gemm: math {} needs fp16/bf16/fp8 operands, got fp32", math_name(d.math));
  MPB_CHECK(d.math != GemmMath::TF32 || a.dtype == DType::F32,
            "gemm: math {} needs fp32 operands, got {}", math_name(d.math), dtype_name(a.dtype));

  // (With pre_act too: where the matmul writes the pre-activation, C's old values are not there.)
  const bool epilogue = d.bias != nullptr || d.act != Activation::None || d.pre_act != nullptr;
  MPB_CHECK(!epilogue || d.beta == 0.0f,
            "gemm: beta must be 0 with a bias, activation or pre_act, got {}", d.beta);
  if (d.bias) {
    const Tensor& bias = *d.bias;
    ck.operand(bias, "bias");
    MPB_CHECK(bias.numel() == g.n, "gemm: bias has {} elements {}, C has {} columns", bias.numel(),
              bias.shape.str(), g.n);
    if (fp8) {
      MPB_CHECK(bias.dtype == DType::BF16, "gemm: an FP8 GEMM's bias must be bf16, got {}",
                dtype_name(bias.dtype));
    } else {
      MPB_CHECK(bias.dtype == c.dtype || bias.dtype == DType::F32,
                "gemm: bias must be fp32 or C's dtype {}, got {}", dtype_name(c.dtype),
                dtype_name(bias.dtype));
    }
  }
  if (d.pre_act) {
    const Tensor& p = *d.pre_act;
    ck.operand(p, "pre_act");
    MPB_CHECK(p.shape == c.shape && p.dtype == c.dtype, "gemm: pre_act {} {} must match C {} {}",
              dtype_name(p.dtype), p.shape.str(), dtype_name(c.dtype), c.shape.str());
  }

  const bool backward = d.dact != Activation::None || d.dact_input || d.dbias;
  MPB_CHECK(!fp8 || !backward, "gemm: an FP8 GEMM takes no backward epilogue (dact, dbias)");
  if (backward) {
    MPB_CHECK(!epilogue,
              "gemm: the backward epilogue (dact, dact_input, dbias) excludes bias, act and "
              "pre_act");
    MPB_CHECK(d.beta == 0.0f, "gemm: beta must be 0 with the backward epilogue, got {}", d.beta);
    MPB_CHECK((d.dact != Activation::None) == (d.dact_input != nullptr),
              "gemm: dact {} needs dact_input, and dact_input needs an activation",
              activation_name(d.dact));
  }
  if (d.dact_input) {
    const Tensor& p = *d.dact_input;
    ck.operand(p, "dact_input");
    MPB_CHECK(p.shape == c.shape && p.dtype == c.dtype, "gemm: dact_input {} {} must match C {} {}",
              dtype_name(p.dtype), p.shape.str(), dtype_name(c.dtype), c.shape.str());
  }
  if (d.dbias) {
    const Tensor& db = *d.dbias;
    ck.operand(db, "dbias");
    MPB_CHECK(db.dtype == DType::F32 && db.numel() == g.n,
              "gemm: dbias must be fp32 with {} elements (C's columns), got {} {}", g.n,
              dtype_name(db.dtype), db.shape.str());
  }
  return g;
}

// The sizes as the profiler names them; unchecked, so that a test can name any shapes.
GemmGeom gemm_sizes(const GemmDesc& d, const Tensor& a, const Tensor& c) {
  GemmGeom s;
  if (c.shape.rank < 2 || a.shape.rank < 2) return s;
  s.m = c.shape[-2];
  s.n = c.shape[-1];
  s.k = d.trans_a ? a.shape[-2] : a.shape[-1];
  s.batch = c.shape.rank == 3 ? c.shape[0] : 1;
  return s;
}

// ---- convolutions ----------------------------------------------------------------------------

// xn, wn, yn name the three as the op calls them (dx, dw, dy in the backward passes).
ConvGeom check_conv(const char* op, Device device, const ConvDesc& d, const Tensor& x,
                    const char* xn, const Tensor& w, const char* wn, const Tensor& y,
                    const char* yn) {
  const Checks ck(op, device);
  ck.operand(x, xn);
  ck.operand(w, wn);
  ck.operand(y, yn);
  MPB_CHECK(is_float(x.dtype), "{}: {} must be a float tensor, got {}", op, xn,
            dtype_name(x.dtype));
  MPB_CHECK(w.dtype == x.dtype && y.dtype == x.dtype, "{}: {} {}, {} {}, {} {} must share a dtype",
            op, xn, dtype_name(x.dtype), wn, dtype_name(w.dtype), yn, dtype_name(y.dtype));
  MPB_CHECK(x.shape.rank == 4 && w.shape.rank == 4 && y.shape.rank == 4,
            "{}: {} {}, {} {}, {} {} must be rank 4 (NHWC, KRSC, NPQK)", op, xn, x.shape.str(), wn,
            w.shape.str(), yn, y.shape.str());
  MPB_CHECK(d.stride >= 1 && d.pad >= 0, "{}: stride {} must be >= 1 and pad {} >= 0", op, d.stride,
            d.pad);
  ConvGeom g{};
  g.n = x.shape[0], g.h = x.shape[1], g.w = x.shape[2], g.c = x.shape[3];
  g.k = w.shape[0], g.r = w.shape[1], g.s = w.shape[2];
  g.stride = d.stride, g.pad = d.pad;
  MPB_CHECK(g.n > 0 && g.h > 0 && g.w > 0 && g.c > 0 && g.k > 0 && g.r > 0 && g.s > 0,
            "{}: empty operand {} {}, {} {}", op, xn, x.shape.str(), wn, w.shape.str());
  MPB_CHECK(w.shape[3] == g.c, "{}: {} {} has {} input channels, {} {} has {}", op, wn,
            w.shape.str(), w.shape[3], xn, x.shape.str(), g.c);
  MPB_CHECK(g.h + 2 * g.pad >= g.r && g.w + 2 * g.pad >= g.s,
            "{}: filter {}x{} is larger than the padded input {}x{}", op, g.r, g.s, g.h + 2 * g.pad,
            g.w + 2 * g.pad);
  g.p = (g.h + 2 * g.pad - g.r) / g.stride + 1;
  g.q = (g.w + 2 * g.pad - g.s) / g.stride + 1;
  MPB_CHECK(y.shape[0] == g.n && y.shape[1] == g.p && y.shape[2] == g.q && y.shape[3] == g.k,
            "{}: {} is {}, expected ({}, {}, {}, {}) for {} {}, {} {}, stride {}, pad {}", op, yn,
            y.shape.str(), g.n, g.p, g.q, g.k, xn, x.shape.str(), wn, w.shape.str(), g.stride,
            g.pad);
  MPB_CHECK(d.math != GemmMath::LowPrecision || x.dtype != DType::F32,
            "{}: low-precision math needs fp16/bf16 operands, got fp32", op);
  MPB_CHECK(d.math != GemmMath::TF32 || x.dtype == DType::F32,
            "{}: TF32 math needs fp32 operands, got {}", op, dtype_name(x.dtype));
  return g;
}

// "(256, 56, 56, 64) k64 3x3/s1 bf16": the input (or dy) shape, the filter, the dtype.
std::string conv_detail(const ConvDesc& d, const Tensor& act, const Tensor& w) {
  return fmt::format("{} k{} {}x{}/s{} {}", act.shape.str(), w.shape[0], w.shape[1], w.shape[2],
                     d.stride, dtype_name(act.dtype));
}

// ---- the row-wise ops ------------------------------------------------------------------------

// x of a normalisation: a float (rows, C) with at least one value.
void check_rows(const Checks& ck, const char* op, const Tensor& x) {
  ck.float_operand(x, "x");
  MPB_CHECK(x.shape.rank >= 1 && x.numel() > 0, "{}: x {} must be a non-empty (rows, C)", op,
            x.shape.str());
}

void check_batchnorm_forward(const Checks& ck, const char* op, const Tensor& x,
                             const Tensor* residual, const Tensor& gamma, const Tensor& beta,
                             const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& y) {
  check_rows(ck, op, x);
  const int64_t c = x.cols();
  if (residual) ck.like(*residual, "residual", x, "x");
  ck.like(y, "y", x, "x");
  ck.vector(gamma, c, "gamma", "channels");
  ck.vector(beta, c, "beta", "channels");
  ck.vector(running_mean, c, "running_mean", "channels");
  ck.vector(running_var, c, "running_var", "channels");
}

// (batch, S, S), float, S > 0: attention scores and probabilities.
void check_square(const Checks& ck, const char* op, const Tensor& t, const char* name) {
  ck.float_operand(t, name);
  MPB_CHECK(t.shape.rank == 3 && t.shape[1] == t.shape[2] && t.shape[1] > 0,
            "{}: {} must be (batch, S, S), got {}", op, name, t.shape.str());
}

// x (N, HW, C) and y (N, C) of a global average pool.
void check_pool(const Checks& ck, const char* op, const Tensor& x, const char* xn, const Tensor& y,
                const char* yn) {
  ck.float_operand(x, xn);
  ck.float_operand(y, yn);
  MPB_CHECK(x.shape.rank == 3 && y.shape.rank == 2 && x.shape[0] == y.shape[0] &&
                x.shape[2] == y.shape[1] && x.shape[1] > 0,
            "{}: {} {} must be (N, HW, C) and {} {} (N, C)", op, xn, x.shape.str(), yn,
            y.shape.str());
}

// x (N, H, W, C) and y (N, P, Q, C) of a max pool, one float dtype, y of the output shape.
void check_maxpool(const Checks& ck, const char* op, const PoolDesc& d, const Tensor& x,
                   const char* xn, const Tensor& y, const char* yn) {
  ck.float_operand(x, xn);
  ck.typed(y, x.dtype, yn);
  MPB_CHECK(d.kernel >= 1 && d.stride >= 1 && d.pad >= 0 && 2 * d.pad <= d.kernel,
            "{}: kernel {} and stride {} must be >= 1, pad {} in [0, kernel / 2]", op, d.kernel,
            d.stride, d.pad);
  MPB_CHECK(x.shape.rank == 4 && x.numel() > 0, "{}: {} must be a non-empty (N, H, W, C), got {}",
            op, xn, x.shape.str());
  MPB_CHECK(x.shape[1] + 2 * d.pad >= d.kernel && x.shape[2] + 2 * d.pad >= d.kernel,
            "{}: the {}x{} window is larger than the padded input {}", op, d.kernel, d.kernel,
            x.shape.str());
  const int64_t p = (x.shape[1] + 2 * d.pad - d.kernel) / d.stride + 1;
  const int64_t q = (x.shape[2] + 2 * d.pad - d.kernel) / d.stride + 1;
  MPB_CHECK(y.shape == (Shape{x.shape[0], p, q, x.shape[3]}),
            "{}: {} is {}, expected ({}, {}, {}, {}) for {} {}, {}x{}/s{} pad {}", op, yn,
            y.shape.str(), x.shape[0], p, q, x.shape[3], xn, x.shape.str(), d.kernel, d.kernel,
            d.stride, d.pad);
}

std::string pool_detail(const PoolDesc& d, const Tensor& x) {
  return fmt::format("{} {}x{}/s{} {}", x.shape.str(), d.kernel, d.kernel, d.stride,
                     dtype_name(x.dtype));
}

// tokens (B, S) int32, tables (V, D) and (P >= S, D) fp32, y (B*S, D) float.
EmbeddingGeom check_embedding(const Checks& ck, const char* op, const Tensor& tokens,
                              const Tensor& tok_emb, const Tensor& pos_emb, const Tensor& y,
                              const char* y_name) {
  ck.typed(tokens, DType::I32, "tokens");
  ck.typed(tok_emb, DType::F32, "the token table");
  ck.typed(pos_emb, DType::F32, "the position table");
  ck.float_operand(y, y_name);
  MPB_CHECK(tokens.shape.rank == 2, "{}: tokens must be (B, S), got {}", op, tokens.shape.str());
  MPB_CHECK(tok_emb.shape.rank == 2 && pos_emb.shape.rank == 2,
            "{}: token table {} and position table {} must be (rows, D)", op, tok_emb.shape.str(),
            pos_emb.shape.str());
  const int64_t batch = tokens.shape[0], seq = tokens.shape[1], dim = tok_emb.shape[1];
  MPB_CHECK(pos_emb.shape[1] == dim, "{}: position table {} and token table {} differ in D", op,
            pos_emb.shape.str(), tok_emb.shape.str());
  MPB_CHECK(pos_emb.shape[0] >= seq,
            "{}: position table {} has fewer rows than the sequence length {}", op,
            pos_emb.shape.str(), seq);
  MPB_CHECK(y.shape.rank >= 2 && y.cols() == dim && y.rows() == batch * seq,
            "{}: {} {} must be (B*S, D) = ({}, {})", op, y_name, y.shape.str(), batch * seq, dim);
  return {batch, seq, tok_emb.shape[0], pos_emb.shape[0], dim};
}

}  // namespace

// ---- the observer ----------------------------------------------------------------------------

template <typename Describe, typename Impl>
void Backend::observed(Describe&& describe, Impl&& impl) {
  if (!observer_ || !observer_->observing()) {
    impl();
    return;
  }
  observer_->op_begin(describe());
  last_kernel_.clear();
  impl();
  observer_->op_end();
}

void Backend::run_as_op(const OpCall& call, const std::function<void()>& fn) {
  if (!observer_ || !observer_->observing()) return fn();
  OpObserver* const observer = observer_;
  observer->op_begin(call);
  last_kernel_.clear();
  // The ops fn calls are not observed apart (the observer brackets one op at a time).
  struct Reattach {
    Backend& be;
    OpObserver* observer;
    ~Reattach() { be.observer_ = observer; }
  } reattach{*this, observer};
  observer_ = nullptr;
  fn();
  observer->op_end();
}

std::string gemm_detail(const GemmDesc& d, const Tensor& a, const Tensor& c) {
  const GemmGeom s = gemm_sizes(d, a, c);
  std::string out = fmt::format("{}x{}x{}", s.m, s.n, s.k);
  if (s.batch > 1) out += fmt::format(" b{}", s.batch);
  out += fmt::format(" {}", dtype_name(a.dtype));
  if (is_fp8(a.dtype) && c.dtype != a.dtype) out += "/fp8";  // B's fp8 format may differ from A's
  if (c.dtype != a.dtype) out += fmt::format("->{}", dtype_name(c.dtype));
  if (d.math == GemmMath::TF32) out += " tf32";
  if (d.bias) out += " +bias";
  if (d.act != Activation::None) out += fmt::format(" +{}", activation_name(d.act));
  if (d.dact != Activation::None) out += fmt::format(" d{}", activation_name(d.dact));
  if (d.dbias) out += " +dbias";
  return out;
}

double gemm_flops(const GemmDesc& d, const Tensor& a, const Tensor& c) {
  const GemmGeom s = gemm_sizes(d, a, c);
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) *
         static_cast<double>(s.batch);
}

// ---- memory and transfers --------------------------------------------------------------------

void Backend::fill(Tensor& t, float value) {
  Checks("fill", device()).operand(t, "t");
  // Converting NaN or an out-of-range float to int is undefined behaviour, not a value; NaN
  // fails both comparisons.
  MPB_CHECK(t.dtype != DType::I32 || (value >= -2147483648.0f && value < 2147483648.0f),
            "fill: {} does not fit an int32 tensor", value);
  MPB_CHECK(!is_fp8(t.dtype), "fill: {} tensors are written by cast_to_fp8", dtype_name(t.dtype));
  observed(
      [&] {
        return OpCall{"fill", shape_dtype(t), 0, nbytes({&t})};
      },
      [&] { fill_impl(t, value); });
}

void Backend::copy(const Tensor& src, Tensor& dst) {
  const Checks ck("copy", device());
  ck.operand(src, "src");
  ck.operand(dst, "dst");
  MPB_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel(),
            "copy: {} {} into {} {}: dtype and element count must match", dtype_name(src.dtype),
            src.shape.str(), dtype_name(dst.dtype), dst.shape.str());
  observed(
      [&] {
        return OpCall{"copy", shape_dtype(src), 0, nbytes({&src, &dst})};
      },
      [&] { copy_impl(src, dst); });
}

// Transfers are not ops of a step: they are not observed.
void Backend::upload(const void* host, Tensor& dst) {
  Checks("upload", device()).operand(dst, "dst");
  MPB_CHECK(host != nullptr || dst.bytes() == 0, "upload: null host pointer");
  if (dst.bytes()) upload_impl(host, dst);
}

void Backend::download(const Tensor& src, void* host) {
  Checks("download", device()).operand(src, "src");
  MPB_CHECK(host != nullptr || src.bytes() == 0, "download: null host pointer");
  if (src.bytes()) download_impl(src, host);
}

// ---- ops -------------------------------------------------------------------------------------

// GEMMs are judged by FLOPs; their bytes are left out (0), as for convolutions.
void Backend::gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c) {
  const GemmGeom g = check_gemm(Checks("gemm", device()), d, a, b, c);
  observed(
      [&] {
        return OpCall{"gemm", gemm_detail(d, a, c), gemm_flops(d, a, c), 0};
      },
      [&] { gemm_impl(d, g, a, b, c); });
}

void Backend::bias_act_backward(Activation act, const Tensor& dy, const Tensor& pre_act, Tensor& dx,
                                Tensor* dbias) {
  const char* op = "bias_act_backward";
  const Checks ck(op, device());
  ck.float_operand(dy, "dy");
  ck.typed(pre_act, dy.dtype, "pre_act");
  ck.typed(dx, dy.dtype, "dx");
  MPB_CHECK(dy.shape.rank >= 1 && pre_act.shape == dy.shape && dx.shape == dy.shape,
            "{}: dy {}, pre_act {}, dx {} must have one shape", op, dy.shape.str(),
            pre_act.shape.str(), dx.shape.str());
  if (dbias) ck.vector(*dbias, dy.cols(), "dbias", "dy's columns");
  observed(
      [&] {
        return OpCall{
            op,
            fmt::format("{} {}{}", shape_dtype(dy), activation_name(act), dbias ? " +dbias" : ""),
            0, nbytes({&dy, act == Activation::None ? nullptr : &pre_act, &dx, dbias})};
      },
      [&] { bias_act_backward_impl(act, dy, pre_act, dx, dbias); });
}

void Backend::softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                           const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                           int64_t grad_rows) {
  const char* op = "softmax_xent";
  const Checks ck(op, device());
  ck.typed(logits, DType::F32, "logits");
  ck.typed(labels, DType::I32, "labels");
  ck.scalar(loss_sum, "loss_sum");
  ck.scalar(correct, "correct");
  ck.optional_scalar(grad_scale, "grad_scale");
  MPB_CHECK(logits.shape.rank == 2 && logits.numel() > 0,
            "{}: logits must be a non-empty (N, C), got {}", op, logits.shape.str());
  MPB_CHECK(labels.numel() == logits.shape[0], "{}: {} labels for logits {}", op, labels.numel(),
            logits.shape.str());
  MPB_CHECK(grad_rows == 0 || grad_rows >= logits.shape[0],
            "{}: the gradient divided by {} rows, fewer than the logits' {}", op, grad_rows,
            logits.shape[0]);
  if (grad_rows == 0) grad_rows = logits.shape[0];
  if (dlogits) {
    ck.like(*dlogits, "dlogits", logits, "logits");
    ck.in_place(*dlogits, "dlogits", logits, "logits");
  }
  observed(
      [&] {
        return OpCall{op, shape_dtype(logits), 0, nbytes({&logits, &labels, dlogits})};
      },
      [&] {
        softmax_xent_impl(logits, labels, dlogits, grad_scale, loss_sum, correct, grad_rows);
      });
}

void Backend::cast(const Tensor& src, Tensor& dst) {
  const Checks ck("cast", device());
  ck.float_operand(src, "src");
  ck.float_operand(dst, "dst");
  MPB_CHECK(src.numel() == dst.numel(), "cast: {} elements {} into {} elements {}",
            dtype_name(src.dtype), src.shape.str(), dtype_name(dst.dtype), dst.shape.str());
  // In place between sizes, parallel loops would overwrite elements other threads still read.
  MPB_CHECK(dst.data != src.data || dtype_size(dst.dtype) == dtype_size(src.dtype),
            "cast: dst aliases src with another element size");
  observed(
      [&] {
        return OpCall{"cast", fmt::format("{}->{}", shape_dtype(src), dtype_name(dst.dtype)), 0,
                      nbytes({&src, &dst})};
      },
      [&] { cast_impl(src, dst); });
}

void Backend::round_to(Tensor& t, DType to) {
  const Checks ck("round_to", device());
  ck.float_operand(t, "t");
  MPB_CHECK(t.dtype == DType::F32 && (to == DType::BF16 || to == DType::F16),
            "round_to: {} to {}: fp32 to bf16 or fp16 only", dtype_name(t.dtype), dtype_name(to));
  observed(
      [&] {
        return OpCall{"round_to", fmt::format("{}->{}", shape_dtype(t), dtype_name(to)), 0,
                      nbytes({&t, &t})};
      },
      [&] { round_to_impl(t, to); });
}

void Backend::cast_to_fp8(const Tensor& src, const Tensor& scale, Tensor* amax, Tensor& dst,
                          Tensor* dst_t) {
  const char* op = "cast_to_fp8";
  const Checks ck(op, device());
  ck.float_operand(src, "src");
  ck.operand(dst, "dst");
  MPB_CHECK(is_fp8(dst.dtype), "{}: dst must be fp8_e4m3 or fp8_e5m2, got {}", op,
            dtype_name(dst.dtype));
  MPB_CHECK(dst.shape == src.shape, "{}: dst {} must have src's shape {}", op, dst.shape.str(),
            src.shape.str());
  ck.scalar(scale, "scale");
  ck.optional_scalar(amax, "amax");
  if (dst_t) {
    ck.typed(*dst_t, dst.dtype, "dst_t");
    MPB_CHECK(src.shape.rank == 2 && dst_t->shape == (Shape{src.shape[1], src.shape[0]}),
              "{}: dst_t {} must be src {} transposed", op, dst_t->shape.str(), src.shape.str());
  }
  observed(
      [&] {
        return OpCall{
            op,
            fmt::format("{}->{}{}", shape_dtype(src), dtype_name(dst.dtype), dst_t ? " +T" : ""), 0,
            nbytes({&src, &dst, dst_t})};
      },
      [&] { cast_to_fp8_impl(src, scale, amax, dst, dst_t); });
}

void Backend::fp8_update_scaling(const DelayedScalingRecipe& r, DType format, Tensor& history,
                                 Tensor& scale, Tensor& scale_inv, Tensor& amax_used) {
  const char* op = "fp8_update_scaling";
  const Checks ck(op, device());
  MPB_CHECK(is_fp8(format), "{}: format must be fp8_e4m3 or fp8_e5m2, got {}", op,
            dtype_name(format));
  MPB_CHECK(r.amax_history_len >= 1 && r.margin >= 0, "{}: history length {} and margin {}", op,
            r.amax_history_len, r.margin);
  ck.typed(history, DType::F32, "history");
  const int64_t t = scale.numel();
  MPB_CHECK(
      history.shape.rank == 2 && history.shape[0] == r.amax_history_len && history.shape[1] == t,
      "{}: history {} must be ({}, {}): the recipe's slots, a column per tensor", op,
      history.shape.str(), r.amax_history_len, t);
  ck.vector(scale, t, "scale", "tensors");
  ck.vector(scale_inv, t, "scale_inv", "tensors");
  ck.vector(amax_used, t, "amax_used", "tensors");
  observed(
      [&] {
        return OpCall{op, fmt::format("{} {}", history.shape.str(), dtype_name(format)), 0,
                      nbytes({&history, &history, &scale, &scale, &scale_inv, &amax_used})};
      },
      [&] { fp8_update_scaling_impl(r, format, history, scale, scale_inv, amax_used); });
}

// Read, and written back when unscaled.
void Backend::unscale_check_norm(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                                 Tensor& norm) {
  const char* op = "unscale_check_norm";
  const Checks ck(op, device());
  ck.typed(grads, DType::F32, "grads");
  ck.optional_scalar(scale, "scale");
  ck.scalar(found_inf, "found_inf");
  ck.scalar(norm, "norm");
  observed(
      [&] {
        return OpCall{op, shape_dtype(grads), 0, nbytes({&grads, scale ? &grads : nullptr})};
      },
      [&] { unscale_check_norm_impl(grads, scale, found_inf, norm); });
}

// Master, m and v read and written, the gradients read, the 16-bit copy written.
void Backend::adamw_step(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m,
                         Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                         const Tensor* found_inf) {
  const char* op = "adamw_step";
  const Checks ck(op, device());
  ck.typed(master, DType::F32, "master");
  ck.flat(grads, master, "grads");
  ck.flat(m, master, "m");
  ck.flat(v, master, "v");
  ck.lowp_copy(weights_lowp, master);
  ck.scalar(step_count, "step_count");
  ck.optional_scalar(found_inf, "found_inf");
  observed(
      [&] {
        return OpCall{op, shape_dtype(master), 0,
                      nbytes({&master, &master, &grads, &m, &m, &v, &v, weights_lowp})};
      },
      [&] { adamw_step_impl(p, master, grads, m, v, weights_lowp, step_count, found_inf); });
}

void Backend::sgd_step(const SgdParams& p, Tensor& master, const Tensor& grads,
                       Tensor& momentum_buf, Tensor* weights_lowp, const Tensor* found_inf) {
  const char* op = "sgd_step";
  const Checks ck(op, device());
  ck.typed(master, DType::F32, "master");
  ck.flat(grads, master, "grads");
  MPB_CHECK(!p.nesterov || p.momentum > 0.0f, "{}: nesterov needs momentum > 0, got {}", op,
            p.momentum);
  // Without momentum PyTorch keeps no buffer, so none is required here.
  const bool with_buffer = p.momentum != 0.0f;
  if (with_buffer) ck.flat(momentum_buf, master, "momentum_buf");
  ck.lowp_copy(weights_lowp, master);
  ck.optional_scalar(found_inf, "found_inf");
  observed(
      [&] {
        const Tensor* mom = with_buffer ? &momentum_buf : nullptr;
        return OpCall{op, shape_dtype(master), 0,
                      nbytes({&master, &master, &grads, mom, mom, weights_lowp})};
      },
      [&] { sgd_step_impl(p, master, grads, momentum_buf, weights_lowp, found_inf); });
}

void Backend::update_loss_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                                double growth_factor, double backoff_factor,
                                int32_t growth_interval) {
  const char* op = "update_loss_scale";
  const Checks ck(op, device());
  ck.scalar(scale, "scale");
  ck.scalar(growth_tracker, "growth_tracker", DType::I32);
  ck.scalar(found_inf, "found_inf");
  MPB_CHECK(growth_interval > 0, "{}: growth_interval must be > 0, got {}", op, growth_interval);
  observed(
      [&] {
        return OpCall{op, "", 0, 0};
      },
      [&] {
        update_loss_scale_impl(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                               growth_interval);
      });
}

void Backend::count_step(Tensor& step_count, const Tensor* found_inf) {
  const Checks ck("count_step", device());
  ck.scalar(step_count, "step_count");
  ck.optional_scalar(found_inf, "found_inf");
  observed(
      [&] {
        return OpCall{"count_step", "", 0, 0};
      },
      [&] { count_step_impl(step_count, found_inf); });
}

void Backend::conv2d_forward(const ConvDesc& d, const Tensor& x, const Tensor& w, Tensor& y) {
  const char* op = "conv2d_forward";
  const ConvGeom g = check_conv(op, device(), d, x, "x", w, "w", y, "y");
  observed(
      [&] {
        return OpCall{op, conv_detail(d, x, w), conv_flops(g), 0};
      },
      [&] { conv2d_forward_impl(d, g, x, w, y); });
}

void Backend::conv2d_backward_data(const ConvDesc& d, const Tensor& dy, const Tensor& w,
                                   Tensor& dx) {
  const char* op = "conv2d_backward_data";
  const ConvGeom g = check_conv(op, device(), d, dx, "dx", w, "w", dy, "dy");
  observed(
      [&] {
        return OpCall{op, conv_detail(d, dx, w), conv_flops(g), 0};
      },
      [&] { conv2d_backward_data_impl(d, g, dy, w, dx); });
}

void Backend::conv2d_backward_filter(const ConvDesc& d, const Tensor& x, const Tensor& dy,
                                     Tensor& dw) {
  const char* op = "conv2d_backward_filter";
  const ConvGeom g = check_conv(op, device(), d, x, "x", dw, "dw", dy, "dy");
  observed(
      [&] {
        return OpCall{op, conv_detail(d, x, dw), conv_flops(g), 0};
      },
      [&] { conv2d_backward_filter_impl(d, g, x, dy, dw); });
}

void Backend::batchnorm_forward_train(const BatchNormDesc& d, const Tensor& x,
                                      const Tensor* residual, const Tensor& gamma,
                                      const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                                      Tensor& save_mean, Tensor& save_rstd, Tensor& y) {
  const char* op = "batchnorm_forward_train";
  const Checks ck(op, device());
  check_batchnorm_forward(ck, op, x, residual, gamma, beta, running_mean, running_var, y);
  ck.vector(save_mean, x.cols(), "save_mean", "channels");
  ck.vector(save_rstd, x.cols(), "save_rstd", "channels");
  // As in PyTorch: one value per channel has no variance to normalise by.
  MPB_CHECK(x.rows() > 1, "{}: training needs more than one value per channel, x is {}", op,
            x.shape.str());
  // eps 0 would divide by a zero variance; a momentum outside [0, 1] extrapolates.
  MPB_CHECK(d.eps > 0.0f && d.momentum >= 0.0f && d.momentum <= 1.0f,
            "{}: eps {} must be > 0 and momentum {} in [0, 1]", op, d.eps, d.momentum);
  observed(
      [&] {
        return OpCall{op,
                      fmt::format("{}{}{}", shape_dtype(x), residual ? " +residual" : "",
                                  d.relu ? " +relu" : ""),
                      0, nbytes({&x, residual, &y})};
      },
      [&] {
        batchnorm_forward_train_impl(d, x, residual, gamma, beta, running_mean, running_var,
                                     save_mean, save_rstd, y);
      });
}

void Backend::batchnorm_forward_eval(const BatchNormDesc& d, const Tensor& x,
                                     const Tensor* residual, const Tensor& gamma,
                                     const Tensor& beta, const Tensor& running_mean,
                                     const Tensor& running_var, Tensor& y) {
  const char* op = "batchnorm_forward_eval";
  const Checks ck(op, device());
  check_batchnorm_forward(ck, op, x, residual, gamma, beta, running_mean, running_var, y);
  MPB_CHECK(d.eps > 0.0f, "{}: eps {} must be > 0", op, d.eps);
  observed(
      [&] {
        return OpCall{op, shape_dtype(x), 0, nbytes({&x, residual, &y})};
      },
      [&] {
        batchnorm_forward_eval_impl(d, x, residual, gamma, beta, running_mean, running_var, y);
      });
}

void Backend::batchnorm_backward(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                                 const Tensor& gamma, const Tensor& save_mean,
                                 const Tensor& save_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                 Tensor* d_pre) {
  const char* op = "batchnorm_backward";
  const Checks ck(op, device());
  check_rows(ck, op, x);
  const int64_t c = x.cols();
  ck.like(dy, "dy", x, "x");
  if (relu_out) ck.like(*relu_out, "relu_out", x, "x");
  ck.like(dx, "dx", x, "x");
  MPB_CHECK(dx.dtype == x.dtype, "{}: dx is {}, must have x's dtype {}", op, dtype_name(dx.dtype),
            dtype_name(x.dtype));
  if (d_pre) {
    ck.like(*d_pre, "d_pre", x, "x");
    // The GPU kernels read x, relu_out and dy again after writing d_pre: it may share only dy's
    // buffer, and only in dy's dtype (each element read before it is written over).
    MPB_CHECK(d_pre->data != x.data && (!relu_out || d_pre->data != relu_out->data),
              "{}: d_pre must not alias x or relu_out", op);
    ck.in_place(*d_pre, "d_pre", dy, "dy");
  }
  ck.vector(gamma, c, "gamma", "channels");
  ck.vector(save_mean, c, "save_mean", "channels");
  ck.vector(save_rstd, c, "save_rstd", "channels");
  ck.vector(dgamma, c, "dgamma", "channels");
  ck.vector(dbeta, c, "dbeta", "channels");
  observed(
      [&] {
        return OpCall{
            op,
            fmt::format("{}{}{}", shape_dtype(x), relu_out ? " +relu" : "", d_pre ? " +d_pre" : ""),
            0, nbytes({&dy, relu_out, &x, &dx, d_pre})};
      },
      [&] {
        batchnorm_backward_impl(dy, relu_out, x, gamma, save_mean, save_rstd, dx, dgamma, dbeta,
                                d_pre);
      });
}

void Backend::avgpool_forward(const Tensor& x, Tensor& y) {
  const char* op = "avgpool_forward";
  check_pool(Checks(op, device()), op, x, "x", y, "y");
  observed(
      [&] {
        return OpCall{op, shape_dtype(x), 0, nbytes({&x, &y})};
      },
      [&] { avgpool_forward_impl(x, y); });
}

void Backend::avgpool_backward(const Tensor& dy, Tensor& dx) {
  const char* op = "avgpool_backward";
  check_pool(Checks(op, device()), op, dx, "dx", dy, "dy");
  observed(
      [&] {
        return OpCall{op, shape_dtype(dx), 0, nbytes({&dy, &dx})};
      },
      [&] { avgpool_backward_impl(dy, dx); });
}

void Backend::maxpool2d_forward(const PoolDesc& d, const Tensor& x, Tensor& y) {
  const char* op = "maxpool2d_forward";
  check_maxpool(Checks(op, device()), op, d, x, "x", y, "y");
  observed(
      [&] {
        return OpCall{op, pool_detail(d, x), 0, nbytes({&x, &y})};
      },
      [&] { maxpool2d_forward_impl(d, x, y); });
}

void Backend::maxpool2d_backward(const PoolDesc& d, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const char* op = "maxpool2d_backward";
  const Checks ck(op, device());
  check_maxpool(ck, op, d, x, "x", dy, "dy");
  ck.like(dx, "dx", x, "x");
  MPB_CHECK(dx.dtype == x.dtype, "{}: dx is {}, must have x's dtype {}", op, dtype_name(dx.dtype),
            dtype_name(x.dtype));
  MPB_CHECK(dx.data != x.data && dx.data != dy.data, "{}: dx must not alias x or dy", op);
  observed(
      [&] {
        return OpCall{op, pool_detail(d, x), 0, nbytes({&x, &dy, &dx})};
      },
      [&] { maxpool2d_backward_impl(d, x, dy, dx); });
}

void Backend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  const Checks ck("add", device());
  ck.float_operand(a, "a");
  ck.float_operand(b, "b");
  ck.float_operand(out, "out");
  MPB_CHECK(a.numel() == b.numel() && a.numel() == out.numel(),
            "add: a {}, b {}, out {} must have one element count", a.shape.str(), b.shape.str(),
            out.shape.str());
  ck.in_place(out, "out", a, "a");
  ck.in_place(out, "out", b, "b");
  observed(
      [&] {
        return OpCall{
            "add",
            fmt::format("{}+{}->{}", shape_dtype(a), dtype_name(b.dtype), dtype_name(out.dtype)), 0,
            nbytes({&a, &b, &out})};
      },
      [&] { add_impl(a, b, out); });
}

void Backend::layernorm_forward(float eps, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                Tensor& y, Tensor& mean, Tensor& rstd) {
  const char* op = "layernorm_forward";
  const Checks ck(op, device());
  check_rows(ck, op, x);
  ck.like(y, "y", x, "x");
  MPB_CHECK(std::isfinite(eps) && eps >= 0.0f, "{}: eps {} must be >= 0", op, eps);
  ck.vector(gamma, x.cols(), "gamma", "D");
  ck.vector(beta, x.cols(), "beta", "D");
  ck.vector(mean, x.rows(), "mean", "rows");
  ck.vector(rstd, x.rows(), "rstd", "rows");
  ck.in_place(y, "y", x, "x");
  observed(
      [&] {
        return OpCall{op, fmt::format("{}->{}", shape_dtype(x), dtype_name(y.dtype)), 0,
                      nbytes({&x, &y})};
      },
      [&] { layernorm_forward_impl(eps, x, gamma, beta, y, mean, rstd); });
}

void Backend::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                 const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                                 Tensor& dbeta) {
  const char* op = "layernorm_backward";
  const Checks ck(op, device());
  check_rows(ck, op, x);
  ck.like(dy, "dy", x, "x");
  ck.like(dx, "dx", x, "x");
  MPB_CHECK(dx.dtype == x.dtype, "{}: dx is {}, must have x's dtype {}", op, dtype_name(dx.dtype),
            dtype_name(x.dtype));
  ck.vector(gamma, x.cols(), "gamma", "D");
  ck.vector(mean, x.rows(), "mean", "rows");
  ck.vector(rstd, x.rows(), "rstd", "rows");
  ck.vector(dgamma, x.cols(), "dgamma", "D");
  ck.vector(dbeta, x.cols(), "dbeta", "D");
  ck.in_place(dx, "dx", dy, "dy");
  observed(
      [&] {
        return OpCall{op, shape_dtype(x), 0, nbytes({&dy, &x, &dx})};
      },
      [&] { layernorm_backward_impl(dy, x, gamma, mean, rstd, dx, dgamma, dbeta); });
}

// The table rows gathered are as many fp32 values as y has elements, read twice (token and
// position).
void Backend::embedding_forward(const Tensor& tokens, const Tensor& tok_emb, const Tensor& pos_emb,
                                Tensor& y) {
  const char* op = "embedding_forward";
  const EmbeddingGeom g =
      check_embedding(Checks(op, device()), op, tokens, tok_emb, pos_emb, y, "y");
  observed(
      [&] {
        return OpCall{op, shape_dtype(y), 0,
                      nbytes({&tokens, &y}) + 2.0 * 4.0 * static_cast<double>(y.numel())};
      },
      [&] { embedding_forward_impl(g, tokens, tok_emb, pos_emb, y); });
}

void Backend::embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dtok_emb,
                                 Tensor& dpos_emb, bool add_to_tok) {
  const char* op = "embedding_backward";
  const EmbeddingGeom g =
      check_embedding(Checks(op, device()), op, tokens, dtok_emb, dpos_emb, dy, "dy");
  observed(
      [&] {
        return OpCall{op, shape_dtype(dy) + (add_to_tok ? " +=" : ""), 0,
                      nbytes({&tokens, &dy, &dtok_emb, &dpos_emb})};
      },
      [&] { embedding_backward_impl(g, tokens, dy, dtok_emb, dpos_emb, add_to_tok); });
}

void Backend::permute(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  const Checks ck("permute", device());
  ck.operand(src, "src");
  ck.operand(dst, "dst");
  MPB_CHECK(src.dtype == dst.dtype, "permute: src is {}, dst is {}", dtype_name(src.dtype),
            dtype_name(dst.dtype));
  const int rank = src.shape.rank;
  MPB_CHECK(rank >= 1 && rank <= Shape::kMaxRank && dst.shape.rank == rank,
            "permute: src {} and dst {} must share a rank in [1, 5]", src.shape.str(),
            dst.shape.str());
  bool seen[Shape::kMaxRank] = {};
  for (int k = 0; k < rank; ++k) {
    MPB_CHECK(perm[k] >= 0 && perm[k] < rank && !seen[perm[k]],
              "permute: ({}, {}, {}, {}, {}) is not a permutation of the first {} dimensions",
              perm[0], perm[1], perm[2], perm[3], perm[4], rank);
    seen[perm[k]] = true;
    MPB_CHECK(dst.shape[k] == src.shape[perm[k]],
              "permute: dst {} dimension {} is {}, src {} dimension {} is {}", dst.shape.str(), k,
              dst.shape[k], src.shape.str(), perm[k], src.shape[perm[k]]);
  }
  // In place, threads would read elements that others overwrite.
  MPB_CHECK(src.data != dst.data || src.numel() == 0, "permute: dst must not alias src");
  observed(
      [&] {
        std::string order;
        for (int i = 0; i < rank; ++i) order += std::to_string(perm[i]);
        return OpCall{"permute", fmt::format("{} [{}]", shape_dtype(src), order), 0,
                      nbytes({&src, &dst})};
      },
      [&] { permute_impl(src, dst, perm); });
}

void Backend::attention_softmax_forward(const Tensor& x, float scale, bool causal, Tensor& y) {
  const char* op = "attention_softmax_forward";
  const Checks ck(op, device());
  check_square(ck, op, x, "x");
  check_square(ck, op, y, "y");
  MPB_CHECK(y.shape == x.shape, "{}: y {} must match x {}", op, y.shape.str(), x.shape.str());
  ck.in_place(y, "y", x, "x");
  observed(
      [&] {
        return OpCall{
            op,
            fmt::format("{}->{}{}", shape_dtype(x), dtype_name(y.dtype), causal ? " causal" : ""),
            0, nbytes({&x, &y})};
      },
      [&] { attention_softmax_forward_impl(x, scale, causal, y); });
}

void Backend::attention_softmax_backward(const Tensor& dy, const Tensor& y, float scale,
                                         Tensor& dx) {
  const char* op = "attention_softmax_backward";
  const Checks ck(op, device());
  check_square(ck, op, dy, "dy");
  check_square(ck, op, y, "y");
  check_square(ck, op, dx, "dx");
  MPB_CHECK(y.shape == dy.shape && dx.shape == dy.shape,
            "{}: dy {}, y {}, dx {} must have one shape", op, dy.shape.str(), y.shape.str(),
            dx.shape.str());
  ck.in_place(dx, "dx", dy, "dy");
  observed(
      [&] {
        return OpCall{op, shape_dtype(dy), 0, nbytes({&dy, &y, &dx})};
      },
      [&] { attention_softmax_backward_impl(dy, y, scale, dx); });
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace mpbench
