// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta, void* c, int64_t stride_c, int64_t batch) { Backend::gemm(dtype, trans_a, trans_b, m, n, k, alpha, a, stride_a, b, stride_b, beta, c, stride_c, batch); }

}  // namespace tandem
