#include "models/fp8_scaling.h"

namespace mpbench {

int Fp8Scaling::declare(const std::string& name, DType format) {
  MPB_CHECK(is_fp8(format), "{}: {} is not an fp8 dtype", name, dtype_name(format));
  const int i = size();
  names_.push_back(name);
  formats_.push_back(format);
  Group& g = groups_[group_of(i)];
  rows_.push_back(static_cast<int>(g.tensors.size()) * kSlot);
  g.tensors.push_back(i);
  return i;
}

void Fp8Scaling::allocate(TrackingAllocator& alloc, Backend& be, const DelayedScalingRecipe& r) {
  recipe_ = r;
  for (Group& g : groups_) {
    if (g.tensors.empty()) continue;
    // The unused rows of each slot stay at history 0, so their updates leave their scale at 1.
    const auto t = static_cast<int64_t>(g.tensors.size()) * kSlot;
    // Training state like the optimizer's: it lives as long as the weights do.
    auto vec = [&](Shape s) { return alloc.alloc(s, DType::F32, MemCategory::OptimizerState); };
    g.history = vec(Shape{r.amax_history_len, t});
    g.scale = vec(Shape{t});
    g.scale_inv = vec(Shape{t});
    g.amax_used = vec(Shape{t});
    if (alloc.counting()) continue;
    be.fill(g.history, 0.0f);
    be.fill(g.scale, 1.0f);
    be.fill(g.scale_inv, 1.0f);
    be.fill(g.amax_used, 0.0f);
  }
}

Fp8Scaling::Scales Fp8Scaling::scales(int i) const {
  const Group& g = groups_[group_of(i)];
  const int64_t row = rows_[i];
  MPB_CHECK(g.scale.defined(), "{}: the fp8 scaling state is not allocated", names_[i]);
  return Scales{g.scale.slice(row, Shape{1}), g.scale_inv.slice(row, Shape{1}),
                g.history.slice(row, Shape{1})};
}

void Fp8Scaling::update(Backend& be) {
  for (Group& g : groups_)
    if (!g.tensors.empty())
      be.fp8_update_scaling(recipe_, g.format, g.history, g.scale, g.scale_inv, g.amax_used);
}

}  // namespace mpbench
