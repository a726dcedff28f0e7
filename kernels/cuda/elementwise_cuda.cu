// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::copy_strided(const TensorView& src, const TensorView& out) { Backend::copy_strided(src, out); }
void CudaBackend::unary(UnaryOp op, const TensorView& x, const TensorView& y, const UnaryParams& p) { Backend::unary(op, x, y, p); }
void CudaBackend::unary_backward(UnaryOp op, const TensorView& x, const TensorView& y, const TensorView& gy, const TensorView& gx, const UnaryParams& p) { Backend::unary_backward(op, x, y, gy, gx, p); }
void CudaBackend::binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) { Backend::binary(op, a, b, out); }
void CudaBackend::where(const TensorView& cond, const TensorView& a, const TensorView& b, const TensorView& out) { Backend::where(cond, a, b, out); }

}  // namespace tandem
