// TensorView: what a kernel sees of a tensor. A raw data pointer (already offset),
// dtype, shape and strides in elements. Kernels know no autograd and no ownership.
#pragma once
#include <cstdint>
#include <vector>

#include "base/dtype.h"

namespace tandem {

using Shape = std::vector<int64_t>;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::Float32;
  Shape shape;
  Shape strides;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  int dim() const { return int(shape.size()); }
  bool is_contiguous() const {
    if (numel() == 0) return true;  // no element to misplace (PyTorch agrees)
    int64_t expected = 1;
    for (int d = dim() - 1; d >= 0; --d) {
      if (shape[d] != 1 && strides[d] != expected) return false;
      expected *= shape[d];
    }
    return true;
  }
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
};

}  // namespace tandem
