#include "train/optimizer.h"

namespace mpbench {

namespace {

class AdamW : public Optimizer {
 public:
  AdamW(const OptimizerSpec& s, ParamStore& ps, TrackingAllocator& alloc, Backend& be) {
    // "adam" with weight decay is run as AdamW (decoupled decay); with decay 0 they agree.
    p_ = AdamWParams{s.lr, s.beta1, s.beta2, s.eps, s.weight_decay};
    m_ = alloc.alloc(Shape{ps.numel()}, DType::F32, MemCategory::OptimizerState);
    v_ = alloc.alloc(Shape{ps.numel()}, DType::F32, MemCategory::OptimizerState);
    if (alloc.counting()) return;
    be.fill(m_, 0.0f);
    be.fill(v_, 0.0f);
  }
  void step(Backend& be, ParamStore& ps, const Tensor* found_inf,
            const Tensor& step_count) override {
    be.adamw_step(p_, ps.master_flat(), ps.grads_flat(), m_, v_, ps.lowp_flat(), step_count,
                  found_inf);
  }

 private:
  AdamWParams p_;
  Tensor m_, v_;
};

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerSpec& s, ParamStore& ps, TrackingAllocator& alloc, Backend& be) {
    // fp32, as PyTorch's Python floats become when they meet an fp32 tensor.
    p_ = SgdParams{static_cast<float>(s.lr), static_cast<float>(s.momentum),
                   static_cast<float>(s.weight_decay), s.nesterov};
    // Without momentum PyTorch keeps no buffer, and sgd_step reads none.
    if (p_.momentum == 0.0f) return;
    buf_ = alloc.alloc(Shape{ps.numel()}, DType::F32, MemCategory::OptimizerState);
    if (!alloc.counting()) be.fill(buf_, 0.0f);
  }
  void step(Backend& be, ParamStore& ps, const Tensor* found_inf, const Tensor&) override {
    be.sgd_step(p_, ps.master_flat(), ps.grads_flat(), buf_, ps.lowp_flat(), found_inf);
  }

 private:
  SgdParams p_;
  Tensor buf_;
};

}  // namespace

std::unique_ptr<Optimizer> Optimizer::make(const OptimizerSpec& spec, ParamStore& ps,
                                           TrackingAllocator& alloc, Backend& be) {
  if (spec.type == "sgd") return std::make_unique<Sgd>(spec, ps, alloc, be);
  return std::make_unique<AdamW>(spec, ps, alloc, be);
}

}  // namespace mpbench
