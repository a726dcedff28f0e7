// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::reduce(ReduceOp op, const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out) { Backend::reduce(op, x, outer, r, inner, out); }
void CudaBackend::argmax(const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out, bool is_min) { Backend::argmax(x, outer, r, inner, out, is_min); }

}  // namespace tandem
