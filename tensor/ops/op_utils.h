// Shared checks and helpers for op front ends (internal to tensor/ops).
#pragma once
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/node.h"
#include "tensor/ops/ops.h"

namespace tandem::ops {

inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

// Throws DeviceError / DTypeError when the operands disagree.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
// For an optional companion of x (weight, bias, running statistics): when it is defined, it
// must be on x's device with x's dtype, since the kernels read it through x's element type.
void check_companion(const char* op, const Tensor& x, const Tensor& companion, const char* what);
void check_float(const char* op, const Tensor& x);             // float32 or float64 (and halfs on CUDA)
void check_index_dtype(const char* op, const Tensor& t);       // int64 (class indices, embedding ids)
void check_dim(const char* op, const Tensor& x, int expected, const char* layout);

// PyTorch broadcasting of two shapes; ShapeError naming the op when incompatible.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// Contiguous tensor without autograd history (kernel input).
inline Tensor raw(const Tensor& t) { return t.detach().contiguous(); }

// A gradient only for inputs that want one.
inline bool wants_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

// x with `dim` moved to the last position, contiguous (softmax over any dim).
Tensor move_dim_last(const Tensor& x, int dim);
Tensor move_last_to_dim(const Tensor& x, int dim);

}  // namespace tandem::ops
