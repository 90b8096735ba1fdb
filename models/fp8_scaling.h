#pragma once
// The delayed-scaling state of a model's FP8 tensors (amp_fp8, kernels/fp8.h): per tensor an amax
// history, a scale, its inverse and the amax the last update scaled by, in flat fp32 buffers per
// fp8 dtype, so that one op per dtype updates them all after a step (as Transformer Engine does).
// Each tensor takes kSlot rows of those buffers, the first used, so that its scale and scale_inv
// sit 16 bytes apart: cuBLASLt's FP8 GEMMs read scale_inv through a pointer, and on the H200
// (cuBLAS 13.1) every training GEMM whose scales were views 4 bytes apart was refused
// (CUBLAS_STATUS_NOT_SUPPORTED) where the same GEMM with separately allocated scales ran.
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"

namespace mpbench {

class Fp8Scaling {
 public:
  // What a cast and a GEMM of tensor i use: the scale to cast with, the inverse the GEMM reads the
  // tensor back with, and the newest history slot the cast records its amax into (fp32 scalars).
  struct Scales {
    Tensor scale, scale_inv, amax;
  };
  // One of the dtype's flat buffers: the tensors' scales and the amaxes their last update used.
  // history is (amax_history_len, rows), slot major (Backend::fp8_update_scaling).
  struct Group {
    DType format = DType::F8E4M3;
    std::vector<int> tensors;  // indices, in buffer order
    Tensor history, scale, scale_inv, amax_used;
    // History slot 0: every tensor's amax of the step so far, one contiguous row.
    Tensor newest() const { return history.slice(0, Shape{history.shape[1]}); }
  };
  static Group group_of_format(DType format) {
    Group g;
    g.format = format;
    return g;
  }

  // Declaration phase (with the parameters): returns the tensor's index. name: "fc1.x".
  int declare(const std::string& name, DType format);
  // Every history 0 and every scale 1, as at the start of Transformer Engine's training. Nothing
  // is allocated when nothing was declared.
  void allocate(TrackingAllocator& alloc, Backend& be, const DelayedScalingRecipe& r);

  bool empty() const { return names_.empty(); }
  int size() const { return static_cast<int>(names_.size()); }
  const std::string& name(int i) const { return names_[i]; }
  DType format(int i) const { return formats_[i]; }
  Scales scales(int i) const;
  static constexpr int kSlot = 4;  // buffer rows per tensor: 16 bytes of fp32
  // Where tensor i sits in group(i)'s buffers (row_of: a multiple of kSlot).
  int group_of(int i) const { return formats_[i] == DType::F8E4M3 ? 0 : 1; }
  int row_of(int i) const { return rows_[i]; }
  const std::vector<Group>& groups() const { return groups_; }

  // After the optimizer step: each group's update (Backend::fp8_update_scaling).
  void update(Backend& be);

 private:
  DelayedScalingRecipe recipe_;
  std::vector<std::string> names_;
  std::vector<DType> formats_;
  std::vector<int> rows_;
  std::vector<Group> groups_ = {group_of_format(DType::F8E4M3), group_of_format(DType::F8E5M2)};
};

}  // namespace mpbench
