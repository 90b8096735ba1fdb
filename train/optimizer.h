#pragma once
// Optimizers over the model's flat fp32 master weights; state lives in the allocator's
// optimizer_state category. In AMP modes each step also writes the fp16/bf16 weight copies.
#include <memory>

#include "models/model.h"

namespace mpbench {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // found_inf: skip the step when set (dynamic loss scaling); step_count: steps already taken.
  virtual void step(Backend& be, ParamStore& ps, const Tensor* found_inf,
                    const Tensor& step_count) = 0;
  static std::unique_ptr<Optimizer> make(const OptimizerSpec& spec, ParamStore& ps,
                                         TrackingAllocator& alloc, Backend& be);
};

}  // namespace mpbench
