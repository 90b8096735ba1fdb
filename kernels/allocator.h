#pragma once
// One tracking allocator per run: every buffer of a model, its optimizer and its data comes from
// here, tagged with a category, so that peak memory can be reported per category and in total.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "kernels/backend.h"

namespace mpbench {

// 512 B, 12.3 KiB, 45.6 MiB, 1.23 GiB: how every byte count is shown.
std::string format_bytes(size_t bytes);

enum class MemCategory {
  Weights,        // the weights used in math (fp32, or the fp16/bf16 copies in AMP modes)
  MasterWeights,  // fp32 masters in AMP modes
  Gradients,
  OptimizerState,
  Activations,  // forward activations and their gradients
  Workspace,    // GEMM / convolution workspace
  Data,         // the harness's: the dataset on the device, the per-step records, loss scalars
  Count
};
constexpr int kMemCategoryCount = static_cast<int>(MemCategory::Count);
const char* mem_category_name(MemCategory c);  // "weights", "master_weights", ...

class TrackingAllocator {
 public:
  // Count: nothing is allocated, every tensor gets a distinct address that must never be read or
  // written, and the figures are what allocating would have taken (predicting a run's memory).
  enum class Mode { Allocate, Count };
  explicit TrackingAllocator(Backend& backend, Mode mode = Mode::Allocate)
      : backend_(backend), counting_(mode == Mode::Count) {}
  ~TrackingAllocator();
  TrackingAllocator(const TrackingAllocator&) = delete;
  TrackingAllocator& operator=(const TrackingAllocator&) = delete;

  // Contents are undefined. Throws Error with is_oom() when the device is full, or when the
  // request would take training memory (every category but Data) past the limit.
  Tensor alloc(Shape shape, DType dtype, MemCategory cat);
  // A cap on training memory (0: none), to answer "would this fit a 16 GB card?" on any machine.
  // The dataset copy is not counted: it is the harness's, which a real input pipeline streams.
  void set_limit(size_t bytes) { limit_ = bytes; }
  void release(const Tensor& t);
  void release_all();
  // A convolution workspace provider that allocates here under Workspace, so that the training
  // peak and the limit count it; the allocator must outlive the backend's use of it.
  ConvWorkspaceProvider workspace_provider(size_t limit = kDefaultConvWorkspaceLimit);

  size_t current(MemCategory c) const { return current_[static_cast<int>(c)]; }
  size_t peak(MemCategory c) const { return peak_[static_cast<int>(c)]; }
  size_t current_total() const { return current_total_; }
  size_t peak_total() const { return peak_total_; }
  // The peak of every category but Data: what training needs, without the harness's copy of
  // the dataset (which a real input pipeline would stream).
  size_t peak_training() const { return peak_training_; }
  Backend& backend() { return backend_; }
  bool counting() const { return counting_; }

 private:
  struct Block {
    size_t bytes;
    MemCategory cat;
  };
  Backend& backend_;
  std::unordered_map<void*, Block> blocks_;
  std::array<size_t, kMemCategoryCount> current_{}, peak_{};
  size_t current_total_ = 0, peak_total_ = 0;
  size_t current_training_ = 0, peak_training_ = 0;
  size_t limit_ = 0;
  bool counting_ = false;
  uintptr_t next_fake_ = 4096;  // counting: the next address handed out
};

}  // namespace mpbench
