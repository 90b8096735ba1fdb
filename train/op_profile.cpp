#include "train/op_profile.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include <fmt/format.h>

#include "train/device_specs.h"

namespace mpbench {

namespace {

// Pending event pairs kept before they are read back: bounds the events alive at once (a long
// profile of a small model enqueues many thousands of ops) at the cost of one wait per batch.
constexpr size_t kMaxPending = 4096;

// The bytes an op must move at the least: each tensor it reads or writes once per read and per
// write (a tensor read and written back is listed twice), nullptr for one it does not touch.
// Against the time, the bandwidth it achieved: what judges a memory-bound op.
double nbytes(std::initializer_list<const Tensor*> tensors) {
  double b = 0;
  for (const Tensor* t : tensors)
    if (t) b += static_cast<double>(t->bytes());
  return b;
}

std::string shape_dtype(const Tensor& t) {
  return fmt::format("{} {}", t.shape.str(), dtype_name(t.dtype));
}

// "(256, 56, 56, 64) k64 3x3/s1 bf16": the input (or dy) shape, the filter, the dtype.
std::string conv_detail(const ConvDesc& d, const Tensor& act, const Tensor& w) {
  if (w.shape.rank != 4) return shape_dtype(act);
  return fmt::format("{} k{} {}x{}/s{} {}", act.shape.str(), w.shape[0], w.shape[1], w.shape[2],
                     d.stride, dtype_name(act.dtype));
}

// 2 * N*P*Q * K * R*S*C for every pass of a convolution: y (or dy) holds N*P*Q*K values, each a
// dot product of length R*S*C (w's numel over K).
double conv_flops(const Tensor& y, const Tensor& w) {
  if (w.shape.rank != 4 || w.shape[0] == 0) return 0;
  return 2.0 * static_cast<double>(y.numel()) * static_cast<double>(w.numel() / w.shape[0]);
}

struct GemmSizes {
  int64_t m = 0, n = 0, k = 0, batch = 1;
};
GemmSizes gemm_sizes(const GemmDesc& d, const Tensor& a, const Tensor& c) {
  GemmSizes s;
  if (c.shape.rank < 2 || a.shape.rank < 2) return s;
  s.m = c.shape[-2];
  s.n = c.shape[-1];
  s.k = d.trans_a ? a.shape[-2] : a.shape[-1];
  s.batch = c.shape.rank == 3 ? c.shape[0] : 1;
  return s;
}

}  // namespace

std::string gemm_detail(const GemmDesc& d, const Tensor& a, const Tensor& c) {
  const GemmSizes s = gemm_sizes(d, a, c);
  std::string out = fmt::format("{}x{}x{}", s.m, s.n, s.k);
  if (s.batch > 1) out += fmt::format(" b{}", s.batch);
  out += fmt::format(" {}", dtype_name(a.dtype));
  if (c.dtype != a.dtype) out += fmt::format("->{}", dtype_name(c.dtype));
  if (d.math == GemmMath::TF32) out += " tf32";
  if (d.bias) out += " +bias";
  if (d.act != Activation::None) out += fmt::format(" +{}", activation_name(d.act));
  if (d.dact != Activation::None) out += fmt::format(" d{}", activation_name(d.dact));
  if (d.dbias) out += " +dbias";
  return out;
}

double gemm_flops(const GemmDesc& d, const Tensor& a, const Tensor& c) {
  const GemmSizes s = gemm_sizes(d, a, c);
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) *
         static_cast<double>(s.batch);
}

ProfiledRun profile_training(const Spec& spec, const Dataset& data, Precision p, int64_t steps,
                             Backend& be, TrainOptions opts) {
  ProfiledRun out;
  OpProfiler prof(be);
  const int64_t warmup = spec.train.warmup_steps;
  opts.layer_observer = &prof;
  // The first `steps` training steps after the warm-up are timed; warm-up and evaluation not.
  opts.on_phase = [&](TrainPhase phase) {
    const bool timed = phase == TrainPhase::Step && out.steps < steps;
    if (timed) ++out.steps;
    prof.set_enabled(timed);
  };
  out.run = train_and_measure(spec, data, p, prof, opts);
  if (out.run.status != RunStatus::Ok) return out;
  out.ops = prof.collect();
  std::vector<double> times;  // of the profiled steps, the first `steps` after the warm-up
  const int64_t end = std::min<int64_t>(warmup + out.steps, out.run.steps.size());
  for (int64_t i = warmup; i < end; ++i)
    if (!std::isnan(out.run.steps[i].time_ms)) times.push_back(out.run.steps[i].time_ms);
  out.step_ms = compute_time_stats(times).median;
  return out;
}

std::optional<Ceilings> ceilings_for(const DeviceInfo& device, Precision p) {
  if (device.kind != "cuda") return std::nullopt;
  const auto sheet = find_datasheet(device.name);
  if (!sheet) return std::nullopt;
  return Ceilings{peak_tflops(*sheet, p), sheet->memory_gbps};
}

std::optional<double> percent_of_ceiling(const OpTotal& op, const Ceilings& c) {
  if (!(op.ms > 0)) return std::nullopt;
  const double seconds = op.ms * 1e-3;
  if (op.flops > 0 && c.peak_tflops > 0) return 100.0 * op.flops / seconds / (c.peak_tflops * 1e12);
  if (op.bytes > 0 && c.memory_gbps > 0) return 100.0 * op.bytes / seconds / (c.memory_gbps * 1e9);
  return std::nullopt;
}

void OpProfiler::on_layer(const std::string& layer, bool backward) {
  scope_ = layer.empty() ? "step" : layer + (backward ? " bwd" : " fwd");
}

template <typename F>
void OpProfiler::timed(const char* op, const std::string& detail, double flops, double bytes,
                       F&& f) {
  auto [it, inserted] =
      index_.try_emplace(std::make_tuple(scope_, std::string(op), detail), totals_.size());
  if (inserted) totals_.push_back(OpTotal{scope_, op, detail});
  auto take = [&] {
    if (spare_.empty()) return inner_.create_event();
    auto e = std::move(spare_.back());
    spare_.pop_back();
    return e;
  };
  Pending p{it->second, take(), take()};
  p.start->record();
  f();
  p.stop->record();
  totals_[p.total].calls += 1;
  totals_[p.total].flops += flops;
  totals_[p.total].bytes += bytes;
  pending_.push_back(std::move(p));
  if (pending_.size() >= kMaxPending) resolve();
}

void OpProfiler::resolve() {
  for (auto& p : pending_) {
    totals_[p.total].ms += p.stop->elapsed_ms(*p.start);
    spare_.push_back(std::move(p.start));
    spare_.push_back(std::move(p.stop));
  }
  pending_.clear();
}

std::vector<OpTotal> OpProfiler::collect() {
  resolve();
  return totals_;
}

// Each op's detail, FLOPs and bytes are worked out only when enabled: formatting every op's
// shapes would add host time to the warm-up and evaluation steps for nothing.
#define MPB_PROFILED(op, detail, flops, bytes, call)         \
  do {                                                       \
    if (!enabled_) {                                         \
      inner_.call;                                           \
    } else {                                                 \
      timed(op, detail, flops, bytes, [&] { inner_.call; }); \
    }                                                        \
  } while (0)

void OpProfiler::fill(Tensor& t, float value) {
  MPB_PROFILED("fill", shape_dtype(t), 0, nbytes({&t}), fill(t, value));
}
void OpProfiler::copy(const Tensor& src, Tensor& dst) {
  MPB_PROFILED("copy", shape_dtype(src), 0, nbytes({&src, &dst}), copy(src, dst));
}
// GEMMs are judged by FLOPs; their bytes are left out (0), as for convolutions.
void OpProfiler::gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c) {
  MPB_PROFILED("gemm", gemm_detail(d, a, c), gemm_flops(d, a, c), 0, gemm(d, a, b, c));
}
void OpProfiler::bias_act_backward(Activation act, const Tensor& dy, const Tensor& pre_act,
                                   Tensor& dx, Tensor* dbias) {
  MPB_PROFILED(
      "bias_act_backward",
      fmt::format("{} {}{}", shape_dtype(dy), activation_name(act), dbias ? " +dbias" : ""), 0,
      nbytes({&dy, act == Activation::None ? nullptr : &pre_act, &dx, dbias}),
      bias_act_backward(act, dy, pre_act, dx, dbias));
}
void OpProfiler::softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                              const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct) {
  MPB_PROFILED("softmax_xent", shape_dtype(logits), 0, nbytes({&logits, &labels, dlogits}),
               softmax_xent(logits, labels, dlogits, grad_scale, loss_sum, correct));
}
void OpProfiler::cast(const Tensor& src, Tensor& dst) {
  MPB_PROFILED("cast", fmt::format("{}->{}", shape_dtype(src), dtype_name(dst.dtype)), 0,
               nbytes({&src, &dst}), cast(src, dst));
}
// Read, and written back when unscaled.
void OpProfiler::unscale_check_norm(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                                    Tensor& norm) {
  MPB_PROFILED("unscale_check_norm", shape_dtype(grads), 0,
               nbytes({&grads, scale ? &grads : nullptr}),
               unscale_check_norm(grads, scale, found_inf, norm));
}
// Master, m and v read and written, the gradients read, the 16-bit copy written.
void OpProfiler::adamw_step(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m,
                            Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                            const Tensor* found_inf) {
  MPB_PROFILED("adamw_step", shape_dtype(master), 0,
               nbytes({&master, &master, &grads, &m, &m, &v, &v, weights_lowp}),
               adamw_step(p, master, grads, m, v, weights_lowp, step_count, found_inf));
}
void OpProfiler::sgd_step(const SgdParams& p, Tensor& master, const Tensor& grads,
                          Tensor& momentum_buf, Tensor* weights_lowp, const Tensor* found_inf) {
  const Tensor* mom = p.momentum != 0.0f ? &momentum_buf : nullptr;
  MPB_PROFILED("sgd_step", shape_dtype(master), 0,
               nbytes({&master, &master, &grads, mom, mom, weights_lowp}),
               sgd_step(p, master, grads, momentum_buf, weights_lowp, found_inf));
}
void OpProfiler::update_loss_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                                   double growth_factor, double backoff_factor,
                                   int32_t growth_interval) {
  MPB_PROFILED("update_loss_scale", "", 0, 0,
               update_loss_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                 growth_interval));
}
void OpProfiler::count_step(Tensor& step_count, const Tensor* found_inf) {
  MPB_PROFILED("count_step", "", 0, 0, count_step(step_count, found_inf));
}
void OpProfiler::conv2d_forward(const ConvDesc& d, const Tensor& x, const Tensor& w, Tensor& y) {
  MPB_PROFILED("conv2d_forward", conv_detail(d, x, w), conv_flops(y, w), 0,
               conv2d_forward(d, x, w, y));
}
void OpProfiler::conv2d_backward_data(const ConvDesc& d, const Tensor& dy, const Tensor& w,
                                      Tensor& dx) {
  MPB_PROFILED("conv2d_backward_data", conv_detail(d, dx, w), conv_flops(dy, w), 0,
               conv2d_backward_data(d, dy, w, dx));
}
void OpProfiler::conv2d_backward_filter(const ConvDesc& d, const Tensor& x, const Tensor& dy,
                                        Tensor& dw) {
  MPB_PROFILED("conv2d_backward_filter", conv_detail(d, x, dw), conv_flops(dy, dw), 0,
               conv2d_backward_filter(d, x, dy, dw));
}
void OpProfiler::batchnorm_forward_train(const BatchNormDesc& d, const Tensor& x,
                                         const Tensor* residual, const Tensor& gamma,
                                         const Tensor& beta, Tensor& running_mean,
                                         Tensor& running_var, Tensor& save_mean, Tensor& save_rstd,
                                         Tensor& y) {
  MPB_PROFILED(
      "batchnorm_forward_train",
      fmt::format("{}{}{}", shape_dtype(x), residual ? " +residual" : "", d.relu ? " +relu" : ""),
      0, nbytes({&x, residual, &y}),
      batchnorm_forward_train(d, x, residual, gamma, beta, running_mean, running_var, save_mean,
                              save_rstd, y));
}
void OpProfiler::batchnorm_forward_eval(const BatchNormDesc& d, const Tensor& x,
                                        const Tensor* residual, const Tensor& gamma,
                                        const Tensor& beta, const Tensor& running_mean,
                                        const Tensor& running_var, Tensor& y) {
  MPB_PROFILED("batchnorm_forward_eval", shape_dtype(x), 0, nbytes({&x, residual, &y}),
               batchnorm_forward_eval(d, x, residual, gamma, beta, running_mean, running_var, y));
}
void OpProfiler::batchnorm_backward(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                                    const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_rstd, Tensor& dx, Tensor& dgamma,
                                    Tensor& dbeta, Tensor* d_pre) {
  MPB_PROFILED(
      "batchnorm_backward",
      fmt::format("{}{}{}", shape_dtype(x), relu_out ? " +relu" : "", d_pre ? " +d_pre" : ""), 0,
      nbytes({&dy, relu_out, &x, &dx, d_pre}),
      batchnorm_backward(dy, relu_out, x, gamma, save_mean, save_rstd, dx, dgamma, dbeta, d_pre));
}
void OpProfiler::avgpool_forward(const Tensor& x, Tensor& y) {
  MPB_PROFILED("avgpool_forward", shape_dtype(x), 0, nbytes({&x, &y}), avgpool_forward(x, y));
}
void OpProfiler::avgpool_backward(const Tensor& dy, Tensor& dx) {
  MPB_PROFILED("avgpool_backward", shape_dtype(dx), 0, nbytes({&dy, &dx}),
               avgpool_backward(dy, dx));
}
void OpProfiler::add(const Tensor& a, const Tensor& b, Tensor& out) {
  MPB_PROFILED("add",
               fmt::format("{}+{}->{}", shape_dtype(a), dtype_name(b.dtype), dtype_name(out.dtype)),
               0, nbytes({&a, &b, &out}), add(a, b, out));
}
void OpProfiler::layernorm_forward(float eps, const Tensor& x, const Tensor& gamma,
                                   const Tensor& beta, Tensor& y, Tensor& mean, Tensor& rstd) {
  MPB_PROFILED("layernorm_forward", fmt::format("{}->{}", shape_dtype(x), dtype_name(y.dtype)), 0,
               nbytes({&x, &y}), layernorm_forward(eps, x, gamma, beta, y, mean, rstd));
}
void OpProfiler::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                    const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                    Tensor& dgamma, Tensor& dbeta) {
  MPB_PROFILED("layernorm_backward", shape_dtype(x), 0, nbytes({&dy, &x, &dx}),
               layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta));
}
// The table rows gathered are as many fp32 values as y has elements, read twice (token and
// position).
void OpProfiler::embedding_forward(const Tensor& tokens, const Tensor& tok_emb,
                                   const Tensor& pos_emb, Tensor& y) {
  MPB_PROFILED("embedding_forward", shape_dtype(y), 0,
               nbytes({&tokens, &y}) + 2.0 * 4.0 * static_cast<double>(y.numel()),
               embedding_forward(tokens, tok_emb, pos_emb, y));
}
void OpProfiler::embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dtok_emb,
                                    Tensor& dpos_emb) {
  MPB_PROFILED("embedding_backward", shape_dtype(dy), 0,
               nbytes({&tokens, &dy, &dtok_emb, &dpos_emb}),
               embedding_backward(tokens, dy, dtok_emb, dpos_emb));
}
void OpProfiler::permute(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) {
  std::string order;
  for (int i = 0; i < src.shape.rank; ++i) order += std::to_string(perm[i]);
  MPB_PROFILED("permute", fmt::format("{} [{}]", shape_dtype(src), order), 0, nbytes({&src, &dst}),
               permute(src, dst, perm));
}
void OpProfiler::attention_softmax_forward(const Tensor& x, float scale, bool causal, Tensor& y) {
  MPB_PROFILED(
      "attention_softmax_forward",
      fmt::format("{}->{}{}", shape_dtype(x), dtype_name(y.dtype), causal ? " causal" : ""), 0,
      nbytes({&x, &y}), attention_softmax_forward(x, scale, causal, y));
}
void OpProfiler::attention_softmax_backward(const Tensor& dy, const Tensor& y, float scale,
                                            Tensor& dx) {
  MPB_PROFILED("attention_softmax_backward", shape_dtype(dy), 0, nbytes({&dy, &y, &dx}),
               attention_softmax_backward(dy, y, scale, dx));
}

#undef MPB_PROFILED

}  // namespace mpbench
