// The narrow-C path of sgemm (sgemm_dot_avx2.cpp, sgemm_dot_avx512.cpp): C[m,n] = alpha * A B^T
// + beta * C, plus bias[j] on every row when not null, with A [m,k] (row stride lda) and B [n,k]
// (row stride ldb) both contiguous along k. sgemm takes it for n <= kSgemmDotMaxN when A is not
// transposed and B is, with the active instruction set's version; beta == 0: C is only written.
#pragma once
#include <cstdint>

namespace tandem::cpu {

constexpr int64_t kSgemmDotMaxN = 16;

// One block of the dot path: rows [0, R) of A (row stride lda) against rows [0, C) of B (row
// stride ldb) over depth k, C[r][j] = alpha * dot + beta * C[r][j] (+ bias[j]). R and C are the
// block's, fixed by the function.
using SgemmDotBlockFn = void (*)(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, float alpha,
                                 float beta, float* c, int64_t ldc, const float* bias);

// The dot path by blocks, shared by the ISAs: C's rows two at a time (two_rows[cols], and
// one_row[cols] for an odd last row), its columns in blocks of at most max_cols, as even as possible
// (16 columns at max_cols 14: 8 + 8, not 14 + 2).
inline void sgemm_dot_by_blocks(const SgemmDotBlockFn* two_rows, const SgemmDotBlockFn* one_row, int max_cols,
                                int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  const int64_t nblocks = (n + max_cols - 1) / max_cols;
  for (int64_t i = 0; i < m; i += 2) {
    const SgemmDotBlockFn* blocks = m - i >= 2 ? two_rows : one_row;
    for (int64_t bj = 0; bj < nblocks; ++bj) {
      const int64_t j0 = n * bj / nblocks, j1 = n * (bj + 1) / nblocks;
      blocks[j1 - j0](a + i * lda, lda, b + j0 * ldb, ldb, k, alpha, beta, c + i * ldc + j0, ldc,
                      bias ? bias + j0 : nullptr);
    }
  }
}

// Stores one finished dot product: alpha * dot + beta * *out (+ *bias), *out not read when beta == 0.
inline void store_dot(float dot, float alpha, float beta, float* out, const float* bias) {
  float v = alpha * dot;
  if (beta != 0.0f) v += beta * *out;
  if (bias) v += *bias;
  *out = v;
}

#if defined(__x86_64__)
void sgemm_dot_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc, const float* bias);
void sgemm_dot_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc, const float* bias);
#endif

}  // namespace tandem::cpu
