// The narrow-C path of sgemm (sgemm_dot_avx2.cpp, sgemm_dot_avx512.cpp): C[m,n] = alpha * A B^T
// + beta * C, plus bias[j] on every row when not null, with A [m,k] (row stride lda) and B [n,k]
// (row stride ldb) both contiguous along k. sgemm takes it for n <= kSgemmDotMaxN when A is not
// transposed and B is, with the active instruction set's version; beta == 0: C is only written.
#pragma once
#include <cstdint>

namespace tandem::cpu {

constexpr int64_t kSgemmDotMaxN = 16;

// Above this many multiply-adds (m*n*k) the dot path splits its rows over the threads: an eighth
// of the packed path's threshold, because it has no packing to share and its rows are independent.
// The 10-class head at 256 rows (2.6 M) went from 155 GFLOP/s on one thread to 262-277 on two
// (bench_gemm, OMP_NUM_THREADS=2; docs/PERFORMANCE.md).
constexpr int64_t kSgemmDotParallelWork = int64_t(1) << 21;

#if defined(__x86_64__)
void sgemm_dot_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc, const float* bias);
void sgemm_dot_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc, const float* bias);
#endif

}  // namespace tandem::cpu
