// The convolution library seam of the CUDA backend (conv_pool_cuda.cu calls it; our own bias
// kernels stay around it). Two implementations with these signatures:
//   - conv_cudnn.cu: cuDNN on a GPU (or a DeviceError saying how to get cuDNN when built without);
//   - emulation/conv_library_emulated.cpp: the CPU backend on the same memory (emulation build).
// Tensors are contiguous NCHW / [OC,C,KH,KW] and non-empty; no bias (the caller adds it).
#pragma once
#include "kernels/backend.h"
#include "kernels/tensor_view.h"

namespace tandem::conv_library {

// Throws DTypeError for a dtype the library cannot convolve (DeviceError without a library).
void check_dtype(DType dtype);
// y = x (*) w: the cross-correlation of Conv2dParams p.
void forward(const TensorView& x, const TensorView& w, const Conv2dParams& p, const TensorView& y);
// gx = d(sum y*gy)/dx and gw = d/dw, each only when given (not nullptr).
void backward(const TensorView& x, const TensorView& w, const TensorView& gy, const Conv2dParams& p,
              const TensorView* gx, const TensorView* gw);

}  // namespace tandem::conv_library
