#pragma once
// A tensor is a non-owning view: pointer, shape (row-major, innermost last), dtype, device.
// Buffers are owned by the TrackingAllocator; views into them are cheap to copy.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/dtype.h"
#include "kernels/error.h"

namespace mpbench {

enum class Device { CPU, CUDA };

struct Shape {
  static constexpr int kMaxRank = 5;
  std::array<int64_t, kMaxRank> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    MPB_CHECK(d.size() <= static_cast<size_t>(kMaxRank), "rank {} too large", d.size());
    for (int64_t v : d) dims[rank++] = v;
  }
  int64_t operator[](int i) const { return dims[i < 0 ? rank + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "(128, 784)"
};

struct Tensor {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::F32;
  Device device = Device::CPU;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool defined() const { return data != nullptr; }

  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  // Rows x cols view of the trailing dimension, e.g. (N, T, C) -> (N*T, C).
  int64_t cols() const { return shape.rank ? shape[-1] : 1; }
  int64_t rows() const {  // the leading dimensions' product (so also where the last is 0)
    int64_t r = 1;
    for (int i = 0; i + 1 < shape.rank; ++i) r *= shape[i];
    return r;
  }

  // A view of the same memory with another shape of the same element count.
  Tensor reshaped(Shape s) const;
  // Elements [offset, offset + s.numel()) of a flat buffer, viewed with shape s.
  Tensor slice(int64_t offset, Shape s) const;
  // The buffer's first bytes as shape s of dtype dt (memory one owner lends to users of several
  // dtypes); throws when they do not fit.
  Tensor viewed_as(Shape s, DType dt) const;
};

}  // namespace mpbench
