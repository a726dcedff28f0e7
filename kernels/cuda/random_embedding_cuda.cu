// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::random_fill(const TensorView& out, uint64_t seed, uint64_t offset, bool normal, double a, double b) { Backend::random_fill(out, seed, offset, normal, a, b); }
void CudaBackend::dropout(const TensorView& x, double p, uint64_t seed, uint64_t offset, const TensorView& y, const TensorView& mask) { Backend::dropout(x, p, seed, offset, y, mask); }
void CudaBackend::embedding(const TensorView& weight, const TensorView& idx, const TensorView& y) { Backend::embedding(weight, idx, y); }
void CudaBackend::embedding_backward(const TensorView& gy, const TensorView& idx, const TensorView& gw) { Backend::embedding_backward(gy, idx, gw); }

}  // namespace tandem
