// The resnet_bottleneck family; resnet.h describes the layers, their precision and memory.
#include "models/resnet.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "models/family.h"
#include "models/linear.h"
#include "models/shared_scratch.h"
#include "models/synthetic_images.h"

namespace mpbench {

namespace {

Tensor rows2d(const Tensor& t, int64_t c) {
  return t.reshaped(Shape{t.numel() / c, c});
}

// Gradient buffers shared by all blocks and the pool (see resnet.h, "Memory"): kDw holds one
// filter gradient (bytes in all), the others scale with the batch.
enum GradSlot { kDx0, kDx1, kGradOut, kGradA, kGradB, kDw, kGradSlots };

// A convolution without bias: KRSC weight, its geometry per sample.
struct Conv {
  std::string name;
  int64_t h = 0, w = 0, c = 0;  // input
  int64_t k = 0, r = 1, stride = 1, pad = 0;
  int64_t p = 0, q = 0;  // output
  int param = -1;

  Conv() = default;
  Conv(std::string n, int64_t h_, int64_t w_, int64_t c_, int64_t k_, int64_t r_, int64_t stride_)
      : name(std::move(n)), h(h_), w(w_), c(c_), k(k_), r(r_), stride(stride_), pad(r_ / 2) {
    p = (h + 2 * pad - r) / stride + 1;
    q = (w + 2 * pad - r) / stride + 1;
  }
  Shape weight_shape() const { return Shape{k, r, r, c}; }
  int64_t in_numel() const { return h * w * c; }
  int64_t out_numel() const { return p * q * k; }
  // Forward FLOPs per sample.
  double flops() const { return conv_flops(ConvGeom{1, h, w, c, k, r, r, p, q, stride, pad}); }
  void declare(ParamStore& ps) {
    // PyTorch's Conv2d default (kaiming_uniform with a = sqrt(5)): U(+-1 / sqrt(fan_in)).
    const float bound = 1.0f / std::sqrt(static_cast<float>(r * r * c));
    param = ps.declare(name + ".weight", weight_shape(), ParamStore::Init::uniform(bound));
  }
};

struct Bn {
  Bn() = default;
  Bn(std::string n, int64_t c_) : name(std::move(n)), c(c_) {}
  std::string name;
  int64_t c = 0;
  int gamma = -1, beta = -1;
  Tensor running_mean, running_var, save_mean, save_rstd;

  void declare(ParamStore& ps) {
    gamma = ps.declare(name + ".weight", Shape{c}, ParamStore::Init::constant(1.0f));
    beta = ps.declare(name + ".bias", Shape{c}, ParamStore::Init::constant(0.0f));
  }
  void allocate(TrackingAllocator& alloc) {
    // Running statistics are model state (PyTorch's buffers), kept with the weights.
    running_mean = alloc.alloc(Shape{c}, DType::F32, MemCategory::Weights);
    running_var = alloc.alloc(Shape{c}, DType::F32, MemCategory::Weights);
    if (!alloc.counting()) {
      alloc.backend().fill(running_mean, 0.0f);
      alloc.backend().fill(running_var, 1.0f);
    }
    save_mean = alloc.alloc(Shape{c}, DType::F32, MemCategory::Activations);
    save_rstd = alloc.alloc(Shape{c}, DType::F32, MemCategory::Activations);
  }
};

// What the stem and the bottleneck blocks share: their precision, the gradient arena, and the
// convolution and batchnorm calls in that precision.
class ConvBnLayer : public Layer {
 protected:
  ConvBnLayer(std::string name, LayerPrecision prec, std::shared_ptr<SharedScratch> arena)
      : Layer(std::move(name)), prec_(prec), arena_(std::move(arena)) {}

  ConvDesc desc(const Conv& c) const {
    ConvDesc d;
    d.stride = c.stride;
    d.pad = c.pad;
    d.math = prec_.math;
    return d;
  }
  // Inspect rows (LayerInfo children) of a convolution and a batchnorm of this layer, keeping
  // `saved` elements per sample for the backward pass.
  LayerInfo conv_row(const Conv& c, int64_t saved) const {
    LayerInfo li;
    li.name = relative(c.name);
    li.kind =
        fmt::format("conv{}x{}{}", c.r, c.r, c.stride != 1 ? fmt::format("/s{}", c.stride) : "");
    li.output_shape = Shape{c.p, c.q, c.k};
    li.params = c.weight_shape().numel();
    li.forward_flops = c.flops();
    li.compute_dtype = li.storage_dtype = prec_.compute;
    li.activation_bytes = saved * static_cast<int64_t>(dtype_size(prec_.compute));
    li.matmul = MatmulDims{true, c.p * c.q, true, c.k, c.c};
    return li;
  }
  LayerInfo bn_row(const Bn& bn, std::string kind, const Conv& after, int64_t saved) const {
    LayerInfo li;
    li.name = relative(bn.name);
    li.kind = std::move(kind);
    li.output_shape = Shape{after.p, after.q, after.k};
    li.params = 2 * bn.c;
    li.compute_dtype = DType::F32;  // batch statistics
    li.storage_dtype = prec_.compute;
    li.activation_bytes = saved * static_cast<int64_t>(dtype_size(prec_.compute));
    return li;
  }
  // The first convolution's row: it also keeps the cast copy of the input that take_input makes
  // when the input arrives in another dtype (the input itself is counted by the layer before).
  LayerInfo first_conv_row(const Conv& first, DType input_dtype) const {
    const int64_t cast = input_dtype != prec_.compute ? first.in_numel() : 0;
    return conv_row(first, first.out_numel() + cast);
  }
  // The input's bytes when the first convolution's weight gradient reads it as it came.
  int64_t input_read_as_is(const Conv& first, DType input_dtype) const {
    return input_dtype == prec_.compute
               ? first.in_numel() * static_cast<int64_t>(dtype_size(input_dtype))
               : 0;
  }
  std::string relative(const std::string& full) const { return full.substr(name_.size() + 1); }

  void conv_forward(Backend& be, const ParamStore& ps, const Conv& c, const Tensor& x, Tensor& y) {
    be.conv2d_forward(desc(c), x, ps.weight(c.param, prec_.compute), y);
  }
  void conv_backward_data(Backend& be, const ParamStore& ps, const Conv& c, const Tensor& dy,
                          Tensor& dx) {
    be.conv2d_backward_data(desc(c), dy, ps.weight(c.param, prec_.compute), dx);
  }
  // dw comes in the compute dtype; the fp32 gradient buffer gets it directly in fp32 modes and
  // through a cast otherwise.
  void conv_backward_filter(Backend& be, const ParamStore& ps, const Conv& c, const Tensor& x,
                            const Tensor& dy) {
    Tensor g = ps.grad(c.param);
    if (prec_.compute == DType::F32) {
      be.conv2d_backward_filter(desc(c), x, dy, g);
      return;
    }
    Tensor dw = arena_->view(kDw, c.weight_shape(), prec_.compute);
    be.conv2d_backward_filter(desc(c), x, dy, dw);
    be.cast(dw, g);
  }
  void bn_forward(Backend& be, const ParamStore& ps, Bn& bn, const Tensor& x,
                  const Tensor* residual, bool relu, Tensor& y) {
    BatchNormDesc d;
    d.relu = relu;
    const Tensor x2 = rows2d(x, bn.c);
    Tensor y2 = rows2d(y, bn.c);
    Tensor r2 = residual ? rows2d(*residual, bn.c) : Tensor{};
    const Tensor gamma = ps.master(bn.gamma), beta = ps.master(bn.beta);
    if (training_) {
      be.batchnorm_forward_train(d, x2, residual ? &r2 : nullptr, gamma, beta, bn.running_mean,
                                 bn.running_var, bn.save_mean, bn.save_rstd, y2);
    } else {
      be.batchnorm_forward_eval(d, x2, residual ? &r2 : nullptr, gamma, beta, bn.running_mean,
                                bn.running_var, y2);
    }
  }
  void bn_backward(Backend& be, const ParamStore& ps, Bn& bn, const Tensor& dy,
                   const Tensor* relu_out, const Tensor& x, Tensor& dx, Tensor* d_pre) {
    const Tensor dy2 = rows2d(dy, bn.c), x2 = rows2d(x, bn.c);
    Tensor ro2 = relu_out ? rows2d(*relu_out, bn.c) : Tensor{};
    Tensor dx2 = rows2d(dx, bn.c);
    Tensor dp2 = d_pre ? rows2d(*d_pre, bn.c) : Tensor{};
    Tensor dgamma = ps.grad(bn.gamma), dbeta = ps.grad(bn.beta);
    be.batchnorm_backward(dy2, relu_out ? &ro2 : nullptr, x2, ps.master(bn.gamma), bn.save_mean,
                          bn.save_rstd, dx2, dgamma, dbeta, d_pre ? &dp2 : nullptr);
  }

  // The input as the first convolution reads it, (rows, H, W, C) in the compute dtype: through
  // the cast buffer when it arrives in another dtype. Sets rows_ and x_.
  Tensor take_input(Backend& be, const Tensor& x_in, const Conv& first) {
    rows_ = x_in.rows();
    MPB_CHECK(x_in.numel() == rows_ * first.in_numel() && x_in.dtype == input_dtype_,
              "{}: input {} {}, expected (rows, {}) {}", name_, x_in.shape.str(),
              dtype_name(x_in.dtype), first.in_numel(), dtype_name(input_dtype_));
    x_ = x_in.reshaped(Shape{rows_, first.h, first.w, first.c});
    if (x_.dtype != prec_.compute) {
      Tensor xc = rows_of(x_cast_);
      be.cast(x_, xc);
      x_ = xc;
    }
    return x_;
  }
  // The first rows_ rows of a (batch, H, W, C) buffer.
  Tensor rows_of(const Tensor& t) const {
    return t.slice(0, Shape{rows_, t.shape[1], t.shape[2], t.shape[3]});
  }

  LayerPrecision prec_;
  std::shared_ptr<SharedScratch> arena_;
  DType input_dtype_ = DType::F32;
  int64_t rows_ = 0;
  Tensor x_;       // the input the convolutions used (the cast copy, or the caller's tensor)
  Tensor x_cast_;  // the cast copy, when the input arrives in another dtype
};

class Bottleneck : public ConvBnLayer {
 public:
  // first: the model's first layer (no stem), whose input gradient is never asked for.
  Bottleneck(std::string name, int index, bool first, int64_t size, int64_t cin, int64_t width,
             int64_t cout, int64_t stride, LayerPrecision prec,
             std::shared_ptr<SharedScratch> arena)
      : ConvBnLayer(std::move(name), prec, std::move(arena)), index_(index) {
    conv1_ = Conv(name_ + ".conv1", size, size, cin, width, 1, 1);
    conv2_ = Conv(name_ + ".conv2", size, size, width, width, 3, stride);
    conv3_ = Conv(name_ + ".conv3", conv2_.p, conv2_.q, width, cout, 1, 1);
    proj_ = stride != 1 || cin != cout;
    if (proj_) proj_conv_ = Conv(name_ + ".shortcut.conv", size, size, cin, cout, 1, stride);
    MPB_CHECK(!proj_ || (proj_conv_.p == conv3_.p && proj_conv_.q == conv3_.q),
              "{}: shortcut output {}x{} differs from the main path's {}x{}", name_, proj_conv_.p,
              proj_conv_.q, conv3_.p, conv3_.q);
    bn1_ = Bn(name_ + ".bn1", width);
    bn2_ = Bn(name_ + ".bn2", width);
    bn3_ = Bn(name_ + ".bn3", cout);
    if (proj_) proj_bn_ = Bn(name_ + ".shortcut.bn", cout);

    const int64_t es = static_cast<int64_t>(dtype_size(prec_.compute));
    if (!first) {
      arena_->need_per_sample(dx_slot(index_), conv1_.in_numel() * es);
      // The shortcut's dx goes where dy was (backward).
      if (proj_) arena_->need_per_sample(dx_slot(index_ + 1), conv1_.in_numel() * es);
    }
    arena_->need_per_sample(kGradOut, conv3_.out_numel() * es);
    arena_->need_per_sample(kGradA, std::max(conv2_.in_numel(), conv2_.out_numel()) * es);
    arena_->need_per_sample(kGradB, std::max(conv2_.in_numel(), conv2_.out_numel()) * es);
    if (prec_.compute != DType::F32) {
      int64_t wmax = std::max({conv1_.weight_shape().numel(), conv2_.weight_shape().numel(),
                               conv3_.weight_shape().numel()});
      if (proj_) wmax = std::max(wmax, proj_conv_.weight_shape().numel());
      arena_->need_in_all(kDw, wmax * es, MemCategory::Gradients);
    }
  }

  // Block k writes its dx to slot k % 2 and reads its dy from (k + 1) % 2 (the next block's, or
  // the pool's, dx).
  static GradSlot dx_slot(int index) { return index % 2 == 0 ? kDx0 : kDx1; }

  void declare_params(ParamStore& ps) override {
    conv1_.declare(ps);
    bn1_.declare(ps);
    conv2_.declare(ps);
    bn2_.declare(ps);
    conv3_.declare(ps);
    bn3_.declare(ps);
    if (proj_) {
      proj_conv_.declare(ps);
      proj_bn_.declare(ps);
    }
  }

  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype, bool need_dx) override {
    arena_->allocate(alloc, batch);
    input_dtype_ = input_dtype;
    const DType cd = prec_.compute;
    auto act = [&](const Conv& c, bool out) {
      return out ? alloc.alloc(Shape{batch, c.p, c.q, c.k}, cd, MemCategory::Activations)
                 : alloc.alloc(Shape{batch, c.h, c.w, c.c}, cd, MemCategory::Activations);
    };
    if (input_dtype != cd) {
      x_cast_ = act(conv1_, false);
      if (need_dx)
        dx_cast_ = alloc.alloc(Shape{batch, conv1_.h, conv1_.w, conv1_.c}, input_dtype,
                               MemCategory::Activations);
    }
    a1_ = act(conv1_, true);
    h1_ = act(conv1_, true);
    a2_ = act(conv2_, true);
    h2_ = act(conv2_, true);
    a3_ = act(conv3_, true);
    y_ = act(conv3_, true);
    if (proj_) sa_ = act(proj_conv_, true);
    for (Bn* bn : bns()) bn->allocate(alloc);
  }

  Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x_in) override {
    const Tensor x = take_input(be, x_in, conv1_);
    Tensor a1 = rows_of(a1_), h1 = rows_of(h1_), a2 = rows_of(a2_), h2 = rows_of(h2_);
    Tensor a3 = rows_of(a3_), y = rows_of(y_);
    conv_forward(be, ps, conv1_, x, a1);
    bn_forward(be, ps, bn1_, a1, nullptr, true, h1);
    conv_forward(be, ps, conv2_, h1, a2);
    bn_forward(be, ps, bn2_, a2, nullptr, true, h2);
    conv_forward(be, ps, conv3_, h2, a3);
    Tensor residual = x;
    if (proj_) {
      Tensor sa = rows_of(sa_);
      conv_forward(be, ps, proj_conv_, x, sa);
      // Forward-only: bn3 reads it as its residual; the gradient buffer is idle until backward.
      residual = arena_->view(kGradOut, sa.shape, prec_.compute);
      bn_forward(be, ps, proj_bn_, sa, nullptr, false, residual);
    }
    bn_forward(be, ps, bn3_, a3, &residual, true, y);
    return y.reshaped(Shape{rows_, conv3_.out_numel()});
  }

  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy_in, bool need_dx) override {
    const DType cd = prec_.compute;
    MPB_CHECK(dy_in.numel() == rows_ * conv3_.out_numel() && dy_in.dtype == cd, "{}: dy {} {}",
              name_, dy_in.shape.str(), dtype_name(dy_in.dtype));
    const Shape out4{rows_, conv3_.p, conv3_.q, conv3_.k};
    const Tensor dy = dy_in.reshaped(out4);
    const Tensor a1 = rows_of(a1_), h1 = rows_of(h1_), a2 = rows_of(a2_), h2 = rows_of(h2_);
    const Tensor a3 = rows_of(a3_), y = rows_of(y_);

    // bn3 (with the ReLU after the add): da3, and the gradient at the add for the shortcut,
    // written over dy, which nothing reads after bn3 (the batchnorm allows the alias).
    Tensor da3 = arena_->view(kGradOut, out4, cd);
    Tensor dpre = dy;
    bn_backward(be, ps, bn3_, dy, &y, a3, da3, &dpre);
    conv_backward_filter(be, ps, conv3_, h2, da3);
    Tensor dh2 = arena_->view(kGradA, h2.shape, cd);
    conv_backward_data(be, ps, conv3_, da3, dh2);

    Tensor da2 = arena_->view(kGradB, a2.shape, cd);
    bn_backward(be, ps, bn2_, dh2, &h2, a2, da2, nullptr);
    conv_backward_filter(be, ps, conv2_, h1, da2);
    Tensor dh1 = arena_->view(kGradA, h1.shape, cd);  // dh2 is consumed
    conv_backward_data(be, ps, conv2_, da2, dh1);

    Tensor da1 = arena_->view(kGradB, a1.shape, cd);  // da2 is consumed
    bn_backward(be, ps, bn1_, dh1, &h1, a1, da1, nullptr);
    conv_backward_filter(be, ps, conv1_, x_, da1);
    Tensor dx;
    if (need_dx) {
      dx = arena_->view(dx_slot(index_), x_.shape, cd);
      conv_backward_data(be, ps, conv1_, da1, dx);
    }

    if (proj_) {
      Tensor dsa = arena_->view(kGradOut, out4, cd);  // da3 is consumed
      bn_backward(be, ps, proj_bn_, dpre, nullptr, rows_of(sa_), dsa, nullptr);
      conv_backward_filter(be, ps, proj_conv_, x_, dsa);
      if (need_dx) {
        // The slot the next layer passed dy through (or cast it from): dpre is consumed.
        Tensor dxs = arena_->view(dx_slot(index_ + 1), x_.shape, cd);
        conv_backward_data(be, ps, proj_conv_, dsa, dxs);
        be.add(dx, dxs, dx);
      }
    } else if (need_dx) {
      be.add(dx, dpre, dx);
    }
    if (!need_dx) return Tensor{};
    const Shape flat{rows_, conv1_.in_numel()};
    if (input_dtype_ == cd) return dx.reshaped(flat);
    MPB_CHECK(dx_cast_.defined(), "{}: asked for dx, allocated without it (the first layer)",
              name_);
    Tensor dxc = rows_of(dx_cast_);
    be.cast(dx, dxc);
    return dxc.reshaped(flat);
  }

  LayerInfo info(DType input_dtype) const override {
    LayerInfo li;
    li.name = name_;
    li.kind = proj_ ? "bottleneck+proj" : "bottleneck";
    if (conv2_.stride != 1) li.kind += "/s" + std::to_string(conv2_.stride);
    li.output_shape = Shape{conv3_.p, conv3_.q, conv3_.k};
    li.compute_dtype = prec_.compute;
    li.storage_dtype = prec_.compute;
    // What this block's buffers keep for its backward (resnet.h, "Memory"): each convolution's
    // output (the batchnorm's input) and each batchnorm's; conv1 also a cast copy of the input.
    li.add_child(first_conv_row(conv1_, input_dtype));
    li.input_read_as_is = input_read_as_is(conv1_, input_dtype);
    li.add_child(bn_row(bn1_, "bn+relu", conv1_, conv1_.out_numel()));
    li.add_child(conv_row(conv2_, conv2_.out_numel()));
    li.add_child(bn_row(bn2_, "bn+relu", conv2_, conv2_.out_numel()));
    li.add_child(conv_row(conv3_, conv3_.out_numel()));
    li.add_child(bn_row(bn3_, "bn+add+relu", conv3_, conv3_.out_numel()));
    if (proj_) {
      li.add_child(conv_row(proj_conv_, proj_conv_.out_numel()));
      li.add_child(bn_row(proj_bn_, "bn", proj_conv_, 0));  // its output goes to the add only
    }
    li.input_flops = conv1_.flops() + (proj_ ? proj_conv_.flops() : 0);
    return li;
  }
  DType output_dtype(DType) const override { return prec_.compute; }

 private:
  std::vector<Bn*> bns() {
    std::vector<Bn*> v{&bn1_, &bn2_, &bn3_};
    if (proj_) v.push_back(&proj_bn_);
    return v;
  }

  int index_;
  Conv conv1_, conv2_, conv3_, proj_conv_;
  Bn bn1_, bn2_, bn3_, proj_bn_;
  bool proj_ = false;
  Tensor dx_cast_, a1_, h1_, a2_, h2_, a3_, sa_, y_;
};

// The ImageNet stem (resnet.h): conv 7x7 stride 2 pad 3 -> BN -> ReLU -> max pool 3x3 stride 2
// pad 1, on the fp32 pixels (cast to the compute dtype first in the AMP modes). It is the first
// layer, so its dx is never asked for.
class Stem : public ConvBnLayer {
 public:
  Stem(int64_t size, int64_t cin, int64_t cout, LayerPrecision prec,
       std::shared_ptr<SharedScratch> arena)
      : ConvBnLayer("stem", prec, std::move(arena)) {
    conv_ = Conv(name_ + ".conv", size, size, cin, cout, 7, 2);
    bn_ = Bn(name_ + ".bn", cout);
    pq_ = std::make_pair((conv_.p + 2 * pool_.pad - pool_.kernel) / pool_.stride + 1,
                         (conv_.q + 2 * pool_.pad - pool_.kernel) / pool_.stride + 1);
    const int64_t es = static_cast<int64_t>(dtype_size(prec_.compute));
    // The stem's backward runs last: the blocks' output gradient and the dx slot block 1 does not
    // write to (its dx, the stem's dy, is in dx_slot(1)) are free then.
    arena_->need_per_sample(kGradOut, conv_.out_numel() * es);
    arena_->need_per_sample(Bottleneck::dx_slot(0), conv_.out_numel() * es);
    if (prec_.compute != DType::F32)
      arena_->need_in_all(kDw, conv_.weight_shape().numel() * es, MemCategory::Gradients);
  }
  int64_t out_size() const { return pq_.first; }

  void declare_params(ParamStore& ps) override {
    conv_.declare(ps);
    bn_.declare(ps);
  }
  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype,
                bool /*need_dx: never, the data*/) override {
    arena_->allocate(alloc, batch);
    input_dtype_ = input_dtype;
    const DType cd = prec_.compute;
    if (input_dtype != cd)
      x_cast_ = alloc.alloc(Shape{batch, conv_.h, conv_.w, conv_.c}, cd, MemCategory::Activations);
    a_ = alloc.alloc(Shape{batch, conv_.p, conv_.q, conv_.k}, cd, MemCategory::Activations);
    h_ = alloc.alloc(Shape{batch, conv_.p, conv_.q, conv_.k}, cd, MemCategory::Activations);
    y_ = alloc.alloc(Shape{batch, pq_.first, pq_.second, conv_.k}, cd, MemCategory::Activations);
    bn_.allocate(alloc);
  }
  Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x_in) override {
    const Tensor x = take_input(be, x_in, conv_);
    Tensor a = rows_of(a_), h = rows_of(h_), y = rows_of(y_);
    conv_forward(be, ps, conv_, x, a);
    bn_forward(be, ps, bn_, a, nullptr, true, h);
    be.maxpool2d_forward(pool_, h, y);
    return y.reshaped(Shape{rows_, y.numel() / rows_});
  }
  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy_in, bool need_dx) override {
    MPB_CHECK(!need_dx, "{}: the first layer's input gradient is never needed", name_);
    const Tensor a = rows_of(a_), h = rows_of(h_);
    const Tensor dy = dy_in.reshaped(rows_of(y_).shape);
    Tensor dh = arena_->view(kGradOut, h.shape, prec_.compute);
    be.maxpool2d_backward(pool_, h, dy, dh);
    Tensor da = arena_->view(Bottleneck::dx_slot(0), a.shape, prec_.compute);
    bn_backward(be, ps, bn_, dh, &h, a, da, nullptr);
    conv_backward_filter(be, ps, conv_, x_, da);
    return Tensor{};
  }
  LayerInfo info(DType input_dtype) const override {
    LayerInfo li;
    li.name = name_;
    li.kind = "conv7x7/s2+bn+relu+maxpool3x3/s2";
    li.output_shape = Shape{pq_.first, pq_.second, conv_.k};
    li.compute_dtype = prec_.compute;
    li.storage_dtype = prec_.compute;
    li.add_child(first_conv_row(conv_, input_dtype));
    li.input_read_as_is = input_read_as_is(conv_, input_dtype);
    li.add_child(bn_row(bn_, "bn+relu", conv_, conv_.out_numel()));
    li.input_flops = conv_.flops();
    LayerInfo pool;
    pool.name = "maxpool";
    pool.kind = fmt::format("maxpool{}x{}/s{}", pool_.kernel, pool_.kernel, pool_.stride);
    pool.output_shape = li.output_shape;
    pool.compute_dtype = pool.storage_dtype = prec_.compute;  // a max is exact in any dtype
    pool.activation_bytes =
        pq_.first * pq_.second * conv_.k * static_cast<int64_t>(dtype_size(prec_.compute));
    li.add_child(pool);
    return li;
  }
  DType output_dtype(DType) const override { return prec_.compute; }

 private:
  Conv conv_;
  Bn bn_;
  PoolDesc pool_;  // 3x3, stride 2, pad 1
  std::pair<int64_t, int64_t> pq_;
  Tensor a_, h_, y_;
};

// Global average pooling: (rows, H*W*C) -> (rows, C) in the input's dtype (sums in fp32). Its
// dx goes to the arena's dx slot that the last block reads.
class GlobalAvgPool : public Layer {
 public:
  GlobalAvgPool(std::string name, int64_t hw, int64_t c, GradSlot dx_slot, DType expected_input,
                std::shared_ptr<SharedScratch> arena)
      : Layer(std::move(name)), hw_(hw), c_(c), dx_slot_(dx_slot), arena_(std::move(arena)) {
    arena_->need_per_sample(dx_slot_, hw_ * c_ * static_cast<int64_t>(dtype_size(expected_input)));
  }
  void declare_params(ParamStore&) override {}
  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype,
                bool /*need_dx: in the arena*/) override {
    arena_->allocate(alloc, batch);
    input_dtype_ = input_dtype;
    y_ = alloc.alloc(Shape{batch, c_}, input_dtype, MemCategory::Activations);
  }
  Tensor forward(Backend& be, const ParamStore&, const Tensor& x) override {
    rows_ = x.rows();
    MPB_CHECK(x.numel() == rows_ * hw_ * c_ && x.dtype == input_dtype_, "{}: input {} {}", name_,
              x.shape.str(), dtype_name(x.dtype));
    Tensor y = y_.slice(0, Shape{rows_, c_});
    be.avgpool_forward(x.reshaped(Shape{rows_, hw_, c_}), y);
    return y;
  }
  Tensor backward(Backend& be, const ParamStore&, const Tensor& dy, bool need_dx) override {
    MPB_CHECK(dy.numel() == rows_ * c_ && dy.dtype == input_dtype_, "{}: dy {} {}", name_,
              dy.shape.str(), dtype_name(dy.dtype));
    if (!need_dx) return Tensor{};
    Tensor dx = arena_->view(dx_slot_, Shape{rows_, hw_, c_}, input_dtype_);
    be.avgpool_backward(dy.reshaped(Shape{rows_, c_}), dx);
    return dx.reshaped(Shape{rows_, hw_ * c_});
  }
  LayerInfo info(DType input_dtype) const override {
    LayerInfo li;
    li.name = name_;
    li.kind = "avgpool";
    li.output_shape = Shape{c_};
    li.forward_flops = 0;           // FLOPs count GEMMs and convolutions only (README)
    li.compute_dtype = DType::F32;  // fp32 sums
    li.storage_dtype = input_dtype;
    li.activation_bytes = 0;  // backward needs only the shape
    return li;
  }
  DType output_dtype(DType input_dtype) const override { return input_dtype; }

 private:
  int64_t hw_, c_;
  GradSlot dx_slot_;
  std::shared_ptr<SharedScratch> arena_;
  DType input_dtype_ = DType::F32;
  int64_t rows_ = 0;
  Tensor y_;
};

}  // namespace

void build_resnet(const Spec& spec, const ResnetSpec& r, Precision precision,
                  std::vector<std::unique_ptr<Layer>>& layers) {
  const std::vector<ResnetStage> stages = r.stage_list();
  auto arena = std::make_shared<SharedScratch>(kGradSlots);
  auto prec = [&](const std::string& name) {
    return layer_precision(precision, spec.fp32_layers, name);
  };
  int64_t size = r.image_size, cin = r.in_channels;
  DType last = DType::F32;
  if (r.stem == "imagenet") {
    auto stem = std::make_unique<Stem>(size, cin, r.stem_channels, prec("stem"), arena);
    size = stem->out_size();
    cin = r.stem_channels;
    last = prec("stem").compute;
    layers.push_back(std::move(stem));
  }
  int index = 1;  // over all blocks: it picks the arena slots blocks pass their dx through
  for (size_t s = 0; s < stages.size(); ++s) {
    const ResnetStage& st = stages[s];
    MPB_CHECK(st.blocks >= 1 && size % st.stride == 0, "resnet: {} blocks, image {} stride {}",
              st.blocks, size, st.stride);
    for (int64_t b = 1; b <= st.blocks; ++b, ++index) {
      const std::string name =
          r.stages.empty() ? fmt::format("block{}", b) : fmt::format("stage{}.block{}", s + 1, b);
      const int64_t stride = b == 1 ? st.stride : 1;
      layers.push_back(std::make_unique<Bottleneck>(name, index, layers.empty(), size, cin,
                                                    st.width, st.out_channels, stride, prec(name),
                                                    arena));
      size = (size - 1) / stride + 1;  // the 3x3 pad-1 conv: (size + 2 - 3) / stride + 1
      cin = st.out_channels;
      last = prec(name).compute;
    }
  }
  layers.push_back(std::make_unique<GlobalAvgPool>("pool", size * size, cin,
                                                   Bottleneck::dx_slot(index), last, arena));
  layers.push_back(std::make_unique<Linear>("head", cin, r.num_classes, Activation::None,
                                            prec("head"), /*fp32_out=*/true));
}

// ---- the family's entry (models/family.h) ------------------------------------------------------

namespace {

nlohmann::json write_resnet(const ModelSpec& v) {
  const auto& m = std::get<ResnetSpec>(v);
  nlohmann::json j = {
      {"type", "resnet_bottleneck"}, {"image_size", m.image_size}, {"in_channels", m.in_channels}};
  if (m.stages.empty()) {
    j["width"] = m.width;
    j["out_channels"] = m.out_channels;
    j["blocks"] = m.blocks;
    j["stride"] = m.stride;
  } else {
    j["stages"] = nlohmann::json::array();
    for (const ResnetStage& st : m.stages)
      j["stages"].push_back({{"blocks", st.blocks},
                             {"width", st.width},
                             {"out_channels", st.out_channels},
                             {"stride", st.stride}});
  }
  j["stem"] = m.stem;
  if (m.stem != "none") j["stem_channels"] = m.stem_channels;
  j["num_classes"] = m.num_classes;
  return j;
}

constexpr spec_json::IntRange kChannels{1, 65536};
const char* const kSingleStageKeys[] = {"width", "out_channels", "blocks", "stride"};

ResnetStage read_stage(const spec_json::ObjectReader& r, const std::string& prefix) {
  ResnetStage st;
  st.width = r.integer(prefix + "width", kChannels, std::nullopt);
  st.out_channels = r.integer(prefix + "out_channels", kChannels, std::nullopt);
  st.blocks = r.integer(prefix + "blocks", kLayers, std::nullopt);
  st.stride = r.integer(prefix + "stride", {1, 2}, int64_t{1});
  return st;
}

ModelSpec read_resnet(const spec_json::ObjectReader& r) {
  ResnetSpec m;
  m.image_size = r.integer("image_size", {1, 4096}, std::nullopt);
  m.in_channels = r.integer("in_channels", kChannels, std::nullopt);
  m.num_classes = r.integer("num_classes", kClasses, std::nullopt);
  m.stem = r.choice("stem", {"none", "imagenet"}, "none");
  if (m.stem == "none" && r.has("stem_channels"))
    r.ctx().fail(r.sub("stem_channels"), "only with \"stem\": \"imagenet\"");
  m.stem_channels = r.integer("stem_channels", kChannels, int64_t{64});
  // The input of the first stage: the stem's 7x7 stride-2 pad-3 conv, then its 3x3 stride-2
  // pad-1 pool.
  int64_t size = m.image_size;
  if (m.stem == "imagenet") {
    if (size < 7) r.ctx().fail(r.sub("image_size"), "expected at least 7 with the imagenet stem");
    size = ((size - 1) / 2) / 2 + 1;
  }
  if (const nlohmann::json* stages = r.array("stages", false, "a list of stage objects")) {
    for (const char* key : kSingleStageKeys)
      if (r.has(key))
        r.ctx().fail(r.sub(key),
                     "not with model.stages: give either the stages, or width, "
                     "out_channels, blocks and stride");
    if (stages->empty() || stages->size() > static_cast<size_t>(kMaxLayers))
      r.ctx().fail(r.sub("stages"), fmt::format("expected 1 to {} stages", kMaxLayers));
    int64_t blocks = 0;  // a model of kMaxLayers blocks at most, as the other families' layers
    for (size_t i = 0; i < stages->size(); ++i) {
      const std::string path = fmt::format("{}[{}]", r.sub("stages"), i);
      const spec_json::ObjectReader sr(r.ctx(), (*stages)[i], path,
                                       {"blocks", "width", "out_channels", "stride"});
      m.stages.push_back(read_stage(sr, ""));
      blocks += m.stages.back().blocks;
      if (blocks > kMaxLayers)
        r.ctx().fail(path + ".blocks",
                     fmt::format("expected at most {} blocks over all stages, got {} by this stage",
                                 kMaxLayers, blocks));
    }
  } else {
    const ResnetStage st = read_stage(r, "");
    m.width = st.width;
    m.out_channels = st.out_channels;
    m.blocks = st.blocks;
    m.stride = st.stride;
  }
  // A stride-2 block halves the image; an odd size would leave the shortcut and the main path
  // with different shapes.
  const std::vector<ResnetStage> list = m.stage_list();
  for (size_t i = 0; i < list.size(); ++i) {
    if (size % list[i].stride != 0) {
      const std::string where =
          m.stages.empty() ? r.sub("image_size") : fmt::format("{}[{}].stride", r.sub("stages"), i);
      r.ctx().fail(where, m.stages.empty()
                              ? fmt::format("expected a multiple of stride {}, got {}",
                                            list[i].stride, m.image_size)
                              : fmt::format("stride {} does not divide the stage's input size {}",
                                            list[i].stride, size));
    }
    size /= list[i].stride;
  }
  return m;
}

// The image side after the stem and every stage's stride (read_resnet checked the divisions).
int64_t resnet_output_size(const ResnetSpec& r) {
  int64_t size = r.image_size;
  if (r.stem == "imagenet") size = ((size - 1) / 2) / 2 + 1;
  for (const ResnetStage& st : r.stage_list()) size /= st.stride;
  return size;
}

// Batchnorm statistics over more than one value per channel (the smallest batchnorm sees
// batch x (image_size / stride)^2 of them), and synthetic data with at least as many motif
// arrangements as classes.
void check_resnet(const spec_json::Ctx& ctx, const Spec& s) {
  require_synthetic_data(s);
  const auto& r = std::get<ResnetSpec>(s.model);
  const int64_t side = resnet_output_size(r);
  if (s.train.batch_size * side * side < 2) {
    ctx.fail("train.batch_size",
             fmt::format("expected batch_size x (the last stage's image side)^2 >= 2 "
                         "(batchnorm needs more than one value per channel), got {} x {}^2",
                         s.train.batch_size, side));
  }
  const int64_t max_classes = synthetic_image_max_classes(r);
  // Images with one arrangement take no num_classes (at least 2): the size is what to change.
  if (s.data.type == "synthetic" && max_classes < 2) {
    ctx.fail("model.image_size",
             fmt::format("expected at least 2 with synthetic data (each class is an "
                         "arrangement of the motif, and {}x{} images have only one), got {}",
                         r.image_size, r.image_size, r.image_size));
  }
  if (s.data.type == "synthetic" && r.num_classes > max_classes) {
    ctx.fail("model.num_classes",
             fmt::format("expected at most {} for synthetic {}x{} images (the distinct "
                         "arrangements of their motif), got {}",
                         max_classes, r.image_size, r.image_size, r.num_classes));
  }
}

Footprint resnet_footprint(const ModelSpec& v) {
  const auto& r = std::get<ResnetSpec>(v);
  Footprint f;
  double side = static_cast<double>(r.image_size), cin = static_cast<double>(r.in_channels);
  f.activations_per_sample = side * side * cin;
  if (r.stem == "imagenet") {
    const double c = static_cast<double>(r.stem_channels);
    f.params += 49 * cin * c + 2 * c;
    side = std::floor((side - 1) / 2) + 1;
    f.activations_per_sample += side * side * c * 2;  // the conv output and its BN + ReLU
    side = std::floor((side - 1) / 2) + 1;
    f.activations_per_sample += side * side * c;  // the pool
    cin = c;
  }
  for (const ResnetStage& st : r.stage_list()) {
    const double w = static_cast<double>(st.width), out = static_cast<double>(st.out_channels);
    for (int64_t b = 0; b < st.blocks; ++b) {
      const bool proj = b == 0 && (st.stride != 1 || cin != out);
      // Three convs with their batchnorms' gamma and beta, and the projection's conv and batchnorm.
      f.params +=
          cin * w + 9 * w * w + w * out + 2 * (2 * w + out) + (proj ? cin * out + 2 * out : 0);
      if (b == 0) side = std::floor(side / static_cast<double>(st.stride));
      // Three conv outputs with their BN and ReLU copies, and the projection.
      f.activations_per_sample += side * side * (2 * (2 * w + out) + (proj ? out : 0));
      cin = out;
    }
  }
  f.params += cin * static_cast<double>(r.num_classes) + static_cast<double>(r.num_classes);
  f.inputs_per_sample = static_cast<double>(r.image_size) * r.image_size * r.in_channels;
  f.inputs_what = "model.image_size^2 x model.in_channels";
  return f;
}

ModelIo resnet_io(const ModelSpec& v) {
  const auto& r = std::get<ResnetSpec>(v);
  ModelIo io;
  io.input_dim = r.image_size * r.image_size * r.in_channels;  // NHWC pixels
  io.num_classes = r.num_classes;
  return io;
}

}  // namespace

Family resnet_family() {
  return {"resnet_bottleneck",
          {"image_size", "in_channels", "width", "out_channels", "blocks", "stride", "stages",
           "stem", "stem_channels", "num_classes"},
          [](const ModelSpec& m) { return std::holds_alternative<ResnetSpec>(m); },
          read_resnet,
          write_resnet,
          check_resnet,
          resnet_footprint,
          resnet_io,
          [](const Spec& s, Precision p, std::vector<std::unique_ptr<Layer>>& layers) {
            build_resnet(s, std::get<ResnetSpec>(s.model), p, layers);
          },
          [](const Spec& s, const DataProgress& progress) {
            const DataSpec& d = s.data;
            return make_synthetic_images(std::get<ResnetSpec>(s.model), d.train_samples,
                                         d.eval_samples, d.seed, SyntheticImageTask{}, progress);
          }};
}

}  // namespace mpbench
