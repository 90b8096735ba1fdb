#include "models/linear.h"

#include <algorithm>
#include <cmath>

namespace mpbench {

namespace {
Tensor rows_of(const Tensor& t, int64_t rows) {
  return t.slice(0, Shape{rows, t.cols()});
}
}  // namespace

Linear::Linear(std::string name, int64_t in, int64_t out, Activation act, LayerPrecision prec,
               bool fp32_out)
    : Layer(std::move(name)),
      in_(in),
      out_(out),
      act_(act),
      prec_(prec),
      fp32_out_(fp32_out),
      fp8_(prec.fp8 && fp8_gemm_fits(kFp8TensorCoreMultiple, out, in)) {}

void Linear::use_shared_weight(const int* param) {
  shared_weight_ = param;
}

void Linear::borrow(const Tensor& y, const Tensor& dx, const Tensor& pre_act) {
  lent_y_ = y;
  lent_dx_ = dx;
  lent_pre_act_ = pre_act;
}

void Linear::declare_params(ParamStore& ps) {
  if (fp8_) {
    fp8_x_ = ps.fp8().declare(name_ + ".x", DType::F8E4M3);
    fp8_w_ = ps.fp8().declare(name_ + ".w", DType::F8E4M3);
    fp8_dy_ = ps.fp8().declare(name_ + ".dy", DType::F8E5M2);
    fp8_scratch_ = ps.fp8_scratch();
  }
  if (shared_weight_) {
    w_ = *shared_weight_;
    MPB_CHECK(w_ >= 0 && w_ < static_cast<int>(ps.params().size()),
              "{}: the shared weight is not declared yet", name_);
    const Shape s = ps.params().at(static_cast<size_t>(w_)).shape;
    MPB_CHECK(s == (Shape{out_, in_}), "{}: shared weight {} is not ({}, {})", name_, s.str(), out_,
              in_);
    return;
  }
  float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  w_ = ps.declare(name_ + ".weight", Shape{out_, in_}, bound);
  b_ = ps.declare(name_ + ".bias", Shape{out_}, bound);
}

void Linear::allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype, bool need_dx) {
  input_dtype_ = input_dtype;
  const DType cd = prec_.compute;
  if (input_dtype != cd) {
    x_cast_ = alloc.alloc(Shape{batch, in_}, cd, MemCategory::Activations);
    if (need_dx) dx_cast_ = alloc.alloc(Shape{batch, in_}, input_dtype, MemCategory::Activations);
  }
  const DType od = output_dtype(input_dtype);
  auto own_or_lent = [&](const Tensor& lent, Shape s, DType dt) {
    return lent.defined() ? lent.viewed_as(s, dt) : alloc.alloc(s, dt, MemCategory::Activations);
  };
  y_ = own_or_lent(lent_y_, Shape{batch, out_}, od);
  if (keeps_pre_act()) pre_act_ = own_or_lent(lent_pre_act_, Shape{batch, out_}, od);
  if (need_dx) dx_ = own_or_lent(lent_dx_, Shape{batch, in_}, cd);
  if (fp32_out_ && b_ >= 0 && cd != DType::F32)
    bias_f32_ = alloc.alloc(Shape{out_}, DType::F32, MemCategory::Weights);
  fp8_rows_ = 0;
  if (fp8_ && fp8_gemm_fits(batch, out_, in_)) {
    fp8_rows_ = batch;
    x8t_ = alloc.alloc(Shape{in_, batch}, DType::F8E4M3, MemCategory::Activations);
    // One byte an element: x or dY in the first slot, dY^T in the second.
    fp8_scratch_->reserve(alloc, kFp8Rows, batch * std::max(in_, out_));
    fp8_scratch_->reserve(alloc, kFp8Cols, batch * out_);
    w8_ = alloc.alloc(Shape{out_, in_}, DType::F8E4M3, MemCategory::Weights);
    // W's transposed copy feeds only the dx GEMM, which the first layer never runs.
    if (need_dx) w8t_ = alloc.alloc(Shape{in_, out_}, DType::F8E4M3, MemCategory::Weights);
  }
}

bool Linear::runs_fp8(int64_t rows) const {
  return fp8_rows_ > 0 && rows <= fp8_rows_ && fp8_gemm_fits(rows, out_, in_);
}

Tensor Linear::forward(Backend& be, const ParamStore& ps, const Tensor& x) {
  rows_ = x.rows();
  MPB_CHECK(x.cols() == in_ && x.dtype == input_dtype_, "{}: input {} {}", name_, x.shape.str(),
            dtype_name(x.dtype));
  x_saved_ = x;
  if (x.dtype != prec_.compute) {
    Tensor xc = rows_of(x_cast_, rows_);
    be.cast(x, xc);
    x_saved_ = xc;
  }
  const bool fp8 = runs_fp8(rows_);
  // The bias in the compute dtype, as autocast casts it; widened to fp32 for an fp32 output
  // (the GEMM's epilogue adds a bias of C's dtype). FP8 GEMMs take a bf16 bias whatever they
  // write.
  Tensor b;
  if (b_ >= 0) {
    b = ps.weight(b_, prec_.compute);
    if (fp32_out_ && !fp8 && b.dtype != DType::F32) {
      be.cast(b, bias_f32_);
      b = bias_f32_;
    }
  }
  Tensor y = rows_of(y_, rows_);
  Tensor pre = keeps_pre_act() ? rows_of(pre_act_, rows_) : Tensor{};
  GemmDesc d;
  d.trans_b = true;
  d.math = prec_.math;
  d.act = act_;
  d.bias = b.defined() ? &b : nullptr;
  d.pre_act = keeps_pre_act() ? &pre : nullptr;
  if (!fp8) {
    be.gemm(d, x_saved_, ps.weight(w_, prec_.compute), y);
    // Autocast's logits are the GEMM's 16-bit output, upcast by the loss.
    if (fp32_out_) round_to_compute(be, y);
    return y;
  }
  // Training records the amaxes (evaluation must not move the scales) and writes the transposed
  // copies the backward GEMMs read.
  Fp8Scaling::Scales sx = ps.fp8().scales(fp8_x_), sw = ps.fp8().scales(fp8_w_);
  Tensor x8 = fp8_scratch_->view(kFp8Rows, Shape{rows_, in_}, DType::F8E4M3);
  Tensor x8t = x8t_.slice(0, Shape{in_, rows_});
  be.cast_to_fp8(x_saved_, sx.scale, training_ ? &sx.amax : nullptr, x8,
                 training_ ? &x8t : nullptr);
  be.cast_to_fp8(ps.master(w_), sw.scale, training_ ? &sw.amax : nullptr, w8_,
                 training_ && w8t_.defined() ? &w8t_ : nullptr);
  d.a_scale_inv = &sx.scale_inv;
  d.b_scale_inv = &sw.scale_inv;
  be.gemm(d, x8, w8_, y);
  if (fp32_out_) round_to_compute(be, y);  // Transformer Engine writes the activations' bf16
  return y;
}

void Linear::round_to_compute(Backend& be, Tensor& t) const {
  if (prec_.compute != DType::F32) be.round_to(t, prec_.compute);
}

Tensor Linear::act_grad_input() const {
  // ReLU's backward is read off its output (y <= 0 exactly where pre <= 0, NaN kept: relu.h),
  // so no pre-activation buffer is kept.
  if (keeps_pre_act()) return rows_of(pre_act_, rows_);
  if (act_ == Activation::Relu) return rows_of(y_, rows_);
  return Tensor{};
}

bool Linear::can_fuse_upstream(const Linear& upstream) const {
  // An FP8 dX GEMM takes no backward epilogue.
  return !fp8_ && input_dtype_ == prec_.compute &&
         upstream.output_dtype(upstream.input_dtype_) == prec_.compute && upstream.out_ == in_ &&
         !upstream.fp32_out_ && upstream.b_ >= 0;
}

Tensor Linear::backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool need_dx) {
  return backward(be, ps, dy, need_dx, nullptr, false);
}

Tensor Linear::backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool need_dx,
                        const Linear* upstream, bool dz_ready) {
  MPB_CHECK(dy.rows() == rows_ && dy.cols() == out_, "{}: dy {}", name_, dy.shape.str());
  MPB_CHECK(!upstream || (need_dx && can_fuse_upstream(*upstream) && upstream->rows_ == rows_),
            "{}: cannot fuse the backward of {}", name_, upstream ? upstream->name_ : "");
  Tensor dz = dy;
  if (!dz_ready && (act_ != Activation::None || b_ >= 0)) {
    // dz = act's backward of dy (bias_act_backward), in place; also the bias gradient (fp32
    // column sums, then rounded as autocast's).
    Tensor db = b_ >= 0 ? ps.grad(b_) : Tensor{};
    Tensor pre = act_ == Activation::None ? dz : act_grad_input();
    be.bias_act_backward(act_, dz, pre, dz, b_ >= 0 ? &db : nullptr);
    if (b_ >= 0) round_to_compute(be, db);
  }
  // Even a head with fp32 logits gets its gradient in the compute dtype (the loss writes it so),
  // because the two GEMMs below run in that dtype.
  MPB_CHECK(dz.dtype == prec_.compute, "{}: gradient dtype {} differs from compute dtype {}", name_,
            dtype_name(dz.dtype), dtype_name(prec_.compute));
  const bool fp8 = runs_fp8(rows_);
  // dW (out, in) = dz^T (out, rows) x (rows, in), written to the fp32 gradient and rounded to
  // the compute dtype as autocast's 16-bit GEMM output is (an fp16 gradient can overflow there,
  // and the loss scaler must see it).
  Tensor dw = ps.grad(w_);
  Fp8Scaling::Scales sdy;
  Tensor dz8, dz8t;
  if (fp8) {
    sdy = ps.fp8().scales(fp8_dy_);
    dz8 = fp8_scratch_->view(kFp8Rows, Shape{rows_, out_}, DType::F8E5M2);
    dz8t = fp8_scratch_->view(kFp8Cols, Shape{out_, rows_}, DType::F8E5M2);
    be.cast_to_fp8(dz, sdy.scale, &sdy.amax, dz8, &dz8t);
    // As "TN" GEMMs: dW = dz^T (out, rows) x (x^T stored (in, rows))^T.
    const Fp8Scaling::Scales sx = ps.fp8().scales(fp8_x_);
    GemmDesc gw;
    gw.trans_b = true;
    gw.math = prec_.math;
    gw.a_scale_inv = &sdy.scale_inv;
    gw.b_scale_inv = &sx.scale_inv;
    be.gemm(gw, dz8t, x8t_.slice(0, Shape{in_, rows_}), dw);
  } else {
    GemmDesc gw;
    gw.trans_a = true;
    gw.math = prec_.math;
    be.gemm(gw, dz, x_saved_, dw);
  }
  round_to_compute(be, dw);
  if (!need_dx) return Tensor{};
  MPB_CHECK(dx_.defined(), "{}: asked for dx, allocated without it (the first layer)", name_);
  // dx (rows, in) = dz (rows, out) W (out, in).
  Tensor dx = rows_of(dx_, rows_);
  GemmDesc gx;
  gx.math = prec_.math;
  Tensor up_pre, up_db;
  if (upstream) {
    // dx is upstream's dy: finish it into upstream's dz here, as bias_act_backward would.
    up_pre = upstream->act_grad_input();
    up_db = ps.grad(upstream->b_);
    gx.dact = upstream->act_;
    gx.dact_input = up_pre.defined() ? &up_pre : nullptr;
    gx.dbias = &up_db;
  }
  if (fp8) {  // dx = dz (rows, out) x (W^T stored (in, out))^T
    const Fp8Scaling::Scales sw = ps.fp8().scales(fp8_w_);
    gx.trans_b = true;
    gx.a_scale_inv = &sdy.scale_inv;
    gx.b_scale_inv = &sw.scale_inv;
    be.gemm(gx, dz8, w8t_, dx);
  } else {
    be.gemm(gx, dz, ps.weight(w_, prec_.compute), dx);
  }
  if (upstream) upstream->round_to_compute(be, up_db);
  if (input_dtype_ == prec_.compute) return dx;
  Tensor dxc = rows_of(dx_cast_, rows_);
  be.cast(dx, dxc);
  return dxc;
}

LayerInfo Linear::info(DType input_dtype) const {
  LayerInfo li;
  li.name = name_;
  li.kind = act_ == Activation::None ? "linear" : std::string("linear+") + activation_name(act_);
  li.output_shape = Shape{out_};
  li.params = shared_weight_ ? 0 : out_ * in_ + out_;        // a shared weight is its owner's
  li.forward_flops = 2.0 * static_cast<double>(in_) * out_;  // the GEMM's; not the bias's adds
  li.input_flops = li.forward_flops;
  li.compute_dtype = prec_.compute;
  li.storage_dtype = output_dtype(input_dtype);
  // Saved for backward: the input in the compute dtype, and GELU's pre-activation (ReLU's
  // backward reads the output: counted by the model, see backward_reads_output).
  li.activation_bytes = in_ * static_cast<int64_t>(dtype_size(prec_.compute));
  if (keeps_pre_act()) li.activation_bytes += out_ * dtype_size(li.storage_dtype);
  li.backward_reads_output = act_ == Activation::Relu;
  li.matmul = MatmulDims{false, 1, true, out_, in_, fp8_};
  if (fp8_) {
    li.fp8_dtypes = std::array<DType, 2>{DType::F8E4M3, DType::F8E5M2};
    li.activation_bytes += in_;  // x^T in fp8, kept for dW (at a batch that runs FP8)
    li.fp8_copy_bytes = in_;
  }
  return li;
}

}  // namespace mpbench
