#pragma once
// Buffers that the layers of one model use one at a time: what a layer holds only while it runs,
// or the gradients its backward hands to the next. Backward runs one layer at a time, so one set
// serves them all, as PyTorch's caching allocator hands a layer's freed memory to the next.
// Each slot is sized by the largest need registered while the layers are built (bytes per
// sample, times the batch; or bytes in all); the first layer to allocate with an allocator and a
// batch allocates every slot, and each user views a slot in its own shape and dtype.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/tensor.h"

namespace mpbench {

class SharedScratch {
 public:
  explicit SharedScratch(int slots) : slots_(static_cast<size_t>(slots)) {}

  // A slot holds per-sample needs or whole ones, never both, and one memory category.
  void need_per_sample(int slot, int64_t bytes, MemCategory cat = MemCategory::Activations);
  void need_in_all(int slot, int64_t bytes, MemCategory cat);
  void allocate(TrackingAllocator& alloc, int64_t batch);

  // The slot's memory as `shape` of `dt` (which must fit in it).
  Tensor view(int slot, Shape shape, DType dt) const;
  // All of the slot as a flat tensor of `dt`.
  Tensor whole(int slot, DType dt) const;

 private:
  struct Slot {
    int64_t bytes = 0;
    bool per_sample = false;
    MemCategory cat = MemCategory::Activations;
    Tensor buf;  // untyped: fp32 words
  };
  void need(int slot, int64_t bytes, bool per_sample, MemCategory cat);
  const Slot& at(int slot) const;

  std::vector<Slot> slots_;
  const TrackingAllocator* owner_ = nullptr;
  int64_t batch_ = 0;
};

// The same for buffers whose size each user learns only as it allocates (its batch's rows): a
// user's reserve() grows a slot to the largest asked so far, releasing the smaller buffer first,
// and users take their view when they run, never across another user's reserve(). A reserve
// with another allocator than the last (a new run, a prediction) starts every slot afresh.
class GrowingScratch {
 public:
  explicit GrowingScratch(int slots) : slots_(static_cast<size_t>(slots)) {}
  void reserve(TrackingAllocator& alloc, int slot, int64_t bytes,
               MemCategory cat = MemCategory::Activations);
  // The slot's memory as `shape` of `dt` (which must fit in it).
  Tensor view(int slot, Shape shape, DType dt) const;

 private:
  std::vector<Tensor> slots_;  // untyped: fp32 words
  const TrackingAllocator* owner_ = nullptr;
};

}  // namespace mpbench
