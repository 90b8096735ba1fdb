#include "models/shared_scratch.h"

#include <algorithm>

#include "kernels/error.h"

namespace mpbench {

void SharedScratch::need(int slot, int64_t bytes, bool per_sample, MemCategory cat) {
  MPB_CHECK(slot >= 0 && static_cast<size_t>(slot) < slots_.size() && bytes >= 0,
            "shared scratch: slot {} of {}, {} bytes", slot, slots_.size(), bytes);
  MPB_CHECK(owner_ == nullptr, "shared scratch: a need registered after the allocation");
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.bytes > 0)
    MPB_CHECK(s.per_sample == per_sample && s.cat == cat,
              "shared scratch: slot {} asked for per sample and in all, or in two categories",
              slot);
  s.per_sample = per_sample;
  s.cat = cat;
  s.bytes = std::max(s.bytes, bytes);
}

void SharedScratch::need_per_sample(int slot, int64_t bytes, MemCategory cat) {
  need(slot, bytes, true, cat);
}

void SharedScratch::need_in_all(int slot, int64_t bytes, MemCategory cat) {
  need(slot, bytes, false, cat);
}

void SharedScratch::allocate(TrackingAllocator& alloc, int64_t batch) {
  if (owner_ == &alloc && batch_ == batch) return;
  // Another batch's buffers go back to their allocator first; another allocator's are its own to
  // release (release_all, or its end).
  const bool same = owner_ == &alloc;
  owner_ = &alloc;
  batch_ = -1;  // until every slot is there: a refusal below leaves the next call to start afresh
  for (Slot& s : slots_) {
    if (same && s.buf.defined()) alloc.release(s.buf);
    s.buf = Tensor{};
    if (s.bytes == 0) continue;
    const int64_t bytes = s.per_sample ? s.bytes * batch : s.bytes;
    s.buf = alloc.alloc(Shape{(bytes + 3) / 4}, DType::F32, s.cat);
  }
  batch_ = batch;
}

void GrowingScratch::reserve(TrackingAllocator& alloc, int slot, int64_t bytes, MemCategory cat) {
  MPB_CHECK(slot >= 0 && static_cast<size_t>(slot) < slots_.size() && bytes >= 0,
            "growing scratch: slot {} of {}, {} bytes", slot, slots_.size(), bytes);
  if (owner_ != &alloc) {
    // The last allocator's buffers are its own to release (release_all, or its end).
    for (Tensor& t : slots_) t = Tensor{};
    owner_ = &alloc;
  }
  Tensor& buf = slots_[static_cast<size_t>(slot)];
  if (buf.defined() && static_cast<int64_t>(buf.bytes()) >= bytes) return;
  if (buf.defined()) {
    alloc.release(buf);
    buf = Tensor{};  // a refused allocation below must not leave a released buffer here
  }
  buf = alloc.alloc(Shape{(bytes + 3) / 4}, DType::F32, cat);
}

Tensor GrowingScratch::view(int slot, Shape shape, DType dt) const {
  MPB_CHECK(slot >= 0 && static_cast<size_t>(slot) < slots_.size() &&
                slots_[static_cast<size_t>(slot)].defined(),
            "growing scratch: slot {} was not reserved", slot);
  return slots_[static_cast<size_t>(slot)].viewed_as(shape, dt);
}

const SharedScratch::Slot& SharedScratch::at(int slot) const {
  MPB_CHECK(slot >= 0 && static_cast<size_t>(slot) < slots_.size() &&
                slots_[static_cast<size_t>(slot)].buf.defined(),
            "shared scratch: slot {} was not allocated", slot);
  return slots_[static_cast<size_t>(slot)];
}

Tensor SharedScratch::view(int slot, Shape shape, DType dt) const {
  return at(slot).buf.viewed_as(shape, dt);
}

Tensor SharedScratch::whole(int slot, DType dt) const {
  const Tensor& b = at(slot).buf;
  return b.viewed_as(Shape{static_cast<int64_t>(b.bytes() / dtype_size(dt))}, dt);
}

}  // namespace mpbench
