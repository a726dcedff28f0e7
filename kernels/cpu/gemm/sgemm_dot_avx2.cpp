// C = alpha * A B^T + beta * C (+ bias) for a narrow C (n <= kSgemmDotMaxN columns) with A
// [m,k] and B [n,k] both running along k: each C element is a dot product of two contiguous
// rows. The linear layer into 10 classes is this shape (256 x 10 x 1024): there, packing A costs
// more than the whole product and a 14 x 32 tile would compute 32 columns for 10, so this path
// skips packing and runs up to 8 dot products at a time per row of A (one load of A, then one
// load of B and one FMA per column; a block of exactly the remaining columns, never padding).
#include "kernels/cpu/gemm/sgemm_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tandem::cpu {

namespace {

__attribute__((target("avx2,fma"), always_inline)) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Columns [j0, j0 + C) of row i: C dot products sharing each load of A's row (C accumulators).
template <int C>
__attribute__((target("avx2,fma"))) void dot_block(const float* x, const float* b, int64_t ldb, int64_t k, float alpha,
                                                   float beta, float* out, const float* bias) {
  __m256 acc[C];
  for (int jj = 0; jj < C; ++jj) acc[jj] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    const __m256 xv = _mm256_loadu_ps(x + p);
    for (int jj = 0; jj < C; ++jj) acc[jj] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b + jj * ldb + p), acc[jj]);
  }
  for (int jj = 0; jj < C; ++jj) {
    float dot = hsum(acc[jj]);
    for (int64_t q = p; q < k; ++q) dot += x[q] * b[jj * ldb + q];
    float v = alpha * dot;
    if (beta != 0.0f) v += beta * out[jj];
    if (bias) v += bias[jj];
    out[jj] = v;
  }
}

using DotBlockFn = void (*)(const float*, const float*, int64_t, int64_t, float, float, float*, const float*);
constexpr DotBlockFn kDotBlocks[9] = {nullptr,       dot_block<1>, dot_block<2>, dot_block<3>, dot_block<4>,
                                      dot_block<5>, dot_block<6>, dot_block<7>, dot_block<8>};

}  // namespace

void sgemm_dot_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j0 = 0; j0 < n; j0 += 8) {
      const int cols = int(n - j0 < 8 ? n - j0 : 8);
      kDotBlocks[cols](a + i * lda, b + j0 * ldb, ldb, k, alpha, beta, c + i * ldc + j0, bias ? bias + j0 : nullptr);
    }
}

}  // namespace tandem::cpu
#endif
