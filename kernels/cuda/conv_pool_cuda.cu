// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::conv2d(const TensorView& x, const TensorView& w, const TensorView* bias, const Conv2dParams& p, const TensorView& y) { Backend::conv2d(x, w, bias, p, y); }
void CudaBackend::conv2d_backward(const TensorView& x, const TensorView& w, const TensorView& gy, const Conv2dParams& p, const TensorView* gx, const TensorView* gw, const TensorView* gb) { Backend::conv2d_backward(x, w, gy, p, gx, gw, gb); }
void CudaBackend::max_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y, const TensorView& indices) { Backend::max_pool2d(x, p, y, indices); }
void CudaBackend::max_pool2d_backward(const TensorView& gy, const TensorView& indices, const TensorView& gx) { Backend::max_pool2d_backward(gy, indices, gx); }
void CudaBackend::avg_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y) { Backend::avg_pool2d(x, p, y); }
void CudaBackend::avg_pool2d_backward(const TensorView& gy, const Pool2dParams& p, const TensorView& gx) { Backend::avg_pool2d_backward(gy, p, gx); }

}  // namespace tandem
