// One GEMM on the calling thread, for kernels that run many small products inside their own
// thread-pool tasks (attention's tiles, convolution's images):
//   C[m,n] (row stride ldc) = alpha * op(A) op(B) + beta * C
// A is [m,k] with row stride lda ([k,m] when trans_a), B is [k,n] with row stride ldb ([n,k] when
// trans_b); beta == 0: C is only written. float32 runs the packed GEMM (kernels/cpu/gemm/),
// float64 Eigen. Both are defined once, in gemm_cpu.cpp, so Eigen's product code is compiled in
// one translation unit rather than in every kernel that multiplies matrices.
#pragma once
#include <cstdint>

namespace tandem::cpu {

void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace tandem::cpu
