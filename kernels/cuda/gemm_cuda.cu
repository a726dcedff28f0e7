// Backend::gemm on CUDA through cuBLASLt.
//
// Tandem's GEMM is row-major: C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] with A [m,k]
// ([k,m] when trans_a), B [k,n] ([n,k] when trans_b), C [m,n]. cuBLASLt is column-major. A
// row-major [r,c] matrix is the same bytes as a column-major [c,r] matrix, so we hand cuBLASLt
// the column-major problem C^T [n,m] = op(B)^T op(A)^T: its "A" operand is our B and its "B"
// operand is our A, each with its own transpose flag unchanged. Nothing is copied or transposed.
//
// The products themselves are one cuBLASLt call each (gemm_lt.cuh, gemm_lt.cu: plans, precision,
// epilogues); this file handles the empty sum (k = 0), overlapping outputs and batch chunks, and
// the dtype mapping both the GPU and the emulation build use.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/gemm_lt.cuh"
#include "kernels/cuda/kernel_utils.cuh"

namespace tandem {

using gemm_lt::DTypeInfo;

namespace {

// C[i] = beta * C[i] (0 when beta == 0, whatever C held) over `count` matrices of mn elements
// `stride` apart: the k == 0 case, an empty sum.
template <typename T>
__global__ void scale_matrices_kernel(T* c, int64_t mn, int64_t stride, int64_t count, double beta) {
  const int64_t total = mn * count;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    T* e = c + (i / mn) * stride + i % mn;
    using A = cuda::acc_t<T>;
    *e = beta == 0 ? cuda::from_acc<T>(A(0)) : cuda::from_acc<T>(A(beta) * cuda::to_acc(*e));
  }
}

}  // namespace

// Here rather than in gemm_lt.cu: the emulation build, which replaces gemm_lt.cu, uses it too.
DTypeInfo gemm_lt::dtype_info(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return {CUDA_R_32F, CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, 4};
    case DType::Float64: return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, 8};
    case DType::Float16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2};
    case DType::BFloat16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2};
    default: break;
  }
  throw DTypeError(std::string("gemm on CUDA supports float32, float64, float16 and bfloat16, got ") + dtype_name(dtype));
}

using gemm_lt::dtype_info;
using gemm_lt::lt_matmul;

void CudaBackend::gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                       const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta, void* c,
                       int64_t stride_c, int64_t batch) {
  const DTypeInfo info = dtype_info(dtype);
  if (m == 0 || n == 0 || batch <= 0) return;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    throw ShapeError("gemm on CUDA: m, n and k must each be below 2^31, got m=" + std::to_string(m) +
                     " n=" + std::to_string(n) + " k=" + std::to_string(k));
  // Batches whose outputs overlap (stride_c 0 with several batches) run one after another, as
  // the CPU reference does: each reads the C the previous one wrote.
  const bool overlapping_c = batch > 1 && stride_c < m * n;
  if (k == 0) {  // empty sum: C = beta * C
    cuda::dispatch_float(dtype, "gemm", [&](auto tag) {
      using T = TANDEM_CUDA_TYPE(tag);
      const int64_t launches = overlapping_c ? batch : 1, per_launch = overlapping_c ? 1 : batch;
      for (int64_t i = 0; i < launches; ++i) {
        cuda::launch<scale_matrices_kernel<T>>(cuda::grid_for(m * n * per_launch), cuda::kElementwiseThreads, 0,
                                               cuda::current_stream(), static_cast<T*>(c) + i * stride_c, m * n,
                                               stride_c, per_launch, beta);
        TANDEM_CUDA_CHECK_LAUNCH("gemm (k = 0)");
      }
    });
    return;
  }
  const auto elem = [&](const void* p, int64_t offset) {
    return static_cast<const char*>(p) + offset * int64_t(info.bytes);
  };
  if (overlapping_c) {
    for (int64_t i = 0; i < batch; ++i)
      lt_matmul(dtype, info, trans_a, trans_b, m, n, k, alpha, elem(a, i * stride_a), 0, elem(b, i * stride_b), 0,
                beta, const_cast<char*>(elem(c, i * stride_c)), 0, 1);
    return;
  }
  // cuBLASLt's batch count is int32: very large batches go in chunks.
  for (int64_t start = 0; start < batch; start += INT32_MAX) {
    const int64_t count = std::min<int64_t>(INT32_MAX, batch - start);
    lt_matmul(dtype, info, trans_a, trans_b, m, n, k, alpha, elem(a, start * stride_a), stride_a,
              elem(b, start * stride_b), stride_b, beta, const_cast<char*>(elem(c, start * stride_c)), stride_c, count);
  }
}

}  // namespace tandem
