#include "kernels/allocator.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/error.h"

namespace mpbench {

const char* mem_category_name(MemCategory c) {
  static const char* names[] = {"weights",     "master_weights", "gradients", "optimizer_state",
                                "activations", "workspace",      "data"};
  return names[static_cast<int>(c)];
}

std::string format_bytes(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (size_t(1) << 20)) return fmt::format("{:.1f} KiB", b / 1024);
  if (bytes < (size_t(1) << 30)) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (bytes < (size_t(1) << 40)) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  // A --memory-limit of 2^64 - 1 read 17179869184.00 GiB.
  if (bytes < (size_t(1) << 50)) return fmt::format("{:.2f} TiB", b / std::ldexp(1.0, 40));
  return fmt::format("{:.2f} PiB", b / std::ldexp(1.0, 50));
}

TrackingAllocator::~TrackingAllocator() {
  release_all();
}

Tensor TrackingAllocator::alloc(Shape shape, DType dtype, MemCategory cat) {
  Tensor t;
  t.shape = shape;
  t.dtype = dtype;
  t.device = backend_.device();
  size_t bytes = std::max<size_t>(t.bytes(), 1);
  if (limit_ && cat != MemCategory::Data && bytes > limit_ - std::min(limit_, current_training_)) {
    // The excess exactly: at the edge, the rounded figures can add up to the limit itself.
    throw Error(ErrorKind::OutOfMemory,
                fmt::format("over the memory limit of {}: {} asked for {} more with {} of "
                            "training memory in use ({} over)",
                            format_bytes(limit_), mem_category_name(cat), format_bytes(bytes),
                            format_bytes(current_training_),
                            format_bytes(current_training_ + bytes - limit_)),
                /*oom=*/true, current_training_ + bytes);
  }
  if (counting_) {
    t.data = reinterpret_cast<void*>(next_fake_);
    next_fake_ += (bytes + 255) / 256 * 256;
  } else {
    t.data = backend_.raw_alloc(bytes);
  }
  blocks_[t.data] = Block{bytes, cat};
  int i = static_cast<int>(cat);
  current_[i] += bytes;
  peak_[i] = std::max(peak_[i], current_[i]);
  current_total_ += bytes;
  peak_total_ = std::max(peak_total_, current_total_);
  if (cat != MemCategory::Data) {
    current_training_ += bytes;
    peak_training_ = std::max(peak_training_, current_training_);
  }
  return t;
}

void TrackingAllocator::release(const Tensor& t) {
  auto it = blocks_.find(t.data);
  MPB_CHECK(it != blocks_.end(), "release of a buffer this allocator does not own");
  current_[static_cast<int>(it->second.cat)] -= it->second.bytes;
  current_total_ -= it->second.bytes;
  if (it->second.cat != MemCategory::Data) current_training_ -= it->second.bytes;
  if (!counting_) backend_.raw_free(it->first);
  blocks_.erase(it);
}

ConvWorkspaceProvider TrackingAllocator::workspace_provider(size_t limit) {
  ConvWorkspaceProvider p;
  p.alloc = [this](size_t bytes) {
    return alloc(Shape{static_cast<int64_t>((bytes + 3) / 4)}, DType::F32, MemCategory::Workspace);
  };
  p.release = [this](const Tensor& t) { release(t); };
  p.limit = limit;
  return p;
}

void TrackingAllocator::release_all() {
  if (!counting_)
    for (auto& [p, b] : blocks_) backend_.raw_free(p);
  blocks_.clear();
  current_.fill(0);
  current_total_ = 0;
  current_training_ = 0;
}

}  // namespace mpbench
