// Batch normalisation on oneDNN's batch_normalization primitives (JIT-vectorised, on all
// threads), f32 or bf16 data with fp32 statistics, scale and shift, on the (rows, C) channels-last
// rows the models keep. oneDNN 2.6 has no residual add in it: with a residual, y = [relu](bn(x) +
// residual) is the primitive into y, then a binary add (ReLU as its post-op) in place, each
// rounded to y's dtype as PyTorch's eager ops round; without one, the ReLU is fused. oneDNN keeps
// the variance where the models keep 1 / sqrt(var + eps): converted per channel both ways. The
// backward masks dy by the forward's y (a threaded select), then runs the primitive's backward.
// Mixed dtypes and aliasing the primitives do not take run the reference's loops, and so do the
// shapes oneDNN has no JIT kernel for: bf16 under 16 channels gets its generic nspc_bnorm:any in
// 2.6, which took 3.1 ms of tiny_resnet's amp_bf16 step where the reference's loops take 0.9.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ops.h"
#include "kernels/onednn/onednn_backend.h"
#include "kernels/onednn/parallel.h"

namespace mpbench::onednn {
namespace {

using flags = dnnl::normalization_flags;

// (rows, C) as oneDNN's channels-last (N = rows, 1 x 1 spatial): statistics over the rows.
dnnl::memory::desc rows_md(const Tensor& t) {
  return {{t.rows(), t.cols(), 1, 1}, data_type(t.dtype), dnnl::memory::format_tag::nhwc};
}
dnnl::memory::desc channel_md(int64_t c) {
  return {{c}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a};
}

// The forward primitive's flags: scale and shift always, the ReLU fused when there is no residual.
flags forward_flags(bool training, bool fuse_relu) {
  flags f = flags::use_scale | flags::use_shift;
  if (!training) f = f | flags::use_global_stats;
  if (fuse_relu) f = f | flags::fuse_norm_relu;
  return f;
}

// g = relu_out > 0 ? dy : 0, one dtype, on all threads: a select, as the reference and PyTorch's
// threshold_backward (oneDNN's ReLU backward multiplies by 0, giving -0, and NaN for a
// non-finite dy). g may alias dy.
void relu_mask(const Tensor& dy, const Tensor& relu_out, Tensor& g) {
  cpu::detail::dispatch_float(dy.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* pdy = dy.ptr<T>();
    const T* pro = relu_out.ptr<T>();
    T* pg = g.ptr<T>();
    parallel_ranges(dy.numel(), kGrain, [&](int64_t, int64_t begin, int64_t n) {
      // Local pointers and both loads before the select: a branch-free loop that vectorises.
      const T* d = pdy + begin;
      const T* r = pro + begin;
      T* o = pg + begin;
      for (int64_t i = 0; i < n; ++i) {
        const T v = d[i];
        o[i] = E::load(r[i]) > 0.0f ? v : T(0);
      }
    });
  });
}

// Whether oneDNN runs a JIT kernel for the primitive, not its generic C++ one.
bool jit(const OnednnBackend::Cached& p) {
  return p.impl.find("jit") != std::string::npos;
}

// The forward primitives take one dtype for x and y (the residual may differ), and y must not be
// the residual, which the add reads after the primitive wrote y.
bool forward_fits(const OnednnBackend& be, const Tensor& x, const Tensor* residual,
                  const Tensor& y) {
  return be.native_dtype(x.dtype) && x.dtype == y.dtype &&
         (!residual || (be.native_dtype(residual->dtype) && residual->data != y.data));
}

}  // namespace

bool OnednnBackend::batchnorm_forward(const BatchNormDesc& d, bool training, const Tensor& x,
                                      const Tensor* residual, const Tensor& gamma,
                                      const Tensor& beta, const Tensor& mean, const Tensor& var,
                                      Tensor& y) {
  const dnnl::memory::desc md = rows_md(x), cmd = channel_md(x.cols());
  const bool fuse_relu = d.relu && !residual;
  Cached& p = primitive(
      fmt::format("bnorm_fwd {} {} {}x{} eps {} relu {}", training ? "train" : "eval",
                  dtype_name(x.dtype), x.rows(), x.cols(), d.eps, fuse_relu),
      [&] {
        return dnnl::batch_normalization_forward::primitive_desc(
            {training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, md,
             d.eps, forward_flags(training, fuse_relu)},
            user_scratchpad(), engine_);
      });
  if (!jit(p)) return false;
  // Workspace: [the fused ReLU's mask (training only; backward masks by y instead) | scratchpad].
  const dnnl::memory::desc mask_md = p.pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WORKSPACE);
  const size_t mask = align64(mask_md.get_size());
  char* ws = workspace(mask + p.scratchpad_bytes);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(md, engine_, x.data)},
      {DNNL_ARG_DST, dnnl::memory(md, engine_, y.data)},
      {DNNL_ARG_MEAN, dnnl::memory(cmd, engine_, mean.data)},
      {DNNL_ARG_VARIANCE, dnnl::memory(cmd, engine_, var.data)},
      {DNNL_ARG_SCALE, dnnl::memory(cmd, engine_, gamma.data)},
      {DNNL_ARG_SHIFT, dnnl::memory(cmd, engine_, beta.data)}};
  if (mask) args[DNNL_ARG_WORKSPACE] = dnnl::memory(mask_md, engine_, ws);
  execute(p, args, mask);
  if (residual) binary_add(y, *residual, y, d.relu);
  return true;
}

void OnednnBackend::batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x,
                                                 const Tensor* residual, const Tensor& gamma,
                                                 const Tensor& beta, Tensor& running_mean,
                                                 Tensor& running_var, Tensor& save_mean,
                                                 Tensor& save_rstd, Tensor& y) {
  // The primitive writes the mean into save_mean and the (biased) variance into save_rstd,
  // which the shared statistics step turns into 1 / sqrt(var + eps) and the running update.
  if (!forward_fits(*this, x, residual, y) ||
      !batchnorm_forward(d, true, x, residual, gamma, beta, save_mean, save_rstd, y)) {
    ++fallback_calls_["batchnorm_forward_train"];
    CpuBackend::batchnorm_forward_train_impl(d, x, residual, gamma, beta, running_mean, running_var,
                                             save_mean, save_rstd, y);
    return;
  }
  const int64_t c = x.cols(), rows = x.rows();
  std::vector<double> mean(static_cast<size_t>(c)), sq(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) {
    mean[j] = save_mean.ptr<float>()[j];
    sq[j] = static_cast<double>(save_rstd.ptr<float>()[j]) * static_cast<double>(rows);
  }
  cpu::batchnorm_statistics(d, rows, mean.data(), sq.data(), save_mean, save_rstd, running_mean,
                            running_var);
}

void OnednnBackend::batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x,
                                                const Tensor* residual, const Tensor& gamma,
                                                const Tensor& beta, const Tensor& running_mean,
                                                const Tensor& running_var, Tensor& y) {
  if (!forward_fits(*this, x, residual, y) ||
      !batchnorm_forward(d, false, x, residual, gamma, beta, running_mean, running_var, y)) {
    ++fallback_calls_["batchnorm_forward_eval"];
    CpuBackend::batchnorm_forward_eval_impl(d, x, residual, gamma, beta, running_mean, running_var,
                                            y);
  }
}

// g = dy masked by relu_out > 0 (into d_pre, else into dx), then the primitive's backward from g
// into dx (in place when g is in dx). Needs one dtype for dy, x, dx (and relu_out, d_pre), and dx
// and d_pre apart from x, which the backward reads after g is written.
void OnednnBackend::batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out,
                                            const Tensor& x, const Tensor& gamma,
                                            const Tensor& save_mean, const Tensor& save_rstd,
                                            Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                            Tensor* d_pre) {
  const DType t = x.dtype;
  const int64_t c = x.cols();
  // The primitive takes 1 / sqrt(var + eps): with eps 0 here, var = 1 / rstd^2 gives back the
  // forward's rstd, eps included, without subtracting it.
  const float eps = 0.0f;
  const dnnl::memory::desc md = rows_md(x), cmd = channel_md(c);
  auto primitive_jit = [&] {
    Cached& p = primitive(fmt::format("bnorm_bwd {} {}x{}", dtype_name(t), x.rows(), c), [&] {
      const flags f = flags::use_scale | flags::use_shift;
      const dnnl::batch_normalization_forward::primitive_desc hint(
          {dnnl::prop_kind::forward_training, md, eps, f}, engine_);
      return dnnl::batch_normalization_backward::primitive_desc(
          {dnnl::prop_kind::backward, md, md, eps, f}, user_scratchpad(), engine_, hint);
    });
    return jit(p) ? &p : nullptr;
  };
  Cached* p = nullptr;
  if (!native_dtype(t) || dy.dtype != t || dx.dtype != t || (relu_out && relu_out->dtype != t) ||
      (d_pre && (d_pre->dtype != t || d_pre->data == dx.data || d_pre->data == x.data)) ||
      dx.data == x.data || !(p = primitive_jit())) {
    ++fallback_calls_["batchnorm_backward"];
    CpuBackend::batchnorm_backward_impl(dy, relu_out, x, gamma, save_mean, save_rstd, dx, dgamma,
                                        dbeta, d_pre);
    return;
  }
  Tensor g = dy;
  if (relu_out) {
    g = d_pre ? *d_pre : dx;
    relu_mask(dy, *relu_out, g);
  } else if (d_pre) {
    if (d_pre->data != dy.data) copy_impl(dy, *d_pre);
    g = *d_pre;
  }
  // It also asks for the shift, which no gradient depends on: zeros.
  std::vector<float> var(static_cast<size_t>(c)), shift(static_cast<size_t>(c), 0.0f);
  for (int64_t j = 0; j < c; ++j) {
    const double r = save_rstd.ptr<float>()[j];
    var[j] = static_cast<float>(1.0 / (r * r));
  }
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(md, engine_, x.data)},
      {DNNL_ARG_MEAN, dnnl::memory(cmd, engine_, save_mean.data)},
      {DNNL_ARG_VARIANCE, dnnl::memory(cmd, engine_, var.data())},
      {DNNL_ARG_SCALE, dnnl::memory(cmd, engine_, gamma.data)},
      {DNNL_ARG_SHIFT, dnnl::memory(cmd, engine_, shift.data())},
      {DNNL_ARG_DIFF_DST, dnnl::memory(md, engine_, g.data)},
      {DNNL_ARG_DIFF_SRC, dnnl::memory(md, engine_, dx.data)},
      {DNNL_ARG_DIFF_SCALE, dnnl::memory(cmd, engine_, dgamma.data)},
      {DNNL_ARG_DIFF_SHIFT, dnnl::memory(cmd, engine_, dbeta.data)}};
  execute(*p, args);
}

}  // namespace mpbench::onednn
